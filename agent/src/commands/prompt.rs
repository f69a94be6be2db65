//! `foveal prompt`: the exact prompt the think step would send, without
//! calling a model.
//!
//! The prompt is assembled as a cycle assembles it
//! ([`foveal_prompt::prompt`]) and passed through the privacy gate, as a
//! request body is before it leaves the process; what is printed is what
//! would be sent. The assembler is a fresh one, so `cache` says `miss` (or
//! `off` without the token-economics skill) — in a running host too, whose
//! own caches it leaves alone. The activity notes (`[logs]`) are those of
//! the process that answers: none in a fresh one, the host's own when a
//! host answers.
//!
//! It also shows the execution pattern the cycle would get
//! ([`foveal_prompt::execution`]): `[execution]`, the prompt's context
//! type, and the signals known without running a cycle — the token
//! pressure from the prompt's usage of its budget, no recent errors, and
//! the signal's event class (a user's message is `communication`; a
//! heartbeat or a delegation has none).
//!
//! With `--json`, `skill_errors` lists every hook that failed in the
//! process while prompts were made (`{skill, hook, error}`, once per
//! skill, hook and cause: [`foveal_registry::skill_errors`]); each is also
//! one line on stderr.

use std::sync::Arc;

use foveal_sdk::SignalKind;

use foveal_prompt::execution::{AssessmentSignals, EventClass, ExecutionPattern};
use foveal_prompt::prompt::{
    Assembler, CacheReport, EgressSummary, Prompt, PromptError, PromptInput, PromptSettings,
    role_name, signal_name,
};
use foveal_prompt::window::Window;

use super::{Exit, Parts, Printed};
use crate::config::Config;

/// The signals `foveal prompt` can simulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptSignal {
    /// A message from the user (`--message`).
    #[default]
    UserInput,
    /// The periodic heartbeat: no new input (the context is skipped).
    Heartbeat,
    /// A delegated sub-task's result (`--message`; the context is skipped).
    Delegation,
}

impl PromptSignal {
    fn kind(self) -> SignalKind {
        match self {
            Self::UserInput => SignalKind::USER,
            Self::Heartbeat => SignalKind::HEARTBEAT,
            Self::Delegation => SignalKind::DELEGATION,
        }
    }
}

/// What `foveal prompt` was asked.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct PromptOptions {
    /// The object in foveal focus.
    pub focus: Option<String>,
    /// The user's message (or the delegation's result).
    pub message: Option<String>,
    /// The signal.
    pub signal: PromptSignal,
    /// The context type (default: the signal's).
    pub context_type: Option<String>,
    /// Replaces `context.max_tokens`.
    pub budget: Option<u32>,
    /// Print JSON.
    pub json: bool,
    /// Count tokens exactly even when the bytes show the prompt fits.
    pub exact: bool,
    /// The session whose context window is shown (default: config
    /// `agent.session`).
    pub session: Option<String>,
}

/// The JSON `foveal prompt --json` prints.
#[derive(Debug, serde::Serialize)]
struct Report<'a> {
    context_type: &'a str,
    signal: &'static str,
    sections: Vec<SectionReport<'a>>,
    total_tokens: u32,
    tokens_exact: bool,
    budget: u32,
    budget_from: &'a str,
    usage_percent: Option<u8>,
    trim_levels: Vec<&'static str>,
    cache: CacheReport,
    economics: String,
    tools: &'a [String],
    egress: &'a EgressSummary,
    execution_pattern: &'a ExecutionPattern,
    execution_signals: &'a AssessmentSignals,
    /// Every hook that failed in this process, once per skill, hook and
    /// cause (each also said on stderr): a section that is missing
    /// because its skill failed is named here.
    skill_errors: Vec<foveal_registry::skill_errors::HookFailure>,
}

#[derive(Debug, serde::Serialize)]
struct SectionReport<'a> {
    id: u32,
    key: &'a str,
    /// The component's human-readable name, as its skill gave it.
    name: &'a str,
    role: &'static str,
    tokens: u32,
    text: &'a str,
}

/// Checks the command line's values before any loading.
pub fn check(config: &Config, options: &PromptOptions) -> Result<(), Printed> {
    if let Some(focus) = &options.focus
        && focus.trim().is_empty()
    {
        return Err(Printed::default().fail(
            Exit::Usage,
            "--focus needs an object id (see `foveal memex query`)",
        ));
    }
    if let Some(name) = &options.context_type
        && let Err(error) = config.prompt.context_types.get(name)
    {
        return Err(Printed::default().fail(Exit::Usage, error));
    }
    Ok(())
}

/// `foveal prompt` on `parts`, with the session's context `window`.
pub fn run(parts: Parts<'_>, window: &Window, options: &PromptOptions) -> Printed {
    let Parts {
        config,
        registry,
        memex: snapshot,
        gate,
        ..
    } = parts;
    if let Err(printed) = check(config, options) {
        return printed;
    }
    let mut printed = Printed::default();
    let settings = PromptSettings::from(config);
    let skills = registry.snapshot();
    // The session's context window (component 3000).
    let window_revision = window.for_prompt(&skills);
    let mut options = options.clone();
    if !parts.resolve_focus(&mut options.focus, &mut printed) {
        return printed;
    }
    let options = &options;
    // The activity this process noted so far (the agent's log: none
    // before a cycle), oldest first, as the ring gives them newest first.
    let mut logs = crate::activity::log().recent(config.context.log_limit);
    logs.reverse();
    // The tool belt a cycle would offer: the host's tools and those the
    // skills declare (the context type's filter applies in the assembler;
    // the execution pattern may still narrow the categories in a cycle).
    let mut tools = crate::tools::builtins();
    let skill_tools = crate::skill_tools(&skills, &tools);
    tools.extend(skill_tools);
    let tool_specs: Vec<_> = tools.iter().map(|t| t.spec()).collect();
    let input = PromptInput {
        tools: &tool_specs,
        signal: options.signal.kind(),
        context_type: options.context_type.as_deref(),
        focus: options.focus.as_deref(),
        message: options.message.as_deref().map(Arc::from),
        logs: &logs,
        budget: options.budget,
        exact_counts: options.exact,
        window: window_revision.map(|revision| foveal_prompt::prompt::SessionWindow {
            session: window.session(),
            revision,
        }),
        session: Some(window.session()),
        ..PromptInput::default()
    };
    let assembler = Assembler::with_gate(settings, Arc::clone(gate));
    let prompt = match assembler.assemble(&skills, snapshot, &input) {
        Ok(prompt) => prompt,
        Err(error @ PromptError::UnknownContextType(_)) => {
            return printed.fail(Exit::Usage, error);
        }
        Err(error) => return printed.fail(Exit::NotFound, error),
    };
    let context_type = match config.prompt.context_types.get(prompt.context_type) {
        Ok(context_type) => context_type,
        Err(error) => return printed.fail(Exit::Usage, error),
    };
    // A prompt made outside a turn follows no failed cycle.
    let signals = AssessmentSignals::new(
        prompt.usage_percent,
        0,
        EventClass::for_signal(prompt.signal),
    );
    let execution = Execution {
        pattern: foveal_prompt::execution::select(&config.execution, context_type, &signals),
        signals,
    };
    if options.json {
        let mut json = report(&prompt, &prompt.egress, &execution);
        // A skill's message passes the gate as the prompt did.
        json.skill_errors = foveal_registry::skill_errors::all()
            .into_iter()
            .map(|mut failure| {
                if let Some(clean) = gate.clean_quietly(&failure.error, snapshot) {
                    failure.error = clean;
                }
                failure
            })
            .collect();
        printed.stdout = serde_json::to_string_pretty(&json).unwrap_or_default();
        printed.stdout.push('\n');
    } else {
        printed.stdout = text(&prompt, &prompt.egress, &execution);
    }
    printed
}

/// The execution pattern the prompt's cycle would get, and the signals it
/// was selected with.
struct Execution {
    pattern: ExecutionPattern,
    signals: AssessmentSignals,
}

fn economics(prompt: &Prompt) -> String {
    match &prompt.economics_fallback {
        None => foveal_prompt::prompt::economics::SKILL.to_owned(),
        Some(why) => format!("fallback: {why}"),
    }
}

fn report<'a>(
    prompt: &'a Prompt,
    egress: &'a EgressSummary,
    execution: &'a Execution,
) -> Report<'a> {
    Report {
        context_type: prompt.context_type,
        signal: signal_name(prompt.signal),
        sections: prompt
            .sections
            .iter()
            .map(|s| SectionReport {
                id: s.id,
                key: &s.key,
                name: &s.name,
                role: role_name(s.role),
                tokens: s.tokens,
                text: s.text.as_str(),
            })
            .collect(),
        total_tokens: prompt.total_tokens,
        tokens_exact: prompt.tokens_exact,
        budget: prompt.budget,
        budget_from: &prompt.budget_from,
        usage_percent: prompt.usage_percent,
        trim_levels: prompt.trim_levels.names().collect(),
        cache: prompt.cache,
        economics: economics(prompt),
        tools: &prompt.tools,
        egress,
        execution_pattern: &execution.pattern,
        execution_signals: &execution.signals,
        skill_errors: Vec::new(),
    }
}

/// The human-readable form: each section under a header line, then a
/// summary.
fn text(prompt: &Prompt, egress: &EgressSummary, execution: &Execution) -> String {
    use std::fmt::Write as _;
    let approx = if prompt.tokens_exact { "" } else { "≤" };
    let mut s = String::new();
    for section in &prompt.sections {
        // The component's name after its key, unless it only repeats it.
        let name = section.name.trim();
        let named = if name.is_empty() || name.eq_ignore_ascii_case(&section.key) {
            String::new()
        } else {
            format!(" \u{2014} {name}")
        };
        let _ = writeln!(
            s,
            "=== {} {}{named} ({}, {approx}{} tokens) ===",
            section.id,
            section.key,
            role_name(section.role),
            section.tokens
        );
        s.push_str(section.text.as_str());
        if !s.ends_with('\n') {
            s.push('\n');
        }
    }
    let levels: Vec<&str> = prompt.trim_levels.names().collect();
    let _ = writeln!(
        s,
        "--- {approx}{} of {} tokens ({}), usage {}, trimmed: {}, cache: prefix {}, context {}, context type {}, token economics: {}",
        prompt.total_tokens,
        prompt.budget,
        prompt.budget_from,
        prompt
            .usage_percent
            .map_or_else(|| "n/a".to_owned(), |p| format!("{p}%")),
        if levels.is_empty() {
            "nothing".to_owned()
        } else {
            levels.join(", ")
        },
        prompt.cache.prefix.name(),
        prompt.cache.context.name(),
        prompt.context_type,
        economics(prompt),
    );
    let _ = writeln!(s, "--- {}", execution_line(execution));
    if !prompt.tokens_exact {
        let _ = writeln!(
            s,
            "--- counts are byte lengths (upper bounds): the prompt fits by its bytes, so it was not tokenized; --exact counts tokens"
        );
    }
    if egress.private > 0 || !egress.secrets.is_empty() {
        let secrets: Vec<String> = egress
            .secrets
            .iter()
            .map(|(name, n)| format!("{name}={n}"))
            .collect();
        let _ = writeln!(
            s,
            "--- privacy gate removed {} private passage(s) and secrets: {}",
            egress.private,
            if secrets.is_empty() {
                "none".to_owned()
            } else {
                secrets.join(", ")
            }
        );
    }
    s
}

/// `execution: mode=…, max_iterations=…, …`, each value with the layer
/// that set it.
fn execution_line(execution: &Execution) -> String {
    let p = &execution.pattern;
    let from = &p.source_layers;
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let categories = p.allowed_categories.as_ref().map_or_else(
        || "all".to_owned(),
        |list| {
            if list.is_empty() {
                "none".to_owned()
            } else {
                list.iter().map(|c| c.name()).collect::<Vec<_>>().join("+")
            }
        },
    );
    let signals = &execution.signals;
    format!(
        "execution: mode={} ({}), max_iterations={} ({}), categories={} ({}), confirm_dangerous={} ({}), sub_agents={} ({}); signals: token pressure {}, {} recent errors, event class {}",
        p.mode,
        from.mode.name(),
        p.max_iterations,
        from.max_iterations.name(),
        categories,
        from.allowed_categories.name(),
        yes_no(p.dangerous_requires_confirm),
        from.dangerous_requires_confirm.name(),
        yes_no(p.sub_agents_enabled),
        from.sub_agents_enabled.name(),
        signals.token_pressure.name(),
        signals.recent_errors,
        signals.event_class.map_or("none", EventClass::name),
    )
}
