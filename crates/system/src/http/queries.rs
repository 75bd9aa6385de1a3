//! The query strings of the system routes: each type is the route's parser
//! (`QueryOf<T>`) and its OpenAPI parameters (`Api::query::<T>()`).
//!
//! A required parameter is a plain `String` with `#[serde(default)]`: the
//! document marks it required, and the handler answers its absence with the
//! route's own code (`missing_path`, `missing_url`).

use serde::Deserialize;
use utoipa::IntoParams;

use crate::error::SystemError;

/// `GET /api/token-usage`.
#[derive(Deserialize, IntoParams)]
pub struct TokenUsageQuery {
    /// Days of statistics (clamped to 0..=90).
    #[param(default = 7)]
    pub days: Option<i64>,
}

/// `GET /api/changelog`.
#[derive(Deserialize, IntoParams)]
pub struct ChangelogQuery {
    /// Only entries newer than this version.
    pub since: Option<String>,
    /// The language (`en`, `zh-CN`, ...; the best available is used).
    pub lang: Option<String>,
}

/// `GET /api/survey`.
#[derive(Deserialize, IntoParams)]
pub struct SurveyQuery {
    /// The language (the best available is used).
    pub lang: Option<String>,
}

/// `GET /api/file-exists`.
#[derive(Deserialize, IntoParams)]
pub struct FileExistsQuery {
    /// A path relative to the application folder, or an absolute one (required:
    /// none answers 400 `missing_path`).
    #[param(required = true, pattern = "\\S")]
    #[serde(default)]
    pub path: String,
}

/// `GET /api/find-first-image`.
#[derive(Deserialize, IntoParams)]
pub struct FirstImageQuery {
    /// A folder under the approved roots (required: none answers 400 `missing_path`).
    #[param(required = true, pattern = "\\S")]
    #[serde(default)]
    pub folder: String,
}

/// `GET /api/meme/proxy-image`.
#[derive(Deserialize, IntoParams)]
pub struct MemeUrlQuery {
    /// A public http(s) image URL.
    #[param(required = true, pattern = "\\S")]
    #[serde(default)]
    pub url: String,
}

/// `GET /api/platform/proxy-image`.
#[derive(Deserialize, IntoParams)]
pub struct ImagePathQuery {
    /// A local or workshop image under the approved roots.
    #[param(required = true, pattern = "\\S")]
    #[serde(default)]
    pub image_path: String,
}

// Every system query that does not parse is `invalid_query`, except the
// token-usage `days`, which keeps its own code.
companiond_core::query_rejected!(SystemError, SystemError::InvalidDays => TokenUsageQuery);
companiond_core::query_rejected!(
    SystemError,
    SystemError::InvalidQuery =>
    ChangelogQuery, SurveyQuery, FileExistsQuery, FirstImageQuery, MemeUrlQuery, ImagePathQuery
);
