"""Character cards in the console's Characters section: import a PNG card and a
JSON card built here, a refused file said in words (nothing created), and the
Export links giving back a V3 PNG that also carries the V2 chunk."""

import base64
import json
import struct
import zlib

from playwright.sync_api import expect

from files import png


def nav(page, section):
    page.click(f'nav a[data-section="{section}"]')
    expect(page.locator(f"#section-{section}")).to_be_visible()


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def card_png(card, key="ccv3"):
    """A real PNG with the card as a base64 tEXt chunk before IEND."""
    image = png()
    text = key.encode() + b"\0" + base64.b64encode(json.dumps(card).encode())
    return image[:-12] + chunk(b"tEXt", text) + image[-12:]


def text_chunks(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, out = 8, {}
    while at < len(data):
        (n,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + n]
        if kind == b"tEXt":
            k, v = body.split(b"\0", 1)
            out[k.decode()] = json.loads(base64.b64decode(v))
        at += 12 + n
    return out


def names(server):
    return [c["name"] for c in server.get("/api/characters").json()["characters"]]


def test_import_cards_from_the_console(page, server, tmp_path, watch):
    page.goto(server.url + "/")
    nav(page, "characters")
    card = {"spec": "chara_card_v3", "spec_version": "3.0",
            "data": {"name": "Mika", "description": "A curious cat.", "first_mes": "Hi {{user}}!"}}
    f = tmp_path / "mika.png"
    f.write_bytes(card_png(card))
    page.set_input_files("#cards-file", str(f))
    page.click("#cards-import button[type=submit]")
    expect(page.locator("#cards-result")).to_contain_text("Imported Mika from a PNG card with its image")
    expect(page.locator('#chars-body tr[data-name="Mika"]')).to_be_visible()
    assert "Mika" in names(server)
    assert server.get("/api/characters/card/Mika/image").content == f.read_bytes()

    # The same card again: a new name, the first one untouched.
    page.set_input_files("#cards-file", str(f))
    page.click("#cards-import button[type=submit]")
    expect(page.locator("#cards-result")).to_contain_text("Imported Mika(1) (the card says “Mika”)")

    # A JSON card (V1 flat fields).
    j = tmp_path / "rin.json"
    j.write_text(json.dumps({"name": "Rin", "description": "Quiet.", "personality": "shy"}))
    page.set_input_files("#cards-file", str(j))
    page.click("#cards-import button[type=submit]")
    expect(page.locator("#cards-result")).to_contain_text("Imported Rin from a JSON card")


def test_a_refused_card_is_said_in_words_and_creates_nothing(page, server, tmp_path):
    before = names(server)
    bad = tmp_path / "plain.png"
    bad.write_bytes(png())
    page.set_input_files("#cards-file", str(bad))
    page.click("#cards-import button[type=submit]")
    expect(page.locator("#cards-result")).to_contain_text("was not imported")
    expect(page.locator("#cards-result")).to_contain_text("no character card chunk")
    assert names(server) == before


def test_export_links_give_the_card_back(page, server, watch):
    row = page.locator('#chars-body tr[data-name="Mika"]')
    with page.expect_download() as d:
        row.get_by_role("link", name="Export Mika as PNG").click()
    data = open(d.value.path(), "rb").read()
    chunks = text_chunks(data)
    assert chunks["ccv3"]["spec"] == "chara_card_v3"
    assert chunks["chara"]["spec"] == "chara_card_v2"
    assert chunks["ccv3"]["data"]["description"] == "A curious cat."
    with page.expect_download() as d:
        row.get_by_role("link", name="Export Mika as JSON").click()
    assert json.load(open(d.value.path()))["data"]["first_mes"] == "Hi {{user}}!"
    assert watch.errors == []


def test_chat_opens_with_the_card_greeting(page, server, watch):
    nav(page, "characters")
    page.locator('#chars-body tr[data-name="Mika"]').get_by_role("button", name="Make current").click()
    expect(page.locator("#current-name")).to_have_text("Mika")
    nav(page, "chat")
    expect(page.locator("#chat-conn")).to_have_text("connected")
    expect(page.locator("#chat-log .msg.ai").first).to_contain_text("Hi User!")
    # The greeting is the first line of the stored history: not greeted twice.
    nav(page, "characters")
    nav(page, "chat")
    expect(page.locator("#chat-conn")).to_have_text("connected")
    expect(page.locator("#chat-log .msg.ai")).to_have_count(1)
    assert watch.errors == []
