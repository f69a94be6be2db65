//! The `agenda` skill: what is due, by Org's rules, in the prompt and as a
//! tool.
//!
//! - Its component (id 4050, after the goals) lists the agenda of the next
//!   `days` days (default 7) from the call's local date
//!   ([`foveal_sdk::call::now`]), when anything is due; the host shows it
//!   when the context type enables the goals (`tick_event`,
//!   `tick_autonomous`, `goal_decompose`), and renders it again on a new
//!   day.
//! - Its tool `agenda {from, days}` gives the model the agenda of any span.
//!
//! Both compute it with [`foveal_sdk::dates`] from the memex view the host
//! lends — the rules `foveal agenda` runs over the host's memex, checked
//! against Org's own agenda. Private objects are not in the view. See
//! `README.md` beside this crate.

mod cache;

use foveal_sdk::dates::agenda::{self, Described, Entry, Options};
use foveal_sdk::dates::time::Date;
use foveal_sdk::memex::MemexView;
use foveal_sdk::{
    Component, ComponentsRequest, HostApiRef, Role, SkillError, ToolCallRequest, ToolDecl,
};

/// The component id: after the goals (4000).
const COMPONENT_ID: u32 = 4050;

/// Days the tool may ask for at most.
const MAX_DAYS: u32 = 366;

/// `[skills.agenda]`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Leave out done items (Org's `org-agenda-skip-*-if-done`).
    #[serde(default)]
    skip_done: bool,
    /// A deadline's warning period when it has none of its own.
    #[serde(default = "fourteen")]
    deadline_warning_days: u32,
    /// Days the prompt's section shows.
    #[serde(default = "seven")]
    days: u32,
}

fn fourteen() -> u32 {
    14
}

fn seven() -> u32 {
    7
}

fn config(json: &str) -> Result<Config, SkillError> {
    let json = if json.trim().is_empty() { "{}" } else { json };
    let config: Config = serde_json::from_str(json).map_err(|e| {
        SkillError::invalid_input(format!(
            "[skills.agenda]: {e} (the settings are skip_done, deadline_warning_days and days)"
        ))
    })?;
    if !(1..=MAX_DAYS).contains(&config.days) {
        return Err(SkillError::invalid_input(format!(
            "[skills.agenda]: days must be 1 to {MAX_DAYS}, not {}",
            config.days
        )));
    }
    Ok(config)
}

fn options(config: &Config) -> Options {
    Options {
        deadline_warning_days: i64::from(config.deadline_warning_days),
        skip_done: config.skip_done,
    }
}

fn init(_host: &HostApiRef) -> Result<(), SkillError> {
    foveal_sdk::skill_debug!("agenda ready");
    Ok(())
}

/// The local date of the call.
fn today() -> Date {
    Date::from_days(foveal_sdk::call::now().local_day())
}

/// The agenda of `days` days from `from` over `view`, seen on `today`, as
/// text; `None` when nothing is due in it.
fn render(
    view: &MemexView<'_>,
    today: Date,
    from: Date,
    days: u32,
    options: &Options,
) -> Option<String> {
    let (items, at) = cache::items(view);
    let entries: Vec<Entry> = agenda::span(&items, today, from, days, options);
    if entries.is_empty() {
        return None;
    }
    let files = view.files.as_slice();
    Some(agenda::text(&entries, from, days, |i| {
        let (f, index) = at[entries[i].item];
        let file = &files[f as usize];
        let path = file.path.as_str();
        let name = path.rsplit('/').next().unwrap_or(path);
        Described {
            category: name.strip_suffix(".org").unwrap_or(name),
            todo: file.todo(index),
            title: file.title(index),
            id: file.id(index),
        }
    }))
}

fn components(request: &ComponentsRequest<'_>) -> Result<Vec<Component>, SkillError> {
    let config = config(request.config_json.as_str())?;
    let today = today();
    let Some(text) = render(request.memex, today, today, config.days, &options(&config)) else {
        return Ok(Vec::new());
    };
    let heading = format!(
        "AGENDA ({} days from today, {} {}; Org's agenda: Sched. Nx = scheduled N days ago, N d. ago = overdue deadline):\n",
        config.days,
        today.weekday_name(),
        today
    );
    Ok(vec![Component::new(
        COMPONENT_ID,
        "agenda",
        "Agenda",
        Role::SYSTEM,
        heading + &text,
    )])
}

fn tools() -> Result<Vec<ToolDecl>, SkillError> {
    Ok(vec![ToolDecl::new(
        "agenda",
        "What is due, as Org's agenda lists it: scheduled items, deadlines (upcoming, due, overdue: on today only), timestamps and date ranges, one heading per day, each line with the object's id. `from` is the first day (YYYY-MM-DD, default today), `days` how many (default 7).",
        r#"{"type": "object", "properties": {
            "from": {"type": "string", "description": "YYYY-MM-DD; default today"},
            "days": {"type": "integer", "minimum": 1, "maximum": 366}
        }}"#,
        "read",
    )])
}

/// The tool's arguments.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    from: Option<String>,
    days: Option<u32>,
}

fn run_tool(request: &ToolCallRequest<'_>) -> Result<String, SkillError> {
    if request.name.as_str() != "agenda" {
        return Err(SkillError::invalid_input(format!(
            "no tool {}; the agenda skill offers `agenda`",
            request.name.as_str()
        )));
    }
    let args: Args = serde_json::from_str(request.args_json.as_str()).map_err(|e| {
        SkillError::invalid_input(format!(
            "agenda: {e}; the arguments are {{\"from\": \"YYYY-MM-DD\", \"days\": N}}"
        ))
    })?;
    let today = today();
    let from = match args.from.as_deref().map(str::trim) {
        None | Some("") | Some("today") => today,
        Some(text) => Date::parse(text).ok_or_else(|| {
            SkillError::invalid_input(format!("agenda: from {text:?} is not a date (YYYY-MM-DD)"))
        })?,
    };
    let config = config(request.config_json.as_str())?;
    let days = args.days.unwrap_or(config.days);
    if !(1..=MAX_DAYS).contains(&days) {
        return Err(SkillError::invalid_input(format!(
            "agenda: days must be 1 to {MAX_DAYS}, not {days}"
        )));
    }
    Ok(render(request.memex, today, from, days, &options(&config))
        .unwrap_or_else(|| format!("Nothing is due in the {days} days from {from}.")))
}

foveal_sdk::export_skill! {
    name: "agenda",
    priority: 50,
    dependencies: [],
    description: "What is due, by Org's agenda rules: a prompt section of the coming days and an `agenda` tool for any span.",
    component_ids: [4050],
    init: init,
    hooks: { components: components, tools: tools, run_tool: run_tool },
}

#[cfg(test)]
mod tests;
