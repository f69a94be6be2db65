//! `foveal run`, `ask`, `send`, `status`, `stop` and `check`: the live host
//! and its clients.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::exit::Exit;
use foveal_agent::commands::{Command, Printed};
use foveal_agent::config::Config;
use foveal_agent::control::{self, Reply, Request};
use foveal_agent::host::{self, HostOptions};
use foveal_agent::session::Session;
use foveal_agent::{Agent, Output, Signal, SignalSource, StopReason};
use foveal_memex::Memex;
use foveal_memex::privacy::PrivacyTags;
use foveal_provider::Provider;

/// What `run` and `ask` were given besides the configuration.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// `--session NAME`.
    pub session: Option<String>,
    /// `--focus ID`.
    pub focus: Option<String>,
}

/// A tokio runtime for one command: the current thread, plus the
/// blocking pool.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// The provider the configuration chose.
pub(crate) fn provider(config: &Config) -> Result<Arc<dyn Provider>, Exit> {
    foveal_provider::from_settings(&config.provider)
        .map(Arc::from)
        .map_err(|error| {
            eprintln!("error: {error}");
            Exit::NotFound
        })
}

/// The pieces of an agent, loaded and checked.
fn agent(config: &Config, options: &AgentOptions, watch_views: bool) -> Result<Agent, Exit> {
    foveal_registry::tokens::configure(config.prompt.model.encoding);
    // The gate compiles its secret patterns while the memex and the skills
    // load.
    let gate = {
        let config = config.clone();
        std::thread::Builder::new()
            .name("foveal-gate".into())
            .spawn(move || foveal_registry::egress::Gate::from_config(&config))
            .map_err(|error| {
                eprintln!("error: cannot start a thread: {error}");
                Exit::Usage
            })?
    };
    let memex = Arc::new(crate::memex::open(config)?);
    if watch_views {
        memex.prepare_views(PrivacyTags::new(&config.privacy_tags));
    } else {
        // One turn: the vectors computed so far, none computed now.
        foveal_embed::service::attach_cached(
            &config.embedding,
            &config.data_dir,
            &memex,
            &PrivacyTags::new(&config.privacy_tags),
        );
    }
    let registry = match crate::skills::open_registry(config) {
        Ok(registry) => Arc::new(registry),
        Err(error) => {
            eprintln!("error: {error}");
            return Err(Exit::NotFound);
        }
    };
    let provider = provider(config)?;
    let name = options
        .session
        .clone()
        .unwrap_or_else(|| config.agent.session.clone());
    let session = Session::open(&config.data_dir, &name).map_err(|error| {
        eprintln!("error: {error}");
        Exit::Usage
    })?;
    let gate = match gate.join() {
        Ok(Ok(gate)) => gate,
        Ok(Err(error)) => {
            eprintln!("error: {error}");
            return Err(Exit::Usage);
        }
        Err(_) => {
            eprintln!("error: the privacy gate could not be built");
            return Err(Exit::Usage);
        }
    };
    let mut agent = Agent::with_gate(config.clone(), registry, memex, provider, session, gate)
        .map_err(|error| {
            eprintln!("error: {error}");
            Exit::Usage
        })?;
    // From here on no log line — on stderr, in the ring the prompt shows —
    // holds private text or a secret: each passes the gate (the host's
    // own filter, quietly).
    {
        let gate = Arc::clone(agent.gate());
        let memex = Arc::clone(agent.memex());
        foveal_gate::logs::set_redactor(move |line| gate.clean_quietly(line, &memex.snapshot()));
        // A panic's message too.
        foveal_gate::logs::gate_panics();
    }
    if !watch_views {
        prepare_meanwhile(&agent, PrivacyTags::new(&config.privacy_tags));
    }
    // Said once the gate stands: a file private as a whole that failed to
    // load keeps its name private.
    for error in agent.memex().snapshot().failed().values() {
        tracing::warn!(target: "foveal::memex", "memex file not loaded: {error}");
    }
    if let Some(focus) = &options.focus
        && let Err(error) = agent.set_focus(Some(focus))
    {
        eprintln!("error: --focus: {error} (list ids with `foveal memex query`)");
        return Err(Exit::NotFound);
    }
    Ok(agent)
}

/// For one turn on a large memex whose privacy matcher is in the index
/// (its header names this memex): the skills' view of its files and the
/// matcher (whose read runs on one core) are made on threads of their own
/// while the command starts; the turn finds them ready, or waits for the
/// one being made (never making it twice). Without an index of this
/// memex the matcher's build takes the time and the memory (the views
/// made beside it raised a cold `ask`'s peak by 12 %), and a small
/// memex's are made by the turn as it needs them.
fn prepare_meanwhile(agent: &Agent, privacy: PrivacyTags) {
    let snapshot = agent.memex().snapshot();
    if agent.memex().bytes() < foveal_memex::PARALLEL_LOAD_BYTES
        || !agent.gate().index_is_of(&snapshot)
    {
        return;
    }
    let memex = Arc::clone(agent.memex());
    let gate = Arc::clone(agent.gate());
    let mut started = MEANWHILE.lock().unwrap_or_else(|e| e.into_inner());
    for (name, work) in [
        (
            "foveal-views",
            Box::new(move || memex.prepare_views(privacy)) as Box<dyn FnOnce() + Send>,
        ),
        (
            "foveal-matcher",
            Box::new(move || gate.matcher_now(&snapshot)),
        ),
    ] {
        match std::thread::Builder::new().name(name.into()).spawn(work) {
            Ok(thread) => started.push(thread),
            Err(error) => {
                tracing::debug!(target: "foveal::memex", "{name} left to the turn: {error}")
            }
        }
    }
}

/// The threads [`prepare_meanwhile`] started.
static MEANWHILE: std::sync::Mutex<Vec<std::thread::JoinHandle<()>>> =
    std::sync::Mutex::new(Vec::new());

/// Waits for the threads started beside the turn (a panic in one is
/// said; its work is then the turn's, done already).
fn finish_meanwhile() {
    let started = std::mem::take(&mut *MEANWHILE.lock().unwrap_or_else(|e| e.into_inner()));
    for thread in started {
        let name = thread.thread().name().unwrap_or("a thread").to_owned();
        if thread.join().is_err() {
            eprintln!("warning: {name} stopped on a panic");
        }
    }
}

/// `foveal run`: the long-running host.
pub fn run(config: &Config, options: &AgentOptions, no_repl: bool) -> anyhow::Result<Exit> {
    let started = Instant::now();
    // SIGINT and SIGTERM are taken on a thread of their own from here on:
    // while the host loads, one exits at once; once it runs, the first
    // stops it whatever its thread is doing, the second exits at once.
    let shutdown = match host::Shutdown::install() {
        Ok(shutdown) => Some(shutdown),
        Err(error) => {
            tracing::warn!(
                target: host::CONTROL_LOG,
                "SIGINT and SIGTERM will end the host without saving: {error}"
            );
            None
        }
    };
    let rt = runtime()?;
    let exit: anyhow::Result<Exit> = rt.block_on(async {
        // Watch first, then load: a change in between is seen by one or
        // the other.
        let agent = match agent(config, options, true) {
            Ok(agent) => agent,
            Err(exit) => return Ok(exit),
        };
        let _plugins = if config.plugins.watch {
            // A folder that does not exist cannot be watched: made now, a
            // skill installed later (`foveal skill install`) is loaded.
            if !config.plugins.dir.exists() {
                match std::fs::create_dir_all(&config.plugins.dir) {
                    Ok(()) => eprintln!(
                        "created the plugins folder {} (the drop-in folder for skills)",
                        config.plugins.dir.display()
                    ),
                    Err(error) => tracing::warn!(target: "foveal::cli::agent", 
                        "cannot create the plugins folder {}: {error}",
                        config.plugins.dir.display()
                    ),
                }
            }
            match foveal_registry::watcher::PluginWatcher::start(
                Arc::clone(agent.registry()),
                std::time::Duration::from_millis(config.plugins.debounce_ms),
            ) {
                Ok(w) => Some(w),
                Err(error) => {
                    tracing::warn!(target: "foveal::cli::agent", "skills will not reload: {error}");
                    None
                }
            }
        } else {
            None
        };
        let _memex = match foveal_memex::watch::MemexWatcher::start(
            Arc::clone(agent.memex()),
            foveal_memex::watch::DEFAULT_QUIET,
        ) {
            Ok(w) => Some(w),
            Err(error) => {
                tracing::warn!(target: "foveal::cli::agent", "memex changes will not be seen: {error}");
                None
            }
        };
        // Vectors for objects without `:EMBEDDING:`: the cached ones now,
        // the missing ones in the background (a cycle never waits).
        let _embed = {
            let status = agent.status();
            foveal_embed::service::EmbedService::start(
                &config.embedding,
                &config.data_dir,
                Arc::clone(agent.memex()),
                PrivacyTags::new(&config.privacy_tags),
                Arc::clone(agent.gate()),
                move |embedding| {
                    status
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .embeddings = Some(embedding.clone());
                },
            )
        };
        let socket_path = config.agent.socket_path(&config.data_dir);
        let socket = match control::ControlSocket::bind(&socket_path).await {
            Ok(socket) => socket,
            Err(error) => {
                eprintln!("error: {error}");
                return Ok(Exit::NotFound);
            }
        };
        let interactive = !no_repl && is_terminal_stdin();
        let snapshot = agent.memex().snapshot();
        let skills = agent.registry().snapshot();
        tracing::info!(target: "foveal::cli::agent", 
            ready_ms = started.elapsed().as_secs_f64() * 1000.0,
            skills = skills.skills().count(),
            memex_objects = snapshot.len(),
            socket = %socket_path.display(),
            "host ready"
        );
        if interactive {
            eprintln!(
                "foveal {} — session {}, {} skills, {} memex objects, {}. /help for commands, Ctrl-D to stop.",
                env!("CARGO_PKG_VERSION"),
                agent.session().name(),
                skills.skills().count(),
                snapshot.len(),
                agent.status().lock().map(|s| s.provider.clone()).unwrap_or_default(),
            );
        }
        let options = HostOptions {
            repl: !no_repl,
            prompt: interactive,
            heartbeat_secs: config.agent.heartbeat_secs,
            react_to_memex_changes: config.agent.react_to_memex_changes,
            react_to_skill_changes: config.agent.react_to_skill_changes,
        };
        host::run(agent, Some(socket), options, shutdown.as_ref()).await?;
        Ok(Exit::Ok)
    });
    // A stopping host does not wait for work left on the blocking pool (a
    // model abandoned in the middle of its prompt stops at its next token
    // anyway): the session is saved already.
    rt.shutdown_timeout(RUNTIME_WAIT);
    exit
}

/// How long `run` waits, at exit, for blocking work left behind.
const RUNTIME_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

fn is_terminal_stdin() -> bool {
    use std::io::IsTerminal as _;
    std::io::stdin().is_terminal()
}

/// `foveal ask TEXT`: one turn, the reply on stdout.
pub fn ask(
    config: &Config,
    options: &AgentOptions,
    text: &str,
    json: bool,
) -> anyhow::Result<Exit> {
    if text.trim().is_empty() {
        eprintln!("error: nothing to ask: give the message as an argument");
        return Ok(Exit::Usage);
    }
    // A host serving this very configuration and session answers at once:
    // nothing to load here. `--focus` (which would move the host's focus)
    // runs here.
    if options.focus.is_none()
        && let Some(exit) = through_host(config, options, text, json)?
    {
        return Ok(exit);
    }
    let rt = runtime()?;
    rt.block_on(async {
        let mut agent = match agent(config, options, false) {
            Ok(agent) => agent,
            Err(exit) => return Ok(exit),
        };
        let mut out = StdoutOutput {
            print: !json,
            open_line: false,
        };
        let report = agent.turn(Signal::user(text), &mut out).await;
        if let Err(error) = agent.sync().await {
            eprintln!("warning: {error}");
        }
        // What was started beside the turn ends before the process: the
        // matcher's thread may still be writing the private-text index.
        finish_meanwhile();
        if json {
            let mut stdout = std::io::stdout().lock();
            serde_json::to_writer_pretty(&mut stdout, &report)?;
            writeln!(stdout)?;
        } else if out.open_line {
            println!();
        }
        Ok(match report.stop {
            StopReason::Error => {
                eprintln!(
                    "error: {}",
                    report.error.as_deref().unwrap_or("the turn failed")
                );
                Exit::NotFound
            }
            _ => Exit::Ok,
        })
    })
}

/// `foveal ask TEXT` answered by the running host (as `send`), when one
/// answers on the configured socket with this configuration
/// ([`Config::id`]) and session; `None` when there is none, or it serves
/// another.
fn through_host(
    config: &Config,
    options: &AgentOptions,
    text: &str,
    json: bool,
) -> anyhow::Result<Option<Exit>> {
    let session = options
        .session
        .clone()
        .unwrap_or_else(|| config.agent.session.clone());
    // A host that sends the turn's report shows `prompt_id` too (an older
    // one would run the turn and send none).
    let needs = json.then_some("prompt_id");
    let config_id = config.id();
    if !serving_host(
        config,
        ("config_id", config_id.clone()),
        Some(&session),
        needs,
    )? {
        return Ok(None);
    }
    // The id again with the turn: a host restarted with other settings
    // since its status was read answers `other_config`, and the turn runs
    // here.
    turn_on_host(config, text, None, false, json, Some(config_id))
}

/// Whether a host answers on the configured socket whose status holds
/// `id` (`config_id`, [`Config::id`]; or `prompt_id`,
/// [`Config::prompt_id`]), when given `session`, and the field `needs`
/// (a host new enough for the request): a command can then leave its
/// work to it. `FOVEAL_LOG=foveal=info` says which.
fn serving_host(
    config: &Config,
    id: (&str, String),
    session: Option<&str>,
    needs: Option<&str>,
) -> anyhow::Result<bool> {
    let socket = socket(config);
    if !socket.exists() {
        return Ok(false);
    }
    let mut found = None;
    let asked = runtime()?.block_on(control::request(&socket, &Request::Status, |reply| {
        if let Reply::Status { status } = reply {
            found = Some(status);
        }
        false
    }));
    let (Ok(()), Some(status)) = (asked, found) else {
        return Ok(false);
    };
    let pid = status["pid"].as_u64().unwrap_or_default();
    if status[id.0].as_str() != Some(id.1.as_str())
        || session.is_some_and(|session| status["session"].as_str() != Some(session))
        || needs.is_some_and(|field| status.get(field).is_none())
    {
        tracing::info!(
            target: "foveal::agent",
            pid,
            "a host runs on the socket with another configuration or session: the command runs here"
        );
        return Ok(false);
    }
    tracing::info!(target: "foveal::agent", pid, "the running host answers");
    Ok(true)
}

/// `command` answered by a host serving this configuration (and, when
/// given, `session`): what it printed. `None` when no such host answers
/// (or it could not answer; said on stderr): the command runs here.
pub(crate) fn host_command(
    config: &Config,
    session: Option<&str>,
    command: Command,
) -> anyhow::Result<Option<Printed>> {
    let prompt_id = config.prompt_id();
    if !serving_host(config, ("prompt_id", prompt_id.clone()), session, None)? {
        return Ok(None);
    }
    let mut answer = None;
    let asked = runtime()?.block_on(control::request(
        &socket(config),
        &Request::Command {
            command,
            prompt_id: Some(prompt_id),
        },
        |reply| {
            answer = Some(reply);
            false
        },
    ));
    Ok(match (asked, answer) {
        (Ok(()), Some(Reply::Printed(printed))) => Some(printed),
        (Ok(()), Some(Reply::OtherConfig { .. })) => {
            other_config_now();
            None
        }
        (Ok(()), Some(Reply::Error { message })) => {
            eprintln!("warning: the running host could not answer ({message}); running here");
            None
        }
        (Err(error), _) => {
            eprintln!("warning: the running host could not answer ({error}); running here");
            None
        }
        // Another session, or an answer this client does not know.
        _ => None,
    })
}

/// Says (at `FOVEAL_LOG=foveal=info`) that the host changed its
/// configuration between its status and the request.
fn other_config_now() {
    tracing::info!(
        target: "foveal::agent",
        "the host now serves another configuration (restarted since its status was read): the command runs here"
    );
}

/// `foveal ask`'s output: the reply's text as it comes; tools on stderr.
struct StdoutOutput {
    print: bool,
    /// What was printed does not end with a line break.
    open_line: bool,
}

impl Output for StdoutOutput {
    fn text(&mut self, text: &str) {
        if self.print && !text.is_empty() {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
            self.open_line = !text.ends_with('\n');
        }
    }

    /// `ask` reports a failed turn on stderr (as its `--help` says); stdout
    /// holds replies only.
    fn error(&mut self, _text: &str) {}

    fn tool(&mut self, name: &str, result: &Result<String, String>) {
        if self.print {
            match result {
                Ok(_) => eprintln!("[tool {name}: ok]"),
                Err(error) => eprintln!("[tool {name}: {error}]"),
            }
        }
    }
}

/// The control socket of the configured host.
pub(crate) fn socket(config: &Config) -> PathBuf {
    config.agent.socket_path(&config.data_dir)
}

/// `foveal send TEXT`: a message for the running host; its reply streams
/// to stdout.
pub fn send(
    config: &Config,
    text: &str,
    focus: Option<String>,
    delegation: bool,
) -> anyhow::Result<Exit> {
    turn_on_host(config, text, focus, delegation, false, None)
        .map(|exit| exit.unwrap_or(Exit::NotFound))
}

/// One turn on the running host: its reply streams to stdout — or, with
/// `json`, only the turn's report is printed at its end (`ask --json`).
/// With `config_id`, a host serving another configuration runs nothing:
/// `None` then (never for a `send` without it).
fn turn_on_host(
    config: &Config,
    text: &str,
    focus: Option<String>,
    delegation: bool,
    json: bool,
    config_id: Option<String>,
) -> anyhow::Result<Option<Exit>> {
    let request = Request::Send {
        text: text.to_owned(),
        focus,
        signal: if delegation {
            SignalSource::Delegation
        } else {
            SignalSource::UserInput
        },
        report: json,
        config_id,
    };
    let mut exit = Exit::Ok;
    let mut answered = false;
    let mut other = false;
    let result = runtime()?.block_on(control::request(&socket(config), &request, |reply| {
        let mut out = std::io::stdout().lock();
        answered |= matches!(
            reply,
            Reply::Done { .. } | Reply::Error { .. } | Reply::OtherConfig { .. }
        );
        match reply {
            Reply::OtherConfig { .. } => {
                other = true;
                false
            }
            Reply::Text { text } => {
                if !json {
                    let _ = out.write_all(text.as_bytes());
                    let _ = out.flush();
                }
                true
            }
            Reply::Tool { name, ok, result } => {
                // `ask --json` prints the report alone, as it does here.
                match (json, ok) {
                    (true, _) => {}
                    (false, true) => eprintln!("[tool {name}: ok]"),
                    (false, false) => eprintln!("[tool {name}: {result}]"),
                }
                true
            }
            Reply::Done {
                stop,
                error,
                report,
                ..
            } => {
                if json {
                    match report {
                        Some(report) => {
                            let _ = out.write_all(report.as_bytes());
                        }
                        None => {
                            eprintln!("error: the host sent no report of the turn");
                            exit = Exit::NotFound;
                        }
                    }
                }
                let _ = writeln!(out);
                if stop == StopReason::Error {
                    eprintln!("error: {}", error.unwrap_or_default());
                    exit = Exit::NotFound;
                }
                false
            }
            Reply::Error { message } => {
                eprintln!("error: {message}");
                exit = Exit::NotFound;
                false
            }
            // Not answers to `send`.
            _ => true,
        }
    }));
    if result.is_ok() && other {
        other_config_now();
        return Ok(None);
    }
    if result.is_ok() && !answered {
        // The connection closed without the end of the turn: the host
        // stopped or crashed in the middle of it.
        eprintln!(
            "error: the host closed the connection before its reply was complete (it stopped or crashed); the message may not have been answered"
        );
        return Ok(Some(Exit::NotFound));
    }
    client_result(result, exit).map(Some)
}

fn client_result(result: Result<(), control::ClientError>, exit: Exit) -> anyhow::Result<Exit> {
    match result {
        Ok(()) => Ok(exit),
        Err(error) => {
            eprintln!("error: {error}");
            Ok(Exit::NotFound)
        }
    }
}

/// `foveal status [--json]`.
pub fn status(config: &Config, json: bool) -> anyhow::Result<Exit> {
    let mut found = None;
    let result = runtime()?.block_on(control::request(
        &socket(config),
        &Request::Status,
        |reply| {
            match reply {
                Reply::Status { status } => found = Some(Ok(status)),
                // Refused (the host is busy or stopping): said as it is.
                Reply::Error { message } => found = Some(Err(message)),
                _ => {}
            }
            false
        },
    ));
    if let Err(error) = result {
        eprintln!("error: {error}");
        return Ok(Exit::NotFound);
    }
    let status = match found {
        Some(Ok(status)) => status,
        Some(Err(message)) => {
            eprintln!("error: {message}");
            return Ok(Exit::NotFound);
        }
        None => {
            eprintln!("error: the host gave no status");
            return Ok(Exit::NotFound);
        }
    };
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &status)?;
        writeln!(out)?;
        return Ok(Exit::Ok);
    }
    let get = |key: &str| status.get(key).cloned().unwrap_or_default();
    writeln!(out, "pid:            {}", get("pid"))?;
    writeln!(out, "uptime:         {} s", get("uptime_secs"))?;
    writeln!(
        out,
        "provider:       {}",
        get("provider").as_str().unwrap_or("")
    )?;
    writeln!(
        out,
        "session:        {}",
        get("session").as_str().unwrap_or("")
    )?;
    writeln!(out, "registry gen:   {}", get("registry_generation"))?;
    // Mapped for good (loaded code is never unloaded), against
    // `plugins.max_loads` and `plugins.max_load_mib`.
    writeln!(
        out,
        "libraries:      {} loaded, {:.1} MiB",
        get("loaded_libraries"),
        get("loaded_library_bytes").as_u64().unwrap_or(0) as f64 / 1048576.0
    )?;
    writeln!(out, "memex gen:      {}", get("memex_generation"))?;
    if get("warm_index").as_bool() == Some(true) {
        writeln!(
            out,
            "private text:   matcher read from the index (warm start)"
        )?;
    }
    writeln!(
        out,
        "usage:          {}",
        get("usage_percent")
            .as_u64()
            .map_or("-".to_owned(), |u| format!("{u}%"))
    )?;
    writeln!(out, "cycles:         {}", get("cycles"))?;
    match get("embeddings") {
        serde_json::Value::Null => writeln!(out, "embeddings:     off")?,
        e => writeln!(
            out,
            "embeddings:     {} — {} embedded, {} pending, {} from the cache, {} skipped ({})",
            e["state"].as_str().unwrap_or(""),
            e["embedded"],
            e["pending"],
            e["reused"],
            e["skipped"],
            e["model"].as_str().unwrap_or("")
        )?,
    }
    writeln!(
        out,
        "focus:          {}",
        get("focus").as_str().unwrap_or("-")
    )?;
    if let Some(skills) = get("skills").as_array() {
        writeln!(out, "skills:")?;
        for skill in skills {
            writeln!(
                out,
                "  {} {} — {}{}",
                skill["name"].as_str().unwrap_or(""),
                skill["version"].as_str().unwrap_or(""),
                skill["status"].as_str().unwrap_or(""),
                skill["isolation"]
                    .as_str()
                    .map(|i| format!(" ({i})"))
                    .unwrap_or_default()
            )?;
            let cell = &skill["cell"];
            if !cell.is_null() {
                writeln!(
                    out,
                    "    cell pid {}, {} MiB resident, {} restarts",
                    cell["pid"]
                        .as_u64()
                        .map_or("- (restarting)".to_owned(), |p| p.to_string()),
                    cell["rss_bytes"]
                        .as_u64()
                        .map_or("-".to_owned(), |b| format!("{:.1}", b as f64 / 1048576.0)),
                    cell["restarts"]
                )?;
                for act in cell["refused"].as_array().into_iter().flatten() {
                    writeln!(out, "    refused: {}", act.as_str().unwrap_or(""))?;
                }
            }
        }
    }
    match get("last_cycle") {
        serde_json::Value::Null => writeln!(out, "last cycle:     none")?,
        last => writeln!(
            out,
            "last cycle:     #{} {} ({}), {}, model {:.0} ms{}",
            last["id"],
            last["signal"].as_str().unwrap_or(""),
            last["context_type"].as_str().unwrap_or(""),
            prompt_tokens_line(&last),
            last["phases"]["model_ms"].as_f64().unwrap_or(0.0),
            last["error"]
                .as_str()
                .map(|e| format!(", error: {e}"))
                .unwrap_or_default()
        )?,
    }
    Ok(Exit::Ok)
}

/// The last cycle's prompt size: the host's count (the budget's, in the
/// configured encoding) and, when the embedded model answered, the
/// model's own count of its tokens, split into those reused from its KV
/// cache and those it read.
fn prompt_tokens_line(last: &serde_json::Value) -> String {
    let host = &last["prompt_tokens"];
    match &last["prompt_cache"] {
        serde_json::Value::Null => format!("{host} prompt tokens"),
        cache => {
            let (reused, new) = (&cache["reused_tokens"], &cache["new_tokens"]);
            let model = reused.as_u64().unwrap_or(0) + new.as_u64().unwrap_or(0);
            format!(
                "prompt {model} model tokens ({reused} reused from its KV cache, {new} read; \
                 {host} by the host's budget count)"
            )
        }
    }
}

/// `foveal stop`.
pub fn stop(config: &Config) -> anyhow::Result<Exit> {
    let mut stopping = false;
    let result = runtime()?.block_on(control::request(&socket(config), &Request::Stop, |reply| {
        match reply {
            Reply::Stopping => stopping = true,
            Reply::Error { message } => eprintln!("error: {message}"),
            _ => {}
        }
        false
    }));
    if result.is_ok() && stopping {
        println!(
            "stopping: the host cancels the turn in flight (keeping what the model sent), saves the session and exits"
        );
    }
    client_result(result, if stopping { Exit::Ok } else { Exit::NotFound })
}

/// `foveal check`: the configuration, the memex, the plugins and the
/// provider; every problem listed, exit 1 when there is one.
pub fn check(config: &Config) -> anyhow::Result<Exit> {
    let mut problems: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    if let Some(file) = &config.file {
        notes.push(format!("config: {} (valid)", file.display()));
    } else {
        notes.push("config: built-in defaults (no file found)".to_owned());
    }
    let mut opened = None;
    match Memex::open_with(&config.memex_paths, config.memex.clone()) {
        Ok(memex) => {
            let snapshot = memex.snapshot();
            notes.push(format!(
                "memex: {} objects in {} files",
                snapshot.len(),
                snapshot.files().count()
            ));
            // As `memex stats`: a private file that failed to load is not
            // named, only counted; one that could not be read at all is
            // (its privacy is unknown, and its name may be the only clue).
            let privacy = foveal_memex::privacy::PrivacyTags::new(&config.privacy_tags);
            let mut hidden = 0usize;
            for (path, error) in snapshot.failed() {
                if crate::memex::failed_is_private(&snapshot, &privacy, path) {
                    hidden += 1;
                } else {
                    // The error names its file.
                    problems.push(format!("memex: {error}"));
                }
            }
            match hidden {
                0 => {}
                1 => problems.push(
                    "memex: 1 private file failed to load, not named here (`foveal memex stats --include-private` names it)"
                        .to_owned(),
                ),
                n => problems.push(format!(
                    "memex: {n} private files failed to load, not named here (`foveal memex stats --include-private` names them)"
                )),
            }
            opened = Some(snapshot);
        }
        Err(error) => problems.push(format!("memex: {error}")),
    }
    for dir in [&config.plugins.dir] {
        if !dir.exists() {
            notes.push(format!(
                "plugins: the drop-in folder {} does not exist (created when a host watches it)",
                dir.display()
            ));
        }
    }
    // A folder others can write loads nothing; say so once for the folder,
    // even when it holds no library yet.
    for dir in crate::skills::registry_options(config).dirs {
        if let Ok(Err(fault)) = foveal_registry::trust::check_path(&dir.path) {
            problems.push(format!("plugins: {fault}"));
        }
    }
    match crate::skills::open_registry(config) {
        Ok(registry) => {
            // Each `components` hook once, on the memex as lent: a
            // component at an id the skill did not declare is a problem
            // (the host drops it).
            foveal_prompt::prompt::components::probe_undeclared(
                &registry.snapshot(),
                &foveal_memex::view::SnapshotView::new(
                    &opened.unwrap_or_default(),
                    &foveal_memex::privacy::PrivacyTags::new(&config.privacy_tags),
                ),
            );
            for row in registry.snapshot().rows() {
                for warning in &row.warnings {
                    problems.push(format!("skill {}: {warning}", row.name));
                }
                if row.status == "loaded" {
                    notes.push(format!("skill {}: loaded", row.name));
                } else {
                    problems.push(format!(
                        "skill {} ({}): {}",
                        row.name,
                        row.path.display(),
                        row.status
                    ));
                }
            }
        }
        Err(error) => problems.push(format!("plugins: {error}")),
    }
    match foveal_provider::from_settings(&config.provider) {
        Ok(provider) => {
            notes.push(format!("provider: {}", provider.describe()));
            notes.extend(provider.details());
        }
        Err(error) => problems.push(format!("provider: {error}")),
    }
    // Without vectors the host still runs (objects are simply not
    // promoted by similarity): a note, not a problem.
    let embedding = &config.embedding;
    notes.push(match embedding.kind {
        foveal_embed::EmbedKind::Local => {
            match foveal_embed::local::model_dir(embedding.model_dir.as_deref()) {
                Ok(dir) => format!("embedding: local all-MiniLM-L6-v2 ({})", dir.display()),
                Err(error) => format!("embedding: unavailable: {error}"),
            }
        }
        foveal_embed::EmbedKind::OpenAi => format!(
            "embedding: OpenAI-compatible {}/embeddings ({})",
            foveal_embed::settings::safe_url(&embedding.base_url),
            embedding.model
        ),
        foveal_embed::EmbedKind::Off => "embedding: off".to_owned(),
    });
    if !foveal_agent::session::valid_name(&config.agent.session) {
        problems.push(format!(
            "agent.session: {:?} is not a session name",
            config.agent.session
        ));
    }
    let mut out = std::io::stdout().lock();
    for note in &notes {
        writeln!(out, "ok       {note}")?;
    }
    for problem in &problems {
        writeln!(out, "PROBLEM  {problem}")?;
    }
    if problems.is_empty() {
        writeln!(out, "no problems found")?;
        Ok(Exit::Ok)
    } else {
        writeln!(out, "{} problem(s) found", problems.len())?;
        Ok(Exit::NotFound)
    }
}

#[cfg(test)]
mod tests {
    use super::prompt_tokens_line;

    #[test]
    fn the_status_says_which_prompt_count_is_the_models_and_which_the_hosts() {
        let last = serde_json::json!({
            "prompt_tokens": 1893,
            "prompt_cache": {"reused_tokens": 1093, "new_tokens": 16},
        });
        assert_eq!(
            prompt_tokens_line(&last),
            "prompt 1109 model tokens (1093 reused from its KV cache, 16 read; \
             1893 by the host's budget count)"
        );
        let remote = serde_json::json!({"prompt_tokens": 1893, "prompt_cache": null});
        assert_eq!(prompt_tokens_line(&remote), "1893 prompt tokens");
    }
}
