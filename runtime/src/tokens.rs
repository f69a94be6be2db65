//! Counting tokens the way the model does (seed 003): the model's BPE
//! encoding through `tiktoken-rs`, `o200k_base` by default and
//! `cl100k_base` for older models.
//!
//! - The encoding's tables are loaded once, lazily, on the first count that
//!   needs them (≈ 0.3 s for `o200k_base`), never at start-up.
//! - Counts are cached by content (length and a 64-bit hash), so an
//!   unchanged section is never tokenized twice.
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
//! use foveal::tokens::{Encoding, TokenCounter};
//!
//! let counter = TokenCounter::new(Encoding::O200kBase);
//! assert_eq!(counter.count(""), 0);
//! assert!(counter.fits("short", 100)); // answered from the byte length
//! ```

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::str::FromStr;
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
        match self {
            Self::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Self::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
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
            return self.encoding.tables().encode_ordinary(text).len();
        }
        let key = (self.hash(text), text.len());
        if let Some(&n) = self.lock().get(&key) {
            return n;
        }
        let n = self.encoding.tables().encode_ordinary(text).len();
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
    fn encodings_parse_by_name() {
        assert_eq!("o200k_base".parse::<Encoding>(), Ok(Encoding::O200kBase));
        assert_eq!("cl100k_base".parse::<Encoding>(), Ok(Encoding::Cl100kBase));
        assert!("gpt2".parse::<Encoding>().unwrap_err().contains("o200k_base"));
    }
}
