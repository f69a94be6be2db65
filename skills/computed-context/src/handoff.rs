//! Phase 3 (seed 001, `extractDependencyContext`): the handoffs of a
//! task's completed dependencies, read from the memex.
//!
//! A handoff is a `#+begin_src yaml` block or a `:HANDOFF:` drawer in a
//! task's body ([`crate::org::body_parts`]), in YAML 1.2 ([`crate::yaml`]).
//! One that does not parse is a [`HandoffError`] naming its file and
//! line; the dependency is still used without it, and the skill says the
//! error on the host's log at warn level, which stderr shows.

use foveal_sdk::memex::MemexView;

use crate::org::{self, Obj};
use crate::phases::{Options, Task, read_task};
use crate::yaml::{self, Yaml};

/// A file a handoff passes on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileNote {
    /// The path.
    pub file: String,
    /// Why it matters.
    pub reason: String,
}

/// A pattern from a handoff.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InheritedPattern {
    /// The pattern.
    pub pattern: String,
    /// Where to see it.
    pub location: Option<String>,
    /// The tags it applies to.
    pub applies_to: Vec<String>,
    /// The id of the task it came from.
    pub from: String,
}

/// A gotcha from a handoff.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InheritedGotcha {
    /// The issue.
    pub issue: String,
    /// Its severity (default `medium`).
    pub severity: String,
    /// The id of the task it came from.
    pub from: String,
}

/// An open question from a handoff.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Question {
    /// The question.
    pub question: String,
    /// Its context.
    pub context: Option<String>,
    /// What the dependency's author recommends.
    pub recommendation: Option<String>,
    /// The id of the task it came from.
    pub from: String,
}

/// A file a handoff says was created or modified.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TouchedFile {
    /// The path.
    pub path: String,
    /// The lines (`10-40`), if given.
    pub lines: Option<String>,
    /// Its purpose or description.
    pub purpose: Option<String>,
}

/// A handoff, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Handoff {
    /// `summary` (or `outcome`).
    pub summary: Option<String>,
    /// `dependencies_for_next`.
    pub dependencies_for_next: Vec<FileNote>,
    /// `patterns_discovered`.
    pub patterns: Vec<InheritedPattern>,
    /// `gotchas`.
    pub gotchas: Vec<InheritedGotcha>,
    /// `open_questions`, with whether each is blocking.
    pub questions: Vec<(Question, bool)>,
    /// `files_created` and `files_modified`.
    pub files: Vec<TouchedFile>,
}

/// A handoff that could not be read: where and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HandoffError {
    /// The task.
    pub task: String,
    /// The memex file.
    pub file: String,
    /// The 1-based line in that file.
    pub line: u32,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for HandoffError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: the handoff of task {} does not parse: {}",
            self.file, self.line, self.task, self.message
        )
    }
}

/// Reads the handoff of `task`, if it has one.
pub fn read_handoff(task: &Task<'_>) -> Result<Option<Handoff>, HandoffError> {
    let body_line = task.obj.body_line();
    let error = |line: u32, message: String| HandoffError {
        task: task.obj.id().to_owned(),
        file: task.obj.file.path.as_str().to_owned(),
        line,
        message,
    };
    if let Some(open) = task.unclosed_handoff {
        return Err(error(
            body_line + open,
            "the handoff block is never closed (`#+end_src` or `:END:` is missing)".into(),
        ));
    }
    let Some(block) = &task.handoff else {
        return Ok(None);
    };
    let y = yaml::parse(block.yaml)
        .map_err(|e| error(body_line + block.first_line + e.line, e.message))?;
    if !matches!(y, Yaml::Map(_) | Yaml::Null) {
        return Err(error(
            body_line + block.first_line,
            "a handoff is a mapping of `key: value` lines (dependencies_for_next, patterns_discovered, gotchas, open_questions, files_created, files_modified)".into(),
        ));
    }
    let from = task.obj.id().to_owned();
    let list = |key: &str| y.get(key).map(Yaml::items).unwrap_or(&[]);
    let mut h = Handoff {
        summary: y.text(&["summary", "outcome"]).map(str::to_owned),
        ..Handoff::default()
    };
    for item in list("dependencies_for_next") {
        let file = item.as_str().or_else(|| item.text(&["file", "path"]));
        if let Some(file) = file {
            h.dependencies_for_next.push(FileNote {
                file: file.to_owned(),
                reason: item
                    .text(&["reason", "why", "purpose", "description"])
                    .unwrap_or("")
                    .to_owned(),
            });
        }
    }
    for item in list("patterns_discovered") {
        let pattern = item
            .as_str()
            .or_else(|| item.text(&["pattern", "summary", "name"]));
        if let Some(pattern) = pattern {
            h.patterns.push(InheritedPattern {
                pattern: pattern.to_owned(),
                location: item.text(&["location", "file"]).map(str::to_owned),
                applies_to: item
                    .get("applies_to")
                    .map(|a| {
                        a.items()
                            .iter()
                            .filter_map(Yaml::as_str)
                            .flat_map(|s| s.split([',', ' ']))
                            .filter(|s| !s.is_empty())
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
                from: from.clone(),
            });
        }
    }
    for item in list("gotchas") {
        let issue = item
            .as_str()
            .or_else(|| item.text(&["issue", "gotcha", "description", "summary"]));
        if let Some(issue) = issue {
            h.gotchas.push(InheritedGotcha {
                issue: issue.to_owned(),
                severity: item
                    .text(&["severity"])
                    .map_or_else(|| "medium".to_owned(), str::to_ascii_lowercase),
                from: from.clone(),
            });
        }
    }
    for item in list("open_questions") {
        let question = item.as_str().or_else(|| item.text(&["question"]));
        if let Some(question) = question {
            let blocking = item.get("blocking").is_some_and(Yaml::truthy);
            h.questions.push((
                Question {
                    question: question.to_owned(),
                    context: item.text(&["context"]).map(str::to_owned),
                    recommendation: item.text(&["recommendation"]).map(str::to_owned),
                    from: from.clone(),
                },
                blocking,
            ));
        }
    }
    for key in ["files_created", "files_modified"] {
        for item in list(key) {
            let path = item.as_str().or_else(|| item.text(&["path", "file"]));
            if let Some(path) = path {
                h.files.push(TouchedFile {
                    path: path.to_owned(),
                    lines: item.text(&["lines"]).map(str::to_owned),
                    purpose: item
                        .text(&["purpose", "description", "reason"])
                        .map(str::to_owned),
                });
            }
        }
    }
    Ok(Some(h))
}

/// One completed dependency (phase 3).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Dependency {
    /// Its memex id.
    pub id: String,
    /// Its title.
    pub task: String,
    /// The handoff's summary, else the first lines of its body.
    pub summary: String,
    /// `dependencies_for_next`.
    pub files_to_read: Vec<FileNote>,
    /// `patterns_discovered`.
    pub patterns: Vec<InheritedPattern>,
    /// Gotchas whose severity is not low.
    pub gotchas: Vec<InheritedGotcha>,
    /// Blocking questions.
    pub open_questions: Vec<Question>,
}

/// Phase 3's output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dependencies {
    /// Completed dependencies, in `:DEPENDS_ON:` order.
    pub done: Vec<Dependency>,
    /// Dependencies skipped because they are not completed.
    pub incomplete: Vec<String>,
    /// Ids that name no visible object.
    pub missing: Vec<String>,
    /// Handoffs that did not parse (the dependency is kept without them).
    pub errors: Vec<HandoffError>,
}

/// Phase 3: `extractDependencyContext`.
pub fn dependency_context(
    view: &MemexView<'_>,
    task: &Task<'_>,
    options: &Options,
) -> Dependencies {
    let mut out = Dependencies::default();
    for &id in &task.depends_on {
        let Some((file, index)) = view.find(id) else {
            out.missing.push(id.to_owned());
            continue;
        };
        let obj = Obj { file, index };
        if !obj.done() {
            out.incomplete.push(id.to_owned());
            continue;
        }
        let Some(dep) = read_task(obj, options) else {
            out.incomplete.push(id.to_owned());
            continue;
        };
        let handoff = match read_handoff(&dep) {
            Ok(h) => h.unwrap_or_default(),
            Err(e) => {
                out.errors.push(e);
                Handoff::default()
            }
        };
        let summary = handoff.summary.clone().unwrap_or_else(|| {
            let parts = org::body_parts(obj.body());
            let text: Vec<&str> = parts
                .objective
                .iter()
                .map(|l| l.trim())
                .filter(|l| !l.is_empty() && org::checklist_item(l).is_none())
                .collect();
            shorten(&text.join(" "), 400)
        });
        out.done.push(Dependency {
            id: id.to_owned(),
            task: obj.title().to_owned(),
            summary,
            files_to_read: handoff.dependencies_for_next,
            patterns: handoff.patterns,
            // The seed's two filters.
            gotchas: handoff
                .gotchas
                .into_iter()
                .filter(|g| g.severity != "low")
                .collect(),
            open_questions: handoff
                .questions
                .into_iter()
                .filter(|(_, blocking)| *blocking)
                .map(|(q, _)| q)
                .collect(),
        });
    }
    out
}

fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let cut = s[..end].rfind(' ').unwrap_or(end);
    format!("{}…", &s[..cut])
}
