//! The state of `foveal tui` and how keys and the host's events change
//! it. No I/O here: [`super`] connects it to the terminal and the socket,
//! [`super::view`] draws it.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use foveal_agent::control::{PROTOCOL, Reply};

/// One entry of the conversation pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// What the user sent.
    User(String),
    /// The agent's reply, as it streams.
    Reply(String),
    /// A tool call: folded to one line unless expanded.
    Tool {
        /// The tool.
        name: String,
        /// Whether it succeeded.
        ok: bool,
        /// What it returned.
        result: String,
    },
    /// A note from the UI (connection, errors, the end of a turn).
    Note(String),
}

/// A skill in the sidebar.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Skill {
    /// Its name.
    pub name: String,
    /// Its version.
    #[serde(default)]
    pub version: Option<String>,
    /// loaded, refused: …, quarantined, …
    pub status: String,
}

impl Skill {
    /// Refused or quarantined: shown highlighted.
    pub fn is_faulty(&self) -> bool {
        let status = self.status.to_ascii_lowercase();
        status.contains("refused") || status.contains("quarantined")
    }
}

/// The connection to the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// Not yet connected.
    Connecting,
    /// Connected, after the handshake.
    Connected,
    /// The host went away; the client retries.
    Lost(String),
}

/// A scrollable dialog (`/context`, `/skills`, `/window`, `/help`): typed
/// characters filter its lines, Backspace edits the filter, Up/Down and
/// PageUp/PageDown scroll, Esc closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dialog {
    /// Its title.
    pub title: String,
    /// Its text, line by line.
    pub lines: Vec<String>,
    /// Lines not containing this (case-insensitively) are hidden.
    pub filter: String,
    /// The first line shown (of the filtered lines).
    pub scroll: usize,
}

impl Dialog {
    /// A dialog showing `text`.
    pub fn new(title: impl Into<String>, text: &str) -> Self {
        Self {
            title: title.into(),
            lines: text.lines().map(str::to_owned).collect(),
            filter: String::new(),
            scroll: 0,
        }
    }

    /// The lines the filter keeps.
    pub fn visible(&self) -> Vec<&str> {
        let filter = self.filter.to_lowercase();
        self.lines
            .iter()
            .filter(|l| filter.is_empty() || l.to_lowercase().contains(&filter))
            .map(String::as_str)
            .collect()
    }
}

/// What the UI asks of the host after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Nothing.
    None,
    /// Send a message (with a focus, for `/focus ID`).
    Send {
        /// The text (empty for `/focus` alone).
        text: String,
        /// The focus to set first.
        focus: Option<String>,
    },
    /// Cancel the turn in flight.
    Cancel,
    /// Fetch the explained context.
    Context,
    /// Fetch the context window's items.
    Window,
    /// Leave the UI (the host keeps running).
    Quit,
}

/// The keys and commands, for `/help`.
pub const HELP: &str = "Enter        send the line to the agent
Esc          cancel the cycle in flight (closes a dialog first)
Up/Down      input history
PgUp/PgDn    scroll the conversation
Ctrl-T       fold/unfold the tool calls
Ctrl-C       quit the UI (the host keeps running)
/focus ID    put object ID in foveal focus (/focus alone clears it)
/skills      the loaded skills, with version and status
/context     the assembled context, with the reason for each object
/window      the items of the context window
/help        this text
In a dialog: type to filter, Backspace to edit the filter, Up/Down/PgUp/PgDn to scroll, Esc to close.";

/// The whole state of the UI.
#[derive(Debug, Clone, Default)]
pub struct App {
    /// The host's version, from the handshake (never assumed).
    pub host_version: Option<String>,
    /// Why the host and the client cannot talk, when they cannot.
    pub mismatch: Option<String>,
    /// The provider, as the host describes it.
    pub provider: String,
    /// The model, when the configuration names one.
    pub model: Option<String>,
    /// The host's session.
    pub session: String,
    /// The session asked for with `--session`.
    pub wanted_session: Option<String>,
    /// The last turn's time.
    pub last_cycle_ms: Option<f64>,
    /// The context gauge, 0–100; `None` without token economics.
    pub gauge: Option<u8>,
    /// The focus: id and title.
    pub focus: Option<(String, Option<String>)>,
    /// The skills.
    pub skills: Vec<Skill>,
    /// The registry generation.
    pub registry_generation: u64,
    /// The memex generation.
    pub memex_generation: u64,
    /// The conversation.
    pub items: Vec<Item>,
    /// Tool calls shown whole.
    pub tools_expanded: bool,
    /// Lines scrolled up from the bottom of the conversation.
    pub scroll_back: u16,
    /// The input line.
    pub input: String,
    /// Lines sent before, oldest first.
    pub history: Vec<String>,
    /// Where Up/Down is in the history.
    pub history_pos: Option<usize>,
    /// The connection.
    pub link: Option<Link>,
    /// A turn this client sent is running.
    pub busy: bool,
    /// A dialog over the panes.
    pub dialog: Option<Dialog>,
}

impl App {
    /// A new UI, before the handshake.
    pub fn new(wanted_session: Option<String>) -> Self {
        Self {
            wanted_session,
            link: Some(Link::Connecting),
            ..Self::default()
        }
    }

    /// A note in the conversation.
    pub fn note(&mut self, text: impl Into<String>) {
        self.items.push(Item::Note(text.into()));
    }

    /// The host answered `hello`.
    pub fn hello(
        &mut self,
        protocol: u32,
        host: &str,
        model: Option<String>,
        status: &serde_json::Value,
    ) {
        self.host_version = Some(host.to_owned());
        self.model = model;
        self.mismatch = (protocol != PROTOCOL).then(|| {
            format!(
                "protocol mismatch: this foveal tui {} speaks control protocol {PROTOCOL}, the host (foveal {host}) speaks {protocol}; run a tui and a host of the same version",
                env!("CARGO_PKG_VERSION")
            )
        });
        if env!("CARGO_PKG_VERSION") != host && self.mismatch.is_none() {
            self.note(format!(
                "note: the host is foveal {host}, this client foveal {}; they speak the same protocol ({PROTOCOL})",
                env!("CARGO_PKG_VERSION")
            ));
        }
        self.link = Some(Link::Connected);
        self.status(status);
        if let Some(wanted) = &self.wanted_session
            && *wanted != self.session
        {
            let note = format!(
                "the running host serves session `{}`, not `{wanted}`: stop it (`foveal stop`) and run `foveal tui --session {wanted}` to start one for it",
                self.session
            );
            self.note(note);
        }
    }

    /// The whole status object (`hello`, or a resync).
    pub fn status(&mut self, status: &serde_json::Value) {
        let text = |key: &str| status.get(key).and_then(|v| v.as_str()).map(str::to_owned);
        self.provider = text("provider").unwrap_or_default();
        self.session = text("session").unwrap_or_default();
        self.gauge = status
            .get("usage_percent")
            .and_then(serde_json::Value::as_u64)
            .map(|p| p.min(100) as u8);
        self.focus = text("focus").map(|id| (id, text("focus_title")));
        self.registry_generation = status["registry_generation"].as_u64().unwrap_or(0);
        self.memex_generation = status["memex_generation"].as_u64().unwrap_or(0);
        if let Ok(skills) = serde_json::from_value(status["skills"].clone()) {
            self.skills = skills;
        }
        if let Some(ms) = status["last_cycle"]["phases"].as_object() {
            let total: f64 = ms.values().filter_map(serde_json::Value::as_f64).sum();
            self.last_cycle_ms = Some(total);
        }
    }

    /// A line from the host: a pushed event or part of a turn's answer.
    pub fn apply(&mut self, reply: Reply) {
        match reply {
            Reply::Text { text } => match self.items.last_mut() {
                Some(Item::Reply(reply)) => reply.push_str(&text),
                _ => self.items.push(Item::Reply(text)),
            },
            Reply::Tool { name, ok, result } => {
                self.items.push(Item::Tool { name, ok, result });
            }
            // A cancelled turn says so in its text (`[cancelled]`); a
            // failed one in its text too (`[error: …]`).
            Reply::Done { .. } => self.busy = false,
            Reply::Error { message } | Reply::WindowError { message } => {
                self.busy = false;
                self.note(format!("error: {message}"));
            }
            Reply::Status { status } => self.status(&status),
            Reply::Hello {
                protocol,
                host,
                model,
                status,
            } => self.hello(protocol, &host, model, &status),
            Reply::Skills { generation, skills } => {
                self.registry_generation = generation;
                if let Ok(skills) = serde_json::from_value(skills) {
                    self.skills = skills;
                }
            }
            Reply::Memex { generation } => self.memex_generation = generation,
            Reply::CycleFinished {
                ms, usage_percent, ..
            } => {
                self.last_cycle_ms = Some(ms);
                self.gauge = usage_percent;
            }
            Reply::Focus { focus, title } => self.focus = focus.map(|f| (f, title)),
            Reply::Context { text, .. } => {
                self.dialog = Some(Dialog::new("Context (explained)", &text))
            }
            Reply::Window { result, .. } => {
                let text = serde_json::to_string_pretty(&result).unwrap_or_default();
                self.dialog = Some(Dialog::new("Context window", &text));
            }
            Reply::OtherSession { session } => {
                self.note(format!("the host serves session `{session}`"));
            }
            Reply::Stopping => self.note("the host is stopping"),
            // The TUI asks no command of the host, and expects no
            // configuration of it.
            Reply::Subscribed
            | Reply::CycleStarted { .. }
            | Reply::Cancelled { .. }
            | Reply::Printed(_)
            | Reply::OtherConfig { .. } => {}
        }
    }

    /// The skills, as the `/skills` dialog shows them.
    pub fn skills_text(&self) -> String {
        let mut text = format!("registry generation {}\n", self.registry_generation);
        for skill in &self.skills {
            text.push_str(&format!(
                "{}{} {} — {}\n",
                if skill.is_faulty() { "! " } else { "" },
                skill.name,
                skill.version.as_deref().unwrap_or("-"),
                skill.status
            ));
        }
        text
    }

    /// A key: what it changes here, and what the host is to do.
    pub fn key(&mut self, key: KeyEvent) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(key.code, KeyCode::Char('c' | 'd')) {
            return Action::Quit;
        }
        if key.code == KeyCode::Esc && self.dialog.is_some() {
            self.dialog = None;
            return Action::None;
        }
        if let Some(dialog) = &mut self.dialog {
            match key.code {
                KeyCode::Backspace => {
                    dialog.filter.pop();
                    dialog.scroll = 0;
                }
                KeyCode::Up => dialog.scroll = dialog.scroll.saturating_sub(1),
                KeyCode::Down => dialog.scroll = dialog.scroll.saturating_add(1),
                KeyCode::PageUp => dialog.scroll = dialog.scroll.saturating_sub(10),
                KeyCode::PageDown => dialog.scroll = dialog.scroll.saturating_add(10),
                KeyCode::Home => dialog.scroll = 0,
                KeyCode::Char(c) if !ctrl => {
                    dialog.filter.push(c);
                    dialog.scroll = 0;
                }
                _ => {}
            }
            let shown = dialog.visible().len();
            dialog.scroll = dialog.scroll.min(shown.saturating_sub(1));
            return Action::None;
        }
        match key.code {
            KeyCode::Char('t') if ctrl => self.tools_expanded = !self.tools_expanded,
            KeyCode::Char('u') if ctrl => self.input.clear(),
            KeyCode::Char(c) if !ctrl => {
                self.input.push(c);
                self.history_pos = None;
            }
            KeyCode::Backspace => {
                self.input.pop();
            }
            KeyCode::Esc => {
                return if self.busy {
                    Action::Cancel
                } else {
                    Action::None
                };
            }
            KeyCode::Up if !self.history.is_empty() => {
                let pos = self
                    .history_pos
                    .map_or(self.history.len() - 1, |p| p.saturating_sub(1));
                self.history_pos = Some(pos);
                self.input.clone_from(&self.history[pos]);
            }
            KeyCode::Down => match self.history_pos {
                Some(p) if p + 1 < self.history.len() => {
                    self.history_pos = Some(p + 1);
                    self.input.clone_from(&self.history[p + 1]);
                }
                Some(_) => {
                    self.history_pos = None;
                    self.input.clear();
                }
                None => {}
            },
            KeyCode::PageUp => self.scroll_back = self.scroll_back.saturating_add(10),
            KeyCode::PageDown => self.scroll_back = self.scroll_back.saturating_sub(10),
            KeyCode::Enter => return self.enter(),
            _ => {}
        }
        Action::None
    }

    /// Enter: a command, or a message for the agent.
    fn enter(&mut self) -> Action {
        let line = std::mem::take(&mut self.input);
        self.history_pos = None;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            return Action::None;
        }
        if self.history.last().map(String::as_str) != Some(trimmed) {
            self.history.push(trimmed.to_owned());
        }
        let (command, rest) = trimmed.split_once(' ').unwrap_or((trimmed, ""));
        let action = match command {
            "/help" => {
                self.dialog = Some(Dialog::new("Help", HELP));
                Action::None
            }
            "/skills" => {
                self.dialog = Some(Dialog::new("Skills", &self.skills_text()));
                Action::None
            }
            "/context" => Action::Context,
            "/window" => Action::Window,
            "/quit" | "/exit" => Action::Quit,
            "/focus" => Action::Send {
                text: String::new(),
                focus: Some(rest.trim().to_owned()),
            },
            c if c.starts_with('/') && !c[1..].contains('/') => {
                self.note(format!("unknown command {c}; /help lists them"));
                Action::None
            }
            _ => Action::Send {
                text: trimmed.to_owned(),
                focus: None,
            },
        };
        if let Action::Send { text, focus } = &action {
            if self.busy {
                self.note("a turn is running: wait for it, or Esc to cancel it");
                return Action::None;
            }
            if self.link != Some(Link::Connected) {
                self.note("not connected to a host: the message was not sent");
                return Action::None;
            }
            self.items.push(Item::User(match focus {
                Some(id) if id.is_empty() => "/focus (cleared)".to_owned(),
                Some(id) => format!("/focus {id}"),
                None => text.clone(),
            }));
            self.busy = true;
            self.scroll_back = 0;
        }
        action
    }
}
