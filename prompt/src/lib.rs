//! # foveal-prompt: what a think step sends
//!
//! The prompt's components in id order (seed 004) and their assembly, the
//! budget and its trimming levels, context types, the execution pattern,
//! token economics, cost, the awareness context section and its cache,
//! computed context (seed 001) and its write-back, and the context window
//! (seed 002). It calls skills through the skill host's registry and never
//! talks to a model: it builds the messages a provider sends.

/// The crates below, under the names the host uses for them.
pub(crate) use foveal_memex as memex;
pub(crate) use foveal_provider as provider;
pub(crate) use foveal_registry::{egress, host_api, loader, registry, tokens};

pub mod computed;
pub mod context;
pub mod execution;
pub mod prompt;
pub mod session_name;
pub mod window;
