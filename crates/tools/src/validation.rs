//! The limits of `/api/tools` request bodies, checked after they parsed into
//! their types (`http`): name and source lengths, the parameters schema, the
//! loopback callback URL, the timeout range. Every error is a
//! [`ToolsError::Invalid`].

use std::net::IpAddr;
use std::time::Duration;

use companiond_core::guards::is_loopback;
use companiond_core::tools::RegisteredTool;
use serde_json::Value;

use crate::error::ToolsError;
use crate::http::{RegisterBody, ToolParameters};

/// Longest tool name, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest accepted timeout, in seconds.
pub const MAX_TIMEOUT_SECS: f64 = 300.0;
/// Timeout when the registration gives none.
pub const DEFAULT_TIMEOUT_SECS: f64 = 30.0;
/// Source tag when the registration gives none.
pub const DEFAULT_SOURCE: &str = "external";
/// Longest accepted callback URL (a sanity bound on what a loopback callback needs).
pub const MAX_URL_CHARS: usize = 2048;

fn invalid(msg: impl Into<String>) -> ToolsError {
    ToolsError::Invalid(msg.into())
}

/// A validated registration body.
#[derive(Debug, Clone)]
pub struct Registration {
    pub tool: RegisteredTool,
    pub role: Option<String>,
}

/// Check a parsed `register` body against the limits (every error is an
/// [`ToolsError::Invalid`]); the types already refused wrong JSON types.
pub fn registration(body: RegisterBody) -> Result<Registration, ToolsError> {
    let name = name(body.name)?;
    let parameters = parameters(body.parameters)?;
    let callback_url = validate_callback_url(&body.callback_url)?;
    let source = body
        .source
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_SOURCE.to_string());
    let timeout = timeout(body.timeout_seconds)?;
    Ok(Registration {
        tool: RegisteredTool {
            name,
            description: body.description.unwrap_or_default(),
            parameters,
            callback_url,
            source,
            timeout,
        },
        role: role(body.role),
    })
}

/// `name`: 1 to 64 characters.
pub fn name(s: String) -> Result<String, ToolsError> {
    let n = s.chars().count();
    if n == 0 {
        Err(invalid("name: must have at least 1 character"))
    } else if n > MAX_NAME_CHARS {
        Err(invalid(format!(
            "name: must have at most {MAX_NAME_CHARS} characters (got {n})"
        )))
    } else {
        Ok(s)
    }
}

/// `source` of a `clear` request: not empty.
pub fn source(s: String) -> Result<String, ToolsError> {
    if s.is_empty() {
        Err(invalid("source: must have at least 1 character"))
    } else {
        Ok(s)
    }
}

/// `role`: the empty string counts as null (every role).
pub fn role(r: Option<String>) -> Option<String> {
    r.filter(|s| !s.is_empty())
}

/// The arguments schema of a tool that takes none (a JSON Schema document).
const EMPTY_PARAMETERS: &str = r#"{"type": "object", "properties": {}}"#;

/// `parameters`: an object schema (its `type`, when given, is `"object"`);
/// absent or null gives the empty object schema. The schema is kept as sent.
pub fn parameters(p: Option<ToolParameters>) -> Result<Value, ToolsError> {
    let Some(p) = p else {
        return Ok(serde_json::from_str(EMPTY_PARAMETERS).unwrap_or_default());
    };
    if p.kind.as_deref().is_some_and(|t| t != "object") {
        return Err(invalid(
            "parameters: the arguments schema must have type \"object\"",
        ));
    }
    serde_json::to_value(p).map_err(|e| invalid(format!("parameters: {e}")))
}

/// `timeout_seconds`: in (0, 300]; absent or null gives 30.
pub fn timeout(secs: Option<f64>) -> Result<Duration, ToolsError> {
    let secs = secs.unwrap_or(DEFAULT_TIMEOUT_SECS);
    if !(secs > 0.0 && secs <= MAX_TIMEOUT_SECS) {
        return Err(invalid(format!(
            "timeout_seconds: must be greater than 0 and at most {MAX_TIMEOUT_SECS}"
        )));
    }
    Duration::try_from_secs_f64(secs).map_err(|_| invalid("timeout_seconds: out of range"))
}

/// A callback URL must be HTTP(S) with a loopback host: `localhost`, an IPv4
/// address in 127.0.0.0/8, `::1`, or an IPv4-mapped loopback address. Any other
/// host name (even one that resolves to loopback) is refused: the check never
/// resolves names.
pub fn validate_callback_url(raw: &str) -> Result<String, ToolsError> {
    if raw.is_empty() {
        return Err(invalid("callback_url: must not be empty"));
    }
    if raw.chars().count() > MAX_URL_CHARS {
        return Err(invalid(format!(
            "callback_url: must have at most {MAX_URL_CHARS} characters"
        )));
    }
    let u = url::Url::parse(raw.trim())
        .map_err(|e| invalid(format!("callback_url: not a valid URL ({e})")))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(invalid("callback_url: the scheme must be http or https"));
    }
    let loopback = match u.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => is_loopback(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => is_loopback(IpAddr::V6(ip)),
        None => return Err(invalid("callback_url: a host is required")),
    };
    if !loopback {
        return Err(invalid(
            "callback_url: the host must be loopback (localhost, 127.0.0.0/8, ::1 or IPv4-mapped loopback)",
        ));
    }
    Ok(raw.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn no_parameters_is_the_empty_object_schema() {
        assert_eq!(
            parameters(None).unwrap(),
            serde_json::json!({"type": "object", "properties": {}})
        );
    }

    #[test]
    fn callback_urls() {
        for ok in [
            "http://127.0.0.1:8080/cb",
            "http://127.9.8.7/",
            "https://localhost/x",
            "http://LOCALHOST:1/",
            "http://[::1]:9/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:127.0.0.1]:1/x",
        ] {
            assert!(validate_callback_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "http://10.0.0.1/",
            "http://example.com/",
            "ftp://127.0.0.1/",
            "http://localhost.:8080/",
            "http://localhost.example.com/",
            "http://127.0.0.1.nip.io/",
            "http://[::ffff:10.0.0.1]/",
            "http://0.0.0.0/",
            "http://127.0.0.1@example.com/",
            "file:///tmp/x",
            "127.0.0.1:8080",
            "not a url",
        ] {
            assert!(validate_callback_url(bad).is_err(), "{bad}");
        }
    }

    /// A `register` body with `extra` fields, parsed as the route parses it.
    fn reg(extra: Value) -> Result<Registration, ToolsError> {
        let mut body = json!({"name": "t", "callback_url": "http://127.0.0.1:9/cb"});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        companiond_core::envelope::parse_body::<RegisterBody>(&bytes)
            .map_err(|f| invalid(f.to_string()))
            .and_then(registration)
    }

    #[test]
    fn timeouts() {
        let t = |v: Value| reg(json!({"timeout_seconds": v})).map(|r| r.tool.timeout);
        assert_eq!(t(Value::Null), Ok(Duration::from_secs(30)));
        assert_eq!(t(json!(300)), Ok(Duration::from_secs(300)));
        assert!(t(json!(0.001)).is_ok());
        for bad in [json!(0), json!(-1), json!(300.01), json!("30"), json!(true)] {
            assert!(t(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_count_characters() {
        let n = |v: Value| reg(json!({"name": v}));
        assert!(n(json!("天".repeat(64))).is_ok());
        assert!(n(json!("天".repeat(65))).is_err());
        assert!(n(json!("")).is_err());
        assert!(n(json!(5)).is_err());
        assert!(n(Value::Null).is_err());
    }

    #[test]
    fn parameters_schema() {
        let p = |v: Value| reg(json!({"parameters": v})).map(|r| r.tool.parameters);
        assert_eq!(
            p(Value::Null).ok(),
            Some(json!({"type": "object", "properties": {}}))
        );
        assert!(p(json!({})).is_ok());
        let schema = json!({"type": "object", "properties": {"q": {"type": "string"}},
            "required": ["q"], "additionalProperties": false});
        assert_eq!(p(schema.clone()).ok(), Some(schema));
        for bad in [
            json!("x"),
            json!([1]),
            json!(3),
            json!({"type": "string"}),
            json!({"properties": []}),
            json!({"properties": null}),
            json!({"required": "q"}),
        ] {
            assert!(p(bad.clone()).is_err(), "{bad}");
        }
    }
}
