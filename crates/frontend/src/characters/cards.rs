//! The card manager: the current character, create, save and delete, the
//! master profile (`主人`) and rename.

use std::marker::PhantomData;

use axum::extract::{Path as UrlPath, State};
use axum::response::Response;
use axum::Json;
use companiond_core::envelope::{body_refused, loose, no_store, BodyOf, SuccessEnvelope};
use companiond_core::frames::ServerFrame;
use companiond_core::AppState;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use super::*;

// ------------------------------------------------------------------ bodies and answers

/// `GET /api/characters/current_catgirl`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"current_catgirl": "Mika"}))]
pub(crate) struct CurrentCatgirl {
    current_catgirl: String,
}

/// The switch body: the character in `catgirl_name`; other keys are ignored.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"catgirl_name": "Mika"}))]
pub(crate) struct SwitchBody {
    /// The character to switch to (trimmed). The older spelling `name` is read
    /// when `catgirl_name` is absent; given but not text (null too), it is
    /// missing and `name` is not read.
    #[serde(default, deserialize_with = "given_text")]
    #[schema(value_type = String, required = true, pattern = "\\S")]
    catgirl_name: Option<Option<String>>,
    /// The older spelling, left out of the document (one of the two is required).
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(ignore)]
    name: Option<String>,
}

/// A given field: `Some(Some(text))`, or `Some(None)` for any other value.
fn given_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Ok(Some(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        _ => None,
    }))
}

/// The current character after a switch (both keys name it).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "current": "Mika", "current_catgirl": "Mika"}))]
pub(crate) struct Switched {
    success: bool,
    current: String,
    current_catgirl: String,
}

/// The original card form: the name in `档案名`, the field order in
/// `_field_order`, every other non-empty key a user field of the profile (keys
/// the system owns, such as `live2d` or `_reserved`, are ignored; `voice_id` and
/// `model_type` are kept).
// The form is a free-form profile judged key by key in the order sent (reserved
// keys listed in `ignored_reserved_fields`, empty values dropped, the first
// `voice_id`/`model_type` that is not text refused): it is read as its object,
// in order (`form`); the named fields state the known keys, judged inside it.
#[derive(Default, Deserialize, ToSchema)]
#[serde(from = "Map<String, Value>")]
#[schema(example = json!({"档案名": "Mika", "性格": "cheerful", "_field_order": ["性格"]}))]
pub(crate) struct CardForm {
    /// The character's name (required to create; ignored by a save).
    #[serde(rename = "档案名")]
    #[schema(value_type = Option<String>)]
    name: PhantomData<String>,
    /// The order the card form shows the user fields in.
    #[serde(rename = "_field_order")]
    #[schema(value_type = Option<Vec<String>>)]
    field_order: PhantomData<Vec<String>>,
    #[schema(value_type = Option<String>)]
    voice_id: PhantomData<String>,
    #[schema(value_type = Option<String>)]
    model_type: PhantomData<String>,
    /// Other keys (kept as sent or ignored, as said above).
    #[serde(flatten)]
    form: Map<String, Value>,
}

/// The card form of a create: [`CardForm`] with its name required.
#[derive(Default, Deserialize, ToSchema)]
#[serde(from = "Map<String, Value>")]
#[schema(example = json!({"档案名": "Mika", "性格": "cheerful", "_field_order": ["性格"]}))]
// Read as `CardForm` is.
pub(crate) struct NewCardForm {
    /// The character's name (the character name rules apply).
    #[serde(rename = "档案名")]
    #[schema(value_type = String, pattern = "\\S")]
    name: PhantomData<String>,
    /// The order the card form shows the user fields in.
    #[serde(rename = "_field_order")]
    #[schema(value_type = Option<Vec<String>>)]
    field_order: PhantomData<Vec<String>>,
    #[schema(value_type = Option<String>)]
    voice_id: PhantomData<String>,
    #[schema(value_type = Option<String>)]
    model_type: PhantomData<String>,
    /// Other keys (kept as sent or ignored, as `CardForm` says).
    #[serde(flatten)]
    form: Map<String, Value>,
}

/// A created character (a taken name gets a suffix: `Mika(1)`).
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "character_name": "Mika", "memory_server_reloaded": false}))]
pub(crate) struct CardCreated {
    success: bool,
    character_name: String,
    memory_server_reloaded: bool,
}

/// A saved card form.
#[derive(Serialize, ToSchema)]
pub(crate) struct CardSaved {
    success: bool,
    character_name: String,
    voice_id_changed: bool,
    session_restarted: bool,
    context_refreshed: bool,
    /// Body keys the system owns, not saved.
    ignored_reserved_fields: Vec<String>,
}

/// A deleted character.
#[derive(Serialize, ToSchema)]
pub(crate) struct CardDeleted {
    success: bool,
    memory_server_reloaded: bool,
}

/// `{name}`: the character to delete (anything but text is missing).
#[derive(Deserialize, ToSchema)]
pub(crate) struct DeleteBody {
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true)]
    name: Option<String>,
}

/// The master profile (`主人`): its name in `档案名`, every other non-empty key
/// stored as sent.
// Every non-empty key is stored as sent, in the order sent: the form is read
// as its object, in order (`form`); `name` states the known key.
#[derive(Default, Deserialize, ToSchema)]
#[serde(from = "Map<String, Value>")]
#[schema(example = json!({"档案名": "Alex", "称呼": "master"}))]
pub(crate) struct MasterForm {
    /// The master's name: not blank, at most 60 characters, without `/` or `\\`.
    #[serde(rename = "档案名")]
    #[schema(value_type = String, max_length = 60, pattern = "^(?=.*\\S)[^/\\\\]*$")]
    name: PhantomData<String>,
    /// Other keys (kept as sent or ignored, as said above).
    #[serde(flatten)]
    form: Map<String, Value>,
}

companiond_core::ordered_body!(CardForm => form, NewCardForm => form, MasterForm => form);

/// `{new_name}`: a character's rename (anything but text is missing).
#[derive(Deserialize, ToSchema)]
#[schema(as = FrontendRenameBody)]
#[schema(example = json!({"new_name": "Mika"}))]
pub(crate) struct RenameBody {
    /// The new name (not blank; the character name rules apply).
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, pattern = "\\S")]
    new_name: Option<String>,
}

/// `{new_name}`: the master's new name (anything but text is missing).
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"new_name": "Alex"}))]
pub(crate) struct MasterRenameBody {
    /// Not blank, at most 60 characters (trimmed), without `/` or `\\`.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, pattern = "^[^/\\\\]*[^/\\\\\\s][^/\\\\]*$")]
    new_name: Option<String>,
}

companiond_core::body_rejected!(Response, body_refused::<SuccessEnvelope> =>
    SwitchBody, DeleteBody, RenameBody, MasterRenameBody, CardForm, NewCardForm, MasterForm);

/// `{success: true}`.
#[derive(Serialize, ToSchema)]
pub(crate) struct Done {
    success: bool,
}

/// `{success: true, message}`.
#[derive(Serialize, ToSchema)]
#[schema(as = FrontendMessage)]
pub(crate) struct Message {
    success: bool,
    message: String,
}

/// [`Message`] with `success: true`.
pub(crate) fn message(message: impl Into<String>) -> Json<Message> {
    Json(Message {
        success: true,
        message: message.into(),
    })
}

/// [`Done`] with `success: true`.
pub(crate) fn done() -> Json<Done> {
    Json(Done { success: true })
}

// ------------------------------------------------------------------ current

pub(crate) async fn current_get(State(st): State<AppState>) -> Response {
    no_store(Json(CurrentCatgirl {
        current_catgirl: st.characters.current(),
    }))
}

pub(crate) async fn current_set(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<SwitchBody>,
) -> Answer<Json<Switched>> {
    let named = body.catgirl_name.unwrap_or(body.name);
    let Some(name) = named.as_deref().map(str::trim).filter(|n| !n.is_empty()) else {
        return Err(bad("catgirl_name is required"));
    };
    let old = st.characters.current();
    let new = st.characters.set_current(name).await?;
    if new != old {
        st.sessions.notify_all(ServerFrame::CatgirlSwitched {
            new_catgirl: new.clone(),
            old_catgirl: old,
        });
    }
    Ok(Json(Switched {
        success: true,
        current: new.clone(),
        current_catgirl: new,
    }))
}

// ------------------------------------------------------------------ create / save / delete

/// The user fields of a form body: not reserved (except `voice_id`/`model_type`,
/// which must be strings: 400 otherwise), not empty, without `档案名` and
/// transport keys. Also the reserved keys ignored.
fn form_fields(body: &Map<String, Value>) -> Answer<(Map<String, Value>, Vec<String>)> {
    let mut out = Map::new();
    let mut ignored = Vec::new();
    for (k, v) in body {
        if matches!(k.as_str(), "档案名" | "_field_order" | "_csrf_token") {
            continue;
        }
        let settable = FORM_SETTABLE.contains(&k.as_str());
        if is_reserved(k) && !settable {
            ignored.push(k.clone());
            continue;
        }
        if is_empty_value(v) {
            continue;
        }
        if settable && !v.is_string() {
            return Err(bad(format!("{k} must be a string")));
        }
        out.insert(k.clone(), v.clone());
    }
    Ok((out, ignored))
}

/// `_field_order`: absent or null, or a list of strings (400 otherwise).
fn field_order(body: &Map<String, Value>) -> Answer<Option<Value>> {
    match body.get("_field_order") {
        None | Some(Value::Null) => Ok(None),
        Some(v) if v.as_array().is_some_and(|a| a.iter().all(Value::is_string)) => {
            Ok(Some(v.clone()))
        }
        Some(_) => Err(bad("_field_order must be a list of strings")),
    }
}

pub(crate) async fn create(
    State(st): State<AppState>,
    BodyOf(NewCardForm { form: body, .. }): BodyOf<NewCardForm>,
) -> Answer<Json<CardCreated>> {
    let Some(raw) = body.get("档案名").and_then(Value::as_str) else {
        return Err(bad("档案名 (the character name) is required"));
    };
    let base = validate_name(raw, NameRules::NEW).map_err(CharacterError::Invalid)?;
    let (mut fields, _) = form_fields(&body)?;
    if let Some(order) = field_order(&body)? {
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
                return Ok(Json(CardCreated {
                    success: true,
                    character_name: name,
                    memory_server_reloaded: false,
                }));
            }
            Err(CharacterError::Exists(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(bad("no free name for this character"))
}

pub(crate) async fn save(
    State(st): State<AppState>,
    CharacterEdit {
        name,
        body: CardForm { form: body, .. },
    }: CharacterEdit<CardForm>,
) -> Answer<Json<CardSaved>> {
    if body
        .get("档案名")
        .is_some_and(|v| !v.is_null() && !v.is_string())
    {
        return Err(bad("档案名 must be a string"));
    }
    let (fields, ignored) = form_fields(&body)?;
    let order = field_order(&body)?;
    let voice_changed = update_profile(&st, &name, move |p| {
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
    .await?;
    Ok(Json(CardSaved {
        success: true,
        character_name: name,
        voice_id_changed: voice_changed,
        session_restarted: false,
        context_refreshed: false,
        ignored_reserved_fields: ignored,
    }))
}

pub(crate) async fn remove(st: &AppState, name: &str) -> Answer<Json<CardDeleted>> {
    existing(st, name)?;
    if st.characters.current() == name {
        return Err(FrontendError::Refused {
            code: "current_character",
            error: "the current character cannot be deleted; switch first".into(),
        });
    }
    // Its memory goes to the trash first (docs/data.md).
    companiond_core::snapshots::delete_to_trash(st, name).await?;
    if let Some(m) = st.sessions.get(name) {
        m.terminate(std::time::Duration::from_secs(3)).await;
    }
    st.sessions.remove(name);
    Ok(Json(CardDeleted {
        success: true,
        memory_server_reloaded: false,
    }))
}

pub(crate) async fn delete_path(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Answer<Json<CardDeleted>> {
    remove(&st, &name).await
}

pub(crate) async fn delete_body(
    State(st): State<AppState>,
    BodyOf(body): BodyOf<DeleteBody>,
) -> Answer<Json<CardDeleted>> {
    match body.name.as_deref() {
        Some(n) => remove(&st, n).await,
        None => Err(bad("name is required")),
    }
}

// ------------------------------------------------------------------ master

pub(crate) async fn master_set(
    State(st): State<AppState>,
    BodyOf(MasterForm { form: body, .. }): BodyOf<MasterForm>,
) -> Answer<Json<Done>> {
    let name = master_name(
        body.get("档案名").and_then(Value::as_str),
        "档案名 (the master's name) is required",
    )
    .map_err(bad)?;
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

/// The master's name, trimmed: non-empty (else 400 `missing`), at most 60
/// characters, without `/` or `\\`.
fn master_name<'a, 'm>(name: Option<&'a str>, missing: &'m str) -> Result<&'a str, &'m str> {
    let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) else {
        return Err(missing);
    };
    if name.chars().count() > 60 || name.contains(['/', '\\']) {
        return Err("the master's name is too long or contains / or \\");
    }
    Ok(name)
}

/// Replace the master profile (`主人`) document: `{success:true}`, or 500 in the envelope.
async fn save_master(st: &AppState, doc: Map<String, Value>) -> Answer<Json<Done>> {
    st.store
        .write(MASTER_DOC, Value::Object(doc))
        .await
        .map_err(master_storage_error)?;
    Ok(done())
}

/// 500 `storage_error`: the master profile could not be saved.
fn master_storage_error(e: companiond_core::store::StoreError) -> FrontendError {
    FrontendError::Storage(format!("cannot save the master profile: {e}"))
}

/// `POST /api/characters/master/{old}/rename` `{new_name}`: the master's name
/// (`档案名` of the master profile); 404 when `old` is not the master's name.
pub(crate) async fn master_rename(
    State(st): State<AppState>,
    UrlPath(old_name): UrlPath<String>,
    BodyOf(body): BodyOf<MasterRenameBody>,
) -> Answer<Json<Done>> {
    let new = master_name(
        body.new_name.as_deref(),
        "new_name (non-empty string) is required",
    )
    .map_err(bad)?;
    // One read-modify-write under the document's lock: a save beside it is
    // never lost.
    let old = old_name.trim().to_string();
    let new = new.to_string();
    let renamed = st
        .store
        .try_update::<Value, (), (), _>(MASTER_DOC, move |cur| {
            let mut doc = match cur {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            if doc.get("档案名").and_then(Value::as_str).unwrap_or("") != old {
                return Err(());
            }
            doc.insert("档案名".into(), json!(new));
            Ok((Value::Object(doc), ()))
        })
        .await;
    match renamed {
        Ok(Ok(())) => Ok(done()),
        Ok(Err(())) => Err(FrontendError::NotFound(format!(
            "the master is not named {old_name:?}"
        ))),
        Err(e @ companiond_core::store::StoreError::Corrupt(_)) => Err(FrontendError::Storage(
            format!("cannot read the master profile: {e}"),
        )),
        Err(e) => Err(master_storage_error(e)),
    }
}

/// `POST /api/characters/catgirl/{old}/rename` `{new_name}`: the rename
/// transaction of `/api/characters/profile/{old_name}/rename` (crates/memory).
pub(crate) async fn rename(
    State(st): State<AppState>,
    UrlPath(old): UrlPath<String>,
    BodyOf(body): BodyOf<RenameBody>,
) -> Answer<Json<companiond_core::rename::Renamed>> {
    let Some(new) = body.new_name.filter(|s| !s.trim().is_empty()) else {
        return Err(bad("new_name (non-empty string) is required"));
    };
    Ok(Json(
        companiond_core::rename::rename_character(&st, &old, &new).await?,
    ))
}

#[cfg(test)]
mod body_tests {
    use super::*;
    use companiond_core::envelope::parse_body;

    #[test]
    fn the_switch_reads_name_only_without_catgirl_name() {
        let named = |s: &str| {
            parse_body::<SwitchBody>(s.as_bytes())
                .ok()
                .and_then(|b| b.catgirl_name.unwrap_or(b.name))
        };
        assert_eq!(
            named(r#"{"catgirl_name": "A", "name": "B"}"#).as_deref(),
            Some("A")
        );
        assert_eq!(named(r#"{"name": "B"}"#).as_deref(), Some("B"));
        assert_eq!(named(r#"{"catgirl_name": null, "name": "B"}"#), None);
        assert_eq!(named(r#"{"catgirl_name": 5, "name": "B"}"#), None);
        assert_eq!(named(r#"{"name": 5}"#), None);
    }
}
