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
//! - each word is folded: Unicode compatibility decomposition, then
//!   without its combining marks and in lower case (`ß` as `ss`, a final
//!   `ς` as `σ`, `İ` and `ı` as `i`), so `Café`, `CAFE\u{301}`, `ｃａｆé` and
//!   `cafe` are one word;
//! - invisible characters inside a word (a soft hyphen, a zero-width space
//!   or joiner) leave it one word, and a word hyphenated at the end of a
//!   line (`th-⏎at`) is joined;
//! - a run of words never continues into an Org headline line (`** x`)
//!   when the gate reads an outline the host rendered (see `Form`);
//! - a Han, Hiragana or Katakana character is a word by itself (those
//!   scripts put no spaces between words);
//! - list counters at the start of a line (`1.`, `12)`, `a.`), checkboxes
//!   (`[ ]`, `[X]`, `[-]`), statistics cookies (`[2/5]`, `[40%]`) and the
//!   names of common HTML tags (`<em>`, `</li>`) are dropped; a link's
//!   target is read as words too (the gate also keys private text with
//!   each described link as its description alone);
//! - JSON string escapes read as what they stand for (`\n`, `\"` separate
//!   words, `\u00e9` is `é`), at any depth of nesting (`\\n` is JSON
//!   quoted in JSON, as tool arguments are), and so do HTML character
//!   references (`&#39;`, `&amp;`) and percent-encoding (`%20`): text
//!   quoted inside a JSON document, a URL or HTML is the same words as the
//!   text itself. Any other backslash separates words.
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
    /// The word's one letter, folded, when it is a single letter (`'\0'`
    /// otherwise): letters spaced out or joined by dots are read as the
    /// word they spell.
    pub letter: char,
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
pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
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

/// Numbers people write in groups, or not (`DE89 3704 0044`, `+1 555
/// 0100 777`, `555-010-0777`): for each run of 2 to 8 consecutive words of
/// `words` (cut from `text`) that all hold a digit, on one line, whose
/// letters and digits joined take at least [`MIN_NUMBER_BYTES`], calls
/// `found(first, last, key)` with the key of the joined word — the key a
/// single word written without the separators has. With `every`, for every
/// such run (private text); else only for those that begin or end a run of
/// groups (a text checked: linear). So a private IBAN quoted in one piece,
/// or a phone number regrouped, is found.
pub(crate) fn number_runs(
    text: &str,
    words: &[Word],
    every: bool,
    mut found: impl FnMut(usize, usize, u64),
) {
    let digits = |w: &Word| {
        text.as_bytes()[w.start as usize..w.end as usize]
            .iter()
            .any(u8::is_ascii_digit)
    };
    let mut joined: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if !digits(&words[i]) {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < words.len() && digits(&words[j]) && !words[j].line_start {
            j += 1;
        }
        for first in i..j {
            joined.clear();
            for (last, word) in words.iter().enumerate().take(j.min(first + 8)).skip(first) {
                joined.extend(
                    text.as_bytes()[word.start as usize..word.end as usize]
                        .iter()
                        .filter(|b| b.is_ascii_alphanumeric())
                        .map(u8::to_ascii_lowercase),
                );
                // Of a text checked, the groups from the run's start or to
                // its end; of private text, every run of groups.
                let wanted = every || first == i || last + 1 == j;
                if wanted && last > first && joined.len() >= MIN_NUMBER_BYTES {
                    let mut keys = RunKeys::new();
                    keys.push(hash_bytes(&joined));
                    found(first, last, keys.key());
                }
            }
        }
        i = j;
    }
}

/// A number joined from groups counts from this many letters and digits.
pub(crate) const MIN_NUMBER_BYTES: usize = 7;

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
    let end = rest.len().min(LINK_LOOKAHEAD);
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

/// Invisible characters that may sit inside a word without splitting it
/// (Unicode's default-ignorable code points: the soft hyphen, zero-width
/// spaces and joiners, the word joiner, bidirectional marks, variation
/// selectors, a byte-order mark).
#[inline]
fn is_ignorable(c: char) -> bool {
    matches!(c as u32,
        0x00AD | 0x034F | 0x061C | 0x115F..=0x1160 | 0x17B4..=0x17B5
        | 0x180B..=0x180F | 0x200B..=0x200F | 0x202A..=0x202E
        | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F | 0xFEFF | 0xFFA0
        | 0xFFF0..=0xFFF8 | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A
        | 0xE0000..=0xE0FFF)
}

/// Where a word goes on after a hyphen at `i` that ends a line
/// (`th-⏎at`, a re-flowed text), if it does: spaces, a line break (or its
/// JSON escape), spaces, then a letter or digit.
fn hyphen_break(bytes: &[u8], i: usize, escapes: bool) -> Option<usize> {
    let blank = |j: &mut usize| {
        while matches!(bytes.get(*j), Some(b' ' | b'\t' | b'\r')) {
            *j += 1;
        }
    };
    let mut j = i + 1;
    blank(&mut j);
    if bytes.get(j) == Some(&b'\n') {
        j += 1;
    } else if escapes && bytes.get(j) == Some(&b'\\') {
        let slashes = bytes[j..].iter().take_while(|&&b| b == b'\\').count();
        if bytes.get(j + slashes) != Some(&b'n') {
            return None;
        }
        j += slashes + 1;
    } else {
        return None;
    }
    blank(&mut j);
    let next = std::str::from_utf8(&bytes[j..bytes.len().min(j + 4)])
        .ok()
        .and_then(|s| s.chars().next())
        .or_else(|| bytes.get(j).map(|&b| b as char))?;
    next.is_alphanumeric().then_some(j)
}

/// An HTML character reference at the start of `rest` (`&amp;`, `&#39;`,
/// `&#x27;`, a few named ones): the character and the reference's length.
fn html_entity(rest: &[u8]) -> Option<(char, usize)> {
    let end = rest.iter().take(12).position(|&b| b == b';')?;
    let name = std::str::from_utf8(&rest[1..end]).ok()?;
    let c = if let Some(number) = name.strip_prefix('#') {
        let value = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse::<u32>().ok()?,
        };
        char::from_u32(value)?
    } else {
        match name {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            "nbsp" => ' ',
            _ => return None,
        }
    };
    Some((c, end + 1))
}

/// The length of an HTML tag's opening — `<em`, `</li`, `<a` — at the
/// start of `rest`, or 0: only the names of common tags, so that their
/// names (`em`, `li`) do not break a run of words; what follows (attributes,
/// `>`) is read as any text, and `<Diary>` is a word in brackets.
fn html_tag_len(rest: &[u8]) -> usize {
    const NAMES: &[&[u8]] = &[
        b"a",
        b"abbr",
        b"b",
        b"blockquote",
        b"br",
        b"cite",
        b"code",
        b"del",
        b"div",
        b"em",
        b"h1",
        b"h2",
        b"h3",
        b"h4",
        b"h5",
        b"h6",
        b"i",
        b"ins",
        b"li",
        b"mark",
        b"ol",
        b"p",
        b"pre",
        b"q",
        b"s",
        b"small",
        b"span",
        b"strong",
        b"sub",
        b"sup",
        b"td",
        b"th",
        b"tr",
        b"u",
        b"ul",
    ];
    let mut j = 1;
    if rest.get(j) == Some(&b'/') {
        j += 1;
    }
    let start = j;
    while rest.get(j).is_some_and(u8::is_ascii_alphanumeric) {
        j += 1;
    }
    let name = &rest[start..j];
    let known = NAMES.iter().any(|n| n.eq_ignore_ascii_case(name));
    let ends = matches!(rest.get(j), Some(b'>' | b'/' | b' ' | b'\t'));
    if known && ends { j } else { 0 }
}

/// 3 when `rest` starts with `%` and two hex digits, else 0.
fn percent_len(rest: &[u8]) -> usize {
    if rest.len() >= 3
        && rest[0] == b'%'
        && rest[1].is_ascii_hexdigit()
        && rest[2].is_ascii_hexdigit()
    {
        3
    } else {
        0
    }
}

/// How far ahead a link opener looks for its description.
const LINK_LOOKAHEAD: usize = 4096;

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
    /// Read `[[target][description]]` as its description only.
    skip_link_targets: bool,
    /// No `][` is before this byte: a link opener there has no
    /// description (keeps the look-ahead linear).
    no_link_before: usize,
    /// Percent-decoded bytes.
    bytes: Vec<u8>,
    /// Keep each word's folded bytes in `captured` (see
    /// [`Splitter::capturing`]).
    capture: bool,
    captured: Vec<u8>,
    /// Where each word's folded bytes end in `captured`, one per word of
    /// the last text split.
    captured_ends: Vec<u32>,
    /// Read letters spelled out as the word they spell
    /// ([`Splitter::spelling`]).
    spell: bool,
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
    /// A splitter that reads a described link `[[target][description]]`
    /// as its description only (the gate keys private text both ways, so
    /// that a quote of the description alone is found too).
    #[cfg(test)]
    pub(crate) fn skipping_link_targets() -> Self {
        Self {
            skip_link_targets: true,
            ..Self::default()
        }
    }

    /// A splitter that also keeps the folded bytes of each word of the
    /// last text split ([`folded`](Self::folded)): the gate keys private
    /// words run together (`mydoctorsaid`, `MyDoctorSaid`) from them.
    pub(crate) fn capturing(skip_link_targets: bool) -> Self {
        Self {
            skip_link_targets,
            capture: true,
            ..Self::default()
        }
    }

    /// This splitter, reading a word spelled out letter by letter as the
    /// word it spells. Which letters are spelled out depends on how they
    /// are spaced, so the gate reads a text both ways (see
    /// [`has_spelled`]): the plain way keeps every quote of a text found
    /// however it is spaced.
    pub(crate) fn spelling(self) -> Self {
        Self {
            spell: true,
            ..self
        }
    }

    /// The folded bytes of words `first..=last` of the last text split,
    /// run together (a capturing splitter's; empty otherwise).
    pub(crate) fn folded(&self, first: usize, last: usize) -> &[u8] {
        let Some(&end) = self.captured_ends.get(last) else {
            return &[];
        };
        let start = match first.checked_sub(1) {
            Some(before) => self.captured_ends[before],
            None => 0,
        };
        &self.captured[start as usize..end as usize]
    }

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
        self.no_link_before = 0;
        self.captured.clear();
        self.captured_ends.clear();
        let first = out.len();
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
            // A word broken by a hyphen at the end of a line goes on.
            if b == b'-'
                && !self.word.is_empty()
                && let Some(next) = hyphen_break(bytes, i, escapes)
            {
                i = next;
                continue;
            }
            // An HTML entity, a percent-encoded character: what they stand
            // for.
            if b == b'&'
                && let Some((c, len)) = html_entity(&bytes[i..])
            {
                self.char(c, offset, i, i + len, out);
                i += len;
                continue;
            }
            if b == b'%' && percent_len(&bytes[i..]) > 0 {
                i = self.percent(bytes, i, offset, out);
                continue;
            }
            self.finish(offset, i, out);
            i = match b {
                b'\n' => self.new_line(bytes, i + 1),
                b'[' if self.skip_link_targets && bytes.get(i + 1) == Some(&b'[') => {
                    i + self.link_target(bytes, i)
                }
                b'[' => i + cookie_len(&bytes[i..]).max(1),
                b'<' => i + html_tag_len(&bytes[i..]).max(1),
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
        if self.spell {
            self.join_spelled(text, offset, first, out);
        }
    }

    /// Reads a word spelled out — at least [`MIN_SPELLED`] single letters
    /// on one line, each apart from the next by the same one to three
    /// spaces, dots, hyphens, underscores, asterisks or slashes
    /// (`H e a l t h`, `H.E.A.L.T.H`, `h-e-a-l-t-h`) — as the one word it
    /// spells, among the words of `text` from `out[first]` on. A wider gap
    /// ends the word: `M e t  A n n` is two.
    fn join_spelled(&mut self, text: &str, offset: usize, first: usize, out: &mut Vec<Word>) {
        let bytes = text.as_bytes();
        // The separator between two letters, if they are apart as
        // letters spelled out are.
        let apart = |a: &Word, b: &Word| -> Option<&[u8]> {
            let from = (a.end as usize).checked_sub(offset)?;
            let to = (b.start as usize).checked_sub(offset)?;
            let gap = bytes.get(from..to)?;
            (!b.line_start
                && (1..=3).contains(&gap.len())
                && gap
                    .iter()
                    .all(|b| matches!(b, b' ' | b'\t' | b'.' | b'-' | b'_' | b'*' | b'/')))
            .then_some(gap)
        };
        if out[first..]
            .windows(2)
            .all(|w| w[0].letter == '\0' || w[1].letter == '\0')
        {
            return;
        }
        let mut spelled = String::new();
        let mut write = first;
        let mut i = first;
        while i < out.len() {
            let mut j = i + 1;
            if out[i].letter != '\0' {
                // Every gap as the first: `M e t  A n n` is two words.
                let first_gap = out.get(j).and_then(|next| apart(&out[i], next));
                while j < out.len()
                    && out[j].letter != '\0'
                    && first_gap.is_some()
                    && apart(&out[j - 1], &out[j]) == first_gap
                {
                    j += 1;
                }
            }
            if j - i >= MIN_SPELLED {
                spelled.clear();
                spelled.extend(out[i..j].iter().map(|w| w.letter));
                let word = Word {
                    end: out[j - 1].end,
                    hash: hash_bytes(spelled.as_bytes()),
                    letter: '\0',
                    ..out[i]
                };
                out[write] = word;
                if self.capture {
                    // The letters' folded bytes are one run already: the
                    // word ends where its last letter did. (The words
                    // before were compacted the same way.)
                    let at = write - first;
                    self.captured_ends.drain(at..at + (j - i - 1));
                }
                write += 1;
                i = j;
                continue;
            }
            out.copy_within(i..j, write);
            write += j - i;
            i = j;
        }
        out.truncate(write);
    }

    /// How far a link opener at `i` reaches: past `][` when it has a
    /// description, else past `[[`. A failed look-ahead is remembered, so
    /// a run of openers costs linear time.
    fn link_target(&mut self, bytes: &[u8], i: usize) -> usize {
        if i < self.no_link_before {
            return 2;
        }
        match link_target_len(&bytes[i..]) {
            0 => {
                self.no_link_before = (i + LINK_LOOKAHEAD).min(bytes.len());
                2
            }
            len => len,
        }
    }

    /// A run of `%XX` at `i`, decoded: its characters go on words as any
    /// others. Returns where the run ends.
    fn percent(&mut self, bytes: &[u8], i: usize, offset: usize, out: &mut Vec<Word>) -> usize {
        let mut decoded = std::mem::take(&mut self.bytes);
        decoded.clear();
        let mut j = i;
        while percent_len(&bytes[j..]) > 0 {
            let hex = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
            decoded.push(hex(bytes[j + 1]) * 16 + hex(bytes[j + 2]));
            j += 3;
        }
        match std::str::from_utf8(&decoded) {
            Ok(text) => {
                for c in text.chars() {
                    // The run's characters share its span.
                    self.char(c, offset, i, j, out);
                }
            }
            Err(_) => self.finish(offset, i, out),
        }
        self.bytes = decoded;
        j
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
        if is_ignorable(c) {
            // Invisible: a soft hyphen or a zero-width space inside a word
            // leaves it one word.
            return;
        }
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
        let folded: &[u8] = if self.ascii {
            self.word.as_bytes()
        } else {
            self.folded.clear();
            // Compatibility decomposition, then without the marks: `é`,
            // `e` + U+0301 and `e` are one letter, as a reader who types
            // without accents would have it. A letter that looks like
            // another (Cyrillic `а`, Greek `ο`, small capitals `ʜᴇ`) is
            // read as the one it looks like (its Unicode TR39 skeleton).
            for c in self.word.nfkd() {
                match c {
                    'ß' | 'ẞ' => self.folded.push_str("ss"),
                    'ς' => fold_look_alike('σ', &mut self.folded),
                    'İ' | 'ı' => self.folded.push('i'),
                    c if c.is_alphanumeric() => fold_look_alike(c, &mut self.folded),
                    _ => {}
                }
            }
            if self.folded.is_empty() {
                self.word.clear();
                return;
            }
            self.folded.as_bytes()
        };
        let letter = match folded {
            [b] if b.is_ascii_alphabetic() => char::from(*b),
            [b, ..] if *b >= 0x80 && folded.len() <= 4 => {
                let mut chars = self.folded.chars();
                match (chars.next(), chars.next()) {
                    (Some(c), None) if c.is_alphabetic() => c,
                    _ => '\0',
                }
            }
            _ => '\0',
        };
        if self.capture {
            self.captured.extend_from_slice(folded);
            self.captured_ends.push(self.captured.len() as u32);
        }
        out.push(Word {
            start: (offset + self.start) as u32,
            end: (offset + end) as u32,
            hash: hash_bytes(folded),
            line_start: self.mark.line,
            headline: self.mark.headline,
            letter,
        });
        self.word.clear();
    }
}

/// Pushes `c` onto `out` as the lower-case letter it looks like, without
/// marks: an ASCII character lower-cased; a small capital as its letter;
/// another character lower-cased, then as its TR39 skeleton (the
/// prototype a reader confuses it with: Cyrillic `а` as `a`, Greek `σ` and
/// `Σ` as `o`), or as the skeleton of its capital when only that is a
/// Latin letter (Cyrillic `м` as `m`, as its capital `М` looks like `M`:
/// a quote may be written in capitals).
#[inline]
fn fold_look_alike(c: char, out: &mut String) {
    for lower in c.to_lowercase() {
        if lower.is_ascii() {
            out.push(lower);
        } else if let Some(letter) = small_capital(lower) {
            out.push(letter);
        } else {
            let start = out.len();
            push_skeleton(lower, out);
            if !out[start..].is_ascii() {
                let mut capital = String::new();
                for upper in lower.to_uppercase() {
                    push_skeleton(upper, &mut capital);
                }
                if !capital.is_empty() && capital.is_ascii() {
                    out.truncate(start);
                    out.push_str(&capital);
                }
            }
        }
    }
}

/// Pushes the TR39 skeleton of `c` onto `out`, lower-cased, without marks.
fn push_skeleton(c: char, out: &mut String) {
    let mut buf = [0u8; 4];
    for prototype in unicode_security::skeleton(c.encode_utf8(&mut buf)) {
        for lower in prototype.to_lowercase() {
            if !unicode_normalization::char::is_combining_mark(lower) {
                out.push(lower);
            }
        }
    }
}

/// The letter a small capital stands for (`ʜ` is `h`): Unicode gives
/// them no decomposition.
fn small_capital(c: char) -> Option<char> {
    Some(match c {
        'ᴀ' => 'a',
        'ʙ' => 'b',
        'ᴄ' => 'c',
        'ᴅ' => 'd',
        'ᴇ' => 'e',
        'ꜰ' => 'f',
        'ɢ' => 'g',
        'ʜ' => 'h',
        'ɪ' => 'i',
        'ᴊ' => 'j',
        'ᴋ' => 'k',
        'ʟ' => 'l',
        'ᴍ' => 'm',
        'ɴ' => 'n',
        'ᴏ' => 'o',
        'ᴘ' => 'p',
        'ꞯ' => 'q',
        'ʀ' => 'r',
        'ꜱ' => 's',
        'ᴛ' => 't',
        'ᴜ' => 'u',
        'ᴠ' => 'v',
        'ᴡ' => 'w',
        'ʏ' => 'y',
        'ᴢ' => 'z',
        _ => return None,
    })
}

/// A word spelled out letter by letter counts from this many letters.
pub(crate) const MIN_SPELLED: usize = 3;

/// Whether `words` (split the plain way) hold a run of [`MIN_SPELLED`]
/// single letters on one line: a word that may be spelled out, so that
/// the text is read the [`Splitter::spelling`] way too.
pub(crate) fn has_spelled(words: &[Word]) -> bool {
    let mut run = 0;
    for word in words {
        run = if word.letter == '\0' {
            0
        } else if word.line_start {
            1
        } else {
            run + 1
        };
        if run >= MIN_SPELLED {
            return true;
        }
    }
    false
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
        // Accents fold away: a quote typed without them is found.
        assert_eq!(hashes("cafe"), hashes("café"));
    }

    #[test]
    fn links_cookies_counters_and_unspaced_scripts() {
        // A link target is read too: nothing inside a link hides.
        assert_eq!(
            spans("See [[https://x.org/a][the report]] [2/5] [40%] now"),
            ["See", "https", "x", "org", "a", "the", "report", "now"]
        );
        let mut out = Vec::new();
        let text = "See [[https://x.org/a][the report]] now";
        Splitter::skipping_link_targets().split(text, true, &mut out);
        let described: Vec<&str> = out
            .iter()
            .map(|w| &text[w.start as usize..w.end as usize])
            .collect();
        assert_eq!(described, ["See", "the", "report", "now"]);
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
        let w = words("aa bb cc aa bb");
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
