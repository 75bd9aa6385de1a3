//! Which `Host` names and `Origin`s this server answers: loopback literals
//! (127.0.0.0/8, `[::1]`), `localhost` (any case, optional trailing dot), the host
//! of `--listen` and every `--allowed-host`; any port. The front door and the
//! CSRF guard (`http::front`, `http::guards`) apply it to requests; see
//! docs/security.md.

use std::net::{IpAddr, SocketAddr};

use crate::options::Options;

/// Which `Host` names and `Origin`s this server answers.
#[derive(Clone, Debug, Default)]
pub struct HostPolicy {
    /// Extra names (lowercase, no trailing dot): the `--listen` host and `--allowed-host`s.
    names: Vec<String>,
}

impl HostPolicy {
    /// The policy of these options: loopback, `localhost`, the `--listen` host and
    /// every `--allowed-host`.
    pub fn from_options(opts: &Options) -> HostPolicy {
        let mut names: Vec<String> = opts
            .allowed_hosts
            .iter()
            .map(|h| normalize_name(h))
            .collect();
        if let Some(h) = listen_host(&opts.listen) {
            names.push(h);
        }
        names.retain(|n| !n.is_empty());
        names.sort();
        names.dedup();
        HostPolicy { names }
    }

    /// Is `host` (a bare host name or IP literal, IPv6 with or without brackets) allowed?
    pub fn name_allowed(&self, host: &str) -> bool {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            if crate::net::is_loopback(ip) {
                return true;
            }
        }
        let name = normalize_name(bare);
        name == "localhost" || self.names.contains(&name)
    }

    /// Is `origin` (an `Origin` value or a `Referer` URL) one of ours: http(s) on
    /// an allowed host, any port?
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let Ok(u) = url::Url::parse(origin.trim()) else {
            return false;
        };
        if !matches!(u.scheme(), "http" | "https") {
            return false;
        }
        match u.host() {
            Some(url::Host::Domain(d)) => self.name_allowed(d),
            Some(url::Host::Ipv4(ip)) => self.name_allowed(&ip.to_string()),
            Some(url::Host::Ipv6(ip)) => self.name_allowed(&ip.to_string()),
            None => false,
        }
    }
}

/// Lowercase, trimmed, one trailing dot dropped (`LocalHost.` → `localhost`).
fn normalize_name(name: &str) -> String {
    let n = name.trim().to_ascii_lowercase();
    n.strip_suffix('.').map(str::to_string).unwrap_or(n)
}

/// The host part of a `--listen` value (`host:port`, `[v6]:port`), unless it is
/// the unspecified address (which no `Host` header names).
fn listen_host(listen: &str) -> Option<String> {
    let host = if let Ok(sa) = listen.parse::<SocketAddr>() {
        if sa.ip().is_unspecified() {
            return None;
        }
        sa.ip().to_string()
    } else {
        listen
            .rsplit_once(':')
            .map(|(h, _)| h)
            .unwrap_or(listen)
            .to_string()
    };
    Some(normalize_name(
        host.trim_start_matches('[').trim_end_matches(']'),
    ))
}
