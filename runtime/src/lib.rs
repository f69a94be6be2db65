//! # foveal: the agent host
//!
//! A long-running host that drives sense–think–act cycles for an LLM agent.
//! Everything that shapes the prompt is a *skill*: a dynamic library built
//! against [`foveal_sdk`], loaded from a plugins folder, checked, and
//! swapped while the host runs.
//!
//! The host is the top of a workspace of crates by concern
//! (`docs/architecture.md` draws the tree). Below it, each in its own
//! crate and named here by its old path:
//!
//! - [`memex`] ([`foveal_memex`]) is the knowledge base: Org files as an
//!   indexed snapshot, privacy tags, the view lent to skills, writes and
//!   the watcher.
//! - [`provider`] ([`foveal_provider`]) asks a model: an OpenAI-compatible
//!   server over HTTP or the embedded model; it also holds the embedders.
//! - [`egress`] is the last door ([`foveal_gate`]): private text and
//!   secrets are removed from every request body before it leaves the
//!   process; [`logs`] keeps the recent log lines, redacted.
//! - [`config`] reads `foveal.toml`, the environment and the flags, each
//!   table with the helpers of [`foveal_settings`].
//!
//! The host's own parts:
//!
//! - [`loader`] maps a library through a shadow copy and checks it, or
//!   starts it in a cell of its own ([`foveal_cell`]).
//! - [`isolation`] decides which skills run in cells and what each cell
//!   is granted.
//! - [`trust`] decides which folders, libraries and config files may be
//!   used: owned by the user or root, writable by nobody else, and
//!   optionally on an allow-list of SHA-256 digests.
//! - [`registry`] holds the loaded skills as an immutable, generation-numbered
//!   snapshot and is the one path every hook call takes.
//! - [`skill_errors`] says each hook failure once per process, and keeps
//!   the list `foveal prompt --json` shows.
//! - [`watcher`] reloads skills when the plugins folder changes.
//! - [`host_api`] is what the host offers skills.
//! - [`prompt`] assembles the prompt from ordered components within a
//!   token budget that always holds, and tracks usage and cost.
//! - [`execution`] composes how a cycle may act (single action or a loop,
//!   how many tool calls, which kinds of tool) from the static limits, the
//!   context type and the runtime signals.
//! - [`embed`] decides what is embedded and when, and caches the vectors
//!   on disk, so that similar objects are promoted on any memex.
//! - [`agent`] is the live host: signals, the cycle (sense → think → act),
//!   tools, sessions, the control socket.
//! - [`cli`] is the `foveal` command; [`tui`] its terminal client.

/// The live agent and the configuration of a run, their own crate
/// ([`foveal_agent`]); named here as before.
pub use foveal_agent as agent;
pub use foveal_agent::config;
/// The command line and the terminal client, their own crate
/// ([`foveal_cli`]); named here as before.
pub use foveal_cli as cli;
pub use foveal_cli::tui;
/// The embedding service, its own crate ([`foveal_embed`]).
pub use foveal_embed as embed;
/// The recent log lines and the log redactor, from [`foveal_gate`].
pub use foveal_gate::logs;
/// The memex, its own crate ([`foveal_memex`]); named here as before.
pub use foveal_memex as memex;
/// The quiet-time queue both watchers share, from [`foveal_memex`].
pub use foveal_memex::debounce;
pub use foveal_prompt::{computed, context, execution, prompt, window};
/// The model providers, their own crate ([`foveal_provider`]); named here
/// as before.
pub use foveal_provider as provider;
pub use foveal_registry::{
    egress, host_api, isolation, loader, registry, skill_errors, tokens, trust, watcher,
};

/// Privacy, attacked: what an adversary tried (a model, a server, a tool, a
/// careless file) and that each attempt finds nothing private.
#[cfg(test)]
mod adversary;
