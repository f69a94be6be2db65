//! The seven context types of seed 004: which components a prompt holds,
//! how they are overridden, which tools the model is offered and how many
//! tokens the prompt may use.
//!
//! The defaults are the seed's tables, exactly:
//!
//! | type | components | tools | max iterations |
//! |---|---|---|---|
//! | `tick_event` | all nine | all | 5 |
//! | `tick_autonomous` | all nine | all | 5 |
//! | `reflection` | 0, 6000, 7000 | `noop`, `add_journal_entry`, `review_journal` | 3 |
//! | `reflection_cont` | 0, 7000 | the same | 2 |
//! | `sleep_consolidate` | 0, 2000 | those and `recall_memories`, `store_memory` | 10 |
//! | `goal_decompose` | 0, 4000, 6000 | none | 1 |
//! | `pre_compaction` | 0, 5000, 6000, 7000 | `noop`, `add_journal_entry`, `update_entity_observation` | 5 |
//!
//! - **Token budget:** the seed gives none for any type (`None`, "the
//!   default"), so by default each prompt gets `context.max_tokens`.
//! - **Overrides:** the seed gives one, the reflection system prompt; it
//!   replaces the *identity* part of the system prompt, so the reflection
//!   prompt still lists its (journal) tools.
//! - **Where the seed disagrees with itself:** its summary table says
//!   `pre_compaction` gets "journal only" tools, its `PRE_COMPACTION_TOOLS`
//!   list adds `update_entity_observation`; the list is taken.
//! - The seed's tool names are kept as they are, although this host offers
//!   none of them yet: a filter names the tools a type *may* use, and the
//!   belt shows those that exist.
//!
//! Their execution settings, layer 2 of the execution pattern
//! ([`crate::execution`]):
//!
//! | type | mode | max iterations | multi-tool | sub-agents |
//! |---|---|---|---|---|
//! | `tick_event` | `react_loop` | 5 | yes | yes |
//! | `tick_autonomous` | `react_loop` | 5 | yes | yes |
//! | `reflection` | `react_loop` | 3 | yes | no |
//! | `reflection_cont` | `react_loop` | 2 | yes | no |
//! | `sleep_consolidate` | `react_loop` | 10 | yes | no |
//! | `goal_decompose` | `single_action` | 1 | no | no |
//! | `pre_compaction` | `react_loop` | 5 | yes | no |
//!
//! - The seed's table gives four types; `tick_autonomous` is set as
//!   `tick_event` (the summary table gives both the same tools and
//!   iterations), `reflection_cont` and `pre_compaction` as `reflection`
//!   (journal tools, no delegation), with their own iteration counts.
//! - The seed names no per-type value for `allowed_tool_categories`,
//!   `terminal_ends_loop` or `dangerous_requires_confirm`: every type
//!   allows all categories (its `tool_filter` already narrows the tools),
//!   a terminal tool ends the loop, and dangerous tools need the user's
//!   confirmation (a dangerous tool is one that cannot be undone: asking
//!   first is the safe default; set `dangerous_requires_confirm = false`
//!   in `[context_types.<name>]` to let one run unasked — the runtime
//!   signals `recent_errors` ≥ 3 and `event_class = building` still ask).
//!
//! A pluggable component (a skill's, or the host's logs at 2500) is in a
//! prompt when the static component it follows is enabled, or when the
//! type lists its id itself.
//!
//! Every field is overridable per type in `[context_types.<name>]` (see
//! `config/foveal.toml`).

use std::collections::BTreeMap;

use foveal_sdk::SignalKind;
use foveal_sdk::prompt::ids;

use crate::execution::{ExecutionMode, ToolCategory};

/// The seed's reflection tools.
pub const REFLECTION_TOOLS: [&str; 3] = ["noop", "add_journal_entry", "review_journal"];
/// The seed's sleep tools.
pub const SLEEP_TOOLS: [&str; 5] = [
    "noop",
    "add_journal_entry",
    "review_journal",
    "recall_memories",
    "store_memory",
];
/// The seed's pre-compaction tools.
pub const PRE_COMPACTION_TOOLS: [&str; 3] =
    ["noop", "add_journal_entry", "update_entity_observation"];

/// The seed's reflection system prompt (seed 004, section 5).
pub const REFLECTION_PROMPT: &str = "You are an AI assistant performing periodic self-reflection.

Review your recent performance and journal entries. Consider:
1. What patterns am I observing in my work?
2. What strategies are working well?
3. What mistakes am I repeating?
4. What should I do differently?

Use the journal tools to record your insights.";

/// The names of the seven types, in the seed's order.
pub const NAMES: [&str; 7] = [
    "tick_event",
    "tick_autonomous",
    "reflection",
    "reflection_cont",
    "sleep_consolidate",
    "goal_decompose",
    "pre_compaction",
];

/// One context type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextType {
    /// Its name (one of [`NAMES`]).
    pub name: &'static str,
    /// What it is for.
    pub description: &'static str,
    /// The component ids it includes.
    pub enabled_components: Vec<u32>,
    /// Per component key, a content that replaces the component's (for
    /// `system_prompt`: the identity part).
    pub component_overrides: BTreeMap<String, String>,
    /// The tools it may offer; none means all.
    pub tool_filter: Option<Vec<String>>,
    /// Its token budget; none means `context.max_tokens`.
    pub token_budget: Option<u32>,
    /// How a cycle of this type acts (layer 2 of the execution pattern,
    /// [`crate::execution`]).
    pub execution_mode: ExecutionMode,
    /// Tool calls per cycle, at most, 1–10.
    pub max_iterations: u32,
    /// The tool categories it may use; none means all.
    pub allowed_tool_categories: Option<Vec<ToolCategory>>,
    /// A `terminal` tool ends the loop.
    pub terminal_ends_loop: bool,
    /// A `dangerous` tool waits for confirmation.
    pub dangerous_requires_confirm: bool,
    /// More than one tool call per cycle (a loop) is allowed.
    pub allows_multi_tool: bool,
    /// Work may be delegated to sub-agents.
    pub allows_sub_agents: bool,
}

impl ContextType {
    /// Whether the component at `id` is in prompts of this type.
    pub fn enables(&self, id: u32) -> bool {
        self.enabled_components.contains(&id)
            || (!ids::is_static(id) && self.enabled_components.contains(&ids::anchor(id)))
    }

    /// The override of the component `key`, if any.
    pub fn override_of(&self, key: &str) -> Option<&str> {
        self.component_overrides.get(key).map(String::as_str)
    }
}

fn tools(names: &[&str]) -> Option<Vec<String>> {
    Some(names.iter().map(|s| (*s).to_owned()).collect())
}

/// The seed's seven types.
pub fn defaults() -> Vec<ContextType> {
    let full = ids::STATIC.to_vec();
    // The execution settings of the seed's layer-2 table: every type
    // loops but goal_decompose, only the ticks may delegate (the types the
    // table leaves out are set like their kin; see the module docs).
    let t = |name, description, enabled: &[u32], filter, max_iterations| ContextType {
        name,
        description,
        enabled_components: enabled.to_vec(),
        component_overrides: BTreeMap::new(),
        tool_filter: filter,
        token_budget: None,
        execution_mode: ExecutionMode::ReactLoop,
        max_iterations,
        allowed_tool_categories: None,
        terminal_ends_loop: true,
        dangerous_requires_confirm: true,
        allows_multi_tool: true,
        allows_sub_agents: matches!(name, "tick_event" | "tick_autonomous"),
    };
    let mut reflection = t(
        "reflection",
        "Self-analysis",
        &[ids::SYSTEM_PROMPT, ids::PENDING_EVENT, ids::TOOL_RESULT],
        tools(&REFLECTION_TOOLS),
        3,
    );
    reflection
        .component_overrides
        .insert("system_prompt".to_owned(), REFLECTION_PROMPT.to_owned());
    let mut goal_decompose = t(
        "goal_decompose",
        "Break down goals",
        &[ids::SYSTEM_PROMPT, ids::GOALS, ids::PENDING_EVENT],
        Some(Vec::new()),
        1,
    );
    goal_decompose.execution_mode = ExecutionMode::SingleAction;
    goal_decompose.allows_multi_tool = false;
    vec![
        t("tick_event", "Process pending event", &full, None, 5),
        t("tick_autonomous", "Goal-driven behavior", &full, None, 5),
        reflection,
        t(
            "reflection_cont",
            "After reflection tool",
            &[ids::SYSTEM_PROMPT, ids::TOOL_RESULT],
            tools(&REFLECTION_TOOLS),
            2,
        ),
        t(
            "sleep_consolidate",
            "Memory consolidation",
            &[ids::SYSTEM_PROMPT, ids::SEMANTIC_MEMORIES],
            tools(&SLEEP_TOOLS),
            10,
        ),
        goal_decompose,
        t(
            "pre_compaction",
            "Fact extraction",
            &[
                ids::SYSTEM_PROMPT,
                ids::CONVERSATION_HISTORY,
                ids::PENDING_EVENT,
                ids::TOOL_RESULT,
            ],
            tools(&PRE_COMPACTION_TOOLS),
            5,
        ),
    ]
}

/// The seven types, with the configuration's overrides applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextTypes {
    types: Vec<ContextType>,
}

impl Default for ContextTypes {
    fn default() -> Self {
        Self { types: defaults() }
    }
}

impl ContextTypes {
    /// The type called `name`, or an error naming the closest one.
    pub fn get(&self, name: &str) -> Result<&ContextType, UnknownContextType> {
        self.types
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| UnknownContextType {
                name: name.to_owned(),
                suggestion: foveal_settings::closest(name, &NAMES.map(str::to_owned)),
            })
    }

    /// The type called `name`, to change.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut ContextType> {
        self.types.iter_mut().find(|t| t.name == name)
    }

    /// Every type, in the seed's order.
    pub fn iter(&self) -> impl Iterator<Item = &ContextType> {
        self.types.iter()
    }
}

/// The context type a signal gets when none is asked for: a user's
/// message or a tool's output is an event to process (`tick_event`), a
/// heartbeat is time for goal-driven work (`tick_autonomous`), and a
/// delegation's result is an event too.
pub fn for_signal(signal: SignalKind) -> &'static str {
    if signal == SignalKind::HEARTBEAT {
        "tick_autonomous"
    } else {
        "tick_event"
    }
}

/// A context type name that is not one of the seven.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown context type `{name}`{}; the types are {}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default(), NAMES.join(", "))]
pub struct UnknownContextType {
    /// The name asked for.
    pub name: String,
    /// The closest known name, if one is close.
    pub suggestion: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_seed_tables() {
        let types = ContextTypes::default();
        let row = |name: &str| types.get(name).unwrap();
        assert_eq!(row("tick_event").enabled_components.len(), 9);
        assert_eq!(row("tick_autonomous").enabled_components.len(), 9);
        assert_eq!(row("reflection").enabled_components, [0, 6000, 7000]);
        assert_eq!(row("reflection_cont").enabled_components, [0, 7000]);
        assert_eq!(row("sleep_consolidate").enabled_components, [0, 2000]);
        assert_eq!(row("goal_decompose").enabled_components, [0, 4000, 6000]);
        assert_eq!(
            row("pre_compaction").enabled_components,
            [0, 5000, 6000, 7000]
        );
        assert_eq!(row("tick_event").tool_filter, None);
        assert_eq!(
            row("reflection").tool_filter.as_deref().unwrap(),
            REFLECTION_TOOLS
        );
        assert_eq!(
            row("sleep_consolidate").tool_filter.as_deref().unwrap(),
            SLEEP_TOOLS
        );
        assert_eq!(row("goal_decompose").tool_filter.as_deref(), Some(&[][..]));
        let iterations: Vec<u32> = types.iter().map(|t| t.max_iterations).collect();
        assert_eq!(iterations, [5, 5, 3, 2, 10, 1, 5]);
        assert!(types.iter().all(|t| t.token_budget.is_none()));
        assert_eq!(
            row("reflection").override_of("system_prompt"),
            Some(REFLECTION_PROMPT)
        );
        assert!(
            types
                .iter()
                .filter(|t| t.name != "reflection")
                .all(|t| t.component_overrides.is_empty())
        );
    }

    #[test]
    fn the_execution_settings_are_the_seed_layer_2_table() {
        let types = ContextTypes::default();
        let row = |name: &str| {
            let t = types.get(name).unwrap();
            (
                t.execution_mode,
                t.max_iterations,
                t.allows_multi_tool,
                t.allows_sub_agents,
            )
        };
        use ExecutionMode::{ReactLoop, SingleAction};
        assert_eq!(row("tick_event"), (ReactLoop, 5, true, true));
        assert_eq!(row("reflection"), (ReactLoop, 3, true, false));
        assert_eq!(row("sleep_consolidate"), (ReactLoop, 10, true, false));
        assert_eq!(row("goal_decompose"), (SingleAction, 1, false, false));
        // The types the seed's table leaves out.
        assert_eq!(row("tick_autonomous"), (ReactLoop, 5, true, true));
        assert_eq!(row("reflection_cont"), (ReactLoop, 2, true, false));
        assert_eq!(row("pre_compaction"), (ReactLoop, 5, true, false));
        assert!(types.iter().all(|t| t.allowed_tool_categories.is_none()
            && t.terminal_ends_loop
            && t.dangerous_requires_confirm));
    }

    #[test]
    fn pluggable_components_follow_their_anchor() {
        let types = ContextTypes::default();
        let event = types.get("tick_event").unwrap();
        assert!(event.enables(4500) && event.enables(2500));
        let reflection = types.get("reflection").unwrap();
        assert!(!reflection.enables(2500) && !reflection.enables(4500));
        assert!(reflection.enables(6001));
    }

    #[test]
    fn an_unknown_type_suggests_the_closest() {
        let err = ContextTypes::default().get("reflektion").unwrap_err();
        assert_eq!(err.suggestion.as_deref(), Some("reflection"));
        assert!(err.to_string().starts_with("unknown context type `reflektion` (did you mean `reflection`?); the types are tick_event, "), "{err}");
        assert_eq!(for_signal(SignalKind::HEARTBEAT), "tick_autonomous");
        assert_eq!(for_signal(SignalKind::USER), "tick_event");
    }
}
