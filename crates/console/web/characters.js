// Characters: list, create, switch current, rename (the rename transaction), delete;
// character cards: import a card file, export links per row (docs/characters.md).
import * as api from './api.js';
import { el, say, confirmButton } from './ui.js';

let app;
const $ = (id) => document.getElementById(id);

/** Words for a refused name; opens the rules so the person sees them. */
function refused(r, what) {
  const code = r.body && (r.body.code || r.body.error_code);
  const nameRule = ['empty', 'contains_path_separator', 'path_traversal', 'unsafe_dot', 'contains_dot',
    'reserved_device_name', 'reserved_route_name', 'invalid_character', 'too_long_units'].includes(code);
  if (nameRule) $('chars-rules').open = true;
  const words = code === 'empty' ? 'The name is empty.' : api.explain(r);
  return `${what}: ${words}${nameRule ? ' See the name rules below.' : ''}`;
}

function render() {
  const body = $('chars-body');
  body.replaceChildren(...app.characters.map((name) => {
    const isCurrent = name === app.current;
    const actions = el('td', { class: 'actions' });
    if (!isCurrent) {
      actions.append(el('button', { type: 'button', onclick: () => switchTo(name) }, 'Make current'));
    }
    actions.append(el('button', { type: 'button', onclick: () => startRename(name, actions) }, 'Rename'));
    actions.append(confirmButton('Delete', `Really delete ${name}?`, () => remove(name)));
    const card = `/api/characters/card/${encodeURIComponent(name)}/export`;
    actions.append(el('span', { class: 'exports' }, 'Export: ',
      ...['png', 'json', 'charx'].map((f) => el('a', {
        href: `${card}?format=${f}`, download: `${name}.${f}`, 'aria-label': `Export ${name} as ${f.toUpperCase()}`,
      }, f.toUpperCase())).flatMap((a, i) => (i ? [' · ', a] : [a]))));
    return el('tr', { 'data-name': name },
      el('th', { scope: 'row', class: 'name' }, name),
      el('td', {}, isCurrent ? el('span', { class: 'pill good' }, 'current') : ''),
      actions);
  }));
}

async function create(ev) {
  ev.preventDefault();
  const name = $('chars-new-name').value.trim();
  if (!name) { say('chars-result', 'Enter a name first.', 'error'); return; }
  const r = await api.post('/api/characters/profile', { name });
  if (!r.ok) { say('chars-result', refused(r, `“${name}” was not created`), 'error'); return; }
  $('chars-new-name').value = '';
  await app.refreshCharacters();
  say('chars-result', `Created ${r.body.name}. Use “Make current” to talk to them.`, 'ok');
}

async function importCard(ev) {
  ev.preventDefault();
  const file = $('cards-file').files[0];
  if (!file) { say('cards-result', 'Choose a card file first.', 'error'); return; }
  const fd = new FormData();
  fd.append('file', file, file.name);
  const p = api.progressOf($('cards-progress'));
  p.start();
  const r = await api.upload('/api/characters/card/import', fd, (f, l, t) => p.set(f, l, t));
  p.done(r.ok ? 'imported' : 'import failed');
  if (!r.ok) { say('cards-result', `“${file.name}” was not imported: ${api.explain(r)}`, 'error'); return; }
  $('cards-file').value = '';
  await app.refreshCharacters();
  const b = r.body;
  const renamed = b.name !== b.card_name ? ` (the card says “${b.card_name}”)` : '';
  say('cards-result', `Imported ${b.name}${renamed} from a ${b.format.toUpperCase()} card${b.image ? ' with its image' : ''}. Use “Make current” to talk to them.`, 'ok');
}

async function switchTo(name) {
  const r = await api.post('/api/characters/current', { name });
  if (!r.ok) { say('chars-result', `Could not switch: ${api.explain(r)}`, 'error'); return; }
  await app.refreshCharacters();
  say('chars-result', `${r.body.current} is now the current character.`, 'ok');
}

function startRename(name, cell) {
  const input = el('input', { value: name, 'aria-label': `New name for ${name}`, maxlength: '60' });
  const f = el('form', { class: 'inline' }, input,
    el('button', { type: 'submit', class: 'primary' }, 'Rename'),
    el('button', { type: 'button', onclick: render }, 'Cancel'));
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const newName = input.value.trim();
    const r = await api.post(`/api/characters/profile/${encodeURIComponent(name)}/rename`, { new_name: newName });
    if (!r.ok) { say('chars-result', refused(r, `Could not rename ${name}`), 'error'); return; }
    await app.refreshCharacters();
    say('chars-result', r.body.already_renamed
      ? `${name} had already been renamed to ${newName}.`
      : `Renamed ${name} to ${newName}; its memory moved along.`, 'ok');
  });
  cell.replaceChildren(f);
  input.focus();
  input.select();
}

async function remove(name) {
  const r = await api.del(`/api/characters/profile/${encodeURIComponent(name)}`);
  if (!r.ok) { say('chars-result', `Could not delete ${name}: ${api.explain(r)}`, 'error'); return; }
  await app.refreshCharacters();
  await loadTrash();
  say('chars-result', `Deleted ${name}. It stays in the Trash below for 30 days.`, 'ok');
}

function when(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso || '' : d.toLocaleDateString();
}

async function loadTrash() {
  const body = $('chars-trash');
  const r = await api.get('/api/memory/trash');
  if (!r.ok) { body.replaceChildren(); say('chars-trash-result', `The trash could not be read: ${api.explain(r)}`, 'error'); return; }
  const items = (r.body.items || []).filter((i) => !i.configured);
  if (!items.length) {
    body.replaceChildren(el('tr', {}, el('td', { colspan: '4', class: 'muted' }, 'The trash is empty.')));
    return;
  }
  body.replaceChildren(...items.map((i) => el('tr', { 'data-name': i.character },
    el('th', { scope: 'row', class: 'name' }, i.character),
    el('td', {}, when(i.snapshot.created_at)),
    el('td', {}, when(i.snapshot.expires_at)),
    el('td', { class: 'actions' }, el('button', { type: 'button', onclick: () => bringBack(i) }, 'Bring back')))));
}

async function bringBack(i) {
  const r = await api.post('/api/memory/snapshots/restore', { character: i.character, id: i.snapshot.id });
  if (!r.ok) { say('chars-trash-result', `Could not bring back ${i.character}: ${api.explain(r)}`, 'error'); return; }
  await app.refreshCharacters();
  await loadTrash();
  say('chars-trash-result', `${i.character} is back, with its memory.`, 'ok');
}

export default {
  init(a) {
    app = a;
    $('chars-create').addEventListener('submit', create);
    $('cards-import').addEventListener('submit', importCard);
    app.onCharacters(render);
  },
  async show() { await app.refreshCharacters(); await loadTrash(); },
};
