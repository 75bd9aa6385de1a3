//! SentencePiece (`tokenizer.ggml.model = "llama"`) tokenizers built from the
//! GGUF metadata: Llama 2 originals, Mistral 7B, Gemma, Phi-3.
//!
//! Hand-written rather than a `tokenizers::Tokenizer` with a BPE model whose
//! merges are derived from the scores (HF's SentencePiece converter): that
//! route ranks merges by a fixed order of pairs, while llama.cpp — whose
//! output is what a GGUF file was tested with — merges the highest-scoring
//! *adjacent* pair first and breaks ties by position, adds the space prefix
//! after every special token, matches special tokens longest first (and
//! user-defined ones even in plain text), and falls back to `<0xXX>` byte
//! tokens per symbol. Doing exactly that takes fewer lines than bending the
//! BPE model to it, and `tests/local/test_architectures.py` compares the two
//! on the same files.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use candle_core::quantized::gguf_file;

/// `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
const NORMAL: u8 = 1;
const UNKNOWN: u8 = 2;
const CONTROL: u8 = 3;
const USER_DEFINED: u8 = 4;
const BYTE: u8 = 6;

/// The SentencePiece space, `▁`.
const SPACE: &str = "\u{2581}";

/// A SentencePiece vocabulary.
pub struct Spm {
    pieces: Vec<String>,
    scores: Vec<f32>,
    types: Vec<u8>,
    ids: HashMap<String, u32>,
    /// Control, user-defined and unknown tokens, longest text first: matched
    /// as whole tokens in the text before it is split into pieces.
    specials: Vec<u32>,
    /// Tokens after which whitespace is dropped (llama.cpp does this for
    /// Phi-3's special tokens, recognised by the model's name).
    rstrip: Vec<bool>,
    bytes: [Option<u32>; 256],
    unk: Option<u32>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    add_space_prefix: bool,
}

fn md<'a>(ct: &'a gguf_file::Content, k: &str) -> Option<&'a gguf_file::Value> {
    ct.metadata.get(k)
}

fn md_id(ct: &gguf_file::Content, k: &str) -> Option<u32> {
    let v = md(ct, k)?;
    v.to_u32()
        .ok()
        .or_else(|| v.to_i32().ok().and_then(|x| u32::try_from(x).ok()))
        .or_else(|| v.to_u64().ok().and_then(|x| u32::try_from(x).ok()))
}

fn md_bool(ct: &gguf_file::Content, k: &str) -> Option<bool> {
    md(ct, k).and_then(|v| v.to_bool().ok())
}

fn num_u8(v: &gguf_file::Value) -> u8 {
    use gguf_file::Value::*;
    let n: i64 = match v {
        U8(x) => *x as i64,
        I8(x) => *x as i64,
        U16(x) => *x as i64,
        I16(x) => *x as i64,
        U32(x) => *x as i64,
        I32(x) => *x as i64,
        U64(x) => *x as i64,
        I64(x) => *x,
        _ => 0,
    };
    u8::try_from(n).unwrap_or(0)
}

fn num_f32(v: &gguf_file::Value) -> f32 {
    v.to_f32()
        .or_else(|_| v.to_f64().map(|x| x as f32))
        .unwrap_or(0.0)
}

/// A piece of the text between special tokens, or a special token.
enum Frag {
    Text(usize, usize),
    Token(u32),
}

/// A symbol of the text being merged (a doubly linked list over `Vec`).
#[derive(Clone, Copy)]
struct Sym {
    prev: Option<usize>,
    next: Option<usize>,
    start: usize,
    len: usize,
}

/// A candidate merge of two adjacent symbols.
struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    len: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    /// The heap's top is the highest score, then the leftmost pair.
    fn cmp(&self, o: &Self) -> Ordering {
        self.score
            .total_cmp(&o.score)
            .then_with(|| o.left.cmp(&self.left))
    }
}

impl Spm {
    /// The vocabulary of a GGUF file with `tokenizer.ggml.model = "llama"`.
    pub fn from_gguf(ct: &gguf_file::Content) -> Result<Spm, String> {
        let tokens = md(ct, "tokenizer.ggml.tokens")
            .and_then(|v| v.to_vec().ok())
            .ok_or("the file has no tokenizer.ggml.tokens")?;
        let pieces: Vec<String> = tokens
            .iter()
            .map(|v| v.to_string().cloned().unwrap_or_default())
            .collect();
        if pieces.is_empty() || pieces.len() > u32::MAX as usize {
            return Err("the file's vocabulary is empty".into());
        }
        let n = pieces.len();
        let mut scores = vec![0f32; n];
        if let Some(s) = md(ct, "tokenizer.ggml.scores").and_then(|v| v.to_vec().ok()) {
            for (d, v) in scores.iter_mut().zip(s) {
                *d = num_f32(v);
            }
        }
        let mut types = vec![NORMAL; n];
        if let Some(t) = md(ct, "tokenizer.ggml.token_type").and_then(|v| v.to_vec().ok()) {
            for (d, v) in types.iter_mut().zip(t) {
                *d = num_u8(v);
            }
        }
        let mut ids = HashMap::with_capacity(n);
        for (i, p) in pieces.iter().enumerate() {
            ids.insert(p.clone(), i as u32);
        }
        let mut bytes = [None; 256];
        for (b, slot) in bytes.iter_mut().enumerate() {
            *slot = ids
                .get(&format!("<0x{b:02X}>"))
                .or_else(|| {
                    char::from_u32(b as u32)
                        .filter(|_| b < 128)
                        .and_then(|c| ids.get(&c.to_string()))
                })
                .copied();
        }
        let valid = |id: Option<u32>| id.filter(|&i| (i as usize) < n);
        let bos = valid(md_id(ct, "tokenizer.ggml.bos_token_id").or(Some(1)));
        let eos = valid(md_id(ct, "tokenizer.ggml.eos_token_id").or(Some(2)));
        let unk = valid(md_id(ct, "tokenizer.ggml.unknown_token_id").or(Some(0)));
        let mut specials: Vec<u32> = (0..n as u32)
            .filter(|&i| {
                matches!(types[i as usize], CONTROL | USER_DEFINED | UNKNOWN)
                    && !pieces[i as usize].is_empty()
            })
            .collect();
        specials.sort_by(|a, b| pieces[*b as usize].len().cmp(&pieces[*a as usize].len()));
        let mut rstrip = vec![false; n];
        let name = md(ct, "general.name")
            .and_then(|v| v.to_string().ok())
            .map(|s| s.to_ascii_lowercase())
            .unwrap_or_default();
        if name.contains("phi-3") || name.contains("phi3") {
            for &i in &specials {
                rstrip[i as usize] = true;
            }
            if let Some(&i) = ids.get("</s>") {
                rstrip[i as usize] = true;
            }
            for t in ["<unk>", "<s>", "<|endoftext|>"] {
                if let Some(&i) = ids.get(t) {
                    rstrip[i as usize] = false;
                }
            }
        }
        Ok(Spm {
            pieces,
            scores,
            types,
            ids,
            specials,
            rstrip,
            bytes,
            unk,
            bos,
            eos,
            add_bos: md_bool(ct, "tokenizer.ggml.add_bos_token").unwrap_or(true),
            add_eos: md_bool(ct, "tokenizer.ggml.add_eos_token").unwrap_or(false),
            add_space_prefix: md_bool(ct, "tokenizer.ggml.add_space_prefix").unwrap_or(true),
        })
    }

    pub fn vocab_size(&self) -> usize {
        self.pieces.len()
    }

    pub fn token_to_id(&self, t: &str) -> Option<u32> {
        self.ids.get(t).copied()
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.pieces.get(id as usize).cloned()
    }

    /// Whether `id` is a control or unknown token (no text unless asked for).
    pub fn is_control(&self, id: u32) -> bool {
        matches!(self.types.get(id as usize), Some(&CONTROL | &UNKNOWN))
    }

    /// The token ids of `text`: with `add_special` the BOS (and EOS) the
    /// file asks for; with `parse_special` control tokens written in the
    /// text are matched too (user-defined ones always are).
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let mut frags = if text.is_empty() {
            Vec::new()
        } else {
            vec![Frag::Text(0, text.len())]
        };
        for &id in &self.specials {
            let ty = self.types[id as usize];
            if !parse_special && ty != USER_DEFINED {
                continue;
            }
            frags = self.split_on(text, frags, id);
        }
        let mut out = Vec::new();
        let mut prev_special = true;
        if add_special && self.add_bos {
            out.extend(self.bos);
        }
        for f in frags {
            match f {
                Frag::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Frag::Text(a, b) => {
                    let mut s = String::with_capacity(b - a + 4);
                    if self.add_space_prefix && prev_special {
                        s.push(' ');
                    }
                    s.push_str(&text[a..b]);
                    let s = s.replace(' ', SPACE);
                    self.pieces_of(&s, &mut out);
                    prev_special = false;
                }
            }
        }
        if add_special && self.add_eos {
            out.extend(self.eos);
        }
        out
    }

    /// Split every text fragment at each occurrence of the special token `id`.
    fn split_on(&self, text: &str, frags: Vec<Frag>, id: u32) -> Vec<Frag> {
        let pat = self.pieces[id as usize].as_str();
        let rstrip = self.rstrip[id as usize];
        let mut out = Vec::with_capacity(frags.len());
        for f in frags {
            let Frag::Text(mut a, b) = f else {
                out.push(f);
                continue;
            };
            while let Some(at) = text[a..b].find(pat) {
                let at = a + at;
                if at > a {
                    out.push(Frag::Text(a, at));
                }
                out.push(Frag::Token(id));
                a = at + pat.len();
                if rstrip {
                    // C's isspace, as llama.cpp.
                    let space = |c: char| matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r');
                    a = b - text[a..b].trim_start_matches(space).len();
                }
            }
            if a < b {
                out.push(Frag::Text(a, b));
            }
        }
        out
    }

    /// SentencePiece's BPE over one text fragment (spaces already `▁`): the
    /// adjacent pair whose concatenation is the highest-scoring token is
    /// merged first (the leftmost on a tie) until no pair is a token; a
    /// symbol that is not a token is written as its byte tokens.
    fn pieces_of(&self, s: &str, out: &mut Vec<u32>) {
        let mut syms: Vec<Sym> = Vec::with_capacity(s.len());
        let starts: Vec<usize> = s.char_indices().map(|(i, _)| i).collect();
        for (k, &st) in starts.iter().enumerate() {
            let end = starts.get(k + 1).copied().unwrap_or(s.len());
            syms.push(Sym {
                prev: k.checked_sub(1),
                next: (k + 1 < starts.len()).then_some(k + 1),
                start: st,
                len: end - st,
            });
        }
        if syms.is_empty() {
            return;
        }
        let mut heap = BinaryHeap::new();
        let try_add =
            |heap: &mut BinaryHeap<Bigram>, syms: &[Sym], l: Option<usize>, r: Option<usize>| {
                let (Some(l), Some(r)) = (l, r) else { return };
                let (a, b) = (syms[l], syms[r]);
                let text = &s[a.start..a.start + a.len + b.len];
                if let Some(&id) = self.ids.get(text) {
                    heap.push(Bigram {
                        left: l,
                        right: r,
                        score: self.scores[id as usize],
                        len: text.len(),
                    });
                }
            };
        for i in 1..syms.len() {
            try_add(&mut heap, &syms, Some(i - 1), Some(i));
        }
        while let Some(bg) = heap.pop() {
            let (l, r) = (syms[bg.left], syms[bg.right]);
            // Outdated: one side was merged into something else since.
            if l.len == 0 || r.len == 0 || l.len + r.len != bg.len {
                continue;
            }
            syms[bg.left].len += r.len;
            syms[bg.right].len = 0;
            syms[bg.left].next = r.next;
            if let Some(n) = r.next {
                syms[n].prev = Some(bg.left);
            }
            let left = syms[bg.left];
            try_add(&mut heap, &syms, left.prev, Some(bg.left));
            try_add(&mut heap, &syms, Some(bg.left), left.next);
        }
        // Every merged symbol is a token (a merge needs one); what is left
        // unknown is a single character.
        let mut i = Some(0);
        while let Some(k) = i {
            let sym = syms[k];
            let text = &s[sym.start..sym.start + sym.len];
            match self.ids.get(text) {
                Some(&id) => out.push(id),
                None => {
                    for b in text.bytes() {
                        if let Some(id) = self.bytes[b as usize].or(self.unk) {
                            out.push(id);
                        }
                    }
                }
            }
            i = sym.next;
        }
    }

    /// The bytes token `id` stands for: `▁` as a space, `<0xXX>` as its
    /// byte; control and unknown tokens are empty unless `special`.
    pub fn piece(&self, id: u32, special: bool, out: &mut Vec<u8>) {
        let Some(p) = self.pieces.get(id as usize) else {
            return;
        };
        match self.types[id as usize] {
            CONTROL | UNKNOWN if special => out.extend_from_slice(p.as_bytes()),
            USER_DEFINED => out.extend_from_slice(p.as_bytes()),
            NORMAL => out.extend_from_slice(p.replace(SPACE, " ").as_bytes()),
            BYTE => {
                let hex = p.get(3..5).and_then(|h| u8::from_str_radix(h, 16).ok());
                if let Some(b) = hex {
                    out.push(b);
                }
            }
            _ => {}
        }
    }

    /// The text of `ids` (pieces concatenated; invalid UTF-8 replaced).
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> String {
        let mut b = Vec::new();
        for &id in ids {
            self.piece(id, !skip_special, &mut b);
        }
        String::from_utf8_lossy(&b).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(pieces: &[(&str, f32, u8)]) -> Spm {
        let mut ids = HashMap::new();
        for (i, p) in pieces.iter().enumerate() {
            ids.insert(p.0.to_string(), i as u32);
        }
        let mut bytes = [None; 256];
        for (b, slot) in bytes.iter_mut().enumerate() {
            *slot = ids.get(&format!("<0x{b:02X}>")).copied();
        }
        let n = pieces.len();
        let mut specials: Vec<u32> = (0..n as u32)
            .filter(|&i| matches!(pieces[i as usize].2, CONTROL | USER_DEFINED | UNKNOWN))
            .collect();
        specials.sort_by(|a, b| {
            pieces[*b as usize]
                .0
                .len()
                .cmp(&pieces[*a as usize].0.len())
        });
        Spm {
            pieces: pieces.iter().map(|p| p.0.to_string()).collect(),
            scores: pieces.iter().map(|p| p.1).collect(),
            types: pieces.iter().map(|p| p.2).collect(),
            ids,
            specials,
            rstrip: vec![false; n],
            bytes,
            unk: Some(0),
            bos: Some(1),
            eos: Some(2),
            add_bos: true,
            add_eos: false,
            add_space_prefix: true,
        }
    }

    #[test]
    fn merges_by_score_and_falls_back_to_bytes() {
        let mut p = vec![
            ("<unk>", 0.0, UNKNOWN),
            ("<s>", 0.0, CONTROL),
            ("</s>", 0.0, CONTROL),
        ];
        let bytes: Vec<String> = (0..256).map(|b| format!("<0x{b:02X}>")).collect();
        for b in &bytes {
            p.push((b.as_str(), 0.0, BYTE));
        }
        let base = p.len() as u32;
        p.extend([
            ("▁", -1.0, NORMAL),
            ("h", -2.0, NORMAL),
            ("i", -2.0, NORMAL),
            ("▁h", -3.0, NORMAL),
            ("hi", -1.5, NORMAL),
            ("▁hi", -4.0, NORMAL),
        ]);
        let v = vocab(&p);
        // "hi" (-1.5) merges before "▁h" (-3), then "▁"+"hi" is a token.
        assert_eq!(v.encode("hi", true, false), vec![1, base + 5]);
        // 'é' is no piece: its two UTF-8 bytes.
        assert_eq!(
            v.encode("hé", false, false),
            vec![base + 3, 3 + 0xC3, 3 + 0xA9]
        );
        assert_eq!(v.decode(&[1, base + 5, 0xC3 + 3, 0xA9 + 3], true), " hié");
        // Control tokens only with parse_special; a space prefix after each.
        assert_eq!(
            v.encode("hi</s>hi", false, true),
            vec![base + 5, 2, base + 5]
        );
    }
}
