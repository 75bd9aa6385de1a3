//! The transformer of a GGUF chat model on the CPU (candle): the Llama family
//! (`llama` — Llama 2/3, SmolLM, Mistral —, `qwen2`, `qwen3`), quantized
//! weights as they lie in the file, a KV cache that can be cut back to a
//! prefix (docs/local-model.md, "Prefix cache").

use std::fs::File;
use std::path::Path;

use candle_core::quantized::{gguf_file, QMatMul, QTensor};
use candle_core::{DType, Device, Module, Result, Tensor};

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
pub const ARCHITECTURES: [&str; 3] = ["llama", "qwen2", "qwen3"];

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
        Ok(Hparams {
            n_layer: need("block_count")?,
            n_embd,
            n_head,
            n_head_kv,
            head_dim,
            n_ctx_train: md_u(ct, &format!("{arch}.context_length")).unwrap_or(4096),
            eps: md_f(ct, &format!("{arch}.attention.layer_norm_rms_epsilon")).unwrap_or(1e-5),
            rope_base: md_f(ct, &format!("{arch}.rope.freq_base")).unwrap_or(10_000.0) as f32,
            rope_neox: arch != "llama",
            arch,
        })
    }
}

struct Layer {
    wq: Mat,
    wk: Mat,
    wv: Mat,
    wo: Mat,
    bq: Option<Tensor>,
    bk: Option<Tensor>,
    bv: Option<Tensor>,
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    attn_norm: Tensor,
    ffn_norm: Tensor,
    w_gate: Mat,
    w_up: Mat,
    w_down: Mat,
    /// Keys and values of the positions seen so far: (1, n_head_kv, seq, head_dim).
    cache: Option<(Tensor, Tensor)>,
}

/// A weight matrix for `x @ w^T`: quantised as in the file for one token
/// at a time (decoding), dequantised per call into an f32 GEMM for a prompt
/// of many tokens (prefill), which is several times faster on the CPU.
/// Q4_1 weights are read as they are by our kernel ([`crate::q4_1`]) where
/// the CPU has AVX2; elsewhere, and for Q5_0 and Q5_1 (no SIMD kernel in
/// candle), they are converted to Q8_0 once at load: more memory and more
/// bytes read a token, but much faster than candle's scalar products.
struct Mat {
    /// candle's quantised product; `None` for Q4_1 read by our kernel.
    q: Option<QMatMul>,
    raw: std::sync::Arc<QTensor>,
}

/// Rows from which a call takes the GEMM path.
const GEMM_ROWS: usize = 16;

impl Mat {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let rows = x.elem_count() / x.dim(candle_core::D::Minus1)?;
        if rows >= GEMM_ROWS {
            let w = self.raw.dequantize(&Device::Cpu)?;
            let (b, t, k) = x.dims3()?;
            let y = x.reshape((b * t, k))?.matmul(&w.t()?)?;
            let n = y.dim(1)?;
            return y.reshape((b, t, n));
        }
        match &self.q {
            Some(q) => q.forward(x),
            None => self.q4_1(x),
        }
    }

    /// `x @ w^T` by [`crate::q4_1::matvec`], one row of `x` at a time.
    fn q4_1(&self, x: &Tensor) -> Result<Tensor> {
        let (n, k) = self.raw.shape().dims2()?;
        let mut dims = x.dims().to_vec();
        let xs = x.flatten_all()?.to_vec1::<f32>()?;
        let data = self.raw.data()?;
        let mut y = vec![0f32; xs.len() / k * n];
        for (x, y) in xs.chunks_exact(k).zip(y.chunks_exact_mut(n)) {
            let a = crate::q4_1::Activations::quantise(x);
            crate::q4_1::matvec(&data, k, &a, y).map_err(candle_core::Error::msg)?;
        }
        if let Some(last) = dims.last_mut() {
            *last = n;
        }
        Tensor::from_vec(y, dims, &Device::Cpu)
    }
}

fn matmul(t: QTensor) -> Result<Mat> {
    use candle_core::quantized::GgmlDType as T;
    let cols = t.shape().dims().last().copied().unwrap_or(0);
    let whole_blocks = cols.is_multiple_of(32) && t.shape().rank() == 2;
    if t.dtype() == T::Q4_1 && whole_blocks && crate::q4_1::available() {
        return Ok(Mat {
            q: None,
            raw: std::sync::Arc::new(t),
        });
    }
    let slow = matches!(t.dtype(), T::Q4_1 | T::Q5_0 | T::Q5_1);
    let t = if slow && cols.is_multiple_of(32) {
        let w = t.dequantize(&Device::Cpu)?;
        QTensor::quantize(&w, T::Q8_0)?
    } else {
        t
    };
    let raw = std::sync::Arc::new(t);
    Ok(Mat {
        q: Some(QMatMul::from_arc(raw.clone())?),
        raw,
    })
}

/// A loaded model and its KV cache.
pub struct Model {
    pub hp: Hparams,
    embd: QTensor,
    layers: Vec<Layer>,
    norm: Tensor,
    output: Mat,
    cos: Tensor,
    sin: Tensor,
    /// Window the cache tables were built for.
    pub n_ctx: usize,
    /// Positions held in the KV cache.
    pub cached: usize,
}

impl Model {
    /// Load the tensors of `path` (already checked by [`crate::gguf::inspect`]).
    pub fn load(path: &Path, n_ctx: usize) -> Result<Model> {
        let dev = Device::Cpu;
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
            let mut q = |n: &str| qt(&format!("{p}.{n}"));
            layers.push(Layer {
                wq: matmul(q("attn_q.weight")?)?,
                wk: matmul(q("attn_k.weight")?)?,
                wv: matmul(q("attn_v.weight")?)?,
                wo: matmul(q("attn_output.weight")?)?,
                attn_norm: q("attn_norm.weight")?.dequantize(&dev)?,
                ffn_norm: q("ffn_norm.weight")?.dequantize(&dev)?,
                w_gate: matmul(q("ffn_gate.weight")?)?,
                w_up: matmul(q("ffn_up.weight")?)?,
                w_down: matmul(q("ffn_down.weight")?)?,
                bq,
                bk,
                bv,
                q_norm,
                k_norm,
                cache: None,
            });
        }
        let half = hp.head_dim / 2;
        let inv: Vec<f32> = (0..half)
            .map(|i| 1f32 / hp.rope_base.powf(2.0 * i as f32 / hp.head_dim as f32))
            .collect();
        let inv = Tensor::from_vec(inv, (1, half), &dev)?;
        let pos = Tensor::arange(0u32, n_ctx as u32, &dev)?
            .to_dtype(DType::F32)?
            .reshape((n_ctx, 1))?;
        let freqs = pos.matmul(&inv)?;
        Ok(Model {
            cos: freqs.cos()?,
            sin: freqs.sin()?,
            hp,
            embd,
            layers,
            norm,
            output,
            n_ctx,
            cached: 0,
        })
    }

    /// Forget the cache past `n` positions (the prefix kept for the next call).
    pub fn truncate(&mut self, n: usize) -> Result<()> {
        if n >= self.cached {
            return Ok(());
        }
        for l in &mut self.layers {
            l.cache = match (n, l.cache.take()) {
                (0, _) | (_, None) => None,
                (n, Some((k, v))) => Some((
                    k.narrow(2, 0, n)?.contiguous()?,
                    v.narrow(2, 0, n)?.contiguous()?,
                )),
            };
        }
        self.cached = n;
        Ok(())
    }

    /// Run `tokens` after the cached positions; the logits of the last one
    /// (or, with `all_hidden`, the final hidden states of every position).
    pub fn forward(&mut self, tokens: &[u32], all_hidden: bool) -> Result<Tensor> {
        let dev = Device::Cpu;
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
        let cos = self.cos.narrow(0, start, t)?;
        let sin = self.sin.narrow(0, start, t)?;
        let total = start + t;
        let mask = if t > 1 {
            let m: Vec<f32> = (0..t)
                .flat_map(|i| {
                    (0..total).map(move |j| {
                        if j > start + i {
                            f32::NEG_INFINITY
                        } else {
                            0.0
                        }
                    })
                })
                .collect();
            Some(Tensor::from_vec(m, (t, total), &dev)?)
        } else {
            None
        };
        let hp = self.hp.clone();
        let scale = 1.0 / (hp.head_dim as f64).sqrt();
        let rep = hp.n_head / hp.n_head_kv;
        for l in &mut self.layers {
            let h = candle_nn::ops::rms_norm(&x, &l.attn_norm, hp.eps as f32)?;
            let add = |y: Tensor, b: &Option<Tensor>| match b {
                Some(b) => y.broadcast_add(b),
                None => Ok(y),
            };
            let q = add(l.wq.forward(&h)?, &l.bq)?;
            let k = add(l.wk.forward(&h)?, &l.bk)?;
            let v = add(l.wv.forward(&h)?, &l.bv)?;
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
            let (q, k) = if hp.rope_neox {
                (
                    candle_nn::rotary_emb::rope(&q, &cos, &sin)?,
                    candle_nn::rotary_emb::rope(&k, &cos, &sin)?,
                )
            } else {
                (
                    candle_nn::rotary_emb::rope_i(&q, &cos, &sin)?,
                    candle_nn::rotary_emb::rope_i(&k, &cos, &sin)?,
                )
            };
            let (k, v) = match l.cache.take() {
                Some((ck, cv)) => (Tensor::cat(&[&ck, &k], 2)?, Tensor::cat(&[&cv, &v], 2)?),
                None => (k, v.contiguous()?),
            };
            l.cache = Some((k.clone(), v.clone()));
            // Grouped-query attention: each KV head serves `rep` query heads.
            let q = q.reshape((1, hp.n_head_kv, rep * t, hp.head_dim))?;
            let att = (q.matmul(&k.t()?)? * scale)?; // (1, kv, rep*t, total)
            let att = match &mask {
                Some(m) => att
                    .reshape((1, hp.n_head_kv, rep, t, total))?
                    .broadcast_add(m)?
                    .reshape((1, hp.n_head_kv, rep * t, total))?,
                None => att,
            };
            let att = candle_nn::ops::softmax_last_dim(&att)?;
            let y = att.matmul(&v.contiguous()?)?; // (1, kv, rep*t, hd)
            let y = y
                .reshape((1, hp.n_head, t, hp.head_dim))?
                .transpose(1, 2)?
                .reshape((1, t, hp.n_head * hp.head_dim))?;
            let y = l.wo.forward(&y)?;
            x = (x + y)?;
            let h = candle_nn::ops::rms_norm(&x, &l.ffn_norm, hp.eps as f32)?;
            let g = candle_nn::ops::silu(&l.w_gate.forward(&h)?)?;
            let u = l.w_up.forward(&h)?;
            let y = l.w_down.forward(&(g * u)?)?;
            x = (x + y)?;
        }
        self.cached = total;
        let x = candle_nn::ops::rms_norm(&x, &self.norm, hp.eps as f32)?;
        if all_hidden {
            return x.squeeze(0);
        }
        let last = x.narrow(1, t - 1, 1)?;
        self.output
            .forward(&last)?
            .flatten_all()?
            .to_dtype(DType::F32)
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
