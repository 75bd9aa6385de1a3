//! The new-user icebreaker (`/api/icebreaker`), the onboarding conversation:
//! the per-character icebreaker route (in memory), context lines into the chat
//! history (de-duplicated by request id), spoken lines mirrored into the chat,
//! the free-text interpreter ([`free_text`]) and the write-only choice record
//! ([`choices`]). The handlers are in `crate::http::icebreaker`.

pub mod choices;
pub mod free_text;

use companiond_core::frames::{Marks, Origin, ServerFrame};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use companiond_core::characters::{validate_name, NameRules};
use companiond_core::history::{Entry, Speaker};
use companiond_core::llm::ChatMessage;
use companiond_core::now_secs;
use companiond_core::sessions::SessionManager;
use companiond_core::AppState;
use serde::Serialize;

use crate::config::GamesConfig;

/// The source tag of everything the onboarding flow writes.
pub const SOURCE: &str = "new_user_icebreaker";
/// Longest context line.
pub const MAX_CONTEXT_CHARS: usize = 2000;
/// Longest spoken line (after tag stripping).
pub const MAX_SPOKEN_CHARS: usize = 240;
/// Request ids remembered per (character, session) for context de-duplication.
const MAX_REQUEST_IDS: usize = 256;
/// Icebreaker routes kept at once (the least recently active is dropped first).
const MAX_ROUTES: usize = 256;

/// One active onboarding route.
#[derive(Debug, Clone)]
pub struct IceRoute {
    pub persona_name: String,
    pub session_id: String,
    pub started_at: f64,
    pub last_activity: f64,
}

impl IceRoute {
    pub fn public_state(&self) -> IceState {
        IceState {
            icebreaker_active: true,
            persona_name: Some(self.persona_name.clone()),
            session_id: Some(self.session_id.clone()),
            started_at: Some(self.started_at),
            last_activity: Some(self.last_activity),
            source: Some(SOURCE),
        }
    }
}

/// The public state of a character's onboarding route: `{icebreaker_active:false}`
/// without one.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"icebreaker_active": true, "persona_name": "Mika",
    "session_id": "ice1", "started_at": 1764100000.0, "last_activity": 1764100012.5,
    "source": "new_user_icebreaker"}))]
pub struct IceState {
    pub icebreaker_active: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persona_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Unix seconds (so is `last_activity`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<f64>,
    /// `new_user_icebreaker`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'static str>,
}

/// The state when no onboarding route is active.
pub fn inactive_state() -> IceState {
    IceState {
        icebreaker_active: false,
        persona_name: None,
        session_id: None,
        started_at: None,
        last_activity: None,
        source: None,
    }
}

/// Why a route-bound call cannot proceed.
#[derive(Debug)]
pub enum IceMiss {
    NotActive,
    /// Active for another session: the route's public state.
    Stale(IceState),
}

/// The onboarding family's in-memory state.
pub struct Icebreaker {
    pub cfg: GamesConfig,
    routes: Mutex<HashMap<String, IceRoute>>,
    request_ids: Mutex<HashMap<String, VecDeque<String>>>,
}

impl Icebreaker {
    pub fn new(cfg: GamesConfig) -> Self {
        Icebreaker {
            cfg,
            routes: Mutex::default(),
            request_ids: Mutex::default(),
        }
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, HashMap<String, IceRoute>> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Activate (or replace) the route of a character.
    pub fn start(&self, persona: &str, session_id: &str) -> IceState {
        let now = now_secs();
        let r = IceRoute {
            persona_name: persona.into(),
            session_id: session_id.into(),
            started_at: now,
            last_activity: now,
        };
        let state = r.public_state();
        let mut map = self.routes();
        if !map.contains_key(persona) && map.len() >= MAX_ROUTES {
            let stale = map
                .iter()
                .min_by(|a, b| a.1.last_activity.total_cmp(&b.1.last_activity))
                .map(|(k, _)| k.clone());
            if let Some(k) = stale {
                map.remove(&k);
            }
        }
        map.insert(persona.into(), r);
        state
    }

    /// End the route: `Err(state)` when `session_id` is given and differs (route kept);
    /// `Ok(Some(ended))` when a route ended, `Ok(None)` when none was active.
    pub fn end(
        &self,
        persona: &str,
        session_id: Option<&str>,
    ) -> Result<Option<IceRoute>, IceState> {
        let mut map = self.routes();
        match map.get(persona) {
            Some(r) if session_id.is_some_and(|s| s != r.session_id) => Err(r.public_state()),
            Some(_) => Ok(map.remove(persona)),
            None => Ok(None),
        }
    }

    pub fn state(&self, persona: &str) -> IceState {
        self.routes()
            .get(persona)
            .map(IceRoute::public_state)
            .unwrap_or_else(inactive_state)
    }

    /// The active route bound to `session_id` (absent adopts the route's session);
    /// touches `last_activity` when `touch`.
    pub fn check(
        &self,
        persona: &str,
        session_id: Option<&str>,
        touch: bool,
    ) -> Result<IceRoute, IceMiss> {
        let mut map = self.routes();
        match map.get_mut(persona) {
            None => Err(IceMiss::NotActive),
            Some(r) if session_id.is_some_and(|s| s != r.session_id) => {
                Err(IceMiss::Stale(r.public_state()))
            }
            Some(r) => {
                if touch {
                    r.last_activity = now_secs();
                }
                Ok(r.clone())
            }
        }
    }

    /// Remember a request id; false when it was already seen for this route.
    pub fn first_request(&self, persona: &str, session_id: &str, request_id: &str) -> bool {
        let mut map = self.request_ids.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() > 1024 {
            map.clear();
        }
        let q = map
            .entry(format!("{persona}\u{0}{session_id}"))
            .or_default();
        if q.iter().any(|x| x == request_id) {
            return false;
        }
        q.push_back(request_id.to_string());
        while q.len() > MAX_REQUEST_IDS {
            q.pop_front();
        }
        true
    }
}

/// Who said a context line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    /// `user` or `assistant`; anything else is no role.
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// What a context line did.
pub enum ContextAdded {
    /// Its request id was already seen for the route: nothing was added.
    Deduped,
    /// Added to the session history; `memory_cached`: also to the chat history file.
    Added { memory_cached: bool },
}

/// What a spoken line did (there is no voice: the line is only shown).
pub struct Spoken {
    /// Chat connections shown the mirrored line (0 without mirroring).
    pub mirror_delivered: usize,
}

/// The options of a spoken line.
#[derive(Clone, Copy)]
pub struct SpeakOptions {
    pub mirror_text: bool,
    pub emit_turn_end: bool,
    pub interrupt_audio: bool,
}

impl Icebreaker {
    /// Add a context line of the route to the character's session history and,
    /// marked as the icebreaker's, to its chat history file.
    pub async fn add_context(
        &self,
        st: &AppState,
        mgr: &SessionManager,
        route: &IceRoute,
        role: Role,
        text: &str,
        request_id: Option<&str>,
    ) -> ContextAdded {
        if let Some(id) = request_id {
            if !self.first_request(&route.persona_name, &route.session_id, id) {
                return ContextAdded::Deduped;
            }
        }
        let msg = match role {
            Role::User => ChatMessage::user(text.to_string()),
            Role::Assistant => ChatMessage::assistant(text.to_string()),
        };
        mgr.push_history(msg).await;
        ContextAdded::Added {
            memory_cached: cache_in_memory(st, &route.persona_name, role, text).await,
        }
    }

    /// Show a spoken line: interrupt audio, mirror the line into the session
    /// history and the chat connections, end the turn (each as asked).
    pub async fn speak(
        &self,
        mgr: &SessionManager,
        route: &IceRoute,
        line: &str,
        o: SpeakOptions,
    ) -> Spoken {
        let origin = Origin {
            source: SOURCE,
            game_type: None,
            session_id: Some(route.session_id.clone()),
        };
        if o.interrupt_audio {
            mgr.notify(ServerFrame::InterruptAudio {
                origin: origin.clone(),
            });
        }
        let mut mirror_delivered = 0;
        if o.mirror_text {
            mgr.push_history(ChatMessage::assistant(line.to_string()))
                .await;
            mirror_delivered = mgr.notify(ServerFrame::AssistantMirror {
                text: line.to_string(),
                origin: origin.clone(),
            });
        }
        if o.emit_turn_end {
            mgr.notify(ServerFrame::TurnEnd {
                marks: Marks {
                    origin: Some(origin),
                    ..Marks::default()
                },
            });
        }
        Spoken { mirror_delivered }
    }
}

/// Append a line to the character's chat history, marked as the icebreaker's.
async fn cache_in_memory(st: &AppState, persona: &str, role: Role, text: &str) -> bool {
    let Ok(name) = validate_name(persona, NameRules::EXISTING) else {
        return false;
    };
    if !st.characters.exists(&name) {
        return false;
    }
    let speaker = match role {
        Role::User => Speaker::Human,
        Role::Assistant => Speaker::Ai,
    };
    let entry = Entry::new(speaker, text).from_source(SOURCE);
    st.history.append(&name, vec![entry]).await.is_ok()
}
