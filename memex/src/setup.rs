//! `#+SETUPFILE:`: in-buffer settings kept in another file.
//!
//! Org reads a file's TODO keywords, file tags and tag list from its own
//! `#+TODO:`, `#+FILETAGS:` and `#+TAGS:` lines and from the files its
//! `#+SETUPFILE:` lines name, as if their lines stood in place of the
//! `#+SETUPFILE:` line. The memex does the same, as Emacs 28 / Org 9.5
//! (`org-collect-keywords`) does:
//!
//! - the value may be quoted (`#+SETUPFILE: "setup/gtd.setup"`); `~` is
//!   the home folder; a relative path is relative to the folder of the
//!   file that names it — of the setup file, for a setup file that names
//!   another;
//! - setup files may name setup files, to any depth up to
//!   [`MAX_DEPTH`]; a file already on the way (the memex file itself, or a
//!   setup file that names one of the files that led to it) is not read
//!   again: Org skips it silently, the memex skips it with a warning;
//! - a URL is not fetched (a warning says so): only local files;
//! - a setup file may lie outside the memex, if it is a regular file of at
//!   most [`MAX_SETUP_BYTES`]; a setup file that is an `.org` file of the
//!   memex is both.
//!
//! Problems (a missing file, a cycle, a file too large or not UTF-8) are
//! warnings of the memex file, on the line of its `#+SETUPFILE:`; the rest
//! of the file loads.
//!
//! The file tags a setup file gives are file tags of every file that
//! includes it: a privacy tag among them makes those files private, as it
//! does in Org's agenda. Each memex file remembers the setup files it read
//! ([`Setup::files`]), so that a change to one re-reads the files that
//! include it ([`crate::watch`]).
//!
//! Two rules keep a setup file from making a private file public:
//!
//! - **A file is one file, whatever its names.** A relative value is
//!   looked up from the folder of the file's real location (links
//!   resolved) and from the folder of each name the memex reaches it by
//!   (a symlink's own folder, a hard link's), and the file tags of every
//!   reading count ([`resolve_with`]): a setup file beside a link cannot
//!   make the file public, nor can one beside its target.
//! - **A setup file that cannot be read never declassifies.** One that is
//!   missing, unreadable, not a regular file, over [`MAX_SETUP_BYTES`] or
//!   not UTF-8 (at any depth) gives what it gave when the file was last
//!   read; one that is empty or whose last line has no line break (an
//!   editor's save caught half-way) keeps the file tags it gave then. When
//!   no earlier reading is known (the first load), a setup file that
//!   cannot be read makes the file private as a whole until it reads
//!   ([`Setup::tags_unknown`]), and a warning says so.

use std::path::{Component, Path, PathBuf};

use crate::MemexError;
use crate::parse::{Settings, collect_settings};

/// How deep setup files may name setup files.
pub const MAX_DEPTH: usize = 8;

/// The largest setup file read (1 MiB): settings are a few lines.
pub const MAX_SETUP_BYTES: u64 = 1 << 20;

/// Something odd in a file that did not stop it from loading.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Warning {
    /// 1-based line.
    pub line: u32,
    /// What.
    pub message: String,
}

/// What a memex file took from its setup files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Setup {
    /// Each `#+SETUPFILE:` value of the file, in order, with the settings
    /// it gave (nested setup files included), or `None` when it was not
    /// followed. A re-parse of an edited text answers its `#+SETUPFILE:`
    /// lines from here ([`Setup::answer`]) without reading a file.
    pub included: Vec<(String, Option<Settings>)>,
    /// Every setup file the file's settings depend on, nested ones and
    /// ones that could not be read included, each once: a change to one
    /// of them may change the file's settings.
    pub files: Vec<PathBuf>,
    /// What went wrong, on the lines of the file's `#+SETUPFILE:`s.
    pub warnings: Vec<Warning>,
    /// The `#+SETUPFILE:` values that could not be read whole (the file,
    /// or one it names) and that no earlier reading of the file answered:
    /// which file tags they give is unknown ([`Setup::tags_unknown`]).
    pub unread: Vec<String>,
    /// The TODO keywords the memex gives a file that declares none
    /// (`[memex] todo_keywords`, [`crate::MemexOptions`]), which the file
    /// was read with: a re-parse of an edited text reads with them too.
    pub todo_keywords: Option<crate::parse::TodoKeywords>,
}

impl Setup {
    /// Whether the file names no setup file.
    pub fn is_empty(&self) -> bool {
        self.included.is_empty()
    }

    /// The settings this setup gave for a `#+SETUPFILE:` value, if it was
    /// followed.
    pub fn answer(&self, value: &str) -> Option<Settings> {
        self.included
            .iter()
            .find(|(v, _)| v == value)
            .and_then(|(_, settings)| settings.clone())
    }

    /// Whether `path` is one of the setup files the file depends on.
    pub fn depends_on(&self, path: &Path) -> bool {
        self.files.iter().any(|f| f == path)
    }

    /// Whether the file tags of some setup file are unknown: it could not
    /// be read, and no earlier reading of the file gave them. The file is
    /// then private as a whole
    /// ([`crate::privacy::PrivacyTags::file_is_private`]) until it reads:
    /// a setup file that cannot be read never makes a file public.
    pub fn tags_unknown(&self) -> bool {
        !self.unread.is_empty()
    }

    /// The settings the reading this setup records gave for `value`, when
    /// they are known (it was read, or kept from a reading before).
    fn known(&self, value: &str) -> Option<&Settings> {
        if self.unread.iter().any(|v| v == value) {
            return None;
        }
        self.included
            .iter()
            .find(|(v, _)| v == value)
            .and_then(|(_, settings)| settings.as_ref())
    }
}

/// How whole the reading of one `#+SETUPFILE:` value was, nested setup
/// files included: the worst of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Reading {
    /// Every file read, each ending with a line break.
    Whole,
    /// Every file read, but one is empty or its last line has no line
    /// break: it may be an editor's save caught half-way.
    Cut,
    /// A file could not be read (missing, unreadable, not a regular file,
    /// too large, not UTF-8).
    Unread,
}

/// Reads the in-buffer settings of `text`, the text of the memex file at
/// `path`, following its `#+SETUPFILE:` lines (a first reading: no other
/// name, nothing known from before; see [`resolve_with`]).
pub fn resolve(path: &Path, text: &str) -> (Settings, Setup) {
    resolve_with(path, &[], text, None)
}

/// Reads the in-buffer settings of `text`, the text of the memex file at
/// `path`, following its `#+SETUPFILE:` lines.
///
/// A relative value is looked up from the folder of the file's real
/// location (`path` with its links resolved), from the folder `path`
/// itself sits in (a symlink's folder), and from both folders of each of
/// `names`, the other paths by which the memex reaches the same file
/// (symlinks, hard links): the first reading gives the settings, and the
/// file tags of the others are added to them — the file is private if
/// any way of reading it makes it so.
///
/// `previous` is the setup the file's version now served was read with:
/// a setup file that cannot be read whole answers from it (see the
/// module's rules); without it, one that cannot be read leaves its file
/// tags unknown ([`Setup::tags_unknown`]).
pub fn resolve_with(
    path: &Path,
    names: &[PathBuf],
    text: &str,
    previous: Option<&Setup>,
) -> (Settings, Setup) {
    let folder = |path: &Path| path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let real = normal(path);
    // The folder of the real location first (its reading gives the
    // settings), then, for `path` and each other name, the folder of its
    // real location and the folder the name itself sits in — a symlink's
    // own folder, where Org looks when the file is opened through it.
    let mut dirs = vec![folder(real.as_path())];
    for name in std::iter::once(path).chain(names.iter().map(PathBuf::as_path)) {
        for dir in [folder(normal(name).as_path()), normal(&folder(name))] {
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    let mut resolver = Resolver {
        setup: Setup::default(),
        chain: vec![real],
        reading: Reading::Whole,
    };
    let settings = collect_settings(text, &mut |line, value| {
        let answer = resolver.answer(&dirs, value, line, previous);
        resolver
            .setup
            .included
            .push((value.to_owned(), answer.clone()));
        answer
    });
    (settings, resolver.setup)
}

/// Adds the file tags of `tags` that `settings` lacks.
fn add_file_tags(settings: &mut Settings, tags: &[String]) {
    for tag in tags {
        if !settings.file_tags.contains(tag) {
            settings.file_tags.push(tag.clone());
        }
    }
}

/// The settings of `text` with its `#+SETUPFILE:` lines answered from
/// `setup` (the setup a previous version of the same file was read
/// with): no file is read.
pub fn reuse(text: &str, setup: &Setup) -> Settings {
    collect_settings(text, &mut |_, value| setup.answer(value))
        .with_fallback(setup.todo_keywords.clone())
}

struct Resolver {
    setup: Setup,
    /// The files on the way to the one being read, the memex file first.
    chain: Vec<PathBuf>,
    /// How whole the reading of the current `#+SETUPFILE:` value is.
    reading: Reading,
}

impl Resolver {
    /// The settings to use for the memex file's `#+SETUPFILE: value` (on
    /// `line`), read from each of `dirs`, with the rules that keep a
    /// setup file that cannot be read whole from declassifying the file.
    fn answer(
        &mut self,
        dirs: &[PathBuf],
        value: &str,
        line: u32,
        previous: Option<&Setup>,
    ) -> Option<Settings> {
        self.reading = Reading::Whole;
        let mut read: Option<Settings> = None;
        for dir in dirs {
            let Some(settings) = self.follow(dir, value, line) else {
                continue;
            };
            if let Some(first) = read.as_mut() {
                add_file_tags(first, &settings.file_tags);
            } else {
                read = Some(settings);
            }
        }
        let earlier = previous.and_then(|p| p.known(value));
        let was_unread = previous.is_some_and(|p| p.unread.iter().any(|v| v == value));
        let reading = self.reading;
        if reading == Reading::Whole {
            return read;
        }
        if let Some(earlier) = earlier {
            if reading == Reading::Unread && read.is_none() {
                // Nothing of it could be read: what it gave before, as it
                // was.
                self.warn(
                    line,
                    format!(
                        "`#+SETUPFILE: {value}` could not be read; the settings it gave when last read are kept until it reads again"
                    ),
                );
                return Some(earlier.clone());
            }
            // Read in part, or perhaps cut off: what it gives now, and the
            // file tags it gave before.
            let mut settings = read.unwrap_or_default();
            if earlier
                .file_tags
                .iter()
                .any(|t| !settings.file_tags.contains(t))
            {
                add_file_tags(&mut settings, &earlier.file_tags);
                self.warn(
                    line,
                    format!(
                        "`#+SETUPFILE: {value}` could not be read whole (a file missing, empty, or without a line break at its end: is it being written?); the file tags it gave when last read are kept until it reads whole"
                    ),
                );
            }
            return Some(settings);
        }
        if reading == Reading::Unread || was_unread {
            // Never read whole: its file tags are unknown, and the file is
            // private until they are known.
            self.setup.unread.push(value.to_owned());
            self.warn(
                line,
                format!(
                    "`#+SETUPFILE: {value}` could not be read whole, and no earlier reading of it is known: the file is private as a whole until it reads (a setup file that cannot be read never makes a file public)"
                ),
            );
        }
        // Otherwise a first reading of a file that may be cut off: taken
        // as it is (there is nothing earlier to keep).
        read
    }

    fn warn(&mut self, line: u32, message: String) {
        self.setup.warnings.push(Warning { line, message });
    }

    /// The settings of the setup file `value` names, relative to `dir`;
    /// `line` is the line of the memex file's own `#+SETUPFILE:` the
    /// reading started from, for warnings.
    fn follow(&mut self, dir: &Path, value: &str, line: u32) -> Option<Settings> {
        let value = strip_quotes(value.trim());
        if value.is_empty() {
            return None;
        }
        let mut warn = |message: String| self.setup.warnings.push(Warning { line, message });
        if is_url(value) {
            warn(format!(
                "`#+SETUPFILE: {value}` is a URL; only local setup files are read"
            ));
            return None;
        }
        let Some(path) = expand(dir, value) else {
            warn(format!(
                "`#+SETUPFILE: {value}`: no home folder to expand `~` in"
            ));
            return None;
        };
        if !self.setup.files.contains(&path) {
            self.setup.files.push(path.clone());
        }
        if self.chain.contains(&path) {
            let way: Vec<String> = self
                .chain
                .iter()
                .chain(std::iter::once(&path))
                .map(|p| p.display().to_string())
                .collect();
            self.setup.warnings.push(Warning {
                line,
                message: format!("`#+SETUPFILE:` cycle {}; not read again", way.join(" → ")),
            });
            return None;
        }
        if self.chain.len() > MAX_DEPTH {
            self.setup.warnings.push(Warning {
                line,
                message: format!(
                    "{}: setup files nested deeper than {MAX_DEPTH}; not read",
                    path.display()
                ),
            });
            return None;
        }
        let text = match crate::read_regular(&path, MAX_SETUP_BYTES) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(_) => {
                    self.reading = self.reading.max(Reading::Unread);
                    self.setup.warnings.push(Warning {
                        line,
                        message: format!(
                            "setup file {}: not valid UTF-8; not read",
                            path.display()
                        ),
                    });
                    return None;
                }
            },
            Err(error) => {
                let message = match error {
                    MemexError::NotFound { .. } => {
                        format!("setup file {} does not exist", path.display())
                    }
                    MemexError::TooLarge { len, max, .. } => format!(
                        "setup file {}: {len} bytes, over the limit of {max} bytes for a setup file; not read",
                        path.display()
                    ),
                    other => format!("setup file not read: {other}"),
                };
                self.reading = self.reading.max(Reading::Unread);
                self.setup.warnings.push(Warning { line, message });
                return None;
            }
        };
        // An editor that saves in place empties the file, then writes it:
        // caught in between, it may be empty or end mid-line.
        if !text.ends_with('\n') {
            self.reading = self.reading.max(Reading::Cut);
        }
        let nested_dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
        self.chain.push(path);
        let settings = collect_settings(&text, &mut |_, nested| {
            self.follow(&nested_dir, nested, line)
        });
        self.chain.pop();
        Some(settings)
    }
}

/// `"a b"` → `a b` (Org's `org-strip-quotes`).
fn strip_quotes(value: &str) -> &str {
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value)
}

/// Whether `value` names a URL (Org's `org-file-url-p`: a scheme, then
/// `//`).
fn is_url(value: &str) -> bool {
    value.split_once("://").is_some_and(|(scheme, _)| {
        scheme.len() > 1
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// The path `value` names, relative to `dir`: `~` expanded, `.` and `..`
/// resolved, links resolved when it exists (so it is the path the memex
/// watcher reports).
fn expand(dir: &Path, value: &str) -> Option<PathBuf> {
    let path = if value == "~" || value.starts_with("~/") {
        dirs::home_dir()?.join(value.trim_start_matches('~').trim_start_matches('/'))
    } else {
        dir.join(value)
    };
    Some(normal(&path))
}

/// `path`, canonical when it exists, else with `.` and `..` resolved by
/// hand.
fn normal(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Files that include others, read by Emacs 28.2 / Org 9.5.5 and by
    /// the memex. The expected values are what Emacs printed with
    ///
    /// ```elisp
    /// ;; emacs --batch -Q -l dump.el main.org main2.org common.org
    /// (require 'org)
    /// (dolist (file command-line-args-left)
    ///   (with-current-buffer (find-file-noselect file)
    ///     (org-mode)
    ///     (princ (format "%s\ntodo %S\ndone %S\nfile-tags %S\ntags %S\n" file
    ///                    org-todo-keywords-1 org-done-keywords
    ///                    (mapcar #'substring-no-properties org-file-tags)
    ///                    org-current-tag-alist))
    ///     (org-element-map (org-element-parse-buffer) 'headline
    ///       (lambda (h) (princ (format "%S %S %S\n"
    ///                                  (org-element-property :raw-value h)
    ///                                  (org-element-property :todo-keyword h)
    ///                                  (org-element-property :todo-type h)))))))
    /// (setq command-line-args-left nil)
    /// ```
    ///
    /// (Emacs lists a keyword declared twice twice; the memex once.)
    /// Emacs skips a cycle silently; the memex says so in a warning.
    #[test]
    fn settings_through_setup_files_agree_with_emacs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        write(
            &root,
            "sub/base.setup",
            "#+TODO: PROJ(p) NEXT | DONE(d) KILL\n#+FILETAGS: :fromsetup:\n#+TAGS: work(w) home { @office @car }\n#+SETUPFILE: ../other/nested.setup\n",
        );
        write(
            &root,
            "other/nested.setup",
            "#+SEQ_TODO: WAIT | CANCELLED\n#+FILETAGS: nested\n#+SETUPFILE: ../sub/base.setup\n",
        );
        write(
            &root,
            "main.org",
            "#+TITLE: Main\n#+TODO: TODO | DONE\n#+SETUPFILE: \"sub/base.setup\"\n#+FILETAGS: :own:\n* PROJ Launch\n** NEXT Step\n** WAIT Blocked\n* KILL Dropped\n* CANCELLED Gone\n* TODO Plain\n",
        );
        // A setup file that is a memex file too, named in lower case; and
        // a `#+SETUPFILE:` in a headline's body, which counts all the same.
        write(
            &root,
            "common.org",
            "#+TODO: IDEA | DROPPED\n#+FILETAGS: :shared:\n* IDEA Thing\n",
        );
        write(
            &root,
            "main2.org",
            "#+setupfile: common.org\n* IDEA Another\n* DROPPED Old\n* PROJ Late keyword\n#+SETUPFILE: sub/base.setup\n* WAIT After\n",
        );
        let memex = crate::Memex::open(std::slice::from_ref(&root)).unwrap();
        let snapshot = memex.snapshot();
        let file = |name: &str| Arc::clone(snapshot.file(&root.join(name)).unwrap());
        let states = |f: &crate::MemexFile| -> Vec<(String, Option<String>, bool)> {
            f.objects
                .iter()
                .map(|o| {
                    (
                        f.slice(&o.headline.title).to_owned(),
                        o.headline.todo.as_deref().map(str::to_owned),
                        o.headline.done,
                    )
                })
                .collect()
        };
        let state =
            |title: &str, todo: &str, done: bool| (title.to_owned(), Some(todo.to_owned()), done);

        // todo ("TODO" "DONE" "PROJ" "NEXT" "DONE" "KILL" "WAIT" "CANCELLED")
        // done ("DONE" "DONE" "KILL" "CANCELLED")
        // file-tags ("fromsetup" "nested" "own")
        // tags (("work" . 119) ("home") (:startgroup) ("@office") ("@car") (:endgroup))
        let main = file("main.org");
        assert_eq!(main.keywords.todo, ["TODO", "PROJ", "NEXT", "WAIT"]);
        assert_eq!(main.keywords.done, ["DONE", "KILL", "CANCELLED"]);
        assert_eq!(main.file_tags, ["fromsetup", "nested", "own"]);
        assert_eq!(main.declared_tags, ["work", "home", "@office", "@car"]);
        assert_eq!(
            states(&main),
            [
                state("Launch", "PROJ", false),
                state("Step", "NEXT", false),
                state("Blocked", "WAIT", false),
                state("Dropped", "KILL", true),
                state("Gone", "CANCELLED", true),
                state("Plain", "TODO", false),
            ]
        );
        assert_eq!(
            main.setup.files,
            [root.join("sub/base.setup"), root.join("other/nested.setup")]
        );
        assert_eq!(main.warnings.len(), 1, "{:?}", main.warnings);
        assert_eq!(main.warnings[0].line, 3);
        assert!(main.warnings[0].message.contains("cycle"));

        // todo ("IDEA" "DROPPED" "PROJ" "NEXT" "DONE" "KILL" "WAIT" "CANCELLED")
        // done ("DROPPED" "DONE" "KILL" "CANCELLED")
        // file-tags ("shared" "fromsetup" "nested")
        let main2 = file("main2.org");
        assert_eq!(main2.keywords.todo, ["IDEA", "PROJ", "NEXT", "WAIT"]);
        assert_eq!(
            main2.keywords.done,
            ["DROPPED", "DONE", "KILL", "CANCELLED"]
        );
        assert_eq!(main2.file_tags, ["shared", "fromsetup", "nested"]);
        assert_eq!(
            states(&main2),
            [
                state("Another", "IDEA", false),
                state("Old", "DROPPED", true),
                state("Late keyword", "PROJ", false),
                state("After", "WAIT", false),
            ]
        );

        // todo ("IDEA" "DROPPED"), file-tags ("shared"): read on its own,
        // the setup file is an ordinary memex file.
        let common = file("common.org");
        assert_eq!(common.keywords.todo, ["IDEA"]);
        assert_eq!(common.file_tags, ["shared"]);
        assert_eq!(states(&common), [state("Thing", "IDEA", false)]);
        assert_eq!(
            snapshot.includers_of(&root.join("common.org")),
            [root.join("main2.org")]
        );
        let mut includers = snapshot.includers_of(&root.join("other/nested.setup"));
        includers.sort();
        assert_eq!(includers, [root.join("main.org"), root.join("main2.org")]);
    }

    #[test]
    fn values_are_unquoted_and_urls_are_not_fetched() {
        assert_eq!(strip_quotes("\"a b.setup\""), "a b.setup");
        assert_eq!(strip_quotes("a.setup"), "a.setup");
        assert!(is_url("https://example.invalid/x.setup"));
        assert!(!is_url("setup/x.setup"));
        assert!(!is_url("c://x"), "one letter is a drive, not a scheme");
        let dir = tempfile::tempdir().unwrap();
        let main = write(
            dir.path(),
            "a.org",
            "#+SETUPFILE: https://example.invalid/x.setup\n",
        );
        let (settings, setup) = resolve(&main, &std::fs::read_to_string(&main).unwrap());
        assert_eq!(settings, Settings::default());
        assert_eq!(setup.warnings.len(), 1);
        assert!(setup.warnings[0].message.contains("is a URL"));
        assert!(setup.files.is_empty());
    }

    #[test]
    fn a_missing_setup_file_is_a_warning_and_is_still_watched() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let main = write(&root, "a.org", "#+TITLE: A\n#+SETUPFILE: gone.setup\n* x\n");
        let (_, setup) = resolve(&main, &std::fs::read_to_string(&main).unwrap());
        assert_eq!(setup.warnings.len(), 2);
        assert_eq!(setup.warnings[0].line, 2);
        assert!(
            setup.warnings[0]
                .message
                .ends_with("gone.setup does not exist"),
            "{:?}",
            setup.warnings
        );
        // Its file tags are unknown: the file is private until it reads.
        assert_eq!(setup.warnings[1].line, 2);
        assert!(
            setup.warnings[1]
                .message
                .contains("the file is private as a whole until it reads"),
            "{:?}",
            setup.warnings
        );
        assert!(setup.tags_unknown());
        assert_eq!(setup.unread, ["gone.setup"]);
        assert_eq!(setup.files, [root.join("gone.setup")]);
        assert_eq!(setup.included, [("gone.setup".to_owned(), None)]);
    }

    #[test]
    fn a_cycle_is_refused_with_a_warning_naming_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        write(&root, "x.setup", "#+FILETAGS: x\n#+SETUPFILE: y.setup\n");
        write(&root, "y.setup", "#+FILETAGS: y\n#+SETUPFILE: x.setup\n");
        let main = write(&root, "a.org", "#+SETUPFILE: x.setup\n#+SETUPFILE: a.org\n");
        let (settings, setup) = resolve(&main, &std::fs::read_to_string(&main).unwrap());
        assert_eq!(settings.file_tags, ["x", "y"]);
        let messages: Vec<&str> = setup.warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(messages[0].contains("cycle") && messages[0].ends_with("x.setup; not read again"));
        assert!(messages[1].contains("cycle") && messages[1].contains("a.org → "));
        assert_eq!(
            setup.files,
            [
                root.join("x.setup"),
                root.join("y.setup"),
                root.join("a.org")
            ]
        );
    }

    #[test]
    fn a_setup_file_that_is_not_a_regular_file_or_too_large_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("folder.setup")).unwrap();
        let big = std::fs::File::create(root.join("big.setup")).unwrap();
        big.set_len(MAX_SETUP_BYTES + 1).unwrap();
        std::fs::write(root.join("latin1.setup"), b"#+FILETAGS: caf\xe9\n").unwrap();
        let main = write(
            &root,
            "a.org",
            "#+SETUPFILE: folder.setup\n#+SETUPFILE: big.setup\n#+SETUPFILE: latin1.setup\n",
        );
        let (settings, setup) = resolve(&main, &std::fs::read_to_string(&main).unwrap());
        assert_eq!(settings, Settings::default());
        let messages: Vec<&str> = setup.warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(messages.len(), 6, "{messages:?}");
        assert!(messages[0].contains("not a regular file"), "{messages:?}");
        assert!(messages[2].contains("over the limit"), "{messages:?}");
        assert!(messages[4].contains("not valid UTF-8"), "{messages:?}");
        // None of them was read before: the file is private until they read.
        for at in [1, 3, 5] {
            assert!(messages[at].contains("private as a whole"), "{messages:?}");
        }
        assert_eq!(setup.unread, ["folder.setup", "big.setup", "latin1.setup"]);
    }

    #[test]
    fn a_setup_file_that_cannot_be_read_whole_keeps_what_it_gave_before() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        // Without a line break at its end, read for the first time: taken
        // as it is (there is nothing earlier to keep), no warning.
        write(
            &root,
            "s.setup",
            "#+TODO: PROJ | DONE\n#+FILETAGS: :@personal:",
        );
        let main = write(&root, "a.org", "#+SETUPFILE: s.setup\n* PROJ x\n");
        let text = std::fs::read_to_string(&main).unwrap();
        let (first, setup) = resolve(&main, &text);
        assert_eq!(first.file_tags, ["@personal"]);
        assert_eq!(first.keywords().todo, ["PROJ"]);
        assert!(!setup.tags_unknown());
        assert!(setup.warnings.is_empty(), "{:?}", setup.warnings);
        // Missing: everything it gave before, its keywords too.
        std::fs::remove_file(root.join("s.setup")).unwrap();
        let (missing, setup) = resolve_with(&main, &[], &text, Some(&setup));
        assert_eq!(missing, first);
        assert!(!setup.tags_unknown());
        // Empty (an editor's save caught half-way): what it gives now, and
        // the file tags it gave before.
        write(&root, "s.setup", "");
        let (empty, setup) = resolve_with(&main, &[], &text, Some(&setup));
        assert_eq!(empty.file_tags, ["@personal"]);
        // Cut mid-line, a tag added: both count.
        write(&root, "s.setup", "#+FILETAGS: :work:@pers");
        let (cut, setup) = resolve_with(&main, &[], &text, Some(&setup));
        assert_eq!(cut.file_tags, ["work", "@pers", "@personal"]);
        // Whole: what it says now, nothing kept.
        write(&root, "s.setup", "#+FILETAGS: :work:\n");
        let (whole, setup) = resolve_with(&main, &[], &text, Some(&setup));
        assert_eq!(whole.file_tags, ["work"]);
        assert!(setup.warnings.is_empty(), "{:?}", setup.warnings);
    }

    #[test]
    fn nesting_is_limited() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for k in 0..MAX_DEPTH + 2 {
            write(
                &root,
                &format!("{k}.setup"),
                &format!("#+FILETAGS: t{k}\n#+SETUPFILE: {}.setup\n", k + 1),
            );
        }
        let main = write(&root, "a.org", "#+SETUPFILE: 0.setup\n");
        let (settings, setup) = resolve(&main, &std::fs::read_to_string(&main).unwrap());
        assert_eq!(settings.file_tags.len(), MAX_DEPTH);
        assert!(
            setup
                .warnings
                .iter()
                .any(|w| w.message.contains("nested deeper than")),
            "{:?}",
            setup.warnings
        );
    }

    #[test]
    fn an_edited_text_reuses_the_setup_it_was_read_with() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        write(&root, "s.setup", "#+TODO: PROJ | DONE\n");
        let main = write(&root, "a.org", "#+SETUPFILE: s.setup\n* PROJ x\n");
        let (settings, setup) = resolve(&main, &std::fs::read_to_string(&main).unwrap());
        std::fs::remove_file(root.join("s.setup")).unwrap();
        let again = reuse("#+SETUPFILE: s.setup\n* PROJ x\n** new\n", &setup);
        assert_eq!(again, settings);
        assert_eq!(again.keywords().todo, ["PROJ"]);
    }
}
