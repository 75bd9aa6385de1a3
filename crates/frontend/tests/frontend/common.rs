//! Fixtures shared by every frontend test: a frontend folder of our own, servers
//! over it, HTTP helpers and the chat socket.

pub use std::path::{Path, PathBuf};

pub use axum::http::Method;
pub use companiond_core::testkit::{Message, Ws};
pub use companiond_core::testkit::{MockLlm, TestOptions, TestServer, CSRF};
pub use futures::{SinkExt, StreamExt};
pub use serde_json::{json, Value};

pub const FAMILIES: &[companiond_core::server::Family] =
    &[companiond_system::FAMILY, companiond_frontend::FAMILY];
/// With the config family too (page_config).
pub const WITH_CONFIG: &[companiond_core::server::Family] = &[
    companiond_system::FAMILY,
    companiond_config::FAMILY,
    companiond_frontend::FAMILY,
];

/// With the memory family too (the rename transaction behind the original
/// pages' rename route).
pub const WITH_MEMORY: &[companiond_core::server::Family] = &[
    companiond_system::FAMILY,
    companiond_memory::FAMILY,
    companiond_frontend::FAMILY,
];

pub fn front_of(bundle: &Path) -> PathBuf {
    bundle.parent().map(|p| p.join("front")).unwrap_or_default()
}

pub fn write(path: PathBuf, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A frontend folder of our own that uses the same template mechanisms as the
/// original pages: versions, `tojson`, `format`, `int`, escaping, `is defined`.
pub fn write_frontend(front: &Path) {
    write(
        front.join("templates/index.html"),
        "<html><body{% if initial_chat_surface_mode is defined and initial_chat_surface_mode %} data-mode=\"{{ initial_chat_surface_mode }}\"{% endif %}>\
         <script src=\"/static/js/app.js?v={{ static_asset_version }}\"></script>\
         <script>window.V = {{ react_chat_asset_version | tojson }}; window.L = {{ vrm_defaults | tojson }};</script></body></html>",
    );
    write(
        front.join("templates/model_manager.html"),
        "<input value=\"{{ \"%.2f\"|format(vrm_defaults.ambient) }}\"><i>{{ vrm_defaults.fill }}</i>\
         <option {{ 'selected' if vrm_defaults.toneMapping|int == 7 }}>7</option>",
    );
    write(
        front.join("templates/cloudsave_manager.html"),
        "<input id=\"lanlan_name\" value=\"{{ lanlan_name | e }}\"><b>{{ static_asset_version|default('0', true) }}</b>",
    );
    write(
        front.join("templates/memory_browser.html"),
        "<p>memory {{' + name + '}}</p>",
    );
    write(front.join("static/js/app.js"), "window.APP = 1;\n");
    write(
        front.join("static/mao/mao.model3.json"),
        r#"{"Version":3,"FileReferences":{"Moc":"mao.moc3"}}"#,
    );
    write(front.join("static/mao/motions/idle.motion3.json"), "{}");
    write(front.join("static/mao/expressions/smile.exp3.json"), "{}");
    write(front.join("static/vrm/project.vrm"), "glTF");
}

pub async fn start_front(llm: Option<&MockLlm>) -> TestServer {
    start_front_with(FAMILIES, llm).await
}

pub async fn start_front_with(
    families: &[companiond_core::server::Family],
    llm: Option<&MockLlm>,
) -> TestServer {
    let s = TestServer::start_with(
        families,
        TestOptions {
            edit: Some(Box::new(|o| o.frontend_dir = Some(front_of(&o.bundle_dir)))),
            prepare: Some(Box::new(|data, bundle| {
                write_frontend(&front_of(bundle));
                write(bundle.join("static/bundled-only.txt"), "from the bundle");
                write(
                    front_of(bundle).join("static/both.txt"),
                    "from the frontend",
                );
                write(bundle.join("static/both.txt"), "from the bundle");
                write(data.join("user_live2d/mine/mine.model3.json"), "{}");
                std::fs::create_dir_all(data.join("user_live2d/broken")).unwrap();
                write(data.join("user_vrm/avatar.vrm"), "glTF-user");
                write(data.join("user_vrm/animation/wave.vrma"), "anim");
            })),
            ..Default::default()
        },
    )
    .await;
    if let Some(llm) = llm {
        s.configure_llm(&llm.base()).await;
    }
    s
}

pub async fn text(s: &TestServer, path: &str) -> (u16, String, reqwest::header::HeaderMap) {
    let r = s.http.get(s.url(path)).send().await.unwrap();
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, r.text().await.unwrap_or_default(), headers)
}

pub async fn send_json(s: &TestServer, method: Method, path: &str, body: Value) -> (u16, Value) {
    let r = s
        .http
        .request(method, s.url(path))
        .header("Origin", format!("http://127.0.0.1:{}", s.addr.port()))
        .json(&body)
        .send()
        .await
        .unwrap();
    companiond_core::testkit::split(r).await
}

/// A multipart body with one part `name` holding `bytes` as file `file_name`.
pub fn multipart(name: &str, file_name: &str, bytes: &[u8]) -> (String, Vec<u8>) {
    let boundary = "companiondTestBoundary7d1";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{file_name}\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

pub async fn upload(
    s: &TestServer,
    path: &str,
    part: &str,
    file: &str,
    bytes: &[u8],
) -> (u16, Value) {
    let (ct, body) = multipart(part, file, bytes);
    let r = s
        .http
        .post(s.url(path))
        .header("content-type", ct)
        .body(body)
        .send()
        .await
        .unwrap();
    companiond_core::testkit::split(r).await
}

pub use companiond_core::testkit::{next_frame, quiet};

pub async fn connect(s: &TestServer, name: &str) -> Ws {
    s.ws(name).await
}

pub async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::Text(v.to_string())).await.unwrap();
}
