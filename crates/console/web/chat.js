// Chat: the current character's recent history, then the WebSocket /ws/{name}.
// Client frames: {"type":"user_text","text":...}, {"type":"voice","enabled":...},
// push-to-talk: {"type":"mic","state":"start"|"stop"} and binary NEKO frames
// (NEKO + rate u32 LE + PCM16 LE mono, at most 120 ms; docs/chat-protocol.md).
// Server frames: assistant_delta, turn_end, tool_call, tool_result, error {code,
// error}, notifications, and with the voice on: voice_state, speech_start, binary
// audio (SPK1 + stream u32 LE + PCM16 LE mono 48 kHz), speech_end (docs/voice.md).
import * as api from './api.js';
import { el } from './ui.js';

let app;
let ws = null;
let wsName = null;
let wanted = false;         // keep a connection open while the Chat section is shown
let retry = 0;
let retryTimer = null;
let bubble = null;          // the assistant message being streamed
const queue = [];           // messages typed while disconnected
const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------- voice
// Audio is played as it streams: each binary frame of the current speech is
// scheduled right after the previous one on a 48 kHz AudioContext.
const VOICE_KEY = 'companiond.console.voice';
let audio = null;           // AudioContext, made on first use
let speech = null;          // {id, stream, at: next start time, sources: []}
const played = { frames: 0, samples: 0, speeches: 0 };

function voiceOn() { return localStorage.getItem(VOICE_KEY) === '1'; }

function sendVoice() {
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'voice', enabled: voiceOn() }));
}

function stopSpeech() {
  if (speech) for (const s of speech.sources) { try { s.stop(); } catch { /* ended */ } }
  speech = null;
}

function playFrame(buf) {
  const bytes = new Uint8Array(buf);
  if (bytes.length < 8 || String.fromCharCode(...bytes.slice(0, 4)) !== 'SPK1') return;
  const stream = new DataView(buf).getUint32(4, true);
  if (!speech || speech.stream !== stream) return; // not the current speech's
  const n = (bytes.length - 8) >> 1;
  if (!n) return;
  const pcm = new Int16Array(buf.slice(8, 8 + n * 2));
  if (!audio) audio = new AudioContext({ sampleRate: 48000 });
  const b = audio.createBuffer(1, n, 48000);
  const ch = b.getChannelData(0);
  for (let i = 0; i < n; i += 1) ch[i] = pcm[i] / 32768;
  const src = audio.createBufferSource();
  src.buffer = b;
  src.connect(audio.destination);
  const at = Math.max(audio.currentTime + 0.02, speech.at);
  src.start(at);
  speech.at = at + n / 48000;
  speech.sources.push(src);
  src.onended = () => { if (speech) speech.sources = speech.sources.filter((x) => x !== src); };
  played.frames += 1;
  played.samples += n;
  $('chat-voice').dataset.samples = String(played.samples);
}

// ---------------------------------------------------------------- push-to-talk
// While the button is held, the microphone (getUserMedia) is captured on a
// 48 kHz AudioContext and sent as NEKO frames of 2048 samples (43 ms).
let mic = null;             // {stream, ctx, node, src}
const heard = { frames: 0 };

function micFrame(float32, rate) {
  const buf = new ArrayBuffer(8 + float32.length * 2);
  const dv = new DataView(buf);
  [0x4e, 0x45, 0x4b, 0x4f].forEach((b, i) => dv.setUint8(i, b));
  dv.setUint32(4, rate, true);
  for (let i = 0; i < float32.length; i += 1) {
    const v = Math.max(-1, Math.min(1, float32[i]));
    dv.setInt16(8 + i * 2, v < 0 ? v * 32768 : v * 32767, true);
  }
  return buf;
}

async function talkStart() {
  if (mic || !ws || ws.readyState !== WebSocket.OPEN) return;
  const btn = $('chat-talk');
  btn.classList.add('held');
  stopSpeech();
  mic = {};
  try {
    const stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: true, noiseSuppression: false, autoGainControl: true, channelCount: 1 },
    });
    if (!mic) { stream.getTracks().forEach((t) => t.stop()); return; }
    const ctx = new AudioContext({ sampleRate: 48000 });
    const rate = ctx.sampleRate === 16000 ? 16000 : 48000;
    const src = ctx.createMediaStreamSource(stream);
    const node = ctx.createScriptProcessor(2048, 1, 1);
    node.onaudioprocess = (e) => {
      if (!ws || ws.readyState !== WebSocket.OPEN || !mic) return;
      ws.send(micFrame(e.inputBuffer.getChannelData(0), rate));
      heard.frames += 1;
      btn.dataset.frames = String(heard.frames);
    };
    src.connect(node);
    node.connect(ctx.destination);
    Object.assign(mic, { stream, ctx, node, src });
    ws.send(JSON.stringify({ type: 'mic', state: 'start' }));
  } catch (e) {
    mic = null;
    btn.classList.remove('held');
    add('note', `The microphone cannot be used: ${e.message || e}`);
  }
}

function talkStop() {
  const m = mic;
  mic = null;
  $('chat-talk').classList.remove('held');
  if (!m) return;
  if (ws && ws.readyState === WebSocket.OPEN && m.node) ws.send(JSON.stringify({ type: 'mic', state: 'stop' }));
  if (m.node) { m.node.disconnect(); m.src.disconnect(); }
  if (m.stream) m.stream.getTracks().forEach((t) => t.stop());
  if (m.ctx) m.ctx.close();
}

function conn(text, kind) {
  const c = $('chat-conn');
  c.textContent = text;
  c.className = `pill ${kind || ''}`;
}

function scroll() { const log = $('chat-log'); log.scrollTop = log.scrollHeight; }

function add(role, text, extra = '') {
  const who = { human: 'You', ai: app.current, system: 'System', note: '', error: '' }[role] ?? role;
  const li = el('li', { class: `msg ${role} ${extra}` },
    who ? el('span', { class: 'who name' }, who) : null,
    el('span', { class: 'text' }, text));
  $('chat-log').append(li);
  scroll();
  return li;
}

/** Text of a stored message: a string or a list of parts. */
function contentText(c) {
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p) => (typeof p === 'string' ? p : p.text || '')).join('');
  return '';
}

async function loadHistory(name) {
  $('chat-log').replaceChildren();
  const r = await api.get(`/api/memory/recent_file?filename=${encodeURIComponent(`recent_${name}.json`)}`);
  if (!r.ok) {
    if (r.status !== 404) add('note', `The history could not be loaded: ${api.explain(r)}`);
    return;
  }
  let entries = [];
  try { entries = JSON.parse(r.body.content || '[]'); } catch { add('note', 'The stored history is not readable.'); }
  if (!Array.isArray(entries)) entries = [];
  for (const e of entries.slice(-200)) {
    const role = e.type === 'human' || e.type === 'ai' || e.type === 'system' ? e.type : 'system';
    const text = contentText(e.data && e.data.content);
    if (text) add(role, text);
  }
  if (!entries.length) add('note', 'No messages yet. Say hello!');
}

function connect() {
  clearTimeout(retryTimer);
  if (!wanted) return;
  const name = app.current;
  wsName = name;
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  conn(retry ? 'reconnecting…' : 'connecting…', 'wait');
  const sock = new WebSocket(`${proto}//${location.host}/ws/${encodeURIComponent(name)}`);
  sock.binaryType = 'arraybuffer';
  ws = sock;
  sock.onopen = () => {
    if (retry) api.forgetCsrf(); // a restarted companiond has a new CSRF token
    retry = 0;
    conn('connected', 'good');
    if (voiceOn()) sendVoice();
    while (queue.length && sock.readyState === WebSocket.OPEN) sock.send(queue.shift());
  };
  sock.onmessage = (ev) => {
    if (ev.data instanceof ArrayBuffer) { playFrame(ev.data); return; }
    let f;
    try { f = JSON.parse(ev.data); } catch { return; }
    onFrame(f);
  };
  sock.onclose = () => {
    if (ws !== sock) return;
    ws = null;
    finishBubble();
    if (!wanted) { conn('not connected'); return; }
    retry += 1;
    const delay = Math.min(10000, 500 * 2 ** Math.min(retry, 5));
    conn(`disconnected — retrying in ${Math.round(delay / 1000)} s`, 'bad');
    retryTimer = setTimeout(connect, delay);
  };
}

function disconnect() {
  wanted = false;
  clearTimeout(retryTimer);
  if (ws) { const s = ws; ws = null; s.close(); }
  conn('not connected');
}

function finishBubble() {
  if (bubble) bubble.classList.remove('streaming');
  bubble = null;
  $('chat-send').disabled = false;
}

function onFrame(f) {
  switch (f.type) {
    case 'assistant_delta':
      if (!bubble) bubble = add('ai', '', 'streaming');
      bubble.querySelector('.text').textContent += f.text || '';
      scroll();
      break;
    case 'turn_end':
      if (bubble && !bubble.querySelector('.text').textContent) bubble.remove();
      finishBubble();
      break;
    case 'tool_call':
      add('tool', `Using the tool “${f.name}”…`);
      bubble = null;
      break;
    case 'tool_result':
      add('tool', f.is_error ? `The tool “${f.name}” failed.` : `The tool “${f.name}” answered.`);
      break;
    case 'error': {
      if (/^(asr_|VOICE_)/.test(f.code || '')) {
        $('chat-mic-state').textContent = '';
        add('note', f.code === 'asr_not_configured'
          ? 'No speech recogniser is set up: see Settings → Voice (hearing).'
          : `The microphone: ${f.error || f.code}`);
        if (f.code === 'asr_not_configured' || f.code === 'asr_config_invalid') talkStop();
        break;
      }
      if (f.speech_id) { add('note', `The voice failed: ${f.error || f.code}. The text is complete.`); break; }
      let text = api.codeWords(f.code) || f.error || 'The reply failed.';
      if (f.code === 'no_provider') text = 'No language model is set up yet, so I cannot answer. Open Start to connect one.';
      else if (f.code === 'connection_failed' || f.code === 'timeout') text = `The language model is unreachable: ${f.error || api.codeWords(f.code)} Check that the model server is running, or change it on Start.`;
      else if (f.error && api.codeWords(f.code)) text += ` (${f.error})`;
      const li = add('error', text);
      if (f.code === 'no_provider' || f.code === 'connection_failed' || f.code === 'timeout') {
        li.append(' ', el('a', { href: '#start' }, 'Set up the model'));
      }
      finishBubble();
      break;
    }
    case 'voice_state':
      $('chat-voice-state').textContent = !f.enabled ? ''
        : f.provider ? `(speaking with ${f.provider})`
          : '(no voice is set up: see Settings → Voice)';
      break;
    case 'speech_start':
      stopSpeech();
      speech = { id: f.speech_id, stream: f.stream, at: 0, sources: [] };
      played.speeches += 1;
      $('chat-voice').dataset.speeches = String(played.speeches);
      break;
    case 'speech_end':
      if (f.reason === 'interrupted' && speech && speech.id === f.speech_id) stopSpeech();
      $('chat-voice').dataset.lastEnd = f.reason;
      break;
    case 'mic_state':
      $('chat-mic-state').textContent = f.state === 'listening' ? 'listening…'
        : f.reason === 'idle' ? 'the microphone closed after a long silence' : '';
      if (f.state === 'closed' && f.reason === 'idle') talkStop();
      break;
    case 'vad':
      $('chat-mic-state').textContent = f.state === 'speech' ? 'hearing you…' : 'thinking…';
      break;
    case 'transcript':
      $('chat-mic-state').textContent = '';
      add('human', f.text, 'voice');
      finishBubble();
      break;
    case 'transcript_dropped':
      $('chat-mic-state').textContent = f.reason === 'echo'
        ? 'that sounded like my own voice, so I ignored it' : 'I did not catch any words';
      break;
    case 'game_input':
      add('note', 'A mini-game is running: your message went to the game.');
      break;
    case 'provider_changed':
      add('note', 'The model settings changed; the next reply uses the new model.');
      break;
    case 'character_renamed':
      add('note', `The character was renamed from ${f.old_name} to ${f.new_name}.`);
      app.refreshCharacters();
      break;
    case 'reload_page':
      add('note', 'This character was replaced by a cloud-save download; reloading the history.');
      loadHistory(app.current);
      break;
    default:
      break;
  }
}

function send(ev) {
  ev.preventDefault();
  const input = $('chat-input');
  const text = input.value.trim();
  if (!text) return;
  input.value = '';
  add('human', text);
  finishBubble();
  stopSpeech(); // the server cuts the speech too (barge-in)
  $('chat-send').disabled = true;
  const frame = JSON.stringify({ type: 'user_text', text });
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(frame);
  else { queue.push(frame); add('note', 'Not connected right now; the message will be sent when the connection is back.'); }
  setTimeout(() => { $('chat-send').disabled = false; }, 15000);
}

async function open() {
  $('chat-name').textContent = app.current;
  if (ws && wsName === app.current) return;
  disconnect();
  await loadHistory(app.current);
  wanted = true;
  retry = 0;
  connect();
}

export default {
  init(a) {
    app = a;
    $('chat-form').addEventListener('submit', send);
    $('chat-input').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) send(e);
    });
    app.onCharacters(() => { if (wanted && wsName !== app.current) open(); });
    const talk = $('chat-talk');
    // The pointer is captured while held: the button keeps it even if the
    // layout moves under it; release (or a lost capture) stops talking.
    talk.addEventListener('pointerdown', (e) => {
      e.preventDefault();
      try { talk.setPointerCapture(e.pointerId); } catch { /* not capturable */ }
      talkStart();
    });
    ['pointerup', 'pointercancel', 'lostpointercapture'].forEach((k) => talk.addEventListener(k, talkStop));
    talk.addEventListener('keydown', (e) => { if ((e.key === ' ' || e.key === 'Enter') && !e.repeat) { e.preventDefault(); talkStart(); } });
    talk.addEventListener('keyup', (e) => { if (e.key === ' ' || e.key === 'Enter') talkStop(); });
    const v = $('chat-voice');
    v.checked = voiceOn();
    v.addEventListener('change', () => {
      localStorage.setItem(VOICE_KEY, v.checked ? '1' : '0');
      if (v.checked && !audio) audio = new AudioContext({ sampleRate: 48000 });
      if (!v.checked) { stopSpeech(); $('chat-voice-state').textContent = ''; }
      sendVoice();
    });
  },
  show() { open(); $('chat-input').focus(); },
  // Leave the socket only while the Chat section is shown, so a cloud-save
  // download of this character is not blocked by the console itself.
  hide() { talkStop(); stopSpeech(); disconnect(); },
};
