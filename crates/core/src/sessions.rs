//! Per-character session managers: open chat connections, registered tools,
//! session settings and the conversation context of each character.
//!
//! A session is *active* while at least one chat connection to it is open.
//! The socket protocol is `http::chat_socket`; a chat turn (model rounds, tool
//! calls, history append) is `crate::turn`. Other families reach the open
//! connections with [`SessionManager::notify`] (e.g. `settings_changed`,
//! `provider_changed`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use indexmap::IndexMap;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::llm::ChatMessage;
use crate::tools::{EvictOrigin, RegisteredTool};

/// Something to send to one open connection.
#[derive(Debug)]
pub enum Outbound {
    Frame(crate::frames::ServerFrame),
    /// An event of a speech of this connection (crate::speech::pipeline).
    Speech(crate::speech::pipeline::SpeechOut),
    /// What came of an utterance of this connection's microphone (crate::hearing).
    Heard(crate::hearing::listener::HeardEvent),
    Close,
}

/// Messages of history sent with each request.
pub const CONTEXT_MESSAGES: usize = 40;

/// One character's session manager.
pub struct SessionManager {
    name: RwLock<String>,
    conns: Mutex<HashMap<u64, mpsc::UnboundedSender<Outbound>>>,
    next_conn: AtomicU64,
    tools: RwLock<IndexMap<String, RegisteredTool>>,
    history: tokio::sync::Mutex<Vec<ChatMessage>>,
    /// Held while a chat turn of this character runs (one turn at a time).
    pub(crate) turn: Arc<tokio::sync::Mutex<()>>,
    settings: RwLock<serde_json::Map<String, Value>>,
    /// The speech of each connection that plays it (crate::speech).
    voices: Mutex<HashMap<u64, Arc<crate::speech::pipeline::Voice>>>,
    /// Connections whose page reported that it is playing speech.
    playing: Mutex<std::collections::HashSet<u64>>,
}

impl SessionManager {
    fn new(name: &str) -> Self {
        SessionManager {
            name: RwLock::new(name.to_string()),
            conns: Mutex::default(),
            next_conn: AtomicU64::new(1),
            tools: RwLock::default(),
            history: tokio::sync::Mutex::default(),
            turn: Arc::default(),
            settings: RwLock::default(),
            voices: Mutex::default(),
            playing: Mutex::default(),
        }
    }

    pub fn name(&self) -> String {
        self.name.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Is the model answering a chat turn of this character right now?
    pub fn is_turn_running(&self) -> bool {
        self.turn.try_lock().is_err()
    }

    /// Is a chat connection open?
    pub fn is_active(&self) -> bool {
        !self
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    pub fn connection_count(&self) -> usize {
        self.conns.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Send a frame to every open connection of this character.
    pub fn notify(&self, frame: crate::frames::ServerFrame) -> usize {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns
            .values()
            .filter(|tx| tx.send(Outbound::Frame(frame.clone())).is_ok())
            .count()
    }

    /// Close every connection and wait (up to `timeout`) until none is open.
    /// Returns whether the session is inactive afterwards.
    pub async fn terminate(&self, timeout: Duration) -> bool {
        {
            let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
            for tx in conns.values() {
                let _ = tx.send(Outbound::Close);
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        while self.is_active() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Drop the conversation context with the session.
        self.history.lock().await.clear();
        true
    }

    /// Open a connection: its id, the frames to send it, and a sender for them.
    pub(crate) fn attach(
        &self,
    ) -> (
        u64,
        mpsc::UnboundedReceiver<Outbound>,
        mpsc::UnboundedSender<Outbound>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.next_conn.fetch_add(1, Ordering::Relaxed);
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx.clone());
        (id, rx, tx)
    }

    /// Close connection `id`.
    pub(crate) fn detach(&self, id: u64) {
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        self.set_voice(id, None);
        self.set_playing(id, false);
    }

    /// Connection `id`'s page started or stopped playing speech.
    pub(crate) fn set_playing(&self, id: u64, on: bool) {
        let mut p = self.playing.lock().unwrap_or_else(|e| e.into_inner());
        if on {
            p.insert(id);
        } else {
            p.remove(&id);
        }
    }

    /// Is a page of this character playing speech now (its
    /// `voice_play_start` came without a `voice_play_end`)? A proactive line
    /// waits while it is.
    pub fn is_audio_playing(&self) -> bool {
        !self
            .playing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    // ---------------------------------------------------------------- speech

    /// Connection `id` plays speech with `voice` (or no longer, `None`).
    pub(crate) fn set_voice(&self, id: u64, voice: Option<Arc<crate::speech::pipeline::Voice>>) {
        let mut v = self.voices.lock().unwrap_or_else(|e| e.into_inner());
        match voice {
            Some(voice) => v.insert(id, voice),
            None => v.remove(&id),
        };
    }

    /// The speech of the connections that play it.
    pub fn voices(&self) -> Vec<Arc<crate::speech::pipeline::Voice>> {
        let v = self.voices.lock().unwrap_or_else(|e| e.into_inner());
        let mut ids: Vec<_> = v.keys().copied().collect();
        ids.sort_unstable();
        ids.iter().filter_map(|i| v.get(i).cloned()).collect()
    }

    /// Speak a line of this character (the speak routes) on every connection
    /// that plays speech; a speech still speaking there is cut off.
    pub async fn speak_line(
        &self,
        line: &str,
    ) -> Result<crate::speech::pipeline::SpokenLine, crate::speech::pipeline::SpeakRefused> {
        crate::speech::pipeline::speak_line(self.voices(), &self.name(), line).await
    }

    /// The speech state of the first connection that plays speech.
    pub fn speech_state(&self) -> Option<crate::speech::pipeline::PipelineState> {
        self.voices().first().map(|v| v.state())
    }

    /// Stop the speech of every connection at once (each client is told).
    pub fn interrupt_speech(&self) -> usize {
        self.voices()
            .iter()
            .filter(|v| v.interrupt_notify())
            .count()
    }

    // ---------------------------------------------------------------- tools

    /// Register (or replace) a tool; visible to the next model request.
    pub fn register_tool(&self, tool: RegisteredTool) {
        self.tools
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tool.name.clone(), tool);
    }
    /// Remove a tool by name; whether it existed.
    pub fn unregister_tool(&self, name: &str) -> bool {
        self.tools
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .shift_remove(name)
            .is_some()
    }
    /// Remove every tool of `source` (all when `None`); how many were removed.
    pub fn clear_tools(&self, source: Option<&str>) -> usize {
        let mut t = self.tools.write().unwrap_or_else(|e| e.into_inner());
        let before = t.len();
        t.retain(|_, tool| source.is_some_and(|s| tool.source != s));
        before - t.len()
    }
    /// Remove every tool whose callback origin is `origin`.
    pub fn remove_origin(&self, origin: &str) -> usize {
        let mut t = self.tools.write().unwrap_or_else(|e| e.into_inner());
        let before = t.len();
        t.retain(|_, tool| tool.origin() != origin);
        before - t.len()
    }
    pub fn tools(&self) -> Vec<RegisteredTool> {
        self.tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }
    /// Run `f` over the registered tools (in registration order) without copying them.
    pub fn with_tools<R>(
        &self,
        f: impl FnOnce(&mut dyn Iterator<Item = &RegisteredTool>) -> R,
    ) -> R {
        let t = self.tools.read().unwrap_or_else(|e| e.into_inner());
        f(&mut t.values())
    }
    pub fn tool(&self, name: &str) -> Option<RegisteredTool> {
        self.tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    // ---------------------------------------------------------------- settings

    /// Apply session settings (e.g. `noiseReductionEnabled`) to this session and
    /// tell open connections; returns how many connections were told.
    pub fn apply_settings(&self, changes: serde_json::Map<String, Value>) -> usize {
        {
            let mut s = self.settings.write().unwrap_or_else(|e| e.into_inner());
            for (k, v) in &changes {
                s.insert(k.clone(), v.clone());
            }
        }
        self.notify(crate::frames::ServerFrame::SettingsChanged { settings: changes })
    }
    pub fn settings(&self) -> serde_json::Map<String, Value> {
        self.settings
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The conversation context kept by this session (user/assistant/tool messages).
    pub async fn history(&self) -> Vec<ChatMessage> {
        self.history.lock().await.clone()
    }
    /// Append a message to the context (e.g. a game line mirrored into the session).
    pub async fn push_history(&self, m: ChatMessage) {
        let mut h = self.history.lock().await;
        h.push(m);
        let excess = h.len().saturating_sub(CONTEXT_MESSAGES * 4);
        if excess > 0 {
            h.drain(..excess);
        }
    }
}

/// Tells whether a name is a character's.
type IsCharacter = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// Every character's session manager. Every character has one from the moment
/// it exists: a manager is made on first use ([`Sessions::get`] of an existing
/// character, [`Sessions::ensure`]), so start-up makes none.
#[derive(Default)]
pub struct Sessions {
    map: RwLock<HashMap<String, Arc<SessionManager>>>,
    /// Which names are characters (installed by the application state).
    is_character: OnceLock<IsCharacter>,
}

impl Sessions {
    /// The sessions of the characters for which `is_character` holds.
    pub fn for_characters(is_character: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        let sessions = Sessions::default();
        let _ = sessions.is_character.set(Box::new(is_character));
        sessions
    }

    /// The manager of `name`, created when missing.
    pub fn ensure(&self, name: &str) -> Arc<SessionManager> {
        if let Some(m) = self.existing(name) {
            return m;
        }
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        map.entry(name.to_string())
            .or_insert_with(|| Arc::new(SessionManager::new(name)))
            .clone()
    }
    /// The manager of `name`, made now if `name` is a character without one yet.
    pub fn get(&self, name: &str) -> Option<Arc<SessionManager>> {
        if let Some(m) = self.existing(name) {
            return Some(m);
        }
        let is_character = self.is_character.get().is_some_and(|f| f(name));
        is_character.then(|| self.ensure(name))
    }
    /// The manager of `name` if one was made.
    fn existing(&self, name: &str) -> Option<Arc<SessionManager>> {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }
    pub fn remove(&self, name: &str) -> Option<Arc<SessionManager>> {
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name)
    }
    /// Move a manager to a new name (after a rename); its tools move with it.
    pub fn rename(&self, old: &str, new: &str) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = map.remove(old) {
            *m.name.write().unwrap_or_else(|e| e.into_inner()) = new.to_string();
            map.insert(new.to_string(), m);
        } else {
            map.entry(new.to_string())
                .or_insert_with(|| Arc::new(SessionManager::new(new)));
        }
    }
    /// The names whose manager was made.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        v.sort();
        v
    }
    /// The managers made so far (a character without one has no connection,
    /// tool or setting).
    pub fn all(&self) -> Vec<Arc<SessionManager>> {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }
    /// Is `name`'s session active?
    pub fn is_active(&self, name: &str) -> bool {
        self.existing(name).is_some_and(|m| m.is_active())
    }
    /// Remove every tool of a callback origin from every role.
    pub fn evict_origin(&self, origin: &str) -> usize {
        self.all().iter().map(|m| m.remove_origin(origin)).sum()
    }
    /// Tell every open connection of every character.
    pub fn notify_all(&self, frame: crate::frames::ServerFrame) -> usize {
        self.all().iter().map(|m| m.notify(frame.clone())).sum()
    }
}

impl EvictOrigin for Sessions {
    fn evict_origin(&self, origin: &str) -> usize {
        Sessions::evict_origin(self, origin)
    }
}
