//! What the host says about the call a hook is running in: the session
//! whose prompt it renders and the time of the call.
//!
//! These are *host facts*, not configuration: a skill's `config_json` is
//! only what the user wrote in its `[skills.<name>]` table, and the facts
//! come from the host through its API ([`HostApi::call_session`],
//! [`HostApi::call_now`]) for as long as the hook runs.
//!
//! ```
//! // Inside a hook:
//! let session = foveal_sdk::call::session(); // None for a one-off prompt
//! let today = foveal_sdk::call::now().date(); // (year, month, day), local
//! # let _ = (session, today);
//! ```
//!
//! Read them on the thread the host called the hook on: a thread the skill
//! starts itself is in no call (no session; the clock's time).
//!
//! [`HostApi::call_session`]: crate::HostApi::call_session
//! [`HostApi::call_now`]: crate::HostApi::call_now

use std::cell::RefCell;

use abi_stable::std_types::{ROption, RString};

pub use crate::abi::Now;

/// The facts of one hook call, as the host keeps them while it runs.
/// Hosts (the runtime, the cell, the test harness) set them around a call
/// with [`with_facts`]; skills read them with [`session`] and [`now`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallFacts {
    /// The session whose prompt the call renders; none for a one-off
    /// prompt (`foveal prompt`, `ask` without a session, `context`).
    pub session: Option<String>,
    /// The time of the call; none lets the host read its clock.
    pub now: Option<Now>,
}

thread_local! {
    static FACTS: RefCell<Option<CallFacts>> = const { RefCell::new(None) };
}

/// Runs `f` with `facts` as this thread's call facts, then puts back what
/// was there before (calls nest: a hook that calls the host that calls a
/// hook).
pub fn with_facts<R>(facts: &CallFacts, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<CallFacts>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            FACTS.with(|cell| *cell.borrow_mut() = previous);
        }
    }
    let previous = FACTS.with(|cell| cell.borrow_mut().replace(facts.clone()));
    let _restore = Restore(previous);
    f()
}

/// The facts of the call running on this thread, if one is (as a host
/// set them with [`with_facts`]).
pub fn current() -> Option<CallFacts> {
    FACTS.with(|cell| cell.borrow().clone())
}

/// The session whose prompt this hook call renders: `None` for a one-off
/// prompt, outside a hook call, or in a host older than SDK 0.2.2.
pub fn session() -> Option<String> {
    match crate::host::host().and_then(|host| host.call_session()) {
        Some(ask) => ask().into_option().map(RString::into_string),
        // No host (a unit test calling the hook function directly), or an
        // older one: what a harness set on this thread, if anything.
        None => current().and_then(|facts| facts.session),
    }
}

/// The time of this hook call, as the host's clock (or a test) gives it,
/// with the local offset from UTC. Outside a call, or from a host older
/// than SDK 0.2.2, the system clock in UTC (offset 0). Use it instead of
/// reading the clock: a section the host reuses is re-rendered when the
/// local date changes, and tests can set the time.
pub fn now() -> Now {
    if let Some(ask) = crate::host::host().and_then(|host| host.call_now()) {
        return ask();
    }
    current()
        .and_then(|facts| facts.now)
        .unwrap_or_else(Now::utc_clock)
}

/// Answers [`HostApi::call_session`](crate::HostApi::call_session) from
/// this thread's facts: what a host puts in its API.
#[doc(hidden)]
pub extern "C" fn serve_session() -> ROption<RString> {
    current()
        .and_then(|facts| facts.session)
        .map(RString::from)
        .into()
}

/// Answers [`HostApi::call_now`](crate::HostApi::call_now) from this
/// thread's facts, else with the system clock in UTC: what a host that
/// cannot read the local time zone puts in its API.
#[doc(hidden)]
pub extern "C" fn serve_now() -> Now {
    current()
        .and_then(|facts| facts.now)
        .unwrap_or_else(Now::utc_clock)
}

impl Now {
    /// A moment `unix_seconds` after the epoch, seen at `utc_offset_seconds`
    /// from UTC.
    pub const fn new(unix_seconds: i64, utc_offset_seconds: i32) -> Self {
        Self {
            unix_seconds,
            utc_offset_seconds,
        }
    }

    /// The system clock, in UTC.
    pub fn utc_clock() -> Self {
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        Self::new(seconds, 0)
    }

    /// Days since 1970-01-01 of the local date.
    pub const fn local_day(self) -> i64 {
        (self.unix_seconds + self.utc_offset_seconds as i64).div_euclid(86_400)
    }

    /// Seconds since local midnight.
    pub const fn local_seconds_of_day(self) -> u32 {
        (self.unix_seconds + self.utc_offset_seconds as i64).rem_euclid(86_400) as u32
    }

    /// The local date: (year, month 1–12, day 1–31), proleptic Gregorian.
    pub const fn date(self) -> (i64, u32, u32) {
        let d = foveal_org::time::Date::from_days(self.local_day());
        (d.year as i64, d.month as u32, d.day as u32)
    }

    /// The local weekday, 0 = Monday … 6 = Sunday.
    pub const fn weekday(self) -> u32 {
        // 1970-01-01 was a Thursday (3).
        (self.local_day() + 3).rem_euclid(7) as u32
    }
}

impl std::fmt::Display for Now {
    /// `2026-11-28 14:05 +01:00`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (y, m, d) = self.date();
        let s = self.local_seconds_of_day();
        let offset = self.utc_offset_seconds;
        let sign = if offset < 0 { '-' } else { '+' };
        let offset = offset.unsigned_abs() / 60;
        write!(
            f,
            "{y:04}-{m:02}-{d:02} {:02}:{:02} {sign}{:02}:{:02}",
            s / 3600,
            s / 60 % 60,
            offset / 60,
            offset % 60
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_weekdays_are_local() {
        // 2026-11-28 23:30 UTC is 2026-11-29 00:30 at +01:00, a Sunday.
        let utc = Now::new(1_795_908_600, 0);
        assert_eq!(utc.date(), (2026, 11, 28));
        assert_eq!(utc.weekday(), 5);
        let paris = Now::new(1_795_908_600, 3600);
        assert_eq!(paris.date(), (2026, 11, 29));
        assert_eq!(paris.weekday(), 6);
        assert_eq!(paris.to_string(), "2026-11-29 00:30 +01:00");
        assert_eq!(Now::new(0, -5 * 3600).date(), (1969, 12, 31));
        assert_eq!(Now::new(951_782_400, 0).date(), (2000, 2, 29));
    }

    #[test]
    fn facts_hold_for_the_call_and_nest() {
        assert_eq!(current(), None);
        let outer = CallFacts {
            session: Some("work".into()),
            now: Some(Now::new(0, 0)),
        };
        with_facts(&outer, || {
            assert_eq!(session().as_deref(), Some("work"));
            assert_eq!(now(), Now::new(0, 0));
            with_facts(&CallFacts::default(), || assert_eq!(session(), None));
            assert_eq!(serve_session().into_option().as_deref(), Some("work"));
        });
        assert_eq!(current(), None);
        assert_eq!(session(), None);
    }
}
