//! System helpers (`/api`): status, token usage, notices, activity, changelog, survey,
//! emotion, translation, files and images, the meme proxy, desktop capture, proactive
//! chat, mini-game invitations, the seven-day tutorial, the autostart prompt, platform
//! achievements and guide handoff tokens (docs/system.md).
//!
//! `src/http/` holds the thin handlers, one file per resource; every other module is a
//! domain module that knows nothing of HTTP. The family's in-memory state
//! ([`state::SystemState`]) is provided once per application in [`start`] and reaches
//! the handlers through `Ext<SystemState>`.

mod activity;
mod autostart;
mod changelog;
mod desktop;
mod emotion;
mod error;
mod files;
mod handoff;
mod http;
mod meme;
mod model;
mod persona;
mod platform;
mod proactive;
mod state;
mod status;
mod survey;
#[cfg(test)]
mod testing;
mod token_usage;
mod translate;
mod tutorial;

use std::sync::Arc;

use axum::handler::Handler;
use axum::http::Method;
use axum::routing;
use companiond_core::guards::{csrf_success, Csrf};
use companiond_core::server::Family;
use companiond_core::{Api, AppState};

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: Family = Family { api, start };

/// Start-up work: provide the family state and let a chat message answer a pending
/// mini-game invitation.
pub fn start(state: &AppState) {
    let sys = Arc::new(state::SystemState::new(state));
    state
        .hooks
        .add_input_observer(Arc::new(state::InviteObserver::new(sys.clone(), state)));
    state.provide(sys);
}

/// Like `Api::guarded` with `Csrf::Success`, plus `Cache-Control: no-store` on every
/// answer, the guard's 403 included (handoff and screenshot routes).
fn post_no_store<H: Handler<T, AppState>, T: 'static>(
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

/// The system routes.
pub fn api(state: &AppState) -> Api {
    use http::{
        autostart, changelog, desktop, emotion, files, handoff, platform, proactive, status,
        translate, tutorial,
    };
    let api = Api::new(state, "system")
        .get(
            "/api/system/status",
            "bootstrap status snapshot with storage-migration flags (no-store)",
            status::status,
        )
        .get(
            "/api/token-usage",
            "token statistics (query days, default 7, at most 90)",
            status::token_usage,
        )
        .get(
            "/api/pending-notices",
            "peek queued notices and the cursor",
            status::pending_notices,
        )
        .guarded(
            Method::POST,
            "/api/pending-notices/ack",
            "drain notices at or before a cursor",
            Csrf::Success,
            status::ack,
        )
        .guarded(
            Method::POST,
            "/api/activity_signal",
            "bounded activity heartbeat for the activity tracker",
            Csrf::Success,
            status::activity_signal,
        )
        .get(
            "/api/changelog",
            "changelog entries newer than query since (query lang)",
            changelog::changelog,
        )
        .get(
            "/api/survey",
            "the current-version survey or has_survey false",
            changelog::survey,
        )
        .guarded(
            Method::POST,
            "/api/survey/submit",
            "submit or skip the current survey",
            Csrf::Success,
            changelog::survey_submit,
        )
        .guarded(
            Method::POST,
            "/api/emotion/analysis",
            "emotion of a text (model with heuristic fallback)",
            Csrf::Success,
            emotion::emotion,
        )
        .guarded(
            Method::POST,
            "/api/translate",
            "translate text (Google, then the model)",
            Csrf::Success,
            translate::translate,
        )
        .get(
            "/api/file-exists",
            "whether query path is an existing regular file",
            files::file_exists,
        )
        .get(
            "/api/find-first-image",
            "first preview image under 1 MiB in an approved folder",
            files::find_first_image,
        )
        .get(
            "/api/meme/proxy-image",
            "SSRF-checked HTTP(S) image proxy with cache",
            files::meme_proxy,
        )
        .get(
            "/api/platform/proxy-image",
            "approved local or workshop image",
            files::platform_proxy_image,
        )
        .get(
            "/api/get_window_title",
            "active window title when available",
            desktop::window_title,
        );
    let api = post_no_store(
        api,
        "/api/screenshot",
        "loopback-only screen capture (JPEG data URL)",
        desktop::screenshot,
    );
    let api = api
        .post(
            "/api/screenshot/interactive",
            "loopback-only native region selection",
            desktop::screenshot_interactive,
        )
        .guarded(
            Method::POST,
            "/api/proactive_chat",
            "proactive source selection, generation and delivery",
            Csrf::Success,
            proactive::proactive_chat,
        )
        .guarded(
            Method::POST,
            "/api/proactive/music_played_through",
            "a recommended song finished (positive signal)",
            Csrf::Success,
            proactive::music_played_through,
        )
        .guarded(
            Method::POST,
            "/api/mini_game/invite/respond",
            "respond to the pending mini-game invitation",
            Csrf::Success,
            proactive::invite_respond,
        )
        .get(
            "/api/seven-day-tutorial/state",
            "authoritative Day 1 to 7 tutorial progress",
            tutorial::get_state,
        )
        .guarded(
            Method::PUT,
            "/api/seven-day-tutorial/state",
            "replace the tutorial state (expectedRevision)",
            Csrf::Success,
            tutorial::put_state,
        )
        .get(
            "/api/autostart-prompt/state",
            "autostart prompt state (public view)",
            autostart::state,
        )
        .guarded(
            Method::POST,
            "/api/autostart-prompt/heartbeat",
            "record homepage usage; decide whether a prompt is due",
            Csrf::Success,
            autostart::heartbeat,
        )
        .guarded(
            Method::POST,
            "/api/autostart-prompt/shown",
            "record that the prompt was displayed",
            Csrf::Success,
            autostart::shown,
        )
        .guarded(
            Method::POST,
            "/api/autostart-prompt/decision",
            "record the user's decision",
            Csrf::Success,
            autostart::decision,
        )
        .guarded(
            Method::POST,
            "/api/platform/set-achievement-status/{name}",
            "unlock a configured achievement",
            Csrf::Success,
            platform::set_achievement,
        )
        .guarded(
            Method::POST,
            "/api/platform/update-playtime",
            "accumulate a bounded playtime delta",
            Csrf::Success,
            platform::update_playtime,
        )
        .get(
            "/api/platform/list-achievements",
            "configured achievements and their state",
            platform::list_achievements,
        )
        // The original pages' paths of the same routes (docs/frontend.md).
        .guarded(
            Method::POST,
            "/api/steam/set-achievement-status/{name}",
            "alias of /api/platform/set-achievement-status/{name}",
            Csrf::Success,
            platform::set_achievement,
        )
        .guarded(
            Method::POST,
            "/api/steam/update-playtime",
            "alias of /api/platform/update-playtime",
            Csrf::Success,
            platform::update_playtime,
        )
        .get(
            "/api/steam/list-achievements",
            "alias of /api/platform/list-achievements",
            platform::list_achievements,
        )
        .get(
            "/api/steam/proxy-image",
            "alias of /api/platform/proxy-image",
            files::platform_proxy_image,
        );
    let api = post_no_store(
        api,
        "/api/guide/handoff/create",
        "create a short-lived signed one-time handoff token (no-store)",
        handoff::create,
    );
    let api = post_no_store(
        api,
        "/api/guide/handoff/consume",
        "consume a handoff token (no-store)",
        handoff::consume,
    );
    // The original pages' paths of the same routes (docs/frontend.md).
    let api = post_no_store(
        api,
        "/api/yui-guide/handoff/create",
        "alias of /api/guide/handoff/create",
        handoff::create,
    );
    post_no_store(
        api,
        "/api/yui-guide/handoff/consume",
        "alias of /api/guide/handoff/consume",
        handoff::consume,
    )
}
