//! The long-running host: one queue of signals, one agent answering them.
//!
//! Sources feed the queue: the REPL (lines from stdin), clients of the
//! control socket (`foveal send`), the heartbeat, and the watchers (memex
//! and skill changes, seen by their generation numbers). The loop takes
//! one signal at a time and runs its turn to the end. Ctrl-C (SIGINT),
//! SIGTERM and `foveal stop` cancel the turn in flight at once (what the
//! model sent so far is kept, as the socket's `cancel` keeps it) and stop
//! the host; a second SIGINT or SIGTERM — or one after `foveal stop` —
//! exits at once. The signals are taken on a thread of their own
//! ([`Shutdown`]), so the host's thread being busy delays neither. The
//! end of stdin (in REPL mode) stops the host once what came before it is
//! answered. The session is synced and the socket removed.

use std::io::Write as _;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use super::control::{self, ControlSocket, Reply, Request};
use super::{Agent, Output, Signal, SignalSource, StopReason};

/// How the host runs.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// Read the user's messages from stdin (and stop at its end).
    pub repl: bool,
    /// Print a `> ` prompt (stdin is a terminal).
    pub prompt: bool,
    /// Seconds between heartbeats; 0 for none.
    pub heartbeat_secs: u64,
    /// Start a turn on memex changes made outside the host.
    pub react_to_memex_changes: bool,
    /// Start a turn on skill changes.
    pub react_to_skill_changes: bool,
}

/// One entry of the queue: a signal, and where its reply goes — or the
/// end of the REPL's input, which stops the host once what came before it
/// is answered.
#[derive(Debug)]
struct Queued {
    signal: Option<Signal>,
    reply: Option<ClientReply>,
}

/// Where a client's turn is answered, and whether its `done` carries the
/// turn's report (`send`'s `report`).
#[derive(Debug)]
struct ClientReply {
    tx: mpsc::UnboundedSender<Reply>,
    report: bool,
}

/// A change of focus a control client asked for (`focus`): applied
/// between turns, then answered.
#[derive(Debug)]
struct FocusChange {
    /// The object, or `None` to clear the focus.
    id: Option<String>,
    /// Where the answer goes: [`Reply::Focus`], or [`Reply::Error`].
    answer: oneshot::Sender<Reply>,
}

/// A line typed while a dangerous tool waits for a yes or no goes to it.
type PendingConfirm = Arc<Mutex<Option<oneshot::Sender<String>>>>;

/// What the control socket's clients are served from.
struct Shared {
    queue: mpsc::UnboundedSender<Queued>,
    focus: mpsc::UnboundedSender<FocusChange>,
    stop: watch::Sender<bool>,
    status: Arc<Mutex<super::Status>>,
    window: Arc<foveal_prompt::window::Window>,
    /// The events pushed to subscribers.
    events: broadcast::Sender<Reply>,
    cancel: Arc<super::Cancel>,
    context: ContextParts,
    /// The provider's model, for `hello`.
    model: Option<String>,
    /// The control clients served at once ([`clients_for`]).
    max_clients: usize,
    /// The host's `config_id` and `prompt_id` ([`crate::config::Config::id`],
    /// [`crate::config::Config::prompt_id`]).
    ids: (String, String),
}

/// What the `context` request assembles from.
struct ContextParts {
    config: crate::config::Config,
    registry: Arc<foveal_registry::registry::Registry>,
    memex: Arc<foveal_memex::Memex>,
    gate: Arc<foveal_registry::egress::Gate>,
    privacy: foveal_memex::privacy::PrivacyTags,
}

/// Events kept for a subscriber that reads slowly; one that falls further
/// behind is sent the whole status instead.
const EVENT_BACKLOG: usize = 256;

/// The `skills` event for `snapshot`.
fn skills_event(snapshot: &foveal_registry::registry::Snapshot) -> Reply {
    let skills = super::skill_statuses(snapshot);
    Reply::Skills {
        generation: snapshot.generation(),
        skills: serde_json::to_value(skills).unwrap_or_default(),
    }
}

/// Runs the host until it is stopped. Returns once the turn in flight has
/// ended (a stop cancels it) and the session is synced.
pub async fn run(
    mut agent: Agent,
    socket: Option<ControlSocket>,
    options: HostOptions,
    shutdown: Option<&Shutdown>,
) -> anyhow::Result<()> {
    // Each control client is a descriptor: the host serves as many as the
    // open-files limit leaves room for, and says so when that is fewer
    // than it would.
    let files = raise_open_files_limit();
    let max_clients = clients_for(files.map(|f| f.soft), open_files_now());
    if let Some(OpenFiles { soft, hard }) = files
        && max_clients < MAX_CLIENTS
    {
        tracing::warn!(
            target: CONTROL_LOG,
            "the open-files limit is {soft} (hard limit {hard}): the control socket serves {max_clients} clients at once, not {MAX_CLIENTS}; raise the limit (`ulimit -n`, systemd's LimitNOFILE=) for more"
        );
    }
    // The private-text matcher is built now, beside the rest of the
    // start, so that the first turn does not wait for it (on a memex of a
    // million headlines it takes seconds); a turn that comes first waits
    // for this build rather than starting one of its own.
    {
        let gate = Arc::clone(agent.gate());
        // A full build after an edit writes the index beside the turn.
        gate.write_index_in_background();
        let memex = Arc::clone(agent.memex());
        let warm = std::thread::Builder::new()
            .name("foveal-gate".into())
            .spawn(move || {
                lower_priority();
                gate.prepare(&memex.snapshot());
            });
        if let Err(error) = warm {
            tracing::warn!(target: "foveal::privacy", "the private-text matcher is built at the first turn: no thread for it now ({error})");
        }
    }
    let (queue, mut signals) = mpsc::unbounded_channel::<Queued>();
    let (focus_tx, mut focus_changes) = mpsc::unbounded_channel::<FocusChange>();
    let (stop_tx, mut stop) = watch::channel(false);
    // The matcher derived after edits is built in full beside it once the
    // memex has been quiet for a while ([`Gate::heal`]).
    {
        let gate = Arc::clone(agent.gate());
        let memex = Arc::clone(agent.memex());
        let stopping = stop_tx.subscribe();
        let healer = std::thread::Builder::new()
            .name("foveal-heal".into())
            .spawn(move || heal_when_quiet(&gate, &memex, &stopping, HEAL_AFTER));
        if let Err(error) = healer {
            tracing::warn!(target: "foveal::privacy", "the matcher derived after edits is not rebuilt in full while the host runs: no thread for it ({error})");
        }
    }
    let status = agent.status();
    let window = Arc::clone(agent.window());
    let pending: PendingConfirm = Arc::default();
    let (events, _) = broadcast::channel::<Reply>(EVENT_BACKLOG);

    // Pushed events: each registry and memex publish, as it happens.
    {
        let registry = Arc::clone(agent.registry());
        let mut changes = registry.changes();
        let pushed = events.clone();
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                changes.borrow_and_update();
                let _ = pushed.send(skills_event(&registry.snapshot()));
            }
        });
        let mut changes = agent.memex().changes();
        let pushed = events.clone();
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let generation = *changes.borrow_and_update();
                let _ = pushed.send(Reply::Memex { generation });
            }
        });
    }

    // Shutdown: SIGINT (Ctrl-C) and SIGTERM, taken on a thread of their
    // own ([`Shutdown`]), cancel the turn in flight and stop the host from
    // now on; a second one — or one after `foveal stop` — exits at once.
    if let Some(shutdown) = shutdown {
        if let Some(socket) = &socket {
            shutdown.socket(socket.file());
        }
        shutdown.host(stop_tx.clone(), agent.canceller());
    }

    // The REPL's reader: a thread, since stdin blocks.
    if options.repl {
        let queue = queue.clone();
        let pending = Arc::clone(&pending);
        let status = Arc::clone(&status);
        std::thread::Builder::new()
            .name("foveal-stdin".into())
            .spawn(move || read_stdin(&queue, &pending, &status))?;
    }

    // The control socket. Its clients are counted, so that the host waits
    // for their last replies to be written before it exits. A client beyond
    // the limit is answered in one line (and `stop` is obeyed); a client
    // that sends nothing is closed after `control::REQUEST_WAIT`.
    let clients = Arc::new(tokio::sync::Semaphore::new(max_clients));
    if let Some(socket) = socket {
        let shared = Arc::new(Shared {
            queue: queue.clone(),
            focus: focus_tx,
            stop: stop_tx.clone(),
            status: Arc::clone(&status),
            window: Arc::clone(&window),
            events: events.clone(),
            cancel: agent.canceller(),
            context: ContextParts {
                config: agent.config().clone(),
                registry: Arc::clone(agent.registry()),
                memex: Arc::clone(agent.memex()),
                gate: Arc::clone(agent.gate()),
                privacy: agent.privacy().clone(),
            },
            model: agent.config().provider.model.clone(),
            max_clients,
            ids: (agent.config().id(), agent.config().prompt_id()),
        });
        let clients = Arc::clone(&clients);
        let beyond = Arc::new(tokio::sync::Semaphore::new(max_clients));
        tokio::spawn(async move {
            let mut refusals = Burst::default();
            let mut failures = Burst::default();
            loop {
                match socket.accept().await {
                    Ok(stream) => {
                        let shared = Arc::clone(&shared);
                        if let Ok(permit) = Arc::clone(&clients).try_acquire_owned() {
                            tokio::spawn(async move {
                                if let Err(error) = serve(stream, &shared).await {
                                    tracing::debug!(target: "foveal::agent::host", "control client: {error}");
                                }
                                drop(permit);
                            });
                            continue;
                        }
                        if refusals.starts() {
                            tracing::warn!(
                                target: CONTROL_LOG,
                                "the control socket has {max_clients} clients at once; the ones beyond are refused (a `stop` among them is obeyed) until some finish"
                            );
                        }
                        match Arc::clone(&beyond).try_acquire_owned() {
                            Ok(permit) => {
                                tokio::spawn(async move {
                                    if let Err(error) = refuse(stream, &shared).await {
                                        tracing::debug!(target: "foveal::agent::host", "control client beyond the limit: {error}");
                                    }
                                    drop(permit);
                                });
                            }
                            // Twice the limit: answered without being read.
                            Err(_) => answer_unread(stream, &busy_line(max_clients)),
                        }
                    }
                    Err(error) => {
                        if failures.starts() {
                            tracing::warn!(target: CONTROL_LOG, "control socket: {error}");
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
    }

    // The heartbeat.
    if options.heartbeat_secs > 0 {
        let queue = queue.clone();
        let every = Duration::from_secs(options.heartbeat_secs);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                interval.tick().await;
                if queue
                    .send(Queued {
                        signal: Some(Signal::heartbeat()),
                        reply: None,
                    })
                    .is_err()
                {
                    return;
                }
            }
        });
    }

    // Changes, seen by their generation numbers (and the skills' rows,
    // which also say when one is quarantined), and told to the activity
    // log in words.
    let mut seen_memex = agent.memex().snapshot();
    let mut seen_skills = agent.registry().snapshot().generation();
    let mut seen_rows = agent.registry().snapshot().rows();
    let mut changes = tokio::time::interval(Duration::from_millis(250));
    changes.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);

    if options.prompt {
        print_prompt();
    }
    loop {
        tokio::select! {
            biased;
            _ = stop.changed() => break,
            // Between turns: a turn in flight keeps the focus it began
            // with.
            Some(change) = focus_changes.recv() => {
                let before = agent.focus().map(str::to_owned);
                let reply = match agent.set_focus(change.id.as_deref()) {
                    Ok(()) => Reply::Focus {
                        focus: agent.focus().map(str::to_owned),
                        title: agent.focus_title(),
                    },
                    Err(error) => Reply::Error {
                        message: format!("focus not changed: {error}"),
                    },
                };
                if agent.focus() != before.as_deref() {
                    let _ = events.send(Reply::Focus {
                        focus: agent.focus().map(str::to_owned),
                        title: agent.focus_title(),
                    });
                }
                let _ = change.answer.send(reply);
            }
            queued = signals.recv() => {
                let Some(queued) = queued else { break };
                let Some(signal) = queued.signal else { break };
                status.lock().unwrap_or_else(|e| e.into_inner()).queued = signals.len();
                let repl = queued.reply.is_none() && signal.source == SignalSource::UserInput;
                let began = std::time::Instant::now();
                let focus_before = agent.focus().map(str::to_owned);
                let rows_before = agent.registry().snapshot().rows();
                let _ = events.send(Reply::CycleStarted { signal: signal.source.name().to_owned() });
                let report = match queued.reply {
                    Some(reply) => {
                        let mut out = ClientOutput { tx: reply.tx.clone() };
                        let report = agent.turn(signal, &mut out).await;
                        let _ = reply.tx.send(Reply::Done {
                            stop: report.stop,
                            error: report.error.clone(),
                            cycles: report.cycles.len(),
                            report: reply
                                .report
                                .then(|| serde_json::to_string_pretty(&report).ok())
                                .flatten(),
                        });
                        report
                    }
                    None => {
                        // Only a terminal can be asked: a piped REPL
                        // refuses a dangerous tool at once.
                        let mut out = TerminalOutput {
                            pending: Arc::clone(&pending),
                            repl: repl && options.prompt,
                            stop: stop.clone(),
                        };
                        let report = agent.turn(signal, &mut out).await;
                        println!();
                        report
                    }
                };
                if report.stop == StopReason::Error {
                    tracing::warn!(target: "foveal::agent::host", "turn failed: {}", report.error.as_deref().unwrap_or(""));
                }
                let usage_percent = status.lock().unwrap_or_else(|e| e.into_inner()).usage_percent;
                let _ = events.send(Reply::CycleFinished {
                    stop: report.stop,
                    cycles: report.cycles.len(),
                    ms: began.elapsed().as_secs_f64() * 1000.0,
                    usage_percent,
                });
                if agent.focus() != focus_before.as_deref() {
                    let _ = events.send(Reply::Focus {
                        focus: agent.focus().map(str::to_owned),
                        title: agent.focus_title(),
                    });
                }
                // A skill quarantined in the turn: its row changed, not
                // the generation.
                if agent.registry().snapshot().rows() != rows_before {
                    let _ = events.send(skills_event(&agent.registry().snapshot()));
                }
                if options.prompt {
                    print_prompt();
                }
            }
            _ = changes.tick() => {
                let snapshot = agent.memex().snapshot();
                let memex = snapshot.generation();
                if memex != seen_memex.generation() {
                    let previous = std::mem::replace(&mut seen_memex, snapshot);
                    // What the user or another program changed; the host's
                    // own writes and the vectors it adds are not news.
                    let outside = super::activity::outside_changes(
                        &previous,
                        &seen_memex,
                        agent.memex().as_ref(),
                    );
                    if !outside.is_empty() {
                        tracing::info!(target: "foveal::agent::host", generation = memex, "memex changed");
                        let roots: Vec<&std::path::Path> = agent.memex().roots().collect();
                        for line in super::activity::memex_changes(
                            &previous,
                            &seen_memex,
                            &outside,
                            agent.privacy(),
                            roots.iter().copied(),
                        ) {
                            super::activity::note(&line);
                        }
                        if options.react_to_memex_changes {
                            let _ = queue.send(Queued { signal: Some(change(SignalSource::MemexChange, memex)), reply: None });
                        }
                    }
                }
                let rows = agent.registry().snapshot().rows();
                if rows != seen_rows {
                    for line in super::activity::skill_changes(&seen_rows, &rows) {
                        super::activity::note(&line);
                    }
                    seen_rows = rows;
                }
                let skills = agent.registry().snapshot().generation();
                if skills != seen_skills {
                    seen_skills = skills;
                    tracing::info!(target: "foveal::agent::host", generation = skills, "skills changed");
                    if options.react_to_skill_changes {
                        let _ = queue.send(Queued { signal: Some(change(SignalSource::SkillChange, skills)), reply: None });
                    }
                }
                agent.refresh_status(None);
            }
        }
    }
    // What is still queued is answered — with a refusal and the reason —
    // never dropped in silence; then the clients get their last replies.
    signals.close();
    while let Ok(queued) = signals.try_recv() {
        if let Some(reply) = queued.reply {
            let _ = reply.tx.send(Reply::Error {
                message: "the host stopped before it could answer this message; send it again when a host runs".to_owned(),
            });
        }
    }
    agent.sync().await?;
    let _ = tokio::time::timeout(CLIENTS_WAIT, clients.acquire_many(max_clients as u32)).await;
    tracing::info!(target: "foveal::agent::host",
        session = agent.session().name(),
        "host stopped; session saved"
    );
    Ok(())
}

/// Control clients served at once — and as many again beyond them, each
/// given [`BEYOND_WAIT`] to send a `stop` — when the open-files limit
/// leaves room for them ([`clients_for`]).
const MAX_CLIENTS: usize = 1024;

/// Descriptors kept free beside the control clients' for what the host
/// opens as it works: memex writes and reloads, the model's connections,
/// a skill's new cell, the session and usage files.
const RESERVED_FILES: usize = 64;

/// How many control clients the host serves at once under the soft
/// open-files limit `soft` (`None`: unknown), with `open_now` descriptors
/// already open: the room left after them and [`RESERVED_FILES`], shared
/// between the clients served and as many beyond them; at most
/// [`MAX_CLIENTS`], at least one.
fn clients_for(soft: Option<libc::rlim_t>, open_now: usize) -> usize {
    let Some(soft) = soft else {
        return MAX_CLIENTS;
    };
    let soft = usize::try_from(soft).unwrap_or(usize::MAX);
    (soft.saturating_sub(open_now.saturating_add(RESERVED_FILES)) / 2).clamp(1, MAX_CLIENTS)
}

/// The descriptors this process has open now (0 when it cannot tell).
fn open_files_now() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .or_else(|_| std::fs::read_dir("/dev/fd"))
        // Less the folder's own descriptor.
        .map(|dir| dir.count().saturating_sub(1))
        .unwrap_or(0)
}

/// How long a stopping host waits for its clients' last replies to be
/// written (a client that does not read its answer is not waited for).
const CLIENTS_WAIT: Duration = Duration::from_millis(300);

/// How long a client beyond [`MAX_CLIENTS`] may take to send its request
/// before it is answered that the host is busy: long enough for `foveal
/// stop`, short enough to free the connection soon.
const BEYOND_WAIT: Duration = Duration::from_secs(1);

/// The `tracing` target of the control socket's warnings, which the host
/// shows on stderr at the default log level.
pub const CONTROL_LOG: &str = "foveal::control";

/// A warning said once per burst: again only after [`BURST_QUIET`] without
/// one more.
#[derive(Debug, Default)]
struct Burst {
    last: Option<std::time::Instant>,
}

/// The quiet time that ends a burst.
const BURST_QUIET: Duration = Duration::from_secs(10);

impl Burst {
    /// Notes one more; true when it starts a burst.
    fn starts(&mut self) -> bool {
        let now = std::time::Instant::now();
        let starts = self
            .last
            .is_none_or(|last| now.duration_since(last) >= BURST_QUIET);
        self.last = Some(now);
        starts
    }
}

/// What a client beyond the `max_clients` served is told, as one reply
/// line.
fn busy_line(max_clients: usize) -> Vec<u8> {
    let message = format!(
        "the host is serving {max_clients} control clients at once (the most it serves); try again in a moment"
    );
    let mut line = serde_json::to_vec(&Reply::Error { message }).unwrap_or_default();
    line.push(b'\n');
    line
}

/// Writes `line` to a client just accepted, without waiting and without
/// reading it, and closes the connection. On the socket itself: the
/// runtime's `try_write` would refuse at once, since a socket just
/// accepted has no readiness yet. A new connection's buffer has room for
/// a line; if not, the client gets nothing rather than holding the host.
/// (A client that wrote its request first still reads the line: the
/// clients read the answer even when their write fails.)
fn answer_unread(stream: tokio::net::UnixStream, line: &[u8]) {
    let Ok(mut stream) = stream.into_std() else {
        return;
    };
    if stream.set_nonblocking(true).is_ok() {
        let _ = stream.write(line);
    }
}

/// Stops the host: no new turn starts, and the turn in flight is cancelled
/// at once — what the model sent so far is kept, as the socket's `cancel`
/// keeps it; a tool running finishes.
fn stop_now(stop: &watch::Sender<bool>, cancel: &super::Cancel) {
    if begin_stop(stop, cancel) {
        tracing::info!(target: "foveal::agent::host", "stopping: the turn in flight is cancelled");
    }
}

/// [`stop_now`] without a word: atomics and a watch, nothing that waits —
/// for the signal thread. Whether a turn was in flight.
fn begin_stop(stop: &watch::Sender<bool>, cancel: &super::Cancel) -> bool {
    stop.send_replace(true);
    cancel.stop()
}

/// SIGINT and SIGTERM, taken on a thread of their own: whatever the host's
/// thread is doing — a skill hook, a tool, an fsync, a write to a full
/// stdout — the first one stops the host as `foveal stop` does, and the
/// next one (or the first after `foveal stop`, or one before the host
/// runs) removes the socket file and exits at once, with 128 + the
/// signal's number.
///
/// The handler only writes the signal's number into a socket pair; the
/// thread reads it and acts, never waiting for anything the host's thread
/// may hold (what it says goes to stderr from a thread of its own).
#[derive(Debug, Clone)]
pub struct Shutdown {
    state: Arc<ShutdownState>,
}

/// What the signal thread acts on, filled in as the host starts.
#[derive(Debug, Default)]
struct ShutdownState {
    /// The host's stop and the canceller of its turns, once it runs.
    host: std::sync::OnceLock<(watch::Sender<bool>, Arc<super::Cancel>)>,
    /// The control socket's file, removed on the way out.
    socket: std::sync::OnceLock<control::SocketFile>,
}

/// The end of the socket pair the signal handler writes each signal's
/// number into; -1 until [`Shutdown::install`].
static SIGNAL_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// How long the signal thread lets its last word take on the way out: a
/// stderr that does not take it (a full pipe) is not waited for.
const LAST_WORD_WAIT: Duration = Duration::from_millis(100);

/// The handler of SIGINT and SIGTERM: the signal's number into
/// [`SIGNAL_PIPE`], nothing else — an atomic load and one write(2), which
/// are async-signal-safe. The pipe does not block: were it full (64 KiB of
/// signals unread), the byte would be dropped. A write that succeeds
/// leaves errno as it was.
extern "C" fn on_stop_signal(number: libc::c_int) {
    let fd = SIGNAL_PIPE.load(std::sync::atomic::Ordering::SeqCst);
    if fd < 0 {
        return;
    }
    let byte = number as u8;
    // SAFETY: write(2) reads one byte from a local that outlives the call;
    // `fd` is the handler's end of the pair, open for the process's life.
    unsafe {
        libc::write(fd, (&raw const byte).cast(), 1);
    }
}

impl Shutdown {
    /// Installs the handlers of SIGINT and SIGTERM and starts the thread
    /// that takes them. Until [`run`] starts the host, a signal exits at
    /// once: nothing is in flight to save.
    pub fn install() -> std::io::Result<Self> {
        use std::os::fd::IntoRawFd as _;
        let (reader, writer) = std::os::unix::net::UnixStream::pair()?;
        writer.set_nonblocking(true)?;
        let state = Arc::new(ShutdownState::default());
        {
            let state = Arc::clone(&state);
            std::thread::Builder::new()
                .name("foveal-signals".into())
                .spawn(move || take_signals(reader, &state))?;
        }
        // The handler's end stays open for the life of the process.
        SIGNAL_PIPE.store(writer.into_raw_fd(), std::sync::atomic::Ordering::SeqCst);
        for number in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: a zeroed sigaction, then filled: the handler, an
            // empty mask, SA_RESTART (a system call it interrupts is
            // restarted); the handler does only async-signal-safe work.
            let installed = unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_stop_signal as *const () as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(number, &action, std::ptr::null_mut())
            };
            if installed != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(Self { state })
    }

    /// The control socket's file, removed when a signal exits at once.
    fn socket(&self, file: control::SocketFile) {
        let _ = self.state.socket.set(file);
    }

    /// The running host: a signal stops it through `stop` and `cancel`.
    fn host(&self, stop: watch::Sender<bool>, cancel: Arc<super::Cancel>) {
        let _ = self.state.host.set((stop, cancel));
    }
}

/// The signal thread: reads each signal's number from the handler and acts
/// on it ([`Shutdown`]).
fn take_signals(mut reader: std::os::unix::net::UnixStream, state: &ShutdownState) {
    use std::io::Read as _;
    let mut byte = [0u8; 1];
    loop {
        match reader.read(&mut byte) {
            Ok(0) => return,
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
        let number = libc::c_int::from(byte[0]);
        let name = if number == libc::SIGINT {
            "SIGINT"
        } else {
            "SIGTERM"
        };
        // Read apart from acting: the watch's lock is let go first.
        let stopping = state.host.get().map(|(stop, _)| *stop.borrow());
        match (state.host.get(), stopping) {
            (Some((stop, cancel)), Some(false)) => {
                begin_stop(stop, cancel);
                say_aside(format!(
                    "{name}: stopping now; the turn in flight is cancelled"
                ));
            }
            (_, stopping) => {
                let line = if stopping.is_some() {
                    format!("{name} while stopping: exiting at once")
                } else {
                    format!("{name}: exiting at once")
                };
                exit_now(&line, 128 + number, state.socket.get());
            }
        }
    }
}

/// Logs `line` (at info level) from a thread of its own: the signal
/// thread never waits for stderr, which a full pipe can hold.
fn say_aside(line: String) {
    let _ = std::thread::Builder::new()
        .name("foveal-say".into())
        .spawn(move || tracing::info!(target: "foveal::agent::host", "{line}"));
}

/// Removes the socket file and ends the process at once with `code`,
/// after saying `line` on stderr if stderr takes it within
/// [`LAST_WORD_WAIT`]. Nothing else is waited for: each session message
/// is in its file already (appended as it happens).
fn exit_now(line: &str, code: i32, socket: Option<&control::SocketFile>) -> ! {
    if let Some(file) = socket {
        file.remove();
    }
    let line = format!("{line}\n");
    let (said, done) = std::sync::mpsc::channel();
    let speaker = std::thread::Builder::new()
        .name("foveal-say".into())
        .spawn(move || {
            let _ = std::io::stderr().write_all(line.as_bytes());
            let _ = said.send(());
        });
    if speaker.is_ok() {
        let _ = done.recv_timeout(LAST_WORD_WAIT);
    }
    // SAFETY: _exit ends the process at once, running no handler and no
    // destructor — none is needed: the socket file is removed above, and
    // the session and the other files are written whole or not at all.
    unsafe { libc::_exit(code) }
}

/// The open-files limit, as the host leaves it.
#[derive(Debug, Clone, Copy)]
struct OpenFiles {
    /// The soft limit obtained.
    soft: libc::rlim_t,
    /// The hard limit.
    hard: libc::rlim_t,
}

/// Raises the soft limit of open files to the hard one (at most 65,536):
/// each control client is a descriptor, and [`MAX_CLIENTS`] of them beside
/// the memex, the skills and the model's connection pass the usual soft
/// limit of 1,024. A cell sets its own, lower limit. Returns the limit
/// obtained (`None` when it cannot be read).
fn raise_open_files_limit() -> Option<OpenFiles> {
    const WANTED: libc::rlim_t = 1 << 16;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass, and nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    let (current, hard) = (limit.rlim_cur, limit.rlim_max);
    let wanted = hard.min(WANTED);
    if current >= wanted {
        return Some(OpenFiles {
            soft: current,
            hard,
        });
    }
    limit.rlim_cur = wanted;
    // SAFETY: setrlimit reads the struct we pass; raising the soft limit
    // up to the hard one needs no privilege.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        let error = std::io::Error::last_os_error();
        tracing::warn!(target: CONTROL_LOG, "the open-files limit stays at {current}: {error}");
        return Some(OpenFiles {
            soft: current,
            hard,
        });
    }
    Some(OpenFiles { soft: wanted, hard })
}

fn change(source: SignalSource, generation: u64) -> Signal {
    Signal {
        source,
        payload: format!("generation {generation}"),
        focus: None,
    }
}

fn print_prompt() {
    print!("> ");
    let _ = std::io::stdout().flush();
}

/// The REPL's commands, besides plain messages.
const HELP: &str = "Type a message for the agent, or:
  /focus ID   put object ID in foveal focus (/focus alone clears it)
  /status     show the host's status
  /help       this text
  /quit       stop the host (also Ctrl-D)";

fn read_stdin(
    queue: &mpsc::UnboundedSender<Queued>,
    pending: &PendingConfirm,
    status: &Arc<Mutex<super::Status>>,
) {
    let stdin = std::io::stdin();
    let mut line = String::new();
    loop {
        line.clear();
        match stdin.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = line.trim_end_matches(['\n', '\r']).to_owned();
        if let Some(answer) = pending.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = answer.send(text);
            continue;
        }
        let trimmed = text.trim();
        if trimmed.is_empty() {
            continue;
        }
        let signal = match trimmed.split_once(' ').unwrap_or((trimmed, "")) {
            ("/quit" | "/exit", _) => break,
            ("/help", _) => {
                println!("{HELP}");
                continue;
            }
            ("/status", _) => {
                let status = status.lock().unwrap_or_else(|e| e.into_inner()).clone();
                println!(
                    "{}",
                    serde_json::to_string_pretty(&status).unwrap_or_default()
                );
                continue;
            }
            ("/focus", id) => Signal {
                source: SignalSource::UserInput,
                payload: String::new(),
                focus: Some(id.trim().to_owned()),
            },
            (command, _) if command.starts_with('/') && !command.contains('/') => {
                println!("unknown command {command}; /help lists them");
                continue;
            }
            _ => Signal::user(text),
        };
        if queue
            .send(Queued {
                signal: Some(signal),
                reply: None,
            })
            .is_err()
        {
            return;
        }
    }
    // The end of input: stop once what was typed before it is answered.
    let _ = queue.send(Queued {
        signal: None,
        reply: None,
    });
}

/// Serves one control client: one request, or `hello` and then one. A
/// request line must come within [`control::REQUEST_WAIT`]; a client that
/// sends nothing is then told so and closed, and so is one still silent
/// when the host stops.
async fn serve(stream: tokio::net::UnixStream, shared: &Shared) -> std::io::Result<()> {
    let mut stream = BufReader::new(stream);
    let mut stop = shared.stop.subscribe();
    loop {
        let read = tokio::select! {
            read = tokio::time::timeout(control::REQUEST_WAIT, control::read_request(&mut stream)) => read,
            () = async {
                let _ = stop.wait_for(|stopping| *stopping).await;
            } => {
                let message = "the host is stopping".to_owned();
                return control::write_reply(&mut stream, &Reply::Error { message }).await;
            }
        };
        let Ok(read) = read else {
            let message = format!(
                "no request within {} s: the connection is closed",
                control::REQUEST_WAIT.as_secs()
            );
            return control::write_reply(&mut stream, &Reply::Error { message }).await;
        };
        let request = match read? {
            Ok(request) => request,
            Err(message) => {
                control::write_reply(&mut stream, &Reply::Error { message }).await?;
                // Closing a Unix socket with unread input resets the
                // connection, and the client would lose the answer: say
                // the answer is complete, then read what is left (bounded).
                stream.get_mut().shutdown().await?;
                control::drain(&mut stream).await;
                return Ok(());
            }
        };
        if let Request::Hello { protocol, client } = &request {
            tracing::debug!(target: "foveal::agent::host", protocol, client, "control client said hello");
            let status = shared
                .status
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let reply = Reply::Hello {
                protocol: control::PROTOCOL,
                host: env!("CARGO_PKG_VERSION").to_owned(),
                model: shared.model.clone(),
                status: serde_json::to_value(&status).unwrap_or_default(),
            };
            control::write_reply(&mut stream, &reply).await?;
            continue;
        }
        return serve_one(&mut stream, request, shared).await;
    }
}

/// A client beyond the `max_clients` served: its request is read for at most
/// [`BEYOND_WAIT`]; a `stop` is obeyed (the host can always be stopped),
/// anything else — or nothing — is answered in one line that the host is
/// busy.
async fn refuse(stream: tokio::net::UnixStream, shared: &Shared) -> std::io::Result<()> {
    let mut stream = BufReader::new(stream);
    let read = tokio::time::timeout(BEYOND_WAIT, control::read_request(&mut stream)).await;
    if let Ok(Ok(Ok(Request::Stop))) = read {
        stop_now(&shared.stop, &shared.cancel);
        return control::write_reply(&mut stream, &Reply::Stopping).await;
    }
    stream
        .get_mut()
        .write_all(&busy_line(shared.max_clients))
        .await?;
    stream.get_mut().shutdown().await
}

/// Pushes events to a subscriber until it hangs up or the host stops.
async fn subscribed(
    stream: &mut BufReader<tokio::net::UnixStream>,
    shared: &Shared,
) -> std::io::Result<()> {
    let mut events = shared.events.subscribe();
    let mut stop = shared.stop.subscribe();
    control::write_reply(stream, &Reply::Subscribed).await?;
    let mut byte = [0u8; 64];
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(event) => control::write_reply(stream, &event).await?,
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // Too far behind: the whole state instead.
                    let status = shared.status.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    let status = serde_json::to_value(&status).unwrap_or_default();
                    control::write_reply(stream, &Reply::Status { status }).await?;
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            },
            () = async {
                let _ = stop.wait_for(|stopping| *stopping).await;
            } => return Ok(()),
            read = stream.read(&mut byte) => {
                // The client hung up (what else it writes is ignored).
                if read? == 0 {
                    return Ok(());
                }
            }
        }
    }
}

/// At most this many of the host's skill hook failures are said with a
/// command's answer.
const SAID_FAILURES: usize = 8;

/// How long the memex stays unchanged before a matcher derived after
/// edits is built in full beside it.
const HEAL_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// Lowers this thread's priority (nice 10) below the host's turns: the
/// threads it starts inherit it. A build that a turn waits for still runs
/// at full speed, since the waiting turn takes no processor; one beside
/// the turns (the full build after reading the index, a heal) yields to
/// them.
fn lower_priority() {
    // SAFETY: `setpriority` on this thread (its id from `gettid`).
    // Failure leaves the priority as it was.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
    }
}

/// Builds the private-text matcher in full ([`Gate::heal`]) once the
/// memex has not changed for `quiet` and the matcher in use was derived
/// after an edit, at a lower priority than the host's turns; until the
/// host stops.
fn heal_when_quiet(
    gate: &foveal_registry::egress::Gate,
    memex: &foveal_memex::Memex,
    stopping: &watch::Receiver<bool>,
    quiet: std::time::Duration,
) {
    lower_priority();
    let poll = (quiet / 4).clamp(
        std::time::Duration::from_millis(20),
        std::time::Duration::from_secs(5),
    );
    let mut seen = memex.snapshot().generation();
    let mut since = std::time::Instant::now();
    while !*stopping.borrow() {
        std::thread::sleep(poll);
        let snapshot = memex.snapshot();
        if snapshot.generation() != seen {
            seen = snapshot.generation();
            since = std::time::Instant::now();
        } else if since.elapsed() >= quiet && gate.matcher_is_derived() {
            gate.heal(&snapshot);
        }
    }
}

/// [`Reply::OtherConfig`] when the `config_id` or `prompt_id` a request
/// expects is not the host's (it was restarted with other settings since
/// the client read its status): nothing is run, and the client runs the
/// command itself.
fn other_config(
    shared: &Shared,
    config_id: Option<&str>,
    prompt_id: Option<&str>,
) -> Option<Reply> {
    let (own_config, own_prompt) = &shared.ids;
    let differs = config_id.is_some_and(|id| id != own_config)
        || prompt_id.is_some_and(|id| id != own_prompt);
    differs.then(|| Reply::OtherConfig {
        config_id: own_config.clone(),
        prompt_id: own_prompt.clone(),
    })
}

/// Runs `command` on the host's parts, off the runtime's threads.
async fn command_reply(command: crate::commands::Command, shared: &Shared) -> Reply {
    use crate::commands::{self, Command, Parts};
    if let Command::Prompt(options) = &command
        && let Some(session) = &options.session
        && session != shared.window.session()
    {
        return Reply::OtherSession {
            session: shared.window.session().to_owned(),
        };
    }
    let parts = &shared.context;
    let (config, registry, memex, gate, privacy, window) = (
        parts.config.clone(),
        Arc::clone(&parts.registry),
        parts.memex.snapshot(),
        Arc::clone(&parts.gate),
        parts.privacy.clone(),
        Arc::clone(&shared.window),
    );
    let answer = tokio::task::spawn_blocking(move || {
        let parts = Parts {
            config: &config,
            registry: &registry,
            memex: &memex,
            privacy: &privacy,
            gate: &gate,
        };
        let mut printed = match &command {
            Command::Context(options) => commands::context::run(parts, options),
            Command::Prompt(options) => commands::prompt::run(parts, &window, options),
        };
        // The skill hooks that failed in the host are said on the client's
        // stderr, through the last door, as its own process would say them
        // (the host notes each once: the last few).
        let failures = foveal_registry::skill_errors::all();
        let older = failures.len().saturating_sub(SAID_FAILURES);
        if older > 0 {
            printed.say(format_args!(
                "warning: {older} more skill hook failures in the host before these (`foveal prompt --json` lists them all)"
            ));
        }
        for failure in failures.into_iter().skip(older) {
            let error = gate
                .clean_quietly(&failure.error, &memex)
                .unwrap_or(failure.error);
            printed.say(format_args!(
                "warning: skill `{}` hook `{}` failed in the host: {error}",
                failure.skill, failure.hook
            ));
        }
        printed
    })
    .await;
    match answer {
        Ok(printed) => Reply::Printed(printed),
        Err(error) => Reply::Error {
            message: format!("the command failed in the host: {}", unanswered(&error)),
        },
    }
}

/// Why a blocking task gave no answer, without its panic's message: a
/// message may quote the text being worked on (a slice's panic quotes
/// the string), which is not yet through the gate.
fn unanswered(error: &tokio::task::JoinError) -> &'static str {
    if error.is_panic() {
        "it panicked (the host's stderr says where)"
    } else {
        "it was cancelled"
    }
}

/// Answers one request.
async fn serve_one(
    stream: &mut BufReader<tokio::net::UnixStream>,
    request: Request,
    shared: &Shared,
) -> std::io::Result<()> {
    let Shared {
        queue,
        stop,
        status,
        window,
        ..
    } = shared;
    let stream = &mut *stream;
    match request {
        Request::Hello { .. } => {
            let message = "hello was already answered on this connection".to_owned();
            control::write_reply(stream, &Reply::Error { message }).await
        }
        Request::Subscribe => subscribed(stream, shared).await,
        Request::Cancel => {
            let in_flight = shared.cancel.cancel();
            control::write_reply(stream, &Reply::Cancelled { in_flight }).await
        }
        Request::Context { focus } => {
            let focus = focus.or_else(|| {
                status
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .focus
                    .clone()
            });
            let parts = &shared.context;
            let (config, registry, memex, gate, privacy) = (
                parts.config.clone(),
                parts.registry.snapshot(),
                parts.memex.snapshot(),
                Arc::clone(&parts.gate),
                parts.privacy.clone(),
            );
            let answer = tokio::task::spawn_blocking(move || {
                crate::explain::explained(&config, &registry, &memex, &privacy, &gate, focus)
            })
            .await;
            let reply = match answer {
                Ok(Ok((text, objects))) => Reply::Context { text, objects },
                Ok(Err(message)) => Reply::Error { message },
                Err(error) => Reply::Error {
                    message: format!("the context could not be assembled: {}", unanswered(&error)),
                },
            };
            control::write_reply(stream, &reply).await
        }
        Request::Command { command, prompt_id } => {
            let reply = match other_config(shared, None, prompt_id.as_deref()) {
                Some(other) => other,
                None => command_reply(command, shared).await,
            };
            control::write_reply(stream, &reply).await
        }
        Request::Focus { id, file, line } => {
            let reply = match focus_target(shared, id, file, line) {
                Err(message) => Reply::Error { message },
                Ok(id) => {
                    let (answer, answered) = oneshot::channel();
                    let stopping = || Reply::Error {
                        message: "the host is stopping".to_owned(),
                    };
                    if shared.focus.send(FocusChange { id, answer }).is_err() {
                        stopping()
                    } else {
                        answered.await.unwrap_or_else(|_| stopping())
                    }
                }
            };
            control::write_reply(stream, &reply).await
        }
        Request::Status => {
            let mut status = status.lock().unwrap_or_else(|e| e.into_inner()).clone();
            status.warm_index = shared.context.gate.matcher_from_index();
            let status = serde_json::to_value(&status).unwrap_or_default();
            control::write_reply(stream, &Reply::Status { status }).await
        }
        Request::Stop => {
            stop_now(stop, &shared.cancel);
            control::write_reply(stream, &Reply::Stopping).await
        }
        Request::Window { op, session } => {
            let reply = if session.as_deref().is_some_and(|s| s != window.session()) {
                Reply::OtherSession {
                    session: window.session().to_owned(),
                }
            } else {
                // The skill is called (and the file written) off the
                // runtime's threads; a cycle in flight is not waited for:
                // each change is whole, and the next prompt sees it.
                let session = window.session().to_owned();
                let window = Arc::clone(window);
                let answer = tokio::task::spawn_blocking(move || window.apply(&op)).await;
                match answer {
                    Ok(Ok(result)) => Reply::Window { session, result },
                    Ok(Err(error)) => Reply::WindowError {
                        message: error.to_string(),
                    },
                    Err(error) => Reply::WindowError {
                        message: format!("the window operation failed: {error}"),
                    },
                }
            };
            control::write_reply(stream, &reply).await
        }
        Request::Send {
            text,
            focus,
            signal,
            report,
            config_id,
        } => {
            if let Some(other) = other_config(shared, config_id.as_deref(), None) {
                return control::write_reply(stream, &other).await;
            }
            let (tx, mut rx) = mpsc::unbounded_channel();
            let signal = Signal {
                source: signal,
                payload: text,
                focus,
            };
            if queue
                .send(Queued {
                    signal: Some(signal),
                    reply: Some(ClientReply { tx, report }),
                })
                .is_err()
            {
                let message = "the host is stopping".to_owned();
                return control::write_reply(stream, &Reply::Error { message }).await;
            }
            while let Some(reply) = rx.recv().await {
                let done = matches!(reply, Reply::Done { .. });
                control::write_reply(stream, &reply).await?;
                if done {
                    break;
                }
            }
            Ok(())
        }
    }
}

/// The object a `focus` request names: its `id`, the object at `line` of
/// `file` ([`super::focus::object_at`]: a private one is refused as a
/// missing one), or `None` (neither: clear the focus).
fn focus_target(
    shared: &Shared,
    id: Option<String>,
    file: Option<std::path::PathBuf>,
    line: Option<u32>,
) -> Result<Option<String>, String> {
    match (id, file, line) {
        (Some(id), None, None) => Ok(Some(id)),
        (None, Some(file), Some(line)) => {
            let snapshot = shared.context.memex.snapshot();
            super::focus::object_at(&snapshot, &shared.context.privacy, &file, line)
                .map(|object| Some(object.id().to_owned()))
                .map_err(|error| format!("focus not changed: {error}"))
        }
        (None, None, None) => Ok(None),
        _ => Err(
            "focus: give `id`, or `file` and `line`, or neither (to clear the focus)".to_owned(),
        ),
    }
}

/// The REPL's output: text to stdout as it comes, tool notes to stderr,
/// confirmation asked on the terminal.
struct TerminalOutput {
    pending: PendingConfirm,
    /// The user is at a terminal and can be asked.
    repl: bool,
    /// Fires on Ctrl-C, SIGTERM or `foveal stop`: a question waiting for
    /// an answer is then answered "no".
    stop: watch::Receiver<bool>,
}

impl Output for TerminalOutput {
    fn text(&mut self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    fn tool(&mut self, name: &str, result: &Result<String, String>) {
        match result {
            Ok(_) => eprintln!("  [tool {name}: ok]"),
            Err(error) => eprintln!("  [tool {name}: {error}]"),
        }
    }

    fn interactive(&self) -> bool {
        self.repl
    }

    fn confirm<'a>(
        &'a mut self,
        tool: &'a str,
        arguments: &'a str,
    ) -> Pin<Box<dyn std::future::Future<Output = bool> + Send + 'a>> {
        Box::pin(async move {
            let (tx, rx) = oneshot::channel();
            *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
            print!("\nallow the dangerous tool {tool}({arguments})? [y/N] ");
            let _ = std::io::stdout().flush();
            let mut stop = self.stop.clone();
            tokio::select! {
                answer = rx => match answer {
                    Ok(answer) => matches!(answer.trim(), "y" | "Y" | "yes" | "Yes"),
                    Err(_) => false,
                },
                _ = stop.wait_for(|stopping| *stopping) => {
                    println!("(no: the host is stopping)");
                    false
                }
            }
        })
    }
}

/// A control client's output: each piece goes back over the socket.
struct ClientOutput {
    tx: mpsc::UnboundedSender<Reply>,
}

impl Output for ClientOutput {
    fn text(&mut self, text: &str) {
        let _ = self.tx.send(Reply::Text {
            text: text.to_owned(),
        });
    }

    fn tool(&mut self, name: &str, result: &Result<String, String>) {
        let (ok, result) = match result {
            Ok(text) => (true, text.clone()),
            Err(error) => (false, error.clone()),
        };
        let _ = self.tx.send(Reply::Tool {
            name: name.to_owned(),
            ok,
            result,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matcher_derived_after_an_edit_is_built_in_full_once_the_memex_is_quiet() {
        let dir = tempfile::tempdir().unwrap();
        let visible = "* Plans\nThe quarterly report ships on Friday morning.\n";
        std::fs::write(dir.path().join("a.org"), visible).unwrap();
        let diary = dir.path().join("b.org");
        std::fs::write(&diary, "* Diary :@personal:\nMet Ann at the harbour.\n").unwrap();
        let memex = Arc::new(foveal_memex::Memex::open(&[dir.path().to_path_buf()]).unwrap());
        let gate = Arc::new(
            foveal_gate::Gate::new(
                foveal_memex::privacy::PrivacyTags::new(["@personal"]),
                &[],
                true,
            )
            .unwrap(),
        );
        gate.derive_matcher_from(0);
        let quote = "The quarterly report ships on Friday morning.";
        let clean = |text: &str| {
            gate.clean(text, &memex.snapshot(), &foveal_gate::NoSkills)
                .unwrap()
                .text
                .into_owned()
        };
        assert_eq!(clean(quote), quote);
        let (stop, stopping) = watch::channel(false);
        let healer = {
            let (gate, memex) = (Arc::clone(&gate), Arc::clone(&memex));
            std::thread::spawn(move || {
                heal_when_quiet(&gate, &memex, &stopping, std::time::Duration::from_secs(1));
            })
        };
        // Private text that only the unchanged a.org's visible text holds:
        // derived, it is redacted; once the memex is quiet, it is not.
        std::fs::write(
            &diary,
            format!("* Diary :@personal:\nMet Ann at the harbour.\n{quote}\n"),
        )
        .unwrap();
        memex.reload_file(&diary);
        assert_eq!(clean(quote), "[REDACTED private].");
        assert!(gate.matcher_is_derived());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while gate.matcher_is_derived() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!gate.matcher_is_derived(), "not built in full in 20 s");
        assert_eq!(clean(quote), quote);
        assert_eq!(clean("Met Ann at the harbour."), "[REDACTED private].");
        stop.send_replace(true);
        healer.join().unwrap();
    }
}
