//! Thin handlers of `/api/local/*`.

use axum::extract::Path as UrlPath;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use companiond_core::envelope::SuccessError;
use companiond_core::Ext;
use serde_json::{json, Value};

use crate::backend::{physical_cores, Backend, PullState};
use crate::catalog;
use crate::pull::{self, PullError};

/// `GET /api/local/status`.
pub async fn status(Ext(b): Ext<Backend>) -> Json<Value> {
    let settings = b.settings().await;
    let file = match &settings {
        Some(s) => {
            let p = s.model.clone();
            let b = b.clone();
            let r = tokio::task::spawn_blocking(move || b.inspect(&p)).await;
            match r {
                Ok(Ok(info)) => json!({"ok": true, "info": info}),
                Ok(Err(e)) => json!({"ok": false, "error": e.to_string(), "error_code": e.code()}),
                Err(e) => json!({"ok": false, "error": e.to_string()}),
            }
        }
        None => Value::Null,
    };
    Json(json!({
        "success": true,
        "configured": settings.is_some(),
        "model_path": settings.as_ref().map(|s| s.model.display().to_string()),
        "embedding_path": settings.as_ref().and_then(|s| s.embedding.as_ref()).map(|p| p.display().to_string()),
        "threads": settings.as_ref().map(|s| s.threads).unwrap_or_else(physical_cores),
        "idle_seconds": settings.as_ref().map(|s| s.idle.as_secs()),
        "file": file,
        "engine": b.engine.status(),
    }))
}

/// `GET /api/local/models`.
pub async fn models(Ext(b): Ext<Backend>) -> Json<Value> {
    let pulls = b.pulls.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let list: Vec<Value> = catalog::all()
        .into_iter()
        .map(|e| {
            let pulled = catalog::pulled_path(&b.data_dir, &e).is_file();
            let mut v = json!(e);
            v["pulled"] = json!(pulled);
            if let Some(p) = pulls.get(&e.name) {
                v["download"] = json!(p);
            }
            v
        })
        .collect();
    Json(
        json!({"success": true, "models": list, "models_dir": catalog::models_dir(&b.data_dir).display().to_string()}),
    )
}

fn fail(status: StatusCode, code: &str, msg: impl Into<String>) -> Response {
    SuccessError::new(msg)
        .code(code)
        .status(status)
        .into_response()
}

/// `POST /api/local/models/{name}/pull`: starts the download and answers at
/// once (202); progress is in `GET /api/local/models`.
pub async fn pull(Ext(b): Ext<Backend>, UrlPath(name): UrlPath<String>) -> Response {
    let Some(entry) = catalog::find(&name) else {
        let e = PullError::UnknownModel(name);
        return fail(StatusCode::NOT_FOUND, e.code(), e.to_string());
    };
    {
        let mut pulls = b.pulls.lock().unwrap_or_else(|e| e.into_inner());
        if pulls
            .get(&entry.name)
            .is_some_and(|p| p.state == "downloading")
        {
            let e = PullError::Busy;
            return fail(StatusCode::CONFLICT, e.code(), e.to_string());
        }
        pulls.insert(
            entry.name.clone(),
            PullState {
                name: entry.name.clone(),
                state: "downloading".into(),
                total: entry.size,
                ..Default::default()
            },
        );
    }
    let (pulls, http, data_dir) = (b.pulls.clone(), b.http.clone(), b.data_dir.clone());
    let e = entry.clone();
    tokio::spawn(async move {
        let key = e.name.clone();
        let progress = {
            let pulls = pulls.clone();
            let key = key.clone();
            move |got: u64, total: u64| {
                if let Some(p) = pulls
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_mut(&key)
                {
                    p.received = got;
                    p.total = total;
                }
            }
        };
        let r = pull::pull(&http, &data_dir, &e, &progress).await;
        let mut map = pulls.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = map.get_mut(&key) {
            match r {
                Ok(_) => {
                    p.state = "done".into();
                    p.received = p.total;
                }
                Err(err) => {
                    tracing::warn!("pull of {key} failed: {err}");
                    p.state = "failed".into();
                    p.error = Some(err.to_string());
                    p.error_code = Some(err.code().into());
                }
            }
        }
    });
    (
        StatusCode::ACCEPTED,
        Json(json!({"success": true, "name": entry.name, "state": "downloading"})),
    )
        .into_response()
}

/// `POST /api/local/unload`.
pub async fn unload(Ext(b): Ext<Backend>) -> Json<Value> {
    b.engine.unload();
    Json(json!({"success": true}))
}
