//! The commands a running host answers for a client as the client would
//! answer them itself (`foveal context`, `foveal prompt`): each writes
//! what the command prints into a [`Printed`], and how it ended.
//!
//! `foveal context` and `foveal prompt` load the memex and the skills and
//! call these; when a host serves the same configuration they send the
//! host a [`crate::control::Request::Command`] instead and print what it
//! answers, loading nothing (`docs/cli.md`).

use std::fmt::Write as _;
use std::sync::Arc;

use foveal_memex::MemexSnapshot;
use foveal_memex::privacy::PrivacyTags;
use foveal_registry::egress::Gate;
use foveal_registry::registry::Registry;
use serde::{Deserialize, Serialize};

use crate::config::Config;

pub mod context;
pub mod prompt;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    /// Success.
    Ok,
    /// The command ran but the answer is "no" (an unknown skill, say).
    NotFound,
    /// The command line or the configuration is wrong.
    Usage,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Self::Ok => 0,
            Self::NotFound => 1,
            Self::Usage => 2,
        }
    }
}

/// What a command prints, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Printed {
    /// Its standard output.
    pub stdout: String,
    /// Its standard error: whole lines.
    pub stderr: String,
    /// How it ended.
    pub exit: Exit,
}

impl Default for Printed {
    fn default() -> Self {
        Self {
            stdout: String::new(),
            stderr: String::new(),
            exit: Exit::Ok,
        }
    }
}

impl Printed {
    /// A line on stderr.
    pub fn say(&mut self, line: impl std::fmt::Display) {
        let _ = writeln!(self.stderr, "{line}");
    }

    /// `error: {message}` on stderr, and the command ends `exit`.
    pub fn fail(mut self, exit: Exit, message: impl std::fmt::Display) -> Self {
        self.say(format_args!("error: {message}"));
        self.exit = exit;
        self
    }

    /// Writes stderr, then stdout, and gives the exit.
    pub fn print(&self) -> std::io::Result<Exit> {
        use std::io::Write as _;
        if !self.stderr.is_empty() {
            let mut err = std::io::stderr().lock();
            err.write_all(self.stderr.as_bytes())?;
            err.flush()?;
        }
        let mut out = std::io::stdout().lock();
        out.write_all(self.stdout.as_bytes())?;
        out.flush()?;
        Ok(self.exit)
    }
}

/// What the commands read: a host's loaded parts, or a command's own.
#[derive(Debug, Clone, Copy)]
pub struct Parts<'a> {
    /// The resolved configuration.
    pub config: &'a Config,
    /// The skills.
    pub registry: &'a Arc<Registry>,
    /// The memex now.
    pub memex: &'a MemexSnapshot,
    /// The privacy tags.
    pub privacy: &'a PrivacyTags,
    /// The last door.
    pub gate: &'a Arc<Gate>,
}

impl Parts<'_> {
    /// Resolves `focus`, when given, over the visible objects
    /// ([`resolve_focus`]); `false` when it names none, `printed` then
    /// saying why and ending as it should.
    pub fn resolve_focus(&self, focus: &mut Option<String>, printed: &mut Printed) -> bool {
        let Some(focus) = focus.as_mut() else {
            return true;
        };
        let view = foveal_memex::view::SnapshotView::new(self.memex, self.privacy);
        match resolve_focus(&view.view().as_view(), focus, printed) {
            Ok(()) => true,
            Err(exit) => {
                printed.exit = exit;
                false
            }
        }
    }
}

/// A command a running host answers for a client (the control socket's
/// `command` request).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum Command {
    /// `foveal context`.
    Context(context::ContextOptions),
    /// `foveal prompt`.
    Prompt(prompt::PromptOptions),
}

/// Resolves a `--focus` argument over the visible objects of `view`: an
/// object's id, or its handle as the compact outline shows it (`^k3`;
/// `k3` when no object has that id). A handle is replaced by the id it
/// names, and `printed`'s stderr says which object that is; a stale,
/// ambiguous or unknown reference is an error that says so. The same
/// answer for an id that does not exist and one that is private: no
/// command reveals private objects.
pub fn resolve_focus(
    view: &foveal_sdk::memex::MemexView<'_>,
    focus: &mut String,
    printed: &mut Printed,
) -> Result<(), Exit> {
    use foveal_sdk::handle::Resolution;
    if view.find(focus).is_some() {
        return Ok(());
    }
    let reference = focus.trim();
    let caret = reference.starts_with(foveal_sdk::handle::SIGIL);
    let (exit, message) = match foveal_sdk::handle::resolve(view, reference) {
        Resolution::Found { file, index } => {
            let file = &view.files[file];
            let id = file.id(index).to_owned();
            printed.say(format_args!(
                "focus: {reference} is {id} ({})",
                file.title(index)
            ));
            *focus = id;
            return Ok(());
        }
        Resolution::Ambiguous(all) => {
            let candidates: Vec<String> = all
                .iter()
                .map(|&(f, i)| format!("{} ({})", view.files[f].id(i), view.files[f].title(i)))
                .collect();
            (
                Exit::Usage,
                format!(
                    "the handle {reference:?} names {} objects: {}; give the id",
                    candidates.len(),
                    candidates.join(", ")
                ),
            )
        }
        Resolution::NotFound if caret => (
            Exit::NotFound,
            format!(
                "the handle {reference:?} names no visible object: it is stale (its object changed or is gone) or mistyped; read the outline again (`foveal context`) or give an id (`foveal memex query`)"
            ),
        ),
        Resolution::NotAHandle if caret => (
            Exit::Usage,
            format!(
                "{reference:?} is not a handle: a handle is ^ and 2 to 13 letters and digits, as the outline shows it"
            ),
        ),
        Resolution::NotFound | Resolution::NotAHandle => (
            Exit::NotFound,
            format!(
                "no visible object has the id or handle {reference:?} (list ids with `foveal memex query`)"
            ),
        ),
    };
    printed.say(format_args!("error: {message}"));
    Err(exit)
}
