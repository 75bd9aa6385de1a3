//! `companiond model list` and `companiond model pull NAME`.

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
        other => {
            eprintln!("companiond: unknown model action {other:?} (list, pull)");
            2
        }
    }
}
