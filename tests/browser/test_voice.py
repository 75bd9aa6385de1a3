"""The console speaks: the Chat's voice switch, audio played as it streams
(docs/voice.md), against a loopback OpenAI-compatible speech server."""

import json
import math
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import expect

# 0.3 s of a 440 Hz tone at 24 kHz per request.
TONE = b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / 24000)))
                for i in range(7200))


@pytest.fixture(scope="module")
def speech():
    requests_seen = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            data = json.dumps({"voices": ["af_bella", "am_adam"]}).encode()
            self.send_response(200 if self.path.endswith("/audio/voices") else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            requests_seen.append(json.loads(self.rfile.read(n) or b"{}"))
            self.send_response(200)
            self.send_header("Content-Type", "audio/pcm")
            self.send_header("Content-Length", str(len(TONE)))
            self.end_headers()
            self.wfile.write(TONE)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    httpd.requests_seen = requests_seen
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def nav(page, section):
    page.click(f'nav a[data-section="{section}"]')
    expect(page.locator(f"#section-{section}")).to_be_visible()


def test_chat_speaks_with_the_voice_on(page, server, fake_llm, speech):
    r = server.post("/api/config/core_api", {
        "enableCustomApi": True, "conversationModelUrl": fake_llm.base,
        "conversationModelId": "fake-chat", "conversationModelApiKey": "",
        "ttsModelProvider": "custom", "ttsModelUrl": f"http://127.0.0.1:{speech.server_address[1]}/v1"})
    assert r.ok, r.text
    page.goto(server.url + "/console/")
    nav(page, "chat")
    expect(page.locator("#chat-conn")).to_have_text("connected")
    page.check("#chat-voice")
    expect(page.locator("#chat-voice-state")).to_have_text("(speaking with openai_compatible)")
    before = len(speech.requests_seen)
    page.fill("#chat-input", "Speak to me")
    page.press("#chat-input", "Enter")
    expect(page.locator("#chat-voice")).to_have_attribute("data-last-end", "done", timeout=20000)
    asked = speech.requests_seen[before:]
    assert asked and all(a["response_format"] == "pcm" for a in asked)
    # Every chunk's 0.3 s at 24 kHz arrives as 14,400 samples at 48 kHz, all scheduled.
    expect(page.locator("#chat-voice")).to_have_attribute("data-samples", str(14400 * len(asked)))
    state = page.evaluate("() => new AudioContext().state")
    assert state == "running", state  # autoplay allowed: the audio is heard
    # The switch is remembered and off means no more speech.
    page.uncheck("#chat-voice")
    n = len(speech.requests_seen)
    page.fill("#chat-input", "Quiet now")
    page.press("#chat-input", "Enter")
    expect(page.locator("#chat-log .msg.ai").last).to_contain_text("Quiet now")
    page.wait_for_timeout(300)
    assert len(speech.requests_seen) == n


def test_settings_voice_picker(page, server, speech):
    nav(page, "settings")
    expect(page.locator("#voice-provider")).to_contain_text("openai_compatible")
    expect(page.locator("#voice-pick option")).to_have_count(2)
    page.select_option("#voice-pick", "am_adam")
    page.click("#voice-save")
    expect(page.locator("#voice-result")).to_contain_text("am_adam")
    assert server.get("/api/config/core_api").json()["ttsVoiceId"] == "am_adam"
    nav(page, "chat")
    page.check("#chat-voice")
    expect(page.locator("#chat-voice-state")).to_have_text("(speaking with openai_compatible)")
    n = len(speech.requests_seen)
    page.evaluate("document.getElementById('chat-voice').dataset.lastEnd = ''")
    page.fill("#chat-input", "Which voice?")
    page.press("#chat-input", "Enter")
    expect(page.locator("#chat-voice")).to_have_attribute("data-last-end", "done", timeout=20000)
    assert {a["voice"] for a in speech.requests_seen[n:]} == {"am_adam"}
