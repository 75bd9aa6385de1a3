//! What this device has of each character, without re-hashing unchanged units.
//!
//! A character's facts (fingerprint — which takes a SQLite snapshot and hashes
//! every member —, display name, avatar fields, member sizes and latest
//! change) are kept with its profile and the stamps (device, inode, size,
//! times) of its managed files and of the SQLite write-ahead log. A summary
//! then costs one `lstat` per member (spread over the cores); only units whose profile or files
//! changed are hashed again.
//!
//! Profiles are compared only when the characters file changed: the registry
//! writes every change through to that file before it answers with the new
//! profile, so an unchanged (settled) file stamp means unchanged profiles and
//! a repeated summary never copies or compares them. Values computed from
//! files changed within [`companiond_core::stamp::RACY`] are not kept.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use companiond_core::stamp::{all_settled, lstamp, Stamp};
use companiond_core::AppState;
use serde_json::Value;

use crate::unit::{self, MANAGED_FILES};

/// The local facts of one character's unit.
#[derive(Debug)]
pub struct LocalFacts {
    pub fingerprint: Option<String>,
    pub display_name: String,
    pub model_type: String,
    pub asset_source: String,
    pub asset_source_id: String,
    /// Latest modification time of the managed files, RFC 3339 (empty when none).
    pub updated_at: String,
    /// Present managed files and their sizes.
    pub files: BTreeMap<&'static str, u64>,
}

struct Entry {
    profile: Value,
    stamps: Vec<Option<Stamp>>,
    facts: Arc<LocalFacts>,
}

#[derive(Default)]
struct Inner {
    /// The (settled) stamp of the characters file every entry's profile was
    /// last compared under; `None` when the profiles must be compared again.
    profiles_checked: Option<Stamp>,
    entries: HashMap<String, Entry>,
}

/// Facts by character (one per cloud-save family).
#[derive(Default)]
pub struct LocalFactsCache {
    inner: Mutex<Inner>,
}

fn rfc3339(t: SystemTime) -> String {
    time::OffsetDateTime::from(t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The stamps of a unit's members (and of the SQLite write-ahead log), the
/// present members' sizes and their latest modification time.
struct UnitStat {
    stamps: Vec<Option<Stamp>>,
    files: BTreeMap<&'static str, u64>,
    latest: Option<SystemTime>,
}

fn stat_unit(mem_dir: &Path) -> UnitStat {
    let mut path = mem_dir.to_path_buf();
    let mut stamps = Vec::with_capacity(MANAGED_FILES.len() + 1);
    let mut files = BTreeMap::new();
    let mut latest: Option<SystemTime> = None;
    for f in MANAGED_FILES {
        path.push(f);
        match std::fs::symlink_metadata(&path) {
            Ok(m) => {
                if m.file_type().is_file() {
                    files.insert(*f, m.len());
                    if let Ok(t) = m.modified() {
                        latest = Some(latest.map_or(t, |l| l.max(t)));
                    }
                }
                stamps.push(Some(Stamp::of(&m)));
            }
            Err(_) => stamps.push(None),
        }
        path.pop();
    }
    // The SQLite member's content also lives in its write-ahead log.
    path.push(unit::SQLITE_SIDECARS[0]);
    stamps.push(lstamp(&path));
    UnitStat {
        stamps,
        files,
        latest,
    }
}

/// The memory folder and [`UnitStat`] of each of `names`, in order. The
/// `lstat`s are independent, so they are split over the machine's cores.
fn stat_units(state: &AppState, names: &[String]) -> Vec<(PathBuf, UnitStat)> {
    let stat = |part: &[String]| -> Vec<(PathBuf, UnitStat)> {
        part.iter()
            .map(|n| {
                let dir = state.memory_dir(n);
                let s = stat_unit(&dir);
                (dir, s)
            })
            .collect()
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    if threads < 2 || names.len() < 256 {
        return stat(names);
    }
    let parts: Vec<&[String]> = names.chunks(names.len().div_ceil(threads)).collect();
    std::thread::scope(|scope| {
        let running: Vec<_> = parts
            .iter()
            .map(|part| (*part, scope.spawn(move || stat(part))))
            .collect();
        running
            .into_iter()
            // A part whose thread failed is stated here instead.
            .flat_map(|(part, handle)| handle.join().unwrap_or_else(|_| stat(part)))
            .collect()
    })
}

impl LocalFactsCache {
    /// The facts of each of `names` that is a character (blocking). With
    /// `every_character`, `names` is the whole registry: characters no longer
    /// in it are forgotten and the profiles are marked checked.
    pub fn facts(
        &self,
        state: &AppState,
        names: &[String],
        every_character: bool,
        staging: &Path,
    ) -> BTreeMap<String, Arc<LocalFacts>> {
        let computed_at = SystemTime::now();
        let characters_file = lstamp(&state.data_dir().join(companiond_core::layout::CHARACTERS));
        let profiles_known = {
            let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            characters_file.is_some() && inner.profiles_checked == characters_file
        };
        let mut out = BTreeMap::new();
        for (name, (mem_dir, stat)) in names.iter().zip(stat_units(state, names)) {
            let mut profile: Option<Value> = None;
            let known = {
                let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
                match inner.entries.get(name.as_str()) {
                    Some(e) if e.stamps == stat.stamps => {
                        if profiles_known {
                            Some(e.facts.clone())
                        } else {
                            profile = state
                                .characters
                                .profile(name)
                                .map(companiond_core::characters::Profile::into_value);
                            match &profile {
                                Some(p) if *p == e.profile => Some(e.facts.clone()),
                                _ => None,
                            }
                        }
                    }
                    _ => None,
                }
            };
            if let Some(f) = known {
                out.insert(name.clone(), f);
                continue;
            }
            let profile = match profile.or_else(|| {
                state
                    .characters
                    .profile(name)
                    .map(companiond_core::characters::Profile::into_value)
            }) {
                Some(p) => p,
                // Not (or no longer) a character.
                None => continue,
            };
            // Stamps were taken before hashing: a change racing with it shows
            // as another stamp next time.
            let fingerprint = unit::local_fingerprint(name, &profile, &mem_dir, staging);
            let (model_type, asset_source, asset_source_id) = unit::avatar_fields(&profile);
            let facts = Arc::new(LocalFacts {
                fingerprint,
                display_name: unit::display_name(name, &profile),
                model_type,
                asset_source,
                asset_source_id,
                updated_at: stat.latest.map(rfc3339).unwrap_or_default(),
                files: stat.files,
            });
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            if all_settled(&stat.stamps, computed_at) {
                inner.entries.insert(
                    name.clone(),
                    Entry {
                        profile,
                        stamps: stat.stamps,
                        facts: facts.clone(),
                    },
                );
            } else {
                inner.entries.remove(name.as_str());
            }
            out.insert(name.clone(), facts);
        }
        if every_character {
            let live: HashSet<&str> = names.iter().map(String::as_str).collect();
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            inner.entries.retain(|k, _| live.contains(k.as_str()));
            // Every kept entry was compared with the profile read after this stamp.
            inner.profiles_checked =
                characters_file.filter(|s| all_settled([&Some(*s)], computed_at));
        }
        out
    }
}
