//! The tools the model may call: the host's own, and those skills add.
//!
//! Each tool has a name, a one-line description (the system prompt's tool
//! belt), a JSON schema for its arguments (the request's `tools`), a
//! [`ToolCategory`] and a handler. The categories drive the execution
//! pattern ([`crate::execution`]): a `terminal` tool ends the tool loop, a
//! `dangerous` one needs the user's confirmation when the pattern asks for
//! it, and a pattern may allow only some categories.
//!
//! | tool | category | what it does |
//! |---|---|---|
//! | `query_memex` | read | visible objects by tag and/or TODO state |
//! | `read_object` | read | one visible object: title, state, tags, properties, body, children |
//! | `add_headline` | write | a child headline under a visible object |
//! | `set_todo` | write | sets or clears an object's TODO state |
//! | `add_journal_entry` | write | a timed entry under today's date in the journal file |
//! | `set_focus` | read | moves the foveal focus to a visible object |
//! | `noop` | terminal | nothing to do: ends the loop |
//!
//! Private objects (privacy tags, at any depth) do not exist for tools: a
//! private id is answered exactly like an unknown one, and no tool writes
//! under one. A host tool that writes, and every skill tool whatever
//! category it declares, is refused before it runs when its arguments hold
//! private text or a secret ([`check_arguments`]): what it wrote would be
//! held by a visible object, and so be public. Bad arguments are a
//! [`ToolError`] returned to the model as the tool's result, never a
//! crash. A path in a result is named from its memex root (`work.org`),
//! never as the machine's absolute path.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::ToolCategory;
use crate::egress::Gate;
use crate::memex::privacy::PrivacyTags;
use crate::memex::snapshot::{ObjectRef, Query};
use crate::memex::{Memex, MemexSnapshot};
use crate::provider::ToolDefinition;

/// Objects `query_memex` lists at most, unless asked for fewer.
pub const QUERY_LIMIT: usize = 20;

/// Bytes of a body `read_object` returns at most.
pub const BODY_LIMIT: usize = 4_000;

/// Where a tool comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolSource {
    /// One of the host's own.
    Builtin(Builtin),
    /// Declared by the skill of that name (its `tools` hook).
    Skill(String),
}

/// The host's own tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// `query_memex`.
    QueryMemex,
    /// `read_object`.
    ReadObject,
    /// `add_headline`.
    AddHeadline,
    /// `set_todo`.
    SetTodo,
    /// `add_journal_entry`.
    AddJournalEntry,
    /// `set_focus`.
    SetFocus,
    /// `noop`.
    Noop,
}

impl Builtin {
    /// The arguments whose text the tool writes into the memex.
    pub fn written(self) -> &'static [&'static str] {
        match self {
            Self::AddHeadline => &["title", "body"],
            Self::SetTodo => &["state"],
            Self::AddJournalEntry => &["title", "text"],
            Self::QueryMemex | Self::ReadObject | Self::SetFocus | Self::Noop => &[],
        }
    }
}

/// A tool the model may be offered.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// Its name.
    pub name: String,
    /// One line: what it does.
    pub description: String,
    /// The JSON schema of its arguments (an object schema).
    pub parameters: Value,
    /// Its category.
    pub category: ToolCategory,
    /// Who runs it.
    pub source: ToolSource,
}

impl Tool {
    /// The definition sent to the model.
    pub fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }

    /// The line of the system prompt's tool belt.
    pub fn spec(&self) -> crate::prompt::components::ToolSpec {
        crate::prompt::components::ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
        }
    }
}

/// The host's tools, in the order they are offered.
pub fn builtins() -> Vec<Tool> {
    let tool = |name: &str, description: &str, category, builtin, parameters| Tool {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
        category,
        source: ToolSource::Builtin(builtin),
    };
    vec![
        tool(
            "query_memex",
            "List memex objects with a tag and/or TODO state (id, state, title, tags).",
            ToolCategory::Read,
            Builtin::QueryMemex,
            json!({"type": "object", "properties": {
                "tag": {"type": "string"},
                "todo": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1}
            }}),
        ),
        tool(
            "read_object",
            "Read one memex object by id: state, tags, properties, body, children.",
            ToolCategory::Read,
            Builtin::ReadObject,
            json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
        ),
        tool(
            "add_headline",
            "Add a headline under the object with id parent_id.",
            ToolCategory::Write,
            Builtin::AddHeadline,
            json!({"type": "object", "properties": {
                "parent_id": {"type": "string"},
                "title": {"type": "string"},
                "body": {"type": "string"}
            }, "required": ["parent_id", "title"]}),
        ),
        tool(
            "set_todo",
            "Set an object's TODO state (empty state clears it).",
            ToolCategory::Write,
            Builtin::SetTodo,
            json!({"type": "object", "properties": {
                "id": {"type": "string"},
                "state": {"type": "string"}
            }, "required": ["id", "state"]}),
        ),
        tool(
            "add_journal_entry",
            "Add a timed entry under today's date in the journal.",
            ToolCategory::Write,
            Builtin::AddJournalEntry,
            json!({"type": "object", "properties": {
                "title": {"type": "string"},
                "text": {"type": "string"}
            }, "required": ["title"]}),
        ),
        tool(
            "set_focus",
            "Move the foveal focus to the object with this id.",
            ToolCategory::Read,
            Builtin::SetFocus,
            json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
        ),
        tool(
            "noop",
            "Nothing to do: end this turn.",
            ToolCategory::Terminal,
            Builtin::Noop,
            json!({"type": "object", "properties": {}}),
        ),
    ]
}

/// Why a tool call failed: returned to the model as the tool's result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The arguments are not what the schema asks.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// No visible object has that id (also said of private ones). The id
    /// is not echoed: the answer is the same for a private id as for a
    /// missing one, whatever the gate would make of it.
    #[error("no visible object has that id")]
    UnknownId(String),
    /// No tool of that name is offered.
    #[error("no tool named {0:?} is offered in this context")]
    UnknownTool(String),
    /// The pattern does not allow the tool's category now.
    #[error("tool {name:?} ({category}) is not allowed now: {why}")]
    NotAllowed {
        /// The tool.
        name: String,
        /// Its category.
        category: ToolCategory,
        /// Why.
        why: String,
    },
    /// The write was refused (the file changed on disk, a bad state, …).
    #[error("{0}")]
    Failed(String),
}

/// Where `add_journal_entry` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalSettings {
    /// The journal file.
    pub path: PathBuf,
}

/// What a tool may touch while it runs.
#[derive(Debug)]
pub struct ToolContext<'a> {
    /// The live memex (for writes).
    pub memex: &'a Memex,
    /// The snapshot the cycle runs on.
    pub snapshot: &'a MemexSnapshot,
    /// The privacy tags.
    pub privacy: &'a PrivacyTags,
    /// The foveal focus, which `set_focus` moves.
    pub focus: &'a mut Option<String>,
    /// The journal.
    pub journal: &'a JournalSettings,
}

/// What a tool did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The result the model reads.
    pub text: String,
    /// The memex generation a write published, if it wrote.
    pub wrote: Option<u64>,
}

impl ToolOutput {
    fn read(text: String) -> Self {
        Self { text, wrote: None }
    }
}

/// Refuses a call of `tool` whose arguments hold private text or a secret,
/// before it runs: the rule every memex write obeys ([`Gate::check_write`]),
/// here for the host's tools and the skills' alike, which the agent and
/// `foveal tool call` both ask. Of a host tool, the texts it writes, as
/// the file will hold them: each alone and all joined in order, title then
/// body ([`Gate::check_write_parts`]); an id only names the object written
/// to (a private id is answered as a missing one), and a host tool that
/// writes nothing has nothing checked. Of a skill's tool, whatever
/// category it declares (a category is the skill's word, not the host's
/// knowledge of what the tool does), every string and number of its
/// arguments, alone and joined ([`Gate::check_write_arguments`]), since
/// the host cannot know which it writes or sends. `memex` is the memex as
/// it is now. The answer is the one every such refusal gives
/// ([`WRITE_REFUSED`](crate::egress::WRITE_REFUSED)); nothing is written.
pub fn check_arguments(
    tool: &Tool,
    args: &Value,
    gate: &Gate,
    memex: &MemexSnapshot,
) -> Result<(), ToolError> {
    let checked = match &tool.source {
        ToolSource::Builtin(builtin) => {
            let written: Vec<&str> = builtin
                .written()
                .iter()
                .filter_map(|key| args.get(key).and_then(Value::as_str))
                .collect();
            if written.is_empty() {
                return Ok(());
            }
            gate.check_write_parts(&written, memex)
        }
        ToolSource::Skill(_) => gate.check_write_arguments(args, memex),
    };
    checked.map_err(|refused| ToolError::Failed(refused.to_string()))
}

/// Runs a host tool.
pub fn run_builtin(
    builtin: Builtin,
    args: &Value,
    cx: &mut ToolContext<'_>,
) -> Result<ToolOutput, ToolError> {
    let args = args
        .as_object()
        .ok_or_else(|| ToolError::InvalidArguments("expected a JSON object".to_owned()))?;
    match builtin {
        Builtin::QueryMemex => query_memex(args, cx).map(ToolOutput::read),
        Builtin::ReadObject => {
            let id = required_str(args, "id")?;
            let object = visible(cx, id)?;
            Ok(ToolOutput::read(describe(object, cx.privacy)))
        }
        Builtin::AddHeadline => {
            let parent = required_str(args, "parent_id")?;
            let title = required_str(args, "title")?;
            let body = optional_str(args, "body")?;
            visible(cx, parent)?;
            let written = cx
                .memex
                .add_child(cx.snapshot, parent, title, body)
                .map_err(|e| failed(cx.memex, &e))?;
            Ok(ToolOutput {
                text: format!("added headline {:?} with id {}", title.trim(), written.id),
                wrote: Some(written.generation),
            })
        }
        Builtin::SetTodo => {
            let id = required_str(args, "id")?;
            let state = required_str(args, "state")?.trim();
            let object = visible(cx, id)?;
            let state = (!state.is_empty()).then_some(state);
            if let Some(state) = state {
                known_state(object, state, cx)?;
            }
            let written = cx
                .memex
                .set_todo(cx.snapshot, id, state)
                .map_err(|e| failed(cx.memex, &e))?;
            Ok(ToolOutput {
                text: match state {
                    Some(state) if written.changed => format!("{id} is now {state}"),
                    Some(state) => format!("{id} was already {state}"),
                    None => format!("{id} has no TODO state now"),
                },
                wrote: written.changed.then_some(written.generation),
            })
        }
        Builtin::AddJournalEntry => {
            let title = required_str(args, "title")?;
            let text = optional_str(args, "text")?;
            journal_entry(cx, title, text)
        }
        Builtin::SetFocus => {
            let id = required_str(args, "id")?;
            let object = visible(cx, id)?;
            *cx.focus = Some(id.to_owned());
            Ok(ToolOutput::read(format!(
                "focus is now {id} ({})",
                object.title()
            )))
        }
        Builtin::Noop => Ok(ToolOutput::read("ok".to_owned())),
    }
}

type Args = serde_json::Map<String, Value>;

fn required_str<'a>(args: &'a Args, key: &str) -> Result<&'a str, ToolError> {
    match args.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        Some(Value::String(_)) if key == "state" => Ok(""),
        Some(Value::String(_)) => Err(ToolError::InvalidArguments(format!("`{key}` is empty"))),
        Some(other) => Err(ToolError::InvalidArguments(format!(
            "`{key}` must be a string, not {other}"
        ))),
        None => Err(ToolError::InvalidArguments(format!("`{key}` is required"))),
    }
}

fn optional_str<'a>(args: &'a Args, key: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ToolError::InvalidArguments(format!(
            "`{key}` must be a string, not {other}"
        ))),
    }
}

/// Whether `object`, one of its ancestors or its file carries a privacy
/// tag ([`PrivacyTags::is_private`]).
pub fn is_private(object: ObjectRef<'_>, privacy: &PrivacyTags) -> bool {
    privacy.is_private(object)
}

/// The visible object `id` of `snapshot`, or [`ToolError::UnknownId`] —
/// the same answer for a private object as for a missing one.
pub fn visible_object<'s>(
    snapshot: &'s MemexSnapshot,
    privacy: &PrivacyTags,
    id: &str,
) -> Result<ObjectRef<'s>, ToolError> {
    match snapshot.get(id) {
        Some(object) if !is_private(object, privacy) => Ok(object),
        _ => Err(ToolError::UnknownId(id.to_owned())),
    }
}

fn visible<'s>(cx: &ToolContext<'s>, id: &str) -> Result<ObjectRef<'s>, ToolError> {
    visible_object(cx.snapshot, cx.privacy, id)
}

fn query_memex(args: &Args, cx: &ToolContext<'_>) -> Result<String, ToolError> {
    let tag = optional_str(args, "tag")?;
    let todo = optional_str(args, "todo")?;
    if tag.is_none() && todo.is_none() {
        return Err(ToolError::InvalidArguments(
            "give `tag`, `todo` or both".to_owned(),
        ));
    }
    let limit = match args.get("limit") {
        None | Some(Value::Null) => QUERY_LIMIT,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(n) if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
            _ => {
                return Err(ToolError::InvalidArguments(
                    "`limit` must be a positive integer".to_owned(),
                ));
            }
        },
        Some(other) => {
            return Err(ToolError::InvalidArguments(format!(
                "`limit` must be a positive integer, not {other}"
            )));
        }
    };
    let query = Query {
        tag: tag.map(|t| t.trim().trim_matches(':').to_owned()),
        todo: todo.map(|t| t.trim().to_owned()),
        kind: None,
    };
    let found: Vec<ObjectRef<'_>> = cx
        .snapshot
        .query(&query)
        .into_iter()
        .filter(|o| !is_private(*o, cx.privacy))
        .collect();
    if found.is_empty() {
        return Ok("no matching objects".to_owned());
    }
    let mut out = String::new();
    for object in found.iter().take(limit) {
        out.push_str(object.id());
        out.push_str(" |");
        if let Some(todo) = object.todo() {
            out.push(' ');
            out.push_str(todo);
        }
        out.push(' ');
        out.push_str(object.title());
        let tags: Vec<&str> = object.tags().collect();
        if !tags.is_empty() {
            let _ = write!(out, " :{}:", tags.join(":"));
        }
        out.push('\n');
    }
    if found.len() > limit {
        let _ = writeln!(out, "… {} more", found.len() - limit);
    }
    Ok(out)
}

/// Refuses `state` unless it is a TODO keyword of `object`'s file as
/// tools are told them: a keyword that only a `#+TODO:` line inside a
/// private object declares does not exist for tools (Org reads that line
/// wherever it is, but its words are the private body's). The answer is
/// the memex's own for an unknown keyword, naming the keywords lent.
fn known_state(object: ObjectRef<'_>, state: &str, cx: &ToolContext<'_>) -> Result<(), ToolError> {
    let file = object.file();
    let prepared = crate::memex::view::cached(file, cx.privacy);
    let keywords = prepared.keywords(file);
    if keywords.classify(state).is_some() {
        return Ok(());
    }
    let error = crate::memex::write::WriteError::UnknownKeyword {
        path: file.path.clone(),
        line: object.line(),
        keyword: state.to_owned(),
        known: format!("{} | {}", keywords.todo.join(" "), keywords.done.join(" ")),
    };
    Err(failed(cx.memex, &error))
}

/// `read_object`'s text: the object and the titles of its visible
/// children.
fn describe(object: ObjectRef<'_>, privacy: &PrivacyTags) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "id: {}", object.id());
    let _ = writeln!(out, "title: {}", object.title());
    if let Some(todo) = object.todo() {
        let _ = writeln!(out, "todo: {todo}");
    }
    let tags: Vec<&str> = object.tags().collect();
    if !tags.is_empty() {
        let _ = writeln!(out, "tags: {}", tags.join(" "));
    }
    if let Some(parent) = object.parent() {
        let _ = writeln!(out, "parent: {} ({})", parent.id(), parent.title());
    }
    for (key, value) in object.properties() {
        if !key.eq_ignore_ascii_case("ID") && !key.eq_ignore_ascii_case("EMBEDDING") {
            let _ = writeln!(out, "property {key}: {value}");
        }
    }
    let body = object.body().trim();
    if !body.is_empty() {
        out.push_str("body:\n");
        if body.len() > BODY_LIMIT {
            let mut end = BODY_LIMIT;
            while !body.is_char_boundary(end) {
                end -= 1;
            }
            out.push_str(&body[..end]);
            let _ = writeln!(out, "\n[… {} more bytes]", body.len() - end);
        } else {
            out.push_str(body);
            out.push('\n');
        }
    }
    let children: Vec<ObjectRef<'_>> = object
        .children()
        .filter(|c| !is_private(*c, privacy))
        .collect();
    if !children.is_empty() {
        out.push_str("children:\n");
        for child in children {
            let _ = writeln!(
                out,
                "- {} | {}{}",
                child.id(),
                child.todo().map(|t| format!("{t} ")).unwrap_or_default(),
                child.title()
            );
        }
    }
    out
}

/// The top-level headline entries go under, in a new journal file.
pub const JOURNAL_ROOT: &str = "Journal";

fn journal_entry(
    cx: &mut ToolContext<'_>,
    title: &str,
    text: Option<&str>,
) -> Result<ToolOutput, ToolError> {
    let path = cx.journal.path.clone();
    let shown = memex_relative(&canonical_or(&path).display().to_string(), cx.memex);
    if !cx.memex.is_member(&canonical_or(&path)) {
        // Outside the memex it is named by its file name alone.
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        return Err(ToolError::Failed(format!(
            "the journal file {name} is not inside the memex (config `agent.journal`)"
        )));
    }
    let mut generation = None;
    if !path.exists() {
        create_journal(&path, &shown)?;
        // The host's own file: not news to the agent (`Memex::wrote`).
        generation = Some(cx.memex.adopt(&canonical_or(&path)));
    }
    let snapshot = cx.memex.snapshot();
    let (date, time) = local_now();
    let root = find_root(&snapshot, &canonical_or(&path), cx.privacy).ok_or_else(|| {
        ToolError::Failed(format!(
            "the journal file {shown} has no visible top-level `* {JOURNAL_ROOT}` headline to write under"
        ))
    })?;
    let day = snapshot
        .get(&root)
        .and_then(|root| {
            root.children()
                .find(|c| c.title().starts_with(&date) && !is_private(*c, cx.privacy))
                .map(|c| c.id().to_owned())
        })
        .map_or_else(
            || {
                let written = cx
                    .memex
                    .add_child(&snapshot, &root, &date, None)
                    .map_err(|e| failed(cx.memex, &e))?;
                Ok::<_, ToolError>(written.id)
            },
            Ok,
        )?;
    let snapshot = cx.memex.snapshot();
    let entry = format!("{time} {}", title.trim());
    let written = cx
        .memex
        .add_child(&snapshot, &day, &entry, text)
        .map_err(|e| failed(cx.memex, &e))?;
    generation = Some(written.generation.max(generation.unwrap_or(0)));
    Ok(ToolOutput {
        text: format!(
            "journal entry {entry:?} added under {date} (id {})",
            written.id
        ),
        wrote: generation,
    })
}

/// A memex write's error for the model: its paths named from their memex
/// root.
fn failed(memex: &Memex, error: &impl std::fmt::Display) -> ToolError {
    ToolError::Failed(memex_relative(&error.to_string(), memex))
}

/// `text` with each memex root's absolute path taken out: a file under a
/// root folder is named from that folder (`notes/work.org`), a root file
/// by its file name. What the host tells the model names no path of the
/// machine.
fn memex_relative(text: &str, memex: &Memex) -> String {
    let mut roots: Vec<&Path> = memex.roots().collect();
    // The longest first: a root inside another is named from itself.
    roots.sort_by_key(|root| std::cmp::Reverse(root.as_os_str().len()));
    let mut out = text.to_owned();
    for root in roots {
        let (Some(whole), Some(name)) = (root.to_str(), root.file_name()) else {
            continue;
        };
        out = out.replace(&format!("{whole}/"), "");
        out = out.replace(whole, &name.to_string_lossy());
    }
    out
}

fn canonical_or(path: &Path) -> PathBuf {
    if let Ok(path) = path.canonicalize() {
        return path;
    }
    // A file that does not exist yet: its folder's canonical path.
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => dir
            .canonicalize()
            .map(|d| d.join(name))
            .unwrap_or_else(|_| path.to_owned()),
        _ => path.to_owned(),
    }
}

/// Creates the journal file at `path`, named `shown` in an error.
fn create_journal(path: &Path, shown: &str) -> Result<(), ToolError> {
    use std::io::Write as _;
    let failed = |e: std::io::Error| {
        ToolError::Failed(format!("cannot create the journal file {shown}: {e}"))
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(failed)?;
    file.write_all(format!("#+TITLE: Journal\n\n* {JOURNAL_ROOT}\n").as_bytes())
        .map_err(failed)?;
    file.sync_all().map_err(failed)
}

/// The top-level headline journal entries go under: `* Journal`, else the
/// first top-level headline — never a private one (a journal file private
/// as a whole has none to write under).
fn find_root(snapshot: &MemexSnapshot, path: &Path, privacy: &PrivacyTags) -> Option<String> {
    let top = || {
        snapshot
            .file_objects(path)
            .filter(|o| o.level() == 1 && !is_private(*o, privacy))
    };
    top()
        .find(|o| o.title() == JOURNAL_ROOT)
        .or_else(|| top().next())
        .map(|o| o.id().to_owned())
}

/// Today's date (`2026-11-22 Sunday`) and the time (`14:05`), local.
pub fn local_now() -> (String, String) {
    local_time(std::time::SystemTime::now())
}

/// [`local_now`] of the moment `at`.
pub fn local_time(at: std::time::SystemTime) -> (String, String) {
    let now = at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let t = libc::time_t::try_from(now).unwrap_or(0);
    // SAFETY: `tm` is plain data, zero is a valid bit pattern for it, and
    // `localtime_r` only writes into the struct we pass.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            libc::gmtime_r(&t, &mut tm);
        }
        tm
    };
    const DAYS: [&str; 7] = [
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
    ];
    let day = DAYS[usize::try_from(tm.tm_wday).unwrap_or(0) % 7];
    (
        format!(
            "{:04}-{:02}-{:02} {day}",
            tm.tm_year + 1900,
            tm.tm_mon + 1,
            tm.tm_mday
        ),
        format!("{:02}:{:02}", tm.tm_hour, tm.tm_min),
    )
}

#[cfg(test)]
#[path = "tools_tests.rs"]
mod tests;
