//! The handles of the view's objects (`foveal_sdk::handle`), kept while
//! the view's files are the same versions.
//!
//! The collision rule needs every visible object's hash in sorted order:
//! sorting 100,000 of them costs more than a whole render. The sorted
//! hashes change only with a file's version, like the host's own indexes
//! of the file, so they are kept per file version (whatever
//! `Options::cache` says: they are an index of the file, not work of a
//! render), and the handles of the whole view per set of versions. After
//! an edit only the edited file's hashes are sorted again.

use std::sync::{Arc, Mutex};

use foveal_sdk::handle::{Handles, sorted_hashes};
use foveal_sdk::memex::{FileView, MemexView};

/// What identifies one version of a file's index: its address and size,
/// and a few of its hashes (an address may be reused by a later version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileKey {
    address: usize,
    len: usize,
    sample: u64,
}

impl FileKey {
    fn of(file: &FileView<'_>) -> Self {
        let ids = file.index.id_index.as_slice();
        let objects = file.index.objects.as_slice();
        let mut sample = ids.len() as u64;
        let picks = [
            ids.first().map(|e| e.hash),
            ids.get(ids.len() / 2).map(|e| e.hash),
            ids.last().map(|e| e.hash),
            objects.first().map(|o| o.hash),
            objects.last().map(|o| o.hash),
        ];
        for word in picks.into_iter().flatten() {
            let m = u128::from(sample ^ word) * 0x9e37_79b9_7f4a_7c15;
            sample = (m as u64) ^ ((m >> 64) as u64);
        }
        Self {
            address: std::ptr::from_ref(file.index) as usize,
            len: objects.len(),
            sample,
        }
    }
}

#[derive(Default)]
struct Kept {
    /// The sorted hashes of the last view's files.
    files: Vec<(FileKey, Arc<[u64]>)>,
    /// The handles of the last view, by its files' keys in order.
    view: Option<(Vec<FileKey>, Arc<Handles>)>,
}

static KEPT: Mutex<Option<Kept>> = Mutex::new(None);

/// The handles of `memex`'s objects.
pub fn of_view(memex: &MemexView<'_>) -> Arc<Handles> {
    let keys: Vec<FileKey> = memex.files().map(FileKey::of).collect();
    let mut guard = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    let kept = guard.get_or_insert_with(Kept::default);
    if let Some((k, handles)) = &kept.view
        && *k == keys
    {
        return Arc::clone(handles);
    }
    let lists: Vec<Arc<[u64]>> = memex
        .files()
        .zip(&keys)
        .map(|(file, key)| {
            kept.files
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, sorted)| Arc::clone(sorted))
                .unwrap_or_else(|| sorted_hashes(file).into())
        })
        .collect();
    let slices: Vec<&[u64]> = lists.iter().map(|l| &l[..]).collect();
    let handles = Arc::new(Handles::from_sorted(&slices));
    kept.files = keys.iter().copied().zip(lists).collect();
    kept.view = Some((keys, Arc::clone(&handles)));
    handles
}
