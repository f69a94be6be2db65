//! # foveal-gate: the last door
//!
//! Every request body is checked here before it leaves the process
//! (design principle 6, seed 000 `context-privacy-filtered-p`), and every
//! log line the host writes passes the same check ([`logs`]).
//!
//! Private objects never reach a skill — the memex view leaves them out —
//! but private text can still reach a request another way: a user message
//! quoting a diary entry, a tool that read an Org file, a log line. And
//! secrets (API keys, tokens, private keys, passwords) can be anywhere. The
//! [`Gate`] removes both from the final body:
//!
//! 1. **Private text**, always by the host: text that only private objects
//!    hold, in any form a person would recognise. For each memex
//!    generation the gate gathers the text of every private object (a
//!    privacy tag on it, an ancestor or its file,
//!    [`PrivacyTags::private_mask`]) as runs of words (`egress/words.rs`,
//!    `egress/private.rs`): every run of [`SHINGLE`] consecutive words of a title,
//!    property value (not `:EMBEDDING:`) or body, and every whole line of
//!    fewer words ([`MIN_PHRASE_BYTES`] bytes of letters and digits at
//!    least), and numbers written in groups joined — but only those that
//!    protect something: a line of one word of letters (`Health`), Org's
//!    own syntax (`:PROPERTIES:`) and a date or time alone (`2025-01-14`,
//!    `** 2025-01-14 Tuesday`) protect nothing, since a common word is not
//!    a secret because a private headline is titled with it; a date is
//!    private with the rest of its line. Words are compared
//!    folded — compatibility decomposition, accents and case away — with
//!    spacing, line breaks, punctuation, invisible characters, list
//!    bullets and counters, checkboxes, Org markup and common HTML tags out
//!    of the way, and JSON escapes, HTML references and percent-encoding
//!    read as what they stand for. So a private line quoted in part (five
//!    words or more), in another case, with other spacing, without its
//!    bullet or checkbox, re-wrapped or hyphenated over two lines, inside a
//!    JSON string, a URL or HTML, or in another normal form is found. A run that the text of any visible object of the same
//!    snapshot also holds (in any file) is not private and is left alone:
//!    a skill sees that text anyway, and a private headline `Plan` must not
//!    redact a visible `Plan` from the outline. Every other run is removed
//!    wherever it appears; overlapping runs become one
//!    `[REDACTED private]`. The scan runs *before* any skill sees the body.
//!
//!    The gate keeps numbers (64-bit keys of runs), never the private text.
//!    The matcher is cached by memex generation and file identity. Its
//!    full build is linear in the memex: for each file version the gate
//!    keeps its private keys, where its visible text is, and which keys
//!    that text holds. After an edit the matcher is derived from the last
//!    full build in time linear in the changed files (`private::delta`):
//!    it errs only towards redacting, never the other way. A body
//!    costs one pass that cuts it into words and about one cache-resident
//!    Bloom-filter probe per word and run length (measured numbers in
//!    `docs/security.md`; `cargo bench -p foveal --bench egress`).
//! 2. **Secrets**, by the `privacy` skill's `redact` hook when it is loaded
//!    and healthy, otherwise by the host with the same patterns and the same
//!    code ([`foveal_redact`]): **fail closed**. The host configures the
//!    skill with the configured patterns (`invoke("configure", …)`) the
//!    first time it sees a given load of it, and again after every reload.
//!    Even when the skill runs, the host checks its result: a secret the
//!    host's patterns find in the body (or still find in the skill's
//!    output) is removed by the host, so the secret filter is never weaker
//!    than the built-in one.
//! 3. **Writes** ([`Gate::check_write`]): text the gate would change is
//!    never written into the memex, where a visible object would hold it
//!    and so make it public. The host asks before every write the model
//!    or a skill asks for, and a refused write writes nothing
//!    ([`WRITE_REFUSED`]).
//!
//! Private passages and secrets are found on the original body and their
//! union is replaced, so a private word inside a key (a title `proj`
//! inside `sk-proj-…`) cannot split the key and let its tail through.
//!
//! What was removed is reported by kind — `private` and each pattern name,
//! with counts — in the [`Report`] and in a warning under the log target
//! `foveal::privacy`; never the text itself. When the built-in filter stands
//! in for the skill, the gate says so once per change of state (a warning
//! naming why), and `foveal skill-list` says so too ([`skill_fallback`]).
//!
//! ## What it may not do
//!
//! The gate holds numbers, never private text, and it never sends,
//! writes or logs a body itself. It knows skills only through [`Skills`]
//! and [`PrivacySkill`] — the host's registry provides the privacy skill
//! (its `redact` and `invoke("configure")` hooks) — so it cannot call any
//! other skill, and a missing or failing skill makes it fail closed to the
//! host's own filter. It depends on `foveal-memex` (what is private),
//! `foveal-redact` (the secret patterns) and `foveal-provider`'s request
//! types (what a request holds), and on nothing of the host.
//!
//! # Example
//!
//! ```
//! use foveal_gate::{Gate, NoSkills, SecretFilter};
//! use foveal_memex::{Memex, privacy::PrivacyTags};
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
//! let skills = NoSkills;
//! // The title `Diary` is private, but a visible body holds it too: it stays.
//! let body = "Diary: Met Ann at the harbour. My key is AKIAIOSFODNN7EXAMPLE.";
//! let cleaned = gate.clean(body, &memex.snapshot(), &skills).unwrap();
//! assert_eq!(cleaned.text, "Diary: [REDACTED private]. My key is [REDACTED aws-access-key-id].");
//! assert_eq!(cleaned.report.private, 1);
//! assert_eq!(cleaned.report.secrets, [("aws-access-key-id".to_owned(), 1)]);
//! assert!(matches!(cleaned.report.filter, SecretFilter::Host(_)));
//! ```

pub mod logs;
mod private;
mod skills;
mod words;
mod writes;

use std::any::Any;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, Weak};

use foveal_redact::{Pattern, PatternError, Redactor, Span};

use foveal_memex::privacy::PrivacyTags;
use foveal_memex::snapshot::MemexSnapshot;
use foveal_provider::{ChatRequest, Message, ToolChoice};

pub use skills::{NoSkills, PrivacyConfig, PrivacySkill, Skills};
pub use writes::{WRITE_REFUSED, WriteRefused};

/// The skill that redacts secrets.
pub const SKILL: &str = "privacy";

/// What replaces a passage of private text.
pub const PRIVATE_MARKER: &str = "[REDACTED private]";

pub use private::{FUZZY, MIN_JOINED_BYTES, MIN_PHRASE_BYTES, SHINGLE};
use private::{Matcher, PRIVATE_SPAN, PrivateCache, Runs, Update};

/// Why the gate could not be built or could not check a body. On any of
/// these the body must not be sent.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// A secret pattern is invalid.
    #[error("privacy patterns: {0}")]
    Pattern(#[from] PatternError),
}

/// How the gate reads a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Form {
    /// Any text: a run of private words is found wherever it is, across
    /// any line.
    Plain,
    /// An Org outline the host or a skill rendered from visible objects
    /// (the system prompt and the context): a run does not continue into
    /// a headline line. An outline puts a headline after every body, and a
    /// run across the two is no quote — only a chance to look like one.
    /// What people and models write (messages, replies, tool output) is
    /// read [`Plain`](Self::Plain): a quote as `* ` bullets is still found.
    Outline,
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
    /// See [`Gate::derive_matcher_from`].
    delta_from: std::sync::atomic::AtomicUsize,
    /// See [`Gate::with_index`].
    index: Option<Arc<Index>>,
    skill: Mutex<SkillState>,
}

/// Where a gate keeps its matcher between processes, and what it did
/// with it.
#[derive(Debug)]
struct Index {
    path: std::path::PathBuf,
    /// Full builds of at least this many keys are written.
    from_keys: std::sync::atomic::AtomicUsize,
    /// Whether the matcher in use was read from it.
    read: std::sync::atomic::AtomicBool,
    /// A failed write was said (once is enough).
    warned: std::sync::atomic::AtomicBool,
    /// The last write's bytes, or why it failed.
    written: Mutex<Option<Result<u64, String>>>,
    /// Whether a build's sets are written on a thread of their own
    /// ([`Gate::write_index_in_background`]).
    background: std::sync::atomic::AtomicBool,
    /// The newest write waiting for the writer thread.
    pending: Mutex<Option<PendingWrite>>,
    /// Whether the writer thread runs.
    writing: std::sync::atomic::AtomicBool,
}

/// What [`Gate::index`] found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexState {
    /// The file was of this memex: read.
    Current,
    /// The matcher was built and written.
    Written,
}

impl IndexState {
    /// Its name, as `foveal memex index --json` gives it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Current => "current",
            Self::Written => "written",
        }
    }
}

/// What [`Gate::index`] reports.
#[derive(Debug, Clone)]
pub struct IndexReport {
    /// The file.
    pub path: std::path::PathBuf,
    /// Read or written.
    pub state: IndexState,
    /// The keys the matcher looks for.
    pub keys: usize,
    /// The file's size.
    pub bytes: u64,
}

/// Full builds of fewer keys are not written to the private-text index:
/// they take milliseconds.
const INDEX_FROM_KEYS: usize = 1 << 18;

#[derive(Debug, Default)]
struct SkillState {
    /// The load of the privacy skill last configured.
    configured: Option<Weak<dyn Any + Send + Sync>>,
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
            delta_from: std::sync::atomic::AtomicUsize::new(private::DELTA_FROM_KEYS),
            index: None,
            skill: Mutex::new(SkillState::default()),
        })
    }

    /// This gate, keeping its matcher's sets in the file at `path`
    /// between processes (`memex.index`; see `docs/security.md`, "The
    /// private-text index"): a process whose memex is the one the file
    /// was built from reads them instead of building them, and a full
    /// build of a large memex writes them.
    #[must_use]
    pub fn with_index(mut self, path: Option<std::path::PathBuf>) -> Self {
        self.index = path.map(|path| {
            Arc::new(Index {
                path,
                from_keys: std::sync::atomic::AtomicUsize::new(INDEX_FROM_KEYS),
                read: std::sync::atomic::AtomicBool::new(false),
                warned: std::sync::atomic::AtomicBool::new(false),
                written: Mutex::new(None),
                background: std::sync::atomic::AtomicBool::new(false),
                pending: Mutex::new(None),
                writing: std::sync::atomic::AtomicBool::new(false),
            })
        });
        self
    }

    /// Writes the index after a full build on a thread of its own, so the
    /// turn that built does not wait for the write (a host does; a
    /// command, which may end right after, writes before it goes on).
    pub fn write_index_in_background(&self) {
        if let Some(index) = &self.index {
            index
                .background
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Makes the on-disk index of `memex` current (`foveal memex index`):
    /// reads it when it is of this memex, builds and writes it otherwise,
    /// whatever the memex's size. An error says why it could not be
    /// written, or that this gate keeps none.
    pub fn index(&self, memex: &MemexSnapshot) -> Result<IndexReport, String> {
        let Some(index) = &self.index else {
            return Err(
                "this configuration keeps no private-text index (`memex.index = false`)".to_owned(),
            );
        };
        index
            .from_keys
            .store(0, std::sync::atomic::Ordering::Relaxed);
        *index.written.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let matcher = crate::logs::unredacted(|| self.private_matcher(memex));
        let keys = (*matcher).as_ref().map_or(0, Matcher::len);
        let state = if self.matcher_from_index() {
            IndexState::Current
        } else {
            match index
                .written
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
            {
                Some(Ok(_)) => IndexState::Written,
                Some(Err(e)) => return Err(e),
                None => {
                    return Err(
                        "the matcher was not built as a whole (this gate already had one)"
                            .to_owned(),
                    );
                }
            }
        };
        let bytes = std::fs::metadata(&index.path)
            .map_err(|e| format!("{}: {e}", index.path.display()))?
            .len();
        Ok(IndexReport {
            path: index.path.clone(),
            state,
            keys,
            bytes,
        })
    }

    /// Whether the index file holds the matcher of `memex`, by its
    /// header (whether the rest is whole is known only once read): the
    /// matcher would be read, not built.
    pub fn index_is_of(&self, memex: &MemexSnapshot) -> bool {
        self.index.as_ref().is_some_and(|index| {
            let digest = private::stored::digest(memex, &self.privacy);
            private::stored::is_of(&index.path, &digest)
        })
    }

    /// Whether the private-text matcher in use was read from the index
    /// ([`Self::with_index`]) rather than built.
    pub fn matcher_from_index(&self) -> bool {
        self.index
            .as_ref()
            .is_some_and(|i| i.read.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Writes full builds of at least `keys` keys to the index (tests use
    /// 0 to write a small memex's).
    #[doc(hidden)]
    pub fn index_matcher_from(&self, keys: usize) {
        if let Some(index) = &self.index {
            index
                .from_keys
                .store(keys, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The gate `config` asks for (`privacy.tags`, `privacy.patterns`,
    /// `privacy.default_patterns`).
    pub fn from_config(config: &impl PrivacyConfig) -> Result<Self, GateError> {
        Ok(Self::new(
            PrivacyTags::new(config.privacy_tags()),
            config.privacy_patterns(),
            config.privacy_default_patterns(),
        )?
        .with_index(config.privacy_index()))
    }

    /// The host's own secret filter.
    pub fn secrets(&self) -> &Redactor {
        &self.secrets
    }

    /// `text` without private text and secrets, by the host's own filter
    /// alone and without a word in the log: for log lines
    /// ([`crate::logs::set_redactor`]). `None` when nothing was removed.
    pub fn clean_quietly(&self, text: &str, memex: &MemexSnapshot) -> Option<String> {
        let matcher = crate::logs::unredacted(|| self.private_matcher(memex));
        let mut spans: Vec<Span> = Vec::new();
        if let Some(matcher) = matcher.as_ref() {
            matcher.find(text, false, &mut spans);
        }
        spans.extend(self.secrets.find(text));
        if spans.is_empty() {
            return None;
        }
        let regions = regions(spans);
        let cleaned = replace_regions(text, &regions, |_, (span, is_private)| {
            Some(if *is_private {
                PRIVATE_MARKER.to_owned()
            } else {
                foveal_redact::marker(self.secrets.name(span.pattern))
            })
        });
        Some(cleaned.into_owned())
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
        skills: &(impl Skills + ?Sized),
    ) -> Result<Cleaned<'a>, GateError> {
        self.clean_as(body, Form::Plain, memex, skills)
    }

    /// [`clean`](Self::clean), reading `body` as `form` says.
    pub fn clean_as<'a>(
        &self,
        body: &'a str,
        form: Form,
        memex: &MemexSnapshot,
        skills: &(impl Skills + ?Sized),
    ) -> Result<Cleaned<'a>, GateError> {
        crate::logs::unredacted(|| self.clean_inner(body, form, memex, skills))
    }

    fn clean_inner<'a>(
        &self,
        body: &'a str,
        form: Form,
        memex: &MemexSnapshot,
        skills: &(impl Skills + ?Sized),
    ) -> Result<Cleaned<'a>, GateError> {
        let matcher = self.private_matcher(memex);
        let mut spans: Vec<Span> = Vec::new();
        if let Some(matcher) = matcher.as_ref() {
            matcher.find(body, form == Form::Outline, &mut spans);
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
            Ok(skill) => match self.through_skill(body, &regions, skill) {
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
        skill: &dyn PrivacySkill,
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
        let output = skill.redact(input.clone().into_owned())?;
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
    fn ready_skill<'s>(
        &self,
        skills: &'s (impl Skills + ?Sized),
    ) -> Result<&'s dyn PrivacySkill, Fallback> {
        let skill = skills.privacy_skill()?;
        let mut state = self.skill.lock().unwrap_or_else(|e| e.into_inner());
        let this_load = skill.load();
        // A weak reference keeps the load's allocation, so a later load
        // can never be mistaken for it by its address.
        if state
            .configured
            .as_ref()
            .is_some_and(|w| std::ptr::addr_eq(Weak::as_ptr(w), Arc::as_ptr(&this_load)))
        {
            return Ok(skill);
        }
        match skill.configure(self.configure_args.clone()) {
            Ok(()) => {
                state.configured = Some(Arc::downgrade(&this_load));
                tracing::info!(
                    target: "foveal::privacy",
                    path = %skill.path().display(),
                    patterns = self.secrets.names().count(),
                    "privacy skill configured with the secret patterns"
                );
                Ok(skill)
            }
            Err(fallback) => Err(fallback),
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

    /// How many private keys the matcher last built holds, and the bytes
    /// it takes (for benchmarks); zeros before the first build.
    pub fn matcher_size(&self) -> (usize, usize) {
        let cache = self.private.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .as_ref()
            .and_then(|cache| (*cache.matcher).as_ref().map(|m| (m.len(), m.memory())))
            .unwrap_or_default()
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
    fn private_matcher(&self, memex: &MemexSnapshot) -> Arc<Option<Matcher>> {
        let mut cache = self.private.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cached) = cache.as_ref()
            && cached.is_for(memex)
        {
            return Arc::clone(&cached.matcher);
        }
        // The first matcher of this process: from the index when it is of
        // this memex.
        let mut digest = None;
        if cache.is_none()
            && let Some(index) = &self.index
            && index.path.exists()
        {
            let started = std::time::Instant::now();
            let of_memex = private::stored::digest(memex, &self.privacy);
            match private::stored::load(&index.path, &of_memex) {
                Ok(Some(sets)) => {
                    let built = PrivateCache::stored(memex, sets);
                    let matcher = Arc::clone(&built.matcher);
                    index.read.store(true, std::sync::atomic::Ordering::Relaxed);
                    tracing::debug!(
                        target: "foveal::privacy",
                        generation = memex.generation(),
                        searched = (*matcher).as_ref().map_or(0, Matcher::len),
                        bytes = (*matcher).as_ref().map_or(0, Matcher::memory),
                        ms = started.elapsed().as_secs_f64() * 1e3,
                        "private-text matcher read from the index"
                    );
                    *cache = Some(built);
                    return matcher;
                }
                Ok(None) => tracing::debug!(
                    target: "foveal::privacy",
                    "the private-text index is of another memex or configuration: building"
                ),
                Err(e) => {
                    tracing::warn!(
                        target: "foveal::index",
                        "the private-text index {} is not usable ({e}): building the matcher again",
                        index.path.display()
                    );
                    // Not read again by every start (a small memex's
                    // build does not write one over it).
                    let _ = std::fs::remove_file(&index.path);
                }
            }
            digest = Some(of_memex);
        }
        let started = std::time::Instant::now();
        let (built, update) = private::update(
            cache.take(),
            memex,
            &self.privacy,
            self.delta_from.load(std::sync::atomic::Ordering::Relaxed),
        );
        let matcher = Arc::clone(&built.matcher);
        let searched = (*matcher).as_ref().map_or(0, Matcher::len);
        let bytes = (*matcher).as_ref().map_or(0, Matcher::memory);
        let ms = started.elapsed().as_secs_f64() * 1e3;
        match update {
            Update::Full(counts) => tracing::debug!(
                target: "foveal::privacy",
                generation = memex.generation(),
                keys = counts.keys,
                public = counts.public,
                searched,
                bytes,
                ms,
                "private-text matcher built"
            ),
            Update::Derived {
                changed,
                added,
                removed,
            } => tracing::debug!(
                target: "foveal::privacy",
                generation = memex.generation(),
                changed,
                added,
                removed,
                searched,
                bytes,
                ms,
                "private-text matcher derived from the last full build"
            ),
        }
        let full = self.to_index(&built, update);
        *cache = Some(built);
        if let Some(index) = &self.index {
            index
                .read
                .store(false, std::sync::atomic::Ordering::Relaxed);
        }
        drop(cache);
        self.write_full(memex, digest, full);
        matcher
    }

    /// The sets of `built` to write to the index: those of a full build
    /// large enough.
    fn to_index(&self, built: &PrivateCache, update: Update) -> Option<Arc<private::Sets>> {
        match update {
            Update::Full(counts) => built.full_sets().filter(|_| {
                self.index.as_ref().is_some_and(|index| {
                    counts.keys >= index.from_keys.load(std::sync::atomic::Ordering::Relaxed)
                })
            }),
            Update::Derived { .. } => None,
        }
    }

    /// Writes `sets`, a full build of `memex`, to the index (on the
    /// writer thread when [`Self::write_index_in_background`]).
    fn write_full(
        &self,
        memex: &MemexSnapshot,
        digest: Option<private::stored::Digest>,
        sets: Option<Arc<private::Sets>>,
    ) {
        if let (Some(sets), Some(index)) = (sets, &self.index) {
            if index.background.load(std::sync::atomic::Ordering::Relaxed) {
                write_in_background(index, &self.privacy, memex, digest, sets);
            } else {
                write_index(index, &self.privacy, memex, digest, &sets);
            }
        }
    }

    /// Whether the matcher in use was derived after an edit rather than
    /// built in full: it may redact a run that new private text brings
    /// and only an unchanged file's visible text holds ([`Self::heal`]).
    pub fn matcher_is_derived(&self) -> bool {
        let cache = self.private.lock().unwrap_or_else(|e| e.into_inner());
        cache.as_ref().is_some_and(PrivateCache::is_derived)
    }

    /// Builds the matcher of `memex` in full beside the one derived after
    /// edits, outside the lock (turns go on with the derived one), reusing
    /// every file version's work, and puts it in its place when the memex
    /// has not moved on meanwhile: what the derivation redacted too much
    /// is visible again, later edits derive from this build, and the index
    /// is written. A host does this once its memex has been quiet for a
    /// while. Returns whether it did.
    pub fn heal(&self, memex: &MemexSnapshot) -> bool {
        crate::logs::unredacted(|| {
            let _ = self.private_matcher(memex);
            let work = {
                let cache = self.private.lock().unwrap_or_else(|e| e.into_inner());
                match cache.as_ref() {
                    Some(cache) if cache.is_for(memex) && cache.is_derived() => cache.work(),
                    _ => return false,
                }
            };
            let started = std::time::Instant::now();
            let (built, update) = private::full(work, memex, &self.privacy);
            let full = self.to_index(&built, update);
            let mut cache = self.private.lock().unwrap_or_else(|e| e.into_inner());
            if !cache.as_ref().is_some_and(|c| c.is_for(memex)) {
                return false;
            }
            *cache = Some(built);
            drop(cache);
            tracing::debug!(
                target: "foveal::privacy",
                generation = memex.generation(),
                ms = started.elapsed().as_secs_f64() * 1e3,
                "private-text matcher built in full in place of the derived one"
            );
            self.write_full(memex, None, full);
            true
        })
    }

    /// Reads (from the index) or builds the private-text matcher of
    /// `memex` now, unless one was made already (for any snapshot: a turn
    /// that edited the memex first has the matcher it needs), and nothing
    /// more: a command does on a thread of its own while it starts, so
    /// that its turn finds the matcher ready, or waits for this read
    /// (never making it twice).
    pub fn matcher_now(&self, memex: &MemexSnapshot) {
        if self
            .private
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
        {
            return;
        }
        crate::logs::unredacted(|| {
            let _ = self.private_matcher(memex);
        });
    }

    /// Builds the private-text matcher of `memex` now (a host does at its
    /// start, so that its first turn does not wait for it). When it was
    /// read from the index, the full build a later edit derives from is
    /// then made here, outside the lock: turns meanwhile use the index's.
    pub fn prepare(&self, memex: &MemexSnapshot) {
        crate::logs::unredacted(|| {
            let _ = self.private_matcher(memex);
            let stored = |cache: &Option<PrivateCache>| {
                cache
                    .as_ref()
                    .filter(|c| c.is_stored() && c.is_for(memex))
                    .map(PrivateCache::sets)
            };
            let Some(read) = stored(&self.private.lock().unwrap_or_else(|e| e.into_inner())) else {
                return;
            };
            let started = std::time::Instant::now();
            let (built, _) = private::update(
                None,
                memex,
                &self.privacy,
                self.delta_from.load(std::sync::atomic::Ordering::Relaxed),
            );
            // The index's sets are those this build makes, or the index
            // is of another program than its digest says: said, and
            // written again from the build.
            let full = built.full_sets();
            let agrees = full.as_ref().is_some_and(|sets| sets.same_keys(&read));
            let rewrite = full.filter(|_| !agrees);
            let mut cache = self.private.lock().unwrap_or_else(|e| e.into_inner());
            if stored(&cache).is_some() {
                *cache = Some(built);
                tracing::debug!(
                    target: "foveal::privacy",
                    generation = memex.generation(),
                    agrees,
                    ms = started.elapsed().as_secs_f64() * 1e3,
                    "private-text matcher's full build made beside the index's"
                );
            }
            drop(cache);
            if !agrees && let Some(index) = &self.index {
                tracing::warn!(
                    target: "foveal::index",
                    "the private-text index {} did not hold what a build of the same memex makes: the build's matcher is used, and the index written again",
                    index.path.display()
                );
                match rewrite {
                    Some(sets) => write_index(index, &self.privacy, memex, None, &sets),
                    None => {
                        let _ = std::fs::remove_file(&index.path);
                    }
                }
            }
        });
    }

    /// Derives the private-text matcher after an edit from the last full
    /// build once that build holds at least `keys` keys (tests use 0 to
    /// take that path on a small memex).
    #[doc(hidden)]
    pub fn derive_matcher_from(&self, keys: usize) {
        self.delta_from
            .store(keys, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A write of the index waiting for the writer.
struct PendingWrite {
    memex: MemexSnapshot,
    digest: Option<private::stored::Digest>,
    sets: Arc<private::Sets>,
}

impl std::fmt::Debug for PendingWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingWrite")
            .field("generation", &self.memex.generation())
            .finish_non_exhaustive()
    }
}

/// Hands the sets of a full build of `memex` to the index's one writer
/// thread, starting it when none runs: a build that comes while it
/// writes replaces any write still waiting (the newest wins), so builds
/// in a row never pile up threads, copies of the memex or staging files.
fn write_in_background(
    index: &Arc<Index>,
    privacy: &PrivacyTags,
    memex: &MemexSnapshot,
    digest: Option<private::stored::Digest>,
    sets: Arc<private::Sets>,
) {
    use std::sync::atomic::Ordering::SeqCst;
    *index.pending.lock().unwrap_or_else(|e| e.into_inner()) = Some(PendingWrite {
        memex: memex.clone(),
        digest,
        sets,
    });
    if index.writing.swap(true, SeqCst) {
        return;
    }
    let (writing, privacy) = (Arc::clone(index), privacy.clone());
    let writer = move || {
        let index = writing;
        crate::logs::unredacted(|| {
            loop {
                let next = index
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take();
                match next {
                    Some(job) => write_index(&index, &privacy, &job.memex, job.digest, &job.sets),
                    None => {
                        index.writing.store(false, SeqCst);
                        // A write handed over between the take and the
                        // store: this thread writes it, unless another
                        // writer started for it.
                        let waiting = index
                            .pending
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .is_some();
                        if !waiting || index.writing.swap(true, SeqCst) {
                            return;
                        }
                    }
                }
            }
        });
    };
    if let Err(error) = std::thread::Builder::new()
        .name("foveal-index".into())
        .spawn(writer)
    {
        index.writing.store(false, SeqCst);
        tracing::warn!(target: "foveal::index", "the private-text index is not written: no thread for it ({error})");
    }
}

/// Writes the sets of a full build of `memex` to `index`.
fn write_index(
    index: &Index,
    privacy: &PrivacyTags,
    memex: &MemexSnapshot,
    digest: Option<private::stored::Digest>,
    sets: &private::Sets,
) {
    let started = std::time::Instant::now();
    let digest = digest.unwrap_or_else(|| private::stored::digest(memex, privacy));
    let saved = private::stored::save(&index.path, &digest, sets);
    *index.written.lock().unwrap_or_else(|e| e.into_inner()) = Some(
        saved
            .as_ref()
            .copied()
            .map_err(|e| format!("could not write {}: {e}", index.path.display())),
    );
    match saved {
        Ok(bytes) => tracing::debug!(
            target: "foveal::privacy",
            bytes,
            ms = started.elapsed().as_secs_f64() * 1e3,
            "private-text matcher written to the index"
        ),
        Err(e) => {
            if !index
                .warned
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(
                    target: "foveal::index",
                    "could not write the private-text index {}: {e} (the next start builds the matcher again)",
                    index.path.display()
                );
            }
        }
    }
}

/// What the last check of whole requests made of each string it saw, for
/// one memex generation and one registry generation: a request repeats
/// most of the last one (the system message, the history, the tools), so
/// each string is checked once. Strings are recognised by a hash of their
/// content and then compared byte for byte, so a string made to collide
/// with a clean one is still checked.
#[derive(Debug, Default)]
pub struct RequestMemo {
    generations: Option<(u64, u64)>,
    seen: HashMap<u64, (Arc<str>, Option<String>, usize)>,
}

impl RequestMemo {
    /// Strings remembered at most.
    const CAPACITY: usize = 256;
}

/// What the last check of a request removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestCheck {
    /// Strings of the request it changed.
    pub strings: usize,
    /// Passages it removed, private or secret.
    pub removed: usize,
}

impl Gate {
    /// The last check of a request, as it will be sent: every string of
    /// it — each message's content, each tool call's id, name and
    /// arguments, each offered tool's name, description and schema (its
    /// keys and string values), the model's name — passes the gate. The
    /// sections were gated before and after the budget; this is the check
    /// of the whole, which also covers what never was a section (the tool
    /// definitions skills declare) and what joining sections made.
    pub fn check_request(
        &self,
        request: &mut ChatRequest,
        memex: &MemexSnapshot,
        skills: &(impl Skills + ?Sized),
        memo: &mut RequestMemo,
    ) -> Result<RequestCheck, GateError> {
        let generations = (memex.generation(), skills.generation());
        if memo.generations != Some(generations) {
            memo.seen.clear();
            memo.generations = Some(generations);
        }
        let mut check = RequestCheck::default();
        let mut one = |text: &mut String, form: Form| -> Result<(), GateError> {
            let hash = foveal_memex::file::content_hash(text.as_bytes())
                ^ u64::from(form == Form::Outline);
            let (cleaned, removed) = match memo.seen.get(&hash) {
                Some((seen, cleaned, removed)) if **seen == **text => (cleaned.clone(), *removed),
                _ => {
                    let cleaned = self.clean_as(text, form, memex, skills)?;
                    let removed = cleaned.report.total();
                    let cleaned = match cleaned.text {
                        Cow::Owned(cleaned) => Some(cleaned),
                        Cow::Borrowed(_) => None,
                    };
                    if memo.seen.len() >= RequestMemo::CAPACITY {
                        memo.seen.clear();
                    }
                    memo.seen
                        .insert(hash, (Arc::from(text.as_str()), cleaned.clone(), removed));
                    (cleaned, removed)
                }
            };
            if let Some(cleaned) = cleaned {
                *text = cleaned;
                check.strings += 1;
                check.removed += removed;
            }
            Ok(())
        };
        let plain = Form::Plain;
        if let Some(model) = &mut request.model {
            one(model, plain)?;
        }
        for message in &mut request.messages {
            match message {
                // The host's and skills' rendering: an outline.
                Message::System(text) => one(text, Form::Outline)?,
                Message::User(text) => one(text, plain)?,
                Message::Assistant {
                    content,
                    tool_calls,
                } => {
                    one(content, plain)?;
                    for call in tool_calls {
                        one(&mut call.id, plain)?;
                        one(&mut call.name, plain)?;
                        one(&mut call.arguments, plain)?;
                    }
                }
                Message::Tool {
                    tool_call_id,
                    content,
                } => {
                    one(tool_call_id, plain)?;
                    one(content, plain)?;
                }
            }
        }
        for tool in &mut request.tools {
            one(&mut tool.name, plain)?;
            one(&mut tool.description, plain)?;
            each_json_string(&mut tool.parameters, &mut |text| one(text, plain))?;
        }
        if let ToolChoice::Tool(name) = &mut request.tool_choice {
            one(name, plain)?;
        }
        Ok(check)
    }
}

/// Calls `f` on every string of `value`: object keys and string values, at
/// every depth.
fn each_json_string<E>(
    value: &mut serde_json::Value,
    f: &mut impl FnMut(&mut String) -> Result<(), E>,
) -> Result<(), E> {
    use serde_json::Value;
    match value {
        Value::String(text) => f(text),
        Value::Array(items) => items
            .iter_mut()
            .try_for_each(|item| each_json_string(item, f)),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (mut key, mut item) in entries {
                f(&mut key)?;
                each_json_string(&mut item, f)?;
                map.insert(key, item);
            }
            Ok(())
        }
        _ => Ok(()),
    }
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
