// Cloud save: summary per character, upload / download with the overwrite
// choice asked in words, the result in words.
import * as api from './api.js';
import { el, say } from './ui.js';

let app;
const $ = (id) => document.getElementById(id);
const C = '/api/cloudsave';

const STATE = {
  local_only: 'only on this device',
  cloud_only: 'only in the cloud',
  matched: 'the same on both sides',
  diverged: 'different on each side',
};

function when(t) {
  if (!t) return '—';
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? t : d.toLocaleString();
}

async function load() {
  const r = await api.get(`${C}/summary`);
  if (!r.ok) {
    $('cloud-body').replaceChildren();
    say('cloud-result', `The cloud save cannot be read: ${api.explain(r)}`, 'error');
    return;
  }
  const b = r.body;
  const where = b.platform_autocloud && b.platform_autocloud.manifest_path;
  $('cloud-target').textContent = `Target: ${b.sync_backend === 's3' ? 'an S3 bucket' : 'a folder'}${where ? ` (${where.replace(/[\\/]characters$/, '')})` : ''}.`;
  const items = b.items || [];
  $('cloud-body').replaceChildren(...items.map((it) => {
    const acts = it.available_actions || [];
    const cell = el('td', { class: 'actions' });
    if (it.local_exists) cell.append(el('button', { type: 'button', onclick: () => upload(it.character_name, false) }, 'Upload'));
    if (it.cloud_exists) cell.append(el('button', { type: 'button', onclick: () => download(it.character_name, {}) }, 'Download'));
    if (!acts.length && it.local_exists && it.cloud_exists) cell.prepend(el('span', { class: 'muted' }, 'up to date '));
    return el('tr', { 'data-name': it.character_name },
      el('th', { scope: 'row', class: 'name' }, it.display_name || it.character_name),
      el('td', {}, STATE[it.relation_state] || it.relation_state),
      el('td', {}, it.local_exists ? when(it.local_updated_at_utc) : 'absent'),
      el('td', {}, it.cloud_exists ? `${when(it.cloud_updated_at_utc)}${it.cloud_sequence_number ? ` (#${it.cloud_sequence_number})` : ''}` : 'absent'),
      cell);
  }));
  if (!items.length) $('cloud-body').append(el('tr', {}, el('td', { colspan: 5, class: 'muted' }, 'No characters.')));
}

/** Ask a question in the page (no modal dialogs): buttons [label, fn]. */
function ask(text, buttons) {
  const box = $('cloud-ask');
  const btns = buttons.map(([label, fn, cls]) => el('button', { type: 'button', class: cls || '',
    onclick: async () => { box.hidden = true; await fn(); } }, label));
  box.replaceChildren(el('p', {}, text), el('div', { class: 'buttons' }, ...btns,
    el('button', { type: 'button', onclick: () => { box.hidden = true; say('cloud-result', 'Nothing was changed.', 'info'); } }, 'Cancel')));
  box.hidden = false;
  btns[0].focus();
}

async function upload(name, overwrite) {
  say('cloud-result', `Uploading ${name}…`);
  const r = await api.post(`${C}/character/${encodeURIComponent(name)}/upload`, { overwrite });
  const code = r.body && r.body.code;
  if (code === 'CLOUD_CHARACTER_EXISTS') {
    say('cloud-result', '');
    ask(`The cloud already has a copy of ${name}. Replace the cloud copy with the one on this device?`,
      [['Replace the cloud copy', () => upload(name, true), 'primary']]);
    return;
  }
  if (!r.ok) { say('cloud-result', `${name} was not uploaded: ${api.explain(r)}`, 'error'); return; }
  say('cloud-result', `Uploaded ${name} to the cloud (version #${r.body.sequence_number}). This device was not changed.`, 'ok');
  await load();
}

async function download(name, opts) {
  say('cloud-result', `Downloading ${name}…`);
  const body = { overwrite: false, ...opts };
  const r = await api.post(`${C}/character/${encodeURIComponent(name)}/download`, body);
  const code = r.body && r.body.code;
  if (code === 'LOCAL_CHARACTER_EXISTS') {
    say('cloud-result', '');
    const keep = el('input', { type: 'checkbox', checked: true, id: 'cloud-backup' });
    ask(`This device already has ${name}. Replace its memory and profile with the cloud copy?`,
      [['Replace the local copy', () => download(name, { ...opts, overwrite: true, backup_before_overwrite: $('cloud-backup').checked }), 'primary']]);
    $('cloud-ask').insertBefore(el('label', { class: 'check' }, keep, ' Keep a backup of the local copy first'), $('cloud-ask').lastChild);
    return;
  }
  if (code === 'ACTIVE_SESSION_BLOCKED') {
    say('cloud-result', '');
    ask(`A chat with ${name} is open (in this console or another window). Close that chat and continue?`,
      [['Close the chat and download', () => download(name, { ...opts, force: true }), 'primary']]);
    return;
  }
  if (!r.ok) { say('cloud-result', `${name} was not downloaded: ${api.explain(r)}`, 'error'); return; }
  const backup = r.body.backup_path ? ` The previous local copy was backed up to ${r.body.backup_path}.` : '';
  say('cloud-result', `Downloaded ${name} from the cloud (version #${r.body.sequence_number}).${backup}`, 'ok');
  await app.refreshCharacters();
  await load();
}

export default {
  init(a) {
    app = a;
    $('cloud-refresh').addEventListener('click', load);
  },
  show() { $('cloud-ask').hidden = true; load(); },
};
