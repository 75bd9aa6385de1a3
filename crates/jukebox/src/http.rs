//! Thin HTTP handlers over the jukebox service: form and multipart parsing,
//! streaming bodies to the domain, streaming archives back.

use std::fs::File;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Multipart, Path as UrlPath, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use companiond_core::envelope::read_json_body;
use companiond_core::Ext;
use indexmap::IndexMap;
use serde_json::{Map, Value};
use tokio_util::io::ReaderStream;
use tower::ServiceExt;
use tower_http::services::ServeFile;

use crate::archive::{ExportSelection, Packer};
use crate::error::JukeboxError;
use companiond_core::staging::{StageError, Staging};
use companiond_core::text::human_size;

use crate::library::{bool_option, Jukebox, Kind};
use crate::md5sum::Md5;
use crate::model::{extension, MAX_OFFSET};
use crate::upload::{check_type, parse_metadata, upload_basename, Refused, Upload, Uploaded};

type Res = Result<Response, JukeboxError>;

/// Largest form body (url-encoded or multipart text fields).
const MAX_FORM_BODY: usize = 1 << 20;
/// Largest `metadata` field of an upload.
const MAX_METADATA: usize = 4 << 20;
/// Most text fields in one form.
const MAX_FORM_FIELDS: usize = 256;

fn multipart_error(e: impl std::fmt::Display) -> JukeboxError {
    JukeboxError::bad(format!("invalid multipart body: {e}"))
}

fn content_type(req: &Request) -> String {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase()
}

async fn multipart(req: Request) -> Result<Multipart, JukeboxError> {
    companiond_core::multipart::multipart(req)
        .await
        .map_err(multipart_error)
}

/// Read a whole (small) text field.
async fn field_text(
    field: &mut axum::extract::multipart::Field<'_>,
    max: usize,
) -> Result<String, JukeboxError> {
    let mut buf: Vec<u8> = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        if buf.len() + chunk.len() > max {
            return Err(JukeboxError::TooLarge(format!(
                "a form field is larger than {}",
                human_size(max as u64)
            )));
        }
        buf.extend_from_slice(&chunk);
    }
    String::from_utf8(buf).map_err(|_| JukeboxError::bad("a form field is not UTF-8 text"))
}

/// Form fields from an `application/x-www-form-urlencoded` or `multipart/form-data`
/// body, where every value is text, or from a JSON object body, whose values
/// must have the documented JSON types (`json`).
pub struct FormFields {
    fields: IndexMap<String, Value>,
    json: bool,
}

impl<S: Send + Sync> FromRequest<S> for FormFields {
    type Rejection = JukeboxError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let ct = content_type(&req);
        let mut out = IndexMap::new();
        let json = ct.starts_with("application/json");
        if ct.starts_with("multipart/form-data") {
            let mut mp = multipart(req).await?;
            let mut total = 0usize;
            while let Some(mut field) = mp.next_field().await.map_err(multipart_error)? {
                let name = field.name().unwrap_or("").to_string();
                let text = field_text(&mut field, MAX_FORM_BODY).await?;
                total += text.len();
                if total > MAX_FORM_BODY || out.len() >= MAX_FORM_FIELDS {
                    return Err(JukeboxError::TooLarge("the form is too large".into()));
                }
                out.insert(name, Value::String(text));
            }
        } else if json {
            let v: Value = read_json_body(req)
                .await
                .map_err(|(status, msg)| match status {
                    StatusCode::PAYLOAD_TOO_LARGE => JukeboxError::TooLarge(msg),
                    _ => JukeboxError::bad(msg),
                })?;
            let Value::Object(m) = v else {
                return Err(JukeboxError::bad("the body must be a JSON object"));
            };
            out.extend(m);
        } else {
            let bytes = axum::body::to_bytes(req.into_body(), MAX_FORM_BODY)
                .await
                .map_err(|_| JukeboxError::TooLarge("the form is too large".into()))?;
            // The pairs in order, duplicates kept (the last one wins below).
            let pairs = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&bytes)
                .map_err(|e| JukeboxError::bad(format!("invalid form body: {e}")))?;
            for (k, v) in pairs {
                if out.len() >= MAX_FORM_FIELDS {
                    return Err(JukeboxError::TooLarge(
                        "the form has too many fields".into(),
                    ));
                }
                out.insert(k, Value::String(v));
            }
        }
        Ok(FormFields { fields: out, json })
    }
}

impl FormFields {
    /// A field as text (`None` when absent or null); in a JSON body it must be a string.
    fn text(&self, key: &str) -> Result<Option<String>, JukeboxError> {
        match self.fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) if self.json => Err(JukeboxError::bad(format!("{key} must be a string"))),
            Some(other) => Ok(Some(other.to_string())),
        }
    }

    pub fn required(&self, key: &str) -> Result<String, JukeboxError> {
        self.text(key)?
            .ok_or_else(|| JukeboxError::bad(format!("field {key} is required")))
    }

    /// A boolean: JSON `true`/`false`, or in a form its text ([`bool_option`]).
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, JukeboxError> {
        match self.fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if !self.json => bool_option(key, s).map(Some),
            Some(_) => Err(JukeboxError::bad(format!("{key} must be a boolean"))),
        }
    }

    /// An integer: a JSON integer, or in a form its decimal text (blank: absent).
    pub fn integer(&self, key: &str) -> Result<Option<i64>, JukeboxError> {
        let bad = || JukeboxError::bad(format!("{key} must be an integer"));
        match self.fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            // `5.0` is the integer 5, as JSON Schema counts it.
            Some(Value::Number(n)) => n
                .as_i64()
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                        .map(|f| f as i64)
                })
                .map(Some)
                .ok_or_else(bad),
            Some(Value::String(s)) if !self.json && s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) if !self.json => {
                s.trim().parse::<i64>().map(Some).map_err(|_| bad())
            }
            Some(_) => Err(bad()),
        }
    }

    /// An optional list of ids: a JSON array of strings, or in a form that
    /// array as text.
    pub fn id_list(&self, key: &str) -> Result<Option<Vec<String>>, JukeboxError> {
        let bad = || JukeboxError::bad(format!("{key} must be a JSON array of strings"));
        let v = match self.fields.get(key) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(s)) if !self.json && s.trim().is_empty() => return Ok(None),
            Some(Value::String(s)) if !self.json => {
                serde_json::from_str::<Value>(s).map_err(|_| bad())?
            }
            Some(v) => v.clone(),
        };
        match v {
            Value::Null => Ok(None),
            Value::Array(items) => items
                .into_iter()
                .map(|i| match i {
                    Value::String(s) => Ok(s),
                    _ => Err(bad()),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            _ => Err(bad()),
        }
    }
}

fn json_response(v: impl serde::Serialize) -> Response {
    Json(v).into_response()
}

// ------------------------------------------------------------------ config

pub async fn get_config(Ext(j): Ext<Jukebox>) -> Res {
    let body = j.config_body().await?;
    let len = body.len;
    let chunks = body.chunks;
    // The cached parts are sent as they are (reference-counted, never copied).
    let stream = futures::stream::iter(
        (0..chunks.len()).map(move |i| Ok::<Bytes, std::io::Error>(chunks[i].clone())),
    );
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    Ok(resp)
}

pub async fn get_summary(Ext(j): Ext<Jukebox>) -> Res {
    let summary = j.summary().await?;
    Ok(Json(&summary).into_response())
}

// ------------------------------------------------------------------ uploads

/// A staging failure as the family's error; `label` names what was uploaded.
fn stage_error(label: &str, e: StageError) -> JukeboxError {
    match e {
        StageError::TooLarge { limit } => JukeboxError::TooLarge(format!(
            "{label} is too large: more than {}",
            human_size(limit)
        )),
        StageError::Body(m) => multipart_error(m),
        StageError::Io(e) => JukeboxError::io("cannot write the uploaded file", e),
    }
}

async fn upload(j: &Arc<Jukebox>, kind: Kind, req: Request) -> Result<Response, JukeboxError> {
    let mut mp = multipart(req).await?;
    let mut uploads: Vec<Upload> = Vec::new();
    let mut metadata: Option<String> = None;
    let mut total = 0u64;
    while let Some(mut field) = mp.next_field().await.map_err(multipart_error)? {
        let name = field.name().unwrap_or("").to_string();
        match name.as_str() {
            "files" | "file" => {
                let raw_name = field.file_name().unwrap_or("").to_string();
                let checked =
                    upload_basename(&raw_name).and_then(|n| check_type(kind, &n).map(|_| n));
                let file_name = match checked {
                    Ok(n) => n,
                    Err(e) => {
                        // Not stored: the rest of this part is skipped by the parser.
                        uploads.push(Upload {
                            file_name: raw_name,
                            outcome: Err(Refused::Invalid(e)),
                        });
                        continue;
                    }
                };
                let label = format!("{} {file_name}", kind.word());
                let staging =
                    Staging::in_dir_tapped(&j.dir(kind), "upload", j.limits.file, true, Md5::new())
                        .map_err(|e| JukeboxError::io("cannot create a temporary file", e))?;
                let staged = staging
                    .drain(&mut field)
                    .await
                    .map_err(|e| stage_error(&label, e))?;
                total += staged.size;
                if total > j.limits.archive {
                    return Err(JukeboxError::TooLarge(format!(
                        "the files of one request add up to more than {}",
                        human_size(j.limits.archive)
                    )));
                }
                uploads.push(Upload {
                    file_name,
                    outcome: Ok(staged),
                });
            }
            "metadata" => metadata = Some(field_text(&mut field, MAX_METADATA).await?),
            _ => {}
        }
    }
    if uploads.is_empty() {
        return Err(JukeboxError::bad(
            "no files uploaded (multipart field files)",
        ));
    }
    let metas = parse_metadata(metadata.as_deref())?;
    let single = uploads.len() == 1;
    let mut results = j.commit_uploads(kind, uploads, metas).await?;
    match results.pop() {
        Some(Uploaded::Refused(refused)) if single => Err(JukeboxError::Refused(refused)),
        Some(one) if single => Ok(Json(one).into_response()),
        last => {
            results.extend(last);
            Ok(Json(serde_json::json!({"success": true, "results": results})).into_response())
        }
    }
}

/// POST /api/jukebox/songs and /api/jukebox/actions.
pub async fn upload_files(Ext(j): Ext<Jukebox>, kind: Kind, req: Request) -> Res {
    upload(&j, kind, req).await
}

/// Songs or actions, from the route's path: one handler serves both resources.
impl<S: Send + Sync> FromRequestParts<S> for Kind {
    type Rejection = JukeboxError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Kind, JukeboxError> {
        let path = parts.uri.path();
        if path.starts_with("/api/jukebox/songs") {
            Ok(Kind::Song)
        } else if path.starts_with("/api/jukebox/actions") {
            Ok(Kind::Action)
        } else {
            Err(JukeboxError::not_found("no such jukebox resource"))
        }
    }
}

// ------------------------------------------------------------------ deletes

async fn batch_ids(req: Request, key: &str) -> Result<Vec<String>, JukeboxError> {
    let body: Map<String, Value> =
        read_json_body(req)
            .await
            .map_err(|(status, msg)| match status {
                StatusCode::PAYLOAD_TOO_LARGE => JukeboxError::TooLarge(msg),
                _ => JukeboxError::Invalid(msg),
            })?;
    let wrong = || JukeboxError::Invalid(format!("{key} must be a list of strings"));
    match body.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(wrong))
            .collect(),
        Some(_) => Err(wrong()),
    }
}

/// POST /api/jukebox/songs/batch-delete and /api/jukebox/actions/batch-delete.
pub async fn batch_delete(Ext(j): Ext<Jukebox>, kind: Kind, req: Request) -> Res {
    let ids = batch_ids(req, kind.ids_key()).await?;
    Ok(json_response(j.batch_delete(kind, ids).await?))
}

/// DELETE /api/jukebox/songs/{song_id} and /api/jukebox/actions/{action_id}.
pub async fn delete(Ext(j): Ext<Jukebox>, kind: Kind, UrlPath(id): UrlPath<String>) -> Res {
    Ok(json_response(j.delete(kind, id).await?))
}

// ------------------------------------------------------------------ settings

fn visible_field(form: &FormFields) -> Result<bool, JukeboxError> {
    form.boolean("visible")?
        .ok_or_else(|| JukeboxError::bad("field visible is required"))
}

/// Most characters in a name or artist.
const MAX_LABEL_CHARS: usize = 256;

fn label(form: &FormFields, key: &str, allow_empty: bool) -> Result<Option<String>, JukeboxError> {
    let Some(v) = form.text(key)? else {
        return Ok(None);
    };
    let bad_chars = v.chars().any(char::is_control);
    let v = v.trim().to_string();
    if v.is_empty() && !allow_empty {
        return Err(JukeboxError::bad(format!("{key} must not be empty")));
    }
    if v.chars().count() > MAX_LABEL_CHARS || bad_chars {
        return Err(JukeboxError::bad(format!(
            "{key} must be at most {MAX_LABEL_CHARS} characters without control characters"
        )));
    }
    Ok(Some(v))
}

/// PUT /api/jukebox/songs/{song_id}/visibility and /api/jukebox/actions/{action_id}/visibility.
pub async fn visibility(
    Ext(j): Ext<Jukebox>,
    kind: Kind,
    UrlPath(id): UrlPath<String>,
    form: FormFields,
) -> Res {
    let visible = visible_field(&form)?;
    Ok(json_response(j.set_visibility(kind, id, visible).await?))
}

/// PUT /api/jukebox/songs/{song_id}/metadata (name, artist) and
/// /api/jukebox/actions/{action_id}/metadata (name, required).
pub async fn metadata(
    Ext(j): Ext<Jukebox>,
    kind: Kind,
    UrlPath(id): UrlPath<String>,
    form: FormFields,
) -> Res {
    let name = label(&form, "name", false)?;
    let artist = match kind {
        Kind::Song => label(&form, "artist", true)?,
        Kind::Action if name.is_none() => return Err(JukeboxError::bad("field name is required")),
        Kind::Action => None,
    };
    Ok(json_response(j.set_metadata(kind, id, name, artist).await?))
}

pub async fn default_action(
    Ext(j): Ext<Jukebox>,
    UrlPath(id): UrlPath<String>,
    form: FormFields,
) -> Res {
    let action_id = form.required("action_id")?;
    Ok(json_response(j.set_default_action(id, action_id).await?))
}

pub async fn bind(Ext(j): Ext<Jukebox>, form: FormFields) -> Res {
    let song_id = form.required("songId")?;
    let action_id = form.required("actionId")?;
    let offset = form.integer("offset")?.unwrap_or(0);
    if !(-MAX_OFFSET..=MAX_OFFSET).contains(&offset) {
        return Err(JukeboxError::bad(format!(
            "offset must be an integer between -{MAX_OFFSET} and {MAX_OFFSET}"
        )));
    }
    Ok(json_response(j.bind(song_id, action_id, offset).await?))
}

pub async fn unbind(Ext(j): Ext<Jukebox>, form: FormFields) -> Res {
    let song_id = form.required("songId")?;
    let action_id = form.required("actionId")?;
    Ok(json_response(j.unbind(song_id, action_id).await?))
}

// ------------------------------------------------------------------ archives

fn zip_response(file: File, len: u64, name: &str) -> Response {
    let stream = ReaderStream::with_capacity(tokio::fs::File::from_std(file), 256 * 1024);
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/zip"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename={name}")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

pub async fn export(Ext(j): Ext<Jukebox>, form: FormFields) -> Res {
    let sel = ExportSelection {
        song_ids: form.id_list("songIds")?,
        action_ids: form.id_list("actionIds")?,
        include_hidden: form.boolean("includeHidden")?.unwrap_or(true),
    };
    let (file, len) = j.export(sel).await?;
    Ok(zip_response(file, len, "jukebox_export.zip"))
}

pub async fn import(Ext(j): Ext<Jukebox>, req: Request) -> Res {
    let mut mp = multipart(req).await?;
    let mut staged = None;
    while let Some(mut field) = mp.next_field().await.map_err(multipart_error)? {
        let name = field.name().unwrap_or("").to_string();
        if staged.is_some() || !(name == "file" || name == "files") {
            continue;
        }
        let staging = Staging::in_dir(&j.tmp_dir(), "import", j.limits.archive, true)
            .map_err(|e| JukeboxError::io("cannot create a temporary file", e))?;
        let archive = staging
            .drain(&mut field)
            .await
            .map_err(|e| stage_error("the import archive", e))?;
        staged = Some(archive);
    }
    let staged =
        staged.ok_or_else(|| JukeboxError::bad("no archive uploaded (multipart field file)"))?;
    Ok(json_response(j.import(staged).await?))
}

pub async fn pack_folder(Ext(j): Ext<Jukebox>, req: Request) -> Res {
    let mut mp = multipart(req).await?;
    let mut packer = Packer::start(&j.tmp_dir(), j.limits)?;
    let result: Result<(), JukeboxError> = async {
        while let Some(mut field) = mp.next_field().await.map_err(multipart_error)? {
            let name = field.name().unwrap_or("").to_string();
            if !(name == "files" || name == "file") {
                continue;
            }
            let path = field.file_name().unwrap_or("").to_string();
            packer.begin(&path).await?;
            while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
                packer.push(chunk).await?;
            }
        }
        if packer.is_empty() {
            return Err(JukeboxError::bad(
                "no files uploaded (multipart field files)",
            ));
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        packer.discard().await;
        return Err(e);
    }
    let (file, len) = packer.finish().await?;
    Ok(zip_response(file, len, "packed.zip"))
}

// ------------------------------------------------------------------ files

fn media_type(ext: &str) -> Option<&'static str> {
    Some(match ext {
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "ogg" => "audio/ogg",
        "flac" => "audio/flac",
        "vmd" | "bvh" | "fbx" | "vrma" => "application/octet-stream",
        _ => return None,
    })
}

pub async fn get_file(Ext(j): Ext<Jukebox>, UrlPath(rel): UrlPath<String>, req: Request) -> Res {
    let path = j.resolve_file(&rel)?;
    let ext = extension(&path.to_string_lossy());
    let mut resp = match ServeFile::new(&path).oneshot(req).await {
        Ok(r) => r.into_response(),
        Err(_) => return Err(JukeboxError::not_found("file not found")),
    };
    if resp.status() == StatusCode::NOT_FOUND {
        return Err(JukeboxError::not_found("file not found"));
    }
    if let Some(mt) = media_type(&ext) {
        if resp.headers().contains_key(header::CONTENT_TYPE) {
            resp.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(mt));
        }
    }
    Ok(resp)
}

#[cfg(test)]
mod form_tests {
    use super::*;

    #[tokio::test]
    async fn urlencoded_fields_keep_order_and_take_the_last_duplicate() {
        let req = Request::builder()
            .header("content-type", "application/x-www-form-urlencoded")
            .body(axum::body::Body::from("b=1&a=x+y%2B&b=2&c=%E7%8C%AB"))
            .expect("a request");
        let form = match FormFields::from_request(req, &()).await {
            Ok(f) => f,
            Err(_) => panic!("the form is read"),
        };
        let keys: Vec<&str> = form.fields.keys().map(String::as_str).collect();
        assert_eq!(keys, ["b", "a", "c"]);
        assert_eq!(form.required("a").ok().as_deref(), Some("x y+"));
        assert_eq!(form.required("b").ok().as_deref(), Some("2"));
        assert_eq!(form.required("c").ok().as_deref(), Some("猫"));
    }
}
