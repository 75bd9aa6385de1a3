// Memory: the review / powerful-memory toggles, the recent-history editor, its
// archive (read-only) and the snapshots.
// Editing follows docs/memory.md: read (content + fingerprint + identity_token),
// edit, save with both tokens and source_index per kept entry. A 409
// RECENT_FILE_CONFLICT means someone else changed the file: say so, never retry.
import * as api from './api.js';
import { el, say, confirmButton } from './ui.js';

let app;
let doc = null;      // {filename, fingerprint, identity_token, entries:[{role,text,source_index,theater}]}
let dirty = false;
const $ = (id) => document.getElementById(id);

function contentText(c) {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p) => (typeof p === 'string' ? p : p.text || '')).join('');
  return c == null ? '' : JSON.stringify(c);
}

async function loadToggles() {
  for (const [id, path] of [['mem-review', '/api/memory/review_config'], ['mem-powerful', '/api/memory/powerful_memory_config']]) {
    const r = await api.get(path);
    const box = $(id);
    if (r.status === 200 && typeof r.body.enabled === 'boolean') {
      box.checked = r.body.enabled;
      box.indeterminate = false;
    } else {
      box.indeterminate = true;
      say('mem-toggle-result', `A memory option could not be read: ${api.explain(r)}`, 'error');
    }
  }
}

async function setToggle(id, path, label) {
  const box = $(id);
  const r = await api.post(path, { enabled: box.checked });
  if (!r.ok) {
    box.checked = !box.checked;
    say('mem-toggle-result', `${label} was not changed: ${api.explain(r)}`, 'error');
    return;
  }
  say('mem-toggle-result', `${label} is now ${r.body.enabled ? 'on' : 'off'}.`, 'ok');
  await loadExtraction();
}

async function loadFileList() {
  const r = await api.get('/api/memory/recent_files');
  const files = new Set(r.ok ? r.body.files || [] : []);
  for (const n of app.characters) files.add(`recent_${n}.json`);
  const sel = $('mem-file');
  const keep = sel.value || `recent_${app.current}.json`;
  sel.replaceChildren(...[...files].sort().map((f) => el('option', { value: f }, f.replace(/^recent_/, '').replace(/\.json$/, ''))));
  sel.value = files.has(keep) ? keep : `recent_${app.current}.json`;
}

async function loadFile() {
  const filename = $('mem-file').value;
  if (!filename) return;
  say('mem-result', '');
  const r = await api.get(`/api/memory/recent_file?filename=${encodeURIComponent(filename)}`);
  if (!r.ok) {
    doc = null;
    $('mem-entries').replaceChildren();
    $('mem-info').textContent = r.status === 404 ? 'This character has no history yet.' : `Could not read the history: ${api.explain(r)}`;
    return;
  }
  let raw = [];
  try { raw = JSON.parse(r.body.content || '[]'); } catch { raw = []; }
  if (!Array.isArray(raw)) raw = [];
  doc = {
    filename,
    fingerprint: r.body.fingerprint,
    identity_token: r.body.identity_token,
    entries: raw.map((e, i) => {
      const data = (e && e.data) || {};
      const theater = !!(data.metadata && data.metadata.source === 'theater_numeric_v2');
      return { role: (e && e.type) || 'system', text: contentText(data.content), source_index: i, theater };
    }),
  };
  dirty = false;
  render();
}

function render() {
  const n = doc.entries.length;
  $('mem-info').textContent = `${n} message${n === 1 ? '' : 's'}. Edit the text, change who said it, remove or add messages, then save.`;
  $('mem-entries').replaceChildren(...doc.entries.map((e, i) => {
    const li = el('li', { class: `mem-entry ${e.role}` });
    if (e.theater) {
      li.append(el('span', { class: 'pill' }, 'theater (read-only)'), el('p', {}, e.text));
      return li;
    }
    const role = el('select', { 'aria-label': `Who said message ${i + 1}` },
      ...[['human', 'You'], ['ai', 'Character'], ['system', 'System']].map(([v, t]) => el('option', { value: v, selected: v === e.role }, t)));
    role.addEventListener('change', () => { e.role = role.value; dirty = true; });
    const text = el('textarea', { rows: Math.min(6, Math.max(1, Math.ceil(e.text.length / 70))), 'aria-label': `Text of message ${i + 1}` });
    text.value = e.text;
    text.addEventListener('input', () => { e.text = text.value; dirty = true; });
    const rm = el('button', { type: 'button', class: 'danger', 'aria-label': `Remove message ${i + 1}`,
      onclick: () => { doc.entries.splice(i, 1); dirty = true; render(); } }, 'Remove');
    li.append(role, text, rm);
    return li;
  }));
}

async function save() {
  if (!doc) return;
  const chat = doc.entries.map((e) => {
    const m = { role: e.role, text: e.text };
    if (e.source_index !== null) m.source_index = e.source_index;
    if (e.theater) m.theater = true;
    return m;
  });
  $('mem-save').disabled = true;
  const r = await api.post('/api/memory/recent_file/save', {
    filename: doc.filename, fingerprint: doc.fingerprint, identity_token: doc.identity_token, chat,
  });
  $('mem-save').disabled = false;
  const code = r.body && (r.body.code || r.body.error_code);
  if (r.status === 409 && (code === 'RECENT_FILE_CONFLICT' || !code)) {
    // never replay the old edit over the newer file
    say('mem-result', 'Not saved: this history was changed elsewhere — reload it to see the latest version, then make your edit again.', 'error');
    $('mem-reload').focus();
    return;
  }
  if (!r.ok) { say('mem-result', `Not saved: ${api.explain(r)}`, 'error'); return; }
  await loadFile();
  await loadSnapshots();
  say('mem-result', `Saved ${chat.length} message${chat.length === 1 ? '' : 's'}.`, 'ok');
}

const KIND_WORDS = {
  save: 'a history save', review: 'an automatic review', correct: 'a correction', forget: 'a forget',
  rename: 'a rename', download: 'a cloud download', delete: 'a delete', restore: 'a restore',
};

function when(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

function selectedCharacter() {
  const f = $('mem-file').value || '';
  return f.replace(/^recent_/, '').replace(/\.json$/, '');
}

async function loadSnapshots() {
  const name = selectedCharacter();
  const body = $('mem-snaps');
  if (!name) { body.replaceChildren(); return; }
  const r = await api.get(`/api/memory/snapshots?character=${encodeURIComponent(name)}`);
  if (!r.ok) {
    body.replaceChildren();
    say('mem-snaps-result', `Snapshots could not be read: ${api.explain(r)}`, 'error');
    return;
  }
  const list = r.body.snapshots || [];
  if (!list.length) {
    body.replaceChildren(el('tr', {}, el('td', { colspan: '4', class: 'muted' }, 'No snapshot yet.')));
    return;
  }
  body.replaceChildren(...list.map((s) => el('tr', { 'data-id': s.id, 'data-kind': s.kind },
    el('td', {}, when(s.created_at)),
    el('td', {}, KIND_WORDS[s.kind] || s.kind),
    el('td', {}, (s.files || []).map((f) => f.name).join(', ') + (s.has_profile ? ', profile' : '')),
    el('td', { class: 'actions' }, confirmButton('Restore', 'Really restore?', () => restoreSnapshot(name, s))))));
}

// How the background extraction fares (GET /api/memory/extraction).
async function loadExtraction() {
  const name = selectedCharacter();
  if (!name) { say('mem-extract-status', '', 'info'); return; }
  const r = await api.get(`/api/memory/extraction?character=${encodeURIComponent(name)}`);
  if (!r.ok) { say('mem-extract-status', `The extraction status could not be read: ${api.explain(r)}`, 'error'); return; }
  const b = r.body;
  if (!b.enabled) { say('mem-extract-status', `Off: ${b.disabled_reason}.`, 'info'); return; }
  if (b.running) { say('mem-extract-status', 'Extracting now…', 'info'); return; }
  if (b.failures > 0) {
    const wait = b.retry_in_ms > 0 ? ` The next try is in ${Math.ceil(b.retry_in_ms / 60000)} min.` : '';
    say('mem-extract-status', `The last ${b.failures > 1 ? `${b.failures} extractions` : 'extraction'} failed (${new Date(b.last_error_at).toLocaleString()}): ${b.last_error}.${wait}`, 'error');
    return;
  }
  say('mem-extract-status', b.last_success_at
    ? `Working: last extraction ${new Date(b.last_success_at).toLocaleString()}.`
    : 'Working: no extraction since companiond started.', 'ok');
}

async function extractNow() {
  const name = selectedCharacter();
  if (!name) return;
  say('mem-extract-status', 'Extracting now…', 'info');
  const r = await api.post('/api/memory/extract', { character: name });
  await loadExtraction();
  if (r.ok) say('mem-extract-status', `Extracted: ${r.body.added || 0} new fact(s).`, 'ok');
}

// The archive: entries folded out of the recent history (docs/memory.md § Folding),
// newest first, one page of 50 at a time.
let archiveBefore = null;

const WHO = { human: 'You', user: 'You', ai: 'Character', assistant: 'Character', system: 'Note' };

async function loadArchive(more = false) {
  const name = selectedCharacter();
  const body = $('mem-arch');
  const button = $('mem-arch-more');
  if (!more) { archiveBefore = null; body.replaceChildren(); }
  button.hidden = true;
  if (!name) { $('mem-arch-info').textContent = ''; return; }
  const before = more && archiveBefore ? `&before=${archiveBefore}` : '';
  const r = await api.get(`/api/memory/archive?character=${encodeURIComponent(name)}&limit=50${before}`);
  if (!r.ok) {
    say('mem-arch-result', `The archive could not be read: ${api.explain(r)}`, 'error');
    return;
  }
  say('mem-arch-result', '', 'info');
  const items = r.body.items || [];
  $('mem-arch-info').textContent = r.body.total
    ? `${r.body.total} archived message${r.body.total === 1 ? '' : 's'}.`
    : 'Nothing archived yet.';
  body.append(...items.map((it) => {
    const e = it.entry || {};
    const kind = e.type || e.role || '';
    const text = contentText(e.data ? e.data.content : e.content);
    return el('tr', {},
      el('td', {}, new Date(it.ts).toLocaleString()),
      el('td', {}, WHO[kind] || kind),
      el('td', {}, text));
  }));
  archiveBefore = r.body.next_before || null;
  button.hidden = !archiveBefore;
}

async function restoreSnapshot(name, s) {
  const r = await api.post('/api/memory/snapshots/restore', { character: name, id: s.id });
  if (!r.ok) { say('mem-snaps-result', `Not restored: ${api.explain(r)}`, 'error'); return; }
  if (r.body.renamed_back || r.body.recreated) await app.refreshCharacters();
  await loadFileList();
  if (r.body.character !== name) $('mem-file').value = `recent_${r.body.character}.json`;
  dirty = false;
  await loadFile();
  await loadSnapshots();
  say('mem-snaps-result', `Restored the memory of ${r.body.character} as it was before ${KIND_WORDS[s.kind] || s.kind}. To undo this, restore the newest snapshot (“before a restore”).`, 'ok');
}

export default {
  init(a) {
    app = a;
    $('mem-review').addEventListener('change', () => setToggle('mem-review', '/api/memory/review_config', 'Automatic review'));
    $('mem-powerful').addEventListener('change', () => setToggle('mem-powerful', '/api/memory/powerful_memory_config', 'Powerful memory'));
    $('mem-file').addEventListener('change', async () => { await loadFile(); await loadSnapshots(); await loadExtraction(); await loadArchive(); });
    $('mem-extract-now').addEventListener('click', extractNow);
    $('mem-arch-more').addEventListener('click', () => loadArchive(true));
    $('mem-reload').addEventListener('click', async () => { await loadFile(); say('mem-result', 'Reloaded the latest version.', 'info'); });
    $('mem-add').addEventListener('click', () => {
      if (!doc) return;
      doc.entries.push({ role: 'human', text: '', source_index: null, theater: false });
      dirty = true;
      render();
      const areas = $('mem-entries').querySelectorAll('textarea');
      if (areas.length) areas[areas.length - 1].focus();
    });
    $('mem-save').addEventListener('click', save);
    window.addEventListener('beforeunload', (e) => { if (dirty) e.preventDefault(); });
  },
  async show() {
    await loadToggles();
    await loadFileList();
    if (!dirty || !doc || doc.filename !== $('mem-file').value) await loadFile();
    await loadSnapshots();
    await loadExtraction();
    await loadArchive();
  },
};
