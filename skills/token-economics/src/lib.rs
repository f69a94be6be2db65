//! The `token-economics` skill: the cached prompt prefix, the context
//! policy, the budget plan and the usage gauge (seed 003, contracts 1–5).
//!
//! See `README.md` beside this crate for the contracts, what the host does
//! and what it does without this skill.

mod budget;
mod prefix;

use std::sync::{Mutex, MutexGuard};

use foveal_sdk::prompt::{BudgetPlan, BudgetRequest, Prefix, PrefixRequest};
use foveal_sdk::{HostApiRef, SkillError};

/// Everything the skill keeps between calls. Zeroed by `init` on every
/// load and reload (contract 4) and by `invoke("initialize")`.
#[derive(Debug, Default)]
struct State {
    prefixes: prefix::PrefixCache,
    trims: budget::Trims,
    usage: Option<Usage>,
}

/// The last assembly that fit (contract 5).
#[derive(Debug, Clone, serde::Serialize)]
struct Usage {
    percent: u8,
    tokens: u64,
    budget: u32,
    exact: bool,
    sections: Vec<SectionTokens>,
}

#[derive(Debug, Clone, serde::Serialize)]
struct SectionTokens {
    id: u32,
    tokens: u32,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn state() -> MutexGuard<'static, Option<State>> {
    // A panic while the lock was held leaves caches that are at worst
    // stale; the host counts the panic and quarantines a skill that keeps
    // panicking.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Contract 4: zero the state at load (the host runs `init` on every load
/// and reload).
fn init(_host: &HostApiRef) -> Result<(), SkillError> {
    *state() = Some(State::default());
    foveal_sdk::skill_debug!("token-economics ready");
    Ok(())
}

/// Tokens through the host (its encoding, its cache); the byte length (an
/// upper bound) when the host offers no counter.
fn count(text: &str) -> u32 {
    let n = foveal_sdk::host::count_tokens(text)
        .unwrap_or_else(|| foveal_sdk::host::estimate_tokens(text));
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Contract 1.
fn prefix(request: &PrefixRequest<'_>) -> Result<Prefix, SkillError> {
    let mut guard = state();
    let state = guard.get_or_insert_with(State::default);
    let (text, hit) = state.prefixes.get(request);
    Ok(Prefix { text, hit })
}

/// Contract 3 (and 5: a plan that fits records the counts).
fn budget(request: &BudgetRequest<'_>) -> Result<BudgetPlan, SkillError> {
    let mut guard = state();
    let state = guard.get_or_insert_with(State::default);
    let plan = budget::plan(request, &mut state.prefixes, &mut state.trims, &count)?;
    if plan.fits {
        let sections = request.sections.as_slice();
        state.usage = Some(Usage {
            percent: plan.usage_percent.into_option().unwrap_or(0),
            tokens: sections.iter().map(|s| u64::from(s.tokens)).sum(),
            budget: request.budget,
            exact: request.exact,
            sections: sections
                .iter()
                .map(|s| SectionTokens {
                    id: s.id,
                    tokens: s.tokens,
                })
                .collect(),
        });
    }
    Ok(plan)
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyArgs {
    signal: String,
}

/// The methods:
///
/// - `context_policy {"signal": …}` → `{"assemble", "reuse"}` (contract 2);
/// - `usage` → `{"percent", "tokens", "budget", "exact", "sections"}`, or
///   `{"percent": null}` before any assembly (contract 5);
/// - `initialize` → zeroes the state (contract 4);
/// - `state` → `{"prefixes", "usage"}`: what is cached.
fn invoke(method: &str, args_json: &str) -> Result<String, SkillError> {
    match method {
        "context_policy" => {
            let args: PolicyArgs = serde_json::from_str(args_json)
                .map_err(|e| SkillError::invalid_input(format!("context_policy arguments: {e}")))?;
            // Contract 2: a heartbeat or a delegation's result brings no
            // change of focus or scope, so the context is not assembled;
            // otherwise a rendering serves while its inputs (focus, memex
            // generation, registry generation, privacy) are unchanged.
            let assemble = !matches!(args.signal.as_str(), "heartbeat" | "delegation");
            Ok(serde_json::json!({ "assemble": assemble, "reuse": true }).to_string())
        }
        "usage" => {
            let guard = state();
            Ok(match guard.as_ref().and_then(|s| s.usage.as_ref()) {
                Some(usage) => serde_json::to_string(usage).expect("usage serializes"),
                None => serde_json::json!({ "percent": null }).to_string(),
            })
        }
        "initialize" => {
            *state() = Some(State::default());
            Ok(serde_json::json!({ "initialized": true }).to_string())
        }
        "state" => {
            let guard = state();
            let (prefixes, usage) = guard
                .as_ref()
                .map_or((0, false), |s| (s.prefixes.len(), s.usage.is_some()));
            Ok(serde_json::json!({ "prefixes": prefixes, "usage": usage }).to_string())
        }
        other => Err(SkillError::invalid_input(format!(
            "unknown method {other:?}; the methods are context_policy, usage, initialize and state"
        ))),
    }
}

foveal_sdk::export_skill! {
    name: "token-economics",
    priority: 90,
    dependencies: [],
    description: "Cached prompt prefix, incremental context and a token budget that always holds (seed 003).",
    init: init,
    hooks: { prefix: prefix, budget: budget, invoke: invoke },
}
