//! What the character said in the last seconds, so a transcript that only
//! repeats it (the speakers heard by the microphone) starts no turn.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Texts spoken lately (one per speakable chunk), newest last.
#[derive(Debug, Default)]
pub struct EchoLog {
    spoken: Mutex<VecDeque<(Instant, String)>>,
}

/// Chunks kept at most.
const KEPT: usize = 64;

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

impl EchoLog {
    /// A chunk of speech is being spoken.
    pub fn said(&self, text: &str) {
        let mut s = self.spoken.lock().unwrap_or_else(|e| e.into_inner());
        s.push_back((Instant::now(), text.to_string()));
        while s.len() > KEPT {
            s.pop_front();
        }
    }

    /// Does `transcript` only repeat what was said within `window`? At least
    /// two words, 80 % of them found in order in the recent speech.
    pub fn is_echo(&self, transcript: &str, window: Duration) -> bool {
        let heard = words(transcript);
        if heard.len() < 2 {
            return false;
        }
        let now = Instant::now();
        let spoken: Vec<String> = {
            let s = self.spoken.lock().unwrap_or_else(|e| e.into_inner());
            s.iter()
                .filter(|(at, _)| now.saturating_duration_since(*at) <= window)
                .flat_map(|(_, t)| words(t))
                .collect()
        };
        if spoken.is_empty() {
            return false;
        }
        // Longest common subsequence of words.
        let mut prev = vec![0usize; spoken.len() + 1];
        for h in &heard {
            let mut cur = vec![0usize; spoken.len() + 1];
            for (j, s) in spoken.iter().enumerate() {
                cur[j + 1] = if h == s {
                    prev[j] + 1
                } else {
                    cur[j].max(prev[j + 1])
                };
            }
            prev = cur;
        }
        let common = prev.last().copied().unwrap_or(0);
        common * 5 >= heard.len() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoes_are_recognised() {
        let e = EchoLog::default();
        let w = Duration::from_secs(15);
        assert!(!e.is_echo("hello there my friend", w));
        e.said("Hello there, my friend.");
        e.said("The weather is lovely today,");
        assert!(e.is_echo("hello there my friend", w));
        assert!(e.is_echo("the weather is lovely", w));
        assert!(!e.is_echo("what time is it", w));
        assert!(!e.is_echo("hello", w));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!e.is_echo("hello there my friend", Duration::from_millis(10)));
    }
}
