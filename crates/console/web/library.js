// Library: jukebox songs and actions (upload with progress, edit, bind, hide,
// delete, export/import) and the MMD / PNGTuber avatar models.
import * as api from './api.js';
import { el, say, confirmButton } from './ui.js';

let cfg = null;   // GET /api/jukebox/config
const $ = (id) => document.getElementById(id);
const J = '/api/jukebox';

function describeUpload(r, kind) {
  const b = r.body || {};
  if (!r.ok) return { text: `Upload failed: ${api.explain(r)}`, ok: false };
  const items = b.results || [b];
  const good = items.filter((x) => x.success !== false).map((x) => (x.song || x.action || {}).name).filter(Boolean);
  const bad = items.filter((x) => x.success === false).map((x) => x.error || x.detail);
  let text = good.length ? `Added ${good.length} ${kind}${good.length === 1 ? '' : 's'}: ${good.join(', ')}.` : '';
  if (bad.length) text += ` ${bad.length} not added: ${bad.join('; ')}.`;
  return { text: text.trim(), ok: bad.length === 0 };
}

async function uploadFiles(input, path, progressId, resultId, kind) {
  const files = [...$(input).files];
  if (!files.length) { say(resultId, 'Choose one or more files first.', 'error'); return; }
  const fd = new FormData();
  for (const f of files) fd.append('files', f, f.name);
  const p = api.progressOf($(progressId));
  p.start();
  say(resultId, `Uploading ${files.length} file${files.length === 1 ? '' : 's'}…`);
  const r = await api.upload(path, fd, (f, l, t) => p.set(f, l, t));
  p.done(r.ok ? 'upload complete' : 'upload failed');
  const d = describeUpload(r, kind);
  say(resultId, d.text, d.ok ? 'ok' : 'error');
  $(input).value = '';
  await loadJukebox();
}

async function loadJukebox() {
  const r = await api.get(`${J}/config`);
  if (!r.ok) { say('songs-result', `The library could not be read: ${api.explain(r)}`, 'error'); return; }
  cfg = r.body;
  const n = (k, one) => `${k} ${one}${k === 1 ? '' : 's'}`;
  $('lib-summary').textContent = `${n(cfg.songCount, 'song')} (${cfg.visibleSongCount} visible), ${n(cfg.actionCount, 'action')}.`;
  renderSongs();
  renderActions();
}

function actionName(id) { return (cfg.actions[id] && cfg.actions[id].name) || id; }

function renderSongs() {
  const songs = Object.values(cfg.songs || {}).sort((a, b) => a.name.localeCompare(b.name));
  $('songs-body').replaceChildren(...songs.map((s) => {
    const binds = Object.entries((cfg.bindings || {})[s.id] || {});
    const dance = el('td', {},
      binds.length ? el('ul', { class: 'plain' }, ...binds.map(([aid, b]) => el('li', {},
        actionName(aid), b.offset ? ` (offset ${b.offset})` : '', s.defaultAction === aid ? ' ★' : '', ' ',
        el('button', { type: 'button', class: 'link', 'aria-label': `Unbind ${actionName(aid)} from ${s.name}`,
          onclick: () => unbind(s.id, aid) }, 'unbind')))) : el('span', { class: 'muted' }, 'none'));
    const actions = el('td', { class: 'actions' },
      el('button', { type: 'button', onclick: (e) => editSong(s, e.target.closest('tr')) }, 'Edit'),
      el('button', { type: 'button', onclick: (e) => bindForm(s, e.target.closest('td')) }, 'Bind dance'),
      el('button', { type: 'button', onclick: () => setVisible('songs', s.id, !s.visible) }, s.visible ? 'Hide' : 'Show'),
      confirmButton(s.isBuiltin ? 'Hide (built-in)' : 'Delete', `Really delete ${s.name}?`, () => removeItem('songs', s.id, s.name)));
    return el('tr', { class: s.visible ? '' : 'hidden-item' },
      el('th', { scope: 'row' }, el('span', { class: 'name' }, s.name), s.isBuiltin ? el('span', { class: 'pill' }, 'built-in') : '',
        s.visible ? '' : el('span', { class: 'pill' }, 'hidden')),
      el('td', { class: 'name' }, s.artist || ''),
      dance, actions);
  }));
  if (!songs.length) $('songs-body').append(el('tr', {}, el('td', { colspan: 4, class: 'muted' }, 'No songs yet.')));
}

function renderActions() {
  const acts = Object.values(cfg.actions || {}).sort((a, b) => a.name.localeCompare(b.name));
  $('actions-body').replaceChildren(...acts.map((a) => el('tr', { class: a.visible ? '' : 'hidden-item' },
    el('th', { scope: 'row' }, el('span', { class: 'name' }, a.name), a.isBuiltin ? el('span', { class: 'pill' }, 'built-in') : '',
      a.missing ? el('span', { class: 'pill bad' }, 'file missing') : '', a.visible ? '' : el('span', { class: 'pill' }, 'hidden')),
    el('td', {}, a.format || ''),
    el('td', { class: 'actions' },
      el('button', { type: 'button', onclick: (e) => renameAction(a, e.target.closest('td')) }, 'Rename'),
      el('button', { type: 'button', onclick: () => setVisible('actions', a.id, !a.visible) }, a.visible ? 'Hide' : 'Show'),
      confirmButton(a.isBuiltin ? 'Hide (built-in)' : 'Delete', `Really delete ${a.name}?`, () => removeItem('actions', a.id, a.name))))));
  if (!acts.length) $('actions-body').append(el('tr', {}, el('td', { colspan: 3, class: 'muted' }, 'No actions yet.')));
}

function editSong(s, row) {
  const name = el('input', { value: s.name, 'aria-label': 'Song name' });
  const artist = el('input', { value: s.artist || '', 'aria-label': 'Artist' });
  const f = el('form', { class: 'inline' }, name, artist,
    el('button', { type: 'submit', class: 'primary' }, 'Save'),
    el('button', { type: 'button', onclick: renderSongs }, 'Cancel'));
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const r = await api.put(`${J}/songs/${encodeURIComponent(s.id)}/metadata`, api.form({ name: name.value, artist: artist.value }));
    say('songs-result', r.ok ? `Saved “${name.value.trim()}”.` : `Not saved: ${api.explain(r)}`, r.ok ? 'ok' : 'error');
    await loadJukebox();
  });
  row.replaceChildren(el('td', { colspan: 4 }, f));
  name.focus();
}

function bindForm(s, cell) {
  const acts = Object.values(cfg.actions || {});
  if (!acts.length) { say('songs-result', 'Upload an action (dance) first, then bind it to the song.', 'error'); return; }
  const sel = el('select', { 'aria-label': 'Action' }, ...acts.map((a) => el('option', { value: a.id }, a.name)));
  const off = el('input', { type: 'number', value: '0', step: '1', 'aria-label': 'Offset (frames)', class: 'short' });
  const f = el('form', { class: 'inline' }, sel, el('label', {}, 'offset ', off),
    el('button', { type: 'submit', class: 'primary' }, 'Bind'),
    el('button', { type: 'button', onclick: renderSongs }, 'Cancel'));
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const r = await api.post(`${J}/bind`, api.form({ songId: s.id, actionId: sel.value, offset: off.value || '0' }));
    say('songs-result', r.ok ? `${actionName(sel.value)} now dances to ${s.name}.` : `Not bound: ${api.explain(r)}`, r.ok ? 'ok' : 'error');
    await loadJukebox();
  });
  cell.replaceChildren(f);
  sel.focus();
}

async function unbind(songId, actionId) {
  const r = await api.del(`${J}/bind`, api.form({ songId, actionId }));
  say('songs-result', r.ok ? 'Unbound.' : `Not unbound: ${api.explain(r)}`, r.ok ? 'ok' : 'error');
  await loadJukebox();
}

function renameAction(a, cell) {
  const name = el('input', { value: a.name, 'aria-label': 'Action name' });
  const f = el('form', { class: 'inline' }, name,
    el('button', { type: 'submit', class: 'primary' }, 'Save'),
    el('button', { type: 'button', onclick: renderActions }, 'Cancel'));
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const r = await api.put(`${J}/actions/${encodeURIComponent(a.id)}/metadata`, api.form({ name: name.value }));
    say('actions-result', r.ok ? 'Renamed.' : `Not renamed: ${api.explain(r)}`, r.ok ? 'ok' : 'error');
    await loadJukebox();
  });
  cell.replaceChildren(f);
  name.focus();
}

async function setVisible(kind, id, visible) {
  const r = await api.put(`${J}/${kind}/${encodeURIComponent(id)}/visibility`, api.form({ visible }));
  const res = kind === 'songs' ? 'songs-result' : 'actions-result';
  say(res, r.ok ? (visible ? 'Shown again.' : 'Hidden: the companion will not pick it, the file stays.') : api.explain(r), r.ok ? 'ok' : 'error');
  await loadJukebox();
}

async function removeItem(kind, id, name) {
  const r = await api.del(`${J}/${kind}/${encodeURIComponent(id)}`);
  const res = kind === 'songs' ? 'songs-result' : 'actions-result';
  if (!r.ok) say(res, `Not deleted: ${api.explain(r)}`, 'error');
  else say(res, r.body.hidden ? `${name} is built in, so it was hidden instead of deleted.` : `Deleted ${name}.`, 'ok');
  await loadJukebox();
}

async function exportLibrary() {
  say('lib-io-result', 'Preparing the ZIP…');
  const token = await api.csrf();
  const r = await fetch(`${J}/export`, {
    method: 'POST', headers: { 'X-CSRF-Token': token },
    body: api.form({ includeHidden: $('lib-export-hidden').checked }),
  });
  if (!r.ok) { say('lib-io-result', `Export failed (HTTP ${r.status}).`, 'error'); return; }
  const blob = await r.blob();
  const a = el('a', { href: URL.createObjectURL(blob), download: 'jukebox_export.zip' });
  document.body.append(a);
  a.click();
  a.remove();
  say('lib-io-result', `Exported the library (${api.size(blob.size)}) as jukebox_export.zip.`, 'ok');
}

async function importLibrary(ev) {
  ev.preventDefault();
  const file = $('lib-import-file').files[0];
  if (!file) { say('lib-io-result', 'Choose a library ZIP first.', 'error'); return; }
  const fd = new FormData();
  fd.append('file', file, file.name);
  const p = api.progressOf($('import-progress'));
  p.start();
  const r = await api.upload(`${J}/import`, fd, (f, l, t) => p.set(f, l, t));
  p.done(r.ok ? 'import complete' : 'import failed');
  if (!r.ok) { say('lib-io-result', `Import failed: ${api.explain(r)}`, 'error'); return; }
  const s = r.body.stats || {};
  const n = (k, one) => `${k || 0} ${one}${k === 1 ? '' : 's'}`;
  say('lib-io-result', `Imported: ${n(s.songsAdded, 'song')} added, ${s.songsMerged || 0} already here; ${n(s.actionsAdded, 'action')} added, ${s.actionsMerged || 0} already here; ${n(s.bindingsAdded, 'binding')} added.`, 'ok');
  $('lib-import-file').value = '';
  await loadJukebox();
}

// ---------------------------------------------------------------- avatars

async function loadMmd() {
  // Busy while the list reloads: its rows (and any armed Delete) are replaced at the end.
  $('mmd-body').setAttribute('aria-busy', 'true');
  const [m, a] = await Promise.all([api.get('/api/model/mmd/models'), api.get('/api/model/mmd/animations')]);
  const rows = [];
  for (const x of (m.ok && m.body.models) || []) {
    rows.push(el('tr', {},
      el('th', { scope: 'row', class: 'name' }, x.name, x.broken ? el('span', { class: 'pill bad' }, 'no model file') : ''),
      el('td', {}, `model (${x.type}, ${x.location})`),
      el('td', {}, api.size(x.size)),
      el('td', { class: 'actions' }, x.location === 'user'
        ? confirmButton('Delete', `Really delete ${x.name}?`, () => delMmd('model', x.url, x.name)) : el('span', { class: 'muted' }, 'built in'))));
  }
  for (const x of (a.ok && a.body.animations) || []) {
    rows.push(el('tr', {},
      el('th', { scope: 'row', class: 'name' }, x.name),
      el('td', {}, `animation (${x.location || 'user'})`),
      el('td', {}, api.size(x.size)),
      el('td', { class: 'actions' }, x.location === 'user'
        ? confirmButton('Delete', `Really delete ${x.name}?`, () => delMmd('animation', x.url, x.name)) : el('span', { class: 'muted' }, 'built in'))));
  }
  if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 4, class: 'muted' }, 'No MMD models yet.')));
  $('mmd-body').replaceChildren(...rows);
  $('mmd-body').removeAttribute('aria-busy');
}

async function delMmd(what, url, name) {
  const r = await api.del(`/api/model/mmd/${what}`, { url });
  say('mmd-result', r.ok ? `Deleted ${name}.` : `Not deleted: ${api.explain(r)}`, r.ok ? 'ok' : 'error');
  await loadMmd();
}

async function uploadMmd(ev) {
  ev.preventDefault();
  const file = $('mmd-file').files[0];
  if (!file) { say('mmd-result', 'Choose a .pmx, .pmd, .zip or .vmd file first.', 'error'); return; }
  const ext = file.name.toLowerCase().split('.').pop();
  const route = { zip: 'upload_zip', vmd: 'upload_animation' }[ext] || 'upload';
  const fd = new FormData();
  fd.append('file', file, file.name);
  const p = api.progressOf($('mmd-progress'));
  p.start();
  const r = await api.upload(`/api/model/mmd/${route}`, fd, (f, l, t) => p.set(f, l, t));
  p.done(r.ok ? 'upload complete' : 'upload failed');
  if (!r.ok) say('mmd-result', `Upload failed: ${api.explain(r)}`, 'error');
  else say('mmd-result', ext === 'vmd' ? `Added the animation ${r.body.filename}.` : `Added the model ${r.body.model_name}${r.body.file_count ? ` (${r.body.file_count} files)` : ''}.`, 'ok');
  $('mmd-file').value = '';
  await loadMmd();
}

async function loadPng() {
  const r = await api.get('/api/model/pngtuber/models');
  const models = (r.ok && r.body.models) || [];
  $('png-body').replaceChildren(...models.map((m) => el('tr', {},
    el('th', { scope: 'row', class: 'name' },
      m.pngtuber && m.pngtuber.idle_image ? el('img', { src: m.pngtuber.idle_image, alt: '', class: 'thumb' }) : '', m.name),
    el('td', {}, m.folder),
    el('td', {}, (m.source_format || '').replace(/_/g, ' ')),
    el('td', { class: 'actions' }, confirmButton('Delete', `Really delete ${m.name}?`, () => delPng(m))))));
  if (!models.length) $('png-body').append(el('tr', {}, el('td', { colspan: 4, class: 'muted' }, 'No PNGTuber models yet.')));
}

async function delPng(m) {
  const r = await api.del('/api/model/pngtuber/model', { folder: m.folder });
  say('png-result', r.ok ? `Deleted ${m.name}.` : `Not deleted: ${api.explain(r)}`, r.ok ? 'ok' : 'error');
  await loadPng();
}

async function uploadPng(ev) {
  ev.preventDefault();
  const files = [...$('png-folder').files, ...$('png-files').files];
  if (!files.length) { say('png-result', 'Choose the package folder (or its files) first.', 'error'); return; }
  const fd = new FormData();
  for (const f of files) fd.append('files', f, f.webkitRelativePath || f.name);
  const p = api.progressOf($('png-progress'));
  p.start();
  const r = await api.upload('/api/model/pngtuber/upload_model', fd, (f, l, t) => p.set(f, l, t));
  p.done(r.ok ? 'upload complete' : 'upload failed');
  const warn = r.body && r.body.warnings && r.body.warnings.length ? ` Notes: ${r.body.warnings.join('; ')}` : '';
  if (!r.ok) say('png-result', `Not imported: ${api.explain(r)}${warn}`, 'error');
  else say('png-result', `Imported the PNGTuber model ${r.body.name} (${(r.body.source_format || '').replace(/_/g, ' ')}).${warn}`, 'ok');
  $('png-folder').value = '';
  $('png-files').value = '';
  await loadPng();
}

export default {
  init() {
    $('songs-upload').addEventListener('submit', (e) => { e.preventDefault(); uploadFiles('songs-files', `${J}/songs`, 'songs-progress', 'songs-result', 'song'); });
    $('actions-upload').addEventListener('submit', (e) => { e.preventDefault(); uploadFiles('actions-files', `${J}/actions`, 'actions-progress', 'actions-result', 'action'); });
    $('lib-export').addEventListener('click', exportLibrary);
    $('lib-import').addEventListener('submit', importLibrary);
    $('mmd-upload').addEventListener('submit', uploadMmd);
    $('png-upload').addEventListener('submit', uploadPng);
  },
  show() { loadJukebox(); loadMmd(); loadPng(); },
};
