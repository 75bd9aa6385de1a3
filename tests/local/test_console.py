"""The console chats with the built-in model in headless Chromium, and its
Local model section shows the file and the curated list."""

import json
import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from conftest import Companiond

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"


@pytest.fixture(scope="module")
def page():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: apt-get install -y chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        ctx = b.new_context(viewport={"width": 1100, "height": 860}, locale="en-US")
        pg = ctx.new_page()
        pg.set_default_timeout(30000)
        errors = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        yield pg
        assert not errors, errors
        b.close()


def test_the_console_chats_with_the_local_model(page, server, gguf):
    page.goto(server.url + "/console/#chat")
    expect(page.locator("#chat-conn")).to_have_text("connected")
    page.fill("#chat-input", "Hello there, who are you?")
    page.click("#chat-send")
    reply = page.locator(".msg.ai").last
    expect(reply).to_have_text(re.compile(r"\w{2,}"), timeout=120000)
    expect(page.locator(".msg.ai.streaming")).to_have_count(0, timeout=120000)
    assert "error" not in (reply.get_attribute("class") or "")


def test_the_local_model_section(page, server, gguf):
    page.goto(server.url + "/console/#local")
    expect(page.locator("#section-local")).to_be_visible()
    expect(page.locator("#local-file")).to_have_text(str(gguf))
    expect(page.locator("#local-check")).to_contain_text("llama")
    expect(page.locator('#local-models tr[data-model="qwen3-0.6b"]')).to_have_count(1)
    expect(page.locator('button[data-pull="qwen3-0.6b"]')).to_be_enabled()
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "local.png"), full_page=True)


def test_a_pull_shows_its_progress_bar(page, files, gguf, tmp_path):
    data = gguf.read_bytes()
    cat = tmp_path / "catalog.json"
    cat.write_text(json.dumps([files.entry("watch-me", "watch.gguf", data)]))
    files.slow = 0.05
    c = Companiond(tmp_path, env={"COMPANIOND_MODEL_CATALOG": str(cat)})
    try:
        page.goto(c.url + "/console/#local")
        row = page.locator('#local-models tr[data-model="watch-me"]')
        row.locator("button[data-pull]").click()
        expect(row.locator("progress")).to_be_visible()
        expect(row.locator(".state")).to_have_text("pulled", timeout=120000)
        expect(row.locator("button[data-use]")).to_be_enabled()
        row.locator("button[data-use]").click()
        expect(page.locator("#local-result")).to_contain_text("Saved: watch-me")
        assert json.loads((c.data / "config" / "core_config.json").read_text())["localModel"] == "watch-me"
    finally:
        c.stop()
