"""A person's first hour with the console, in order, in one browser page.

The tests of this module share one companiond (fresh data dir), one fake model and
one page: each step starts where the previous one left off. Every section is
photographed into docs/console/<section>.png.
"""

import json
import re

from playwright.sync_api import expect

from conftest import shot
from files import png, vmd, wav


def nav(page, section):
    page.click(f'nav a[data-section="{section}"]')
    expect(page.locator(f"#section-{section}")).to_be_visible()


def test_open_root_and_see_status(page, server):
    page.goto(server.url + "/")
    expect(page).to_have_title(re.compile("Start"))
    expect(page.locator("#st-status")).to_have_text("ready")
    expect(page.locator("#st-version")).to_have_text(re.compile(r"\d+\.\d+\.\d+"))
    expect(page.locator("#st-datadir")).to_have_text(str(server.data))
    expect(page.locator("#st-current")).to_have_text("Companion")
    expect(page.locator("#current-name")).to_have_text("Companion")
    expect(page.locator("#st-model")).to_have_text("not set up yet")
    expect(page.locator("#setup-intro")).to_contain_text("No language model is set up yet")
    shot(page, "start-first-run")
    # the console is always reachable under /console/ too
    assert server.get("/console/").text == server.get("/").text


def test_chat_without_model_says_so(page):
    nav(page, "chat")
    expect(page.locator("#chat-conn")).to_have_text("connected")
    page.fill("#chat-input", "Is anyone there?")
    page.press("#chat-input", "Enter")
    err = page.locator(".msg.error").last
    expect(err).to_contain_text("No language model is set up yet")
    expect(err.locator("a[href='#start']")).to_be_visible()


def test_configure_model_through_the_form(page, server, fake_llm):
    nav(page, "start")
    # a server that is not running: the error is said in words
    page.get_by_role("button", name="LM Studio").click()
    expect(page.locator("#setup-url")).to_have_value("http://127.0.0.1:1234/v1")
    page.fill("#setup-url", "http://127.0.0.1:9/v1")
    page.click("#setup-list")
    expect(page.locator("#setup-result")).to_contain_text("Could not list models: Nothing answered at that address")

    page.fill("#setup-url", fake_llm.base)
    page.click("#setup-list")
    expect(page.locator("#setup-result")).to_contain_text("The server offers 2 models: fake-chat, fake-small")
    expect(page.locator("#setup-model")).to_have_value("fake-chat")
    page.click("#setup-test")
    expect(page.locator("#setup-result")).to_contain_text("Connection works")
    page.click("#setup-save")
    expect(page.locator("#setup-result")).to_contain_text("Saved.")
    expect(page.locator("#st-model")).to_have_text(f"fake-chat at {fake_llm.base}")
    cfg = server.get("/api/config/core_api").json()
    assert cfg["enableCustomApi"] is True
    assert cfg["conversationModelUrl"] == fake_llm.base
    assert cfg["emotionModelId"] == "fake-chat"
    shot(page, "start")


def test_send_a_message_and_see_the_streamed_reply(page, server, fake_llm):
    nav(page, "chat")
    expect(page.locator("#chat-conn")).to_have_text("connected")
    before = len(fake_llm.chat_requests())
    # record how the reply grows, to see that it is streamed
    page.evaluate("""() => {
        window.__growth = [];
        new MutationObserver(() => {
            const b = document.querySelector('.msg.ai.streaming .text');
            if (b) window.__growth.push(b.textContent.length);
        }).observe(document.getElementById('chat-log'), {subtree: true, childList: true, characterData: true});
    }""")
    page.fill("#chat-input", "Nice to meet you")
    page.click("#chat-send")
    reply = page.locator(".msg.ai").last
    expect(reply).to_contain_text("Hello! You said: Nice to meet you")
    expect(page.locator(".msg.ai.streaming")).to_have_count(0)
    growth = page.evaluate("window.__growth")
    assert len(set(growth)) >= 3, f"the reply did not arrive in pieces: {growth}"
    stream_reqs = [r for r in fake_llm.chat_requests()[before:] if r["body"].get("stream")]
    assert stream_reqs and stream_reqs[-1]["body"]["model"] == "fake-chat"

    # the history comes back from the recent file after a reload
    page.reload()
    expect(page.locator(".msg.human").filter(has_text="Nice to meet you")).to_have_count(1)
    expect(page.locator(".msg.ai").filter(has_text="Hello! You said: Nice to meet you")).to_have_count(1)
    shot(page, "chat")


def test_unreachable_model_and_reconnect_after_restart(page, server, fake_llm):
    # point the model at a closed port behind the page's back
    r = server.post("/api/config/core_api", {"conversationModelUrl": "http://127.0.0.1:9/v1"})
    assert r.json()["success"] is True
    page.fill("#chat-input", "Are you there?")
    page.press("#chat-input", "Enter")
    expect(page.locator(".msg.error").last).to_contain_text("The language model is unreachable")
    server.post("/api/config/core_api", {"conversationModelUrl": fake_llm.base})

    # companiond restarts: the page notices and reconnects by itself
    server.restart()
    expect(page.locator("#chat-conn")).to_have_text("connected", timeout=20000)
    page.fill("#chat-input", "Back again")
    page.press("#chat-input", "Enter")
    expect(page.locator(".msg.ai").last).to_contain_text("Hello! You said: Back again")


def test_create_and_switch_character(page, server):
    nav(page, "characters")
    # a refused name is explained
    page.fill("#chars-new-name", "a/b")
    page.click("#chars-create button[type=submit]")
    expect(page.locator("#chars-result")).to_contain_text("may not contain / or \\")
    expect(page.locator("#chars-rules")).to_have_attribute("open", "")
    page.fill("#chars-new-name", "api")
    page.click("#chars-create button[type=submit]")
    expect(page.locator("#chars-result")).to_contain_text("reserved for a page")

    page.fill("#chars-new-name", "小雪")
    page.press("#chars-new-name", "Enter")
    expect(page.locator("#chars-result")).to_contain_text("Created 小雪")
    row = page.locator('tr[data-name="小雪"]')
    expect(row).to_be_visible()
    row.get_by_role("button", name="Make current").click()
    expect(page.locator("#current-name")).to_have_text("小雪")
    assert server.get("/api/characters").json()["current"] == "小雪"

    # rename through the rename transaction
    page.fill("#chars-new-name", "Temp")
    page.press("#chars-new-name", "Enter")
    expect(page.locator('tr[data-name="Temp"]')).to_be_visible()
    page.locator('tr[data-name="Temp"]').get_by_role("button", name="Rename").click()
    page.fill('input[aria-label="New name for Temp"]', "ミク")
    page.press('input[aria-label="New name for Temp"]', "Enter")
    expect(page.locator("#chars-result")).to_contain_text("Renamed Temp to ミク")
    expect(page.locator('tr[data-name="ミク"]')).to_be_visible()
    names = [c["name"] for c in server.get("/api/characters").json()["characters"]]
    assert names == ["Companion", "小雪", "ミク"]
    # delete needs a second press
    btn = page.locator('tr[data-name="ミク"]').get_by_role("button", name="Delete")
    btn.click()
    expect(page.locator('tr[data-name="ミク"] button.armed')).to_have_text("Really delete ミク?")
    page.locator('tr[data-name="ミク"] button.armed').click()
    expect(page.locator("#chars-result")).to_contain_text("Deleted ミク")
    page.fill("#chars-new-name", "Mika (friend)")
    page.press("#chars-new-name", "Enter")
    expect(page.locator('tr[data-name="Mika (friend)"]')).to_be_visible()
    shot(page, "characters")

    # the chat now talks to 小雪
    nav(page, "chat")
    expect(page.locator("#chat-name")).to_have_text("小雪")
    expect(page.locator("#chat-conn")).to_have_text("connected")
    page.fill("#chat-input", "你好")
    page.press("#chat-input", "Enter")
    expect(page.locator(".msg.ai").last).to_contain_text("Hello! You said: 你好")


def test_edit_history_and_refuse_a_conflict(page, server):
    nav(page, "memory")
    expect(page.locator("#mem-file")).to_have_value("recent_小雪.json")
    entries = page.locator("#mem-entries textarea")
    expect(entries).to_have_count(2)
    expect(entries.nth(0)).to_have_value("你好")
    entries.nth(1).fill("你好！我是小雪。")
    page.click("#mem-add")
    page.locator("#mem-entries textarea").last.fill("A note I added")
    page.click("#mem-save")
    expect(page.locator("#mem-result")).to_have_text("Saved 3 messages.")
    content = json.loads(server.get("/api/memory/recent_file", params={"filename": "recent_小雪.json"}).json()["content"])
    assert [e["data"]["content"] for e in content] == ["你好", "你好！我是小雪。", "A note I added"]
    assert [e["type"] for e in content] == ["human", "ai", "human"]

    # the extraction's state, then the memory toggles
    status = page.locator("#mem-extract-status")
    expect(status).not_to_be_empty()
    expect(status).not_to_contain_text("Off:")
    review = page.locator("#mem-review")
    expect(review).to_be_checked()
    review.click()
    expect(page.locator("#mem-toggle-result")).to_have_text("Automatic review is now off.")
    expect(status).to_contain_text("Off: ")
    assert server.get("/api/memory/extraction", params={"character": "小雪"}).json()["enabled"] is False
    assert server.get("/api/memory/review_config").json()["enabled"] is False
    shot(page, "memory")

    # another window changes the history behind the page's back
    cur = server.get("/api/memory/recent_file", params={"filename": "recent_小雪.json"}).json()
    r = server.post("/api/memory/recent_file/save", {
        "filename": "recent_小雪.json", "fingerprint": cur["fingerprint"],
        "identity_token": cur["identity_token"],
        "chat": [{"role": "human", "text": "changed in another window"}]})
    assert r.status_code == 200, r.text
    page.locator("#mem-entries textarea").first.fill("my stale edit")
    page.click("#mem-save")
    expect(page.locator("#mem-result")).to_contain_text("changed elsewhere — reload")
    after = json.loads(server.get("/api/memory/recent_file", params={"filename": "recent_小雪.json"}).json()["content"])
    assert [e["data"]["content"] for e in after] == ["changed in another window"], "a conflict must never overwrite"
    shot(page, "memory-conflict")
    page.click("#mem-reload")
    expect(page.locator("#mem-entries textarea")).to_have_count(1)
    expect(page.locator("#mem-entries textarea").first).to_have_value("changed in another window")


def test_upload_a_song_with_progress(page, server, tmp_path):
    nav(page, "library")
    song = tmp_path / "晨光 Morning Light.wav"
    song.write_bytes(wav(seconds=60, seed=7))  # ~2.6 MB
    # slow the upload down so its progress is visible, as on a big file
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": 1_000_000})
    page.evaluate("""() => {
        window.__progress = [];
        const bar = document.querySelector('#songs-progress progress');
        new MutationObserver(() => window.__progress.push(Number(bar.value)))
            .observe(bar, {attributes: true, attributeFilter: ['value']});
    }""")
    page.set_input_files("#songs-files", str(song))
    page.click("#songs-upload button[type=submit]")
    expect(page.locator("#songs-progress")).to_be_visible()
    expect(page.locator("#songs-progress span")).to_contain_text("% (", timeout=5000)
    shot(page, "library-upload-progress", full_page=False)
    expect(page.locator("#songs-result")).to_contain_text("Added 1 song: 晨光 Morning Light", timeout=30000)
    cdp.send("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    cdp.detach()
    seen = page.evaluate("window.__progress")
    assert any(0 < v < 100 for v in seen), f"no intermediate progress: {seen}"
    expect(page.locator("#songs-progress progress")).to_have_attribute("value", "100")
    songs = server.get("/api/jukebox/config").json()["songs"]
    assert [s["name"] for s in songs.values()] == ["晨光 Morning Light"]

    # an action, bound to the song; then the song is renamed and hidden
    dance = tmp_path / "dance.vmd"
    dance.write_bytes(vmd())
    page.set_input_files("#actions-files", str(dance))
    page.click("#actions-upload button[type=submit]")
    expect(page.locator("#actions-result")).to_contain_text("Added 1 action: dance")
    row = page.locator("#songs-body tr").first
    row.get_by_role("button", name="Bind dance").click()
    page.locator("#songs-body").get_by_role("button", name="Bind", exact=True).click()
    expect(page.locator("#songs-result")).to_contain_text("dance now dances to 晨光 Morning Light")
    song_id = next(iter(songs))
    cfg = server.get("/api/jukebox/config").json()
    assert cfg["songs"][song_id]["defaultAction"] == "dance"
    page.locator("#songs-body tr").first.get_by_role("button", name="Edit").click()
    page.fill('input[aria-label="Artist"]', "小雪")
    page.locator("#songs-body").get_by_role("button", name="Save").click()
    expect(page.locator("#songs-result")).to_contain_text("Saved")
    expect(page.locator("#songs-body tr").first).to_contain_text("小雪")


def test_upload_a_pngtuber_package(page, server, tmp_path):
    pkg = tmp_path / "Happy Fox"
    pkg.mkdir()
    (pkg / "model.json").write_text(json.dumps({
        "name": "Happy Fox", "model_type": "pngtuber",
        "pngtuber": {"idle_image": "idle.png", "talking_image": "talk.png"}}))
    (pkg / "idle.png").write_bytes(png(rgba=(250, 140, 40, 255)))
    (pkg / "talk.png").write_bytes(png(rgba=(250, 60, 40, 255)))
    page.set_input_files("#png-folder", str(pkg))
    page.click("#png-upload button[type=submit]")
    expect(page.locator("#png-result")).to_contain_text("Imported the PNGTuber model Happy Fox (simple package)")
    expect(page.locator("#png-body")).to_contain_text("Happy_Fox")
    models = server.get("/api/model/pngtuber/models").json()["models"]
    assert [m["folder"] for m in models] == ["Happy_Fox"]
    expect(page.locator("#png-body img.thumb")).to_have_count(1)
    shot(page, "library")


def test_cloud_save_upload_and_download(page, server):
    nav(page, "cloud")
    row = page.locator('#cloud-body tr[data-name="小雪"]')
    expect(row).to_contain_text("only on this device")
    row.get_by_role("button", name="Upload").click()
    expect(page.locator("#cloud-result")).to_contain_text("Uploaded 小雪 to the cloud (version #1)")
    expect(row).to_contain_text("the same on both sides")

    # upload again: the page asks before replacing the cloud copy
    row.get_by_role("button", name="Upload").click()
    expect(page.locator("#cloud-ask")).to_contain_text("The cloud already has a copy of 小雪")
    page.get_by_role("button", name="Replace the cloud copy").click()
    expect(page.locator("#cloud-result")).to_contain_text("Uploaded 小雪 to the cloud (version #2)")

    # change the local history, then bring the cloud copy back
    cur = server.get("/api/memory/recent_file", params={"filename": "recent_小雪.json"}).json()
    server.post("/api/memory/recent_file/save", {
        "filename": "recent_小雪.json", "fingerprint": cur["fingerprint"],
        "identity_token": cur["identity_token"], "chat": [{"role": "human", "text": "local change"}]})
    page.click("#cloud-refresh")
    expect(row).to_contain_text("different on each side")
    row.get_by_role("button", name="Download").click()
    expect(page.locator("#cloud-ask")).to_contain_text("This device already has 小雪")
    expect(page.locator("#cloud-backup")).to_be_checked()
    page.get_by_role("button", name="Replace the local copy").click()
    expect(page.locator("#cloud-result")).to_contain_text("Downloaded 小雪 from the cloud (version #2)")
    expect(page.locator("#cloud-result")).to_contain_text("backed up to")
    expect(row).to_contain_text("the same on both sides")
    content = json.loads(server.get("/api/memory/recent_file", params={"filename": "recent_小雪.json"}).json()["content"])
    assert [e["data"]["content"] for e in content] == ["changed in another window"]
    shot(page, "cloud")


def test_settings(page, server):
    nav(page, "settings")
    page.check('input[name="pro-mode"][value="frequent"]')
    expect(page.locator("#pro-result")).to_contain_text("Proactive chat is now “frequent”")
    assert server.get("/api/proactive/mode").json()["mode"] == "frequent"
    page.click("#section-settings details summary")
    page.fill("#pro-proactiveChatInterval", "42")
    page.click("#pro-save")
    expect(page.locator("#pro-result")).to_contain_text("the mode is now “custom”")
    assert server.get("/api/proactive/settings").json()["settings"]["proactiveChatInterval"] == 42

    page.check("#conv-subtitleEnabled")
    page.fill("#conv-userLanguage", "zh-CN")
    page.click("#conv-save")
    expect(page.locator("#conv-result")).to_have_text("Saved.")
    s = server.get("/api/config/conversation-settings").json()["settings"]
    assert s["subtitleEnabled"] is True and s["userLanguage"] == "zh-CN"
    # a change from elsewhere makes the next save of this page a refused conflict
    server.post("/api/config/conversation-settings", {"focusModeEnabled": True})
    page.check("#conv-mergeMessagesEnabled")
    page.click("#conv-save")
    expect(page.locator("#conv-result")).to_contain_text("changed elsewhere — reload")

    page.click("#proxy-direct")
    expect(page.locator("#proxy-result")).to_contain_text("Requests now go directly")
    page.click("#proxy-system")
    expect(page.locator("#proxy-result")).to_contain_text("follow the system proxy again")
    page.click("#conv-reload")
    shot(page, "settings")


def test_keyboard_and_small_window(page, server):
    page.set_viewport_size({"width": 390, "height": 780})
    page.goto(server.url + "/#start")
    page.reload()
    expect(page.locator("#section-start")).to_be_visible()
    # Tab from the top reaches the skip link, then the navigation
    page.keyboard.press("Tab")
    expect(page.locator(".skip")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#section-start h1")).to_be_focused()
    # the navigation is reachable with Tab alone
    page.evaluate("document.activeElement.blur()")
    for _ in range(20):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.dataset.section") == "chat":
            break
    expect(page.locator('nav a[data-section="chat"]')).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#section-chat")).to_be_visible()
    expect(page.locator("#chat-conn")).to_have_text("connected")
    page.keyboard.type("Typed with the keyboard")
    page.keyboard.press("Enter")
    expect(page.locator(".msg.ai").last).to_contain_text("Hello! You said: Typed with the keyboard")
    # nothing wider than the window
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"the page is {overflow}px wider than a small window"
    shot(page, "small-window", full_page=False)
    page.set_viewport_size({"width": 1100, "height": 860})


def test_every_mutation_carried_the_csrf_token_and_no_script_failed(page, watch):
    assert watch.mutations, "the walk made no changes?"
    missing = [(m, u) for m, u, t in watch.mutations if not t]
    assert not missing, f"mutations without X-CSRF-Token: {missing}"
    token = page.evaluate("fetch('/api/config/page_config').then(r => r.json()).then(b => b.csrf_token)")
    assert all(t == token for _, _, t in watch.mutations[-3:])
    assert not watch.errors, f"script errors in the page: {watch.errors}"
