//! The per-character routes of the original pages (`/api/characters/...` besides
//! core's own), on companiond's characters store (reference frontend.md § 3.2–3.4).
//!
//! Storage: user fields and the model binding (`model_type`, `live2d`, `vrm`, `mmd`,
//! `lighting`, ...; what `page_config` reads) are top-level keys of the profile;
//! settings of the original pages without a top-level home (`field_order`,
//! `mmd_settings`, `touch_set`, `language_preference`) live under the profile's
//! `_reserved` object, so they move with a rename and leave with a delete.

use axum::extract::{Path as UrlPath, RawQuery, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use companiond_core::characters::{
    validate_name, CharacterError, NameRules, MASTER_DOC, SYSTEM_RESERVED,
};
use companiond_core::envelope::{no_store, ok_json, JsonBody, SuccessError};
use companiond_core::guards::Csrf;
use companiond_core::{Api, AppState};
use serde_json::{json, Map, Value};

/// Profile keys owned by the system besides core's [`SYSTEM_RESERVED`] (never
/// replaced by a form save).
const MORE_RESERVED: &[&str] = &["avatar", "pngtuber", "name"];

/// Body keys a form save may set although they are reserved.
const FORM_SETTABLE: &[&str] = &["voice_id", "model_type"];

fn is_reserved(k: &str) -> bool {
    SYSTEM_RESERVED.contains(&k) || MORE_RESERVED.contains(&k) || k.starts_with("master_")
}

fn is_empty_value(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        _ => false,
    }
}

fn bad(msg: impl Into<String>) -> Response {
    SuccessError::new(msg)
        .code("invalid_request")
        .status(StatusCode::BAD_REQUEST)
}

fn not_found(name: &str) -> Response {
    CharacterError::NotFound(name.to_string()).into_response()
}

/// Change one profile atomically; 404 when the character is missing.
pub async fn update_profile<R>(
    st: &AppState,
    name: &str,
    f: impl FnOnce(&mut Map<String, Value>) -> Result<R, CharacterError>,
) -> Result<R, CharacterError> {
    let name = name.to_string();
    st.characters
        .mutate(move |doc| {
            let Some(p) = doc.characters.get_mut(&name) else {
                return Err(CharacterError::NotFound(name));
            };
            if !p.is_object() {
                *p = json!({});
            }
            match p.as_object_mut() {
                Some(m) => f(m),
                None => Err(CharacterError::Storage("profile is not an object".into())),
            }
        })
        .await
}

fn reserved_obj(m: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let r = m.entry("_reserved").or_insert_with(|| json!({}));
    if !r.is_object() {
        *r = json!({});
    }
    match r {
        Value::Object(o) => o,
        _ => unreachable!("just made an object"),
    }
}

fn reserved_get(profile: &Value, key: &str) -> Option<Value> {
    profile.get("_reserved").and_then(|r| r.get(key)).cloned()
}

// ------------------------------------------------------------------ current

async fn current_get(State(st): State<AppState>) -> Response {
    no_store(ok_json(json!({"current_catgirl": st.characters.current()})))
}

async fn current_set(
    State(st): State<AppState>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let Some(name) = body
        .get("catgirl_name")
        .or_else(|| body.get("name"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|n| !n.is_empty())
    else {
        return bad("catgirl_name is required");
    };
    let old = st.characters.current();
    match st.characters.set_current(name).await {
        Ok(new) => {
            if new != old {
                st.sessions.notify_all(
                    json!({"type": "catgirl_switched", "new_catgirl": new, "old_catgirl": old}),
                );
            }
            ok_json(json!({"success": true, "current": new, "current_catgirl": new}))
        }
        Err(e) => e.into_response(),
    }
}

// ------------------------------------------------------------------ create / save / delete

/// The user fields of a form body: not reserved (except `voice_id`/`model_type`),
/// not empty, without `档案名` and transport keys. Also the reserved keys ignored.
fn form_fields(body: &Map<String, Value>) -> (Map<String, Value>, Vec<String>) {
    let mut out = Map::new();
    let mut ignored = Vec::new();
    for (k, v) in body {
        if matches!(k.as_str(), "档案名" | "_field_order" | "_csrf_token") {
            continue;
        }
        if is_reserved(k) && !FORM_SETTABLE.contains(&k.as_str()) {
            ignored.push(k.clone());
            continue;
        }
        if is_empty_value(v) {
            continue;
        }
        out.insert(k.clone(), v.clone());
    }
    (out, ignored)
}

fn field_order(body: &Map<String, Value>) -> Option<Value> {
    body.get("_field_order")
        .filter(|v| v.as_array().is_some_and(|a| a.iter().all(Value::is_string)))
        .cloned()
}

async fn create(
    State(st): State<AppState>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let Some(raw) = body.get("档案名").and_then(Value::as_str) else {
        return bad("档案名 (the character name) is required");
    };
    let base = match validate_name(raw, NameRules::NEW) {
        Ok(n) => n,
        Err(e) => return CharacterError::Invalid(e).into_response(),
    };
    let (mut fields, _) = form_fields(&body);
    if let Some(order) = field_order(&body) {
        reserved_obj(&mut fields).insert("field_order".into(), order);
    }
    // A taken name gets a suffix: name(1), name(2) ...
    for i in 0..1000 {
        let candidate = if i == 0 {
            base.clone()
        } else {
            format!("{base}({i})")
        };
        match st.characters.create(&candidate, fields.clone()).await {
            Ok(name) => {
                st.sessions.ensure(&name);
                return ok_json(json!({"success": true, "character_name": name,
                                      "memory_server_reloaded": false}));
            }
            Err(CharacterError::Exists(_)) => continue,
            Err(e) => return e.into_response(),
        }
    }
    bad("no free name for this character")
}

async fn save(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let (fields, ignored) = form_fields(&body);
    let order = field_order(&body);
    let r = update_profile(&st, &name, move |p| {
        let old_voice = p.get("voice_id").cloned();
        let mut next = Map::new();
        for (k, v) in &fields {
            next.insert(k.clone(), v.clone());
        }
        for (k, v) in p.iter() {
            if is_reserved(k) && !next.contains_key(k) {
                next.insert(k.clone(), v.clone());
            }
        }
        if let Some(order) = order {
            reserved_obj(&mut next).insert("field_order".into(), order);
        }
        let voice_changed = next.get("voice_id") != old_voice.as_ref();
        *p = next;
        Ok(voice_changed)
    })
    .await;
    match r {
        Ok(voice_changed) => ok_json(json!({
            "success": true, "character_name": name, "voice_id_changed": voice_changed,
            "session_restarted": false, "context_refreshed": false,
            "ignored_reserved_fields": ignored,
        })),
        Err(e) => e.into_response(),
    }
}

async fn remove(st: &AppState, name: &str) -> Response {
    if !st.characters.exists(name) {
        return not_found(name);
    }
    if st.characters.current() == name {
        return SuccessError::new("the current character cannot be deleted; switch first")
            .code("current_character")
            .status(StatusCode::BAD_REQUEST);
    }
    match st.characters.delete(name).await {
        Ok(()) => {
            if let Some(m) = st.sessions.get(name) {
                m.terminate(std::time::Duration::from_secs(3)).await;
            }
            st.sessions.remove(name);
            ok_json(json!({"success": true, "memory_server_reloaded": false}))
        }
        Err(e) => e.into_response(),
    }
}

async fn delete_path(State(st): State<AppState>, UrlPath(name): UrlPath<String>) -> Response {
    remove(&st, &name).await
}

async fn delete_body(
    State(st): State<AppState>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    match body.get("name").and_then(Value::as_str) {
        Some(n) => remove(&st, n).await,
        None => bad("name is required"),
    }
}

// ------------------------------------------------------------------ master

async fn master_set(
    State(st): State<AppState>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let Some(name) = body
        .get("档案名")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|n| !n.is_empty())
    else {
        return bad("档案名 (the master's name) is required");
    };
    if name.chars().count() > 60 || name.contains(['/', '\\']) {
        return bad("the master's name is too long or contains / or \\");
    }
    let mut doc = Map::new();
    doc.insert("档案名".into(), json!(name));
    for (k, v) in &body {
        if k == "档案名" || k == "_csrf_token" || is_empty_value(v) {
            continue;
        }
        doc.insert(k.clone(), v.clone());
    }
    save_master(&st, doc).await
}

/// Write the master profile (`主人`) document: `{success:true}`, or 500 in the envelope.
async fn save_master(st: &AppState, doc: Map<String, Value>) -> Response {
    match st.store.write(MASTER_DOC, Value::Object(doc)).await {
        Ok(()) => ok_json(json!({"success": true})),
        Err(e) => SuccessError::new(format!("cannot save the master profile: {e}"))
            .code("storage_error")
            .status(StatusCode::INTERNAL_SERVER_ERROR),
    }
}

/// `POST /api/characters/master/{old}/rename` `{new_name}`: the master's name
/// (`档案名` of the master profile); 404 when `old` is not the master's name.
async fn master_rename(
    State(st): State<AppState>,
    UrlPath(old): UrlPath<String>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let Some(new) = body
        .get("new_name")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|n| !n.is_empty())
    else {
        return bad("new_name (non-empty string) is required");
    };
    if new.chars().count() > 60 || new.contains(['/', '\\']) {
        return bad("the master's name is too long or contains / or \\");
    }
    let mut doc = match st.store.read::<Value>(MASTER_DOC).await {
        Ok(Some(Value::Object(m))) => m,
        Ok(_) => Map::new(),
        Err(e) => {
            return SuccessError::new(format!("cannot read the master profile: {e}"))
                .code("storage_error")
                .status(StatusCode::INTERNAL_SERVER_ERROR)
        }
    };
    let current = doc.get("档案名").and_then(Value::as_str).unwrap_or("");
    if current != old.trim() {
        return SuccessError::new(format!("the master is not named {old:?}"))
            .code("not_found")
            .status(StatusCode::NOT_FOUND);
    }
    doc.insert("档案名".into(), json!(new));
    save_master(&st, doc).await
}

/// `POST /api/characters/catgirl/{old}/rename` `{new_name}`: the rename
/// transaction of `/api/characters/profile/{old_name}/rename` (crates/memory).
async fn rename(
    State(st): State<AppState>,
    UrlPath(old): UrlPath<String>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let new = match body.get("new_name") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        _ => return bad("new_name (non-empty string) is required"),
    };
    match companiond_memory::rename::rename(&st, &old, &new).await {
        Ok(v) => ok_json(v),
        Err(e) => axum::response::IntoResponse::into_response(e),
    }
}

// ------------------------------------------------------------------ per-character settings

async fn voice_mode_status(State(st): State<AppState>, UrlPath(name): UrlPath<String>) -> Response {
    let valid = validate_name(&name, NameRules::EXISTING).is_ok();
    let mut body = json!({
        "is_voice_mode": false,
        "is_current": valid && st.characters.current() == name,
        "is_active": valid && st.sessions.is_active(&name),
        "is_starting": false,
        "is_voice_starting": false,
    });
    if !valid {
        body["invalid_name"] = json!(true);
    }
    no_store(ok_json(body))
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
                (Value::String(_), Value::String(s)) if s.len() <= 32 => json!(s),
                _ => return Err(format!("{group_in}.{k} has the wrong type")),
            };
            target.insert(k.clone(), next);
        }
    }
    Ok(())
}

async fn mmd_settings_get(State(st): State<AppState>, UrlPath(name): UrlPath<String>) -> Response {
    let Some(profile) = st.characters.profile(&name) else {
        return not_found(&name);
    };
    let mut settings = mmd_defaults();
    if let Some(Value::Object(saved)) = reserved_get(&profile, "mmd_settings") {
        let _ = merge_mmd(&mut settings, &saved);
    }
    ok_json(json!({"success": true, "settings": settings}))
}

async fn mmd_settings_put(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let Some(profile) = st.characters.profile(&name) else {
        return not_found(&name);
    };
    let mut settings = mmd_defaults();
    if let Some(Value::Object(saved)) = reserved_get(&profile, "mmd_settings") {
        let _ = merge_mmd(&mut settings, &saved);
    }
    if let Err(e) = merge_mmd(&mut settings, &body) {
        return bad(e);
    }
    let to_store = settings.clone();
    match update_profile(&st, &name, move |p| {
        reserved_obj(p).insert("mmd_settings".into(), to_store);
        Ok(())
    })
    .await
    {
        Ok(()) => ok_json(json!({"success": true, "settings": settings})),
        Err(e) => e.into_response(),
    }
}

async fn lighting_put(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let Some(lighting) = body.get("lighting").and_then(Value::as_object).cloned() else {
        return bad("lighting must be an object");
    };
    if lighting.values().any(|v| !v.is_number()) {
        return bad("every lighting value must be a number");
    }
    match update_profile(&st, &name, move |p| {
        p.insert("lighting".into(), Value::Object(lighting));
        Ok(())
    })
    .await
    {
        Ok(()) => ok_json(json!({"success": true})),
        Err(e) => e.into_response(),
    }
}

async fn touch_set_patch(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let Some(model) = body
        .get("model_name")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_string)
    else {
        return bad("model_name is required");
    };
    let Some(set) = body.get("touch_set").filter(|v| v.is_object()).cloned() else {
        return bad("touch_set must be an object");
    };
    match update_profile(&st, &name, move |p| {
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
    .await
    {
        Ok(()) => ok_json(json!({"success": true})),
        Err(e) => e.into_response(),
    }
}

// ------------------------------------------------------------------ model binding

fn check_model_path(path: &str, kind: &str) -> Result<(), String> {
    let p = path.trim();
    let lower = p.to_ascii_lowercase();
    if p.contains("..") || lower.contains("://") || lower.starts_with("javascript:") {
        return Err(format!(
            "{kind} path must be a local served path without .."
        ));
    }
    let allowed = [
        format!("/user_{kind}/"),
        format!("/static/{kind}/"),
        "/workshop/".to_string(),
    ];
    if !allowed.iter().any(|a| p.starts_with(a.as_str())) {
        return Err(format!(
            "{kind} path must start with /user_{kind}/, /static/{kind}/ or /workshop/"
        ));
    }
    Ok(())
}

fn str_field<'a>(body: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    body.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

const PNG_IMAGE_KEYS: &[&str] = &[
    "idle_image",
    "talking_image",
    "drag_image",
    "click_image",
    "happy_image",
    "sad_image",
    "angry_image",
    "surprised_image",
];

async fn bind_model(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    if !st.characters.exists(&name) {
        return not_found(&name);
    }
    let mut set = Map::new();
    let model_type = str_field(&body, "model_type").map(str::to_ascii_lowercase);
    let idle_only = model_type.is_none()
        && body.contains_key("live2d_idle_animation")
        && !body.contains_key("live2d")
        && !body.contains_key("vrm")
        && !body.contains_key("mmd");
    if idle_only {
        set.insert(
            "live2d_idle_animation".into(),
            body.get("live2d_idle_animation")
                .cloned()
                .unwrap_or(Value::Null),
        );
    } else {
        let model_type = match model_type.as_deref() {
            None | Some("live2d") => "live2d",
            Some("live3d" | "vrm" | "mmd") => "live3d",
            Some("pngtuber") => "pngtuber",
            Some(other) => return bad(format!("unknown model_type {other:?}")),
        };
        set.insert("model_type".into(), json!(model_type));
        match model_type {
            "live2d" => {
                let Some(l2d) = str_field(&body, "live2d") else {
                    return bad("live2d (the model name) is required");
                };
                if l2d.contains("..") || l2d.contains("://") {
                    return bad("invalid Live2D model name");
                }
                let path = crate::models::live2d_path_of(&st, l2d).await;
                set.insert(
                    "live2d".into(),
                    json!(path.unwrap_or_else(|| l2d.to_string())),
                );
                let item =
                    str_field(&body, "live2d_item_id").or_else(|| str_field(&body, "item_id"));
                set.insert("live2d_item_id".into(), json!(item.unwrap_or("")));
                if let Some(v) = body.get("live2d_idle_animation") {
                    set.insert("live2d_idle_animation".into(), v.clone());
                }
            }
            "live3d" => {
                let vrm = str_field(&body, "vrm");
                let mmd = str_field(&body, "mmd");
                match (vrm, mmd) {
                    (Some(_), Some(_)) => return bad("give either vrm or mmd, not both"),
                    (None, None) => return bad("vrm or mmd (the model path) is required"),
                    (Some(v), None) => {
                        if let Err(e) = check_model_path(v, "vrm") {
                            return bad(e);
                        }
                        set.insert("live3d_sub_type".into(), json!("vrm"));
                        set.insert("vrm".into(), json!(v));
                        for k in ["vrm_animation"] {
                            if let Some(x) = body.get(k) {
                                set.insert(k.into(), x.clone());
                            }
                        }
                        if let Some(idle) = body.get("idle_animation") {
                            let list = match idle {
                                Value::Array(a) => a.clone(),
                                Value::String(s) if !s.is_empty() => vec![json!(s)],
                                _ => vec![],
                            };
                            set.insert(
                                "idleAnimation".into(),
                                list.first().cloned().unwrap_or(json!("")),
                            );
                            set.insert("idleAnimations".into(), Value::Array(list));
                        }
                    }
                    (None, Some(m)) => {
                        if let Err(e) = check_model_path(m, "mmd") {
                            return bad(e);
                        }
                        set.insert("live3d_sub_type".into(), json!("mmd"));
                        set.insert("mmd".into(), json!(m));
                        if let Some(x) = body.get("mmd_animation") {
                            set.insert("mmd_animation".into(), x.clone());
                        }
                        if let Some(idle) = body.get("mmd_idle_animation") {
                            let list = match idle {
                                Value::Array(a) => a.clone(),
                                Value::String(s) if !s.is_empty() => vec![json!(s)],
                                _ => vec![],
                            };
                            set.insert(
                                "mmd_idle_animation".into(),
                                list.first().cloned().unwrap_or(json!("")),
                            );
                            set.insert("mmd_idle_animations".into(), Value::Array(list));
                        }
                    }
                }
            }
            _ => {
                let mut png = body
                    .get("pngtuber")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                for k in PNG_IMAGE_KEYS {
                    let flat = format!("pngtuber_{k}");
                    if let Some(v) = body.get(*k).or_else(|| body.get(&flat)) {
                        png.insert((*k).to_string(), v.clone());
                    }
                }
                for (k, v) in &png {
                    if let Some(s) = v.as_str() {
                        if s.contains("..") || s.contains("://") {
                            return bad(format!("pngtuber.{k} must be a local path without .."));
                        }
                    }
                }
                set.insert("pngtuber".into(), Value::Object(png));
            }
        }
    }
    match update_profile(&st, &name, move |p| {
        for (k, v) in set {
            p.insert(k, v);
        }
        Ok(())
    })
    .await
    {
        Ok(()) => ok_json(json!({"success": true, "message": "model saved"})),
        Err(e) => e.into_response(),
    }
}

async fn current_live2d_model(State(st): State<AppState>, RawQuery(q): RawQuery) -> Response {
    let q = q.unwrap_or_default();
    let asked = crate::pages::query_param(&q, "catgirl_name").unwrap_or_default();
    let name = st
        .characters
        .resolve(Some(&asked))
        .unwrap_or_else(|| st.characters.current());
    let raw = st
        .characters
        .profile(&name)
        .and_then(|p| p.get("live2d").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_default();
    let model = match crate::models::find_live2d(&st, &raw).await {
        Some(m) => Some(m),
        // Unbound, or bound to a model that is gone: the default model, marked as
        // the fallback (as the original answers).
        None => crate::models::find_live2d(&st, crate::models::DEFAULT_LIVE2D_NAME)
            .await
            .map(|mut m| {
                if let Some(o) = m.as_object_mut() {
                    o.insert("is_fallback".into(), json!(true));
                }
                m
            }),
    };
    match model {
        Some(m) => ok_json(json!({
            "success": true, "catgirl_name": name,
            "model_name": m.get("name").cloned().unwrap_or(Value::Null),
            "model_info": m,
        })),
        None => ok_json(json!({
            "success": false, "catgirl_name": name,
            "model_name": crate::models::DEFAULT_LIVE2D_NAME,
            "model_info": Value::Null,
            "error": "no Live2D model is bound or the bound model was not found",
        })),
    }
}

// ------------------------------------------------------------------ language preference

async fn ui_language(st: &AppState) -> String {
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

async fn language_get(State(st): State<AppState>, UrlPath(name): UrlPath<String>) -> Response {
    let Some(profile) = st.characters.profile(&name) else {
        return not_found(&name);
    };
    let lang = reserved_get(&profile, "language_preference")
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let effective = if lang.is_empty() {
        ui_language(&st).await
    } else {
        lang.clone()
    };
    no_store(ok_json(
        json!({"success": true, "language": lang, "effective_language": effective}),
    ))
}

async fn language_put(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let lang = match body.get("language") {
        Some(Value::String(s)) => s.trim().to_string(),
        Some(Value::Null) | None => String::new(),
        Some(_) => return bad("language must be a string"),
    };
    if lang.len() > 16
        || !lang
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return bad("language must be a language code such as en or zh-CN");
    }
    let l = lang.clone();
    match update_profile(&st, &name, move |p| {
        let r = reserved_obj(p);
        if l.is_empty() {
            r.remove("language_preference");
        } else {
            r.insert("language_preference".into(), json!(l));
        }
        Ok(())
    })
    .await
    {
        Ok(()) => ok_json(json!({"success": true, "language": lang})),
        Err(e) => e.into_response(),
    }
}

// ------------------------------------------------------------------ onboarding, presets

const ONBOARDING_DOC: &str = "config/persona_onboarding.json";

async fn onboarding_get(State(st): State<AppState>) -> Response {
    let saved = st
        .store
        .read::<Value>(ONBOARDING_DOC)
        .await
        .ok()
        .flatten()
        .filter(Value::is_object);
    // Without presets there is nothing to choose: report the first run as done.
    let state = saved.unwrap_or_else(|| {
        json!({"version": 1, "status": "completed", "handled_at": null,
               "manual_reselect_character_name": null, "manual_reselect_requested_at": null})
    });
    no_store(ok_json(json!({"success": true, "state": state})))
}

async fn onboarding_set(
    State(st): State<AppState>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let status = body.get("status").and_then(Value::as_str).unwrap_or("");
    if !matches!(status, "pending" | "completed" | "skipped") {
        return bad("status must be pending, completed or skipped");
    }
    let state = json!({"version": 1, "status": status, "handled_at": companiond_core::now_rfc3339(),
                       "manual_reselect_character_name": null, "manual_reselect_requested_at": null});
    match st.store.write(ONBOARDING_DOC, state.clone()).await {
        Ok(()) => ok_json(json!({"success": true, "state": state})),
        Err(e) => SuccessError::new(format!("cannot save: {e}"))
            .code("storage_error")
            .status(StatusCode::INTERNAL_SERVER_ERROR),
    }
}

async fn persona_selection_get(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Response {
    if !st.characters.exists(&name) {
        return not_found(&name);
    }
    ok_json(
        json!({"success": true, "selection": {"mode": "default", "preset_id": null,
                   "source": null, "selected_at": null, "profile": null}}),
    )
}

// ------------------------------------------------------------------ cards, voices

async fn card_list() -> Response {
    ok_json(json!({"success": true, "character_cards": []}))
}

async fn card_faces() -> Response {
    ok_json(json!({"success": true, "names": []}))
}

async fn card_metas(State(st): State<AppState>) -> Response {
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
    ok_json(json!({"success": true, "metas": metas}))
}

/// Custom (GPT-SoVITS) voices: companiond has no voice server for characters, so
/// the answer is the original's "not enabled" one, which the card form shows as a
/// one-line hint under the voice list.
/// (The original answers 400; 200 with `success:false` reads the same to the page
/// and keeps a "failed to load resource" line out of its console.)
async fn custom_tts_voices() -> Response {
    ok_json(json!({"success": false, "code": "GPTSOVITS_NOT_ENABLED",
                   "error_code": "GPTSOVITS_NOT_ENABLED",
                   "error": "custom voices (GPT-SoVITS) are not enabled: companiond has no voice server for characters",
                   "voices": []}))
}

async fn voices() -> Response {
    ok_json(
        json!({"success": true, "voices": {}, "native_voices": {}, "free_voices": {},
                   "pinned_voices": [], "voice_owners": {}}),
    )
}

async fn clear_voice_ids(State(st): State<AppState>) -> Response {
    let r = st
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
        .await;
    match r {
        Ok(n) => ok_json(json!({"success": true, "cleared_count": n,
                                "message": format!("cleared the voice of {n} character(s)")})),
        Err(e) => e.into_response(),
    }
}

async fn voice_id_put(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    if !st.characters.exists(&name) {
        return not_found(&name);
    }
    let voice = body.get("voice_id").and_then(Value::as_str).unwrap_or("");
    SuccessError::new(format!(
        "voice {voice:?} is not available: companiond has no text-to-speech voices"
    ))
    .code("voice_unavailable")
    .with("available_voices", Vec::<String>::new())
    .status(StatusCode::BAD_REQUEST)
}

async fn unregister_voice(State(st): State<AppState>, UrlPath(name): UrlPath<String>) -> Response {
    let r = update_profile(&st, &name, |p| {
        Ok(p.remove("voice_id").is_some_and(|v| !is_empty_value(&v)))
    })
    .await;
    match r {
        Ok(true) => {
            ok_json(json!({"success": true, "session_restarted": false, "voice_id_changed": true}))
        }
        Ok(false) => SuccessError::new("this character has no voice")
            .code("TTS_VOICE_NOT_REGISTERED")
            .with("code", "TTS_VOICE_NOT_REGISTERED")
            .status(StatusCode::BAD_REQUEST),
        Err(e) => e.into_response(),
    }
}

/// The routes.
pub fn api(state: &AppState) -> Api {
    let api = Api::new(state, "frontend")
        .get(
            "/api/characters/current_catgirl",
            "the current character (original page path)",
            current_get,
        )
        .get(
            "/api/characters/catgirl/{name}/voice_mode_status",
            "voice-mode status of a character (companiond: text only)",
            voice_mode_status,
        )
        .get(
            "/api/characters/catgirl/{name}/mmd_settings",
            "a character's MMD viewer settings (defaults when unset)",
            mmd_settings_get,
        )
        .get(
            "/api/characters/current_live2d_model",
            "the Live2D model bound to a character (query catgirl_name)",
            current_live2d_model,
        )
        .get(
            "/api/characters/character/{name}/language-preference",
            "a character's reply language preference",
            language_get,
        )
        .get(
            "/api/characters/persona-onboarding-state",
            "first-run personality onboarding state",
            onboarding_get,
        )
        .get(
            "/api/characters/persona-presets",
            "personality presets (none in companiond)",
            || async { ok_json(json!({"success": true, "presets": []})) },
        )
        .get(
            "/api/characters/character/{name}/persona-selection",
            "a character's personality preset selection",
            persona_selection_get,
        )
        .get(
            "/api/characters/character-card/list",
            "legacy character cards (none)",
            card_list,
        )
        .get(
            "/api/characters/card-faces",
            "characters that have a card face",
            card_faces,
        )
        .get(
            "/api/characters/card-metas",
            "card metadata of every character",
            card_metas,
        )
        .get(
            "/api/characters/voices",
            "text-to-speech voices (none in companiond)",
            voices,
        )
        .get(
            "/api/characters/custom_tts_voices",
            "custom text-to-speech voices (not enabled in companiond: success false, code GPTSOVITS_NOT_ENABLED)",
            custom_tts_voices,
        )
        .guarded(
            Method::PUT,
            "/api/characters/character/{name}/language-preference",
            "set a character's reply language preference",
            Csrf::Success,
            language_put,
        );
    let api = api.post(
        "/api/characters/current_catgirl",
        "switch the current character (original page path)",
        current_set,
    );
    let api = api.post(
        "/api/characters/catgirl",
        "create a character from the original card form",
        create,
    );
    let api = api.put(
        "/api/characters/catgirl/{name}",
        "save a character's card form (replaces its user fields)",
        save,
    );
    let api = api.delete(
        "/api/characters/catgirl/{name}",
        "delete a character (not the current one)",
        delete_path,
    );
    let api = api.post(
        "/api/characters/catgirl/delete",
        "delete a character named in the body",
        delete_body,
    );
    let api = api.post(
        "/api/characters/master",
        "save the master profile (主人)",
        master_set,
    );
    let api = api.post(
        "/api/characters/master/{name}/rename",
        "rename the master profile",
        master_rename,
    );
    let api = api.post(
        "/api/characters/catgirl/{name}/rename",
        "rename a character (the transaction of /api/characters/profile/{old_name}/rename)",
        rename,
    );
    let api = api.put(
        "/api/characters/catgirl/l2d/{name}",
        "bind a Live2D, VRM, MMD or PNGTuber model to a character",
        bind_model,
    );
    let api = api.put(
        "/api/characters/catgirl/{name}/lighting",
        "save a character's VRM lighting",
        lighting_put,
    );
    let api = api.put(
        "/api/characters/catgirl/{name}/mmd_settings",
        "save a character's MMD viewer settings (merged, clamped)",
        mmd_settings_put,
    );
    let api = api.route(
        Method::PATCH,
        "/api/characters/catgirl/{name}/touch_set",
        "save a model's touch reactions for a character",
        axum::routing::patch(touch_set_patch),
    );
    let api = api.post(
        "/api/characters/clear_voice_ids",
        "clear every character's voice",
        clear_voice_ids,
    );
    let api = api.put(
        "/api/characters/catgirl/voice_id/{name}",
        "set a character's voice (none available: 400)",
        voice_id_put,
    );
    let api = api.post(
        "/api/characters/catgirl/{name}/unregister_voice",
        "clear a character's voice",
        unregister_voice,
    );
    api.post(
        "/api/characters/persona-onboarding-state",
        "record the first-run onboarding outcome",
        onboarding_set,
    )
}
