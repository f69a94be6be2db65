//! Org's dates: timestamps, planning lines, repeaters and warning periods.
//!
//! The syntax is Org's (9.5, as Emacs 28 reads it):
//!
//! ```text
//! <2024-01-15 Mon>               active; the day name is optional and not checked
//! [2024-01-15 Mon]               inactive: never on the agenda
//! <2024-01-15 Mon 10:00>         with a time (H:MM or HH:MM)
//! <2024-01-15 Mon 10:00-11:30>   a time range
//! <2024-01-15 Mon>--<2024-01-17 Wed>   a date range
//! <2024-01-15 Mon +1w>           repeaters: +N, ++N, .+N with h d w m y
//! <2024-01-15 Mon -3d>           a warning (deadline) or delay (scheduled)
//! <2024-01-15 Mon 10:00 +1w -2d> both, in either order
//! ```
//!
//! A planning line is the line directly after a headline holding
//! `SCHEDULED:`, `DEADLINE:` and/or `CLOSED:`, each followed by a
//! timestamp. What Org would not read as a timestamp (`<2024-1-5>`, a
//! month 13, a 25:00) is not one here either; [`planning`] says so, so the
//! memex can report it with its file and line.
//!
//! Dates are proleptic Gregorian, as Emacs's calendar computes them; a day
//! number ([`Date::days`]) counts from 1970-01-01.

use std::fmt;

/// The English day names, Sunday first (as [`Date::weekday`] counts).
pub const WEEKDAY_NAMES: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// The English month names, January first.
pub const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// A calendar date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    /// The year (four digits in Org's syntax).
    pub year: i32,
    /// 1–12.
    pub month: u8,
    /// 1–31, valid for the month.
    pub day: u8,
}

impl Date {
    /// The date, if it exists.
    pub fn new(year: i32, month: u8, day: u8) -> Option<Date> {
        (1..=12)
            .contains(&month)
            .then_some(())
            .filter(|()| day >= 1 && day <= days_in_month(year, month))
            .map(|()| Date { year, month, day })
    }

    /// Days since 1970-01-01 (negative before).
    pub fn days(self) -> i64 {
        days_from_civil(
            i64::from(self.year),
            i64::from(self.month),
            i64::from(self.day),
        )
    }

    /// The date `days` days after 1970-01-01.
    pub const fn from_days(days: i64) -> Date {
        // Howard Hinnant's civil_from_days.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
        let year = yoe + era * 400 + if month <= 2 { 1 } else { 0 };
        Date {
            year: year as i32,
            month,
            day,
        }
    }

    /// `n` days later (earlier when negative).
    pub fn add_days(self, n: i64) -> Date {
        Date::from_days(self.days() + n)
    }

    /// 0 = Sunday … 6 = Saturday.
    pub fn weekday(self) -> u8 {
        (self.days() + 4).rem_euclid(7) as u8
    }

    /// The English three-letter day name Org writes (`Mon`).
    pub fn weekday_name(self) -> &'static str {
        &WEEKDAY_NAMES[self.weekday() as usize][..3]
    }

    /// The English day name (`Monday`).
    pub fn weekday_long_name(self) -> &'static str {
        WEEKDAY_NAMES[self.weekday() as usize]
    }

    /// The English month name (`January`).
    pub fn month_name(self) -> &'static str {
        MONTH_NAMES[usize::from(self.month.clamp(1, 12) - 1)]
    }

    /// Parses `YYYY-MM-DD`.
    pub fn parse(s: &str) -> Option<Date> {
        let b = s.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let year = digits(&b[0..4])?;
        let month = digits(&b[5..7])?;
        let day = digits(&b[8..10])?;
        Date::new(year as i32, month as u8, day as u8)
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// The day number of year/month/day as Emacs's calendar computes it: a
/// day past the month's end runs on into the next month (February 31st
/// is March 2nd or 3rd), which is what Org's monthly repeaters do.
fn lenient_days(year: i64, month: i64, day: i64) -> i64 {
    let (y, m) = (
        year + (month - 1).div_euclid(12),
        (month - 1).rem_euclid(12) + 1,
    );
    days_from_civil(y, m, 1) + day - 1
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn is_leap(year: i32) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i32, month: u8) -> u8 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    b.iter().try_fold(0u32, |n, d| {
        n.checked_mul(10)?.checked_add(u32::from(d - b'0'))
    })
}

/// A time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Clock {
    /// 0–23 (Org also writes 24:00 for the end of a day: kept as 24).
    pub hour: u8,
    /// 0–59.
    pub minute: u8,
}

impl fmt::Display for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02}:{:02}", self.hour, self.minute)
    }
}

/// The unit of a repeater or warning period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// `h`
    Hour,
    /// `d`
    Day,
    /// `w`
    Week,
    /// `m`
    Month,
    /// `y`
    Year,
}

impl Unit {
    fn from_byte(b: u8) -> Option<Unit> {
        Some(match b {
            b'h' => Unit::Hour,
            b'd' => Unit::Day,
            b'w' => Unit::Week,
            b'm' => Unit::Month,
            b'y' => Unit::Year,
            _ => return None,
        })
    }

    /// The letter Org writes.
    pub fn letter(self) -> char {
        match self {
            Unit::Hour => 'h',
            Unit::Day => 'd',
            Unit::Week => 'w',
            Unit::Month => 'm',
            Unit::Year => 'y',
        }
    }
}

/// How a repeater moves the date when the item is marked done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RepeatKind {
    /// `+1w`: by the interval, once.
    Cumulate,
    /// `++1w`: by the interval until the date is in the future.
    CatchUp,
    /// `.+1w`: to the interval after today.
    Restart,
}

impl RepeatKind {
    /// The mark Org writes (`+`, `++`, `.+`).
    pub fn mark(self) -> &'static str {
        match self {
            RepeatKind::Cumulate => "+",
            RepeatKind::CatchUp => "++",
            RepeatKind::Restart => ".+",
        }
    }
}

/// A repeater: `+1w`, `++2d`, `.+1m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repeater {
    /// Which of the three.
    pub kind: RepeatKind,
    /// How many units.
    pub value: u32,
    /// Which unit.
    pub unit: Unit,
}

/// A warning period (on a deadline) or a delay (on a scheduled date):
/// `-3d`, or `--3d`, which on a repeating date applies to the first
/// occurrence only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Warning {
    /// `--`: the first occurrence only.
    pub first_only: bool,
    /// How many units.
    pub value: u32,
    /// Which unit.
    pub unit: Unit,
}

impl Warning {
    /// The period in days, as Org counts it (a week is 7, a month 30.4, a
    /// year 365.25 days, an hour 0.041667, rounded down).
    pub fn days(self) -> i64 {
        let v = i64::from(self.value);
        match self.unit {
            Unit::Hour => (v as f64 * 0.041667) as i64,
            Unit::Day => v,
            Unit::Week => 7 * v,
            Unit::Month => (v as f64 * 30.4) as i64,
            Unit::Year => (v as f64 * 365.25) as i64,
        }
    }
}

/// One timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Timestamp {
    /// `<…>` (active) or `[…]` (inactive).
    pub active: bool,
    /// Its date.
    pub date: Date,
    /// Its time of day.
    pub time: Option<Clock>,
    /// The end of its time range (`10:00-11:30`), or the time of the end
    /// of its date range (`<… 10:00>--<… 12:00>`).
    pub end_time: Option<Clock>,
    /// The end of its date range (`<…>--<…>`).
    pub end_date: Option<Date>,
    /// Its repeater.
    pub repeater: Option<Repeater>,
    /// Its warning period or delay.
    pub warning: Option<Warning>,
}

impl Timestamp {
    /// Parses the timestamp at the start of `s`; returns it and its length
    /// in bytes. A date range (`<a>--<b>`, also `-` or `---` between) is
    /// one timestamp.
    pub fn parse_prefix(s: &str) -> Option<(Timestamp, usize)> {
        let (mut ts, mut len) = parse_one(s)?;
        // `<a>--<b>`; Org also reads `<a>-<b>` and `<a>---<b>`.
        let dashes = s[len..].bytes().take(3).take_while(|&b| b == b'-').count();
        if dashes > 0
            && let Some((end, end_len)) = parse_one(&s[len + dashes..])
            && end.active == ts.active
        {
            ts.end_date = Some(end.date);
            ts.end_time = end.time;
            len += dashes + end_len;
        }
        Some((ts, len))
    }

    /// Parses `s`, which must be exactly one timestamp.
    pub fn parse(s: &str) -> Option<Timestamp> {
        match Timestamp::parse_prefix(s) {
            Some((ts, len)) if len == s.len() => Some(ts),
            _ => None,
        }
    }

    /// The dates this timestamp falls on among `from..=to` (day numbers):
    /// its date, each repetition of it from there on, and, for a date
    /// range, nothing (see [`Timestamp::end_date`]). Calls `f` with each
    /// day number, in order.
    pub fn occurrences_in(&self, from: i64, to: i64, mut f: impl FnMut(i64)) {
        let base = self.date.days();
        let Some(r) = self.repeater.filter(|r| r.value > 0) else {
            if (from..=to).contains(&base) {
                f(base);
            }
            return;
        };
        let mut day = next_occurrence(base, r, from);
        while day <= to {
            f(day);
            day = next_occurrence(base, r, day + 1);
        }
    }
}

/// The first repetition of `base` (by `r`) on or after `day`; `base` when
/// `day` is before it. Org's `org-closest-date` with `future`.
pub fn next_occurrence(base: i64, r: Repeater, day: i64) -> i64 {
    if day <= base || r.value == 0 {
        return base;
    }
    let v = i64::from(r.value);
    let days_per = match r.unit {
        // Org steps an hour repeater by hours from the stamp's time: on
        // the agenda, a repeat of a day or less shows every day.
        Unit::Hour => Some((v / 24).max(1)),
        Unit::Day => Some(v),
        Unit::Week => Some(7 * v),
        Unit::Month | Unit::Year => None,
    };
    if let Some(per) = days_per {
        let n = (day - base + per - 1) / per;
        return base + n * per;
    }
    let months_per = if r.unit == Unit::Month { v } else { 12 * v };
    let b = Date::from_days(base);
    let step = |n: i64| {
        lenient_days(
            i64::from(b.year),
            i64::from(b.month) + n * months_per,
            i64::from(b.day),
        )
    };
    // The month count from the calendar, then a step or two: a day past
    // a month's end runs into the next month.
    let t = Date::from_days(day);
    let months = i64::from(t.year - b.year) * 12 + i64::from(t.month) - i64::from(b.month);
    let mut n = (months / months_per - 1).max(0);
    while step(n) < day {
        n += 1;
    }
    while n > 0 && step(n - 1) >= day {
        n -= 1;
    }
    step(n)
}

fn parse_one(s: &str) -> Option<(Timestamp, usize)> {
    let b = s.as_bytes();
    let (active, close) = match b.first()? {
        b'<' => (true, b'>'),
        b'[' => (false, b']'),
        _ => return None,
    };
    let end = memchr::memchr2(close, b'\n', b).filter(|&i| b[i] == close)?;
    let inner = &s[1..end];
    let date = Date::parse(inner.get(..10)?)?;
    let mut ts = Timestamp {
        active,
        date,
        time: None,
        end_time: None,
        end_date: None,
        repeater: None,
        warning: None,
    };
    let mut rest = &inner[10..];
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    // The day name: a word of no digits, `+`, `-`, `]`, `>` or space.
    rest = rest.trim_start_matches(' ');
    let name_len = rest
        .find(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | ']' | '>' | ' ' | '\r'))
        .unwrap_or(rest.len());
    if name_len > 0 {
        rest = rest[name_len..].trim_start_matches(' ');
    }
    // The time, or a time range.
    if rest.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        let (t, n) = parse_clock(rest)?;
        ts.time = Some(t);
        rest = &rest[n..];
        if let Some(r) = rest.strip_prefix('-')
            && let Some((t2, n2)) = parse_clock(r)
        {
            ts.end_time = Some(t2);
            rest = &r[n2..];
        }
        if !(rest.is_empty() || rest.starts_with(' ')) {
            return None;
        }
        rest = rest.trim_start_matches(' ');
    }
    // Repeater and warning, in either order.
    while !rest.is_empty() {
        let word_end = rest.find(' ').unwrap_or(rest.len());
        let word = &rest[..word_end];
        if let Some(r) = parse_repeater(word)
            && ts.repeater.is_none()
        {
            ts.repeater = Some(r);
        } else if let Some(w) = parse_warning(word)
            && ts.warning.is_none()
        {
            ts.warning = Some(w);
        } else {
            return None;
        }
        rest = rest[word_end..].trim_start_matches(' ');
    }
    Some((ts, end + 1))
}

/// `H:MM` or `HH:MM` at the start of `s`.
fn parse_clock(s: &str) -> Option<(Clock, usize)> {
    let b = s.as_bytes();
    let colon = b.iter().take(3).position(|&c| c == b':')?;
    if colon == 0 || b.len() < colon + 3 {
        return None;
    }
    let hour = digits(&b[..colon])?;
    let minute = digits(&b[colon + 1..colon + 3])?;
    if b.get(colon + 3).is_some_and(u8::is_ascii_digit) || hour > 24 || minute > 59 {
        return None;
    }
    Some((
        Clock {
            hour: hour as u8,
            minute: minute as u8,
        },
        colon + 3,
    ))
}

fn parse_amount(s: &str) -> Option<(u32, Unit)> {
    let (&unit, num) = s.as_bytes().split_last()?;
    Some((digits(num)?, Unit::from_byte(unit)?))
}

fn parse_repeater(word: &str) -> Option<Repeater> {
    let (kind, rest) = if let Some(r) = word.strip_prefix("++") {
        (RepeatKind::CatchUp, r)
    } else if let Some(r) = word.strip_prefix(".+") {
        (RepeatKind::Restart, r)
    } else {
        (RepeatKind::Cumulate, word.strip_prefix('+')?)
    };
    let (value, unit) = parse_amount(rest)?;
    Some(Repeater { kind, value, unit })
}

fn parse_warning(word: &str) -> Option<Warning> {
    let (first_only, rest) = match word.strip_prefix("--") {
        Some(r) => (true, r),
        None => (false, word.strip_prefix('-')?),
    };
    let (value, unit) = parse_amount(rest)?;
    Some(Warning {
        first_only,
        value,
        unit,
    })
}

/// A headline's planning line, read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Planning {
    /// `SCHEDULED:`
    pub scheduled: Option<Timestamp>,
    /// `DEADLINE:`
    pub deadline: Option<Timestamp>,
    /// `CLOSED:`
    pub closed: Option<Timestamp>,
}

impl Planning {
    /// Whether it holds none of the three.
    pub fn is_empty(&self) -> bool {
        self.scheduled.is_none() && self.deadline.is_none() && self.closed.is_none()
    }
}

/// Reads a planning line. The second value names what Org would not read
/// (a keyword without a valid timestamp after it), for a warning; it
/// quotes nothing of the line, which may be private.
pub fn planning(line: &str) -> (Planning, Option<String>) {
    let mut planning = Planning::default();
    let mut problem = None;
    let mut rest = line.trim_start_matches([' ', '\t']);
    while !rest.is_empty() {
        let Some((keyword, slot)) = [("SCHEDULED:", 0u8), ("DEADLINE:", 1), ("CLOSED:", 2)]
            .into_iter()
            .find(|(k, _)| rest.starts_with(k))
        else {
            // Text Org ignores: skip a word.
            let next = rest.find([' ', '\t']).unwrap_or(rest.len());
            rest = rest[next..].trim_start_matches([' ', '\t']);
            continue;
        };
        let after = rest[keyword.len()..].trim_start_matches([' ', '\t']);
        match Timestamp::parse_prefix(after) {
            Some((ts, len)) => {
                match slot {
                    0 => planning.scheduled = Some(ts),
                    1 => planning.deadline = Some(ts),
                    _ => planning.closed = Some(ts),
                }
                rest = after[len..].trim_start_matches([' ', '\t']);
            }
            None => {
                problem.get_or_insert_with(|| {
                    format!(
                        "{keyword} is not followed by a timestamp Org reads \
                         (<YYYY-MM-DD Day HH:MM +1w -2d>); ignored"
                    )
                });
                let next = after.find([' ', '\t']).unwrap_or(after.len());
                rest = after[next..].trim_start_matches([' ', '\t']);
            }
        }
    }
    (planning, problem)
}

/// Where an active timestamp may start in `text`: each `<` followed by a
/// digit, in order (one `memchr` pass). A reader that wants to know which
/// sections hold a date reads only those.
pub fn active_starts(text: &[u8]) -> impl Iterator<Item = usize> + '_ {
    memchr::memchr_iter(b'<', text).filter(|&at| text.get(at + 1).is_some_and(u8::is_ascii_digit))
}

/// The timestamps in `text`, active and inactive, in order, with their
/// byte ranges. Text that only looks like one (`<2024-1-5>`) is skipped.
pub fn timestamps(text: &str) -> impl Iterator<Item = (std::ops::Range<usize>, Timestamp)> + '_ {
    let b = text.as_bytes();
    let mut pos = 0;
    std::iter::from_fn(move || {
        while let Some(i) = memchr::memchr2(b'<', b'[', &b[pos..]) {
            let at = pos + i;
            pos = at + 1;
            // Cheap test before parsing: a digit after the bracket.
            if !b.get(at + 1).is_some_and(u8::is_ascii_digit) {
                continue;
            }
            if let Some((ts, len)) = Timestamp::parse_prefix(&text[at..]) {
                pos = at + len;
                return Some((at..at + len, ts));
            }
        }
        pos = b.len();
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Date {
        Date::parse(s).unwrap()
    }

    #[test]
    fn day_numbers_round_trip_and_weekdays_are_right() {
        assert_eq!(d("1970-01-01").days(), 0);
        assert_eq!(d("2024-01-15").weekday_name(), "Mon");
        assert_eq!(d("2000-02-29").weekday_name(), "Tue");
        for n in -800_000..800_000i64 {
            if n % 997 == 0 {
                assert_eq!(Date::from_days(n).days(), n);
            }
        }
        assert_eq!(Date::parse("2023-02-29"), None);
        assert_eq!(Date::parse("2024-13-01"), None);
        assert_eq!(Date::parse("2024-1-05"), None);
    }

    #[test]
    fn timestamps_of_every_form_are_read() {
        let ts = Timestamp::parse("<2024-01-15 Mon 10:00-11:30 +1w -2d>").unwrap();
        assert!(ts.active);
        assert_eq!(ts.date, d("2024-01-15"));
        assert_eq!(
            ts.time,
            Some(Clock {
                hour: 10,
                minute: 0
            })
        );
        assert_eq!(
            ts.end_time,
            Some(Clock {
                hour: 11,
                minute: 30
            })
        );
        assert_eq!(
            ts.repeater,
            Some(Repeater {
                kind: RepeatKind::Cumulate,
                value: 1,
                unit: Unit::Week
            })
        );
        assert_eq!(ts.warning.map(Warning::days), Some(2));

        let ts = Timestamp::parse("[2024-01-15 Mon 9:05]").unwrap();
        assert!(!ts.active);
        assert_eq!(ts.time, Some(Clock { hour: 9, minute: 5 }));

        let ts = Timestamp::parse("<2024-01-15>").unwrap();
        assert_eq!(ts.time, None);

        let ts = Timestamp::parse("<2024-01-15 Mon -3d .+2m>").unwrap();
        assert_eq!(ts.repeater.unwrap().kind, RepeatKind::Restart);
        assert_eq!(ts.warning.unwrap().value, 3);

        let ts = Timestamp::parse("<2024-01-15 Mon ++1y --1w>").unwrap();
        assert_eq!(ts.repeater.unwrap().kind, RepeatKind::CatchUp);
        assert!(ts.warning.unwrap().first_only);

        let ts = Timestamp::parse("<2024-01-15 Mon>--<2024-01-17 Wed>").unwrap();
        assert_eq!(ts.end_date, Some(d("2024-01-17")));

        for bad in [
            "<2024-1-15>",
            "<2024-01-32 Wed>",
            "<2024-01-15 Mon 25:00>",
            "<2024-01-15 Mon 10:60>",
            "<2024-01-15 Mon +1x>",
            "<2024-01-15 Mon\n>",
            "2024-01-15",
        ] {
            assert_eq!(Timestamp::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn hostile_amounts_and_characters_are_not_timestamps_and_do_not_panic() {
        for text in [
            "<2024-01-15 -é>",
            "<2024-01-15 Mon +1€>",
            "[2024-01-15 -é]",
            "<2024-01-15 +9999999999d>",
            "<2024-01-15 -99999999999999999999w>",
        ] {
            assert_eq!(Timestamp::parse(text), None, "{text}");
            let _ = planning(&format!("SCHEDULED: {text}"));
        }
        let ts = Timestamp::parse("<2024-01-15 +4294967295d>").unwrap();
        assert_eq!(ts.repeater.unwrap().value, u32::MAX);
        let far = Timestamp::parse("<0001-01-31 +1m>").unwrap();
        let today = d("2026-12-07").days();
        let next = next_occurrence(far.date.days(), far.repeater.unwrap(), today);
        assert!(
            next >= today && next - today < 32,
            "{}",
            Date::from_days(next)
        );
        let zero = Repeater {
            kind: RepeatKind::Cumulate,
            value: 0,
            unit: Unit::Day,
        };
        assert_eq!(next_occurrence(0, zero, 100), 0);
    }

    #[test]
    fn planning_lines_give_each_keyword_and_name_what_org_would_not_read() {
        let (p, problem) =
            planning("  DEADLINE: <2024-01-20 Sat -5d> SCHEDULED: <2024-01-15 Mon 9:00>");
        assert_eq!(p.deadline.unwrap().date, d("2024-01-20"));
        assert_eq!(p.scheduled.unwrap().time.unwrap().hour, 9);
        assert!(p.closed.is_none());
        assert_eq!(problem, None);

        let (p, problem) = planning("CLOSED: [2024-01-10 Wed 17:02] SCHEDULED: <2024-1-5>");
        assert!(p.closed.is_some());
        assert!(p.scheduled.is_none());
        assert!(problem.unwrap().contains("SCHEDULED:"));
    }

    #[test]
    fn repeaters_step_by_days_weeks_months_and_years_as_org_does() {
        let r = |s: &str| Timestamp::parse(s).unwrap();
        let days = |ts: Timestamp, from: &str, to: &str| {
            let mut v = Vec::new();
            ts.occurrences_in(d(from).days(), d(to).days(), |n| {
                v.push(Date::from_days(n).to_string())
            });
            v
        };
        assert_eq!(
            days(r("<2024-01-01 +1w>"), "2024-01-10", "2024-01-31"),
            ["2024-01-15", "2024-01-22", "2024-01-29"]
        );
        assert_eq!(
            days(r("<2024-01-15 ++1m>"), "2023-12-01", "2024-04-01"),
            ["2024-01-15", "2024-02-15", "2024-03-15"]
        );
        // Emacs's calendar runs a day past the month's end into the next.
        assert_eq!(
            days(r("<2024-01-31 +1m>"), "2024-01-01", "2024-05-31"),
            [
                "2024-01-31",
                "2024-03-02",
                "2024-03-31",
                "2024-05-01",
                "2024-05-31"
            ]
        );
        assert_eq!(
            days(r("<2020-02-29 +1y>"), "2021-01-01", "2024-12-31"),
            ["2021-03-01", "2022-03-01", "2023-03-01", "2024-02-29"]
        );
        assert_eq!(
            days(r("<2024-01-15>"), "2024-01-16", "2024-01-20"),
            [] as [&str; 0]
        );
        let base = d("2024-01-01").days();
        let rep = r("<2024-01-01 +3d>").repeater.unwrap();
        assert_eq!(next_occurrence(base, rep, base - 5), base);
        assert_eq!(next_occurrence(base, rep, base + 7), base + 9);
        assert_eq!(next_occurrence(base, rep, base + 9), base + 9);
    }

    #[test]
    fn timestamps_in_text_are_found_in_order() {
        let text = "Call <2024-01-15 Mon 10:00>, not [2024-01-16] nor <2024-1-5> or <a>; \
                    trip <2024-02-01 Thu>--<2024-02-03 Sat>.";
        let found: Vec<_> = timestamps(text)
            .map(|(r, ts)| (&text[r], ts.active))
            .collect();
        assert_eq!(
            found,
            [
                ("<2024-01-15 Mon 10:00>", true),
                ("[2024-01-16]", false),
                ("<2024-02-01 Thu>--<2024-02-03 Sat>", true),
            ]
        );
    }
}
