"""companiond against llama.cpp's server with SmolLM2-135M-Instruct (docs/models.md)."""

import json
import threading
import time

import requests

from conftest import CHARACTER, N_CTX, Companiond, Llama, Proxy, binary

TOPICS = ["the sea", "old trains", "mountain villages", "winter markets", "city gardens",
          "night buses", "river boats", "small bakeries"]


def long_message(i):
    topic = TOPICS[i % len(TOPICS)]
    return (f"Message {i}. Let me tell you a long story about {topic}. " +
            f"I have been thinking about {topic} all week, about the people, the sounds, "
            "the smells, the colours of the early morning and what it all means to me. " * 3 +
            "What do you think about it?")


def estimate(body):
    return sum(len(m.get("content") or "") // 3 + 8 for m in body["messages"])


def test_a_long_conversation_keeps_answering_within_the_context(proxy, tmp_path):
    # Without tools: SmolLM2 calls any tool it is offered, every round.
    companiond = Companiond(binary(), tmp_path, proxy.base,
                            {"contextWindow": N_CTX, "conversationTools": False})
    try:
        long_conversation(companiond, proxy)
    finally:
        companiond.stop()


def long_conversation(companiond, proxy):
    replies = 0
    for i in range(40):
        reply, frames, _ = companiond.turn(long_message(i))
        errors = [f for f in frames if f["type"] == "error"]
        assert not [e for e in errors if e["code"] != "empty_reply"], errors
        if reply.strip():
            replies += 1
    # No empty assistant line was stored; every input is in the history.
    h = companiond.history()
    humans = [e for e in h if e["type"] == "human"]
    ais = [e for e in h if e["type"] == "ai"]
    assert len(humans) == 40
    assert all(e["data"]["content"].strip() for e in ais), "an empty reply was stored"
    # SmolLM2-135M now and then answers nothing at all (an end token first,
    # with a prompt that fits: see the size check below); that turn is an
    # `empty_reply` error frame and stores nothing. Measured: 37 of 40.
    assert replies >= 34, f"only {replies} of 40 turns were answered"
    # The prompts grew past the window's share and were cut: later prompts stop growing.
    chats = [r["body"] for r in proxy.chat_requests() if r["body"].get("stream")]
    assert len(chats) >= 40
    for body in chats:
        assert estimate(body) + body["max_tokens"] <= N_CTX + 64, estimate(body)
    assert len(chats[-1]["messages"]) < 2 * 40


class ToolPlugin:
    """A loopback tool callback: answers the secret word and records the calls."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        self.calls = []
        plugin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                plugin.calls.append(json.loads(self.rfile.read(n) or b"{}"))
                data = json.dumps({"output": {"secret_word": "PAPRIKA-42"},
                                   "is_error": False}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/tool"


def test_a_registered_tool_is_called_and_its_result_reaches_the_next_round(companiond, proxy):
    plugin = ToolPlugin()
    r = requests.post(companiond.url + "/api/tools/register", json={
        "name": "get_secret_word",
        "description": "Returns the secret word. Call it whenever the user asks for the secret word.",
        "parameters": {"type": "object", "properties": {}},
        "callback_url": plugin.url, "source": "plugin:test"}, timeout=30)
    assert r.ok and r.json()["ok"], r.text
    asked = "Call the get_secret_word tool now and tell me the secret word."
    for _ in range(3):
        _, frames, _ = companiond.turn(asked)
        if plugin.calls:
            break
    assert plugin.calls, "the model never called the tool"
    results = [f for f in frames if f["type"] == "tool_result"]
    assert results and results[0]["is_error"] is False
    bodies = [r["body"] for r in proxy.chat_requests()]
    assert all(b.get("tool_choice") == "auto" for b in bodies if b.get("tools"))
    # The round after the call carries the call (content "") and its result.
    after = [b for b in bodies if any(m["role"] == "tool" for m in b["messages"])]
    assert after, "no round carried the tool result"
    msgs = after[0]["messages"]
    call = next(m for m in msgs if m.get("tool_calls"))
    assert call["content"] == ""
    assert "PAPRIKA-42" in next(m for m in msgs if m["role"] == "tool")["content"]
    # llama.cpp accepted the rounds after it (no upstream error); a model that
    # keeps calling gets words out of the last round, offered no tools.
    assert not [f for f in frames if f["type"] == "error"], frames
    assert not after[-1].get("tools") or len(after) < 7
    plugin.httpd.shutdown()


def test_extraction_yields_facts_that_parse(companiond, proxy):
    for text in ["My name is Alice and I live in Berlin.",
                 "My cat is called Miso. I love my cat Miso very much.",
                 "I work as a nurse at the city hospital."]:
        companiond.turn(text)
    r = companiond.post("/api/memory/extract", {"character": CHARACTER})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["lines_read"] >= 6, body
    facts = json.loads((companiond.data / "memory" / CHARACTER / "facts.json").read_text())
    assert body["added"] >= 1 and len(facts) >= 1, (body, facts)
    assert all(f["text"].strip() for f in facts)
    extraction = [r["body"] for r in proxy.chat_requests()
                  if "extract-facts" in json.dumps(r["body"])]
    assert extraction and all(b.get("max_tokens") for b in extraction)
    assert extraction[-1].get("response_format"), "asked without a schema"


def test_killing_the_server_mid_turn_keeps_the_users_line(root, tmp_path):
    llama = Llama(root)
    # Uncapped: the reply must still be streaming when the server is killed.
    proxy = Proxy(llama.base, reply_cap=None)
    # No tools: the reply streams (llama.cpp answers tool rounds whole).
    c = Companiond(binary(), tmp_path, proxy.base,
                   {"contextWindow": N_CTX, "conversationTools": False})
    try:
        killed = []

        def on_frame(f):
            if f["type"] == "assistant_delta" and not killed:
                llama.kill()
                killed.append(True)

        text = "Tell me a very long story about a dragon who learns to bake bread."
        reply, frames, _ = c.turn(text, on_frame=on_frame, timeout=120)
        assert killed, "no delta arrived before the kill"
        errors = [f for f in frames if f["type"] == "error"]
        assert errors, frames
        h = c.history()
        assert h[0] == {"type": "human", "data": {"content": text}}
        if len(h) > 1:
            assert h[1]["source"] == "partial" and h[1]["data"]["content"].strip()
        assert "chat turn failed" in c.log_text()
    finally:
        c.stop()
        proxy.close()
        llama.kill()


def test_a_background_extraction_beside_a_chat_turn(companiond, proxy):
    """A chat turn's first token waits for at most one capped background call
    each: an extraction and a translation started just before it."""
    for text in ["I grow tomatoes on my balcony.", "My sister Jana lives in Prague."]:
        companiond.turn(text)
    _, _, alone = companiond.turn("How are you today?")
    done = []
    before = len(proxy.chat_requests())
    t = threading.Thread(target=lambda: done.append(
        companiond.post("/api/memory/extract", {"character": CHARACTER})))
    t.start()
    translated = []
    tr = threading.Thread(target=lambda: translated.append(companiond.post(
        "/api/translate", {"text": "I grow tomatoes on my balcony.", "target_lang": "fr",
                           "skip_google": True})))
    # The turn starts once the extraction's and the translation's calls have gone out.
    deadline = time.time() + 60
    while not [r for r in proxy.chat_requests()[before:] if not r["body"].get("stream")]:
        assert time.time() < deadline, "the extraction asked nothing in 60 s"
        assert t.is_alive() or not done or done[0].status_code == 200, done[0].text
        time.sleep(0.05)
    tr.start()
    while not [r for r in proxy.chat_requests()[before:]
               if "translator" in json.dumps(r["body"]).lower()]:
        assert time.time() < deadline, "the translation asked nothing in 60 s"
        time.sleep(0.05)
    _, _, beside = companiond.turn("What should I cook tonight?")
    t.join(600)
    tr.join(600)
    assert done and done[0].status_code == 200, done and done[0].text
    assert translated and translated[0].status_code == 200, translated and translated[0].text
    # The translation was capped (an uncapped small model talks on for minutes).
    asked = [r for r in proxy.chat_requests()[before:]
             if "translator" in json.dumps(r["body"]).lower()]
    assert asked and all(0 < r["body"].get("max_tokens", 0) <= 200 for r in asked), asked
    calls = [r for r in proxy.chat_requests() if not r["body"].get("stream")]
    assert calls, "the extraction asked nothing"
    # The extraction calls are capped: one of them costs at most its max_tokens.
    assert all(r["body"].get("max_tokens") for r in calls)
    budget = alone + max(60.0, 4 * alone)
    assert beside is not None and beside <= budget, (alone, beside)
