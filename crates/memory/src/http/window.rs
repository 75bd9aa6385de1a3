//! The search window of the long-term listings and search: free text,
//! time bounds and paging, checked and turned into an index [`Query`].

use crate::error::MemoryError;
use crate::index::Query;
use crate::timefmt;

use super::bad;

/// Longest free-text query.
const MAX_QUERY_CHARS: usize = 1000;

/// An integer within `range`, `default` when absent.
fn int_param(
    v: Option<i64>,
    key: &str,
    default: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, MemoryError> {
    let Some(v) = v else {
        return Ok(default);
    };
    match usize::try_from(v) {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(bad(format!(
            "{key} must be an integer from {} to {}",
            range.start(),
            range.end()
        ))),
    }
}

/// The search window of a listing or a search: `q`, `since`, `until`,
/// `offset`, `limit` (checked and ordered).
pub(super) struct Window<'a> {
    pub(super) q: Option<&'a str>,
    pub(super) since: Option<&'a str>,
    pub(super) until: Option<&'a str>,
    pub(super) offset: Option<i64>,
    pub(super) limit: Option<i64>,
}

impl Window<'_> {
    pub(super) fn query(&self, max_limit: usize) -> Result<Query, MemoryError> {
        let text = self.q.unwrap_or_default().to_string();
        if text.chars().count() > MAX_QUERY_CHARS {
            return Err(bad(format!(
                "q is longer than {MAX_QUERY_CHARS} characters"
            )));
        }
        let time = |k: &str, v: Option<&str>, end: bool| -> Result<Option<i64>, MemoryError> {
            match v {
                None => Ok(None),
                Some(s) => timefmt::bound(s, end).map(Some).ok_or_else(|| {
                    bad(format!(
                        "{k} must be a date (YYYY-MM-DD), an ISO date-time or seconds since the epoch"
                    ))
                }),
            }
        };
        let since = time("since", self.since, false)?;
        let until = time("until", self.until, true)?;
        if let (Some(a), Some(b)) = (since, until) {
            if a > b {
                return Err(bad("since is after until"));
            }
        }
        Ok(Query {
            text,
            since,
            until,
            offset: int_param(self.offset, "offset", 0, 0..=100_000)?,
            limit: int_param(self.limit, "limit", 50.min(max_limit), 1..=max_limit)?,
        })
    }
}

/// The schema of a window bound (`timefmt::bound`): a date, an RFC 3339
/// date-time, or seconds since the epoch (digits, an optional fraction); blank
/// is no bound.
pub(super) fn time_bound() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{AnyOfBuilder, KnownFormat, ObjectBuilder, SchemaFormat, Type};
    let string = || ObjectBuilder::new().schema_type(Type::String);
    AnyOfBuilder::new()
        .item(string().format(Some(SchemaFormat::KnownFormat(KnownFormat::Date))))
        .item(string().format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime))))
        .item(string().pattern(Some("^[0-9]{1,11}(\\.[0-9]{1,6})?$")))
        .item(string().pattern(Some("^ *$")))
        .build()
        .into()
}
