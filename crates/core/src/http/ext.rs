//! [`Ext`]: the one way a handler reaches its family's state.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

/// The family state of type `T`, as the family installed it with
/// [`AppState::provide`] (in its `api()` or `start()`) or created it with
/// [`AppState::ext`]. A handler takes `Ext(jukebox): Ext<Jukebox>` beside
/// `State(state): State<AppState>` when it needs both.
///
/// A missing value is a wiring mistake of the binary, not a client error: the
/// request is answered 500 with a plain message naming the type.
pub struct Ext<T>(pub Arc<T>);

impl<T> std::ops::Deref for Ext<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Send + Sync + 'static> FromRequestParts<AppState> for Ext<T> {
    type Rejection = Response;

    async fn from_request_parts(_: &mut Parts, state: &AppState) -> Result<Self, Response> {
        state.provided::<T>().map(Ext).ok_or_else(|| {
            tracing::error!(
                "family state {} was never provided",
                std::any::type_name::<T>()
            );
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "family state missing (server wiring error)",
            )
                .into_response()
        })
    }
}
