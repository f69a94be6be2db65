//! Seed 001's "Context Injection Format", its "Context Debug" report, and
//! the JSON report of `foveal context --computed --json`.

use std::fmt::Write as _;

use crate::phases::Computed;

/// The seed's "none" texts.
pub const NO_PATTERNS: &str = "No specific patterns identified for this task.";
/// …for warnings.
pub const NO_GOTCHAS: &str = "No known gotchas for this task area.";
/// …for code references.
pub const NO_CODE_REFS: &str =
    "Explore the codebase as needed. No specific references pre-identified.";

/// One line: line breaks and table bars of memex text would break the
/// markdown structure around it.
fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, part) in s
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(part);
    }
    out
}

fn cell(s: &str) -> String {
    one_line(s).replace('|', "\\|")
}

/// The `## Context (Computed)` section.
pub fn markdown(c: &Computed) -> String {
    let mut s = String::from("## Context (Computed)\n\n### Patterns to Follow\n");
    if c.patterns.is_empty() && c.inherited_patterns.is_empty() {
        let _ = writeln!(s, "{NO_PATTERNS}");
    }
    for p in &c.inherited_patterns {
        let _ = write!(s, "- **{}**", one_line(&p.pattern));
        if let Some(location) = &p.location {
            let _ = write!(s, " (see: {})", one_line(location));
        }
        s.push('\n');
    }
    for p in &c.patterns {
        let _ = write!(s, "- **{}**", one_line(&p.summary));
        if let Some(location) = &p.file {
            let _ = write!(s, " (see: {})", one_line(location));
        }
        s.push('\n');
    }

    s.push_str("\n### Warnings\n");
    if c.gotchas.is_empty() && c.inherited_gotchas.is_empty() {
        let _ = writeln!(s, "{NO_GOTCHAS}");
    }
    for g in &c.inherited_gotchas {
        let _ = writeln!(
            s,
            "- ⚠️ **{}**: {}",
            one_line(&g.severity),
            one_line(&g.issue)
        );
    }
    for g in &c.gotchas {
        let _ = writeln!(
            s,
            "- ⚠️ **{}**: {}",
            one_line(&g.severity),
            one_line(&g.summary)
        );
    }

    // The seed prints an empty heading when there is nothing; an empty
    // heading tells the model nothing, so it is left out.
    if !c.decisions.is_empty() {
        s.push_str("\n### Relevant Decisions\n");
        for d in &c.decisions {
            let _ = write!(s, "- {}", one_line(&d.summary));
            if let Some(r) = &d.rationale {
                let _ = write!(s, " (rationale: {})", one_line(r));
            }
            s.push('\n');
        }
    }

    if !c.prior_work.is_empty() {
        s.push_str("\n### Prior Work\n");
        for d in &c.prior_work {
            let _ = writeln!(s, "#### {}", one_line(&d.task));
            if !d.summary.is_empty() {
                let _ = writeln!(s, "{}", one_line(&d.summary));
            }
            if !d.files_to_read.is_empty() {
                s.push_str("\n**Files Created:**\n");
                for f in &d.files_to_read {
                    let _ = write!(s, "- `{}`", one_line(&f.file));
                    if !f.reason.is_empty() {
                        let _ = write!(s, ": {}", one_line(&f.reason));
                    }
                    s.push('\n');
                }
            }
        }
    }

    s.push_str("\n### Code References\n");
    if c.code_references.is_empty() {
        let _ = writeln!(s, "{NO_CODE_REFS}");
    } else {
        s.push_str("| Location | Component | Notes |\n|----------|-----------|-------|\n");
        for r in &c.code_references {
            let _ = writeln!(
                s,
                "| `{}` | {} | {} |",
                cell(&r.file),
                cell(&r.component),
                cell(&r.notes)
            );
        }
    }

    if !c.open_questions.is_empty() {
        s.push_str(
            "\n### Open Questions (Blocking)\n⚠️ The following questions need resolution:\n",
        );
        for q in &c.open_questions {
            let _ = writeln!(s, "- **{}**", one_line(&q.question));
            if let Some(context) = &q.context {
                let _ = writeln!(s, "  - Context: {}", one_line(context));
            }
            if let Some(r) = &q.recommendation {
                let _ = writeln!(s, "  - Recommendation: {}", one_line(r));
            }
        }
    }
    s
}

fn list(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

/// The seed's `## Context Debug` report (with what this version adds:
/// the complexity, skipped dependencies and handoffs that did not parse).
pub fn debug(c: &Computed) -> String {
    let d = &c.debug;
    let mut s = String::from("## Context Debug\n\n### Signals Extracted\n");
    let _ = writeln!(s, "- Keywords: {}", list(&c.signals.keywords));
    let _ = writeln!(s, "- Domains: {}", list(&c.signals.domains));
    let _ = writeln!(s, "- Files Mentioned: {}", list(&c.signals.files));
    let _ = writeln!(s, "- Task Type: {}", list(&c.signals.task_type));
    let _ = writeln!(
        s,
        "- Complexity: {}",
        c.complexity.map_or("normal", |x| x.name())
    );
    s.push_str("\n### Knowledge Graph Query\n");
    let _ = writeln!(s, "- Nodes matched: {}", d.nodes_matched);
    let _ = writeln!(s, "- Patterns found: {}", d.found[0]);
    let _ = writeln!(s, "- Gotchas found: {}", d.found[1]);
    let _ = writeln!(s, "- Decisions found: {}", d.found[2]);
    s.push_str("\n### Dependencies Processed\n");
    let _ = writeln!(s, "- Task IDs: {}", list(&d.dependency_ids));
    let _ = writeln!(s, "- Patterns inherited: {}", d.inherited[0]);
    let _ = writeln!(s, "- Warnings inherited: {}", d.inherited[1]);
    if !d.incomplete.is_empty() {
        let _ = writeln!(s, "- Skipped, not completed: {}", list(&d.incomplete));
    }
    if !d.missing.is_empty() {
        let _ = writeln!(s, "- Skipped, no such task: {}", list(&d.missing));
    }
    for e in &d.errors {
        let _ = writeln!(s, "- Handoff error: {e}");
    }
    s.push_str("\n### Context Map Filtering\n");
    if !d.map_found {
        s.push_str("- No context map found\n");
    }
    let _ = writeln!(s, "- Total entries: {}", d.map_total);
    let _ = writeln!(s, "- Entries after filter: {}", d.map_filtered);
    let _ = writeln!(s, "- Top relevance score: {}", d.top_score);
    s
}

/// One entry of a category in the JSON report.
#[derive(Debug, serde::Serialize)]
struct Entry<'a> {
    /// The memex id it came from.
    id: &'a str,
    /// The text shown.
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    severity: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rationale: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    component: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    notes: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    relevance: Option<u32>,
    /// `knowledge` or `handoff`.
    source: &'static str,
}

impl<'a> Entry<'a> {
    fn new(id: &'a str, text: &'a str, source: &'static str) -> Self {
        Self {
            id,
            text,
            location: None,
            severity: None,
            rationale: None,
            component: None,
            notes: None,
            relevance: None,
            source,
        }
    }
}

#[derive(Debug, serde::Serialize)]
struct Report<'a> {
    text: &'a str,
    task: &'a str,
    complexity: &'static str,
    signals: Signals<'a>,
    patterns: Vec<Entry<'a>>,
    gotchas: Vec<Entry<'a>>,
    decisions: Vec<Entry<'a>>,
    prior_work: Vec<Prior<'a>>,
    code_references: Vec<Entry<'a>>,
    open_questions: Vec<QuestionEntry<'a>>,
    related_tasks: &'a [String],
    errors: Vec<String>,
}

#[derive(Debug, serde::Serialize)]
struct Signals<'a> {
    keywords: &'a [String],
    domains: &'a [String],
    files: &'a [String],
    task_type: Option<&'a str>,
}

#[derive(Debug, serde::Serialize)]
struct Prior<'a> {
    id: &'a str,
    task: &'a str,
    summary: &'a str,
    files: &'a [crate::handoff::FileNote],
}

#[derive(Debug, serde::Serialize)]
struct QuestionEntry<'a> {
    id: &'a str,
    question: &'a str,
    context: Option<&'a str>,
    recommendation: Option<&'a str>,
}

/// The JSON report: `text`, `task`, `complexity`, `signals` and one list
/// per category, each entry with the memex id it came from (for an entry
/// from a handoff, the dependency's id). `tokens` is added by the host,
/// which counts with the model's encoding.
pub fn json(c: &Computed, text: &str) -> String {
    let mut patterns: Vec<Entry<'_>> = Vec::new();
    for p in &c.inherited_patterns {
        let mut e = Entry::new(&p.from, &p.pattern, "handoff");
        e.location = p.location.as_deref();
        patterns.push(e);
    }
    for p in &c.patterns {
        let mut e = Entry::new(&p.id, &p.summary, "knowledge");
        e.location = p.file.as_deref();
        e.relevance = Some(p.relevance);
        patterns.push(e);
    }
    let mut gotchas: Vec<Entry<'_>> = Vec::new();
    for g in &c.inherited_gotchas {
        let mut e = Entry::new(&g.from, &g.issue, "handoff");
        e.severity = Some(&g.severity);
        gotchas.push(e);
    }
    for g in &c.gotchas {
        let mut e = Entry::new(&g.id, &g.summary, "knowledge");
        e.severity = Some(&g.severity);
        e.relevance = Some(g.relevance);
        gotchas.push(e);
    }
    let report = Report {
        text,
        task: &c.task,
        complexity: c.complexity.map_or("normal", |x| x.name()),
        signals: Signals {
            keywords: &c.signals.keywords,
            domains: &c.signals.domains,
            files: &c.signals.files,
            task_type: c.signals.task_type.first().map(String::as_str),
        },
        patterns,
        gotchas,
        decisions: c
            .decisions
            .iter()
            .map(|d| {
                let mut e = Entry::new(&d.id, &d.summary, "knowledge");
                e.rationale = d.rationale.as_deref();
                e.relevance = Some(d.relevance);
                e
            })
            .collect(),
        prior_work: c
            .prior_work
            .iter()
            .map(|d| Prior {
                id: &d.id,
                task: &d.task,
                summary: &d.summary,
                files: &d.files_to_read,
            })
            .collect(),
        code_references: c
            .code_references
            .iter()
            .map(|r| {
                let mut e = Entry::new(&r.id, &r.file, "context_map");
                e.location = Some(&r.file);
                e.component = Some(&r.component);
                e.notes = Some(&r.notes);
                e.relevance = Some(r.relevance);
                e
            })
            .collect(),
        open_questions: c
            .open_questions
            .iter()
            .map(|q| QuestionEntry {
                id: &q.from,
                question: &q.question,
                context: q.context.as_deref(),
                recommendation: q.recommendation.as_deref(),
            })
            .collect(),
        related_tasks: &c.related_tasks,
        errors: c.debug.errors.iter().map(ToString::to_string).collect(),
    };
    serde_json::to_string(&report).unwrap_or_else(|_| "{}".to_owned())
}
