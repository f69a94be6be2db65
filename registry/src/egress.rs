//! The last door, from the host's side. The gate itself — the private-text
//! matcher, the secret filter, the whole-request check, the log redactor —
//! is its own crate, [`foveal_gate`], named here as before. What the host
//! adds is how the gate reaches the privacy skill: through the registry
//! snapshot of the cycle ([`Skills`] for [`Snapshot`], [`PrivacySkill`]
//! for its [`Slot`]). How it reads its settings ([`PrivacyConfig`]) is
//! implemented for the configuration where it is assembled, in
//! `config.rs`.

use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;

pub use foveal_gate::*;

use crate::registry::{Reason, Slot, Snapshot, Unavailable, hooks};

impl Skills for Snapshot {
    fn privacy_skill(&self) -> Result<&dyn PrivacySkill, Fallback> {
        let slot = self.get(SKILL).ok_or(Fallback::NotLoaded)?;
        match static_fallback(slot) {
            Some(fallback) => Err(fallback),
            None => Ok(slot),
        }
    }

    fn generation(&self) -> u64 {
        Snapshot::generation(self)
    }
}

impl PrivacySkill for Slot {
    fn load(&self) -> Arc<dyn Any + Send + Sync> {
        Arc::clone(self.skill()) as Arc<dyn Any + Send + Sync>
    }

    fn path(&self) -> PathBuf {
        self.skill().path().to_owned()
    }

    fn configure(&self, args: String) -> Result<(), Fallback> {
        self.call(hooks::INVOKE, move |invoke| {
            invoke("configure".into(), args.as_str().into())
        })
        .map(drop)
        .map_err(|error| fallback(&error, true))
    }

    fn redact(&self, input: String) -> Result<String, Fallback> {
        self.call(hooks::REDACT, move |redact| redact(input.as_str().into()))
            .map(|text| text.into_string())
            .map_err(|error| fallback(&error, false))
    }
}

/// Why a hook call on the privacy skill could not be used. Only the kind
/// of failure is kept: a skill's error message could quote the text it
/// was given.
fn fallback(error: &Unavailable, configuring: bool) -> Fallback {
    say_withheld(error);
    match error.reason() {
        Reason::NotLoaded { .. } => Fallback::NotLoaded,
        Reason::NoHook { hook, .. } if *hook == hooks::INVOKE.name => Fallback::NotConfigurable,
        Reason::NoHook { .. } => Fallback::NoRedactHook,
        Reason::MissingDependency { .. } => Fallback::WaitingForDependencies,
        Reason::Quarantined { .. } => Fallback::Quarantined,
        Reason::Failed { error, .. } if configuring => Fallback::ConfigureFailed(error.code_name()),
        Reason::Failed { error, .. } => Fallback::HookFailed(error.code_name()),
    }
}

/// Says a failure of a privacy skill's hook on stderr once per code in
/// this process ([`crate::skill_errors`]), its message withheld: it could
/// quote the text the hook was given. A panic, or a cell that died, was
/// said by the registry.
fn say_withheld(unavailable: &Unavailable) {
    if let Reason::Failed { skill, hook, error } = unavailable.reason()
        && error.code != foveal_sdk::SkillError::PANIC
    {
        let withheld = foveal_sdk::SkillError::new(
            error.code,
            "(its message is not shown: a privacy skill's error may quote the text it was given)",
        );
        crate::skill_errors::say(skill, hook, &withheld);
    }
}

/// Whether the built-in secret filter stands in for the privacy skill in
/// `skills`, judged from the registry alone (a hook that fails at call time
/// is reported by the gate when it happens).
pub fn skill_fallback(skills: &Snapshot) -> Option<Fallback> {
    match skills.get(SKILL) {
        None => Some(Fallback::NotLoaded),
        Some(slot) => static_fallback(slot),
    }
}

fn static_fallback(slot: &Slot) -> Option<Fallback> {
    let skill = slot.skill();
    let has = |hook: &str| skill.info().hooks.contains(&hook);
    if skill.is_quarantined() {
        Some(Fallback::Quarantined)
    } else if !slot.missing_dependencies().is_empty() {
        Some(Fallback::WaitingForDependencies)
    } else if !has(hooks::REDACT.name) {
        Some(Fallback::NoRedactHook)
    } else if !has(hooks::INVOKE.name) {
        Some(Fallback::NotConfigurable)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_fallback_says_not_loaded_on_an_empty_registry() {
        assert_eq!(
            skill_fallback(&Snapshot::default()),
            Some(Fallback::NotLoaded)
        );
        assert_eq!(
            fallback_notice(&Fallback::NotLoaded),
            "privacy: skill not loaded — the host applies its built-in filter (privacy tags + secret patterns)"
        );
    }
}
