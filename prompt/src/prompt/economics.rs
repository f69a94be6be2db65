//! The token-economics skill as the host calls it, with the fallback of
//! each call (DESIGN.md: every optional call names its fallback).
//!
//! | call | hook | without the skill |
//! |---|---|---|
//! | contract 1, prefix | `prefix` | the host builds the same text, uncached |
//! | contract 2, context policy | `invoke("context_policy")` | always assemble, never reuse |
//! | contract 3, budget | `budget` | nothing is trimmed; over the model's context limit is an error |
//! | contract 5, usage | in the `budget` answer | none |
//!
//! The first call of a cycle that falls back records why; the prompt
//! reports it.

use std::cell::RefCell;

use abi_stable::std_types::{RArc, RString};
use foveal_sdk::prompt::{
    BudgetPlan, BudgetRequest, BudgetSection, PrefixRequest, SectionKind, TrimLevels,
};
use foveal_sdk::{SignalKind, SkillError};

use super::{CacheState, Text, signal_name};
use crate::registry::{Reason, Slot, Snapshot, hooks};

/// The skill's name.
pub const SKILL: &str = "token-economics";

/// What contract 2 says about the context section of a cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextPolicy {
    /// Render (or reuse) the context; when false the section is skipped.
    pub assemble: bool,
    /// Reuse the last rendering while its inputs are unchanged.
    pub reuse: bool,
}

/// Why a budget round did not produce a plan.
#[derive(Debug)]
pub(crate) enum BudgetFailure {
    /// The skill found no trim that fits; its explanation.
    DoesNotFit(String),
    /// The skill is absent or failed: the fallback applies.
    Unavailable,
}

/// The skill in one cycle's registry snapshot.
#[derive(Debug)]
pub(crate) struct Economics<'s> {
    slot: Option<&'s Slot>,
    fallback: RefCell<Option<String>>,
}

impl<'s> Economics<'s> {
    pub(crate) fn new(skills: &'s Snapshot) -> Self {
        let slot = skills.get(SKILL);
        let fallback = match slot {
            None => Some(format!("skill `{SKILL}` is not loaded")),
            Some(_) => None,
        };
        Self {
            slot,
            fallback: RefCell::new(fallback),
        }
    }

    /// Why a call fell back, if one did.
    pub(crate) fn fallback(&self) -> Option<String> {
        self.fallback.borrow().clone()
    }

    /// Whether the skill is serving (it may still fail a call).
    pub(crate) fn loaded(&self) -> bool {
        self.slot.is_some() && self.fallback.borrow().is_none()
    }

    /// [`fell_back`](Self::fell_back) for a hook call that did not
    /// answer. A failure of the hook is said on stderr once per cause in
    /// this process (`crate::skill_errors`), not once a cycle here.
    fn fell_back_from(&self, unavailable: &crate::registry::Unavailable) {
        if unavailable.say_failure() {
            let mut fallback = self.fallback.borrow_mut();
            if fallback.is_none() {
                tracing::debug!(target: "foveal::prompt", "token economics fallback: {unavailable}");
                *fallback = Some(unavailable.to_string());
            }
        } else {
            self.fell_back(unavailable.to_string());
        }
    }

    fn fell_back(&self, why: String) {
        let mut fallback = self.fallback.borrow_mut();
        if fallback.is_none() {
            tracing::warn!(target: "foveal::prompt", "token economics fallback: {why}");
            *fallback = Some(why);
        }
    }

    fn call<F: Copy + Send + 'static, T: Send + 'static>(
        &self,
        hook: crate::registry::Hook<F>,
        invoke: impl FnOnce(F) -> abi_stable::std_types::RResult<T, SkillError> + Send + 'static,
    ) -> Result<T, crate::registry::Unavailable> {
        match self.slot {
            Some(slot) => slot.call(hook, invoke),
            None => Err(Reason::NotLoaded {
                skill: SKILL.to_owned(),
            }
            .into()),
        }
    }

    /// Contract 1: the prefix from the skill's cache, or built by the host.
    pub(crate) fn prefix(&self, request: &PrefixRequest<'_>) -> (Text, CacheState) {
        if self.slot.is_some() {
            let owned = OwnedPrefix::of(request);
            match self.call(hooks::PREFIX, move |f| f(&owned.request())) {
                Ok(prefix) => {
                    let state = if prefix.hit {
                        CacheState::Hit
                    } else {
                        CacheState::Miss
                    };
                    return (Text::Skill(prefix.text), state);
                }
                Err(unavailable) => self.fell_back_from(&unavailable),
            }
        }
        (
            Text::Skill(RArc::new(RString::from(super::components::prefix_text(
                request,
            )))),
            CacheState::Off,
        )
    }

    /// Contract 2: whether to assemble the context this cycle, and whether
    /// a cached rendering may serve.
    pub(crate) fn context_policy(&self, signal: SignalKind) -> ContextPolicy {
        const FALLBACK: ContextPolicy = ContextPolicy {
            assemble: true,
            reuse: false,
        };
        if self.slot.is_none() {
            return FALLBACK;
        }
        let args = format!("{{\"signal\":\"{}\"}}", signal_name(signal));
        let answer = match self.call(hooks::INVOKE, move |f| {
            f("context_policy".into(), args.as_str().into())
        }) {
            Ok(answer) => answer,
            Err(unavailable) => {
                self.fell_back_from(&unavailable);
                return FALLBACK;
            }
        };
        #[derive(serde::Deserialize)]
        struct Answer {
            assemble: bool,
            reuse: bool,
        }
        match serde_json::from_str::<Answer>(answer.as_str()) {
            Ok(a) => ContextPolicy {
                assemble: a.assemble,
                reuse: a.reuse,
            },
            Err(e) => {
                self.fell_back(format!(
                    "skill `{SKILL}` answered context_policy with invalid JSON: {e}"
                ));
                FALLBACK
            }
        }
    }

    /// Contract 3: one round of the budget plan.
    pub(crate) fn budget(&self, request: OwnedBudget) -> Result<BudgetPlan, BudgetFailure> {
        if self.slot.is_none() || self.fallback.borrow().is_some() {
            return Err(BudgetFailure::Unavailable);
        }
        match self.call(hooks::BUDGET, move |f| {
            let sections: Vec<BudgetSection<'_>> = request
                .sections
                .iter()
                .map(|(id, kind, text, tokens)| BudgetSection {
                    id: *id,
                    kind: *kind,
                    text: text.as_str().into(),
                    tokens: *tokens,
                })
                .collect();
            f(&BudgetRequest {
                budget: request.budget,
                prefix: request.prefix.request(),
                sections: sections.as_slice().into(),
                applied: request.applied,
                context_renderable: request.context_renderable,
                exact: request.exact,
            })
        }) {
            Ok(plan) => Ok(plan),
            Err(unavailable) => match unavailable.reason() {
                Reason::Failed { error, .. } if error.code == SkillError::DOES_NOT_FIT => {
                    Err(BudgetFailure::DoesNotFit(error.message.to_string()))
                }
                _ => {
                    self.fell_back_from(&unavailable);
                    Err(BudgetFailure::Unavailable)
                }
            },
        }
    }

    /// Marks the skill's plan as unusable for the rest of the cycle.
    pub(crate) fn reject_plan(&self, why: String) {
        self.fell_back(format!(
            "skill `{SKILL}` returned an unusable budget plan: {why}"
        ));
    }
}

/// What a [`PrefixRequest`] borrows, owned: it goes with the hook call to
/// a thread of its own.
#[derive(Debug, Clone)]
pub(crate) struct OwnedPrefix {
    assistant_name: String,
    identity: String,
    feedback: String,
    mandates: String,
    tools: String,
}

impl OwnedPrefix {
    pub(crate) fn of(request: &PrefixRequest<'_>) -> Self {
        Self {
            assistant_name: request.assistant_name.to_string(),
            identity: request.identity.to_string(),
            feedback: request.feedback.to_string(),
            mandates: request.mandates.to_string(),
            tools: request.tools.to_string(),
        }
    }

    pub(crate) fn request(&self) -> PrefixRequest<'_> {
        PrefixRequest {
            assistant_name: self.assistant_name.as_str().into(),
            identity: self.identity.as_str().into(),
            feedback: self.feedback.as_str().into(),
            mandates: self.mandates.as_str().into(),
            tools: self.tools.as_str().into(),
        }
    }
}

/// A [`BudgetRequest`], owned (the sections' texts shared, not copied).
#[derive(Debug)]
pub(crate) struct OwnedBudget {
    pub(crate) budget: u32,
    pub(crate) prefix: OwnedPrefix,
    pub(crate) sections: Vec<(u32, SectionKind, Text, u32)>,
    pub(crate) applied: TrimLevels,
    pub(crate) context_renderable: bool,
    pub(crate) exact: bool,
}
