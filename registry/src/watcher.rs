//! Hot reload: watches the plugin folders and keeps the registry in step.
//!
//! The right way to install a skill is to write it under a temporary name in
//! the same folder (a dotfile, or another extension) and `rename` it into
//! place. A rename is atomic, so the watcher loads the library the moment the
//! rename event arrives: no debounce, no half-written file.
//!
//! Other ways of writing are handled too, more slowly:
//!
//! - a file created in place (`cp`, cargo's hard link) is loaded when the
//!   writer closes it, or after `debounce` without further writes;
//! - an in-place overwrite is debounced the same way. It cannot crash the
//!   host — the host runs a shadow copy, never the file in the folder — but a
//!   reader could catch it half-written, which is why rename is the rule.
//!
//! A removed (or renamed-away) library leaves the registry at once.
//!
//! A change of owner or mode (`chmod go-w`) of a library, or of a plugin
//! folder, tries again what the ownership rule refused ([`crate::trust`]):
//! such a change leaves the file's identity as it was, so nothing else would
//! bring the library back.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RenameMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};

use crate::debounce::{Debouncer, Marker};
use crate::registry::Registry;

/// Watching failed to start.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch plugins folder {}: {source}", path.display())]
pub struct WatchError {
    /// The folder.
    pub path: PathBuf,
    /// What notify said.
    pub source: notify::Error,
}

/// A running watcher. Dropping it stops the watch and joins its thread.
#[derive(Debug)]
pub struct PluginWatcher {
    // Field order is drop order: the OS watch stops before the debouncer.
    _watcher: RecommendedWatcher,
    _debouncer: Debouncer,
}

impl PluginWatcher {
    /// Starts watching every folder of `registry` that exists. Start it
    /// before [`Registry::scan`], so that a library installed while the scan
    /// runs is not missed (a build seen twice is loaded once).
    ///
    /// Renames, closes after writing, and removals are applied at once, on
    /// the watch backend's own thread: one thread hop less between the
    /// rename and the new build serving. Writes in place are handed to a
    /// debounce thread.
    pub fn start(registry: Arc<Registry>, debounce: Duration) -> Result<Self, WatchError> {
        let debounce_registry = Arc::clone(&registry);
        let (debouncer, later) =
            Debouncer::start("foveal-plugin-debounce", debounce, move |path| {
                // A path loaded meanwhile by a close or rename event is not
                // loaded twice: the registry skips a build it already has.
                if path.exists() {
                    debounce_registry.load_path(path);
                } else {
                    debounce_registry.remove_path(path);
                }
            })
            .map_err(|e| WatchError {
                path: PathBuf::new(),
                source: notify::Error::io(e),
            })?;
        let callback_registry = Arc::clone(&registry);
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<Event>| match event {
                Ok(event) => handle(&callback_registry, &event, &later),
                Err(error) => {
                    tracing::warn!(target: "foveal::watcher", "plugin watch error: {error}")
                }
            })
            .map_err(|source| WatchError {
                path: PathBuf::new(),
                source,
            })?;
        for dir in registry.dirs() {
            if !dir.path.is_dir() {
                continue;
            }
            watcher
                .watch(&dir.path, RecursiveMode::NonRecursive)
                .map_err(|source| WatchError {
                    path: dir.path.clone(),
                    source,
                })?;
        }
        Ok(Self {
            _watcher: watcher,
            _debouncer: debouncer,
        })
    }
}

/// What to do with a path, decided from one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    LoadNow,
    LoadLater,
    Remove,
    /// Owner or mode changed: try again what was refused for them.
    Recheck,
    Ignore,
}

fn classify(kind: &EventKind) -> Action {
    match kind {
        // Atomic install: the file is complete.
        EventKind::Modify(ModifyKind::Name(RenameMode::To)) => Action::LoadNow,
        EventKind::Modify(ModifyKind::Name(RenameMode::From)) => Action::Remove,
        // The writer closed the file: it is complete.
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => Action::LoadNow,
        // Created or written in place: wait for close or quiet.
        EventKind::Create(CreateKind::File | CreateKind::Any)
        | EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Any) => Action::LoadLater,
        EventKind::Remove(_) => Action::Remove,
        EventKind::Modify(ModifyKind::Metadata(_)) => Action::Recheck,
        _ => Action::Ignore,
    }
}

fn handle(registry: &Registry, event: &Event, later: &Marker) {
    // `Both` repeats a `From` and a `To` already reported on their own; a
    // rename the backend could not pair arrives as `Any` or `Other`.
    let action = match event.kind {
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => return,
        EventKind::Modify(ModifyKind::Name(RenameMode::Any | RenameMode::Other)) => {
            if event.paths.iter().all(|p| p.exists()) {
                Action::LoadNow
            } else {
                Action::Remove
            }
        }
        ref kind => classify(kind),
    };
    if action == Action::Ignore {
        return;
    }
    if action == Action::Recheck && event.paths.iter().any(|p| registry.is_dir(p)) {
        // A folder's mode changed: every library in it may now pass (or
        // not). Builds already serving are skipped without a copy.
        registry.scan();
        return;
    }
    for path in &event.paths {
        let path = &registry.configured_path(path);
        if !registry.is_candidate(path) {
            continue;
        }
        match action {
            Action::LoadNow | Action::Recheck => {
                registry.load_path(path);
            }
            Action::LoadLater => {
                later.mark(path.clone());
            }
            Action::Remove => {
                registry.remove_path(path);
            }
            Action::Ignore => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::RemoveKind;

    #[test]
    fn renames_and_closes_load_at_once_writes_wait() {
        assert_eq!(
            classify(&EventKind::Modify(ModifyKind::Name(RenameMode::To))),
            Action::LoadNow
        );
        assert_eq!(
            classify(&EventKind::Access(AccessKind::Close(AccessMode::Write))),
            Action::LoadNow
        );
        assert_eq!(
            classify(&EventKind::Create(CreateKind::File)),
            Action::LoadLater
        );
        assert_eq!(
            classify(&EventKind::Modify(ModifyKind::Data(
                notify::event::DataChange::Content
            ))),
            Action::LoadLater
        );
        assert_eq!(
            classify(&EventKind::Remove(RemoveKind::File)),
            Action::Remove
        );
        assert_eq!(
            classify(&EventKind::Modify(ModifyKind::Name(RenameMode::From))),
            Action::Remove
        );
        assert_eq!(
            classify(&EventKind::Modify(ModifyKind::Metadata(
                notify::event::MetadataKind::Permissions
            ))),
            Action::Recheck
        );
        assert_eq!(
            classify(&EventKind::Access(AccessKind::Read)),
            Action::Ignore
        );
    }
}
