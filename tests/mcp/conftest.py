"""Fixtures of the MCP tests (docs/mcp.md).

* ``fake_llm``: a loopback OpenAI-compatible model that follows a script: a user
  message ``CALL <tool> <json arguments>`` makes it call that tool; after a tool
  message it answers ``RESULT: <the tool message>``; anything else gets ``ok``.
* ``Companiond``: the real companiond binary on a free port with a fresh data dir
  (``COMPANIOND_BIN``), its CSRF token, helpers for the MCP routes and chat turns.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
import websocket

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FAKE_SERVER = str(HERE / "fake_server.py")
PYTHON = sys.executable


class FakeLLM:
    def __init__(self):
        self.requests = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _json(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    return self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
                self._json(404, {"error": "not found"})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    return self._json(404, {"error": "not found"})
                fake.requests.append(body)
                msgs = body.get("messages", [])
                last = msgs[-1] if msgs else {}
                text, calls = "ok", []
                if last.get("role") == "tool":
                    text = "RESULT: " + str(last.get("content"))[:300]
                elif last.get("role") == "user" and str(last.get("content", "")).startswith("CALL "):
                    parts = last["content"].split(" ", 2)
                    name, args = parts[1], (parts[2] if len(parts) > 2 else "{}")
                    calls = [{"id": f"call_{len(fake.requests)}", "name": name, "arguments": args.strip()}]
                    text = ""
                if not body.get("stream"):
                    msg = {"role": "assistant", "content": text}
                    if calls:
                        msg["tool_calls"] = [{"id": c["id"], "type": "function",
                                              "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]
                    return self._json(200, {"id": "x", "object": "chat.completion", "choices": [
                        {"index": 0, "message": msg, "finish_reason": "tool_calls" if calls else "stop"}]})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                events = []
                if text:
                    events.append({"choices": [{"index": 0, "delta": {"content": text}}]})
                for i, c in enumerate(calls):
                    events.append({"choices": [{"index": 0, "delta": {"tool_calls": [
                        {"index": i, "id": c["id"], "type": "function",
                         "function": {"name": c["name"], "arguments": c["arguments"]}}]}}]})
                events.append({"choices": [{"index": 0, "delta": {},
                                            "finish_reason": "tool_calls" if calls else "stop"}]})
                for e in events:
                    self.wfile.write(f"data: {json.dumps(e)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def base(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def companiond_binary():
    b = os.environ.get("COMPANIOND_BIN")
    if b:
        return b
    target = os.environ.get("CARGO_TARGET_DIR") or str(REPO / "target")
    b = Path(target) / "debug" / "companiond"
    if not b.exists():
        pytest.exit(f"no companiond binary at {b}: run tests/mcp/run or set COMPANIOND_BIN", 2)
    return str(b)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Companiond:
    def __init__(self, root, env=None, servers_file=None):
        self.root = Path(root)
        self.data = self.root / "data"
        (self.data / "config").mkdir(parents=True, exist_ok=True)
        (self.root / "bundle").mkdir(exist_ok=True)
        if servers_file is not None:
            (self.data / "config" / "mcp_servers.json").write_text(json.dumps(servers_file))
        self.log = open(self.root / "companiond.log", "ab")
        self.proc = subprocess.Popen(
            [companiond_binary(), "--listen", "127.0.0.1:0", "--data-dir", str(self.data),
             "--bundle-dir", str(self.root / "bundle")],
            stdout=subprocess.PIPE, stderr=self.log,
            env={**os.environ, "RUST_LOG": "warn", **(env or {})})
        line = b""
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith(b"listening on ") or self.proc.poll() is not None:
                break
        text = line.decode().strip()
        assert text.startswith("listening on http://"), f"companiond did not start: {text!r}"
        self.url = text[len("listening on "):]
        self.csrf = self.get("/api/config/page_config").json()["csrf_token"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    # ---------------------------------------------------------------- HTTP
    def get(self, path, **kw):
        return requests.get(self.url + path, timeout=30, **kw)

    def send(self, method, path, body=None, csrf=True, headers=None):
        h = {"X-CSRF-Token": self.csrf} if csrf else {}
        h.update(headers or {})
        return requests.request(method, self.url + path, json=body, headers=h, timeout=30)

    def configure_llm(self, base):
        cfg = {"enableCustomApi": True}
        for slot in ["conversation", "summary", "correction", "emotion", "vision", "agent"]:
            cfg[f"{slot}ModelUrl"] = base
            cfg[f"{slot}ModelId"] = "fake"
            cfg[f"{slot}ModelApiKey"] = "sk-fake"
        r = self.send("POST", "/api/config/core_api", cfg)
        assert r.status_code == 200, r.text

    # ---------------------------------------------------------------- MCP
    def add_server(self, name, server):
        r = self.send("POST", "/api/mcp/servers", {"name": name, "server": server})
        assert r.status_code == 200, r.text
        return r.json()

    def servers(self):
        r = self.get("/api/mcp/servers")
        assert r.status_code == 200, r.text
        return {s["name"]: s for s in r.json()["servers"]}

    def server(self, name):
        return self.servers().get(name)

    def wait_server(self, name, pred, timeout=30, what="condition"):
        deadline = time.time() + timeout
        s = None
        while time.time() < deadline:
            s = self.server(name)
            if s is not None and pred(s):
                return s
            time.sleep(0.1)
        raise AssertionError(f"server {name}: {what} not reached within {timeout}s; last: {s}")

    def wait_running(self, name, timeout=30):
        return self.wait_server(name, lambda s: s["state"] == "running", timeout, "running")

    def tools(self, role="Companion"):
        r = self.get(f"/api/tools?role={role}")
        assert r.status_code == 200, r.text
        return {t["name"]: t for t in r.json()["tools_by_role"][role]}

    def wait_tools(self, pred, timeout=30, role="Companion"):
        deadline = time.time() + timeout
        t = None
        while time.time() < deadline:
            t = self.tools(role)
            if pred(t):
                return t
            time.sleep(0.1)
        raise AssertionError(f"tools condition not reached within {timeout}s; last: {sorted(t)}")

    # ---------------------------------------------------------------- chat
    def turn(self, text, role="Companion", timeout=60):
        ws = websocket.create_connection(self.url.replace("http://", "ws://") + f"/ws/{role}",
                                         timeout=timeout)
        try:
            ws.send(json.dumps({"type": "user_text", "text": text}))
            frames = []
            deadline = time.time() + timeout
            while time.time() < deadline:
                raw = ws.recv()
                if not isinstance(raw, str):
                    continue
                f = json.loads(raw)
                frames.append(f)
                if f.get("type") == "turn_end":
                    return frames
            raise AssertionError(f"no turn_end within {timeout}s: {frames}")
        finally:
            ws.close()


def of_type(frames, t):
    return [f for f in frames if f.get("type") == t]


def call_tool(cd, llm, tool, args, timeout=60):
    """A chat turn in which the model calls `tool`: (frames, the tool message the
    model got in its next round)."""
    before = len(llm.requests)
    frames = cd.turn(f"CALL {tool} {json.dumps(args)}", timeout=timeout)
    calls = of_type(frames, "tool_call")
    if not calls:
        return frames, None
    call_id = calls[0]["call_id"]
    for r in llm.requests[before:]:
        for m in r.get("messages", []):
            if m.get("role") == "tool" and m.get("tool_call_id") == call_id:
                return frames, m.get("content")
    return frames, None


@pytest.fixture(scope="module")
def fake_llm():
    f = FakeLLM()
    yield f
    f.close()


@pytest.fixture(scope="module")
def tmp_root():
    root = tempfile.mkdtemp(prefix="companiond-mcp-")
    yield Path(root)
    shutil.rmtree(root, ignore_errors=True)


def stdio_server(**extra):
    cfg = {"command": PYTHON, "args": [FAKE_SERVER]}
    cfg.update(extra)
    return cfg
