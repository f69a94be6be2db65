//! The control socket: how `foveal send`, `foveal status`, `foveal stop`
//! and `foveal window` talk to a running host.
//!
//! A Unix socket (permissions 0600, in a folder of mode 0700) at
//! `agent.socket` / `FOVEAL_SOCKET`, by default
//! `$XDG_RUNTIME_DIR/foveal/control.sock` (else `<data dir>/run/`). The
//! protocol is JSON lines: the client writes one [`Request`], the host
//! answers with [`Reply`] lines — for `send`, the reply's text as it is
//! written, the tools that ran, then `done`.
//!
//! Protocol version [`PROTOCOL`] adds, for long-lived clients such as
//! `foveal tui`: `hello` (both sides' versions and the host's state),
//! `subscribe` (the host then pushes [`Reply`] events on that connection
//! as things change: skills, memex, cycles, focus), `cancel` (ends the
//! turn in flight) and `context` (the assembled context, explained).
//! The one-shot requests of version 0 (`send`, `status`, `stop`,
//! `window`) are unchanged. Within version 1, `focus` (the focus by id,
//! or by a file and a line, as an editor knows it) was added later, and
//! `context`'s answer gained the objects it shows with their places: a
//! new request and an optional field, which older clients never see; so
//! was `command` (`foveal context` and `foveal prompt` answered by the
//! host, [`crate::commands`]).
//!
//! A request line must come within [`REQUEST_WAIT`] of connecting (or of
//! the answer to `hello`); a connection that sends nothing is then
//! answered with an error and closed.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::{SignalSource, StopReason};

/// The control protocol's version: the host answers `hello` with its own,
/// and a client that speaks another says so.
pub const PROTOCOL: u32 = 1;

/// What a client asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Request {
    /// A message for the agent: one turn; the reply streams back.
    Send {
        /// The text.
        text: String,
        /// The object to focus on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        focus: Option<String>,
        /// `user_input` (default) or `delegation`.
        #[serde(default = "user_input")]
        signal: SignalSource,
        /// Also answer `done` with the turn's report, as `foveal ask
        /// --json` prints it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        report: bool,
        /// The configuration the client expects the host to serve (its
        /// `config_id`): a host serving another answers
        /// [`Reply::OtherConfig`] and runs nothing (a host restarted with
        /// other settings since the client asked `status`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        config_id: Option<String>,
    },
    /// The host's status.
    Status,
    /// Cancel the turn in flight (as [`Request::Cancel`] does), save the
    /// session, exit. Obeyed even from a client beyond the host's limit.
    Stop,
    /// A change to the context window of the host's session, or a look at
    /// it (`foveal window …`).
    Window {
        /// What to do.
        op: foveal_prompt::window::WindowOp,
        /// The session meant; refused when it is not the host's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<String>,
    },
    /// The handshake: the client's protocol and version; the host answers
    /// [`Reply::Hello`].
    Hello {
        /// The protocol the client speaks ([`PROTOCOL`]).
        protocol: u32,
        /// The client's version.
        #[serde(default)]
        client: String,
    },
    /// Keep the connection open and push events ([`Reply::Skills`],
    /// [`Reply::Memex`], [`Reply::CycleStarted`], [`Reply::CycleFinished`],
    /// [`Reply::Focus`]) as they happen. Answered first with
    /// [`Reply::Subscribed`].
    Subscribe,
    /// End the turn in flight: the streaming reply stops, the tool running
    /// finishes, no further cycle starts. Answered [`Reply::Cancelled`].
    Cancel,
    /// The context section the next cycle would see, with the reasons for
    /// each object (`foveal context --explain`), through the last door.
    Context {
        /// The object in focus; the host's focus when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        focus: Option<String>,
    },
    /// A command answered as the client would answer it itself
    /// (`foveal context`, `foveal prompt`), on the host's loaded memex and
    /// skills: answered [`Reply::Printed`] (what the command prints, and
    /// how it ended), or [`Reply::OtherSession`] when a prompt's session
    /// is not the host's, or [`Reply::OtherConfig`] when `prompt_id` is
    /// given and is not the host's.
    Command {
        /// The command: `name` and its fields.
        #[serde(flatten)]
        command: crate::commands::Command,
        /// The host's `prompt_id` the client expects.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt_id: Option<String>,
    },
    /// Move the foveal focus: to the object `id`, or to the object at
    /// `line` of `file` (the headline nearest at or above it, see
    /// [`super::focus::object_at`]), or — with neither — clear it. Applied
    /// between turns; answered [`Reply::Focus`] once it is, or
    /// [`Reply::Error`] (a private object is refused as a missing one).
    Focus {
        /// The object's id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// A memex file, by its absolute path.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file: Option<PathBuf>,
        /// A 1-based line of `file`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        line: Option<u32>,
    },
}

fn user_input() -> SignalSource {
    SignalSource::UserInput
}

impl<'de> Deserialize<'de> for SignalSource {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        match name.as_str() {
            "user_input" => Ok(Self::UserInput),
            "delegation" => Ok(Self::Delegation),
            other => Err(serde::de::Error::custom(format!(
                "a client can send `user_input` or `delegation`, not `{other}`"
            ))),
        }
    }
}

/// One line of the host's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Reply {
    /// A piece of the reply's text.
    Text {
        /// The text.
        text: String,
    },
    /// A tool ran.
    Tool {
        /// Its name.
        name: String,
        /// Whether it succeeded.
        ok: bool,
        /// What it returned.
        result: String,
    },
    /// The turn ended.
    Done {
        /// Why.
        stop: StopReason,
        /// Its error, if it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The cycles it took.
        cycles: usize,
        /// The turn's report as `foveal ask --json` prints it (a JSON text,
        /// its fields in their order), when `send` asked for it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        report: Option<String>,
    },
    /// The host's status (`foveal status`).
    Status {
        /// The status object.
        status: serde_json::Value,
    },
    /// The host is stopping.
    Stopping,
    /// What a window operation answered.
    Window {
        /// The host's session, whose window it was.
        session: String,
        /// The skill's answer.
        result: serde_json::Value,
    },
    /// A window operation was refused (an invalid item, an unknown id,
    /// the skill missing): nothing was changed.
    WindowError {
        /// Why.
        message: String,
    },
    /// The session asked for is not the host's.
    OtherSession {
        /// The host's session.
        session: String,
    },
    /// The configuration the request expected (`config_id` of a `send`,
    /// `prompt_id` of a `command`) is not the host's: nothing was run.
    OtherConfig {
        /// The host's `config_id`.
        config_id: String,
        /// The host's `prompt_id`.
        prompt_id: String,
    },
    /// The request was not understood.
    Error {
        /// Why.
        message: String,
    },
    /// The answer to `hello`: the host's protocol and version, and its
    /// state now (the object `status` gives).
    Hello {
        /// The protocol the host speaks ([`PROTOCOL`]).
        protocol: u32,
        /// The host's version.
        host: String,
        /// The provider's model, when the configuration names one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The status object.
        status: serde_json::Value,
    },
    /// `subscribe` accepted: events follow on this connection.
    Subscribed,
    /// Pushed: the skill registry published a new generation, or a
    /// skill's status changed (quarantined).
    Skills {
        /// The registry generation.
        generation: u64,
        /// Each skill: name, version, status.
        skills: serde_json::Value,
    },
    /// Pushed: the memex published a new generation.
    Memex {
        /// The memex generation.
        generation: u64,
    },
    /// Pushed: a turn started.
    CycleStarted {
        /// Its signal (`user_input`, `heartbeat`, …).
        signal: String,
    },
    /// Pushed: a turn ended.
    CycleFinished {
        /// Why.
        stop: StopReason,
        /// The cycles it took.
        cycles: usize,
        /// Milliseconds the turn took.
        ms: f64,
        /// The context gauge: the share of the budget the last prompt
        /// used, 0–100 (token economics contract 5); absent without it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage_percent: Option<u8>,
    },
    /// Pushed: the foveal focus changed.
    Focus {
        /// The object id; absent when cleared.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        focus: Option<String>,
        /// Its title, when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// The answer to `cancel`.
    Cancelled {
        /// Whether a turn was in flight (and is now ending).
        in_flight: bool,
    },
    /// The answer to `command`: what the command printed.
    Printed(crate::commands::Printed),
    /// The answer to `context`: the explained section.
    Context {
        /// The text (`foveal context --explain`).
        text: String,
        /// The objects it shows, with their places (never a private one).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        objects: Vec<ContextObject>,
    },
}

/// An object the context shows, and where it is: what a client needs to
/// open its headline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextObject {
    /// Its id.
    pub id: String,
    /// Its title, through the gate.
    pub title: String,
    /// Its file, by absolute path.
    pub file: PathBuf,
    /// The 1-based line of its headline.
    pub line: u32,
    /// Why it is shown (`foveal`, `depth 1`, `similar 0.82`, …).
    pub reason: String,
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Ok(match name.as_str() {
            "replied" => Self::Replied,
            "terminal" => Self::Terminal,
            "max_iterations" => Self::MaxIterations,
            "ignored" => Self::Ignored,
            "cancelled" => Self::Cancelled,
            _ => Self::Error,
        })
    }
}

/// Why the socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Another host answers on it.
    #[error(
        "a foveal host is already running with the control socket {}; stop it with `foveal stop`, or set FOVEAL_SOCKET",
        path.display()
    )]
    InUse {
        /// The socket.
        path: PathBuf,
    },
    /// The folder or the socket could not be made.
    #[error("cannot open the control socket {}: {source}", path.display())]
    Io {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// The listening socket, removed when dropped.
#[derive(Debug)]
pub struct ControlSocket {
    listener: UnixListener,
    file: SocketFile,
}

/// The socket's file, to remove when the host exits — also when it exits
/// at once, without dropping the socket (a second SIGINT or SIGTERM).
#[derive(Debug, Clone)]
pub struct SocketFile {
    path: PathBuf,
    /// Device and inode of the socket file this host placed: the path is
    /// removed only while it is still this file, never a socket a newer
    /// host has put there since.
    file_id: Option<(u64, u64)>,
}

impl SocketFile {
    /// Removes the socket file, if it is still this host's.
    pub fn remove(&self) {
        if self.file_id.is_some() && file_id(&self.path) == self.file_id {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl ControlSocket {
    /// Binds `path`: its folder is created with mode 0700, the socket gets
    /// mode 0600. A stale socket (no one answers) is replaced.
    pub async fn bind(path: &Path) -> Result<Self, ControlError> {
        use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
        let io_error = |source| ControlError::Io {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dir.exists()
        {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_error)?;
        }
        if path.exists() {
            if UnixStream::connect(path).await.is_ok() {
                return Err(ControlError::InUse {
                    path: path.to_owned(),
                });
            }
            std::fs::remove_file(path).map_err(io_error)?;
        }
        // Bound under a private name, made 0600, then linked into place:
        // the socket is never visible at `path` with the umask's mode, and
        // `link` fails rather than replace a host that started meanwhile.
        let file_name = path.file_name().unwrap_or_default().to_string_lossy();
        let staging = path.with_file_name(format!(".{file_name}.{}", std::process::id()));
        let _ = std::fs::remove_file(&staging);
        let listener = UnixListener::bind(&staging).map_err(io_error)?;
        let placed = std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o600))
            .and_then(|()| std::fs::hard_link(&staging, path));
        let _ = std::fs::remove_file(&staging);
        match placed {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(ControlError::InUse {
                    path: path.to_owned(),
                });
            }
            Err(e) => return Err(io_error(e)),
        }
        let file_id = file_id(path);
        Ok(Self {
            listener,
            file: SocketFile {
                path: path.to_owned(),
                file_id,
            },
        })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// Its file, to remove at an exit that does not drop the socket.
    pub fn file(&self) -> SocketFile {
        self.file.clone()
    }

    /// The next client.
    pub async fn accept(&self) -> io::Result<UnixStream> {
        self.listener.accept().await.map(|(stream, _)| stream)
    }
}

fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.file.remove();
    }
}

/// The longest request line a client may send.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// How long a client may take to send a request line (its first, or the
/// one after `hello`): a connection that sends nothing is answered with
/// an error and closed then, so silent connections cannot hold the host's
/// client slots.
pub const REQUEST_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads one request line from a client.
pub async fn read_request(
    stream: &mut BufReader<UnixStream>,
) -> io::Result<Result<Request, String>> {
    let mut line = String::new();
    let mut limited = (&mut *stream).take(MAX_REQUEST_BYTES as u64);
    limited.read_line(&mut line).await?;
    if line.len() >= MAX_REQUEST_BYTES && !line.ends_with('\n') {
        return Ok(Err(format!(
            "request longer than {MAX_REQUEST_BYTES} bytes (1 MiB); send a shorter message"
        )));
    }
    if line.trim().is_empty() {
        return Ok(Err("empty request".to_owned()));
    }
    Ok(serde_json::from_str(&line).map_err(|e| format!("bad request: {e}")))
}

use tokio::io::AsyncReadExt as _;

/// Reads and drops what a refused client still sends, so that closing the
/// socket does not reset the connection before the client has read the
/// answer: at most 64 MiB, for at most 5 s.
pub async fn drain(stream: &mut BufReader<UnixStream>) {
    let mut rest = (&mut *stream).take(64 << 20);
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tokio::io::copy(&mut rest, &mut tokio::io::sink()),
    )
    .await;
}

/// Writes one reply line.
pub async fn write_reply(stream: &mut BufReader<UnixStream>, reply: &Reply) -> io::Result<()> {
    let mut line = serde_json::to_vec(reply).expect("a reply serialises");
    line.push(b'\n');
    stream.get_mut().write_all(&line).await
}

/// A client: sends `request` to the host at `path` and hands each reply
/// line to `each` until the host closes the connection or `each` returns
/// false.
pub async fn request(
    path: &Path,
    request: &Request,
    mut each: impl FnMut(Reply) -> bool,
) -> Result<(), ClientError> {
    let stream = UnixStream::connect(path)
        .await
        .map_err(|source| ClientError::Connect {
            path: path.to_owned(),
            source,
        })?;
    let mut stream = BufReader::new(stream);
    let mut line = serde_json::to_vec(request).expect("a request serialises");
    line.push(b'\n');
    // A host that refuses the connection (too many clients) may answer and
    // close it before reading the request: writing then fails, and its
    // answer is still read.
    let written = stream
        .get_mut()
        .write_all(&line)
        .await
        .map_err(ClientError::Io);
    let mut buf = String::new();
    loop {
        buf.clear();
        match stream.read_line(&mut buf).await {
            Ok(0) => return written,
            Ok(_) => {}
            Err(error) => return Err(written.err().unwrap_or(ClientError::Io(error))),
        }
        let reply: Reply = serde_json::from_str(&buf)
            .map_err(|e| ClientError::Protocol(format!("{e}: {}", buf.trim())))?;
        if !each(reply) {
            return Ok(());
        }
    }
}

/// Why a client request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No host answers.
    #[error(
        "no foveal host is running (cannot connect to {}: {source}); start one with `foveal run`",
        path.display()
    )]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The connection broke.
    #[error("the connection to the host broke: {0}")]
    Io(io::Error),
    /// The host answered something unreadable.
    #[error("unexpected answer from the host: {0}")]
    Protocol(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[tokio::test]
    async fn the_socket_is_private_from_the_moment_it_appears_and_a_second_host_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/control.sock");
        let socket = ControlSocket::bind(&path).await.unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["control.sock"], "no staging name is left behind");
        let err = ControlSocket::bind(&path).await.unwrap_err();
        assert!(matches!(err, ControlError::InUse { .. }), "{err}");
        drop(socket);
        assert!(!path.exists(), "the socket is removed when dropped");
    }

    #[test]
    fn the_version_1_requests_and_events_read_as_documented() {
        let parse = |line: &str| serde_json::from_str::<Request>(line).unwrap();
        assert_eq!(
            parse(r#"{"cmd":"hello","protocol":1,"client":"0.2.0"}"#),
            Request::Hello {
                protocol: 1,
                client: "0.2.0".to_owned()
            }
        );
        assert_eq!(parse(r#"{"cmd":"subscribe"}"#), Request::Subscribe);
        assert_eq!(parse(r#"{"cmd":"cancel"}"#), Request::Cancel);
        assert_eq!(
            parse(r#"{"cmd":"context"}"#),
            Request::Context { focus: None }
        );
        // Version 0's requests are unchanged.
        assert_eq!(parse(r#"{"cmd":"status"}"#), Request::Status);
        let finished = Reply::CycleFinished {
            stop: StopReason::Cancelled,
            cycles: 1,
            ms: 12.5,
            usage_percent: Some(7),
        };
        let line = serde_json::to_string(&finished).unwrap();
        assert_eq!(
            line,
            r#"{"event":"cycle_finished","stop":"cancelled","cycles":1,"ms":12.5,"usage_percent":7}"#
        );
        assert_eq!(serde_json::from_str::<Reply>(&line).unwrap(), finished);
        let focus = serde_json::to_string(&Reply::Focus {
            focus: None,
            title: None,
        })
        .unwrap();
        assert_eq!(focus, r#"{"event":"focus"}"#);
    }

    #[test]
    fn focus_takes_an_id_or_a_file_and_a_line_and_context_may_carry_places() {
        let parse = |line: &str| serde_json::from_str::<Request>(line).unwrap();
        assert_eq!(
            parse(r#"{"cmd":"focus","file":"/m/work.org","line":12}"#),
            Request::Focus {
                id: None,
                file: Some(PathBuf::from("/m/work.org")),
                line: Some(12),
            }
        );
        assert_eq!(
            parse(r#"{"cmd":"focus","id":"docs"}"#),
            Request::Focus {
                id: Some("docs".to_owned()),
                file: None,
                line: None,
            }
        );
        // A context answer without objects reads and writes as before.
        let plain = r#"{"event":"context","text":"Context Debug"}"#;
        let reply = serde_json::from_str::<Reply>(plain).unwrap();
        assert_eq!(serde_json::to_string(&reply).unwrap(), plain);
        let placed = Reply::Context {
            text: String::new(),
            objects: vec![ContextObject {
                id: "docs".to_owned(),
                title: "Write docs".to_owned(),
                file: PathBuf::from("/m/work.org"),
                line: 7,
                reason: "foveal".to_owned(),
            }],
        };
        assert_eq!(
            serde_json::to_string(&placed).unwrap(),
            r#"{"event":"context","text":"","objects":[{"id":"docs","title":"Write docs","file":"/m/work.org","line":7,"reason":"foveal"}]}"#
        );
    }

    #[test]
    fn a_command_and_what_it_printed_read_as_documented() {
        use crate::commands::{Command, Exit, Printed};
        let parse = |line: &str| serde_json::from_str::<Request>(line).unwrap();
        let Request::Command {
            command: Command::Context(options),
            prompt_id: None,
        } = parse(r#"{"cmd":"command","name":"context","focus":"docs","json":true}"#)
        else {
            panic!("not a context command");
        };
        assert_eq!(options.focus.as_deref(), Some("docs"));
        assert!(options.json && !options.explain && options.threshold.is_none());
        let Request::Command {
            command: Command::Prompt(options),
            prompt_id,
        } = parse(
            r#"{"cmd":"command","name":"prompt","message":"hi","session":"default","prompt_id":"ab12"}"#,
        )
        else {
            panic!("not a prompt command");
        };
        assert_eq!(options.message.as_deref(), Some("hi"));
        assert_eq!(options.session.as_deref(), Some("default"));
        assert_eq!(prompt_id.as_deref(), Some("ab12"));
        let request = Request::Command {
            command: Command::Prompt(options),
            prompt_id,
        };
        let line = serde_json::to_string(&request).unwrap();
        assert!(
            line.starts_with(r#"{"cmd":"command","name":"prompt","#),
            "{line}"
        );
        assert!(line.ends_with(r#""prompt_id":"ab12"}"#), "{line}");
        assert_eq!(parse(&line), request);
        let other = Reply::OtherConfig {
            config_id: "c1".to_owned(),
            prompt_id: "p1".to_owned(),
        };
        assert_eq!(
            serde_json::to_string(&other).unwrap(),
            r#"{"event":"other_config","config_id":"c1","prompt_id":"p1"}"#
        );
        let printed = Reply::Printed(Printed {
            stdout: "out".to_owned(),
            stderr: "error: why\n".to_owned(),
            exit: Exit::NotFound,
        });
        let line = serde_json::to_string(&printed).unwrap();
        assert_eq!(
            line,
            r#"{"event":"printed","stdout":"out","stderr":"error: why\n","exit":"not_found"}"#
        );
        assert_eq!(serde_json::from_str::<Reply>(&line).unwrap(), printed);
        // `send`'s report is asked for, and comes only then.
        let Request::Send { report, .. } = parse(r#"{"cmd":"send","text":"hi"}"#) else {
            panic!("not a send");
        };
        assert!(!report);
        let Request::Send {
            report, config_id, ..
        } = parse(r#"{"cmd":"send","text":"hi","report":true,"config_id":"c1"}"#)
        else {
            panic!("not a send");
        };
        assert!(report);
        assert_eq!(config_id.as_deref(), Some("c1"));
        let done = Reply::Done {
            stop: StopReason::Replied,
            error: None,
            cycles: 1,
            report: None,
        };
        assert_eq!(
            serde_json::to_string(&done).unwrap(),
            r#"{"event":"done","stop":"replied","cycles":1}"#
        );
    }

    #[tokio::test]
    async fn a_stale_socket_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("control.sock");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let socket = ControlSocket::bind(&path).await.unwrap();
        assert_eq!(mode(&path), 0o600);
        let client = UnixStream::connect(&path).await;
        assert!(client.is_ok());
        assert!(socket.accept().await.is_ok());
    }
}
