"""Headless Chromium against companiond started with ``--frontend-dir`` (docs/frontend.md).

The frontend folder is written by this test: small Jinja templates and scripts of our
own that use the same mechanisms as the original pages (template context, ``tojson``,
the characters document's ``猫娘`` keys, the storage bootstrap, the original chat
protocol on ``/ws/{name}``), so no file of the original application is needed.
"""

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import requests

from conftest import companiond_binary, EXPECTED_NOISE

INDEX = """<!doctype html><html><head><meta charset="utf-8"><title>main</title></head>
<body{% if initial_chat_surface_mode is defined and initial_chat_surface_mode %} data-mode="{{ initial_chat_surface_mode }}"{% endif %}>
<div id="who"></div><div id="mode">?</div><div id="reply"></div><div id="done"></div>
<input id="box"><button id="send">send</button>
<script>window.LIGHT = {{ vrm_defaults | tojson }}; window.RV = {{ react_chat_asset_version | tojson }};</script>
<script src="/static/chat.js?v={{ static_asset_version }}"></script>
</body></html>
"""

# The original page's text flow: status frames on open, start_session → session_started
# {input_mode:"text"}, then stream_data → gemini_response chunks → system "turn end".
CHAT_JS = r"""
(async function () {
  const cfg = await (await fetch('/api/config/page_config')).json();
  let name = cfg.lanlan_name;
  let ws = null;
  let pendingStart = null;
  let bubble = null;
  let started = false;
  document.getElementById('who').textContent = name;

  function connect() {
    ws = new WebSocket(`ws://${location.host}/ws/${encodeURIComponent(name)}`);
    ws.onopen = () => {
      ws.send(JSON.stringify({action: 'voice_input_control', event: 'lease_sync', engaged: false}));
      ws.send(JSON.stringify({action: 'capture_bridge_status', available: false, capabilities: {}}));
      document.getElementById('mode').textContent = 'open';
    };
    ws.onmessage = (ev) => {
      const m = JSON.parse(ev.data);
      if (m.type === 'session_started') {
        if (m.input_mode !== 'text') { document.getElementById('mode').textContent = 'voice'; return; }
        if (pendingStart && m.request_id === pendingStart.id) { pendingStart.resolve(); }
        document.getElementById('mode').textContent = 'text';
      } else if (m.type === 'gemini_response') {
        if (m.isNewMessage || !bubble) {
          bubble = document.createElement('p');
          bubble.className = 'bubble';
          document.getElementById('reply').appendChild(bubble);
        }
        bubble.textContent += m.text;
      } else if (m.type === 'system' && m.data === 'turn end') {
        bubble = null;
        document.getElementById('done').textContent += 'end;';
      } else if (m.type === 'status') {
        document.getElementById('done').textContent += 'status:' + JSON.parse(m.message).code + ';';
      } else if (m.type === 'catgirl_switched') {
        // The original page's switch: another page changed the current character;
        // the server pushes this frame, the page drops its session and reconnects
        // under the new name.
        name = m.new_catgirl;
        started = false;
        ws.onclose = null;
        ws.close();
        document.getElementById('who').textContent = name;
        document.getElementById('mode').textContent = 'switching';
        connect();
      }
    };
  }
  connect();

  document.getElementById('send').onclick = async () => {
    const text = document.getElementById('box').value;
    if (!started) {
      const id = 'start-' + Date.now();
      await new Promise((resolve) => {
        pendingStart = {id, resolve};
        ws.send(JSON.stringify({action: 'start_session', input_type: 'text', new_session: false, request_id: id}));
      });
      started = true;
    }
    ws.send(JSON.stringify({action: 'stream_data', input_type: 'text', data: text,
                            request_id: 'req-' + Date.now() + '-x'}));
  };
})();
"""

CARDS = """<!doctype html><html><head><meta charset="utf-8"></head><body>
<input type="hidden" id="lanlan_name" value="{{ lanlan_name | e }}">
<ul id="cards"></ul><div id="master"></div>
<input id="nick"><button id="save">save</button><div id="saved"></div>
<script src="/static/cards.js?v={{ static_asset_version|default('0', true) }}"></script>
</body></html>
"""

# The card manager's way: one card per key of 猫娘, save with PUT (no CSRF token), re-read.
CARDS_JS = r"""
async function load() {
  const doc = await (await fetch('/api/characters', {cache: 'no-store'})).json();
  const ul = document.getElementById('cards');
  ul.innerHTML = '';
  for (const [name, p] of Object.entries(doc['猫娘'])) {
    const li = document.createElement('li');
    li.textContent = name + (name === doc['当前猫娘'] ? ' *' : '') + ' ' + (p['昵称'] || '');
    ul.appendChild(li);
  }
  document.getElementById('master').textContent = doc['主人']['档案名'] || '-';
}
document.getElementById('save').onclick = async () => {
  const r = await fetch('/api/characters/catgirl/' + encodeURIComponent('Companion'), {
    method: 'PUT', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({'档案名': 'Companion', '昵称': document.getElementById('nick').value}),
  });
  const j = await r.json();
  document.getElementById('saved').textContent = j.success ? 'ok' : 'fail';
  await load();
};
load();
"""

MEMORY = """<!doctype html><html><head><meta charset="utf-8"></head><body>
<div id="root">?</div><div id="limited"></div>
<script>
fetch('/api/storage/location/bootstrap').then(r => {
  if (!r.ok) { document.getElementById('limited').textContent = 'limited'; return null; }
  return r.json();
}).then(b => { if (b) document.getElementById('root').textContent =
  (b.blocking_reason ? 'blocked' : b.current_root); });
</script></body></html>
"""


# The model manager's ways: the avatar the page shows for a character without one
# (the default model, marked as the fallback), a VRM imported through a file input
# (multipart part "file"), the Live3D list re-read afterwards.
MODELS = """<!doctype html><html><head><meta charset="utf-8"></head><body>
<div id="current">?</div><input type="file" id="vrm" accept=".vrm"><div id="status"></div>
<ul id="vrms"></ul>
<script>
async function list() {
  const j = await (await fetch('/api/model/vrm/models')).json();
  const ul = document.getElementById('vrms'); ul.innerHTML = '';
  for (const m of j.models) { const li = document.createElement('li'); li.textContent = m.name + ' ' + m.url; ul.appendChild(li); }
}
fetch('/api/characters/current_live2d_model').then(r => r.json()).then(j => {
  document.getElementById('current').textContent =
    j.success ? j.model_name + (j.model_info.is_fallback ? ' (default)' : '') + ' ' + j.model_info.path : 'none';
});
document.getElementById('vrm').onchange = async (e) => {
  const fd = new FormData(); fd.append('file', e.target.files[0]);
  const j = await (await fetch('/api/model/vrm/upload', {method: 'POST', body: fd})).json();
  document.getElementById('status').textContent = j.success ? 'uploaded ' + j.model_url : 'failed ' + j.error;
  await list();
};
list();
</script></body></html>
"""

# The card manager's rename: POST /api/characters/catgirl/{old}/rename, then re-list.
RENAME = """<!doctype html><html><head><meta charset="utf-8"></head><body>
<input id="old"><input id="new"><button id="go">rename</button><div id="result"></div><ul id="names"></ul>
<script>
async function names() {
  const doc = await (await fetch('/api/characters', {cache: 'no-store'})).json();
  document.getElementById('names').innerHTML =
    Object.keys(doc['猫娘']).map(n => '<li>' + n + '</li>').join('');
}
document.getElementById('go').onclick = async () => {
  const r = await fetch('/api/characters/catgirl/' + encodeURIComponent(document.getElementById('old').value) + '/rename', {
    method: 'POST', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({new_name: document.getElementById('new').value})});
  const j = await r.json();
  document.getElementById('result').textContent = j.success ? 'ok' : 'error ' + r.status;
  await names();
};
names();
</script></body></html>
"""


def write(path: Path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def front_server(fake_llm):
    root = Path(tempfile.mkdtemp(prefix="companiond-frontdir-"))
    front = root / "front"
    write(front / "templates" / "index.html", INDEX)
    write(front / "templates" / "character_card_manager.html", CARDS)
    write(front / "templates" / "memory_browser.html", MEMORY)
    write(front / "static" / "chat.js", CHAT_JS)
    write(front / "static" / "cards.js", CARDS_JS)
    write(front / "templates" / "model_manager.html", MODELS)
    write(front / "templates" / "chat.html", RENAME)
    write(front / "static" / "yui-lolita" / "yui-lolita.model3.json", '{"Version": 3}')
    (root / "bundle").mkdir()
    log = open(root / "companiond.log", "ab")
    proc = subprocess.Popen(
        [companiond_binary(), "--listen", "127.0.0.1:0", "--data-dir", str(root / "data"),
         "--bundle-dir", str(root / "bundle"), "--frontend-dir", str(front)],
        stdout=subprocess.PIPE, stderr=log)
    line = proc.stdout.readline().decode().strip()
    assert line.startswith("listening on http://"), line
    url = line[len("listening on "):]
    r = requests.post(url + "/api/config/core_api", json={
        "enableCustomApi": True, "conversationModelUrl": fake_llm.base,
        "conversationModelId": "fake-chat", "conversationModelApiKey": ""}, timeout=10)
    assert r.ok, r.text
    yield url
    proc.terminate()
    proc.wait(10)
    log.close()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def fpage(browser):
    ctx = browser.new_context(locale="en-US")
    pg = ctx.new_page()
    pg.set_default_timeout(15000)
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: m.type == "error" and not m.text.startswith(EXPECTED_NOISE)
          and errors.append(m.text))
    pg.errors = errors
    yield pg
    ctx.close()


def test_main_page_chats_over_the_original_protocol(front_server, fake_llm, fpage):
    resp = fpage.goto(front_server + "/")
    assert resp.status == 200
    assert fpage.evaluate("window.LIGHT.toneMapping") == 7
    fpage.wait_for_function("document.getElementById('mode').textContent === 'open'")
    fpage.fill("#box", "hello from the page")
    fpage.click("#send")
    fpage.wait_for_function("document.getElementById('done').textContent.includes('end;')")
    assert fpage.text_content("#mode") == "text"
    assert fpage.text_content(".bubble") == "Hello! You said: hello from the page"
    # A second message needs no new session.
    fpage.fill("#box", "again")
    fpage.click("#send")
    fpage.wait_for_function("document.getElementById('done').textContent === 'end;end;'")
    assert fpage.locator(".bubble").nth(1).text_content() == "Hello! You said: again"
    assert not fpage.errors, fpage.errors


def test_compact_surface_and_character_paths(front_server, fpage):
    assert fpage.goto(front_server + "/web_chat_compact").status == 200
    assert fpage.get_attribute("body", "data-mode") == "compact"
    assert fpage.goto(front_server + "/Companion").status == 200
    assert fpage.goto(front_server + "/chara_manager?lanlan_name=x").url.endswith(
        "/character_card_manager?lanlan_name=x")


def test_card_manager_lists_and_saves(front_server, fpage):
    assert fpage.goto(front_server + "/character_card_manager?lanlan_name=%3Cb%3E").status == 200
    assert fpage.get_attribute("#lanlan_name", "value") == "<b>"
    fpage.wait_for_function("document.querySelectorAll('#cards li').length === 1")
    assert fpage.text_content("#cards li").startswith("Companion *")
    fpage.fill("#nick", "Mimi")
    fpage.click("#save")
    fpage.wait_for_function("document.getElementById('saved').textContent === 'ok'")
    fpage.wait_for_function("document.querySelector('#cards li').textContent.includes('Mimi')")
    doc = requests.get(front_server + "/api/characters", timeout=10).json()
    assert doc["猫娘"]["Companion"]["昵称"] == "Mimi"
    assert not fpage.errors, fpage.errors


def test_memory_browser_is_not_limited(front_server, fpage):
    assert fpage.goto(front_server + "/memory_browser").status == 200
    fpage.wait_for_function("document.getElementById('root').textContent !== '?'")
    root = fpage.text_content("#root")
    assert root.endswith("data"), root
    assert fpage.text_content("#limited") == ""


def test_model_manager_shows_the_default_and_imports_a_vrm(front_server, fpage, tmp_path):
    assert fpage.goto(front_server + "/model_manager").status == 200
    fpage.wait_for_function("document.getElementById('current').textContent !== '?'")
    assert fpage.text_content("#current") == (
        "yui-lolita (default) /static/yui-lolita/yui-lolita.model3.json")
    vrm = tmp_path / "Tiny.vrm"
    vrm.write_bytes(b"glTF-tiny-model")
    fpage.set_input_files("#vrm", str(vrm))
    fpage.wait_for_function("document.getElementById('status').textContent !== ''")
    assert fpage.text_content("#status") == "uploaded /user_vrm/Tiny.vrm"
    fpage.wait_for_function("document.getElementById('vrms').textContent.includes('Tiny')")
    assert fpage.text_content("#vrms li") == "Tiny /user_vrm/Tiny.vrm"
    assert requests.get(front_server + "/user_vrm/Tiny.vrm", timeout=10).content == b"glTF-tiny-model"
    assert not fpage.errors, fpage.errors


def test_main_page_follows_a_switch_and_a_rename(front_server, fake_llm, fpage):
    origin = {"Origin": front_server}
    r = requests.post(front_server + "/api/characters/catgirl", json={"档案名": "Mika"},
                      headers=origin, timeout=10)
    assert r.ok, r.text
    try:
        assert fpage.goto(front_server + "/").status == 200
        fpage.wait_for_function("document.getElementById('mode').textContent === 'open'")
        assert fpage.text_content("#who") == "Companion"
        # Another page (the card manager) switches the character: the server pushes
        # catgirl_switched to this page's socket, which reconnects as Mika.
        r = requests.post(front_server + "/api/characters/current_catgirl",
                          json={"catgirl_name": "Mika"}, headers=origin, timeout=10)
        assert r.ok, r.text
        fpage.wait_for_function("document.getElementById('who').textContent === 'Mika'")
        fpage.wait_for_function("document.getElementById('mode').textContent === 'open'")
        fpage.fill("#box", "hello Mika")
        fpage.click("#send")
        fpage.wait_for_function("document.getElementById('done').textContent.includes('end;')")
        assert fpage.locator(".bubble").last.text_content() == "Hello! You said: hello Mika"
        hist = requests.get(front_server + "/api/memory/recent_file?filename=recent_Mika.json",
                            timeout=10).json()
        assert "hello Mika" in hist["content"], hist

        # The card manager's rename path moves the character and its history.
        rn = fpage.context.new_page()
        assert rn.goto(front_server + "/chat").status == 200
        rn.wait_for_function("document.getElementById('names').textContent.includes('Mika')")
        rn.fill("#old", "Mika")
        rn.fill("#new", "Mimi")
        rn.click("#go")
        rn.wait_for_function("document.getElementById('result').textContent !== ''")
        assert rn.text_content("#result") == "ok"
        rn.wait_for_function("!document.getElementById('names').textContent.includes('Mika')")
        assert "Mimi" in rn.text_content("#names")
        hist = requests.get(front_server + "/api/memory/recent_file?filename=recent_Mimi.json",
                            timeout=10).json()
        assert "hello Mika" in hist["content"], hist
        rn.close()
        assert not fpage.errors, fpage.errors
    finally:
        requests.post(front_server + "/api/characters/current_catgirl",
                      json={"catgirl_name": "Companion"}, headers=origin, timeout=10)
        for n in ("Mika", "Mimi"):
            requests.delete(front_server + "/api/characters/catgirl/" + n, headers=origin, timeout=10)
