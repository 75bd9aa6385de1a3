//! The legacy HTTP+SSE client transport of MCP (protocol revision 2024-11-05),
//! for servers that do not speak Streamable HTTP yet.
//!
//! Written here because `rmcp` 3 no longer ships an SSE client transport (only
//! the Streamable HTTP one): this is rmcp's [`Transport`] implemented over
//! reqwest, with `sse-stream` (the event-stream parser rmcp itself uses) for
//! the event lines.
//!
//! The protocol: a GET of the URL opens an event stream whose first event is
//! `endpoint`; its data is the URL to POST JSON-RPC messages to (relative to the
//! stream's URL; one on another origin is refused). Each message the client
//! sends is one POST there (answered 202 Accepted); the server's responses,
//! requests and notifications come back as `message` events on the stream.
//!
//! How a server configured with only `url` gets here ([`legacy_sign`]): the
//! spec's backwards-compatibility rule. The client POSTs `initialize` to the
//! URL; a 4xx answer (400, 404, 405 ...) means "not a Streamable HTTP server",
//! and the client then GETs the URL expecting the event stream.
//!
//! Every byte from the network is checked: an event longer than
//! [`MAX_EVENT_BYTES`], a malformed line, a message that is not JSON-RPC or
//! the end of the stream ends the connection, with the reason kept in the
//! [`EndSlot`] the supervisor reads for `last_error`.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use reqwest013::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest013::StatusCode;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use serde_json::{json, Value};
use sse_stream::{Sse, SseStream};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::client::chain;

/// Longest event read from the stream (its field bytes together, as rmcp's
/// limit of a Streamable HTTP event); a longer one ends the connection.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;
/// Bytes of a POST's answer read (the rest is dropped).
const MAX_POST_ANSWER: usize = 64 * 1024;
/// Characters of a bad event, endpoint or answer quoted in an error.
const QUOTE_CHARS: usize = 120;
/// Messages read ahead of the service.
const QUEUE: usize = 64;

/// Why the SSE stream of a connection ended, for the supervisor's `last_error`.
pub type EndSlot = Arc<Mutex<Option<String>>>;

/// An error of the SSE transport (a sentence for `last_error`).
#[derive(Debug)]
pub struct SseError(pub String);

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SseError {}

fn quote(s: &str) -> String {
    let mut q: String = s.chars().take(QUOTE_CHARS).collect();
    if s.chars().nth(QUOTE_CHARS).is_some() {
        q.push_str("...");
    }
    format!("{q:?}")
}

/// Does this answer to the `initialize` POST mean "speak the legacy transport"?
/// A 4xx other than the ones about authentication or load (401, 403, 407, 408,
/// 429: those are the server's real answer, reported as they are).
pub fn is_legacy_sign(status: StatusCode) -> bool {
    status.is_client_error()
        && !matches!(
            status,
            StatusCode::UNAUTHORIZED
                | StatusCode::FORBIDDEN
                | StatusCode::PROXY_AUTHENTICATION_REQUIRED
                | StatusCode::REQUEST_TIMEOUT
                | StatusCode::TOO_MANY_REQUESTS
        )
}

/// The spec's probe: POST an `initialize` to `url`; `Some(status)` when the
/// answer is a 4xx that sends the client to the legacy transport
/// ([`is_legacy_sign`]), `None` for any other answer or no answer.
pub async fn legacy_sign(
    client: &reqwest013::Client,
    url: &url::Url,
    headers: &HeaderMap,
    timeout: Duration,
) -> Option<StatusCode> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "companiond", "version": env!("CARGO_PKG_VERSION")},
        },
    });
    let resp = client
        .post(url.clone())
        .headers(headers.clone())
        .header(ACCEPT, "application/json, text/event-stream")
        .header(CONTENT_TYPE, "application/json")
        .timeout(timeout)
        .body(body.to_string())
        .send()
        .await
        .ok()?;
    let status = resp.status();
    // Its answer is not read: dropping it ends the request (and any stream).
    is_legacy_sign(status).then_some(status)
}

/// `data` of the `endpoint` event, resolved against the stream's URL; refused
/// unless it is on the same origin (scheme, host, port) as `stream`.
pub fn resolve_endpoint(stream: &url::Url, data: &str) -> Result<url::Url, String> {
    let data = data.trim();
    if data.is_empty() {
        return Err("the endpoint event is empty".into());
    }
    let endpoint = stream
        .join(data)
        .map_err(|e| format!("the endpoint event is not a URL ({e}): {}", quote(data)))?;
    if endpoint.origin() != stream.origin() {
        return Err(format!(
            "the endpoint event names {} on another origin than {}: refused",
            quote(endpoint.as_str()),
            stream.origin().ascii_serialization()
        ));
    }
    Ok(endpoint)
}

/// Counts the bytes of the event being read (line ends not counted) so that a
/// server cannot grow one event, or one endless line, past [`MAX_EVENT_BYTES`].
#[derive(Debug)]
struct EventCap {
    /// Bytes of the current event so far.
    event: usize,
    /// The last byte ended a line (or nothing was read yet).
    line_start: bool,
    /// The last byte was a CR (a following LF belongs to the same line end).
    after_cr: bool,
}

impl Default for EventCap {
    fn default() -> EventCap {
        EventCap {
            event: 0,
            line_start: true,
            after_cr: false,
        }
    }
}

impl EventCap {
    fn feed(&mut self, chunk: &[u8]) -> Result<(), String> {
        for &b in chunk {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\r' | b'\n' => {
                    if self.line_start {
                        // A blank line: the event ends.
                        self.event = 0;
                    }
                    self.line_start = true;
                    self.after_cr = b == b'\r';
                }
                _ => {
                    self.line_start = false;
                    self.after_cr = false;
                    self.event += 1;
                    if self.event > MAX_EVENT_BYTES {
                        return Err(format!(
                            "the server sent an SSE event over {} MiB",
                            MAX_EVENT_BYTES / (1024 * 1024)
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The events of a response body, each error a sentence.
pub fn events<S, E>(body: S) -> BoxStream<'static, Result<Sse, String>>
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let mut cap = EventCap::default();
    let checked = body.map(move |r| match r {
        Ok(chunk) => cap.feed(&chunk).map(|()| chunk).map_err(SseError),
        Err(e) => Err(SseError(format!(
            "reading the SSE stream failed: {}",
            chain(&e)
        ))),
    });
    SseStream::from_bytes_stream(checked)
        .map(|r| {
            r.map_err(|e| match e {
                sse_stream::Error::Body(b) => b.to_string(),
                other => format!("the SSE stream is malformed ({other})"),
            })
        })
        .boxed()
}

/// The JSON-RPC message(s) of one `message` event (a batch is an array).
fn messages(data: &str) -> Result<Vec<ServerJsonRpcMessage>, String> {
    let bad = |e: serde_json::Error| {
        format!(
            "the server sent a message that is not JSON-RPC ({e}): {}",
            quote(data)
        )
    };
    if data.trim_start().starts_with('[') {
        let batch: Vec<Value> = serde_json::from_str(data).map_err(bad)?;
        batch
            .into_iter()
            .map(|v| serde_json::from_value(v).map_err(bad))
            .collect()
    } else {
        serde_json::from_str(data).map(|m| vec![m]).map_err(bad)
    }
}

/// Reads the stream after the `endpoint` event; returns why it ended.
async fn pump(
    mut events: BoxStream<'static, Result<Sse, String>>,
    tx: &mpsc::Sender<ServerJsonRpcMessage>,
) -> String {
    loop {
        let ev = match events.next().await {
            None => return "the server closed the SSE stream".into(),
            Some(Err(e)) => return e,
            Some(Ok(ev)) => ev,
        };
        match ev.event.as_deref() {
            None | Some("message") => {
                let Some(data) = ev.data else { continue };
                match messages(&data) {
                    Ok(ms) => {
                        for m in ms {
                            if tx.send(m).await.is_err() {
                                return "the connection was closed".into();
                            }
                        }
                    }
                    Err(e) => return e,
                }
            }
            // A repeated endpoint or an event of another kind: not for MCP.
            Some(other) => tracing::debug!("SSE event {other:?} ignored"),
        }
    }
}

/// The client side of one HTTP+SSE connection.
pub struct SseTransport {
    client: reqwest013::Client,
    endpoint: url::Url,
    headers: HeaderMap,
    post_timeout: Duration,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    stop: CancellationToken,
    /// Ends the reader task (and with it the GET) when the transport goes.
    _reader: DropGuard,
}

impl SseTransport {
    /// GET `url` (with `headers`), wait up to `wait` for the `endpoint` event,
    /// and start reading the stream. `ended` receives the reason the stream ends.
    pub async fn connect(
        client: reqwest013::Client,
        url: &url::Url,
        headers: HeaderMap,
        wait: Duration,
        post_timeout: Duration,
        ended: EndSlot,
    ) -> Result<SseTransport, String> {
        let opened = tokio::time::timeout(wait, open(&client, url, &headers)).await;
        let (events, endpoint) = match opened {
            Ok(r) => r?,
            Err(_) => {
                return Err(format!(
                    "no endpoint event on the SSE stream of {url} within {} s",
                    crate::client::trim_float(wait.as_secs_f64())
                ))
            }
        };
        let (tx, incoming) = mpsc::channel(QUEUE);
        let stop = CancellationToken::new();
        let reader_stop = stop.clone();
        tokio::spawn(async move {
            let why = tokio::select! {
                why = pump(events, &tx) => why,
                _ = reader_stop.cancelled() => return,
            };
            *ended.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
            // Only now the service sees the end (after the reason is kept).
            drop(tx);
        });
        Ok(SseTransport {
            client,
            endpoint,
            headers,
            post_timeout,
            incoming,
            _reader: stop.clone().drop_guard(),
            stop,
        })
    }
}

/// The GET and the wait for the `endpoint` event.
async fn open(
    client: &reqwest013::Client,
    url: &url::Url,
    headers: &HeaderMap,
) -> Result<(BoxStream<'static, Result<Sse, String>>, url::Url), String> {
    let resp = client
        .get(url.clone())
        .headers(headers.clone())
        .header(ACCEPT, HeaderValue::from_static("text/event-stream"))
        .send()
        .await
        .map_err(|e| format!("GET {url}: {}", chain(&e)))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("GET {url} answered HTTP {status}"));
    }
    let media = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let is_stream = media
        .split(';')
        .next()
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"));
    if !is_stream {
        return Err(format!(
            "GET {url} answered {} instead of an event stream",
            if media.is_empty() {
                "no content type".to_string()
            } else {
                quote(&media)
            }
        ));
    }
    // Relative to where the stream is (after a same-origin redirect).
    let base = resp.url().clone();
    let mut events = events(resp.bytes_stream());
    loop {
        let ev = match events.next().await {
            None => return Err("the SSE stream ended before the endpoint event".into()),
            Some(Err(e)) => return Err(e),
            Some(Ok(ev)) => ev,
        };
        match ev.event.as_deref() {
            Some("endpoint") => {
                let endpoint = resolve_endpoint(&base, ev.data.as_deref().unwrap_or(""))?;
                if endpoint.origin() != url.origin() {
                    return Err(format!(
                        "the endpoint is on another origin than {url}: refused"
                    ));
                }
                return Ok((events, endpoint));
            }
            // A lone `retry:` or `id:` carries no event.
            None if ev.data.is_none() => continue,
            Some(name) => {
                return Err(format!(
                    "the first SSE event was {} instead of endpoint",
                    quote(name)
                ))
            }
            None => return Err("the first SSE event was a message instead of endpoint".into()),
        }
    }
}

/// Up to `max` bytes of a body, as text.
async fn read_prefix(mut resp: reqwest013::Response, max: usize) -> String {
    let mut out = Vec::new();
    while out.len() < max {
        match resp.chunk().await {
            Ok(Some(c)) => out.extend_from_slice(&c[..c.len().min(max - out.len())]),
            Ok(None) | Err(_) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let request = serde_json::to_vec(&item).map(|body| {
            self.client
                .post(self.endpoint.clone())
                .headers(self.headers.clone())
                .header(CONTENT_TYPE, "application/json")
                .timeout(self.post_timeout)
                .body(body)
        });
        let path = self.endpoint.path().to_string();
        async move {
            let request =
                request.map_err(|e| SseError(format!("cannot encode the message: {e}")))?;
            let resp = request
                .send()
                .await
                .map_err(|e| SseError(format!("POST {path}: {}", chain(&e))))?;
            let status = resp.status();
            let answer = read_prefix(resp, MAX_POST_ANSWER).await;
            if status.is_success() {
                Ok(())
            } else {
                Err(SseError(format!(
                    "POST {path} answered HTTP {status}: {}",
                    quote(answer.trim())
                )))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), SseError> {
        self.stop.cancel();
        self.incoming.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> url::Url {
        url::Url::parse(s).expect("a test URL")
    }

    async fn collect(chunks: Vec<&'static [u8]>) -> Vec<Result<Sse, String>> {
        let body = futures::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, std::io::Error>(Bytes::from_static(c))),
        );
        events(body).collect().await
    }

    #[test]
    fn endpoint_is_resolved_on_the_same_origin_only() {
        let base = url("http://127.0.0.1:8000/sse");
        assert_eq!(
            resolve_endpoint(&base, "/messages/?session_id=ab12")
                .map(|u| u.to_string())
                .as_deref(),
            Ok("http://127.0.0.1:8000/messages/?session_id=ab12")
        );
        assert_eq!(
            resolve_endpoint(&base, " messages?x=1\n")
                .map(|u| u.to_string())
                .as_deref(),
            Ok("http://127.0.0.1:8000/messages?x=1")
        );
        assert!(resolve_endpoint(&base, "http://127.0.0.1:8000/m").is_ok());
        for other in [
            "http://evil.example/m",
            "//evil.example/m",
            "https://127.0.0.1:8000/m",
            "http://127.0.0.1:8001/m",
            "http://localhost:8000/m",
            "file:///etc/passwd",
            "javascript:alert(1)",
        ] {
            let e = resolve_endpoint(&base, other).expect_err(other);
            assert!(e.contains("another origin"), "{other}: {e}");
        }
        assert!(resolve_endpoint(&base, "  ").is_err());
    }

    #[test]
    fn legacy_sign_is_a_4xx_that_is_not_about_auth_or_load() {
        for s in [400, 404, 405, 406, 415] {
            assert!(
                is_legacy_sign(StatusCode::from_u16(s).expect("status")),
                "{s}"
            );
        }
        for s in [200, 202, 301, 401, 403, 407, 408, 429, 500, 502] {
            assert!(
                !is_legacy_sign(StatusCode::from_u16(s).expect("status")),
                "{s}"
            );
        }
    }

    #[tokio::test]
    async fn events_are_parsed_across_chunks() {
        let got = collect(vec![
            b"event: endpoint\r\ndata: /messages/?s=1\r\n\r\n: keep-alive\n\nevent: mes",
            b"sage\ndata: {\"jsonrpc\":\"2.0\",",
            b"\"id\":1,\"result\":{}}\n\n",
        ])
        .await;
        let got: Vec<Sse> = got.into_iter().map(|r| r.expect("an event")).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].event.as_deref(), Some("endpoint"));
        assert_eq!(got[0].data.as_deref(), Some("/messages/?s=1"));
        assert_eq!(got[1].event.as_deref(), Some("message"));
        let ms = messages(got[1].data.as_deref().unwrap_or("")).expect("JSON-RPC");
        assert_eq!(ms.len(), 1);
    }

    #[tokio::test]
    async fn garbage_is_an_error_not_a_panic() {
        let got = collect(vec![b"this is not an event stream\n\n"]).await;
        assert!(
            matches!(&got[0], Err(e) if e.contains("malformed")),
            "{got:?}"
        );
        let got = collect(vec![b"data: \xff\xfe\n\n"]).await;
        assert!(
            matches!(&got[0], Err(e) if e.contains("malformed")),
            "{got:?}"
        );
        let e = messages("{\"not\": \"json-rpc\"}").expect_err("not JSON-RPC");
        assert!(e.contains("not JSON-RPC"), "{e}");
        assert!(messages("[1, 2]").is_err());
        assert!(messages("{oops").is_err());
    }

    #[test]
    fn an_endless_event_is_cut() {
        let mut cap = EventCap::default();
        let line = vec![b'a'; 1024 * 1024];
        for _ in 0..16 {
            assert!(cap.feed(&line).is_ok());
        }
        assert!(cap.feed(b"a").is_err());
        // Blank lines (LF, CRLF, CR) end an event and reset the count.
        for end in [&b"\n\n"[..], b"\r\n\r\n", b"\r\r"] {
            let mut cap = EventCap::default();
            for _ in 0..32 {
                assert!(cap.feed(b"data: ").is_ok());
                assert!(cap.feed(&line[..1024 * 1024 - 8]).is_ok());
                assert!(cap.feed(end).is_ok());
            }
        }
        // Many lines of one event count together.
        let mut cap = EventCap::default();
        let mut failed = false;
        for _ in 0..20 {
            failed |= cap.feed(&line).is_err() || cap.feed(b"\n").is_err();
        }
        assert!(failed);
    }

    #[tokio::test]
    async fn a_body_error_is_reported() {
        let body = futures::stream::iter(vec![
            Ok(Bytes::from_static(b"data: {}\n")),
            Err(std::io::Error::other("connection reset")),
        ]);
        let got: Vec<_> = events(body).collect().await;
        assert!(
            got.iter()
                .any(|r| matches!(r, Err(e) if e.contains("connection reset"))),
            "{got:?}"
        );
    }
}
