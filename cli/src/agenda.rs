//! `foveal agenda`: what is due, by Org's rules, over the visible memex.

use std::io::Write;

use foveal_agent::agenda;
use foveal_agent::config::Config;
use foveal_memex::privacy::PrivacyTags;

use crate::exit::Exit;

/// Prints the agenda of `days` days from `today` (default: the local
/// date).
pub fn run(config: &Config, today: Option<&str>, days: u32, json: bool) -> anyhow::Result<Exit> {
    let today = match today.map(agenda::parse_date).transpose() {
        Ok(day) => day.unwrap_or_else(agenda::today),
        Err(error) => {
            eprintln!("error: --today: {error}");
            return Ok(Exit::Usage);
        }
    };
    let options = match agenda::options(config.skill_config("agenda")) {
        Ok(options) => options,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(Exit::Usage);
        }
    };
    let memex = match crate::memex::open(config) {
        Ok(memex) => memex,
        Err(exit) => return Ok(exit),
    };
    let snapshot = memex.snapshot();
    let privacy = PrivacyTags::new(&config.privacy_tags);
    let started = std::time::Instant::now();
    let entries = foveal_memex::agenda::agenda(&snapshot, &privacy, today, days, &options);
    tracing::debug!(
        target: "foveal::cli::agenda",
        "{} entries of {days} days over {} objects in {:.3} ms",
        entries.len(),
        snapshot.len(),
        started.elapsed().as_secs_f64() * 1000.0
    );
    let mut out = std::io::stdout().lock();
    if json {
        let rows: Vec<agenda::Row> = entries
            .iter()
            .map(|(e, o)| agenda::Row::new(e, *o))
            .collect();
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
    } else {
        out.write_all(agenda::text(&entries, today, days).as_bytes())?;
    }
    for (path, error) in snapshot.failed() {
        if !crate::memex::failed_is_private(&snapshot, &privacy, path) {
            eprintln!("warning: not loaded: {error}");
        }
    }
    Ok(Exit::Ok)
}
