//! What may run or configure the host: the ownership and mode rule, and the
//! optional allow-list of library hashes.
//!
//! A skill is native code that runs with the user's rights, and the config
//! file decides which code runs, where the API key is read from and what is
//! private (DESIGN.md, principle 6). So, as sshd's `StrictModes` does for
//! `~/.ssh`, a plugin folder, a skill library and the config file are used
//! only when nobody but the user (or root) can change them:
//!
//! - owned by the user running foveal, or by root;
//! - not writable by others;
//! - not writable by its group, unless that group is the owner's *private*
//!   group: the owner's primary group, named after the owner, with no other
//!   member listed. On a system whose umask is 002 (user private groups,
//!   the Debian and Fedora default) new files are group-writable, and that
//!   group is the user alone, so they pass. The name must match because on
//!   some systems (macOS: `staff`) every account has the same primary group
//!   and the group database lists none of them as members.
//!
//! Anything else is refused with an error that names the path and the
//! command that fixes it ([`Unsafe`]). The decision itself is the pure
//! function [`judge`]; [`check`] feeds it a file's metadata and the system's
//! group database.
//!
//! On top of that, `plugins.require_trusted = true` runs only libraries whose
//! SHA-256 is listed in `plugins.trusted` ([`AllowList`]); the loader hashes
//! the private copy it maps, so a file swapped after the check cannot run.
//!
//! # Example
//!
//! ```
//! use foveal_registry::trust::{judge, Owner, Why};
//!
//! let me = 1000;
//! let mine = Owner { uid: me, gid: 1000, mode: 0o755 };
//! assert_eq!(judge(mine, me, |_, _| false), Ok(()));
//! let open = Owner { mode: 0o777, ..mine };
//! assert_eq!(judge(open, me, |_, _| true), Err(Why::OthersCanWrite { mode: 0o777 }));
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// Who owns a file and its permission bits: what [`judge`] decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// The owner's uid.
    pub uid: u32,
    /// The file's group.
    pub gid: u32,
    /// `st_mode` (the permission bits are what matter).
    pub mode: u32,
}

impl Owner {
    /// The owner and mode of `meta` (of the file itself, not a symlink to
    /// it, when it came from `fs::metadata` or an open file).
    pub fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        Self {
            uid: meta.uid(),
            gid: meta.gid(),
            mode: meta.mode(),
        }
    }
}

/// Why a path may not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Owned by someone who is neither the user nor root.
    Owner {
        /// The owner's uid.
        owner: u32,
        /// The user's uid.
        me: u32,
    },
    /// Others (not owner, not group) may write it.
    OthersCanWrite {
        /// Its mode.
        mode: u32,
    },
    /// Its group may write it, and the group is not the owner's private
    /// group.
    GroupCanWrite {
        /// Its mode.
        mode: u32,
        /// Its group.
        gid: u32,
    },
}

impl Why {
    /// The command that makes `path` acceptable.
    fn fix(&self, path: &Path) -> String {
        let path = shell_word(path);
        match self {
            Self::Owner { me, .. } => {
                format!("sudo chown {me} {path} if you trust it, or remove it")
            }
            Self::OthersCanWrite { .. } => format!("chmod go-w {path}"),
            Self::GroupCanWrite { .. } => format!("chmod g-w {path}"),
        }
    }
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Owner { owner, me } => {
                write!(f, "is owned by uid {owner}, not you (uid {me}) or root")
            }
            Self::OthersCanWrite { mode } => {
                write!(f, "is writable by others (mode {:04o})", mode & 0o7777)
            }
            Self::GroupCanWrite { mode, gid } => write!(
                f,
                "is writable by its group (mode {:04o}), and group {gid} is not your private group",
                mode & 0o7777
            ),
        }
    }
}

/// A path that someone other than the user or root could change, with what
/// to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {why}; run {}", path.display(), why.fix(path))]
pub struct Unsafe {
    /// The folder or file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub why: Why,
}

/// The rule, as a pure function: may a file owned as `owner` be used by the
/// user `me`? `private_group(uid, gid)` says whether `gid` is the private
/// group of `uid`; it is asked only for a group-writable file.
pub fn judge(
    owner: Owner,
    me: u32,
    private_group: impl FnOnce(u32, u32) -> bool,
) -> Result<(), Why> {
    if owner.uid != me && owner.uid != 0 {
        return Err(Why::Owner {
            owner: owner.uid,
            me,
        });
    }
    if owner.mode & 0o002 != 0 {
        return Err(Why::OthersCanWrite { mode: owner.mode });
    }
    if owner.mode & 0o020 != 0 && !private_group(owner.uid, owner.gid) {
        return Err(Why::GroupCanWrite {
            mode: owner.mode,
            gid: owner.gid,
        });
    }
    Ok(())
}

/// [`judge`] for the file or folder `path` whose metadata is `meta`, as the
/// user running this process, with the system's user and group databases.
pub fn check(path: &Path, meta: &std::fs::Metadata) -> Result<(), Unsafe> {
    judge(Owner::of(meta), effective_uid(), is_private_group).map_err(|why| Unsafe {
        path: path.to_owned(),
        why,
    })
}

/// [`check`] of what `path` names (through symlinks).
pub fn check_path(path: &Path) -> std::io::Result<Result<(), Unsafe>> {
    Ok(check(path, &std::fs::metadata(path)?))
}

/// The uid whose rights this process has.
pub fn effective_uid() -> u32 {
    // SAFETY: `geteuid` takes nothing, cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// Whether `gid` is the private group of the user `uid`: that user's
/// primary group, with the user's name, and no member listed but the user.
/// `false` when either is unknown to the system.
pub fn is_private_group(uid: u32, gid: u32) -> bool {
    let Some((name, primary)) = user(uid) else {
        return false;
    };
    if primary != gid {
        return false;
    }
    match group(gid) {
        Some((group_name, members)) => group_name == name && members.iter().all(|m| *m == name),
        None => false,
    }
}

/// The name and primary gid of user `uid`.
fn user(uid: u32) -> Option<(Vec<u8>, u32)> {
    with_buffer(|buf| {
        // SAFETY: `passwd` is plain old data; all-zero is a valid value.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call: `entry` and `found`
        // are locals, `buf` is a live buffer of `buf.len()` bytes that the
        // strings of the entry point into.
        let rc = unsafe {
            libc::getpwuid_r(
                uid,
                &mut entry,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        if rc != 0 {
            return Err(rc);
        }
        if found.is_null() {
            return Ok(None);
        }
        // SAFETY: on success `pw_name` is a NUL-terminated string inside
        // `buf`, which is still alive.
        let name = unsafe { std::ffi::CStr::from_ptr(entry.pw_name) };
        Ok(Some((name.to_bytes().to_vec(), entry.pw_gid)))
    })
}

/// The name and listed members of group `gid`.
fn group(gid: u32) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    with_buffer(|buf| {
        // SAFETY: `group` is plain old data; all-zero is a valid value.
        let mut entry: libc::group = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::group = std::ptr::null_mut();
        // SAFETY: as in `user`: locals and a live buffer of the length given.
        let rc = unsafe {
            libc::getgrgid_r(
                gid,
                &mut entry,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        if rc != 0 {
            return Err(rc);
        }
        if found.is_null() {
            return Ok(None);
        }
        // SAFETY: on success `gr_name` is a NUL-terminated string and
        // `gr_mem` a NULL-terminated array of such strings, all inside `buf`.
        let name = unsafe { std::ffi::CStr::from_ptr(entry.gr_name) };
        let mut members = Vec::new();
        let mut at = entry.gr_mem;
        // SAFETY: see above; the loop stops at the terminating NULL.
        unsafe {
            while !at.is_null() && !(*at).is_null() {
                members.push(std::ffi::CStr::from_ptr(*at).to_bytes().to_vec());
                at = at.add(1);
            }
        }
        Ok(Some((name.to_bytes().to_vec(), members)))
    })
}

/// Calls a `get*_r` lookup with a buffer that grows while it says `ERANGE`;
/// `None` for an unknown id or any other failure.
fn with_buffer<T>(mut lookup: impl FnMut(&mut [u8]) -> Result<Option<T>, i32>) -> Option<T> {
    let mut buf = vec![0u8; 1024];
    loop {
        match lookup(&mut buf) {
            Ok(found) => return found,
            // A group with many members needs more room; 1 MiB is plenty.
            Err(libc::ERANGE) if buf.len() < 1 << 20 => buf.resize(buf.len() * 4, 0),
            Err(_) => return None,
        }
    }
}

/// `path` as one word a shell reads back as the same path.
fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c))
    {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// A SHA-256 digest, written `sha256:<64 hex digits>` as in
/// `plugins.trusted` and `foveal skill trust`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha256(pub [u8; 32]);

impl Sha256 {
    /// The digest of everything `reader` yields.
    pub fn of_reader(mut reader: impl std::io::Read) -> std::io::Result<Self> {
        use sha2::Digest as _;
        let mut hasher = sha2::Sha256::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => hasher.update(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Self(hasher.finalize().into()))
    }

    /// The digest of the file at `path`, as `sha256sum` computes it.
    pub fn of_file(path: &Path) -> std::io::Result<Self> {
        Self::of_reader(std::fs::File::open(path)?)
    }
}

impl fmt::Display for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::str::FromStr for Sha256 {
    type Err = &'static str;

    /// `sha256:` and 64 hex digits, in either case.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        const WANTED: &str =
            "expected \"sha256:\" and 64 hex digits, as `foveal skill trust FILE` prints";
        let hex = text.strip_prefix("sha256:").ok_or(WANTED)?;
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(WANTED);
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| WANTED)?;
        }
        Ok(Self(out))
    }
}

/// Which library builds may run, by content (`plugins.require_trusted`,
/// `plugins.trusted`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AllowList {
    /// Any build that passes the ownership rule (the default: nothing is
    /// hashed).
    #[default]
    Any,
    /// Only builds with one of these digests.
    Only(BTreeSet<Sha256>),
}

impl AllowList {
    /// Whether builds must be hashed.
    pub fn is_required(&self) -> bool {
        matches!(self, Self::Only(_))
    }

    /// Whether a build with digest `sha` may run.
    pub fn allows(&self, sha: &Sha256) -> bool {
        match self {
            Self::Any => true,
            Self::Only(set) => set.contains(sha),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u32 = 1000;

    fn owner(uid: u32, gid: u32, mode: u32) -> Owner {
        Owner { uid, gid, mode }
    }

    #[test]
    fn the_users_own_and_roots_files_pass_when_only_the_owner_can_write() {
        let never =
            |_: u32, _: u32| -> bool { panic!("the group is asked only when it can write") };
        assert_eq!(judge(owner(ME, 1000, 0o40755), ME, never), Ok(()));
        assert_eq!(judge(owner(ME, 1000, 0o100600), ME, never), Ok(()));
        assert_eq!(judge(owner(0, 0, 0o40755), ME, never), Ok(()));
        assert_eq!(judge(owner(0, 0, 0o100644), 0, never), Ok(()));
    }

    #[test]
    fn a_file_of_another_user_is_refused_whatever_its_mode() {
        assert_eq!(
            judge(owner(1001, 1001, 0o100644), ME, |_, _| true),
            Err(Why::Owner {
                owner: 1001,
                me: ME
            })
        );
        // Root running foveal does not run a user's library either.
        assert_eq!(
            judge(owner(ME, ME, 0o100600), 0, |_, _| true),
            Err(Why::Owner { owner: ME, me: 0 })
        );
    }

    #[test]
    fn writable_by_others_is_refused_even_for_root_and_with_the_sticky_bit() {
        for mode in [0o40777, 0o41777, 0o100646, 0o100602] {
            assert_eq!(
                judge(owner(ME, ME, mode), ME, |_, _| true),
                Err(Why::OthersCanWrite { mode })
            );
            assert_eq!(
                judge(owner(0, 0, mode), ME, |_, _| true),
                Err(Why::OthersCanWrite { mode })
            );
        }
    }

    #[test]
    fn writable_by_the_group_passes_only_for_the_owners_private_group() {
        let asked = std::cell::Cell::new(None);
        let private = |uid, gid| {
            asked.set(Some((uid, gid)));
            gid == 1000
        };
        assert_eq!(judge(owner(ME, 1000, 0o40775), ME, private), Ok(()));
        assert_eq!(asked.get(), Some((ME, 1000)));
        assert_eq!(
            judge(owner(ME, 100, 0o100664), ME, private),
            Err(Why::GroupCanWrite {
                mode: 0o100664,
                gid: 100
            })
        );
    }

    #[test]
    fn every_refusal_names_the_path_and_the_fix() {
        let text = |why| {
            Unsafe {
                path: PathBuf::from("/x/plugins"),
                why,
            }
            .to_string()
        };
        assert_eq!(
            text(Why::OthersCanWrite { mode: 0o40777 }),
            "/x/plugins is writable by others (mode 0777); run chmod go-w /x/plugins"
        );
        assert_eq!(
            text(Why::GroupCanWrite {
                mode: 0o100664,
                gid: 100
            }),
            "/x/plugins is writable by its group (mode 0664), and group 100 is not your private group; run chmod g-w /x/plugins"
        );
        assert_eq!(
            text(Why::Owner {
                owner: 1001,
                me: 1000
            }),
            "/x/plugins is owned by uid 1001, not you (uid 1000) or root; run sudo chown 1000 /x/plugins if you trust it, or remove it"
        );
        let spaced = Unsafe {
            path: PathBuf::from("/x/my plugins"),
            why: Why::OthersCanWrite { mode: 0o40777 },
        };
        assert!(
            spaced
                .to_string()
                .ends_with("run chmod go-w '/x/my plugins'")
        );
    }

    #[test]
    fn roots_group_is_roots_private_group_and_an_unknown_user_has_none() {
        // Every Unix system has uid 0 with primary group 0; whether that
        // group lists members varies, so only the negative cases are sure.
        assert!(!is_private_group(0, 12_345_678));
        assert!(!is_private_group(4_000_000_000, 4_000_000_000));
    }

    #[test]
    fn digests_read_and_print_as_sha256sum_writes_them() {
        let empty = Sha256::of_reader(&b""[..]).unwrap();
        assert_eq!(
            empty.to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(empty.to_string().parse::<Sha256>(), Ok(empty));
        let upper = empty
            .to_string()
            .to_uppercase()
            .replace("SHA256:", "sha256:");
        assert_eq!(upper.parse::<Sha256>(), Ok(empty));
        for bad in [
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "sha256:e3b0",
            "sha256:g3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "sha1:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ] {
            assert!(bad.parse::<Sha256>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_allow_list_allows_any_build_until_it_names_some() {
        let sha = Sha256([7; 32]);
        assert!(AllowList::Any.allows(&sha) && !AllowList::Any.is_required());
        let only = AllowList::Only(BTreeSet::from([sha]));
        assert!(only.is_required() && only.allows(&sha));
        assert!(!only.allows(&Sha256([8; 32])));
    }
}
