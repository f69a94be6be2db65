//! Edits made outside that undo the host's own writes, through the real
//! binary: an editor's stale buffer saved over a headline the agent just
//! added is named in the next turn's activity lines, so the agent can add
//! it again; an outside edit that keeps it names nothing.

use std::path::Path;
use std::time::Duration;

use crate::live::{
    command, run_to_end, start_host, stderr, stop_host, text_reply, tool_reply, workspace,
};
use crate::server::Server;
use crate::support::wait_for;

/// The memex generation of the host running in `dir`.
fn generation(dir: &Path, server: &Server) -> Option<u64> {
    let output = command(dir, server, &["status", "--json"])
        .output()
        .unwrap();
    serde_json::from_slice::<serde_json::Value>(&output.stdout).ok()?["memex_generation"].as_u64()
}

/// Saves `text` over `path` from outside, then waits until the host has
/// read it and looked at the memex again (every 250 ms).
fn save_outside(dir: &Path, server: &Server, path: &Path, text: &str) {
    let before = generation(dir, server);
    std::fs::write(path, text).unwrap();
    assert!(wait_for(Duration::from_secs(10), || {
        generation(dir, server) > before
    }));
    std::thread::sleep(Duration::from_millis(600));
}

/// The lines of a request's messages about memex files.
fn memex_lines(body: &str) -> Vec<String> {
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .flat_map(str::lines)
        .filter(|l| l.contains("memex file "))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headline_the_agent_added_and_a_stale_buffer_saved_over_is_named_in_the_next_turn() {
    let dir = workspace();
    let server = Server::start(vec![
        tool_reply(
            "add_headline",
            r#"{"parent_id": "launch", "title": "Order cabinets"}"#,
        ),
        text_reply("Added."),
        text_reply("Seen."),
        tool_reply(
            "add_headline",
            r#"{"parent_id": "launch", "title": "Book the plumber"}"#,
        ),
        text_reply("Added."),
        text_reply("Seen."),
    ])
    .await;
    let mut host = start_host(dir.path(), &server, &["--no-repl"]);
    let path = dir.path().join("memex/work.org");
    // What an editor opened before the agent wrote.
    let stale = std::fs::read_to_string(&path).unwrap();
    let send = |text: &'static str| run_to_end(command(dir.path(), &server, &["send", text]));

    let added = send("add a headline").await;
    assert!(added.status.success(), "{}", stderr(&added));
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("** Order cabinets\n")
    );
    // The editor saves its buffer: the headline is gone.
    save_outside(dir.path(), &server, &path, &stale);
    let told = send("anything new?").await;
    assert!(told.status.success(), "{}", stderr(&told));

    // The control: the agent adds another headline, and an edit made
    // outside keeps it.
    let added = send("add another").await;
    assert!(added.status.success(), "{}", stderr(&added));
    let mut text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("** Book the plumber\n"), "{text}");
    text.push_str("* Paint the hallway\n");
    save_outside(dir.path(), &server, &path, &text);
    let quiet = send("and now?").await;
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    stop_host(dir.path(), &server, &mut host).await;

    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    // The turn after the agent's write does not take it for an edit.
    assert_eq!(
        memex_lines(&requests[1].body),
        Vec::<String>::new(),
        "{}",
        requests[1].body
    );
    let notice = memex_lines(&requests[2].body);
    assert_eq!(notice.len(), 1, "{}", requests[2].body);
    assert!(
        notice[0].contains("memex file work.org was edited outside: ")
            && notice[0].contains("the headline \"Order cabinets\" you added at ")
            && notice[0].ends_with(" is gone"),
        "{notice:?}"
    );
    // The control's line counts the new headline and names nothing.
    let last = memex_lines(&requests[5].body);
    assert_eq!(last.len(), 2, "{}", requests[5].body);
    assert_eq!(last[0], notice[0]);
    assert!(
        last[1].ends_with("memex file work.org was edited outside: 1 headline added"),
        "{last:?}"
    );
    for request in &requests {
        assert!(!request.body.contains("CANARY"), "{}", request.body);
    }
}
