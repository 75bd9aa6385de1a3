//! The character card routes: import a card file as a new character, export
//! any character as a card (PNG, JSON, CHARX), its card image, and the choice
//! of greeting. The card formats are `crate::cards`; docs/characters.md.

use axum::extract::{DefaultBodyLimit, Path as UrlPath, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::{IntoParams, ToSchema};

use super::api::{Api, DocumentedError, ErrorDoc, Part};
use super::envelope::{ok_json, JsonBody, QueryOf, SuccessError};
use super::multipart::{multipart, with_drain_cap, DrainCap};
use crate::cards::{self, CardError, ASSETS_DIR, ASSETS_KEY, IMAGES_DIR};
use crate::characters::CharacterError;
use crate::paths::safe_join;
use crate::staging::Cleanup;
use crate::state::AppState;
use crate::task::TaskFailed;

/// Why a card route failed.
#[derive(Debug)]
pub enum CardRouteError {
    /// The file is not a card we can read (400, naming the problem).
    Card(CardError),
    /// The request is malformed (400).
    Bad(String),
    /// No character of that name (404).
    NotFound(String),
    /// The character has no card image (404).
    NoImage(String),
    /// A registry refusal.
    Character(CharacterError),
    /// Writing the card's files failed (500).
    Storage(String),
}

impl From<TaskFailed> for CardRouteError {
    fn from(e: TaskFailed) -> Self {
        CardRouteError::Storage(e.0)
    }
}

impl IntoResponse for CardRouteError {
    fn into_response(self) -> Response {
        match self {
            CardRouteError::Card(e) => {
                let too_large = e == CardError::TooLarge;
                let r = SuccessError::new(e.to_string())
                    .code(e.code())
                    .status(StatusCode::BAD_REQUEST);
                if too_large {
                    // The client still sending reads the refusal, not a reset.
                    let cap = DrainCap {
                        bytes: 64 << 20,
                        time: std::time::Duration::from_secs(10),
                    };
                    with_drain_cap(r, cap)
                } else {
                    r
                }
            }
            CardRouteError::Bad(m) => SuccessError::new(m)
                .code("bad_request")
                .status(StatusCode::BAD_REQUEST),
            CardRouteError::NotFound(n) => {
                SuccessError::new(format!("character {n:?} does not exist"))
                    .code("character_not_found")
                    .status(StatusCode::NOT_FOUND)
            }
            CardRouteError::NoImage(n) => {
                SuccessError::new(format!("character {n:?} has no card image"))
                    .code("no_card_image")
                    .status(StatusCode::NOT_FOUND)
            }
            CardRouteError::Character(e) => e.into_response(),
            CardRouteError::Storage(m) => crate::disk::storage_error(m),
        }
    }
}

impl DocumentedError for CardRouteError {
    fn answers() -> Vec<ErrorDoc> {
        let png = |e| CardRouteError::Card(CardError::Png(e));
        vec![
            ErrorDoc::observed("no file part", CardRouteError::Card(CardError::NoFile)),
            ErrorDoc::observed(
                "larger than 20 MiB",
                CardRouteError::Card(CardError::TooLarge),
            ),
            ErrorDoc::observed(
                "not a PNG, CHARX or JSON",
                CardRouteError::Card(CardError::UnknownFormat),
            ),
            ErrorDoc::observed("a PNG that is not a PNG", png(cards::png::PngError::NotPng)),
            ErrorDoc::observed(
                "a PNG without a card chunk",
                CardRouteError::Card(CardError::NoCardChunk),
            ),
            ErrorDoc::observed(
                "a chunk that is not base64",
                CardRouteError::Card(CardError::BadBase64("chara")),
            ),
            ErrorDoc::observed(
                "invalid JSON",
                CardRouteError::Card(CardError::BadJson("expected value".into())),
            ),
            ErrorDoc::observed(
                "JSON that is not a card",
                CardRouteError::Card(CardError::NotACard("the card has no name".into())),
            ),
            ErrorDoc::observed(
                "a CHARX entry path leaving the archive",
                CardRouteError::Card(CardError::UnsafePath("../x".into())),
            ),
            ErrorDoc::observed(
                "a CHARX with too many entries",
                CardRouteError::Card(CardError::TooManyEntries(300)),
            ),
            ErrorDoc::observed(
                "a CHARX without card.json",
                CardRouteError::Card(CardError::NoCardJson),
            ),
            ErrorDoc::observed(
                "a bad export format or greeting",
                CardRouteError::Bad("format must be png, json or charx".into()),
            ),
            ErrorDoc::observed(
                "no character of that name",
                CardRouteError::NotFound("Nobody".into()),
            ),
            ErrorDoc::observed("no card image", CardRouteError::NoImage("Mika".into())),
            ErrorDoc::observed(
                "the card's files could not be written",
                CardRouteError::Storage("disk full".into()),
            ),
        ]
    }
}

type Res<T> = Result<T, CardRouteError>;

/// `{success, name, ...}`: the character made from the card.
#[derive(Serialize, ToSchema)]
struct Imported {
    success: bool,
    /// The new character's name (the card's name, made valid and free).
    name: String,
    /// The name the card gave.
    card_name: String,
    /// `png`, `json` or `charx`.
    format: String,
    /// The card's spec: `chara_card_v3`, `chara_card_v2` or `v1`.
    spec: String,
    /// Whether the card brought an image (now the character's card image).
    image: bool,
    /// CHARX files kept as the card's assets (the main icon included).
    assets: usize,
}

/// `?format=`: which card file.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ExportQuery {
    /// `png` (default: a V3 PNG that also carries the V2 chunk), `json` (V3) or `charx` (any case).
    #[param(pattern = "^([pP][nN][gG]|[jJ][sS][oO][nN]|[cC][hH][aA][rR][xX])$")]
    format: Option<String>,
}

crate::query_rejected!(CardRouteError, CardRouteError::Bad => ExportQuery);

/// `{index}`: the greeting a new conversation opens with (0 = `first_mes`,
/// n = the n-th of `alternate_greetings`).
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"index": 1}))]
struct GreetingBody {
    index: u64,
}

/// `{success, index, greeting}`.
#[derive(Serialize, ToSchema)]
struct GreetingSet {
    success: bool,
    index: u64,
    greeting: String,
}

/// The first file part, read whole (at most the card limit).
async fn read_upload(req: Request) -> Res<(Vec<u8>, String)> {
    let mut mp = multipart(req).await.map_err(CardRouteError::Bad)?;
    while let Some(mut field) = mp
        .next_field()
        .await
        .map_err(|e| CardRouteError::Bad(e.body_text()))?
    {
        // The part `file`, else the first part that is a file.
        if field.name() != Some("file") && field.file_name().is_none_or(str::is_empty) {
            continue;
        }
        let file_name = field.file_name().unwrap_or("").to_string();
        let mut bytes = Vec::new();
        while let Some(chunk) = field
            .chunk()
            .await
            .map_err(|e| CardRouteError::Bad(e.body_text()))?
        {
            if bytes.len() + chunk.len() > cards::MAX_FILE_BYTES {
                return Err(CardRouteError::Card(CardError::TooLarge));
            }
            bytes.extend_from_slice(&chunk);
        }
        return Ok((bytes, file_name));
    }
    Err(CardRouteError::Card(CardError::NoFile))
}

async fn import(State(st): State<AppState>, req: Request) -> Res<Response> {
    let (bytes, file_name) = read_upload(req).await?;
    let read = crate::task::blocking(move || {
        cards::read(&bytes, &file_name).map_err(CardRouteError::Card)
    })
    .await?;
    let root = st.store.root().to_path_buf();
    // The files first (under generated names), the character last: a failure
    // removes the files, and a character never points at a missing file.
    let image = read.image;
    let assets = read.assets;
    let asset_count = assets.len();
    let (image_guard, image_name, assets_guard, assets_id) =
        crate::task::blocking(move || write_files(&root, image, assets)).await?;
    let card = read.card;
    let card_name = cards::data(&card)
        .and_then(|d| d.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string();
    let (cn, c, img, aid) = (
        card_name.clone(),
        card.clone(),
        image_name.clone(),
        assets_id.clone(),
    );
    let name = st
        .characters
        .mutate(move |doc| {
            let name = cards::new_name(&cn, |n| doc.characters.contains_key(n));
            let profile = cards::profile_for(&c, &name, img.as_deref(), aid.as_deref());
            doc.characters.insert(name.clone(), Value::Object(profile));
            Ok(name)
        })
        .await
        .map_err(CardRouteError::Character)?;
    if let Some(mut g) = image_guard {
        g.disarm();
    }
    if let Some(mut g) = assets_guard {
        g.disarm();
    }
    st.sessions.ensure(&name);
    Ok(ok_json(Imported {
        success: true,
        name,
        card_name,
        format: read.format.to_string(),
        spec: read.source_spec,
        image: image_name.is_some(),
        assets: if assets_id.is_some() { asset_count } else { 0 },
    }))
}

type Written = (
    Option<Cleanup>,
    Option<String>,
    Option<Cleanup>,
    Option<String>,
);

/// Write the card image and the CHARX assets under generated names.
fn write_files(
    root: &std::path::Path,
    image: Option<(Vec<u8>, &'static str)>,
    assets: Vec<(Vec<String>, Vec<u8>)>,
) -> Res<Written> {
    let io = |what: &str, e: &dyn std::fmt::Display| {
        CardRouteError::Storage(format!("cannot write the card {what}: {e}"))
    };
    let (mut image_guard, mut image_name) = (None, None);
    if let Some((bytes, ext)) = image {
        let dir = root.join(IMAGES_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| io("image", &e))?;
        let file = format!("{}.{ext}", uuid::Uuid::new_v4().simple());
        let path = dir.join(&file);
        crate::store::atomic_write(&path, &bytes).map_err(|e| io("image", &e))?;
        image_guard = Some(Cleanup::new(path));
        image_name = Some(file);
    }
    let (mut assets_guard, mut assets_id) = (None, None);
    if !assets.is_empty() {
        let base = root.join(ASSETS_DIR);
        std::fs::create_dir_all(&base).map_err(|e| io("assets", &e))?;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let part = base.join(format!(".{id}.part"));
        let part_guard = Cleanup::new(part.clone());
        for (segs, bytes) in &assets {
            let path = safe_join(&part, &segs.join("/")).map_err(|e| {
                CardRouteError::Card(CardError::UnsafePath(format!("{}: {e}", segs.join("/"))))
            })?;
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| io("assets", &e))?;
            }
            crate::store::atomic_write(&path, bytes).map_err(|e| io("assets", &e))?;
        }
        let done = base.join(&id);
        std::fs::rename(&part, &done).map_err(|e| io("assets", &e))?;
        drop(part_guard);
        assets_guard = Some(Cleanup::new(done));
        assets_id = Some(id);
    }
    Ok((image_guard, image_name, assets_guard, assets_id))
}

/// Every file of a stored CHARX asset folder, by its relative path.
fn stored_assets(root: &std::path::Path, profile: &Value) -> Vec<(String, Vec<u8>)> {
    let Some(id) = cards::reserved(profile, ASSETS_KEY).and_then(Value::as_str) else {
        return Vec::new();
    };
    let Ok(id) = crate::paths::safe_name(id) else {
        return Vec::new();
    };
    let Ok(dir) = safe_join(&root.join(ASSETS_DIR), id) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut stack = vec![(dir.clone(), String::new())];
    while let Some((d, prefix)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push((e.path(), rel)),
                Ok(t) if t.is_file() => {
                    if let Ok(b) = std::fs::read(e.path()) {
                        out.push((rel, b));
                    }
                }
                _ => {}
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn attachment(bytes: Vec<u8>, content_type: &'static str, file: &str) -> Response {
    let ascii: String = file
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let encoded: String = file
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    (
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}"),
            ),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
        bytes,
    )
        .into_response()
}

async fn export(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
    QueryOf(q): QueryOf<ExportQuery>,
) -> Res<Response> {
    let format = q
        .format
        .unwrap_or_else(|| "png".into())
        .to_ascii_lowercase();
    if !matches!(format.as_str(), "png" | "json" | "charx") {
        return Err(CardRouteError::Bad(format!(
            "format must be png, json or charx (not {format:?})"
        )));
    }
    let profile = st
        .characters
        .profile(&name)
        .ok_or_else(|| CardRouteError::NotFound(name.clone()))?;
    let root = st.store.root().to_path_buf();
    let n = name.clone();
    let (bytes, ct, ext) = crate::task::blocking(move || {
        let card = cards::card_of(&n, &profile);
        let image = cards::image_of(&root, &profile);
        Ok::<_, CardRouteError>(match format.as_str() {
            "json" => (
                serde_json::to_vec_pretty(&Value::Object(card)).unwrap_or_default(),
                "application/json",
                "json",
            ),
            "charx" => {
                let img = image
                    .as_deref()
                    .and_then(|b| cards::image_ext(b).map(|e| (b, e)));
                let bytes = cards::charx::write(&card, &stored_assets(&root, &profile), img)
                    .map_err(CardRouteError::Storage)?;
                (bytes, "application/zip", "charx")
            }
            _ => {
                let png = image.filter(|b| b.starts_with(cards::png::SIGNATURE));
                (cards::export_png(&card, png.as_deref()), "image/png", "png")
            }
        })
    })
    .await?;
    Ok(attachment(bytes, ct, &format!("{name}.{ext}")))
}

async fn image(State(st): State<AppState>, UrlPath(name): UrlPath<String>) -> Res<Response> {
    let profile = st
        .characters
        .profile(&name)
        .ok_or_else(|| CardRouteError::NotFound(name.clone()))?;
    let root = st.store.root().to_path_buf();
    let found =
        crate::task::blocking(move || Ok::<_, CardRouteError>(cards::image_of(&root, &profile)))
            .await?;
    let Some(bytes) = found else {
        return Err(CardRouteError::NoImage(name));
    };
    let ct = cards::image_type(&bytes);
    Ok(([(header::CONTENT_TYPE, ct)], bytes).into_response())
}

async fn set_greeting(
    State(st): State<AppState>,
    UrlPath(name): UrlPath<String>,
    JsonBody(body, ..): JsonBody<GreetingBody>,
) -> Res<Response> {
    let profile = st
        .characters
        .profile(&name)
        .ok_or_else(|| CardRouteError::NotFound(name.clone()))?;
    let count = cards::reserved(&profile, cards::CARD_KEY)
        .and_then(|c| c.get("data"))
        .and_then(|d| d.get("alternate_greetings"))
        .and_then(Value::as_array)
        .map(Vec::len)
        .unwrap_or(0) as u64;
    if body.index > count {
        return Err(CardRouteError::Bad(format!(
            "index must be 0 (first_mes) to {count} (the alternate greetings)"
        )));
    }
    let (n, index) = (name.clone(), body.index);
    st.characters
        .mutate(move |doc| {
            let p = doc
                .characters
                .get_mut(&n)
                .ok_or_else(|| CharacterError::NotFound(n.clone()))?;
            if !p.is_object() {
                *p = json!({});
            }
            if let Some(m) = p.as_object_mut() {
                let r = m.entry("_reserved").or_insert_with(|| json!({}));
                if !r.is_object() {
                    *r = json!({});
                }
                if let Some(r) = r.as_object_mut() {
                    r.insert("card_greeting".into(), json!(index));
                }
            }
            Ok(())
        })
        .await
        .map_err(CardRouteError::Character)?;
    let greeting = crate::prompt::greeting(&st, &name)
        .await
        .unwrap_or_default();
    Ok(ok_json(GreetingSet {
        success: true,
        index,
        greeting,
    }))
}

/// The card routes, added to the characters routes (`api`).
pub fn routes(api: Api) -> Api {
    api.route(
        Method::POST,
        "/api/characters/card/import",
        "import a character card (PNG/APNG, JSON V1/V2/V3, CHARX) as a new character",
        routing::post(import).layer(DefaultBodyLimit::disable()),
    )
    .id("import_card")
    .multipart(&[Part::file("file")])
    .ok::<Imported>()
    .fails::<CardRouteError>()
    .get(
        "/api/characters/card/{name}/export",
        "export a character as a card (png, json or charx)",
        export,
    )
    .id("export_card")
    .query::<ExportQuery>()
    .ok_file("image/png, application/json, application/zip")
    .fails::<CardRouteError>()
    .get(
        "/api/characters/card/{name}/image",
        "a character's card image",
        image,
    )
    .id("card_image")
    .ok_file("image/*")
    .fails::<CardRouteError>()
    .post(
        "/api/characters/card/{name}/greeting",
        "choose the greeting of a new conversation",
        set_greeting,
    )
    .id("card_greeting")
    .json_body::<GreetingBody>()
    .ok::<GreetingSet>()
    .fails::<CardRouteError>()
}
