//! System helpers (`/api`): status, token usage, notices, activity, changelog, survey,
//! emotion, translation, files and images, the meme proxy, desktop capture, proactive
//! chat, mini-game invitations, the seven-day tutorial, the autostart prompt, platform
//! achievements and guide handoff tokens (interface.md § System).
//!
//! `src/http.rs` holds the thin handlers; every other module is a domain module that
//! knows nothing of HTTP. The family's in-memory state ([`Sys`]) is created once per
//! application in [`api`] and handed to the handlers that need it.

pub mod activity;
pub mod autostart;
pub mod changelog;
pub mod desktop;
pub mod emotion;
pub mod error;
pub mod files;
pub mod handoff;
mod http;
pub mod meme;
pub mod platform;
pub mod proactive;
pub mod status;
pub mod survey;
pub mod translate;
pub mod tutorial;
pub mod usage;

use std::sync::Arc;

use axum::extract::State;
use axum::handler::Handler;
use axum::http::Method;
use axum::routing;
use companiond_core::guards::{csrf_success, Csrf};
use companiond_core::state::{InputObserver, InputSource};
use companiond_core::{Api, AppState};

/// In-memory state of the family (lost on restart, as the reference's).
pub struct Sys {
    pub tracker: activity::Tracker,
    pub proactive: proactive::Proactive,
    pub handoff: handoff::Handoff,
    pub meme: meme::MemeProxy,
    /// Google translate base URL (`None` = Google disabled).
    pub google: Option<String>,
    pub roots: files::Roots,
}

impl Sys {
    pub fn new(st: &AppState) -> Sys {
        Sys {
            tracker: activity::Tracker::default(),
            proactive: proactive::Proactive::default(),
            handoff: handoff::Handoff::default(),
            meme: meme::MemeProxy::new(meme::Policy::from_env()),
            google: translate::google_base_from_env(),
            roots: files::Roots::new(
                st.bundle_dir(),
                st.data_dir(),
                st.opts.workshop_dir.as_deref(),
            ),
        }
    }
}

/// Bind the family state to a handler taking `(Arc<Sys>, AppState, extractors...)`.
macro_rules! with_sys {
    ($sys:expr, $f:path $(, $arg:ident : $ty:ty)*) => {{
        let sys: Arc<Sys> = $sys.clone();
        move |State(st): State<AppState> $(, $arg: $ty)*| $f(sys.clone(), st $(, $arg)*)
    }};
}

/// Like `Api::guarded` with `Csrf::Success`, plus `Cache-Control: no-store` on every
/// answer, the guard's 403 included (handoff and screenshot routes).
fn guarded_post_no_store<H: Handler<T, AppState>, T: 'static>(
    api: Api,
    path: &str,
    summary: &str,
    h: H,
) -> Api {
    let st = api.state().clone();
    let mr = routing::on(routing::MethodFilter::POST, h)
        .layer(axum::middleware::from_fn_with_state(st, csrf_success))
        .layer(axum::middleware::map_response(http::add_no_store));
    api.route(Method::POST, path, summary, mr)
}

/// Dismisses or answers a pending mini-game invitation when the user chats.
struct InviteObserver {
    sys: Arc<Sys>,
    state: std::sync::Weak<companiond_core::state::Inner>,
}

impl InputObserver for InviteObserver {
    fn observe(&self, character: &str, text: &str, _source: InputSource) {
        if let Some(inner) = self.state.upgrade() {
            let st = AppState(inner);
            let now = companiond_core::now_millis();
            self.sys.proactive.on_chat_input(&st, character, text, now);
        }
    }
}

/// The system routes.
pub fn api(state: &AppState) -> Api {
    let sys = Arc::new(Sys::new(state));
    state.hooks.add_input_observer(Arc::new(InviteObserver {
        sys: sys.clone(),
        state: Arc::downgrade(&state.0),
    }));
    use axum::body::Body;
    use axum::extract::{Path, RawQuery};
    let api = Api::new(state, "system")
        .get(
            "/api/system/status",
            "bootstrap status snapshot with storage-migration flags (no-store)",
            http::status,
        )
        .get(
            "/api/token-usage",
            "token statistics (query days, default 7, at most 90)",
            http::token_usage,
        )
        .get(
            "/api/pending-notices",
            "peek queued notices and the cursor",
            http::pending_notices,
        )
        .guarded(
            Method::POST,
            "/api/pending-notices/ack",
            "drain notices at or before a cursor",
            Csrf::Success,
            http::ack,
        )
        .guarded(
            Method::POST,
            "/api/activity_signal",
            "bounded activity heartbeat for the activity tracker",
            Csrf::Success,
            with_sys!(sys, http::activity_signal, body: Body),
        )
        .get(
            "/api/changelog",
            "changelog entries newer than query since (query lang)",
            http::changelog,
        )
        .get(
            "/api/survey",
            "the current-version survey or has_survey false",
            http::survey,
        )
        .guarded(
            Method::POST,
            "/api/survey/submit",
            "submit or skip the current survey",
            Csrf::Success,
            http::survey_submit,
        )
        .guarded(
            Method::POST,
            "/api/emotion/analysis",
            "emotion of a text (model with heuristic fallback)",
            Csrf::Success,
            http::emotion,
        )
        .guarded(
            Method::POST,
            "/api/translate",
            "translate text (Google, then the model)",
            Csrf::Success,
            with_sys!(sys, http::translate, body: Body),
        )
        .get(
            "/api/file-exists",
            "whether query path is an existing regular file",
            http::file_exists,
        )
        .get(
            "/api/find-first-image",
            "first preview image under 1 MiB in an approved folder",
            with_sys!(sys, http::find_first_image, q: RawQuery),
        )
        .get(
            "/api/meme/proxy-image",
            "SSRF-checked HTTP(S) image proxy with cache",
            with_sys!(sys, http::meme_proxy, q: RawQuery),
        )
        .get(
            "/api/platform/proxy-image",
            "approved local or workshop image",
            with_sys!(sys, http::platform_proxy_image, q: RawQuery),
        )
        .get(
            "/api/get_window_title",
            "active window title when available",
            http::window_title,
        );
    let api = guarded_post_no_store(
        api,
        "/api/screenshot",
        "loopback-only screen capture (JPEG data URL)",
        http::screenshot,
    );
    api.post(
        "/api/screenshot/interactive",
        "loopback-only native region selection",
        http::screenshot_interactive,
    )
    .guarded(
        Method::POST,
        "/api/proactive_chat",
        "proactive source selection, generation and delivery",
        Csrf::Success,
        with_sys!(sys, http::proactive_chat, body: Body),
    )
    .guarded(
        Method::POST,
        "/api/proactive/music_played_through",
        "a recommended song finished (positive signal)",
        Csrf::Success,
        with_sys!(sys, http::music_played_through, body: Body),
    )
    .guarded(
        Method::POST,
        "/api/mini_game/invite/respond",
        "respond to the pending mini-game invitation",
        Csrf::Success,
        with_sys!(sys, http::invite_respond, body: Body),
    )
    .get(
        "/api/seven-day-tutorial/state",
        "authoritative Day 1 to 7 tutorial progress",
        http::tutorial_get,
    )
    .guarded(
        Method::PUT,
        "/api/seven-day-tutorial/state",
        "replace the tutorial state (expectedRevision)",
        Csrf::Success,
        http::tutorial_put,
    )
    .get(
        "/api/autostart-prompt/state",
        "autostart prompt state (public view)",
        http::autostart_state,
    )
    .guarded(
        Method::POST,
        "/api/autostart-prompt/heartbeat",
        "record homepage usage; decide whether a prompt is due",
        Csrf::Success,
        http::autostart_heartbeat,
    )
    .guarded(
        Method::POST,
        "/api/autostart-prompt/shown",
        "record that the prompt was displayed",
        Csrf::Success,
        http::autostart_shown,
    )
    .guarded(
        Method::POST,
        "/api/autostart-prompt/decision",
        "record the user's decision",
        Csrf::Success,
        http::autostart_decision,
    )
    .guarded(
        Method::POST,
        "/api/platform/set-achievement-status/{name}",
        "unlock a configured achievement",
        Csrf::Success,
        move |State(st): State<AppState>, p: Path<String>| http::set_achievement(st, p),
    )
    .guarded(
        Method::POST,
        "/api/platform/update-playtime",
        "accumulate a bounded playtime delta",
        Csrf::Success,
        http::update_playtime,
    )
    .get(
        "/api/platform/list-achievements",
        "configured achievements and their state",
        http::list_achievements,
    )
    // The original pages' paths of the same routes (docs/frontend.md).
    .guarded(
        Method::POST,
        "/api/steam/set-achievement-status/{name}",
        "alias of /api/platform/set-achievement-status/{name}",
        Csrf::Success,
        move |State(st): State<AppState>, p: Path<String>| http::set_achievement(st, p),
    )
    .guarded(
        Method::POST,
        "/api/steam/update-playtime",
        "alias of /api/platform/update-playtime",
        Csrf::Success,
        http::update_playtime,
    )
    .get(
        "/api/steam/list-achievements",
        "alias of /api/platform/list-achievements",
        http::list_achievements,
    )
    .get(
        "/api/steam/proxy-image",
        "alias of /api/platform/proxy-image",
        with_sys!(sys, http::platform_proxy_image, q: RawQuery),
    )
    .merge(handoff_routes(state, &sys))
}

fn handoff_routes(state: &AppState, sys: &Arc<Sys>) -> Api {
    use axum::body::Body;
    use axum::http::HeaderMap;
    let api = Api::new(state, "system");
    let api = guarded_post_no_store(
        api,
        "/api/guide/handoff/create",
        "create a short-lived signed one-time handoff token (no-store)",
        with_sys!(sys, http::handoff_create, headers: HeaderMap, body: Body),
    );
    let api = guarded_post_no_store(
        api,
        "/api/guide/handoff/consume",
        "consume a handoff token (no-store)",
        with_sys!(sys, http::handoff_consume, headers: HeaderMap, body: Body),
    );
    // The original pages' paths of the same routes (docs/frontend.md).
    let api = guarded_post_no_store(
        api,
        "/api/yui-guide/handoff/create",
        "alias of /api/guide/handoff/create",
        with_sys!(sys, http::handoff_create, headers: HeaderMap, body: Body),
    );
    guarded_post_no_store(
        api,
        "/api/yui-guide/handoff/consume",
        "alias of /api/guide/handoff/consume",
        with_sys!(sys, http::handoff_consume, headers: HeaderMap, body: Body),
    )
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Start-up work of this family, run once every family's routes are built.
pub fn start(_state: &AppState) {}
