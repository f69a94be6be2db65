//! # foveal-redact: the secret patterns and the matcher
//!
//! Every request body foveal sends to a model passes a last-door check
//! (the host's `foveal::egress` gate). Secret-looking strings — API keys,
//! bearer tokens, private-key blocks, `password = …` assignments — are
//! replaced by `[REDACTED <name>]`, where `<name>` names the pattern that
//! matched. This crate is the one implementation of that check: the
//! `privacy` skill uses it in its `redact` hook, and the host uses the same
//! code when the skill is absent or failing, so the two can never disagree.
//!
//! The patterns are a named list ([`DEFAULT_PATTERNS`]); a configuration may
//! add its own (`[[privacy.patterns]]` in `foveal.toml`) or replace the
//! defaults (`privacy.default_patterns = false`).
//!
//! ## What it may not do
//!
//! It finds and replaces; it never keeps, logs or reports what matched, and
//! it knows nothing of the memex (private text is `foveal-gate`'s). It
//! depends on no other foveal crate, so a skill can use it.
//!
//! # Rules
//!
//! - A pattern is a [`regex`] (Rust syntax). By default the whole match is
//!   replaced. When the regex has capture groups whose names start with
//!   `secret` (`(?P<secret>…)`, `(?P<secret2>…)`), only the text of those
//!   groups is replaced, so `Authorization: Bearer abc…` becomes
//!   `Authorization: Bearer [REDACTED bearer-token]`.
//! - Where matches of several patterns overlap, their union is replaced, so
//!   no part of either survives; the marker names the pattern whose match
//!   starts first (the longer one on a tie, then the earlier in the list).
//! - Empty matches are ignored.
//! - A pattern name is 1–64 characters of ASCII letters, digits, `_`, `.`
//!   and `-` (it is written into the request and the log); `private` is
//!   reserved for the host's private-text marker.
//! - Markers contain no quote and no backslash, so redacting inside a JSON
//!   string leaves the JSON valid.
//!
//! Nothing here logs, and no error carries the text being redacted: a
//! [`Redaction`] reports counts by pattern name, never what matched.
//!
//! # Example
//!
//! ```
//! use foveal_redact::{Pattern, Redactor};
//!
//! let redactor = Redactor::defaults();
//! let out = redactor.redact("curl -H 'Authorization: Bearer abcdef0123456789abcdef' …");
//! assert_eq!(out.text, "curl -H 'Authorization: Bearer [REDACTED bearer-token]' …");
//! assert_eq!(out.counts, [("bearer-token", 1)]);
//!
//! // Your own pattern, added to the defaults.
//! let mine = [Pattern::new("ticket-token", r"TKT-[0-9a-f]{16}")];
//! let redactor = Redactor::configured(&mine, true).unwrap();
//! assert_eq!(redactor.redact("see TKT-0123456789abcdef").text, "see [REDACTED ticket-token]");
//! ```

use std::borrow::Cow;
use std::sync::OnceLock;

use regex::{Regex, RegexSet};

/// The default patterns, as `(name, regex)`, in precedence order (on a tie
/// the earlier name is the one shown).
///
/// Their word boundaries are ASCII ones, `(?-u:\b)`: a key glued to a
/// non-ASCII letter (`ésk-…`) is still found, and, more important, the
/// regex engine's fast lazy DFA cannot follow a Unicode `\b` past a
/// non-ASCII byte and would hand every text with an accent or an emoji to
/// a much slower engine. For the same reason of cost (a fifth of the
/// set's compile time), the keywords of `secret-assignment` ignore ASCII
/// case only (`(?i-u:…)`: `PASSWORD` matches, a Kelvin sign does not
/// stand for `k`).
///
/// | name | what |
/// |---|---|
/// | `private-key` | a PEM `-----BEGIN … PRIVATE KEY-----` block through its `-----END … PRIVATE KEY-----` line (a block with no end: up to the next `"` or the end of the text) |
/// | `anthropic-key` | Anthropic API keys, `sk-ant-…` |
/// | `openai-project-key` | OpenAI project keys, `sk-proj-…` |
/// | `openai-key` | other OpenAI-style keys, `sk-` and at least 20 key characters |
/// | `aws-access-key-id` | AWS access key ids, `AKIA…` / `ASIA…` and 16 more |
/// | `github-token` | GitHub tokens `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` |
/// | `github-pat` | GitHub fine-grained tokens, `github_pat_…` |
/// | `slack-token` | Slack tokens, `xoxb-`, `xoxp-`, `xoxa-`, `xoxo-`, `xoxr-`, `xoxs-` |
/// | `google-api-key` | Google API keys, `AIza` and 35 more |
/// | `jwt` | JSON Web Tokens, `eyJ….eyJ….…` |
/// | `bearer-token` | the token after `Bearer` (16 characters or more) |
/// | `secret-assignment` | the value in `api_key=…`, `"password": "…"`, `client_secret: …`, `AWS_SECRET_ACCESS_KEY=…` and the like (also JSON-escaped, `\"password\": \"…\"`) |
pub const DEFAULT_PATTERNS: &[(&str, &str)] = &[
    (
        "private-key",
        r#"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:[^"]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|[^"]*)"#,
    ),
    ("anthropic-key", r"(?-u:\b)sk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai-project-key", r"(?-u:\b)sk-proj-[A-Za-z0-9_-]{20,}"),
    ("openai-key", r"(?-u:\b)sk-[A-Za-z0-9_-]{20,}"),
    (
        "aws-access-key-id",
        r"(?-u:\b)(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)",
    ),
    ("github-token", r"(?-u:\b)gh[pousr]_[A-Za-z0-9]{36,}"),
    ("github-pat", r"(?-u:\b)github_pat_[A-Za-z0-9_]{22,}"),
    ("slack-token", r"(?-u:\b)xox[abposr]-[A-Za-z0-9-]{10,}"),
    ("google-api-key", r"(?-u:\b)AIza[0-9A-Za-z_-]{35}"),
    (
        "jwt",
        r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    ),
    (
        "bearer-token",
        r"(?i:(?-u:\b)bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)",
    ),
    (
        "secret-assignment",
        // The key, an optional (escaped) closing quote, `:` or `=`, then a
        // double-quoted (possibly JSON-escaped), single-quoted or bare value.
        r#"(?i-u:api[_-]?key|secret[_-]?(?:access[_-]?)?key|client[_-]?secret|access[_-]?token|auth[_-]?token|refresh[_-]?token|private[_-]?key|passw(?:or)?d)\\?["']?[ \t]*[:=][ \t]*(?:\\?"(?P<secret>(?:[^"\\\r\n]|\\[^"\r\n])+)|'(?P<secret2>[^'\r\n]+)|(?P<secret3>[^\s"'\\,;&<>]+))"#,
    ),
];

/// The name the host's private-text marker uses; no pattern may take it.
pub const PRIVATE: &str = "private";

/// The longest pattern name.
pub const MAX_NAME_LEN: usize = 64;

/// One named pattern, as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// The name shown in `[REDACTED <name>]` and in the log.
    pub name: String,
    /// The regex.
    pub regex: String,
}

impl Pattern {
    /// A pattern named `name` matching `regex`.
    pub fn new(name: impl Into<String>, regex: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            regex: regex.into(),
        }
    }

    /// The default patterns ([`DEFAULT_PATTERNS`]).
    pub fn defaults() -> Vec<Self> {
        DEFAULT_PATTERNS
            .iter()
            .map(|(name, regex)| Self::new(*name, *regex))
            .collect()
    }

    /// Checks the name and compiles the regex, for a configuration loader
    /// that wants to report a bad pattern where it was written.
    pub fn check(&self) -> Result<(), PatternError> {
        self.compile().map(|_| ())
    }

    fn compile(&self) -> Result<Matcher, PatternError> {
        check_name(&self.name)?;
        Matcher::new(&self.regex).map_err(|e| PatternError::InvalidRegex {
            name: self.name.clone(),
            message: condense(&e),
        })
    }
}

/// Why a pattern list was refused. Patterns are configuration, not
/// secrets, so the messages quote them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// The name is empty, too long, or has a character other than ASCII
    /// letters, digits, `_`, `.` and `-`.
    #[error(
        "pattern name {name:?} is not allowed: use 1 to {MAX_NAME_LEN} ASCII letters, digits, `_`, `.` or `-`"
    )]
    InvalidName {
        /// The name.
        name: String,
    },
    /// The name is the host's private-text marker.
    #[error(
        "pattern name {PRIVATE:?} is reserved for the host's private-text marker; choose another name"
    )]
    ReservedName,
    /// Two patterns share a name.
    #[error(
        "two patterns are named {name:?}; names must be unique (to replace a default pattern, set `privacy.default_patterns = false` and list the ones you want)"
    )]
    Duplicate {
        /// The name.
        name: String,
    },
    /// The regex does not compile.
    #[error("pattern {name:?}: invalid regex: {message}")]
    InvalidRegex {
        /// The pattern's name.
        name: String,
        /// What the regex parser said, on one line.
        message: String,
    },
    /// The patterns together are too large to compile into one matcher.
    #[error("the secret patterns are too large to compile together: {message}")]
    TooLarge {
        /// What the regex compiler said.
        message: String,
    },
}

fn check_name(name: &str) -> Result<(), PatternError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !ok {
        return Err(PatternError::InvalidName {
            name: name.to_owned(),
        });
    }
    if name == PRIVATE {
        return Err(PatternError::ReservedName);
    }
    Ok(())
}

/// The regex crate's error on one line: `unclosed character class (at
/// character 5 of the regex)` rather than its three-line picture.
fn condense(error: &regex::Error) -> String {
    let regex::Error::Syntax(text) = error else {
        return error.to_string();
    };
    let lines: Vec<&str> = text.lines().collect();
    let message = lines
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("error: "))
        .map(str::trim);
    // The picture: "regex parse error:", "    <regex>", "    ^^^", "error: …".
    let caret = lines
        .iter()
        .find(|l| l.trim_start().starts_with('^'))
        .and_then(|l| l.find('^'))
        .map(|at| at.saturating_sub(4) + 1);
    match (message, caret, lines.len()) {
        (Some(message), Some(at), 4) => format!("{message} (at character {at} of the regex)"),
        (Some(message), _, _) => message.to_owned(),
        _ => lines
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// A pattern of a [`Redactor`]: its own regex is compiled the first time
/// the set says it matches, since most texts match no pattern at all and
/// compiling every pattern twice (alone and in the set) doubled the cost of
/// every start.
#[derive(Debug, Clone)]
struct Compiled {
    name: Box<str>,
    source: Box<str>,
    /// `None` inside: the regex compiled in the set but not alone (not
    /// expected; every text the set matches is then redacted whole).
    matcher: OnceLock<Option<Matcher>>,
}

impl Compiled {
    fn matcher(&self) -> Option<&Matcher> {
        self.matcher
            .get_or_init(|| Matcher::new(&self.source).ok())
            .as_ref()
    }
}

#[derive(Debug, Clone)]
struct Matcher {
    regex: Regex,
    /// Capture groups whose text is replaced; empty: the whole match.
    secret_groups: Vec<usize>,
}

impl Matcher {
    fn new(source: &str) -> Result<Self, regex::Error> {
        let regex = Regex::new(source)?;
        let secret_groups = regex
            .capture_names()
            .enumerate()
            .filter(|(_, name)| name.is_some_and(|n| n.starts_with("secret")))
            .map(|(i, _)| i)
            .collect();
        Ok(Self {
            regex,
            secret_groups,
        })
    }
}

/// A byte range of a text to replace, and the index of the pattern it is
/// shown as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// The pattern (an index into [`Redactor::names`]).
    pub pattern: usize,
}

/// A compiled list of patterns.
#[derive(Debug, Clone)]
pub struct Redactor {
    patterns: Vec<Compiled>,
    /// One pass over the text says which patterns match at all; most texts
    /// match none, and then nothing else runs.
    set: RegexSet,
}

/// A redacted text and what was removed from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redaction<'t, 'r> {
    /// The text with every match replaced by its marker; borrowed when
    /// nothing matched.
    pub text: Cow<'t, str>,
    /// How many passages each pattern removed, by name, in pattern order;
    /// patterns that removed nothing are left out.
    pub counts: Vec<(&'r str, usize)>,
}

impl Redaction<'_, '_> {
    /// The number of passages removed.
    pub fn total(&self) -> usize {
        self.counts.iter().map(|(_, n)| n).sum()
    }
}

impl Redactor {
    /// Compiles `patterns`, in precedence order.
    pub fn new(patterns: &[Pattern]) -> Result<Self, PatternError> {
        let mut compiled: Vec<Compiled> = Vec::with_capacity(patterns.len());
        for pattern in patterns {
            check_name(&pattern.name)?;
            if compiled.iter().any(|c| *c.name == *pattern.name) {
                return Err(PatternError::Duplicate {
                    name: pattern.name.clone(),
                });
            }
            compiled.push(Compiled {
                name: pattern.name.clone().into_boxed_str(),
                source: pattern.regex.clone().into_boxed_str(),
                matcher: OnceLock::new(),
            });
        }
        let set = match RegexSet::new(patterns.iter().map(|p| p.regex.as_str())) {
            Ok(set) => set,
            Err(error) => {
                // Name the pattern at fault when one is wrong on its own.
                for pattern in patterns {
                    pattern.compile()?;
                }
                return Err(PatternError::TooLarge {
                    message: condense(&error),
                });
            }
        };
        Ok(Self {
            patterns: compiled,
            set,
        })
    }

    /// The default patterns ([`DEFAULT_PATTERNS`]).
    pub fn defaults() -> Self {
        // The defaults are constants, compiled by this crate's tests; a
        // failure here is a bug in this file, not in anyone's input.
        Self::new(&Pattern::defaults()).expect("the default secret patterns compile")
    }

    /// `extra` after the defaults (when `defaults`), or `extra` alone.
    pub fn configured(extra: &[Pattern], defaults: bool) -> Result<Self, PatternError> {
        Self::new(&Self::pattern_list(extra, defaults))
    }

    /// The list [`configured`](Self::configured) compiles.
    pub fn pattern_list(extra: &[Pattern], defaults: bool) -> Vec<Pattern> {
        let mut all = if defaults {
            Pattern::defaults()
        } else {
            Vec::new()
        };
        all.extend_from_slice(extra);
        all
    }

    /// The pattern names, in precedence order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.patterns.iter().map(|p| &*p.name)
    }

    /// The name of pattern `index`.
    pub fn name(&self, index: usize) -> &str {
        &self.patterns[index].name
    }

    /// Whether no pattern matches `text` (one pass).
    pub fn is_clean(&self, text: &str) -> bool {
        !self.set.is_match(text)
    }

    /// The spans to replace in `text`: sorted, not overlapping (overlapping
    /// matches are merged), empty matches left out.
    pub fn find(&self, text: &str) -> Vec<Span> {
        let hits = self.set.matches(text);
        if !hits.matched_any() {
            return Vec::new();
        }
        let mut spans = Vec::new();
        for index in hits.iter() {
            let pattern = &self.patterns[index];
            let mut push = |start: usize, end: usize| {
                if end > start {
                    spans.push(Span {
                        start,
                        end,
                        pattern: index,
                    });
                }
            };
            let Some(matcher) = pattern.matcher() else {
                push(0, text.len());
                continue;
            };
            if matcher.secret_groups.is_empty() {
                for m in matcher.regex.find_iter(text) {
                    push(m.start(), m.end());
                }
                continue;
            }
            for captures in matcher.regex.captures_iter(text) {
                let mut any = false;
                for &group in &matcher.secret_groups {
                    if let Some(m) = captures.get(group) {
                        push(m.start(), m.end());
                        any = true;
                    }
                }
                if !any && let Some(m) = captures.get(0) {
                    // No secret group took part: the whole match goes.
                    push(m.start(), m.end());
                }
            }
        }
        let mut spans = merge(spans);
        // Redacting twice changes nothing: a match that lies inside a
        // marker (`password: "[REDACTED secret-assignment]"`) is not a secret.
        if text.contains(MARKER_START) {
            let markers = marker_ranges(text);
            spans.retain(|span| {
                let at = markers.partition_point(|m| m.1 <= span.start);
                markers
                    .get(at)
                    .is_none_or(|m| !(m.0 <= span.start && span.end <= m.1))
            });
        }
        spans
    }

    /// `text` with every match replaced by `[REDACTED <name>]`.
    pub fn redact<'t>(&self, text: &'t str) -> Redaction<'t, '_> {
        let spans = self.find(text);
        if spans.is_empty() {
            return Redaction {
                text: Cow::Borrowed(text),
                counts: Vec::new(),
            };
        }
        let mut counts = vec![0usize; self.patterns.len()];
        let out = replace(text, &spans, |span| {
            counts[span.pattern] += 1;
            marker(&self.patterns[span.pattern].name)
        });
        Redaction {
            text: Cow::Owned(out),
            counts: counts
                .into_iter()
                .enumerate()
                .filter(|(_, n)| *n > 0)
                .map(|(i, n)| (&*self.patterns[i].name, n))
                .collect(),
        }
    }
}

/// Sorts `spans` and merges the overlapping ones; a merged span keeps the
/// pattern of the span that starts first (the longest on a tie, then the
/// earliest pattern).
pub fn merge(mut spans: Vec<Span>) -> Vec<Span> {
    spans.sort_unstable_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then(b.end.cmp(&a.end))
            .then(a.pattern.cmp(&b.pattern))
    });
    let mut merged: Vec<Span> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if span.start < last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    merged
}

/// `text` with each of `spans` (sorted, not overlapping, on character
/// boundaries) replaced by what `label` returns for it. Linear in the text.
pub fn replace(text: &str, spans: &[Span], mut label: impl FnMut(&Span) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for span in spans {
        out.push_str(&text[at..span.start]);
        out.push_str(&label(span));
        at = span.end;
    }
    out.push_str(&text[at..]);
    out
}

const MARKER_START: &str = "[REDACTED ";

/// The marker that replaces a passage matched by pattern `name`.
pub fn marker(name: &str) -> String {
    format!("{MARKER_START}{name}]")
}

/// The byte ranges of the markers in `text`, in order, with their names.
fn markers(text: &str) -> impl Iterator<Item = (usize, usize, &str)> {
    let mut from = 0;
    std::iter::from_fn(move || {
        while let Some(at) = text[from..].find(MARKER_START) {
            let start = from + at;
            let name_start = start + MARKER_START.len();
            let rest = &text[name_start..];
            let name_len = rest
                .bytes()
                .take(MAX_NAME_LEN + 1)
                .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
                .count();
            if name_len > 0
                && name_len <= MAX_NAME_LEN
                && rest.as_bytes().get(name_len) == Some(&b']')
            {
                from = name_start + name_len + 1;
                return Some((start, from, &rest[..name_len]));
            }
            from = name_start;
        }
        None
    })
}

fn marker_ranges(text: &str) -> Vec<(usize, usize)> {
    markers(text).map(|(start, end, _)| (start, end)).collect()
}

/// How many markers of each name `text` holds, sorted by name. A caller
/// that only sees a redactor's output (the host, after a skill's `redact`
/// hook) counts what it removed as the markers added.
pub fn count_markers(text: &str) -> Vec<(String, usize)> {
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for (_, _, name) in markers(text) {
        *counts.entry(name).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(name, n)| (name.to_owned(), n))
        .collect()
}

#[cfg(test)]
mod tests;
