//! Log lines: the redactor every one passes, and a bounded ring of lines.
//!
//! [`LogRing`] keeps the last lines pushed into it; [`LogRing::recent`]
//! answers the seed's `context-logs`: the newest lines first, at most
//! `limit` of them (`CONTEXT_LOG_LIMIT`, default 20). The ring holds a
//! fixed number of lines, so a chatty host cannot grow it without bound.
//! The host keeps the agent's activity log in one, pushed directly, never
//! through `tracing`: what reaches a `tracing` layer depends on the log
//! filter, and the prompt must not. [`LogRing::layer`] fills a ring from
//! `tracing` events, to catch what a part of the host logs (the tests use
//! it).
//!
//! # Example
//!
//! ```
//! use foveal_gate::logs::LogRing;
//! use tracing_subscriber::layer::SubscriberExt as _;
//!
//! let ring = LogRing::new(100);
//! let subscriber = tracing_subscriber::registry().with(ring.layer());
//! tracing::subscriber::with_default(subscriber, || {
//!     tracing::info!(target: "foveal::registry", skill = "awareness", "loaded");
//! });
//! assert_eq!(ring.recent(5), ["INFO foveal::registry: loaded skill=awareness"]);
//! ```

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

/// A bounded ring of formatted log lines, shared between the layer that
/// fills it and whoever reads it.
#[derive(Debug, Clone)]
pub struct LogRing {
    inner: Arc<Mutex<VecDeque<String>>>,
    capacity: usize,
}

impl LogRing {
    /// A ring that keeps the last `capacity` lines (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            inner: Arc::new(Mutex::new(VecDeque::with_capacity(capacity.min(4096)))),
            capacity,
        }
    }

    /// The `tracing` layer that feeds this ring.
    pub fn layer(&self) -> RingLayer {
        RingLayer { ring: self.clone() }
    }

    /// Appends one line, dropping the oldest when full.
    pub fn push(&self, line: String) {
        let mut lines = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == self.capacity {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The newest `limit` lines, newest first (seed 000 `context-logs`).
    pub fn recent(&self, limit: usize) -> Vec<String> {
        let lines = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().rev().take(limit).cloned().collect()
    }

    /// How many lines the ring holds now.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether the ring is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What every log line passes before it is kept or written: the host
/// installs the privacy gate here once the memex is open
/// ([`set_redactor`]), so no log line — in the activity log the prompt
/// shows, on stderr — holds private text or a secret.
type Redactor = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

fn redactor() -> &'static std::sync::RwLock<Option<Redactor>> {
    static REDACTOR: std::sync::OnceLock<std::sync::RwLock<Option<Redactor>>> =
        std::sync::OnceLock::new();
    REDACTOR.get_or_init(|| std::sync::RwLock::new(None))
}

thread_local! {
    /// Set while a line is being redacted: a line logged from inside the
    /// redactor (the gate's own counts) is not redacted again.
    static REDACTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs the filter every log line passes from now on: it answers the
/// line to keep instead, or none to keep it as it is.
pub fn set_redactor(redact: impl Fn(&str) -> Option<String> + Send + Sync + 'static) {
    *redactor().write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(redact));
}

/// Runs `f` with log lines passing unredacted on this thread: for the
/// gate itself, whose lines hold counts and kinds only, and which the
/// redactor calls (so it must not be entered again from its own logging).
pub fn unredacted<R>(f: impl FnOnce() -> R) -> R {
    let before = REDACTING.with(|r| r.replace(true));
    let out = f();
    REDACTING.with(|r| r.set(before));
    out
}

/// `line` through the installed filter.
pub fn redact(line: &str) -> std::borrow::Cow<'_, str> {
    if REDACTING.with(std::cell::Cell::get) {
        return std::borrow::Cow::Borrowed(line);
    }
    let Some(redact) = redactor().read().unwrap_or_else(|e| e.into_inner()).clone() else {
        return std::borrow::Cow::Borrowed(line);
    };
    REDACTING.with(|r| r.set(true));
    let out = redact(line);
    REDACTING.with(|r| r.set(false));
    match out {
        Some(line) => std::borrow::Cow::Owned(line),
        None => std::borrow::Cow::Borrowed(line),
    }
}

/// Makes a panic's report pass the log's filter too: the default hook
/// writes a panic's message to stderr as it is, and a message may quote
/// the text being worked on (a slice's panic quotes the string; a skill
/// in the host's process may panic with what it was lent). The report
/// says the thread and the place, and the message through [`redact`] —
/// or, for a panic inside the gate itself (whose thread may hold the
/// gate's lock, and whose text is not checked), that it is withheld. A
/// backtrace (`RUST_BACKTRACE=1`) names functions and places only.
pub fn gate_panics() {
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "Box<dyn Any>".to_owned());
        let location = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_else(|| "an unknown place".to_owned());
        let thread = std::thread::current();
        let mut report = panic_report(thread.name().unwrap_or("<unnamed>"), &location, &message);
        let backtrace = std::backtrace::Backtrace::capture();
        if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
            let _ = write!(report, "\n{backtrace}");
        }
        eprintln!("{report}");
    }));
}

/// What [`gate_panics`] writes for a panic of `thread` at `location`
/// with `message`.
fn panic_report(thread: &str, location: &str, message: &str) -> String {
    let message = if REDACTING.with(std::cell::Cell::get) {
        std::borrow::Cow::Borrowed(
            "(withheld: the panic came from inside the privacy gate, whose text is not checked)",
        )
    } else {
        redact(message)
    };
    format!("thread '{thread}' panicked at {location}:\n{message}")
}

/// A `tracing_subscriber` writer for stderr that passes each line (each
/// event) through [`redact`] before writing it.
#[derive(Debug, Clone, Copy, Default)]
pub struct GatedStderr;

/// One event's bytes, written to stderr redacted when dropped.
#[derive(Debug, Default)]
pub struct GatedLine(Vec<u8>);

impl std::io::Write for GatedLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for GatedLine {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.0);
        // Redacted before stderr is locked: the redactor takes the gate's
        // lock, and a thread holding that lock may be logging (waiting for
        // stderr) at the same time.
        let line = redact(&text);
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for GatedStderr {
    type Writer = GatedLine;

    fn make_writer(&'a self) -> Self::Writer {
        GatedLine::default()
    }
}

/// Formats events as `LEVEL target: message key=value …` into a [`LogRing`].
#[derive(Debug)]
pub struct RingLayer {
    ring: LogRing,
}

impl<S: Subscriber> Layer<S> for RingLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut line = LineVisitor::default();
        event.record(&mut line);
        let mut text = format!("{} {}: {}", meta.level(), meta.target(), line.message);
        if !line.fields.is_empty() {
            text.push(' ');
            text.push_str(&line.fields);
        }
        let text = match redact(&text) {
            std::borrow::Cow::Owned(redacted) => redacted,
            std::borrow::Cow::Borrowed(_) => text,
        };
        self.ring.push(text);
    }
}

#[derive(Default)]
struct LineVisitor {
    message: String,
    fields: String,
}

impl Visit for LineVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            self.field(field, format_args!("{value}"));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            self.field(field, format_args!("{value:?}"));
        }
    }
}

impl LineVisitor {
    fn field(&mut self, field: &Field, value: std::fmt::Arguments<'_>) {
        if !self.fields.is_empty() {
            self.fields.push(' ');
        }
        let _ = write!(self.fields, "{}={}", field.name(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt as _;

    #[test]
    fn recent_lines_come_newest_first_and_the_ring_is_bounded() {
        let ring = LogRing::new(3);
        let subscriber = tracing_subscriber::registry().with(ring.layer());
        tracing::subscriber::with_default(subscriber, || {
            for i in 0..5 {
                tracing::warn!(n = i, "line {i}");
            }
        });
        assert_eq!(ring.len(), 3);
        let recent = ring.recent(2);
        assert_eq!(recent.len(), 2);
        assert!(
            recent[0].starts_with("WARN ") && recent[0].contains("line 4 n=4"),
            "{recent:?}"
        );
        assert!(recent[1].contains("line 3"), "{recent:?}");
        assert_eq!(ring.recent(20).len(), 3);
    }

    #[test]
    fn a_panic_report_passes_the_filter_and_one_from_inside_the_gate_is_withheld() {
        // A filter that changes only this test's token (the filter is the
        // process's: other tests' lines pass it unchanged).
        set_redactor(|line| {
            line.contains("QZXV-PANIC-TOKEN")
                .then(|| line.replace("QZXV-PANIC-TOKEN", "[REDACTED private]"))
        });
        let report = panic_report(
            "foveal-gate",
            "gate/src/x.rs:1:2",
            "byte index 9 is out of range of `QZXV-PANIC-TOKEN`",
        );
        assert_eq!(
            report,
            "thread 'foveal-gate' panicked at gate/src/x.rs:1:2:\nbyte index 9 is out of range of `[REDACTED private]`"
        );
        let inside = unredacted(|| panic_report("t", "here", "QZXV-PANIC-TOKEN"));
        assert!(!inside.contains("QZXV"), "{inside}");
        assert!(inside.contains("withheld"), "{inside}");
    }
}
