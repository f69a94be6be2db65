//! The handles of the view's objects (`foveal_sdk::handle`), kept while
//! the view's files hold the same ids.
//!
//! The collision rule needs every visible object's hash in sorted order:
//! sorting 67,000 of them costs as much as a whole render. The sorted
//! hashes change only with a file's ids, so they are kept per file, under
//! a fingerprint of its id index (whatever `Options::cache` says: they are
//! an index of the file, like the host's own, not work of a render), and
//! the handles of the whole view under the fingerprints of its files. An
//! edit that keeps the ids (a body, a title, a TODO state) sorts nothing;
//! one that adds or removes a headline sorts that file's hashes again.
//!
//! Each file version's hashes are also kept by object, so that a render
//! reads an object's hash instead of hashing its id again (4,000 ids of 36
//! bytes were a fifth of the render of the benchmark memex).

use std::sync::{Arc, Mutex};

use foveal_sdk::handle::{Handle, Handles, mix, sorted_hashes};
use foveal_sdk::memex::{FileView, MemexView};

/// What identifies one version of a file's index without reading it all:
/// its address and size, and a few of its hashes (an address may be
/// reused by a later version).
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
        let picks = [
            ids.first().map(|e| e.hash),
            ids.get(ids.len() / 2).map(|e| e.hash),
            ids.last().map(|e| e.hash),
            objects.first().map(|o| o.hash),
            objects.last().map(|o| o.hash),
        ];
        Self {
            address: std::ptr::from_ref(file.index) as usize,
            len: objects.len(),
            sample: picks.into_iter().flatten().fold(ids.len() as u64, fold),
        }
    }
}

/// A fingerprint of the ids of a file and where they are: of its id
/// index, `(hash, object)` in sorted order. Equal fingerprints, equal
/// sorted hashes and hashes by object.
fn ids_fingerprint(file: &FileView<'_>) -> u64 {
    file.index
        .id_index
        .iter()
        .fold(file.index.id_index.len() as u64, |h, e| {
            fold(h, e.hash ^ u64::from(e.index).rotate_left(32))
        })
}

#[inline]
fn fold(h: u64, word: u64) -> u64 {
    let m = u128::from(h ^ word) * 0x9e37_79b9_7f4a_7c15;
    (m as u64) ^ ((m >> 64) as u64)
}

/// One file as last seen: its version, the fingerprint of its ids, their
/// sorted hashes, and each object's hash.
struct KeptFile {
    key: FileKey,
    ids: u64,
    sorted: Arc<[u64]>,
    by_object: Arc<[u64]>,
}

/// Each object's hash ([`foveal_sdk::handle::hash_of`] its id), by index.
fn by_object(file: &FileView<'_>) -> Arc<[u64]> {
    let mut hashes = vec![0u64; file.len()];
    for e in file.index.id_index.iter() {
        if let Some(h) = hashes.get_mut(e.index as usize) {
            *h = mix(e.hash);
        }
    }
    hashes.into()
}

/// The handles of one view: the collision rule's lengths, and each
/// object's hash, by file and index.
#[derive(Debug)]
pub struct ViewHandles {
    handles: Arc<Handles>,
    by_object: Vec<Arc<[u64]>>,
}

impl ViewHandles {
    /// The handle of object `i` of file `f` of the view.
    #[inline]
    pub fn of(&self, f: u32, i: u32) -> Handle {
        let hash = self.by_object[f as usize][i as usize];
        self.handles.of_hash(hash)
    }

    /// Starts loading the hash of object `i` of file `f` into the cache.
    #[inline]
    pub fn prefetch(&self, f: u32, i: u32) {
        #[cfg(target_arch = "x86_64")]
        if let Some(hash) = self
            .by_object
            .get(f as usize)
            .and_then(|b| b.get(i as usize))
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            // SAFETY: a prefetch is a hint; it never faults and reads
            // nothing into the program. The pointer is in bounds anyway.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(hash).cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (f, i);
    }
}

#[derive(Default)]
struct Kept {
    /// The last view's files.
    files: Vec<KeptFile>,
    /// The handles of the last view, by its files' id fingerprints in
    /// order.
    view: Option<(Vec<u64>, Arc<Handles>)>,
}

static KEPT: Mutex<Option<Kept>> = Mutex::new(None);

/// The handles of `memex`'s objects.
pub fn of_view(memex: &MemexView<'_>) -> ViewHandles {
    let mut guard = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    let kept = guard.get_or_insert_with(Kept::default);
    // Each file's version and ids: a version seen before is not read.
    // (Files keep their order from one view to the next: the file at the
    // same place is looked at first, the others only when it differs.)
    let same_place = |f: usize, wanted: &dyn Fn(&KeptFile) -> bool| -> Option<usize> {
        match kept.files.get(f) {
            Some(k) if wanted(k) => Some(f),
            _ => kept.files.iter().position(wanted),
        }
    };
    let files: Vec<(FileKey, u64, Arc<[u64]>)> = memex
        .files()
        .enumerate()
        .map(|(f, file)| {
            let key = FileKey::of(file);
            if let Some(at) = same_place(f, &|k| k.key == key) {
                return (
                    key,
                    kept.files[at].ids,
                    Arc::clone(&kept.files[at].by_object),
                );
            }
            // A new version: read its ids; an edit that kept them (a
            // body, a title, a state) keeps its hashes.
            let ids = ids_fingerprint(file);
            let len = file.len();
            match same_place(f, &|k| k.ids == ids && k.by_object.len() == len) {
                Some(at) => (key, ids, Arc::clone(&kept.files[at].by_object)),
                None => (key, ids, by_object(file)),
            }
        })
        .collect();
    let fingerprints: Vec<u64> = files.iter().map(|&(_, ids, _)| ids).collect();
    let lists: Vec<Arc<[u64]>> = memex
        .files()
        .zip(&files)
        .enumerate()
        .map(|(f, (file, &(_, ids, _)))| {
            let len = file.index.id_index.len();
            same_place(f, &|k| k.ids == ids && k.sorted.len() == len)
                .map(|at| Arc::clone(&kept.files[at].sorted))
                .unwrap_or_else(|| sorted_hashes(file).into())
        })
        .collect();
    let handles = match &kept.view {
        Some((k, handles)) if *k == fingerprints => Arc::clone(handles),
        _ => {
            let slices: Vec<&[u64]> = lists.iter().map(|l| &l[..]).collect();
            Arc::new(Handles::from_sorted(&slices))
        }
    };
    let by_object: Vec<Arc<[u64]>> = files.iter().map(|(_, _, b)| Arc::clone(b)).collect();
    kept.files = files
        .into_iter()
        .zip(lists)
        .map(|((key, ids, by_object), sorted)| KeptFile {
            key,
            ids,
            sorted,
            by_object,
        })
        .collect();
    kept.view = Some((fingerprints, Arc::clone(&handles)));
    ViewHandles { handles, by_object }
}
