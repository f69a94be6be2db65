//! The `foveal` binary: parses the command line and runs it.

use std::process::ExitCode;

use clap::Parser as _;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = foveal::cli::Cli::parse();
    // Logs go to stderr. FOVEAL_LOG takes an env-filter directive
    // (`debug`, `foveal=trace`, …). The one-shot commands report everything
    // they need on stdout, so they log only what FOVEAL_LOG asks for.
    let filter = EnvFilter::try_from_env("FOVEAL_LOG").unwrap_or_else(|_| EnvFilter::new("off"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match foveal::cli::run(cli) {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
