//! The host's half of the budget (seed 003, contract 3): counting the
//! sections, running the token-economics skill's plan round by round, and
//! the guarantee that no prompt over its limit leaves this module.
//!
//! # Counting
//!
//! - A prompt whose byte length is within its budget fits (no token is
//!   shorter than a byte): nothing is counted and the tokenizer's tables
//!   (≈ 0.3 s to load) stay unloaded. The counts reported are then the
//!   byte lengths, flagged as upper bounds.
//! - Otherwise — or once the tables are loaded anyway, or when exact
//!   counts are asked for — every section is counted with the model's
//!   encoding. A section whose text is the same allocation as in the last
//!   assembly (the cached prefix, the cached context, a history message)
//!   is not even hashed: its count is remembered by address, and the memo
//!   keeps the allocation alive so the address cannot be reused. Other
//!   texts go through [`crate::tokens`], which caches by content and
//!   counts long texts in chunks.
//!
//! A section's count is its text's and, for a message of the history,
//! that of what travels beside the text in the request: an assistant
//! message's tool calls (ids, names, arguments), a tool result's call id.
//! Tool calls are part of the budget like any text, and go when their
//! message goes (L4) or are cut (L1b); nothing of the history is taken out
//! of the budget before it is planned.
//!
//! # Rounds
//!
//! The skill's `budget` hook gets the sections with their counts and
//! answers with a plan; the host applies it (only to the sections each
//! level may touch), re-renders the context when L3 asks for it, cuts the
//! history's tool calls and results when L1b asks for it
//! ([`super::calls`]), counts again and asks again, until the skill says
//! the prompt fits. The host then checks the total itself.
//!
//! # Without the skill
//!
//! Nothing is trimmed. A prompt over the model's context limit is an error;
//! one over the budget but within the limit is sent with a warning (the
//! budget is the skill's policy, the limit is the model's).

use std::collections::HashMap;

use abi_stable::std_types::ROption;
use foveal_sdk::Role;
use foveal_sdk::prompt::{PrefixRequest, SectionKind, TrimLevels, ids};

use super::economics::{BudgetFailure, Economics};
use super::{CallPart, PromptError, PromptSection, Text};

/// The most rounds a plan may take (each applies at least one new level;
/// there are seven, and L3 may take two rounds).
const MAX_ROUNDS: usize = 10;

/// The budget a prompt was assembled against, and where it came from.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    pub tokens: u32,
    /// Where it came from, as the messages say it: the setting or flag,
    /// and what was taken out of it for the tool definitions.
    pub from: String,
    /// What to change to raise it, for the messages: the setting or flag
    /// it came from, never another.
    pub change: String,
}

impl Budget {
    /// `tokens` from `source` (`--budget`, `context.max_tokens`,
    /// `context_types.<name>.token_budget`, `model.context_limit`), less
    /// `tool_definitions` tokens for the tool definitions that travel
    /// beside the sections (an upper bound: their bytes). An error when
    /// the definitions leave nothing.
    pub(crate) fn new(
        tokens: u32,
        source: &str,
        tool_definitions: u32,
    ) -> Result<Self, PromptError> {
        let change = change_for(source);
        if tool_definitions == 0 {
            return Ok(Self {
                tokens,
                from: source.to_owned(),
                change,
            });
        }
        if tool_definitions >= tokens {
            return Err(PromptError::ToolsOverBudget {
                tools: tool_definitions,
                budget: tokens,
                from: source.to_owned(),
                change,
            });
        }
        Ok(Self {
            tokens: tokens - tool_definitions,
            from: format!("{source} {tokens}, less {tool_definitions} for the tool definitions"),
            change,
        })
    }
}

/// What to change to raise the budget, when it comes from `source`: that
/// setting or flag, never another.
fn change_for(source: &str) -> String {
    match source {
        "--budget" => "give a larger --budget".to_owned(),
        "context.max_tokens" => {
            "raise context.max_tokens in the configuration (or CONTEXT_MAX_TOKENS)".to_owned()
        }
        "model.context_limit" => {
            "raise model.context_limit only if the model reads more".to_owned()
        }
        other => format!("raise {other} in the configuration"),
    }
}

/// Token counts remembered from the last assembly, by text address.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    by_address: HashMap<usize, (Text, u32)>,
}

/// Counts the sections of one assembly.
#[derive(Debug)]
pub(crate) struct Counter {
    previous: Memo,
    current: Memo,
    pub exact: bool,
}

impl Counter {
    pub(crate) fn new(previous: Memo) -> Self {
        Self {
            previous,
            current: Memo::default(),
            exact: false,
        }
    }

    /// The memo to keep for the next assembly.
    pub(crate) fn into_memo(self) -> Memo {
        self.current
    }

    /// The tokens of `text`: exact when [`exact`](Self::exact), else its
    /// byte length.
    pub(crate) fn count(&mut self, text: &Text) -> u32 {
        if !self.exact {
            return saturate(text.as_str().len());
        }
        let Some(address) = text.address() else {
            return saturate(crate::tokens::global().count(text.as_str()));
        };
        if let Some((_, n)) = self.current.by_address.get(&address) {
            return *n;
        }
        let n = match self.previous.by_address.remove(&address) {
            Some((_, n)) => n,
            None => saturate(crate::tokens::global().count(text.as_str())),
        };
        self.current.by_address.insert(address, (text.clone(), n));
        n
    }

    /// The tokens of a section: its text's, and those of what travels
    /// beside it (see [`call_text`]).
    pub(crate) fn section_tokens(&mut self, section: &PromptSection) -> u32 {
        let text = self.count(&section.text);
        let exact = self.exact;
        let mut beside: u32 = 0;
        call_text(section.call.as_ref(), &mut |part: &str| {
            let n = if exact {
                saturate(crate::tokens::global().count(part))
            } else {
                saturate(part.len())
            };
            beside = beside.saturating_add(n);
        });
        text.saturating_add(beside)
    }

    /// Counts every section again (after switching to exact counts).
    fn recount(&mut self, sections: &mut [PromptSection]) {
        for section in sections {
            let n = self.section_tokens(section);
            section.tokens = n;
        }
    }
}

/// Each text of a call part that travels in the request beside its
/// section's text: every call's id, name and arguments, or the id of the
/// call a result answers. (The framing around them is not counted, as the
/// framing of messages is not.)
fn call_text(call: Option<&CallPart>, each: &mut dyn FnMut(&str)) {
    match call {
        Some(CallPart::Calls(calls)) => {
            for c in calls.iter() {
                each(&c.id);
                each(&c.name);
                each(&c.arguments);
            }
        }
        Some(CallPart::Result(id)) => each(id),
        None => {}
    }
}

/// The bytes of a section: its text and its call part.
fn section_bytes(section: &PromptSection) -> usize {
    let mut bytes = section.text.as_str().len();
    call_text(section.call.as_ref(), &mut |part: &str| bytes += part.len());
    bytes
}

fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The result of enforcing the budget.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub total: u32,
    pub exact: bool,
    pub applied: TrimLevels,
    pub usage_percent: Option<u8>,
    /// The limit that was enforced: the budget, or without the skill the
    /// model's context limit.
    pub enforced: Budget,
}

/// What L3 needs from the host: the context rendered again at a budget.
pub(crate) type Rerender<'a> = dyn FnMut(u32) -> Option<Text> + 'a;

/// Counts the sections and makes them fit `budget` (seed 003, contract 3),
/// or says why they cannot.
#[allow(clippy::too_many_arguments)]
pub(crate) fn enforce(
    sections: &mut Vec<PromptSection>,
    economics: &Economics<'_>,
    prefix: &PrefixRequest<'_>,
    budget: &Budget,
    context_limit: u32,
    counter: &mut Counter,
    context_renderable: bool,
    rerender: &mut Rerender<'_>,
) -> Result<Outcome, PromptError> {
    let bytes: usize = sections.iter().map(section_bytes).sum();
    counter.exact =
        counter.exact || crate::tokens::global().is_loaded() || bytes > budget.tokens as usize;
    counter.recount(sections);

    let mut applied = TrimLevels::NONE;
    // Whether L1b cut anything (it is reported only then).
    let mut calls_cut = false;
    let mut usage_percent = None;
    let mut planned = false;
    for round in 0..=MAX_ROUNDS {
        if round == MAX_ROUNDS {
            economics.reject_plan(format!("it did not fit after {MAX_ROUNDS} rounds"));
            break;
        }
        let plan = economics.budget(super::economics::OwnedBudget {
            budget: budget.tokens,
            prefix: super::economics::OwnedPrefix::of(prefix),
            sections: sections
                .iter()
                .map(|s| (s.id, s.kind, s.text.clone(), s.tokens))
                .collect(),
            applied,
            context_renderable,
            exact: counter.exact,
        });
        let plan = match plan {
            Ok(plan) => plan,
            Err(BudgetFailure::DoesNotFit(why)) => {
                return Err(does_not_fit(sections, budget, why));
            }
            Err(BudgetFailure::Unavailable) => break,
        };
        if plan.fits {
            planned = true;
            usage_percent = plan.usage_percent.into_option().map(|p| p.min(100));
            break;
        }
        // L1b, asked for in this round: the host cuts the history's tool
        // calls and results once the plan's edits are applied.
        let cut_calls = plan.applied.contains(TrimLevels::TOOL_CALLS)
            && !applied.contains(TrimLevels::TOOL_CALLS);
        if let Err(why) = apply(sections, &plan, context_renderable, cut_calls, rerender) {
            economics.reject_plan(why);
            break;
        }
        applied = applied.union(plan.applied);
        if !counter.exact {
            counter.exact = true;
            counter.recount(sections);
        } else {
            for section in sections.iter_mut() {
                let n = counter.section_tokens(section);
                section.tokens = n;
            }
        }
        if cut_calls {
            calls_cut = super::calls::cut(sections, budget.tokens, counter);
        }
    }
    // L1b is reported only when it cut something (a skill asks for it
    // whenever there is a history, which may hold no long call).
    if !calls_cut {
        applied = TrimLevels(applied.0 & !TrimLevels::TOOL_CALLS.0);
    }

    let total = sections.iter().map(|s| u64::from(s.tokens)).sum::<u64>();
    let total = u32::try_from(total).unwrap_or(u32::MAX);
    if planned {
        if total > budget.tokens {
            // The skill said it fits; the host's own sum says otherwise.
            return Err(PromptError::OverBudget {
                total,
                budget: budget.tokens,
                from: budget.from.clone(),
                levels: applied,
            });
        }
        return Ok(Outcome {
            total,
            exact: counter.exact,
            applied,
            usage_percent,
            enforced: budget.clone(),
        });
    }

    // The fallback: no (further) trimming; the model's limit holds.
    let limit = Budget {
        tokens: context_limit,
        from: format!(
            "model.context_limit ({})",
            economics
                .fallback()
                .unwrap_or_else(|| "token economics unavailable".to_owned())
        ),
        change: change_for("model.context_limit"),
    };
    if !counter.exact && total > limit.tokens {
        counter.exact = true;
        counter.recount(sections);
    }
    let total = u32::try_from(sections.iter().map(|s| u64::from(s.tokens)).sum::<u64>())
        .unwrap_or(u32::MAX);
    if total > limit.tokens {
        return Err(PromptError::OverContextLimit {
            total,
            limit: limit.tokens,
            largest: largest(sections),
        });
    }
    if counter.exact && total > budget.tokens {
        tracing::warn!(
            target: "foveal::prompt",
            total,
            budget = budget.tokens,
            "the prompt is over its budget and nothing was trimmed: the {} skill is not available; it is within the model's context limit of {} tokens",
            super::economics::SKILL,
            limit.tokens
        );
    }
    Ok(Outcome {
        total,
        exact: counter.exact,
        applied,
        usage_percent: None,
        enforced: limit,
    })
}

/// Applies one plan; an error means the plan was unusable (nothing of it
/// is applied then). `cut_calls`: the plan newly asks for L1b, which the
/// caller does after this.
fn apply(
    sections: &mut Vec<PromptSection>,
    plan: &foveal_sdk::prompt::BudgetPlan,
    context_renderable: bool,
    cut_calls: bool,
    rerender: &mut Rerender<'_>,
) -> Result<(), String> {
    if plan.edits.is_empty() && plan.context_budget.is_none() && !cut_calls {
        return Err("the prompt does not fit and the plan changes nothing".to_owned());
    }
    // Check every edit first.
    for edit in &plan.edits {
        let Some(section) = sections.get(edit.index as usize) else {
            return Err(format!(
                "an edit names section {} of {}",
                edit.index,
                sections.len()
            ));
        };
        let drop = edit.text.is_none();
        let (level, allowed) = match section.kind {
            SectionKind::LOGS => (TrimLevels::LOGS, !drop),
            SectionKind::PREFIX => (TrimLevels::MANDATES, !drop),
            SectionKind::CONTEXT => (TrimLevels::CONTEXT, !drop),
            SectionKind::HISTORY => (TrimLevels::HISTORY, true),
            SectionKind::MESSAGE => (TrimLevels::MESSAGE, !drop),
            SectionKind::WINDOW => (TrimLevels::WINDOW, !drop),
            _ => (TrimLevels::NONE, false),
        };
        if !allowed || !plan.applied.contains(level) {
            return Err(format!(
                "an edit {} section {} ({}) outside the levels it applies",
                if drop { "drops" } else { "replaces" },
                edit.index,
                section.key
            ));
        }
    }
    let context_index = sections.iter().position(|s| s.kind == SectionKind::CONTEXT);
    if plan.context_budget.is_some()
        && (!context_renderable
            || context_index.is_none()
            || !plan.applied.contains(TrimLevels::CONTEXT))
    {
        return Err("it asks to re-render a context that cannot be re-rendered".to_owned());
    }
    // Render first: a failure leaves the sections as they were.
    let rerendered = match (plan.context_budget, context_index) {
        (ROption::RSome(tokens), Some(index)) => match rerender(tokens) {
            Some(text) => Some((index, text)),
            None => return Err("the context could not be re-rendered".to_owned()),
        },
        _ => None,
    };
    let mut dropped = Vec::new();
    for edit in &plan.edits {
        let section = &mut sections[edit.index as usize];
        match &edit.text {
            ROption::RSome(text) => {
                if section.kind == SectionKind::HISTORY {
                    // The marker of what L4 dropped: a system note, whose
                    // message's calls (or call id) go with it.
                    section.role = Role::SYSTEM;
                    section.call = None;
                }
                section.text = Text::Skill(text.clone());
            }
            ROption::RNone => dropped.push(edit.index as usize),
        }
    }
    if let Some((index, text)) = rerendered {
        sections[index].text = text;
    }
    dropped.sort_unstable();
    dropped.dedup();
    for index in dropped.into_iter().rev() {
        sections.remove(index);
    }
    Ok(())
}

/// The three largest sections, for error messages.
fn largest(sections: &[PromptSection]) -> Vec<(String, u32)> {
    let mut by_size: Vec<(String, u32)> = sections
        .iter()
        .map(|s| (s.key.to_string(), s.tokens))
        .collect();
    by_size.sort_by_key(|s| std::cmp::Reverse(s.1));
    by_size.truncate(3);
    by_size
}

fn does_not_fit(sections: &[PromptSection], budget: &Budget, why: String) -> PromptError {
    // The skill names sections by component id; say their keys too.
    let mut why = why;
    for section in sections {
        let id = format!("component {}:", section.id);
        if why.contains(&id) {
            why = why.replace(&id, &format!("{} ({}):", section.key, section.id));
        }
    }
    // And the largest part, as the user knows it.
    if let Some(largest) = sections.iter().max_by_key(|s| s.tokens) {
        why = format!(
            "{why}; the largest part is {} ({} tokens)",
            describe(largest),
            largest.tokens
        );
    }
    PromptError::DoesNotFit {
        budget: budget.tokens,
        from: budget.from.clone(),
        why,
        change: budget.change.clone(),
    }
}

/// A section as the user knows it, for error messages.
fn describe(section: &PromptSection) -> String {
    match (&section.call, section.id) {
        (Some(CallPart::Calls(calls)), _) => format!(
            "a message of the conversation history with its tool calls ({})",
            calls
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (Some(CallPart::Result(_)), ids::TOOL_RESULT) => {
            "the result of the tool this cycle called (tool_result, 7000)".to_owned()
        }
        (Some(CallPart::Result(_)), _) => "a tool result in the conversation history".to_owned(),
        (None, ids::CONVERSATION_HISTORY) => "a message of the conversation history".to_owned(),
        (None, ids::PENDING_EVENT) => "the message (pending_event, 6000)".to_owned(),
        _ => format!("{} ({})", section.key, section.id),
    }
}
