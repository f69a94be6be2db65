//! `foveal tool call NAME ARGS`: runs one skill tool the way the agent
//! runs it when the model calls it — the declarations checked as the agent
//! checks them, the tool refused private text or a secret in its arguments
//! (whatever its category), the call through the registry (panic guard,
//! deadline), a dangerous tool only with the user's confirmation, and the
//! result through the privacy gate — and prints the result. No model is
//! involved. When the memex does not open, arguments cannot be checked for
//! private text: a call with any text in its arguments is refused, and
//! only one without (`{}`) runs, lent an empty memex.
//!
//! Also the tool part of `foveal skill check`: each declaration checked,
//! and each read or terminal tool called once with example arguments made
//! from its schema.

use std::io::{IsTerminal as _, Write as _};
use std::time::Instant;

use crate::exit::Exit;
use crate::skill_check::{Status, Step};
use foveal_agent::SkillToolCall;
use foveal_agent::config::Config;
use foveal_agent::tools::{Tool, ToolSource};
use foveal_memex::view::SnapshotView;
use foveal_prompt::execution::ToolCategory;
use foveal_registry::registry::{Slot, hooks};

/// `foveal tool call NAME ARGS [--focus ID]`.
pub fn run(
    config: &Config,
    name: &str,
    args: &str,
    mut focus: Option<String>,
) -> anyhow::Result<Exit> {
    let args: serde_json::Value = match serde_json::from_str(args) {
        Ok(value @ serde_json::Value::Object(_)) => value,
        Ok(other) => {
            eprintln!(
                "error: invalid arguments: expected a JSON object, like '{{\"tag\": \"work\"}}', not {other}"
            );
            return Ok(Exit::Usage);
        }
        Err(e) => {
            eprintln!(
                "error: invalid arguments: not JSON: {e} (quote them for the shell: '{{\"tag\": \"work\"}}')"
            );
            return Ok(Exit::Usage);
        }
    };
    let registry = crate::skills::open_registry(config)?;
    let skills = registry.snapshot();
    let builtins = foveal_agent::tools::builtins();
    if builtins.iter().any(|t| t.name == name) {
        eprintln!(
            "error: `{name}` is one of the host's own tools; `foveal tool call` runs the tools skills offer (the host's act on the memex inside a running host)"
        );
        return Ok(Exit::NotFound);
    }
    let offered = foveal_agent::skill_tools(&skills, &builtins);
    let Some(tool) = offered.iter().find(|t| t.name == name) else {
        if offered.is_empty() {
            eprintln!(
                "error: no skill offers a tool named {name:?}; no loaded skill offers any (see `foveal skill-list`)"
            );
        } else {
            let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
            eprintln!(
                "error: no skill offers a tool named {name:?}; the skills offer: {}",
                names.join(", ")
            );
        }
        return Ok(Exit::NotFound);
    };
    let ToolSource::Skill(skill) = &tool.source else {
        return Ok(Exit::NotFound);
    };
    // A tool given no text runs without a memex; one given text does not:
    // without the memex its arguments cannot be checked for private text
    // (fail closed), and a skill's category says nothing certain about
    // what the tool does with them.
    let snapshot = match foveal_memex::Memex::open_with(&config.memex_paths, config.memex.clone()) {
        Ok(memex) => memex.snapshot(),
        Err(error) if holds_text(&args) => {
            eprintln!(
                "error: refused: the memex did not open ({error}), so the arguments of {name} cannot be checked for private text; nothing was run (give the memex with --memex)"
            );
            return Ok(Exit::NotFound);
        }
        Err(error) => {
            eprintln!("note: the tool is lent an empty memex: {error} (give one with --memex)");
            std::sync::Arc::new(foveal_memex::MemexSnapshot::default())
        }
    };
    let gate = foveal_registry::egress::Gate::from_config(config)?;
    // As the agent: a tool is refused private text or a secret in its
    // arguments before it runs, or anyone is asked to confirm it.
    if let Err(refused) = foveal_agent::tools::check_arguments(tool, &args, &gate, &snapshot) {
        eprintln!("error: {refused}");
        return Ok(Exit::NotFound);
    }
    if tool.category == ToolCategory::Dangerous {
        // As the agent: a dangerous tool waits for the user's yes, and a
        // run that cannot ask refuses it.
        if !std::io::stdin().is_terminal() {
            eprintln!(
                "error: refused: {name} is dangerous and needs the user's confirmation, which this run cannot ask (stdin is not a terminal)"
            );
            return Ok(Exit::NotFound);
        }
        eprint!("allow the dangerous tool {name}({args})? [y/N] ");
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            eprintln!("error: refused: the user did not confirm {name}");
            return Ok(Exit::NotFound);
        }
    }
    let privacy = foveal_memex::privacy::PrivacyTags::new(&config.privacy_tags);
    let view = SnapshotView::new(&snapshot, &privacy);
    if let Some(focus) = focus.as_mut() {
        let owned = view.view();
        if let Err(exit) = crate::focus::resolve_focus(&owned.as_view(), focus) {
            return Ok(exit);
        }
    }
    let result = foveal_agent::call_skill_tool(
        &skills,
        SkillToolCall {
            skill,
            name,
            args: &args,
            view,
            focus,
            config: config.skill_config(skill).to_owned(),
            session: None,
        },
    );
    let shown = |text: &str| match gate.clean(text, &snapshot, &skills) {
        Ok(cleaned) => cleaned.text.into_owned(),
        Err(error) => format!("[withheld: the privacy gate could not check this text: {error}]"),
    };
    match result {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            let text = shown(&text);
            out.write_all(text.as_bytes())?;
            if !text.ends_with('\n') {
                writeln!(out)?;
            }
            Ok(Exit::Ok)
        }
        Err(error) => {
            eprintln!("error: {}", shown(&error));
            Ok(Exit::NotFound)
        }
    }
}

/// Whether `value` holds a string or a number at any depth (keys
/// included): text the write check of its arguments would read.
fn holds_text(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(_) | serde_json::Value::Number(_) => true,
        serde_json::Value::Array(items) => items.iter().any(holds_text),
        serde_json::Value::Object(map) => !map.is_empty(),
        serde_json::Value::Null | serde_json::Value::Bool(_) => false,
    }
}

/// Calls the skill's `tools` hook and checks each declaration as the agent
/// does — against the host's tools and those of the other skills of
/// `skills`, in priority order; returns the step and the tools offered.
pub(crate) fn check_tools(
    skills: &foveal_registry::registry::Snapshot,
    slot: &Slot,
    started: Instant,
) -> (Step, Vec<Tool>) {
    let skill = slot.skill().info().name.clone();
    let declared = match slot.call(hooks::TOOLS, |f| f()) {
        Ok(declared) => declared,
        Err(error) => {
            return (
                Step::new("tools", Status::Fail, error.to_string()).timed(started.elapsed(), None),
                Vec::new(),
            );
        }
    };
    let elapsed = started.elapsed();
    let bytes = declared
        .iter()
        .map(|d| d.name.len() + d.description.len() + d.parameters_json.len() + d.category.len())
        .sum();
    let host = foveal_agent::tools::builtins();
    let offered = foveal_agent::skill_tools(skills, &host);
    let tools: Vec<Tool> = offered
        .iter()
        .filter(|t| t.source == ToolSource::Skill(skill.clone()))
        .cloned()
        .collect();
    let problems: Vec<String> = declared
        .iter()
        .filter(|d| !tools.iter().any(|t| t.name == d.name.as_str()))
        .map(|d| {
            format!(
                "{} left out: {}",
                d.name,
                foveal_agent::tool_problem(d, &host, &offered)
            )
        })
        .collect();
    let listed: Vec<String> = tools
        .iter()
        .map(|t| format!("{} ({})", t.name, t.category.name()))
        .collect();
    let mut detail = if listed.is_empty() {
        "no tool offered".to_owned()
    } else {
        listed.join(", ")
    };
    let status = if problems.is_empty() {
        Status::Ok
    } else {
        detail.push_str("; ");
        detail.push_str(&problems.join("; "));
        Status::Warn
    };
    (
        Step::new("tools", status, detail).timed(elapsed, Some(bytes)),
        tools,
    )
}

/// Calls one tool with example arguments, through the agent's own path
/// (read and terminal tools only: a check never runs a write or a
/// dangerous tool). `skills` is the snapshot the skill serves in.
pub(crate) fn try_tool(
    skills: &foveal_registry::registry::Snapshot,
    slot: &Slot,
    tool: &Tool,
    view: &SnapshotView,
    config: &str,
) -> Step {
    let name = format!("tool {}", tool.name);
    if matches!(tool.category, ToolCategory::Write | ToolCategory::Dangerous) {
        return Step::new(
            &name,
            Status::Skip,
            format!(
                "not called: a {} tool; `foveal tool call {}` runs it",
                tool.category.name(),
                tool.name
            ),
        );
    }
    let args = example_args(&tool.parameters);
    let skill = &slot.skill().info().name;
    let panics = slot.skill().total_panics();
    let started = Instant::now();
    let result = foveal_agent::call_skill_tool(
        skills,
        SkillToolCall {
            skill,
            name: &tool.name,
            args: &args,
            view: view.clone(),
            focus: None,
            config: config.to_owned(),
            session: None,
        },
    );
    let elapsed = started.elapsed();
    let crashed = slot.skill().total_panics() > panics || slot.skill().is_quarantined();
    match result {
        Ok(text) => Step::new(&name, Status::Ok, format!("{args} answered"))
            .timed(elapsed, Some(text.len())),
        Err(error) if crashed => {
            Step::new(&name, Status::Fail, format!("{args}: {error}")).timed(elapsed, None)
        }
        Err(error) => Step::new(
            &name,
            Status::Warn,
            format!("{args} (made from its schema) was refused: {error}"),
        )
        .timed(elapsed, None),
    }
}

/// Arguments that satisfy a JSON schema's required properties, by type:
/// `"example"`, `1`, `true`, `[]`, `{}`.
pub fn example_args(schema: &serde_json::Value) -> serde_json::Value {
    use serde_json::{Value, json};
    let mut args = serde_json::Map::new();
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect::<Vec<_>>())
        .unwrap_or_default();
    for key in required {
        let kind = properties
            .and_then(|p| p.get(key))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("string");
        let value = match kind {
            "integer" | "number" => json!(1),
            "boolean" => json!(true),
            "array" => json!([]),
            "object" => json!({}),
            _ => json!("example"),
        };
        args.insert(key.to_owned(), value);
    }
    Value::Object(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_arguments_fill_the_required_properties_by_type() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"tag": {"type": "string"}, "n": {"type": "integer"}, "all": {"type": "boolean"}},
            "required": ["tag", "n"]
        });
        assert_eq!(
            example_args(&schema),
            serde_json::json!({"tag": "example", "n": 1})
        );
        assert_eq!(example_args(&serde_json::json!({})), serde_json::json!({}));
    }
}
