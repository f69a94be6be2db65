//! The numbers of files' `:EMBEDDING:` values on disk, per file text: a
//! process that loads an unchanged file takes its vectors from here
//! instead of reading them from the text (at a million headlines with 64
//! numbers each, reading the numbers was three quarters of the parse).
//!
//! One file per text in a folder of the data dir (`index/vectors`, 0700;
//! each file 0600), named by the BLAKE3 hash of the text: the headline of
//! each value, whether it is a row of the table (or why not), and the
//! table as little-endian `f32`s, after a header (format, version of foveal, the
//! running program's [`build_identity`]) and before a CRC-32 of all of
//! it. What is read is used only when it is a regular file no longer than
//! the text's values could make, whole, of this format and this very
//! build, and of the same headlines as the text's values, every number
//! finite ([`Embeddings::fits`]); anything else is read from the text and
//! written again. A file is written through a file beside it, renamed
//! into place.
//!
//! A load ([`crate::Memex::open_with`]) removes the files (named as this
//! module names them) of texts it did not load that were last written
//! more than a day ago (another memex sharing the data dir writes its own
//! again), and staging files left by a writer that was killed.
//!
//! What the folder holds is said in `docs/security.md`: the same numbers
//! the Org files hold as text, private headlines' included.

use std::collections::HashSet;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::file::Embeddings;
#[cfg(doc)]
use crate::file::MemexFile;
use crate::parse::Span;

/// The first bytes of a file.
const MAGIC: &[u8; 8] = b"FOVVECS1";

/// The layout: raise it when it changes, or how values are read does.
const FORMAT: u32 = 1;

/// A file of a text no load used is removed after this long.
const UNUSED_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// A staging file not written to for this long is a killed writer's.
const ORPHAN_AFTER: Duration = Duration::from_secs(600);

/// The folder of stored vectors, as one load uses it.
#[derive(Debug)]
pub(crate) struct VectorStore {
    dir: PathBuf,
    /// The names of the files this load read or wrote.
    used: Mutex<HashSet<String>>,
}

/// A failure to write is said once per process, at the default level.
static SAID: AtomicBool = AtomicBool::new(false);

impl VectorStore {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            used: Mutex::new(HashSet::new()),
        }
    }

    /// The embeddings of values at `spans` of the text whose digest is
    /// `digest` ([`MemexFile::text_digest`]): the stored ones when they
    /// fit, else `read()`'s (stored for the next load).
    pub(crate) fn embeddings(
        &self,
        digest: &[u8; 32],
        spans: &[(u32, Span)],
        read: impl FnOnce() -> Embeddings,
    ) -> Embeddings {
        let name = name(digest);
        let path = self.dir.join(&name);
        self.used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name);
        match load(&path, longest(spans)) {
            Ok(stored) if stored.fits(spans) => return stored,
            Ok(_) => tracing::debug!(
                target: "foveal::memex",
                path = %path.display(),
                "stored vectors of other values"
            ),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => tracing::debug!(
                target: "foveal::memex",
                path = %path.display(),
                %error,
                "stored vectors not read"
            ),
        }
        let read = read();
        if let Err(error) = self.save(&path, &read)
            && !SAID.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                target: "foveal::index",
                folder = %self.dir.display(),
                %error,
                "could not store the memex's vectors; every load reads them from the Org text"
            );
        }
        read
    }

    /// Removes the files of texts this load did not use, last written
    /// more than [`UNUSED_FOR`] ago, and killed writers' staging files.
    pub(crate) fn sweep(&self) {
        let used = self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let after = if name.starts_with(STAGING) {
                ORPHAN_AFTER
            } else if is_name(name) && !used.contains(name) {
                UNUSED_FOR
            } else {
                continue;
            };
            let idle = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok());
            if idle.is_some_and(|idle| idle >= after) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    fn save(&self, path: &Path, embeddings: &Embeddings) -> std::io::Result<()> {
        write_private(path, STAGING, |out| {
            let mut crc = crc32fast::Hasher::new();
            let mut put = |bytes: &[u8]| {
                crc.update(bytes);
                out.write_all(bytes)
            };
            put(MAGIC)?;
            put(&FORMAT.to_le_bytes())?;
            let version = env!("CARGO_PKG_VERSION").as_bytes();
            put(&(version.len() as u32).to_le_bytes())?;
            put(version)?;
            put(build_identity())?;
            put(&embeddings.dim.to_le_bytes())?;
            put(&(embeddings.objects.len() as u64).to_le_bytes())?;
            put(&(embeddings.vectors.len() as u64).to_le_bytes())?;
            put(&words(&embeddings.objects))?;
            put(&words(&embeddings.outcomes))?;
            for chunk in embeddings.vectors.chunks(1 << 16) {
                let bytes: Vec<u8> = chunk.iter().flat_map(|x| x.to_le_bytes()).collect();
                put(&bytes)?;
            }
            out.write_all(&crc.finalize().to_le_bytes())
        })
        .map(drop)
    }
}

/// Writes the file at `path`, which only its owner may read, through a
/// file beside it (named `staging`, the process and a count) renamed
/// into place: a reader sees the old file or the new one, and two
/// writers never share a staging file. Its folder is made 0700 (and set
/// so, when it is a folder and not a link), the file 0600, never through
/// a link at the staging name. A staging file is removed when the write
/// fails; one a killed writer left is its reader's to sweep. Returns the
/// bytes written.
pub fn write_private(
    path: &Path,
    staging: &str,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> std::io::Result<u64> {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // The folder's mode, not that of one a link points to.
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let staging = dir.join(format!(
        "{staging}{}.{}",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        // A new file: never one a link at this name points to.
        let _ = std::fs::remove_file(&staging);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&staging)?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        write(&mut out)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        let len = file.metadata()?.len();
        drop(file);
        std::fs::rename(&staging, path)?;
        Ok(len)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&staging);
    }
    written
}

/// The first characters of a staging file's name.
const STAGING: &str = ".vectors.";

/// Whether `name` is one [`name`] makes: 64 hex digits, `.vec`.
fn is_name(name: &str) -> bool {
    name.strip_suffix(".vec")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The most bytes a stored file of values at `spans` can hold: a value of
/// `n` numbers takes at least `2n - 1` bytes of the text (a digit each, a
/// space between), so its row's `4n` bytes are at most twice its length
/// plus 2; each value has two words more, and the header is short.
fn longest(spans: &[(u32, Span)]) -> u64 {
    let text: u64 = spans.iter().map(|(_, s)| u64::from(s.end - s.start)).sum();
    1024 + 16 * spans.len() as u64 + 2 * text
}

/// The running program, as the file system knows it (computed once): its
/// device, inode, size and times of change — another build of foveal
/// (a fix in how values are read, or keys made, another toolchain's
/// Unicode tables) is another file, so it never reads what this one
/// stored. Its metadata, not a hash of its 30 MB: a start must not pay
/// for it. The change time (`ctime`) cannot be set back by anyone.
pub fn build_identity() -> &'static [u8; 32] {
    static IDENTITY: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();
    IDENTITY.get_or_init(|| {
        use std::os::unix::fs::MetadataExt as _;
        let mut hash = blake3::Hasher::new();
        match std::env::current_exe().and_then(std::fs::metadata) {
            Ok(meta) => {
                for field in [
                    meta.dev(),
                    meta.ino(),
                    meta.size(),
                    meta.mtime() as u64,
                    meta.mtime_nsec() as u64,
                    meta.ctime() as u64,
                    meta.ctime_nsec() as u64,
                ] {
                    hash.update(&field.to_le_bytes());
                }
            }
            // No program to know: a digest of this process alone.
            Err(_) => {
                hash.update(&std::process::id().to_le_bytes());
            }
        }
        hash.finalize().into()
    })
}

/// The file name of the text whose digest is `digest`.
fn name(digest: &[u8; 32]) -> String {
    let mut name = String::with_capacity(68);
    for byte in digest {
        name.push_str(&format!("{byte:02x}"));
    }
    name.push_str(".vec");
    name
}

fn words(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bad(message: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message)
}

/// Reads a stored file of at most `longest` bytes: its embeddings, or
/// why not (not a regular file, too long, cut short, damaged, of another
/// format or build). Never through a link, never waiting on a FIFO.
fn load(path: &Path, longest: u64) -> std::io::Result<Embeddings> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(bad("not a regular file"));
    }
    if meta.len() > longest {
        return Err(bad("longer than the text's values could make"));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(longest.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > longest {
        return Err(bad("longer than the text's values could make"));
    }
    let (body, sum) = bytes
        .split_last_chunk::<4>()
        .ok_or_else(|| bad("cut short"))?;
    if crc32fast::hash(body) != u32::from_le_bytes(*sum) {
        return Err(bad("damaged"));
    }
    let mut at = Cursor(body);
    if at.take(8)? != MAGIC {
        return Err(bad("not foveal's"));
    }
    let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap_or_default());
    let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
    if u32_of(at.take(4)?) != FORMAT {
        return Err(bad("of another format"));
    }
    let version_len = u32_of(at.take(4)?) as usize;
    if at.take(version_len)? != env!("CARGO_PKG_VERSION").as_bytes()
        || at.take(32)? != build_identity()
    {
        return Err(bad("of another build"));
    }
    let dim = u32_of(at.take(4)?);
    let count = usize::try_from(u64_of(at.take(8)?)).map_err(|_| bad("too long"))?;
    let numbers = usize::try_from(u64_of(at.take(8)?)).map_err(|_| bad("too long"))?;
    let sizes = (count.checked_mul(8), numbers.checked_mul(4));
    let (Some(listed), Some(table)) = sizes else {
        return Err(bad("too long"));
    };
    if listed.checked_add(table) != Some(at.0.len()) {
        return Err(bad("of the wrong length"));
    }
    let u32s = |b: &[u8]| -> Vec<u32> { b.chunks_exact(4).map(u32_of).collect() };
    let objects = u32s(at.take(count * 4)?);
    let outcomes = u32s(at.take(count * 4)?);
    let vectors = at
        .take(table)?
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap_or_default()))
        .collect();
    Ok(Embeddings {
        dim,
        objects,
        outcomes,
        vectors,
    })
}

/// What is left of a file being read.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    /// The next `n` bytes.
    fn take(&mut self, n: usize) -> std::io::Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(bad("cut short"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Memex, MemexOptions};

    const TEXT: &str = "* a\n:PROPERTIES:\n:EMBEDDING: 0.5 -1.25 3\n:END:\n\
* b\n:PROPERTIES:\n:EMBEDDING: 1 x 3\n:END:\n\
* c\n:PROPERTIES:\n:embedding: 4 5\n:END:\n\
* d\n:PROPERTIES:\n:EMBEDDING: 0.1 0.2 0.3\n:END:\n";

    /// A memex of `TEXT` in `a.org` and one other file, the store in
    /// `store`.
    fn open(memex: &Path, store: &Path) -> Memex {
        let options = MemexOptions {
            vector_store: Some(store.to_path_buf()),
            ..MemexOptions::default()
        };
        Memex::open_with(&[memex.to_path_buf()], options).unwrap()
    }

    /// Each object's id and vector (as bits), and each file's warnings.
    type Loaded = (Vec<(String, Vec<u32>)>, Vec<(u32, String)>);

    fn vectors(memex: &Memex) -> Loaded {
        let snapshot = memex.snapshot();
        let mut all: Vec<_> = snapshot
            .files()
            .flat_map(|f| {
                (0..f.objects.len() as u32).map(|i| {
                    let bits = f.vector(i).unwrap_or_default().iter().map(|x| x.to_bits());
                    (f.id(i).to_owned(), bits.collect())
                })
            })
            .collect();
        all.sort();
        let warnings = snapshot
            .files()
            .flat_map(|f| f.warnings.iter().map(|w| (w.line, w.message.clone())))
            .collect();
        (all, warnings)
    }

    fn entry(store: &Path, text: &str) -> PathBuf {
        store.join(name(&crate::file::text_digest(text)))
    }

    #[test]
    fn a_second_load_takes_the_vectors_a_first_stored_and_they_are_those_of_the_text() {
        let dir = tempfile::tempdir().unwrap();
        let (memex, store) = (dir.path().join("memex"), dir.path().join("index/vectors"));
        std::fs::create_dir(&memex).unwrap();
        std::fs::write(memex.join("a.org"), TEXT).unwrap();
        std::fs::write(memex.join("plain.org"), "* no vectors\n").unwrap();
        let read = vectors(&Memex::open(std::slice::from_ref(&memex)).unwrap());
        assert_eq!(read.0.iter().filter(|(_, v)| !v.is_empty()).count(), 2);
        assert_eq!(read.1.len(), 2, "{:?}", read.1);

        let first = vectors(&open(&memex, &store));
        assert_eq!(first, read);
        // One file, for the file with values; the folder and it private.
        use std::os::unix::fs::PermissionsExt as _;
        let names: Vec<_> = std::fs::read_dir(&store).unwrap().flatten().collect();
        assert_eq!(names.len(), 1);
        assert_eq!(names[0].path(), entry(&store, TEXT));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&store), 0o700);
        assert_eq!(mode(&names[0].path()), 0o600);
        assert_eq!(vectors(&open(&memex, &store)), read);

        // What is stored is what a load takes: numbers changed in the
        // store (its checksum made right) are those loaded.
        let mut stored = load(&entry(&store, TEXT), u64::MAX).unwrap();
        stored.vectors[0] = 42.0;
        VectorStore::new(store.clone())
            .save(&entry(&store, TEXT), &stored)
            .unwrap();
        let taken = vectors(&open(&memex, &store));
        assert_ne!(taken, read);
        assert!(
            taken
                .0
                .iter()
                .any(|(_, v)| v.first() == Some(&42f32.to_bits()))
        );
        // Not finite: not taken.
        stored.vectors[0] = f32::NAN;
        VectorStore::new(store.clone())
            .save(&entry(&store, TEXT), &stored)
            .unwrap();
        assert_eq!(vectors(&open(&memex, &store)), read);
    }

    #[test]
    fn a_damaged_foreign_or_misfit_store_is_read_over_from_the_text() {
        let dir = tempfile::tempdir().unwrap();
        let (memex, store) = (dir.path().join("memex"), dir.path().join("vectors"));
        std::fs::create_dir(&memex).unwrap();
        std::fs::write(memex.join("a.org"), TEXT).unwrap();
        let read = vectors(&Memex::open(std::slice::from_ref(&memex)).unwrap());
        open(&memex, &store);
        let path = entry(&store, TEXT);
        let good = std::fs::read(&path).unwrap();

        let mut damaged = good.clone();
        let last = damaged.len() - 9;
        damaged[last] ^= 1;
        let other = "* x\n:PROPERTIES:\n:EMBEDDING: 9 9 9\n:END:\n";
        std::fs::write(memex.join("a.org"), other).unwrap();
        open(&memex, &store);
        let misfit = std::fs::read(entry(&store, other)).unwrap();
        std::fs::write(memex.join("a.org"), TEXT).unwrap();
        let short = good[..good.len() / 2].to_vec();
        let long = [good.as_slice(), &vec![0; 4096]].concat();
        for bad in [damaged, misfit, short, long, b"not a store".to_vec()] {
            std::fs::write(&path, &bad).unwrap();
            assert_eq!(vectors(&open(&memex, &store)), read);
            // Written again, whole.
            assert_eq!(std::fs::read(&path).unwrap(), good);
        }
        // Neither through a link nor from a FIFO (which would block).
        std::fs::remove_file(&path).unwrap();
        std::fs::write(store.join("elsewhere"), &good).unwrap();
        std::os::unix::fs::symlink(store.join("elsewhere"), &path).unwrap();
        assert!(load(&path, u64::MAX).is_err());
        std::fs::remove_file(&path).unwrap();
        let fifo = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path and a mode.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(load(&path, u64::MAX).is_err());
        // A load with the FIFO there goes on, and replaces it.
        assert_eq!(vectors(&open(&memex, &store)), read);
        assert_eq!(std::fs::read(&path).unwrap(), good);
    }

    #[test]
    fn stored_embeddings_fit_only_values_at_the_same_headlines_with_whole_rows() {
        let text = "* a\n:PROPERTIES:\n:EMBEDDING: 1 2\n:END:\n\
                    * b\n:PROPERTIES:\n:EMBEDDING: x\n:END:\n";
        let path = Path::new("/m/a.org");
        let file = crate::file::MemexFile::parse(path, "a.org", text.into()).unwrap();
        let spans: Vec<(u32, Span)> = (0..2u32)
            .map(|i| {
                (
                    i,
                    file.objects[i as usize].headline.properties[0]
                        .value
                        .clone(),
                )
            })
            .collect();
        let good = Embeddings {
            dim: 2,
            objects: vec![0, 1],
            outcomes: vec![Embeddings::ROW, Embeddings::NOT_NUMBERS],
            vectors: vec![1.0, 2.0],
        };
        assert!(good.fits(&spans));
        let misfits = [
            Embeddings {
                objects: vec![0, 2],
                ..good.clone()
            },
            Embeddings {
                objects: vec![0],
                outcomes: vec![Embeddings::ROW],
                ..good.clone()
            },
            Embeddings {
                dim: 1,
                ..good.clone()
            },
            Embeddings {
                dim: 0,
                ..good.clone()
            },
            Embeddings {
                vectors: vec![1.0],
                ..good.clone()
            },
            Embeddings {
                outcomes: vec![Embeddings::ROW, 2],
                ..good.clone()
            },
            Embeddings {
                vectors: vec![1.0, f32::INFINITY],
                ..good.clone()
            },
        ];
        for misfit in misfits {
            assert!(!misfit.fits(&spans), "{misfit:?}");
        }
        // What the text's values can make fits in the bound.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vectors/stored.vec");
        VectorStore::new(dir.path().join("vectors"))
            .save(&path, &good)
            .unwrap();
        let bytes = std::fs::metadata(&path).unwrap().len();
        assert!(bytes <= longest(&spans), "{bytes}");
    }

    #[test]
    fn a_load_removes_old_files_of_texts_it_did_not_load_and_killed_writers_files() {
        let dir = tempfile::tempdir().unwrap();
        let (memex, store) = (dir.path().join("memex"), dir.path().join("vectors"));
        std::fs::create_dir(&memex).unwrap();
        std::fs::write(memex.join("a.org"), TEXT).unwrap();
        open(&memex, &store);
        let used = entry(&store, TEXT);
        let (old, new) = (store.join(name(&[1; 32])), store.join(name(&[2; 32])));
        let (staging, fresh_staging) = (store.join(".vectors.1.0"), store.join(".vectors.2.0"));
        let (other, dotted) = (store.join("notes.txt"), store.join(".notes"));
        let day_ago = std::time::SystemTime::now() - UNUSED_FOR - Duration::from_secs(60);
        for path in [&old, &new, &staging, &fresh_staging, &other, &dotted] {
            std::fs::write(path, b"x").unwrap();
        }
        for path in [&used, &old, &staging, &other, &dotted] {
            let file = std::fs::File::options().write(true).open(path).unwrap();
            file.set_modified(day_ago).unwrap();
        }
        open(&memex, &store);
        assert!(used.exists() && new.exists() && fresh_staging.exists());
        // What the store did not name stays.
        assert!(other.exists() && dotted.exists());
        assert!(!old.exists() && !staging.exists());
    }
}
