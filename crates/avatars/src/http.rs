//! Thin HTTP handlers: multipart fields become byte streams, query and JSON
//! bodies become plain values, and every answer of the domain modules is put
//! into the `{success, ...}` / `{success:false, error}` envelopes.

use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Multipart, RawQuery, Request};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{json, Map, Value};

use companiond_core::envelope::{no_store, ok_json, JsonBody};
use companiond_core::multipart::{with_drain_cap, DrainCap};
use companiond_core::{Api, AppState};

use crate::error::AvatarError;
use crate::mmd::Mmd;
use crate::pngtuber::Pngtuber;
use crate::Limits;

/// After a refused upload, at most this much of the rest of the request is read
/// and discarded (by core's `drain_unread`) so that the client can read the answer
/// instead of a reset.
const REFUSED_UPLOAD_DRAIN: DrainCap = DrainCap {
    bytes: 64 * 1024 * 1024,
    time: Duration::from_secs(10),
};

#[derive(Clone)]
struct Ctx {
    mmd: Mmd,
    png: Pngtuber,
}

fn ctx(state: &AppState, limits: Limits) -> Ctx {
    Ctx {
        mmd: Mmd::new(
            state.data_dir(),
            state.bundle_dir(),
            state.opts.workshop_dir.clone(),
            limits,
            state.store.clone(),
        ),
        png: Pngtuber::new(state.data_dir(), limits, state.store.clone()),
    }
}

pub fn api(state: &AppState, limits: Limits) -> Api {
    let c = ctx(state, limits);
    c.mmd.clean_leftovers();
    c.png.clean_leftovers();
    let up = |c: &Ctx, which: Upload| {
        let c = c.clone();
        post(move |req: Request| {
            let c = c.clone();
            async move {
                match multipart(req).await {
                    Ok(mp) => mmd_upload(c, which, mp).await,
                    Err(e) => e.into_response(),
                }
            }
        })
        .layer(DefaultBodyLimit::disable())
    };
    let pc = c.clone();
    let png_upload = post(move |req: Request| {
        let c = pc.clone();
        async move {
            match multipart(req).await {
                Ok(mp) => pngtuber_upload(c, mp).await,
                Err(e) => e.into_response(),
            }
        }
    })
    .layer(DefaultBodyLimit::disable());
    let base = "/api/model/mmd";
    let c1 = c.clone();
    let c2 = c.clone();
    let c3 = c.clone();
    let c4 = c.clone();
    let c5 = c.clone();
    let c6 = c.clone();
    let c7 = c.clone();
    let c8 = c.clone();
    let c9 = c.clone();
    let c10 = c.clone();
    Api::new(state, "avatars")
        .route(
            Method::POST,
            &format!("{base}/upload"),
            "Upload a .pmx/.pmd model (multipart field file, streamed, at most 500 MB)",
            up(&c, Upload::Model),
        )
        .route(
            Method::POST,
            &format!("{base}/upload_animation"),
            "Upload a .vmd animation into the user animation/ folder (multipart field file)",
            up(&c, Upload::Animation),
        )
        .route(
            Method::POST,
            &format!("{base}/upload_zip"),
            "Import a ZIP of a .pmx/.pmd model and its textures (multipart field file)",
            up(&c, Upload::Zip),
        )
        .get(
            &format!("{base}/models"),
            "List project, user and workshop MMD models",
            move || async move { list(c1.mmd.list_models().await, "models") },
        )
        .get(
            &format!("{base}/animations"),
            "List project and user .vmd animations",
            move || async move { list(c2.mmd.list_animations().await, "animations") },
        )
        .get(
            &format!("{base}/animations/list"),
            "List the deletable user animations",
            move || async move { list(c3.mmd.deletable_animations().await, "animations") },
        )
        .get(
            &format!("{base}/config"),
            "MMD URL prefixes",
            move || async move { ok_json(c4.mmd.config()) },
        )
        .get(
            &format!("{base}/emotion_mapping"),
            "Emotion mapping of one model",
            move |q: RawQuery| async move { emotion_get(c5, query_map(q)).await },
        )
        .post(
            &format!("{base}/emotion_mapping"),
            "Store the emotion mapping of one model",
            move |b: JsonBody<Value>| async move { emotion_save(c6, b.0).await },
        )
        .delete(
            &format!("{base}/model"),
            "Delete a user model (folder or lone file) and its emotion mapping",
            move |q: RawQuery, b: JsonBody<Value>| async move {
                mmd_delete(c7, query_map(q), b.0, true).await
            },
        )
        .delete(
            &format!("{base}/animation"),
            "Delete a user .vmd animation",
            move |q: RawQuery, b: JsonBody<Value>| async move {
                mmd_delete(c8, query_map(q), b.0, false).await
            },
        )
        .route(
            Method::POST,
            "/api/model/pngtuber/upload_model",
            "Upload a PNGTuber package (multipart parts files, relative paths as file names)",
            png_upload,
        )
        .get(
            "/api/model/pngtuber/models",
            "List the valid PNGTuber packages",
            move || async move { raw_list(c9.png.list_json().await, "models") },
        )
        .delete(
            "/api/model/pngtuber/model",
            "Delete a PNGTuber package by folder, url or name",
            move |q: RawQuery, b: JsonBody<Value>| async move {
                pngtuber_delete(c10, query_map(q), b.0).await
            },
        )
}

fn list(r: Result<Vec<Value>, AvatarError>, key: &str) -> Response {
    match r {
        Ok(v) => no_store(ok_json(json!({"success": true, key: v}))),
        Err(e) => e.into_response(),
    }
}

/// `{"success": true, <key>: <array>}` around an already serialised array.
fn raw_list(r: Result<String, AvatarError>, key: &str) -> Response {
    match r {
        Ok(array) => {
            let body = format!("{{\"success\":true,{}:{array}}}", Value::from(key));
            no_store((
                [(
                    axum::http::header::CONTENT_TYPE,
                    axum::http::HeaderValue::from_static("application/json"),
                )],
                body,
            ))
        }
        Err(e) => e.into_response(),
    }
}

fn done(r: Result<Value, AvatarError>) -> Response {
    match r {
        Ok(v) => ok_json(v),
        Err(e) => e.into_response(),
    }
}

#[derive(Clone, Copy)]
enum Upload {
    Model,
    Animation,
    Zip,
}

/// A refused upload's answer, with the larger drain allowance.
fn refused(e: AvatarError) -> Response {
    with_drain_cap(e.into_response(), REFUSED_UPLOAD_DRAIN)
}

/// The multipart extractor, with its rejection in the family's envelope.
async fn multipart(req: Request) -> Result<Multipart, AvatarError> {
    companiond_core::multipart::multipart(req)
        .await
        .map_err(|e| AvatarError::invalid("invalid_multipart", e))
}

fn multipart_error(e: impl std::fmt::Display) -> AvatarError {
    AvatarError::invalid("invalid_multipart", format!("invalid multipart body: {e}"))
}

async fn mmd_upload(c: Ctx, which: Upload, mut mp: Multipart) -> Response {
    // The file is read from the part named "file" only; other parts (even
    // ones carrying a file) are skipped unread and nothing is stored for them.
    let result = loop {
        let field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => {
                break Err(AvatarError::invalid(
                    "missing_file",
                    "multipart field file is required",
                ))
            }
            Err(e) => break Err(multipart_error(e)),
        };
        if field.name() != Some("file") {
            continue;
        }
        let name = field.file_name().map(str::to_string);
        let mut field = field;
        break match which {
            Upload::Model => c.mmd.upload_model(name.as_deref(), &mut field).await,
            Upload::Animation => c.mmd.upload_animation(name.as_deref(), &mut field).await,
            Upload::Zip => c.mmd.upload_zip(name.as_deref(), &mut field).await,
        };
    };
    drop(mp);
    match result {
        Ok(v) => ok_json(v),
        Err(e) => refused(e),
    }
}

async fn pngtuber_upload(c: Ctx, mut mp: Multipart) -> Response {
    let mut up = match c.png.begin_upload().await {
        Ok(u) => u,
        Err(e) => return e.into_response(),
    };
    let result = loop {
        let mut field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break Ok(()),
            Err(e) => break Err(multipart_error(e)),
        };
        if field.name() != Some("files") {
            continue;
        }
        let name = field.file_name().map(str::to_string);
        if let Err(e) = up.add_file(name.as_deref(), &mut field).await {
            break Err(e);
        }
    };
    match result {
        Ok(()) => done(c.png.finish_upload(up).await),
        Err(e) => {
            drop(up);
            drop(mp);
            refused(e)
        }
    }
}

/// The query string as a map (never fails: malformed pairs are read leniently).
fn query_map(q: RawQuery) -> Map<String, Value> {
    let mut m = Map::new();
    if let Some(raw) = q.0 {
        for (k, v) in url::form_urlencoded::parse(raw.as_bytes()) {
            m.entry(k.into_owned())
                .or_insert(Value::String(v.into_owned()));
        }
    }
    m
}

/// A string parameter from the query, else from the JSON body.
fn param(q: &Map<String, Value>, body: &Value, key: &str) -> Option<String> {
    let pick = |v: Option<&Value>| match v {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        _ => None,
    };
    pick(body.get(key)).or_else(|| pick(q.get(key)))
}

async fn emotion_get(c: Ctx, q: Map<String, Value>) -> Response {
    let model = match q.get("model") {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    match c.mmd.emotion_mapping(model.as_deref()).await {
        Ok(m) => no_store(ok_json(json!({"success": true, "mapping": m}))),
        Err(e) => e.into_response(),
    }
}

async fn emotion_save(c: Ctx, body: Value) -> Response {
    let model = match body.get("model") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        _ => {
            return AvatarError::invalid("missing_model", "model is required").into_response();
        }
    };
    let mapping = match body.get("mapping") {
        Some(Value::Object(m)) => m.clone(),
        _ => {
            return AvatarError::invalid("invalid_mapping", "mapping must be an object")
                .into_response();
        }
    };
    match c.mmd.save_emotion_mapping(&model, mapping).await {
        Ok(()) => ok_json(json!({
            "success": true,
            "message": format!("emotion mapping of {model} saved"),
        })),
        Err(e) => e.into_response(),
    }
}

async fn mmd_delete(c: Ctx, q: Map<String, Value>, body: Value, model: bool) -> Response {
    let Some(url) = param(&q, &body, "url") else {
        return AvatarError::invalid("missing_url", "url is required").into_response();
    };
    if model {
        match c.mmd.delete_model(&url).await {
            Ok(files) => ok_json(json!({
                "success": true,
                "message": "model deleted",
                "deleted_files": files,
            })),
            Err(e) => e.into_response(),
        }
    } else {
        match c.mmd.delete_animation(&url).await {
            Ok(name) => ok_json(json!({
                "success": true,
                "message": format!("animation {name} deleted"),
            })),
            Err(e) => e.into_response(),
        }
    }
}

async fn pngtuber_delete(c: Ctx, q: Map<String, Value>, body: Value) -> Response {
    let key = ["folder", "url", "name"]
        .iter()
        .find_map(|k| param(&q, &body, k));
    let Some(key) = key else {
        return AvatarError::invalid("missing_identifier", "missing PNGTuber model identifier")
            .into_response();
    };
    match c.png.delete(&key).await {
        Ok(folder) => ok_json(json!({
            "success": true,
            "message": format!("PNGTuber model {folder} deleted"),
        })),
        Err(e) => e.into_response(),
    }
}
