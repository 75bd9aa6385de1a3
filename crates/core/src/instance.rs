//! One process per data folder.
//!
//! `companiond serve` takes an exclusive OS lock on `<data-dir>/companiond.lock`
//! (`flock` on Unix, `LockFileEx` on Windows — std's `File::try_lock`, so no
//! crate is needed) before it writes anything else, and holds it until the
//! process ends; the OS drops it when the process dies, `kill -9` included, so
//! a stale lock cannot block the next start. The running process's pid and
//! address are kept beside it in `companiond.instance` (a separate file: on
//! Windows a locked file cannot be read by another process), so a second start
//! on the same folder can say who holds it.

use std::fs::{File, OpenOptions, TryLockError};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The lock file's name inside the data dir.
pub const LOCK_FILE: &str = "companiond.lock";
/// Who holds the lock: `{"pid":…, "address":"http://…"}`.
pub const INFO_FILE: &str = "companiond.instance";

/// What the holder of the lock says of itself.
#[derive(Debug, Serialize, Deserialize)]
struct Holder {
    pid: u32,
    /// `http://HOST:PORT` once listening; absent while starting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    address: Option<String>,
}

/// The held lock; dropping it (or ending the process) releases it.
pub struct InstanceLock {
    _file: File,
    info: PathBuf,
}

impl InstanceLock {
    /// Take the data dir's lock (creating the folder when missing). Refused with
    /// a one-line reason naming the running process when another holds it.
    pub fn acquire(data_dir: &Path) -> Result<InstanceLock, String> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| format!("data directory {} is not writable: {e}", data_dir.display()))?;
        let path = data_dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| format!("cannot open the lock file {}: {e}", path.display()))?;
        let info = data_dir.join(INFO_FILE);
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = std::fs::read(&info)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Holder>(&b).ok());
                let who = match holder {
                    Some(Holder {
                        pid,
                        address: Some(a),
                    }) => format!("pid {pid}, listening on {a}"),
                    Some(Holder { pid, address: None }) => format!("pid {pid}, starting"),
                    None => "its pid is unknown".to_string(),
                };
                return Err(format!(
                    "data directory {} is in use by another companiond ({who})",
                    data_dir.display()
                ));
            }
            Err(TryLockError::Error(e)) => {
                return Err(format!("cannot lock {}: {e}", path.display()));
            }
        }
        let lock = InstanceLock { _file: file, info };
        lock.write_info(None)?;
        Ok(lock)
    }

    /// Record the address this process listens on (after the bind).
    pub fn announce(&self, addr: SocketAddr) -> Result<(), String> {
        self.write_info(Some(format!("http://{addr}")))
    }

    fn write_info(&self, address: Option<String>) -> Result<(), String> {
        let holder = Holder {
            pid: std::process::id(),
            address,
        };
        let bytes = serde_json::to_vec(&holder).map_err(|e| e.to_string())?;
        crate::store::atomic_write(&self.info, &bytes)
            .map_err(|e| format!("cannot write {}: {e}", self.info.display()))
    }
}

impl Drop for InstanceLock {
    fn drop(&mut self) {
        // Still locked here: no other process can have written it.
        let _ = std::fs::remove_file(&self.info);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_folder_is_refused_and_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let first = InstanceLock::acquire(dir.path()).unwrap();
        first.announce("127.0.0.1:4242".parse().unwrap()).unwrap();
        let err = InstanceLock::acquire(dir.path()).err().unwrap();
        assert!(err.contains("in use by another companiond"), "{err}");
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        assert!(err.contains("http://127.0.0.1:4242"), "{err}");
        drop(first);
        assert!(!dir.path().join(INFO_FILE).exists());
        let again = InstanceLock::acquire(dir.path()).unwrap();
        drop(again);
    }
}
