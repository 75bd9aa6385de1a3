//! What core's model client calls: the settings of each request (which file,
//! threads, idle time, context) and the engine behind them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use companiond_core::layout;
use companiond_core::llm::LlmError;
use companiond_core::local_model::{LocalBackend, LocalEvent, LocalRequest};
use companiond_core::store::Store;
use companiond_core::AppState;
use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::catalog;
use crate::engine::{self, Engine, Settings};
use crate::gguf;

/// The context window of a file, or why it is refused.
type WindowCheck = Result<usize, String>;

/// Default idle time before the model is unloaded.
pub const DEFAULT_IDLE_SECS: u64 = 300;

/// A download in progress or finished.
#[derive(Clone, Debug, Serialize, Default)]
pub struct PullState {
    pub name: String,
    pub state: String,
    pub received: u64,
    pub total: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
}

/// The family state: the engine and where its settings come from.
pub struct Backend {
    pub engine: Engine,
    store: Store,
    pub data_dir: PathBuf,
    flag_model: Option<PathBuf>,
    pub http: companiond_core::net::LazyClient,
    pub pulls: Arc<Mutex<HashMap<String, PullState>>>,
    /// Trained context length by file (path, length), read from headers.
    windows: Arc<Mutex<HashMap<(PathBuf, u64), WindowCheck>>>,
    /// The last file `GET /api/local/status` inspected, by path, length and
    /// modification time: reading a header parses the whole vocabulary
    /// (3 MiB of short-lived allocations for SmolLM2), on every poll of the
    /// console's page otherwise.
    inspected: Arc<Mutex<Option<(FileStamp, crate::gguf::Info)>>>,
}

/// What identifies a file's content for [`Backend::inspect`].
type FileStamp = (PathBuf, u64, Option<std::time::SystemTime>);

impl Backend {
    /// [`crate::gguf::inspect`] (without the memory check) of `path`,
    /// remembered while the file is unchanged. Errors are not remembered.
    pub fn inspect(
        &self,
        path: &std::path::Path,
    ) -> Result<crate::gguf::Info, crate::gguf::FileError> {
        let stamp = std::fs::metadata(path)
            .ok()
            .map(|m| (path.to_path_buf(), m.len(), m.modified().ok()));
        if let (Some(stamp), Some((had, info))) = (
            &stamp,
            &*self.inspected.lock().unwrap_or_else(|e| e.into_inner()),
        ) {
            if stamp == had {
                return Ok(info.clone());
            }
        }
        let info = crate::gguf::inspect(path, None)?;
        if let Some(stamp) = stamp {
            *self.inspected.lock().unwrap_or_else(|e| e.into_inner()) = Some((stamp, info.clone()));
        }
        Ok(info)
    }
}

fn str_setting<'a>(cfg: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    cfg.get(k)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn num_setting(cfg: &Map<String, Value>, k: &str) -> Option<u64> {
    match cfg.get(k)? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Physical cores (the default thread count).
pub fn physical_cores() -> usize {
    num_cpus::get_physical().max(1)
}

impl Backend {
    pub fn new(state: &AppState) -> Backend {
        Backend {
            engine: Engine::new(),
            store: state.store.clone(),
            data_dir: state.opts.data_dir.clone(),
            flag_model: state.opts.local_model.clone(),
            http: state.http.clone(),
            pulls: Default::default(),
            windows: Default::default(),
            inspected: Default::default(),
        }
    }

    async fn config(&self) -> Map<String, Value> {
        match self.store.read::<Value>(layout::CORE_CONFIG).await {
            Ok(Some(Value::Object(m))) => m,
            _ => Map::new(),
        }
    }

    /// A model given as a catalog name (pulled) or a path.
    fn model_path(&self, spec: &str) -> PathBuf {
        match catalog::find(spec) {
            Some(e) => catalog::pulled_path(&self.data_dir, &e),
            None => PathBuf::from(spec),
        }
    }

    /// The first pulled chat model, in catalog order.
    fn first_pulled(&self, kind: &str) -> Option<PathBuf> {
        catalog::all()
            .into_iter()
            .filter(|e| e.kind == kind)
            .map(|e| catalog::pulled_path(&self.data_dir, &e))
            .find(|p| p.is_file())
    }

    /// The settings of the next request, or `None` when no model is given.
    /// The model: the `localModel` setting (a catalog name or a path), else
    /// `--local-model`/`COMPANIOND_LOCAL_MODEL`, else the first pulled chat model.
    pub async fn settings(&self) -> Option<Settings> {
        let cfg = self.config().await;
        let model = match str_setting(&cfg, "localModel") {
            Some(s) => self.model_path(s),
            None => self
                .flag_model
                .clone()
                .or_else(|| self.first_pulled("chat"))?,
        };
        let embedding = match str_setting(&cfg, "localEmbeddingModel") {
            Some(s) => Some(self.model_path(s)),
            None => self.first_pulled("embedding"),
        };
        Some(Settings {
            model,
            embedding,
            threads: num_setting(&cfg, "localThreads")
                .map(|n| n.clamp(1, 256) as usize)
                .unwrap_or_else(physical_cores),
            idle: Duration::from_secs(
                num_setting(&cfg, "localIdleSeconds")
                    .unwrap_or(DEFAULT_IDLE_SECS)
                    .clamp(1, 7 * 86_400),
            ),
            context: num_setting(&cfg, "localContextWindow")
                .map(|n| n.clamp(512, 1 << 20) as usize),
        })
    }

    /// The header check of `path` (cached by path and length).
    pub async fn window_of(&self, path: &Path, settings: &Settings) -> Result<usize, String> {
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let key = (path.to_path_buf(), len);
        if let Some(r) = self
            .windows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return r.clone();
        }
        let p = path.to_path_buf();
        let r = tokio::task::spawn_blocking(move || gguf::inspect(&p, None))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
            .map(|info| engine::context_for(info.context_length, settings));
        self.windows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, r.clone());
        r
    }

    /// The models `list_models` names: the configured file, then the pulled ones.
    pub async fn model_list(&self) -> Vec<Value> {
        let mut out = Vec::new();
        if let Some(s) = self.settings().await {
            let name = s
                .model
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let info = tokio::task::spawn_blocking({
                let p = s.model.clone();
                move || gguf::inspect(&p, None)
            })
            .await
            .ok();
            let mut entry = json!({"id": "local", "name": name, "path": s.model.display().to_string(), "active": true});
            match info {
                Some(Ok(i)) => {
                    entry["model_name"] = json!(i.name);
                    entry["architecture"] = json!(i.architecture);
                    entry["context_length"] = json!(engine::context_for(i.context_length, &s));
                    entry["size"] = json!(i.file_bytes);
                }
                Some(Err(e)) => {
                    entry["error"] = json!(e.to_string());
                    entry["error_code"] = json!(e.code());
                }
                None => {}
            }
            out.push(entry);
        }
        for e in catalog::all() {
            let p = catalog::pulled_path(&self.data_dir, &e);
            if p.is_file() {
                out.push(json!({"id": e.name, "name": e.file, "path": p.display().to_string(), "kind": e.kind, "pulled": true}));
            }
        }
        out
    }
}

impl LocalBackend for Backend {
    fn available(&self) -> BoxFuture<'static, bool> {
        let me = self.clone_handle();
        Box::pin(async move { me.settings().await.is_some() })
    }

    fn generate(&self, req: LocalRequest) -> tokio::sync::mpsc::UnboundedReceiver<LocalEvent> {
        let me = self.clone_handle();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let Some(settings) = me.settings().await else {
                let _ = tx.send(LocalEvent::Failed(LlmError::NotConfigured));
                return;
            };
            let mut inner = me.engine.generate(req, settings);
            while let Some(ev) = inner.recv().await {
                if tx.send(ev).is_err() {
                    // Dropping `inner` tells the engine to stop.
                    return;
                }
            }
        });
        rx
    }

    fn embed(&self, texts: Vec<String>) -> BoxFuture<'static, Result<Vec<Vec<f32>>, LlmError>> {
        let me = self.clone_handle();
        Box::pin(async move {
            let settings = me.settings().await.ok_or(LlmError::NotConfigured)?;
            me.engine.embed(texts, settings).await
        })
    }

    fn context_window(&self) -> BoxFuture<'static, Option<usize>> {
        let me = self.clone_handle();
        Box::pin(async move {
            let s = me.settings().await?;
            me.window_of(&s.model.clone(), &s).await.ok()
        })
    }

    fn models(&self) -> BoxFuture<'static, Vec<Value>> {
        let me = self.clone_handle();
        Box::pin(async move { me.model_list().await })
    }
}

impl Backend {
    /// A second handle on the same engine and state (for futures that outlive `&self`).
    fn clone_handle(&self) -> Arc<Backend> {
        Arc::new(Backend {
            engine: self.engine.clone(),
            store: self.store.clone(),
            data_dir: self.data_dir.clone(),
            flag_model: self.flag_model.clone(),
            http: self.http.clone(),
            pulls: self.pulls.clone(),
            windows: self.windows.clone(),
            inspected: self.inspected.clone(),
        })
    }
}
