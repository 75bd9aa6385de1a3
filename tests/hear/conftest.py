"""Fixtures of the hearing tests (docs/voice.md, "Hearing").

* ``Sphinx``: pocketsphinx (its PyPI wheel ships the English model) with a small
  JSGF grammar of the test phrases: a real recogniser, constrained so that
  espeak-ng's voice is recognised reliably.
* ``asr_http``: an OpenAI-compatible transcription server (``POST
  /v1/audio/transcriptions``, multipart WAV) around it; ``mode`` makes it fail
  (``down`` = HTTP 500, ``slow``, ``empty``).
* ``asr_wyoming``: a Wyoming server of the test's own around it (``transcribe``,
  ``audio-start``, ``audio-chunk``…, ``audio-stop`` → ``transcript``).
* ``say``: an utterance made with espeak-ng at test time, as 16 or 48 kHz PCM16.
* ``fake_llm``: a loopback OpenAI-compatible model streaming a fixed reply and
  recording the user messages it was asked with.
* ``slow_tts``: an OpenAI-compatible speech server streaming a long tone in real
  time, so the character is still speaking when the user cuts in.
* ``server``: the real companiond binary on a free port.
"""

import audioop  # noqa: deprecated in 3.13; present on 3.11/3.12
import email.parser
import email.policy
import io
import json
import math
import os
import shutil
import socketserver
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
REPLY = "Of course. I am glad you asked me that, it is a pleasure to talk with you."
PHRASES = [
    "hello how are you today",
    "what time is it",
    "tell me a joke please",
    "good morning my friend",
    "what is the weather like",
]


def _serve(handler_cls):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_cls)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


class Sphinx:
    def __init__(self):
        from pocketsphinx import Decoder

        self.dir = Path(tempfile.mkdtemp(prefix="hear-sphinx-"))
        gram = self.dir / "phrases.gram"
        gram.write_text("#JSGF V1.0;\ngrammar hear;\npublic <s> = " + " | ".join(PHRASES) + ";\n")
        self.decoder = Decoder(samprate=16000, jsgf=str(gram), loglevel="FATAL")
        self.lock = threading.Lock()

    def recognise(self, pcm16k: bytes) -> str:
        with self.lock:
            self.decoder.start_utt()
            self.decoder.process_raw(pcm16k, full_utt=True)
            self.decoder.end_utt()
            hyp = self.decoder.hyp()
            return hyp.hypstr if hyp else ""


@pytest.fixture(scope="session")
def sphinx():
    return Sphinx()


def read_wav(data: bytes):
    with wave.open(io.BytesIO(data)) as w:
        return w.getframerate(), w.getnchannels(), w.getsampwidth(), w.readframes(w.getnframes())


class AsrHttp:
    def __init__(self, sphinx: Sphinx):
        self.requests = []  # dicts: model, auth, rate, samples, text, at
        self.mode = "ok"
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def answer(self, status, body: bytes, ctype="application/json"):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                at = time.monotonic()
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                if not self.path.endswith("/audio/transcriptions"):
                    return self.answer(404, b"{}")
                msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                    b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + raw)
                fields, wav = {}, None
                for part in msg.iter_parts():
                    name = part.get_param("name", header="content-disposition")
                    if name == "file":
                        wav = part.get_payload(decode=True)
                    else:
                        fields[name] = part.get_content().strip()
                rate, ch, width, pcm = read_wav(wav)
                rec = {"model": fields.get("model"), "auth": self.headers.get("Authorization"),
                       "rate": rate, "channels": ch, "samples": len(pcm) // 2, "at": at}
                fake.requests.append(rec)
                if fake.mode == "down":
                    return self.answer(500, b'{"error":"down"}')
                if fake.mode == "slow":
                    time.sleep(3)
                text = "" if fake.mode == "empty" else sphinx.recognise(pcm)
                rec["text"] = text
                self.answer(200, json.dumps({"text": text}).encode())

        self.httpd = _serve(Handler)

    @property
    def base(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="session")
def asr_http(sphinx):
    a = AsrHttp(sphinx)
    yield a
    a.close()


class AsrWyoming:
    def __init__(self, sphinx: Sphinx):
        self.asked = []  # (events, text)
        fake = self

        class Handler(socketserver.StreamRequestHandler):
            def read_event(self):
                line = self.rfile.readline()
                if not line:
                    return None
                head = json.loads(line)
                data = head.get("data") or {}
                if head.get("data_length"):
                    data.update(json.loads(self.rfile.read(head["data_length"])))
                payload = self.rfile.read(head["payload_length"]) if head.get("payload_length") else b""
                return head["type"], data, payload

            def handle(self):
                kinds, pcm, rate = [], b"", None
                while True:
                    ev = self.read_event()
                    if ev is None:
                        return
                    kind, data, payload = ev
                    kinds.append(kind)
                    if kind == "audio-start":
                        rate = data.get("rate")
                    elif kind == "audio-chunk":
                        pcm += payload
                    elif kind == "audio-stop":
                        break
                text = sphinx.recognise(pcm) if rate == 16000 else ""
                fake.asked.append((kinds, text, len(pcm) // 2))
                body = json.dumps({"type": "transcript", "data": {"text": text}}) + "\n"
                self.wfile.write(body.encode())

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"tcp://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def asr_wyoming(sphinx):
    w = AsrWyoming(sphinx)
    yield w
    w.close()


def espeak(text: str, rate: int) -> bytes:
    """PCM16 mono at ``rate`` of espeak-ng saying ``text``, with 300 ms of silence before."""
    with tempfile.NamedTemporaryFile(suffix=".wav") as f:
        subprocess.run(["espeak-ng", "-v", "en-us", "-s", "140", "-w", f.name, text], check=True)
        src_rate, _, _, pcm = read_wav(Path(f.name).read_bytes())
    out, _ = audioop.ratecv(pcm, 2, 1, src_rate, rate, None)
    return b"\0\0" * (rate * 3 // 10) + out


@pytest.fixture(scope="session")
def say():
    cache = {}

    def make(text, rate=48000):
        if (text, rate) not in cache:
            cache[(text, rate)] = espeak(text, rate)
        return cache[(text, rate)]

    return make


class FakeLLM:
    def __init__(self):
        self.asked = []  # the last user message of each request
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                users = [m for m in body.get("messages", []) if m.get("role") == "user"]
                fake.asked.append(users[-1]["content"] if users else None)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for i in range(0, len(REPLY), 9):
                    chunk = {"choices": [{"index": 0, "delta": {"content": REPLY[i:i + 9]}}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(0.01)
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


class SlowTts:
    """Answers every chunk with 6 s of a 220 Hz tone as a streamed 24 kHz WAV, in real time."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                self.send_response(200)
                self.send_header("Content-Type", "audio/pcm")
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    for k in range(60):
                        block = b"".join(
                            struct.pack("<h", int(3000 * math.sin(2 * math.pi * 220 * (k * 2400 + i) / 24000)))
                            for i in range(2400))
                        self.wfile.write(block)
                        self.wfile.flush()
                        time.sleep(0.1)
                except OSError:
                    pass
                self.close_connection = True

        self.httpd = _serve(Handler)

    @property
    def base(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="session")
def slow_tts():
    t = SlowTts()
    yield t
    t.close()


def companiond_binary():
    b = os.environ.get("COMPANIOND_BIN")
    if b:
        return b
    target = os.environ.get("CARGO_TARGET_DIR") or str(REPO / "target")
    b = Path(target) / "debug" / "companiond"
    if not b.exists():
        pytest.exit(f"no companiond binary at {b}: run tests/hear/run or set COMPANIOND_BIN", 2)
    return str(b)


class Server:
    def __init__(self, root: Path):
        (root / "bundle").mkdir(parents=True)
        self.root = root
        self.log = open(root / "companiond.log", "ab")
        self.proc = subprocess.Popen(
            [companiond_binary(), "--listen", "127.0.0.1:0", "--data-dir", str(root / "data"),
             "--bundle-dir", str(root / "bundle")],
            stdout=subprocess.PIPE, stderr=self.log, env={**os.environ, "RUST_LOG": "warn"})
        line = self.proc.stdout.readline().decode().strip()
        assert line.startswith("listening on http://"), line
        self.url = line[len("listening on "):]

    def configure(self, **keys):
        r = requests.post(self.url + "/api/config/core_api", json=keys, timeout=10)
        assert r.ok, r.text

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()


@pytest.fixture(scope="session")
def server(fake_llm, asr_http, slow_tts):
    root = Path(tempfile.mkdtemp(prefix="companiond-hear-"))
    s = Server(root)
    s.configure(enableCustomApi=True, conversationModelUrl=fake_llm.base,
                conversationModelId="fake-chat", conversationModelApiKey="",
                asrModelUrl=asr_http.base, asrModelId="sphinx", asrModelApiKey="")
    yield s
    s.close()
    shutil.rmtree(root, ignore_errors=True)
