//! `foveal memex stats` and `foveal memex query`.

use std::io::Write as _;
use std::time::Instant;

use crate::cli::Exit;
use crate::config::Config;
use crate::memex::privacy::PrivacyTags;
use crate::memex::{Memex, ObjectRef, ObjectType, Query};

pub(crate) fn open(config: &Config) -> Result<Memex, Exit> {
    Memex::open(&config.memex_paths).map_err(|error| {
        eprintln!("error: {error}");
        Exit::NotFound
    })
}

/// The counts `memex stats` prints.
#[derive(Debug, serde::Serialize)]
struct Stats {
    objects: usize,
    files: usize,
    active_projects: usize,
    private_objects: usize,
    generation: u64,
    load_ms: f64,
    /// Resident memory of the process after loading, in MiB (Linux).
    resident_mib: Option<f64>,
    warnings: usize,
    failed: Vec<Failure>,
}

#[derive(Debug, serde::Serialize)]
struct Failure {
    path: String,
    error: String,
}

/// `foveal memex stats [--json]`.
pub fn stats(config: &Config, json: bool) -> anyhow::Result<Exit> {
    let started = Instant::now();
    let memex = match open(config) {
        Ok(memex) => memex,
        Err(exit) => return Ok(exit),
    };
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let snapshot = memex.snapshot();
    let privacy = PrivacyTags::new(&config.privacy_tags);
    let stats = Stats {
        objects: snapshot.len(),
        files: snapshot.files().count(),
        active_projects: snapshot.active_projects().len(),
        private_objects: snapshot
            .files()
            .map(|f| privacy.private_mask(f).iter().filter(|p| **p).count())
            .sum(),
        generation: snapshot.generation(),
        load_ms,
        resident_mib: resident_mib(),
        warnings: snapshot.files().map(|f| f.warnings.len()).sum(),
        failed: snapshot
            .failed()
            .iter()
            .map(|(path, error)| Failure {
                path: path.display().to_string(),
                error: error.to_string(),
            })
            .collect(),
    };
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &stats)?;
        writeln!(out)?;
    } else {
        writeln!(out, "objects          {}", stats.objects)?;
        writeln!(out, "files            {}", stats.files)?;
        writeln!(out, "active projects  {}", stats.active_projects)?;
        writeln!(out, "private objects  {}", stats.private_objects)?;
        writeln!(out, "generation       {}", stats.generation)?;
        writeln!(out, "load time        {:.1} ms", stats.load_ms)?;
        if let Some(mib) = stats.resident_mib {
            writeln!(out, "resident memory  {mib:.1} MiB")?;
        }
        writeln!(out, "warnings         {}", stats.warnings)?;
        writeln!(out, "failed files     {}", stats.failed.len())?;
        for failure in &stats.failed {
            writeln!(out, "  {}", failure.error)?;
        }
    }
    for file in snapshot.files() {
        for warning in &file.warnings {
            eprintln!(
                "warning: {}:{}: {}",
                file.path.display(),
                warning.line,
                warning.message
            );
        }
    }
    Ok(Exit::Ok)
}

/// The process's resident memory, from `/proc/self/statm` (Linux only).
fn resident_mib() -> Option<f64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: f64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: `sysconf` only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page as f64 / (1024.0 * 1024.0))
}

/// One object as `memex query --json` prints it.
#[derive(Debug, serde::Serialize)]
struct Found<'a> {
    id: &'a str,
    title: &'a str,
    todo: Option<&'a str>,
    tags: Vec<&'a str>,
    level: u16,
    parent: Option<&'a str>,
    file: String,
    line: u32,
}

impl<'a> Found<'a> {
    fn new(o: &ObjectRef<'a>) -> Self {
        Self {
            id: o.id(),
            title: o.title(),
            todo: o.todo(),
            tags: o.tags().collect(),
            level: o.level(),
            parent: o.parent().map(|p| p.id()),
            file: o.file().path.display().to_string(),
            line: o.line(),
        }
    }
}

/// `foveal memex query [--tag T] [--todo S] [--type headline] [--json]`.
pub fn query(
    config: &Config,
    tag: Option<String>,
    todo: Option<String>,
    kind: Option<&str>,
    json: bool,
) -> anyhow::Result<Exit> {
    let kind = match kind.map(|k| (k, ObjectType::parse(k))) {
        None => None,
        Some((_, Some(kind))) => Some(kind),
        Some((k, None)) => {
            eprintln!("error: unknown object type {k:?}; the types are: headline");
            return Ok(Exit::Usage);
        }
    };
    let memex = match open(config) {
        Ok(memex) => memex,
        Err(exit) => return Ok(exit),
    };
    let snapshot = memex.snapshot();
    let found = snapshot.query(&Query { tag, todo, kind });
    let mut out = std::io::stdout().lock();
    if json {
        let rows: Vec<Found<'_>> = found.iter().map(Found::new).collect();
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
    } else {
        for o in &found {
            let todo = o.todo().map(|t| format!("{t} ")).unwrap_or_default();
            let tags: Vec<&str> = o.tags().collect();
            let tags = if tags.is_empty() {
                String::new()
            } else {
                format!("  :{}:", tags.join(":"))
            };
            writeln!(
                out,
                "{}:{}  {}{}{}  [{}]",
                o.file().path.display(),
                o.line(),
                todo,
                o.title(),
                tags,
                o.id()
            )?;
        }
    }
    for (path, error) in snapshot.failed() {
        eprintln!("warning: {} not loaded: {error}", path.display());
    }
    Ok(Exit::Ok)
}
