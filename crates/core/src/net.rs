//! Outbound HTTP clients.
//!
//! The proxy of [`remote_client`] is looked up in the environment on every
//! request (`HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY`, upper or lower case,
//! minus `NO_PROXY`), so `POST /api/config/set_proxy_mode` takes effect at once
//! for every family. Loopback destinations never use a proxy.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

fn env_any(names: &[&str]) -> Option<String> {
    names
        .iter()
        .find_map(|n| std::env::var(n).ok())
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Is this address loopback (IPv4-mapped loopback included)?
pub fn is_loopback(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => v4.is_loopback(),
        std::net::IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Is `host` excluded from proxying by a `NO_PROXY` list?
pub fn no_proxy_matches(no_proxy: &str, host: &str) -> bool {
    let host = host.trim_matches(['[', ']']).to_ascii_lowercase();
    no_proxy
        .split(',')
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty())
        .any(|e| {
            if e == "*" {
                return true;
            }
            let e = e.trim_start_matches("*.").trim_start_matches('.');
            let e = e.split(':').next().unwrap_or(e);
            host == e || host.ends_with(&format!(".{e}"))
        })
}

fn is_loopback_host(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => is_loopback(std::net::IpAddr::V6(ip)),
        None => false,
    }
}

/// The proxy for `url` according to the current environment.
pub fn proxy_for(url: &url::Url) -> Option<url::Url> {
    if is_loopback_host(url) {
        return None;
    }
    if let (Some(np), Some(host)) = (env_any(&["NO_PROXY", "no_proxy"]), url.host_str()) {
        if no_proxy_matches(&np, host) {
            return None;
        }
    }
    let specific = if url.scheme() == "https" {
        env_any(&["HTTPS_PROXY", "https_proxy"])
    } else {
        env_any(&["HTTP_PROXY", "http_proxy"])
    };
    let raw = specific.or_else(|| env_any(&["ALL_PROXY", "all_proxy"]))?;
    let raw = if raw.contains("://") {
        raw
    } else {
        format!("http://{raw}")
    };
    url::Url::parse(&raw).ok()
}

/// A client built on first use (building one loads the TLS root certificates,
/// which start-up should not pay for). Cheap to clone; derefs to the client.
#[derive(Clone)]
pub struct LazyClient {
    cell: Arc<OnceLock<reqwest::Client>>,
    build: fn() -> Result<reqwest::Client, String>,
}

impl LazyClient {
    pub fn new(build: fn() -> Result<reqwest::Client, String>) -> Self {
        LazyClient {
            cell: Arc::default(),
            build,
        }
    }
}

impl std::ops::Deref for LazyClient {
    type Target = reqwest::Client;
    fn deref(&self) -> &reqwest::Client {
        self.cell.get_or_init(|| match (self.build)() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("{e}; falling back to a default HTTP client");
                reqwest::Client::default()
            }
        })
    }
}

/// The client for remote services: proxy from the environment at request time.
pub fn remote_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .proxy(reqwest::Proxy::custom(proxy_for))
        .connect_timeout(Duration::from_secs(10))
        .http1_title_case_headers()
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// The client for loopback services (local models, plugin callbacks): never a proxy.
pub fn local_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(5))
        .http1_title_case_headers()
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proxy_lists() {
        assert!(no_proxy_matches("*", "example.com"));
        assert!(no_proxy_matches("example.com", "api.example.com"));
        assert!(no_proxy_matches(".example.com, other", "api.example.com"));
        assert!(no_proxy_matches("example.com:443", "example.com"));
        assert!(!no_proxy_matches("example.com", "badexample.com"));
        assert!(!no_proxy_matches("", "example.com"));
    }

    #[test]
    fn loopback_never_proxied() {
        assert!(proxy_for(&url::Url::parse("http://127.0.0.1:9/x").unwrap()).is_none());
        assert!(proxy_for(&url::Url::parse("http://localhost/x").unwrap()).is_none());
        assert!(proxy_for(&url::Url::parse("http://[::1]/x").unwrap()).is_none());
    }
}
