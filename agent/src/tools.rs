//! The tools the model may call: the host's own, and those skills add.
//!
//! Each tool has a name, a one-line description (the system prompt's tool
//! belt), a JSON schema for its arguments (the request's `tools`), a
//! [`ToolCategory`] and a handler. The categories drive the execution
//! pattern ([`foveal_prompt::execution`]): a `terminal` tool ends the tool loop, a
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
//! Every tool that takes an id takes a handle of the outline too (`^k3`,
//! [`foveal_sdk::handle`]) and says which object it meant; a handle that
//! names no visible object (stale: the outline it came from is older than
//! the memex) or several is refused with a message that says so.
//!
//! Private objects (privacy tags, at any depth) do not exist for tools: a
//! private id is answered exactly like an unknown one, a private object's
//! handle exactly like a handle of nothing (handles are resolved over the
//! visible objects alone), and no tool writes under one. A host tool that writes, and every skill tool whatever
//! category it declares, is refused before it runs when its arguments hold
//! private text or a secret ([`check_arguments`]): what it wrote would be
//! held by a visible object, and so be public. Bad arguments are a
//! [`ToolError`] returned to the model as the tool's result, never a
//! crash. A path in a result is named from its memex root (`work.org`),
//! never as the machine's absolute path.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use foveal_memex::privacy::PrivacyTags;
use foveal_memex::snapshot::{ObjectRef, Query};
use foveal_memex::{Memex, MemexSnapshot};
use foveal_prompt::execution::ToolCategory;
use foveal_provider::ToolDefinition;
use foveal_registry::egress::Gate;

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
    pub fn spec(&self) -> foveal_prompt::prompt::components::ToolSpec {
        foveal_prompt::prompt::components::ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
        }
    }
}

/// The host's tools, in the order they are offered.
pub fn builtins() -> Vec<Tool> {
    // What a tool that takes an object accepts: its id, or its handle.
    let id = || json!({"type": "string", "description": "an object's id, or its handle in the outline (^k3)"});
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
            "Read one memex object by id (or the ^handle the outline ends its line with): state, tags, properties, body, children.",
            ToolCategory::Read,
            Builtin::ReadObject,
            json!({"type": "object", "properties": {"id": id()}, "required": ["id"]}),
        ),
        tool(
            "add_headline",
            "Add a headline under the object with id (or ^handle) parent_id.",
            ToolCategory::Write,
            Builtin::AddHeadline,
            json!({"type": "object", "properties": {
                "parent_id": id(),
                "title": {"type": "string"},
                "body": {"type": "string"}
            }, "required": ["parent_id", "title"]}),
        ),
        tool(
            "set_todo",
            "Set an object's TODO state, by id or ^handle (empty state clears it).",
            ToolCategory::Write,
            Builtin::SetTodo,
            json!({"type": "object", "properties": {
                "id": id(),
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
            "Move the foveal focus to the object with this id or ^handle.",
            ToolCategory::Read,
            Builtin::SetFocus,
            json!({"type": "object", "properties": {"id": id()}, "required": ["id"]}),
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
    /// A handle (`^k3`) that names no visible object: its object is gone,
    /// its id changed, it was mistyped — or it is private, answered alike.
    #[error(
        "no visible object has the handle {0}: the outline it came from may be out of date; use a handle from the current context, or an id (query_memex lists them)"
    )]
    StaleHandle(String),
    /// A handle that names several visible objects (a newer object came to
    /// share it): their ids, each with its title.
    #[error("the handle {handle} names {} objects: {}; give the id instead", candidates.len(), candidates.join(", "))]
    AmbiguousHandle {
        /// The handle, as given.
        handle: String,
        /// `id (title)` of each object it names.
        candidates: Vec<String>,
    },
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
    /// The id of the object it changed, when it names one (a handle it
    /// was given, resolved).
    pub object: Option<String>,
}

impl ToolOutput {
    fn read(text: String) -> Self {
        Self {
            text,
            wrote: None,
            object: None,
        }
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
/// ([`WRITE_REFUSED`](foveal_registry::egress::WRITE_REFUSED)); nothing is written.
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
            let found = visible(cx, required_str(args, "id")?)?;
            let mut text = describe(found.object, cx.privacy);
            if let Some(handle) = &found.handle {
                // After the `id:` line: which object the handle named.
                let at = text.find('\n').map_or(text.len(), |i| i + 1);
                text.insert_str(at, &format!("handle: {handle}\n"));
            }
            Ok(ToolOutput::read(text))
        }
        Builtin::AddHeadline => {
            let parent = visible(cx, required_str(args, "parent_id")?)?;
            let title = required_str(args, "title")?;
            let body = optional_str(args, "body")?;
            let parent_id = parent.object.id().to_owned();
            let written = cx
                .memex
                .add_child(cx.snapshot, &parent_id, title, body)
                .map_err(|e| failed(cx.memex, &e))?;
            let mut text = format!("added headline {:?} with id {}", title.trim(), written.id);
            if parent.handle.is_some() {
                let _ = write!(text, " under {}", parent.named());
            }
            Ok(ToolOutput {
                text,
                wrote: Some(written.generation),
                object: Some(parent_id),
            })
        }
        Builtin::SetTodo => {
            let found = visible(cx, required_str(args, "id")?)?;
            let state = required_str(args, "state")?.trim();
            let id = found.object.id().to_owned();
            let who = if found.handle.is_some() {
                found.named()
            } else {
                id.clone()
            };
            let object = found.object;
            let state = (!state.is_empty()).then_some(state);
            if let Some(state) = state {
                known_state(object, state, cx)?;
            }
            let written = cx
                .memex
                .set_todo(cx.snapshot, &id, state)
                .map_err(|e| failed(cx.memex, &e))?;
            Ok(ToolOutput {
                text: match state {
                    Some(state) if written.changed => format!("{who} is now {state}"),
                    Some(state) => format!("{who} was already {state}"),
                    None => format!("{who} has no TODO state now"),
                },
                wrote: written.changed.then_some(written.generation),
                object: Some(id),
            })
        }
        Builtin::AddJournalEntry => {
            let title = required_str(args, "title")?;
            let text = optional_str(args, "text")?;
            journal_entry(cx, title, text)
        }
        Builtin::SetFocus => {
            let found = visible(cx, required_str(args, "id")?)?;
            let id = found.object.id().to_owned();
            let mut text = format!("focus is now {id} ({})", found.object.title());
            if let Some(handle) = &found.handle {
                let _ = write!(text, ", named by {handle}");
            }
            *cx.focus = Some(id);
            Ok(ToolOutput::read(text))
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

/// A visible object a tool was given, and the handle it was given by.
#[derive(Debug, Clone, Copy)]
pub struct Found<'s, 'h> {
    /// The object.
    pub object: ObjectRef<'s>,
    /// The handle (`^k3`), when it was named by one.
    pub handle: Option<&'h str>,
}

impl Found<'_, '_> {
    /// `id (^k3: title)`: which object a handle named.
    pub fn named(&self) -> String {
        match self.handle {
            Some(handle) => format!("{} ({handle}: {})", self.object.id(), self.object.title()),
            None => format!("{} ({})", self.object.id(), self.object.title()),
        }
    }
}

/// The visible object `reference` names: the object with that id, else
/// the one whose handle it is (`^k3`, or `k3` when no object has that id).
///
/// Handles are resolved over the memex's view, which holds no private
/// object: a private object's handle matches nothing, as a handle of no
/// object; a private id is answered as an unknown one, and then — like an
/// unknown id — tried as a handle of the visible objects.
pub fn resolve<'s, 'h>(
    snapshot: &'s MemexSnapshot,
    privacy: &PrivacyTags,
    reference: &'h str,
) -> Result<Found<'s, 'h>, ToolError> {
    let reference = reference.trim();
    let caret = reference.starts_with(foveal_sdk::handle::SIGIL);
    if !caret && let Ok(object) = visible_object(snapshot, privacy, reference) {
        return Ok(Found {
            object,
            handle: None,
        });
    }
    use foveal_sdk::handle::Resolution;
    let view = foveal_memex::view::SnapshotView::new(snapshot, privacy);
    let owned = view.view();
    let memex_view = owned.as_view();
    match foveal_sdk::handle::resolve(&memex_view, reference) {
        Resolution::Found { file, index } => {
            let id = memex_view.files[file].id(index);
            visible_object(snapshot, privacy, id).map(|object| Found {
                object,
                handle: Some(reference),
            })
        }
        Resolution::Ambiguous(all) => Err(ToolError::AmbiguousHandle {
            handle: reference.to_owned(),
            candidates: all
                .iter()
                .map(|&(f, i)| {
                    let file = &memex_view.files[f];
                    format!("{} ({})", file.id(i), file.title(i))
                })
                .collect(),
        }),
        Resolution::NotFound if caret => Err(ToolError::StaleHandle(reference.to_owned())),
        Resolution::NotAHandle if caret => Err(ToolError::InvalidArguments(format!(
            "{reference:?} is not a handle: a handle is ^ and 2 to 13 letters and digits, as the outline shows it"
        ))),
        Resolution::NotFound | Resolution::NotAHandle => {
            Err(ToolError::UnknownId(reference.to_owned()))
        }
    }
}

fn visible<'s, 'h>(cx: &ToolContext<'s>, reference: &'h str) -> Result<Found<'s, 'h>, ToolError> {
    resolve(cx.snapshot, cx.privacy, reference)
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
    // Each object's handle, as the compact outline shows it: the model
    // may name it by either.
    let view = foveal_memex::view::SnapshotView::new(cx.snapshot, cx.privacy);
    let owned = view.view();
    let handles = foveal_sdk::handle::Handles::new(&owned.as_view());
    let mut out = String::new();
    for object in found.iter().take(limit) {
        out.push_str(object.id());
        let _ = write!(out, " {} |", handles.of(object.id()));
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
    let prepared = foveal_memex::view::cached(file, cx.privacy);
    let keywords = prepared.keywords(file);
    if keywords.classify(state).is_some() {
        return Ok(());
    }
    let error = foveal_memex::write::WriteError::UnknownKeyword {
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
        object: None,
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
    let day =
        foveal_memex::parse::time::WEEKDAY_NAMES[usize::try_from(tm.tm_wday).unwrap_or(0) % 7];
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

#[cfg(test)]
mod handle_tests {
    use foveal_sdk::handle::Handles;

    use super::*;
    use foveal_memex::view::SnapshotView;

    const ORG: &str = "#+TODO: TODO | DONE
* Kitchen :project:
:PROPERTIES:
:ID: kitchen
:END:
** TODO Order cabinets
:PROPERTIES:
:ID: cabinets
:END:
** Diary :@personal:
:PROPERTIES:
:ID: diary
:END:
";

    struct Fixture {
        _dir: tempfile::TempDir,
        memex: Memex,
        privacy: PrivacyTags,
        journal: JournalSettings,
    }

    impl Fixture {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("home.org"), ORG).unwrap();
            let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
            Self {
                journal: JournalSettings {
                    path: dir.path().join("journal.org"),
                },
                _dir: dir,
                memex,
                privacy: PrivacyTags::new(["@personal"]),
            }
        }

        /// The handle the outline shows for `id`, over the visible objects.
        fn handle(&self, id: &str) -> String {
            let snapshot = self.memex.snapshot();
            let view = SnapshotView::new(&snapshot, &self.privacy);
            Handles::new(&view.view().as_view()).of(id).to_string()
        }

        /// The handle `id` would have if it were visible (computed over
        /// every object, private ones included).
        fn handle_ignoring_privacy(&self, id: &str) -> String {
            let snapshot = self.memex.snapshot();
            let view = SnapshotView::new(&snapshot, &PrivacyTags::default());
            Handles::new(&view.view().as_view()).of(id).to_string()
        }

        fn run(
            &self,
            builtin: Builtin,
            args: Value,
            focus: &mut Option<String>,
        ) -> Result<ToolOutput, ToolError> {
            let snapshot = self.memex.snapshot();
            let mut cx = ToolContext {
                memex: &self.memex,
                snapshot: &snapshot,
                privacy: &self.privacy,
                focus,
                journal: &self.journal,
            };
            run_builtin(builtin, &args, &mut cx)
        }
    }

    #[test]
    fn a_handle_names_its_object_in_read_object_set_todo_and_set_focus() {
        let f = Fixture::new();
        let handle = f.handle("cabinets");
        assert!(handle.starts_with('^') && handle.len() == 3, "{handle}");
        let mut focus = None;

        let read = f
            .run(Builtin::ReadObject, json!({"id": handle}), &mut focus)
            .unwrap();
        assert!(
            read.text.starts_with(&format!(
                "id: cabinets\nhandle: {handle}\ntitle: Order cabinets\n"
            )),
            "{}",
            read.text
        );

        let set = f
            .run(Builtin::SetFocus, json!({"id": handle}), &mut focus)
            .unwrap();
        assert_eq!(
            set.text,
            format!("focus is now cabinets (Order cabinets), named by {handle}")
        );
        assert_eq!(focus.as_deref(), Some("cabinets"));

        // Without its caret too.
        let done = f
            .run(
                Builtin::SetTodo,
                json!({"id": &handle[1..], "state": "DONE"}),
                &mut focus,
            )
            .unwrap();
        assert_eq!(
            done.text,
            format!("cabinets ({}: Order cabinets) is now DONE", &handle[1..])
        );
        assert!(done.wrote.is_some());
        let snapshot = f.memex.snapshot();
        assert_eq!(snapshot.get("cabinets").unwrap().todo(), Some("DONE"));
    }

    #[test]
    fn a_stale_handle_is_refused_and_a_private_objects_handle_is_answered_alike() {
        let f = Fixture::new();
        let mut focus = None;
        // A handle no object has: one character off every visible one.
        let taken: Vec<String> = ["kitchen", "cabinets"].map(|id| f.handle(id)).to_vec();
        let stale = ["^00", "^zz", "^k3", "^7q"]
            .into_iter()
            .find(|h| !taken.contains(&h.to_string()))
            .unwrap();
        let error = f
            .run(Builtin::ReadObject, json!({"id": stale}), &mut focus)
            .unwrap_err();
        assert_eq!(error, ToolError::StaleHandle(stale.to_owned()));
        assert!(
            error.to_string().starts_with(&format!(
                "no visible object has the handle {stale}: the outline it came from may be out of date"
            )),
            "{error}"
        );
        // The diary's handle, as it would be were it visible: answered
        // exactly like the stale one.
        let private = f.handle_ignoring_privacy("diary");
        let answers: Vec<String> = [stale, private.as_str()]
            .iter()
            .map(|h| {
                let e = f
                    .run(Builtin::SetFocus, json!({"id": h}), &mut focus)
                    .unwrap_err();
                e.to_string().replace(h, "<handle>")
            })
            .collect();
        assert_eq!(answers[0], answers[1]);
        assert_eq!(focus, None);
        // The private id itself: as an unknown id.
        let error = f
            .run(Builtin::ReadObject, json!({"id": "diary"}), &mut focus)
            .unwrap_err();
        assert_eq!(error.to_string(), "no visible object has that id");
        // Not a handle at all, with a caret.
        let error = f
            .run(Builtin::ReadObject, json!({"id": "^il!"}), &mut focus)
            .unwrap_err();
        assert!(matches!(error, ToolError::InvalidArguments(_)), "{error}");
    }

    #[test]
    fn a_handle_shared_by_two_objects_is_refused_with_both_ids() {
        let dir = tempfile::tempdir().unwrap();
        // Enough objects that two share a 2-character prefix: the handle
        // of that length names both.
        let mut org = String::new();
        for k in 0..200 {
            org.push_str(&format!("* Item {k}\n:PROPERTIES:\n:ID: item-{k}\n:END:\n"));
        }
        std::fs::write(dir.path().join("a.org"), &org).unwrap();
        let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
        let snapshot = memex.snapshot();
        let privacy = PrivacyTags::default();
        let ids: Vec<String> = (0..200).map(|k| format!("item-{k}")).collect();
        let short: Vec<String> = ids
            .iter()
            .map(|id| {
                let mut h = String::from("^");
                foveal_sdk::handle::Handle {
                    hash: foveal_sdk::handle::hash_of(id),
                    len: 2,
                }
                .write_chars(&mut h);
                h
            })
            .collect();
        let Some((a, b)) = (0..200)
            .flat_map(|a| (a + 1..200).map(move |b| (a, b)))
            .find(|&(a, b)| short[a] == short[b])
        else {
            // No two of these ids share 2 characters: nothing to test.
            return;
        };
        let error = resolve(&snapshot, &privacy, &short[a]).unwrap_err();
        let text = error.to_string();
        assert!(
            text.starts_with(&format!("the handle {} names ", short[a])),
            "{text}"
        );
        assert!(text.contains(&format!("{} (Item {a})", ids[a])), "{text}");
        assert!(text.contains(&format!("{} (Item {b})", ids[b])), "{text}");
        // The outline's own handles for them are longer, and resolve.
        let view = SnapshotView::new(&snapshot, &privacy);
        let handles = Handles::new(&view.view().as_view());
        for k in [a, b] {
            let h = handles.of(&ids[k]).to_string();
            assert!(h.len() > 3, "{h}");
            assert_eq!(
                resolve(&snapshot, &privacy, &h).unwrap().object.id(),
                ids[k]
            );
        }
    }
}
