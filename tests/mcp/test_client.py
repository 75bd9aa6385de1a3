"""companiond as an MCP client: outside servers written with the official Python
SDK (fake_server.py) over stdio and Streamable HTTP feed the tool registry, and
the model calls their tools during chat turns (docs/mcp.md)."""

import json
import os
import signal
import socket
import subprocess
import time

import pytest
import requests

from conftest import (FAKE_SERVER, PYTHON, Companiond, call_tool, free_port, of_type,
                      stdio_server)


@pytest.fixture(scope="module")
def cd(tmp_root, fake_llm):
    c = Companiond(tmp_root / "main", env={"COMPANIOND_TEST_SECRET": "topsecret"})
    c.configure_llm(fake_llm.base)
    yield c
    c.stop()


def test_stdio_tools_listed_with_their_source(cd):
    cd.add_server("fake", stdio_server(env={"GIVEN": "yes"}))
    s = cd.wait_running("fake")
    assert s["transport"] == "stdio" and s["pid"]
    assert "echo" in s["tools"] and "crash" in s["tools"]
    tools = cd.tools()
    assert tools["echo"]["source"] == "mcp:fake"
    assert tools["echo"]["description"] == "Repeat the text."
    # the file holds the server in the mcpServers shape
    f = json.loads((cd.data / "config" / "mcp_servers.json").read_text())
    assert f["mcpServers"]["fake"]["command"] == PYTHON
    # listings mask env values
    assert s["config"]["env"] == {"GIVEN": "********"}


def test_chat_turn_calls_an_mcp_tool(cd, fake_llm):
    frames, got = call_tool(cd, fake_llm, "echo", {"text": "hello there"})
    calls, results = of_type(frames, "tool_call"), of_type(frames, "tool_result")
    assert [c["name"] for c in calls] == ["echo"]
    assert results[0]["name"] == "echo" and results[0]["is_error"] is False
    assert results[0]["call_id"] == calls[0]["call_id"]
    assert got == "echo: hello there"
    spoken = "".join(f.get("text", "") for f in of_type(frames, "assistant_delta"))
    assert "RESULT: echo: hello there" in spoken
    # the tools were offered to the model as function tools
    offered = [t["function"]["name"] for t in fake_llm.requests[-1].get("tools", [])]
    assert "echo" in offered and "grow" in offered


def test_environment_is_explicit(cd, fake_llm):
    _, got = call_tool(cd, fake_llm, "env_var", {"name": "GIVEN"})
    assert got == "yes"
    _, got = call_tool(cd, fake_llm, "env_var", {"name": "COMPANIOND_TEST_SECRET"})
    assert got == "<unset>"
    _, got = call_tool(cd, fake_llm, "env_var", {"name": "PATH"})
    assert got not in (None, "<unset>")


def test_tool_error_reaches_the_model(cd, fake_llm):
    frames, got = call_tool(cd, fake_llm, "fail", {})
    assert of_type(frames, "tool_result")[0]["is_error"] is True
    assert got.startswith("tool error:") and "on purpose" in got


def test_stderr_flood_is_capped(cd, fake_llm):
    frames, got = call_tool(cd, fake_llm, "noisy", {"n": 5_000_000})
    assert got == "noisy done"
    s = cd.wait_server("fake", lambda s: "END-OF-NOISE" in s["stderr_tail"], timeout=10)
    assert len(s["stderr_tail"].encode()) <= 2048
    assert s["state"] == "running"


def test_bad_arguments_are_a_tool_error(cd, fake_llm):
    frames, got = call_tool(cd, fake_llm, "echo", [1, 2])
    assert of_type(frames, "tool_result")[0]["is_error"] is True
    assert "JSON object" in got


def test_huge_result_is_cut_at_the_cap(cd, fake_llm):
    cd.add_server("capped", stdio_server(maxResultChars=100, allowedTools=["big"]))
    s = cd.wait_running("capped")
    assert s["tools"] == ["big"]  # allowlist
    assert "echo" in s["hidden_tools"]
    # "big" is offered by both servers: the first holds the name
    assert any(c.startswith("big (held by mcp:fake)") for c in s["clashes"])
    cd.send("DELETE", "/api/mcp/servers/fake")
    # re-publish: restart capped so it takes the name now that fake is gone
    assert cd.send("POST", "/api/mcp/servers/capped/disable").status_code == 200
    assert cd.send("POST", "/api/mcp/servers/capped/enable").status_code == 200
    cd.wait_tools(lambda t: t.get("big", {}).get("source") == "mcp:capped")
    frames, got = call_tool(cd, fake_llm, "big", {"n": 50000})
    assert of_type(frames, "tool_result")[0]["is_error"] is False
    assert got.startswith("x" * 100) and "result cut: 49900 more characters" in got
    assert len(got) < 300
    cd.send("DELETE", "/api/mcp/servers/capped")
    cd.add_server("fake", stdio_server(env={"GIVEN": "yes"}))
    cd.wait_running("fake")


def test_hanging_call_is_cut_by_its_timeout(cd, fake_llm):
    cd.add_server("sleepy", stdio_server(timeoutSeconds=1, allowedTools=["slow"]))
    cd.wait_running("sleepy")
    cd.wait_tools(lambda t: t.get("slow", {}).get("source") in ("mcp:sleepy", "mcp:fake"))
    # fake also has slow; make sure the sleepy one holds the name
    cd.send("POST", "/api/mcp/servers/fake/disable")
    cd.send("POST", "/api/mcp/servers/sleepy/disable")
    cd.send("POST", "/api/mcp/servers/sleepy/enable")
    cd.wait_tools(lambda t: t.get("slow", {}).get("source") == "mcp:sleepy")
    t0 = time.time()
    frames, got = call_tool(cd, fake_llm, "slow", {"seconds": 30})
    assert time.time() - t0 < 15
    assert of_type(frames, "tool_result")[0]["is_error"] is True
    assert "timed out after 1 s" in got
    s = cd.server("sleepy")
    assert "timed out" in (s["last_error"] or "")
    assert s["state"] == "running"  # the server itself is fine
    cd.send("DELETE", "/api/mcp/servers/sleepy")
    cd.send("POST", "/api/mcp/servers/fake/enable")
    cd.wait_running("fake")


def test_list_changed_adds_the_new_tool(cd, fake_llm):
    assert "extra_tool" not in cd.tools()
    frames, got = call_tool(cd, fake_llm, "grow", {})
    assert got == "grown"
    tools = cd.wait_tools(lambda t: "extra_tool" in t)
    assert tools["extra_tool"]["source"] == "mcp:fake"
    _, got = call_tool(cd, fake_llm, "extra_tool", {})
    assert got == "extra!"


def test_crashed_server_is_withdrawn_then_restarted(cd, fake_llm, tmp_root):
    starts = tmp_root / "starts.txt"
    cd.add_server("phoenix", stdio_server(
        env={"MCP_TEST_STARTS": str(starts), "MCP_TEST_RESTART_DELAY": "3"},
        allowedTools=["crash", "env_var"], characters=["Companion"]))
    cd.send("POST", "/api/mcp/servers/fake/disable")
    s = cd.wait_running("phoenix")
    first_pid = s["pid"]
    cd.wait_tools(lambda t: t.get("crash", {}).get("source") == "mcp:phoenix")
    frames, got = call_tool(cd, fake_llm, "crash", {})
    assert of_type(frames, "tool_result")[0]["is_error"] is True
    assert got.startswith("tool error:")
    # while it is down, its tools are withdrawn and the state says so
    cd.wait_tools(lambda t: "crash" not in t and "env_var" not in t, timeout=10)
    down = cd.server("phoenix")
    assert down["state"] in ("restarting", "starting"), down
    assert down["last_error"]
    # and it comes back (after the 1 s backoff and its 3 s slow start)
    back = cd.wait_running("phoenix", timeout=30)
    assert back["restarts"] >= 1 and back["pid"] != first_pid
    cd.wait_tools(lambda t: t.get("crash", {}).get("source") == "mcp:phoenix")
    assert len(starts.read_text().splitlines()) >= 2
    # a chat turn while a tool is missing is not broken either
    frames, got = call_tool(cd, fake_llm, "env_var", {"name": "MCP_TEST_RESTART_DELAY"})
    assert got == "3"
    cd.send("DELETE", "/api/mcp/servers/phoenix")
    cd.send("POST", "/api/mcp/servers/fake/enable")
    cd.wait_running("fake")


def test_name_clash_with_a_plugin_tool(cd, fake_llm):
    r = requests.post(cd.url + "/api/tools/register", json={
        "name": "get_weather", "callback_url": "http://127.0.0.1:9/weather",
        "source": "plugin:weather"}, timeout=10)
    assert r.status_code == 200 and r.json()["ok"], r.text
    cd.send("POST", "/api/mcp/servers/fake/disable")
    cd.send("POST", "/api/mcp/servers/fake/enable")
    s = cd.wait_running("fake")
    assert any(c.startswith("get_weather (held by plugin:weather)") for c in s["clashes"]), s
    assert "get_weather" in (s["last_error"] or "")
    tools = cd.tools()
    assert tools["get_weather"]["source"] == "plugin:weather"
    assert tools["echo"]["source"] == "mcp:fake"
    requests.post(cd.url + "/api/tools/unregister", json={"name": "get_weather"}, timeout=10)


def test_servers_that_do_not_work(cd, fake_llm):
    cd.add_server("missing", {"command": "/nonexistent/mcp-server"})
    s = cd.wait_server("missing", lambda s: s["last_error"], what="an error")
    assert "cannot start" in s["last_error"]
    assert s["state"] in ("restarting", "starting")
    cd.add_server("garbage", stdio_server(env={"MCP_TEST_GARBAGE": "1"}, startupTimeoutSeconds=2))
    s = cd.wait_server("garbage", lambda s: s["last_error"], what="an error")
    assert s["state"] in ("restarting", "starting")
    assert s["tools"] == []
    cd.add_server("nohttp", {"url": f"http://127.0.0.1:{free_port()}/mcp", "startupTimeoutSeconds": 3})
    s = cd.wait_server("nohttp", lambda s: s["last_error"], what="an error")
    assert s["tools"] == []
    # the registry holds only the working server's tools, and turns still work
    sources = {t["source"] for t in cd.tools().values()}
    assert sources <= {"mcp:fake"}, sources
    frames, got = call_tool(cd, fake_llm, "echo", {"text": "still fine"})
    assert got == "echo: still fine"
    for n in ("missing", "garbage", "nohttp"):
        assert cd.send("DELETE", f"/api/mcp/servers/{n}").status_code == 200
    assert set(cd.servers()) == {"fake"}


def test_routes_validate_and_need_csrf(cd):
    r = cd.send("POST", "/api/mcp/servers", {"name": "x", "server": {"command": "a", "args": []}}, csrf=False)
    assert r.status_code == 403
    r = cd.send("POST", "/api/mcp/servers", {"name": "x", "server": {"command": "a", "url": "http://127.0.0.1:1/"}})
    assert r.status_code == 400 and r.json()["error_code"] == "invalid_server"
    r = cd.send("POST", "/api/mcp/servers", {"name": "bad name!", "server": {"command": "a"}})
    assert r.status_code == 400
    r = cd.send("POST", "/api/mcp/servers", {"name": "t", "server": {"url": "http://127.0.0.1:1/", "timeoutSeconds": 0}})
    assert r.status_code == 400
    r = cd.send("POST", "/api/mcp/servers", {"name": "t", "server": "nope"})
    assert r.status_code == 422
    r = cd.send("POST", "/api/mcp/servers/nothere/enable")
    assert r.status_code == 404
    r = cd.send("DELETE", "/api/mcp/servers/nothere")
    assert r.status_code == 404
    doc = cd.get("/openapi.json").json()
    assert "/api/mcp/servers" in doc["paths"] and "/api/mcp/servers/{name}/enable" in doc["paths"]


def test_disable_withdraws_and_enable_restores(cd):
    cd.wait_tools(lambda t: "echo" in t)
    assert cd.send("POST", "/api/mcp/servers/fake/disable").status_code == 200
    assert cd.server("fake")["state"] == "disabled"
    assert "echo" not in cd.tools()
    f = json.loads((cd.data / "config" / "mcp_servers.json").read_text())
    assert f["mcpServers"]["fake"]["enabled"] is False
    assert cd.send("POST", "/api/mcp/servers/fake/enable").status_code == 200
    cd.wait_running("fake")
    cd.wait_tools(lambda t: "echo" in t)


def test_new_character_gets_the_tools(cd):
    cd.wait_tools(lambda t: t.get("echo", {}).get("source") == "mcp:fake")
    r = cd.send("POST", "/api/characters/profile", {"name": "Mika"})
    assert r.status_code == 200, r.text
    tools = cd.wait_tools(lambda t: "echo" in t, timeout=10, role="Mika")
    assert tools["echo"]["source"] == "mcp:fake"
    # a server for one character only
    cd.send("POST", "/api/mcp/servers/fake/disable")
    cd.add_server("mika_only", stdio_server(characters=["Mika"], allowedTools=["echo"]))
    cd.wait_running("mika_only")
    cd.wait_tools(lambda t: t.get("echo", {}).get("source") == "mcp:mika_only", role="Mika")
    assert "echo" not in cd.tools("Companion")
    cd.send("DELETE", "/api/mcp/servers/mika_only")
    cd.send("POST", "/api/mcp/servers/fake/enable")
    cd.wait_running("fake")


def start_http_server(port, log):
    proc = subprocess.Popen([PYTHON, FAKE_SERVER, "http", str(port)], stdout=log, stderr=log)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            requests.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
            return proc
        except requests.ConnectionError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the HTTP MCP server did not start")


def test_streamable_http_server(cd, fake_llm, tmp_root):
    port = free_port()
    log = open(tmp_root / "http-server.log", "ab")
    proc = start_http_server(port, log)
    try:
        cd.send("POST", "/api/mcp/servers/fake/disable")
        cd.add_server("web", {"url": f"http://127.0.0.1:{port}/mcp",
                              "headers": {"X-Test": "1"}})
        s = cd.wait_running("web")
        assert s["transport"] == "http" and "echo" in s["tools"]
        assert s["config"]["headers"] == {"X-Test": "********"}
        assert cd.tools()["echo"]["source"] == "mcp:web"
        frames, got = call_tool(cd, fake_llm, "echo", {"text": "over http"})
        assert got == "echo: over http"
        frames, got = call_tool(cd, fake_llm, "grow", {})
        assert got == "grown"
        cd.wait_tools(lambda t: t.get("extra_tool", {}).get("source") == "mcp:web")
        # the HTTP server goes away: noticed (ping), tools withdrawn, retried
        proc.terminate()
        proc.wait(10)
        cd.wait_tools(lambda t: not any(x["source"] == "mcp:web" for x in t.values()), timeout=20)
        down = cd.wait_server("web", lambda s: s["state"] in ("restarting", "starting"), timeout=5)
        assert down["last_error"]
        # and comes back on the same port: reconnected with backoff
        proc = start_http_server(port, log)
        back = cd.wait_running("web", timeout=60)
        assert back["restarts"] >= 1
        frames, got = call_tool(cd, fake_llm, "echo", {"text": "again"})
        assert got == "echo: again"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
    cd.send("DELETE", "/api/mcp/servers/web")
    assert not any(t["source"] == "mcp:web" for t in cd.tools().values())
    if cd.server("fake"):
        cd.send("POST", "/api/mcp/servers/fake/enable")
        cd.wait_running("fake")


def start_sse_server(port, log, requests_file):
    """fake_server.py over the legacy HTTP+SSE transport (MCP 2024-11-05)."""
    proc = subprocess.Popen([PYTHON, FAKE_SERVER, "sse", str(port)], stdout=log, stderr=log,
                            env={**os.environ, "MCP_TEST_REQUESTS": str(requests_file)})
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            # a TCP connection only: no request in the server's log
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the SSE MCP server did not start")


def wait_log(cd, text, timeout=10):
    """The first line of companiond's log containing `text`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for line in (cd.root / "companiond.log").read_text(errors="replace").splitlines():
            if text in line:
                return line
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not in companiond's log within {timeout}s")


def logged_requests(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_sse_server_scenario(cd, fake_llm, tmp_root, name, extra):
    """An SSE-only server configured with `extra`: tools listed, a chat turn,
    list_changed, killed (tools withdrawn, the error shown), started again (back).
    Answers the requests the server saw."""
    port = free_port()
    log = open(tmp_root / f"sse-{name}.log", "ab")
    seen = tmp_root / f"sse-{name}-requests.jsonl"
    proc = start_sse_server(port, log, seen)
    try:
        cd.send("POST", "/api/mcp/servers/fake/disable")
        cd.add_server(name, {"url": f"http://127.0.0.1:{port}/sse",
                             "headers": {"X-Test": "sse-header"}, **extra})
        f = json.loads((cd.data / "config" / "mcp_servers.json").read_text())
        assert f["mcpServers"][name].get("transport") == extra.get("transport")
        s = cd.wait_running(name)
        assert s["transport"] == "sse", s
        assert "echo" in s["tools"] and "grow" in s["tools"]
        assert s["config"]["headers"] == {"X-Test": "********"}
        tools = cd.tools()
        assert tools["echo"]["source"] == f"mcp:{name}"
        assert tools["echo"]["description"] == "Repeat the text."
        frames, got = call_tool(cd, fake_llm, "echo", {"text": "over sse"})
        calls, results = of_type(frames, "tool_call"), of_type(frames, "tool_result")
        assert [c["name"] for c in calls] == ["echo"]
        assert results[0]["is_error"] is False
        assert got == "echo: over sse"
        spoken = "".join(f.get("text", "") for f in of_type(frames, "assistant_delta"))
        assert "RESULT: echo: over sse" in spoken
        # a notification on the stream: tools/list_changed
        frames, got = call_tool(cd, fake_llm, "grow", {})
        assert got == "grown"
        cd.wait_tools(lambda t: t.get("extra_tool", {}).get("source") == f"mcp:{name}")
        # the configured header went with the GET of the stream and with every POST
        reqs = logged_requests(seen)
        gets = [r for r in reqs if r["method"] == "GET" and r["path"] == "/sse"]
        posts = [r for r in reqs if r["method"] == "POST" and r["path"].startswith("/messages")]
        assert gets and posts, reqs
        assert all(r["x_test"] == "sse-header" for r in gets + posts), reqs
        # the server goes away: the stream ends, tools withdrawn, the error shown
        proc.terminate()
        proc.wait(10)
        cd.wait_tools(lambda t: not any(x["source"] == f"mcp:{name}" for x in t.values()),
                      timeout=20)
        down = cd.wait_server(name, lambda s: s["state"] in ("restarting", "starting"), timeout=5)
        assert down["last_error"]
        # why, in the log (the state's last_error is soon the failing restarts')
        ended = wait_log(cd, f"MCP server {name}: the connection ended: ")
        assert "SSE stream" in ended, ended
        frames, got = call_tool(cd, fake_llm, "echo", {"text": "nobody home"})
        assert not of_type(frames, "tool_call") or of_type(frames, "tool_result")[0]["is_error"]
        # and it comes back on the same port: reconnected with backoff
        proc = start_sse_server(port, log, seen)
        back = cd.wait_running(name, timeout=60)
        assert back["restarts"] >= 1 and back["transport"] == "sse"
        cd.wait_tools(lambda t: t.get("echo", {}).get("source") == f"mcp:{name}")
        frames, got = call_tool(cd, fake_llm, "echo", {"text": "again"})
        assert got == "echo: again"
        return logged_requests(seen)
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
        cd.send("DELETE", f"/api/mcp/servers/{name}")
        assert not any(t["source"] == f"mcp:{name}" for t in cd.tools().values())
        if cd.server("fake"):
            cd.send("POST", "/api/mcp/servers/fake/enable")
            cd.wait_running("fake")


def test_sse_server_found_by_the_probe(cd, fake_llm, tmp_root):
    """Only `url`: the initialize POST gets 405, so companiond falls back to GET
    the event stream (the spec's backwards compatibility)."""
    reqs = run_sse_server_scenario(cd, fake_llm, tmp_root, "legacy", {})
    probes = [r for r in reqs if r["method"] == "POST" and r["path"] == "/sse"]
    assert probes, reqs


def test_sse_server_configured_explicitly(cd, fake_llm, tmp_root):
    """`"transport": "sse"` skips the probe: no POST to the stream URL at all."""
    reqs = run_sse_server_scenario(cd, fake_llm, tmp_root, "legacy2", {"transport": "sse"})
    assert not [r for r in reqs if r["method"] == "POST" and r["path"] == "/sse"], reqs


def test_type_sse_is_accepted(cd):
    """Other clients write `"type": "sse"`: the same as `transport`."""
    cd.add_server("typed", {"url": f"http://127.0.0.1:{free_port()}/sse", "type": "sse",
                            "startupTimeoutSeconds": 2})
    s = cd.wait_server("typed", lambda s: s["last_error"], what="an error")
    assert s["transport"] == "sse"
    assert s["last_error"].startswith("GET http://127.0.0.1:"), s  # no probe POST
    cd.send("DELETE", "/api/mcp/servers/typed")
    r = cd.send("POST", "/api/mcp/servers", {"name": "t", "server": {"command": "x", "transport": "sse"}})
    assert r.status_code == 400 and "needs url" in r.json()["error"]
    r = cd.send("POST", "/api/mcp/servers", {"name": "t", "server": {"url": "http://127.0.0.1:1/", "transport": "carrier-pigeon"}})
    assert r.status_code == 400 and "transport must be" in r.json()["error"]


class BadSse:
    """A loopback HTTP server that speaks the SSE transport badly: GET /<mode>
    answers an event stream per mode, POST /msg answers 202, POST elsewhere 405."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        import threading

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _stream(self, body, then_wait):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                if then_wait:
                    time.sleep(then_wait)
                self.close_connection = True

            def do_GET(self):
                mode = self.path.strip("/")
                if mode == "foreign":
                    self._stream(b"event: endpoint\ndata: http://evil.example:9/msg\n\n", 5)
                elif mode == "silent":
                    self._stream(b": nothing to say\n\n", 10)
                elif mode == "garbage":
                    self._stream(b"event: endpoint\ndata: /msg\n\nthis is not an event stream\n\n", 5)
                elif mode == "notjson":
                    self._stream(b"event: endpoint\ndata: /msg\n\nevent: message\ndata: {oops\n\n", 5)
                elif mode == "html":
                    body = b"<html>hello</html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                code = 202 if self.path == "/msg" else 405
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, mode):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{mode}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_sse_servers_that_do_not_work(cd, fake_llm):
    bad = BadSse()
    cases = {
        # mode: (extra config, what last_error must say)
        "foreign": ({"transport": "sse"}, "another origin"),
        "silent": ({"transport": "sse"}, "no endpoint event"),
        "garbage": ({"transport": "sse"}, "malformed"),
        "notjson": ({}, "not JSON-RPC"),  # found by the probe (405), then bad data
        "html": ({"transport": "sse"}, "instead of an event stream"),
        "nothing": ({}, "answered HTTP 404"),  # 405, then 404 to the GET
    }
    try:
        for mode, (extra, said) in cases.items():
            cd.add_server(f"bad-{mode}", {"url": bad.url(mode), "startupTimeoutSeconds": 2, **extra})
        for mode, (extra, said) in cases.items():
            s = cd.wait_server(f"bad-{mode}", lambda s: s["last_error"], what="an error")
            assert said in s["last_error"], (mode, s["last_error"])
            assert s["state"] in ("restarting", "starting"), s
            assert s["tools"] == []
        s = cd.server("bad-nothing")
        assert "legacy HTTP+SSE transport failed" in s["last_error"], s
        # the registry holds only the working server's tools, and turns still work
        if cd.server("fake") is None:  # (this test run alone)
            cd.add_server("fake", stdio_server(env={"GIVEN": "yes"}))
        cd.wait_running("fake")
        sources = {t["source"] for t in cd.tools().values()}
        assert sources <= {"mcp:fake"}, sources
        frames, got = call_tool(cd, fake_llm, "echo", {"text": "still fine"})
        assert got == "echo: still fine"
    finally:
        for mode in cases:
            cd.send("DELETE", f"/api/mcp/servers/bad-{mode}")
        bad.close()


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for every purpose but the process table
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pids, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    left = [p for p in pids if alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"MCP server processes outlived companiond: {left}"


def test_config_file_read_at_start_and_children_end_with_companiond(tmp_root):
    helpers = tmp_root / "helpers-second.txt"
    # "helped" starts a helper process of its own (a grandchild of companiond)
    c = Companiond(tmp_root / "second", servers_file={"mcpServers": {
        "fake": {"command": PYTHON, "args": [FAKE_SERVER]},
        "helped": {"command": PYTHON, "args": [FAKE_SERVER],
                   "env": {"MCP_TEST_HELPER_PIDS": str(helpers)}},
        "off": {"command": PYTHON, "args": [FAKE_SERVER], "disabled": True}}})
    try:
        pid = c.wait_running("fake")["pid"]
        helped = c.wait_running("helped")["pid"]
        assert c.server("off")["state"] == "disabled"
        grandchild = int(helpers.read_text().split()[0])
        assert alive(pid) and alive(helped) and alive(grandchild)
    finally:
        c.stop()
    assert c.proc.returncode == 0
    wait_gone([pid, helped, grandchild])


def test_removed_server_ends_its_process_group(cd, tmp_root):
    helpers = tmp_root / "helpers-removed.txt"
    cd.add_server("helped", stdio_server(env={"MCP_TEST_HELPER_PIDS": str(helpers)},
                                         allowedTools=[]))
    pid = cd.wait_running("helped")["pid"]
    grandchild = int(helpers.read_text().split()[0])
    assert alive(grandchild)
    assert cd.send("DELETE", "/api/mcp/servers/helped").status_code == 200
    wait_gone([pid, grandchild])


def test_https_server_is_reached_over_tls(cd, tmp_root):
    """An https URL goes through TLS with the Mozilla roots: a self-signed
    certificate is refused by the client (a TLS alert) instead of being trusted."""
    import ssl
    import socket
    import threading
    key, cert = tmp_root / "k.pem", tmp_root / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    port = sock.getsockname()[1]
    hellos = []

    def serve():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            try:
                with ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(1)
            except (ssl.SSLError, OSError) as e:
                hellos.append(str(e))
    threading.Thread(target=serve, daemon=True).start()
    try:
        cd.add_server("tls", {"url": f"https://127.0.0.1:{port}/mcp", "startupTimeoutSeconds": 5})
        s = cd.wait_server("tls", lambda s: s["last_error"], what="an error")
        assert "initialize failed" in s["last_error"]
        assert s["tools"] == []
        # the client spoke TLS and refused the unknown issuer (an alert), not plain HTTP
        deadline = time.time() + 5
        while not hellos and time.time() < deadline:
            time.sleep(0.1)
        assert any("alert" in h.lower() for h in hellos), hellos
    finally:
        sock.close()
        cd.send("DELETE", "/api/mcp/servers/tls")
