//! Thin HTTP handlers: parse the request, call the domain module, shape the answer.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use companiond_core::envelope::{no_store, ok_json};
use companiond_core::guards::{token_matches, LoopbackPeer};
use companiond_core::{now_millis, AppState};
use serde_json::{json, Map, Value};

use crate::error::{Kind, SysResult, SystemError};
use crate::{
    activity, autostart, changelog, desktop, emotion, files, platform, status, survey, translate,
    tutorial, usage, Sys,
};

/// Default largest JSON body of a system route.
const MAX_BODY: usize = 256 * 1024;

pub async fn add_no_store(r: Response) -> Response {
    no_store(r)
}

fn query(q: &RawQuery, key: &str) -> Option<String> {
    let raw = q.0.as_deref()?;
    url::form_urlencoded::parse(raw.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// Read a JSON object body (empty = `{}`); 413 past `limit`, 400 for bad JSON or a non-object.
async fn read_obj(body: Body, limit: usize) -> SysResult<Map<String, Value>> {
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        SystemError::new(
            Kind::TooLarge,
            "body_too_large",
            format!("the body is larger than {limit} bytes"),
        )
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(SystemError::bad_request(
            "invalid_body",
            "body must be a JSON object",
        )),
        Err(_) => Err(SystemError::bad_request(
            "invalid_json",
            "invalid JSON body",
        )),
    }
}

fn blocking_failed<E: std::fmt::Display>(e: E) -> SystemError {
    SystemError::new(Kind::Internal, "internal_error", e.to_string())
}

async fn blocking<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> SysResult<R> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(blocking_failed)
}

fn respond(r: SysResult<Value>) -> Response {
    match r {
        Ok(v) => ok_json(v),
        Err(e) => e.into_response(),
    }
}

fn persona_of(body: &Map<String, Value>) -> Option<String> {
    ["persona_name", "lanlan_name"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_str))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

// ------------------------------------------------------------------ status & notices

pub async fn status(State(st): State<AppState>) -> Response {
    no_store(ok_json(status::snapshot(&st).await))
}

pub async fn token_usage(State(st): State<AppState>, q: RawQuery) -> Response {
    let days = match query(&q, "days") {
        None => usage::DEFAULT_DAYS,
        Some(d) => match d.trim().parse::<i64>() {
            Ok(d) => d,
            Err(_) => {
                return SystemError::bad_request("invalid_days", "days must be an integer")
                    .into_response()
            }
        },
    };
    let now = now_millis() / 1000;
    let u = st.usage.clone();
    let stats = blocking(move || usage::statistics(&u, days, now)).await;
    match stats {
        Ok(Ok(body)) => ok_json(body),
        Ok(Err(e)) => SystemError::new(Kind::Internal, "usage_unavailable", e).into_response(),
        Err(e) => e.into_response(),
    }
}

pub async fn pending_notices(State(st): State<AppState>) -> Response {
    let (notices, cursor) = st.notices.peek();
    no_store(ok_json(json!({"notices": notices, "cursor": cursor})))
}

pub async fn ack(State(st): State<AppState>, body: Body) -> Response {
    let b = match read_obj(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let cursor = match b.get("cursor") {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        Some(Value::String(s)) => s.trim().parse::<u64>().unwrap_or(0),
        _ => 0,
    };
    let drained = st.notices.ack(cursor);
    let (_, cursor) = st.notices.peek();
    ok_json(json!({"success": true, "ok": true, "acknowledged": drained, "cursor": cursor}))
}

pub async fn activity_signal(sys: Arc<Sys>, st: AppState, body: Body) -> Response {
    let r = async {
        let bytes = axum::body::to_bytes(body, activity::MAX_BODY)
            .await
            .map_err(|_| {
                SystemError::new(
                    Kind::TooLarge,
                    "body_too_large",
                    "activity payload is too large",
                )
            })?;
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|_| SystemError::bad_request("invalid_json", "invalid JSON body"))?;
        let (name, snap) = activity::validate(&v)?;
        if !st.characters.exists(&name) {
            return Err(SystemError::not_found(
                "character_not_found",
                format!("persona_name '{name}' not registered"),
            ));
        }
        sys.tracker.push(&name, snap)?;
        Ok(json!({"success": true}))
    }
    .await;
    match r {
        Ok(v) => no_store(ok_json(v)),
        Err(e) => {
            let retry = e
                .extra
                .get("retry_after_seconds")
                .and_then(Value::as_f64)
                .map(|s| s as u64 + 1);
            let mut resp = e.no_store().into_response();
            if let Some(s) = retry {
                if let Ok(h) = HeaderValue::from_str(&s.to_string()) {
                    resp.headers_mut().insert(header::RETRY_AFTER, h);
                }
            }
            resp
        }
    }
}

// ------------------------------------------------------------------ changelog & survey

pub async fn changelog(State(st): State<AppState>, q: RawQuery) -> Response {
    let since = query(&q, "since").unwrap_or_default();
    let lang = query(&q, "lang").unwrap_or_default();
    let bundle = st.bundle_dir().to_path_buf();
    respond(blocking(move || changelog::changelog(&bundle, &since, &lang)).await)
}

pub async fn survey(State(st): State<AppState>, q: RawQuery) -> Response {
    let lang = query(&q, "lang").unwrap_or_default();
    let bundle = st.bundle_dir().to_path_buf();
    let data = st.data_dir().to_path_buf();
    let workshop = st.opts.workshop_dir.clone();
    let none = json!({"has_survey": false, "survey_version": changelog::APP_VERSION});
    let done: Option<Value> = st.store.read(survey::STATE_DOC).await.ok().flatten();
    if done
        .as_ref()
        .and_then(|d| d.get("responses"))
        .and_then(|r| r.get(changelog::APP_VERSION))
        .is_some()
    {
        return ok_json(none);
    }
    let r = blocking(move || {
        if survey::opted_out(&data) || !survey::platform_user(&bundle, workshop.as_deref()) {
            return None;
        }
        survey::load(&bundle, &lang)
    })
    .await;
    match r {
        Ok(Some(s)) => ok_json(
            json!({"has_survey": true, "survey_version": changelog::APP_VERSION, "survey": s}),
        ),
        Ok(None) => ok_json(none),
        Err(e) => e.into_response(),
    }
}

pub async fn survey_submit(State(st): State<AppState>, body: Body) -> Response {
    let r = async {
        let b = read_obj(body, MAX_BODY).await?;
        let action = match b.get("action").and_then(Value::as_str) {
            Some("skip") => "skip",
            _ => "submit",
        };
        let bundle = st.bundle_dir().to_path_buf();
        let data = st.data_dir().to_path_buf();
        let (exists, opted_out, target) = blocking(move || {
            (
                survey::load(&bundle, "").is_some()
                    || bundle
                        .join("surveys")
                        .join(format!("{}.json", changelog::APP_VERSION))
                        .is_file(),
                survey::opted_out(&data),
                survey::upload_target(&bundle),
            )
        })
        .await?;
        if !exists {
            return Err(SystemError::not_found(
                "no_survey",
                "there is no survey for this version",
            ));
        }
        let answers = if action == "skip" {
            Map::new()
        } else {
            survey::clean_answers(b.get("answers"))
        };
        let lang = b
            .get("lang")
            .and_then(Value::as_str)
            .map(changelog::sanitize_lang)
            .unwrap_or_default();
        let payload = json!({
            "survey_version": changelog::APP_VERSION, "action": action, "answers": answers,
            "locale": lang, "submitted_at": companiond_core::now_rfc3339(), "client": "companiond",
        });
        let uploaded = match (&target, opted_out) {
            (Some((url, key)), false) => {
                survey::upload(&st.http, url, key.as_deref(), &payload).await
            }
            _ => false,
        };
        let at = now_millis();
        st.store
            .update(survey::STATE_DOC, move |cur: Option<Value>| {
                let mut v = cur.filter(Value::is_object).unwrap_or_else(|| json!({}));
                if !v.get("responses").is_some_and(Value::is_object) {
                    v["responses"] = json!({});
                }
                v["responses"][changelog::APP_VERSION] =
                    json!({"action": action, "at": at, "uploaded": uploaded});
                (v, ())
            })
            .await?;
        Ok(
            json!({"ok": true, "success": true, "uploaded": uploaded, "action": action,
                  "survey_version": changelog::APP_VERSION}),
        )
    }
    .await;
    respond(r)
}

// ------------------------------------------------------------------ emotion & translate

pub async fn emotion(State(st): State<AppState>, body: Body) -> Response {
    let r = async {
        let b = read_obj(body, MAX_BODY).await?;
        let text = match b.get("text") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) => String::new(),
            _ => {
                return Err(SystemError::bad_request("missing_text", "text is required")
                    .with("emotion", "neutral")
                    .with("confidence", 0.0))
            }
        };
        let name = persona_of(&b)
            .filter(|n| st.characters.exists(n))
            .unwrap_or_default();
        let key = b.get("api_key").and_then(Value::as_str).map(str::to_string);
        let model = b.get("model").and_then(Value::as_str).map(str::to_string);
        let o = emotion::analyse(&st, &text, &name, key, model).await;
        if !name.is_empty() {
            if let Some(m) = st.sessions.get(&name) {
                m.notify(
                    json!({"type": "emotion", "emotion": o.emotion, "confidence": o.confidence}),
                );
            }
        }
        let mut v = json!({"success": o.source != "failed", "emotion": o.emotion,
                           "confidence": o.confidence, "source": o.source});
        if let Some((code, msg)) = o.error {
            v["error"] = json!(msg);
            v["error_code"] = json!(code);
        }
        Ok(v)
    }
    .await;
    respond(r)
}

pub async fn translate(sys: Arc<Sys>, st: AppState, body: Body) -> Response {
    let r = async {
        let b = read_obj(body, MAX_BODY).await?;
        let raw_target = b.get("target_lang").and_then(Value::as_str).unwrap_or("zh").to_string();
        let text = b.get("text").and_then(Value::as_str).unwrap_or("");
        if text.trim().is_empty() {
            return Err(SystemError::bad_request("missing_text", "text is required")
                .with("translated_text", "")
                .with("source_lang", "unknown")
                .with("target_lang", raw_target));
        }
        if text.chars().count() > translate::MAX_TEXT {
            return Err(SystemError::bad_request("text_too_long", "text is too long")
                .with("translated_text", text)
                .with("source_lang", "unknown")
                .with("target_lang", translate::normalize_lang(&raw_target)));
        }
        let skip_google = b.get("skip_google").and_then(Value::as_bool).unwrap_or(false);
        let source = b.get("source_lang").and_then(Value::as_str);
        let t = translate::translate(&st, sys.google.as_deref(), text, source, &raw_target, skip_google).await;
        let mut v = json!({"success": t.failure.is_none(), "translated_text": t.text,
                           "source_lang": t.source, "target_lang": t.target, "provider": t.provider});
        if let Some(g) = t.google_failed {
            v["google_failed"] = json!(g);
        }
        if let Some(f) = t.failure {
            v["error"] = json!(format!("translation failed: {f}"));
            v["error_code"] = json!("translation_failed");
        }
        Ok(v)
    }
    .await;
    respond(r)
}

// ------------------------------------------------------------------ files & images

pub async fn file_exists(State(st): State<AppState>, q: RawQuery) -> Response {
    let path = query(&q, "path").unwrap_or_default();
    let bundle = st.bundle_dir().to_path_buf();
    match blocking(move || files::file_exists(&path, &bundle)).await {
        Ok(Ok(exists)) => ok_json(json!({"exists": exists})),
        Ok(Err(e)) | Err(e) => e.with("exists", false).into_response(),
    }
}

pub async fn find_first_image(sys: Arc<Sys>, _st: AppState, q: RawQuery) -> Response {
    let folder = query(&q, "folder").unwrap_or_default();
    let roots = sys.roots.clone();
    match blocking(move || files::find_first_image(&roots, &folder)).await {
        Ok(Ok(Some(loc))) => {
            ok_json(json!({"success": true, "imagePath": loc.display_path(), "url": loc.url()}))
        }
        Ok(Ok(None)) => ok_json(json!({"success": false, "error_code": "not_found",
                                       "error": "no preview image smaller than 1 MiB was found"})),
        Ok(Err(e)) | Err(e) => e.into_response(),
    }
}

pub async fn meme_proxy(sys: Arc<Sys>, _st: AppState, q: RawQuery) -> Response {
    let Some(url) = query(&q, "url") else {
        return SystemError::bad_request("missing_url", "query url is required").into_response();
    };
    match sys.meme.fetch(&url).await {
        Ok(img) => {
            let mut resp = (StatusCode::OK, img.body).into_response();
            let h = resp.headers_mut();
            if let Ok(ct) = HeaderValue::from_str(&img.content_type) {
                h.insert(header::CONTENT_TYPE, ct);
            }
            h.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=86400"),
            );
            h.insert(
                "x-content-type-options",
                HeaderValue::from_static("nosniff"),
            );
            h.insert(
                "x-cache",
                HeaderValue::from_static(if img.cache_hit { "HIT" } else { "MISS" }),
            );
            resp
        }
        Err(e) => e.into_response(),
    }
}

pub async fn platform_proxy_image(sys: Arc<Sys>, _st: AppState, q: RawQuery) -> Response {
    let Some(raw) = query(&q, "image_path").filter(|p| !p.trim().is_empty()) else {
        return SystemError::bad_request("missing_path", "query image_path is required")
            .into_response();
    };
    let roots = sys.roots.clone();
    let img = match blocking(move || files::proxy_image(&roots, &raw)).await {
        Ok(Ok(img)) => img,
        Ok(Err(e)) | Err(e) => return e.into_response(),
    };
    let file = match tokio::fs::File::open(&img.path).await {
        Ok(f) => f,
        Err(_) => return SystemError::not_found("not_found", "file not found").into_response(),
    };
    let stream = tokio_util::io::ReaderStream::new(file);
    let mut resp = Body::from_stream(stream).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(img.content_type),
    );
    if let Ok(v) = HeaderValue::from_str(&img.len.to_string()) {
        h.insert(header::CONTENT_LENGTH, v);
    }
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}

// ------------------------------------------------------------------ desktop

pub async fn window_title() -> Response {
    match blocking(desktop::window_title).await {
        Ok(Some(t)) => ok_json(json!({"success": true, "window_title": t})),
        _ => ok_json(json!({"success": false, "window_title": null})),
    }
}

fn loopback_refused() -> Response {
    SystemError::forbidden("forbidden", "only available from localhost")
        .no_store()
        .into_response()
}

pub async fn screenshot(peer: Result<LoopbackPeer, Response>) -> Response {
    if peer.is_err() {
        return loopback_refused();
    }
    match blocking(desktop::screenshot).await {
        Ok(Ok(c)) => no_store(ok_json(
            json!({"success": true, "data": c.data_url, "size": c.size}),
        )),
        Ok(Err(e)) | Err(e) => e.no_store().into_response(),
    }
}

pub async fn screenshot_interactive(
    State(st): State<AppState>,
    peer: Result<LoopbackPeer, Response>,
    headers: HeaderMap,
) -> Response {
    if peer.is_err() {
        return loopback_refused();
    }
    if headers.contains_key(header::ORIGIN) || headers.contains_key(header::REFERER) {
        let token_ok = headers
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| token_matches(st.csrf_token(), t));
        if !token_ok || st.host_policy().has_foreign_origin(&headers) {
            return SystemError::forbidden("csrf_validation_failed", "CSRF validation failed")
                .no_store()
                .into_response();
        }
    }
    match blocking(desktop::interactive).await {
        Ok(Ok(Some(c))) => no_store(ok_json(
            json!({"success": true, "data": c.data_url, "size": c.size, "interactive": true}),
        )),
        Ok(Ok(None)) => no_store(ok_json(json!({"success": false, "canceled": true}))),
        Ok(Err(e)) | Err(e) => e.no_store().into_response(),
    }
}

// ------------------------------------------------------------------ proactive & games

pub async fn proactive_chat(sys: Arc<Sys>, st: AppState, body: Body) -> Response {
    let r = async {
        let b = read_obj(body, MAX_BODY).await?;
        sys.proactive.run(&st, &sys.tracker, &b).await
    }
    .await;
    respond(r)
}

pub async fn music_played_through(sys: Arc<Sys>, st: AppState, body: Body) -> Response {
    let r = async {
        let b = read_obj(body, MAX_BODY).await?;
        let name = persona_of(&b)
            .or_else(|| Some(st.characters.current()).filter(|c| !c.trim().is_empty()))
            .ok_or_else(|| {
                SystemError::bad_request("missing_persona_name", "persona_name missing")
            })?;
        let cleared = sys.proactive.clear_music(&name);
        Ok(json!({"success": true, "cleared": cleared, "lanlan_name": name, "persona_name": name}))
    }
    .await;
    respond(r)
}

pub async fn invite_respond(sys: Arc<Sys>, st: AppState, body: Body) -> Response {
    let r = async {
        let b = read_obj(body, MAX_BODY).await?;
        sys.proactive.respond(&st, &b, now_millis())
    }
    .await;
    respond(r)
}

// ------------------------------------------------------------------ seven-day tutorial

async fn tutorial_load(st: &AppState) -> SysResult<Value> {
    if let Some(v) = st.store.read::<Value>(tutorial::DOC).await? {
        if v.get("initialized").and_then(Value::as_bool) == Some(true) {
            return Ok(v);
        }
    }
    let legacy: Option<Value> = st.store.read(tutorial::LEGACY_DOC).await.ok().flatten();
    match legacy.as_ref().and_then(tutorial::migrate_legacy) {
        Some(m) => {
            // The caller holds the document lock: write directly (atomically).
            let path = st.store.path(tutorial::DOC);
            let doc = m.clone();
            blocking(move || companiond_core::store::atomic_write_json(&path, &doc))
                .await?
                .map_err(SystemError::storage)?;
            Ok(m)
        }
        None => Ok(tutorial::empty_store()),
    }
}

pub async fn tutorial_get(State(st): State<AppState>) -> Response {
    let lock = st.store.lock_for(tutorial::DOC);
    let _g = lock.lock().await;
    respond(tutorial_load(&st).await.map(|v| tutorial::public(&v, true)))
}

pub async fn tutorial_put(State(st): State<AppState>, body: Body) -> Response {
    let r = async {
        let b = Value::Object(read_obj(body, MAX_BODY).await?);
        let (state, expected) = tutorial::validate_put(&b)?;
        let lock = st.store.lock_for(tutorial::DOC);
        let _g = lock.lock().await;
        let current = tutorial_load(&st).await?;
        let next = tutorial::apply_put(&current, &state, expected)?;
        let path = st.store.path(tutorial::DOC);
        let doc = next.clone();
        blocking(move || companiond_core::store::atomic_write_json(&path, &doc))
            .await?
            .map_err(SystemError::storage)?;
        Ok(tutorial::public(&next, true))
    }
    .await;
    respond(r)
}

// ------------------------------------------------------------------ autostart prompt

async fn autostart_run<R: Send + 'static>(
    st: &AppState,
    f: impl FnOnce(&mut autostart::State, &autostart::Config, i64) -> SysResult<R> + Send + 'static,
) -> SysResult<(autostart::State, R)> {
    let cfg: Option<Value> = st.store.read(autostart::CONFIG_DOC).await.ok().flatten();
    let cfg = autostart::Config::from_overrides(cfg.as_ref());
    let now = now_millis();
    let r = st
        .store
        .try_update(autostart::DOC, move |cur: Option<autostart::State>| {
            let mut s = cur.unwrap_or_default();
            s.normalize();
            let r = f(&mut s, &cfg, now)?;
            Ok((s.clone(), (s, r)))
        })
        .await?;
    r
}

pub async fn autostart_state(State(st): State<AppState>) -> Response {
    match st.store.read::<autostart::State>(autostart::DOC).await {
        Ok(s) => {
            let mut s = s.unwrap_or_default();
            s.normalize();
            ok_json(json!({"ok": true, "prompt_mode": "autostart", "state": s.public()}))
        }
        Err(e) => SystemError::from(e).into_response(),
    }
}

pub async fn autostart_heartbeat(State(st): State<AppState>, body: Body) -> Response {
    let r = async {
        let b = read_obj(body, MAX_BODY).await?;
        let (s, (should, reason, token)) = autostart_run(&st, move |s, cfg, now| {
            Ok(autostart::heartbeat(s, &b, cfg, now))
        })
        .await?;
        Ok(
            json!({"ok": true, "should_prompt": should, "prompt_reason": reason,
                  "prompt_mode": "autostart", "prompt_token": token, "state": s.full()}),
        )
    }
    .await;
    respond(r)
}

pub async fn autostart_shown(State(st): State<AppState>, body: Body) -> Response {
    let r = async {
        let b = read_obj(body, MAX_BODY).await?;
        let (s, already) =
            autostart_run(&st, move |s, cfg, now| autostart::shown(s, &b, cfg, now)).await?;
        Ok(json!({"ok": true, "already_acknowledged": already, "state": s.full()}))
    }
    .await;
    respond(r)
}

pub async fn autostart_decision(State(st): State<AppState>, body: Body) -> Response {
    let r = async {
        let b = read_obj(body, MAX_BODY).await?;
        let (s, ()) =
            autostart_run(&st, move |s, cfg, now| autostart::decision(s, &b, cfg, now)).await?;
        Ok(json!({"ok": true, "state": s.full()}))
    }
    .await;
    respond(r)
}

// ------------------------------------------------------------------ platform

async fn platform_config(st: &AppState) -> SysResult<Vec<platform::Achievement>> {
    let bundle = st.bundle_dir().to_path_buf();
    blocking(move || platform::load_config(&bundle)).await?
}

pub async fn set_achievement(st: AppState, Path(name): Path<String>) -> Response {
    let r = async {
        let cfg = platform_config(&st).await?;
        let now = now_millis();
        let n = name.clone();
        let newly = st
            .store
            .try_update(platform::DOC, move |cur: Option<platform::Progress>| {
                let mut p = cur.unwrap_or_default();
                let newly = platform::unlock(&cfg, &mut p, &n, now)?;
                Ok::<_, SystemError>((p, newly))
            })
            .await??;
        Ok(json!({"success": true, "achievement": name, "newlyUnlocked": newly,
                  "alreadyUnlocked": !newly,
                  "message": if newly { "achievement unlocked" } else { "achievement was already unlocked" }}))
    }
    .await;
    respond(r)
}

pub async fn update_playtime(State(st): State<AppState>, body: Body) -> Response {
    let r = async {
        let cfg = platform_config(&st).await?;
        let b = read_obj(body, MAX_BODY).await?;
        let seconds = platform::parse_seconds(b.get("seconds"))?;
        let now = now_millis();
        let (total, unlocked) = st
            .store
            .update(platform::DOC, move |cur: Option<platform::Progress>| {
                let mut p = cur.unwrap_or_default();
                let unlocked = platform::add_playtime(&cfg, &mut p, seconds, now);
                let total = p.play_time_seconds;
                (p, (total, unlocked))
            })
            .await?;
        Ok(
            json!({"success": true, "totalPlayTime": total, "added": seconds,
                  "stat": platform::STAT, "progressUnlocked": unlocked}),
        )
    }
    .await;
    respond(r)
}

pub async fn list_achievements(State(st): State<AppState>) -> Response {
    let r = async {
        let cfg = platform_config(&st).await?;
        let p: platform::Progress = st.store.read(platform::DOC).await?.unwrap_or_default();
        Ok(platform::list(&cfg, &p))
    }
    .await;
    respond(r)
}

// ------------------------------------------------------------------ guide handoff

/// The request origin: `Origin`, else the origin of `Referer`, else the server's own.
fn request_origin(headers: &HeaderMap) -> String {
    let norm = |s: &str| -> Option<String> {
        let u = url::Url::parse(s.trim()).ok()?;
        if !matches!(u.scheme(), "http" | "https") {
            return None;
        }
        let o = u.origin().ascii_serialization();
        (o != "null").then(|| o.to_ascii_lowercase())
    };
    if let Some(o) = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .and_then(norm)
    {
        return o;
    }
    if let Some(o) = headers
        .get(header::REFERER)
        .and_then(|v| v.to_str().ok())
        .and_then(norm)
    {
        return o;
    }
    headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| norm(&format!("http://{h}")))
        .unwrap_or_default()
}

pub async fn handoff_create(
    sys: Arc<Sys>,
    _st: AppState,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let r = async {
        let b = read_obj(body, MAX_BODY).await?;
        let token = sys
            .handoff
            .create(&b, &request_origin(&headers), now_millis())
            .await?;
        Ok(json!({"ok": true, "success": true, "token": token}))
    }
    .await;
    respond(r)
}

pub async fn handoff_consume(
    sys: Arc<Sys>,
    _st: AppState,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let r = async {
        let b = read_obj(body, MAX_BODY).await?;
        let token = sys
            .handoff
            .consume(&b, &request_origin(&headers), now_millis())
            .await?;
        Ok(json!({"ok": true, "success": true, "token": token}))
    }
    .await;
    respond(r)
}
