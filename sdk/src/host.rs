//! The skill's side of the host API: logging through the host.
//!
//! Each skill library carries its own copy of `std` and of every crate it
//! uses, so a `tracing` subscriber or a `log` logger set up by the host does
//! not reach it. Skills log through the callback the host hands to `init`
//! instead; [`log`] and the `skill_*!` macros do that.
//!
//! # Example
//!
//! ```
//! foveal_sdk::skill_info!("rendered {} headlines", 42);
//! ```

use std::sync::OnceLock;

use abi_stable::std_types::RStr;

use crate::abi::{HostApiRef, LogLevel};

struct Installed {
    host: HostApiRef,
    skill: &'static str,
}

static HOST: OnceLock<Installed> = OnceLock::new();

/// Remembers the host API for this copy of the library. Called by the code
/// [`export_skill!`](crate::export_skill) generates, before the skill's own
/// `init`.
#[doc(hidden)]
pub fn install(host: HostApiRef, skill: &'static str) {
    // A library copy is initialised once; a second call (which the host never
    // makes) keeps the first host.
    let _ = HOST.set(Installed { host, skill });
    route_panics_to_host();
}

/// The host API, once `init` has run.
pub fn host() -> Option<HostApiRef> {
    HOST.get().map(|installed| installed.host)
}

/// Writes `message` to the host's log at `level`. Before `init` (in a unit
/// test of the skill, say) the line goes to stderr.
pub fn log(level: LogLevel, message: &str) {
    match HOST.get() {
        Some(installed) => (installed.host.log())(
            level,
            RStr::from_str(installed.skill),
            RStr::from_str(message),
        ),
        None => eprintln!("[skill log {level:?}] {message}"),
    }
}

/// The number of tokens of `text` in the model's encoding, counted by the
/// host (which caches counts by content). `None` before `init`, or in a host
/// without the service: use [`estimate_tokens`] then.
pub fn count_tokens(text: &str) -> Option<usize> {
    let installed = HOST.get()?;
    let count = installed.host.count_tokens()?;
    Some(count(RStr::from_str(text)) as usize)
}

/// Asks the host to write `edits_json` to the memex, under the write
/// ticket the host put in the call's configuration (`"write_ticket"`, on
/// a [`SignalKind::TASK_DONE`](crate::SignalKind::TASK_DONE) call).
///
/// `edits_json` is `{"edits": [edit, …]}`, each edit one of
///
/// - `{"op": "add_child", "parent": ID, "title": T, "body": B?,
///   "tags": [TAG, …]?, "properties": [[KEY, VALUE], …]?}` — a new
///   headline under `parent`, its tags and properties set in that order
///   (put the property that makes it count last);
/// - `{"op": "set_property", "id": ID, "key": K, "value": V}`.
///
/// The answer is `{"results": [{"ok": true, "id": ID, "generation": N} |
/// {"ok": false, "error": TEXT}, …]}`, one per edit, in order. `Err` when
/// the host has no such service (an older host), the ticket is not open,
/// or the JSON is not edits.
pub fn memex_write(ticket: u64, edits_json: &str) -> Result<String, crate::SkillError> {
    let installed = HOST.get().ok_or_else(|| {
        crate::SkillError::new(crate::SkillError::UNAVAILABLE, "no host: init has not run")
    })?;
    let write = installed.host.memex_write().ok_or_else(|| {
        crate::SkillError::new(
            crate::SkillError::UNAVAILABLE,
            "this host cannot write to the memex for skills (it predates `memex_write`)",
        )
    })?;
    write(ticket, RStr::from_str(edits_json))
        .into_result()
        .map(|s| s.into_string())
}

/// A safe over-estimate of the tokens of `text` without the host: its
/// length in bytes (no token is shorter than one byte).
pub fn estimate_tokens(text: &str) -> usize {
    text.len()
}

/// Panics inside a skill are caught and returned as errors, but the default
/// panic hook of the library's own `std` would still print to stderr. Send
/// the message to the host's log instead, where it is attributed to the skill.
fn route_panics_to_host() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let message = crate::export::panic_message(info.payload());
        // The host reads a line that starts `panicked` as this hook's
        // (its own report of the failed call says it already).
        log(LogLevel::ERROR, &format!("panicked{location}: {message}"));
    }));
}

/// Logs at info level through the host: `skill_info!("x = {}", x)`.
#[macro_export]
macro_rules! skill_info {
    ($($arg:tt)*) => { $crate::host::log($crate::LogLevel::INFO, &::std::format!($($arg)*)) };
}

/// Logs at warn level through the host: something unexpected that the
/// skill handled. A running host shows it on stderr at its default log
/// level (every command but `tui`); info and debug lines only with
/// `FOVEAL_LOG`.
#[macro_export]
macro_rules! skill_warn {
    ($($arg:tt)*) => { $crate::host::log($crate::LogLevel::WARN, &::std::format!($($arg)*)) };
}

/// Logs at error level through the host: something failed that the skill
/// could not handle. A running host shows it on stderr, as it shows
/// [`skill_warn!`] lines, at its default log level.
#[macro_export]
macro_rules! skill_error {
    ($($arg:tt)*) => { $crate::host::log($crate::LogLevel::ERROR, &::std::format!($($arg)*)) };
}

/// Logs at debug level through the host.
#[macro_export]
macro_rules! skill_debug {
    ($($arg:tt)*) => { $crate::host::log($crate::LogLevel::DEBUG, &::std::format!($($arg)*)) };
}
