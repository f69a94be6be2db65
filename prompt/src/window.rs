//! The context window of a session (seed 002): what the user attaches for
//! the agent to see — code regions, files, errors, REPL output, notes.
//!
//! The `context-window` skill holds the window and its logic (the ring of
//! items, the bounds, the rendering at component 3000); the host does the
//! I/O. [`Window`] is the host's side for one session:
//!
//! - it **persists** the window after every change, as the skill's JSON
//!   (seed 002's context-manager object: `items`, `max_items`, plus
//!   `max_tokens` and `next_id`), in `<data dir>/windows/NAME.json`, mode
//!   0600, written to a temporary file and renamed: a crash leaves the old
//!   file or the new one, never half of one (the seed kept nothing: L-003);
//! - it **opens** the window in the skill from that file, under the bounds
//!   of the configuration (`[window]`), whenever the skill does not hold
//!   it: at the first call, and after the skill was loaded or replaced (a
//!   new build starts empty). An answer "not open" from the skill
//!   (error [`NOT_OPEN`]) opens it and calls again;
//! - it **stamps the time** of raw content, and keeps a **revision**
//!   number, bumped by every change, that the prompt's cache of skill
//!   components keys on;
//! - when a change cannot be saved, the skill is opened again from the
//!   last saved state, and the change is reported as not made: what the
//!   skill shows is always what is on disk.
//!
//! A saved file that cannot be read as a window (edited by hand, say) is
//! moved aside to `NAME.json.invalid-<ms>` with a warning, and the window
//! starts empty: the text is kept, and the window works.
//!
//! Without the skill every change is refused with [`WindowError::NotLoaded`]
//! (saying how to install it), the saved window stays as it is, and the
//! prompt has no window section (the fallback of DESIGN.md's table).
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use foveal_registry::registry::{Registry, RegistryOptions};
//! use foveal_prompt::window::{AddRequest, Window};
//!
//! let registry = Arc::new(Registry::new(RegistryOptions::default()).unwrap());
//! registry.scan();
//! let dir = std::path::Path::new("/tmp/foveal-data");
//! let window = Window::open(dir, "default", Default::default(), registry).unwrap();
//! let added = window.add(AddRequest::text("error", "panicked at src/main.rs:3")).unwrap();
//! println!("{}", added["added"]["id"]); // "ctx-1"
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use abi_stable::std_types::RStr;
use foveal_sdk::SkillError;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::registry::{Reason, Registry, Snapshot, hooks};

/// The skill that holds the window.
pub const SKILL: &str = "context-window";
/// The component id of the window's section (seed 004's context buffer).
pub const COMPONENT_ID: u32 = 3000;
/// The skill's error code for a window it does not hold.
pub const NOT_OPEN: u32 = SkillError::SKILL_DEFINED;

/// Raw content to add, as the command line and the control socket send
/// it; the host adds the time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddRequest {
    /// The item's type (`code` when none, as in the seed).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// `filename`, `start_line`, `end_line`, `language`, and any other keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Map<String, Value>>,
    /// A whole item of the seed's schema instead (id, type, content,
    /// metadata, timestamp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<Value>,
}

impl AddRequest {
    /// Raw `content` of type `kind`.
    pub fn text(kind: &str, content: &str) -> Self {
        Self {
            kind: Some(kind.to_owned()),
            content: Some(content.to_owned()),
            ..Self::default()
        }
    }
}

/// A change or a question, as the control socket carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WindowOp {
    /// Add an item.
    Add(AddRequest),
    /// The items: of these types (all when empty), the most recent
    /// `limit` (all when none), in chronological order.
    List {
        /// Types to keep.
        #[serde(default)]
        types: Vec<String>,
        /// How many of the most recent.
        #[serde(default)]
        limit: Option<usize>,
    },
    /// Remove the item with this id.
    Remove {
        /// `ctx-N`.
        id: String,
    },
    /// Remove every item.
    Clear,
}

/// Why a window operation did not happen. Nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum WindowError {
    /// The skill is not loaded (or quarantined).
    #[error(
        "the context window needs the `{SKILL}` skill, which is not available ({0}); build it with `cargo build --workspace` (it is loaded from beside the foveal executable or from the plugins folder), then check `foveal skill-list`"
    )]
    NotLoaded(String),
    /// The skill refused the input.
    #[error("{0}")]
    Invalid(String),
    /// The skill failed.
    #[error("the `{SKILL}` skill failed: {0}")]
    Failed(String),
    /// The skill answered something the host cannot read.
    #[error("the `{SKILL}` skill answered unreadable JSON: {0}")]
    Protocol(String),
    /// The window file could not be read or written.
    #[error("the context window could not be saved to {}: {source}; nothing was changed", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The session name cannot name a file.
    #[error(
        "invalid session name {0:?}: use letters, digits, `-`, `_` and `.` (not first), at most 64"
    )]
    InvalidSession(String),
}

#[derive(Debug)]
struct Inner {
    /// The state as saved (`None`: no file yet).
    saved: Option<Value>,
    /// The build of the skill that holds the window, if one does. Held,
    /// not remembered by address: a new build can never be taken for it.
    opened: Option<Arc<crate::registry::Skill>>,
    /// Bumped by every change.
    revision: u64,
}

/// The context window of one session: see the module documentation.
#[derive(Debug)]
pub struct Window {
    session: String,
    path: PathBuf,
    limits: WindowSettings,
    registry: Arc<Registry>,
    inner: Mutex<Inner>,
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The file of `session`'s window.
pub fn path_of(data_dir: &Path, session: &str) -> PathBuf {
    data_dir.join("windows").join(format!("{session}.json"))
}

impl Window {
    /// The window of `session`, from its saved file if there is one. Reads
    /// the file only; the skill is asked when the window is first used.
    pub fn open(
        data_dir: &Path,
        session: &str,
        limits: WindowSettings,
        registry: Arc<Registry>,
    ) -> Result<Self, WindowError> {
        if !crate::session_name::valid_name(session) {
            return Err(WindowError::InvalidSession(session.to_owned()));
        }
        let path = path_of(data_dir, session);
        let saved = read_saved(&path)?;
        Ok(Self {
            session: session.to_owned(),
            path,
            limits,
            registry,
            inner: Mutex::new(Inner {
                saved,
                opened: None,
                revision: 0,
            }),
        })
    }

    /// The session.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The saved file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bounds in force.
    pub fn limits(&self) -> WindowSettings {
        self.limits
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every change to `Inner` is whole; a poisoned lock holds a valid
        // value.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Before a prompt is assembled on `skills`: makes sure the skill holds
    /// the window, and returns the revision the prompt's component cache
    /// keys on; `None` when the skill is not available (no section).
    pub fn for_prompt(&self, skills: &Snapshot) -> Option<u64> {
        let mut inner = self.lock();
        match self.ensure_open(&mut inner, skills) {
            Ok(()) => Some(inner.revision),
            Err(WindowError::NotLoaded(why)) => {
                tracing::debug!(target: "foveal::window", "no window section: {why}");
                None
            }
            Err(error) => {
                tracing::warn!(target: "foveal::window", "no window section: {error}");
                None
            }
        }
    }

    /// Adds an item (seed 002 `add-context`): `{"added": item, "evicted":
    /// [items]}`.
    pub fn add(&self, request: AddRequest) -> Result<Value, WindowError> {
        self.apply(&WindowOp::Add(request))
    }

    /// Runs `op` on the current registry snapshot.
    pub fn apply(&self, op: &WindowOp) -> Result<Value, WindowError> {
        if matches!(op, WindowOp::Add(_)) {
            crate::tokens::warm();
        }
        let skills = self.registry.snapshot();
        let mut inner = self.lock();
        let (method, args) = match op {
            WindowOp::Add(request) => {
                let mut args = serde_json::to_value(request).expect("a request serialises");
                args["window"] = json!(self.session);
                if request.item.is_none() {
                    args["now"] = json!(now_ms());
                }
                ("add", args)
            }
            WindowOp::List { types, limit } => (
                "get",
                json!({"window": self.session, "types": types, "limit": limit}),
            ),
            WindowOp::Remove { id } => ("remove", json!({"window": self.session, "id": id})),
            WindowOp::Clear => ("clear", json!({"window": self.session})),
        };
        let mut answer = self.call(&mut inner, &skills, method, &args)?;
        if method == "get" {
            return Ok(answer);
        }
        let state = answer
            .as_object_mut()
            .and_then(|a| a.remove("state"))
            .ok_or_else(|| WindowError::Protocol(format!("{method} answered no state")))?;
        self.save(&mut inner, &skills, state)?;
        Ok(answer)
    }

    /// Saves `state` as the window's file; when that fails, the skill is
    /// opened again from the last saved state and the error returned.
    fn save(&self, inner: &mut Inner, skills: &Snapshot, state: Value) -> Result<(), WindowError> {
        if let Err(source) = write_atomically(&self.path, &state) {
            inner.opened = None;
            if let Err(error) = self.ensure_open(inner, skills) {
                tracing::warn!(target: "foveal::window", "the window could not be restored in the skill: {error}");
            }
            return Err(WindowError::Io {
                path: self.path.clone(),
                source,
            });
        }
        inner.saved = Some(state);
        inner.revision += 1;
        Ok(())
    }

    /// Makes sure the serving build of the skill holds the window.
    fn ensure_open(&self, inner: &mut Inner, skills: &Snapshot) -> Result<(), WindowError> {
        let Some(slot) = skills.get(SKILL) else {
            inner.opened = None;
            return Err(WindowError::NotLoaded(format!(
                "skill `{SKILL}` is not loaded"
            )));
        };
        if inner
            .opened
            .as_ref()
            .is_some_and(|held| Arc::ptr_eq(held, slot.skill()))
        {
            return Ok(());
        }
        // Opening counts the saved items' tokens; an empty window counts
        // nothing, and a prompt that fits by its bytes never loads the
        // tables.
        if inner
            .saved
            .as_ref()
            .and_then(|s| s["items"].as_array())
            .is_some_and(|items| !items.is_empty())
        {
            crate::tokens::warm();
        }
        let args = json!({
            "window": self.session,
            "state": inner.saved,
            "max_items": self.limits.max_items,
            "max_tokens": self.limits.max_tokens,
        });
        let mut answer = invoke(skills, "open", &args)?;
        inner.opened = Some(Arc::clone(slot.skill()));
        let evicted = answer["evicted"].as_array().map_or(0, Vec::len);
        if evicted > 0 {
            // The bounds in force are smaller than the saved window.
            tracing::info!(
                target: "foveal::window",
                session = %self.session,
                evicted,
                "window opened under smaller bounds: the oldest items were evicted"
            );
            let state = answer
                .as_object_mut()
                .and_then(|a| a.remove("state"))
                .unwrap_or(Value::Null);
            if let Err(source) = write_atomically(&self.path, &state) {
                tracing::warn!(target: "foveal::window", "the window could not be saved to {}: {source}", self.path.display());
            } else {
                inner.saved = Some(state);
            }
            inner.revision += 1;
        }
        Ok(())
    }

    /// Calls `method`, opening the window first when the skill does not
    /// hold it (a new build, or one that was never asked).
    fn call(
        &self,
        inner: &mut Inner,
        skills: &Snapshot,
        method: &str,
        args: &Value,
    ) -> Result<Value, WindowError> {
        self.ensure_open(inner, skills)?;
        match invoke(skills, method, args) {
            Err(NotOpen) => {
                inner.opened = None;
                self.ensure_open(inner, skills)?;
                invoke(skills, method, args).map_err(WindowError::from)
            }
            other => other.map_err(WindowError::from),
        }
    }
}

/// An error of [`invoke`]: the skill did not hold the window, or another.
#[derive(Debug)]
enum CallError {
    NotOpen,
    Other(WindowError),
}
use CallError::NotOpen;

/// The bounds of the context window: what the user attaches (seed 002,
/// the `context-window` skill).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSettings {
    /// `window.max_items`, `CONTEXT_WINDOW_MAX_ITEMS`: items kept, 1 to
    /// 1000 (default 50); the oldest is evicted first.
    pub max_items: usize,
    /// `window.max_tokens`, `CONTEXT_WINDOW_MAX_TOKENS`: tokens of all
    /// items together (default 4096; 0 for no bound); the oldest are
    /// evicted until a new item fits.
    pub max_tokens: u32,
}

impl Default for WindowSettings {
    fn default() -> Self {
        Self {
            max_items: 50,
            max_tokens: 4096,
        }
    }
}

impl From<CallError> for WindowError {
    fn from(error: CallError) -> Self {
        match error {
            CallError::NotOpen => Self::Failed("it does not hold the window it was given".into()),
            CallError::Other(error) => error,
        }
    }
}

/// Calls the skill's `invoke` hook with `method` and `args`.
fn invoke(skills: &Snapshot, method: &str, args: &Value) -> Result<Value, CallError> {
    let method = method.to_owned();
    let args = args.to_string();
    let answer = skills.call(SKILL, hooks::INVOKE, move |f| {
        f(RStr::from_str(&method), RStr::from_str(&args))
    });
    match answer {
        Ok(text) => serde_json::from_str(text.as_str())
            .map_err(|e| CallError::Other(WindowError::Protocol(e.to_string()))),
        Err(unavailable) => {
            // `not open` and an invalid item are answers; any other error
            // is a failure, said on stderr once per cause in this process.
            if let Reason::Failed { error, .. } = unavailable.reason()
                && error.code != NOT_OPEN
                && error.code != SkillError::INVALID_INPUT
            {
                unavailable.say_failure();
            }
            Err(match unavailable.into_reason() {
                Reason::Failed { error, .. } if error.code == NOT_OPEN => NotOpen,
                Reason::Failed { error, .. } if error.code == SkillError::INVALID_INPUT => {
                    CallError::Other(WindowError::Invalid(error.message.into_string()))
                }
                Reason::Failed { error, .. } => {
                    CallError::Other(WindowError::Failed(error.to_string()))
                }
                reason => CallError::Other(WindowError::NotLoaded(reason.to_string())),
            })
        }
    }
}

/// The saved state of a window, if any. A file that is not a JSON object
/// is moved aside (kept, with a warning) and the window starts empty.
fn read_saved(path: &Path) -> Result<Option<Value>, WindowError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(WindowError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(value) if value.is_object() => Ok(Some(value)),
        outcome => {
            let why = match outcome {
                Err(e) => e.to_string(),
                Ok(_) => "not a JSON object".to_owned(),
            };
            let aside = move_aside(path);
            tracing::warn!(
                target: "foveal::window",
                "{} is not a saved window ({why}); moved to {} and the window starts empty",
                path.display(),
                aside.display()
            );
            Ok(None)
        }
    }
}

/// Moves `path` to `path.invalid-<ms>`; returns the new name.
fn move_aside(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".invalid-{}", now_ms()));
    let aside = PathBuf::from(name);
    if let Err(error) = std::fs::rename(path, &aside) {
        tracing::warn!(target: "foveal::window", "{} could not be moved aside: {error}", path.display());
    }
    aside
}

/// Writes `state` to `path` whole: a temporary file (0600) in the same
/// folder (0700), synced, renamed into place.
fn write_atomically(path: &Path, state: &Value) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut text = serde_json::to_vec_pretty(state).expect("a state serialises");
    text.push(b'\n');
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&text)?;
        file.sync_data()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
