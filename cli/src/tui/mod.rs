//! `foveal tui`: a terminal UI, a client of the running host.
//!
//! It speaks the control socket's protocol ([`foveal_agent::control`]):
//! on one connection `hello` (versions and the host's state) then
//! `subscribe` (events pushed as skills, the memex, cycles and the focus
//! change); each message is a `send` on a connection of its own, Esc a
//! `cancel`, `/context` a `context`, `/window` a `window` list. Closing
//! the UI never stops the host; with no host running, it starts
//! `foveal run --no-repl` in the background with the same flags and says
//! so. When the host goes away the UI says so and reconnects when it is
//! back.
//!
//! The loop sleeps until a key, a resize, a line from the host or a
//! signal arrives (crossterm's event stream and the socket in one
//! `select!`), and redraws only then. The terminal is restored on every
//! exit: a guard on drop, a panic hook that restores first, SIGTERM,
//! SIGHUP and SIGINT.

pub mod app;
pub mod view;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crossterm::event::{Event, EventStream};
use futures_util::StreamExt as _;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use crate::exit::Exit;
use app::{Action, App, Link};
use foveal_agent::config::Config;
use foveal_agent::control::{self, PROTOCOL, Reply, Request};

/// What reaches the UI's loop from the host.
#[derive(Debug)]
enum FromHost {
    /// A line: the handshake, a pushed event, part of a turn's answer.
    Reply(Reply),
    /// The subscription connection ended (or could not be made).
    Lost(String),
    /// A one-shot request failed to connect or broke.
    Failed(String),
    /// The host does not speak this client's protocol.
    Mismatch(String),
}

/// The longest wait between two attempts to reach a host that went away.
const RECONNECT_MAX: Duration = Duration::from_secs(2);

/// `foveal tui`.
pub fn run(config: &Config, session: Option<String>) -> anyhow::Result<Exit> {
    use std::io::IsTerminal as _;
    if !io::stdout().is_terminal() || !io::stdin().is_terminal() {
        eprintln!(
            "error: foveal tui needs a terminal (stdin and stdout); use `foveal send` and `foveal status` from scripts"
        );
        return Ok(Exit::Usage);
    }
    let socket = crate::agent::socket(config);
    let rt = crate::agent::runtime()?;
    rt.block_on(async {
        let mut app = App::new(session);
        if UnixStream::connect(&socket).await.is_err() {
            match start_host(config) {
                Ok(note) => app.note(note),
                Err(error) => {
                    eprintln!("error: no host is running and none could be started: {error}");
                    return Ok(Exit::NotFound);
                }
            }
        }
        let guard = TerminalGuard::enter()?;
        let result = ui(&mut app, &socket, guard).await;
        result.map(|()| Exit::Ok)
    })
}

/// Starts `foveal run --no-repl` with this command's flags, detached (its
/// own process group, so neither Ctrl-C nor the terminal closing reaches
/// it); its output goes to `<data dir>/run/host.log`.
fn start_host(config: &Config) -> anyhow::Result<String> {
    use std::os::unix::process::CommandExt as _;
    let exe = std::env::current_exe()?;
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    // The subcommand, not a `--config tui` before it.
    let Some(at) =
        (0..args.len()).find(|&i| args[i] == "tui" && (i == 0 || args[i - 1] != "--config"))
    else {
        anyhow::bail!("cannot find the `tui` subcommand in the command line");
    };
    args[at] = "run".into();
    args.insert(at + 1, "--no-repl".into());
    let log_dir = config.data_dir.join("run");
    std::fs::create_dir_all(&log_dir)?;
    let log_path = log_dir.join("host.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
    let child = std::process::Command::new(exe)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()?;
    Ok(format!(
        "no host was running: started `foveal run --no-repl` in the background (pid {}, log {}); it keeps running when this UI closes — `foveal stop` stops it",
        child.id(),
        log_path.display()
    ))
}

/// The terminal in raw mode on the alternate screen, restored on drop —
/// and by the panic hook, before the panic's message is printed.
struct TerminalGuard {
    terminal: Terminal<CrosstermBackend<io::Stdout>>,
}

impl std::fmt::Debug for TerminalGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TerminalGuard")
    }
}

fn restore_terminal() {
    let _ = crossterm::terminal::disable_raw_mode();
    let _ = crossterm::execute!(
        io::stdout(),
        crossterm::terminal::LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}

impl TerminalGuard {
    fn enter() -> io::Result<Self> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
        crossterm::terminal::enable_raw_mode()?;
        let entered = crossterm::execute!(io::stdout(), crossterm::terminal::EnterAlternateScreen);
        if let Err(error) = entered {
            restore_terminal();
            return Err(error);
        }
        match Terminal::new(CrosstermBackend::new(io::stdout())) {
            Ok(terminal) => Ok(Self { terminal }),
            Err(error) => {
                restore_terminal();
                Err(error)
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// The UI's loop: until Ctrl-C (or a signal).
async fn ui(app: &mut App, socket: &Path, mut guard: TerminalGuard) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let (tx, mut rx) = mpsc::unbounded_channel::<FromHost>();
    tokio::spawn(subscription(socket.to_owned(), tx.clone()));
    let mut keys = EventStream::new();
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut dirty = true;
    loop {
        if dirty {
            guard.terminal.draw(|frame| view::draw(frame, app))?;
            dirty = false;
        }
        tokio::select! {
            key = keys.next() => match key {
                Some(Ok(Event::Key(key))) => {
                    match app.key(key) {
                        Action::None => {}
                        Action::Quit => return Ok(()),
                        action => act(action, socket, &tx),
                    }
                    dirty = true;
                }
                Some(Ok(Event::Resize(..))) => {
                    guard.terminal.autoresize()?;
                    dirty = true;
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error.into()),
                None => return Ok(()),
            },
            Some(message) = rx.recv() => {
                match message {
                    FromHost::Reply(reply) => {
                        let hello = matches!(reply, Reply::Hello { .. });
                        app.apply(reply);
                        if hello {
                            // The size, asked again once connected (the
                            // terminal may have changed while waiting).
                            guard.terminal.autoresize()?;
                            guard.terminal.clear()?;
                        }
                    }
                    FromHost::Lost(why) => {
                        if app.link != Some(Link::Lost(why.clone())) {
                            if app.link == Some(Link::Connected) {
                                app.note(format!("the host went away ({why}); reconnecting when it is back"));
                            }
                            app.link = Some(Link::Lost(why));
                        }
                        app.busy = false;
                    }
                    FromHost::Mismatch(why) => app.mismatch = Some(why),
                    FromHost::Failed(why) => {
                        app.busy = false;
                        app.note(format!("error: {why}"));
                    }
                }
                dirty = true;
            }
            _ = term.recv() => return Ok(()),
            _ = hup.recv() => return Ok(()),
            _ = int.recv() => return Ok(()),
        }
    }
}

/// Sends what a key asked for, on a connection of its own; the answer
/// comes back through `tx`.
fn act(action: Action, socket: &Path, tx: &mpsc::UnboundedSender<FromHost>) {
    let request = match action {
        Action::Send { text, focus } => Request::Send {
            text,
            focus,
            signal: foveal_agent::SignalSource::UserInput,
            report: false,
            config_id: None,
        },
        Action::Cancel => Request::Cancel,
        Action::Context => Request::Context { focus: None },
        Action::Window => Request::Window {
            op: foveal_prompt::window::WindowOp::List {
                types: Vec::new(),
                limit: None,
            },
            session: None,
        },
        Action::None | Action::Quit => return,
    };
    let socket = socket.to_owned();
    let tx = tx.clone();
    tokio::spawn(async move {
        let result = control::request(&socket, &request, |reply| {
            let last = !matches!(reply, Reply::Text { .. } | Reply::Tool { .. });
            let _ = tx.send(FromHost::Reply(reply));
            !last
        })
        .await;
        if let Err(error) = result {
            let _ = tx.send(FromHost::Failed(error.to_string()));
        }
    });
}

/// The subscription: `hello`, `subscribe`, then every pushed event; when
/// the host goes away, tries again (sooner at first, then every
/// [`RECONNECT_MAX`]) until it is back.
async fn subscription(socket: PathBuf, tx: mpsc::UnboundedSender<FromHost>) {
    let mut wait = Duration::from_millis(100);
    loop {
        match subscribe_once(&socket, &tx).await {
            Ok(()) => {
                wait = Duration::from_millis(100);
                if tx
                    .send(FromHost::Lost("the host closed the connection".to_owned()))
                    .is_err()
                {
                    return;
                }
            }
            Err(why) => {
                if tx.send(FromHost::Lost(why)).is_err() {
                    return;
                }
            }
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(RECONNECT_MAX);
    }
}

async fn subscribe_once(socket: &Path, tx: &mpsc::UnboundedSender<FromHost>) -> Result<(), String> {
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|e| format!("no host at {}: {e}", socket.display()))?;
    let mut stream = BufReader::new(stream);
    for request in [
        Request::Hello {
            protocol: PROTOCOL,
            client: env!("CARGO_PKG_VERSION").to_owned(),
        },
        Request::Subscribe,
    ] {
        let mut line = serde_json::to_vec(&request).map_err(|e| e.to_string())?;
        line.push(b'\n');
        stream
            .get_mut()
            .write_all(&line)
            .await
            .map_err(|e| e.to_string())?;
    }
    let mut line = String::new();
    let mut greeted = false;
    loop {
        line.clear();
        let n = stream
            .read_line(&mut line)
            .await
            .map_err(|e| format!("the connection broke: {e}"))?;
        if n == 0 {
            return Ok(());
        }
        match serde_json::from_str::<Reply>(&line) {
            // A host older than the handshake refuses `hello` as a request
            // it does not know (serde's "unknown variant").
            Ok(Reply::Error { message }) if !greeted && message.contains("unknown variant") => {
                let _ = tx.send(FromHost::Mismatch(format!(
                    "the host does not speak control protocol {PROTOCOL} (it answered: {message}); it is older than this foveal tui {} — run a host of the same version",
                    env!("CARGO_PKG_VERSION")
                )));
                return Err("the host refused the handshake".to_owned());
            }
            // Any other error before the handshake (the host is stopping,
            // it is serving too many clients): the connection is lost,
            // for the reason the host gave; the UI tries again.
            Ok(Reply::Error { message }) if !greeted => return Err(message),
            Ok(reply) => {
                greeted |= matches!(reply, Reply::Hello { .. });
                if tx.send(FromHost::Reply(reply)).is_err() {
                    return Ok(());
                }
            }
            // A host of another protocol: say what it sent.
            Err(error) => {
                return Err(format!(
                    "the host answered something this client does not understand ({error}): {}",
                    line.trim()
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests;
