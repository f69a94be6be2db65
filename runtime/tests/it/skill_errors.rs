//! Issue 29, row 2: a hook failure is one line on stderr at the default
//! log level, once per skill, hook and cause in a process, in every
//! command that calls the hook — `prompt`, `ask` (two cycles), `run` (two
//! turns) — and `foveal prompt --json` lists it in `skill_errors`. (A
//! skill whose hook failed on every cycle was silent without
//! `FOVEAL_LOG=debug` before.)

use serde_json::Value;

use crate::live::{
    command, run_to_end, run_with_input, stderr, stdout, text_reply, tool_reply, workspace,
};
use crate::server::Server;
use crate::support::{file_name, install, library};

/// The cause: the error the rogue's `components` hook returns.
const CAUSE: &str = "invalid input (code 3): rogue: unknown act \"no-such-act\"";

/// The line that says it.
fn line() -> String {
    format!("skill `rogue` hook `components` failed: {CAUSE}")
}

/// The live workspace with the `rogue` fixture dropped in (it runs in a
/// cell) and told an act it does not know: its `components` hook returns
/// an error on every call.
fn broken_rogue() -> tempfile::TempDir {
    let dir = workspace();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    install(&library("rogue"), &plugins, &file_name("rogue"));
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(
        dir.path().join("config/foveal.toml"),
        "[skills.rogue]\nact = \"no-such-act\"\n",
    )
    .unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_hook_is_one_line_on_stderr_in_prompt_ask_and_run_and_prompt_json_lists_it() {
    let dir = broken_rogue();
    let d = dir.path();
    let server = Server::start(vec![
        tool_reply("read_object", r#"{"id": "launch"}"#),
        text_reply("Read it."),
        text_reply("One."),
        text_reply("Two."),
    ])
    .await;
    let line = line();

    // `foveal prompt`: the section is left out and said once.
    let prompt = run_to_end(command(
        d,
        &server,
        &["prompt", "--memex", "memex", "--message", "hi"],
    ))
    .await;
    let err = stderr(&prompt);
    assert!(prompt.status.success(), "{err}");
    assert!(!stdout(&prompt).contains("=== 4600 rogue"));
    assert_eq!(err.matches(&line).count(), 1, "{err}");

    // `foveal prompt --json`: and listed.
    let json = run_to_end(command(
        d,
        &server,
        &["prompt", "--memex", "memex", "--message", "hi", "--json"],
    ))
    .await;
    let err = stderr(&json);
    assert!(json.status.success(), "{err}");
    assert_eq!(err.matches(&line).count(), 1, "{err}");
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        report["skill_errors"],
        serde_json::json!([{"skill": "rogue", "hook": "components", "error": CAUSE}]),
        "{report:#}"
    );

    // `foveal ask`: two cycles (a tool call, then the reply), the hook
    // failing in each; one line.
    let ask = run_to_end(command(d, &server, &["ask", "Look at the launch."])).await;
    let err = stderr(&ask);
    assert!(ask.status.success(), "{err}");
    assert!(stdout(&ask).contains("Read it."), "{}", stdout(&ask));
    assert_eq!(server.requests().len(), 2, "two cycles");
    assert_eq!(err.matches(&line).count(), 1, "{err}");

    // `foveal run`: two turns from stdin; one line.
    let run = command(d, &server, &["run", "--session", "piped"]);
    let ran = run_with_input(run, b"First question.\nSecond question.\n").await;
    let err = stderr(&ran);
    assert!(ran.status.success(), "{err}");
    assert!(
        stdout(&ran).contains("One.") && stdout(&ran).contains("Two."),
        "{}",
        stdout(&ran)
    );
    assert_eq!(server.requests().len(), 4, "two more cycles");
    assert_eq!(err.matches(&line).count(), 1, "{err}");
}
