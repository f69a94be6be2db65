//! Phase 4 (seed 001, `filterContextMap`): the context map, found where
//! the configuration says, read from its tables, lists and entry
//! headlines, and scored against the task's signals.

use foveal_sdk::memex::{FileView, MemexView};

use crate::org::{self, MapEntry, Obj};
use crate::signals::{At, Signals};

/// A context map entry with its score.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CodeRef {
    /// `location`.
    pub file: String,
    /// `component`.
    pub component: String,
    /// `notes`.
    pub notes: String,
    /// Its score.
    pub relevance: u32,
    /// The memex id of the headline the entry is in.
    pub id: String,
}

/// Phase 4: `filterContextMap` — the seed's scoring, entries scoring 0
/// dropped, the best `take` kept (ties in map order).
pub fn filter_context_map(signals: &Signals, map: &[MapEntry], take: usize) -> Vec<CodeRef> {
    MapIndex::new(map.to_vec()).filter(signals, take)
}

/// A context map prepared for scoring: each column's texts (lowercased,
/// but for the case-sensitive file match) joined into one string, so
/// that a keyword is one SIMD substring search over a column instead of
/// one search per entry. Built once per version of the map's file.
#[derive(Debug, Default)]
pub struct MapIndex {
    /// The entries, in map order.
    pub entries: Vec<MapEntry>,
    component: Column,
    location: Column,
    location_raw: Column,
    notes: Column,
}

/// One column: the texts joined by `\n` (no keyword holds one, so no
/// match spans two entries) and where each starts.
#[derive(Debug, Default)]
struct Column {
    text: String,
    starts: Vec<u32>,
}

impl Column {
    fn new<'a>(texts: impl Iterator<Item = &'a str>, lower: bool) -> Self {
        let mut c = Column::default();
        for t in texts {
            c.starts.push(c.text.len() as u32);
            if lower {
                c.text.push_str(&t.to_lowercase().replace('\n', " "));
            } else {
                c.text.push_str(&t.replace('\n', " "));
            }
            c.text.push('\n');
        }
        c
    }

    /// Adds `weight` to the score of each entry whose text holds `needle`
    /// (once an entry, however many times it holds it).
    fn score(&self, needle: &str, weight: u32, scores: &mut [u32], seen: &mut [u32], stamp: u32) {
        if needle.is_empty() {
            return;
        }
        for at in memchr::memmem::find_iter(self.text.as_bytes(), needle.as_bytes()) {
            let entry = self.starts.partition_point(|&s| s as usize <= at) - 1;
            if seen[entry] != stamp {
                seen[entry] = stamp;
                scores[entry] += weight;
            }
        }
    }
}

impl MapIndex {
    /// Prepares `entries`.
    pub fn new(entries: Vec<MapEntry>) -> Self {
        Self {
            component: Column::new(entries.iter().map(|e| e.component.as_str()), true),
            location: Column::new(entries.iter().map(|e| e.location.as_str()), true),
            location_raw: Column::new(entries.iter().map(|e| e.location.as_str()), false),
            notes: Column::new(entries.iter().map(|e| e.notes.as_str()), true),
            entries,
        }
    }

    /// The seed's scoring: +2 per keyword in the component, +1 per keyword
    /// in the location, +1 per domain in the notes (all lowercased), +3
    /// per mentioned file in the location (as written); entries scoring 0
    /// dropped; the best `take`, ties in map order.
    pub fn filter(&self, signals: &Signals, take: usize) -> Vec<CodeRef> {
        let n = self.entries.len();
        let mut scores = vec![0u32; n];
        let mut seen = vec![0u32; n];
        let mut stamp = 0u32;
        let mut pass = |column: &Column, needle: &str, weight: u32| {
            stamp += 1;
            column.score(needle, weight, &mut scores, &mut seen, stamp);
        };
        for keyword in &signals.keywords {
            pass(&self.component, keyword, 2);
            pass(&self.location, keyword, 1);
        }
        for domain in &signals.domains {
            pass(&self.notes, domain, 1);
        }
        for file in &signals.files {
            pass(&self.location_raw, file, 3);
        }
        let mut ranked: Vec<(usize, u32)> = scores
            .iter()
            .enumerate()
            .filter(|(_, s)| **s > 0)
            .map(|(i, s)| (i, *s))
            .collect();
        // Stable: equal scores keep the map's order.
        ranked.sort_by_key(|&(_, s)| std::cmp::Reverse(s));
        ranked.truncate(take);
        ranked
            .into_iter()
            .map(|(i, relevance)| {
                let e = &self.entries[i];
                CodeRef {
                    file: e.location.clone(),
                    component: e.component.clone(),
                    notes: e.notes.clone(),
                    relevance,
                    id: e.source.clone(),
                }
            })
            .collect()
    }
}

/// Where the context map is: the objects whose text holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MapPlace {
    /// `(file, index)` of the map's headline, when it is one.
    pub headline: Option<At>,
    /// The file, when the map is a whole file.
    pub file: Option<u32>,
}

/// Where the map is, or the knowledge headline (`name` is a title, an id,
/// or a file name ending in `.org`).
pub fn find_place(view: &MemexView<'_>, name: &str, cache: bool) -> MapPlace {
    let name = name.trim();
    if name.is_empty() {
        return MapPlace::default();
    }
    if let Some((file, index)) = view.find(name.strip_prefix("id:").unwrap_or(name)) {
        let f = view
            .files()
            .position(|x| std::ptr::eq(x, file))
            .unwrap_or(0) as u32;
        return MapPlace {
            headline: Some((f, index)),
            file: None,
        };
    }
    if name.ends_with(".org") {
        let file = view.files().position(|f| {
            let p = f.path.as_str();
            p == name || p.ends_with(&format!("/{name}"))
        });
        return MapPlace {
            headline: None,
            file: file.map(|f| f as u32),
        };
    }
    for (f, file) in view.files().enumerate() {
        if let Some(index) = crate::cache::title_lookup(file, name, cache) {
            return MapPlace {
                headline: Some((f as u32, index)),
                file: None,
            };
        }
    }
    MapPlace::default()
}

/// The context map's entries: tables and lists in the map headline's body
/// (or the whole map file), and entry headlines — the map headline's
/// children (or the map file's headlines) with a `:LOCATION:` property,
/// the title the component, `:NOTES:` the notes. An entry headline wins
/// over a table or list row of the same path (write-back adds such
/// headlines).
pub fn context_map(view: &MemexView<'_>, place: &MapPlace) -> Vec<MapEntry> {
    let files = view.files.as_slice();
    let mut rows = Vec::new();
    let mut heads = Vec::new();
    let entry_headline = |file: &FileView<'_>, index: u32, heads: &mut Vec<MapEntry>| {
        let obj = Obj { file, index };
        if let Some(location) = obj.property("LOCATION") {
            heads.push(MapEntry {
                component: obj.title().to_owned(),
                location: location.to_owned(),
                notes: obj.property("NOTES").unwrap_or("").to_owned(),
                source: obj.id().to_owned(),
            });
        }
    };
    if let Some((f, index)) = place.headline {
        let file = &files[f as usize];
        let obj = Obj { file, index };
        org::map_entries_in(obj.body(), obj.id(), &mut rows);
        for &child in file.children(index) {
            entry_headline(file, child, &mut heads);
            let c = Obj { file, index: child };
            if c.property("LOCATION").is_none() {
                org::map_entries_in(c.body(), c.id(), &mut rows);
            }
        }
    } else if let Some(f) = place.file {
        let file = &files[f as usize];
        let text = file.text.as_str();
        let first = if file.is_empty() {
            text.len()
        } else {
            let t = file.object(0).title.start as usize;
            text[..t.min(text.len())].rfind('\n').map_or(0, |i| i + 1)
        };
        org::map_entries_in(&text[..first], file.path.as_str(), &mut rows);
        for index in 0..file.len() as u32 {
            entry_headline(file, index, &mut heads);
            let o = Obj { file, index };
            if o.property("LOCATION").is_none() {
                org::map_entries_in(o.body(), o.id(), &mut rows);
            }
        }
    }
    // A set, not a scan per row: maps grow with every finished task.
    let path_of = |l: &str| l.split(':').next().unwrap_or(l).trim().to_owned();
    let headed: std::collections::HashSet<String> =
        heads.iter().map(|h| path_of(&h.location)).collect();
    rows.retain(|r| !headed.contains(&path_of(&r.location)));
    rows.extend(heads);
    rows
}
