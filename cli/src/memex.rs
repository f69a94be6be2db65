//! `foveal memex stats` and `foveal memex query`.
//!
//! Both are local listings, for the user's eyes, and still leave private
//! objects out unless `--include-private`: a listing is pasted into a bug
//! report, a chat, a terminal someone else watches. Without the flag,
//! `query` lists no private object (its title, tags, id, file) and names
//! no private file that failed to load, and `stats` names no such file
//! and shows no warning about a private object or a file private as a
//! whole (a duplicate `:ID:` warning quotes the id); each says how many
//! it hid (`query` on stderr, so that its stdout stays one object a line,
//! or a JSON array). A file that failed to load is private when its text
//! names a privacy tag — the privacy gate's rule for such files
//! ([`PrivacyTags::failed_text_is_private`]). A file that failed before
//! it could be read (too large, unreadable, not a regular file) has no
//! text to judge: `stats` (and `foveal check`) name it, since its name
//! may be the user's only clue to what went wrong; `query`, a listing of
//! objects, does not, and counts it.

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use crate::exit::Exit;
use foveal_agent::config::Config;
use foveal_memex::privacy::PrivacyTags;
use foveal_memex::{Memex, MemexFile, MemexSnapshot, ObjectRef, ObjectType, Query};

/// Opens the configured memex for this process: its memory is left to
/// the process's end ([`Memex::free_at_exit`]).
pub(crate) fn open(config: &Config) -> Result<Memex, Exit> {
    let memex = Memex::open_with(&config.memex_paths, config.memex.clone()).map_err(|error| {
        eprintln!("error: {error}");
        Exit::NotFound
    })?;
    memex.free_at_exit();
    Ok(memex)
}

/// The counts `memex stats` prints.
#[derive(Debug, serde::Serialize)]
struct Stats {
    objects: usize,
    files: usize,
    /// The outermost active projects, found as the awareness outline finds
    /// them (`awareness.projects`; over the visible objects unless
    /// `--include-private`).
    active_projects: usize,
    /// How many of them each rule found.
    active_projects_by_rule: std::collections::BTreeMap<&'static str, usize>,
    private_objects: usize,
    generation: u64,
    load_ms: f64,
    /// Resident memory of the process after loading, in MiB (Linux).
    resident_mib: Option<f64>,
    warnings: usize,
    failed: Vec<Failure>,
    /// Private files that failed to load, not in `failed` (without
    /// `--include-private`).
    failed_private_hidden: usize,
    /// Warnings about private objects (or files private as a whole), not
    /// shown (without `--include-private`).
    warnings_private_hidden: usize,
}

#[derive(Debug, serde::Serialize)]
struct Failure {
    path: String,
    error: String,
}

/// Whether the file at `path`, which failed to load, is private as a
/// whole: its text, when it was read, names a privacy tag.
pub(crate) fn failed_is_private(
    snapshot: &MemexSnapshot,
    privacy: &PrivacyTags,
    path: &Path,
) -> bool {
    snapshot
        .failed_texts()
        .any(|(failed, text)| failed == path && privacy.failed_text_is_private(text))
}

/// Whether the file at `path`, which failed to load, was read at all (its
/// text is known): one too large, unreadable or not a regular file was
/// not, and whether it is private is unknown.
fn failed_was_read(snapshot: &MemexSnapshot, path: &Path) -> bool {
    snapshot.failed_texts().any(|(failed, _)| failed == path)
}

/// `n` of `what` (`1 private object`, `2 private objects`).
fn counted(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// `foveal memex stats [--include-private] [--json]`.
pub fn stats(config: &Config, include_private: bool, json: bool) -> anyhow::Result<Exit> {
    let started = Instant::now();
    let memex = match open(config) {
        Ok(memex) => memex,
        Err(exit) => return Ok(exit),
    };
    let load_ms = started.elapsed().as_secs_f64() * 1e3;
    let snapshot = memex.snapshot();
    let privacy = PrivacyTags::new(&config.privacy_tags);
    let shown = |path: &Path| include_private || !failed_is_private(&snapshot, &privacy, path);
    let failed: Vec<Failure> = snapshot
        .failed()
        .iter()
        .filter(|(path, _)| shown(path.as_path()))
        .map(|(path, error)| Failure {
            path: path.display().to_string(),
            error: error.to_string(),
        })
        .collect();
    // The warnings that may be shown.
    let warned: Vec<_> = snapshot
        .files()
        .flat_map(|f| {
            let file: &MemexFile = f;
            let whole = privacy.file_is_private(file);
            let mask = privacy.private_mask(file);
            file.warnings
                .iter()
                .filter(move |w| include_private || !(whole || private_line(file, &mask, w.line)))
                .map(move |w| (&file.path, w))
        })
        .collect();
    let warnings: usize = snapshot.files().map(|f| f.warnings.len()).sum();
    // The awareness outline's rules, over what it is lent.
    let lent = if include_private {
        PrivacyTags::default()
    } else {
        privacy.clone()
    };
    let projects =
        foveal_prompt::context::count_projects(&snapshot, &lent, &config.awareness.projects);
    let stats = Stats {
        objects: snapshot.len(),
        files: snapshot.files().count(),
        active_projects: projects.total,
        active_projects_by_rule: projects
            .by_rule
            .iter()
            .map(|(rule, n)| (rule.name(), *n))
            .collect(),
        private_objects: snapshot
            .files()
            .map(|f| privacy.private_mask(f).iter().filter(|p| **p).count())
            .sum(),
        generation: snapshot.generation(),
        load_ms,
        resident_mib: resident_mib(),
        warnings,
        failed_private_hidden: snapshot.failed().len() - failed.len(),
        warnings_private_hidden: warnings - warned.len(),
        failed,
    };
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &stats)?;
        writeln!(out)?;
    } else {
        writeln!(out, "objects          {}", stats.objects)?;
        writeln!(out, "files            {}", stats.files)?;
        let by_rule: Vec<String> = projects
            .by_rule
            .iter()
            .map(|(rule, n)| format!("{n} by {}", rule.name()))
            .collect();
        writeln!(
            out,
            "active projects  {}{}",
            stats.active_projects,
            if by_rule.is_empty() {
                String::new()
            } else {
                format!(" ({})", by_rule.join(", "))
            }
        )?;
        writeln!(out, "private objects  {}", stats.private_objects)?;
        writeln!(out, "generation       {}", stats.generation)?;
        writeln!(out, "load time        {:.1} ms", stats.load_ms)?;
        if let Some(mib) = stats.resident_mib {
            writeln!(out, "resident memory  {mib:.1} MiB")?;
        }
        writeln!(
            out,
            "warnings         {}{}",
            stats.warnings,
            hidden_note(stats.warnings_private_hidden, "about private objects")
        )?;
        writeln!(
            out,
            "failed files     {}{}",
            stats.failed.len() + stats.failed_private_hidden,
            hidden_note(stats.failed_private_hidden, "private")
        )?;
        for failure in &stats.failed {
            writeln!(out, "  {}", failure.error)?;
        }
    }
    for (path, warning) in warned {
        eprintln!(
            "warning: {}:{}: {}",
            path.display(),
            warning.line,
            warning.message
        );
    }
    Ok(Exit::Ok)
}

/// Whether `line` of `file` is in the section of a private object
/// (`mask`: [`PrivacyTags::private_mask`]) — its headline (a duplicate
/// `:ID:`) or a line below it (a planning line Org would not read): a
/// warning there tells where a private object is and what it holds.
fn private_line(file: &MemexFile, mask: &[bool], line: u32) -> bool {
    let at = file.objects.partition_point(|o| o.headline.line <= line);
    at > 0 && mask.get(at - 1).copied().unwrap_or(true)
}

/// ` (N WHAT, not shown: --include-private shows them)`, or nothing.
fn hidden_note(hidden: usize, what: &str) -> String {
    match hidden {
        0 => String::new(),
        n => format!(" ({n} {what}, not shown: --include-private shows them)"),
    }
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

/// What `memex query` looks for.
#[derive(Debug, Default)]
pub struct QueryArgs {
    /// An own tag (`--tag`).
    pub tag: Option<String>,
    /// A TODO state (`--todo`).
    pub todo: Option<String>,
    /// An object type (`--type`).
    pub kind: Option<String>,
    /// List private objects too (`--include-private`).
    pub include_private: bool,
}

/// `foveal memex query [--tag T] [--todo S] [--type headline]
/// [--include-private] [--json]`.
pub fn query(config: &Config, args: QueryArgs, json: bool) -> anyhow::Result<Exit> {
    let QueryArgs {
        tag,
        todo,
        kind,
        include_private,
    } = args;
    let kind = match kind.as_deref().map(|k| (k, ObjectType::parse(k))) {
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
    let privacy = PrivacyTags::new(&config.privacy_tags);
    let all = snapshot.query(&Query { tag, todo, kind });
    let matched = all.len();
    let found: Vec<ObjectRef<'_>> = all
        .into_iter()
        .filter(|o| include_private || !privacy.is_private(*o))
        .collect();
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
    let mut failed_hidden = 0;
    let mut unread_hidden = 0;
    for (path, error) in snapshot.failed() {
        if !include_private && failed_is_private(&snapshot, &privacy, path) {
            failed_hidden += 1;
        } else if !include_private && !failed_was_read(&snapshot, path) {
            // Never read: whether it is private is unknown. `memex stats`
            // and `foveal check` name it (it may be the only clue).
            unread_hidden += 1;
        } else {
            // The error names the file.
            eprintln!("warning: not loaded: {error}");
        }
    }
    let hidden = matched - found.len();
    if hidden > 0 || failed_hidden > 0 || unread_hidden > 0 {
        let mut parts = Vec::new();
        if hidden > 0 {
            parts.push(format!("{} hidden", counted(hidden, "private object")));
        }
        if failed_hidden > 0 {
            parts.push(format!(
                "{} that failed to load not named",
                counted(failed_hidden, "private file")
            ));
        }
        if unread_hidden > 0 {
            parts.push(format!(
                "{} that could not be read not named (`foveal memex stats` names it)",
                counted(unread_hidden, "file")
            ));
        }
        eprintln!("note: {} (--include-private shows them)", parts.join("; "));
    }
    Ok(Exit::Ok)
}

/// `foveal memex index`: the private-text index made current.
pub fn index(config: &Config, json: bool) -> anyhow::Result<Exit> {
    use std::io::IsTerminal as _;
    let started = Instant::now();
    let gate = match foveal_registry::egress::Gate::from_config(config) {
        Ok(gate) => gate,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(Exit::Usage);
        }
    };
    let spinner = if json || !std::io::stderr().is_terminal() {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new_spinner()
    };
    spinner.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    spinner.set_message("reading the memex");
    let memex = match open(config) {
        Ok(memex) => memex,
        Err(exit) => {
            spinner.finish_and_clear();
            return Ok(exit);
        }
    };
    let snapshot = memex.snapshot();
    spinner.set_message(format!(
        "checking the index against {} files, building the matcher if it is not of them",
        snapshot.files().count()
    ));
    let report = gate.index(&snapshot);
    spinner.finish_and_clear();
    let report = match report {
        Ok(report) => report,
        Err(message) => {
            eprintln!("error: {message}");
            return Ok(Exit::NotFound);
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer(
            &mut out,
            &serde_json::json!({
                "path": report.path,
                "state": report.state.as_str(),
                "keys": report.keys,
                "bytes": report.bytes,
                "files": snapshot.files().count(),
                "seconds": seconds,
            }),
        )?;
        writeln!(out)?;
    } else {
        let what = match report.state {
            foveal_registry::egress::IndexState::Current => "current: built from these files",
            foveal_registry::egress::IndexState::Written => "written",
        };
        writeln!(
            out,
            "{}: {what} ({} keys, {:.1} MiB, {:.1} s)",
            report.path.display(),
            report.keys,
            report.bytes as f64 / 1048576.0,
            seconds
        )?;
    }
    Ok(Exit::Ok)
}
