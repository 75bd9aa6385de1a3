//! The HTTP side of core: everything that knows about requests and responses.
//! The domain (`crate::state`, `crate::characters`, `crate::sessions`, ...) never
//! imports from here; see docs/ARCHITECTURE.md.
//!
//! * [`api`]: the route builder that keeps the router and `/openapi.json` in step;
//! * [`openapi`]: the OpenAPI 3.1 document built from what each route states;
//! * [`front`]: the front door (Host allowlist, cross-site writes, WebSocket
//!   Origin, panics) every request passes;
//! * [`guards`]: the loopback guard and the CSRF guard;
//! * [`envelope`]: the error envelopes of each family, the JSON body extractor (422)
//!   and the no-store helper;
//! * [`multipart`]: the multipart extractor and the discarding of unread bodies;
//! * [`characters`]: the characters routes; [`cards`]: the character card routes;
//! * [`chat_socket`], [`chat_dialect`]: the chat WebSocket and the original
//!   application's frame protocol on it;
//! * [`health`]: `/healthz`, `/readyz`, `/metrics`;
//! * [`observe`]: request id, trace span and log line, request metrics;
//! * [`static_files`]: `/static/`, `/user_mmd/`, `/user_pngtuber/`, `/workshop/`;
//! * [`Ext`]: how a handler reaches its family's state.

pub mod api;
pub mod backup;
pub mod cards;
pub mod characters;
pub mod chat_dialect;
mod chat_mic;
pub mod chat_socket;
pub mod envelope;
mod ext;
pub mod front;
pub mod guards;
pub mod health;
pub mod multipart;
pub mod observe;
pub mod openapi;
pub mod static_files;

pub use ext::Ext;
