// Start: status of the server and the guided language-model setup.
import * as api from './api.js';
import { el, say } from './ui.js';

const SLOTS = ['conversation', 'summary', 'correction', 'emotion', 'vision', 'agent'];
const MASK = '__NEKO_SECRET_MASKED__';
let app;
let catalog = [];      // core_api_providers
let coreCfg = {};      // GET /api/config/core_api
const $ = (id) => document.getElementById(id);

function kind() { return document.querySelector('input[name="setup-kind"]:checked').value; }

function showKind() {
  $('setup-custom').hidden = kind() !== 'custom';
  $('setup-builtin').hidden = kind() !== 'builtin';
  describeProvider();
}

function describeProvider() {
  const p = catalog.find((x) => x.key === $('setup-provider').value);
  $('setup-provider-desc').textContent = p ? (p.description || '') : '';
}

/** Is a conversation model set up (the server's own resolution rule)? */
function modelSummary(cfg) {
  if (cfg.enableCustomApi === true && cfg.conversationModelUrl) {
    return { ok: true, text: `${cfg.conversationModelId || '(no model id)'} at ${cfg.conversationModelUrl}` };
  }
  const p = catalog.find((x) => x.key === cfg.coreApi);
  if (p && p.key === 'local') return { ok: true, text: `${p.name} (built-in provider)` };
  if (p && !p.is_free_version && cfg.coreApiKey) return { ok: true, text: `${p.name} (built-in provider)` };
  return { ok: false, text: 'not set up yet' };
}

async function loadStatus() {
  const [st, ver, scan, cfg, prov] = await Promise.all([
    api.get('/api/system/status'),
    api.get('/api/changelog'),
    api.get('/api/memory/legacy/scan'),
    api.get('/api/config/core_api'),
    api.get('/api/config/api_providers'),
  ]);
  if (st.status === 0) {
    $('st-status').textContent = 'not reachable — is companiond running?';
    return;
  }
  const s = st.body || {};
  const words = { ready: 'ready', starting: 'starting…', migration_required: 'a storage migration is required' };
  let text = words[s.status] || String(s.status || 'unknown');
  if (s.storage && s.storage.blocking_reason) text += ` (${s.storage.blocking_reason})`;
  $('st-status').textContent = text;
  $('st-status').className = s.ready ? 'good' : 'bad';
  $('st-version').textContent = (ver.body && ver.body.current_version) || 'unknown';
  const mem = scan.body && scan.body.runtime_memory_dir;
  $('st-datadir').textContent = mem ? mem.replace(/[\\/]memory[\\/]?$/, '') : 'unknown';
  $('st-current').textContent = app.current;
  catalog = (prov.body && prov.body.core_api_providers) || [];
  const sel = $('setup-provider');
  sel.replaceChildren(...catalog.filter((p) => !p.is_free_version)
    .map((p) => el('option', { value: p.key }, p.name)));
  coreCfg = cfg.body || {};
  const m = modelSummary(coreCfg);
  $('st-model').textContent = m.text;
  $('st-model').className = m.ok ? 'good' : 'bad';
  fillForm(m.ok);
}

/** Put the stored settings into the form (keys stay masked). */
function fillForm(configured) {
  const c = coreCfg;
  $('setup-intro').textContent = configured
    ? 'A model is set up. You can change it here.'
    : 'No language model is set up yet, so the character cannot answer. Point it at a model: a local server such as Ollama, LM Studio or llama.cpp, or a built-in provider with your API key — or, with nothing else installed, download a model for the built-in engine under Local model.';
  if (c.enableCustomApi === true && c.conversationModelUrl) {
    document.querySelector('input[name="setup-kind"][value="custom"]').checked = true;
    $('setup-url').value = c.conversationModelUrl;
    $('setup-model').value = c.conversationModelId || '';
    $('setup-key').value = c.conversationModelApiKey || '';
  } else if (configured) {
    document.querySelector('input[name="setup-kind"][value="builtin"]').checked = true;
    $('setup-provider').value = c.coreApi;
    $('setup-key').value = c.coreApiKey || '';
  }
  showKind();
}

function probeBody(extra) {
  const key = $('setup-key').value.trim();
  if (kind() === 'custom') {
    return { url: $('setup-url').value.trim(), api_key: key, model_type: 'conversation', provider_type: 'openai_compatible', ...extra };
  }
  return { provider_key: $('setup-provider').value, provider_scope: 'core', api_key: key, ...extra };
}

function needUrl() {
  if (kind() === 'custom' && !$('setup-url').value.trim()) {
    say('setup-result', 'Enter the server URL first (or pick Ollama, LM Studio or llama.cpp above).', 'error');
    $('setup-url').focus();
    return true;
  }
  return false;
}

async function listModels() {
  if (needUrl()) return;
  say('setup-result', 'Asking the server for its models…');
  const r = await api.post('/api/config/list_models', probeBody({}));
  if (!r.ok) return say('setup-result', `Could not list models: ${api.explain(r)}`, 'error');
  const models = r.body.models || [];
  $('setup-models').replaceChildren(...models.map((m) => el('option', { value: m.id }, m.name || m.id)));
  if (!$('setup-model').value && models.length) $('setup-model').value = models[0].id;
  say('setup-result', `The server offers ${models.length} model${models.length === 1 ? '' : 's'}: ${models.slice(0, 8).map((m) => m.id).join(', ')}${models.length > 8 ? ', …' : ''}. Pick one in the Model field.`, 'ok');
}

async function testConnection() {
  if (needUrl()) return;
  const model = $('setup-model').value.trim();
  if (kind() === 'custom' && !model) {
    say('setup-result', 'Enter a model name first (use "List models" to see what the server has).', 'error');
    return;
  }
  say('setup-result', 'Sending a tiny test message…');
  const extra = kind() === 'custom' ? { model } : {};
  const r = await api.post('/api/config/test_connectivity', probeBody(extra));
  if (!r.ok) return say('setup-result', `The test failed: ${api.explain(r)}`, 'error');
  say('setup-result', `Connection works: the model answered in ${r.body.latency_ms ?? '?'} ms.`, 'ok');
}

async function save() {
  const key = $('setup-key').value.trim();
  let body;
  if (kind() === 'custom') {
    if (needUrl()) return;
    const url = $('setup-url').value.trim();
    const model = $('setup-model').value.trim();
    if (!model) return say('setup-result', 'Enter a model name first (use "List models").', 'error');
    body = { enableCustomApi: true };
    const slots = $('setup-all').checked ? SLOTS : ['conversation'];
    for (const s of slots) {
      body[`${s}ModelUrl`] = url;
      body[`${s}ModelId`] = model;
      // a masked key sent back keeps the stored one only for its own slot
      if (key !== MASK || s === 'conversation') body[`${s}ModelApiKey`] = key;
    }
  } else {
    const p = $('setup-provider').value;
    body = { enableCustomApi: false, coreApi: p, coreApiKey: key };
    if ($('setup-all').checked) body.assistApi = p;
  }
  const r = await api.post('/api/config/core_api', body);
  if (!r.ok) return say('setup-result', `Not saved: ${api.explain(r)}`, 'error');
  say('setup-result', 'Saved. The character will use this model from the next message on. Go to Chat to talk.', 'ok');
  await loadStatus();
  say('setup-result', 'Saved. The character will use this model from the next message on. Go to Chat to talk.', 'ok');
}

export default {
  init(a) {
    app = a;
    for (const r of document.querySelectorAll('input[name="setup-kind"]')) r.addEventListener('change', showKind);
    $('setup-provider').addEventListener('change', describeProvider);
    for (const b of document.querySelectorAll('[data-preset]')) {
      b.addEventListener('click', () => { $('setup-url').value = b.dataset.preset; $('setup-url').focus(); });
    }
    $('setup-list').addEventListener('click', listModels);
    $('setup-test').addEventListener('click', testConnection);
    $('setup-save').addEventListener('click', save);
    $('st-refresh').addEventListener('click', async () => { await app.refreshCharacters(); await loadStatus(); });
    app.onCharacters(() => { $('st-current').textContent = app.current; });
  },
  show() { loadStatus(); },
};
