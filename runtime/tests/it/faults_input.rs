//! Untrusted input end to end: a 10 MB word in a message, a reply and a
//! headline; a server that streams far past the reply cap.
//!
//! The real `foveal` binary against the scripted OpenAI-compatible server
//! (`provider/src/tests/server.rs`), as in `live.rs`.
//!
//! Where a 10 MB message can come from: not the command line — Linux
//! refuses an argument longer than 128 KiB (`MAX_ARG_STRLEN`) before
//! `foveal` starts — so `ask` gets the longest word `exec` allows, and the
//! 10 MB word is typed into the REPL of `foveal run` and written raw to
//! the control socket.

use std::io::{BufRead as _, Write as _};
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{foveal_command, wait_for};

// Its items are `pub(super)`: each user includes its own copy.
#[path = "../../../provider/src/tests/server.rs"]
#[allow(dead_code, clippy::duplicate_mod)]
mod server;

use server::{End, Scripted, Server, sse_events};

const MEMEX: &str = "* Launch :project:
:PROPERTIES:
:ID: launch
:END:
Ship it.
";

/// The word: 10 MB of one letter, no space.
const WORD: usize = 10_000_000;

/// The longest argument `exec` passes on Linux: `MAX_ARG_STRLEN` (32
/// pages) less its terminating NUL.
const LONGEST_ARGUMENT: usize = 32 * 4096 - 1;

/// The reply cap at the default `agent.max_reply_tokens` (512):
/// `foveal::agent::max_reply_bytes`, 64 KiB at least.
const REPLY_CAP: usize = 64 << 10;

/// The note a cut reply ends with, shown and recorded.
const CUT_NOTE: &str =
    "\n[reply cut at 65536 bytes: the server sent more than agent.max_reply_tokens (512) allows]";

/// What the token budget leaves of a message too long for it.
const MIDDLE_CUT: &str = "characters cut from the middle of this message to fit the token budget";

fn word(letter: u8, len: usize) -> String {
    String::from_utf8(vec![letter; len]).unwrap()
}

fn workspace(memex: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("memex")).unwrap();
    std::fs::write(dir.path().join("memex/work.org"), memex).unwrap();
    dir
}

fn text_reply(text: &str) -> Scripted {
    Scripted::sse(sse_events(&[
        json!({"choices": [{"index": 0, "delta": {"content": text}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 50, "completion_tokens": 4}}),
    ]))
}

/// `foveal ARGS` in `dir`, on the scripted server and the `memex` folder.
fn command(dir: &Path, server: &Server, args: &[&str]) -> std::process::Command {
    let mut all = args.to_vec();
    if matches!(
        args.first(),
        Some(&"ask" | &"run" | &"check" | &"prompt" | &"context" | &"memex")
    ) {
        all.extend(["--memex", "memex"]);
    }
    if matches!(args.first(), Some(&"ask" | &"run" | &"check")) {
        all.extend(["--provider", "openai"]);
    }
    let mut command = foveal_command(dir, &all);
    command
        .env("OPENAI_BASE_URL", server.base_url())
        .env("OPENAI_MODEL", "scripted")
        .env_remove("OPENAI_API_KEY")
        .env("FOVEAL_SOCKET", dir.join("run/control.sock"));
    command
}

async fn run_to_end(mut command: std::process::Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Stderr, at most its first 4 KiB (for assertion messages).
fn stderr(output: &Output) -> String {
    let text = String::from_utf8_lossy(&output.stderr);
    text.chars().take(4096).collect()
}

/// The command exited 0 and did not panic.
#[track_caller]
fn assert_clean(what: &str, output: &Output) {
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        !err.contains("panicked"),
        "{what} panicked: {}",
        stderr(output)
    );
    assert!(
        output.status.success(),
        "{what}: {:?}: {}",
        output.status,
        stderr(output)
    );
}

fn session_lines(dir: &Path, name: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join(format!("data/sessions/{name}.jsonl")))
        .unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The content of the last message of a recorded request body.
fn last_message(request: &server::Recorded) -> String {
    let body = request.json();
    let messages = body["messages"].as_array().unwrap();
    messages.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A host process, killed if the test fails before stopping it.
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A host with `--no-repl`, logging warnings into `dir/host.err` (a pipe
/// nobody reads could fill and stall it).
fn start_host(dir: &Path, server: &Server, extra: &[&str]) -> Host {
    let mut args = vec!["run", "--no-repl"];
    args.extend_from_slice(extra);
    let log = std::fs::File::create(dir.join("host.err")).unwrap();
    let mut child = command(dir, server, &args)
        .env("FOVEAL_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let socket = dir.join("run/control.sock");
    let up = wait_for(Duration::from_secs(20), || {
        socket.exists() || matches!(child.try_wait(), Ok(Some(_)))
    });
    let host = Host(child);
    assert!(up && socket.exists(), "the host did not open its socket");
    host
}

fn wait_exit(host: &mut Host) -> std::process::ExitStatus {
    let mut status = None;
    wait_for(Duration::from_secs(20), || {
        status = host.0.try_wait().unwrap();
        status.is_some()
    });
    status.expect("the host did not exit")
}

/// `VmRSS` and `VmHWM` (peak) of a process, in KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10_mb_word_typed_into_the_repl_is_cut_to_the_budget_and_the_next_turns_work() {
    let dir = workspace(MEMEX);
    let server = Server::start(vec![
        text_reply("One."),
        text_reply("Two."),
        text_reply("Three."),
    ])
    .await;
    let mut run = command(dir.path(), &server, &["run", "--session", "big"]);
    run.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (replies, output, times) = tokio::task::spawn_blocking(move || {
        let mut child = run.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut replies = Vec::new();
        let mut times = Vec::new();
        let mut line = word(b'a', WORD);
        line.push('\n');
        for message in [line.as_str(), "second\n"] {
            let t = Instant::now();
            stdin.write_all(message.as_bytes()).unwrap();
            let mut reply = String::new();
            out.read_line(&mut reply).unwrap();
            replies.push(reply);
            times.push(t.elapsed());
        }
        drop(stdin);
        (replies, child.wait_with_output().unwrap(), times)
    })
    .await
    .unwrap();
    eprintln!("10 MB turn {:?}, next turn {:?}", times[0], times[1]);
    assert_clean("run", &output);
    assert_eq!(replies, ["One.\n", "Two.\n"]);

    // The model got the word cut from the middle to the token budget,
    // saying so — not 10 MB.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[0].body.len() < 64 << 10,
        "{} bytes",
        requests[0].body.len()
    );
    let sent = last_message(&requests[0]);
    assert!(
        sent.starts_with("aaaa") && sent.ends_with("aaaa"),
        "{}",
        sent.replace('a', "")
    );
    assert!(sent.contains(MIDDLE_CUT), "{}", sent.replace('a', ""));
    assert_eq!(last_message(&requests[1]), "second");
    assert!(requests[1].body.len() < 64 << 10);
    // The session keeps what was typed, as typed.
    let lines = session_lines(dir.path(), "big");
    let roles: Vec<&str> = lines.iter().map(|l| l["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert_eq!(lines[0]["content"].as_str().unwrap().len(), WORD);
    assert_eq!(lines[1]["content"], "One.");
    assert_eq!(lines[3]["content"], "Two.");

    // `ask` resumes that session: read back (each entry cut to 1 MiB),
    // then cut again to the budget.
    let t = Instant::now();
    let output = run_to_end(command(
        dir.path(),
        &server,
        &["ask", "--session", "big", "third"],
    ))
    .await;
    eprintln!("ask resuming the session: {:?}", t.elapsed());
    assert_clean("ask", &output);
    assert_eq!(stdout(&output), "Three.\n");
    let third = &server.requests()[2];
    assert_eq!(last_message(third), "third");
    assert!(third.body.len() < 64 << 10, "{} bytes", third.body.len());
    assert_eq!(session_lines(dir.path(), "big").len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_word_a_command_line_carries_is_asked_and_the_session_goes_on() {
    let dir = workspace(MEMEX);
    let server = Server::start(vec![text_reply("One."), text_reply("Two.")]).await;
    // 10 MB never reaches `foveal ask`: the kernel refuses the exec.
    let refused = command(dir.path(), &server, &["ask", &word(b'a', WORD)])
        .output()
        .unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::E2BIG), "{refused}");

    let t = Instant::now();
    let big = word(b'a', LONGEST_ARGUMENT);
    let output = run_to_end(command(dir.path(), &server, &["ask", &big])).await;
    eprintln!("ask with a {LONGEST_ARGUMENT}-byte word: {:?}", t.elapsed());
    assert_clean("ask", &output);
    assert_eq!(stdout(&output), "One.\n");
    let sent = last_message(&server.requests()[0]);
    assert!(sent.contains(MIDDLE_CUT), "{}", sent.replace('a', ""));
    assert!(sent.len() < big.len());

    let output = run_to_end(command(dir.path(), &server, &["ask", "again"])).await;
    assert_clean("the next ask", &output);
    assert_eq!(stdout(&output), "Two.\n");
    assert_eq!(last_message(&server.requests()[1]), "again");
    let lines = session_lines(dir.path(), "default");
    assert_eq!(lines.len(), 4);
    assert_eq!(
        lines[0]["content"].as_str().unwrap().len(),
        LONGEST_ARGUMENT
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10_mb_request_on_the_control_socket_is_refused_and_the_host_answers_the_next() {
    let dir = workspace(MEMEX);
    let server = Server::start(vec![text_reply("Still here.")]).await;
    let mut host = start_host(dir.path(), &server, &[]);
    let socket = dir.path().join("run/control.sock");
    let t = Instant::now();
    let answer = tokio::task::spawn_blocking(move || {
        use std::io::Read as _;
        let mut stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut request =
            serde_json::to_vec(&json!({"cmd": "send", "text": word(b'c', WORD)})).unwrap();
        request.push(b'\n');
        // The host reads at most 1 MiB of a request, answers and hangs
        // up: the rest of the write may fail with a broken pipe.
        let _ = stream.write_all(&request);
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    })
    .await
    .unwrap();
    eprintln!("10 MB request on the socket: {:?}", t.elapsed());
    let answer: serde_json::Value = serde_json::from_str(answer.trim()).unwrap();
    assert_eq!(answer["event"], "error", "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .starts_with("request longer than 1048576 bytes (1 MiB)"),
        "{answer}"
    );
    assert!(
        server.requests().is_empty(),
        "the request reached the model"
    );

    let sent = run_to_end(command(dir.path(), &server, &["send", "hello"])).await;
    assert_clean("send", &sent);
    assert_eq!(stdout(&sent), "Still here.\n");
    let stop = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert_clean("stop", &stop);
    assert!(wait_exit(&mut host).success());
    let log = std::fs::read_to_string(dir.path().join("host.err")).unwrap();
    assert!(!log.contains("panicked"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10_mb_word_in_a_reply_is_cut_at_the_cap_or_refused_and_the_session_goes_on() {
    let dir = workspace(MEMEX);
    let server = Server::start(vec![
        // The word in one event: past the longest event line read (8 MiB).
        text_reply(&word(b'b', WORD)),
        // The word over 1000 events of 10 000 letters.
        Scripted::sse(Vec::new()).ending(End::Flood {
            chunks: 1000,
            bytes: 10_000,
        }),
        text_reply("Three."),
    ])
    .await;

    let t = Instant::now();
    let one = run_to_end(command(dir.path(), &server, &["ask", "one"])).await;
    eprintln!("a 10 MB event: {:?}", t.elapsed());
    assert!(!String::from_utf8_lossy(&one.stderr).contains("panicked"));
    assert_eq!(one.status.code(), Some(1), "{}", stderr(&one));
    assert_eq!(stdout(&one), "");
    assert!(
        stderr(&one).contains(
            "sent one event line over 8388608 bytes, far past a reply of `max_reply_tokens`"
        ),
        "{}",
        stderr(&one)
    );

    let t = Instant::now();
    let two = run_to_end(command(dir.path(), &server, &["ask", "two"])).await;
    eprintln!("a 10 MB word over 1000 events: {:?}", t.elapsed());
    assert_clean("ask", &two);
    // Shown cut at the cap, with the note.
    let shown = format!("{}{CUT_NOTE}\n", word(b'x', REPLY_CAP));
    assert!(stdout(&two) == shown, "{} bytes shown", stdout(&two).len());

    let t = Instant::now();
    let three = run_to_end(command(dir.path(), &server, &["ask", "three"])).await;
    eprintln!("the next ask: {:?}", t.elapsed());
    assert_clean("the next ask", &three);
    assert_eq!(stdout(&three), "Three.\n");

    // Recorded: the failure, then the cut reply as shown.
    let lines = session_lines(dir.path(), "default");
    let roles: Vec<&str> = lines.iter().map(|l| l["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["user", "error", "user", "assistant", "user", "assistant"]
    );
    assert!(
        lines[1]["content"]
            .as_str()
            .unwrap()
            .contains("one event line over 8388608 bytes")
    );
    assert_eq!(
        lines[3]["content"].as_str().unwrap(),
        shown.trim_end_matches('\n')
    );
    // The cut reply is too long for the next turn's token budget: the
    // history is left out, saying so, and the request stays small.
    let next = &server.requests()[2];
    assert!(next.body.len() < 16 << 10, "{} bytes", next.body.len());
    assert!(
        next.body
            .contains("earlier messages omitted to fit the token budget"),
        "{}",
        next.body
    );
    assert_eq!(last_message(next), "three");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10_mb_headline_panics_no_command_and_stays_out_of_the_request() {
    let memex = format!(
        "* {} :project:\n:PROPERTIES:\n:ID: big\n:END:\nBody.\n{MEMEX}",
        word(b'h', WORD)
    );
    let dir = workspace(&memex);
    let server = Server::start(vec![text_reply("Fine.")]).await;
    for args in [
        &["memex", "stats", "--json"][..],
        &["context"],
        &["prompt"],
        &["check"],
    ] {
        let t = Instant::now();
        let output = run_to_end(command(dir.path(), &server, args)).await;
        eprintln!("{args:?}: {:?}", t.elapsed());
        assert_clean(&args.join(" "), &output);
        let out = stdout(&output);
        match args[0] {
            "memex" => {
                let stats: serde_json::Value = serde_json::from_str(&out).unwrap();
                assert_eq!(stats["objects"], 2, "{stats}");
            }
            // The outline, unbudgeted, holds the whole headline.
            "context" => assert!(out.contains(&format!("* {}", word(b'h', WORD)))),
            // The prompt is within its budget: the headline is left out.
            "prompt" => {
                assert!(out.len() < 64 << 10, "{} bytes", out.len());
                assert!(out.contains("peripheral headlines omitted"), "{out}");
            }
            _ => assert!(out.contains("no problems found"), "{out}"),
        }
    }
    let t = Instant::now();
    let output = run_to_end(command(dir.path(), &server, &["ask", "hello"])).await;
    eprintln!("ask: {:?}", t.elapsed());
    assert_clean("ask", &output);
    assert_eq!(stdout(&output), "Fine.\n");
    let body = &server.requests()[0].body;
    assert!(body.len() < 64 << 10, "{} bytes", body.len());
    assert!(!body.contains("hhhhhhhh"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_streaming_300_mb_is_cut_at_the_cap_and_the_host_stays_small() {
    const FLOOD: u64 = 300_000_000;
    const CHUNK: usize = 1000;
    let dir = workspace(MEMEX);
    let server = Server::start(vec![
        text_reply("Warm."),
        Scripted::sse(Vec::new()).ending(End::Flood {
            chunks: FLOOD / CHUNK as u64,
            bytes: CHUNK,
        }),
        text_reply("After."),
    ])
    .await;
    let mut host = start_host(dir.path(), &server, &["--session", "flood"]);
    let pid = host.0.id();

    // A baseline turn first: the peak of an ordinary turn.
    let warm = run_to_end(command(dir.path(), &server, &["send", "warm up"])).await;
    assert_clean("send", &warm);
    assert_eq!(stdout(&warm), "Warm.\n");
    let (rss_before, hwm_before) = memory_kib(pid);

    let t = Instant::now();
    let flood = run_to_end(command(dir.path(), &server, &["send", "flood"])).await;
    let took = t.elapsed();
    let (rss_after, hwm_after) = memory_kib(pid);
    eprintln!(
        "300 MB flood: {took:?}; host VmRSS {rss_before} -> {rss_after} KiB, \
         VmHWM {hwm_before} -> {hwm_after} KiB"
    );
    assert_clean("send", &flood);
    let shown = format!("{}{CUT_NOTE}\n", word(b'x', REPLY_CAP));
    assert!(
        stdout(&flood) == shown,
        "{} bytes shown",
        stdout(&flood).len()
    );
    assert!(
        hwm_after.saturating_sub(hwm_before) < 100 << 10,
        "the host's peak grew by {} KiB",
        hwm_after - hwm_before
    );
    assert!(rss_after.saturating_sub(rss_before) < 100 << 10);

    let after = run_to_end(command(dir.path(), &server, &["send", "and now?"])).await;
    assert_clean("send", &after);
    assert_eq!(stdout(&after), "After.\n");
    let stop = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert_clean("stop", &stop);
    assert!(wait_exit(&mut host).success());
    let log = std::fs::read_to_string(dir.path().join("host.err")).unwrap();
    assert!(!log.contains("panicked"), "{log}");
    assert!(log.contains("the reply was cut"), "{log}");

    // The session file holds the cut reply, no more.
    let lines = session_lines(dir.path(), "flood");
    assert_eq!(lines.len(), 6);
    assert_eq!(
        lines[3]["content"].as_str().unwrap(),
        shown.trim_end_matches('\n')
    );
    let size = std::fs::metadata(dir.path().join("data/sessions/flood.jsonl"))
        .unwrap()
        .len();
    assert!(size < (REPLY_CAP + 4096) as u64, "{size} bytes");
}
