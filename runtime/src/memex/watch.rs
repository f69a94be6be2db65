//! Watching the memex: an edit made outside the host becomes a new
//! generation shortly after the write (target ≤ 200 ms).
//!
//! Editors save in different ways — in place, or to a temporary file renamed
//! over the original — and a save may arrive as several events. Every event
//! on a member file (a `*.org` under a memex root) marks it dirty; a dirty
//! file is re-read once no event has touched it for `quiet` (25 ms by
//! default), so one save gives one re-parse. A file that fails to parse
//! keeps its previous version (see [`Memex::reload_file`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};

use crate::debounce::Debouncer;
use crate::memex::Memex;

/// The quiet time after the last event on a file before it is re-read.
pub const DEFAULT_QUIET: Duration = Duration::from_millis(25);

/// Watching failed to start.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch memex path {}: {source}", path.display())]
pub struct WatchError {
    /// The path.
    pub path: PathBuf,
    /// What notify said.
    pub source: notify::Error,
}

/// A running memex watcher; dropping it stops the watch and joins its thread.
#[derive(Debug)]
pub struct MemexWatcher {
    // Field order is drop order: the OS watch stops before the debouncer.
    _watcher: RecommendedWatcher,
    _debouncer: Debouncer,
}

impl MemexWatcher {
    /// Watches every root of `memex` (folders recursively, files through
    /// their folder) and reloads changed files.
    pub fn start(memex: Arc<Memex>, quiet: Duration) -> Result<Self, WatchError> {
        let reloader = Arc::clone(&memex);
        let (debouncer, events) = Debouncer::start("foveal-memex-watch", quiet, move |path| {
            let generation = reloader.reload_file(path);
            tracing::debug!(path = %path.display(), generation, "memex file reloaded");
        })
        .map_err(|e| WatchError {
            path: PathBuf::new(),
            source: notify::Error::io(e),
        })?;
        let filter = Arc::clone(&memex);
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<Event>| match event {
                Ok(event) => {
                    if matches!(event.kind, EventKind::Access(_)) {
                        return;
                    }
                    let created = matches!(event.kind, EventKind::Create(_));
                    for path in event.paths {
                        if filter.is_member(&path) {
                            events.mark(path);
                        } else if created && path.is_dir() {
                            // A new folder: files written into it before the
                            // recursive watch reached it raised no event of
                            // their own, so look.
                            for file in filter.members_under(&path) {
                                events.mark(file);
                            }
                        }
                    }
                }
                Err(error) => tracing::warn!("memex watch error: {error}"),
            })
            .map_err(|source| WatchError {
                path: PathBuf::new(),
                source,
            })?;
        let roots: Vec<PathBuf> = memex.roots().map(PathBuf::from).collect();
        for root in roots {
            let (target, mode) = if root.is_dir() {
                (root.clone(), RecursiveMode::Recursive)
            } else {
                // A file root: watch its folder, so a save by rename is seen.
                let parent = root
                    .parent()
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("."));
                (parent, RecursiveMode::NonRecursive)
            };
            watcher.watch(&target, mode).map_err(|source| WatchError {
                path: target,
                source,
            })?;
        }
        Ok(Self {
            _watcher: watcher,
            _debouncer: debouncer,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_for(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
        use std::time::Instant;
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if condition() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        condition()
    }

    #[test]
    fn an_external_edit_becomes_a_new_generation() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("a.org"), "* One\n").unwrap();
        let memex = Arc::new(Memex::open(std::slice::from_ref(&root)).unwrap());
        let _watcher = MemexWatcher::start(Arc::clone(&memex), DEFAULT_QUIET).unwrap();
        let before = memex.snapshot().generation();

        // In place.
        std::fs::write(root.join("a.org"), "* One\n* Two\n").unwrap();
        assert!(wait_for(Duration::from_secs(5), || memex.snapshot().len() == 2));
        assert!(memex.snapshot().generation() > before);

        // By rename, as many editors save.
        std::fs::write(root.join(".a.org.tmp"), "* Three\n").unwrap();
        std::fs::rename(root.join(".a.org.tmp"), root.join("a.org")).unwrap();
        assert!(wait_for(Duration::from_secs(5), || {
            memex
                .snapshot()
                .objects()
                .next()
                .is_some_and(|o| o.title() == "Three")
        }));

        // A new file in a new folder, and a removal.
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/b.org"), "* B\n").unwrap();
        assert!(wait_for(Duration::from_secs(5), || memex.snapshot().len() == 2));
        std::fs::remove_file(root.join("a.org")).unwrap();
        assert!(wait_for(Duration::from_secs(5), || memex.snapshot().len() == 1));
    }
}
