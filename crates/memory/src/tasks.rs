//! In-process registry of background memory work (recent-history review,
//! compression, migrations) per character, with cancellation and draining.
//!
//! A recent-file save cancels the character's reviews; a rename drains every
//! task of both names and refuses new ones until it is over.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// What a task does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskKind {
    Review,
    Compression,
    /// Long-term memory extraction (facts, reflections, persona).
    Extraction,
}

impl TaskKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskKind::Review => "review",
            TaskKind::Compression => "compression",
            TaskKind::Extraction => "extraction",
        }
    }
}

struct Task {
    id: u64,
    kind: TaskKind,
    cancel: CancellationToken,
    done: CancellationToken,
}

#[derive(Default)]
struct Inner {
    next: u64,
    tasks: HashMap<String, Vec<Task>>,
    /// Names whose admission is closed (a rename is in progress), with a count.
    blocked: HashMap<String, usize>,
}

/// The registry.
#[derive(Default)]
pub struct TaskRegistry {
    inner: Mutex<Inner>,
}

/// A task that was admitted.
#[derive(Clone, Debug)]
pub struct TaskInfo {
    pub id: u64,
    pub cancel: CancellationToken,
    pub done: CancellationToken,
}

/// Why a task was not admitted.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The character is being renamed.
    Draining,
    /// A task of that kind is already running for the character.
    Busy,
}

/// Removes the task from the registry when the task ends, even by panic.
struct Finish {
    reg: Arc<TaskRegistry>,
    name: String,
    id: u64,
    done: CancellationToken,
}

impl Drop for Finish {
    fn drop(&mut self) {
        {
            let mut g = self.reg.inner.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(v) = g.tasks.get_mut(&self.name) {
                v.retain(|t| t.id != self.id);
                if v.is_empty() {
                    g.tasks.remove(&self.name);
                }
            }
        }
        self.done.cancel();
    }
}

/// Keeps admission closed for some names until dropped.
pub struct DrainGuard {
    reg: Arc<TaskRegistry>,
    names: Vec<String>,
}

impl Drop for DrainGuard {
    fn drop(&mut self) {
        let mut g = self.reg.inner.lock().unwrap_or_else(|e| e.into_inner());
        for n in &self.names {
            if let Some(c) = g.blocked.get_mut(n) {
                *c -= 1;
                if *c == 0 {
                    g.blocked.remove(n);
                }
            }
        }
    }
}

impl TaskRegistry {
    /// Run `work` for `name` unless admission is closed or a task of the same
    /// kind is running. `work` gets the cancellation token and should stop
    /// promptly once it fires.
    /// The receiver gets `work`'s output once the task has left the registry.
    pub fn spawn<F, Fut, T>(
        self: &Arc<Self>,
        name: &str,
        kind: TaskKind,
        work: F,
    ) -> Result<(TaskInfo, tokio::sync::oneshot::Receiver<T>), Refused>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let info = {
            let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            if g.blocked.contains_key(name) {
                return Err(Refused::Draining);
            }
            if g.tasks
                .get(name)
                .is_some_and(|v| v.iter().any(|t| t.kind == kind))
            {
                return Err(Refused::Busy);
            }
            g.next += 1;
            let info = TaskInfo {
                id: g.next,
                cancel: CancellationToken::new(),
                done: CancellationToken::new(),
            };
            g.tasks.entry(name.to_string()).or_default().push(Task {
                id: info.id,
                kind,
                cancel: info.cancel.clone(),
                done: info.done.clone(),
            });
            info
        };
        let finish = Finish {
            reg: self.clone(),
            name: name.to_string(),
            id: info.id,
            done: info.done.clone(),
        };
        let fut = work(info.cancel.clone());
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let out = fut.await;
            drop(finish);
            let _ = tx.send(out);
        });
        Ok((info, rx))
    }

    /// Cancel the tasks of `name` (of one kind, or all); how many were told.
    pub fn cancel(&self, name: &str, kind: Option<TaskKind>) -> usize {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.tasks
            .get(name)
            .map(|v| {
                v.iter()
                    .filter(|t| kind.is_none_or(|k| t.kind == k))
                    .inspect(|t| t.cancel.cancel())
                    .count()
            })
            .unwrap_or(0)
    }

    /// Cancel every task of `kind` for every character.
    pub fn cancel_all(&self, kind: TaskKind) -> usize {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.tasks
            .values()
            .flatten()
            .filter(|t| t.kind == kind)
            .inspect(|t| t.cancel.cancel())
            .count()
    }

    /// Is a task of `kind` running for `name`?
    pub fn is_running(&self, name: &str, kind: TaskKind) -> bool {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.tasks
            .get(name)
            .is_some_and(|ts| ts.iter().any(|t| t.kind == kind))
    }

    /// Running tasks of `name`.
    pub fn in_flight(&self, name: &str) -> usize {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.tasks.get(name).map_or(0, Vec::len)
    }

    /// Close admission for `names`, cancel their tasks and wait (up to
    /// `timeout`) until they ended. Admission reopens when the guard drops.
    /// `Err` carries the guard too when some task did not stop in time.
    pub async fn drain(
        self: &Arc<Self>,
        names: &[&str],
        timeout: Duration,
    ) -> Result<DrainGuard, DrainGuard> {
        let waits: Vec<CancellationToken> = {
            let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            for n in names {
                *g.blocked.entry(n.to_string()).or_insert(0) += 1;
            }
            names
                .iter()
                .filter_map(|n| g.tasks.get(*n))
                .flatten()
                .map(|t| {
                    t.cancel.cancel();
                    t.done.clone()
                })
                .collect()
        };
        let guard = DrainGuard {
            reg: self.clone(),
            names: names.iter().map(|n| n.to_string()).collect(),
        };
        let all = async {
            for w in &waits {
                w.cancelled().await;
            }
        };
        match tokio::time::timeout(timeout, all).await {
            Ok(()) => Ok(guard),
            Err(_) => Err(guard),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn drain_cancels_and_blocks_admission() {
        let reg = Arc::new(TaskRegistry::default());
        let info = reg
            .spawn("a", TaskKind::Review, |c| async move {
                c.cancelled().await;
            })
            .unwrap();
        assert_eq!(
            reg.spawn("a", TaskKind::Review, |_| async {}).unwrap_err(),
            Refused::Busy
        );
        assert_eq!(reg.in_flight("a"), 1);
        let guard = reg
            .drain(&["a"], Duration::from_secs(2))
            .await
            .ok()
            .unwrap();
        assert!(info.0.done.is_cancelled());
        assert_eq!(reg.in_flight("a"), 0);
        assert_eq!(
            reg.spawn("a", TaskKind::Review, |_| async {}).unwrap_err(),
            Refused::Draining
        );
        drop(guard);
        let i2 = reg.spawn("a", TaskKind::Review, |_| async {}).unwrap().0;
        i2.done.cancelled().await;
        assert_eq!(reg.in_flight("a"), 0);
    }

    #[tokio::test]
    async fn drain_reports_a_task_that_does_not_stop() {
        let reg = Arc::new(TaskRegistry::default());
        let stubborn = reg
            .spawn("c", TaskKind::Compression, |_| async {
                tokio::time::sleep(Duration::from_secs(30)).await
            })
            .unwrap()
            .0;
        let r = reg.drain(&["c"], Duration::from_millis(50)).await;
        assert!(r.is_err());
        drop(r);
        assert!(stubborn.cancel.is_cancelled());
        assert_eq!(reg.in_flight("c"), 1);
        // Admission reopened when the guard dropped; the running task still blocks its kind.
        assert_eq!(
            reg.spawn("c", TaskKind::Compression, |_| async {})
                .unwrap_err(),
            Refused::Busy
        );
        assert!(reg.spawn("c", TaskKind::Review, |_| async {}).is_ok());
    }

    #[tokio::test]
    async fn cancel_by_kind() {
        let reg = Arc::new(TaskRegistry::default());
        let r = reg
            .spawn(
                "b",
                TaskKind::Review,
                |c| async move { c.cancelled().await },
            )
            .unwrap()
            .0;
        let k = reg
            .spawn("b", TaskKind::Compression, |c| async move {
                c.cancelled().await
            })
            .unwrap()
            .0;
        assert_eq!(reg.cancel("b", Some(TaskKind::Review)), 1);
        r.done.cancelled().await;
        assert!(!k.cancel.is_cancelled());
        assert_eq!(reg.cancel("b", None), 1);
        k.done.cancelled().await;
    }
}
