//! File stamps for caches keyed by file metadata: device, inode, length,
//! modification and change times. A cache may trust a stamp only once it is
//! *settled*: its times lie more than [`RACY`] before the moment the cached
//! value was computed, so that a later change within the same tick of the
//! file-system clock (coarse on Linux, 2 s on FAT) cannot leave the stamp
//! unchanged. Entries computed from unsettled files are simply not kept.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How far behind "now" a file's times must be before a cache keeps a value
/// derived from it.
pub const RACY: Duration = Duration::from_secs(2);

/// The identity and version of a file or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub len: u64,
    /// Nanoseconds since the epoch (may be negative).
    pub mtime_ns: i128,
    /// Inode change time (nanoseconds; equals `mtime_ns` where unknown).
    pub ctime_ns: i128,
    pub is_dir: bool,
}

fn ns(t: std::io::Result<SystemTime>) -> i128 {
    match t {
        Ok(t) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(e) => -(e.duration().as_nanos() as i128),
        },
        Err(_) => 0,
    }
}

impl Stamp {
    pub fn of(m: &std::fs::Metadata) -> Stamp {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Stamp {
                dev: m.dev(),
                ino: m.ino(),
                len: m.len(),
                mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
                ctime_ns: m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128,
                is_dir: m.is_dir(),
            }
        }
        #[cfg(not(unix))]
        {
            let mtime_ns = ns(m.modified());
            Stamp {
                dev: 0,
                ino: 0,
                len: m.len(),
                mtime_ns,
                ctime_ns: ns(m.created()).max(mtime_ns),
                is_dir: m.is_dir(),
            }
        }
    }

    /// Are both times more than [`RACY`] before `computed_at`?
    pub fn settled(&self, computed_at: SystemTime) -> bool {
        let limit = ns(Ok(computed_at)) - RACY.as_nanos() as i128;
        self.mtime_ns < limit && self.ctime_ns < limit
    }
}

/// The stamp of `path`, following symlinks (`None` when it does not exist).
pub fn stamp(path: &Path) -> Option<Stamp> {
    std::fs::metadata(path).ok().map(|m| Stamp::of(&m))
}

/// The stamp of `path` itself (a symlink is not followed).
pub fn lstamp(path: &Path) -> Option<Stamp> {
    std::fs::symlink_metadata(path).ok().map(|m| Stamp::of(&m))
}

/// Are all present stamps settled at `computed_at`?
pub fn all_settled<'a>(
    stamps: impl IntoIterator<Item = &'a Option<Stamp>>,
    computed_at: SystemTime,
) -> bool {
    stamps
        .into_iter()
        .all(|s| s.as_ref().is_none_or(|s| s.settled(computed_at)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_change_with_content_and_identity() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a");
        std::fs::write(&p, b"one").unwrap();
        let a = stamp(&p).unwrap();
        assert!(!a.settled(SystemTime::now()));
        assert!(a.settled(SystemTime::now() + Duration::from_secs(3)));
        std::fs::write(dir.path().join("b"), b"two").unwrap();
        std::fs::rename(dir.path().join("b"), &p).unwrap();
        assert_ne!(stamp(&p).unwrap(), a);
        assert_eq!(stamp(&dir.path().join("missing")), None);
        assert!(lstamp(dir.path()).unwrap().is_dir);
    }
}
