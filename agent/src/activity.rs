//! The agent's activity log: what it did and saw, in words.
//!
//! The prompt's log component (2500, seed 000 `context-logs`) shows the
//! last lines of this log — not the host's own log, whose lines are for
//! the operator (absolute paths, load timings, generations) and would
//! spend a small model's context on infrastructure. A line here says what
//! happened in the agent's world: a tool it called and how that went, a
//! memex file that changed outside the host (which headlines came or
//! went, and which of the host's own writes of this process the change
//! undid, by title, so that the agent can write them again), a skill that came, went, was replaced or quarantined, the focus
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use foveal_gate::logs::LogRing;
use foveal_memex::privacy::PrivacyTags;
use foveal_memex::snapshot::MemexSnapshot;
use foveal_memex::write::{OwnEdit, OwnWrite};
use foveal_memex::{Memex, MemexFile};
use foveal_registry::registry::Row;

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
        log().push(foveal_gate::logs::redact(line).into_owned());
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

/// What the host remembers of its own memex writes: the [`Memex`] answers
/// from its record ([`Memex::wrote`], [`Memex::own_writes`]).
pub trait OwnWrites {
    /// Whether the host's own writes alone, all published after
    /// generation `since`, turned `path` from the version whose content
    /// hash is `from` (`None`: a file it did not have) into `to`.
    fn wrote(&self, path: &Path, since: u64, from: Option<u64>, to: u64) -> bool;
    /// The own writes still remembered, oldest first.
    fn writes(&self) -> Vec<OwnWrite>;
}

impl OwnWrites for Memex {
    fn wrote(&self, path: &Path, since: u64, from: Option<u64>, to: u64) -> bool {
        Memex::wrote(self, path, since, from, to)
    }

    fn writes(&self) -> Vec<OwnWrite> {
        self.own_writes()
    }
}

/// A memex file that changed between two snapshots.
#[derive(Debug, Clone)]
pub struct FileChange<'s> {
    /// Its version before; `None` for a file that appeared.
    pub before: Option<&'s Arc<MemexFile>>,
    /// Its version after; `None` for a file that is gone.
    pub after: Option<&'s Arc<MemexFile>>,
    /// The host's own edits of it that it remembers (a headline added, a
    /// TODO state set), oldest first: what the change may have undone.
    pub own: Vec<OwnWrite>,
}

/// The files that changed from `old` to `new` other than by the host
/// itself, in path order, then the files gone. A file with the same text
/// and setup files has not changed (only its vectors were filled, or it
/// was touched) — unless the host wrote it in between: then an edit made
/// outside put the old text back (an editor's stale buffer saved right
/// after the host's write). A version that the host's own writes alone
/// made from the one before is its own write (content hashes; `from` is
/// `None` for a file `old` does not have: [`Memex::wrote`]). Only what the
/// user or another program changed is news for the activity log.
pub fn outside_changes<'s>(
    old: &'s MemexSnapshot,
    new: &'s MemexSnapshot,
    own: &impl OwnWrites,
) -> Vec<FileChange<'s>> {
    let since = old.generation();
    // The record is short (`Memex::own_writes`): grouped once per look.
    let writes = own.writes();
    let mut by_path: HashMap<&Path, Vec<&OwnWrite>> = HashMap::new();
    for write in &writes {
        by_path.entry(write.path.as_path()).or_default().push(write);
    }
    let mut changes = Vec::new();
    for file in new.files() {
        let before = old.file(&file.path);
        let mine = by_path.get(file.path.as_path());
        let written = mine.is_some_and(|w| w.iter().any(|w| w.generation > since));
        if (before.is_some_and(|previous| same_version(previous, file)) && !written)
            || own.wrote(
                file.path.as_path(),
                since,
                before.map(|previous| previous.content_hash),
                file.content_hash,
            )
        {
            continue;
        }
        changes.push(FileChange {
            before,
            after: Some(file),
            own: mine
                .into_iter()
                .flatten()
                .filter(|w| w.edit.is_some())
                .map(|w| (*w).clone())
                .collect(),
        });
    }
    for file in old.files() {
        if new.file(&file.path).is_none() {
            changes.push(FileChange {
                before: Some(file),
                after: None,
                own: Vec::new(),
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

/// The host's own edits an edit made outside undid that a line names at
/// most; the others are counted.
const UNDONE_NAMED: usize = 3;

/// The `changes` from `old` to `new` ([`outside_changes`]) in words, a line
/// per file; `roots` are the memex's folders and files, to name each file
/// from its root. A line also names what of the host's own edits the
/// change undid ([`undone`]).
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
                // The host's own headlines are not the edit's, when it
                // came before the host looked again.
                let own_added: HashSet<&str> = change
                    .own
                    .iter()
                    .filter_map(|w| match &w.edit {
                        Some(OwnEdit::Added { id, .. }) => Some(id.as_str()),
                        _ => None,
                    })
                    .collect();
                let added = is
                    .difference(&was)
                    .filter(|id| !own_added.contains(*id))
                    .count();
                let removed = was.difference(&is).count();
                let mut said = match (added, removed) {
                    (0, 0) => None,
                    (a, 0) => Some(format!("{} added", headlines(a))),
                    (0, r) => Some(format!("{} removed", headlines(r))),
                    (a, r) => Some(format!("{} added, {r} removed", headlines(a))),
                };
                let mut undone = undone(old, new, &change.own, privacy);
                if undone.len() > UNDONE_NAMED {
                    let more = undone.len() - UNDONE_NAMED;
                    undone.truncate(UNDONE_NAMED);
                    undone.push(format!(
                        "and {more} more of your writes {}",
                        if more == 1 { "is undone" } else { "are undone" }
                    ));
                }
                if !undone.is_empty() {
                    let undone = undone.join("; ");
                    said = Some(match said {
                        Some(counts) => format!("{counts}; {undone}"),
                        None => undone,
                    });
                }
                lines.push(match said {
                    Some(said) => format!("memex file {name} was edited outside: {said}"),
                    None => format!("memex file {name} was edited outside (same headlines)"),
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

/// What of the host's own edits of a file (`own`, oldest first) the edit
/// made outside between `old` and `new` undid, a phrase each, oldest
/// first: a headline it added that is gone, a TODO state it set that is
/// back to the one before. Each is said once: at the look that first sees
/// it undone — so the edit was seen in `old`, or made after it (an
/// editor's stale buffer saved before the host looked again). Only what
/// is visible is named: a headline private in `old` (or added under a
/// parent private now or then) and a private headline's state are left
/// out. Cheap: a look-up by id per remembered edit.
fn undone(
    old: &MemexSnapshot,
    new: &MemexSnapshot,
    own: &[OwnWrite],
    privacy: &PrivacyTags,
) -> Vec<String> {
    let since = old.generation();
    let mut said = Vec::new();
    // Of a headline's states, only the host's last one can be undone.
    let mut states_seen = HashSet::new();
    for write in own.iter().rev() {
        // Written after the last look: `old` never showed it.
        let fresh = write.generation > since;
        match &write.edit {
            Some(OwnEdit::Added { id, parent, title }) => {
                if new.get(id).is_some() {
                    continue;
                }
                let named = match old.get(id) {
                    Some(object) => !privacy.is_private(object),
                    // Gone before the host looked: where it was is where
                    // its parent is.
                    None if fresh => {
                        let (then, now) = (old.get(parent), new.get(parent));
                        (then.is_some() || now.is_some())
                            && then.is_none_or(|o| !privacy.is_private(o))
                            && now.is_none_or(|o| !privacy.is_private(o))
                    }
                    // Gone already at the last look: said then.
                    None => false,
                };
                if named {
                    said.push(format!(
                        "the headline {:?} you added {} is gone",
                        first_line(title, TITLE_MAX),
                        when(write.at)
                    ));
                }
            }
            Some(OwnEdit::Todo { id, from, to, .. }) => {
                if !states_seen.insert(id.as_str()) || from == to {
                    continue;
                }
                let (then, now) = (old.get(id), new.get(id));
                let Some(object) = now else { continue };
                if object.todo() != from.as_deref()
                    || !(fresh || then.is_some_and(|o| o.todo() == to.as_deref()))
                    || privacy.is_private(object)
                    || then.is_some_and(|o| privacy.is_private(o))
                {
                    continue;
                }
                let title = first_line(object.title(), TITLE_MAX);
                let again = match from {
                    Some(state) => format!("{title:?} is {state} again"),
                    None => format!("{title:?} has no TODO state again"),
                };
                let set = match to {
                    Some(state) => format!("you set it to {state}"),
                    None => "you cleared its state".to_owned(),
                };
                said.push(format!("{again} ({set} {})", when(write.at)));
            }
            // Nothing the host can name (a `#[non_exhaustive]` record).
            _ => {}
        }
    }
    said.reverse();
    said
}

/// How much of a title a line names.
const TITLE_MAX: usize = 80;

/// `at 10:42`, or `at 2025-03-01 Saturday 10:42` on another day, in
/// local time.
fn when(at: std::time::SystemTime) -> String {
    let (date, time) = super::tools::local_time(at);
    if date == super::tools::local_now().0 {
        format!("at {time}")
    } else {
        format!("at {date} {time}")
    }
}

/// How the skills changed from `old` to `new` (rows of
/// [`Snapshot::rows`](foveal_registry::registry::Snapshot::rows)), a line per skill.
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

    /// No writes of the host's own: every change was made outside.
    struct Outside;

    impl OwnWrites for Outside {
        fn wrote(&self, _: &Path, _: u64, _: Option<u64>, _: u64) -> bool {
            false
        }

        fn writes(&self) -> Vec<OwnWrite> {
            Vec::new()
        }
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
            let changes = outside_changes(old, new, &Outside);
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

    impl foveal_memex::VectorSource for Vectors {
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
        let memex = foveal_memex::Memex::open(&[dir.path().to_path_buf()]).unwrap();
        let vectors = Arc::new(Vectors::default());
        memex.attach_vectors(Arc::clone(&vectors) as Arc<dyn foveal_memex::VectorSource>);
        let privacy = PrivacyTags::new(["@personal"]);
        let roots: Vec<&Path> = memex.roots().collect();
        let paths: Vec<std::path::PathBuf> =
            memex.snapshot().files().map(|f| f.path.clone()).collect();
        let told = |old: &Arc<MemexSnapshot>, new: &Arc<MemexSnapshot>| {
            let changes = outside_changes(old, new, &memex);
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

    /// A memex of one file, `work.org`: a visible headline and a private
    /// one; what the host is told of a change, as the host loop tells it.
    struct Watched {
        _dir: tempfile::TempDir,
        path: std::path::PathBuf,
        memex: foveal_memex::Memex,
        privacy: PrivacyTags,
    }

    const WORK: &str = "#+TODO: TODO | DONE\n* TODO Kitchen\n:PROPERTIES:\n:ID: kitchen\n:END:\n* Diary :@personal:\n:PROPERTIES:\n:ID: diary\n:END:\n";

    impl Watched {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().canonicalize().unwrap().join("work.org");
            std::fs::write(&path, WORK).unwrap();
            let memex = foveal_memex::Memex::open(&[dir.path().to_path_buf()]).unwrap();
            Self {
                _dir: dir,
                path,
                memex,
                privacy: PrivacyTags::new(["@personal"]),
            }
        }

        fn told(&self, old: &MemexSnapshot, new: &MemexSnapshot) -> Vec<String> {
            let roots: Vec<&Path> = self.memex.roots().collect();
            let changes = outside_changes(old, new, &self.memex);
            memex_changes(old, new, &changes, &self.privacy, roots.iter().copied())
        }

        /// `text` saved from outside (an editor), and read.
        fn save(&self, text: &str) -> Arc<MemexSnapshot> {
            std::fs::write(&self.path, text).unwrap();
            self.memex.reload_file(&self.path);
            self.memex.snapshot()
        }

        fn add(&self, parent: &str, title: &str) -> String {
            let added = self
                .memex
                .add_child(&self.memex.snapshot(), parent, title, None);
            added.unwrap().id
        }

        /// When the host's last write was made, as a line says it.
        fn last_write(&self) -> String {
            when(self.memex.own_writes().last().unwrap().at)
        }
    }

    #[test]
    fn an_outside_edit_that_removes_a_headline_the_host_added_names_it_once() {
        let w = Watched::new();
        let start = w.memex.snapshot();
        w.add("kitchen", "Order cabinets");
        let at = w.last_write();
        let written = w.memex.snapshot();
        assert_eq!(w.told(&start, &written), Vec::<String>::new());
        // An editor's stale buffer is saved over it.
        let reverted = w.save(WORK);
        assert_eq!(
            w.told(&written, &reverted),
            [format!(
                "memex file work.org was edited outside: 1 headline removed; the headline \"Order cabinets\" you added {at} is gone"
            )]
        );
        // Said once: the next outside edit does not say it again.
        let again = w.save(&format!("{WORK}* Paint the hallway\n"));
        assert_eq!(
            w.told(&reverted, &again),
            ["memex file work.org was edited outside: 1 headline added"]
        );
    }

    /// The editor saves before the host looks again: the text the host
    /// last saw is back, which is an edit all the same.
    #[test]
    fn a_stale_buffer_saved_before_the_host_looks_again_is_told_too() {
        let w = Watched::new();
        let start = w.memex.snapshot();
        w.add("kitchen", "Order cabinets");
        let at = w.last_write();
        let reverted = w.save(WORK);
        assert_eq!(reverted.file(&w.path).unwrap().text, WORK);
        assert_eq!(
            w.told(&start, &reverted),
            [format!(
                "memex file work.org was edited outside: the headline \"Order cabinets\" you added {at} is gone"
            )]
        );
        // The host's own way back to the same text is no news.
        let seen = w.memex.snapshot();
        w.memex
            .set_todo(&w.memex.snapshot(), "kitchen", Some("DONE"))
            .unwrap();
        w.memex
            .set_todo(&w.memex.snapshot(), "kitchen", Some("TODO"))
            .unwrap();
        assert_eq!(w.memex.snapshot().file(&w.path).unwrap().text, WORK);
        assert_eq!(w.told(&seen, &w.memex.snapshot()), Vec::<String>::new());
    }

    #[test]
    fn a_todo_state_the_host_set_and_an_outside_edit_put_back_is_named() {
        let w = Watched::new();
        let start = w.memex.snapshot();
        w.memex.set_todo(&start, "kitchen", Some("DONE")).unwrap();
        let at = w.last_write();
        let done = w.memex.snapshot();
        assert_eq!(w.told(&start, &done), Vec::<String>::new());
        let reverted = w.save(WORK);
        assert_eq!(
            w.told(&done, &reverted),
            [format!(
                "memex file work.org was edited outside: \"Kitchen\" is TODO again (you set it to DONE {at})"
            )]
        );
    }

    /// The negative controls: an outside edit that keeps what the host
    /// added says nothing of it; a headline that is private is never
    /// named, removed or not.
    #[test]
    fn kept_and_private_headlines_are_not_named() {
        let w = Watched::new();
        let start = w.memex.snapshot();
        w.add("kitchen", "Order cabinets");
        let written = w.memex.snapshot();
        let text = std::fs::read_to_string(&w.path).unwrap();
        let kept = w.save(&format!("{text}* Paint the hallway\n"));
        // Seen by the host before the edit or not, its own headline is
        // not counted as the edit's.
        for old in [&written, &start] {
            assert_eq!(
                w.told(old, &kept),
                ["memex file work.org was edited outside: 1 headline added"]
            );
        }
        // Under a private parent (a skill's write, say): removed from
        // outside, neither counted nor named, seen or not.
        let before = w.memex.snapshot();
        w.add("diary", "Call the doctor");
        let seen = w.memex.snapshot();
        let removed = w.save(&text);
        for old in [&before, &seen] {
            let lines = w.told(old, &removed);
            assert!(
                lines
                    .iter()
                    .all(|l| !l.contains("doctor") && !l.contains("you added")),
                "{lines:?}"
            );
        }
        // Added in the open, then made private by the user, then removed.
        let id = w.add("kitchen", "Book the plumber");
        let added = std::fs::read_to_string(&w.path).unwrap();
        let private =
            w.save(&added.replace("** Book the plumber", "** Book the plumber :@personal:"));
        assert!(private.get(&id).is_some());
        let gone = w.save(&text);
        let lines = w.told(&private, &gone);
        assert!(
            lines
                .iter()
                .all(|l| !l.contains("plumber") && !l.contains("you added")),
            "{lines:?}"
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
