//! Words as the privacy gate compares them: a quote of private text is
//! recognised however it is cased, spaced, wrapped, bulleted, marked up or
//! Unicode-normalised.
//!
//! A text is cut into **words**: runs of letters, digits and combining
//! marks (so a word in NFD form stays one word). Everything else —
//! spaces, line breaks, punctuation, Org markup (`*bold*`, `/it/`,
//! `=code=`, `~verb~`, `+strike+`, `_under_`) — only separates words. On
//! the way:
//!
//! - each word is folded: Unicode NFKC, then lower case (`ß` as `ss`, a
//!   final `ς` as `σ`), so `Café`, `CAFE\u{301}` and `ｃａｆé` are one word;
//! - a run of words never continues into an Org headline line (`** x`):
//!   no quote does, and an outline puts a headline after every body;
//! - a Han, Hiragana or Katakana character is a word by itself (those
//!   scripts put no spaces between words);
//! - list counters at the start of a line (`1.`, `12)`, `a.`), checkboxes
//!   (`[ ]`, `[X]`, `[-]`) and statistics cookies (`[2/5]`, `[40%]`) are
//!   dropped, and a link `[[target][description]]` counts as its
//!   description only;
//! - JSON string escapes read as what they stand for (`\n`, `\"` separate
//!   words, `\u00e9` is `é`), at any depth of nesting (`\\n` is JSON
//!   quoted in JSON, as tool arguments are), so text quoted inside a JSON
//!   document — a tool's output, say — is the same words as the text
//!   itself. Any other backslash separates words.
//!
//! Each word becomes a 64-bit hash of its folded form; a run of `k` words
//! becomes one 64-bit key ([`RunKeys`]). The gate compares keys, never
//! text, so what it keeps of private text is a set of numbers.

use unicode_normalization::UnicodeNormalization as _;

/// One word of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word {
    /// Its first byte in the text.
    pub start: u32,
    /// One past its last byte.
    pub end: u32,
    /// The hash of its folded form.
    pub hash: u64,
    /// Whether it is the first word of its line.
    pub line_start: bool,
    /// Whether it is the first word of an Org headline (a line of `*`s
    /// and a space): a run of words never continues into a headline, as
    /// no quote does; a rendered outline puts one after each body.
    pub headline: bool,
}

/// One step of the hashes here: multiply and fold.
#[inline]
pub(crate) fn mix(h: u64, w: u64) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let m = u128::from(h ^ w) * u128::from(K);
    (m as u64) ^ ((m >> 64) as u64)
}

/// The hash of a folded word's bytes, eight at a time.
#[inline]
fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = mix(0x243f_6a88_85a3_08d3, bytes.len() as u64);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        h = mix(h, u64::from_le_bytes(w));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = mix(h, u64::from_le_bytes(w));
    }
    h
}

/// The key of a run of words, built a word at a time: after
/// [`push`](Self::push)ing `k` words, [`key`](Self::key) is the key of
/// that run of `k`. Equal runs have equal keys whatever text they came
/// from; runs of different lengths never share a key by construction.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunKeys {
    h: u64,
    len: u64,
}

impl RunKeys {
    pub(crate) fn new() -> Self {
        Self {
            h: 0x1319_8a2e_0370_7344,
            len: 0,
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, word: u64) {
        self.h = mix(self.h, word);
        self.len += 1;
    }

    #[inline]
    pub(crate) fn key(&self) -> u64 {
        mix(self.h, 0xa409_3822_299f_31d0 ^ self.len)
    }
}

/// The key of `words`, as a run.
pub(crate) fn run_key(words: &[Word]) -> u64 {
    let mut keys = RunKeys::new();
    for word in words {
        keys.push(word.hash);
    }
    keys.key()
}

/// Whether `c` is written without spaces between words: each one is a
/// word of its own.
#[inline]
fn is_unspaced(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF // Hiragana, Katakana
        | 0x31F0..=0x31FF // Katakana extensions
        | 0x3400..=0x4DBF // Han extension A
        | 0x4E00..=0x9FFF // Han
        | 0xF900..=0xFAFF // Han compatibility
        | 0xFF66..=0xFF9F // halfwidth Katakana
        | 0x20000..=0x3FFFF) // Han extensions B…
}

#[inline]
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || unicode_normalization::char::is_combining_mark(c)
}

/// The length of a list counter (`1.`, `12)`, `a.`) with the space after
/// it at the start of `rest`, or 0.
fn counter_len(rest: &[u8]) -> usize {
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let n = if digits > 0 {
        if digits > 9 {
            return 0;
        }
        digits
    } else if rest.first().is_some_and(u8::is_ascii_alphabetic) {
        1
    } else {
        return 0;
    };
    match (rest.get(n), rest.get(n + 1)) {
        (Some(b'.' | b')'), None | Some(b' ' | b'\t' | b'\r' | b'\n')) => n + 1,
        _ => 0,
    }
}

/// The length of a checkbox or statistics cookie at the start of `rest`
/// (which starts with `[`), or 0.
fn cookie_len(rest: &[u8]) -> usize {
    if let (Some(b' ' | b'X' | b'x' | b'-'), Some(b']')) = (rest.get(1), rest.get(2)) {
        return 3;
    }
    let mut i = 1;
    while rest.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    match rest.get(i) {
        Some(b'%') if rest.get(i + 1) == Some(&b']') => i + 2,
        Some(b'/') => {
            i += 1;
            while rest.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if rest.get(i) == Some(&b']') { i + 1 } else { 0 }
        }
        _ => 0,
    }
}

/// Where the description of a link `[[target][description]]` at the start
/// of `rest` begins (past `][`), or 0 when it is not one (or has no
/// description): the target is not read as words.
fn link_target_len(rest: &[u8]) -> usize {
    const MAX_TARGET: usize = 4096;
    let end = rest.len().min(MAX_TARGET);
    let mut i = 2;
    while i + 1 < end {
        match (rest[i], rest[i + 1]) {
            (b']', b'[') => return i + 2,
            (b']', b']') | (b'\n', _) => return 0,
            _ => i += 1,
        }
    }
    0
}

/// The value of 4 hex digits.
fn hex4(bytes: &[u8]) -> Option<u32> {
    if bytes.len() < 4 {
        return None;
    }
    let mut v = 0u32;
    for &b in &bytes[..4] {
        v = v * 16 + (b as char).to_digit(16)?;
    }
    Some(v)
}

/// A JSON `\uXXXX` escape (or surrogate pair) at the start of `rest`: the
/// character and the escape's length.
fn unicode_escape(rest: &[u8]) -> Option<(char, usize)> {
    if rest.get(1) != Some(&b'u') {
        return None;
    }
    let unit = hex4(&rest[2..])?;
    if (0xD800..0xDC00).contains(&unit) {
        // The low half, after as many backslashes as the high one.
        let slashes = rest[6..].iter().take_while(|&&b| b == b'\\').count();
        if slashes > 0 && rest.get(6 + slashes) == Some(&b'u') {
            let low = hex4(&rest[7 + slashes..])?;
            if (0xDC00..0xE000).contains(&low) {
                let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                return char::from_u32(c).map(|c| (c, 11 + slashes));
            }
        }
        return None;
    }
    char::from_u32(unit).map(|c| (c, 6))
}

/// Cuts texts into [`Word`]s, reusing its buffers from one text to the
/// next.
#[derive(Debug, Default)]
pub(crate) struct Splitter {
    /// The current word's folded bytes (ASCII words) or characters.
    word: String,
    ascii: bool,
    start: usize,
    /// What the current word opens (a line, a headline).
    mark: Mark,
    /// What the next word to start will open.
    pending: Mark,
    folded: String,
}

/// What a word opens.
#[derive(Debug, Default, Clone, Copy)]
struct Mark {
    line: bool,
    headline: bool,
}

/// The length of an Org headline's stars and the space after them at the
/// start of `rest`, or 0.
fn stars_len(rest: &[u8]) -> usize {
    let stars = rest.iter().take_while(|&&b| b == b'*').count();
    if stars > 0 && matches!(rest.get(stars), Some(b' ' | b'\t')) {
        stars + 1
    } else {
        0
    }
}

impl Splitter {
    /// Appends the words of `text` to `out`. With `escapes`, JSON string
    /// escapes read as what they stand for.
    pub(crate) fn split(&mut self, text: &str, escapes: bool, out: &mut Vec<Word>) {
        self.split_at(text, 0, escapes, out);
    }

    /// [`split`](Self::split) for `text` found at byte `offset` of a larger
    /// text: the words' positions are in the larger text.
    pub(crate) fn split_at(
        &mut self,
        text: &str,
        offset: usize,
        escapes: bool,
        out: &mut Vec<Word>,
    ) {
        let bytes = text.as_bytes();
        self.word.clear();
        let mut i = self.new_line(bytes, 0);
        while i < bytes.len() {
            let b = bytes[i];
            if b.is_ascii_alphanumeric() {
                if self.word.is_empty() {
                    self.begin(i, true);
                }
                self.word.push(b.to_ascii_lowercase() as char);
                i += 1;
                continue;
            }
            if b >= 0x80 {
                // Not ASCII: a whole character.
                let c = text[i..].chars().next().unwrap_or('\u{FFFD}');
                let len = c.len_utf8();
                self.char(c, offset, i, i + len, out);
                i += len;
                continue;
            }
            // A JSON escape, at any depth of nesting (`\n`, `\\n`, …: JSON
            // quoted inside JSON, as tool arguments are) reads as what it
            // stands for. An escaped character may go on a word.
            let backslashes = if escapes && b == b'\\' {
                bytes[i..].iter().take_while(|&&b| b == b'\\').count()
            } else {
                0
            };
            if backslashes > 0
                && let Some((c, len)) = unicode_escape(&bytes[i + backslashes - 1..])
            {
                self.char(c, offset, i, i + backslashes - 1 + len, out);
                i += backslashes - 1 + len;
                continue;
            }
            self.finish(offset, i, out);
            i = match b {
                b'\n' => self.new_line(bytes, i + 1),
                b'[' if bytes.get(i + 1) == Some(&b'[') => i + link_target_len(&bytes[i..]).max(2),
                b'[' => i + cookie_len(&bytes[i..]).max(1),
                b'\\' if escapes => {
                    let after = i + backslashes;
                    match bytes.get(after) {
                        Some(b'n') => self.new_line(bytes, after + 1),
                        Some(b't' | b'r' | b'b' | b'f' | b'"' | b'/') => after + 1,
                        _ => after,
                    }
                }
                _ => i + 1,
            };
        }
        self.finish(offset, bytes.len(), out);
    }

    /// A line starts at `at`: the next word opens it, a list counter is
    /// skipped, and an Org headline's stars make it open a headline too.
    fn new_line(&mut self, bytes: &[u8], at: usize) -> usize {
        let stars = stars_len(&bytes[at..]);
        self.pending = Mark {
            line: true,
            headline: stars > 0,
        };
        if stars > 0 {
            return at + stars;
        }
        let mut j = at;
        while j < bytes.len() && matches!(bytes[j], b' ' | b'\t') {
            j += 1;
        }
        j + counter_len(&bytes[j..])
    }

    /// A word starts at `start`.
    #[inline]
    fn begin(&mut self, start: usize, ascii: bool) {
        self.start = start;
        self.ascii = ascii;
        self.mark = std::mem::take(&mut self.pending);
    }

    /// One non-ASCII (or escaped) character at `start..end`.
    #[inline]
    fn char(&mut self, c: char, offset: usize, start: usize, end: usize, out: &mut Vec<Word>) {
        if is_unspaced(c) {
            self.finish(offset, start, out);
            self.begin(start, false);
            self.word.push(c);
            self.finish(offset, end, out);
        } else if is_word_char(c) {
            if self.word.is_empty() {
                self.begin(start, c.is_ascii());
            }
            if c.is_ascii() {
                self.word.push(c.to_ascii_lowercase());
            } else {
                self.ascii = false;
                self.word.push(c);
            }
        } else {
            self.finish(offset, start, out);
        }
    }

    /// Ends the current word at `end`, if there is one.
    #[inline]
    fn finish(&mut self, offset: usize, end: usize, out: &mut Vec<Word>) {
        if self.word.is_empty() {
            return;
        }
        let hash = if self.ascii {
            hash_bytes(self.word.as_bytes())
        } else {
            self.folded.clear();
            for c in self.word.nfkc() {
                match c {
                    'ß' | 'ẞ' => self.folded.push_str("ss"),
                    'ς' => self.folded.push('σ'),
                    c if c.is_alphanumeric() => self.folded.extend(c.to_lowercase()),
                    c if unicode_normalization::char::is_combining_mark(c) => self.folded.push(c),
                    _ => {}
                }
            }
            if self.folded.is_empty() {
                self.word.clear();
                return;
            }
            hash_bytes(self.folded.as_bytes())
        };
        out.push(Word {
            start: (offset + self.start) as u32,
            end: (offset + end) as u32,
            hash,
            line_start: self.mark.line,
            headline: self.mark.headline,
        });
        self.word.clear();
    }
}

/// The words of `text` (with JSON escapes read), for tests and one-off
/// uses.
#[cfg(test)]
pub(crate) fn words(text: &str) -> Vec<Word> {
    let mut out = Vec::new();
    Splitter::default().split(text, true, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(text: &str) -> Vec<u64> {
        words(text).iter().map(|w| w.hash).collect()
    }

    fn spans(text: &str) -> Vec<&str> {
        words(text)
            .iter()
            .map(|w| &text[w.start as usize..w.end as usize])
            .collect()
    }

    #[test]
    fn variants_a_person_would_recognise_are_the_same_words() {
        let plain = hashes("met ann at the cafe harbour");
        for variant in [
            "Met Ann at the cafe harbour.",
            "MET  ann\tat the\ncafe   harbour",
            "- [ ] Met *Ann* at /the/ =cafe= ~harbour~",
            "  1. Met Ann, at the cafe; harbour!",
            "Met \\\"Ann\\\" at\\nthe cafe\\tharbour",
            "Ｍｅｔ Ａｎｎ at the cafe harbour",
        ] {
            assert_eq!(hashes(variant), plain, "{variant}");
        }
        let accented = hashes("Café Straße ΟΔΟΣ");
        for variant in [
            "cafe\u{301} strasse οδοσ",
            "CAFÉ STRASSE οδος",
            "caf\\u00e9 strasse οδος",
        ] {
            assert_eq!(hashes(variant), accented, "{variant}");
        }
        assert_ne!(hashes("cafe"), hashes("café"));
    }

    #[test]
    fn links_cookies_counters_and_unspaced_scripts() {
        assert_eq!(
            spans("See [[https://x.org/a][the report]] [2/5] [40%] now"),
            ["See", "the", "report", "now"]
        );
        assert_eq!(spans("[[file:notes.org]]"), ["file", "notes", "org"]);
        assert_eq!(
            spans("1. one\n  b) two\n12.5 three"),
            ["one", "two", "12", "5", "three"]
        );
        assert_eq!(spans("東京に行く"), ["東", "京", "に", "行", "く"]);
        assert_eq!(spans("state-of-the-art"), ["state", "of", "the", "art"]);
    }

    #[test]
    fn a_counter_opening_the_text_is_dropped_too() {
        assert_eq!(spans("  1. one 2. two"), ["one", "2", "two"]);
        assert_eq!(spans("1.5 is a number"), ["1", "5", "is", "a", "number"]);
    }

    #[test]
    fn line_starts_and_headlines_are_marked() {
        let w = words("a b\n  c\n\n- d e\n** f g\n*bold* h");
        let starts: Vec<bool> = w.iter().map(|w| w.line_start).collect();
        assert_eq!(
            starts,
            [true, false, true, true, false, true, false, true, false]
        );
        let headlines: Vec<bool> = w.iter().map(|w| w.headline).collect();
        assert_eq!(
            headlines,
            [false, false, false, false, false, true, false, false, false]
        );
        let escaped = words("x\\n* y");
        assert!(escaped[1].headline && escaped[1].line_start);
    }

    #[test]
    fn run_keys_depend_on_the_words_and_their_number() {
        let w = words("a b c a b");
        assert_eq!(run_key(&w[0..2]), run_key(&w[3..5]));
        assert_ne!(run_key(&w[0..2]), run_key(&w[1..3]));
        assert_ne!(run_key(&w[0..1]), run_key(&w[0..2]));
        let mut keys = RunKeys::new();
        keys.push(w[0].hash);
        keys.push(w[1].hash);
        assert_eq!(keys.key(), run_key(&w[0..2]));
    }

    #[test]
    fn escapes_are_read_at_any_depth_and_only_when_asked() {
        let mut out = Vec::new();
        Splitter::default().split("C:\\new", false, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].hash, words("new")[0].hash);
        // A text, as JSON, as JSON in JSON: the same words.
        let text = "C:\\new \"café\"\tok 😀 \\alpha";
        let once = serde_json::to_string(text).unwrap();
        let twice = serde_json::to_string(&once).unwrap();
        let ascii = "C:\\\\new \\\"caf\\u00e9\\\"\\tok \\ud83d\\ude00 \\\\alpha";
        for form in [once.as_str(), twice.as_str(), ascii] {
            assert_eq!(hashes(form), hashes(text), "{form}");
        }
        // `\\n` reads as a line break in every form, the raw text too.
        assert_eq!(spans(text), ["C", "ew", "café", "ok", "alpha"]);
    }
}
