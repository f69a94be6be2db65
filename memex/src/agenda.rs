//! The agenda of a memex: Org's dates of its visible objects, by
//! `org-agenda-list`'s rules ([`foveal_org::agenda`]).
//!
//! Only the objects each file marked as dated at load ([`MemexFile::dated`])
//! are read, so the cost follows the dated objects, not the memex. A
//! private object (its own, an ancestor's or its file's privacy tag) is
//! never read at all; a `COMMENT`ed or `ARCHIVE`-tagged subtree, and a file
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
        if file.file_tags.iter().any(|t| t == "ARCHIVE") {
            continue;
        }
        for &index in &file.dated {
            let object = ObjectRef::new(file, index);
            if privacy.is_private(object) || skipped(file, object) {
                continue;
            }
            let headline = &file.objects[index as usize].headline;
            if let Some(item) = Item::of(&file.text, headline, n as u32) {
                items.push(item);
                objects.push(object);
            }
        }
    }
    agenda::agenda(&items, today, days, options)
        .into_iter()
        .map(|e| (e, objects[e.item]))
        .collect()
}

/// Whether Org's agenda leaves the object out: it or an ancestor is
/// `COMMENT`ed or tagged `ARCHIVE`.
fn skipped(file: &MemexFile, object: ObjectRef<'_>) -> bool {
    std::iter::once(object).chain(object.ancestors()).any(|o| {
        file.objects[o.index() as usize].headline.commented || o.tags().any(|t| t == "ARCHIVE")
    })
}
