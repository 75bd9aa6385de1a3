//! The original application's web frontend on companiond (docs/frontend.md).
//!
//! * With `--frontend-dir DIR`: the original page paths, rendered from
//!   `DIR/templates` ([`pages`]); `DIR/static` wins over the bundle's at `/static/`
//!   (core's static route).
//! * Always: the routes the original pages call around the interface — the
//!   per-character routes under the original paths ([`characters`]), Live2D and VRM
//!   model lists and their user mounts ([`models`]), storage location
//!   ([`storage`]), `steam_language` and the features companiond does not have,
//!   answered in the shape the pages read as "unavailable" ([`extras`]).
//!
//! Handlers answer `Result<T, FrontendError>` ([`error`]): one enum whose
//! `IntoResponse` picks the status and the envelope the original pages read.
//!
//! Mutations: the routes the original pages call *with* the CSRF token are CSRF-guarded
//! (`Api::guarded`); the ones they call without it (character edits, model binding,
//! beacons) are, like every mutation, refused by core's front door when they come from a
//! page of another site (docs/security.md § Cross-site writes).

mod characters;
mod error;
mod extras;
mod models;
mod pages;
mod render;
mod storage;

use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::routing::post;
use axum::Router;
use companiond_core::envelope::ok_json;
use companiond_core::guards::Csrf;
use companiond_core::{Api, AppState};
use serde_json::{json, Value};

/// Every route of the family, with its literal path.
pub fn api(state: &AppState) -> Api {
    let api = Api::new(state, "frontend")
        .get(
            "/api/characters/current_catgirl",
            "the current character (original page path)",
            characters::cards::current_get,
        )
        .get(
            "/api/characters/catgirl/{name}/voice_mode_status",
            "voice-mode status of a character (companiond: text only)",
            characters::settings::voice_mode_status,
        )
        .get(
            "/api/characters/catgirl/{name}/mmd_settings",
            "a character's MMD viewer settings (defaults when unset)",
            characters::settings::mmd_settings_get,
        )
        .get(
            "/api/characters/current_live2d_model",
            "the Live2D model bound to a character (query catgirl_name)",
            characters::binding::current_live2d_model,
        )
        .get(
            "/api/characters/character/{name}/language-preference",
            "a character's reply language preference",
            characters::settings::language_get,
        )
        .get(
            "/api/characters/persona-onboarding-state",
            "first-run personality onboarding state",
            characters::onboarding::onboarding_get,
        )
        .get(
            "/api/characters/persona-presets",
            "personality presets (none in companiond)",
            || async { ok_json(json!({"success": true, "presets": []})) },
        )
        .get(
            "/api/characters/character/{name}/persona-selection",
            "a character's personality preset selection",
            characters::onboarding::persona_selection_get,
        )
        .get(
            "/api/characters/character-card/list",
            "legacy character cards (none)",
            characters::settings::card_list,
        )
        .get(
            "/api/characters/card-faces",
            "characters that have a card face",
            characters::settings::card_faces,
        )
        .get(
            "/api/characters/card-metas",
            "card metadata of every character",
            characters::settings::card_metas,
        )
        .get(
            "/api/characters/voices",
            "text-to-speech voices (none in companiond)",
            characters::settings::voices,
        )
        .get(
            "/api/characters/custom_tts_voices",
            "custom text-to-speech voices (not enabled in companiond: success false, code GPTSOVITS_NOT_ENABLED)",
            characters::settings::custom_tts_voices,
        )
        .guarded(
            Method::PUT,
            "/api/characters/character/{name}/language-preference",
            "set a character's reply language preference",
            Csrf::Success,
            characters::settings::language_put,
        )
.post(
        "/api/characters/current_catgirl",
        "switch the current character (original page path)",
        characters::cards::current_set,
    )
.post(
        "/api/characters/catgirl",
        "create a character from the original card form",
        characters::cards::create,
    )
.put(
        "/api/characters/catgirl/{name}",
        "save a character's card form (replaces its user fields)",
        characters::cards::save,
    )
.delete(
        "/api/characters/catgirl/{name}",
        "delete a character (not the current one)",
        characters::cards::delete_path,
    )
.post(
        "/api/characters/catgirl/delete",
        "delete a character named in the body",
        characters::cards::delete_body,
    )
.post(
        "/api/characters/master",
        "save the master profile (主人)",
        characters::cards::master_set,
    )
.post(
        "/api/characters/master/{name}/rename",
        "rename the master profile",
        characters::cards::master_rename,
    )
.post(
        "/api/characters/catgirl/{name}/rename",
        "rename a character (the transaction of /api/characters/profile/{old_name}/rename)",
        characters::cards::rename,
    )
.put(
        "/api/characters/catgirl/l2d/{name}",
        "bind a Live2D, VRM, MMD or PNGTuber model to a character",
        characters::binding::bind_model,
    )
.put(
        "/api/characters/catgirl/{name}/lighting",
        "save a character's VRM lighting",
        characters::settings::lighting_put,
    )
.put(
        "/api/characters/catgirl/{name}/mmd_settings",
        "save a character's MMD viewer settings (merged, clamped)",
        characters::settings::mmd_settings_put,
    )
.route(
        Method::PATCH,
        "/api/characters/catgirl/{name}/touch_set",
        "save a model's touch reactions for a character",
        axum::routing::patch(characters::settings::touch_set_patch),
    )
.post(
        "/api/characters/clear_voice_ids",
        "clear every character's voice",
        characters::settings::clear_voice_ids,
    )
.put(
        "/api/characters/catgirl/voice_id/{name}",
        "set a character's voice (none available: 400)",
        characters::settings::voice_id_put,
    )
.post(
        "/api/characters/catgirl/{name}/unregister_voice",
        "clear a character's voice",
        characters::settings::unregister_voice,
    )
.post(
        "/api/characters/persona-onboarding-state",
        "record the first-run onboarding outcome",
        characters::onboarding::onboarding_set,
    )
.get(
            "/api/live2d/models",
            "Live2D models (a bare array; ?simple=true: names)",
            models::live2d_models,
        )
        .get(
            "/api/live2d/user_models",
            "user Live2D models and user VRM files",
            models::live2d_user_models,
        )
        .get(
            "/api/live2d/model_files/{name}",
            "motion and expression files of a Live2D model",
            models::live2d_model_files,
        )
        .get(
            "/api/live2d/emotion_mapping/{name}",
            "emotion mapping of a Live2D model (empty)",
            models::live2d_emotion_mapping,
        )
        .get(
            "/api/model/vrm/models",
            "VRM models (project and user)",
            models::vrm_models,
        )
        .get(
            "/api/model/vrm/animations",
            "VRM animations (project and user)",
            models::vrm_animations,
        )
        .get(
            "/api/model/vrm/config",
            "where VRM files are served",
            models::vrm_config,
        )
        .get(
            "/api/model/vrm/emotion_mapping/{name}",
            "emotion mapping of a VRM model (empty)",
            models::vrm_emotion_mapping,
        )
        .get(
            "/api/live2d/load_model_parameters/{name}",
            "saved parameters of a Live2D model (parameters.json; {} when none)",
            models::live2d_load_parameters,
        )
        .get(
            "/api/live2d/model_parameters/{name}",
            "parameters and parameter groups of a Live2D model (from its .cdi3.json)",
            models::live2d_model_parameters,
        )
        .route(
            Method::POST,
            "/api/model/vrm/upload",
            "upload a VRM model (multipart part file, .vrm, at most 200 MB) into user_vrm/",
            post(models::vrm_upload_model).layer(DefaultBodyLimit::disable()),
        )
        .route(
            Method::POST,
            "/api/model/vrm/upload_animation",
            "upload a VRM animation (multipart part file, .vrma) into user_vrm/animation/",
            post(models::vrm_upload_animation).layer(DefaultBodyLimit::disable()),
        )
        .delete(
            "/api/model/vrm/model",
            "delete an imported VRM model (body {url: /user_vrm/<file>.vrm})",
            models::vrm_delete,
        )
        .raw(
            Router::new()
                .route("/user_live2d/{*path}", models::user_files(models::USER_LIVE2D))
                .route("/user_vrm/{*path}", models::user_files(models::USER_VRM)),
        )
.get(
            "/api/config/steam_language",
            "platform language (no platform: success false, uiLanguage override)",
            extras::steam_language,
        )
        .get(
            "/api/agent/health",
            "agent server health (none: 502 down)",
            extras::agent_down,
        )
        .get("/api/agent/flags", "agent flags (none: 502)", extras::agent_down)
        .get("/api/agent/state", "agent state (none: 502)", extras::agent_down)
        .get(
            "/api/agent/{capability}/availability",
            "availability of an agent capability (none: 502 ready false)",
            extras::agent_availability,
        )
        .get(
            "/api/music/domains",
            "allowed music hosts (none)",
            || async { ok_json(json!({"success": true, "domains": []})) },
        )
        .get(
            "/api/music/search",
            "music search (unavailable)",
            extras::music_search,
        )
        .get(
            "/api/widget-mode/state",
            "widget-mode flags (in memory)",
            extras::widget_get,
        )
        .get(
            "/api/card-drop/active-character",
            "the character shown in the card-drop window",
            extras::card_drop_get,
        )
        .get(
            "/api/steam/workshop/subscribed-items",
            "workshop subscriptions (none)",
            || async { ok_json(json!({"success": true, "items": [], "total": 0})) },
        )
        .get("/api/steam/workshop/status", "workshop status", || async {
            ok_json(json!({"success": true, "steamworks_initialized": false}))
        })
        .get(
            "/api/steam/workshop/meta/{character}",
            "workshop upload metadata of a character (none)",
            extras::workshop_meta,
        )
        .guarded(
            Method::POST,
            "/api/agent/flags",
            "set agent flags (none: 502)",
            Csrf::Success,
            extras::agent_down,
        )
        .guarded(
            Method::POST,
            "/api/widget-mode/enabled",
            "turn widget mode on or off",
            Csrf::Success,
            extras::widget_enabled,
        )
        .guarded(
            Method::POST,
            "/api/widget-mode/stealth-enabled",
            "turn widget stealth on or off",
            Csrf::Success,
            extras::widget_stealth,
        )
.post(
        "/api/card-drop/active-character",
        "remember the active character for the card-drop window",
        extras::card_drop_set,
    )
.post(
        "/api/galgame/options",
        "reply options after an assistant turn (canned fallback)",
        extras::galgame_options,
    )
.post(
        "/api/steam/workshop/sync-characters",
        "import workshop characters (nothing to import)",
        || async {
            ok_json(
                json!({"success": true, "added": 0, "backfilled_faces": 0, "skipped": 0,
                           "errors": [], "message": "no workshop subscriptions"}),
            )
        },
    )
// The original shuts down only in its "open browser" mode; companiond never does.
.post(
        "/api/beacon/shutdown",
        "page-unload beacon (a no-op: companiond keeps running)",
        || async { ok_json(Value::Null) },
    )
.get(
            "/api/storage/location/bootstrap",
            "the storage location (the data dir) and its flags",
            storage::bootstrap,
        )
        .get(
            "/api/storage/location/status",
            "storage lifecycle status (no-store)",
            storage::status,
        )
        .get(
            "/api/storage/location/diagnostics",
            "storage diagnostics",
            storage::diagnostics,
        )
        .get(
            "/api/storage/location/retained-source",
            "retained previous storage root (none)",
            storage::retained_source,
        )
        .guarded(
            Method::POST,
            "/api/storage/location/pick-directory",
            "relocating storage is not supported (409 ok:false)",
            Csrf::Success,
            storage::unsupported,
        )
        .guarded(
            Method::POST,
            "/api/storage/location/open-current",
            "relocating storage is not supported (409 ok:false)",
            Csrf::Success,
            storage::unsupported,
        )
        .guarded(
            Method::POST,
            "/api/storage/location/preflight",
            "relocating storage is not supported (409 ok:false)",
            Csrf::Success,
            storage::unsupported,
        )
        .guarded(
            Method::POST,
            "/api/storage/location/select",
            "relocating storage is not supported (409 ok:false)",
            Csrf::Success,
            storage::unsupported,
        )
        .guarded(
            Method::POST,
            "/api/storage/location/restart",
            "relocating storage is not supported (409 ok:false)",
            Csrf::Success,
            storage::unsupported,
        )
        .guarded(
            Method::POST,
            "/api/storage/location/exit",
            "relocating storage is not supported (409 ok:false)",
            Csrf::Success,
            storage::unsupported,
        )
        .guarded(
            Method::POST,
            "/api/storage/location/retained-source/cleanup",
            "relocating storage is not supported (409 ok:false)",
            Csrf::Success,
            storage::unsupported,
        );
    match state.opts.frontend_dir.clone() {
        Some(dir) => api.raw(pages::router(dir)),
        None => api,
    }
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Start-up work of this family, run once every family's routes are built.
pub fn start(state: &AppState) {
    state.provide(std::sync::Arc::new(extras::Extras::default()));
}
