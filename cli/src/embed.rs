//! `foveal memex embed`: every object's vector, up front, with progress.

use std::io::{IsTerminal as _, Write as _};
use std::time::Instant;

use crate::exit::Exit;
use foveal_agent::config::Config;
use foveal_embed::service::{embed_jobs, open_cache};
use foveal_embed::{EmbedKind, Recheck, plan};
use foveal_memex::privacy::PrivacyTags;

/// What `memex embed --json` prints.
#[derive(Debug, serde::Serialize)]
struct Report {
    objects: usize,
    embedded: usize,
    reused: usize,
    skipped: usize,
    from_file: usize,
    model: String,
    seconds: f64,
}

/// `foveal memex embed [--json]`.
pub fn run(config: &Config, json: bool) -> anyhow::Result<Exit> {
    let settings = &config.embedding;
    if settings.kind == EmbedKind::Off {
        eprintln!("error: {}", foveal_embed::EmbedError::Off);
        return Ok(Exit::Usage);
    }
    let memex = match crate::memex::open(config) {
        Ok(memex) => memex,
        Err(exit) => return Ok(exit),
    };
    let Some(cache) = open_cache(settings, &config.data_dir) else {
        return Ok(Exit::Usage);
    };
    if cache.loaded().cut_bytes > 0 {
        eprintln!(
            "warning: the embedding cache was damaged; {} vectors kept, the rest is embedded again",
            cache.loaded().records
        );
    }
    let remote = settings.kind == EmbedKind::OpenAi;
    let gate = if remote {
        match foveal_registry::egress::Gate::from_config(config) {
            Ok(gate) => Some(gate),
            Err(error) => {
                eprintln!("error: {error}");
                return Ok(Exit::Usage);
            }
        }
    } else {
        None
    };
    let privacy = PrivacyTags::new(&config.privacy_tags);
    let snapshot = memex.snapshot();
    let mut plan = plan(&snapshot, &privacy, &cache, remote, gate.as_ref());
    // Vectors of objects that became private since they were embedded.
    if let Err(error) = cache.remove(&plan.withdraw) {
        eprintln!("warning: {error}");
    }
    let started = Instant::now();
    let mut embedded = 0;
    if !plan.jobs.is_empty() {
        let embedder = match foveal_embed::open(settings, false) {
            Ok(embedder) => embedder,
            Err(error) => {
                eprintln!("error: {error}");
                return Ok(Exit::NotFound);
            }
        };
        let bar = if json || !std::io::stderr().is_terminal() {
            indicatif::ProgressBar::hidden()
        } else {
            indicatif::ProgressBar::new(plan.jobs.len() as u64)
        };
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg} [{bar:30}] {pos}/{len} · {per_sec} · ETA {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_message("embedding");
        // Each batch checked again against the memex as it is then.
        let mut recheck = Recheck::new(&memex, &privacy, &cache, remote, gate.as_ref(), &mut plan);
        let result = embed_jobs(
            &*embedder,
            &cache,
            &plan.jobs,
            settings.batch,
            &mut recheck,
            |done| {
                bar.set_position(done as u64);
                true
            },
        );
        bar.finish_and_clear();
        embedded = match result {
            Ok(done) => done,
            Err(error) => {
                eprintln!(
                    "error: {error}; the vectors computed so far are kept: run the command again to resume"
                );
                return Ok(Exit::NotFound);
            }
        };
        if let Err(error) = cache.compact(&plan.live) {
            eprintln!("warning: {error}");
        }
    }
    let report = Report {
        objects: plan.objects,
        embedded,
        reused: plan.reused,
        skipped: plan.skipped,
        from_file: plan.from_file,
        model: cache.model_id().to_owned(),
        seconds: started.elapsed().as_secs_f64(),
    };
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "{} objects: {} embedded, {} reused from the cache, {} skipped (private, or held back by the privacy gate), {} with :EMBEDDING:",
            report.objects, report.embedded, report.reused, report.skipped, report.from_file
        )?;
        if embedded > 0 {
            writeln!(
                out,
                "{:.1} s, {:.0} objects/s with {}",
                report.seconds,
                embedded as f64 / report.seconds.max(1e-9),
                report.model
            )?;
        }
        if let Some(path) = cache.path() {
            writeln!(out, "cache: {}", path.display())?;
        }
    }
    Ok(Exit::Ok)
}
