"""A reply spoken by a real engine (piper) reaches the chat socket as 48 kHz PCM of
the expected length, on companiond's protocol and on the original application's."""

import json

import requests
import websocket

from conftest import REPLY, pcm_stats


def ws_url(server, name="Companion"):
    return server.replace("http://", "ws://") + f"/ws/{name}"


def expected_samples(piper_speech, since):
    """48 kHz samples of the requests made after index `since` (each chunk is
    resampled on its own: round(n × 48000 / rate))."""
    return sum(round(n * 48000 / piper_speech.rate) for _, n, _ in piper_speech.requests[since:])


def test_native_protocol_speaks_the_reply(server, piper_speech):
    since = len(piper_speech.requests)
    ws = websocket.create_connection(ws_url(server), timeout=60)
    assert json.loads(ws.recv())["type"] == "session_started"
    ws.send(json.dumps({"type": "voice", "enabled": True}))
    state = json.loads(ws.recv())
    assert state == {"type": "voice_state", "enabled": True, "provider": "openai_compatible"}
    ws.send(json.dumps({"type": "user_text", "text": "how is the weather?"}))
    pcm, text, start, end, turn_end = b"", "", None, None, False
    while end is None or not turn_end:
        op, data = ws.recv_data()
        if op == websocket.ABNF.OPCODE_BINARY:
            assert data[:4] == b"SPK1"
            assert int.from_bytes(data[4:8], "little") == start["stream"]
            pcm += data[8:]
            continue
        f = json.loads(data)
        if f["type"] == "speech_start":
            start = f
        elif f["type"] == "assistant_delta":
            text += f["text"]
        elif f["type"] == "speech_end":
            end = f
        elif f["type"] == "turn_end":
            turn_end = True
        elif f["type"] == "error":
            raise AssertionError(f)
    ws.close()
    assert text == REPLY
    assert start["sample_rate"] == 48000 and start["encoding"] == "pcm_s16le"
    assert end == {"type": "speech_end", "speech_id": start["speech_id"], "reason": "done"}
    n, rms = pcm_stats(pcm)
    assert n == expected_samples(piper_speech, since) and n > 48000, n
    assert rms > 300, f"silent audio (RMS {rms:.0f})"
    bodies = [b for b, _, _ in piper_speech.requests[since:]]
    assert len(bodies) >= 2, bodies
    assert all(b["model"] == "piper" and b["voice"] == "joe" and b["response_format"] == "pcm" for b in bodies)
    # Chunks are synthesised in parallel (recorded in the order they finished).
    assert sorted(b["input"] for b in bodies) == sorted(
        ["Hello there,", "my friend.", "The weather is lovely today, so let us go for a walk."])
    # No key configured: no Authorization header.
    assert all(auth is None for _, _, auth in piper_speech.requests[since:])


def test_original_protocol_plays_audio_chunks(server, piper_speech):
    since = len(piper_speech.requests)
    ws = websocket.create_connection(ws_url(server), timeout=60)
    ws.send(json.dumps({"action": "start_session", "input_type": "text", "request_id": "R1"}))
    ws.send(json.dumps({"action": "stream_data", "input_type": "text", "data": "hi", "request_id": "R2"}))
    pcm, turn_ids, chunks, pending_header, done = b"", set(), 0, None, None
    while done is None:
        op, data = ws.recv_data()
        if op == websocket.ABNF.OPCODE_BINARY:
            assert pending_header is not None, "audio without its audio_chunk header"
            pcm += data
            pending_header = None
            continue
        assert pending_header is None, "a header not followed by its audio"
        f = json.loads(data)
        if f["type"] == "gemini_response":
            turn_ids.add(f["turn_id"])
        elif f["type"] == "audio_chunk":
            pending_header = f
            chunks += 1
            assert f["speech_id"] in turn_ids
        elif f["type"] == "audio_done":
            done = f
    ws.close()
    assert len(turn_ids) == 1 and done["speech_id"] in turn_ids
    n, rms = pcm_stats(pcm)
    assert chunks > 5
    assert n == expected_samples(piper_speech, since), n
    assert rms > 300


def test_wyoming_piper_speaks_the_reply(server, piper_speech, piper_wyoming):
    r = requests.post(server + "/api/config/core_api", json={
        "ttsModelUrl": piper_wyoming.url, "ttsVoiceId": "en_US-joe-medium"}, timeout=10)
    assert r.ok, r.text
    try:
        since = len(piper_wyoming.samples)
        ws = websocket.create_connection(ws_url(server), timeout=60)
        assert json.loads(ws.recv())["type"] == "session_started"
        ws.send(json.dumps({"type": "voice", "enabled": True}))
        assert json.loads(ws.recv())["provider"] == "wyoming"
        ws.send(json.dumps({"type": "user_text", "text": "hello"}))
        pcm, end = b"", None
        while end is None:
            op, data = ws.recv_data()
            if op == websocket.ABNF.OPCODE_BINARY:
                pcm += data[8:]
                continue
            f = json.loads(data)
            if f["type"] == "speech_end":
                end = f
            elif f["type"] == "error":
                raise AssertionError(f)
        ws.close()
        assert end["reason"] == "done"
        n, rms = pcm_stats(pcm)
        assert n == sum(round(k * 48000 / piper_speech.rate) for k in piper_wyoming.samples[since:])
        assert n > 48000 and rms > 300
        asked = [e for e in piper_wyoming.asked if e["type"] == "synthesize"]
        assert all(e["data"]["voice"] == {"name": "en_US-joe-medium"} for e in asked)
    finally:
        requests.post(server + "/api/config/core_api", json={
            "ttsModelUrl": piper_speech.base, "ttsVoiceId": "joe"}, timeout=10)
