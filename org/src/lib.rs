//! # foveal-org: the Org scanner of the foveal memex
//!
//! One pass over a file's text, headlines with byte ranges. The foveal host
//! reads its memex with it, and `foveal-sdk`'s `testing` feature builds a
//! skill's memex view from Org text with it, so a skill's tests see the
//! structure the host sees.
//!
//! Why not `orgize`: measured on the 100k-headline benchmark file (84 MB),
//! orgize 0.10.0-alpha.10 took 1.6 s and 551 MiB to give the fields we need,
//! this scanner 0.47 s and 260 MiB (peak, including the text). orgize also
//! ignores a file's `#+TODO:` line, drops a whole property drawer when one
//! property is empty (losing the `:ID:`), and loses the `+` of `:KEY+:`.
//! The memex needs only headline structure — markup inside a body is the
//! model's to read — so a scanner that matches Emacs on that structure is
//! the better tool. Its rules, each checked against Emacs 28 / Org 9.5
//! (`org-element-parse-buffer`):
//!
//! - a headline is a line starting with one or more `*` and a space
//!   (`*bold*`, `**x**` and `*<TAB>x` are not);
//! - the first word is a TODO keyword only if it is one of the file's
//!   keywords (`#+TODO:`, `#+SEQ_TODO:`, `#+TYP_TODO:`, merged, with those
//!   of its `#+SETUPFILE:`s in place of each such line — read by
//!   the host's `memex::setup`; default `TODO | DONE`; without `|` the last
//!   word is the done state; fast-access keys like `DONE(d!)` are
//!   stripped);
//! - then an optional `[#A]` priority cookie and `COMMENT`;
//! - tags are the last whitespace-preceded token of the form `:a:b:`;
//! - an optional planning line, then an optional `:PROPERTIES:` … `:END:`
//!   drawer, directly after the headline;
//! - the body is the rest of the section, up to the next headline of any
//!   level;
//! - like Emacs, a `* x` line inside a `#+BEGIN_SRC` block *is* a headline
//!   (Org escapes such lines as `,* x`), so write-back stays compatible;
//! - CRLF files work: `\r` is stripped from fields, ranges stay byte-exact.
//!
//! Every range is a byte range into the file's text, so an edit can splice
//! new text in and leave every other byte as it was.
//!
//! ## What it may not do
//!
//! It reads text and returns ranges: no files, no privacy decisions (which
//! tags make an object private is the memex's), no allocation of the
//! text itself. It depends on no other foveal crate.
//!
//! # Example
//!
//! ```
//! let text = "#+TODO: NEXT | DONE\n* NEXT Write docs :work:\nBody.\n";
//! let parsed = foveal_org::parse(text).unwrap();
//! let h = &parsed.headlines[0];
//! assert_eq!(h.todo.as_deref(), Some("NEXT"));
//! assert_eq!(&text[h.title.start as usize..h.title.end as usize], "Write docs");
//! assert_eq!(h.tags(text).collect::<Vec<_>>(), ["work"]);
//! ```

pub mod agenda;
pub mod time;

use std::ops::Range;

/// A byte range into a file's text, as `u32` (files are capped at 4 GiB).
pub type Span = Range<u32>;

/// The TODO keywords of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TodoKeywords {
    /// Not-done states, in order.
    pub todo: Vec<String>,
    /// Done states, in order.
    pub done: Vec<String>,
}

impl Default for TodoKeywords {
    fn default() -> Self {
        Self {
            todo: vec!["TODO".into()],
            done: vec!["DONE".into()],
        }
    }
}

impl TodoKeywords {
    /// `Some(is_done)` when `word` is one of the keywords (case-sensitive,
    /// as in Org).
    #[inline]
    pub fn classify(&self, word: &str) -> Option<bool> {
        if self.todo.iter().any(|k| k == word) {
            Some(false)
        } else if self.done.iter().any(|k| k == word) {
            Some(true)
        } else {
            None
        }
    }

    /// The keywords declared by `#+TODO:` lines (and `SEQ_TODO`,
    /// `TYP_TODO`) anywhere in `text`, merged; the default when there is
    /// none. (`#+SETUPFILE:` lines are not followed: see
    /// the host's `memex::setup`.)
    pub fn from_text(text: &str) -> Self {
        collect_settings(text, &mut |_, _| None).keywords()
    }

    /// The keywords of sequences written as Emacs' `org-todo-keywords`
    /// holds them, one string per sequence: `"TODO NEXT WAIT | DONE
    /// CNCL"`. As on a `#+TODO:` line, the words after `|` are done
    /// states (without `|`, the last word is), fast-access keys and
    /// logging marks (`WAIT(w@/!)`) are stripped, and the sequences are
    /// merged in order. An empty sequence, or one with two `|`, is refused
    /// with what is wrong.
    ///
    /// ```
    /// let k = foveal_org::TodoKeywords::from_sequences(&["TODO(t) NEXT | DONE(d!) CNCL(c@)", "PROJ | DONE"]).unwrap();
    /// assert_eq!(k.todo, ["TODO", "NEXT", "PROJ"]);
    /// assert_eq!(k.done, ["DONE", "CNCL"]);
    /// ```
    pub fn from_sequences<S: AsRef<str>>(sequences: &[S]) -> Result<Self, String> {
        let mut settings = Settings::default();
        for sequence in sequences {
            let sequence = sequence.as_ref();
            if sequence
                .split_ascii_whitespace()
                .filter(|w| *w == "|")
                .count()
                > 1
            {
                return Err(format!(
                    "{sequence:?} has two `|`; one separates the not-done states from the done ones"
                ));
            }
            if !settings.add_sequence(sequence) {
                return Err(format!("{sequence:?} names no keyword"));
            }
        }
        Ok(settings.keywords())
    }
}

/// The in-buffer settings of a file that the memex reads, in the order
/// their lines come: its TODO keywords (`#+TODO:`, `#+SEQ_TODO:`,
/// `#+TYP_TODO:`), its file tags (`#+FILETAGS:`) and its tag list
/// (`#+TAGS:`) — with, in place of each `#+SETUPFILE:` line, the settings
/// of the setup file (as Org inserts them; see the host's `memex::setup`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// Not-done words of the keyword lines, in order, repeats kept.
    todo: Vec<String>,
    /// Done words of the keyword lines, in order, repeats kept.
    done: Vec<String>,
    /// Whether a keyword line was seen (else the default applies).
    declared: bool,
    /// The file tags, in order, each once: every headline inherits them.
    pub file_tags: Vec<String>,
    /// The tags `#+TAGS:` lines offer (their fast-access keys and group
    /// markers removed), in order, each once.
    pub tags: Vec<String>,
    /// The keywords of a file that declares none (else `TODO | DONE`).
    fallback: Option<TodoKeywords>,
}

impl Settings {
    /// The TODO keywords: the declared ones merged (a word declared twice
    /// counts once, and a word declared both ways is a not-done state, as
    /// [`TodoKeywords::classify`] answers), or — when no line declares
    /// any — those of [`Settings::with_fallback`], or the default.
    pub fn keywords(&self) -> TodoKeywords {
        if !self.declared {
            return self.fallback.clone().unwrap_or_default();
        }
        let mut seen = std::collections::HashSet::new();
        let mut todo = self.todo.clone();
        let mut done = self.done.clone();
        todo.retain(|w| seen.insert(w.clone()));
        done.retain(|w| seen.insert(w.clone()));
        TodoKeywords { todo, done }
    }

    /// These settings, with `keywords` as the TODO keywords when no line
    /// (of the file or of its setup files) declares any: what Emacs'
    /// `org-todo-keywords` is to a buffer without `#+TODO:`.
    pub fn with_fallback(mut self, keywords: Option<TodoKeywords>) -> Self {
        self.fallback = keywords;
        self
    }

    /// Whether a `#+TODO:`, `#+SEQ_TODO:` or `#+TYP_TODO:` line (the
    /// file's or a setup file's) declares keywords.
    pub fn declares_keywords(&self) -> bool {
        self.declared
    }

    /// Adds the keywords of one sequence (the value of a `#+TODO:` line);
    /// whether it named any.
    fn add_sequence(&mut self, value: &str) -> bool {
        self.declared = true;
        let words: Vec<&str> = value
            .split_ascii_whitespace()
            .map(|w| w.split('(').next().unwrap_or(w))
            .filter(|w| !w.is_empty())
            .collect();
        if let Some(bar) = words.iter().position(|w| *w == "|") {
            self.todo.extend(words[..bar].iter().map(|s| s.to_string()));
            self.done
                .extend(words[bar + 1..].iter().map(|s| s.to_string()));
        } else if let Some((last, rest)) = words.split_last() {
            self.todo.extend(rest.iter().map(|s| s.to_string()));
            self.done.push(last.to_string());
        }
        words.iter().any(|w| *w != "|")
    }

    /// Appends `other`'s settings after these, as if its lines came here.
    pub fn extend(&mut self, other: &Settings) {
        self.todo.extend(other.todo.iter().cloned());
        self.done.extend(other.done.iter().cloned());
        self.declared |= other.declared;
        for tag in &other.file_tags {
            push_once(&mut self.file_tags, tag);
        }
        for tag in &other.tags {
            push_once(&mut self.tags, tag);
        }
    }
}

fn push_once(list: &mut Vec<String>, word: &str) {
    if !list.iter().any(|t| t == word) {
        list.push(word.to_owned());
    }
}

/// Reads the in-buffer settings of `text` in one pass over its lines.
/// For each `#+SETUPFILE:` line, `setup` is asked with the line's 1-based
/// number and its value; the settings it answers are inserted there.
///
/// Settings are read from every line, wherever it is (Org reads them from
/// the whole buffer). File tags are split at spaces and colons, so
/// `:a:b:`, `a b` and `:a: :b:` all give `a` and `b`. A line inside a
/// source block counts too: privacy follows file tags, and reading one
/// too many makes a file private, never public.
pub fn collect_settings(
    text: &str,
    setup: &mut dyn FnMut(u32, &str) -> Option<Settings>,
) -> Settings {
    let mut settings = Settings::default();
    // A byte-order mark opening the file is not text (Emacs drops it).
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (n, line) in text.split('\n').enumerate() {
        let l = line.trim_start_matches([' ', '\t']);
        if !l.starts_with("#+") {
            continue;
        }
        let Some(colon) = l.find(':') else { continue };
        let key = &l[2..colon];
        let value = l[colon + 1..].trim_end_matches('\r');
        if key.eq_ignore_ascii_case("FILETAGS") {
            for tag in value
                .split(|c: char| c == ':' || c.is_whitespace())
                .filter(|t| !t.is_empty())
            {
                push_once(&mut settings.file_tags, tag);
            }
        } else if key.eq_ignore_ascii_case("TAGS") {
            for word in value.split_whitespace() {
                // `work(w)`: the tag and its fast-access key; `{`, `}`,
                // `[`, `]`, `\n` and `:` mark groups and line breaks.
                let tag = word.split('(').next().unwrap_or(word);
                if tag.is_empty() || tag.starts_with(['{', '}', '[', ']', '\\', ':']) {
                    continue;
                }
                push_once(&mut settings.tags, tag);
            }
        } else if key.eq_ignore_ascii_case("SETUPFILE") {
            if let Some(included) = setup(n as u32 + 1, value.trim()) {
                settings.extend(&included);
            }
        } else if key.eq_ignore_ascii_case("TODO")
            || key.eq_ignore_ascii_case("SEQ_TODO")
            || key.eq_ignore_ascii_case("TYP_TODO")
        {
            settings.add_sequence(value);
        }
    }
    settings
}

/// One `:KEY: value` line of a property drawer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// The key (without colons).
    pub key: Span,
    /// The value, trimmed; may be empty.
    pub value: Span,
}

/// One headline as scanned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Headline {
    /// Number of stars.
    pub level: u16,
    /// 1-based line of the headline.
    pub line: u32,
    /// The TODO keyword, if the first word is one.
    pub todo: Option<Box<str>>,
    /// Whether `todo` is a done state.
    pub done: bool,
    /// The `[#A]` cookie.
    pub priority: Option<char>,
    /// Whether the headline is `COMMENT`ed.
    pub commented: bool,
    /// The title without keyword, priority, `COMMENT` and tags.
    pub title: Span,
    /// The `:a:b:` token of its own tags (empty, at the end of the
    /// headline's text, when it has none); read them with
    /// [`Headline::tags`]. A span, not strings: 100,000 headlines' tags as
    /// owned strings cost about 9 MiB.
    pub tags_token: Span,
    /// Where its TODO keyword is (empty when it has none).
    pub todo_span: Span,
    /// Its property drawer's lines, in order.
    pub properties: Box<[Property]>,
    /// Index of the parent headline.
    pub parent: Option<u32>,
    /// The headline line to the next headline of the same or a higher level.
    pub subtree: Span,
    /// The headline line to the next headline of any level.
    pub own: Span,
    /// The end of the headline line, newline included: where a planning
    /// line or a drawer would start.
    pub after_headline: u32,
    /// The `:PROPERTIES:` … `:END:` lines, the last newline included.
    pub drawer: Option<Span>,
    /// The body: after the planning line and drawer, to the next headline.
    pub body: Span,
}

impl Headline {
    /// Its planning line (`SCHEDULED:`, `DEADLINE:`, `CLOSED:`), its newline
    /// included; read it with [`time::planning`].
    pub fn planning(&self) -> Option<Span> {
        let next = self.drawer.as_ref().map_or(self.body.start, |d| d.start);
        (next > self.after_headline).then_some(self.after_headline..next)
    }

    /// Its own tags, in order; `text` is its file's text.
    pub fn tags<'a>(&self, text: &'a str) -> impl Iterator<Item = &'a str> + use<'a> {
        text[self.tags_token.start as usize..self.tags_token.end as usize]
            .split(':')
            .filter(|t| !t.is_empty())
    }
}

/// A scanned file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// Its TODO keywords.
    pub keywords: TodoKeywords,
    /// Its file tags (`#+FILETAGS:`), in order, each once: every headline
    /// of the file inherits them.
    pub file_tags: Vec<String>,
    /// The tags its `#+TAGS:` lines offer, in order, each once.
    pub tags: Vec<String>,
    /// Its headlines in file order; a parent comes before its children.
    pub headlines: Vec<Headline>,
}

/// Why a file was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// 1-based line.
    pub line: u32,
    /// What is wrong.
    pub message: String,
}

/// The level of a headline line (its newline removed), if it is one.
#[inline]
fn headline_level(line: &[u8]) -> Option<usize> {
    if line.first() != Some(&b'*') {
        return None;
    }
    let n = line.iter().take_while(|&&b| b == b'*').count();
    (line.get(n) == Some(&b' ')).then_some(n)
}

/// Lines as `(start, end without newline, start of next)`.
struct Lines<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Iterator for Lines<'_> {
    type Item = (usize, usize, usize);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        let start = self.pos;
        let (end, next) = match memchr::memchr(b'\n', &self.bytes[start..]) {
            Some(i) => (start + i, start + i + 1),
            None => (self.bytes.len(), self.bytes.len()),
        };
        self.pos = next;
        Some((start, end, next))
    }
}

#[inline]
fn strip_cr(s: &str) -> &str {
    s.strip_suffix('\r').unwrap_or(s)
}

fn is_tag_token(t: &str) -> bool {
    t.len() >= 2
        && t.starts_with(':')
        && t.ends_with(':')
        && t.chars()
            .all(|c| c == ':' || c.is_alphanumeric() || matches!(c, '_' | '@' | '#' | '%'))
        && t.bytes().any(|b| b != b':')
}

/// Where `part` (a subslice of `text`) starts in `text`.
#[inline]
fn offset(text: &str, part: &str) -> u32 {
    (part.as_ptr() as usize - text.as_ptr() as usize) as u32
}

fn span(text: &str, part: &str) -> Span {
    let start = offset(text, part);
    start..start + part.len() as u32
}

struct HeadlineFields {
    todo: Option<Box<str>>,
    done: bool,
    priority: Option<char>,
    commented: bool,
    title: Span,
    tags_token: Span,
    todo_span: Span,
}

/// Parses what follows the stars of a headline.
fn parse_headline_rest(text: &str, rest: &str, keywords: &TodoKeywords) -> HeadlineFields {
    let mut s = rest.trim_end_matches([' ', '\t', '\r']);
    // Tags: the last token, preceded by whitespace (the space after the
    // stars counts, so `* :tag:` is a headline with a tag and no title).
    let end = offset(text, s) + s.len() as u32;
    let mut tags_token = end..end;
    if s.ends_with(':') {
        let cut = s.rfind([' ', '\t']).map(|i| i + 1).unwrap_or(0);
        let token = &s[cut..];
        if is_tag_token(token) {
            tags_token = span(text, token);
            s = s[..cut].trim_end_matches([' ', '\t']);
        }
    }
    let mut s = s.trim_start_matches([' ', '\t']);
    let mut todo = None;
    let mut done = false;
    let start = offset(text, s);
    let mut todo_span = start..start;
    let word_end = s.find([' ', '\t']).unwrap_or(s.len());
    if word_end > 0
        && let Some(is_done) = keywords.classify(&s[..word_end])
    {
        todo = Some(Box::from(&s[..word_end]));
        todo_span = span(text, &s[..word_end]);
        done = is_done;
        s = s[word_end..].trim_start_matches([' ', '\t']);
    }
    let mut priority = None;
    let b = s.as_bytes();
    if b.len() >= 4
        && b[0] == b'['
        && b[1] == b'#'
        && let Some(c) = s[2..].chars().next()
    {
        let after = 2 + c.len_utf8();
        if s[after..].starts_with(']')
            && matches!(s.as_bytes().get(after + 1), None | Some(b' ') | Some(b'\t'))
        {
            priority = Some(c);
            s = s[after + 1..].trim_start_matches([' ', '\t']);
        }
    }
    let mut commented = false;
    if let Some(r) = s.strip_prefix("COMMENT")
        && (r.is_empty() || r.starts_with([' ', '\t']))
    {
        commented = true;
        s = r.trim_start_matches([' ', '\t']);
    }
    HeadlineFields {
        todo,
        done,
        priority,
        commented,
        title: span(text, s.trim_end_matches([' ', '\t'])),
        tags_token,
        todo_span,
    }
}

/// `:KEY: value` → key and value spans. The value may be empty.
fn parse_property(text: &str, line: &str) -> Option<Property> {
    let l = line.trim_start_matches([' ', '\t']).strip_prefix(':')?;
    let colon = l.find(':')?;
    let key = &l[..colon];
    if key.is_empty() || key.contains([' ', '\t']) {
        return None;
    }
    let value = &l[colon + 1..];
    if !(value.is_empty() || value.starts_with([' ', '\t'])) {
        return None;
    }
    Some(Property {
        key: span(text, key),
        value: span(text, value.trim_matches([' ', '\t'])),
    })
}

/// The UTF-8 byte-order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Whether `line` is a planning line: it starts (after blanks) with
/// `SCHEDULED:`, `DEADLINE:` or `CLOSED:`. Org reads one only directly
/// after a headline.
pub fn is_planning(line: &str) -> bool {
    let l = line.trim_start_matches([' ', '\t']);
    ["SCHEDULED:", "DEADLINE:", "CLOSED:"]
        .iter()
        .any(|p| l.starts_with(p))
}

/// Scans `text`. The TODO keywords come from its own `#+TODO:` lines
/// (its `#+SETUPFILE:` lines are not followed; see [`parse_with`]).
///
/// Refused (the error names the line): a file over 4 GiB, and a property
/// drawer that never ends — the mark of a file cut off while being written.
pub fn parse(text: &str) -> Result<Parsed, ParseError> {
    parse_with(text, collect_settings(text, &mut |_, _| None))
}

/// Scans `text` with its in-buffer settings already read
/// ([`collect_settings`], setup files included).
pub fn parse_with(text: &str, settings: Settings) -> Result<Parsed, ParseError> {
    if text.len() > u32::MAX as usize {
        return Err(ParseError {
            line: 1,
            message: "file is larger than 4 GiB".into(),
        });
    }
    let keywords = settings.keywords();
    let bytes = text.as_bytes();
    let end_of_text = bytes.len() as u32;
    let mut headlines: Vec<Headline> = Vec::new();
    // Open subtrees as (index, real star count): `level` saturates at
    // u16::MAX, the comparison must not.
    let mut stack: Vec<(u32, usize)> = Vec::new();
    let mut current: Option<usize> = None;
    let mut lines = Lines { bytes, pos: 0 };
    let mut line_no = 0u32;

    while let Some((mut start, end, next)) = lines.next() {
        line_no += 1;
        if start == 0 && bytes.starts_with(BOM) {
            // A byte-order mark opening the file is not text (Emacs drops
            // it): a headline may follow it.
            start = BOM.len();
        }
        let Some(level) = headline_level(&bytes[start..end]) else {
            continue;
        };
        let at = start as u32;
        // A headline closes the current section and every subtree at its
        // level or deeper.
        if let Some(c) = current {
            headlines[c].own.end = at;
            headlines[c].body.end = at;
        }
        while let Some(&(top, top_level)) = stack.last() {
            if top_level >= level {
                headlines[top as usize].subtree.end = at;
                stack.pop();
            } else {
                break;
            }
        }

        let fields = parse_headline_rest(text, &text[start + level + 1..end], &keywords);
        let index = headlines.len() as u32;
        let mut headline = Headline {
            level: level.min(u16::MAX as usize) as u16,
            line: line_no,
            todo: fields.todo,
            done: fields.done,
            priority: fields.priority,
            commented: fields.commented,
            title: fields.title,
            tags_token: fields.tags_token,
            todo_span: fields.todo_span,
            properties: Box::new([]),
            parent: stack.last().map(|&(index, _)| index),
            subtree: at..end_of_text,
            own: at..end_of_text,
            after_headline: next as u32,
            drawer: None,
            body: next as u32..end_of_text,
        };

        // A planning line, then a property drawer, directly after the headline.
        let mut body_start = next;
        let mut consumed = 0u32;
        let mut peek = Lines { bytes, pos: next };
        if let Some((s, e, nx)) = peek.next() {
            let mut line = strip_cr(&text[s..e]);
            let mut after = nx;
            let mut drawer_line = line_no + 1;
            if headline_level(&bytes[s..e]).is_none() && is_planning(line) {
                consumed += 1;
                body_start = nx;
                drawer_line += 1;
                match peek.next() {
                    Some((s2, e2, nx2)) => {
                        line = strip_cr(&text[s2..e2]);
                        after = nx2;
                    }
                    None => line = "",
                }
            }
            if line
                .trim_matches([' ', '\t'])
                .eq_ignore_ascii_case(":PROPERTIES:")
            {
                let drawer_start = body_start;
                let mut properties = Vec::new();
                let mut closed = false;
                let mut drawer_lines = 1u32;
                for (s, e, nx) in (Lines { bytes, pos: after }) {
                    if headline_level(&bytes[s..e]).is_some() {
                        break;
                    }
                    drawer_lines += 1;
                    let l = strip_cr(&text[s..e]);
                    if l.trim_matches([' ', '\t']).eq_ignore_ascii_case(":END:") {
                        closed = true;
                        body_start = nx;
                        break;
                    }
                    if let Some(p) = parse_property(text, l) {
                        properties.push(p);
                    }
                }
                if !closed {
                    return Err(ParseError {
                        line: drawer_line,
                        message: "property drawer has no :END: (was the file cut off while being written?)".into(),
                    });
                }
                consumed += drawer_lines;
                headline.drawer = Some(drawer_start as u32..body_start as u32);
                headline.properties = properties.into_boxed_slice();
            }
        }
        if consumed > 0 {
            lines.pos = body_start;
            line_no += consumed;
        }
        headline.body = body_start as u32..end_of_text;
        headlines.push(headline);
        stack.push((index, level));
        current = Some(index as usize);
    }
    if let Some(c) = current {
        headlines[c].own.end = end_of_text;
        headlines[c].body.end = end_of_text;
    }
    for (top, _) in stack {
        headlines[top as usize].subtree.end = end_of_text;
    }
    Ok(Parsed {
        keywords,
        file_tags: settings.file_tags,
        tags: settings.tags,
        headlines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(text: &str, s: &Span) -> String {
        text[s.start as usize..s.end as usize].to_owned()
    }

    const EDGE: &str = "#+TITLE: Edge cases
#+TODO: TODO(t) NEXT | DONE(d!) CANCELLED
#+SEQ_TODO: REVIEW | APPROVED

* TODO [#A] First headline with tags   :work:urgent:
SCHEDULED: <2024-01-01 Mon>
:PROPERTIES:
:ID: id-1
:EMBEDDING: 0.1 0.2 0.3
:MULTI+: more
:END:
Body line one.
*bold* at column 0 is not a headline.
**also bold** not a headline
*\ttab after star
** NEXT Child with colons a:b: in title and tags :x:
:PROPERTIES:
  :ID:   id-2  
:EMPTY:
:END:

*** APPROVED Grandchild
* CANCELLED Second top
** REVIEW Review item :a:b_c:@home:
** TODOS not a keyword
** todo lowercase is not a keyword
** Title ending in colon:
** :onlytag:
*** Jumped level
**** Café ünïcode :tág:
Ünïcode body.
** COMMENT commented
* DONE last without newline :z:";

    #[test]
    fn scans_the_edge_cases_as_emacs_does() {
        let p = parse(EDGE).unwrap();
        let titles: Vec<String> = p.headlines.iter().map(|h| get(EDGE, &h.title)).collect();
        assert_eq!(
            titles,
            [
                "First headline with tags",
                "Child with colons a:b: in title and tags",
                "Grandchild",
                "Second top",
                "Review item",
                "TODOS not a keyword",
                "todo lowercase is not a keyword",
                "Title ending in colon:",
                "",
                "Jumped level",
                "Café ünïcode",
                "commented",
                "last without newline",
            ]
        );
        let h = &p.headlines[0];
        assert_eq!(h.todo.as_deref(), Some("TODO"));
        assert_eq!(h.priority, Some('A'));
        assert_eq!(h.tags(EDGE).collect::<Vec<_>>(), ["work", "urgent"]);
        assert_eq!(get(EDGE, &h.tags_token), ":work:urgent:");
        assert_eq!(get(EDGE, &h.todo_span), "TODO");
        assert_eq!(get(EDGE, &p.headlines[5].tags_token), "");
        assert_eq!(get(EDGE, &p.headlines[5].todo_span), "");
        assert_eq!(h.line, 5);
        let props: Vec<(String, String)> = h
            .properties
            .iter()
            .map(|p| (get(EDGE, &p.key), get(EDGE, &p.value)))
            .collect();
        assert_eq!(
            props,
            [
                ("ID".into(), "id-1".into()),
                ("EMBEDDING".into(), "0.1 0.2 0.3".into()),
                ("MULTI+".into(), "more".into())
            ]
        );
        assert!(get(EDGE, &h.body).starts_with("Body line one.\n*bold* at column 0"));
        assert!(get(EDGE, &h.body).ends_with("*\ttab after star\n"));

        let child = &p.headlines[1];
        assert_eq!(
            (child.todo.as_deref(), child.done, child.parent),
            (Some("NEXT"), false, Some(0))
        );
        assert_eq!(child.line, 16);
        assert_eq!(get(EDGE, &child.properties[0].value), "id-2");
        assert_eq!(
            get(EDGE, &child.properties[1].value),
            "",
            "an empty property keeps the drawer"
        );
        assert_eq!(get(EDGE, &child.body), "\n");

        assert_eq!(
            (p.headlines[2].todo.as_deref(), p.headlines[2].done),
            (Some("APPROVED"), true)
        );
        assert_eq!(
            (p.headlines[3].todo.as_deref(), p.headlines[3].done),
            (Some("CANCELLED"), true)
        );
        assert_eq!(p.headlines[4].todo.as_deref(), Some("REVIEW"));
        assert_eq!(p.headlines[5].todo, None);
        assert_eq!(p.headlines[6].todo, None);
        assert_eq!(p.headlines[8].tags(EDGE).collect::<Vec<_>>(), ["onlytag"]);
        assert_eq!(p.headlines[9].parent, Some(8));
        assert_eq!(p.headlines[10].parent, Some(9));
        assert_eq!(p.headlines[10].tags(EDGE).collect::<Vec<_>>(), ["tág"]);
        assert!(p.headlines[11].commented);
        assert_eq!(p.headlines[12].todo.as_deref(), Some("DONE"));
        assert_eq!(p.headlines[12].subtree.end as usize, EDGE.len());
    }

    #[test]
    fn subtrees_and_sections_tile_the_text() {
        let p = parse(EDGE).unwrap();
        let first = &p.headlines[0];
        assert_eq!(first.subtree.end, p.headlines[3].subtree.start);
        assert_eq!(first.own.end, p.headlines[1].own.start);
        for w in p.headlines.windows(2) {
            assert_eq!(w[0].own.end, w[1].own.start);
        }
        for h in &p.headlines {
            assert!(h.own.start <= h.body.start && h.body.end == h.own.end);
            assert!(h.own.end <= h.subtree.end);
        }
    }

    #[test]
    fn crlf_gives_the_same_fields_with_exact_ranges() {
        let crlf = EDGE.replace('\n', "\r\n");
        let a = parse(EDGE).unwrap();
        let b = parse(&crlf).unwrap();
        assert_eq!(a.headlines.len(), b.headlines.len());
        for (x, y) in a.headlines.iter().zip(&b.headlines) {
            assert_eq!(get(EDGE, &x.title), get(&crlf, &y.title));
            assert!(x.tags(EDGE).eq(y.tags(&crlf)));
            assert_eq!((x.line, x.level, &x.todo), (y.line, y.level, &y.todo));
            assert_eq!(
                get(EDGE, &x.body),
                get(&crlf, &y.body).replace("\r\n", "\n")
            );
        }
    }

    #[test]
    fn a_drawer_without_end_is_refused_with_its_line() {
        let err = parse("* a\n:PROPERTIES:\n:ID: x\n* b\n").unwrap_err();
        assert_eq!(err.line, 2);
        let err = parse("* a\nSCHEDULED: <2024-01-01>\n:PROPERTIES:\n:ID: x").unwrap_err();
        assert_eq!(err.line, 3);
    }

    #[test]
    fn keywords_default_to_todo_done_and_merge_declarations() {
        assert_eq!(TodoKeywords::from_text("* x"), TodoKeywords::default());
        let k = TodoKeywords::from_text("#+TODO: A B\n#+TODO: C | D E\n");
        assert_eq!(k.todo, ["A", "C"]);
        assert_eq!(k.done, ["B", "D", "E"]);
    }

    #[test]
    fn configured_keywords_read_as_org_todo_keywords_and_apply_only_without_a_declaration() {
        let k = TodoKeywords::from_sequences(&[
            "TODO(t) NEXT(n) WAIT(w@/!) | DONE(d!) CNCL(c@)",
            "PROJ",
        ])
        .unwrap();
        assert_eq!(k.todo, ["TODO", "NEXT", "WAIT"]);
        assert_eq!(k.done, ["DONE", "CNCL", "PROJ"]);
        assert_eq!(
            TodoKeywords::from_sequences::<&str>(&[]).unwrap(),
            TodoKeywords::default()
        );
        let err = TodoKeywords::from_sequences(&["A | B | C"]).unwrap_err();
        assert!(err.contains("two `|`"), "{err}");
        let err = TodoKeywords::from_sequences(&[" | "]).unwrap_err();
        assert!(err.contains("names no keyword"), "{err}");

        let configured = TodoKeywords::from_sequences(&["TODO NEXT | DONE CNCL"]).unwrap();
        let text = "* CNCL Paint\n* NEXT Call\n";
        let settings =
            collect_settings(text, &mut |_, _| None).with_fallback(Some(configured.clone()));
        let parsed = parse_with(text, settings).unwrap();
        assert_eq!(parsed.headlines[0].todo.as_deref(), Some("CNCL"));
        assert!(parsed.headlines[0].done);
        assert_eq!(parsed.headlines[1].todo.as_deref(), Some("NEXT"));
        assert!(!parsed.headlines[1].done);
        // A file that declares its own keywords keeps them.
        let text = "#+TODO: TODO | DONE\n* CNCL Paint\n";
        let settings = collect_settings(text, &mut |_, _| None).with_fallback(Some(configured));
        assert!(settings.declares_keywords());
        let parsed = parse_with(text, settings).unwrap();
        assert_eq!(parsed.headlines[0].todo, None);
    }

    #[test]
    fn text_before_the_first_headline_is_no_headline() {
        let p = parse("preamble\n\n* one\n").unwrap();
        assert_eq!(p.headlines.len(), 1);
        assert_eq!(p.headlines[0].line, 3);
        assert_eq!(parse("").unwrap().headlines.len(), 0);
    }
}
