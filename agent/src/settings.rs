//! The `[agent]` section of the configuration: how the live host runs.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use foveal_settings::{ConfigError, EnvLookup, line_column, resolve_path};

/// How the live host runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSettings {
    /// Seconds between heartbeats; 0 turns them off (the default).
    pub heartbeat_secs: u64,
    /// Session entries offered to the prompt as history, newest kept.
    pub history_messages: usize,
    /// The journal file `add_journal_entry` writes to; `None` means
    /// `journal.org` in the first memex folder.
    pub journal: Option<PathBuf>,
    /// The session used when `--session` is not given.
    pub session: String,
    /// The control socket; `None` means `<runtime dir>/foveal/control.sock`
    /// (`$XDG_RUNTIME_DIR`, else `<data dir>/run`).
    pub socket: Option<PathBuf>,
    /// Tokens a reply may have at most (the request's `max_tokens`).
    pub max_reply_tokens: u32,
    /// A memex change made outside the host starts a cycle (otherwise it
    /// is only logged, and the next cycle sees it).
    pub react_to_memex_changes: bool,
    /// A skill change starts a cycle (otherwise it is only logged).
    pub react_to_skill_changes: bool,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            heartbeat_secs: 0,
            history_messages: 40,
            journal: None,
            session: foveal_prompt::session_name::DEFAULT_SESSION.to_owned(),
            socket: None,
            max_reply_tokens: 512,
            react_to_memex_changes: false,
            react_to_skill_changes: false,
        }
    }
}

/// `[agent]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileAgent {
    heartbeat_secs: Option<Spanned<u64>>,
    history_messages: Option<Spanned<u64>>,
    journal: Option<String>,
    session: Option<Spanned<String>>,
    socket: Option<String>,
    max_reply_tokens: Option<Spanned<u64>>,
    react_to_memex_changes: Option<bool>,
    react_to_skill_changes: Option<bool>,
}

/// Resolves `[agent]` with the environment (`FOVEAL_SOCKET`,
/// `FOVEAL_HEARTBEAT_SECS`).
pub(crate) fn resolve(
    file: &FileAgent,
    text: &str,
    path: &Path,
    base: &Path,
    env: EnvLookup<'_>,
) -> Result<AgentSettings, ConfigError> {
    let invalid = |span: std::ops::Range<usize>, key: &str, message: String| {
        let (line, column) = line_column(text, span.start);
        let key = format!("agent.{key}");
        ConfigError::Invalid {
            path: path.to_owned(),
            line,
            column,
            message: format!("`{key}`: {message}"),
            key: Some(key),
        }
    };
    let mut settings = AgentSettings::default();
    if let Some(v) = &file.heartbeat_secs {
        settings.heartbeat_secs = *v.get_ref();
    }
    if let Some(v) = &file.history_messages {
        settings.history_messages = usize::try_from(*v.get_ref()).unwrap_or(usize::MAX);
    }
    if let Some(v) = &file.max_reply_tokens {
        settings.max_reply_tokens = match u32::try_from(*v.get_ref()) {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(invalid(
                    v.span(),
                    "max_reply_tokens",
                    format!(
                        "{} is out of range; must be from 1 to {}",
                        v.get_ref(),
                        u32::MAX
                    ),
                ));
            }
        };
    }
    if let Some(name) = &file.session {
        if !foveal_prompt::session_name::valid_name(name.get_ref()) {
            return Err(invalid(
                name.span(),
                "session",
                format!(
                    "{:?} is not a session name: use letters, digits, `-`, `_` and `.`",
                    name.get_ref()
                ),
            ));
        }
        settings.session.clone_from(name.get_ref());
    }
    settings.journal = file
        .journal
        .as_deref()
        .map(|p| base.join(resolve_path(p, env)));
    settings.socket = file
        .socket
        .as_deref()
        .map(|p| base.join(resolve_path(p, env)));
    settings.react_to_memex_changes = file.react_to_memex_changes.unwrap_or(false);
    settings.react_to_skill_changes = file.react_to_skill_changes.unwrap_or(false);
    if let Some(value) = env("FOVEAL_SOCKET").filter(|v| !v.trim().is_empty()) {
        settings.socket = Some(resolve_path(&value, env));
    }
    if let Some(value) = env("FOVEAL_HEARTBEAT_SECS").filter(|v| !v.trim().is_empty()) {
        settings.heartbeat_secs = value.trim().parse().map_err(|_| ConfigError::Env {
            name: "FOVEAL_HEARTBEAT_SECS",
            value: value.clone(),
            message: "expected a whole number of seconds (0 turns heartbeats off)".to_owned(),
        })?;
    }
    Ok(settings)
}

impl AgentSettings {
    /// The control socket's path for a host whose data dir is `data_dir`.
    pub fn socket_path(&self, data_dir: &Path) -> PathBuf {
        if let Some(socket) = &self.socket {
            return socket.clone();
        }
        match std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir).join("foveal").join("control.sock"),
            None => data_dir.join("run").join("control.sock"),
        }
    }

    /// The journal file, given the memex roots.
    pub fn journal_path(&self, memex_roots: &[PathBuf]) -> Option<PathBuf> {
        if let Some(journal) = &self.journal {
            return Some(journal.clone());
        }
        memex_roots
            .iter()
            .find(|r| r.is_dir())
            .map(|dir| dir.join("journal.org"))
    }
}
