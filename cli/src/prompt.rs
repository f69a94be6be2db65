//! `foveal prompt`: the exact prompt the think step would send, without
//! calling a model ([`foveal_agent::commands::prompt`]).
//!
//! A host serving the same configuration and session answers it from its
//! loaded memex, skills and context window (with its own activity notes);
//! otherwise this process loads them.

use std::sync::Arc;

use crate::exit::Exit;
use foveal_agent::commands::prompt::{PromptOptions, PromptSignal};
use foveal_agent::commands::{self, Command};
use foveal_agent::config::Config;

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
    let loaded = match crate::context::Loaded::open(config)? {
        Ok(loaded) => loaded,
        Err(exit) => return Ok(exit),
    };
    // The session's context window (component 3000), as saved.
    let window = match foveal_prompt::window::Window::open(
        &config.data_dir,
        &session,
        config.window,
        Arc::clone(&loaded.registry),
    ) {
        Ok(window) => window,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(Exit::Usage);
        }
    };
    loaded.run(config, |parts| {
        commands::prompt::run(parts, &window, options)
    })
}
