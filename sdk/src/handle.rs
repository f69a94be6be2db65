//! Short handles for memex objects: `^k3` in place of
//! `org-2f5c0d1e9a8b7c6d`.
//!
//! An outline that names every headline by its full `:ID:` spends most
//! of its tokens on ids. A handle is a few characters a skill may print
//! instead, and the host's tools accept wherever they take an id. It is a
//! pure function of the object's id and of the visible memex, so a skill
//! (in its own process, even) and the host agree on it without talking:
//!
//! - the characters are the top bits of [`hash_of`] the id (the id index's
//!   [`id_hash`], mixed so that ids differing only in their last
//!   characters get unrelated handles), in Crockford's base32 (`0-9`,
//!   `a-z` without `i`, `l`, `o`, `u`), printed after a caret: `^k3`;
//! - the length is [`base_len`] of the number of visible objects (2 up to
//!   32 objects, 3 up to 1,024, 4 up to 32,768, 5 up to a million: about
//!   one chance in 32 that another object starts the same way), and longer
//!   for an object whose prefix of that length another visible object
//!   shares — each character more, until no other visible object starts
//!   the same way (the collision rule);
//! - a handle stays the same while the object keeps its id and no new
//!   object comes to share its prefix: for a session, in practice.
//!
//! Handles are computed over the objects of a [`MemexView`]: the visible
//! ones. A private object is not in the view, so its handle matches
//! nothing, exactly as a handle of no object at all, and it never makes a
//! visible object's handle longer.
//!
//! # Example
//!
//! ```
//! use foveal_sdk::handle::{Handles, Resolution, resolve};
//! # use foveal_sdk::memex::MemexView;
//! # fn demo(view: &MemexView<'_>) {
//! let handles = Handles::new(view);
//! let file = &view.files[0];
//! let handle = handles.of(file.id(0)).to_string(); // "^k3", say
//! assert_eq!(resolve(view, &handle), Resolution::Found { file: 0, index: 0 });
//! # }
//! ```

use std::fmt;

use crate::memex::{FileView, MemexView, id_hash};

/// What a handle is printed after.
pub const SIGIL: char = '^';

/// The characters of a handle, by value: Crockford's base32, lowercase.
const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";

/// The shortest handle.
pub const MIN_LEN: usize = 2;

/// The longest handle: 13 characters hold the whole 64-bit hash.
pub const MAX_LEN: usize = 13;

/// The length of a handle in a memex of `objects` visible objects, before
/// the collision rule: the shortest with at least 32 values per object.
pub fn base_len(objects: usize) -> usize {
    let wanted = (objects as u128).saturating_mul(32);
    let mut len = MIN_LEN;
    while len < MAX_LEN && 32u128.pow(len as u32) < wanted {
        len += 1;
    }
    len
}

/// Mixes an [`id_hash`] so that every bit depends on every byte of the id
/// (MurmurHash3's finalizer, a bijection): the id index's hash keeps the
/// last bytes of an id out of its top bits, and ids that differ only at
/// the end (`…-01`, `…-02`, derived ids of siblings) would share a handle.
#[inline]
pub fn mix(id_hash: u64) -> u64 {
    let mut h = id_hash;
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The hash a handle is read from: [`mix`] of [`id_hash`] of the id.
#[inline]
pub fn hash_of(id: &str) -> u64 {
    mix(id_hash(id))
}

/// The range of hashes whose handle of `len` characters is that of `hash`.
fn prefix_range(hash: u64, len: usize) -> (u64, u64) {
    let bits = (5 * len).min(64) as u32;
    if bits >= 64 {
        return (hash, hash);
    }
    let mask = u64::MAX >> bits;
    (hash & !mask, hash | mask)
}

/// A handle: the hash it is read from and how many characters it has.
/// `Display` prints it with its caret, `^k3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Handle {
    /// The object's [`hash_of`] its id.
    pub hash: u64,
    /// Its characters, [`MIN_LEN`] to [`MAX_LEN`].
    pub len: usize,
}

impl Handle {
    /// Appends the handle's characters (without the caret) to `out`.
    pub fn write_chars(&self, out: &mut String) {
        let len = self.len.clamp(1, MAX_LEN);
        let mut chars = [0u8; MAX_LEN];
        for (k, c) in chars[..len].iter_mut().enumerate() {
            // Character k holds bits 63-5k down to 59-5k; the thirteenth
            // holds the last four bits and a zero.
            let shift = 59 - 5 * k as i32;
            let value = if shift >= 0 {
                (self.hash >> shift) & 31
            } else {
                (self.hash << 1) & 31
            };
            *c = ALPHABET[value as usize];
        }
        // The alphabet is ASCII.
        out.push_str(std::str::from_utf8(&chars[..len]).unwrap_or_default());
    }

    /// Whether an object whose id hashes to `hash` carries this handle.
    pub fn matches(&self, hash: u64) -> bool {
        let (lo, hi) = prefix_range(self.hash, self.len);
        (lo..=hi).contains(&hash)
    }

    /// The handle `text` (`^k3`, or `k3`: the caret may be left out;
    /// case does not matter), if it is one.
    pub fn parse(text: &str) -> Option<Handle> {
        let chars = text.trim();
        let chars = chars.strip_prefix(SIGIL).unwrap_or(chars);
        if !(MIN_LEN..=MAX_LEN).contains(&chars.len()) {
            return None;
        }
        let mut value: u128 = 0;
        for c in chars.bytes() {
            let c = c.to_ascii_lowercase();
            let digit = ALPHABET.iter().position(|&a| a == c)?;
            value = value << 5 | digit as u128;
        }
        let bits = 5 * chars.len() as u32;
        let hash = if bits > 64 {
            (value >> (bits - 64)) as u64
        } else {
            (value << (64 - bits)) as u64
        };
        Some(Handle {
            hash,
            len: chars.len(),
        })
    }
}

impl fmt::Display for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::with_capacity(MAX_LEN + 1);
        s.push(SIGIL);
        self.write_chars(&mut s);
        f.write_str(&s)
    }
}

/// What a handle names in a view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Exactly one visible object: file `file` of the view, object `index`.
    Found {
        /// The file, as an index into the view's files.
        file: usize,
        /// The object in that file.
        index: u32,
    },
    /// No visible object: the handle is stale (its object is gone, or its
    /// id changed), mistyped, or never was one. A private object's handle
    /// is answered so too.
    NotFound,
    /// Several visible objects: `(file, index)` of each, in view order.
    Ambiguous(Vec<(usize, u32)>),
    /// The text is not a handle at all.
    NotAHandle,
}

/// The visible objects of `view` that `text` names as a handle: one pass
/// over the id indexes (no id text is read).
pub fn resolve(view: &MemexView<'_>, text: &str) -> Resolution {
    let Some(handle) = Handle::parse(text) else {
        return Resolution::NotAHandle;
    };
    let mut found = Vec::new();
    for (f, file) in view.files().enumerate() {
        found.extend(
            file.index
                .id_index
                .iter()
                .filter(|e| handle.matches(mix(e.hash)))
                .map(|e| (f, e.index)),
        );
    }
    match found.len() {
        0 => Resolution::NotFound,
        1 => Resolution::Found {
            file: found[0].0,
            index: found[0].1,
        },
        _ => {
            found.sort_unstable();
            Resolution::Ambiguous(found)
        }
    }
}

/// The [`hash_of`] every visible object of `file`, sorted: what
/// [`Handles::from_sorted`] reads. It changes only with the file's
/// version, so a skill may keep it from one call to the next.
pub fn sorted_hashes(file: &FileView<'_>) -> Vec<u64> {
    let mut hashes: Vec<u64> = file.index.id_index.iter().map(|e| mix(e.hash)).collect();
    hashes.sort_unstable();
    hashes
}

/// The handles of one view's objects: the base length, and the few
/// objects whose handle the collision rule makes longer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handles {
    base: usize,
    /// `(hash, length)` of each object whose handle is longer than
    /// `base`, sorted by hash.
    longer: Vec<(u64, u8)>,
    /// One bit per value of the top bits of the hashes in `longer` (16
    /// bits or more for each of them, 4,096 at least): most objects are
    /// not there, and one bit says so — also at a million objects, where
    /// tens of thousands are.
    filter: Box<[u64]>,
    /// The hash shifted right by this many bits is its bit.
    shift: u32,
}

impl Default for Handles {
    fn default() -> Self {
        Self::from_sorted(&[])
    }
}

impl Handles {
    /// The handles of `view`'s objects.
    pub fn new(view: &MemexView<'_>) -> Self {
        let files: Vec<Vec<u64>> = view.files().map(sorted_hashes).collect();
        let lists: Vec<&[u64]> = files.iter().map(Vec::as_slice).collect();
        Self::from_sorted(&lists)
    }

    /// The handles of the objects whose hashes are `files`: each file's
    /// [`sorted_hashes`], in any order.
    pub fn from_sorted(files: &[&[u64]]) -> Self {
        let objects: usize = files.iter().map(|f| f.len()).sum();
        let base = base_len(objects);
        let merged;
        let all: &[u64] = match files {
            [] => &[],
            [one] => one,
            _ => {
                let mut all = files.concat();
                all.sort_unstable();
                merged = all;
                &merged
            }
        };
        // The longest prefix a hash shares with any other is the one it
        // shares with a neighbour in sorted order.
        let mut longer: Vec<(u64, u8)> = Vec::new();
        for pair in all.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let shared = ((a ^ b).leading_zeros() / 5) as usize;
            let needed = (shared + 1).min(MAX_LEN);
            if needed <= base {
                continue;
            }
            let needed = needed as u8;
            match longer.last_mut() {
                Some((h, len)) if *h == a => *len = (*len).max(needed),
                _ => longer.push((a, needed)),
            }
            longer.push((b, needed));
        }
        // `b` of one pair is `a` of the next: keep the longest of each.
        longer.dedup_by(|next, kept| {
            next.0 == kept.0 && {
                kept.1 = kept.1.max(next.1);
                true
            }
        });
        let bits = (longer.len() * 16).max(4096).next_power_of_two();
        let shift = 64 - bits.trailing_zeros();
        let mut filter = vec![0u64; bits / 64].into_boxed_slice();
        for &(hash, _) in &longer {
            let top = (hash >> shift) as usize;
            filter[top / 64] |= 1 << (top % 64);
        }
        Self {
            base,
            longer,
            filter,
            shift,
        }
    }

    /// The length of handles before the collision rule.
    pub fn base_len(&self) -> usize {
        self.base
    }

    /// How many objects have a handle longer than the base length.
    pub fn longer_count(&self) -> usize {
        self.longer.len()
    }

    /// The handle of the object whose [`hash_of`] its id is `hash`.
    #[inline]
    pub fn of_hash(&self, hash: u64) -> Handle {
        let top = (hash >> self.shift) as usize;
        if self.filter[top / 64] & (1 << (top % 64)) == 0 {
            return Handle {
                hash,
                len: self.base,
            };
        }
        let len = match self.longer.binary_search_by_key(&hash, |&(h, _)| h) {
            Ok(at) => self.longer[at].1 as usize,
            Err(_) => self.base,
        };
        Handle { hash, len }
    }

    /// The handle of the object with id `id`.
    #[inline]
    pub fn of(&self, id: &str) -> Handle {
        self.of_hash(hash_of(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_length_grows_with_the_memex() {
        assert_eq!(base_len(0), 2);
        assert_eq!(base_len(32), 2);
        assert_eq!(base_len(33), 3);
        assert_eq!(base_len(1024), 3);
        assert_eq!(base_len(1025), 4);
        assert_eq!(base_len(100_000), 5);
        assert_eq!(base_len(usize::MAX), MAX_LEN);
    }

    #[test]
    fn a_handle_prints_and_parses_back() {
        for hash in [
            0u64,
            u64::MAX,
            0x0123_4567_89ab_cdef,
            hash_of("org-2f5c0d1e9a8b7c6d"),
        ] {
            for len in MIN_LEN..=MAX_LEN {
                let handle = Handle { hash, len };
                let text = handle.to_string();
                assert_eq!(text.len(), len + 1);
                let back = Handle::parse(&text).unwrap();
                assert_eq!(back.len, len);
                assert!(back.matches(hash), "{text}");
                assert_eq!(Handle::parse(&text[1..]), Some(back));
                assert_eq!(Handle::parse(&text.to_uppercase()), Some(back));
            }
        }
        assert_eq!(Handle { hash: 0, len: 3 }.to_string(), "^000");
        assert_eq!(
            Handle {
                hash: u64::MAX,
                len: 2
            }
            .to_string(),
            "^zz"
        );
    }

    #[test]
    fn text_that_is_no_handle_is_refused() {
        for text in ["", "^", "^a", "^k3!", "org-1234", "^il", "^0123456789abcd"] {
            assert_eq!(Handle::parse(text), None, "{text}");
        }
    }

    #[test]
    fn ids_that_differ_at_the_end_get_unrelated_handles() {
        let a = Handle {
            hash: hash_of("org-0000000000000001"),
            len: 2,
        };
        let b = Handle {
            hash: hash_of("org-0000000000000002"),
            len: 2,
        };
        assert_ne!(a.to_string(), b.to_string());
    }

    #[test]
    fn the_collision_rule_lengthens_exactly_the_handles_that_share_a_prefix() {
        // 40 objects: base length 3. Two hashes share 4 characters, one
        // pair is identical (a duplicated id), the rest are far apart.
        let mut hashes: Vec<u64> = (1..37u64).map(|k| k << 58 | 1 << 57).collect();
        let shared = 0b10101u64 << 59 | 0b01010 << 54 | 0b11111 << 49 | 0b00001 << 44;
        hashes.extend([shared, shared | 1 << 40, 7, 7]);
        hashes.sort_unstable();
        let handles = Handles::from_sorted(&[&hashes]);
        assert_eq!(handles.base_len(), 3);
        assert_eq!(handles.of_hash(shared).len, 5);
        assert_eq!(handles.of_hash(shared | 1 << 40).len, 5);
        assert_eq!(handles.of_hash(7).len, MAX_LEN);
        assert_eq!(handles.of_hash(5 << 58 | 1 << 57).len, 3);
        assert_eq!(handles.longer_count(), 3);
        // Split over files in any order: the same.
        let (a, b) = hashes.split_at(17);
        assert_eq!(Handles::from_sorted(&[b, a]), handles);
        // A shared 5-character prefix is no longer shared at 5.
        let h = Handle {
            hash: shared,
            len: 5,
        };
        assert!(h.matches(shared) && !h.matches(shared | 1 << 40));
        assert!(
            Handle {
                hash: shared,
                len: 4
            }
            .matches(shared | 1 << 40)
        );
    }

    #[test]
    fn a_longer_handle_matches_within_the_shorter() {
        let hash = hash_of("x");
        let short = Handle { hash, len: 2 };
        let long = Handle { hash, len: 5 };
        assert!(short.matches(hash) && long.matches(hash));
        assert!(short.matches(hash ^ 1) && long.matches(hash ^ 1));
        assert!(!long.matches(hash ^ (1 << 50)));
    }
}
