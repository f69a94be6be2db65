//! Execution patterns (seed 004, section 3): how a cycle may act — one
//! tool call or a loop of them, how many, which kinds of tool, whether a
//! dangerous tool waits for confirmation, whether work may be delegated.
//!
//! The pattern is composed from three layers, each of which can only
//! restrict what the layer before it allows:
//!
//! | layer | source | what it sets |
//! |---|---|---|
//! | 1 static | `[execution]` ([`ExecutionConfig`]) | `multi_action_enabled` off forces `single_action`; `max_iterations_per_tick` caps the iterations; `sub_agents_enabled` off forbids delegation |
//! | 2 context | the context type ([`ContextType`], `[context_types.<name>]`) | `execution_mode`, `max_iterations`, `allowed_tool_categories`, `terminal_ends_loop`, `dangerous_requires_confirm`, `allows_multi_tool`, `allows_sub_agents` |
//! | 3 runtime | [`AssessmentSignals`] | the rows below |
//!
//! The runtime rows (the seed's signal table, and its LLM assessment):
//!
//! | signal | condition | effect |
//! |---|---|---|
//! | `token_pressure` = `critical` | usage ≥ 80 % | force `single_action` |
//! | `token_pressure` = `high` | usage ≥ 60 % | at most 2 iterations |
//! | `recent_errors` ≥ 3 | consecutive failures | force `single_action`, confirm dangerous tools |
//! | `recent_errors` ≥ 2 | consecutive failures | at most 2 iterations |
//! | `event_class` = `communication` | a user's message | force `single_action` |
//! | `event_class` = `building` | the world is being changed | confirm dangerous tools |
//! | `recommended_iterations` = n | `task_assessment_enabled` | at most n iterations (at least 1) |
//! | `recommended_mode` = `single_action` | `task_assessment_enabled` | force `single_action` |
//! | `recommend_confirm_dangerous` | `task_assessment_enabled` | confirm dangerous tools |
//!
//! "Force `single_action`" means all of: mode `single_action`,
//! `max_iterations` 1, `multi_tool_enabled` false — one tool call, no
//! loop. The same holds when the static layer turns `multi_action_enabled`
//! off or a context type says `single_action` or `allows_multi_tool =
//! false`, so a pattern never says `single_action` with five iterations or
//! `react_loop` without multi-tool.
//!
//! [`ExecutionPattern::source_layers`] says, for every field, which layer
//! set its value: `static`, `context`, `runtime`, or `allowed` when no
//! layer restricted it (the value is the most permissive one). When two
//! layers give the same limit (`tick_event`'s 5 iterations under the
//! static 5), the earlier layer is named: it is the one that imposed it.
//!
//! # Where this differs from the seed, and why
//!
//! - **Restrict-only everywhere.** Iterations are the minimum over the
//!   layers, so `sleep_consolidate`'s 10 is capped at 5 by the default
//!   `max_iterations_per_tick` (raise that to 10 to get 10). A recommended
//!   mode other than `single_action` (`react_loop` over `plan_execute`, or
//!   the reverse) is not a restriction and is ignored, as is a
//!   recommendation of *more* iterations. Modes are ordered only by
//!   `single_action` being narrower than both loops; `react_loop` and
//!   `plan_execute` are different ways to loop, neither within the other.
//! - **`source_layers` names all seven fields.** The seed's example shows
//!   three (`mode`, `max_iterations`, `multi_tool_enabled`); the values it
//!   shows are the ones this module gives.
//! - **`single_action` is consistent** (see above); the seed leaves e.g.
//!   "force single_action" with the context's iteration count.
//! - **The LLM's recommendations apply only with
//!   `task_assessment_enabled`**, the seed's switch for that analysis; the
//!   context signals (`token_pressure`, `recent_errors`, `event_class`) are
//!   measured by the host and always apply.
//! - **`goal_urgency`** is in the seed's signal example but has no row in
//!   its table; it has no effect and is not modelled.
//! - **`sub_agent_budget`** is the seed's "max concurrent sub-agents" (a
//!   count, default 3), read and validated but not part of the pattern
//!   (the seed's `ExecutionPattern` has no such field): whoever starts
//!   sub-agents reads it from [`ExecutionConfig`].
//! - Per-type values the seed's table leaves out are documented in
//!   [`crate::prompt::context_types`].
//!
//! # Example
//!
//! ```
//! use foveal_prompt::execution::{self, AssessmentSignals, ExecutionConfig, ExecutionMode, Layer};
//! use foveal_prompt::prompt::context_types::ContextTypes;
//!
//! let types = ContextTypes::default();
//! let reflection = types.get("reflection").unwrap();
//! let pattern = execution::select(&ExecutionConfig::default(), reflection, &AssessmentSignals::default());
//! assert_eq!(pattern.mode, ExecutionMode::ReactLoop);
//! assert_eq!(pattern.max_iterations, 3);
//! assert_eq!(pattern.source_layers.max_iterations, Layer::Context);
//!
//! // A user's message forces a single action.
//! let signals = AssessmentSignals::new(Some(30), 0, Some(execution::EventClass::Communication));
//! let pattern = execution::select(&ExecutionConfig::default(), reflection, &signals);
//! assert_eq!((pattern.mode, pattern.max_iterations), (ExecutionMode::SingleAction, 1));
//! ```

use std::fmt;
use std::str::FromStr;

use foveal_sdk::SignalKind;
use serde::Serialize;

use crate::prompt::context_types::ContextType;

/// The smallest `max_iterations_per_tick` (and context `max_iterations`).
pub const MIN_ITERATIONS: u32 = 1;
/// The largest: the seed's "absolute maximum (1-10)".
pub const MAX_ITERATIONS: u32 = 10;
/// Iterations under `high` token pressure or after two failures.
pub const REDUCED_ITERATIONS: u32 = 2;

/// How a cycle acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionMode {
    /// One tool call, then the cycle ends.
    SingleAction,
    /// Reason, act, observe, repeat (ReAct), up to `max_iterations` calls.
    ReactLoop,
    /// Plan the steps first, then carry them out, up to `max_iterations`
    /// calls.
    PlanExecute,
}

impl ExecutionMode {
    /// Every mode.
    pub const ALL: [Self; 3] = [Self::SingleAction, Self::ReactLoop, Self::PlanExecute];

    /// Its name in the configuration and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::SingleAction => "single_action",
            Self::ReactLoop => "react_loop",
            Self::PlanExecute => "plan_execute",
        }
    }

    /// Whether a cycle in this mode may call more than one tool.
    pub fn is_multi_action(self) -> bool {
        self != Self::SingleAction
    }

    /// Whether `self` allows no more than `wider`: the same mode, or
    /// `single_action` (narrower than both loops).
    pub fn is_within(self, wider: Self) -> bool {
        self == wider || self == Self::SingleAction
    }
}

impl fmt::Display for ExecutionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ExecutionMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| unknown("execution mode", s, &Self::ALL.map(Self::name)))
    }
}

/// What a tool does, for the pattern's category filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolCategory {
    /// Reads, changes nothing.
    Read,
    /// Changes state (the memex, the journal, memories).
    Write,
    /// Ends the cycle (a reply, `noop`); with `terminal_ends_loop` it ends
    /// the loop too.
    Terminal,
    /// Hard or impossible to undo; may need confirmation
    /// (`dangerous_requires_confirm`).
    Dangerous,
}

impl ToolCategory {
    /// Every category.
    pub const ALL: [Self; 4] = [Self::Read, Self::Write, Self::Terminal, Self::Dangerous];

    /// Its name in the configuration and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Terminal => "terminal",
            Self::Dangerous => "dangerous",
        }
    }
}

impl fmt::Display for ToolCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ToolCategory {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| unknown("tool category", s, &Self::ALL.map(Self::name)))
    }
}

fn unknown(what: &str, value: &str, names: &[&str]) -> String {
    let known: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let mut message = format!("unknown {what} {value:?}");
    if let Some(best) = foveal_settings::closest(value, &known) {
        message.push_str(&format!(" (did you mean \"{best}\"?)"));
    }
    message.push_str(&format!("; the choices are {}", names.join(", ")));
    message
}

/// Layer 1: the hard limits of `[execution]` (the seed's
/// `db.execution_config`, with its defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExecutionConfig {
    /// `execution.multi_action_enabled`: the master switch for loops; off
    /// forces `single_action` everywhere. Default true.
    pub multi_action_enabled: bool,
    /// `execution.max_iterations_per_tick`: tool calls per cycle at most,
    /// 1–10. Default 5.
    pub max_iterations_per_tick: u32,
    /// `execution.task_assessment_enabled`: whether the model's own
    /// assessment ([`Recommendation`]) may restrict the pattern further.
    /// Default false.
    pub task_assessment_enabled: bool,
    /// `execution.sub_agents_enabled`: whether work may be delegated.
    /// Default false.
    pub sub_agents_enabled: bool,
    /// `execution.sub_agent_budget`: sub-agents running at once, at most.
    /// Default 3.
    pub sub_agent_budget: u32,
}

impl Default for ExecutionConfig {
    fn default() -> Self {
        Self {
            multi_action_enabled: true,
            max_iterations_per_tick: 5,
            task_assessment_enabled: false,
            sub_agents_enabled: false,
            sub_agent_budget: 3,
        }
    }
}

/// How full the prompt is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenPressure {
    /// Under 60 % of the budget, or not known.
    #[default]
    Normal,
    /// From 60 %: at most 2 iterations.
    High,
    /// From 80 %: a single action.
    Critical,
}

impl TokenPressure {
    /// Its name in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::High => "high",
            Self::Critical => "critical",
        }
    }

    /// The usage from which the pressure is high.
    pub const HIGH_PERCENT: u8 = 60;
    /// The usage from which it is critical.
    pub const CRITICAL_PERCENT: u8 = 80;

    /// The pressure at a usage of the budget, 0–100 (none: not known, which
    /// is `normal`).
    pub fn from_usage_percent(percent: Option<u8>) -> Self {
        match percent {
            Some(p) if p >= Self::CRITICAL_PERCENT => Self::Critical,
            Some(p) if p >= Self::HIGH_PERCENT => Self::High,
            _ => Self::Normal,
        }
    }
}

/// What kind of event the cycle handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventClass {
    /// A message to answer: one action, the reply.
    Communication,
    /// A change to the world: dangerous tools wait for confirmation.
    Building,
}

impl EventClass {
    /// Its name in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Communication => "communication",
            Self::Building => "building",
        }
    }

    /// The class of a signal: a user's message is `communication`; a
    /// heartbeat (autonomous, goal-driven work), a tool's output or a
    /// delegation's result have none.
    pub fn for_signal(signal: SignalKind) -> Option<Self> {
        (signal == SignalKind::USER).then_some(Self::Communication)
    }
}

/// The model's own assessment of the task (the seed's `llm_assessment`),
/// applied only with `execution.task_assessment_enabled`. Advisory: what
/// would widen the pattern is ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Recommendation {
    /// Fewer iterations (0 counts as 1: a cycle acts at least once).
    pub recommended_iterations: Option<u32>,
    /// A narrower mode; only `single_action` narrows a loop.
    pub recommended_mode: Option<ExecutionMode>,
    /// Ask before dangerous tools.
    pub recommend_confirm_dangerous: bool,
}

/// Layer 3: what the host knows about this cycle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AssessmentSignals {
    /// From the share of the budget the prompt uses.
    pub token_pressure: TokenPressure,
    /// Consecutive failed cycles or tool calls.
    pub recent_errors: u32,
    /// The kind of event, if known.
    pub event_class: Option<EventClass>,
    /// The model's assessment, if one was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<Recommendation>,
}

impl AssessmentSignals {
    /// The signals of a cycle: its prompt's usage of the budget (0–100,
    /// none when not known), its consecutive failures and its event class.
    pub fn new(
        usage_percent: Option<u8>,
        recent_errors: u32,
        event_class: Option<EventClass>,
    ) -> Self {
        Self {
            token_pressure: TokenPressure::from_usage_percent(usage_percent),
            recent_errors,
            event_class,
            recommendation: None,
        }
    }
}

/// The layer that set a value of the pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    /// `[execution]`.
    Static,
    /// The context type.
    Context,
    /// The assessment signals.
    Runtime,
    /// No layer restricted it: the most permissive value.
    Allowed,
}

impl Layer {
    /// Its name in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Static => "static",
            Self::Context => "context",
            Self::Runtime => "runtime",
            Self::Allowed => "allowed",
        }
    }
}

/// For each field of an [`ExecutionPattern`], the layer that set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SourceLayers {
    /// Of `mode`.
    pub mode: Layer,
    /// Of `max_iterations`.
    pub max_iterations: Layer,
    /// Of `allowed_categories`.
    pub allowed_categories: Layer,
    /// Of `terminal_ends_loop`.
    pub terminal_ends_loop: Layer,
    /// Of `dangerous_requires_confirm`.
    pub dangerous_requires_confirm: Layer,
    /// Of `multi_tool_enabled`.
    pub multi_tool_enabled: Layer,
    /// Of `sub_agents_enabled`.
    pub sub_agents_enabled: Layer,
}

/// How a cycle may act: the three layers composed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExecutionPattern {
    /// The mode.
    pub mode: ExecutionMode,
    /// Tool calls in the cycle, at most (1 for `single_action`).
    pub max_iterations: u32,
    /// The tool categories allowed, in [`ToolCategory::ALL`] order; none
    /// means all.
    pub allowed_categories: Option<Vec<ToolCategory>>,
    /// A `terminal` tool ends the loop.
    pub terminal_ends_loop: bool,
    /// A `dangerous` tool waits for confirmation.
    pub dangerous_requires_confirm: bool,
    /// More than one tool call is allowed (false exactly for
    /// `single_action`).
    pub multi_tool_enabled: bool,
    /// Work may be delegated to sub-agents.
    pub sub_agents_enabled: bool,
    /// Which layer set each value.
    pub source_layers: SourceLayers,
}

impl ExecutionPattern {
    /// Whether tools of `category` may be called.
    pub fn allows(&self, category: ToolCategory) -> bool {
        self.allowed_categories
            .as_ref()
            .is_none_or(|allowed| allowed.contains(&category))
    }

    /// Whether every value of `self` is at most as permissive as the same
    /// value of `wider`: what a later layer must give.
    pub fn is_within(&self, wider: &ExecutionPattern) -> bool {
        self.mode.is_within(wider.mode)
            && self.max_iterations <= wider.max_iterations
            && ToolCategory::ALL
                .into_iter()
                .all(|c| !self.allows(c) || wider.allows(c))
            && (self.terminal_ends_loop || !wider.terminal_ends_loop)
            && (self.dangerous_requires_confirm || !wider.dangerous_requires_confirm)
            && (!self.multi_tool_enabled || wider.multi_tool_enabled)
            && (!self.sub_agents_enabled || wider.sub_agents_enabled)
    }
}

/// Composes the pattern of a cycle: the static limits, narrowed by the
/// context type, narrowed by the runtime signals (see the module docs for
/// every rule).
pub fn select(
    static_cfg: &ExecutionConfig,
    context: &ContextType,
    signals: &AssessmentSignals,
) -> ExecutionPattern {
    let mut c = Composer::from_static(static_cfg);
    c.apply_context(context);
    c.apply_signals(static_cfg, signals);
    c.finish()
}

/// The pattern as it is narrowed, layer by layer.
struct Composer {
    /// None: any mode (the static layer names none).
    mode: Option<ExecutionMode>,
    max_iterations: u32,
    allowed_categories: Option<Vec<ToolCategory>>,
    terminal_ends_loop: bool,
    dangerous_requires_confirm: bool,
    multi_tool_enabled: bool,
    sub_agents_enabled: bool,
    sources: SourceLayers,
}

impl Composer {
    /// Layer 1.
    fn from_static(cfg: &ExecutionConfig) -> Self {
        let mut c = Self {
            mode: None,
            max_iterations: cfg
                .max_iterations_per_tick
                .clamp(MIN_ITERATIONS, MAX_ITERATIONS),
            allowed_categories: None,
            terminal_ends_loop: false,
            dangerous_requires_confirm: false,
            multi_tool_enabled: true,
            sub_agents_enabled: true,
            sources: SourceLayers {
                mode: Layer::Allowed,
                max_iterations: Layer::Static,
                allowed_categories: Layer::Allowed,
                terminal_ends_loop: Layer::Allowed,
                dangerous_requires_confirm: Layer::Allowed,
                multi_tool_enabled: Layer::Allowed,
                sub_agents_enabled: Layer::Allowed,
            },
        };
        if !cfg.multi_action_enabled {
            c.force_single_action(Layer::Static);
        }
        if !cfg.sub_agents_enabled {
            c.forbid_sub_agents(Layer::Static);
        }
        c
    }

    /// Layer 2.
    fn apply_context(&mut self, context: &ContextType) {
        match (self.mode, context.execution_mode) {
            (_, ExecutionMode::SingleAction) => self.force_single_action(Layer::Context),
            (None, mode) => {
                self.mode = Some(mode);
                self.sources.mode = Layer::Context;
            }
            // Already single_action: a loop would widen it.
            (Some(_), _) => {}
        }
        if !context.allows_multi_tool {
            self.force_single_action(Layer::Context);
        }
        self.cap_iterations(context.max_iterations, Layer::Context);
        if let Some(allowed) = &context.allowed_tool_categories {
            self.restrict_categories(allowed, Layer::Context);
        }
        if context.terminal_ends_loop && !self.terminal_ends_loop {
            self.terminal_ends_loop = true;
            self.sources.terminal_ends_loop = Layer::Context;
        }
        if context.dangerous_requires_confirm {
            self.confirm_dangerous(Layer::Context);
        }
        if !context.allows_sub_agents {
            self.forbid_sub_agents(Layer::Context);
        }
    }

    /// Layer 3, row by row of the seed's table.
    fn apply_signals(&mut self, cfg: &ExecutionConfig, signals: &AssessmentSignals) {
        let runtime = Layer::Runtime;
        match signals.token_pressure {
            TokenPressure::Critical => self.force_single_action(runtime),
            TokenPressure::High => self.cap_iterations(REDUCED_ITERATIONS, runtime),
            TokenPressure::Normal => {}
        }
        if signals.recent_errors >= 3 {
            self.force_single_action(runtime);
            self.confirm_dangerous(runtime);
        } else if signals.recent_errors >= 2 {
            self.cap_iterations(REDUCED_ITERATIONS, runtime);
        }
        match signals.event_class {
            Some(EventClass::Communication) => self.force_single_action(runtime),
            Some(EventClass::Building) => self.confirm_dangerous(runtime),
            None => {}
        }
        if let Some(advice) = signals
            .recommendation
            .filter(|_| cfg.task_assessment_enabled)
        {
            if let Some(n) = advice.recommended_iterations {
                self.cap_iterations(n.max(MIN_ITERATIONS), runtime);
            }
            if advice.recommended_mode == Some(ExecutionMode::SingleAction) {
                self.force_single_action(runtime);
            }
            if advice.recommend_confirm_dangerous {
                self.confirm_dangerous(runtime);
            }
        }
    }

    fn force_single_action(&mut self, layer: Layer) {
        if self.mode != Some(ExecutionMode::SingleAction) {
            self.mode = Some(ExecutionMode::SingleAction);
            self.sources.mode = layer;
        }
        if self.multi_tool_enabled {
            self.multi_tool_enabled = false;
            self.sources.multi_tool_enabled = layer;
        }
        self.cap_iterations(1, layer);
    }

    fn cap_iterations(&mut self, limit: u32, layer: Layer) {
        // Ties keep the earlier layer: it imposed the limit.
        if limit < self.max_iterations {
            self.max_iterations = limit.max(MIN_ITERATIONS);
            self.sources.max_iterations = layer;
        }
    }

    fn restrict_categories(&mut self, allowed: &[ToolCategory], layer: Layer) {
        let narrowed: Vec<ToolCategory> = ToolCategory::ALL
            .into_iter()
            .filter(|c| allowed.contains(c))
            .filter(|c| {
                self.allowed_categories
                    .as_ref()
                    .is_none_or(|now| now.contains(c))
            })
            .collect();
        let before = self
            .allowed_categories
            .as_ref()
            .map_or(ToolCategory::ALL.len(), Vec::len);
        if narrowed.len() < before {
            self.allowed_categories = Some(narrowed);
            self.sources.allowed_categories = layer;
        }
    }

    fn confirm_dangerous(&mut self, layer: Layer) {
        if !self.dangerous_requires_confirm {
            self.dangerous_requires_confirm = true;
            self.sources.dangerous_requires_confirm = layer;
        }
    }

    fn forbid_sub_agents(&mut self, layer: Layer) {
        if self.sub_agents_enabled {
            self.sub_agents_enabled = false;
            self.sources.sub_agents_enabled = layer;
        }
    }

    fn finish(self) -> ExecutionPattern {
        ExecutionPattern {
            // Every context type names a mode, so layer 2 always sets one.
            mode: self.mode.unwrap_or(ExecutionMode::SingleAction),
            max_iterations: self.max_iterations,
            allowed_categories: self.allowed_categories,
            terminal_ends_loop: self.terminal_ends_loop,
            dangerous_requires_confirm: self.dangerous_requires_confirm,
            multi_tool_enabled: self.multi_tool_enabled,
            sub_agents_enabled: self.sub_agents_enabled,
            source_layers: self.sources,
        }
    }
}
