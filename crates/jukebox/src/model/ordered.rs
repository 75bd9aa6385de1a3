//! An insertion-ordered map with O(1) lookups and O(log n) removal.

use super::*;

/// A map that keeps insertion order with O(1) lookups and O(log n) removal:
/// each entry carries a sequence number; `order` lists keys by sequence.
#[derive(Clone, Debug)]
pub struct Ordered<V> {
    pub(super) map: HashMap<String, (u64, Box<V>)>,
    pub(super) order: BTreeMap<u64, String>,
    pub(super) next: u64,
}

impl<V> Default for Ordered<V> {
    fn default() -> Self {
        Ordered {
            map: HashMap::new(),
            order: BTreeMap::new(),
            next: 0,
        }
    }
}

impl<V: PartialEq> PartialEq for Ordered<V> {
    /// Equal contents (order is not compared, as for JSON objects).
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .map
                .iter()
                .all(|(k, (_, v))| other.get(k).is_some_and(|o| o == v.as_ref()))
    }
}

impl<V> Ordered<V> {
    pub fn from_index_map(m: IndexMap<String, V>) -> Self {
        let mut o = Ordered::default();
        for (k, v) in m {
            o.put(k, v);
        }
        o
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn get(&self, k: &str) -> Option<&V> {
        self.map.get(k).map(|(_, v)| v.as_ref())
    }
    pub fn contains_key(&self, k: &str) -> bool {
        self.map.contains_key(k)
    }
    /// The sequence number of a key (its place in the order).
    pub fn seq(&self, k: &str) -> Option<u64> {
        self.map.get(k).map(|(s, _)| *s)
    }
    /// Entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> + '_ {
        self.order
            .values()
            .filter_map(|k| self.map.get_key_value(k).map(|(k, (_, v))| (k, v.as_ref())))
    }
    /// Entries whose sequence number is in `range`, in order.
    pub fn range(&self, range: std::ops::Range<u64>) -> impl Iterator<Item = (&String, &V)> + '_ {
        self.order
            .range(range)
            .filter_map(|(_, k)| self.map.get_key_value(k).map(|(k, (_, v))| (k, v.as_ref())))
    }
    pub fn keys(&self) -> impl Iterator<Item = &String> + '_ {
        self.order.values()
    }
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.iter().map(|(_, v)| v)
    }
    /// The highest sequence number in use (+1).
    pub fn seq_end(&self) -> u64 {
        self.next
    }

    // Raw changes, for the tracked methods of [`Library`] only.
    /// The entry of `k` with its sequence number, copied.
    pub(super) fn snapshot(&self, k: &str) -> Option<(u64, V)>
    where
        V: Clone,
    {
        self.map.get(k).map(|(seq, v)| (*seq, v.as_ref().clone()))
    }

    pub(super) fn get_mut(&mut self, k: &str) -> Option<&mut V> {
        self.map.get_mut(k).map(|(_, v)| v.as_mut())
    }
    /// Insert or replace; a new key goes last.
    pub(super) fn put(&mut self, k: String, v: V) -> u64 {
        if let Some((seq, old)) = self.map.get_mut(&k) {
            **old = v;
            return *seq;
        }
        let seq = self.next;
        self.next += 1;
        self.order.insert(seq, k.clone());
        self.map.insert(k, (seq, Box::new(v)));
        seq
    }
    /// Put back at a known place (undo).
    pub(super) fn put_at(&mut self, k: String, seq: u64, v: V) {
        if let Some((old_seq, _)) = self.map.get(&k) {
            let old_seq = *old_seq;
            self.order.remove(&old_seq);
        }
        self.order.insert(seq, k.clone());
        self.next = self.next.max(seq + 1);
        self.map.insert(k, (seq, Box::new(v)));
    }
    pub(super) fn take(&mut self, k: &str) -> Option<(u64, V)> {
        let (seq, v) = self.map.remove(k)?;
        self.order.remove(&seq);
        Some((seq, *v))
    }
}
