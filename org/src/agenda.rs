//! The agenda: what is due on each day of a span, by Org's rules.
//!
//! [`agenda`] does what `org-agenda-list` (Org 9.5, its default settings)
//! does for a span of days starting on the day taken as today, and is
//! checked against it in batch Emacs (`tests/agenda/`). Per day, in this
//! order of collection, then sorted (stably) by time of day — entries with
//! a time first — and by priority:
//!
//! - **deadlines** on their date; on today also those within their warning
//!   period (`-5d`, else [`Options::deadline_warning_days`], 14 as
//!   `org-deadline-warning-days`), `In N d.`, and overdue ones still open,
//!   `N d. ago`. A repeating deadline is due at its last repetition on or
//!   before today, and shows again at each later repetition in the span;
//! - **scheduled** items on their date and each later repetition; on today
//!   also those scheduled earlier and still open, `Sched. Nx` (N days
//!   ago). A delay (`-2d`) hides the item until N days after its date
//!   (`--2d`: the first repetition only);
//! - **date ranges** (`<a>--<b>`) on each of their days, `(i/n)`;
//! - **active timestamps** in the headline and its section (not in the
//!   planning line) on their date and on each repetition.
//!
//! Done items: a deadline or scheduled date that is done shows on its own
//! date only (as Org's defaults do); a timestamp or range shows whatever its
//! state. [`Options::skip_done`] drops every done item, as Org's three
//! `org-agenda-skip-*-if-done` set to `t`.

use crate::Headline;
use crate::time::{self, Clock, Date, Timestamp, next_occurrence, planning, timestamps};

/// One headline with its dates, as the agenda reads it.
#[derive(Debug, Clone, Default)]
pub struct Item {
    /// Which file it is in (files in the order they are given: the order
    /// of equal entries).
    pub file: u32,
    /// Its priority cookie (`[#A]`).
    pub priority: Option<char>,
    /// Whether its TODO keyword is a done state.
    pub done: bool,
    /// `SCHEDULED:`
    pub scheduled: Option<Timestamp>,
    /// `DEADLINE:`
    pub deadline: Option<Timestamp>,
    /// Its active timestamps where Org's agenda reads them (not in the
    /// planning line, a source, example, export or comment block, a
    /// comment, keyword or fixed-width line), in order. A repeater not
    /// written last (`<… +1w -1d>`) is dropped, as Org's agenda ignores
    /// it there.
    pub timestamps: Vec<Timestamp>,
    /// Its active date ranges (`<a>--<b>`), which Org's agenda reads
    /// anywhere but in a comment line or a source block.
    pub ranges: Vec<Timestamp>,
    /// A time of day its title gives (`Lunch 12:30`): Org shows it for a
    /// date that has none.
    pub title_time: Option<(Clock, Option<Clock>)>,
}

impl Item {
    /// The agenda's view of headline `h` of `text`, in file `file`: its
    /// planning line, and the dates of its section (headline, drawers and
    /// body) where Org's agenda reads them. `None` when it has no date the
    /// agenda shows.
    pub fn of(text: &str, h: &Headline, file: u32) -> Option<Item> {
        Item::from_section(
            text,
            &Section {
                range: h.own.start as usize..h.own.end as usize,
                planning: h.planning().map(|p| p.start as usize..p.end as usize),
                title: h.title.start as usize..h.title.end as usize,
                priority: h.priority,
                done: h.done,
                beyond_planning: true,
            },
            file,
        )
    }

    /// The agenda's view of one headline's section of `text`, given by
    /// its parts (for a reader that keeps ranges but not [`Headline`]s,
    /// as a skill's memex view does).
    pub fn from_section(text: &str, section: &Section, file: u32) -> Option<Item> {
        let mut item = Item {
            file,
            priority: section.priority,
            done: section.done,
            ..Item::default()
        };
        item.title_time = title_time(&text[section.title.clone()]);
        let planning_span = section.planning.clone();
        if let Some(p) = &planning_span {
            let (plan, _) = planning(&text[p.clone()]);
            item.scheduled = plan.scheduled.filter(|t| t.active);
            item.deadline = plan.deadline.filter(|t| t.active);
        }
        let (own_start, own_end) = (section.range.start, section.range.end);
        // Most dated sections hold their dates in the planning line only:
        // then there is nothing more to read (unless that line holds a
        // range, which the agenda also lists as one).
        let in_planning = |at: usize| planning_span.as_ref().is_some_and(|p| p.contains(&at));
        let elsewhere = section.beyond_planning
            && time::active_starts(&text.as_bytes()[own_start..own_end])
                .any(|at| !in_planning(own_start + at));
        let planning_range = planning_span
            .as_ref()
            .is_some_and(|p| text[p.clone()].contains(">-"));
        let mut block: Option<Verbatim> = None;
        let mut pos = if elsewhere || planning_range {
            own_start
        } else {
            own_end
        };
        while pos < own_end {
            let line_end =
                memchr::memchr(b'\n', &text.as_bytes()[pos..own_end]).map_or(own_end, |i| pos + i);
            let line = &text[pos..line_end];
            let place = if pos == own_start {
                Place::Text
            } else {
                classify(
                    line,
                    &mut block,
                    planning_span.as_ref().is_some_and(|p| p.start == pos),
                )
            };
            if place != Place::Nothing && memchr::memchr(b'<', line.as_bytes()).is_some() {
                for (range, ts) in timestamps(line) {
                    if !ts.active {
                        continue;
                    }
                    if ts.end_date.is_some() {
                        item.ranges.push(ts);
                    } else if place == Place::Text {
                        let mut ts = ts;
                        if !repeater_is_last(&line[range]) {
                            ts.repeater = None;
                        }
                        item.timestamps.push(ts);
                    }
                }
            }
            pos = line_end + 1;
        }
        (item.scheduled.is_some()
            || item.deadline.is_some()
            || !item.timestamps.is_empty()
            || !item.ranges.is_empty())
        .then_some(item)
    }
}

/// One headline's section, as byte ranges of its file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The headline line to the next headline of any level.
    pub range: std::ops::Range<usize>,
    /// Its planning line, if any.
    pub planning: Option<std::ops::Range<usize>>,
    /// Its title.
    pub title: std::ops::Range<usize>,
    /// Its priority cookie.
    pub priority: Option<char>,
    /// Whether its TODO keyword is a done state.
    pub done: bool,
    /// Whether a `<` and a digit may be outside its planning line: a
    /// reader that indexed where they are says `false` for a section whose
    /// only dates are on the planning line, and the rest is not read.
    pub beyond_planning: bool,
}

/// What Org's agenda reads on a line of a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Timestamps and date ranges.
    Text,
    /// Date ranges only (a planning line, a keyword or fixed-width line,
    /// an example, export or comment block).
    RangesOnly,
    /// Nothing (a comment line, a source block).
    Nothing,
}

/// A block whose content is not Org text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verbatim {
    Src,
    Other,
}

fn classify(line: &str, block: &mut Option<Verbatim>, is_planning: bool) -> Place {
    let l = line.trim_start_matches([' ', '\t']).trim_end_matches('\r');
    let lower_starts = |p: &str| {
        l.as_bytes()
            .get(..p.len())
            .is_some_and(|b| b.eq_ignore_ascii_case(p.as_bytes()))
    };
    if let Some(kind) = *block {
        if lower_starts("#+end_") {
            *block = None;
        }
        return match kind {
            Verbatim::Src => Place::Nothing,
            Verbatim::Other => Place::RangesOnly,
        };
    }
    if lower_starts("#+begin_") {
        let name = l[8..].split([' ', '\t']).next().unwrap_or("");
        *block = match name.to_ascii_lowercase().as_str() {
            "src" => Some(Verbatim::Src),
            "example" | "export" | "comment" => Some(Verbatim::Other),
            _ => None,
        };
        return if *block == Some(Verbatim::Src) {
            Place::Nothing
        } else {
            Place::RangesOnly
        };
    }
    if l == "#" || l.starts_with("# ") {
        return Place::Nothing;
    }
    if is_planning || l == ":" || l.starts_with(": ") || l.starts_with("#+") {
        return Place::RangesOnly;
    }
    Place::Text
}

/// Whether a timestamp's repeater is the last thing before its `>`: Org's
/// agenda repeats a plain timestamp only then.
fn repeater_is_last(raw: &str) -> bool {
    let b = raw.trim_end_matches('>').as_bytes();
    let Some((&unit, rest)) = b.split_last() else {
        return false;
    };
    let digits = rest.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    matches!(unit, b'h' | b'd' | b'w' | b'm' | b'y')
        && digits > 0
        && rest.len() > digits
        && rest[rest.len() - digits - 1] == b'+'
}

/// Whether Org's agenda leaves headline `index` out whatever its dates:
/// it or an ancestor is `COMMENT`ed or tagged `ARCHIVE`
/// (`org-agenda-skip-comment-trees`, `org-agenda-skip-archived-trees`).
pub fn skipped_tree(text: &str, headlines: &[Headline], index: usize) -> bool {
    let mut at = Some(index);
    while let Some(i) = at {
        let h = &headlines[i];
        if h.commented || h.tags(text).any(|t| t == "ARCHIVE") {
            return true;
        }
        at = h.parent.map(|p| p as usize);
    }
    false
}

/// A time of day written in a title (`12:30`, `9am`, `9:00-9:30`),
/// which Org's agenda shows for a date that has none
/// (`org-agenda-search-headline-for-time`; Org's
/// `org-plain-time-of-day-regexp`).
fn title_time(title: &str) -> Option<(Clock, Option<Clock>)> {
    let b = title.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !is_word(b[i - 1])) {
            if let Some((start, n)) = plain_time(&b[i..]) {
                let rest = &b[i + n..];
                let dashes = rest.iter().take(2).take_while(|&&c| c == b'-').count();
                let end = (dashes > 0)
                    .then(|| plain_time(&rest[dashes..]))
                    .flatten()
                    .map(|(t, _)| t);
                return Some((start, end));
            }
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            continue;
        }
        i += 1;
    }
    None
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c >= 0x80
}

/// `H`/`HH` then `:MM` (and an optional am/pm), or am/pm directly, ending
/// a word: the time and the bytes it took.
fn plain_time(b: &[u8]) -> Option<(Clock, usize)> {
    let digits = b.iter().take(3).take_while(|c| c.is_ascii_digit()).count();
    if !(1..=2).contains(&digits) || (digits == 2 && b[0] > b'2') {
        return None;
    }
    let hour = b[..digits].iter().fold(0u8, |n, d| n * 10 + (d - b'0'));
    let mut n = digits;
    let mut minute = 0u8;
    if b.get(n) == Some(&b':') {
        let m = b.get(n + 1..n + 3)?;
        if !(m[0].is_ascii_digit() && m[0] <= b'5' && m[1].is_ascii_digit()) {
            return None;
        }
        minute = (m[0] - b'0') * 10 + (m[1] - b'0');
        n += 3;
    }
    let mut hour = hour;
    let ampm = b.get(n..n + 2).map(|s| s.to_ascii_lowercase());
    match ampm.as_deref() {
        Some(b"am") | Some(b"pm") => {
            let pm = ampm.as_deref() == Some(b"pm");
            hour %= 12;
            if pm {
                hour += 12;
            }
            n += 2;
        }
        _ if n == digits => return None,
        _ => {}
    }
    if b.get(n).is_some_and(|&c| is_word(c)) {
        return None;
    }
    Some((Clock { hour, minute }, n))
}

/// The agenda's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// The warning period of a deadline without its own
    /// (`org-deadline-warning-days`).
    pub deadline_warning_days: i64,
    /// Leave out done items (Org's `org-agenda-skip-scheduled-if-done`,
    /// `-deadline-if-done` and `-timestamp-if-done`).
    pub skip_done: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            deadline_warning_days: 14,
            skip_done: false,
        }
    }
}

/// Why an entry is on a day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Scheduled for this day.
    Scheduled,
    /// Scheduled `days` days before today and not done (on today only).
    PastScheduled {
        /// How many days ago.
        days: i64,
    },
    /// Due this day.
    Deadline,
    /// Due in `days` days (on today only, within the warning period).
    UpcomingDeadline {
        /// In how many days.
        days: i64,
    },
    /// Due `days` days before today and not done (on today only).
    OverdueDeadline {
        /// How many days ago.
        days: i64,
    },
    /// An active timestamp on this day.
    Timestamp,
    /// Day `day` of a date range of `of` days.
    Range {
        /// Which day of the range, from 1.
        day: u32,
        /// How many days the range has.
        of: u32,
    },
}

impl Kind {
    /// A short word for it: `scheduled`, `deadline`, `timestamp`, `range`
    /// (past-scheduled and overdue and upcoming deadlines included).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Scheduled => "scheduled",
            Kind::PastScheduled { .. } => "past-scheduled",
            Kind::Deadline => "deadline",
            Kind::UpcomingDeadline { .. } => "upcoming-deadline",
            Kind::OverdueDeadline { .. } => "overdue-deadline",
            Kind::Timestamp => "timestamp",
            Kind::Range { .. } => "range",
        }
    }

    /// As Org's agenda writes it before the title: `Scheduled:`,
    /// `Sched. 2x:`, `Deadline:`, `In   3 d.:`, `2 d. ago:`, `(1/3):`, or
    /// nothing (Org's leaders, trimmed).
    pub fn leader(self) -> String {
        match self {
            Kind::Scheduled => "Scheduled:".into(),
            Kind::PastScheduled { days } => format!("Sched.{days:2}x:"),
            Kind::Deadline => "Deadline:".into(),
            Kind::UpcomingDeadline { days } => format!("In {days:3} d.:"),
            Kind::OverdueDeadline { days } => format!("{days} d. ago:"),
            Kind::Timestamp => String::new(),
            Kind::Range { of: 1, .. } => String::new(),
            Kind::Range { day, of } => format!("({day}/{of}):"),
        }
    }
}

/// One line of the agenda.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The day it is listed under.
    pub date: Date,
    /// Why.
    pub kind: Kind,
    /// Its item: an index into the items given.
    pub item: usize,
    /// The time of day shown, if any.
    pub time: Option<Clock>,
    /// The end of the time range shown, if any.
    pub end_time: Option<Clock>,
}

/// The agenda of `days` days from `today`, in Org's order. `items` are in
/// file order, files in the order given.
pub fn agenda(items: &[Item], today: Date, days: u32, options: &Options) -> Vec<Entry> {
    span(items, today, today, days, options)
}

/// The agenda of `days` days from `from`, seen on `today`: the reminders
/// of today (upcoming and overdue deadlines, past scheduled items) appear
/// only when today is in the span, as in Org's agenda of another week.
pub fn span(items: &[Item], today: Date, from: Date, days: u32, options: &Options) -> Vec<Entry> {
    let today_n = today.days();
    let (start, end) = (from.days(), from.days() + i64::from(days) - 1);
    // Org collects, day by day, each file's deadlines, then its scheduled
    // items, then its ranges, then its timestamps, each in file order, and
    // sorts the day stably by time (none is late), then priority. The same
    // order, computed item by item over only the days an item can show on:
    // (day, time, -priority, file, pass, item, k).
    type Key = (i64, i64, i64, u32, u8, usize, usize);
    let mut all: Vec<(Key, Entry)> = Vec::new();
    let mut batch: Vec<(Entry, i64)> = Vec::new();
    let mut days_of: Vec<i64> = Vec::new();
    let push = |all: &mut Vec<(Key, Entry)>,
                batch: &mut Vec<(Entry, i64)>,
                day: i64,
                pass: u8,
                item: &Item,
                i: usize| {
        let date = Date::from_days(day);
        for (k, (e, priority)) in batch.drain(..).enumerate() {
            let t = e
                .time
                .map_or(9901, |t| i64::from(t.hour) * 100 + i64::from(t.minute));
            all.push((
                (day, t, -priority, item.file, pass, i, k),
                Entry { date, ..e },
            ));
        }
    };
    for (i, item) in items.iter().enumerate() {
        for (pass, ts) in [(0u8, &item.deadline), (1, &item.scheduled)] {
            let Some(ts) = ts else { continue };
            planning_days(ts, today_n, start, end, &mut days_of);
            for &day in &days_of {
                if pass == 0 {
                    deadline_entry(item, i, day, today_n, options, &mut batch);
                } else {
                    scheduled_entry(item, i, day, today_n, options, &mut batch);
                }
                push(&mut all, &mut batch, day, pass, item, i);
            }
        }
        if !item.ranges.is_empty() {
            days_of.clear();
            for ts in &item.ranges {
                let last = ts.end_date.map_or(ts.date.days(), Date::days);
                days_of.extend(ts.date.days().max(start)..=last.min(end));
            }
            days_of.sort_unstable();
            days_of.dedup();
            for &day in &days_of {
                range_entries(item, i, day, options, &mut batch);
                push(&mut all, &mut batch, day, 2, item, i);
            }
        }
        if !item.timestamps.is_empty() {
            days_of.clear();
            for ts in &item.timestamps {
                ts.occurrences_in(start, end, |day| days_of.push(day));
            }
            days_of.sort_unstable();
            days_of.dedup();
            for &day in &days_of {
                timestamp_entries(item, i, day, options, &mut batch);
                push(&mut all, &mut batch, day, 3, item, i);
            }
        }
    }
    all.sort_unstable_by_key(|(key, _)| *key);
    all.into_iter().map(|(_, e)| e).collect()
}

/// The days of `start..=end` a planning date can show on: its own, today
/// (a reminder), and its repetitions after today. The entry functions
/// decide; these are only the candidates.
fn planning_days(ts: &Timestamp, today: i64, start: i64, end: i64, out: &mut Vec<i64>) {
    out.clear();
    let base = ts.date.days();
    for day in [base, today] {
        if (start..=end).contains(&day) {
            out.push(day);
        }
    }
    if let Some(r) = ts.repeater.filter(|r| r.value > 0) {
        let mut day = next_occurrence(base, r, start.max(today + 1));
        while day <= end {
            out.push(day);
            day = next_occurrence(base, r, day + 1);
        }
    }
    out.sort_unstable();
    out.dedup();
}

/// Org's `org-get-priority` of a headline: `[#A]` 2000, `[#B]` or none
/// 1000, `[#C]` 0 (1000 per letter below `C`).
fn base_priority(item: &Item) -> i64 {
    item.priority
        .map_or(1000, |c| 1000 * (i64::from(b'C') - c as i64))
}

fn entry(kind: Kind, item: usize, time: Option<(Clock, Option<Clock>)>) -> Entry {
    Entry {
        date: Date::from_days(0),
        kind,
        item,
        time: time.map(|t| t.0),
        end_time: time.and_then(|t| t.1),
    }
}

fn time_of(ts: &Timestamp) -> Option<(Clock, Option<Clock>)> {
    ts.time.map(|t| (t, ts.end_time))
}

/// A planning timestamp's date (its base: a repeater moves it only when
/// the item is marked done), and the date it stands for on day `current`:
/// its base up to today, then its next repetition on or after `current`
/// (`org-agenda-show-future-repeats`).
fn planning_dates(ts: &Timestamp, current: i64, today: i64) -> (i64, i64) {
    let base = ts.date.days();
    match ts.repeater.filter(|r| r.value > 0) {
        Some(r) if current > today => (base, next_occurrence(base, r, current)),
        _ => (base, base),
    }
}

fn deadline_entry(
    item: &Item,
    index: usize,
    current: i64,
    today: i64,
    options: &Options,
    out: &mut Vec<(Entry, i64)>,
) {
    let Some(ts) = &item.deadline else { return };
    if !ts.active {
        return;
    }
    let (deadline, repeat) = planning_dates(ts, current, today);
    let diff = deadline - current;
    let is_today = current == today;
    let warning = ts
        .warning
        .map_or(options.deadline_warning_days, |w| w.days());
    let shown = if current == deadline || current == repeat {
        true
    } else if !is_today {
        false
    } else if deadline > current {
        diff <= warning
    } else {
        true
    };
    if !shown || (item.done && (options.skip_done || deadline != current)) {
        return;
    }
    let kind = if is_today && deadline < today {
        Kind::OverdueDeadline { days: -diff }
    } else if is_today && deadline > today {
        Kind::UpcomingDeadline { days: diff }
    } else {
        Kind::Deadline
    };
    let time = if current == deadline || current == repeat {
        time_of(ts).or(item.title_time)
    } else {
        None
    };
    let adjust = if is_today { -diff } else { 0 };
    out.push((entry(kind, index, time), base_priority(item) + adjust));
}

fn scheduled_entry(
    item: &Item,
    index: usize,
    current: i64,
    today: i64,
    options: &Options,
    out: &mut Vec<(Entry, i64)>,
) {
    let Some(ts) = &item.scheduled else { return };
    if !ts.active {
        return;
    }
    let (schedule, repeat) = planning_dates(ts, current, today);
    let diff = current - schedule;
    let is_today = current == today;
    // A delay (`-2d`; `--2d` is the same here: the date is the base).
    let delay = ts.warning.map_or(0, |w| w.days());
    let skip = (delay > 0 && diff < delay)
        || schedule > current
        || (current != schedule && !is_today && current != repeat);
    if skip || (item.done && (options.skip_done || schedule != current)) {
        return;
    }
    let kind = if is_today && schedule < today {
        Kind::PastScheduled { days: diff }
    } else {
        Kind::Scheduled
    };
    let time = if current == schedule || current == repeat {
        time_of(ts).or(item.title_time)
    } else {
        None
    };
    out.push((entry(kind, index, time), base_priority(item) + 99 + diff));
}

fn range_entries(
    item: &Item,
    index: usize,
    current: i64,
    options: &Options,
    out: &mut Vec<(Entry, i64)>,
) {
    if item.done && options.skip_done {
        return;
    }
    for ts in &item.ranges {
        let Some(end) = ts.end_date else { continue };
        let (d1, d2) = (ts.date.days(), end.days());
        if !(d1..=d2).contains(&current) {
            continue;
        }
        let kind = Kind::Range {
            day: (current - d1 + 1) as u32,
            of: (d2 - d1 + 1) as u32,
        };
        // Org's `org-agenda-get-blocks`: both ends' times when they are
        // the same (or both absent) or the range is one day, the start's
        // on the first day, the end's on the last, none in between; the
        // title's when the chosen end has none.
        let time = if ts.time == ts.end_time || d1 == d2 {
            match (ts.time, ts.end_time) {
                (Some(a), Some(b)) if d1 == d2 && a != b => Some((a, Some(b))),
                (Some(a), _) => Some((a, None)),
                (None, _) => item.title_time,
            }
        } else if current == d1 {
            ts.time.map(|t| (t, None)).or(item.title_time)
        } else if current == d2 {
            ts.end_time.map(|t| (t, None)).or(item.title_time)
        } else {
            None
        };
        out.push((entry(kind, index, time), base_priority(item)));
    }
}

fn timestamp_entries(
    item: &Item,
    index: usize,
    current: i64,
    options: &Options,
    out: &mut Vec<(Entry, i64)>,
) {
    if item.done && options.skip_done {
        return;
    }
    for ts in &item.timestamps {
        let mut hit = false;
        ts.occurrences_in(current, current, |_| hit = true);
        if hit {
            out.push((
                entry(Kind::Timestamp, index, time_of(ts).or(item.title_time)),
                base_priority(item),
            ));
        }
    }
}

impl Entry {
    /// The time as Org's agenda writes it (`9:00`, `10:00-11:30`), or
    /// nothing.
    pub fn time_text(&self) -> String {
        let one = |c: Clock| format!("{}:{:02}", c.hour, c.minute);
        match (self.time, self.end_time) {
            (Some(a), Some(b)) => format!("{}-{}", one(a), one(b)),
            (Some(a), None) => one(a),
            _ => String::new(),
        }
    }
}

/// The heading Org's agenda writes for a day: `Monday     15 January 2024`.
pub fn day_heading(date: Date) -> String {
    format!(
        "{:<10} {} {} {}",
        date.weekday_long_name(),
        date.day,
        date.month_name(),
        date.year
    )
}

/// What an agenda line says of its item.
#[derive(Debug, Clone, Copy)]
pub struct Described<'a> {
    /// The category (Org's: the file's name without `.org`).
    pub category: &'a str,
    /// The TODO keyword.
    pub todo: Option<&'a str>,
    /// The title.
    pub title: &'a str,
    /// The id, to read the item by.
    pub id: &'a str,
}

/// One line of the agenda as text: category, time, kind, TODO keyword,
/// title and id.
pub fn line(entry: &Entry, d: &Described<'_>) -> String {
    let todo = d.todo.map(|t| format!("{t} ")).unwrap_or_default();
    format!(
        "  {:<12} {:<11} {:<11} {}{}  [{}]",
        format!("{}:", d.category),
        entry.time_text(),
        entry.kind.leader(),
        todo,
        d.title,
        d.id
    )
}

/// The agenda as text, as Org's agenda lays it out: a heading for every
/// day of the span (empty ones too), then one [`line`] per entry;
/// `describe(i)` tells what entry `i` of `entries` is about.
pub fn text<'a>(
    entries: &[Entry],
    from: Date,
    days: u32,
    describe: impl Fn(usize) -> Described<'a>,
) -> String {
    let mut out = String::new();
    let mut i = 0;
    for offset in 0..i64::from(days) {
        let date = from.add_days(offset);
        out.push_str(&day_heading(date));
        out.push('\n');
        while let Some(entry) = entries.get(i).filter(|e| e.date == date) {
            out.push_str(&line(entry, &describe(i)));
            out.push('\n');
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(text: &str) -> Vec<Item> {
        let parsed = crate::parse(text).unwrap();
        parsed
            .headlines
            .iter()
            .filter_map(|h| Item::of(text, h, 0))
            .collect()
    }

    #[test]
    fn a_line_of_multibyte_text_is_classified_without_slicing_a_character() {
        // `#+é…` is shorter than `#+begin_` in characters, not in bytes.
        let text =
            "* Note\n#+é\n:ID: x)\u{FFFD}Title\n<2024-01-15 Mon>\n#+begin_ßrc\n<2024-01-16>\n";
        let found = items(text);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].timestamps.len(), 2);
    }

    #[test]
    fn the_reminders_of_today_show_only_when_today_is_in_the_span() {
        let text =
            "* TODO Rent\nDEADLINE: <2024-01-10 Wed>\n* TODO Report\nSCHEDULED: <2024-01-12 Fri>\n";
        let items = items(text);
        let today = Date::parse("2024-01-15").unwrap();
        let kinds = |from: &str, days| -> Vec<&'static str> {
            span(
                &items,
                today,
                Date::parse(from).unwrap(),
                days,
                &Options::default(),
            )
            .iter()
            .map(|e| e.kind.name())
            .collect()
        };
        assert_eq!(
            kinds("2024-01-15", 1),
            ["past-scheduled", "overdue-deadline"]
        );
        assert_eq!(kinds("2024-01-16", 7), [] as [&str; 0]);
        // Their own days, when the span holds them.
        assert_eq!(kinds("2024-01-08", 5), ["deadline", "scheduled"]);
    }
}
