//! Vectors kept on disk, keyed by model and content, so that only new or
//! changed objects are embedded.
//!
//! One file per model, `<data dir>/embeddings/<model>.vectors` (folder
//! 0700, file 0600): a header naming the model, then records appended a
//! batch at a time — `key (32 bytes) · dim (u32) · dim × f32 · checksum
//! (u64)`, little-endian. The key is the SHA-256 of the model id and the
//! text embedded ([`key`]); the text itself is never written. A record
//! whose checksum does not match, or a file cut in the middle of one (a
//! crash, a full disk), ends what is trusted: the records before it are
//! kept, the file is cut back to them, and what was lost is embedded
//! again. A file made for another model is started afresh.
//!
//! Private objects are never embedded ([`crate::plan`]), so nothing
//! here — in memory or on disk — is derived from private text
//! (docs/security.md). The vector of an object that becomes private is
//! removed at once ([`VectorCache::remove`]): from memory, and from the
//! file by writing over its record in place — a dead record of the same
//! length, all zeros but its length and checksum, that loading skips.
//!
//! # Example
//!
//! ```
//! use foveal_embed::cache::{key, VectorCache};
//!
//! let data = tempfile::tempdir().unwrap();
//! let cache = VectorCache::open(data.path(), "demo-model").unwrap();
//! let k = key("demo-model", "Launch\nWrite the docs.");
//! cache.insert(vec![(k, vec![0.6, 0.8])]).unwrap();
//! // A second process finds it on disk.
//! let again = VectorCache::open(data.path(), "demo-model").unwrap();
//! assert_eq!(again.get(&k).as_deref(), Some(&[0.6, 0.8][..]));
//! ```

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

/// The key of a vector: SHA-256 of the model id, a NUL and the text.
pub type Key = [u8; 32];

/// The key of `text` embedded by `model_id`.
pub fn key(model_id: &str, text: &str) -> Key {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(model_id.as_bytes());
    h.update([0u8]);
    h.update(text.as_bytes());
    h.finalize().into()
}

/// The file's first bytes.
const MAGIC: &[u8; 8] = b"FVECS\x00\x00\x01";
/// The key of a dead record: one written over a removed vector. (No text
/// has it: it would take a SHA-256 preimage of zero.)
const DEAD: Key = [0; 32];
/// The largest dimension a record may claim (a damaged length field must
/// not make the reader allocate gigabytes).
const MAX_DIM: usize = 1 << 16;

/// Why the cache could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The folder or file could not be created, read or written.
    #[error("embedding cache {}: {source}; check that the data dir is writable (FOVEAL_DATA_DIR)", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// What loading the file found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Records trusted.
    pub records: usize,
    /// Bytes cut off after the last good record (0: the file was whole).
    pub cut_bytes: u64,
    /// The file was for another model, or not a cache file: started afresh.
    pub restarted: bool,
}

/// The vectors of one model: in memory, and in the file when it has one.
#[derive(Debug)]
pub struct VectorCache {
    model_id: String,
    path: Option<PathBuf>,
    vectors: RwLock<HashMap<Key, Arc<[f32]>>>,
    /// The keys written to the file, and the open file to append to.
    disk: Mutex<Disk>,
    loaded: LoadReport,
}

#[derive(Debug, Default)]
struct Disk {
    file: Option<File>,
    /// Each key written to the file, with where its record is.
    keys: HashMap<Key, Slot>,
    /// Records in the file, dead ones included.
    records: usize,
}

/// Where a record is in the file: its offset and its dimension.
#[derive(Debug, Clone, Copy)]
struct Slot {
    at: u64,
    dim: u32,
}

impl VectorCache {
    /// A cache that never touches the disk.
    pub fn in_memory(model_id: &str) -> Self {
        Self {
            model_id: model_id.to_owned(),
            path: None,
            vectors: RwLock::default(),
            disk: Mutex::default(),
            loaded: LoadReport::default(),
        }
    }

    /// The file of `model_id` under `data_dir`.
    pub fn file_path(data_dir: &Path, model_id: &str) -> PathBuf {
        let mut name: String = model_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        // Two ids that clean up alike (`a/b`, `a:b`) keep apart.
        let digest = key(model_id, "");
        name.push_str(&format!(
            "-{:02x}{:02x}{:02x}{:02x}.vectors",
            digest[0], digest[1], digest[2], digest[3]
        ));
        data_dir.join("embeddings").join(name)
    }

    /// Opens (creating it if new) the cache of `model_id` under
    /// `data_dir`, trusting only what checks out ([`LoadReport`]).
    pub fn open(data_dir: &Path, model_id: &str) -> Result<Self, CacheError> {
        let path = Self::file_path(data_dir, model_id);
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| CacheError::Io { path, source }
        };
        let dir = path.parent().unwrap_or(data_dir);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io(dir))?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io(&path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io(&path))?;
        let header = header(model_id);
        let mut vectors = HashMap::new();
        let mut keys = HashMap::new();
        let mut records = 0;
        let mut report = LoadReport::default();
        let good = if bytes.is_empty() {
            file.write_all(&header).map_err(io(&path))?;
            header.len() as u64
        } else if !bytes.starts_with(&header) {
            tracing::warn!(
                target: "foveal::embed",
                path = %path.display(),
                "embedding cache is not one of {model_id}; started afresh"
            );
            report.restarted = true;
            file.set_len(0).map_err(io(&path))?;
            file.seek(SeekFrom::Start(0)).map_err(io(&path))?;
            file.write_all(&header).map_err(io(&path))?;
            header.len() as u64
        } else {
            let mut at = header.len();
            while let Some((key, vector, next)) = record(&bytes, at) {
                records += 1;
                if key != DEAD {
                    let dim = vector.len() as u32;
                    keys.insert(key, Slot { at: at as u64, dim });
                    vectors.insert(key, Arc::from(vector));
                    report.records += 1;
                }
                at = next;
            }
            if at < bytes.len() {
                report.cut_bytes = (bytes.len() - at) as u64;
                tracing::warn!(
                    target: "foveal::embed",
                    path = %path.display(),
                    kept = report.records,
                    cut_bytes = report.cut_bytes,
                    "embedding cache is damaged after its last good record; the rest is cut off and embedded again"
                );
                file.set_len(at as u64).map_err(io(&path))?;
            }
            at as u64
        };
        file.seek(SeekFrom::Start(good)).map_err(io(&path))?;
        Ok(Self {
            model_id: model_id.to_owned(),
            vectors: RwLock::new(vectors),
            disk: Mutex::new(Disk {
                file: Some(file),
                records,
                keys,
            }),
            path: Some(path),
            loaded: report,
        })
    }

    /// The model whose vectors these are.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The file, when there is one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// What opening the file found.
    pub fn loaded(&self) -> &LoadReport {
        &self.loaded
    }

    /// The vector of `key`.
    pub fn get(&self, key: &Key) -> Option<Arc<[f32]>> {
        self.vectors
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    /// Whether `key` has a vector.
    pub fn contains(&self, key: &Key) -> bool {
        self.vectors
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(key)
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.vectors.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a batch: to memory, and to the file in one write, so an
    /// interruption loses at most this batch.
    pub fn insert(&self, batch: Vec<(Key, Vec<f32>)>) -> Result<(), CacheError> {
        let mut disk = self.disk.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        // Each new record's key, with its offset in `out` and dimension.
        let mut new_keys = Vec::new();
        let mut seen = HashSet::new();
        for (key, vector) in &batch {
            if disk.file.is_some() && !disk.keys.contains_key(key) && seen.insert(*key) {
                let at = out.len() as u64;
                write_record(&mut out, key, vector);
                new_keys.push((
                    *key,
                    Slot {
                        at,
                        dim: vector.len() as u32,
                    },
                ));
            }
        }
        if !out.is_empty()
            && let (Some(file), Some(path)) = (disk.file.as_mut(), &self.path)
        {
            let io = |source| CacheError::Io {
                path: path.clone(),
                source,
            };
            let end = file.stream_position().map_err(io)?;
            file.write_all(&out).map_err(io)?;
            disk.records += new_keys.len();
            for (key, slot) in new_keys {
                let at = end + slot.at;
                disk.keys.insert(key, Slot { at, ..slot });
            }
        }
        drop(disk);
        let mut vectors = self.vectors.write().unwrap_or_else(|e| e.into_inner());
        for (key, vector) in batch {
            vectors.insert(key, Arc::from(vector));
        }
        Ok(())
    }

    /// Removes the vectors of `keys` (those of objects that are now
    /// private), at once: from memory, and from the file by writing a dead
    /// record over each one's record in place, synced. Returns how many
    /// it held.
    pub fn remove(&self, keys: &[Key]) -> Result<usize, CacheError> {
        let mut disk = self.disk.lock().unwrap_or_else(|e| e.into_inner());
        let mut removed = 0;
        {
            let mut vectors = self.vectors.write().unwrap_or_else(|e| e.into_inner());
            for key in keys {
                if vectors.remove(key).is_some() {
                    removed += 1;
                }
            }
        }
        let slots: Vec<Slot> = keys.iter().filter_map(|k| disk.keys.remove(k)).collect();
        if slots.is_empty() {
            return Ok(removed);
        }
        if let (Some(file), Some(path)) = (disk.file.as_ref(), &self.path) {
            use std::os::unix::fs::FileExt as _;
            let io = |source| CacheError::Io {
                path: path.clone(),
                source,
            };
            for slot in &slots {
                let mut dead = Vec::new();
                write_record(&mut dead, &DEAD, &vec![0.0; slot.dim as usize]);
                file.write_all_at(&dead, slot.at).map_err(io)?;
            }
            file.sync_data().map_err(io)?;
        }
        Ok(removed)
    }

    /// Rewrites the file with only the records of `live` keys when more
    /// than half of it is for texts no object has any more (or dead
    /// records). Returns the records dropped.
    pub fn compact(&self, live: &HashSet<Key>) -> Result<usize, CacheError> {
        let Some(path) = &self.path else {
            return Ok(0);
        };
        let mut disk = self.disk.lock().unwrap_or_else(|e| e.into_inner());
        let dead = disk.records.saturating_sub(disk.keys.len())
            + disk.keys.keys().filter(|k| !live.contains(*k)).count();
        if dead * 2 <= disk.records.max(1) {
            return Ok(0);
        }
        let io = |source| CacheError::Io {
            path: path.clone(),
            source,
        };
        let mut out = header(&self.model_id);
        let vectors = self.vectors.read().unwrap_or_else(|e| e.into_inner());
        let mut kept: HashMap<Key, Slot> = HashMap::new();
        for key in disk.keys.keys().filter(|k| live.contains(*k)) {
            if let Some(vector) = vectors.get(key) {
                let at = out.len() as u64;
                write_record(&mut out, key, vector);
                let dim = vector.len() as u32;
                kept.insert(*key, Slot { at, dim });
            }
        }
        drop(vectors);
        let tmp = path.with_extension("vectors.tmp");
        {
            let mut file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(io)?;
            file.write_all(&out).map_err(io)?;
            file.sync_data().map_err(io)?;
        }
        std::fs::rename(&tmp, path).map_err(io)?;
        // Not `append`: a removal writes over a record in place, which
        // `pwrite` on an `O_APPEND` file would append instead.
        let mut file = OpenOptions::new().write(true).open(path).map_err(io)?;
        file.seek(SeekFrom::End(0)).map_err(io)?;
        disk.file = Some(file);
        disk.records = kept.len();
        disk.keys = kept;
        Ok(dead)
    }
}

/// The header for `model_id`: magic, length, the id.
fn header(model_id: &str) -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    h.extend_from_slice(&(model_id.len() as u32).to_le_bytes());
    h.extend_from_slice(model_id.as_bytes());
    h
}

fn write_record(out: &mut Vec<u8>, key: &Key, vector: &[f32]) {
    let start = out.len();
    out.extend_from_slice(key);
    out.extend_from_slice(&(vector.len() as u32).to_le_bytes());
    for x in vector {
        out.extend_from_slice(&x.to_le_bytes());
    }
    let sum = checksum(&out[start..]);
    out.extend_from_slice(&sum.to_le_bytes());
}

/// The record at `at`, and where the next starts; `None` when it is cut
/// short, claims an impossible size or fails its checksum.
fn record(bytes: &[u8], at: usize) -> Option<(Key, Vec<f32>, usize)> {
    let head = bytes.get(at..at + 36)?;
    let dim = u32::from_le_bytes(head[32..36].try_into().ok()?) as usize;
    if dim == 0 || dim > MAX_DIM {
        return None;
    }
    let body_end = at + 36 + dim * 4;
    let body = bytes.get(at..body_end)?;
    let sum = u64::from_le_bytes(bytes.get(body_end..body_end + 8)?.try_into().ok()?);
    if checksum(body) != sum {
        return None;
    }
    let key: Key = head[..32].try_into().ok()?;
    let vector = body[36..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect::<Vec<f32>>();
    vector.iter().all(|x| x.is_finite()).then_some(())?;
    Some((key, vector, body_end + 8))
}

/// A 64-bit checksum of a record, eight bytes a step (multiply-fold).
fn checksum(bytes: &[u8]) -> u64 {
    #[inline]
    fn mix(h: u64, w: u64) -> u64 {
        let m = u128::from(h ^ w) * 0x9e37_79b9_7f4a_7c15u128;
        (m as u64) ^ ((m >> 64) as u64)
    }
    let mut h = mix(0x6a09_e667_f3bc_c908, bytes.len() as u64);
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        h = mix(h, u64::from_le_bytes(w.try_into().unwrap_or_default()));
    }
    let mut last = [0u8; 8];
    last[..words.remainder().len()].copy_from_slice(words.remainder());
    mix(h, u64::from_le_bytes(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(dir: &Path, n: usize) -> Vec<Key> {
        let cache = VectorCache::open(dir, "m").unwrap();
        let keys: Vec<Key> = (0..n).map(|i| key("m", &format!("text {i}"))).collect();
        cache
            .insert(
                keys.iter()
                    .enumerate()
                    .map(|(i, k)| (*k, vec![i as f32, 1.0, 2.0]))
                    .collect(),
            )
            .unwrap();
        keys
    }

    #[test]
    fn vectors_survive_a_restart_in_a_file_only_its_owner_reads() {
        let dir = tempfile::tempdir().unwrap();
        let keys = filled(dir.path(), 3);
        let cache = VectorCache::open(dir.path(), "m").unwrap();
        assert_eq!(cache.loaded().records, 3);
        assert_eq!(cache.get(&keys[2]).as_deref(), Some(&[2.0, 1.0, 2.0][..]));
        // The same key again is not written twice.
        cache.insert(vec![(keys[0], vec![0.0, 1.0, 2.0])]).unwrap();
        assert_eq!(
            VectorCache::open(dir.path(), "m").unwrap().loaded().records,
            3
        );
        let mode = std::fs::metadata(VectorCache::file_path(dir.path(), "m"))
            .unwrap()
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
    }

    #[test]
    fn a_damaged_record_is_detected_and_the_file_cut_back_to_the_good_ones() {
        let dir = tempfile::tempdir().unwrap();
        let keys = filled(dir.path(), 4);
        let path = VectorCache::file_path(dir.path(), "m");
        let mut bytes = std::fs::read(&path).unwrap();
        let record_len = 32 + 4 + 3 * 4 + 8;
        let third = header("m").len() + 2 * record_len;
        // One bit of the third record's first float flips.
        bytes[third + 36] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let cache = VectorCache::open(dir.path(), "m").unwrap();
        assert_eq!(cache.loaded().records, 2);
        assert_eq!(cache.loaded().cut_bytes, 2 * record_len as u64);
        assert!(cache.contains(&keys[1]) && !cache.contains(&keys[2]));
        assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, third);
        // Rebuilt: what is added now follows the good records.
        cache.insert(vec![(keys[2], vec![5.0, 5.0, 5.0])]).unwrap();
        let again = VectorCache::open(dir.path(), "m").unwrap();
        assert_eq!(again.loaded().records, 3);
        assert_eq!(again.get(&keys[2]).as_deref(), Some(&[5.0, 5.0, 5.0][..]));
    }

    #[test]
    fn a_file_cut_mid_record_or_of_another_model_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        filled(dir.path(), 2);
        let path = VectorCache::file_path(dir.path(), "m");
        let len = std::fs::metadata(&path).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 5)
            .unwrap();
        assert_eq!(VectorCache::open(dir.path(), "m").unwrap().len(), 1);
        // Another model's file under this model's name.
        let other = VectorCache::file_path(dir.path(), "other");
        std::fs::copy(&path, &other).unwrap();
        let cache = VectorCache::open(dir.path(), "other").unwrap();
        assert!(cache.loaded().restarted && cache.is_empty());
    }

    #[test]
    fn a_removed_vector_is_gone_from_memory_and_from_the_file_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let keys = filled(dir.path(), 3);
        let path = VectorCache::file_path(dir.path(), "m");
        let held = |key: &Key| std::fs::read(&path).unwrap().windows(32).any(|w| w == key);
        let cache = VectorCache::open(dir.path(), "m").unwrap();
        assert!(held(&keys[1]) && cache.contains(&keys[1]));
        let len = std::fs::metadata(&path).unwrap().len();
        assert_eq!(cache.remove(&[keys[1], key("m", "never held")]).unwrap(), 1);
        assert!(!cache.contains(&keys[1]));
        // Written over in place: the key and its vector are not in the
        // file any more, and the others are.
        assert!(!held(&keys[1]));
        assert!(held(&keys[0]) && held(&keys[2]));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
        // A record added later follows, and every live one loads.
        let new = key("m", "text new");
        cache.insert(vec![(new, vec![7.0, 7.0, 7.0])]).unwrap();
        let again = VectorCache::open(dir.path(), "m").unwrap();
        assert_eq!(again.loaded().records, 3);
        assert_eq!(again.loaded().cut_bytes, 0);
        assert!(!again.contains(&keys[1]));
        assert_eq!(again.get(&keys[2]).as_deref(), Some(&[2.0, 1.0, 2.0][..]));
        assert_eq!(again.get(&new).as_deref(), Some(&[7.0, 7.0, 7.0][..]));
        // Removing from the reopened cache finds the record where it is.
        again.remove(&[keys[2]]).unwrap();
        assert!(!held(&keys[2]) && held(&keys[0]) && held(&new));
        // Compaction counts the two dead records (with `new`, no longer
        // live, three of four: over half) and drops them.
        let live: HashSet<Key> = [keys[0]].into_iter().collect();
        assert_eq!(again.compact(&live).unwrap(), 3);
        let compacted = VectorCache::open(dir.path(), "m").unwrap();
        assert_eq!(compacted.loaded().records, 1);
        assert!(compacted.contains(&keys[0]));
        assert_eq!(
            std::fs::metadata(&path).unwrap().len() as usize,
            header("m").len() + (32 + 4 + 3 * 4 + 8)
        );
    }

    #[test]
    fn compaction_drops_vectors_no_object_needs() {
        let dir = tempfile::tempdir().unwrap();
        let keys = filled(dir.path(), 10);
        let cache = VectorCache::open(dir.path(), "m").unwrap();
        let live: HashSet<Key> = keys[..2].iter().copied().collect();
        assert_eq!(cache.compact(&live).unwrap(), 8);
        cache.insert(vec![(keys[5], vec![1.0, 1.0, 1.0])]).unwrap();
        let again = VectorCache::open(dir.path(), "m").unwrap();
        assert_eq!(again.loaded().records, 3);
        assert!(again.contains(&keys[0]) && again.contains(&keys[5]));
    }
}
