//! Work kept between calls, per version of a file: where a headline of a
//! given title is, and the context map read from it, ready to score.
//!
//! Finding the context map's headline by its title is the only walk over
//! every headline of a file; its answer is kept per file version, so a
//! call on an unchanged file does not walk it again. A version is told
//! apart by what the host lends: the address and length of its text and
//! index, the number of objects and the content hashes of the first and
//! last object (the host prepares the index once per version of a file and
//! keeps it while a snapshot holds it).

use std::sync::Mutex;

use foveal_sdk::memex::FileView;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    text: (usize, usize),
    index: usize,
    objects: usize,
    ends: (u64, u64),
    title: String,
}

/// At most this many answers are kept (a few maps and knowledge headlines
/// in a few files, across a few memex versions).
const KEEP: usize = 64;

static LOOKUPS: Mutex<Vec<(Key, Option<u32>)>> = Mutex::new(Vec::new());

fn key(file: &FileView<'_>, title: &str) -> Key {
    let objects = &file.index.objects;
    Key {
        text: (file.text.as_str().as_ptr() as usize, file.text.len()),
        index: std::ptr::from_ref(file.index) as usize,
        objects: objects.len(),
        ends: (
            objects.first().map_or(0, |o| o.hash),
            objects.last().map_or(0, |o| o.hash),
        ),
        title: title.to_owned(),
    }
}

/// The first headline of `file` titled `title` (case-insensitive, spaces
/// around ignored), from the cache when `cache` and the file is unchanged.
pub fn title_lookup(file: &FileView<'_>, title: &str, cache: bool) -> Option<u32> {
    if !cache {
        return scan(file, title);
    }
    let key = key(file, title);
    {
        let lookups = LOOKUPS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, found)) = lookups.iter().find(|(k, _)| *k == key) {
            return *found;
        }
    }
    let found = scan(file, title);
    let mut lookups = LOOKUPS.lock().unwrap_or_else(|e| e.into_inner());
    if lookups.len() >= KEEP {
        lookups.remove(0);
    }
    lookups.push((key, found));
    found
}

/// The context map prepared for scoring, kept per version of the file
/// that holds it (`place` tells maps of one file apart).
pub fn map_index(
    file: &FileView<'_>,
    place: u32,
    cache: bool,
    build: impl FnOnce() -> crate::map::MapIndex,
) -> std::sync::Arc<crate::map::MapIndex> {
    if !cache {
        return std::sync::Arc::new(build());
    }
    let key = key(file, &format!("\u{0}map {place}"));
    {
        let maps = MAPS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, map)) = maps.iter().find(|(k, _)| *k == key) {
            return std::sync::Arc::clone(map);
        }
    }
    let map = std::sync::Arc::new(build());
    let mut maps = MAPS.lock().unwrap_or_else(|e| e.into_inner());
    if maps.len() >= 8 {
        maps.remove(0);
    }
    maps.push((key, std::sync::Arc::clone(&map)));
    map
}

#[allow(clippy::type_complexity)]
static MAPS: Mutex<Vec<(Key, std::sync::Arc<crate::map::MapIndex>)>> = Mutex::new(Vec::new());

fn scan(file: &FileView<'_>, title: &str) -> Option<u32> {
    let title = title.trim();
    let len = title.len() as u32;
    let text = file.text.as_str();
    file.index
        .objects
        .iter()
        .position(|o| {
            // The length first: most titles are told apart without reading
            // their text.
            o.title.len >= len
                && text
                    .get(o.title.range())
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case(title))
        })
        .map(|i| i as u32)
}
