//! The C allocator's hold on freed memory (glibc on Linux).
//!
//! A long-running server's heap grew although its live data did not: over a
//! 15-minute soak (`cargo bench --bench soak`, docs/performance.md § Soak)
//! heaptrack saw at most 17.5 MiB live at any moment, while the anonymous RSS
//! grew by 20 MiB in 10 minutes. glibc keeps freed memory in up to 8 arenas
//! per core (one per thread that allocated) and gives back only the top of
//! each. So companiond limits the arenas to two ([`tune`], before the runtime's
//! threads start) and asks glibc once a minute to return every free page
//! ([`spawn_trimmer`], `malloc_trim`, a few milliseconds on a blocking thread).
//! mimalloc was measured too and held 40 MiB more from the start.
//! Other platforms and C libraries: nothing is done.

use std::time::Duration;

/// How often free pages are handed back.
pub const TRIM_EVERY: Duration = Duration::from_secs(60);

/// Limit glibc's arenas (call first in `main`, before any thread starts).
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a tunable of the allocator; it is called before
    // other threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Give every free page of the heap back to the system.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes the arenas' locks itself; no pointer is passed.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Trim the heap every [`TRIM_EVERY`] until the runtime ends.
pub fn spawn_trimmer() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    tokio::spawn(async {
        let mut tick = tokio::time::interval(TRIM_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let _ = tokio::task::spawn_blocking(trim).await;
        }
    });
}
