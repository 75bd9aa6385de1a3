//! The engine: one worker thread owns the loaded model (one copy for every
//! character), takes chat requests before background ones, keeps the KV cache
//! of the last prompt so the next one only computes what changed, and unloads
//! the model after the idle time (docs/local-model.md, "Resources").

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use companiond_core::llm::{Completion, LlmError};
use companiond_core::local_model::{LocalEvent, LocalRequest};
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use crate::gguf;
use crate::json_guard::JsonGuard;
use crate::schema_guard::SchemaGuard;

/// The constraint of a JSON answer: any object, or one following a schema.
#[derive(Clone)]
enum Guard {
    Free(JsonGuard),
    Schema(SchemaGuard),
}

impl Guard {
    fn feed(&mut self, t: &str) -> bool {
        match self {
            Guard::Free(g) => g.feed(t),
            Guard::Schema(g) => g.feed(t),
        }
    }
    fn done(&self) -> bool {
        match self {
            Guard::Free(g) => g.done(),
            Guard::Schema(g) => g.done(),
        }
    }
    fn closing(&self) -> String {
        match self {
            Guard::Free(g) => g.closing(),
            Guard::Schema(g) => g.closing(),
        }
    }
}
use crate::model::{self, Model};
use crate::template::Template;
use crate::tokenizer::{Stream, Tok};

/// What a request runs with (read from the settings for each request).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub model: PathBuf,
    /// The embedding model (the chat model when unset).
    pub embedding: Option<PathBuf>,
    pub threads: usize,
    pub idle: Duration,
    /// The context window; the model's (at most [`DEFAULT_MAX_CONTEXT`]) when unset.
    pub context: Option<usize>,
}

/// The largest context used when `localContextWindow` is not set (a model
/// trained on 128k tokens would otherwise reserve gigabytes of cache).
pub const DEFAULT_MAX_CONTEXT: usize = 8192;
/// Positions computed per forward pass of a prompt.
const CHUNK: usize = 256;

/// The engine's state, for the status route.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Status {
    pub loaded: Option<String>,
    pub state: String,
    pub context_window: Option<usize>,
    pub queued_chat: usize,
    pub queued_background: usize,
    pub last_tokens_per_second: Option<f64>,
    pub last_prompt_tokens: Option<usize>,
    pub last_cached_tokens: Option<usize>,
    pub loads: u64,
    pub unloads: u64,
}

enum Job {
    Generate(LocalRequest, Settings, mpsc::UnboundedSender<LocalEvent>),
    Embed(
        Vec<String>,
        Settings,
        oneshot::Sender<Result<Vec<Vec<f32>>, LlmError>>,
    ),
    Unload,
}

#[derive(Default)]
struct Queues {
    chat: VecDeque<Job>,
    background: VecDeque<Job>,
    idle: Option<Duration>,
    started: bool,
}

struct Shared {
    q: Mutex<Queues>,
    cv: Condvar,
    status: Mutex<Status>,
}

/// A handle to the engine (cheap to clone).
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
}

impl Default for Engine {
    fn default() -> Self {
        Self::new()
    }
}

impl Engine {
    pub fn new() -> Engine {
        Engine {
            shared: Arc::new(Shared {
                q: Mutex::new(Queues::default()),
                cv: Condvar::new(),
                status: Mutex::new(Status {
                    state: "unloaded".into(),
                    ..Default::default()
                }),
            }),
        }
    }

    pub fn status(&self) -> Status {
        let mut s = lock(&self.shared.status).clone();
        let q = lock(&self.shared.q);
        s.queued_chat = q.chat.len();
        s.queued_background = q.background.len();
        s
    }

    fn push(&self, job: Job, background: bool, idle: Duration) {
        let mut q = lock(&self.shared.q);
        q.idle = Some(idle);
        if background {
            q.background.push_back(job);
        } else {
            q.chat.push_back(job);
        }
        if !q.started {
            q.started = true;
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name("local-model".into())
                .spawn(move || worker(shared));
            if let Err(e) = spawned {
                tracing::error!("cannot start the local model's thread: {e}");
                q.started = false;
            }
        }
        self.shared.cv.notify_all();
    }

    /// Queue a generation.
    pub fn generate(
        &self,
        req: LocalRequest,
        settings: Settings,
    ) -> mpsc::UnboundedReceiver<LocalEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        let bg = req.background;
        let idle = settings.idle;
        self.push(Job::Generate(req, settings, tx), bg, idle);
        rx
    }

    /// Queue an embedding (background work).
    pub async fn embed(
        &self,
        texts: Vec<String>,
        settings: Settings,
    ) -> Result<Vec<Vec<f32>>, LlmError> {
        let (tx, rx) = oneshot::channel();
        let idle = settings.idle;
        self.push(Job::Embed(texts, settings, tx), true, idle);
        rx.await
            .map_err(|_| LlmError::Connect("the local model stopped".into()))?
    }

    /// Unload now (the next request loads again).
    pub fn unload(&self) {
        let idle = lock(&self.shared.q)
            .idle
            .unwrap_or(Duration::from_secs(300));
        self.push(Job::Unload, false, idle);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A model in memory.
struct Loaded {
    path: PathBuf,
    threads: usize,
    context: usize,
    model: Model,
    tok: Tok,
    template: Template,
    stops: HashSet<u32>,
    /// The tokens whose keys and values are in the cache, in order.
    cached: Vec<u32>,
    /// Each token's text (JSON-constrained sampling), built on first use.
    texts: Option<Vec<String>>,
    pool: rayon::ThreadPool,
    name: String,
}

struct Worker {
    chat: Option<Loaded>,
    embed: Option<Loaded>,
    last_used: Instant,
}

fn worker(shared: Arc<Shared>) {
    let mut w = Worker {
        chat: None,
        embed: None,
        last_used: Instant::now(),
    };
    loop {
        let job = {
            let mut q = lock(&shared.q);
            loop {
                if let Some(j) = q.chat.pop_front().or_else(|| q.background.pop_front()) {
                    break Some(j);
                }
                let idle = q.idle.unwrap_or(Duration::from_secs(300));
                let loaded = w.chat.is_some() || w.embed.is_some();
                if loaded && w.last_used.elapsed() >= idle {
                    break None;
                }
                let wait = if loaded {
                    idle.saturating_sub(w.last_used.elapsed()) + Duration::from_millis(10)
                } else {
                    Duration::from_secs(3600)
                };
                q = shared
                    .cv
                    .wait_timeout(q, wait)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
        };
        let Some(job) = job else {
            unload(&shared, &mut w);
            continue;
        };
        let run = std::panic::AssertUnwindSafe(|| run_job(&shared, &mut w, job));
        if std::panic::catch_unwind(run).is_err() {
            tracing::error!("the local model failed unexpectedly; it is unloaded");
            unload(&shared, &mut w);
        }
        w.last_used = Instant::now();
    }
}

fn unload(shared: &Shared, w: &mut Worker) {
    let had = w.chat.take().is_some() | w.embed.take().is_some();
    if had {
        trim_heap();
        let mut s = lock(&shared.status);
        s.loaded = None;
        s.state = "unloaded".into();
        s.unloads += 1;
        tracing::info!("the local model is unloaded (idle)");
    }
}

/// Give freed memory back to the system, and the engine's code pages with
/// the rest of the executable's (`companiond_core::alloc::release_code`).
fn trim_heap() {
    companiond_core::alloc::trim();
    companiond_core::alloc::release_code();
}

fn set_state(shared: &Shared, state: &str) {
    lock(&shared.status).state = state.into();
}

fn run_job(shared: &Shared, w: &mut Worker, job: Job) {
    match job {
        Job::Unload => unload(shared, w),
        Job::Generate(req, settings, tx) => {
            let r = ensure(shared, &mut w.chat, &settings.model, &settings)
                .and_then(|l| generate(shared, l, &req, &tx));
            match r {
                Ok(c) => {
                    let _ = tx.send(LocalEvent::Done(c));
                }
                Err(e) => {
                    let _ = tx.send(LocalEvent::Failed(e));
                }
            }
            set_state(shared, "ready");
        }
        Job::Embed(texts, settings, tx) => {
            let path = settings
                .embedding
                .clone()
                .unwrap_or_else(|| settings.model.clone());
            let r = ensure(shared, &mut w.embed, &path, &settings).and_then(|l| embed(l, &texts));
            let _ = tx.send(r);
            set_state(shared, "ready");
        }
    }
}

fn file_err(e: gguf::FileError) -> LlmError {
    LlmError::Status(422, format!("{}: {e}", e.code()))
}

fn engine_err(e: impl std::fmt::Display) -> LlmError {
    LlmError::Protocol(format!("local model: {e}"))
}

/// The context a model runs with under `settings`.
pub fn context_for(trained: usize, settings: &Settings) -> usize {
    settings
        .context
        .unwrap_or(trained.min(DEFAULT_MAX_CONTEXT))
        .clamp(512, trained.max(512))
}

/// candle's CPU thread pool is made once per process, sized by
/// `CANDLE_NUM_THREADS`: set it (unless the environment does) before the
/// first model runs. A later change of `localThreads` needs a restart.
pub(crate) fn set_threads(n: usize) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // A fixed mmap threshold: glibc otherwise raises it after the first
        // big free (a weight matrix), so later tensors of up to 32 MiB come
        // from the heap and stay resident after the unload.
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        // SAFETY: mallopt only changes the allocator's tuning.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        }
        if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
            std::env::set_var("CANDLE_NUM_THREADS", n.max(1).to_string());
        }
        // candle's f32 matmul asks `get_num_threads()` on every call, which
        // reads `RAYON_NUM_THREADS` and, when it is unset, counts the
        // physical cores by parsing /proc/cpuinfo: 8 % of a decoded token's
        // time (perf, `cargo bench --bench local`). Set, it is one lookup.
        if std::env::var_os("RAYON_NUM_THREADS").is_none() {
            std::env::set_var("RAYON_NUM_THREADS", n.max(1).to_string());
        }
    });
}

/// The tokens that end a reply: the file's EOS and EOT and the usual
/// end-of-turn tokens present in its vocabulary.
pub(crate) fn stop_tokens(
    ct: &candle_core::quantized::gguf_file::Content,
    tok: &Tok,
) -> HashSet<u32> {
    let token = |key: &str| -> Option<u32> { ct.metadata.get(key).and_then(|v| v.to_u32().ok()) };
    let mut stops: HashSet<u32> = token("tokenizer.ggml.eos_token_id").into_iter().collect();
    stops.extend(token("tokenizer.ggml.eot_token_id"));
    for s in [
        "<|im_end|>",
        "<|eot_id|>",
        "<|end_of_text|>",
        "<|endoftext|>",
        "<|end|>",
        "<end_of_turn>",
    ] {
        if let Some(id) = tok.token_to_id(s) {
            stops.insert(id);
        }
    }
    stops
}

/// Load `path` into `slot` unless it is there already.
fn ensure<'a>(
    shared: &Shared,
    slot: &'a mut Option<Loaded>,
    path: &Path,
    settings: &Settings,
) -> Result<&'a mut Loaded, LlmError> {
    let same = slot.as_ref().is_some_and(|l| {
        l.path == path
            && l.threads == settings.threads
            && settings.context.is_none_or(|c| c == l.context)
    });
    if !same {
        if slot.take().is_some() {
            trim_heap();
        }
        set_state(shared, "loading");
        set_threads(settings.threads);
        let t = Instant::now();
        let info = gguf::inspect(path, Some(settings.context.unwrap_or(DEFAULT_MAX_CONTEXT)))
            .map_err(file_err)?;
        let context = context_for(info.context_length, settings);
        let model = Model::load(path, context).map_err(engine_err)?;
        let mut f = std::fs::File::open(path).map_err(engine_err)?;
        let ct = candle_core::quantized::gguf_file::Content::read(&mut f).map_err(engine_err)?;
        let tok = Tok::from_gguf(&ct).map_err(engine_err)?;
        let token =
            |key: &str| -> Option<u32> { ct.metadata.get(key).and_then(|v| v.to_u32().ok()) };
        let text_of =
            |id: Option<u32>| -> String { id.and_then(|i| tok.id_to_token(i)).unwrap_or_default() };
        let bos = text_of(token("tokenizer.ggml.bos_token_id"));
        let eos_id = token("tokenizer.ggml.eos_token_id");
        let eos = text_of(eos_id);
        let stops = stop_tokens(&ct, &tok);
        let template = Template::new(info.chat_template.as_deref(), &bos, &eos);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(settings.threads.max(1))
            .thread_name(|i| format!("local-model-{i}"))
            .build()
            .map_err(engine_err)?;
        tracing::info!(
            "local model {} loaded in {} ms ({} MiB, context {context}, {} threads)",
            info.name,
            t.elapsed().as_millis(),
            info.tensor_bytes >> 20,
            settings.threads
        );
        let mut s = lock(&shared.status);
        s.loaded = Some(info.name.clone());
        s.context_window = Some(context);
        s.loads += 1;
        drop(s);
        *slot = Some(Loaded {
            path: path.to_path_buf(),
            threads: settings.threads,
            context,
            model,
            tok,
            template,
            stops,
            cached: Vec::new(),
            texts: None,
            pool,
            name: info.name,
        });
    }
    slot.as_mut()
        .ok_or_else(|| engine_err("the model is not loaded"))
}

/// Compute `tokens` after the longest prefix already in the cache; the
/// logits of the last token.
fn prefill(l: &mut Loaded, tokens: &[u32]) -> Result<(Vec<f32>, usize), LlmError> {
    let mut common = l
        .cached
        .iter()
        .zip(tokens)
        .take_while(|(a, b)| a == b)
        .count()
        .min(l.model.cached);
    if common == tokens.len() {
        common -= 1;
    }
    // The model may keep less (a sliding window no longer held): from there.
    let common = l.model.truncate(common).map_err(engine_err)?;
    l.cached.truncate(common);
    let mut logits = None;
    let mut pos = common;
    while pos < tokens.len() {
        let end = (pos + CHUNK).min(tokens.len());
        let chunk = &tokens[pos..end];
        let model = &mut l.model;
        let r = l.pool.install(|| model.forward(chunk, false));
        match r {
            Ok(t) => logits = Some(t),
            Err(e) => {
                // The cache may hold part of the chunk: start afresh next time.
                let _ = l.model.truncate(0);
                l.cached.clear();
                return Err(engine_err(e));
            }
        }
        l.cached.extend_from_slice(chunk);
        pos = end;
    }
    let logits = logits
        .ok_or_else(|| engine_err("nothing to compute"))?
        .to_vec1::<f32>()
        .map_err(engine_err)?;
    Ok((logits, common))
}

fn step(l: &mut Loaded, token: u32) -> Result<Vec<f32>, LlmError> {
    let model = &mut l.model;
    let r = l.pool.install(|| model.forward(&[token], false));
    let t = match r {
        Ok(t) => t,
        Err(e) => {
            let _ = l.model.truncate(0);
            l.cached.clear();
            return Err(engine_err(e));
        }
    };
    l.cached.push(token);
    t.to_vec1::<f32>().map_err(engine_err)
}

/// A small xorshift generator (sampling needs no more).
struct Rng(u64);

impl Rng {
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Temperature and top-p (0.95) sampling over the 64 likeliest tokens.
fn sample(logits: &[f32], temperature: f32, rng: &mut Rng) -> u32 {
    if temperature <= 0.01 || logits.is_empty() {
        return model::argmax(logits);
    }
    let mut top: Vec<(u32, f32)> = top_k(logits, 64);
    let max = top.first().map(|t| t.1).unwrap_or(0.0);
    let mut sum = 0.0f32;
    for t in &mut top {
        t.1 = ((t.1 - max) / temperature).exp();
        sum += t.1;
    }
    let mut acc = 0.0f32;
    let mut kept = 0usize;
    for t in &top {
        acc += t.1 / sum;
        kept += 1;
        if acc >= 0.95 {
            break;
        }
    }
    let top = &top[..kept.max(1)];
    let total: f32 = top.iter().map(|t| t.1).sum();
    let mut r = rng.next_f32() * total;
    for t in top {
        r -= t.1;
        if r <= 0.0 {
            return t.0;
        }
    }
    top[0].0
}

/// The `k` largest logits, largest first.
pub(crate) fn top_k(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut v: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .map(|(i, &x)| (i as u32, x))
        .collect();
    let k = k.min(v.len());
    if k == 0 {
        return v;
    }
    v.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
    v.truncate(k);
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v
}

/// The likeliest token whose text keeps `guard` a valid JSON prefix.
fn constrained(l: &mut Loaded, logits: &[f32], guard: &Guard) -> Option<(u32, Guard)> {
    if l.texts.is_none() {
        let n = l.tok.vocab_size();
        let texts = (0..n as u32)
            .map(|id| l.tok.decode(&[id], true).unwrap_or_default())
            .collect();
        l.texts = Some(texts);
    }
    let texts = l.texts.as_ref()?;
    let try_one = |id: u32| -> Option<Guard> {
        let t = texts.get(id as usize)?;
        if t.is_empty() || l.stops.contains(&id) {
            return None;
        }
        let mut g = guard.clone();
        g.feed(t).then_some(g)
    };
    for (id, _) in top_k(logits, 64) {
        if let Some(g) = try_one(id) {
            return Some((id, g));
        }
    }
    top_k(logits, logits.len())
        .into_iter()
        .find_map(|(id, _)| try_one(id).map(|g| (id, g)))
}

fn generate(
    shared: &Shared,
    l: &mut Loaded,
    req: &LocalRequest,
    tx: &mpsc::UnboundedSender<LocalEvent>,
) -> Result<Completion, LlmError> {
    set_state(shared, "generating");
    let prompt = l.template.render(&req.messages);
    // A SentencePiece prompt gets the BOS its file asks for when the
    // template did not write one.
    let add_bos = matches!(l.tok, Tok::Spm(_));
    let tokens = l.tok.encode(&prompt, add_bos).map_err(engine_err)?;
    if tokens.is_empty() {
        return Err(LlmError::EmptyReply);
    }
    let room = l.context.saturating_sub(tokens.len());
    if room < 16 {
        return Err(LlmError::Status(
            400,
            format!(
                "context_length_exceeded: the prompt has {} tokens, the context window {}",
                tokens.len(),
                l.context
            ),
        ));
    }
    let max_new = req
        .max_tokens
        .map(|m| m as usize)
        .unwrap_or(l.context / 4)
        .clamp(1, room);
    let t0 = Instant::now();
    let (mut logits, reused) = prefill(l, &tokens)?;
    let t_first = t0.elapsed();
    let temperature = if req.json {
        0.0
    } else {
        req.temperature.unwrap_or(0.7) as f32
    };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ companiond_core::now_millis() as u64);
    let mut out: Vec<u32> = Vec::new();
    let mut text = String::new();
    let mut guard = match (&req.json, &req.schema) {
        (false, _) => None,
        (true, Some(schema)) => Some(Guard::Schema(SchemaGuard::new(schema))),
        (true, None) => Some(Guard::Free(JsonGuard::default())),
    };
    let mut finish = "length";
    // The decode stream's state, kept here so the model stays borrowable.
    let mut stream = Stream::default();
    let t_gen = Instant::now();
    while out.len() < max_new {
        let next = match &guard {
            Some(g) => match constrained(l, &logits, g) {
                Some((id, g2)) => {
                    guard = Some(g2);
                    id
                }
                None => break,
            },
            None => sample(&logits, temperature, &mut rng),
        };
        if guard.is_none() && l.stops.contains(&next) {
            finish = "stop";
            break;
        }
        out.push(next);
        // The new text of this token (none while a character's bytes are
        // incomplete), decoded from the last few tokens only.
        let decoded = l
            .tok
            .step(&mut stream, next, &out, &text)
            .map_err(engine_err)?;
        if let Some(delta) = decoded {
            text.push_str(&delta);
            if !delta.is_empty() && tx.send(LocalEvent::Delta(delta)).is_err() {
                // The caller went away: stop.
                finish = "cancelled";
                break;
            }
        }
        if guard.as_ref().is_some_and(Guard::done) {
            finish = "stop";
            break;
        }
        if out.len() >= max_new {
            break;
        }
        logits = step(l, next)?;
    }
    let whole = l.tok.decode(&out, true).map_err(engine_err)?;
    let mut content = whole.clone();
    if let Some(g) = &guard {
        if !g.done() {
            let close = g.closing();
            let _ = tx.send(LocalEvent::Delta(close.clone()));
            content.push_str(&close);
        }
    } else if whole.len() > text.len() {
        let _ = tx.send(LocalEvent::Delta(
            whole.get(text.len()..).unwrap_or("").to_string(),
        ));
    }
    let gen_secs = t_gen.elapsed().as_secs_f64();
    {
        let mut s = lock(&shared.status);
        s.last_prompt_tokens = Some(tokens.len());
        s.last_cached_tokens = Some(reused);
        if out.len() > 1 && gen_secs > 0.0 {
            s.last_tokens_per_second = Some(out.len() as f64 / gen_secs);
        }
    }
    tracing::debug!(
        "local model: {} prompt tokens ({} from the cache) in {} ms, {} generated in {} ms",
        tokens.len(),
        reused,
        t_first.as_millis(),
        out.len(),
        (gen_secs * 1000.0) as u64
    );
    let _ = &l.name;
    Ok(Completion {
        content: content.trim_start().to_string(),
        tool_calls: Vec::new(),
        finish_reason: Some(finish.into()),
        usage: Some((
            tokens.len() as i64,
            out.len() as i64,
            (tokens.len() + out.len()) as i64,
        )),
    })
}

fn embed(l: &mut Loaded, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
    let last_token = l.name.to_ascii_lowercase().contains("embed");
    let mut out = Vec::with_capacity(texts.len());
    for t in texts {
        let mut ids = l.tok.encode(t.as_str(), false).map_err(engine_err)?;
        ids.truncate(l.context.saturating_sub(1).max(1));
        if last_token {
            if let Some(eos) = l.tok.token_to_id("<|endoftext|>") {
                ids.push(eos);
            }
        }
        if ids.is_empty() {
            ids.push(0);
        }
        let model = &mut l.model;
        let v = l
            .pool
            .install(|| model.embed(&ids, last_token))
            .map_err(engine_err)?;
        out.push(v);
    }
    l.cached.clear();
    Ok(out)
}
