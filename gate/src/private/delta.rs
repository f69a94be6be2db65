//! The private-text matcher after an edit, in time linear in the edit.
//!
//! A full [`Build`] is linear in the memex: every file's keys go through
//! one map, and a key an edit brings is looked for in every file's visible
//! text. On a memex of a million headlines that is seconds for every edit.
//! So the gate keeps the last full build (its *base*) and derives the
//! matcher of a later generation from it and from the file versions that
//! differ (the *changed* files, new versions and gone ones):
//!
//! - each changed file version's keys are gathered, and its visible text is
//!   scanned for the base's private keys, the base's public keys and the
//!   keys of every changed version: its hits;
//! - how many file versions' visible text holds each public key is kept
//!   from the base, less the gone versions' hits, plus the changed
//!   versions': a base key that visible text no longer holds is private
//!   again, a base private key that a changed version's visible text holds
//!   is public;
//! - a key that only a changed version has (new private text) is private
//!   unless a changed version's visible text holds it (the versions seen
//!   in an earlier derivation are scanned again for the keys a new one
//!   brings).
//!
//! The matcher is then the base's sets less the keys now public, plus the
//! keys now private. What this leaves out errs one way only, towards
//! redacting: a key new private text brings that only an *unchanged* file's
//! visible text holds (that text was not scanned for it) stays private, and
//! a key whose private text went stays in the base's sets, until the next
//! full build. Nothing private is ever treated as public: a key leaves the
//! private sets only when a current file version's visible text holds it.
//!
//! A full build runs instead when there is no base, when the files read but
//! not loaded changed, when the changed versions hold more than an eighth
//! of the memex's bytes and more than a MiB (so the derived work never
//! outgrows a full build),
//! or when the base is small enough that a full build is as quick.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use foveal_memex::file::MemexFile;
use foveal_memex::privacy::PrivacyTags;
use foveal_memex::snapshot::MemexSnapshot;

use super::{
    Build, BuildCounts, CachedFile, FailedKeys, FileKeys, KeyMap, KeySet, Kind, Lookup, Public,
    Sets, SortedKeys, file_keys, on_cores, scan,
};

/// Below this many keys a full build takes a few milliseconds: the gate
/// derives no matcher from an older one.
pub(crate) const DELTA_FROM_KEYS: usize = 1 << 18;

/// Changed file versions of at most this many bytes are always derived
/// from the last full build (the work is a few milliseconds).
const SMALL_CHANGE_BYTES: usize = 1 << 20;

/// The matcher of one generation: a full build's sets, and what changed
/// since.
#[derive(Debug)]
pub(crate) struct Matcher {
    base: Arc<Sets>,
    delta: Option<Box<Delta>>,
}

/// What changed since the full build a [`Matcher`] is derived from.
#[derive(Debug, Default)]
struct Delta {
    /// Keys private now that the base does not look for.
    added: Sets,
    /// Runs of words and runs of three of the base that are public or gone
    /// now.
    removed: KeySet,
    /// Joined keys of the base that are public or gone now.
    removed_joined: SortedKeys<u64>,
    /// Gapped keys of the base that are gone now, by fingerprint.
    removed_gapped: SortedKeys,
}

impl Matcher {
    /// The matcher of a full build's `sets`.
    pub(crate) fn full(sets: Arc<Sets>) -> Self {
        Self {
            base: sets,
            delta: None,
        }
    }

    /// The number of keys that are looked for.
    pub(crate) fn len(&self) -> usize {
        self.base.len() + self.delta.as_ref().map_or(0, |d| d.added.len())
    }

    /// Bytes held.
    pub(crate) fn memory(&self) -> usize {
        self.base.memory()
            + self.delta.as_ref().map_or(0, |d| {
                d.added.memory()
                    + d.removed.memory()
                    + d.removed_joined.memory()
                    + d.removed_gapped.memory()
            })
    }

    #[inline]
    fn removed(&self, key: u64) -> bool {
        self.delta
            .as_ref()
            .is_some_and(|d| !d.removed.is_empty() && d.removed.contains(key))
    }

    #[inline]
    fn added(&self, test: impl Fn(&Sets) -> bool) -> bool {
        self.delta.as_ref().is_some_and(|d| test(&d.added))
    }
}

impl Lookup for Matcher {
    #[inline]
    fn any_shingle(&self) -> bool {
        self.base.any_shingle() || self.added(Sets::any_shingle)
    }
    #[inline]
    fn any_short(&self) -> bool {
        self.base.any_short() || self.added(Sets::any_short)
    }
    #[inline]
    fn any_joined(&self) -> bool {
        self.base.any_joined() || self.added(Sets::any_joined)
    }
    #[inline]
    fn any_gapped(&self) -> bool {
        self.base.any_gapped() || self.added(Sets::any_gapped)
    }
    #[inline]
    fn any_tri(&self) -> bool {
        self.base.any_tri() || self.added(Sets::any_tri)
    }
    #[inline]
    fn shingle(&self, key: u64) -> bool {
        (self.base.shingle(key) && !self.removed(key)) || self.added(|a| a.shingle(key))
    }
    #[inline]
    fn short(&self, key: u64) -> bool {
        (self.base.short(key) && !self.removed(key)) || self.added(|a| a.short(key))
    }
    #[inline]
    fn joined(&self, key: u64) -> bool {
        (self.base.joined(key)
            && !self
                .delta
                .as_ref()
                .is_some_and(|d| d.removed_joined.contains(key)))
            || self.added(|a| a.joined(key))
    }
    #[inline]
    fn gapped(&self, key: u64) -> bool {
        (self.base.gapped(key)
            && !self
                .delta
                .as_ref()
                .is_some_and(|d| d.removed_gapped.contains(key)))
            || self.added(|a| a.gapped(key))
    }
    #[inline]
    fn tri(&self, key: u64) -> bool {
        (self.base.tri(key) && !self.removed(key)) || self.added(|a| a.tri(key))
    }
    #[inline]
    fn prefetch_shingle(&self, key: u64) {
        self.base.prefetch_shingle(key);
    }
    #[inline]
    fn prefetch_tri(&self, key: u64) {
        self.base.prefetch_tri(key);
    }
}

/// The last full build of a gate.
struct Base {
    /// Its file versions, with complete hits.
    files: Vec<CachedFile>,
    /// The files read but not loaded, by their text.
    failed: Vec<FailedKeys>,
    sets: Arc<Sets>,
    public: Public,
    /// `public` as sets, to look for in a changed version's visible text.
    public_sets: Sets,
    /// Keys of every kind it found.
    keys: usize,
    /// Read from the private-text index ([`super::stored`]): its sets
    /// alone, no file's work to derive a later matcher from.
    stored: bool,
}

/// The matcher of one memex generation and the work it was built from.
/// Its `Debug` form gives counts, never text.
pub(crate) struct PrivateCache {
    generation: u64,
    /// The generation's files, in the snapshot's order.
    current: Vec<Weak<MemexFile>>,
    base: Base,
    /// The generation's file versions that the base does not have.
    changed: Vec<CachedFile>,
    pub(crate) matcher: Arc<Option<Matcher>>,
}

impl std::fmt::Debug for PrivateCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateCache")
            .field("generation", &self.generation)
            .field("files", &self.current.len())
            .field("base_files", &self.base.files)
            .field("changed", &self.changed)
            .field("failed_files", &self.base.failed.len())
            .field("public", &self.base.public.exact.len())
            .field("matcher", &self.matcher)
            .finish()
    }
}

/// What [`update`] did, for the log.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Update {
    /// A full build.
    Full(BuildCounts),
    /// Derived from the last full build: the file versions that differ
    /// from it (new and gone), the keys added and removed.
    Derived {
        changed: usize,
        added: usize,
        removed: usize,
    },
}

impl PrivateCache {
    /// The cache of `memex` whose matcher is `sets`, read from the
    /// private-text index: the next generation is a full build.
    pub(crate) fn stored(memex: &MemexSnapshot, sets: Sets) -> Self {
        let sets = Arc::new(sets);
        let matcher = (sets.len() > 0).then(|| Matcher::full(Arc::clone(&sets)));
        Self {
            generation: memex.generation(),
            current: memex.files().map(Arc::downgrade).collect(),
            base: Base {
                files: Vec::new(),
                failed: Vec::new(),
                keys: sets.len(),
                sets,
                public: Public::default(),
                public_sets: Sets::default(),
                stored: true,
            },
            changed: Vec::new(),
            matcher: Arc::new(matcher),
        }
    }

    /// The sets of its full build (or read from the index).
    pub(crate) fn sets(&self) -> Arc<Sets> {
        Arc::clone(&self.base.sets)
    }

    /// Whether its matcher was derived after an edit (not a full build):
    /// it may redact a run that only an unchanged file's visible text
    /// holds, until a full build.
    pub(crate) fn is_derived(&self) -> bool {
        !self.base.stored
            && (!self.changed.is_empty()
                || (*self.matcher).as_ref().is_some_and(|m| m.delta.is_some()))
    }

    /// A copy of the work it was made from (every file version's keys and
    /// hits, the failed files' keys), for a full build beside it.
    pub(crate) fn work(&self) -> (Vec<CachedFile>, Vec<FailedKeys>) {
        let mut files: Vec<CachedFile> = self.base.files.iter().map(CachedFile::copy).collect();
        files.extend(self.changed.iter().map(CachedFile::copy));
        (files, self.base.failed.clone())
    }

    /// Whether its matcher was read from the private-text index.
    pub(crate) fn is_stored(&self) -> bool {
        self.base.stored
    }

    /// The sets of its full build, when its matcher is one (not derived).
    pub(crate) fn full_sets(&self) -> Option<Arc<Sets>> {
        (self.changed.is_empty() && !self.base.stored && self.matcher_is_base())
            .then(|| Arc::clone(&self.base.sets))
    }

    fn matcher_is_base(&self) -> bool {
        (*self.matcher)
            .as_ref()
            .is_none_or(|m| m.delta.is_none() && Arc::ptr_eq(&m.base, &self.base.sets))
    }

    /// Whether this cache is of `memex`: its generation and each file
    /// version.
    pub(crate) fn is_for(&self, memex: &MemexSnapshot) -> bool {
        self.generation == memex.generation()
            && self.current.len() == memex.files().count()
            && self
                .current
                .iter()
                .zip(memex.files())
                .all(|(cached, file)| Weak::as_ptr(cached) == Arc::as_ptr(file))
    }
}

/// The cache of `memex`, from `previous` when there is one: derived from
/// its full build when the change is small and the base at least
/// `delta_from` keys, a full build otherwise.
pub(crate) fn update(
    previous: Option<PrivateCache>,
    memex: &MemexSnapshot,
    privacy: &PrivacyTags,
    delta_from: usize,
) -> (PrivateCache, Update) {
    let previous = match previous {
        Some(cache) => match derive(cache, memex, privacy, delta_from) {
            Ok(done) => return done,
            Err(cache) => Some(*cache),
        },
        None => None,
    };
    let parts = previous.map_or_else(Default::default, |cache| {
        let mut files = cache.base.files;
        files.extend(cache.changed);
        (files, cache.base.failed)
    });
    full(parts, memex, privacy)
}

/// The full build of `memex`, reusing `parts` (file versions' work, the
/// failed files' keys) wherever the version is the same.
pub(crate) fn full(
    parts: (Vec<CachedFile>, Vec<FailedKeys>),
    memex: &MemexSnapshot,
    privacy: &PrivacyTags,
) -> (PrivateCache, Update) {
    let mut build = Build::new(parts, memex, privacy);
    let (sets, counts) = build.run();
    let (files, failed, public) = build.into_parts();
    let sets = Arc::new(sets.unwrap_or_default());
    let matcher = (sets.len() > 0).then(|| Matcher::full(Arc::clone(&sets)));
    let cache = PrivateCache {
        generation: memex.generation(),
        current: memex.files().map(Arc::downgrade).collect(),
        base: Base {
            files,
            failed,
            sets,
            public_sets: public.sets(),
            public,
            keys: counts.keys,
            stored: false,
        },
        changed: Vec::new(),
        matcher: Arc::new(matcher),
    };
    (cache, Update::Full(counts))
}

/// The cache of `memex` derived from `previous`'s full build, or
/// `previous` back when a full build is due (see the module docs).
fn derive(
    previous: PrivateCache,
    memex: &MemexSnapshot,
    privacy: &PrivacyTags,
    delta_from: usize,
) -> Result<(PrivateCache, Update), Box<PrivateCache>> {
    let base = &previous.base;
    if base.stored
        || base.keys < delta_from
        || memex.failed_texts().count() != base.failed.len()
        || !memex
            .failed_texts()
            .zip(&base.failed)
            .all(|((_, text), (seen, _))| Arc::ptr_eq(text, seen))
    {
        return Err(Box::new(previous));
    }
    let in_base: HashMap<u64, usize> = base
        .files
        .iter()
        .enumerate()
        .map(|(i, cached)| (cached.version, i))
        .collect();
    let mut present = vec![false; base.files.len()];
    let mut changed: Vec<&Arc<MemexFile>> = Vec::new();
    let (mut bytes, mut changed_bytes) = (0usize, 0usize);
    for file in memex.files() {
        bytes += file.text.len();
        match in_base.get(&file.version) {
            Some(&i) => present[i] = true,
            None => {
                changed_bytes += file.text.len();
                changed.push(file);
            }
        }
    }
    if changed_bytes > bytes / 8 && changed_bytes > SMALL_CHANGE_BYTES {
        return Err(Box::new(previous));
    }
    let PrivateCache {
        base,
        changed: seen,
        ..
    } = previous;
    let mut seen: HashMap<u64, CachedFile> = seen
        .into_iter()
        .map(|cached| (cached.version, cached))
        .collect();

    // Each changed version's keys: from the last derivation, or gathered.
    let mut work: Vec<Option<CachedFile>> = changed
        .iter()
        .map(|file| seen.remove(&file.version))
        .collect();
    let fresh: Vec<usize> = (0..changed.len()).filter(|&i| work[i].is_none()).collect();
    let gathered = on_cores(&fresh, |&i| file_keys(changed[i], privacy));
    let mut keys: Vec<Arc<FileKeys>> = work
        .iter()
        .map(|cached| {
            cached
                .as_ref()
                .map_or_else(Arc::default, |c| Arc::clone(&c.keys))
        })
        .collect();
    for (&i, gathered) in fresh.iter().zip(gathered) {
        keys[i] = Arc::new(gathered);
    }

    // The keys of every changed version, and a new version's hits: the
    // base's private and public keys and those its visible text holds.
    let candidates = sets_of_files(&keys);
    let to_scan: Vec<(&MemexFile, &FileKeys)> =
        fresh.iter().map(|&i| (&**changed[i], &*keys[i])).collect();
    let mut hits: Vec<Vec<u64>> = vec![Vec::new(); fresh.len()];
    // No gapped key is looked for in visible text (as in a full build).
    let found = scan(&to_scan, &[&NoGapped(&base.sets)])
        .into_iter()
        .chain(scan(&to_scan, &[&base.public_sets, &candidates]));
    for (j, key) in found {
        hits[j as usize].push(key);
    }
    for (&i, mut hits) in fresh.iter().zip(hits) {
        hits.sort_unstable();
        hits.dedup();
        work[i] = Some(CachedFile {
            version: changed[i].version,
            path: changed[i].path.clone(),
            keys: Arc::clone(&keys[i]),
            hits,
            complete: false,
        });
    }
    // The versions seen before are scanned again for the keys the new
    // ones bring, so that changed files know each other's keys.
    let again: Vec<usize> = (0..changed.len())
        .filter(|i| fresh.binary_search(i).is_err())
        .collect();
    if !again.is_empty() && !fresh.is_empty() {
        let brought = sets_of_files(
            &fresh
                .iter()
                .map(|&i| Arc::clone(&keys[i]))
                .collect::<Vec<_>>(),
        );
        let to_scan: Vec<(&MemexFile, &FileKeys)> =
            again.iter().map(|&i| (&**changed[i], &*keys[i])).collect();
        let mut found = false;
        for (j, key) in scan(&to_scan, &[&brought]) {
            if let Some(cached) = work[again[j as usize]].as_mut() {
                cached.hits.push(key);
                found = true;
            }
        }
        if found {
            for &i in &again {
                if let Some(cached) = work[i].as_mut() {
                    cached.hits.sort_unstable();
                    cached.hits.dedup();
                }
            }
        }
    }
    let work: Vec<CachedFile> = work.into_iter().flatten().collect();

    // How many versions' visible text holds each key, against the base.
    let mut exact: KeyMap<(i64, Kind)> = KeyMap::default();
    let mut joined: KeyMap<i64> = KeyMap::default();
    for (cached, _) in base.files.iter().zip(&present).filter(|(_, p)| !**p) {
        for &key in &cached.hits {
            if let Some(&(_, kind)) = base.public.exact.get(&key) {
                exact.entry(key).or_insert((0, kind)).0 -= 1;
            }
            if base.public.joined.contains_key(&key) {
                *joined.entry(key).or_default() -= 1;
            }
        }
    }
    for cached in &work {
        for &key in &cached.hits {
            if let Some(kind) = kind_of(key, &base, &candidates) {
                exact.entry(key).or_insert((0, kind)).0 += 1;
            }
            if base.public.joined.contains_key(&key)
                || base.sets.joined(key)
                || candidates.joined(key)
            {
                *joined.entry(key).or_default() += 1;
            }
        }
    }
    let gone = Gone::of(&base, &present, &work);
    let visible = |key: u64| {
        base.public
            .exact
            .get(&key)
            .map_or(0, |&(n, _)| i64::from(n))
            + exact.get(&key).map_or(0, |&(n, _)| n)
    };
    let visible_joined = |key: u64| {
        base.public.joined.get(&key).map_or(0, |&n| i64::from(n))
            + joined.get(&key).copied().unwrap_or(0)
    };

    // Public now: base private keys a changed version's visible text holds.
    // and base private keys whose private text is gone.
    let mut removed: Vec<u64> = exact
        .iter()
        .filter(|&(&key, _)| visible(key) > 0 && in_sets(&base.sets, key))
        .map(|(&key, _)| key)
        .collect();
    removed.extend(gone.exact.keys().filter(|&&key| in_sets(&base.sets, key)));
    let mut removed_joined: Vec<u64> = joined
        .keys()
        .copied()
        .filter(|&key| visible_joined(key) > 0 && base.sets.joined.has(key))
        .chain(
            gone.joined
                .keys()
                .copied()
                .filter(|&key| base.sets.joined.has(key)),
        )
        .collect();
    let mut removed_gapped: Vec<u32> = gone
        .gapped
        .iter()
        .copied()
        .filter(|&fp| base.sets.gapped.has(fp))
        .collect();
    removed_gapped.sort_unstable();
    // Private now: base public keys no visible text holds any more (but
    // those whose private text is gone too), and the changed versions'
    // keys that neither the base looks for nor any visible text holds.
    let mut added: Vec<(u64, Kind)> = Vec::new();
    for (&key, &(_, kind)) in &exact {
        if base.public.exact.contains_key(&key)
            && visible(key) == 0
            && !gone.exact.contains_key(&key)
        {
            added.push((key, kind));
        }
    }
    let mut added_joined: Vec<u64> = joined
        .keys()
        .copied()
        .filter(|&key| {
            base.public.joined.contains_key(&key)
                && visible_joined(key) == 0
                && !gone.joined.contains_key(&key)
        })
        .collect();
    for cached in &work {
        for (key, kind) in cached.keys.each() {
            if !in_sets(&base.sets, key) && visible(key) == 0 {
                added.push((key, kind));
            }
        }
        for &key in &cached.keys.joined {
            if !base.sets.joined.has(key) && visible_joined(key) == 0 {
                added_joined.push(key);
            }
        }
    }
    removed_joined.sort_unstable();
    let added = Sets::of(
        added,
        added_joined,
        SortedKeys::from_sorted(work.iter().map(|c| &c.keys.gapped[..]), |_| true),
    );
    let update = Update::Derived {
        changed: work.len() + present.iter().filter(|p| !**p).count(),
        added: added.len(),
        removed: removed.len() + removed_joined.len() + removed_gapped.len(),
    };
    let delta = Delta {
        added,
        removed: KeySet::new(removed.into_iter()),
        removed_joined: SortedKeys::from_sorted(std::iter::once(&removed_joined[..]), |_| true),
        removed_gapped: SortedKeys::from_sorted(std::iter::once(&removed_gapped[..]), |_| true),
    };
    let matcher = Matcher {
        base: Arc::clone(&base.sets),
        delta: Some(Box::new(delta)),
    };
    let matcher = (matcher.len() > 0).then_some(matcher);
    let cache = PrivateCache {
        generation: memex.generation(),
        current: memex.files().map(Arc::downgrade).collect(),
        base,
        changed: work,
        matcher: Arc::new(matcher),
    };
    Ok((cache, update))
}

/// Whether the base looks for `key` as a run of words or of three.
fn in_sets(sets: &Sets, key: u64) -> bool {
    sets.shingles.contains(key) || sets.shorts.contains(key) || sets.tri.contains(key)
}

/// The kind of `key` as a run of words or of three, when the base knows it
/// (private or public) or a changed version has it.
fn kind_of(key: u64, base: &Base, candidates: &Sets) -> Option<Kind> {
    if let Some(&(_, kind)) = base.public.exact.get(&key) {
        return Some(kind);
    }
    [&*base.sets, candidates].into_iter().find_map(|sets| {
        if sets.shingles.contains(key) {
            Some(Kind::Shingle)
        } else if sets.shorts.contains(key) {
            Some(Kind::Short)
        } else if sets.tri.contains(key) {
            Some(Kind::Tri)
        } else {
            None
        }
    })
}

/// The sets of every key of `files` but the gapped ones.
fn sets_of_files(files: &[Arc<FileKeys>]) -> Sets {
    Sets::of(
        files.iter().flat_map(|keys| keys.each()),
        files
            .iter()
            .flat_map(|k| k.joined.iter().copied())
            .collect(),
        SortedKeys::default(),
    )
}

/// Most probes of the present base files a derivation makes to find which
/// keys of the gone versions are private nowhere now; past it, those keys
/// stay private until the next full build.
const GONE_PROBES: usize = 1 << 22;

/// The keys of the base's gone versions that no current file version
/// holds as private text: to be looked for no more.
#[derive(Default)]
struct Gone {
    exact: KeyMap<()>,
    joined: KeyMap<()>,
    gapped: std::collections::HashSet<u32>,
}

impl Gone {
    fn of(base: &Base, present: &[bool], work: &[CachedFile]) -> Self {
        let mut exact: KeyMap<()> = KeyMap::default();
        let mut joined: KeyMap<()> = KeyMap::default();
        let mut gapped = std::collections::HashSet::new();
        for (cached, _) in base.files.iter().zip(present).filter(|(_, p)| !**p) {
            exact.extend(cached.keys.each().map(|(key, _)| (key, ())));
            joined.extend(cached.keys.joined.iter().map(|&key| (key, ())));
            gapped.extend(cached.keys.gapped.iter().copied());
        }
        if exact.is_empty() && joined.is_empty() && gapped.is_empty() {
            return Self::default();
        }
        // The keys a changed version has are not gone.
        for cached in work {
            let keys = &cached.keys;
            for (key, _) in keys.each() {
                exact.remove(&key);
            }
            for key in keys.joined.iter() {
                joined.remove(key);
            }
            for fp in keys.gapped.iter() {
                gapped.remove(fp);
            }
        }
        let holders: Vec<&FileKeys> = base
            .files
            .iter()
            .zip(present)
            .filter(|(_, p)| **p)
            .map(|(cached, _)| &*cached.keys)
            .chain(base.failed.iter().map(|(_, keys)| &**keys))
            .filter(|keys| keys.any())
            .collect();
        let probes = (exact.len() + joined.len() + gapped.len()).saturating_mul(holders.len());
        if probes > GONE_PROBES {
            return Self::default();
        }
        exact.retain(|&key, _| !holders.iter().any(|keys| keys.has(key)));
        joined.retain(|key, _| {
            !holders
                .iter()
                .any(|keys| keys.joined.binary_search(key).is_ok())
        });
        gapped.retain(|fp| {
            !holders
                .iter()
                .any(|keys| keys.gapped.binary_search(fp).is_ok())
        });
        Self {
            exact,
            joined,
            gapped,
        }
    }
}

/// A [`Lookup`] of `sets` without its gapped keys.
struct NoGapped<'s>(&'s Sets);

impl Lookup for NoGapped<'_> {
    fn any_shingle(&self) -> bool {
        self.0.any_shingle()
    }
    fn any_short(&self) -> bool {
        self.0.any_short()
    }
    fn any_joined(&self) -> bool {
        self.0.any_joined()
    }
    fn any_gapped(&self) -> bool {
        false
    }
    fn any_tri(&self) -> bool {
        self.0.any_tri()
    }
    fn shingle(&self, key: u64) -> bool {
        self.0.shingle(key)
    }
    fn short(&self, key: u64) -> bool {
        self.0.short(key)
    }
    fn joined(&self, key: u64) -> bool {
        self.0.joined(key)
    }
    fn gapped(&self, _: u64) -> bool {
        false
    }
    fn tri(&self, key: u64) -> bool {
        self.0.tri(key)
    }
    fn prefetch_shingle(&self, key: u64) {
        self.0.prefetch_shingle(key);
    }
    fn prefetch_tri(&self, key: u64) {
        self.0.prefetch_tri(key);
    }
}
