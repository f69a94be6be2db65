//! The `context-window` skill: what the user attaches for the agent to see
//! — code regions, files, errors, REPL output, notes — as a sliding window
//! bounded in items and in tokens (seed 002), rendered as Markdown at
//! prompt component 3000 (the context buffer).
//!
//! The skill holds the windows (one per session) and their logic; the
//! host does the I/O: it reads the files the user attaches, stamps the
//! time, persists each window after every change and hands it back to the
//! skill when the skill (re)loads. See `README.md` beside this crate for
//! the methods, the rendering and where this differs from the seed.

mod item;
mod render;
mod ring;
mod window;

#[cfg(test)]
mod proptests;

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use foveal_sdk::{Component, ComponentsRequest, HostApiRef, Omitted, Role, SkillError, Source};
use serde::Deserialize;
use serde_json::{Value, json};

use item::{Item, ItemType};
use window::{Limits, State, Window};

/// The component id of the window (seed 004's context buffer).
pub const COMPONENT_ID: u32 = 3000;

/// The error code of a call naming a window the skill does not hold (it
/// was reloaded, or the host never opened it): the host opens it with the
/// persisted state and calls again.
pub const NOT_OPEN: u32 = SkillError::SKILL_DEFINED;

/// The windows, by session name. Empty at every load: the host opens each
/// again from what it persisted.
static WINDOWS: Mutex<BTreeMap<String, Window>> = Mutex::new(BTreeMap::new());

fn windows() -> MutexGuard<'static, BTreeMap<String, Window>> {
    // A panic while the lock was held can only have happened between two
    // consistent states of a window (every change is checked before it
    // is made); the host counts panics and quarantines a skill that keeps
    // panicking.
    WINDOWS.lock().unwrap_or_else(|e| e.into_inner())
}

fn init(_host: &HostApiRef) -> Result<(), SkillError> {
    windows().clear();
    foveal_sdk::skill_debug!("context-window ready");
    Ok(())
}

/// Tokens through the host (the model's encoding, cached by content), or
/// the byte length (an upper bound) without it.
fn count(text: &str) -> u32 {
    let n = foveal_sdk::host::count_tokens(text)
        .unwrap_or_else(|| foveal_sdk::host::estimate_tokens(text));
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// An item's tokens: those of its rendered block.
fn item_tokens(item: &Item) -> u32 {
    count(&render::block(item))
}

fn invalid(method: &str, message: impl std::fmt::Display) -> SkillError {
    SkillError::invalid_input(format!("{method}: {message}"))
}

fn args<'a, T: Deserialize<'a>>(method: &str, json: &'a str) -> Result<T, SkillError> {
    serde_json::from_str(json).map_err(|e| invalid(method, format!("bad arguments: {e}")))
}

fn not_open(window: &str) -> SkillError {
    SkillError::new(
        NOT_OPEN,
        format!("window {window:?} is not open; open it with its saved state first"),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenArgs {
    window: String,
    #[serde(default)]
    state: Option<Value>,
    #[serde(default = "default_max_items")]
    max_items: usize,
    #[serde(default)]
    max_tokens: u32,
}

fn default_max_items() -> usize {
    window::DEFAULT_MAX_ITEMS
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AddArgs {
    window: String,
    /// An existing item (seed method 1).
    #[serde(default)]
    item: Option<Value>,
    /// Or raw content (seed method 2), with its type (default `code`)…
    #[serde(default)]
    content: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    /// …its metadata…
    #[serde(default)]
    metadata: Option<Value>,
    /// …and the time, from the host (milliseconds since the Unix epoch).
    #[serde(default)]
    now: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    window: String,
    #[serde(default)]
    types: Vec<String>,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveArgs {
    window: String,
    id: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WindowArgs {
    window: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RenderArgs {
    window: String,
    #[serde(default)]
    budget: Option<u32>,
}

fn state_json(window: &Window) -> Value {
    serde_json::to_value(window.state()).expect("a state serialises")
}

/// The methods (arguments and answers are JSON objects; every one names
/// its `window`, the session):
///
/// - `open {window, state, max_items, max_tokens}` → `{items, tokens,
///   evicted, state}`: holds the window from its saved `state` (`null`:
///   empty) under the limits in force;
/// - `add {window, item}` or `{window, content, type, metadata, now}` →
///   `{added, evicted, state}`;
/// - `get {window, types, limit}` → `{items, tokens, total_tokens,
///   max_items, max_tokens}`;
/// - `remove {window, id}` → `{removed, state}`;
/// - `clear {window}` → `{cleared, state}`;
/// - `render {window, budget}` → `{text, tokens, omitted}`;
/// - `close {window}` → `{closed}`: forgets it (the saved state stays).
///
/// A window that is not open answers error [`NOT_OPEN`]. An invalid item
/// is refused with a message naming the field, and nothing changes.
fn invoke(method: &str, json: &str) -> Result<String, SkillError> {
    let answer = match method {
        "open" => open(args(method, json)?)?,
        "add" => add(args(method, json)?)?,
        "get" => get(args(method, json)?)?,
        "remove" => {
            let a: RemoveArgs = args(method, json)?;
            let mut all = windows();
            let w = all.get_mut(&a.window).ok_or_else(|| not_open(&a.window))?;
            let removed = w.remove(&a.id).map_err(|e| invalid(method, e))?;
            json!({"removed": removed, "state": state_json(w)})
        }
        "clear" => {
            let a: WindowArgs = args(method, json)?;
            let mut all = windows();
            let w = all.get_mut(&a.window).ok_or_else(|| not_open(&a.window))?;
            let cleared = w.clear();
            json!({"cleared": cleared, "state": state_json(w)})
        }
        "render" => {
            let a: RenderArgs = args(method, json)?;
            let all = windows();
            let w = all.get(&a.window).ok_or_else(|| not_open(&a.window))?;
            let (text, omitted) = rendered(w, a.budget);
            let tokens = if text.is_empty() { 0 } else { count(&text) };
            json!({"text": text, "tokens": tokens, "omitted": omitted})
        }
        "close" => {
            let a: WindowArgs = args(method, json)?;
            json!({"closed": windows().remove(&a.window).is_some()})
        }
        other => {
            return Err(SkillError::invalid_input(format!(
                "unknown method {other:?}; the methods are open, add, get, remove, clear, render and close"
            )));
        }
    };
    Ok(answer.to_string())
}

fn open(a: OpenArgs) -> Result<Value, SkillError> {
    let limits = Limits {
        max_items: a.max_items,
        max_tokens: a.max_tokens,
    }
    .check()
    .map_err(|e| invalid("open", e))?;
    let (window, evicted) = match a.state {
        None | Some(Value::Null) => (
            Window::new(limits).map_err(|e| invalid("open", e))?,
            Vec::new(),
        ),
        Some(state) => {
            let state: State = serde_json::from_value(state).map_err(|e| {
                invalid(
                    "open",
                    format!(
                        "the saved window is not valid: {}",
                        item::schema_error(&e.to_string())
                    ),
                )
            })?;
            Window::from_state(state, limits, &item_tokens)
                .map_err(|e| invalid("open", format!("the saved window is not valid: {e}")))?
        }
    };
    let answer = json!({
        "items": window.len(),
        "tokens": window.tokens(),
        "evicted": evicted,
        "state": state_json(&window),
    });
    windows().insert(a.window, window);
    Ok(answer)
}

fn add(a: AddArgs) -> Result<Value, SkillError> {
    let method = "add";
    let mut all = windows();
    let w = all.get_mut(&a.window).ok_or_else(|| not_open(&a.window))?;
    let (added, evicted) = match (a.item, a.content) {
        (Some(_), Some(_)) => {
            return Err(invalid(method, "give an item or content, not both"));
        }
        (None, None) => {
            return Err(invalid(
                method,
                "missing content: give an item or its content",
            ));
        }
        (Some(item), None) => {
            if a.kind.is_some() || a.metadata.is_some() {
                return Err(invalid(
                    method,
                    "type and metadata go inside the item when an item is given",
                ));
            }
            let item = item::parse_item(item).map_err(|e| invalid(method, e))?;
            let tokens = item_tokens(&item);
            let evicted = w
                .add(item.clone(), tokens)
                .map_err(|e| invalid(method, e))?;
            (item, evicted)
        }
        (None, Some(content)) => {
            let kind = match a.kind.as_deref() {
                None => ItemType::Code, // the seed's default
                Some(name) => ItemType::parse(name).map_err(|e| invalid(method, e))?,
            };
            let metadata = match a.metadata {
                None | Some(Value::Null) => None,
                Some(Value::Object(map)) => Some(map),
                Some(_) => return Err(invalid(method, "metadata must be an object or null")),
            };
            let now = a
                .now
                .ok_or_else(|| invalid(method, "missing now: the host gives the time"))?;
            w.add_content(kind, content, metadata, now, &item_tokens)
                .map_err(|e| invalid(method, e))?
        }
    };
    Ok(json!({"added": added, "evicted": evicted, "state": state_json(w)}))
}

fn get(a: GetArgs) -> Result<Value, SkillError> {
    let types = a
        .types
        .iter()
        .map(|t| ItemType::parse(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid("get", e))?;
    let all = windows();
    let w = all.get(&a.window).ok_or_else(|| not_open(&a.window))?;
    let items = w.get(&types, a.limit);
    let tokens: Vec<u32> = items
        .iter()
        .map(|item| {
            w.items_with_tokens()
                .find(|(i, _)| i.id == item.id)
                .map_or(0, |(_, t)| t)
        })
        .collect();
    Ok(json!({
        "items": items,
        "tokens": tokens,
        "total_tokens": w.tokens(),
        "max_items": w.max_items(),
        "max_tokens": w.max_tokens(),
    }))
}

/// The rendering, within `budget` tokens when one is given (the newest
/// items that fit), and how many were left out.
fn rendered(w: &Window, budget: Option<u32>) -> (String, usize) {
    match budget {
        Some(budget) if u64::from(budget) < w.tokens() + 8 => {
            w.render_within(budget, count(render::HEADER))
        }
        _ => (w.render(), 0),
    }
}

/// The `components` hook: the window of the cycle's session at 3000, or
/// nothing when it is empty (or not open). The session is a host fact of
/// the call ([`foveal_sdk::call::session`]); none for a one-off prompt.
fn components(request: &ComponentsRequest<'_>) -> Result<Vec<Component>, SkillError> {
    let Some(session) = foveal_sdk::call::session() else {
        return Ok(Vec::new());
    };
    let all = windows();
    let Some(w) = all.get(&session) else {
        foveal_sdk::skill_debug!("window {session:?} is not open: no section");
        return Ok(Vec::new());
    };
    if w.is_empty() {
        return Ok(Vec::new());
    }
    let (text, omitted) = rendered(w, request.budget_tokens.into_option());
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let mut component = Component::new(
        COMPONENT_ID,
        "context_window",
        "Context Window",
        Role::SYSTEM,
        text,
    );
    if request.explain {
        component.sources = w
            .items()
            .skip(omitted)
            .map(|i| Source {
                id: i.id.as_str().into(),
                reason: i.kind.name().into(),
            })
            .collect();
        if omitted > 0 {
            component.omitted.push(Omitted {
                reason: "budget".into(),
                count: u32::try_from(omitted).unwrap_or(u32::MAX),
            });
        }
    }
    Ok(vec![component])
}

foveal_sdk::export_skill! {
    name: "context-window",
    priority: 40,
    dependencies: [],
    description: "The user's attached context — code, files, errors, REPL output, notes — bounded in items and tokens (seed 002).",
    component_ids: [3000],
    init: init,
    hooks: { components: components, invoke: invoke },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(method: &str, args: Value) -> Result<Value, SkillError> {
        invoke(method, &args.to_string()).map(|s| serde_json::from_str(&s).unwrap())
    }

    #[test]
    fn a_window_must_be_opened_and_answers_each_method() {
        let w = "unit-methods";
        let err = call("get", json!({"window": w})).unwrap_err();
        assert_eq!(err.code, NOT_OPEN);
        call("open", json!({"window": w, "state": null, "max_items": 2})).unwrap();
        let a = call(
            "add",
            json!({"window": w, "content": "print(1)", "type": "code",
                   "metadata": {"filename": "a.py"}, "now": 10}),
        )
        .unwrap();
        assert_eq!(a["added"]["id"], "ctx-1");
        assert_eq!(a["added"]["timestamp"], 10);
        call(
            "add",
            json!({"window": w, "content": "boom", "type": "error", "now": 11}),
        )
        .unwrap();
        let third = call(
            "add",
            json!({"window": w, "content": "note", "type": "text", "now": 12}),
        )
        .unwrap();
        assert_eq!(third["evicted"][0]["id"], "ctx-1");
        assert_eq!(third["state"]["next_id"], 4);
        let got = call("get", json!({"window": w, "types": ["text"]})).unwrap();
        assert_eq!(got["items"].as_array().unwrap().len(), 1);
        let bad = call(
            "add",
            json!({"window": w, "content": "x", "type": "lisp", "now": 1}),
        )
        .unwrap_err();
        assert!(bad.message.contains("unknown type \"lisp\""), "{bad}");
        let missing = call("add", json!({"window": w, "type": "text", "now": 1})).unwrap_err();
        assert!(missing.message.contains("missing content"), "{missing}");
        let removed = call("remove", json!({"window": w, "id": "ctx-2"})).unwrap();
        assert_eq!(removed["removed"]["content"], "boom");
        let text = call("render", json!({"window": w})).unwrap();
        assert_eq!(text["text"], "## Context\n\n### Text\n```text\nnote\n```\n");
        assert_eq!(call("clear", json!({"window": w})).unwrap()["cleared"], 1);
        assert_eq!(call("render", json!({"window": w})).unwrap()["text"], "");
        // Ids are never reused, even after a clear.
        let next = call("add", json!({"window": w, "content": "again", "now": 13})).unwrap();
        assert_eq!(next["added"]["id"], "ctx-4");
        assert_eq!(next["added"]["type"], "code");
        let bad_limits = call("open", json!({"window": w, "max_items": 0})).unwrap_err();
        assert!(
            bad_limits
                .message
                .contains("max_items must be from 1 to 1000")
        );
        assert!(
            call("close", json!({"window": w})).unwrap()["closed"]
                .as_bool()
                .unwrap()
        );
    }

    /// L-003: what the host saved opens as it was, ids going on.
    #[test]
    fn l003_a_saved_window_opens_as_it_was() {
        let w = "unit-saved";
        call("open", json!({"window": w, "state": null})).unwrap();
        call("add", json!({"window": w, "content": "a", "now": 1})).unwrap();
        let saved =
            call("add", json!({"window": w, "content": "b", "now": 2})).unwrap()["state"].clone();
        call("close", json!({"window": w})).unwrap();
        let opened = call("open", json!({"window": w, "state": saved.clone()})).unwrap();
        assert_eq!(opened["state"], saved);
        let next = call("add", json!({"window": w, "content": "c", "now": 3})).unwrap();
        assert_eq!(next["added"]["id"], "ctx-3");
        // A smaller capacity in force evicts the oldest at open.
        let smaller = call("open", json!({"window": w, "state": saved, "max_items": 1})).unwrap();
        assert_eq!(smaller["evicted"][0]["id"], "ctx-1");
        let broken = call(
            "open",
            json!({"window": w, "state": {"items": [{"id": "x"}], "max_items": 5}}),
        )
        .unwrap_err();
        assert!(
            broken.message.contains("the saved window is not valid"),
            "{broken}"
        );
    }
}
