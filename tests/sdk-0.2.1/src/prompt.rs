//! Prompt components (seed 004) and the token-economics hooks (seed 003).
//!
//! A prompt is a list of components assembled in id order. The static
//! components sit at 1000-point ids ([`ids`]); a skill contributes
//! components at free ids between them (1001–1499 after character context,
//! 4001–4999 after goals, and so on) and **declares those ids** in its
//! manifest (`component_ids: [4500]` in
//! [`export_skill!`](crate::export_skill)). Two skills declaring one id is an
//! error the host reports when the second one loads; a component a skill
//! returns at an id it did not declare is dropped.
//!
//! The rest of this module is the ABI of the two token-economics hooks:
//!
//! - `prefix` (contract 1): build the IDENTITY+TOOLS system prompt from its
//!   five inputs, and answer from a cache while they are unchanged;
//! - `budget` (contract 3): given the prompt's sections and their token
//!   counts, say what to trim so that it fits. The host calls it in rounds:
//!   it applies the plan (replacing or dropping sections, re-rendering the
//!   context at a smaller budget), counts again and asks again, until the
//!   skill answers [`BudgetPlan::fits`] or fails with
//!   [`SkillError::DOES_NOT_FIT`](crate::SkillError::DOES_NOT_FIT). The host
//!   checks the final total itself: a prompt over its budget is never sent.
//!
//! Texts cross as borrowed [`RStr`]s (no copy); texts a skill returns are
//! [`RArc<RString>`], so the host can keep them and recognise an unchanged
//! one by its address.

use abi_stable::{
    StableAbi,
    std_types::{RArc, ROption, RSlice, RStr, RString, RVec},
};

/// The component ids of seed 004.
pub mod ids {
    /// System prompt: identity, standing mandates and the tool belt (the
    /// host fills it, through the token-economics skill when it is loaded).
    pub const SYSTEM_PROMPT: u32 = 0;
    /// Character context: persona and session state.
    pub const CHARACTER_CONTEXT: u32 = 1000;
    /// Entity context: profiles of the people and things in play.
    pub const ENTITY_CONTEXT: u32 = 1500;
    /// Semantic memories: the awareness skill's outline of the memex.
    pub const SEMANTIC_MEMORIES: u32 = 2000;
    /// The host's recent log lines (a host component after 2000).
    pub const LOGS: u32 = 2500;
    /// Context buffer: ambient items.
    pub const CONTEXT_BUFFER: u32 = 3000;
    /// Goals.
    pub const GOALS: u32 = 4000;
    /// Conversation history: earlier messages, oldest first.
    pub const CONVERSATION_HISTORY: u32 = 5000;
    /// Pending event: the signal this cycle answers (the user's message).
    pub const PENDING_EVENT: u32 = 6000;
    /// Tool result: the previous tool call's output.
    pub const TOOL_RESULT: u32 = 7000;

    /// The nine static ids, in order.
    pub const STATIC: [u32; 9] = [
        SYSTEM_PROMPT,
        CHARACTER_CONTEXT,
        ENTITY_CONTEXT,
        SEMANTIC_MEMORIES,
        CONTEXT_BUFFER,
        GOALS,
        CONVERSATION_HISTORY,
        PENDING_EVENT,
        TOOL_RESULT,
    ];

    /// Ids the host fills itself; no skill may declare them.
    pub const HOST_FILLED: [u32; 5] = [
        SYSTEM_PROMPT,
        LOGS,
        CONVERSATION_HISTORY,
        PENDING_EVENT,
        TOOL_RESULT,
    ];

    /// The largest id a component may have (the last of the 999 slots
    /// after the tool result).
    pub const MAX: u32 = 7999;

    /// The static id a component at `id` follows (`4500` → `4000`): a
    /// pluggable component is in a prompt when the context type enables
    /// the static component it follows.
    pub const fn anchor(id: u32) -> u32 {
        let mut i = STATIC.len();
        while i > 0 {
            i -= 1;
            if STATIC[i] <= id {
                return STATIC[i];
            }
        }
        SYSTEM_PROMPT
    }

    /// The skill the host asks for the context section (2000) by name.
    pub const CONTEXT_SKILL: &str = "awareness";

    /// The ranges of component ids a skill may declare, in order, each
    /// with the static component it follows (see `docs/skill-abi.md`):
    /// every id from 1 to [`MAX`] except the ones the host fills
    /// ([`HOST_FILLED`]) and 2000, which is the `awareness` skill's.
    pub const FREE_RANGES: [(u32, u32); 7] = [
        (1, 1999),
        (2001, 2499),
        (2501, 4999),
        (5001, 5999),
        (6001, 6999),
        (7001, MAX),
        // Only for the skill named `awareness`.
        (SEMANTIC_MEMORIES, SEMANTIC_MEMORIES),
    ];

    const fn same(a: &str, b: &str) -> bool {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }

    /// Checks the component ids skill `name` declares, with the rules the
    /// host applies at load; the error says which rule and the free
    /// ranges. A `const fn`: [`export_skill!`](crate::export_skill) calls
    /// it at compile time, so a skill with a bad id does not build.
    pub const fn check_declared(name: &str, declared: &[u32]) -> Result<(), &'static str> {
        let mut i = 0;
        while i < declared.len() {
            let id = declared[i];
            if id > MAX {
                return Err(
                    "foveal: a declared component id is above 7999, the largest prompt component id. Ids free for skills: 1-1999, 2001-2499, 2501-4999, 5001-5999, 6001-6999, 7001-7999 (table in docs/skill-abi.md)",
                );
            }
            let mut h = 0;
            while h < HOST_FILLED.len() {
                if HOST_FILLED[h] == id {
                    return Err(
                        "foveal: a declared component id is one the host fills itself (0 system prompt, 2500 logs, 5000 conversation history, 6000 pending event, 7000 tool result). Ids free for skills: 1-1999, 2001-2499, 2501-4999, 5001-5999, 6001-6999, 7001-7999 (table in docs/skill-abi.md)",
                    );
                }
                h += 1;
            }
            if id == SEMANTIC_MEMORIES && !same(name, CONTEXT_SKILL) {
                return Err(
                    "foveal: component id 2000 (the context section) is reserved for the `awareness` skill. Ids free for skills: 1-1999, 2001-2499, 2501-4999, 5001-5999, 6001-6999, 7001-7999 (table in docs/skill-abi.md)",
                );
            }
            let mut j = 0;
            while j < i {
                if declared[j] == id {
                    return Err("foveal: a component id is declared twice in component_ids");
                }
                j += 1;
            }
            i += 1;
        }
        Ok(())
    }

    /// Whether `id` is one of the nine static ids.
    pub const fn is_static(id: u32) -> bool {
        let mut i = 0;
        while i < STATIC.len() {
            if STATIC[i] == id {
                return true;
            }
            i += 1;
        }
        false
    }
}

/// The five inputs of the system-prompt prefix (seed 003, contract 1).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixRequest<'a> {
    /// The assistant's name.
    pub assistant_name: RStr<'a>,
    /// Who the assistant is and how it works.
    pub identity: RStr<'a>,
    /// Feedback on its behaviour, to keep in mind.
    pub feedback: RStr<'a>,
    /// Standing mandates, one per line (dropped first of the prefix, at L2).
    pub mandates: RStr<'a>,
    /// The tool belt, rendered (`No tools` when there are none).
    pub tools: RStr<'a>,
}

/// The IDENTITY+TOOLS prefix (seed 003, contract 1), built by the
/// token-economics skill, and by the host when that skill is absent: one
/// implementation for both. Unlike the seed, which glued the name,
/// identity and feedback together without a separator, each part is on
/// its own lines and an empty part leaves no heading:
///
/// ```text
/// IDENTITY: <name>
/// <identity>
///
/// FEEDBACK:
/// <feedback>
///
/// STANDING MANDATES:
/// <mandates>
///
/// TOOLS:
/// <tools>
/// ```
pub fn prefix_text(request: &PrefixRequest<'_>) -> String {
    let part = |s: &str| s.trim_end_matches(['\n', '\r', ' ', '\t']).to_owned();
    let (name, identity, feedback, mandates, tools) = (
        part(request.assistant_name.as_str()),
        part(request.identity.as_str()),
        part(request.feedback.as_str()),
        part(request.mandates.as_str()),
        part(request.tools.as_str()),
    );
    let mut text = String::with_capacity(
        64 + name.len() + identity.len() + feedback.len() + mandates.len() + tools.len(),
    );
    text.push_str("IDENTITY: ");
    text.push_str(&name);
    text.push('\n');
    if !identity.is_empty() {
        text.push_str(&identity);
        text.push('\n');
    }
    if !feedback.is_empty() {
        text.push_str("\nFEEDBACK:\n");
        text.push_str(&feedback);
        text.push('\n');
    }
    if !mandates.is_empty() {
        text.push_str("\nSTANDING MANDATES:\n");
        text.push_str(&mandates);
        text.push('\n');
    }
    text.push_str("\nTOOLS:\n");
    text.push_str(if tools.is_empty() { "No tools" } else { &tools });
    text.push('\n');
    text
}

/// The answer of the `prefix` hook.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct Prefix {
    /// The prefix. The same allocation is returned while the inputs are
    /// unchanged.
    pub text: RArc<RString>,
    /// Whether it came from the cache.
    pub hit: bool,
}

/// What a prompt section is, for trimming (seed 003, contract 3). A small
/// open set of numbers, not an enum (see [`SkillError`](crate::SkillError)).
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SectionKind(pub u8);

impl SectionKind {
    /// Never trimmed (tool result, pluggable components, …).
    pub const FIXED: Self = Self(0);
    /// The system prompt: L2 rebuilds it without the standing mandates.
    pub const PREFIX: Self = Self(1);
    /// Log lines, one per line: L1 keeps the last five.
    pub const LOGS: Self = Self(2);
    /// The context (semantic memories): L3 re-renders it smaller or
    /// replaces it by a one-line summary.
    pub const CONTEXT: Self = Self(3);
    /// One message of the conversation history, oldest first: dropped
    /// oldest first when the levels above were not enough. Its tokens
    /// include what travels beside its text: an assistant message's tool
    /// calls (ids, names, arguments), a tool result's call id; dropping it
    /// drops them too.
    pub const HISTORY: Self = Self(4);
    /// The pending event (the user's message): its middle is cut, with a
    /// marker, when nothing else is left to trim.
    pub const MESSAGE: Self = Self(5);
    /// The context window (seed 002, component 3000): Markdown item
    /// blocks (`### ` headings outside fences), oldest first; its oldest
    /// items are dropped, with a marker, after the history (L4b).
    pub const WINDOW: Self = Self(6);
}

/// A set of trimming levels, as bits.
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TrimLevels(pub u32);

impl TrimLevels {
    /// No level.
    pub const NONE: Self = Self(0);
    /// L1: logs cut to their last five lines.
    pub const LOGS: Self = Self(1);
    /// L2: standing mandates dropped.
    pub const MANDATES: Self = Self(1 << 1);
    /// L3: the context re-rendered at the remaining budget, or replaced by
    /// its one-line summary.
    pub const CONTEXT: Self = Self(1 << 2);
    /// L4: the oldest conversation history dropped.
    pub const HISTORY: Self = Self(1 << 3);
    /// L5: the middle of an oversized user message cut out, with a marker.
    pub const MESSAGE: Self = Self(1 << 4);
    /// L4b: the oldest items of the context window (seed 002) dropped,
    /// with a marker — after the history, before the user's message.
    pub const WINDOW: Self = Self(1 << 5);
    /// L1b: the tool calls (arguments) and tool results of the
    /// conversation history cut, each with a note saying how much — past
    /// turns' first, the current turn's only as far as needed. The host
    /// cuts them (the `budget` hook does not see the calls' arguments): a
    /// plan asks for it by applying this level, with no edit of its own,
    /// and plans the next levels on the next round's counts, as it does
    /// for an L3 re-rendering. After L1, before L2. A skill built before
    /// this constant never asks for it; the history is then only dropped
    /// (L4), calls with their messages.
    pub const TOOL_CALLS: Self = Self(1 << 6);

    /// Every level, in the order they are applied, with its name.
    pub const ALL: [(Self, &'static str); 7] = [
        (Self::LOGS, "L1_logs"),
        (Self::TOOL_CALLS, "L1b_tool_calls"),
        (Self::MANDATES, "L2_mandates"),
        (Self::CONTEXT, "L3_context"),
        (Self::HISTORY, "L4_history"),
        (Self::WINDOW, "L4b_window"),
        (Self::MESSAGE, "L5_user_message"),
    ];

    /// Whether every level of `other` is in `self`.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets.
    #[must_use]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// Whether no level is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The names of the levels in the set, in order (`L1_logs`, …).
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::ALL
            .into_iter()
            .filter(move |(level, _)| self.contains(*level))
            .map(|(_, name)| name)
    }
}

impl std::ops::BitOr for TrimLevels {
    type Output = Self;

    fn bitor(self, other: Self) -> Self {
        self.union(other)
    }
}

/// One section of the prompt, as the `budget` hook sees it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct BudgetSection<'a> {
    /// Its component id.
    pub id: u32,
    /// What it is, for trimming.
    pub kind: SectionKind,
    /// Its text.
    pub text: RStr<'a>,
    /// Its tokens: exact when [`BudgetRequest::exact`], else the byte
    /// length (an upper bound).
    pub tokens: u32,
}

/// The input of the `budget` hook: the prompt as it stands in this round.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct BudgetRequest<'a> {
    /// The tokens the prompt may use.
    pub budget: u32,
    /// The inputs the [`SectionKind::PREFIX`] section was built from (L2
    /// rebuilds it without the mandates).
    pub prefix: PrefixRequest<'a>,
    /// The sections, in prompt order.
    pub sections: RSlice<'a, BudgetSection<'a>>,
    /// The levels earlier rounds of this assembly applied.
    pub applied: TrimLevels,
    /// Whether the host can re-render the context at a smaller budget
    /// (the awareness skill is loaded): L3 asks for that instead of the
    /// one-line summary.
    pub context_renderable: bool,
    /// Whether the token counts are exact. When not, they are byte lengths
    /// and the sections fit (the host counts exactly whenever they might
    /// not).
    pub exact: bool,
}

/// One change a budget plan makes to a section of its request.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct SectionEdit {
    /// The section's position in [`BudgetRequest::sections`].
    pub index: u32,
    /// Its new text, or none to drop it. A history section that is
    /// replaced becomes a system note (the marker of what was dropped).
    pub text: ROption<RArc<RString>>,
}

/// The answer of the `budget` hook for one round.
#[repr(C)]
#[derive(StableAbi, Debug, Clone)]
pub struct BudgetPlan {
    /// The sections fit as they are: nothing to do. The skill records
    /// their counts (contract 5).
    pub fits: bool,
    /// The levels this plan applies.
    pub applied: TrimLevels,
    /// The changes, by section.
    pub edits: RVec<SectionEdit>,
    /// L3: re-render the context section at this many tokens.
    pub context_budget: ROption<u32>,
    /// Contract 5 when [`fits`](Self::fits): the share of the budget used,
    /// 0–100.
    pub usage_percent: ROption<u8>,
}

impl BudgetPlan {
    /// The plan for sections that fit.
    pub fn fits(usage_percent: Option<u8>) -> Self {
        Self {
            fits: true,
            applied: TrimLevels::NONE,
            edits: RVec::new(),
            context_budget: ROption::RNone,
            usage_percent: usage_percent.into(),
        }
    }
}
