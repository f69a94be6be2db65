//! Which headlines are projects: the rules people write them by.
//!
//! Seed 000 knew one rule: a headline tagged `project` that is not done.
//! Few Org files follow it; these rules find projects as people write
//! them (each on by default, chosen with `[awareness] projects`):
//!
//! - `tag`: a headline tagged `project` (any case), as the seed; also each
//!   top-level headline of a file whose `#+FILETAGS:` (or setup file's)
//!   holds `project` — the seed reads a headline's own tags, not the ones
//!   it inherits, so a file's tag counts where an own tag would: at the
//!   top of the outline;
//! - `keyword`: a headline whose TODO keyword is `PROJ` or `PROJECT`
//!   (Doom Emacs' and others' keyword for projects). The host only reads a
//!   keyword its file declares (`#+TODO:`, or through `#+SETUPFILE:`), as
//!   Emacs does;
//! - `gtd`: Bernt Hansen's rule, "a task with subtasks is a project": a
//!   headline in a not-done TODO state with a child that has a TODO
//!   keyword;
//! - `heading`: a headline directly under a top-level headline named
//!   `Projects` (any case; org-gtd and many GTD files), and each top-level
//!   headline of a file named `projects.org` (but one named `Projects`,
//!   whose children are the projects).
//!
//! `tag`, `keyword` and `heading` read what the user wrote to say "this
//! is a project"; `gtd` infers it from the shape of the outline. A file
//! that says which headlines are projects in one of the first ways is
//! taken at its word: `gtd` applies only in files where none of the other
//! rules (those that are on) finds a headline, done or not. Otherwise a
//! file of tagged projects would see every task with subtasks inside a
//! finished project, or in an area of responsibility, shown as a project
//! of its own.
//!
//! Whatever the rule, a project is active when its TODO state is not a
//! done state, and only the outermost active ones are rendered: a project
//! inside another is shown inside it.
//!
//! The rules are pure functions of a file's view, here so that the
//! awareness skill (which renders the projects) and the host (whose
//! `foveal memex stats` counts them) apply the same ones.
//!
//! # Example
//!
//! ```
//! use foveal_sdk::memex::MemexView;
//! use foveal_sdk::projects::{FileFacts, Rules, active_projects};
//!
//! /// How many active projects the memex has, under every rule.
//! fn count(view: &MemexView<'_>) -> usize {
//!     let mut found = Vec::new();
//!     for file in view.files() {
//!         active_projects(file, Rules::default(), FileFacts::default(), &mut found);
//!     }
//!     found.len()
//! }
//! # assert_eq!(count(&MemexView::EMPTY), 0);
//! ```

use crate::memex::FileView;

/// One rule, as `[awareness] projects` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleName {
    /// Tagged `project`.
    Tag,
    /// TODO keyword `PROJ` or `PROJECT`.
    Keyword,
    /// A task with subtasks.
    Gtd,
    /// Under a `Projects` heading, or in `projects.org`.
    Heading,
}

impl RuleName {
    /// Every rule, in the order they are documented.
    pub const ALL: [RuleName; 4] = [Self::Tag, Self::Keyword, Self::Gtd, Self::Heading];

    /// The name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tag => "tag",
            Self::Keyword => "keyword",
            Self::Gtd => "gtd",
            Self::Heading => "heading",
        }
    }
}

/// The rules that are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    bits: u8,
}

impl Default for Rules {
    /// Every rule.
    fn default() -> Self {
        Self::of(&RuleName::ALL)
    }
}

impl Rules {
    /// The rules named.
    pub fn of(names: &[RuleName]) -> Self {
        Self {
            bits: names.iter().fold(0, |bits, &n| bits | 1 << n as u8),
        }
    }

    /// No rule: nothing is a project.
    pub const NONE: Rules = Rules { bits: 0 };

    /// Whether `rule` is on.
    pub fn has(self, rule: RuleName) -> bool {
        self.bits & (1 << rule as u8) != 0
    }

    /// The rules of a configuration's list of names; an unknown name is
    /// an error naming the known ones.
    pub fn parse(names: &[String]) -> Result<Self, String> {
        let mut rules = Self::NONE;
        for name in names {
            let rule = RuleName::ALL
                .into_iter()
                .find(|r| r.name().eq_ignore_ascii_case(name.trim()))
                .ok_or_else(|| {
                    format!("unknown rule {name:?}; the rules are tag, keyword, gtd and heading")
                })?;
            rules.bits |= 1 << rule as u8;
        }
        Ok(rules)
    }
}

/// Why a headline is a project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// It is tagged `project`.
    Tag,
    /// Its file's `#+FILETAGS:` holds `project`, and it is at the top.
    FileTag,
    /// Its TODO keyword is `PROJ`.
    Proj,
    /// Its TODO keyword is `PROJECT`.
    Project,
    /// It is a task with subtasks.
    Gtd,
    /// It is directly under a top-level `Projects` headline.
    Heading,
    /// It is at the top of a file named `projects.org`.
    ProjectsFile,
}

impl Rule {
    /// The rule of the configuration ([`RuleName`]) this comes under.
    pub fn rule_name(self) -> RuleName {
        match self {
            Self::Tag | Self::FileTag => RuleName::Tag,
            Self::Proj | Self::Project => RuleName::Keyword,
            Self::Gtd => RuleName::Gtd,
            Self::Heading | Self::ProjectsFile => RuleName::Heading,
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Tag => "tag, tagged :project:",
            Self::FileTag => "tag, from #+FILETAGS",
            Self::Proj => "keyword PROJ",
            Self::Project => "keyword PROJECT",
            Self::Gtd => "gtd, a task with subtasks",
            Self::Heading => "heading, under Projects",
            Self::ProjectsFile => "heading, top of projects.org",
        })
    }
}

/// What the host told about one file (absent parts are read from the
/// file's visible text, or assumed).
#[derive(Debug, Clone, Copy, Default)]
pub struct FileFacts<'a> {
    /// Its file tags, setup files' included.
    pub file_tags: Option<&'a [String]>,
    /// Its TODO keywords.
    pub todo_keywords: Option<&'a [String]>,
}

/// The active projects of `file` under `rules`, outermost only, in
/// outline order: `(index, end of its subtree, rule)`, appended to `out`.
pub fn active_projects(
    file: &FileView<'_>,
    rules: Rules,
    facts: FileFacts<'_>,
    out: &mut Vec<(u32, u32, Rule)>,
) {
    let len = file.len() as u32;
    if len == 0 {
        return;
    }
    let mut found: Vec<(u32, Rule)> = Vec::new();
    // Whether the file says which headlines are projects.
    let mut says = false;
    if rules.has(RuleName::Tag) {
        let tagged = file.with_tag("project");
        says |= !tagged.is_empty();
        found.extend(tagged.iter().map(|&i| (i, Rule::Tag)));
        let file_tagged = match facts.file_tags {
            Some(tags) => tags.iter().any(|t| t.eq_ignore_ascii_case("project")),
            None => preamble_file_tags(file).any(|t| t.eq_ignore_ascii_case("project")),
        };
        if file_tagged {
            says = true;
            found.extend(roots(file).map(|r| (r, Rule::FileTag)));
        }
    }
    if rules.has(RuleName::Keyword)
        && facts
            .todo_keywords
            .is_none_or(|k| k.iter().any(|k| keyword_rule(k).is_some()))
    {
        for i in 0..len {
            let todo = file.object(i).todo;
            // `PROJ` or `PROJECT`: four or seven bytes.
            if (todo.len == 4 || todo.len == 7)
                && let Some(rule) = file.todo(i).and_then(keyword_rule)
            {
                says = true;
                found.push((i, rule));
            }
        }
    }
    if rules.has(RuleName::Heading) {
        let projects_file = file_name(file.path.as_str()).eq_ignore_ascii_case("projects.org");
        for r in roots(file) {
            if file.title(r).trim().eq_ignore_ascii_case("projects") {
                says = true;
                found.extend(file.children(r).iter().map(|&c| (c, Rule::Heading)));
            } else if projects_file {
                says = true;
                found.push((r, Rule::ProjectsFile));
            }
        }
    }
    let start = out.len();
    if says {
        // One rule per headline, the first in the order of `Rule`.
        found.sort_unstable_by_key(|&(i, rule)| (i, rule as u8));
        found.dedup_by_key(|&mut (i, _)| i);
        for (p, rule) in found {
            let object = file.object(p);
            if object.done || out[start..].last().is_some_and(|&(_, end, _)| p < end) {
                continue;
            }
            out.push((p, object.end.min(len), rule));
        }
    } else if rules.has(RuleName::Gtd) {
        // Outermost first: a project's subtree is skipped whole.
        let mut i = 0;
        while i < len {
            let object = file.object(i);
            if object.todo.len > 0
                && !object.done
                && file
                    .children(i)
                    .iter()
                    .any(|&c| file.object(c).todo.len > 0)
            {
                let end = object.end.min(len).max(i + 1);
                out.push((i, end, Rule::Gtd));
                i = end;
            } else {
                i += 1;
            }
        }
    }
}

/// The rule a TODO keyword names, if it names projects.
fn keyword_rule(keyword: &str) -> Option<Rule> {
    if keyword.eq_ignore_ascii_case("PROJ") {
        Some(Rule::Proj)
    } else if keyword.eq_ignore_ascii_case("PROJECT") {
        Some(Rule::Project)
    } else {
        None
    }
}

/// The top-level headlines of `file` (those without a parent), in order:
/// each subtree's end is the next one.
pub fn roots<'a>(file: &'a FileView<'a>) -> impl Iterator<Item = u32> + 'a {
    let len = file.len() as u32;
    std::iter::successors((len > 0).then_some(0u32), move |&r| {
        let next = file.object(r).end.max(r + 1);
        (next < len).then_some(next)
    })
}

/// The last part of a path.
pub fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// The text before the first headline of `file` (the preamble Org reads
/// in-buffer settings from), at most [`PREAMBLE_MAX`] bytes when the file
/// has no headline.
pub fn preamble<'a>(file: &FileView<'a>) -> &'a str {
    let text = file.text.as_str();
    if file.is_empty() {
        let mut end = text.len().min(PREAMBLE_MAX);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        return &text[..end];
    }
    let title = (file.object(0).title.start as usize).min(text.len());
    let line = text[..title].rfind('\n').map_or(0, |at| at + 1);
    &text[..line]
}

/// Bytes of a file without headlines read for its settings.
const PREAMBLE_MAX: usize = 64 << 10;

/// The values of the `#+KEY:` lines of `file`'s preamble, in order.
pub fn preamble_keyword<'a>(file: &FileView<'a>, key: &'a str) -> impl Iterator<Item = &'a str> {
    preamble(file).lines().filter_map(move |line| {
        let l = line.trim_start().strip_prefix("#+")?;
        let (k, value) = l.split_once(':')?;
        k.eq_ignore_ascii_case(key).then(|| value.trim())
    })
}

/// The file tags of `file`'s preamble (`#+FILETAGS:`; a setup file's are
/// not read here).
pub(crate) fn preamble_file_tags<'a>(file: &FileView<'a>) -> impl Iterator<Item = &'a str> {
    preamble_keyword(file, "FILETAGS").flat_map(|value| {
        value
            .split(|c: char| c == ':' || c.is_whitespace())
            .filter(|t| !t.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_by_name_and_refuse_unknown_ones() {
        let all: Vec<String> = ["tag", "keyword", "gtd", "heading"]
            .map(String::from)
            .to_vec();
        assert_eq!(Rules::parse(&all).unwrap(), Rules::default());
        let tag = Rules::parse(&["Tag".to_owned()]).unwrap();
        assert!(tag.has(RuleName::Tag) && !tag.has(RuleName::Gtd));
        assert_eq!(Rules::parse(&[]).unwrap(), Rules::NONE);
        let err = Rules::parse(&["tags".to_owned()]).unwrap_err();
        assert!(err.contains("unknown rule \"tags\""), "{err}");
    }

    #[test]
    fn file_names_come_after_the_last_separator() {
        assert_eq!(file_name("/m/sub/projects.org"), "projects.org");
        assert_eq!(file_name("projects.org"), "projects.org");
    }
}
