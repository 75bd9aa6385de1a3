//! The family's in-memory state (lost on restart) and its chat-input hook.

use std::sync::{Arc, Weak};

use companiond_core::state::{Inner, InputObserver, InputSource};
use companiond_core::AppState;

use crate::{activity, files, handoff, meme, proactive, translate};

/// What the system handlers share: created once in `start()`, reached through
/// `Ext<SystemState>`.
pub struct SystemState {
    pub tracker: activity::Tracker,
    pub proactive: proactive::Proactive,
    pub handoff: handoff::Handoff,
    pub meme: meme::MemeProxy,
    /// Google translate base URL (`None` = Google disabled).
    pub google: Option<String>,
    pub roots: files::Roots,
}

impl SystemState {
    pub fn new(state: &AppState) -> SystemState {
        SystemState {
            tracker: activity::Tracker::default(),
            proactive: proactive::Proactive::default(),
            handoff: handoff::Handoff::default(),
            meme: meme::MemeProxy::new(meme::Policy::from_env()),
            google: translate::google_base_from_env(),
            roots: files::Roots::new(
                state.bundle_dir(),
                state.data_dir(),
                state.opts.workshop_dir.as_deref(),
            ),
        }
    }
}

/// Dismisses or answers a pending mini-game invitation when the user chats.
pub struct InviteObserver {
    sys: Arc<SystemState>,
    state: Weak<Inner>,
}

impl InviteObserver {
    pub fn new(sys: Arc<SystemState>, state: &AppState) -> InviteObserver {
        InviteObserver {
            sys,
            state: Arc::downgrade(&state.0),
        }
    }
}

impl InputObserver for InviteObserver {
    fn observe(&self, character: &str, text: &str, _source: InputSource) {
        if let Some(inner) = self.state.upgrade() {
            let st = AppState(inner);
            let now = companiond_core::now_millis();
            self.sys.proactive.on_chat_input(&st, character, text, now);
        }
    }
}
