//! The `computed-context` skill: the knowledge slice a task needs
//! (seed 001), computed fresh from the memex for the task in focus —
//! patterns to follow, warnings, decisions, prior work from completed
//! dependencies, code references from the context map, blocking
//! questions — within the limits of the task's complexity.
//!
//! # Memex conventions
//!
//! - **A task** is a headline with a TODO keyword. Its objective is its
//!   title and body; its acceptance criteria are the checklist in its body
//!   (`- [ ] …`), else its `:CRITERIA:` property (items separated by `;`);
//!   its dependencies are `:DEPENDS_ON:` ids (separated by spaces, Org's
//!   convention, or commas); its complexity is `:COMPLEXITY:` (`easy`,
//!   `normal`, `complex`; default `normal`); its type is `:TYPE:`.
//! - **Its handoff** is a `#+begin_src yaml` block in its body, or a
//!   `:HANDOFF:` drawer there, holding `summary`,
//!   `dependencies_for_next`, `patterns_discovered`, `gotchas` (with
//!   `severity`), `open_questions` (with `blocking`), `files_created` and
//!   `files_modified`, in YAML 1.2 ([`yaml`]: flow mappings, quoted
//!   escapes and anchors too). One that does not parse is said once on
//!   stderr (the host's log at warn level) with its file and line, and in
//!   `--explain` and `--json`; the rest of the section stays.
//! - **A knowledge node** is a headline with `:KIND:` `pattern`, `gotcha`
//!   or `decision`. Its own tags are what queries match; its title is its
//!   summary; `:FILE:` (pattern), `:SEVERITY:` (gotcha, default `medium`)
//!   and `:RATIONALE:` (decision) complete it.
//! - **The context map** is the headline the configuration names
//!   (`context_map`, default `Context Map`: a title, an id, or a file
//!   ending in `.org`): an Org table with `Component`, `Location` and
//!   `Notes` columns, list items `- component :: location :: notes`, or
//!   child headlines with `:LOCATION:` (and `:NOTES:`), the title the
//!   component.
//!
//! `config/memex/computed.org` is an example memex that uses all of them;
//! `README.md` beside this crate says how this differs from the seed.
//!
//! # Calls
//!
//! - `components` with a focus that is a task: the `## Context
//!   (Computed)` section as prompt component 2100 (after the awareness
//!   outline); nothing when the focus is not a task. The configuration's
//!   `debug` adds the seed's `## Context Debug` report; `output: "json"`
//!   makes the content the JSON report instead (`foveal context
//!   --computed --json`).
//! - `components` with [`SignalKind::TASK_DONE`]: post-execution write-back
//!   ([`writeback`]) through the host's `memex_write`; no component.

pub mod cache;
pub mod handoff;
pub mod map;
pub mod org;
pub mod phases;
pub mod render;
pub mod signals;
pub mod writeback;
pub mod yaml;

#[cfg(test)]
mod testing;

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use foveal_sdk::{Component, ComponentsRequest, HostApiRef, Role, SignalKind, SkillError, Source};

use phases::{Complexity, Options};

/// The prompt component the section fills: after the awareness outline
/// (2000), before the logs (2500).
pub const COMPONENT_ID: u32 = 2100;

fn init(_host: &HostApiRef) -> Result<(), SkillError> {
    foveal_sdk::skill_debug!("computed-context ready");
    Ok(())
}

/// The skill's configuration, as the host passes it (JSON).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Add the "Context Debug" report (`DEBUG_CONTEXT=true`).
    debug: Option<bool>,
    /// `text` (default) or `json`.
    output: Option<String>,
    /// `easy`, `normal` or `complex`.
    default_complexity: Option<String>,
    /// Where the context map is.
    context_map: Option<String>,
    /// Where discovered knowledge goes.
    knowledge: Option<String>,
    /// The domain mapping, in order: `[["api", ["endpoint", …]], …]`.
    domains: Option<Vec<(String, Vec<String>)>>,
    /// Reuse per-file work between calls (default true).
    cache: Option<bool>,
    /// The host's write ticket, on a `TASK_DONE` call.
    write_ticket: Option<u64>,
}

/// What a call was asked, read from its configuration.
#[derive(Debug)]
struct Settings {
    options: Options,
    debug: bool,
    json: bool,
    ticket: Option<u64>,
}

fn settings(config_json: &str) -> Result<Settings, SkillError> {
    let text = config_json.trim();
    let config: Config = if text.is_empty() {
        Config::default()
    } else {
        serde_json::from_str(text).map_err(|e| {
            SkillError::invalid_input(format!("computed-context configuration: {e}"))
        })?
    };
    let mut options = Options::default();
    if let Some(c) = &config.default_complexity {
        options.default_complexity = Complexity::parse(c).ok_or_else(|| {
            SkillError::invalid_input(format!(
                "computed-context configuration: default_complexity {c:?} is not easy, normal or complex"
            ))
        })?;
    }
    if let Some(m) = config.context_map {
        options.context_map = m;
    }
    if let Some(k) = config.knowledge {
        options.knowledge = k;
    }
    if let Some(d) = config.domains {
        options.domains = d
            .into_iter()
            .map(|(domain, triggers)| {
                (
                    domain.to_lowercase(),
                    triggers.into_iter().map(|t| t.to_lowercase()).collect(),
                )
            })
            .collect();
    }
    if let Some(cache) = config.cache {
        options.cache = cache;
    }
    let json = match config.output.as_deref() {
        None | Some("text") => false,
        Some("json") => true,
        Some(other) => {
            return Err(SkillError::invalid_input(format!(
                "computed-context configuration: output {other:?} is not \"text\" or \"json\""
            )));
        }
    };
    Ok(Settings {
        options,
        debug: config.debug.unwrap_or(false),
        json,
        ticket: config.write_ticket,
    })
}

fn components(request: &ComponentsRequest<'_>) -> Result<Vec<Component>, SkillError> {
    let settings = settings(request.config_json.as_str())?;
    let Some(focus) = request.focus.as_ref().into_option().map(|f| f.as_str()) else {
        return Ok(Vec::new());
    };
    if request.signal == SignalKind::TASK_DONE {
        return post_execution(request.memex, focus, &settings).map(|()| Vec::new());
    }
    let Some(computed) = phases::compute(request.memex, focus, &settings.options) else {
        // Not a task (or not visible): no section at all.
        return Ok(Vec::new());
    };
    for e in &computed.debug.errors {
        warn_once(e.to_string());
    }
    let mut text = render::markdown(&computed);
    if settings.debug {
        text.push('\n');
        text.push_str(&render::debug(&computed));
    }
    if settings.json {
        text = render::json(&computed, &text);
    }
    let mut component = Component::new(
        COMPONENT_ID,
        "computed_context",
        "Context (Computed)",
        Role::SYSTEM,
        text,
    );
    if request.explain {
        let mut sources = Vec::new();
        let mut add = |id: &str, reason: &str| {
            if !id.is_empty() {
                sources.push(Source {
                    id: id.into(),
                    reason: reason.into(),
                });
            }
        };
        add(&computed.task, "task");
        for p in &computed.inherited_patterns {
            add(&p.from, "handoff pattern");
        }
        for p in &computed.patterns {
            add(&p.id, "pattern");
        }
        for g in &computed.inherited_gotchas {
            add(&g.from, "handoff gotcha");
        }
        for g in &computed.gotchas {
            add(&g.id, "gotcha");
        }
        for d in &computed.decisions {
            add(&d.id, "decision");
        }
        for d in &computed.prior_work {
            add(&d.id, "prior work");
        }
        for r in &computed.code_references {
            add(&r.id, "code reference");
        }
        component.sources = sources.into();
    }
    Ok(vec![component])
}

/// Says `message` on the host's log at warn level — which the host
/// prints on stderr at its default level — once per process: the section
/// is computed every cycle, and a broken handoff said every turn would
/// bury the rest of stderr.
fn warn_once(message: String) {
    static SAID: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let first = SAID
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(message.clone());
    if first {
        foveal_sdk::skill_warn!("{message}");
    }
}

fn post_execution(
    view: &foveal_sdk::memex::MemexView<'_>,
    task: &str,
    settings: &Settings,
) -> Result<(), SkillError> {
    let Some(ticket) = settings.ticket else {
        return Err(SkillError::invalid_input(
            "a TASK_DONE call without a write ticket: the host opens one for post-execution",
        ));
    };
    let plan = writeback::plan(view, task, &settings.options)
        .map_err(|e| SkillError::invalid_input(e.to_string()))?;
    for note in &plan.notes {
        foveal_sdk::skill_info!("post-execution of {task}: {note}");
    }
    if plan.edits.is_empty() {
        return Ok(());
    }
    let edits = serde_json::json!({ "edits": plan.edits }).to_string();
    let answer = foveal_sdk::host::memex_write(ticket, &edits)?;
    foveal_sdk::skill_debug!("post-execution of {task}: {answer}");
    Ok(())
}

foveal_sdk::export_skill! {
    name: "computed-context",
    priority: 70,
    dependencies: [],
    description: "The knowledge slice the task in focus needs: patterns, warnings, decisions, prior work from completed dependencies, code references, blocking questions, within the limits of its complexity (seed 001); writes back what a finished task's handoff taught.",
    component_ids: [2100],
    init: init,
    hooks: { components: components },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_reads_every_key_and_refuses_unknown_ones() {
        let s = settings(
            r#"{"debug": true, "output": "json", "default_complexity": "complex",
                "context_map": "Map", "knowledge": "Learned", "domains": [["Infra", ["Deploy"]]],
                "cache": false, "write_ticket": 7}"#,
        )
        .unwrap();
        assert!(s.debug && s.json);
        assert_eq!(s.ticket, Some(7));
        assert_eq!(s.options.default_complexity, Complexity::Complex);
        assert_eq!(s.options.context_map, "Map");
        assert_eq!(s.options.knowledge, "Learned");
        assert_eq!(
            s.options.domains,
            [("infra".to_owned(), vec!["deploy".to_owned()])]
        );
        assert!(!s.options.cache);
        let d = settings("").unwrap();
        assert!(!d.debug && !d.json);
        assert_eq!(d.options, Options::default());
        let err = settings(r#"{"limits": 1}"#).unwrap_err();
        assert!(err.message.contains("unknown field"), "{err:?}");
        let err = settings(r#"{"default_complexity": "huge"}"#).unwrap_err();
        assert!(err.message.contains("huge"), "{err:?}");
        let err = settings(r#"{"output": "xml"}"#).unwrap_err();
        assert!(err.message.contains("xml"), "{err:?}");
    }
}
