//! The character unit: the managed flat memory files of a character
//! (see docs/cloudsave.md), the character's profile and the meta record; canonical JSON, the payload
//! fingerprint, consistent local snapshots (SQLite through the backup API) and
//! verification of downloaded payloads. Blocking code (run it through
//! `companiond_core::task::blocking`).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

/// The flat files of a unit, when they exist.
/// Everything else in the memory folder (archive dirs, recent_meta.json,
/// recovery state, worker sidecars, SQLite -wal/-shm) stays local.
pub const MANAGED_FILES: &[&str] = companiond_core::layout::CHARACTER_UNIT_FILES;

/// The SQLite member, exported as a backup-API snapshot.
pub const SQLITE_FILE: &str = "time_indexed.db";

/// Side files of the SQLite member that are removed with it on import.
pub const SQLITE_SIDECARS: &[&str] = &["time_indexed.db-wal", "time_indexed.db-shm"];

/// Schema of the meta record.
pub const META_SCHEMA: u32 = 1;

pub fn is_managed(name: &str) -> bool {
    MANAGED_FILES.contains(&name)
}

/// One member file of a payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FileEntry {
    pub sha256: String,
    pub size: u64,
}

/// `characters/<name>/meta.json`: written last; names the published payload.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct Meta {
    pub schema_version: u32,
    pub character_name: String,
    /// `sha256:<hex>` over the canonical profile and each file's sha256.
    pub payload_fingerprint: String,
    pub updated_at_utc: String,
    pub sequence_number: u64,
    pub source_client_id: String,
    /// The payload folder this record publishes.
    pub payload_id: String,
    /// sha256 of `profile.json` as stored (canonical JSON).
    pub profile_sha256: String,
    pub profile_size: u64,
    pub files: BTreeMap<String, FileEntry>,
    #[serde(default)]
    pub display_name: String,
    #[serde(default)]
    pub model_type: String,
    #[serde(default)]
    pub asset_source: String,
    #[serde(default)]
    pub asset_source_id: String,
}

/// Serialise with object keys sorted at every level and no whitespace.
pub fn canonical_json(v: &Value) -> String {
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    walk(&m[k.as_str()], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    walk(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    walk(v, &mut out);
    out
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// sha256 and size of a file, streamed.
pub fn hash_file(path: &Path) -> std::io::Result<FileEntry> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    Ok(FileEntry {
        sha256: hex::encode(h.finalize()),
        size,
    })
}

/// `sha256:<hex>` of the canonical `{schema_version, character_name, profile, memory_files}`.
pub fn fingerprint(name: &str, profile: &Value, files: &BTreeMap<String, FileEntry>) -> String {
    let memory: serde_json::Map<String, Value> = files
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.sha256.clone())))
        .collect();
    let doc = json!({
        "schema_version": META_SCHEMA,
        "character_name": name,
        "profile": profile,
        "memory_files": memory,
    });
    format!("sha256:{}", sha256_hex(canonical_json(&doc).as_bytes()))
}

/// Avatar fields of a profile (`_reserved.avatar` or top-level).
pub fn avatar_fields(profile: &Value) -> (String, String, String) {
    let avatar = profile
        .get("_reserved")
        .and_then(|r| r.get("avatar"))
        .or_else(|| profile.get("avatar"));
    let s = |k: &str| {
        avatar
            .and_then(|a| a.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    (s("model_type"), s("asset_source"), s("asset_source_id"))
}

/// Display name: profile `display_name` or `档案名`, else the name.
pub fn display_name(name: &str, profile: &Value) -> String {
    ["display_name", "档案名"]
        .iter()
        .find_map(|k| profile.get(*k).and_then(Value::as_str))
        .filter(|s| !s.trim().is_empty())
        .unwrap_or(name)
        .to_string()
}

/// Is `p` a regular file (never a symlink)?
fn regular_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file())
}

/// Managed files present in a memory folder.
pub fn present_files(mem_dir: &Path) -> Vec<&'static str> {
    MANAGED_FILES
        .iter()
        .copied()
        .filter(|f| regular_file(&mem_dir.join(f)))
        .collect()
}

/// Copy a SQLite database consistently with the online backup API.
pub fn sqlite_snapshot(src: &Path, dst: &Path) -> Result<(), String> {
    use rusqlite::{Connection, DatabaseName, OpenFlags};
    let conn = Connection::open_with_flags(
        src,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("{SQLITE_FILE}: {e}"))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| format!("{SQLITE_FILE}: {e}"))?;
    conn.backup(DatabaseName::Main, dst, None)
        .map_err(|e| format!("{SQLITE_FILE} is not a readable SQLite database: {e}"))
}

/// A consistent local copy of one character's unit in a private folder.
pub struct Snapshot {
    pub dir: tempfile::TempDir,
    pub profile_path: PathBuf,
    pub profile_entry: FileEntry,
    /// Member file name → its copy in `dir`.
    pub paths: BTreeMap<String, PathBuf>,
    pub files: BTreeMap<String, FileEntry>,
    pub fingerprint: String,
}

/// Why a local snapshot failed.
#[derive(Debug)]
pub enum SnapshotError {
    /// The memory file cannot be exported (not SQLite, unreadable).
    Unreadable(String),
    /// Our own staging failed.
    Io(String),
}

/// Copy the unit of `name` (profile + managed files of `mem_dir`) into a private
/// folder under `staging_root`; the SQLite member goes through the backup API.
pub fn snapshot_local(
    name: &str,
    profile: &Value,
    mem_dir: &Path,
    staging_root: &Path,
) -> Result<Snapshot, SnapshotError> {
    let io = |e: std::io::Error| SnapshotError::Io(e.to_string());
    std::fs::create_dir_all(staging_root).map_err(io)?;
    let dir = tempfile::Builder::new()
        .prefix("upload-")
        .tempdir_in(staging_root)
        .map_err(io)?;
    let profile_bytes = canonical_json(profile).into_bytes();
    let profile_path = dir.path().join("profile.json");
    std::fs::write(&profile_path, &profile_bytes).map_err(io)?;
    let profile_entry = FileEntry {
        sha256: sha256_hex(&profile_bytes),
        size: profile_bytes.len() as u64,
    };
    let mut paths = BTreeMap::new();
    let mut files = BTreeMap::new();
    for f in present_files(mem_dir) {
        let src = mem_dir.join(f);
        let dst = dir.path().join(f);
        if f == SQLITE_FILE {
            sqlite_snapshot(&src, &dst).map_err(SnapshotError::Unreadable)?;
        } else {
            match std::fs::copy(&src, &dst) {
                Ok(_) => {}
                // Removed between the listing and the copy: not part of the unit.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(SnapshotError::Unreadable(format!("{f}: {e}"))),
            }
        }
        files.insert(f.to_string(), hash_file(&dst).map_err(io)?);
        paths.insert(f.to_string(), dst);
    }
    let fingerprint = fingerprint(name, profile, &files);
    Ok(Snapshot {
        dir,
        profile_path,
        profile_entry,
        paths,
        files,
        fingerprint,
    })
}

/// The fingerprint the local unit of `name` would upload with (None when a
/// member cannot be read). Uses a throw-away SQLite snapshot.
pub fn local_fingerprint(
    name: &str,
    profile: &Value,
    mem_dir: &Path,
    staging_root: &Path,
) -> Option<String> {
    let mut files = BTreeMap::new();
    for f in present_files(mem_dir) {
        let src = mem_dir.join(f);
        let entry = if f == SQLITE_FILE {
            std::fs::create_dir_all(staging_root).ok()?;
            let tmp = tempfile::Builder::new()
                .prefix("hash-")
                .tempdir_in(staging_root)
                .ok()?;
            let dst = tmp.path().join(f);
            sqlite_snapshot(&src, &dst).ok()?;
            hash_file(&dst).ok()?
        } else {
            hash_file(&src).ok()?
        };
        files.insert(f.to_string(), entry);
    }
    Some(fingerprint(name, profile, &files))
}

/// Check a downloaded member against its meta entry.
pub fn verify_file(path: &Path, expected: &FileEntry, label: &str) -> Result<(), String> {
    let got = hash_file(path).map_err(|e| format!("{label}: {e}"))?;
    if &got != expected {
        return Err(format!(
            "{label} does not match its recorded checksum (sha256 {}, {} bytes; expected {}, {} bytes)",
            got.sha256, got.size, expected.sha256, expected.size
        ));
    }
    Ok(())
}

/// Load-check an imported memory file the way the memory side reads it: JSON
/// members must parse, the SQLite member must pass `PRAGMA quick_check`.
pub fn load_check(path: &Path, file: &str) -> Result<(), String> {
    if file == SQLITE_FILE {
        use rusqlite::{Connection, OpenFlags};
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| format!("{file}: {e}"))?;
        let r: String = conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(|e| format!("{file}: {e}"))?;
        return if r == "ok" {
            Ok(())
        } else {
            Err(format!("{file}: integrity check failed: {r}"))
        };
    }
    let f = std::fs::File::open(path).map_err(|e| format!("{file}: {e}"))?;
    serde_json::from_reader::<_, serde::de::IgnoredAny>(std::io::BufReader::new(f))
        .map(|_| ())
        .map_err(|e| format!("{file} is not valid JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let a = json!({"b": 1, "a": {"y": [1, {"d": 2, "c": 3}], "x": "é"}});
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"x":"é","y":[1,{"c":3,"d":2}]},"b":1}"#
        );
    }

    #[test]
    fn fingerprint_depends_on_profile_and_files() {
        let mut files = BTreeMap::new();
        files.insert(
            "recent.json".to_string(),
            FileEntry {
                sha256: "aa".into(),
                size: 1,
            },
        );
        let p1 = json!({"a": 1, "b": 2});
        let p2 = json!({"b": 2, "a": 1});
        assert_eq!(fingerprint("x", &p1, &files), fingerprint("x", &p2, &files));
        assert_ne!(
            fingerprint("x", &p1, &files),
            fingerprint("x", &json!({"a": 2}), &files)
        );
        let mut files2 = files.clone();
        files2.get_mut("recent.json").unwrap().sha256 = "bb".into();
        assert_ne!(
            fingerprint("x", &p1, &files),
            fingerprint("x", &p1, &files2)
        );
    }
}
