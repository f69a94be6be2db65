//! A real OpenAI-compatible model server for end-to-end tests, and a
//! recording, fault-injecting proxy in front of it.
//!
//! The server is llama.cpp's `llama-server` serving SmolLM2-135M-Instruct
//! (Q4_1 GGUF) on 127.0.0.1, built by `scripts/test-server install` into
//! `target/test-server/` and started by `scripts/test-server start PORT`;
//! the model comes from `scripts/fetch-model`.
//!
//! # Use
//!
//! ```ignore
//! use crate::support::test_server;
//!
//! #[test]
//! fn something_end_to_end() {
//!     // None (after printing "not run: …") when the server is not
//!     // installed; a panic instead when `CI` is set.
//!     let Some(proxy) = test_server::proxy() else { return };
//!     // OPENAI_BASE_URL for `foveal ask`, or base_url for OpenAiProvider:
//!     let base_url = proxy.base_url(); // http://127.0.0.1:PORT/v1
//!     proxy.fail(500, 2); // the next two requests get HTTP 500
//!     // … run the binary or the provider against base_url …
//!     assert!(proxy.bodies().iter().all(|b| !b.contains("canary")));
//! }
//! ```
//!
//! One server process serves the whole test binary ([`shared`]): loading
//! the model takes a while, and it is killed when the test binary exits.
//! Each test gets its own [`Proxy`] (its own port, recordings and faults),
//! so tests running in parallel do not see each other's requests or
//! faults. [`TestServer::start`] starts a private server instead, killed
//! when dropped.
//!
//! The server has one slot: concurrent requests queue. Assert on the
//! structure of replies (text not empty, usage, finish reason, tool-call
//! arguments that parse), never on the model's words.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The name the server answers to (`--alias`); any name works.
pub const MODEL: &str = "smollm2";

/// How long the server may take to load the model and answer
/// `GET /v1/models`.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the runtime crate is one level below the repository root")
        .to_path_buf()
}

/// The server binary `scripts/test-server install` builds.
pub fn server_binary() -> PathBuf {
    repo_root().join("target/test-server/bin/llama-server")
}

/// The model file `scripts/fetch-model` fetches (or `FOVEAL_TEST_MODEL`).
pub fn model_file() -> PathBuf {
    std::env::var_os("FOVEAL_TEST_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("models/SmolLM2-135M-Instruct.Q4_1.gguf"))
}

/// Why the server cannot be started here, if it cannot: not installed, or
/// no model.
pub fn missing() -> Option<String> {
    let binary = server_binary();
    if !binary.is_file() {
        return Some(format!(
            "no model server at {}: run scripts/test-server install",
            binary.display()
        ));
    }
    let model = model_file();
    if !model.is_file() {
        return Some(format!(
            "no model at {}: run scripts/fetch-model",
            model.display()
        ));
    }
    None
}

/// Whether this is a CI run (`CI` set to anything but `false`/`0`/empty),
/// where a test that needs the server must fail without it.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// A running `llama-server`, killed when dropped.
#[derive(Debug)]
pub struct TestServer {
    child: Mutex<Child>,
    addr: SocketAddr,
    log: PathBuf,
    started_in: Duration,
}

impl TestServer {
    /// Starts a server of its own on a free port and waits until it
    /// answers `GET /v1/models`. The error says why it could not start,
    /// with the end of its log.
    pub fn start() -> Result<Self, String> {
        if let Some(why) = missing() {
            return Err(why);
        }
        let logs = repo_root().join("target/test-server/logs");
        std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
        let mut last = String::new();
        // A free port can be taken between finding it and the server
        // binding it: try a few.
        for _ in 0..3 {
            let port = free_port();
            let log = logs.join(format!("server-{port}.log"));
            let file =
                std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
            let err = file.try_clone().map_err(|e| e.to_string())?;
            let started = Instant::now();
            let mut command = Command::new("bash");
            command
                .arg(repo_root().join("scripts/test-server"))
                .args(["start", &port.to_string()])
                .env("FOVEAL_TEST_MODEL", model_file())
                .stdin(Stdio::null())
                .stdout(file)
                .stderr(err);
            kill_with_parent(&mut command);
            let child = command
                .spawn()
                .map_err(|e| format!("cannot run scripts/test-server: {e}"))?;
            let mut server = Self {
                child: Mutex::new(child),
                addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
                log,
                started_in: Duration::ZERO,
            };
            match server.wait_ready(started) {
                Ok(started_in) => {
                    server.started_in = started_in;
                    return Ok(server);
                }
                Err(why) => last = why,
            }
        }
        Err(last)
    }

    /// Polls `GET /v1/models` until it answers 200, the server exits, or
    /// [`READY_TIMEOUT`] passes.
    fn wait_ready(&self, started: Instant) -> Result<Duration, String> {
        loop {
            if let Ok(Some(status)) = self.child.lock().unwrap().try_wait() {
                return Err(format!(
                    "the model server exited ({status}) before it was ready; the end of {}:\n{}",
                    self.log.display(),
                    self.log_tail(40)
                ));
            }
            if http_get_status(self.addr, "/v1/models") == Some(200) {
                return Ok(started.elapsed());
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(format!(
                    "the model server on {} did not answer GET /v1/models with 200 within {} s; the end of {}:\n{}",
                    self.addr,
                    READY_TIMEOUT.as_secs(),
                    self.log.display(),
                    self.log_tail(40)
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Where the server listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's own base URL, without the proxy:
    /// `http://127.0.0.1:PORT/v1`.
    pub fn direct_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// How long it took from starting the process to the first 200 of
    /// `GET /v1/models`.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The server's log (its stdout and stderr).
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The last `lines` lines of the server's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// A new recording proxy in front of this server.
    pub fn proxy(&self) -> Proxy {
        Proxy::new(self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The server shared by every test of this binary, started by the first
/// caller. `None` when it is not installed (see [`missing`]); a failure to
/// start is an `Err` for every caller.
pub fn shared() -> Result<&'static TestServer, String> {
    static SERVER: OnceLock<Result<TestServer, String>> = OnceLock::new();
    if let Some(why) = missing() {
        return Err(why);
    }
    SERVER
        .get_or_init(|| {
            // Started from a thread that lives as long as the test binary:
            // the server is killed when the thread that started it ends.
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name("test-server".into())
                .spawn(move || {
                    let _ = tx.send(TestServer::start());
                    loop {
                        std::thread::park();
                    }
                })
                .expect("spawn the test-server thread");
            rx.recv()
                .unwrap_or_else(|_| Err("the test-server thread died".into()))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// A fresh [`Proxy`] in front of the [`shared`] server, for a test that
/// needs a real model.
///
/// When the server is not installed, prints `not run: …` and returns
/// `None` (the test then returns), except in CI (`CI` set), where it
/// panics: such a test never passes silently there. A server that is
/// installed but fails to start always panics, with the end of its log.
pub fn proxy() -> Option<Proxy> {
    if let Some(why) = missing() {
        assert!(
            !in_ci(),
            "the end-to-end tests need the model server: {why}"
        );
        eprintln!("not run: {why} (and scripts/fetch-model)");
        return None;
    }
    match shared() {
        Ok(server) => Some(server.proxy()),
        Err(why) => panic!("cannot start the model server: {why}"),
    }
}

/// Makes the child get SIGKILL when the thread that spawned it ends, so a
/// server never outlives the tests.
fn kill_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls prctl, which is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a free port on 127.0.0.1")
}

/// The status of `GET path` on `addr`, or `None` when nothing answers.
fn http_get_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut line = String::new();
    BufReader::new(&mut stream).read_line(&mut line).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}

// ---------------------------------------------------------------------
// The recording proxy
// ---------------------------------------------------------------------

/// What the proxy does to one incoming connection instead of forwarding
/// it untouched. Faults are queued and each connection takes the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this HTTP status and an OpenAI-style error body,
    /// without asking the server; `Retry-After` when given.
    Status {
        status: u16,
        retry_after: Option<String>,
    },
    /// Forward the request, then close the connection after this many
    /// bytes of the reply's body (counted as sent on the wire, after the
    /// head).
    CutAfter(usize),
    /// Close the connection at once, before reading the request: the
    /// client sees a reset connection.
    Drop,
}

/// One request the proxy received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// `POST`, `GET`, ….
    pub method: String,
    /// `/v1/chat/completions`, ….
    pub path: String,
    /// The body, as text.
    pub body: String,
    /// The fault it met, if any.
    pub fault: Option<Fault>,
}

#[derive(Debug, Default)]
struct State {
    requests: Mutex<Vec<Recorded>>,
    faults: Mutex<VecDeque<Fault>>,
    connections: Mutex<usize>,
}

/// A tiny HTTP/1.1 forwarder on 127.0.0.1 in front of a [`TestServer`]:
/// records every request and injects [`Fault`]s on demand. Each
/// connection carries one request (`Connection: close` both ways). Stops
/// listening when dropped.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    state: Arc<State>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Proxy {
    /// A proxy to `upstream`, listening on a free port of 127.0.0.1.
    pub fn new(upstream: SocketAddr) -> Self {
        let listener =
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind the proxy on 127.0.0.1");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("proxy address");
        let state = Arc::new(State::default());
        let accept_state = Arc::clone(&state);
        let task = proxy_runtime().spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let state = Arc::clone(&accept_state);
                tokio::spawn(async move {
                    let _ = handle(client, upstream, state).await;
                });
            }
        });
        Self {
            addr,
            state,
            task: Mutex::new(Some(task)),
        }
    }

    /// The base URL to give the provider or `OPENAI_BASE_URL`:
    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Where the proxy listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, faulted ones included, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    /// The bodies of every request received so far (faulted ones
    /// included): everything that left the process under test.
    pub fn bodies(&self) -> Vec<String> {
        self.requests().into_iter().map(|r| r.body).collect()
    }

    /// Connections accepted so far (dropped ones included).
    pub fn connections(&self) -> usize {
        *self.state.connections.lock().unwrap()
    }

    /// Queues `times` of `fault`.
    pub fn inject(&self, fault: Fault, times: usize) {
        let mut faults = self.state.faults.lock().unwrap();
        faults.extend(std::iter::repeat_n(fault, times));
    }

    /// The next `times` requests get HTTP `status` (500, 503, …).
    pub fn fail(&self, status: u16, times: usize) {
        self.inject(
            Fault::Status {
                status,
                retry_after: None,
            },
            times,
        );
    }

    /// The next `times` requests get HTTP 429 with `Retry-After: seconds`.
    pub fn rate_limit(&self, retry_after_secs: u64, times: usize) {
        self.inject(
            Fault::Status {
                status: 429,
                retry_after: Some(retry_after_secs.to_string()),
            },
            times,
        );
    }

    /// The next `times` replies are cut after `bytes` bytes of their body.
    pub fn cut_after(&self, bytes: usize, times: usize) {
        self.inject(Fault::CutAfter(bytes), times);
    }

    /// The next `times` connections are closed before their request is
    /// read.
    pub fn drop_connections(&self, times: usize) {
        self.inject(Fault::Drop, times);
    }

    /// Faults queued and not yet met.
    pub fn pending_faults(&self) -> usize {
        self.state.faults.lock().unwrap().len()
    }

    /// Stops listening: from now on connections to [`addr`](Self::addr)
    /// are refused (a server that is down).
    pub fn refuse_connections(&self) {
        if let Some(task) = self.task.lock().unwrap().take() {
            task.abort();
            // The listener closes when the aborted task is dropped on the
            // proxy's runtime; wait until the port refuses.
            let deadline = Instant::now() + Duration::from_secs(5);
            while TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok()
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
            task.abort();
        }
    }
}

/// The runtime every proxy runs on: one thread for the whole test binary,
/// so a proxy outlives the runtime of the test that made it.
fn proxy_runtime() -> &'static tokio::runtime::Handle {
    static HANDLE: OnceLock<tokio::runtime::Handle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("test-proxy".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("proxy runtime");
                tx.send(runtime.handle().clone()).unwrap();
                runtime.block_on(std::future::pending::<()>());
            })
            .expect("spawn the proxy thread");
        rx.recv().expect("proxy runtime handle")
    })
}

/// The most bytes of a request or reply head.
const MAX_HEAD: usize = 64 << 10;

async fn handle(
    mut client: tokio::net::TcpStream,
    upstream: SocketAddr,
    state: Arc<State>,
) -> std::io::Result<()> {
    *state.connections.lock().unwrap() += 1;
    let fault = state.faults.lock().unwrap().pop_front();
    if fault == Some(Fault::Drop) {
        // A reset, not an orderly close: nothing was answered. (A zero
        // linger does not block on drop, which is why the method is
        // deprecated.)
        #[allow(deprecated)]
        client.set_linger(Some(Duration::ZERO))?;
        return Ok(());
    }

    let (head, mut rest) = read_head(&mut client).await?;
    let head_text = String::from_utf8_lossy(&head).into_owned();
    let mut request_line = head_text.lines().next().unwrap_or("").split_whitespace();
    let method = request_line.next().unwrap_or("").to_owned();
    let path = request_line.next().unwrap_or("").to_owned();
    let length = content_length(&head_text).unwrap_or(0);
    while rest.len() < length {
        let mut buf = vec![0; (length - rest.len()).min(64 << 10)];
        let n = client.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        rest.extend_from_slice(&buf[..n]);
    }
    rest.truncate(length);
    state.requests.lock().unwrap().push(Recorded {
        method,
        path,
        body: String::from_utf8_lossy(&rest).into_owned(),
        fault: fault.clone(),
    });

    if let Some(Fault::Status {
        status,
        retry_after,
    }) = &fault
    {
        let body = format!(
            r#"{{"error":{{"message":"fault injected by the test proxy: HTTP {status}","type":"test_fault","code":{status}}}}}"#
        );
        let retry = retry_after
            .as_ref()
            .map(|r| format!("Retry-After: {r}\r\n"))
            .unwrap_or_default();
        let reply = format!(
            "HTTP/1.1 {status} Injected\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{retry}Connection: close\r\n\r\n{body}",
            body.len()
        );
        client.write_all(reply.as_bytes()).await?;
        client.shutdown().await?;
        return Ok(());
    }

    let mut server = tokio::net::TcpStream::connect(upstream).await?;
    server.write_all(&close_connection(&head_text)).await?;
    server.write_all(&rest).await?;

    let (reply_head, first) = read_head(&mut server).await?;
    client
        .write_all(&close_connection(&String::from_utf8_lossy(&reply_head)))
        .await?;
    let mut budget = match fault {
        Some(Fault::CutAfter(bytes)) => Some(bytes),
        _ => None,
    };
    let mut piece = first;
    let mut buf = vec![0; 16 << 10];
    loop {
        if let Some(left) = budget.as_mut() {
            if piece.len() >= *left {
                client.write_all(&piece[..*left]).await?;
                // An orderly close in the middle of the body: the reply is
                // chunked, so the client sees it end before its last chunk.
                client.shutdown().await?;
                return Ok(());
            }
            *left -= piece.len();
        }
        client.write_all(&piece).await?;
        let n = server.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        piece = buf[..n].to_vec();
    }
    client.shutdown().await?;
    Ok(())
}

/// Reads up to and including the blank line that ends an HTTP head;
/// returns the head and whatever followed it.
async fn read_head(stream: &mut tokio::net::TcpStream) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let mut data = Vec::new();
    let mut buf = [0; 8192];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = data.split_off(end + 4);
            return Ok((data, rest));
        }
        if data.len() > MAX_HEAD {
            return Err(std::io::Error::other("HTTP head too long"));
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed inside an HTTP head",
            ));
        }
        data.extend_from_slice(&buf[..n]);
    }
}

fn content_length(head: &str) -> Option<usize> {
    head.lines().skip(1).find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse().ok())?
    })
}

/// The head with its `Connection` and `Keep-Alive` headers replaced by
/// `Connection: close`.
fn close_connection(head: &str) -> Vec<u8> {
    let mut out = String::with_capacity(head.len() + 20);
    for line in head.split("\r\n").filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or("").trim();
        if name.eq_ignore_ascii_case("connection") || name.eq_ignore_ascii_case("keep-alive") {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}
