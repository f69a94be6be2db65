//! Watching the memex: an edit made outside the host becomes a new
//! generation shortly after the write (target ≤ 200 ms).
//!
//! Editors save in different ways — in place, or to a temporary file renamed
//! over the original — and a save may arrive as several events. Every event
//! on a member file (a `*.org` under a memex root) marks it dirty; a dirty
//! file is re-read once no event has touched it for `quiet` (25 ms by
//! default), so one save gives one re-parse. A file that fails to parse
//! keeps its previous version (see [`Memex::reload_file`]).
//!
//! An event on a setup file (`#+SETUPFILE:`, [`crate::setup`])
//! marks every file that reads it: their settings may have changed. A
//! setup file outside the memex's folders is watched through its folder,
//! from the moment a file that reads it is loaded.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};

use crate::Memex;
use crate::debounce::Debouncer;

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
    // The debouncer's thread holds the watch weakly (to watch the folders
    // of setup files outside the memex as they appear).
    _watch: Arc<Mutex<Watch>>,
    _debouncer: Debouncer,
}

/// The OS watch and the folders it watches.
#[derive(Debug)]
struct Watch {
    watcher: RecommendedWatcher,
    /// Folders watched recursively (the root folders)…
    recursive: Vec<PathBuf>,
    /// …and on their own (folders of file roots and of setup files).
    flat: HashSet<PathBuf>,
}

impl Watch {
    /// Whether an event on `path` reaches us.
    fn covers(&self, path: &Path) -> bool {
        self.recursive.iter().any(|dir| path.starts_with(dir))
            || path.parent().is_some_and(|dir| self.flat.contains(dir))
    }

    /// Watches the folder of every setup file of `memex` that no watch
    /// covers yet, and returns the files that include a setup file whose
    /// watch was only now added: an edit between their reload and the new
    /// watch raised no event, so the caller reads them again. A folder
    /// that cannot be watched (it does not exist yet) is tried again after
    /// the next reload.
    fn cover_setup_files(&mut self, memex: &Memex) -> Vec<PathBuf> {
        let snapshot = memex.snapshot();
        let mut newly_covered = Vec::new();
        for file in snapshot.files() {
            for setup in &file.setup.files {
                if self.covers(setup) {
                    continue;
                }
                let Some(dir) = setup.parent() else { continue };
                match self.watcher.watch(dir, RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        self.flat.insert(dir.to_path_buf());
                        newly_covered.push(file.path.clone());
                    }
                    Err(error) => tracing::debug!(target: "foveal::memex::watch",
                        dir = %dir.display(),
                        "setup file folder not watched: {error}"
                    ),
                }
            }
        }
        newly_covered
    }
}

impl MemexWatcher {
    /// Watches every root of `memex` (folders recursively, files through
    /// their folder) and the folders of setup files outside them, and
    /// reloads changed files.
    pub fn start(memex: Arc<Memex>, quiet: Duration) -> Result<Self, WatchError> {
        let reloader = Arc::clone(&memex);
        let watch_of_reloads: Arc<Mutex<Weak<Mutex<Watch>>>> = Arc::default();
        let later = Arc::clone(&watch_of_reloads);
        let (debouncer, events) = Debouncer::start("foveal-memex-watch", quiet, move |path| {
            let before = reloader.snapshot().generation();
            let generation = reloader.reload_file(path);
            tracing::debug!(target: "foveal::memex::watch", path = %path.display(), generation, "memex file reloaded");
            if generation != before
                && let Some(watch) = later.lock().unwrap_or_else(|e| e.into_inner()).upgrade()
            {
                let stale = watch
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .cover_setup_files(&reloader);
                for file in stale {
                    reloader.reload_file(&file);
                }
            }
        })
        .map_err(|e| WatchError {
            path: PathBuf::new(),
            source: notify::Error::io(e),
        })?;
        let filter = Arc::clone(&memex);
        let watcher =
            notify::recommended_watcher(move |event: notify::Result<Event>| match event {
                Ok(event) => {
                    if matches!(event.kind, EventKind::Access(_)) {
                        return;
                    }
                    let created = matches!(event.kind, EventKind::Create(_));
                    for path in event.paths {
                        // The files that read it as a setup file.
                        for file in filter.snapshot().includers_of(&path) {
                            events.mark(file);
                        }
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
                Err(error) => {
                    tracing::warn!(target: "foveal::memex::watch", "memex watch error: {error}")
                }
            })
            .map_err(|source| WatchError {
                path: PathBuf::new(),
                source,
            })?;
        let mut watch = Watch {
            watcher,
            recursive: Vec::new(),
            flat: HashSet::new(),
        };
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
            watch
                .watcher
                .watch(&target, mode)
                .map_err(|source| WatchError {
                    path: target.clone(),
                    source,
                })?;
            match mode {
                RecursiveMode::Recursive => watch.recursive.push(target),
                RecursiveMode::NonRecursive => {
                    watch.flat.insert(target);
                }
            }
        }
        // At start the memex was just read, as were the roots before
        // their watches: nothing to read again.
        let _ = watch.cover_setup_files(&memex);
        let watch = Arc::new(Mutex::new(watch));
        *watch_of_reloads.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&watch);
        Ok(Self {
            _watch: watch,
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
    fn an_edit_to_a_setup_file_rereads_the_files_that_include_it() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let root = base.join("memex");
        let elsewhere = base.join("elsewhere");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(root.join("in.setup"), "#+TODO: TODO | DONE\n").unwrap();
        std::fs::write(elsewhere.join("out.setup"), "#+FILETAGS: a\n").unwrap();
        std::fs::write(
            root.join("a.org"),
            "#+SETUPFILE: in.setup\n#+SETUPFILE: ../elsewhere/out.setup\n* PROJ x\n",
        )
        .unwrap();
        std::fs::write(root.join("b.org"), "* PROJ y\n").unwrap();
        let memex = Arc::new(Memex::open(std::slice::from_ref(&root)).unwrap());
        let _watcher = MemexWatcher::start(Arc::clone(&memex), DEFAULT_QUIET).unwrap();
        let file = |name: &str| Arc::clone(memex.snapshot().file(&root.join(name)).unwrap());
        assert_eq!(file("a.org").objects[0].headline.todo, None);

        // In the memex folder (not an `.org` file: not a member).
        std::fs::write(root.join("in.setup"), "#+TODO: TODO PROJ | DONE\n").unwrap();
        assert!(wait_for(Duration::from_secs(5), || {
            file("a.org").objects[0].headline.todo.as_deref() == Some("PROJ")
        }));
        // Outside it, saved by rename.
        std::fs::write(elsewhere.join(".out.tmp"), "#+FILETAGS: b\n").unwrap();
        std::fs::rename(elsewhere.join(".out.tmp"), elsewhere.join("out.setup")).unwrap();
        assert!(wait_for(Duration::from_secs(5), || file("a.org").file_tags == ["b"]));
        // A file that includes none is left alone.
        assert_eq!(file("b.org").objects[0].headline.todo, None);
        // A setup file named later is watched from then on.
        std::fs::create_dir_all(base.join("later")).unwrap();
        std::fs::write(base.join("later/l.setup"), "#+FILETAGS: l1\n").unwrap();
        std::fs::write(root.join("b.org"), "#+SETUPFILE: ../later/l.setup\n* y\n").unwrap();
        assert!(wait_for(Duration::from_secs(5), || file("b.org").file_tags == ["l1"]));
        std::fs::write(base.join("later/l.setup"), "#+FILETAGS: l2\n").unwrap();
        assert!(wait_for(Duration::from_secs(5), || file("b.org").file_tags == ["l2"]));
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
