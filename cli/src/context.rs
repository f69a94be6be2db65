//! `foveal context`: the context section the think step would send, and
//! why it holds what it holds ([`foveal_agent::commands::context`]).
//!
//! A host serving the same configuration answers it from its loaded memex
//! and skills; otherwise this process loads them.

use std::sync::Arc;

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
    match Loaded::open(config)? {
        Ok(loaded) => loaded.run(config, |parts| commands::context::run(parts, options)),
        Err(exit) => Ok(exit),
    }
}

/// What `context` and `prompt` load when no host answers for them.
pub(crate) struct Loaded {
    memex: foveal_memex::Memex,
    pub(crate) registry: Arc<foveal_registry::registry::Registry>,
    privacy: PrivacyTags,
    gate: Arc<Gate>,
}

impl Loaded {
    /// The memex (with the vectors computed so far: `foveal memex embed`,
    /// `foveal run`; none is computed here, a command never waits for a
    /// model), the skills and the gate of `config`; the exit when one of
    /// them cannot be had (said on stderr).
    pub(crate) fn open(config: &Config) -> anyhow::Result<Result<Self, Exit>> {
        let memex = match crate::memex::open(config) {
            Ok(memex) => memex,
            Err(exit) => return Ok(Err(exit)),
        };
        let registry = Arc::new(crate::skills::open_registry(config)?);
        let privacy = PrivacyTags::new(&config.privacy_tags);
        foveal_embed::service::attach_cached(&config.embedding, &config.data_dir, &memex, &privacy);
        let gate = match Gate::from_config(config) {
            Ok(gate) => Arc::new(gate),
            Err(error) => {
                eprintln!("error: {error}");
                return Ok(Err(Exit::Usage));
            }
        };
        Ok(Ok(Self {
            memex,
            registry,
            privacy,
            gate,
        }))
    }

    /// Prints what `command` prints on these parts, and gives its exit.
    pub(crate) fn run(
        &self,
        config: &Config,
        command: impl FnOnce(Parts<'_>) -> commands::Printed,
    ) -> anyhow::Result<Exit> {
        let snapshot = self.memex.snapshot();
        let parts = Parts {
            config,
            registry: &self.registry,
            memex: &snapshot,
            privacy: &self.privacy,
            gate: &self.gate,
        };
        Ok(command(parts).print()?)
    }
}
