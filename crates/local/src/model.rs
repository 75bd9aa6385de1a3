//! The transformer of a GGUF chat model on the CPU (candle): the Llama family
//! (`llama` — Llama 2/3, SmolLM, Mistral —, `qwen2`, `qwen3`), Gemma
//! (`gemma`, `gemma2`, `gemma3`) and Phi-3 (`phi3`), quantized weights as
//! they lie in the file, a KV cache that can be cut back to a prefix
//! (docs/local-model.md, "Prefix cache").
//!
//! The architectures differ in a few places, each a field of [`Hparams`] or
//! an optional tensor of a [`Layer`], all read as llama.cpp reads them:
//! Gemma scales the embeddings by sqrt(n_embd), uses GELU (tanh) for the
//! gate and stores its norm weights with the +1 already added; Gemma 2 caps
//! attention and final logits with tanh, adds post-attention and post-FFN
//! norms and attends within a sliding window on alternate layers; Gemma 3
//! has per-head Q/K norms, five sliding layers in six (RoPE base 10000 on
//! those) and no logit caps; Phi-3 fuses Q/K/V into `attn_qkv` and gate/up
//! into `ffn_up`, and may scale RoPE by per-dimension factors.

use std::fs::File;
use std::path::Path;

use candle_core::quantized::{gguf_file, QTensor};
use candle_core::{DType, Device, Result, Tensor};

use crate::mat::{matmul, Mat};

/// Metadata read once from the file.
#[derive(Clone, Debug)]
pub struct Hparams {
    pub arch: String,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub n_ctx_train: usize,
    pub eps: f64,
    pub rope_base: f32,
    /// NeoX-style (halves) rotary embedding rather than interleaved pairs.
    pub rope_neox: bool,
    /// RoPE frequency scale of the global layers (1 / linear scaling factor).
    pub rope_scale: f32,
    /// RoPE base of the sliding-window layers (Gemma 3: 10000).
    pub rope_base_swa: f32,
    /// Multiplies RoPE's cos/sin (`rope.scaling.attn_factor`, Phi-3 long context).
    pub rope_attn_factor: f32,
    /// The context RoPE factors were trained for (long factors past it).
    pub n_ctx_orig: usize,
    /// Sliding window (positions a query sees, itself included); 0: none.
    pub n_swa: usize,
    /// Layer `i` is a sliding-window layer when `i % p < p - 1` (0: none).
    pub swa_pattern: usize,
    /// The attention scale (1/sqrt(head_dim) but for the 27B Gemmas).
    pub attn_scale: f64,
    /// Scale Q before `Q·K` (Gemma, as llama.cpp) rather than the product.
    pub prescale_q: bool,
    /// Embeddings multiplied by this (Gemma: sqrt(n_embd)).
    pub embd_scale: Option<f64>,
    /// `cap * tanh(x / cap)` of the attention scores (Gemma 2).
    pub attn_softcap: Option<f64>,
    /// `cap * tanh(x / cap)` of the logits (Gemma 2).
    pub final_softcap: Option<f64>,
    /// GELU (tanh approximation) for the gate instead of SiLU (Gemma).
    pub gelu: bool,
}

impl Hparams {
    /// Whether layer `i` attends within the sliding window.
    pub fn sliding(&self, i: usize) -> bool {
        self.swa_pattern > 0 && i % self.swa_pattern < self.swa_pattern - 1
    }
}

fn md_u(ct: &gguf_file::Content, k: &str) -> Option<usize> {
    let v = ct.metadata.get(k)?;
    v.to_u32()
        .map(|x| x as usize)
        .or_else(|_| v.to_u64().map(|x| x as usize))
        .or_else(|_| v.to_i32().map(|x| x.max(0) as usize))
        .ok()
}

fn md_f(ct: &gguf_file::Content, k: &str) -> Option<f64> {
    let v = ct.metadata.get(k)?;
    v.to_f32().map(f64::from).or_else(|_| v.to_f64()).ok()
}

/// The architectures this engine runs.
pub const ARCHITECTURES: [&str; 7] = [
    "llama", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3",
];

impl Hparams {
    pub fn read(ct: &gguf_file::Content) -> Result<Hparams> {
        let arch = ct
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        if !ARCHITECTURES.contains(&arch.as_str()) {
            candle_core::bail!(
                "the model's architecture `{arch}` is not supported (supported: {})",
                ARCHITECTURES.join(", ")
            );
        }
        let need = |k: &str| {
            md_u(ct, &format!("{arch}.{k}"))
                .filter(|n| *n > 0)
                .ok_or_else(|| candle_core::Error::Msg(format!("missing metadata {arch}.{k}")))
        };
        let n_embd = need("embedding_length")?;
        let n_head = need("attention.head_count")?;
        let n_head_kv = md_u(ct, &format!("{arch}.attention.head_count_kv")).unwrap_or(n_head);
        let head_dim = md_u(ct, &format!("{arch}.attention.key_length"))
            .or_else(|| md_u(ct, &format!("{arch}.rope.dimension_count")))
            .unwrap_or(n_embd / n_head);
        if n_head_kv == 0
            || !n_head.is_multiple_of(n_head_kv)
            || head_dim == 0
            || !head_dim.is_multiple_of(2)
        {
            candle_core::bail!("inconsistent attention sizes in the model's metadata");
        }
        if md_u(ct, &format!("{arch}.rope.dimension_count")).is_some_and(|r| r != head_dim) {
            candle_core::bail!("partial rotary embeddings are not supported");
        }
        let n_layer = need("block_count")?;
        let f = |k: &str| md_f(ct, &format!("{arch}.{k}"));
        let linear = ct
            .metadata
            .get(&format!("{arch}.rope.scaling.type"))
            .and_then(|v| v.to_string().ok())
            .is_none_or(|t| t == "linear");
        let rope_factor = f("rope.scaling.factor").filter(|x| linear && *x > 0.0);
        let n_ctx_train = md_u(ct, &format!("{arch}.context_length")).unwrap_or(4096);
        let rope_base = f("rope.freq_base").unwrap_or(10_000.0) as f32;
        let gemma = arch.starts_with("gemma");
        // llama.cpp's Gemma 2 and 3 scale by n_embd/n_head for the 27B sizes.
        let big = (arch == "gemma2" && n_layer == 46) || (arch == "gemma3" && n_layer == 62);
        let attn_scale = if big {
            1.0 / ((n_embd / n_head) as f64).sqrt()
        } else {
            1.0 / (head_dim as f64).sqrt()
        };
        let (n_swa, swa_pattern) = match arch.as_str() {
            "gemma2" => (
                md_u(ct, &format!("{arch}.attention.sliding_window")).unwrap_or(4096),
                2,
            ),
            "gemma3" => (
                md_u(ct, &format!("{arch}.attention.sliding_window")).unwrap_or(0),
                6,
            ),
            // Phi-3's window is ignored, as llama.cpp does (its GGUFs do not
            // say which layers use it).
            _ => (0, 0),
        };
        let positive = |x: Option<f64>| x.filter(|c| *c > 0.0);
        Ok(Hparams {
            n_layer,
            n_embd,
            n_head,
            n_head_kv,
            head_dim,
            n_ctx_train,
            eps: f("attention.layer_norm_rms_epsilon").unwrap_or(1e-5),
            rope_base,
            rope_neox: arch != "llama",
            rope_scale: rope_factor.map_or(1.0, |x| (1.0 / x) as f32),
            rope_base_swa: if arch == "gemma3" {
                10_000.0
            } else {
                rope_base
            },
            rope_attn_factor: f("rope.scaling.attn_factor").unwrap_or(1.0) as f32,
            n_ctx_orig: md_u(ct, &format!("{arch}.rope.scaling.original_context_length"))
                .unwrap_or(n_ctx_train),
            n_swa,
            swa_pattern: if n_swa > 0 { swa_pattern } else { 0 },
            attn_scale,
            prescale_q: gemma,
            embd_scale: gemma.then(|| (n_embd as f64).sqrt()),
            attn_softcap: if arch == "gemma2" {
                positive(f("attn_logit_softcapping").or(Some(50.0)))
            } else {
                None
            },
            final_softcap: if arch == "gemma2" {
                positive(f("final_logit_softcapping").or(Some(30.0)))
            } else {
                None
            },
            gelu: gemma,
            arch,
        })
    }
}

/// The Q, K and V projections: three matrices, or one (Phi-3's `attn_qkv`).
enum Qkv {
    Split { wq: Mat, wk: Mat, wv: Mat },
    Fused(Mat),
}

struct Layer {
    qkv: Qkv,
    wo: Mat,
    bq: Option<Tensor>,
    bk: Option<Tensor>,
    bv: Option<Tensor>,
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    attn_norm: Tensor,
    ffn_norm: Tensor,
    /// Gemma 2/3: norms of the attention's and the FFN's outputs.
    post_attn_norm: Option<Tensor>,
    post_ffn_norm: Option<Tensor>,
    /// `None`: gate and up are one matrix (Phi-3's `ffn_up`, gate first).
    w_gate: Option<Mat>,
    w_up: Mat,
    w_down: Mat,
    /// Attends within the sliding window, with the second RoPE table.
    sliding: bool,
    /// Keys and values of the positions seen so far: (1, n_head_kv, seq, head_dim).
    cache: Option<(Tensor, Tensor)>,
}

/// A loaded model and its KV cache.
pub struct Model {
    pub hp: Hparams,
    /// The CPU, or a GPU with the `cuda` or `metal` feature ([`crate::mat::device`]).
    dev: Device,
    embd: QTensor,
    layers: Vec<Layer>,
    norm: Tensor,
    output: Mat,
    /// RoPE tables (cos, sin): the global layers', then the sliding ones'.
    ropes: Vec<(Tensor, Tensor)>,
    /// Window the cache tables were built for.
    pub n_ctx: usize,
    /// Positions held in the KV cache.
    pub cached: usize,
    /// The first position the sliding-window layers still hold (they drop
    /// what no query can see any more, but [`SWA_SLACK`]).
    swa_from: usize,
}

/// Positions a sliding-window layer keeps beyond its window, so that the
/// prefix cache can still cut back that far (a chat's new prompt differs from
/// the last one near its end); it drops the older ones `SWA_SLACK` at a time.
pub const SWA_SLACK: usize = 512;

impl Model {
    /// Load the tensors of `path` (already checked by [`crate::gguf::inspect`]).
    pub fn load(path: &Path, n_ctx: usize) -> Result<Model> {
        let dev = crate::mat::device();
        let mut f = File::open(path)?;
        let ct = gguf_file::Content::read(&mut f)?;
        let hp = Hparams::read(&ct)?;
        let mut qt = |name: &str| ct.tensor(&mut f, name, &dev);
        let embd = qt("token_embd.weight")?;
        let norm = qt("output_norm.weight")?.dequantize(&dev)?;
        let output = match qt("output.weight") {
            Ok(t) => matmul(t)?,
            Err(_) => matmul(qt("token_embd.weight")?)?,
        };
        let mut layers = Vec::with_capacity(hp.n_layer);
        for i in 0..hp.n_layer {
            let p = format!("blk.{i}");
            let mut opt = |n: &str| -> Result<Option<Tensor>> {
                match qt(&format!("{p}.{n}")) {
                    Ok(t) => Ok(Some(t.dequantize(&dev)?)),
                    Err(_) => Ok(None),
                }
            };
            let bq = opt("attn_q.bias")?;
            let bk = opt("attn_k.bias")?;
            let bv = opt("attn_v.bias")?;
            let q_norm = opt("attn_q_norm.weight")?;
            let k_norm = opt("attn_k_norm.weight")?;
            let post_attn_norm = opt("post_attention_norm.weight")?;
            let post_ffn_norm = opt("post_ffw_norm.weight")?;
            let mut q = |n: &str| qt(&format!("{p}.{n}"));
            let qkv = match q("attn_qkv.weight") {
                Ok(w) => {
                    let rows = w.shape().dims().first().copied().unwrap_or(0);
                    let want = (hp.n_head + 2 * hp.n_head_kv) * hp.head_dim;
                    if rows != want {
                        candle_core::bail!("attn_qkv has {rows} rows, the attention needs {want}");
                    }
                    Qkv::Fused(matmul(w)?)
                }
                Err(_) => Qkv::Split {
                    wq: matmul(q("attn_q.weight")?)?,
                    wk: matmul(q("attn_k.weight")?)?,
                    wv: matmul(q("attn_v.weight")?)?,
                },
            };
            let w_gate = match q("ffn_gate.weight") {
                Ok(w) => Some(matmul(w)?),
                Err(_) => None,
            };
            let w_up = q("ffn_up.weight")?;
            if w_gate.is_none() && w_up.shape().dims().first().is_none_or(|r| r % 2 != 0) {
                candle_core::bail!("ffn_up has no gate half");
            }
            layers.push(Layer {
                qkv,
                wo: matmul(q("attn_output.weight")?)?,
                attn_norm: q("attn_norm.weight")?.dequantize(&dev)?,
                ffn_norm: q("ffn_norm.weight")?.dequantize(&dev)?,
                post_attn_norm,
                post_ffn_norm,
                w_gate,
                w_up: matmul(w_up)?,
                w_down: matmul(q("ffn_down.weight")?)?,
                bq,
                bk,
                bv,
                q_norm,
                k_norm,
                sliding: hp.sliding(i),
                cache: None,
            });
        }
        // Per-dimension RoPE divisors: Llama 3's `rope_freqs`, Phi-3's
        // short and long factors (long past the original context).
        let factors = match qt("rope_freqs.weight") {
            Ok(t) => Some(t),
            Err(_) if n_ctx > hp.n_ctx_orig => qt("rope_factors_long.weight").ok(),
            Err(_) => qt("rope_factors_short.weight").ok(),
        };
        let factors = match factors {
            Some(t) => {
                let v = t.dequantize(&dev)?.flatten_all()?.to_vec1::<f32>()?;
                if v.len() != hp.head_dim / 2 || v.iter().any(|x| x.is_nan() || *x <= 0.0) {
                    candle_core::bail!("the RoPE factors do not fit the attention heads");
                }
                Some(v)
            }
            None => None,
        };
        let mut ropes = vec![rope_table(
            &hp,
            hp.rope_base,
            hp.rope_scale,
            factors.as_deref(),
            n_ctx,
            &dev,
        )?];
        if layers.iter().any(|l| l.sliding) {
            ropes.push(rope_table(
                &hp,
                hp.rope_base_swa,
                1.0,
                factors.as_deref(),
                n_ctx,
                &dev,
            )?);
        }
        Ok(Model {
            dev,
            ropes,
            hp,
            embd,
            layers,
            norm,
            output,
            n_ctx,
            cached: 0,
            swa_from: 0,
        })
    }

    /// Forget the cache past `n` positions (the prefix kept for the next
    /// call); the positions actually kept: `n`, or 0 when the sliding-window
    /// layers no longer hold the window the next position needs.
    pub fn truncate(&mut self, n: usize) -> Result<usize> {
        if n >= self.cached && n > 0 {
            return Ok(self.cached);
        }
        let n = if self.swa_from > 0 && n + 1 < self.swa_from + self.hp.n_swa {
            0
        } else {
            n
        };
        let from = self.swa_from;
        for l in &mut self.layers {
            let first = if l.sliding { from } else { 0 };
            l.cache = match (n, l.cache.take()) {
                (0, _) | (_, None) => None,
                (n, Some((k, v))) => Some((
                    k.narrow(2, 0, n - first)?.contiguous()?,
                    v.narrow(2, 0, n - first)?.contiguous()?,
                )),
            };
        }
        if n == 0 {
            self.swa_from = 0;
        }
        self.cached = n;
        Ok(n)
    }

    /// Run `tokens` after the cached positions; the logits of the last one
    /// (or, with `all_hidden`, the final hidden states of every position).
    pub fn forward(&mut self, tokens: &[u32], all_hidden: bool) -> Result<Tensor> {
        let dev = self.dev.clone();
        let t = tokens.len();
        let start = self.cached;
        if t == 0 || start + t > self.n_ctx {
            candle_core::bail!(
                "the prompt ({} tokens) does not fit the context window ({})",
                start + t,
                self.n_ctx
            );
        }
        let ids = Tensor::new(tokens, &dev)?;
        let mut x = self.embd.embedding(&ids)?.unsqueeze(0)?; // (1, t, d)
        if let Some(s) = self.hp.embd_scale {
            x = (x * s)?;
        }
        let total = start + t;
        let mask = if t > 1 {
            Some(causal_mask(t, start, 0, None, &dev)?)
        } else {
            None
        };
        // Sliding layers see the keys from `lo` on (the window of the
        // chunk's first query); a chunk of many queries also masks per query.
        let lo = (start + 1).saturating_sub(self.hp.n_swa.max(1));
        let lo = if self.hp.n_swa > 0 { lo } else { 0 };
        // What the sliding layers keep after this call: their window and
        // the slack, dropped `SWA_SLACK` positions at a time, never a key a
        // query of this call needs.
        let old_from = self.swa_from;
        if lo < old_from {
            candle_core::bail!("the sliding-window cache lost positions it needs");
        }
        let swa_from = if self.hp.n_swa > 0 && total - old_from > self.hp.n_swa + 2 * SWA_SLACK {
            (total - self.hp.n_swa - SWA_SLACK).min(lo).min(start)
        } else {
            old_from
        };
        let swa_mask = if t > 1 && self.layers.iter().any(|l| l.sliding) {
            Some(causal_mask(t, start, lo, Some(self.hp.n_swa), &dev)?)
        } else {
            None
        };
        let at = |i: usize| -> Result<Option<(Tensor, Tensor)>> {
            match self.ropes.get(i) {
                Some((c, s)) => Ok(Some((c.narrow(0, start, t)?, s.narrow(0, start, t)?))),
                None => Ok(None),
            }
        };
        let (rope_global, rope_swa) = (at(0)?, at(1)?);
        let hp = &self.hp;
        let scale = hp.attn_scale;
        let rep = hp.n_head / hp.n_head_kv;
        let (nq, nkv) = (hp.n_head * hp.head_dim, hp.n_head_kv * hp.head_dim);
        for l in &mut self.layers {
            let h = candle_nn::ops::rms_norm(&x, &l.attn_norm, hp.eps as f32)?;
            let add = |y: Tensor, b: &Option<Tensor>| match b {
                Some(b) => y.broadcast_add(b),
                None => Ok(y),
            };
            let (q, k, v) = match &l.qkv {
                Qkv::Split { wq, wk, wv } => (wq.forward(&h)?, wk.forward(&h)?, wv.forward(&h)?),
                Qkv::Fused(w) => {
                    let y = w.forward(&h)?;
                    (
                        y.narrow(2, 0, nq)?.contiguous()?,
                        y.narrow(2, nq, nkv)?.contiguous()?,
                        y.narrow(2, nq + nkv, nkv)?.contiguous()?,
                    )
                }
            };
            let q = add(q, &l.bq)?;
            let k = add(k, &l.bk)?;
            let v = add(v, &l.bv)?;
            let mut q = q
                .reshape((1, t, hp.n_head, hp.head_dim))?
                .transpose(1, 2)?
                .contiguous()?;
            let mut k = k
                .reshape((1, t, hp.n_head_kv, hp.head_dim))?
                .transpose(1, 2)?
                .contiguous()?;
            let v = v
                .reshape((1, t, hp.n_head_kv, hp.head_dim))?
                .transpose(1, 2)?;
            if let Some(n) = &l.q_norm {
                q = candle_nn::ops::rms_norm(&q, n, hp.eps as f32)?;
            }
            if let Some(n) = &l.k_norm {
                k = candle_nn::ops::rms_norm(&k, n, hp.eps as f32)?;
            }
            let rope = if l.sliding { &rope_swa } else { &rope_global };
            let Some((cos, sin)) = rope.as_ref().or(rope_global.as_ref()) else {
                candle_core::bail!("no RoPE table");
            };
            let (q, k) = if hp.rope_neox {
                (
                    candle_nn::rotary_emb::rope(&q, cos, sin)?,
                    candle_nn::rotary_emb::rope(&k, cos, sin)?,
                )
            } else {
                (
                    candle_nn::rotary_emb::rope_i(&q, cos, sin)?,
                    candle_nn::rotary_emb::rope_i(&k, cos, sin)?,
                )
            };
            let (k, v) = match l.cache.take() {
                // A sliding layer drops the positions before `swa_from`
                // (a view: the concatenation copies only what is kept).
                Some((ck, cv)) if l.sliding && swa_from > old_from => {
                    let (cut, len) = (swa_from - old_from, start - swa_from);
                    let (ck, cv) = (ck.narrow(2, cut, len)?, cv.narrow(2, cut, len)?);
                    (Tensor::cat(&[&ck, &k], 2)?, Tensor::cat(&[&cv, &v], 2)?)
                }
                Some((ck, cv)) => (Tensor::cat(&[&ck, &k], 2)?, Tensor::cat(&[&cv, &v], 2)?),
                None => (k, v.contiguous()?),
            };
            l.cache = Some((k.clone(), v.clone()));
            let (k, v, mask) = if l.sliding {
                let at = lo - swa_from;
                (
                    k.narrow(2, at, total - lo)?,
                    v.narrow(2, at, total - lo)?,
                    &swa_mask,
                )
            } else {
                (k, v, &mask)
            };
            let keys = total - if l.sliding { lo } else { 0 };
            // Grouped-query attention: each KV head serves `rep` query heads.
            let q = q.reshape((1, hp.n_head_kv, rep * t, hp.head_dim))?;
            let mut att = if hp.prescale_q {
                (q * scale)?.matmul(&k.t()?)?
            } else {
                (q.matmul(&k.t()?)? * scale)? // (1, kv, rep*t, keys)
            };
            if let Some(cap) = hp.attn_softcap {
                att = ((att / cap)?.tanh()? * cap)?;
            }
            let att = match mask {
                Some(m) => att
                    .reshape((1, hp.n_head_kv, rep, t, keys))?
                    .broadcast_add(m)?
                    .reshape((1, hp.n_head_kv, rep * t, keys))?,
                None => att,
            };
            let att = candle_nn::ops::softmax_last_dim(&att)?;
            let y = att.matmul(&v.contiguous()?)?; // (1, kv, rep*t, hd)
            let y = y
                .reshape((1, hp.n_head, t, hp.head_dim))?
                .transpose(1, 2)?
                .reshape((1, t, hp.n_head * hp.head_dim))?;
            let mut y = l.wo.forward(&y)?;
            if let Some(n) = &l.post_attn_norm {
                y = candle_nn::ops::rms_norm(&y, n, hp.eps as f32)?;
            }
            x = (x + y)?;
            let h = candle_nn::ops::rms_norm(&x, &l.ffn_norm, hp.eps as f32)?;
            let (g, u) = match &l.w_gate {
                Some(w) => (w.forward(&h)?, l.w_up.forward(&h)?),
                None => {
                    let gu = l.w_up.forward(&h)?;
                    let n = gu.dim(2)? / 2;
                    (gu.narrow(2, 0, n)?, gu.narrow(2, n, n)?)
                }
            };
            let g = if hp.gelu {
                g.gelu()?
            } else {
                candle_nn::ops::silu(&g)?
            };
            let mut y = l.w_down.forward(&(g * u)?)?;
            if let Some(n) = &l.post_ffn_norm {
                y = candle_nn::ops::rms_norm(&y, n, hp.eps as f32)?;
            }
            x = (x + y)?;
        }
        self.cached = total;
        self.swa_from = swa_from;
        let x = candle_nn::ops::rms_norm(&x, &self.norm, hp.eps as f32)?;
        if all_hidden {
            return x.squeeze(0);
        }
        let last = x.narrow(1, t - 1, 1)?;
        let logits = self.output.forward(&last)?.flatten_all()?;
        let logits = match hp.final_softcap {
            Some(cap) => ((logits / cap)?.tanh()? * cap)?,
            None => logits,
        };
        logits.to_dtype(DType::F32)
    }

    /// Mean of the final hidden states of `tokens`, L2-normalised (the cache
    /// is cleared before and after).
    pub fn embed(&mut self, tokens: &[u32], last_token: bool) -> Result<Vec<f32>> {
        self.truncate(0)?;
        let h = self.forward(tokens, true);
        self.truncate(0)?;
        let h = h?;
        let v = if last_token {
            h.narrow(0, tokens.len() - 1, 1)?.squeeze(0)?
        } else {
            h.mean(0)?
        };
        let n = v.sqr()?.sum_all()?.sqrt()?.to_scalar::<f32>()?.max(1e-12);
        (v / n as f64)?.to_dtype(DType::F32)?.to_vec1::<f32>()
    }
}

/// The index of the largest value of `logits`.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = (0usize, f32::NEG_INFINITY);
    for (i, &v) in logits.iter().enumerate() {
        if v > best.1 {
            best = (i, v);
        }
    }
    best.0 as u32
}

/// The cos and sin tables of RoPE for `n_ctx` positions: frequency
/// `scale * base^(-2i/d) / factors[i]` at dimension pair `i`, both tables
/// multiplied by `rope_attn_factor` (as ggml's `rope_ext` does).
fn rope_table(
    hp: &Hparams,
    base: f32,
    scale: f32,
    factors: Option<&[f32]>,
    n_ctx: usize,
    dev: &Device,
) -> Result<(Tensor, Tensor)> {
    let half = hp.head_dim / 2;
    let inv: Vec<f32> = (0..half)
        .map(|i| {
            let f = 1f32 / base.powf(2.0 * i as f32 / hp.head_dim as f32);
            let f = if scale != 1.0 { f * scale } else { f };
            match factors.and_then(|v| v.get(i)) {
                Some(d) => f / d,
                None => f,
            }
        })
        .collect();
    let inv = Tensor::from_vec(inv, (1, half), dev)?;
    let pos = Tensor::arange(0u32, n_ctx as u32, dev)?
        .to_dtype(DType::F32)?
        .reshape((n_ctx, 1))?;
    let freqs = pos.matmul(&inv)?;
    let (cos, sin) = (freqs.cos()?, freqs.sin()?);
    if hp.rope_attn_factor != 1.0 {
        let a = f64::from(hp.rope_attn_factor);
        return Ok(((cos * a)?, (sin * a)?));
    }
    Ok((cos, sin))
}

/// The additive mask of `t` queries at positions `start..start + t` over the
/// keys at `lo..start + t`: -inf for a key after the query or, with a
/// `window`, `window` or more positions before it.
fn causal_mask(
    t: usize,
    start: usize,
    lo: usize,
    window: Option<usize>,
    dev: &Device,
) -> Result<Tensor> {
    let total = start + t;
    let m: Vec<f32> = (0..t)
        .flat_map(|i| {
            let p = start + i;
            (lo..total).map(move |j| {
                let far = window.is_some_and(|w| p - j.min(p) >= w);
                if j > p || far {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
        })
        .collect();
    Tensor::from_vec(m, (t, total - lo), dev)
}
