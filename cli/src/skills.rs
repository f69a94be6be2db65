//! `foveal skill-list` and `foveal skill-source`.
//!
//! Both work without a running host: they build a registry from the plugin
//! folders, exactly as the host does at start, and answer from it.
//!
//! `skill-list` also says whether the host's built-in privacy filter stands
//! in for the `privacy` skill ([`foveal_registry::egress::skill_fallback`]): a line
//! under the table, and in JSON a `privacy_fallback` key on the `privacy`
//! row — a row of its own, with status `not loaded: …`, when no such skill
//! is loaded.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::exit::Exit;
use foveal_agent::config::Config;
use foveal_registry::registry::{Registry, Row, Snapshot};
use foveal_registry::watcher::PluginWatcher;

pub use foveal_agent::skills::{
    configured_registry, host_registry, new_registry, open_registry, registry_options,
};

/// `foveal skill-list [--json] [--watch] [--tools]`.
pub fn list(config: &Config, json: bool, watch: bool, tools: bool) -> anyhow::Result<Exit> {
    if watch && !config.plugins.dir.exists() {
        std::fs::create_dir_all(&config.plugins.dir).map_err(|e| {
            anyhow::anyhow!(
                "cannot create the plugins folder {} to watch it: {e}",
                config.plugins.dir.display()
            )
        })?;
        eprintln!(
            "created the plugins folder {}",
            config.plugins.dir.display()
        );
    }
    if !watch {
        let registry = open_registry(config)?;
        // Each `components` hook once, on an empty memex: a component at
        // an id the skill did not declare shows as a warning.
        foveal_prompt::prompt::components::probe_undeclared(
            &registry.snapshot(),
            &foveal_memex::view::SnapshotView::new(
                &foveal_memex::MemexSnapshot::default(),
                &foveal_memex::privacy::PrivacyTags::new(&config.privacy_tags),
            ),
        );
        let snapshot = registry.snapshot();
        if tools && json {
            // One JSON document: the skills' rows and the tools.
            let rows = display_rows(&snapshot);
            let serving_privacy = snapshot
                .get(foveal_registry::egress::SKILL)
                .map(|s| s.skill().path());
            let value = serde_json::json!({
                "skills": json_rows(&snapshot, rows, serving_privacy),
                "tools": tool_rows(&snapshot),
            });
            let mut out = std::io::stdout().lock();
            serde_json::to_writer_pretty(&mut out, &value)?;
            writeln!(out)?;
        } else {
            print_list(&snapshot, &registry, json, false)?;
            if tools {
                print_tools(&tool_rows(&snapshot))?;
            }
        }
        if config.agent.socket_path(&config.data_dir).exists() {
            // This list is of this process's own loads: a running host's
            // panics and quarantines are its own.
            eprintln!(
                "note: a host is running; its quarantined skills are shown by `foveal status`, not by this list (loaded afresh)"
            );
        }
        return Ok(Exit::Ok);
    }
    // Watch first, then scan: a library installed in between is seen by one
    // or the other (the registry skips a build it already has).
    let registry = Arc::new(new_registry(config)?);
    let _watcher = PluginWatcher::start(
        Arc::clone(&registry),
        Duration::from_millis(config.plugins.debounce_ms),
    )?;
    registry.scan();
    let snapshot = registry.snapshot();
    print_list(&snapshot, &registry, json, false)?;
    let mut seen = snapshot.generation();
    loop {
        let now = registry.wait_for_change(seen, Duration::from_secs(3600));
        if now > seen {
            seen = now;
            print_list(&registry.snapshot(), &registry, json, true)?;
        }
    }
}

/// One row of `skill-list --json`: the registry's row, and on the
/// `privacy` skill's row whether the host's built-in filter stands in for it.
#[derive(Debug, serde::Serialize)]
struct JsonRow {
    #[serde(flatten)]
    row: Row,
    #[serde(skip_serializing_if = "Option::is_none")]
    privacy_fallback: Option<bool>,
}

/// The rows as `skill-list --json` prints them: the `privacy` row carries
/// `privacy_fallback`; when no privacy skill serves, a row says so.
fn json_rows(snapshot: &Snapshot, rows: Vec<Row>, serving_privacy: Option<&Path>) -> Vec<JsonRow> {
    let fallback = foveal_registry::egress::skill_fallback(snapshot);
    let mut out: Vec<JsonRow> = rows
        .into_iter()
        .map(|row| {
            let is_privacy = row.name == foveal_registry::egress::SKILL
                && serving_privacy.is_some_and(|p| display_path(p) == row.path);
            JsonRow {
                privacy_fallback: is_privacy.then_some(fallback.is_some()),
                row,
            }
        })
        .collect();
    if serving_privacy.is_none() {
        out.push(JsonRow {
            row: Row {
                name: foveal_registry::egress::SKILL.to_owned(),
                version: None,
                priority: None,
                dependencies: Vec::new(),
                hooks: Vec::new(),
                isolation: String::new(),
                status: "not loaded: the host applies its built-in filter (privacy tags + secret patterns)"
                    .to_owned(),
                warnings: Vec::new(),
                path: PathBuf::new(),
            },
            privacy_fallback: Some(true),
        });
    }
    out
}

/// The snapshot's rows with their paths as shown.
fn display_rows(snapshot: &Snapshot) -> Vec<Row> {
    snapshot
        .rows()
        .into_iter()
        .map(|mut row| {
            row.path = display_path(&row.path);
            row
        })
        .collect()
}

/// Prints one snapshot: a table, pretty JSON, or (when watching) a
/// generation header before the table, or one compact JSON line.
fn print_list(
    snapshot: &Snapshot,
    registry: &Registry,
    json: bool,
    watching: bool,
) -> anyhow::Result<()> {
    let rows = display_rows(snapshot);
    let serving_privacy = snapshot
        .get(foveal_registry::egress::SKILL)
        .map(|s| s.skill().path());
    let mut out = std::io::stdout().lock();
    match (json, watching) {
        (true, false) => {
            serde_json::to_writer_pretty(&mut out, &json_rows(snapshot, rows, serving_privacy))?;
            writeln!(out)?;
        }
        (true, true) => {
            serde_json::to_writer(&mut out, &json_rows(snapshot, rows, serving_privacy))?;
            writeln!(out)?;
        }
        (false, watching) => {
            if watching {
                writeln!(out, "\n# generation {}", snapshot.generation())?;
            }
            write!(out, "{}", table(&rows, registry))?;
            if let Some(fallback) = foveal_registry::egress::skill_fallback(snapshot) {
                writeln!(
                    out,
                    "{}",
                    foveal_registry::egress::fallback_notice(&fallback)
                )?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// The human table: aligned columns, `-` for an empty cell.
pub fn table(rows: &[Row], registry: &Registry) -> String {
    const HEADERS: [&str; 8] = [
        "NAME",
        "VERSION",
        "PRIORITY",
        "DEPENDENCIES",
        "HOOKS",
        "FILE",
        "ISOLATION",
        "STATUS",
    ];
    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|row| {
            let or_dash = |s: String| if s.is_empty() { "-".to_owned() } else { s };
            [
                row.name.clone(),
                row.version.clone().unwrap_or_else(|| "-".to_owned()),
                row.priority
                    .map_or_else(|| "-".to_owned(), |p| p.to_string()),
                or_dash(row.dependencies.join(",")),
                or_dash(row.hooks.join(",")),
                row.path.display().to_string(),
                or_dash(row.isolation.clone()),
                std::iter::once(row.status.clone())
                    .chain(row.warnings.iter().map(|w| format!("warning: {w}")))
                    .collect::<Vec<_>>()
                    .join("; "),
            ]
        })
        .collect();
    let mut widths = HEADERS.map(str::len);
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let mut line = |cols: [&str; 8]| {
        let mut l = String::new();
        for (i, col) in cols.iter().enumerate() {
            if i + 1 == cols.len() {
                l.push_str(col);
            } else {
                l.push_str(&format!("{col:<width$}  ", width = widths[i]));
            }
        }
        text.push_str(l.trim_end());
        text.push('\n');
    };
    line(HEADERS);
    for row in &cells {
        line(std::array::from_fn(|i| row[i].as_str()));
    }
    if rows.is_empty() {
        let dirs: Vec<String> = registry
            .dirs()
            .iter()
            .map(|d| d.path.display().to_string())
            .collect();
        text.push_str(&format!(
            "(no skill libraries found in {})\n",
            dirs.join(", ")
        ));
    }
    text
}

/// One tool a skill declares, as `skill-list --tools` shows it.
#[derive(Debug, serde::Serialize)]
struct ToolRow {
    skill: String,
    name: String,
    category: String,
    description: String,
    /// Whether the host offers it (`false`: see `problem`).
    offered: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
}

/// The tools the host offers the model (its own, then the skills'), and
/// the declarations it leaves out, with why: `skill-list --tools`.
fn tool_rows(snapshot: &Snapshot) -> Vec<ToolRow> {
    use foveal_agent::tools::{ToolSource, builtins};
    let host = builtins();
    let offered = foveal_agent::skill_tools(snapshot, &host);
    let mut rows: Vec<ToolRow> = host
        .iter()
        .chain(&offered)
        .map(|t| ToolRow {
            skill: match &t.source {
                ToolSource::Builtin(_) => "(host)".to_owned(),
                ToolSource::Skill(skill) => skill.clone(),
            },
            name: t.name.clone(),
            category: t.category.to_string(),
            description: t.description.clone(),
            offered: true,
            problem: None,
        })
        .collect();
    // Declarations the host left out: asked again, to say why.
    for slot in snapshot.skills() {
        let skill = &slot.skill().info().name;
        if let Ok(declared) = slot.call(foveal_registry::registry::hooks::TOOLS, |f| f()) {
            for decl in declared.iter() {
                let name = decl.name.as_str();
                if offered
                    .iter()
                    .any(|t| t.name == name && t.source == ToolSource::Skill(skill.clone()))
                {
                    continue;
                }
                rows.push(ToolRow {
                    skill: skill.clone(),
                    name: name.to_owned(),
                    category: decl.category.to_string(),
                    description: decl.description.to_string(),
                    offered: false,
                    problem: Some(foveal_agent::tool_problem(decl, &host, &offered)),
                });
            }
        }
    }
    rows
}

/// The tools under the skills' table.
fn print_tools(rows: &[ToolRow]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "\nTOOLS")?;
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0);
    let skill_width = rows.iter().map(|r| r.skill.len()).max().unwrap_or(0);
    for row in rows {
        let tail = match &row.problem {
            None => row.description.clone(),
            Some(why) => format!("NOT OFFERED: {why}"),
        };
        writeln!(
            out,
            "{:<skill_width$}  {:<width$}  {:<9}  {tail}",
            row.skill, row.name, row.category
        )?;
    }
    Ok(())
}

/// `foveal skill-source NAME`.
pub fn source(config: &Config, name: &str) -> anyhow::Result<Exit> {
    if let Err(reason) = check_requested_name(name) {
        eprintln!("error: invalid skill name {name:?}: {reason}");
        return Ok(Exit::Usage);
    }
    let registry = open_registry(config)?;
    let snapshot = registry.snapshot();
    match snapshot.get(name) {
        Some(slot) => {
            let mut out = std::io::stdout().lock();
            out.write_all(slot.skill().source().as_bytes())?;
            Ok(Exit::Ok)
        }
        None => {
            let known = snapshot.names();
            if known.is_empty() {
                eprintln!(
                    "error: unknown skill `{name}`: no skills are loaded (see `foveal skill-list`)"
                );
            } else {
                eprintln!(
                    "error: unknown skill `{name}`; known skills: {}",
                    known.join(", ")
                );
            }
            Ok(Exit::NotFound)
        }
    }
}

/// A name given on the command line is a name, never a path.
fn check_requested_name(name: &str) -> Result<(), &'static str> {
    if name.contains('/') || name.contains('\\') || name.contains("..") {
        return Err("a skill name is not a path (no '/', '\\' or '..')");
    }
    if name.contains('\0') {
        return Err("contains a NUL byte");
    }
    foveal_registry::loader::check_skill_name(name)
}

/// A path relative to the working directory when it is under it: shorter
/// and stable across machines.
fn display_path(path: &Path) -> PathBuf {
    let Ok(cwd) = std::env::current_dir() else {
        return path.to_path_buf();
    };
    path.strip_prefix(&cwd)
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| path.to_path_buf())
}
