// The console shell: hash navigation (#start, #chat, ...) and the current
// character, shared with the sections (one module each).
import * as api from './api.js';
import { banner } from './ui.js';
import start from './start.js';
import chat from './chat.js';
import characters from './characters.js';
import memory from './memory.js';
import library from './library.js';
import cloud from './cloud.js';
import settings from './settings.js';
import reference from './reference.js';
import mcp from './mcp.js';
import local from './local.js';

const sections = { start, chat, characters, memory, library, cloud, local, settings, mcp, reference };
let active = null;

/** Shared state and helpers the sections use. */
const app = {
  current: '',
  characters: [],
  listeners: [],
  /** Reload the character list and the current name; tell the sections. */
  async refreshCharacters() {
    const r = await api.get('/api/characters');
    if (r.ok) {
      app.current = r.body.current || '';
      app.characters = (r.body.characters || []).map((c) => c.name);
      document.getElementById('current-name').textContent = app.current;
      for (const f of app.listeners) f();
    }
    return r;
  },
  onCharacters(f) { app.listeners.push(f); },
  go(name) { location.hash = '#' + name; },
};

function route() {
  const name = (location.hash || '#start').slice(1).split('/')[0];
  if (!sections[name] && active) return; // an in-page anchor, not a section
  const target = sections[name] ? name : 'start';
  if (active === target) return;
  if (active && sections[active].hide) sections[active].hide();
  active = target;
  for (const key of Object.keys(sections)) {
    document.getElementById(`section-${key}`).hidden = key !== target;
  }
  for (const a of document.querySelectorAll('nav a')) {
    if (a.dataset.section === target) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const sec = document.getElementById(`section-${target}`);
  document.title = `${sec.dataset.title} — companiond`;
  sections[target].show();
  const h = sec.querySelector('h1');
  if (h && document.activeElement && document.activeElement.closest('nav')) h.focus();
}

async function boot() {
  for (const s of Object.values(sections)) s.init(app);
  try { await api.csrf(); } catch { banner('companiond is not reachable. Start it and reload this page.'); }
  await app.refreshCharacters();
  window.addEventListener('hashchange', route);
  document.querySelector('.skip').addEventListener('click', (e) => {
    e.preventDefault();
    const h = document.querySelector('main section:not([hidden]) h1');
    if (h) h.focus();
  });
  route();
}

boot();
