//! Write-back: edits to memex files, atomic and byte-preserving.
//!
//! Five edits, each on one object addressed by its id in a snapshot
//! ([`Edit`]): set or clear its TODO keyword, add a child headline, set a
//! property, set its tags, append text to its body. An edit goes in two steps:
//!
//! 1. [`Memex::plan`] computes it against the file *as the snapshot has it*
//!    (the *base*): one splice — a byte range of the base text replaced by
//!    new text — and the whole new text, which is parsed and checked before
//!    anything touches the disk;
//! 2. [`Memex::commit`] writes it and publishes the new version.
//!
//! [`Memex::apply`] does both, and [`Memex::set_todo`], [`Memex::add_child`],
//! [`Memex::set_property`] and [`Memex::append_body`] are shorthands for it.
//!
//! # Guarantees
//!
//! - **Every byte the edit does not touch is kept.** The new text is the base
//!   text with one range replaced ([`Plan::replaced`], [`Plan::inserted`]);
//!   nothing is re-serialised, so spacing, blank lines, unknown markup and
//!   the lack of a final newline survive. Inserted lines use the file's line
//!   ending (CRLF when its first line ends in CRLF).
//! - **The edit does what it says and nothing else.** The new text is parsed
//!   before it is written: every other headline must read back exactly as
//!   before (level, TODO state, priority, title, tags, properties, parent),
//!   and the edited one exactly as intended. Otherwise the edit is refused
//!   with [`WriteError::WouldChangeStructure`] — for instance a title that
//!   ends in what Org reads as tags, or appended text that would become the
//!   headline's planning line.
//! - **Text cannot create structure.** In appended text and new bodies, a
//!   line that Org would read as a headline (`* x` at column 0) or as an
//!   in-buffer setting that changes how the whole file is read (`#+TODO:`,
//!   `#+FILETAGS:`, …) is escaped with a leading comma (`,* x`), the way Org
//!   escapes such lines inside blocks; a line already escaped that way gets
//!   one more comma, so Org's unescaping gives the text back. Other lines
//!   (`*bold*`, ` * item`, `#+BEGIN_SRC`) are written as given.
//! - **No lost updates.** Before writing, the file is read again, under the
//!   memex's writer lock: if it is not byte for byte the base text (so its
//!   content hash differs too), someone changed it since the snapshot the
//!   edit was computed against, and the edit is refused with
//!   [`WriteError::Conflict`]. Nothing is merged; take a new snapshot and
//!   plan again. The file is checked once more right before the rename
//!   (inode, size, modification time), and after it through a descriptor
//!   still open on the old file: a write that slipped in between is put
//!   back and the edit reported as a conflict — no outside edit is lost. A
//!   file open in Emacs with unsaved changes (its lock `.#NAME` exists) is
//!   not written at all ([`WriteError::Busy`]).
//! - **Atomic and durable.** The new text goes to a hidden temporary file in
//!   the same folder (which the memex ignores), with the original's
//!   permissions (and owner, when allowed); it is fsynced and renamed over
//!   the original, then the folder is fsynced. A reader sees the old file or
//!   the new one, never a mix; a crash leaves one of them. A symlinked file is
//!   written through its link (the link stays). Hard links to the file are
//!   not preserved: the rename gives it a new inode.
//! - **Published at once.** After the rename the parsed new version replaces
//!   the old one in a new snapshot with a higher generation, before
//!   [`Memex::commit`] returns.
//! - **Known as its own.** The memex remembers which version each of its
//!   writes replaced ([`Memex::wrote`]): a host comparing two snapshots
//!   tells its own writes from edits made outside, even when other
//!   publishes came between. It also remembers what each did — a headline
//!   added, a TODO state set ([`Memex::own_writes`]) — so that the host can
//!   say which of its writes an edit made outside undid.
//!
//! # Example
//!
//! ```
//! use foveal_memex::Memex;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("work.org");
//! std::fs::write(&path, "* Launch\n** TODO Write docs\n").unwrap();
//! let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
//!
//! let base = memex.snapshot();
//! let docs = base.objects().find(|o| o.title() == "Write docs").unwrap().id().to_owned();
//! let written = memex.set_todo(&base, &docs, Some("DONE")).unwrap();
//! assert!(written.generation > base.generation());
//!
//! // Edits against an old snapshot are refused once the file has changed.
//! let stale = memex.set_property(&base, &docs, "EFFORT", "1:00");
//! assert!(matches!(stale, Err(foveal_memex::write::WriteError::Conflict { .. })));
//!
//! let base = memex.snapshot();
//! memex.set_property(&base, &docs, "EFFORT", "1:00").unwrap();
//! assert_eq!(
//!     std::fs::read_to_string(&path).unwrap(),
//!     "* Launch\n** DONE Write docs\n:PROPERTIES:\n:EFFORT: 1:00\n:END:\n"
//! );
//! ```

use std::fs;
use std::io::{Read as _, Write as _};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::file::{FileRef, MemexFile, fnv1a};
use crate::{Memex, MemexSnapshot};

pub(crate) mod disk;
pub use disk::process_alive;
mod splice;

use disk::*;
use splice::*;

/// One edit to one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// Sets the TODO keyword to `state`, which must be one of the file's
    /// keywords (`#+TODO:`; default `TODO | DONE`), or removes it (`None`).
    SetTodo {
        /// The new state; `None` clears it.
        state: Option<String>,
    },
    /// Adds a child headline at the end of the object's subtree, one level
    /// deeper, with a new `:ID:` (a random UUID) in a property drawer and
    /// `body` (escaped like [`Edit::AppendBody`]'s text) under it.
    AddChild {
        /// The title: one line; surrounding spaces are dropped. It must read
        /// back as given, so it cannot start with a TODO keyword, a `[#A]`
        /// cookie or `COMMENT`, nor end in `:tags:`.
        title: String,
        /// The body, if any.
        body: Option<String>,
    },
    /// Sets property `key` (matched case-insensitively, as Org does) to
    /// `value`, replacing the value in place when the key exists, adding a
    /// line before the drawer's `:END:` in the drawer's indentation style
    /// when it does not, and creating the drawer (after the headline and its
    /// planning line) when there is none.
    SetProperty {
        /// The key: no whitespace, no colon, not `END` or `PROPERTIES`.
        key: String,
        /// The value: one line; surrounding spaces are dropped (Org drops
        /// them when reading).
        value: String,
    },
    /// Replaces the object's own tags with `tags` (none removes them), in
    /// Org's `:a:b:` form at the end of the headline line. Each tag is
    /// letters, digits, `_`, `@`, `#` or `%`.
    SetTags {
        /// The tags, in order.
        tags: Vec<String>,
    },
    /// Appends `text` at the end of the object's own section (before its
    /// first child), on lines of its own: a newline is added before it when
    /// the section does not end in one, and after it when it does not end
    /// in one. Headline-like lines are escaped (see the module docs).
    AppendBody {
        /// The text; an empty text changes nothing.
        text: String,
    },
}

/// Why an edit was not made. In every case the file on disk is as it was.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// No object has this id in the snapshot the edit was based on.
    #[error(
        "no object with id {id:?} in the memex snapshot the edit was based on; nothing was written"
    )]
    UnknownId {
        /// The id.
        id: String,
    },
    /// The TODO keyword is not one of the file's.
    #[error(
        "{}:{line}: `{keyword}` is not a TODO keyword of this file; its keywords are {known} (from its `#+TODO:` lines and `#+SETUPFILE:`s, or the default); nothing was written",
        path.display()
    )]
    UnknownKeyword {
        /// The file.
        path: PathBuf,
        /// The object's 1-based line.
        line: u32,
        /// The keyword asked for.
        keyword: String,
        /// The file's keywords, as a `#+TODO:` line writes them.
        known: String,
    },
    /// An input Org cannot hold where it would go (a newline in a title, a
    /// space in a property key, …).
    #[error("{}:{line}: {message}; nothing was written", path.display())]
    InvalidInput {
        /// The file.
        path: PathBuf,
        /// The object's 1-based line.
        line: u32,
        /// What is wrong and what would be right.
        message: String,
    },
    /// The id is already used by another object.
    #[error(
        "{}:{line}: the id {id:?} is already used by another object of the memex; ids must be unique; nothing was written",
        path.display()
    )]
    DuplicateId {
        /// The file.
        path: PathBuf,
        /// The object's 1-based line.
        line: u32,
        /// The id.
        id: String,
    },
    /// The edited file would not read back as intended.
    #[error("{}:{line}: {message}; nothing was written", path.display())]
    WouldChangeStructure {
        /// The file.
        path: PathBuf,
        /// The object's 1-based line.
        line: u32,
        /// What Org would read instead.
        message: String,
    },
    /// The file changed (or went away) on disk after the snapshot the edit
    /// was based on.
    #[error(
        "{}: {} on disk since the memex snapshot this edit was based on; nothing was written (take a new snapshot and redo the edit)",
        path.display(),
        if *removed { "removed" } else { "changed" }
    )]
    Conflict {
        /// The file.
        path: PathBuf,
        /// Whether it is gone.
        removed: bool,
    },
    /// The file is open in Emacs with unsaved changes (its lock `.#NAME`
    /// exists): writing under the user's feet would lose one side.
    #[error("{}: the file is being edited in Emacs (its lock {} exists); nothing was written: try again once it is saved", path.display(), lock.display())]
    Busy {
        /// The file.
        path: PathBuf,
        /// The lock.
        lock: PathBuf,
    },
    /// The file is not under one of this memex's roots.
    #[error("{}: not a file of this memex; nothing was written", path.display())]
    NotMember {
        /// The file.
        path: PathBuf,
    },
    /// The OS refused a step before the file was replaced.
    #[error("{}: cannot {action}: {source}; the file is unchanged", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The step that failed.
        action: &'static str,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// A computed edit, not yet written: the base file, the splice and the
/// parsed new version. Made by [`Memex::plan`], written by
/// [`Memex::commit`].
#[derive(Debug)]
pub struct Plan {
    base: FileRef,
    file: MemexFile,
    replaced: Range<usize>,
    inserted: Range<usize>,
    index: u32,
    /// What the edit does, as the memex remembers its own writes
    /// ([`Memex::own_writes`]); set by [`Memex::plan`].
    own: Option<OwnEdit>,
}

impl Plan {
    /// The file the edit is for.
    pub fn path(&self) -> &Path {
        &self.base.path
    }

    /// The file as the edit's snapshot had it.
    pub fn base(&self) -> &MemexFile {
        &self.base
    }

    /// The new version, parsed.
    pub fn file(&self) -> &MemexFile {
        &self.file
    }

    /// The snapshot `base` becomes with this plan applied, in memory only:
    /// nothing is written (previews and benchmarks).
    pub fn preview(self, base: &MemexSnapshot) -> MemexSnapshot {
        base.with_file(Arc::new(self.file))
    }

    /// The new text.
    pub fn text(&self) -> &str {
        &self.file.text
    }

    /// The byte range of the base text that the edit replaces (empty for an
    /// insertion).
    pub fn replaced(&self) -> Range<usize> {
        self.replaced.clone()
    }

    /// The text that replaces it; it sits at `replaced().start` in the new
    /// text.
    pub fn inserted(&self) -> &str {
        &self.file.text[self.inserted.clone()]
    }

    /// Whether the edit changes the file (setting a state it already has
    /// does not).
    pub fn changed(&self) -> bool {
        !(self.replaced.is_empty() && self.inserted.is_empty())
    }

    /// The id of the edited object after the edit — for
    /// [`Edit::AddChild`], the new child's.
    pub fn id(&self) -> &str {
        self.file.id(self.index)
    }

    /// The 1-based line of that object in the new text.
    pub fn line(&self) -> u32 {
        self.file.objects[self.index as usize].headline.line
    }
}

/// One of the memex's own writes, as it remembers them
/// ([`Memex::own_writes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnWrite {
    /// The file written (the name it was written under).
    pub path: PathBuf,
    /// The generation of the snapshot that first showed it.
    pub generation: u64,
    /// When it was written.
    pub at: std::time::SystemTime,
    /// What it did, for the edits a host can name when an edit made
    /// outside undoes them; `None` for the others (a property, tags, body
    /// text, a file the host created, the same write seen under another
    /// name of the file).
    pub edit: Option<OwnEdit>,
}

/// What one of the memex's own edits did, for [`OwnWrite`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OwnEdit {
    /// A headline added ([`Edit::AddChild`]).
    Added {
        /// The new headline's id.
        id: String,
        /// Its parent's id.
        parent: String,
        /// Its title, as written (its first 200 bytes).
        title: String,
    },
    /// A TODO state set or cleared ([`Edit::SetTodo`]).
    Todo {
        /// The headline's id.
        id: String,
        /// Its title then (its first 200 bytes).
        title: String,
        /// Its state before (`None`: none).
        from: Option<String>,
        /// The state set (`None`: cleared).
        to: Option<String>,
    },
}

/// The bytes of a title an [`OwnEdit`] keeps: enough to name it, and the
/// record stays small however long the titles written.
const REMEMBERED_TITLE: usize = 200;

/// `title` cut to [`REMEMBERED_TITLE`] bytes, on a char boundary.
fn remembered(title: &str) -> String {
    let mut end = title.len().min(REMEMBERED_TITLE);
    while !title.is_char_boundary(end) {
        end -= 1;
    }
    title[..end].to_owned()
}

/// What a successful edit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The file.
    pub path: PathBuf,
    /// The edited object's id — for [`Edit::AddChild`], the new child's.
    pub id: String,
    /// Its 1-based line in the new text.
    pub line: u32,
    /// The generation of the snapshot that shows the edit (the current one
    /// when nothing changed).
    pub generation: u64,
    /// Whether the file changed; `false` when the edit was already true
    /// (nothing was written then).
    pub changed: bool,
}

impl Memex {
    /// Computes `edit` on the object `id` of `base`, against the file as
    /// `base` has it. Nothing is written: see [`Memex::commit`].
    pub fn plan(&self, base: &MemexSnapshot, id: &str, edit: &Edit) -> Result<Plan, WriteError> {
        let unknown = || WriteError::UnknownId { id: id.to_owned() };
        let object = base.get(id).ok_or_else(unknown)?;
        let file = base.file(&object.file().path).ok_or_else(unknown)?;
        let id_base = self.id_base(&file.path);
        let mut plan = plan_in(Arc::clone(file), object.index(), &id_base, edit, &|id| {
            base.get(id).is_some()
        })?;
        plan.own = match edit {
            Edit::AddChild { title, .. } => Some(OwnEdit::Added {
                id: plan.id().to_owned(),
                parent: id.to_owned(),
                title: remembered(title.trim_matches([' ', '\t'])),
            }),
            Edit::SetTodo { state } => Some(OwnEdit::Todo {
                id: id.to_owned(),
                title: remembered(object.title()),
                from: object.todo().map(str::to_owned),
                to: state.clone(),
            }),
            _ => None,
        };
        Ok(plan)
    }

    /// Writes `plan` and publishes the new version, if the file on disk is
    /// still the plan's base (otherwise [`WriteError::Conflict`]). Writers
    /// are serialised by the memex's writer lock, which also orders them
    /// with reloads. A plan that changes nothing writes nothing.
    pub fn commit(&self, plan: Plan) -> Result<Written, WriteError> {
        let path = plan.base.path.clone();
        if !self.is_member(&path) {
            return Err(WriteError::NotMember { path });
        }
        let _writing = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let io = |action| {
            let path = path.clone();
            move |source| WriteError::Io {
                path,
                action,
                source,
            }
        };
        // Write through a symlink, to the file it points at.
        let target = match fs::canonicalize(&path) {
            Ok(target) => target,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(WriteError::Conflict {
                    path,
                    removed: true,
                });
            }
            Err(e) => return Err(io("resolve its path")(e)),
        };
        if let Some(lock) = disk::emacs_lock(&target) {
            return Err(WriteError::Busy { path, lock });
        }
        // Read through a descriptor kept open to the end: after the rename
        // it still shows the old file, so a write that raced ours is seen.
        let (mut base_file, on_disk) = match fs::File::open(&target).and_then(|mut f| {
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes).map(|_| (f, bytes))
        }) {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(WriteError::Conflict {
                    path,
                    removed: true,
                });
            }
            Err(e) => return Err(io("read it back")(e)),
        };
        // Byte equality with the base text: it implies an equal content
        // hash, does not depend on which hash the file module uses, and
        // cannot be fooled by a collision.
        if on_disk != plan.base.text.as_bytes() {
            return Err(WriteError::Conflict {
                path,
                removed: false,
            });
        }
        let id = plan.id().to_owned();
        let line = plan.line();
        if !plan.changed() {
            return Ok(Written {
                path,
                id,
                line,
                generation: self.current.load().generation(),
                changed: false,
            });
        }
        let seen = disk::Seen::of(&base_file).map_err(io("read its metadata"))?;
        disk::replace_guarded(
            &path,
            &target,
            plan.file.text.as_bytes(),
            &mut base_file,
            &seen,
        )?;
        // The same publish as `reload_file`, which we cannot call: it takes
        // the writer lock we hold. The parsed plan is the file's new text,
        // and a version of the memex's own (`Memex::wrote`).
        let (from, to) = (plan.base.content_hash, plan.file.content_hash);
        let mut file = plan.file;
        let written = fs::metadata(&target).ok();
        file.modified = written
            .as_ref()
            .and_then(|m| m.modified().ok())
            .or_else(|| Some(std::time::SystemTime::now()));
        // The new text is a new file (written beside, renamed over).
        file.identity = written.as_ref().map(crate::file::FileId::of);
        let next = self.current.load().with_file(self.prepared(file));
        let mut generation = next.generation();
        self.note_own(&path, generation, (Some(from), to), plan.own);
        self.current.store(Arc::new(next));
        self.after_publish();
        // The file's other names in the memex (its links): read again now,
        // while the writer lock keeps every other reader out, and a name
        // that shows the new text is a version of the memex's own too —
        // not an edit made outside when the watcher comes to it.
        let names = plan
            .base
            .identity
            .map(|identity| self.current.load().names_of(identity, &path))
            .unwrap_or_default();
        for name in names {
            generation = self.reload_locked(&name, crate::Own::Text(to)).0;
        }
        Ok(Written {
            path,
            id,
            line,
            generation,
            changed: true,
        })
    }

    /// Plans and commits `edit` on object `id` of `base`.
    pub fn apply(
        &self,
        base: &MemexSnapshot,
        id: &str,
        edit: &Edit,
    ) -> Result<Written, WriteError> {
        self.commit(self.plan(base, id, edit)?)
    }

    /// Sets (`Some`) or clears (`None`) the TODO keyword of object `id`
    /// ([`Edit::SetTodo`]).
    pub fn set_todo(
        &self,
        base: &MemexSnapshot,
        id: &str,
        state: Option<&str>,
    ) -> Result<Written, WriteError> {
        let state = state.map(str::to_owned);
        self.apply(base, id, &Edit::SetTodo { state })
    }

    /// Adds a child headline under object `parent` ([`Edit::AddChild`]).
    /// [`Written::id`] is the new child's id.
    pub fn add_child(
        &self,
        base: &MemexSnapshot,
        parent: &str,
        title: &str,
        body: Option<&str>,
    ) -> Result<Written, WriteError> {
        let edit = Edit::AddChild {
            title: title.to_owned(),
            body: body.map(str::to_owned),
        };
        self.apply(base, parent, &edit)
    }

    /// Sets property `key` of object `id` to `value` ([`Edit::SetProperty`]).
    pub fn set_property(
        &self,
        base: &MemexSnapshot,
        id: &str,
        key: &str,
        value: &str,
    ) -> Result<Written, WriteError> {
        let edit = Edit::SetProperty {
            key: key.to_owned(),
            value: value.to_owned(),
        };
        self.apply(base, id, &edit)
    }

    /// Sets the own tags of object `id` ([`Edit::SetTags`]).
    pub fn set_tags(
        &self,
        base: &MemexSnapshot,
        id: &str,
        tags: &[String],
    ) -> Result<Written, WriteError> {
        let tags = tags.to_vec();
        self.apply(base, id, &Edit::SetTags { tags })
    }

    /// Appends `text` to the body of object `id` ([`Edit::AppendBody`]).
    pub fn append_body(
        &self,
        base: &MemexSnapshot,
        id: &str,
        text: &str,
    ) -> Result<Written, WriteError> {
        let text = text.to_owned();
        self.apply(base, id, &Edit::AppendBody { text })
    }
}

/// A byte range of the base text and what replaces it.
#[cfg(test)]
mod tests;
