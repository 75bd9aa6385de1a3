//! Configuration (`/api/config`) and proactive-chat settings (`/api/proactive`).
//!
//! `http/` holds thin handlers, one file per resource; the domain modules know
//! nothing of HTTP: `core_api` (provider settings, masking), `catalog` (the
//! provider catalog, cached by file stamp, and its view), `probes/` (`models`:
//! model lists; `connectivity`: connectivity probes), `voice` (voice server),
//! `conversation` (conversation settings, revision, ASR decision),
//! `proactive_settings` (the proactive fields and their modes; the proactive
//! runtime is the system family's), `preferences` (model display preferences),
//! `page` (page config, languages), `proxy` (proxy mode).

mod catalog;
mod conversation;
pub mod core_api;
mod error;
mod http;
mod net;
mod page;
mod preferences;
mod proactive_settings;
mod probes;
mod proxy;
mod state;
mod voice;

use companiond_core::server::Family;
use companiond_core::{Api, AppState};

pub use core_api::MASKED;

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: Family = Family { api, start };

/// Start-up work: provide the family state (the provider-catalog cache). Every
/// document is read on demand.
pub fn start(state: &AppState) {
    state.provide(std::sync::Arc::new(state::ConfigState::default()));
}

/// The configuration and proactive routes.
pub fn api(state: &AppState) -> Api {
    use http::{conversation, page, preferences, proactive, providers, voice};
    Api::new(state, "config")
        .post(
            "/api/config/test_connectivity",
            "probe a built-in provider or a custom endpoint",
            providers::test_connectivity,
        )
        .post(
            "/api/config/list_models",
            "list the models of a built-in provider or a custom endpoint",
            providers::list_models,
        )
        .get(
            "/api/config/core_api",
            "effective provider configuration, secrets masked",
            providers::get_core_api,
        )
        .post(
            "/api/config/core_api",
            "validate, merge and save provider settings",
            providers::post_core_api,
        )
        .get(
            "/api/config/api_providers",
            "provider catalog and frontend metadata",
            providers::api_providers,
        )
        .post(
            "/api/config/voiceserver/list_voices",
            "proxy the voice list of a voice server",
            voice::list_voices,
        )
        .post(
            "/api/config/voiceserver/test_connectivity",
            "run the voice-server init, ready, synthesis flow",
            voice::test_connectivity,
        )
        .get(
            "/api/config/preferences",
            "per-model display preferences (a list, preferred first)",
            preferences::get,
        )
        .post(
            "/api/config/preferences",
            "save one model's display preference",
            preferences::post,
        )
        .post(
            "/api/config/preferences/set-preferred",
            "move a model to the front of the preference order",
            preferences::set_preferred,
        )
        .get(
            "/api/config/conversation-settings",
            "global conversation settings with revision (ETag)",
            conversation::get,
        )
        .post(
            "/api/config/conversation-settings",
            "save global conversation settings (If-Match, ASR decision, full snapshot)",
            conversation::post,
        )
        .get(
            "/api/config/page_config",
            "page configuration of the named or current character (no-store)",
            page::page_config,
        )
        .get(
            "/api/config/character_reserved_fields",
            "reserved character-profile fields",
            page::reserved_fields,
        )
        .get(
            "/api/config/platform_language",
            "platform locale and derived i18n language",
            page::platform_language,
        )
        .get(
            "/api/config/user_language",
            "the user's configured language",
            page::user_language,
        )
        .post(
            "/api/config/set_proxy_mode",
            "switch proxy variables of this process (direct or restored)",
            page::set_proxy_mode,
        )
        .get(
            "/api/proactive/mode",
            "current proactive mode and settings",
            proactive::get_mode,
        )
        .post(
            "/api/proactive/mode",
            "apply a proactive preset",
            proactive::post_mode,
        )
        .get(
            "/api/proactive/settings",
            "proactive-chat settings",
            proactive::get_settings,
        )
        .post(
            "/api/proactive/settings",
            "write proactive-chat fields",
            proactive::post_settings,
        )
}
