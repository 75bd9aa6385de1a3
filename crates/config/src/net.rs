//! Outbound HTTP and WebSocket helpers of the probes: bounded timeouts, capped
//! bodies, HTTP(S)/WS(S) only, and a classification of network failures.

use std::time::Duration;

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::WebSocketStream;
use url::{Host, Url};

use crate::error::ConfigError;

/// A byte stream a WebSocket runs over (TCP or TLS over TCP).
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A client WebSocket.
pub type Ws = WebSocketStream<Box<dyn Io>>;

/// Largest response body a probe reads.
pub const MAX_PROBE_BODY: usize = 8 * 1024 * 1024;

/// Why an outbound call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum NetFail {
    Timeout,
    Dns(String),
    Refused(String),
    Tls(String),
    /// The peer answered with this HTTP status (WebSocket handshake or HTTP call).
    Status(u16),
    Unsupported(String),
    Other(String),
}

impl NetFail {
    /// The `error_code` of the connectivity and model-list probes.
    pub fn code(&self) -> &'static str {
        match self {
            NetFail::Timeout => "timeout",
            NetFail::Dns(_) => "dns_error",
            NetFail::Refused(_) => "connection_refused",
            NetFail::Tls(_) => "ssl_error",
            NetFail::Status(401 | 403) => "auth_failed",
            NetFail::Status(429) => "rate_limited",
            NetFail::Status(_) => "unknown",
            NetFail::Unsupported(_) => "unsupported",
            NetFail::Other(_) => "unknown",
        }
    }
    pub fn message(&self) -> String {
        match self {
            NetFail::Timeout => "the request timed out".into(),
            NetFail::Dns(e) => format!("the host name could not be resolved: {e}"),
            NetFail::Refused(e) => format!("cannot connect to the server: {e}"),
            NetFail::Tls(e) => format!("TLS certificate verification failed: {e}"),
            NetFail::Status(401 | 403) => "the API key is invalid or expired".into(),
            NetFail::Status(429) => "the provider is rate limiting requests".into(),
            NetFail::Status(s) => format!("HTTP {s}"),
            NetFail::Unsupported(e) | NetFail::Other(e) => e.clone(),
        }
    }
    /// As a probe failure (HTTP 200, `success:false`).
    pub fn probe(self) -> ConfigError {
        ConfigError::probe(self.code(), self.message())
    }
}

/// The timeout to use: the request's `timeout_seconds` when it is a positive number
/// no larger than `default`, else `default`.
pub fn pick_timeout(requested: Option<f64>, default: Duration) -> Duration {
    match requested {
        // Clamped as a float first: `Duration::from_secs_f64` panics on overflow.
        Some(s) if s.is_finite() && s > 0.0 => {
            Duration::from_secs_f64(s.clamp(0.05, default.as_secs_f64().max(0.05)))
        }
        _ => default,
    }
}

/// Is the URL's host a loopback name or address?
pub fn is_loopback_host(u: &Url) -> bool {
    match u.host() {
        Some(Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        None => false,
    }
}

/// An absolute URL with one of `schemes` and a host.
pub fn parse_url(s: &str, schemes: &[&str]) -> Option<Url> {
    let u = Url::parse(s.trim()).ok()?;
    if !schemes.contains(&u.scheme()) {
        return None;
    }
    u.host_str().filter(|h| !h.is_empty())?;
    Some(u)
}

/// Do two base URLs name the same endpoint (scheme, host, port, path without the
/// trailing slash, query)?
pub fn same_endpoint(a: &str, b: &str) -> bool {
    match (Url::parse(a.trim()), Url::parse(b.trim())) {
        (Ok(x), Ok(y)) => {
            x.scheme() == y.scheme()
                && x.host_str().map(str::to_ascii_lowercase)
                    == y.host_str().map(str::to_ascii_lowercase)
                && x.port_or_known_default() == y.port_or_known_default()
                && x.path().trim_end_matches('/') == y.path().trim_end_matches('/')
                && x.query() == y.query()
        }
        _ => false,
    }
}

/// `<base>/<tail>` without doubling the slash.
pub fn join(base: &str, tail: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        tail.trim_start_matches('/')
    )
}

/// A client for one probe: total timeout, no redirects (a key is never sent on to
/// another host), and no proxy for loopback hosts. Proxy variables are read when
/// the client is built, so `set_proxy_mode` applies to the next probe.
pub fn http_client(u: &Url, timeout: Duration) -> Result<reqwest::Client, NetFail> {
    let mut b = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .redirect(reqwest::redirect::Policy::none());
    if is_loopback_host(u) {
        b = b.no_proxy();
    }
    b.build().map_err(|e| NetFail::Other(e.to_string()))
}

use companiond_core::error_chain as chain_text;

fn classify_text(text: String) -> NetFail {
    let lower = text.to_ascii_lowercase();
    if lower.contains("dns")
        || lower.contains("lookup")
        || lower.contains("name or service not known")
        || lower.contains("no address")
        || lower.contains("nodename")
    {
        NetFail::Dns(text)
    } else if lower.contains("certificate") || lower.contains("tls") || lower.contains("ssl") {
        NetFail::Tls(text)
    } else if lower.contains("refused")
        || lower.contains("connect")
        || lower.contains("unreachable")
        || lower.contains("reset")
    {
        NetFail::Refused(text)
    } else {
        NetFail::Other(text)
    }
}

/// Classify a reqwest failure.
pub fn classify(e: &reqwest::Error) -> NetFail {
    if e.is_timeout() {
        return NetFail::Timeout;
    }
    let text = chain_text(e);
    if e.is_connect() {
        return match classify_text(text.clone()) {
            NetFail::Other(_) => NetFail::Refused(text),
            f => f,
        };
    }
    classify_text(text)
}

/// Send `req` and read the whole body (at most `cap` bytes) within `timeout`.
pub async fn send_capped(
    req: reqwest::RequestBuilder,
    cap: usize,
    timeout: Duration,
) -> Result<(u16, Vec<u8>), NetFail> {
    let fut = async {
        let mut resp = req.send().await.map_err(|e| classify(&e))?;
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| classify(&e))? {
            if body.len() + chunk.len() > cap {
                return Err(NetFail::Other(format!(
                    "the response is larger than {cap} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, body))
    };
    match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(NetFail::Timeout),
    }
}

/// Open the byte stream of a WebSocket: TCP, plus TLS (webpki roots) for `wss://`.
async fn open_stream(url: &Url) -> Result<Box<dyn Io>, NetFail> {
    let host = match url.host() {
        Some(Host::Domain(d)) => d.to_string(),
        Some(Host::Ipv4(ip)) => ip.to_string(),
        Some(Host::Ipv6(ip)) => ip.to_string(),
        None => return Err(NetFail::Other("the URL has no host".into())),
    };
    let port = url
        .port_or_known_default()
        .ok_or_else(|| NetFail::Other("the URL has no port".into()))?;
    let tcp = TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| match classify_text(chain_text(&e)) {
            NetFail::Other(t) => NetFail::Refused(t),
            f => f,
        })?;
    if url.scheme() != "wss" {
        return Ok(Box::new(tcp));
    }
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| NetFail::Tls(e.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name =
        rustls::pki_types::ServerName::try_from(host).map_err(|e| NetFail::Tls(e.to_string()))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| NetFail::Tls(chain_text(&e)))?;
    Ok(Box::new(tls))
}

/// Open a WebSocket (`ws://` or `wss://`) within `timeout`, with an optional bearer key.
pub async fn ws_connect(url: &Url, bearer: Option<&str>, timeout: Duration) -> Result<Ws, NetFail> {
    if !matches!(url.scheme(), "ws" | "wss") {
        return Err(NetFail::Unsupported(format!(
            "not a WebSocket URL: {}",
            url.scheme()
        )));
    }
    let mut req = url
        .as_str()
        .into_client_request()
        .map_err(|e| NetFail::Other(e.to_string()))?;
    if let Some(k) = bearer.filter(|k| !k.is_empty()) {
        let v = format!("Bearer {k}")
            .parse()
            .map_err(|_| NetFail::Other("the API key is not a valid header value".into()))?;
        req.headers_mut().insert("Authorization", v);
    }
    let cfg = tungstenite::protocol::WebSocketConfig {
        max_frame_size: Some(10 * 1024 * 1024),
        max_message_size: Some(16 * 1024 * 1024),
        ..Default::default()
    };
    let fut = async {
        let stream = open_stream(url).await?;
        tokio_tungstenite::client_async_with_config(req, stream, Some(cfg))
            .await
            .map(|(ws, _)| ws)
            .map_err(classify_ws)
    };
    match tokio::time::timeout(timeout, fut).await {
        Err(_) => Err(NetFail::Timeout),
        Ok(r) => r,
    }
}

/// Classify a WebSocket failure.
pub fn classify_ws(e: tungstenite::Error) -> NetFail {
    match e {
        tungstenite::Error::Http(resp) => NetFail::Status(resp.status().as_u16()),
        tungstenite::Error::Url(u) => NetFail::Other(u.to_string()),
        tungstenite::Error::Io(io) => classify_text(chain_text(&io)),
        tungstenite::Error::Tls(t) => NetFail::Tls(t.to_string()),
        other => NetFail::Other(other.to_string()),
    }
}
