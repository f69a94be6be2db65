//! The `{{name}}` skill for foveal.
//!
//! `README.md` beside `src/` is its literate source: the build script
//! embeds it, with this file, in the library, and
//! `foveal skill-source {{name}}` prints it from the installed build.
//!
//! Every hook below is a plain Rust function; `export_skill!` at the end
//! writes the `extern "C"` wrappers, each inside the SDK's panic guard (a
//! panic comes back to the host as an error, never a crash).
//! docs/writing-a-skill.md in the foveal repository says when the host
//! calls each hook and what a skill may and may not do.

// @if components
use foveal_sdk::{Component, ComponentsRequest, Role};
// @end
// @if tools
use foveal_sdk::{ToolCallRequest, ToolDecl};
// @end
use foveal_sdk::SkillError;

// @if components
/// The prompt component this skill fills. Skills take free ids between
/// the host's 1000-point slots (the table is in docs/skill-abi.md); the
/// manifest below declares it, and the host drops a component returned at
/// an id the manifest does not declare.
pub const COMPONENT_ID: u32 = {{component_id}};

/// `components`: a section of the prompt. The host calls it when it
/// assembles a prompt, and reuses the answer while the memex, the focus,
/// the signal, the loaded skills and the local date stay the same — so
/// compute from the request only, never from a clock or a counter (the
/// time of the call, when a section needs it, is
/// `foveal_sdk::call::now()`; the session, `foveal_sdk::call::session()`).
///
/// This one counts the open tasks (a TODO state that is not done) among
/// the objects the host lends: private objects are not in the view.
pub fn components(request: &ComponentsRequest<'_>) -> Result<Vec<Component>, SkillError> {
    let mut open = 0;
    let mut files = 0;
    for file in request.memex.files() {
        files += 1;
        for object in 0..file.len() as u32 {
            if file.todo(object).is_some() && !file.object(object).done {
                open += 1;
            }
        }
    }
    let text = format!("The memex has {open} open tasks in {files} files.");
    Ok(vec![Component::new(
        COMPONENT_ID,
        "{{ident}}",
        "{{title}}",
        Role::SYSTEM,
        text,
    )])
}
// @end
// @if tools

/// `tools`: the tools this skill offers the model. Asked once per set of
/// loaded skills, not every cycle.
pub fn tools() -> Result<Vec<ToolDecl>, SkillError> {
    Ok(vec![ToolDecl::new(
        "{{ident}}_find",
        "List the memex objects with a tag (id and title).",
        r#"{"type": "object",
            "properties": {"tag": {"type": "string", "description": "a tag, without colons"}},
            "required": ["tag"]}"#,
        // read | write | terminal | dangerous (a dangerous tool waits for
        // the user's confirmation).
        "read",
    )])
}

/// `run_tool`: runs one of the tools above. The request lends the memex
/// view and the focus of the cycle that called it; the text returned is
/// the tool's result, which the model reads as data.
pub fn run_tool(request: &ToolCallRequest<'_>) -> Result<String, SkillError> {
    match request.name.as_str() {
        "{{ident}}_find" => {
            let args: serde_json::Value = serde_json::from_str(request.args_json.as_str())
                .map_err(|e| SkillError::invalid_input(format!("arguments are not JSON: {e}")))?;
            let tag = args["tag"]
                .as_str()
                .ok_or_else(|| SkillError::invalid_input("`tag` (a string) is required"))?;
            let mut lines = Vec::new();
            for file in request.memex.files() {
                for &object in file.with_tag(tag) {
                    lines.push(format!("{} | {}", file.id(object), file.title(object)));
                }
            }
            if lines.is_empty() {
                Ok(format!("no object is tagged {tag}"))
            } else {
                Ok(lines.join("\n"))
            }
        }
        other => Err(SkillError::invalid_input(format!("no tool named {other}"))),
    }
}
// @end
// @if redact

/// `redact`: the last door. The host passes every text it is about to
/// send through it (after its own privacy gate); return the text with
/// what must not leave the machine replaced.
pub fn redact(text: &str) -> Result<String, SkillError> {
    // An example rule: internal ticket references like `INT-1234`.
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("INT-") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 4..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            out.push_str("[ticket]");
        } else {
            out.push_str("INT-");
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    Ok(out)
}
// @end

foveal_sdk::export_skill! {
    name: "{{name}}",
    // Higher runs first and is listed first.
    priority: 10,
    // Skills that must be loaded for this one to be called.
    dependencies: [],
    description: "{{title}}: a skill made with `foveal skill new`.",
// @if components
    // The prompt component ids `components` fills: checked when this
    // builds (reserved or out-of-range ids do not compile) and again when
    // the host loads it (an id another skill declares is refused).
    component_ids: [COMPONENT_ID],
// @end
    hooks: {
// @if components
        components: components,
// @end
// @if tools
        tools: tools,
        run_tool: run_tool,
// @end
// @if redact
        redact: redact,
// @end
    },
}

#[cfg(test)]
mod tests;
