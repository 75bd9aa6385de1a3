//! The revision (`configRevision`) and the summary clients poll.

use super::*;

// ------------------------------------------------------------------ revision

/// The revision digest: per kind, the wrapping sum (4 × u64 lanes) of the
/// SHA-256 of each entry's canonical JSON. Order-independent and updated per
/// change in O(size of the change); the revision hashes the version and the
/// three sums.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Digest3 {
    pub songs: [u64; 4],
    pub actions: [u64; 4],
    pub bindings: [u64; 4],
}

/// Feeds serialised JSON straight into the hasher (no intermediate value).
struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.update(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// SHA-256 of `kind`, the key(s) and the compact JSON of a record (its fields in
/// their fixed order), as four u64 lanes.
fn entry_hash<T: Serialize + ?Sized>(kind: u8, keys: &[&str], v: &T) -> [u64; 4] {
    let mut h = Sha256::new();
    h.update([kind]);
    for k in keys {
        let _ = serde_json::to_writer(HashWriter(&mut h), k);
        h.update(b":");
    }
    let _ = serde_json::to_writer(HashWriter(&mut h), v);
    let out = h.finalize();
    let mut lanes = [0u64; 4];
    for (i, l) in lanes.iter_mut().enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(&out[i * 8..i * 8 + 8]);
        *l = u64::from_le_bytes(b);
    }
    lanes
}

/// The bindings of one song as one entry per (song, action) pair, so the
/// order inside a song's map does not matter.
fn bindings_hash(sid: &str, m: &BindingMap) -> [u64; 4] {
    let mut sum = [0u64; 4];
    for (aid, b) in m {
        add(&mut sum, entry_hash(b'b', &[sid, aid], &b.offset));
    }
    sum
}

fn add(sum: &mut [u64; 4], x: [u64; 4]) {
    for i in 0..4 {
        sum[i] = sum[i].wrapping_add(x[i]);
    }
}

fn sub(sum: &mut [u64; 4], x: [u64; 4]) {
    for i in 0..4 {
        sum[i] = sum[i].wrapping_sub(x[i]);
    }
}

impl Digest3 {
    /// From scratch, over the whole library.
    pub fn full(lib: &Library) -> Digest3 {
        let mut d = Digest3::default();
        for (id, s) in lib.songs.iter() {
            add(&mut d.songs, entry_hash(b's', &[id], s));
        }
        for (id, a) in lib.actions.iter() {
            add(&mut d.actions, entry_hash(b'a', &[id], a));
        }
        for (id, m) in lib.bindings.iter() {
            add(&mut d.bindings, bindings_hash(id, m));
        }
        d
    }

    /// Apply one change (old values out, new values in).
    pub fn update(&mut self, lib: &Library, c: &Changes) {
        for ch in &c.songs {
            if let Some((_, o)) = &ch.old {
                sub(&mut self.songs, entry_hash(b's', &[&ch.id], o));
            }
            if let Some(n) = lib.songs.get(&ch.id) {
                add(&mut self.songs, entry_hash(b's', &[&ch.id], n));
            }
        }
        for ch in &c.actions {
            if let Some((_, o)) = &ch.old {
                sub(&mut self.actions, entry_hash(b'a', &[&ch.id], o));
            }
            if let Some(n) = lib.actions.get(&ch.id) {
                add(&mut self.actions, entry_hash(b'a', &[&ch.id], n));
            }
        }
        for ch in &c.bindings {
            if let Some((_, o)) = &ch.old {
                sub(&mut self.bindings, bindings_hash(&ch.id, o));
            }
            if let Some(n) = lib.bindings.get(&ch.id) {
                add(&mut self.bindings, bindings_hash(&ch.id, n));
            }
        }
    }

    /// `configRevision`: 16 hex characters of SHA-256 over the version and the sums.
    pub fn revision(&self, version: &str) -> String {
        let mut h = Sha256::new();
        h.update(b"jukebox-revision-3\0");
        h.update(Value::String(version.to_string()).to_string().as_bytes());
        for lanes in [self.songs, self.actions, self.bindings] {
            for l in lanes {
                h.update(l.to_le_bytes());
            }
        }
        hex::encode(h.finalize())[..16].to_string()
    }
}

impl Library {
    /// The revision computed from scratch.
    pub fn revision(&self) -> String {
        Digest3::full(self).revision(&self.version)
    }
}

pub(super) fn version_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The cheap part of the config that clients poll.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = JukeboxSummary, example = json!({"configRevision": "3f9c0a…", "songCount": 12,
    "visibleSongCount": 11, "actionCount": 4}))]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub config_revision: String,
    pub song_count: usize,
    pub visible_song_count: usize,
    pub action_count: usize,
}
