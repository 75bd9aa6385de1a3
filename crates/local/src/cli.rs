//! `companiond model list`, `companiond model pull NAME` and
//! `companiond model run FILE --prompt TEXT [--max-tokens N] [--threads N]`.

use std::io::Write;

use companiond_core::options::ModelArgs;

use crate::catalog;
use crate::pull;

/// Run the command; the process's exit code.
pub fn run(args: &ModelArgs) -> i32 {
    let data_dir = match companiond_core::options::resolve_data_dir(args.data_dir.clone()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("companiond: {e}");
            return 2;
        }
    };
    match args.action.as_str() {
        "list" => {
            for e in catalog::all() {
                let pulled = catalog::pulled_path(&data_dir, &e).is_file();
                println!(
                    "{:<24} {:<9} {:>6} MiB  {:<28} {}{}",
                    e.name,
                    e.kind,
                    e.size >> 20,
                    e.license,
                    e.description,
                    if pulled { "  [pulled]" } else { "" }
                );
            }
            0
        }
        "pull" => {
            let Some(name) = args.name.as_deref() else {
                eprintln!("companiond: model pull needs a NAME (see `companiond model list`)");
                return 2;
            };
            let Some(e) = catalog::find(name) else {
                eprintln!("companiond: no model named {name:?} (see `companiond model list`)");
                return 2;
            };
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(err) => {
                    eprintln!("companiond: {err}");
                    return 1;
                }
            };
            let client = match reqwest::Client::builder()
                .connect_timeout(std::time::Duration::from_secs(20))
                .build()
            {
                Ok(c) => c,
                Err(err) => {
                    eprintln!("companiond: {err}");
                    return 1;
                }
            };
            let last = std::sync::Mutex::new(0u64);
            let progress = |got: u64, total: u64| {
                let mut l = last.lock().unwrap_or_else(|e| e.into_inner());
                if got >= *l + (8 << 20) || got == total {
                    *l = got;
                    eprint!("\r{}: {} / {} MiB", e.name, got >> 20, total.max(1) >> 20);
                    let _ = std::io::stderr().flush();
                }
            };
            match rt.block_on(pull::pull(&client, &data_dir, &e, &progress)) {
                Ok(path) => {
                    eprintln!();
                    println!("{}", path.display());
                    0
                }
                Err(err) => {
                    eprintln!("\ncompaniond: {err}");
                    1
                }
            }
        }
        "run" => {
            let Some(name) = args.name.as_deref() else {
                eprintln!(
                    "companiond: model run needs a FILE (a GGUF path or a pulled model's name)"
                );
                return 2;
            };
            let path = match catalog::find(name) {
                Some(e) if !std::path::Path::new(name).exists() => {
                    catalog::pulled_path(&data_dir, &e)
                }
                _ => std::path::PathBuf::from(name),
            };
            let threads = args.threads.unwrap_or_else(num_cpus::get_physical).max(1);
            let prompt = args.prompt.clone().unwrap_or_default();
            match run_file(&path, &prompt, args.max_tokens, threads, args.top) {
                Ok(v) => {
                    println!("{v}");
                    0
                }
                Err(err) => {
                    eprintln!("companiond: {err}");
                    1
                }
            }
        }
        other => {
            eprintln!("companiond: unknown model action {other:?} (list, pull, run)");
            2
        }
    }
}

/// `model run`: check and load `path`, tokenize `prompt` (the BOS the file
/// asks for, special tokens read as such) and continue it greedily for up to
/// `max_tokens` tokens (stopping at an end-of-turn token); the answer as JSON,
/// with the `top` likeliest tokens of each step and their logits.
pub fn run_file(
    path: &std::path::Path,
    prompt: &str,
    max_tokens: usize,
    threads: usize,
    top: usize,
) -> Result<serde_json::Value, String> {
    use crate::gguf;
    use crate::model::{argmax, Model};
    use crate::tokenizer::Tok;
    let info = gguf::inspect(path, Some(crate::engine::DEFAULT_MAX_CONTEXT))
        .map_err(|e| format!("{}: {e}", e.code()))?;
    let mut f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let ct = candle_core::quantized::gguf_file::Content::read(&mut f).map_err(|e| e.to_string())?;
    let tok = Tok::from_gguf(&ct)?;
    let stops = crate::engine::stop_tokens(&ct, &tok);
    let t_tok = std::time::Instant::now();
    let ids = tok.encode(prompt, true)?;
    let tokenize_secs = t_tok.elapsed().as_secs_f64();
    let mut out: Vec<u32> = Vec::new();
    let mut steps: Vec<Vec<(u32, f32)>> = Vec::new();
    let mut secs = 0.0;
    if max_tokens > 0 {
        if ids.is_empty() {
            return Err("the prompt has no tokens".into());
        }
        crate::engine::set_threads(threads);
        let context = (ids.len() + max_tokens)
            .max(512)
            .min(info.context_length.max(512));
        if ids.len() + max_tokens > context {
            return Err(format!(
                "context_length_exceeded: {} prompt tokens and {max_tokens} more do not fit the model's context ({context})",
                ids.len()
            ));
        }
        let mut model = Model::load(path, context).map_err(|e| e.to_string())?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| e.to_string())?;
        let t0 = std::time::Instant::now();
        let mut logits = pool
            .install(|| model.forward(&ids, false))
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| e.to_string())?;
        while out.len() < max_tokens {
            if top > 0 {
                steps.push(crate::engine::top_k(&logits, top));
            }
            let next = argmax(&logits);
            if stops.contains(&next) {
                break;
            }
            out.push(next);
            if out.len() == max_tokens {
                break;
            }
            logits = pool
                .install(|| model.forward(&[next], false))
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(|e| e.to_string())?;
        }
        secs = t0.elapsed().as_secs_f64();
    }
    let mut stop: Vec<u32> = stops.into_iter().collect();
    stop.sort_unstable();
    Ok(serde_json::json!({
        "file": path.display().to_string(),
        "architecture": info.architecture,
        "prompt_tokens": ids,
        "prompt_text": tok.decode(&ids, true)?,
        "tokens": out,
        "text": tok.decode(&out, true)?,
        "stop_tokens": stop,
        "top": steps,
        "seconds": secs,
        "tokenize_seconds": tokenize_secs,
    }))
}
