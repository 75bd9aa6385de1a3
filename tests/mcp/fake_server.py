"""An outside MCP server written with the official Python SDK (``mcp`` on PyPI),
used by the MCP tests over stdio (``python3 fake_server.py``), over Streamable
HTTP (``python3 fake_server.py http PORT``) and over the legacy HTTP+SSE transport
(``python3 fake_server.py sse PORT``: the stream at ``/sse``, the messages POSTed to
``/messages/``; with ``MCP_TEST_REQUESTS=<file>`` each HTTP request's method, path
and ``X-Test`` header are appended to that file as a JSON line).

Tools: ``echo``, ``env_var`` (reads the server's environment), ``slow`` (sleeps),
``big`` (a long text), ``noisy`` (floods standard error), ``fail`` (an error result), ``crash`` (the process exits),
``grow`` (adds the tool ``extra_tool`` and sends ``notifications/tools/list_changed``),
``get_weather`` (a name a plugin also registers).

With ``MCP_TEST_STARTS=<file>`` each start appends a line to that file, and a start
after the first waits ``MCP_TEST_RESTART_DELAY`` seconds before serving (so a test
can see the tools withdrawn while the server is down). With
``MCP_TEST_HELPER_PIDS=<file>`` it starts a helper process (``sleep``) and writes its
pid there.
"""

import asyncio
import os
import sys
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

starts_file = os.environ.get("MCP_TEST_STARTS")
if starts_file:
    with open(starts_file, "a") as f:
        f.write(f"{os.getpid()}\n")
    with open(starts_file) as f:
        n = len(f.read().splitlines())
    if n > 1:
        time.sleep(float(os.environ.get("MCP_TEST_RESTART_DELAY", "0")))

helper_file = os.environ.get("MCP_TEST_HELPER_PIDS")
if helper_file:
    # A helper process of its own (like node under npx): it reads no stdin, so
    # only the end of the process group ends it.
    import subprocess
    helper = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(helper_file, "a") as f:
        f.write(f"{helper.pid}\n")

if os.environ.get("MCP_TEST_GARBAGE"):
    # Speaks no protocol at all: noise on stdout, then stays silent.
    sys.stdout.write("this is not json-rpc\n" * 5)
    sys.stdout.flush()
    time.sleep(3600)

server = MCPServer("fake")


@server.tool()
def echo(text: str) -> str:
    """Repeat the text."""
    return f"echo: {text}"


@server.tool()
def env_var(name: str) -> str:
    """The value of an environment variable of this server, or <unset>."""
    return os.environ.get(name, "<unset>")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "finally"


@server.tool()
def big(n: int) -> str:
    """A text of n characters."""
    return "x" * n


@server.tool()
def noisy(n: int) -> str:
    """Write n bytes to standard error (a flood), then answer."""
    chunk = "e" * 1023 + "\n"
    for _ in range(n // 1024):
        sys.stderr.write(chunk)
    sys.stderr.write("END-OF-NOISE\n")
    sys.stderr.flush()
    return "noisy done"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ToolError("the fake tool failed on purpose")


@server.tool()
def crash() -> str:
    """The server process exits at once."""
    os._exit(3)


@server.tool()
def get_weather(city: str) -> str:
    """Weather (its name clashes with a plugin's tool)."""
    return f"MCP weather for {city}"


def extra_tool() -> str:
    """A tool that appears after grow."""
    return "extra!"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add extra_tool and tell the client the list changed."""
    server.add_tool(extra_tool)
    await ctx.session.send_tool_list_changed()
    return "grown"


def run_sse(port):
    import json

    import uvicorn

    app = server.sse_app(host="127.0.0.1")
    requests_file = os.environ.get("MCP_TEST_REQUESTS")

    async def logged(scope, receive, send):
        if scope["type"] == "http" and requests_file:
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            with open(requests_file, "a") as f:
                f.write(json.dumps({"method": scope["method"], "path": scope["path"],
                                    "x_test": headers.get("x-test")}) + "\n")
        await app(scope, receive, send)

    uvicorn.run(logged, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif len(sys.argv) > 2 and sys.argv[1] == "sse":
        run_sse(int(sys.argv[2]))
    else:
        server.run()
