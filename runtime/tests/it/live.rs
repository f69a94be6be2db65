//! The live host as a user runs it: the real `foveal` binary (`ask`,
//! `run`, `send`, `status`, `stop`, `check`) with the real first-party
//! skills, against a scripted OpenAI-compatible server on 127.0.0.1 that
//! records every request body.

use std::io::{BufRead as _, Write as _};
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::support::{file_name, foveal_command, install, library, wait_for};

use crate::server::{End, Scripted, Server, sse_events};

const MEMEX: &str = "#+TODO: TODO | DONE
* Launch :project:
:PROPERTIES:
:ID: launch
:END:
Ship it.
** TODO Write docs
:PROPERTIES:
:ID: docs
:END:
* Health :project:@personal:
:PROPERTIES:
:ID: health
:END:
CANARY-91c2 private notes
";

pub(crate) fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("memex")).unwrap();
    std::fs::write(dir.path().join("memex/work.org"), MEMEX).unwrap();
    dir
}

pub(crate) fn text_reply(text: &str) -> Scripted {
    Scripted::sse(sse_events(&[
        json!({"choices": [{"index": 0, "delta": {"content": text}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 50, "completion_tokens": 4}}),
    ]))
}

pub(crate) fn tool_reply(name: &str, arguments: &str) -> Scripted {
    Scripted::sse(sse_events(&[
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1",
            "type": "function", "function": {"name": name, "arguments": ""}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
            "function": {"arguments": arguments}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]))
}

/// `foveal ARGS` in `dir`, on the scripted server.
pub(crate) fn command(dir: &Path, server: &Server, args: &[&str]) -> std::process::Command {
    let mut all = args.to_vec();
    if matches!(args.first(), Some(&"ask" | &"run" | &"check")) {
        all.extend(["--provider", "openai", "--memex", "memex"]);
    }
    let mut command = foveal_command(dir, &all);
    command
        .env("OPENAI_BASE_URL", server.base_url())
        .env("OPENAI_MODEL", "scripted")
        .env_remove("OPENAI_API_KEY")
        .env("FOVEAL_SOCKET", dir.join("run/control.sock"));
    command
}

pub(crate) async fn run_to_end(mut command: std::process::Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

/// Runs `command` to its end with `input` on its stdin (then closed),
/// stdout and stderr captured.
pub(crate) async fn run_with_input(
    mut command: std::process::Command,
    input: &'static [u8],
) -> Output {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub(crate) fn session_lines(dir: &Path, name: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join(format!("data/sessions/{name}.jsonl")))
        .unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_replies_on_stdout_records_the_session_and_sends_the_expected_body() {
    let dir = workspace();
    let server = Server::start(vec![text_reply("Hello from the script.")]).await;
    let output = run_to_end(command(dir.path(), &server, &["ask", "Say hello"])).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Hello from the script.\n");
    let lines = session_lines(dir.path(), "default");
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["role"], "user");
    // The usage record was saved before the process exited.
    let usage: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("data/usage.json")).unwrap())
            .unwrap();
    assert_eq!(usage["models"]["scripted"]["cycles"], 1, "{usage}");
    assert_eq!(usage["models"]["scripted"]["output_tokens"], 4);
    assert_eq!(lines[1]["content"], "Hello from the script.");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].json();
    assert_eq!(body["model"], "scripted");
    assert_eq!(body["stream"], true);
    let messages = body["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap();
    assert_eq!(messages[0]["role"], "system");
    // The context section the awareness skill renders, with the tool belt.
    assert!(system.contains("Launch"), "{system}");
    assert!(system.contains("query_memex"), "{system}");
    assert_eq!(messages.last().unwrap()["content"], "Say hello");
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"add_journal_entry"), "{tools:?}");
    assert!(
        !requests[0].body.contains("CANARY"),
        "the private canary left"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_runs_the_tool_loop_and_no_private_text_reaches_any_body() {
    let dir = workspace();
    let server = Server::start(vec![
        tool_reply("query_memex", r#"{"tag": "project"}"#),
        tool_reply("read_object", r#"{"id": "health"}"#),
        tool_reply("set_todo", r#"{"id": "docs", "state": "DONE"}"#),
        text_reply("Marked it done."),
    ])
    .await;
    let output = run_to_end(command(
        dir.path(),
        &server,
        &["ask", "Finish the docs task"],
    ))
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).ends_with("Marked it done.\n"),
        "{}",
        stdout(&output)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for request in &requests {
        assert!(!request.body.contains("CANARY"), "the private canary left");
        assert!(!request.body.contains("private notes"));
        // Nor the private project's tags, nor a gate marker: nothing the
        // user typed was private, so a marker would be a tool's leak.
        assert!(!request.body.contains("@personal"), "{}", request.body);
        assert!(!request.body.contains("[REDACTED"), "{}", request.body);
    }
    // Each tool's output came back in the next request as a `tool`
    // message answering its call, followed only by the activity log (a
    // system message: "called query_memex: ok").
    let tool_message = |request: &crate::server::Recorded| {
        let json = request.json();
        let messages = json["messages"].as_array().unwrap();
        let (log, rest) = messages.split_last().unwrap();
        assert_eq!(log["role"], "system", "{json}");
        assert!(
            log["content"].as_str().unwrap().contains("called "),
            "{json}"
        );
        let last = rest.last().unwrap();
        assert_eq!(last["role"], "tool", "{json}");
        last["content"].as_str().unwrap().to_owned()
    };
    let listed = tool_message(&requests[1]);
    assert!(
        listed.starts_with("launch ^") && listed.contains(" | Launch"),
        "{listed}"
    );
    assert!(
        tool_message(&requests[2]).starts_with("error: no visible object has that id"),
        "{}",
        requests[2].body
    );
    let disk = std::fs::read_to_string(dir.path().join("memex/work.org")).unwrap();
    assert!(disk.contains("** DONE Write docs"), "{disk}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_retried_then_answered_and_a_cut_stream_is_an_error_reply() {
    let dir = workspace();
    let server = Server::start(vec![
        Scripted::status(500, r#"{"error": {"message": "boom"}}"#),
        Scripted::status(429, r#"{"error": {"message": "slow down"}}"#).header("Retry-After", "1"),
        text_reply("Made it."),
        // A second ask: the stream breaks in the middle of a tool call.
        Scripted::sse(vec![
            format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
                    "id": "c", "type": "function", "function": {"name": "set_todo",
                    "arguments": "{\"id\": \"do"}}]}}]})
            )
            .into_bytes(),
        ])
        .ending(End::Cut),
    ])
    .await;
    let output = run_to_end(command(dir.path(), &server, &["ask", "hello"])).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Made it.\n");
    assert_eq!(server.requests().len(), 3);
    let output = run_to_end(command(dir.path(), &server, &["ask", "again"])).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    // The error on stderr only, as `ask --help` says; stdout holds replies.
    assert_eq!(stdout(&output), "", "{}", stdout(&output));
    assert!(
        stderr(&output).contains("error: the model failed"),
        "{}",
        stderr(&output)
    );
    let disk = std::fs::read_to_string(dir.path().join("memex/work.org")).unwrap();
    assert!(disk.contains("** TODO Write docs"), "a cut call ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_down_gives_an_error_not_a_crash() {
    let dir = workspace();
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let server = Server::start(vec![]).await;
    let mut ask = command(dir.path(), &server, &["ask", "hello"]);
    ask.env("OPENAI_BASE_URL", &url);
    let output = run_to_end(ask).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("error: the model failed"),
        "{}",
        stderr(&output)
    );
    assert!(!stderr(&output).contains("panicked"));
}

pub(crate) fn start_host(dir: &Path, server: &Server, extra: &[&str]) -> Child {
    let mut args = vec!["run"];
    args.extend_from_slice(extra);
    let mut child = command(dir, server, &args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let socket = dir.join("run/control.sock");
    let up = wait_for(Duration::from_secs(20), || {
        socket.exists() || matches!(child.try_wait(), Ok(Some(_)))
    });
    assert!(up && socket.exists(), "the host did not open its socket");
    child
}

pub(crate) fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let mut status = None;
    wait_for(Duration::from_secs(20), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    status.expect("the host did not exit")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_host_answers_send_status_and_stop_over_its_socket() {
    let dir = workspace();
    let server = Server::start(vec![text_reply("Hi from the host.")]).await;
    let mut host = start_host(dir.path(), &server, &["--no-repl", "--session", "work"]);
    use std::os::unix::fs::PermissionsExt as _;
    let socket = dir.path().join("run/control.sock");
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the socket is open to others");

    let sent = run_to_end(command(dir.path(), &server, &["send", "hello host"])).await;
    assert!(sent.status.success(), "{}", stderr(&sent));
    assert_eq!(stdout(&sent), "Hi from the host.\n");

    let status = run_to_end(command(dir.path(), &server, &["status", "--json"])).await;
    assert!(status.status.success(), "{}", stderr(&status));
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["session"], "work");
    assert_eq!(status["cycles"], 1);
    assert!(status["registry_generation"].as_u64().unwrap() >= 1);
    assert!(status["memex_generation"].as_u64().is_some());
    assert_eq!(status["last_cycle"]["context_type"], "tick_event");
    assert!(
        status["last_cycle"]["phases"]["model_ms"]
            .as_f64()
            .is_some()
    );
    let skills: Vec<&str> = status["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(skills.contains(&"awareness"), "{skills:?}");
    // (None of them with FOVEAL_TEST_BUILTIN_ISOLATION=cell: cells map
    // nothing in the host.)
    let libraries = status["loaded_libraries"].as_u64().unwrap();

    let human = run_to_end(command(dir.path(), &server, &["status"])).await;
    assert!(stdout(&human).contains("last cycle:     #1 user_input (tick_event)"));
    // The loaded library bytes config/foveal.toml says `status` shows.
    assert!(
        stdout(&human).contains(&format!("libraries:      {libraries} loaded, ")),
        "{}",
        stdout(&human)
    );

    // `foveal status --json | head`: a reader that went away is no error.
    let mut piped = command(dir.path(), &server, &["status", "--json"]);
    piped.stdout(Stdio::piped()).stderr(Stdio::piped());
    let piped = tokio::task::spawn_blocking(move || {
        let mut child = piped.spawn().unwrap();
        // The reader goes away before the status is written.
        drop(child.stdout.take());
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert!(piped.status.success(), "{}", stderr(&piped));
    assert_eq!(stderr(&piped), "");

    let stop = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(stop.status.success(), "{}", stderr(&stop));
    let exit = wait_exit(&mut host);
    assert!(exit.success(), "{exit:?}");
    assert!(!socket.exists(), "the socket was left behind");
    assert_eq!(session_lines(dir.path(), "work").len(), 2);

    // Nothing is running now: clients say so.
    let status = run_to_end(command(dir.path(), &server, &["status"])).await;
    assert_eq!(status.status.code(), Some(1));
    assert!(
        stderr(&status).contains("no foveal host is running"),
        "{}",
        stderr(&status)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_leaves_its_turn_to_a_host_serving_the_same_configuration_and_session() {
    let dir = workspace();
    let server = Server::start(vec![
        text_reply("From the host."),
        text_reply("From here, another tag."),
        text_reply("From here, another session."),
        text_reply("From the host, as JSON."),
    ])
    .await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    let cycles = |dir: &Path| {
        let status = command(dir, &server, &["status", "--json"])
            .output()
            .unwrap();
        let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
        status["cycles"].as_u64().unwrap()
    };

    let mut asked = command(dir.path(), &server, &["ask", "hello"]);
    asked.env("FOVEAL_LOG", "foveal=info");
    let asked = run_to_end(asked).await;
    assert!(asked.status.success(), "{}", stderr(&asked));
    assert_eq!(stdout(&asked), "From the host.\n");
    assert!(
        stderr(&asked).contains("the running host answers"),
        "{}",
        stderr(&asked)
    );
    // Nothing was loaded here: no skill, no memex.
    assert!(
        !stderr(&asked).contains("skill loaded"),
        "{}",
        stderr(&asked)
    );
    assert_eq!(cycles(dir.path()), 1);
    assert_eq!(session_lines(dir.path(), "default").len(), 2);

    // Another privacy tag is another configuration: the turn runs here.
    let here = run_to_end(command(
        dir.path(),
        &server,
        &["ask", "hello", "--privacy-tag", "@work"],
    ))
    .await;
    assert!(here.status.success(), "{}", stderr(&here));
    assert_eq!(stdout(&here), "From here, another tag.\n");
    assert_eq!(cycles(dir.path()), 1);

    // Another session runs here too.
    let here = run_to_end(command(
        dir.path(),
        &server,
        &["ask", "hello", "--session", "other"],
    ))
    .await;
    assert_eq!(stdout(&here), "From here, another session.\n");
    assert_eq!(cycles(dir.path()), 1);

    // `--json` prints the host's report of the turn, as `ask --json`
    // prints its own: the reply, the cycles, the stop, fields in order.
    let mut json = command(dir.path(), &server, &["ask", "hello", "--json"]);
    json.env("FOVEAL_LOG", "foveal=info");
    let json = run_to_end(json).await;
    assert!(json.status.success(), "{}", stderr(&json));
    assert!(
        stderr(&json).contains("the running host answers"),
        "{}",
        stderr(&json)
    );
    assert!(
        stdout(&json).starts_with("{\n  \"reply\": "),
        "{}",
        stdout(&json)
    );
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["reply"], "From the host, as JSON.");
    assert_eq!(report["stop"], "replied");
    assert_eq!(report["cycles"].as_array().unwrap().len(), 1);
    assert_eq!(cycles(dir.path()), 2);

    let stop = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(stop.status.success(), "{}", stderr(&stop));
    assert!(wait_exit(&mut host).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_and_prompt_are_answered_by_a_host_serving_the_same_configuration() {
    let dir = workspace();
    let server = Server::start(vec![]).await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--memex", "memex"]);
        let mut command = command(dir.path(), &server, &all);
        command.env("FOVEAL_LOG", "foveal=info");
        command
    };
    let by_host = |output: &Output| stderr(output).contains("the running host answers");
    // Nothing is loaded in the command: no skill, no memex.
    let loaded_nothing = |output: &Output| !stderr(output).contains("skill loaded");

    let context = run_to_end(run(&["context"])).await;
    assert!(context.status.success(), "{}", stderr(&context));
    assert!(
        by_host(&context) && loaded_nothing(&context),
        "{}",
        stderr(&context)
    );
    assert!(
        stdout(&context).contains("Write docs"),
        "{}",
        stdout(&context)
    );
    assert!(!stdout(&context).contains("CANARY"), "{}", stdout(&context));
    // What this process prints with no host on its socket is the same.
    let mut alone = run(&["context"]);
    alone.env("FOVEAL_SOCKET", dir.path().join("run/none.sock"));
    let alone = run_to_end(alone).await;
    assert!(alone.status.success(), "{}", stderr(&alone));
    assert!(!by_host(&alone), "{}", stderr(&alone));
    assert_eq!(stdout(&context), stdout(&alone));

    let json = run_to_end(run(&["context", "--json", "--focus", "docs"])).await;
    assert!(json.status.success() && by_host(&json), "{}", stderr(&json));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        report["included"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["id"] == "docs")
    );
    assert!(!String::from_utf8_lossy(&json.stdout).contains("CANARY"));

    // The host's errors and exit codes are the command's: a private
    // object is refused as a missing one, a stale handle as stale.
    for (focus, said) in [
        (
            "health",
            "no visible object has the id or handle \"health\"",
        ),
        ("^zzzz", "names no visible object"),
    ] {
        let refused = run_to_end(run(&["context", "--focus", focus])).await;
        assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
        assert!(
            by_host(&refused) && stderr(&refused).contains(said),
            "{}",
            stderr(&refused)
        );
        assert!(stdout(&refused).is_empty());
    }

    let prompt = run_to_end(run(&["prompt", "--message", "What is next?"])).await;
    assert!(prompt.status.success(), "{}", stderr(&prompt));
    assert!(
        by_host(&prompt) && loaded_nothing(&prompt),
        "{}",
        stderr(&prompt)
    );
    assert!(
        stdout(&prompt).contains("What is next?"),
        "{}",
        stdout(&prompt)
    );
    assert!(
        stdout(&prompt).contains("Write docs"),
        "{}",
        stdout(&prompt)
    );
    assert!(!stdout(&prompt).contains("CANARY"), "{}", stdout(&prompt));
    let usage = run_to_end(run(&["prompt", "--context-type", "nonesuch"])).await;
    assert_eq!(usage.status.code(), Some(2), "{}", stderr(&usage));

    // Another session, or another privacy tag, runs here.
    for extra in [&["--session", "other"][..], &["--privacy-tag", "@work"]] {
        let mut args = vec!["prompt", "--message", "What is next?"];
        args.extend_from_slice(extra);
        let here = run_to_end(run(&args)).await;
        assert!(here.status.success(), "{}", stderr(&here));
        assert!(!by_host(&here), "{extra:?}: {}", stderr(&here));
        assert!(stdout(&here).contains("What is next?"));
    }

    // None of it was a turn of the host's.
    let status = command(dir.path(), &server, &["status", "--json"])
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["cycles"], 0);
    assert!(server.requests().is_empty());
    let stop = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(stop.status.success(), "{}", stderr(&stop));
    assert!(wait_exit(&mut host).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_builds_the_private_text_matcher_at_its_start_and_after_edits_not_at_its_turns() {
    let dir = workspace();
    std::fs::write(
        dir.path().join("memex/diary.org"),
        "* Diary :@personal:\nMet Ann at the harbour on a windy morning.\n",
    )
    .unwrap();
    let server = Server::start(vec![]).await;
    let (mut host, log) = host_logging_privacy(dir.path(), &server);
    // No message is sent: the build is the host's own.
    let built = next_line(&log, "private-text matcher built");
    assert!(built.contains("searched"), "{built}");
    assert!(!built.contains("harbour"), "{built}");
    // An edit: the matcher follows it, still without a turn (the host's
    // note of the change passes the gate's log redaction, which derives
    // it).
    std::fs::write(
        dir.path().join("memex/diary.org"),
        "* Diary :@personal:\nMet Ann at the harbour on a windy morning.\n** Later\nA second private line here.\n",
    )
    .unwrap();
    let again = next_line(&log, "private-text matcher");
    assert!(generation(&again) > generation(&built), "{built}\n{again}");
    let stop = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(stop.status.success(), "{}", stderr(&stop));
    assert!(wait_exit(&mut host).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_started_on_an_indexed_memex_reads_its_matcher_says_so_and_gates_with_it() {
    let dir = workspace();
    std::fs::write(
        dir.path().join("memex/diary.org"),
        "* Diary :@personal:\nMet Ann at the harbour on a windy morning.\n",
    )
    .unwrap();
    let server = Server::start(vec![text_reply("Noted.")]).await;
    let index = run_to_end(command(
        dir.path(),
        &server,
        &["memex", "index", "--memex", "memex", "--json"],
    ))
    .await;
    assert!(index.status.success(), "{}", stderr(&index));
    assert!(
        stdout(&index).contains("\"state\":\"written\""),
        "{}",
        stdout(&index)
    );
    let (mut host, log) = host_logging_privacy(dir.path(), &server);
    next_line(&log, "private-text matcher read from the index");
    // The full build later edits derive from, made beside it.
    next_line(&log, "full build made beside the index's");
    let status = |dir: &Path| {
        let output = command(dir, &server, &["status", "--json"])
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    assert_eq!(status(dir.path())["warm_index"], true);
    let shown = command(dir.path(), &server, &["status"]).output().unwrap();
    assert!(
        stdout(&shown).contains("matcher read from the index (warm start)"),
        "{}",
        stdout(&shown)
    );
    // A turn the host runs is gated with it.
    let ask = run_to_end(command(
        dir.path(),
        &server,
        &["ask", "Met Ann at the harbour on a windy morning."],
    ))
    .await;
    assert!(ask.status.success(), "{}", stderr(&ask));
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        !requests[0].body.contains("harbour"),
        "{}",
        requests[0].body
    );
    assert!(
        requests[0].body.contains("[REDACTED private]"),
        "{}",
        requests[0].body
    );
    // An edit: the matcher is no longer the index's.
    std::fs::write(
        dir.path().join("memex/diary.org"),
        "* Diary :@personal:\nMet Ann at the harbour on a windy morning.\n** Later\nA second private line here.\n",
    )
    .unwrap();
    next_line(&log, "private-text matcher");
    assert!(
        wait_for(Duration::from_secs(10), || status(dir.path())["warm_index"]
            == false),
        "{}",
        status(dir.path())
    );
    let stop = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(stop.status.success(), "{}", stderr(&stop));
    assert!(wait_exit(&mut host).success());
}

/// `foveal run --no-repl` in `dir` with the privacy gate's debug log,
/// and its stderr's lines as they come.
fn host_logging_privacy(dir: &Path, server: &Server) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut host = command(dir, server, &["run", "--no-repl"])
        .env("FOVEAL_LOG", "foveal::privacy=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pipe = host.stderr.take().unwrap();
    let (lines, log) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    (host, log)
}

/// The next line of `log` that holds `what`, within a minute.
fn next_line(log: &std::sync::mpsc::Receiver<String>, what: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    std::iter::from_fn(|| {
        log.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
            .ok()
    })
    .find(|line| line.contains(what))
    .unwrap_or_else(|| panic!("the host did not say `{what}` in a minute"))
}

/// The `generation` field of a log line (its colours taken out).
fn generation(line: &str) -> u64 {
    let mut plain = String::new();
    let mut escape = false;
    for c in line.chars() {
        match c {
            '\u{1b}' => escape = true,
            'm' if escape => escape = false,
            _ if escape => {}
            _ => plain.push(c),
        }
    }
    plain
        .split_once("generation=")
        .and_then(|(_, rest)| rest.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no generation in {plain}"))
}

/// A reply that starts with `text` and never ends: after it, an SSE
/// comment every `every_ms` (a server keeping the connection alive while
/// it thinks, or stuck).
pub(crate) fn trickling(text: &str, every_ms: u64) -> Scripted {
    Scripted::sse(vec![
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {"content": text}}]})
        )
        .into_bytes(),
    ])
    .ending(End::Trickle {
        every_ms,
        content: false,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repl_answers_stdin_and_sigterm_cancels_the_cycle_in_flight_keeping_what_came() {
    let dir = workspace();
    let server = Server::start(vec![text_reply("First."), trickling("Half an answ", 5000)]).await;
    let mut host = start_host(dir.path(), &server, &[]);
    let mut stdin = host.stdin.take().unwrap();
    let mut out = std::io::BufReader::new(host.stdout.take().unwrap());
    writeln!(stdin, "first message").unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "First.\n");
    writeln!(stdin, "second message").unwrap();
    // SIGTERM once the second reply has begun: the stream never ends.
    let mut shown = vec![0; "Half an answ".len()];
    std::io::Read::read_exact(&mut out, &mut shown).unwrap();
    assert_eq!(shown, b"Half an answ");
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(host.id() as libc::pid_t, libc::SIGTERM);
    }
    let exit = wait_exit(&mut host);
    assert!(exit.success(), "{exit:?}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(rest.contains("[cancelled]"), "{rest}");
    // What came of the reply is the assistant's message, as after `cancel`.
    let lines = session_lines(dir.path(), "default");
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[3]["role"], "assistant");
    assert_eq!(lines[3]["content"], "Half an answ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_trickling_stream_exits_within_a_second_with_the_session_saved() {
    let dir = workspace();
    let server = Server::start(vec![trickling("Thinking it over", 500)]).await;
    let mut host = start_host(dir.path(), &server, &["--no-repl", "--session", "work"]);
    let mut send = command(dir.path(), &server, &["send", "a hard question"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut shown = vec![0; "Thinking it over".len()];
    std::io::Read::read_exact(send.stdout.as_mut().unwrap(), &mut shown).unwrap();
    assert_eq!(shown, b"Thinking it over");
    // The control: comments keep coming, and the turn does not end by
    // itself in longer than the host is given to exit.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        send.try_wait().unwrap().is_none(),
        "the turn ended by itself"
    );
    assert!(host.try_wait().unwrap().is_none());

    let signalled = std::time::Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(host.id() as libc::pid_t, libc::SIGTERM);
    }
    let exit = wait_exit(&mut host);
    let took = signalled.elapsed();
    assert!(exit.success(), "{exit:?}");
    assert!(
        took <= Duration::from_secs(1),
        "the host took {took:?} to exit after SIGTERM"
    );
    // The client's turn ended as a cancel does; the session holds what came.
    let sent = tokio::task::spawn_blocking(move || send.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(sent.status.success(), "{}", stderr(&sent));
    assert!(stdout(&sent).contains("[cancelled]"), "{}", stdout(&sent));
    let lines = session_lines(dir.path(), "work");
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["role"], "user");
    assert_eq!(lines[1]["role"], "assistant");
    assert_eq!(lines[1]["content"], "Thinking it over");
    assert!(!dir.path().join("run/control.sock").exists());
}

/// Sends `signal` to the child `host`.
fn signal(host: &Child, signal: libc::c_int) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(host.id() as libc::pid_t, signal);
    }
}

/// The host's exit status if it exits within `within`.
fn exits_within(host: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let mut status = None;
    wait_for(within, || {
        status = host.try_wait().unwrap();
        status.is_some()
    });
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigterm_exits_at_once_while_a_skill_hook_holds_the_hosts_thread() {
    let dir = workspace();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(
        dir.path().join("config/foveal.toml"),
        // In the host's process, with a deadline of a minute: the host's
        // thread waits for the hook that long.
        format!(
            "[plugins]\nhook_timeout_ms = 60000\ntrusted = [\"{}\"]\n\n[skills.sleepy]\nisolation = \"in-process\"\n",
            crate::support::sha256_of(&library("sleepy"))
        ),
    )
    .unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    install(&library("sleepy"), &plugins, &file_name("sleepy"));
    let server = Server::start(vec![text_reply("never asked")]).await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    let mut send = command(dir.path(), &server, &["send", "one"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The turn is in the hook: the host's thread serves nothing else.
    std::thread::sleep(Duration::from_millis(1500));
    let mut status = command(dir.path(), &server, &["status"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    // The control: `status` is not answered — the thread is held.
    assert!(
        status.try_wait().unwrap().is_none(),
        "the host answered status during the hook"
    );
    assert!(server.requests().is_empty());

    let signalled = std::time::Instant::now();
    signal(&host, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        host.try_wait().unwrap().is_none(),
        "the first SIGTERM is a stop, not an exit"
    );
    signal(&host, libc::SIGTERM);
    let exit = exits_within(&mut host, Duration::from_secs(3));
    let took = signalled.elapsed();
    let _ = send.kill();
    let _ = status.kill();
    let _ = send.wait();
    let _ = status.wait();
    let exit = exit.expect("the host did not exit after two SIGTERMs");
    assert_eq!(exit.code(), Some(128 + libc::SIGTERM), "{exit:?}");
    assert!(
        took <= Duration::from_millis(1200),
        "the host took {took:?} to exit after the first SIGTERM"
    );
    assert!(!dir.path().join("run/control.sock").exists());
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_sigint_after_stop_exits_at_once_while_the_host_waits_on_a_full_stdout() {
    use std::os::fd::AsRawFd as _;
    // The REPL's stdout: a pipe this test never reads, made one page
    // small; a reply of exactly its size fills it.
    let (out, out_writer) = std::io::pipe().unwrap();
    let fd = out.as_raw_fd();
    // SAFETY: fcntl(2) on the pipe's read end, which `out` holds open.
    let (set, got) = unsafe {
        (
            libc::fcntl(fd, libc::F_SETPIPE_SZ, 4096),
            libc::fcntl(fd, libc::F_GETPIPE_SZ),
        )
    };
    assert!(
        set > 0 && got > 0,
        "F_SETPIPE_SZ: {set}, F_GETPIPE_SZ: {got}"
    );
    let capacity = usize::try_from(got).unwrap();
    assert!(capacity <= 16384, "{capacity}");
    let text: String = "la ".repeat(capacity).chars().take(capacity).collect();

    let dir = workspace();
    let server = Server::start(vec![trickling(&text, 500)]).await;
    let mut host = command(dir.path(), &server, &["run"])
        .stdin(Stdio::piped())
        .stdout(out_writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let socket = dir.path().join("run/control.sock");
    assert!(
        wait_for(Duration::from_secs(20), || socket.exists()),
        "the host did not open its socket"
    );
    writeln!(host.stdin.as_mut().unwrap(), "a long answer, please").unwrap();
    let in_pipe = || {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes the bytes waiting in the pipe into `n`.
        unsafe {
            libc::ioctl(fd, libc::FIONREAD, &raw mut n);
        }
        usize::try_from(n).unwrap_or(0)
    };
    assert!(
        wait_for(Duration::from_secs(20), || in_pipe() == capacity),
        "the reply did not fill the pipe: {} of {capacity} bytes",
        in_pipe()
    );

    // `stop` is answered and cancels the turn; what the host writes next
    // waits on the full pipe.
    let stop = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(stop.status.success(), "{}", stderr(&stop));
    // The control: the host cannot finish stopping by itself.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        host.try_wait().unwrap().is_none(),
        "the host exited while its stdout was full"
    );
    let signalled = std::time::Instant::now();
    signal(&host, libc::SIGINT);
    let exit = exits_within(&mut host, Duration::from_secs(3))
        .expect("one SIGINT after stop did not end the host");
    assert!(
        signalled.elapsed() <= Duration::from_secs(1),
        "{:?}",
        signalled.elapsed()
    );
    assert_eq!(exit.code(), Some(128 + libc::SIGINT), "{exit:?}");
    assert!(!socket.exists());
    drop(out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_input_is_answered_then_the_host_exits_and_sessions_resume() {
    let dir = workspace();
    let server = Server::start(vec![text_reply("One."), text_reply("Two.")]).await;
    let run = command(dir.path(), &server, &["run", "--session", "s1"]);
    let output = run_with_input(run, b"My name is Ada.\n").await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("One."));
    let output = run_to_end(command(
        dir.path(),
        &server,
        &["ask", "--session", "s1", "Who am I?"],
    ))
    .await;
    assert!(output.status.success());
    let second = &server.requests()[1].body;
    assert!(
        second.contains("My name is Ada."),
        "the session was not resumed"
    );
    assert!(second.contains("One."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skill_tools_run_across_the_abi_and_dangerous_ones_are_refused_without_a_user() {
    let dir = workspace();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    install(
        &library("tools"),
        &plugins,
        &file_name("foveal_fixture_tools"),
    );
    let server = Server::start(vec![
        tool_reply("word_count", r#"{"text": "one two three"}"#),
        tool_reply("shred_notes", "{}"),
        tool_reply("explode", "{}"),
        text_reply("All done."),
    ])
    .await;
    let output = run_to_end(command(dir.path(), &server, &["ask", "count"])).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = server.requests();
    let offered: Vec<String> = requests[0].json()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(offered.contains(&"word_count".to_owned()), "{offered:?}");
    assert!(
        !offered.contains(&"bad_schema".to_owned()),
        "a broken declaration was offered"
    );
    assert!(
        requests[1]
            .body
            .contains(r#""role":"tool","tool_call_id":"call_1","content":"3 words""#),
        "{}",
        requests[1].body
    );
    assert!(
        requests[2]
            .body
            .contains("refused: shred_notes is dangerous"),
        "{}",
        requests[2].body
    );
    assert!(
        requests[3]
            .body
            .contains("the skill tools failed to run explode")
    );
    assert!(stdout(&output).ends_with("All done.\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_tool_is_lent_the_memex_view_and_its_config_and_a_tool_built_with_sdk_0_2_0_still_runs()
 {
    let dir = workspace();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    install(
        &library("tools"),
        &plugins,
        &file_name("foveal_fixture_tools"),
    );
    install(
        &library("tools-previous-sdk"),
        &plugins,
        &file_name("foveal_fixture_tools_previous_sdk"),
    );
    std::fs::write(
        dir.path().join("foveal.toml"),
        "[skills.tools]\ngreeting = \"Seen\"\n",
    )
    .unwrap();
    let server = Server::start(vec![
        tool_reply("focus_title", "{}"),
        tool_reply("shout", r#"{"text": "hi"}"#),
        text_reply("Done."),
    ])
    .await;
    let mut ask = command(dir.path(), &server, &["ask", "look"]);
    ask.env("FOVEAL_CONFIG", dir.path().join("foveal.toml"));
    let output = run_to_end(ask).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = server.requests();
    // The view holds Launch and its task, not the private Health project.
    assert!(
        requests[1].body.contains(
            r#""role":"tool","tool_call_id":"call_1","content":"Seen: (nothing in focus) (2 visible objects)""#
        ),
        "{}",
        requests[1].body
    );
    assert!(
        requests[2].body.contains(r#"SHOUTED {\"TEXT\":\"HI\"}"#),
        "{}",
        requests[2].body
    );
    assert!(!requests.iter().any(|r| r.body.contains("CANARY-91c2")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_lists_every_problem_and_exits_1() {
    let dir = workspace();
    let server = Server::start(vec![]).await;
    let good = run_to_end(command(dir.path(), &server, &["check"])).await;
    assert!(good.status.success(), "{}", stdout(&good));
    assert!(stdout(&good).contains("no problems found"));
    std::fs::write(dir.path().join("memex/bad.org"), b"* ok\n\xff\xfe\n").unwrap();
    std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
    std::fs::write(
        dir.path().join("plugins/libfoveal_skill_junk.so"),
        b"not a library",
    )
    .unwrap();
    let bad = run_to_end(command(dir.path(), &server, &["check"])).await;
    assert_eq!(bad.status.code(), Some(1));
    let text = stdout(&bad);
    assert!(text.contains("PROBLEM  memex:"), "{text}");
    // The file is named once (its error names it).
    let memex_line = text
        .lines()
        .find(|l| l.contains("PROBLEM  memex:"))
        .unwrap();
    assert_eq!(memex_line.matches("bad.org").count(), 1, "{memex_line}");
    assert!(text.contains("PROBLEM  skill"), "{text}");
    assert!(text.contains("2 problem(s) found"), "{text}");
    std::fs::write(
        dir.path().join("bad.toml"),
        "[agent]\nheartbeat_secs = \"often\"\n",
    )
    .unwrap();
    let config = run_to_end(command(
        dir.path(),
        &server,
        &["--config", "bad.toml", "check"],
    ))
    .await;
    assert_eq!(config.status.code(), Some(1));
    assert!(
        stdout(&config).contains("PROBLEM  config:"),
        "{}",
        stdout(&config)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_swapped_during_a_cycle_is_used_from_the_next_cycle_on() {
    let dir = workspace();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    // The first reply is slow: the skill arrives while it streams.
    let mut chunks: Vec<serde_json::Value> = (0..400)
        .map(|i| json!({"choices": [{"index": 0, "delta": {"content": format!("w{i} ")}}]}))
        .collect();
    chunks.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
    let server = Server::start(vec![
        Scripted::sse(sse_events(&chunks)),
        text_reply("Second."),
    ])
    .await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    let status = |dir: &Path, server: &Server| {
        let output = command(dir, server, &["status", "--json"])
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let before = status(dir.path(), &server)["registry_generation"]
        .as_u64()
        .unwrap();

    let mut send = command(dir.path(), &server, &["send", "first"]);
    let first = tokio::task::spawn_blocking(move || send.output().unwrap());
    wait_for(Duration::from_secs(10), || server.requests().len() == 1);
    install(
        &library("tools"),
        &plugins,
        &file_name("foveal_fixture_tools"),
    );
    let swapped = wait_for(Duration::from_secs(10), || {
        status(dir.path(), &server)["registry_generation"]
            .as_u64()
            .unwrap()
            > before
    });
    assert!(swapped, "the new skill was not loaded");
    let first = first.await.unwrap();
    assert!(stdout(&first).contains("w399"), "{}", stdout(&first));
    // The cycle in flight finished on the generation it started with...
    let after_first = status(dir.path(), &server);
    assert_eq!(after_first["last_cycle"]["registry_generation"], before);
    assert!(!server.requests()[0].body.contains("word_count"));

    // ...and the next one runs on the new one, with the new skill's tools.
    let second = run_to_end(command(dir.path(), &server, &["send", "second"])).await;
    assert_eq!(stdout(&second), "Second.\n");
    let after_second = status(dir.path(), &server);
    assert!(
        after_second["last_cycle"]["registry_generation"]
            .as_u64()
            .unwrap()
            > before
    );
    assert!(server.requests()[1].body.contains("word_count"));
    run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(wait_exit(&mut host).success());
}

/// Walks every string of `value` (keys too).
fn each_string(value: &serde_json::Value, f: &mut dyn FnMut(&str)) {
    match value {
        serde_json::Value::String(text) => f(text),
        serde_json::Value::Array(items) => items.iter().for_each(|v| each_string(v, f)),
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                f(key);
                each_string(item, f);
            }
        }
        _ => {}
    }
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adversary_finds_no_private_byte_in_any_request_file_or_log() {
    let dir = workspace();
    std::fs::write(
        dir.path().join("memex/diary.org"),
        "#+FILETAGS: :@personal:\n* Sunday\n:PROPERTIES:\n:ID: sunday\n:END:\n\
         Met Ann at the harbour CANARY-d1a7 on a windy morning.\n",
    )
    .unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    install(
        &library("tools"),
        &plugins,
        &file_name("foveal_fixture_tools"),
    );
    // The model stands in for anyone who learned the private text
    // elsewhere: it echoes it in its reply and in tool arguments — handed
    // to a skill's tool that would quote it in an error, which is refused
    // before it runs, whatever its category.
    let leak = "met ANN at the\nharbour canary-d1a7 on a windy morning";
    let arguments = json!({ "text": leak }).to_string();
    let server = Server::start(vec![
        tool_reply("echo_error", &arguments),
        tool_reply("read_object", r#"{"id": "sunday"}"#),
        text_reply(&format!("You said: {leak}")),
        text_reply("You quoted something private."),
    ])
    .await;
    let ask = |text: &str| {
        let mut c = command(dir.path(), &server, &["ask", "--session", "s", text]);
        c.env("FOVEAL_LOG", "debug");
        c
    };
    let first = run_to_end(ask(
        "Remember: Met  Ann at the HARBOUR\nCANARY-D1A7 on a windy morning!",
    ))
    .await;
    assert!(first.status.success(), "{}", stderr(&first));
    // The diary leaves the memex; the old message must stay redacted.
    std::fs::remove_file(dir.path().join("memex/diary.org")).unwrap();
    let second = run_to_end(ask("What did I tell you?")).await;
    assert!(second.status.success(), "{}", stderr(&second));

    let leaked = |text: &str| {
        let lower = text.to_lowercase();
        lower.contains("canary") || lower.contains("harbour")
    };
    // Every string of every request.
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        4,
        "{}\n{}\n{}\n{}",
        stdout(&first),
        stderr(&first),
        stdout(&second),
        stderr(&second)
    );
    for request in &requests {
        each_string(&request.json(), &mut |text| {
            assert!(!leaked(text), "a request carried {text:?}");
        });
    }
    // The tool was refused, not run: the skill never had the text. (A
    // skill's error capped on its way out: `privacy_doors.rs`.)
    let refused_result = &requests[1].body;
    assert!(
        refused_result.contains(&format!("error: {}", foveal::egress::WRITE_REFUSED)),
        "{refused_result}"
    );
    assert!(
        !refused_result.contains("the skill tools failed to run echo_error"),
        "{refused_result}"
    );
    // The log, at debug level, and what the user was shown on stderr.
    for output in [&first, &second] {
        assert!(!leaked(&stderr(output)), "{}", stderr(output));
    }
    // Every file written: the session keeps what the user typed, as typed,
    // for the user's eyes — and nothing else private.
    for path in files_under(dir.path()) {
        if path.starts_with(dir.path().join("memex")) || path.starts_with(&plugins) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "jsonl") {
            for line in text.lines() {
                let entry: serde_json::Value = serde_json::from_str(line).unwrap();
                each_string(&entry, &mut |s| {
                    let typed = entry["role"] == "user" && entry["content"] == s;
                    assert!(typed || !leaked(s), "{} holds {s:?}", path.display());
                });
            }
        } else {
            assert!(!leaked(&text), "{} holds private text", path.display());
        }
    }
}

/// The status `foveal status --json` gives skill `name` of a running host.
async fn skill_status(dir: &Path, server: &Server, name: &str) -> String {
    let status = run_to_end(command(dir, server, &["status", "--json"])).await;
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let skill = status["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no skill {name} in {status}"));
    skill["status"].as_str().unwrap().to_owned()
}

/// Stops a running host with `foveal stop`, checks that it exits cleanly,
/// and returns what it wrote on stderr.
pub(crate) async fn stop_host(dir: &Path, server: &Server, host: &mut Child) -> String {
    run_to_end(command(dir, server, &["stop"])).await;
    assert!(wait_exit(host).success());
    let mut err = String::new();
    std::io::Read::read_to_string(host.stderr.as_mut().unwrap(), &mut err).unwrap();
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompts_log_says_what_the_agent_did_and_saw_in_words_not_the_hosts_own_lines() {
    let dir = workspace();
    let server = Server::start(vec![
        tool_reply("read_object", r#"{"id": "docs"}"#),
        text_reply("Read it."),
        text_reply("Seen."),
    ])
    .await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    let sent = run_to_end(command(
        dir.path(),
        &server,
        &["send", "read the docs task"],
    ))
    .await;
    assert!(sent.status.success(), "{}", stderr(&sent));
    // An edit outside the host.
    let status = |dir: &Path, server: &Server| {
        let output = command(dir, server, &["status", "--json"])
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let generation = status(dir.path(), &server)["memex_generation"].as_u64();
    let mut text = std::fs::read_to_string(dir.path().join("memex/work.org")).unwrap();
    text.push_str("* Plan the review :project:\n:PROPERTIES:\n:ID: review\n:END:\n");
    std::fs::write(dir.path().join("memex/work.org"), text).unwrap();
    assert!(wait_for(Duration::from_secs(10), || {
        status(dir.path(), &server)["memex_generation"].as_u64() > generation
    }));
    // The host tells its log on its next tick (every 250 ms).
    std::thread::sleep(Duration::from_millis(600));
    let sent = run_to_end(command(dir.path(), &server, &["send", "anything new?"])).await;
    assert!(sent.status.success(), "{}", stderr(&sent));
    stop_host(dir.path(), &server, &mut host).await;

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let logs = |body: &str| -> String {
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["content"].as_str())
            .filter(|c| c.contains("called ") || c.contains("memex file "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    // The cycle after the tool call sees it; the next turn also sees the
    // outside edit, counted.
    assert!(
        logs(&requests[1].body).contains("called read_object: ok"),
        "{}",
        requests[1].body
    );
    let last = logs(&requests[2].body);
    assert!(last.contains("called read_object: ok"), "{last}");
    assert!(
        last.contains("memex file work.org was edited outside: 1 headline added"),
        "{}",
        requests[2].body
    );
    // None of the host's own lines: no paths, timings or load lines.
    let root = dir.path().display().to_string();
    for request in &requests {
        for needle in [
            root.as_str(),
            "load_ms",
            "skill loaded",
            ".so",
            "generation=",
        ] {
            assert!(
                !request.body.contains(needle),
                "{needle} in {}",
                request.body
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_that_panics_every_turn_is_quarantined_and_stderr_says_so() {
    let dir = workspace();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    install(&library("panicky"), &plugins, &file_name("panicky"));
    let server = Server::start((0..4).map(|i| text_reply(&format!("Reply {i}."))).collect()).await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    // The same message each turn: the prompt (and every cache key) stays
    // the same, so only a failure that is never cached is counted again.
    for _ in 0..4 {
        let sent = run_to_end(command(dir.path(), &server, &["send", "same question"])).await;
        assert!(sent.status.success(), "{}", stderr(&sent));
    }
    let status = skill_status(dir.path(), &server, "panicky").await;
    assert!(status.starts_with("quarantined"), "{status}");
    let err = stop_host(dir.path(), &server, &mut host).await;
    // At the default log level: one line for the panic (three panics with
    // the same message are one cause: said once), one for the quarantine,
    // each naming the skill and its file.
    let panics: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("skill hook panicked"))
        .collect();
    assert_eq!(panics.len(), 1, "{err}");
    let quarantine: Vec<&str> = err.lines().filter(|l| l.contains("quarantined")).collect();
    assert_eq!(quarantine.len(), 1, "{err}");
    for line in panics.iter().chain(&quarantine) {
        assert!(line.contains("skill=panicky"), "{line}");
        assert!(
            line.contains("libpanicky") || line.contains("panicky.so"),
            "{line}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_hook_that_never_returns_costs_one_deadline_and_the_host_answers_anyway() {
    let dir = workspace();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(
        dir.path().join("config/foveal.toml"),
        // In the host's process (trusted by the user): the hung call is
        // abandoned on its thread. In a cell (the default) the cell is
        // killed instead: see the test below.
        format!(
            "[plugins]\nhook_timeout_ms = 300\ntrusted = [\"{}\"]\n\n[skills.sleepy]\nisolation = \"in-process\"\n",
            crate::support::sha256_of(&library("sleepy"))
        ),
    )
    .unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    install(&library("sleepy"), &plugins, &file_name("sleepy"));
    let server = Server::start(vec![text_reply("First."), text_reply("Second.")]).await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    for (message, reply) in [("one", "First."), ("two", "Second.")] {
        let started = std::time::Instant::now();
        let sent = run_to_end(command(dir.path(), &server, &["send", message])).await;
        assert!(sent.status.success(), "{}", stderr(&sent));
        assert!(String::from_utf8_lossy(&sent.stdout).contains(reply));
        // The sleeping hook costs the first turn its deadline, no more;
        // the second does not call it at all.
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{:?}",
            started.elapsed()
        );
    }
    let status = skill_status(dir.path(), &server, "sleepy").await;
    assert_eq!(
        status, "quarantined: its components hook did not return within 300 ms",
        "{status}"
    );
    // The stuck thread does not keep the host from exiting.
    let err = stop_host(dir.path(), &server, &mut host).await;
    let hung: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("did not return in time"))
        .collect();
    assert_eq!(hung.len(), 1, "{err}");
    assert!(
        hung[0].contains("skill=sleepy") && hung[0].contains("hook=components"),
        "{err}"
    );
    assert!(hung[0].contains("timeout_ms=300"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_hook_in_a_cell_kills_the_cell_each_time_until_the_skill_is_quarantined() {
    let dir = workspace();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(
        dir.path().join("config/foveal.toml"),
        "[plugins]\nhook_timeout_ms = 300\nquarantine_after = 2\n",
    )
    .unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    install(&library("sleepy"), &plugins, &file_name("sleepy"));
    let server = Server::start(vec![
        text_reply("First."),
        text_reply("Second."),
        text_reply("Third."),
    ])
    .await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    for (message, reply) in [("one", "First."), ("two", "Second."), ("three", "Third.")] {
        let sent = run_to_end(command(dir.path(), &server, &["send", message])).await;
        assert!(sent.status.success(), "{}", stderr(&sent));
        assert!(String::from_utf8_lossy(&sent.stdout).contains(reply));
    }
    // Two hangs in a row (quarantine_after = 2): quarantined, as a skill
    // that keeps panicking is; the third turn does not call it.
    let status = skill_status(dir.path(), &server, "sleepy").await;
    assert_eq!(
        status, "quarantined: its components hook did not return within 300 ms",
        "{status}"
    );
    // Nothing of the skill runs any more: its hung cells were killed and
    // a quarantined skill gets no new one.
    let status = run_to_end(command(dir.path(), &server, &["status", "--json"])).await;
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let sleepy = status["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "sleepy")
        .unwrap();
    assert!(sleepy["cell"]["pid"].is_null(), "{sleepy}");
    assert_eq!(sleepy["cell"]["restarts"], 1, "{sleepy}");
    let err = stop_host(dir.path(), &server, &mut host).await;
    let killed: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("its cell was killed"))
        .collect();
    assert_eq!(killed.len(), 2, "{err}");
    assert!(killed[0].contains("components"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_piped_run_refuses_a_dangerous_tool_at_once_instead_of_waiting_for_an_answer() {
    let dir = workspace();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    install(
        &library("tools"),
        &plugins,
        &file_name("foveal_fixture_tools"),
    );
    let server = Server::start(vec![
        tool_reply("shred_notes", "{}"),
        text_reply("I did not shred anything."),
    ])
    .await;
    let mut run = command(dir.path(), &server, &["run"]);
    run.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (close, closed) = std::sync::mpsc::channel::<()>();
    let output = tokio::task::spawn_blocking(move || {
        let mut child = run.spawn().unwrap();
        // The message, and the input stays open: nobody is there to answer.
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"Shred my notes.\n").unwrap();
        let _ = closed.recv_timeout(Duration::from_secs(30));
        drop(stdin);
        child.wait_with_output().unwrap()
    });
    // The turn ends on its own; closing the input then stops the host.
    let requests = wait_for(Duration::from_secs(20), || server.requests().len() == 2);
    close.send(()).unwrap();
    let output = output.await.unwrap();
    assert!(requests, "the turn did not finish: {}", stderr(&output));
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        server.requests()[1]
            .body
            .contains("refused: shred_notes is dangerous"),
        "{}",
        server.requests()[1].body
    );
}

// ---------------------------------------------------------------------
// The same adversary as above, with the real binary: a model server that
// echoes private text in an HTTP error body, in a tool call's name and
// id, and in a reply cut by a broken stream.
// ---------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_servers_echo_reaches_neither_the_log_nor_the_session_file() {
    let dir = workspace();
    let leak = "CANARY-91c2 private notes";
    // 1. A 400 whose error message echoes private text: logged raw at WARN
    //    (`model request failed: …`).
    // 2. A tool call whose name and id are the private text: the tool
    //    entry of the session file records both raw.
    // 3. A reply cut in the middle: the partial text is recorded raw.
    let cut = Scripted::sse(vec![
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {"content": format!("Your notes: {leak} and")}}]})
        )
        .into_bytes(),
    ])
    .ending(End::Cut);
    let named = Scripted::sse(sse_events(&[
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": format!("id {leak}"),
            "type": "function", "function": {"name": leak, "arguments": "{}"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ]));
    let server = Server::start(vec![
        Scripted::status(
            400,
            &json!({"error": {"message": format!("invalid content near '{leak}'")}}).to_string(),
        ),
        named,
        text_reply("ok"),
        cut,
    ])
    .await;
    let mut outputs = Vec::new();
    for question in ["first", "second", "third"] {
        let mut c = command(dir.path(), &server, &["ask", "--session", "s", question]);
        c.env("FOVEAL_LOG", "warn");
        outputs.push(run_to_end(c).await);
    }
    let mut leaks = Vec::new();
    for (i, output) in outputs.iter().enumerate() {
        if stderr(output).contains("CANARY") {
            let err = stderr(output);
            let lines: Vec<&str> = err
                .lines()
                .filter(|l| l.contains("CANARY"))
                .map(|l| l.get(..300).unwrap_or(l))
                .collect::<Vec<_>>();
            leaks.push(format!("stderr log of ask #{}: {lines:?}", i + 1));
        }
    }
    for line in session_lines(dir.path(), "s") {
        let typed = line["role"] == "user";
        if !typed && line.to_string().contains("CANARY") {
            leaks.push(format!("session file: {line}"));
        }
    }
    assert!(
        leaks.is_empty(),
        "private text the server echoed reached:\n{leaks:#?}"
    );
}

/// A reply of 400 small pieces, slow enough to act while it streams.
pub(crate) fn slow_reply() -> Scripted {
    let mut chunks: Vec<serde_json::Value> = (0..400)
        .map(|i| json!({"choices": [{"index": 0, "delta": {"content": format!("w{i} ")}}]}))
        .collect();
    chunks.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
    Scripted::sse(sse_events(&chunks))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_during_a_turn_cancels_it_answers_the_waiting_send_and_refuses_the_queued_one() {
    let dir = workspace();
    let server = Server::start(vec![
        trickling("Working on it", 5000),
        text_reply("never asked"),
    ])
    .await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    let mut first = command(dir.path(), &server, &["send", "first"]);
    let first = tokio::task::spawn_blocking(move || first.output().unwrap());
    assert!(wait_for(Duration::from_secs(10), || server
        .requests()
        .len()
        == 1));
    let mut second = command(dir.path(), &server, &["send", "second"]);
    let second = tokio::task::spawn_blocking(move || second.output().unwrap());
    // Let the second message reach the queue, then stop.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stopped = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    let answered = std::time::Instant::now();
    assert!(wait_exit(&mut host).success());
    let took = answered.elapsed();
    assert!(
        took <= Duration::from_secs(1),
        "the host took {took:?} to exit after `stop`"
    );
    let first = first.await.unwrap();
    let second = second.await.unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(
        stdout(&first).contains("Working on it\n[cancelled]"),
        "{}",
        stdout(&first)
    );
    assert!(!second.status.success());
    assert!(
        stderr(&second).contains("the host stopped before it could answer"),
        "{}",
        stderr(&second)
    );
    assert_eq!(server.requests().len(), 1);
    let lines = session_lines(dir.path(), "default");
    assert_eq!(
        lines.last().unwrap()["content"],
        "Working on it",
        "{lines:?}"
    );
}

/// Raises this test process's soft limit of open files to at least
/// `needed` (the hosts it starts inherit it).
fn allow_open_files(needed: libc::rlim_t) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass, and nothing else.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(rc, 0);
    if limit.rlim_cur >= needed {
        return;
    }
    assert!(
        limit.rlim_max >= needed,
        "this test needs {needed} open files; the hard limit is {}",
        limit.rlim_max
    );
    limit.rlim_cur = needed;
    // SAFETY: setrlimit reads the struct we pass; raising the soft limit
    // up to the hard one needs no privilege.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eleven_hundred_silent_connections_lock_out_neither_status_nor_stop() {
    allow_open_files(4096);
    let dir = workspace();
    let server = Server::start(vec![]).await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    let socket = dir.path().join("run/control.sock");
    let silent = |n: usize| -> Vec<std::os::unix::net::UnixStream> {
        (0..n)
            .map(|_| std::os::unix::net::UnixStream::connect(&socket).unwrap())
            .collect()
    };

    // 1,024 are served (and wait for a request); beyond them a client is
    // told why in one line, not cut off.
    let flood = silent(1100);
    let status = run_to_end(command(dir.path(), &server, &["status"])).await;
    assert_eq!(status.status.code(), Some(1), "{}", stdout(&status));
    assert!(
        stderr(&status).contains("control clients at once"),
        "{}",
        stderr(&status)
    );
    // A connection that sends nothing is closed after 5 s, saying so.
    flood[0]
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut said = String::new();
    std::io::BufReader::new(&flood[0])
        .read_line(&mut said)
        .unwrap();
    assert!(said.contains("no request within 5 s"), "{said}");
    drop(flood);
    let mut answered = false;
    for _ in 0..50 {
        let status = run_to_end(command(dir.path(), &server, &["status"])).await;
        if status.status.success() {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        answered,
        "status is refused after the silent connections closed"
    );

    // `stop` gets through another flood at once.
    let flood = silent(1100);
    let stop = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(stop.status.success(), "{}", stderr(&stop));
    assert!(wait_exit(&mut host).success());
    drop(flood);
    // Said at the default level, once per burst — not once per client.
    let mut err = String::new();
    std::io::Read::read_to_string(host.stderr.as_mut().unwrap(), &mut err).unwrap();
    let warned = err.matches("clients at once").count();
    assert!((1..=2).contains(&warned), "{err}");
}

/// A host started with at most `files` open files (its soft and hard
/// limit, as a service manager or a container might set them), and a
/// thread that reads its stderr: each line as it comes, and all of them
/// when the host has exited.
struct LimitedHost {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl LimitedHost {
    fn start(dir: &Path, server: &Server, files: libc::rlim_t) -> Self {
        use std::os::unix::process::CommandExt as _;
        let mut command = command(dir, server, &["run", "--no-repl"]);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let limit_files = move || -> std::io::Result<()> {
            let limit = libc::rlimit {
                rlim_cur: files,
                rlim_max: files,
            };
            // SAFETY: setrlimit reads the struct we pass; lowering a limit
            // needs no privilege.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        };
        // SAFETY: the closure runs in the child between fork and exec and
        // calls only setrlimit, which is async-signal-safe.
        unsafe {
            command.pre_exec(limit_files);
        }
        let mut child = command.spawn().unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        let stderr = std::thread::spawn(move || {
            let mut all = String::new();
            for line in std::io::BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                all.push_str(&line);
                all.push('\n');
                let _ = tx.send(line);
            }
            all
        });
        let socket = dir.join("run/control.sock");
        let up = wait_for(Duration::from_secs(20), || {
            socket.exists() || matches!(child.try_wait(), Ok(Some(_)))
        });
        assert!(up && socket.exists(), "the host did not open its socket");
        Self {
            child,
            lines,
            stderr,
        }
    }

    /// The control clients the host says it serves at once: it says so on
    /// stderr, at the default log level, when its open-files limit leaves
    /// room for fewer than 1,024.
    fn clients_at_once(&self) -> usize {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .expect("the host did not say that its open-files limit is low");
            if line.contains("open-files limit") {
                return line
                    .split("serves ")
                    .nth(1)
                    .and_then(|rest| rest.split(' ').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("no number of clients in: {line}"));
            }
        }
    }

    /// Waits for the host to exit; its exit status and all it wrote on
    /// stderr.
    fn exit(mut self) -> (std::process::ExitStatus, String) {
        let status = wait_exit(&mut self.child);
        (status, self.stderr.join().unwrap())
    }
}

/// `n` connections to the host's socket that send nothing.
fn silent_clients(dir: &Path, n: usize) -> Vec<std::os::unix::net::UnixStream> {
    let socket = dir.join("run/control.sock");
    (0..n)
        .map(|_| std::os::unix::net::UnixStream::connect(&socket).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_open_files_limit_sizes_the_control_clients_and_says_so_and_stop_still_gets_through()
{
    allow_open_files(4096);
    let dir = workspace();
    let server = Server::start(vec![]).await;
    let host = LimitedHost::start(dir.path(), &server, 256);
    // Room for the clients served and as many beyond them, under 256
    // descriptors with the host's own.
    let n = host.clients_at_once();
    assert!((6..=96).contains(&n), "{n} clients under 256 open files");

    // n silent clients fill what is served; the next ones are read for a
    // second: `status` among them is told at once that the host is busy,
    // not left waiting until the silent ones time out (5 s) — which is
    // what happened when the host ran out of descriptors first and could
    // not accept it.
    let flood = silent_clients(dir.path(), n + 4);
    let asked = std::time::Instant::now();
    let status = run_to_end(command(dir.path(), &server, &["status"])).await;
    assert_eq!(status.status.code(), Some(1), "{}", stdout(&status));
    assert!(
        stderr(&status).contains(&format!("serving {n} control clients at once")),
        "{}",
        stderr(&status)
    );
    assert!(
        asked.elapsed() < Duration::from_secs(4),
        "status waited {:?}",
        asked.elapsed()
    );
    // `stop` gets through the same flood.
    let stop = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(stop.status.success(), "{}", stderr(&stop));
    let (exit, err) = host.exit();
    assert!(exit.success(), "{exit:?}");
    drop(flood);
    assert!(err.contains("the ones beyond are refused"), "{err}");
    assert!(!err.contains("Too many open files"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_twice_the_clients_served_a_client_is_told_in_one_line_not_cut_off() {
    allow_open_files(4096);
    let dir = workspace();
    let server = Server::start(vec![]).await;
    let host = LimitedHost::start(dir.path(), &server, 256);
    let n = host.clients_at_once();
    // n served, n more read for a second, and 8 beyond both: those are
    // answered without being read.
    let flood = silent_clients(dir.path(), 2 * n + 8);
    for (i, client) in flood[2 * n..].iter().enumerate() {
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut said = String::new();
        let read = std::io::BufReader::new(client).read_line(&mut said);
        assert!(
            said.contains(&format!("serving {n} control clients at once")),
            "client {} of {}: {read:?} {said:?}",
            2 * n + i + 1,
            flood.len()
        );
    }
    // The control: the clients served are still held (they are told
    // nothing until their 5 s are up).
    flood[0]
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut said = String::new();
    let read = std::io::BufReader::new(&flood[0]).read_line(&mut said);
    assert!(read.is_err(), "{read:?} {said:?}");
    drop(flood);
    let mut stopped = false;
    for _ in 0..50 {
        let stop = run_to_end(command(dir.path(), &server, &["stop"])).await;
        if stop.status.success() {
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(stopped, "stop was refused after the flood closed");
    let (exit, _) = host.exit();
    assert!(exit.success(), "{exit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_whose_host_dies_mid_turn_exits_non_zero() {
    let dir = workspace();
    let server = Server::start(vec![slow_reply()]).await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    let mut send = command(dir.path(), &server, &["send", "hello"]);
    let send = tokio::task::spawn_blocking(move || send.output().unwrap());
    assert!(wait_for(Duration::from_secs(10), || server
        .requests()
        .len()
        == 1));
    host.kill().unwrap();
    let _ = host.wait();
    let send = send.await.unwrap();
    assert!(!send.status.success(), "{}", stdout(&send));
    assert!(
        stderr(&send).contains("closed the connection before its reply was complete"),
        "{}",
        stderr(&send)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_on_a_large_indexed_memex_reads_its_matcher_beside_the_views_and_gates_the_request()
{
    // Over 4 MiB of Org with the privacy matcher in the index: `ask`
    // prepares the skills' view and reads the matcher on threads of their
    // own while it starts, and its turn waits for them.
    let dir = workspace();
    let mut org = String::with_capacity(4_500_000);
    for i in 0..36_000 {
        org.push_str(&format!(
            "* Note {i}\n:PROPERTIES:\n:ID: note-{i}\n:END:\nA public line about topic {i}, kept for the size of the memex.\n** Detail {i}\nMore public words, number {i}.\n"
        ));
    }
    org.push_str("* Diary :@personal:\nCANARY-5e1d met Ann at the harbour on a windy morning.\n");
    assert!(org.len() > 4 << 20);
    std::fs::write(dir.path().join("memex/large.org"), &org).unwrap();
    let index = run_to_end(command(
        dir.path(),
        &Server::start(vec![]).await,
        &["memex", "index", "--memex", "memex", "--json"],
    ))
    .await;
    assert!(index.status.success(), "{}", stderr(&index));
    assert!(stdout(&index).contains("\"written\""), "{}", stdout(&index));

    let server = Server::start(vec![text_reply("Noted.")]).await;
    let mut ask = command(
        dir.path(),
        &server,
        &["ask", "Did I meet Ann at the harbour on a windy morning?"],
    );
    ask.env("FOVEAL_LOG", "foveal::privacy=debug");
    let output = run_to_end(ask).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Noted.\n");
    assert!(
        stderr(&output).contains("private-text matcher read from the index"),
        "{}",
        stderr(&output)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let body = &requests[0].body;
    assert!(!body.contains("CANARY"), "the private canary left");
    assert!(!body.contains("harbour"), "the private words left");
    assert!(body.contains("[REDACTED private]"), "{body}");
    // The outline (the project of the other file) is in the request.
    assert!(body.contains("Launch"), "{body}");
}
