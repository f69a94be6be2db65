//! The private text of a memex as the gate knows it: runs of words, kept
//! as 64-bit keys ([`super::words`]), never as text.
//!
//! For each private object (a privacy tag on it, an ancestor or its file)
//! the gate takes its title, each property value but `:EMBEDDING:`, its
//! body, and — for a file private as a whole — the text before its first
//! headline. From each of those *units* it keeps:
//!
//! - every run of [`SHINGLE`] consecutive words (line breaks are spaces,
//!   so a quote of a re-wrapped paragraph is found), and
//! - every whole line of fewer words whose letters and digits take at
//!   least [`MIN_PHRASE_BYTES`] bytes (`Ann` alone would redact every
//!   `ann`), and numbers written in groups, joined;
//!
//! but only runs that protect something ([`WordKind`]): a common word is
//! not a secret because a private headline is titled with it. Leaving
//! aside the words of Org's own syntax (`PROPERTIES`, `END`, `SCHEDULED`,
//! `CLOCK`, `#+FILETAGS`, the privacy tags, …):
//!
//! - a line of one word of letters alone protects nothing (`Health`,
//!   `Session`, a file named `diary.org`); one word holding a digit does
//!   (a PIN `4471`, a code `B12X`);
//! - a date or a time — digit groups that read as one (`2025-01-14`,
//!   `20250114`, `10:30`, a year), weekday and month names — protects
//!   nothing alone: a line, a run of five or a number that is only date,
//!   time and syntax is not kept (`** 2025-01-14 Tuesday`, a planning line,
//!   a `CLOCK:` line), while a line that holds another word keeps its
//!   date with it (`2025-01-14 Biopsy results`);
//! - every other line of two or more words, every run of five with a word
//!   of content, every other number is kept as before.
//!
//! What this gives up is listed in `docs/security.md` ("What a short
//! private line protects").
//!
//! A key that the text of any visible object of the same snapshot also
//! holds (in any file; its headline, drawer and body, `:EMBEDDING:` values
//! aside; the text before a public file's first headline too) is not
//! private: a skill is lent that text anyway, and a private headline
//! `Plan` must not redact a visible `Plan` from the outline.
//!
//! A body is then cleaned by cutting it into words the same way and
//! looking up the key of the run of 1 to 5 words at each word (no run
//! continues into an Org headline line); each run found is a private
//! span. Two sets of keys answer: the runs of five
//! and the shorter lines, each behind a Bloom filter that fits the
//! processor's cache, so a clean text costs about one cache hit per word.
//!
//! The forms of issue 28, F5, add three kinds of keys (a text whose
//! single letters may spell a word is read both ways, plain and spelled):
//!
//! - **joined**: each run of two to five private words written as one
//!   word of at least [`MIN_JOINED_BYTES`] (`mydoctorsaid`), looked up for
//!   long words only;
//! - **gapped**: each private run of [`FUZZY`] words without one of its
//!   words but the first, looked up where the text has a private run of
//!   three (**tri**) near — a run of six with one word off keeps three in
//!   a row;
//! - the runs of three are checked against the visible text like the
//!   exact keys, and one that a visible object holds is no anchor: so no
//!   gapped key is ever looked for in visible text, and gapped keys need
//!   no visibility check of their own.
//!
//! Joined keys are kept whole and gapped keys as 32-bit fingerprints
//! ([`SortedKeys`]): a fingerprint shared with a visible word must not
//! make a joined key public.
//!
//! The work is cached per file version ([`Build`]); after an edit the
//! matcher is derived from the last full build in time linear in the
//! changed files ([`delta`]).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use foveal_redact::Span;

use super::words::{RunKeys, Splitter, Word, has_spelled};
use foveal_memex::file::MemexFile;
use foveal_memex::privacy::PrivacyTags;
use foveal_memex::snapshot::MemexSnapshot;

mod delta;
pub(crate) mod stored;
pub(crate) use delta::{DELTA_FROM_KEYS, Matcher, PrivateCache, Update, full, update};

/// Runs of this many words of private text are looked for wherever they
/// appear: a quote of five consecutive words of a private line is private.
pub const SHINGLE: usize = 5;

/// A run of this many words of private text is found with one of its
/// words changed, dropped, or with a word added.
pub const FUZZY: usize = 6;

/// Private words run together (`mydoctorsaid`) are looked for when they
/// take at least this many bytes: shorter joins are everyday words
/// (`into`, `cannot`, `someone`).
pub const MIN_JOINED_BYTES: usize = 12;

/// The key of a run of words written as one word, its folded `bytes`.
pub(crate) fn joined_key(bytes: &[u8]) -> u64 {
    let mut keys = RunKeys::new();
    keys.push(super::words::hash_bytes(bytes));
    keys.key()
}

/// How many words ahead [`Matcher::each_run`] starts loading filter words.
const AHEAD: usize = 8;

/// What sets a gapped key apart from every other key.
const GAP_KEY: u64 = 0x0a3f_9e1d_55c2_7b61;

/// The key of a run of three words, its run key `run`, that says where
/// to look for gapped keys, apart from every other key (a private line of
/// three words is a key of its own).
#[inline]
fn tri_key(run: u64) -> u64 {
    super::words::mix(run, GAP_KEY ^ 3)
}

/// The key of `words` without `words[gap]`, apart from every other key.
#[inline]
fn gapped_key(words: &[Word], gap: usize) -> u64 {
    let mut keys = RunKeys::new();
    for (i, word) in words.iter().enumerate() {
        if i != gap {
            keys.push(word.hash);
        }
    }
    super::words::mix(keys.key(), GAP_KEY)
}

/// A private line of fewer than [`SHINGLE`] words is looked for as a whole
/// when its words take at least this many bytes.
pub const MIN_PHRASE_BYTES: usize = 4;

/// Hashes a key for a map of keys: keys are hashes already.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = super::words::mix(self.0, u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by keys.
pub(crate) type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// The span pattern index that marks a private passage.
pub(crate) const PRIVATE_SPAN: usize = usize::MAX;

/// The longest run of taken slots a [`KeySet`] read back may have: a
/// table at most 5/8 full has runs of a few hundred at a hundred million
/// slots; a longer one would make its lookups linear.
const MAX_RUN: usize = 1 << 12;

/// A set of keys: a Bloom filter (one 64-bit word per key, three bits)
/// in front of a hash table of its own (open addressing, linear probing,
/// at most 5/8 full; a free slot is 0, and the key 0 is kept aside), so
/// that both are plain arrays the private-text index stores and reads
/// as they are ([`stored`]).
pub(crate) struct KeySet {
    bloom: Box<[u64]>,
    slots: Box<[u64]>,
    /// Whether the key 0 is in the set.
    zero: bool,
    len: usize,
}

impl Default for KeySet {
    fn default() -> Self {
        Self::new(std::iter::empty())
    }
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySet")
            .field("keys", &self.len)
            .field("bloom_words", &self.bloom.len())
            .finish()
    }
}

impl KeySet {
    /// The set of `keys` (duplicates allowed).
    pub(crate) fn new(keys: impl Iterator<Item = u64>) -> Self {
        let keys: Vec<u64> = keys.collect();
        let mut set = Self::with_room(keys.len());
        for key in keys {
            set.insert(key);
        }
        set.fill_filter();
        set
    }

    /// An empty set with room for `keys` keys, no filter yet.
    fn with_room(keys: usize) -> Self {
        let slots = (keys * 8 / 5 + 1).next_power_of_two().max(2);
        Self {
            bloom: Box::default(),
            slots: vec![0u64; slots].into_boxed_slice(),
            zero: false,
            len: 0,
        }
    }

    /// Where `key`'s probe starts in a table of `slots` slots (a
    /// multiplicative hash: the filter takes the key's own bits).
    #[inline]
    fn home(key: u64, slots: usize) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - slots.trailing_zeros())) as usize
    }

    /// Adds `key` (the table has room: see [`Self::with_room`]).
    fn insert(&mut self, key: u64) {
        if key == 0 {
            self.len += usize::from(!self.zero);
            self.zero = true;
            return;
        }
        let mask = self.slots.len() - 1;
        let mut at = Self::home(key, self.slots.len());
        loop {
            match self.slots[at] {
                0 => {
                    self.slots[at] = key;
                    self.len += 1;
                    return;
                }
                k if k == key => return,
                _ => at = (at + 1) & mask,
            }
        }
    }

    /// Sets the filter's bits for every key.
    fn fill_filter(&mut self) {
        // About 16 bits a key: under 1% false positives.
        let words = (self.len / 4).max(1).next_power_of_two();
        let mut bloom = vec![0u64; words].into_boxed_slice();
        for key in self.iter() {
            bloom[Self::slot(key, words)] |= Self::bits(key);
        }
        self.bloom = bloom;
    }

    #[inline]
    fn slot(key: u64, words: usize) -> usize {
        (key as usize) & (words - 1)
    }

    #[inline]
    fn bits(key: u64) -> u64 {
        (1 << ((key >> 40) & 63)) | (1 << ((key >> 46) & 63)) | (1 << ((key >> 52) & 63))
    }

    #[inline]
    pub(crate) fn contains(&self, key: u64) -> bool {
        let bits = Self::bits(key);
        self.bloom[Self::slot(key, self.bloom.len())] & bits == bits && self.find(key).is_some()
    }

    /// The slot holding `key` (`usize::MAX` for the key 0).
    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        if key == 0 {
            return self.zero.then_some(usize::MAX);
        }
        let mask = self.slots.len() - 1;
        let mut at = Self::home(key, self.slots.len());
        loop {
            match self.slots[at] {
                0 => return None,
                k if k == key => return Some(at),
                _ => at = (at + 1) & mask,
            }
        }
    }

    /// Takes `key` out of the set (its filter bits stay: a lookup of it
    /// costs a table probe, and finds nothing). The keys probed past it
    /// move back, so that no probe stops early.
    pub(crate) fn remove(&mut self, key: u64) {
        let Some(mut hole) = self.find(key) else {
            return;
        };
        self.len -= 1;
        if hole == usize::MAX {
            self.zero = false;
            return;
        }
        let mask = self.slots.len() - 1;
        let mut at = hole;
        loop {
            at = (at + 1) & mask;
            let k = self.slots[at];
            if k == 0 {
                break;
            }
            // `k` may fill the hole when its home is not in (hole, at].
            let home = Self::home(k, self.slots.len());
            let between = if hole <= at {
                hole < home && home <= at
            } else {
                hole < home || home <= at
            };
            if !between {
                self.slots[hole] = k;
                hole = at;
            }
        }
        self.slots[hole] = 0;
    }

    /// Starts loading the filter word of `key` into the cache.
    #[inline]
    pub(crate) fn prefetch(&self, key: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let word = &self.bloom[Self::slot(key, self.bloom.len())];
            // SAFETY: a prefetch is a hint; it never faults and reads
            // nothing into the program. The pointer is in bounds anyway.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(word).cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = key;
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Its keys, in no order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.zero
            .then_some(0)
            .into_iter()
            .chain(self.slots.iter().copied().filter(|&k| k != 0))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its arrays as the index stores them: the filter, the table, whether
    /// the key 0 is in, and how many keys.
    pub(crate) fn parts(&self) -> (&[u64], &[u64], bool, usize) {
        (&self.bloom, &self.slots, self.zero, self.len)
    }

    /// The set of [`Self::parts`] read back; `None` when they cannot be
    /// one (sizes not powers of two, a count that is not the table's).
    pub(crate) fn from_parts(
        bloom: Box<[u64]>,
        slots: Box<[u64]>,
        zero: bool,
        len: usize,
    ) -> Option<Self> {
        let set = Self {
            bloom,
            slots,
            zero,
            len,
        };
        (set.bloom.len().is_power_of_two()
            && set.slots.len().is_power_of_two()
            && set.slots.len() >= 2
            && set.slots.len() * 5 / 8 >= len.saturating_sub(usize::from(zero))
            && set.keys_found().map(|taken| taken + usize::from(zero)) == Some(len))
        .then_some(set)
    }

    /// How many slots of the table are taken, when a lookup's probe
    /// reaches every key of it: no free slot lies between its home and its
    /// slot, and no run of taken slots is longer than [`MAX_RUN`] (lookups
    /// stay short). One pass, from a free slot on, in the table's order.
    /// The filter's bits are not checked (a random read a key, a second at
    /// 1M headlines): the index's checksum finds damage, and a file made
    /// to pass it needs the user's rights on the data dir, where the
    /// configuration's privacy tags are.
    fn keys_found(&self) -> Option<usize> {
        let slots = self.slots.len();
        let mask = slots - 1;
        let free = self.slots.iter().position(|&k| k == 0)?;
        // Taken slots before this one in its run.
        let (mut run, mut taken) = (0, 0);
        for step in 1..=slots {
            let at = (free + step) & mask;
            let key = self.slots[at];
            if key == 0 {
                run = 0;
                continue;
            }
            let from_home = at.wrapping_sub(Self::home(key, slots)) & mask;
            if from_home > run {
                return None;
            }
            run += 1;
            taken += 1;
            if run > MAX_RUN {
                return None;
            }
        }
        Some(taken)
    }

    /// Bytes held.
    pub(crate) fn memory(&self) -> usize {
        (self.bloom.len() + self.slots.len()) * 8
    }
}

/// The 32 bits of a key that a [`SortedKeys<u32>`] keeps.
#[inline]
fn fingerprint(key: u64) -> u32 {
    (key >> 32) as u32
}

/// What a [`SortedKeys`] keeps of each key: the whole key (`u64`) or its
/// [`fingerprint`] (`u32`, half the memory, a rare false match).
pub(crate) trait Kept: Copy + Ord + Send + Sync + 'static {
    /// What is kept of `key`.
    fn of(key: u64) -> Self;
    /// Its bits, for the filter.
    fn wide(self) -> u64;
}

impl Kept for u32 {
    #[inline]
    fn of(key: u64) -> Self {
        fingerprint(key)
    }
    #[inline]
    fn wide(self) -> u64 {
        u64::from(self)
    }
}

impl Kept for u64 {
    #[inline]
    fn of(key: u64) -> Self {
        key
    }
    #[inline]
    fn wide(self) -> u64 {
        self
    }
}

/// A large set of keys that is seldom asked for a key (only near a
/// private run of three, or for a long word): what it keeps of each key
/// ([`Kept`]), sorted (built by merging sorted runs, no table to fill),
/// behind a Bloom filter of 8 bits a key.
///
/// Kept as 32-bit [`fingerprint`]s (the gapped keys), two keys with one
/// fingerprint are one: a false match is a key in about `len / 2^32`
/// (1 % for 43 M keys) of the lookups the filter lets through (3 %) — it
/// redacts a run that only looks private, never the other way. Whole keys
/// (the joined keys) have no such false match, and none is needed where a
/// key's presence in *visible* text decides that it is public: there a
/// false match would hide a private key.
pub(crate) struct SortedKeys<K: Kept = u32> {
    bloom: Box<[u64]>,
    keys: Box<[K]>,
}

impl<K: Kept> Default for SortedKeys<K> {
    fn default() -> Self {
        Self::from_sorted(std::iter::empty(), |_| true)
    }
}

impl<K: Kept> std::fmt::Debug for SortedKeys<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SortedKeys")
            .field("keys", &self.keys.len())
            .field("bloom_words", &self.bloom.len())
            .finish()
    }
}

impl<K: Kept> SortedKeys<K> {
    /// The filter's 64 bits for a kept key.
    #[inline]
    fn spread(kept: K) -> u64 {
        super::words::mix(kept.wide(), 0x5be0_cd19_137e_2179)
    }

    /// The set of the kept keys of `runs`, each sorted, that `keep`.
    pub(crate) fn from_sorted<'k>(
        runs: impl Iterator<Item = &'k [K]>,
        keep: impl Fn(K) -> bool,
    ) -> Self {
        let runs: Vec<&[K]> = runs.collect();
        let mut keys: Vec<K> = Vec::with_capacity(runs.iter().map(|run| run.len()).sum());
        let mut sorted = true;
        for run in runs {
            sorted &= keys
                .last()
                .is_none_or(|&last| run.first().is_none_or(|&first| last < first));
            keys.extend(run.iter().copied().filter(|&k| keep(k)));
        }
        if !sorted {
            // A merge of the runs (the stable sort finds them).
            keys.sort();
            keys.dedup();
        }
        Self::of_sorted(keys)
    }

    /// The set of `keys`, sorted, each once.
    fn of_sorted(keys: Vec<K>) -> Self {
        let words = (keys.len() / 8).max(1).next_power_of_two();
        let mut bloom = vec![0u64; words].into_boxed_slice();
        for &key in &keys {
            let h = Self::spread(key);
            bloom[KeySet::slot(h, words)] |= KeySet::bits(h);
        }
        Self {
            bloom,
            keys: keys.into(),
        }
    }

    /// The set of its keys that `keep`, built in place.
    pub(crate) fn retain(self, keep: impl Fn(K) -> bool) -> Self {
        let mut keys = self.keys.into_vec();
        keys.retain(|&k| keep(k));
        Self::of_sorted(keys)
    }

    /// Its filter and its keys, as the index stores them.
    pub(crate) fn parts(&self) -> (&[u64], &[K]) {
        (&self.bloom, &self.keys)
    }

    /// The set of [`Self::parts`] read back; `None` when they cannot be
    /// one (a filter not a power of two, keys out of order).
    pub(crate) fn from_parts(bloom: Box<[u64]>, keys: Box<[K]>) -> Option<Self> {
        (bloom.len().is_power_of_two() && keys.is_sorted_by(|a, b| a < b))
            .then_some(Self { bloom, keys })
    }

    /// Whether the kept key `kept` is in the set.
    pub(crate) fn has(&self, kept: K) -> bool {
        self.keys.binary_search(&kept).is_ok()
    }

    /// Whether what is kept of `key` is in the set.
    #[inline]
    pub(crate) fn contains(&self, key: u64) -> bool {
        let kept = K::of(key);
        let h = Self::spread(kept);
        let bits = KeySet::bits(h);
        self.bloom[KeySet::slot(h, self.bloom.len())] & bits == bits
            && self.keys.binary_search(&kept).is_ok()
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Bytes held.
    pub(crate) fn memory(&self) -> usize {
        self.bloom.len() * 8 + std::mem::size_of_val(&*self.keys)
    }
}

/// The private keys of one file version and where its visible text is.
/// Its `Debug` form gives counts.
#[derive(Default)]
pub(crate) struct FileKeys {
    /// Runs of [`SHINGLE`] words, sorted, each once.
    shingles: Box<[u64]>,
    /// Shorter whole lines, sorted, each once.
    shorts: Box<[u64]>,
    /// Runs of two to [`SHINGLE`] words written as one, sorted, each once.
    joined: Box<[u64]>,
    /// Runs of [`FUZZY`] words without one of them, sorted, each once.
    gapped: Box<[u32]>,
    /// The runs of three words of those runs: where to look for them.
    tri: Box<[u64]>,
    /// The byte ranges of the file's text that the visible text is made
    /// of (no key is looked for across two of them).
    visible: Box<[(u32, u32)]>,
}

impl std::fmt::Debug for FileKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileKeys")
            .field("shingles", &self.shingles.len())
            .field("shorts", &self.shorts.len())
            .field("joined", &self.joined.len())
            .field("gapped", &self.gapped.len())
            .field("visible_ranges", &self.visible.len())
            .finish()
    }
}

/// Gathers the keys of units of private text.
#[derive(Default)]
struct Keys {
    splitter: Splitter,
    skipping: Splitter,
    spelling: Splitter,
    words: Vec<Word>,
    /// What each word of `words` is.
    kinds: Vec<WordKind>,
    /// The words of the privacy tags (`@personal` is `personal`): Org
    /// syntax here, as a tag is.
    tags: Vec<u64>,
    shingles: Vec<u64>,
    shorts: Vec<u64>,
    joined: Vec<u64>,
    gapped: Vec<u32>,
    tri: Vec<u64>,
}

/// How a unit of private text was cut into words (see [`Keys::unit`]).
#[derive(Debug, Clone, Copy)]
enum Way {
    Plain,
    /// Described links as their descriptions.
    Skipping,
    /// Letters spelled out as the words they spell.
    Spelling,
}

impl Keys {
    fn new(privacy: &PrivacyTags) -> Self {
        Self {
            splitter: Splitter::capturing(false),
            skipping: Splitter::capturing(true),
            spelling: Splitter::capturing(false).spelling(),
            tags: tag_words(privacy),
            ..Self::default()
        }
    }
}

/// What a word of private text is, for what a run of it protects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WordKind {
    /// A word of Org's own syntax or a privacy tag: every outline has it.
    Syntax,
    /// Part of a date or a time: a number of one or two digits, a year
    /// (1900 to 2199), eight digits that read as a day (`20250114`), a
    /// weekday or month name (English, in full or abbreviated).
    Date,
    /// Any other word; whether it holds a digit.
    Content {
        /// It holds a digit.
        digit: bool,
    },
}

impl WordKind {
    /// The kind of `word` of `text`, the privacy tags' words `tags`.
    pub(crate) fn of(text: &str, word: &Word, tags: &[u64]) -> Self {
        let written = text
            .get(word.start as usize..word.end as usize)
            .unwrap_or_default();
        let bytes = written.as_bytes();
        if !bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit) {
            return if is_date_number(bytes) {
                Self::Date
            } else {
                Self::Content { digit: true }
            };
        }
        let vocabulary = vocabulary();
        if vocabulary.calendar.contains_key(&word.hash) {
            return Self::Date;
        }
        if vocabulary.syntax.contains_key(&word.hash) || tags.contains(&word.hash) {
            return Self::Syntax;
        }
        Self::Content {
            digit: written.chars().any(char::is_numeric),
        }
    }

    fn is_content(self) -> bool {
        matches!(self, Self::Content { .. })
    }
}

/// Whether a number of ASCII `digits` reads as part of a date or a time.
fn is_date_number(digits: &[u8]) -> bool {
    let value = |d: &[u8]| {
        d.iter()
            .fold(0u32, |n, &b| n.saturating_mul(10) + u32::from(b - b'0'))
    };
    let year = |d: &[u8]| (1900..=2199).contains(&value(d));
    match digits.len() {
        1 | 2 => true,
        4 => year(digits),
        8 => {
            year(&digits[..4])
                && (1..=12).contains(&value(&digits[4..6]))
                && (1..=31).contains(&value(&digits[6..]))
        }
        _ => false,
    }
}

/// Whether a private line of fewer than [`SHINGLE`] words, of these
/// kinds, protects something: leaving its Org syntax aside, two words or
/// more not all of a date or time, or one word holding a digit. A line of
/// one word of letters (`Health`) does not: it is a word, not a quote.
pub(crate) fn line_protects(kinds: &[WordKind]) -> bool {
    let mut meaningful = kinds.iter().filter(|k| **k != WordKind::Syntax);
    match (meaningful.next(), meaningful.next()) {
        (Some(WordKind::Content { digit }), None) => *digit,
        (Some(_), Some(_)) => kinds.iter().any(|k| k.is_content()),
        _ => false,
    }
}

/// Words of Org's own syntax: drawer names, planning and logbook words,
/// keywords of the preamble and of blocks (`emacs-lisp` too), a file's
/// extension. Every outline holds them, so they make no run private.
/// Common English words that Org also uses (`from`, `on`, `note`,
/// `state`, `date`) are content: they are not listed.
const ORG_SYNTAX: &[&str] = &[
    "archive",
    "author",
    "begin",
    "category",
    "clock",
    "closed",
    "created",
    "custom",
    "deadline",
    "description",
    "done",
    "drawer",
    "effort",
    "emacs",
    "email",
    "embedding",
    "end",
    "example",
    "export",
    "filetags",
    "id",
    "include",
    "itags",
    "keywords",
    "language",
    "lisp",
    "logbook",
    "olpath",
    "options",
    "org",
    "properties",
    "property",
    "quote",
    "results",
    "scheduled",
    "seq",
    "setupfile",
    "src",
    "startup",
    "tags",
    "title",
    "todo",
    "typ",
];

/// Weekday and month names, in full and abbreviated, and `am`/`pm`: with
/// numbers, the words of a date or a time.
const CALENDAR: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "mon",
    "tue",
    "tues",
    "wed",
    "thu",
    "thur",
    "thurs",
    "fri",
    "sat",
    "sun",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "am",
    "pm",
];

/// The hashes of [`ORG_SYNTAX`] and [`CALENDAR`], as words are hashed.
struct Vocabulary {
    syntax: KeyMap<()>,
    calendar: KeyMap<()>,
}

fn vocabulary() -> &'static Vocabulary {
    static VOCABULARY: std::sync::OnceLock<Vocabulary> = std::sync::OnceLock::new();
    VOCABULARY.get_or_init(|| {
        let set = |words: &[&str]| -> KeyMap<()> {
            words
                .iter()
                .map(|w| (super::words::hash_bytes(w.as_bytes()), ()))
                .collect()
        };
        Vocabulary {
            syntax: set(ORG_SYNTAX),
            calendar: set(CALENDAR),
        }
    })
}

/// The words of the privacy tags, hashed as words are.
fn tag_words(privacy: &PrivacyTags) -> Vec<u64> {
    let mut splitter = Splitter::default();
    let mut words = Vec::new();
    for name in privacy.names() {
        splitter.split(name, false, &mut words);
    }
    words.into_iter().map(|w| w.hash).collect()
}

impl Keys {
    /// The keys of one unit of private text (see the module docs), read as
    /// the gate reads bodies — JSON escapes, HTML references and
    /// percent-encoding meaning what they stand for, link targets read as
    /// words — and, when it holds a link, also with each described link as
    /// its description alone.
    fn unit(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.words.clear();
        self.splitter.split(text, true, &mut self.words);
        self.add_words(text, Way::Plain);
        // Letters spelled out, read as the words they spell too.
        if has_spelled(&self.words) {
            self.words.clear();
            self.spelling.split(text, true, &mut self.words);
            self.add_words(text, Way::Spelling);
        }
        if text.contains("[[") {
            self.words.clear();
            self.skipping.split(text, true, &mut self.words);
            self.add_words(text, Way::Skipping);
        }
    }

    fn add_words(&mut self, text: &str, way: Way) {
        let Self {
            words,
            kinds,
            tags,
            shingles,
            shorts,
            joined,
            gapped,
            tri,
            splitter,
            skipping,
            spelling,
        } = self;
        let splitter: &Splitter = match way {
            Way::Plain => splitter,
            Way::Skipping => skipping,
            Way::Spelling => spelling,
        };
        let words: &[Word] = words;
        let tags: &[u64] = tags;
        kinds.clear();
        kinds.extend(words.iter().map(|w| WordKind::of(text, w, tags)));
        let kinds: &[WordKind] = kinds;
        // A date or a time, however its groups are joined, protects
        // nothing alone (`2025-01-14` as `20250114`).
        super::words::number_runs(text, words, true, |first, last, key| {
            if kinds[first..=last].iter().any(|k| k.is_content()) {
                shorts.push(key);
            }
        });
        for (run, run_kinds) in words.windows(SHINGLE).zip(kinds.windows(SHINGLE)) {
            if !run[1..].iter().any(|w| w.headline) && run_kinds.iter().any(|k| k.is_content()) {
                shingles.push(super::words::run_key(run));
            }
        }
        let mut start = 0;
        while start < words.len() {
            let mut end = start + 1;
            while end < words.len() && !words[end].line_start {
                end += 1;
            }
            // The line, and the line without the Org syntax it opens
            // with: a preamble's `#+TITLE: Notes on my recovery` is
            // quoted as its value.
            let syntax = kinds[start..end]
                .iter()
                .take_while(|k| **k == WordKind::Syntax)
                .count();
            for from in [start, start + syntax] {
                if from > start && from == end {
                    break;
                }
                let line = &words[from..end];
                let bytes: usize = line.iter().map(|w| (w.end - w.start) as usize).sum();
                if line.len() < SHINGLE
                    && bytes >= MIN_PHRASE_BYTES
                    && line_protects(&kinds[from..end])
                {
                    shorts.push(super::words::run_key(line));
                }
                if syntax == 0 {
                    break;
                }
            }
            start = end;
        }
        // Words run together (`mydoctorsaid`, `MyDoctorSaid`): each run of
        // two to `SHINGLE` words, as one word.
        for first in 0..words.len() {
            for last in first + 1..(first + SHINGLE).min(words.len()) {
                if words[last].headline {
                    break;
                }
                let bytes = splitter.folded(first, last);
                if bytes.len() >= MIN_JOINED_BYTES
                    && kinds[first..=last].iter().any(|k| k.is_content())
                {
                    joined.push(joined_key(bytes));
                }
            }
        }
        // A run of six with a word changed, dropped or added: the run
        // without each of its words but the first, and its runs of three
        // (which find where to look).
        let mut anchored = vec![false; words.len()];
        for (at, run) in words.windows(FUZZY).enumerate() {
            if run[1..].iter().any(|w| w.headline)
                || !kinds[at..at + FUZZY].iter().any(|k| k.is_content())
            {
                continue;
            }
            for gap in 1..FUZZY {
                gapped.push(fingerprint(gapped_key(run, gap)));
            }
            anchored[at..at + FUZZY - 2].fill(true);
        }
        for (at, _) in anchored.iter().enumerate().filter(|(_, a)| **a) {
            tri.push(tri_key(super::words::run_key(&words[at..at + 3])));
        }
    }

    /// The name of a file private as a whole (it is private too: a log
    /// line naming the file must not name it to the model).
    fn file_name(&mut self, path: &std::path::Path) {
        if let Some(name) = path.file_name() {
            self.unit(&name.to_string_lossy());
        }
    }

    fn into_file_keys(mut self, visible: Vec<(u32, u32)>) -> FileKeys {
        self.shingles.sort_unstable();
        self.shingles.dedup();
        self.shorts.sort_unstable();
        self.shorts.dedup();
        self.tri.sort_unstable();
        self.tri.dedup();
        self.joined.sort_unstable();
        self.joined.dedup();
        self.gapped.sort_unstable();
        self.gapped.dedup();
        FileKeys {
            shingles: self.shingles.into(),
            shorts: self.shorts.into(),
            joined: self.joined.into(),
            gapped: self.gapped.into(),
            tri: self.tri.into(),
            visible: visible.into(),
        }
    }
}

/// The text of a private headline between its headline line and its body
/// that is not a property (each value is a unit of its own): the planning
/// line, and whatever else the drawer holds — a note typed into it, a line
/// that is not `:KEY: value`.
fn between(file: &MemexFile, h: &foveal_memex::parse::Headline) -> String {
    let mut out = String::new();
    let mut at = h.after_headline;
    for property in &h.properties {
        // From the colon before the key to the end of the value.
        let start = property.key.start.saturating_sub(1).max(at);
        out.push_str(&file.text[at as usize..start as usize]);
        at = property.value.end.max(start);
    }
    out.push_str(&file.text[at as usize..h.body.start.max(at) as usize]);
    out
}

/// Gathers the private keys of `file` and the ranges of its visible text.
pub(crate) fn file_keys(file: &MemexFile, privacy: &PrivacyTags) -> FileKeys {
    if privacy.is_empty() {
        return FileKeys::default();
    }
    let whole = privacy.file_is_private(file);
    let mask = privacy.private_mask(file);
    let mut keys = Keys::new(privacy);
    let mut visible: Vec<(u32, u32)> = Vec::new();
    let mut show = |start: u32, end: u32| {
        if start < end {
            visible.push((start, end));
        }
    };
    let preamble_end = file
        .objects
        .first()
        .map_or(file.text.len() as u32, |o| o.headline.own.start);
    if whole {
        keys.unit(&file.text[..preamble_end as usize]);
        keys.file_name(&file.path);
    } else {
        show(0, preamble_end);
    }
    for (object, private) in file.objects.iter().zip(&mask) {
        let h = &object.headline;
        if *private {
            keys.unit(file.slice(&h.title));
            for property in &h.properties {
                if !file.slice(&property.key).eq_ignore_ascii_case("EMBEDDING") {
                    keys.unit(file.slice(&property.value));
                }
            }
            keys.unit(&between(file, h));
            keys.unit(file.slice(&h.body));
        } else {
            let mut at = h.own.start;
            for property in &h.properties {
                if file.slice(&property.key).eq_ignore_ascii_case("EMBEDDING") {
                    show(at, property.value.start);
                    at = property.value.end;
                }
            }
            show(at, h.own.end);
        }
    }
    keys.into_file_keys(visible)
}

/// The private keys of a file that was read but not loaded (not UTF-8, or
/// not parsable): its structure is unknown, so when its text names a
/// privacy tag anywhere, all of it — and its name — is private. Fail
/// closed: a diary caught half-written keeps its protection.
pub(crate) fn failed_file_keys(
    path: &std::path::Path,
    text: &str,
    privacy: &PrivacyTags,
) -> FileKeys {
    if !privacy.failed_text_is_private(text) {
        return FileKeys::default();
    }
    let mut keys = Keys::new(privacy);
    keys.unit(text);
    keys.file_name(path);
    keys.into_file_keys(Vec::new())
}

/// The keys to look for: runs of [`SHINGLE`] words, shorter lines, runs
/// written as one word, and runs of [`FUZZY`] without one of their words.
#[derive(Debug, Default)]
pub(crate) struct Sets {
    pub(crate) shingles: KeySet,
    pub(crate) shorts: KeySet,
    /// Shared by the scans' matchers of one build (they all look for
    /// every joined key).
    pub(crate) joined: Arc<SortedKeys<u64>>,
    pub(crate) gapped: SortedKeys,
    /// The runs of three words of the gapped runs: a run of six with one
    /// word changed, dropped or added keeps three in a row, so the gapped
    /// keys are looked up only near one of these.
    pub(crate) tri: KeySet,
}

/// Whether a key of each kind is looked for: the sets a [`Runs`] search
/// asks.
pub(crate) trait Lookup {
    fn any_shingle(&self) -> bool;
    fn any_short(&self) -> bool;
    fn any_joined(&self) -> bool;
    fn any_gapped(&self) -> bool;
    fn any_tri(&self) -> bool;
    fn shingle(&self, key: u64) -> bool;
    fn short(&self, key: u64) -> bool;
    fn joined(&self, key: u64) -> bool;
    fn gapped(&self, key: u64) -> bool;
    fn tri(&self, key: u64) -> bool;
    /// Starts loading what [`Self::shingle`] of `key` reads first.
    fn prefetch_shingle(&self, key: u64);
    /// Starts loading what [`Self::tri`] of `key` reads first.
    fn prefetch_tri(&self, key: u64);
}

impl Lookup for Sets {
    #[inline]
    fn any_shingle(&self) -> bool {
        !self.shingles.is_empty()
    }
    #[inline]
    fn any_short(&self) -> bool {
        !self.shorts.is_empty()
    }
    #[inline]
    fn any_joined(&self) -> bool {
        !self.joined.is_empty()
    }
    #[inline]
    fn any_gapped(&self) -> bool {
        !self.gapped.is_empty()
    }
    #[inline]
    fn any_tri(&self) -> bool {
        !self.tri.is_empty()
    }
    #[inline]
    fn shingle(&self, key: u64) -> bool {
        self.shingles.contains(key)
    }
    #[inline]
    fn short(&self, key: u64) -> bool {
        self.shorts.contains(key)
    }
    #[inline]
    fn joined(&self, key: u64) -> bool {
        self.joined.contains(key)
    }
    #[inline]
    fn gapped(&self, key: u64) -> bool {
        self.gapped.contains(key)
    }
    #[inline]
    fn tri(&self, key: u64) -> bool {
        self.tri.contains(key)
    }
    #[inline]
    fn prefetch_shingle(&self, key: u64) {
        self.shingles.prefetch(key);
    }
    #[inline]
    fn prefetch_tri(&self, key: u64) {
        self.tri.prefetch(key);
    }
}

impl<L: Lookup + ?Sized> Runs for L {}

/// The kinds of keys, one set of the matcher each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Shingle = 0,
    Short = 1,
    Tri = 2,
}

impl FileKeys {
    /// Whether it holds any key.
    fn any(&self) -> bool {
        !(self.shingles.is_empty()
            && self.shorts.is_empty()
            && self.joined.is_empty()
            && self.gapped.is_empty()
            && self.tri.is_empty())
    }

    /// Whether `key` is one of its runs of words or of three.
    fn has(&self, key: u64) -> bool {
        [&self.shingles, &self.shorts, &self.tri]
            .iter()
            .any(|keys| keys.binary_search(&key).is_ok())
    }

    /// Each key with its kind, but the joined and gapped keys (see
    /// [`Build::run`]).
    fn each(&self) -> impl Iterator<Item = (u64, Kind)> + '_ {
        fn kind(keys: &[u64], kind: Kind) -> impl Iterator<Item = (u64, Kind)> + '_ {
            keys.iter().map(move |&k| (k, kind))
        }
        kind(&self.shingles, Kind::Shingle)
            .chain(kind(&self.shorts, Kind::Short))
            .chain(kind(&self.tri, Kind::Tri))
    }
}

/// The private runs of a text, by a [`Lookup`] of keys.
pub(crate) trait Runs: Lookup {
    /// Calls `found(first, last, key)` for every run of words of `words`
    /// whose key is in the matcher, `first..=last` its words. In an
    /// `outline`, no run continues into an Org headline line.
    #[inline]
    fn each_run(
        &self,
        text: &str,
        words: &[Word],
        outline: bool,
        anchors: bool,
        mut found: impl FnMut(usize, usize, u64),
    ) {
        let gapped = self.any_gapped() && words.len() >= SHINGLE;
        // The runs found (for the gapped keys: a window they already cover
        // is not looked up again), and where a private run of three
        // starts. Both are rare in clean text.
        let mut runs: Vec<(u32, u32)> = Vec::new();
        let mut threes: Vec<u32> = Vec::new();
        let mut report = |first: usize, last: usize, key: u64| {
            if gapped {
                runs.push((first as u32, last as u32));
            }
            found(first, last, key);
        };
        let shorts = self.any_short();
        if shorts {
            super::words::number_runs(text, words, false, |first, last, key| {
                if self.short(key) {
                    report(first, last, key);
                }
            });
        }
        let shingles = self.any_shingle();
        let joined = self.any_joined();
        let tri = self.any_tri() && (anchors || gapped);
        for i in 0..words.len() {
            // The filter words of the runs a few words ahead, on their way
            // while these are looked up (the lookups are cache misses).
            if let Some(ahead) = words.get(i + AHEAD..i + AHEAD + SHINGLE) {
                let mut keys = RunKeys::new();
                for (j, word) in ahead.iter().enumerate() {
                    keys.push(word.hash);
                    if j == 2 && tri {
                        self.prefetch_tri(tri_key(keys.key()));
                    }
                }
                if shingles {
                    self.prefetch_shingle(keys.key());
                }
            }
            let mut keys = RunKeys::new();
            let last = (i + SHINGLE).min(words.len());
            for (j, word) in words[i..last].iter().enumerate() {
                if j > 0 && outline && word.headline {
                    break;
                }
                keys.push(word.hash);
                let key = keys.key();
                let hit = if j + 1 == SHINGLE {
                    shingles && self.shingle(key)
                } else {
                    shorts && self.short(key)
                };
                if hit {
                    report(i, i + j, key);
                }
                if j == 0
                    && joined
                    && (word.end - word.start) as usize >= MIN_JOINED_BYTES
                    && self.joined(key)
                {
                    report(i, i, key);
                }
                if j == 2 && tri {
                    let anchor = tri_key(key);
                    if self.tri(anchor) {
                        if anchors {
                            report(i, i + 2, anchor);
                        }
                        if gapped {
                            threes.push(i as u32);
                        }
                    }
                }
            }
        }
        if !threes.is_empty() {
            self.each_gapped(words, &threes, &runs, outline, found);
        }
    }

    /// The runs of `words` that are a gapped key: five words that are a
    /// private run of six without one (one dropped), or six words of which
    /// five are (one changed: the same five; one added: a run of six
    /// without its last). Looked up only where a private run of three
    /// starts near (`threes`, in order), and not where `runs` found cover
    /// every word already.
    fn each_gapped(
        &self,
        words: &[Word],
        threes: &[u32],
        runs: &[(u32, u32)],
        outline: bool,
        mut found: impl FnMut(usize, usize, u64),
    ) {
        // Uncovered words before each position.
        let mut covered = vec![false; words.len()];
        for &(first, last) in runs {
            covered[first as usize..=last as usize].fill(true);
        }
        let mut open = Vec::with_capacity(words.len() + 1);
        open.push(0u32);
        for (k, c) in covered.iter().enumerate() {
            open.push(open[k] + u32::from(!c));
        }
        let uncovered = |from: usize, to: usize| open[to] > open[from];
        // A run of three at `p` lies in the five at `s` for `s` in
        // `p - 2..=p`, in the six for `s` in `p - 3..=p`.
        let mut next = 0usize;
        for &p in threes {
            let p = p as usize;
            for s in p.saturating_sub(3).max(next)..=p {
                next = s + 1;
                let five = &words[s..(s + SHINGLE).min(words.len())];
                if s + 2 >= p
                    && five.len() == SHINGLE
                    && !(outline && five[1..].iter().any(|w| w.headline))
                    && uncovered(s, s + SHINGLE)
                {
                    let key = super::words::mix(super::words::run_key(five), GAP_KEY);
                    if self.gapped(key) {
                        found(s, s + SHINGLE - 1, key);
                    }
                }
                if let Some(six) = words.get(s..s + FUZZY)
                    && !(outline && six[1..].iter().any(|w| w.headline))
                    && uncovered(s, s + FUZZY)
                {
                    for gap in 1..FUZZY - 1 {
                        let key = gapped_key(six, gap);
                        if self.gapped(key) {
                            found(s, s + FUZZY - 1, key);
                        }
                    }
                }
            }
        }
    }

    /// Every private run in `text`, as spans (overlapping ones too).
    fn find(&self, text: &str, outline: bool, out: &mut Vec<Span>) {
        let mut words = Vec::new();
        Splitter::default().split(text, true, &mut words);
        let mut spans = |words: &[Word]| {
            self.each_run(text, words, outline, false, |first, last, _| {
                out.push(Span {
                    start: words[first].start as usize,
                    end: words[last].end as usize,
                    pattern: PRIVATE_SPAN,
                });
            });
        };
        spans(&words);
        // Letters spelled out, read as the words they spell too.
        if has_spelled(&words) {
            let mut spelled = Vec::new();
            Splitter::default()
                .spelling()
                .split(text, true, &mut spelled);
            spans(&spelled);
        }
    }
}

impl Sets {
    /// The sets of the `exact` keys by kind, the `joined` keys (in any
    /// order) and `gapped`.
    pub(crate) fn of(
        exact: impl IntoIterator<Item = (u64, Kind)>,
        mut joined: Vec<u64>,
        gapped: SortedKeys,
    ) -> Self {
        let mut by_kind: [Vec<u64>; 3] = Default::default();
        for (key, kind) in exact {
            by_kind[kind as usize].push(key);
        }
        let [shingles, shorts, tri] = by_kind.map(|keys| KeySet::new(keys.into_iter()));
        joined.sort_unstable();
        joined.dedup();
        Self {
            shingles,
            shorts,
            joined: Arc::new(SortedKeys::from_sorted(
                std::iter::once(&joined[..]),
                |_| true,
            )),
            gapped,
            tri,
        }
    }

    /// The number of keys that are looked for.
    pub(crate) fn len(&self) -> usize {
        self.shingles.len() + self.shorts.len() + self.joined.len() + self.gapped.len()
    }

    /// Whether `other` holds the same keys of every kind.
    pub(crate) fn same_keys(&self, other: &Self) -> bool {
        // A table's filter may hold the bits of keys taken out after it
        // was made (a build that removed its public keys): each key is
        // looked up through `other`'s filter instead. A sorted set's
        // filter is made from its keys alone.
        let same = |a: &KeySet, b: &KeySet| a.len() == b.len() && a.iter().all(|k| b.contains(k));
        same(&self.shingles, &other.shingles)
            && same(&self.shorts, &other.shorts)
            && same(&self.tri, &other.tri)
            && self.joined.parts() == other.joined.parts()
            && self.gapped.parts() == other.gapped.parts()
    }

    /// Bytes held.
    pub(crate) fn memory(&self) -> usize {
        [&self.shingles, &self.shorts, &self.tri]
            .iter()
            .map(|set| set.memory())
            .sum::<usize>()
            + self.joined.memory()
            + self.gapped.memory()
    }
}

/// One file version and the work done on it. Its `Debug` form gives
/// counts, never text.
pub(crate) struct CachedFile {
    /// Its identity ([`MemexFile::version`]: a copy that only gained
    /// vectors is the same version, and its work is reused).
    pub(crate) version: u64,
    /// Its path, for the `Debug` form.
    pub(crate) path: std::path::PathBuf,
    pub(crate) keys: Arc<FileKeys>,
    /// The private keys that this file's visible text holds: they are
    /// not private. Sorted, each once.
    pub(crate) hits: Vec<u64>,
    /// Whether `hits` hold every key of its generation's private text (a
    /// full build's work), or only those known when the file was seen
    /// after an edit (see [`delta`](super::private::delta)).
    pub(crate) complete: bool,
}

impl CachedFile {
    /// The same work (its keys shared).
    pub(crate) fn copy(&self) -> Self {
        Self {
            version: self.version,
            path: self.path.clone(),
            keys: Arc::clone(&self.keys),
            hits: self.hits.clone(),
            complete: self.complete,
        }
    }
}

impl std::fmt::Debug for CachedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedFile")
            .field("file", &self.path)
            .field("keys", &self.keys)
            .field("hits", &self.hits.len())
            .field("complete", &self.complete)
            .finish()
    }
}

/// The keys of a file read but not loaded, by its text.
pub(crate) type FailedKeys = (Arc<str>, Arc<FileKeys>);

/// How many distinct private keys a build found, and how many of them
/// visible text also holds.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BuildCounts {
    pub(crate) keys: usize,
    pub(crate) public: usize,
}

/// The keys some visible text holds, each with the number of file
/// versions whose visible text holds it: the public keys of a full
/// build, by kind.
#[derive(Default)]
pub(crate) struct Public {
    /// Runs of words and runs of three, with their kind.
    pub(crate) exact: KeyMap<(u32, Kind)>,
    /// Joined keys.
    pub(crate) joined: KeyMap<u32>,
}

impl Public {
    /// The sets of these keys (to look for them in visible text again).
    pub(crate) fn sets(&self) -> Sets {
        Sets::of(
            self.exact.iter().map(|(&key, &(_, kind))| (key, kind)),
            self.joined.keys().copied().collect(),
            SortedKeys::default(),
        )
    }

    /// Counts `hits` (one file version's, each once), which `all` and
    /// `joined` tell the kind of.
    fn count(&mut self, hits: &[u64], all: &KeyMap<(bool, Kind)>, joined: &SortedKeys<u64>) {
        for &key in hits {
            if let Some(&(_, kind)) = all.get(&key) {
                self.exact.entry(key).or_insert((0, kind)).0 += 1;
            }
            if joined.contains(key) {
                *self.joined.entry(key).or_default() += 1;
            }
        }
    }
}

/// Gathers, checks and builds the private-text matcher of one generation,
/// reusing the work of every file version the previous cache had:
///
/// 1. each file's private keys and visible ranges, gathered once per
///    version;
/// 2. the visible text of each new file version is scanned for every
///    private key of the generation: its *hits*;
/// 3. an unchanged file's hits already cover the keys that existed before
///    (in an unchanged file, or in one that changed or went); its visible
///    text is scanned again only for the keys the edit brought, if any;
/// 4. a key some file's hits name is public; the matcher keeps the others.
///    Each file's hits are pruned to the keys that still exist, so they
///    never outgrow the private text.
///
/// This is the full build: linear in the memex's private text (and, when
/// an edit brings new keys, in its visible text). After a small edit the
/// gate derives the matcher from the last full build instead
/// ([`delta`](super::private::delta)).
pub(crate) struct Build<'m> {
    files: Vec<&'m Arc<MemexFile>>,
    keys: Vec<Arc<FileKeys>>,
    hits: Vec<Vec<u64>>,
    unchanged: Vec<bool>,
    /// The previous full build's file versions that are gone.
    dropped: Vec<Arc<FileKeys>>,
    /// The keys of the files read but not loaded ([`failed_file_keys`]),
    /// by their text, and whether the previous cache had them.
    failed: Vec<(Arc<str>, Arc<FileKeys>, bool)>,
    public: Public,
}

impl<'m> Build<'m> {
    /// The files of `memex`, each with its previous work when `previous`
    /// (file versions, and the failed files' keys by their text) holds
    /// the same version: all of it when its hits are complete, its keys
    /// alone otherwise.
    pub(crate) fn new(
        previous: (Vec<CachedFile>, Vec<FailedKeys>),
        memex: &'m MemexSnapshot,
        privacy: &PrivacyTags,
    ) -> Self {
        let (previous, mut previous_failed) = previous;
        let mut previous: HashMap<u64, CachedFile> = previous
            .into_iter()
            .map(|cached| (cached.version, cached))
            .collect();
        let files: Vec<&Arc<MemexFile>> = memex.files().collect();
        let failed = memex
            .failed_texts()
            .map(|(path, text)| {
                match previous_failed
                    .iter()
                    .position(|(seen, _)| Arc::ptr_eq(seen, text))
                {
                    Some(at) => {
                        let (text, keys) = previous_failed.swap_remove(at);
                        (text, keys, true)
                    }
                    None => (
                        Arc::clone(text),
                        Arc::new(failed_file_keys(path, text, privacy)),
                        false,
                    ),
                }
            })
            .collect();
        let mut build = Self {
            keys: Vec::with_capacity(files.len()),
            hits: Vec::with_capacity(files.len()),
            unchanged: Vec::with_capacity(files.len()),
            dropped: previous_failed.into_iter().map(|(_, keys)| keys).collect(),
            failed,
            files,
            public: Public::default(),
        };
        let mut fresh: Vec<usize> = Vec::new();
        for (f, file) in build.files.iter().enumerate() {
            match previous.remove(&file.version) {
                Some(cached) if cached.complete => {
                    build.keys.push(cached.keys);
                    build.hits.push(cached.hits);
                    build.unchanged.push(true);
                }
                // Seen after an edit: its keys are known, but not whether
                // the other files' visible text holds them.
                Some(cached) => {
                    build.keys.push(cached.keys);
                    build.hits.push(Vec::new());
                    build.unchanged.push(false);
                }
                None => {
                    build.keys.push(Arc::default());
                    build.hits.push(Vec::new());
                    build.unchanged.push(false);
                    fresh.push(f);
                }
            }
        }
        // New file versions are gathered on every core.
        let gathered = on_cores(&fresh, |&f| file_keys(build.files[f], privacy));
        for (f, keys) in fresh.into_iter().zip(gathered) {
            build.keys[f] = Arc::new(keys);
        }
        // Only a full build's versions: their keys were looked for in
        // every file's visible text of that build.
        build.dropped.extend(
            previous
                .into_values()
                .filter(|cached| cached.complete)
                .map(|cached| cached.keys),
        );
        build
    }

    /// The sets of the private keys that no visible text holds.
    pub(crate) fn run(&mut self) -> (Option<Sets>, BuildCounts) {
        // Every key but the gapped ones: whether the previous cache knew
        // it, and its kind.
        let mut all: KeyMap<(bool, Kind)> = KeyMap::default();
        let failed = self
            .failed
            .iter()
            .map(|(_, keys, unchanged)| (keys, *unchanged));
        let files = || {
            self.keys
                .iter()
                .zip(self.unchanged.iter().copied())
                .chain(failed.clone())
        };
        for (keys, unchanged) in files() {
            for (key, kind) in keys.each() {
                all.entry(key).or_insert((false, kind)).0 |= unchanged;
            }
        }
        if all.values().all(|(_, kind)| *kind == Kind::Tri) {
            self.hits.iter_mut().for_each(Vec::clear);
            return (None, BuildCounts::default());
        }
        for keys in &self.dropped {
            for (key, _) in keys.each() {
                if let Some((known, _)) = all.get_mut(&key) {
                    *known = true;
                }
            }
        }
        // The joined keys are looked up only for long words, so every scan
        // looks for all of them; a joined key visible text holds is public.
        let joined = Arc::new(SortedKeys::from_sorted(
            self.sources().map(|keys| &keys.joined[..]),
            |_| true,
        ));
        // The sets of the kept keys, by kind, in one pass.
        let sets_of =
            |keep: &dyn Fn(u64, bool) -> bool, joined: Arc<SortedKeys<u64>>, gapped: SortedKeys| {
                let mut by_kind: [Vec<u64>; 3] = Default::default();
                for (&key, &(known, kind)) in &all {
                    if keep(key, known) {
                        by_kind[kind as usize].push(key);
                    }
                }
                let [shingles, shorts, tri] = by_kind.map(|keys| KeySet::new(keys.into_iter()));
                Sets {
                    shingles,
                    shorts,
                    joined,
                    gapped,
                    tri,
                }
            };
        // Visible text is scanned for the exact keys and the runs of three:
        // a run of three some visible object holds is no anchor, so no
        // gapped key is ever looked for in visible text (its runs of three
        // are all public) and none needs to be found public.
        let changed: Vec<usize> = (0..self.files.len())
            .filter(|&f| !self.unchanged[f])
            .collect();
        let mut every = None;
        if !changed.is_empty() {
            let sets = sets_of(&|_, _| true, Arc::clone(&joined), SortedKeys::default());
            self.scan(&sets, &changed);
            every = Some(sets);
        }
        let unchanged: Vec<usize> = (0..self.files.len())
            .filter(|&f| self.unchanged[f])
            .collect();
        if !unchanged.is_empty() && all.values().any(|(known, _)| !known) {
            let fresh = sets_of(
                &|_, known| !known,
                Arc::clone(&joined),
                SortedKeys::default(),
            );
            self.scan(&fresh, &unchanged);
        }
        let mut public = Public::default();
        for hits in &mut self.hits {
            hits.retain(|&key| all.contains_key(&key) || joined.contains(key));
            hits.sort_unstable();
            hits.dedup();
            public.count(hits, &all, &joined);
        }
        // The sets of the scans are gone but `every`, which is given these.
        if let Some(sets) = every.as_mut() {
            sets.joined = Arc::default();
        }
        let keep = |key| !public.joined.contains_key(&key);
        let joined = Arc::new(match Arc::try_unwrap(joined) {
            Ok(joined) => joined.retain(keep),
            Err(joined) => SortedKeys::from_sorted(std::iter::once(&joined.keys[..]), keep),
        });
        let gapped = SortedKeys::from_sorted(self.sources().map(|keys| &keys.gapped[..]), |_| true);
        let counts = BuildCounts {
            keys: all.len() + joined.len() + gapped.len(),
            public: public.exact.len() + public.joined.len(),
        };
        // Few keys are public: the sets of every key, when there are, lose
        // them rather than being built again.
        let sets = match every {
            Some(mut sets) if public.exact.len() < all.len() / 4 => {
                for (&key, &(_, kind)) in &public.exact {
                    match kind {
                        Kind::Shingle => sets.shingles.remove(key),
                        Kind::Short => sets.shorts.remove(key),
                        Kind::Tri => sets.tri.remove(key),
                    }
                }
                sets.joined = joined;
                sets.gapped = gapped;
                sets
            }
            _ => sets_of(&|key, _| !public.exact.contains_key(&key), joined, gapped),
        };
        self.public = public;
        ((sets.len() > 0).then_some(sets), counts)
    }

    /// The keys of every file of the generation, loaded or not.
    fn sources(&self) -> impl Iterator<Item = &Arc<FileKeys>> {
        self.keys
            .iter()
            .chain(self.failed.iter().map(|(_, keys, _)| keys))
    }

    /// Adds to the hits of each file `files[f]`, `f` in `which`, the keys
    /// of `set` its visible text holds.
    fn scan(&mut self, set: &Sets, which: &[usize]) {
        let files: Vec<(&MemexFile, &FileKeys)> = which
            .iter()
            .map(|&f| (&**self.files[f], &*self.keys[f]))
            .collect();
        for (i, key) in scan(&files, &[set]) {
            self.hits[which[i as usize]].push(key);
        }
    }

    /// The work of this build: each file version (complete), the failed
    /// files' keys, the public keys.
    pub(crate) fn into_parts(self) -> (Vec<CachedFile>, Vec<FailedKeys>, Public) {
        let files = self
            .files
            .into_iter()
            .zip(self.keys)
            .zip(self.hits)
            .map(|((file, keys), hits)| CachedFile {
                version: file.version,
                path: file.path.clone(),
                keys,
                hits,
                complete: true,
            })
            .collect();
        let failed = self
            .failed
            .into_iter()
            .map(|(text, keys, _)| (text, keys))
            .collect();
        (files, failed, self.public)
    }
}

/// The keys of any of `sets` that the visible text of each of `files`
/// holds, as (index in `files`, key) pairs. Large texts are cut into one
/// run of whole ranges per core.
pub(crate) fn scan<L: Lookup + Sync>(
    files: &[(&MemexFile, &FileKeys)],
    sets: &[&L],
) -> Vec<(u32, u64)> {
    let pieces: Vec<(u32, u32, u32)> = files
        .iter()
        .enumerate()
        .flat_map(|(f, (_, keys))| {
            keys.visible
                .iter()
                .map(move |&(start, end)| (f as u32, start, end))
        })
        .collect();
    on_cores_by_size(
        &pieces,
        |piece| (piece.2 - piece.1) as usize,
        |pieces: &[(u32, u32, u32)]| {
            let mut splitter = Splitter::default();
            let mut spelling = Splitter::default().spelling();
            let mut words = Vec::new();
            let mut found: Vec<(u32, u64)> = Vec::new();
            for &(f, start, end) in pieces {
                let Some(text) = files[f as usize].0.text.get(start as usize..end as usize) else {
                    continue;
                };
                words.clear();
                splitter.split(text, true, &mut words);
                let spelled = has_spelled(&words);
                for set in sets {
                    set.each_run(text, &words, true, true, |_, _, key| {
                        found.push((f, key));
                    });
                }
                if spelled {
                    words.clear();
                    spelling.split(text, true, &mut words);
                    for set in sets {
                        set.each_run(text, &words, true, true, |_, _, key| {
                            found.push((f, key));
                        });
                    }
                }
            }
            found
        },
    )
}

/// `f` of each item, on every core when there are several items.
fn on_cores<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if items.len() < 2 || cores < 2 {
        return items.iter().map(f).collect();
    }
    let per = items.len().div_ceil(cores);
    std::thread::scope(|scope| {
        let f = &f;
        let threads: Vec<_> = items
            .chunks(per)
            .map(|chunk| {
                (
                    chunk,
                    std::thread::Builder::new()
                        .name("foveal-privacy".into())
                        .spawn_scoped(scope, move || chunk.iter().map(f).collect::<Vec<R>>()),
                )
            })
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for (chunk, thread) in threads {
            match thread.map(|t| t.join()) {
                Ok(Ok(results)) => out.extend(results),
                // No thread to be had, or it stopped: here, then.
                _ => out.extend(chunk.iter().map(f)),
            }
        }
        out
    })
}

/// Work above this many bytes is shared between the cores.
const PARALLEL_BYTES: usize = 1 << 20;

/// `f` of runs of `items` cut to about equal `size` per core, results
/// concatenated in order.
fn on_cores_by_size<T: Sync, R: Send>(
    items: &[T],
    size: impl Fn(&T) -> usize,
    f: impl Fn(&[T]) -> Vec<R> + Sync,
) -> Vec<R> {
    let total: usize = items.iter().map(&size).sum();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if total < PARALLEL_BYTES || cores < 2 {
        return f(items);
    }
    let per_core = total.div_ceil(cores);
    let mut runs: Vec<&[T]> = Vec::with_capacity(cores);
    let (mut start, mut bytes) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        bytes += size(item);
        if bytes >= per_core {
            runs.push(&items[start..=i]);
            (start, bytes) = (i + 1, 0);
        }
    }
    if start < items.len() {
        runs.push(&items[start..]);
    }
    on_cores(&runs, |run| f(run))
        .into_iter()
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_set_holds_exactly_its_keys() {
        let keys: Vec<u64> = (0..10_000u64)
            .map(|i| super::super::words::mix(i, 7))
            .collect();
        let set = KeySet::new(keys.iter().copied().chain(keys.iter().copied()));
        assert_eq!(set.len(), keys.len());
        assert!(keys.iter().all(|&k| set.contains(k)));
        let others = (10_000..20_000u64)
            .map(|i| super::super::words::mix(i, 7))
            .filter(|&k| set.contains(k))
            .count();
        assert_eq!(others, 0);
        assert!(KeySet::new(std::iter::empty()).is_empty());

        let mut set = set;
        for &key in keys.iter().step_by(2) {
            set.remove(key);
        }
        assert_eq!(set.len(), keys.len() / 2);
        for (i, &key) in keys.iter().enumerate() {
            assert_eq!(set.contains(key), i % 2 == 1);
        }
    }

    proptest::proptest! {
        /// Removals move the keys probed past a hole back (the table is
        /// its own): after any mix of keys — crowded into a few home
        /// slots, wrapping past the table's end, the key 0 — and
        /// removals, the set is exactly what a `HashSet` holds, and its
        /// parts read back are the same set.
        #[test]
        fn a_key_set_after_removals_holds_what_a_hash_set_holds(
            keys in proptest::collection::vec(0u64..64, 1..120),
            removed in proptest::collection::vec(0usize..200, 0..80),
            spread in proptest::bool::ANY,
        ) {
            // Keys sharing a home slot (the table's hash multiplies by an
            // odd constant; its inverse times a small number is a key whose
            // home is slot 0), the run wrapping past the table's end.
            let key = |k: u64| if spread { super::super::words::mix(k, 3) } else { k.wrapping_mul(0xf1de83e19937733d) };
            let keys: Vec<u64> = keys.into_iter().map(key).collect();
            let mut set = KeySet::new(keys.iter().copied());
            let mut model: std::collections::HashSet<u64> = keys.iter().copied().collect();
            for at in removed {
                let k = keys[at % keys.len()];
                set.remove(k);
                model.remove(&k);
                proptest::prop_assert_eq!(set.len(), model.len());
                for &k in &keys {
                    proptest::prop_assert_eq!(set.contains(k), model.contains(&k), "key {:x}", k);
                }
            }
            let mut seen: Vec<u64> = set.iter().collect();
            seen.sort_unstable();
            let mut want: Vec<u64> = model.iter().copied().collect();
            want.sort_unstable();
            proptest::prop_assert_eq!(&seen, &want);
            let (bloom, slots, zero, len) = set.parts();
            let back = KeySet::from_parts(bloom.into(), slots.into(), zero, len).unwrap();
            for &k in &keys {
                proptest::prop_assert_eq!(back.contains(k), model.contains(&k));
            }
        }
    }
}
