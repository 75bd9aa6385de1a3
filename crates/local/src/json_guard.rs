//! JSON-constrained sampling: a pushdown automaton over characters that says
//! whether a text is a valid prefix of one JSON object, and how to close it.
//! The sampler offers a token only when its text keeps the answer a valid
//! prefix; when the token budget runs out the answer is closed by hand, so a
//! constrained answer always parses (docs/local-model.md).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// A value (after `:` or `[` or `,` in an array; the top level).
    Value,
    /// After `[`: a value or `]`.
    ValueOrEnd,
    /// After `{`: a key or `}`.
    KeyOrEnd,
    /// After `,` in an object: a key.
    Key,
    Colon,
    /// After a value inside a container: `,` or the closing bracket.
    CommaOrEnd,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lex {
    None,
    /// In a string; `key` when it is an object key; escape state: 0 none,
    /// 1 after `\`, 2..=5 hex digits of `\u` still to come (5 - n).
    Str {
        key: bool,
        esc: u8,
    },
    /// In a number: 0 after `-`, 1 integer digits, 2 after `.`, 3 fraction
    /// digits, 4 after `e`, 5 after the exponent's sign, 6 exponent digits;
    /// `zero`: the integer part is a single 0.
    Num {
        st: u8,
        zero: bool,
    },
    /// In `true`, `false` or `null`: the rest still to come.
    Lit(&'static str),
}

/// The automaton.
#[derive(Clone, Debug)]
pub struct JsonGuard {
    stack: Vec<u8>,
    expect: Expect,
    lex: Lex,
}

impl Default for JsonGuard {
    fn default() -> Self {
        JsonGuard {
            stack: Vec::new(),
            expect: Expect::Value,
            lex: Lex::None,
        }
    }
}

impl JsonGuard {
    /// Has the top-level object closed?
    pub fn done(&self) -> bool {
        self.expect == Expect::Done && self.lex == Lex::None
    }

    /// Feed `text`; false (and the guard unchanged in meaning) when it would
    /// not be a valid prefix.
    pub fn feed(&mut self, text: &str) -> bool {
        text.chars().all(|c| self.push(c))
    }

    fn after_value(&mut self) {
        self.expect = if self.stack.is_empty() {
            Expect::Done
        } else {
            Expect::CommaOrEnd
        };
    }

    fn push(&mut self, c: char) -> bool {
        match self.lex {
            Lex::Str { key, esc } => {
                match esc {
                    0 => match c {
                        '"' => {
                            self.lex = Lex::None;
                            if key {
                                self.expect = Expect::Colon;
                            } else {
                                self.after_value();
                            }
                        }
                        '\\' => self.lex = Lex::Str { key, esc: 1 },
                        c if (c as u32) < 0x20 => return false,
                        _ => {}
                    },
                    1 => {
                        self.lex = match c {
                            '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' => {
                                Lex::Str { key, esc: 0 }
                            }
                            'u' => Lex::Str { key, esc: 2 },
                            _ => return false,
                        }
                    }
                    n => {
                        if !c.is_ascii_hexdigit() {
                            return false;
                        }
                        self.lex = Lex::Str {
                            key,
                            esc: if n >= 5 { 0 } else { n + 1 },
                        };
                    }
                }
                return true;
            }
            Lex::Num { st, zero } => {
                let next = match (st, c) {
                    (0, '0') => Some((1, true)),
                    (0, '1'..='9') => Some((1, false)),
                    (1, '0'..='9') if !zero => Some((1, false)),
                    (1, '.') => Some((2, zero)),
                    (1 | 3, 'e' | 'E') => Some((4, zero)),
                    (2 | 3, '0'..='9') => Some((3, zero)),
                    (4, '+' | '-') => Some((5, zero)),
                    (4..=6, '0'..='9') => Some((6, zero)),
                    _ => None,
                };
                if let Some((st, zero)) = next {
                    self.lex = Lex::Num { st, zero };
                    return true;
                }
                if !matches!(st, 1 | 3 | 6) {
                    return false;
                }
                self.lex = Lex::None;
                self.after_value();
                // The character that ended the number is read as usual.
            }
            Lex::Lit(rest) => {
                let mut it = rest.chars();
                if it.next() != Some(c) {
                    return false;
                }
                let rest = it.as_str();
                if rest.is_empty() {
                    self.lex = Lex::None;
                    self.after_value();
                } else {
                    self.lex = Lex::Lit(rest);
                }
                return true;
            }
            Lex::None => {}
        }
        if c.is_whitespace() {
            // No leading whitespace before the object: it only wastes tokens.
            return !(self.stack.is_empty() && self.expect == Expect::Value);
        }
        match self.expect {
            Expect::Done => false,
            Expect::Colon => {
                if c == ':' {
                    self.expect = Expect::Value;
                    true
                } else {
                    false
                }
            }
            Expect::KeyOrEnd | Expect::Key => match c {
                '"' => {
                    self.lex = Lex::Str { key: true, esc: 0 };
                    true
                }
                '}' if self.expect == Expect::KeyOrEnd => self.close(b'{'),
                _ => false,
            },
            Expect::CommaOrEnd => match c {
                ',' => {
                    self.expect = if self.stack.last() == Some(&b'{') {
                        Expect::Key
                    } else {
                        Expect::Value
                    };
                    true
                }
                '}' => self.close(b'{'),
                ']' => self.close(b'['),
                _ => false,
            },
            Expect::Value | Expect::ValueOrEnd => {
                if self.stack.is_empty() && c != '{' {
                    // The top level is an object.
                    return false;
                }
                match c {
                    ']' if self.expect == Expect::ValueOrEnd => self.close(b'['),
                    '{' => {
                        self.stack.push(b'{');
                        self.expect = Expect::KeyOrEnd;
                        true
                    }
                    '[' => {
                        self.stack.push(b'[');
                        self.expect = Expect::ValueOrEnd;
                        true
                    }
                    '"' => {
                        self.lex = Lex::Str { key: false, esc: 0 };
                        true
                    }
                    '-' => {
                        self.lex = Lex::Num { st: 0, zero: false };
                        true
                    }
                    '0'..='9' => {
                        self.lex = Lex::Num {
                            st: 1,
                            zero: c == '0',
                        };
                        true
                    }
                    't' => {
                        self.lex = Lex::Lit("rue");
                        true
                    }
                    'f' => {
                        self.lex = Lex::Lit("alse");
                        true
                    }
                    'n' => {
                        self.lex = Lex::Lit("ull");
                        true
                    }
                    _ => false,
                }
            }
        }
    }

    fn close(&mut self, open: u8) -> bool {
        if self.stack.last() != Some(&open) {
            return false;
        }
        self.stack.pop();
        self.after_value();
        true
    }

    /// The text that closes the answer so far into valid JSON (a dangling
    /// `,` is removed by the lenient parser the callers use).
    pub fn closing(&self) -> String {
        let mut out = String::new();
        let mut expect = self.expect;
        match self.lex {
            Lex::Str { key, esc } => {
                match esc {
                    1 => out.push('n'),
                    n if n >= 2 => out.push_str(&"0".repeat((6 - n) as usize)),
                    _ => {}
                }
                out.push('"');
                if key {
                    out.push_str(":null");
                }
                expect = Expect::CommaOrEnd;
            }
            Lex::Num { st, .. } => {
                if !matches!(st, 1 | 3 | 6) {
                    out.push('0');
                }
                expect = Expect::CommaOrEnd;
            }
            Lex::Lit(rest) => {
                out.push_str(rest);
                expect = Expect::CommaOrEnd;
            }
            Lex::None => {}
        }
        match expect {
            Expect::Colon => out.push_str(":null"),
            Expect::Value if self.stack.last() == Some(&b'{') => out.push_str("null"),
            _ => {}
        }
        for b in self.stack.iter().rev() {
            out.push(if *b == b'{' { '}' } else { ']' });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_prefixes_and_closing() {
        let mut g = JsonGuard::default();
        assert!(
            g.feed("{\"facts\": [{\"text\": \"likes \\u00e9 tea\", \"n\": -1.5e3}, true, null]}")
        );
        assert!(g.done());
        assert!(!g.clone().feed(","));
        for bad in [
            "[",
            " {",
            "{\"a\" 1",
            "{\"a\":01",
            "{\"a\":tru3",
            "{]",
            "{\"a\":1,}",
        ] {
            assert!(!JsonGuard::default().feed(bad), "{bad}");
        }
        for part in [
            "{\"facts\": [{\"text\": \"lik",
            "{\"a\": [1, 2",
            "{\"a\": {\"b\"",
            "{\"a\":",
            "{\"a\": 1.",
            "{\"a\": [tr",
            "{\"a\": \"x\\",
            "{\"a\": [1,",
        ] {
            let mut g = JsonGuard::default();
            assert!(g.feed(part), "{part}");
            let whole = format!("{part}{}", g.closing());
            assert!(
                companiond_core::llm::lenient_json(&whole).is_some(),
                "{part} -> {whole}"
            );
        }
    }
}
