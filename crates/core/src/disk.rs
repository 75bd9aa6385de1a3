//! A full disk and a read-only data folder: one answer for every family
//! (docs/data.md § When the disk is full).
//!
//! A write that the disk refuses is not a server fault: every family answers it
//! in its own envelope with `error_code` `storage_full` (HTTP 507 Insufficient
//! Storage) or `storage_read_only` (HTTP 503 Service Unavailable), never a 500
//! with the operating system's message. Nothing stored changes, because every
//! document is replaced atomically (the old file stays until the new one is
//! whole), and writes work again as soon as space is freed: nothing is latched.
//!
//! The families carry their storage failures as text (the context of the
//! failure and the OS message), so the kind of a failure is kept here instead:
//! [`observe`] records what the last write through the store met, and
//! [`current`] tells a family, at the moment it answers a storage failure,
//! whether the disk refused it — the last write's fault if no write has
//! succeeded since, else the data folder's state read now (a read-only mount,
//! or less free space than one page of a document).
//!
//! The record is process-wide: one process serves one data folder (the lock of
//! `instance.rs`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::StatusCode;

/// Why the disk refused a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageFault {
    /// No space (or the user's quota) is left on the disk of the data folder.
    Full,
    /// The data folder is on a read-only file system.
    ReadOnly,
}

/// Below this much free space a failed write is taken for a full disk.
const FULL_BELOW: u64 = 64 * 1024;
/// A recorded fault is trusted this long without a successful write.
const RECORD_TTL: Duration = Duration::from_secs(120);

struct Record {
    dir: Option<PathBuf>,
    last: Option<(StorageFault, Instant)>,
}

static RECORD: Mutex<Record> = Mutex::new(Record {
    dir: None,
    last: None,
});

fn with_record<R>(f: impl FnOnce(&mut Record) -> R) -> R {
    let mut g = RECORD.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut g)
}

impl StorageFault {
    /// The fault an I/O error reports, if it is one.
    pub fn of_io(e: &std::io::Error) -> Option<StorageFault> {
        use std::io::ErrorKind as K;
        match e.kind() {
            K::StorageFull | K::QuotaExceeded | K::FileTooLarge => Some(StorageFault::Full),
            K::ReadOnlyFilesystem => Some(StorageFault::ReadOnly),
            _ => None,
        }
    }

    /// The fault a SQLite error reports, if it is one.
    pub fn of_sqlite(e: &rusqlite::Error) -> Option<StorageFault> {
        use rusqlite::ErrorCode as C;
        match e.sqlite_error_code() {
            Some(C::DiskFull) => Some(StorageFault::Full),
            Some(C::ReadOnly) => Some(StorageFault::ReadOnly),
            _ => None,
        }
    }

    /// The `error_code` of the answer.
    pub fn code(self) -> &'static str {
        match self {
            StorageFault::Full => "storage_full",
            StorageFault::ReadOnly => "storage_read_only",
        }
    }

    /// The HTTP status of the answer: 507 for a full disk, 503 for a read-only folder.
    pub fn status(self) -> StatusCode {
        match self {
            StorageFault::Full => StatusCode::INSUFFICIENT_STORAGE,
            StorageFault::ReadOnly => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// What the user is told.
    pub fn message(self) -> &'static str {
        match self {
            StorageFault::Full => {
                "the disk of the data folder is full: nothing was changed; free some space and try again"
            }
            StorageFault::ReadOnly => {
                "the data folder is read-only: nothing was changed; make it writable and try again"
            }
        }
    }
}

impl StorageFault {
    /// The answer of the families whose envelope is
    /// `{success:false, error, error_code}`.
    pub fn success_error(self) -> axum::response::Response {
        crate::http::envelope::SuccessError::new(self.message())
            .code(self.code())
            .status(self.status())
    }
}

/// A storage failure in the `{success:false, error, error_code}` envelope:
/// the disk's fault when it refuses writes, else HTTP 500 `storage_error` with
/// `message`.
pub fn storage_error(message: impl Into<String>) -> axum::response::Response {
    match current() {
        Some(f) => f.success_error(),
        None => crate::http::envelope::SuccessError::new(message)
            .code("storage_error")
            .status(StatusCode::INTERNAL_SERVER_ERROR),
    }
}

impl std::fmt::Display for StorageFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

/// Name the data folder whose state [`current`] reads (once, at start-up).
pub fn watch(data_dir: &Path) {
    with_record(|r| {
        r.dir = Some(data_dir.to_path_buf());
        r.last = None;
    });
}

/// Record the outcome of a write: a fault is remembered until a write succeeds.
pub fn observe<T>(result: &std::io::Result<T>) {
    match result {
        Ok(_) => with_record(|r| r.last = None),
        Err(e) => note(e),
    }
}

/// Record a failed write (nothing when the failure is not the disk's).
pub fn note(e: &std::io::Error) {
    if let Some(f) = StorageFault::of_io(e) {
        with_record(|r| r.last = Some((f, Instant::now())));
    }
}

/// Whether the disk is refusing writes now: the fault of the last write if no
/// write succeeded since, else the data folder's state read now.
pub fn current() -> Option<StorageFault> {
    let (dir, last) = with_record(|r| (r.dir.clone(), r.last));
    if let Some((f, at)) = last {
        if at.elapsed() < RECORD_TTL {
            return Some(f);
        }
    }
    dir.as_deref().and_then(state_of)
}

/// The data folder's state: read-only, or (nearly) no space left.
pub fn state_of(dir: &Path) -> Option<StorageFault> {
    if read_only_mount(dir) {
        return Some(StorageFault::ReadOnly);
    }
    match fs4::available_space(dir) {
        Ok(free) if free < FULL_BELOW => Some(StorageFault::Full),
        _ => None,
    }
}

#[cfg(unix)]
fn read_only_mount(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    let mut s = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a valid NUL-terminated path and `s` is a properly sized
    // out-parameter that statvfs fills on success (and only then is it read).
    let rc = unsafe { libc::statvfs(c.as_ptr(), s.as_mut_ptr()) };
    if rc != 0 {
        return false;
    }
    // SAFETY: statvfs returned 0, so it initialised `s`.
    let s = unsafe { s.assume_init() };
    s.f_flag & libc::ST_RDONLY != 0
}

#[cfg(not(unix))]
fn read_only_mount(_dir: &Path) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_kinds_map_to_faults() {
        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(StorageFault::of_io(&full), Some(StorageFault::Full));
        let ro = std::io::Error::from_raw_os_error(libc::EROFS);
        assert_eq!(StorageFault::of_io(&ro), Some(StorageFault::ReadOnly));
        let other = std::io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(StorageFault::of_io(&other), None);
        assert_eq!(StorageFault::Full.status().as_u16(), 507);
        assert_eq!(StorageFault::ReadOnly.status().as_u16(), 503);
    }

    #[test]
    fn a_writable_folder_with_space_is_no_fault() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(state_of(d.path()), None);
    }
}
