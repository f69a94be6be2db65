//! Org's dates and properties of the objects a skill is lent, as typed
//! values: no string parsing in a skill.
//!
//! [`FileView::planning`] (with [`FileView::scheduled`],
//! [`FileView::deadline`] and [`FileView::closed`]), [`FileView::timestamps`]
//! and [`FileView::properties`] read the view's visible text with the same
//! scanner the host reads the memex with (`foveal-org`), so a skill sees
//! the dates the host's agenda sees. A private object is not in the view,
//! so neither are its dates. [`items`] gives the agenda's input for a
//! whole view; [`agenda`] is the agenda itself, by Org's rules.
//!
//! These are methods over the text the host already lends: nothing was
//! added to the ABI, so a library built with an earlier SDK loads as it
//! did, and one built with this SDK loads in an earlier host.
//!
//! # Example
//!
//! ```
//! use foveal_sdk::testing::TestMemex;
//!
//! let memex = TestMemex::from_org(
//!     "* TODO Pay rent\nDEADLINE: <2024-02-01 Thu -5d>\n:PROPERTIES:\n:AMOUNT: 900\n:END:\n",
//! );
//! let view = memex.view();
//! let file = view.as_view().files().next().unwrap();
//! let deadline = file.deadline(0).unwrap();
//! assert_eq!(deadline.date.to_string(), "2024-02-01");
//! assert_eq!(deadline.warning.unwrap().days(), 5);
//! assert_eq!(file.property(0, "amount"), Some("900"));
//! ```

pub use foveal_org::agenda;
pub use foveal_org::time;

use std::ops::Range;

use crate::memex::{FileView, MemexView};
use time::{Planning, Timestamp};

impl<'a> FileView<'a> {
    /// The byte range of object `index`'s headline line (its newline
    /// excluded) in [`FileView::text`].
    fn headline_line(&self, index: u32) -> Range<usize> {
        let text = self.text.as_str();
        let title = self.object(index).title.range();
        let start = text[..title.start].rfind('\n').map_or(0, |i| i + 1);
        let end = text[title.start..]
            .find('\n')
            .map_or(text.len(), |i| title.start + i);
        start..end
    }

    /// Its planning line (the line directly after the headline, when it
    /// holds `SCHEDULED:`, `DEADLINE:` or `CLOSED:`), as a range of the
    /// text.
    fn planning_range(&self, index: u32) -> Option<Range<usize>> {
        let text = self.text.as_str();
        let start = self.headline_line(index).end + 1;
        let body = self.object(index).body.range().start;
        if start >= body || start >= text.len() {
            return None;
        }
        let end = text[start..body].find('\n').map_or(body, |i| start + i);
        foveal_org::is_planning(&text[start..end]).then_some(start..end)
    }

    /// Its planning line, read: scheduled, deadline and closed (each may
    /// be inactive, as `CLOSED:` is).
    pub fn planning(&self, index: u32) -> Planning {
        self.planning_range(index)
            .map_or_else(Planning::default, |r| {
                time::planning(&self.text.as_str()[r]).0
            })
    }

    /// Its `SCHEDULED:` date.
    pub fn scheduled(&self, index: u32) -> Option<Timestamp> {
        self.planning(index).scheduled
    }

    /// Its `DEADLINE:` date.
    pub fn deadline(&self, index: u32) -> Option<Timestamp> {
        self.planning(index).deadline
    }

    /// Its `CLOSED:` date.
    pub fn closed(&self, index: u32) -> Option<Timestamp> {
        self.planning(index).closed
    }

    /// The active timestamps of its headline, drawers and body (not its
    /// planning line; not its children's), in order, date ranges included
    /// — as Org's agenda reads them (not in a source, example or comment
    /// block, a comment or keyword line).
    pub fn timestamps(&self, index: u32) -> Vec<Timestamp> {
        match self.agenda_item(index, 0) {
            Some(item) => {
                let mut all = item.timestamps;
                all.extend(item.ranges);
                all
            }
            None => Vec::new(),
        }
    }

    /// Its property drawer's `(key, value)` pairs, in order (the value
    /// trimmed; `:EMBEDDING:` is lent without its value).
    pub fn properties(&self, index: u32) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        let text: &'a str = self.text.as_str();
        let from = self
            .planning_range(index)
            .map_or_else(|| self.headline_line(index).end, |r| r.end);
        let body = self.object(index).body.range().start.max(from);
        let lines = text.get(from..body).unwrap_or("");
        let mut inside = false;
        lines.lines().filter_map(move |line| {
            let l = line.trim();
            if l.eq_ignore_ascii_case(":PROPERTIES:") {
                inside = true;
                return None;
            }
            if l.eq_ignore_ascii_case(":END:") {
                inside = false;
                return None;
            }
            if !inside {
                return None;
            }
            let rest = l.strip_prefix(':')?;
            let colon = rest.find(':')?;
            let (key, value) = (&rest[..colon], &rest[colon + 1..]);
            (!key.is_empty() && !key.contains(char::is_whitespace)).then(|| (key, value.trim()))
        })
    }

    /// The value of its property `key` (case-insensitive), if it has it.
    pub fn property(&self, index: u32, key: &str) -> Option<&'a str> {
        self.properties(index)
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    }

    /// Its priority cookie (`[#A]`).
    pub fn priority(&self, index: u32) -> Option<char> {
        let text = self.text.as_str();
        let line = self.headline_line(index);
        let before = &text[line.start..self.object(index).title.range().start];
        let at = before.find("[#")?;
        let mut chars = before[at + 2..].chars();
        let c = chars.next()?;
        (chars.next() == Some(']')).then_some(c)
    }

    /// The agenda's input for object `index` (in file number `file` of
    /// the view), or `None` when it has no date the agenda shows.
    pub fn agenda_item(&self, index: u32, file: u32) -> Option<agenda::Item> {
        let o = self.object(index);
        let line = self.headline_line(index);
        let end = o.body.range().end.max(line.end);
        agenda::Item::from_section(
            self.text.as_str(),
            &agenda::Section {
                range: line.start..end,
                planning: self.planning_range(index),
                title: o.title.range(),
                priority: self.priority(index),
                done: o.done,
                beyond_planning: true,
            },
            file,
        )
    }
}

/// The agenda's input for a whole view: every dated object, with its
/// `(file, object)` position. `COMMENT`ed and `ARCHIVE`-tagged subtrees
/// are left out, as Org's agenda leaves them out.
pub fn items(view: &MemexView<'_>) -> (Vec<agenda::Item>, Vec<(u32, u32)>) {
    let mut items = Vec::new();
    let mut at = Vec::new();
    for (f, file) in view.files().enumerate() {
        for (mut item, index) in file_items(file) {
            item.file = f as u32;
            items.push(item);
            at.push((f as u32, index));
        }
    }
    (items, at)
}

/// The agenda's input for one file (numbered 0), each item with its
/// object. One `memchr` pass finds the sections with a `<` and a digit
/// (where every active timestamp starts); only those are read. A file
/// tagged `ARCHIVE` (`#+FILETAGS:`) has none, as in Org's agenda.
pub fn file_items(file: &FileView<'_>) -> Vec<(agenda::Item, u32)> {
    let text = file.text.as_str().as_bytes();
    let mut out = Vec::new();
    if crate::projects::preamble_file_tags(file).any(|t| t == "ARCHIVE") {
        return out;
    }
    let mut next = 0u32;
    let n = file.len() as u32;
    let mut last = None;
    for at in time::active_starts(text) {
        // The object whose section holds `at`: sections are in text order.
        while next < n
            && file
                .object(next)
                .body
                .range()
                .end
                .max(file.headline_line(next).end)
                <= at
        {
            next += 1;
        }
        if next == n {
            break;
        }
        if file.headline_line(next).start > at || last == Some(next) {
            continue;
        }
        last = Some(next);
        if !skipped(file, next)
            && let Some(item) = file.agenda_item(next, 0)
        {
            out.push((item, next));
        }
    }
    out
}

/// Whether Org's agenda skips the object: it or an ancestor is `COMMENT`ed
/// or tagged `ARCHIVE`.
fn skipped(file: &FileView<'_>, index: u32) -> bool {
    let mut at = Some(index);
    while let Some(i) = at {
        if file.tags(i).any(|t| t == "ARCHIVE") {
            return true;
        }
        let line = file.headline_line(i);
        let head = &file.text.as_str()[line.start..file.object(i).title.range().start];
        if head.split_whitespace().any(|w| w == "COMMENT") {
            return true;
        }
        at = file.parent(i);
    }
    false
}
