//! What this device has of each character, without re-hashing unchanged units:
//! a character's fingerprint (which takes a SQLite snapshot and hashes every
//! member) is kept with its profile and the stamps (device, inode, size,
//! times) of its managed files and of the SQLite write-ahead log. A summary
//! then costs one `lstat` per member; only units whose profile or files changed
//! are hashed again. Values computed from files changed within
//! [`companiond_core::stamp::RACY`] are not kept.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Mutex;
use std::time::SystemTime;

use companiond_core::stamp::{all_settled, Stamp};
use serde_json::Value;

use crate::unit::{self, MANAGED_FILES};

/// The local facts of one character's unit.
pub struct LocalFacts {
    pub fingerprint: Option<String>,
    /// Latest modification time of the managed files, RFC 3339 (empty when none).
    pub updated_at: String,
    /// Present managed files and their sizes.
    pub files: BTreeMap<String, u64>,
}

struct Entry {
    profile: Value,
    stamps: Vec<Option<Stamp>>,
    fingerprint: Option<String>,
}

/// Fingerprints by character (one per cloud-save family).
#[derive(Default)]
pub struct LocalCache {
    entries: Mutex<HashMap<String, Entry>>,
}

fn rfc3339(t: SystemTime) -> String {
    time::OffsetDateTime::from(t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

impl LocalCache {
    /// The facts of `name`'s unit (blocking).
    pub fn facts(&self, name: &str, profile: &Value, mem_dir: &Path, staging: &Path) -> LocalFacts {
        let computed_at = SystemTime::now();
        let mut stamps = Vec::with_capacity(MANAGED_FILES.len() + 1);
        let mut files = BTreeMap::new();
        let mut latest: Option<SystemTime> = None;
        for f in MANAGED_FILES {
            match std::fs::symlink_metadata(mem_dir.join(f)) {
                Ok(m) => {
                    if m.file_type().is_file() {
                        files.insert(f.to_string(), m.len());
                        if let Ok(t) = m.modified() {
                            latest = Some(latest.map_or(t, |l| l.max(t)));
                        }
                    }
                    stamps.push(Some(Stamp::of(&m)));
                }
                Err(_) => stamps.push(None),
            }
        }
        // The SQLite member's content also lives in its write-ahead log.
        stamps.push(companiond_core::stamp::lstamp(
            &mem_dir.join(unit::SQLITE_SIDECARS[0]),
        ));
        let known = {
            let map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            map.get(name)
                .filter(|e| e.stamps == stamps && &e.profile == profile)
                .map(|e| e.fingerprint.clone())
        };
        let fingerprint = match known {
            Some(fp) => fp,
            None => {
                // Stamps were taken before hashing: a change racing with it
                // shows as another stamp next time.
                let fp = unit::local_fingerprint(name, profile, mem_dir, staging);
                let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
                if all_settled(&stamps, computed_at) {
                    map.insert(
                        name.to_string(),
                        Entry {
                            profile: profile.clone(),
                            stamps,
                            fingerprint: fp.clone(),
                        },
                    );
                } else {
                    map.remove(name);
                }
                fp
            }
        };
        LocalFacts {
            fingerprint,
            updated_at: latest.map(rfc3339).unwrap_or_default(),
            files,
        }
    }

    /// Forget characters that no longer exist.
    pub fn retain(&self, names: &HashSet<&str>) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|k, _| names.contains(k.as_str()));
    }
}
