//! Prompt assembly: the exact prompt a think step sends, built from ordered
//! components (seed 004) within a token budget that always holds (seed 003).
//!
//! # What lives where
//!
//! The **host** (this module) owns what needs the memex, the registry or
//! I/O, and the guarantees:
//!
//! - [`components`]: the static component table, the rules for the ids
//!   skills declare (checked when a skill loads), the tool belt, the
//!   components skills contribute;
//! - [`context_types`]: the seven context types of seed 004;
//! - [`settings`]: their configuration, with identity, model and prices;
//! - [`budget`]: counting (bytes as an upper bound first, exact counts
//!   remembered by text address), the rounds of the budget plan, and the
//!   final check: **no prompt over its limit is returned**, whatever a
//!   skill answers;
//! - [`cost`]: tokens and cost per cycle and cumulative, persisted;
//! - the context section itself ([`crate::context`]), which the awareness
//!   skill renders.
//!
//! The **token-economics skill** owns the policy, which is what one may
//! want to change while the host runs (the seed's contracts 1–5):
//!
//! - contract 1, the IDENTITY+TOOLS prefix and its cache (`prefix` hook);
//! - contract 2, when the context is assembled and when a cached rendering
//!   may serve (`invoke("context_policy")`) — the cache itself is the
//!   host's [`crate::context::ContextCache`], keyed on the memex
//!   generation;
//! - contract 3, what to trim and in which order (`budget` hook);
//! - contract 4, its state zeroed on every load and reload (`init`);
//! - contract 5, the usage percentage of the last assembly.
//!
//! The hot path stays in typed hooks with borrowed text: an unchanged
//! 16k-token prompt is assembled and checked in microseconds (see
//! `benches/prompt.rs`). Without the skill the host still assembles —
//! the same prefix text, uncached; the context rendered every time; nothing
//! trimmed — and refuses a prompt over the model's context limit
//! ([`economics`] lists each fallback).
//!
//! # Assembly
//!
//! 1. The context type (asked for, or from the signal:
//!    [`context_types::for_signal`]) says which components are in and
//!    which tools are offered.
//! 2. Components are gathered: the system prompt (0), the context section
//!    (2000, skipped on heartbeats and delegations), the host's recent log
//!    lines (2500, oldest first so that "the last five lines" are the
//!    newest), the skills' components at the ids they declared, the
//!    conversation history (5000, one section per message), the pending
//!    event (6000) and the tool result (7000). A context type's
//!    `component_overrides` replace a component's content (for
//!    `system_prompt`, its identity part) or supply one the host has no
//!    source for (character context, entity context, context buffer,
//!    goals).
//! 3. They are ordered by id, except the log lines, which go just before
//!    the pending event, or last when there is none (see below).
//! 4. The budget is the smallest of `CONTEXT_MAX_TOKENS` / the config
//!    (`--budget` replaces it), the context type's budget and the model's
//!    context limit, less what the tool definitions take (they travel
//!    beside the sections and cannot be trimmed); it is enforced by
//!    [`budget`]. The history's tool calls are in it like any text: each
//!    history section counts its message's calls (ids, names, arguments)
//!    or its result's call id, L1b cuts long ones ([`calls`]) and L4
//!    drops them with their message.
//!
//! # Where this differs from the seeds, and why
//!
//! - Seed 003's prefix cache keyed on `sxhash` of its five inputs, which
//!   ignored the tool belt: a changed belt served a stale prefix. The
//!   skill compares all five inputs.
//! - Seed 003's context cache keyed on the number of memex objects: an
//!   edit that kept the count served stale context. The host's cache keys
//!   on the memex generation.
//! - Seed 003's budget could return a prompt still over budget and counted
//!   tokens as length/4. Here counts are the model's encoding, more
//!   levels follow L3 (the oldest history, the context window's oldest
//!   items, then the middle of an oversized user message, with a marker),
//!   one comes between L1 and L2 (L1b: the history's long tool calls and
//!   results cut, with a note), and when even that cannot fit the answer
//!   is an error saying what is too large and what setting to change —
//!   never an over-budget prompt.
//! - L3 re-renders the context at the remaining budget when the awareness
//!   skill is loaded (its budget-aware mode keeps the foveal subtree and
//!   drops detail by priority) and uses the seed's one-line summary only
//!   without it.
//! - Seed 003's prefix glued name, identity and feedback together; here
//!   each part has its own lines ([`components::prefix_text`]).
//! - Mandates are part of the prefix (contract 1) *and* the first thing L2
//!   drops: L2 rebuilds the prefix without them.
//! - Seed 003 (and seed 004's ids) put the log lines (2500) in the system
//!   message, before the history. Each new line (a tool call, an edit of
//!   the memex, a focus move) then changed the prompt's beginning, and a
//!   provider keeping its KV cache between requests read the whole
//!   history again every turn. Here they come after the history, just
//!   before the pending event (last, after the tool results, in a cycle
//!   that continues after tool calls), as a system message of their own
//!   (never as the user's words); they keep their id, their kind and
//!   their trimming (L1 still cuts them to the last five lines).
//! - The per-message framing of the request (a few tokens per message) is
//!   not counted, as in the seed.
//!
//! # Example
//!
//! ```
//! use foveal_memex::Memex;
//! use foveal_prompt::prompt::{Assembler, PromptInput, PromptSettings};
//! use foveal_registry::registry::Snapshot;
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("a.org"), "* Work :project:\n").unwrap();
//! let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
//! let assembler = Assembler::new(PromptSettings::default());
//! let input = PromptInput {
//!     message: Some("What is on my plate?".into()),
//!     ..PromptInput::default()
//! };
//! // No skills loaded: the host's fallbacks.
//! let prompt = assembler.assemble(&Snapshot::default(), &memex.snapshot(), &input).unwrap();
//! let keys: Vec<&str> = prompt.sections.iter().map(|s| &*s.key).collect();
//! assert_eq!(keys, ["system_prompt", "semantic_memories", "pending_event"]);
//! assert_eq!(prompt.sections[1].text.as_str(), "[Awareness skill not loaded]\n");
//! assert!(prompt.total_tokens <= prompt.budget);
//! ```

pub mod budget;
pub mod calls;
pub mod components;
pub mod context_types;
pub mod cost;
pub mod economics;
pub mod settings;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use abi_stable::std_types::{RArc, RString};
use foveal_sdk::prompt::{PrefixRequest, SectionKind, TrimLevels, ids};
use foveal_sdk::{Role, SignalKind};

use crate::context::{ContextCache, ContextRequest, Origin, Section};
use crate::egress::{Form, Gate};
use crate::memex::privacy::PrivacyTags;
use crate::memex::snapshot::MemexSnapshot;
use crate::registry::Snapshot;

pub use components::ToolSpec;
pub use context_types::{ContextType, ContextTypes, UnknownContextType};
pub use settings::PromptConfig;

/// The step, in tokens, the room left for an L3 re-rendering of the
/// context is rounded down to.
pub const RERENDER_STEP: u32 = 256;

/// The pending event of a heartbeat.
pub const HEARTBEAT_EVENT: &str = "Heartbeat: no new input since the last cycle.";

/// The text of a prompt section, shared where it can be: a section that
/// did not change since the last cycle is the same allocation.
#[derive(Clone)]
pub enum Text {
    /// Shared by the caller (a message, a skill's component).
    Shared(Arc<str>),
    /// Made by a skill (the prefix, a trimmed section) or the host in its
    /// place.
    Skill(RArc<RString>),
    /// The rendered context.
    Context(Arc<Section>),
    /// Built for this prompt only (the log lines).
    Owned(String),
}

impl Text {
    /// The text.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Shared(s) => s,
            Self::Skill(s) => s.as_str(),
            Self::Context(s) => s.text(),
            Self::Owned(s) => s,
        }
    }

    /// The address of the shared allocation, if the text is shared.
    fn address(&self) -> Option<usize> {
        match self {
            Self::Shared(s) => Some(Arc::as_ptr(s).cast::<u8>() as usize),
            Self::Skill(s) => Some(&**s as *const RString as usize),
            Self::Context(s) => Some(Arc::as_ptr(s) as usize),
            Self::Owned(_) => None,
        }
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Text({} bytes)", self.as_str().len())
    }
}

/// One section of a prompt: a component, or one message of the history.
#[derive(Debug, Clone)]
pub struct PromptSection {
    /// Its component id.
    pub id: u32,
    /// Its component key (`system_prompt`, a skill's key, …).
    pub key: Cow<'static, str>,
    /// Its display name.
    pub name: Cow<'static, str>,
    /// Who speaks it.
    pub role: Role,
    /// What it is, for trimming.
    pub kind: SectionKind,
    /// Its text.
    pub text: Text,
    /// Its tokens (see [`Prompt::tokens_exact`]): its text's and, for a
    /// message of the history, those of its [`call`](Self::call) (each
    /// call's id, name and arguments, or the id a result answers), which
    /// travel beside the text.
    pub tokens: u32,
    /// The tool calls an assistant message made, or the call a tool
    /// result answers: sent in the request's own fields (`tool_calls`,
    /// `tool_call_id`), never as text.
    pub call: Option<CallPart>,
}

/// The tool-call part of a section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallPart {
    /// The calls an assistant message made.
    Calls(Arc<[ToolCallRecord]>),
    /// The id of the call a tool result answers.
    Result(Arc<str>),
}

/// A tool call the model made, as the history replays it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallRecord {
    /// The call's id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its arguments, as JSON text.
    pub arguments: String,
}

impl PromptSection {
    /// Whether it is one of seed 004's static components (as opposed to a
    /// pluggable one: the host's logs, a skill's component).
    pub fn is_static(&self) -> bool {
        ids::is_static(self.id)
    }
}

/// Whether a cache answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheState {
    /// The cached value served.
    Hit,
    /// Built, and cached for next time.
    Miss,
    /// Not needed this cycle (the context on a heartbeat or delegation, or
    /// in a context type without it).
    Skipped,
    /// No cache: the token-economics skill is not loaded.
    Off,
}

impl CacheState {
    /// `hit`, `miss`, `skipped` or `off`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Hit => "hit",
            Self::Miss => "miss",
            Self::Skipped => "skipped",
            Self::Off => "off",
        }
    }
}

/// The caches an assembly used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CacheReport {
    /// Contract 1.
    pub prefix: CacheState,
    /// Contract 2.
    pub context: CacheState,
}

/// One message of the conversation history, or a tool's result.
#[derive(Debug, Clone)]
pub struct Message {
    /// `Role::USER` or `Role::ASSISTANT` (or `Role::TOOL`).
    pub role: Role,
    /// What was said.
    pub text: Arc<str>,
    /// An assistant message's tool calls, or the call a tool message
    /// answers.
    pub call: Option<CallPart>,
}

impl Message {
    /// A message of `role` saying `text`.
    pub fn new(role: Role, text: impl Into<Arc<str>>) -> Self {
        Self {
            role,
            text: text.into(),
            call: None,
        }
    }

    /// A tool's result, answering the call `id`.
    pub fn tool_result(id: &str, text: impl Into<Arc<str>>) -> Self {
        Self {
            role: Role::TOOL,
            text: text.into(),
            call: Some(CallPart::Result(Arc::from(id))),
        }
    }

    /// The bytes its tool calls add to a request beside its text (an upper
    /// bound of their tokens).
    pub fn call_bytes(&self) -> usize {
        match &self.call {
            Some(CallPart::Calls(calls)) => calls
                .iter()
                .map(|c| c.id.len() + c.name.len() + c.arguments.len() + 32)
                .sum(),
            Some(CallPart::Result(id)) => id.len() + 16,
            None => 0,
        }
    }
}

/// What a prompt is assembled for.
#[derive(Debug, Clone)]
pub struct PromptInput<'a> {
    /// The signal the cycle answers.
    pub signal: SignalKind,
    /// The context type; none means the signal's ([`context_types::for_signal`]).
    pub context_type: Option<&'a str>,
    /// The object in foveal focus.
    pub focus: Option<&'a str>,
    /// The user's message (or, on a delegation, the sub-task's result).
    pub message: Option<Arc<str>>,
    /// Earlier messages, oldest first.
    pub history: &'a [Message],
    /// The results of the previous cycle's tool calls (each
    /// [`Message::tool_result`]), sent as `tool` messages.
    pub tool_results: &'a [Message],
    /// Every tool the host can offer (the context type filters them).
    pub tools: &'a [ToolSpec],
    /// The host's recent log lines, oldest first.
    pub logs: &'a [String],
    /// Replaces `context.max_tokens` (still capped by the context type and
    /// the model).
    pub budget: Option<u32>,
    /// Where [`budget`](Self::budget) comes from, as messages name it
    /// (`context.max_tokens` when a caller passes the configured value
    /// itself); none: `--budget`.
    pub budget_from: Option<&'a str>,
    /// The tokens of the tool definitions that travel beside the sections
    /// (an upper bound: their bytes): taken out of the budget, and said so
    /// in its source.
    pub tool_definitions: u32,
    /// Count every section exactly even when the bytes show the prompt
    /// fits (loads the tokenizer's tables).
    pub exact_counts: bool,
    /// The session's context window (seed 002), which the
    /// `context-window` skill renders at component 3000; none: no window
    /// section.
    pub window: Option<SessionWindow<'a>>,
    /// The session the prompt is for (a host fact every skill's call is
    /// told, [`foveal_sdk::call::session`]); the window's session when
    /// none.
    pub session: Option<&'a str>,
}

/// The context window of the session a prompt is for: the skills'
/// components are asked in a call whose host facts name the session
/// ([`foveal_sdk::call::session`]) and asked again when the window's
/// revision ([`crate::window::Window::for_prompt`]) changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionWindow<'a> {
    /// The session's name.
    pub session: &'a str,
    /// Bumped by every change to the window.
    pub revision: u64,
}

impl Default for PromptInput<'_> {
    fn default() -> Self {
        Self {
            signal: SignalKind::USER,
            context_type: None,
            focus: None,
            message: None,
            history: &[],
            tool_results: &[],
            tools: &[],
            logs: &[],
            budget: None,
            budget_from: None,
            tool_definitions: 0,
            exact_counts: false,
            window: None,
            session: None,
        }
    }
}

/// The settings an [`Assembler`] works with.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptSettings {
    /// Identity, model, prices and context types.
    pub prompt: PromptConfig,
    /// `context.max_tokens` / `CONTEXT_MAX_TOKENS`.
    pub max_tokens: u32,
    /// `context.semantic_threshold`.
    pub semantic_threshold: f64,
    /// `[awareness]`: the project rules and the map.
    pub awareness: crate::context::AwarenessSettings,
    /// `context.log_limit`: log lines offered to the prompt.
    pub log_limit: usize,
    /// `privacy.tags`.
    pub privacy_tags: Vec<String>,
    /// `[computed_context]`: the computed-context skill's configuration.
    pub computed: crate::computed::ComputedSettings,
    /// `[skills.<name>]`: each skill's own table, as JSON.
    pub skills: std::collections::BTreeMap<String, String>,
}

impl Default for PromptSettings {
    fn default() -> Self {
        Self {
            prompt: PromptConfig::default(),
            max_tokens: 16_384,
            semantic_threshold: 0.75,
            awareness: crate::context::AwarenessSettings::default(),
            log_limit: 20,
            privacy_tags: vec!["@personal".to_owned()],
            computed: crate::computed::ComputedSettings::default(),
            skills: std::collections::BTreeMap::new(),
        }
    }
}

/// What each skill's `components` hook receives as `config_json`: its
/// `[skills.<name>]` table, and for the computed-context skill the host's
/// own settings with the table's other keys added (the host's win).
fn skill_configs(
    tables: &std::collections::BTreeMap<String, String>,
    computed: String,
) -> Vec<(String, String)> {
    let mut configs: Vec<(String, String)> = tables
        .iter()
        .filter(|(name, _)| name.as_str() != crate::computed::SKILL)
        .map(|(name, json)| (name.clone(), json.clone()))
        .collect();
    let computed = match tables.get(crate::computed::SKILL) {
        Some(table) => components::merge_config(&computed, table),
        None => computed,
    };
    configs.push((crate::computed::SKILL.to_owned(), computed));
    configs
}

/// A prompt, ready to be sent.
#[derive(Debug, Clone)]
pub struct Prompt {
    /// The context type it was assembled for.
    pub context_type: &'static str,
    /// The signal it answers.
    pub signal: SignalKind,
    /// Its sections, in id order.
    pub sections: Vec<PromptSection>,
    /// The sum of the sections' tokens.
    pub total_tokens: u32,
    /// Whether the counts are exact. When not, they are byte lengths (upper
    /// bounds): the prompt fit by its bytes and the tokenizer was not
    /// needed.
    pub tokens_exact: bool,
    /// The budget that was enforced.
    pub budget: u32,
    /// Where it came from (`context.max_tokens`, `--budget`,
    /// `context_types.<name>.token_budget`, `model.context_limit`), and
    /// what the tool definitions took out of it
    /// (`context.max_tokens 16384, less 2310 for the tool definitions`).
    pub budget_from: String,
    /// Contract 5: the share of the budget used, 0–100; none without the
    /// token-economics skill.
    pub usage_percent: Option<u8>,
    /// The trimming levels applied.
    pub trim_levels: TrimLevels,
    /// The caches used.
    pub cache: CacheReport,
    /// Why the token-economics skill's work was done by the host's
    /// fallback, if it was.
    pub economics_fallback: Option<String>,
    /// The tools offered.
    pub tools: Vec<String>,
    /// The model it was assembled for.
    pub model: String,
    /// What the privacy gate removed from its sections.
    pub egress: EgressSummary,
}

impl Prompt {
    /// The system prompt's tokens, which a provider can serve from its
    /// prompt cache when the prefix is unchanged since the last request.
    pub fn prefix_tokens(&self) -> u32 {
        self.sections
            .iter()
            .find(|s| s.id == ids::SYSTEM_PROMPT)
            .map_or(0, |s| s.tokens)
    }

    /// The sections' texts, one after the other (for display).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for section in &self.sections {
            out.push_str(section.text.as_str());
            if !out.ends_with('\n') {
                out.push('\n');
            }
        }
        out
    }
}

/// Why no prompt was produced. Each one says what to do.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// The context type asked for does not exist.
    #[error(transparent)]
    UnknownContextType(#[from] UnknownContextType),
    /// Every trimming level was applied and the prompt still does not fit.
    #[error(
        "the prompt does not fit its budget of {budget} tokens ({from}): {why}; {change}, or shorten the largest sections"
    )]
    DoesNotFit {
        /// The budget.
        budget: u32,
        /// Where it came from (the setting or flag, less the tool
        /// definitions).
        from: String,
        /// What the token-economics skill found: the tokens still needed
        /// and the largest sections; and the largest part, as the host
        /// knows it (a tool call of the history, the message, …).
        why: String,
        /// What to change to raise the budget: the setting or flag it came
        /// from.
        change: String,
    },
    /// The tool definitions alone take the whole budget.
    #[error(
        "the tool definitions take {tools} tokens, the whole budget of {budget} tokens ({from}), and leave nothing for the prompt; {change}, or offer fewer tools (a context type's tool_filter, fewer skills with tools)"
    )]
    ToolsOverBudget {
        /// The definitions' tokens (an upper bound: their bytes).
        tools: u32,
        /// The budget before them.
        budget: u32,
        /// Where it came from.
        from: String,
        /// What to change: the setting or flag the budget came from.
        change: String,
    },
    /// The prompt is over the model's context limit and the token-economics
    /// skill is not there to trim it.
    #[error(
        "the prompt takes {total} tokens, over the model's context limit of {limit} (model.context_limit), and the token-economics skill is not loaded to trim it; the largest sections are {}; install the skill or shorten them",
        section_list(largest)
    )]
    OverContextLimit {
        /// The prompt's tokens.
        total: u32,
        /// The limit.
        limit: u32,
        /// The largest sections, by key.
        largest: Vec<(String, u32)>,
    },
    /// The plan said the prompt fits and the host's count says it does not
    /// (a fault in the skill); the prompt is not sent.
    #[error("the prompt takes {total} tokens, over its budget of {budget} ({from}), after trimming ({}); it was not sent", level_list(*levels))]
    OverBudget {
        /// The prompt's tokens.
        total: u32,
        /// The budget.
        budget: u32,
        /// Where it came from.
        from: String,
        /// The levels applied.
        levels: TrimLevels,
    },
    /// The privacy gate could not check the prompt: it must not be sent.
    #[error("the privacy gate could not check the prompt: {0}")]
    Egress(#[from] crate::egress::GateError),
    /// The request body could not be built.
    #[error("the request body could not be built: {0}")]
    Body(String),
}

fn level_list(levels: TrimLevels) -> String {
    if levels.is_empty() {
        "no level applied".to_owned()
    } else {
        levels.names().collect::<Vec<_>>().join(", ")
    }
}

fn section_list(largest: &[(String, u32)]) -> String {
    largest
        .iter()
        .map(|(key, n)| format!("{key} ({n} tokens)"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A signal's name, as the command line and the skill's JSON spell it.
pub fn signal_name(signal: SignalKind) -> &'static str {
    match signal {
        SignalKind::HEARTBEAT => "heartbeat",
        SignalKind::MEMEX_CHANGE => "memex-change",
        SignalKind::SKILL_CHANGE => "skill-change",
        SignalKind::TOOL_OUTPUT => "tool-output",
        SignalKind::DELEGATION => "delegation",
        _ => "user-input",
    }
}

/// A role's name in a request body.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::SYSTEM => "system",
        Role::ASSISTANT => "assistant",
        Role::TOOL => "tool",
        _ => "user",
    }
}

/// Assembles prompts, keeping what can be reused from one cycle to the
/// next: the context renderings (the full one and the one L3 trimmed), the
/// skills' components and the token counts of unchanged sections. One per
/// host (or per session); [`assemble`](Self::assemble) takes `&self` and
/// may run on several threads.
#[derive(Debug)]
pub struct Assembler {
    settings: PromptSettings,
    privacy: PrivacyTags,
    mandates: String,
    context: ContextCache,
    trimmed_context: ContextCache,
    components: components::SkillComponents,
    memo: Mutex<budget::Memo>,
    /// The last log section: reused while the lines are the same, so its
    /// count and the privacy gate's verdict are too.
    last_logs: Mutex<Option<Arc<str>>>,
    /// The privacy gate every section passes, before and after the
    /// budget.
    gate: Arc<Gate>,
    /// What the gate made of the sections of earlier assemblies.
    gate_memo: Mutex<GateMemo>,
}

impl Assembler {
    /// An assembler with `settings`; nothing is cached yet. Its privacy
    /// gate removes the text of objects tagged with the settings' privacy
    /// tags and the built-in secret patterns; use
    /// [`with_gate`](Self::with_gate) for configured patterns. Sets the
    /// process's token encoding to the model's ([`crate::tokens::configure`])
    /// unless something counted tokens before.
    pub fn new(settings: PromptSettings) -> Self {
        let gate = Gate::new(PrivacyTags::new(&settings.privacy_tags), &[], true)
            .expect("the built-in secret patterns compile");
        Self::with_gate(settings, Arc::new(gate))
    }

    /// An assembler whose sections pass `gate` (built from the same
    /// configuration).
    pub fn with_gate(settings: PromptSettings, gate: Arc<Gate>) -> Self {
        let encoding = settings.prompt.model.encoding;
        if !crate::tokens::configure(encoding) && crate::tokens::global().encoding() != encoding {
            tracing::warn!(
                target: "foveal::prompt",
                "tokens are counted with {} (set first in this process), not the model's {encoding}",
                crate::tokens::global().encoding()
            );
        }
        let computed_config = settings
            .computed
            .skill_config(crate::computed::Mode::Text, None);
        let configs = skill_configs(&settings.skills, computed_config);
        Self {
            privacy: PrivacyTags::new(&settings.privacy_tags),
            mandates: components::mandates_text(&settings.prompt.identity.mandates),
            settings,
            context: ContextCache::default(),
            trimmed_context: ContextCache::default(),
            components: components::SkillComponents::with_configs(configs),
            memo: Mutex::new(budget::Memo::default()),
            last_logs: Mutex::new(None),
            gate,
            gate_memo: Mutex::new(GateMemo::default()),
        }
    }

    /// The privacy gate the sections pass.
    pub fn gate(&self) -> &Arc<Gate> {
        &self.gate
    }

    /// The settings.
    pub fn settings(&self) -> &PromptSettings {
        &self.settings
    }

    /// The prompt for `input` on these snapshots, within its budget.
    pub fn assemble(
        &self,
        skills: &Snapshot,
        memex: &MemexSnapshot,
        input: &PromptInput<'_>,
    ) -> Result<Prompt, PromptError> {
        let config = &self.settings.prompt;
        let type_name = input
            .context_type
            .unwrap_or_else(|| context_types::for_signal(input.signal));
        let context_type = config.context_types.get(type_name)?;
        let economics = economics::Economics::new(skills);
        let mut sections: Vec<PromptSection> = Vec::with_capacity(16 + input.history.len());
        let mut cache = CacheReport {
            prefix: CacheState::Off,
            context: CacheState::Off,
        };

        let mut egress = EgressSummary::default();
        let mut memo = self.gate_memo.lock().unwrap_or_else(|e| e.into_inner());
        memo.start(memex, skills);

        // 0: the system prompt (contract 1). The tool belt is skills' text:
        // it passes the gate before the token-economics skill sees it.
        let (belt, tools) = components::tool_belt(input.tools, context_type.tool_filter.as_deref());
        let belt = Text::Owned(belt);
        let belt = memo
            .clean(&self.gate, &belt, Form::Outline, memex, skills, &mut egress)?
            .unwrap_or(belt);
        let belt = belt.as_str();
        let identity = context_type
            .override_of("system_prompt")
            .unwrap_or(&config.identity.text);
        let prefix = PrefixRequest {
            assistant_name: config.identity.name.as_str().into(),
            identity: identity.into(),
            feedback: config.identity.feedback.as_str().into(),
            mandates: self.mandates.as_str().into(),
            tools: belt.into(),
        };
        if context_type.enables(ids::SYSTEM_PROMPT) {
            let (text, state) = economics.prefix(&prefix);
            cache.prefix = state;
            sections.push(host_section(ids::SYSTEM_PROMPT, text));
        }

        // 2000: the context (contract 2).
        let base_request = ContextRequest {
            signal: input.signal,
            focus: input.focus.map(str::to_owned),
            budget: None,
            threshold: self.settings.semantic_threshold,
            explain: false,
            skill_cache: true,
            projects: self.settings.awareness.projects.clone(),
            map: self.settings.awareness.map,
            format: self.settings.awareness.format,
        };
        let mut context_renderable = false;
        if !context_type.enables(ids::SEMANTIC_MEMORIES) {
            cache.context = CacheState::Skipped;
        } else {
            let policy = economics.context_policy(input.signal);
            if !policy.assemble {
                cache.context = CacheState::Skipped;
            } else {
                let (section, state) = if policy.reuse {
                    match self
                        .context
                        .cached(skills, memex, &self.privacy, &base_request)
                    {
                        Some(hit) => (hit, CacheState::Hit),
                        None => (
                            self.context
                                .section(skills, memex, &self.privacy, &base_request),
                            CacheState::Miss,
                        ),
                    }
                } else {
                    (
                        Arc::new(crate::context::render(
                            skills,
                            memex,
                            &self.privacy,
                            &base_request,
                        )),
                        CacheState::Off,
                    )
                };
                cache.context = state;
                context_renderable = matches!(section.origin, Origin::Skill { .. });
                sections.push(host_section(ids::SEMANTIC_MEMORIES, Text::Context(section)));
            }
        }

        // 2500: the recent logs, oldest first.
        if context_type.enables(ids::LOGS) && self.settings.log_limit > 0 && !input.logs.is_empty()
        {
            let lines = &input.logs[input.logs.len().saturating_sub(self.settings.log_limit)..];
            let mut text = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
            for line in lines {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(line.trim_end());
            }
            let mut last = self.last_logs.lock().unwrap_or_else(|e| e.into_inner());
            let shared = match last.as_ref() {
                Some(previous) if **previous == *text => Arc::clone(previous),
                _ => {
                    let shared = Arc::<str>::from(text);
                    *last = Some(Arc::clone(&shared));
                    shared
                }
            };
            drop(last);
            sections.push(host_section(ids::LOGS, Text::Shared(shared)));
        }

        // The skills' components, at the ids they declared.
        let contributed = self.components.get(
            skills,
            memex,
            &self.privacy,
            components::ComponentsFor {
                signal: input.signal,
                focus: input.focus,
                window: input.window,
                session: input.session.or(input.window.map(|w| w.session)),
            },
            economics.loaded(),
        );
        for c in contributed.iter().filter(|c| context_type.enables(c.id)) {
            // The context window's oldest items may be dropped (L4b);
            // other skills' components are never trimmed.
            let kind = if c.id == crate::window::COMPONENT_ID && *c.skill == *crate::window::SKILL {
                SectionKind::WINDOW
            } else {
                components::static_component(c.id).map_or(SectionKind::FIXED, |s| s.kind)
            };
            sections.push(PromptSection {
                id: c.id,
                key: Cow::Owned(c.key.to_string()),
                name: Cow::Owned(c.name.to_string()),
                role: c.role,
                kind,
                text: Text::Shared(Arc::clone(&c.text)),
                tokens: 0,
                call: None,
            });
        }

        // 5000: the history, one section per message.
        if context_type.enables(ids::CONVERSATION_HISTORY) {
            for message in input.history {
                let mut section = host_section(
                    ids::CONVERSATION_HISTORY,
                    Text::Shared(Arc::clone(&message.text)),
                );
                section.role = message.role;
                section.call.clone_from(&message.call);
                sections.push(section);
            }
        }

        // 6000: the pending event.
        if context_type.enables(ids::PENDING_EVENT) {
            let event = if input.signal == SignalKind::HEARTBEAT {
                let mut s =
                    host_section(ids::PENDING_EVENT, Text::Shared(Arc::from(HEARTBEAT_EVENT)));
                s.role = Role::SYSTEM;
                Some(s)
            } else if input.signal == SignalKind::DELEGATION {
                input.message.as_ref().map(|m| {
                    host_section(
                        ids::PENDING_EVENT,
                        Text::Owned(format!("Delegated task result:\n{m}")),
                    )
                })
            } else {
                input
                    .message
                    .as_ref()
                    .map(|m| host_section(ids::PENDING_EVENT, Text::Shared(Arc::clone(m))))
            };
            sections.extend(event);
        }

        // 7000: the tool results, one section each.
        if context_type.enables(ids::TOOL_RESULT) {
            for result in input.tool_results {
                let mut section =
                    host_section(ids::TOOL_RESULT, Text::Shared(Arc::clone(&result.text)));
                section.role = Role::TOOL;
                section.call.clone_from(&result.call);
                sections.push(section);
            }
        }

        self.apply_overrides(context_type, &mut sections);
        // Stable: history messages keep their order.
        let pending = sections.iter().any(|s| s.id == ids::PENDING_EVENT);
        sections.sort_by_key(|s| position(s.id, pending));

        // The gate, before the budget: the token-economics skill and every
        // trimming level see gated text only.
        let mut gated: Vec<usize> = Vec::with_capacity(sections.len());
        for section in &mut sections {
            let form = form_of(section.role);
            if let Some(text) =
                memo.clean(&self.gate, &section.text, form, memex, skills, &mut egress)?
            {
                section.text = text;
            }
            gated.extend(section.text.address());
        }

        // The budget (contract 3), less the tool definitions.
        let (budget_tokens, budget_from) = {
            let mut choice = match input.budget {
                Some(b) => (b, input.budget_from.unwrap_or("--budget").to_owned()),
                None => (self.settings.max_tokens, "context.max_tokens".to_owned()),
            };
            if let Some(b) = context_type.token_budget
                && b < choice.0
            {
                choice = (
                    b,
                    format!("context_types.{}.token_budget", context_type.name),
                );
            }
            if config.model.context_limit < choice.0 {
                choice = (config.model.context_limit, "model.context_limit".to_owned());
            }
            choice
        };
        let budget = budget::Budget::new(budget_tokens, &budget_from, input.tool_definitions)?;
        let previous = std::mem::take(&mut *self.lock_memo());
        let mut counter = budget::Counter::new(previous);
        counter.exact = input.exact_counts;
        let mut failure: Option<PromptError> = None;
        let mut rerender = |tokens: u32| -> Option<Text> {
            if !context_renderable {
                return None;
            }
            // The room left moves by a few tokens from one cycle to the
            // next (a log line's timing, a longer reply): rendering at the
            // room rounded down to a step keeps the trimmed context — and
            // its token counts and the privacy gate's verdict — the same
            // allocation until the room really changes. Rounding down
            // keeps the budget; it costs at most one step of context.
            let tokens = if tokens >= 4 * RERENDER_STEP {
                tokens - tokens % RERENDER_STEP
            } else {
                tokens
            };
            let request = ContextRequest {
                budget: Some(tokens),
                ..base_request.clone()
            };
            let section = self
                .trimmed_context
                .section(skills, memex, &self.privacy, &request);
            if !matches!(section.origin, Origin::Skill { .. }) {
                return None;
            }
            // Gated before the skill's next round sees it.
            let text = Text::Context(section);
            match memo.clean(&self.gate, &text, Form::Outline, memex, skills, &mut egress) {
                Ok(None) => Some(text),
                Ok(Some(cleaned)) => {
                    gated.extend(cleaned.address());
                    Some(cleaned)
                }
                Err(error) => {
                    failure = Some(error);
                    None
                }
            }
        };
        let outcome = budget::enforce(
            &mut sections,
            &economics,
            &prefix,
            &budget,
            config.model.context_limit,
            &mut counter,
            context_renderable,
            &mut rerender,
        );
        if let Some(error) = failure {
            return Err(error);
        }
        let mut outcome = outcome?;

        // The gate again, after the budget: what a trimming level made
        // (a cut message, a rebuilt prefix) is checked like the rest; a
        // section the gate changes is counted again, and the budget is
        // checked again (a marker can be longer than what it replaced).
        let mut changed = false;
        for section in &mut sections {
            if section.text.address().is_some_and(|a| gated.contains(&a)) {
                continue;
            }
            let form = form_of(section.role);
            if let Some(text) =
                memo.clean(&self.gate, &section.text, form, memex, skills, &mut egress)?
            {
                section.text = text;
                let n = counter.section_tokens(section);
                section.tokens = n;
                changed = true;
            }
        }
        drop(memo);
        if changed {
            if !outcome.exact {
                counter.exact = true;
                for section in &mut sections {
                    let n = counter.section_tokens(section);
                    section.tokens = n;
                }
                outcome.exact = true;
            }
            outcome.total =
                u32::try_from(sections.iter().map(|s| u64::from(s.tokens)).sum::<u64>())
                    .unwrap_or(u32::MAX);
            if outcome.total > outcome.enforced.tokens {
                *self.lock_memo() = counter.into_memo();
                return Err(PromptError::OverBudget {
                    total: outcome.total,
                    budget: outcome.enforced.tokens,
                    from: format!(
                        "{}, after the privacy gate's markers",
                        outcome.enforced.from
                    ),
                    levels: outcome.applied,
                });
            }
        }
        *self.lock_memo() = counter.into_memo();

        Ok(Prompt {
            context_type: context_type.name,
            signal: input.signal,
            sections,
            total_tokens: outcome.total,
            tokens_exact: outcome.exact,
            budget: outcome.enforced.tokens,
            budget_from: outcome.enforced.from,
            usage_percent: outcome.usage_percent,
            trim_levels: outcome.applied,
            cache,
            economics_fallback: economics.fallback(),
            tools,
            model: config.model.name.clone(),
            egress,
        })
    }

    /// A context type's `component_overrides`: replace a component's text,
    /// or add a static component the host has no source for.
    fn apply_overrides(&self, context_type: &ContextType, sections: &mut Vec<PromptSection>) {
        for (key, content) in &context_type.component_overrides {
            if key == "system_prompt" {
                continue; // the identity part, applied to the prefix
            }
            let text = Text::Shared(Arc::from(content.as_str()));
            if key == "conversation_history" {
                // One system note in place of the messages.
                sections.retain(|s| s.key != *key);
                if context_type.enables(ids::CONVERSATION_HISTORY) {
                    let mut section = host_section(ids::CONVERSATION_HISTORY, text);
                    section.role = Role::SYSTEM;
                    sections.push(section);
                }
                continue;
            }
            let mut found = false;
            for section in sections.iter_mut().filter(|s| s.key == *key) {
                section.text = text.clone();
                found = true;
            }
            if found {
                continue;
            }
            match components::static_by_key(key) {
                Some(c) if context_type.enables(c.id) => sections.push(host_section(c.id, text)),
                Some(_) => {}
                None => tracing::debug!(
                    target: "foveal::prompt",
                    key = %key,
                    context_type = context_type.name,
                    "override for a component no loaded skill provides; ignored"
                ),
            }
        }
    }

    fn lock_memo(&self) -> std::sync::MutexGuard<'_, budget::Memo> {
        // The memo is replaced whole; a poisoned lock holds a valid value.
        self.memo.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Each assistant message's tool calls followed at once by their results
/// — the tool messages after it and before the next message that calls
/// tools, moved up, matched by id in order (ids repeat from one cycle to
/// the next with some servers) — a call without a result answered "left
/// out of this prompt", a result without a call dropped.
fn pair_tool_messages(messages: Vec<crate::provider::Message>) -> Vec<crate::provider::Message> {
    use crate::provider::Message as M;
    /// What a call whose result was trimmed away is answered.
    const LEFT_OUT: &str = "[the result of this call was left out of this prompt]";
    let calls = |m: &M| matches!(m, M::Assistant { tool_calls, .. } if !tool_calls.is_empty());
    let mut slots: Vec<Option<M>> = messages.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(slots.len());
    for p in 0..slots.len() {
        let Some(message) = slots[p].take() else {
            continue;
        };
        match &message {
            M::Tool { .. } => continue, // claimed by no call
            M::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                let next = (p + 1..slots.len())
                    .find(|&q| slots[q].as_ref().is_some_and(calls))
                    .unwrap_or(slots.len());
                let ids: Vec<String> = tool_calls.iter().map(|c| c.id.clone()).collect();
                out.push(message);
                for id in ids {
                    let found = (p + 1..next).find(|&q| {
                        matches!(&slots[q], Some(M::Tool { tool_call_id, .. }) if *tool_call_id == id)
                    });
                    let content = match found.and_then(|q| slots[q].take()) {
                        Some(M::Tool { content, .. }) => content,
                        _ => LEFT_OUT.to_owned(),
                    };
                    out.push(M::Tool {
                        tool_call_id: id,
                        content,
                    });
                }
            }
            _ => out.push(message),
        }
    }
    out
}

/// Where a component goes in the prompt: by id, except the activity log
/// (2500), which goes just before the pending event (6000), after the
/// conversation history — or last, after the tool results, when there is
/// no pending event (a cycle continuing after tool calls: a system
/// message must not come between the calls and their results). What
/// comes before it then stays the same bytes from one turn to the next
/// while the log gains lines, and a provider that keeps its KV cache
/// between requests (the embedded model, llama-server) reads again only
/// the log and what follows it, not the whole history.
fn position(id: u32, pending: bool) -> (u32, bool) {
    match (id == ids::LOGS, pending) {
        (false, _) => (id, true),
        (true, true) => (ids::PENDING_EVENT, false),
        (true, false) => (u32::MAX, true),
    }
}

/// How the gate reads a section: what the host and skills render (system
/// sections) as an outline, what people, models and tools write as plain
/// text.
fn form_of(role: Role) -> Form {
    if role == Role::SYSTEM {
        Form::Outline
    } else {
        Form::Plain
    }
}

/// A section of a host component.
fn host_section(id: u32, text: Text) -> PromptSection {
    let c = components::static_component(id).expect("a host component id");
    PromptSection {
        id,
        key: Cow::Borrowed(c.key),
        name: Cow::Borrowed(c.name),
        role: c.role,
        kind: c.kind,
        text,
        tokens: 0,
        call: None,
    }
}

/// What the privacy gate made of sections, for one memex generation and one
/// registry generation. A shared section (the context, the prefix, a
/// history message) is recognised by its allocation, which each entry
/// holds, so that it cannot be freed and reused while it is remembered;
/// any other text by its content (hashed, then compared byte for byte: a
/// text made to collide with a clean one is still checked).
#[derive(Debug, Default)]
pub struct GateMemo {
    generations: Option<(u64, u64)>,
    entries: Vec<MemoEntry>,
    by_content: HashMap<u64, ContentEntry>,
}

/// A text remembered by content: the text, the gate's text when it
/// changed it, what was removed.
type ContentEntry = (Arc<str>, Option<Arc<str>>, MemoReport);

impl GateMemo {
    /// Sections remembered at most by allocation (the least recently used
    /// is forgotten first).
    pub const CAPACITY: usize = 128;

    /// Texts remembered at most by content.
    const CONTENT_CAPACITY: usize = 64;

    /// Starts an assembly on these snapshots: what was remembered for
    /// other generations is forgotten.
    pub fn start(&mut self, memex: &MemexSnapshot, skills: &Snapshot) {
        let generations = (memex.generation(), skills.generation());
        if self.generations != Some(generations) {
            self.entries.clear();
            self.by_content.clear();
            self.generations = Some(generations);
        }
    }

    /// `text` through `gate`: `None` when the gate left it as it is, else
    /// the cleaned text. What was removed is added to `summary`.
    pub fn clean(
        &mut self,
        gate: &Gate,
        text: &Text,
        form: Form,
        memex: &MemexSnapshot,
        skills: &Snapshot,
        summary: &mut EgressSummary,
    ) -> Result<Option<Text>, PromptError> {
        let (cleaned, report) = if text.address().is_some() {
            match self.recall(text, form) {
                Some(entry) => (entry.cleaned.clone(), entry.report.clone()),
                None => {
                    let (cleaned, report) = Self::check(gate, text.as_str(), form, memex, skills)?;
                    self.remember(MemoEntry {
                        text: text.clone(),
                        form,
                        cleaned: cleaned.clone(),
                        report: report.clone(),
                    });
                    (cleaned, report)
                }
            }
        } else {
            let hash = crate::memex::file::content_hash(text.as_str().as_bytes())
                ^ u64::from(form == Form::Outline);
            match self.by_content.get(&hash) {
                Some((seen, cleaned, report)) if **seen == *text.as_str() => {
                    (cleaned.clone(), report.clone())
                }
                _ => {
                    let (cleaned, report) = Self::check(gate, text.as_str(), form, memex, skills)?;
                    if self.by_content.len() >= Self::CONTENT_CAPACITY {
                        self.by_content.clear();
                    }
                    self.by_content.insert(
                        hash,
                        (Arc::from(text.as_str()), cleaned.clone(), report.clone()),
                    );
                    (cleaned, report)
                }
            }
        };
        summary.add(&report);
        Ok(cleaned.map(Text::Shared))
    }

    fn check(
        gate: &Gate,
        text: &str,
        form: Form,
        memex: &MemexSnapshot,
        skills: &Snapshot,
    ) -> Result<(Option<Arc<str>>, MemoReport), PromptError> {
        let cleaned = gate.clean_as(text, form, memex, skills)?;
        let report = MemoReport {
            private: cleaned.report.private,
            secrets: cleaned.report.secrets.clone(),
            filter: cleaned.report.filter.to_string(),
        };
        let text = match cleaned.text {
            Cow::Owned(text) => Some(Arc::<str>::from(text)),
            Cow::Borrowed(_) => None,
        };
        Ok((text, report))
    }

    /// The entry for the allocation `text` is, made the most recently used:
    /// a section seen every cycle (the context) is never pushed out by the
    /// history messages that come and go.
    fn recall(&mut self, text: &Text, form: Form) -> Option<&MemoEntry> {
        let address = text.address()?;
        let at = self.entries.iter().position(|e| {
            e.form == form
                && e.text.address() == Some(address)
                && e.text.as_str().len() == text.as_str().len()
        })?;
        self.entries[at..].rotate_left(1);
        self.entries.last()
    }

    /// Remembers a shared section's verdict; a section that is not shared
    /// (no address to know it by) is not remembered.
    fn remember(&mut self, entry: MemoEntry) {
        if entry.text.address().is_none() {
            return;
        }
        if self.entries.len() >= Self::CAPACITY {
            self.entries.remove(0);
        }
        // The cleaned text is a section of its own from now on: known too.
        if let Some(cleaned) = &entry.cleaned {
            self.entries.push(MemoEntry {
                text: Text::Shared(Arc::clone(cleaned)),
                form: entry.form,
                cleaned: None,
                report: MemoReport {
                    private: 0,
                    secrets: Vec::new(),
                    filter: entry.report.filter.clone(),
                },
            });
        }
        self.entries.push(entry);
    }
}

#[derive(Debug)]
struct MemoEntry {
    text: Text,
    form: Form,
    /// The gate's text when it changed the section.
    cleaned: Option<Arc<str>>,
    report: MemoReport,
}

#[derive(Debug, Clone)]
struct MemoReport {
    private: usize,
    secrets: Vec<(String, usize)>,
    filter: String,
}

/// What the privacy gate removed from a prompt: kinds and counts, never
/// text.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EgressSummary {
    /// Passages of private text.
    pub private: usize,
    /// Secrets, by pattern name.
    pub secrets: BTreeMap<String, usize>,
    /// Which filter removed the secrets (`skill` or `host`).
    pub filter: String,
}

impl EgressSummary {
    fn add(&mut self, report: &MemoReport) {
        self.private += report.private;
        for (name, n) in &report.secrets {
            *self.secrets.entry(name.clone()).or_default() += n;
        }
        self.filter.clone_from(&report.filter);
    }
}

/// A request body, checked by the privacy gate, ready for a provider.
#[derive(Debug, Clone)]
pub struct RequestBody {
    /// The chat-completions JSON body.
    pub json: String,
    /// What the gate removed.
    pub egress: EgressSummary,
    /// The prompt's tokens after the gate.
    pub tokens: u32,
}

impl Prompt {
    /// The messages of a chat request, in the protocol's own roles:
    /// consecutive system sections become one system message (the log
    /// lines are always one of their own); an
    /// assistant message carries its tool calls in `tool_calls`, and each
    /// tool result is a `tool` message answering its call's id, right after
    /// the message that made the call. Memex text and tool output thus
    /// never speak as the user, and the model is never shown a call syntax
    /// of the host's own to imitate.
    ///
    /// The protocol wants every call answered and every answer called for;
    /// trimming (L4 drops the oldest history) can break a pair, so a call
    /// whose result is gone is answered "left out of this prompt", and a
    /// result whose call is gone is left out too. A tool section without a
    /// call id (a context type's override of `tool_result`: configuration
    /// text) joins the system message.
    pub fn chat_messages(&self) -> Vec<crate::provider::Message> {
        use crate::provider::{AssistantToolCall, Message as M};
        let mut messages = Vec::new();
        let mut system = String::new();
        for section in &self.sections {
            let text = section.text.as_str();
            let id_less_tool =
                section.role == Role::TOOL && !matches!(section.call, Some(CallPart::Result(_)));
            if section.kind == SectionKind::LOGS && !system.is_empty() {
                // The log lines are a message of their own, so that the
                // system message before them stays the same when they
                // change (see `position`).
                messages.push(M::System(std::mem::take(&mut system)));
            }
            if section.role == Role::SYSTEM || id_less_tool {
                if !system.is_empty() {
                    system.push_str("\n\n");
                }
                system.push_str(text.trim_end());
                if section.kind == SectionKind::LOGS {
                    messages.push(M::System(std::mem::take(&mut system)));
                }
                continue;
            }
            if !system.is_empty() {
                messages.push(M::System(std::mem::take(&mut system)));
            }
            messages.push(match (&section.call, section.role) {
                (Some(CallPart::Result(id)), _) => M::Tool {
                    tool_call_id: id.to_string(),
                    content: text.to_owned(),
                },
                (call, Role::ASSISTANT) => M::Assistant {
                    content: text.to_owned(),
                    tool_calls: match call {
                        Some(CallPart::Calls(calls)) => calls
                            .iter()
                            .map(|c| AssistantToolCall {
                                id: c.id.clone(),
                                name: c.name.clone(),
                                arguments: c.arguments.clone(),
                            })
                            .collect(),
                        _ => Vec::new(),
                    },
                },
                _ => M::User(text.to_owned()),
            });
        }
        if !system.is_empty() {
            messages.push(M::System(system));
        }
        pair_tool_messages(messages)
    }

    /// The request body: the one place a prompt becomes bytes for a
    /// provider. The sections passed the privacy gate when the prompt was
    /// assembled; the request as a whole passes it once more
    /// ([`Gate::check_request`]) before it becomes the chat-completions
    /// JSON ([`crate::provider::request_body`]) of
    /// [`chat_messages`](Self::chat_messages).
    pub fn into_request_body(
        self,
        gate: &Gate,
        memex: &MemexSnapshot,
        skills: &Snapshot,
    ) -> Result<RequestBody, PromptError> {
        let mut request = crate::provider::ChatRequest::new(self.chat_messages());
        request.model = Some(self.model.clone());
        gate.check_request(
            &mut request,
            memex,
            skills,
            &mut crate::egress::RequestMemo::default(),
        )?;
        let json = crate::provider::request_body(&request, None)
            .map_err(|error| PromptError::Body(error.to_string()))?
            .into_string();
        Ok(RequestBody {
            json,
            egress: self.egress,
            tokens: self.total_tokens,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assembler_can_be_shared_between_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Assembler>();
        shared::<Prompt>();
    }

    #[test]
    fn tool_results_follow_their_calls_and_no_pair_is_broken() {
        use crate::provider::{AssistantToolCall, Message as M};
        let assistant = |ids: &[&str]| M::Assistant {
            content: String::new(),
            tool_calls: ids
                .iter()
                .map(|id| AssistantToolCall {
                    id: (*id).to_owned(),
                    name: "t".to_owned(),
                    arguments: "{}".to_owned(),
                })
                .collect(),
        };
        let tool = |id: &str, text: &str| M::Tool {
            tool_call_id: id.to_owned(),
            content: text.to_owned(),
        };
        let shape = |messages: &[M]| -> Vec<String> {
            messages
                .iter()
                .map(|m| match m {
                    M::System(t) | M::User(t) => t.clone(),
                    M::Assistant { tool_calls, .. } => format!(
                        "calls {}",
                        tool_calls
                            .iter()
                            .map(|c| c.id.as_str())
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                    M::Tool {
                        tool_call_id,
                        content,
                    } => format!("{tool_call_id}={content}"),
                })
                .collect()
        };
        let paired = pair_tool_messages(vec![
            M::User("orphan before".into()),
            tool("x", "orphan"),
            assistant(&["c0"]),
            tool("c0", "first"),
            assistant(&["c0", "c1"]),
            M::System("a note between".into()),
            tool("c1", "second b"),
            tool("c0", "second a"),
        ]);
        assert_eq!(
            shape(&paired),
            [
                "orphan before",
                "calls c0",
                "c0=first",
                "calls c0,c1",
                "c0=second a",
                "c1=second b",
                "a note between",
            ]
        );
        let missing = pair_tool_messages(vec![assistant(&["c0"]), M::User("next".into())]);
        assert_eq!(
            shape(&missing),
            [
                "calls c0",
                "c0=[the result of this call was left out of this prompt]",
                "next"
            ]
        );
    }

    #[test]
    fn names_of_signals_and_roles() {
        assert_eq!(signal_name(SignalKind::USER), "user-input");
        assert_eq!(signal_name(SignalKind::DELEGATION), "delegation");
        assert_eq!(role_name(Role::TOOL), "tool");
        assert_eq!(CacheState::Skipped.name(), "skipped");
    }

    fn verdict(text: &Text) -> MemoEntry {
        MemoEntry {
            text: text.clone(),
            form: Form::Plain,
            cleaned: None,
            report: MemoReport {
                private: 0,
                secrets: Vec::new(),
                filter: "host".to_owned(),
            },
        }
    }

    #[test]
    fn the_gate_memo_keeps_a_section_seen_every_cycle_however_many_others_pass() {
        let mut memo = GateMemo::default();
        let context = Text::Shared(Arc::from("the context, the same every cycle"));
        memo.remember(verdict(&context));
        for cycle in 0..3 * GateMemo::CAPACITY {
            let message = Text::Shared(Arc::from(format!("history message {cycle}")));
            assert!(memo.recall(&message, Form::Plain).is_none());
            memo.remember(verdict(&message));
            assert!(
                memo.recall(&context, Form::Plain).is_some(),
                "the context was forgotten after {cycle} messages"
            );
            assert!(memo.entries.len() <= GateMemo::CAPACITY);
        }
    }

    #[test]
    fn the_gate_memo_forgets_the_least_recently_used_and_never_an_unshared_text() {
        let mut memo = GateMemo::default();
        let first = Text::Shared(Arc::from("first"));
        memo.remember(verdict(&first));
        let others: Vec<Text> = (0..GateMemo::CAPACITY)
            .map(|i| Text::Shared(Arc::from(format!("other {i}"))))
            .collect();
        for other in &others {
            memo.remember(verdict(other));
        }
        assert!(
            memo.recall(&first, Form::Plain).is_none(),
            "the oldest unused goes first"
        );
        assert!(memo.recall(&others[0], Form::Plain).is_some());
        // The same bytes in another allocation are another section.
        assert!(
            memo.recall(&Text::Shared(Arc::from("other 1")), Form::Plain)
                .is_none()
        );
        let owned = Text::Owned("log lines".to_owned());
        memo.remember(verdict(&owned));
        assert!(memo.recall(&owned, Form::Plain).is_none());
    }
}
