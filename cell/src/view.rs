//! One lent file version as a sealed memory file, and the same file
//! mapped back in the cell.
//!
//! The host writes, once per version of a file, its path, its visible
//! text and its [`FileIndex`] into an in-memory file (`memfd_create`),
//! seals it (no write, grow or shrink: nobody can change it after), and
//! passes its descriptor to each cell the first time a call lends it. The
//! cell maps it read-only: the text is borrowed from the mapping as it
//! is, the index arrays are copied out once into the vectors the ABI
//! wants. A call then costs the cell nothing per file but a lookup.
//!
//! Layout: a header of [`SECTIONS`] `(offset, length)` pairs and two
//! scalars, then the sections, each 8-byte aligned.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use abi_stable::std_types::{RStr, RString, RVec};
use foveal_sdk::memex::{FileIndex, FileView, IdEntry, ObjectRecord, Range32, TagEntry};

const MAGIC: u64 = 0x666f_7665_616c_7631; // "fovealv1"
const SECTIONS: usize = 15;
const HEADER: usize = 8 + SECTIONS * 16 + 8 + 8;

/// A file version, sealed in memory, ready to be lent to cells.
#[derive(Debug)]
pub struct SealedFile {
    fd: OwnedFd,
    len: usize,
    /// A number no other sealed file of this process has: how a cell
    /// knows it has this one already.
    pub key: u64,
}

impl SealedFile {
    /// Seals `path`, `text` and `index` into a new memory file.
    pub fn seal(path: &str, text: &str, index: &FileIndex) -> io::Result<Self> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let bytes = encode(path, text, index);
        let fd = memfd("foveal-view")?;
        write_all(&fd, &bytes)?;
        // SAFETY: fcntl on a descriptor we own.
        let rc = unsafe {
            libc::fcntl(
                fd.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            fd,
            len: bytes.len(),
            key: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// The descriptor to pass.
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (never: the header is always there).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

pub(crate) fn memfd(name: &str) -> io::Result<OwnedFd> {
    let name = std::ffi::CString::new(name).unwrap_or_default();
    // SAFETY: a valid C string; the flags are documented ones.
    let fd = unsafe {
        libc::memfd_create(
            name.as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING | libc::MFD_NOEXEC_SEAL,
        )
    };
    let fd = if fd < 0 {
        // Kernels before 6.3 do not know MFD_NOEXEC_SEAL.
        // SAFETY: as above.
        unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) }
    } else {
        fd
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just created, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn write_all(fd: &OwnedFd, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: writes from a live slice.
        let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

/// The raw bytes of a slice of plain values.
fn raw<T: Copy>(items: &[T]) -> &[u8] {
    // SAFETY: `T` is a plain `Copy` value type of the ABI (integers,
    // floats, `#[repr(C)]` records of them); reading its bytes, padding
    // included, is what a memcpy does.
    unsafe { std::slice::from_raw_parts(items.as_ptr().cast(), std::mem::size_of_val(items)) }
}

fn encode(path: &str, text: &str, index: &FileIndex) -> Vec<u8> {
    let mut tags = Vec::new();
    for entry in index.tag_index.iter() {
        tags.extend_from_slice(&(entry.tag.len() as u32).to_le_bytes());
        tags.extend_from_slice(entry.tag.as_bytes());
        tags.extend_from_slice(&(entry.objects.len() as u32).to_le_bytes());
        tags.extend_from_slice(raw(&entry.objects));
    }
    let sections: [&[u8]; SECTIONS] = [
        path.as_bytes(),
        text.as_bytes(),
        raw(&index.objects),
        raw(&index.children),
        raw(&index.tags),
        index.derived_ids.as_bytes(),
        raw(&index.vectors),
        raw(&index.norms),
        raw(&index.quantized),
        raw(&index.quant_factors),
        raw(&index.parents),
        raw(&index.levels),
        raw(&index.vector_objects),
        &tags,
        raw(&index.id_index),
    ];
    let mut out = vec![0u8; HEADER];
    out[..8].copy_from_slice(&MAGIC.to_le_bytes());
    for (i, section) in sections.iter().enumerate() {
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
        let at = 8 + i * 16;
        let start = out.len() as u64;
        out[at..at + 8].copy_from_slice(&start.to_le_bytes());
        out[at + 8..at + 16].copy_from_slice(&(section.len() as u64).to_le_bytes());
        out.extend_from_slice(section);
    }
    let at = 8 + SECTIONS * 16;
    out[at..at + 8].copy_from_slice(&u64::from(index.dim).to_le_bytes());
    out[at + 8..at + 16].copy_from_slice(&index.vectors_hash.to_le_bytes());
    out
}

/// A sealed file mapped in the cell: the text borrowed from the mapping,
/// the index copied out.
#[derive(Debug)]
pub struct MappedFile {
    map: *const u8,
    len: usize,
    path: (usize, usize),
    text: (usize, usize),
    /// The index, as the ABI wants it.
    pub index: FileIndex,
}

// SAFETY: the mapping is read-only and lives as long as the value; the
// pointers are only read.
unsafe impl Send for MappedFile {}
// SAFETY: as above: shared reads of immutable memory.
unsafe impl Sync for MappedFile {}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: `map`/`len` are the mapping made in `map`, unmapped once.
        unsafe {
            libc::munmap(self.map as *mut libc::c_void, self.len);
        }
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("view file: {what}"))
}

impl MappedFile {
    /// Maps the sealed file `fd` read-only and copies its index out.
    pub fn map(fd: &OwnedFd) -> io::Result<Self> {
        // SAFETY: fstat into a zeroed struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let len = st.st_size as usize;
        if len < HEADER {
            return Err(bad("shorter than its header"));
        }
        // SAFETY: a fresh read-only shared mapping of the whole file.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut mapped = Self {
            map: map as *const u8,
            len,
            path: (0, 0),
            text: (0, 0),
            index: FileIndex::default(),
        };
        mapped.read_index()?;
        Ok(mapped)
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes for the life of self.
        unsafe { std::slice::from_raw_parts(self.map, self.len) }
    }

    fn u64_at(&self, at: usize) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&self.bytes()[at..at + 8]);
        u64::from_le_bytes(a)
    }

    fn section(&self, i: usize) -> io::Result<(usize, usize)> {
        let start = self.u64_at(8 + i * 16) as usize;
        let len = self.u64_at(8 + i * 16 + 8) as usize;
        if start.checked_add(len).is_none_or(|end| end > self.len) || !start.is_multiple_of(8) {
            return Err(bad("a section out of bounds"));
        }
        Ok((start, len))
    }

    fn array<T: Copy>(&self, i: usize) -> io::Result<RVec<T>> {
        let (start, len) = self.section(i)?;
        let size = std::mem::size_of::<T>();
        if !len.is_multiple_of(size) {
            return Err(bad("a section is not whole records"));
        }
        let mut out = Vec::<T>::with_capacity(len / size);
        // SAFETY: the section is in bounds (checked) and holds `len / size`
        // values of `T` written by the host from values of the same type on
        // the same machine; copied byte for byte into spare capacity.
        unsafe {
            std::ptr::copy_nonoverlapping(self.map.add(start), out.as_mut_ptr().cast::<u8>(), len);
            out.set_len(len / size);
        }
        Ok(RVec::from(out))
    }

    fn read_index(&mut self) -> io::Result<()> {
        if self.u64_at(0) != MAGIC {
            return Err(bad("wrong magic number"));
        }
        self.path = self.section(0)?;
        self.text = self.section(1)?;
        let bytes = self.bytes();
        for (start, len) in [self.path, self.text] {
            std::str::from_utf8(&bytes[start..start + len])
                .map_err(|_| bad("text is not UTF-8"))?;
        }
        let (ds, dl) = self.section(5)?;
        let derived = std::str::from_utf8(&bytes[ds..ds + dl])
            .map_err(|_| bad("derived ids are not UTF-8"))?
            .to_owned();
        let (ts, tl) = self.section(13)?;
        let tags = decode_tags(&bytes[ts..ts + tl])?;
        let at = 8 + SECTIONS * 16;
        let dim = self.u64_at(at) as u32;
        let vectors_hash = self.u64_at(at + 8);
        self.index = FileIndex {
            objects: self.array::<ObjectRecord>(2)?,
            children: self.array::<u32>(3)?,
            tags: self.array::<Range32>(4)?,
            derived_ids: RString::from(derived),
            dim,
            vectors: self.array::<f32>(6)?,
            norms: self.array::<f32>(7)?,
            quantized: self.array::<i8>(8)?,
            quant_factors: self.array::<f32>(9)?,
            parents: self.array::<u32>(10)?,
            levels: self.array::<u16>(11)?,
            vector_objects: self.array::<u32>(12)?,
            vectors_hash,
            tag_index: tags,
            id_index: self.array::<IdEntry>(14)?,
        };
        Ok(())
    }

    /// The file as the ABI lends it, borrowing this mapping.
    pub fn view(&self) -> FileView<'_> {
        let bytes = self.bytes();
        let s = |(start, len): (usize, usize)| {
            // SAFETY: checked to be UTF-8 when mapped; the mapping is immutable.
            unsafe { std::str::from_utf8_unchecked(&bytes[start..start + len]) }
        };
        FileView {
            path: RStr::from_str(s(self.path)),
            text: RStr::from_str(s(self.text)),
            index: &self.index,
        }
    }
}

fn decode_tags(mut b: &[u8]) -> io::Result<RVec<TagEntry>> {
    let mut out = RVec::new();
    let u32_of = |b: &mut &[u8]| -> io::Result<u32> {
        let (head, rest) = b
            .split_at_checked(4)
            .ok_or_else(|| bad("tag index ends early"))?;
        *b = rest;
        Ok(u32::from_le_bytes([head[0], head[1], head[2], head[3]]))
    };
    while !b.is_empty() {
        let n = u32_of(&mut b)? as usize;
        let (tag, rest) = b
            .split_at_checked(n)
            .ok_or_else(|| bad("tag index ends early"))?;
        b = rest;
        let tag = std::str::from_utf8(tag).map_err(|_| bad("a tag is not UTF-8"))?;
        let count = u32_of(&mut b)? as usize;
        let mut objects = RVec::with_capacity(count.min(b.len() / 4));
        for _ in 0..count {
            objects.push(u32_of(&mut b)?);
        }
        out.push(TagEntry {
            tag: RString::from(tag),
            objects,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use foveal_memex::{Memex, privacy::PrivacyTags, view::SnapshotView};

    #[test]
    fn a_sealed_file_maps_back_to_the_same_view_and_cannot_be_changed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.org"),
            "* Work :project:x:\n:PROPERTIES:\n:ID: w\n:EMBEDDING: 1 0\n:END:\nbody\n** TODO Sub :y:\n* Diary :@personal:\nsecret\n* Home\n",
        )
        .unwrap();
        let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
        let view = SnapshotView::new(&memex.snapshot(), &PrivacyTags::new(["@personal"]));
        let owned = view.view();
        let original = &owned.files[0];
        let sealed = SealedFile::seal(
            original.path.as_str(),
            original.text.as_str(),
            original.index,
        )
        .unwrap();
        // Sealed: no write reaches it.
        // SAFETY: a write of one byte from a live buffer.
        let n = unsafe { libc::write(sealed.raw_fd(), b"x".as_ptr().cast(), 1) };
        assert_eq!(n, -1);
        let fd = sealed.fd.try_clone().unwrap();
        let mapped = MappedFile::map(&fd).unwrap();
        let back = mapped.view();
        assert_eq!(back.path.as_str(), original.path.as_str());
        assert_eq!(back.text.as_str(), original.text.as_str());
        assert_eq!(back.len(), original.len());
        for i in 0..back.len() as u32 {
            assert_eq!(back.object(i), original.object(i));
            assert_eq!(back.id(i), original.id(i));
            assert_eq!(back.title(i), original.title(i));
            assert_eq!(
                back.tags(i).collect::<Vec<_>>(),
                original.tags(i).collect::<Vec<_>>()
            );
            assert_eq!(back.vector(i), original.vector(i));
        }
        assert_eq!(back.with_tag("project"), original.with_tag("project"));
        assert_eq!(back.find("w"), Some(0));
        assert_eq!(mapped.index.vectors_hash, original.index.vectors_hash);
        assert!(!back.text.as_str().contains("secret"));
    }
}
