//! Writing to disk: new ids, and the atomic replace (temp file, fsync,
//! rename, fsync of the folder).

use super::*;

/// A random UUID (version 4), as Org's `org-id-new` writes them: from
/// `/dev/urandom`, or — where there is none — from the standard library's
/// randomly keyed hasher mixed with the time, the process and a counter.
pub(super) fn new_uuid() -> String {
    let mut b = [0u8; 16];
    let random = fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if random.is_err() {
        use std::hash::{BuildHasher as _, Hasher as _};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        for (half, chunk) in b.chunks_mut(8).enumerate() {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u128(nanos);
            hasher.write_u32(std::process::id());
            hasher.write_u64(count);
            hasher.write_usize(half);
            let mixed = hasher.finish() ^ fnv1a(&nanos.to_le_bytes()).rotate_left(half as u32 * 7);
            chunk.copy_from_slice(&mixed.to_le_bytes());
        }
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Emacs's lock of `target`, if it has one: the symlink `.#NAME` it makes
/// beside a file while a buffer visiting it has unsaved changes.
pub(super) fn emacs_lock(target: &Path) -> Option<PathBuf> {
    let name = target.file_name()?.to_string_lossy();
    let lock = target.with_file_name(format!(".#{name}"));
    fs::symlink_metadata(&lock).is_ok().then_some(lock)
}

/// What a file was when it was read: where it lives and how it looked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seen {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

impl Seen {
    pub(super) fn of(file: &fs::File) -> std::io::Result<Self> {
        Ok(Self::of_meta(&file.metadata()?))
    }

    fn of_meta(meta: &fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
        }
    }
}

/// [`replace_checked`], guarded against an outside write racing it:
/// just before the rename the file at `target` must still be the one
/// `base` (an open descriptor) read, as `seen`, with no Emacs lock; and
/// just after it, `base` — the old file — must not have changed. If it
/// did, the outside version is put back and the edit is a conflict.
pub(super) fn replace_guarded(
    path: &Path,
    target: &Path,
    bytes: &[u8],
    base: &mut fs::File,
    seen: &Seen,
) -> Result<(), WriteError> {
    let conflict = || WriteError::Conflict {
        path: path.to_owned(),
        removed: false,
    };
    let before_rename = || -> Result<(), WriteError> {
        if emacs_lock(target).is_some() {
            return Err(conflict());
        }
        match fs::metadata(target) {
            Ok(meta) if Seen::of_meta(&meta) == *seen => Ok(()),
            _ => Err(conflict()),
        }
    };
    replace_checked(path, target, bytes, &before_rename)?;
    let after = Seen::of(base).map_err(|source| WriteError::Io {
        path: path.to_owned(),
        action: "read its metadata",
        source,
    })?;
    if after.len == seen.len && after.mtime == seen.mtime {
        return Ok(());
    }
    // A write went into the old file between the check and the rename:
    // its text is the outside version. Put it back.
    let mut outside = Vec::new();
    use std::io::Seek as _;
    let read = base.rewind().and_then(|()| base.read_to_end(&mut outside));
    match read {
        Ok(_) => {
            replace_checked(path, target, &outside, &|| Ok(()))?;
            tracing::warn!(target: "foveal::memex::write::disk",
                path = %path.display(),
                "an outside write raced a memex edit; the outside version was put back"
            );
        }
        Err(error) => tracing::error!(target: "foveal::memex::write::disk",
            path = %path.display(),
            "an outside write raced a memex edit and could not be read back: {error}"
        ),
    }
    Err(conflict())
}

/// Replaces `target` (the resolved `path`) with `bytes`: a temporary file in
/// its folder, with its permissions, fsynced, renamed over it; then the
/// folder fsynced. `before_rename` is asked last: an error from it leaves
/// the file as it was.
fn replace_checked(
    path: &Path,
    target: &Path,
    bytes: &[u8],
    before_rename: &dyn Fn() -> Result<(), WriteError>,
) -> Result<(), WriteError> {
    let io = |action: &'static str| {
        move |source| WriteError::Io {
            path: path.to_owned(),
            action,
            source,
        }
    };
    let dir = target.parent().unwrap_or(Path::new("."));
    let meta = fs::metadata(target).map_err(io("read its permissions"))?;
    // Refuse a file we may not write, as an editor would: replacing it by
    // rename would succeed where writing to it does not. Opening to append
    // changes nothing.
    fs::OpenOptions::new()
        .append(true)
        .open(target)
        .map_err(io("open it for writing"))?;

    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (temp, mut file) = loop {
        // Hidden, so the memex and its watcher ignore it.
        let temp = dir.join(format!(
            ".{name}.{}-{}.foveal-tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
        {
            Ok(file) => break (temp, file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io("create a temporary file beside it")(e)),
        }
    };
    let written = (|| {
        file.set_permissions(meta.permissions())
            .map_err(io("give the temporary file its permissions"))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt as _;
            // Best effort: only root may give a file to another user.
            let _ = std::os::unix::fs::fchown(&file, Some(meta.uid()), Some(meta.gid()));
        }
        file.write_all(bytes)
            .map_err(io("write the temporary file"))?;
        file.sync_all()
            .map_err(io("flush the temporary file to disk"))?;
        drop(file);
        #[cfg(test)]
        pause(&PAUSE_BEFORE_CHECK);
        before_rename()?;
        #[cfg(test)]
        pause(&PAUSE_BEFORE_RENAME);
        fs::rename(&temp, target).map_err(io("rename the temporary file over it"))
    })();
    if let Err(error) = written {
        let _ = fs::remove_file(&temp);
        return Err(error);
    }
    // The rename is done: the file has its new text. A failed folder sync
    // only weakens durability across a crash, so it is a warning.
    #[cfg(unix)]
    if let Err(error) = fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(target: "foveal::memex::write::disk",
            "memex write of {}: the folder was not synced ({error}); the edit may not survive a crash",
            path.display()
        );
    }
    Ok(())
}

/// Removes `path` if it is a write-back's temporary copy
/// (`.NAME.<pid>-<n>.foveal-tmp`) whose process has ended: a crash between
/// writing the copy and renaming it leaves one behind. The log says so.
pub(crate) fn remove_if_stale(path: &Path) {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return;
    };
    let Some(stem) = name
        .strip_prefix('.')
        .and_then(|n| n.strip_suffix(".foveal-tmp"))
    else {
        return;
    };
    let Some(pid) = stem
        .rsplit_once('.')
        .and_then(|(_, tail)| tail.split_once('-'))
        .and_then(|(pid, n)| n.parse::<u64>().ok().and(pid.parse::<u32>().ok()))
    else {
        return;
    };
    if pid == std::process::id() || process_alive(pid) {
        return;
    }
    match fs::remove_file(path) {
        Ok(()) => tracing::info!(target: "foveal::memex::write::disk",
            path = %path.display(),
            pid,
            "removed a temporary copy left by a write-back of a process that ended"
        ),
        Err(error) => tracing::warn!(target: "foveal::memex::write::disk",
            path = %path.display(),
            "a stale temporary copy could not be removed: {error}"
        ),
    }
}

/// Milliseconds to wait before the last check, and between it and the
/// rename: the race tests widen the windows an outside write could hit.
#[cfg(test)]
pub(super) static PAUSE_BEFORE_CHECK: AtomicU64 = AtomicU64::new(0);
#[cfg(test)]
pub(super) static PAUSE_BEFORE_RENAME: AtomicU64 = AtomicU64::new(0);

#[cfg(test)]
fn pause(ms: &AtomicU64) {
    let ms = ms.load(Ordering::Relaxed);
    if ms > 0 {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// Whether process `pid` is alive, for removing files a dead process left
/// (a stale write lock here, a stale shadow copy in the host's loader).
/// Without a cheap portable check (outside Linux) the answer is yes: it
/// is worse to remove a live process's file than to keep a stale one.
pub fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new("/proc").join(pid.to_string()).exists()
    } else {
        true
    }
}
