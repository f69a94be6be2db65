//! The last door: every request body is checked here before it leaves the
//! process (design principle 6, seed 000 `context-privacy-filtered-p`).
//!
//! Private objects never reach a skill — the memex view leaves them out —
//! but private text can still reach a request another way: a user message
//! quoting a diary entry, a tool that read an Org file, a log line. And
//! secrets (API keys, tokens, private keys, passwords) can be anywhere. The
//! [`Gate`] removes both from the final body:
//!
//! 1. **Private text**, always by the host. For each memex generation the
//!    gate gathers the text of every private object (a privacy tag on it or
//!    an ancestor, [`PrivacyTags::private_mask`]): its title, each non-blank
//!    body line and each property value (except `:EMBEDDING:`), trimmed.
//!    Fragments shorter than [`MIN_FRAGMENT_CHARS`] characters or without a
//!    letter or digit are skipped, so a private `- a` does not redact every
//!    `a`. Each fragment is also matched as it appears inside a JSON string
//!    (quotes, backslashes and control characters escaped, and with
//!    non-ASCII characters as `\uXXXX`). One Aho-Corasick automaton over
//!    the fragments' first 8 bytes finds, in one pass, every place a
//!    fragment may start; the few fragments with that start are compared
//!    there. Every occurrence is found, overlapping ones included (a
//!    fragment that ends inside another must not hide it), and each run of
//!    overlapping matches becomes one `[REDACTED private]`. The matcher is
//!    built in time linear in the private text and cached by memex
//!    generation and file identity; after an edit only the changed files'
//!    fragments are gathered again. On the 100,000-headline benchmark memex
//!    (10 MB of private text, release build) the first build takes about
//!    0.45 s and 35 MB, and a 200 kB body is scanned in 2 ms (12 ms when the
//!    body is the memex itself, full of private text). The scan runs
//!    *before* any skill sees the body.
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
//! std::fs::write(dir.path().join("a.org"), "* Diary :@personal:\nMet Ann at the harbour.\n").unwrap();
//! let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
//! let gate = Gate::new(PrivacyTags::new(["@personal"]), &[], true).unwrap();
//!
//! // No skills loaded at all: the host's own filter runs.
//! let skills = Snapshot::default();
//! let body = "Remember: Met Ann at the harbour. My key is AKIAIOSFODNN7EXAMPLE.";
//! let cleaned = gate.clean(body, &memex.snapshot(), &skills).unwrap();
//! assert_eq!(cleaned.text, "Remember: [REDACTED private] My key is [REDACTED aws-access-key-id].");
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

/// One file's private fragments, shared between generations while the file
/// is unchanged.
type Fragments = Arc<[Box<str>]>;

/// The private-text matcher of one memex generation.
#[derive(Debug)]
struct PrivateCache {
    generation: u64,
    /// Each file of that generation (by identity) and its fragments.
    files: Vec<(Weak<MemexFile>, Fragments)>,
    matcher: Arc<Option<PrivateMatcher>>,
}

/// The bytes of a fragment the automaton searches for: its start, at most
/// this long. An automaton over whole fragments took 6 s and 110 MB for the
/// 10 MB of private text of a 100,000-headline memex; over 8-byte anchors
/// it takes about 0.1 s and 2 MB, and each anchor found is checked against
/// the few fragments that start with it.
const ANCHOR_LEN: usize = 8;

/// Every distinct fragment of private text of one memex generation, found
/// through an Aho-Corasick automaton over their anchors.
#[derive(Debug)]
struct PrivateMatcher {
    automaton: AhoCorasick,
    /// The fragments starting with anchor `a` are
    /// `fragments[starts[a]..starts[a + 1]]`, as (file, index) in `files`.
    starts: Vec<u32>,
    fragments: Vec<(u32, u32)>,
    files: Vec<Fragments>,
}

impl PrivateMatcher {
    /// The matcher of `files`' fragments, or none when there are none.
    /// Linear in the private text: one hash-set pass, one sort of the
    /// fragment ids, one automaton over at most `ANCHOR_LEN` bytes each.
    fn build(files: Vec<Fragments>) -> Result<Option<Self>, GateError> {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut anchors: HashMap<&[u8], u32> = HashMap::new();
        let mut anchor_list: Vec<&[u8]> = Vec::new();
        let mut pairs: Vec<(u32, (u32, u32))> = Vec::new();
        for (f, fragments) in files.iter().enumerate() {
            for (i, fragment) in fragments.iter().enumerate() {
                if !seen.insert(fragment) {
                    continue;
                }
                let bytes = fragment.as_bytes();
                let anchor = &bytes[..bytes.len().min(ANCHOR_LEN)];
                let id = *anchors.entry(anchor).or_insert_with(|| {
                    anchor_list.push(anchor);
                    anchor_list.len() as u32 - 1
                });
                pairs.push((id, (f as u32, i as u32)));
            }
        }
        if pairs.is_empty() {
            return Ok(None);
        }
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&anchor_list)
            .map_err(|e| GateError::PrivateText {
                fragments: pairs.len(),
                message: e.to_string(),
            })?;
        pairs.sort_unstable_by_key(|(anchor, _)| *anchor);
        let mut starts = vec![0u32; anchor_list.len() + 1];
        for (anchor, _) in &pairs {
            starts[*anchor as usize + 1] += 1;
        }
        for a in 0..anchor_list.len() {
            starts[a + 1] += starts[a];
        }
        let fragments = pairs.into_iter().map(|(_, at)| at).collect();
        drop(anchors);
        drop(anchor_list);
        drop(seen);
        Ok(Some(Self {
            automaton,
            starts,
            fragments,
            files,
        }))
    }

    /// The number of distinct fragments.
    fn len(&self) -> usize {
        self.fragments.len()
    }

    /// Every occurrence of every fragment in `text`, overlapping ones too:
    /// with non-overlapping matches a fragment that ends inside another
    /// (`* plan` from a list item, `plan notes` from a title) would hide the
    /// second one's start, and its rest would get through.
    fn find(&self, text: &str, out: &mut Vec<Span>) {
        let bytes = text.as_bytes();
        for m in self.automaton.find_overlapping_iter(text) {
            let a = m.pattern().as_usize();
            let at = m.start();
            for &(f, i) in &self.fragments[self.starts[a] as usize..self.starts[a + 1] as usize] {
                let fragment = self.files[f as usize][i as usize].as_bytes();
                if bytes[at..].starts_with(fragment) {
                    out.push(Span {
                        start: at,
                        end: at + fragment.len(),
                        pattern: PRIVATE_SPAN,
                    });
                }
            }
        }
    }
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

    /// The automaton over the private text of `memex`, from cache when the
    /// generation and its files are those last seen.
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
                .all(|((weak, _), file)| Weak::as_ptr(weak) == Arc::as_ptr(file))
        {
            return Ok(Arc::clone(&cached.matcher));
        }
        // Reuse the fragments of files that did not change (same parse).
        let previous: HashMap<*const MemexFile, Fragments> = cache
            .take()
            .map(|c| {
                c.files
                    .into_iter()
                    .map(|(weak, fragments)| (Weak::as_ptr(&weak), fragments))
                    .collect()
            })
            .unwrap_or_default();
        let files: Vec<(Weak<MemexFile>, Fragments)> = memex
            .files()
            .map(|file| {
                let fragments = previous
                    .get(&Arc::as_ptr(file))
                    .cloned()
                    .unwrap_or_else(|| private_fragments(file, &self.privacy).into());
                (Arc::downgrade(file), fragments)
            })
            .collect();
        let matcher = PrivateMatcher::build(files.iter().map(|(_, f)| Arc::clone(f)).collect())?;
        if let Some(matcher) = &matcher {
            tracing::debug!(
                target: "foveal::privacy",
                generation = memex.generation(),
                fragments = matcher.len(),
                bytes = matcher.automaton.memory_usage(),
                "private-text matcher built"
            );
        }
        let matcher = Arc::new(matcher);
        *cache = Some(PrivateCache {
            generation: memex.generation(),
            files,
            matcher: Arc::clone(&matcher),
        });
        Ok(matcher)
    }
}

/// The fragments of private text in `file`: for each private object its
/// title, its non-blank body lines and its property values (not
/// `:EMBEDDING:`), trimmed; each also as it reads inside a JSON string.
pub fn private_fragments(file: &MemexFile, privacy: &PrivacyTags) -> Vec<Box<str>> {
    let mut out: Vec<Box<str>> = Vec::new();
    if privacy.is_empty() {
        return out;
    }
    let mask = privacy.private_mask(file);
    let mut push = |text: &str| {
        let text = text.trim();
        if text.chars().count() < MIN_FRAGMENT_CHARS || !text.chars().any(char::is_alphanumeric) {
            return;
        }
        let escaped = json_escape(text, false);
        let ascii = json_escape(text, true);
        if ascii != escaped {
            out.push(ascii.into());
        }
        if escaped != text {
            out.push(escaped.into());
        }
        out.push(text.into());
    };
    for (object, _) in file.objects.iter().zip(&mask).filter(|(_, p)| **p) {
        let h = &object.headline;
        push(file.slice(&h.title));
        for line in file.slice(&h.body).lines() {
            push(line);
        }
        for property in &h.properties {
            if !file.slice(&property.key).eq_ignore_ascii_case("EMBEDDING") {
                push(file.slice(&property.value));
            }
        }
    }
    out
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
