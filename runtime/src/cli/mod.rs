//! The `foveal` command line: argument parsing and the subcommands.
//!
//! Each subcommand lives in its own file and returns an [`Exit`]: what to
//! print has been printed, and the code says how it went.

pub mod skills;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::{Config, ConfigError, Overrides};

/// foveal — an agent host with hot-loadable skills.
///
/// foveal drives sense–think–act cycles for an LLM agent over a knowledge
/// base of Org-mode files. Everything that shapes the prompt is a skill: a
/// dynamic library dropped into the plugins folder and swapped while the
/// host runs.
#[derive(Debug, Parser)]
#[command(name = "foveal", version, about, long_about, max_term_width = 100)]
pub struct Cli {
    /// Configuration file (default: ./config/foveal.toml if present, else
    /// $XDG_CONFIG_HOME/foveal/foveal.toml, else built-in defaults).
    #[arg(long, global = true, value_name = "PATH", env = "FOVEAL_CONFIG")]
    pub config: Option<PathBuf>,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options shared by the commands that load skills.
#[derive(Debug, Clone, clap::Args)]
pub struct PluginArgs {
    /// The drop-in folder for skill libraries (default: ./plugins; config
    /// `plugins.dir`; env FOVEAL_PLUGINS).
    #[arg(long, value_name = "DIR")]
    pub plugins: Option<PathBuf>,

    /// Do not load the first-party skills from the folder of the foveal
    /// executable; only the drop-in folder (config `plugins.builtin`).
    #[arg(long)]
    pub no_builtin: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the skills: name, version, priority, dependencies, hooks, status
    /// and file, highest priority first. Libraries that were refused are
    /// listed with the reason.
    ///
    /// Works without a running host: it loads the plugin folders itself.
    SkillList {
        #[command(flatten)]
        plugins: PluginArgs,
        /// Print a JSON array of objects with the keys name, version,
        /// priority, dependencies, hooks, status and path.
        #[arg(long)]
        json: bool,
        /// Keep running: watch the plugin folders and print the list again
        /// (with its generation number) each time a skill is added,
        /// replaced or removed. With --json, one array per line. Stop with
        /// Ctrl-C.
        #[arg(long)]
        watch: bool,
    },
    /// Print the literate source a skill embeds (its README and src/).
    ///
    /// Exits 1 when no loaded skill has that name (the known ones are
    /// listed), 2 when the name is not a valid skill name.
    SkillSource {
        /// The skill's name, as `foveal skill-list` shows it.
        name: String,
        #[command(flatten)]
        plugins: PluginArgs,
    },
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok,
    /// The command ran but the answer is "no" (an unknown skill, say).
    NotFound,
    /// The command line or the configuration is wrong.
    Usage,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Self::Ok => 0,
            Self::NotFound => 1,
            Self::Usage => 2,
        }
    }
}

/// Resolves the configuration for a command: file, then environment, then
/// these flags.
pub fn load_config(
    cli_config: Option<&PathBuf>,
    plugins: &PluginArgs,
) -> Result<Config, ConfigError> {
    let overrides = Overrides {
        config: cli_config.cloned(),
        plugins: plugins.plugins.clone(),
        builtin: plugins.no_builtin.then_some(false),
    };
    Config::load(&overrides, &crate::config::process_env)
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<Exit> {
    match cli.command {
        Command::SkillList {
            plugins,
            json,
            watch,
        } => {
            let config = match load_config(cli.config.as_ref(), &plugins) {
                Ok(config) => config,
                Err(error) => return Ok(config_error(&error)),
            };
            skills::list(&config, json, watch)
        }
        Command::SkillSource { name, plugins } => {
            let config = match load_config(cli.config.as_ref(), &plugins) {
                Ok(config) => config,
                Err(error) => return Ok(config_error(&error)),
            };
            skills::source(&config, &name)
        }
    }
}

fn config_error(error: &ConfigError) -> Exit {
    eprintln!("error: {error}");
    Exit::Usage
}
