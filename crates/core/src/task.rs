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
