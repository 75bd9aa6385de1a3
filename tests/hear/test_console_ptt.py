"""The console's push-to-talk in headless Chromium with a fake microphone that
plays an espeak-ng WAV (``--use-file-for-fake-audio-capture``): the transcript is
shown, the reply comes and is spoken."""

import os
import wave
from pathlib import Path

import pytest

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="module")
def mic_wav(tmp_path_factory, say):
    pcm = say("tell me a joke please", 48000)
    path = Path(tmp_path_factory.mktemp("mic")) / "mic.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(48000)
        w.writeframes(b"\0\0" * 24000 + pcm + b"\0\0" * 48000 * 3)
    return path


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no Chromium")
def test_push_to_talk_in_the_console(server, mic_wav, slow_tts, asr_http):
    from playwright.sync_api import expect, sync_playwright

    server.configure(ttsModelProvider="custom", ttsModelUrl=slow_tts.base, ttsModelId="tone",
                     ttsVoiceId="x", ttsModelApiKey="")
    n = len(asr_http.requests)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--autoplay-policy=no-user-gesture-required",
                "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
                f"--use-file-for-fake-audio-capture={mic_wav}"])
            ctx = browser.new_context()
            ctx.grant_permissions(["microphone"], origin=server.url)
            page = ctx.new_page()
            page.set_default_timeout(20000)
            page.goto(server.url + "/console/")
            page.click('nav a[data-section="chat"]')
            expect(page.locator("#chat-conn")).to_have_text("connected")
            page.check("#chat-voice")
            talk = page.locator("#chat-talk")
            # Hold the button with the mouse while the fake microphone plays the
            # utterance (0.5 s + ~1.6 s).
            talk.hover()
            page.mouse.down()
            page.wait_for_timeout(3000)
            page.mouse.up()
            expect(page.locator("#chat-log .msg.human.voice").last).to_contain_text("joke", timeout=20000)
            expect(page.locator("#chat-log .msg.ai").last).to_contain_text("pleasure", timeout=20000)
            # The reply is spoken (its audio frames are scheduled).
            expect(page.locator("#chat-voice")).to_have_attribute("data-speeches", "1", timeout=20000)
            assert int(talk.get_attribute("data-frames") or 0) > 20
            browser.close()
        assert len(asr_http.requests) > n
    finally:
        server.configure(ttsModelUrl="", ttsModelProvider="")
