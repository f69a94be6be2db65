//! # foveal-memex: the knowledge base
//!
//! The memex is the agent's long-term memory, a set of Org-mode files.
//! This crate owns everything about it: scanning (through [`parse`], the
//! `foveal-org` scanner), the immutable indexed [`MemexSnapshot`], the
//! privacy tags ([`privacy`]), the gated view lent to skills ([`view`]),
//! `#+SETUPFILE:` resolution ([`setup`]), safe writes ([`write`]) and the
//! file watcher ([`watch`]).
//!
//! Headlines become objects ([`file`](mod@file)); the whole memex at one moment is an
//! immutable, indexed [`MemexSnapshot`] with a generation number, published
//! through `arc-swap`. Readers take a snapshot and keep it for as long as
//! they need; a change to one file re-parses only that file and publishes a
//! new snapshot that shares everything else with the old one.
//!
//! A file that cannot be read or parsed never replaces a good version of
//! itself: the previous version stays in the snapshot and the error, with
//! file and line, is recorded beside it ([`MemexSnapshot::failed`]). Nothing
//! here writes to a file it could not read.
//!
//! ## What it may not do
//!
//! It knows nothing of skills, prompts, models or the network: it depends
//! on no other foveal crate but `foveal-org` and the SDK's plain data types
//! (the view it lends is the SDK's `MemexView`). Privacy starts here — a
//! [`view::SnapshotView`] never holds a private object — but the last door
//! before the network is `foveal-gate`'s. Vectors come in from outside
//! through [`VectorSource`]; computing them is the host's.
//!
//! # Example
//!
//! ```
//! use foveal_memex::{Memex, Query};
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("work.org"), "* Launch :project:\n** TODO Write docs\n").unwrap();
//! let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
//! let snapshot = memex.snapshot();
//! let projects = snapshot.active_projects();
//! assert_eq!(projects[0].title(), "Launch");
//! let todo = snapshot.query(&Query { todo: Some("TODO".into()), ..Query::default() });
//! assert_eq!(todo[0].parent().unwrap().title(), "Launch");
//! ```

pub mod agenda;
pub mod debounce;
pub mod file;
/// The Org scanner, in its own crate (`foveal-org`) so that the SDK's
/// `testing` feature reads Org exactly as the host does.
pub use foveal_org as parse;
pub mod privacy;
pub mod setup;
pub mod snapshot;
mod stored;
pub mod view;
pub mod watch;
pub mod write;

#[cfg(test)]
mod proptests;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

pub use file::{FileId, IdSource, MemexFile, ObjectType};
use privacy::PrivacyTags;
pub use snapshot::{MemexSnapshot, ObjectRef, Query};
use stored::VectorStore;
pub use stored::{build_identity, write_private};

/// Why a memex path or file could not be loaded. Every variant names the
/// file; none of them leads to a write.
#[derive(Debug, thiserror::Error)]
pub enum MemexError {
    /// A configured path does not exist.
    #[error("{}: no such file or folder; check `memex.paths` or --memex", path.display())]
    NotFound {
        /// The path.
        path: PathBuf,
    },
    /// The OS refused to read it.
    #[error("{}: permission denied; the file was not loaded", path.display())]
    PermissionDenied {
        /// The path.
        path: PathBuf,
    },
    /// Another I/O error.
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file is not UTF-8.
    #[error("{}:{line}:{column}: not valid UTF-8; the file was not loaded and is left untouched (convert it to UTF-8)", path.display())]
    NotUtf8 {
        /// The path.
        path: PathBuf,
        /// 1-based line of the first bad byte.
        line: usize,
        /// 1-based byte column of the first bad byte.
        column: usize,
    },
    /// Not a regular file (a FIFO, a device, a socket), or a link to one.
    #[error("{}: not a regular file ({kind}); skipped", path.display())]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// Larger than the memex reads.
    #[error("{}: {len} bytes, over the memex's limit of {max} bytes per file; skipped (split the file, or raise `memex.max_file_mib`)", path.display())]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// The file is malformed.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        /// The path.
        path: PathBuf,
        /// 1-based line.
        line: u32,
        /// What is wrong.
        message: String,
    },
}

impl MemexError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        match source.kind() {
            std::io::ErrorKind::NotFound => Self::NotFound {
                path: path.to_owned(),
            },
            std::io::ErrorKind::PermissionDenied => Self::PermissionDenied {
                path: path.to_owned(),
            },
            _ => Self::Io {
                path: path.to_owned(),
                source,
            },
        }
    }
}

/// A configured memex path: a file, or a folder searched recursively for
/// `*.org`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Root {
    path: PathBuf,
    is_dir: bool,
}

/// The live memex: the current snapshot and the means to change it.
#[derive(Debug)]
pub struct Memex {
    roots: Vec<Root>,
    current: ArcSwap<MemexSnapshot>,
    writer: Mutex<()>,
    /// The privacy tags whose skills' view ([`view::cached`]) is
    /// built for each new file version before it is published.
    views: Mutex<Option<PrivacyTags>>,
    /// Where computed vectors come from ([`Memex::attach_vectors`]).
    vectors: Mutex<Option<Arc<dyn VectorSource>>>,
    /// The generation, sent on every publish: [`Memex::changes`].
    published: tokio::sync::watch::Sender<u64>,
    /// The file versions this memex wrote itself, oldest first:
    /// [`Memex::wrote`].
    own_versions: Mutex<VecDeque<OwnVersion>>,
    /// How files are read ([`MemexOptions`]).
    options: MemexOptions,
    /// Leave the last snapshot to the process's end ([`Memex::free_at_exit`]).
    free_at_exit: std::sync::atomic::AtomicBool,
}

impl Drop for Memex {
    fn drop(&mut self) {
        if self.free_at_exit.load(std::sync::atomic::Ordering::Relaxed) {
            std::mem::forget(self.current.load_full());
        }
    }
}

/// How a memex reads its files (`[memex]` in the configuration).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemexOptions {
    /// The TODO keywords of a file that declares none of its own (no
    /// `#+TODO:`, `#+SEQ_TODO:` or `#+TYP_TODO:` line, its setup files'
    /// included): Emacs' `org-todo-keywords`. `None`: Org's default,
    /// `TODO | DONE`.
    pub todo_keywords: Option<parse::TodoKeywords>,
    /// The largest file read, in MiB (`[memex] max_file_mib`); `None`:
    /// [`MAX_FILE_BYTES`]. A larger file is refused before a byte of it is
    /// read, and said with its size and this limit.
    pub max_file_mib: Option<u32>,
    /// Where a load keeps the numbers of files' `:EMBEDDING:` values
    /// between processes ([`stored`]: `<data dir>/index/vectors`, unless
    /// `[memex] index = false`); `None`: every load reads them from the
    /// text.
    pub vector_store: Option<PathBuf>,
}

impl MemexOptions {
    /// The largest file read, in bytes.
    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_mib
            .map_or(MAX_FILE_BYTES, |mib| u64::from(mib) << 20)
    }
}

/// A file version the memex wrote itself: `path` went from the version
/// whose content hash is `from` (`None`: a file the memex did not have) to
/// the version whose content hash is `to`, published as `generation`, at
/// `at`, by `edit` when it was one ([`Memex::own_writes`]).
#[derive(Debug, Clone)]
struct OwnVersion {
    path: PathBuf,
    generation: u64,
    from: Option<u64>,
    to: u64,
    at: std::time::SystemTime,
    edit: Option<write::OwnEdit>,
}

/// The own writes remembered, over all files: more than a host makes
/// between two looks at the memex (it looks every quarter of a second, and
/// after each turn), few enough to search on every look. They are also the
/// writes an edit made outside can be said to undo ([`Memex::own_writes`]):
/// the last 256, each with at most a title's first 200 bytes, is a small
/// record.
const OWN_VERSIONS: usize = 256;

/// Computed vectors for new file versions (the host's `embed::Vectors`):
/// each version is filled before it is published, so an edit never takes
/// away the vectors the cache already holds for its unchanged objects.
pub trait VectorSource: Send + Sync + std::fmt::Debug {
    /// Gives the objects of `file` that have no vector the ones the source
    /// holds ([`MemexFile::set_vector`]); returns how many it gave.
    fn fill(&self, file: &mut MemexFile) -> usize;

    /// Called after every publish with the new snapshot, once it is
    /// current (so that a worker woken now reads the version just filled,
    /// and what was derived from objects that are now private can be
    /// dropped at once).
    fn published(&self, _snapshot: &MemexSnapshot) {}
}

impl Memex {
    /// Loads every `*.org` file under `paths` (files, or folders searched
    /// recursively). A path that does not exist is an error; a file that
    /// fails to load is recorded in the snapshot's [`failed`] list and the
    /// others load.
    ///
    /// [`failed`]: MemexSnapshot::failed
    pub fn open(paths: &[PathBuf]) -> Result<Self, MemexError> {
        Self::open_with(paths, MemexOptions::default())
    }

    /// [`Memex::open`], reading the files as `options` says.
    ///
    /// ```
    /// use foveal_memex::{Memex, MemexOptions, parse::TodoKeywords};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("a.org"), "* CNCL Paint\n").unwrap();
    /// let options = MemexOptions {
    ///     todo_keywords: Some(TodoKeywords::from_sequences(&["TODO NEXT | DONE CNCL"]).unwrap()),
    ///     ..MemexOptions::default()
    /// };
    /// let memex = Memex::open_with(&[dir.path().to_path_buf()], options).unwrap();
    /// let snapshot = memex.snapshot();
    /// let paint = snapshot.files().next().unwrap().objects[0].headline.done;
    /// assert!(paint);
    /// ```
    pub fn open_with(paths: &[PathBuf], options: MemexOptions) -> Result<Self, MemexError> {
        let mut roots = Vec::new();
        for path in paths {
            let meta = std::fs::metadata(path).map_err(|e| MemexError::io(path, e))?;
            let path = path.canonicalize().map_err(|e| MemexError::io(path, e))?;
            roots.push(Root {
                is_dir: meta.is_dir(),
                path,
            });
        }
        let memex = Self {
            roots,
            current: ArcSwap::from_pointee(MemexSnapshot::default()),
            writer: Mutex::new(()),
            views: Mutex::new(None),
            vectors: Mutex::new(None),
            published: tokio::sync::watch::Sender::new(0),
            own_versions: Mutex::new(VecDeque::new()),
            options,
            free_at_exit: std::sync::atomic::AtomicBool::new(false),
        };
        let paths = memex.discover();
        // A file reached by several paths (links) is one file: each path
        // is read knowing the others ([`setup::resolve_with`]).
        let metas: Vec<Option<std::fs::Metadata>> =
            paths.iter().map(|p| std::fs::metadata(p).ok()).collect();
        let ids: Vec<Option<FileId>> = metas.iter().map(|m| m.as_ref().map(FileId::of)).collect();
        let bytes: u64 = metas.iter().flatten().map(std::fs::Metadata::len).sum();
        let mut paths_of: std::collections::HashMap<FileId, Vec<&Path>> =
            std::collections::HashMap::new();
        for (path, id) in paths.iter().zip(&ids) {
            if let Some(id) = id {
                paths_of.entry(*id).or_default().push(path);
            }
        }
        let store = memex.options.vector_store.clone().map(VectorStore::new);
        let read = |at: usize| {
            let path = &paths[at];
            let names: Vec<PathBuf> = ids[at]
                .and_then(|id| paths_of.get(&id))
                .into_iter()
                .flatten()
                .filter(|p| **p != path.as_path())
                .map(|p| p.to_path_buf())
                .collect();
            // The file's id keys too, on this thread: the snapshot is
            // filled on one.
            memex.read(path, &names, store.as_ref()).map(|file| {
                let keys = snapshot::id_keys(&file);
                (file, keys)
            })
        };
        let mut snapshot = MemexSnapshot::default();
        for (path, read) in paths.iter().zip(on_cores(paths.len(), bytes, read)) {
            match read {
                Ok((file, keys)) => snapshot.add_file_keyed(Arc::new(file), &keys),
                Err((error, text)) => snapshot.add_failure(path, error, text),
            }
        }
        memex.current.store(Arc::new(snapshot));
        memex.after_publish();
        if let Some(store) = store {
            store.sweep();
        }
        release_free_memory();
        Ok(memex)
    }

    /// The bytes of the files of the current snapshot.
    pub fn bytes(&self) -> u64 {
        self.snapshot().files().map(|f| f.text.len() as u64).sum()
    }

    /// For a process that ends when this memex is dropped (a command):
    /// the drop leaves the last snapshot, its files and their views to the
    /// process's end, which hands their memory back at once, instead of
    /// freeing every allocation of every headline one by one (at a million
    /// headlines, a quarter of a second of a command's end).
    pub fn free_at_exit(&self) {
        self.free_at_exit
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// From now on, build the skills' view of every new file version for
    /// `privacy` before publishing it, so the first cycle after an edit
    /// does not pay for it; and build it now for the files already loaded.
    pub fn prepare_views(&self, privacy: PrivacyTags) {
        let snapshot = self.snapshot();
        let files: Vec<&Arc<MemexFile>> = snapshot.files().collect();
        view::prepare_all(&files, &privacy);
        *self.views.lock().unwrap_or_else(|e| e.into_inner()) = Some(privacy);
    }

    /// From now on, fill every new file version with the vectors `source`
    /// holds before publishing it; and publish, now, the files loaded
    /// already that it has vectors for. Returns the generation then.
    pub fn attach_vectors(&self, source: Arc<dyn VectorSource>) -> u64 {
        *self.vectors.lock().unwrap_or_else(|e| e.into_inner()) = Some(source);
        let paths: Vec<PathBuf> = self.snapshot().files().map(|f| f.path.clone()).collect();
        self.refill(&paths)
    }

    /// Publishes, as one new generation, a new version of each file of
    /// `paths` that the vector source has new vectors for (computed since
    /// the version now served was published). The text is the same; only
    /// the vector table grows. Returns the generation now current.
    pub fn refill(&self, paths: &[PathBuf]) -> u64 {
        let Some(source) = self
            .vectors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        else {
            return self.snapshot().generation();
        };
        let _writing = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.current.load_full();
        let mut files = Vec::new();
        for path in paths {
            let Some(file) = current.file(path) else {
                continue;
            };
            if file.objects.iter().all(|o| o.vector.is_some()) {
                continue;
            }
            let mut copy = file.duplicate();
            if source.fill(&mut copy) == 0 {
                continue;
            }
            files.push(self.prepared_view(copy));
        }
        if files.is_empty() {
            return current.generation();
        }
        let next = current.with_files(files);
        let generation = next.generation();
        self.current.store(Arc::new(next));
        // Tells the source (and those waiting on `changes`).
        self.after_publish();
        generation
    }

    /// The generation of each snapshot published from now on, pushed as it
    /// is published (the host's control socket tells its subscribers; no
    /// polling).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.published.subscribe()
    }

    /// Whether this memex itself turned the file at `path` from the version
    /// whose content hash is `from` (`None`: a file it did not have) into
    /// the version whose content hash is `to`, by its own writes alone
    /// ([`Memex::commit`], [`Memex::adopt`]), all published after
    /// generation `since` — the generation of the snapshot `from` was read
    /// in. An observer that compares two snapshots tells the process's own
    /// writes from edits made outside with it: false when an outside edit
    /// came in between, or when the writes are too many writes ago.
    ///
    /// The writes are followed forward from `from`, in the order they
    /// were made, and only those newer than `since`: a version the memex
    /// wrote earlier and an outside save brought back (an editor's stale
    /// buffer) is not taken for its own.
    pub fn wrote(&self, path: &Path, since: u64, from: Option<u64>, to: u64) -> bool {
        let own = self.own_versions.lock().unwrap_or_else(|e| e.into_inner());
        let mut at = from;
        for step in own
            .iter()
            .filter(|v| v.generation > since && v.path == path)
        {
            if step.from != at {
                // The file was another version when this write was made:
                // something else changed it in between.
                return false;
            }
            at = Some(step.to);
            if step.to == to {
                return true;
            }
        }
        false
    }

    /// The writes this memex made itself that it still remembers (the
    /// last few hundred, over all files), oldest first: what each did, to
    /// which file, when, and in which generation. A host that sees an edit
    /// made outside undo one of them (an editor's stale buffer saved over
    /// a headline the host had just added) can say which.
    pub fn own_writes(&self) -> Vec<write::OwnWrite> {
        let own = self.own_versions.lock().unwrap_or_else(|e| e.into_inner());
        own.iter()
            .map(|v| write::OwnWrite {
                path: v.path.clone(),
                generation: v.generation,
                at: v.at,
                edit: v.edit.clone(),
            })
            .collect()
    }

    /// Notes a version this memex wrote, published as `generation` (by
    /// `edit`, when it was one): see [`Memex::wrote`]. Noted before the
    /// snapshot that shows it is published, so that no observer sees the
    /// version first.
    fn note_own(
        &self,
        path: &Path,
        generation: u64,
        (from, to): (Option<u64>, u64),
        edit: Option<write::OwnEdit>,
    ) {
        let mut own = self.own_versions.lock().unwrap_or_else(|e| e.into_inner());
        if own.len() >= OWN_VERSIONS {
            own.pop_front();
        }
        own.push_back(OwnVersion {
            path: path.to_owned(),
            generation,
            from,
            to,
            at: std::time::SystemTime::now(),
            edit,
        });
    }

    /// Loads `path`, a file this process has just created inside the memex,
    /// and counts the version read as the memex's own write (see
    /// [`Memex::wrote`]). Returns the generation now current.
    pub fn adopt(&self, path: &Path) -> u64 {
        let _writing = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let before = self.current.load().generation();
        let (generation, _) = self.reload_locked(path, Own::Any);
        let current = self.snapshot();
        if generation == before
            && let Some(file) = current.file(path)
        {
            // Loaded already (the watcher was faster): that version is
            // still the file this process created.
            self.note_own(path, generation, (None, file.content_hash), None);
        }
        generation
    }

    /// Tells the vector source, and those waiting on [`Memex::changes`],
    /// that a new snapshot is current.
    pub(crate) fn after_publish(&self) {
        let current = self.current.load_full();
        self.published.send_replace(current.generation());
        let source = self
            .vectors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(source) = source {
            source.published(&current);
        }
    }

    /// `file` with its view built when [`Memex::prepare_views`] asked (no
    /// vector filled).
    fn prepared_view(&self, file: MemexFile) -> Arc<MemexFile> {
        let file = Arc::new(file);
        if let Some(privacy) = self
            .views
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            view::cached(&file, privacy);
        }
        file
    }

    /// `file`, with the vectors the source holds
    /// ([`Memex::attach_vectors`]) and its view built when
    /// [`Memex::prepare_views`] asked.
    pub(crate) fn prepared(&self, mut file: MemexFile) -> Arc<MemexFile> {
        let source = self
            .vectors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(source) = source {
            source.fill(&mut file);
        }
        self.prepared_view(file)
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<MemexSnapshot> {
        self.current.load_full()
    }

    /// The configured roots.
    pub fn roots(&self) -> impl Iterator<Item = &Path> {
        self.roots.iter().map(|r| r.path.as_path())
    }

    /// Whether `path` belongs to this memex: a `*.org` file that is a root
    /// or lies under a root folder (hidden files and folders excluded).
    pub fn is_member(&self, path: &Path) -> bool {
        self.root_of(path).is_some()
    }

    fn root_of(&self, path: &Path) -> Option<&Root> {
        if path.extension().is_none_or(|e| e != "org") {
            return None;
        }
        self.roots.iter().find(|root| {
            if root.is_dir {
                path.strip_prefix(&root.path).is_ok_and(|rest| {
                    !rest
                        .components()
                        .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
                })
            } else {
                root.path == path
            }
        })
    }

    /// The member files under `dir` (a folder inside a root), sorted.
    pub fn members_under(&self, dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        walk(dir, &mut out);
        out.retain(|p| self.is_member(p));
        out.sort();
        out
    }

    /// The `*.org` files under the roots, sorted. Temporary copies that a
    /// write-back of a process that has ended left beside them are removed
    /// on the way.
    fn discover(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for root in &self.roots {
            if root.is_dir {
                walk(&root.path, &mut out);
            } else {
                if let Some(parent) = root.path.parent()
                    && let Ok(entries) = std::fs::read_dir(parent)
                {
                    for entry in entries.flatten() {
                        write::disk::remove_if_stale(&entry.path());
                    }
                }
                out.push(root.path.clone());
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The path ids are derived from: relative to the root folder, or the
    /// file name for a file root.
    fn id_base(&self, path: &Path) -> String {
        match self.root_of(path) {
            Some(root) if root.is_dir => path
                .strip_prefix(&root.path)
                .unwrap_or(path)
                .to_string_lossy()
                .replace('\\', "/"),
            _ => path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }

    /// Reads and parses one file: a regular file (after links) of at most
    /// [`MAX_FILE_BYTES`], never anything else. A file that was read but
    /// not loaded comes back with its text, read lossily.
    /// `names` are the other paths of the memex that reach the same file
    /// (its links), for the setup files (a first reading: nothing earlier
    /// is known).
    fn read(
        &self,
        path: &Path,
        names: &[PathBuf],
        store: Option<&VectorStore>,
    ) -> Result<MemexFile, Failure> {
        let (bytes, meta) =
            read_regular_meta(path, self.options.max_file_bytes()).map_err(|e| (e, None))?;
        let reading = ReadAs {
            path,
            names,
            previous: None,
        };
        let (text, settings, setup) = self
            .settings_of(reading, bytes)
            .map_err(fail_closed(reading))?;
        let mut file = self
            .parse_text(path, text, settings, setup, meta.modified().ok(), store)
            .map_err(fail_closed(reading))?;
        file.identity = Some(FileId::of(&meta));
        Ok(file)
    }

    /// The text of `bytes` read from `reading.path`, and its in-buffer
    /// settings with its setup files'.
    fn settings_of(
        &self,
        reading: ReadAs<'_>,
        bytes: Vec<u8>,
    ) -> Result<(String, parse::Settings, setup::Setup), Failure> {
        let text = self.text_of(reading.path, bytes)?;
        let (settings, mut setup) =
            setup::resolve_with(reading.path, reading.names, &text, reading.previous);
        // The configured keywords, for a file that declares none; kept in
        // the setup so that a re-parse after an edit reads the same.
        setup.todo_keywords.clone_from(&self.options.todo_keywords);
        let settings = settings.with_fallback(setup.todo_keywords.clone());
        Ok((text, settings, setup))
    }

    fn parse_text(
        &self,
        path: &Path,
        text: String,
        settings: parse::Settings,
        setup: setup::Setup,
        modified: Option<std::time::SystemTime>,
        store: Option<&VectorStore>,
    ) -> Result<MemexFile, Failure> {
        let id_base = self.id_base(path);
        let mut file =
            MemexFile::parse_stored(path, &id_base, text, settings, Arc::new(setup), store)
                .map_err(|(e, text)| {
                    (
                        MemexError::Parse {
                            path: path.to_owned(),
                            line: e.line,
                            message: e.message,
                        },
                        Some(Arc::<str>::from(text)),
                    )
                })?;
        file.modified = modified;
        Ok(file)
    }

    /// `bytes` as text: UTF-8, with line feeds.
    fn text_of(&self, path: &Path, bytes: Vec<u8>) -> Result<String, Failure> {
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let bad = e.utf8_error().valid_up_to();
                let bytes = e.as_bytes();
                let line = bytes[..bad].iter().filter(|&&b| b == b'\n').count() + 1;
                let column = bad
                    - bytes[..bad]
                        .iter()
                        .rposition(|&b| b == b'\n')
                        .map_or(0, |i| i + 1)
                    + 1;
                let lossy = Arc::from(String::from_utf8_lossy(bytes).as_ref());
                return Err((
                    MemexError::NotUtf8 {
                        path: path.to_owned(),
                        line,
                        column,
                    },
                    Some(lossy),
                ));
            }
        };
        if let Some(line) = bare_cr_line(&text) {
            // Emacs reads such a file with `\r` line ends (`mac`); read as
            // one line it would put private headlines into a public one.
            return Err((
                MemexError::Parse {
                    path: path.to_owned(),
                    line,
                    message: "lines end with a bare carriage return (old Mac line ends); the file was not loaded: convert it to LF or CRLF line ends".to_owned(),
                },
                Some(Arc::from(text.replace('\r', "\n").as_str())),
            ));
        }
        Ok(text)
    }

    /// Reads `path` again and publishes the result: the new version, or —
    /// when it cannot be read or parsed — the error beside the previous
    /// version. A file that is gone is removed. Returns the generation now
    /// current; when the file's bytes are those already served, nothing is
    /// published and the generation stays.
    ///
    /// A setup file that cannot be read now answers with what it gave the
    /// version served ([`setup::resolve_with`]), and when a new version is
    /// published, the other paths under which the same file is loaded
    /// (its links) are read again too.
    pub fn reload_file(&self, path: &Path) -> u64 {
        let (mut generation, links) = self.reload_one(path);
        // The other paths of the same file (its links in the memex): they
        // show its new text too, and read its setup files knowing this
        // path (a file is private if any way of reading it makes it so).
        for link in links {
            generation = self.reload_one(&link).0;
        }
        generation
    }

    /// [`Memex::reload_file`] of `path` alone. Returns the generation now
    /// current and, when a new version of `path` was published, the
    /// other paths under which the same file is loaded.
    fn reload_one(&self, path: &Path) -> (u64, Vec<PathBuf>) {
        let _writing = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.reload_locked(path, Own::No)
    }

    /// [`Memex::reload_one`] with the writer lock held by the caller; a
    /// new version that `own` says is this memex's own write is noted so
    /// ([`Memex::wrote`]) before it is published.
    fn reload_locked(&self, path: &Path, own: Own) -> (u64, Vec<PathBuf>) {
        let current = self.current.load();
        let mut links = Vec::new();
        let next = if !path.exists() {
            if current.file(path).is_none() && !current.failed().contains_key(path) {
                return (current.generation(), links);
            }
            current.without_file(path)
        } else {
            // What its setup files gave when it was last read: one that
            // cannot be read now never makes it public.
            let previous = current.file(path).map(|f| Arc::clone(&f.setup));
            let read = read_regular_meta(path, self.options.max_file_bytes())
                .map_err(|e| (e, None))
                .and_then(|(bytes, meta)| {
                    let identity = FileId::of(&meta);
                    let names = current.names_of(identity, path);
                    let reading = ReadAs {
                        path,
                        names: &names,
                        previous: previous.as_deref(),
                    };
                    let (text, settings, setup) = self
                        .settings_of(reading, bytes)
                        .map_err(fail_closed(reading))?;
                    Ok((text, settings, setup, meta.modified().ok(), identity, names))
                });
            // The same text and setup as the version being served (our own
            // write-back coming back through the watcher, a touch, or a
            // setup file edited in a way that changes none of its
            // settings): nothing to do.
            if let Ok((text, _, setup, _, identity, _)) = &read
                && !current.failed().contains_key(path)
                && current.file(path).is_some_and(|f| {
                    f.text == *text && *f.setup == *setup && f.identity == Some(*identity)
                })
            {
                return (current.generation(), links);
            }
            match read.and_then(|(text, settings, setup, modified, identity, names)| {
                let reading = ReadAs {
                    path,
                    names: &names,
                    previous: previous.as_deref(),
                };
                let mut file = self
                    .parse_text(path, text, settings, setup, modified, None)
                    .map_err(fail_closed(reading))?;
                file.identity = Some(identity);
                Ok((file, names))
            }) {
                Ok((file, names)) => {
                    links = names;
                    let to = file.content_hash;
                    let next = current.with_file(self.prepared(file));
                    let mine = match own {
                        Own::No => false,
                        Own::Any => true,
                        Own::Text(hash) => hash == to,
                    };
                    if mine {
                        let from = current.file(path).map(|f| f.content_hash);
                        self.note_own(path, next.generation(), (from, to), None);
                    }
                    next
                }
                Err((error, text)) => {
                    if current.file(path).is_some() {
                        tracing::warn!(target: "foveal::memex", "memex file not reloaded, previous version kept: {error}");
                    } else {
                        tracing::warn!(target: "foveal::memex", "memex file not loaded: {error}");
                    }
                    current.with_failure(path, error, text)
                }
            }
        };
        let generation = next.generation();
        self.current.store(Arc::new(next));
        self.after_publish();
        (generation, links)
    }

    /// Forgets the file at `path` and publishes. Returns the new generation.
    pub fn remove_file(&self, path: &Path) -> u64 {
        let _writing = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let next = self.current.load().without_file(path);
        let generation = next.generation();
        self.current.store(Arc::new(next));
        self.after_publish();
        generation
    }
}

/// Below this many bytes of files a load reads them on one thread (a
/// thread's start costs more than the work); a memex of fewer is small
/// enough that nothing is worth starting beside a turn either.
pub const PARALLEL_LOAD_BYTES: u64 = 4 << 20;

/// `read(i)` for each `i < n`, in order: on every core when the files
/// hold at least [`PARALLEL_LOAD_BYTES`] (`bytes`), each thread taking the
/// next file as it finishes one.
pub(crate) fn on_cores<R: Send>(n: usize, bytes: u64, read: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if n < 2 || cores < 2 || bytes < PARALLEL_LOAD_BYTES {
        return (0..n).map(read).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if at >= n {
                return done;
            }
            done.push((at, read(at)));
        }
    };
    let mut all: Vec<(usize, R)> = std::thread::scope(|scope| {
        let others: Vec<_> = (1..cores.min(n))
            .filter_map(|_| {
                std::thread::Builder::new()
                    .name("foveal-memex-load".into())
                    .spawn_scoped(scope, work)
                    .ok()
            })
            .collect();
        let mut all = work();
        for other in others {
            match other.join() {
                Ok(done) => all.extend(done),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        all
    });
    all.sort_unstable_by_key(|(at, _)| *at);
    all.into_iter().map(|(_, r)| r).collect()
}

/// Hands memory freed back to the OS (glibc keeps it in its arenas, one
/// for each thread that allocated): after a load, the scanner's temporary
/// arrays; after an embedding pass, the model. The resident size is then
/// what the process keeps.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Collects `*.org` files under `dir`, skipping hidden entries and
/// following no symlinked folders (no cycles).
/// Why a file was not loaded, and its text when it was read (lossily).
type Failure = (MemexError, Option<Arc<str>>);

/// Whether a version read again is one this memex wrote itself
/// ([`Memex::wrote`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Own {
    /// No: the file as anyone left it.
    No,
    /// Whatever is read: a file this process has just created.
    Any,
    /// A version with this content hash: the text this memex has just
    /// written under another name of the same file.
    Text(u64),
}

/// How one path of the memex is read.
#[derive(Debug, Clone, Copy)]
struct ReadAs<'a> {
    /// The path.
    path: &'a Path,
    /// The other paths of the memex that reach the same file (its links):
    /// its setup files are looked up from each ([`setup::resolve_with`]).
    names: &'a [PathBuf],
    /// The setup the version now served was read with, if any.
    previous: Option<&'a setup::Setup>,
}

/// What a failure keeps of the file's text (for the privacy gate only,
/// never lent) gets, as a last line, the file tags its `#+SETUPFILE:`s
/// give. The gate takes a file that cannot be loaded for private when its
/// text names a privacy tag; a file private through its setup file must
/// stay so while it cannot be loaded (fail closed).
fn fail_closed(reading: ReadAs<'_>) -> impl Fn(Failure) -> Failure + '_ {
    move |(error, text)| {
        let Some(text) = text else {
            return (error, None);
        };
        let (settings, setup) =
            setup::resolve_with(reading.path, reading.names, &text, reading.previous);
        if setup.is_empty() || settings.file_tags.is_empty() {
            return (error, Some(text));
        }
        let mut kept = String::with_capacity(text.len() + 64);
        kept.push_str(&text);
        kept.push_str("\n#+FILETAGS: :");
        kept.push_str(&settings.file_tags.join(":"));
        kept.push_str(":\n");
        (error, Some(Arc::from(kept)))
    }
}

/// The 1-based line of the first bare carriage return (one not followed by
/// a line feed), if the text has one and no line feed at all: a file with
/// old Mac line ends.
fn bare_cr_line(text: &str) -> Option<u32> {
    if text.contains('\n') {
        return None;
    }
    // More than one line, cut by bare `\r`s (a `\r` only at the end leaves
    // one line, read the same either way).
    text.trim_end_matches('\r').contains('\r').then_some(1)
}

/// The largest memex file read by default (256 MiB, `memex.max_file_mib`
/// raises it): a larger one is refused before a byte of it is read.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// The bytes of the regular file at `path` (links followed), at most
/// `max`. The file is opened without blocking and judged by the descriptor
/// opened: a FIFO, a device or a socket, even behind a link, is refused
/// without a read that could block or never end, and a file over `max` is
/// refused from its size, then read no further than `max` (it may grow).
pub fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>, MemexError> {
    read_regular_modified(path, max).map(|(bytes, _)| bytes)
}

/// [`read_regular`], with the file's modification time (from the
/// descriptor read, so it is the time of the bytes returned or later).
pub fn read_regular_modified(
    path: &Path,
    max: u64,
) -> Result<(Vec<u8>, Option<std::time::SystemTime>), MemexError> {
    read_regular_meta(path, max).map(|(bytes, meta)| (bytes, meta.modified().ok()))
}

/// [`read_regular`], with the metadata of the descriptor read: the file's
/// identity ([`FileId::of`]) and its modification time are those of the
/// bytes returned (or of a later version of the same file).
pub fn read_regular_meta(
    path: &Path,
    max: u64,
) -> Result<(Vec<u8>, std::fs::Metadata), MemexError> {
    use std::io::Read as _;
    use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| MemexError::io(path, e))?;
    let meta = file.metadata().map_err(|e| MemexError::io(path, e))?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let kind = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_dir() {
            "a folder"
        } else {
            "not a file"
        };
        return Err(MemexError::NotRegular {
            path: path.to_owned(),
            kind,
        });
    }
    if meta.len() > max {
        return Err(MemexError::TooLarge {
            path: path.to_owned(),
            len: meta.len(),
            max,
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| MemexError::io(path, e))?;
    if bytes.len() as u64 > max {
        return Err(MemexError::TooLarge {
            path: path.to_owned(),
            len: bytes.len() as u64,
            max,
        });
    }
    Ok((bytes, meta))
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        tracing::warn!(target: "foveal::memex", dir = %dir.display(), "memex folder not readable; skipped");
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            write::disk::remove_if_stale(&entry.path());
            continue;
        }
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&path, out),
            Ok(_) if path.extension().is_some_and(|e| e == "org") => out.push(path),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_file_read_is_a_setting() {
        let dir = tempfile::tempdir().unwrap();
        // 1.9 MiB of headlines.
        let big = "* A headline of the big file\nIts body.\n".repeat(50_000);
        assert!(big.len() > 3 << 19);
        std::fs::write(dir.path().join("big.org"), &big).unwrap();
        std::fs::write(dir.path().join("small.org"), "* Small\n").unwrap();
        let paths = [dir.path().to_path_buf()];
        let capped = MemexOptions {
            max_file_mib: Some(1),
            ..MemexOptions::default()
        };
        assert_eq!(capped.max_file_bytes(), 1 << 20);
        assert_eq!(MemexOptions::default().max_file_bytes(), MAX_FILE_BYTES);
        let memex = Memex::open_with(&paths, capped).unwrap();
        let snapshot = memex.snapshot();
        let (path, error) = snapshot
            .failed()
            .iter()
            .next()
            .expect("the big file failed");
        assert!(path.ends_with("big.org"));
        let said = error.to_string();
        assert!(
            said.contains(&format!(
                "{} bytes, over the memex's limit of 1048576 bytes per file",
                big.len()
            )) && said.contains("raise `memex.max_file_mib`"),
            "{said}"
        );
        assert_eq!(snapshot.files().count(), 1, "the small file is read");
        // Raised (here: the default), the same file is read.
        let memex = Memex::open_with(&paths, MemexOptions::default()).unwrap();
        assert!(memex.snapshot().failed().is_empty());
        assert_eq!(memex.snapshot().files().count(), 2);
    }

    #[test]
    fn configured_keywords_apply_to_files_without_their_own_and_survive_a_write() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("plain.org"),
            "* CNCL Paint\n:PROPERTIES:\n:ID: paint\n:END:\n* WAIT Call\n:PROPERTIES:\n:ID: call\n:END:\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("own.org"),
            "#+TODO: TODO | DONE\n* CNCL Paint too\n",
        )
        .unwrap();
        let options = MemexOptions {
            todo_keywords: Some(
                parse::TodoKeywords::from_sequences(&["TODO NEXT WAIT(w@/!) | DONE CNCL(c@)"])
                    .unwrap(),
            ),
            ..MemexOptions::default()
        };
        let memex = Memex::open_with(&[dir.path().to_path_buf()], options).unwrap();
        let snapshot = memex.snapshot();
        let paint = snapshot.get("paint").unwrap();
        assert_eq!(paint.todo(), Some("CNCL"));
        assert!(paint.is_done());
        assert_eq!(snapshot.get("call").unwrap().todo(), Some("WAIT"));
        assert!(!snapshot.get("call").unwrap().is_done());
        // A file with its own #+TODO: keeps it: CNCL is a word there.
        let own = snapshot
            .files()
            .find(|f| f.path.ends_with("own.org"))
            .unwrap();
        assert_eq!(own.objects[0].headline.todo, None);
        // An edit re-reads the file with the same keywords.
        memex.set_todo(&snapshot, "call", Some("DONE")).unwrap();
        let snapshot = memex.snapshot();
        assert!(snapshot.get("call").unwrap().is_done());
        assert!(snapshot.get("paint").unwrap().is_done());
        // Without them, Org's default: CNCL is a word of the title.
        let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(memex.snapshot().get("paint").unwrap().todo(), None);
    }

    #[test]
    fn fifos_devices_and_huge_files_are_skipped_at_once_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("good.org"), "* Good\n").unwrap();
        let fifo = dir.path().join("fifo.org");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path and a mode; no memory of ours is
        // touched.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.org")).unwrap();
        let sparse = std::fs::File::create(dir.path().join("sparse.org")).unwrap();
        sparse.set_len(4 << 30).unwrap();
        let started = std::time::Instant::now();
        let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        let snapshot = memex.snapshot();
        assert_eq!(snapshot.files().count(), 1);
        let failed: Vec<String> = snapshot.failed().values().map(|e| e.to_string()).collect();
        assert_eq!(failed.len(), 3, "{failed:?}");
        assert!(
            failed
                .iter()
                .any(|e| e.contains("fifo.org: not a regular file (a FIFO)")),
            "{failed:?}"
        );
        assert!(
            failed
                .iter()
                .any(|e| e.contains("zero.org: not a regular file (a device)")),
            "{failed:?}"
        );
        assert!(
            failed
                .iter()
                .any(|e| e.contains("sparse.org: 4294967296 bytes, over the memex's limit")),
            "{failed:?}"
        );
    }

    #[test]
    fn temporary_copies_of_ended_processes_are_removed_and_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.org"), "* A\n").unwrap();
        // No process has this pid (above the kernel's limit).
        let stale = dir.path().join(".notes.org.4194305-0.foveal-tmp");
        let live = dir
            .path()
            .join(format!(".notes.org.{}-7.foveal-tmp", std::process::id()));
        let other = dir.path().join(".notes.org.swp");
        for path in [&stale, &live, &other] {
            std::fs::write(path, "x").unwrap();
        }
        let _memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
        assert!(!stale.exists());
        assert!(live.exists() && other.exists());
        // A file root: its folder is looked at too.
        std::fs::write(&stale, "x").unwrap();
        let _memex = Memex::open(&[dir.path().join("notes.org")]).unwrap();
        assert!(!stale.exists());
    }

    fn memex_with(files: &[(&str, &[u8])]) -> (tempfile::TempDir, Memex) {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
        (dir, memex)
    }

    #[test]
    fn loads_org_files_recursively_and_skips_others() {
        let (_dir, memex) = memex_with(&[
            ("a.org", b"* A :project:\n"),
            ("sub/b.org", b"* B\n"),
            ("notes.txt", b"* not org\n"),
            (".hidden/c.org", b"* hidden\n"),
        ]);
        let s = memex.snapshot();
        assert_eq!(s.len(), 2);
        assert_eq!(s.files().count(), 2);
        assert_eq!(s.generation(), 2);
    }

    #[test]
    fn tag_queries_are_exact_and_case_insensitive() {
        let (_dir, memex) = memex_with(&[(
            "a.org",
            b"* One :Project:\n* Two :subprojects:\n* DONE Three :project:\n",
        )]);
        let s = memex.snapshot();
        let titles =
            |v: Vec<ObjectRef<'_>>| v.iter().map(|o| o.title().to_owned()).collect::<Vec<_>>();
        assert_eq!(
            titles(s.query(&Query {
                tag: Some("project".into()),
                ..Default::default()
            })),
            ["One", "Three"]
        );
        assert_eq!(titles(s.active_projects()), ["One"]);
        assert_eq!(titles(s.recent_tasks()), ["Three"]);
    }

    #[test]
    fn a_broken_edit_keeps_the_previous_version_and_reports_file_and_line() {
        let (dir, memex) = memex_with(&[("a.org", b"* Good\n")]);
        let path = dir.path().canonicalize().unwrap().join("a.org");
        std::fs::write(&path, "* Good\n* Half\n:PROPERTIES:\n:ID: x\n").unwrap();
        memex.reload_file(&path);
        let s = memex.snapshot();
        assert_eq!(s.len(), 1, "the good version stays");
        let error = s.failed().get(&path).unwrap().to_string();
        assert!(
            error.ends_with(
                "a.org:3: property drawer has no :END: (was the file cut off while being written?)"
            ),
            "{error}"
        );

        std::fs::write(&path, "* Good\n* Fixed\n").unwrap();
        memex.reload_file(&path);
        let s = memex.snapshot();
        assert_eq!(s.len(), 2);
        assert!(s.failed().is_empty());
    }

    #[test]
    fn non_utf8_is_an_error_with_line_and_column_and_nothing_else_changes() {
        let (dir, memex) = memex_with(&[("a.org", b"* ok\nbad \xff byte\n"), ("b.org", b"* B\n")]);
        let s = memex.snapshot();
        assert_eq!(s.len(), 1);
        let path = dir.path().canonicalize().unwrap().join("a.org");
        let error = s.failed().get(&path).unwrap().to_string();
        assert!(error.contains("a.org:2:5: not valid UTF-8"), "{error}");
        assert_eq!(std::fs::read(&path).unwrap(), b"* ok\nbad \xff byte\n");
    }

    #[test]
    fn a_file_private_through_its_setup_file_stays_private_while_it_fails_to_load() {
        let (dir, memex) = memex_with(&[
            ("p.setup", b"#+FILETAGS: :@personal:\n"),
            (
                "diary.org",
                b"#+SETUPFILE: p.setup\n* Monday\nMet Ann at the harbour today.\n",
            ),
        ]);
        let path = dir.path().canonicalize().unwrap().join("diary.org");
        let privacy = PrivacyTags::new(["@personal"]);
        assert!(privacy.file_is_private(memex.snapshot().file(&path).unwrap()));
        for broken in [
            &b"#+SETUPFILE: p.setup\n* Monday\nMet Ann at the harbour today.\n* Half\n:PROPERTIES:\n"[..],
            &b"#+SETUPFILE: p.setup\n* Monday\nMet Ann at the harbour \xff today.\n"[..],
        ] {
            std::fs::write(&path, broken).unwrap();
            memex.reload_file(&path);
            let snapshot = memex.snapshot();
            let (_, text) = snapshot
                .failed_texts()
                .find(|(p, _)| *p == path)
                .expect("the broken version failed");
            // The gate takes a failed file whose text names a privacy tag
            // for private as a whole.
            assert!(text.to_lowercase().contains(":@personal:"), "{text}");
        }
    }

    /// Everything a skill is lent of `memex`: each lent file's path and
    /// visible text.
    fn lent_text(memex: &Memex, privacy: &PrivacyTags) -> String {
        let view = view::SnapshotView::new(&memex.snapshot(), privacy);
        view.view()
            .files
            .iter()
            .map(|f| format!("{}\n{}", f.path.as_str(), f.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A file private only through a relative `#+SETUPFILE` stays private
    /// under another name in another folder, a symlink or a hard link,
    /// even where a setup file of the same name without a privacy tag
    /// lies beside the link: the file is one file, whatever its names.
    #[test]
    fn a_file_private_through_its_setup_file_stays_private_under_a_link_in_another_folder() {
        const DIARY: &str =
            "#+SETUPFILE: p2.setup\n* Harbour diary\nMet Ann at the harbour canary.\n";
        for hard in [false, true] {
            let kind = if hard { "hard link" } else { "symlink" };
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap();
            for (name, text) in [
                ("private/p2.setup", "#+FILETAGS: :@personal:\n"),
                ("private/linked.org", DIARY),
                ("links/p2.setup", "#+TODO: TODO | DONE\n"),
                (
                    "links/public.org",
                    "* Launch plan\nThe public launch notes.\n",
                ),
            ] {
                let path = root.join(name);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, text).unwrap();
            }
            let target = root.join("private/linked.org");
            let alias = root.join("links/alias.org");
            if hard {
                std::fs::hard_link(&target, &alias).unwrap();
            } else {
                std::os::unix::fs::symlink("../private/linked.org", &alias).unwrap();
            }
            let memex = Memex::open(std::slice::from_ref(&root)).unwrap();
            let privacy = PrivacyTags::new(["@personal"]);
            let check = |when: &str| {
                let snapshot = memex.snapshot();
                for path in [&alias, &target] {
                    let file = snapshot.file(path).expect("loaded under both names");
                    assert!(
                        privacy.file_is_private(file),
                        "{kind}, {when}: {} has file tags {:?}",
                        path.display(),
                        file.file_tags
                    );
                }
                let lent = lent_text(&memex, &privacy);
                // The view was built: the public file is lent.
                assert!(
                    lent.contains("The public launch notes."),
                    "{kind}, {when}: {lent}"
                );
                assert!(
                    !lent.contains("harbour") && !lent.contains("alias.org"),
                    "{kind}, {when}: {lent}"
                );
            };
            check("loaded");
            // Edited in place, then read again through either name.
            std::fs::write(&target, format!("{DIARY}* Tuesday\nThe harbour again.\n")).unwrap();
            memex.reload_file(&alias);
            check("read again through the link");
            memex.reload_file(&target);
            check("read again through the file");
        }
    }

    /// Review of privacy v3: a setup file beside a symlink no longer
    /// counted — only the folder of the file's real location was searched
    /// — so a file private only through the setup file beside its link
    /// (where Org, opening the file through the link, reads it) was public
    /// under both names.
    #[test]
    fn a_setup_file_beside_a_symlink_makes_the_file_private_under_every_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for (name, text) in [
            ("private/setup.org", "#+FILETAGS: :@personal:\n"),
            ("public/setup.org", "#+TODO: TODO | DONE\n"),
            (
                "public/n.org",
                "#+SETUPFILE: setup.org\n* Harbour notes\nMet Ann at the harbour canary.\n",
            ),
            (
                "public/launch.org",
                "* Launch plan\nThe public launch notes.\n",
            ),
        ] {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let target = root.join("public/n.org");
        let link = root.join("private/n.org");
        std::os::unix::fs::symlink("../public/n.org", &link).unwrap();
        let memex = Memex::open(std::slice::from_ref(&root)).unwrap();
        let privacy = PrivacyTags::new(["@personal"]);
        let check = |when: &str| {
            let snapshot = memex.snapshot();
            for path in [&link, &target] {
                let file = snapshot.file(path).expect("loaded under both names");
                assert!(
                    privacy.file_is_private(file),
                    "{when}: {} has file tags {:?}",
                    path.display(),
                    file.file_tags
                );
            }
            // The public file beside the target stays public, and is lent.
            let launch = snapshot.file(&root.join("public/launch.org")).unwrap();
            assert!(!privacy.file_is_private(launch), "{when}");
            let lent = lent_text(&memex, &privacy);
            assert!(lent.contains("The public launch notes."), "{when}: {lent}");
            assert!(!lent.contains("harbour"), "{when}: {lent}");
        };
        check("loaded");
        // Read again through either name.
        std::fs::write(
            &target,
            "#+SETUPFILE: setup.org\n* Harbour notes\nMet Ann at the harbour again.\n",
        )
        .unwrap();
        memex.reload_file(&target);
        check("read again through the file");
        memex.reload_file(&link);
        check("read again through the link");
    }

    /// While the setup file that makes a file private is missing,
    /// half-written or not UTF-8, the file keeps the privacy it had and
    /// nothing of it is lent; it is public again only once the setup file
    /// reads whole and says so.
    #[test]
    fn a_setup_file_that_cannot_be_read_never_makes_a_file_public() {
        let (dir, memex) = memex_with(&[
            ("p.setup", b"#+FILETAGS: :@personal:\n"),
            (
                "diary.org",
                b"#+SETUPFILE: p.setup\n* Monday\nMet Ann at the harbour today.\n",
            ),
            ("work.org", b"* Launch\nThe public launch notes.\n"),
        ]);
        let root = dir.path().canonicalize().unwrap();
        let (diary, setup) = (root.join("diary.org"), root.join("p.setup"));
        let privacy = PrivacyTags::new(["@personal"]);
        // Whether the diary is private and lends nothing, and its version.
        let private = |when: &str| {
            let file = Arc::clone(memex.snapshot().file(&diary).unwrap());
            let lent = lent_text(&memex, &privacy);
            // The view was built: the public file is lent.
            assert!(lent.contains("The public launch notes."), "{when}: {lent}");
            (
                privacy.file_is_private(&file) && !lent.contains("harbour"),
                file,
            )
        };
        assert!(private("loaded").0);

        // Removed (an editor's save by rename), and the file read again.
        std::fs::remove_file(&setup).unwrap();
        memex.reload_file(&diary);
        let (kept, file) = private("setup file removed");
        assert!(kept);
        assert!(
            file.warnings
                .iter()
                .any(|w| w.line == 1 && w.message.contains("kept until it reads again")),
            "{:?}",
            file.warnings
        );
        // The file itself edited while its setup file is missing.
        std::fs::write(
            &diary,
            "#+SETUPFILE: p.setup\n* Monday\nMet Ann at the harbour today.\n* Tuesday\nThe harbour again.\n",
        )
        .unwrap();
        memex.reload_file(&diary);
        assert!(private("edited while its setup file is missing").0);
        // Half-written (empty, then cut mid-line), then not UTF-8.
        for broken in [
            &b""[..],
            &b"#+FILETAGS: :@pers"[..],
            &b"#+FILETAGS: :@personal\xff:\n"[..],
        ] {
            std::fs::write(&setup, broken).unwrap();
            memex.reload_file(&diary);
            let when = format!("setup file {broken:?}");
            assert!(private(when.as_str()).0);
        }

        // Whole again, without a privacy tag: public (the rule declassifies
        // only through a setup file that reads whole).
        std::fs::write(&setup, "#+FILETAGS: :work:\n").unwrap();
        memex.reload_file(&diary);
        let (kept, file) = private("whole again");
        assert!(!kept);
        assert_eq!(file.file_tags, ["work"]);
    }

    #[test]
    fn a_file_whose_setup_file_is_missing_at_first_load_is_private_until_it_reads() {
        let (dir, memex) = memex_with(&[
            (
                "diary.org",
                b"#+SETUPFILE: p.setup\n* Monday\nMet Ann at the harbour today.\n",
            ),
            ("work.org", b"* Launch\nThe public launch notes.\n"),
        ]);
        let root = dir.path().canonicalize().unwrap();
        let (diary, setup) = (root.join("diary.org"), root.join("p.setup"));
        let privacy = PrivacyTags::new(["@personal"]);
        let check = |when: &str, private: bool| {
            let snapshot = memex.snapshot();
            let file = snapshot.file(&diary).unwrap();
            assert_eq!(privacy.file_is_private(file), private, "{when}");
            let lent = lent_text(&memex, &privacy);
            // The view was built: the public file is lent.
            assert!(lent.contains("The public launch notes."), "{when}: {lent}");
            assert_eq!(lent.contains("harbour"), !private, "{when}: {lent}");
        };
        check("loaded", true);
        let warnings = memex.snapshot().file(&diary).unwrap().warnings.clone();
        assert!(
            warnings
                .iter()
                .any(|w| w.line == 1 && w.message.contains("private as a whole until it reads")),
            "{warnings:?}"
        );
        // Caught half-written, its file tags are still unknown.
        std::fs::write(&setup, "").unwrap();
        memex.reload_file(&diary);
        check("setup file empty", true);
        // Whole, and without a privacy tag: public.
        std::fs::write(&setup, "#+TODO: TODO | DONE\n").unwrap();
        memex.reload_file(&diary);
        check("setup file whole", false);
    }

    #[test]
    fn a_missing_path_is_a_clear_error() {
        let err = Memex::open(&[PathBuf::from("/no/such/memex")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/no/such/memex: no such file or folder; check `memex.paths` or --memex"
        );
    }

    #[test]
    fn a_memex_loaded_on_both_cores_maps_every_id_to_the_first_file_and_lends_the_same_views() {
        // Over 4 MiB: the files are read, keyed and prepared on every core,
        // and the snapshot is filled in place.
        let file = |name: &str, n: usize| {
            let mut org = String::new();
            for i in 0..n {
                let tag = if i % 7 == 0 { " :@personal:" } else { "" };
                org.push_str(&format!(
                    "* Heading {i} of {name}{tag}\n:PROPERTIES:\n:ID: {name}-{i}\n:END:\nA body long enough to make the file large, {i}.\n"
                ));
            }
            // One id in two files: the first file (by path) keeps it.
            org.push_str(&format!(
                "* Shared in {name}\n:PROPERTIES:\n:ID: shared\n:END:\n"
            ));
            org
        };
        let names = ["a", "b", "c", "d"];
        let texts: Vec<String> = names.iter().map(|n| file(n, 12_000)).collect();
        assert!(texts.iter().map(String::len).sum::<usize>() >= PARALLEL_LOAD_BYTES as usize);
        let files: Vec<(String, &[u8])> = names
            .iter()
            .zip(&texts)
            .map(|(n, t)| (format!("{n}.org"), t.as_bytes()))
            .collect();
        let files: Vec<(&str, &[u8])> = files.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let (dir, memex) = memex_with(&files);
        let root = dir.path().canonicalize().unwrap();
        let s = memex.snapshot();
        assert_eq!(s.generation(), names.len() as u64);
        for name in names {
            for i in (0..12_000).step_by(97) {
                let id = format!("{name}-{i}");
                assert_eq!(
                    s.id_owner(&id),
                    Some(root.join(format!("{name}.org")).as_path()),
                    "{id}"
                );
            }
        }
        assert_eq!(s.id_owner("shared"), Some(root.join("a.org").as_path()));
        assert_eq!(s.id_owner("nowhere"), None);

        // A snapshot filled file by file as a copy each time agrees.
        let mut copied = MemexSnapshot::default();
        for f in s.files() {
            copied = copied.with_file(Arc::clone(f));
        }
        for id in ["a-0", "b-97", "c-11931", "d-5", "shared"] {
            assert_eq!(copied.id_owner(id), s.id_owner(id), "{id}");
        }

        // The views, prepared on both cores, are those prepared one by one.
        let privacy = PrivacyTags::new(["@personal"]);
        let view = view::SnapshotView::new(&s, &privacy);
        let lent: Vec<_> = view.prepared().collect();
        assert_eq!(lent.len(), names.len());
        for (file, prepared) in lent {
            let alone = view::prepare(file, &privacy);
            assert_eq!(prepared.text(file), alone.text(file));
            assert_eq!(prepared.index.objects.len(), alone.index.objects.len());
            assert!(!prepared.text(file).contains("@personal"));
        }

        // The first file losing the shared id hands it to the next.
        let a = root.join("a.org");
        std::fs::write(&a, texts[0].replace(":ID: shared", ":ID: a-only")).unwrap();
        memex.reload_file(&a);
        assert_eq!(
            memex.snapshot().id_owner("shared"),
            Some(root.join("b.org").as_path())
        );
    }

    #[test]
    fn an_id_two_files_hold_passes_to_the_other_and_one_file_holds_goes_with_it() {
        let (dir, memex) = memex_with(&[
            (
                "a.org",
                b"* A\n:PROPERTIES:\n:ID: both\n:END:\n* A2\n:PROPERTIES:\n:ID: only-a\n:END:\n",
            ),
            ("b.org", b"* B\n:PROPERTIES:\n:ID: both\n:END:\n"),
        ]);
        let root = dir.path().canonicalize().unwrap();
        let (a, b) = (root.join("a.org"), root.join("b.org"));
        let owner = |id: &str| memex.snapshot().id_owner(id).map(Path::to_path_buf);
        assert_eq!(owner("both"), Some(a.clone()));
        assert_eq!(owner("only-a"), Some(a.clone()));
        // `a.org` edited without either id: `both` passes to `b.org`,
        // `only-a` is gone.
        std::fs::write(&a, "* A\n").unwrap();
        memex.reload_file(&a);
        assert_eq!(owner("both"), Some(b.clone()));
        assert_eq!(owner("only-a"), None);
        // Back in `a.org`: `b.org` claimed it first now, and keeps it.
        std::fs::write(&a, "* A\n:PROPERTIES:\n:ID: both\n:END:\n").unwrap();
        memex.reload_file(&a);
        assert_eq!(owner("both"), Some(b.clone()));
        assert_eq!(memex.snapshot().get("both").unwrap().title(), "B");
        // `b.org` removed: `a.org` holds it again; then neither does.
        std::fs::remove_file(&b).unwrap();
        memex.reload_file(&b);
        assert_eq!(owner("both"), Some(a.clone()));
        std::fs::remove_file(&a).unwrap();
        memex.reload_file(&a);
        assert_eq!(owner("both"), None);
        assert!(memex.snapshot().get("both").is_none());
    }

    #[test]
    fn republishing_one_file_keeps_ids_of_the_others_and_drops_its_old_ones() {
        let (dir, memex) = memex_with(&[
            ("a.org", b"* A\n:PROPERTIES:\n:ID: a1\n:END:\n"),
            ("b.org", b"* B\n:PROPERTIES:\n:ID: b1\n:END:\n"),
        ]);
        let path = dir.path().canonicalize().unwrap().join("a.org");
        std::fs::write(&path, "* A2\n:PROPERTIES:\n:ID: a2\n:END:\n").unwrap();
        let before = memex.snapshot();
        memex.reload_file(&path);
        let s = memex.snapshot();
        assert!(s.get("a1").is_none());
        assert_eq!(s.get("a2").unwrap().title(), "A2");
        assert_eq!(s.get("b1").unwrap().title(), "B");
        assert_eq!(s.generation(), before.generation() + 1);
        // The old snapshot is untouched.
        assert_eq!(before.get("a1").unwrap().title(), "A");

        std::fs::remove_file(&path).unwrap();
        memex.reload_file(&path);
        assert!(memex.snapshot().get("a2").is_none());
    }

    #[test]
    fn an_edit_that_keeps_the_object_count_is_still_a_new_generation() {
        // The seed detected changes by object count; we do by generation.
        let (dir, memex) = memex_with(&[("a.org", b"* A\n")]);
        let path = dir.path().canonicalize().unwrap().join("a.org");
        let g = memex.snapshot().generation();
        std::fs::write(&path, "* B\n").unwrap();
        assert!(memex.reload_file(&path) > g);
        assert_eq!(memex.snapshot().objects().next().unwrap().title(), "B");
    }

    #[test]
    fn reloading_unchanged_bytes_publishes_nothing() {
        let (dir, memex) = memex_with(&[("a.org", b"* A\n")]);
        let path = dir.path().canonicalize().unwrap().join("a.org");
        let g = memex.snapshot().generation();
        assert_eq!(memex.reload_file(&path), g);
        assert_eq!(memex.reload_file(&dir.path().join("never.org")), g);
    }

    #[test]
    fn the_memex_tells_the_versions_it_wrote_from_those_written_outside() {
        let (dir, memex) = memex_with(&[("a.org", b"* A\n:PROPERTIES:\n:ID: a\n:END:\n")]);
        let root = dir.path().canonicalize().unwrap();
        let path = root.join("a.org");
        let hash = |path: &Path| memex.snapshot().file(path).unwrap().content_hash;
        let start = hash(&path);
        let since_start = memex.snapshot().generation();
        // Two writes in a row: the chain leads back to where it started.
        memex
            .add_child(&memex.snapshot(), "a", "One", None)
            .unwrap();
        memex
            .add_child(&memex.snapshot(), "a", "Two", None)
            .unwrap();
        let written = hash(&path);
        let since_written = memex.snapshot().generation();
        assert!(memex.wrote(&path, since_start, Some(start), written));
        // An edit made outside, then a write on top of it: that write is
        // the memex's own, the way back from it to `start` is not.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("* Outside\n");
        std::fs::write(&path, text).unwrap();
        memex.reload_file(&path);
        let outside = hash(&path);
        let since_outside = memex.snapshot().generation();
        assert!(!memex.wrote(&path, since_written, Some(written), outside));
        memex
            .add_child(&memex.snapshot(), "a", "Three", None)
            .unwrap();
        let last = hash(&path);
        assert!(memex.wrote(&path, since_outside, Some(outside), last));
        assert!(!memex.wrote(&path, since_start, Some(start), last));
        assert!(!memex.wrote(&path, since_start, None, last));
        // A file this process created, then adopted.
        let new = root.join("new.org");
        let since_last = memex.snapshot().generation();
        std::fs::write(&new, "* New\n").unwrap();
        memex.adopt(&new);
        assert!(memex.wrote(&new, since_last, None, hash(&new)));
        // Created, then seen by the watcher before it was adopted: still
        // the process's own file.
        let newer = root.join("newer.org");
        let since_new = memex.snapshot().generation();
        std::fs::write(&newer, "* Newer\n").unwrap();
        memex.reload_file(&newer);
        memex.adopt(&newer);
        assert!(memex.wrote(&newer, since_new, None, hash(&newer)));
    }

    /// What each own write did is remembered with it, for the host to name
    /// when an edit made outside undoes it.
    #[test]
    fn the_memex_remembers_what_its_own_writes_did() {
        let (dir, memex) = memex_with(&[("a.org", b"* TODO A\n:PROPERTIES:\n:ID: a\n:END:\n")]);
        let path = dir.path().canonicalize().unwrap().join("a.org");
        let added = memex
            .add_child(&memex.snapshot(), "a", "  Order cabinets ", None)
            .unwrap();
        let done = memex
            .set_todo(&memex.snapshot(), "a", Some("DONE"))
            .unwrap();
        memex
            .set_property(&memex.snapshot(), "a", "EFFORT", "1:00")
            .unwrap();
        let writes = memex.own_writes();
        assert_eq!(writes.len(), 3);
        assert!(writes.iter().all(|w| w.path == path));
        assert_eq!(writes[0].generation, added.generation);
        assert_eq!(
            writes[0].edit,
            Some(write::OwnEdit::Added {
                id: added.id.clone(),
                parent: "a".to_owned(),
                title: "Order cabinets".to_owned(),
            })
        );
        assert_eq!(writes[1].generation, done.generation);
        assert_eq!(
            writes[1].edit,
            Some(write::OwnEdit::Todo {
                id: "a".to_owned(),
                title: "A".to_owned(),
                from: Some("TODO".to_owned()),
                to: Some("DONE".to_owned()),
            })
        );
        assert_eq!(writes[2].edit, None);
        // A write that changes nothing is not one.
        memex
            .set_todo(&memex.snapshot(), "a", Some("DONE"))
            .unwrap();
        assert_eq!(memex.own_writes().len(), 3);
    }

    /// A TODO toggled by the host (X → Y → X → Y), then an editor with a
    /// stale buffer saves X: that save is an edit made outside, although
    /// the memex once wrote X over Y itself.
    #[test]
    fn a_version_the_memex_wrote_earlier_saved_again_from_outside_is_an_outside_edit() {
        const X: &str = "* TODO A\n:PROPERTIES:\n:ID: a\n:END:\n";
        let (dir, memex) = memex_with(&[("a.org", X.as_bytes())]);
        let path = dir.path().canonicalize().unwrap().join("a.org");
        let hash = |path: &Path| memex.snapshot().file(path).unwrap().content_hash;
        let x = hash(&path);
        let since_x = memex.snapshot().generation();
        memex
            .set_todo(&memex.snapshot(), "a", Some("DONE"))
            .unwrap();
        let y = hash(&path);
        let since_first_y = memex.snapshot().generation();
        memex
            .set_todo(&memex.snapshot(), "a", Some("TODO"))
            .unwrap();
        assert_eq!(hash(&path), x, "toggled back to the same text");
        let since_second_x = memex.snapshot().generation();
        memex
            .set_todo(&memex.snapshot(), "a", Some("DONE"))
            .unwrap();
        assert_eq!(hash(&path), y);
        // The host has seen Y.
        let seen = memex.snapshot().generation();
        // The control: each of the host's own toggles is its own, seen
        // from wherever the observer last looked.
        assert!(memex.wrote(&path, since_x, Some(x), y));
        assert!(memex.wrote(&path, since_first_y, Some(y), x));
        assert!(memex.wrote(&path, since_second_x, Some(x), y));
        // The editor's stale buffer is saved: X again, from outside.
        std::fs::write(&path, X).unwrap();
        memex.reload_file(&path);
        assert_eq!(hash(&path), x);
        assert!(memex.snapshot().generation() > seen);
        assert!(
            !memex.wrote(&path, seen, Some(y), x),
            "an outside save taken for the host's own write"
        );
    }

    /// A file loaded under two names (a symlink and its target): the
    /// memex's write through one name is its own under the other too,
    /// also when the watcher reads that name again; an edit made outside
    /// through either name is not.
    #[test]
    fn a_write_is_the_memexs_own_under_every_name_of_the_file() {
        let (dir, memex) = memex_with(&[("a.org", b"* A\n:PROPERTIES:\n:ID: a\n:END:\n")]);
        let root = dir.path().canonicalize().unwrap();
        let (target, link) = (root.join("a.org"), root.join("link.org"));
        std::os::unix::fs::symlink("a.org", &link).unwrap();
        memex.reload_file(&link);
        let before = memex.snapshot();
        assert!(before.file(&link).is_some() && before.file(&target).is_some());
        let own = |old: &MemexSnapshot, new: &MemexSnapshot, path: &Path| {
            let from = old.file(path).map(|f| f.content_hash);
            let to = new.file(path).unwrap().content_hash;
            from == Some(to) || memex.wrote(path, old.generation(), from, to)
        };
        memex.add_child(&before, "a", "One", None).unwrap();
        // The watcher comes to both names.
        memex.reload_file(&link);
        memex.reload_file(&target);
        let after = memex.snapshot();
        for path in [&target, &link] {
            assert!(
                after.file(path).unwrap().text.contains("** One\n"),
                "{}",
                path.display()
            );
            assert!(own(&before, &after, path), "{}", path.display());
        }
        // The control: an edit made outside through the link is news
        // under both names.
        let mut text = std::fs::read_to_string(&link).unwrap();
        text.push_str("* Outside\n");
        std::fs::write(&link, text).unwrap();
        memex.reload_file(&link);
        let edited = memex.snapshot();
        for path in [&target, &link] {
            assert!(
                edited.file(path).unwrap().text.contains("* Outside\n"),
                "{}",
                path.display()
            );
            assert!(!own(&after, &edited, path), "{}", path.display());
        }
    }

    #[test]
    fn structure_queries_walk_the_outline() {
        let (_dir, memex) = memex_with(&[("a.org", b"* P :project:x:\n** C\n*** G :y:\n")]);
        let s = memex.snapshot();
        let g = s.objects().nth(2).unwrap();
        assert_eq!(
            g.ancestors().map(|o| o.title()).collect::<Vec<_>>(),
            ["C", "P"]
        );
        assert_eq!(g.inherited_tags(), ["project", "x"]);
        assert_eq!(g.tags().collect::<Vec<_>>(), ["y"]);
        let p = s.objects().next().unwrap();
        assert_eq!(p.children().map(|o| o.title()).collect::<Vec<_>>(), ["C"]);
        assert_eq!(s.get(g.id()).unwrap().title(), "G");
    }
}
