//! `foveal context`: the context section the think step would send, and
//! why it holds what it holds.
//!
//! What is printed is what would leave the process: the section after the
//! last-door check ([`foveal_registry::egress::Gate`]), which removes any
//! private text and secret-looking strings and says how many it removed.

use std::collections::BTreeMap;
use std::fmt::Write as _;

pub use crate::explain::ContextOptions;
use crate::explain::{Vectors, explain, request, source_name};
use foveal_memex::view::SnapshotView;
use foveal_prompt::context::{ContextCache, Section};
use foveal_registry::egress::{self, Form};

use super::{Exit, Parts, Printed};

/// The JSON `foveal context --json` prints.
#[derive(Debug, serde::Serialize)]
struct Report<'a> {
    text: &'a str,
    tokens: usize,
    budget: Option<u32>,
    included: Vec<Included<'a>>,
    omitted: BTreeMap<&'a str, u32>,
    /// `awareness`, or `fallback: <why>`.
    source: String,
    /// What the last-door check removed: counts, never the text.
    redacted: Redacted,
    /// Visible objects without a vector yet: never promoted by similarity.
    without_vector: usize,
}

#[derive(Debug, serde::Serialize)]
struct Redacted {
    private: usize,
    secrets: BTreeMap<String, usize>,
    /// `skill` (the privacy skill) or `host` (the host's own filter).
    filter: String,
}

#[derive(Debug, serde::Serialize)]
struct Included<'a> {
    id: &'a str,
    /// The object's handle in the compact outline (`^k3`), which every
    /// `--focus` and tool takes too.
    handle: String,
    reason: &'a str,
}

/// Checks the command line's values before any loading.
pub fn check(options: &ContextOptions) -> Result<(), Printed> {
    if let Some(t) = options.threshold
        && !(-1.0..=1.0).contains(&t)
    {
        return Err(Printed::default().fail(
            Exit::Usage,
            format_args!(
                "--threshold {t} is out of range; must be from -1 to 1: a cosine similarity"
            ),
        ));
    }
    if let Some(focus) = &options.focus
        && focus.trim().is_empty()
    {
        return Err(Printed::default().fail(
            Exit::Usage,
            "--focus needs an object id (see `foveal memex query`)",
        ));
    }
    Ok(())
}

/// `foveal context` on `parts`.
pub fn run(parts: Parts<'_>, options: &ContextOptions) -> Printed {
    if let Err(printed) = check(options) {
        return printed;
    }
    let Parts {
        config,
        registry,
        memex: snapshot,
        privacy,
        gate,
    } = parts;
    let mut printed = Printed::default();
    let mut options = options.clone();
    if !parts.resolve_focus(&mut options.focus, &mut printed) {
        return printed;
    }
    let options = &options;
    // Counted for the report and the explanation only: a pass over every
    // object of the memex.
    let vectors = || Vectors::count(snapshot, privacy, options.focus.as_deref());
    if options.computed {
        return computed(parts, options, printed);
    }
    let skills = registry.snapshot();
    let section =
        ContextCache::default().section(&skills, snapshot, privacy, &request(config, options));
    let cleaned = match gate.clean_as(section.text(), Form::Outline, snapshot, &skills) {
        Ok(cleaned) => cleaned,
        Err(error) => return printed.fail(Exit::NotFound, error),
    };
    let text: &str = &cleaned.text;
    let tokens = foveal_registry::tokens::global().count(text);
    if options.json {
        let view = SnapshotView::new(snapshot, privacy);
        let owned = view.view();
        let handles = foveal_sdk::handle::Handles::new(&owned.as_view());
        let mut report = report(
            &section,
            text,
            tokens,
            options.budget,
            &cleaned.report,
            &handles,
        );
        report.without_vector = vectors().without;
        printed.stdout = json(&report);
    } else if options.explain {
        printed.stdout = explain(
            &section,
            text,
            tokens,
            &cleaned.report,
            options,
            config,
            &vectors(),
        );
    } else {
        printed.stdout = text.to_owned();
    }
    printed
}

/// `value` as pretty JSON and a line break.
fn json(value: &impl serde::Serialize) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

fn report<'a>(
    section: &'a Section,
    text: &'a str,
    tokens: usize,
    budget: Option<u32>,
    removed: &egress::Report,
    handles: &foveal_sdk::handle::Handles,
) -> Report<'a> {
    Report {
        text,
        tokens,
        budget,
        included: section
            .sources
            .iter()
            .map(|(id, reason)| Included {
                id,
                handle: handles.of(id).to_string(),
                reason,
            })
            .collect(),
        omitted: section
            .omitted
            .iter()
            .map(|(reason, n)| (reason.as_str(), *n))
            .collect(),
        source: source_name(section),
        redacted: Redacted {
            private: removed.private,
            secrets: removed.secrets.iter().cloned().collect(),
            filter: removed.filter.to_string(),
        },
        without_vector: 0,
    }
}

/// `foveal context --computed`: the computed-context skill's section for
/// the task in focus, through the last-door check like every output of
/// this command. Ends not found when the skill is not loaded or failed,
/// or the focus is not a task: there is no such section then.
fn computed(parts: Parts<'_>, options: &ContextOptions, mut printed: Printed) -> Printed {
    use foveal_prompt::computed::{self, Mode};
    let Parts {
        config,
        registry,
        memex: snapshot,
        privacy,
        gate,
    } = parts;
    let focus = options.focus.as_deref().unwrap_or_default();
    let mode = if options.json {
        Mode::Json
    } else if options.explain {
        Mode::Explain
    } else {
        Mode::Text
    };
    let skills = registry.snapshot();
    let content = match computed::compute(&skills, snapshot, privacy, &config.computed, focus, mode)
    {
        Ok(Some(content)) => content,
        Ok(None) => {
            return printed.fail(
                Exit::NotFound,
                format_args!(
                    "{focus:?} is not a task (a headline with a TODO keyword): no computed context"
                ),
            );
        }
        Err(why) => {
            return printed.fail(Exit::NotFound, format_args!("no computed context: {why}"));
        }
    };
    let clean = |text: &str| -> Result<(String, egress::Report), String> {
        let cleaned = gate
            .clean_as(text, Form::Outline, snapshot, &skills)
            .map_err(|e| e.to_string())?;
        Ok((cleaned.text.into_owned(), cleaned.report))
    };
    if mode == Mode::Json {
        let mut report: serde_json::Value = match serde_json::from_str(&content) {
            Ok(report) => report,
            Err(e) => {
                return printed.fail(
                    Exit::NotFound,
                    format_args!("the computed-context skill's report is not JSON: {e}"),
                );
            }
        };
        // The last door, on every string of the report.
        let mut removed = 0usize;
        let mut first_error = None;
        walk_strings(&mut report, &mut |s| match clean(s) {
            Ok((text, report)) => {
                removed += report.total();
                *s = text;
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        });
        if let Some(e) = first_error {
            return printed.fail(Exit::NotFound, e);
        }
        let text = report["text"].as_str().unwrap_or_default().to_owned();
        report["tokens"] = foveal_registry::tokens::global().count(&text).into();
        report["redacted"] = removed.into();
        printed.stdout = json(&report);
        return printed;
    }
    let text = match clean(&content) {
        Ok((text, _)) => text,
        Err(e) => return printed.fail(Exit::NotFound, e),
    };
    if mode == Mode::Explain {
        // The report first, then the section it explains.
        match text.find("## Context Debug") {
            Some(at) => {
                let _ = write!(printed.stdout, "{}\n{}", &text[at..], &text[..at]);
            }
            None => printed.stdout = text,
        }
    } else {
        printed.stdout = text;
    }
    printed
}

/// Calls `f` on every string of `value`.
fn walk_strings(value: &mut serde_json::Value, f: &mut dyn FnMut(&mut String)) {
    match value {
        serde_json::Value::String(s) => f(s),
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| walk_strings(v, f)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|v| walk_strings(v, f)),
        _ => {}
    }
}
