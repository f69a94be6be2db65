//! The agenda of a memex: Org's dates of its visible objects, by
//! `org-agenda-list`'s rules ([`foveal_org::agenda`]).
//!
//! Each file read its dated objects' planning lines and timestamps at load
//! ([`MemexFile::agenda`]), so the cost follows the dated objects, not the
//! memex. A private object (its own, an ancestor's or its file's privacy
//! tag) never reaches an agenda; a `COMMENT`ed or `ARCHIVE`-tagged subtree, and a file
//! tagged `ARCHIVE`, are left out as Org's agenda leaves them out.

use foveal_org::agenda::{self, Entry, Item, Options};
use foveal_org::time::Date;

use crate::MemexFile;
use crate::privacy::PrivacyTags;
use crate::snapshot::{MemexSnapshot, ObjectRef};

/// The agenda of `days` days from `today` over the visible objects of
/// `snapshot`, files in path order (Org's `org-agenda-files` order), each
/// entry with its object.
pub fn agenda<'s>(
    snapshot: &'s MemexSnapshot,
    privacy: &PrivacyTags,
    today: Date,
    days: u32,
    options: &Options,
) -> Vec<(Entry, ObjectRef<'s>)> {
    let mut items = Vec::new();
    let mut objects = Vec::new();
    for (n, file) in snapshot.files().enumerate() {
        if file.agenda.is_empty()
            || file.file_tags.iter().any(|t| t == "ARCHIVE")
            || privacy.file_is_private(file)
        {
            continue;
        }
        let mut hidden = Hidden::new(file, privacy);
        for (index, item) in &file.agenda {
            if hidden.get(file, *index) {
                continue;
            }
            items.push(Item {
                file: n as u32,
                ..item.clone()
            });
            objects.push(ObjectRef::new(file, *index));
        }
    }
    agenda::agenda(&items, today, days, options)
        .into_iter()
        .map(|e| (e, objects[e.item]))
        .collect()
}

/// Which objects of a file the agenda must not read, beyond the
/// `COMMENT`ed subtrees the file's dated index already leaves out: those
/// under a privacy tag (their own or an ancestor's; the file's is checked
/// before) or an `ARCHIVE` tag. Found from the file's tag index — the
/// subtrees of the few objects carrying those tags — so the cost follows
/// them and the dated objects, not the file.
struct Hidden {
    /// Subtree byte ranges, sorted by start.
    subtrees: Vec<(u32, u32)>,
    /// The next subtree not yet entered.
    next: usize,
    /// The furthest end of the subtrees entered.
    open_end: u32,
}

impl Hidden {
    fn new(file: &MemexFile, privacy: &PrivacyTags) -> Self {
        let mut subtrees: Vec<(u32, u32)> = Vec::new();
        let mut add = |index: u32| {
            let span = &file.objects[index as usize].headline.subtree;
            subtrees.push((span.start, span.end));
        };
        for tag in privacy.names() {
            file.with_tag(tag).iter().copied().for_each(&mut add);
        }
        // Org's ARCHIVE tag is case-sensitive; the index is lowercased.
        for &index in file.with_tag("archive") {
            let headline = &file.objects[index as usize].headline;
            if headline.tags(&file.text).any(|t| t == "ARCHIVE") {
                add(index);
            }
        }
        subtrees.sort_unstable();
        Hidden {
            subtrees,
            next: 0,
            open_end: 0,
        }
    }

    /// Whether object `index` is hidden; asked in increasing order.
    fn get(&mut self, file: &MemexFile, index: u32) -> bool {
        let at = file.objects[index as usize].headline.own.start;
        while let Some(&(start, end)) = self.subtrees.get(self.next)
            && start <= at
        {
            self.open_end = self.open_end.max(end);
            self.next += 1;
        }
        at < self.open_end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_or_commented_is_private_or_skipped_exactly() {
        let text = "* A :@personal:\n** B\n*** C :x:\n* COMMENT D\n** E\n* F :ARCHIVE:\n** G\n\
                    * H\n** I :@Personal:\n*** J\n** K :archive:\n*** L\n* M :x:ARCHIVE:\n\
                    * N :ÄRGER:\n** O\n* P :ärger2:\n* Q :KELVIN:\n";
        let file = MemexFile::parse(std::path::Path::new("t.org"), "t.org", text.into()).unwrap();
        let snapshot = MemexSnapshot::default().with_file(std::sync::Arc::new(file));
        let file = snapshot.files().next().unwrap();
        // A non-ASCII tag, and one whose `K` is the Kelvin sign.
        let privacy = PrivacyTags::new(["@personal", ":Ärger:", "\u{212A}elvin"]);
        let mut hidden = Hidden::new(file, &privacy);
        for index in 0..file.objects.len() as u32 {
            let object = ObjectRef::new(file, index);
            let skipped = std::iter::once(object).chain(object.ancestors()).any(|o| {
                file.objects[o.index() as usize].headline.commented
                    || o.tags().any(|t| t == "ARCHIVE")
            });
            let commented = std::iter::once(object)
                .chain(object.ancestors())
                .any(|o| file.objects[o.index() as usize].headline.commented);
            // COMMENT subtrees are out of the dated index already.
            assert_eq!(
                hidden.get(file, index) || commented,
                privacy.is_private(object) || skipped,
                "{}",
                object.title()
            );
        }
    }
}
