//! Write-back: edits to memex files, atomic and byte-preserving.
//!
//! Four edits, each on one object addressed by its id in a snapshot
//! ([`Edit`]): set or clear its TODO keyword, add a child headline, set a
//! property, append text to its body. An edit goes in two steps:
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
//!   plan again.
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
//!
//! # Example
//!
//! ```
//! use foveal::memex::Memex;
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
//! assert!(matches!(stale, Err(foveal::memex::write::WriteError::Conflict { .. })));
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

use crate::memex::file::{FileRef, MemexFile, fnv1a};
use crate::memex::{Memex, MemexSnapshot};

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
        "{}:{line}: `{keyword}` is not a TODO keyword of this file; its keywords are {known} (from its `#+TODO:` lines, or the default); nothing was written",
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
        plan_in(Arc::clone(file), object.index(), &id_base, edit, &|id| {
            base.get(id).is_some()
        })
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
        let on_disk = match fs::read(&target) {
            Ok(bytes) => bytes,
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
        replace_atomically(&path, &target, plan.file.text.as_bytes())?;
        // The same publish as `reload_file`, which we cannot call: it takes
        // the writer lock we hold. The parsed plan is the file's new text.
        let next = self.current.load().with_file(Arc::new(plan.file));
        let generation = next.generation();
        self.current.store(Arc::new(next));
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
struct Splice {
    at: Range<usize>,
    text: String,
}

impl Splice {
    fn none() -> Self {
        Self {
            at: 0..0,
            text: String::new(),
        }
    }

    fn insert(at: usize, text: String) -> Self {
        Self { at: at..at, text }
    }
}

/// The place of an object, for errors.
struct At<'a> {
    path: &'a Path,
    line: u32,
}

impl At<'_> {
    fn invalid(&self, message: impl Into<String>) -> WriteError {
        WriteError::InvalidInput {
            path: self.path.to_owned(),
            line: self.line,
            message: message.into(),
        }
    }

    fn structure(&self, message: impl Into<String>) -> WriteError {
        WriteError::WouldChangeStructure {
            path: self.path.to_owned(),
            line: self.line,
            message: message.into(),
        }
    }
}

/// Plans `edit` on object `index` of `base`. `taken` says whether an id is
/// already used in the memex; `id_base` is what derived ids hash.
fn plan_in(
    base: FileRef,
    index: u32,
    id_base: &str,
    edit: &Edit,
    taken: &dyn Fn(&str) -> bool,
) -> Result<Plan, WriteError> {
    let object = &base.objects[index as usize];
    let h = &object.headline;
    let at = At {
        path: &base.path,
        line: h.line,
    };
    let text = base.text.as_str();
    let nl = newline_of(text);

    // What the edited object must read back as, besides the splice.
    let mut expect = Expect::Same;
    let splice = match edit {
        Edit::SetTodo { state } => set_todo(&base, index, state.as_deref(), &at)?,
        Edit::AddChild { title, body } => {
            let title = title.trim_matches([' ', '\t']);
            if title.is_empty() {
                return Err(at.invalid("a new headline needs a title"));
            }
            if title.contains(['\n', '\r']) {
                return Err(at.invalid(format!(
                    "a headline title is one line; {title:?} has a line break"
                )));
            }
            let mut id = new_uuid();
            while taken(&id) || base.index_of(&id).is_some() {
                id = new_uuid();
            }
            let body = body
                .as_deref()
                .map(|b| escape_text(b, nl))
                .unwrap_or_default();
            let pos = h.subtree.end as usize;
            let mut s = String::new();
            if !text[..pos].ends_with('\n') {
                s.push_str(nl);
            }
            for _ in 0..=h.level {
                s.push('*');
            }
            s.push(' ');
            s.push_str(title);
            s.push_str(nl);
            for line in [":PROPERTIES:", &format!(":ID: {id}"), ":END:"] {
                s.push_str(line);
                s.push_str(nl);
            }
            s.push_str(&body);
            expect = Expect::Child {
                at: base
                    .objects
                    .partition_point(|o| (o.headline.own.start as usize) < pos),
                title: title.to_owned(),
                id,
                body,
            };
            Splice::insert(pos, s)
        }
        Edit::SetProperty { key, value } => {
            let value = value.trim_matches([' ', '\t']);
            if key.is_empty()
                || key.contains(|c: char| c.is_whitespace() || c == ':')
                || key.eq_ignore_ascii_case("END")
                || key.eq_ignore_ascii_case("PROPERTIES")
            {
                return Err(at.invalid(format!(
                    "{key:?} cannot be a property key: a key is one word without spaces or colons, and not END or PROPERTIES"
                )));
            }
            if value.contains(['\n', '\r']) {
                return Err(at.invalid(format!(
                    "a property value is one line; the value of {key} has a line break"
                )));
            }
            if key.eq_ignore_ascii_case("ID")
                && !value.is_empty()
                && value != object.id(&base.text)
                && (taken(value) || base.index_of(value).is_some())
            {
                return Err(WriteError::DuplicateId {
                    path: base.path.clone(),
                    line: h.line,
                    id: value.to_owned(),
                });
            }
            expect = Expect::Property {
                key: key.clone(),
                value: value.to_owned(),
            };
            set_property(&base, index, key, value, nl)
        }
        Edit::AppendBody { text: appended } => {
            let escaped = escape_text(appended, nl);
            if escaped.is_empty() {
                Splice::none()
            } else {
                let pos = h.own.end as usize;
                let mut s = String::new();
                if !text[..pos].ends_with('\n') {
                    s.push_str(nl);
                }
                s.push_str(&escaped);
                expect = Expect::Appended(escaped);
                Splice::insert(pos, s)
            }
        }
    };

    let mut new_text = String::with_capacity(text.len() + splice.text.len());
    new_text.push_str(&text[..splice.at.start]);
    new_text.push_str(&splice.text);
    new_text.push_str(&text[splice.at.end..]);
    let inserted = splice.at.start..splice.at.start + splice.text.len();
    let file = MemexFile::parse(&base.path, id_base, new_text).map_err(|e| {
        at.structure(format!(
            "the edited file would not load ({}: {})",
            e.line, e.message
        ))
    })?;
    let new_index = verify(&base, &file, index, edit, &expect, &at)?;
    Ok(Plan {
        replaced: splice.at,
        inserted,
        base,
        file,
        index: new_index,
    })
}

/// The line ending of `text`: that of its first line.
fn newline_of(text: &str) -> &'static str {
    match text.find('\n') {
        Some(i) if text[..i].ends_with('\r') => "\r\n",
        _ => "\n",
    }
}

/// The end of the line containing `pos`, before its `\n` or `\r\n`.
fn content_end(text: &str, pos: usize) -> usize {
    let end = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
    if text[..end].ends_with('\r') {
        end - 1
    } else {
        end
    }
}

/// The TODO splice: the keyword is the first word after the stars.
fn set_todo(
    file: &MemexFile,
    index: u32,
    state: Option<&str>,
    at: &At<'_>,
) -> Result<Splice, WriteError> {
    let h = &file.objects[index as usize].headline;
    if let Some(state) = state
        && file.keywords.classify(state).is_none()
    {
        return Err(WriteError::UnknownKeyword {
            path: file.path.clone(),
            line: at.line,
            keyword: state.to_owned(),
            known: format!(
                "{} | {}",
                file.keywords.todo.join(" "),
                file.keywords.done.join(" ")
            ),
        });
    }
    let bytes = file.text.as_bytes();
    let end = content_end(&file.text, h.own.start as usize);
    let mut p = h.own.start as usize + usize::from(h.level) + 1;
    while p < end && matches!(bytes[p], b' ' | b'\t') {
        p += 1;
    }
    Ok(match (h.todo.as_deref(), state) {
        (old, new) if old == new => Splice::none(),
        (Some(old), Some(new)) => Splice {
            at: p..p + old.len(),
            text: new.to_owned(),
        },
        (Some(old), None) => {
            let mut q = p + old.len();
            while q < end && matches!(bytes[q], b' ' | b'\t') {
                q += 1;
            }
            Splice {
                at: p..q,
                text: String::new(),
            }
        }
        (None, Some(new)) if p == end => Splice::insert(p, new.to_owned()),
        (None, Some(new)) => Splice::insert(p, format!("{new} ")),
        (None, None) => Splice::none(),
    })
}

/// The property splice: the value in place, a new line before `:END:`, or
/// a new drawer where the parser looks for one.
fn set_property(file: &MemexFile, index: u32, key: &str, value: &str, nl: &str) -> Splice {
    let text = file.text.as_str();
    let h = &file.objects[index as usize].headline;
    if let Some(p) = h
        .properties
        .iter()
        .find(|p| file.slice(&p.key).eq_ignore_ascii_case(key))
    {
        if file.slice(&p.value) == value {
            return Splice::none();
        }
        if !p.value.is_empty() && !value.is_empty() {
            // Keep the gap (alignment) before the value.
            return Splice {
                at: p.value.start as usize..p.value.end as usize,
                text: value.to_owned(),
            };
        }
        // From the key's closing colon to the end of the line.
        let colon = p.key.end as usize;
        return Splice {
            at: colon + 1..content_end(text, colon),
            text: if value.is_empty() {
                String::new()
            } else {
                format!(" {value}")
            },
        };
    }
    match &h.drawer {
        Some(drawer) => {
            let d = drawer.start as usize..drawer.end as usize;
            let inside = &text[d.clone()];
            let inside = inside.strip_suffix('\n').unwrap_or(inside);
            let inside = inside.strip_suffix('\r').unwrap_or(inside);
            let end_line = d.start + inside.rfind('\n').map_or(0, |i| i + 1);
            Splice::insert(
                end_line,
                property_line(file, index, end_line, key, value, nl),
            )
        }
        None => {
            // Right after the headline and its planning line: where the body
            // starts when there is no drawer.
            let pos = h.body.start as usize;
            let mut s = String::new();
            if !text[..pos].ends_with('\n') {
                s.push_str(nl);
            }
            s.push_str(":PROPERTIES:");
            s.push_str(nl);
            s.push_str(&format!(":{key}:"));
            if !value.is_empty() {
                s.push(' ');
                s.push_str(value);
            }
            s.push_str(nl);
            s.push_str(":END:");
            s.push_str(nl);
            Splice::insert(pos, s)
        }
    }
}

/// A new property line in the style of the drawer's others: their
/// indentation and, when they align their values in a column, that column.
fn property_line(
    file: &MemexFile,
    index: u32,
    end_line: usize,
    key: &str,
    value: &str,
    nl: &str,
) -> String {
    let text = file.text.as_str();
    let h = &file.objects[index as usize].headline;
    let line_start = |pos: usize| text[..pos].rfind('\n').map_or(0, |i| i + 1);
    let indent = match h.properties.first() {
        // The key follows the line's indentation and a colon.
        Some(p) => &text[line_start(p.key.start as usize)..p.key.start as usize - 1],
        None => {
            let end = &text[end_line..];
            &end[..end.len() - end.trim_start_matches([' ', '\t']).len()]
        }
    };
    let column = h
        .properties
        .iter()
        .find(|p| !p.value.is_empty())
        .and_then(|p| {
            let gap = &text[p.key.end as usize + 1..p.value.start as usize];
            (gap.len() > 1 && gap.bytes().all(|b| b == b' ')).then(|| {
                text[line_start(p.key.start as usize)..p.value.start as usize]
                    .chars()
                    .count()
            })
        });
    let mut line = format!("{indent}:{key}:");
    if !value.is_empty() {
        let width = line.chars().count();
        let pad = column.map_or(1, |c| c.saturating_sub(width).max(1));
        line.extend(std::iter::repeat_n(' ', pad));
        line.push_str(value);
    }
    line.push_str(nl);
    line
}

/// In-buffer settings that change how the whole file is read; a line
/// declaring one in appended text is escaped.
const FILE_SETTINGS: &[&str] = &[
    "TODO",
    "SEQ_TODO",
    "TYP_TODO",
    "FILETAGS",
    "TAGS",
    "PROPERTY",
    "SETUPFILE",
    "STARTUP",
    "PRIORITIES",
];

/// Whether `line` is a headline: stars at column 0, then a space.
fn is_headline(line: &str) -> bool {
    let stars = line.bytes().take_while(|&b| b == b'*').count();
    stars > 0 && line.as_bytes().get(stars) == Some(&b' ')
}

/// Whether `line` (indentation removed) declares a file-wide setting.
fn is_file_setting(line: &str) -> bool {
    line.strip_prefix("#+")
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(key, _)| FILE_SETTINGS.iter().any(|k| k.eq_ignore_ascii_case(key)))
}

/// `text` as lines of the file: line endings made `nl`, a final one added,
/// and lines that would be structure escaped with a comma (as Org escapes
/// them in blocks; already escaped ones get one more, so unescaping gives
/// the text back). Empty text stays empty.
fn escape_text(text: &str, nl: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let mut out = String::with_capacity(text.len() + 8);
    let text = text.strip_suffix('\n').unwrap_or(text);
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        if is_headline(line.trim_start_matches(',')) {
            out.push(',');
            out.push_str(line);
        } else if is_file_setting(line[indent..].trim_start_matches(',')) {
            out.push_str(&line[..indent]);
            out.push(',');
            out.push_str(&line[indent..]);
        } else {
            out.push_str(line);
        }
        out.push_str(nl);
    }
    out
}

/// What the edited object must read back as.
enum Expect {
    /// Unchanged, or with the new TODO state (checked apart).
    Same,
    /// With `key` set to `value`.
    Property { key: String, value: String },
    /// With a body ending in this text.
    Appended(String),
    /// With a new child at index `at`.
    Child {
        at: usize,
        title: String,
        id: String,
        body: String,
    },
}

/// The fields of a headline an edit must not change by accident.
#[derive(Debug, PartialEq, Eq)]
struct Shape<'a> {
    level: u16,
    todo: Option<&'a str>,
    priority: Option<char>,
    commented: bool,
    title: &'a str,
    tags: &'a [Box<str>],
    properties: Vec<(&'a str, &'a str)>,
    parent: Option<u32>,
}

fn shape(file: &MemexFile, index: usize) -> Shape<'_> {
    let h = &file.objects[index].headline;
    Shape {
        level: h.level,
        todo: h.todo.as_deref(),
        priority: h.priority,
        commented: h.commented,
        title: file.slice(&h.title),
        tags: &h.tags,
        properties: h
            .properties
            .iter()
            .map(|p| (file.slice(&p.key), file.slice(&p.value)))
            .collect(),
        parent: h.parent,
    }
}

/// Checks that `new` reads as `base` with exactly the intended change.
/// Returns the index, in `new`, of the object to report (the edited one,
/// or the new child).
fn verify(
    base: &MemexFile,
    new: &MemexFile,
    index: u32,
    edit: &Edit,
    expect: &Expect,
    at: &At<'_>,
) -> Result<u32, WriteError> {
    let index = index as usize;
    let child = match expect {
        Expect::Child { at, .. } => Some(*at),
        _ => None,
    };
    let added = usize::from(child.is_some());
    if new.objects.len() != base.objects.len() + added {
        return Err(at.structure(format!(
            "the file would have {} headlines instead of {}",
            new.objects.len(),
            base.objects.len() + added
        )));
    }
    // Old index → new index: everything from the new child on moves down.
    let map = |i: usize| match child {
        Some(c) if i >= c => i + 1,
        _ => i,
    };
    for i in 0..base.objects.len() {
        let mut want = shape(base, i);
        want.parent = want.parent.map(|p| map(p as usize) as u32);
        let got = shape(new, map(i));
        if i != index {
            if got != want {
                return Err(at.structure(format!(
                    "the headline at line {} would read differently ({got:?} instead of {want:?})",
                    new.objects[map(i)].headline.line
                )));
            }
            continue;
        }
        match (edit, expect) {
            (Edit::SetTodo { state }, _) => {
                want.todo = state.as_deref();
                if got != want {
                    return Err(at.structure(format!(
                        "Org would read the headline as TODO state {:?} and title {:?}, not {:?} and {:?}",
                        got.todo, got.title, want.todo, want.title
                    )));
                }
            }
            (_, Expect::Property { key, value }) => {
                match want
                    .properties
                    .iter_mut()
                    .find(|(k, _)| k.eq_ignore_ascii_case(key))
                {
                    Some(p) => p.1 = value.as_str(),
                    None => want.properties.push((key.as_str(), value.as_str())),
                }
                if got != want {
                    return Err(at.structure(format!(
                        "Org would read the properties as {:?}, not {:?}",
                        got.properties, want.properties
                    )));
                }
            }
            (_, Expect::Appended(appended)) => {
                let old_body = base.slice(&base.objects[index].headline.body);
                let new_body = new.slice(&new.objects[index].headline.body);
                if got != want || !new_body.starts_with(old_body) || !new_body.ends_with(appended) {
                    return Err(at.structure(
                        "Org would read the start of the text as the headline's planning line or property drawer, not as body text; begin it with another line",
                    ));
                }
            }
            _ => {
                if got != want {
                    return Err(at.structure(format!(
                        "the headline would read differently ({got:?} instead of {want:?})"
                    )));
                }
            }
        }
    }
    if let Expect::Child {
        at: c,
        title,
        id,
        body,
    } = expect
    {
        let got = shape(new, *c);
        let want = Shape {
            level: base.objects[index].headline.level + 1,
            todo: None,
            priority: None,
            commented: false,
            title,
            tags: &[],
            properties: vec![("ID", id.as_str())],
            parent: Some(index as u32),
        };
        if got != want {
            return Err(at.structure(format!(
                "the title {title:?} would not read back as given (Org would read TODO state {:?}, priority {:?}, comment {}, title {:?}, tags {:?}): a title cannot start with a TODO keyword, a [#A] cookie or COMMENT, nor end in :tags:",
                got.todo, got.priority, got.commented, got.title, got.tags
            )));
        }
        if new.slice(&new.objects[*c].headline.body) != body {
            return Err(at.structure("the new headline's body would not read back as given"));
        }
        return Ok(*c as u32);
    }
    Ok(index as u32)
}

/// A random UUID (version 4), as Org's `org-id-new` writes them: from
/// `/dev/urandom`, or — where there is none — from the standard library's
/// randomly keyed hasher mixed with the time, the process and a counter.
fn new_uuid() -> String {
    let mut b = [0u8; 16];
    let random = fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if random.is_err() {
        use std::hash::{BuildHasher as _, Hasher as _};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        for (half, chunk) in b.chunks_mut(8).enumerate() {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u128(nanos);
            hasher.write_u32(std::process::id());
            hasher.write_u64(count);
            hasher.write_usize(half);
            let mixed = hasher.finish() ^ fnv1a(&nanos.to_le_bytes()).rotate_left(half as u32 * 7);
            chunk.copy_from_slice(&mixed.to_le_bytes());
        }
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Replaces `target` (the resolved `path`) with `bytes`: a temporary file in
/// its folder, with its permissions, fsynced, renamed over it; then the
/// folder fsynced.
fn replace_atomically(path: &Path, target: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    let io = |action: &'static str| {
        move |source| WriteError::Io {
            path: path.to_owned(),
            action,
            source,
        }
    };
    let dir = target.parent().unwrap_or(Path::new("."));
    let meta = fs::metadata(target).map_err(io("read its permissions"))?;
    // Refuse a file we may not write, as an editor would: replacing it by
    // rename would succeed where writing to it does not. Opening to append
    // changes nothing.
    fs::OpenOptions::new()
        .append(true)
        .open(target)
        .map_err(io("open it for writing"))?;

    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (temp, mut file) = loop {
        // Hidden, so the memex and its watcher ignore it.
        let temp = dir.join(format!(
            ".{name}.{}-{}.foveal-tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
        {
            Ok(file) => break (temp, file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io("create a temporary file beside it")(e)),
        }
    };
    let written = (|| {
        file.set_permissions(meta.permissions())
            .map_err(io("give the temporary file its permissions"))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt as _;
            // Best effort: only root may give a file to another user.
            let _ = std::os::unix::fs::fchown(&file, Some(meta.uid()), Some(meta.gid()));
        }
        file.write_all(bytes)
            .map_err(io("write the temporary file"))?;
        file.sync_all()
            .map_err(io("flush the temporary file to disk"))?;
        drop(file);
        fs::rename(&temp, target).map_err(io("rename the temporary file over it"))
    })();
    if let Err(error) = written {
        let _ = fs::remove_file(&temp);
        return Err(error);
    }
    // The rename is done: the file has its new text. A failed folder sync
    // only weakens durability across a crash, so it is a warning.
    #[cfg(unix)]
    if let Err(error) = fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(
            "memex write of {}: the folder was not synced ({error}); the edit may not survive a crash",
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A file parsed in memory (no disk), as the memex would hold it.
    fn parsed(text: &str) -> FileRef {
        Arc::new(MemexFile::parse(Path::new("/m/notes.org"), "notes.org", text.to_owned()).unwrap())
    }

    /// Plans `edit` on the object titled `title` of `text`, in memory.
    fn plan_text(text: &str, title: &str, edit: Edit) -> Result<Plan, WriteError> {
        let file = parsed(text);
        let index = file
            .objects
            .iter()
            .position(|o| file.slice(&o.headline.title) == title)
            .unwrap_or_else(|| panic!("no headline {title:?}")) as u32;
        plan_in(file, index, "notes.org", &edit, &|_| false)
    }

    fn edited(text: &str, title: &str, edit: Edit) -> String {
        plan_text(text, title, edit).unwrap().text().to_owned()
    }

    fn todo(state: Option<&str>) -> Edit {
        Edit::SetTodo {
            state: state.map(str::to_owned),
        }
    }

    fn child(title: &str, body: Option<&str>) -> Edit {
        Edit::AddChild {
            title: title.into(),
            body: body.map(str::to_owned),
        }
    }

    fn prop(key: &str, value: &str) -> Edit {
        Edit::SetProperty {
            key: key.into(),
            value: value.into(),
        }
    }

    fn append(text: &str) -> Edit {
        Edit::AppendBody { text: text.into() }
    }

    /// A memex on a temporary folder holding `a.org`, and that file's
    /// canonical path.
    fn memex_with(text: &str) -> (tempfile::TempDir, Memex, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap().join("a.org");
        fs::write(&path, text).unwrap();
        let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
        (dir, memex, path)
    }

    fn id_of(memex: &Memex, title: &str) -> String {
        let s = memex.snapshot();
        s.objects()
            .find(|o| o.title() == title)
            .unwrap()
            .id()
            .to_owned()
    }

    #[test]
    fn set_todo_replaces_adds_and_clears_the_keyword_and_nothing_else() {
        let text = "#+TODO: TODO NEXT | DONE\n* TODO [#A] Ship it   :work:\nbody\n* Idea\n* DONE  spaced\n";
        assert_eq!(
            edited(text, "Ship it", todo(Some("DONE"))),
            "#+TODO: TODO NEXT | DONE\n* DONE [#A] Ship it   :work:\nbody\n* Idea\n* DONE  spaced\n"
        );
        assert_eq!(
            edited(text, "Idea", todo(Some("NEXT"))),
            "#+TODO: TODO NEXT | DONE\n* TODO [#A] Ship it   :work:\nbody\n* NEXT Idea\n* DONE  spaced\n"
        );
        assert_eq!(
            edited(text, "spaced", todo(None)),
            "#+TODO: TODO NEXT | DONE\n* TODO [#A] Ship it   :work:\nbody\n* Idea\n* spaced\n"
        );
        assert_eq!(
            edited(text, "Ship it", todo(None)),
            "#+TODO: TODO NEXT | DONE\n* [#A] Ship it   :work:\nbody\n* Idea\n* DONE  spaced\n"
        );
        // A headline with no title, only tags, and one with nothing at all.
        assert_eq!(edited("* :x:\n", "", todo(Some("TODO"))), "* TODO :x:\n");
        assert_eq!(edited("* \n", "", todo(Some("TODO"))), "* TODO\n");
        assert_eq!(edited("* TODO", "", todo(None)), "* ");
    }

    #[test]
    fn setting_the_state_a_headline_has_changes_nothing() {
        let plan = plan_text("* DONE x\n", "x", todo(Some("DONE"))).unwrap();
        assert!(!plan.changed());
        assert_eq!(plan.text(), "* DONE x\n");
    }

    #[test]
    fn an_unknown_keyword_is_refused_with_the_files_keywords() {
        let text = "#+TODO: TODO(t) NEXT | DONE(d!) CANCELLED\n\n* TODO x\n";
        let err = plan_text(text, "x", todo(Some("WAITING"))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/m/notes.org:3: `WAITING` is not a TODO keyword of this file; its keywords are TODO NEXT | DONE CANCELLED (from its `#+TODO:` lines, or the default); nothing was written"
        );
        // Keywords are case-sensitive, as in Org.
        let err = plan_text("* x\n", "x", todo(Some("done"))).unwrap_err();
        assert!(
            err.to_string().contains("its keywords are TODO | DONE"),
            "{err}"
        );
    }

    #[test]
    fn clearing_a_keyword_that_would_promote_the_next_word_is_refused() {
        let err = plan_text("* TODO DONE later\n", "DONE later", todo(None)).unwrap_err();
        assert!(
            matches!(err, WriteError::WouldChangeStructure { .. }),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "/m/notes.org:1: Org would read the headline as TODO state Some(\"DONE\") and title \"later\", not None and \"DONE later\"; nothing was written"
        );
    }

    #[test]
    fn add_child_goes_at_the_end_of_the_subtree_one_level_deeper_with_a_new_id() {
        let text = "* P :project:\nintro\n** Old\n*** Deep\ntext\n* Next\n";
        let plan = plan_text(
            text,
            "P",
            child("  New task ", Some("first\n* not a headline")),
        )
        .unwrap();
        let id = plan.id().to_owned();
        assert_eq!(
            plan.text(),
            format!(
                "* P :project:\nintro\n** Old\n*** Deep\ntext\n** New task\n:PROPERTIES:\n:ID: {id}\n:END:\nfirst\n,* not a headline\n* Next\n"
            )
        );
        assert_eq!(plan.line(), 6);
        let at = text.find("* Next").unwrap();
        assert_eq!(plan.replaced(), at..at);
        assert!(plan.inserted().starts_with("** New task\n"));
        let new = plan.file();
        let c = new.index_of(&id).unwrap() as usize;
        assert_eq!(new.objects[c].headline.parent, Some(0));
        assert_eq!(new.objects[c].headline.level, 2);
    }

    #[test]
    fn add_child_to_a_subtree_ending_at_eof_without_a_newline() {
        let plan = plan_text("* A\n** B\nlast line", "A", child("C", None)).unwrap();
        let id = plan.id().to_owned();
        assert_eq!(
            plan.text(),
            format!("* A\n** B\nlast line\n** C\n:PROPERTIES:\n:ID: {id}\n:END:\n")
        );
        let plan = plan_text("* A", "A", child("C", None)).unwrap();
        let id = plan.id().to_owned();
        assert_eq!(
            plan.text(),
            format!("* A\n** C\n:PROPERTIES:\n:ID: {id}\n:END:\n")
        );
    }

    #[test]
    fn add_child_refuses_titles_that_would_not_read_back() {
        for (title, what) in [
            ("Meeting :x:", "tags"),
            ("TODO buy milk", "keyword"),
            ("[#A] urgent", "cookie"),
            ("COMMENT aside", "comment"),
        ] {
            let err = plan_text("* A\n", "A", child(title, None)).unwrap_err();
            assert!(
                matches!(err, WriteError::WouldChangeStructure { .. })
                    && err.to_string().contains("would not read back as given"),
                "{what}: {err}"
            );
        }
        let err = plan_text("* A\n", "A", child("two\nlines", None)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/m/notes.org:1: a headline title is one line; \"two\\nlines\" has a line break; nothing was written"
        );
        let err = plan_text("* A\n", "A", child("  ", None)).unwrap_err();
        assert!(matches!(err, WriteError::InvalidInput { .. }));
    }

    #[test]
    fn set_property_replaces_a_value_in_place_matching_the_key_case_insensitively() {
        let text = "* A\n  :PROPERTIES:\n  :Effort:   1:00\n  :EMPTY:\n  :END:\nbody\n";
        assert_eq!(
            edited(text, "A", prop("EFFORT", "2:30")),
            "* A\n  :PROPERTIES:\n  :Effort:   2:30\n  :EMPTY:\n  :END:\nbody\n"
        );
        assert_eq!(
            edited(text, "A", prop("empty", "now full")),
            "* A\n  :PROPERTIES:\n  :Effort:   1:00\n  :EMPTY: now full\n  :END:\nbody\n"
        );
        assert_eq!(
            edited(text, "A", prop("effort", "")),
            "* A\n  :PROPERTIES:\n  :Effort:\n  :EMPTY:\n  :END:\nbody\n"
        );
        // Surrounding spaces of a value are dropped, as Org drops them.
        assert_eq!(
            edited(text, "A", prop("Effort", "  3:00  ")),
            "* A\n  :PROPERTIES:\n  :Effort:   3:00\n  :EMPTY:\n  :END:\nbody\n"
        );
    }

    #[test]
    fn set_property_adds_a_key_in_the_drawers_indentation_and_alignment() {
        let text = "* A\n  :PROPERTIES:\n  :ID:       abc\n  :END:\n";
        assert_eq!(
            edited(text, "A", prop("CATEGORY", "work")),
            "* A\n  :PROPERTIES:\n  :ID:       abc\n  :CATEGORY: work\n  :END:\n"
        );
        assert_eq!(
            edited(text, "A", prop("LONGER_THAN_THE_COLUMN", "x")),
            "* A\n  :PROPERTIES:\n  :ID:       abc\n  :LONGER_THAN_THE_COLUMN: x\n  :END:\n"
        );
        let plain = "* A\n:PROPERTIES:\n:ID: abc\n:END:\n";
        assert_eq!(
            edited(plain, "A", prop("X", "y")),
            "* A\n:PROPERTIES:\n:ID: abc\n:X: y\n:END:\n"
        );
        let empty = "* A\n :PROPERTIES:\n :END:";
        assert_eq!(
            edited(empty, "A", prop("X", "y")),
            "* A\n :PROPERTIES:\n :X: y\n :END:"
        );
    }

    #[test]
    fn set_property_creates_the_drawer_after_the_headline_and_its_planning_line() {
        assert_eq!(
            edited(
                "* TODO A\nSCHEDULED: <2024-01-01 Mon>\nbody\n** B\n",
                "A",
                prop("X", "1")
            ),
            "* TODO A\nSCHEDULED: <2024-01-01 Mon>\n:PROPERTIES:\n:X: 1\n:END:\nbody\n** B\n"
        );
        assert_eq!(
            edited("* A\nbody\n", "A", prop("X", "1")),
            "* A\n:PROPERTIES:\n:X: 1\n:END:\nbody\n"
        );
        assert_eq!(
            edited("* A\nDEADLINE: <2024-01-01>", "A", prop("X", "")),
            "* A\nDEADLINE: <2024-01-01>\n:PROPERTIES:\n:X:\n:END:\n"
        );
    }

    #[test]
    fn set_property_refuses_keys_and_values_org_cannot_hold() {
        for key in ["", "two words", "a:b", "END", "properties", "x\ny"] {
            let err = plan_text("* A\n", "A", prop(key, "v")).unwrap_err();
            assert!(
                matches!(err, WriteError::InvalidInput { .. }),
                "{key:?}: {err}"
            );
        }
        let err = plan_text("* A\n", "A", prop("K", "a\nb")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/m/notes.org:1: a property value is one line; the value of K has a line break; nothing was written"
        );
        let err = plan_text(
            "* A\n* B\n:PROPERTIES:\n:ID: b\n:END:\n",
            "A",
            prop("id", "b"),
        )
        .unwrap_err();
        assert!(matches!(err, WriteError::DuplicateId { .. }), "{err}");
    }

    #[test]
    fn append_body_goes_before_the_first_child_on_lines_of_its_own() {
        let text = "* A\n:PROPERTIES:\n:ID: a\n:END:\nold\n** Child\n";
        assert_eq!(
            edited(text, "A", append("new line\nsecond")),
            "* A\n:PROPERTIES:\n:ID: a\n:END:\nold\nnew line\nsecond\n** Child\n"
        );
        assert_eq!(edited("* A", "A", append("x\n")), "* A\nx\n");
        assert_eq!(edited("* A\nold", "A", append("x")), "* A\nold\nx\n");
        assert_eq!(edited("* A\n", "A", append("\n")), "* A\n\n");
        let plan = plan_text("* A\n", "A", append("")).unwrap();
        assert!(!plan.changed());
    }

    #[test]
    fn appended_text_cannot_create_headlines_or_file_settings() {
        let text = "* A\n* B\n";
        assert_eq!(
            edited(
                text,
                "A",
                append(
                    "* one\n** two\n,* escaped\n*bold* stays\n  * item stays\n  #+todo: X | Y\n#+BEGIN_SRC sh\n#+FILETAGS: :x:\n#+END_SRC"
                )
            ),
            "* A\n,* one\n,** two\n,,* escaped\n*bold* stays\n  * item stays\n  ,#+todo: X | Y\n#+BEGIN_SRC sh\n,#+FILETAGS: :x:\n#+END_SRC\n* B\n"
        );
    }

    #[test]
    fn appended_text_that_would_become_planning_or_a_drawer_is_refused() {
        for text in [
            "SCHEDULED: <2024-01-01>\nmore",
            ":PROPERTIES:\n:ID: x\n:END:",
            ":PROPERTIES:\nunclosed",
        ] {
            let err = plan_text("* A\n", "A", append(text)).unwrap_err();
            assert!(
                matches!(err, WriteError::WouldChangeStructure { .. }),
                "{text}: {err}"
            );
        }
        // After a body line they are only text.
        assert_eq!(
            edited("* A\nfirst\n", "A", append("SCHEDULED: <2024-01-01>")),
            "* A\nfirst\nSCHEDULED: <2024-01-01>\n"
        );
    }

    #[test]
    fn crlf_files_get_crlf_in_every_inserted_line() {
        let text = "* TODO A\r\nSCHEDULED: <2024-01-01>\r\nbody\r\n** B\r\n";
        assert_eq!(
            edited(text, "A", todo(Some("DONE"))),
            "* DONE A\r\nSCHEDULED: <2024-01-01>\r\nbody\r\n** B\r\n"
        );
        assert_eq!(
            edited(text, "A", prop("X", "1")),
            "* TODO A\r\nSCHEDULED: <2024-01-01>\r\n:PROPERTIES:\r\n:X: 1\r\n:END:\r\nbody\r\n** B\r\n"
        );
        assert_eq!(
            edited(text, "A", append("one\ntwo\r\n* three")),
            "* TODO A\r\nSCHEDULED: <2024-01-01>\r\nbody\r\none\r\ntwo\r\n,* three\r\n** B\r\n"
        );
        let plan = plan_text(text, "A", child("C", Some("x\ny"))).unwrap();
        let id = plan.id().to_owned();
        assert_eq!(
            plan.text(),
            format!(
                "* TODO A\r\nSCHEDULED: <2024-01-01>\r\nbody\r\n** B\r\n** C\r\n:PROPERTIES:\r\n:ID: {id}\r\n:END:\r\nx\r\ny\r\n"
            )
        );
        let with_drawer = "* A\r\n:PROPERTIES:\r\n:ID: a\r\n:END:\r\n";
        assert_eq!(
            edited(with_drawer, "A", prop("K", "v")),
            "* A\r\n:PROPERTIES:\r\n:ID: a\r\n:K: v\r\n:END:\r\n"
        );
        assert_eq!(
            edited(
                "* A\r\n:PROPERTIES:\r\n:E:\r\n:END:\r\n",
                "A",
                prop("e", "v")
            ),
            "* A\r\n:PROPERTIES:\r\n:E: v\r\n:END:\r\n"
        );
    }

    #[test]
    fn new_ids_are_version_4_uuids_and_distinct() {
        let a = new_uuid();
        let b = new_uuid();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'));
        assert!(
            a.bytes()
                .all(|c| c == b'-' || (c.is_ascii_hexdigit() && !c.is_ascii_uppercase()))
        );
    }

    #[test]
    fn a_write_is_on_disk_and_in_a_new_snapshot_with_a_higher_generation() {
        let (dir, memex, path) = memex_with("* P\n** TODO Task\n");
        let before = memex.snapshot();
        let task = id_of(&memex, "Task");
        let written = memex.set_todo(&before, &task, Some("DONE")).unwrap();
        assert!(written.changed);
        assert_eq!(written.path, path);
        assert_eq!((written.id.as_str(), written.line), (task.as_str(), 2));
        assert_eq!(fs::read_to_string(&path).unwrap(), "* P\n** DONE Task\n");
        let after = memex.snapshot();
        assert!(after.generation() > before.generation());
        assert_eq!(after.generation(), written.generation);
        assert_eq!(after.get(&task).unwrap().todo(), Some("DONE"));
        assert_eq!(
            before.get(&task).unwrap().todo(),
            Some("TODO"),
            "the old snapshot is untouched"
        );

        let parent = id_of(&memex, "P");
        let added = memex
            .add_child(&after, &parent, "Sub", Some("notes"))
            .unwrap();
        let s = memex.snapshot();
        let sub = s.get(&added.id).unwrap();
        assert_eq!((sub.title(), sub.body(), sub.line()), ("Sub", "notes\n", 3));
        assert_eq!(sub.parent().unwrap().id(), parent);
        assert_eq!(s.generation(), added.generation);

        memex.set_property(&s, &added.id, "EFFORT", "0:30").unwrap();
        let s = memex.snapshot();
        memex.append_body(&s, &added.id, "more").unwrap();
        let s = memex.snapshot();
        let sub = s.get(&added.id).unwrap();
        assert_eq!(sub.property("effort"), Some("0:30"));
        assert_eq!(sub.body(), "notes\nmore\n");
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            format!(
                "* P\n** DONE Task\n** Sub\n:PROPERTIES:\n:ID: {}\n:EFFORT: 0:30\n:END:\nnotes\nmore\n",
                added.id
            )
        );
        // Only the file is in the folder: no temporary file is left behind.
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["a.org"]);
    }

    #[test]
    fn a_file_changed_on_disk_since_the_snapshot_is_a_conflict_and_is_left_alone() {
        let (_dir, memex, path) = memex_with("* TODO Task\n");
        let base = memex.snapshot();
        let task = id_of(&memex, "Task");
        fs::write(&path, "* TODO Task\nedited in Emacs\n").unwrap();
        let err = memex.set_todo(&base, &task, Some("DONE")).unwrap_err();
        assert!(matches!(err, WriteError::Conflict { removed: false, .. }));
        assert_eq!(
            err.to_string(),
            format!(
                "{}: changed on disk since the memex snapshot this edit was based on; nothing was written (take a new snapshot and redo the edit)",
                path.display()
            )
        );
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "* TODO Task\nedited in Emacs\n"
        );
        assert_eq!(memex.snapshot().generation(), base.generation());

        // Two edits planned against the same snapshot: the second conflicts.
        memex.reload_file(&path);
        let base = memex.snapshot();
        let first = memex.plan(&base, &task, &todo(Some("DONE"))).unwrap();
        let second = memex.plan(&base, &task, &append("note")).unwrap();
        memex.commit(first).unwrap();
        assert!(matches!(
            memex.commit(second),
            Err(WriteError::Conflict { .. })
        ));

        fs::remove_file(&path).unwrap();
        let err = memex.set_todo(&memex.snapshot(), &task, None).unwrap_err();
        assert!(
            matches!(err, WriteError::Conflict { removed: true, .. }),
            "{err}"
        );
        assert!(!path.exists());
    }

    #[test]
    fn an_unknown_id_is_refused() {
        let (_dir, memex, _path) = memex_with("* A\n");
        let err = memex
            .set_todo(&memex.snapshot(), "no-such-id", Some("DONE"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no object with id \"no-such-id\" in the memex snapshot the edit was based on; nothing was written"
        );
    }

    #[test]
    fn a_no_op_writes_nothing_and_keeps_the_file_byte_identical() {
        let text = "#+TITLE: x\r\n* DONE A   :t:\r\n  odd   spacing\t\r\n\r\n";
        let (_dir, memex, path) = memex_with(text);
        let base = memex.snapshot();
        let a = id_of(&memex, "A");
        let modified = fs::metadata(&path).unwrap().modified().unwrap();
        let written = memex.set_todo(&base, &a, Some("DONE")).unwrap();
        assert!(!written.changed);
        assert_eq!(written.generation, base.generation());
        assert_eq!(fs::read(&path).unwrap(), text.as_bytes());
        assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), modified);
    }

    #[cfg(unix)]
    #[test]
    fn permissions_and_symlinks_are_kept() {
        use std::os::unix::fs::PermissionsExt as _;
        let (dir, memex, path) = memex_with("* A\n");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        let real = dir.path().canonicalize().unwrap().join("real.txt");
        fs::write(&real, "* L\n").unwrap();
        let link = dir.path().canonicalize().unwrap().join("link.org");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        memex.reload_file(&link);

        let base = memex.snapshot();
        memex.append_body(&base, &id_of(&memex, "A"), "x").unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640
        );
        let base = memex.snapshot();
        memex.append_body(&base, &id_of(&memex, "L"), "y").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&real).unwrap(), "* L\ny\n");
        assert_eq!(memex.snapshot().file(&link).unwrap().text, "* L\ny\n");
    }

    #[cfg(unix)]
    #[test]
    fn a_read_only_file_is_not_replaced() {
        use std::os::unix::fs::PermissionsExt as _;
        let (_dir, memex, path) = memex_with("* A\n");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).unwrap();
        if fs::OpenOptions::new().append(true).open(&path).is_ok() {
            return; // running as root: permissions do not bind
        }
        let err = memex
            .append_body(&memex.snapshot(), &id_of(&memex, "A"), "x")
            .unwrap_err();
        assert!(
            matches!(
                err,
                WriteError::Io {
                    action: "open it for writing",
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), "* A\n");
    }

    // ---- property test: random edits on generated Org files ----

    /// One generated headline.
    #[derive(Debug, Clone)]
    struct Gen {
        level: usize,
        todo: Option<&'static str>,
        title: String,
        tags: bool,
        planning: bool,
        drawer: Option<Vec<(String, String, bool)>>,
        body: Vec<&'static str>,
    }

    const BODY_LINES: &[&str] = &[
        "plain text",
        "",
        "*bold* at the start",
        "  * a list item",
        ":END:",
        "#+BEGIN_SRC sh",
        ",* escaped",
        "  indented",
        "SCHEDULED: <2024-01-01> in the body",
    ];

    fn gen_headline() -> impl Strategy<Value = Gen> {
        (
            1usize..=4,
            prop::option::of(prop::sample::select(&["TODO", "NEXT", "DONE"][..])),
            "[a-z]{1,6}( [a-z]{1,6}){0,2}",
            any::<bool>(),
            any::<bool>(),
            prop::option::of(prop::collection::vec(
                ("[A-Z]{1,5}", "[a-z0-9]{0,4}", any::<bool>()),
                0..3,
            )),
            prop::collection::vec(prop::sample::select(BODY_LINES), 0..4),
        )
            .prop_map(|(level, todo, title, tags, planning, drawer, body)| Gen {
                level,
                todo,
                title,
                tags,
                planning,
                drawer,
                body,
            })
    }

    /// An Org file: an optional preamble, headlines, LF or CRLF, with or
    /// without a final newline.
    fn gen_file() -> impl Strategy<Value = String> {
        (
            any::<bool>(),
            prop::collection::vec(gen_headline(), 1..7),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(preamble, headlines, crlf, final_newline)| {
                let mut lines: Vec<String> = Vec::new();
                if preamble {
                    lines.push("#+TODO: TODO NEXT | DONE".into());
                    lines.push(String::new());
                }
                for h in headlines {
                    let mut line = "*".repeat(h.level);
                    line.push(' ');
                    if let Some(t) = h.todo {
                        line.push_str(t);
                        line.push(' ');
                    }
                    line.push_str(&h.title);
                    if h.tags {
                        line.push_str("   :tag:x:");
                    }
                    lines.push(line);
                    if h.planning {
                        lines.push("DEADLINE: <2024-02-02 Fri>".into());
                    }
                    if let Some(props) = h.drawer {
                        lines.push(":PROPERTIES:".into());
                        for (k, v, aligned) in props {
                            let gap = if aligned { "      " } else { " " };
                            lines.push(format!(":{k}:{gap}{v}").trim_end().to_owned());
                        }
                        lines.push(":END:".into());
                    }
                    for b in h.body {
                        lines.push(b.to_owned());
                    }
                }
                let nl = if crlf { "\r\n" } else { "\n" };
                let mut text = lines.join(nl);
                if final_newline {
                    text.push_str(nl);
                }
                text
            })
    }

    const APPENDED: &[&str] = &[
        "a note",
        "two\nlines",
        "* looks like a headline",
        "** deeper\nand text",
        "#+TODO: X | Y",
        "ends with newline\n",
        "crlf\r\ninside",
        "\n",
    ];

    #[derive(Debug, Clone)]
    enum GenEdit {
        Todo(Option<&'static str>),
        Child(String, Option<&'static str>),
        Property(&'static str, String),
        Append(&'static str),
    }

    fn gen_edit() -> impl Strategy<Value = GenEdit> {
        prop_oneof![
            prop::option::of(prop::sample::select(&["TODO", "NEXT", "DONE"][..]))
                .prop_map(GenEdit::Todo),
            (
                "[a-z]{1,8}( [a-z]{1,5})?",
                prop::option::of(prop::sample::select(APPENDED))
            )
                .prop_map(|(t, b)| GenEdit::Child(t, b)),
            (
                prop::sample::select(&["ID", "id", "EFFORT", "Category", "X"][..]),
                "[a-z0-9]{0,6}"
            )
                .prop_map(|(k, v)| GenEdit::Property(k, v)),
            prop::sample::select(APPENDED).prop_map(GenEdit::Append),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn random_edits_touch_only_their_region_and_read_back_as_intended(
            text in gen_file(),
            pick in any::<prop::sample::Index>(),
            edit in gen_edit(),
        ) {
            let base = parsed(&text);
            let index = pick.index(base.objects.len());
            let h = base.objects[index].headline.clone();
            let crlf = newline_of(&text) == "\r\n";
            let edit = match edit {
                GenEdit::Todo(s) => todo(s),
                GenEdit::Child(t, b) => child(&t, b),
                // An `ID` already used in the file is refused; use a fresh one.
                GenEdit::Property(k, v) if k.eq_ignore_ascii_case("ID") => prop(k, &format!("{v}-{index}-new")),
                GenEdit::Property(k, v) => prop(k, &v),
                GenEdit::Append(t) => append(t),
            };
            // The region each edit may change, in the base text.
            let region = match &edit {
                Edit::SetTodo { .. } => h.own.start..h.after_headline,
                Edit::AddChild { .. } => h.subtree.end..h.subtree.end,
                Edit::SetProperty { .. } => h.after_headline..h.body.start,
                Edit::AppendBody { .. } => h.own.end..h.own.end,
            };
            let (a, b) = (region.start as usize, region.end as usize);
            if let Edit::SetTodo { state: Some(s) } = &edit
                && base.keywords.classify(s).is_none()
            {
                let err = plan_in(Arc::clone(&base), index as u32, "notes.org", &edit, &|_| false);
                let refused = matches!(err, Err(WriteError::UnknownKeyword { .. }));
                prop_assert!(refused, "an unknown keyword must be refused");
                return Ok(());
            }
            let plan = plan_in(Arc::clone(&base), index as u32, "notes.org", &edit, &|_| false);
            let plan = match plan {
                Ok(plan) => plan,
                Err(e) => return Err(TestCaseError::fail(format!("{e}\n{text:?}\n{edit:?}"))),
            };
            let new = plan.text();
            prop_assert!(new.starts_with(&text[..a]), "bytes before the region changed");
            prop_assert!(new.ends_with(&text[b..]), "bytes after the region changed");
            prop_assert!(new.len() >= a + text.len() - b);
            prop_assert_eq!(&text[..plan.replaced().start], &new[..plan.replaced().start]);
            let inserted = plan.inserted();
            if crlf {
                prop_assert!(!inserted.replace("\r\n", "").contains('\n'), "a bare LF in a CRLF file");
            } else {
                prop_assert!(!inserted.contains('\r'), "a CR in an LF file");
            }
            // The new text parses, and the object reads as intended.
            let reparsed = MemexFile::parse(Path::new("/m/notes.org"), "notes.org", new.to_owned()).unwrap();
            let o = &reparsed.objects[plan.index as usize];
            let title = reparsed.slice(&o.headline.title);
            match &edit {
                Edit::SetTodo { state } => {
                    prop_assert_eq!(o.headline.todo.as_deref(), state.as_deref());
                    prop_assert_eq!(title, base.slice(&h.title));
                }
                Edit::AddChild { title: t, body } => {
                    prop_assert_eq!(title, t.as_str());
                    prop_assert_eq!(o.headline.level, h.level + 1);
                    prop_assert_eq!(reparsed.objects.len(), base.objects.len() + 1);
                    let body_text = reparsed.slice(&o.headline.body);
                    let nl = if crlf { "\r\n" } else { "\n" };
                    prop_assert_eq!(body_text, escape_text(body.as_deref().unwrap_or(""), nl));
                }
                Edit::SetProperty { key, value } => {
                    let got = o.headline.properties.iter()
                        .find(|p| reparsed.slice(&p.key).eq_ignore_ascii_case(key))
                        .map(|p| reparsed.slice(&p.value));
                    prop_assert_eq!(got, Some(value.as_str()));
                }
                Edit::AppendBody { text: t } => {
                    let body_text = reparsed.slice(&o.headline.body).replace("\r\n", "\n");
                    let lines: Vec<&str> = t.trim_end_matches('\n').split('\n')
                        .map(|l| l.trim_end_matches('\r')).collect();
                    let last = lines.last().copied().unwrap_or("");
                    prop_assert!(body_text.ends_with(&format!("{last}\n")), "{body_text:?}");
                    prop_assert_eq!(reparsed.objects.len(), base.objects.len());
                    // No appended line became structure.
                    for line in body_text.lines() {
                        prop_assert!(!is_headline(line) && !is_file_setting(line.trim_start()));
                    }
                }
            }
            prop_assert_eq!(reparsed.keywords, base.keywords.clone());
        }
    }
}
