//! Counting tokens the way the model does (seed 003): the model's BPE
//! encoding through `tiktoken-rs`, `o200k_base` by default and
//! `cl100k_base` for older models.
//!
//! - The encoding's tables are loaded once, lazily, on the first count that
//!   needs them (≈ 0.3 s for `o200k_base`), never at start-up.
//! - Counts are cached by content (length and a 64-bit hash), so an
//!   unchanged section is never tokenized twice.
//! - A long text (4 KiB or more) is counted in chunks of a few lines, each
//!   cached: after a one-line edit of a 4k-token section only the chunk
//!   holding it is tokenized again (≈ 0.3 ms instead of ≈ 4 ms, release
//!   build). The sum is exact, not an estimate: the text is cut only where
//!   no pre-tokenizer piece of either encoding can span the cut (see
//!   [`chunks`]), and BPE merges never cross pieces.
//! - A text of `n` bytes has at most `n` tokens: [`TokenCounter::fits`]
//!   answers "does it fit in this budget" without the tables whenever the
//!   byte length already fits.
//!
//! Skills count through the host API (`count_tokens`), which uses the
//! process's [`global`] counter.
//!
//! # Example
//!
//! ```
//! use foveal_registry::tokens::{Encoding, TokenCounter};
//!
//! let counter = TokenCounter::new(Encoding::O200kBase);
//! assert_eq!(counter.count(""), 0);
//! assert!(counter.fits("short", 100)); // answered from the byte length
//! ```

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use tiktoken_rs::CoreBPE;

/// A BPE encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Encoding {
    /// GPT-4o and later (the default).
    #[default]
    O200kBase,
    /// GPT-4, GPT-3.5.
    Cl100kBase,
}

impl Encoding {
    /// The encoding's name, as written in config.
    pub fn name(self) -> &'static str {
        match self {
            Self::O200kBase => "o200k_base",
            Self::Cl100kBase => "cl100k_base",
        }
    }

    fn tables(self) -> &'static CoreBPE {
        let tables = match self {
            Self::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Self::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        };
        self.loaded().store(true, Ordering::Relaxed);
        tables
    }

    /// Set once the encoding's tables are in memory.
    fn loaded(self) -> &'static AtomicBool {
        static O200K: AtomicBool = AtomicBool::new(false);
        static CL100K: AtomicBool = AtomicBool::new(false);
        match self {
            Self::O200kBase => &O200K,
            Self::Cl100kBase => &CL100K,
        }
    }
}

impl FromStr for Encoding {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "o200k_base" => Ok(Self::O200kBase),
            "cl100k_base" => Ok(Self::Cl100kBase),
            other => Err(format!(
                "unknown encoding {other:?}; expected \"o200k_base\" or \"cl100k_base\""
            )),
        }
    }
}

impl std::fmt::Display for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Cached entries kept before the cache starts over.
const CACHE_CAPACITY: usize = 1 << 16;

/// Texts shorter than this are counted directly: hashing and locking would
/// cost about as much as the count.
const CACHE_MIN_BYTES: usize = 64;

/// Texts at least this long are counted in [`chunks`], each cached.
const CHUNKED_FROM: usize = 4096;

/// Counts tokens with one encoding, caching by content.
#[derive(Debug)]
pub struct TokenCounter {
    encoding: Encoding,
    cache: Mutex<HashMap<(u64, usize), usize>>,
    hasher: std::collections::hash_map::RandomState,
}

impl TokenCounter {
    /// A counter for `encoding`. Loads nothing yet.
    pub fn new(encoding: Encoding) -> Self {
        Self {
            encoding,
            cache: Mutex::new(HashMap::new()),
            hasher: Default::default(),
        }
    }

    /// The encoding counted with.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The number of tokens of `text` (no special tokens are recognised:
    /// `<|endoftext|>` in a memex counts as ordinary text).
    pub fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        if text.len() < CACHE_MIN_BYTES {
            return encode_len(self.encoding.tables(), text);
        }
        if text.len() >= CHUNKED_FROM {
            return self.count_chunked(text);
        }
        let key = (self.hash(text), text.len());
        if let Some(&n) = self.lock().get(&key) {
            return n;
        }
        let n = encode_len(self.encoding.tables(), text);
        let mut cache = self.lock();
        if cache.len() >= CACHE_CAPACITY {
            cache.clear();
        }
        cache.insert(key, n);
        n
    }

    /// Whether `text` fits in `budget` tokens. Counts only when the byte
    /// length (an upper bound of the token count) does not already fit.
    pub fn fits(&self, text: &str, budget: usize) -> bool {
        text.len() <= budget || self.count(text) <= budget
    }

    /// Whether the encoding's tables are loaded in this process: counting
    /// costs no start-up any more.
    pub fn is_loaded(&self) -> bool {
        self.encoding.loaded().load(Ordering::Relaxed)
    }

    /// The sum of the cached counts of `text`'s chunks. The cache lock is
    /// taken once to look every chunk up and once to store the new ones;
    /// tokenizing happens outside it.
    fn count_chunked(&self, text: &str) -> usize {
        let pieces: Vec<(&str, (u64, usize))> = chunks(text)
            .map(|chunk| (chunk, (self.hash(chunk), chunk.len())))
            .collect();
        let mut total = 0;
        let mut missing = Vec::new();
        {
            let cache = self.lock();
            for (chunk, key) in &pieces {
                match cache.get(key) {
                    Some(&n) => total += n,
                    None => missing.push((*chunk, *key)),
                }
            }
        }
        if missing.is_empty() {
            return total;
        }
        let tables = self.encoding.tables();
        let counted: Vec<((u64, usize), usize)> = missing
            .into_iter()
            .map(|(chunk, key)| (key, encode_len(tables, chunk)))
            .collect();
        let mut cache = self.lock();
        if cache.len() + counted.len() > CACHE_CAPACITY {
            cache.clear();
        }
        for (key, n) in counted {
            total += n;
            cache.insert(key, n);
        }
        total
    }

    fn hash(&self, text: &str) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        hasher.write(text.as_bytes());
        hasher.finish()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, usize), usize>> {
        // The cache holds plain numbers: a panic elsewhere cannot leave it
        // inconsistent, so a poisoned lock is still usable.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs of more than this many bytes without whitespace are not handed to
/// the tokenizer: its pre-tokenizer's regex overflows its stack on a run
/// of about a megabyte (a panic), and its merges take quadratic time in a
/// piece's length (a 100 kB word took seconds). Such a run counts as its
/// length in bytes, an upper bound of its tokens; natural text has no
/// such runs, so its counts stay exact.
const MAX_RUN: usize = 256;

/// The tokens of `text`: exact for text without runs longer than
/// [`MAX_RUN`], an upper bound otherwise; the byte length (an upper bound
/// too) if the tokenizer fails.
fn encode_len(tables: &CoreBPE, text: &str) -> usize {
    let bytes = text.as_bytes();
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C);
    let mut total = 0;
    let mut start = 0;
    let mut run = 0;
    let mut i = 0;
    while i < bytes.len() {
        if is_space(bytes[i]) {
            run = 0;
            i += 1;
            continue;
        }
        run += 1;
        if run <= MAX_RUN {
            i += 1;
            continue;
        }
        // A long run: everything before it, then the run (with the space
        // before it, which the tokenizer would give to its first piece)
        // as bytes.
        let mut run_start = i + 1 - run;
        if run_start > start && is_space(bytes[run_start - 1]) {
            run_start -= 1;
        }
        let mut end = i;
        while end < bytes.len() && !is_space(bytes[end]) {
            end += 1;
        }
        let before = floor_char_boundary(text, run_start.max(start));
        total += guarded(tables, &text[start..before]);
        total += end - before;
        start = end;
        run = 0;
        i = end;
    }
    total + guarded(tables, &text[start..])
}

/// The largest char boundary of `text` at or before `at`.
fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The tokenizer's count of `text`, or its byte length if the tokenizer
/// panics: a count is never worth a crash.
fn guarded(tables: &CoreBPE, text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tables.encode_ordinary(text).len()
    }))
    .unwrap_or_else(|_| {
        tracing::warn!(
            target: "foveal::tokens",
            bytes = text.len(),
            "the tokenizer failed on a text; its length in bytes is counted instead"
        );
        text.len()
    })
}

/// Cuts `text` into pieces whose token counts add up to the count of the
/// whole, for both encodings.
///
/// A cut is made right after the last line break of a run of whitespace
/// (`\s`, Unicode included) that holds one, unless the next character is
/// `/`. In both encodings' pre-tokenizer patterns, the only pieces that can
/// hold a line break are `\s*[\r\n]+` (which runs to the last line break
/// it can reach through whitespace and stops there), `\s+(?!\S)` and
/// `\s+` (tried only where `\s*[\r\n]+` does not match, so never over a
/// line break), and punctuation followed by line breaks,
/// ` ?[^\s\p{L}\p{N}]+[\r\n/]*` (o200k also takes a `/` after them, hence
/// the exception; cl100k's has `[\r\n]*`). So a piece ends at every such
/// point, the pieces of the whole are the pieces of the parts, and BPE,
/// which merges within a piece only, gives the same tokens. No pattern
/// looks behind. The property test below checks this against whole-text
/// counts.
///
/// Not every such point is a cut: one in about four is, chosen by the bytes
/// of the line before it ([`chunk_ends_here`]), so a chunk is a few lines
/// and the cuts depend on the text near them only — an edit changes the
/// chunk it falls in (and the next one, when it changes whether its own
/// line ends a chunk) and leaves every other chunk, and its cached count,
/// as it was. Indented lines (code, JSON) cut as well as others. A chunk
/// that grows past [`MAX_CHUNK_BYTES`] without a chosen cut (a few lines
/// repeated) is cut at the next safe point.
pub fn chunks(text: &str) -> impl Iterator<Item = &str> {
    chunks_by(text, chunk_ends_here)
}

/// [`chunks`], with `cut` choosing which safe points are cuts (the tests
/// cut at every one).
fn chunks_by(text: &str, cut: fn(&[u8]) -> bool) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        let mut at = start;
        loop {
            let Some(nl) = memchr::memchr2(b'\n', b'\r', &bytes[at..]) else {
                let chunk = &text[start..];
                start = bytes.len();
                return Some(chunk);
            };
            let line_end = at + nl;
            // The whitespace run from here, and the end of its last line
            // break.
            let mut end = line_end;
            let mut after_break = line_end;
            while let Some(len) = whitespace_len(&bytes[end..]) {
                if bytes[end] == b'\n' || bytes[end] == b'\r' {
                    after_break = end + 1;
                }
                end += len;
            }
            if end >= bytes.len() {
                let chunk = &text[start..];
                start = bytes.len();
                return Some(chunk);
            }
            if bytes[after_break] != b'/'
                && (cut(&bytes[at..line_end]) || after_break - start >= MAX_CHUNK_BYTES)
            {
                let chunk = &text[start..after_break];
                start = after_break;
                return Some(chunk);
            }
            at = end;
        }
    })
}

/// A chunk is cut at the first safe point past this many bytes even when
/// no line chose to end it (text made of a few repeated lines).
const MAX_CHUNK_BYTES: usize = 2048;

/// Whether a chunk may end after `line` (without its line break): about
/// one line in four, decided by the line's own bytes so that the cuts do
/// not shift when text before them changes.
fn chunk_ends_here(line: &[u8]) -> bool {
    // FNV-1a over the line: cheap, and local to it.
    let mut h: u32 = 0x811c_9dc5;
    for &b in line {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h & 3 == 0
}

/// The length in bytes of the whitespace character `bytes` starts with, if
/// it starts with one (`\s` in the patterns is Unicode White_Space:
/// U+0009–000D, U+0020, U+0085, U+00A0, U+1680, U+2000–200A, U+2028/9,
/// U+202F, U+205F, U+3000).
fn whitespace_len(bytes: &[u8]) -> Option<usize> {
    match bytes {
        [b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ', ..] => Some(1),
        [0xC2, 0x85 | 0xA0, ..] => Some(2),
        [0xE1, 0x9A, 0x80, ..] => Some(3),
        [0xE2, 0x80, 0x80..=0x8A | 0xA8 | 0xA9 | 0xAF, ..] => Some(3),
        [0xE2, 0x81, 0x9F, ..] => Some(3),
        [0xE3, 0x80, 0x80, ..] => Some(3),
        _ => None,
    }
}

static GLOBAL: OnceLock<TokenCounter> = OnceLock::new();

/// Chooses the encoding of the process's counter. Only the first call (or
/// the first use of [`global`]) decides; returns whether this call did.
pub fn configure(encoding: Encoding) -> bool {
    GLOBAL.set(TokenCounter::new(encoding)).is_ok()
}

/// The process's counter: the one the host API lends to skills.
pub fn global() -> &'static TokenCounter {
    GLOBAL.get_or_init(|| TokenCounter::new(Encoding::default()))
}

/// Loads the host's token tables, if nothing has yet, before a skill call
/// that may count tokens through the host (a component asked for within a
/// budget, a context-window item added or opened): the first load takes
/// 0.3 s in a release build and seconds in a debug build on a busy
/// machine, which must not be spent inside the skill's call and its
/// deadline (`plugins.hook_timeout_ms`).
pub fn warm() {
    let counter = global();
    if !counter.is_loaded() {
        counter.count("warm");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_the_reference_encodings() {
        // Reference counts from OpenAI's tiktoken (Python) for these strings.
        let o200k = TokenCounter::new(Encoding::O200kBase);
        assert_eq!(o200k.count("hello world"), 2);
        let cl100k = TokenCounter::new(Encoding::Cl100kBase);
        assert_eq!(cl100k.count("hello world"), 2);
        assert_eq!(cl100k.count("tiktoken is great!"), 6);
    }

    #[test]
    fn a_cached_count_equals_a_fresh_one() {
        let counter = TokenCounter::new(Encoding::O200kBase);
        let text = "* Project :project:\n:PROPERTIES:\n:ID: abc\n:END:\n".repeat(20);
        let first = counter.count(&text);
        assert_eq!(counter.count(&text), first);
        assert_eq!(
            first,
            Encoding::O200kBase.tables().encode_ordinary(&text).len()
        );
        // Another text of the same length is not confused with it.
        let other = text.replace("abc", "xyz");
        assert_eq!(
            counter.count(&other),
            Encoding::O200kBase.tables().encode_ordinary(&other).len()
        );
    }

    #[test]
    fn special_token_text_counts_as_ordinary_text() {
        let counter = TokenCounter::new(Encoding::O200kBase);
        assert!(counter.count("<|endoftext|>") > 1);
    }

    #[test]
    fn fits_uses_bytes_as_an_upper_bound() {
        let counter = TokenCounter::new(Encoding::O200kBase);
        assert!(counter.fits("abc", 3));
        // 400 bytes of a repeated word are far fewer than 400 tokens.
        let text = "word ".repeat(80);
        assert!(counter.fits(&text, 100));
        assert!(!counter.fits(&text, 10));
    }

    #[test]
    fn a_long_text_counts_the_same_in_chunks_and_an_edit_changes_the_chunk_it_falls_in() {
        let text = "* TODO Project alpha :project:\n:PROPERTIES:\n:ID: abc-123\n:END:\nSome body text, about the plan; and what remains.\n** Subtask / one\n  indented line\n  {\"json\": [1, 2]}\n\n\n/path/like\n"
            .repeat(100);
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let counter = TokenCounter::new(encoding);
            let whole = encoding.tables().encode_ordinary(&text).len();
            assert_eq!(counter.count(&text), whole);
            assert_eq!(counter.count(&text), whole, "cached");
            assert_eq!(chunks(&text).collect::<String>(), text);
            let before: Vec<&str> = chunks(&text).collect();
            assert!(before.len() > 50, "{} chunks", before.len());
            let edited = text.replacen("what remains", "what remains to be done", 1);
            let after: Vec<&str> = chunks(&edited).collect();
            // The chunk the edit falls in, and the next one when the edit
            // changes whether its line ends a chunk.
            let changed = after.iter().filter(|c| !before.contains(c)).count();
            assert!((1..=2).contains(&changed), "{changed} chunks changed");
            assert_eq!(
                counter.count(&edited),
                encoding.tables().encode_ordinary(&edited).len()
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(160))]
        #[test]
        fn chunked_counts_equal_whole_text_counts(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::string::string_regex("[a-zA-Z]{1,8}").unwrap(),
                    proptest::string::string_regex("[0-9]{1,5}").unwrap(),
                    proptest::string::string_regex("[ \t\x0b\x0c]{1,4}").unwrap(),
                    proptest::string::string_regex("[\r\n]{1,3}").unwrap(),
                    proptest::string::string_regex("[-*:/.,;!?'\"()\\{}]{1,3}").unwrap(),
                    proptest::string::string_regex("[\u{a0}\u{85}\u{2028}\u{3000}éß日本]{1,2}").unwrap(),
                    proptest::string::string_regex("'(s|t|re|ve|m|ll|d|S|LL)").unwrap(),
                ],
                0..1500,
            )
        ) {
            let text: String = parts.concat();
            for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
                let sum: usize = chunks_by(&text, |_| true)
                    .map(|c| encoding.tables().encode_ordinary(c).len())
                    .sum();
                proptest::prop_assert_eq!(sum, encoding.tables().encode_ordinary(&text).len());
            }
        }
    }

    #[test]
    fn every_safe_point_is_safe_on_tricky_line_breaks() {
        let tricky = [
            "a:\n/b\nc",
            "a\n \nb\n  c",
            "x\n\u{3000}\ny\n\u{a0}z",
            "}\n\n  /x\n/y",
            "a \n\t\n  b\n\x0b\nc",
            "'s\n's\n'LL\n",
            "1\n2\n333\n4444",
            "\r\n\r\nword\r\n  word",
            "    \"k\": 1,\n    \"v\": [\n      2\n    ]\n",
            "fn f() {\n    x /= 2;\n}\n//comment\n",
            "\u{2028}\nu\n\u{85}v",
        ];
        for text in tricky {
            for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
                let parts: Vec<&str> = chunks_by(text, |_| true).collect();
                assert_eq!(parts.concat(), text);
                let sum: usize = parts
                    .iter()
                    .map(|c| encoding.tables().encode_ordinary(c).len())
                    .sum();
                assert_eq!(
                    sum,
                    encoding.tables().encode_ordinary(text).len(),
                    "{text:?} cut as {parts:?} ({encoding})"
                );
            }
        }
    }

    #[test]
    fn a_word_of_megabytes_counts_fast_as_an_upper_bound_and_never_panics() {
        let counter = TokenCounter::new(Encoding::O200kBase);
        for text in [
            "a".repeat(10 << 20),
            format!("hello {} world", "!".repeat(2 << 20)),
            format!("é{}", "ü".repeat(1 << 20)),
        ] {
            let started = std::time::Instant::now();
            let n = counter.count(&text);
            assert!(n > 0 && n <= text.len(), "{n} of {}", text.len());
            assert!(started.elapsed() < std::time::Duration::from_secs(20));
        }
        // Around a long run, the rest counts as it would alone.
        let long = "x".repeat(MAX_RUN + 1);
        let text = format!("hello world {long} and more");
        let tables = Encoding::O200kBase.tables();
        let expected = tables.encode_ordinary("hello world").len()
            + (long.len() + 1)
            + tables.encode_ordinary(" and more").len();
        assert_eq!(counter.count(&text), expected);
        // Without long runs, exact.
        let text = "word ".repeat(1000);
        assert_eq!(counter.count(&text), tables.encode_ordinary(&text).len());
    }

    #[test]
    fn encodings_parse_by_name() {
        assert_eq!("o200k_base".parse::<Encoding>(), Ok(Encoding::O200kBase));
        assert_eq!("cl100k_base".parse::<Encoding>(), Ok(Encoding::Cl100kBase));
        assert!(
            "gpt2"
                .parse::<Encoding>()
                .unwrap_err()
                .contains("o200k_base")
        );
    }
}
