//! The agenda's items per file version, so that a turn after an edit reads
//! only the file that changed.
//!
//! A file's version is known by its path, its object count and the fold of
//! its objects' hashes (each a hash of everything the object shows) and
//! done states (which follow the file's TODO keywords): equal means the
//! same dated items, up to a 64-bit collision.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use foveal_sdk::dates::{self, agenda::Item};
use foveal_sdk::memex::{FileView, MemexView};

/// Per path: the version key and the file's items (with their object).
type Cached = HashMap<String, (u64, Arc<Vec<(Item, u32)>>)>;

static CACHE: Mutex<Option<Cached>> = Mutex::new(None);

fn version(file: &FileView<'_>) -> u64 {
    // `done` too: it follows the file's TODO keywords (its `#+TODO:`, a
    // setup file's), which are in no object's hash.
    (0..file.len() as u32).fold(file.len() as u64, |h, i| {
        let o = file.object(i);
        (h ^ o.hash ^ u64::from(o.done)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The agenda's items of `view`, files numbered in view order, each with
/// its `(file, object)`.
pub fn items(view: &MemexView<'_>) -> (Vec<Item>, Vec<(u32, u32)>) {
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = guard.get_or_insert_with(HashMap::new);
    let mut items = Vec::new();
    let mut at = Vec::new();
    let mut seen = HashSet::with_capacity(view.files.len());
    for (f, file) in view.files().enumerate() {
        let path = file.path.as_str();
        seen.insert(path);
        let key = version(file);
        let file_items = match cache.get(path) {
            Some((k, cached)) if *k == key => Arc::clone(cached),
            _ => {
                let fresh = Arc::new(dates::file_items(file));
                cache.insert(path.to_owned(), (key, Arc::clone(&fresh)));
                fresh
            }
        };
        for (item, index) in file_items.iter() {
            items.push(Item {
                file: f as u32,
                ..item.clone()
            });
            at.push((f as u32, *index));
        }
    }
    // Files no longer lent (removed, or now private) are forgotten.
    cache.retain(|path, _| seen.contains(path.as_str()));
    (items, at)
}
