//! The host's side of a cell: start it, call its hooks under a deadline,
//! tell what it refused, and start it again when it dies.
//!
//! A [`Cell`] owns one child process at a time. Calls are made one after
//! another (a mutex), on the calling thread: the request goes out, and
//! the caller reads frames until the reply, answering the cell's log
//! lines and host API calls as they come. Past the deadline the cell is
//! killed — nothing is left running, the CPU comes back — and the next
//! call starts a new one. A cell that dies is said on the host's log with
//! the skill, the hook and the signal, and started again after a backoff
//! that doubles with each death in a row.

use std::collections::HashSet;
use std::fs::File;
use std::io::{Read as _, Seek as _};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abi_stable::std_types::{RErr, ROk, RResult, RStr};
use foveal_sdk::{HostApiRef, LogLevel, SkillError};

use crate::answer::AnswerArea;
use crate::confine::{Confinement, Grants, acts};
use crate::proto::{self, hook, host_call, load_failed};
use crate::serve::CHANNEL_FD;
use crate::view::SealedFile;
use crate::wire::{Channel, Frame, Kind, Reader, WireError, Writer};

/// How to start a cell.
#[derive(Debug, Clone)]
pub struct CellOptions {
    /// The `foveal-cell` executable.
    pub exe: PathBuf,
    /// The private copy of the library the cell loads.
    pub library: PathBuf,
    /// What the library is called where the user put it (for messages).
    pub origin: PathBuf,
    /// The limit on what the cell allocates (`memory_mib`).
    pub memory_mib: u32,
    /// What the cell may read and whether it may use the network.
    pub grants: Grants,
    /// Fail as on a kernel without Landlock (tests).
    pub simulate_no_landlock: bool,
}

/// The manifest a cell reports once its library is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The skill's name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The SDK it was built against.
    pub sdk_version: String,
    /// Its priority.
    pub priority: i32,
    /// Skills it needs.
    pub dependencies: Vec<String>,
    /// One line.
    pub description: String,
    /// The literate source.
    pub source: String,
    /// The component ids it declares.
    pub component_ids: Vec<u32>,
    /// The hooks present, as names.
    pub hooks: Vec<&'static str>,
    /// How the cell is confined.
    pub confinement: Confinement,
    /// What the library says it needs (`needs` of `export_skill!`):
    /// `network`, `read:PATH`.
    pub needs: Vec<String>,
}

/// Why a cell did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The executable could not be started.
    #[error("cannot start the cell ({}): {source}", exe.display())]
    Spawn {
        /// The executable.
        exe: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The cell could not confine itself, so it loaded nothing.
    #[error("{0}")]
    Unconfined(String),
    /// The library did not load in the cell: a [`load_failed`] kind, a
    /// message and details.
    #[error("{message}")]
    Load {
        /// One of [`load_failed`].
        kind: u8,
        /// What went wrong.
        message: String,
        /// Details (the SDK versions).
        extra: Vec<String>,
    },
    /// The cell died or said something else before it was ready.
    #[error("the cell ended before it was ready: {0}")]
    Died(String),
}

/// Why a hook call in a cell produced no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The cell died during the call (a signal, or an exit).
    #[error("its cell died ({how}){}", last_words(.stderr))]
    Died {
        /// `SIGSEGV`, `exit status 3`, …
        how: String,
        /// The last line it wrote to its standard error.
        stderr: String,
    },
    /// The call passed its deadline: the cell was killed.
    #[error("did not return within {} ms; its cell was killed and will be started again", .0.as_millis())]
    Timeout(Duration),
    /// The cell is down and waits before it is started again.
    #[error("its cell is restarting (next try in {} ms)", .0.as_millis())]
    Restarting(Duration),
    /// A new cell could not be started.
    #[error("its cell could not be started again: {0}")]
    Start(String),
    /// The cell answered something that is not an answer.
    #[error("its cell broke the protocol: {0}")]
    Protocol(String),
}

fn last_words(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

impl CallError {
    /// Whether this counts like a panic toward quarantine (the skill
    /// crashed or hung), as opposed to a cell waiting to restart.
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            Self::Died { .. } | Self::Timeout(_) | Self::Protocol(_)
        )
    }
}

/// What `foveal status` shows of a cell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CellStatus {
    /// The running process, if any.
    pub pid: Option<u32>,
    /// Its resident memory in bytes.
    pub rss_bytes: Option<u64>,
    /// Times it was started again after dying or hanging.
    pub restarts: u32,
    /// The acts it was refused, each once.
    pub refused: Vec<String>,
}

struct Process {
    child: Child,
    channel: Channel,
    stderr: File,
    /// Keys of the view files the cell holds.
    sent: HashSet<u64>,
    /// Where the cell's large answers come (read-only here).
    answers: AnswerArea,
}

struct State {
    process: Option<Process>,
    /// Not before this instant is a dead cell started again.
    retry_at: Option<Instant>,
    deaths_in_a_row: u32,
}

/// One skill's cell.
pub struct Cell {
    options: CellOptions,
    manifest: Manifest,
    host: HostApiRef,
    state: Mutex<State>,
    restarts: AtomicU32,
    refused: Mutex<Vec<String>>,
    pid: AtomicU64,
}

impl std::fmt::Debug for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cell")
            .field("skill", &self.manifest.name)
            .field("pid", &self.pid.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Log lines and host API calls one hook call may make.
const MAX_CHATTER: u32 = 100_000;

/// How long a cell has to confine itself, load its library and say so.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// The first wait before a dead cell is started again; it doubles with
/// each death in a row, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

impl Cell {
    /// Starts a cell on `options` and waits for its manifest. The
    /// library's `init` has not run: call [`init`](Self::init).
    pub fn start(options: CellOptions, host: HostApiRef) -> Result<Self, StartError> {
        let (process, manifest) = spawn(&options, START_TIMEOUT)?;
        let pid = process.child.id();
        Ok(Self {
            options,
            manifest,
            host,
            state: Mutex::new(State {
                process: Some(process),
                retry_at: None,
                deaths_in_a_row: 0,
            }),
            restarts: AtomicU32::new(0),
            refused: Mutex::new(Vec::new()),
            pid: AtomicU64::new(u64::from(pid)),
        })
    }

    /// What the library says about itself.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The options it was started with.
    pub fn options(&self) -> &CellOptions {
        &self.options
    }

    /// Runs the skill's `init`.
    pub fn init(&self, timeout: Duration) -> Result<RResult<(), SkillError>, CallError> {
        self.call(hook::INIT, None, timeout, |_| {}, |_| Ok(()))
    }

    /// Its state for `foveal status`.
    pub fn status(&self) -> CellStatus {
        let pid = {
            let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.process.as_ref().map(|p| p.child.id())
        };
        CellStatus {
            pid,
            rss_bytes: pid.and_then(rss_of),
            restarts: self.restarts.load(Ordering::Relaxed),
            refused: self
                .refused
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    /// Calls `hook`: `put` writes its arguments after the hook number,
    /// `view` lends files (written after the arguments), `get` reads the
    /// value of a successful answer.
    pub fn call<T>(
        &self,
        which: u8,
        view: Option<(u64, &[Arc<SealedFile>])>,
        timeout: Duration,
        put: impl FnOnce(&mut Writer),
        get: impl FnOnce(&mut Reader<'_>) -> Result<T, WireError>,
    ) -> Result<RResult<T, SkillError>, CallError> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.ensure_running(&mut state, timeout)?;
        let deadline = Instant::now() + timeout;
        let outcome = {
            let Some(process) = state.process.as_mut() else {
                return Err(CallError::Start("no process".to_owned()));
            };
            self.exchange(process, which, view, deadline, put, get)
        };
        match outcome {
            Ok(value) => {
                state.deaths_in_a_row = 0;
                Ok(value)
            }
            Err(WireError::Timeout) => {
                self.bury(&mut state, true);
                state.retry_at = None;
                tracing::error!(
                    skill = %self.manifest.name,
                    hook = hook::name(which),
                    timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                    "skill hook did not return in time (plugins.hook_timeout_ms); its cell was killed and will be started again"
                );
                Err(CallError::Timeout(timeout))
            }
            Err(WireError::Malformed(what)) => {
                self.bury(&mut state, true);
                Err(CallError::Protocol(what.to_owned()))
            }
            Err(WireError::Closed | WireError::Io(_)) => {
                let (how, stderr) = self.bury(&mut state, false);
                state.deaths_in_a_row += 1;
                let backoff = FIRST_BACKOFF
                    .saturating_mul(1 << state.deaths_in_a_row.min(8).saturating_sub(1))
                    .min(MAX_BACKOFF);
                state.retry_at = Some(Instant::now() + backoff);
                tracing::error!(
                    skill = %self.manifest.name,
                    hook = hook::name(which),
                    signal = %how,
                    "skill cell died in its {} hook ({how}){}; the hook's fallback is used and the cell starts again in {} ms",
                    hook::name(which),
                    last_words(&stderr),
                    backoff.as_millis()
                );
                Err(CallError::Died { how, stderr })
            }
        }
    }

    fn ensure_running(&self, state: &mut State, timeout: Duration) -> Result<(), CallError> {
        if state.process.is_some() {
            return Ok(());
        }
        if let Some(at) = state.retry_at {
            let now = Instant::now();
            if now < at {
                return Err(CallError::Restarting(at - now));
            }
        }
        let start_timeout = START_TIMEOUT.min(timeout + Duration::from_secs(1));
        let (process, manifest) = spawn(&self.options, start_timeout).map_err(|e| {
            state.retry_at = Some(Instant::now() + MAX_BACKOFF);
            CallError::Start(e.to_string())
        })?;
        if manifest.name != self.manifest.name {
            let mut process = process;
            let _ = process.child.kill();
            let _ = process.child.wait();
            state.retry_at = Some(Instant::now() + MAX_BACKOFF);
            return Err(CallError::Protocol(format!(
                "the library now says it is skill `{}`",
                manifest.name
            )));
        }
        self.pid
            .store(u64::from(process.child.id()), Ordering::Relaxed);
        state.process = Some(process);
        self.restarts.fetch_add(1, Ordering::Relaxed);
        // A new cell runs `init` before anything else, as the first did.
        let deadline = Instant::now() + timeout;
        let init = match state.process.as_mut() {
            Some(p) => self.exchange(p, hook::INIT, None, deadline, |_| {}, |_| Ok(())),
            None => return Err(CallError::Start("no process".to_owned())),
        };
        match init {
            Ok(ROk(())) => {
                tracing::info!(skill = %self.manifest.name, "skill cell started again");
                Ok(())
            }
            Ok(RErr(e)) => {
                self.bury(state, true);
                state.retry_at = Some(Instant::now() + MAX_BACKOFF);
                Err(CallError::Start(format!("init failed: {e}")))
            }
            Err(e) => {
                self.bury(state, true);
                state.retry_at = Some(Instant::now() + MAX_BACKOFF);
                Err(CallError::Start(format!("init: {e}")))
            }
        }
    }

    /// Reaps the process (killing it first when `kill`): how it ended and
    /// the last line of its standard error.
    fn bury(&self, state: &mut State, killed: bool) -> (String, String) {
        let Some(mut process) = state.process.take() else {
            return (String::new(), String::new());
        };
        // Killed whatever `kill` says: a cell that closed its channel may
        // still be running (a hook that closed descriptor 3 and sleeps).
        let _ = process.child.kill();
        let how = match process.child.wait() {
            // A cell killed here for a deadline or a broken protocol says
            // SIGKILL; one that died on its own says its signal.
            Ok(status) => match status.signal() {
                Some(libc::SIGKILL) if !killed => "SIGKILL (out of memory?)".to_owned(),
                Some(sig) => signal_name(sig),
                None => format!("exit status {}", status.code().unwrap_or(-1)),
            },
            Err(e) => format!("unknown: {e}"),
        };
        (how, last_line(&mut process.stderr))
    }

    fn exchange<T>(
        &self,
        process: &mut Process,
        which: u8,
        view: Option<(u64, &[Arc<SealedFile>])>,
        deadline: Instant,
        put: impl FnOnce(&mut Writer),
        get: impl FnOnce(&mut Reader<'_>) -> Result<T, WireError>,
    ) -> Result<RResult<T, SkillError>, WireError> {
        let mut keys = Vec::new();
        let mut w = Writer::new(Kind::Call);
        w.u8(which);
        put(&mut w);
        if let Some((generation, files)) = view {
            let new: Vec<&Arc<SealedFile>> = files
                .iter()
                .filter(|f| !process.sent.contains(&f.key))
                .collect();
            for chunk in new.chunks(crate::wire::FILES_PER_FRAME) {
                let mut files_frame = Writer::new(Kind::Files);
                files_frame.u32(chunk.len() as u32);
                for file in chunk {
                    files_frame.u64(file.key);
                }
                let fds: Vec<RawFd> = chunk.iter().map(|f| f.raw_fd()).collect();
                process
                    .channel
                    .send_by(&files_frame.finish(), &fds, Some(deadline))?;
            }
            w.u64(generation).u32(files.len() as u32);
            for file in files {
                w.u64(file.key);
                keys.push(file.key);
            }
        }
        process.channel.send_by(&w.finish(), &[], Some(deadline))?;
        if view.is_some() {
            process.sent = keys.into_iter().collect();
        }
        // What a cell may say during one call besides its answer: a
        // chattier one is cut off as broken.
        let mut chatter = 0u32;
        loop {
            let frame = process.channel.recv(Some(deadline))?;
            if Instant::now() >= deadline {
                return Err(WireError::Timeout);
            }
            if frame.kind != Kind::Reply {
                chatter += 1;
                if chatter > MAX_CHATTER {
                    return Err(WireError::Malformed(
                        "more log lines and host calls in one hook call than allowed",
                    ));
                }
            }
            match frame.kind {
                Kind::Log => self.log(&frame),
                Kind::HostCall => {
                    let reply = self.host_call(&frame)?;
                    process.channel.send_by(&reply, &[], Some(deadline))?;
                }
                Kind::Reply => {
                    let mut r = Reader::with_area(&frame.body, &process.answers);
                    self.note_refused(&mut r)?;
                    return Ok(if r.bool()? {
                        ROk(get(&mut r)?)
                    } else {
                        RErr(proto::get_error(&mut r)?)
                    });
                }
                _ => return Err(WireError::Malformed("an unexpected frame during a call")),
            }
        }
    }

    fn log(&self, frame: &Frame) {
        let mut r = frame.reader();
        if let (Ok(level), Ok(message)) = (r.u8(), r.str()) {
            // A log line is a line: capped like a skill's error message.
            let mut end = message.len().min(4096);
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            let message = &message[..end];
            (self.host.log())(
                LogLevel(level),
                RStr::from_str(&self.manifest.name),
                RStr::from_str(message),
            );
        }
    }

    fn host_call(&self, frame: &Frame) -> Result<Vec<u8>, WireError> {
        let mut r = frame.reader();
        let mut w = Writer::new(Kind::HostReply);
        match r.u8()? {
            host_call::COUNT_TOKENS => {
                let text = r.str()?;
                let count = match self.host.count_tokens() {
                    Some(count) => count(RStr::from_str(text)),
                    None => u32::try_from(text.len()).unwrap_or(u32::MAX),
                };
                w.u32(count);
            }
            host_call::MEMEX_WRITE => {
                let ticket = r.u64()?;
                let edits = r.str()?;
                let answer = match self.host.memex_write() {
                    Some(write) => write(ticket, RStr::from_str(edits)),
                    None => RErr(SkillError::new(
                        SkillError::UNAVAILABLE,
                        "this host cannot write to the memex",
                    )),
                };
                match answer {
                    ROk(text) => {
                        w.bool(true).str(&text);
                    }
                    RErr(e) => {
                        w.bool(false);
                        proto::put_error(&mut w, &e);
                    }
                }
            }
            _ => return Err(WireError::Malformed("unknown host call")),
        }
        Ok(w.finish())
    }

    fn note_refused(&self, r: &mut Reader<'_>) -> Result<(), WireError> {
        let n = r.count(12)?;
        for _ in 0..n {
            let kind = r.u32()?;
            let syscall = r.u32()?;
            let path = r.str()?;
            let text = if kind == acts::OPEN && !path.is_empty() {
                format!("open {path}")
            } else {
                format!("{} (system call {syscall})", acts::describe(kind))
            };
            let mut seen = self.refused.lock().unwrap_or_else(|e| e.into_inner());
            if seen.contains(&text) {
                continue;
            }
            if seen.len() < 256 {
                seen.push(text.clone());
            }
            drop(seen);
            tracing::warn!(
                skill = %self.manifest.name,
                "skill {} tried to {text}: refused",
                self.manifest.name
            );
        }
        Ok(())
    }
}

impl Drop for Cell {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(mut process) = state.process.take() {
            // Closing the channel ends a cell between calls; a kill ends
            // one that is not listening.
            drop(process.channel);
            let _ = process.child.kill();
            let _ = process.child.wait();
        }
        let _ = std::fs::remove_file(&self.options.library);
    }
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGKILL => "SIGKILL",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGSYS => "SIGSYS",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        _ => return format!("signal {sig}"),
    };
    name.to_owned()
}

fn last_line(file: &mut File) -> String {
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(2048);
    if file.seek(std::io::SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut bytes = Vec::new();
    let _ = file.take(2048).read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let mut line = line.trim().to_owned();
    if line.len() > 300 {
        let mut end = 300;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line.truncate(end);
        line.push('…');
    }
    line
}

fn rss_of(pid: u32) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf with a constant name.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).unwrap_or(4096))
}

/// The thread every cell is started from. A cell asks to be killed when
/// the thread that started it ends (`PR_SET_PDEATHSIG` follows the
/// thread, not the process), so they are all started from this one,
/// which lives as long as the host.
fn spawner() -> &'static Mutex<std::sync::mpsc::Sender<SpawnJob>> {
    static SPAWNER: std::sync::OnceLock<Mutex<std::sync::mpsc::Sender<SpawnJob>>> =
        std::sync::OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<SpawnJob>();
        let _ = std::thread::Builder::new()
            .name("foveal-cells".to_owned())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job();
                }
            });
        Mutex::new(tx)
    })
}

type SpawnJob = Box<dyn FnOnce() + Send>;

fn spawn_child(mut command: Command) -> std::io::Result<Child> {
    let (tx, rx) = std::sync::mpsc::channel();
    let job: SpawnJob = Box::new(move || {
        let _ = tx.send(command.spawn());
    });
    spawner()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send(job)
        .map_err(|_| std::io::Error::other("the cell spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| std::io::Error::other("the cell spawner thread is gone"))?
}

fn stderr_file() -> std::io::Result<File> {
    let name = c"foveal-cell-stderr";
    // SAFETY: a valid C string and flags.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just created, owned by nobody else.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

fn spawn(options: &CellOptions, timeout: Duration) -> Result<(Process, Manifest), StartError> {
    let spawn_error = |source| StartError::Spawn {
        exe: options.exe.clone(),
        source,
    };
    let (ours, theirs) = Channel::pair().map_err(spawn_error)?;
    let stderr = stderr_file().map_err(spawn_error)?;
    let child_stderr = stderr.try_clone().map_err(spawn_error)?;
    let mut command = Command::new(&options.exe);
    command
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(child_stderr));
    let theirs_raw = theirs.as_raw_fd();
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls dup2 and fcntl, which are async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            if theirs_raw == CHANNEL_FD {
                let flags = libc::fcntl(CHANNEL_FD, libc::F_GETFD);
                libc::fcntl(CHANNEL_FD, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            } else if libc::dup2(theirs_raw, CHANNEL_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = spawn_child(command).map_err(spawn_error)?;
    drop(theirs);
    let channel = match Channel::for_host(ours) {
        Ok(channel) => channel,
        Err(e) => {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
            return Err(spawn_error(e));
        }
    };
    let (answers, answers_fd) = match AnswerArea::create() {
        Ok(area) => area,
        Err(e) => {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
            return Err(spawn_error(e));
        }
    };
    let mut process = Process {
        child,
        channel,
        stderr,
        sent: HashSet::new(),
        answers,
    };
    let mut w = Writer::new(Kind::Setup);
    w.str(&options.library.to_string_lossy())
        .u32(options.memory_mib)
        .bool(options.grants.network)
        .u32(options.grants.read.len() as u32);
    for path in &options.grants.read {
        w.str(&path.to_string_lossy());
    }
    w.bool(options.simulate_no_landlock);
    let answer = process
        .channel
        .send(&w.finish(), &[answers_fd.as_raw_fd()])
        .and_then(|()| process.channel.recv(Some(Instant::now() + timeout)));
    let frame = match answer {
        Ok(frame) => frame,
        Err(e) => {
            let _ = process.child.kill();
            let status = process.child.wait().ok();
            let how = status
                .and_then(|s| s.signal().map(signal_name))
                .unwrap_or_else(|| e.to_string());
            let last = last_line(&mut process.stderr);
            return Err(StartError::Died(format!("{how}{}", last_words(&last))));
        }
    };
    let decoded = match frame.kind {
        Kind::Hello => read_hello(&mut frame.reader()).map_err(|e| StartError::Died(e.to_string())),
        Kind::LoadFailed => {
            let mut r = frame.reader();
            let failure = (|| -> Result<StartError, WireError> {
                let kind = r.u8()?;
                let message = r.str()?.to_owned();
                let n = r.count(4)?;
                let mut extra = Vec::with_capacity(n);
                for _ in 0..n {
                    extra.push(r.str()?.to_owned());
                }
                Ok(if kind == load_failed::UNCONFINED {
                    StartError::Unconfined(message)
                } else {
                    StartError::Load {
                        kind,
                        message,
                        extra,
                    }
                })
            })()
            .unwrap_or_else(|e| StartError::Died(e.to_string()));
            Err(failure)
        }
        _ => Err(StartError::Died("an unexpected first frame".to_owned())),
    };
    match decoded {
        Ok(manifest) => Ok((process, manifest)),
        Err(e) => {
            let _ = process.child.kill();
            let _ = process.child.wait();
            Err(e)
        }
    }
}

fn read_hello(r: &mut Reader<'_>) -> Result<Manifest, WireError> {
    let name = r.str()?.to_owned();
    let version = r.str()?.to_owned();
    let sdk_version = r.str()?.to_owned();
    let priority = r.i32()?;
    let n = r.count(4)?;
    let mut dependencies = Vec::with_capacity(n);
    for _ in 0..n {
        dependencies.push(r.str()?.to_owned());
    }
    let description = r.str()?.to_owned();
    let source = r.str()?.to_owned();
    let n = r.count(4)?;
    let mut component_ids = Vec::with_capacity(n);
    for _ in 0..n {
        component_ids.push(r.u32()?);
    }
    let mask = r.u32()?;
    let hooks = foveal_sdk::SkillMod::HOOK_NAMES
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, n)| *n)
        .collect();
    let confinement = Confinement {
        landlock_abi: r.u32()?,
        seccomp: r.bool()?,
        namespaces: r.bool()?,
    };
    let n = r.count(4)?;
    let mut needs = Vec::with_capacity(n.min(64));
    for _ in 0..n.min(64) {
        needs.push(r.str()?.chars().take(300).collect());
    }
    Ok(Manifest {
        name,
        version,
        sdk_version,
        priority,
        dependencies,
        description,
        source,
        component_ids,
        hooks,
        confinement,
        needs,
    })
}

/// Where the `foveal-cell` executable is: `FOVEAL_CELL` when set, else
/// beside the running executable, else one folder up (the test binaries
/// of `cargo test` live in `target/<profile>/deps`).
pub fn find_executable() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("FOVEAL_CELL") {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let name = format!("foveal-cell{}", std::env::consts::EXE_SUFFIX);
    [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join(&name))
        .find(|p| p.is_file())
}

/// The path the library copy of a cell is written to, in `shadow_dir`.
pub fn library_copy_path(shadow_dir: &Path, stem: &str, seq: u64) -> PathBuf {
    shadow_dir.join(format!(
        "{stem}-{}-cell{seq}.{}",
        std::process::id(),
        std::env::consts::DLL_EXTENSION
    ))
}
