"""Fixtures of the console's browser tests.

* ``fake_llm``: a loopback OpenAI-compatible model (``/v1/chat/completions`` streaming
  SSE or whole JSON, ``/v1/models``) written with http.server.
* ``server``: the real companiond binary on a free port with a fresh data dir.
* ``page``: one headless Chromium page (the system browser, /usr/bin/chromium) kept for
  the whole module, so the tests of a module walk one person's session in order.
"""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "docs" / "console"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",  # the Chat's voice plays without a click
]


# ------------------------------------------------------------------ fake model

class FakeLLM:
    """Answers every chat with 'Hello! You said: <last user text>' in small deltas."""

    MODELS = ["fake-chat", "fake-small"]

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
                    return self._json(200, {"object": "list", "data": [
                        {"id": m, "object": "model"} for m in fake.MODELS]})
                self._json(404, {"error": "not found"})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                fake.requests.append({"path": self.path, "body": body})
                if not self.path.endswith("/chat/completions"):
                    return self._json(404, {"error": "not found"})
                last = ""
                for m in body.get("messages", []):
                    if m.get("role") == "user" and isinstance(m.get("content"), str):
                        last = m["content"]
                reply = f"Hello! You said: {last}"
                if not body.get("stream"):
                    return self._json(200, {
                        "id": "x", "object": "chat.completion", "model": body.get("model"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": reply}}],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                pieces = [reply[i:i + 6] for i in range(0, len(reply), 6)]
                for p in pieces:
                    chunk = {"choices": [{"index": 0, "delta": {"content": p}}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(0.03)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def chat_requests(self):
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def fake_llm():
    f = FakeLLM()
    yield f
    f.close()


# ------------------------------------------------------------------ companiond

class Server:
    def __init__(self, binary, root):
        self.root = Path(root)
        self.data = self.root / "data"
        self.bundle = self.root / "bundle"
        self.bundle.mkdir(parents=True, exist_ok=True)
        self.binary = binary
        self.proc = None
        self.url = None
        self.start()

    def start(self, port=0):
        self.log = open(self.root / "companiond.log", "ab")
        self.proc = subprocess.Popen(
            [self.binary, "--listen", f"127.0.0.1:{port}", "--data-dir", str(self.data),
             "--bundle-dir", str(self.bundle)],
            stdout=subprocess.PIPE, stderr=self.log, env={**os.environ, "RUST_LOG": "warn"})
        deadline = time.time() + 30
        line = b""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith(b"listening on "):
                break
            if self.proc.poll() is not None:
                break
        text = line.decode().strip()
        assert text.startswith("listening on http://"), f"companiond did not start: {text!r}"
        self.url = text[len("listening on "):]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def restart(self):
        port = int(self.url.rsplit(":", 1)[1])
        self.stop()
        self.start(port)

    # plain HTTP helpers (the test's "other window")
    def get(self, path, **kw):
        return requests.get(self.url + path, timeout=30, **kw)

    def post(self, path, json_body=None, **kw):
        return requests.post(self.url + path, json=json_body, timeout=30, **kw)


def companiond_binary():
    b = os.environ.get("COMPANIOND_BIN")
    if b:
        return b
    target = os.environ.get("CARGO_TARGET_DIR") or str(REPO / "target")
    b = Path(target) / "debug" / "companiond"
    if not b.exists():
        pytest.exit(f"no companiond binary at {b}: run tests/browser/run or set COMPANIOND_BIN", 2)
    return str(b)


@pytest.fixture(scope="module")
def server():
    root = tempfile.mkdtemp(prefix="companiond-browser-")
    s = Server(companiond_binary(), root)
    yield s
    s.stop()
    shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------ browser

@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.exit(f"{CHROMIUM} is missing: apt-get install -y chromium", 2)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


# Browser log lines that are expected: refused requests the page handles itself
# (404, 409 ...) and the chat socket while companiond restarts.
EXPECTED_NOISE = ("Failed to load resource", "WebSocket connection to")


class Watch:
    """What the page did that the tests check at the end: JS errors and mutations."""

    def __init__(self):
        self.errors = []
        self.mutations = []


@pytest.fixture(scope="module")
def watch():
    return Watch()


@pytest.fixture(scope="module")
def page(browser, server, watch):
    ctx = browser.new_context(viewport={"width": 1100, "height": 860}, locale="en-US",
                              accept_downloads=True)
    pg = ctx.new_page()
    pg.set_default_timeout(15000)
    pg.on("pageerror", lambda e: watch.errors.append(str(e)))
    pg.on("console", lambda m: m.type == "error" and not m.text.startswith(EXPECTED_NOISE)
          and watch.errors.append(m.text))

    def on_request(req):
        if req.method != "GET" and "/api/" in req.url:
            watch.mutations.append((req.method, req.url, req.headers.get("x-csrf-token")))
    pg.on("request", on_request)
    yield pg
    ctx.close()


def shot(page, name, full_page=True):
    """Screenshot of the page into docs/console/<name>.png."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    if full_page:
        page.evaluate("window.scrollTo(0, 0)")  # keep the sticky header on top
    page.wait_for_timeout(150)  # let the last paint settle
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)
