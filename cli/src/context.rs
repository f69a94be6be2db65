//! `foveal context`: the context section the think step would send, and
//! why it holds what it holds.
//!
//! What is printed is what would leave the process: the section after the
//! last-door check ([`foveal_registry::egress::Gate`]), which removes any private
//! text and secret-looking strings and says how many it removed.

use std::collections::BTreeMap;
use std::io::Write as _;

use crate::exit::Exit;
use foveal_agent::config::Config;
pub use foveal_agent::explain::ContextOptions;
use foveal_agent::explain::{Vectors, explain, request, source_name};
use foveal_memex::privacy::PrivacyTags;
use foveal_memex::view::SnapshotView;
use foveal_prompt::context::{ContextCache, Section};
use foveal_registry::egress::{self, Gate};

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
fn check(options: &ContextOptions) -> Result<(), String> {
    if let Some(t) = options.threshold
        && !(-1.0..=1.0).contains(&t)
    {
        return Err(format!(
            "--threshold {t} is out of range; must be from -1 to 1: a cosine similarity"
        ));
    }
    if let Some(focus) = &options.focus
        && focus.trim().is_empty()
    {
        return Err("--focus needs an object id (see `foveal memex query`)".to_owned());
    }
    Ok(())
}

/// `foveal context`.
pub fn run(config: &Config, options: &ContextOptions) -> anyhow::Result<Exit> {
    if let Err(message) = check(options) {
        eprintln!("error: {message}");
        return Ok(Exit::Usage);
    }
    let memex = match crate::memex::open(config) {
        Ok(memex) => memex,
        Err(exit) => return Ok(exit),
    };
    let registry = crate::skills::open_registry(config)?;
    let privacy = PrivacyTags::new(&config.privacy_tags);
    // The vectors computed so far (`foveal memex embed`, `foveal run`);
    // none is computed here: a command never waits for a model.
    foveal_embed::service::attach_cached(&config.embedding, &config.data_dir, &memex, &privacy);
    let snapshot = memex.snapshot();
    let mut options = options.clone();
    if let Some(focus) = options.focus.as_mut()
        && let Err(exit) = crate::focus::resolve_focus(
            &SnapshotView::new(&snapshot, &privacy).view().as_view(),
            focus,
        )
    {
        return Ok(exit);
    }
    let options = &options;
    let vectors = Vectors::count(&snapshot, &privacy, options.focus.as_deref());
    if options.computed {
        return computed(config, options, &registry, &snapshot, &privacy);
    }
    let section = ContextCache::default().section(
        &registry.snapshot(),
        &snapshot,
        &privacy,
        &request(config, options),
    );
    let gate = match Gate::from_config(config) {
        Ok(gate) => gate,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(Exit::Usage);
        }
    };
    let cleaned = match gate.clean_as(
        section.text(),
        foveal_registry::egress::Form::Outline,
        &snapshot,
        &registry.snapshot(),
    ) {
        Ok(cleaned) => cleaned,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(Exit::NotFound);
        }
    };
    let text: &str = &cleaned.text;
    let tokens = foveal_registry::tokens::global().count(text);
    let mut out = std::io::stdout().lock();
    if options.json {
        let view = SnapshotView::new(&snapshot, &privacy);
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
        report.without_vector = vectors.without;
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else if options.explain {
        write!(
            out,
            "{}",
            explain(
                &section,
                text,
                tokens,
                &cleaned.report,
                options,
                config,
                &vectors
            )
        )?;
    } else {
        write!(out, "{text}")?;
    }
    Ok(Exit::Ok)
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
/// this command. Exits 1 (not found) when the skill is not loaded or
/// failed, or the focus is not a task: there is no such section then.
fn computed(
    config: &Config,
    options: &ContextOptions,
    registry: &foveal_registry::registry::Registry,
    snapshot: &foveal_memex::MemexSnapshot,
    privacy: &PrivacyTags,
) -> anyhow::Result<Exit> {
    use foveal_prompt::computed::{self, Mode};
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
            eprintln!(
                "error: {focus:?} is not a task (a headline with a TODO keyword): no computed context"
            );
            return Ok(Exit::NotFound);
        }
        Err(why) => {
            eprintln!("error: no computed context: {why}");
            return Ok(Exit::NotFound);
        }
    };
    let gate = match Gate::from_config(config) {
        Ok(gate) => gate,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(Exit::Usage);
        }
    };
    let clean = |text: &str| -> anyhow::Result<(String, egress::Report)> {
        let cleaned = gate
            .clean_as(
                text,
                foveal_registry::egress::Form::Outline,
                snapshot,
                &skills,
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok((cleaned.text.into_owned(), cleaned.report))
    };
    let mut out = std::io::stdout().lock();
    if mode == Mode::Json {
        let mut report: serde_json::Value = serde_json::from_str(&content)
            .map_err(|e| anyhow::anyhow!("the computed-context skill's report is not JSON: {e}"))?;
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
            eprintln!("error: {e}");
            return Ok(Exit::NotFound);
        }
        let text = report["text"].as_str().unwrap_or_default().to_owned();
        report["tokens"] = foveal_registry::tokens::global().count(&text).into();
        report["redacted"] = removed.into();
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
        return Ok(Exit::Ok);
    }
    let (text, _) = match clean(&content) {
        Ok(cleaned) => cleaned,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(Exit::NotFound);
        }
    };
    if mode == Mode::Explain {
        // The report first, then the section it explains.
        match text.find("## Context Debug") {
            Some(at) => write!(out, "{}\n{}", &text[at..], &text[..at])?,
            None => write!(out, "{text}")?,
        }
    } else {
        write!(out, "{text}")?;
    }
    Ok(Exit::Ok)
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
