//! The request parts every game handler reads first, as extractors whose
//! rejection is the family's failure envelope: the `{game_type}` path segment
//! (checked before the body) and the JSON object body.

use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, MatchedPath, Path, Request};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use companiond_core::{AppState, Ext};
use serde_json::{Map, Value};

use super::input::{body_map, game_type_of, require_persona, session_of};
use crate::error::{Failure, Reason};
use crate::games::ICEBREAKER_GAME_TYPE;

/// The `{game_type}` path segment, normalised (see [`game_type_of`]).
pub struct GameType(pub String);

impl FromRequestParts<AppState> for GameType {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Failure> {
        let Path(raw) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| Failure::new(Reason::InvalidGameType))?;
        game_type_of(&raw).map(GameType)
    }
}

/// The `{game_type}` of a call the icebreaker has its own route for (start,
/// speak, end): the icebreaker's game type is HTTP 400 `not_a_game_route`
/// naming that route.
pub struct PlayableGameType(pub String);

impl FromRequestParts<AppState> for PlayableGameType {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Failure> {
        let GameType(game_type) = GameType::from_request_parts(parts, state).await?;
        if game_type != ICEBREAKER_GAME_TYPE {
            return Ok(PlayableGameType(game_type));
        }
        let path = parts
            .extensions
            .get::<MatchedPath>()
            .map(MatchedPath::as_str)
            .unwrap_or("");
        let route = if path.ends_with("/route/start") {
            "/api/icebreaker/route/start"
        } else if path.ends_with("/speak") {
            "/api/icebreaker/speak"
        } else {
            "/api/icebreaker/route/end"
        };
        Err(Failure::new(Reason::NotAGameRoute)
            .with("route", route)
            .with(
                "error",
                "new_user_icebreaker is the onboarding flow; use /api/icebreaker",
            ))
    }
}

/// A JSON object body: empty is `{}`, anything else that is no object is `invalid_body`.
pub struct JsonObject(pub Map<String, Value>);

impl FromRequest<AppState> for JsonObject {
    type Rejection = Failure;

    async fn from_request(req: Request, _: &AppState) -> Result<Self, Failure> {
        body_map(req.into_body()).await.map(JsonObject)
    }
}

/// A call about the character's route of a game type: the `{game_type}`, the
/// JSON object body, the character (required) and the session (optional),
/// checked in that order.
pub struct RouteCall {
    pub game_type: String,
    pub persona: String,
    pub session: Option<String>,
    pub body: Map<String, Value>,
}

impl FromRequest<AppState> for RouteCall {
    type Rejection = Failure;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Failure> {
        let (mut parts, body) = req.into_parts();
        let GameType(game_type) = GameType::from_request_parts(&mut parts, state).await?;
        let body = body_map(body).await?;
        let persona = require_persona(&body)?;
        let session = session_of(&body)?;
        Ok(RouteCall {
            game_type,
            persona,
            session,
            body,
        })
    }
}

/// The default reason of an end: `game_end` for `/api/game/{game_type}/end`,
/// `route_end` for `/api/game/{game_type}/route/end`.
pub struct EndReason(pub &'static str);

impl FromRequestParts<AppState> for EndReason {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, Failure> {
        let route_end = parts
            .extensions
            .get::<MatchedPath>()
            .is_some_and(|p| p.as_str().ends_with("/route/end"));
        Ok(EndReason(if route_end { "route_end" } else { "game_end" }))
    }
}

/// A family call: the app state, a family state `F` (the games or the
/// icebreaker state) and the JSON object body. After the path extractors.
pub struct FamilyCall<F>(pub AppState, pub Arc<F>, pub Map<String, Value>);

impl<F: Send + Sync + 'static> FromRequest<AppState> for FamilyCall<F> {
    type Rejection = Response;

    async fn from_request(req: Request, st: &AppState) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let Ext(state) = Ext::<F>::from_request_parts(&mut parts, st).await?;
        match body_map(body).await {
            Ok(body) => Ok(FamilyCall(st.clone(), state, body)),
            Err(f) => Err(f.into_response()),
        }
    }
}
