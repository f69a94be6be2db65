//! What the context section holds and why: the request `foveal context`
//! and the control socket's `context` make, and the explanation both print
//! (`foveal context --explain`, `/context` in `foveal tui`,
//! `foveal-context` in Emacs).

use std::collections::BTreeMap;

use foveal_memex::privacy::PrivacyTags;
use foveal_prompt::context::{ContextCache, ContextRequest, Origin, Section};
use foveal_registry::egress::{self, Gate};

use crate::config::Config;

/// What `foveal context` was asked.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
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

/// How many visible objects have a vector.
#[derive(Debug, Default)]
pub struct Vectors {
    /// Visible objects with a vector.
    pub with: usize,
    /// Visible objects without one yet.
    pub without: usize,
    /// Whether the focus has one (`None`: no focus, or not found).
    pub focus: Option<bool>,
}

impl Vectors {
    pub fn count(
        snapshot: &foveal_memex::MemexSnapshot,
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

/// The request for `options` under `config`.
pub fn request(config: &Config, options: &ContextOptions) -> ContextRequest {
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

/// The explained section (`foveal context --explain`) the host's next
/// cycle would see with focus `focus`, through the last door, and the
/// objects it shows with their places: what the control socket's
/// `context` request answers (`/context` in `foveal tui`, `foveal-context`
/// in Emacs). A private object is never among them.
pub fn explained(
    config: &Config,
    registry: &foveal_registry::registry::Snapshot,
    snapshot: &foveal_memex::MemexSnapshot,
    privacy: &PrivacyTags,
    gate: &Gate,
    focus: Option<String>,
) -> Result<(String, Vec<crate::control::ContextObject>), String> {
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
            foveal_registry::egress::Form::Outline,
            snapshot,
            registry,
        )
        .map_err(|e| e.to_string())?;
    let tokens = foveal_registry::tokens::global().count(&cleaned.text);
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
    snapshot: &foveal_memex::MemexSnapshot,
    privacy: &PrivacyTags,
    gate: &Gate,
) -> Vec<crate::control::ContextObject> {
    section
        .sources
        .iter()
        .filter_map(|(id, reason)| {
            let object = crate::tools::visible_object(snapshot, privacy, id).ok()?;
            let title = object.title();
            Some(crate::control::ContextObject {
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

pub fn source_name(section: &Section) -> String {
    match &section.origin {
        Origin::Skill { .. } => foveal_prompt::context::SKILL.to_owned(),
        Origin::Fallback(why) => format!("fallback: {why}"),
    }
}

/// The human-readable form (in the spirit of seed 001's `DEBUG_CONTEXT`).
pub fn explain(
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
