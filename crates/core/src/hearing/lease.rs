//! Who owns the microphone of a connection (the original's
//! `voice_input_control`; docs/chat-protocol.md). A page sends
//! `{"action":"voice_input_control","event":…,"lease_generation":n,…}`:
//! `lease_sync` (with `owner` = `core` | `game` | `none`, `hard_muted` and
//! `focus_suppressed` as booleans) states everything; `hard_mute`,
//! `hard_unmute`, `focus_suppress`, `focus_resume`, `game_takeover` and
//! `game_release` change one part. A generation must be higher than the last
//! accepted one, else the message is rejected (`VOICE_INPUT_CONTROL_REJECTED`).
//! A message marked `engaged: false` from a connection that never used the
//! microphone (the snapshot a page sends when it opens) is dropped unseen.
//! A page that never sent one gets generation 0 (owner `core`) when it starts
//! an audio session; one that sent only rejected messages has no lease
//! (`VOICE_INPUT_LEASE_REQUIRED`). Audio is heard only while `core` owns the
//! microphone, unmuted and not focus-suppressed.

use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Core,
    Game,
    None,
}

/// The lease of one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    generation: i64,
    synchronized: bool,
    control_seen: bool,
    owner: Owner,
    hard_muted: bool,
    focus_suppressed: bool,
    /// The connection has used the microphone (a control not marked
    /// `engaged: false`, or an audio session).
    engaged: bool,
}

/// What became of a control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Applied,
    Rejected,
    /// An idle snapshot of a connection that never engaged: dropped.
    Ignored,
}

impl Default for Lease {
    fn default() -> Self {
        Lease {
            generation: -1,
            synchronized: false,
            control_seen: false,
            owner: Owner::Core,
            hard_muted: false,
            focus_suppressed: false,
            engaged: false,
        }
    }
}

impl Lease {
    /// Apply one `voice_input_control` message.
    pub fn control(&mut self, msg: &Value) -> Control {
        if msg.get("engaged") != Some(&Value::Bool(false)) {
            self.engaged = true;
        }
        if !self.engaged {
            return Control::Ignored;
        }
        if self.apply(msg) {
            Control::Applied
        } else {
            Control::Rejected
        }
    }

    fn apply(&mut self, msg: &Value) -> bool {
        self.control_seen = true;
        let Some(generation) = msg.get("lease_generation").and_then(Value::as_i64) else {
            return false;
        };
        if generation <= self.generation {
            return false;
        }
        let event = msg
            .get("event")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let (mut owner, mut muted, mut suppressed) =
            (self.owner, self.hard_muted, self.focus_suppressed);
        match event.as_str() {
            "lease_sync" => {
                owner = match msg
                    .get("owner")
                    .and_then(Value::as_str)
                    .map(|o| o.trim().to_ascii_lowercase())
                    .as_deref()
                {
                    Some("core") => Owner::Core,
                    Some("game") => Owner::Game,
                    Some("none") => Owner::None,
                    _ => return false,
                };
                let (Some(Value::Bool(m)), Some(Value::Bool(s))) =
                    (msg.get("hard_muted"), msg.get("focus_suppressed"))
                else {
                    return false;
                };
                muted = *m;
                suppressed = *s;
            }
            "hard_mute" => muted = true,
            "hard_unmute" => muted = false,
            "focus_suppress" => suppressed = true,
            "focus_resume" => suppressed = false,
            "game_takeover" => owner = Owner::Game,
            "game_release" => owner = Owner::Core,
            _ => return false,
        }
        self.generation = generation;
        self.synchronized = true;
        self.owner = owner;
        self.hard_muted = muted;
        self.focus_suppressed = suppressed;
        true
    }

    /// An audio session starts: a page that never sent a control message gets
    /// generation 0; false when the page must synchronise first.
    pub fn start_session(&mut self) -> bool {
        self.engaged = true;
        if self.synchronized {
            return true;
        }
        if self.control_seen {
            return false;
        }
        self.generation = 0;
        self.synchronized = true;
        self.owner = Owner::Core;
        true
    }

    /// May the microphone's audio be heard now?
    pub fn hears(&self) -> bool {
        self.synchronized && self.owner == Owner::Core && !self.hard_muted && !self.focus_suppressed
    }

    pub fn generation(&self) -> i64 {
        self.generation
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn generations_only_go_up() {
        let mut l = Lease::default();
        assert!(l.start_session());
        assert!(l.hears());
        assert_eq!(l.generation(), 0);
        assert_ne!(
            Control::Applied,
            l.control(&json!({"event": "hard_mute", "lease_generation": 0}))
        );
        assert_eq!(
            Control::Applied,
            l.control(&json!({"event": "game_takeover", "lease_generation": 1}))
        );
        assert!(!l.hears());
        assert_ne!(
            Control::Applied,
            l.control(&json!({"event": "game_release", "lease_generation": 1}))
        );
        assert_eq!(
            Control::Applied,
            l.control(&json!({"event": "game_release", "lease_generation": 5}))
        );
        assert!(l.hears());
        assert_eq!(
            Control::Applied,
            l.control(&json!({"event": "lease_sync", "owner": "core",
            "hard_muted": true, "focus_suppressed": false, "lease_generation": 6}))
        );
        assert!(!l.hears());
        assert_ne!(
            Control::Applied,
            l.control(&json!({"event": "lease_sync", "owner": "core",
            "lease_generation": 7}))
        );
        assert_ne!(
            Control::Applied,
            l.control(&json!({"event": "dance", "lease_generation": 8}))
        );
        assert_ne!(
            Control::Applied,
            l.control(&json!({"event": "hard_unmute", "lease_generation": "9"}))
        );
        assert_eq!(
            Control::Applied,
            l.control(&json!({"event": "hard_unmute", "lease_generation": 9}))
        );
        assert!(l.hears());
    }

    #[test]
    fn an_idle_snapshot_at_open_is_ignored() {
        let mut l = Lease::default();
        assert_eq!(
            l.control(&json!({"event": "lease_sync", "engaged": false})),
            Control::Ignored
        );
        assert!(l.start_session());
        assert!(l.hears());
    }

    #[test]
    fn a_page_that_only_sent_rejected_controls_has_no_lease() {
        let mut l = Lease::default();
        assert_ne!(
            Control::Applied,
            l.control(&json!({"event": "bogus", "lease_generation": 1}))
        );
        assert!(!l.start_session());
        assert!(!l.hears());
        assert_eq!(
            Control::Applied,
            l.control(&json!({"event": "lease_sync", "owner": "core",
            "hard_muted": false, "focus_suppressed": false, "lease_generation": 2}))
        );
        assert!(l.start_session());
        assert!(l.hears());
    }
}
