//! Recording a change to the library: the old value of everything a change
//! touches, so it can be written as journal records, applied to the revision
//! and the cached answer at the cost of what changed, or undone.

use super::*;

/// One changed entry: its key, where it was / is in the order, old and new value.
pub struct Changed<V> {
    pub id: String,
    pub old: Option<(u64, V)>,
    pub new: Option<u64>,
}

/// What one change did (old values; new ones are in the library).
#[derive(Default)]
pub struct Changes {
    pub songs: Vec<Changed<Song>>,
    pub actions: Vec<Changed<Action>>,
    pub bindings: Vec<Changed<BindingMap>>,
    /// MD5 keys whose holder changed: (is_song, md5, old holder).
    pub md5: Vec<(bool, String, Option<String>)>,
    /// The MD5 indexes were rebuilt as a whole (rare).
    pub md5_rebuilt: bool,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.songs.is_empty() && self.actions.is_empty() && self.bindings.is_empty()
    }
}

#[derive(Clone, Debug, Default)]
pub(super) struct Touched {
    pub(super) songs: HashMap<String, Option<(u64, Song)>>,
    pub(super) actions: HashMap<String, Option<(u64, Action)>>,
    pub(super) bindings: HashMap<String, Option<(u64, BindingMap)>>,
    pub(super) md5: HashMap<(bool, String), Option<String>>,
    pub(super) md5_before: Option<Md5Live>,
}

impl Library {
    // -------------------------------------------------------------- tracking

    /// Start recording a change (old values of everything touched).
    pub fn begin(&mut self) {
        if self.touched.is_some() {
            // Changes made outside begin/finish (tests): fold them in first.
            let _ = self.finish();
        }
        self.touched = Some(Box::default());
    }

    /// Recording is always on: a change made without [`Library::begin`] is
    /// still recorded (and folded in by the next begin or finish).
    pub(super) fn recording(&mut self) {
        if self.touched.is_none() {
            self.touched = Some(Box::default());
        }
    }

    pub(super) fn touch_song(&mut self, id: &str) {
        self.recording();
        if let Some(t) = self.touched.as_deref_mut() {
            if !t.songs.contains_key(id) {
                t.songs.insert(id.to_string(), self.songs.snapshot(id));
            }
        }
    }
    pub(super) fn touch_action(&mut self, id: &str) {
        self.recording();
        if let Some(t) = self.touched.as_deref_mut() {
            if !t.actions.contains_key(id) {
                t.actions.insert(id.to_string(), self.actions.snapshot(id));
            }
        }
    }
    pub(super) fn touch_bindings(&mut self, sid: &str) {
        self.recording();
        if let Some(t) = self.touched.as_deref_mut() {
            if !t.bindings.contains_key(sid) {
                t.bindings
                    .insert(sid.to_string(), self.bindings.snapshot(sid));
            }
        }
    }
    pub(super) fn set_md5(&mut self, song: bool, md5: &str, holder: Option<String>) {
        let map = if song {
            &mut self.md5.songs
        } else {
            &mut self.md5.actions
        };
        let old = match &holder {
            Some(h) => map.insert(md5.to_string(), h.clone()),
            None => map.remove(md5),
        };
        if old == holder {
            return;
        }
        if let Some(t) = self.touched.as_deref_mut() {
            t.md5.entry((song, md5.to_string())).or_insert(old);
        }
    }

    /// The recorded change, ended (`None` when nothing was recorded).
    pub fn finish(&mut self) -> Changes {
        let Some(t) = self.touched.take() else {
            return Changes::default();
        };
        let t = *t;
        let c = Changes {
            md5_rebuilt: t.md5_before.is_some(),
            songs: changed(t.songs, &self.songs),
            actions: changed(t.actions, &self.actions),
            bindings: changed(t.bindings, &self.bindings),
            md5: t
                .md5
                .into_iter()
                .map(|((song, md5), old)| (song, md5, old))
                .collect(),
        };
        self.update_reverse(&c);
        c
    }

    /// Undo everything recorded since [`Library::begin`].
    pub fn rollback(&mut self) {
        let Some(t) = self.touched.take() else {
            return;
        };
        let t = *t;
        for (id, old) in t.songs {
            match old {
                Some((seq, v)) => self.songs.put_at(id, seq, v),
                None => {
                    self.songs.take(&id);
                }
            }
        }
        for (id, old) in t.actions {
            match old {
                Some((seq, v)) => self.actions.put_at(id, seq, v),
                None => {
                    self.actions.take(&id);
                }
            }
        }
        for (id, old) in t.bindings {
            match old {
                Some((seq, v)) => self.bindings.put_at(id, seq, v),
                None => {
                    self.bindings.take(&id);
                }
            }
        }
        if t.md5_before.is_some() {
            // The index was rebuilt during the change: rebuild it again.
            self.reindex();
        } else {
            for ((song, md5), old) in t.md5 {
                let map = if song {
                    &mut self.md5.songs
                } else {
                    &mut self.md5.actions
                };
                match old {
                    Some(h) => {
                        map.insert(md5, h);
                    }
                    None => {
                        map.remove(&md5);
                    }
                }
            }
        }
    }
}

/// The entries whose value differs from the one remembered before the change,
/// in the order of the library (new entries in the order they were added).
fn changed<V: PartialEq>(
    touched: HashMap<String, Option<(u64, V)>>,
    now: &Ordered<V>,
) -> Vec<Changed<V>> {
    let mut out = Vec::new();
    for (id, old) in touched {
        let new = now.map.get(&id);
        if old.as_ref().map(|(_, v)| v) != new.map(|(_, v)| v.as_ref()) {
            out.push(Changed {
                new: new.map(|(s, _)| *s),
                id,
                old,
            });
        }
    }
    out.sort_by_key(|x| (x.new.unwrap_or(u64::MAX), x.old.as_ref().map(|o| o.0)));
    out
}
