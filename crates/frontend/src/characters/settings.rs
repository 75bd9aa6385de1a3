//! Per-character settings of the original pages: voice mode, MMD viewer
//! settings, lighting, touch reactions, reply language and voices.

use std::marker::PhantomData;

use axum::extract::{Path as UrlPath, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::{
    body_refused, loose, no_store, BodyFault, BodyOf, BodyRejection, SuccessEnvelope,
};
use companiond_core::AppState;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use super::cards::{done, Done};
use super::*;

// ------------------------------------------------------------------ bodies and answers

/// A character's voice-mode status (companiond is text only: never voice mode).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"is_voice_mode": false, "is_current": true, "is_active": false,
    "is_starting": false, "is_voice_starting": false}))]
pub(crate) struct VoiceModeStatus {
    is_voice_mode: bool,
    is_current: bool,
    is_active: bool,
    is_starting: bool,
    is_voice_starting: bool,
    /// `true` when the path's name is not a valid character name (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    invalid_name: Option<bool>,
}

/// The MMD viewer settings: every key is present in an answer; a save may send
/// any of them (unknown keys are ignored, numbers clamped to their range).
// A save is merged key by key over the stored settings in the order sent
// (`merge_mmd`: each value checked and clamped, the first bad one refused by
// name): it is read as its object, in order (`groups`); the named groups state
// the known keys (also the answer's schema), judged inside it.
#[derive(Default, Deserialize, ToSchema)]
#[serde(from = "Map<String, Value>")]
#[schema(rename_all = "camelCase")]
pub(crate) struct MmdSettings {
    #[schema(value_type = Option<MmdLighting>, nullable = false)]
    lighting: PhantomData<MmdLighting>,
    #[schema(value_type = Option<MmdRendering>, nullable = false)]
    rendering: PhantomData<MmdRendering>,
    #[schema(value_type = Option<MmdPhysics>, nullable = false)]
    physics: PhantomData<MmdPhysics>,
    /// Also accepted as `cursor_follow` in a save.
    #[schema(value_type = Option<MmdCursorFollow>, nullable = false)]
    cursor_follow: PhantomData<MmdCursorFollow>,
    #[schema(ignore)]
    groups: Map<String, Value>,
}

companiond_core::ordered_body!(MmdSettings => groups);

// A group of `MmdSettings`, stated for the schema.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub(crate) struct MmdLighting {
    /// Clamped to 0..=10.
    #[schema(value_type = Option<f64>, nullable = false)]
    ambient_intensity: PhantomData<f64>,
    /// A CSS colour (at most 32 characters).
    #[schema(value_type = Option<String>, nullable = false, max_length = 32)]
    ambient_color: PhantomData<String>,
    /// Clamped to 0..=10.
    #[schema(value_type = Option<f64>, nullable = false)]
    directional_intensity: PhantomData<f64>,
    /// A CSS colour (at most 32 characters).
    #[schema(value_type = Option<String>, nullable = false, max_length = 32)]
    directional_color: PhantomData<String>,
}

// A group of `MmdSettings`, stated for the schema.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub(crate) struct MmdRendering {
    /// Clamped to 0..=7.
    #[schema(value_type = Option<f64>, nullable = false)]
    tone_mapping: PhantomData<f64>,
    /// Clamped to 0..=10.
    #[schema(value_type = Option<f64>, nullable = false)]
    exposure: PhantomData<f64>,
    #[schema(value_type = Option<bool>, nullable = false)]
    outline: PhantomData<bool>,
    /// Clamped to 0..=4.
    #[schema(value_type = Option<f64>, nullable = false)]
    pixel_ratio: PhantomData<f64>,
}

// A group of `MmdSettings`, stated for the schema.
#[derive(ToSchema)]
pub(crate) struct MmdPhysics {
    #[schema(value_type = Option<bool>, nullable = false)]
    enabled: PhantomData<bool>,
    /// Clamped to 0..=10.
    #[schema(value_type = Option<f64>, nullable = false)]
    strength: PhantomData<f64>,
}

// A group of `MmdSettings`, stated for the schema.
#[derive(ToSchema)]
#[schema(rename_all = "camelCase")]
pub(crate) struct MmdCursorFollow {
    #[schema(value_type = Option<bool>, nullable = false)]
    enabled: PhantomData<bool>,
    /// Clamped to 0..=90.
    #[schema(value_type = Option<f64>, nullable = false)]
    head_yaw: PhantomData<f64>,
    /// Clamped to 0..=90.
    #[schema(value_type = Option<f64>, nullable = false)]
    head_pitch: PhantomData<f64>,
    /// Clamped to 0..=20.
    #[schema(value_type = Option<f64>, nullable = false)]
    smooth_speed: PhantomData<f64>,
}

/// A character's MMD viewer settings (saved over the defaults).
#[derive(Serialize, ToSchema)]
pub(crate) struct MmdSettingsAnswer {
    success: bool,
    #[schema(value_type = MmdSettings)]
    settings: Value,
}

/// `{lighting}`: the VRM lighting, every value a number (stored as sent).
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"lighting": {"ambient": 0.6, "main": 1.2}}))]
pub(crate) struct LightingBody {
    /// Absent or null: `lighting must be an object` (another type is refused
    /// as a body); a value that is not a number: `every lighting value must be a number`.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = std::collections::BTreeMap<String, f64>, required = true)]
    lighting: Option<Map<String, Value>>,
}

/// A model's touch reactions (null counts as missing; another type is refused).
#[derive(Deserialize, ToSchema)]
pub(crate) struct TouchSetBody {
    /// The model the reactions belong to (not blank).
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, pattern = "\\S")]
    model_name: Option<String>,
    /// The reactions, stored as sent.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = Object, required = true)]
    touch_set: Option<Map<String, Value>>,
}

companiond_core::body_rejected!(Response, body_refused::<SuccessEnvelope> =>
    LightingBody, TouchSetBody, MmdSettings, VoiceIdBody);

/// A character's reply language: its own (empty: none) and the one in effect
/// (the UI language when it has none).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "language": "", "effective_language": "en"}))]
pub(crate) struct LanguagePreference {
    success: bool,
    language: String,
    effective_language: String,
}

/// `{language}`: a language code (empty or null: none).
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"language": "zh-CN"}))]
pub(crate) struct LanguageBody {
    #[schema(pattern = "^[A-Za-z0-9_-]{0,16}$")]
    language: Option<String>,
}

/// A language that is not text keeps its 400; any other fault as `JsonBody` answers.
impl BodyRejection for LanguageBody {
    type Error = Response;
    fn rejected(fault: BodyFault) -> Response {
        match fault {
            BodyFault::Invalid { field, .. } if field == "language" => {
                bad("language must be a string").into_response()
            }
            f => body_refused::<SuccessEnvelope>(f),
        }
    }
}

/// The saved reply language.
#[derive(Serialize, ToSchema)]
pub(crate) struct LanguageSet {
    success: bool,
    language: String,
}

/// Legacy character cards (none).
#[derive(Serialize, ToSchema)]
pub(crate) struct CardList {
    success: bool,
    #[schema(value_type = Vec<Object>)]
    character_cards: Vec<Value>,
}

/// Characters with a card face (a card image).
#[derive(Serialize, ToSchema)]
pub(crate) struct CardFaces {
    success: bool,
    names: Vec<String>,
}

/// Card metadata (the saved one is kept as stored).
#[derive(ToSchema)]
#[allow(dead_code)] // an answer: the schema of the stored JSON `card_metas` shows
pub(crate) struct CardMeta {
    author: Option<String>,
    origin: Option<String>,
    created_at: Option<String>,
    updated_at: Option<String>,
    /// Other keys (kept as sent or ignored, as said above).
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// Card metadata by character name.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "metas": {"Mika": {"author": "", "origin": "self",
    "created_at": null, "updated_at": null}}}))]
pub(crate) struct CardMetas {
    success: bool,
    #[schema(value_type = std::collections::BTreeMap<String, CardMeta>)]
    metas: Map<String, Value>,
}

/// Text-to-speech voices (none in companiond).
#[derive(Serialize, ToSchema)]
pub(crate) struct Voices {
    success: bool,
    #[schema(value_type = Object)]
    voices: Map<String, Value>,
    #[schema(value_type = Object)]
    native_voices: Map<String, Value>,
    #[schema(value_type = Object)]
    free_voices: Map<String, Value>,
    pinned_voices: Vec<String>,
    #[schema(value_type = Object)]
    voice_owners: Map<String, Value>,
}

/// Custom voices are not enabled (always this answer).
#[derive(Serialize, ToSchema)]
pub(crate) struct CustomVoices {
    /// Always `false`.
    success: bool,
    code: &'static str,
    error_code: &'static str,
    error: &'static str,
    voices: Vec<String>,
}

/// Voices cleared.
#[derive(Serialize, ToSchema)]
pub(crate) struct VoicesCleared {
    success: bool,
    cleared_count: usize,
    message: String,
}

/// `{voice_id}`: the voice to set (a value that is not text names none).
#[derive(Deserialize, ToSchema)]
pub(crate) struct VoiceIdBody {
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    voice_id: Given<String>,
}

/// A character's voice cleared.
#[derive(Serialize, ToSchema)]
pub(crate) struct VoiceUnregistered {
    success: bool,
    session_restarted: bool,
    voice_id_changed: bool,
}

// ------------------------------------------------------------------ per-character settings

pub(crate) async fn voice_mode_status(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Response {
    let valid = validate_name(&name, NameRules::EXISTING).is_ok();
    no_store(Json(VoiceModeStatus {
        is_voice_mode: false,
        is_current: valid && st.characters.current() == name,
        is_active: valid && st.sessions.is_active(&name),
        is_starting: false,
        is_voice_starting: false,
        invalid_name: (!valid).then_some(true),
    }))
}

fn mmd_defaults() -> Value {
    json!({
        "lighting": {"ambientIntensity": 3.0, "ambientColor": "#aaaaaa",
                     "directionalIntensity": 2.0, "directionalColor": "#ffffff"},
        "rendering": {"toneMapping": 7, "exposure": 1.0, "outline": true, "pixelRatio": 0},
        "physics": {"enabled": true, "strength": 1.0},
        "cursorFollow": {"enabled": true, "headYaw": 30, "headPitch": 20, "smoothSpeed": 3.0},
    })
}

/// Numeric bounds of the MMD settings (values outside are clamped).
fn mmd_bounds(group: &str, key: &str) -> Option<(f64, f64)> {
    Some(match (group, key) {
        ("lighting", "ambientIntensity" | "directionalIntensity") => (0.0, 10.0),
        ("rendering", "toneMapping") => (0.0, 7.0),
        ("rendering", "exposure") => (0.0, 10.0),
        ("rendering", "pixelRatio") => (0.0, 4.0),
        ("physics", "strength") => (0.0, 10.0),
        ("cursorFollow", "headYaw" | "headPitch") => (0.0, 90.0),
        ("cursorFollow", "smoothSpeed") => (0.0, 20.0),
        _ => return None,
    })
}

fn merge_mmd(base: &mut Value, patch: &Map<String, Value>) -> Result<(), String> {
    for (group_in, val) in patch {
        let group = if group_in == "cursor_follow" {
            "cursorFollow"
        } else {
            group_in.as_str()
        };
        if !matches!(group, "lighting" | "rendering" | "physics" | "cursorFollow") {
            continue;
        }
        let Some(obj) = val.as_object() else {
            return Err(format!("{group_in} must be an object"));
        };
        let Some(target) = base.get_mut(group).and_then(Value::as_object_mut) else {
            continue;
        };
        for (k, v) in obj {
            let Some(cur) = target.get(k) else { continue };
            let next = match (cur, v) {
                (Value::Number(_), Value::Number(n)) => {
                    let f = n.as_f64().unwrap_or(0.0);
                    if !f.is_finite() {
                        return Err(format!("{group_in}.{k} must be a finite number"));
                    }
                    let f = match mmd_bounds(group, k) {
                        Some((lo, hi)) => f.clamp(lo, hi),
                        None => f,
                    };
                    json!(f)
                }
                (Value::Bool(_), Value::Bool(b)) => json!(b),
                (Value::String(_), Value::String(s)) if s.chars().count() <= 32 => json!(s),
                _ => return Err(format!("{group_in}.{k} has the wrong type")),
            };
            target.insert(k.clone(), next);
        }
    }
    Ok(())
}

/// The MMD viewer settings saved in `profile` over the defaults.
fn mmd_settings_of(profile: &Value) -> Value {
    let mut settings = mmd_defaults();
    if let Some(Value::Object(saved)) = reserved_get(profile, "mmd_settings") {
        let _ = merge_mmd(&mut settings, &saved);
    }
    settings
}

pub(crate) async fn mmd_settings_get(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Answer<Json<MmdSettingsAnswer>> {
    let settings = mmd_settings_of(&profile_of(&st, &name)?);
    Ok(Json(MmdSettingsAnswer {
        success: true,
        settings,
    }))
}

pub(crate) async fn mmd_settings_put(
    State(st): State<AppState>,
    CharacterEdit { name, body }: CharacterEdit<MmdSettings>,
) -> Answer<Json<MmdSettingsAnswer>> {
    let mut settings = mmd_settings_of(&profile_of(&st, &name)?);
    merge_mmd(&mut settings, &body.groups).map_err(bad)?;
    let to_store = settings.clone();
    update_profile(&st, &name, move |p| {
        reserved_obj(p).insert("mmd_settings".into(), to_store);
        Ok(())
    })
    .await?;
    Ok(Json(MmdSettingsAnswer {
        success: true,
        settings,
    }))
}

pub(crate) async fn lighting_put(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
    BodyOf(body): BodyOf<LightingBody>,
) -> Answer<Json<Done>> {
    let Some(lighting) = body.lighting else {
        return Err(bad("lighting must be an object"));
    };
    if lighting.values().any(|v| !v.is_number()) {
        return Err(bad("every lighting value must be a number"));
    }
    update_profile(&st, &name, move |p| {
        p.insert("lighting".into(), Value::Object(lighting));
        Ok(())
    })
    .await?;
    Ok(done())
}

pub(crate) async fn touch_set_patch(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
    BodyOf(body): BodyOf<TouchSetBody>,
) -> Answer<Json<Done>> {
    let Some(model) = body
        .model_name
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_string)
    else {
        return Err(bad("model_name is required"));
    };
    let Some(set) = body.touch_set.map(Value::Object) else {
        return Err(bad("touch_set must be an object"));
    };
    update_profile(&st, &name, move |p| {
        let r = reserved_obj(p);
        let ts = r.entry("touch_set").or_insert_with(|| json!({}));
        if !ts.is_object() {
            *ts = json!({});
        }
        if let Some(o) = ts.as_object_mut() {
            o.insert(model, set);
        }
        Ok(())
    })
    .await?;
    Ok(done())
}

// ------------------------------------------------------------------ language preference

pub(crate) async fn ui_language(st: &AppState) -> String {
    st.store
        .read::<Value>("config/conversation_settings.json")
        .await
        .ok()
        .flatten()
        .and_then(|v| {
            v.get("uiLanguage")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_default()
}

pub(crate) async fn language_get(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Answer<Response> {
    let lang = reserved_get(&profile_of(&st, &name)?, "language_preference")
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let effective = if lang.is_empty() {
        ui_language(&st).await
    } else {
        lang.clone()
    };
    Ok(no_store(Json(LanguagePreference {
        success: true,
        language: lang,
        effective_language: effective,
    })))
}

pub(crate) async fn language_put(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
    BodyOf(body): BodyOf<LanguageBody>,
) -> Answer<Json<LanguageSet>> {
    let lang = body
        .language
        .as_deref()
        .map(str::trim)
        .unwrap_or("")
        .to_string();
    if lang.len() > 16
        || !lang
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(bad("language must be a language code such as en or zh-CN"));
    }
    let l = lang.clone();
    update_profile(&st, &name, move |p| {
        let r = reserved_obj(p);
        if l.is_empty() {
            r.remove("language_preference");
        } else {
            r.insert("language_preference".into(), json!(l));
        }
        Ok(())
    })
    .await?;
    Ok(Json(LanguageSet {
        success: true,
        language: lang,
    }))
}

// ------------------------------------------------------------------ cards, voices

pub(crate) async fn card_list() -> Json<CardList> {
    Json(CardList {
        success: true,
        character_cards: Vec::new(),
    })
}

/// The characters with a card image (an imported character card's image,
/// docs/characters.md): the original card manager shows it as the card face.
pub(crate) async fn card_faces(State(st): State<AppState>) -> Json<CardFaces> {
    let doc = st.characters.snapshot();
    let names = doc
        .characters
        .iter()
        .filter(|(_, p)| {
            companiond_core::cards::reserved(p, companiond_core::cards::IMAGE_KEY)
                .is_some_and(Value::is_string)
        })
        .map(|(n, _)| n.clone())
        .collect();
    Json(CardFaces {
        success: true,
        names,
    })
}

/// `GET /api/characters/catgirl/{name}/card-face`: the character's card image;
/// 404 without one.
pub(crate) async fn card_face(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Answer<Response> {
    let profile = profile_of(&st, &name)?;
    let root = st.store.root().to_path_buf();
    let image =
        tokio::task::spawn_blocking(move || companiond_core::cards::image_of(&root, &profile))
            .await
            .map_err(|e| FrontendError::Storage(e.to_string()))?
            .ok_or_else(|| FrontendError::NotFound(format!("{name:?} has no card face")))?;
    let ct = companiond_core::cards::image_type(&image);
    Ok(no_store(([(axum::http::header::CONTENT_TYPE, ct)], image)))
}

pub(crate) async fn card_metas(State(st): State<AppState>) -> Json<CardMetas> {
    let doc = st.characters.snapshot();
    let metas: Map<String, Value> = doc
        .characters
        .iter()
        .map(|(name, p)| {
            let meta = reserved_get(p, "card_meta")
                .filter(Value::is_object)
                .unwrap_or_else(|| {
                    json!({"author": "", "origin": "self", "created_at": null, "updated_at": null})
                });
            (name.clone(), meta)
        })
        .collect();
    Json(CardMetas {
        success: true,
        metas,
    })
}

/// Custom (GPT-SoVITS) voices: companiond has no voice server for characters, so
/// the answer is the original's "not enabled" one, which the card form shows as a
/// one-line hint under the voice list.
/// (The original answers 400; 200 with `success:false` reads the same to the page
/// and keeps a "failed to load resource" line out of its console.)
pub(crate) async fn custom_tts_voices() -> Json<CustomVoices> {
    Json(CustomVoices {
        success: false,
        code: "GPTSOVITS_NOT_ENABLED",
        error_code: "GPTSOVITS_NOT_ENABLED",
        error: "custom voices (GPT-SoVITS) are not enabled: companiond has no voice server for characters",
        voices: Vec::new(),
    })
}

pub(crate) async fn voices() -> Json<Voices> {
    Json(Voices {
        success: true,
        voices: Map::new(),
        native_voices: Map::new(),
        free_voices: Map::new(),
        pinned_voices: Vec::new(),
        voice_owners: Map::new(),
    })
}

pub(crate) async fn clear_voice_ids(State(st): State<AppState>) -> Answer<Json<VoicesCleared>> {
    let n = st
        .characters
        .mutate(|doc| {
            let mut n = 0;
            for p in doc.characters.values_mut() {
                if let Some(m) = p.as_object_mut() {
                    if m.remove("voice_id").is_some_and(|v| !is_empty_value(&v)) {
                        n += 1;
                    }
                }
            }
            Ok(n)
        })
        .await?;
    Ok(Json(VoicesCleared {
        success: true,
        cleared_count: n,
        message: format!("cleared the voice of {n} character(s)"),
    }))
}

pub(crate) async fn voice_id_put(
    State(st): State<AppState>,
    CharacterEdit { name, body }: CharacterEdit<VoiceIdBody>,
) -> Answer<Json<Done>> {
    existing(&st, &name)?;
    let voice = body.voice_id.value().map_or("", String::as_str);
    Err(FrontendError::VoiceUnavailable(format!(
        "voice {voice:?} is not available: companiond has no text-to-speech voices"
    )))
}

pub(crate) async fn unregister_voice(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Answer<Json<VoiceUnregistered>> {
    let had_voice = update_profile(&st, &name, |p| {
        Ok(p.remove("voice_id").is_some_and(|v| !is_empty_value(&v)))
    })
    .await?;
    if !had_voice {
        return Err(FrontendError::VoiceNotRegistered);
    }
    Ok(Json(VoiceUnregistered {
        success: true,
        session_restarted: false,
        voice_id_changed: true,
    }))
}

#[cfg(test)]
mod body_tests {
    use super::*;
    use companiond_core::envelope::parse_body;

    #[test]
    fn lighting_touch_and_language_bodies() {
        let lighting = |s: &str| {
            parse_body::<LightingBody>(s.as_bytes())
                .ok()
                .and_then(|b| b.lighting)
        };
        assert!(lighting(r#"{"lighting": {"a": 1, "b": "x"}}"#).is_some());
        assert!(lighting(r#"{"lighting": null}"#).is_none());
        assert!(parse_body::<LightingBody>(br#"{"lighting": [1]}"#).is_err());
        let touch = |s: &str| {
            parse_body::<TouchSetBody>(s.as_bytes())
                .ok()
                .map(|b| (b.model_name.is_some(), b.touch_set.is_some()))
        };
        assert_eq!(
            touch(r#"{"model_name": "m", "touch_set": {}}"#),
            Some((true, true))
        );
        assert_eq!(
            touch(r#"{"model_name": null, "touch_set": null}"#),
            Some((false, false))
        );
        assert_eq!(touch(r#"{"model_name": 1, "touch_set": {}}"#), None);
        let status = |s: &str| match parse_body::<LanguageBody>(s.as_bytes()) {
            Ok(_) => 200,
            Err(f) => LanguageBody::rejected(f).status().as_u16(),
        };
        assert_eq!(status(r#"{"language": null}"#), 200);
        assert_eq!(status(r#"{"language": 5}"#), 400);
        assert_eq!(status("{x"), 422);
    }
}
