//! Hook failures, said once: every hook call that failed in this process
//! is noted here by skill, hook and cause, and said on stderr at the
//! default log level (target `foveal::skill_errors`, which every command
//! but `tui` shows without `FOVEAL_LOG`) the first time only. So a skill
//! that fails every cycle of `foveal run` is one line, not one a cycle,
//! and a skill that fails is never silent. `foveal prompt --json` lists
//! what was noted as `skill_errors` (`{skill, hook, error}`).
//!
//! The cause is the error as the skill gave it, its code and its message
//! word for word (`invalid input (code 3): rogue: unknown act "x"`):
//! nothing is normalised, so a message that holds a number or an id that
//! changes from call to call is a new cause each time. At most
//! [`MAX_KEPT`] causes are kept; past them, a new cause is said no more
//! (one line says so).
//!
//! Who notes what:
//!
//! - the registry notes the failures it sees itself: a panic, a cell that
//!   died or hung (the cell says those), a call abandoned past its
//!   deadline, a memex that could not be lent to a cell;
//! - an error the skill returned is noted by the caller that takes the
//!   hook's fallback ([`crate::registry::Unavailable::say_failure`]),
//!   because only the caller knows whether it is a failure: the `budget`
//!   hook's `does not fit`, the context window's `not open` and invalid
//!   item, and a tool's refusal (which goes to the model) are answers.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use foveal_sdk::SkillError;

/// One hook failure: what `foveal prompt --json` lists.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HookFailure {
    /// The skill's name.
    pub skill: String,
    /// The hook's name (`components`, `redact`, …).
    pub hook: &'static str,
    /// The cause: the error's code and message
    /// (`invalid input (code 3): …`).
    pub error: String,
}

/// How many different failures a process keeps (and says).
pub const MAX_KEPT: usize = 1024;

static NOTED: Mutex<Vec<HookFailure>> = Mutex::new(Vec::new());
static FULL: AtomicBool = AtomicBool::new(false);

/// Notes that hook `hook` of skill `skill` failed with `error`, without a
/// word; true the first time this process sees this skill, hook and
/// cause (then the caller says it, or it was said already).
pub fn note(skill: &str, hook: &'static str, error: &SkillError) -> bool {
    let cause = error.to_string();
    let mut noted = NOTED.lock().unwrap_or_else(|e| e.into_inner());
    if noted
        .iter()
        .any(|f| f.hook == hook && f.skill == skill && f.error == cause)
    {
        return false;
    }
    if noted.len() >= MAX_KEPT {
        if !FULL.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                target: "foveal::skill_errors",
                "{MAX_KEPT} different skill hook failures were said; further ones are not"
            );
        }
        return false;
    }
    noted.push(HookFailure {
        skill: skill.to_owned(),
        hook,
        error: cause,
    });
    true
}

/// [`note`], and one line on stderr the first time.
pub fn say(skill: &str, hook: &'static str, error: &SkillError) {
    if note(skill, hook, error) {
        tracing::warn!(
            target: "foveal::skill_errors",
            "skill `{skill}` hook `{hook}` failed: {error} (the host goes on without its answer; said once per process)"
        );
    }
}

/// Every failure noted in this process, oldest first.
pub fn all() -> Vec<HookFailure> {
    NOTED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_noted_once_per_skill_hook_and_cause() {
        let error = SkillError::invalid_input("unknown act \"x\"");
        assert!(note("unit-once", "components", &error));
        assert!(!note("unit-once", "components", &error));
        // Another hook, another skill, another message: new causes.
        assert!(note("unit-once", "tools", &error));
        assert!(note("unit-once-2", "components", &error));
        assert!(note(
            "unit-once",
            "components",
            &SkillError::invalid_input("unknown act \"y\"")
        ));
        // Another code with the same message is another cause too.
        assert!(note(
            "unit-once",
            "components",
            &SkillError::new(SkillError::UNAVAILABLE, "unknown act \"x\"")
        ));
        let listed: Vec<HookFailure> = all()
            .into_iter()
            .filter(|f| f.skill.starts_with("unit-once"))
            .collect();
        assert_eq!(listed.len(), 5, "{listed:?}");
        assert_eq!(
            listed[0],
            HookFailure {
                skill: "unit-once".to_owned(),
                hook: "components",
                error: "invalid input (code 3): unknown act \"x\"".to_owned(),
            }
        );
    }
}
