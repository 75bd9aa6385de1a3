//! The KV cache of every architecture: a prompt computed in one pass, in
//! chunks, one token at a time, or after the cache was cut back to a prefix
//! (the engine's prefix reuse) gives the same logits — also across the
//! sliding windows of Gemma 2 and 3. Tiny random models written with
//! candle's GGUF writer (the comparison with llama.cpp is
//! tests/local/test_architectures.py).

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use companiond_local::model::Model;

const N_EMBD: usize = 64;
const N_HEAD: usize = 4;
const N_KV: usize = 2;
const HEAD: usize = 16;
const N_FF: usize = 128;
const VOCAB: usize = 97;

fn write(path: &std::path::Path, arch: &str) {
    let dev = Device::Cpu;
    let n_layer = 6u32;
    let k = |s: &str| format!("{arch}.{s}");
    let mut md: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(arch.into())),
        (k("block_count"), Value::U32(n_layer)),
        (k("context_length"), Value::U32(512)),
        (k("embedding_length"), Value::U32(N_EMBD as u32)),
        (k("feed_forward_length"), Value::U32(N_FF as u32)),
        (k("attention.head_count"), Value::U32(N_HEAD as u32)),
        (k("attention.head_count_kv"), Value::U32(N_KV as u32)),
        (k("attention.key_length"), Value::U32(HEAD as u32)),
        (k("attention.layer_norm_rms_epsilon"), Value::F32(1e-6)),
    ];
    if arch.starts_with("gemma") {
        md.push((k("attention.sliding_window"), Value::U32(5)));
    }
    let rnd = |shape: &[usize], scale: f64| -> QTensor {
        let t = (Tensor::randn(0f32, 1f32, shape, &dev).unwrap() * scale).unwrap();
        QTensor::quantize(&t, GgmlDType::F32).unwrap()
    };
    let ones = |n: usize| rnd(&[n], 0.1);
    let mut ts: Vec<(String, QTensor)> = vec![
        ("token_embd.weight".into(), rnd(&[VOCAB, N_EMBD], 0.3)),
        ("output_norm.weight".into(), ones(N_EMBD)),
        ("output.weight".into(), rnd(&[VOCAB, N_EMBD], 0.2)),
    ];
    let (nq, nkv) = (N_HEAD * HEAD, N_KV * HEAD);
    let s = 1.0 / (N_EMBD as f64).sqrt();
    for i in 0..n_layer {
        let p = |n: &str| format!("blk.{i}.{n}");
        ts.push((p("attn_norm.weight"), ones(N_EMBD)));
        ts.push((p("ffn_norm.weight"), ones(N_EMBD)));
        ts.push((p("attn_output.weight"), rnd(&[N_EMBD, nq], s)));
        ts.push((p("ffn_down.weight"), rnd(&[N_EMBD, N_FF], s)));
        if arch == "phi3" {
            ts.push((p("attn_qkv.weight"), rnd(&[nq + 2 * nkv, N_EMBD], s)));
            ts.push((p("ffn_up.weight"), rnd(&[2 * N_FF, N_EMBD], s)));
        } else {
            ts.push((p("attn_q.weight"), rnd(&[nq, N_EMBD], s)));
            ts.push((p("attn_k.weight"), rnd(&[nkv, N_EMBD], s)));
            ts.push((p("attn_v.weight"), rnd(&[nkv, N_EMBD], s)));
            ts.push((p("ffn_gate.weight"), rnd(&[N_FF, N_EMBD], s)));
            ts.push((p("ffn_up.weight"), rnd(&[N_FF, N_EMBD], s)));
        }
        if arch == "gemma3" {
            ts.push((p("attn_q_norm.weight"), ones(HEAD)));
            ts.push((p("attn_k_norm.weight"), ones(HEAD)));
        }
        if arch == "gemma2" || arch == "gemma3" {
            ts.push((p("post_attention_norm.weight"), ones(N_EMBD)));
            ts.push((p("post_ffw_norm.weight"), ones(N_EMBD)));
        }
    }
    let md: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &QTensor)> = ts.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut f = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut f, &md, &ts).unwrap();
}

fn logits(m: &mut Model, tokens: &[u32]) -> Vec<f32> {
    m.forward(tokens, false).unwrap().to_vec1::<f32>().unwrap()
}

fn close(a: &[f32], b: &[f32], what: &str) {
    let d = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(d < 1e-3, "{what}: the logits differ by {d}");
}

#[test]
fn the_cache_gives_the_logits_of_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let tokens: Vec<u32> = (0..40u32).map(|i| (i * 37 + 11) % VOCAB as u32).collect();
    for arch in ["llama", "gemma", "gemma2", "gemma3", "phi3"] {
        let path = dir.path().join(format!("{arch}.gguf"));
        write(&path, arch);
        let mut m = Model::load(&path, 512).unwrap();
        let whole = logits(&mut m, &tokens);
        // Token by token (decoding), past the sliding window.
        m.truncate(0).unwrap();
        let mut last = Vec::new();
        for t in &tokens {
            last = logits(&mut m, &[*t]);
        }
        close(&whole, &last, &format!("{arch}, one token at a time"));
        // Cut back to a prefix and computed on in uneven chunks.
        m.truncate(0).unwrap();
        logits(&mut m, &tokens[..25]);
        m.truncate(9).unwrap();
        assert_eq!(m.cached, 9);
        logits(&mut m, &tokens[9..26]);
        logits(&mut m, &tokens[26..33]);
        let again = logits(&mut m, &tokens[33..]);
        close(&whole, &again, &format!("{arch}, after the prefix cut"));
    }
}

#[test]
fn a_malformed_file_is_refused_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("phi3.gguf");
    write(&path, "phi3");
    // A Phi-3 whose fused QKV has the wrong size: an error, not a panic.
    let mut f = std::fs::File::open(&path).unwrap();
    let ct = gguf_file::Content::read(&mut f).unwrap();
    let mut md: Vec<(String, Value)> = ct.metadata.clone().into_iter().collect();
    for (k, v) in md.iter_mut() {
        if k == "phi3.attention.head_count_kv" {
            *v = Value::U32(1);
        }
    }
    let names: Vec<String> = ct.tensor_infos.keys().cloned().collect();
    let ts: Vec<(String, QTensor)> = names
        .iter()
        .map(|n| (n.clone(), ct.tensor(&mut f, n, &Device::Cpu).unwrap()))
        .collect();
    let bad = dir.path().join("bad.gguf");
    let md: Vec<(&str, &Value)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &QTensor)> = ts.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut std::fs::File::create(&bad).unwrap(), &md, &ts).unwrap();
    let err = Model::load(&bad, 512).err().map(|e| e.to_string());
    assert!(err.is_some_and(|e| e.contains("attn_qkv")));
}

/// Past the window and its slack the sliding layers drop old positions:
/// the logits stay those of one pass, a cut within what is kept is kept, a
/// cut further back starts again from nothing.
#[test]
fn sliding_layers_drop_what_no_query_sees() {
    use companiond_local::model::SWA_SLACK;
    let dir = tempfile::tempdir().unwrap();
    let n = 2 * SWA_SLACK + 160;
    let tokens: Vec<u32> = (0..n as u32).map(|i| (i * 31 + 7) % VOCAB as u32).collect();
    for arch in ["gemma2", "gemma3"] {
        let path = dir.path().join(format!("{arch}.gguf"));
        write(&path, arch);
        let mut m = Model::load(&path, 2048).unwrap();
        let whole = logits(&mut m, &tokens);
        m.truncate(0).unwrap();
        let mut last = Vec::new();
        for c in tokens.chunks(256) {
            last = logits(&mut m, c);
        }
        close(&whole, &last, &format!("{arch}, in chunks past the slack"));
        // A cut near the end is kept; the same logits follow.
        assert_eq!(m.truncate(n - 20).unwrap(), n - 20);
        let again = logits(&mut m, &tokens[n - 20..]);
        close(
            &whole,
            &again,
            &format!("{arch}, after a cut within the slack"),
        );
        // Token by token from there on, then a cut before what is kept.
        m.truncate(0).unwrap();
        logits(&mut m, &tokens[..n - 40]);
        for t in &tokens[n - 40..] {
            last = logits(&mut m, &[*t]);
        }
        close(
            &whole,
            &last,
            &format!("{arch}, token by token past the slack"),
        );
        assert_eq!(m.truncate(10).unwrap(), 0);
        assert_eq!(m.cached, 0);
        let fresh = logits(&mut m, &tokens);
        close(&whole, &fresh, &format!("{arch}, recomputed"));
    }
}
