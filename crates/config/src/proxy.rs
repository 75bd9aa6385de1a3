//! Proxy mode: `direct:true` snapshots and removes the proxy variables of this
//! process and sets `NO_PROXY=*`; `direct:false` restores the snapshot. Only this
//! process is affected; outbound clients built afterwards (the probes of this
//! family) follow the new environment.

use std::sync::Mutex;

use serde_json::{Map, Value};
use url::Url;

/// Proxy variables removed in direct mode.
pub const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];
/// Variables set to `*` in direct mode.
pub const NO_PROXY_VARS: &[&str] = &["NO_PROXY", "no_proxy"];

type Snapshot = Vec<(&'static str, Option<String>)>;

/// The snapshot taken by the first `direct:true` (process-wide; the lock also
/// serialises every change of the environment made here).
static SNAPSHOT: Mutex<Option<Snapshot>> = Mutex::new(None);

/// Switch the mode; returns the proxies in force afterwards.
pub fn set_direct(direct: bool) -> Map<String, Value> {
    let mut snap = SNAPSHOT.lock().unwrap_or_else(|e| e.into_inner());
    if direct {
        if snap.is_none() {
            *snap = Some(
                PROXY_VARS
                    .iter()
                    .chain(NO_PROXY_VARS)
                    .map(|k| (*k, std::env::var(k).ok()))
                    .collect(),
            );
        }
        for k in PROXY_VARS {
            std::env::remove_var(k);
        }
        for k in NO_PROXY_VARS {
            std::env::set_var(k, "*");
        }
    } else if let Some(saved) = snap.take() {
        for (k, v) in saved {
            match v {
                Some(v) => std::env::set_var(k, v),
                None => std::env::remove_var(k),
            }
        }
    }
    proxies()
}

/// Remove `user:password@` from a proxy URL; an unparsable value containing `@`
/// is redacted.
pub fn strip_credentials(v: &str) -> String {
    match Url::parse(v) {
        Ok(mut u) if u.has_host() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        _ if v.contains('@') => "<redacted>".to_string(),
        _ => v.to_string(),
    }
}

/// The proxies of the environment as `{scheme: url}` (like Python's
/// `urllib.request.getproxies()`), credentials removed; lower-case variables win.
pub fn proxies() -> Map<String, Value> {
    let mut upper = Map::new();
    let mut lower = Map::new();
    for (k, v) in std::env::vars() {
        let lk = k.to_ascii_lowercase();
        let Some(scheme) = lk.strip_suffix("_proxy") else {
            continue;
        };
        if scheme.is_empty() || v.is_empty() {
            continue;
        }
        let value = if scheme == "no" {
            v
        } else {
            strip_credentials(&v)
        };
        if k == lk {
            lower.insert(scheme.to_string(), Value::String(value));
        } else {
            upper.insert(scheme.to_string(), Value::String(value));
        }
    }
    for (k, v) in lower {
        upper.insert(k, v);
    }
    upper
}
