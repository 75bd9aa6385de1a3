//! The HTTP handlers of both families, one module per resource, each with the
//! body types its routes read and the answers they give. Each handler takes
//! its checked input ([`extract`], [`input`], the bodies' fields [`body`]), calls the domain
//! ([`crate::games`], [`crate::icebreaker`]) and turns the typed result into
//! the wire answer.

/// An answer of several shapes, serialized untagged (each shape keeps its
/// field order): its schema is `anyOf` the shapes' schemas. The shapes share
/// fields, so the derive's `oneOf` (exactly one) would not hold.
macro_rules! any_of_schema {
    ($name:ty as $named:literal: $($shape:ty),+ $(,)?) => {
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                let any = utoipa::openapi::schema::AnyOfBuilder::new();
                $(let any = any.item(utoipa::openapi::Ref::from_schema_name(
                    <$shape as utoipa::ToSchema>::name(),
                ));)+
                utoipa::openapi::schema::Schema::AnyOf(any.build()).into()
            }
        }
        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed($named)
            }
            fn schemas(
                out: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>,
            ) {
                $(
                    out.push((
                        <$shape as utoipa::ToSchema>::name().into_owned(),
                        <$shape as utoipa::PartialSchema>::schema(),
                    ));
                    <$shape as utoipa::ToSchema>::schemas(out);
                )+
            }
        }
    };
}

mod body;
/// Route-call bodies ([`extract::RouteCall`]): each names the character in
/// its flattened `character` and the session in its flattened `session`.
macro_rules! routed {
    ($($body:ty),+ $(,)?) => {$(
        impl $crate::http::extract::Routed for $body {
            fn caller(&self) -> (&$crate::http::body::BodyCharacter, &$crate::http::body::BodySession) {
                (&self.character, &self.session)
            }
        }
    )+};
}

pub mod dialogue;
mod extract;
pub mod game_routes;
pub mod icebreaker;
mod input;
pub mod leaderboard;
pub mod logs;
pub mod queries;
pub mod stale;

pub use extract::GameType;
