//! The five phases of seed 001, each a function of the view and the
//! options, and the limits by complexity.
//!
//! 1. [`extract_signals`]: keywords (stopwords removed), domains from the
//!    domain mapping, files mentioned, task type;
//! 2. [`query_knowledge`]: knowledge nodes by tags — keywords (top 20) and
//!    domains (top 10) — deduplicated, categorised, ranked;
//! 3. [`dependency_context`]: completed dependencies' handoffs only, low
//!    gotchas and non-blocking questions dropped;
//! 4. [`filter_context_map`]: +2 component, +1 location, +1 domain in
//!    notes, +3 mentioned file; the top entries;
//! 5. [`compute`]: the assembled context, limits applied.
//!
//! Nothing here walks the whole memex: the focus and dependencies are found
//! by id (a binary search per file), knowledge nodes through the host's tag
//! index, and the context map's headline through a per-file-version cache.

use std::collections::HashMap;

use foveal_sdk::memex::{FileView, MemexView};

pub use crate::handoff::{
    Dependency, HandoffError, InheritedGotcha, InheritedPattern, Question, dependency_context,
    read_handoff,
};
pub use crate::map::{CodeRef, context_map, filter_context_map, find_place};
pub use crate::signals::{At, Signals};

use crate::org::{self, Obj};

/// How much context a task gets (seed 001, "Context Limits").
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Complexity {
    /// Haiku-sized.
    Easy,
    /// Sonnet-sized (the default).
    Normal,
    /// Opus-sized.
    Complex,
}

impl Complexity {
    /// `easy`, `normal` or `complex` (also the model names of the seed's
    /// table: `haiku`, `sonnet`, `opus`), any case.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "easy" | "haiku" | "low" | "simple" => Some(Self::Easy),
            "normal" | "sonnet" | "medium" => Some(Self::Normal),
            "complex" | "opus" | "high" | "hard" => Some(Self::Complex),
            _ => None,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Easy => "easy",
            Self::Normal => "normal",
            Self::Complex => "complex",
        }
    }

    /// The seed's table.
    pub fn limits(self) -> Limits {
        match self {
            Self::Easy => Limits {
                max_patterns: 3,
                max_gotchas: 2,
                max_code_refs: 5,
                max_prior_tasks: 2,
            },
            Self::Normal => Limits {
                max_patterns: 5,
                max_gotchas: 3,
                max_code_refs: 10,
                max_prior_tasks: 4,
            },
            Self::Complex => Limits {
                max_patterns: 10,
                max_gotchas: 5,
                max_code_refs: 20,
                max_prior_tasks: 8,
            },
        }
    }
}

/// One row of the limits table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Max Patterns.
    pub max_patterns: usize,
    /// Max Gotchas.
    pub max_gotchas: usize,
    /// Max Code Refs.
    pub max_code_refs: usize,
    /// Max Prior Tasks.
    pub max_prior_tasks: usize,
}

/// What the phases are configured with.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The domain mapping: domain → trigger words, in order.
    pub domains: Vec<(String, Vec<String>)>,
    /// The complexity of a task without a `:COMPLEXITY:` property.
    pub default_complexity: Complexity,
    /// The context map: a headline's title or id, or a file (a name
    /// ending in `.org`).
    pub context_map: String,
    /// Where discovered knowledge goes: a headline's title or id.
    pub knowledge: String,
    /// Reuse per-file work between calls (the context map's place).
    pub cache: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            domains: seed_domains(),
            default_complexity: Complexity::Normal,
            context_map: "Context Map".to_owned(),
            knowledge: "Knowledge".to_owned(),
            cache: true,
        }
    }
}

/// Seed 001's `DOMAIN_MAPPING`.
pub fn seed_domains() -> Vec<(String, Vec<String>)> {
    let table: [(&str, [&str; 5]); 5] = [
        ("api", ["endpoint", "rest", "graphql", "route", "request"]),
        ("auth", ["login", "token", "jwt", "session", "password"]),
        (
            "database",
            ["query", "schema", "migration", "model", "record"],
        ),
        ("ui", ["component", "button", "form", "page", "style"]),
        ("testing", ["test", "spec", "mock", "assert", "coverage"]),
    ];
    table
        .iter()
        .map(|(d, t)| (d.to_string(), t.iter().map(|w| w.to_string()).collect()))
        .collect()
}

/// Words that carry no topic (English function words and the words every
/// task uses).
const STOPWORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
    "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both",
    "but", "by", "can", "cannot", "could", "did", "do", "does", "doing", "done", "down", "during",
    "each", "etc", "every", "few", "for", "from", "further", "get", "gets", "had", "has", "have",
    "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is",
    "it", "its", "itself", "just", "let", "like", "make", "makes", "may", "me", "might", "more",
    "most", "must", "my", "need", "needs", "no", "nor", "not", "now", "of", "off", "on", "once",
    "one", "only", "or", "other", "our", "ours", "out", "over", "own", "same", "she", "should",
    "so", "some", "such", "sure", "task", "tasks", "than", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "those", "through", "to", "todo", "too", "under", "until",
    "up", "us", "use", "used", "using", "very", "via", "was", "we", "were", "what", "when",
    "where", "which", "while", "who", "whom", "why", "will", "with", "within", "without", "would",
    "yes", "you", "your", "yours",
];

/// Whether `word` (lowercase) is a stopword.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

/// A task read from the memex.
#[derive(Debug, Clone)]
pub struct Task<'a> {
    /// Its headline.
    pub obj: Obj<'a>,
    /// Its title and body (without handoff and drawers).
    pub objective: String,
    /// Its acceptance criteria: the body's checklist, else `:CRITERIA:`
    /// (items separated by `;`).
    pub criteria: Vec<String>,
    /// `:COMPLEXITY:`, or the default.
    pub complexity: Complexity,
    /// `:TYPE:`.
    pub task_type: Option<&'a str>,
    /// `:DEPENDS_ON:` ids.
    pub depends_on: Vec<&'a str>,
    /// Its handoff block, if any.
    pub handoff: Option<org::HandoffBlock<'a>>,
    /// A handoff block that was opened and never closed (0-based body line).
    pub unclosed_handoff: Option<u32>,
}

/// Reads the task at `obj`; `None` when the headline has no TODO keyword
/// (it is not a task).
pub fn read_task<'a>(obj: Obj<'a>, options: &Options) -> Option<Task<'a>> {
    obj.todo()?;
    let body = obj.body();
    let parts = org::body_parts(body);
    let mut criteria: Vec<String> = parts
        .objective
        .iter()
        .filter_map(|l| org::checklist_item(l))
        .map(str::to_owned)
        .collect();
    if criteria.is_empty()
        && let Some(c) = obj.property("CRITERIA")
    {
        criteria = c
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
    }
    let mut objective = obj.title().to_owned();
    for line in &parts.objective {
        if org::checklist_item(line).is_some() {
            continue;
        }
        let line = line.trim();
        if !line.is_empty() {
            objective.push(' ');
            objective.push_str(line);
        }
    }
    Some(Task {
        obj,
        objective,
        criteria,
        complexity: obj
            .property("COMPLEXITY")
            .and_then(Complexity::parse)
            .unwrap_or(options.default_complexity),
        task_type: obj.property("TYPE").or_else(|| obj.property("TASK_TYPE")),
        depends_on: obj
            .property("DEPENDS_ON")
            .map(|v| org::split_values(v).collect())
            .unwrap_or_default(),
        handoff: parts.handoff,
        unclosed_handoff: parts.unclosed,
    })
}

/// Phase 1: `extractTaskSignals`.
pub fn extract_signals(task: &Task<'_>, options: &Options) -> Signals {
    let mut text = task.objective.clone();
    for c in &task.criteria {
        text.push(' ');
        text.push_str(c);
    }
    let mut signals = Signals {
        keywords: extract_keywords(&text),
        files: extract_paths(&text),
        task_type: task.task_type.map(str::to_owned).into_iter().collect(),
        ..Signals::default()
    };
    signals.domains = domains_of(&signals.keywords, &options.domains);
    signals
}

/// Lowercase words of letters, digits, `_` and `-`, stopwords, numbers
/// and one-letter words removed; each once, in order.
pub fn extract_keywords(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-')) {
        let word = word.trim_matches(['-', '_']);
        if word.chars().count() < 2 || word.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let lower = word.to_lowercase();
        if is_stopword(&lower) || !seen.insert(lower.clone()) {
            continue;
        }
        out.push(lower);
    }
    out
}

/// The domains whose triggers (or whose own name) a keyword is, also in
/// the plural (`tokens` triggers `auth` as `token` does).
pub fn domains_of(keywords: &[String], mapping: &[(String, Vec<String>)]) -> Vec<String> {
    let hits = |word: &str| {
        keywords.iter().any(|k| {
            k == word || k.strip_suffix('s') == Some(word) || k.strip_suffix("es") == Some(word)
        })
    };
    mapping
        .iter()
        .filter(|(domain, triggers)| hits(domain) || triggers.iter().any(|t| hits(t)))
        .map(|(domain, _)| domain.clone())
        .collect()
}

/// `EXTRACT_PATHS`: words that name a file — with a `/`, or ending in a
/// dot and a short extension (`config.toml`, `src/auth/jwt.rs:10-20`) —
/// without Org or Markdown verbatim markers; URLs are not files.
pub fn extract_paths(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for word in text.split(|c: char| {
        c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '[' | ']' | '"' | '\'')
    }) {
        let w = word.trim_matches(['=', '~', '`', '*', '<', '>']);
        let w = w.trim_end_matches(['.', ':', '!', '?']);
        if w.is_empty() || w.contains("://") || w.starts_with("http") {
            continue;
        }
        // `path:lines`: the path.
        let path = match w.split_once(':') {
            Some((p, lines)) if lines.bytes().all(|b| b.is_ascii_digit() || b == b'-') => p,
            _ => w,
        };
        let has_ext = path.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty()
                && !stem.ends_with('.')
                && (1..=6).contains(&ext.len())
                && ext.bytes().all(|b| b.is_ascii_alphanumeric())
                && ext.bytes().any(|b| b.is_ascii_alphabetic())
        });
        // A folder and a name (`src/auth`, `/etc/hosts`); `/login` alone is
        // a route more often than a file.
        let has_dir = path.split('/').filter(|s| !s.is_empty()).count() >= 2;
        if (has_ext || has_dir) && seen.insert(path) {
            out.push(path.to_owned());
        }
    }
    out
}

/// The kind of a knowledge node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// `:KIND: pattern`.
    Pattern,
    /// `:KIND: gotcha`.
    Gotcha,
    /// `:KIND: decision`.
    Decision,
}

impl Kind {
    /// From a `:KIND:` value (any case; `warning` is a gotcha).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "pattern" => Some(Self::Pattern),
            "gotcha" | "warning" => Some(Self::Gotcha),
            "decision" => Some(Self::Decision),
            _ => None,
        }
    }
}

/// A knowledge node that matched, with its score.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Match {
    /// Its memex id.
    pub id: String,
    /// Its kind.
    pub kind: Kind,
    /// Its title.
    pub summary: String,
    /// `:FILE:` (patterns).
    pub file: Option<String>,
    /// `:SEVERITY:`, default `medium` (gotchas).
    pub severity: String,
    /// `:RATIONALE:` (decisions).
    pub rationale: Option<String>,
    /// How many of the query's tags it carries (keywords and domains).
    pub relevance: u32,
}

/// Phase 2's output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Knowledge {
    /// Patterns, best first.
    pub patterns: Vec<Match>,
    /// Gotchas, best first.
    pub gotchas: Vec<Match>,
    /// Decisions, best first.
    pub decisions: Vec<Match>,
    /// Tasks carrying the query's tags (not the focus), ids.
    pub related_tasks: Vec<String>,
    /// Nodes matched before categorising (after deduplication).
    pub matched: usize,
}

/// `knowledge_graph.queryByTags(tags, limit)`: the knowledge nodes (and
/// tasks) carrying any of `tags`, scored by how many they carry, best
/// first (ties in memex order), at most `limit`.
pub fn query_by_tags(
    view: &MemexView<'_>,
    tags: &[String],
    limit: usize,
    exclude: Option<At>,
) -> Vec<(At, u32)> {
    let mut scores: HashMap<At, u32> = HashMap::new();
    let mut seen_tags: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for tag in tags {
        if !seen_tags.insert(tag) {
            continue;
        }
        for (f, file) in view.files().enumerate() {
            for &index in file.with_tag(tag) {
                let at = (f as u32, index);
                if Some(at) == exclude || !is_candidate(file, index) {
                    continue;
                }
                *scores.entry(at).or_default() += 1;
            }
        }
    }
    let mut ranked: Vec<(At, u32)> = scores.into_iter().collect();
    ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(limit);
    ranked
}

/// A knowledge node (a known `:KIND:`) or a task (a TODO keyword).
fn is_candidate(file: &FileView<'_>, index: u32) -> bool {
    let obj = Obj { file, index };
    obj.todo().is_some() || obj.property("KIND").and_then(Kind::parse).is_some()
}

/// Phase 2: `queryRelevantKnowledge`. Keyword matches (top 20) and domain
/// matches (top 10) are merged — a node found by both scores the sum —
/// then categorised and ranked; each category keeps `keep` entries.
pub fn query_knowledge(
    view: &MemexView<'_>,
    signals: &Signals,
    focus: Option<At>,
    keep: Limits,
) -> Knowledge {
    let keyword_matches = query_by_tags(view, &signals.keywords, 20, focus);
    let domain_matches = query_by_tags(view, &signals.domains, 10, focus);
    let mut merged: Vec<(At, u32)> = keyword_matches;
    for (at, score) in domain_matches {
        match merged.iter_mut().find(|(a, _)| *a == at) {
            Some(m) => m.1 += score,
            None => merged.push((at, score)),
        }
    }
    let files = view.files.as_slice();
    let mut k = Knowledge {
        matched: merged.len(),
        ..Knowledge::default()
    };
    for ((f, index), relevance) in merged {
        let obj = Obj {
            file: &files[f as usize],
            index,
        };
        let Some(kind) = obj.property("KIND").and_then(Kind::parse) else {
            if obj.todo().is_some() {
                k.related_tasks.push(obj.id().to_owned());
            }
            continue;
        };
        let m = Match {
            id: obj.id().to_owned(),
            kind,
            summary: obj.title().to_owned(),
            file: obj.property("FILE").map(str::to_owned),
            severity: obj
                .property("SEVERITY")
                .map_or_else(|| "medium".to_owned(), str::to_ascii_lowercase),
            rationale: obj.property("RATIONALE").map(str::to_owned),
            relevance,
        };
        match kind {
            Kind::Pattern => k.patterns.push(m),
            Kind::Gotcha => k.gotchas.push(m),
            Kind::Decision => k.decisions.push(m),
        }
    }
    for list in [&mut k.patterns, &mut k.gotchas, &mut k.decisions] {
        // Stable: equal relevance keeps the query's order.
        list.sort_by_key(|m| std::cmp::Reverse(m.relevance));
    }
    k.patterns.truncate(keep.max_patterns.max(5));
    k.gotchas.truncate(keep.max_gotchas.max(3));
    k.decisions.truncate(3);
    k.related_tasks.truncate(5);
    k
}

/// Phase 5's output: the computed context, limits applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Computed {
    /// The focus task's id.
    pub task: String,
    /// Its complexity.
    pub complexity: Option<Complexity>,
    /// Phase 1.
    pub signals: Signals,
    /// Knowledge-graph patterns.
    pub patterns: Vec<Match>,
    /// Patterns from the dependencies' handoffs.
    pub inherited_patterns: Vec<InheritedPattern>,
    /// Knowledge-graph gotchas.
    pub gotchas: Vec<Match>,
    /// Gotchas from the dependencies' handoffs.
    pub inherited_gotchas: Vec<InheritedGotcha>,
    /// Decisions.
    pub decisions: Vec<Match>,
    /// Completed dependencies.
    pub prior_work: Vec<Dependency>,
    /// Context-map entries.
    pub code_references: Vec<CodeRef>,
    /// Blocking questions from the dependencies.
    pub open_questions: Vec<Question>,
    /// Tasks sharing the query's tags.
    pub related_tasks: Vec<String>,
    /// For the debug report.
    pub debug: DebugFacts,
}

/// What the "Context Debug" report counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DebugFacts {
    /// Knowledge nodes (and tasks) the queries matched, deduplicated.
    pub nodes_matched: usize,
    /// Patterns, gotchas, decisions found before the limits.
    pub found: [usize; 3],
    /// Completed dependencies processed.
    pub dependency_ids: Vec<String>,
    /// Dependencies skipped: not completed.
    pub incomplete: Vec<String>,
    /// Dependencies not in the view.
    pub missing: Vec<String>,
    /// Patterns and warnings inherited (before the limits).
    pub inherited: [usize; 2],
    /// Context-map entries in all.
    pub map_total: usize,
    /// Context-map entries that scored.
    pub map_filtered: usize,
    /// The best score.
    pub top_score: u32,
    /// Whether a context map was found.
    pub map_found: bool,
    /// Handoffs that did not parse.
    pub errors: Vec<HandoffError>,
}

/// Phase 5: `computeContext` then `applyContextLimits`. `None` when the
/// focus is not a task.
pub fn compute(view: &MemexView<'_>, focus: &str, options: &Options) -> Option<Computed> {
    let (file, index) = view.find(focus)?;
    let f = view
        .files()
        .position(|x| std::ptr::eq(x, file))
        .unwrap_or(0) as u32;
    let task = read_task(Obj { file, index }, options)?;
    let limits = task.complexity.limits();
    // Step 1.
    let signals = extract_signals(&task, options);
    // Step 2.
    let knowledge = query_knowledge(view, &signals, Some((f, index)), limits);
    // Step 3.
    let deps = dependency_context(view, &task, options);
    // Step 4.
    let place = find_place(view, &options.context_map, options.cache);
    let map_file = place.headline.map(|(f, _)| f).or(place.file);
    let map = match map_file {
        Some(f) => crate::cache::map_index(
            &view.files.as_slice()[f as usize],
            place.headline.map_or(u32::MAX, |(_, i)| i),
            options.cache,
            || crate::map::MapIndex::new(context_map(view, &place)),
        ),
        None => std::sync::Arc::new(crate::map::MapIndex::default()),
    };
    let mut scored = map.filter(&signals, usize::MAX);
    let map_filtered = scored.len();
    let top_score = scored.first().map_or(0, |r| r.relevance);
    // The seed keeps the top 10; a complex task's limit is 20.
    scored.truncate(limits.max_code_refs.max(10));

    let inherited_patterns: Vec<InheritedPattern> =
        deps.done.iter().flat_map(|d| d.patterns.clone()).collect();
    let inherited_gotchas: Vec<InheritedGotcha> =
        deps.done.iter().flat_map(|d| d.gotchas.clone()).collect();
    let open_questions: Vec<Question> = deps
        .done
        .iter()
        .flat_map(|d| d.open_questions.clone())
        .collect();
    let debug = DebugFacts {
        nodes_matched: knowledge.matched,
        found: [
            knowledge.patterns.len(),
            knowledge.gotchas.len(),
            knowledge.decisions.len(),
        ],
        dependency_ids: deps.done.iter().map(|d| d.id.clone()).collect(),
        incomplete: deps.incomplete.clone(),
        missing: deps.missing.clone(),
        inherited: [inherited_patterns.len(), inherited_gotchas.len()],
        map_total: map.entries.len(),
        map_filtered,
        top_score,
        map_found: place.headline.is_some() || place.file.is_some(),
        errors: deps.errors.clone(),
    };
    let mut computed = Computed {
        task: focus.to_owned(),
        complexity: Some(task.complexity),
        signals,
        patterns: knowledge.patterns,
        inherited_patterns,
        gotchas: knowledge.gotchas,
        inherited_gotchas,
        decisions: knowledge.decisions,
        prior_work: deps.done,
        code_references: scored,
        open_questions,
        related_tasks: knowledge.related_tasks,
        debug,
    };
    apply_limits(&mut computed, limits);
    Some(computed)
}

/// `applyContextLimits`. Patterns and warnings count the inherited ones
/// too (they are shown in the same sections): the dependencies' come
/// first, they are about this very task's inputs.
pub fn apply_limits(c: &mut Computed, limits: Limits) {
    c.inherited_patterns.truncate(limits.max_patterns);
    c.patterns
        .truncate(limits.max_patterns - c.inherited_patterns.len());
    c.inherited_gotchas.truncate(limits.max_gotchas);
    c.gotchas
        .truncate(limits.max_gotchas - c.inherited_gotchas.len());
    c.code_references.truncate(limits.max_code_refs);
    c.prior_work.truncate(limits.max_prior_tasks);
}

#[cfg(test)]
mod tests;
