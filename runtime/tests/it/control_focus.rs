//! The control socket's `focus` request on the real host: the focus by
//! file and line (the headline at or above it, with or without `:ID:`),
//! a private headline refused exactly as a missing one, and the objects
//! `context` answers with their places.

use std::io::{BufRead as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::Path;

use serde_json::{Value, json};

use crate::live::{command, run_to_end, start_host, stderr, wait_exit, workspace};
use crate::server::Server;

const NOTES: &str = "* Ideas
Plain notes.
** Draft a plan
No id here.
";

/// One request on a connection of its own; every line of the answer.
fn ask(socket: &Path, request: &Value) -> Vec<Value> {
    let mut stream = UnixStream::connect(socket).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    writeln!(stream, "{request}").unwrap();
    std::io::BufReader::new(stream)
        .lines()
        .map(|line| serde_json::from_str(&line.unwrap()).unwrap())
        .collect()
}

async fn status(dir: &Path, server: &Server) -> Value {
    let output = run_to_end(command(dir, server, &["status", "--json"])).await;
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn focus_by_file_and_line_takes_the_headline_above_and_refuses_a_private_one_as_a_missing_one()
 {
    let dir = workspace();
    std::fs::write(dir.path().join("memex/notes.org"), NOTES).unwrap();
    let server = Server::start(vec![]).await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    let socket = dir.path().join("run/control.sock");
    let memex = dir.path().join("memex").canonicalize().unwrap();
    let work = memex.join("work.org");

    // The memex's roots are in the status: an editor follows the focus
    // in their files only.
    let roots = status(dir.path(), &server).await["memex_roots"].clone();
    assert_eq!(roots, json!([memex]));

    // A line in the body of `* TODO Write docs` (line 7, `:ID: docs`).
    let answer = ask(&socket, &json!({"cmd": "focus", "file": work, "line": 10}));
    assert_eq!(
        answer,
        [json!({"event": "focus", "focus": "docs", "title": "Write docs"})]
    );
    assert_eq!(status(dir.path(), &server).await["focus"], "docs");

    // A headline without `:ID:`: its derived id, by a path through a link.
    std::os::unix::fs::symlink(&memex, dir.path().join("linked")).unwrap();
    let linked = dir.path().join("linked/notes.org");
    let answer = ask(&socket, &json!({"cmd": "focus", "file": linked, "line": 4}));
    let id = answer[0]["focus"].as_str().unwrap().to_owned();
    assert!(id.starts_with("org-"), "{answer:?}");
    assert_eq!(answer[0]["title"], "Draft a plan");
    let now = status(dir.path(), &server).await;
    assert_eq!(now["focus"], id);
    assert_eq!(now["focus_title"], "Draft a plan");

    // The private headline (`* Health :project:@personal:`, line 11) and
    // its body, a line above any headline, a file outside the memex: one
    // answer, but for the position asked; the focus stays.
    let refusal = |file: &Path, line: u32| {
        let answer = ask(
            &socket,
            &json!({"cmd": "focus", "file": file, "line": line}),
        );
        assert_eq!(answer.len(), 1, "{answer:?}");
        assert_eq!(answer[0]["event"], "error", "{answer:?}");
        answer[0]["message"]
            .as_str()
            .unwrap()
            .replace(&file.display().to_string(), "FILE")
            .replace(&format!(":{line} "), ":LINE ")
    };
    let missing = refusal(&work, 1);
    assert_eq!(
        missing,
        "focus not changed: no visible object at FILE:LINE (the memex headline at or above that line)"
    );
    assert_eq!(refusal(&work, 11), missing);
    assert_eq!(refusal(&work, 15), missing);
    assert_eq!(refusal(&dir.path().join("elsewhere.org"), 3), missing);
    // By id, a private object is refused as an unknown id is.
    let by_id = |id: &str| ask(&socket, &json!({"cmd": "focus", "id": id}));
    assert_eq!(by_id("health"), by_id("no-such-id"));
    assert_eq!(status(dir.path(), &server).await["focus"], id);

    // `context` names the objects it shows, each with its file and
    // headline line, never the private one.
    let answer = ask(&socket, &json!({"cmd": "context", "focus": "docs"}));
    assert_eq!(answer[0]["event"], "context", "{answer:?}");
    let objects = answer[0]["objects"].as_array().unwrap();
    let docs = objects.iter().find(|o| o["id"] == "docs").unwrap();
    assert_eq!(docs["file"], json!(work));
    assert_eq!(docs["line"], 7);
    assert_eq!(docs["title"], "Write docs");
    assert!(
        objects.iter().all(|o| o["id"] != "health"),
        "a private object was listed: {objects:?}"
    );
    assert!(!answer[0].to_string().contains("CANARY"));

    // No id and no position clears the focus.
    let answer = ask(&socket, &json!({"cmd": "focus"}));
    assert_eq!(answer, [json!({"event": "focus"})]);
    assert!(status(dir.path(), &server).await["focus"].is_null());

    let stopped = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    assert!(wait_exit(&mut host).success());
    assert!(server.requests().is_empty(), "no model was asked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_expecting_another_configuration_is_answered_other_config_and_runs_nothing() {
    let dir = workspace();
    let server = Server::start(vec![crate::live::text_reply("Hello.")]).await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    let socket = dir.path().join("run/control.sock");
    let own = status(dir.path(), &server).await;
    let other = json!({
        "event": "other_config",
        "config_id": own["config_id"],
        "prompt_id": own["prompt_id"],
    });

    // Another configuration expected: nothing runs.
    let answer = ask(
        &socket,
        &json!({"cmd": "send", "text": "hi", "config_id": "0000000000000000"}),
    );
    assert_eq!(answer, std::slice::from_ref(&other));
    let answer = ask(
        &socket,
        &json!({"cmd": "command", "name": "context", "prompt_id": "0000000000000000"}),
    );
    assert_eq!(answer, [other]);
    assert!(server.requests().is_empty());
    assert_eq!(status(dir.path(), &server).await["cycles"], 0);

    // Its own: answered.
    let answer = ask(
        &socket,
        &json!({"cmd": "command", "name": "context", "prompt_id": own["prompt_id"]}),
    );
    assert_eq!(answer[0]["event"], "printed", "{answer:?}");
    let answer = ask(
        &socket,
        &json!({"cmd": "send", "text": "hi", "config_id": own["config_id"]}),
    );
    assert_eq!(answer.last().unwrap()["event"], "done", "{answer:?}");
    assert_eq!(server.requests().len(), 1);

    let stop = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(stop.status.success(), "{}", stderr(&stop));
    assert!(wait_exit(&mut host).success());
}
