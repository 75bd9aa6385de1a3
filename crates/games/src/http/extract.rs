//! The request parts every game handler reads first, as extractors whose
//! rejection is the family's failure envelope: the `{game_type}` path segment
//! (checked before the body) and the JSON object body as its route's type.

use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, MatchedPath, Path, Request};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use companiond_core::{AppState, Ext};
use serde::de::DeserializeOwned;
use serde_json::Value;
use utoipa::IntoParams;

use super::body::{invalid, BodyCharacter, BodySession};
use super::input::{body_map, game_type_of};
use crate::error::{Failure, Reason};
use crate::games::ICEBREAKER_GAME_TYPE;

/// `{game_type}`: the game (`soccer`, `badminton`, ...), compared lower-cased.
/// Any text is taken: one that is not 1 to 64 characters of `[A-Za-z0-9_-]` is
/// answered `{ok:false, reason:"invalid_game_type"}` with 200, as the original
/// did. The extractor holds the normalised segment (see [`game_type_of`]).
#[derive(IntoParams)]
#[into_params(names("game_type"))]
pub struct GameType(#[param(example = "soccer")] pub String);

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

/// A route's JSON body as its type `T`: the body is read as an object (at
/// most `MAX_BODY`; empty is `{}`; anything that is no JSON object is
/// `invalid_body`), then as `T`. A body type's fields are
/// [`super::body::Field`]s, which take any value, so reading `T` does not
/// fail on a field; the handler judges each field as it reads it.
pub struct Body<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for Body<T> {
    type Rejection = Failure;

    async fn from_request(req: Request, _: &AppState) -> Result<Self, Failure> {
        read(req.into_body()).await.map(Body)
    }
}

/// Read a body as `T` (see [`Body`]).
async fn read<T: DeserializeOwned>(body: axum::body::Body) -> Result<T, Failure> {
    let object = body_map(body).await?;
    // An object has each key once, so serde's "duplicate field" cannot arise;
    // a body type whose fields are all `Field`s or kept values reads any object.
    serde_json::from_value(Value::Object(object)).map_err(|e| invalid(e.to_string()))
}

/// A body that names the character (required) and the session of a route
/// call ([`RouteCall`]).
pub trait Routed {
    fn caller(&self) -> (&BodyCharacter, &BodySession);
}

/// A call about the character's route of a game type: the `{game_type}`, the
/// JSON object body as `T`, the character (required) and the session
/// (optional), checked in that order.
pub struct RouteCall<T> {
    pub game_type: String,
    pub persona: String,
    pub session: Option<String>,
    pub body: T,
}

impl<T: DeserializeOwned + Routed> FromRequest<AppState> for RouteCall<T> {
    type Rejection = Failure;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Failure> {
        let (mut parts, body) = req.into_parts();
        let GameType(game_type) = GameType::from_request_parts(&mut parts, state).await?;
        let body: T = read(body).await?;
        let (character, session) = body.caller();
        let persona = character.name()?;
        let session = session.id()?;
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
/// icebreaker state) and the JSON object body as `T`. After the path extractors.
pub struct FamilyCall<F, T>(pub AppState, pub Arc<F>, pub T);

impl<F: Send + Sync + 'static, T: DeserializeOwned> FromRequest<AppState> for FamilyCall<F, T> {
    type Rejection = Response;

    async fn from_request(req: Request, st: &AppState) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let Ext(state) = Ext::<F>::from_request_parts(&mut parts, st).await?;
        match read(body).await {
            Ok(body) => Ok(FamilyCall(st.clone(), state, body)),
            Err(f) => Err(f.into_response()),
        }
    }
}
