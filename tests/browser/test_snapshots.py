"""Snapshots, undo and backups in the console (docs/data.md): the Memory section
restores a character's history as it was before a save, and undoes that restore;
the Characters section brings a deleted character back from the trash; Settings
downloads a backup and restores it at the next start."""

import json
import zipfile

from playwright.sync_api import expect

from conftest import shot


def nav(page, section):
    page.click(f'nav a[data-section="{section}"]')
    expect(page.locator(f"#section-{section}")).to_be_visible()


def confirm(row):
    """The two presses of a confirm button (no modal dialogs)."""
    b = row.locator("button.danger")
    b.click()
    b.click()


def test_a_save_is_undone_and_the_undo_undone_from_the_memory_section(page, server):
    hist = server.data / "memory" / "Companion" / "recent.json"
    hist.parent.mkdir(parents=True, exist_ok=True)
    hist.write_text(json.dumps([
        {"type": "human", "data": {"content": "hello"}},
        {"type": "ai", "data": {"content": "hi there"}},
    ], indent=2))
    before = hist.read_bytes()
    page.goto(server.url + "/console/")
    nav(page, "memory")
    expect(page.locator("#mem-info")).to_contain_text("2 messages")
    expect(page.locator("#mem-snaps")).to_contain_text("No snapshot yet.")

    page.click("#mem-add")
    page.locator("#mem-entries textarea").last.fill("a third message")
    page.click("#mem-save")
    expect(page.locator("#mem-result")).to_contain_text("Saved 3 messages")
    saved = hist.read_bytes()
    assert saved != before

    row = page.locator('#mem-snaps tr[data-kind="save"]')
    expect(row).to_have_count(1)
    expect(row).to_contain_text("a history save")
    confirm(row)
    expect(page.locator("#mem-snaps-result")).to_contain_text("Restored the memory of Companion")
    expect(page.locator("#mem-info")).to_contain_text("2 messages")
    assert hist.read_bytes() == before
    shot(page, "memory-snapshots")

    # The restore is undone like any change.
    undo = page.locator('#mem-snaps tr[data-kind="restore"]')
    expect(undo).to_have_count(1)
    confirm(undo)
    expect(page.locator("#mem-info")).to_contain_text("3 messages")
    assert hist.read_bytes() == saved


def test_a_deleted_character_comes_back_from_the_trash(page, server):
    nav(page, "characters")
    expect(page.locator("#chars-trash")).to_contain_text("The trash is empty.")
    page.fill("#chars-new-name", "Mika")
    page.click("#chars-create button[type=submit]")
    row = page.locator('#chars-body tr[data-name="Mika"]')
    expect(row).to_have_count(1)
    confirm(row)
    expect(page.locator("#chars-result")).to_contain_text("Deleted Mika")
    expect(page.locator('#chars-body tr[data-name="Mika"]')).to_have_count(0)

    trash = page.locator('#chars-trash tr[data-name="Mika"]')
    expect(trash).to_have_count(1)
    shot(page, "characters-trash")
    trash.get_by_role("button", name="Bring back").click()
    expect(page.locator("#chars-trash-result")).to_contain_text("Mika is back")
    expect(page.locator('#chars-body tr[data-name="Mika"]')).to_have_count(1)
    expect(page.locator("#chars-trash")).to_contain_text("The trash is empty.")
    assert any(c["name"] == "Mika" for c in server.get("/api/characters").json()["characters"])


def test_a_backup_is_downloaded_and_restored_at_the_next_start(page, server, tmp_path):
    nav(page, "settings")
    with page.expect_download() as d:
        page.click("#backup-download")
    archive = tmp_path / "backup.zip"
    d.value.save_as(archive)
    expect(page.locator("#backup-result")).to_contain_text("Backup downloaded")
    with zipfile.ZipFile(archive) as z:
        names = z.namelist()
        assert names[0] == "companiond-backup.json"
        chars = json.loads(z.read("config/characters.json"))
    assert "Mika" in chars["characters"]

    # A change after the backup, then the backup restored from the console.
    assert server.post("/api/characters/profile", {"name": "Nora"}).status_code == 200
    page.set_input_files("#backup-file", str(archive))
    page.click("#backup-restore")
    expect(page.locator("#backup-result")).to_contain_text("restart companiond")
    shot(page, "settings-backup")
    server.restart()
    names = [c["name"] for c in server.get("/api/characters").json()["characters"]]
    assert "Mika" in names and "Nora" not in names, names
    aside = list(server.root.glob("data.replaced-*"))
    assert len(aside) == 1, aside
