//! Configuration (`/api/config`) and proactive-chat settings (`/api/proactive`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use companiond_core::envelope::{ok_json, JsonBody, SuccessError};
use companiond_core::state::docs;
use companiond_core::{Api, AppState};
use serde_json::{json, Map, Value};

/// The value sent in place of a stored secret.
pub const MASKED: &str = "__NEKO_SECRET_MASKED__";

/// Is `key` a secret field of the core configuration?
pub fn is_secret(key: &str) -> bool {
    key.ends_with("ApiKey")
        || key.starts_with("assistApiKey")
        || key == "coreApiKey"
        || key == "mcpToken"
}

/// Does `v` stand for "keep the stored secret"?
pub fn is_masked(v: &str) -> bool {
    v == MASKED || (v.len() >= 3 && v.chars().all(|c| c == '*' || c == '•'))
}

async fn get_core_api(State(st): State<AppState>) -> Response {
    let cfg = st.llm.core_config().await;
    let masked: Map<String, Value> = cfg
        .into_iter()
        .map(|(k, v)| {
            if is_secret(&k) && v.as_str().is_some_and(|s| !s.is_empty()) {
                (k, json!(MASKED))
            } else {
                (k, v)
            }
        })
        .collect();
    let mut body = json!({"success": true});
    if let Some(b) = body.as_object_mut() {
        b.extend(masked);
    }
    ok_json(body)
}

async fn post_core_api(
    State(st): State<AppState>,
    JsonBody(body, ..): JsonBody<Map<String, Value>>,
) -> Response {
    let r = st
        .store
        .try_update(docs::CORE_CONFIG, move |cur: Option<Value>| {
            let mut cfg = match cur {
                Some(Value::Object(m)) => m,
                None => Map::new(),
                Some(_) => return Err("the stored core configuration is not an object"),
            };
            for (k, v) in body {
                if k.starts_with('_') {
                    continue;
                }
                if is_secret(&k) && v.as_str().is_some_and(is_masked) {
                    continue;
                }
                cfg.insert(k, v);
            }
            Ok((Value::Object(cfg), ()))
        })
        .await;
    match r {
        Ok(Ok(())) => {
            st.sessions.notify_all(json!({"type": "provider_changed"}));
            ok_json(
                json!({"success": true, "message": "settings saved", "sessions_notified": true}),
            )
        }
        Ok(Err(e)) => SuccessError::new(e).status(StatusCode::CONFLICT),
        Err(e) => SuccessError::new(e.to_string()).status(StatusCode::INTERNAL_SERVER_ERROR),
    }
}

/// The configuration and proactive routes.
pub fn api(state: &AppState) -> Api {
    Api::new(state, "config")
        .get(
            "/api/config/core_api",
            "effective provider configuration, secrets masked",
            get_core_api,
        )
        .post(
            "/api/config/core_api",
            "merge and save provider settings",
            post_core_api,
        )
}
