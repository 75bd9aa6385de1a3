//! The curated models (docs/local-model.md, "Models"): GGUF chat models that
//! run on an ordinary laptop's CPU, and one embedding model. Pulled files go
//! to `<data>/models/<file>`. `COMPANIOND_MODEL_CATALOG` names a JSON file of
//! more entries (same fields), listed first — a mirror, or a test's own server.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One downloadable model.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CatalogModel {
    pub name: String,
    /// `chat` or `embedding`.
    pub kind: String,
    pub description: String,
    pub file: String,
    pub url: String,
    /// Bytes (what the free-space check asks for when the server does not say).
    pub size: u64,
    pub sha256: String,
    pub license: String,
}

fn m(
    name: &str,
    kind: &str,
    description: &str,
    url: &str,
    size: u64,
    sha256: &str,
    license: &str,
) -> CatalogModel {
    CatalogModel {
        name: name.into(),
        kind: kind.into(),
        description: description.into(),
        file: url.rsplit('/').next().unwrap_or(name).to_string(),
        url: url.into(),
        size,
        sha256: sha256.into(),
        license: license.into(),
    }
}

/// The built-in list.
pub fn builtin() -> Vec<CatalogModel> {
    vec![
        m(
            "qwen3-0.6b",
            "chat",
            "Qwen3 0.6B (Q4_K_M): the smallest that holds a conversation; fast on any laptop",
            "https://huggingface.co/MaziyarPanahi/Qwen3-0.6B-GGUF/resolve/main/Qwen3-0.6B.Q4_K_M.gguf",
            484_000_000,
            "dc4503da5d7cc7254055a86cd90e1a8c9d16c6ac71eb3a32b34bf48a1f4e0999",
            "Apache-2.0",
        ),
        m(
            "llama-3.2-1b-instruct",
            "chat",
            "Llama 3.2 1B Instruct (Q4_K_M): good chat for its size",
            "https://huggingface.co/hugging-quants/Llama-3.2-1B-Instruct-Q4_K_M-GGUF/resolve/main/llama-3.2-1b-instruct-q4_k_m.gguf",
            808_000_000,
            "1d0e9419ec4e12aef73ccf4ffd122703e94c48344a96bc7c5f0f2772c2152ce3",
            "Llama 3.2 Community License",
        ),
        m(
            "smollm2-1.7b-instruct",
            "chat",
            "SmolLM2 1.7B Instruct (Q4_K_M): small, fully open",
            "https://huggingface.co/HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF/resolve/main/smollm2-1.7b-instruct-q4_k_m.gguf",
            1_060_000_000,
            "decd2598bc2c8ed08c19adc3c8fdd461ee19ed5708679d1c54ef54a5a30d4f33",
            "Apache-2.0",
        ),
        m(
            "qwen3-1.7b",
            "chat",
            "Qwen3 1.7B (Q4_K_M): the best of the list on 8 GB laptops; many languages",
            "https://huggingface.co/MaziyarPanahi/Qwen3-1.7B-GGUF/resolve/main/Qwen3-1.7B.Q4_K_M.gguf",
            1_280_000_000,
            "ea2aa5f1cce3c8df81ae5fd292a6ed265b8393cc89534dc21fc5327cc974116a",
            "Apache-2.0",
        ),
        m(
            "llama-3.2-3b-instruct",
            "chat",
            "Llama 3.2 3B Instruct (Q4_K_M): better answers, needs about 3 GB of memory",
            "https://huggingface.co/hugging-quants/Llama-3.2-3B-Instruct-Q4_K_M-GGUF/resolve/main/llama-3.2-3b-instruct-q4_k_m.gguf",
            2_020_000_000,
            "c55a83bfb6396799337853ca69918a0b9bbb2917621078c34570bc17d20fd7a1",
            "Llama 3.2 Community License",
        ),
        m(
            "qwen3-embedding-0.6b",
            "embedding",
            "Qwen3 Embedding 0.6B (Q8_0): vectors for long-term memory recall",
            "https://huggingface.co/Qwen/Qwen3-Embedding-0.6B-GGUF/resolve/main/Qwen3-Embedding-0.6B-Q8_0.gguf",
            639_000_000,
            "06507c7b42688469c4e7298b0a1e16deff06caf291cf0a5b278c308249c3e439",
            "Apache-2.0",
        ),
    ]
}

/// The extra entries of `COMPANIOND_MODEL_CATALOG`, then the built-in list.
pub fn all() -> Vec<CatalogModel> {
    let mut out: Vec<CatalogModel> = std::env::var_os("COMPANIOND_MODEL_CATALOG")
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice::<Vec<CatalogModel>>(&b).ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|e| companiond_core::paths::safe_name(&e.file).is_ok())
        .collect();
    out.extend(builtin());
    out
}

/// The catalog entry named `name`.
pub fn find(name: &str) -> Option<CatalogModel> {
    all().into_iter().find(|e| e.name == name.trim())
}

/// `<data>/models`.
pub fn models_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models")
}

/// Where a pulled entry lies.
pub fn pulled_path(data_dir: &Path, e: &CatalogModel) -> PathBuf {
    models_dir(data_dir).join(&e.file)
}
