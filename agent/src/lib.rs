//! The live agent: sense, think, act.
//!
//! An [`Agent`] answers [`Signal`]s. Each signal starts a *turn*: one or
//! more *cycles* (`cycle.rs`: three steps, sense → think → act, each
//! handing the next a plain struct), each of which
//!
//! 1. takes the registry and memex snapshots (the whole cycle runs on
//!    them, so a skill swapped or a file edited meanwhile is seen by the
//!    next cycle, never half-way);
//! 2. chooses the context type from the signal (seed 004: a user's message
//!    or a tool's output → `tick_event`, a heartbeat → `tick_autonomous`);
//! 3. composes the execution pattern ([`foveal_prompt::execution`]) from the
//!    static limits, the context type and the runtime signals (token
//!    pressure from the last prompt's usage, consecutive errors, the
//!    event's class);
//! 4. assembles the prompt ([`foveal_prompt::prompt`]) with the tools the context
//!    type and the pattern allow, and passes it through the privacy gate
//!    ([`foveal_registry::egress`]);
//! 5. calls the [`Provider`], streaming the reply's text to the
//!    [`Output`];
//! 6. acts: runs the tool calls (the first only, unless the pattern
//!    allows several), asking for confirmation of dangerous ones when the
//!    pattern says so;
//! 7. records the messages in the [`Session`] and the usage in the cost
//!    tracker, and logs the cycle (id, generations, tokens, the time of
//!    each phase).
//!
//! Tool output is fed back as a new signal (`tool_output`): the next
//! cycle of the turn sees each result as a tool result (component 7000),
//! sent as a `tool` message answering its call's id right after the
//! assistant message that made the call (the protocol's own roles: memex
//! text and tool output never speak as the user), under the pattern of a
//! tool-output signal. A turn ends when the model
//! replies without calling a tool, when it calls a terminal tool (with
//! `terminal_ends_loop`), or when the tool-output cycles reach their
//! pattern's `max_iterations`. In a cycle whose pattern does not allow
//! several tools (`single_action`, or `multi_tool_enabled` false) only the
//! first call runs; the others are answered "not run". So a user's message,
//! whose pattern is `single_action` (seed 004: event class
//! `communication`), acts once, and the answer to what it did comes in the
//! cycles that follow. A provider error ends the turn with an error reply;
//! the agent lives and the next turn works.

pub mod activity;
pub mod agenda;
pub mod commands;
pub mod config;
pub mod control;
mod cycle;
pub mod explain;
pub mod focus;
pub mod host;
pub mod session;
pub use foveal_prompt::session_name;
pub mod settings;
pub mod skills;
pub mod tools;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use foveal_sdk::SignalKind;
use serde::Serialize;

use crate::config::Config;
use foveal_memex::Memex;
use foveal_memex::privacy::PrivacyTags;
use foveal_prompt::execution::ExecutionPattern;
pub use foveal_prompt::execution::ToolCategory;
use foveal_prompt::prompt::cost::CostTracker;
use foveal_prompt::prompt::{Assembler, PromptSettings};
use foveal_provider::Provider;
use foveal_registry::egress::Gate;
use foveal_registry::registry::Registry;
use session::{Entry, Session};
use tools::{JournalSettings, Tool, ToolError, ToolSource};

/// What a signal is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalSource {
    /// The user: the REPL, `foveal send`, `foveal ask`.
    UserInput,
    /// The periodic heartbeat.
    Heartbeat,
    /// A memex file changed outside the host.
    MemexChange,
    /// A skill was added, replaced or removed.
    SkillChange,
    /// A tool's output, within a turn.
    ToolOutput,
    /// The result of a delegated sub-task.
    Delegation,
}

impl SignalSource {
    /// The SDK's signal kind.
    pub fn kind(self) -> SignalKind {
        match self {
            Self::UserInput => SignalKind::USER,
            Self::Heartbeat => SignalKind::HEARTBEAT,
            Self::MemexChange => SignalKind::MEMEX_CHANGE,
            Self::SkillChange => SignalKind::SKILL_CHANGE,
            Self::ToolOutput => SignalKind::TOOL_OUTPUT,
            Self::Delegation => SignalKind::DELEGATION,
        }
    }

    /// Its name in logs and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::UserInput => "user_input",
            Self::Heartbeat => "heartbeat",
            Self::MemexChange => "memex_change",
            Self::SkillChange => "skill_change",
            Self::ToolOutput => "tool_output",
            Self::Delegation => "delegation",
        }
    }
}

/// Something the agent senses: one entry of the host's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    /// Its source.
    pub source: SignalSource,
    /// Its payload: the user's text, the delegation's result, what
    /// changed.
    pub payload: String,
    /// The object to put in foveal focus for this turn (and after it).
    pub focus: Option<String>,
}

impl Signal {
    /// A message from the user.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            source: SignalSource::UserInput,
            payload: text.into(),
            focus: None,
        }
    }

    /// A heartbeat.
    pub fn heartbeat() -> Self {
        Self {
            source: SignalSource::Heartbeat,
            payload: String::new(),
            focus: None,
        }
    }
}

/// Where a turn's reply goes while it is written: the REPL's terminal,
/// a `foveal send` client, `foveal ask`'s stdout.
pub trait Output: Send {
    /// A piece of the reply's text, as the model writes it.
    fn text(&mut self, text: &str);

    /// The turn failed: what the user is told instead of a reply. By
    /// default it goes where the reply's text goes.
    fn error(&mut self, text: &str) {
        self.text(text);
    }

    /// A tool ran (or was refused): its name and what it returned.
    fn tool(&mut self, name: &str, result: &Result<String, String>) {
        let _ = (name, result);
    }

    /// Asks the user whether a dangerous tool may run. The default (no one
    /// to ask) refuses.
    fn confirm<'a>(
        &'a mut self,
        tool: &'a str,
        arguments: &'a str,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        let _ = (tool, arguments);
        Box::pin(async { false })
    }

    /// Whether [`confirm`](Self::confirm) can ask someone.
    fn interactive(&self) -> bool {
        false
    }
}

/// An [`Output`] that keeps the text (for tests and `foveal send`).
#[derive(Debug, Default)]
pub struct Collect {
    /// The text written so far.
    pub text: String,
    /// The tools that ran, with their results.
    pub tools: Vec<(String, Result<String, String>)>,
}

impl Output for Collect {
    fn text(&mut self, text: &str) {
        self.text.push_str(text);
    }

    fn tool(&mut self, name: &str, result: &Result<String, String>) {
        self.tools.push((name.to_owned(), result.clone()));
    }
}

/// The time each phase of a cycle took, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Phases {
    /// Taking the snapshots and composing the pattern.
    pub sense_ms: f64,
    /// Assembling the prompt and passing it through the gate.
    pub assemble_ms: f64,
    /// Calling the model, until the reply ended.
    pub model_ms: f64,
    /// Running the tools and recording.
    pub act_ms: f64,
}

/// One cycle, as `foveal status` and the log report it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CycleSummary {
    /// The cycle's number in this process.
    pub id: u64,
    /// The signal it answered.
    pub signal: &'static str,
    /// The context type.
    pub context_type: &'static str,
    /// The registry generation it ran on.
    pub registry_generation: u64,
    /// The memex generation it ran on.
    pub memex_generation: u64,
    /// The prompt's tokens (byte bound unless counted exactly).
    pub prompt_tokens: u32,
    /// The reply's tokens, as the provider reported them.
    pub completion_tokens: Option<u64>,
    /// The prompt's tokens as the provider counted them: how many it
    /// reused from its cache (the embedded model's KV cache kept from the
    /// request before; a server's prompt cache) and how many it read.
    /// `None` when the provider reported no usage.
    pub prompt_cache: Option<PromptCacheUse>,
    /// The share of the budget the prompt used, 0–100.
    pub usage_percent: Option<u8>,
    /// The tools called.
    pub tool_calls: Vec<String>,
    /// The phases' times.
    pub phases: Phases,
    /// The error that ended it, if any.
    pub error: Option<String>,
    /// Its pattern.
    pub pattern: ExecutionPattern,
}

/// How a cycle's prompt used the provider's cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PromptCacheUse {
    /// Prompt tokens reused from the cache.
    pub reused_tokens: u64,
    /// Prompt tokens read anew.
    pub new_tokens: u64,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnReport {
    /// The reply's text (all cycles' text, in order).
    pub reply: String,
    /// The cycles it took.
    pub cycles: Vec<CycleSummary>,
    /// Why it stopped.
    pub stop: StopReason,
    /// The error shown to the user, if it failed.
    pub error: Option<String>,
}

/// Why a turn stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model replied without calling a tool.
    Replied,
    /// A terminal tool ended the loop.
    Terminal,
    /// The pattern's `max_iterations` was reached.
    MaxIterations,
    /// The provider or the prompt failed.
    Error,
    /// The signal needs no cycle (a change the host only logs).
    Ignored,
    /// A client cancelled it (`cancel` on the control socket).
    Cancelled,
}

/// `dir` made absolute, through its symbolic links when it exists.
pub fn absolute_dir(dir: &std::path::Path) -> std::path::PathBuf {
    dir.canonicalize()
        .or_else(|_| std::path::absolute(dir))
        .unwrap_or_else(|_| dir.to_path_buf())
}

/// What the host shows of itself (`foveal status`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Status {
    /// The host's process id.
    pub pid: u32,
    /// Seconds since the host started.
    pub uptime_secs: u64,
    /// The registry generation now.
    pub registry_generation: u64,
    /// The memex generation now.
    pub memex_generation: u64,
    /// The skills: name, version, status.
    pub skills: Vec<SkillStatus>,
    /// The share of the budget the last prompt used.
    pub usage_percent: Option<u8>,
    /// The last cycle.
    pub last_cycle: Option<CycleSummary>,
    /// Cycles run so far.
    pub cycles: u64,
    /// The foveal focus.
    pub focus: Option<String>,
    /// The title of the object in focus.
    pub focus_title: Option<String>,
    /// The session.
    pub session: String,
    /// The memex's files and folders (absolute): an editor follows the
    /// focus in these files only.
    pub memex_roots: Vec<std::path::PathBuf>,
    /// The host's configuration, as [`config::Config::id`]: `foveal ask`
    /// leaves its turn to a host with its own.
    pub config_id: String,
    /// The same but the provider's settings, as
    /// [`config::Config::prompt_id`]: `foveal context` and `foveal prompt`
    /// leave their work to a host with their own.
    pub prompt_id: String,
    /// The drop-in folder the host's watcher loads new builds from
    /// (absolute): `foveal skill install` into another folder says that
    /// this host will not load it.
    pub plugins_dir: Option<std::path::PathBuf>,
    /// The provider.
    pub provider: String,
    /// Signals waiting.
    pub queued: usize,
    /// Skill libraries this process has mapped (never unmapped), and
    /// their bytes, against `plugins.max_loads` and `plugins.max_load_mib`.
    pub loaded_libraries: u32,
    /// Bytes of those libraries.
    pub loaded_library_bytes: u64,
    /// The background embedder ([`foveal_embed::service`]); `None` when
    /// embeddings are off.
    pub embeddings: Option<foveal_embed::service::EmbedStatus>,
    /// Whether the private-text matcher in use was read from the on-disk
    /// index at the start (`memex.index`) rather than built; false again
    /// once an edit changed it.
    pub warm_index: bool,
}

/// A skill as `foveal status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillStatus {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: Option<String>,
    /// loaded, quarantined, …
    pub status: String,
    /// `cell: …` with its grants, or `in-process`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub isolation: String,
    /// Its cell, when it runs in one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cell: Option<CellState>,
}

/// A skill's cell as `foveal status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CellState {
    /// The cell's process (none while it restarts).
    pub pid: Option<u32>,
    /// Its resident memory, bytes.
    pub rss_bytes: Option<u64>,
    /// Times it was started again after dying or hanging.
    pub restarts: u32,
    /// What it tried and was refused, each once.
    pub refused: Vec<String>,
}

/// The skills of `snapshot` as `foveal status` shows them.
pub fn skill_statuses(snapshot: &foveal_registry::registry::Snapshot) -> Vec<SkillStatus> {
    snapshot
        .rows()
        .into_iter()
        .map(|r| {
            let cell = snapshot
                .get(&r.name)
                .filter(|slot| slot.skill().path() == r.path)
                .and_then(|slot| slot.skill().cell_status())
                .map(|c| CellState {
                    pid: c.pid,
                    rss_bytes: c.rss_bytes,
                    restarts: c.restarts,
                    refused: c.refused,
                });
            SkillStatus {
                name: r.name,
                version: r.version,
                status: r.status,
                isolation: r.isolation,
                cell,
            }
        })
        .collect()
}

/// Why an agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The session could not be opened.
    #[error(transparent)]
    Session(#[from] session::SessionError),
    /// The privacy gate could not be built.
    #[error(transparent)]
    Gate(#[from] foveal_registry::egress::GateError),
    /// The context window could not be read.
    #[error(transparent)]
    Window(#[from] foveal_prompt::window::WindowError),
    /// The usage record could not be read.
    #[error(transparent)]
    Cost(#[from] foveal_prompt::prompt::cost::CostError),
}

/// The agent: the state a host keeps between cycles.
pub struct Agent {
    config: Config,
    registry: Arc<Registry>,
    memex: Arc<Memex>,
    provider: Arc<dyn Provider>,
    assembler: Assembler,
    gate: Arc<Gate>,
    privacy: PrivacyTags,
    session: Session,
    costs: Arc<CostTracker>,
    /// The background saves not known to be finished.
    persisting: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// When the last background save started, and whether one is
    /// scheduled.
    persist_state: Arc<Mutex<PersistState>>,
    journal: JournalSettings,
    focus: Option<String>,
    recent_errors: u32,
    usage_percent: Option<u8>,
    next_cycle: u64,
    status: Arc<Mutex<Status>>,
    started: Instant,
    /// Memex generations this agent's own writes published.
    own_writes: Vec<u64>,
    /// Every tool, for a registry generation.
    tools_cache: Option<(u64, Arc<[Tool]>)>,
    /// What the last check of earlier requests made of their strings.
    request_memo: foveal_registry::egress::RequestMemo,
    /// The session's context window (seed 002).
    window: Arc<foveal_prompt::window::Window>,
    /// Where the activity log's lines are read from
    /// ([`activity::log`]).
    log_ring: &'static foveal_gate::logs::LogRing,
    cancel: Arc<Cancel>,
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("session", &self.session.name())
            .field("provider", &self.provider.describe())
            .field("focus", &self.focus)
            .finish_non_exhaustive()
    }
}

/// Ends the turn in flight from outside it (the control socket's
/// `cancel`, and `stop`, SIGINT and SIGTERM): the reply being streamed
/// stops (what came of it is kept in the session), a tool running finishes
/// and its result is recorded, and no further cycle starts — so the
/// session stays a valid conversation.
#[derive(Debug)]
pub struct Cancel {
    /// A turn is running.
    running: std::sync::atomic::AtomicBool,
    /// The host is stopping: every turn is cancelled, even one that
    /// starts after [`Cancel::stop`].
    stopping: std::sync::atomic::AtomicBool,
    /// Set when the running turn is asked to end.
    asked: tokio::sync::watch::Sender<bool>,
}

impl Default for Cancel {
    fn default() -> Self {
        Self {
            running: std::sync::atomic::AtomicBool::new(false),
            stopping: std::sync::atomic::AtomicBool::new(false),
            asked: tokio::sync::watch::Sender::new(false),
        }
    }
}

impl Cancel {
    /// Asks the turn in flight to end; false when none runs.
    pub fn cancel(&self) -> bool {
        if !self.running.load(std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        self.asked.send_replace(true);
        true
    }

    /// Cancels the turn in flight, as [`Cancel::cancel`] does, and every
    /// turn after it: the host is stopping. Whether a turn was in flight.
    pub fn stop(&self) -> bool {
        self.stopping
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.asked.send_replace(true);
        self.running.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn stopping(&self) -> bool {
        self.stopping.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn begin(&self) {
        self.asked.send_replace(self.stopping());
        self.running
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn end(&self) {
        self.running
            .store(false, std::sync::atomic::Ordering::SeqCst);
        self.asked.send_replace(self.stopping());
    }

    fn is_asked(&self) -> bool {
        *self.asked.borrow()
    }

    /// Resolves once the turn is asked to end.
    async fn asked(&self) {
        let mut asked = self.asked.subscribe();
        let _ = asked.wait_for(|asked| *asked).await;
    }
}

/// Background saves of the session and the usage record are at most this
/// often (group commit): each save covers every turn before it.
pub const PERSIST_EVERY: Duration = Duration::from_secs(1);

/// The state of the grouped background saves.
#[derive(Debug, Default)]
struct PersistState {
    /// A save is scheduled and has not started.
    scheduled: bool,
    /// When the last one started.
    last: Option<Instant>,
}

/// What stands for text from the model that held something private.
pub const WITHHELD: &str = "[withheld: this text held private text or a secret]";

/// Turns longer than this many cycles are cut whatever the pattern says
/// (the pattern's own limit is at most 10).
const TURN_CAP: u32 = 10;

impl Agent {
    /// An agent over loaded skills and memex, answering with `provider`,
    /// recording into `session`.
    pub fn new(
        config: Config,
        registry: Arc<Registry>,
        memex: Arc<Memex>,
        provider: Arc<dyn Provider>,
        session: Session,
    ) -> Result<Self, AgentError> {
        let gate = Gate::from_config(&config)?;
        Self::with_gate(config, registry, memex, provider, session, gate)
    }

    /// [`new`](Self::new) with a gate built already (from the same
    /// configuration): a command can build it while the skills load.
    pub fn with_gate(
        config: Config,
        registry: Arc<Registry>,
        memex: Arc<Memex>,
        provider: Arc<dyn Provider>,
        session: Session,
        gate: Gate,
    ) -> Result<Self, AgentError> {
        let privacy = PrivacyTags::new(&config.privacy_tags);
        let costs = Arc::new(CostTracker::open(
            &config.data_dir,
            config.prompt.prices.clone(),
        )?);
        let roots: Vec<_> = memex.roots().map(std::path::Path::to_path_buf).collect();
        let journal = JournalSettings {
            path: config
                .agent
                .journal_path(&roots)
                .unwrap_or_else(|| config.data_dir.join("journal.org")),
        };
        let status = Status {
            pid: std::process::id(),
            session: session.name().to_owned(),
            memex_roots: memex.roots().map(std::path::Path::to_path_buf).collect(),
            config_id: config.id(),
            prompt_id: config.prompt_id(),
            // The folder the host's watcher loads new builds from; none
            // when it does not watch.
            plugins_dir: config
                .plugins
                .watch
                .then(|| absolute_dir(&config.plugins.dir)),
            provider: provider.describe(),
            ..Status::default()
        };
        let gate = Arc::new(gate);
        let window = Arc::new(foveal_prompt::window::Window::open(
            &config.data_dir,
            session.name(),
            config.window,
            Arc::clone(&registry),
        )?);
        let agent = Self {
            assembler: Assembler::with_gate(PromptSettings::from(&config), Arc::clone(&gate)),
            config,
            registry,
            memex,
            provider,
            gate,
            privacy,
            session,
            costs,
            persisting: Mutex::new(Vec::new()),
            persist_state: Arc::default(),
            journal,
            focus: None,
            recent_errors: 0,
            usage_percent: None,
            next_cycle: 1,
            status: Arc::new(Mutex::new(status)),
            started: Instant::now(),
            own_writes: Vec::new(),
            tools_cache: None,
            request_memo: foveal_registry::egress::RequestMemo::default(),
            window,
            log_ring: activity::log(),
            cancel: Arc::default(),
        };
        agent.refresh_status(None);
        Ok(agent)
    }

    /// What cancels the turn in flight, shared with the control socket.
    pub fn canceller(&self) -> Arc<Cancel> {
        Arc::clone(&self.cancel)
    }

    /// The status, shared: the control socket reads it while a cycle runs.
    pub fn status(&self) -> Arc<Mutex<Status>> {
        Arc::clone(&self.status)
    }

    /// The foveal focus.
    pub fn focus(&self) -> Option<&str> {
        self.focus.as_deref()
    }

    /// Sets (or clears) the foveal focus: a visible object, by its id or
    /// its handle in the outline (`^k3`).
    pub fn set_focus(&mut self, id: Option<&str>) -> Result<(), ToolError> {
        match id.map(str::trim).filter(|i| !i.is_empty()) {
            None => {
                if self.focus.take().is_some() {
                    activity::note("focus cleared");
                }
            }
            Some(reference) => {
                // An id, or a handle of the outline (`^k3`).
                let snapshot = self.memex.snapshot();
                let id = tools::resolve(&snapshot, &self.privacy, reference)?
                    .object
                    .id()
                    .to_owned();
                if self.focus.as_deref() != Some(id.as_str()) {
                    activity::note(&format!("focus moved to {id}"));
                }
                self.focus = Some(id);
            }
        }
        self.refresh_status(None);
        Ok(())
    }

    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The session's context window, shared: the control socket changes
    /// it while a cycle runs (each change is whole; a cycle sees the window
    /// as it was when its prompt was assembled).
    pub fn window(&self) -> &Arc<foveal_prompt::window::Window> {
        &self.window
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The title of the object in focus (`None` without a focus, or when
    /// the object is gone or private now).
    pub fn focus_title(&self) -> Option<String> {
        let id = self.focus.as_deref()?;
        let snapshot = self.memex.snapshot();
        tools::visible_object(&snapshot, &self.privacy, id)
            .ok()
            .map(|o| o.title().to_owned())
    }

    /// The privacy tags.
    pub fn privacy(&self) -> &PrivacyTags {
        &self.privacy
    }

    /// The memex.
    pub fn memex(&self) -> &Arc<Memex> {
        &self.memex
    }

    /// The privacy gate every prompt, request, recorded entry and (once
    /// installed) log line passes.
    pub fn gate(&self) -> &Arc<Gate> {
        &self.gate
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Whether the memex generation `generation` was published by one of
    /// this agent's own writes (so the change is not news to it).
    pub fn is_own_write(&self, generation: u64) -> bool {
        self.own_writes.contains(&generation)
    }

    /// Waits for the background saves of earlier turns, then syncs the
    /// session and saves the usage record: at shutdown, and before
    /// `foveal ask` exits.
    pub async fn sync(&self) -> Result<(), session::SessionError> {
        let pending: Vec<_> =
            std::mem::take(&mut *self.persisting.lock().unwrap_or_else(|e| e.into_inner()));
        for task in pending {
            // A save waiting for its turn is not needed: this one covers
            // it. One already writing finishes first (the usage record's
            // save lock orders them).
            task.abort();
        }
        {
            let mut state = self.persist_state.lock().unwrap_or_else(|e| e.into_inner());
            state.scheduled = false;
            state.last = Some(Instant::now());
        }
        if let Err(error) = self.costs.save_if_changed() {
            tracing::warn!(target: "foveal::agent", "usage not saved: {error}");
        }
        self.session.sync()
    }

    /// Every tool there is now: the host's, then the skills' (a skill's
    /// tool with a name already taken is left out, with a warning). The
    /// skills' declarations are asked once per registry generation.
    pub fn tools(&mut self) -> Arc<[Tool]> {
        let skills = self.registry.snapshot();
        match &self.tools_cache {
            Some((generation, tools)) if *generation == skills.generation() => Arc::clone(tools),
            _ => {
                let mut all = tools::builtins();
                let (skills_tools, failed) = skill_tools_checked(&skills, &all);
                all.extend(skills_tools);
                let all: Arc<[Tool]> = all.into();
                if !failed {
                    self.tools_cache = Some((skills.generation(), Arc::clone(&all)));
                }
                all
            }
        }
    }

    /// Answers `signal`: one turn. A [`Cancel`] ends it early
    /// ([`StopReason::Cancelled`]).
    pub async fn turn(&mut self, signal: Signal, out: &mut dyn Output) -> TurnReport {
        self.cancel.begin();
        let report = self.turn_inner(signal, out).await;
        self.cancel.end();
        report
    }

    async fn turn_inner(&mut self, signal: Signal, out: &mut dyn Output) -> TurnReport {
        if let Some(focus) = &signal.focus
            && let Err(error) = self.set_focus(Some(focus))
        {
            let message = format!("focus not changed: {error}");
            out.text(&message);
            return TurnReport {
                reply: message.clone(),
                cycles: Vec::new(),
                stop: StopReason::Error,
                error: Some(message),
            };
        }
        let mut report = TurnReport {
            reply: String::new(),
            cycles: Vec::new(),
            stop: StopReason::Replied,
            error: None,
        };
        if signal.source == SignalSource::UserInput && signal.payload.trim().is_empty() {
            // Only a change of focus (`/focus ID`).
            report.reply = match &self.focus {
                Some(id) => format!("focus: {id}"),
                None => "focus cleared".to_owned(),
            };
            out.text(&report.reply);
            report.stop = StopReason::Ignored;
            return report;
        }
        let message: Option<Arc<str>> = match signal.source {
            SignalSource::UserInput | SignalSource::Delegation => {
                Some(Arc::from(signal.payload.as_str()))
            }
            SignalSource::MemexChange | SignalSource::SkillChange => Some(Arc::from(
                format!("Event ({}): {}", signal.source.name(), signal.payload).as_str(),
            )),
            SignalSource::Heartbeat | SignalSource::ToolOutput => None,
        };
        // The history the first cycle sees ends before this turn.
        let mut history_end = self.session.entries().len();
        // The message as it will be sent: through the gate now, recorded
        // so, and replayed so in later turns whatever the memex becomes.
        let message = match message {
            Some(typed) => {
                let sent: Arc<str> = Arc::from(self.gated(&typed).as_str());
                self.record(Entry::user(&*typed, &*sent));
                Some(sent)
            }
            None => None,
        };
        let mut source = signal.source;
        // The session entries holding the last cycle's tool results.
        let mut results: Option<(usize, usize)> = None;
        let mut continuations = 0;
        let mut limit = TURN_CAP;
        loop {
            let first = source == signal.source && continuations == 0 && report.cycles.is_empty();
            let outcome = self
                .cycle(
                    source,
                    if first { message.clone() } else { None },
                    history_end,
                    results.take(),
                    out,
                )
                .await;
            if source == SignalSource::ToolOutput {
                continuations += 1;
                limit = limit.min(outcome.summary.pattern.max_iterations.max(1));
            }
            report.reply.push_str(&outcome.text);
            let error = outcome.summary.error.clone();
            let called = !outcome.summary.tool_calls.is_empty();
            report.cycles.push(outcome.summary);
            if let Some(error) = error {
                report.stop = StopReason::Error;
                report.error = Some(error);
                break;
            }
            if self.cancel.is_asked() {
                report.stop = StopReason::Cancelled;
                let note = "\n[cancelled]";
                out.text(note);
                report.reply.push_str(note);
                break;
            }
            if outcome.terminal {
                report.stop = StopReason::Terminal;
                break;
            }
            if !called {
                report.stop = StopReason::Replied;
                break;
            }
            if continuations >= limit {
                report.stop = StopReason::MaxIterations;
                let calls: usize = report.cycles.iter().map(|c| c.tool_calls.len()).sum();
                let note = format!(
                    "\n[stopped after {calls} tool calls in {continuations} tool iterations: the limit of this turn]"
                );
                out.text(&note);
                report.reply.push_str(&note);
                break;
            }
            // The tool output is the next signal.
            source = SignalSource::ToolOutput;
            results = Some((outcome.history_end, self.session.entries().len()));
            history_end = outcome.history_end;
        }
        self.persist_in_background();
        report
    }

    /// Syncs the session and saves the usage record on a blocking thread,
    /// after the turn: the reply does not wait for the disk. Saves are
    /// grouped: at most one per [`PERSIST_EVERY`]; a turn that ends while
    /// one is scheduled is covered by it. (Outside a tokio runtime, right
    /// away.) [`sync`](Self::sync) saves at once, for shutdown and for
    /// `foveal ask`.
    fn persist_in_background(&self) {
        let session = self.session.sync_handle();
        let costs = Arc::clone(&self.costs);
        let persist = move || {
            if let Some(session) = session
                && let Err(error) = session.sync_data()
            {
                tracing::warn!(target: "foveal::agent", "session not synced: {error}");
            }
            if let Err(error) = costs.save_if_changed() {
                tracing::warn!(target: "foveal::agent", "usage not saved: {error}");
            }
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            persist();
            return;
        };
        let delay = {
            let mut state = self.persist_state.lock().unwrap_or_else(|e| e.into_inner());
            if state.scheduled {
                return;
            }
            state.scheduled = true;
            state.last.map_or(Duration::ZERO, |last| {
                PERSIST_EVERY.saturating_sub(last.elapsed())
            })
        };
        let state = Arc::clone(&self.persist_state);
        let task = runtime.spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            {
                // From here on, a turn that ends schedules the next save:
                // what it wrote may come after this one's sync.
                let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
                state.scheduled = false;
                state.last = Some(Instant::now());
            }
            let _ = tokio::task::spawn_blocking(persist).await;
        });
        let mut pending = self.persisting.lock().unwrap_or_else(|e| e.into_inner());
        pending.retain(|t| !t.is_finished());
        pending.push(task);
    }

    /// `text` through the privacy gate, on the current snapshots.
    fn gated(&self, text: &str) -> String {
        self.gated_with(text, &self.memex.snapshot(), &self.registry.snapshot())
    }

    fn record(&mut self, entry: Entry) {
        if let Err(error) = self.session.append(entry) {
            tracing::error!(target: "foveal::agent", "{error}");
        }
    }

    /// Brings the shared status up to date.
    pub fn refresh_status(&self, last: Option<&CycleSummary>) {
        let skills = self.registry.snapshot();
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        status.uptime_secs = self.started.elapsed().as_secs();
        status.registry_generation = skills.generation();
        status.memex_generation = self.memex.snapshot().generation();
        status.skills = skill_statuses(&skills);
        status.usage_percent = self.usage_percent;
        status.loaded_libraries = self.registry.loader().loads();
        status.loaded_library_bytes = self.registry.loader().loaded_bytes().0;
        status.focus.clone_from(&self.focus);
        status.focus_title = self.focus_title();
        status.cycles = self.next_cycle - 1;
        if let Some(last) = last {
            status.last_cycle = Some(last.clone());
        }
    }
}

/// The most bytes of text and tool-call arguments read of one reply: 32
/// a token (a token is rarely more than 16 bytes of text), and 64 KiB at
/// least.
pub fn max_reply_bytes(max_reply_tokens: u32) -> usize {
    (max_reply_tokens as usize).saturating_mul(32).max(64 << 10)
}

/// The tools the loaded skills declare (their `tools` hook), each checked:
/// a valid name not already taken (the host's tools come first, then
/// skills by priority), a JSON object schema, a known category. A
/// declaration that fails a check is left out with a warning; a skill whose
/// hook fails offers none this time.
pub fn skill_tools(skills: &foveal_registry::registry::Snapshot, taken: &[Tool]) -> Vec<Tool> {
    skill_tools_checked(skills, taken).0
}

/// [`skill_tools`], and whether a skill's `tools` hook failed (then the
/// list must not be cached: the next cycle asks again, and each failure
/// counts towards quarantine).
fn skill_tools_checked(
    skills: &foveal_registry::registry::Snapshot,
    taken: &[Tool],
) -> (Vec<Tool>, bool) {
    use foveal_registry::registry::hooks;
    let mut names: Vec<String> = taken.iter().map(|t| t.name.clone()).collect();
    let mut out = Vec::new();
    let mut failed = false;
    for slot in skills.skills() {
        let skill = &slot.skill().info().name;
        let declared = match slot.call(hooks::TOOLS, |f| f()) {
            Ok(declared) => declared,
            Err(error) if error.is_not_loaded() => continue,
            Err(error) => {
                // A failure is said on stderr once per cause in this
                // process (`foveal_registry::skill_errors`).
                let said = error.say_failure();
                failed |= said;
                if !said
                    && !matches!(
                        error.reason(),
                        foveal_registry::registry::Reason::NoHook { .. }
                    )
                {
                    tracing::warn!(target: "foveal::agent", skill = %skill, "tools not offered: {error}");
                }
                continue;
            }
        };
        for decl in declared.iter() {
            match check_decl(decl, &names) {
                Ok((parameters, category)) => {
                    names.push(decl.name.to_string());
                    out.push(Tool {
                        name: decl.name.to_string(),
                        description: decl.description.to_string(),
                        parameters,
                        category,
                        source: ToolSource::Skill(skill.clone()),
                    });
                }
                Err(why) => {
                    tracing::warn!(target: "foveal::agent", skill = %skill, tool = %decl.name, "tool not offered: {why}");
                }
            }
        }
    }
    (out, failed)
}

/// Why the host does not offer the declared tool `decl` (given the
/// host's tools and the skills' tools it offers): what `skill-list
/// --tools` says of it.
pub fn tool_problem(decl: &foveal_sdk::ToolDecl, host: &[Tool], offered: &[Tool]) -> String {
    let taken: Vec<String> = host
        .iter()
        .chain(offered)
        .filter(|t| t.name != decl.name.as_str())
        .map(|t| t.name.clone())
        .collect();
    match check_decl(decl, &taken) {
        Err(why) => why,
        Ok(_) => "another tool has this name".to_owned(),
    }
}

fn check_decl(
    decl: &foveal_sdk::ToolDecl,
    taken: &[String],
) -> Result<(serde_json::Value, ToolCategory), String> {
    let name = decl.name.as_str();
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err("its name must be 1-64 letters, digits, `_` or `-`".to_owned());
    }
    if taken.iter().any(|t| t == name) {
        return Err("another tool has this name".to_owned());
    }
    let parameters: serde_json::Value = serde_json::from_str(decl.parameters_json.as_str())
        .map_err(|e| format!("its parameters are not JSON: {e}"))?;
    if !parameters.is_object() {
        return Err("its parameters must be a JSON schema object".to_owned());
    }
    let category = decl
        .category
        .as_str()
        .parse::<ToolCategory>()
        .map_err(|e| format!("category: {e}"))?;
    Ok((parameters, category))
}

/// One call of a skill's tool, with what the tool is lent.
#[derive(Debug)]
pub struct SkillToolCall<'a> {
    /// The skill that declared the tool.
    pub skill: &'a str,
    /// The tool.
    pub name: &'a str,
    /// Its arguments.
    pub args: &'a serde_json::Value,
    /// The memex as the skill may see it.
    pub view: foveal_memex::view::SnapshotView,
    /// The object in focus.
    pub focus: Option<String>,
    /// The skill's configuration (`[skills.<name>]`), as JSON.
    pub config: String,
    /// The session the tool runs in, as a host fact of the call
    /// ([`foveal_sdk::call::session`]).
    pub session: Option<String>,
}

/// Runs a skill's tool through the registry: its `run_tool` hook, lent
/// the memex view, the focus and its configuration, or — for a library
/// built before `run_tool` existed — its `call_tool(name, args)`. A
/// failing or panicking skill is a tool error for the model, never a
/// crash.
pub fn call_skill_tool(
    skills: &foveal_registry::registry::Snapshot,
    call: SkillToolCall<'_>,
) -> Result<String, String> {
    use abi_stable::std_types::RStr;
    use foveal_registry::registry::hooks;
    let SkillToolCall {
        skill,
        name,
        args,
        view,
        focus,
        config,
        session,
    } = call;
    let args = args.to_string();
    let tool = name.to_owned();
    let has_run_tool = skills
        .get(skill)
        .is_some_and(|slot| slot.skill().info().hooks.contains(&hooks::RUN_TOOL.name));
    let result = if has_run_tool {
        let lent = view.clone();
        skills.call_lending(skill, hooks::RUN_TOOL, Some(&lent), move |f| {
            let files = view.file_views();
            let memex = view.view_of(&files);
            let request = foveal_sdk::ToolCallRequest {
                name: RStr::from_str(&tool),
                args_json: RStr::from_str(&args),
                focus: focus.as_deref().map(RStr::from_str).into(),
                config_json: RStr::from_str(&config),
                memex: &memex,
            };
            let facts = foveal_registry::host_api::facts(session.as_deref());
            foveal_sdk::call::with_facts(&facts, || f(&request))
        })
    } else {
        skills.call(skill, hooks::CALL_TOOL, move |f| {
            f(RStr::from_str(&tool), RStr::from_str(&args))
        })
    };
    result
        .map(|text| text.into_string())
        .map_err(|error| format!("the skill {skill} failed to run {name}: {error}"))
}

#[cfg(test)]
mod tests;
