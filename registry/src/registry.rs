//! The skill registry: an immutable snapshot of the loaded skills, published
//! through `arc-swap`, and the one path every hook call goes through.
//!
//! Readers take a snapshot ([`Registry::snapshot`]) and use it to the end of
//! their work; they never block and never see a half-updated registry. A
//! cycle that started on one snapshot finishes on it even if a new build is
//! installed meanwhile: the old code stays mapped (libraries are never
//! unloaded) and the snapshot keeps it reachable.
//!
//! Writers (the initial scan and the plugin watcher) build a new snapshot
//! from the current one under a mutex and publish it whole, with the
//! generation number bumped.
//!
//! # Example
//!
//! ```no_run
//! use foveal_registry::registry::{hooks, Registry, RegistryOptions};
//!
//! let registry = Registry::new(RegistryOptions::default()).unwrap();
//! registry.scan();
//! let snapshot = registry.snapshot();
//! let redacted = match snapshot.call("privacy", hooks::REDACT, |redact| {
//!     redact("some text".into())
//! }) {
//!     Ok(text) => text.into_string(),
//!     // The fallback is written by the caller, explicitly (seed `fboundp`).
//!     Err(unavailable) => {
//!         tracing::warn!("{unavailable}; using the host's own filter");
//!         "some text".to_owned()
//!     }
//! };
//! # let _ = redacted;
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use abi_stable::std_types::{RErr, ROk, RResult};
use arc_swap::ArcSwap;
use foveal_sdk::{SkillError, SkillModRef};

use crate::isolation::{IsolationPolicy, Where};
pub use crate::loader::ComponentPolicy;
use crate::loader::{Backend, CellPlan, FileIdentity, LoadError, Loaded, Loader, Opened};

/// Selects one hook of the root module, with its function type.
#[derive(Debug, Clone, Copy)]
pub struct Hook<F> {
    /// The hook's name, as listed by `skill-list`.
    pub name: &'static str,
    get: fn(&SkillModRef) -> Option<F>,
    /// The same hook for a skill in a cell: a function of the same type
    /// that carries the call to the cell ([`foveal_cell::lend`]).
    trampoline: F,
}

/// The hooks a skill may implement.
pub mod hooks {
    use super::Hook;
    use foveal_cell::lend;
    use foveal_sdk::{
        BudgetFn, CallToolFn, ComponentsFn, InvokeFn, PrefixFn, RedactFn, RunToolFn, ToolsFn,
    };

    /// `components(request) -> Vec<Component>`.
    pub const COMPONENTS: Hook<ComponentsFn> = Hook {
        name: "components",
        get: |m| m.components(),
        trampoline: lend::components,
    };
    /// `redact(text) -> text`.
    pub const REDACT: Hook<RedactFn> = Hook {
        name: "redact",
        get: |m| m.redact(),
        trampoline: lend::redact,
    };
    /// `invoke(method, args_json) -> json`.
    pub const INVOKE: Hook<InvokeFn> = Hook {
        name: "invoke",
        get: |m| m.invoke(),
        trampoline: lend::invoke,
    };
    /// `prefix(request) -> Prefix` (token economics, seed 003 contract 1).
    pub const PREFIX: Hook<PrefixFn> = Hook {
        name: "prefix",
        get: |m| m.prefix().flatten(),
        trampoline: lend::prefix,
    };
    /// `budget(request) -> BudgetPlan` (token economics, seed 003 contract 3).
    pub const BUDGET: Hook<BudgetFn> = Hook {
        name: "budget",
        get: |m| m.budget().flatten(),
        trampoline: lend::budget,
    };
    /// `tools() -> Vec<ToolDecl>`: the tools a skill offers the model.
    pub const TOOLS: Hook<ToolsFn> = Hook {
        name: "tools",
        get: |m| m.tools().flatten(),
        trampoline: lend::tools,
    };
    /// `call_tool(name, args_json) -> text`: the form before `run_tool`.
    pub const CALL_TOOL: Hook<CallToolFn> = Hook {
        name: "call_tool",
        get: |m| m.call_tool().flatten(),
        trampoline: lend::call_tool,
    };
    /// `run_tool(&ToolCallRequest) -> text`: the tool lent the memex view,
    /// the focus and the skill's configuration (SDK 0.2.1).
    pub const RUN_TOOL: Hook<RunToolFn> = Hook {
        name: "run_tool",
        get: |m| m.run_tool().flatten(),
        trampoline: lend::run_tool,
    };
}

/// Why a hook call did not produce a value. Every caller handles this by
/// taking its documented fallback; none of these is a crash.
///
/// One pointer wide: the reason lives in a box, so that the `Result` of a
/// hook call is no bigger than its value and the happy path moves nothing
/// extra (it made the call path 7 ns slower when the reason was inline).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(transparent)]
pub struct Unavailable(Box<Reason>);

impl Unavailable {
    /// Why.
    pub fn reason(&self) -> &Reason {
        &self.0
    }

    /// Why, by value.
    pub fn into_reason(self) -> Reason {
        *self.0
    }

    /// True when the skill or hook is simply absent (as opposed to present
    /// but failing or quarantined).
    pub fn is_not_loaded(&self) -> bool {
        matches!(*self.0, Reason::NotLoaded { .. } | Reason::NoHook { .. })
    }

    /// Says a hook that failed ([`Reason::Failed`]) on stderr, once per
    /// skill, hook and cause in this process, and notes it for `foveal
    /// prompt --json` ([`crate::skill_errors`]); true when the reason is a
    /// failure. For the callers that take a hook's fallback because of an
    /// error the skill returned: a panic, a dead or hung cell and an
    /// abandoned call were noted by the registry already, so they are not
    /// said twice. The other reasons (not loaded, no such hook, waiting for
    /// a dependency, quarantined) are not failures of this call: false.
    pub fn say_failure(&self) -> bool {
        match &*self.0 {
            Reason::Failed { skill, hook, error } => {
                crate::skill_errors::say(skill, hook, error);
                true
            }
            _ => false,
        }
    }
}

impl From<Reason> for Unavailable {
    fn from(reason: Reason) -> Self {
        Self(Box::new(reason))
    }
}

/// The reasons a hook call can be [`Unavailable`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    /// No skill of that name is loaded.
    #[error("skill `{skill}` is not loaded")]
    NotLoaded {
        /// The skill asked for.
        skill: String,
    },
    /// The skill is loaded but does not implement the hook.
    #[error("skill `{skill}` does not implement the `{hook}` hook")]
    NoHook {
        /// The skill.
        skill: String,
        /// The hook.
        hook: &'static str,
    },
    /// The skill is loaded but a skill it depends on is not.
    #[error("skill `{skill}` is waiting for missing dependencies: {}", missing.join(", "))]
    MissingDependency {
        /// The skill.
        skill: String,
        /// The dependencies that are not loaded.
        missing: Vec<String>,
    },
    /// The skill panicked too often in a row and is no longer called.
    #[error(
        "skill `{skill}` is quarantined after {panics} consecutive panics; install a new build to lift it"
    )]
    Quarantined {
        /// The skill.
        skill: String,
        /// Consecutive panics that led to the quarantine.
        panics: u32,
    },
    /// The hook ran and returned an error (or panicked).
    #[error("skill `{skill}` hook `{hook}` failed: {error}")]
    Failed {
        /// The skill.
        skill: String,
        /// The hook.
        hook: &'static str,
        /// What it returned.
        error: SkillError,
    },
}

/// Panic accounting for one loaded build.
#[derive(Debug, Default)]
struct Health {
    consecutive_panics: AtomicU32,
    total_panics: AtomicU64,
    quarantined: AtomicBool,
    /// The hook that did not return in time, when that was the cause.
    hung: Mutex<Option<(&'static str, Duration)>>,
}

/// The default of `plugins.hook_timeout_ms`: how long a hook may run
/// before the call is abandoned, the fallback taken and the skill
/// quarantined.
pub const DEFAULT_HOOK_TIMEOUT_MS: u64 = 2000;

/// Hook calls abandoned past their deadline, by skill name: each left a
/// thread stuck in the skill's code. A skill that hangs this many times is
/// not loaded again by this process.
pub const MAX_ABANDONED: u32 = 3;

fn abandoned() -> &'static Mutex<BTreeMap<String, u32>> {
    static ABANDONED: std::sync::OnceLock<Mutex<BTreeMap<String, u32>>> =
        std::sync::OnceLock::new();
    ABANDONED.get_or_init(Mutex::default)
}

/// How many hook calls of skill `name` were abandoned in this process.
pub fn abandoned_calls(name: &str) -> u32 {
    abandoned()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(name)
        .copied()
        .unwrap_or(0)
}

/// One loaded, initialised build of a skill.
#[derive(Debug)]
pub struct Skill {
    loaded: Loaded,
    health: Health,
    /// Component ids its `components` hook returned without declaring
    /// them (the host drops those components), with the key of the first.
    undeclared: Mutex<BTreeMap<u32, String>>,
    quarantine_after: u32,
    /// How long a hook may run before the call is abandoned.
    hook_timeout: Duration,
}

impl Skill {
    fn new(loaded: Loaded, limits: Limits) -> Self {
        Self {
            loaded,
            health: Health::default(),
            undeclared: Mutex::default(),
            quarantine_after: limits.quarantine_after,
            hook_timeout: limits.hook_timeout,
        }
    }

    /// A hook call did not return within `timeout`: the skill is
    /// quarantined, and the abandoned call counted against its name.
    fn hung(&self, hook: &'static str, timeout: Duration) -> u32 {
        let name = &self.loaded.info.name;
        *self.health.hung.lock().unwrap_or_else(|e| e.into_inner()) = Some((hook, timeout));
        self.health.quarantined.store(true, Ordering::Relaxed);
        let count = {
            let mut abandoned = abandoned().lock().unwrap_or_else(|e| e.into_inner());
            let count = abandoned.entry(name.clone()).or_default();
            *count += 1;
            *count
        };
        tracing::error!(
            target: "foveal::skill_errors",
            skill = %name,
            path = %self.loaded.path.display(),
            hook = %hook,
            timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            abandoned = count,
            "skill hook did not return in time (plugins.hook_timeout_ms); the call was abandoned and the skill quarantined"
        );
        count
    }

    /// What the skill says about itself.
    pub fn info(&self) -> &crate::loader::SkillInfo {
        &self.loaded.info
    }

    /// The library in the plugins folder this build came from.
    pub fn path(&self) -> &Path {
        &self.loaded.path
    }

    /// The embedded literate source.
    pub fn source(&self) -> &str {
        self.loaded.source()
    }

    /// Its cell's state (pid, memory, restarts, refused acts), when it
    /// runs in one.
    pub fn cell_status(&self) -> Option<foveal_cell::CellStatus> {
        self.loaded.cell().map(|cell| cell.status())
    }

    /// How long loading this build took (copy, map, checks, init).
    pub fn load_time(&self) -> Duration {
        self.loaded.load_time
    }

    /// Whether this build is quarantined.
    pub fn is_quarantined(&self) -> bool {
        self.health.quarantined.load(Ordering::Relaxed)
    }

    /// Notes that the `components` hook returned a component at `id`
    /// (key `key`) that the manifest does not declare: the host drops it.
    /// Said once per build and id on the host's log (stderr at the
    /// default level for `run` and `ask`), then shown by `skill-list` and
    /// `check`.
    pub fn note_undeclared(&self, id: u32, key: &str) {
        let mut seen = self.undeclared.lock().unwrap_or_else(|e| e.into_inner());
        if seen.contains_key(&id) {
            return;
        }
        seen.insert(id, key.to_owned());
        tracing::warn!(target: "foveal::registry",
            skill = %self.loaded.info.name,
            path = %self.loaded.path.display(),
            id,
            key,
            "{}",
            undeclared_warning(id, key, &self.loaded.info.component_ids)
        );
    }

    /// Warnings about this build: the component ids its hook returned
    /// without declaring them.
    pub fn warnings(&self) -> Vec<String> {
        let seen = self.undeclared.lock().unwrap_or_else(|e| e.into_inner());
        seen.iter()
            .map(|(id, key)| undeclared_warning(*id, key, &self.loaded.info.component_ids))
            .collect()
    }

    /// Panics caught in this build's hooks so far.
    pub fn total_panics(&self) -> u64 {
        self.health.total_panics.load(Ordering::Relaxed)
    }

    fn record(&self, hook: &'static str, error: &SkillError, said: bool) {
        if error.code != SkillError::PANIC {
            // An error returned on purpose is not a sign of a broken skill;
            // it ends a run of panics like a success does.
            self.record_success();
            return;
        }
        self.health.total_panics.fetch_add(1, Ordering::Relaxed);
        let run = self
            .health
            .consecutive_panics
            .fetch_add(1, Ordering::Relaxed)
            + 1;
        // Both lines are said by every command (`foveal::skill_errors`).
        if run >= self.quarantine_after && !self.health.quarantined.swap(true, Ordering::Relaxed) {
            tracing::error!(
                target: "foveal::skill_errors",
                skill = %self.loaded.info.name,
                path = %self.loaded.path.display(),
                hook,
                panics = run,
                "skill quarantined after {run} consecutive panics; its fallback is used until a new build is installed"
            );
        } else if !said {
            tracing::warn!(
                target: "foveal::skill_errors",
                skill = %self.loaded.info.name,
                path = %self.loaded.path.display(),
                hook,
                "skill hook panicked: {}",
                error.message
            );
        }
    }

    #[inline]
    fn record_success(&self) {
        // Read before writing: a store on every call would bounce the cache
        // line between cores calling the same skill.
        if self.health.consecutive_panics.load(Ordering::Relaxed) != 0 {
            self.health.consecutive_panics.store(0, Ordering::Relaxed);
        }
    }
}

/// A skill as it stands in one snapshot.
#[derive(Debug, Clone)]
pub struct Slot {
    skill: Arc<Skill>,
    missing: Arc<[String]>,
}

impl Slot {
    /// The loaded build.
    pub fn skill(&self) -> &Arc<Skill> {
        &self.skill
    }

    /// Dependencies of the skill that are not loaded in this snapshot.
    pub fn missing_dependencies(&self) -> &[String] {
        &self.missing
    }

    /// Calls `hook` of this skill: the single path every hook call takes.
    ///
    /// Returns [`Unavailable`] — never panics — when the hook is absent, the
    /// skill is quarantined or waiting for a dependency, or the hook failed.
    /// Panics inside the skill were already caught at the ABI boundary; here
    /// they are counted, and a skill that panics `quarantine_after` times in
    /// a row is quarantined.
    ///
    /// The hook runs on the caller's companion thread, and the caller waits at most
    /// `plugins.hook_timeout_ms` for it: a hook that never returns is
    /// abandoned there (its thread left stuck), the skill quarantined, and
    /// the caller takes its fallback. So `invoke` owns what it passes to the
    /// skill (`Send + 'static`): the borrowed data of a call that is walked
    /// away from must outlive it.
    pub fn call<F: Copy + Send + 'static, T: Send + 'static>(
        &self,
        hook: Hook<F>,
        invoke: impl FnOnce(F) -> RResult<T, SkillError> + Send + 'static,
    ) -> Result<T, Unavailable> {
        self.call_lending(hook, None, invoke)
    }

    /// [`call`](Self::call) of a hook that is lent the memex (`components`,
    /// `run_tool`): `view` is the view `invoke` lends, which a skill in a
    /// cell receives as sealed files (in-process it is not needed).
    pub fn call_lending<F: Copy + Send + 'static, T: Send + 'static>(
        &self,
        hook: Hook<F>,
        view: Option<&crate::memex::view::SnapshotView>,
        invoke: impl FnOnce(F) -> RResult<T, SkillError> + Send + 'static,
    ) -> Result<T, Unavailable> {
        let skill = &*self.skill;
        if !self.missing.is_empty() || skill.health.quarantined.load(Ordering::Relaxed) {
            return Err(self.blocked());
        }
        let timeout = skill.hook_timeout;
        let module = match &skill.loaded.backend {
            Backend::InProcess(module) => module,
            Backend::Cell(cell, _) => return self.call_cell(cell, hook, view, timeout, invoke),
        };
        let Some(function) = (hook.get)(module) else {
            return Err(self.no_hook(hook.name));
        };
        match crate::companion::run(timeout, move || invoke(function)) {
            Ok(ROk(value)) => {
                skill.record_success();
                Ok(value)
            }
            Ok(RErr(error)) => Err(self.failed(hook.name, error)),
            Err(abandoned) => Err(self.abandoned(hook.name, timeout, abandoned)),
        }
    }

    /// The `components` hook with `call`'s request and view.
    pub fn call_components(
        &self,
        call: crate::memex::view::ComponentsCall,
    ) -> Result<abi_stable::std_types::RVec<foveal_sdk::Component>, Unavailable> {
        if matches!(self.skill.loaded.backend, Backend::Cell(..)) {
            let view = call.view.clone();
            return self.call_lending(hooks::COMPONENTS, Some(&view), move |f| call.call(f));
        }
        self.call(hooks::COMPONENTS, move |f| call.call(f))
    }

    /// A hook of a skill in a cell: on the calling thread (the cell keeps
    /// the deadline and kills a cell that passes it), through the hook's
    /// trampoline.
    fn call_cell<F: Copy, T>(
        &self,
        cell: &Arc<foveal_cell::Cell>,
        hook: Hook<F>,
        view: Option<&crate::memex::view::SnapshotView>,
        timeout: Duration,
        invoke: impl FnOnce(F) -> RResult<T, SkillError>,
    ) -> Result<T, Unavailable> {
        if !self.skill.loaded.info.hooks.contains(&hook.name) {
            return Err(self.no_hook(hook.name));
        }
        let lent = match view.map(foveal_cell::lend::lend).transpose() {
            Ok(lent) => lent,
            Err(e) => {
                let error = SkillError::new(
                    SkillError::UNAVAILABLE,
                    format!("the memex could not be lent to its cell: {e}"),
                );
                crate::skill_errors::say(&self.skill.loaded.info.name, hook.name, &error);
                return Err(self.failed(hook.name, error));
            }
        };
        let (answer, failure) =
            foveal_cell::lend::with_cell(cell, timeout, lent, || invoke(hook.trampoline));
        let health = &self.skill.health;
        match answer {
            ROk(value) => {
                self.skill.record_success();
                let mut hung = health.hung.lock().unwrap_or_else(|e| e.into_inner());
                if hung.is_some() {
                    *hung = None;
                }
                Ok(value)
            }
            // A cell that died or hung answers with a PANIC error: counted
            // toward quarantine like a panic (the cell said what happened).
            // Nothing is abandoned: the hung cell was killed.
            RErr(error) => {
                if let Some(foveal_cell::CallError::Timeout(limit)) = failure {
                    *health.hung.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some((hook.name, limit));
                }
                Err(self.failed_said(hook.name, error, failure.is_some()))
            }
        }
    }

    /// [`call`](Self::call) on the calling thread, without a deadline, for
    /// callers that measure the ABI itself (benchmarks) or lend borrowed
    /// data (tests). The host's own paths all take `call`. A skill in a
    /// cell is called as by `call` (the cell keeps the deadline).
    #[inline]
    pub fn call_inline<F: Copy, T>(
        &self,
        hook: Hook<F>,
        invoke: impl FnOnce(F) -> RResult<T, SkillError>,
    ) -> Result<T, Unavailable> {
        let skill = &*self.skill;
        if !self.missing.is_empty() || skill.health.quarantined.load(Ordering::Relaxed) {
            return Err(self.blocked());
        }
        let module = match &skill.loaded.backend {
            Backend::InProcess(module) => module,
            Backend::Cell(cell, _) => {
                return self.call_cell(cell, hook, None, skill.hook_timeout, invoke);
            }
        };
        let Some(function) = (hook.get)(module) else {
            return Err(self.no_hook(hook.name));
        };
        match invoke(function) {
            ROk(value) => {
                skill.record_success();
                Ok(value)
            }
            RErr(error) => Err(self.failed(hook.name, error)),
        }
    }

    #[cold]
    #[inline(never)]
    fn abandoned(
        &self,
        hook: &'static str,
        timeout: Duration,
        why: crate::companion::Abandoned,
    ) -> Unavailable {
        let skill = &*self.skill;
        let name = &skill.loaded.info.name;
        let error = match why {
            crate::companion::Abandoned::Timeout => {
                // Said by `hung`, with the file and the deadline.
                skill.hung(hook, timeout);
                let error = SkillError::new(
                    SkillError::UNAVAILABLE,
                    format!(
                        "did not return within {} ms (plugins.hook_timeout_ms); the call was abandoned and the skill quarantined",
                        timeout.as_millis()
                    ),
                );
                crate::skill_errors::note(name, hook, &error);
                error
            }
            crate::companion::Abandoned::NoThread => {
                let error = SkillError::new(
                    SkillError::UNAVAILABLE,
                    "the thread to run it on could not be started",
                );
                crate::skill_errors::say(name, hook, &error);
                error
            }
        };
        Reason::Failed {
            skill: name.clone(),
            hook,
            error,
        }
        .into()
    }

    // The unhappy paths are out of line so that the happy path of `call`
    // stays a handful of instructions.

    #[cold]
    #[inline(never)]
    fn blocked(&self) -> Unavailable {
        let skill = &*self.skill;
        if skill.health.quarantined.load(Ordering::Relaxed) {
            Reason::Quarantined {
                skill: skill.loaded.info.name.clone(),
                panics: skill.health.consecutive_panics.load(Ordering::Relaxed),
            }
            .into()
        } else {
            Reason::MissingDependency {
                skill: skill.loaded.info.name.clone(),
                missing: self.missing.to_vec(),
            }
            .into()
        }
    }

    #[cold]
    #[inline(never)]
    fn no_hook(&self, hook: &'static str) -> Unavailable {
        Reason::NoHook {
            skill: self.skill.loaded.info.name.clone(),
            hook,
        }
        .into()
    }

    #[cold]
    #[inline(never)]
    fn failed(&self, hook: &'static str, error: SkillError) -> Unavailable {
        self.failed_said(hook, error, false)
    }

    /// [`failed`](Self::failed), `said` when the failure was already on
    /// the log (a cell that died or hung says so itself).
    fn failed_said(&self, hook: &'static str, mut error: SkillError, said: bool) -> Unavailable {
        // A skill's message goes into logs, tool results and the next
        // prompt: capped, so a skill cannot fill them.
        if error.message.len() > MAX_SKILL_MESSAGE {
            let mut end = MAX_SKILL_MESSAGE;
            while !error.message.is_char_boundary(end) {
                end -= 1;
            }
            let capped = format!(
                "{}… [cut at {MAX_SKILL_MESSAGE} bytes]",
                &error.message[..end]
            );
            error.message = capped.into();
        }
        // A panic, or a cell that died or hung (`said`: the cell said so),
        // is the registry's to note, and its line is said the first time
        // for each cause only; an error the skill returned is its caller's
        // (`Unavailable::say_failure`): only the caller knows whether it is
        // a failure or an answer.
        let first = (error.code == SkillError::PANIC || said)
            && crate::skill_errors::note(&self.skill.loaded.info.name, hook, &error);
        self.skill.record(hook, &error, said || !first);
        Reason::Failed {
            skill: self.skill.loaded.info.name.clone(),
            hook,
            error,
        }
        .into()
    }
}

fn undeclared_warning(id: u32, key: &str, declared: &[u32]) -> String {
    format!(
        "components returned component {id} (`{key}`), which its manifest does not declare (component_ids: {declared:?}); the host drops it — add {id} to component_ids in export_skill! (free ids: docs/skill-abi.md)"
    )
}

/// A skill's error message is cut after this many bytes.
pub const MAX_SKILL_MESSAGE: usize = 500;

/// A library in a plugins folder that is not serving.
#[derive(Debug, Clone)]
pub enum Idle {
    /// It was refused; the error says why.
    Refused {
        /// Why.
        error: Arc<LoadError>,
        /// The build that was refused.
        identity: Option<FileIdentity>,
    },
    /// It provides a skill that a library with higher precedence already
    /// provides. It takes over if that library is removed.
    Shadowed {
        /// The skill it provides.
        name: String,
        /// The library that wins.
        by: PathBuf,
        /// The build, ready to be promoted.
        candidate: Candidate,
    },
}

/// A shadowed build, either not yet initialised or initialised earlier
/// (it served before a higher-precedence library arrived).
#[derive(Debug, Clone)]
pub enum Candidate {
    /// Checked but `init` never ran.
    Opened(Arc<Opened>),
    /// Initialised.
    Ready(Arc<Skill>),
}

impl Candidate {
    fn identity(&self) -> FileIdentity {
        match self {
            Self::Opened(o) => o.identity,
            Self::Ready(s) => s.loaded.identity,
        }
    }

    fn info(&self) -> &crate::loader::SkillInfo {
        match self {
            Self::Opened(o) => &o.info,
            Self::Ready(s) => &s.loaded.info,
        }
    }
}

#[cold]
#[inline(never)]
fn not_loaded(name: &str) -> Unavailable {
    Reason::NotLoaded {
        skill: name.to_owned(),
    }
    .into()
}

/// One immutable view of the registry.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    generation: u64,
    /// Serving skills, by name.
    skills: BTreeMap<String, Slot>,
    /// Libraries that are not serving, by path.
    idle: BTreeMap<PathBuf, Idle>,
}

/// One row of `foveal skill-list`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Row {
    /// The skill's name, or the file stem of a library that was refused.
    pub name: String,
    /// The skill's version (`null` when refused).
    pub version: Option<String>,
    /// Its priority (`null` when refused).
    pub priority: Option<i32>,
    /// Its dependencies.
    pub dependencies: Vec<String>,
    /// The hooks it implements.
    pub hooks: Vec<&'static str>,
    /// Where it runs and what it is granted: `cell: no files, no network,
    /// 256 MiB` or `in-process` (empty when refused).
    pub isolation: String,
    /// `loaded`, `quarantined`, `missing dependency: …`, `shadowed by …`,
    /// `untrusted: …` or `refused: …`.
    pub status: String,
    /// What is wrong with a skill that serves anyway (a component at an id
    /// it did not declare, dropped).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The library file.
    pub path: PathBuf,
}

impl Snapshot {
    /// The generation number: bumped on every published change.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The serving skill called `name`.
    #[inline]
    pub fn get(&self, name: &str) -> Option<&Slot> {
        self.skills.get(name)
    }

    /// Calls `hook` of skill `name` through [`Slot::call`]. When the skill is
    /// not loaded the answer is [`Reason::NotLoaded`]; the caller takes
    /// its fallback.
    pub fn call<F: Copy + Send + 'static, T: Send + 'static>(
        &self,
        name: &str,
        hook: Hook<F>,
        invoke: impl FnOnce(F) -> RResult<T, SkillError> + Send + 'static,
    ) -> Result<T, Unavailable> {
        match self.skills.get(name) {
            Some(slot) => slot.call(hook, invoke),
            None => Err(not_loaded(name)),
        }
    }

    /// [`Slot::call_lending`] of skill `name`.
    pub fn call_lending<F: Copy + Send + 'static, T: Send + 'static>(
        &self,
        name: &str,
        hook: Hook<F>,
        view: Option<&crate::memex::view::SnapshotView>,
        invoke: impl FnOnce(F) -> RResult<T, SkillError> + Send + 'static,
    ) -> Result<T, Unavailable> {
        match self.skills.get(name) {
            Some(slot) => slot.call_lending(hook, view, invoke),
            None => Err(not_loaded(name)),
        }
    }

    /// [`Slot::call_components`] of skill `name`.
    pub fn call_components(
        &self,
        name: &str,
        call: crate::memex::view::ComponentsCall,
    ) -> Result<abi_stable::std_types::RVec<foveal_sdk::Component>, Unavailable> {
        match self.skills.get(name) {
            Some(slot) => slot.call_components(call),
            None => Err(not_loaded(name)),
        }
    }

    /// [`Slot::call_inline`] of skill `name`.
    #[inline]
    pub fn call_inline<F: Copy, T>(
        &self,
        name: &str,
        hook: Hook<F>,
        invoke: impl FnOnce(F) -> RResult<T, SkillError>,
    ) -> Result<T, Unavailable> {
        match self.skills.get(name) {
            Some(slot) => slot.call_inline(hook, invoke),
            None => Err(not_loaded(name)),
        }
    }

    /// The serving skills, highest priority first.
    pub fn skills(&self) -> impl Iterator<Item = &Slot> {
        let mut slots: Vec<&Slot> = self.skills.values().collect();
        slots.sort_by(|a, b| {
            b.skill
                .loaded
                .info
                .priority
                .cmp(&a.skill.loaded.info.priority)
                .then_with(|| a.skill.loaded.info.name.cmp(&b.skill.loaded.info.name))
        });
        slots.into_iter()
    }

    /// Libraries that are not serving, by path.
    pub fn idle(&self) -> &BTreeMap<PathBuf, Idle> {
        &self.idle
    }

    /// The names of the serving skills, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.skills.keys().map(String::as_str).collect()
    }

    /// Every library, as `foveal skill-list` shows it: sorted by priority,
    /// highest first, then by name; refused libraries last.
    pub fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        for slot in self.skills.values() {
            let skill = &slot.skill;
            let info = &skill.loaded.info;
            let hung = *skill.health.hung.lock().unwrap_or_else(|e| e.into_inner());
            let status = if let Some((hook, timeout)) = hung.filter(|_| skill.is_quarantined()) {
                format!(
                    "quarantined: its {hook} hook did not return within {} ms",
                    timeout.as_millis()
                )
            } else if skill.is_quarantined() {
                format!(
                    "quarantined after {} consecutive panics",
                    skill.health.consecutive_panics.load(Ordering::Relaxed)
                )
            } else if !slot.missing.is_empty() {
                format!("missing dependency: {}", slot.missing.join(", "))
            } else {
                "loaded".to_owned()
            };
            rows.push(Row {
                name: info.name.clone(),
                version: Some(info.version.clone()),
                priority: Some(info.priority),
                dependencies: info.dependencies.clone(),
                hooks: info.hooks.clone(),
                isolation: skill.loaded.backend.describe(),
                status,
                warnings: skill.warnings(),
                path: skill.loaded.path.clone(),
            });
        }
        for (path, idle) in &self.idle {
            match idle {
                Idle::Refused { error, .. } => rows.push(Row {
                    name: path
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    version: None,
                    priority: None,
                    dependencies: Vec::new(),
                    hooks: Vec::new(),
                    isolation: String::new(),
                    status: error.status(),
                    warnings: Vec::new(),
                    path: path.clone(),
                }),
                Idle::Shadowed {
                    name,
                    by,
                    candidate,
                } => {
                    let info = candidate.info();
                    rows.push(Row {
                        name: name.clone(),
                        version: Some(info.version.clone()),
                        priority: Some(info.priority),
                        dependencies: info.dependencies.clone(),
                        hooks: info.hooks.clone(),
                        isolation: match candidate {
                            Candidate::Opened(o) => o.backend().describe(),
                            Candidate::Ready(s) => s.loaded.backend.describe(),
                        },
                        status: format!("shadowed by {}", by.display()),
                        warnings: Vec::new(),
                        path: path.clone(),
                    });
                }
            }
        }
        rows.sort_by(|a, b| {
            b.priority
                .is_some()
                .cmp(&a.priority.is_some())
                .then_with(|| b.priority.cmp(&a.priority))
                .then_with(|| a.name.cmp(&b.name))
                .then_with(|| a.path.cmp(&b.path))
        });
        rows
    }

    /// Recomputes, for every skill, which of its dependencies are missing —
    /// transitively: a skill whose dependency is itself waiting is waiting.
    fn resolve_dependencies(&mut self) {
        let names: Vec<String> = self.skills.keys().cloned().collect();
        let mut ready: BTreeMap<String, Vec<String>> = BTreeMap::new();
        // Iterate to a fixed point; the number of skills bounds the rounds.
        let mut changed = true;
        let mut missing: BTreeMap<&str, Vec<String>> = names
            .iter()
            .map(|n| {
                let deps = &self.skills[n].skill.loaded.info.dependencies;
                let absent = deps
                    .iter()
                    .filter(|d| !self.skills.contains_key(d.as_str()))
                    .cloned()
                    .collect();
                (n.as_str(), absent)
            })
            .collect();
        while changed {
            changed = false;
            for name in &names {
                if !missing[name.as_str()].is_empty() {
                    continue;
                }
                let deps = &self.skills[name].skill.loaded.info.dependencies;
                let waiting: Vec<String> = deps
                    .iter()
                    .filter(|d| missing.get(d.as_str()).is_some_and(|m| !m.is_empty()))
                    .map(|d| format!("{d} (itself waiting)"))
                    .collect();
                if !waiting.is_empty() {
                    missing.insert(name.as_str(), waiting);
                    changed = true;
                }
            }
        }
        for (name, absent) in missing {
            ready.insert(name.to_owned(), absent);
        }
        for (name, absent) in ready {
            if let Some(slot) = self.skills.get_mut(&name) {
                slot.missing = absent.into();
            }
        }
    }
}

/// A folder the registry loads skills from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginDir {
    /// The folder.
    pub path: PathBuf,
    /// Only consider first-party skill libraries (`libfoveal_skill_*`): used
    /// for the folder of the `foveal` executable, where cargo also puts
    /// other libraries.
    pub first_party_only: bool,
}

/// How to build a [`Registry`].
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// Folders to load from, highest precedence first: when two libraries
    /// provide the same skill, the one in the earlier folder serves.
    pub dirs: Vec<PluginDir>,
    /// Where shadow copies go.
    pub shadow_dir: PathBuf,
    /// Consecutive panics before a skill is quarantined.
    pub quarantine_after: u32,
    /// Libraries this process may load (loaded code is never unloaded).
    pub max_loads: u32,
    /// Which builds may run, by digest (`plugins.require_trusted`).
    pub allow: crate::trust::AllowList,
    /// How long a hook may run before the call is abandoned, the fallback
    /// taken and the skill quarantined (`plugins.hook_timeout_ms`); for a
    /// skill in a cell, before its cell is killed and started again.
    pub hook_timeout: Duration,
    /// Which skills run in cells, and what each cell is granted.
    pub isolation: IsolationPolicy,
}

/// What each loaded skill is held to.
#[derive(Debug, Clone, Copy)]
struct Limits {
    quarantine_after: u32,
    hook_timeout: Duration,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        Self {
            dirs: vec![PluginDir {
                path: PathBuf::from("plugins"),
                first_party_only: false,
            }],
            shadow_dir: std::env::temp_dir().join(format!("foveal-shadow-{}", whoami())),
            quarantine_after: 3,
            max_loads: 500,
            allow: crate::trust::AllowList::Any,
            hook_timeout: Duration::from_millis(DEFAULT_HOOK_TIMEOUT_MS),
            isolation: IsolationPolicy::default(),
        }
    }
}

fn whoami() -> String {
    std::env::var("USER").unwrap_or_else(|_| "user".to_owned())
}

/// What a load or removal changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Nothing: not a skill library, or the same build as before.
    Unchanged,
    /// A new snapshot was published with this generation.
    Published(u64),
}

/// The registry: the current [`Snapshot`] and the means to change it.
#[derive(Debug)]
pub struct Registry {
    loader: Loader,
    dirs: Vec<PluginDir>,
    isolation: IsolationPolicy,
    limits: Limits,
    current: ArcSwap<Snapshot>,
    writer: Mutex<()>,
    /// The last published generation, for [`Registry::wait_for_change`].
    published: Mutex<u64>,
    changed: Condvar,
    /// The same generation for async waiters: [`Registry::changes`].
    pushed: tokio::sync::watch::Sender<u64>,
}

impl Registry {
    /// An empty registry, holding skills to the default component-id rules
    /// (the prompt's: [`ComponentPolicy`]). Call [`scan`](Self::scan) to
    /// load the folders.
    pub fn new(options: RegistryOptions) -> std::io::Result<Self> {
        Self::with_policy(options, ComponentPolicy::default())
    }

    /// An empty registry that refuses a skill whose declared prompt
    /// component ids break `policy`: what the host builds, with the
    /// prompt's rules. Call [`scan`](Self::scan) to load the folders.
    pub fn with_policy(options: RegistryOptions, policy: ComponentPolicy) -> std::io::Result<Self> {
        let loader = Loader::new(options.shadow_dir, options.max_loads)?
            .with_allow_list(options.allow)
            .with_component_policy(policy);
        Ok(Self {
            loader,
            dirs: options.dirs,
            isolation: options.isolation,
            limits: Limits {
                quarantine_after: options.quarantine_after.max(1),
                hook_timeout: options.hook_timeout.max(Duration::from_millis(1)),
            },
            current: ArcSwap::from_pointee(Snapshot::default()),
            writer: Mutex::new(()),
            published: Mutex::new(0),
            changed: Condvar::new(),
            pushed: tokio::sync::watch::Sender::new(0),
        })
    }

    /// The folders this registry loads from, highest precedence first.
    pub fn dirs(&self) -> &[PluginDir] {
        &self.dirs
    }

    /// The loader (for its statistics).
    pub fn loader(&self) -> &Loader {
        &self.loader
    }

    /// The current snapshot. Hold it for the length of a cycle.
    #[inline]
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// The current snapshot, without touching its reference count: for a
    /// short look. Hold [`snapshot`](Self::snapshot) for longer work.
    #[inline]
    pub fn peek(&self) -> arc_swap::Guard<Arc<Snapshot>> {
        self.current.load()
    }

    /// `path` as this registry names the files of its folders. A folder
    /// given relative (`--plugins plugins`) names its libraries relative
    /// too, while the file watcher reports them absolute: unmapped, the
    /// new build of a swap looked like a second library of the same skill
    /// and was refused as a duplicate.
    pub fn configured_path(&self, path: &Path) -> PathBuf {
        for dir in self.dirs.iter().filter(|d| d.path.is_relative()) {
            let spellings = [
                std::path::absolute(&dir.path).ok(),
                dir.path.canonicalize().ok(),
            ];
            for absolute in spellings.into_iter().flatten() {
                if let Ok(rest) = path.strip_prefix(&absolute) {
                    return dir.path.join(rest);
                }
            }
        }
        path.to_owned()
    }

    /// Whether `path` is a library this registry would load: in one of its
    /// folders, with the platform's library extension, not hidden (a
    /// temporary file being written), and for first-party-only folders named
    /// `<prefix>foveal_skill_*`.
    pub fn is_candidate(&self, path: &Path) -> bool {
        self.rank(path).is_some()
    }

    /// The precedence of the folder holding `path` (0 is highest), or none
    /// when the registry would not load it.
    fn rank(&self, path: &Path) -> Option<usize> {
        let name = path.file_name()?.to_str()?;
        if name.starts_with('.') {
            return None;
        }
        if path.extension()?.to_str()? != std::env::consts::DLL_EXTENSION {
            return None;
        }
        let parent = path.parent()?;
        self.dirs.iter().position(|dir| {
            same_dir(&dir.path, parent)
                && (!dir.first_party_only
                    || name.starts_with(&format!("{}foveal_skill_", std::env::consts::DLL_PREFIX)))
        })
    }

    /// Whether `path` is one of the folders this registry loads from.
    pub fn is_dir(&self, path: &Path) -> bool {
        self.dirs.iter().any(|dir| same_dir(&dir.path, path))
    }

    /// Loads every candidate library in every folder, in precedence order
    /// and by file name within a folder. Missing folders are skipped.
    ///
    /// A folder that someone other than the user or root could write to
    /// ([`crate::trust`]) loads nothing: each library in it is refused with
    /// the folder's name and the fix. Builds already serving or refused for
    /// the same reason are left as they are, so scanning again is cheap.
    pub fn scan(&self) {
        for dir in &self.dirs {
            let Ok(entries) = std::fs::read_dir(&dir.path) else {
                tracing::debug!(target: "foveal::registry", dir = %dir.path.display(), "plugins folder not found; skipped");
                continue;
            };
            let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            paths.sort();
            for path in paths {
                if self.is_candidate(&path) {
                    self.load_path(&path);
                }
            }
        }
    }

    /// Loads (or reloads) the library at `path` and publishes the result.
    ///
    /// A build that is refused never replaces a working build of the same
    /// skill: the refusal is recorded beside it and the old build serves on.
    pub fn load_path(&self, path: &Path) -> Change {
        let Some(rank) = self.rank(path) else {
            return Change::Unchanged;
        };
        let _writing = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.current.load_full();
        let identity = match FileIdentity::of(path) {
            Ok(identity) => identity,
            Err(_) => return self.remove_locked(&current, path),
        };
        if current_identity(&current, path) == Some(identity) {
            return Change::Unchanged;
        }
        // The folder as scanned (through a symlink, its target): one stat
        // per library, so a folder made safe later is seen at once.
        let folder = &self.dirs[rank].path;
        if let Ok(meta) = std::fs::metadata(folder)
            && let Err(fault) = crate::trust::check(folder, &meta)
        {
            let error = LoadError::Unsafe {
                path: path.to_owned(),
                fault,
            };
            return self.refuse_unsafe(&current, error);
        }

        let opened = match self.open(path, self.dirs[rank].first_party_only) {
            Ok(opened) => opened,
            Err(error @ LoadError::Unsafe { .. }) => return self.refuse_unsafe(&current, error),
            Err(error) => {
                let mut next = (*current).clone();
                self.refuse(&mut next, error, Some(identity));
                return self.publish(next);
            }
        };
        let mut next = (*current).clone();
        let name = opened.info.name.clone();
        let count = abandoned_calls(&name);
        if count >= MAX_ABANDONED {
            self.refuse(
                &mut next,
                LoadError::Hung {
                    path: path.to_owned(),
                    skill: name,
                    count,
                },
                Some(identity),
            );
            return self.publish(next);
        }

        if let Some(slot) = next.skills.get(&name) {
            let holder = slot.skill.loaded.path.clone();
            if holder != path && holder.exists() {
                let holder_rank = self.rank(&holder).unwrap_or(usize::MAX);
                if holder_rank < rank {
                    self.retire_others_at(&mut next, path, &name);
                    next.idle.insert(
                        path.to_owned(),
                        Idle::Shadowed {
                            name,
                            by: holder,
                            candidate: Candidate::Opened(Arc::new(opened)),
                        },
                    );
                    return self.publish(next);
                }
                if holder_rank == rank {
                    let error = LoadError::Duplicate {
                        path: path.to_owned(),
                        skill: name,
                        by: holder,
                    };
                    self.refuse(&mut next, error, Some(identity));
                    return self.publish(next);
                }
            }
        }

        if let Some(error) =
            component_conflict(self.loader.component_policy(), &next, path, &opened.info)
        {
            self.refuse(&mut next, error, Some(identity));
            return self.publish(next);
        }

        match self.loader.init(opened) {
            Ok(loaded) => {
                tracing::info!(target: "foveal::registry",
                    skill = %loaded.info.name,
                    version = %loaded.info.version,
                    path = %path.display(),
                    load_ms = loaded.load_time.as_secs_f64() * 1e3,
                    "skill loaded"
                );
                let skill = Arc::new(Skill::new(loaded, self.limits));
                self.retire_others_at(&mut next, path, &name);
                next.idle.remove(path);
                if let Some(old) = next.skills.insert(
                    name.clone(),
                    Slot {
                        skill,
                        missing: Arc::from([]),
                    },
                ) {
                    let old_path = old.skill.loaded.path.clone();
                    if old_path != path && old_path.exists() {
                        // A lower-precedence build steps aside but stays ready.
                        next.idle.insert(
                            old_path,
                            Idle::Shadowed {
                                name,
                                by: path.to_owned(),
                                candidate: Candidate::Ready(old.skill),
                            },
                        );
                    }
                }
            }
            Err(error) => self.refuse(&mut next, error, Some(identity)),
        }
        self.publish(next)
    }

    /// The isolation rules of this registry.
    pub fn isolation(&self) -> &IsolationPolicy {
        &self.isolation
    }

    /// Opens the library at `path` where the isolation rules say: first by
    /// its folder's default, then, once its name is known, by its own
    /// `[skills.<name>]` table (in-process, or a cell with its grants).
    fn open(&self, path: &Path, first_party: bool) -> Result<Opened, LoadError> {
        let opened = match self.isolation.default_for(first_party) {
            Where::InProcess => self.loader.open(path)?,
            Where::Cell => {
                match self.open_in_cell(path, &crate::isolation::SkillIsolation::default()) {
                    Ok(opened) => opened,
                    // No cell can run here: the user's opt-out, found by
                    // the name the file gives, is the only way to run it.
                    Err(LoadError::Unconfined { skill, .. })
                        if self.isolation.for_skill(&skill, first_party) == Where::InProcess =>
                    {
                        return self.open_in_process(path, &skill, first_party);
                    }
                    Err(error) => return Err(error),
                }
            }
        };
        let name = opened.info.name.clone();
        let settings = self.isolation.settings(&name);
        let wanted = self.isolation.for_skill(&name, first_party);
        let in_cell = matches!(opened.backend(), Backend::Cell(..));
        match (wanted, in_cell) {
            (Where::InProcess, true) => {
                drop(opened);
                self.open_in_process(path, &name, first_party)
            }
            (Where::Cell, false) => self.open_in_cell(path, &settings),
            (Where::Cell, true) if settings != crate::isolation::SkillIsolation::default() => {
                // Its grants are known only now: a cell with them.
                self.open_in_cell(path, &settings)
            }
            _ => Ok(opened),
        }
    }

    /// A drop-in library the user moved in-process: only the build they
    /// pinned in `plugins.trusted` (checked on the copy that is mapped).
    fn open_in_process(
        &self,
        path: &Path,
        name: &str,
        first_party: bool,
    ) -> Result<Opened, LoadError> {
        if first_party {
            return self.loader.open(path);
        }
        let pinned = crate::trust::AllowList::Only(self.isolation.pinned.clone());
        match self.loader.open_allowing(path, &pinned) {
            Ok(opened) if opened.info.name == name => {
                tracing::info!(target: "foveal::registry", skill = %name, path = %path.display(), "skill runs in the host's process ([skills.{name}] isolation = \"in-process\", pinned in plugins.trusted)");
                Ok(opened)
            }
            Ok(opened) => Err(LoadError::InvalidManifest {
                path: path.to_owned(),
                reason: format!(
                    "the library says it is skill `{}` in the host's process and `{name}` in its cell",
                    opened.info.name
                ),
            }),
            Err(LoadError::Untrusted { path, sha256 }) => Err(LoadError::NotPinned {
                skill: name.to_owned(),
                path,
                sha256,
            }),
            Err(error) => Err(error),
        }
    }

    fn open_in_cell(
        &self,
        path: &Path,
        settings: &crate::isolation::SkillIsolation,
    ) -> Result<Opened, LoadError> {
        let Some(exe) = self.isolation.exe.clone() else {
            return Err(LoadError::Unconfined {
                path: path.to_owned(),
                skill: crate::loader::guess_name(path),
                reason: "the foveal-cell executable was not found beside foveal (set FOVEAL_CELL to its path)".to_owned(),
            });
        };
        let plan = CellPlan {
            exe,
            memory_mib: settings.memory_mib,
            grants: foveal_cell::Grants {
                read: settings.allow_read.clone(),
                network: settings.allow_network,
            },
            simulate_no_landlock: self.isolation.simulate_no_landlock,
            init_timeout: self.limits.hook_timeout,
        };
        self.loader.open_in_cell(path, &plan)
    }

    /// Forgets the library at `path` (it was removed or renamed away). The
    /// skill it served leaves the registry; a shadowed build of the same
    /// skill, if any, takes over.
    pub fn remove_path(&self, path: &Path) -> Change {
        if self.rank(path).is_none() {
            return Change::Unchanged;
        }
        let _writing = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.current.load_full();
        self.remove_locked(&current, path)
    }

    fn remove_locked(&self, current: &Arc<Snapshot>, path: &Path) -> Change {
        let serving: Vec<String> = current
            .skills
            .iter()
            .filter(|(_, slot)| slot.skill.loaded.path == path)
            .map(|(n, _)| n.clone())
            .collect();
        if serving.is_empty() && !current.idle.contains_key(path) {
            return Change::Unchanged;
        }
        let mut next = (**current).clone();
        next.idle.remove(path);
        for name in serving {
            next.skills.remove(&name);
            tracing::info!(target: "foveal::registry", skill = %name, path = %path.display(), "skill removed");
            self.promote(&mut next, &name);
        }
        self.publish(next)
    }

    /// The file at `path` now holds a working build of skill `name`; a skill
    /// of another name that an earlier build at this path served goes (and
    /// a shadowed build of that skill may take over). Done only once the new
    /// build is known to work: a refused build changes nothing.
    fn retire_others_at(&self, next: &mut Snapshot, path: &Path, name: &str) {
        let previous: Vec<String> = next
            .skills
            .iter()
            .filter(|(n, slot)| slot.skill.loaded.path == path && n.as_str() != name)
            .map(|(n, _)| n.clone())
            .collect();
        for old in previous {
            next.skills.remove(&old);
            self.promote(next, &old);
        }
    }

    /// After the serving build of `name` left, the best shadowed build of it
    /// (highest precedence, file still present) takes over.
    fn promote(&self, next: &mut Snapshot, name: &str) {
        let best = next
            .idle
            .iter()
            .filter_map(|(path, idle)| match idle {
                Idle::Shadowed {
                    name: n, candidate, ..
                } if n == name && path.exists() => Some((
                    self.rank(path).unwrap_or(usize::MAX),
                    path.clone(),
                    candidate.clone(),
                )),
                _ => None,
            })
            .min_by_key(|(rank, path, _)| (*rank, path.clone()));
        let Some((_, path, candidate)) = best else {
            return;
        };
        if let Some(error) = component_conflict(
            self.loader.component_policy(),
            next,
            &path,
            candidate.info(),
        ) {
            let identity = FileIdentity::of(&path).ok();
            self.refuse(next, error, identity);
            return;
        }
        next.idle.remove(&path);
        let skill = match candidate {
            Candidate::Ready(skill) => skill,
            Candidate::Opened(opened) => {
                let opened = Arc::unwrap_or_clone(opened);
                match self.loader.init(opened) {
                    Ok(loaded) => Arc::new(Skill::new(loaded, self.limits)),
                    Err(error) => {
                        let identity = FileIdentity::of(&path).ok();
                        self.refuse(next, error, identity);
                        return;
                    }
                }
            }
        };
        // Other shadowed builds now defer to the new holder.
        for idle in next.idle.values_mut() {
            if let Idle::Shadowed { name: n, by, .. } = idle
                && n == name
            {
                *by = path.clone();
            }
        }
        tracing::info!(target: "foveal::registry", skill = %name, path = %path.display(), "shadowed build takes over");
        next.skills.insert(
            name.to_owned(),
            Slot {
                skill,
                missing: Arc::from([]),
            },
        );
    }

    /// Refuses a library for who could change it or its folder. Recorded
    /// without an identity — a `chmod` or `chown` leaves the file's identity
    /// as it was, and the library must be tried again after one — and not
    /// published again when the same refusal is already recorded.
    fn refuse_unsafe(&self, current: &Arc<Snapshot>, error: LoadError) -> Change {
        if let Some(Idle::Refused { error: old, .. }) = current.idle.get(error.path())
            && old.to_string() == error.to_string()
        {
            return Change::Unchanged;
        }
        let mut next = (**current).clone();
        self.refuse(&mut next, error, None);
        self.publish(next)
    }

    fn refuse(&self, next: &mut Snapshot, error: LoadError, identity: Option<FileIdentity>) {
        let path = error.path().to_owned();
        let serving = next
            .skills
            .values()
            .any(|slot| slot.skill.loaded.path == path);
        if serving {
            tracing::error!(target: "foveal::registry", path = %path.display(), "new build refused, the previous build keeps serving: {}", error.reason());
        } else {
            tracing::error!(target: "foveal::registry", path = %path.display(), "skill library refused: {}", error.reason());
        }
        next.idle.insert(
            path,
            Idle::Refused {
                error: Arc::new(error),
                identity,
            },
        );
    }

    fn publish(&self, mut next: Snapshot) -> Change {
        next.resolve_dependencies();
        next.generation = self.current.load().generation + 1;
        let generation = next.generation;
        self.current.store(Arc::new(next));
        *self.published.lock().unwrap_or_else(|e| e.into_inner()) = generation;
        self.changed.notify_all();
        self.pushed.send_replace(generation);
        tracing::debug!(target: "foveal::registry", generation, "registry generation published");
        Change::Published(generation)
    }

    /// The generation of each snapshot published from now on, pushed as it
    /// is published (a hot swap, a quarantine): what the control socket's
    /// subscribers are told, without polling.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.pushed.subscribe()
    }

    /// Blocks until a generation newer than `after` is published, or
    /// `timeout` passes; returns the newest generation either way. This is
    /// how a host turns skill changes into signals without polling.
    pub fn wait_for_change(&self, after: u64, timeout: Duration) -> u64 {
        let guard = self.published.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = self
            .changed
            .wait_timeout_while(guard, timeout, |generation| *generation <= after)
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }
}

/// The refusal of a skill whose declared prompt component ids clash with a
/// serving skill of another name, or with an id `policy` reserves for
/// another skill (seed 004: two components claiming one id is an error at
/// load).
fn component_conflict(
    policy: &ComponentPolicy,
    snapshot: &Snapshot,
    path: &Path,
    info: &crate::loader::SkillInfo,
) -> Option<LoadError> {
    for &id in &info.component_ids {
        let holder = (policy.reserved_for)(id)
            .filter(|owner| *owner != info.name)
            .map(|owner| format!("the host reserves for the `{owner}` skill"))
            .or_else(|| {
                snapshot
                    .skills
                    .values()
                    .map(|slot| &slot.skill.loaded.info)
                    .find(|other| other.name != info.name && other.component_ids.contains(&id))
                    .map(|other| format!("skill `{}` already declares", other.name))
            });
        if let Some(holder) = holder {
            return Some(LoadError::ComponentConflict {
                path: path.to_owned(),
                skill: info.name.clone(),
                id,
                holder,
            });
        }
    }
    None
}

/// The identity of the build last seen at `path`, serving or idle.
fn current_identity(snapshot: &Snapshot, path: &Path) -> Option<FileIdentity> {
    match snapshot.idle.get(path) {
        Some(Idle::Refused { identity, .. }) => *identity,
        Some(Idle::Shadowed { candidate, .. }) => Some(candidate.identity()),
        None => snapshot
            .skills
            .values()
            .find(|slot| slot.skill.loaded.path == path)
            .map(|slot| slot.skill.loaded.identity),
    }
}

/// Whether `a` and `b` name the same folder (through symlinks or `..`
/// too). Two `stat`s: `canonicalize` costs a `readlink` per path component,
/// and this runs for every library in every folder at start.
fn same_dir(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_the_same_through_a_symlink_or_dots_and_not_its_sibling() {
        let root = tempfile::tempdir().unwrap();
        let plugins = root.path().join("plugins");
        let other = root.path().join("other");
        std::fs::create_dir(&plugins).unwrap();
        std::fs::create_dir(&other).unwrap();
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&plugins, &link).unwrap();
        assert!(same_dir(&plugins, &plugins));
        assert!(same_dir(&plugins, &link));
        assert!(same_dir(&plugins, &other.join("../plugins")));
        assert!(!same_dir(&plugins, &other));
        assert!(!same_dir(&plugins, &root.path().join("missing")));
    }
}
