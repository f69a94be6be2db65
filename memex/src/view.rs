//! Building the skills' view of the memex (`foveal_sdk::memex`).
//!
//! For each version of a file (and privacy configuration) the host
//! prepares, once, what a skill may be lent of it ([`Prepared`]):
//!
//! - its **visible text**: the file's text with every private subtree cut
//!   out (the headline line to the next headline not under it) and the
//!   `:EMBEDDING:` values dropped (the vectors are in the index). A file
//!   private as a whole (`#+FILETAGS:` with a privacy tag) is not lent at
//!   all, not even its name. No byte of a private object is in what a
//!   skill can reach: not through an accessor, not through the public
//!   `text` field, not by reading past a range;
//! - its **index** ([`FileIndex`]): the visible objects as offsets into the
//!   visible text, with every parent, child and tag reference renumbered;
//! - its **settings** as lent ([`Prepared::keywords`],
//!   [`Prepared::file_tags`]): Org reads a `#+TODO:` or `#+FILETAGS:` line
//!   wherever it is, so one in a private body gives the whole file its
//!   words — which are that body's text. What a skill or a tool is told
//!   of the file's keywords and file tags is read from the visible text
//!   (with its setup files), as if the private objects were not there.
//!
//! Both are cached on the file, so a change to one file rebuilds only its
//! own; a hook call then costs one small array of [`FileView`]s, one per
//! lent file, borrowing the prepared files of the snapshot it runs on.
//!
//! # Example
//!
//! ```
//! use foveal_memex::{Memex, privacy::PrivacyTags, view::SnapshotView};
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(
//!     dir.path().join("a.org"),
//!     "* Work :project:\n* Diary :@personal:\nDear diary.\n* Home\n",
//! )
//! .unwrap();
//! let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
//! let snapshot = memex.snapshot();
//! let view = SnapshotView::new(&snapshot, &PrivacyTags::new(["@personal"]));
//! let memex_view = view.view();
//! let file = &memex_view.files[0];
//! assert_eq!(file.len(), 2);
//! assert_eq!(file.title(1), "Home");
//! assert_eq!(file.text.as_str(), "* Work :project:\n* Home\n");
//! ```

use std::ops::Range;
use std::sync::Arc;

use abi_stable::std_types::{RSlice, RStr, RString, RVec};
use foveal_sdk::memex::{
    FileIndex, FileView, IdEntry, MemexView, NONE, ObjectRecord, Range32, TagEntry,
};

use crate::file::{IdSource, MemexFile};
use crate::parse::TodoKeywords;
use crate::privacy::PrivacyTags;
use crate::snapshot::MemexSnapshot;

/// What a skill may be lent of one file version: its visible text and the
/// index into it. Its `Debug` form gives sizes, never the text.
pub struct Prepared {
    /// The visible objects, as offsets into [`text`](Self::text).
    pub index: FileIndex,
    /// The visible text, when it differs from the file's text.
    visible: Option<Box<str>>,
    /// Whether the file is lent at all (not when private as a whole).
    lent: bool,
    /// The TODO keywords and file tags as lent, when a private object
    /// holds an in-buffer setting line (else the file's own).
    settings: Option<Box<LentSettings>>,
}

/// A file's TODO keywords and file tags read from its visible text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LentSettings {
    keywords: TodoKeywords,
    file_tags: Vec<String>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("objects", &self.index.objects.len())
            .field("visible_bytes", &self.visible.as_ref().map(|t| t.len()))
            .field("lent", &self.lent)
            .field("settings_reread", &self.settings.is_some())
            .finish()
    }
}

impl Prepared {
    /// The visible text of `file` (the file this was prepared from).
    pub fn text<'a>(&'a self, file: &'a MemexFile) -> &'a str {
        self.visible.as_deref().unwrap_or(&file.text)
    }

    /// Whether the file is lent to skills (not when private as a whole).
    pub fn is_lent(&self) -> bool {
        self.lent
    }

    /// The TODO keywords of `file` (the file this was prepared from) as
    /// skills and tools may be told them: none that only a setting line
    /// inside a private object declares.
    pub fn keywords<'a>(&'a self, file: &'a MemexFile) -> &'a TodoKeywords {
        self.settings
            .as_ref()
            .map_or(&file.keywords, |s| &s.keywords)
    }

    /// The file tags of `file` as skills may be told them: none that only
    /// a `#+FILETAGS:` line inside a private object gives.
    pub fn file_tags<'a>(&'a self, file: &'a MemexFile) -> &'a [String] {
        self.settings
            .as_ref()
            .map_or(&file.file_tags, |s| &s.file_tags)
    }
}

/// Whether a private object of `file` holds an in-buffer setting line
/// (`#+TODO:`, `#+FILETAGS:`, `#+TAGS:`, `#+SETUPFILE:`, …), which Org
/// reads wherever it is.
fn private_settings(file: &MemexFile, mask: &[bool]) -> bool {
    file.objects
        .iter()
        .zip(mask)
        .filter(|(_, private)| **private)
        .any(|(object, _)| {
            let mut setup_line = false;
            let read =
                crate::parse::collect_settings(file.slice(&object.headline.own), &mut |_, _| {
                    setup_line = true;
                    None
                });
            setup_line || read != crate::parse::Settings::default()
        })
}

/// The byte ranges of `file` that are not lent, in order, adjacent ones
/// merged: each private object's own text (together, its subtree) and
/// each visible object's `:EMBEDDING:` values.
fn cuts(file: &MemexFile, mask: &[bool]) -> Vec<Range<u32>> {
    let mut cuts: Vec<Range<u32>> = Vec::new();
    let mut cut = |range: Range<u32>| {
        if range.is_empty() {
            return;
        }
        match cuts.last_mut() {
            Some(last) if last.end == range.start => last.end = range.end,
            _ => cuts.push(range),
        }
    };
    for (object, private) in file.objects.iter().zip(mask) {
        let h = &object.headline;
        if *private {
            cut(h.own.clone());
            continue;
        }
        for property in &h.properties {
            if file.slice(&property.key).eq_ignore_ascii_case("EMBEDDING") {
                cut(property.value.clone());
            }
        }
    }
    cuts
}

/// `text` without the `cuts` (sorted, disjoint).
fn cut_text(text: &str, cuts: &[Range<u32>]) -> Box<str> {
    let removed: usize = cuts.iter().map(|c| (c.end - c.start) as usize).sum();
    let mut out = String::with_capacity(text.len() - removed);
    let mut at = 0usize;
    for c in cuts {
        out.push_str(&text[at..c.start as usize]);
        at = c.end as usize;
    }
    out.push_str(&text[at..]);
    out.into_boxed_str()
}

/// Maps offsets of a file's text to offsets of its visible text, object by
/// object in file order: O(1) a range.
struct Shift<'c> {
    cuts: &'c [Range<u32>],
    /// Cuts that end at or before the current object's start…
    passed: usize,
    /// …and their total length.
    removed: u32,
}

impl Shift<'_> {
    /// Moves to an object that starts at `start` (objects come in order).
    fn enter(&mut self, start: u32) {
        while let Some(c) = self.cuts.get(self.passed)
            && c.end <= start
        {
            self.removed += c.end - c.start;
            self.passed += 1;
        }
    }

    /// Where `pos`, in the current object and not inside a cut, is in the
    /// visible text.
    fn at(&self, pos: u32) -> u32 {
        let inside: u32 = self.cuts[self.passed..]
            .iter()
            .take_while(|c| c.end <= pos)
            .map(|c| c.end - c.start)
            .sum();
        pos - self.removed - inside
    }

    fn range(&self, span: &Range<u32>) -> Range32 {
        let start = self.at(span.start);
        Range32 {
            start,
            len: span.end - span.start,
        }
    }
}

/// The visible text of `file`: none when the file is private as a whole,
/// the file's own text when nothing is cut from it.
pub fn visible_text<'f>(
    file: &'f MemexFile,
    privacy: &PrivacyTags,
) -> Option<std::borrow::Cow<'f, str>> {
    if privacy.file_is_private(file) {
        return None;
    }
    let cuts = cuts(file, &privacy.private_mask(file));
    Some(if cuts.is_empty() {
        std::borrow::Cow::Borrowed(file.text.as_str())
    } else {
        std::borrow::Cow::Owned(cut_text(&file.text, &cuts).into_string())
    })
}

/// Prepares what a skill may be lent of `file`: the visible text and the
/// index into it, without a byte of its private objects.
pub fn prepare(file: &MemexFile, privacy: &PrivacyTags) -> Prepared {
    if privacy.file_is_private(file) {
        return Prepared {
            index: FileIndex::default(),
            visible: Some(Box::from("")),
            lent: false,
            settings: None,
        };
    }
    let mask = privacy.private_mask(file);
    let cuts = cuts(file, &mask);
    let visible = (!cuts.is_empty()).then(|| cut_text(&file.text, &cuts));
    // The settings again, from the visible text, when a private object
    // holds a setting line; their `#+SETUPFILE:` lines are answered as
    // the file's reading answered them.
    let settings = private_settings(file, &mask).then(|| {
        let read = crate::setup::reuse(visible.as_deref().unwrap_or(&file.text), &file.setup);
        Box::new(LentSettings {
            keywords: read.keywords(),
            file_tags: read.file_tags,
        })
    });
    let mut shift = Shift {
        cuts: &cuts,
        passed: 0,
        removed: 0,
    };
    let mut remap = vec![NONE; file.objects.len()];
    let mut visible_count = 0u32;
    for (i, private) in mask.iter().enumerate() {
        if !private {
            remap[i] = visible_count;
            visible_count += 1;
        }
    }
    let mut index = FileIndex {
        dim: file.dim as u32,
        ..FileIndex::default()
    };
    let mut tag_lists: std::collections::BTreeMap<String, Vec<u32>> = Default::default();
    let mut derived = String::new();
    for (i, object) in file.objects.iter().enumerate() {
        if mask[i] {
            continue;
        }
        let h = &object.headline;
        shift.enter(h.own.start);
        let me = remap[i];
        let id = match object.id_source {
            IdSource::Property => h
                .properties
                .iter()
                .find(|p| file.slice(&p.key).eq_ignore_ascii_case("ID"))
                .map(|p| shift.range(&p.value))
                .unwrap_or_default(),
            IdSource::Derived => {
                let id = object.id(&file.text);
                let start = derived.len() as u32;
                derived.push_str(id);
                Range32 {
                    start,
                    len: id.len() as u32,
                }
            }
        };
        // Tags: split the `:a:b:` token into ranges of the text.
        let tags_start = index.tags.len() as u32;
        let token = file.slice(&h.tags_token);
        let mut at = shift.at(h.tags_token.start);
        for part in token.split(':') {
            if !part.is_empty() {
                index.tags.push(Range32 {
                    start: at,
                    len: part.len() as u32,
                });
                let list = tag_lists.entry(part.to_lowercase()).or_default();
                if list.last() != Some(&me) {
                    list.push(me);
                }
            }
            at += part.len() as u32 + 1;
        }
        let children_start = index.children.len() as u32;
        for &child in &file.children[object.children.start as usize..object.children.end as usize] {
            let c = remap[child as usize];
            if c != NONE {
                index.children.push(c);
            }
        }
        let vector = match object.vector {
            Some(row) => {
                let row = row as usize;
                let new_row = (index.vectors.len() / file.dim.max(1)) as u32;
                let v = &file.vectors[row * file.dim..(row + 1) * file.dim];
                index.vectors.extend_from_slice(v);
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                index.norms.push(norm);
                let factor = foveal_sdk::memex::quantize(v, norm, &mut index.quantized);
                index.quant_factors.push(factor);
                new_row
            }
            None => NONE,
        };
        index.objects.push(ObjectRecord {
            id,
            id_derived: object.id_source == IdSource::Derived,
            done: h.done,
            level: h.level,
            line: h.line,
            title: shift.range(&h.title),
            todo: shift.range(&h.todo_span),
            body: shift.range(&h.body),
            tags: Range32 {
                start: tags_start,
                len: index.tags.len() as u32 - tags_start,
            },
            // A private parent makes its children private, so a visible
            // object's parent is visible.
            parent: h.parent.map_or(NONE, |p| remap[p as usize]),
            children: Range32 {
                start: children_start,
                len: index.children.len() as u32 - children_start,
            },
            vector,
            // Set below, once the subtree is known.
            end: NONE,
            hash: text_hash(file.slice(&h.own).as_bytes()),
        });
        if vector != NONE {
            index.vector_objects.push(me);
        }
    }
    set_subtree_ends(&mut index.objects);
    index.parents = index.objects.iter().map(|o| o.parent).collect();
    index.levels = index.objects.iter().map(|o| o.level).collect();
    index.vectors_hash = vectors_hash(index.dim, &index.vectors);
    let text = visible.as_deref().unwrap_or(&file.text);
    let mut ids: Vec<IdEntry> = (0..index.objects.len() as u32)
        .map(|i| {
            let o = &mut index.objects[i as usize];
            let id = if o.id_derived {
                &derived[o.id.range()]
            } else {
                &text[o.id.range()]
            };
            let hash = foveal_sdk::memex::id_hash(id);
            // A derived id is not in the object's text: fold it in.
            o.hash = mix(o.hash, hash);
            IdEntry { hash, index: i }
        })
        .collect();
    ids.sort_unstable();
    index.id_index = RVec::from(ids);
    index.derived_ids = RString::from(derived);
    index.tag_index = tag_lists
        .into_iter()
        .map(|(tag, objects)| TagEntry {
            tag: RString::from(tag),
            objects: RVec::from(objects),
        })
        .collect();
    Prepared {
        index,
        visible,
        lent: true,
        settings,
    }
}

/// The index of `file` without its private objects, into its visible
/// text ([`prepare`]).
pub fn file_index(file: &MemexFile, privacy: &PrivacyTags) -> FileIndex {
    prepare(file, privacy).index
}

/// Sets each object's `end`: one past the last object of its subtree. One
/// pass with a stack of the open ancestors. (A private object's subtree is
/// private, so visible subtrees are runs of visible objects.)
fn set_subtree_ends(objects: &mut [ObjectRecord]) {
    let mut open: Vec<u32> = Vec::new();
    for j in 0..objects.len() {
        let level = objects[j].level;
        while let Some(&top) = open.last() {
            if objects[top as usize].level < level {
                break;
            }
            objects[top as usize].end = j as u32;
            open.pop();
        }
        open.push(j as u32);
    }
    for top in open {
        objects[top as usize].end = objects.len() as u32;
    }
}

/// One step of the 64-bit hashes below: multiply-fold.
#[inline]
fn mix(h: u64, w: u64) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let m = u128::from(h ^ w) * u128::from(K);
    (m as u64) ^ ((m >> 64) as u64)
}

/// A 64-bit hash of a text, eight bytes a step.
fn text_hash(bytes: &[u8]) -> u64 {
    let mut h = mix(0x243f_6a88_85a3_08d3, bytes.len() as u64);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        h = mix(h, u64::from_le_bytes(word.try_into().unwrap_or_default()));
    }
    let mut last = [0u8; 8];
    last[..words.remainder().len()].copy_from_slice(words.remainder());
    mix(h, u64::from_le_bytes(last))
}

/// A 64-bit hash of `dim` and the bits of `vectors`, two floats a step
/// (≈ 2 ms for the 17 MB table of a 100k-headline file, once per version).
fn vectors_hash(dim: u32, vectors: &[f32]) -> u64 {
    let mut h = mix(u64::from(dim), vectors.len() as u64);
    let mut pairs = vectors.chunks_exact(2);
    for pair in &mut pairs {
        h = mix(
            h,
            u64::from(pair[0].to_bits()) | (u64::from(pair[1].to_bits()) << 32),
        );
    }
    for x in pairs.remainder() {
        h = mix(h, u64::from(x.to_bits()));
    }
    h
}

/// What `file` lends for `privacy`, prepared on first use and cached on
/// the file.
pub fn cached(file: &MemexFile, privacy: &PrivacyTags) -> Arc<Prepared> {
    let mut cache = file.view_cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(prepared) = lent(cache.as_deref(), privacy) {
        return prepared;
    }
    let prepared = Arc::new(prepare(file, privacy));
    *cache = Some(Arc::new((privacy.clone(), Arc::clone(&prepared)) as Lent));
    prepared
}

/// What a file's view cache holds for `privacy`, if anything.
fn lent(
    cache: Option<&(dyn std::any::Any + Send + Sync)>,
    privacy: &PrivacyTags,
) -> Option<Arc<Prepared>> {
    cache
        .and_then(|c| c.downcast_ref::<Lent>())
        .filter(|(tags, _)| tags == privacy)
        .map(|(_, prepared)| Arc::clone(prepared))
}

/// [`cached`] for each of `files`, in order: on every core when those not
/// prepared yet hold 4 MiB or more (a first view of a large memex: at a
/// million headlines, 1.5 s on one core). Each file's cache is looked at
/// once when all are prepared (a host's every cycle).
pub(crate) fn prepare_all(files: &[&Arc<MemexFile>], privacy: &PrivacyTags) -> Vec<Arc<Prepared>> {
    let found: Vec<Option<Arc<Prepared>>> = files
        .iter()
        .map(|f| {
            lent(
                f.view_cache
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_deref(),
                privacy,
            )
        })
        .collect();
    let unprepared: u64 = files
        .iter()
        .zip(&found)
        .filter(|(_, found)| found.is_none())
        .map(|(f, _)| f.text.len() as u64)
        .sum();
    if unprepared == 0 {
        return found.into_iter().flatten().collect();
    }
    crate::on_cores(files.len(), unprepared, |at| match &found[at] {
        Some(prepared) => Arc::clone(prepared),
        None => cached(files[at], privacy),
    })
}

/// What a file's view cache holds: the privacy tags and what was prepared
/// for them.
type Lent = (PrivacyTags, Arc<Prepared>);

/// The prepared files of one snapshot, ready to lend to hooks as a
/// [`MemexView`]. It holds the files it lends (shared), so it can go with
/// a hook call to a thread of its own and outlive an abandoned call.
#[derive(Debug, Clone)]
pub struct SnapshotView {
    generation: u64,
    prepared: Vec<(Arc<MemexFile>, Arc<Prepared>)>,
}

impl SnapshotView {
    /// Prepares (or takes from cache) every file; files private as a whole
    /// are left out.
    pub fn new(snapshot: &MemexSnapshot, privacy: &PrivacyTags) -> Self {
        let files: Vec<&Arc<MemexFile>> = snapshot.files().collect();
        Self {
            generation: snapshot.generation(),
            prepared: prepare_all(&files, privacy)
                .into_iter()
                .zip(files)
                .map(|(prepared, f)| (Arc::clone(f), prepared))
                .filter(|(_, prepared)| prepared.is_lent())
                .collect(),
        }
    }

    /// The generation of the snapshot this view shows.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The lent files with what each lends, in view order: for a host
    /// that lends them another way (a skill cell maps them from sealed
    /// memory files, once per [`Prepared`]).
    pub fn prepared(&self) -> impl Iterator<Item = (&Arc<MemexFile>, &Arc<Prepared>)> {
        self.prepared
            .iter()
            .map(|(file, prepared)| (file, prepared))
    }

    /// The lent files, in view order.
    pub fn files(&self) -> impl Iterator<Item = &MemexFile> {
        self.prepared.iter().map(|(file, _)| &**file)
    }

    /// When each lent file last changed on disk, in Unix seconds (0 when
    /// unknown), in view order: what the awareness map orders files by.
    /// (Passed in the skill's configuration: the ABI's records stay as
    /// they are.)
    pub fn modified(&self) -> impl Iterator<Item = i64> + '_ {
        self.files().map(|file| {
            file.modified
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs().min(i64::MAX as u64) as i64)
        })
    }

    /// The files as views; keep the returned vector alive while a
    /// [`MemexView`] borrows it.
    pub fn file_views(&self) -> Vec<FileView<'_>> {
        self.prepared
            .iter()
            .map(|(file, prepared)| FileView {
                path: RStr::from_str(file.path.to_str().unwrap_or("")),
                text: RStr::from_str(prepared.text(file)),
                index: &prepared.index,
            })
            .collect()
    }

    /// The view to hand to a hook, borrowing `files` (from
    /// [`file_views`](Self::file_views)).
    pub fn view_of<'v>(&self, files: &'v [FileView<'v>]) -> MemexView<'v> {
        MemexView {
            generation: self.generation,
            files: RSlice::from_slice(files),
        }
    }

    /// A self-contained view for tests and one-off uses.
    pub fn view(&self) -> OwnedView<'_> {
        OwnedView {
            generation: self.generation,
            files: self.file_views(),
        }
    }
}

/// Everything a `components` hook call is lent, owned, so that the call can
/// run on a thread of its own (the host registry's `Slot::call`) and
/// outlive the caller if it is abandoned.
#[derive(Debug, Clone)]
pub struct ComponentsCall {
    /// The memex as lent.
    pub view: SnapshotView,
    /// The signal the cycle answers.
    pub signal: foveal_sdk::SignalKind,
    /// The object in focus.
    pub focus: Option<String>,
    /// Tokens the section may use.
    pub budget: Option<u32>,
    /// The skill's configuration, as JSON.
    pub config: String,
    /// Fill sources and omissions.
    pub explain: bool,
    /// The host facts of the call (its session and time), which the
    /// skill reads through the host API while the hook runs
    /// ([`foveal_sdk::call`]) — never mixed into `config`.
    pub facts: foveal_sdk::call::CallFacts,
}

impl ComponentsCall {
    /// Calls the hook `f` with the request built from this.
    pub fn call(
        self,
        f: foveal_sdk::ComponentsFn,
    ) -> abi_stable::std_types::RResult<RVec<foveal_sdk::Component>, foveal_sdk::SkillError> {
        let files = self.view.file_views();
        let memex = self.view.view_of(&files);
        let request = foveal_sdk::ComponentsRequest {
            signal: self.signal,
            focus: self.focus.as_deref().map(RStr::from_str).into(),
            budget_tokens: self.budget.into(),
            config_json: self.config.as_str().into(),
            memex: &memex,
            explain: self.explain,
        };
        foveal_sdk::call::with_facts(&self.facts, || f(&request))
    }
}

/// A [`MemexView`]'s files held together with it.
#[derive(Debug)]
pub struct OwnedView<'a> {
    /// The generation.
    pub generation: u64,
    /// The files.
    pub files: Vec<FileView<'a>>,
}

impl<'a> OwnedView<'a> {
    /// The ABI view borrowing these files.
    pub fn as_view(&self) -> MemexView<'_> {
        MemexView {
            generation: self.generation,
            files: RSlice::from_slice(&self.files),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const TEXT: &str = "* Work :project:x:\n:PROPERTIES:\n:ID: work\n:EMBEDDING: 1 0\n:END:\nwork body\n** Diary :@personal:\n:PROPERTIES:\n:EMBEDDING: 0 1\n:END:\nsecret canary\n*** Deep secret\n** TODO Public :y:\n:PROPERTIES:\n:EMBEDDING: 0.5 0.5\n:END:\n* Home :@personal:\n";

    #[test]
    fn subtree_ends_packed_arrays_and_vector_owners_match_the_records() {
        let file = MemexFile::parse(Path::new("/m/a.org"), "a.org", TEXT.to_owned()).unwrap();
        let index = file_index(&file, &PrivacyTags::new(["@personal"]));
        // Work (0) holds Public (1); Diary and Home are private.
        let ends: Vec<u32> = index.objects.iter().map(|o| o.end).collect();
        assert_eq!(ends, [2, 2]);
        let parents: Vec<u32> = index.objects.iter().map(|o| o.parent).collect();
        assert_eq!(index.parents.as_slice(), parents.as_slice());
        assert_eq!(index.levels.as_slice(), &[1, 2]);
        assert_eq!(index.vector_objects.as_slice(), &[0, 1]);
        assert_eq!(index.quantized.len(), 2 * 2);
        assert_eq!(index.quant_factors.len(), 2);
        // Hashes differ between objects and survive a re-parse unchanged.
        assert_ne!(index.objects[0].hash, index.objects[1].hash);
        let again = MemexFile::parse(Path::new("/m/a.org"), "a.org", TEXT.to_owned()).unwrap();
        let again = file_index(&again, &PrivacyTags::new(["@personal"]));
        assert_eq!(again.objects[1].hash, index.objects[1].hash);
        assert_eq!(again.vectors_hash, index.vectors_hash);
        // An edit to a body changes that object's hash and not the vectors'.
        let edited = TEXT.replace("work body", "work body, edited");
        let edited = MemexFile::parse(Path::new("/m/a.org"), "a.org", edited).unwrap();
        let edited = file_index(&edited, &PrivacyTags::new(["@personal"]));
        assert_ne!(edited.objects[0].hash, index.objects[0].hash);
        assert_eq!(edited.objects[1].hash, index.objects[1].hash);
        assert_eq!(edited.vectors_hash, index.vectors_hash);
    }

    #[test]
    fn a_memex_that_prepares_views_builds_them_before_publishing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.org");
        std::fs::write(&path, TEXT).unwrap();
        let memex = crate::Memex::open(&[dir.path().to_path_buf()]).unwrap();
        let privacy = PrivacyTags::new(["@personal"]);
        memex.prepare_views(privacy.clone());
        std::fs::write(&path, TEXT.replace("work body", "new body")).unwrap();
        memex.reload_file(&path.canonicalize().unwrap());
        let snapshot = memex.snapshot();
        let file = snapshot.files().next().unwrap();
        let cached = file.view_cache.lock().unwrap();
        assert!(
            cached
                .as_deref()
                .and_then(|c| c.downcast_ref::<Lent>())
                .is_some_and(|(tags, _)| *tags == privacy),
            "the new version's view was not built at publish"
        );
    }

    #[test]
    fn private_objects_are_not_in_the_view_and_references_are_renumbered() {
        let file = MemexFile::parse(Path::new("/m/a.org"), "a.org", TEXT.to_owned()).unwrap();
        let prepared = prepare(&file, &PrivacyTags::new(["@personal"]));
        let view = FileView {
            path: RStr::from_str("a.org"),
            text: RStr::from_str(prepared.text(&file)),
            index: &prepared.index,
        };
        assert_eq!(view.len(), 2);
        assert_eq!((view.title(0), view.title(1)), ("Work", "Public"));
        assert_eq!(view.id(0), "work");
        assert!(view.id(1).starts_with("org-"));
        assert_eq!(view.children(0), [1]);
        assert_eq!(view.parent(1), Some(0));
        assert_eq!(view.tags(0).collect::<Vec<_>>(), ["project", "x"]);
        assert_eq!(view.tags(1).collect::<Vec<_>>(), ["y"]);
        assert_eq!(view.todo(1), Some("TODO"));
        assert_eq!(view.todo(0), None);
        assert_eq!(view.body(0), "work body\n");
        assert_eq!(view.body(1), "");
        assert_eq!(view.vector(0), Some(&[1.0, 0.0][..]));
        assert_eq!(view.vector(1), Some(&[0.5, 0.5][..]));
        assert_eq!(view.with_tag("PROJECT"), [0]);
        assert_eq!(view.find("work"), Some(0));
        assert_eq!(view.find(view.id(1)), Some(1));
        assert_eq!(view.find("nope"), None);
        assert!(view.with_tag("@personal").is_empty());
        // The text lent holds no byte of a private object, and no vector
        // as text.
        assert_eq!(
            view.text.as_str(),
            "* Work :project:x:\n:PROPERTIES:\n:ID: work\n:EMBEDDING: \n:END:\nwork body\n** TODO Public :y:\n:PROPERTIES:\n:EMBEDDING: \n:END:\n"
        );
        for word in ["Diary", "secret", "canary", "Home", "personal", "0.5"] {
            assert!(!view.text.as_str().contains(word), "{word}");
        }
    }

    #[test]
    fn ids_after_an_embedding_and_crlf_files_map_into_the_visible_text() {
        let text = "pre\r\n* A :@personal:\r\nsecret\r\n* B :t:\r\n:PROPERTIES:\r\n:EMBEDDING: 1 2\r\n:ID: b-id\r\n:END:\r\nbody b\r\n** C\r\n* D :@personal:\r\n";
        let file = MemexFile::parse(Path::new("/m/c.org"), "c.org", text.to_owned()).unwrap();
        let prepared = prepare(&file, &PrivacyTags::new(["@personal"]));
        let view = FileView {
            path: RStr::from_str("c.org"),
            text: RStr::from_str(prepared.text(&file)),
            index: &prepared.index,
        };
        assert_eq!(view.len(), 2);
        assert_eq!(view.id(0), "b-id");
        assert_eq!(view.title(0), "B");
        assert_eq!(view.tags(0).collect::<Vec<_>>(), ["t"]);
        assert_eq!(view.body(0), "body b\r\n");
        assert_eq!(view.title(1), "C");
        assert_eq!(view.find("b-id"), Some(0));
        assert!(!view.text.as_str().contains("secret"));
        assert!(view.text.as_str().starts_with("pre\r\n* B"));
    }

    #[test]
    fn a_file_private_as_a_whole_is_not_lent() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("diary.org"),
            "#+FILETAGS: :@personal:\nDear diary.\n* Monday\nSecret.\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("work.org"), "* Work\n").unwrap();
        let memex = crate::Memex::open(&[dir.path().to_path_buf()]).unwrap();
        let snapshot = memex.snapshot();
        let view = SnapshotView::new(&snapshot, &PrivacyTags::new(["@personal"]));
        let owned = view.view();
        assert_eq!(owned.files.len(), 1);
        assert!(owned.files[0].path.as_str().ends_with("work.org"));
        let open = SnapshotView::new(&snapshot, &PrivacyTags::new(Vec::<String>::new()));
        assert_eq!(open.view().files.len(), 2);
    }

    #[test]
    fn a_setting_line_in_a_private_body_is_not_lent_and_the_visible_ones_are() {
        let text = "#+TODO: TODO NEXT | DONE\n#+FILETAGS: :work:\n* Work\n** Diary :@personal:\n#+TODO: THERAPY | DONE\n  #+filetags: :therapy:\n* NEXT Public\n";
        let file = MemexFile::parse(Path::new("/m/a.org"), "a.org", text.to_owned()).unwrap();
        // Org reads both lines wherever they are: the file has their words.
        assert!(file.keywords.todo.contains(&"THERAPY".to_owned()));
        assert!(file.file_tags.contains(&"therapy".to_owned()));
        let prepared = prepare(&file, &PrivacyTags::new(["@personal"]));
        let keywords = prepared.keywords(&file);
        assert_eq!(
            (&keywords.todo[..], &keywords.done[..]),
            (
                &["TODO".to_owned(), "NEXT".to_owned()][..],
                &["DONE".to_owned()][..]
            )
        );
        assert_eq!(prepared.file_tags(&file), ["work"]);
        // Without a privacy tag nothing is private: the file's own.
        let open = prepare(&file, &PrivacyTags::new(Vec::<String>::new()));
        assert_eq!(open.keywords(&file), &file.keywords);
        assert_eq!(open.file_tags(&file), file.file_tags.as_slice());
        // A private object without setting lines: the file's own, shared.
        let plain = MemexFile::parse(Path::new("/m/b.org"), "b.org", TEXT.to_owned()).unwrap();
        let prepared = prepare(&plain, &PrivacyTags::new(["@personal"]));
        assert!(prepared.settings.is_none());
        assert!(std::ptr::eq(prepared.keywords(&plain), &plain.keywords));
    }

    #[test]
    fn the_index_is_cached_per_privacy_configuration() {
        let file = MemexFile::parse(Path::new("/m/a.org"), "a.org", TEXT.to_owned()).unwrap();
        let strict = PrivacyTags::new(["@personal"]);
        let a = cached(&file, &strict);
        let b = cached(&file, &strict);
        assert!(Arc::ptr_eq(&a, &b));
        let open = cached(&file, &PrivacyTags::new(Vec::<String>::new()));
        assert_eq!(open.index.objects.len(), 5);
    }
}
