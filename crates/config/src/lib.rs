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

use companiond_core::api::ErrorDoc;
use companiond_core::envelope::EnvelopeKind;
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
    use error::{ConfigError, ProbeFailure, VoiceFailure};
    use http::{conversation, page, preferences, proactive, providers, voice};
    use proactive::ProactiveFailure;
    Api::new(state, "config")
        .about("Configuration: provider settings and probes, the voice server, model display preferences, conversation settings (revisioned), page configuration, languages, proxy mode; and the proactive-chat settings (docs/config.md).")
        .post(
            "/api/config/test_connectivity",
            "probe a built-in provider or a custom endpoint",
            providers::test_connectivity,
        )
        .id("test_connectivity")
        .json_body::<probes::connectivity::ConnectivityRequest>()
        .ok::<providers::ConnectivityOk>()
        .fails::<ConfigError>()
        .fails::<ProbeFailure>()
        .post(
            "/api/config/list_models",
            "list the models of a built-in provider or a custom endpoint",
            providers::list_models,
        )
        .id("list_models")
        .json_body::<probes::models::ListModelsRequest>()
        .ok::<providers::ModelListAnswer>()
        .fails::<ConfigError>()
        .fails::<ProbeFailure>()
        .get(
            "/api/config/core_api",
            "effective provider configuration, secrets masked",
            providers::get_core_api,
        )
        .id("provider_settings")
        .ok::<providers::ProviderSettingsView>()
        .fails::<ConfigError>()
        .post(
            "/api/config/core_api",
            "validate, merge and save provider settings",
            providers::post_core_api,
        )
        .id("save_provider_settings")
        .own_json_body::<providers::ProviderSettings>()
        .ok::<providers::ProviderSettingsSaved>()
        .fails::<ConfigError>()
        .get(
            "/api/config/api_providers",
            "provider catalog and frontend metadata",
            providers::api_providers,
        )
        .id("provider_catalog")
        .ok::<providers::ProviderCatalog>()
        .post(
            "/api/config/voiceserver/list_voices",
            "proxy the voice list of a voice server",
            voice::list_voices,
        )
        .id("voice_server_voices")
        .own_json_body::<voice::VoiceServerRequest>()
        .ok::<voice::VoiceListAnswer>()
        .fails::<ConfigError>()
        .fails::<VoiceFailure>()
        .get(
            "/api/config/tts_voices",
            "the configured speech provider's voices",
            voice::tts_voices,
        )
        .id("tts_voices")
        .ok::<voice::TtsVoicesAnswer>()
        .fails::<ConfigError>()
        .fails::<ProbeFailure>()
        .post(
            "/api/config/voiceserver/test_connectivity",
            "run the voice-server init, ready, synthesis flow",
            voice::test_connectivity,
        )
        .id("voice_server_test")
        .own_json_body::<voice::VoiceServerRequest>()
        .ok::<voice::VoiceTestAnswer>()
        .fails::<ConfigError>()
        .fails::<VoiceFailure>()
        .get(
            "/api/config/preferences",
            "per-model display preferences (a list, preferred first)",
            preferences::get,
        )
        .id("preferences")
        .ok_list::<preferences::ModelPreference>()
        .fails::<ConfigError>()
        .post(
            "/api/config/preferences",
            "save one model's display preference",
            preferences::post,
        )
        .id("save_preference")
        .own_json_body::<preferences::ModelPreference>()
        .ok::<preferences::PreferenceSaved>()
        .fails::<ConfigError>()
        .post(
            "/api/config/preferences/set-preferred",
            "move a model to the front of the preference order",
            preferences::set_preferred,
        )
        .id("set_preferred_model")
        .own_json_body::<preferences::ModelPathBody>()
        .ok::<preferences::PreferenceSaved>()
        .fails::<ConfigError>()
        .get(
            "/api/config/conversation-settings",
            "global conversation settings with revision (ETag)",
            conversation::get,
        )
        .id("conversation_settings")
        .ok::<conversation::ConversationSettings>()
        .fails::<ConfigError>()
        .post(
            "/api/config/conversation-settings",
            "save global conversation settings (If-Match, ASR decision, full snapshot)",
            conversation::post,
        )
        .id("save_conversation_settings")
        .headers::<conversation::WriteHeaders>()
        .own_json_body::<conversation::ConversationSettingsWrite>()
        .ok::<conversation::ConversationSaved>()
        .fails::<ConfigError>()
        .fails_with(
            ErrorDoc::new(412, EnvelopeKind::Success, "stale If-Match: the body is the current document (success:false)")
                .code("revision_conflict"),
        )
        .get(
            "/api/config/page_config",
            "page configuration of the named or current character (no-store)",
            page::page_config,
        )
        .id("page_config")
        .query::<page::PageConfigQuery>()
        .ok::<crate::page::PageConfig>()
        .get(
            "/api/config/character_reserved_fields",
            "reserved character-profile fields",
            page::reserved_fields,
        )
        .id("reserved_fields")
        .ok::<crate::page::ReservedFields>()
        .get(
            "/api/config/platform_language",
            "platform locale and derived i18n language",
            page::platform_language,
        )
        .id("platform_language")
        .ok::<page::PlatformLanguage>()
        .get(
            "/api/config/user_language",
            "the user's configured language",
            page::user_language,
        )
        .id("user_language")
        .ok::<page::UserLanguage>()
        .post(
            "/api/config/set_proxy_mode",
            "switch proxy variables of this process (direct or restored)",
            page::set_proxy_mode,
        )
        .id("set_proxy_mode")
        .own_json_body::<page::ProxyModeBody>()
        .ok::<page::ProxyMode>()
        .fails::<ConfigError>()
        .get(
            "/api/proactive/mode",
            "current proactive mode and settings",
            proactive::get_mode,
        )
        .id("proactive_mode")
        .ok::<proactive::ProactiveMode>()
        .fails::<ProactiveFailure>()
        .post(
            "/api/proactive/mode",
            "apply a proactive preset",
            proactive::post_mode,
        )
        .id("apply_proactive_mode")
        .own_json_body::<proactive::ModeBody>()
        .ok::<proactive::ModeApplied>()
        .fails::<ProactiveFailure>()
        .get(
            "/api/proactive/settings",
            "proactive-chat settings",
            proactive::get_settings,
        )
        .id("proactive_settings")
        .ok::<proactive::ProactiveSettings>()
        .fails::<ProactiveFailure>()
        .post(
            "/api/proactive/settings",
            "write proactive-chat fields",
            proactive::post_settings,
        )
        .id("save_proactive_settings")
        .own_json_body::<proactive::ProactiveFields>()
        .ok::<proactive::SettingsApplied>()
        .fails::<ProactiveFailure>()
}
