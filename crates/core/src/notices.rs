//! The pending-notices queue: peek with a cursor, acknowledge up to a cursor.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// The last sequence number given, and the queued notices with theirs.
type Queue = (u64, VecDeque<(u64, Value)>);

/// Cheap to clone: clones share one queue.
#[derive(Clone, Default)]
pub struct Notices {
    inner: Arc<Mutex<Queue>>,
}

impl Notices {
    /// Queue a notice; returns its sequence number (cursor value).
    pub fn push(&self, notice: Value) -> u64 {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.0 += 1;
        let id = g.0;
        g.1.push_back((id, notice));
        while g.1.len() > 200 {
            g.1.pop_front();
        }
        id
    }

    /// All queued notices and the cursor of the newest one (0 when none was ever queued).
    pub fn peek(&self) -> (Vec<Value>, u64) {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        (
            g.1.iter().map(|(_, v)| v.clone()).collect(),
            g.1.back().map(|(id, _)| *id).unwrap_or(g.0),
        )
    }

    /// Drop the notices at or before `cursor`; returns how many were dropped.
    pub fn ack(&self, cursor: u64) -> usize {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let before = g.1.len();
        g.1.retain(|(id, _)| *id > cursor);
        before - g.1.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn ack_drains_only_up_to_cursor() {
        let n = Notices::default();
        n.push(serde_json::json!({"a":1}));
        let (_, c) = n.peek();
        n.push(serde_json::json!({"b":2}));
        assert_eq!(n.ack(c), 1);
        let (left, c2) = n.peek();
        assert_eq!(left, vec![serde_json::json!({"b":2})]);
        assert_eq!(c2, 2);
    }
}
