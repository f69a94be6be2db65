//! The walls of a cell, raised before the skill's library is loaded.
//!
//! In order: every descriptor but the channel closed, no core dumps and
//! not dumpable (the lent memex is in this process's memory), killed with
//! the host, a new user and network namespace where the system allows it,
//! resource limits, `no_new_privs`, Landlock (no file but the system's
//! shared libraries, the library's own copy and what the user granted; no
//! TCP; no abstract sockets or signals outside the cell), then seccomp.
//!
//! The seccomp filter *traps* what a skill may not do: the kernel sends
//! the cell `SIGSYS` instead of making the call, and the cell's handler
//! makes the call fail with `EPERM` and notes what was tried, so that the
//! host can say it (`skill rogue tried to connect a socket: refused`). The
//! skill sees an error, never a kill. Opening a file is trapped too and
//! made again by the handler as `openat2`, which the filter allows and
//! Landlock judges: a refusal is noted with the path.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// What the cell may do beyond computing.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    /// Folders and files it may read (and list), absolute.
    pub read: Vec<std::path::PathBuf>,
    /// Whether it may open TCP/UDP sockets and connect.
    pub network: bool,
}

/// How the cell is confined, as it reports to the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Confinement {
    /// The Landlock ABI in force (0: none).
    pub landlock_abi: u32,
    /// Whether the seccomp filter is in force.
    pub seccomp: bool,
    /// Whether the cell has its own user (and, without a network grant,
    /// network) namespace.
    pub namespaces: bool,
}

/// Kinds of refused acts, as the host names them.
pub mod acts {
    /// Open a socket.
    pub const SOCKET: u32 = 1;
    /// Connect, bind, listen or accept.
    pub const CONNECT: u32 = 2;
    /// Run a program.
    pub const EXEC: u32 = 3;
    /// Start a process (fork). Refused with `EPERM` without a trap (see
    /// the filter), so never noted.
    pub const FORK: u32 = 4;
    /// Trace or read another process.
    pub const PTRACE: u32 = 5;
    /// Mount, namespaces, keyrings, BPF, modules and the like.
    pub const SYSTEM: u32 = 6;
    /// Raise its limits.
    pub const LIMITS: u32 = 7;
    /// Open a file it was not granted.
    pub const OPEN: u32 = 8;
    /// Change its signal handling for SIGSYS.
    pub const SIGSYS: u32 = 9;
    /// Change a file's mode, owner, times or extended attributes, or
    /// truncate it by name.
    pub const METADATA: u32 = 10;
    /// Use System V or POSIX IPC (shared memory, queues, semaphores).
    pub const IPC: u32 = 11;
    /// Watch files (inotify, fanotify).
    pub const WATCH: u32 = 12;
    /// Signal, or change the scheduling of, another process.
    pub const OTHERS: u32 = 13;

    /// The phrase after "tried to".
    pub fn describe(kind: u32) -> &'static str {
        match kind {
            SOCKET => "open a socket",
            CONNECT => "connect, bind or accept a socket",
            EXEC => "run a program",
            FORK => "start a process",
            PTRACE => "trace or read another process",
            SYSTEM => "change the system (mount, namespaces, keyrings, BPF or modules)",
            LIMITS => "raise its resource limits",
            OPEN => "open a file",
            SIGSYS => "replace the cell's SIGSYS handler",
            METADATA => "change a file's mode, owner, times or attributes",
            IPC => "use shared memory or message queues",
            WATCH => "watch files",
            OTHERS => "signal or reschedule another process",
            _ => "make a forbidden system call",
        }
    }
}

/// One refused act, noted by the `SIGSYS` handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// One of [`acts`].
    pub kind: u32,
    /// The system call's number.
    pub syscall: u32,
    /// For a file, its path (as given, cut at 255 bytes).
    pub path: String,
}

const SLOTS: usize = 64;
const PATH_MAX_NOTED: usize = 255;

struct Slot {
    /// 0 free, 1 being written, 2 ready.
    state: AtomicU32,
    kind: AtomicU32,
    syscall: AtomicU32,
    len: AtomicUsize,
    path: [std::sync::atomic::AtomicU8; PATH_MAX_NOTED],
}

#[allow(clippy::declare_interior_mutable_const)]
const SLOT: Slot = Slot {
    state: AtomicU32::new(0),
    kind: AtomicU32::new(0),
    syscall: AtomicU32::new(0),
    len: AtomicUsize::new(0),
    path: [const { std::sync::atomic::AtomicU8::new(0) }; PATH_MAX_NOTED],
};

static NOTED: [Slot; SLOTS] = [SLOT; SLOTS];
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Notes a refused act; called from the signal handler, so only atomics.
fn note(kind: u32, syscall: u32, path: *const u8) {
    let slot = &NOTED[NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS];
    if slot
        .state
        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    slot.kind.store(kind, Ordering::Relaxed);
    slot.syscall.store(syscall, Ordering::Relaxed);
    let mut len = 0;
    if !path.is_null() {
        while len < PATH_MAX_NOTED {
            // SAFETY: the path is the NUL-terminated string the skill passed
            // to the kernel; a bad pointer would have made the call fail
            // with EFAULT, but here it is read in the cell's own address
            // space: an unmapped address would fault the cell, which only
            // ends the cell (read byte by byte, stopping at NUL).
            let byte = unsafe { path.add(len).read_volatile() };
            if byte == 0 {
                break;
            }
            slot.path[len].store(byte, Ordering::Relaxed);
            len += 1;
        }
    }
    slot.len.store(len, Ordering::Relaxed);
    slot.state.store(2, Ordering::Release);
}

/// The refused acts noted since the last call, oldest slots first.
pub fn take_refused() -> Vec<Refused> {
    let mut out = Vec::new();
    for slot in &NOTED {
        if slot.state.load(Ordering::Acquire) != 2 {
            continue;
        }
        let len = slot.len.load(Ordering::Relaxed).min(PATH_MAX_NOTED);
        let bytes: Vec<u8> = slot.path[..len]
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        out.push(Refused {
            kind: slot.kind.load(Ordering::Relaxed),
            syscall: slot.syscall.load(Ordering::Relaxed),
            path: String::from_utf8_lossy(&bytes).into_owned(),
        });
        slot.state.store(0, Ordering::Release);
    }
    out
}

#[cfg(target_os = "linux")]
pub use linux::confine;

#[cfg(not(target_os = "linux"))]
/// Cells need Linux: elsewhere confinement always fails.
pub fn confine(_: &Grants, _: &std::path::Path, _: u32, _: bool) -> Result<Confinement, String> {
    Err("skill cells need Linux (Landlock and seccomp)".to_owned())
}

#[cfg(target_os = "linux")]
mod linux {
    use super::{Confinement, Grants, acts, note};
    use std::collections::BTreeMap;
    use std::path::Path;

    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, PathBeneath,
        PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    };
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };

    /// Where the system's shared libraries are: what loading a library
    /// may need to read; and what the standard libraries read to size
    /// their thread pools (the CPUs online, the cell's cgroup quota, its
    /// own `/proc` entry: `std::thread::available_parallelism`).
    const SYSTEM_LIBRARIES: [&str; 9] = [
        "/lib",
        "/lib64",
        "/usr/lib",
        "/usr/lib64",
        "/usr/local/lib",
        "/etc/ld.so.cache",
        "/sys/devices/system/cpu",
        "/sys/fs/cgroup",
        "/proc/self",
    ];

    /// Confines the calling process: see the module docs. `library` is the
    /// copy of the skill's library the cell will load; `memory_mib` the
    /// limit on what it may allocate; `simulate_no_landlock` makes this
    /// fail as on a kernel without Landlock (for tests).
    pub fn confine(
        grants: &Grants,
        library: &Path,
        memory_mib: u32,
        simulate_no_landlock: bool,
    ) -> Result<Confinement, String> {
        let mut confinement = Confinement::default();
        close_other_descriptors();
        // SAFETY: prctl and setrlimit with constant, valid arguments.
        unsafe {
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
        }
        // Nowhere in particular: relative paths mean nothing here.
        // SAFETY: chdir with a constant C string.
        unsafe {
            libc::chdir(c"/".as_ptr());
        }
        // Out of the host's process group and session: a signal to the
        // group does not reach the host from here, nor the host's to here.
        // SAFETY: setsid has no arguments; failure (already a leader) is fine.
        unsafe {
            libc::setsid();
        }
        // The host may have died before the death signal was armed.
        // SAFETY: getppid has no arguments.
        if unsafe { libc::getppid() } == 1 {
            return Err("the host is gone".to_owned());
        }
        let flags = if grants.network {
            libc::CLONE_NEWUSER | libc::CLONE_NEWIPC
        } else {
            libc::CLONE_NEWUSER | libc::CLONE_NEWIPC | libc::CLONE_NEWNET
        };
        // SAFETY: unshare with namespace flags; failure is allowed.
        confinement.namespaces = unsafe { libc::unshare(flags) } == 0;
        set_limits(memory_mib)?;
        if simulate_no_landlock {
            return Err("this kernel does not enforce Landlock (simulated)".to_owned());
        }
        confinement.landlock_abi = landlock(grants, library)?;
        let _ = TABLE.set(forbidden(false));
        install_sigsys_handler()?;
        seccomp(grants)?;
        confinement.seccomp = true;
        Ok(confinement)
    }

    fn close_other_descriptors() {
        // Keep 0, 1, 2 (null, null, the stderr file) and 3 (the channel).
        // SAFETY: close_range on a range of descriptors this process owns.
        let rc = unsafe { libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32) };
        if rc != 0 {
            // SAFETY: getrlimit into a zeroed struct.
            let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
            let top = i32::try_from(limit.rlim_cur.min(1 << 20)).unwrap_or(1 << 20);
            for fd in 4..top {
                // SAFETY: closing a descriptor number; unused ones fail harmlessly.
                unsafe {
                    libc::close(fd);
                }
            }
        }
    }

    fn set_limits(memory_mib: u32) -> Result<(), String> {
        // RLIMIT_DATA, not RLIMIT_AS: it counts what the cell allocates
        // (heap, anonymous and private writable mappings) and not the
        // lent view, which is mapped shared and read-only, nor address
        // space reserved and never used (malloc's arenas reserve 64 MiB
        // each).
        // RLIMIT_AS as a wide backstop: shared anonymous memory is not
        // data, but it is address space (the lent view fits many times).
        let data = u64::from(memory_mib.max(16)) << 20;
        let limits = [
            (libc::RLIMIT_DATA, data),
            (libc::RLIMIT_AS, data * 2 + (2 << 30)),
            (libc::RLIMIT_NOFILE, 64),
            (libc::RLIMIT_FSIZE, 1 << 20),
            // Counted per user namespace (Linux 5.14 and later).
            (libc::RLIMIT_NPROC, 512),
        ];
        for (resource, value) in limits {
            let limit = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            // SAFETY: a valid rlimit for a known resource.
            if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                return Err(format!(
                    "cannot set a resource limit: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        // A write past RLIMIT_FSIZE (the stderr file) fails with EFBIG
        // instead of killing the cell.
        // SAFETY: ignoring a signal.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        }
        Ok(())
    }

    fn landlock(grants: &Grants, library: &Path) -> Result<u32, String> {
        let abi = ABI::V6;
        let read = AccessFs::from_read(abi);
        let fail = |e: &dyn std::fmt::Display| format!("Landlock: {e}");
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))
            .map_err(|e| fail(&e))?;
        if !grants.network {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(abi))
                .map_err(|e| fail(&e))?;
        }
        let mut created = ruleset
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(|e| fail(&e))?
            .create()
            .map_err(|e| fail(&e))?;
        let mut paths: Vec<&Path> = SYSTEM_LIBRARIES.iter().map(Path::new).collect();
        paths.push(library);
        paths.extend(grants.read.iter().map(|p| p.as_path()));
        for path in paths {
            // A path that does not exist is no rule.
            let Ok(fd) = PathFd::new(path) else { continue };
            let is_dir = path.is_dir();
            let access = if is_dir {
                read
            } else {
                AccessFs::from_file(abi) & read
            };
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| fail(&e))?;
        }
        let status = created.restrict_self().map_err(|e| fail(&e))?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Err("this kernel does not enforce Landlock".to_owned());
        }
        Ok(match status.landlock {
            LandlockStatus::Available { effective_abi, .. } => effective_abi as u32,
            _ => 1,
        })
    }

    /// The `SIGSYS` handler: notes what was tried and makes the call fail,
    /// or, for an open, makes it again as `openat2` (allowed by the
    /// filter, judged by Landlock).
    extern "C" fn on_sigsys(_: libc::c_int, _: *mut libc::siginfo_t, context: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid ucontext for SA_SIGINFO handlers.
        let uc = unsafe { &mut *context.cast::<libc::ucontext_t>() };
        let mut regs = Regs(uc);
        let nr = regs.nr();
        let (kind, result) = match classify(nr) {
            acts::OPEN => {
                let (dirfd, path, flags, mode) = regs.open_args(nr);
                let how = OpenHow {
                    flags: flags as u64 & 0xffff_ffff,
                    mode: if flags & (libc::O_CREAT | libc::O_TMPFILE) as i64 != 0 {
                        mode as u64 & 0o7777
                    } else {
                        0
                    },
                    resolve: 0,
                };
                // SAFETY: openat2 with the skill's own arguments; the kernel
                // checks the path pointer.
                let rc = unsafe {
                    libc::syscall(
                        libc::SYS_openat2,
                        dirfd,
                        path,
                        &how as *const OpenHow,
                        std::mem::size_of::<OpenHow>(),
                    )
                };
                let rc = if rc < 0 {
                    // SAFETY: reading errno.
                    -i64::from(unsafe { *libc::__errno_location() })
                } else {
                    rc
                };
                if rc == -i64::from(libc::EACCES) || rc == -i64::from(libc::EPERM) {
                    note(acts::OPEN, nr as u32, path as *const u8);
                }
                regs.set_result(rc);
                return;
            }
            kind => (kind, -i64::from(libc::EPERM)),
        };
        note(kind, nr as u32, std::ptr::null());
        regs.set_result(result);
    }

    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }

    struct Regs<'a>(&'a mut libc::ucontext_t);

    #[cfg(target_arch = "x86_64")]
    impl Regs<'_> {
        fn g(&self, r: libc::c_int) -> i64 {
            self.0.uc_mcontext.gregs[r as usize]
        }
        fn nr(&self) -> i64 {
            // After a trap the kernel puts the call's number back in rax.
            self.g(libc::REG_RAX)
        }
        fn open_args(&self, nr: i64) -> (i64, i64, i64, i64) {
            let (di, si, dx, r10) = (
                self.g(libc::REG_RDI),
                self.g(libc::REG_RSI),
                self.g(libc::REG_RDX),
                self.g(libc::REG_R10),
            );
            match nr {
                libc::SYS_open => (i64::from(libc::AT_FDCWD), di, si, dx),
                libc::SYS_creat => (
                    i64::from(libc::AT_FDCWD),
                    di,
                    i64::from(libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC),
                    si,
                ),
                _ => (di, si, dx, r10),
            }
        }
        fn set_result(&mut self, v: i64) {
            self.0.uc_mcontext.gregs[libc::REG_RAX as usize] = v;
        }
    }

    #[cfg(target_arch = "aarch64")]
    impl Regs<'_> {
        fn nr(&self) -> i64 {
            self.0.uc_mcontext.regs[8] as i64
        }
        fn open_args(&self, _: i64) -> (i64, i64, i64, i64) {
            let r = &self.0.uc_mcontext.regs;
            (r[0] as i64, r[1] as i64, r[2] as i64, r[3] as i64)
        }
        fn set_result(&mut self, v: i64) {
            self.0.uc_mcontext.regs[0] = v as u64;
        }
    }

    fn install_sigsys_handler() -> Result<(), String> {
        // SAFETY: installs a handler for SIGSYS with a zeroed, then filled,
        // sigaction; the handler only uses atomics and raw system calls.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigsys as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(libc::SIGSYS, &action, std::ptr::null_mut()) != 0 {
                return Err(format!(
                    "cannot install the SIGSYS handler: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        Ok(())
    }

    /// The system calls a skill may not make, each with the kind of act
    /// it is.
    fn forbidden(network: bool) -> Vec<(i64, u32)> {
        use libc::*;
        let mut list: Vec<(i64, u32)> = vec![
            (SYS_execve, acts::EXEC),
            (SYS_execveat, acts::EXEC),
            (SYS_ptrace, acts::PTRACE),
            (SYS_process_vm_readv, acts::PTRACE),
            (SYS_process_vm_writev, acts::PTRACE),
            (SYS_pidfd_getfd, acts::PTRACE),
            (SYS_kcmp, acts::PTRACE),
            (SYS_mount, acts::SYSTEM),
            (SYS_umount2, acts::SYSTEM),
            (SYS_pivot_root, acts::SYSTEM),
            (SYS_chroot, acts::SYSTEM),
            (SYS_unshare, acts::SYSTEM),
            (SYS_setns, acts::SYSTEM),
            (SYS_fsopen, acts::SYSTEM),
            (SYS_fsmount, acts::SYSTEM),
            (SYS_fsconfig, acts::SYSTEM),
            (SYS_fspick, acts::SYSTEM),
            (SYS_move_mount, acts::SYSTEM),
            (SYS_open_tree, acts::SYSTEM),
            (SYS_mount_setattr, acts::SYSTEM),
            (SYS_keyctl, acts::SYSTEM),
            (SYS_add_key, acts::SYSTEM),
            (SYS_request_key, acts::SYSTEM),
            (SYS_bpf, acts::SYSTEM),
            (SYS_perf_event_open, acts::SYSTEM),
            (SYS_userfaultfd, acts::SYSTEM),
            (SYS_io_uring_setup, acts::SYSTEM),
            (SYS_io_uring_enter, acts::SYSTEM),
            (SYS_io_uring_register, acts::SYSTEM),
            (SYS_kexec_load, acts::SYSTEM),
            (SYS_kexec_file_load, acts::SYSTEM),
            (SYS_init_module, acts::SYSTEM),
            (SYS_finit_module, acts::SYSTEM),
            (SYS_delete_module, acts::SYSTEM),
            (SYS_reboot, acts::SYSTEM),
            (SYS_swapon, acts::SYSTEM),
            (SYS_swapoff, acts::SYSTEM),
            (SYS_acct, acts::SYSTEM),
            (SYS_quotactl, acts::SYSTEM),
            (SYS_syslog, acts::SYSTEM),
            (SYS_name_to_handle_at, acts::SYSTEM),
            (SYS_open_by_handle_at, acts::SYSTEM),
            (SYS_setrlimit, acts::LIMITS),
            (SYS_openat, acts::OPEN),
            (SYS_fchmod, acts::METADATA),
            (SYS_fchmodat, acts::METADATA),
            (452, acts::METADATA), // fchmodat2
            (SYS_fchown, acts::METADATA),
            (SYS_fchownat, acts::METADATA),
            (SYS_setxattr, acts::METADATA),
            (SYS_lsetxattr, acts::METADATA),
            (SYS_fsetxattr, acts::METADATA),
            (SYS_removexattr, acts::METADATA),
            (SYS_lremovexattr, acts::METADATA),
            (SYS_fremovexattr, acts::METADATA),
            (463, acts::METADATA), // setxattrat
            (466, acts::METADATA), // removexattrat
            (SYS_utimensat, acts::METADATA),
            (SYS_truncate, acts::METADATA),
            (SYS_shmget, acts::IPC),
            (SYS_shmat, acts::IPC),
            (SYS_shmctl, acts::IPC),
            (SYS_msgget, acts::IPC),
            (SYS_msgsnd, acts::IPC),
            (SYS_msgrcv, acts::IPC),
            (SYS_msgctl, acts::IPC),
            (SYS_semget, acts::IPC),
            (SYS_semop, acts::IPC),
            (SYS_semctl, acts::IPC),
            (SYS_semtimedop, acts::IPC),
            (SYS_mq_open, acts::IPC),
            (SYS_mq_unlink, acts::IPC),
            (SYS_inotify_init1, acts::WATCH),
            (SYS_inotify_add_watch, acts::WATCH),
            (SYS_fanotify_init, acts::WATCH),
            (SYS_fanotify_mark, acts::WATCH),
            (SYS_pidfd_send_signal, acts::OTHERS),
            (SYS_pidfd_open, acts::OTHERS),
            (SYS_tkill, acts::OTHERS),
        ];
        #[cfg(target_arch = "x86_64")]
        list.extend([(SYS_open, acts::OPEN), (SYS_creat, acts::OPEN)]);
        if !network {
            list.extend([
                (SYS_socket, acts::SOCKET),
                (SYS_socketpair, acts::SOCKET),
                (SYS_connect, acts::CONNECT),
                (SYS_bind, acts::CONNECT),
                (SYS_listen, acts::CONNECT),
                (SYS_accept, acts::CONNECT),
                (SYS_accept4, acts::CONNECT),
            ]);
        }
        list
    }

    /// The act a trapped call `nr` was.
    /// The trapped calls and their acts, filled before the handler is
    /// installed: the handler only reads it (no allocation in a signal
    /// handler).
    static TABLE: std::sync::OnceLock<Vec<(i64, u32)>> = std::sync::OnceLock::new();

    fn classify(nr: i64) -> u32 {
        // Calls trapped by an argument rule, then the unconditional list
        // (a linear scan: traps are rare).
        match nr {
            libc::SYS_prlimit64 => acts::LIMITS,
            libc::SYS_rt_sigaction => acts::SIGSYS,
            libc::SYS_socket => acts::SOCKET,
            libc::SYS_kill
            | libc::SYS_tgkill
            | libc::SYS_rt_sigqueueinfo
            | libc::SYS_rt_tgsigqueueinfo
            | libc::SYS_sched_setscheduler
            | libc::SYS_sched_setparam
            | libc::SYS_sched_setattr
            | libc::SYS_sched_setaffinity
            | libc::SYS_setpriority
            | libc::SYS_ioprio_set => acts::OTHERS,
            _ => TABLE
                .get()
                .and_then(|t| t.iter().find(|(n, _)| *n == nr))
                .map_or(acts::SYSTEM, |(_, k)| *k),
        }
    }

    fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
        SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value)
            .map_err(|e| format!("seccomp: {e}"))
    }

    fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
        SeccompRule::new(conditions).map_err(|e| format!("seccomp: {e}"))
    }

    fn seccomp(grants: &Grants) -> Result<(), String> {
        let arch = std::env::consts::ARCH
            .try_into()
            .map_err(|e| format!("seccomp: {e:?}"))?;
        let mut trapped: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        for (nr, _) in forbidden(grants.network) {
            trapped.insert(nr, vec![]);
        }
        // Signals and scheduling: only this process (Landlock's signal
        // scope does the same from ABI 6; this holds on older kernels too).
        // SAFETY: getpid has no arguments.
        let me = unsafe { libc::getpid() } as u64;
        for nr in [
            libc::SYS_kill,
            libc::SYS_tgkill,
            libc::SYS_rt_sigqueueinfo,
            libc::SYS_rt_tgsigqueueinfo,
        ] {
            trapped.insert(nr, vec![rule(vec![cond(0, SeccompCmpOp::Ne, me)?])?]);
        }
        for nr in [
            libc::SYS_sched_setscheduler,
            libc::SYS_sched_setparam,
            libc::SYS_sched_setattr,
            libc::SYS_sched_setaffinity,
        ] {
            trapped.insert(
                nr,
                vec![rule(vec![
                    cond(0, SeccompCmpOp::Ne, 0)?,
                    cond(0, SeccompCmpOp::Ne, me)?,
                ])?],
            );
        }
        trapped.insert(
            libc::SYS_setpriority,
            vec![
                rule(vec![cond(0, SeccompCmpOp::Ne, libc::PRIO_PROCESS as u64)?])?,
                rule(vec![
                    cond(1, SeccompCmpOp::Ne, 0)?,
                    cond(1, SeccompCmpOp::Ne, me)?,
                ])?,
            ],
        );
        trapped.insert(
            libc::SYS_ioprio_set,
            vec![rule(vec![
                cond(1, SeccompCmpOp::Ne, 0)?,
                cond(1, SeccompCmpOp::Ne, me)?,
            ])?],
        );
        // prlimit64 may read limits, not set them.
        trapped.insert(
            libc::SYS_prlimit64,
            vec![rule(vec![cond(2, SeccompCmpOp::Ne, 0)?])?],
        );
        // Nobody replaces the handler that keeps refusals refusals.
        trapped.insert(
            libc::SYS_rt_sigaction,
            vec![rule(vec![
                cond(0, SeccompCmpOp::Eq, libc::SIGSYS as u64)?,
                cond(1, SeccompCmpOp::Ne, 0)?,
            ])?],
        );
        if grants.network {
            // Internet sockets only: no Unix socket to the host's control
            // socket or anything else on this machine's file system.
            trapped.insert(
                libc::SYS_socket,
                vec![rule(vec![
                    cond(0, SeccompCmpOp::Ne, libc::AF_INET as u64)?,
                    cond(0, SeccompCmpOp::Ne, libc::AF_INET6 as u64)?,
                ])?],
            );
        }
        let filter = SeccompFilter::new(trapped, SeccompAction::Allow, SeccompAction::Trap, arch)
            .map_err(|e| format!("seccomp: {e}"))?;
        let program: BpfProgram = filter.try_into().map_err(|e| format!("seccomp: {e}"))?;
        // clone3 cannot be filtered by its flags (they are behind a
        // pointer): it fails with ENOSYS, and the C library falls back to
        // clone, which can be. A new process (not a thread) fails with
        // EPERM — not trapped: the C library starts processes with every
        // signal blocked, and a trap then would kill the cell instead.
        let mut clone3 = BTreeMap::new();
        clone3.insert(libc::SYS_clone3, vec![]);
        let clone3 = SeccompFilter::new(
            clone3,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::ENOSYS as u32),
            arch,
        )
        .map_err(|e| format!("seccomp: {e}"))?;
        let mut fork = BTreeMap::new();
        fork.insert(
            libc::SYS_clone,
            vec![rule(vec![cond(
                0,
                SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64),
                0,
            )?])?],
        );
        #[cfg(target_arch = "x86_64")]
        for nr in [libc::SYS_fork, libc::SYS_vfork] {
            fork.insert(nr, vec![]);
        }
        let fork = SeccompFilter::new(
            fork,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            arch,
        )
        .map_err(|e| format!("seccomp: {e}"))?;
        for filter in [clone3, fork] {
            let program: BpfProgram = filter.try_into().map_err(|e| format!("seccomp: {e}"))?;
            seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))?;
        }
        // Every x32 system call fails: the rules above name x86-64 numbers,
        // and an argument rule has no x32 twin.
        #[cfg(target_arch = "x86_64")]
        {
            use seccompiler::sock_filter;
            const LD_W_ABS: u16 = 0x20;
            const JSET_K: u16 = 0x45;
            const RET_K: u16 = 0x06;
            let x32: BpfProgram = vec![
                sock_filter {
                    code: LD_W_ABS,
                    jt: 0,
                    jf: 0,
                    k: 0,
                },
                sock_filter {
                    code: JSET_K,
                    jt: 0,
                    jf: 1,
                    k: 0x4000_0000,
                },
                sock_filter {
                    code: RET_K,
                    jt: 0,
                    jf: 0,
                    k: 0x0005_0000 | libc::EPERM as u32,
                },
                sock_filter {
                    code: RET_K,
                    jt: 0,
                    jf: 0,
                    k: 0x7fff_0000,
                },
            ];
            seccompiler::apply_filter(&x32).map_err(|e| format!("seccomp: {e}"))?;
        }
        seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))?;
        Ok(())
    }
}
