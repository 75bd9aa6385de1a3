//! Thin HTTP handlers: multipart fields become byte streams, query and JSON
//! bodies become plain values, the domain answers are put into the
//! `{success, ...}` envelope and every [`AvatarError`] into
//! `{success:false, error}`. The family state arrives as `Ext<Avatars>`.

pub mod answers;
pub mod mmd;
pub mod pngtuber;

use std::time::Duration;

use axum::extract::{Multipart, Request};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use companiond_core::envelope::{no_store, ok_json};
use companiond_core::multipart::{with_drain_cap, DrainCap};

use crate::error::AvatarError;

/// After a refused upload, at most this much of the rest of the request is read
/// and discarded (by core's `drain_unread`) so that the client can read the answer
/// instead of a reset.
const REFUSED_UPLOAD_DRAIN: DrainCap = DrainCap {
    bytes: 64 * 1024 * 1024,
    time: Duration::from_secs(10),
};

/// The answer of a route: its typed success body (`{"success": true, ...}`,
/// see [`answers`]) or the error's envelope.
fn done<T: Serialize>(r: Result<T, AvatarError>) -> Response {
    r.map(ok_json).unwrap_or_else(IntoResponse::into_response)
}

/// [`done`], never cached by the browser (listings and mappings).
fn fresh<T: Serialize>(r: Result<T, AvatarError>) -> Response {
    match r {
        Ok(v) => no_store(ok_json(v)),
        Err(e) => e.into_response(),
    }
}

/// A refused upload's answer, with the larger drain allowance.
fn refused(e: AvatarError) -> Response {
    with_drain_cap(e.into_response(), REFUSED_UPLOAD_DRAIN)
}

/// The multipart extractor, with its rejection in the family's envelope.
async fn multipart(req: Request) -> Result<Multipart, AvatarError> {
    companiond_core::multipart::multipart(req)
        .await
        .map_err(|e| AvatarError::invalid("invalid_multipart", e))
}

fn multipart_error(e: impl std::fmt::Display) -> AvatarError {
    AvatarError::invalid("invalid_multipart", format!("invalid multipart body: {e}"))
}
