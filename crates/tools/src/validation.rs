//! Validation of `/api/tools` request bodies: the registration schema (name,
//! description, parameters schema, loopback callback URL, role, source,
//! timeout), names, sources and roles. Every schema error is a
//! [`ToolsError::Invalid`].

use std::net::IpAddr;
use std::time::Duration;

use companiond_core::guards::is_loopback;
use companiond_core::tools::RegisteredTool;
use serde_json::{json, Map, Value};

use crate::error::ToolsError;

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

/// Validate a `register` body (every schema error is an [`ToolsError::Invalid`]).
pub fn parse_registration(body: &Map<String, Value>) -> Result<Registration, ToolsError> {
    let name = parse_name(body.get("name"))?;
    let description = match body.get("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(invalid("description: must be a string")),
    };
    let parameters = parse_parameters(body.get("parameters"))?;
    let callback_url = match body.get("callback_url") {
        None | Some(Value::Null) => return Err(invalid("callback_url: field required")),
        Some(Value::String(s)) => validate_callback_url(s)?,
        Some(_) => return Err(invalid("callback_url: must be a string")),
    };
    let role = parse_role(body.get("role"))?;
    let source = match body.get("source") {
        None | Some(Value::Null) => DEFAULT_SOURCE.to_string(),
        Some(Value::String(s)) if s.is_empty() => DEFAULT_SOURCE.to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(invalid("source: must be a string")),
    };
    let timeout = parse_timeout(body.get("timeout_seconds"))?;
    Ok(Registration {
        tool: RegisteredTool {
            name,
            description,
            parameters,
            callback_url,
            source,
            timeout,
        },
        role,
    })
}

/// `name`: a string of 1 to 64 characters.
pub fn parse_name(v: Option<&Value>) -> Result<String, ToolsError> {
    match v {
        None | Some(Value::Null) => Err(invalid("name: field required")),
        Some(Value::String(s)) => {
            let n = s.chars().count();
            if n == 0 {
                Err(invalid("name: must have at least 1 character"))
            } else if n > MAX_NAME_CHARS {
                Err(invalid(format!(
                    "name: must have at most {MAX_NAME_CHARS} characters (got {n})"
                )))
            } else {
                Ok(s.clone())
            }
        }
        Some(_) => Err(invalid("name: must be a string")),
    }
}

/// `source` of a `clear` request: a non-empty string.
pub fn parse_source(v: Option<&Value>) -> Result<String, ToolsError> {
    match v {
        None | Some(Value::Null) => Err(invalid("source: field required")),
        Some(Value::String(s)) if s.is_empty() => {
            Err(invalid("source: must have at least 1 character"))
        }
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(invalid("source: must be a string")),
    }
}

/// `role`: a string or null; the empty string counts as null (every role).
pub fn parse_role(v: Option<&Value>) -> Result<Option<String>, ToolsError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid("role: must be a string or null")),
    }
}

/// `parameters`: a JSON Schema object describing the arguments (an object whose
/// `type`, when given, is `"object"`); absent or null gives the empty object schema.
pub fn parse_parameters(v: Option<&Value>) -> Result<Value, ToolsError> {
    let m = match v {
        None | Some(Value::Null) => return Ok(json!({"type": "object", "properties": {}})),
        Some(Value::Object(m)) => m,
        Some(_) => return Err(invalid("parameters: must be a JSON Schema object")),
    };
    match m.get("type") {
        None => {}
        Some(Value::String(t)) if t == "object" => {}
        Some(_) => {
            return Err(invalid(
                "parameters: the arguments schema must have type \"object\"",
            ))
        }
    }
    if let Some(p) = m.get("properties") {
        if !p.is_object() {
            return Err(invalid("parameters: properties must be an object"));
        }
    }
    if let Some(r) = m.get("required") {
        let ok = r.as_array().is_some_and(|a| a.iter().all(Value::is_string));
        if !ok {
            return Err(invalid("parameters: required must be an array of strings"));
        }
    }
    Ok(Value::Object(m.clone()))
}

/// `timeout_seconds`: a number in (0, 300]; absent or null gives 30.
pub fn parse_timeout(v: Option<&Value>) -> Result<Duration, ToolsError> {
    let secs = match v {
        None | Some(Value::Null) => DEFAULT_TIMEOUT_SECS,
        Some(Value::Number(n)) => n
            .as_f64()
            .ok_or_else(|| invalid("timeout_seconds: must be a number"))?,
        Some(_) => return Err(invalid("timeout_seconds: must be a number")),
    };
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

    #[test]
    fn timeouts() {
        assert_eq!(parse_timeout(None), Ok(Duration::from_secs(30)));
        assert_eq!(
            parse_timeout(Some(&json!(300))),
            Ok(Duration::from_secs(300))
        );
        assert!(parse_timeout(Some(&json!(0.001))).is_ok());
        for bad in [json!(0), json!(-1), json!(300.01), json!("30"), json!(true)] {
            assert!(parse_timeout(Some(&bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_count_characters() {
        assert!(parse_name(Some(&json!("天".repeat(64)))).is_ok());
        assert!(parse_name(Some(&json!("天".repeat(65)))).is_err());
        assert!(parse_name(Some(&json!(""))).is_err());
        assert!(parse_name(Some(&json!(5))).is_err());
    }

    #[test]
    fn parameters_schema() {
        assert_eq!(
            parse_parameters(None).ok(),
            Some(json!({"type": "object", "properties": {}}))
        );
        assert!(parse_parameters(Some(&json!({}))).is_ok());
        let schema =
            json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]});
        assert_eq!(parse_parameters(Some(&schema)).ok(), Some(schema));
        for bad in [
            json!("x"),
            json!([1]),
            json!(3),
            json!({"type": "string"}),
            json!({"properties": []}),
            json!({"required": "q"}),
        ] {
            assert!(parse_parameters(Some(&bad)).is_err(), "{bad}");
        }
    }
}
