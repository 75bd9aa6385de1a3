//! Times of the memory stores.
//!
//! Entries carry the original application's naive ISO form
//! (`2025-05-01T12:34:56.123456`, Python `datetime.isoformat()`); companiond
//! writes UTC there. Reading accepts that form, a space instead of `T`, an
//! optional `Z` / `±HH:MM` offset, and a bare date. Internally times are
//! milliseconds since the Unix epoch.

use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

fn at(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// `YYYY-MM-DDTHH:MM:SS.ffffff` (UTC, no offset: the original's naive form).
pub fn iso(ms: i64) -> String {
    let t = at(ms);
    let (h, m, sec) = (t.hour(), t.minute(), t.second());
    format!("{}T{h:02}:{m:02}:{sec:02}.{:06}", date(ms), t.microsecond())
}

/// `YYYY-MM-DD HH:MM` (UTC), for text shown to the model.
pub fn short(ms: i64) -> String {
    let t = at(ms);
    format!("{} {:02}:{:02}", date(ms), t.hour(), t.minute())
}

/// `YYYY-MM-DD` (UTC).
pub fn date(ms: i64) -> String {
    let t = at(ms);
    format!("{:04}-{:02}-{:02}", t.year(), t.month() as u8, t.day())
}

/// `YYYYmmddHHMMSS` (UTC), for ids.
pub fn compact(ms: i64) -> String {
    let t = at(ms);
    format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}",
        t.year(),
        t.month() as u8,
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

fn num(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn parse_date(s: &str) -> Option<Date> {
    let mut it = s.splitn(3, '-');
    let (y, m, d) = (it.next()?, it.next()?, it.next()?);
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let month = Month::try_from(num(m)? as u8).ok()?;
    Date::from_calendar_date(num(y)? as i32, month, num(d)? as u8).ok()
}

/// Parse a time (see the module doc); `None` when it is not one.
pub fn parse(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.len() < 10 || !s.is_char_boundary(10) {
        return None;
    }
    let date = parse_date(&s[..10])?;
    let rest = &s[10..];
    if rest.is_empty() {
        return Some(ms_of(
            PrimitiveDateTime::new(date, Time::MIDNIGHT),
            UtcOffset::UTC,
        ));
    }
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    // Split off an offset.
    let (clock, offset) = if let Some(c) = rest.strip_suffix(['Z', 'z']) {
        (c, UtcOffset::UTC)
    } else if let Some(pos) = rest.rfind(['+', '-']) {
        let (c, o) = rest.split_at(pos);
        let sign: i8 = if o.starts_with('-') { -1 } else { 1 };
        let o = &o[1..];
        let (h, m) = o
            .split_once(':')
            .unwrap_or((o.get(..2)?, o.get(2..).unwrap_or("0")));
        let (h, m) = (
            num(h)? as i8,
            num(if m.is_empty() { "0" } else { m })? as i8,
        );
        (c, UtcOffset::from_hms(sign * h, sign * m, 0).ok()?)
    } else {
        (rest, UtcOffset::UTC)
    };
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, ""));
    let mut parts = hms.split(':');
    let h = num(parts.next()?)?;
    let mi = num(parts.next()?)?;
    let se = match parts.next() {
        Some(x) => num(x)?,
        None => 0,
    };
    if parts.next().is_some() {
        return None;
    }
    let nanos = if frac.is_empty() {
        0
    } else {
        let digits: String = frac.chars().take(9).collect();
        let n = num(&digits)?;
        n * 10u32.pow(9 - digits.len() as u32)
    };
    let t = Time::from_hms_nano(h as u8, mi as u8, se as u8, nanos).ok()?;
    Some(ms_of(PrimitiveDateTime::new(date, t), offset))
}

fn ms_of(t: PrimitiveDateTime, offset: UtcOffset) -> i64 {
    (t.assume_offset(offset).unix_timestamp_nanos() / 1_000_000) as i64
}

/// A window bound given by a client: a time, or a bare date (its start, or
/// with `end` its last millisecond), or a number of seconds since the epoch.
pub fn bound(s: &str, end: bool) -> Option<i64> {
    let s = s.trim();
    let (whole, frac) = s.split_once('.').unwrap_or((s, "0"));
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if digits(whole) && digits(frac) {
        let secs: f64 = s.parse().ok()?;
        // Seconds since the epoch, years 1970..=9999.
        if secs.is_finite() && (0.0..=253_402_300_799.0).contains(&secs) {
            return Some((secs * 1000.0) as i64);
        }
        return None;
    }
    let t = parse(s)?;
    if end && s.len() == 10 {
        return Some(t + 86_400_000 - 1);
    }
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_forms() {
        let ms = 1_714_567_890_123;
        assert_eq!(iso(ms), "2024-05-01T12:51:30.123000");
        assert_eq!(parse(&iso(ms)), Some(ms));
        assert_eq!(parse("2024-05-01 12:51:30.123"), Some(ms));
        assert_eq!(parse("2024-05-01T14:51:30.123+02:00"), Some(ms));
        assert_eq!(parse("2024-05-01T12:51:30.123Z"), Some(ms));
        assert_eq!(parse("2024-05-01"), Some(1_714_521_600_000));
        assert_eq!(
            bound("2024-05-01", true),
            Some(1_714_521_600_000 + 86_399_999)
        );
        assert_eq!(bound("1714567890.123", false), Some(ms));
        for bad in [
            "",
            "2024-13-01",
            "2024-05-01X",
            "yesterday",
            "2024-05-01T25:00",
            "-5",
            "1e300",
            "1e5",
            "+5",
            ".5",
            "5.",
            "inf",
        ] {
            assert_eq!(bound(bad, false), None, "{bad}");
        }
        assert_eq!(compact(ms), "20240501125130");
        assert_eq!(date(ms), "2024-05-01");
    }
}
