//! `foveal context`: the context section the think step would send, and
//! why it holds what it holds.
//!
//! What is printed is what would leave the process: the section after the
//! last-door check ([`crate::egress::Gate`]), which removes any private
//! text and secret-looking strings and says how many it removed.

use std::collections::BTreeMap;
use std::io::Write as _;

use crate::cli::exit::Exit;
use crate::config::Config;
use crate::context::{ContextCache, ContextRequest, Origin, Section};
use crate::egress::{self, Gate};
use crate::memex::privacy::PrivacyTags;
use crate::memex::view::SnapshotView;

/// What `foveal context` was asked.
#[derive(Debug, Clone)]
pub struct ContextOptions {
    /// The object in foveal focus.
    pub focus: Option<String>,
    /// Overrides `context.semantic_threshold`.
    pub threshold: Option<f64>,
    /// Tokens the section may use.
    pub budget: Option<u32>,
    /// Print JSON.
    pub json: bool,
    /// Print the human-readable explanation.
    pub explain: bool,
    /// Print the computed context of the focus (seed 001) instead.
    pub computed: bool,
}

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

/// How many visible objects have a vector.
#[derive(Debug, Default)]
struct Vectors {
    with: usize,
    without: usize,
    /// Whether the focus has one (`None`: no focus, or not found).
    focus: Option<bool>,
}

impl Vectors {
    fn count(
        snapshot: &crate::memex::MemexSnapshot,
        privacy: &PrivacyTags,
        focus: Option<&str>,
    ) -> Self {
        let mut v = Self::default();
        for file in snapshot.files() {
            let mask = privacy.private_mask(file);
            for (object, private) in file.objects.iter().zip(mask) {
                if private {
                    continue;
                }
                if object.vector.is_some() {
                    v.with += 1;
                } else {
                    v.without += 1;
                }
            }
        }
        v.focus = focus
            .and_then(|id| snapshot.get(id))
            .filter(|o| !privacy.is_private(*o))
            .map(|o| o.vector().is_some());
        v
    }
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

/// The request for `options` under `config`.
pub(crate) fn request(config: &Config, options: &ContextOptions) -> ContextRequest {
    ContextRequest {
        focus: options.focus.clone(),
        budget: options.budget,
        threshold: options
            .threshold
            .unwrap_or(config.context.semantic_threshold),
        explain: options.json || options.explain,
        ..ContextRequest::default()
    }
    .with_awareness(&config.awareness)
}

/// `foveal context`.
pub fn run(config: &Config, options: &ContextOptions) -> anyhow::Result<Exit> {
    if let Err(message) = check(options) {
        eprintln!("error: {message}");
        return Ok(Exit::Usage);
    }
    let memex = match crate::cli::memex::open(config) {
        Ok(memex) => memex,
        Err(exit) => return Ok(exit),
    };
    let registry = crate::cli::skills::open_registry(config)?;
    let privacy = PrivacyTags::new(&config.privacy_tags);
    // The vectors computed so far (`foveal memex embed`, `foveal run`);
    // none is computed here: a command never waits for a model.
    crate::embed::service::attach_cached(&config.embedding, &config.data_dir, &memex, &privacy);
    let snapshot = memex.snapshot();
    let mut options = options.clone();
    if let Some(focus) = options.focus.as_mut()
        && let Err(exit) = crate::cli::focus::resolve_focus(
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
        crate::egress::Form::Outline,
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
    let tokens = crate::tokens::global().count(text);
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

/// The explained section (`foveal context --explain`) the host's next
/// cycle would see with focus `focus`, through the last door, and the
/// objects it shows with their places: what the control socket's
/// `context` request answers (`/context` in `foveal tui`, `foveal-context`
/// in Emacs). A private object is never among them.
pub(crate) fn explained(
    config: &Config,
    registry: &crate::registry::Snapshot,
    snapshot: &crate::memex::MemexSnapshot,
    privacy: &PrivacyTags,
    gate: &Gate,
    focus: Option<String>,
) -> Result<(String, Vec<crate::agent::control::ContextObject>), String> {
    let options = ContextOptions {
        focus,
        threshold: None,
        budget: None,
        json: false,
        explain: true,
        computed: false,
    };
    let vectors = Vectors::count(snapshot, privacy, options.focus.as_deref());
    let section =
        ContextCache::default().section(registry, snapshot, privacy, &request(config, &options));
    let cleaned = gate
        .clean_as(
            section.text(),
            crate::egress::Form::Outline,
            snapshot,
            registry,
        )
        .map_err(|e| e.to_string())?;
    let tokens = crate::tokens::global().count(&cleaned.text);
    let text = explain(
        &section,
        &cleaned.text,
        tokens,
        &cleaned.report,
        &options,
        config,
        &vectors,
    );
    Ok((text, shown_objects(&section, snapshot, privacy, gate)))
}

/// The objects `section` shows, each with its file and headline line; a
/// title through the gate (a secret in it is redacted). The privacy check
/// is made again here: an id that is not a visible object is left out.
fn shown_objects(
    section: &Section,
    snapshot: &crate::memex::MemexSnapshot,
    privacy: &PrivacyTags,
    gate: &Gate,
) -> Vec<crate::agent::control::ContextObject> {
    section
        .sources
        .iter()
        .filter_map(|(id, reason)| {
            let object = crate::agent::tools::visible_object(snapshot, privacy, id).ok()?;
            let title = object.title();
            Some(crate::agent::control::ContextObject {
                id: id.clone(),
                title: gate
                    .clean_quietly(title, snapshot)
                    .unwrap_or_else(|| title.to_owned()),
                file: object.file().path.clone(),
                line: object.line(),
                reason: reason.clone(),
            })
        })
        .collect()
}

fn source_name(section: &Section) -> String {
    match &section.origin {
        Origin::Skill { .. } => crate::context::SKILL.to_owned(),
        Origin::Fallback(why) => format!("fallback: {why}"),
    }
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

/// The human-readable form (in the spirit of seed 001's `DEBUG_CONTEXT`).
fn explain(
    section: &Section,
    text: &str,
    tokens: usize,
    removed: &egress::Report,
    options: &ContextOptions,
    config: &Config,
    vectors: &Vectors,
) -> String {
    use std::fmt::Write as _;
    let mut s = String::from("## Context Debug\n\n### Request\n");
    let _ = writeln!(
        s,
        "- Focus: {}",
        options.focus.as_deref().unwrap_or("(none)")
    );
    let _ = writeln!(
        s,
        "- Threshold: {}",
        options
            .threshold
            .unwrap_or(config.context.semantic_threshold)
    );
    let _ = writeln!(
        s,
        "- Budget: {}",
        options
            .budget
            .map_or_else(|| "none".to_owned(), |b| format!("{b} tokens"))
    );
    let _ = writeln!(s, "- Privacy tags: {}", config.privacy_tags.join(", "));
    let _ = writeln!(s, "- Rendered by: {}", source_name(section));
    let _ = writeln!(
        s,
        "- Vectors: {} visible objects have one, {} have none yet{}",
        vectors.with,
        vectors.without,
        if vectors.without > 0 {
            " (not promoted by similarity until embedded: `foveal memex embed`, or `foveal run` in the background)"
        } else {
            ""
        }
    );
    if vectors.focus == Some(false) {
        let _ = writeln!(
            s,
            "- The focus has no vector yet: nothing is promoted by similarity"
        );
    }
    let _ = writeln!(s, "\n### Result\n- Tokens: {tokens}");
    let _ = writeln!(s, "- Bytes: {}", text.len());
    let _ = writeln!(
        s,
        "- Last door: {} private passages, secrets: {} (filter: {})",
        removed.private,
        removed.secrets_summary(),
        removed.filter
    );
    let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, reason) in &section.sources {
        let kind = reason.split(' ').next().unwrap_or(reason);
        *by_reason.entry(kind).or_default() += 1;
    }
    let _ = writeln!(s, "- Objects shown: {}", section.sources.len());
    for (reason, n) in &by_reason {
        let _ = writeln!(s, "  - {reason}: {n}");
    }
    // `file` counts whole files of the map, not objects.
    let omitted: u32 = section
        .omitted
        .iter()
        .filter(|(reason, _)| reason != "file")
        .map(|(_, n)| n)
        .sum();
    let _ = writeln!(s, "- Objects left out: {omitted}");
    for (reason, n) in &section.omitted {
        let why = match reason.as_str() {
            "depth" => "deeper than 2, not foveal, not similar",
            "file" => "files of the map, the least recently changed, did not fit the budget",
            _ => "did not fit the budget",
        };
        let _ = writeln!(s, "  - {reason}: {n} ({why})");
    }
    let _ = writeln!(s, "\n### Objects shown");
    for (id, reason) in &section.sources {
        let _ = writeln!(s, "- {id}: {reason}");
    }
    let _ = writeln!(s, "\n## Context\n");
    s.push_str(text);
    s
}

/// `foveal context --computed`: the computed-context skill's section for
/// the task in focus, through the last-door check like every output of
/// this command. Exits 1 (not found) when the skill is not loaded or
/// failed, or the focus is not a task: there is no such section then.
fn computed(
    config: &Config,
    options: &ContextOptions,
    registry: &crate::registry::Registry,
    snapshot: &crate::memex::MemexSnapshot,
    privacy: &PrivacyTags,
) -> anyhow::Result<Exit> {
    use crate::computed::{self, Mode};
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
            .clean_as(text, crate::egress::Form::Outline, snapshot, &skills)
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
        report["tokens"] = crate::tokens::global().count(&text).into();
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
