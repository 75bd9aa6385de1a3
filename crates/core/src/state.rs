//! The application state shared by every handler.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use serde_json::Value;

use crate::characters::Characters;
use crate::history::History;
use crate::hosts::HostPolicy;
use crate::llm::LlmClient;
use crate::notices::Notices;
use crate::options::Options;
use crate::sessions::Sessions;
use crate::store::Store;
use crate::tools::ToolHub;
use crate::usage::TokenUsage;

/// Where a chat input came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputSource {
    Text,
    Voice,
}

/// A family that wants main-chat input while it owns a character (the game
/// routes) installs one of these. `route` returns `Some(result)` when it took
/// the input; the chat session then sends `{"type":"game_input", ...result}`
/// and ends the turn without calling the model.
pub trait InputRouter: Send + Sync {
    fn route(
        &self,
        character: String,
        text: String,
        source: InputSource,
    ) -> BoxFuture<'static, Option<Value>>;
    /// Does a route currently own `character`'s input?
    fn is_routing(&self, _character: &str) -> bool {
        false
    }
}

/// Families that want to see every main-chat input (before any routing) install
/// one of these, e.g. to dismiss a pending invitation when the user just chats on.
pub trait InputObserver: Send + Sync {
    fn observe(&self, character: &str, text: &str, source: InputSource);
}

/// The memory family installs this so that other families (cloud save) can
/// release a character's memory state before replacing its files and reload it after.
pub trait MemoryService: Send + Sync {
    /// Cancel and drain in-flight memory work for `character` and close its handles.
    fn release(&self, character: String) -> BoxFuture<'static, Result<(), String>>;
    /// Re-open the character's memory after its files changed (validates them).
    fn reload(&self, character: String) -> BoxFuture<'static, Result<(), String>>;
}

/// Long-term memory as a chat turn sees it (installed by the memory family):
/// what to add to a turn's system prompt, the built-in memory tools, and a
/// signal after each turn (indexing and extraction then run in the background).
/// Every method must return quickly; none may fail a turn.
pub trait MemoryRecall: Send + Sync {
    /// Memory text for the system prompt of `character`'s turn answering
    /// `user_text` (persona, relevant facts), or `None`.
    fn context(&self, character: String, user_text: String) -> BoxFuture<'static, Option<String>>;
    /// The built-in memory tools offered to the model for `character`.
    fn tools(&self, character: &str) -> Vec<crate::llm::ToolSpec>;
    /// Run a built-in memory tool; `None` when `name` is not one of them.
    fn call(
        &self,
        character: String,
        name: String,
        arguments: String,
    ) -> BoxFuture<'static, Option<crate::tools::ToolResult>>;
    /// A turn of `character` ended and its exchange was stored.
    fn after_turn(&self, character: &str);
    /// Add a fact (`text`, importance 1-10) to `character`'s long-term memory,
    /// as the user would state it (companiond's MCP endpoint offers this to
    /// other agents). The stored fact as JSON, or why not.
    fn add_fact(
        &self,
        _character: String,
        _text: String,
        _importance: i64,
    ) -> BoxFuture<'static, Result<Value, String>> {
        Box::pin(async { Err("this memory cannot add facts".to_string()) })
    }
    /// What `character`'s long-term memory holds: `{persona, facts}` (the
    /// persona as stored, the active facts' `id`, `text`, `importance`,
    /// `entity`, `created_at`), or why not.
    fn knowledge(&self, _character: String) -> BoxFuture<'static, Result<Value, String>> {
        Box::pin(async { Err("this memory cannot tell what it holds".to_string()) })
    }
}

/// Hooks that families install at start-up.
#[derive(Default)]
pub struct Hooks {
    pub input_router: RwLock<Option<Arc<dyn InputRouter>>>,
    pub memory: RwLock<Option<Arc<dyn MemoryService>>>,
    pub recall: RwLock<Option<Arc<dyn MemoryRecall>>>,
    pub input_observers: RwLock<Vec<Arc<dyn InputObserver>>>,
}

impl Hooks {
    pub fn set_input_router(&self, r: Arc<dyn InputRouter>) {
        *self.input_router.write().unwrap_or_else(|e| e.into_inner()) = Some(r);
    }
    pub fn input_router(&self) -> Option<Arc<dyn InputRouter>> {
        self.input_router
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    /// Is `character`'s main-chat input owned by a route (a mini-game)?
    pub fn is_routing(&self, character: &str) -> bool {
        self.input_router().is_some_and(|r| r.is_routing(character))
    }
    pub fn add_input_observer(&self, o: Arc<dyn InputObserver>) {
        self.input_observers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(o);
    }
    /// Show a main-chat input to every observer.
    pub fn observe_input(&self, character: &str, text: &str, source: InputSource) {
        let observers = self
            .input_observers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for o in observers {
            o.observe(character, text, source);
        }
    }
    pub fn set_memory_service(&self, m: Arc<dyn MemoryService>) {
        *self.memory.write().unwrap_or_else(|e| e.into_inner()) = Some(m);
    }
    pub fn memory_service(&self) -> Option<Arc<dyn MemoryService>> {
        self.memory
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    pub fn set_memory_recall(&self, m: Arc<dyn MemoryRecall>) {
        *self.recall.write().unwrap_or_else(|e| e.into_inner()) = Some(m);
    }
    pub fn memory_recall(&self) -> Option<Arc<dyn MemoryRecall>> {
        self.recall
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Start-up status of `/api/system/status`.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StorageStatus {
    pub selection_required: bool,
    pub migration_pending: bool,
    pub recovery_required: bool,
    pub legacy_cleanup_pending: bool,
    pub blocking_reason: String,
    pub last_error_summary: String,
    pub stage: String,
}

pub struct Inner {
    pub opts: Options,
    /// Which `Host` names and `Origin`s are ours (the front door and the CSRF guard).
    pub host_policy: Arc<HostPolicy>,
    pub store: Store,
    /// Every character's chat history (`memory/<name>/recent.json`).
    pub history: History,
    /// Client honouring the system proxy settings (remote services).
    pub http: crate::net::LazyClient,
    /// Client that never uses a proxy (loopback services).
    pub local_http: crate::net::LazyClient,
    pub characters: Characters,
    pub sessions: Sessions,
    pub llm: LlmClient,
    pub usage: TokenUsage,
    pub notices: Notices,
    pub tools: ToolHub,
    pub hooks: Hooks,
    pub ready: std::sync::atomic::AtomicBool,
    pub storage: RwLock<StorageStatus>,
    /// Per-server state of the families, one value per type (see [`AppState::ext`]).
    extensions: std::sync::Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

/// Cheap to clone; every handler gets one.
#[derive(Clone)]
pub struct AppState(pub Arc<Inner>);

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    /// Build the state: opens the characters registry (creating `Companion` in a
    /// fresh data dir; an existing file is read in the background) and the
    /// session registry (a manager per character, made on first use).
    pub fn new(opts: Options) -> Result<AppState, String> {
        crate::disk::watch(&opts.data_dir);
        let notices = Notices::default();
        let store = Store::new(&opts.data_dir).with_notices(notices.clone());
        let http = crate::net::LazyClient::new(crate::net::remote_client);
        // Loopback services (local models, plugin callbacks) never go through a proxy.
        let local_http = crate::net::LazyClient::new(crate::net::local_client);
        let characters = Characters::load(store.clone(), &notices)?;
        let registry = characters.clone();
        let sessions = Sessions::for_characters(move |name| registry.exists(name));
        let usage = TokenUsage::new(opts.data_dir.join(crate::layout::TOKEN_USAGE_DB))
            .with_notices(notices.clone());
        let llm = LlmClient::new(
            http.clone(),
            local_http.clone(),
            store.clone(),
            opts.bundle_dir.clone(),
            usage.clone(),
        );
        Ok(AppState(Arc::new(Inner {
            tools: ToolHub::new(local_http.clone()),
            local_http,
            host_policy: Arc::new(HostPolicy::from_options(&opts)),
            opts,
            history: History::new(store.clone()),
            store,
            http,
            characters,
            sessions,
            llm,
            usage,
            notices,
            hooks: Hooks::default(),
            ready: std::sync::atomic::AtomicBool::new(false),
            storage: RwLock::new(StorageStatus::default()),
            extensions: Default::default(),
        })))
    }

    /// The family state of type `T` for this server, created with `T::default()`
    /// on first use. Families keep their runtime state (task registries, caches,
    /// route tables) here instead of in globals.
    pub fn ext<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut map = self.extensions.lock().unwrap_or_else(|e| e.into_inner());
        let entry = map
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()) as Arc<dyn Any + Send + Sync>)
            .clone();
        drop(map);
        match entry.downcast::<T>() {
            Ok(v) => v,
            // Unreachable: the map is keyed by the type id.
            Err(_) => Arc::new(T::default()),
        }
    }

    /// Install the family state `value` of type `T` for this server (a family's
    /// `api()` or `start()` does this once); replaces any earlier value.
    pub fn provide<T: Send + Sync + 'static>(&self, value: Arc<T>) {
        self.extensions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(TypeId::of::<T>(), value as Arc<dyn Any + Send + Sync>);
    }

    /// The family state of type `T` if it was provided (or created by [`AppState::ext`]).
    pub fn provided<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        let entry = self
            .extensions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&TypeId::of::<T>())
            .cloned()?;
        entry.downcast::<T>().ok()
    }

    pub fn host_policy(&self) -> &HostPolicy {
        &self.host_policy
    }
    pub fn csrf_token(&self) -> &str {
        &self.opts.csrf_token
    }
    pub fn data_dir(&self) -> &Path {
        &self.opts.data_dir
    }
    pub fn bundle_dir(&self) -> &Path {
        &self.opts.bundle_dir
    }
    /// `<data>/memory/<character>` (the name must be a validated character name).
    pub fn memory_dir(&self, character: &str) -> PathBuf {
        self.opts.data_dir.join("memory").join(character)
    }
    pub fn is_ready(&self) -> bool {
        self.ready.load(std::sync::atomic::Ordering::Acquire)
    }
    pub fn set_ready(&self, ready: bool) {
        self.ready
            .store(ready, std::sync::atomic::Ordering::Release)
    }
    pub fn storage_status(&self) -> StorageStatus {
        self.storage
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    pub fn set_storage_status(&self, s: StorageStatus) {
        *self.storage.write().unwrap_or_else(|e| e.into_inner()) = s;
    }
}
