//! The host API handed to every skill's `init`: the services a skill may
//! call back into the host for: logging, counting tokens with the
//! model's encoding ([`crate::tokens`]), and writing to the memex during a
//! post-execution call ([`crate::computed`]).
//!
//! Each skill library has its own copy of `std` and of `tracing`, so it
//! cannot share the host's subscriber. The `log` callback is the bridge: a
//! line a skill logs becomes a `tracing` event of the host, under the target
//! `foveal::skill` with the skill's name as a field.

use abi_stable::prefix_type::WithMetadata;
use abi_stable::staticref;
use abi_stable::std_types::RStr;
use foveal_sdk::{HostApi, HostApiRef, LogLevel};

struct Statics;

impl Statics {
    staticref! {
        const API: WithMetadata<HostApi> = WithMetadata::new(HostApi {
            sdk_version: RStr::from_str(foveal_sdk::SDK_VERSION),
            log: host_log,
            count_tokens: host_count_tokens,
            memex_write: crate::computed::host_memex_write,
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
    let panic = level >= LogLevel::ERROR && message.starts_with("panicked");
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
