//! Drawing the [`App`]: the conversation, the input line, the sidebar
//! (context gauge, focus, skills, generations) and the status bar, and a
//! dialog over them.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::app::{App, Item, Link};

/// The sidebar's width.
const SIDEBAR: u16 = 34;

/// Draws the whole screen.
pub fn draw(frame: &mut Frame<'_>, app: &App) {
    let [main, input, status] = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let sidebar_width = if main.width >= SIDEBAR * 2 {
        SIDEBAR
    } else {
        0
    };
    let [conversation, sidebar] =
        Layout::horizontal([Constraint::Min(10), Constraint::Length(sidebar_width)]).areas(main);
    draw_conversation(frame, app, conversation);
    if sidebar_width > 0 {
        draw_sidebar(frame, app, sidebar);
    }
    draw_input(frame, app, input);
    draw_status(frame, app, status);
    if let Some(dialog) = &app.dialog {
        draw_dialog(frame, dialog, main);
    }
}

/// The gauge's text: `Context 7%`, or `Context –` without token economics.
pub fn gauge_label(gauge: Option<u8>) -> String {
    match gauge {
        Some(p) => format!("Context {p}%"),
        None => "Context –".to_owned(),
    }
}

/// One item's rows, before wrapping.
fn item_rows(item: &Item, tools_expanded: bool) -> Vec<(String, Style)> {
    match item {
        Item::User(line) => vec![(
            format!("> {line}"),
            Style::new().add_modifier(Modifier::BOLD),
        )],
        Item::Reply(reply) => reply
            .split('\n')
            .map(|l| (l.to_owned(), Style::new()))
            .collect(),
        Item::Tool { name, ok, result } => {
            let mark = if tools_expanded { "▾" } else { "▸" };
            let state = if *ok { "ok" } else { "failed" };
            let mut rows = vec![(
                format!("{mark} tool {name}: {state}"),
                Style::new().fg(if *ok { Color::Cyan } else { Color::Red }),
            )];
            if tools_expanded {
                rows.extend(
                    result
                        .lines()
                        .map(|l| (format!("  {l}"), Style::new().fg(Color::DarkGray))),
                );
            }
            rows
        }
        Item::Note(note) => vec![(
            note.clone(),
            Style::new()
                .fg(Color::Yellow)
                .add_modifier(Modifier::ITALIC),
        )],
    }
}

/// The last `needed` lines of the conversation (fewer when it is
/// shorter), each cut to `width` columns. Only the items that reach into
/// them are wrapped: a long conversation costs no more per frame than a
/// short one.
pub fn conversation_tail(app: &App, width: u16, needed: usize) -> Vec<Line<'static>> {
    let width = usize::from(width.max(1));
    let mut tail: Vec<Line<'static>> = Vec::new();
    for item in app.items.iter().rev() {
        let mut lines = Vec::new();
        for (row, style) in item_rows(item, app.tools_expanded) {
            let chars: Vec<char> = row.chars().collect();
            if chars.is_empty() {
                lines.push(Line::raw(""));
            }
            for chunk in chars.chunks(width) {
                lines.push(Line::styled(chunk.iter().collect::<String>(), style));
            }
        }
        lines.append(&mut tail);
        tail = lines;
        if tail.len() >= needed {
            break;
        }
    }
    let extra = tail.len().saturating_sub(needed);
    tail.split_off(extra)
}

fn draw_conversation(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let block = Block::new().borders(Borders::ALL).title(" Conversation ");
    let inner = block.inner(area);
    let height = usize::from(inner.height);
    // The bottom, less what was scrolled back.
    let lines = conversation_tail(app, inner.width, height + usize::from(app.scroll_back));
    let shown: Vec<Line<'static>> = lines.into_iter().take(height).collect();
    frame.render_widget(Paragraph::new(shown).block(block), area);
}

fn draw_sidebar(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let width = area.width.saturating_sub(2) as usize;
    let mut lines = vec![Line::styled(
        gauge_label(app.gauge),
        Style::new().add_modifier(Modifier::BOLD),
    )];
    let filled = app
        .gauge
        .map_or(0, |p| (usize::from(p) * width).div_ceil(100).min(width));
    let colour = match app.gauge {
        Some(p) if p >= 90 => Color::Red,
        Some(p) if p >= 70 => Color::Yellow,
        _ => Color::Green,
    };
    lines.push(Line::from(vec![
        Span::styled("█".repeat(filled), Style::new().fg(colour)),
        Span::styled("░".repeat(width - filled), Style::new().fg(Color::DarkGray)),
    ]));
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "Focus",
        Style::new().add_modifier(Modifier::BOLD),
    ));
    match &app.focus {
        Some((id, title)) => {
            lines.push(Line::raw(
                title.clone().unwrap_or_else(|| "(untitled)".into()),
            ));
            lines.push(Line::styled(id.clone(), Style::new().fg(Color::DarkGray)));
        }
        None => lines.push(Line::raw("–")),
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        format!("Skills ({})", app.skills.len()),
        Style::new().add_modifier(Modifier::BOLD),
    ));
    for skill in &app.skills {
        let version = skill.version.as_deref().unwrap_or("-");
        if skill.is_faulty() {
            lines.push(Line::styled(
                format!("! {} {version} {}", skill.name, skill.status),
                Style::new()
                    .fg(Color::Red)
                    .add_modifier(Modifier::BOLD | Modifier::REVERSED),
            ));
        } else {
            lines.push(Line::raw(format!(
                "{} {version} {}",
                skill.name, skill.status
            )));
        }
    }
    lines.push(Line::raw(""));
    lines.push(Line::raw(format!(
        "registry gen {}",
        app.registry_generation
    )));
    lines.push(Line::raw(format!("memex gen {}", app.memex_generation)));
    let block = Block::new().borders(Borders::ALL).title(" Host ");
    frame.render_widget(
        Paragraph::new(lines).block(block).wrap(Wrap { trim: true }),
        area,
    );
}

fn draw_input(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let title = if app.busy {
        " Message — a turn is running (Esc cancels) "
    } else {
        " Message (Enter sends, /help) "
    };
    let block = Block::new().borders(Borders::ALL).title(title);
    let inner = block.inner(area);
    // The end of a long line stays in view.
    let chars = app.input.chars().count();
    let room = usize::from(inner.width.saturating_sub(1));
    let shown: String = app.input.chars().skip(chars.saturating_sub(room)).collect();
    let cursor_x = inner.x + shown.chars().count() as u16;
    frame.render_widget(Paragraph::new(shown).block(block), area);
    if app.dialog.is_none() {
        frame.set_cursor_position((cursor_x, inner.y));
    }
}

fn draw_status(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let host = app
        .host_version
        .as_deref()
        .map_or_else(|| "foveal host ?".to_owned(), |v| format!("foveal {v}"));
    // First, where it cannot be cut off.
    let link = match &app.link {
        Some(Link::Connected) | None => String::new(),
        Some(Link::Connecting) => "connecting… │ ".to_owned(),
        Some(Link::Lost(why)) => format!("DISCONNECTED: {why} │ "),
    };
    let text = match &app.mismatch {
        Some(mismatch) => mismatch.clone(),
        None => format!(
            "{link}{host} │ {} │ model {} │ session {} │ last cycle {}",
            if app.provider.is_empty() {
                "-"
            } else {
                &app.provider
            },
            app.model.as_deref().unwrap_or("-"),
            if app.session.is_empty() {
                "-"
            } else {
                &app.session
            },
            app.last_cycle_ms
                .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.0} ms")),
        ),
    };
    let style = if app.mismatch.is_some() || matches!(app.link, Some(Link::Lost(_))) {
        Style::new().fg(Color::White).bg(Color::Red)
    } else {
        Style::new().add_modifier(Modifier::REVERSED)
    };
    frame.render_widget(Paragraph::new(text).style(style), area);
}

fn draw_dialog(frame: &mut Frame<'_>, dialog: &super::app::Dialog, area: Rect) {
    let area = area.inner(ratatui::layout::Margin {
        horizontal: area.width / 12,
        vertical: area.height / 10,
    });
    frame.render_widget(Clear, area);
    let visible = dialog.visible();
    let title = format!(
        " {} — {} of {} lines — filter: {}▏ (Esc closes) ",
        dialog.title,
        visible.len(),
        dialog.lines.len(),
        dialog.filter
    );
    let block = Block::new().borders(Borders::ALL).title(title);
    let lines: Vec<Line<'_>> = visible
        .iter()
        .skip(dialog.scroll)
        .map(|l| Line::raw(*l))
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
