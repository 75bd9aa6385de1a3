//! JSON-schema-constrained sampling: the schema (the subset memory calls use:
//! objects with properties, arrays, strings with or without `enum`,
//! integers, numbers, booleans, null, `type` lists) becomes a pushdown
//! automaton over characters. Keys and punctuation are forced in the
//! schema's order (compact JSON, no whitespace); the model chooses the
//! contents, whether an array goes on, and which alternative a `type` list
//! takes. Arrays hold at most [`MAX_ITEMS`] items and strings
//! [`MAX_STRING`] characters, so an answer always ends; [`SchemaGuard::closing`]
//! completes a cut one with defaults (docs/local-model.md).

use std::sync::Arc;

use serde_json::Value;

pub const MAX_ITEMS: usize = 8;
pub const MAX_STRING: usize = 240;
const MAX_INT_DIGITS: u8 = 6;

#[derive(Debug)]
enum Node {
    Obj(Vec<(String, Arc<Node>)>),
    Arr(Arc<Node>),
    Str(Option<Vec<String>>),
    Int,
    Num,
    Bool,
    Null,
    OneOf(Vec<Arc<Node>>),
}

fn compile(s: &Value, depth: usize) -> Arc<Node> {
    if depth > 12 {
        return Arc::new(Node::Str(None));
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        let vals: Vec<String> = e
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
        if !vals.is_empty() {
            return Arc::new(Node::Str(Some(vals)));
        }
    }
    let one = |t: &str| -> Arc<Node> {
        Arc::new(match t {
            "object" => {
                let props = s.get("properties").and_then(Value::as_object);
                let required: Vec<&str> = s
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let list = props
                    .map(|p| {
                        p.iter()
                            .filter(|(k, _)| required.is_empty() || required.contains(&k.as_str()))
                            .map(|(k, v)| (k.clone(), compile(v, depth + 1)))
                            .collect()
                    })
                    .unwrap_or_default();
                Node::Obj(list)
            }
            "array" => Node::Arr(match s.get("items") {
                Some(i) => compile(i, depth + 1),
                None => Arc::new(Node::Str(None)),
            }),
            "integer" => Node::Int,
            "number" => Node::Num,
            "boolean" => Node::Bool,
            "null" => Node::Null,
            _ => Node::Str(None),
        })
    };
    match s.get("type") {
        Some(Value::String(t)) => one(t),
        Some(Value::Array(ts)) => {
            let alts: Vec<Arc<Node>> = ts.iter().filter_map(Value::as_str).map(one).collect();
            match alts.len() {
                0 => Arc::new(Node::Str(None)),
                1 => alts[0].clone(),
                _ => Arc::new(Node::OneOf(alts)),
            }
        }
        _ if s.get("properties").is_some() => one("object"),
        _ => Arc::new(Node::Str(None)),
    }
}

#[derive(Clone, Debug)]
enum Frame {
    /// Forced text still to come.
    Lit(Arc<str>, usize),
    /// The start of a value.
    Value(Arc<Node>),
    /// Inside an object: the next property to write.
    ObjRest(Arc<Node>, usize),
    /// Right after `[`.
    ArrStart(Arc<Node>),
    /// After an item: `,` or `]`.
    ArrRest(Arc<Node>, usize),
    Str {
        enums: Option<Arc<Vec<String>>>,
        content: String,
        esc: u8,
    },
    /// `st` as in the free guard (0 after `-`, 1 int digits, 2 after `.`,
    /// 3 fraction, 4 after `e`, 5 exponent sign, 6 exponent digits).
    Num { int_only: bool, st: u8, digits: u8 },
}

/// The automaton of one schema.
#[derive(Clone, Debug)]
pub struct SchemaGuard {
    stack: Vec<Frame>,
}

fn lit(s: &str) -> Frame {
    Frame::Lit(Arc::from(s), 0)
}

fn key_lit(first: bool, key: &str) -> Frame {
    let k = serde_json::to_string(key).unwrap_or_else(|_| format!("\"{key}\""));
    lit(&format!("{}{k}:", if first { "" } else { "," }))
}

impl SchemaGuard {
    /// A guard for `schema` (its top level should be an object).
    pub fn new(schema: &Value) -> SchemaGuard {
        SchemaGuard {
            stack: vec![Frame::Value(compile(schema, 0))],
        }
    }

    pub fn done(&self) -> bool {
        self.stack.is_empty()
    }

    pub fn feed(&mut self, text: &str) -> bool {
        text.chars().all(|c| self.push(c))
    }

    fn push(&mut self, c: char) -> bool {
        loop {
            let Some(top) = self.stack.pop() else {
                return false;
            };
            match top {
                Frame::Lit(s, i) => {
                    let mut rest = s[i..].chars();
                    if rest.next() != Some(c) {
                        return false;
                    }
                    let i = i + c.len_utf8();
                    if i < s.len() {
                        self.stack.push(Frame::Lit(s, i));
                    }
                    return true;
                }
                Frame::ObjRest(node, next) => {
                    let Node::Obj(props) = &*node else {
                        return false;
                    };
                    match props.get(next) {
                        Some((k, v)) => {
                            let (k, v) = (k.clone(), v.clone());
                            self.stack.push(Frame::ObjRest(node.clone(), next + 1));
                            self.stack.push(Frame::Value(v));
                            self.stack.push(key_lit(next == 0, &k));
                        }
                        None => self.stack.push(lit("}")),
                    }
                }
                Frame::ArrStart(item) => {
                    if c == ']' {
                        return true;
                    }
                    self.stack.push(Frame::ArrRest(item.clone(), 1));
                    self.stack.push(Frame::Value(item));
                }
                Frame::ArrRest(item, n) => {
                    if c == ']' {
                        return true;
                    }
                    if c == ',' && n < MAX_ITEMS {
                        self.stack.push(Frame::ArrRest(item.clone(), n + 1));
                        self.stack.push(Frame::Value(item));
                        return true;
                    }
                    return false;
                }
                Frame::Value(node) => return self.start(&node, c),
                Frame::Str {
                    enums,
                    mut content,
                    esc,
                } => {
                    if esc > 0 {
                        let next = match (esc, c) {
                            (1, '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') => 0,
                            (1, 'u') => 2,
                            (2..=5, h) if h.is_ascii_hexdigit() => {
                                if esc == 5 {
                                    0
                                } else {
                                    esc + 1
                                }
                            }
                            _ => return false,
                        };
                        content.push(c);
                        self.stack.push(Frame::Str {
                            enums,
                            content,
                            esc: next,
                        });
                        return true;
                    }
                    if c == '"' {
                        return match &enums {
                            Some(v) => v.contains(&content),
                            None => true,
                        };
                    }
                    if (c as u32) < 0x20 {
                        return false;
                    }
                    if let Some(v) = &enums {
                        let mut p = content.clone();
                        p.push(c);
                        if !v.iter().any(|x| x.starts_with(&p)) {
                            return false;
                        }
                    } else if content.chars().count() >= MAX_STRING {
                        return false;
                    }
                    content.push(c);
                    self.stack.push(Frame::Str {
                        enums,
                        content,
                        esc: u8::from(c == '\\'),
                    });
                    return true;
                }
                Frame::Num {
                    int_only,
                    st,
                    digits,
                } => {
                    let next = match (st, c) {
                        (0, '0'..='9') => Some(1),
                        (1, '0'..='9') if digits < MAX_INT_DIGITS => Some(1),
                        (1, '.') if !int_only => Some(2),
                        (1 | 3, 'e' | 'E') if !int_only => Some(4),
                        (2 | 3, '0'..='9') if digits < 12 => Some(3),
                        (4, '+' | '-') => Some(5),
                        (4..=6, '0'..='9') if digits < 14 => Some(6),
                        _ => None,
                    };
                    if let Some(st) = next {
                        self.stack.push(Frame::Num {
                            int_only,
                            st,
                            digits: digits + 1,
                        });
                        return true;
                    }
                    if !matches!(st, 1 | 3 | 6) {
                        return false;
                    }
                    // The number ended: `c` belongs to what follows.
                }
            }
        }
    }

    fn start(&mut self, node: &Arc<Node>, c: char) -> bool {
        match &**node {
            Node::Obj(_) if c == '{' => {
                self.stack.push(Frame::ObjRest(node.clone(), 0));
                true
            }
            Node::Arr(item) if c == '[' => {
                self.stack.push(Frame::ArrStart(item.clone()));
                true
            }
            Node::Str(e) if c == '"' => {
                self.stack.push(Frame::Str {
                    enums: e.clone().map(Arc::new),
                    content: String::new(),
                    esc: 0,
                });
                true
            }
            Node::Int | Node::Num if c == '-' || c.is_ascii_digit() => {
                self.stack.push(Frame::Num {
                    int_only: matches!(**node, Node::Int),
                    st: if c == '-' { 0 } else { 1 },
                    digits: u8::from(c != '-'),
                });
                true
            }
            Node::Bool if c == 't' => {
                self.stack.push(lit("rue"));
                true
            }
            Node::Bool if c == 'f' => {
                self.stack.push(lit("alse"));
                true
            }
            Node::Null if c == 'n' => {
                self.stack.push(lit("ull"));
                true
            }
            Node::OneOf(alts) => {
                for a in alts {
                    let mut g = self.clone();
                    if g.start(a, c) {
                        *self = g;
                        return true;
                    }
                }
                false
            }
            _ => false,
        }
    }

    /// The text the answer must continue with (forced: no choice left), if any.
    fn forced_next(&self) -> String {
        match self.stack.last() {
            Some(Frame::Lit(s, i)) => s[*i..].to_string(),
            Some(Frame::ObjRest(node, next)) => match &**node {
                Node::Obj(props) => match props.get(*next) {
                    Some((k, _)) => {
                        let k = serde_json::to_string(k).unwrap_or_default();
                        format!("{}{k}:", if *next == 0 { "" } else { "," })
                    }
                    None => "}".into(),
                },
                _ => "}".into(),
            },
            Some(Frame::ArrStart(_)) | Some(Frame::ArrRest(..)) => "]".into(),
            Some(Frame::Value(node)) => default_text(node),
            Some(Frame::Str {
                enums,
                content,
                esc,
            }) => {
                let mut s = String::new();
                match esc {
                    1 => s.push('n'),
                    n if *n >= 2 => s.push_str(&"0".repeat((6 - n) as usize)),
                    _ => {}
                }
                if let Some(v) = enums {
                    if let Some(x) = v.iter().find(|x| x.starts_with(content.as_str())) {
                        s.push_str(&x[content.len()..]);
                    }
                }
                s.push('"');
                s
            }
            Some(Frame::Num { st, .. }) => {
                if matches!(st, 1 | 3 | 6) {
                    // A complete number: what follows decides; close the frame.
                    String::new()
                } else {
                    "0".into()
                }
            }
            None => String::new(),
        }
    }

    /// The text that completes the answer so far into JSON of the schema.
    pub fn closing(&self) -> String {
        let mut g = self.clone();
        let mut out = String::new();
        for _ in 0..256 {
            if g.stack.is_empty() {
                break;
            }
            let s = g.forced_next();
            if s.is_empty() {
                // A finished number on top: drop it.
                g.stack.pop();
                continue;
            }
            if !g.feed(&s) {
                break;
            }
            out.push_str(&s);
        }
        out
    }
}

fn default_text(node: &Node) -> String {
    match node {
        Node::Obj(props) => {
            let inner: Vec<String> = props
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}:{}",
                        serde_json::to_string(k).unwrap_or_default(),
                        default_text(v)
                    )
                })
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Node::Arr(_) => "[]".into(),
        Node::Str(Some(v)) => serde_json::to_string(&v[0]).unwrap_or_else(|_| "\"\"".into()),
        Node::Str(None) => "\"\"".into(),
        Node::Int | Node::Num => "0".into(),
        Node::Bool => "false".into(),
        Node::Null => "null".into(),
        Node::OneOf(a) => a
            .first()
            .map(|n| default_text(n))
            .unwrap_or_else(|| "null".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts() -> Value {
        json!({"type": "object", "properties": {"facts": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "entity": {"type": "string", "enum": ["master", "neko", "relationship"]},
                "importance": {"type": "integer"},
                "evidence": {"type": "array", "items": {"type": "integer"}},
                "target": {"type": ["string", "null"]}
            },
            "required": ["text", "entity", "importance", "evidence", "target"]
        }}}, "required": ["facts"]})
    }

    #[test]
    fn forced_keys_and_choices() {
        let mut g = SchemaGuard::new(&facts());
        let whole = r#"{"facts":[{"text":"Lives in \"Berlin\"","entity":"master","importance":7,"evidence":[1,2],"target":null},{"text":"x","entity":"neko","importance":-3,"evidence":[],"target":"F1"}]}"#;
        assert!(g.feed(whole), "{whole}");
        assert!(g.done());
        for bad in [
            "[",
            "{\"facx",
            "{\"facts\":[{\"tex\":",
            "{\"facts\":[{\"text\":\"a\",\"entity\":\"cat\"",
            "{\"facts\":[{\"text\":\"a\",\"entity\":\"neko\",\"importance\":1.5",
            "{ \"facts\"",
        ] {
            assert!(!SchemaGuard::new(&facts()).feed(bad), "{bad}");
        }
    }

    #[test]
    fn any_prefix_closes_into_valid_json() {
        let whole = r#"{"facts":[{"text":"Lives in Berlin","entity":"master","importance":7,"evidence":[1,2],"target":null}]}"#;
        for cut in 0..whole.len() {
            let mut g = SchemaGuard::new(&facts());
            assert!(g.feed(&whole[..cut]));
            let closed = format!("{}{}", &whole[..cut], g.closing());
            let v: Value =
                serde_json::from_str(&closed).unwrap_or_else(|e| panic!("{closed}: {e}"));
            assert!(v["facts"].is_array(), "{closed}");
        }
    }
}
