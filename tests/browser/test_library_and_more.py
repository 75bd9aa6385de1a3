"""The rest of the Library (hide, unbind, delete, export/import, MMD) and the
built-in-provider setup, on a fresh companiond."""

import json
import zipfile

from playwright.sync_api import expect

from conftest import shot
from files import vmd, wav


def nav(page, section):
    page.click(f'nav a[data-section="{section}"]')
    expect(page.locator(f"#section-{section}")).to_be_visible()


def test_builtin_provider_setup(page, server):
    page.goto(server.url + "/console/")
    page.check('input[name="setup-kind"][value="builtin"]')
    expect(page.locator("#setup-builtin")).to_be_visible()
    expect(page.locator("#setup-custom")).to_be_hidden()
    page.select_option("#setup-provider", "deepseek")
    # no key: the probe is refused before any request leaves the machine
    page.click("#setup-list")
    expect(page.locator("#setup-result")).to_contain_text("This needs an API key")
    page.fill("#setup-key", "sk-test-1234567890")
    page.click("#setup-save")
    expect(page.locator("#setup-result")).to_contain_text("Saved.")
    expect(page.locator("#st-model")).to_have_text("DeepSeek (built-in provider)")
    cfg = server.get("/api/config/core_api").json()
    assert cfg["coreApi"] == "deepseek" and cfg["enableCustomApi"] is False
    assert cfg["coreApiKey"] == "__NEKO_SECRET_MASKED__"
    # the form keeps the key masked; saving again keeps the stored key
    page.reload()
    expect(page.locator("#setup-provider")).to_have_value("deepseek")
    expect(page.locator("#setup-key")).to_have_value("__NEKO_SECRET_MASKED__")
    page.click("#setup-save")
    expect(page.locator("#setup-result")).to_contain_text("Saved.")
    raw = json.loads((server.data / "config" / "core_config.json").read_text())
    assert raw["coreApiKey"] == "sk-test-1234567890"


def test_library_hide_unbind_delete_export_import(page, server, tmp_path):
    nav(page, "library")
    a = tmp_path / "Song A.wav"
    a.write_bytes(wav(seconds=0.5, seed=1))
    b = tmp_path / "Song B.wav"
    b.write_bytes(wav(seconds=0.5, seed=2))
    page.set_input_files("#songs-files", [str(a), str(b)])
    page.click("#songs-upload button[type=submit]")
    expect(page.locator("#songs-result")).to_contain_text("Added 2 songs: Song A, Song B")
    # the same file again is refused per item, in words
    page.set_input_files("#songs-files", str(a))
    page.click("#songs-upload button[type=submit]")
    expect(page.locator("#songs-result")).to_contain_text("already exists")

    d = tmp_path / "wave.vmd"
    d.write_bytes(vmd(seed=3))
    page.set_input_files("#actions-files", str(d))
    page.click("#actions-upload button[type=submit]")
    expect(page.locator("#actions-result")).to_contain_text("Added 1 action: wave")

    row_a = page.locator("#songs-body tr", has_text="Song A")
    row_a.get_by_role("button", name="Bind dance").click()
    page.fill('input[aria-label="Offset (frames)"]', "12")
    page.locator("#songs-body").get_by_role("button", name="Bind", exact=True).click()
    expect(page.locator("#songs-result")).to_contain_text("wave now dances to Song A")
    expect(row_a).to_contain_text("wave (offset 12) ★")
    row_a.get_by_role("button", name="Unbind wave from Song A").click()
    expect(page.locator("#songs-result")).to_have_text("Unbound.")
    expect(row_a).to_contain_text("none")

    row_b = page.locator("#songs-body tr", has_text="Song B")
    row_b.get_by_role("button", name="Hide").click()
    expect(page.locator("#songs-result")).to_contain_text("Hidden")
    expect(row_b).to_contain_text("hidden")
    expect(page.locator("#lib-summary")).to_have_text("2 songs (1 visible), 1 action.")

    # export (without hidden songs): a ZIP with Song A only
    page.uncheck("#lib-export-hidden")
    with page.expect_download() as dl:
        page.click("#lib-export")
    path = tmp_path / "export.zip"
    dl.value.save_as(path)
    expect(page.locator("#lib-io-result")).to_contain_text("Exported the library")
    with zipfile.ZipFile(path) as z:
        conf = json.loads(z.read("config.json"))
    assert [s["name"] for s in conf["songs"].values()] == ["Song A"]

    # delete Song A (two presses), then import it back
    row_a.get_by_role("button", name="Delete").click()
    page.locator("#songs-body button.armed").click()
    expect(page.locator("#songs-result")).to_contain_text("Deleted Song A")
    expect(page.locator("#songs-body tr", has_text="Song A")).to_have_count(0)
    page.set_input_files("#lib-import-file", str(path))
    page.click("#lib-import button[type=submit]")
    expect(page.locator("#lib-io-result")).to_contain_text("Imported: 1 song added")
    expect(page.locator("#songs-body tr", has_text="Song A")).to_have_count(1)


def test_mmd_upload_and_delete(page, server, tmp_path):
    model = tmp_path / "Alice.pmx"
    model.write_bytes(b"PMX " + b"\0" * 64)
    page.set_input_files("#mmd-file", str(model))
    page.click("#mmd-upload button[type=submit]")
    expect(page.locator("#mmd-result")).to_have_text("Added the model Alice.")
    row = page.locator("#mmd-body tr", has_text="Alice")
    expect(row).to_contain_text("model (pmx, user)")
    # a renamed file is refused with the server's words
    fake = tmp_path / "Bob.pmx"
    fake.write_bytes(b"not a model at all")
    page.set_input_files("#mmd-file", str(fake))
    page.click("#mmd-upload button[type=submit]")
    expect(page.locator("#mmd-result")).to_contain_text("Upload failed")
    # the list reloads after every upload; arm Delete on the reloaded row
    expect(page.locator("#mmd-body:not([aria-busy])")).to_have_count(1)
    row.get_by_role("button", name="Delete").click()
    page.locator("#mmd-body button.armed").click()
    expect(page.locator("#mmd-result")).to_have_text("Deleted Alice.")
    assert server.get("/api/model/mmd/models").json()["models"] == []


def test_api_reference_lists_every_operation(page, server):
    """The console's API section renders the served OpenAPI document itself
    (no outside script): every operation, a filter, and per operation its
    answers with their envelopes."""
    doc = server.get("/openapi.json").json()
    n = sum(1 for item in doc["paths"].values() for op in item.values()
            if isinstance(op, dict) and "responses" in op)
    assert n > 100
    page.goto(server.url + "/console/#reference")
    expect(page.locator("#section-reference")).to_be_visible()
    expect(page.locator("#ref-info")).to_contain_text(f"{n} operations")
    expect(page.locator("#ref-ops details.op")).to_have_count(n)
    page.fill("#ref-filter", "cloudsave summary")
    shown = page.locator("#ref-ops details.op:not([hidden])")
    expect(shown.first).to_be_visible()
    words = shown.evaluate_all("ds => ds.map(d => d.dataset.words)")
    assert words and all("cloudsave" in w and "summary" in w for w in words), words
    assert len(words) < n
    op = page.locator('#ref-ops details.op:not([hidden])', has_text="/api/cloudsave/summary").first
    op.locator("summary").click()
    body = op.locator(".op-body")
    expect(body).to_contain_text("Operation id")
    expect(body).to_contain_text("403")
    # The front door's refusal, with the fields of its envelope resolved from
    # the document's components.
    # (cloud save's envelope: {success: false, code: "CLOUDSAVE_…", …}).
    expect(body).to_contain_text("CLOUDSAVE_HOST_NOT_ALLOWED")
    expect(body.locator("code.prop", has_text="code").first).to_be_visible()
    shot(page, "reference", full_page=False)
    page.fill("#ref-filter", "")
    expect(page.locator("#ref-ops details.op:not([hidden])")).to_have_count(n)
