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
//!
//! The executable's code is the other part of the resident set a person sees
//! and the process does not need: the kernel maps every page of code run once
//! and, around each fault, its neighbours (64 KiB at a time), so the release
//! binary held 24 MiB of code pages one second after start, and the local
//! model's code (candle, gemm, tokenizers) 6 MiB more after an unload.
//! [`release_code`] unmaps them after start-up and after an unload; the pages
//! stay in the kernel's file cache, and the code that runs next maps its
//! pages again (a minor fault each, microseconds).

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

/// Unmap the resident pages of the executable's code (its `r-xp` mappings).
/// Code pages are never written, so dropping them changes nothing but the
/// resident set: the next access maps the same bytes again from the file.
/// Other mappings (data, relocated read-only data, libraries) are left alone.
pub fn release_code() {
    #[cfg(target_os = "linux")]
    {
        let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
            return;
        };
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return;
        };
        for (start, end) in code_ranges(&maps, &exe.to_string_lossy()) {
            // SAFETY: the range is a whole mapping of the executable's code,
            // read-only and private: never written, so MADV_DONTNEED only
            // drops pages the next access reads again from the file.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
}

/// The `(start, end)` of the mappings of `/proc/self/maps` text `maps` that
/// are the code (`r-xp`) of the file `exe`.
fn code_ranges(maps: &str, exe: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let range = f.next()?;
            let perms = f.next()?;
            // offset, device, inode, then the path (the rest of the line).
            let path = f.nth(3)?;
            if perms != "r-xp" || path != exe || f.next().is_some() {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            let a = usize::from_str_radix(a, 16).ok()?;
            let b = usize::from_str_radix(b, 16).ok()?;
            (a < b).then_some((a, b))
        })
        .collect()
}

/// Trim the heap every [`TRIM_EVERY`] until the runtime ends.
pub fn spawn_trimmer() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    spawn_with_trim(|| {
        trim();
        true
    });
}

/// Run `work` on a blocking thread every [`TRIM_EVERY`], beside the heap's
/// trim, until it answers `false` or the runtime ends: what else a family
/// hands back once a minute (the memory family's index caches and maps).
pub fn spawn_with_trim(work: impl Fn() -> bool + Send + Sync + 'static) {
    let work = std::sync::Arc::new(work);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(TRIM_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let w = work.clone();
            if let Ok(false) = tokio::task::spawn_blocking(move || w()).await {
                return;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_executables_code_is_released() {
        let maps = "\
55d0a000-55d0b000 r--p 00000000 fd:01 42 /usr/bin/companiond
55d0b000-55d4f000 r-xp 00001000 fd:01 42 /usr/bin/companiond
55d4f000-55d60000 r--p 00045000 fd:01 42 /usr/bin/companiond
55d60000-55d61000 rw-p 00056000 fd:01 42 /usr/bin/companiond
7f00a000-7f00b000 r-xp 00000000 fd:01 7 /usr/lib/libc.so.6
7f00c000-7f00d000 r-xp 00000000 fd:01 42 /usr/bin/companiond (deleted)
7f00e000-7f00f000 r-xp 00000000 00:00 0
7ffc0000-7ffc1000 r-xp 00000000 00:00 0 [vdso]
";
        assert_eq!(
            code_ranges(maps, "/usr/bin/companiond"),
            [(0x55d0_b000, 0x55d4_f000)]
        );
        // The process's own maps parse, and releasing twice is harmless.
        release_code();
        release_code();
    }
}
