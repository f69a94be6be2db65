//! The last door: every request body is checked here before it leaves the
//! process (design principle 6, seed 000 `context-privacy-filtered-p`).
//!
//! Private objects never reach a skill — the memex view leaves them out —
//! but private text can still reach a request another way: a user message
//! quoting a diary entry, a tool that read an Org file, a log line. And
//! secrets (API keys, tokens, private keys, passwords) can be anywhere. The
//! [`Gate`] removes both from the final body:
//!
//! 1. **Private text**, always by the host: text that only private objects
//!    hold. For each memex generation the gate gathers the text of every
//!    private object (a privacy tag on it or an ancestor,
//!    [`PrivacyTags::private_mask`]): its title, each non-blank body line
//!    and each property value (except `:EMBEDDING:`), trimmed. Fragments
//!    shorter than [`MIN_FRAGMENT_CHARS`] characters or without a letter or
//!    digit are skipped, so a private `- a` does not redact every `a`. A
//!    fragment that the text of any visible object of the same snapshot
//!    also holds (in any file: its headline line, drawer and body, the
//!    `:EMBEDDING:` values aside) is not private and is left alone: a skill
//!    sees that text anyway, and a private headline `Plan` must not redact
//!    a visible `Plan` from the outline. Every other fragment is removed
//!    wherever it appears, also as it reads inside a JSON string (quotes,
//!    backslashes and control characters escaped, and with non-ASCII
//!    characters as `\uXXXX`). One Aho-Corasick automaton over the
//!    fragments' first 8 bytes finds, in one pass, every place a fragment
//!    may start; there the fragments with that start are picked out by the
//!    next 8 bytes. Every occurrence is found, overlapping ones included (a
//!    fragment that ends inside another must not hide it), and each run of
//!    overlapping matches becomes one `[REDACTED private]`. The scan runs
//!    *before* any skill sees the body.
//!
//!    The matcher is cached by memex generation and file identity, and its
//!    build is linear in the memex: the same automaton scans the visible
//!    text of each new file version for fragments (on every core when there
//!    is much of it). For each file version the gate keeps its fragments,
//!    where its visible text is, and which fragments that text holds; after
//!    an edit only the changed files are gathered and scanned again, and the
//!    others only for the fragments the edit brought, by an automaton over
//!    those alone. On the 100,000-headline benchmark memex (10 MB of private
//!    text, 24 MB of visible text; release build, 2 cores; `cargo bench -p
//!    foveal --bench egress`) the first build takes about 0.55 s and 45 MB
//!    (so does the build after an edit to that one big file), the build
//!    after an edit to a small file beside it 0.15–0.2 s, and checking the
//!    960 kB context section of its focus takes about 20 ms (4 ms for
//!    200 kB of the memex itself, full of private text).
//! 2. **Secrets**, by the `privacy` skill's `redact` hook when it is loaded
//!    and healthy, otherwise by the host with the same patterns and the same
//!    code ([`foveal_redact`]): **fail closed**. The host configures the
//!    skill with the configured patterns (`invoke("configure", …)`) the
//!    first time it sees a given load of it, and again after every reload.
//!    Even when the skill runs, the host checks its result: a secret the
//!    host's patterns find in the body (or still find in the skill's
//!    output) is removed by the host, so the secret filter is never weaker
//!    than the built-in one.
//!
//! Private passages and secrets are found on the original body and their
//! union is replaced, so a private fragment inside a key (a title `proj`
//! inside `sk-proj-…`) cannot split the key and let its tail through.
//!
//! What was removed is reported by kind — `private` and each pattern name,
//! with counts — in the [`Report`] and in a warning under the log target
//! `foveal::privacy`; never the text itself. When the built-in filter stands
//! in for the skill, the gate says so once per change of state (a warning
//! naming why), and `foveal skill-list` says so too ([`skill_fallback`]).
//!
//! # Example
//!
//! ```
//! use foveal::egress::{Gate, SecretFilter};
//! use foveal::memex::{Memex, privacy::PrivacyTags};
//! use foveal::registry::Snapshot;
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(
//!     dir.path().join("a.org"),
//!     "* Travel\nDiary of the trip.\n* Diary :@personal:\nMet Ann at the harbour.\n",
//! )
//! .unwrap();
//! let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
//! let gate = Gate::new(PrivacyTags::new(["@personal"]), &[], true).unwrap();
//!
//! // No skills loaded at all: the host's own filter runs.
//! let skills = Snapshot::default();
//! // The title `Diary` is private, but a visible body holds it too: it stays.
//! let body = "Diary: Met Ann at the harbour. My key is AKIAIOSFODNN7EXAMPLE.";
//! let cleaned = gate.clean(body, &memex.snapshot(), &skills).unwrap();
//! assert_eq!(cleaned.text, "Diary: [REDACTED private] My key is [REDACTED aws-access-key-id].");
//! assert_eq!(cleaned.report.private, 1);
//! assert_eq!(cleaned.report.secrets, [("aws-access-key-id".to_owned(), 1)]);
//! assert!(matches!(cleaned.report.filter, SecretFilter::Host(_)));
//! ```

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, Weak};

use aho_corasick::{AhoCorasick, MatchKind};
use foveal_redact::{Pattern, PatternError, Redactor, Span};

use crate::config::Config;
use crate::memex::file::MemexFile;
use crate::memex::privacy::PrivacyTags;
use crate::memex::snapshot::MemexSnapshot;
use crate::registry::{Reason, Skill, Slot, Snapshot, Unavailable, hooks};

/// The skill that redacts secrets.
pub const SKILL: &str = "privacy";

/// What replaces a passage of private text.
pub const PRIVATE_MARKER: &str = "[REDACTED private]";

/// Private fragments shorter than this many characters are not searched
/// for: a one-letter body line would otherwise redact that letter
/// everywhere. (A private title of three letters or fewer is therefore not
/// redacted outside the memex; the memex view never shows it to a skill.)
pub const MIN_FRAGMENT_CHARS: usize = 4;

/// The span pattern index that marks a private passage in a merge.
const PRIVATE_SPAN: usize = usize::MAX;

/// Why the gate could not be built or could not check a body. On any of
/// these the body must not be sent.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// A secret pattern is invalid.
    #[error("privacy patterns: {0}")]
    Pattern(#[from] PatternError),
    /// The check of the private text failed unexpectedly.
    #[error("the check of the memex's private text failed: {0}; the request was not sent")]
    Check(String),
    /// The private text is too large to search in one automaton.
    #[error(
        "the memex's private text ({fragments} fragments) is too large to search: {message}; the request was not sent"
    )]
    PrivateText {
        /// The number of fragments.
        fragments: usize,
        /// What the automaton builder said.
        message: String,
    },
}

/// Why the host's built-in secret filter stands in for the privacy skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// No skill `privacy` is loaded.
    NotLoaded,
    /// It is loaded but does not implement `redact`.
    NoRedactHook,
    /// It cannot be configured: it does not implement `invoke`.
    NotConfigurable,
    /// A skill it depends on is missing.
    WaitingForDependencies,
    /// It panicked too often and is quarantined.
    Quarantined,
    /// `invoke("configure", …)` failed; the code's name (`panic`, …).
    ConfigureFailed(&'static str),
    /// The `redact` hook failed; the code's name (`panic`, …).
    HookFailed(&'static str),
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotLoaded => f.write_str("skill not loaded"),
            Self::NoRedactHook => f.write_str("skill has no redact hook"),
            Self::NotConfigurable => f.write_str("skill cannot be configured (no invoke hook)"),
            Self::WaitingForDependencies => f.write_str("skill waiting for dependencies"),
            Self::Quarantined => f.write_str("skill quarantined"),
            Self::ConfigureFailed(code) => write!(f, "skill refused its configuration ({code})"),
            Self::HookFailed(code) => write!(f, "skill's redact hook failed ({code})"),
        }
    }
}

impl Fallback {
    fn from_unavailable(error: &Unavailable, configuring: bool) -> Self {
        // Only the kind of failure is kept: a skill's error message could
        // quote the text it was given.
        match error.reason() {
            Reason::NotLoaded { .. } => Self::NotLoaded,
            Reason::NoHook { hook, .. } if *hook == hooks::INVOKE.name => Self::NotConfigurable,
            Reason::NoHook { .. } => Self::NoRedactHook,
            Reason::MissingDependency { .. } => Self::WaitingForDependencies,
            Reason::Quarantined { .. } => Self::Quarantined,
            Reason::Failed { error, .. } if configuring => Self::ConfigureFailed(error.code_name()),
            Reason::Failed { error, .. } => Self::HookFailed(error.code_name()),
        }
    }
}

/// Which filter removed the secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretFilter {
    /// The privacy skill's `redact` hook (checked by the host afterwards).
    Skill,
    /// The host's built-in filter, and why the skill was not used.
    Host(Fallback),
}

impl std::fmt::Display for SecretFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Skill => f.write_str("skill"),
            Self::Host(_) => f.write_str("host"),
        }
    }
}

/// What the gate removed from one body: kinds and counts, never text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Passages of private text.
    pub private: usize,
    /// Secrets, by pattern name, sorted by name.
    pub secrets: Vec<(String, usize)>,
    /// Which filter handled the secrets.
    pub filter: SecretFilter,
    /// Secrets the skill left in and the host removed after it (0 when
    /// the host's filter ran alone).
    pub host_after_skill: usize,
}

impl Report {
    /// Everything removed.
    pub fn total(&self) -> usize {
        self.private + self.secrets.iter().map(|(_, n)| n).sum::<usize>()
    }

    /// `name=count,…`, or `none`.
    pub fn secrets_summary(&self) -> String {
        if self.secrets.is_empty() {
            return "none".to_owned();
        }
        let mut out = String::new();
        for (name, n) in &self.secrets {
            if !out.is_empty() {
                out.push(',');
            }
            let _ = write!(out, "{name}={n}");
        }
        out
    }
}

/// A body after the gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleaned<'a> {
    /// The body to send; borrowed when nothing was removed.
    pub text: Cow<'a, str>,
    /// What was removed.
    pub report: Report,
}

/// Whether the built-in secret filter stands in for the privacy skill in
/// `skills`, judged from the registry alone (a hook that fails at call time
/// is reported by the gate when it happens).
pub fn skill_fallback(skills: &Snapshot) -> Option<Fallback> {
    match skills.get(SKILL) {
        None => Some(Fallback::NotLoaded),
        Some(slot) => static_fallback(slot),
    }
}

fn static_fallback(slot: &Slot) -> Option<Fallback> {
    let skill = slot.skill();
    let has = |hook: &str| skill.info().hooks.contains(&hook);
    if skill.is_quarantined() {
        Some(Fallback::Quarantined)
    } else if !slot.missing_dependencies().is_empty() {
        Some(Fallback::WaitingForDependencies)
    } else if !has(hooks::REDACT.name) {
        Some(Fallback::NoRedactHook)
    } else if !has(hooks::INVOKE.name) {
        Some(Fallback::NotConfigurable)
    } else {
        None
    }
}

/// The sentence `skill-list` prints under its table when `fallback` is in
/// effect.
pub fn fallback_notice(fallback: &Fallback) -> String {
    format!(
        "privacy: {fallback} — the host applies its built-in filter (privacy tags + secret patterns)"
    )
}

/// The last-door check. Build one per host from the configuration and
/// share it; [`clean`](Self::clean) may be called from many threads.
#[derive(Debug)]
pub struct Gate {
    privacy: PrivacyTags,
    secrets: Redactor,
    configure_args: String,
    private: Mutex<Option<PrivateCache>>,
    skill: Mutex<SkillState>,
}

/// One file version's private text and where its visible text is: gathered
/// once per version and shared between generations while the file is
/// unchanged. Its `Debug` form gives counts, never the text.
#[derive(Default)]
struct FileText {
    /// The distinct fragments of its private objects.
    raw: Box<[Arc<str>]>,
    /// The JSON forms of those fragments that read otherwise inside a JSON
    /// string: the fragment's index in `raw`, and the form.
    json: Box<[(u32, Box<str>)]>,
    /// The byte ranges of the file's text held by its visible objects,
    /// without `:EMBEDDING:` values (no fragment is looked for there).
    visible: Box<[(u32, u32)]>,
}

impl std::fmt::Debug for FileText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileText")
            .field("fragments", &self.raw.len())
            .field("json_forms", &self.json.len())
            .field("visible_ranges", &self.visible.len())
            .finish()
    }
}

impl FileText {
    /// Fragment `index`: a raw one, or past them a JSON form.
    fn text(&self, index: u32) -> &str {
        let i = index as usize;
        match self.raw.get(i) {
            Some(text) => text,
            None => &self.json[i - self.raw.len()].1,
        }
    }
}

/// One file version in the cache of a generation. Its `Debug` form gives
/// counts, never the text.
struct CachedFile {
    /// Its identity (a `Weak` keeps the address from being reused).
    file: Weak<MemexFile>,
    text: Arc<FileText>,
    /// The fragments of private text of that generation (of any file) that
    /// this file's visible text contains: they are not private.
    visible_hits: Vec<Arc<str>>,
}

impl std::fmt::Debug for CachedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedFile")
            .field("file", &self.file.upgrade().map(|file| file.path.clone()))
            .field("text", &self.text)
            .field("visible_hits", &self.visible_hits.len())
            .finish()
    }
}

/// The private-text matcher of one memex generation.
#[derive(Debug)]
struct PrivateCache {
    generation: u64,
    /// Each file of that generation, in the snapshot's order.
    files: Vec<CachedFile>,
    matcher: Arc<Option<PrivateMatcher>>,
}

/// The bytes of a fragment the automaton searches for: its start, at most
/// this long. An automaton over whole fragments took 6 s and 110 MB for the
/// 10 MB of private text of a 100,000-headline memex; over 8-byte anchors
/// it takes about 0.05 s and 2.5 MB, and each anchor found is checked
/// against the fragments that start with it.
const ANCHOR_LEN: usize = 8;

/// Fragments at least this long fill a whole [`key_of`] after their anchor:
/// they are looked up by anchor and key in [`PrivateMatcher::long`].
const LONG_LEN: usize = ANCHOR_LEN + 8;

/// One fragment to look for: fragment `index` of `texts[file]`, standing
/// for raw fragment `raw` of its generation (itself, or one of its JSON
/// forms).
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// [`key_of`] its text.
    key: u64,
    /// The length of its text in bytes.
    len: u32,
    file: u32,
    index: u32,
    raw: u32,
}

/// The bytes of `text` after its anchor, up to 8 of them, as a big-endian
/// number, zero-padded. Whether a fragment shorter than [`LONG_LEN`] starts
/// a text that shares its anchor is a comparison of keys, without reading
/// the fragment; a longer one is a candidate only where the keys are equal.
fn key_of(text: &[u8]) -> u64 {
    let mut key = [0u8; 8];
    if let Some(tail) = text.get(ANCHOR_LEN..) {
        let tail = &tail[..tail.len().min(8)];
        key[..tail.len()].copy_from_slice(tail);
    }
    u64::from_be_bytes(key)
}

/// The first `bytes` bytes (at most 8) of a key.
fn key_mask(bytes: usize) -> u64 {
    match bytes {
        0 => 0,
        n => u64::MAX << (64 - 8 * n.min(8)),
    }
}

/// The long fragments of one anchor that share one key: a run of
/// [`PrivateMatcher::entries`].
#[derive(Debug, Clone, Copy)]
struct LongRun {
    key: u64,
    anchor: u32,
    start: u32,
    end: u32,
}

/// The hash of a [`LongRun`]'s anchor and key: multiply and fold.
fn run_hash(anchor: u32, key: u64) -> u64 {
    let m = u128::from(key ^ u64::from(anchor).wrapping_mul(0xff51_afd7_ed55_8ccd))
        * 0x9e37_79b9_7f4a_7c15u128;
    (m as u64) ^ ((m >> 64) as u64)
}

/// Fragments of private text, found through an Aho-Corasick automaton over
/// their anchors. Its `Debug` form gives counts, never the text.
struct PrivateMatcher {
    automaton: AhoCorasick,
    /// The fragments starting with anchor `a` are
    /// `entries[starts[a]..starts[a + 1]]`: first those shorter than
    /// [`LONG_LEN`], up to `shorts_end[a]`, then the long ones by key.
    starts: Vec<u32>,
    shorts_end: Vec<u32>,
    entries: Vec<Entry>,
    /// The runs of long fragments, by anchor and key.
    long: hashbrown::HashTable<LongRun>,
    texts: Vec<Arc<FileText>>,
}

/// Gathers, checks and builds the private-text matcher of one generation.
/// Linear in the memex: see [`Gate::private_matcher`].
struct Build<'m> {
    files: Vec<&'m Arc<MemexFile>>,
    texts: Vec<Arc<FileText>>,
    visible_hits: Vec<Vec<Arc<str>>>,
    /// Whether the file was in the previous cache, as this very version.
    unchanged: Vec<bool>,
    /// The previous cache's file versions that are gone.
    dropped: Vec<Arc<FileText>>,
}

/// How many raw fragments a build found, and how many of them visible text
/// also holds.
#[derive(Debug, Clone, Copy, Default)]
struct BuildCounts {
    fragments: usize,
    public: usize,
}

impl<'m> Build<'m> {
    /// The files of `memex`, each with its previous work when `previous`
    /// holds the same version.
    fn new(
        previous: Option<PrivateCache>,
        memex: &'m MemexSnapshot,
        privacy: &PrivacyTags,
    ) -> Self {
        let mut previous: HashMap<*const MemexFile, CachedFile> = previous
            .map(|cache| {
                cache
                    .files
                    .into_iter()
                    .map(|cached| (Weak::as_ptr(&cached.file), cached))
                    .collect()
            })
            .unwrap_or_default();
        let files: Vec<&Arc<MemexFile>> = memex.files().collect();
        let mut build = Self {
            texts: Vec::with_capacity(files.len()),
            visible_hits: Vec::with_capacity(files.len()),
            unchanged: Vec::with_capacity(files.len()),
            dropped: Vec::new(),
            files,
        };
        for file in &build.files {
            match previous.remove(&Arc::as_ptr(file)) {
                Some(cached) => {
                    build.texts.push(cached.text);
                    build.visible_hits.push(cached.visible_hits);
                    build.unchanged.push(true);
                }
                None => {
                    build.texts.push(Arc::new(file_text(file, privacy)));
                    build.visible_hits.push(Vec::new());
                    build.unchanged.push(false);
                }
            }
        }
        build.dropped = previous.into_values().map(|cached| cached.text).collect();
        build
    }

    /// The matcher of the private fragments that no visible text holds.
    ///
    /// 1. Every distinct raw fragment gets an id; those of the previous
    ///    cache's files (unchanged or gone) are *known*.
    /// 2. One automaton over all fragments (and their JSON forms) scans the
    ///    visible text of each new file version: its hits.
    /// 3. An unchanged file's hits already cover the known fragments; a
    ///    small automaton over the new ones scans its visible text for the
    ///    rest (nothing at all when the edit brought no new fragment).
    /// 4. A fragment some file's hits name is public; the matcher keeps the
    ///    others. Each file's hits are pruned to the fragments that still
    ///    exist, so they never outgrow the private text.
    fn run(&mut self) -> Result<(Option<PrivateMatcher>, BuildCounts), GateError> {
        let texts = self.texts.clone();
        let mut ids: HashMap<&str, u32> = HashMap::new();
        // Each raw fragment's first place, as (file, index).
        let mut first: Vec<(u32, u32)> = Vec::new();
        let mut known: Vec<bool> = Vec::new();
        for (f, text) in texts.iter().enumerate() {
            for (i, fragment) in text.raw.iter().enumerate() {
                let id = *ids.entry(fragment).or_insert_with(|| {
                    first.push((f as u32, i as u32));
                    known.push(false);
                    first.len() as u32 - 1
                });
                known[id as usize] |= self.unchanged[f];
            }
        }
        if first.is_empty() {
            self.visible_hits.iter_mut().for_each(Vec::clear);
            return Ok((None, BuildCounts::default()));
        }
        for text in &self.dropped {
            for fragment in text.raw.iter() {
                if let Some(&id) = ids.get(&**fragment) {
                    known[id as usize] = true;
                }
            }
        }
        let raw_entries = || {
            first.iter().enumerate().map(|(id, &(file, index))| Entry {
                key: 0,
                len: 0,
                file,
                index,
                raw: id as u32,
            })
        };
        let mut entries: Vec<Entry> = raw_entries().collect();
        for (f, text) in texts.iter().enumerate() {
            for (j, (i, _)) in text.json.iter().enumerate() {
                let id = ids[&*text.raw[*i as usize]];
                if first[id as usize] == (f as u32, *i) {
                    entries.push(Entry {
                        key: 0,
                        len: 0,
                        file: f as u32,
                        index: (text.raw.len() + j) as u32,
                        raw: id,
                    });
                }
            }
        }
        let Some(mut matcher) = PrivateMatcher::build(texts.clone(), entries)? else {
            return Ok((None, BuildCounts::default()));
        };
        let raw_text = |id: u32| {
            let (file, index) = first[id as usize];
            Arc::clone(&texts[file as usize].raw[index as usize])
        };
        // The last file that found each fragment: each is listed once.
        let mut stamp: Vec<u32> = vec![u32::MAX; first.len()];
        let mut record = |found: Vec<(u32, u32)>, hits: &mut [Vec<Arc<str>>]| {
            for (f, id) in found {
                if stamp[id as usize] != f {
                    stamp[id as usize] = f;
                    hits[f as usize].push(raw_text(id));
                }
            }
        };
        let changed: Vec<usize> = (0..self.files.len())
            .filter(|&f| !self.unchanged[f])
            .collect();
        let found = scan_visible(&matcher, &self.files, &texts, &changed, first.len())?;
        record(found, &mut self.visible_hits);
        let unchanged: Vec<usize> = (0..self.files.len())
            .filter(|&f| self.unchanged[f])
            .collect();
        if !unchanged.is_empty() {
            let fresh: Vec<Entry> = raw_entries().filter(|e| !known[e.raw as usize]).collect();
            if let Some(fresh) = PrivateMatcher::build(texts.clone(), fresh)? {
                let found = scan_visible(&fresh, &self.files, &texts, &unchanged, first.len())?;
                record(found, &mut self.visible_hits);
            }
        }
        let mut public = vec![false; first.len()];
        for hits in &mut self.visible_hits {
            hits.retain(|fragment| match ids.get(&**fragment) {
                Some(&id) => {
                    public[id as usize] = true;
                    true
                }
                None => false,
            });
        }
        let counts = BuildCounts {
            fragments: first.len(),
            public: public.iter().filter(|p| **p).count(),
        };
        matcher.retain(|entry| !public[entry.raw as usize]);
        Ok(((!matcher.entries.is_empty()).then_some(matcher), counts))
    }

    /// The cache of this build for `generation`.
    fn into_cache(self, generation: u64, matcher: Arc<Option<PrivateMatcher>>) -> PrivateCache {
        PrivateCache {
            generation,
            files: self
                .files
                .into_iter()
                .zip(self.texts)
                .zip(self.visible_hits)
                .map(|((file, text), visible_hits)| CachedFile {
                    file: Arc::downgrade(file),
                    text,
                    visible_hits,
                })
                .collect(),
            matcher,
        }
    }
}

impl std::fmt::Debug for PrivateMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateMatcher")
            .field("fragments", &self.entries.len())
            .field("anchors", &self.automaton.patterns_len())
            .field("automaton_bytes", &self.automaton.memory_usage())
            .finish()
    }
}

impl PrivateMatcher {
    /// The matcher of `entries` (fragments of `texts`), or none when there
    /// are none. Linear in their text but for one sort of each anchor's
    /// fragments: one hash-map pass, one automaton over at most
    /// `ANCHOR_LEN` bytes each.
    fn build(texts: Vec<Arc<FileText>>, entries: Vec<Entry>) -> Result<Option<Self>, GateError> {
        if entries.is_empty() {
            return Ok(None);
        }
        let bytes = |e: &Entry| texts[e.file as usize].text(e.index).as_bytes();
        let mut anchor_ids: HashMap<&[u8], u32> = HashMap::new();
        let mut anchors: Vec<&[u8]> = Vec::new();
        let mut keyed: Vec<(u32, Entry)> = entries
            .iter()
            .map(|e| {
                let text = bytes(e);
                let anchor = &text[..text.len().min(ANCHOR_LEN)];
                let id = *anchor_ids.entry(anchor).or_insert_with(|| {
                    anchors.push(anchor);
                    anchors.len() as u32 - 1
                });
                let entry = Entry {
                    key: key_of(text),
                    len: text.len() as u32,
                    ..*e
                };
                (id, entry)
            })
            .collect();
        drop(entries);
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&anchors)
            .map_err(|e| GateError::PrivateText {
                fragments: keyed.len(),
                message: e.to_string(),
            })?;
        // By anchor; short fragments first; by key; equal texts together.
        let long = |e: &Entry| e.len as usize >= LONG_LEN;
        keyed.sort_unstable_by(|(a, x), (b, y)| {
            a.cmp(b)
                .then(long(x).cmp(&long(y)))
                .then(x.key.cmp(&y.key))
                .then_with(|| bytes(x).cmp(bytes(y)))
        });
        let mut starts = vec![0u32; anchors.len() + 1];
        for (anchor, _) in &keyed {
            starts[*anchor as usize + 1] += 1;
        }
        for a in 0..anchors.len() {
            starts[a + 1] += starts[a];
        }
        drop(anchor_ids);
        drop(anchors);
        let mut matcher = Self {
            automaton,
            starts,
            shorts_end: Vec::new(),
            entries: keyed.into_iter().map(|(_, e)| e).collect(),
            long: hashbrown::HashTable::new(),
            texts,
        };
        matcher.index();
        Ok(Some(matcher))
    }

    /// Sets `shorts_end` and `long` from `starts` and `entries`.
    fn index(&mut self) {
        self.shorts_end.clear();
        self.long.clear();
        for (a, group) in self.starts.windows(2).enumerate() {
            let (start, end) = (group[0] as usize, group[1] as usize);
            let entries = &self.entries[start..end];
            let mut at = entries.partition_point(|e| (e.len as usize) < LONG_LEN);
            self.shorts_end.push((start + at) as u32);
            while at < entries.len() {
                let key = entries[at].key;
                let count = entries[at..].partition_point(|e| e.key == key);
                let run = LongRun {
                    key,
                    anchor: a as u32,
                    start: (start + at) as u32,
                    end: (start + at + count) as u32,
                };
                self.long
                    .insert_unique(run_hash(run.anchor, key), run, |r| {
                        run_hash(r.anchor, r.key)
                    });
                at += count;
            }
        }
    }

    /// The text of `entry`.
    fn text(&self, entry: &Entry) -> &[u8] {
        self.texts[entry.file as usize].text(entry.index).as_bytes()
    }

    /// Whether `entry` is a raw fragment (not a JSON form).
    fn is_raw(&self, entry: &Entry) -> bool {
        (entry.index as usize) < self.texts[entry.file as usize].raw.len()
    }

    /// Keeps the entries `keep` accepts, and of equal texts one.
    fn retain(&mut self, keep: impl Fn(&Entry) -> bool) {
        let mut entries = Vec::with_capacity(self.entries.len());
        let mut starts = Vec::with_capacity(self.starts.len());
        starts.push(0u32);
        for group in self.starts.windows(2) {
            let mut last: Option<&[u8]> = None;
            for entry in &self.entries[group[0] as usize..group[1] as usize] {
                let text = self.text(entry);
                if keep(entry) && last != Some(text) {
                    entries.push(*entry);
                    last = Some(text);
                }
            }
            starts.push(entries.len() as u32);
        }
        self.entries = entries;
        self.starts = starts;
        self.index();
    }

    /// The number of fragments.
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// Calls `found(start, len, entry)` for every occurrence of every
    /// fragment in `text`, overlapping ones too: with non-overlapping
    /// matches a fragment that ends inside another (`* plan` from a list
    /// item, `plan notes` from a title) would hide the second one's start,
    /// and its rest would get through.
    ///
    /// Where an anchor is found, its short fragments are compared by key
    /// and its long ones looked up by the text's key: a common anchor
    /// (`Decision` opening hundreds of private paragraphs) costs one
    /// lookup, and no fragment's text is read unless its first
    /// [`LONG_LEN`] bytes are there. (A binary search among the anchor's
    /// fragments cost a cache miss a step: 0.8 s for the 24 MB of visible
    /// text of the benchmark memex.)
    fn each_match(&self, text: &str, mut found: impl FnMut(usize, usize, &Entry)) {
        let bytes = text.as_bytes();
        for m in self.automaton.find_overlapping_iter(text) {
            let a = m.pattern().as_usize();
            let (start, end) = (self.starts[a] as usize, self.starts[a + 1] as usize);
            if start == end {
                continue;
            }
            let at = m.start();
            if m.len() < ANCHOR_LEN {
                // A fragment shorter than an anchor is its own anchor.
                for entry in &self.entries[start..end] {
                    found(at, m.len(), entry);
                }
                continue;
            }
            let rest = &bytes[at..];
            let key = key_of(rest);
            let shorts_end = self.shorts_end[a] as usize;
            for entry in &self.entries[start..shorts_end] {
                let len = entry.len as usize;
                if len <= rest.len() && key & key_mask(len - ANCHOR_LEN) == entry.key {
                    found(at, len, entry);
                }
            }
            if shorts_end == end || rest.len() < LONG_LEN {
                continue;
            }
            let anchor = a as u32;
            if let Some(run) = self.long.find(run_hash(anchor, key), |r| {
                r.anchor == anchor && r.key == key
            }) {
                for entry in &self.entries[run.start as usize..run.end as usize] {
                    if rest.starts_with(self.text(entry)) {
                        found(at, entry.len as usize, entry);
                    }
                }
            }
        }
    }

    /// Every occurrence of every fragment in `text`, as private spans.
    fn find(&self, text: &str, out: &mut Vec<Span>) {
        self.each_match(text, |start, len, _| {
            out.push(Span {
                start,
                end: start + len,
                pattern: PRIVATE_SPAN,
            });
        });
    }
}

/// Visible text beyond this many bytes is scanned on every core.
const PARALLEL_SCAN_BYTES: usize = 1 << 20;

/// The raw fragments of `matcher` that the visible text of each file
/// `files[f]`, `f` in `which` (ascending), holds: `(f, raw id)` pairs in
/// the order of `which`. Large texts are cut into one run of whole ranges
/// per core.
fn scan_visible(
    matcher: &PrivateMatcher,
    files: &[&Arc<MemexFile>],
    texts: &[Arc<FileText>],
    which: &[usize],
    fragments: usize,
) -> Result<Vec<(u32, u32)>, GateError> {
    let pieces: Vec<(u32, u32, u32)> = which
        .iter()
        .flat_map(|&f| {
            texts[f]
                .visible
                .iter()
                .map(move |&(start, end)| (f as u32, start, end))
        })
        .collect();
    let size = |piece: &(u32, u32, u32)| (piece.2 - piece.1) as usize;
    let total: usize = pieces.iter().map(size).sum();
    let scan = |pieces: &[(u32, u32, u32)]| {
        let mut stamp: Vec<u32> = vec![u32::MAX; fragments];
        let mut found: Vec<(u32, u32)> = Vec::new();
        for &(f, start, end) in pieces {
            let Some(text) = files[f as usize].text.get(start as usize..end as usize) else {
                continue;
            };
            matcher.each_match(text, |_, _, entry| {
                if matcher.is_raw(entry) && stamp[entry.raw as usize] != f {
                    stamp[entry.raw as usize] = f;
                    found.push((f, entry.raw));
                }
            });
        }
        found
    };
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if total < PARALLEL_SCAN_BYTES || cores < 2 {
        return Ok(scan(&pieces));
    }
    let per_core = total.div_ceil(cores);
    let mut runs: Vec<&[(u32, u32, u32)]> = Vec::with_capacity(cores);
    let (mut start, mut bytes) = (0, 0);
    for (i, piece) in pieces.iter().enumerate() {
        bytes += size(piece);
        if bytes >= per_core {
            runs.push(&pieces[start..=i]);
            (start, bytes) = (i + 1, 0);
        }
    }
    if start < pieces.len() {
        runs.push(&pieces[start..]);
    }
    std::thread::scope(|scope| {
        let threads: Vec<_> = runs
            .iter()
            .map(|run| {
                std::thread::Builder::new()
                    .name("foveal-privacy".into())
                    .spawn_scoped(scope, || scan(run))
            })
            .collect();
        let mut found = Vec::new();
        for (thread, run) in threads.into_iter().zip(&runs) {
            match thread {
                Ok(thread) => found.extend(thread.join().map_err(|_| {
                    GateError::Check("a scan of the visible text stopped".to_owned())
                })?),
                // No thread to be had: here, then.
                Err(_) => found.extend(scan(run)),
            }
        }
        Ok(found)
    })
}

#[derive(Debug, Default)]
struct SkillState {
    /// The load of the privacy skill last configured.
    configured: Option<Weak<Skill>>,
    /// The last state reported in the log.
    reported: Option<SecretFilter>,
}

impl Gate {
    /// A gate for objects tagged with `privacy` tags and the secret
    /// patterns `patterns` (after the defaults when `default_patterns`).
    pub fn new(
        privacy: PrivacyTags,
        patterns: &[Pattern],
        default_patterns: bool,
    ) -> Result<Self, GateError> {
        let secrets = Redactor::configured(patterns, default_patterns)?;
        let configure_args = serde_json::json!({
            "patterns": patterns
                .iter()
                .map(|p| serde_json::json!({ "name": p.name, "regex": p.regex }))
                .collect::<Vec<_>>(),
            "defaults": default_patterns,
        })
        .to_string();
        Ok(Self {
            privacy,
            secrets,
            configure_args,
            private: Mutex::new(None),
            skill: Mutex::new(SkillState::default()),
        })
    }

    /// The gate `config` asks for (`privacy.tags`, `privacy.patterns`,
    /// `privacy.default_patterns`).
    pub fn from_config(config: &Config) -> Result<Self, GateError> {
        Self::new(
            PrivacyTags::new(&config.privacy_tags),
            &config.privacy_patterns,
            config.privacy_default_patterns,
        )
    }

    /// The host's own secret filter.
    pub fn secrets(&self) -> &Redactor {
        &self.secrets
    }

    /// `body` with the text of every private object of `memex` and every
    /// secret removed. `skills` is the registry snapshot of the cycle: its
    /// privacy skill, if healthy, handles the secrets.
    ///
    /// An error means the body could not be checked and must not be sent.
    pub fn clean<'a>(
        &self,
        body: &'a str,
        memex: &MemexSnapshot,
        skills: &Snapshot,
    ) -> Result<Cleaned<'a>, GateError> {
        let matcher = self.private_matcher(memex)?;
        let mut spans: Vec<Span> = Vec::new();
        if let Some(matcher) = matcher.as_ref() {
            matcher.find(body, &mut spans);
        }
        let secret_spans = self.secrets.find(body);
        let regions = if spans.is_empty() {
            // Secrets only: already sorted and disjoint.
            secret_spans.into_iter().map(|s| (s, false)).collect()
        } else {
            spans.extend(secret_spans);
            regions(spans)
        };

        let filter = match self.ready_skill(skills) {
            Ok(slot) => match self.through_skill(body, &regions, slot) {
                Ok(cleaned) => return Ok(cleaned),
                Err(fallback) => SecretFilter::Host(fallback),
            },
            Err(fallback) => SecretFilter::Host(fallback),
        };

        // The host's own filter: every region, private or secret.
        let mut secrets: BTreeMap<String, usize> = BTreeMap::new();
        let mut private = 0usize;
        let text = replace_regions(body, &regions, |_, (span, is_private)| {
            Some(if *is_private {
                private += 1;
                PRIVATE_MARKER.to_owned()
            } else {
                let name = self.secrets.name(span.pattern);
                *secrets.entry(name.to_owned()).or_default() += 1;
                foveal_redact::marker(name)
            })
        });
        let report = Report {
            private,
            secrets: secrets.into_iter().collect(),
            filter,
            host_after_skill: 0,
        };
        self.note_state(&report.filter);
        log_redaction(&report);
        Ok(Cleaned { text, report })
    }

    /// The secrets handled by the privacy skill in `slot`, checked by the
    /// host. `regions` were found on `body` by the host.
    fn through_skill<'a>(
        &self,
        body: &'a str,
        regions: &[(Span, bool)],
        slot: &Slot,
    ) -> Result<Cleaned<'a>, Fallback> {
        // A secret right beside a private passage can lose the context its
        // pattern needs (`Bearer` was the private part) once the passage is
        // replaced: the host removes such secrets itself, before the skill.
        let mut lost: HashSet<usize> = HashSet::new();
        if regions.iter().any(|r| r.1) && regions.iter().any(|r| !r.1) {
            let private_only =
                replace_regions(body, regions, |_, r| r.1.then(|| PRIVATE_MARKER.to_owned()));
            let still: HashSet<&str> = self
                .secrets
                .find(&private_only)
                .iter()
                .map(|s| &private_only[s.start..s.end])
                .collect();
            for (i, (span, is_private)) in regions.iter().enumerate() {
                if !is_private && !still.contains(&body[span.start..span.end]) {
                    lost.insert(i);
                }
            }
        }
        let mut private = 0usize;
        let mut secrets: BTreeMap<String, usize> = BTreeMap::new();
        let mut host_after_skill = 0usize;
        // The skill gets the body with the private text already gone: it
        // never sees a private object, here either.
        let input = replace_regions(body, regions, |i, (span, is_private)| {
            if *is_private {
                private += 1;
                Some(PRIVATE_MARKER.to_owned())
            } else if lost.contains(&i) {
                let name = self.secrets.name(span.pattern);
                *secrets.entry(name.to_owned()).or_default() += 1;
                host_after_skill += 1;
                Some(foveal_redact::marker(name))
            } else {
                None
            }
        });
        let output = slot
            .call(hooks::REDACT, |redact| redact(input.as_ref().into()))
            .map_err(|error| Fallback::from_unavailable(&error, false))?
            .into_string();
        for (name, n) in marker_gain(&input, &output) {
            *secrets.entry(name).or_default() += n;
        }
        // What the skill left that the host's patterns still find goes too:
        // the secret filter is never weaker than the built-in one.
        let again = self.secrets.redact(&output);
        let text = if again.total() > 0 {
            for (name, n) in &again.counts {
                *secrets.entry((*name).to_owned()).or_default() += n;
                host_after_skill += n;
            }
            tracing::warn!(
                target: "foveal::privacy",
                left = again.total(),
                "the privacy skill left secrets the host's patterns find; the host removed them"
            );
            again.text.into_owned()
        } else {
            output
        };
        let text = if text == body {
            Cow::Borrowed(body)
        } else {
            Cow::Owned(text)
        };
        let report = Report {
            private,
            secrets: secrets.into_iter().collect(),
            filter: SecretFilter::Skill,
            host_after_skill,
        };
        self.note_state(&report.filter);
        log_redaction(&report);
        Ok(Cleaned { text, report })
    }

    /// The privacy skill, configured, if it can be used; else why not.
    fn ready_skill<'s>(&self, skills: &'s Snapshot) -> Result<&'s Slot, Fallback> {
        let slot = skills.get(SKILL).ok_or(Fallback::NotLoaded)?;
        if let Some(fallback) = static_fallback(slot) {
            return Err(fallback);
        }
        let mut state = self.skill.lock().unwrap_or_else(|e| e.into_inner());
        let this_load = slot.skill();
        if state
            .configured
            .as_ref()
            .is_some_and(|w| Weak::as_ptr(w) == Arc::as_ptr(this_load))
        {
            return Ok(slot);
        }
        let args = self.configure_args.as_str();
        match slot.call(hooks::INVOKE, |invoke| {
            invoke("configure".into(), args.into())
        }) {
            Ok(_) => {
                state.configured = Some(Arc::downgrade(this_load));
                tracing::info!(
                    target: "foveal::privacy",
                    path = %this_load.path().display(),
                    patterns = self.secrets.names().count(),
                    "privacy skill configured with the secret patterns"
                );
                Ok(slot)
            }
            Err(error) => Err(Fallback::from_unavailable(&error, true)),
        }
    }

    /// Logs a change of the secret filter in use: a warning when the
    /// built-in filter takes over (and why), a note when the skill is back.
    fn note_state(&self, filter: &SecretFilter) {
        let mut state = self.skill.lock().unwrap_or_else(|e| e.into_inner());
        if state.reported.as_ref() == Some(filter) {
            return;
        }
        match filter {
            SecretFilter::Host(fallback) => tracing::warn!(
                target: "foveal::privacy",
                reason = %fallback,
                "{}",
                fallback_notice(fallback)
            ),
            SecretFilter::Skill => tracing::info!(
                target: "foveal::privacy",
                "the privacy skill's redact hook checks request bodies"
            ),
        }
        state.reported = Some(filter.clone());
    }

    /// The matcher of the private text of `memex`, from cache when the
    /// generation and its files are those last seen.
    ///
    /// Otherwise it is built again, reusing the work of every file whose
    /// version did not change: its fragments, where its visible text is,
    /// and which fragments that text holds. The work is linear in the
    /// changed files plus the private text, and, when an edit brings new
    /// private fragments, one scan of the other files' visible text for
    /// those alone.
    fn private_matcher(
        &self,
        memex: &MemexSnapshot,
    ) -> Result<Arc<Option<PrivateMatcher>>, GateError> {
        let mut cache = self.private.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cached) = cache.as_ref()
            && cached.generation == memex.generation()
            && cached.files.len() == memex.files().count()
            && cached
                .files
                .iter()
                .zip(memex.files())
                .all(|(cached, file)| Weak::as_ptr(&cached.file) == Arc::as_ptr(file))
        {
            return Ok(Arc::clone(&cached.matcher));
        }
        let mut build = Build::new(cache.take(), memex, &self.privacy);
        let (matcher, counts) = build.run()?;
        tracing::debug!(
            target: "foveal::privacy",
            generation = memex.generation(),
            fragments = counts.fragments,
            public = counts.public,
            searched = matcher.as_ref().map_or(0, PrivateMatcher::len),
            bytes = matcher.as_ref().map_or(0, |m| m.automaton.memory_usage()),
            "private-text matcher built"
        );
        let matcher = Arc::new(matcher);
        *cache = Some(build.into_cache(memex.generation(), Arc::clone(&matcher)));
        Ok(matcher)
    }
}

/// The fragments of private text in `file`, before the visible text is
/// checked: for each private object its title, its non-blank body lines
/// and its property values (not `:EMBEDDING:`), trimmed, each once; then
/// their JSON forms that differ from them. The gate searches for those that
/// no visible object's text contains.
pub fn private_fragments(file: &MemexFile, privacy: &PrivacyTags) -> Vec<Box<str>> {
    let text = file_text(file, privacy);
    text.raw
        .iter()
        .map(|fragment| Box::from(&**fragment))
        .chain(text.json.iter().map(|(_, form)| form.clone()))
        .collect()
}

/// The private fragments of `file` and the ranges of its visible text.
fn file_text<'f>(file: &'f MemexFile, privacy: &PrivacyTags) -> FileText {
    if privacy.is_empty() {
        return FileText::default();
    }
    let mask = privacy.private_mask(file);
    let mut seen: HashSet<&'f str> = HashSet::new();
    let mut raw: Vec<Arc<str>> = Vec::new();
    let mut json: Vec<(u32, Box<str>)> = Vec::new();
    let mut push = |text: &'f str| {
        let text = text.trim();
        if text.chars().count() < MIN_FRAGMENT_CHARS
            || !text.chars().any(char::is_alphanumeric)
            || !seen.insert(text)
        {
            return;
        }
        let index = raw.len() as u32;
        // Most text reads the same inside a JSON string.
        if text
            .bytes()
            .any(|b| b < 0x20 || b == b'"' || b == b'\\' || !b.is_ascii())
        {
            let escaped = json_escape(text, false);
            let ascii = json_escape(text, true);
            if ascii != escaped {
                json.push((index, ascii.into()));
            }
            if escaped != text {
                json.push((index, escaped.into()));
            }
        }
        raw.push(text.into());
    };
    let mut visible: Vec<(u32, u32)> = Vec::new();
    let mut show = |start: u32, end: u32| {
        if start >= end {
            return;
        }
        match visible.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => visible.push((start, end)),
        }
    };
    for (object, private) in file.objects.iter().zip(&mask) {
        let h = &object.headline;
        if *private {
            push(file.slice(&h.title));
            for line in file.slice(&h.body).lines() {
                push(line);
            }
            for property in &h.properties {
                if !file.slice(&property.key).eq_ignore_ascii_case("EMBEDDING") {
                    push(file.slice(&property.value));
                }
            }
        } else {
            let mut at = h.own.start;
            for property in &h.properties {
                if file.slice(&property.key).eq_ignore_ascii_case("EMBEDDING") {
                    show(at, property.value.start);
                    at = property.value.end;
                }
            }
            show(at, h.own.end);
        }
    }
    FileText {
        raw: raw.into(),
        json: json.into(),
        visible: visible.into(),
    }
}

/// `text` as it reads between the quotes of a JSON string; with `ascii`,
/// non-ASCII characters as `\uXXXX` (UTF-16, lowercase hex).
fn json_escape(text: &str, ascii: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ascii && !c.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// Merges overlapping private and secret spans into disjoint regions,
/// sorted; a region is private when any private span is part of it (it is
/// then replaced whole by the private marker).
fn regions(mut spans: Vec<Span>) -> Vec<(Span, bool)> {
    spans.sort_unstable_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then(b.end.cmp(&a.end))
            .then(a.pattern.cmp(&b.pattern))
    });
    let mut out: Vec<(Span, bool)> = Vec::with_capacity(spans.len());
    for span in spans {
        let private = span.pattern == PRIVATE_SPAN;
        match out.last_mut() {
            Some((last, is_private)) if span.start < last.end => {
                last.end = last.end.max(span.end);
                *is_private |= private;
            }
            _ => out.push((span, private)),
        }
    }
    out
}

/// `text` with the regions for which `label` (given each region's index)
/// answers replaced by its answer. Linear in the text.
fn replace_regions<'t>(
    text: &'t str,
    regions: &[(Span, bool)],
    mut label: impl FnMut(usize, &(Span, bool)) -> Option<String>,
) -> Cow<'t, str> {
    let mut out: Option<String> = None;
    let mut at = 0;
    for (i, region) in regions.iter().enumerate() {
        if let Some(marker) = label(i, region) {
            let buffer = out.get_or_insert_with(|| String::with_capacity(text.len()));
            buffer.push_str(&text[at..region.0.start]);
            buffer.push_str(&marker);
            at = region.0.end;
        }
    }
    match out {
        Some(mut buffer) => {
            buffer.push_str(&text[at..]);
            Cow::Owned(buffer)
        }
        None => Cow::Borrowed(text),
    }
}

/// The markers `output` has beyond those of `input`, by name: what a
/// redactor that only returns text removed.
fn marker_gain(input: &str, output: &str) -> Vec<(String, usize)> {
    let before: HashMap<String, usize> = foveal_redact::count_markers(input).into_iter().collect();
    foveal_redact::count_markers(output)
        .into_iter()
        .filter_map(|(name, n)| {
            let gained = n.saturating_sub(before.get(&name).copied().unwrap_or(0));
            (gained > 0 && name != foveal_redact::PRIVATE).then_some((name, gained))
        })
        .collect()
}

fn log_redaction(report: &Report) {
    if report.total() == 0 {
        return;
    }
    tracing::warn!(
        target: "foveal::privacy",
        private = report.private,
        secrets = %report.secrets_summary(),
        filter = %report.filter,
        "request body redacted before leaving the process"
    );
}

#[cfg(test)]
mod tests;
