//! The configuration of prompt assembly: `[identity]`, `[model]`,
//! `[prices.<model>]` and `[context_types.<name>]` of `foveal.toml` (see
//! the commented defaults in `config/foveal.toml`). A context type's
//! execution settings are read here too; `[execution]` is read by
//! [`crate::config`].
//!
//! Read by [`crate::config`], with the same error style: a bad value is an
//! error with the file, line and column, the key, and the closest valid
//! name when there is one.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::context_types::{self, ContextTypes};
use crate::execution::{self, ToolCategory};
use crate::tokens::Encoding;
use foveal_settings::{ConfigError, EnvLookup, closest, line_column, resolve_path};

/// The identity text used when the configuration gives none.
pub const DEFAULT_IDENTITY: &str = "You are foveal, an assistant working over the user's memex: a knowledge base of Org-mode files. The context shows the part of the memex in focus in full and the rest as an outline. Answer from what you are shown, say when you do not know, and keep replies short.";

/// Who the assistant is: the inputs of the system prompt (seed 003,
/// contract 1) that come from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `identity.name`.
    pub name: String,
    /// `identity.text`, or the contents of `identity.file`.
    pub text: String,
    /// `identity.feedback`: notes on the assistant's behaviour.
    pub feedback: String,
    /// `identity.mandates`: standing mandates, dropped first when the
    /// prompt is over budget (L2).
    pub mandates: Vec<String>,
}

impl Default for Identity {
    fn default() -> Self {
        Self {
            name: "foveal".to_owned(),
            text: DEFAULT_IDENTITY.to_owned(),
            feedback: String::new(),
            mandates: Vec::new(),
        }
    }
}

/// The model prompts are assembled, counted and priced for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSettings {
    /// `model.name`: the key of its `[prices.<name>]`.
    pub name: String,
    /// `model.context_limit`: its context window in tokens, the limit no
    /// prompt may pass even without the token-economics skill.
    pub context_limit: u32,
    /// `model.encoding`: how its tokens are counted.
    pub encoding: Encoding,
}

impl Default for ModelSettings {
    fn default() -> Self {
        Self {
            name: "gpt-4o".to_owned(),
            context_limit: 128_000,
            encoding: Encoding::O200kBase,
        }
    }
}

/// A model's prices per million tokens (`[prices.<model>]`), in whatever
/// currency they are written in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    /// Input tokens.
    pub input: f64,
    /// Input tokens the provider served from its prompt cache (default:
    /// the input price).
    pub cached_input: f64,
    /// Output tokens.
    pub output: f64,
}

/// The resolved prompt configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PromptConfig {
    /// `[identity]`.
    pub identity: Identity,
    /// `[model]`.
    pub model: ModelSettings,
    /// `[prices.<model>]`, by model name.
    pub prices: BTreeMap<String, Prices>,
    /// The seven context types with `[context_types.<name>]` applied.
    pub context_types: ContextTypes,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileIdentity {
    name: Option<Spanned<String>>,
    text: Option<Spanned<String>>,
    file: Option<Spanned<String>>,
    feedback: Option<String>,
    mandates: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileModel {
    name: Option<Spanned<String>>,
    context_limit: Option<Spanned<u32>>,
    encoding: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FilePrices {
    input: Spanned<f64>,
    cached_input: Option<Spanned<f64>>,
    output: Spanned<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileContextType {
    enabled_components: Option<Vec<Spanned<u32>>>,
    component_overrides: Option<BTreeMap<Spanned<String>, FileOverride>>,
    tool_filter: Option<Spanned<FileToolFilter>>,
    token_budget: Option<Spanned<u32>>,
    execution_mode: Option<Spanned<String>>,
    max_iterations: Option<Spanned<u32>>,
    allowed_tool_categories: Option<Spanned<FileToolFilter>>,
    terminal_ends_loop: Option<bool>,
    dangerous_requires_confirm: Option<bool>,
    allows_multi_tool: Option<bool>,
    allows_sub_agents: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileOverride {
    content: String,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum FileToolFilter {
    Word(String),
    List(Vec<String>),
}

/// The `[identity]`, `[model]`, `[prices]` and `[context_types]` tables
/// as read from the file.
#[derive(Debug)]
pub(crate) struct FileParts<'a> {
    pub identity: &'a FileIdentity,
    pub model: &'a FileModel,
    pub prices: &'a BTreeMap<String, FilePrices>,
    pub context_types: &'a BTreeMap<Spanned<String>, FileContextType>,
}

struct Errors<'a> {
    text: &'a str,
    path: &'a Path,
}

impl Errors<'_> {
    fn at(&self, offset: usize, key: &str, message: impl std::fmt::Display) -> ConfigError {
        let (line, column) = line_column(self.text, offset);
        ConfigError::Invalid {
            path: self.path.to_owned(),
            line,
            column,
            key: Some(key.to_owned()),
            message: format!("`{key}`: {message}"),
        }
    }

    fn at_least<T: PartialOrd + Copy + std::fmt::Display>(
        &self,
        value: &Spanned<T>,
        key: &str,
        min: T,
        max: Option<T>,
    ) -> Result<T, ConfigError> {
        let v = *value.get_ref();
        match max {
            Some(max) if v < min || v > max => Err(self.at(
                value.span().start,
                key,
                format!("{v} is out of range; must be from {min} to {max}"),
            )),
            None if v < min => Err(self.at(
                value.span().start,
                key,
                format!("{v} is out of range; must be at least {min}"),
            )),
            _ => Ok(v),
        }
    }
}

/// Resolves the prompt configuration; `base` is the folder relative paths
/// in the file are relative to.
pub(crate) fn resolve(
    file: FileParts<'_>,
    text: &str,
    path: &Path,
    base: &Path,
    env: EnvLookup<'_>,
) -> Result<PromptConfig, ConfigError> {
    let errors = Errors { text, path };
    let mut config = PromptConfig::default();

    // [identity]
    let identity = file.identity;
    if let Some(name) = &identity.name {
        if name.get_ref().trim().is_empty() {
            return Err(errors.at(name.span().start, "identity.name", "must not be empty"));
        }
        config.identity.name = name.get_ref().trim().to_owned();
    }
    match (&identity.text, &identity.file) {
        (Some(_), Some(file)) => {
            return Err(errors.at(
                file.span().start,
                "identity.file",
                "give `identity.text` or `identity.file`, not both",
            ));
        }
        (Some(inline), None) => config.identity.text = inline.get_ref().clone(),
        (None, Some(file)) => {
            let at = base.join(resolve_path(file.get_ref(), env));
            config.identity.text = std::fs::read_to_string(&at).map_err(|e| {
                errors.at(
                    file.span().start,
                    "identity.file",
                    format!("cannot read {}: {e}", at.display()),
                )
            })?;
        }
        (None, None) => {}
    }
    if let Some(feedback) = &identity.feedback {
        config.identity.feedback = feedback.clone();
    }
    if let Some(mandates) = &identity.mandates {
        config.identity.mandates = mandates.clone();
    }

    // [model]
    let model = file.model;
    if let Some(name) = &model.name {
        if name.get_ref().trim().is_empty() {
            return Err(errors.at(name.span().start, "model.name", "must not be empty"));
        }
        config.model.name = name.get_ref().trim().to_owned();
    }
    if let Some(limit) = &model.context_limit {
        config.model.context_limit = errors.at_least(limit, "model.context_limit", 1, None)?;
    }
    if let Some(encoding) = &model.encoding {
        config.model.encoding = encoding.get_ref().parse().map_err(|message: String| {
            errors.at(encoding.span().start, "model.encoding", message)
        })?;
    }

    // [prices.<model>]
    for (model, prices) in file.prices {
        let key = |field: &str| format!("prices.{model}.{field}");
        let input = errors.at_least(&prices.input, &key("input"), 0.0, None)?;
        let output = errors.at_least(&prices.output, &key("output"), 0.0, None)?;
        let cached_input = match &prices.cached_input {
            Some(p) => errors.at_least(p, &key("cached_input"), 0.0, None)?,
            None => input,
        };
        config.prices.insert(
            model.clone(),
            Prices {
                input,
                cached_input,
                output,
            },
        );
    }

    // [context_types.<name>]
    for (name, overrides) in file.context_types {
        let type_name = name.get_ref().as_str();
        let Some(context_type) = config.context_types.get_mut(type_name) else {
            let known = context_types::NAMES.map(str::to_owned);
            let mut message = format!("unknown context type `{type_name}`");
            match closest(type_name, &known) {
                Some(best) => message.push_str(&format!("; did you mean `{best}`?")),
                None => message.push('.'),
            }
            message.push_str(&format!(
                " The types are {}.",
                context_types::NAMES.join(", ")
            ));
            let (line, column) = line_column(text, name.span().start);
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                line,
                column,
                key: Some(format!("context_types.{type_name}")),
                message,
            });
        };
        let key = |field: &str| format!("context_types.{type_name}.{field}");
        if let Some(enabled) = &overrides.enabled_components {
            let mut list = Vec::with_capacity(enabled.len());
            for id in enabled {
                let id = errors.at_least(
                    id,
                    &key("enabled_components"),
                    0,
                    Some(foveal_sdk::prompt::ids::MAX),
                )?;
                if !list.contains(&id) {
                    list.push(id);
                }
            }
            context_type.enabled_components = list;
        }
        if let Some(component_overrides) = &overrides.component_overrides {
            for (component, value) in component_overrides {
                let k = component.get_ref().as_str();
                check_component_key(k).map_err(|message| {
                    errors.at(component.span().start, &key("component_overrides"), message)
                })?;
                context_type
                    .component_overrides
                    .insert(k.to_owned(), value.content.clone());
            }
        }
        if let Some(filter) = &overrides.tool_filter {
            context_type.tool_filter = match filter.get_ref() {
                FileToolFilter::Word(word) if word == "all" => None,
                FileToolFilter::Word(word) => {
                    return Err(errors.at(
                        filter.span().start,
                        &key("tool_filter"),
                        format!("{word:?} is not a tool filter; give a list of tool names (`[]` for none) or \"all\""),
                    ));
                }
                FileToolFilter::List(names) => Some(names.clone()),
            };
        }
        if let Some(budget) = &overrides.token_budget {
            context_type.token_budget =
                Some(errors.at_least(budget, &key("token_budget"), 1, None)?);
        }
        // Layer 2 of the execution pattern (crate::execution).
        if let Some(mode) = &overrides.execution_mode {
            context_type.execution_mode = mode.get_ref().parse().map_err(|message: String| {
                errors.at(mode.span().start, &key("execution_mode"), message)
            })?;
        }
        if let Some(iterations) = &overrides.max_iterations {
            context_type.max_iterations = errors.at_least(
                iterations,
                &key("max_iterations"),
                execution::MIN_ITERATIONS,
                Some(execution::MAX_ITERATIONS),
            )?;
        }
        if let Some(categories) = &overrides.allowed_tool_categories {
            let at = |message| {
                errors.at(
                    categories.span().start,
                    &key("allowed_tool_categories"),
                    message,
                )
            };
            context_type.allowed_tool_categories = match categories.get_ref() {
                FileToolFilter::Word(word) if word == "all" => None,
                FileToolFilter::Word(word) => {
                    return Err(at(format!(
                        "{word:?} is not a category filter; give a list of categories (read, write, terminal, dangerous; `[]` for none) or \"all\""
                    )));
                }
                FileToolFilter::List(names) => {
                    let mut list = Vec::with_capacity(names.len());
                    for name in names {
                        let category: ToolCategory = name.parse().map_err(at)?;
                        if !list.contains(&category) {
                            list.push(category);
                        }
                    }
                    Some(list)
                }
            };
        }
        if let Some(v) = overrides.terminal_ends_loop {
            context_type.terminal_ends_loop = v;
        }
        if let Some(v) = overrides.dangerous_requires_confirm {
            context_type.dangerous_requires_confirm = v;
        }
        if let Some(v) = overrides.allows_multi_tool {
            context_type.allows_multi_tool = v;
        }
        if let Some(v) = overrides.allows_sub_agents {
            context_type.allows_sub_agents = v;
        }
    }
    Ok(config)
}

/// A component key in `component_overrides`: a static component's key or
/// a skill component's (lowercase letters, digits, `_`, `-`); a near miss
/// of a static key is taken for a typo.
fn check_component_key(key: &str) -> Result<(), String> {
    let statics: Vec<String> = super::components::STATIC_COMPONENTS
        .iter()
        .map(|c| c.key.to_owned())
        .collect();
    if statics.iter().any(|s| s == key) {
        return Ok(());
    }
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    {
        return Err(format!(
            "{key:?} is not a component key (lowercase letters, digits, `_` and `-`)"
        ));
    }
    match closest(key, &statics) {
        Some(best) if strsim::damerau_levenshtein(key, &best) <= 2 => Err(format!(
            "unknown component `{key}`; did you mean `{best}`? The static components are {}; a skill's component is named by its key",
            statics.join(", ")
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Overrides};

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
            err.starts_with("conf/foveal.toml:1:16: unknown context type `reflektion`; did you mean `reflection`?"),
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
}
