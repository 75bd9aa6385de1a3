//! The typed bodies of the family's routes: what the handlers read (query
//! parameters, JSON bodies) and answer (`{"success": true, ...}` around the
//! domain's answer). The OpenAPI document is derived from these types
//! (docs/avatars.md § OpenAPI).

use axum::response::{IntoResponse, Response};
use companiond_core::envelope::{body_refused, loose, BodyFault, BodyRejection, SuccessEnvelope};
use serde::{Deserialize, Serialize};

use crate::error::AvatarError;
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use crate::mmd::{
    AnimationEntry, AnimationUploaded, MmdConfig, ModelEntry, ModelUploaded, UserAnimation,
    ZipImported,
};
use crate::pngtuber::{ListedPackage, PackageUploaded};

/// `{"success": true, <fields of the domain answer>}`: one named type per
/// answer (a named schema each in the OpenAPI document).
macro_rules! success_with {
    ($(#[$m:meta])* $name:ident, $inner:ty) => {
        #[derive(Serialize, ToSchema)]
        $(#[$m])*
        pub struct $name {
            /// Always `true`.
            pub success: bool,
            #[serde(flatten)]
            pub body: $inner,
        }

        impl From<$inner> for $name {
            fn from(body: $inner) -> Self {
                $name {
                    success: true,
                    body,
                }
            }
        }
    };
}

success_with!(
    /// `POST /api/model/mmd/upload`: the stored model.
    ModelUploadedAnswer,
    ModelUploaded
);
success_with!(
    /// `POST /api/model/mmd/upload_animation`: the stored animation.
    AnimationUploadedAnswer,
    AnimationUploaded
);
success_with!(
    /// `POST /api/model/mmd/upload_zip`: the imported model folder.
    ZipImportedAnswer,
    ZipImported
);
success_with!(
    /// `GET /api/model/mmd/config`: the URL prefixes of MMD files.
    MmdConfigAnswer,
    MmdConfig
);
success_with!(
    /// `POST /api/model/pngtuber/upload_model`: the stored package.
    PackageUploadedAnswer,
    PackageUploaded
);

/// `{"success": true, <key>: [<entries>]}`: one named type per listing.
macro_rules! listing {
    ($(#[$m:meta])* $name:ident, $key:ident, $entry:ty) => {
        #[derive(Serialize, ToSchema)]
        $(#[$m])*
        pub struct $name {
            /// Always `true`.
            pub success: bool,
            pub $key: Vec<$entry>,
        }

        impl From<Vec<$entry>> for $name {
            fn from($key: Vec<$entry>) -> Self {
                $name {
                    success: true,
                    $key,
                }
            }
        }
    };
}

listing!(
    /// `GET /api/model/mmd/models`.
    #[schema(example = json!({"success": true, "models": [{"name": "Miku",
        "filename": "Miku.pmx", "url": "/user_mmd/Miku/Miku.pmx", "rel_path": "Miku/Miku.pmx",
        "type": "pmx", "size": 123456, "location": "user"}]}))]
    ModelList,
    models,
    ModelEntry
);
listing!(
    /// `GET /api/model/mmd/animations`.
    AnimationList,
    animations,
    AnimationEntry
);
listing!(
    /// `GET /api/model/mmd/animations/list`: the user animations (deletable).
    UserAnimationList,
    animations,
    UserAnimation
);
listing!(
    /// `GET /api/model/pngtuber/models`. The handler writes the cached array
    /// after the bytes of [`PackageList::HEAD`] (a unit test pins them to this type).
    PackageList,
    models,
    ListedPackage
);

impl PackageList {
    /// The serialised answer up to its `models` array.
    pub const HEAD: &'static [u8] = br#"{"success":true,"models":"#;
}

/// `GET /api/model/mmd/emotion_mapping`.
#[derive(Serialize, ToSchema)]
#[schema(example = json!({"success": true, "mapping": {"happy": ["smile", "wink"]}}))]
pub struct MappingAnswer {
    pub success: bool,
    /// The stored mapping as the client saved it (emotion → morphs or
    /// motions; the client owns its shape); `{}` when none is stored.
    #[schema(additional_properties)]
    pub mapping: Map<String, Value>,
}

/// A write that answers a message for people.
#[derive(Serialize, ToSchema)]
pub struct Message {
    pub success: bool,
    pub message: String,
}

impl Message {
    pub fn new(message: String) -> Self {
        Message {
            success: true,
            message,
        }
    }
}

/// `DELETE /api/model/mmd/model`.
#[derive(Serialize, ToSchema)]
pub struct ModelDeleted {
    pub success: bool,
    pub message: String,
    /// Paths of the removed files, relative to the user MMD folder.
    pub deleted_files: Vec<String>,
}

/// `?model=`: which model's emotion mapping.
#[derive(Deserialize, IntoParams)]
pub struct MappingQuery {
    /// The model name (no path separators); absent or blank: `{}` is answered.
    #[param(
        example = "Miku",
        max_length = 200,
        pattern = "^([^./\\\\][^/\\\\]*)?$"
    )]
    pub model: Option<String>,
}

/// `POST /api/model/mmd/emotion_mapping`'s body (a `model` that is blank or
/// absent is `missing_model`, an absent `mapping` `invalid_mapping`; a value of
/// another type, or JSON that is not an object, is refused as a body).
#[derive(Deserialize, ToSchema)]
#[schema(example = json!({"model": "Miku", "mapping": {"happy": ["smile"], "sad": ["cry"]}}))]
pub struct SaveMapping {
    /// The model name: one file name (no path separators, control
    /// characters or `:`, not starting with a dot), at most 200 bytes.
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(
        value_type = String,
        required = true,
        min_length = 1,
        pattern = r"^[^./\\:\x00-\x1f\x7f-\x9f][^/\\:\x00-\x1f\x7f-\x9f]*$"
    )]
    pub model: Option<String>,
    /// Emotion → whatever the client maps it to (stored as sent).
    #[serde(default, deserialize_with = "loose::or_none")]
    #[schema(value_type = Map<String, Value>, required = true, additional_properties)]
    pub mapping: Option<Map<String, Value>>,
}

impl SaveMapping {
    /// The model and the mapping, each missing or mistyped one with its own code.
    pub fn checked(self) -> Result<(String, Map<String, Value>), AvatarError> {
        let Some(model) = self.model.filter(|s| !s.trim().is_empty()) else {
            return Err(missing_model());
        };
        let Some(mapping) = self.mapping else {
            return Err(AvatarError::invalid(
                "invalid_mapping",
                "mapping must be an object",
            ));
        };
        Ok((model, mapping))
    }
}

fn missing_model() -> AvatarError {
    AvatarError::invalid("missing_model", "model is required")
}

/// JSON that is not an object names no model; a body that is not JSON is
/// answered as `JsonBody` does.
impl BodyRejection for SaveMapping {
    type Error = Response;
    fn rejected(fault: BodyFault) -> Response {
        match fault {
            BodyFault::NotObject => missing_model().into_response(),
            f => body_refused::<SuccessEnvelope>(f),
        }
    }
}

/// A non-blank string field of the JSON body, else the query's non-blank value.
fn body_or_query(body: &Value, key: &str, query: Option<String>) -> Option<String> {
    match body.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        _ => query.filter(|s| !s.trim().is_empty()),
    }
}

companiond_core::query_rejected!(
    crate::error::AvatarError,
    |m| crate::error::AvatarError::invalid("invalid_query", m) => MappingQuery, UrlParam, PackageKey
);

/// `url` in the query or the JSON body (the body wins when both are given).
#[derive(Deserialize, IntoParams, ToSchema)]
pub struct UrlParam {
    /// The file's URL as the listing gives it (`/user_mmd/...`).
    #[param(nullable = false, example = "/user_mmd/Miku/Miku.pmx")]
    #[schema(nullable = false, example = "/user_mmd/Miku/Miku.pmx")]
    pub url: Option<String>,
}

impl UrlParam {
    /// The query's fields under the JSON body's (a non-blank body string wins).
    pub fn under(self, body: &Value) -> Self {
        UrlParam {
            url: body_or_query(body, "url", self.url),
        }
    }
}

/// Which PNGTuber package: `folder`, `url` or `name` (the first given wins),
/// in the query or the JSON body.
#[derive(Deserialize, IntoParams, ToSchema)]
pub struct PackageKey {
    /// The package folder (its slug).
    #[param(nullable = false, example = "bunny")]
    #[schema(nullable = false, example = "bunny")]
    pub folder: Option<String>,
    /// A URL ending in `<folder>/model.json`.
    #[param(nullable = false)]
    #[schema(nullable = false)]
    pub url: Option<String>,
    /// The package's display name.
    #[param(nullable = false)]
    #[schema(nullable = false)]
    pub name: Option<String>,
}

impl PackageKey {
    /// The query's fields under the JSON body's (a non-blank body string wins).
    pub fn under(self, body: &Value) -> Self {
        PackageKey {
            folder: body_or_query(body, "folder", self.folder),
            url: body_or_query(body, "url", self.url),
            name: body_or_query(body, "name", self.name),
        }
    }

    /// The identifier to delete by: `folder`, else `url`, else `name`.
    pub fn key(self) -> Option<String> {
        self.folder.or(self.url).or(self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_head_is_the_answers_serialisation() {
        let empty = serde_json::to_vec(&PackageList::from(Vec::new())).unwrap_or_default();
        let mut written = PackageList::HEAD.to_vec();
        written.extend_from_slice(b"[]}");
        assert_eq!(written, empty);
    }
}

#[cfg(test)]
mod body_tests {
    use super::*;
    use companiond_core::envelope::parse_body;

    fn code(s: &str) -> Result<String, String> {
        match parse_body::<SaveMapping>(s.as_bytes()) {
            Ok(b) => b.checked().map(|(m, _)| m).map_err(|e| format!("{:?}", e)),
            Err(f) => Err(format!(
                "status {}",
                SaveMapping::rejected(f).status().as_u16()
            )),
        }
    }

    #[test]
    fn the_mapping_body_keeps_its_codes() {
        assert_eq!(code(r#"{"model": "M", "mapping": {}}"#), Ok("M".into()));
        assert!(
            code(r#"{"model": " ", "mapping": {}}"#).is_err_and(|e| e.contains("missing_model"))
        );
        assert!(code(r#"{"model": "M"}"#).is_err_and(|e| e.contains("invalid_mapping")));
        // A value of another type than the document's is refused as a body.
        assert_eq!(
            code(r#"{"model": 5, "mapping": {}}"#),
            Err("status 422".into())
        );
        assert_eq!(
            code(r#"{"model": "M", "mapping": []}"#),
            Err("status 422".into())
        );
        assert_eq!(code("[1]"), Err("status 400".into()));
        assert_eq!(code("{x"), Err("status 422".into()));
    }
}
