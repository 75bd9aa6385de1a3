//! The original page routes (registered only with `--frontend-dir`): each renders
//! `<frontend-dir>/templates/<page>.html` with the context the original page router
//! passes, `/chara_manager` redirects like the original, and `/{name}` is the main
//! page for a character.

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use companiond_core::envelope::parse_query;
use companiond_core::AppState;
use minijinja::Environment;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::render;

/// The VRM lighting defaults the original passes as `vrm_defaults`.
pub fn vrm_defaults() -> Value {
    json!({
        "ambient": 0.83, "main": 1.91, "fill": 0.0, "rim": 0.0, "top": 0.0, "bottom": 0.0,
        "exposure": 1.1, "toneMapping": 7, "outlineWidthScale": 1.0
    })
}

/// What a page's context carries besides the query-derived values.
#[derive(Clone, Copy)]
struct Ctx {
    vrm: bool,
    react: bool,
    surface: Option<&'static str>,
    lanlan_query: bool,
}

const PLAIN: Ctx = Ctx {
    vrm: false,
    react: false,
    surface: None,
    lanlan_query: false,
};
const INDEX: Ctx = Ctx {
    vrm: true,
    react: true,
    surface: None,
    lanlan_query: false,
};

/// `(path, template, context)` of every page served.
const PAGES: &[(&str, &str, Ctx)] = &[
    ("/", "index.html", INDEX),
    (
        "/web_chat_compact",
        "index.html",
        Ctx {
            surface: Some("compact"),
            ..INDEX
        },
    ),
    (
        "/chat",
        "chat.html",
        Ctx {
            surface: Some("compact"),
            ..INDEX
        },
    ),
    (
        "/chat_full",
        "chat.html",
        Ctx {
            surface: Some("full"),
            ..INDEX
        },
    ),
    ("/memory_browser", "memory_browser.html", PLAIN),
    (
        "/cloudsave_manager",
        "cloudsave_manager.html",
        Ctx {
            lanlan_query: true,
            ..PLAIN
        },
    ),
    (
        "/character_card_manager",
        "character_card_manager.html",
        Ctx {
            lanlan_query: true,
            ..PLAIN
        },
    ),
    (
        "/model_manager",
        "model_manager.html",
        Ctx { vrm: true, ..PLAIN },
    ),
    ("/l2d", "model_manager.html", Ctx { vrm: true, ..PLAIN }),
    ("/api_key", "api_key_settings.html", PLAIN),
    ("/jukebox/manager", "jukebox_manager.html", PLAIN),
    ("/jukebox", "jukebox.html", PLAIN),
    ("/voice_clone", "voice_clone.html", PLAIN),
    ("/voice_identity", "voice_identity.html", PLAIN),
    ("/cookies_login", "cookies_login.html", PLAIN),
    ("/card_maker", "card_maker.html", Ctx { vrm: true, ..PLAIN }),
    (
        "/live2d_parameter_editor",
        "live2d_parameter_editor.html",
        PLAIN,
    ),
    (
        "/live2d_emotion_manager",
        "live2d_emotion_manager.html",
        PLAIN,
    ),
    ("/vrm_emotion_manager", "vrm_emotion_manager.html", PLAIN),
    ("/mmd_emotion_manager", "mmd_emotion_manager.html", PLAIN),
    (
        "/soccer_demo",
        "soccer_demo.html",
        Ctx { vrm: true, ..PLAIN },
    ),
    ("/badminton_demo", "badminton_demo.html", PLAIN),
    ("/subtitle", "subtitle.html", PLAIN),
    ("/agenthud", "agenthud.html", PLAIN),
    ("/toast", "toast.html", PLAIN),
];

/// Shared by the page handlers.
pub struct Pages {
    root: PathBuf,
    env: Environment<'static>,
    static_version: String,
    react_version: String,
}

impl Pages {
    pub fn new(root: PathBuf) -> Pages {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Pages {
            env: render::environment(root.clone()),
            root,
            // Stable for the life of the process, new on every start (cache busting).
            static_version: format!("companiond-{}-{started}", env!("CARGO_PKG_VERSION")),
            react_version: started.to_string(),
        }
    }

    /// Render `templates/<file>` with `ctx`.
    fn render(&self, file: &str, ctx: Map<String, Value>) -> Response {
        let name = format!("templates/{file}");
        if !render::template_exists(&self.root, &name) {
            return (
                StatusCode::NOT_FOUND,
                format!("this page's template ({name}) is not in the frontend folder"),
            )
                .into_response();
        }
        let out = self
            .env
            .get_template(&name)
            .and_then(|t| t.render(Value::Object(ctx)));
        match out {
            Ok(html) => (
                [
                    (header::CACHE_CONTROL, "no-cache"),
                    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                ],
                Html(html),
            )
                .into_response(),
            Err(e) => {
                tracing::error!("cannot render {name}: {e:#}");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("cannot render {name}: {e}"),
                )
                    .into_response()
            }
        }
    }

    fn context(&self, c: Ctx, query: Option<&str>) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("static_asset_version".into(), json!(self.static_version));
        if c.react {
            m.insert("react_chat_asset_version".into(), json!(self.react_version));
        }
        if c.vrm {
            m.insert("vrm_defaults".into(), vrm_defaults());
        }
        if let Some(s) = c.surface {
            m.insert("initial_chat_surface_mode".into(), json!(s));
            m.insert("initial_chat_host_kind".into(), json!(s));
        }
        if c.lanlan_query {
            let name = parse_query::<PageQuery>(query)
                .unwrap_or_default()
                .lanlan_name
                .unwrap_or_default();
            m.insert("lanlan_name".into(), json!(name));
        }
        m
    }
}

/// The query a page is rendered with (the chat page's `lanlan_name`).
#[derive(Deserialize, Default)]
struct PageQuery {
    lanlan_name: Option<String>,
}

/// The page routes (pages, not operations: not in `/openapi.json`).
pub fn router(root: PathBuf) -> Router<AppState> {
    let pages = Arc::new(Pages::new(root));
    let mut r = Router::new();
    for (path, file, ctx) in PAGES {
        let p = pages.clone();
        let (file, ctx) = (*file, *ctx);
        r = r.route(
            path,
            get(move |RawQuery(q): RawQuery| async move {
                let c = p.context(ctx, q.as_deref());
                let p2 = p.clone();
                tokio::task::spawn_blocking(move || p2.render(file, c))
                    .await
                    .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
            }),
        );
    }
    let p = pages.clone();
    r.route(
        "/chara_manager",
        get(|RawQuery(q): RawQuery| async move {
            let mut url = "/character_card_manager".to_string();
            if let Some(q) = q.filter(|q| !q.is_empty()) {
                url.push('?');
                url.push_str(&q);
            }
            (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, url)]).into_response()
        }),
    )
    .route(
        "/{lanlan_name}",
        get(
            move |State(_st): State<AppState>, UrlPath(_n): UrlPath<String>| async move {
                let c = p.context(INDEX, None);
                let p2 = p.clone();
                tokio::task::spawn_blocking(move || p2.render("index.html", c))
                    .await
                    .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
            },
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query() {
        let name = |q| {
            parse_query::<PageQuery>(Some(q))
                .ok()
                .and_then(|p| p.lanlan_name)
        };
        assert_eq!(name("a=1&lanlan_name=%E7%8C%AB+x").as_deref(), Some("猫 x"));
        assert_eq!(name("lanlan_name=%zz%").as_deref(), Some("%zz%"));
        assert_eq!(name(""), None);
    }
}
