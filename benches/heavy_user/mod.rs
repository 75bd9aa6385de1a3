//! The heavy-user data dir of issue 22, written fast in the product's formats
//! (through its own write paths where one exists): 3,000 characters with full
//! memory units and a published cloud unit each, 2,000 PNGTuber packages,
//! 40,000 recorded model calls and a 25,000-row badminton leaderboard.
//!
//! Shared by the root-crate benchmarks (`#[path = "heavy_user/mod.rs"] mod heavy_user;`).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{json, Map, Value};

/// The sizes of the generated library.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    pub characters: usize,
    pub cloud_units: usize,
    pub pngtuber_packages: usize,
    pub usage_calls: usize,
    /// Days the calls are spread over (ending now).
    pub usage_days: i64,
    pub leaderboard_rows: usize,
    /// Entries of each character's recent.json.
    pub history_entries: usize,
}

impl Sizes {
    /// The sizes of issue 22's table.
    pub const ISSUE_22: Sizes = Sizes {
        characters: 3_000,
        cloud_units: 3_000,
        pngtuber_packages: 2_000,
        usage_calls: 40_000,
        usage_days: 30,
        leaderboard_rows: 25_000,
        history_entries: 20,
    };
}

pub fn character_name(i: usize) -> String {
    format!("Character {i:04}")
}

/// A profile of about 560 bytes, as the character card editor writes them.
pub fn profile(i: usize) -> Value {
    json!({
        "档案名": character_name(i),
        "display_name": format!("Character number {i}"),
        "性别": if i.is_multiple_of(2) { "女" } else { "男" },
        "昵称": format!("C{i}"),
        "voice_id": format!("voice-{:06}", i * 7919 % 1_000_000),
        "system_prompt": format!(
            "You are character {i}, a cheerful desktop companion who likes tea, books and long walks. \
             Speak warmly and briefly; remember what the user told you about their day; never pretend \
             to be a human; keep answers under three sentences unless asked for more. Favourite \
             colour: {}.",
            ["red", "green", "blue", "amber"][i % 4]
        ),
        "live2d": format!("model_{}", i % 50),
        "_reserved": {"avatar": {"model_type": "live2d", "asset_source": "local", "asset_source_id": ""}},
    })
}

fn history(n: usize) -> Vec<u8> {
    let entries: Vec<Value> = (0..n)
        .map(|k| {
            let kind = if k % 2 == 0 { "human" } else { "ai" };
            json!({"type": kind, "data": {"content": format!("message {k}: how was your day? It was fine, thank you for asking.")}})
        })
        .collect();
    serde_json::to_vec(&entries).unwrap_or_default()
}

/// A long history as the chat writes it (pretty JSON): `n` lines of about
/// 200 characters.
pub fn long_history(n: usize) -> Vec<u8> {
    let entries: Vec<Value> = (0..n)
        .map(|k| {
            let kind = if k % 2 == 0 { "human" } else { "ai" };
            let text = format!("line {k:05}: {}", "so how was your day? ".repeat(9));
            json!({"type": kind, "data": {"content": text}})
        })
        .collect();
    serde_json::to_vec_pretty(&entries).unwrap_or_default()
}

/// A 1×1 PNG.
const PNG_1X1: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0xF8, 0xCF, 0xC0, 0xF0,
    0x1F, 0x00, 0x05, 0x00, 0x01, 0xFF, 0x89, 0x99, 0x3D, 0x1D, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
];

fn write(path: &Path, bytes: &[u8]) {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(path, bytes).expect("write");
}

/// Write the data dir `data` (created; must not hold a library yet).
pub fn generate(data: &Path, sizes: Sizes) {
    let t0 = Instant::now();
    std::fs::create_dir_all(data).expect("data dir");
    // Characters file.
    let mut characters = Map::new();
    for i in 0..sizes.characters {
        characters.insert(character_name(i), profile(i));
    }
    let doc = json!({"current": character_name(0), "characters": characters});
    write(
        &data.join("config/characters.json"),
        &serde_json::to_vec_pretty(&doc).expect("json"),
    );

    // One memory unit made by the memory family, copied to every character.
    let template = data.join("state/bench_template");
    std::fs::create_dir_all(&template).expect("template");
    companiond_memory::ensure_memory_files(&template).expect("unit");
    write(
        &template.join("recent.json"),
        &history(sizes.history_entries),
    );
    write(
        &template.join("settings.json"),
        br#"{"mood":"calm","voice":"soft"}"#,
    );
    write(
        &template.join("facts.json"),
        br#"[{"fact":"likes tea"},{"fact":"has a cat"}]"#,
    );
    let unit_files: Vec<PathBuf> = std::fs::read_dir(&template)
        .expect("template")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    for i in 0..sizes.characters {
        let dir = data.join("memory").join(character_name(i));
        std::fs::create_dir_all(&dir).expect("unit dir");
        for f in &unit_files {
            if let Some(name) = f.file_name() {
                std::fs::copy(f, dir.join(name)).expect("copy");
            }
        }
    }

    // Cloud units: the template's snapshot, published once per character.
    let staging = data.join("state/bench_staging");
    let snap = companiond_cloudsave::unit::snapshot_local(
        &character_name(0),
        &profile(0),
        &template,
        &staging,
    )
    .unwrap_or_else(|_| panic!("snapshot"));
    let cloud = data.join("cloud/characters");
    for i in 0..sizes.cloud_units.min(sizes.characters) {
        let name = character_name(i);
        let p = profile(i);
        let payload_id = format!("1700000000000-{i:04}");
        let unit = cloud.join(&name);
        let payload = unit.join("payload").join(&payload_id);
        let canonical = companiond_cloudsave::unit::canonical_json(&p).into_bytes();
        write(&payload.join("profile.json"), &canonical);
        std::fs::create_dir_all(payload.join("memory")).expect("payload");
        for (f, src) in &snap.paths {
            std::fs::hard_link(src, payload.join("memory").join(f)).expect("link");
        }
        let files: BTreeMap<String, companiond_cloudsave::unit::FileEntry> = snap.files.clone();
        let meta = companiond_cloudsave::unit::Meta {
            schema_version: companiond_cloudsave::unit::META_SCHEMA,
            character_name: name.clone(),
            payload_fingerprint: companiond_cloudsave::unit::fingerprint(&name, &p, &files),
            updated_at_utc: "2026-11-01T10:00:00Z".into(),
            sequence_number: 1 + i as u64,
            source_client_id: "benchdevice".into(),
            payload_id,
            profile_sha256: companiond_cloudsave::unit::sha256_hex(&canonical),
            profile_size: canonical.len() as u64,
            files,
            display_name: format!("Character number {i}"),
            model_type: "live2d".into(),
            asset_source: "local".into(),
            asset_source_id: String::new(),
        };
        write(
            &unit.join("meta.json"),
            &serde_json::to_vec(&meta).expect("meta"),
        );
    }
    drop(snap);
    let _ = std::fs::remove_dir_all(&template);
    let _ = std::fs::remove_dir_all(&staging);

    // PNGTuber packages as an upload stores them.
    for i in 0..sizes.pngtuber_packages {
        let folder = format!("pngtuber_{i:04}");
        let pkg = data.join("user_pngtuber").join(&folder);
        write(&pkg.join("idle.png"), PNG_1X1);
        write(&pkg.join("img/talk.png"), PNG_1X1);
        let model = json!({
            "name": format!("PNGTuber {i}"),
            "model_type": "pngtuber",
            "source_format": "simple_package",
            "pngtuber": {
                "idle_image": format!("/user_pngtuber/{folder}/idle.png"),
                "talking_image": format!("/user_pngtuber/{folder}/img/talk.png"),
                "scale": 0.8, "offset_x": 0, "offset_y": 0, "mirror": false,
                "source_type": "transparent_asset", "source_format": "simple_package",
            },
        });
        write(
            &pkg.join("model.json"),
            &serde_json::to_vec_pretty(&model).expect("json"),
        );
    }

    // Token usage through the recorder, one transaction.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let span = sizes.usage_days * 86_400;
    let rows: Vec<companiond_core::usage::UsageRow> = (0..sizes.usage_calls)
        .map(|i| companiond_core::usage::UsageRow {
            ts: now - (i as i64 * 7_919) % span,
            slot: ["conversation", "emotion", "summary", "correction"][i % 4].into(),
            model: format!("model-{}", i % 5),
            character: character_name(i % sizes.characters.max(1)),
            prompt_tokens: 100 + (i % 900) as i64,
            completion_tokens: 20 + (i % 80) as i64,
            total_tokens: 120 + (i % 900) as i64 + (i % 80) as i64,
            estimated: i % 10 == 0,
        })
        .collect();
    companiond_core::usage::TokenUsage::new(data.join("state/token_usage.db"))
        .record_many(&rows)
        .expect("usage");

    // The badminton board.
    use companiond_games::games::leaderboard::{import_scores, ScoreRow, Totals};
    let scores: Vec<ScoreRow> = (0..sizes.leaderboard_rows)
        .map(|i| ScoreRow {
            persona_name: character_name(i % sizes.characters.max(1)),
            session_id: format!("round-{i}"),
            mode: if i % 3 == 0 { "duel" } else { "spectator" }.into(),
            totals: Totals {
                score: ((i * 7_919) % 5_000) as i64,
                streak: (i % 40) as i64,
                max_distance_px: (i % 700) as f64,
            },
            created_at: format!("2026-{:02}-{:02} 12:00:00", 1 + i % 12, 1 + i % 28),
        })
        .collect();
    import_scores(&data.join("state/game_scores/badminton_scores.db"), &scores)
        .expect("leaderboard");
    eprintln!(
        "heavy-user data dir written in {:.1} s: {sizes:?}",
        t0.elapsed().as_secs_f64()
    );
}
