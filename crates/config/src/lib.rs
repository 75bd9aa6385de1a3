//! Configuration (`/api/config`) and proactive-chat settings (`/api/proactive`).
//!
//! `http` holds thin handlers; the domain modules know nothing of HTTP:
//! `core_api` (provider settings, masking), `catalog` (provider catalog view),
//! `probes` (connectivity and model lists), `voice` (voice server), `conversation`
//! (conversation settings, revision, ASR decision), `proactive` (modes),
//! `preferences` (model display preferences), `page` (page config, languages),
//! `proxy` (proxy mode).

pub mod catalog;
pub mod conversation;
pub mod core_api;
pub mod error;
pub mod http;
pub mod net;
pub mod page;
pub mod preferences;
pub mod proactive;
pub mod probes;
pub mod proxy;
pub mod voice;

use companiond_core::{Api, AppState};

pub use core_api::{is_masked, is_secret, MASKED};
pub use error::ConfigError;

/// The configuration and proactive routes.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "config")
        .post(
            "/api/config/test_connectivity",
            "probe a built-in provider or a custom endpoint",
            http::test_connectivity,
        )
        .post(
            "/api/config/list_models",
            "list the models of a built-in provider or a custom endpoint",
            http::list_models,
        )
        .get(
            "/api/config/core_api",
            "effective provider configuration, secrets masked",
            http::get_core_api,
        )
        .post(
            "/api/config/core_api",
            "validate, merge and save provider settings",
            http::post_core_api,
        )
        .get(
            "/api/config/api_providers",
            "provider catalog and frontend metadata",
            http::api_providers,
        )
        .post(
            "/api/config/voiceserver/list_voices",
            "proxy the voice list of a voice server",
            http::voice_list,
        )
        .post(
            "/api/config/voiceserver/test_connectivity",
            "run the voice-server init, ready, synthesis flow",
            http::voice_test,
        )
        .get(
            "/api/config/preferences",
            "per-model display preferences (a list, preferred first)",
            http::get_preferences,
        )
        .post(
            "/api/config/preferences",
            "save one model's display preference",
            http::post_preferences,
        )
        .post(
            "/api/config/preferences/set-preferred",
            "move a model to the front of the preference order",
            http::set_preferred,
        )
        .get(
            "/api/config/conversation-settings",
            "global conversation settings with revision (ETag)",
            http::get_conversation,
        )
        .post(
            "/api/config/conversation-settings",
            "save global conversation settings (If-Match, ASR decision, full snapshot)",
            http::post_conversation,
        )
        .get(
            "/api/config/page_config",
            "page configuration of the named or current character (no-store)",
            http::page_config,
        )
        .get(
            "/api/config/character_reserved_fields",
            "reserved character-profile fields",
            http::reserved_fields,
        )
        .get(
            "/api/config/platform_language",
            "platform locale and derived i18n language",
            http::platform_language,
        )
        .get(
            "/api/config/user_language",
            "the user's configured language",
            http::user_language,
        )
        .post(
            "/api/config/set_proxy_mode",
            "switch proxy variables of this process (direct or restored)",
            http::set_proxy_mode,
        )
        .get(
            "/api/proactive/mode",
            "current proactive mode and settings",
            http::get_mode,
        )
        .post(
            "/api/proactive/mode",
            "apply a proactive preset",
            http::post_mode,
        )
        .get(
            "/api/proactive/settings",
            "proactive-chat settings",
            http::get_settings,
        )
        .post(
            "/api/proactive/settings",
            "write proactive-chat fields",
            http::post_settings,
        )
}

/// This family as the binary lists it: its routes and its start-up work.
pub const FAMILY: companiond_core::server::Family = companiond_core::server::Family { api, start };

/// Start-up work of this family, run once every family's routes are built.
pub fn start(_state: &AppState) {}
