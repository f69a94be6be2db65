//! The memex as a skill sees it: a borrowed, read-only, ABI-stable view.
//!
//! A skill may walk a 100,000-headline memex on every cycle, so nothing here
//! is copied per call and nothing calls back into the host per object. The
//! host prepares, once per version of each file, a flat [`FileIndex`]: one
//! [`ObjectRecord`] per headline with byte offsets into the file's text,
//! child lists as ranges of one index array, tags as ranges of one tag
//! array, and the embedding vectors in one contiguous table with a fixed
//! stride. A hook call receives a [`MemexView`] that borrows those indexes
//! and the file texts for the duration of the call.
//!
//! **No byte of a private object is in the view.** An object is private
//! when it, an ancestor or its file (`#+FILETAGS:`) carries a privacy tag.
//! The host cuts every private subtree out of the text it lends (and drops
//! the `:EMBEDDING:` values, which the index holds as numbers), builds the
//! index over what is left, and does not lend a file that is private as a
//! whole at all: a skill cannot leak what it never sees — not through an
//! accessor, not through the public fields, not by formatting the whole
//! request with `{:#?}`. Parent, child and tag references are renumbered
//! accordingly.
//!
//! # Example
//!
//! ```
//! use foveal_sdk::memex::MemexView;
//!
//! /// Titles of the active projects, depth-first with their children.
//! fn outline(view: &MemexView<'_>) -> Vec<String> {
//!     let mut lines = Vec::new();
//!     for file in view.files() {
//!         for index in file.with_tag("project") {
//!             let o = file.object(*index);
//!             if !o.done {
//!                 lines.push(file.title(*index).to_owned());
//!             }
//!         }
//!     }
//!     lines
//! }
//! # let _ = outline;
//! ```

use abi_stable::StableAbi;
use abi_stable::std_types::{RSlice, RStr, RVec};

/// No parent, no vector: the sentinel for an absent index.
pub const NONE: u32 = u32::MAX;

/// A range of bytes or of entries: `start..start + len`.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Range32 {
    /// First byte or entry.
    pub start: u32,
    /// How many.
    pub len: u32,
}

impl Range32 {
    /// As a `usize` range.
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..(self.start + self.len) as usize
    }
}

/// One headline, as offsets into its file's text and indexes.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectRecord {
    /// Its id: in the file text (`:ID:`), or, when `id_derived`, in the
    /// index's `derived_ids` pool.
    pub id: Range32,
    /// Whether the id was derived from the file and outline path.
    pub id_derived: bool,
    /// Whether its TODO keyword is a done state.
    pub done: bool,
    /// Number of stars.
    pub level: u16,
    /// 1-based line in the file.
    pub line: u32,
    /// The title, in the text.
    pub title: Range32,
    /// The TODO keyword, in the text (`len` 0 when none).
    pub todo: Range32,
    /// The body (section after the drawer, to the first child), in the text.
    pub body: Range32,
    /// Own tags: a range of [`FileIndex::tags`].
    pub tags: Range32,
    /// Index of the parent in this file's view, or [`NONE`].
    pub parent: u32,
    /// Children: a range of [`FileIndex::children`].
    pub children: Range32,
    /// Row in the vector table, or [`NONE`].
    pub vector: u32,
    /// One past the last object of its subtree: the subtree is
    /// `index..end`, itself included.
    pub end: u32,
    /// A hash of everything a renderer may show of the object: its own
    /// text (headline line, drawers, body, up to the next headline) and its
    /// id. Equal hashes mean (up to a 64-bit collision) the same object, so
    /// a skill may reuse what it rendered from it in an earlier version of
    /// the file.
    pub hash: u64,
}

/// One file's objects, prepared by the host once per version of the file
/// (and privacy configuration). Owns no text: everything points into the
/// visible text the [`FileView`] lends with it.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Default)]
pub struct FileIndex {
    /// The visible objects, in outline order (a parent before its children).
    pub objects: RVec<ObjectRecord>,
    /// Child indices; each object's `children` is a range of this.
    pub children: RVec<u32>,
    /// Tags as ranges of the text; each object's `tags` is a range of this.
    pub tags: RVec<Range32>,
    /// Ids derived by the host for headlines without `:ID:`.
    pub derived_ids: abi_stable::std_types::RString,
    /// Floats per vector (0 when the file has none).
    pub dim: u32,
    /// Embedding vectors, `dim` floats per row.
    pub vectors: RVec<f32>,
    /// The Euclidean norm of each row of `vectors`, precomputed so that a
    /// similarity scan is one dot product per object.
    pub norms: RVec<f32>,
    /// `vectors` quantized to 8 bits, `dim` per row: row `r` is
    /// `round(v * 127 / max|v|)`. A scan reads a quarter of the bytes; see
    /// [`quantized_cosine_error`] for how far from exact it can be.
    pub quantized: RVec<i8>,
    /// Per row, the factor `max|v| / (127 · ‖v‖)` that turns a quantized
    /// dot product into a cosine: `cos(a, b) ≈ (qa · qb) · fa · fb`.
    pub quant_factors: RVec<f32>,
    /// Each object's parent (as in its record), packed: walks up the tree
    /// touch this small array instead of the records.
    pub parents: RVec<u32>,
    /// Each object's level (as in its record), packed likewise.
    pub levels: RVec<u16>,
    /// For each row of `vectors`, the object it belongs to.
    pub vector_objects: RVec<u32>,
    /// A hash of `dim` and the bits of every row of `vectors`, in order:
    /// equal hashes mean (up to a 64-bit collision) the same vector table,
    /// so a skill may reuse what it computed from the table across file
    /// versions (an edit to a body leaves it unchanged).
    pub vectors_hash: u64,
    /// `(tag lowercased, object indices)`, sorted by tag: the objects
    /// carrying each own tag, for [`FileView::with_tag`].
    pub tag_index: RVec<TagEntry>,
    /// `(id_hash(id), object index)`, sorted: lookup by id in
    /// `O(log n)`, for [`FileView::find`].
    pub id_index: RVec<IdEntry>,
}

/// Quantizes one vector for [`FileIndex::quantized`]: appends its 8-bit
/// row to `out` and returns its factor for [`FileIndex::quant_factors`]
/// (0 for a zero vector).
pub fn quantize(vector: &[f32], norm: f32, out: &mut RVec<i8>) -> f32 {
    let max = vector.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || norm == 0.0 || !max.is_finite() {
        out.extend(std::iter::repeat_n(0, vector.len()));
        return 0.0;
    }
    let scale = 127.0 / max;
    out.extend(vector.iter().map(|x| (x * scale).round() as i8));
    max / (127.0 * norm)
}

/// The most a quantized cosine `(qa · qb) · fa · fb` can differ from the
/// exact cosine of the two `dim`-float vectors, given their factors.
///
/// Each component of a unit vector is off by at most `f / 2` after
/// rounding, and `Σ|u_i| ≤ √dim`; summing the cross terms gives
/// `√dim · (fa + fb) / 2 + 3/4 · dim · fa · fb`, plus a little for float
/// rounding. A scan may skip the exact computation for every object whose
/// quantized cosine is below `threshold - bound`.
pub fn quantized_cosine_error(dim: usize, fa: f32, fb: f32) -> f32 {
    let dim = dim as f32;
    0.5 * dim.sqrt() * (fa + fb) + 0.75 * dim * fa * fb + 1e-4
}

/// One entry of [`FileIndex::id_index`].
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct IdEntry {
    /// [`id_hash`] of the id.
    pub hash: u64,
    /// The object.
    pub index: u32,
}

/// The hash ids are indexed by: 64-bit FNV-1a of the id's bytes. Fixed, so
/// the host and every skill agree.
pub fn id_hash(id: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in id.as_bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The objects carrying one tag.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Default, PartialEq, Eq)]
pub struct TagEntry {
    /// The tag, lowercased.
    pub tag: abi_stable::std_types::RString,
    /// The objects carrying it, in outline order.
    pub objects: RVec<u32>,
}

/// One file lent to a skill for the duration of a hook call.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct FileView<'a> {
    /// The file's path, for messages.
    pub path: RStr<'a>,
    /// The file's visible text: the file without its private subtrees
    /// and without its `:EMBEDDING:` values. Every range of the index
    /// points into this text (not into the file on disk).
    pub text: RStr<'a>,
    /// Its prepared index.
    pub index: &'a FileIndex,
}

impl<'a> FileView<'a> {
    #[inline]
    fn text_of(&self, range: Range32) -> &'a str {
        self.text.as_str().get(range.range()).unwrap_or("")
    }

    /// How many visible objects the file has.
    #[inline]
    pub fn len(&self) -> usize {
        self.index.objects.len()
    }

    /// Whether the file has no visible object.
    pub fn is_empty(&self) -> bool {
        self.index.objects.is_empty()
    }

    /// The record of object `index`.
    #[inline]
    pub fn object(&self, index: u32) -> &'a ObjectRecord {
        &self.index.objects[index as usize]
    }

    /// Its id.
    #[inline]
    pub fn id(&self, index: u32) -> &'a str {
        let o = self.object(index);
        if o.id_derived {
            self.index
                .derived_ids
                .as_str()
                .get(o.id.range())
                .unwrap_or("")
        } else {
            self.text_of(o.id)
        }
    }

    /// Its title.
    #[inline]
    pub fn title(&self, index: u32) -> &'a str {
        self.text_of(self.object(index).title)
    }

    /// Its TODO keyword.
    pub fn todo(&self, index: u32) -> Option<&'a str> {
        let o = self.object(index);
        (o.todo.len > 0).then(|| self.text_of(o.todo))
    }

    /// Its body.
    #[inline]
    pub fn body(&self, index: u32) -> &'a str {
        self.text_of(self.object(index).body)
    }

    /// Its own tags.
    pub fn tags(&self, index: u32) -> impl Iterator<Item = &'a str> + 'a {
        let this = *self;
        self.index.tags[self.object(index).tags.range()]
            .iter()
            .map(move |r| this.text_of(*r))
    }

    /// Its children's indices.
    pub fn children(&self, index: u32) -> &'a [u32] {
        &self.index.children[self.object(index).children.range()]
    }

    /// Its parent's index.
    #[inline]
    pub fn parent(&self, index: u32) -> Option<u32> {
        let p = match self.index.parents.get(index as usize) {
            Some(&p) => p,
            None => self.object(index).parent,
        };
        (p != NONE).then_some(p)
    }

    /// Its level (number of stars).
    #[inline]
    pub fn level(&self, index: u32) -> u16 {
        match self.index.levels.get(index as usize) {
            Some(&level) => level,
            None => self.object(index).level,
        }
    }

    /// Its embedding vector.
    pub fn vector(&self, index: u32) -> Option<&'a [f32]> {
        let row = self.object(index).vector;
        if row == NONE {
            return None;
        }
        let dim = self.index.dim as usize;
        self.index
            .vectors
            .get(row as usize * dim..(row as usize + 1) * dim)
    }

    /// The 8-bit row `row` of the vector table and its factor (see
    /// [`FileIndex::quantized`]).
    pub fn quantized_row(&self, row: u32) -> Option<(&'a [i8], f32)> {
        let dim = self.index.dim as usize;
        let q = self
            .index
            .quantized
            .get(row as usize * dim..(row as usize + 1) * dim)?;
        Some((q, *self.index.quant_factors.get(row as usize)?))
    }

    /// The exact row `row` of the vector table and its norm.
    pub fn vector_row(&self, row: u32) -> Option<(&'a [f32], f32)> {
        let dim = self.index.dim as usize;
        let v = self
            .index
            .vectors
            .get(row as usize * dim..(row as usize + 1) * dim)?;
        Some((v, *self.index.norms.get(row as usize)?))
    }

    /// The object with id `id` in this file.
    pub fn find(&self, id: &str) -> Option<u32> {
        let hash = id_hash(id);
        let entries = self.index.id_index.as_slice();
        let start = entries.partition_point(|e| e.hash < hash);
        entries[start..]
            .iter()
            .take_while(|e| e.hash == hash)
            .map(|e| e.index)
            .find(|&i| self.id(i) == id)
    }

    /// The norm of its embedding vector (0 when it has none).
    pub fn norm(&self, index: u32) -> f32 {
        let row = self.object(index).vector;
        if row == NONE {
            return 0.0;
        }
        self.index.norms.get(row as usize).copied().unwrap_or(0.0)
    }

    /// The objects with own tag `tag` (exact, case-insensitive), in outline
    /// order.
    pub fn with_tag(&self, tag: &str) -> &'a [u32] {
        let wanted = tag.trim_matches(':').to_lowercase();
        match self
            .index
            .tag_index
            .binary_search_by(|e| e.tag.as_str().cmp(wanted.as_str()))
        {
            Ok(at) => &self.index.tag_index[at].objects,
            Err(_) => &[],
        }
    }
}

/// The whole memex lent to a skill for the duration of a hook call.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct MemexView<'a> {
    /// The memex generation this view shows.
    pub generation: u64,
    /// The files, in path order.
    pub files: RSlice<'a, FileView<'a>>,
}

impl<'a> MemexView<'a> {
    /// The files.
    pub fn files(&self) -> impl Iterator<Item = &'a FileView<'a>> + 'a {
        self.files.as_slice().iter()
    }

    /// An empty memex.
    pub const EMPTY: MemexView<'static> = MemexView {
        generation: 0,
        files: RSlice::from_slice(&[]),
    };

    /// The object with id `id`, as `(file, index)`: a binary search per
    /// file.
    pub fn find(&self, id: &str) -> Option<(&'a FileView<'a>, u32)> {
        self.files()
            .find_map(|file| file.find(id).map(|i| (file, i)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn exact(a: &[f32], b: &[f32]) -> f64 {
        let dot: f64 = a
            .iter()
            .zip(b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum();
        let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        dot / (na * nb)
    }

    fn norm(v: &[f32]) -> f32 {
        v.iter().map(|x| x * x).sum::<f32>().sqrt()
    }

    proptest! {
        /// The quantized cosine never strays from the exact one by more
        /// than the bound a scan relies on to skip the exact computation.
        #[test]
        fn the_quantized_cosine_stays_within_its_bound(
            (a, b) in (1usize..200).prop_flat_map(|dim| (
                proptest::collection::vec(-1.0f32..1.0, dim),
                proptest::collection::vec(-1.0f32..1.0, dim),
            )),
            scale_a in prop_oneof![Just(1.0f32), 1e-3f32..1e3],
            scale_b in prop_oneof![Just(1.0f32), 1e-3f32..1e3],
        ) {
            let a: Vec<f32> = a.iter().map(|x| x * scale_a).collect();
            let b: Vec<f32> = b.iter().map(|x| x * scale_b).collect();
            let (na, nb) = (norm(&a), norm(&b));
            prop_assume!(na > 0.0 && nb > 0.0);
            let (mut qa, mut qb) = (RVec::new(), RVec::new());
            let fa = quantize(&a, na, &mut qa);
            let fb = quantize(&b, nb, &mut qb);
            let dot: i32 = qa.iter().zip(qb.iter()).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum();
            let approx = f64::from(dot as f32 * fa * fb);
            let bound = f64::from(quantized_cosine_error(a.len(), fa, fb));
            let exact = exact(&a, &b);
            prop_assert!((approx - exact).abs() <= bound, "approx {approx} exact {exact} bound {bound}");
        }
    }

    #[test]
    fn a_zero_vector_quantizes_to_zeros_with_factor_zero() {
        let mut q = RVec::new();
        assert_eq!(quantize(&[0.0, 0.0], 0.0, &mut q), 0.0);
        assert_eq!(q.as_slice(), &[0, 0]);
    }
}
