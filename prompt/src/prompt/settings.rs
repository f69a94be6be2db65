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
pub struct FileIdentity {
    name: Option<Spanned<String>>,
    text: Option<Spanned<String>>,
    file: Option<Spanned<String>>,
    feedback: Option<String>,
    mandates: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileModel {
    name: Option<Spanned<String>>,
    context_limit: Option<Spanned<u32>>,
    encoding: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilePrices {
    input: Spanned<f64>,
    cached_input: Option<Spanned<f64>>,
    output: Spanned<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileContextType {
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
pub struct FileOverride {
    content: String,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum FileToolFilter {
    Word(String),
    List(Vec<String>),
}

/// The `[identity]`, `[model]`, `[prices]` and `[context_types]` tables
/// as read from the file.
#[derive(Debug)]
pub struct FileParts<'a> {
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
pub fn resolve(
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
