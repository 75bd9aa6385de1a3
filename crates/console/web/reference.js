// API reference: the OpenAPI document the server serves at /openapi.json,
// rendered here (no outside script or style): operations grouped by family,
// a filter, and for each operation its parameters, body and answers with the
// schemas resolved from the document's components.
import { el } from './ui.js';

const $ = (id) => document.getElementById(id);
let doc = null;
let loading = null;

/** The named schema a `$ref` points at (`#/components/schemas/Name`). */
function resolve(ref) {
  const name = ref.split('/').pop();
  return [name, (doc.components && doc.components.schemas && doc.components.schemas[name]) || {}];
}

/** The type of a schema in a few words: `string (date-time)`, `array of Song`. */
function typeWords(s) {
  if (!s) return 'any';
  if (s.$ref) return resolve(s.$ref)[0];
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (s.allOf) return s.allOf.map(typeWords).join(' & ');
  if (s.oneOf || s.anyOf) return (s.oneOf || s.anyOf).map(typeWords).join(' | ');
  let t = Array.isArray(s.type) ? s.type.join(' | ') : (s.type || 'any');
  if (t === 'array' || (Array.isArray(s.type) && s.type.includes('array'))) {
    t = t.replace('array', `array of ${typeWords(s.items)}`);
  }
  const limits = [];
  if (s.format) limits.push(s.format);
  if (s.minimum !== undefined) limits.push(`≥ ${s.minimum}`);
  if (s.maximum !== undefined) limits.push(`≤ ${s.maximum}`);
  if (s.minLength !== undefined) limits.push(`length ≥ ${s.minLength}`);
  if (s.maxLength !== undefined) limits.push(`length ≤ ${s.maxLength}`);
  if (s.maxItems !== undefined) limits.push(`at most ${s.maxItems} items`);
  if (s.default !== undefined) limits.push(`default ${JSON.stringify(s.default)}`);
  return limits.length ? `${t} (${limits.join(', ')})` : t;
}

/** The fields of a schema as a nested list; `seen` stops at a schema already open. */
function schemaTree(s, seen = new Set(), depth = 0) {
  if (!s || depth > 8) return null;
  if (s.$ref) {
    const [name, target] = resolve(s.$ref);
    if (seen.has(name)) return el('p', { class: 'muted' }, `(${name}, as above)`);
    return schemaTree(target, new Set([...seen, name]), depth + 1);
  }
  if (s.allOf) {
    const parts = s.allOf.map((p) => schemaTree(p, seen, depth + 1)).filter(Boolean);
    return parts.length ? el('div', {}, ...parts) : null;
  }
  if (s.oneOf || s.anyOf) {
    const alts = (s.oneOf || s.anyOf).map((p) => el('li', {}, typeWords(p), schemaTree(p, seen, depth + 1)));
    return el('div', {}, el('p', { class: 'muted' }, 'one of:'), el('ul', { class: 'schema' }, ...alts));
  }
  const type = Array.isArray(s.type) ? s.type : [s.type];
  if (type.includes('array') && s.items) return schemaTree(s.items, seen, depth + 1);
  if (!s.properties && !s.additionalProperties) return null;
  const required = new Set(s.required || []);
  const rows = Object.entries(s.properties || {}).map(([name, p]) => el('li', {},
    el("code", { class: "prop" }, name),
    required.has(name) ? el('span', { class: 'req' }, ' required') : '',
    el('span', { class: 'type' }, ` — ${typeWords(p)}`),
    p.description ? el('span', { class: 'muted' }, ` · ${p.description}`) : '',
    schemaTree(p, seen, depth + 1)));
  if (s.additionalProperties) {
    rows.push(el('li', { class: 'muted' }, s.additionalProperties === true
      ? 'other fields are allowed (an open object)'
      : `other fields: ${typeWords(s.additionalProperties)}`));
  }
  return el('ul', { class: 'schema' }, ...rows);
}

/** One media type of a body or an answer: its type and field tree. */
function content(c) {
  return Object.entries(c || {}).map(([mime, m]) => el('div', { class: 'media' },
    el('p', {}, el('code', {}, mime), m.schema ? ` — ${typeWords(m.schema)}` : ''),
    m.schema ? schemaTree(m.schema) : null,
    m.example !== undefined ? el('pre', {}, JSON.stringify(m.example, null, 2)) : null));
}

function operation(path, method, op) {
  const body = [];
  if (op.description) body.push(el('p', {}, op.description));
  body.push(el('p', { class: 'muted' }, 'Operation id ', el('code', {}, op.operationId || '—'),
    op.security && op.security.length ? ' · needs the X-CSRF-Token header' : ''));
  if (op.parameters && op.parameters.length) {
    body.push(el('h4', {}, 'Parameters'), el('table', { class: 'list' },
      el('thead', {}, el('tr', {}, ...['Name', 'In', 'Type', 'Description'].map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, ...op.parameters.map((p) => el('tr', {},
        el('td', {}, el('code', {}, p.name), p.required ? el('span', { class: 'req' }, ' required') : ''),
        el('td', {}, p.in), el('td', {}, typeWords(p.schema)), el('td', {}, p.description || ''))))));
  }
  if (op.requestBody) body.push(el('h4', {}, 'Request body'), ...content(op.requestBody.content));
  body.push(el('h4', {}, 'Answers'));
  for (const [status, r] of Object.entries(op.responses || {})) {
    body.push(el('div', { class: 'answer' }, el('p', {}, el('strong', {}, status), ` ${r.description || ''}`), ...content(r.content)));
  }
  const words = `${method} ${path} ${op.summary || ''} ${op.operationId || ''}`.toLowerCase();
  return el('details', { class: 'op', 'data-words': words },
    el('summary', {}, el('code', { class: `method ${method}` }, method.toUpperCase()), ' ', el('code', {}, path),
      op.summary ? el('span', { class: 'muted' }, ` — ${op.summary}`) : ''),
    el('div', { class: 'op-body' }, ...body));
}

function render() {
  const byTag = new Map((doc.tags || []).map((t) => [t.name, { tag: t, ops: [] }]));
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const [method, op] of Object.entries(item)) {
      if (!op || typeof op !== 'object' || !op.responses) continue;
      const tag = (op.tags && op.tags[0]) || 'other';
      if (!byTag.has(tag)) byTag.set(tag, { tag: { name: tag }, ops: [] });
      byTag.get(tag).ops.push(operation(path, method, op));
    }
  }
  const groups = [...byTag.values()].filter((g) => g.ops.length).map(({ tag, ops }) => el('section', { class: 'tag', 'data-tag': tag.name },
    el('h2', {}, tag.name, el('span', { class: 'muted' }, ` (${ops.length})`)),
    tag.description ? el('p', { class: 'muted' }, tag.description) : null, ...ops));
  const count = groups.reduce((n, g) => n + g.querySelectorAll('details.op').length, 0);
  $('ref-info').textContent = `${doc.info.title} ${doc.info.version}: ${count} operations. ${doc.info.description || ''}`;
  $('ref-ops').replaceChildren(...groups);
  filter();
}

function filter() {
  const words = $('ref-filter').value.toLowerCase().split(/\s+/).filter(Boolean);
  let shown = 0;
  for (const d of document.querySelectorAll('#ref-ops details.op')) {
    const hit = words.every((w) => d.dataset.words.includes(w));
    d.hidden = !hit;
    if (hit) shown += 1;
  }
  for (const s of document.querySelectorAll('#ref-ops section.tag')) {
    s.hidden = !s.querySelector('details.op:not([hidden])');
  }
  $('ref-count').textContent = words.length ? `${shown} matching` : '';
}

async function load() {
  $('ref-ops').setAttribute('aria-busy', 'true');
  try {
    const r = await fetch('/openapi.json', { headers: { Accept: 'application/json' } });
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    doc = await r.json();
    render();
  } catch (e) {
    $('ref-info').textContent = `The interface description cannot be read: ${e.message}`;
  } finally {
    $('ref-ops').removeAttribute('aria-busy');
  }
}

export default {
  init() {
    $('ref-filter').addEventListener('input', filter);
  },
  show() {
    if (!loading) loading = load();
  },
};
