// Talking to companiond: JSON requests, the CSRF token, uploads with progress,
// and turning error answers into sentences a person can act on.

let csrfToken = null;

/** Read the CSRF token from page_config (once; again after a failure). */
export async function csrf() {
  if (csrfToken) return csrfToken;
  const r = await fetch('/api/config/page_config', { cache: 'no-store' });
  const b = await r.json();
  csrfToken = b.csrf_token || '';
  return csrfToken;
}

/** Forget the token (companiond restarted: a new process has a new token). */
export function forgetCsrf() { csrfToken = null; }

/** An answer: {ok, status, body, headers}. Never throws for HTTP errors. */
export async function request(method, path, body, extraHeaders = {}, retried = false, raw = undefined) {
  const headers = { ...extraHeaders };
  let payload;
  if (method !== 'GET' && method !== 'HEAD') {
    headers['X-CSRF-Token'] = await csrf();
    if (raw !== undefined) {
      payload = raw; // a file sent as it is (a backup archive)
    } else if (body instanceof FormData || body instanceof URLSearchParams) {
      payload = body;
    } else if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      payload = JSON.stringify(body);
    }
  }
  let r;
  try {
    r = await fetch(path, { method, headers, body: payload, cache: 'no-store' });
  } catch (e) {
    return { ok: false, status: 0, body: { error: 'companiond is not reachable (is it still running?)' }, headers: new Headers() };
  }
  let parsed = null;
  const text = await r.text();
  try { parsed = text ? JSON.parse(text) : {}; } catch { parsed = { error: text }; }
  if (r.status === 403 && parsed && (parsed.error_code === 'csrf_validation_failed' || parsed.reason === 'csrf_validation_failed') && !retried) {
    // a stale token (companiond restarted): read the new one and try once more
    csrfToken = null;
    return request(method, path, body, extraHeaders, true, raw);
  }
  const ok = r.ok && parsed && parsed.success !== false && parsed.ok !== false;
  return { ok, status: r.status, body: parsed, headers: r.headers };
}

export const get = (p, h) => request('GET', p, undefined, h);
export const post = (p, b, h) => request('POST', p, b === undefined ? {} : b, h);
export const put = (p, b) => request('PUT', p, b);
export const del = (p, b) => request('DELETE', p, b);

/** Form-encoded body (the jukebox form routes). */
export function form(fields) {
  const f = new URLSearchParams();
  for (const [k, v] of Object.entries(fields)) f.append(k, String(v));
  return f;
}

/**
 * Upload a FormData with XMLHttpRequest so the progress can be shown.
 * onProgress(fraction 0..1, loaded, total). Resolves like request().
 */
export async function upload(path, formData, onProgress) {
  const token = await csrf();
  return new Promise((resolve) => {
    const x = new XMLHttpRequest();
    x.open('POST', path);
    x.setRequestHeader('X-CSRF-Token', token);
    x.upload.onprogress = (e) => {
      if (e.lengthComputable && onProgress) onProgress(e.loaded / e.total, e.loaded, e.total);
    };
    x.onload = () => {
      let b;
      try { b = JSON.parse(x.responseText || '{}'); } catch { b = { error: x.responseText }; }
      if (onProgress) onProgress(1, 1, 1);
      resolve({ ok: x.status >= 200 && x.status < 300 && b.success !== false, status: x.status, body: b });
    };
    x.onerror = () => resolve({ ok: false, status: 0, body: { error: 'the upload was interrupted (is companiond still running?)' } });
    x.send(formData);
  });
}

/** Wire a <div class="progress"> (progress + span) to an upload. */
export function progressOf(el) {
  const bar = el.querySelector('progress');
  const label = el.querySelector('span');
  return {
    start() { el.hidden = false; bar.value = 0; label.textContent = '0 %'; },
    set(fraction, loaded, total) {
      const pct = Math.round(fraction * 100);
      bar.value = pct;
      label.textContent = total > 1 ? `${pct} % (${size(loaded)} of ${size(total)})` : `${pct} %`;
    },
    done(text) { bar.value = 100; label.textContent = text || 'done'; },
  };
}

export function size(n) {
  if (n == null || n < 0) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 * 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${(n / 1024 / 1024 / 1024).toFixed(2)} GiB`;
}

// Sentences for the machine codes of the interface.
const WORDS = {
  // model probes and chat
  no_provider: 'No language model is set up yet. Open Start and connect one.',
  connection_refused: 'Nothing answered at that address. Is the model server running, and is the port right?',
  connection_failed: 'The language model could not be reached. Is the model server running?',
  dns_error: 'That host name could not be found. Check the URL.',
  timeout: 'The model server did not answer in time.',
  auth_failed: 'The server refused the API key (wrong or missing key).',
  key_required: 'This needs an API key. Enter the key.',
  rate_limited: 'The server says too many requests; wait a moment and try again.',
  ssl_error: 'The secure connection failed (TLS certificate problem).',
  unsupported: 'That server or provider does not offer this (for example no model list).',
  empty: 'The server answered, but lists no models.',
  empty_response: 'The server answered with an empty reply.',
  missing_params: 'Some required field is empty.',
  upstream_error: 'The model server answered with an error.',
  protocol_error: 'The model server answered something that is not an OpenAI-compatible reply.',
  // characters
  empty_name: 'The name is empty.',
  contains_path_separator: 'A name may not contain / or \\.',
  path_traversal: 'A name may not contain "..".',
  unsafe_dot: 'A name may not be "." or end with a dot.',
  contains_dot: 'A new name may not contain a dot.',
  reserved_device_name: 'That is a reserved Windows device name (CON, NUL, COM1, …); pick another.',
  reserved_route_name: 'That name is reserved for a page of the app; pick another.',
  invalid_character: 'Only letters, digits, spaces and _ - ( ) （ ） · ・ • \' ’ are allowed.',
  too_long_units: 'The name is too long (at most 60 units; non-Latin characters count 2).',
  character_exists: 'A character with that name already exists.',
  character_not_found: 'That character does not exist (any more). Reload the list.',
  last_character: 'This is the only character; a companion always keeps one. Create another first.',
  same_name: 'The new name is the same as the old one.',
  destination_exists: 'Memory files of that name are already on disk; pick another name.',
  // memory
  RECENT_FILE_CONFLICT: 'This history was changed elsewhere — reload it. Your edits were not saved.',
  RECENT_FILE_THEATER_READONLY: 'Theater messages are read-only and could not be matched — reload the history.',
  CLOUDSAVE_WRITE_FENCE_ACTIVE: 'A cloud-save transfer is running right now; try again in a moment.',
  STORAGE_NOT_WRITABLE: 'The data folder is not writable; nothing was changed.',
  invalid_memory_setting: 'The stored setting is invalid; saving a value repairs it.',
  // cloud save
  CLOUDSAVE_PROVIDER_UNAVAILABLE: 'The cloud storage cannot be reached.',
  CLOUD_CHARACTER_EXISTS: 'The cloud already has this character.',
  LOCAL_CHARACTER_EXISTS: 'This device already has this character.',
  ACTIVE_SESSION_BLOCKED: 'A chat with this character is open.',
  CLOUD_PAYLOAD_CORRUPT: 'The copy in the cloud is damaged; nothing on this device was changed.',
  LOCAL_MEMORY_UNREADABLE: 'The local memory database is damaged; nothing was uploaded.',
  LOCAL_RELOAD_FAILED_ROLLED_BACK: 'The download could not be loaded; the previous local state was restored.',
  // misc
  csrf_validation_failed: 'The page\'s security token was refused; reload the page.',
  revision_conflict: 'These settings were changed elsewhere — reload them. Your changes were not saved.',
};

/** Words for an error answer (any envelope of the interface). */
export function explain(res, fallback = 'Something went wrong.') {
  const b = res.body || {};
  const code = b.code || b.error_code || b.reason;
  if (res.status === 0) return b.error || 'companiond is not reachable (is it still running?)';
  if (code && WORDS[code]) {
    const detail = b.error || b.message || '';
    // add the server's own sentence when it says more than the code
    return detail && !WORDS[code].includes(detail) && code !== 'RECENT_FILE_CONFLICT'
      ? `${WORDS[code]} (${detail})` : WORDS[code];
  }
  let msg = b.error || b.message || b.detail || b.reason;
  if (msg && typeof msg === 'object') msg = msg.message || JSON.stringify(msg);
  if (msg) return String(msg);
  return res.status ? `${fallback} (HTTP ${res.status})` : fallback;
}

export function codeWords(code) { return WORDS[code]; }
