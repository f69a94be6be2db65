//! `foveal skill check FILE` and `foveal skill install FILE`.
//!
//! `check` loads the library the way the host would once it is installed,
//! without installing it: a scratch registry whose first folder (the one
//! that wins) is a private scratch folder holding a copy of the library,
//! followed by the configuration's own plugin folders. The registry and
//! the loader make every check they make for the host — trust, SDK
//! version, layout, manifest, component ids against the installed skills,
//! `init` — and the answer is read back from the registry's snapshot, so
//! nothing here repeats a check. Then each hook is called once, through
//! the registry (the panic guard, the hook deadline), on the example memex,
//! with its time and the size of what it returned.
//!
//! `install` runs the same check and then does what plugins/README.md
//! describes: copy under a hidden name into the drop-in folder, then
//! rename into place, so a running host never sees half a file.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use abi_stable::std_types::RStr;
use serde::Serialize;

use crate::exit::Exit;
use foveal_agent::config::Config;
use foveal_memex::privacy::PrivacyTags;
use foveal_memex::view::{ComponentsCall, SnapshotView};
use foveal_registry::loader::{LoadError, SkillInfo};
use foveal_registry::registry::{Idle, hooks};

/// The example memex hooks are called on when `--memex` is not given: the
/// repository's `config/memex/example.org`, carried in the binary.
const EXAMPLE_MEMEX: &str = include_str!("../../config/memex/example.org");

/// A text with something for a `redact` hook to find.
const REDACT_SAMPLE: &str =
    "Mail alice@example.com about INT-1234; the key is sk-test-0000 and the PIN 4711.\n";

/// What a check found, step by step.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The library checked.
    pub file: PathBuf,
    /// The skill's name, when its manifest could be read.
    pub skill: Option<String>,
    /// The loader's checks, in the order it makes them.
    pub checks: Vec<Step>,
    /// One call of each hook.
    pub calls: Vec<Step>,
    /// An installed library providing the same skill, which `install
    /// --replace` replaces.
    pub replaces: Option<PathBuf>,
    /// Whether the host would load the library and call its hooks.
    pub ok: bool,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// What was checked or called.
    pub name: String,
    /// `ok`, `warn`, `fail` or `skip` (not reached, or not called).
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// How long it took, for a hook call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ms: Option<f64>,
    /// Bytes a hook returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<usize>,
}

/// How a step went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Passed.
    Ok,
    /// Passed, with something to look at.
    Warn,
    /// Failed: the host would refuse the library or a hook fails.
    Fail,
    /// Not reached or not called.
    Skip,
}

impl Step {
    pub(crate) fn new(name: &str, status: Status, detail: impl Into<String>) -> Self {
        Self {
            name: name.to_owned(),
            status,
            detail: detail.into(),
            ms: None,
            bytes: None,
        }
    }

    pub(crate) fn timed(mut self, elapsed: Duration, bytes: Option<usize>) -> Self {
        self.ms = Some(elapsed.as_secs_f64() * 1e3);
        self.bytes = bytes;
        self
    }
}

/// The loader's checks, in its order (docs/skill-abi.md, "What the host
/// checks at load").
const STEPS: [&str; 8] = [
    "file",
    "library",
    "sdk",
    "layout",
    "manifest",
    "component ids",
    "init",
    "dependencies",
];

/// The step a refusal belongs to.
fn failed_step(error: &LoadError) -> &'static str {
    match error {
        LoadError::Io { .. }
        | LoadError::Unsafe { .. }
        | LoadError::Untrusted { .. }
        | LoadError::NotAFile { .. } => "file",
        LoadError::Truncated { .. }
        | LoadError::Open { .. }
        | LoadError::NotASkill { .. }
        | LoadError::LoadLimit { .. }
        | LoadError::ByteLimit { .. }
        | LoadError::Unconfined { .. }
        | LoadError::NotPinned { .. }
        | LoadError::Hung { .. } => "library",
        LoadError::IncompatibleSdk { .. } | LoadError::IncompatibleAbiStable { .. } => "sdk",
        LoadError::Layout { .. } => "layout",
        LoadError::InvalidManifest { .. } | LoadError::Duplicate { .. } => "manifest",
        LoadError::ComponentConflict { .. } => "component ids",
        LoadError::InitFailed { .. } | LoadError::InitPanicked { .. } => "init",
    }
}

/// A folder of this process's own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    /// A new private folder under `parent`.
    fn new(parent: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt as _;
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if seq == 0 {
            clean_stale_scratch(parent);
        }
        let dir = parent.join(format!(".check-{}-{seq}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        Ok(Self(dir))
    }
}

/// Removes the scratch folders of checks whose process is gone (killed
/// before it could remove its own).
fn clean_stale_scratch(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(".check-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !foveal_registry::loader::process_alive(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The name a library gets in the drop-in folder: its own, with any
/// leading dots taken off (the registry skips hidden files).
fn installed_name(file: &Path) -> Option<String> {
    let name = file.file_name()?.to_str()?.trim_start_matches('.');
    (!name.is_empty()).then(|| name.to_owned())
}

/// Copies `from` to `dir/name` the way plugins/README.md says: a hidden
/// temporary file in the same folder, then a rename. The copy is mode
/// 0755 (owner-writable only), whatever the source's mode.
fn copy_into(from: &Path, dir: &Path, name: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let target = dir.join(name);
    let copied = (|| {
        let mut source = std::fs::File::open(from)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o755)
            .open(&temp)?;
        std::io::copy(&mut source, &mut file)?;
        file.sync_all()?;
        std::fs::rename(&temp, &target)
    })();
    if copied.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    copied.map(|()| target)
}

/// Checks the library at `file` as the host configured by `config` would
/// load it; `memex` is what the hooks are called on (default: the example
/// memex).
pub fn check_library(config: &Config, file: &Path, memex: &[PathBuf]) -> anyhow::Result<Report> {
    let mut report = Report {
        file: file.to_path_buf(),
        skill: None,
        checks: Vec::new(),
        calls: Vec::new(),
        replaces: None,
        ok: false,
    };
    let fail_at = |report: &mut Report, step: &str, detail: String| {
        for name in STEPS {
            let (status, text) = if name == step {
                (Status::Fail, detail.clone())
            } else if STEPS.iter().position(|s| *s == name) < STEPS.iter().position(|s| *s == step)
            {
                (Status::Ok, String::new())
            } else {
                (Status::Skip, "not reached".to_owned())
            };
            report.checks.push(Step::new(name, status, text));
        }
    };
    let meta = match std::fs::metadata(file) {
        Ok(meta) if meta.is_file() => meta,
        Ok(_) => {
            fail_at(&mut report, "file", "not a regular file".to_owned());
            return Ok(report);
        }
        Err(e) => {
            fail_at(&mut report, "file", format!("cannot read it: {e}"));
            return Ok(report);
        }
    };
    let Some(name) = installed_name(file) else {
        fail_at(&mut report, "file", "has no file name".to_owned());
        return Ok(report);
    };
    let extension = std::env::consts::DLL_EXTENSION;
    if Path::new(&name).extension().and_then(|e| e.to_str()) != Some(extension) {
        fail_at(
            &mut report,
            "file",
            format!(
                "the host loads only files ending in .{extension} from its plugins folder; this one would be ignored"
            ),
        );
        return Ok(report);
    }

    // The scratch folder comes first: like the drop-in folder, it wins
    // over the first-party skills, and the installed ones load before the
    // library checked, as they would be when it arrives.
    let mut options = crate::skills::registry_options(config);
    let scratch = Scratch::new(&options.shadow_dir)
        .or_else(|_| Scratch::new(&std::env::temp_dir()))
        .map_err(|e| anyhow::anyhow!("cannot create a scratch folder: {e}"))?;
    options.dirs.insert(
        0,
        foveal_registry::registry::PluginDir {
            path: scratch.0.clone(),
            first_party_only: false,
        },
    );
    let registry = crate::skills::configured_registry(config, options)?;
    registry.scan();
    let copy = copy_into(file, &scratch.0, &name)
        .map_err(|e| anyhow::anyhow!("cannot copy {} to check it: {e}", file.display()))?;
    registry.load_path(&copy);
    let snapshot = registry.snapshot();

    if let Some(Idle::Refused { error, .. }) = snapshot.idle().get(&copy) {
        let step = failed_step(error);
        let detail = if step == "file" {
            // The copy's mode is the one `install` gives; what is wrong is
            // the file itself (the error names the copy).
            error
                .reason()
                .replace(&copy.display().to_string(), &file.display().to_string())
        } else {
            error.reason()
        };
        fail_at(&mut report, step, detail);
        return Ok(report);
    }
    let Some(slot) = snapshot
        .skills()
        .find(|slot| slot.skill().path() == copy)
        .cloned()
    else {
        fail_at(
            &mut report,
            "library",
            "the registry neither loaded nor refused it".to_owned(),
        );
        return Ok(report);
    };
    let info = slot.skill().info().clone();
    report.skill = Some(info.name.clone());
    report.replaces = snapshot.idle().iter().find_map(|(path, idle)| match idle {
        Idle::Shadowed { name, .. } if *name == info.name => Some(path.clone()),
        _ => None,
    });
    report.checks = loaded_steps(
        &info,
        &meta,
        &snapshot,
        slot.missing_dependencies(),
        slot.skill().load_time(),
    );
    let memex_snapshot = example_snapshot(memex)?;
    report.calls = call_hooks(config, &snapshot, &slot, &info, &memex_snapshot);
    // Where it ran, as the host would run it, and what its hooks tried
    // and were refused there.
    let isolation = snapshot
        .rows()
        .into_iter()
        .find(|row| row.path == copy)
        .map(|row| row.isolation)
        .unwrap_or_default();
    report
        .checks
        .push(Step::new("isolation", Status::Ok, isolation));
    if let Some(cell) = slot.skill().cell_status() {
        report.checks.push(if cell.refused.is_empty() {
            Step::new(
                "refused",
                Status::Ok,
                "its cell refused nothing while its hooks ran",
            )
        } else {
            Step::new(
                "refused",
                Status::Warn,
                format!(
                    "its cell refused what its hooks (or its load) tried: {}; grant what it needs in [skills.{}] (docs/security.md)",
                    cell.refused.join("; "),
                    info.name
                ),
            )
        });
    }
    report.ok = report
        .checks
        .iter()
        .chain(&report.calls)
        .all(|s| s.status != Status::Fail);
    Ok(report)
}

fn loaded_steps(
    info: &SkillInfo,
    meta: &std::fs::Metadata,
    snapshot: &foveal_registry::registry::Snapshot,
    missing: &[String],
    load_time: Duration,
) -> Vec<Step> {
    let mut steps = vec![
        Step::new(
            "file",
            Status::Ok,
            format!(
                "{} KiB; copied as install copies it (mode 0755, owner-writable)",
                meta.len().div_ceil(1024)
            ),
        ),
        Step::new("library", Status::Ok, "exports a foveal skill root module"),
        Step::new(
            "sdk",
            Status::Ok,
            format!(
                "built against foveal-sdk {}; this host has {}",
                info.sdk_version,
                foveal_sdk::SDK_VERSION
            ),
        ),
        Step::new("layout", Status::Ok, "matches this host's root module"),
        Step::new(
            "manifest",
            Status::Ok,
            format!(
                "skill `{}` {}, priority {}: {}",
                info.name, info.version, info.priority, info.description
            ),
        ),
    ];
    let ids = if info.component_ids.is_empty() {
        if info.hooks.contains(&"components") {
            Step::new(
                "component ids",
                Status::Warn,
                "none declared: the host does not ask a skill that declares no id for components",
            )
        } else {
            Step::new("component ids", Status::Ok, "none declared")
        }
    } else {
        let installed = snapshot
            .skills()
            .filter(|s| s.skill().info().name != info.name)
            .count();
        Step::new(
            "component ids",
            Status::Ok,
            format!(
                "{} free (no other of the {installed} installed skills declares one)",
                join(&info.component_ids)
            ),
        )
    };
    steps.push(ids);
    steps.push(Step::new(
        "init",
        Status::Ok,
        format!("loaded in {:.2} ms", load_time.as_secs_f64() * 1e3),
    ));
    steps.push(if missing.is_empty() {
        Step::new(
            "dependencies",
            Status::Ok,
            if info.dependencies.is_empty() {
                "none".to_owned()
            } else {
                format!("{} loaded", info.dependencies.join(", "))
            },
        )
    } else {
        Step::new(
            "dependencies",
            Status::Fail,
            format!(
                "missing: {}; the host loads it but calls none of its hooks until they are installed",
                missing.join(", ")
            ),
        )
    });
    steps.push(Step::new(
        "hooks",
        if info.hooks.is_empty() {
            Status::Warn
        } else {
            Status::Ok
        },
        if info.hooks.is_empty() {
            "none: the skill loads but does nothing".to_owned()
        } else {
            info.hooks.join(", ")
        },
    ));
    steps
}

fn join(ids: &[u32]) -> String {
    ids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The memex hooks are called on: the paths given, else the example.
fn example_snapshot(
    paths: &[PathBuf],
) -> anyhow::Result<std::sync::Arc<foveal_memex::MemexSnapshot>> {
    if !paths.is_empty() {
        let memex = foveal_memex::Memex::open(paths).map_err(|e| anyhow::anyhow!("{e}"))?;
        return Ok(memex.snapshot());
    }
    let dir = Scratch::new(&std::env::temp_dir())
        .map_err(|e| anyhow::anyhow!("cannot write the example memex: {e}"))?;
    std::fs::write(dir.0.join("example.org"), EXAMPLE_MEMEX)?;
    let memex = foveal_memex::Memex::open(std::slice::from_ref(&dir.0))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(memex.snapshot())
}

/// Calls each hook of the skill once, through the registry.
fn call_hooks(
    config: &Config,
    skills: &foveal_registry::registry::Snapshot,
    slot: &foveal_registry::registry::Slot,
    info: &SkillInfo,
    memex: &foveal_memex::MemexSnapshot,
) -> Vec<Step> {
    let privacy = PrivacyTags::new(&config.privacy_tags);
    let view = SnapshotView::new(memex, &privacy);
    let skill_config = config.skill_config(&info.name).to_owned();
    let mut steps = Vec::new();
    for hook in &info.hooks {
        let started = Instant::now();
        let step = match *hook {
            "components" => {
                let call = ComponentsCall {
                    view: view.clone(),
                    signal: foveal_sdk::SignalKind::USER,
                    focus: None,
                    budget: None,
                    config: skill_config.clone(),
                    explain: false,
                    facts: foveal_registry::host_api::facts(None),
                };
                match slot.call_components(call) {
                    Ok(components) => {
                        let bytes = components.iter().map(|c| c.content.len()).sum();
                        let undeclared: Vec<u32> = components
                            .iter()
                            .map(|c| c.id)
                            .filter(|id| !info.component_ids.contains(id))
                            .collect();
                        let ids: Vec<u32> = components.iter().map(|c| c.id).collect();
                        let detail = format!("{} component(s) at {}", components.len(), join(&ids));
                        if undeclared.is_empty() {
                            Step::new("components", Status::Ok, detail)
                        } else {
                            Step::new(
                                "components",
                                Status::Warn,
                                format!(
                                    "{detail}; {} not declared in the manifest (component_ids): the host drops them",
                                    join(&undeclared)
                                ),
                            )
                        }
                        .timed(started.elapsed(), Some(bytes))
                    }
                    Err(error) => Step::new("components", Status::Fail, error.to_string())
                        .timed(started.elapsed(), None),
                }
            }
            "redact" => {
                let sample = REDACT_SAMPLE;
                match slot.call(hooks::REDACT, move |f| f(RStr::from_str(sample))) {
                    Ok(text) => Step::new(
                        "redact",
                        Status::Ok,
                        if text.as_str() == sample {
                            "a sample text came back unchanged".to_owned()
                        } else {
                            "a sample text came back changed".to_owned()
                        },
                    )
                    .timed(started.elapsed(), Some(text.len())),
                    Err(error) => Step::new("redact", Status::Fail, error.to_string())
                        .timed(started.elapsed(), None),
                }
            }
            "invoke" => match slot.call(hooks::INVOKE, |f| {
                f(RStr::from_str("foveal.check"), RStr::from_str("{}"))
            }) {
                Ok(text) => Step::new("invoke", Status::Ok, "method `foveal.check` answered")
                    .timed(started.elapsed(), Some(text.len())),
                Err(error) if is_panic_or_hang(&error) => {
                    Step::new("invoke", Status::Fail, error.to_string())
                        .timed(started.elapsed(), None)
                }
                Err(error) => Step::new(
                    "invoke",
                    Status::Ok,
                    format!("an unknown method is an error, as it should be: {error}"),
                )
                .timed(started.elapsed(), None),
            },
            "tools" => {
                let (step, tools) = crate::tool_call::check_tools(skills, slot, started);
                steps.push(step);
                for tool in tools {
                    steps.push(crate::tool_call::try_tool(
                        skills,
                        slot,
                        &tool,
                        &view,
                        &skill_config,
                    ));
                }
                continue;
            }
            "call_tool" | "run_tool" => continue,
            // The token-economics hooks are called on a whole prompt:
            // `foveal prompt` runs them.
            other => Step::new(
                other,
                Status::Skip,
                "called on a whole prompt: see `foveal prompt --json`",
            ),
        };
        steps.push(step);
    }
    steps
}

/// Whether a hook call failed by panicking or hanging (as opposed to
/// returning an error on purpose).
pub(crate) fn is_panic_or_hang(error: &foveal_registry::registry::Unavailable) -> bool {
    match error.reason() {
        foveal_registry::registry::Reason::Failed { error, .. } => {
            error.code == foveal_sdk::SkillError::PANIC
                || error.code == foveal_sdk::SkillError::UNAVAILABLE
        }
        foveal_registry::registry::Reason::Quarantined { .. } => true,
        _ => false,
    }
}

/// Prints a report; the exit says whether the host would load and serve.
fn print(report: &Report, json: bool) -> anyhow::Result<Exit> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, report)?;
        writeln!(out)?;
    } else {
        writeln!(out, "checking {}", report.file.display())?;
        for step in &report.checks {
            writeln!(out, "{}", line(step))?;
        }
        if !report.calls.is_empty() {
            writeln!(out, "hook calls (once each, on the example memex):")?;
            for step in &report.calls {
                writeln!(out, "{}", line(step))?;
            }
        }
        if let Some(path) = &report.replaces {
            writeln!(
                out,
                "note: skill `{}` is installed as {}; `foveal skill install --replace` replaces it",
                report.skill.as_deref().unwrap_or("?"),
                path.display()
            )?;
        }
        if report.ok {
            writeln!(out, "ok: the host would load it and call its hooks")?;
        } else {
            writeln!(
                out,
                "FAILED: the host would refuse it, or a hook fails (see above)"
            )?;
        }
    }
    out.flush()?;
    Ok(if report.ok { Exit::Ok } else { Exit::NotFound })
}

fn line(step: &Step) -> String {
    let status = match step.status {
        Status::Ok => "ok  ",
        Status::Warn => "WARN",
        Status::Fail => "FAIL",
        Status::Skip => "-   ",
    };
    let mut text = format!("  {status}  {:<14} {}", step.name, step.detail);
    match (step.ms, step.bytes) {
        (Some(ms), Some(bytes)) => text.push_str(&format!(" ({bytes} bytes in {ms:.2} ms)")),
        (Some(ms), None) => text.push_str(&format!(" ({ms:.2} ms)")),
        _ => {}
    }
    text.trim_end().to_owned()
}

/// `foveal skill check FILE [--memex PATH…] [--json]`.
pub fn check(config: &Config, file: &Path, memex: &[PathBuf], json: bool) -> anyhow::Result<Exit> {
    let report = check_library(config, file, memex)?;
    print(&report, json)
}

/// `foveal skill install FILE [--replace]`.
pub fn install(config: &Config, file: &Path, replace: bool) -> anyhow::Result<Exit> {
    let report = check_library(config, file, &[])?;
    if !report.ok {
        print(&report, false)?;
        eprintln!("error: not installed: fix what the check found, build again, and install again");
        return Ok(Exit::NotFound);
    }
    let name = installed_name(file).unwrap_or_default();
    let skill = report.skill.clone().unwrap_or_default();
    let dir = &config.plugins.dir;
    let target = dir.join(&name);
    // What is installed under that skill's name in the drop-in folder (a
    // first-party build beside the executable is not replaced: the
    // drop-in folder wins over it).
    let existing = installed_in(config, &skill);
    let mut removed = Vec::new();
    if let Some(path) = existing.iter().find(|p| **p != target).or(existing.first()) {
        if !replace {
            eprintln!(
                "error: skill `{skill}` is already installed as {}; pass --replace to replace it",
                path.display()
            );
            return Ok(Exit::NotFound);
        }
    } else if target.exists() && !replace {
        eprintln!(
            "error: {} exists; pass --replace to replace it",
            target.display()
        );
        return Ok(Exit::NotFound);
    }
    // A running host that watches another folder would never load it: say
    // so now, and install nothing.
    let status = host_status(config);
    // Both folders resolved here: the host may have recorded its own before
    // it existed (`..` and links not yet resolved).
    if let Some(watched) = status
        .as_ref()
        .and_then(|s| s.get("plugins_dir")?.as_str())
        .map(|w| foveal_agent::absolute_dir(Path::new(w)))
        && watched != foveal_agent::absolute_dir(dir)
    {
        let pid = status
            .as_ref()
            .and_then(|s| s.get("pid")?.as_u64())
            .map_or_else(String::new, |pid| format!(" (pid {pid})"));
        eprintln!(
            "error: not installed: the running host{pid} watches {}, not {}, so it would not load this build; install with --plugins {}, or stop that host first to install here for a later one",
            watched.display(),
            dir.display(),
            watched.display()
        );
        return Ok(Exit::NotFound);
    }
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(|e| {
            anyhow::anyhow!("cannot create the plugins folder {}: {e}", dir.display())
        })?;
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    }
    // The host loads nothing from a folder others could write to: say so
    // now rather than install a library no host will run.
    if let Ok(Err(fault)) = foveal_registry::trust::check_path(dir) {
        eprintln!(
            "error: not installed: the host refuses every library in {}: {fault}",
            dir.display()
        );
        return Ok(Exit::NotFound);
    }
    // The running host's registry generation before the rename: the build
    // it reports after a newer one is this one.
    let before = status.and_then(|s| s.get("registry_generation")?.as_u64());
    copy_into(file, dir, &name)
        .map_err(|e| anyhow::anyhow!("cannot install into {}: {e}", dir.display()))?;
    // Another file that provided the skill would now be a duplicate.
    for path in existing.iter().filter(|p| **p != target) {
        std::fs::remove_file(path)
            .map_err(|e| anyhow::anyhow!("installed, but cannot remove {}: {e}", path.display()))?;
        removed.push(path.clone());
    }
    let version = report
        .checks
        .iter()
        .find(|s| s.name == "manifest")
        .map(|s| s.detail.clone())
        .unwrap_or_default();
    println!("installed {} ({version})", target.display());
    for path in &removed {
        println!("removed {} (it provided the same skill)", path.display());
    }
    match before {
        Some(generation) => {
            println!(
                "a host is running: its watcher on {} sees the rename and loads the new build (calls in progress finish on the old one)",
                dir.display()
            );
            match wait_for_host(config, generation, &skill, &target) {
                HostAnswer::Serving(version) => println!(
                    "the running host now serves skill `{skill}` {version} (see `foveal status`)"
                ),
                HostAnswer::Refused(status) => {
                    println!("the running host did not take it: {status}");
                    return Ok(Exit::NotFound);
                }
                HostAnswer::Silent => println!(
                    "the running host has not reported the new build within {} s; `foveal status` shows when it does",
                    HOST_WAIT.as_secs()
                ),
            }
        }
        None => println!(
            "no host is running: `foveal run` loads it at start, and a running host watches {} and loads each new build at once",
            dir.display()
        ),
    }
    Ok(Exit::Ok)
}

/// How long `install` waits for a running host to report the new build.
const HOST_WAIT: Duration = Duration::from_secs(10);

/// What a running host made of an installed build.
enum HostAnswer {
    /// It serves the skill, at this version.
    Serving(String),
    /// It refused the file: its status line.
    Refused(String),
    /// It said nothing in time.
    Silent,
}

/// The running host's status, or none when no host answers.
fn host_status(config: &Config) -> Option<serde_json::Value> {
    use foveal_agent::control::{self, Reply, Request};
    let socket = config.agent.socket_path(&config.data_dir);
    if !socket.exists() {
        return None;
    }
    let mut found = None;
    let runtime = crate::agent::runtime().ok()?;
    runtime
        .block_on(control::request(&socket, &Request::Status, |reply| {
            if let Reply::Status { status } = reply {
                found = Some(status);
            }
            false
        }))
        .ok()?;
    found
}

/// Polls the running host until a registry generation after `before`
/// shows the skill serving from the file, or the file refused.
fn wait_for_host(config: &Config, before: u64, skill: &str, file: &Path) -> HostAnswer {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let deadline = Instant::now() + HOST_WAIT;
    while Instant::now() < deadline {
        if let Some(status) = host_status(config)
            && status["registry_generation"]
                .as_u64()
                .is_some_and(|g| g > before)
            && let Some(rows) = status["skills"].as_array()
        {
            // A refused build leaves the old one serving: look for the
            // refusal first.
            let state =
                |row: &serde_json::Value| row["status"].as_str().unwrap_or_default().to_owned();
            if let Some(row) = rows.iter().find(|row| {
                row["name"] == stem.as_str()
                    && (state(row).starts_with("refused") || state(row).starts_with("untrusted"))
            }) {
                return HostAnswer::Refused(state(row));
            }
            if let Some(row) = rows
                .iter()
                .find(|row| row["name"] == skill && state(row) == "loaded")
            {
                return HostAnswer::Serving(row["version"].as_str().unwrap_or("").to_owned());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    HostAnswer::Silent
}

/// The libraries in the drop-in folder whose skill is `skill`, by loading
/// that folder alone.
fn installed_in(config: &Config, skill: &str) -> Vec<PathBuf> {
    let mut options = crate::skills::registry_options(config);
    options.dirs.truncate(1);
    let Ok(registry) = crate::skills::host_registry(options) else {
        return Vec::new();
    };
    registry.scan();
    let snapshot = registry.snapshot();
    let mut paths: Vec<PathBuf> = snapshot
        .skills()
        .filter(|s| s.skill().info().name == skill)
        .map(|s| s.skill().path().to_path_buf())
        .collect();
    paths.extend(
        snapshot
            .idle()
            .iter()
            .filter_map(|(path, idle)| match idle {
                Idle::Shadowed { name, .. } if name == skill => Some(path.clone()),
                _ => None,
            }),
    );
    paths
}
