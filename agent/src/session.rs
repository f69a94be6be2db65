//! Sessions: the conversation history, persisted as JSON lines.
//!
//! A session named `NAME` lives in `<data dir>/sessions/NAME.jsonl`, one
//! [`Entry`] per line: what the user said, what the model answered (with
//! the tools it called), what each tool returned, and errors shown to the
//! user. Each message is appended as it happens (one `write` of a whole
//! line, `O_APPEND`), and the file is synced to disk at the end of every
//! cycle and at shutdown. The file is never rewritten in place: a line
//! that cannot be read (a crash in the middle of a write, a hand edit) is
//! skipped with a warning on load and left where it is.
//!
//! The file is created with permissions 0600: it holds what the user said.

use std::fs::{File, OpenOptions};
use std::io::{BufRead as _, BufReader, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use foveal_sdk::Role;
use serde::{Deserialize, Serialize};

pub use super::session_name::{DEFAULT_SESSION, valid_name};

/// Who wrote an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryRole {
    /// The user (or the event a cycle answered).
    User,
    /// The model.
    Assistant,
    /// A tool's result.
    Tool,
    /// An error the user was shown instead of a reply.
    Error,
}

/// A tool call the model made, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedCall {
    /// The call's id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its arguments, as the model wrote them.
    pub arguments: String,
}

/// One line of a session file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Milliseconds since the Unix epoch.
    pub at: u64,
    /// Who wrote it.
    pub role: EntryRole,
    /// The text. What came from the memex or a tool (tool results,
    /// errors) is kept here as it passed the privacy gate; what the user
    /// typed is kept as typed, for the user's eyes, and never sent again
    /// (see [`sent`](Self::sent)).
    pub content: String,
    /// A user entry's text as it was sent: after the privacy gate. The
    /// history replays this, never `content`: if a private file the
    /// message quoted later leaves the memex, the gated form still holds.
    /// A user entry without it (not sent, or written by an older foveal)
    /// is not replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent: Option<String>,
    /// A user entry sent exactly as typed: `content` is also its `sent`
    /// text, stored once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sent_as_typed: bool,
    /// The tools the model called (assistant entries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<RecordedCall>,
    /// The call a tool entry answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The tool a tool entry comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The cycle that wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycle: Option<u64>,
}

impl Entry {
    /// An entry of `role` saying `content`, now.
    pub fn new(role: EntryRole, content: impl Into<String>) -> Self {
        Self {
            at: now_ms(),
            role,
            content: content.into(),
            sent: None,
            sent_as_typed: false,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool: None,
            cycle: None,
        }
    }

    /// A user entry: `typed` as the user typed it, `sent` as it passed
    /// the privacy gate.
    pub fn user(typed: impl Into<String>, sent: impl Into<String>) -> Self {
        let mut entry = Self::new(EntryRole::User, typed);
        let sent = sent.into();
        if sent == entry.content {
            entry.sent_as_typed = true;
        } else {
            entry.sent = Some(sent);
        }
        entry
    }

    /// A user entry's text as it was sent (see [`sent`](Self::sent)).
    pub fn sent_text(&self) -> Option<&str> {
        if self.sent_as_typed {
            Some(&self.content)
        } else {
            self.sent.as_deref()
        }
    }

    /// The entry as one message of the prompt's conversation history, or
    /// none: errors are not replayed to the model, a user's message only as
    /// it was sent, and a tool result only with the id of its call. An
    /// assistant entry's tool calls and a tool entry's call id travel in
    /// the message's own fields, not as text.
    pub fn to_message(&self) -> Option<foveal_prompt::prompt::Message> {
        use foveal_prompt::prompt::{CallPart, Message, ToolCallRecord};
        Some(match self.role {
            EntryRole::User => Message::new(Role::USER, self.sent_text()?),
            EntryRole::Assistant => {
                let mut message = Message::new(Role::ASSISTANT, self.content.as_str());
                if !self.tool_calls.is_empty() {
                    message.call = Some(CallPart::Calls(
                        self.tool_calls
                            .iter()
                            .map(|c| ToolCallRecord {
                                id: c.id.clone(),
                                name: c.name.clone(),
                                arguments: c.arguments.clone(),
                            })
                            .collect(),
                    ));
                }
                message
            }
            EntryRole::Tool => {
                Message::tool_result(self.tool_call_id.as_deref()?, self.content.as_str())
            }
            EntryRole::Error => return None,
        })
    }
}

/// An entry's texts are cut to this many bytes when a session is read: a
/// session file, whatever it holds, never makes a prompt the host cannot
/// assemble.
pub const MAX_ENTRY_BYTES: usize = 1 << 20;

impl Entry {
    /// Cuts its texts to at most `max` bytes each (at a character
    /// boundary, with a note); whether anything was cut.
    fn cut(&mut self, max: usize) -> bool {
        let mut any = false;
        let mut cut = |text: &mut String| {
            if text.len() > max {
                let mut end = max;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text.truncate(end);
                text.push_str(" [cut when the session was read]");
                any = true;
            }
        };
        cut(&mut self.content);
        if let Some(sent) = &mut self.sent {
            cut(sent);
        }
        for call in &mut self.tool_calls {
            cut(&mut call.arguments);
        }
        any
    }
}

/// Why a session could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The name is not a plain file name.
    #[error(
        "invalid session name {0:?}: use letters, digits, `-`, `_` and `.` (not first), at most 64"
    )]
    InvalidName(String),
    /// The file could not be opened, read or written.
    #[error("session file {}: cannot {action}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// An open session: its history and its file.
#[derive(Debug)]
pub struct Session {
    name: String,
    path: PathBuf,
    file: File,
    entries: Vec<Entry>,
    /// Each entry as a prompt message, made once: the same allocation every
    /// cycle, so token counts and the privacy gate's verdicts are reused.
    messages: Vec<Option<foveal_prompt::prompt::Message>>,
    skipped: usize,
}

impl Session {
    /// Opens (creating it if new) the session `name` in `data_dir`.
    pub fn open(data_dir: &Path, name: &str) -> Result<Self, SessionError> {
        if !valid_name(name) {
            return Err(SessionError::InvalidName(name.to_owned()));
        }
        let dir = data_dir.join("sessions");
        let path = dir.join(format!("{name}.jsonl"));
        let io = |action| {
            let path = path.clone();
            move |source| SessionError::Io {
                path,
                action,
                source,
            }
        };
        std::fs::create_dir_all(&dir).map_err(io("create its folder"))?;
        let mut options = OpenOptions::new();
        options.read(true).append(true).create(true);
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        let mut file = options.open(&path).map_err(io("open it"))?;
        let mut entries = Vec::new();
        let mut skipped = 0;
        let mut cut = 0;
        for line in BufReader::new(&file).split(b'\n') {
            let line = line.map_err(io("read it"))?;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Entry>(&line) {
                Ok(mut entry) => {
                    if entry.cut(MAX_ENTRY_BYTES) {
                        cut += 1;
                    }
                    entries.push(entry);
                }
                Err(_) => skipped += 1,
            }
        }
        if cut > 0 {
            tracing::warn!(target: "foveal::agent::session",
                session = name,
                cut,
                max_bytes = MAX_ENTRY_BYTES,
                "session entries longer than the limit were cut when read (the file keeps them)"
            );
        }
        if skipped > 0 {
            tracing::warn!(target: "foveal::agent::session",
                session = name,
                skipped,
                "session lines that could not be read were skipped (left in the file)"
            );
        }
        // A last line cut short by a crash: start the next one on a line
        // of its own rather than gluing to it.
        let len = file.metadata().map_err(io("read its size"))?.len();
        if len > 0 {
            file.seek(SeekFrom::Start(len - 1))
                .map_err(io("read its end"))?;
            let mut last = [0u8; 1];
            file.read_exact(&mut last).map_err(io("read its end"))?;
            if last[0] != b'\n' {
                file.write_all(b"\n").map_err(io("append to it"))?;
            }
        }
        let messages = entries.iter().map(Entry::to_message).collect();
        Ok(Self {
            name: name.to_owned(),
            path,
            file,
            entries,
            messages,
            skipped,
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry, oldest first.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Lines skipped on load because they could not be read.
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// Appends `entry` to the file (one write of one line) and the history.
    pub fn append(&mut self, entry: Entry) -> Result<(), SessionError> {
        let mut line = serde_json::to_vec(&entry).expect("an entry serialises");
        line.push(b'\n');
        self.file
            .write_all(&line)
            .map_err(|source| SessionError::Io {
                path: self.path.clone(),
                action: "append to it",
                source,
            })?;
        self.messages.push(entry.to_message());
        self.entries.push(entry);
        Ok(())
    }

    /// A handle on the file for syncing it from another thread.
    pub fn sync_handle(&self) -> Option<File> {
        self.file.try_clone().ok()
    }

    /// Flushes the file to disk.
    pub fn sync(&self) -> Result<(), SessionError> {
        self.file.sync_data().map_err(|source| SessionError::Io {
            path: self.path.clone(),
            action: "sync it",
            source,
        })
    }

    /// The entries `start..end` as prompt messages (those replayed).
    pub fn messages(&self, start: usize, end: usize) -> Vec<foveal_prompt::prompt::Message> {
        let end = end.min(self.messages.len());
        self.messages[start.min(end)..end]
            .iter()
            .flatten()
            .cloned()
            .collect()
    }

    /// The last `limit` entries as prompt history, oldest first.
    pub fn history(&self, limit: usize) -> Vec<foveal_prompt::prompt::Message> {
        self.history_before(self.entries.len(), limit)
    }

    /// The last `limit` of the first `end` entries as prompt history,
    /// oldest first.
    pub fn history_before(&self, end: usize, limit: usize) -> Vec<foveal_prompt::prompt::Message> {
        let end = end.min(self.messages.len());
        let start = end.saturating_sub(limit);
        self.messages[start..end]
            .iter()
            .flatten()
            .cloned()
            .collect()
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_appended_and_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut session = Session::open(dir.path(), "work").unwrap();
        session.append(Entry::user("hello", "hello")).unwrap();
        let mut reply = Entry::new(EntryRole::Assistant, "");
        reply.tool_calls.push(RecordedCall {
            id: "c1".into(),
            name: "noop".into(),
            arguments: "{}".into(),
        });
        session.append(reply.clone()).unwrap();
        session.sync().unwrap();
        drop(session);
        let session = Session::open(dir.path(), "work").unwrap();
        assert_eq!(session.entries().len(), 2);
        assert_eq!(session.entries()[1], reply);
        let history = session.history(10);
        assert_eq!(&*history[1].text, "");
        assert!(matches!(
            &history[1].call,
            Some(foveal_prompt::prompt::CallPart::Calls(calls)) if calls[0].name == "noop"
        ));
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(session.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_torn_line_is_skipped_kept_and_never_glued_to() {
        let dir = tempfile::tempdir().unwrap();
        let mut session = Session::open(dir.path(), "s").unwrap();
        session.append(Entry::new(EntryRole::User, "one")).unwrap();
        let path = session.path().to_owned();
        drop(session);
        // A crash in the middle of the second line.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"at":1,"role":"user","cont"#).unwrap();
        drop(f);
        let before = std::fs::read(&path).unwrap();
        let mut session = Session::open(dir.path(), "s").unwrap();
        assert_eq!(session.entries().len(), 1);
        assert_eq!(session.skipped(), 1);
        session.append(Entry::new(EntryRole::User, "two")).unwrap();
        drop(session);
        let after = std::fs::read(&path).unwrap();
        assert!(after.starts_with(&before), "nothing rewritten in place");
        let session = Session::open(dir.path(), "s").unwrap();
        let texts: Vec<&str> = session.entries().iter().map(|e| &*e.content).collect();
        assert_eq!(texts, ["one", "two"]);
    }

    #[test]
    fn an_oversized_entry_is_cut_when_read_and_the_file_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut session = Session::open(dir.path(), "big").unwrap();
        let huge = "x".repeat(3 * MAX_ENTRY_BYTES);
        session
            .append(Entry::user(huge.as_str(), huge.as_str()))
            .unwrap();
        let path = session.path().to_owned();
        drop(session);
        let session = Session::open(dir.path(), "big").unwrap();
        let entry = &session.entries()[0];
        assert!(entry.content.len() < MAX_ENTRY_BYTES + 64);
        assert!(
            entry
                .sent_text()
                .unwrap()
                .ends_with("[cut when the session was read]")
        );
        // Sent as typed: stored once.
        let bytes = std::fs::metadata(path).unwrap().len();
        assert!((3 * MAX_ENTRY_BYTES as u64..4 * MAX_ENTRY_BYTES as u64).contains(&bytes));
    }

    #[test]
    fn names_that_could_escape_the_folder_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["", "../x", "a/b", ".hidden", "a b", &"x".repeat(65)] {
            assert!(
                matches!(
                    Session::open(dir.path(), bad),
                    Err(SessionError::InvalidName(_))
                ),
                "{bad:?}"
            );
        }
        assert!(Session::open(dir.path(), "2026-11_work.v2").is_ok());
    }

    #[test]
    fn history_keeps_the_newest_and_leaves_errors_out() {
        let dir = tempfile::tempdir().unwrap();
        let mut session = Session::open(dir.path(), "h").unwrap();
        for i in 0..5 {
            session
                .append(Entry::user(format!("m{i}"), format!("m{i}")))
                .unwrap();
        }
        session
            .append(Entry::new(EntryRole::Error, "model down"))
            .unwrap();
        let history = session.history(3);
        let texts: Vec<&str> = history.iter().map(|m| &*m.text).collect();
        assert_eq!(texts, ["m3", "m4"]);
    }

    #[test]
    fn a_user_message_is_replayed_as_it_was_sent_never_as_typed() {
        let dir = tempfile::tempdir().unwrap();
        let mut session = Session::open(dir.path(), "s").unwrap();
        session
            .append(Entry::user(
                "Met Ann at the harbour today",
                "[REDACTED private] today",
            ))
            .unwrap();
        // Written by an older foveal, or never sent: not replayed at all.
        session
            .append(Entry::new(EntryRole::User, "typed, never sent"))
            .unwrap();
        drop(session);
        let session = Session::open(dir.path(), "s").unwrap();
        let texts: Vec<String> = session
            .history(10)
            .iter()
            .map(|m| m.text.to_string())
            .collect();
        assert_eq!(texts, ["[REDACTED private] today"]);
        assert_eq!(session.entries()[0].content, "Met Ann at the harbour today");
    }
}
