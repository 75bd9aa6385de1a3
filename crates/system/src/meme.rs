//! `GET /api/meme/proxy-image`: an SSRF-hardened image proxy.
//!
//! * Only `http(s)` URLs without userinfo; an optional host allow-list
//!   (env `COMPANIOND_MEME_HOSTS`, comma list, read at start-up: exact host or subdomain).
//! * IP literals (every WHATWG form: decimal, octal, hex, short) are checked with
//!   [`ip_forbidden`]; names are resolved by [`GuardedResolver`], which refuses the
//!   whole name when any address is forbidden and hands the checked addresses to the
//!   connector itself, so there is no second lookup (no DNS-rebinding window). Proxies
//!   from the environment are ignored so resolution always happens here.
//! * Redirects are followed by hand (at most [`MAX_REDIRECTS`]), every hop re-checked.
//! * Content-Type whitelist (no SVG), [`MAX_BYTES`] on the declared and the streamed length,
//!   an in-memory TTL cache with a byte budget, keyed by the raw URL.
//! * Tests reach a loopback image host only through env `COMPANIOND_MEME_TRUSTED_HOST`
//!   (`host:port`, read at start-up, off by default): that one host and port skip the
//!   address checks; every other URL is still checked, redirects from it included.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

use crate::error::{SysResult, SystemError};

pub const MAX_REDIRECTS: usize = 3;
pub const MAX_BYTES: u64 = 10 * 1024 * 1024;
pub const TIMEOUT: Duration = Duration::from_secs(15);
pub const CACHE_TTL: Duration = Duration::from_secs(1800);
pub const CACHE_BYTES: usize = 50 * 1024 * 1024;
pub const ALLOWED_TYPES: [&str; 6] = [
    "image/jpeg",
    "image/png",
    "image/gif",
    "image/webp",
    "image/avif",
    "image/bmp",
];
const USER_AGENT: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36";

// ------------------------------------------------------------------ address rules

fn v4_forbidden(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || o[0] == 0
        || (o[0] == 100 && (o[1] & 0xC0) == 64) // 100.64/10 shared address space
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
        || (o[0] == 192 && o[1] == 88 && o[2] == 99) // 6to4 relay anycast
        || (o[0] == 198 && (o[1] & 0xFE) == 18) // benchmarking
        || o[0] >= 240 // reserved
}

fn v6_forbidden(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || ip.to_ipv4_mapped().is_some() // ::ffff:a.b.c.d
        || s[..6] == [0; 6] // IPv4-compatible ::a.b.c.d
        || (s[0] & 0xFE00) == 0xFC00 // unique local
        || (s[0] & 0xFFC0) == 0xFE80 // link-local
        || (s[0] & 0xFFC0) == 0xFEC0 // site-local
        || (s[0] == 0x2001 && s[1] == 0x0DB8) // documentation
        || (s[0] == 0x2001 && s[1] == 0) // Teredo
        || (s[0] == 0x0100 && s[1..4] == [0, 0, 0]) // discard
        || (s[0] == 0x0064 && s[1] == 0xFF9B && s[2] == 1) // NAT64 local use 64:ff9b:1::/48
        || (s[0] == 0x0064 && s[1] == 0xFF9B && s[2..6] == [0; 4] && v4_forbidden(embedded(s[6], s[7])))
        || (s[0] == 0x2002 && v4_forbidden(embedded(s[1], s[2]))) // 6to4
}

/// Is this address one the proxy must never contact?
pub fn ip_forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_forbidden(v4),
        IpAddr::V6(v6) => v6_forbidden(v6),
    }
}

fn name_forbidden(host: &str) -> bool {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    h.is_empty()
        || h == "localhost"
        || h.ends_with(".localhost")
        || h == "localhost.localdomain"
        || h.ends_with(".internal")
        || h.ends_with(".local")
        || !h.contains('.')
}

/// Policy read at start-up.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// Hosts allowed (exact or subdomain); empty = any public host.
    pub allow_hosts: Vec<String>,
    /// `host:port` that skips the address rules (tests only; off by default).
    pub trusted: Option<(String, u16)>,
    /// Whole-fetch timeout (env `COMPANIOND_MEME_TIMEOUT_MS`, default [`TIMEOUT`]).
    pub timeout: Option<Duration>,
}

impl Policy {
    pub fn from_env() -> Policy {
        let allow_hosts = std::env::var("COMPANIOND_MEME_HOSTS")
            .unwrap_or_default()
            .split(',')
            .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        let trusted = std::env::var("COMPANIOND_MEME_TRUSTED_HOST")
            .ok()
            .and_then(|v| {
                let (h, p) = v.trim().rsplit_once(':')?;
                Some((
                    h.trim_matches(['[', ']']).to_ascii_lowercase(),
                    p.parse().ok()?,
                ))
            });
        let timeout = std::env::var("COMPANIOND_MEME_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|ms| (100..=120_000).contains(ms))
            .map(Duration::from_millis);
        Policy {
            allow_hosts,
            trusted,
            timeout,
        }
    }

    fn is_trusted(&self, u: &Url) -> bool {
        let (Some(host), Some(port)) = (u.host_str(), u.port_or_known_default()) else {
            return false;
        };
        self.trusted.as_ref().is_some_and(|(h, p)| {
            *p == port && h == &host.trim_matches(['[', ']']).to_ascii_lowercase()
        })
    }
}

fn forbidden(msg: impl Into<String>) -> SystemError {
    SystemError::ForbiddenTarget(msg.into())
}

/// Check one URL (the request or a redirect target) without touching the network.
pub fn check_url(raw: &str, policy: &Policy) -> SysResult<Url> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(SystemError::MissingUrl("query url is required".into()));
    }
    let lower = raw.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(SystemError::InvalidUrl(
            "only http and https URLs can be proxied".into(),
        ));
    }
    let u = Url::parse(raw).map_err(|e| SystemError::InvalidUrl(format!("invalid URL: {e}")))?;
    if !u.username().is_empty() || u.password().is_some() {
        return Err(SystemError::InvalidUrl(
            "URLs with credentials are not allowed".into(),
        ));
    }
    let host = u
        .host()
        .ok_or_else(|| SystemError::InvalidUrl("the URL has no host".into()))?;
    let host_str = match &host {
        Host::Domain(d) => d.trim_end_matches('.').to_ascii_lowercase(),
        Host::Ipv4(ip) => ip.to_string(),
        Host::Ipv6(ip) => ip.to_string(),
    };
    if !policy.allow_hosts.is_empty()
        && !policy
            .allow_hosts
            .iter()
            .any(|a| host_str == *a || host_str.ends_with(&format!(".{a}")))
    {
        return Err(forbidden(format!("host {host_str} is not allowed")));
    }
    if policy.is_trusted(&u) {
        return Ok(u);
    }
    match host {
        Host::Ipv4(ip) if v4_forbidden(ip) => {
            Err(forbidden(format!("address {ip} is not allowed")))
        }
        Host::Ipv6(ip) if v6_forbidden(ip) => {
            Err(forbidden(format!("address {ip} is not allowed")))
        }
        Host::Domain(d) if name_forbidden(d) => Err(forbidden(format!("host {d} is not allowed"))),
        _ => Ok(u),
    }
}

/// Refusal raised by [`GuardedResolver`].
#[derive(Debug)]
pub struct Refused(pub String);
impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resolves to a forbidden address", self.0)
    }
}
impl std::error::Error for Refused {}

/// Checks every resolved address; the connector uses exactly the addresses returned.
#[derive(Clone, Default)]
pub struct GuardedResolver;

/// Resolve `host` and refuse it when any address is forbidden.
pub async fn resolve_checked(
    host: &str,
) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0)).await?.collect();
    if addrs.is_empty() {
        return Err(format!("{host} resolves to nothing").into());
    }
    if addrs.iter().any(|a| ip_forbidden(a.ip())) {
        return Err(Box::new(Refused(host.to_string())));
    }
    Ok(addrs)
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs = resolve_checked(&host).await?;
            let it: Addrs = Box::new(addrs.into_iter());
            Ok(it)
        })
    }
}

fn is_refusal(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.is::<Refused>() {
            return true;
        }
        cur = err.source();
    }
    false
}

fn map_reqwest(e: reqwest::Error) -> SystemError {
    if is_refusal(&e) {
        forbidden("the host resolves to a forbidden address")
    } else if e.is_timeout() {
        SystemError::UpstreamTimeout
    } else {
        SystemError::UpstreamUnreachable(format!("cannot fetch the image: {e}"))
    }
}

// ------------------------------------------------------------------------ cache

struct Entry {
    at: Instant,
    content_type: String,
    body: Bytes,
}

#[derive(Default)]
struct Cache {
    map: HashMap<String, Entry>,
    bytes: usize,
}

impl Cache {
    fn get(&mut self, key: &str) -> Option<(String, Bytes)> {
        let fresh = self
            .map
            .get(key)
            .is_some_and(|e| e.at.elapsed() < CACHE_TTL);
        if !fresh {
            if let Some(e) = self.map.remove(key) {
                self.bytes -= e.body.len();
            }
            return None;
        }
        self.map
            .get(key)
            .map(|e| (e.content_type.clone(), e.body.clone()))
    }

    fn put(&mut self, key: String, content_type: String, body: Bytes) {
        if body.len() > CACHE_BYTES {
            return;
        }
        if let Some(old) = self.map.remove(&key) {
            self.bytes -= old.body.len();
        }
        let expired: Vec<String> = self
            .map
            .iter()
            .filter(|(_, e)| e.at.elapsed() >= CACHE_TTL)
            .map(|(k, _)| k.clone())
            .collect();
        for k in expired {
            if let Some(e) = self.map.remove(&k) {
                self.bytes -= e.body.len();
            }
        }
        while self.bytes + body.len() > CACHE_BYTES {
            let Some(oldest) = self
                .map
                .iter()
                .min_by_key(|(_, e)| e.at)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(e) = self.map.remove(&oldest) {
                self.bytes -= e.body.len();
            }
        }
        self.bytes += body.len();
        self.map.insert(
            key,
            Entry {
                at: Instant::now(),
                content_type,
                body,
            },
        );
    }
}

// ------------------------------------------------------------------------ proxy

/// A fetched image.
#[derive(Debug)]
pub struct Image {
    pub content_type: String,
    pub body: Bytes,
    pub cache_hit: bool,
}

/// The proxy: guarded client, trusted-host client, cache.
pub struct MemeProxy {
    policy: Policy,
    timeout: Duration,
    /// Built on first use (building a client loads the TLS roots).
    guarded: std::sync::OnceLock<reqwest::Client>,
    trusted: std::sync::OnceLock<reqwest::Client>,
    cache: Mutex<Cache>,
}

fn client(resolver: Option<Arc<GuardedResolver>>, timeout: Duration) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(8).min(timeout))
        .timeout(timeout)
        .user_agent(USER_AGENT);
    if let Some(r) = resolver {
        b = b.dns_resolver(r);
    }
    b.build().unwrap_or_default()
}

impl MemeProxy {
    pub fn new(policy: Policy) -> MemeProxy {
        let timeout = policy.timeout.unwrap_or(TIMEOUT);
        MemeProxy {
            policy,
            timeout,
            guarded: std::sync::OnceLock::new(),
            trusted: std::sync::OnceLock::new(),
            cache: Mutex::default(),
        }
    }

    fn guarded_client(&self) -> &reqwest::Client {
        self.guarded
            .get_or_init(|| client(Some(Arc::new(GuardedResolver)), self.timeout))
    }

    fn trusted_client(&self) -> &reqwest::Client {
        self.trusted.get_or_init(|| client(None, self.timeout))
    }

    /// Fetch `raw` (cache first).
    pub async fn fetch(&self, raw: &str) -> SysResult<Image> {
        let first = check_url(raw, &self.policy)?;
        if let Some((content_type, body)) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(raw)
        {
            return Ok(Image {
                content_type,
                body,
                cache_hit: true,
            });
        }
        let timeout = self.policy.timeout.unwrap_or(TIMEOUT);
        let (content_type, body) = tokio::time::timeout(timeout, self.fetch_hops(first))
            .await
            .map_err(|_| SystemError::UpstreamTimeout)??;
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).put(
            raw.to_string(),
            content_type.clone(),
            body.clone(),
        );
        Ok(Image {
            content_type,
            body,
            cache_hit: false,
        })
    }

    async fn fetch_hops(&self, mut url: Url) -> SysResult<(String, Bytes)> {
        for hop in 0..=MAX_REDIRECTS {
            let client = if self.policy.is_trusted(&url) {
                self.trusted_client()
            } else {
                self.guarded_client()
            };
            let referer = format!("{}://{}/", url.scheme(), url.host_str().unwrap_or(""));
            let resp = client
                .get(url.clone())
                .header(
                    reqwest::header::ACCEPT,
                    "image/avif,image/webp,image/apng,image/*,*/*;q=0.8",
                )
                .header(reqwest::header::REFERER, referer)
                .send()
                .await
                .map_err(map_reqwest)?;
            let status = resp.status();
            if status.is_redirection() {
                if hop == MAX_REDIRECTS {
                    return Err(SystemError::TooManyRedirects);
                }
                let loc = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| {
                        SystemError::InvalidRedirect("redirect without a Location".into())
                    })?;
                let next = url
                    .join(loc)
                    .map_err(|_| SystemError::InvalidRedirect("invalid redirect target".into()))?;
                url = check_url(next.as_str(), &self.policy).map_err(|e| {
                    SystemError::ForbiddenRedirect(format!("illegal redirect: {}", e.message()))
                })?;
                continue;
            }
            if !status.is_success() {
                return Err(SystemError::UpstreamStatus(status.as_u16()));
            }
            let ct = resp
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            if !ALLOWED_TYPES.contains(&ct.as_str()) {
                return Err(SystemError::UnsupportedContentType(format!(
                    "content type {ct:?} is not an allowed image type"
                )));
            }
            let too_large = || SystemError::TooLarge("the image is larger than 10 MiB".into());
            if resp.content_length().is_some_and(|l| l > MAX_BYTES) {
                return Err(too_large());
            }
            let mut body = Vec::new();
            let mut stream = resp.bytes_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(map_reqwest)?;
                if body.len() as u64 + chunk.len() as u64 > MAX_BYTES {
                    return Err(too_large());
                }
                body.extend_from_slice(&chunk);
            }
            return Ok((ct, Bytes::from(body)));
        }
        Err(SystemError::TooManyRedirects)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "198.18.0.1",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:8.8.8.8",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::a00:1",
            "64:ff9b:1::1",
            "2002:7f00:1::",
            "2001:db8::1",
            "2001::1",
        ] {
            assert!(ip_forbidden(a.parse().unwrap()), "{a} must be forbidden");
        }
        for a in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700::1111",
            "64:ff9b::808:808",
            "2002:808:808::",
        ] {
            assert!(!ip_forbidden(a.parse().unwrap()), "{a} must be allowed");
        }
    }

    #[test]
    fn url_forms() {
        let p = Policy::default();
        assert!(check_url("https://example.com/a.png", &p).is_ok());
        for u in [
            "http://2130706433/",
            "http://0x7f.1/",
            "http://017700000001/",
            "http://127.1/",
            "http://[::ffff:7f00:1]/",
            "http://user@example.com/",
            "ftp://example.com/",
            "http://localhost/",
            "http://foo.localhost/",
            "http://intranet/",
            "",
        ] {
            assert!(check_url(u, &p).is_err(), "{u} must be refused");
        }
        let allow = Policy {
            allow_hosts: vec!["imgflip.com".into()],
            ..Default::default()
        };
        assert!(check_url("https://i.imgflip.com/x.png", &allow).is_ok());
        assert!(check_url("https://evilimgflip.com/x.png", &allow).is_err());
    }

    #[tokio::test]
    async fn names_resolving_to_forbidden_addresses_are_refused() {
        // The resolver itself refuses, whatever the name rules say.
        let e = resolve_checked("localhost").await.unwrap_err();
        assert!(e.is::<Refused>(), "{e}");
        let e = resolve_checked("127.0.0.1").await.unwrap_err();
        assert!(e.is::<Refused>(), "{e}");
    }

    #[test]
    fn cache_budget() {
        let mut c = Cache::default();
        c.put(
            "a".into(),
            "image/png".into(),
            Bytes::from(vec![0; CACHE_BYTES / 2]),
        );
        c.put(
            "b".into(),
            "image/png".into(),
            Bytes::from(vec![0; CACHE_BYTES / 2]),
        );
        c.put("c".into(), "image/png".into(), Bytes::from(vec![0; 10]));
        assert!(c.bytes <= CACHE_BYTES);
        assert!(c.get("a").is_none());
        assert!(c.get("c").is_some());
    }
}
