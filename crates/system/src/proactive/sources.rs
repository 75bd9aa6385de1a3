//! Where a round's material comes from (music, the active window, the recent
//! conversation) and the source history that keeps a used source from being
//! reused soon; the music feedback signal clears the music part of it.

use super::{lock, Proactive, ProactiveBody};
use crate::activity::Tracker;

/// A used source (track, window) is not used again for this long.
pub const SOURCE_SKIP: i64 = 5 * 3600 * 1000;

#[derive(Clone, Debug)]
pub(super) struct SourceUse {
    at: i64,
    channel: &'static str,
    key: String,
}

/// One chosen source.
pub(super) struct Material {
    pub(super) mode: &'static str,
    pub(super) tag: String,
    pub(super) prompt: String,
}

impl Proactive {
    fn source_recent(&self, name: &str, channel: &str, key: &str, now: i64) -> bool {
        lock(&self.sources).get(name).is_some_and(|v| {
            v.iter()
                .any(|u| u.channel == channel && u.key == key && now - u.at < SOURCE_SKIP)
        })
    }

    fn record_source(&self, name: &str, channel: &'static str, key: &str, now: i64) {
        let mut s = lock(&self.sources);
        let v = s.entry(name.to_string()).or_default();
        v.retain(|u| now - u.at < SOURCE_SKIP);
        v.push(SourceUse {
            at: now,
            channel,
            key: key.to_string(),
        });
        if v.len() > 200 {
            let excess = v.len() - 200;
            v.drain(..excess);
        }
    }

    /// `music_played_through`: forget the music sources of `name`; how many.
    pub fn clear_music(&self, name: &str) -> usize {
        let mut s = lock(&self.sources);
        let Some(v) = s.get_mut(name) else {
            return 0;
        };
        let before = v.len();
        v.retain(|u| u.channel != "music");
        before - v.len()
    }

    pub(super) fn select(
        &self,
        name: &str,
        body: &ProactiveBody,
        tracker: &Tracker,
        recent: &str,
        now: i64,
    ) -> Option<Material> {
        let modes = body.modes();
        let on = |m: &str| modes.iter().any(|x| x == m);
        let playing = body.is_playing_music();
        // A fresh source of `channel`, recorded as used.
        let fresh = |channel: &'static str, key: Option<String>| {
            let key = key.filter(|k| !self.source_recent(name, channel, k, now))?;
            self.record_source(name, channel, &key, now);
            Some(key)
        };
        if on("music") && playing {
            if let Some(track) = fresh("music", body.current_track()) {
                return Some(Material {
                    mode: "music",
                    prompt: format!("The user is listening to the song \"{track}\"."),
                    tag: track,
                });
            }
        }
        if on("window") {
            let title = body
                .window_title()
                .or_else(|| tracker.current(name).and_then(|s| s.window_title));
            if let Some(t) = fresh("window", title) {
                return Some(Material {
                    mode: "window",
                    prompt: format!("The user's active window is titled \"{t}\"."),
                    tag: t,
                });
            }
        }
        if on("chat") || on("home") || on("idle") {
            let prompt = if recent.is_empty() {
                "You have not talked with the user for a while.".to_string()
            } else {
                format!("The recent conversation was:\n{recent}")
            };
            return Some(Material {
                mode: "chat",
                tag: "recent_conversation".into(),
                prompt,
            });
        }
        None
    }
}
