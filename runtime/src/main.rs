//! The `foveal` binary: parses the command line and runs it.

use std::process::ExitCode;

use clap::Parser as _;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::FilterExt as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

fn main() -> ExitCode {
    let cli = foveal::cli::Cli::parse();
    // Logs go to stderr. FOVEAL_LOG takes an env-filter directive
    // (`debug`, `foveal=trace`, …). The one-shot commands report everything
    // they need on stdout, so they log only what FOVEAL_LOG asks for.
    let explicit = EnvFilter::try_from_env("FOVEAL_LOG").ok();
    // Without FOVEAL_LOG, every command but `tui` says on stderr each hook
    // failure (a skill's error, a panic, a dead or hung cell, a quarantine),
    // once per skill, hook and cause (`foveal::skill_errors`).
    // The commands that run cycles also say when a skill is refused (the
    // registry's warnings), when a skill's cell refuses an act or dies and when a memex file cannot be loaded, one plain line each;
    // and how the background embedding goes (a line when it starts, every
    // 10 s, and when it ends); and when the control socket refuses clients
    // (once per burst).
    // The commands that call hooks without running cycles say when a
    // skill's cell refuses an act or dies.
    // Every command but `tui` says when what it keeps on disk between
    // processes cannot be used (`foveal::index`: the private-text index
    // damaged, unwritable or not what a build makes; the stored vectors
    // unwritable), and what a skill logs
    // at warn and error level (`skill_warn!`, `skill_error!`; the
    // computed-context skill: a handoff that does not parse, once). A panic's line is left to the
    // report of the failed hook (`foveal::skill::panic`).
    let trouble = explicit
        .is_none()
        .then(|| {
            if cli.runs_cycles() {
                Some("off,foveal::registry=warn,foveal::skill_errors=warn,foveal_cell=warn,foveal::prompt=warn,foveal::memex=warn,foveal::embed=info,foveal::control=warn,foveal::index=warn")
            } else if cli.calls_hooks() {
                Some("off,foveal::skill_errors=warn,foveal_cell=warn,foveal::prompt=warn,foveal::index=warn")
            } else if cli.draws_on_the_terminal() {
                None
            } else {
                Some("off,foveal::skill_errors=warn,foveal::index=warn")
            }
        })
        .flatten()
        .map(|directives| {
            let skill_warnings = tracing_subscriber::filter::filter_fn(|meta| {
                meta.target() == "foveal::skill" && *meta.level() <= tracing::Level::WARN
            })
            .with_max_level_hint(tracing::Level::WARN);
            tracing_subscriber::fmt::layer()
                .with_writer(foveal::logs::GatedStderr)
                .without_time()
                .with_target(false)
                .with_ansi(false)
                .with_filter(EnvFilter::new(directives).or(skill_warnings))
        });
    let filter = explicit.unwrap_or_else(|| EnvFilter::new("off"));
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(foveal::logs::GatedStderr)
                .with_filter(filter),
        )
        .with(trouble)
        .init();
    // The prompt's log component (seed 000 `context-logs`) shows the
    // agent's activity (tool calls, outside memex edits, skill changes, in
    // words), kept apart from the log: the host's own lines — paths,
    // timings, cycle summaries — are for the operator (stderr, `status`),
    // and whatever FOVEAL_LOG lets through, the prompt is the same.
    foveal::agent::activity::keep();
    match foveal::cli::run(cli) {
        Ok(exit) => ExitCode::from(exit.code()),
        // The reader of stdout went away (`foveal status --json | head`):
        // it read what it wanted; there is nothing to say.
        Err(error) if broken_pipe(&error) && stdout_closed() => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether `error` is, or was caused by, a write to a pipe with no reader
/// (EPIPE: the host's Rust runtime ignores SIGPIPE).
fn broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        let kind = match cause.downcast_ref::<std::io::Error>() {
            Some(io) => Some(io.kind()),
            // serde_json's error does not give its I/O error as a source.
            None => cause
                .downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind),
        };
        kind == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// Whether stdout is a pipe whose reader has gone away, so that an EPIPE
/// is stdout's and not, say, the control socket's (a host that went away
/// is an error to say).
fn stdout_closed() -> bool {
    let mut stdout = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: `poll` reads and writes the one `pollfd` we pass (count 1)
    // and does not wait (timeout 0); it touches no other memory.
    let ready = unsafe { libc::poll(&mut stdout, 1, 0) };
    // A pipe with no reader polls as an error for its writer.
    ready > 0 && (stdout.revents & libc::POLLERR) != 0
}
