//! Privacy tags (seed 000 `bouncer-privacy-tags`): which objects are private.
//!
//! An object is private when it carries a privacy tag or any of its
//! ancestors does — at every depth — or when its file does: Org's file
//! tags (`#+FILETAGS: :@personal:`) are inherited by every headline of the
//! file, and a file private as a whole is private from its first byte (the
//! text before its first headline included). (The seed checked top-level
//! projects only, so a nested `@personal` headline leaked.) Tags match with
//! or without surrounding colons, case-insensitively. A file whose setup
//! file cannot be read, and was never read, is private as a whole until it
//! reads ([`crate::setup`]).
//!
//! # Example
//!
//! ```
//! use foveal_memex::privacy::PrivacyTags;
//!
//! let tags = PrivacyTags::new([":@Personal:"]);
//! assert!(tags.matches("@personal"));
//! assert!(!tags.matches("personal"));
//! ```

use crate::file::MemexFile;
use crate::snapshot::ObjectRef;

/// A normalised set of privacy tags.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PrivacyTags {
    tags: Vec<String>,
}

impl PrivacyTags {
    /// The tags, normalised: colons stripped, lowercased, empties dropped.
    pub fn new<I, S>(tags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut tags: Vec<String> = tags
            .into_iter()
            .map(|t| t.as_ref().trim().trim_matches(':').to_lowercase())
            .filter(|t| !t.is_empty())
            .collect();
        tags.sort();
        tags.dedup();
        Self { tags }
    }

    /// Whether `tag` is a privacy tag.
    pub fn matches(&self, tag: &str) -> bool {
        let tag = tag.trim_matches(':');
        // The tags are lowercased: an ASCII tag compares without an
        // allocation; only a non-ASCII one is lowercased (once) to compare.
        if tag.is_ascii() {
            return self.tags.iter().any(|t| t.eq_ignore_ascii_case(tag));
        }
        let lower = tag.to_lowercase();
        self.tags.contains(&lower)
    }

    /// The tags, normalised (lower case, no colons).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tags.iter().map(String::as_str)
    }

    /// Whether there is no privacy tag at all.
    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
    }

    /// Whether the whole of `file` is private: one of its file tags
    /// (`#+FILETAGS:`, its setup files' too) is a privacy tag, or the file
    /// tags of a setup file it names are unknown — it could not be read,
    /// and was never read before ([`crate::setup::Setup::tags_unknown`]):
    /// a setup file that cannot be read never makes a file public.
    pub fn file_is_private(&self, file: &MemexFile) -> bool {
        !self.is_empty()
            && (file.setup.tags_unknown() || file.file_tags.iter().any(|t| self.matches(t)))
    }

    /// Whether `object` is private: it, an ancestor or its file carries a
    /// privacy tag.
    pub fn is_private(&self, object: ObjectRef<'_>) -> bool {
        !self.is_empty()
            && (self.file_is_private(object.file())
                || std::iter::once(object)
                    .chain(object.ancestors())
                    .any(|o| o.tags().any(|t| self.matches(t))))
    }

    /// Whether a file that was read but not loaded (not UTF-8, or not
    /// parsable), with this `text`, is private as a whole: its structure
    /// is unknown, so when its text names a privacy tag anywhere, it is
    /// (fail closed: a diary caught half-written keeps its protection).
    /// The privacy gate and the local listings (`foveal memex`) both ask
    /// this.
    pub fn failed_text_is_private(&self, text: &str) -> bool {
        if self.is_empty() {
            return false;
        }
        let lower = text.to_lowercase();
        self.names().any(|tag| lower.contains(tag))
    }

    /// For each object of `file`, whether it is private: it, an ancestor
    /// or the file carries a privacy tag. One pass, since parents precede
    /// children.
    pub fn private_mask(&self, file: &MemexFile) -> Vec<bool> {
        if self.file_is_private(file) {
            return vec![true; file.objects.len()];
        }
        let mut mask = Vec::with_capacity(file.objects.len());
        for object in &file.objects {
            let inherited = object.headline.parent.is_some_and(|p| mask[p as usize]);
            mask.push(inherited || object.headline.tags(&file.text).any(|t| self.matches(t)));
        }
        mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn a_tag_matches_in_any_case_with_or_without_colons_ascii_or_not() {
        let tags = PrivacyTags::new(["@Personal", ":Tagebuch:", "Ärztlich"]);
        for yes in [
            "@personal",
            "@PERSONAL",
            ":@personal:",
            "tagebuch",
            "TAGEBUCH",
            "ärztlich",
            "ÄRZTLICH",
            ":Ärztlich:",
        ] {
            assert!(tags.matches(yes), "{yes}");
        }
        for no in ["personal", "@personal2", "arztlich", "tage", ""] {
            assert!(!tags.matches(no), "{no}");
        }
        assert!(!PrivacyTags::new(Vec::<String>::new()).matches("@personal"));
    }

    #[test]
    fn privacy_is_inherited_at_every_depth() {
        let text = "* Work :project:\n** Diary :@personal:\n*** Deep\n**** Deeper\n** Public\n* Home :@PERSONAL:\n";
        let file = MemexFile::parse(Path::new("a.org"), "a.org", text.to_owned()).unwrap();
        let mask = PrivacyTags::new(["@personal"]).private_mask(&file);
        assert_eq!(mask, [false, true, true, true, false, true]);
        assert!(
            PrivacyTags::new(Vec::<String>::new())
                .private_mask(&file)
                .iter()
                .all(|p| !p)
        );
    }

    #[test]
    fn file_tags_make_every_headline_private() {
        for line in [
            "#+FILETAGS: :@personal:",
            "#+filetags: :work:@Personal:",
            "  #+FILETAGS: work @personal",
            "#+FILETAGS: :work:\n#+FILETAGS: :@personal:",
        ] {
            let text = format!("{line}\nDiary preamble.\n* Monday\n** Deep\n* Tuesday\n");
            let file = MemexFile::parse(Path::new("d.org"), "d.org", text).unwrap();
            let tags = PrivacyTags::new(["@personal"]);
            assert!(tags.file_is_private(&file), "{line}");
            assert_eq!(tags.private_mask(&file), [true, true, true], "{line}");
        }
        let text = "#+FILETAGS: :work:personal:\n* Monday\n".to_owned();
        let file = MemexFile::parse(Path::new("d.org"), "d.org", text).unwrap();
        let tags = PrivacyTags::new(["@personal"]);
        assert!(!tags.file_is_private(&file));
        assert_eq!(tags.private_mask(&file), [false]);
        assert_eq!(file.file_tags, ["work", "personal"]);
    }
}
