//! The YAML a handoff is written in: a small, strict subset, read without
//! a YAML library (the skill depends only on the SDK, serde and
//! serde_json).
//!
//! What it reads: block mappings (`key: value`, `key:` followed by an
//! indented block), block sequences (`- item`, `- key: value` with the
//! item's further keys indented under the first), flow sequences of
//! scalars (`[a, b]`), plain, `'single'` and `"double"` quoted scalars,
//! `|` and `>` block scalars, and `#` comments. Anything else — tabs in
//! the indentation, a line indented where nothing can continue, an
//! unclosed quote or bracket — is an error with the line it is on, so a
//! handoff that does not parse is reported with its file and line.

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

struct Line<'a> {
    no: u32,
    indent: usize,
    text: &'a str,
}

/// Parses `text`.
pub fn parse(text: &str) -> Result<Yaml, YamlError> {
    let mut lines = Vec::new();
    for (no, raw) in text.lines().enumerate() {
        let no = no as u32;
        let content = raw.trim_end();
        let trimmed = content.trim_start_matches(' ');
        if trimmed.is_empty() || trimmed.starts_with('#') {
            lines.push(Line {
                no,
                indent: usize::MAX,
                text: "",
            });
            continue;
        }
        if trimmed.starts_with('\t') {
            return Err(YamlError {
                line: no,
                message: "a tab in the indentation; YAML indents with spaces".into(),
            });
        }
        if trimmed == "---" || trimmed == "..." {
            lines.push(Line {
                no,
                indent: usize::MAX,
                text: "",
            });
            continue;
        }
        lines.push(Line {
            no,
            indent: content.len() - trimmed.len(),
            text: trimmed,
        });
    }
    let mut p = Parser { lines, at: 0 };
    p.skip_blank();
    if p.at >= p.lines.len() {
        return Ok(Yaml::Null);
    }
    let indent = p.lines[p.at].indent;
    let value = p.block(indent)?;
    p.skip_blank();
    if let Some(line) = p.lines.get(p.at) {
        return Err(YamlError {
            line: line.no,
            message: format!(
                "unexpected indentation ({} spaces) after the end of the document's top level",
                line.indent
            ),
        });
    }
    Ok(value)
}

struct Parser<'a> {
    lines: Vec<Line<'a>>,
    at: usize,
}

impl<'a> Parser<'a> {
    fn skip_blank(&mut self) {
        while self.at < self.lines.len() && self.lines[self.at].indent == usize::MAX {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<&Line<'a>> {
        self.skip_blank();
        self.lines.get(self.at)
    }

    /// A block (mapping or sequence) whose lines are indented `indent`.
    fn block(&mut self, indent: usize) -> Result<Yaml, YamlError> {
        let first = self
            .peek()
            .map(|l| l.text.starts_with("- ") || l.text == "-");
        match first {
            Some(true) => self.sequence(indent),
            Some(false) => self.mapping(indent),
            None => Ok(Yaml::Null),
        }
    }

    fn sequence(&mut self, indent: usize) -> Result<Yaml, YamlError> {
        let mut items = Vec::new();
        while let Some(line) = self.peek() {
            if line.indent < indent {
                break;
            }
            let (no, text) = (line.no, line.text);
            if line.indent > indent {
                return Err(bad_indent(no));
            }
            let Some(rest) = text.strip_prefix('-') else {
                break;
            };
            if !(rest.is_empty() || rest.starts_with(' ')) {
                break;
            }
            self.at += 1;
            let rest = rest.trim_start();
            let item_indent = indent + (text.len() - rest.len());
            if rest.is_empty() {
                items.push(self.nested(indent, no)?);
            } else if rest.starts_with("- ") {
                // `- - x`: a nested sequence on the item's line.
                self.lines.insert(
                    self.at,
                    Line {
                        no,
                        indent: item_indent,
                        text: rest,
                    },
                );
                items.push(self.sequence(item_indent)?);
            } else if let Some((key, value)) = split_key(rest, no)? {
                // A mapping item: its first key on the dash's line, the
                // others indented under it.
                let mut entries = vec![(key, self.value_after_key(value, item_indent, no)?)];
                if let Some(next) = self.peek()
                    && next.indent == item_indent
                    && !next.text.starts_with("- ")
                    && let Yaml::Map(more) = self.mapping(item_indent)?
                {
                    entries.extend(more);
                }
                items.push(Yaml::Map(entries));
            } else {
                items.push(scalar(rest, no)?);
            }
        }
        Ok(Yaml::List(items))
    }

    fn mapping(&mut self, indent: usize) -> Result<Yaml, YamlError> {
        let mut entries: Vec<(String, Yaml)> = Vec::new();
        while let Some(line) = self.peek() {
            if line.indent < indent {
                break;
            }
            let (no, text) = (line.no, line.text);
            if line.indent > indent {
                return Err(bad_indent(no));
            }
            if text.starts_with("- ") || text == "-" {
                break;
            }
            let Some((key, value)) = split_key(text, no)? else {
                return Err(YamlError {
                    line: no,
                    message: format!("expected `key: value`, found {:?}", shorten(text)),
                });
            };
            self.at += 1;
            if entries.iter().any(|(k, _)| *k == key) {
                return Err(YamlError {
                    line: no,
                    message: format!("the key `{key}` appears twice"),
                });
            }
            let value = self.value_after_key(value, indent, no)?;
            entries.push((key, value));
        }
        Ok(Yaml::Map(entries))
    }

    /// The value of `key:` whose inline text is `value`, the key's line
    /// indented `indent`.
    fn value_after_key(&mut self, value: &str, indent: usize, no: u32) -> Result<Yaml, YamlError> {
        match value {
            "" => self.nested(indent, no),
            "|" | ">" | "|-" | ">-" | "|+" | ">+" => {
                Ok(Yaml::Str(self.block_scalar(indent, value)))
            }
            v => scalar(v, no),
        }
    }

    /// What follows a key or dash with nothing after it: a deeper block, a
    /// sequence at the key's own indentation (`key:\n- a`), or nothing.
    fn nested(&mut self, indent: usize, _no: u32) -> Result<Yaml, YamlError> {
        match self.peek() {
            Some(next) if next.indent > indent => {
                let deeper = next.indent;
                self.block(deeper)
            }
            Some(next) if next.indent == indent && next.text.starts_with("- ") => {
                self.sequence(indent)
            }
            _ => Ok(Yaml::Null),
        }
    }

    fn block_scalar(&mut self, indent: usize, style: &str) -> String {
        let mut parts: Vec<&str> = Vec::new();
        let mut block_indent = None;
        while self.at < self.lines.len() {
            let line = &self.lines[self.at];
            if line.indent == usize::MAX {
                parts.push("");
                self.at += 1;
                continue;
            }
            if line.indent <= indent {
                break;
            }
            let bi = *block_indent.get_or_insert(line.indent);
            if line.indent < bi {
                break;
            }
            parts.push(line.text);
            self.at += 1;
        }
        while parts.last() == Some(&"") {
            parts.pop();
        }
        if style.starts_with('>') {
            parts.join(" ")
        } else {
            parts.join("\n")
        }
    }
}

fn bad_indent(no: u32) -> YamlError {
    YamlError {
        line: no,
        message: "unexpected indentation: this line is deeper than anything above it can hold"
            .into(),
    }
}

fn shorten(s: &str) -> String {
    s.chars().take(40).collect()
}

/// `key: value` (or `key:`) outside quotes; `None` when the line is not a
/// key.
fn split_key(text: &str, no: u32) -> Result<Option<(String, &str)>, YamlError> {
    if text.starts_with('"') || text.starts_with('\'') {
        let q = text.as_bytes()[0] as char;
        if let Some(end) = text[1..].find(q) {
            let rest = &text[end + 2..];
            if let Some(value) = rest.strip_prefix(':')
                && (value.is_empty() || value.starts_with(' '))
            {
                return Ok(Some((text[1..end + 1].to_owned(), value.trim())));
            }
        }
        return Ok(None);
    }
    if text.starts_with('[') || text.starts_with('{') {
        return Ok(None);
    }
    let bytes = text.as_bytes();
    for i in 0..bytes.len() {
        if bytes[i] == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' ') {
            let key = text[..i].trim();
            if key.is_empty() {
                return Err(YamlError {
                    line: no,
                    message: "a key is empty".into(),
                });
            }
            return Ok(Some((key.to_owned(), text[i + 1..].trim())));
        }
        if bytes[i] == b' ' && bytes.get(i + 1) == Some(&b'#') {
            break;
        }
    }
    Ok(None)
}

/// A scalar or a flow sequence of scalars.
fn scalar(text: &str, no: u32) -> Result<Yaml, YamlError> {
    let text = text.trim();
    if let Some(inner) = text.strip_prefix('[') {
        let Some(inner) = inner.trim_end().strip_suffix(']') else {
            return Err(YamlError {
                line: no,
                message: "a `[` list is not closed on its line".into(),
            });
        };
        let mut items = Vec::new();
        for part in split_flow(inner) {
            let part = part.trim();
            if !part.is_empty() {
                items.push(scalar(part, no)?);
            }
        }
        return Ok(Yaml::List(items));
    }
    if text.starts_with('{') {
        return Err(YamlError {
            line: no,
            message:
                "`{…}` mappings are not read here; write the mapping as indented `key: value` lines"
                    .into(),
        });
    }
    for q in ['"', '\''] {
        if let Some(inner) = text.strip_prefix(q) {
            let Some(end) = inner.rfind(q) else {
                return Err(YamlError {
                    line: no,
                    message: format!("a {q}quoted{q} value is not closed on its line"),
                });
            };
            let value = &inner[..end];
            return Ok(Yaml::Str(if q == '"' {
                value
                    .replace("\\\"", "\"")
                    .replace("\\n", "\n")
                    .replace("\\\\", "\\")
            } else {
                value.replace("''", "'")
            }));
        }
    }
    // A comment after a plain scalar.
    let plain = match text.find(" #") {
        Some(i) => text[..i].trim_end(),
        None => text,
    };
    if plain == "~" || plain.eq_ignore_ascii_case("null") {
        return Ok(Yaml::Null);
    }
    Ok(Yaml::Str(plain.to_owned()))
}

/// Splits a flow sequence's inside on commas outside quotes.
fn split_flow(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut quote = None;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, ',') => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
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

    #[test]
    fn errors_name_the_line() {
        let err = parse("a: 1\n  b: 2\n").unwrap_err();
        assert_eq!(err.line, 1, "{err:?}");
        let err = parse("a: [1, 2\n").unwrap_err();
        assert_eq!(err.line, 0);
        assert!(err.message.contains("not closed"));
        let err = parse("a: 1\nb\n").unwrap_err();
        assert_eq!(err.line, 1);
        let err = parse("a: 1\na: 2\n").unwrap_err();
        assert!(err.message.contains("twice"));
        let err = parse("a:\n\t- x\n").unwrap_err();
        assert_eq!(err.line, 1);
    }

    #[test]
    fn empty_and_scalar_documents() {
        assert_eq!(parse("").unwrap(), Yaml::Null);
        assert_eq!(parse("# only\n").unwrap(), Yaml::Null);
        assert_eq!(parse("key:\n").unwrap().get("key"), Some(&Yaml::Null));
        assert_eq!(parse("k: 'it''s'\n").unwrap().text(&["k"]), Some("it's"));
    }
}
