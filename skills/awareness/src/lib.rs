//! The `awareness` skill: the foveal–peripheral outline of the memex (seed 000).
//!
//! See `README.md` beside this crate for what it renders and its fallback.

use foveal_sdk::{HostApiRef, SkillError};

fn init(_host: &HostApiRef) -> Result<(), SkillError> {
    foveal_sdk::skill_debug!("awareness ready");
    Ok(())
}

foveal_sdk::export_skill! {
    name: "awareness",
    priority: 80,
    dependencies: [],
    description: "Foveal-peripheral outline of the memex: focus and similar objects in full, the rest as outline (seed 000).",
    init: init,
    hooks: {},
}
