//! Assembling and serving the application.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::http::api::{openapi_document, Api, OpDoc, TagDoc};
use crate::http::{
    backup, characters, chat_socket, front, health, multipart, observe, static_files,
};
use crate::instance::InstanceLock;
use crate::options::{resolve_listen, Options, ServeArgs};
use crate::state::AppState;

/// A family of the interface as the binary lists it (`src/lib.rs`, `FAMILIES`):
/// its routes and its start-up work.
#[derive(Clone, Copy)]
pub struct Family {
    /// The family's routes (each registration also documents it in `/openapi.json`).
    pub api: fn(&AppState) -> Api,
    /// Start-up work once every family's routes are built: ensure files, start
    /// watchers, sweep leftovers, install hooks. Must return quickly (spawn what is slow).
    pub start: fn(&AppState),
}

impl Family {
    /// A family with routes and no start-up work (tests' small probe families).
    pub const fn routes(api: fn(&AppState) -> Api) -> Family {
        Family {
            api,
            start: no_start,
        }
    }
}

fn no_start(_: &AppState) {}

#[derive(Clone)]
struct OpenApiDoc {
    ops: Arc<Vec<OpDoc>>,
    tags: Arc<Vec<TagDoc>>,
    json: Arc<OnceLock<Vec<u8>>>,
}

/// The whole application: core routes, every family, `/openapi.json`, static files.
pub fn build_app(state: &AppState, families: &[Family]) -> Router {
    let mut api = characters::api(state)
        .merge(chat_socket::api(state))
        .merge(health::api(state))
        .merge(backup::api(state));
    for f in families {
        api = api.merge((f.api)(state));
    }
    for f in families {
        (f.start)(state);
    }
    let (router, ops, tags) = api.into_parts();
    let families: observe::Families = Arc::new(
        ops.iter()
            .map(|op| (op.path.clone(), op.tag.clone()))
            .collect(),
    );
    let doc = OpenApiDoc {
        ops: Arc::new(ops),
        tags: Arc::new(tags),
        json: Arc::default(),
    };
    let router = router
        .merge(static_files::router())
        .with_state(state.clone())
        .route("/openapi.json", get(openapi_json).with_state(doc))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found") })
        .layer(axum::middleware::from_fn(front::catch_panic))
        .layer(axum::middleware::from_fn_with_state(
            state.host_policy.clone(),
            front::front_door,
        ))
        .layer(axum::middleware::from_fn(multipart::drain_unread));
    observe::layer(router, families)
}

async fn openapi_json(State(doc): State<OpenApiDoc>) -> Response {
    let bytes = doc.json.get_or_init(|| {
        serde_json::to_vec(&openapi_document(&doc.ops, &doc.tags)).unwrap_or_default()
    });
    ([(header::CONTENT_TYPE, "application/json")], bytes.clone()).into_response()
}

/// Create the data dir and prove it writable.
pub fn prepare_data_dir(opts: &Options) -> Result<(), String> {
    let d = &opts.data_dir;
    std::fs::create_dir_all(d.join("config"))
        .map_err(|e| format!("data directory {} is not writable: {e}", d.display()))?;
    let probe = d
        .join("config")
        .join(format!(".write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"ok")
        .map_err(|e| format!("data directory {} is not writable: {e}", d.display()))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// Serve `app` on `listener` until `shutdown` fires; in-flight requests get 5 s.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    state: AppState,
    shutdown: CancellationToken,
) {
    let root = state.data_dir().to_path_buf();
    // Crash leftovers are swept beside the server, never before its first answer.
    tokio::task::spawn_blocking(move || {
        let n = crate::store::sweep_leftover_temps(&root);
        if n > 0 {
            tracing::info!("removed {n} temporary file(s) left by an interrupted write");
        }
    });
    let graceful = shutdown.clone();
    // TCP_NODELAY: an answer written in several parts (a large JSON body, a
    // chat delta, an audio frame) must not wait for the client's delayed ACK.
    let server = axum::serve(
        listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
        }),
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move { graceful.cancelled().await });
    let closer = async {
        shutdown.cancelled().await;
        // Close chat connections so graceful shutdown can finish.
        for m in state.sessions.all() {
            let _ = m.terminate(Duration::from_secs(2)).await;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    tokio::select! {
        r = server => if let Err(e) = r { tracing::error!("server error: {e}"); },
        _ = closer => tracing::warn!("in-flight requests did not finish within 5 s; aborting them"),
    }
}

/// Run `companiond serve`; returns the process exit code.
pub async fn run(args: ServeArgs, families: &[Family]) -> i32 {
    let opts = match args.resolve() {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    let addr = match resolve_listen(&opts.listen, opts.allow_remote).await {
        Ok(a) => a,
        Err(e) => return fail(&e),
    };
    // The data dir's lock comes before any other write to it.
    let instance = match InstanceLock::acquire(&opts.data_dir) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    // An archive kept by `POST /api/backup/restore` replaces the folder
    // before anything reads it (docs/data.md).
    match crate::backup::apply_pending(&opts.data_dir) {
        Some(Ok(r)) => tracing::info!(
            "restored {} files from a backup; the replaced files are in {}",
            r.files,
            r.replaced
                .as_deref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        ),
        Some(Err(e)) => tracing::error!("the pending backup was not restored: {e}"),
        None => {}
    }
    if let Err(e) = prepare_data_dir(&opts) {
        return fail(&e);
    }
    let state = match AppState::new(opts) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let app = build_app(&state, families);
    let listener = match TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => return fail(&format!("cannot listen on {addr}: {e}")),
    };
    let local = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => return fail(&format!("cannot read the listening address: {e}")),
    };
    // Install the signal handlers before announcing the port, so a SIGTERM that
    // follows the listening line at once is handled (exit 0), not fatal.
    let signals = Signals::install();
    if let Err(e) = instance.announce(local) {
        tracing::warn!("{e}");
    }
    state.set_ready(true);
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on http://{local}");
        let _ = out.flush();
    }
    tracing::info!(
        "companiond listening on http://{local} (data dir {})",
        state.data_dir().display()
    );
    crate::alloc::spawn_trimmer();
    // Start-up's code ran once; its pages go once the first second is over.
    tokio::spawn(async {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let _ = tokio::task::spawn_blocking(crate::alloc::release_code).await;
    });
    let shutdown = CancellationToken::new();
    let trigger = shutdown.clone();
    tokio::spawn(async move {
        signals.wait().await;
        tracing::info!("shutting down");
        trigger.cancel();
    });
    serve(listener, app, state, shutdown).await;
    drop(instance);
    0
}

fn fail(reason: &str) -> i32 {
    eprintln!("companiond: {reason}");
    1
}

/// SIGINT / SIGTERM listeners.
struct Signals {
    #[cfg(unix)]
    streams: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    fn install() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            match (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) {
                (Ok(t), Ok(i)) => Signals {
                    streams: Some((t, i)),
                },
                _ => Signals { streams: None },
            }
        }
        #[cfg(not(unix))]
        {
            Signals {}
        }
    }

    async fn wait(self) {
        #[cfg(unix)]
        {
            if let Some((mut term, mut int)) = self.streams {
                tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
                return;
            }
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Log to standard error; `RUST_LOG` filters (default `info`).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}
