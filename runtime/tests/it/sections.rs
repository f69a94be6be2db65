//! The section of every first-party skill that makes one
//! reaches the prompts a user gets — `foveal prompt --json`, the request
//! body of a real `foveal ask`, and a cycle of `foveal run` — on the
//! example memex (`config/memex`) with a task in focus and a note in the
//! context window. (A host that mixed its own keys into a skill's
//! configuration once left the computed-context section out of every live
//! prompt, while `foveal context --computed` worked.)
//!
//! `privacy` and `token-economics` make no section of their own — one
//! filters every section, the other makes the prefix and trims — so
//! `prompt --json` is asked whether each served: `egress.filter` is
//! `skill`, `economics` is `token-economics`.

use std::path::Path;

use serde_json::Value;

use crate::live::{command, run_to_end, run_with_input, stderr, stdout, text_reply};
use crate::server::Server;

/// A note attached to the context window (component 3000).
const NOTE: &str = "WINDOW-NOTE-4711 check the rate limit before the login";

/// Each first-party skill that makes a section: its id, and a line of it
/// that only the skill, on the example memex with `example-login` in
/// focus, writes.
const SECTIONS: [(&str, u32, &str); 4] = [
    // The outline of the active projects: `foveal launch` is one.
    ("awareness", 2000, "* foveal launch :project: ^"),
    // The handoff of the login task's finished dependency.
    (
        "computed-context",
        2100,
        "Hash passwords with argon2id, never store them",
    ),
    ("context-window", 3000, NOTE),
    // What is due: a deadline the test dates today (`agenda.org`).
    ("agenda", 4050, "Deadline:   TODO Renew the passport"),
];

/// A folder with a copy of the example memex in `memex/`.
fn example() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let memex = dir.path().join("memex");
    std::fs::create_dir(&memex).unwrap();
    let example = crate::support::test_server::repo_root().join("config/memex");
    for entry in std::fs::read_dir(&example).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "org") {
            std::fs::copy(&path, memex.join(path.file_name().unwrap())).unwrap();
        }
    }
    // A deadline today, by the local clock the host reads.
    let today = std::process::Command::new("date")
        .arg("+%F")
        .output()
        .unwrap();
    let today = String::from_utf8(today.stdout).unwrap();
    std::fs::write(
        memex.join("agenda.org"),
        format!("* TODO Renew the passport\nDEADLINE: <{}>\n", today.trim()),
    )
    .unwrap();
    dir
}

/// Every message's text of a request body, one after the other.
fn contents(body: &Value) -> String {
    body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

async fn window_add(dir: &Path, server: &Server) {
    let added = run_to_end(command(
        dir,
        server,
        &["window", "add", "--type", "text", NOTE],
    ))
    .await;
    assert!(added.status.success(), "{}", stderr(&added));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_first_party_section_is_in_prompt_json_in_an_ask_body_and_in_a_run_cycle() {
    let dir = example();
    let d = dir.path();
    let server = Server::start(vec![text_reply("Asked."), text_reply("Ran.")]).await;
    window_add(d, &server).await;

    // `foveal prompt --json`.
    let prompt = run_to_end(command(
        d,
        &server,
        &[
            "prompt",
            "--memex",
            "memex",
            "--focus",
            "example-login",
            "--message",
            "What is next for the login?",
            "--json",
        ],
    ))
    .await;
    assert!(prompt.status.success(), "{}", stderr(&prompt));
    let json: Value = serde_json::from_slice(&prompt.stdout).unwrap();
    let sections = json["sections"].as_array().expect("sections");
    for (skill, id, line) in SECTIONS {
        let section = sections
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("{skill}: no section {id} in {json:#}"));
        assert!(
            section["text"].as_str().unwrap().contains(line),
            "{skill}: {section:#}"
        );
    }
    assert_eq!(json["economics"], "token-economics", "{json:#}");
    assert_eq!(json["egress"]["filter"], "skill", "{json:#}");
    // No hook failed on the way.
    assert_eq!(json["skill_errors"], serde_json::json!([]), "{json:#}");

    // The request body of a real `foveal ask`.
    let ask = run_to_end(command(
        d,
        &server,
        &[
            "ask",
            "--focus",
            "example-login",
            "What is next for the login?",
        ],
    ))
    .await;
    assert!(ask.status.success(), "{}", stderr(&ask));
    assert!(stdout(&ask).contains("Asked."), "{}", stdout(&ask));

    // A cycle of `foveal run` (a line on stdin, answered, then the end).
    let run = command(d, &server, &["run", "--focus", "example-login"]);
    let ran = run_with_input(run, b"What is next for the login?\n").await;
    assert!(ran.status.success(), "{}", stderr(&ran));
    assert!(stdout(&ran).contains("Ran."), "{}", stdout(&ran));

    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one request for ask, one for run");
    for (request, by) in requests.iter().zip(["ask", "run"]) {
        let body = request.json();
        assert!(
            body["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "agenda")),
            "{by}: the agenda tool is not offered"
        );
        let sent = contents(&body);
        for (skill, _, line) in SECTIONS {
            assert!(
                sent.contains(line),
                "{by}: the {skill} section is not in the request:\n{sent}"
            );
        }
    }
}
