//! Speakable chunks of a streamed reply (docs/voice.md, "Chunking").
//!
//! The model's deltas are pushed as they arrive; whole chunks come out as soon
//! as a cut point is certain. What a voice should not read is removed on the
//! way: `<think>` blocks, fenced code, markdown markers (`**`, `#`, `-`, `>`,
//! `` ` ``, `_`, `~`, `[]`, `|`), `*actions*`, `(stage directions)` (also the
//! full-width `（）`), emoji, and fragments left without a letter or digit
//! (kaomoji). Cuts fall after `. ! ? ; …` (a `.` only before white space, so
//! never inside `3.14` or `example.com`), after the CJK `。！？；` and at line
//! ends; the first chunk is also cut at a comma once it holds
//! [`FIRST_SOFT_CUT`] characters (the first audio starts early), later ones at
//! [`SOFT_CUT`]; no chunk is longer than [`MAX_CHUNK`] characters.
//!
//! Hand-written: the cut rules are this project's (no crate does streamed
//! cutting with these removals), and a state machine over characters is small.

/// The first chunk is cut at a comma once it holds this many characters.
pub const FIRST_SOFT_CUT: usize = 8;
/// Later chunks are cut at a comma once they hold this many characters.
pub const SOFT_CUT: usize = 40;
/// No chunk is longer than this many characters.
pub const MAX_CHUNK: usize = 250;

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

/// Cuts a streamed reply into speakable chunks.
#[derive(Debug, Default)]
pub struct Chunker {
    /// Raw text not yet filtered (a possible tag or marker at its end).
    raw: String,
    /// Filtered text not yet cut.
    buf: String,
    think: bool,
    fence: bool,
    action: bool,
    paren: u32,
    /// Is the filter at the start of a line (markdown line markers)?
    mid_line: bool,
    emitted: usize,
}

fn is_emoji(c: char) -> bool {
    matches!(c as u32,
        0x1F000..=0x1FAFF | 0x2600..=0x27BF | 0x2B00..=0x2BFF | 0xFE00..=0xFE0F
        | 0x200D | 0x20E3 | 0xE0020..=0xE007F | 0x2190..=0x21FF | 0x2300..=0x23FF)
}

fn is_cjk_stop(c: char) -> bool {
    matches!(c, '。' | '！' | '？' | '；' | '…' | '\n')
}

fn is_closer(c: char) -> bool {
    matches!(
        c,
        '"' | '\'' | '」' | '』' | '”' | '’' | '》' | ')' | '）' | '!' | '?' | '。' | '！' | '？'
    )
}

impl Chunker {
    pub fn new() -> Chunker {
        Chunker::default()
    }

    /// Add a delta; the chunks it completed.
    pub fn push(&mut self, delta: &str) -> Vec<String> {
        self.raw.push_str(delta);
        self.filter(false);
        self.cut(false)
    }

    /// The reply is complete: the remaining chunks.
    pub fn finish(&mut self) -> Vec<String> {
        self.filter(true);
        self.raw.clear();
        self.cut(true)
    }

    /// Move what is certain from `raw` into `buf`, removing what is not spoken.
    fn filter(&mut self, finishing: bool) {
        let chars: Vec<char> = self.raw.chars().collect();
        let n = chars.len();
        let mut i = 0;
        let starts = |i: usize, s: &str| {
            let len = s.chars().count();
            i + len <= n && s.chars().zip(&chars[i..]).all(|(a, b)| a == *b)
        };
        let partial = |i: usize, s: &str| {
            // chars[i..] is a proper prefix of s
            n - i < s.chars().count() && s.chars().zip(&chars[i..]).all(|(a, b)| a == *b)
        };
        while i < n {
            let c = chars[i];
            if c == '<' {
                if starts(i, THINK_OPEN) {
                    self.think = true;
                    i += THINK_OPEN.len();
                    continue;
                }
                if starts(i, THINK_CLOSE) {
                    self.think = false;
                    i += THINK_CLOSE.len();
                    continue;
                }
                if !finishing && (partial(i, THINK_OPEN) || partial(i, THINK_CLOSE)) {
                    break;
                }
            }
            if c == '`' {
                let mut run = 0;
                while i + run < n && chars[i + run] == '`' {
                    run += 1;
                }
                if i + run == n && run < 3 && !finishing {
                    break;
                }
                if run >= 3 {
                    self.fence = !self.fence;
                }
                i += run;
                continue;
            }
            if self.think || self.fence {
                i += 1;
                continue;
            }
            if c == '*' {
                if i + 1 == n && !finishing {
                    break;
                }
                let next = chars.get(i + 1).copied();
                if next == Some('*') {
                    i += 2;
                    continue;
                }
                if !self.mid_line && next.is_some_and(char::is_whitespace) {
                    i += 1; // a list bullet
                    continue;
                }
                self.action = !self.action;
                i += 1;
                continue;
            }
            if c == '\n' {
                // An unclosed action or direction ends with its line.
                self.action = false;
                self.paren = 0;
            }
            if self.action {
                i += 1;
                continue;
            }
            match c {
                '(' | '（' => {
                    self.paren += 1;
                    i += 1;
                    continue;
                }
                ')' | '）' if self.paren > 0 => {
                    self.paren -= 1;
                    i += 1;
                    continue;
                }
                _ => {}
            }
            if self.paren > 0 {
                i += 1;
                continue;
            }
            if c == '-' && !self.mid_line && i + 1 == n && !finishing {
                break;
            }
            let line_marker = !self.mid_line
                && (matches!(c, '#' | '>')
                    || (c == '-' && chars.get(i + 1).is_some_and(|d| *d == ' ')));
            if line_marker || matches!(c, '_' | '~' | '[' | ']' | '|' | '\r') || is_emoji(c) {
                i += 1;
                continue;
            }
            if c == '\n' {
                self.mid_line = false;
            } else if !c.is_whitespace() {
                self.mid_line = true;
            }
            self.buf.push(c);
            i += 1;
        }
        self.raw = chars[i..].iter().collect();
    }

    /// Cut `buf` at every certain cut point.
    fn cut(&mut self, finishing: bool) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            let chars: Vec<char> = self.buf.chars().collect();
            let Some(at) = self.cut_point(&chars, finishing) else {
                break;
            };
            let chunk: String = chars[..at].iter().collect();
            self.buf = chars[at..].iter().collect();
            self.emit(&chunk, &mut out);
        }
        if finishing {
            let rest = std::mem::take(&mut self.buf);
            self.emit(&rest, &mut out);
        }
        out
    }

    /// Where (in characters) the first chunk of `chars` ends, if that is known.
    fn cut_point(&self, chars: &[char], finishing: bool) -> Option<usize> {
        let n = chars.len();
        let soft = if self.emitted == 0 {
            FIRST_SOFT_CUT
        } else {
            SOFT_CUT
        };
        let after_closers = |mut k: usize| {
            while k < n && is_closer(chars[k]) {
                k += 1;
            }
            k
        };
        for (i, &c) in chars.iter().enumerate() {
            let next = chars.get(i + 1).copied();
            match c {
                c if is_cjk_stop(c) => return Some(after_closers(i + 1)),
                '!' | '?' | ';' => match next {
                    None if !finishing => return None,
                    _ => return Some(after_closers(i + 1)),
                },
                '.' => match next {
                    None if !finishing => return None,
                    None => return Some(n),
                    Some('.') => {}
                    Some(d) if d.is_whitespace() || is_closer(d) => {
                        return Some(after_closers(i + 1))
                    }
                    Some(_) => {}
                },
                '，' | '、' | '：' if i + 1 >= soft => return Some(i + 1),
                ',' | ':' if i + 1 >= soft => match next {
                    None if !finishing => return None,
                    Some(d) if !d.is_whitespace() => {}
                    _ => return Some(i + 1),
                },
                _ => {}
            }
            if i + 1 >= MAX_CHUNK {
                let space = chars[..=i].iter().rposition(|c| c.is_whitespace());
                return Some(space.filter(|s| *s > MAX_CHUNK / 2).unwrap_or(i + 1));
            }
        }
        None
    }

    fn emit(&mut self, chunk: &str, out: &mut Vec<String>) {
        let joined = chunk.split_whitespace().collect::<Vec<_>>().join(" ");
        // A removed word leaves a space before the punctuation that followed it.
        let mut text = String::with_capacity(joined.len());
        let mut chars = joined.chars().peekable();
        while let Some(c) = chars.next() {
            let before_punct = chars
                .peek()
                .is_some_and(|d| matches!(d, '.' | ',' | '!' | '?' | ';' | ':'));
            if !(c == ' ' && before_punct) {
                text.push(c);
            }
        }
        if text.chars().any(char::is_alphanumeric) {
            self.emitted += 1;
            out.push(text);
        }
    }
}

/// All the chunks of a whole text (a speak route's line).
pub fn chunks_of(text: &str) -> Vec<String> {
    let mut c = Chunker::new();
    let mut out = c.push(text);
    out.extend(c.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streamed(parts: &[&str]) -> Vec<String> {
        let mut c = Chunker::new();
        let mut out = Vec::new();
        for p in parts {
            out.extend(c.push(p));
        }
        out.extend(c.finish());
        out
    }

    /// Every way of cutting `text` into two deltas gives the same chunks.
    fn same_at_every_split(text: &str) -> Vec<String> {
        let whole = chunks_of(text);
        let idx: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        for i in idx {
            assert_eq!(
                streamed(&[&text[..i], &text[i..]]),
                whole,
                "split at {i} of {text:?}"
            );
        }
        whole
    }

    #[test]
    fn sentences_and_decimals() {
        assert_eq!(
            same_at_every_split("Pi is 3.14 exactly. Visit example.com today! Ok?"),
            vec!["Pi is 3.14 exactly.", "Visit example.com today!", "Ok?"]
        );
    }

    #[test]
    fn first_chunk_cut_early_at_a_comma() {
        assert_eq!(
            same_at_every_split("Well hello there, my friend, how are you doing today, really"),
            vec![
                "Well hello there,",
                "my friend, how are you doing today, really"
            ]
        );
        // 1,000 is not a cut.
        assert_eq!(
            chunks_of("It costs 1,000 coins."),
            vec!["It costs 1,000 coins."]
        );
    }

    #[test]
    fn removes_what_is_not_spoken() {
        assert_eq!(
            same_at_every_split(
                "<think>plan the answer.</think>**Hi** *waves* there (smiles). 😀😀\n# Title\n- item one\n```\ncode();\n```\nDone."
            ),
            vec!["Hi there.", "Title", "item one", "Done."]
        );
        assert!(chunks_of("(＾▽＾) ✨ ...").is_empty());
        assert_eq!(chunks_of("（笑）你好。"), vec!["你好。"]);
    }

    #[test]
    fn cjk_punctuation() {
        assert_eq!(
            same_at_every_split("你好！今天天气很好。我们去公园吧？"),
            vec!["你好！", "今天天气很好。", "我们去公园吧？"]
        );
        assert_eq!(
            chunks_of("「こんにちは。」と言った"),
            vec!["「こんにちは。」", "と言った"]
        );
    }

    #[test]
    fn long_text_is_bounded() {
        let text = "word ".repeat(200);
        let chunks = chunks_of(&text);
        assert!(chunks.len() >= 4);
        assert!(chunks.iter().all(|c| c.chars().count() <= MAX_CHUNK));
    }
}
