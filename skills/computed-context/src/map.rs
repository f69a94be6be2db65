//! Phase 4 (seed 001, `filterContextMap`): the context map, found where
//! the configuration says, read from its tables, lists and entry
//! headlines, and scored against the task's signals.

use foveal_sdk::memex::{FileView, MemexView};

use crate::org::{self, MapEntry, Obj};
use crate::phases::{At, Signals};

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
    let mut filtered: Vec<CodeRef> = Vec::new();
    for entry in map {
        let component = entry.component.to_lowercase();
        let location = entry.location.to_lowercase();
        let notes = entry.notes.to_lowercase();
        let mut score = 0u32;
        for keyword in &signals.keywords {
            if component.contains(keyword.as_str()) {
                score += 2;
            }
            if location.contains(keyword.as_str()) {
                score += 1;
            }
        }
        for domain in &signals.domains {
            if notes.contains(domain.as_str()) {
                score += 1;
            }
        }
        for file in &signals.files {
            if entry.location.contains(file.as_str()) {
                score += 3;
            }
        }
        if score > 0 {
            filtered.push(CodeRef {
                file: entry.location.clone(),
                component: entry.component.clone(),
                notes: entry.notes.clone(),
                relevance: score,
                id: entry.source.clone(),
            });
        }
    }
    filtered.sort_by_key(|r| std::cmp::Reverse(r.relevance));
    filtered.truncate(take);
    filtered
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
