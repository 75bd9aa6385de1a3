// Settings: proactive-chat mode and fields, the voice, conversation settings
// (with the revision / If-Match rule), proxy mode.
import * as api from './api.js';
import { el, say } from './ui.js';

const $ = (id) => document.getElementById(id);

const PRO_FIELDS = [
  ['proactiveChatEnabled', 'Start conversations by itself'],
  ['proactivePersonalChatEnabled', 'Personal topics'],
  ['proactiveVisionChatEnabled', 'Talk about what is on screen'],
  ['proactiveNewsChatEnabled', 'News'],
  ['proactiveVideoChatEnabled', 'Videos'],
  ['proactiveCommunityChatEnabled', 'Community posts'],
  ['proactiveMusicEnabled', 'Music'],
  ['proactiveMemeEnabled', 'Memes'],
  ['proactiveMiniGameInviteEnabled', 'Mini-game invitations'],
  ['proactiveChatInterval', 'Chat interval (seconds)', 'int'],
  ['proactiveVisionInterval', 'Screen-look interval (seconds)', 'int'],
];

const CONV_FIELDS = [
  ['proactiveVisionEnabled', 'Let the character look at the screen (privacy)'],
  ['mergeMessagesEnabled', 'Merge quick consecutive messages'],
  ['focusModeEnabled', 'Focus mode'],
  ['subtitleEnabled', 'Subtitles'],
  ['avatarReactionBubbleEnabled', 'Reaction bubbles over the avatar'],
  ['slopFilterEnabled', 'Filter clichéd phrases'],
  ['noiseReductionEnabled', 'Microphone noise reduction'],
  ['independentAsrEnabled', 'Separate speech recognition'],
  ['textGuardMaxLength', 'Longest message the character reads (0–2000 characters)', 'int'],
  ['userLanguage', 'Your language (e.g. en, zh-CN, ja)', 'text'],
];

let convRevision = null;
let convDirty = false;   // the person edited the conversation form since it was read

function fieldInput(prefix, [key, label, type], value) {
  const id = `${prefix}-${key}`;
  if (!type) {
    const box = el('input', { type: 'checkbox', id, 'data-key': key, checked: value === true });
    return el('label', { class: 'check' }, box, ' ', label);
  }
  const input = el('input', { id, 'data-key': key, type: type === 'int' ? 'number' : 'text', class: type === 'int' ? 'short' : '' });
  input.value = value ?? '';
  return el('label', { class: 'field' }, label, ' ', input);
}

function readFields(container, only) {
  const out = {};
  for (const i of container.querySelectorAll('[data-key]')) {
    if (only && !only.has(i.dataset.key)) continue;
    if (i.type === 'checkbox') out[i.dataset.key] = i.checked;
    else if (i.type === 'number') { if (i.value !== '') out[i.dataset.key] = Number(i.value); }
    else if (i.value.trim() !== '') out[i.dataset.key] = i.value.trim();
  }
  return out;
}

async function loadProactive() {
  const r = await api.get('/api/proactive/mode');
  if (!r.ok) { say('pro-result', `Could not read the proactive settings: ${api.explain(r)}`, 'error'); return; }
  const mode = r.body.mode;
  for (const radio of document.querySelectorAll('input[name="pro-mode"]')) radio.checked = radio.value === mode;
  $('pro-mode-now').textContent = mode === 'custom' ? '(now: custom — individual fields differ from every preset)' : `(now: ${mode})`;
  const s = r.body.settings || {};
  $('pro-fields').replaceChildren(...PRO_FIELDS.map((f) => fieldInput('pro', f, s[f[0]])));
}

function describeWrite(b) {
  const bad = [...(b.rejected || []), ...(b.rejected_user_owned || [])];
  return bad.length ? ` Not applied: ${bad.join(', ')}.` : '';
}

/** Proactive fields live in the conversation-settings document: a proactive
 * write bumps its revision, so re-read the form below unless it holds edits. */
async function afterProactiveWrite() {
  await loadProactive();
  if (!convDirty) await loadConversation();
}

async function setMode(mode) {
  const r = await api.post('/api/proactive/mode', { mode });
  if (!r.ok) { say('pro-result', `Mode not changed: ${api.explain(r)}`, 'error'); return; }
  await afterProactiveWrite();
  say('pro-result', `Proactive chat is now “${r.body.mode}”.${describeWrite(r.body)}`, 'ok');
}

async function saveProactive() {
  const r = await api.post('/api/proactive/settings', readFields($('pro-fields')));
  if (!r.ok) { say('pro-result', `Not saved: ${api.explain(r)}`, 'error'); return; }
  await afterProactiveWrite();
  say('pro-result', `Saved; the mode is now “${r.body.mode}”.${describeWrite(r.body)}`, 'ok');
}

let convLoaded = {};

async function loadConversation() {
  const r = await api.get('/api/config/conversation-settings');
  if (!r.ok) { say('conv-result', `Could not read the conversation settings: ${api.explain(r)}`, 'error'); return; }
  convRevision = r.headers.get('ETag') || (r.body.revision != null ? String(r.body.revision) : null);
  const s = r.body.settings || {};
  convLoaded = readFieldsFrom(s);
  convDirty = false;
  $('conv-fields').replaceChildren(...CONV_FIELDS.map((f) => fieldInput('conv', f, s[f[0]])));
}

function readFieldsFrom(s) {
  const o = {};
  for (const [k] of CONV_FIELDS) o[k] = s[k];
  return o;
}

async function saveConversation() {
  const all = readFields($('conv-fields'));
  // send only what the person changed, so unset fields stay unset
  const body = {};
  for (const [k, v] of Object.entries(all)) {
    if (convLoaded[k] !== v && !(convLoaded[k] === undefined && v === false)) body[k] = v;
  }
  if (!Object.keys(body).length) { say('conv-result', 'Nothing changed.', 'info'); return; }
  const headers = convRevision ? { 'If-Match': convRevision } : {};
  const r = await api.request('POST', '/api/config/conversation-settings', body, headers);
  if (r.status === 412) {
    say('conv-result', 'Not saved: these settings were changed elsewhere — reload them and make the change again.', 'error');
    return;
  }
  if (!r.ok) { say('conv-result', `Not saved: ${api.explain(r)}`, 'error'); return; }
  await loadConversation();
  const rej = [...(r.body.rejected || []), ...(r.body.ignored || [])];
  say('conv-result', `Saved.${rej.length ? ` Not accepted: ${rej.map((x) => (typeof x === 'string' ? x : x.field || JSON.stringify(x))).join(', ')}.` : ''}`, rej.length ? 'error' : 'ok');
}

// Voice: the configured speech provider's voices (GET /api/config/tts_voices);
// the choice is stored as ttsVoiceId.
async function loadVoices() {
  const [list, cfg] = await Promise.all([api.get('/api/config/tts_voices'), api.get('/api/config/core_api')]);
  const pick = $('voice-pick');
  const current = (cfg.ok && cfg.body.ttsVoiceId) || '';
  if (!list.ok || !list.body.success) {
    $('voice-provider').textContent = `The voices cannot be listed: ${api.explain(list)}`;
    pick.replaceChildren();
    return;
  }
  const b = list.body;
  $('voice-provider').textContent = b.provider === 'none'
    ? 'No voice is set up: set a speech server on Start or with POST /api/config/core_api.'
    : `Provider: ${b.provider}${b.offered ? '' : ' (it does not list its voices)'}.`;
  const ids = b.voices.map((v) => v.id);
  if (current && !ids.includes(current)) ids.unshift(current);
  pick.replaceChildren(...ids.map((id) => {
    const v = b.voices.find((x) => x.id === id);
    return el('option', { value: id }, v && v.name && v.name !== id ? `${v.name} (${id})` : id);
  }));
  pick.value = current;
}

// Hearing: asrModelUrl / asrModelId / asrModelApiKey (a stored key comes back masked).
async function loadHearing() {
  const cfg = await api.get('/api/config/core_api');
  if (!cfg.ok) return;
  $('asr-url').value = cfg.body.asrModelUrl || '';
  $('asr-model').value = cfg.body.asrModelId || '';
  $('asr-key').value = cfg.body.asrModelApiKey || '';
}

async function saveHearing() {
  const r = await api.post('/api/config/core_api', {
    asrModelUrl: $('asr-url').value.trim(),
    asrModelId: $('asr-model').value.trim(),
    asrModelApiKey: $('asr-key').value,
  });
  if (!r.ok) { say('asr-result', `Not saved: ${api.explain(r)}`, 'error'); return; }
  say('asr-result', $('asr-url').value.trim()
    ? 'Saved: the next “Hold to talk” uses this recogniser.' : 'Saved: hearing is off.', 'ok');
}

async function saveVoice() {
  const r = await api.post('/api/config/core_api', { ttsVoiceId: $('voice-pick').value });
  if (!r.ok) { say('voice-result', `Not saved: ${api.explain(r)}`, 'error'); return; }
  say('voice-result', `The next reply speaks with ${$('voice-pick').value}.`, 'ok');
}

async function proxy(direct) {
  const r = await api.post('/api/config/set_proxy_mode', { direct });
  if (!r.ok) { say('proxy-result', `Not changed: ${api.explain(r)}`, 'error'); return; }
  const p = Object.entries(r.body.proxies_after || {}).map(([k, v]) => `${k}: ${v}`).join(', ');
  say('proxy-result', direct
    ? 'Requests now go directly, without a proxy (until companiond restarts).'
    : `Requests follow the system proxy again${p ? ` (${p})` : ' (none is set)'}.`, 'ok');
}

/** Download the whole data folder as a ZIP (GET /api/backup, CSRF header). */
async function downloadBackup() {
  const q = new URLSearchParams();
  if ($('backup-secrets').checked) q.set('secrets', 'true');
  if ($('backup-snapshots').checked) q.set('snapshots', 'true');
  say('backup-result', 'Preparing the backup…', 'info');
  $('backup-download').disabled = true;
  try {
    const r = await fetch(`/api/backup?${q}`, { headers: { 'X-CSRF-Token': await api.csrf() }, cache: 'no-store' });
    if (!r.ok) {
      let body = {};
      try { body = await r.json(); } catch { body = {}; }
      say('backup-result', `No backup: ${api.explain({ ok: false, status: r.status, body })}`, 'error');
      return;
    }
    const blob = await r.blob();
    const name = (/filename="([^"]+)"/.exec(r.headers.get('content-disposition') || '') || [])[1] || 'companiond-backup.zip';
    const a = el('a', { href: URL.createObjectURL(blob), download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 60000);
    say('backup-result', `Backup downloaded (${api.size(blob.size)}).`, 'ok');
  } finally {
    $('backup-download').disabled = false;
  }
}

/** Upload a backup (POST /api/backup/restore): applied when companiond starts next. */
async function restoreBackup() {
  const file = $('backup-file').files[0];
  if (!file) { say('backup-result', 'Choose a backup file first.', 'error'); return; }
  $('backup-restore').disabled = true;
  try {
    const r = await api.request('POST', '/api/backup/restore', undefined, { 'Content-Type': 'application/zip' }, false, file);
    if (!r.ok) { say('backup-result', `Not restored: ${api.explain(r)}`, 'error'); return; }
    say('backup-result', 'The backup is checked and kept: restart companiond to restore it (the current data is kept aside).', 'ok');
  } finally {
    $('backup-restore').disabled = false;
  }
}

export default {
  init() {
    $('backup-download').addEventListener('click', downloadBackup);
    $('backup-restore').addEventListener('click', restoreBackup);
    for (const radio of document.querySelectorAll('input[name="pro-mode"]')) {
      radio.addEventListener('change', () => { if (radio.checked) setMode(radio.value); });
    }
    $('pro-save').addEventListener('click', saveProactive);
    $('conv-save').addEventListener('click', saveConversation);
    $('conv-reload').addEventListener('click', async () => { await loadConversation(); say('conv-result', 'Reloaded.', 'info'); });
    $('conv-fields').addEventListener('input', () => { convDirty = true; });
    $('conv-fields').addEventListener('change', () => { convDirty = true; });
    $('voice-save').addEventListener('click', saveVoice);
    $('asr-save').addEventListener('click', saveHearing);
    $('proxy-direct').addEventListener('click', () => proxy(true));
    $('proxy-system').addEventListener('click', () => proxy(false));
  },
  show() { loadProactive(); loadConversation(); loadVoices(); loadHearing(); },
};
