//! The host API handed to every skill's `init`: the services a skill may
//! call back into the host for: logging, counting tokens with the
//! model's encoding ([`crate::tokens`]), and writing to the memex during a
//! call the host opened a write ticket for ([`WriteTicket`]; the
//! computed-context write-back opens one, and makes the edits).
//!
//! Each skill library has its own copy of `std` and of `tracing`, so it
//! cannot share the host's subscriber. The `log` callback is the bridge: a
//! line a skill logs becomes a `tracing` event of the host, under the target
//! `foveal::skill` with the skill's name as a field.

use abi_stable::prefix_type::WithMetadata;
use abi_stable::staticref;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use abi_stable::std_types::{RErr, ROk, RResult, RStr, RString};
use foveal_sdk::{HostApi, HostApiRef, LogLevel, SkillError};

struct Statics;

impl Statics {
    staticref! {
        const API: WithMetadata<HostApi> = WithMetadata::new(HostApi {
            sdk_version: RStr::from_str(foveal_sdk::SDK_VERSION),
            log: host_log,
            count_tokens: host_count_tokens,
            memex_write: host_memex_write,
            call_session: foveal_sdk::call::serve_session,
            call_now: host_call_now,
        })
    }
}

/// The host API every skill receives.
pub fn host_api() -> HostApiRef {
    HostApiRef(Statics::API.as_prefix())
}

extern "C" fn host_log(level: LogLevel, skill: RStr<'_>, message: RStr<'_>) {
    // A panic must not unwind into the skill's frames: across `extern "C"`
    // it would abort the process. A subscriber layer could panic, so guard.
    let skill = skill.as_str();
    let message = message.as_str();
    // A panic's line (the SDK's panic hook writes `panicked at …`) is kept
    // apart: the host says on its own that the hook failed, once.
    let panic = level >= LogLevel::ERROR
        && (message.starts_with("panicked at ") || message.starts_with("panicked: "));
    let _ = std::panic::catch_unwind(|| match level {
        _ if panic => tracing::error!(target: "foveal::skill::panic", skill, "{message}"),
        l if l >= LogLevel::ERROR => tracing::error!(target: "foveal::skill", skill, "{message}"),
        LogLevel::WARN => tracing::warn!(target: "foveal::skill", skill, "{message}"),
        LogLevel::INFO => tracing::info!(target: "foveal::skill", skill, "{message}"),
        LogLevel::DEBUG => tracing::debug!(target: "foveal::skill", skill, "{message}"),
        _ => tracing::trace!(target: "foveal::skill", skill, "{message}"),
    });
}

extern "C" fn host_count_tokens(text: RStr<'_>) -> u32 {
    // Never unwind into the skill: on a panic (which the tokenizer should
    // not raise) answer with the byte length, a safe over-estimate.
    let text = text.as_str();
    std::panic::catch_unwind(|| crate::tokens::global().count(text))
        .unwrap_or(text.len())
        .try_into()
        .unwrap_or(u32::MAX)
}

/// The time of the call on this thread ([`foveal_sdk::call::with_facts`]),
/// else the local clock.
extern "C" fn host_call_now() -> foveal_sdk::Now {
    foveal_sdk::call::current()
        .and_then(|facts| facts.now)
        .unwrap_or_else(local_now)
}

/// The clock's time with the local offset from UTC (`localtime_r`; UTC
/// when the time zone cannot be read).
pub fn local_now() -> foveal_sdk::Now {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let t = libc::time_t::try_from(seconds).unwrap_or(0);
    // SAFETY: `tm` is plain data, zero is a valid bit pattern for it, and
    // `localtime_r` only writes into the struct we pass.
    let offset = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            0
        } else {
            i32::try_from(tm.tm_gmtoff).unwrap_or(0)
        }
    };
    foveal_sdk::Now::new(seconds, offset)
}

/// The host facts of a hook call now: `session`, and the local time.
pub fn facts(session: Option<&str>) -> foveal_sdk::call::CallFacts {
    foveal_sdk::call::CallFacts {
        session: session.map(str::to_owned),
        now: Some(local_now()),
    }
}

/// Makes the memex edits a skill sends with `memex_write` while a ticket
/// is open. Whoever opens the ticket gives the writer (the host's
/// computed-context write-back), so the host API knows nothing of what the
/// edits are for.
pub trait MemexWriter: Send + Sync {
    /// Makes the edits of `edits_json` (see
    /// [`foveal_sdk::HostApi::memex_write`]) and answers with JSON.
    fn write(&self, edits_json: &str) -> Result<String, SkillError>;
}

static NEXT_TICKET: AtomicU64 = AtomicU64::new(1);

fn tickets() -> &'static Mutex<HashMap<u64, Arc<dyn MemexWriter>>> {
    static TICKETS: OnceLock<Mutex<HashMap<u64, Arc<dyn MemexWriter>>>> = OnceLock::new();
    TICKETS.get_or_init(Default::default)
}

/// An open write ticket: while it lives, a skill's `memex_write` with its
/// number reaches its writer; dropped, it is closed, whatever the call
/// did.
#[derive(Debug)]
pub struct WriteTicket(u64);

impl WriteTicket {
    /// Opens a ticket whose writes go to `writer`.
    pub fn open(writer: Arc<dyn MemexWriter>) -> Self {
        let number = NEXT_TICKET.fetch_add(1, Ordering::Relaxed);
        tickets()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(number, writer);
        Self(number)
    }

    /// The number the skill is given (in its call's configuration).
    pub fn number(&self) -> u64 {
        self.0
    }
}

impl Drop for WriteTicket {
    fn drop(&mut self) {
        tickets()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
    }
}

/// `memex_write` with ticket `ticket`: the writer's answer, or an error
/// when no such ticket is open.
pub fn memex_write(ticket: u64, edits_json: &str) -> Result<String, SkillError> {
    let writer = tickets()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&ticket)
        .cloned()
        .ok_or_else(|| {
            SkillError::invalid_input(
                "no open write ticket: the host accepts writes only during the post-execution call it opened",
            )
        })?;
    writer.write(edits_json)
}

/// The host API's `memex_write` (see [`foveal_sdk::HostApi::memex_write`]).
extern "C" fn host_memex_write(ticket: u64, edits_json: RStr<'_>) -> RResult<RString, SkillError> {
    // Never unwind into the skill's frames.
    let edits_json = edits_json.as_str();
    match std::panic::catch_unwind(|| memex_write(ticket, edits_json)) {
        Ok(Ok(answer)) => ROk(RString::from(answer)),
        Ok(Err(error)) => RErr(error),
        Err(_) => RErr(SkillError::new(
            SkillError::UNAVAILABLE,
            "the host failed while writing; nothing more was written",
        )),
    }
}
