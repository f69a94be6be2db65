//! The focus by position: the object at a line of a memex file, as an
//! editor knows it (`{"cmd": "focus", "file": …, "line": N}` on the
//! control socket; `foveal-focus-here` in Emacs).
//!
//! The object is the one whose headline is the nearest at or above the
//! line — also a headline without `:ID:`, whose id the memex derives
//! ([`foveal_memex::file::derived_id`]). A private object (its tags, an
//! ancestor's, its file's) is refused with exactly the answer a missing
//! one gets — as is a line above the first headline, or a file that is
//! not in the memex — so the answer never tells a private object apart
//! from nothing.
//!
//! # Example
//!
//! ```no_run
//! # use std::path::Path;
//! # use foveal_memex::{Memex, privacy::PrivacyTags};
//! let memex = Memex::open(&["/home/ada/memex".into()]).unwrap();
//! let privacy = PrivacyTags::new(["@personal"]);
//! let snapshot = memex.snapshot();
//! let object = foveal_agent::focus::object_at(
//!     &snapshot,
//!     &privacy,
//!     Path::new("/home/ada/memex/work.org"),
//!     12,
//! );
//! println!("{:?}", object.map(|o| o.id()));
//! ```

use std::path::{Path, PathBuf};

use foveal_memex::MemexSnapshot;
use foveal_memex::privacy::PrivacyTags;
use foveal_memex::snapshot::ObjectRef;

/// Why no object was found at a position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PositionError {
    /// No visible object there: the file is not in the memex, the line is
    /// above its first headline, or the object there is private — one
    /// answer for all three.
    #[error(
        "no visible object at {}:{line} (the memex headline at or above that line)",
        file.display()
    )]
    NoObject {
        /// The file, as the client named it.
        file: PathBuf,
        /// The line.
        line: u32,
    },
    /// The file is not named by an absolute path (the host's working
    /// folder is not the client's).
    #[error("the file must be an absolute path, not {}", .0.display())]
    Relative(PathBuf),
    /// Lines start at 1.
    #[error("lines start at 1")]
    LineZero,
}

/// The visible object whose headline is the nearest at or above `line`
/// (1-based) of `file`, or [`PositionError::NoObject`] — the same answer
/// for a private object as for none.
pub fn object_at<'s>(
    snapshot: &'s MemexSnapshot,
    privacy: &PrivacyTags,
    file: &Path,
    line: u32,
) -> Result<ObjectRef<'s>, PositionError> {
    if !file.is_absolute() {
        return Err(PositionError::Relative(file.to_owned()));
    }
    if line == 0 {
        return Err(PositionError::LineZero);
    }
    let none = || PositionError::NoObject {
        file: file.to_owned(),
        line,
    };
    // The path as the client has it; else the file it names (the memex
    // roots are canonical, a client's path may pass through a link).
    let loaded = match snapshot.file(file) {
        Some(loaded) => loaded,
        None => file
            .canonicalize()
            .ok()
            .and_then(|real| snapshot.file(&real))
            .ok_or_else(none)?,
    };
    // Headlines are in document order: their lines only grow.
    let after = loaded
        .objects
        .partition_point(|object| object.headline.line <= line);
    let index = after.checked_sub(1).ok_or_else(none)?;
    let id = loaded.id(u32::try_from(index).map_err(|_| none())?);
    let object = snapshot.get(id).ok_or_else(none)?;
    if privacy.is_private(object) {
        return Err(none());
    }
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use foveal_memex::Memex;

    const WORK: &str = "#+TITLE: Work
Some preamble.
* Launch :project:
:PROPERTIES:
:ID: launch
:END:
Ship it.
** Write docs
Without an id.
* Health :@personal:
Blood pressure.
** Doctor
Also private: the parent is.
* After
";

    fn memex(dir: &Path) -> Memex {
        std::fs::write(dir.join("work.org"), WORK).unwrap();
        std::fs::write(dir.join("diary.org"), "#+FILETAGS: :@personal:\n* Sunday\n").unwrap();
        Memex::open(&[dir.to_owned()]).unwrap()
    }

    #[test]
    fn the_object_is_the_headline_nearest_at_or_above_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let memex = memex(&root);
        let snapshot = memex.snapshot();
        let privacy = PrivacyTags::new(["@personal"]);
        let work = root.join("work.org");
        let at = |line| object_at(&snapshot, &privacy, &work, line).map(|o| o.id().to_owned());
        assert_eq!(at(3).unwrap(), "launch", "the headline's own line");
        assert_eq!(at(7).unwrap(), "launch", "its body");
        let docs = at(8).unwrap();
        assert!(docs.starts_with("org-"), "a derived id: {docs}");
        assert_eq!(at(9).unwrap(), docs);
        assert_eq!(
            snapshot.get(&docs).unwrap().title(),
            "Write docs",
            "the headline without :ID:"
        );
        assert_eq!(at(14).unwrap(), at(999).unwrap(), "past the end: the last");
        assert_eq!(
            at(1).unwrap_err(),
            PositionError::NoObject {
                file: work.clone(),
                line: 1
            }
        );
    }

    #[test]
    fn a_private_object_is_refused_exactly_as_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let memex = memex(&root);
        let snapshot = memex.snapshot();
        let privacy = PrivacyTags::new(["@personal"]);
        let message = |file: &Path, line| {
            object_at(&snapshot, &privacy, file, line)
                .map(|o| o.id().to_owned())
                .unwrap_err()
                .to_string()
        };
        let work = root.join("work.org");
        let missing = message(&work, 1);
        // The private headline, its child (private by inheritance), a
        // file private by its file tags, a file not in the memex: each
        // answers as the line with no headline does, but for the position
        // the client named itself.
        for (file, line) in [
            (work.clone(), 10),
            (work.clone(), 12),
            (root.join("diary.org"), 2),
            (root.join("nowhere.org"), 2),
        ] {
            let expected = missing
                .replace(&work.display().to_string(), &file.display().to_string())
                .replace(":1 ", &format!(":{line} "));
            assert_eq!(message(&file, line), expected);
        }
        assert!(!missing.contains("Health") && !missing.contains("private"));
    }

    #[test]
    fn a_path_through_a_link_finds_the_file_and_a_relative_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let memex_dir = root.join("memex");
        std::fs::create_dir(&memex_dir).unwrap();
        let memex = memex(&memex_dir);
        std::os::unix::fs::symlink(&memex_dir, root.join("link")).unwrap();
        let snapshot = memex.snapshot();
        let privacy = PrivacyTags::new(["@personal"]);
        let linked = root.join("link/work.org");
        assert_eq!(
            object_at(&snapshot, &privacy, &linked, 4).unwrap().id(),
            "launch"
        );
        assert!(matches!(
            object_at(&snapshot, &privacy, Path::new("work.org"), 4),
            Err(PositionError::Relative(_))
        ));
        assert_eq!(
            object_at(&snapshot, &privacy, &linked, 0).unwrap_err(),
            PositionError::LineZero
        );
    }
}
