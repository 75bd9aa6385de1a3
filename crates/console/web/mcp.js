// MCP: the tool servers (state, tools, last error; add, enable/disable, remove)
// and companiond's own MCP endpoint (on/off, token). docs/mcp.md.
import * as api from './api.js';
import { el, say, confirmButton } from './ui.js';

const $ = (id) => document.getElementById(id);
const STATE = {
  running: 'running',
  starting: 'starting…',
  restarting: 'restarting',
  disabled: 'off',
  stopped: 'stopped',
};
let timer = null;

async function load() {
  const r = await api.get('/api/mcp/servers');
  if (!r.ok) {
    say('mcp-result', `The MCP servers cannot be read: ${api.explain(r)}`, 'error');
    return;
  }
  const servers = r.body.servers || [];
  $('mcp-body').replaceChildren(...servers.map((s) => {
    const name = encodeURIComponent(s.name);
    const actions = el('td', { class: 'actions' },
      s.enabled
        ? el('button', { type: 'button', onclick: () => act(`/api/mcp/servers/${name}/disable`, `${s.name} is off.`) }, 'Turn off')
        : el('button', { type: 'button', onclick: () => act(`/api/mcp/servers/${name}/enable`, `${s.name} is starting.`) }, 'Turn on'),
      ' ',
      confirmButton('Remove', 'Press again to remove', () => act(`/api/mcp/servers/${name}`, `${s.name} was removed.`, 'DELETE')));
    let state = STATE[s.state] || s.state;
    if (s.state === 'restarting' && s.retry_in_ms) state += ` (next try in ${Math.ceil(s.retry_in_ms / 1000)} s)`;
    const notes = [];
    if (s.last_error) notes.push(s.last_error);
    if (s.clashes && s.clashes.length) notes.push(`not offered: ${s.clashes.join(', ')}`);
    return el('tr', { 'data-name': s.name },
      el('th', { scope: 'row', class: 'name' }, s.name, el('div', { class: 'muted' }, s.transport)),
      el('td', {}, state),
      el('td', {}, s.tools.length ? s.tools.join(', ') : el('span', { class: 'muted' }, 'none')),
      el('td', {}, notes.length ? notes.join('; ') : el('span', { class: 'muted' }, '—')),
      actions);
  }));
  if (!servers.length) $('mcp-body').append(el('tr', {}, el('td', { colspan: 5, class: 'muted' }, 'No MCP servers yet.')));
}

async function act(path, done, method = 'POST') {
  const r = method === 'DELETE' ? await api.del(path) : await api.post(path);
  if (r.ok) say('mcp-result', done, 'ok');
  else say('mcp-result', api.explain(r), 'error');
  await load();
}

async function add() {
  const name = $('mcp-name').value.trim();
  let server;
  try {
    server = JSON.parse($('mcp-config').value || '{}');
  } catch (e) {
    say('mcp-result', `The settings are not JSON: ${e.message}`, 'error');
    return;
  }
  const r = await api.post('/api/mcp/servers', { name, server });
  if (r.ok) {
    say('mcp-result', `${name} was saved and is starting.`, 'ok');
    $('mcp-config').value = '';
  } else {
    say('mcp-result', api.explain(r), 'error');
  }
  await load();
}

async function loadEndpoint() {
  const r = await api.get('/api/mcp/endpoint');
  if (!r.ok) {
    say('mcp-ep-result', api.explain(r), 'error');
    return;
  }
  const b = r.body;
  $('mcp-ep-state').textContent = b.enabled
    ? `On: connect to ${location.origin}${b.path} with the header "Authorization: Bearer <token>".`
    : 'Off.';
  $('mcp-ep-toggle').textContent = b.enabled ? 'Turn off' : 'Turn on';
  $('mcp-ep-toggle').dataset.enabled = b.enabled ? '1' : '';
  $('mcp-ep-token').textContent = b.token || '—';
}

async function setEndpoint(body, done) {
  const r = await api.post('/api/mcp/endpoint', body);
  if (r.ok) say('mcp-ep-result', done, 'ok');
  else say('mcp-ep-result', api.explain(r), 'error');
  await loadEndpoint();
}

export default {
  init() {
    $('mcp-refresh').addEventListener('click', load);
    $('mcp-add').addEventListener('click', add);
    $('mcp-ep-toggle').addEventListener('click', () => {
      const on = !$('mcp-ep-toggle').dataset.enabled;
      setEndpoint({ enabled: on }, on ? 'The MCP endpoint is on.' : 'The MCP endpoint is off.');
    });
    $('mcp-ep-rotate').addEventListener('click', () =>
      setEndpoint({ rotate_token: true }, 'A new token was made; the old one no longer works.'));
  },
  show() {
    load();
    loadEndpoint();
    // The state of starting servers changes by itself: refresh while shown.
    timer = setInterval(load, 3000);
  },
  hide() {
    clearInterval(timer);
    timer = null;
  },
};
