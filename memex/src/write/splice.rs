//! Computing an edit: one splice into the file's text, escaping of
//! inserted text, and the check that the result reads back as intended.

use super::*;

pub(super) struct Splice {
    at: Range<usize>,
    text: String,
}

impl Splice {
    fn none() -> Self {
        Self {
            at: 0..0,
            text: String::new(),
        }
    }

    fn insert(at: usize, text: String) -> Self {
        Self { at: at..at, text }
    }
}

/// The place of an object, for errors.
pub(super) struct At<'a> {
    path: &'a Path,
    line: u32,
}

impl At<'_> {
    fn invalid(&self, message: impl Into<String>) -> WriteError {
        WriteError::InvalidInput {
            path: self.path.to_owned(),
            line: self.line,
            message: message.into(),
        }
    }

    fn structure(&self, message: impl Into<String>) -> WriteError {
        WriteError::WouldChangeStructure {
            path: self.path.to_owned(),
            line: self.line,
            message: message.into(),
        }
    }
}

/// Plans `edit` on object `index` of `base`. `taken` says whether an id is
/// already used in the memex; `id_base` is what derived ids hash.
pub(super) fn plan_in(
    base: FileRef,
    index: u32,
    id_base: &str,
    edit: &Edit,
    taken: &dyn Fn(&str) -> bool,
) -> Result<Plan, WriteError> {
    let object = &base.objects[index as usize];
    let h = &object.headline;
    let at = At {
        path: &base.path,
        line: h.line,
    };
    let text = base.text.as_str();
    let nl = newline_of(text);
    let inputs: Vec<&str> = match edit {
        Edit::SetTodo { state } => state.iter().map(String::as_str).collect(),
        Edit::AddChild { title, body } => std::iter::once(title.as_str())
            .chain(body.as_deref())
            .collect(),
        Edit::SetProperty { key, value } => vec![key.as_str(), value.as_str()],
        Edit::SetTags { tags } => tags.iter().map(String::as_str).collect(),
        Edit::AppendBody { text } => vec![text.as_str()],
    };
    for input in inputs {
        if let Some(why) = live_in_emacs(input) {
            return Err(at.invalid(why));
        }
    }

    // What the edited object must read back as, besides the splice.
    let mut expect = Expect::Same;
    let splice = match edit {
        Edit::SetTodo { state } => set_todo(&base, index, state.as_deref(), &at)?,
        Edit::AddChild { title, body } => {
            let title = title.trim_matches([' ', '\t']);
            if title.is_empty() {
                return Err(at.invalid("a new headline needs a title"));
            }
            if title.contains(['\n', '\r']) {
                return Err(at.invalid(format!(
                    "a headline title is one line; {title:?} has a line break"
                )));
            }
            let mut id = new_uuid();
            while taken(&id) || base.index_of(&id).is_some() {
                id = new_uuid();
            }
            let body = body
                .as_deref()
                .map(|b| escape_text(b, nl))
                .unwrap_or_default();
            let pos = h.subtree.end as usize;
            let mut s = String::new();
            if !text[..pos].ends_with('\n') {
                s.push_str(nl);
            }
            for _ in 0..=h.level {
                s.push('*');
            }
            s.push(' ');
            s.push_str(title);
            s.push_str(nl);
            for line in [":PROPERTIES:", &format!(":ID: {id}"), ":END:"] {
                s.push_str(line);
                s.push_str(nl);
            }
            s.push_str(&body);
            expect = Expect::Child {
                at: base
                    .objects
                    .partition_point(|o| (o.headline.own.start as usize) < pos),
                title: title.to_owned(),
                id,
                body,
            };
            Splice::insert(pos, s)
        }
        Edit::SetProperty { key, value } => {
            let value = value.trim_matches([' ', '\t']);
            if key.is_empty()
                || key.contains(|c: char| c.is_whitespace() || c == ':')
                || key.eq_ignore_ascii_case("END")
                || key.eq_ignore_ascii_case("PROPERTIES")
            {
                return Err(at.invalid(format!(
                    "{key:?} cannot be a property key: a key is one word without spaces or colons, and not END or PROPERTIES"
                )));
            }
            if value.contains(['\n', '\r']) {
                return Err(at.invalid(format!(
                    "a property value is one line; the value of {key} has a line break"
                )));
            }
            if key.eq_ignore_ascii_case("ID")
                && !value.is_empty()
                && value != object.id(&base.text)
                && (taken(value) || base.index_of(value).is_some())
            {
                return Err(WriteError::DuplicateId {
                    path: base.path.clone(),
                    line: h.line,
                    id: value.to_owned(),
                });
            }
            expect = Expect::Property {
                key: key.clone(),
                value: value.to_owned(),
            };
            set_property(&base, index, key, value, nl)
        }
        Edit::SetTags { tags } => {
            if let Some(bad) = tags.iter().find(|t| {
                t.is_empty()
                    || !t
                        .chars()
                        .all(|c| c.is_alphanumeric() || matches!(c, '_' | '@' | '#' | '%'))
            }) {
                return Err(at.invalid(format!(
                    "{bad:?} cannot be an Org tag: a tag is letters, digits, `_`, `@`, `#` or `%`"
                )));
            }
            let token = if tags.is_empty() {
                String::new()
            } else {
                format!(":{}:", tags.join(":"))
            };
            let span = h.tags_token.start as usize..h.tags_token.end as usize;
            let splice = match (span.is_empty(), token.is_empty()) {
                (true, true) => Splice::none(),
                // No tags yet: after the headline's text, one space apart.
                (true, false) => {
                    let end = content_end(text, h.own.start as usize);
                    Splice::insert(end, format!(" {token}"))
                }
                // Remove them with the spaces before them.
                (false, true) => {
                    let before = text[..span.start].trim_end_matches([' ', '\t']).len();
                    Splice {
                        at: before.max(h.title.end as usize)..span.end,
                        text: String::new(),
                    }
                }
                (false, false) => Splice {
                    at: span,
                    text: token.clone(),
                },
            };
            expect = Expect::Tags(token);
            splice
        }
        Edit::AppendBody { text: appended } => {
            let escaped = escape_text(appended, nl);
            if escaped.is_empty() {
                Splice::none()
            } else {
                let pos = h.own.end as usize;
                let mut s = String::new();
                if !text[..pos].ends_with('\n') {
                    s.push_str(nl);
                }
                s.push_str(&escaped);
                expect = Expect::Appended(escaped);
                Splice::insert(pos, s)
            }
        }
    };

    let mut new_text = String::with_capacity(text.len() + splice.text.len());
    new_text.push_str(&text[..splice.at.start]);
    new_text.push_str(&splice.text);
    new_text.push_str(&text[splice.at.end..]);
    let inserted = splice.at.start..splice.at.start + splice.text.len();
    // The setup files are those the base was read with: an edit cannot
    // add a `#+SETUPFILE:` line (appended settings are escaped).
    let settings = crate::setup::reuse(&new_text, &base.setup);
    let file = MemexFile::parse_with(
        &base.path,
        id_base,
        new_text,
        settings,
        std::sync::Arc::clone(&base.setup),
    )
    .map(|mut file| {
        file.modified = base.modified;
        file.identity = base.identity;
        file
    })
    .map_err(|e| {
        at.structure(format!(
            "the edited file would not load ({}: {})",
            e.line, e.message
        ))
    })?;
    let new_index = verify(&base, &file, index, edit, &expect, &at)?;
    Ok(Plan {
        replaced: splice.at,
        inserted,
        base,
        file,
        index: new_index,
        own: None,
    })
}

/// The line ending of `text`: that of its first line.
pub(super) fn newline_of(text: &str) -> &'static str {
    match text.find('\n') {
        Some(i) if text[..i].ends_with('\r') => "\r\n",
        _ => "\n",
    }
}

/// The end of the line containing `pos`, before its `\n` or `\r\n`.
pub(super) fn content_end(text: &str, pos: usize) -> usize {
    let end = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
    if text[..end].ends_with('\r') {
        end - 1
    } else {
        end
    }
}

/// The TODO splice: the keyword is the first word after the stars.
pub(super) fn set_todo(
    file: &MemexFile,
    index: u32,
    state: Option<&str>,
    at: &At<'_>,
) -> Result<Splice, WriteError> {
    let h = &file.objects[index as usize].headline;
    if let Some(state) = state
        && file.keywords.classify(state).is_none()
    {
        return Err(WriteError::UnknownKeyword {
            path: file.path.clone(),
            line: at.line,
            keyword: state.to_owned(),
            known: format!(
                "{} | {}",
                file.keywords.todo.join(" "),
                file.keywords.done.join(" ")
            ),
        });
    }
    let bytes = file.text.as_bytes();
    let end = content_end(&file.text, h.own.start as usize);
    let mut p = h.own.start as usize + usize::from(h.level) + 1;
    while p < end && matches!(bytes[p], b' ' | b'\t') {
        p += 1;
    }
    Ok(match (h.todo.as_deref(), state) {
        (old, new) if old == new => Splice::none(),
        (Some(old), Some(new)) => Splice {
            at: p..p + old.len(),
            text: new.to_owned(),
        },
        (Some(old), None) => {
            let mut q = p + old.len();
            while q < end && matches!(bytes[q], b' ' | b'\t') {
                q += 1;
            }
            Splice {
                at: p..q,
                text: String::new(),
            }
        }
        (None, Some(new)) if p == end => Splice::insert(p, new.to_owned()),
        (None, Some(new)) => Splice::insert(p, format!("{new} ")),
        (None, None) => Splice::none(),
    })
}

/// The property splice: the value in place, a new line before `:END:`, or
/// a new drawer where the parser looks for one.
pub(super) fn set_property(
    file: &MemexFile,
    index: u32,
    key: &str,
    value: &str,
    nl: &str,
) -> Splice {
    let text = file.text.as_str();
    let h = &file.objects[index as usize].headline;
    if let Some(p) = h
        .properties
        .iter()
        .find(|p| file.slice(&p.key).eq_ignore_ascii_case(key))
    {
        if file.slice(&p.value) == value {
            return Splice::none();
        }
        if !p.value.is_empty() && !value.is_empty() {
            // Keep the gap (alignment) before the value.
            return Splice {
                at: p.value.start as usize..p.value.end as usize,
                text: value.to_owned(),
            };
        }
        // From the key's closing colon to the end of the line.
        let colon = p.key.end as usize;
        return Splice {
            at: colon + 1..content_end(text, colon),
            text: if value.is_empty() {
                String::new()
            } else {
                format!(" {value}")
            },
        };
    }
    match &h.drawer {
        Some(drawer) => {
            let d = drawer.start as usize..drawer.end as usize;
            let inside = &text[d.clone()];
            let inside = inside.strip_suffix('\n').unwrap_or(inside);
            let inside = inside.strip_suffix('\r').unwrap_or(inside);
            let end_line = d.start + inside.rfind('\n').map_or(0, |i| i + 1);
            Splice::insert(
                end_line,
                property_line(file, index, end_line, key, value, nl),
            )
        }
        None => {
            // Right after the headline and its planning line: where the body
            // starts when there is no drawer.
            let pos = h.body.start as usize;
            let mut s = String::new();
            if !text[..pos].ends_with('\n') {
                s.push_str(nl);
            }
            s.push_str(":PROPERTIES:");
            s.push_str(nl);
            s.push_str(&format!(":{key}:"));
            if !value.is_empty() {
                s.push(' ');
                s.push_str(value);
            }
            s.push_str(nl);
            s.push_str(":END:");
            s.push_str(nl);
            Splice::insert(pos, s)
        }
    }
}

/// A new property line in the style of the drawer's others: their
/// indentation and, when they align their values in a column, that column.
pub(super) fn property_line(
    file: &MemexFile,
    index: u32,
    end_line: usize,
    key: &str,
    value: &str,
    nl: &str,
) -> String {
    let text = file.text.as_str();
    let h = &file.objects[index as usize].headline;
    let line_start = |pos: usize| text[..pos].rfind('\n').map_or(0, |i| i + 1);
    let indent = match h.properties.first() {
        // The key follows the line's indentation and a colon.
        Some(p) => &text[line_start(p.key.start as usize)..p.key.start as usize - 1],
        None => {
            let end = &text[end_line..];
            &end[..end.len() - end.trim_start_matches([' ', '\t']).len()]
        }
    };
    let column = h
        .properties
        .iter()
        .find(|p| !p.value.is_empty())
        .and_then(|p| {
            let gap = &text[p.key.end as usize + 1..p.value.start as usize];
            (gap.len() > 1 && gap.bytes().all(|b| b == b' ')).then(|| {
                text[line_start(p.key.start as usize)..p.value.start as usize]
                    .chars()
                    .count()
            })
        });
    let mut line = format!("{indent}:{key}:");
    if !value.is_empty() {
        let width = line.chars().count();
        let pad = column.map_or(1, |c| c.saturating_sub(width).max(1));
        line.extend(std::iter::repeat_n(' ', pad));
        line.push_str(value);
    }
    line.push_str(nl);
    line
}

/// In-buffer settings that change how the whole file is read; a line
/// declaring one in appended text is escaped.
pub(super) const FILE_SETTINGS: &[&str] = &[
    "TODO",
    "SEQ_TODO",
    "TYP_TODO",
    "FILETAGS",
    "TAGS",
    "PROPERTY",
    "SETUPFILE",
    "STARTUP",
    "PRIORITIES",
];

/// Whether `line` is a headline: stars at column 0, then a space.
pub(super) fn is_headline(line: &str) -> bool {
    let stars = line.bytes().take_while(|&b| b == b'*').count();
    stars > 0 && line.as_bytes().get(stars) == Some(&b' ')
}

/// Whether `line` (indentation removed) declares a file-wide setting.
pub(super) fn is_file_setting(line: &str) -> bool {
    line.strip_prefix("#+")
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(key, _)| FILE_SETTINGS.iter().any(|k| k.eq_ignore_ascii_case(key)))
}

/// `text` as lines of the file: line endings made `nl`, a final one added,
/// and lines that would be structure escaped with a comma (as Org escapes
/// them in blocks; already escaped ones get one more, so unescaping gives
/// the text back). Empty text stays empty.
/// Why `text`, written into an Org file, could do something when the file
/// is opened in Emacs, if it could: a file-local variables block (`Local
/// Variables:` … `End:`, which may `eval`), or a link that runs code
/// (`elisp:`, `shell:`). Text the model writes stays inert: such text is
/// refused, not escaped — no escape hides `Local Variables:` from Emacs,
/// which accepts any prefix before it.
fn live_in_emacs(text: &str) -> Option<&'static str> {
    let lower = text.to_ascii_lowercase();
    if lower.contains("local variables:") {
        Some(
            "the text holds `Local Variables:`, which Emacs reads as a block of file-local variables (they may run code); it was refused",
        )
    } else if lower.contains("elisp:") || lower.contains("shell:") {
        Some(
            "the text holds an `elisp:` or `shell:` link, which runs code when followed in Emacs; it was refused",
        )
    } else if lower.contains("-*-") {
        Some(
            "the text holds `-*-`, which Emacs reads as a file's mode line (it may set variables); it was refused",
        )
    } else {
        None
    }
}

pub(super) fn escape_text(text: &str, nl: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let mut out = String::with_capacity(text.len() + 8);
    let text = text.strip_suffix('\n').unwrap_or(text);
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        if is_headline(line.trim_start_matches(',')) {
            out.push(',');
            out.push_str(line);
        } else if is_file_setting(line[indent..].trim_start_matches(',')) {
            out.push_str(&line[..indent]);
            out.push(',');
            out.push_str(&line[indent..]);
        } else {
            out.push_str(line);
        }
        out.push_str(nl);
    }
    out
}

/// What the edited object must read back as.
pub(super) enum Expect {
    /// Unchanged, or with the new TODO state (checked apart).
    Same,
    /// With `key` set to `value`.
    Property { key: String, value: String },
    /// With a body ending in this text.
    Appended(String),
    /// With this tags token (`:a:b:`, or empty).
    Tags(String),
    /// With a new child at index `at`.
    Child {
        at: usize,
        title: String,
        id: String,
        body: String,
    },
}

/// The fields of a headline an edit must not change by accident.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Shape<'a> {
    level: u16,
    todo: Option<&'a str>,
    priority: Option<char>,
    commented: bool,
    title: &'a str,
    tags: &'a str,
    properties: Vec<(&'a str, &'a str)>,
    parent: Option<u32>,
}

pub(super) fn shape(file: &MemexFile, index: usize) -> Shape<'_> {
    let h = &file.objects[index].headline;
    Shape {
        level: h.level,
        todo: h.todo.as_deref(),
        priority: h.priority,
        commented: h.commented,
        title: file.slice(&h.title),
        tags: file.slice(&h.tags_token),
        properties: h
            .properties
            .iter()
            .map(|p| (file.slice(&p.key), file.slice(&p.value)))
            .collect(),
        parent: h.parent,
    }
}

/// Checks that `new` reads as `base` with exactly the intended change.
/// Returns the index, in `new`, of the object to report (the edited one,
/// or the new child).
pub(super) fn verify(
    base: &MemexFile,
    new: &MemexFile,
    index: u32,
    edit: &Edit,
    expect: &Expect,
    at: &At<'_>,
) -> Result<u32, WriteError> {
    let index = index as usize;
    let child = match expect {
        Expect::Child { at, .. } => Some(*at),
        _ => None,
    };
    let added = usize::from(child.is_some());
    if new.objects.len() != base.objects.len() + added {
        return Err(at.structure(format!(
            "the file would have {} headlines instead of {}",
            new.objects.len(),
            base.objects.len() + added
        )));
    }
    // Old index → new index: everything from the new child on moves down.
    let map = |i: usize| match child {
        Some(c) if i >= c => i + 1,
        _ => i,
    };
    for i in 0..base.objects.len() {
        let mut want = shape(base, i);
        want.parent = want.parent.map(|p| map(p as usize) as u32);
        let got = shape(new, map(i));
        if i != index {
            if got != want {
                return Err(at.structure(format!(
                    "the headline at line {} would read differently ({got:?} instead of {want:?})",
                    new.objects[map(i)].headline.line
                )));
            }
            continue;
        }
        match (edit, expect) {
            (Edit::SetTodo { state }, _) => {
                want.todo = state.as_deref();
                if got != want {
                    return Err(at.structure(format!(
                        "Org would read the headline as TODO state {:?} and title {:?}, not {:?} and {:?}",
                        got.todo, got.title, want.todo, want.title
                    )));
                }
            }
            (_, Expect::Property { key, value }) => {
                match want
                    .properties
                    .iter_mut()
                    .find(|(k, _)| k.eq_ignore_ascii_case(key))
                {
                    Some(p) => p.1 = value.as_str(),
                    None => want.properties.push((key.as_str(), value.as_str())),
                }
                if got != want {
                    return Err(at.structure(format!(
                        "Org would read the properties as {:?}, not {:?}",
                        got.properties, want.properties
                    )));
                }
            }
            (_, Expect::Tags(token)) => {
                want.tags = token;
                if got != want {
                    return Err(at.structure(format!(
                        "Org would read the headline's title and tags as {:?} and {:?}, not {:?} and {:?}",
                        got.title, got.tags, want.title, want.tags
                    )));
                }
            }
            (_, Expect::Appended(appended)) => {
                let old_body = base.slice(&base.objects[index].headline.body);
                let new_body = new.slice(&new.objects[index].headline.body);
                if got != want || !new_body.starts_with(old_body) || !new_body.ends_with(appended) {
                    return Err(at.structure(
                        "Org would read the start of the text as the headline's planning line or property drawer, not as body text; begin it with another line",
                    ));
                }
            }
            _ => {
                if got != want {
                    return Err(at.structure(format!(
                        "the headline would read differently ({got:?} instead of {want:?})"
                    )));
                }
            }
        }
    }
    if let Expect::Child {
        at: c,
        title,
        id,
        body,
    } = expect
    {
        let got = shape(new, *c);
        let want = Shape {
            level: base.objects[index].headline.level + 1,
            todo: None,
            priority: None,
            commented: false,
            title,
            tags: "",
            properties: vec![("ID", id.as_str())],
            parent: Some(index as u32),
        };
        if got != want {
            return Err(at.structure(format!(
                "the title {title:?} would not read back as given (Org would read TODO state {:?}, priority {:?}, comment {}, title {:?}, tags {:?}): a title cannot start with a TODO keyword, a [#A] cookie or COMMENT, nor end in :tags:",
                got.todo, got.priority, got.commented, got.title, got.tags
            )));
        }
        if new.slice(&new.objects[*c].headline.body) != body {
            return Err(at.structure("the new headline's body would not read back as given"));
        }
        return Ok(*c as u32);
    }
    Ok(index as u32)
}
