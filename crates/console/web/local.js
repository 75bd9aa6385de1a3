// Local model: the built-in engine (docs/local-model.md): which GGUF file it
// runs, its state, and the curated models with a download progress bar each.
import * as api from './api.js';
import { el, say } from './ui.js';

const $ = (id) => document.getElementById(id);
let timer = null;

function mib(n) { return `${Math.round((n || 0) / 1048576)} MiB`; }

async function loadStatus() {
  const r = await api.get('/api/local/status');
  if (!r.ok) return say('local-result', `Cannot read the local model's state: ${api.explain(r)}`, 'error');
  const b = r.body;
  const e = b.engine || {};
  $('local-file').textContent = b.model_path || 'none (pull a model below, or give a file)';
  const f = b.file;
  $('local-check').textContent = !f ? '—' : f.ok
    ? `${f.info.name} (${f.info.architecture}, ${mib(f.info.file_bytes)}, context ${f.info.context_length})`
    : `refused: ${f.error}`;
  $('local-check').className = f && !f.ok ? 'bad' : '';
  $('local-state').textContent = e.loaded ? `${e.state}: ${e.loaded}` : e.state || 'unloaded';
  $('local-speed').textContent = e.last_tokens_per_second
    ? `${e.last_tokens_per_second.toFixed(1)} tokens/s (last reply; ${e.last_cached_tokens || 0} of ${e.last_prompt_tokens || 0} prompt tokens from the cache)`
    : '—';
  $('local-threads').textContent = String(b.threads);
}

async function loadModels() {
  const r = await api.get('/api/local/models');
  if (!r.ok) return false;
  let busy = false;
  const rows = r.body.models.map((m) => {
    const d = m.download;
    const state = m.pulled ? 'pulled' : d ? d.state : '';
    if (state === 'downloading') busy = true;
    const bar = d && d.state === 'downloading'
      ? el('span', { class: 'progress' }, el('progress', { max: String(d.total || 1), value: String(d.received || 0), 'aria-label': `download of ${m.name}` }), `${mib(d.received)} / ${mib(d.total)}`)
      : d && d.state === 'failed' ? el('span', { class: 'bad' }, d.error || 'failed') : null;
    const pull = el('button', { type: 'button', 'data-pull': m.name, disabled: m.pulled || state === 'downloading' }, m.pulled ? 'Pulled' : 'Pull');
    pull.addEventListener('click', async () => {
      const p = await api.post(`/api/local/models/${encodeURIComponent(m.name)}/pull`);
      if (!p.ok) say('local-result', `Not started: ${api.explain(p)}`, 'error');
      poll();
    });
    const use = el('button', { type: 'button', 'data-use': m.name, disabled: !m.pulled }, 'Use');
    use.addEventListener('click', () => choose(m.name));
    return el('tr', { 'data-model': m.name },
      el('td', {}, el('strong', {}, m.name), el('br'), el('span', { class: 'muted' }, m.description)),
      el('td', {}, m.kind), el('td', {}, mib(m.size)), el('td', {}, m.license),
      el('td', { class: 'state' }, state, bar), el('td', {}, pull, ' ', use));
  });
  $('local-models').replaceChildren(...rows);
  return busy;
}

async function choose(spec) {
  const key = spec && /embed/i.test(spec) ? 'localEmbeddingModel' : 'localModel';
  const r = await api.post('/api/config/core_api', { [key]: spec });
  if (!r.ok) return say('local-result', `Not saved: ${api.explain(r)}`, 'error');
  say('local-result', spec ? `Saved: ${spec}` : 'Saved', 'ok');
  loadStatus();
}

async function poll() {
  clearTimeout(timer);
  const busy = await loadModels();
  await loadStatus();
  if (busy && !$('section-local').hidden) timer = setTimeout(poll, 500);
}

export default {
  init() {
    $('local-path-save').addEventListener('click', () => choose($('local-path').value.trim()));
    $('local-unload').addEventListener('click', async () => {
      await api.post('/api/local/unload');
      setTimeout(loadStatus, 300);
    });
  },
  show() { poll(); },
  hide() { clearTimeout(timer); },
};
