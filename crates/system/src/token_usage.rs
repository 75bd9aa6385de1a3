//! Token-usage statistics (`GET /api/token-usage`): the report side of the usage
//! that core records per model call in SQLite (`<data>/state/token_usage.db`,
//! `companiond_core::usage`).

use std::collections::BTreeMap;

use companiond_core::usage::{DailyRow, TokenUsage, UsageRow};
use serde::Serialize;

/// Largest `days` honoured.
pub const MAX_DAYS: i64 = 90;
/// Default `days`.
pub const DEFAULT_DAYS: i64 = 7;
/// `recent_records` length.
pub const RECENT: usize = 20;

const DAY: i64 = 86_400;

/// `YYYY-MM-DD` (UTC) of a Unix timestamp.
pub fn date_of(ts: i64) -> String {
    match time::OffsetDateTime::from_unix_timestamp(ts) {
        Ok(t) => {
            let d = t.date();
            format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day())
        }
        Err(_) => "1970-01-01".into(),
    }
}

#[derive(Debug, Default, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = UsageBucket)]
struct Bucket {
    prompt_tokens: i64,
    completion_tokens: i64,
    total_tokens: i64,
    cached_tokens: i64,
    prompt_chars: i64,
    call_count: i64,
}

impl Bucket {
    fn add_daily(&mut self, r: &DailyRow) {
        self.prompt_tokens += r.prompt_tokens;
        self.completion_tokens += r.completion_tokens;
        self.total_tokens += r.total_tokens;
        self.call_count += r.calls;
    }
    #[cfg(test)]
    fn add(&mut self, r: &UsageRow) {
        self.prompt_tokens += r.prompt_tokens;
        self.completion_tokens += r.completion_tokens;
        self.total_tokens += r.total_tokens;
        self.call_count += 1;
    }
}

#[derive(Debug, Default, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = UsageDay)]
pub struct Day {
    total_prompt_tokens: i64,
    total_completion_tokens: i64,
    total_tokens: i64,
    cached_tokens: i64,
    total_prompt_chars: i64,
    call_count: i64,
    error_count: i64,
    estimated_count: i64,
    by_model: BTreeMap<String, Bucket>,
    by_call_type: BTreeMap<String, Bucket>,
}

/// The answer of `GET /api/token-usage`.
#[derive(Debug, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = TokenUsage)]
pub struct Statistics {
    /// The days of the window that have calls, keyed `YYYY-MM-DD`, oldest first
    /// (the dates sort as the days do).
    pub daily_stats: BTreeMap<String, Day>,
    /// The newest [`RECENT`] distinct calls, oldest first.
    pub recent_records: Vec<Record>,
    /// The clamped `days`.
    pub days: i64,
}

/// One call of `recent_records`, under the short keys the clients read.
#[derive(Debug, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = UsageRecord)]
pub struct Record {
    /// Unix seconds (a float on the wire).
    pub ts: f64,
    pub model: String,
    pub pt: i64,
    pub ct: i64,
    pub tt: i64,
    /// Cached tokens (not recorded: always 0).
    pub cch: i64,
    /// Prompt characters (not recorded: always 0).
    pub pch: i64,
    #[serde(rename = "type")]
    pub call_type: String,
    pub src: String,
    pub ok: bool,
    pub estimated: bool,
}

/// The earliest timestamp needed: the start of the oldest UTC day of the window
/// (always the 90-day window so `recent_records` has material).
pub fn window_start(now: i64) -> i64 {
    let today = now - now.rem_euclid(DAY);
    today - (MAX_DAYS - 1) * DAY
}

/// The statistics of the last `days` UTC calendar days ending today, from the
/// pre-aggregated daily rows and the newest calls (blocking: SQLite). Costs the
/// same whatever the number of recorded calls.
pub fn statistics(usage: &TokenUsage, days: i64, now: i64) -> Result<Statistics, String> {
    // Clamped first: a client's `days` may be any i64.
    let days = days.clamp(0, MAX_DAYS);
    let today = now - now.rem_euclid(DAY);
    let daily_rows = if days > 0 {
        usage.daily(today - (days - 1) * DAY, today)?
    } else {
        Vec::new()
    };
    // The newest calls of the 90-day window, deduplicated as `recent_records`
    // is: fetch more until the last RECENT runs are certainly complete.
    let since = window_start(now);
    let mut want = 4 * RECENT;
    let recent = loop {
        let rows = usage.newest_rows(since, want)?;
        let runs = rows.windows(2).filter(|w| !same_call(&w[0], &w[1])).count()
            + usize::from(!rows.is_empty());
        if rows.len() < want || runs > RECENT {
            break rows;
        }
        want *= 4;
    };
    Ok(render(daily_rows.iter(), &recent, days))
}

fn same_call(a: &UsageRow, b: &UsageRow) -> bool {
    a.ts == b.ts && a.model == b.model && a.slot == b.slot && a.character == b.character
}

/// The body from daily sums (oldest day first) and calls sorted by time.
fn render<'a>(
    daily_rows: impl Iterator<Item = &'a DailyRow>,
    rows: &[UsageRow],
    days: i64,
) -> Statistics {
    let mut daily: BTreeMap<i64, Day> = BTreeMap::new();
    for r in daily_rows {
        let day = daily.entry(r.day).or_default();
        day.total_prompt_tokens += r.prompt_tokens;
        day.total_completion_tokens += r.completion_tokens;
        day.total_tokens += r.total_tokens;
        day.call_count += r.calls;
        day.estimated_count += r.estimated;
        match day.by_model.get_mut(&r.model) {
            Some(b) => b.add_daily(r),
            None => day
                .by_model
                .entry(r.model.clone())
                .or_default()
                .add_daily(r),
        }
        match day.by_call_type.get_mut(&r.slot) {
            Some(b) => b.add_daily(r),
            None => day
                .by_call_type
                .entry(r.slot.clone())
                .or_default()
                .add_daily(r),
        }
    }
    body(daily, rows, days)
}

/// The answer: days keyed by date, the newest [`RECENT`] distinct calls of `rows`
/// (sorted by time), the clamped `days`.
fn body(daily: BTreeMap<i64, Day>, rows: &[UsageRow], days: i64) -> Statistics {
    let mut recent: Vec<&UsageRow> = rows.iter().collect();
    recent.dedup_by(|a, b| same_call(a, b));
    let start = recent.len().saturating_sub(RECENT);
    let recent_records = recent[start..]
        .iter()
        .map(|r| Record {
            ts: r.ts as f64,
            model: r.model.clone(),
            pt: r.prompt_tokens,
            ct: r.completion_tokens,
            tt: r.total_tokens,
            cch: 0,
            pch: 0,
            call_type: r.slot.clone(),
            src: r.character.clone(),
            ok: true,
            estimated: r.estimated,
        })
        .collect();
    Statistics {
        daily_stats: daily.into_iter().map(|(ts, d)| (date_of(ts), d)).collect(),
        recent_records,
        days,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// The answer as the client reads it.
    fn wire(s: Statistics) -> Value {
        serde_json::to_value(s).unwrap()
    }

    fn row(ts: i64, model: &str, slot: &str, t: i64) -> UsageRow {
        UsageRow::sample(ts, model, slot, t, false)
    }

    #[test]
    fn window_and_buckets() {
        let now = 1_700_000_000;
        let rows = vec![
            row(now - 10 * DAY, "m", "emotion", 5),
            row(now - DAY, "m", "emotion", 2),
            row(now, "m", "conversation", 3),
            row(now, "n", "conversation", 4),
        ];
        let v = wire(aggregate(&rows, 7, now));
        let daily = v["daily_stats"].as_object().unwrap();
        assert_eq!(daily.len(), 2);
        let today = &daily[&date_of(now)];
        assert_eq!(today["call_count"], 2);
        assert_eq!(today["total_prompt_tokens"], 7);
        assert_eq!(today["by_model"]["n"]["total_tokens"], 5);
        assert_eq!(today["by_call_type"]["conversation"]["call_count"], 2);
        assert_eq!(v["recent_records"].as_array().unwrap().len(), 4);
        assert_eq!(wire(aggregate(&rows, 0, now))["daily_stats"], json!({}));
        assert_eq!(wire(aggregate(&rows, -3, now))["daily_stats"], json!({}));
        assert_eq!(
            wire(aggregate(&rows, 500, now))["daily_stats"]
                .as_object()
                .unwrap()
                .len(),
            3
        );
        assert_eq!(date_of(0), "1970-01-01");
    }

    /// The previous implementation (every call of the window aggregated per
    /// request): the reference [`statistics`] must equal.
    fn aggregate(rows: &[UsageRow], days: i64, now: i64) -> Statistics {
        // Clamped first: a client's `days` may be any i64.
        let days = days.clamp(0, MAX_DAYS);
        let today = now - now.rem_euclid(DAY);
        let from = today - (days - 1) * DAY;
        let mut daily: BTreeMap<i64, Day> = BTreeMap::new();
        if days > 0 {
            for r in rows.iter().filter(|r| r.ts >= from && r.ts < today + DAY) {
                let day = daily.entry(r.ts - r.ts.rem_euclid(DAY)).or_default();
                day.total_prompt_tokens += r.prompt_tokens;
                day.total_completion_tokens += r.completion_tokens;
                day.total_tokens += r.total_tokens;
                day.call_count += 1;
                if r.estimated {
                    day.estimated_count += 1;
                }
                match day.by_model.get_mut(&r.model) {
                    Some(b) => b.add(r),
                    None => day.by_model.entry(r.model.clone()).or_default().add(r),
                }
                match day.by_call_type.get_mut(&r.slot) {
                    Some(b) => b.add(r),
                    None => day.by_call_type.entry(r.slot.clone()).or_default().add(r),
                }
            }
        }
        let mut sorted = rows.to_vec();
        sorted.sort_by_key(|r| r.ts);
        body(daily, &sorted, days)
    }

    #[test]
    fn statistics_equal_a_full_aggregation() {
        let dir = tempfile::tempdir().unwrap();
        let u = TokenUsage::new(dir.path().join("token_usage.db"));
        let now = 1_700_000_000;
        let mut rows = Vec::new();
        for i in 0..3_000i64 {
            // Spread over 120 days, with runs of identical calls and some future ones.
            let ts = now + 3 * DAY - (i / 3) * 3_457;
            let mut r = row(
                ts,
                ["m", "n", "o"][(i % 3) as usize],
                ["emotion", "conversation"][(i % 2) as usize],
                i % 17,
            );
            if i % 7 == 0 {
                r.model = "m".into();
                r.slot = "emotion".into();
            }
            r.estimated = i % 5 == 0;
            rows.push(r);
        }
        // Runs of identical calls (same ts, model, slot, character) at the end.
        for k in 0..30 {
            rows.push(row(now, "m", "emotion", k));
        }
        u.record_many(&rows).unwrap();
        let all = u.rows_since(window_start(now)).unwrap();
        for days in [-3, 0, 1, 7, 30, 90, 500] {
            assert_eq!(
                statistics(&u, days, now).unwrap(),
                aggregate(&all, days, now),
                "days={days}"
            );
        }
    }
}
