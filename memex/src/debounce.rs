//! The quiet-time queue both watchers share: a path marked dirty is handed
//! to a callback once no further mark has touched it for the quiet time, on
//! a thread of its own. Dropping the [`Debouncer`] stops and joins it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

enum Message {
    Dirty(PathBuf),
    Stop,
}

/// Marks paths dirty from any thread; see the module docs.
#[derive(Debug, Clone)]
pub struct Marker(mpsc::Sender<Message>);

impl Marker {
    /// Marks `path` dirty: it is handed over once quiet.
    pub fn mark(&self, path: PathBuf) {
        let _ = self.0.send(Message::Dirty(path));
    }
}

/// The debounce thread.
#[derive(Debug)]
pub struct Debouncer {
    tx: mpsc::Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

impl Debouncer {
    /// Starts a thread called `name` that calls `due(path)` for each dirty
    /// path once `quiet` has passed since its last mark.
    pub fn start(
        name: &str,
        quiet: Duration,
        mut due: impl FnMut(&Path) + Send + 'static,
    ) -> std::io::Result<(Self, Marker)> {
        let (tx, rx) = mpsc::channel::<Message>();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let mut pending: HashMap<PathBuf, Instant> = HashMap::new();
                loop {
                    let timeout = pending
                        .values()
                        .min()
                        .map(|at| at.saturating_duration_since(Instant::now()))
                        .unwrap_or(Duration::from_secs(3600));
                    match rx.recv_timeout(timeout) {
                        Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                        Ok(Message::Dirty(path)) => {
                            pending.insert(path, Instant::now() + quiet);
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                    }
                    let now = Instant::now();
                    let ready: Vec<PathBuf> = pending
                        .iter()
                        .filter(|(_, at)| **at <= now)
                        .map(|(p, _)| p.clone())
                        .collect();
                    for path in ready {
                        pending.remove(&path);
                        due(&path);
                    }
                }
            })?;
        Ok((
            Self {
                tx: tx.clone(),
                thread: Some(thread),
            },
            Marker(tx),
        ))
    }
}

impl Drop for Debouncer {
    fn drop(&mut self) {
        let _ = self.tx.send(Message::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn marks_in_quick_succession_are_handed_over_once() {
        let seen: Arc<Mutex<Vec<PathBuf>>> = Arc::default();
        let sink = Arc::clone(&seen);
        let (debouncer, marker) =
            Debouncer::start("test-debounce", Duration::from_millis(20), move |p| {
                sink.lock().unwrap().push(p.to_owned());
            })
            .unwrap();
        for _ in 0..5 {
            marker.mark(PathBuf::from("a"));
        }
        marker.mark(PathBuf::from("b"));
        std::thread::sleep(Duration::from_millis(150));
        drop(debouncer);
        let mut seen = seen.lock().unwrap().clone();
        seen.sort();
        assert_eq!(seen, [PathBuf::from("a"), PathBuf::from("b")]);
    }
}
