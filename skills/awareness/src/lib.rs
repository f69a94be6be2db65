//! The `awareness` skill: the foveal–peripheral outline of the memex (seed 000).
//!
//! See `README.md` beside this crate for what it renders, how it differs
//! from the seed, and its fallback.

mod render;

use foveal_sdk::{Component, ComponentsRequest, HostApiRef, Role, SkillError};

pub use render::{Options, Reason, Rendered, render};

/// The prompt component the outline fills (seed 004: semantic memories).
pub const COMPONENT_ID: u32 = 2000;

fn init(_host: &HostApiRef) -> Result<(), SkillError> {
    foveal_sdk::skill_debug!("awareness ready");
    Ok(())
}

/// Reads `{"threshold": 0.75}` from the skill's configuration; anything
/// missing takes the default.
fn options(config_json: &str) -> Result<Options, SkillError> {
    let mut options = Options::default();
    let text = config_json.trim();
    if text.is_empty() || text == "{}" {
        return Ok(options);
    }
    // A tiny reader for one optional number: the SDK carries no JSON parser
    // and the skill needs no other key yet.
    if let Some(at) = text.find("\"threshold\"") {
        let rest = text[at + "\"threshold\"".len()..].trim_start();
        let rest = rest
            .strip_prefix(':')
            .ok_or_else(|| SkillError::invalid_input("threshold: expected a number"))?;
        let number: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'))
            .collect();
        options.threshold = number.parse().map_err(|_| {
            SkillError::invalid_input(format!("threshold: {number:?} is not a number"))
        })?;
    }
    Ok(options)
}

fn components(request: &ComponentsRequest<'_>) -> Result<Vec<Component>, SkillError> {
    let options = options(request.config_json.as_str())?;
    let focus = request.focus.as_ref().into_option().map(|f| f.as_str());
    let rendered = render(request.memex, focus, &options);
    Ok(vec![Component {
        id: COMPONENT_ID,
        key: "awareness".into(),
        name: "Global memex awareness".into(),
        role: Role::SYSTEM,
        content: rendered.text.into(),
    }])
}

foveal_sdk::export_skill! {
    name: "awareness",
    priority: 80,
    dependencies: [],
    description: "Foveal-peripheral outline of the memex: focus and similar objects in full, the rest as outline (seed 000).",
    init: init,
    hooks: { components: components },
}
