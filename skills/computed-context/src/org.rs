//! Reading the memex conventions of computed context out of the view the
//! host lends: properties, checklists, handoff blocks and drawers, context
//! map tables and lists.
//!
//! The view's records give each headline's title, TODO keyword, tags and
//! body as ranges of the file's visible text. The property drawer is not in
//! the body: it sits between the headline line and the body, so properties
//! are read from that stretch of text. Everything here borrows from the
//! view; nothing is copied until a result is built.

use foveal_sdk::memex::FileView;

/// One headline of the view: its file and index.
#[derive(Debug, Clone, Copy)]
pub struct Obj<'a> {
    /// Its file.
    pub file: &'a FileView<'a>,
    /// Its index in the file.
    pub index: u32,
}

impl<'a> Obj<'a> {
    /// Its id.
    pub fn id(&self) -> &'a str {
        self.file.id(self.index)
    }

    /// Its title.
    pub fn title(&self) -> &'a str {
        self.file.title(self.index)
    }

    /// Its body (after the property drawer, to the first child).
    pub fn body(&self) -> &'a str {
        self.file.body(self.index)
    }

    /// Its TODO keyword.
    pub fn todo(&self) -> Option<&'a str> {
        self.file.todo(self.index)
    }

    /// Whether its TODO keyword is a done state.
    pub fn done(&self) -> bool {
        self.file.object(self.index).done
    }

    /// The text between the headline line and the body: the planning line
    /// and the property drawer, if any.
    fn drawer_text(&self) -> &'a str {
        let o = self.file.object(self.index);
        let text = self.file.text.as_str();
        let from = (o.title.start + o.title.len) as usize;
        let to = o.body.start as usize;
        if from > to || to > text.len() {
            return "";
        }
        let rest = &text[from..to];
        match rest.find('\n') {
            Some(nl) => &rest[nl + 1..],
            None => "",
        }
    }

    /// Property `key` (case-insensitive, as in Org), trimmed; `None` when
    /// absent or empty.
    pub fn property(&self, key: &str) -> Option<&'a str> {
        property_in(self.drawer_text(), key)
    }

    /// The 1-based line of the headline.
    pub fn line(&self) -> u32 {
        self.file.object(self.index).line
    }

    /// The 1-based line of the first line of the body.
    pub fn body_line(&self) -> u32 {
        let o = self.file.object(self.index);
        let text = self.file.text.as_str();
        let start = line_start(text, o.title.start as usize);
        let end = (o.body.start as usize).min(text.len());
        self.line()
            + text[start.min(end)..end]
                .bytes()
                .filter(|&b| b == b'\n')
                .count() as u32
    }
}

fn line_start(text: &str, pos: usize) -> usize {
    text[..pos.min(text.len())].rfind('\n').map_or(0, |i| i + 1)
}

/// Property `key` in a `:PROPERTIES:` drawer's text.
pub fn property_in<'a>(drawer: &'a str, key: &str) -> Option<&'a str> {
    let mut inside = false;
    for line in drawer.lines() {
        let line = line.trim();
        if line.eq_ignore_ascii_case(":PROPERTIES:") {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if line.eq_ignore_ascii_case(":END:") {
            break;
        }
        let Some(rest) = line.strip_prefix(':') else {
            continue;
        };
        let Some((k, value)) = rest.split_once(':') else {
            continue;
        };
        if k.eq_ignore_ascii_case(key) {
            let value = value.trim();
            return (!value.is_empty()).then_some(value);
        }
    }
    None
}

/// A multi-valued property's values: separated by spaces (Org's
/// convention) or commas.
pub fn split_values(value: &str) -> impl Iterator<Item = &str> {
    value
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|v| !v.is_empty())
}

/// A checklist item of a body: `- [ ] text`, `+ [X] text`, `1. [-] text`.
pub fn checklist_item(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let rest = if let Some(r) = t.strip_prefix("- ").or_else(|| t.strip_prefix("+ ")) {
        r
    } else {
        let digits = t.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        t[digits..]
            .strip_prefix(". ")
            .or_else(|| t[digits..].strip_prefix(") "))?
    };
    let rest = rest.trim_start();
    let box_len = ["[ ]", "[X]", "[x]", "[-]"]
        .iter()
        .find(|b| rest.starts_with(**b))?
        .len();
    let item = rest[box_len..].trim();
    (!item.is_empty()).then_some(item)
}

/// Where a handoff was found in a body, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoffBlock<'a> {
    /// The YAML text.
    pub yaml: &'a str,
    /// The 0-based line of the body where the YAML starts.
    pub first_line: u32,
}

/// A body split into what the task says (objective text), its handoff
/// block (a `#+begin_src yaml` block or a `:HANDOFF:` drawer) and other
/// drawers, which are left out of the objective.
#[derive(Debug, Default)]
pub struct BodyParts<'a> {
    /// The body's lines that are neither a handoff nor a drawer.
    pub objective: Vec<&'a str>,
    /// The handoff, if any (the first one found).
    pub handoff: Option<HandoffBlock<'a>>,
    /// A handoff block opened and never closed: its 0-based line.
    pub unclosed: Option<u32>,
}

/// Splits a body into its parts.
pub fn body_parts(body: &str) -> BodyParts<'_> {
    let mut parts = BodyParts::default();
    let mut lines = Vec::new();
    let mut offset = 0usize;
    for line in body.split_inclusive('\n') {
        lines.push((offset, line));
        offset += line.len();
    }
    let mut i = 0usize;
    while i < lines.len() {
        let (start, line) = lines[i];
        let t = line.trim();
        let lower = t.to_ascii_lowercase();
        let yaml_block = lower.starts_with("#+begin_src yaml") || lower == "#+begin_src yml";
        let handoff_drawer = t.eq_ignore_ascii_case(":HANDOFF:");
        let other_drawer = !handoff_drawer && is_drawer_open(t) && !t.eq_ignore_ascii_case(":END:");
        if yaml_block || handoff_drawer || other_drawer {
            let closer = |l: &str| {
                let l = l.trim();
                if yaml_block {
                    l.eq_ignore_ascii_case("#+end_src")
                } else {
                    l.eq_ignore_ascii_case(":END:")
                }
            };
            match (i + 1..lines.len()).find(|&j| closer(lines[j].1)) {
                Some(end) => {
                    if (yaml_block || handoff_drawer) && parts.handoff.is_none() {
                        let from = lines.get(i + 1).map_or(body.len(), |l| l.0);
                        parts.handoff = Some(HandoffBlock {
                            yaml: &body[from..lines[end].0],
                            first_line: i as u32 + 1,
                        });
                    }
                    i = end + 1;
                    continue;
                }
                None if yaml_block || handoff_drawer => {
                    parts.unclosed.get_or_insert(i as u32);
                    i = lines.len();
                    continue;
                }
                None => {}
            }
        }
        let _ = start;
        parts.objective.push(line.trim_end_matches(['\n', '\r']));
        i += 1;
    }
    parts
}

fn is_drawer_open(t: &str) -> bool {
    t.len() > 2
        && t.starts_with(':')
        && t.ends_with(':')
        && t[1..t.len() - 1]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// One entry of the context map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    /// What the code is.
    pub component: String,
    /// Where it is (`path` or `path:lines`).
    pub location: String,
    /// Notes.
    pub notes: String,
    /// The memex id of the headline the entry is in (or is).
    pub source: String,
}

/// The entries of a context map written in a text: Org table rows under a
/// header row naming `Component`, `Location` and `Notes` (any order, any
/// case; `File` or `Path` for the location), and list items
/// `- component :: location :: notes`.
pub fn map_entries_in(text: &str, source: &str, out: &mut Vec<MapEntry>) {
    let mut columns: Option<[Option<usize>; 3]> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(row) = t.strip_prefix('|') {
            if row.starts_with('-') {
                continue; // a rule line
            }
            let cells: Vec<&str> = row
                .trim_end_matches('|')
                .split('|')
                .map(|c| strip_markup(c.trim()))
                .collect();
            match columns {
                None => {
                    let find = |names: &[&str]| {
                        cells
                            .iter()
                            .position(|c| names.iter().any(|n| c.eq_ignore_ascii_case(n)))
                    };
                    let header = [
                        find(&["component"]),
                        find(&["location", "file", "path"]),
                        find(&["notes", "note", "description"]),
                    ];
                    if header[0].is_some() && header[1].is_some() {
                        columns = Some(header);
                    }
                }
                Some([c, l, n]) => {
                    let get = |i: Option<usize>| {
                        i.and_then(|i| cells.get(i))
                            .copied()
                            .unwrap_or("")
                            .to_owned()
                    };
                    let entry = MapEntry {
                        component: get(c),
                        location: get(l),
                        notes: get(n),
                        source: source.to_owned(),
                    };
                    if !entry.component.is_empty() || !entry.location.is_empty() {
                        out.push(entry);
                    }
                }
            }
            continue;
        }
        columns = None;
        let item = t.strip_prefix("- ").or_else(|| t.strip_prefix("+ "));
        if let Some(item) = item {
            let mut parts = item.splitn(3, "::").map(|p| strip_markup(p.trim()));
            let component = parts.next().unwrap_or("");
            if let Some(location) = parts.next() {
                out.push(MapEntry {
                    component: component.to_owned(),
                    location: location.to_owned(),
                    notes: parts.next().unwrap_or("").to_owned(),
                    source: source.to_owned(),
                });
            }
        }
    }
}

/// `=x=`, `~x~` and `` `x` `` without their markers.
pub fn strip_markup(s: &str) -> &str {
    for m in ['=', '~', '`'] {
        if s.len() >= 2 && s.starts_with(m) && s.ends_with(m) {
            return &s[1..s.len() - 1];
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_are_read_case_insensitively_from_the_drawer() {
        let drawer = ":PROPERTIES:\n:ID: a\n:Kind: pattern\n:EMPTY:\n:END:\n";
        assert_eq!(property_in(drawer, "KIND"), Some("pattern"));
        assert_eq!(property_in(drawer, "empty"), None);
        assert_eq!(property_in(drawer, "missing"), None);
        assert_eq!(property_in("SCHEDULED: <x>\n", "ID"), None);
    }

    #[test]
    fn multi_valued_properties_split_on_spaces_and_commas() {
        let v: Vec<&str> = split_values("a b,c ,  d").collect();
        assert_eq!(v, ["a", "b", "c", "d"]);
    }

    #[test]
    fn checklists_are_recognised_in_every_list_style() {
        assert_eq!(checklist_item("- [ ] Login works"), Some("Login works"));
        assert_eq!(checklist_item("  + [X] done"), Some("done"));
        assert_eq!(checklist_item("1. [-] half"), Some("half"));
        assert_eq!(checklist_item("- plain item"), None);
        assert_eq!(checklist_item("- [ ]"), None);
    }

    #[test]
    fn a_body_separates_objective_handoff_and_drawers() {
        let body = "Build it.\n:LOGBOOK:\nclock\n:END:\n#+begin_src yaml\na: 1\n#+end_src\nMore.\n";
        let parts = body_parts(body);
        assert_eq!(parts.objective, ["Build it.", "More."]);
        let h = parts.handoff.unwrap();
        assert_eq!(h.yaml, "a: 1\n");
        assert_eq!(h.first_line, 5);
        let drawer = body_parts("x\n:HANDOFF:\nb: 2\n:END:\n");
        assert_eq!(drawer.handoff.unwrap().yaml, "b: 2\n");
        let open = body_parts("x\n#+BEGIN_SRC yaml\nb: 2\n");
        assert_eq!(open.unclosed, Some(1));
        assert!(open.handoff.is_none());
    }

    #[test]
    fn map_tables_and_lists_give_entries() {
        let text = "| Component | Location | Notes |\n|---+---+---|\n| Auth | =src/auth.rs= | jwt checks |\n\n- Router :: src/route.rs :: api routes\n- no separator here\n";
        let mut out = Vec::new();
        map_entries_in(text, "map", &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].component, "Auth");
        assert_eq!(out[0].location, "src/auth.rs");
        assert_eq!(out[0].notes, "jwt checks");
        assert_eq!(out[1].location, "src/route.rs");
        assert_eq!(out[1].notes, "api routes");
    }
}
