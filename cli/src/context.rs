//! `foveal context`: the context section the think step would send, and
//! why it holds what it holds ([`foveal_agent::commands::context`]).
//!
//! A host serving the same configuration answers it from its loaded memex
//! and skills; otherwise this process loads them.

use crate::exit::Exit;
use foveal_agent::commands::{self, Command, Parts};
use foveal_agent::config::Config;
pub use foveal_agent::explain::ContextOptions;
use foveal_memex::privacy::PrivacyTags;
use foveal_registry::egress::Gate;

/// `foveal context`.
pub fn run(config: &Config, options: &ContextOptions) -> anyhow::Result<Exit> {
    if let Err(printed) = commands::context::check(options) {
        return Ok(printed.print()?);
    }
    if let Some(printed) =
        crate::agent::host_command(config, None, Command::Context(options.clone()))?
    {
        return Ok(printed.print()?);
    }
    let memex = match crate::memex::open(config) {
        Ok(memex) => memex,
        Err(exit) => return Ok(exit),
    };
    let registry = std::sync::Arc::new(crate::skills::open_registry(config)?);
    let privacy = PrivacyTags::new(&config.privacy_tags);
    // The vectors computed so far (`foveal memex embed`, `foveal run`);
    // none is computed here: a command never waits for a model.
    foveal_embed::service::attach_cached(&config.embedding, &config.data_dir, &memex, &privacy);
    let gate = match Gate::from_config(config) {
        Ok(gate) => std::sync::Arc::new(gate),
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(Exit::Usage);
        }
    };
    let snapshot = memex.snapshot();
    let parts = Parts {
        config,
        registry: &registry,
        memex: &snapshot,
        privacy: &privacy,
        gate: &gate,
    };
    Ok(commands::context::run(parts, options).print()?)
}
