//! Dedup: a proactive message too similar to one of the last hour is not sent.

use std::collections::HashMap;

use super::{lock, Proactive};

/// Dedup window and threshold.
pub const DEDUP_WINDOW: i64 = 3600 * 1000;
pub const DEDUP_THRESHOLD: f64 = 0.9;

#[derive(Clone, Debug)]
pub(super) struct Sent {
    at: i64,
    text: String,
}

/// Character-bigram Dice similarity of two texts (whitespace ignored, case folded).
pub fn similarity(a: &str, b: &str) -> f64 {
    let norm = |s: &str| -> Vec<char> {
        s.to_lowercase()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect()
    };
    let (a, b) = (norm(a), norm(b));
    if a == b {
        return 1.0;
    }
    if a.len() < 2 || b.len() < 2 {
        return 0.0;
    }
    let grams = |v: &[char]| -> HashMap<(char, char), usize> {
        let mut m = HashMap::new();
        for w in v.windows(2) {
            *m.entry((w[0], w[1])).or_insert(0) += 1;
        }
        m
    };
    let (ga, gb) = (grams(&a), grams(&b));
    let common: usize = ga
        .iter()
        .map(|(k, n)| (*n).min(*gb.get(k).unwrap_or(&0)))
        .sum();
    2.0 * common as f64 / ((a.len() - 1) + (b.len() - 1)) as f64
}

impl Proactive {
    pub(super) fn is_duplicate(&self, name: &str, text: &str, now: i64) -> bool {
        let mut sent = lock(&self.sent);
        let v = sent.entry(name.to_string()).or_default();
        v.retain(|s| now - s.at < DEDUP_WINDOW);
        v.iter()
            .any(|s| similarity(&s.text, text) >= DEDUP_THRESHOLD)
    }

    pub(super) fn record_sent(&self, name: &str, text: &str, now: i64) {
        let mut sent = lock(&self.sent);
        let v = sent.entry(name.to_string()).or_default();
        v.push(Sent {
            at: now,
            text: text.to_string(),
        });
        if v.len() > 100 {
            v.remove(0);
        }
        drop(sent);
        if let Some(inv) = lock(&self.invites).get_mut(name) {
            inv.chat_delivered();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::invitations::launch_path;
    use super::super::round::stage_of;
    use super::*;

    #[test]
    fn similarity_measure() {
        assert_eq!(similarity("Hello there!", "hello  there!"), 1.0);
        assert!(
            similarity(
                "Want to watch a movie tonight?",
                "Want to watch a movie tonight"
            ) >= 0.9
        );
        assert!(similarity("Good morning", "The weather is bad") < 0.5);
        assert_eq!(stage_of("PASS_DUPLICATE"), "dedup");
        assert_eq!(launch_path("nope"), "/soccer_demo");
    }
}
