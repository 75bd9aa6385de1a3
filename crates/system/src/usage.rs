//! `GET /api/token-usage`: daily statistics over the model calls core records in
//! SQLite (`<data>/state/token_usage.db`).

use std::collections::BTreeMap;

use companiond_core::usage::UsageRow;
use serde::Serialize;
use serde_json::{json, Map, Value};

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

#[derive(Default, Serialize)]
struct Bucket {
    prompt_tokens: i64,
    completion_tokens: i64,
    total_tokens: i64,
    cached_tokens: i64,
    prompt_chars: i64,
    call_count: i64,
}

impl Bucket {
    fn add(&mut self, r: &UsageRow) {
        self.prompt_tokens += r.prompt_tokens;
        self.completion_tokens += r.completion_tokens;
        self.total_tokens += r.total_tokens;
        self.call_count += 1;
    }
}

#[derive(Default, Serialize)]
struct Day {
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

/// The earliest timestamp needed: the start of the oldest UTC day of the window
/// (always the 90-day window so `recent_records` has material).
pub fn window_start(now: i64) -> i64 {
    let today = now - now.rem_euclid(DAY);
    today - (MAX_DAYS - 1) * DAY
}

/// Aggregate `rows` for the last `days` UTC calendar days ending today.
pub fn aggregate(rows: &[UsageRow], days: i64, now: i64) -> Value {
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
    let mut recent: Vec<&UsageRow> = rows.iter().collect();
    recent.sort_by_key(|r| r.ts);
    recent.dedup_by(|a, b| {
        a.ts == b.ts && a.model == b.model && a.slot == b.slot && a.character == b.character
    });
    let start = recent.len().saturating_sub(RECENT);
    let records: Vec<Value> = recent[start..]
        .iter()
        .map(|r| {
            json!({"ts": r.ts as f64, "model": r.model, "pt": r.prompt_tokens,
                   "ct": r.completion_tokens, "tt": r.total_tokens, "cch": 0, "pch": 0,
                   "type": r.slot, "src": r.character, "ok": true, "estimated": r.estimated})
        })
        .collect();
    let daily: Map<String, Value> = daily
        .into_iter()
        .map(|(ts, d)| (date_of(ts), serde_json::to_value(d).unwrap_or(Value::Null)))
        .collect();
    json!({"daily_stats": daily, "recent_records": records, "days": days})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ts: i64, model: &str, slot: &str, t: i64) -> UsageRow {
        UsageRow {
            ts,
            slot: slot.into(),
            model: model.into(),
            character: "A".into(),
            prompt_tokens: t,
            completion_tokens: 1,
            total_tokens: t + 1,
            estimated: false,
        }
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
        let v = aggregate(&rows, 7, now);
        let daily = v["daily_stats"].as_object().unwrap();
        assert_eq!(daily.len(), 2);
        let today = &daily[&date_of(now)];
        assert_eq!(today["call_count"], 2);
        assert_eq!(today["total_prompt_tokens"], 7);
        assert_eq!(today["by_model"]["n"]["total_tokens"], 5);
        assert_eq!(today["by_call_type"]["conversation"]["call_count"], 2);
        assert_eq!(v["recent_records"].as_array().unwrap().len(), 4);
        assert_eq!(aggregate(&rows, 0, now)["daily_stats"], json!({}));
        assert_eq!(aggregate(&rows, -3, now)["daily_stats"], json!({}));
        assert_eq!(
            aggregate(&rows, 500, now)["daily_stats"]
                .as_object()
                .unwrap()
                .len(),
            3
        );
        assert_eq!(date_of(0), "1970-01-01");
    }
}
