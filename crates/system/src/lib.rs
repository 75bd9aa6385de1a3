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
        .errors("csrf_validation_failed")
}

/// The failures of a route, by their codes ([`SystemError::answers_of`]).
trait Fails: Sized {
    /// `codes`: the route's failure codes, separated by spaces.
    fn errors(self, codes: &str) -> Self;
    /// Apply the documentation shared by a route and its alias.
    fn docs(self, f: fn(Self) -> Self) -> Self {
        f(self)
    }
    /// The JSON object body `T` and the failures of reading it ([`BODY`]).
    fn body<T: utoipa::ToSchema>(self) -> Self;
}

impl Fails for Api {
    fn body<T: utoipa::ToSchema>(self) -> Api {
        self.json_body::<T>().errors(BODY)
    }

    fn errors(self, codes: &str) -> Api {
        let codes: Vec<&str> = codes.split_whitespace().collect();
        SystemError::answers_of(&codes)
            .into_iter()
            .fold(self, Api::fails_with)
    }
}

/// The failures of reading a JSON object body.
const BODY: &str = "invalid_json invalid_body body_too_large";
/// The failures of the document store and of blocking work.
const STORE: &str = "storage_unreadable storage_error internal_error";
/// The failures of resolving a path under the approved folders.
const PATHS: &str =
    "missing_path path_traversal invalid_path forbidden_path not_found internal_error";
/// The failures of the platform routes.
const PLATFORM: &str = "platform_unavailable storage_unreadable storage_error internal_error";
/// The failures of an activity push.
const ACTIVITY: &str = "missing_persona_name invalid_signal missing_signal character_not_found \
     rate_limited";
/// The failures of the meme proxy.
const MEME: &str = "missing_url invalid_url forbidden_target forbidden_redirect \
     unsupported_content_type not_an_image too_large upstream_unreachable \
     too_many_redirects invalid_redirect upstream_status upstream_timeout";
/// The failures of an interactive region capture.
const REGION_CAPTURE: &str =
    "forbidden csrf_validation_failed interactive_unsupported capture_unavailable \
     capture_failed internal_error";
/// The failures of a proactive round.
const PROACTIVE: &str = "error_character_not_found pass_busy error_timeout error_model_failed";
/// The failures of a tutorial write (besides [`BODY`] and [`STORE`]).
const TUTORIAL_PUT: &str =
    "invalid_state invalid_expected_revision seven_day_tutorial_revision_conflict";
/// The failures of a screen capture (besides the CSRF guard's).
const SCREENSHOT: &str = "forbidden capture_unavailable capture_failed internal_error";
/// The failures of a handoff consume.
const HANDOFF_CONSUME: &str = "invalid_handoff_token invalid_expected_page invalid_consumer_id \
     handoff_token_not_found handoff_signature_mismatch handoff_origin_mismatch \
     handoff_target_mismatch handoff_token_consumed";

// What a route and its alias (the original pages' path) read and answer.

fn proxy_image_docs(api: Api) -> Api {
    api.query::<http::queries::ImagePathQuery>()
        .ok_file("image/*")
        .errors(PATHS)
        .errors("remote_url_unsupported not_an_image too_large")
}

fn set_achievement_docs(api: Api) -> Api {
    api.ok::<http::platform::AchievementSet>()
        .errors(PLATFORM)
        .errors("invalid_achievement achievement_not_found")
}

fn update_playtime_docs(api: Api) -> Api {
    api.body::<http::bodies::PlaytimeBody>()
        .ok::<http::platform::PlaytimeRecorded>()
        .errors(PLATFORM)
        .errors("invalid_seconds")
}

fn list_achievements_docs(api: Api) -> Api {
    api.ok::<http::platform::Achievements>().errors(PLATFORM)
}

fn create_handoff_docs(api: Api) -> Api {
    api.body::<http::bodies::HandoffCreateBody>()
        .ok::<http::handoff::HandoffToken>()
        .errors("invalid_target_page")
}

fn consume_handoff_docs(api: Api) -> Api {
    api.body::<http::bodies::HandoffConsumeBody>()
        .ok::<http::handoff::HandoffToken>()
        .errors(HANDOFF_CONSUME)
}

/// The system routes; each states what it reads and answers (docs/system.md § OpenAPI).
pub fn api(state: &AppState) -> Api {
    use http::bodies::*;
    use http::queries::*;
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
        .errors("invalid_days usage_unavailable internal_error")
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
        .body::<NoticesAckBody>()
        .ok::<status::NoticesAcked>()
        .guarded(
            Method::POST,
            "/api/activity_signal",
            "bounded activity heartbeat for the activity tracker",
            Csrf::Success,
            status::activity_signal,
        )
        .id("activity_signal")
        .body::<ActivityBody>()
        .ok::<status::ActivityAccepted>()
        .errors(ACTIVITY)
        .get(
            "/api/changelog",
            "changelog entries newer than query since (query lang)",
            changelog::changelog,
        )
        .id("changelog")
        .query::<ChangelogQuery>()
        .ok::<changelog::Changelog>()
        .errors("internal_error")
        .get(
            "/api/survey",
            "the current-version survey or has_survey false",
            changelog::survey,
        )
        .id("survey")
        .query::<SurveyQuery>()
        .ok::<changelog::SurveyAnswer>()
        .errors("internal_error")
        .guarded(
            Method::POST,
            "/api/survey/submit",
            "submit or skip the current survey",
            Csrf::Success,
            changelog::survey_submit,
        )
        .id("submit_survey")
        .body::<SurveySubmitBody>()
        .ok::<changelog::SurveySubmitted>()
        .errors(STORE)
        .errors("no_survey")
        .guarded(
            Method::POST,
            "/api/emotion/analysis",
            "emotion of a text (model with heuristic fallback)",
            Csrf::Success,
            emotion::emotion,
        )
        .id("analyse_emotion")
        .body::<EmotionBody>()
        .ok::<emotion::Emotion>()
        .errors("missing_text")
        .guarded(
            Method::POST,
            "/api/translate",
            "translate text (Google, then the model)",
            Csrf::Success,
            translate::translate,
        )
        .id("translate")
        .body::<TranslateBody>()
        .ok::<translate::Translated>()
        .errors("missing_text text_too_long")
        .get(
            "/api/file-exists",
            "whether query path is an existing regular file",
            files::file_exists,
        )
        .id("file_exists")
        .query::<FileExistsQuery>()
        .ok::<files::FileExists>()
        .errors("missing_path path_traversal invalid_path internal_error")
        .get(
            "/api/find-first-image",
            "first preview image under 1 MiB in an approved folder",
            files::find_first_image,
        )
        .id("find_first_image")
        .query::<FirstImageQuery>()
        .ok::<files::FirstImage>()
        .errors(PATHS)
        .errors("not_a_folder")
        .get(
            "/api/meme/proxy-image",
            "SSRF-checked HTTP(S) image proxy with cache",
            files::meme_proxy,
        )
        .id("meme_proxy_image")
        .query::<MemeUrlQuery>()
        .ok_file("image/*")
        .errors(MEME)
        .get(
            "/api/platform/proxy-image",
            "approved local or workshop image",
            files::platform_proxy_image,
        )
        .id("platform_proxy_image")
        .docs(proxy_image_docs)
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
    .errors(SCREENSHOT);
    let api = api
        .post(
            "/api/screenshot/interactive",
            "loopback-only native region selection",
            desktop::screenshot_interactive,
        )
        .id("screenshot_interactive")
        .ok::<desktop::RegionCapture>()
        .errors(REGION_CAPTURE)
        .guarded(
            Method::POST,
            "/api/proactive_chat",
            "proactive source selection, generation and delivery",
            Csrf::Success,
            proactive::proactive_chat,
        )
        .id("proactive_chat")
        .body::<ProactiveBody>()
        .ok::<proactive::ProactiveRound>()
        .errors(PROACTIVE)
        .guarded(
            Method::POST,
            "/api/proactive/music_played_through",
            "a recommended song finished (positive signal)",
            Csrf::Success,
            proactive::music_played_through,
        )
        .id("music_played_through")
        .body::<MusicPlayedBody>()
        .ok::<proactive::MusicCleared>()
        .errors("missing_persona_name")
        .guarded(
            Method::POST,
            "/api/mini_game/invite/respond",
            "respond to the pending mini-game invitation",
            Csrf::Success,
            proactive::invite_respond,
        )
        .id("respond_invite")
        .body::<InviteRespondBody>()
        .ok::<proactive::InviteAnswered>()
        .errors("missing_persona_name invalid_choice")
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
        .body::<TutorialPutBody>()
        .ok::<crate::tutorial::Public>()
        .errors(STORE)
        .errors(TUTORIAL_PUT)
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
        .body::<AutostartHeartbeatBody>()
        .ok::<autostart::AutostartHeartbeat>()
        .errors(STORE)
        .guarded(
            Method::POST,
            "/api/autostart-prompt/shown",
            "record that the prompt was displayed",
            Csrf::Success,
            autostart::shown,
        )
        .id("autostart_shown")
        .body::<AutostartShownBody>()
        .ok::<autostart::AutostartShown>()
        .errors(STORE)
        .errors("invalid_prompt_token")
        .guarded(
            Method::POST,
            "/api/autostart-prompt/decision",
            "record the user's decision",
            Csrf::Success,
            autostart::decision,
        )
        .id("autostart_decision")
        .body::<AutostartDecisionBody>()
        .ok::<autostart::AutostartDecided>()
        .errors(STORE)
        .errors("invalid_decision invalid_prompt_token")
        .guarded(
            Method::POST,
            "/api/platform/set-achievement-status/{name}",
            "unlock a configured achievement",
            Csrf::Success,
            platform::set_achievement,
        )
        .id("set_achievement")
        .docs(set_achievement_docs)
        .guarded(
            Method::POST,
            "/api/platform/update-playtime",
            "accumulate a bounded playtime delta",
            Csrf::Success,
            platform::update_playtime,
        )
        .id("update_playtime")
        .docs(update_playtime_docs)
        .get(
            "/api/platform/list-achievements",
            "configured achievements and their state",
            platform::list_achievements,
        )
        .id("list_achievements")
        .docs(list_achievements_docs)
        // The original pages' paths of the same routes (docs/frontend.md).
        .guarded(
            Method::POST,
            "/api/steam/set-achievement-status/{name}",
            "alias of /api/platform/set-achievement-status/{name}",
            Csrf::Success,
            platform::set_achievement,
        )
        .id("steam_set_achievement")
        .docs(set_achievement_docs)
        .guarded(
            Method::POST,
            "/api/steam/update-playtime",
            "alias of /api/platform/update-playtime",
            Csrf::Success,
            platform::update_playtime,
        )
        .id("steam_update_playtime")
        .docs(update_playtime_docs)
        .get(
            "/api/steam/list-achievements",
            "alias of /api/platform/list-achievements",
            platform::list_achievements,
        )
        .id("steam_list_achievements")
        .docs(list_achievements_docs)
        .get(
            "/api/steam/proxy-image",
            "alias of /api/platform/proxy-image",
            files::platform_proxy_image,
        )
        .id("steam_proxy_image")
        .docs(proxy_image_docs);
    let api = post_no_store(
        api,
        "/api/guide/handoff/create",
        "create a short-lived signed one-time handoff token (no-store)",
        handoff::create,
    )
    .id("create_handoff")
    .docs(create_handoff_docs);
    let api = post_no_store(
        api,
        "/api/guide/handoff/consume",
        "consume a handoff token (no-store)",
        handoff::consume,
    )
    .id("consume_handoff")
    .docs(consume_handoff_docs);
    // The original pages' paths of the same routes (docs/frontend.md).
    let api = post_no_store(
        api,
        "/api/yui-guide/handoff/create",
        "alias of /api/guide/handoff/create",
        handoff::create,
    )
    .id("yui_create_handoff")
    .docs(create_handoff_docs);
    post_no_store(
        api,
        "/api/yui-guide/handoff/consume",
        "alias of /api/guide/handoff/consume",
        handoff::consume,
    )
    .id("yui_consume_handoff")
    .docs(consume_handoff_docs)
}
