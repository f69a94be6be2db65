//! `foveal usage`: tokens and cost per model, cumulative, and the last
//! cycles, from the record in the data dir ([`foveal_prompt::prompt::cost`]).

use std::io::Write as _;

use crate::exit::Exit;
use foveal_agent::config::Config;
use foveal_prompt::prompt::cost::{FILE_NAME, Ledger};

/// How many of the last cycles the table shows.
const SHOWN_CYCLES: usize = 10;

/// The JSON `foveal usage --json` prints.
#[derive(Debug, serde::Serialize)]
struct Report<'a> {
    file: String,
    models: &'a std::collections::BTreeMap<String, foveal_prompt::prompt::cost::Totals>,
    total_cost: f64,
    cycles: usize,
    last_cycles: Vec<&'a foveal_prompt::prompt::cost::CycleRecord>,
}

/// `foveal usage [--json]`.
pub fn run(config: &Config, json: bool) -> anyhow::Result<Exit> {
    let ledger = match Ledger::load(&config.data_dir) {
        Ok(ledger) => ledger,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(Exit::NotFound);
        }
    };
    let file = config.data_dir.join(FILE_NAME).display().to_string();
    let mut out = std::io::stdout().lock();
    let cycles: u64 = ledger.models.values().map(|t| t.cycles).sum();
    if json {
        let report = Report {
            file,
            models: &ledger.models,
            total_cost: ledger.total_cost(),
            cycles: usize::try_from(cycles).unwrap_or(usize::MAX),
            last_cycles: ledger.cycles.iter().rev().take(SHOWN_CYCLES).collect(),
        };
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
        return Ok(Exit::Ok);
    }
    if ledger.models.is_empty() {
        writeln!(out, "no cycles recorded yet ({file})")?;
        return Ok(Exit::Ok);
    }
    writeln!(out, "usage recorded in {file}")?;
    writeln!(
        out,
        "{:<24} {:>8} {:>12} {:>12} {:>12} {:>12}",
        "MODEL", "CYCLES", "INPUT", "CACHED", "OUTPUT", "COST"
    )?;
    for (model, t) in &ledger.models {
        let cost = if t.unpriced_cycles == t.cycles {
            "-".to_owned()
        } else if t.unpriced_cycles > 0 {
            format!("{:.4}+", t.cost)
        } else {
            format!("{:.4}", t.cost)
        };
        writeln!(
            out,
            "{model:<24} {:>8} {:>12} {:>12} {:>12} {cost:>12}",
            t.cycles, t.input_tokens, t.cached_input_tokens, t.output_tokens
        )?;
    }
    writeln!(out, "total cost: {:.4}", ledger.total_cost())?;
    if ledger.models.values().any(|t| t.unpriced_cycles > 0) {
        writeln!(
            out,
            "(cycles of a model without [prices.<model>] in the config count tokens only: `-`, or `+` after a partial cost)"
        )?;
    }
    writeln!(out, "last cycles:")?;
    for c in ledger.cycles.iter().rev().take(SHOWN_CYCLES) {
        writeln!(
            out,
            "  at {} {}: {} in ({} cached), {} out, cost {}",
            c.at,
            c.model,
            c.input_tokens,
            c.cached_input_tokens,
            c.output_tokens,
            c.cost.map_or_else(|| "-".to_owned(), |c| format!("{c:.6}"))
        )?;
    }
    Ok(Exit::Ok)
}
