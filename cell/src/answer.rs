//! The answer area: a shared memory file through which the long strings
//! of a cell's answers cross, instead of through the socket.
//!
//! A skill like awareness answers ~1 MB a call. Through the socket that
//! is a copy into the frame, a copy into the kernel, a dozen wake-ups of
//! both sides while the socket's buffer (~200 kB) fills and drains, a
//! copy out and one more into the string the host keeps. Through the area
//! it is one copy in the cell (from the skill's string into the area) and
//! one in the host (from the area into the host's string); the frame on
//! the socket says where each string is ([`crate::wire::Writer::with_area`]).
//!
//! The host makes the area (a memory file of [`AREA`] bytes, sealed so
//! that it can neither shrink nor grow) and passes its descriptor with the
//! setup frame. The cell maps it writable; the host maps it read-only.
//! Since the size is sealed, no truncation by the cell can make the host's
//! reads fault (`SIGBUS`). The cell may still change the bytes while the
//! host copies them: the host copies each string out first and checks only its
//! own copy (bounds, UTF-8), as for any frame from a cell.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// The area's size. What does not fit in it goes through the socket, as
/// do strings shorter than [`IN_AREA_FROM`]. Only the pages a cell writes
/// take memory.
pub const AREA: usize = 32 << 20;

/// Strings from this length on go through the area: below it the
/// socket's copy costs less than the area's bookkeeping.
pub const IN_AREA_FROM: usize = 16 << 10;

/// One side's mapping of the answer area.
#[derive(Debug)]
pub struct AnswerArea {
    map: *mut u8,
    len: usize,
}

// SAFETY: the mapping is process-wide memory; the host reads it only
// through `copy_out` under its cell's lock, the cell writes it from its
// single serving thread.
unsafe impl Send for AnswerArea {}
// SAFETY: as above.
unsafe impl Sync for AnswerArea {}

impl AnswerArea {
    /// The host's side: a new sealed area mapped read-only, and the
    /// descriptor to pass to the cell.
    pub fn create() -> io::Result<(Self, OwnedFd)> {
        let fd = crate::view::memfd("foveal-answers")?;
        // SAFETY: ftruncate and fcntl on a descriptor we own.
        unsafe {
            if libc::ftruncate(fd.as_raw_fd(), AREA as libc::off_t) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::fcntl(
                fd.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        let area = Self::map(&fd, libc::PROT_READ)?;
        Ok((area, fd))
    }

    /// The cell's side: the area passed by the host, mapped writable. The
    /// descriptor can be closed afterwards.
    pub fn open(fd: &OwnedFd) -> io::Result<Self> {
        // SAFETY: fstat into a zeroed struct, on a descriptor we own.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if st.st_size as usize != AREA {
            return Err(io::Error::other("the answer area has the wrong size"));
        }
        Self::map(fd, libc::PROT_READ | libc::PROT_WRITE)
    }

    fn map(fd: &OwnedFd, prot: libc::c_int) -> io::Result<Self> {
        // SAFETY: a fresh shared mapping of the whole file, whose size is
        // AREA (set, or checked, by the callers).
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                AREA,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            map: map.cast(),
            len: AREA,
        })
    }

    /// The cell's side: puts `bytes` at offset `at`; false when they do
    /// not fit.
    pub fn put_at(&self, at: usize, bytes: &[u8]) -> bool {
        if at.checked_add(bytes.len()).is_none_or(|end| end > self.len) {
            return false;
        }
        // SAFETY: the mapping is writable on the cell's side (`open`) and
        // `len` bytes long, and `at + bytes.len()` is within it; nothing
        // in the cell holds a reference into it.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.map.add(at), bytes.len()) };
        true
    }

    /// The host's side: a private copy of `len` bytes at offset `at`;
    /// none when they are beyond the area.
    pub fn copy_out(&self, at: usize, len: usize) -> Option<Vec<u8>> {
        if at.checked_add(len).is_none_or(|end| end > self.len) {
            return None;
        }
        let mut out = Vec::with_capacity(len);
        // SAFETY: the mapping is `self.len` readable bytes for the life
        // of self, and its size is sealed: no read of it can fault. The
        // cell may write the bytes meanwhile; they are plain bytes, every
        // one of which is checked after the copy.
        unsafe {
            std::ptr::copy_nonoverlapping(self.map.add(at), out.as_mut_ptr(), len);
            out.set_len(len);
        }
        Some(out)
    }
}

impl Drop for AnswerArea {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`.
        unsafe { libc::munmap(self.map.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_cell_puts_the_host_copies_and_the_size_cannot_change() {
        let (host, fd) = AnswerArea::create().unwrap();
        let cell = AnswerArea::open(&fd).unwrap();
        let answer: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        assert!(cell.put_at(10, &answer));
        assert_eq!(host.copy_out(10, answer.len()).unwrap(), answer);
        assert!(host.copy_out(0, AREA + 1).is_none());
        assert!(host.copy_out(AREA, 1).is_none());
        assert!(host.copy_out(usize::MAX, 2).is_none());
        assert!(!cell.put_at(0, &vec![0; AREA + 1]));
        assert!(!cell.put_at(AREA - 1, &[0, 0]));
        // A cell cannot shrink the area under the host's reads.
        // SAFETY: ftruncate on a descriptor we own.
        let rc = unsafe { libc::ftruncate(fd.as_raw_fd(), 4096) };
        assert_ne!(rc, 0, "the area's size is sealed");
        assert_eq!(host.copy_out(10, answer.len()).unwrap(), answer);
    }
}
