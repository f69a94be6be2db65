//! The agenda as the agent and the command line give it: settings from
//! `[skills.agenda]`, the day taken as today, and the agenda written out
//! (text as Org's agenda groups it, or rows for JSON).
//!
//! The rules are Org's ([`foveal_memex::parse::agenda`]); the memex decides
//! which objects it lists ([`foveal_memex::agenda`]): never a private one.

use foveal_memex::ObjectRef;
use foveal_memex::parse::agenda::{Described, Entry, Kind, Options};
use foveal_memex::parse::time::Date;

/// Days an agenda may span at most (a year and a day: a yearly repeater
/// shows once).
pub const MAX_DAYS: u32 = 366;

/// The agenda's settings from the `agenda` skill's table
/// (`[skills.agenda]` in `foveal.toml`, as JSON): `skip_done` (Org's
/// `org-agenda-skip-*-if-done`, default false) and
/// `deadline_warning_days` (Org's `org-deadline-warning-days`, default 14).
pub fn options(config_json: &str) -> Result<Options, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Table {
        #[serde(default)]
        skip_done: bool,
        #[serde(default = "fourteen")]
        deadline_warning_days: u32,
        // The skill's own settings, read by the skill.
        #[serde(default)]
        #[allow(dead_code)]
        days: Option<u32>,
    }
    fn fourteen() -> u32 {
        14
    }
    let table: Table = serde_json::from_str(if config_json.trim().is_empty() {
        "{}"
    } else {
        config_json
    })
    .map_err(|e| format!("[skills.agenda]: {e}"))?;
    Ok(Options {
        deadline_warning_days: i64::from(table.deadline_warning_days),
        skip_done: table.skip_done,
    })
}

/// The local date of the clock.
pub fn today() -> Date {
    Date::from_days(foveal_registry::host_api::local_now().local_day())
}

/// Reads a `YYYY-MM-DD` argument.
pub fn parse_date(text: &str) -> Result<Date, String> {
    Date::parse(text.trim()).ok_or_else(|| format!("{text:?} is not a date (YYYY-MM-DD)"))
}

/// One entry for JSON.
#[derive(Debug, serde::Serialize)]
pub struct Row {
    /// The day it is listed under (`YYYY-MM-DD`).
    pub date: String,
    /// `scheduled`, `past-scheduled`, `deadline`, `upcoming-deadline`,
    /// `overdue-deadline`, `timestamp` or `range`.
    pub kind: &'static str,
    /// Days before (an upcoming deadline) or after (an overdue deadline,
    /// a past scheduled date) today; the day of a range.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub days: Option<i64>,
    /// As Org's agenda writes the kind: `Sched. 2x:`, `In   3 d.:`, …
    pub leader: String,
    /// The object's id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Its TODO keyword.
    pub todo: Option<String>,
    /// The time shown (`9:00`, `10:00-11:30`), if any.
    pub time: Option<String>,
    /// Its file and line.
    pub file: String,
    /// Its 1-based line.
    pub line: u32,
}

impl Row {
    /// The row of one entry.
    pub fn new(entry: &Entry, object: ObjectRef<'_>) -> Self {
        let days = match entry.kind {
            Kind::PastScheduled { days }
            | Kind::UpcomingDeadline { days }
            | Kind::OverdueDeadline { days } => Some(days),
            Kind::Range { day, .. } => Some(i64::from(day)),
            _ => None,
        };
        let time = entry.time_text();
        Row {
            date: entry.date.to_string(),
            kind: entry.kind.name(),
            days,
            leader: entry.kind.leader(),
            id: object.id().to_owned(),
            title: object.title().to_owned(),
            todo: object.todo().map(str::to_owned),
            time: (!time.is_empty()).then_some(time),
            file: object.file().path.display().to_string(),
            line: object.line(),
        }
    }
}

/// The category Org shows: the file's name without `.org`.
fn category<'a>(object: ObjectRef<'a>) -> &'a str {
    object
        .file()
        .path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("")
}

/// The agenda as text, as Org's agenda lays it out
/// ([`foveal_memex::parse::agenda::text`]).
pub fn text(entries: &[(Entry, ObjectRef<'_>)], from: Date, days: u32) -> String {
    let plain: Vec<Entry> = entries.iter().map(|(e, _)| *e).collect();
    foveal_memex::parse::agenda::text(&plain, from, days, |i| {
        let object = entries[i].1;
        Described {
            category: category(object),
            todo: object.todo(),
            title: object.title(),
            id: object.id(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_default_to_orgs_and_a_typo_is_an_error() {
        let o = options("").unwrap();
        assert_eq!((o.skip_done, o.deadline_warning_days), (false, 14));
        let o = options(r#"{"skip_done": true, "deadline_warning_days": 3}"#).unwrap();
        assert_eq!((o.skip_done, o.deadline_warning_days), (true, 3));
        let e = options(r#"{"skip-done": true}"#).unwrap_err();
        assert!(e.contains("skip-done"), "{e}");
    }

    #[test]
    fn a_date_must_be_orgs() {
        assert!(parse_date("2024-01-15").is_ok());
        assert!(parse_date("2024-1-15").is_err());
    }
}
