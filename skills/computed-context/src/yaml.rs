//! The YAML a handoff is written in, read by a maintained YAML 1.2 parser
//! ([`yaml_rust2`]): block and flow collections (`- {issue: "…",
//! severity: high}`, as models often write it), every scalar style and
//! escape, `|` and `>` blocks, anchors and aliases, comments, `---`.
//!
//! This module only builds, from the parser's events, the small tree the
//! handoff reader walks ([`Yaml`]): a scalar stays the text it was written
//! as (`007`, `yes`, `1.10`; plain `~`, `null` and nothing are
//! [`Yaml::Null`]), a block scalar loses its final line break, keys are
//! text and a mapping keeps its order. The parser's own tree
//! (`YamlLoader`) turns `007` into the number 7 and `True` into `true`,
//! and cannot say on which line a key or a document is.
//!
//! What is not YAML is a [`YamlError`] with the line the parser stopped
//! at — the last line with text when the handoff ends before a bracket or
//! a quote is closed — so a handoff that does not parse is reported with
//! its file and line. So is what YAML allows and a handoff cannot be: a
//! key that appears twice, a key that is a list or a mapping, a second
//! document, collections nested deeper than [`MAX_DEPTH`], and more than
//! [`MAX_NODES`] values (aliases counted each time they are used).
//!
//! # Example
//!
//! ```ignore
//! let y = yaml::parse("gotchas:\n  - {issue: \"Clock skew\", severity: high}\n")?;
//! let gotcha = &y.get("gotchas").unwrap().items()[0];
//! assert_eq!(gotcha.text(&["severity"]), Some("high"));
//! ```

use std::collections::{HashMap, HashSet};

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Lists and mappings nested deeper than this are refused. A handoff is
/// three levels deep; the limit keeps a hostile one from growing a tree
/// (and the stack that drops it) without end.
pub const MAX_DEPTH: usize = 64;

/// More values than this are refused, an alias counting every value it
/// repeats: a few lines of aliases of aliases can otherwise expand to
/// billions.
pub const MAX_NODES: usize = 100_000;

/// A YAML value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Yaml {
    /// A scalar (booleans and numbers stay text; see [`Yaml::truthy`]).
    Str(String),
    /// A sequence.
    List(Vec<Yaml>),
    /// A mapping, in order.
    Map(Vec<(String, Yaml)>),
    /// Nothing (`key:` with no value).
    Null,
}

impl Yaml {
    /// The value of `key` in a mapping.
    pub fn get(&self, key: &str) -> Option<&Yaml> {
        match self {
            Yaml::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The text of a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Yaml::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The first of `keys` that holds a scalar.
    pub fn text(&self, keys: &[&str]) -> Option<&str> {
        keys.iter()
            .find_map(|k| self.get(k).and_then(Yaml::as_str))
            .filter(|s| !s.is_empty())
    }

    /// The items of a sequence (a scalar is a sequence of one; nothing is
    /// none).
    pub fn items(&self) -> &[Yaml] {
        match self {
            Yaml::List(items) => items,
            Yaml::Null => &[],
            other => std::slice::from_ref(other),
        }
    }

    /// YAML 1.1's true values (`true`, `yes`, `on`, any case).
    pub fn truthy(&self) -> bool {
        matches!(
            self.as_str().map(str::to_ascii_lowercase).as_deref(),
            Some("true" | "yes" | "on" | "y")
        )
    }
}

/// Why a handoff's YAML was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    /// 0-based line of the YAML text.
    pub line: u32,
    /// What is wrong.
    pub message: String,
}

/// Parses `text`: its one document, or [`Yaml::Null`] when it holds none.
pub fn parse(text: &str) -> Result<Yaml, YamlError> {
    // The parser is not expected to panic, but a handoff is text a model
    // wrote: if it ever does, this handoff is reported like any other that
    // does not parse, and the rest of the section stays.
    std::panic::catch_unwind(|| read(text)).unwrap_or_else(|_| {
        Err(YamlError {
            line: 0,
            message: "the YAML parser failed on this text".into(),
        })
    })
}

fn read(text: &str) -> Result<Yaml, YamlError> {
    let last = last_text_line(text);
    // The parser's lines count from 1. An error past the last line with
    // text is the end of the handoff (an unclosed `[`, `{` or quote): it
    // is said on that last line, which is where the reader looks.
    let error = |mark: Marker, message: String| {
        let line = u32::try_from(mark.line().saturating_sub(1)).unwrap_or(u32::MAX);
        if line > last {
            YamlError {
                line: last,
                message: format!("{message} (where the handoff ends)"),
            }
        } else {
            YamlError { line, message }
        }
    };
    let mut parser = Parser::new_from_str(text);
    let mut tree = Tree::default();
    loop {
        // Events one at a time (not `Parser::load`, which recurses once
        // per level of nesting): nothing here grows the stack.
        let (event, mark) = parser
            .next_token()
            .map_err(|e| error(*e.marker(), explain(e.info())))?;
        if event == Event::StreamEnd {
            return Ok(tree.root.unwrap_or(Yaml::Null));
        }
        tree.event(event).map_err(|message| error(mark, message))?;
    }
}

/// The parser's words, with what to do about the mistake models make
/// most: a plain value holding `: ` (`issue: Clock skew: allow 30 s`).
fn explain(info: &str) -> String {
    if info.starts_with("mapping values are not allowed") {
        format!("{info}: quote a value that holds `: ` (`issue: \"a: b\"`)")
    } else {
        info.to_owned()
    }
}

/// The 0-based index of the last line holding more than blanks.
fn last_text_line(text: &str) -> u32 {
    let mut last = 0;
    for (no, line) in text.lines().enumerate() {
        if !line.trim().is_empty() {
            last = no;
        }
    }
    u32::try_from(last).unwrap_or(u32::MAX)
}

/// Plain `~`, `null` (any case) and nothing: YAML's null.
fn is_null(plain: &str) -> bool {
    plain.is_empty() || plain == "~" || plain.eq_ignore_ascii_case("null")
}

/// A scalar as the handoff reader sees it.
fn scalar(mut text: String, style: TScalarStyle) -> Yaml {
    match style {
        TScalarStyle::Plain if is_null(&text) => Yaml::Null,
        // A `|` or `>` block ends with a line break that is YAML's, not
        // the writer's (`context: |` then two lines is those two lines).
        TScalarStyle::Literal | TScalarStyle::Folded => {
            text.truncate(text.trim_end_matches('\n').len());
            Yaml::Str(text)
        }
        _ => Yaml::Str(text),
    }
}

/// A value built, with what the limits count: its values (itself
/// included) and its depth (0 for a scalar).
#[derive(Debug, Clone)]
struct Node {
    value: Yaml,
    nodes: usize,
    depth: usize,
}

/// A list or mapping whose end has not come yet.
#[derive(Debug)]
struct Open {
    kind: Kind,
    /// Its anchor (`&name`), 0 for none.
    anchor: usize,
    /// Its values so far, itself included.
    nodes: usize,
    /// Its depth so far (1 while empty).
    depth: usize,
}

#[derive(Debug)]
enum Kind {
    List(Vec<Yaml>),
    Map {
        entries: Vec<(String, Yaml)>,
        /// The keys so far, to refuse one that appears twice.
        keys: HashSet<String>,
        /// The key whose value comes next.
        key: Option<String>,
    },
}

/// The tree built from the parser's events.
#[derive(Debug, Default)]
struct Tree {
    open: Vec<Open>,
    /// Anchored values by the parser's anchor id.
    anchors: HashMap<usize, Node>,
    documents: usize,
    /// Values built so far (for [`MAX_NODES`]).
    nodes: usize,
    root: Option<Yaml>,
}

impl Tree {
    /// Takes one event; `Err` says why the YAML is not a handoff, at the
    /// event's line.
    fn event(&mut self, event: Event) -> Result<(), String> {
        match event {
            Event::DocumentStart => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(
                        "a second YAML document starts here; a handoff is one document".into(),
                    );
                }
                Ok(())
            }
            Event::Scalar(text, style, anchor, _tag) => {
                self.count(1)?;
                if self.wants_key() {
                    // A key is the text as written (`null:` is the key
                    // `null`).
                    if anchor > 0 {
                        let node = Node {
                            value: Yaml::Str(text.clone()),
                            nodes: 1,
                            depth: 0,
                        };
                        self.anchors.insert(anchor, node);
                    }
                    return self.key(text);
                }
                let node = Node {
                    value: scalar(text, style),
                    nodes: 1,
                    depth: 0,
                };
                self.add(node, anchor)
            }
            Event::Alias(id) => {
                // The limits are checked before the value is copied.
                let (nodes, depth) = self.anchors.get(&id).map_or((1, 0), |n| (n.nodes, n.depth));
                self.count(nodes)?;
                if self.open.len() + depth > MAX_DEPTH {
                    return Err(too_deep());
                }
                let node = self.anchors.get(&id).cloned().unwrap_or(Node {
                    value: Yaml::Null,
                    nodes: 1,
                    depth: 0,
                });
                if self.wants_key() {
                    return match node.value {
                        Yaml::Str(key) => self.key(key),
                        Yaml::Null => self.key(String::new()),
                        Yaml::List(_) | Yaml::Map(_) => Err(not_a_word()),
                    };
                }
                self.add(node, 0)
            }
            Event::SequenceStart(anchor, _tag) => self.begin(Kind::List(Vec::new()), anchor),
            Event::MappingStart(anchor, _tag) => self.begin(
                Kind::Map {
                    entries: Vec::new(),
                    keys: HashSet::new(),
                    key: None,
                },
                anchor,
            ),
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(open) = self.open.pop() else {
                    return Ok(());
                };
                let value = match open.kind {
                    Kind::List(items) => Yaml::List(items),
                    Kind::Map { entries, .. } => Yaml::Map(entries),
                };
                let node = Node {
                    value,
                    nodes: open.nodes,
                    depth: open.depth,
                };
                self.add(node, open.anchor)
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => Ok(()),
        }
    }

    /// Whether the innermost open collection is a mapping waiting for a
    /// key.
    fn wants_key(&self) -> bool {
        matches!(
            self.open.last(),
            Some(Open {
                kind: Kind::Map { key: None, .. },
                ..
            })
        )
    }

    fn key(&mut self, text: String) -> Result<(), String> {
        let Some(Open {
            kind: Kind::Map { keys, key, .. },
            ..
        }) = self.open.last_mut()
        else {
            return Ok(());
        };
        if !keys.insert(text.clone()) {
            return Err(format!("the key `{text}` appears twice"));
        }
        *key = Some(text);
        Ok(())
    }

    fn begin(&mut self, kind: Kind, anchor: usize) -> Result<(), String> {
        if self.wants_key() {
            return Err(not_a_word());
        }
        if self.open.len() >= MAX_DEPTH {
            return Err(too_deep());
        }
        self.count(1)?;
        self.open.push(Open {
            kind,
            anchor,
            nodes: 1,
            depth: 1,
        });
        Ok(())
    }

    /// Puts a finished value where it goes: in the innermost open
    /// collection, or at the root.
    fn add(&mut self, node: Node, anchor: usize) -> Result<(), String> {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        let Some(parent) = self.open.last_mut() else {
            self.root = Some(node.value);
            return Ok(());
        };
        parent.nodes += node.nodes;
        parent.depth = parent.depth.max(node.depth + 1);
        match &mut parent.kind {
            Kind::List(items) => items.push(node.value),
            Kind::Map { entries, key, .. } => {
                // The parser sends each value after its key.
                entries.push((key.take().unwrap_or_default(), node.value));
            }
        }
        Ok(())
    }

    fn count(&mut self, nodes: usize) -> Result<(), String> {
        self.nodes = self.nodes.saturating_add(nodes);
        if self.nodes > MAX_NODES {
            return Err(format!(
                "more than {MAX_NODES} values (an alias counts every value it repeats)"
            ));
        }
        Ok(())
    }
}

fn too_deep() -> String {
    format!("lists and mappings nested deeper than {MAX_DEPTH} levels")
}

fn not_a_word() -> String {
    "a key here is a list or a mapping; a handoff's keys are words".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HANDOFF: &str = r#"
# the seed's handoff fields
summary: JWT login works
dependencies_for_next:
  - file: src/auth/jwt.rs
    reason: token helpers
  - src/auth/mod.rs
patterns_discovered:
- pattern: Validate tokens in middleware
  applies_to: [auth, jwt]
  location: src/auth/middleware.rs:10-40
gotchas:
  - issue: "Clock skew breaks expiry: allow 30 s"
    severity: high
  - issue: Logs are noisy
    severity: low
open_questions:
  - question: Refresh tokens?
    blocking: true
    context: |
      Sessions last a day.
      Users complain.
    recommendation: Add them
  - question: Rename module?
    blocking: false
files_created: []
"#;

    #[test]
    fn the_seeds_handoff_fields_are_read() {
        let y = parse(HANDOFF).unwrap();
        assert_eq!(y.text(&["summary"]), Some("JWT login works"));
        let deps = y.get("dependencies_for_next").unwrap().items();
        assert_eq!(deps.len(), 2);
        assert_eq!(deps[0].text(&["file"]), Some("src/auth/jwt.rs"));
        assert_eq!(deps[1].as_str(), Some("src/auth/mod.rs"));
        let patterns = y.get("patterns_discovered").unwrap().items();
        assert_eq!(patterns[0].get("applies_to").unwrap().items().len(), 2);
        let gotchas = y.get("gotchas").unwrap().items();
        assert_eq!(
            gotchas[0].text(&["issue"]),
            Some("Clock skew breaks expiry: allow 30 s")
        );
        let q = y.get("open_questions").unwrap().items();
        assert!(q[0].get("blocking").unwrap().truthy());
        assert!(!q[1].get("blocking").unwrap().truthy());
        assert_eq!(
            q[0].text(&["context"]),
            Some("Sessions last a day.\nUsers complain.")
        );
        assert_eq!(y.get("files_created").unwrap().items().len(), 0);
    }

    /// YAML as models write it (issue 29, row 8): flow mappings in a block
    /// list and a flow list of them, escapes in double quotes, `''` in
    /// single quotes, anchors and aliases. The subset this replaced
    /// refused the first flow mapping and so the whole handoff.
    const FLOW: &str = r#"summary: "Login works \u2014 tokens are \"signed\",\tchecked\nand refreshed"
gotchas:
  - {issue: "Clock skew: allow 30 s", severity: &sev high}
  - {issue: 'It''s slow', severity: low}
  - issue: Tokens leak in logs
    severity: *sev
patterns_discovered:
  - &mw {pattern: Validate tokens in middleware, applies_to: [auth, jwt], location: "src/auth/middleware.rs:10-40"}
dependencies_for_next: [{file: src/auth/jwt.rs, reason: token helpers}, src/auth/mod.rs]
open_questions:
- {question: Refresh tokens?, blocking: yes, context: "Sessions last\na day."}
again: *mw
"#;

    #[test]
    fn flow_mappings_quoted_escapes_and_anchors_are_read_whole() {
        let y = parse(FLOW).unwrap();
        assert_eq!(
            y.text(&["summary"]),
            Some("Login works \u{2014} tokens are \"signed\",\tchecked\nand refreshed")
        );
        let gotchas = y.get("gotchas").unwrap().items();
        let read: Vec<(&str, &str)> = gotchas
            .iter()
            .map(|g| (g.text(&["issue"]).unwrap(), g.text(&["severity"]).unwrap()))
            .collect();
        assert_eq!(
            read,
            [
                ("Clock skew: allow 30 s", "high"),
                ("It's slow", "low"),
                ("Tokens leak in logs", "high"),
            ]
        );
        let patterns = y.get("patterns_discovered").unwrap().items();
        assert_eq!(
            patterns[0].text(&["pattern"]),
            Some("Validate tokens in middleware")
        );
        assert_eq!(
            patterns[0].text(&["location"]),
            Some("src/auth/middleware.rs:10-40")
        );
        assert_eq!(
            patterns[0].get("applies_to"),
            Some(&Yaml::List(vec![
                Yaml::Str("auth".into()),
                Yaml::Str("jwt".into())
            ]))
        );
        // An alias is a copy of what its anchor holds.
        assert_eq!(y.get("again"), Some(&patterns[0]));
        let deps = y.get("dependencies_for_next").unwrap().items();
        assert_eq!(deps[0].text(&["file"]), Some("src/auth/jwt.rs"));
        assert_eq!(deps[0].text(&["reason"]), Some("token helpers"));
        assert_eq!(deps[1].as_str(), Some("src/auth/mod.rs"));
        let q = &y.get("open_questions").unwrap().items()[0];
        assert_eq!(q.text(&["question"]), Some("Refresh tokens?"));
        assert!(q.get("blocking").unwrap().truthy());
        assert_eq!(q.text(&["context"]), Some("Sessions last\na day."));
    }

    #[test]
    fn scalars_stay_the_text_they_were_written_as() {
        let y =
            parse("n: 007\nb: True\nv: 1.10\nh: 0x1F\nnull: x\ne: ''\nq: \"~\"\nz: ~\n").unwrap();
        assert_eq!(y.text(&["n"]), Some("007"));
        assert_eq!(y.text(&["b"]), Some("True"));
        assert!(y.get("b").unwrap().truthy());
        assert_eq!(y.text(&["v"]), Some("1.10"));
        assert_eq!(y.text(&["h"]), Some("0x1F"));
        // A key is its text; only a plain value is null.
        assert_eq!(y.text(&["null"]), Some("x"));
        assert_eq!(y.get("e"), Some(&Yaml::Str(String::new())));
        assert_eq!(y.text(&["q"]), Some("~"));
        assert_eq!(y.get("z"), Some(&Yaml::Null));
        // `|` and `>` blocks without YAML's final line break.
        let y = parse("l: |\n  one\n  two\nf: >\n  one\n  two\n").unwrap();
        assert_eq!(y.text(&["l"]), Some("one\ntwo"));
        assert_eq!(y.text(&["f"]), Some("one two"));
    }

    #[test]
    fn errors_name_the_line() {
        // The line the parser stopped at (0-based).
        let err = parse("a: 1\n  b: 2\n").unwrap_err();
        assert_eq!(err.line, 1, "{err:?}");
        let err =
            parse("summary: ok\ngotchas:\n  - issue: Clock skew: allow 30 s\n    severity: high\n")
                .unwrap_err();
        assert_eq!(err.line, 2, "{err:?}");
        assert!(err.message.contains("mapping values"), "{err:?}");
        assert!(err.message.contains("quote a value"), "{err:?}");
        // The end of the text is said on its last line with text.
        let err = parse("a: [1, 2\n\n").unwrap_err();
        assert_eq!(err.line, 0, "{err:?}");
        assert!(err.message.contains("flow sequence"), "{err:?}");
        assert!(err.message.ends_with("(where the handoff ends)"), "{err:?}");
        let err = parse("a: 1\nb\n").unwrap_err();
        assert_eq!(err.line, 1, "{err:?}");
        // What YAML allows and a handoff cannot be.
        let err = parse("a: 1\na: 2\n").unwrap_err();
        assert_eq!(err.line, 1, "{err:?}");
        assert!(err.message.contains("`a` appears twice"), "{err:?}");
        let err = parse("summary: a\n---\nsummary: b\n").unwrap_err();
        assert_eq!(err.line, 1, "{err:?}");
        assert!(err.message.contains("second YAML document"), "{err:?}");
        let err = parse("? [a, b]\n: c\n").unwrap_err();
        assert_eq!(err.line, 0, "{err:?}");
        assert!(err.message.contains("keys are words"), "{err:?}");
    }

    #[test]
    fn deep_nesting_and_expanding_aliases_are_refused_not_built() {
        let deep = format!("a: {}{}\n", "[".repeat(100), "]".repeat(100));
        let err = parse(&deep).unwrap_err();
        assert_eq!(err.line, 0, "{err:?}");
        assert!(err.message.contains("deeper than 64"), "{err:?}");
        // Each line's list repeats the one above ten times: the fifth
        // would hold 111,111 values.
        let laughs = "\
a: &a [x, x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
";
        let err = parse(laughs).unwrap_err();
        assert_eq!(err.line, 4, "{err:?}");
        assert!(err.message.contains("more than 100000 values"), "{err:?}");
        // Nesting up to the limit is read.
        let fine = format!("a: {}{}\n", "[".repeat(60), "]".repeat(60));
        assert!(parse(&fine).is_ok());
    }

    #[test]
    fn empty_and_scalar_documents() {
        assert_eq!(parse("").unwrap(), Yaml::Null);
        assert_eq!(parse("# only\n").unwrap(), Yaml::Null);
        assert_eq!(parse("---\n").unwrap(), Yaml::Null);
        assert_eq!(parse("key:\n").unwrap().get("key"), Some(&Yaml::Null));
        assert_eq!(parse("k: 'it''s'\n").unwrap().text(&["k"]), Some("it's"));
        assert_eq!(parse("plain\n").unwrap(), Yaml::Str("plain".into()));
    }
}
