//! Command line and environment of `companiond serve` (README.md lists them).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

/// `companiond [serve] [options]`.
#[derive(Debug, Parser)]
#[command(
    name = "companiond",
    version,
    about = "Local backend of the desktop companion application"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP server (the default).
    Serve(ServeArgs),
    /// Write a backup archive of the data folder (works while a server runs).
    Backup(BackupArgs),
    /// Replace the data folder by a backup archive (refused while a server
    /// runs on it; the replaced folder is kept aside).
    Restore(RestoreArgs),
    /// The built-in local model's files: `model list`, `model pull NAME`,
    /// `model run FILE --prompt TEXT` (docs/local-model.md).
    Model(ModelArgs),
}

/// `companiond model list|pull NAME|run FILE --prompt TEXT [--max-tokens N]
/// [--threads N] [--top K] [--data-dir DIR]`.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// `list` (the curated models and which are pulled), `pull`, or `run`
    /// (greedy continuation of a prompt, printed as JSON).
    pub action: String,
    /// The curated model's name (`pull`), or a GGUF file or curated name (`run`).
    pub name: Option<String>,
    /// `run`: the text to continue (no chat template; special tokens written
    /// in it are read as such).
    #[arg(long)]
    pub prompt: Option<String>,
    /// `run`: how many tokens to generate (0: only tokenize).
    #[arg(long, default_value_t = 16)]
    pub max_tokens: usize,
    /// `run`: CPU threads (default: physical cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// `run`: also print the `top` likeliest tokens and their logits at each step.
    #[arg(long, default_value_t = 0)]
    pub top: usize,
    /// The data folder (as for `serve`); models go to `<data>/models/`.
    #[arg(long, env = "COMPANIOND_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

/// `companiond backup --out FILE [--data-dir DIR] [--with-secrets] [--with-snapshots]`.
#[derive(Debug, Clone, Args)]
pub struct BackupArgs {
    /// The archive to write (a ZIP; replaced atomically).
    #[arg(long)]
    pub out: PathBuf,
    /// The data folder (as for `serve`).
    #[arg(long, env = "COMPANIOND_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Keep the `*ApiKey` values in the archive (left out by default).
    #[arg(long)]
    pub with_secrets: bool,
    /// Keep the snapshots and the trash (`snapshots/`, left out by default).
    #[arg(long)]
    pub with_snapshots: bool,
}

/// `companiond restore FILE [--data-dir DIR]`.
#[derive(Debug, Clone, Args)]
pub struct RestoreArgs {
    /// The archive written by `companiond backup` or `GET /api/backup`.
    pub file: PathBuf,
    /// The data folder (as for `serve`).
    #[arg(long, env = "COMPANIOND_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

impl Cli {
    /// The serve options, whether or not `serve` was spelled out.
    pub fn into_serve(self) -> ServeArgs {
        match self.command {
            Some(Command::Serve(args)) => args,
            _ => self.serve,
        }
    }
}

/// Options of `companiond serve`. A flag beats its variable; the variable beats the default.
#[derive(Debug, Clone, Args, Default)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, env = "COMPANIOND_LISTEN", default_value = "127.0.0.1:48911")]
    pub listen: String,
    /// All user data; created when missing.
    #[arg(long, env = "COMPANIOND_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Read-only resources shipped with the application.
    #[arg(long, env = "COMPANIOND_BUNDLE_DIR")]
    pub bundle_dir: Option<PathBuf>,
    /// Subscribed workshop items: each child directory is one item.
    #[arg(long, env = "COMPANIOND_WORKSHOP_DIR")]
    pub workshop_dir: Option<PathBuf>,
    /// Cloud-save storage: a directory or s3://bucket/prefix.
    #[arg(long, env = "COMPANIOND_CLOUD")]
    pub cloud: Option<String>,
    /// Roots scanned by /api/memory/legacy/scan (repeatable).
    #[arg(long = "legacy-memory-root")]
    pub legacy_memory_roots: Vec<PathBuf>,
    /// The CSRF token; random per process when absent.
    #[arg(long, env = "COMPANIOND_CSRF_TOKEN")]
    pub csrf_token: Option<String>,
    /// Permit a non-loopback --listen address.
    #[arg(long, env = "COMPANIOND_ALLOW_REMOTE", action = clap::ArgAction::SetTrue,
          value_parser = clap::builder::FalseyValueParser::new())]
    pub allow_remote: bool,
    /// More `Host` names to serve (e.g. behind a reverse proxy); repeatable.
    #[arg(
        long = "allowed-host",
        env = "COMPANIOND_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
    /// A folder with the original application's `templates/` and `static/`: its pages
    /// are served at their original paths (docs/frontend.md).
    #[arg(long, env = "COMPANIOND_FRONTEND_DIR")]
    pub frontend_dir: Option<PathBuf>,
    /// A GGUF chat model file for the built-in local model (docs/local-model.md);
    /// the `localModel` setting, when set, wins.
    #[arg(long, env = "COMPANIOND_LOCAL_MODEL")]
    pub local_model: Option<PathBuf>,
}

/// Resolved options: every default applied.
#[derive(Debug, Clone)]
pub struct Options {
    pub listen: String,
    pub data_dir: PathBuf,
    pub bundle_dir: PathBuf,
    pub workshop_dir: Option<PathBuf>,
    pub cloud: String,
    pub legacy_memory_roots: Vec<PathBuf>,
    pub csrf_token: String,
    pub allow_remote: bool,
    /// Extra `Host` names served besides loopback, `localhost` and the `--listen` host.
    pub allowed_hosts: Vec<String>,
    /// The original frontend's folder (`templates/`, `static/`), when given.
    pub frontend_dir: Option<PathBuf>,
    /// The GGUF file of `--local-model`, when given.
    pub local_model: Option<PathBuf>,
}

/// The data folder: the one given, else the per-user data dir +
/// `/companiond`; absolute.
pub fn resolve_data_dir(given: Option<PathBuf>) -> Result<PathBuf, String> {
    let data_dir = match given {
        Some(d) => d,
        None => dirs::data_dir()
            .or_else(|| dirs::home_dir().map(|h| h.join(".local/share")))
            .ok_or("cannot determine the per-user data directory; pass --data-dir")?
            .join("companiond"),
    };
    Ok(absolute(&data_dir))
}

impl ServeArgs {
    /// Apply the defaults: the per-user data dir (`<data>/companiond`), the
    /// bundle beside the program, the cloud folder inside the data dir, the
    /// legacy memory roots of `COMPANIOND_LEGACY_MEMORY_ROOTS`, a random CSRF token.
    pub fn resolve(self) -> Result<Options, String> {
        let data_dir = resolve_data_dir(self.data_dir)?;
        let bundle_dir = absolute(&self.bundle_dir.unwrap_or_else(default_bundle_dir));
        let cloud = self
            .cloud
            .filter(|c| !c.trim().is_empty())
            .unwrap_or_else(|| data_dir.join("cloud").to_string_lossy().into_owned());
        let legacy_memory_roots = if self.legacy_memory_roots.is_empty() {
            std::env::var_os("COMPANIOND_LEGACY_MEMORY_ROOTS")
                .map(|v| {
                    std::env::split_paths(&v)
                        .filter(|p| !p.as_os_str().is_empty())
                        .collect()
                })
                .unwrap_or_default()
        } else {
            self.legacy_memory_roots
        };
        let csrf_token = match self.csrf_token.filter(|t| !t.is_empty()) {
            Some(t) => t,
            None => random_token(),
        };
        Ok(Options {
            listen: self.listen,
            data_dir,
            bundle_dir,
            workshop_dir: self.workshop_dir.map(|p| absolute(&p)),
            cloud,
            legacy_memory_roots,
            csrf_token,
            allow_remote: self.allow_remote,
            allowed_hosts: self
                .allowed_hosts
                .into_iter()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .collect(),
            frontend_dir: self
                .frontend_dir
                .filter(|p| !p.as_os_str().is_empty())
                .map(|p| absolute(&p)),
            local_model: self
                .local_model
                .filter(|p| !p.as_os_str().is_empty())
                .map(|p| absolute(&p)),
        })
    }
}

/// A random 32-hex-digit token.
pub fn random_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Absolute and lexically clean (`.` dropped, `..` applied), so that roots
/// compare by components with the paths built under them.
fn absolute(p: &Path) -> PathBuf {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|c| c.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    };
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `assets/` beside the executable, else the repository's `assets/`, else `./assets`.
fn default_bundle_dir() -> PathBuf {
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            let beside = dir.join("assets");
            if beside.is_dir() {
                return beside;
            }
        }
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../assets");
    if repo.is_dir() {
        return repo;
    }
    PathBuf::from("assets")
}

/// Resolve the listen address and refuse a non-loopback one without `allow_remote`.
pub async fn resolve_listen(listen: &str, allow_remote: bool) -> Result<SocketAddr, String> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(listen)
        .await
        .map_err(|e| format!("invalid --listen address {listen:?}: {e}"))?
        .collect();
    let addr = *addrs
        .first()
        .ok_or_else(|| format!("invalid --listen address {listen:?}: it resolves to nothing"))?;
    if !allow_remote && !addrs.iter().all(|a| a.ip().is_loopback()) {
        return Err(format!(
            "refusing to listen on non-loopback address {addr}; pass --allow-remote to permit it"
        ));
    }
    Ok(addr)
}
