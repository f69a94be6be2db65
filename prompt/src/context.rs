//! The context section of the prompt (component 2000, seed 004's semantic
//! memories): the `awareness` skill's outline of the memex, cached.
//!
//! [`ContextCache::section`] asks the skill for the outline of a memex
//! snapshot, through the registry snapshot of the cycle, and keeps the
//! answer. While the registry generation, the memex generation, the
//! privacy tags, the focus, the budget and the options (threshold, project
//! rules, map) are unchanged, the next request returns the same
//! [`Section`] without building a view or calling the skill (seed 003,
//! contract 2: unlike the seed, keyed on the memex *generation*, so an edit
//! that keeps the number of objects cannot serve a stale context). What
//! else the skill is told of each file — its modification time, file tags
//! and TODO keywords ([`skill_config`]) — changes only with a new version
//! of the file, hence a new generation: a touch that leaves the bytes (and
//! the setup files' settings) as they were publishes nothing and changes
//! nothing the skill is told.
//!
//! When the skill is not loaded, quarantined or fails, the section is the
//! seed's line `[Awareness skill not loaded]` (seed 003), and the reason is
//! logged.
//!
//! # Example
//!
//! ```
//! use foveal_prompt::context::{ContextCache, ContextRequest};
//! use foveal_memex::{Memex, privacy::PrivacyTags};
//! use foveal_registry::registry::{Registry, RegistryOptions};
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("a.org"), "* Work :project:\n").unwrap();
//! let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
//! let registry = Registry::new(RegistryOptions {
//!     dirs: vec![],
//!     shadow_dir: dir.path().join("shadow"),
//!     ..RegistryOptions::default()
//! })
//! .unwrap();
//! let cache = ContextCache::default();
//! let request = ContextRequest::default();
//! let section = cache.section(&registry.snapshot(), &memex.snapshot(), &PrivacyTags::default(), &request);
//! assert_eq!(section.text(), "[Awareness skill not loaded]\n");
//! ```

use std::sync::{Arc, Mutex};

use abi_stable::std_types::RString;
use foveal_sdk::SignalKind;

use crate::memex::privacy::PrivacyTags;
use crate::memex::snapshot::MemexSnapshot;
use crate::memex::view::{ComponentsCall, SnapshotView};
use crate::registry::Snapshot;

/// Settings of the awareness outline (`[awareness]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwarenessSettings {
    /// `awareness.projects`: the rules that make a headline a project
    /// (default: all of them; `["tag"]` is seed 000's rule alone).
    pub projects: Vec<ProjectRule>,
    /// `awareness.map`: when no project is found, show the top of each
    /// file instead of only saying so (default true; false is seed 000).
    pub map: bool,
    /// `awareness.format`: `compact` (the default: one line per headline
    /// with its TODO state and a short handle) or `seed` (seed 000's
    /// property drawers, byte for byte).
    pub format: OutlineFormat,
}

impl Default for AwarenessSettings {
    fn default() -> Self {
        Self {
            projects: ProjectRule::ALL.to_vec(),
            map: true,
            format: OutlineFormat::Compact,
        }
    }
}

/// The skill that renders the section.
pub const SKILL: &str = "awareness";
/// The component id of the section (seed 004).
pub const COMPONENT_ID: u32 = 2000;
/// The section when the skill is absent (seed 003).
pub const FALLBACK: &str = "[Awareness skill not loaded]\n";

/// A rule that makes a headline a project (`[awareness] projects`; the
/// awareness skill's README explains each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProjectRule {
    /// Tagged `project` (also through `#+FILETAGS:`): seed 000's rule.
    Tag,
    /// TODO keyword `PROJ` or `PROJECT`.
    Keyword,
    /// A not-done task with a child that has a TODO keyword.
    Gtd,
    /// Under a top-level `Projects` headline, or at the top of
    /// `projects.org`.
    Heading,
}

impl ProjectRule {
    /// Every rule, in the documented order.
    pub const ALL: [ProjectRule; 4] = [Self::Tag, Self::Keyword, Self::Gtd, Self::Heading];

    /// Its name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tag => "tag",
            Self::Keyword => "keyword",
            Self::Gtd => "gtd",
            Self::Heading => "heading",
        }
    }

    /// The rule named `name` (exactly, as the configuration writes it).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }
}

/// How the outline is written (`[awareness] format`; the awareness
/// skill's README shows both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OutlineFormat {
    /// One line per headline as Org writes it (TODO keyword, priority,
    /// title, tags) and a short handle instead of the property drawer.
    #[default]
    Compact,
    /// Seed 000's format, byte for byte: title, `:PROPERTIES:`, `:ID:`,
    /// `:END:`.
    Seed,
}

impl OutlineFormat {
    /// Both formats.
    pub const ALL: [OutlineFormat; 2] = [Self::Compact, Self::Seed];

    /// Its name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Self::Compact => "compact",
            Self::Seed => "seed",
        }
    }

    /// The format named `name` (exactly, as the configuration writes it).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// What to render.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextRequest {
    /// The kind of signal the cycle answers.
    pub signal: SignalKind,
    /// The id of the object in foveal focus.
    pub focus: Option<String>,
    /// Tokens the section may use.
    pub budget: Option<u32>,
    /// Cosine similarity from which an object is promoted.
    pub threshold: f64,
    /// Ask the skill for its sources and omissions.
    pub explain: bool,
    /// Let the skill reuse work between calls (on, except to time the work
    /// itself).
    pub skill_cache: bool,
    /// The rules that make a headline a project (`awareness.projects`).
    pub projects: Vec<ProjectRule>,
    /// Show the map of the memex when no project is found
    /// (`awareness.map`).
    pub map: bool,
    /// How the outline is written (`awareness.format`).
    pub format: OutlineFormat,
}

impl Default for ContextRequest {
    fn default() -> Self {
        Self {
            signal: SignalKind::USER,
            focus: None,
            budget: None,
            threshold: 0.75,
            explain: false,
            skill_cache: true,
            projects: ProjectRule::ALL.to_vec(),
            map: true,
            format: OutlineFormat::Compact,
        }
    }
}

impl ContextRequest {
    /// The seed's awareness: projects by the `project` tag alone, no map
    /// when there is none, and the seed's format.
    pub fn seed() -> Self {
        Self {
            projects: vec![ProjectRule::Tag],
            map: false,
            format: OutlineFormat::Seed,
            ..Self::default()
        }
    }

    /// The request with the awareness settings of a configuration.
    pub fn with_awareness(mut self, settings: &AwarenessSettings) -> Self {
        self.projects = settings.projects.clone();
        self.map = settings.map;
        self.format = settings.format;
        self
    }
}

/// The awareness skill's configuration (JSON): the request's options,
/// and what the skill needs to know of each lent file that its view does
/// not say — when it last changed (the map drops the least recently
/// changed files first), its file tags and its TODO keywords (both with
/// those of its setup files, which the lent text does not hold).
#[derive(Debug, serde::Serialize)]
struct SkillConfig<'a> {
    threshold: f64,
    cache: bool,
    projects: &'a [ProjectRule],
    map: bool,
    format: OutlineFormat,
    /// Unix seconds, in view order (0 when unknown).
    modified: Vec<i64>,
    file_tags: Vec<&'a [String]>,
    todo_keywords: Vec<Vec<&'a str>>,
}

/// The JSON configuration of the awareness skill for `request` over
/// `view`.
pub fn skill_config(request: &ContextRequest, view: &SnapshotView) -> String {
    let config = SkillConfig {
        threshold: request.threshold,
        cache: request.skill_cache,
        projects: &request.projects,
        map: request.map,
        format: request.format,
        modified: view.modified().collect(),
        // As lent: none that only a setting line inside a private object
        // gives (Org reads those wherever they are).
        file_tags: view
            .prepared()
            .map(|(file, prepared)| prepared.file_tags(file))
            .collect(),
        todo_keywords: view
            .prepared()
            .map(|(file, prepared)| {
                let keywords = prepared.keywords(file);
                keywords
                    .todo
                    .iter()
                    .chain(&keywords.done)
                    .map(String::as_str)
                    .collect()
            })
            .collect(),
    };
    serde_json::to_string(&config).unwrap_or_else(|_| "{}".to_owned())
}

/// The active projects of a memex, as the awareness outline finds them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProjectCount {
    /// Outermost active projects: the ones the outline renders.
    pub total: usize,
    /// How many of them each rule found, in the documented order of the
    /// rules (those that found none left out).
    pub by_rule: Vec<(ProjectRule, usize)>,
}

/// Counts the active projects of `memex` with the awareness skill's rules
/// (`foveal_sdk::projects`, the same code the skill runs), over the view
/// a skill is lent for `privacy` and with what the skill is told of each
/// file ([`skill_config`]): `foveal memex stats` and the outline agree.
pub fn count_projects(
    memex: &MemexSnapshot,
    privacy: &PrivacyTags,
    rules: &[ProjectRule],
) -> ProjectCount {
    use foveal_sdk::projects::{FileFacts, RuleName, Rules, active_projects};
    let names: Vec<String> = rules.iter().map(|r| r.name().to_owned()).collect();
    // The names are ours: each is a rule of the SDK's.
    let rules = Rules::parse(&names).unwrap_or_default();
    let view = SnapshotView::new(memex, privacy);
    let owned = view.view();
    let memex_view = owned.as_view();
    let mut found = Vec::new();
    for (file, lent) in view.files().zip(memex_view.files()) {
        let keywords: Vec<String> = file
            .keywords
            .todo
            .iter()
            .chain(&file.keywords.done)
            .cloned()
            .collect();
        let facts = FileFacts {
            file_tags: Some(&file.file_tags),
            todo_keywords: Some(&keywords),
        };
        active_projects(lent, rules, facts, &mut found);
    }
    let by_rule = ProjectRule::ALL
        .into_iter()
        .map(|rule| {
            let name = match rule {
                ProjectRule::Tag => RuleName::Tag,
                ProjectRule::Keyword => RuleName::Keyword,
                ProjectRule::Gtd => RuleName::Gtd,
                ProjectRule::Heading => RuleName::Heading,
            };
            let n = found
                .iter()
                .filter(|(_, _, r)| r.rule_name() == name)
                .count();
            (rule, n)
        })
        .filter(|&(_, n)| n > 0)
        .collect();
    ProjectCount {
        total: found.len(),
        by_rule,
    }
}

/// Who produced a section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The skill, from the registry generation given.
    Skill {
        /// The registry generation the skill was called in.
        generation: u64,
    },
    /// The fallback line; why.
    Fallback(String),
}

/// The rendered section and what it shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// The text, as the skill returned it (not copied).
    text: RString,
    /// `(id, reason)` of every object shown, when explained.
    pub sources: Vec<(String, String)>,
    /// `(reason, count)` of what was left out, when explained.
    pub omitted: Vec<(String, u32)>,
    /// Who produced it.
    pub origin: Origin,
    /// The skill's hook failed (an error or a panic): the fallback stands
    /// in for this call only. Such a section is never cached, so the next
    /// cycle calls the hook again — each failure is counted, and a skill
    /// that keeps panicking reaches quarantine.
    pub failed: bool,
}

impl Section {
    /// The text.
    pub fn text(&self) -> &str {
        self.text.as_str()
    }
}

/// What a section depends on.
#[derive(Debug, Clone, PartialEq)]
struct Key {
    registry: u64,
    memex: u64,
    privacy: PrivacyTags,
    request: ContextRequest,
}

/// The last section rendered, reused while nothing it depends on changed.
#[derive(Debug, Default)]
pub struct ContextCache {
    last: Mutex<Option<(Key, Arc<Section>)>>,
}

impl ContextCache {
    /// The section for `request` on these snapshots: from the cache when
    /// nothing changed, else from the skill (or the fallback).
    pub fn section(
        &self,
        skills: &Snapshot,
        memex: &MemexSnapshot,
        privacy: &PrivacyTags,
        request: &ContextRequest,
    ) -> Arc<Section> {
        if let Some(hit) = self.cached(skills, memex, privacy, request) {
            return hit;
        }
        let section = Arc::new(render(skills, memex, privacy, request));
        if section.failed {
            return section;
        }
        let key = Key {
            registry: skills.generation(),
            memex: memex.generation(),
            privacy: privacy.clone(),
            request: request.clone(),
        };
        *self.lock() = Some((key, Arc::clone(&section)));
        section
    }

    /// The cached section, if it is still valid for these inputs.
    pub fn cached(
        &self,
        skills: &Snapshot,
        memex: &MemexSnapshot,
        privacy: &PrivacyTags,
        request: &ContextRequest,
    ) -> Option<Arc<Section>> {
        let last = self.lock();
        let (key, section) = last.as_ref()?;
        (key.registry == skills.generation()
            && key.memex == memex.generation()
            && key.privacy == *privacy
            && key.request == *request)
            .then(|| Arc::clone(section))
    }

    /// Forgets the cached section.
    pub fn clear(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Key, Arc<Section>)>> {
        // A section is replaced whole; a poisoned lock holds a valid value.
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Renders the section without the cache.
pub fn render(
    skills: &Snapshot,
    memex: &MemexSnapshot,
    privacy: &PrivacyTags,
    request: &ContextRequest,
) -> Section {
    if request.budget.is_some() {
        // The skill counts tokens through the host to fit the budget.
        crate::tokens::warm();
    }
    let view = SnapshotView::new(memex, privacy);
    let config = skill_config(request, &view);
    let call = ComponentsCall {
        view,
        signal: request.signal,
        focus: request.focus.clone(),
        budget: request.budget,
        config,
        explain: request.explain,
        facts: crate::host_api::facts(None),
    };
    let fallback = |why: String, failed: bool| Section {
        text: RString::from(FALLBACK),
        sources: Vec::new(),
        omitted: Vec::new(),
        origin: Origin::Fallback(why),
        failed,
    };
    let components = match skills.call_components(SKILL, call) {
        Ok(components) => components,
        Err(unavailable) => {
            let why = unavailable.to_string();
            // A failure is said on stderr once per cause in this process
            // (`crate::skill_errors`).
            let failed = unavailable.say_failure();
            if unavailable.is_not_loaded() || failed {
                tracing::debug!(target: "foveal::context", "awareness fallback: {why}");
            } else {
                tracing::warn!(target: "foveal::context", "awareness fallback: {why}");
            }
            return fallback(why, failed);
        }
    };
    let Some(mut component) = components.into_iter().find(|c| c.id == COMPONENT_ID) else {
        let why = format!("the {SKILL} skill returned no component {COMPONENT_ID}");
        tracing::warn!(target: "foveal::context", "awareness fallback: {why}");
        return fallback(why, false);
    };
    Section {
        text: std::mem::take(&mut component.content),
        sources: component
            .sources
            .iter()
            .map(|s| (s.id.to_string(), s.reason.to_string()))
            .collect(),
        omitted: component
            .omitted
            .iter()
            .map(|o| (o.reason.to_string(), o.count))
            .collect(),
        origin: Origin::Skill {
            generation: skills.generation(),
        },
        failed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memex::Memex;

    /// A private headline with a canary in every part of it — its title,
    /// tags, `:ID:`, a property, its embedding, its body, a child — and
    /// two in-buffer setting lines in its body (Org reads those wherever
    /// they are), beside visible objects with settings of their own; and
    /// a file private by its file tags, name and preamble included.
    const WORK: &str = "#+TODO: TODO NEXT | DONE
#+FILETAGS: :work:
* Launch :project:
:PROPERTIES:
:ID: launch
:EMBEDDING: 0.1 0.2 0.3
:END:
Ship the launch on time.
** NEXT Zebrafinch appointment :@personal:quillontag:
:PROPERTIES:
:ID: zebrafinch-id
:PHONE: marrowby-line
:EMBEDDING: 0.7777 0.8888 0.9999
:END:
#+TODO: QUILLONSTATE | DONE
#+FILETAGS: :ossuarytag:
Marrowby told me about the loan.
*** Deeper ossuary child
** TODO Public notes :docs:
";

    const DIARY: &str = "#+TITLE: Ossuary diary
#+FILETAGS: :@personal:
Marrowby preamble.
* Zebrafinch Monday
Quillon body.
";

    /// What nothing lent may hold (lowercased).
    const PRIVATE_WORDS: [&str; 8] = [
        "zebrafinch",
        "quillon",
        "marrowby",
        "ossuary",
        "@personal",
        "0.7777",
        "0.8888",
        "0.9999",
    ];

    fn assert_private_free(what: &str, text: &str) {
        let lower = text.to_lowercase();
        for word in PRIVATE_WORDS {
            assert!(!lower.contains(word), "{word:?} lent in {what}: {text}");
        }
    }

    /// The first layer, with no skill and no gate after it: every byte a
    /// skill is lent — each file's name and text, every field of every
    /// object, the tag index, the derived ids, and the awareness skill's
    /// configuration (file tags and TODO keywords) — holds nothing of a
    /// private object, while the visible text of the same file is all
    /// there.
    #[test]
    fn what_the_awareness_skill_is_lent_holds_no_private_byte() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("work.org"), WORK).unwrap();
        std::fs::write(dir.path().join("ossuary-diary.org"), DIARY).unwrap();
        let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
        let snapshot = memex.snapshot();
        assert_eq!(snapshot.files().count(), 2, "a file did not load");
        let privacy = PrivacyTags::new(["@personal"]);
        let view = SnapshotView::new(&snapshot, &privacy);
        let owned = view.view();

        // The diary is not lent, not even its name.
        assert_eq!(owned.files.len(), 1);
        let file = &owned.files[0];
        assert!(file.path.as_str().ends_with("work.org"), "{}", file.path);
        assert_private_free("the path", file.path.as_str());
        assert_private_free("the text", file.text.as_str());
        assert_private_free("the derived ids", file.index.derived_ids.as_str());
        for entry in file.index.tag_index.iter() {
            assert_private_free("the tag index", entry.tag.as_str());
        }
        let mut titles = Vec::new();
        for i in 0..file.len() as u32 {
            let fields = format!(
                "{} | {} | {:?} | {:?} | {}",
                file.id(i),
                file.title(i),
                file.todo(i),
                file.tags(i).collect::<Vec<_>>(),
                file.body(i)
            );
            assert_private_free("an object", &fields);
            titles.push(file.title(i));
        }
        // The positive control: the visible objects, whole.
        assert_eq!(titles, ["Launch", "Public notes"]);
        assert!(file.text.as_str().contains("Ship the launch on time.\n"));
        assert_eq!(file.with_tag("docs"), [1]);
        assert_eq!(file.todo(1), Some("TODO"));
        assert_eq!(file.vector(0), Some(&[0.1, 0.2, 0.3][..]));

        // What the skill is told of the file besides.
        let config = skill_config(&ContextRequest::default(), &view);
        assert_private_free("the skill's configuration", &config);
        let config: serde_json::Value = serde_json::from_str(&config).unwrap();
        assert_eq!(config["file_tags"], serde_json::json!([["work"]]));
        assert_eq!(
            config["todo_keywords"],
            serde_json::json!([["TODO", "NEXT", "DONE"]])
        );
    }
}
