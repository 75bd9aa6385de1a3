"""companiond's own MCP endpoint (/mcp) driven by the official Python SDK's client
(docs/mcp.md): off by default, bearer token, loopback Origin only, the memory tools."""

import asyncio
import json
import time

import httpx2
import pytest
import requests
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from conftest import Companiond


@pytest.fixture(scope="module")
def cd(tmp_root, fake_llm):
    c = Companiond(tmp_root / "endpoint")
    c.configure_llm(fake_llm.base)
    yield c
    c.stop()


def session_run(url, token, fn, headers=None):
    """Open an SDK client session on `url` with `token` and run `fn(session)`."""
    async def main():
        h = {"Authorization": f"Bearer {token}", **(headers or {})}
        async with httpx2.AsyncClient(headers=h, timeout=30) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    return await fn(s)
    return asyncio.run(asyncio.wait_for(main(), 60))


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


def test_off_until_turned_on(cd):
    r = requests.post(cd.url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
    assert r.status_code == 404
    view = cd.get("/api/mcp/endpoint").json()
    assert view["enabled"] is False and view["path"] == "/mcp"
    # turning it on needs the CSRF token
    assert cd.send("POST", "/api/mcp/endpoint", {"enabled": True}, csrf=False).status_code == 403
    r = cd.send("POST", "/api/mcp/endpoint", {"enabled": True})
    assert r.status_code == 200, r.text
    assert r.json()["enabled"] is True and len(r.json()["token"]) == 64
    assert json.loads((cd.data / "config" / "mcp_endpoint.json").read_text())["enabled"] is True


def test_sdk_client_lists_tools_and_reads_memory(cd):
    token = cd.get("/api/mcp/endpoint").json()["token"]
    frames = cd.turn("My sister is called Philippa and she keeps bees.")
    assert frames[-1]["type"] == "turn_end"

    async def tools(s):
        return [t.name for t in (await s.list_tools()).tools]
    names = session_run(cd.url + "/mcp", token, tools)
    assert {"list_characters", "search_memory", "recent_history", "memory_context",
            "add_fact"} <= set(names)

    async def chars(s):
        return text_of(await s.call_tool("list_characters", {}))
    got = json.loads(session_run(cd.url + "/mcp", token, chars))
    assert got["current"] == "Companion" and "Companion" in got["characters"]

    async def history(s):
        return text_of(await s.call_tool("recent_history", {"limit": 5}))
    lines = json.loads(session_run(cd.url + "/mcp", token, history))["lines"]
    assert {"speaker": "user", "text": "My sister is called Philippa and she keeps bees."} in lines

    async def search(s):
        r = await s.call_tool("search_memory", {"query": "Philippa"})
        return r.is_error, text_of(r)
    deadline = time.time() + 30
    found = (None, "")
    while time.time() < deadline:
        found = session_run(cd.url + "/mcp", token, search)
        if "Philippa" in found[1]:
            break
        time.sleep(0.5)
    assert found[0] is False and "Philippa" in found[1], found

    async def unknown(s):
        r = await s.call_tool("recent_history", {"character": "Nobody"})
        return r.is_error, text_of(r)
    assert session_run(cd.url + "/mcp", token, unknown) == (True, "no character named Nobody")


def test_add_fact_then_find_it(cd):
    token = cd.get("/api/mcp/endpoint").json()["token"]

    async def add(s):
        r = await s.call_tool("add_fact", {"text": "The user's favourite tea is genmaicha", "importance": 7})
        return r.is_error, text_of(r)
    is_error, text = session_run(cd.url + "/mcp", token, add)
    assert is_error is False, text
    fact = json.loads(text)
    assert fact["text"] == "The user's favourite tea is genmaicha" and fact["importance"] == 7
    listed = cd.get("/api/memory/facts?character=Companion").json()
    assert fact["id"] in json.dumps(listed)

    async def search(s):
        return text_of(await s.call_tool("search_memory", {"query": "genmaicha"}))
    assert "genmaicha" in session_run(cd.url + "/mcp", token, search)

    async def resources(s):
        listed = [str(r.uri) for r in (await s.list_resources()).resources]
        facts = await s.read_resource("companiond://character/Companion/facts")
        persona = await s.read_resource("companiond://character/Companion/persona")
        return listed, facts.contents[0].text, persona.contents[0].text
    listed, facts, persona = session_run(cd.url + "/mcp", token, resources)
    assert "companiond://character/Companion/facts" in listed
    assert "companiond://character/Companion/persona" in listed
    assert any(f["id"] == fact["id"] and "genmaicha" in f["text"] for f in json.loads(facts))
    assert isinstance(json.loads(persona), dict)

    async def missing(s):
        await s.read_resource("companiond://character/Nobody/facts")
    with pytest.raises(Exception):
        session_run(cd.url + "/mcp", token, missing)

    async def empty(s):
        r = await s.call_tool("add_fact", {"text": "   "})
        return r.is_error
    assert session_run(cd.url + "/mcp", token, empty) is True


def test_wrong_token_refused(cd):
    r = requests.post(cd.url + "/mcp", headers={"Authorization": "Bearer wrong"},
                      json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    r = requests.post(cd.url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
    assert r.status_code == 401

    async def tools(s):
        return await s.list_tools()
    with pytest.raises(BaseException):
        session_run(cd.url + "/mcp", "wrong", tools)


def test_foreign_origin_refused(cd):
    token = cd.get("/api/mcp/endpoint").json()["token"]
    r = requests.post(cd.url + "/mcp", headers={"Authorization": f"Bearer {token}",
                                                "Origin": "http://evil.example"},
                      json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
    assert r.status_code == 403

    async def tools(s):
        return [t.name for t in (await s.list_tools()).tools]
    with pytest.raises(BaseException):
        session_run(cd.url + "/mcp", token, tools, headers={"Origin": "http://evil.example"})
    # a loopback origin is fine
    assert "search_memory" in session_run(cd.url + "/mcp", token, tools,
                                          headers={"Origin": "http://127.0.0.1:5173"})


def test_rotate_and_turn_off(cd):
    old = cd.get("/api/mcp/endpoint").json()["token"]
    new = cd.send("POST", "/api/mcp/endpoint", {"rotate_token": True}).json()["token"]
    assert new != old

    async def tools(s):
        return len((await s.list_tools()).tools)
    assert session_run(cd.url + "/mcp", new, tools) >= 4
    with pytest.raises(BaseException):
        session_run(cd.url + "/mcp", old, tools)
    assert cd.send("POST", "/api/mcp/endpoint", {"enabled": False}).json()["enabled"] is False
    r = requests.post(cd.url + "/mcp", headers={"Authorization": f"Bearer {new}"},
                      json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
    assert r.status_code == 404
