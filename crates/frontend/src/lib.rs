//! The original application's web frontend on companiond (docs/frontend.md).
//!
//! * With `--frontend-dir DIR`: the original page paths, rendered from
//!   `DIR/templates` ([`pages`]); `DIR/static` wins over the bundle's at `/static/`
//!   (core's static route).
//! * Always: the routes the original pages call around the interface — the
//!   per-character routes under the original paths ([`characters`]), Live2D and VRM
//!   model lists and their user mounts ([`models`], routes in [`http`]), storage location
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
mod http;
mod models;
mod pages;
mod render;
mod storage;

use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::routing::post;
use axum::Router;
use companiond_core::api::Part;
use companiond_core::guards::Csrf;
use companiond_core::{Api, AppState};

use characters::{binding, cards, onboarding, settings};
use error::answers::*;
use error::FailsOf;

/// Every route of the family, with its literal path; what each reads and
/// answers is stated right after it (docs/frontend.md § OpenAPI).
pub fn api(state: &AppState) -> Api {
    let api = Api::new(state, "frontend")
        .about(
            "The routes the original application's pages call around the interface: \
             per-character card, model and settings routes under the original paths, \
             Live2D and VRM model lists and uploads, the storage location, and the \
             features companiond does not have, answered as the pages read \"unavailable\".",
        )
        .get(
            "/api/characters/current_catgirl",
            "the current character (original page path)",
            cards::current_get,
        )
        .id("current_character")
        .ok::<cards::CurrentCatgirl>()
        .get(
            "/api/characters/catgirl/{name}/voice_mode_status",
            "voice-mode status of a character (companiond: text only)",
            settings::voice_mode_status,
        )
        .id("voice_mode_status")
        .ok::<settings::VoiceModeStatus>()
        .get(
            "/api/characters/catgirl/{name}/mmd_settings",
            "a character's MMD viewer settings (defaults when unset)",
            settings::mmd_settings_get,
        )
        .id("mmd_settings")
        .ok::<settings::MmdSettingsAnswer>()
        .fails_of([unknown_character()])
        .get(
            "/api/characters/current_live2d_model",
            "the Live2D model bound to a character (query catgirl_name)",
            binding::current_live2d_model,
        )
        .id("current_live2d_model")
        .query::<binding::ModelOf>()
        .ok::<binding::CurrentLive2d>()
        .get(
            "/api/characters/character/{name}/language-preference",
            "a character's reply language preference",
            settings::language_get,
        )
        .id("language_preference")
        .ok::<settings::LanguagePreference>()
        .fails_of([unknown_character()])
        .get(
            "/api/characters/persona-onboarding-state",
            "first-run personality onboarding state",
            onboarding::onboarding_get,
        )
        .id("onboarding_state")
        .ok::<onboarding::Onboarding>()
        .get(
            "/api/characters/persona-presets",
            "personality presets (none in companiond)",
            onboarding::presets,
        )
        .id("persona_presets")
        .ok::<onboarding::Presets>()
        .get(
            "/api/characters/character/{name}/persona-selection",
            "a character's personality preset selection",
            onboarding::persona_selection_get,
        )
        .id("persona_selection")
        .ok::<onboarding::PersonaSelection>()
        .fails_of([unknown_character()])
        .get(
            "/api/characters/character-card/list",
            "legacy character cards (none)",
            settings::card_list,
        )
        .id("character_cards")
        .ok::<settings::CardList>()
        .get(
            "/api/characters/card-faces",
            "characters that have a card face",
            settings::card_faces,
        )
        .id("card_faces")
        .ok::<settings::CardFaces>()
        .get(
            "/api/characters/catgirl/{name}/card-face",
            "a character's card face (its card image)",
            settings::card_face,
        )
        .id("card_face")
        .ok_file("image/*")
        .fails_of([unknown_character(), not_found("no card face")])
        .get(
            "/api/characters/card-metas",
            "card metadata of every character",
            settings::card_metas,
        )
        .id("card_metas")
        .ok::<settings::CardMetas>()
        .get(
            "/api/characters/voices",
            "text-to-speech voices (none in companiond)",
            settings::voices,
        )
        .id("voices")
        .ok::<settings::Voices>()
        .get(
            "/api/characters/custom_tts_voices",
            "custom text-to-speech voices (not enabled in companiond: success false, code GPTSOVITS_NOT_ENABLED)",
            settings::custom_tts_voices,
        )
        .id("custom_voices")
        .ok::<settings::CustomVoices>()
        .guarded(
            Method::PUT,
            "/api/characters/character/{name}/language-preference",
            "set a character's reply language preference",
            Csrf::Success,
            settings::language_put,
        )
        .id("set_language_preference")
        .json_body::<settings::LanguageBody>()
        .ok::<settings::LanguageSet>()
        .fails_of([bad_request(), character()])
        .post(
            "/api/characters/current_catgirl",
            "switch the current character (original page path)",
            cards::current_set,
        )
        .id("switch_character")
        .json_body::<cards::SwitchBody>()
        .ok::<cards::Switched>()
        .fails_of([bad_request(), character_all()])
        .post(
            "/api/characters/catgirl",
            "create a character from the original card form",
            cards::create,
        )
        .id("create_character")
        .json_body::<cards::NewCardForm>()
        .ok::<cards::CardCreated>()
        .fails_of([bad_request(), names(), storage()])
        .put(
            "/api/characters/catgirl/{name}",
            "save a character's card form (replaces its user fields)",
            cards::save,
        )
        .id("save_character")
        .json_body::<cards::CardForm>()
        .ok::<cards::CardSaved>()
        .fails_of([bad_request(), character()])
        .delete(
            "/api/characters/catgirl/{name}",
            "delete a character (not the current one)",
            cards::delete_path,
        )
        .id("delete_character")
        .ok::<cards::CardDeleted>()
        .fails_of([deleting()])
        .post(
            "/api/characters/catgirl/delete",
            "delete a character named in the body",
            cards::delete_body,
        )
        .id("delete_character_named")
        .json_body::<cards::DeleteBody>()
        .ok::<cards::CardDeleted>()
        .fails_of([bad_request(), deleting()])
        .post(
            "/api/characters/master",
            "save the master profile (主人)",
            cards::master_set,
        )
        .id("save_master")
        .json_body::<cards::MasterForm>()
        .ok::<cards::Done>()
        .fails_of([bad_request(), storage()])
        .post(
            "/api/characters/master/{name}/rename",
            "rename the master profile",
            cards::master_rename,
        )
        .id("rename_master")
        .json_body::<cards::MasterRenameBody>()
        .ok::<cards::Done>()
        .fails_of([
            bad_request(),
            not_found("the master is not named so"),
            storage(),
        ])
        .post(
            "/api/characters/catgirl/{name}/rename",
            "rename a character (the transaction of /api/characters/profile/{old_name}/rename)",
            cards::rename,
        )
        .id("rename_character")
        .json_body::<cards::RenameBody>()
        .ok::<companiond_core::rename::Renamed>()
        .fails_of([bad_request(), rename()])
        .put(
            "/api/characters/catgirl/l2d/{name}",
            "bind a Live2D, VRM, MMD or PNGTuber model to a character",
            binding::bind_model,
        )
        .id("bind_model")
        .json_body::<binding::BindBody>()
        .ok::<cards::Message>()
        .fails_of([bad_request(), character()])
        .put(
            "/api/characters/catgirl/{name}/lighting",
            "save a character's VRM lighting",
            settings::lighting_put,
        )
        .id("save_lighting")
        .json_body::<settings::LightingBody>()
        .ok::<cards::Done>()
        .fails_of([bad_request(), character()])
        .put(
            "/api/characters/catgirl/{name}/mmd_settings",
            "save a character's MMD viewer settings (merged, clamped)",
            settings::mmd_settings_put,
        )
        .id("save_mmd_settings")
        .json_body::<settings::MmdSettings>()
        .ok::<settings::MmdSettingsAnswer>()
        .fails_of([bad_request(), character()])
        .route(
            Method::PATCH,
            "/api/characters/catgirl/{name}/touch_set",
            "save a model's touch reactions for a character",
            axum::routing::patch(settings::touch_set_patch),
        )
        .id("save_touch_set")
        .json_body::<settings::TouchSetBody>()
        .ok::<cards::Done>()
        .fails_of([bad_request(), character()])
        .post(
            "/api/characters/clear_voice_ids",
            "clear every character's voice",
            settings::clear_voice_ids,
        )
        .id("clear_voices")
        .ok::<settings::VoicesCleared>()
        .fails_of([storage()])
        .put(
            "/api/characters/catgirl/voice_id/{name}",
            "set a character's voice (none available: 400)",
            settings::voice_id_put,
        )
        .id("set_voice")
        .json_body::<settings::VoiceIdBody>()
        .fails_of([voice_unavailable(), unknown_character()])
        .post(
            "/api/characters/catgirl/{name}/unregister_voice",
            "clear a character's voice",
            settings::unregister_voice,
        )
        .id("clear_voice")
        .ok::<settings::VoiceUnregistered>()
        .fails_of([voice_not_registered(), character()])
        .post(
            "/api/characters/persona-onboarding-state",
            "record the first-run onboarding outcome",
            onboarding::onboarding_set,
        )
        .id("set_onboarding_state")
        .json_body::<onboarding::OnboardingBody>()
        .ok::<onboarding::Onboarding>()
        .fails_of([bad_request(), storage()])
        .get(
            "/api/live2d/models",
            "Live2D models (a bare array; ?simple=true: names)",
            http::live2d::live2d_models,
        )
        .id("live2d_models")
        .query::<http::live2d::SimpleQuery>()
        .ok::<http::live2d::Live2dModels>()
        .get(
            "/api/live2d/user_models",
            "user Live2D models and user VRM files",
            http::live2d::live2d_user_models,
        )
        .id("user_models")
        .ok::<http::live2d::UserModels>()
        .get(
            "/api/live2d/model_files/{name}",
            "motion and expression files of a Live2D model",
            http::live2d::live2d_model_files,
        )
        .id("live2d_model_files")
        .ok::<http::live2d::ModelFiles>()
        .fails_of([live2d_not_found()])
        .get(
            "/api/live2d/emotion_mapping/{name}",
            "emotion mapping of a Live2D model (empty)",
            http::live2d::live2d_emotion_mapping,
        )
        .id("live2d_emotion_mapping")
        .ok::<http::live2d::Live2dEmotionMapping>()
        .get(
            "/api/model/vrm/models",
            "VRM models (project and user)",
            http::vrm::vrm_models,
        )
        .id("vrm_models")
        .ok::<http::vrm::VrmModels>()
        .get(
            "/api/model/vrm/animations",
            "VRM animations (project and user)",
            http::vrm::vrm_animations,
        )
        .id("vrm_animations")
        .ok::<http::vrm::VrmAnimations>()
        .get(
            "/api/model/vrm/config",
            "where VRM files are served",
            http::vrm::vrm_config,
        )
        .id("vrm_config")
        .ok::<http::vrm::VrmConfig>()
        .get(
            "/api/model/vrm/emotion_mapping/{name}",
            "emotion mapping of a VRM model (empty)",
            http::vrm::vrm_emotion_mapping,
        )
        .id("vrm_emotion_mapping")
        .ok::<http::vrm::VrmEmotionMapping>()
        .get(
            "/api/live2d/load_model_parameters/{name}",
            "saved parameters of a Live2D model (parameters.json; {} when none)",
            http::live2d::live2d_load_parameters,
        )
        .id("saved_live2d_parameters")
        .ok::<http::live2d::SavedParameters>()
        .fails_with(unreadable_model("no Live2D model of that name (with parameters {})"))
        .get(
            "/api/live2d/model_parameters/{name}",
            "parameters and parameter groups of a Live2D model (from its .cdi3.json)",
            http::live2d::live2d_model_parameters,
        )
        .id("live2d_parameters")
        .ok::<http::live2d::ModelParameters>()
        .fails_with(unreadable_model(
            "no such model, or its .cdi3.json is missing or not JSON",
        ))
        .route(
            Method::POST,
            "/api/model/vrm/upload",
            "upload a VRM model (multipart part file, .vrm, at most 200 MB) into user_vrm/",
            post(http::vrm::vrm_upload_model).layer(DefaultBodyLimit::disable()),
        )
        .id("upload_vrm_model")
        .multipart(&[Part::file("file")])
        .ok::<http::vrm::VrmUploaded>()
        .fails_of([upload(), storage()])
        .route(
            Method::POST,
            "/api/model/vrm/upload_animation",
            "upload a VRM animation (multipart part file, .vrma) into user_vrm/animation/",
            post(http::vrm::vrm_upload_animation).layer(DefaultBodyLimit::disable()),
        )
        .id("upload_vrm_animation")
        .multipart(&[Part::file("file")])
        .ok::<http::vrm::AnimationUploaded>()
        .fails_of([upload(), storage()])
        .delete(
            "/api/model/vrm/model",
            "delete an imported VRM model (body {url: /user_vrm/<file>.vrm})",
            http::vrm::vrm_delete,
        )
        .id("delete_vrm_model")
        .json_body::<http::vrm::VrmDeleteBody>()
        .ok::<cards::Message>()
        .fails_of([bad_request(), not_found("no such model file"), storage()])
        .raw(
            Router::new()
                .route("/user_live2d/{*path}", http::user_files(models::USER_LIVE2D))
                .route("/user_vrm/{*path}", http::user_files(models::USER_VRM)),
        )
        .get(
            "/api/config/steam_language",
            "platform language (no platform: success false, uiLanguage override)",
            extras::steam_language,
        )
        .id("steam_language")
        .ok::<extras::SteamLanguage>()
        .get(
            "/api/agent/health",
            "agent server health (none: 502 down)",
            extras::agent_down,
        )
        .id("agent_health")
        .fails_of([agent_down()])
        .get("/api/agent/flags", "agent flags (none: 502)", extras::agent_down)
        .id("agent_flags")
        .fails_of([agent_down()])
        .get("/api/agent/state", "agent state (none: 502)", extras::agent_down)
        .id("agent_state")
        .fails_of([agent_down()])
        .get(
            "/api/agent/{capability}/availability",
            "availability of an agent capability (none: 502 ready false)",
            extras::agent_availability,
        )
        .id("agent_availability")
        .ok::<extras::Availability>()
        .fails_of([agent_unavailable()])
        .get(
            "/api/music/domains",
            "allowed music hosts (none)",
            extras::music_domains,
        )
        .id("music_domains")
        .ok::<extras::MusicDomains>()
        .get(
            "/api/music/search",
            "music search (unavailable)",
            extras::music_search,
        )
        .id("music_search")
        .query::<extras::MusicQuery>()
        .ok::<extras::MusicSearch>()
        .get(
            "/api/widget-mode/state",
            "widget-mode flags (in memory)",
            extras::widget_get,
        )
        .id("widget_state")
        .ok::<extras::WidgetAnswer>()
        .get(
            "/api/card-drop/active-character",
            "the character shown in the card-drop window",
            extras::card_drop_get,
        )
        .id("card_drop_character")
        .ok::<extras::CardDropCharacter>()
        .get(
            "/api/steam/workshop/subscribed-items",
            "workshop subscriptions (none)",
            extras::workshop_items,
        )
        .id("workshop_items")
        .ok::<extras::WorkshopItems>()
        .get(
            "/api/steam/workshop/status",
            "workshop status",
            extras::workshop_status,
        )
        .id("workshop_status")
        .ok::<extras::WorkshopStatus>()
        .get(
            "/api/steam/workshop/meta/{character}",
            "workshop upload metadata of a character (none)",
            extras::workshop_meta,
        )
        .id("workshop_meta")
        .ok::<extras::WorkshopMeta>()
        .guarded(
            Method::POST,
            "/api/agent/flags",
            "set agent flags (none: 502)",
            Csrf::Success,
            extras::agent_down,
        )
        .id("set_agent_flags")
        .fails_of([agent_down()])
        .guarded(
            Method::POST,
            "/api/widget-mode/enabled",
            "turn widget mode on or off",
            Csrf::Success,
            extras::widget_enabled,
        )
        .id("set_widget_mode")
        .json_body::<extras::EnabledBody>()
        .ok::<extras::WidgetAnswer>()
        .fails_of([bad_request()])
        .guarded(
            Method::POST,
            "/api/widget-mode/stealth-enabled",
            "turn widget stealth on or off",
            Csrf::Success,
            extras::widget_stealth,
        )
        .id("set_widget_stealth")
        .json_body::<extras::EnabledBody>()
        .ok::<extras::WidgetAnswer>()
        .fails_of([bad_request()])
        .post(
            "/api/card-drop/active-character",
            "remember the active character for the card-drop window",
            extras::card_drop_set,
        )
        .id("set_card_drop_character")
        .json_body::<extras::CardDropBody>()
        .ok::<extras::Okay>()
        .fails_of([bad_request()])
        .post(
            "/api/galgame/options",
            "reply options after an assistant turn (canned fallback)",
            extras::galgame_options,
        )
        .id("galgame_options")
        .json_body::<extras::GalgameBody>()
        .ok::<extras::GalgameOptions>()
        .fails_of([refused(
            "no_assistant_turn",
            "the messages have no assistant turn",
        )])
        .post(
            "/api/steam/workshop/sync-characters",
            "import workshop characters (nothing to import)",
            extras::workshop_sync,
        )
        .id("workshop_sync")
        .ok::<extras::WorkshopSync>()
        .post(
            "/api/beacon/shutdown",
            "page-unload beacon (a no-op: companiond keeps running)",
            extras::beacon_shutdown,
        )
        .id("shutdown_beacon")
        .ok::<extras::Null>()
        .get(
            "/api/storage/location/bootstrap",
            "the storage location (the data dir) and its flags",
            storage::bootstrap,
        )
        .id("storage_bootstrap")
        .ok::<storage::Bootstrap>()
        .get(
            "/api/storage/location/status",
            "storage lifecycle status (no-store)",
            storage::status,
        )
        .id("storage_status")
        .ok::<storage::LocationStatus>()
        .get(
            "/api/storage/location/diagnostics",
            "storage diagnostics",
            storage::diagnostics,
        )
        .id("storage_diagnostics")
        .ok::<storage::Diagnostics>()
        .get(
            "/api/storage/location/retained-source",
            "retained previous storage root (none)",
            storage::retained_source,
        )
        .id("retained_storage")
        .ok::<storage::RetainedSource>();
    let api = [
        (
            "/api/storage/location/pick-directory",
            "pick_storage_directory",
        ),
        ("/api/storage/location/open-current", "open_storage"),
        ("/api/storage/location/preflight", "storage_preflight"),
        ("/api/storage/location/select", "select_storage"),
        ("/api/storage/location/restart", "restart_storage"),
        ("/api/storage/location/exit", "exit_storage"),
        (
            "/api/storage/location/retained-source/cleanup",
            "clean_retained_storage",
        ),
    ]
    .into_iter()
    .fold(api, |api, (path, id)| {
        api.guarded(
            Method::POST,
            path,
            "relocating storage is not supported (409)",
            Csrf::Success,
            storage::unsupported,
        )
        .id(id)
        .fails_of([relocation_unsupported()])
    });
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
