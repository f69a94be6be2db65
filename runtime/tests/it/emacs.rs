//! The Emacs package (`emacs/foveal.el`) against the real host: its ERT
//! suite (`emacs/test/foveal-test.el`) in batch Emacs, once per scenario,
//! with a host (`foveal run --no-repl`) on a temporary memex and the
//! scripted model server.
//!
//! Without Emacs these tests print `not run` and pass — unless `CI` is
//! set, where they fail.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::live::{
    command, run_to_end, start_host, stderr, text_reply, tool_reply, trickling, wait_exit,
    workspace,
};
use crate::server::{Scripted, Server, sse_events};

/// Whether Emacs is installed; outside CI, says so when it is not.
fn emacs_found() -> bool {
    let found = Command::new("emacs")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "emacs is needed for the Emacs package's tests in CI"
        );
        eprintln!("not run: emacs is not installed");
    }
    found
}

/// The `memex` scenario's second file: headlines without `:ID:`.
const NOTES: &str = "* Ideas
Plain notes.
** Draft a plan
No id here.
";

/// Batch Emacs in the checkout with `args`, with the environment the
/// other tests' `foveal` commands get (the sandbox's data folder and
/// socket, the scripted server) and what the ERT suite reads of the test
/// (`emacs/test/foveal-test.el` lists it).
fn emacs(dir: &Path, server: &Server, scenario: &str, args: &[&str]) -> Command {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the checkout");
    let template = command(dir, server, &["run", "--no-repl"]);
    let mut emacs = Command::new("emacs");
    emacs
        .args(["-Q", "--batch", "-L", "emacs"])
        .args(args)
        .current_dir(checkout)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in template.get_envs() {
        match value {
            Some(value) => emacs.env(name, value),
            None => emacs.env_remove(name),
        };
    }
    emacs
        .env("FOVEAL_TEST_SCENARIO", scenario)
        .env("FOVEAL_TEST_EXECUTABLE", env!("CARGO_BIN_EXE_foveal"))
        .env("FOVEAL_TEST_DIR", dir)
        .env("FOVEAL_TEST_RUN_ARGS", "--provider openai --memex memex")
        .env("FOVEAL_TEST_VERSION", env!("CARGO_PKG_VERSION"))
        // Nothing of the user's: no init file (-Q), no home.
        .env("HOME", dir);
    emacs
}

/// Runs the ERT suite for `scenario`; panics with its output (and the log
/// of a host Emacs started) unless every test passed.
async fn ert(dir: &Path, server: &Server, scenario: &str) {
    let mut emacs = emacs(
        dir,
        server,
        scenario,
        &[
            "-l",
            "emacs/test/foveal-test.el",
            "-f",
            "ert-run-tests-batch-and-exit",
        ],
    );
    let output = tokio::task::spawn_blocking(move || finish(emacs.spawn().unwrap()))
        .await
        .unwrap();
    let log = std::fs::read_to_string(dir.join("data/run/host.log")).unwrap_or_default();
    assert!(
        output.status.success(),
        "the ERT suite ({scenario}) failed:\n--- stdout\n{}\n--- stderr\n{}\n--- host.log\n{log}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}

/// Waits for `child` (at most 5 minutes: the suite waits 20 s at most
/// for each thing it expects), killing it then.
fn finish(mut child: std::process::Child) -> Output {
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut text).map(|_| text)
    });
    let err = std::thread::spawn(move || {
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut text).map(|_| text)
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap().unwrap_or_default(),
        stderr: err.join().unwrap().unwrap_or_default(),
    }
}

/// A reply streamed in pieces, one SSE event each.
fn pieces_reply(pieces: &[&str]) -> Scripted {
    let mut events: Vec<serde_json::Value> = pieces
        .iter()
        .map(|p| json!({"choices": [{"index": 0, "delta": {"content": p}}]}))
        .collect();
    events.push(
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 50, "completion_tokens": 4}}),
    );
    Scripted::sse(sse_events(&events))
}

/// Stops the host when the test ends, passed or not (`foveal stop`;
/// nothing when none runs): a failed suite leaves no host behind.
struct StopOnDrop(Command);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = self.0.output();
    }
}

async fn stop(dir: &Path, server: &Server) {
    let stopped = run_to_end(command(dir, server, &["stop"])).await;
    assert!(stopped.status.success(), "{}", stderr(&stopped));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_emacs_package_byte_compiles_without_warnings_and_passes_checkdoc() {
    if !emacs_found() {
        return;
    }
    let dir = workspace();
    let server = Server::start(vec![]).await;
    ert(dir.path(), &server, "package").await;
    // The source folder holds no compiled file afterwards.
    let emacs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../emacs");
    let compiled: Vec<_> = std::fs::read_dir(&emacs)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "elc"))
        .collect();
    assert!(compiled.is_empty(), "{compiled:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emacs_chats_streams_folds_tool_calls_cancels_and_sends_a_region() {
    if !emacs_found() {
        return;
    }
    let dir = workspace();
    let server = Server::start(vec![
        tool_reply("query_memex", r#"{"tag": "project"}"#),
        pieces_reply(&["Found the ", "Launch ", "project."]),
        trickling("Working on it", 5000),
        text_reply("The region arrived."),
    ])
    .await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    let _stop = StopOnDrop(command(dir.path(), &server, &["stop"]));
    ert(dir.path(), &server, "chat").await;
    stop(dir.path(), &server).await;
    assert!(wait_exit(&mut host).success());
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emacs_focuses_headlines_attaches_to_the_window_and_opens_the_context() {
    if !emacs_found() {
        return;
    }
    let dir = workspace();
    std::fs::write(dir.path().join("memex/notes.org"), NOTES).unwrap();
    let server = Server::start(vec![]).await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    let _stop = StopOnDrop(command(dir.path(), &server, &["stop"]));
    ert(dir.path(), &server, "memex").await;
    stop(dir.path(), &server).await;
    assert!(wait_exit(&mut host).success());
    assert!(server.requests().is_empty(), "no model was asked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emacs_starts_a_host_and_reconnects_to_one_that_comes_back() {
    if !emacs_found() {
        return;
    }
    let dir = workspace();
    let server = Server::start(vec![
        text_reply("First reply."),
        text_reply("Second reply."),
    ])
    .await;
    let _stop = StopOnDrop(command(dir.path(), &server, &["stop"]));
    ert(dir.path(), &server, "reconnect").await;
    // The suite stopped the host it started; none answers now.
    let status = run_to_end(command(dir.path(), &server, &["status"])).await;
    assert!(!status.status.success(), "a host is still running");
    assert_eq!(server.requests().len(), 2);
}

/// Not a test: the Emacs package's speed, printed (docs/benchmarks.md,
/// "The Emacs package"). `cargo test -p foveal --test it
/// emacs_package_speed -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: prints numbers, asserts none"]
async fn emacs_package_speed() {
    if !emacs_found() {
        return;
    }
    let turns: usize = std::env::var("FOVEAL_BENCH_TURNS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(50);
    let dir = workspace();
    let script = (0..2 * (turns + 1)).map(|_| text_reply("Hello.")).collect();
    let server = Server::start(script).await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    let _stop = StopOnDrop(command(dir.path(), &server, &["stop"]));
    for (what, function) in [
        ("follow", "foveal-bench-follow"),
        ("first text", "foveal-bench-first-text"),
    ] {
        let mut emacs = emacs(
            dir.path(),
            &server,
            "bench",
            &["-l", "emacs/test/foveal-bench.el", "-f", function],
        );
        emacs.env("FOVEAL_BENCH_TURNS", turns.to_string());
        let output = tokio::task::spawn_blocking(move || finish(emacs.spawn().unwrap()))
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        print!("{}", String::from_utf8_lossy(&output.stdout));
    }
    stop(dir.path(), &server).await;
    assert!(wait_exit(&mut host).success());
}
