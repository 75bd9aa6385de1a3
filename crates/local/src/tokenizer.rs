//! The tokenizer of a GGUF model: byte-level BPE (`gpt2`, candle's
//! `TokenizerFromGguf` over the `tokenizers` crate) or SentencePiece
//! (`llama`, [`crate::spm`]), behind one small interface for the engine.

use candle_core::quantized::gguf_file;
use tokenizers::Tokenizer;

use crate::spm::Spm;

/// The tokenizer models the engine reads (`tokenizer.ggml.model`).
pub const MODELS: [&str; 2] = ["gpt2", "llama"];

pub enum Tok {
    Bpe(Box<Tokenizer>),
    Spm(Box<Spm>),
}

/// The state of streamed decoding: each token's new text once it is whole.
#[derive(Default)]
pub struct Stream {
    window: Vec<u32>,
    prefix: String,
    prefix_at: usize,
    /// SentencePiece: bytes of a character not yet complete.
    pending: Vec<u8>,
}

impl Tok {
    pub fn from_gguf(ct: &gguf_file::Content) -> Result<Tok, String> {
        let kind = ct
            .metadata
            .get("tokenizer.ggml.model")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        match kind.as_str() {
            "llama" => Ok(Tok::Spm(Box::new(Spm::from_gguf(ct)?))),
            "gpt2" => {
                use candle_core::quantized::tokenizer::TokenizerFromGguf;
                let mut t = Tokenizer::from_gguf(ct).map_err(|e| e.to_string())?;
                let pre = ct
                    .metadata
                    .get("tokenizer.ggml.pre")
                    .and_then(|v| v.to_string().ok())
                    .map(String::as_str)
                    .unwrap_or("gpt2");
                gpt2_pre_tokenizer(&mut t, pre)?;
                Ok(Tok::Bpe(Box::new(t)))
            }
            other => Err(format!("the tokenizer `{other}` is not supported")),
        }
    }

    /// The ids of a prompt (special tokens written in it are matched). With
    /// `add_special`, the BOS/EOS the file asks for: a SentencePiece
    /// prompt gets its BOS unless it starts with one already.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>, String> {
        match self {
            Tok::Bpe(t) => t
                .encode(text, add_special)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| e.to_string()),
            Tok::Spm(s) => {
                let mut ids = s.encode(text, false, true);
                if add_special && s.add_bos {
                    if let Some(b) = s.bos.filter(|b| ids.first() != Some(b)) {
                        ids.insert(0, b);
                    }
                }
                if add_special && s.add_eos {
                    ids.extend(s.eos);
                }
                Ok(ids)
            }
        }
    }

    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, String> {
        match self {
            Tok::Bpe(t) => t.decode(ids, skip_special).map_err(|e| e.to_string()),
            Tok::Spm(s) => Ok(s.decode(ids, skip_special)),
        }
    }

    pub fn token_to_id(&self, t: &str) -> Option<u32> {
        match self {
            Tok::Bpe(k) => k.token_to_id(t),
            Tok::Spm(s) => s.token_to_id(t),
        }
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        match self {
            Tok::Bpe(k) => k.id_to_token(id),
            Tok::Spm(s) => s.id_to_token(id),
        }
    }

    pub fn vocab_size(&self) -> usize {
        match self {
            Tok::Bpe(k) => k.get_vocab_size(true),
            Tok::Spm(s) => s.vocab_size(),
        }
    }

    /// The new text of `next` after the tokens already streamed (special
    /// tokens skipped); `None` while a character's bytes are incomplete.
    /// `all` is every token of the reply so far, `next` included (used
    /// once when the BPE window no longer decodes to its prefix).
    pub fn step(
        &self,
        st: &mut Stream,
        next: u32,
        all: &[u32],
        shown: &str,
    ) -> Result<Option<String>, String> {
        match self {
            Tok::Bpe(t) => {
                // The new text, decoded from the last few tokens only:
                // decoding the whole reply each token cost a token's time in
                // string work by the end of a long reply.
                let r = tokenizers::tokenizer::step_decode_stream(
                    t,
                    vec![next],
                    true,
                    &mut st.window,
                    &mut st.prefix,
                    &mut st.prefix_at,
                );
                match r {
                    Ok(d) => Ok(d),
                    // A window that no longer decodes to its prefix: the new
                    // text comes from the whole reply this once.
                    Err(_) => {
                        st.window.clear();
                        st.prefix.clear();
                        st.prefix_at = 0;
                        let whole = t.decode(all, true).map_err(|e| e.to_string())?;
                        Ok(whole
                            .strip_prefix(shown)
                            .filter(|d| !d.is_empty() && !whole.ends_with('\u{FFFD}'))
                            .map(str::to_string))
                    }
                }
            }
            Tok::Spm(s) => {
                s.piece(next, false, &mut st.pending);
                Ok(take_utf8(&mut st.pending))
            }
        }
    }
}

/// candle's pipeline for the GPT-2-style pre-tokenizers (every `pre` but
/// Qwen2's and Llama 3's) is `ByteLevel` with a space added before the text —
/// and before every piece between special tokens, so a ChatML prompt read
/// `<|im_start|>` ` system` where llama.cpp (and the model's training) has
/// `system`. Replaced by llama.cpp's split: no added space, and for the
/// `pre` types that llama.cpp splits digits for (SmolLM, StarCoder, ...)
/// each digit on its own first.
fn gpt2_pre_tokenizer(t: &mut Tokenizer, pre: &str) -> Result<(), String> {
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;
    use tokenizers::pre_tokenizers::sequence::Sequence;
    use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
    use tokenizers::tokenizer::SplitDelimiterBehavior;
    if matches!(pre, "qwen2" | "llama3" | "smaug-bpe" | "lfm2") {
        return Ok(());
    }
    let byte_level = ByteLevel::new(false, true, true);
    let digits = matches!(
        pre,
        "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b"
    );
    if digits {
        let split = Split::new(
            SplitPattern::Regex(r"\p{N}".into()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| e.to_string())?;
        t.with_pre_tokenizer(Some(Sequence::new(vec![split.into(), byte_level.into()])));
    } else {
        t.with_pre_tokenizer(Some(byte_level));
    }
    Ok(())
}

/// The complete characters at the start of `buf` (removed from it); bytes
/// that can never be UTF-8 become U+FFFD, an unfinished character stays.
fn take_utf8(buf: &mut Vec<u8>) -> Option<String> {
    let mut out = String::new();
    loop {
        match std::str::from_utf8(buf) {
            Ok(s) => {
                out.push_str(s);
                buf.clear();
                break;
            }
            Err(e) => {
                let ok = e.valid_up_to();
                out.push_str(&String::from_utf8_lossy(&buf[..ok]));
                match e.error_len() {
                    Some(bad) => {
                        out.push('\u{FFFD}');
                        buf.drain(..ok + bad);
                    }
                    None => {
                        buf.drain(..ok);
                        break;
                    }
                }
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn utf8_in_pieces() {
        let mut b = "é".as_bytes()[..1].to_vec();
        assert_eq!(super::take_utf8(&mut b), None);
        b.push("é".as_bytes()[1]);
        b.push(b'x');
        assert_eq!(super::take_utf8(&mut b).as_deref(), Some("éx"));
        b.extend([0xFF, b'y']);
        assert_eq!(super::take_utf8(&mut b).as_deref(), Some("\u{FFFD}y"));
        assert!(b.is_empty());
    }
}
