//! Running blocking work (file system, SQLite, hashing) off the async threads.

/// The blocking task panicked or was cancelled; families turn it into their
/// internal-error variant with a `From` impl.
#[derive(Debug)]
pub struct TaskFailed(pub String);

impl std::fmt::Display for TaskFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "background task failed: {}", self.0)
    }
}

impl std::error::Error for TaskFailed {}

/// Run `f` on tokio's blocking pool and return its result; a panic or
/// cancellation of the task becomes `E::from(TaskFailed)`.
pub async fn blocking<R, E>(f: impl FnOnce() -> Result<R, E> + Send + 'static) -> Result<R, E>
where
    R: Send + 'static,
    E: From<TaskFailed> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(E::from(TaskFailed(e.to_string()))),
    }
}

/// Run `a` on this thread and `b` on a second one at once, and return both
/// results. Where no thread can be started, or `b`'s thread panicked, `b` runs
/// here after `a`, so `b` must be safe to run twice (pure work, or writing the
/// same bytes to the same place).
pub fn join<A, B: Send>(a: impl FnOnce() -> A, b: impl Fn() -> B + Sync) -> (A, B) {
    std::thread::scope(|s| {
        let other = std::thread::Builder::new().spawn_scoped(s, &b).ok();
        let a = a();
        let b = match other {
            Some(t) => t.join().unwrap_or_else(|_| b()),
            None => b(),
        };
        (a, b)
    })
}

/// Work that may finish after the request that made it: freeing a large
/// parsed body, unlinking a replaced file. Runs on one long-lived background
/// thread in submission order, so a request does not wait for it and does not
/// pay for a thread of its own. Without that thread (it could not be started)
/// the job runs at once on the caller's thread. A job that panics is caught
/// and logged; later jobs still run. Nothing here waits at exit: a job is
/// only ever clean-up whose omission a restart repairs (a deferred unlink's
/// link is swept at start, see `store::sweep_leftover_temps`).
pub fn later(job: impl FnOnce() + Send + 'static) {
    type Job = Box<dyn FnOnce() + Send>;
    static QUEUE: std::sync::OnceLock<Option<std::sync::mpsc::Sender<Job>>> =
        std::sync::OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("later".into())
            .spawn(move || {
                for job in rx {
                    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
                        tracing::warn!("a background clean-up job panicked");
                    }
                }
            })
            .map_err(|e| tracing::debug!("no thread for background clean-up: {e}"))
            .ok()
            .map(|_| tx)
    });
    let job: Job = Box::new(job);
    match queue {
        Some(tx) => {
            if let Err(std::sync::mpsc::SendError(job)) = tx.send(job) {
                job();
            }
        }
        None => job(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_returns_both_results() {
        let here = std::thread::current().id();
        let (a, b) = join(|| (1, std::thread::current().id()), || 2);
        assert_eq!((a, b), ((1, here), 2));
    }

    #[test]
    fn later_runs_jobs_in_order_and_survives_a_panic() {
        let (tx, rx) = std::sync::mpsc::channel();
        later(|| panic!("a failing job"));
        for i in 0..3 {
            let tx = tx.clone();
            later(move || tx.send(i).unwrap());
        }
        let got: Vec<i32> = (0..3)
            .map(|_| rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap())
            .collect();
        assert_eq!(got, vec![0, 1, 2]);
    }
}
