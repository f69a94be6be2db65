//! `foveal prompt`: the exact prompt the think step would send, without
//! calling a model ([`foveal_agent::commands::prompt`]).
//!
//! A host serving the same configuration and session answers it from its
//! loaded memex, skills and context window (with its own activity notes);
//! otherwise this process loads them.

use std::sync::Arc;

use crate::exit::Exit;
use foveal_agent::commands::prompt::{PromptOptions, PromptSignal};
use foveal_agent::commands::{self, Command, Parts};
use foveal_agent::config::Config;
use foveal_memex::privacy::PrivacyTags;

/// The signals `foveal prompt` can simulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SignalArg {
    /// A message from the user (`--message`).
    UserInput,
    /// The periodic heartbeat: no new input (the context is skipped).
    Heartbeat,
    /// A delegated sub-task's result (`--message`; the context is skipped).
    Delegation,
}

impl From<SignalArg> for PromptSignal {
    fn from(signal: SignalArg) -> Self {
        match signal {
            SignalArg::UserInput => Self::UserInput,
            SignalArg::Heartbeat => Self::Heartbeat,
            SignalArg::Delegation => Self::Delegation,
        }
    }
}

/// `foveal prompt`.
pub fn run(config: &Config, options: &PromptOptions) -> anyhow::Result<Exit> {
    if let Err(printed) = commands::prompt::check(config, options) {
        return Ok(printed.print()?);
    }
    // The session is named, so that a host serving another one leaves the
    // command here.
    let session = options
        .session
        .clone()
        .unwrap_or_else(|| config.agent.session.clone());
    let mut asked = options.clone();
    asked.session = Some(session.clone());
    if let Some(printed) =
        crate::agent::host_command(config, Some(&session), Command::Prompt(asked))?
    {
        return Ok(printed.print()?);
    }
    foveal_registry::tokens::configure(config.prompt.model.encoding);
    let memex = match crate::memex::open(config) {
        Ok(memex) => memex,
        Err(exit) => return Ok(exit),
    };
    let privacy = PrivacyTags::new(&config.privacy_tags);
    // The vectors computed so far; none is computed here.
    foveal_embed::service::attach_cached(&config.embedding, &config.data_dir, &memex, &privacy);
    let registry = Arc::new(crate::skills::open_registry(config)?);
    // The session's context window (component 3000), as saved.
    let window = match foveal_prompt::window::Window::open(
        &config.data_dir,
        &session,
        config.window,
        Arc::clone(&registry),
    ) {
        Ok(window) => window,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(Exit::Usage);
        }
    };
    let gate = match foveal_registry::egress::Gate::from_config(config) {
        Ok(gate) => Arc::new(gate),
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
    Ok(commands::prompt::run(parts, &window, options).print()?)
}
