//! Doors private text could take besides the request body, through the
//! real binary against the scripted model server: the log level (the
//! prompt must not depend on it, nor name a path of the machine) and the
//! write tools (nothing private is written where a visible object would
//! hold it). `memex_cli.rs` has the local listings.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::live::{
    command, run_to_end, run_with_input, stderr, stdout, text_reply, tool_reply, workspace,
};
use crate::server::Server;
use crate::support::{file_name, foveal_command, install, library};

/// `foveal run` in a fresh workspace with `FOVEAL_LOG` set to `log` (or
/// unset), answering two messages piped to it; the model first calls
/// `set_todo` with a state the file does not have (its error names the
/// file). The workspace, every request body the model server received,
/// and the host's stderr.
async fn run_with_log(log: Option<&str>) -> (tempfile::TempDir, Vec<String>, String) {
    let dir = workspace();
    let server = Server::start(vec![
        tool_reply("set_todo", r#"{"id": "docs", "state": "BOGUS"}"#),
        text_reply("There is no such state."),
        text_reply("Nothing else."),
    ])
    .await;
    let mut run = command(dir.path(), &server, &["run"]);
    if let Some(log) = log {
        run.env("FOVEAL_LOG", log);
    }
    let output = run_with_input(run, b"Mark the docs task BOGUS.\nAnything else?\n").await;
    assert!(output.status.success(), "{}", stderr(&output));
    let bodies: Vec<String> = server.requests().into_iter().map(|r| r.body).collect();
    (dir, bodies, stderr(&output))
}

/// F3 of the privacy review: with `FOVEAL_LOG=debug` the host's own log
/// lines (`host ready … socket=/tmp/…`) reached the prompt's activity
/// section, and a tool's error named the memex file by its absolute path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_bodies_are_the_same_at_every_log_level_and_name_no_path_of_the_machine() {
    let (quiet_dir, quiet, _) = run_with_log(None).await;
    let mut runs = vec![(quiet_dir, quiet.clone())];
    for log in ["debug", "foveal=info,foveal::provider=debug"] {
        let (dir, bodies, err) = run_with_log(Some(log)).await;
        // The log ran, and its lines name the workspace by its path.
        assert!(err.contains("host ready"), "FOVEAL_LOG={log}: {err}");
        assert!(
            err.contains(&dir.path().display().to_string()),
            "FOVEAL_LOG={log}: {err}"
        );
        assert_eq!(
            bodies, quiet,
            "FOVEAL_LOG={log} changed what the model was sent"
        );
        runs.push((dir, bodies));
    }
    // Each run asked three times: the message, the tool's result, the
    // second message.
    assert_eq!(quiet.len(), 3, "{quiet:#?}");
    // The tool's error and the activity line reached the prompt …
    assert!(
        quiet[1].contains("is not a TODO keyword of this file"),
        "{}",
        quiet[1]
    );
    assert!(quiet[2].contains("called set_todo: failed"), "{}", quiet[2]);
    // … naming the file from its memex root, and nothing by a path of
    // the machine.
    assert!(quiet[1].contains("work.org:"), "{}", quiet[1]);
    let temp = std::env::temp_dir().display().to_string();
    for (dir, bodies) in &runs {
        let roots = [
            dir.path().display().to_string(),
            dir.path().canonicalize().unwrap().display().to_string(),
            temp.clone(),
        ];
        for body in bodies {
            for root in &roots {
                assert!(!body.contains(root.as_str()), "{root} in {body}");
            }
        }
    }
}

const DIARY: &str = "#+FILETAGS: :@personal:
* Sunday
:PROPERTIES:
:ID: sunday
:END:
Met Ann at the harbour on a windy morning.
";

/// Every file of the memex folder under `dir`, with its bytes.
fn memex_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir.join("memex"))
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

/// The content of the last `tool` message of a request body.
fn tool_result(body: &str) -> String {
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no tool message in {body}"))
        .to_owned()
}

/// F4 of the privacy review: a write tool whose arguments held private
/// text was withheld from the history but still ran — `add_headline`
/// copied the diary's sentence into a public headline, and a skill's
/// write tool was handed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_tool_given_private_text_is_refused_and_nothing_is_written() {
    let dir = workspace();
    std::fs::write(dir.path().join("memex/diary.org"), DIARY).unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    install(
        &library("tools"),
        &plugins,
        &file_name("foveal_fixture_tools"),
    );
    let private = "met ANN at the harbour on a windy morning";
    let public = "buy chairs for the hall";
    let headline = |title: &str| json!({"parent_id": "launch", "title": title}).to_string();
    let note = |text: &str| json!({ "text": text }).to_string();
    let server = Server::start(vec![
        tool_reply("add_headline", &headline(private)),
        text_reply("Refused."),
        tool_reply("keep_note", &note(private)),
        text_reply("Refused."),
        // The same calls with public text: the positive control.
        tool_reply("add_headline", &headline(public)),
        text_reply("Added."),
        tool_reply("keep_note", &note(public)),
        text_reply("Kept."),
    ])
    .await;
    let ask = || command(dir.path(), &server, &["ask", "Write that down."]);
    let before = memex_bytes(dir.path());
    for _ in 0..2 {
        let output = run_to_end(ask()).await;
        assert!(output.status.success(), "{}", stderr(&output));
    }
    assert_eq!(memex_bytes(dir.path()), before, "a refused write wrote");
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for request in [&requests[1], &requests[3]] {
        assert_eq!(
            tool_result(&request.body),
            format!("error: {}", foveal::egress::WRITE_REFUSED)
        );
    }
    for _ in 0..2 {
        let output = run_to_end(ask()).await;
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 8);
    assert!(
        tool_result(&requests[5].body).starts_with("added headline \"buy chairs for the hall\""),
        "{}",
        requests[5].body
    );
    assert_eq!(tool_result(&requests[7].body), "kept: 5 words");
    let work = std::fs::read_to_string(dir.path().join("memex/work.org")).unwrap();
    assert!(work.contains("** buy chairs for the hall\n"), "{work}");

    // `foveal tool call` runs a skill's tool the way the agent does.
    let call = |text: &str| {
        command(
            dir.path(),
            &server,
            &["tool", "call", "keep_note", &note(text), "--memex", "memex"],
        )
    };
    let before = memex_bytes(dir.path());
    let refused = run_to_end(call(private)).await;
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains(&format!("error: {}\n", foveal::egress::WRITE_REFUSED)),
        "{}",
        stderr(&refused)
    );
    assert_eq!(stdout(&refused), "");
    let kept = run_to_end(call(public)).await;
    assert!(kept.status.success(), "{}", stderr(&kept));
    assert_eq!(stdout(&kept), "kept: 5 words\n");
    assert_eq!(memex_bytes(dir.path()), before);
}

/// Review of privacy v3: a skill's tool had its arguments checked only
/// when it declared itself a write or dangerous tool — a category is the
/// skill's word, and `word_count` (read) was handed the diary's sentence —
/// and when the memex did not open, `foveal tool call` checked the
/// arguments against an empty memex and ran the tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_skill_tool_is_refused_private_text_and_none_is_given_text_without_a_memex() {
    let dir = workspace();
    std::fs::write(dir.path().join("memex/diary.org"), DIARY).unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    install(
        &library("tools"),
        &plugins,
        &file_name("foveal_fixture_tools"),
    );
    let private = json!({ "text": "met ANN at the harbour on a windy morning" }).to_string();
    let public = json!({ "text": "buy chairs for the hall" }).to_string();
    let call = |tool: &str, args: &str, memex: &str| {
        foveal_command(dir.path(), &["tool", "call", tool, args, "--memex", memex])
    };

    // A read tool given private text: refused, not run.
    let refused = run_to_end(call("word_count", &private, "memex")).await;
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains(&format!("error: {}\n", foveal::egress::WRITE_REFUSED)),
        "{}",
        stderr(&refused)
    );
    assert_eq!(stdout(&refused), "");
    // With public text it runs: the positive control.
    let ran = run_to_end(call("word_count", &public, "memex")).await;
    assert!(ran.status.success(), "{}", stderr(&ran));
    assert_eq!(stdout(&ran), "5 words\n");
    // A careless skill quoting its (public) arguments at length in an
    // error: the error is capped on its way out.
    let long = json!({ "text": "the launch checklist item by item ".repeat(8) }).to_string();
    let failed = run_to_end(call("echo_error", &long, "memex")).await;
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    assert!(
        stderr(&failed).contains("the skill tools failed to run echo_error"),
        "{}",
        stderr(&failed)
    );
    assert!(
        stderr(&failed).contains("[cut at 500 bytes]"),
        "{}",
        stderr(&failed)
    );

    // The memex does not open: arguments holding text are refused, even
    // public ones (they cannot be checked) …
    let refused = run_to_end(call("word_count", &public, "no-such-memex")).await;
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("error: refused: the memex did not open"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(stdout(&refused), "");
    // … and a tool given no text still runs, lent an empty memex.
    let ran = run_to_end(call("focus_title", "{}", "no-such-memex")).await;
    assert!(ran.status.success(), "{}", stderr(&ran));
    assert_eq!(
        stdout(&ran),
        "focus: (nothing in focus) (0 visible objects)\n"
    );
}
