//! The agent's activity log: what it did and saw, in words.
//!
//! The prompt's log component (2500, seed 000 `context-logs`) shows the
//! last lines of this log — not the host's own log, whose lines are for
//! the operator (absolute paths, load timings, generations) and would
//! spend a small model's context on infrastructure. A line here says what
//! happened in the agent's world: a tool it called and how that went, a
//! memex file that changed outside the host (which headlines came or
//! went), a skill that came, went, was replaced or quarantined, the focus
//! moving.
//!
//! [`note`] keeps a line in the activity log itself ([`log`]), once the
//! process keeps one ([`keep`]: the `foveal` binary does), after the log
//! redactor (the privacy gate, once the host installed it); and it writes
//! the line as a `tracing` event with the target [`TARGET`] at level INFO,
//! for the operator. The prompt reads only the activity log, never the
//! `tracing` pipeline: what the prompt carries is chosen by what a line is
//! for, never by the log filter (`FOVEAL_LOG`). (It once was read from a
//! layer behind a per-layer target filter, and a line logged while another
//! was being written to stderr reset `tracing-subscriber`'s per-thread
//! filter state, so with `FOVEAL_LOG=debug` the host's own lines — paths
//! included — reached the prompt.) Counts and names leave out what is
//! private: a file private as a whole is not named, and a private
//! headline is not counted. Files are named from their memex root, never
//! by a path of the machine.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::logs::LogRing;
use crate::memex::MemexFile;
use crate::memex::privacy::PrivacyTags;
use crate::memex::snapshot::MemexSnapshot;
use crate::registry::Row;

/// The `tracing` target of activity lines.
pub const TARGET: &str = "foveal::activity";

/// Lines the activity log keeps; the prompt shows the last
/// `context.log_limit` of them.
const CAPACITY: usize = 1000;

/// Whether this process keeps an activity log.
static KEEPING: AtomicBool = AtomicBool::new(false);

/// The activity log: the lines [`note`] kept, for the prompt.
pub fn log() -> &'static LogRing {
    static LOG: OnceLock<LogRing> = OnceLock::new();
    LOG.get_or_init(|| LogRing::new(CAPACITY))
}

/// Keeps the activity log from now on. The `foveal` binary keeps one; a
/// library user that does not (the agent's own tests among them) has an
/// empty one, and its prompts no log section.
pub fn keep() {
    KEEPING.store(true, Ordering::Relaxed);
}

/// Notes one activity line: in the activity log (when kept), as the log
/// redactor leaves it, and as a `tracing` event for the operator.
pub fn note(line: &str) {
    if KEEPING.load(Ordering::Relaxed) {
        log().push(crate::logs::redact(line).into_owned());
    }
    tracing::info!(target: TARGET, "{line}");
}

/// The first line of `text`, cut at `max` bytes (on a char boundary)
/// with `…` when longer.
pub fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.len() <= max && line.len() == text.trim_end().len() {
        return line.to_owned();
    }
    let mut end = max.min(line.len());
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

/// A memex file that changed between two snapshots.
#[derive(Debug, Clone, Copy)]
pub struct FileChange<'s> {
    /// Its version before; `None` for a file that appeared.
    pub before: Option<&'s Arc<MemexFile>>,
    /// Its version after; `None` for a file that is gone.
    pub after: Option<&'s Arc<MemexFile>>,
}

/// The files that changed from `old` to `new` other than by the host
/// itself, in path order, then the files gone. A file with the same text
/// and setup files has not changed (only its vectors were filled, or it
/// was touched); a version that `own(path, from, to)` says the host wrote
/// over the one before is its own write (content hashes; `from` is `None`
/// for a file `old` does not have: [`Memex::wrote`]). Only what the user
/// or another program changed is news for the activity log.
///
/// [`Memex::wrote`]: crate::memex::Memex::wrote
pub fn outside_changes<'s>(
    old: &'s MemexSnapshot,
    new: &'s MemexSnapshot,
    own: impl Fn(&Path, Option<u64>, u64) -> bool,
) -> Vec<FileChange<'s>> {
    let mut changes = Vec::new();
    for file in new.files() {
        let before = old.file(&file.path);
        if before.is_some_and(|previous| same_version(previous, file))
            || own(
                file.path.as_path(),
                before.map(|previous| previous.content_hash),
                file.content_hash,
            )
        {
            continue;
        }
        changes.push(FileChange {
            before,
            after: Some(file),
        });
    }
    for file in old.files() {
        if new.file(&file.path).is_none() {
            changes.push(FileChange {
                before: Some(file),
                after: None,
            });
        }
    }
    changes
}

/// The same text and the same setup files: a new vector or a touch, not
/// an edit (the memex publishes a version again when its vectors grow).
fn same_version(a: &MemexFile, b: &MemexFile) -> bool {
    std::ptr::eq(a, b)
        || (a.content_hash == b.content_hash && a.text == b.text && a.setup == b.setup)
}

/// The `changes` from `old` to `new` ([`outside_changes`]) in words, a line
/// per file; `roots` are the memex's folders and files, to name each file
/// from its root.
pub fn memex_changes<'a>(
    old: &MemexSnapshot,
    new: &MemexSnapshot,
    changes: &[FileChange<'_>],
    privacy: &PrivacyTags,
    roots: impl Iterator<Item = &'a Path> + Clone,
) -> Vec<String> {
    let mut lines = Vec::new();
    for change in changes {
        let Some(file) = change.after else {
            if let Some(gone) = change.before
                && !privacy.file_is_private(gone)
            {
                lines.push(format!(
                    "memex file {} is gone",
                    shown_name(&gone.path, roots.clone())
                ));
            }
            continue;
        };
        if privacy.file_is_private(file) {
            continue;
        }
        let name = shown_name(&file.path, roots.clone());
        match change.before {
            Some(previous) if !privacy.file_is_private(previous) => {
                let was = visible_ids(old, previous, privacy);
                let is = visible_ids(new, file, privacy);
                let added = is.difference(&was).count();
                let removed = was.difference(&is).count();
                lines.push(match (added, removed) {
                    (0, 0) => format!("memex file {name} was edited outside (same headlines)"),
                    (a, 0) => format!(
                        "memex file {name} was edited outside: {} added",
                        headlines(a)
                    ),
                    (0, r) => format!(
                        "memex file {name} was edited outside: {} removed",
                        headlines(r)
                    ),
                    (a, r) => format!(
                        "memex file {name} was edited outside: {} added, {r} removed",
                        headlines(a)
                    ),
                });
            }
            // New, or private until now.
            _ => lines.push(format!(
                "memex file {name} appeared ({})",
                headlines(visible_ids(new, file, privacy).len())
            )),
        }
    }
    lines
}

/// How the skills changed from `old` to `new` (rows of
/// [`Snapshot::rows`](crate::registry::Snapshot::rows)), a line per skill.
pub fn skill_changes(old: &[Row], new: &[Row]) -> Vec<String> {
    let before: BTreeMap<&str, &Row> = old.iter().map(|r| (r.name.as_str(), r)).collect();
    let after: BTreeMap<&str, &Row> = new.iter().map(|r| (r.name.as_str(), r)).collect();
    let mut lines = Vec::new();
    for (name, row) in &after {
        let state = state(row);
        match before.get(name) {
            None => lines.push(format!("skill {name} {state}")),
            Some(previous) if previous.path != row.path || previous.version != row.version => {
                lines.push(format!(
                    "skill {name} was replaced by a new build ({state})"
                ));
            }
            Some(previous) if previous.status != row.status => {
                lines.push(format!("skill {name} {state}"));
            }
            Some(_) => {}
        }
    }
    for name in before.keys() {
        if !after.contains_key(name) {
            lines.push(format!("skill {name} was removed"));
        }
    }
    lines
}

/// A skill's state in words, without paths.
fn state(row: &Row) -> String {
    let version = row
        .version
        .as_deref()
        .map(|v| format!(" {v}"))
        .unwrap_or_default();
    if row.status == "loaded" {
        format!("loaded{version}")
    } else if row.status.starts_with("quarantined") {
        "quarantined (its hooks are not called; the host uses their fallbacks)".to_owned()
    } else if row.status.starts_with("missing dependency") {
        format!("waiting: {}", row.status)
    } else {
        "not loaded (foveal skill-list says why)".to_owned()
    }
}

/// The ids of the visible headlines of `file`.
fn visible_ids<'a>(
    snapshot: &'a MemexSnapshot,
    file: &'a MemexFile,
    privacy: &PrivacyTags,
) -> HashSet<&'a str> {
    snapshot
        .file_objects(&file.path)
        .filter(|o| !privacy.is_private(*o))
        .map(|o| o.id())
        .collect()
}

fn headlines(n: usize) -> String {
    match n {
        1 => "1 headline".to_owned(),
        n => format!("{n} headlines"),
    }
}

/// `path` from the memex root it is under (`notes/work.org`), else its
/// file name.
fn shown_name<'a>(path: &Path, mut roots: impl Iterator<Item = &'a Path>) -> String {
    roots
        .find_map(|root| {
            path.strip_prefix(root)
                .ok()
                .filter(|p| !p.as_os_str().is_empty())
        })
        .or_else(|| path.file_name().map(Path::new))
        .unwrap_or(path)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, version: &str, status: &str, path: &str) -> Row {
        Row {
            name: name.to_owned(),
            version: Some(version.to_owned()),
            priority: Some(1),
            dependencies: Vec::new(),
            hooks: Vec::new(),
            isolation: "in-process".to_owned(),
            status: status.to_owned(),
            warnings: Vec::new(),
            path: path.into(),
        }
    }

    #[test]
    fn skill_changes_are_said_in_words_without_paths() {
        let old = [
            row("awareness", "0.2.0", "loaded", "/x/libawareness.so"),
            row("gone", "1.0.0", "loaded", "/x/libgone.so"),
            row("flaky", "1.0.0", "loaded", "/x/libflaky.so"),
        ];
        let new = [
            row("awareness", "0.2.1", "loaded", "/y/libawareness.so"),
            row(
                "flaky",
                "1.0.0",
                "quarantined after 3 consecutive panics",
                "/x/libflaky.so",
            ),
            row("fresh", "0.1.0", "loaded", "/x/libfresh.so"),
        ];
        let lines = skill_changes(&old, &new);
        assert_eq!(
            lines,
            [
                "skill awareness was replaced by a new build (loaded 0.2.1)",
                "skill flaky quarantined (its hooks are not called; the host uses their fallbacks)",
                "skill fresh loaded 0.1.0",
                "skill gone was removed",
            ]
        );
        assert!(lines.iter().all(|l| !l.contains('/')));
        assert!(skill_changes(&new, &new).is_empty());
    }

    #[test]
    fn first_lines_are_cut_and_marked() {
        assert_eq!(first_line("short", 10), "short");
        assert_eq!(first_line("two\nlines", 10), "two…");
        assert_eq!(first_line("ééééé", 3), "é…");
    }

    #[test]
    fn memex_changes_name_files_and_count_visible_headlines_only() {
        let parse = |name: &str, text: &str| {
            Arc::new(
                MemexFile::parse(Path::new(&format!("/m/{name}")), name, text.to_owned()).unwrap(),
            )
        };
        let privacy = PrivacyTags::new(["@personal"]);
        let roots = [Path::new("/m")];
        let work = parse(
            "work.org",
            "* A\n:PROPERTIES:\n:ID: a\n:END:\n* B\n:PROPERTIES:\n:ID: b\n:END:\n",
        );
        let diary = parse("diary.org", "#+FILETAGS: :@personal:\n* Secret day\n");
        let old = MemexSnapshot::default().with_file(work).with_file(diary);
        let edited = parse(
            "work.org",
            "* A\n:PROPERTIES:\n:ID: a\n:END:\n* C\n:PROPERTIES:\n:ID: c\n:END:\n* D :@personal:\n:PROPERTIES:\n:ID: d\n:END:\n",
        );
        let new = old
            .with_file(edited)
            .with_file(parse(
                "diary.org",
                "#+FILETAGS: :@personal:\n* Another secret\n",
            ))
            .with_file(parse("new.org", "* X\n"));
        let told = |old: &MemexSnapshot, new: &MemexSnapshot| {
            let changes = outside_changes(old, new, |_, _, _| false);
            memex_changes(old, new, &changes, &privacy, roots.iter().copied())
        };
        let lines = told(&old, &new);
        assert_eq!(
            lines,
            [
                "memex file new.org appeared (1 headline)",
                "memex file work.org was edited outside: 1 headline added, 1 removed",
            ]
        );
        // A new version of the same text (vectors published) is no news.
        let refilled = new.with_file(parse("new.org", "* X\n"));
        assert_eq!(told(&new, &refilled), Vec::<String>::new());
        let gone = new.without_file(Path::new("/m/new.org"));
        assert_eq!(told(&new, &gone), ["memex file new.org is gone"]);
    }

    /// Fills every object without a vector, while `ready`: the embedder
    /// as the memex sees it.
    #[derive(Debug, Default)]
    struct Vectors {
        ready: std::sync::atomic::AtomicBool,
    }

    impl Vectors {
        fn ready(&self, ready: bool) {
            self.ready.store(ready, std::sync::atomic::Ordering::SeqCst);
        }
    }

    impl crate::memex::VectorSource for Vectors {
        fn fill(&self, file: &mut MemexFile) -> usize {
            if !self.ready.load(std::sync::atomic::Ordering::SeqCst) {
                return 0;
            }
            let objects = file.objects.len() as u32;
            (0..objects)
                .filter(|&index| file.set_vector(index, &[1.0, 0.0]))
                .count()
        }
    }

    #[test]
    fn new_vectors_and_the_hosts_own_writes_are_not_outside_edits() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("work.org"),
            "* Launch\n:PROPERTIES:\n:ID: launch\n:END:\n",
        )
        .unwrap();
        let memex = crate::memex::Memex::open(&[dir.path().to_path_buf()]).unwrap();
        let vectors = Arc::new(Vectors::default());
        memex.attach_vectors(Arc::clone(&vectors) as Arc<dyn crate::memex::VectorSource>);
        let privacy = PrivacyTags::new(["@personal"]);
        let roots: Vec<&Path> = memex.roots().collect();
        let paths: Vec<std::path::PathBuf> =
            memex.snapshot().files().map(|f| f.path.clone()).collect();
        let told = |old: &Arc<MemexSnapshot>, new: &Arc<MemexSnapshot>| {
            let changes = outside_changes(old, new, |path, from, to| {
                memex.wrote(path, old.generation(), from, to)
            });
            memex_changes(old, new, &changes, &privacy, roots.iter().copied())
        };
        // The embedding pass publishes the file again, with its vectors.
        let before = memex.snapshot();
        vectors.ready(true);
        memex.refill(&paths);
        let embedded = memex.snapshot();
        assert!(embedded.generation() > before.generation());
        assert_eq!(told(&before, &embedded), Vec::<String>::new());
        // The host writes; the new headline's vector follows.
        vectors.ready(false);
        memex
            .add_child(&embedded, "launch", "Record a demo", None)
            .unwrap();
        vectors.ready(true);
        memex.refill(&paths);
        let written = memex.snapshot();
        assert!(written.generation() >= embedded.generation() + 2);
        assert_eq!(told(&embedded, &written), Vec::<String>::new());
        // An edit made outside is told once, its vectors or not.
        let mut text = std::fs::read_to_string(&paths[0]).unwrap();
        text.push_str("* Plan the review\n:PROPERTIES:\n:ID: review\n:END:\n");
        std::fs::write(&paths[0], text).unwrap();
        vectors.ready(false);
        memex.reload_file(&paths[0]);
        vectors.ready(true);
        memex.refill(&paths);
        assert_eq!(
            told(&written, &memex.snapshot()),
            ["memex file work.org was edited outside: 1 headline added"]
        );
    }

    #[test]
    fn shown_names_start_at_their_root() {
        let roots = [Path::new("/home/u/notes"), Path::new("/home/u/single.org")];
        assert_eq!(
            shown_name(
                Path::new("/home/u/notes/work/plan.org"),
                roots.iter().copied()
            ),
            "work/plan.org"
        );
        assert_eq!(
            shown_name(Path::new("/home/u/single.org"), roots.iter().copied()),
            "single.org"
        );
    }
}
