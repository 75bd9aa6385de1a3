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

use error::SystemError;

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
        .errors(&["csrf_validation_failed"])
}

/// The failures of a route, by their codes ([`SystemError::answers_of`]).
trait Fails {
    fn errors(self, codes: &[&str]) -> Self;
}

impl Fails for Api {
    fn errors(self, codes: &[&str]) -> Api {
        SystemError::answers_of(codes)
            .into_iter()
            .fold(self, Api::fails_with)
    }
}

/// The failures of reading a JSON object body.
const BODY: &[&str] = &["invalid_json", "invalid_body", "body_too_large"];
/// The failures of the document store and of blocking work.
const STORE: &[&str] = &["storage_error", "internal_error"];
/// The failures of resolving a path under the approved folders.
const PATHS: &[&str] = &[
    "missing_path",
    "path_traversal",
    "invalid_path",
    "forbidden_path",
    "not_found",
    "internal_error",
];
/// The failures of the platform routes.
const PLATFORM: &[&str] = &["platform_unavailable", "storage_error", "internal_error"];
/// The failures of a handoff create.
const HANDOFF_CREATE: &[&str] = &["invalid_target_page"];
/// The failures of a handoff consume.
const HANDOFF_CONSUME: &[&str] = &[
    "invalid_handoff_token",
    "invalid_expected_page",
    "invalid_consumer_id",
    "handoff_token_not_found",
    "handoff_signature_mismatch",
    "handoff_origin_mismatch",
    "handoff_target_mismatch",
    "handoff_token_consumed",
];

/// The system routes; each states what it reads and answers (docs/system.md § OpenAPI).
pub fn api(state: &AppState) -> Api {
    use http::bodies::*;
    use http::{
        autostart, changelog, desktop, emotion, files, handoff, platform, proactive, status,
        translate, tutorial,
    };
    let api = Api::new(state, "system")
        .about(
            "System helpers: status, token usage, notices, activity, changelog and survey, \
             emotion and translation, files and images, screen capture, proactive chat, the \
             seven-day tutorial, the autostart prompt, platform achievements and guide handoff \
             tokens. Failures answer `{success:false, error, error_code, ok:false, ...}`.",
        )
        .get(
            "/api/system/status",
            "bootstrap status snapshot with storage-migration flags (no-store)",
            status::status,
        )
        .id("status")
        .ok::<status::SystemStatus>()
        .get(
            "/api/token-usage",
            "token statistics (query days, default 7, at most 90)",
            status::token_usage,
        )
        .id("token_usage")
        .query::<TokenUsageQuery>()
        .ok::<crate::token_usage::Statistics>()
        .errors(&["invalid_days", "usage_unavailable", "internal_error"])
        .get(
            "/api/pending-notices",
            "peek queued notices and the cursor",
            status::pending_notices,
        )
        .id("pending_notices")
        .ok::<status::PendingNotices>()
        .guarded(
            Method::POST,
            "/api/pending-notices/ack",
            "drain notices at or before a cursor",
            Csrf::Success,
            status::ack,
        )
        .id("ack_notices")
        .json_body::<NoticesAckBody>()
        .ok::<status::NoticesAcked>()
        .errors(BODY)
        .guarded(
            Method::POST,
            "/api/activity_signal",
            "bounded activity heartbeat for the activity tracker",
            Csrf::Success,
            status::activity_signal,
        )
        .id("activity_signal")
        .json_body::<ActivityBody>()
        .ok::<status::ActivityAccepted>()
        .errors(BODY)
        .errors(&[
            "missing_persona_name",
            "invalid_signal",
            "missing_signal",
            "character_not_found",
            "rate_limited",
        ])
        .get(
            "/api/changelog",
            "changelog entries newer than query since (query lang)",
            changelog::changelog,
        )
        .id("changelog")
        .query::<ChangelogQuery>()
        .ok::<changelog::Changelog>()
        .errors(&["internal_error"])
        .get(
            "/api/survey",
            "the current-version survey or has_survey false",
            changelog::survey,
        )
        .id("survey")
        .query::<SurveyQuery>()
        .ok::<changelog::SurveyAnswer>()
        .errors(&["internal_error"])
        .guarded(
            Method::POST,
            "/api/survey/submit",
            "submit or skip the current survey",
            Csrf::Success,
            changelog::survey_submit,
        )
        .id("submit_survey")
        .json_body::<SurveySubmitBody>()
        .ok::<changelog::SurveySubmitted>()
        .errors(BODY)
        .errors(STORE)
        .errors(&["no_survey"])
        .guarded(
            Method::POST,
            "/api/emotion/analysis",
            "emotion of a text (model with heuristic fallback)",
            Csrf::Success,
            emotion::emotion,
        )
        .id("analyse_emotion")
        .json_body::<EmotionBody>()
        .ok::<emotion::Emotion>()
        .errors(BODY)
        .errors(&["missing_text"])
        .guarded(
            Method::POST,
            "/api/translate",
            "translate text (Google, then the model)",
            Csrf::Success,
            translate::translate,
        )
        .id("translate")
        .json_body::<TranslateBody>()
        .ok::<translate::Translated>()
        .errors(BODY)
        .errors(&["missing_text", "text_too_long"])
        .get(
            "/api/file-exists",
            "whether query path is an existing regular file",
            files::file_exists,
        )
        .id("file_exists")
        .query::<FileExistsQuery>()
        .ok::<files::FileExists>()
        .errors(&[
            "missing_path",
            "path_traversal",
            "invalid_path",
            "internal_error",
        ])
        .get(
            "/api/find-first-image",
            "first preview image under 1 MiB in an approved folder",
            files::find_first_image,
        )
        .id("find_first_image")
        .query::<FirstImageQuery>()
        .ok::<files::FirstImage>()
        .errors(PATHS)
        .errors(&["not_a_folder"])
        .get(
            "/api/meme/proxy-image",
            "SSRF-checked HTTP(S) image proxy with cache",
            files::meme_proxy,
        )
        .id("meme_proxy_image")
        .query::<MemeUrlQuery>()
        .ok_file("image/*")
        .errors(&[
            "missing_url",
            "invalid_url",
            "forbidden_target",
            "forbidden_redirect",
            "unsupported_content_type",
            "not_an_image",
            "too_large",
            "upstream_unreachable",
            "too_many_redirects",
            "invalid_redirect",
            "upstream_status",
            "upstream_timeout",
        ])
        .get(
            "/api/platform/proxy-image",
            "approved local or workshop image",
            files::platform_proxy_image,
        )
        .id("platform_proxy_image")
        .query::<ImagePathQuery>()
        .ok_file("image/*")
        .errors(PATHS)
        .errors(&["remote_url_unsupported", "not_an_image", "too_large"])
        .get(
            "/api/get_window_title",
            "active window title when available",
            desktop::window_title,
        )
        .id("window_title")
        .ok::<desktop::WindowTitle>();
    let api = post_no_store(
        api,
        "/api/screenshot",
        "loopback-only screen capture (JPEG data URL)",
        desktop::screenshot,
    )
    .id("screenshot")
    .ok::<desktop::Screenshot>()
    .errors(&[
        "forbidden",
        "capture_unavailable",
        "capture_failed",
        "internal_error",
    ]);
    let api = api
        .post(
            "/api/screenshot/interactive",
            "loopback-only native region selection",
            desktop::screenshot_interactive,
        )
        .id("screenshot_interactive")
        .ok::<desktop::RegionCapture>()
        .errors(&[
            "forbidden",
            "csrf_validation_failed",
            "interactive_unsupported",
            "capture_unavailable",
            "capture_failed",
            "internal_error",
        ])
        .guarded(
            Method::POST,
            "/api/proactive_chat",
            "proactive source selection, generation and delivery",
            Csrf::Success,
            proactive::proactive_chat,
        )
        .id("proactive_chat")
        .json_body::<ProactiveBody>()
        .ok::<proactive::ProactiveRound>()
        .errors(BODY)
        .errors(&[
            "error_character_not_found",
            "pass_busy",
            "error_timeout",
            "error_model_failed",
        ])
        .guarded(
            Method::POST,
            "/api/proactive/music_played_through",
            "a recommended song finished (positive signal)",
            Csrf::Success,
            proactive::music_played_through,
        )
        .id("music_played_through")
        .json_body::<MusicPlayedBody>()
        .ok::<proactive::MusicCleared>()
        .errors(BODY)
        .errors(&["missing_persona_name"])
        .guarded(
            Method::POST,
            "/api/mini_game/invite/respond",
            "respond to the pending mini-game invitation",
            Csrf::Success,
            proactive::invite_respond,
        )
        .id("respond_invite")
        .json_body::<InviteRespondBody>()
        .ok::<proactive::InviteAnswered>()
        .errors(BODY)
        .errors(&["missing_persona_name", "invalid_choice"])
        .get(
            "/api/seven-day-tutorial/state",
            "authoritative Day 1 to 7 tutorial progress",
            tutorial::get_state,
        )
        .id("tutorial_state")
        .ok::<crate::tutorial::Public>()
        .errors(STORE)
        .guarded(
            Method::PUT,
            "/api/seven-day-tutorial/state",
            "replace the tutorial state (expectedRevision)",
            Csrf::Success,
            tutorial::put_state,
        )
        .id("put_tutorial_state")
        .json_body::<TutorialPutBody>()
        .ok::<crate::tutorial::Public>()
        .errors(BODY)
        .errors(STORE)
        .errors(&[
            "invalid_state",
            "invalid_expected_revision",
            "seven_day_tutorial_revision_conflict",
        ])
        .get(
            "/api/autostart-prompt/state",
            "autostart prompt state (public view)",
            autostart::state,
        )
        .id("autostart_state")
        .ok::<autostart::AutostartPromptView>()
        .errors(STORE)
        .guarded(
            Method::POST,
            "/api/autostart-prompt/heartbeat",
            "record homepage usage; decide whether a prompt is due",
            Csrf::Success,
            autostart::heartbeat,
        )
        .id("autostart_heartbeat")
        .json_body::<AutostartHeartbeatBody>()
        .ok::<autostart::AutostartHeartbeat>()
        .errors(BODY)
        .errors(STORE)
        .guarded(
            Method::POST,
            "/api/autostart-prompt/shown",
            "record that the prompt was displayed",
            Csrf::Success,
            autostart::shown,
        )
        .id("autostart_shown")
        .json_body::<AutostartShownBody>()
        .ok::<autostart::AutostartShown>()
        .errors(BODY)
        .errors(STORE)
        .errors(&["invalid_prompt_token"])
        .guarded(
            Method::POST,
            "/api/autostart-prompt/decision",
            "record the user's decision",
            Csrf::Success,
            autostart::decision,
        )
        .id("autostart_decision")
        .json_body::<AutostartDecisionBody>()
        .ok::<autostart::AutostartDecided>()
        .errors(BODY)
        .errors(STORE)
        .errors(&["invalid_decision", "invalid_prompt_token"])
        .guarded(
            Method::POST,
            "/api/platform/set-achievement-status/{name}",
            "unlock a configured achievement",
            Csrf::Success,
            platform::set_achievement,
        )
        .id("set_achievement")
        .ok::<platform::AchievementSet>()
        .errors(PLATFORM)
        .errors(&["invalid_achievement", "achievement_not_found"])
        .guarded(
            Method::POST,
            "/api/platform/update-playtime",
            "accumulate a bounded playtime delta",
            Csrf::Success,
            platform::update_playtime,
        )
        .id("update_playtime")
        .json_body::<PlaytimeBody>()
        .ok::<platform::PlaytimeRecorded>()
        .errors(BODY)
        .errors(PLATFORM)
        .errors(&["invalid_seconds"])
        .get(
            "/api/platform/list-achievements",
            "configured achievements and their state",
            platform::list_achievements,
        )
        .id("list_achievements")
        .ok::<platform::Achievements>()
        .errors(PLATFORM)
        // The original pages' paths of the same routes (docs/frontend.md).
        .guarded(
            Method::POST,
            "/api/steam/set-achievement-status/{name}",
            "alias of /api/platform/set-achievement-status/{name}",
            Csrf::Success,
            platform::set_achievement,
        )
        .id("steam_set_achievement")
        .ok::<platform::AchievementSet>()
        .errors(PLATFORM)
        .errors(&["invalid_achievement", "achievement_not_found"])
        .guarded(
            Method::POST,
            "/api/steam/update-playtime",
            "alias of /api/platform/update-playtime",
            Csrf::Success,
            platform::update_playtime,
        )
        .id("steam_update_playtime")
        .json_body::<PlaytimeBody>()
        .ok::<platform::PlaytimeRecorded>()
        .errors(BODY)
        .errors(PLATFORM)
        .errors(&["invalid_seconds"])
        .get(
            "/api/steam/list-achievements",
            "alias of /api/platform/list-achievements",
            platform::list_achievements,
        )
        .id("steam_list_achievements")
        .ok::<platform::Achievements>()
        .errors(PLATFORM)
        .get(
            "/api/steam/proxy-image",
            "alias of /api/platform/proxy-image",
            files::platform_proxy_image,
        )
        .id("steam_proxy_image")
        .query::<ImagePathQuery>()
        .ok_file("image/*")
        .errors(PATHS)
        .errors(&["remote_url_unsupported", "not_an_image", "too_large"]);
    let api = post_no_store(
        api,
        "/api/guide/handoff/create",
        "create a short-lived signed one-time handoff token (no-store)",
        handoff::create,
    )
    .id("create_handoff")
    .json_body::<HandoffCreateBody>()
    .ok::<handoff::HandoffToken>()
    .errors(BODY)
    .errors(HANDOFF_CREATE);
    let api = post_no_store(
        api,
        "/api/guide/handoff/consume",
        "consume a handoff token (no-store)",
        handoff::consume,
    )
    .id("consume_handoff")
    .json_body::<HandoffConsumeBody>()
    .ok::<handoff::HandoffToken>()
    .errors(BODY)
    .errors(HANDOFF_CONSUME);
    // The original pages' paths of the same routes (docs/frontend.md).
    let api = post_no_store(
        api,
        "/api/yui-guide/handoff/create",
        "alias of /api/guide/handoff/create",
        handoff::create,
    )
    .id("yui_create_handoff")
    .json_body::<HandoffCreateBody>()
    .ok::<handoff::HandoffToken>()
    .errors(BODY)
    .errors(HANDOFF_CREATE);
    post_no_store(
        api,
        "/api/yui-guide/handoff/consume",
        "alias of /api/guide/handoff/consume",
        handoff::consume,
    )
    .id("yui_consume_handoff")
    .json_body::<HandoffConsumeBody>()
    .ok::<handoff::HandoffToken>()
    .errors(BODY)
    .errors(HANDOFF_CONSUME)
}
