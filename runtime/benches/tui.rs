//! `foveal tui`'s keypress-to-redraw path: a key handled by the UI's state
//! and a whole frame drawn (conversation, sidebar, input line, status
//! bar), into ratatui's `TestBackend` at 120×40 — everything the UI does
//! for a key except writing the changed cells to the terminal.
//!
//! - `tui/key_and_redraw_short`: 10 exchanges in the conversation.
//! - `tui/key_and_redraw_long`: 500 exchanges (each with a folded tool
//!   call) and 20 skills: the conversation's wrapping dominates.
//! - `tui/key_and_redraw_dialog`: a key typed into `/context`'s filter over
//!   a 2,000-line explained context.
//!
//! Target: ≤ 16 ms (one frame at 60 Hz).
//!
//! ```sh
//! cargo bench -p foveal --bench tui
//! ```

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use foveal::agent::control::{PROTOCOL, Reply};
use foveal::tui::app::{App, Dialog};
use foveal::tui::view;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn app(exchanges: usize, skills: usize) -> App {
    let mut app = App::new(None);
    let skills: Vec<serde_json::Value> = (0..skills)
        .map(|i| serde_json::json!({"name": format!("skill-{i}"), "version": "1.0.0", "status": if i == 3 { "quarantined (3 panics)" } else { "loaded" }}))
        .collect();
    app.apply(Reply::Hello {
        protocol: PROTOCOL,
        host: "0.2.0".to_owned(),
        model: Some("scripted".to_owned()),
        status: serde_json::json!({"provider": "openai", "session": "bench", "usage_percent": 42,
            "focus": "t-1", "focus_title": "A task", "registry_generation": 3, "memex_generation": 9,
            "skills": skills}),
    });
    for i in 0..exchanges {
        app.items
            .push(foveal::tui::app::Item::User(format!("message number {i}")));
        app.apply(Reply::Tool {
            name: "query_memex".to_owned(),
            ok: true,
            result: "3 objects".to_owned(),
        });
        app.apply(Reply::Text {
            text: "A reply of a few lines, long enough to wrap on a narrow pane: ".repeat(3)
                + "\nand a second line.",
        });
    }
    app
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("tui");
    let key = KeyEvent::new(KeyCode::Char('x'), KeyModifiers::NONE);
    let backspace = KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE);
    for (name, exchanges, skills) in [("short", 10, 8), ("long", 500, 20)] {
        let mut app = app(exchanges, skills);
        let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
        group.bench_function(format!("key_and_redraw_{name}"), |b| {
            b.iter(|| {
                app.key(black_box(key));
                app.key(black_box(backspace));
                terminal.draw(|frame| view::draw(frame, &app)).unwrap();
            });
        });
    }
    let mut app = app(10, 8);
    let text: String = (0..2000)
        .map(|i| format!("- obj-{i}: semantic 0.{i:03}\n"))
        .collect();
    app.dialog = Some(Dialog::new("Context (explained)", &text));
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    group.bench_function("key_and_redraw_dialog", |b| {
        b.iter(|| {
            app.key(black_box(KeyEvent::new(
                KeyCode::Char('1'),
                KeyModifiers::NONE,
            )));
            terminal.draw(|frame| view::draw(frame, &app)).unwrap();
            app.key(black_box(backspace));
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
