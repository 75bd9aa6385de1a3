//! The one error type of the system family and its envelope.
//!
//! Every failure answers `{success:false, error, error_code, ok:false, ...extra}`:
//! the system helpers' clients read `{success:false, error}`, while the handoff,
//! seven-day and autostart clients read `{ok:false, ...}`; one body carrying both
//! flags serves them all. Each variant names one failure; its HTTP status
//! ([`SystemError::status`]), its stable machine code ([`SystemError::code`]) and
//! its extra envelope fields are chosen by variant, never by message text.
//! Tuple variants carry the human-readable message only.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use companiond_core::api::{DocumentedError, ErrorDoc};
use companiond_core::envelope::{EnvelopeKind, SuccessError};
use serde::Serialize;
use serde_json::{Map, Value};

/// A failure of a system route.
#[derive(Debug)]
pub enum SystemError {
    // ---- 400
    /// The body is JSON but not an object.
    InvalidBody(String),
    /// The body is not JSON.
    InvalidJson(String),
    /// An activity signal field has the wrong type or range.
    InvalidSignal(String),
    /// `seconds` of a play-time report is not a non-negative integer.
    InvalidSeconds(String),
    /// `days` of the token-usage query is not an integer.
    InvalidDays(String),
    /// A query string that does not parse.
    InvalidQuery(String),
    /// The seven-day tutorial `state` is not an object.
    InvalidState(String),
    /// The seven-day tutorial `expectedRevision` is not a non-negative integer.
    InvalidExpectedRevision(String),
    /// A handoff without a target page.
    InvalidTargetPage(String),
    /// A handoff consume without (or with an oversized) expected page.
    InvalidExpectedPage(String),
    /// A handoff consume without (or with an oversized) token or signature.
    InvalidHandoffToken(String),
    /// A handoff consumer id that is too long.
    InvalidConsumerId(String),
    /// An achievement name that is not plausible.
    InvalidAchievement(String),
    /// An autostart decision other than accept, later or never.
    InvalidDecision(String),
    /// A mini-game invitation choice other than accept, decline or later.
    InvalidChoice(String),
    /// An autostart prompt token that is missing or not the active one.
    InvalidPromptToken(String),
    /// A URL that cannot be proxied.
    InvalidUrl(String),
    /// A path that cannot be read as a path.
    InvalidPath(String),
    /// No path given.
    MissingPath(String),
    /// No character named.
    MissingPersonaName(String),
    /// An activity push without any signal field.
    MissingSignal(String),
    /// No text given.
    MissingText(String),
    /// No URL given.
    MissingUrl(String),
    /// The named folder is a file.
    NotAFolder(String),
    /// The file is not an image (by extension or content).
    NotAnImage(String),
    /// A remote URL given to the local image proxy.
    RemoteUrlUnsupported(String),
    /// Text past the translation limit.
    TextTooLong(String),
    /// A query path with a traversal component (`/api/file-exists` answers 400).
    TraversalInQuery(String),
    // ---- 403
    /// A loopback-only route called from another machine.
    LoopbackOnly(String),
    /// A missing or wrong CSRF token, or a foreign origin.
    CsrfValidationFailed(String),
    /// A path outside the approved folders.
    ForbiddenPath(String),
    /// A redirect to a target the meme proxy refuses.
    ForbiddenRedirect(String),
    /// A host the meme proxy refuses.
    ForbiddenTarget(String),
    /// A path with a traversal component.
    PathTraversal(String),
    /// An upstream answer that is not an allowed image type.
    UnsupportedContentType(String),
    HandoffSignatureMismatch(String),
    HandoffOriginMismatch(String),
    HandoffTargetMismatch(String),
    // ---- 404
    /// A file that does not exist (or cannot be read).
    NotFound(String),
    AchievementNotFound(String),
    /// An activity push for a character that is not registered.
    CharacterNotFound(String),
    HandoffTokenNotFound(String),
    /// No survey for this version.
    NoSurvey(String),
    /// A proactive round for a character that does not exist.
    ProactiveCharacterNotFound(String),
    // ---- 409
    HandoffTokenConsumed(String),
    /// A seven-day tutorial write with a stale revision; carries the stored
    /// public document, whose fields join the envelope.
    TutorialRevisionConflict(Box<crate::tutorial::Store>),
    /// A proactive round while one runs or the AI is answering.
    ProactiveBusy {
        message: String,
        state: BusyState,
    },
    // ---- 413
    /// A request body past its limit.
    BodyTooLarge(String),
    /// An image past its limit.
    TooLarge(String),
    // ---- 429
    /// An activity push too soon after the last one.
    RateLimited {
        retry_after_seconds: f64,
    },
    // ---- 503
    /// A stored document is not JSON: it was set aside (docs/data.md), so the
    /// next call starts it anew.
    Unreadable(String),
    // ---- 500
    /// The document store failed.
    Storage(String),
    /// A blocking task failed.
    Internal(String),
    UsageUnavailable(String),
    CaptureFailed(String),
    /// The interactive region capture failed (its clients read `canceled`).
    RegionCaptureFailed(String),
    // ---- 501
    /// No screen capture tool on this machine.
    CaptureUnavailable(String),
    /// Interactive capture off macOS: the frontend captures instead.
    InteractiveUnsupported,
    // ---- 502
    UpstreamUnreachable(String),
    TooManyRedirects,
    InvalidRedirect(String),
    /// The image host answered a non-success status.
    UpstreamStatus(u16),
    /// The language model failed a proactive round; `detail` is its error code.
    ProactiveModelFailed {
        message: String,
        detail: &'static str,
    },
    // ---- 503
    PlatformUnavailable(String),
    // ---- 504
    UpstreamTimeout,
    /// A proactive round (or its model call) timed out.
    ProactiveTimeout(String),
}

/// What kept a proactive round from starting (the `state` of its 409).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum BusyState {
    /// Another round for this character is running.
    RoundRunning {
        proactive_running: bool,
        lanlan_name: String,
    },
    /// The AI is answering the user.
    Responding {
        ai_responding: bool,
        proactive_running: bool,
        lanlan_name: String,
    },
}

impl SystemError {
    /// A body that did not parse into its type (as the object reader
    /// answered): 413 past the limit, 400 `invalid_json` or `invalid_body`.
    pub fn body(fault: companiond_core::envelope::BodyFault) -> Self {
        use companiond_core::envelope::BodyFault;
        match fault {
            BodyFault::TooLarge { limit } => {
                SystemError::BodyTooLarge(format!("the body is larger than {limit} bytes"))
            }
            BodyFault::NotJson(_) => SystemError::InvalidJson("invalid JSON body".into()),
            BodyFault::NotObject => SystemError::InvalidBody("body must be a JSON object".into()),
            f @ BodyFault::Invalid { .. } => SystemError::InvalidBody(f.to_string()),
        }
    }

    /// The HTTP status of this failure.
    pub fn status(&self) -> StatusCode {
        use SystemError::*;
        match self {
            InvalidBody(_)
            | InvalidJson(_)
            | InvalidSignal(_)
            | InvalidSeconds(_)
            | InvalidDays(_)
            | InvalidQuery(_)
            | InvalidState(_)
            | InvalidExpectedRevision(_)
            | InvalidTargetPage(_)
            | InvalidExpectedPage(_)
            | InvalidHandoffToken(_)
            | InvalidConsumerId(_)
            | InvalidAchievement(_)
            | InvalidDecision(_)
            | InvalidChoice(_)
            | InvalidPromptToken(_)
            | InvalidUrl(_)
            | InvalidPath(_)
            | MissingPath(_)
            | MissingPersonaName(_)
            | MissingSignal(_)
            | MissingText(_)
            | MissingUrl(_)
            | NotAFolder(_)
            | NotAnImage(_)
            | RemoteUrlUnsupported(_)
            | TextTooLong(_)
            | TraversalInQuery(_) => StatusCode::BAD_REQUEST,
            LoopbackOnly(_)
            | CsrfValidationFailed(_)
            | ForbiddenPath(_)
            | ForbiddenRedirect(_)
            | ForbiddenTarget(_)
            | PathTraversal(_)
            | UnsupportedContentType(_)
            | HandoffSignatureMismatch(_)
            | HandoffOriginMismatch(_)
            | HandoffTargetMismatch(_) => StatusCode::FORBIDDEN,
            NotFound(_)
            | AchievementNotFound(_)
            | CharacterNotFound(_)
            | HandoffTokenNotFound(_)
            | NoSurvey(_)
            | ProactiveCharacterNotFound(_) => StatusCode::NOT_FOUND,
            HandoffTokenConsumed(_) | TutorialRevisionConflict(_) | ProactiveBusy { .. } => {
                StatusCode::CONFLICT
            }
            BodyTooLarge(_) | TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Unreadable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Storage(_)
            | Internal(_)
            | UsageUnavailable(_)
            | CaptureFailed(_)
            | RegionCaptureFailed(_) => StatusCode::INTERNAL_SERVER_ERROR,
            CaptureUnavailable(_) | InteractiveUnsupported => StatusCode::NOT_IMPLEMENTED,
            UpstreamUnreachable(_)
            | TooManyRedirects
            | InvalidRedirect(_)
            | UpstreamStatus(_)
            | ProactiveModelFailed { .. } => StatusCode::BAD_GATEWAY,
            PlatformUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            UpstreamTimeout | ProactiveTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// The stable machine code (`error_code` on the wire).
    pub fn code(&self) -> &'static str {
        use SystemError::*;
        match self {
            InvalidBody(_) => "invalid_body",
            InvalidJson(_) => "invalid_json",
            InvalidSignal(_) => "invalid_signal",
            InvalidSeconds(_) => "invalid_seconds",
            InvalidDays(_) => "invalid_days",
            InvalidQuery(_) => "invalid_query",
            InvalidState(_) => "invalid_state",
            InvalidExpectedRevision(_) => "invalid_expected_revision",
            InvalidTargetPage(_) => "invalid_target_page",
            InvalidExpectedPage(_) => "invalid_expected_page",
            InvalidHandoffToken(_) => "invalid_handoff_token",
            InvalidConsumerId(_) => "invalid_consumer_id",
            InvalidAchievement(_) => "invalid_achievement",
            InvalidDecision(_) => "invalid_decision",
            InvalidChoice(_) => "invalid_choice",
            InvalidPromptToken(_) => "invalid_prompt_token",
            InvalidUrl(_) => "invalid_url",
            InvalidPath(_) => "invalid_path",
            MissingPath(_) => "missing_path",
            MissingPersonaName(_) => "missing_persona_name",
            MissingSignal(_) => "missing_signal",
            MissingText(_) => "missing_text",
            MissingUrl(_) => "missing_url",
            NotAFolder(_) => "not_a_folder",
            NotAnImage(_) => "not_an_image",
            RemoteUrlUnsupported(_) => "remote_url_unsupported",
            TextTooLong(_) => "text_too_long",
            TraversalInQuery(_) | PathTraversal(_) => "path_traversal",
            LoopbackOnly(_) => "forbidden",
            CsrfValidationFailed(_) => "csrf_validation_failed",
            ForbiddenPath(_) => "forbidden_path",
            ForbiddenRedirect(_) => "forbidden_redirect",
            ForbiddenTarget(_) => "forbidden_target",
            UnsupportedContentType(_) => "unsupported_content_type",
            HandoffSignatureMismatch(_) => "handoff_signature_mismatch",
            HandoffOriginMismatch(_) => "handoff_origin_mismatch",
            HandoffTargetMismatch(_) => "handoff_target_mismatch",
            NotFound(_) => "not_found",
            AchievementNotFound(_) => "achievement_not_found",
            CharacterNotFound(_) => "character_not_found",
            HandoffTokenNotFound(_) => "handoff_token_not_found",
            NoSurvey(_) => "no_survey",
            ProactiveCharacterNotFound(_) => "error_character_not_found",
            HandoffTokenConsumed(_) => "handoff_token_consumed",
            TutorialRevisionConflict(_) => "seven_day_tutorial_revision_conflict",
            ProactiveBusy { .. } => "pass_busy",
            BodyTooLarge(_) => "body_too_large",
            TooLarge(_) => "too_large",
            RateLimited { .. } => "rate_limited",
            Unreadable(_) => "storage_unreadable",
            Storage(_) => "storage_error",
            Internal(_) => "internal_error",
            UsageUnavailable(_) => "usage_unavailable",
            CaptureFailed(_) | RegionCaptureFailed(_) => "capture_failed",
            CaptureUnavailable(_) => "capture_unavailable",
            InteractiveUnsupported => "interactive_unsupported",
            UpstreamUnreachable(_) => "upstream_unreachable",
            TooManyRedirects => "too_many_redirects",
            InvalidRedirect(_) => "invalid_redirect",
            UpstreamStatus(_) => "upstream_status",
            ProactiveModelFailed { .. } => "error_model_failed",
            PlatformUnavailable(_) => "platform_unavailable",
            UpstreamTimeout => "upstream_timeout",
            ProactiveTimeout(_) => "error_timeout",
        }
    }

    /// The human-readable message (`error` on the wire).
    pub fn message(&self) -> String {
        use SystemError::*;
        match self {
            InvalidBody(m)
            | InvalidJson(m)
            | InvalidSignal(m)
            | InvalidSeconds(m)
            | InvalidDays(m)
            | InvalidQuery(m)
            | InvalidState(m)
            | InvalidExpectedRevision(m)
            | InvalidTargetPage(m)
            | InvalidExpectedPage(m)
            | InvalidHandoffToken(m)
            | InvalidConsumerId(m)
            | InvalidAchievement(m)
            | InvalidDecision(m)
            | InvalidChoice(m)
            | InvalidPromptToken(m)
            | InvalidUrl(m)
            | InvalidPath(m)
            | MissingPath(m)
            | MissingPersonaName(m)
            | MissingSignal(m)
            | MissingText(m)
            | MissingUrl(m)
            | NotAFolder(m)
            | NotAnImage(m)
            | RemoteUrlUnsupported(m)
            | TextTooLong(m)
            | TraversalInQuery(m)
            | LoopbackOnly(m)
            | CsrfValidationFailed(m)
            | ForbiddenPath(m)
            | ForbiddenRedirect(m)
            | ForbiddenTarget(m)
            | PathTraversal(m)
            | UnsupportedContentType(m)
            | HandoffSignatureMismatch(m)
            | HandoffOriginMismatch(m)
            | HandoffTargetMismatch(m)
            | NotFound(m)
            | AchievementNotFound(m)
            | CharacterNotFound(m)
            | HandoffTokenNotFound(m)
            | NoSurvey(m)
            | ProactiveCharacterNotFound(m)
            | HandoffTokenConsumed(m)
            | ProactiveBusy { message: m, .. }
            | BodyTooLarge(m)
            | TooLarge(m)
            | Storage(m)
            | Unreadable(m)
            | Internal(m)
            | UsageUnavailable(m)
            | CaptureFailed(m)
            | RegionCaptureFailed(m)
            | CaptureUnavailable(m)
            | UpstreamUnreachable(m)
            | InvalidRedirect(m)
            | ProactiveModelFailed { message: m, .. }
            | PlatformUnavailable(m)
            | ProactiveTimeout(m) => m.clone(),
            TutorialRevisionConflict(_) => "expectedRevision is stale".into(),
            RateLimited { .. } => "rate limited".into(),
            InteractiveUnsupported => {
                "interactive screenshot is only supported on macOS; capture in the frontend".into()
            }
            TooManyRedirects => "too many redirects".into(),
            UpstreamStatus(s) => format!("the image host answered HTTP {s}"),
            UpstreamTimeout => "the image host timed out".into(),
        }
    }

    /// The fields this failure adds to the envelope, in wire order.
    fn extra(self) -> Map<String, Value> {
        use SystemError::*;
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        let proactive = |reason: &'static str, put: &mut dyn FnMut(&str, Value)| {
            put("reason_code", reason.into());
            put("stage", crate::proactive::round::stage_of(reason).into());
        };
        match self {
            ProactiveCharacterNotFound(_) => {
                proactive("ERROR_CHARACTER_NOT_FOUND", &mut put);
                put("action", Value::Null);
            }
            ProactiveBusy { state, .. } => {
                proactive("PASS_BUSY", &mut put);
                put("state", serde_json::to_value(state).unwrap_or(Value::Null));
            }
            ProactiveTimeout(_) => proactive("ERROR_TIMEOUT", &mut put),
            ProactiveModelFailed { detail, .. } => {
                proactive("ERROR_MODEL_FAILED", &mut put);
                put("error_detail", detail.into());
            }
            TutorialRevisionConflict(store) => {
                let public = crate::tutorial::Public {
                    ok: false,
                    store: *store,
                };
                if let Ok(Value::Object(fields)) = serde_json::to_value(public) {
                    for (k, v) in fields {
                        put(&k, v);
                    }
                }
            }
            RateLimited {
                retry_after_seconds,
            } => put("retry_after_seconds", retry_after_seconds.into()),
            InteractiveUnsupported => {
                put("fallback", "frontend".into());
                put("canceled", false.into());
            }
            RegionCaptureFailed(_) => put("canceled", false.into()),
            UpstreamStatus(s) => put("upstream_status", s.into()),
            _ => {}
        }
        m
    }

    /// The response with the route's own fields after the variant's: the values
    /// a route's clients read even from a failure (e.g. `exists:false`).
    pub fn with_fields(self, fields: Value) -> Response {
        let status = self.status();
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            if let Some(f) = companiond_core::disk::current() {
                return SuccessError::new(f.message())
                    .code(f.code())
                    .with("ok", false)
                    .status(f.status());
            }
        }
        let mut e = SuccessError::new(self.message())
            .code(self.code())
            .with("ok", false);
        for (k, v) in self.extra() {
            e = e.with(&k, v);
        }
        if let Value::Object(fields) = fields {
            for (k, v) in fields {
                e = e.with(&k, v);
            }
        }
        e.status(status)
    }
}

impl SystemError {
    /// One sample of every variant, with the message it carries in practice: the
    /// OpenAPI answers are read from these (status, code), so they cannot drift
    /// from [`SystemError::status`] and [`SystemError::code`].
    pub fn samples() -> Vec<SystemError> {
        use SystemError::*;
        let s = |m: &str| m.to_string();
        vec![
            InvalidBody(s("body must be a JSON object")),
            InvalidJson(s("invalid JSON body")),
            InvalidSignal(s("an activity field has the wrong type or range")),
            InvalidSeconds(s("seconds must be a non-negative integer")),
            InvalidDays(s("days must be an integer")),
            InvalidQuery(s("invalid query: unknown variant")),
            InvalidState(s("state must be an object")),
            InvalidExpectedRevision(s("expectedRevision must be a non-negative integer")),
            InvalidTargetPage(s("target_page is required")),
            InvalidExpectedPage(s("expected_page is required")),
            InvalidHandoffToken(s("token and signature are required")),
            InvalidConsumerId(s("consumer_id is too long")),
            InvalidAchievement(s("invalid achievement name")),
            InvalidDecision(s("invalid decision")),
            InvalidChoice(s("invalid choice")),
            InvalidPromptToken(s("invalid prompt_token")),
            InvalidUrl(s("the URL cannot be proxied")),
            InvalidPath(s("invalid path")),
            MissingPath(s("a path is required")),
            MissingPersonaName(s("persona_name is required")),
            MissingSignal(s("no activity signal given")),
            MissingText(s("text is required")),
            MissingUrl(s("query url is required")),
            NotAFolder(s("the folder is a file")),
            NotAnImage(s("not an image")),
            RemoteUrlUnsupported(s("remote URLs are not proxied here")),
            TextTooLong(s("text is too long")),
            TraversalInQuery(s("path traversal")),
            LoopbackOnly(s("only available from localhost")),
            CsrfValidationFailed(s("CSRF validation failed")),
            ForbiddenPath(s("the path is outside the approved folders")),
            ForbiddenRedirect(s("redirect to a refused target")),
            ForbiddenTarget(s("the host is refused")),
            PathTraversal(s("path traversal")),
            UnsupportedContentType(s("the answer is not an allowed image type")),
            HandoffSignatureMismatch(s("handoff signature mismatch")),
            HandoffOriginMismatch(s("handoff origin mismatch")),
            HandoffTargetMismatch(s("handoff target mismatch")),
            NotFound(s("file not found")),
            AchievementNotFound(s("achievement not configured")),
            CharacterNotFound(s("persona_name not registered")),
            HandoffTokenNotFound(s("handoff token not found")),
            NoSurvey(s("no survey for this version")),
            ProactiveCharacterNotFound(s("character not found")),
            HandoffTokenConsumed(s("handoff token already consumed")),
            TutorialRevisionConflict(Box::new(crate::tutorial::empty_store())),
            ProactiveBusy {
                message: s("a proactive round is running"),
                state: BusyState::RoundRunning {
                    proactive_running: true,
                    lanlan_name: s("Companion"),
                },
            },
            BodyTooLarge(s("the body is too large")),
            TooLarge(s("the image is too large")),
            RateLimited {
                retry_after_seconds: 1.0,
            },
            Unreadable(s("a stored document was unreadable")),
            Storage(s("the document store failed")),
            Internal(s("a background task failed")),
            UsageUnavailable(s("the usage database is unavailable")),
            CaptureFailed(s("the capture failed")),
            RegionCaptureFailed(s("the region capture failed")),
            CaptureUnavailable(s("no screen capture tool")),
            InteractiveUnsupported,
            UpstreamUnreachable(s("the image host is unreachable")),
            TooManyRedirects,
            InvalidRedirect(s("invalid redirect")),
            UpstreamStatus(404),
            ProactiveModelFailed {
                message: s("the model failed"),
                detail: "not_configured",
            },
            PlatformUnavailable(s("the platform integration is not configured")),
            UpstreamTimeout,
            ProactiveTimeout(s("the proactive round timed out")),
        ]
    }

    /// This failure's OpenAPI answer: status, envelope, code and its message.
    fn doc(&self) -> ErrorDoc {
        ErrorDoc::new(
            self.status().as_u16(),
            EnvelopeKind::Success,
            self.message(),
        )
        .code(self.code())
    }

    /// The OpenAPI answers of the variants whose code is one of `codes` (a route
    /// lists the failures it can give).
    pub fn answers_of(codes: &[&str]) -> Vec<ErrorDoc> {
        let samples = Self::samples();
        debug_assert!(
            codes.iter().all(|c| samples.iter().any(|e| e.code() == *c)),
            "unknown system error code in {codes:?}"
        );
        samples
            .iter()
            .filter(|e| codes.contains(&e.code()))
            .map(SystemError::doc)
            .collect()
    }
}

/// Every answer a system route can give (`Api::fails`); routes list their own
/// subset with [`SystemError::answers_of`].
impl DocumentedError for SystemError {
    fn answers() -> Vec<ErrorDoc> {
        Self::samples().iter().map(SystemError::doc).collect()
    }
}

impl std::fmt::Display for SystemError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message(), self.code())
    }
}

impl std::error::Error for SystemError {}

impl From<companiond_core::store::StoreError> for SystemError {
    fn from(e: companiond_core::store::StoreError) -> Self {
        match e {
            companiond_core::store::StoreError::Corrupt(m) => SystemError::Unreadable(format!(
                "a stored document was unreadable ({m}); a copy was kept and the next call starts it anew"
            )),
            io => SystemError::Storage(io.to_string()),
        }
    }
}

impl From<companiond_core::task::TaskFailed> for SystemError {
    fn from(e: companiond_core::task::TaskFailed) -> Self {
        SystemError::Internal(e.to_string())
    }
}

impl IntoResponse for SystemError {
    fn into_response(self) -> Response {
        self.with_fields(Value::Null)
    }
}

pub type SysResult<T> = Result<T, SystemError>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The body of a failure's response, as text.
    async fn body_of(e: SystemError) -> (StatusCode, String) {
        let resp = e.into_response();
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn envelopes_by_variant() {
        let busy = SystemError::ProactiveBusy {
            message: "the AI is responding".into(),
            state: BusyState::Responding {
                ai_responding: true,
                proactive_running: false,
                lanlan_name: "A".into(),
            },
        };
        assert_eq!(
            body_of(busy).await,
            (
                StatusCode::CONFLICT,
                r#"{"success":false,"error":"the AI is responding","error_code":"pass_busy","ok":false,"reason_code":"PASS_BUSY","stage":"entry_guard","state":{"ai_responding":true,"proactive_running":false,"lanlan_name":"A"}}"#
                    .to_string()
            )
        );
        let limited = SystemError::RateLimited {
            retry_after_seconds: 0.25,
        };
        assert_eq!(
            body_of(limited).await,
            (
                StatusCode::TOO_MANY_REQUESTS,
                r#"{"success":false,"error":"rate limited","error_code":"rate_limited","ok":false,"retry_after_seconds":0.25}"#
                    .to_string()
            )
        );
        let (status, body) = body_of(SystemError::UpstreamStatus(418)).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY);
        assert!(
            body.ends_with(r#""error_code":"upstream_status","ok":false,"upstream_status":418}"#)
        );
        let fields = SystemError::MissingText("text is required".into())
            .with_fields(serde_json::json!({"emotion": "neutral", "confidence": 0.0}));
        assert_eq!(fields.status(), StatusCode::BAD_REQUEST);
    }
}
