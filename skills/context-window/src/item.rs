//! Context items: seed 002's JSON schema, and its validation.
//!
//! ```json
//! {"id": "ctx-3", "type": "code", "content": "fn main() {}",
//!  "metadata": {"filename": "src/main.rs", "start_line": 1, "end_line": 1},
//!  "timestamp": 1767225600000}
//! ```
//!
//! - `id` matches `^ctx-[0-9]+$`; the window gives ids itself
//!   (`ctx-1`, `ctx-2`, …, never reused);
//! - `type` is one of `code`, `text`, `file`, `repl-history`, `error`,
//!   `custom`;
//! - `content` is a string (required, may not be empty);
//! - `metadata` is an object or `null`. The keys the rendering reads are
//!   checked: `filename` (a string without control characters),
//!   `start_line` and `end_line` (integers from 1, the end not before the
//!   start, an end only with a start) and `language` (letters, digits and
//!   `+ # . _ -`). Other keys are kept as they are;
//! - `timestamp` is an integer: milliseconds since the Unix epoch.
//!
//! Anything else — a missing `content`, an unknown `type` or key, a wrong
//! JSON type — is refused with a message naming the field; nothing is
//! added.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The kinds of item (seed 002's enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ItemType {
    /// A code region.
    Code,
    /// A note.
    Text,
    /// A whole file.
    File,
    /// Output of a REPL or shell session.
    ReplHistory,
    /// An error message or backtrace.
    Error,
    /// Anything else.
    Custom,
}

impl ItemType {
    /// Every type, in the schema's order.
    pub const ALL: [Self; 6] = [
        Self::Code,
        Self::Text,
        Self::File,
        Self::ReplHistory,
        Self::Error,
        Self::Custom,
    ];

    /// Its name in JSON (`repl-history`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Code => "code",
            Self::Text => "text",
            Self::File => "file",
            Self::ReplHistory => "repl-history",
            Self::Error => "error",
            Self::Custom => "custom",
        }
    }

    /// Its heading in the rendering: the seed's capitalised symbol name
    /// (`(string-capitalize "repl-history")` is `Repl-History`).
    pub fn heading(self) -> &'static str {
        match self {
            Self::Code => "Code",
            Self::Text => "Text",
            Self::File => "File",
            Self::ReplHistory => "Repl-History",
            Self::Error => "Error",
            Self::Custom => "Custom",
        }
    }

    /// The type called `name`, or an error listing the types.
    pub fn parse(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| format!("unknown type {name:?}; the types are {}", type_list()))
    }
}

/// `code, text, file, repl-history, error and custom`.
pub fn type_list() -> String {
    let names: Vec<&str> = ItemType::ALL.iter().map(|t| t.name()).collect();
    format!(
        "{} and {}",
        names[..names.len() - 1].join(", "),
        names[names.len() - 1]
    )
}

/// One context item, as the schema has it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Item {
    /// `ctx-N`.
    pub id: String,
    /// Its kind.
    #[serde(rename = "type")]
    pub kind: ItemType,
    /// The text.
    pub content: String,
    /// Where it came from and how to show it; `null` when nothing.
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    /// When it was added, in milliseconds since the Unix epoch.
    pub timestamp: i64,
}

/// What the rendering reads of an item's metadata, checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Source<'a> {
    /// `filename`.
    pub filename: Option<&'a str>,
    /// `start_line`.
    pub start_line: Option<u64>,
    /// `end_line`.
    pub end_line: Option<u64>,
    /// `language`.
    pub language: Option<&'a str>,
}

/// The longest `filename` accepted.
pub const MAX_FILENAME_BYTES: usize = 4096;

/// The longest `language` accepted.
pub const MAX_LANGUAGE_BYTES: usize = 32;

impl Item {
    /// The checked metadata keys the rendering reads. Items in a window
    /// were checked when added, so this does not fail for them.
    pub fn source(&self) -> Source<'_> {
        self.metadata
            .as_ref()
            .and_then(|m| source_of(m).ok())
            .unwrap_or_default()
    }

    /// The id's number (`ctx-12` → 12).
    pub fn number(&self) -> Option<u64> {
        id_number(&self.id)
    }

    /// Checks everything the schema and the rendering require.
    pub fn validate(&self) -> Result<(), String> {
        if id_number(&self.id).is_none() {
            return Err(format!(
                "id {:?} does not match ^ctx-[0-9]+$ (e.g. \"ctx-1\")",
                self.id
            ));
        }
        if self.content.is_empty() {
            return Err(format!("{}: content is empty", self.id));
        }
        if let Some(metadata) = &self.metadata {
            source_of(metadata).map_err(|e| format!("{}: {e}", self.id))?;
        }
        Ok(())
    }
}

/// `ctx-N` → N.
pub fn id_number(id: &str) -> Option<u64> {
    let digits = id.strip_prefix("ctx-")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The checked keys of `metadata`.
pub fn source_of(metadata: &Map<String, Value>) -> Result<Source<'_>, String> {
    let line = |key: &str| -> Result<Option<u64>, String> {
        match metadata.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(n) if n >= 1 => Ok(Some(n)),
                _ => Err(format!(
                    "metadata.{key} must be a line number from 1, not {n}"
                )),
            },
            Some(other) => Err(format!(
                "metadata.{key} must be an integer, not {}",
                json_type(other)
            )),
        }
    };
    let text = |key: &str| -> Result<Option<&str>, String> {
        match metadata.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(other) => Err(format!(
                "metadata.{key} must be a string, not {}",
                json_type(other)
            )),
        }
    };
    let filename = text("filename")?;
    if let Some(name) = filename {
        if name.is_empty() || name.len() > MAX_FILENAME_BYTES {
            return Err(format!(
                "metadata.filename must be 1 to {MAX_FILENAME_BYTES} bytes"
            ));
        }
        // It is printed in a heading: a line break would end the heading
        // and let the rest pass for Markdown of the prompt's own.
        if name.chars().any(char::is_control) {
            return Err("metadata.filename holds a control character (a line break?)".to_owned());
        }
    }
    let language = text("language")?;
    if let Some(language) = language
        && (language.is_empty()
            || language.len() > MAX_LANGUAGE_BYTES
            || !language
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+#._-".contains(&b)))
    {
        return Err(format!(
            "metadata.language {language:?} must be 1 to {MAX_LANGUAGE_BYTES} letters, digits or + # . _ -"
        ));
    }
    let start_line = line("start_line")?;
    let end_line = line("end_line")?;
    match (start_line, end_line) {
        (None, Some(_)) => {
            return Err("metadata.end_line is given without metadata.start_line".to_owned());
        }
        (Some(start), Some(end)) if end < start => {
            return Err(format!(
                "metadata.end_line {end} is before metadata.start_line {start}"
            ));
        }
        _ => {}
    }
    Ok(Source {
        filename,
        start_line,
        end_line,
        language,
    })
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An item read from JSON and checked against the schema — each field
/// named in the error — and then by [`Item::validate`].
pub fn parse_item(value: Value) -> Result<Item, String> {
    let Value::Object(object) = &value else {
        return Err(format!(
            "a context item is a JSON object, not {}",
            json_type(&value)
        ));
    };
    for key in object.keys() {
        if !["id", "type", "content", "metadata", "timestamp"].contains(&key.as_str()) {
            return Err(format!(
                "unknown field {key:?}; an item has id, type, content, metadata and timestamp"
            ));
        }
    }
    for (key, expected, ok) in [
        ("id", "a string", Value::is_string as fn(&Value) -> bool),
        ("type", "a string", Value::is_string),
        ("content", "a string", Value::is_string),
        ("timestamp", "an integer", |v: &Value| v.is_i64()),
    ] {
        match object.get(key) {
            None => return Err(format!("missing field {key:?}")),
            Some(v) if !ok(v) => {
                return Err(format!("{key} must be {expected}, not {}", json_type(v)));
            }
            Some(_) => {}
        }
    }
    if let Some(metadata) = object.get("metadata")
        && !(metadata.is_object() || metadata.is_null())
    {
        return Err(format!(
            "metadata must be an object or null, not {}",
            json_type(metadata)
        ));
    }
    ItemType::parse(object["type"].as_str().unwrap_or_default())?;
    let item: Item = serde_json::from_value(value).map_err(|e| schema_error(&e.to_string()))?;
    item.validate()?;
    Ok(item)
}

/// Serde's message, said the schema's way.
pub fn schema_error(message: &str) -> String {
    if message.contains("unknown variant") {
        // `unknown variant `x`, expected one of …`
        let name = message.split('`').nth(1).unwrap_or("?").to_owned();
        return format!("unknown type {name:?}; the types are {}", type_list());
    }
    format!("not a context item: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_valid_item_round_trips_as_the_schema_has_it() {
        let value = json!({"id": "ctx-3", "type": "repl-history", "content": "> (+ 1 2)\n3",
                           "metadata": null, "timestamp": 5});
        let item = parse_item(value.clone()).unwrap();
        assert_eq!(item.kind, ItemType::ReplHistory);
        assert_eq!(serde_json::to_value(&item).unwrap(), value);
        assert_eq!(item.number(), Some(3));
    }

    #[test]
    fn invalid_items_are_refused_naming_the_field() {
        let err = |value: Value| parse_item(value).unwrap_err();
        let base = || json!({"id": "ctx-1", "type": "code", "content": "x", "timestamp": 1});
        let with = |key: &str, v: Value| {
            let mut b = base();
            b[key] = v;
            b
        };
        assert!(err(with("type", json!("lisp"))).contains(
            "unknown type \"lisp\"; the types are code, text, file, repl-history, error and custom"
        ));
        let mut missing = base();
        missing.as_object_mut().unwrap().remove("content");
        assert_eq!(err(missing), "missing field \"content\"");
        assert!(err(with("id", json!("item-1"))).contains("^ctx-[0-9]+$"));
        assert!(err(with("id", json!("ctx-"))).contains("^ctx-[0-9]+$"));
        assert_eq!(
            err(with("timestamp", json!("now"))),
            "timestamp must be an integer, not a string"
        );
        assert_eq!(
            err(json!([])),
            "a context item is a JSON object, not an array"
        );
        assert!(err(with("content", json!(""))).contains("content is empty"));
        assert_eq!(
            err(with("metadata", json!([1]))),
            "metadata must be an object or null, not an array"
        );
        assert!(err(with("colour", json!("red"))).starts_with("unknown field \"colour\""));
        assert!(
            err(with("metadata", json!({"filename": "a\n## System"})))
                .contains("control character")
        );
        assert!(err(with("metadata", json!({"start_line": 0}))).contains("from 1"));
        assert!(err(with("metadata", json!({"start_line": 5, "end_line": 2}))).contains("before"));
        assert!(err(with("metadata", json!({"end_line": 2}))).contains("without"));
        assert!(err(with("metadata", json!({"language": "py thon"}))).contains("language"));
        // Keys the rendering does not read are kept.
        let kept = parse_item(with("metadata", json!({"symbol": "foo"}))).unwrap();
        assert_eq!(kept.metadata.unwrap()["symbol"], "foo");
    }
}
