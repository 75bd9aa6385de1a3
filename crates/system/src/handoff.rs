//! Guide handoff tokens: in memory, HMAC-SHA256 signed with a
//! per-process random secret, 5-minute TTL, one-time, at most [`MAX_RECORDS`].

use std::collections::HashMap;

use base64::Engine;
use companiond_core::envelope::loose;
use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use utoipa::ToSchema;

use crate::error::{SysResult, SystemError};

pub const TTL_MS: i64 = 300_000;
pub const MAX_RECORDS: usize = 128;

#[derive(Clone, Debug)]
struct Record {
    token: String,
    flow_id: String,
    source_origin: String,
    source_page: String,
    source_path: String,
    target_page: String,
    target_path: String,
    resume_scene: Option<String>,
    created_at: i64,
    expires_at: i64,
    consumed_at: i64,
    consumed_by: String,
    signature: String,
}

/// A token as its clients see it (the `token` of a create or consume answer);
/// the source origin stays on the server.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
#[schema(as = HandoffPublicToken)]
pub struct PublicToken {
    pub token: String,
    /// Always 1.
    pub token_version: u8,
    pub flow_id: String,
    pub source_page: String,
    pub source_path: String,
    pub target_page: String,
    pub target_path: String,
    pub resume_scene: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
    pub consumed: bool,
    pub consumed_by: String,
    pub consumed_at: i64,
    pub signature: String,
    /// Always `server`.
    pub authority: &'static str,
}

impl Record {
    fn public(&self) -> PublicToken {
        PublicToken {
            token: self.token.clone(),
            token_version: 1,
            flow_id: self.flow_id.clone(),
            source_page: self.source_page.clone(),
            source_path: self.source_path.clone(),
            target_page: self.target_page.clone(),
            target_path: self.target_path.clone(),
            resume_scene: self.resume_scene.clone(),
            created_at: self.created_at,
            expires_at: self.expires_at,
            consumed: self.consumed_at > 0,
            consumed_by: self.consumed_by.clone(),
            consumed_at: self.consumed_at,
            signature: self.signature.clone(),
            authority: "server",
        }
    }
}

/// The token store.
pub struct Handoff {
    secret: [u8; 32],
    records: tokio::sync::Mutex<HashMap<String, Record>>,
}

impl Default for Handoff {
    fn default() -> Self {
        let mut secret = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut secret);
        Handoff {
            secret,
            records: tokio::sync::Mutex::default(),
        }
    }
}

/// `POST /api/guide/handoff/create`. Fields are trimmed and cut at their
/// length; one of another type counts as absent.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"target_page": "chat", "source_page": "home",
    "resume_scene": "intro"}))]
pub struct HandoffCreateBody {
    /// The page that will consume the token (at most 80 characters).
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1)]
    target_page: Option<String>,
    /// At most 80 characters.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(default = "home_yui_guide_v1")]
    flow_id: Option<String>,
    /// At most 80 characters.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(default = "home")]
    source_page: Option<String>,
    /// At most 240 characters.
    #[serde(default, deserialize_with = "loose::or_none")]
    source_path: Option<String>,
    /// At most 240 characters.
    #[serde(default, deserialize_with = "loose::or_none")]
    target_path: Option<String>,
    /// At most 120 characters.
    #[serde(default, deserialize_with = "loose::or_none")]
    resume_scene: Option<String>,
}

/// `POST /api/guide/handoff/consume`. Fields are trimmed; one of another type
/// counts as absent, a longer one is refused.
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"token": "…", "signature": "…", "expected_page": "chat"}))]
pub struct HandoffConsumeBody {
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 128)]
    token: Option<String>,
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 128)]
    signature: Option<String>,
    /// The consuming page; must be the token's target.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = String, required = true, min_length = 1, max_length = 80)]
    expected_page: Option<String>,
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(max_length = 120)]
    consumer_id: Option<String>,
}

/// The trimmed text, cut at `max` characters (absent: empty).
fn field(v: &Option<String>, max: usize) -> String {
    v.as_deref()
        .map(|s| s.trim().chars().take(max).collect())
        .unwrap_or_default()
}

/// The trimmed text (absent: empty); `too_long` names the failure past `max` characters.
fn bounded(
    v: &Option<String>,
    key: &str,
    max: usize,
    too_long: fn(String) -> SystemError,
) -> SysResult<String> {
    let v = v.as_deref().map(str::trim).unwrap_or("");
    if v.chars().count() > max {
        return Err(too_long(format!("{key} is too long")));
    }
    Ok(v.to_string())
}

fn prune(map: &mut HashMap<String, Record>, now: i64) {
    map.retain(|_, r| r.expires_at > now);
    while map.len() > MAX_RECORDS {
        let oldest = map
            .values()
            .min_by_key(|r| r.created_at)
            .map(|r| r.token.clone());
        match oldest {
            Some(t) => map.remove(&t),
            None => break,
        };
    }
}

impl Handoff {
    fn sign(&self, r: &Record) -> String {
        let msg = [
            r.token.as_str(),
            "1",
            &r.flow_id,
            &r.source_origin,
            &r.source_page,
            &r.source_path,
            &r.target_page,
            &r.target_path,
            r.resume_scene.as_deref().unwrap_or(""),
            &r.expires_at.to_string(),
        ]
        .join("\n");
        let mut mac = match Hmac::<Sha256>::new_from_slice(&self.secret) {
            Ok(m) => m,
            Err(_) => return String::new(),
        };
        mac.update(msg.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    /// Create a token; `origin` is the request origin (or the server's own).
    pub async fn create(
        &self,
        body: &HandoffCreateBody,
        origin: &str,
        now: i64,
    ) -> SysResult<PublicToken> {
        let target_page = field(&body.target_page, 80);
        if target_page.is_empty() {
            return Err(SystemError::InvalidTargetPage(
                "target_page is required".into(),
            ));
        }
        let mut raw = [0u8; 24];
        rand::thread_rng().fill_bytes(&mut raw);
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw);
        let or_default = |v: String, d: &str| if v.is_empty() { d.to_string() } else { v };
        let mut r = Record {
            token: token.clone(),
            flow_id: or_default(field(&body.flow_id, 80), "home_yui_guide_v1"),
            source_origin: origin.to_string(),
            source_page: or_default(field(&body.source_page, 80), "home"),
            source_path: field(&body.source_path, 240),
            target_page,
            target_path: field(&body.target_path, 240),
            resume_scene: Some(field(&body.resume_scene, 120)).filter(|s| !s.is_empty()),
            created_at: now,
            expires_at: now + TTL_MS,
            consumed_at: 0,
            consumed_by: String::new(),
            signature: String::new(),
        };
        r.signature = self.sign(&r);
        let public = r.public();
        let mut map = self.records.lock().await;
        prune(&mut map, now);
        map.insert(token, r);
        prune(&mut map, now);
        Ok(public)
    }

    /// Consume a token. Checks in this order: shape, existence (expired tokens are
    /// pruned first), signature, origin, target page, not yet used.
    pub async fn consume(
        &self,
        body: &HandoffConsumeBody,
        origin: &str,
        now: i64,
    ) -> SysResult<PublicToken> {
        let token = bounded(&body.token, "token", 128, SystemError::InvalidHandoffToken)?;
        let signature = bounded(
            &body.signature,
            "signature",
            128,
            SystemError::InvalidHandoffToken,
        )?;
        if token.is_empty() || signature.is_empty() {
            return Err(SystemError::InvalidHandoffToken(
                "token and signature are required".into(),
            ));
        }
        let expected = bounded(
            &body.expected_page,
            "expected_page",
            80,
            SystemError::InvalidExpectedPage,
        )?;
        if expected.is_empty() {
            return Err(SystemError::InvalidExpectedPage(
                "expected_page is required".into(),
            ));
        }
        let consumer = bounded(
            &body.consumer_id,
            "consumer_id",
            120,
            SystemError::InvalidConsumerId,
        )?;
        let mut map = self.records.lock().await;
        prune(&mut map, now);
        let Some(r) = map.get_mut(&token) else {
            return Err(SystemError::HandoffTokenNotFound(
                "handoff token not found or expired".into(),
            ));
        };
        if !bool::from(r.signature.as_bytes().ct_eq(signature.as_bytes())) {
            return Err(SystemError::HandoffSignatureMismatch(
                "handoff signature mismatch".into(),
            ));
        }
        if !r.source_origin.is_empty() && !origin.is_empty() && r.source_origin != origin {
            return Err(SystemError::HandoffOriginMismatch(
                "handoff origin mismatch".into(),
            ));
        }
        if r.target_page != expected {
            return Err(SystemError::HandoffTargetMismatch(
                "handoff target page mismatch".into(),
            ));
        }
        if r.consumed_at > 0 {
            return Err(SystemError::HandoffTokenConsumed(
                "handoff token was already consumed".into(),
            ));
        }
        r.consumed_at = now;
        r.consumed_by = if !consumer.is_empty() {
            consumer
        } else if !origin.is_empty() {
            origin.to_string()
        } else {
            "unknown".into()
        };
        Ok(r.public())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A body as the route parses it.
    fn m<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    #[tokio::test]
    async fn lifecycle() {
        let h = Handoff::default();
        let o = "http://127.0.0.1:1";
        assert!(h.create(&m(json!({})), o, 0).await.is_err());
        assert!(h
            .create(&m(json!({"target_page": null})), o, 0)
            .await
            .is_err());
        assert!(serde_json::from_value::<HandoffCreateBody>(json!({"target_page": 5})).is_err());
        let t = h
            .create(&m(json!({"target_page": "chat"})), o, 1000)
            .await
            .unwrap();
        assert_eq!(t.token.len(), 32);
        let body = |page: &str, sig: &str| -> HandoffConsumeBody {
            m(json!({"token": t.token, "signature": sig, "expected_page": page}))
        };
        let sig = t.signature.as_str();
        let code = |r: SysResult<PublicToken>| r.unwrap_err().code();
        assert_eq!(
            code(h.consume(&body("chat", "00"), o, 2000).await),
            "handoff_signature_mismatch"
        );
        assert_eq!(
            code(h.consume(&body("other", sig), o, 2000).await),
            "handoff_target_mismatch"
        );
        assert_eq!(
            code(
                h.consume(&body("chat", sig), "http://localhost:2", 2000)
                    .await
            ),
            "handoff_origin_mismatch"
        );
        assert!(
            h.consume(&body("chat", sig), o, 2000)
                .await
                .unwrap()
                .consumed
        );
        assert_eq!(
            code(h.consume(&body("chat", sig), o, 3000).await),
            "handoff_token_consumed"
        );
        assert_eq!(
            code(h.consume(&body("chat", sig), o, 1000 + TTL_MS).await),
            "handoff_token_not_found"
        );
        for i in 0..200 {
            h.create(&m(json!({"target_page": "x"})), o, 10_000 + i)
                .await
                .unwrap();
        }
        assert!(h.records.lock().await.len() <= MAX_RECORDS);
    }
}
