//! The `privacy` skill: the secret filter at the last door.
//!
//! `redact` replaces every secret-looking string in a request body with
//! `[REDACTED <pattern>]`; `invoke("configure", …)` sets the patterns. The
//! patterns and the matcher are `foveal-redact`, the same code the host runs
//! itself when this skill is missing. See `README.md` beside this crate for
//! the contract and the host's fallback.

use std::sync::{Arc, RwLock};

use foveal_redact::{Pattern, Redactor};
use foveal_sdk::{HostApiRef, SkillError};

/// The patterns in force: the defaults until the host configures others.
static REDACTOR: RwLock<Option<Arc<Redactor>>> = RwLock::new(None);

fn current() -> Arc<Redactor> {
    if let Some(redactor) = REDACTOR.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return Arc::clone(redactor);
    }
    let mut slot = REDACTOR.write().unwrap_or_else(|e| e.into_inner());
    Arc::clone(slot.get_or_insert_with(|| Arc::new(Redactor::defaults())))
}

fn init(_host: &HostApiRef) -> Result<(), SkillError> {
    // The patterns are compiled when first needed: the host configures the
    // skill before its first request, and compiling the defaults here only
    // to replace them would cost every start a few milliseconds.
    let patterns = foveal_redact::DEFAULT_PATTERNS.len();
    foveal_sdk::skill_debug!("privacy ready with the {patterns} default secret patterns");
    Ok(())
}

/// The `redact` hook. Never logs and never fails on any text: what it saw
/// must not travel anywhere but back to the host.
fn redact(text: &str) -> Result<String, SkillError> {
    Ok(current().redact(text).text.into_owned())
}

/// `configure`'s arguments: `{"patterns": [{"name": …, "regex": …}], "defaults": true}`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Configure {
    #[serde(default)]
    patterns: Vec<PatternArg>,
    #[serde(default = "yes")]
    defaults: bool,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PatternArg {
    name: String,
    regex: String,
}

fn yes() -> bool {
    true
}

/// The answer of `configure` and `patterns`: the names in force.
fn names_json(redactor: &Redactor) -> String {
    serde_json::json!({ "patterns": redactor.names().collect::<Vec<_>>() }).to_string()
}

/// The `invoke` hook: `configure` and `patterns`.
fn invoke(method: &str, args_json: &str) -> Result<String, SkillError> {
    match method {
        "configure" => {
            let args: Configure = serde_json::from_str(args_json).map_err(|e| {
                SkillError::invalid_input(format!(
                    "configure: expected {{\"patterns\": [{{\"name\": …, \"regex\": …}}], \"defaults\": true|false}}: {e}"
                ))
            })?;
            let extra: Vec<Pattern> = args
                .patterns
                .into_iter()
                .map(|p| Pattern::new(p.name, p.regex))
                .collect();
            let redactor = Redactor::configured(&extra, args.defaults)
                .map_err(|e| SkillError::invalid_input(format!("configure: {e}")))?;
            let answer = names_json(&redactor);
            let count = redactor.names().count();
            *REDACTOR.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(redactor));
            foveal_sdk::skill_info!(
                "configured with {count} secret patterns ({} of them defaults)",
                if args.defaults {
                    foveal_redact::DEFAULT_PATTERNS.len()
                } else {
                    0
                }
            );
            Ok(answer)
        }
        "patterns" => Ok(names_json(&current())),
        other => Err(SkillError::invalid_input(format!(
            "unknown method `{other}`; the privacy skill answers `configure` and `patterns`"
        ))),
    }
}

foveal_sdk::export_skill! {
    name: "privacy",
    priority: 100,
    dependencies: [],
    description: "Redacts secrets (API keys, tokens, private keys, passwords) from every request body at the last door.",
    init: init,
    hooks: { redact: redact, invoke: invoke },
}
