//! The prompt's tables (`[identity]`, `[model]`, `[prices]`,
//! `[context_types]`, resolved in `foveal-prompt`) read through the whole
//! configuration.

use std::path::Path;

use crate::config::{Config, Overrides};
use foveal_prompt::execution::{self, ToolCategory};
use foveal_prompt::prompt::settings::*;
use foveal_registry::tokens::Encoding;
use foveal_settings::ConfigError;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml(
        text,
        Some(Path::new("conf/foveal.toml")),
        &Overrides::default(),
        &|_| None,
    )
}

#[test]
fn defaults_without_the_tables() {
    let c = parse("").unwrap();
    assert_eq!(c.prompt, PromptConfig::default());
    assert_eq!(c.prompt.model.context_limit, 128_000);
    assert_eq!(c.prompt.model.encoding, Encoding::O200kBase);
    assert!(c.prompt.prices.is_empty());
}

#[test]
fn the_tables_are_read() {
    let text = r#"
[identity]
name = "Ada"
text = "You help."
feedback = "Shorter."
mandates = ["Cite ids."]

[model]
name = "gpt-4"
context_limit = 8192
encoding = "cl100k_base"

[prices."gpt-4"]
input = 30
output = 60

[context_types.reflection]
enabled_components = [0, 6000]
tool_filter = "all"
token_budget = 4000
max_iterations = 2

[context_types.reflection.component_overrides.goals]
content = "Finish the report."

[context_types.goal_decompose]
tool_filter = ["noop"]
"#;
    let c = parse(text).unwrap().prompt;
    assert_eq!(c.identity.name, "Ada");
    assert_eq!(c.identity.mandates, ["Cite ids."]);
    assert_eq!(c.model.encoding, Encoding::Cl100kBase);
    assert_eq!(c.prices["gpt-4"].cached_input, 30.0);
    let reflection = c.context_types.get("reflection").unwrap();
    assert_eq!(reflection.enabled_components, [0, 6000]);
    assert_eq!(reflection.tool_filter, None);
    assert_eq!(reflection.token_budget, Some(4000));
    assert_eq!(reflection.override_of("goals"), Some("Finish the report."));
    // The seed's override stays unless replaced.
    assert!(reflection.override_of("system_prompt").is_some());
    assert_eq!(
        c.context_types.get("goal_decompose").unwrap().tool_filter,
        Some(vec!["noop".to_owned()])
    );
}

#[test]
fn a_context_types_execution_settings_are_read() {
    let text = r#"
[context_types.tick_event]
execution_mode = "plan_execute"
max_iterations = 10
allowed_tool_categories = ["read", "terminal", "read"]
terminal_ends_loop = false
dangerous_requires_confirm = true
allows_multi_tool = true
allows_sub_agents = false

[context_types.goal_decompose]
allowed_tool_categories = "all"
"#;
    let c = parse(text).unwrap().prompt;
    let t = c.context_types.get("tick_event").unwrap();
    assert_eq!(t.execution_mode, execution::ExecutionMode::PlanExecute);
    assert_eq!(t.max_iterations, 10);
    assert_eq!(
        t.allowed_tool_categories,
        Some(vec![ToolCategory::Read, ToolCategory::Terminal])
    );
    assert!(!t.terminal_ends_loop && t.dangerous_requires_confirm);
    assert!(t.allows_multi_tool && !t.allows_sub_agents);
    let g = c.context_types.get("goal_decompose").unwrap();
    assert_eq!(g.allowed_tool_categories, None);
    assert_eq!(g.execution_mode, execution::ExecutionMode::SingleAction);
}

#[test]
fn bad_execution_settings_name_file_line_key_and_choices() {
    let err = parse("[context_types.reflection]\nexecution_mode = \"react\"\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "conf/foveal.toml:2:18: `context_types.reflection.execution_mode`: unknown execution mode \"react\" (did you mean \"react_loop\"?); the choices are single_action, react_loop, plan_execute"
    );
    let err = parse("[context_types.reflection]\nexecution_mode = \"batch\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with("unknown execution mode \"batch\"; the choices are single_action, react_loop, plan_execute"),
        "{err}"
    );
    let err = parse("[context_types.reflection]\nmax_iterations = 11\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "conf/foveal.toml:2:18: `context_types.reflection.max_iterations`: 11 is out of range; must be from 1 to 10"
    );
    let err = parse("[context_types.reflection]\nallowed_tool_categories = [\"reed\"]\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "conf/foveal.toml:2:27: `context_types.reflection.allowed_tool_categories`: unknown tool category \"reed\" (did you mean \"read\"?); the choices are read, write, terminal, dangerous"
    );
    let err = parse("[context_types.reflection]\nallowed_tool_categories = \"none\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"none\" is not a category filter"), "{err}");
    let err = parse("[context_types.reflection]\nallows_subagents = true\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("did you mean `allows_sub_agents`?"), "{err}");
}

#[test]
fn mistakes_name_file_line_and_key() {
    let err = parse("[context_types.reflektion]\ntoken_budget = 5\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "conf/foveal.toml:1:16: unknown context type `reflektion`; did you mean `reflection`?"
        ),
        "{err}"
    );
    let err = parse("[context_types.reflection]\ntoken_budget = 0\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "conf/foveal.toml:2:16: `context_types.reflection.token_budget`: 0 is out of range; must be at least 1"
    );
    let err = parse("[context_types.tick_event]\nenabled_components = [0, 9000]\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("9000 is out of range; must be from 0 to 7999"),
        "{err}"
    );
    let err = parse("[context_types.tick_event]\ntool_filter = \"none\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("conf/foveal.toml:2:15: `context_types.tick_event.tool_filter`: \"none\" is not a tool filter"), "{err}");
    let err =
        parse("[context_types.tick_event.component_overrides.sytem_prompt]\ncontent = \"x\"\n")
            .unwrap_err()
            .to_string();
    assert!(err.contains("did you mean `system_prompt`?"), "{err}");
    let err = parse("[context_types.tick_event]\ntoken_budgt = 5\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("did you mean `token_budget`?"), "{err}");
    let err = parse("[model]\nencoding = \"gpt2\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("conf/foveal.toml:2:12: `model.encoding`: unknown encoding \"gpt2\""),
        "{err}"
    );
    let err = parse("[prices.x]\ninput = -1\noutput = 1\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`prices.x.input`: -1 is out of range; must be at least 0"),
        "{err}"
    );
    let err = parse("[identity]\ntext = \"a\"\nfile = \"b\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("not both"), "{err}");
    let err = parse("[identity]\nfile = \"missing.md\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("conf/foveal.toml:2:8: `identity.file`: cannot read conf/missing.md"),
        "{err}"
    );
}
