//! `steam_language` and the features companiond does not have, answered in the
//! shape the original pages read as "unavailable" (docs/frontend.md): agent
//! (502 `down`), music (no domains), widget mode (in-memory flags), card drop (in-memory active character), galgame (canned options), the
//! workshop (no subscriptions) and the shutdown beacon (a no-op).

use std::sync::Mutex;

use axum::extract::{Path as UrlPath, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::{body_refused, loose, BodyFault, BodyOf, BodyRejection, QueryOf};
use companiond_core::envelope::{no_store, SuccessEnvelope};
use companiond_core::{AppState, Ext};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Map, Value};
use utoipa::{IntoParams, ToSchema};

use crate::error::{Answer, FrontendError, NO_AGENT};

// ------------------------------------------------------------------ bodies and answers

/// The platform language: no platform client, so `success:false` with the
/// UI language override (`uiLanguage`, null when unset).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": false, "error": "no game platform client is running (companiond has no Steam integration)",
    "uiLanguage": "en", "steam_language": null, "i18n_language": null, "ip_country": null,
    "is_mainland_china": false}))]
pub(crate) struct SteamLanguage {
    /// Always `false`.
    success: bool,
    error: &'static str,
    #[serde(rename = "uiLanguage")]
    #[schema(required = true)]
    ui_language: Option<String>,
    #[schema(required = true, value_type = Option<String>)]
    steam_language: Option<String>,
    #[schema(required = true, value_type = Option<String>)]
    i18n_language: Option<String>,
    #[schema(required = true, value_type = Option<String>)]
    ip_country: Option<String>,
    is_mainland_china: bool,
}

/// The `mcp` capability (removed in the original): not ready.
#[derive(Serialize, ToSchema)]
pub(crate) struct Availability {
    ready: bool,
    capabilities_count: u32,
    reasons: Vec<&'static str>,
}

/// Allowed music hosts (none).
#[derive(Serialize, ToSchema)]
pub(crate) struct MusicDomains {
    success: bool,
    domains: Vec<String>,
}

/// `?query=`: what to search.
#[derive(Deserialize, IntoParams)]
pub(crate) struct MusicQuery {
    query: Option<String>,
}

companiond_core::query_rejected!(
    crate::error::FrontendError,
    crate::error::FrontendError::BadRequest => MusicQuery
);

/// Music search is unavailable: `success:false` with `error` `EMPTY_QUERY` or
/// `MUSIC_UNAVAILABLE` and no results.
#[derive(Serialize, ToSchema)]
pub(crate) struct MusicSearch {
    /// Always `false`.
    success: bool,
    #[schema(value_type = String, pattern = "^(EMPTY_QUERY|MUSIC_UNAVAILABLE)$")]
    error: &'static str,
    #[schema(value_type = Vec<Object>)]
    data: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    message: Option<&'static str>,
}

/// The widget-mode flags.
#[derive(Serialize, ToSchema)]
pub(crate) struct WidgetState {
    enabled: bool,
    #[serde(rename = "stealthEnabled")]
    stealth_enabled: bool,
}

/// `{success, state}`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "state": {"enabled": false, "stealthEnabled": false}}))]
pub(crate) struct WidgetAnswer {
    success: bool,
    state: WidgetState,
}

/// `{enabled}`: turn a widget flag on or off.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"enabled": true}))]
pub(crate) struct EnabledBody {
    /// Anything but a boolean is a 400.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = bool, required = true)]
    enabled: Option<bool>,
}

/// The character shown in the card-drop window (the current one unless another was set).
#[derive(Serialize, ToSchema)]
pub(crate) struct CardDropCharacter {
    name: String,
}

/// The card-drop snapshot: a character name (a new name drops the images)
/// and its images as `data:image/...` URLs (at most 8 MiB each; others ignored).
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"name": "Mika"}))]
pub(crate) struct CardDropBody {
    /// Given: a string (null or another type is a 400).
    #[serde(default, deserialize_with = "loose::present")]
    #[schema(nullable = false)]
    name: Option<String>,
    /// Not a `data:image/` text (or larger): ignored; another type is refused.
    #[serde(rename = "dataUrl")]
    #[serde(default, deserialize_with = "loose::or_none")]
    data_url: Option<String>,
    #[serde(rename = "characterReferenceDataUrl")]
    #[serde(default, deserialize_with = "loose::or_none")]
    character_reference_data_url: Option<String>,
}

/// A `name` that is not text is a 400; any other fault as `JsonBody` answers.
impl BodyRejection for CardDropBody {
    type Error = Response;
    fn rejected(fault: BodyFault) -> Response {
        match fault {
            BodyFault::Invalid { field, .. } if field == "name" => {
                FrontendError::BadRequest("name must be a string".into()).into_response()
            }
            f => body_refused::<SuccessEnvelope>(f),
        }
    }
}

/// `{ok: true}`.
#[derive(Serialize, ToSchema)]
pub(crate) struct Okay {
    ok: bool,
}

/// The chat so far: options need an assistant turn.
/// Other keys are ignored.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"messages": [{"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello!"}]}))]
pub(crate) struct GalgameBody {
    /// Anything but an array counts as no messages; an entry that is not an
    /// object as no message.
    #[serde(default, deserialize_with = "messages")]
    #[schema(required = true)]
    messages: Vec<GalgameMessage>,
}

/// Other keys are ignored.
#[derive(Deserialize, ToSchema)]
pub(crate) struct GalgameMessage {
    /// `user` or `assistant` (anything else, text or not, is another role).
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true)]
    role: Option<String>,
}

/// The object entries of an array (anything else: none).
fn messages<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<GalgameMessage>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Array(items) => items
            .into_iter()
            .filter(Value::is_object)
            .filter_map(|m| serde_json::from_value(m).ok())
            .collect(),
        _ => Vec::new(),
    })
}

companiond_core::body_rejected!(Response, body_refused::<SuccessEnvelope> => EnabledBody, GalgameBody);

/// Canned reply options (`fallback:true, reason:"not_supported"`).
#[derive(Serialize, ToSchema)]
pub(crate) struct GalgameOptions {
    success: bool,
    fallback: bool,
    reason: &'static str,
    options: Vec<GalgameOption>,
}

#[derive(Serialize, ToSchema)]
pub(crate) struct GalgameOption {
    label: &'static str,
    text: &'static str,
}

/// Workshop subscriptions (none).
#[derive(Serialize, ToSchema)]
pub(crate) struct WorkshopItems {
    success: bool,
    #[schema(value_type = Vec<Object>)]
    items: Vec<Value>,
    total: u32,
}

/// The workshop status (no platform).
#[derive(Serialize, ToSchema)]
pub(crate) struct WorkshopStatus {
    success: bool,
    steamworks_initialized: bool,
}

/// A character's workshop upload metadata (none).
#[derive(Serialize, ToSchema)]
pub(crate) struct WorkshopMeta {
    success: bool,
    has_uploaded: bool,
    #[schema(required = true, value_type = Option<Object>)]
    meta: Option<Value>,
}

/// The workshop import (nothing to import).
#[derive(Serialize, ToSchema)]
pub(crate) struct WorkshopSync {
    success: bool,
    added: u32,
    backfilled_faces: u32,
    skipped: u32,
    errors: Vec<String>,
    message: &'static str,
}

/// JSON `null`: the shutdown beacon's answer.
pub(crate) struct Null;

impl Serialize for Null {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_unit()
    }
}

impl utoipa::PartialSchema for Null {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::Null)
            .description(Some("always null"))
            .into()
    }
}

impl ToSchema for Null {}

pub(crate) async fn music_domains() -> Json<MusicDomains> {
    Json(MusicDomains {
        success: true,
        domains: Vec::new(),
    })
}

pub(crate) async fn workshop_items() -> Json<WorkshopItems> {
    Json(WorkshopItems {
        success: true,
        items: Vec::new(),
        total: 0,
    })
}

pub(crate) async fn workshop_status() -> Json<WorkshopStatus> {
    Json(WorkshopStatus {
        success: true,
        steamworks_initialized: false,
    })
}

pub(crate) async fn workshop_sync() -> Json<WorkshopSync> {
    Json(WorkshopSync {
        success: true,
        added: 0,
        backfilled_faces: 0,
        skipped: 0,
        errors: Vec::new(),
        message: "no workshop subscriptions",
    })
}

/// The original shuts down only in its "open browser" mode; companiond never does.
pub(crate) async fn beacon_shutdown() -> Json<Null> {
    Json(Null)
}

pub(crate) async fn steam_language(State(st): State<AppState>) -> Response {
    let ui = st
        .store
        .read::<Value>("config/conversation_settings.json")
        .await
        .ok()
        .flatten()
        .and_then(|v| v.get("uiLanguage").cloned())
        .and_then(|v| v.as_str().map(str::to_string))
        .filter(|s| !s.trim().is_empty());
    no_store(Json(SteamLanguage {
        success: false,
        error: "no game platform client is running (companiond has no Steam integration)",
        ui_language: ui,
        steam_language: None,
        i18n_language: None,
        ip_country: None,
        is_mainland_china: false,
    }))
}

// ------------------------------------------------------------------ agent

/// The agent routes without companiond's (absent) agent server: 502 `down`.
pub(crate) async fn agent_down() -> FrontendError {
    FrontendError::AgentDown
}

/// `GET /api/agent/{capability}/availability` (`computer_use`, `browser_use`,
/// `user_plugin`, `openclaw`, `mcp`): the original's answer without its tool
/// server, 502 `{ready:false, reasons}` (`mcp`: 200, it was removed there).
pub(crate) async fn agent_availability(
    UrlPath(capability): UrlPath<String>,
) -> Answer<Json<Availability>> {
    if capability == "mcp" {
        return Ok(Json(Availability {
            ready: false,
            capabilities_count: 0,
            reasons: vec![NO_AGENT],
        }));
    }
    Err(FrontendError::AgentUnavailable)
}

// ------------------------------------------------------------------ widget mode, card drop

#[derive(Default)]
struct Widget {
    enabled: bool,
    stealth: bool,
}

/// The in-memory state of the pages' unavailable features (provided by
/// [`crate::start`]): widget-mode flags and the card-drop snapshot.
#[derive(Default)]
pub struct Extras {
    widget: Mutex<Widget>,
    card_drop: Mutex<Option<Map<String, Value>>>,
}

fn widget_json(w: &Widget) -> Json<WidgetAnswer> {
    Json(WidgetAnswer {
        success: true,
        state: WidgetState {
            enabled: w.enabled,
            stealth_enabled: w.stealth,
        },
    })
}

pub(crate) async fn widget_get(Ext(extras): Ext<Extras>) -> Response {
    let w = extras.widget.lock().unwrap_or_else(|e| e.into_inner());
    no_store(widget_json(&w))
}

/// Set one widget flag from the body's boolean `enabled`: the new state, or 400.
fn widget_set(
    extras: &Extras,
    body: EnabledBody,
    flag: fn(&mut Widget) -> &mut bool,
) -> Answer<Json<WidgetAnswer>> {
    let Some(on) = body.enabled else {
        return Err(FrontendError::BadRequest(
            "enabled must be a boolean".into(),
        ));
    };
    let mut w = extras.widget.lock().unwrap_or_else(|e| e.into_inner());
    *flag(&mut w) = on;
    Ok(widget_json(&w))
}

pub(crate) async fn widget_enabled(
    Ext(extras): Ext<Extras>,
    BodyOf(body): BodyOf<EnabledBody>,
) -> Answer<Json<WidgetAnswer>> {
    widget_set(&extras, body, |w| &mut w.enabled)
}

pub(crate) async fn widget_stealth(
    Ext(extras): Ext<Extras>,
    BodyOf(body): BodyOf<EnabledBody>,
) -> Answer<Json<WidgetAnswer>> {
    widget_set(&extras, body, |w| &mut w.stealth)
}

/// Largest avatar data URL kept in the card-drop snapshot.
const MAX_DATA_URL: usize = 8 * 1024 * 1024;

pub(crate) async fn card_drop_set(
    Ext(extras): Ext<Extras>,
    BodyOf(body): BodyOf<CardDropBody>,
) -> Answer<Json<Okay>> {
    let mut snap = extras.card_drop.lock().unwrap_or_else(|e| e.into_inner());
    let mut next = snap.clone().unwrap_or_default();
    if let Some(n) = body.name.as_deref() {
        if next.get("name").and_then(Value::as_str) != Some(n) {
            next.clear();
        }
        next.insert("name".into(), json!(n));
    }
    for (k, v) in [
        ("dataUrl", body.data_url),
        (
            "characterReferenceDataUrl",
            body.character_reference_data_url,
        ),
    ] {
        if let Some(v) = v {
            if v.len() <= MAX_DATA_URL && v.starts_with("data:image/") {
                next.insert(k.into(), json!(v));
            }
        }
    }
    *snap = Some(next);
    Ok(Json(Okay { ok: true }))
}

pub(crate) async fn card_drop_get(
    State(st): State<AppState>,
    Ext(extras): Ext<Extras>,
) -> Json<CardDropCharacter> {
    let name = extras
        .card_drop
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|s| s.get("name").and_then(Value::as_str).map(str::to_string))
        .filter(|n| st.characters.exists(n))
        .unwrap_or_else(|| st.characters.current());
    Json(CardDropCharacter { name })
}

// ------------------------------------------------------------------ galgame

pub(crate) async fn galgame_options(
    BodyOf(body): BodyOf<GalgameBody>,
) -> Answer<Json<GalgameOptions>> {
    let has_assistant = body
        .messages
        .iter()
        .any(|m| m.role.as_deref() == Some("assistant"));
    if !has_assistant {
        return Err(FrontendError::Refused {
            code: "no_assistant_turn",
            error: "no_assistant_turn".into(),
        });
    }
    let option = |label, text| GalgameOption { label, text };
    Ok(Json(GalgameOptions {
        success: true,
        fallback: true,
        reason: "not_supported",
        options: vec![
            option("继续", "Tell me more."),
            option("好的", "Okay!"),
            option("换话题", "Let's talk about something else."),
        ],
    }))
}

// ------------------------------------------------------------------ workshop

pub(crate) async fn workshop_meta(UrlPath(_name): UrlPath<String>) -> Json<WorkshopMeta> {
    Json(WorkshopMeta {
        success: true,
        has_uploaded: false,
        meta: None,
    })
}

pub(crate) async fn music_search(QueryOf(q): QueryOf<MusicQuery>) -> Json<MusicSearch> {
    let query = q.query.unwrap_or_default();
    let (error, message) = if query.trim().is_empty() {
        ("EMPTY_QUERY", None)
    } else {
        ("MUSIC_UNAVAILABLE", Some("companiond has no music search"))
    };
    Json(MusicSearch {
        success: false,
        error,
        data: Vec::new(),
        message,
    })
}

#[cfg(test)]
mod body_tests {
    use super::*;
    use companiond_core::envelope::parse_body;

    #[test]
    fn galgame_messages_are_read_leniently() {
        let assistant = |s: &str| {
            parse_body::<GalgameBody>(s.as_bytes()).is_ok_and(|b| {
                b.messages
                    .iter()
                    .any(|m| m.role.as_deref() == Some("assistant"))
            })
        };
        assert!(assistant(r#"{"messages": ["x", {"role": "assistant"}]}"#));
        assert!(!assistant(r#"{"messages": [["assistant"], {"role": 5}]}"#));
        assert!(!assistant(r#"{"messages": "assistant"}"#));
        assert!(!assistant("{}"));
    }

    #[test]
    fn a_card_drop_name_must_be_text() {
        let status = |s: &str| match parse_body::<CardDropBody>(s.as_bytes()) {
            Ok(_) => 200,
            Err(f) => CardDropBody::rejected(f).status().as_u16(),
        };
        assert_eq!(status(r#"{"name": "Mika", "dataUrl": null}"#), 200);
        assert_eq!(status(r#"{"name": "Mika", "dataUrl": 5}"#), 422);
        assert_eq!(status(r#"{"name": null}"#), 400);
        assert_eq!(status(r#"{"name": 3}"#), 400);
        assert_eq!(status("[1]"), 422);
    }
}
