//! Checking a model file before anything is loaded: a GGUF, whole (every
//! tensor inside the file), of an architecture the engine runs, and small
//! enough for the memory the machine has free.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use candle_core::quantized::gguf_file;
use serde::Serialize;

use crate::model::Hparams;

/// Why a model file cannot be used (the message is shown to the user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileError {
    Missing(String),
    NotGguf(String),
    Truncated(String),
    Unsupported(String),
    TooLarge(String),
}

impl FileError {
    pub fn code(&self) -> &'static str {
        match self {
            FileError::Missing(_) => "model_missing",
            FileError::NotGguf(_) => "not_gguf",
            FileError::Truncated(_) => "model_truncated",
            FileError::Unsupported(_) => "model_unsupported",
            FileError::TooLarge(_) => "model_too_large",
        }
    }
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileError::Missing(m)
            | FileError::NotGguf(m)
            | FileError::Truncated(m)
            | FileError::Unsupported(m)
            | FileError::TooLarge(m) => f.write_str(m),
        }
    }
}

/// What the file says about itself.
#[derive(Clone, Debug, Serialize)]
pub struct Info {
    pub name: String,
    pub architecture: String,
    pub file_bytes: u64,
    pub tensor_bytes: u64,
    pub context_length: usize,
    pub layers: usize,
    #[serde(skip)]
    pub hparams: Option<Hparams>,
    #[serde(skip)]
    pub chat_template: Option<String>,
    /// Set by [`inspect`] for an encoder the engine does not run (e.g. BERT).
    #[serde(skip)]
    pub embedding_only: bool,
}

/// Bytes of memory available now (Linux: `MemAvailable`); `None` elsewhere.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// KV cache bytes of `hp` at `n_ctx` positions (f32 keys and values; a
/// sliding-window layer holds its window, the slack and one prompt chunk).
pub fn kv_bytes(hp: &Hparams, n_ctx: usize) -> u64 {
    let swa = (hp.n_swa + 2 * crate::model::SWA_SLACK + 256).min(n_ctx);
    let positions: usize = (0..hp.n_layer)
        .map(|i| if hp.sliding(i) { swa } else { n_ctx })
        .sum();
    (2 * hp.n_head_kv * hp.head_dim * positions * 4) as u64
}

/// Read the header of `path` and check it: GGUF magic, every tensor's data
/// inside the file, a supported architecture, and (with `n_ctx`) weights plus
/// cache within the memory available now.
pub fn inspect(path: &Path, n_ctx: Option<usize>) -> Result<Info, FileError> {
    let shown = path.display().to_string();
    let mut f = File::open(path)
        .map_err(|e| FileError::Missing(format!("cannot open the model file {shown}: {e}")))?;
    let len = f
        .metadata()
        .map_err(|e| FileError::Missing(format!("cannot read {shown}: {e}")))?
        .len();
    let mut magic = [0u8; 4];
    if f.read_exact(&mut magic).is_err() || &magic != b"GGUF" {
        return Err(FileError::NotGguf(format!(
            "{shown} is not a GGUF model file (it does not start with the GGUF signature)"
        )));
    }
    let mut f = File::open(path)
        .map_err(|e| FileError::Missing(format!("cannot open the model file {shown}: {e}")))?;
    let ct = gguf_file::Content::read(&mut f).map_err(|e| {
        FileError::Truncated(format!(
            "{shown} is damaged or truncated: its header cannot be read ({e})"
        ))
    })?;
    let mut tensor_bytes = 0u64;
    for (name, t) in &ct.tensor_infos {
        let bs = t.ggml_dtype.block_size().max(1) as u64;
        let size = (t.shape.elem_count() as u64).div_ceil(bs) * t.ggml_dtype.type_size() as u64;
        let end = ct
            .tensor_data_offset
            .saturating_add(t.offset)
            .saturating_add(size);
        if end > len {
            return Err(FileError::Truncated(format!(
                "{shown} is truncated: tensor {name} ends at byte {end}, the file has {len} (download it again)"
            )));
        }
        tensor_bytes += size;
    }
    let arch = ct
        .metadata
        .get("general.architecture")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_default();
    let name = ct
        .metadata
        .get("general.name")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
    let chat_template = ct
        .metadata
        .get("tokenizer.chat_template")
        .and_then(|v| v.to_string().ok())
        .cloned();
    let hp = Hparams::read(&ct).map_err(|e| FileError::Unsupported(format!("{shown}: {e}")))?;
    match ct
        .metadata
        .get("tokenizer.ggml.model")
        .and_then(|v| v.to_string().ok())
    {
        Some(m) if crate::tokenizer::MODELS.contains(&m.as_str()) => {
            let array = |k: &str| {
                ct.metadata
                    .get(k)
                    .and_then(|v| v.to_vec().ok())
                    .is_some_and(|a| !a.is_empty())
            };
            let need: &[&str] = if m == "gpt2" {
                &["tokenizer.ggml.tokens", "tokenizer.ggml.merges"]
            } else {
                &["tokenizer.ggml.tokens"]
            };
            if let Some(k) = need.iter().find(|k| !array(k)) {
                return Err(FileError::Unsupported(format!(
                    "{shown}: the tokenizer has no {k}"
                )));
            }
        }
        other => {
            return Err(FileError::Unsupported(format!(
                "{shown}: the tokenizer `{}` is not supported (byte-level BPE `gpt2` and SentencePiece `llama` are)",
                other.map(String::as_str).unwrap_or("none")
            )))
        }
    }
    if let Some(n) = n_ctx {
        let need = tensor_bytes + kv_bytes(&hp, n.min(hp.n_ctx_train.max(512)));
        if let Some(avail) = available_memory() {
            if need > avail {
                return Err(FileError::TooLarge(format!(
                    "{shown} needs about {} MiB of memory, the machine has {} MiB free",
                    need >> 20,
                    avail >> 20
                )));
            }
        }
    }
    Ok(Info {
        name,
        architecture: arch,
        file_bytes: len,
        tensor_bytes,
        context_length: hp.n_ctx_train,
        layers: hp.n_layer,
        hparams: Some(hp),
        chat_template,
        embedding_only: false,
    })
}
