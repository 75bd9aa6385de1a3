"""The character hears: microphone audio over the chat socket, against the real
binary, a real recogniser (pocketsphinx) and utterances made by espeak-ng."""

import json
import random
import struct
import time

import pytest
import requests
import websocket

WAIT = 20


def frames_of(pcm: bytes, rate: int, samples: int):
    step = samples * 2
    for i in range(0, len(pcm), step):
        chunk = pcm[i:i + step]
        if len(chunk) % 2:
            chunk = chunk[:-1]
        yield b"NEKO" + struct.pack("<I", rate) + chunk


def silence(rate, ms):
    return b"\0\0" * (rate * ms // 1000)


def noise(rate, ms, level=3000, seed=7):
    r = random.Random(seed)
    return b"".join(struct.pack("<h", int(r.uniform(-level, level))) for _ in range(rate * ms // 1000))


def current_character(url):
    return "Companion"


def connect(server):
    ws = websocket.create_connection(
        server.url.replace("http://", "ws://") + "/ws/" + current_character(server.url), timeout=WAIT)
    return ws


def recv(ws, timeout=WAIT):
    """The next text frame as JSON (binary frames are returned as bytes)."""
    ws.settimeout(timeout)
    m = ws.recv()
    if isinstance(m, bytes):
        return m
    return json.loads(m)


def until(ws, pred, timeout=WAIT, seen=None):
    """Frames until one matches ``pred``; returns it (the others go to ``seen``)."""
    end = time.monotonic() + timeout
    while True:
        left = end - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no matching frame; saw {[f for f in (seen or []) if not isinstance(f, bytes)][-15:]}")
        f = recv(ws, left)
        if seen is not None:
            seen.append(f)
        if not isinstance(f, bytes) and pred(f):
            return f


def quiet(ws, secs):
    """Text frames received within ``secs``."""
    got = []
    end = time.monotonic() + secs
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return got
        try:
            f = recv(ws, left)
        except websocket.WebSocketTimeoutException:
            return got
        if not isinstance(f, bytes):
            got.append(f)


def status_code(f):
    if f.get("type") != "status":
        return None
    return json.loads(f["message"])["code"]


def send_utterance(ws, pcm, rate, samples, trailing_ms=1200):
    for fr in frames_of(pcm + silence(rate, trailing_ms), rate, samples):
        ws.send_binary(fr)


def start_original(ws):
    ws.send(json.dumps({"action": "start_session", "input_type": "audio", "request_id": "A1"}))
    assert until(ws, lambda f: f.get("type") == "session_preparing")["input_mode"] == "audio"
    started = until(ws, lambda f: f.get("type") in ("session_started", "session_failed"))
    assert started == {"type": "session_started", "input_mode": "audio", "request_id": "A1"}, started


def start_native(ws, recognizer="openai_compatible"):
    ws.send(json.dumps({"type": "mic", "state": "start"}))
    f = until(ws, lambda f: f.get("type") in ("mic_state", "error"))
    assert f["type"] == "mic_state" and f["state"] == "listening", f
    assert f["recognizer"] == recognizer


def test_original_page_48k_frames_make_a_voice_turn(server, say, asr_http, fake_llm):
    ws = connect(server)
    start_original(ws)
    n = len(asr_http.requests)
    send_utterance(ws, say("hello how are you today", 48000), 48000, 480)
    t = until(ws, lambda f: f.get("type") == "user_transcript")
    assert "how are" in t["text"], t
    first = until(ws, lambda f: f.get("type") == "gemini_response")
    assert first["isNewMessage"] is True
    until(ws, lambda f: f.get("type") == "system" and f.get("data") == "turn end")
    req = asr_http.requests[n]
    assert (req["rate"], req["channels"], req["model"], req["auth"]) == (16000, 1, "sphinx", None)
    # The utterance reached the recogniser whole (pre-roll + ~1.6 s of speech).
    assert req["samples"] > 16000, req
    assert fake_llm.asked[-1] == t["text"]
    # end_session keeps the socket.
    ws.send(json.dumps({"action": "end_session"}))
    ws.send(json.dumps({"action": "ping"}))
    until(ws, lambda f: f.get("type") == "pong")
    ws.close()


def test_json_stream_data_fallback(server, say):
    ws = connect(server)
    start_original(ws)
    pcm = say("tell me a joke please", 16000) + silence(16000, 1200)
    samples = struct.unpack(f"<{len(pcm) // 2}h", pcm)
    for i in range(0, len(samples), 512):
        ws.send(json.dumps({"action": "stream_data", "input_type": "audio",
                            "data": list(samples[i:i + 512]), "sample_rate_hz": 16000}))
    t = until(ws, lambda f: f.get("type") == "user_transcript")
    assert "joke" in t["text"], t
    until(ws, lambda f: f.get("type") == "system" and f.get("data") == "turn end")
    ws.close()


def test_companiond_protocol_16k_frames_with_wyoming(server, say, asr_wyoming, asr_http):
    server.configure(asrModelUrl=asr_wyoming.url)
    try:
        ws = connect(server)
        start_native(ws, "wyoming")
        send_utterance(ws, say("what is the weather like", 16000), 16000, 512)
        seen = []
        t = until(ws, lambda f: f.get("type") == "transcript", seen=seen)
        assert "weather" in t["text"] and t["final"] is True, t
        kinds = [f.get("type") for f in seen if isinstance(f, dict)]
        assert kinds.index("vad") < kinds.index("transcript")
        until(ws, lambda f: f.get("type") == "assistant_delta")
        until(ws, lambda f: f.get("type") == "turn_end")
        events, text, n = asr_wyoming.asked[-1]
        assert events[:2] == ["transcribe", "audio-start"] and events[-1] == "audio-stop", events
        ws.send(json.dumps({"type": "mic", "state": "stop"}))
        f = until(ws, lambda f: f.get("type") == "mic_state")
        assert (f["state"], f["reason"]) == ("closed", "client")
        ws.close()
    finally:
        server.configure(asrModelUrl=asr_http.base)


def test_push_to_talk_release_ends_the_utterance(server, say):
    """The stream stops mid-utterance (no trailing silence): the utterance is still heard."""
    ws = connect(server)
    start_native(ws)
    for fr in frames_of(say("good morning my friend", 48000), 48000, 480):
        ws.send_binary(fr)
    ws.send(json.dumps({"type": "mic", "state": "stop"}))
    t = until(ws, lambda f: f.get("type") == "transcript")
    assert "morning" in t["text"], t
    until(ws, lambda f: f.get("type") == "turn_end")
    ws.close()


def test_silence_and_noise_start_no_turn(server, asr_http):
    ws = connect(server)
    start_native(ws)
    n = len(asr_http.requests)
    for pcm in (silence(48000, 3000), noise(48000, 3000), noise(48000, 2000, level=30000)):
        for fr in frames_of(pcm, 48000, 480):
            ws.send_binary(fr)
    got = quiet(ws, 2.0)
    assert not [f for f in got if f.get("type") in ("vad", "transcript", "assistant_delta")], got
    assert len(asr_http.requests) == n
    ws.close()


@pytest.mark.parametrize("dialect", ["native", "original"])
def test_invalid_frames_are_answered_and_the_socket_stays(server, dialect):
    ws = connect(server)
    if dialect == "native":
        start_native(ws)
    else:
        start_original(ws)
    bad = [
        b"NEKO" + struct.pack("<I", 48000) + b"\x01\x02\x03",        # odd length
        b"NEKO" + struct.pack("<I", 44100) + b"\0\0" * 100,           # other rate
        b"NEKO" + struct.pack("<I", 16000) + b"\0\0" * 1921,          # over 120 ms
        b"NEKO" + struct.pack("<I", 48000),                           # empty
        b"NOPE" + struct.pack("<I", 48000) + b"\0\0",                 # not NEKO
    ]
    for b in bad:
        ws.send_binary(b)
        f = until(ws, lambda f: f.get("type") == "error" or status_code(f) is not None
                  and status_code(f) != "ASR_INDEPENDENT_READY")
        text = json.dumps(f)
        assert "VOICE_BINARY_FRAME_INVALID" in text, f
    ws.send(json.dumps({"type": "ping"} if dialect == "native" else {"action": "ping"}))
    until(ws, lambda f: f.get("type") == "pong")
    ws.close()


def test_a_flood_is_refused_and_the_socket_stays(server, asr_http):
    ws = connect(server)
    start_native(ws)
    frame = next(frames_of(silence(48000, 120), 48000, 5760))
    for _ in range(400):  # 48 s of audio at once
        ws.send_binary(frame)
    ws.send(json.dumps({"type": "ping"}))
    got = []
    until(ws, lambda f: f.get("type") == "pong", seen=got)
    floods = [f for f in got if isinstance(f, dict) and f.get("code") == "VOICE_INPUT_FLOOD"]
    assert len(floods) == 1, got
    ws.close()


def test_no_recogniser_fails_the_session_and_text_still_works(server, asr_http):
    server.configure(asrModelUrl="")
    try:
        ws = connect(server)
        ws.send(json.dumps({"action": "start_session", "input_type": "audio"}))
        seen = []
        f = until(ws, lambda f: f.get("type") == "session_failed", seen=seen)
        assert f["input_mode"] == "audio" and f["reason"] == "asr_not_configured", f
        assert any(status_code(s) == "SESSION_START_FAILED" for s in seen if isinstance(s, dict))
        ws.send(json.dumps({"action": "stream_data", "input_type": "text", "data": "hi"}))
        until(ws, lambda f: f.get("type") == "system" and f.get("data") == "turn end")
        ws.close()
    finally:
        server.configure(asrModelUrl=asr_http.base)


@pytest.mark.parametrize("mode,expect", [("down", "asr_upstream_error"), ("empty", "empty")])
def test_a_failing_or_empty_recogniser_starts_no_turn(server, say, asr_http, mode, expect):
    asr_http.mode = mode
    try:
        ws = connect(server)
        start_native(ws)
        send_utterance(ws, say("what time is it", 48000), 48000, 480)
        f = until(ws, lambda f: f.get("type") in ("error", "transcript_dropped", "transcript"))
        if expect == "empty":
            assert f == {"type": "transcript_dropped", "reason": "empty", "text": "",
                         "utterance": f["utterance"]}, f
        else:
            assert f["type"] == "error" and f["code"] == expect, f
        got = quiet(ws, 1.0)
        assert not [g for g in got if g.get("type") in ("assistant_delta", "turn_end")], got
        # The text chat keeps working.
        ws.send(json.dumps({"type": "user_text", "text": "still there?"}))
        until(ws, lambda f: f.get("type") == "turn_end")
        ws.close()
    finally:
        asr_http.mode = "ok"


def test_speech_over_the_character_cuts_it_off(server, say, slow_tts, fake_llm):
    server.configure(ttsModelProvider="custom", ttsModelUrl=slow_tts.base, ttsModelId="tone",
                     ttsVoiceId="x", ttsModelApiKey="")
    try:
        ws = connect(server)
        ws.send(json.dumps({"action": "stream_data", "input_type": "text", "data": "talk to me"}))
        chunk = until(ws, lambda f: f.get("type") == "audio_chunk")
        speech_id = chunk["speech_id"]
        start_original(ws)
        seen = []
        for fr in frames_of(say("hello how are you today", 48000) + silence(48000, 1200), 48000, 480):
            ws.send_binary(fr)
            time.sleep(0.002)
        cut = until(ws, lambda f: f.get("type") == "user_activity", seen=seen)
        assert cut["interrupted_speech_id"] == speech_id
        after = []
        t = until(ws, lambda f: f.get("type") == "user_transcript", seen=after)
        assert "how are" in t["text"], t
        late = [f for f in after if isinstance(f, dict) and f.get("speech_id") == speech_id]
        assert not late, late
        until(ws, lambda f: f.get("type") == "system" and f.get("data") == "turn end")
        ws.close()
        # Only the part of the reply that was heard stays, marked.
        name = current_character(server.url)
        r = requests.get(server.url + "/api/memory/recent_file",
                         params={"filename": f"recent_{name}.json"}, timeout=10)
        entries = json.loads(r.json()["content"])
        cut_replies = [e for e in entries if e.get("interrupted")]
        assert cut_replies, entries[-4:]
        from conftest import REPLY
        heard = cut_replies[-1]["data"]["content"]
        assert len(heard) < len(REPLY) and REPLY.startswith(heard), heard
    finally:
        server.configure(ttsModelUrl="", ttsModelProvider="")
