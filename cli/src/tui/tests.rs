//! The view and the key handling, drawn into ratatui's `TestBackend`.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

use super::app::{Action, App, Item};
use super::view;
use foveal_agent::StopReason;
use foveal_agent::control::{PROTOCOL, Reply};

fn screen(app: &App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|frame| view::draw(frame, app)).unwrap();
    let buffer = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..height {
        let mut row = String::new();
        for x in 0..width {
            row.push_str(buffer[(x, y)].symbol());
        }
        out.push_str(row.trim_end());
        out.push('\n');
    }
    // The snapshots hold no version number.
    out.replace(env!("CARGO_PKG_VERSION"), "X.Y.Z")
}

fn status() -> serde_json::Value {
    json!({
        "provider": "openai-compatible http://127.0.0.1:9/v1",
        "session": "work",
        "usage_percent": 7,
        "focus": "t-1",
        "focus_title": "Write the report",
        "registry_generation": 3,
        "memex_generation": 5,
        "skills": [
            {"name": "awareness", "version": "0.2.0", "status": "loaded"},
            {"name": "counter", "version": "1.0.0", "status": "quarantined (3 panics)"},
        ],
    })
}

fn connected() -> App {
    let mut app = App::new(None);
    app.apply(Reply::Hello {
        protocol: PROTOCOL,
        host: env!("CARGO_PKG_VERSION").to_owned(),
        model: Some("scripted".to_owned()),
        status: status(),
    });
    app
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        assert_eq!(app.key(key(KeyCode::Char(c))), Action::None);
    }
}

#[test]
fn the_screen_shows_the_conversation_the_sidebar_and_the_status_bar() {
    let mut app = connected();
    typed(&mut app, "hello there");
    assert_eq!(
        app.key(key(KeyCode::Enter)),
        Action::Send {
            text: "hello there".to_owned(),
            focus: None
        }
    );
    for piece in ["Hel", "lo ", "back"] {
        app.apply(Reply::Text {
            text: piece.to_owned(),
        });
    }
    app.apply(Reply::Tool {
        name: "memex_search".to_owned(),
        ok: true,
        result: "3 objects\nt-1 Write the report".to_owned(),
    });
    app.apply(Reply::Done {
        stop: StopReason::Replied,
        error: None,
        cycles: 2,
        report: None,
    });
    app.apply(Reply::CycleFinished {
        stop: StopReason::Replied,
        cycles: 2,
        ms: 41.6,
        usage_percent: Some(12),
    });
    let shown = screen(&app, 120, 20);
    insta::assert_snapshot!(shown);
    assert!(shown.contains("Context 12%"), "{shown}");
    assert!(shown.contains("foveal X.Y.Z │"), "{shown}");
    assert!(shown.contains("last cycle 42 ms"), "{shown}");
}

#[test]
fn tool_calls_are_folded_until_ctrl_t() {
    let mut app = connected();
    app.apply(Reply::Tool {
        name: "read_object".to_owned(),
        ok: false,
        result: "unknown id x-9".to_owned(),
    });
    let folded = screen(&app, 90, 12);
    assert!(folded.contains("▸ tool read_object: failed"), "{folded}");
    assert!(!folded.contains("unknown id x-9"), "{folded}");
    app.key(ctrl('t'));
    let open = screen(&app, 90, 12);
    assert!(open.contains("▾ tool read_object: failed"), "{open}");
    assert!(open.contains("  unknown id x-9"), "{open}");
}

#[test]
fn the_gauge_reads_a_dash_without_token_economics_and_faulty_skills_stand_out() {
    let mut app = connected();
    app.apply(Reply::Status {
        status: json!({"session": "work", "skills": [
            {"name": "budget", "version": null, "status": "refused: wrong ABI"}
        ]}),
    });
    assert_eq!(app.gauge, None);
    let shown = screen(&app, 100, 16);
    assert!(shown.contains("Context –"), "{shown}");
    assert!(shown.contains("! budget - refused: wrong ABI"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn pushed_events_update_the_sidebar() {
    let mut app = connected();
    app.apply(Reply::Skills {
        generation: 4,
        skills: json!([{"name": "counter", "version": "2.0.0", "status": "loaded"}]),
    });
    app.apply(Reply::Memex { generation: 9 });
    app.apply(Reply::Focus {
        focus: Some("p-2".to_owned()),
        title: Some("Plan".to_owned()),
    });
    let shown = screen(&app, 100, 20);
    for expected in [
        "counter 2.0.0 loaded",
        "registry gen 4",
        "memex gen 9",
        "Plan",
        "p-2",
    ] {
        assert!(shown.contains(expected), "{expected} in\n{shown}");
    }
    assert!(!shown.contains("awareness"), "{shown}");
}

#[test]
fn a_protocol_mismatch_is_explained_in_the_status_bar() {
    let mut app = App::new(None);
    app.apply(Reply::Hello {
        protocol: PROTOCOL + 1,
        host: "9.9.9".to_owned(),
        model: None,
        status: status(),
    });
    let shown = screen(&app, 200, 10);
    assert!(
        shown.contains(&format!(
            "protocol mismatch: this foveal tui X.Y.Z speaks control protocol {PROTOCOL}, the host (foveal 9.9.9) speaks {}",
            PROTOCOL + 1
        )),
        "{shown}"
    );
}

#[test]
fn the_dialog_takes_the_keys_filter_and_backspace_and_esc_closes_it_before_cancelling() {
    let mut app = connected();
    typed(&mut app, "/context");
    assert_eq!(app.key(key(KeyCode::Enter)), Action::Context);
    app.apply(Reply::Context {
        text:
            "## Context Debug\n- Focus: t-1\n- Objects shown: 2\n- t-1: foveal\n- p-2: similar 0.81"
                .to_owned(),
        objects: Vec::new(),
    });
    typed(&mut app, "foveal");
    let dialog = app.dialog.as_ref().unwrap();
    assert_eq!(dialog.visible(), ["- t-1: foveal"]);
    assert!(app.input.is_empty(), "typing in a dialog filters it");
    for _ in 0.."foveal".len() {
        app.key(key(KeyCode::Backspace));
    }
    typed(&mut app, "sim");
    assert_eq!(
        app.dialog.as_ref().unwrap().visible(),
        ["- p-2: similar 0.81"]
    );
    insta::assert_snapshot!(screen(&app, 100, 20));
    app.busy = true;
    assert_eq!(app.key(key(KeyCode::Esc)), Action::None);
    assert!(app.dialog.is_none());
    assert_eq!(app.key(key(KeyCode::Esc)), Action::Cancel);
}

#[test]
fn up_and_down_walk_the_input_history() {
    let mut app = connected();
    for line in ["first", "second"] {
        typed(&mut app, line);
        app.key(key(KeyCode::Enter));
        app.apply(Reply::Done {
            stop: StopReason::Replied,
            error: None,
            cycles: 1,
            report: None,
        });
    }
    app.key(key(KeyCode::Up));
    assert_eq!(app.input, "second");
    app.key(key(KeyCode::Up));
    assert_eq!(app.input, "first");
    app.key(key(KeyCode::Up));
    assert_eq!(app.input, "first");
    app.key(key(KeyCode::Down));
    assert_eq!(app.input, "second");
    app.key(key(KeyCode::Down));
    assert_eq!(app.input, "");
}

#[test]
fn ctrl_c_quits_and_a_message_waits_for_the_turn_in_flight() {
    let mut app = connected();
    typed(&mut app, "one");
    assert!(matches!(app.key(key(KeyCode::Enter)), Action::Send { .. }));
    typed(&mut app, "two");
    assert_eq!(app.key(key(KeyCode::Enter)), Action::None);
    assert!(matches!(app.items.last(), Some(Item::Note(n)) if n.contains("a turn is running")));
    typed(&mut app, "/focus t-1");
    assert_eq!(app.key(ctrl('c')), Action::Quit);
}

#[test]
fn a_lost_host_is_shown() {
    let mut app = connected();
    app.link = Some(super::app::Link::Lost("no host at /tmp/x.sock".to_owned()));
    let shown = screen(&app, 160, 10);
    assert!(
        shown.contains("DISCONNECTED: no host at /tmp/x.sock"),
        "{shown}"
    );
}

#[test]
fn the_conversation_sticks_to_the_bottom_and_page_up_scrolls_back() {
    let mut app = connected();
    for i in 0..100 {
        app.items.push(Item::User(format!("line {i}")));
    }
    let shown = screen(&app, 100, 20);
    assert!(shown.contains("> line 99"), "{shown}");
    assert!(!shown.contains("> line 80 "), "{shown}");
    app.key(key(KeyCode::PageUp));
    let shown = screen(&app, 100, 20);
    assert!(shown.contains("> line 89"), "{shown}");
    assert!(!shown.contains("> line 99"), "{shown}");
    app.key(key(KeyCode::PageDown));
    assert!(screen(&app, 100, 20).contains("> line 99"));
}

/// What [`super::subscribe_once`] makes of a host that answers the
/// handshake with `message` as an error: its result, and whether it
/// reported a protocol mismatch.
async fn refused_handshake(message: &str) -> (Result<(), String>, bool) {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let mut line = serde_json::to_vec(&Reply::Error {
        message: message.to_owned(),
    })
    .unwrap();
    line.push(b'\n');
    let host = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut stream = tokio::io::BufReader::new(stream);
        // The client's `hello` and `subscribe`, read before the answer so
        // that closing the socket does not reset the connection.
        for _ in 0..2 {
            let mut request = String::new();
            stream.read_line(&mut request).await.unwrap();
        }
        stream.get_mut().write_all(&line).await.unwrap();
        stream.get_mut().shutdown().await.unwrap();
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let result = super::subscribe_once(&socket, &tx).await;
    host.await.unwrap();
    let mut mismatch = false;
    while let Ok(from) = rx.try_recv() {
        mismatch |= matches!(from, super::FromHost::Mismatch(_));
    }
    (result, mismatch)
}

#[tokio::test]
async fn only_a_host_that_does_not_know_hello_is_a_protocol_mismatch() {
    // A host stopping (`foveal stop`) refuses the reconnecting UI: the
    // connection is lost, for that reason, and the UI tries again.
    let (result, mismatch) = refused_handshake("the host is stopping").await;
    assert!(!mismatch, "a stopping host taken for an older one");
    assert_eq!(result, Err("the host is stopping".to_owned()));
    // The control: a host of protocol 0 does not know `hello`.
    let (result, mismatch) = refused_handshake(
        "bad request: unknown variant `hello`, expected one of `send`, `status`, `stop`",
    )
    .await;
    assert!(mismatch);
    assert_eq!(result, Err("the host refused the handshake".to_owned()));
}
