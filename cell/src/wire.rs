//! The channel between the host and a cell: frames over a Unix stream
//! socket, descriptors passed beside them (`SCM_RIGHTS`).
//!
//! A frame is a little-endian `u32` length and that many bytes; its first
//! byte is its kind ([`Kind`]). A frame that carries descriptors is sent in
//! one `sendmsg` with them, so they arrive with its first byte and are
//! queued in order: a reader takes them from the queue as the frame's
//! content says how many it carries. Fields are encoded by [`Writer`] and
//! read back by [`Reader`], which never panics on short or bad input (a
//! cell is not trusted: what it sends is checked like any other input).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

use crate::answer::{self, AnswerArea};

/// The largest frame either side accepts (the literate source of a skill
/// and a whole prompt's sections fit many times over).
pub const MAX_FRAME: usize = 256 << 20;
/// The most descriptors one `sendmsg` carries.
pub const MAX_FDS: usize = 64;

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Host → cell: how to confine itself and which library to load.
    Setup = 1,
    /// Cell → host: the library is loaded; its manifest.
    Hello = 2,
    /// Cell → host: the library could not be loaded.
    LoadFailed = 3,
    /// Host → cell: run a hook.
    Call = 4,
    /// Cell → host: a hook's answer.
    Reply = 5,
    /// Cell → host: a log line of the skill.
    Log = 6,
    /// Cell → host: a request to the host API (token count, memex write).
    HostCall = 7,
    /// Host → cell: the answer to a [`Kind::HostCall`].
    HostReply = 8,
    /// Host → cell: sealed view files (keys, descriptors beside), sent
    /// before the call that lends them, at most [`FILES_PER_FRAME`] a
    /// frame so that the cell never holds more descriptors at once.
    Files = 9,
}

/// The most view files one [`Kind::Files`] frame carries.
pub const FILES_PER_FRAME: usize = 32;

impl Kind {
    fn of(byte: u8) -> Option<Self> {
        Some(match byte {
            1 => Self::Setup,
            2 => Self::Hello,
            3 => Self::LoadFailed,
            4 => Self::Call,
            5 => Self::Reply,
            6 => Self::Log,
            7 => Self::HostCall,
            8 => Self::HostReply,
            9 => Self::Files,
            _ => return None,
        })
    }
}

/// Why the channel failed.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The other side closed the channel (a cell that died, a host gone).
    #[error("the channel was closed")]
    Closed,
    /// No frame within the deadline.
    #[error("no answer in time")]
    Timeout,
    /// A frame that does not decode.
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
    /// The socket failed.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Encodes a frame's fields.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
    /// Where long strings go instead of the frame (a cell's answers), and
    /// how much of it this frame has used.
    area: Option<(&'static AnswerArea, usize)>,
}

/// The high bit of a string's length: the string is in the answer area,
/// at the offset (u64) that follows.
const IN_AREA: u32 = 1 << 31;

impl Writer {
    /// A frame of `kind`.
    pub fn new(kind: Kind) -> Self {
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(&[0, 0, 0, 0, kind as u8]);
        Self { buf, area: None }
    }

    /// A frame of `kind` whose strings of [`answer::IN_AREA_FROM`] bytes
    /// or more are put in `area` (as long as they fit) instead of the
    /// frame: a cell's answer, read with [`Reader::with_area`].
    pub fn with_area(kind: Kind, area: &'static AnswerArea) -> Self {
        Self {
            area: Some((area, 0)),
            ..Self::new(kind)
        }
    }

    /// Room for `n` more bytes, so that a large value is copied once.
    pub fn reserve(&mut self, n: usize) -> &mut Self {
        self.buf.reserve(n);
        self
    }

    /// One byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    /// A boolean.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }

    /// A `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// An `i32`.
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A `u64`.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Bytes, with their length.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u32(u32::try_from(v.len()).unwrap_or(u32::MAX));
        self.buf.extend_from_slice(v);
        self
    }

    /// A string.
    pub fn str(&mut self, v: &str) -> &mut Self {
        if v.len() >= answer::IN_AREA_FROM
            && let Some((area, used)) = &mut self.area
            && area.put_at(*used, v.as_bytes())
        {
            let at = *used as u64;
            *used += v.len();
            return self.u32(v.len() as u32 | IN_AREA).u64(at);
        }
        self.bytes(v.as_bytes())
    }

    /// An optional `u32`.
    pub fn opt_u32(&mut self, v: Option<u32>) -> &mut Self {
        match v {
            Some(v) => self.u8(1).u32(v),
            None => self.u8(0),
        }
    }

    /// An optional string.
    pub fn opt_str(&mut self, v: Option<&str>) -> &mut Self {
        match v {
            Some(v) => self.u8(1).str(v),
            None => self.u8(0),
        }
    }

    /// The frame, its length filled in.
    pub fn finish(mut self) -> Vec<u8> {
        let len = u32::try_from(self.buf.len() - 4).unwrap_or(u32::MAX);
        self.buf[..4].copy_from_slice(&len.to_le_bytes());
        self.buf
    }
}

/// Decodes a frame's fields; every read checks the bounds.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
    area: Option<&'a AnswerArea>,
}

type Decoded<T> = Result<T, WireError>;

const SHORT: WireError = WireError::Malformed("frame ends early");
const FAR: WireError = WireError::Malformed("a string beyond the answer area");

impl<'a> Reader<'a> {
    /// Reads `buf` (a frame without its length, after its kind byte).
    pub fn new(buf: &'a [u8]) -> Self {
        Self {
            buf,
            at: 0,
            area: None,
        }
    }

    /// Reads `buf`, a cell's answer whose long strings are in `area`
    /// (see [`Writer::with_area`]; only [`string`](Self::string) reads
    /// them).
    pub fn with_area(buf: &'a [u8], area: &'a AnswerArea) -> Self {
        Self {
            area: Some(area),
            ..Self::new(buf)
        }
    }

    fn take(&mut self, n: usize) -> Decoded<&'a [u8]> {
        let end = self.at.checked_add(n).ok_or(SHORT)?;
        let out = self.buf.get(self.at..end).ok_or(SHORT)?;
        self.at = end;
        Ok(out)
    }

    /// One byte.
    pub fn u8(&mut self) -> Decoded<u8> {
        Ok(self.take(1)?[0])
    }

    /// A boolean.
    pub fn bool(&mut self) -> Decoded<bool> {
        Ok(self.u8()? != 0)
    }

    /// A `u32`.
    pub fn u32(&mut self) -> Decoded<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An `i32`.
    pub fn i32(&mut self) -> Decoded<i32> {
        Ok(self.u32()? as i32)
    }

    /// A `u64`.
    pub fn u64(&mut self) -> Decoded<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Bytes.
    pub fn bytes(&mut self) -> Decoded<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    /// A string (UTF-8 checked).
    pub fn str(&mut self) -> Decoded<&'a str> {
        std::str::from_utf8(self.bytes()?).map_err(|_| WireError::Malformed("text is not UTF-8"))
    }

    /// A string of one's own (UTF-8 checked after it is copied), from
    /// the frame or from the answer area.
    pub fn string(&mut self) -> Decoded<String> {
        let n = self.u32()?;
        let bytes = if n & IN_AREA != 0 {
            let at = usize::try_from(self.u64()?).map_err(|_| FAR)?;
            let area = self.area.ok_or(FAR)?;
            area.copy_out(at, (n & !IN_AREA) as usize).ok_or(FAR)?
        } else {
            self.take(n as usize)?.to_vec()
        };
        String::from_utf8(bytes).map_err(|_| WireError::Malformed("text is not UTF-8"))
    }

    /// An optional `u32`.
    pub fn opt_u32(&mut self) -> Decoded<Option<u32>> {
        Ok(if self.bool()? {
            Some(self.u32()?)
        } else {
            None
        })
    }

    /// An optional string.
    pub fn opt_str(&mut self) -> Decoded<Option<&'a str>> {
        Ok(if self.bool()? {
            Some(self.str()?)
        } else {
            None
        })
    }

    /// A count of items that each take at least `min_size` bytes, checked
    /// against what is left (a hostile count cannot make a reader
    /// allocate more than the frame's size).
    pub fn count(&mut self, min_size: usize) -> Decoded<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size.max(1)) > self.buf.len() - self.at {
            return Err(SHORT);
        }
        Ok(n)
    }
}

/// One received frame: its kind, its fields and the descriptors that came
/// with it.
#[derive(Debug)]
pub struct Frame {
    /// What it is.
    pub kind: Kind,
    /// Its fields (after the kind byte).
    pub body: Vec<u8>,
}

impl Frame {
    /// A reader of its fields.
    pub fn reader(&self) -> Reader<'_> {
        Reader::new(&self.body)
    }
}

/// How long either end reads again before it sleeps.
const SPIN: std::time::Duration = std::time::Duration::from_micros(30);

/// The largest frame the host accepts from a cell: a whole prompt's
/// section many times over, far from what would strain the host.
pub const MAX_FRAME_FROM_CELL: usize = 64 << 20;

/// One end of the channel: a connected Unix stream socket.
#[derive(Debug)]
pub struct Channel {
    fd: OwnedFd,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    fds: VecDeque<OwnedFd>,
    /// Whether descriptors that come with frames are kept (the cell's
    /// end) or discarded by the kernel (the host's: a cell has nothing to
    /// pass the host).
    accept_fds: bool,
    max_frame: usize,
    /// Whether the socket is non-blocking (the host's end).
    nonblocking: bool,
}

impl Channel {
    /// The cell's end of the channel over `fd`, a connected `AF_UNIX`
    /// stream socket: blocking, descriptors kept.
    pub fn new(fd: OwnedFd) -> Self {
        Self {
            fd,
            buf: vec![0; 64 << 10],
            start: 0,
            end: 0,
            fds: VecDeque::new(),
            accept_fds: true,
            max_frame: MAX_FRAME,
            nonblocking: false,
        }
    }

    /// The host's end: non-blocking (every send and receive waits at most
    /// to its deadline), descriptors refused, frames of at most
    /// [`MAX_FRAME_FROM_CELL`].
    pub fn for_host(fd: OwnedFd) -> io::Result<Self> {
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Self {
            accept_fds: false,
            max_frame: MAX_FRAME_FROM_CELL,
            nonblocking: true,
            ..Self::new(fd)
        })
    }

    /// A connected pair, both ends close-on-exec.
    pub fn pair() -> io::Result<(OwnedFd, OwnedFd)> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: `fds` is a valid array of two descriptors for the call to fill.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned by nobody else.
        Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
    }

    /// The socket's descriptor.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Sends one frame (from [`Writer::finish`]) with `fds` beside it.
    pub fn send(&self, frame: &[u8], fds: &[RawFd]) -> Result<(), WireError> {
        self.send_by(frame, fds, None)
    }

    /// [`send`](Self::send), giving up at `deadline` (on a non-blocking
    /// end: a peer that stops reading cannot hold the sender).
    pub fn send_by(
        &self,
        frame: &[u8],
        fds: &[RawFd],
        deadline: Option<Instant>,
    ) -> Result<(), WireError> {
        let mut sent = 0;
        let mut fds = fds;
        while sent < frame.len() {
            match send_some(self.fd.as_raw_fd(), &frame[sent..], fds) {
                Ok(n) => {
                    fds = &[];
                    sent += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait_for(self.fd.as_raw_fd(), libc::POLLOUT, deadline)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// The next descriptor that came with the frames read so far.
    pub fn take_fd(&mut self) -> Result<OwnedFd, WireError> {
        self.fds.pop_front().ok_or(WireError::Malformed(
            "a descriptor the frame announced is missing",
        ))
    }

    /// The next frame, waiting until `deadline` (forever when none).
    pub fn recv(&mut self, deadline: Option<Instant>) -> Result<Frame, WireError> {
        // A frame that comes within [`SPIN`] is read without sleeping:
        // waking a sleeping thread costs more than the rest of a round
        // trip on a small virtual machine. Both ends spin, as the host's
        // companion threads of in-process hooks do: the host waiting for
        // an answer, the cell for the next call of a cycle.
        let mut spin_until = Instant::now() + SPIN;
        loop {
            if let Some(frame) = self.buffered()? {
                return Ok(frame);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(WireError::Timeout);
            }
            let spinning = Instant::now() < spin_until;
            if !self.nonblocking && !spinning && deadline.is_some() {
                wait_for(self.fd.as_raw_fd(), libc::POLLIN, deadline)?;
            }
            match self.fill(spinning) {
                // A large frame comes in pieces: keep reading while they
                // come.
                Ok(()) => spin_until = Instant::now() + SPIN,
                Err(WireError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                    if spinning {
                        std::hint::spin_loop();
                    } else if self.nonblocking {
                        wait_for(self.fd.as_raw_fd(), libc::POLLIN, deadline)?;
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn buffered(&mut self) -> Result<Option<Frame>, WireError> {
        let have = self.end - self.start;
        if have < 4 {
            return Ok(None);
        }
        let b = &self.buf[self.start..self.start + 4];
        let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
        if len == 0 || len > self.max_frame {
            return Err(WireError::Malformed("frame length out of range"));
        }
        if have < 4 + len {
            if self.buf.len() - self.start < 4 + len {
                // Make room: move what is buffered to the front, grow if needed.
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
                if self.buf.len() < 4 + len {
                    self.buf.resize(4 + len, 0);
                }
            }
            return Ok(None);
        }
        let body = &self.buf[self.start + 4..self.start + 4 + len];
        let kind = Kind::of(body[0]).ok_or(WireError::Malformed("unknown frame kind"))?;
        let frame = Frame {
            kind,
            body: body[1..].to_vec(),
        };
        self.start += 4 + len;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(Some(frame))
    }

    /// Reads what has come; without waiting when `dont_wait` (or on the
    /// non-blocking end).
    fn fill(&mut self, dont_wait: bool) -> Result<(), WireError> {
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                let grown = self.buf.len() * 2;
                self.buf.resize(grown, 0);
            }
        }
        let n = recv_some(
            self.fd.as_raw_fd(),
            &mut self.buf[self.end..],
            self.accept_fds.then_some(&mut self.fds),
            dont_wait,
        )?;
        if n == 0 {
            return Err(WireError::Closed);
        }
        self.end += n;
        Ok(())
    }
}

/// Waits until `fd` is ready for `events` or `deadline` passes (forever
/// without one).
fn wait_for(fd: RawFd, events: libc::c_short, deadline: Option<Instant>) -> Result<(), WireError> {
    loop {
        let ms = match deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                i32::try_from(left.as_millis()).unwrap_or(i32::MAX)
            }
            None => -1,
        };
        let mut pfd = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc > 0 {
            return Ok(());
        }
        if rc == 0 {
            if deadline.is_none_or(|d| Instant::now() >= d) {
                return Err(WireError::Timeout);
            }
            continue;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err.into());
        }
    }
}

fn send_some(fd: RawFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let fds = &fds[..fds.len().min(MAX_FDS)];
    let space = cmsg_space(fds.len());
    let mut control = [0u64; CONTROL_WORDS];
    // SAFETY: zeroed msghdr is a valid empty header; the pointers set below
    // point at live buffers for the duration of the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: `control` is large enough for one header with `fds.len()`
        // descriptors (CMSG_SPACE), so CMSG_FIRSTHDR and CMSG_DATA stay in it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(cmsg),
                std::mem::size_of_val(fds),
            );
        }
    }
    loop {
        // SAFETY: `msg` describes live buffers (see above).
        let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Room for one control message of [`MAX_FDS`] descriptors, in aligned
/// words, on the stack.
const CONTROL_WORDS: usize = 64;

fn cmsg_space(fds: usize) -> usize {
    // SAFETY: CMSG_SPACE is a pure computation.
    unsafe { libc::CMSG_SPACE((fds * std::mem::size_of::<RawFd>()) as u32) as usize }
}

/// Receives into `buf`; descriptors that come along go to `out`, or,
/// without one, are discarded by the kernel (no control buffer).
fn recv_some(
    fd: RawFd,
    buf: &mut [u8],
    mut out: Option<&mut VecDeque<OwnedFd>>,
    dont_wait: bool,
) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let space = if out.is_some() {
        cmsg_space(MAX_FDS)
    } else {
        0
    };
    let mut control = vec![0u8; space];
    // SAFETY: as in `send_some`.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if space > 0 {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
    }
    let n = loop {
        let flags = if dont_wait {
            libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT
        } else {
            libc::MSG_CMSG_CLOEXEC
        };
        // SAFETY: `msg` describes live buffers.
        let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
        if n >= 0 {
            break n as usize;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    };
    // SAFETY: the kernel filled `control` up to `msg_controllen`; the CMSG
    // macros walk only within it.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let len = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                let count = len / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    let raw = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    let owned = OwnedFd::from_raw_fd(raw);
                    if let Some(out) = out.as_deref_mut() {
                        out.push_back(owned);
                    }
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_descriptors_cross_in_order() {
        let (a, b) = Channel::pair().unwrap();
        let a = Channel::new(a);
        let mut b = Channel::new(b);
        let file = tempfile::tempfile().unwrap();
        let mut w = Writer::new(Kind::Call);
        w.u32(7)
            .str("hello")
            .opt_str(None)
            .opt_u32(Some(3))
            .u64(u64::MAX);
        a.send(&w.finish(), &[file.as_raw_fd()]).unwrap();
        // Larger than the socket's buffer: sent while the other end reads.
        let big = "x".repeat(300_000);
        let sender = std::thread::spawn(move || {
            let mut w = Writer::new(Kind::Reply);
            w.str(&"x".repeat(300_000));
            a.send(&w.finish(), &[]).unwrap();
            a
        });
        let frame = b.recv(None).unwrap();
        assert_eq!(frame.kind, Kind::Call);
        let mut r = frame.reader();
        assert_eq!(r.u32().unwrap(), 7);
        assert_eq!(r.str().unwrap(), "hello");
        assert_eq!(r.opt_str().unwrap(), None);
        assert_eq!(r.opt_u32().unwrap(), Some(3));
        assert_eq!(r.u64().unwrap(), u64::MAX);
        assert!(r.u8().is_err(), "reading past the end is an error");
        b.take_fd().unwrap();
        let frame = b.recv(None).unwrap();
        assert_eq!(frame.reader().str().unwrap().len(), big.len());
        drop(sender.join().unwrap());
        assert!(matches!(b.recv(None), Err(WireError::Closed)));
    }

    #[test]
    fn a_hostile_count_is_refused_before_anything_is_allocated() {
        let mut w = Writer::new(Kind::Reply);
        w.u32(u32::MAX);
        let frame = w.finish();
        let mut r = Reader::new(&frame[5..]);
        assert!(r.count(8).is_err());
    }

    #[test]
    fn long_strings_cross_by_the_answer_area_and_a_lying_frame_is_refused() {
        let (host_area, fd) = AnswerArea::create().unwrap();
        let cell_area: &'static AnswerArea = Box::leak(Box::new(AnswerArea::open(&fd).unwrap()));
        let long = "é".repeat(answer::IN_AREA_FROM);
        let mut w = Writer::with_area(Kind::Reply, cell_area);
        w.str("short").str(&long).str(&long);
        let frame = w.finish();
        assert!(
            frame.len() < 100,
            "the long strings are not in the frame ({} bytes)",
            frame.len()
        );
        let mut r = Reader::with_area(&frame[5..], &host_area);
        assert_eq!(r.string().unwrap(), "short");
        assert_eq!(r.string().unwrap(), long);
        assert_eq!(r.string().unwrap(), long);
        // Without the area the same frame does not decode.
        assert!(Reader::new(&frame[5..]).str().is_ok());
        let mut r = Reader::new(&frame[5..]);
        r.string().unwrap();
        assert!(r.string().is_err());
        // A cell that points beyond the area, or at bytes that are not
        // UTF-8, gets a malformed frame, not a read out of bounds.
        for (len, at) in [
            (10u32, answer::AREA as u64),
            (u32::MAX >> 1, 0),
            (8, u64::MAX),
        ] {
            let mut w = Writer::new(Kind::Reply);
            w.u32(len | IN_AREA).u64(at);
            let frame = w.finish();
            let mut r = Reader::with_area(&frame[5..], &host_area);
            assert!(r.string().is_err(), "{len} at {at}");
        }
        assert!(cell_area.put_at(0, &[0xff, 0xfe]));
        let mut w = Writer::new(Kind::Reply);
        w.u32(2 | IN_AREA).u64(0);
        let frame = w.finish();
        assert!(Reader::with_area(&frame[5..], &host_area).string().is_err());
    }

    #[test]
    fn a_silent_peer_times_out() {
        let (_a, b) = Channel::pair().unwrap();
        let mut b = Channel::new(b);
        let deadline = Instant::now() + std::time::Duration::from_millis(20);
        assert!(matches!(b.recv(Some(deadline)), Err(WireError::Timeout)));
    }
}
