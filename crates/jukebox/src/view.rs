//! The GET /config answer, cached in serialised parts: records are grouped in
//! segments of [`SEGMENT`] consecutive sequence numbers; a change re-serialises
//! only the segments it touched, and the answer is the parts streamed one after
//! the other (no copy of the whole body, no rebuild per change).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use serde::Serialize;

use crate::model::{Changes, Library, Ordered, Summary};

/// Records per segment.
pub const SEGMENT: u64 = 256;

/// Cached parts of one map (`songs`, `actions` or `bindings`) and, for songs
/// and actions, of their half of `md5Index`.
#[derive(Default)]
struct Parts {
    recs: BTreeMap<u64, Bytes>,
    md5: BTreeMap<u64, Bytes>,
    dirty: BTreeSet<u64>,
    all_dirty: bool,
}

impl Parts {
    fn mark(&mut self, seq: u64) {
        self.dirty.insert(seq / SEGMENT);
    }
}

/// One kind's MD5 index entries: its records' ones, then the bundle's still-valid ones.
fn md5_index<'a>(parts: &'a Parts, extra: &'a Bytes) -> impl Iterator<Item = &'a Bytes> {
    parts
        .md5
        .values()
        .chain(std::iter::once(extra).filter(|b| !b.is_empty()))
}

/// The serialised answer: chunks to send in order, and their total length.
#[derive(Clone)]
pub struct Body {
    pub chunks: Arc<Vec<Bytes>>,
    pub len: u64,
}

#[derive(Default)]
pub struct View {
    songs: Parts,
    actions: Parts,
    bindings: Parts,
    /// `md5Index` entries not covered by a record segment (a bundled index
    /// naming an id whose record has another MD5): songs, actions.
    extra_md5: (Bytes, Bytes),
    extra_dirty: bool,
    body: Option<Body>,
}

fn push_entry<V: Serialize + ?Sized>(buf: &mut BytesMut, first: &mut bool, k: &str, v: &V) {
    if !*first {
        buf.put_u8(b',');
    }
    *first = false;
    let mut w = buf.writer();
    let _ = serde_json::to_writer(&mut w, k);
    w.get_mut().put_u8(b':');
    let _ = serde_json::to_writer(&mut w, v);
}

/// Serialise the records of segment `seg` (and their MD5 index entries). The
/// parts are exact-size copies of a scratch buffer (no growth slack kept).
fn segment<V: Serialize>(
    map: &Ordered<V>,
    seg: u64,
    md5_of: impl Fn(&V) -> &str,
    index: Option<&HashMap<String, String>>,
    scratch: &mut (BytesMut, BytesMut),
) -> (Bytes, Bytes) {
    let (recs, md5) = scratch;
    recs.clear();
    md5.clear();
    let (mut f1, mut f2) = (true, true);
    for (id, v) in map.range(seg * SEGMENT..(seg + 1) * SEGMENT) {
        push_entry(recs, &mut f1, id, v);
        if let Some(index) = index {
            let m = md5_of(v);
            if !m.is_empty() && index.get(m).is_some_and(|h| h == id) {
                push_entry(md5, &mut f2, m, id);
            }
        }
    }
    (Bytes::copy_from_slice(recs), Bytes::copy_from_slice(md5))
}

fn refresh<V: Serialize>(
    parts: &mut Parts,
    map: &Ordered<V>,
    md5_of: impl Fn(&V) -> &str + Copy,
    index: Option<&HashMap<String, String>>,
) {
    let segs: Vec<u64> = if parts.all_dirty {
        parts.recs.clear();
        parts.md5.clear();
        (0..map.seq_end().div_ceil(SEGMENT)).collect()
    } else {
        parts.dirty.iter().copied().collect()
    };
    let mut scratch = (BytesMut::new(), BytesMut::new());
    for seg in segs {
        let (r, m) = segment(map, seg, md5_of, index, &mut scratch);
        if r.is_empty() {
            parts.recs.remove(&seg);
        } else {
            parts.recs.insert(seg, r);
        }
        if m.is_empty() {
            parts.md5.remove(&seg);
        } else {
            parts.md5.insert(seg, m);
        }
    }
    parts.dirty.clear();
    parts.all_dirty = false;
}

/// Entries of `index` whose holder's record has another MD5 (or none).
fn extras<V>(
    index: &HashMap<String, String>,
    map: &Ordered<V>,
    md5_of: impl Fn(&V) -> &str,
) -> Bytes {
    let mut buf = BytesMut::new();
    let mut first = true;
    let mut keys: Vec<(&String, &String)> = index
        .iter()
        .filter(|(m, id)| map.get(id).is_none_or(|v| md5_of(v) != m.as_str()))
        .collect();
    keys.sort();
    for (m, id) in keys {
        push_entry(&mut buf, &mut first, m, id);
    }
    buf.freeze()
}

fn song_md5(s: &crate::model::Song) -> &str {
    &s.audio_md5
}
fn action_md5(a: &crate::model::Action) -> &str {
    &a.file_md5
}
fn no_md5(_: &crate::model::BindingMap) -> &str {
    ""
}

impl View {
    /// The answer when nothing changed since it was built.
    pub fn cached(&self) -> Option<Body> {
        self.body.clone()
    }

    /// Everything must be serialised again (a new library).
    pub fn reset(&mut self) {
        *self = View::default();
        self.songs.all_dirty = true;
        self.actions.all_dirty = true;
        self.bindings.all_dirty = true;
        self.extra_dirty = true;
    }

    /// Mark what a change touched.
    pub fn changed(&mut self, lib: &Library, c: &Changes) {
        self.body = None;
        for ch in &c.songs {
            if let Some((seq, _)) = &ch.old {
                self.songs.mark(*seq);
            }
            if let Some(seq) = ch.new {
                self.songs.mark(seq);
            }
        }
        for ch in &c.actions {
            if let Some((seq, _)) = &ch.old {
                self.actions.mark(*seq);
            }
            if let Some(seq) = ch.new {
                self.actions.mark(seq);
            }
        }
        for ch in &c.bindings {
            if let Some((seq, _)) = &ch.old {
                self.bindings.mark(*seq);
            }
            if let Some(seq) = ch.new {
                self.bindings.mark(seq);
            }
        }
        if c.md5_rebuilt {
            self.songs.all_dirty = true;
            self.actions.all_dirty = true;
            self.extra_dirty = true;
            return;
        }
        // The segments of the old and the new holder of every MD5 that moved.
        for (song, md5, old) in &c.md5 {
            let now = if *song {
                lib.md5.songs.get(md5)
            } else {
                lib.md5.actions.get(md5)
            };
            for id in [old.as_ref(), now].into_iter().flatten() {
                if *song {
                    if let Some(seq) = lib.songs.seq(id) {
                        self.songs.mark(seq);
                    }
                } else if let Some(seq) = lib.actions.seq(id) {
                    self.actions.mark(seq);
                }
            }
        }
        // Removed holders are found through the record changes above.
    }

    /// The answer, re-serialising only what changed since the last one.
    pub fn body(&mut self, lib: &Library, summary: &Summary) -> Body {
        if let Some(b) = &self.body {
            return b.clone();
        }
        refresh(&mut self.songs, &lib.songs, song_md5, Some(&lib.md5.songs));
        refresh(
            &mut self.actions,
            &lib.actions,
            action_md5,
            Some(&lib.md5.actions),
        );
        refresh(&mut self.bindings, &lib.bindings, no_md5, None);
        if self.extra_dirty {
            self.extra_md5 = (
                extras(&lib.md5.songs, &lib.songs, song_md5),
                extras(&lib.md5.actions, &lib.actions, action_md5),
            );
            self.extra_dirty = false;
        }
        let mut chunks: Vec<Bytes> = Vec::new();
        let lit = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let json = |v: &dyn erased::Ser| Bytes::from(v.to_vec());
        chunks.push(lit("{\"version\":"));
        chunks.push(json(&lib.version));
        let join = |chunks: &mut Vec<Bytes>, parts: &mut dyn Iterator<Item = &Bytes>| {
            let mut first = true;
            for p in parts {
                if !first {
                    chunks.push(Bytes::from_static(b","));
                }
                first = false;
                chunks.push(p.clone());
            }
        };
        chunks.push(lit(",\"songs\":{"));
        join(&mut chunks, &mut self.songs.recs.values());
        chunks.push(lit("},\"actions\":{"));
        join(&mut chunks, &mut self.actions.recs.values());
        chunks.push(lit("},\"bindings\":{"));
        join(&mut chunks, &mut self.bindings.recs.values());
        chunks.push(lit("},\"md5Index\":{\"songs\":{"));
        join(&mut chunks, &mut md5_index(&self.songs, &self.extra_md5.0));
        chunks.push(lit("},\"actions\":{"));
        join(
            &mut chunks,
            &mut md5_index(&self.actions, &self.extra_md5.1),
        );
        chunks.push(lit("}},\"configRevision\":"));
        chunks.push(json(&summary.config_revision));
        chunks.push(lit(&format!(
            ",\"songCount\":{},\"visibleSongCount\":{},\"actionCount\":{}}}",
            summary.song_count, summary.visible_song_count, summary.action_count
        )));
        let len = chunks.iter().map(|c| c.len() as u64).sum();
        let body = Body {
            chunks: Arc::new(chunks),
            len,
        };
        self.body = Some(body.clone());
        body
    }
}

mod erased {
    pub trait Ser {
        fn to_vec(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Ser for T {
        fn to_vec(&self) -> Vec<u8> {
            serde_json::to_vec(self).unwrap_or_default()
        }
    }
}
