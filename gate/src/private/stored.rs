//! The matcher's sets on disk: a process that starts on an unchanged
//! memex reads them instead of building them (at a million headlines the
//! build is about 20 s; the read, a second).
//!
//! One file, `private.keys` in the data dir's `index` folder (the folder
//! 0700, the file 0600), holds the sets of one full build and the
//! [`digest`] of what they were built from: every file's path, the
//! BLAKE3 hash of its text (`MemexFile::text_digest`, kept from the
//! load), its file tags, its TODO keywords and whether its setup files'
//! tags are known; every file read but not loaded, by path and a
//! SHA-256 of its text; the privacy tags; the format, the version of
//! foveal, the running program's file (its device, inode, size and
//! change times: another build is another file) and the sets a build
//! makes of a sample memex (so that a change in how keys are made, or
//! which are public, is another digest). A process uses the file only when the digest
//! of its own snapshot is the same — so the sets are those a build would
//! make, and privacy is never decided from a stale entry — and builds the
//! matcher (and writes the file again) otherwise. A file that is cut
//! short, damaged (a CRC-32 of all of it) or not foveal's is said at the
//! default log level and built over.
//!
//! What the file gives away is said in `docs/security.md` ("The private-
//! text index"): keys of runs of private words, which a dictionary can
//! invert for the shortest private lines.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use sha2::{Digest as _, Sha256};

use foveal_memex::file::MemexFile;
use foveal_memex::privacy::PrivacyTags;
use foveal_memex::snapshot::MemexSnapshot;

use super::{Build, Kept, KeySet, Sets, SortedKeys, file_keys, on_cores};

/// The first bytes of the file.
const MAGIC: &[u8; 8] = b"FOVPKEYS";

/// The layout and the rules of the build: raise it when either changes
/// in a way the sample's keys ([`scheme`]) would not show (which keys
/// visible text makes public, how the sets are formed).
const FORMAT: u32 = 2;

/// What a stored matcher was built from ([`digest`]).
pub(crate) type Digest = [u8; 32];

/// Why a stored matcher was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a private-text index of this version of foveal")]
    Foreign,
    #[error("damaged (its checksum does not match)")]
    Damaged,
}

/// The digest of what the matcher of `memex` is built from (see the
/// module docs). Each file's text is hashed on every core.
pub(crate) fn digest(memex: &MemexSnapshot, privacy: &PrivacyTags) -> Digest {
    let files: Vec<&Arc<MemexFile>> = memex.files().collect();
    let texts: Vec<Digest> = on_cores(&files, |file| file.text_digest());
    let mut all = Sha256::new();
    let mut part = |bytes: &[u8]| {
        all.update((bytes.len() as u64).to_le_bytes());
        all.update(bytes);
    };
    part(MAGIC);
    part(&FORMAT.to_le_bytes());
    part(env!("CARGO_PKG_VERSION").as_bytes());
    part(foveal_memex::build_identity());
    part(scheme());
    let mut tags: Vec<&str> = privacy.names().collect();
    tags.sort_unstable();
    part(&(tags.len() as u64).to_le_bytes());
    for tag in tags {
        part(tag.as_bytes());
    }
    part(&(files.len() as u64).to_le_bytes());
    for (file, text) in files.iter().zip(&texts) {
        part(file.path.as_os_str().as_encoded_bytes());
        part(text);
        part(&(file.file_tags.len() as u64).to_le_bytes());
        for tag in &file.file_tags {
            part(tag.as_bytes());
        }
        part(format!("{:?}", file.keywords).as_bytes());
        part(&[u8::from(file.setup.tags_unknown())]);
    }
    let failed: Vec<(&Path, &Arc<str>)> = memex.failed_texts().collect();
    part(&(failed.len() as u64).to_le_bytes());
    for (path, text) in failed {
        part(path.as_os_str().as_encoded_bytes());
        part(&Sha256::digest(text.as_bytes()));
    }
    all.finalize().into()
}

/// A text private in every way a key is made of: its keys change when
/// the way keys are made does.
const SAMPLE: &str = "#+TITLE: Sample\n\
* Visible plans for the week :work:\n\
Ship the quarterly report to the whole team on Friday.\n\
* Doctor visit 2025-01-14 Tuesday :@sample:\n\
:PROPERTIES:\n\
:LOCATION: Room 4471, St. Mary's Clinic\n\
:END:\n\
My doctor said the biopsy results look clear, no follow-up needed.\n\
- [ ] Call Ann back about the insurance claim 12 345 678\n\
PIN 4471 and code B12X\n\
mydoctorsaid the results\n\
Ship the quarterly report to the whole team\n\
T h e  s p e l l e d  w o r d s\n";

/// A visible file holding some of [`SAMPLE`]'s private text: the build
/// makes those keys public.
const SAMPLE_VISIBLE: &str = "* Notes\n\
Call Ann back about the insurance claim 12 345 678\n\
the biopsy results look clear, no follow-up needed.\n";

/// The full build of [`SAMPLE`] and [`SAMPLE_VISIBLE`] (private as
/// `@sample`): its sets and counts, and the sample file's own keys.
/// `None` should the samples not parse (never for these texts).
fn sample_build() -> Option<(Sets, super::BuildCounts, super::FileKeys)> {
    let privacy = PrivacyTags::new(["@sample"]);
    let private = MemexFile::parse(Path::new("/sample/sample.org"), "sample", SAMPLE.to_owned());
    let visible = MemexFile::parse(
        Path::new("/sample/visible.org"),
        "visible",
        SAMPLE_VISIBLE.to_owned(),
    );
    let (private, visible) = (private.ok()?, visible.ok()?);
    let keys = file_keys(&private, &privacy);
    let snapshot = MemexSnapshot::default().with_files(vec![Arc::new(private), Arc::new(visible)]);
    let mut build = Build::new((Vec::new(), Vec::new()), &snapshot, &privacy);
    let (sets, counts) = build.run();
    Some((sets.unwrap_or_default(), counts, keys))
}

/// The sets of [`sample_build`], hashed (computed once): a change in how
/// keys are made, which are kept, or which visible text makes public is
/// another digest.
fn scheme() -> &'static [u8] {
    static SCHEME: OnceLock<Digest> = OnceLock::new();
    SCHEME.get_or_init(|| {
        let mut hash = Sha256::new();
        let Some((sets, _, keys)) = sample_build() else {
            // A digest no file has, then.
            hash.update(b"the samples did not parse");
            return hash.finalize().into();
        };
        for (start, end) in keys.visible.iter() {
            hash.update(start.to_le_bytes());
            hash.update(end.to_le_bytes());
        }
        for set in [&sets.shingles, &sets.shorts, &sets.tri] {
            let mut keys: Vec<u64> = set.iter().collect();
            keys.sort_unstable();
            hash.update((keys.len() as u64).to_le_bytes());
            for key in keys {
                hash.update(key.to_le_bytes());
            }
        }
        let (_, joined) = sets.joined.parts();
        hash.update((joined.len() as u64).to_le_bytes());
        for key in joined {
            hash.update(key.to_le_bytes());
        }
        let (_, gapped) = sets.gapped.parts();
        hash.update((gapped.len() as u64).to_le_bytes());
        for key in gapped {
            hash.update(key.to_le_bytes());
        }
        hash.finalize().into()
    })
}

/// The length of the header: magic, format, digest.
const HEADER: usize = 8 + 4 + 32;

/// Whether the file at `path` holds sets built from `digest` (its header
/// says so; whether the rest is whole is known only once read).
pub(crate) fn is_of(path: &Path, digest: &Digest) -> bool {
    let mut header = [0u8; HEADER];
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file())
        && std::fs::File::open(path)
            .and_then(|mut file| file.read_exact(&mut header))
            .is_ok()
        && &header[..8] == MAGIC
        && header[8..12] == FORMAT.to_le_bytes()
        && header[12..44] == digest[..]
}

/// Reads the sets stored at `path` when they were built from `digest`:
/// `Ok(None)` when there is no file or it is of another snapshot.
///
/// The file is the header, then each set as its arrays, each array its
/// length and its keys (a [`KeySet`]: its filter, its table, whether the
/// key 0 is in and its count; a [`SortedKeys`]: its filter and its keys),
/// then a CRC-32 of all that comes before. Every array is read as it is:
/// no key is hashed or inserted again.
pub(crate) fn load(path: &Path, digest: &Digest) -> Result<Option<Sets>, StoreError> {
    // Only a regular file is opened: a FIFO put there would block the
    // open, and with it every turn.
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Err(StoreError::Foreign),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    if size < HEADER as u64 + 4 {
        return Err(StoreError::Foreign);
    }
    let mut reader = Checked::new(std::io::BufReader::with_capacity(1 << 20, file));
    reader.left = size - 4;
    let mut header = [0u8; HEADER];
    reader.read_exact(&mut header)?;
    if &header[..8] != MAGIC || header[8..12] != FORMAT.to_le_bytes() {
        return Err(StoreError::Foreign);
    }
    if header[12..44] != digest[..] {
        return Ok(None);
    }
    let sets = (|| {
        let shingles = reader.key_set()?;
        let shorts = reader.key_set()?;
        let joined = reader.sorted::<u64>()?;
        let gapped = reader.sorted::<u32>()?;
        let tri = reader.key_set()?;
        Ok::<_, StoreError>((shingles, shorts, joined, gapped, tri))
    })();
    let sets = match sets {
        Ok(sets) => sets,
        Err(StoreError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            return Err(StoreError::Damaged);
        }
        Err(e) => return Err(e),
    };
    let sum = reader.crc.clone().finalize();
    let mut stored = [0u8; 4];
    reader.inner.read_exact(&mut stored)?;
    if reader.left != 0 || u32::from_le_bytes(stored) != sum {
        return Err(StoreError::Damaged);
    }
    let (shingles, shorts, joined, gapped, tri) = sets;
    Ok(Some(Sets {
        shingles,
        shorts,
        joined: Arc::new(joined),
        gapped,
        tri,
    }))
}

/// Writes `sets`, built from `digest`, to `path` (through a file beside
/// it, renamed into place: a reader sees the old file or the new one).
/// Returns the bytes written.
pub(crate) fn save(path: &Path, digest: &Digest, sets: &Sets) -> std::io::Result<u64> {
    remove_orphans(path.parent().unwrap_or(Path::new(".")));
    foveal_memex::write_private(path, ".private.keys.", |file| {
        let mut out = Checked::new(file);
        out.write_all(MAGIC)?;
        out.write_all(&FORMAT.to_le_bytes())?;
        out.write_all(digest)?;
        out.put_key_set(&sets.shingles)?;
        out.put_key_set(&sets.shorts)?;
        out.put_sorted(&sets.joined)?;
        out.put_sorted(&sets.gapped)?;
        out.put_key_set(&sets.tri)?;
        let sum = out.crc.clone().finalize();
        out.inner.write_all(&sum.to_le_bytes())
    })
}

/// A staging file not written to for this long is a writer's that ended
/// before renaming it (killed mid-write); a live writer writes it
/// without pause.
const ORPHAN_AFTER: std::time::Duration = std::time::Duration::from_secs(600);

/// Removes the staging files of writers that ended before renaming
/// theirs: each is the size of the index.
fn remove_orphans(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let staging = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(".private.keys."));
        let idle = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|idle| idle >= ORPHAN_AFTER);
        if staging && idle {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A reader or writer that keeps a CRC-32 of what passes (and, reading,
/// the bytes left before the checksum: no array is longer).
struct Checked<T> {
    inner: T,
    crc: crc32fast::Hasher,
    left: u64,
}

impl<T> Checked<T> {
    fn new(inner: T) -> Self {
        Self {
            inner,
            crc: crc32fast::Hasher::new(),
            left: 0,
        }
    }
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc.update(&buf[..n]);
        self.left = self.left.saturating_sub(n as u64);
        Ok(n)
    }
}

impl<W: Write> Write for Checked<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A key as stored: little-endian, whatever the machine.
trait Stored: Kept + bytemuck::Pod {
    const WIDTH: usize;
    fn put(self, out: &mut [u8]);
    fn take(bytes: &[u8]) -> Self;
}

impl Stored for u64 {
    const WIDTH: usize = 8;
    fn put(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
    fn take(bytes: &[u8]) -> Self {
        Self::from_le_bytes(bytes.try_into().unwrap_or_default())
    }
}

impl Stored for u32 {
    const WIDTH: usize = 4;
    fn put(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
    fn take(bytes: &[u8]) -> Self {
        Self::from_le_bytes(bytes.try_into().unwrap_or_default())
    }
}

/// Keys are moved in blocks of this many bytes.
const BLOCK: usize = 1 << 16;

impl<W: Write> Checked<W> {
    fn put_key_set(&mut self, set: &KeySet) -> std::io::Result<()> {
        let (bloom, slots, zero, len) = set.parts();
        self.put(bloom)?;
        self.put(slots)?;
        self.write_all(&u64::from(zero).to_le_bytes())?;
        self.write_all(&(len as u64).to_le_bytes())
    }

    fn put_sorted<K: Stored>(&mut self, set: &SortedKeys<K>) -> std::io::Result<()> {
        let (bloom, keys) = set.parts();
        self.put(bloom)?;
        self.put(keys)
    }

    /// An array: its length, its keys.
    fn put<K: Stored>(&mut self, keys: &[K]) -> std::io::Result<()> {
        self.write_all(&(keys.len() as u64).to_le_bytes())?;
        let mut block = vec![0u8; BLOCK];
        for chunk in keys.chunks(BLOCK / K::WIDTH) {
            let bytes = &mut block[..chunk.len() * K::WIDTH];
            for (key, out) in chunk.iter().zip(bytes.chunks_exact_mut(K::WIDTH)) {
                key.put(out);
            }
            self.write_all(bytes)?;
        }
        Ok(())
    }
}

impl<R: Read> Checked<R> {
    fn word(&mut self) -> std::io::Result<u64> {
        let mut word = [0u8; 8];
        self.read_exact(&mut word)?;
        Ok(u64::from_le_bytes(word))
    }

    fn key_set(&mut self) -> Result<KeySet, StoreError> {
        let bloom = self.keys::<u64>()?;
        let slots = self.keys::<u64>()?;
        let zero = self.word()?;
        let len = usize::try_from(self.word()?).map_err(|_| StoreError::Damaged)?;
        if zero > 1 {
            return Err(StoreError::Damaged);
        }
        KeySet::from_parts(bloom.into(), slots.into(), zero == 1, len).ok_or(StoreError::Damaged)
    }

    fn sorted<K: Stored>(&mut self) -> Result<SortedKeys<K>, StoreError> {
        let bloom = self.keys::<u64>()?;
        let keys = self.keys::<K>()?;
        SortedKeys::from_parts(bloom.into(), keys.into()).ok_or(StoreError::Damaged)
    }

    /// An array: its length, its keys (a length past the file's end is
    /// damage, found before anything is allocated for it). The bytes are
    /// read straight into the array (a million headlines' index is 790
    /// MB: each copy on the way cost a tenth of a second).
    fn keys<K: Stored>(&mut self) -> Result<Vec<K>, StoreError> {
        let count = self.word()?;
        if count
            .checked_mul(K::WIDTH as u64)
            .is_none_or(|bytes| bytes > self.left)
        {
            return Err(StoreError::Damaged);
        }
        let count = usize::try_from(count).map_err(|_| StoreError::Damaged)?;
        let mut keys: Vec<K> = vec![K::zeroed(); count];
        for block in bytemuck::cast_slice_mut::<K, u8>(&mut keys).chunks_mut(READ_BLOCK) {
            self.read_exact(block)?;
        }
        if cfg!(target_endian = "big") {
            for key in &mut keys {
                *key = K::take(bytemuck::bytes_of(key));
            }
        }
        Ok(keys)
    }
}

/// Arrays are read in blocks of this many bytes: larger than the
/// reader's buffer, so that they go from the file to the array.
const READ_BLOCK: usize = 4 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    /// The digest's sample is worth its name only if its build has keys
    /// of every kind and some that visible text makes public.
    #[test]
    fn the_sample_build_has_keys_of_every_kind_and_public_ones() {
        let (sets, counts, _) = sample_build().unwrap();
        assert!(counts.public > 0, "{counts:?}");
        for (name, len) in [
            ("shingles", sets.shingles.len()),
            ("shorts", sets.shorts.len()),
            ("joined", sets.joined.len()),
            ("gapped", sets.gapped.len()),
            ("tri", sets.tri.len()),
        ] {
            assert!(len > 0, "{name}: {sets:?}");
        }
        assert_eq!(scheme().len(), 32);
    }
}
