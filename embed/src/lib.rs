//! Embeddings: a vector for every memex object, so that semantic promotion
//! (seed 000: objects similar to the focus are shown in full) works on a
//! memex that carries no `:EMBEDDING:` properties.
//!
//! - **Who computes them** ([`Embedder`]): all-MiniLM-L6-v2 in this
//!   process by default ([`local`]), or an OpenAI-compatible
//!   `/embeddings` endpoint ([`remote`]), chosen by `[embedding]`
//!   ([`settings`]).
//! - **What is embedded** ([`text_of`]): an object's title, a line break
//!   and its body. An `:EMBEDDING:` property in the file always wins: such
//!   an object is never embedded. A private object is never embedded at
//!   all, by any embedder: no skill can see it (the view leaves it out, so
//!   it can be neither the focus nor promoted), so its vector would serve
//!   nothing and only be one more thing derived from private text. With a
//!   remote embedder every other text passes the last-door check
//!   ([`foveal_registry::egress::Gate::clean_quietly`]) first: a text it would
//!   change (a quoted private line, a secret) is not sent either. The
//!   vector of an object that becomes private is removed from the cache,
//!   in memory and on disk, as soon as the version that makes it private
//!   is published ([`Vectors`]), unless a visible object has the same
//!   title and body (the vector is then that object's too).
//! - **Where the vectors go**: into the file version's own vector table
//!   ([`foveal_memex::MemexFile::set_vector`]), the one `:EMBEDDING:`
//!   values fill, so the skills' view — with its 8-bit copy that the
//!   awareness scan reads — is built from them unchanged. A file version
//!   takes what the cache holds when it is published
//!   ([`foveal_memex::VectorSource`]); vectors computed later are
//!   published as a new version, with a new generation.
//! - **The cache** ([`cache`]): on disk in the data dir, keyed by model id
//!   and a hash of the text; only new or changed objects are embedded.
//! - **When**: `foveal memex embed` up front, with a progress bar;
//!   `foveal run` in the background ([`service`]) after start and after
//!   every memex change. A cycle never waits for a vector: an object
//!   without one is simply not promoted, and `foveal context --explain`
//!   says so.
//! - **Dimensions** come from the model. A file whose `:EMBEDDING:`
//!   vectors have another dimension keeps them and gets no computed ones
//!   (logged once); the awareness scan never compares vectors of different
//!   lengths.

pub mod cache;
pub mod service;
/// The embedders themselves, in `foveal-provider` (where candle is).
pub use foveal_provider::embed::{
    EmbedError, EmbedKind, EmbedSettings, Embedder, local, lower_priority, model_id, open, remote,
    settings,
};

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cache::{Key, VectorCache};
use foveal_memex::privacy::PrivacyTags;
use foveal_memex::snapshot::MemexSnapshot;
use foveal_memex::{Memex, MemexFile};
use foveal_registry::egress::Gate;

/// The text embedded for object `index` of `file`: its title, a line
/// break and its body, trimmed.
pub fn text_of(file: &MemexFile, index: u32) -> String {
    let h = &file.objects[index as usize].headline;
    let title = file.slice(&h.title).trim();
    let body = file.slice(&h.body).trim();
    if body.is_empty() {
        title.to_owned()
    } else {
        format!("{title}\n{body}")
    }
}

/// A hash of object `index`'s title, trimmed as [`text_of`] trims it: a
/// cheap first test of whether two objects have the same text.
fn title_hash(file: &MemexFile, index: u32) -> u64 {
    let h = &file.objects[index as usize].headline;
    foveal_memex::file::fnv1a(file.slice(&h.title).trim().as_bytes())
}

/// Whether object `index` of `file` has an `:EMBEDDING:` property.
fn has_property_vector(file: &MemexFile, index: u32) -> bool {
    file.objects[index as usize]
        .headline
        .properties
        .iter()
        .any(|p| file.slice(&p.key).eq_ignore_ascii_case("EMBEDDING"))
}

/// One text to embed.
#[derive(Clone)]
pub struct Job {
    /// Its cache key.
    pub key: Key,
    /// The text.
    pub text: String,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the text: it may be private.
        f.debug_struct("Job")
            .field("bytes", &self.text.len())
            .finish()
    }
}

/// What a memex needs embedded.
#[derive(Debug, Default)]
pub struct Plan {
    /// Texts without a vector yet, one per distinct text.
    pub jobs: Vec<Job>,
    /// Objects whose vector is in the cache already.
    pub reused: usize,
    /// Objects never embedded: private ones, and with a remote embedder
    /// those whose text the last-door check would change.
    pub skipped: usize,
    /// Objects with an `:EMBEDDING:` property.
    pub from_file: usize,
    /// Objects in all.
    pub objects: usize,
    /// The keys of every object's text now: what the cache must keep.
    pub live: HashSet<Key>,
    /// The keys of private objects' texts that the cache holds (embedded
    /// while the object was public) and no visible object needs: to be
    /// removed ([`VectorCache::remove`]) before anything is embedded.
    pub withdraw: Vec<Key>,
    /// The generation of the snapshot planned.
    pub generation: u64,
    /// For each file of that snapshot, its visible objects' texts: what a
    /// pass starts its re-checks from ([`Recheck`]).
    pub files: HashMap<PathBuf, FileTexts>,
}

/// The keys of the texts of one file version's visible objects (those
/// without an `:EMBEDDING:` property), with what they were computed from:
/// the file's content hash and which of its objects were private.
#[derive(Debug, Default)]
pub struct FileTexts {
    content_hash: u64,
    mask: Vec<bool>,
    keys: Vec<Key>,
}

impl FileTexts {
    /// The keys of `file`'s visible objects' texts, `mask` saying which of
    /// its objects are private.
    fn of(file: &MemexFile, mask: Vec<bool>, model_id: &str) -> Self {
        let keys = (0..file.objects.len() as u32)
            .filter(|&index| !mask[index as usize] && !has_property_vector(file, index))
            .map(|index| cache::key(model_id, &text_of(file, index)))
            .collect();
        Self {
            content_hash: file.content_hash,
            mask,
            keys,
        }
    }
}

/// Which objects of `snapshot` need a vector from `cache`'s model.
/// `gate` must be given for a remote embedder: every text goes through
/// it, and one it would change is skipped.
pub fn plan(
    snapshot: &MemexSnapshot,
    privacy: &PrivacyTags,
    cache: &VectorCache,
    remote: bool,
    gate: Option<&Gate>,
) -> Plan {
    let mut plan = Plan {
        generation: snapshot.generation(),
        ..Plan::default()
    };
    let mut queued: HashSet<Key> = HashSet::new();
    let mut private: HashSet<Key> = HashSet::new();
    for file in snapshot.files() {
        let mask = privacy.private_mask(file);
        let mut visible: Vec<Key> = Vec::new();
        for index in 0..file.objects.len() as u32 {
            plan.objects += 1;
            if has_property_vector(file, index) {
                plan.from_file += 1;
                continue;
            }
            if mask[index as usize] {
                plan.skipped += 1;
                let key = cache::key(cache.model_id(), &text_of(file, index));
                if cache.contains(&key) {
                    private.insert(key);
                }
                continue;
            }
            let text = text_of(file, index);
            if remote {
                // The last door, before the first byte leaves: fail
                // closed without a gate.
                let changed = gate.is_none_or(|g| g.clean_quietly(&text, snapshot).is_some());
                if changed {
                    plan.skipped += 1;
                    continue;
                }
            }
            let key = cache::key(cache.model_id(), &text);
            plan.live.insert(key);
            visible.push(key);
            if cache.contains(&key) {
                plan.reused += 1;
            } else if queued.insert(key) {
                plan.jobs.push(Job { key, text });
            } else {
                // The same text as another object: one vector serves both.
                plan.reused += 1;
            }
        }
        plan.files.insert(
            file.path.clone(),
            FileTexts {
                content_hash: file.content_hash,
                mask,
                keys: visible,
            },
        );
    }
    plan.withdraw = private
        .into_iter()
        .filter(|key| !plan.live.contains(key))
        .collect();
    plan
}

/// The jobs of a pass, checked again before each batch against the memex
/// as it is then ([`service::embed_jobs`]): a text planned while its
/// object was visible is neither embedded nor sent once no visible object
/// of the current snapshot has it — its object became private during the
/// pass (a tag added, a setup file), or changed — and, with a remote
/// embedder, once the last door would change it. The keys of the visible
/// objects' texts are computed once per new generation, and then only for
/// the file versions whose text or privacy changed.
pub struct Recheck<'a> {
    memex: &'a Memex,
    privacy: &'a PrivacyTags,
    model_id: String,
    /// With a remote embedder, the last door (`None`: nothing is sent).
    remote: Option<Option<&'a Gate>>,
    generation: u64,
    files: HashMap<PathBuf, FileTexts>,
    visible: HashSet<Key>,
}

impl std::fmt::Debug for Recheck<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recheck")
            .field("generation", &self.generation)
            .field("files", &self.files.len())
            .field("visible", &self.visible.len())
            .finish()
    }
}

impl<'a> Recheck<'a> {
    /// The re-checks of the jobs of `plan` (which it takes the per-file
    /// texts of), planned on a snapshot of `memex` for `cache`'s model;
    /// `remote` and `gate` as [`plan`] had them.
    pub fn new(
        memex: &'a Memex,
        privacy: &'a PrivacyTags,
        cache: &VectorCache,
        remote: bool,
        gate: Option<&'a Gate>,
        plan: &mut Plan,
    ) -> Self {
        let files = std::mem::take(&mut plan.files);
        let visible = files
            .values()
            .flat_map(|texts| texts.keys.iter().copied())
            .collect();
        Self {
            memex,
            privacy,
            model_id: cache.model_id().to_owned(),
            remote: remote.then_some(gate),
            generation: plan.generation,
            files,
            visible,
        }
    }

    /// Which of `jobs` may still be embedded (and sent), by the memex as
    /// it is now.
    pub fn keep(&mut self, jobs: &[Job]) -> Vec<bool> {
        let snapshot = self.memex.snapshot();
        if snapshot.generation() != self.generation {
            self.update(&snapshot);
        }
        jobs.iter()
            .map(|job| {
                self.visible.contains(&job.key)
                    && match self.remote {
                        None => true,
                        // The last door, again: fail closed without a gate.
                        Some(gate) => {
                            gate.is_some_and(|g| g.clean_quietly(&job.text, &snapshot).is_none())
                        }
                    }
            })
            .collect()
    }

    /// The visible texts of `snapshot`, from those of the file versions
    /// seen before when their text and privacy are the same.
    fn update(&mut self, snapshot: &MemexSnapshot) {
        let mut files: HashMap<PathBuf, FileTexts> = HashMap::with_capacity(self.files.len());
        let mut changed = false;
        for file in snapshot.files() {
            let mask = self.privacy.private_mask(file);
            let texts = match self.files.remove(&file.path) {
                Some(seen) if seen.content_hash == file.content_hash && seen.mask == mask => seen,
                _ => {
                    changed = true;
                    FileTexts::of(file, mask, &self.model_id)
                }
            };
            files.insert(file.path.clone(), texts);
        }
        // A file gone takes its texts with it.
        changed |= !self.files.is_empty();
        self.files = files;
        if changed {
            self.visible = self
                .files
                .values()
                .flat_map(|texts| texts.keys.iter().copied())
                .collect();
        }
        self.generation = snapshot.generation();
    }
}

/// Fills file versions with the vectors a cache holds, as the memex
/// publishes them ([`foveal_memex::VectorSource`]), and tells a waiting
/// worker when some object is still without one. Private objects get
/// none, and the vector a private object had while it was public is
/// removed from the cache once the version that makes it private is
/// published.
#[derive(Debug)]
pub struct Vectors {
    cache: Arc<VectorCache>,
    privacy: PrivacyTags,
    /// Files told about a dimension clash already (logged once each).
    clashes: Mutex<HashSet<PathBuf>>,
    wake: Option<Arc<service::Wake>>,
    /// A version filled since the last publish left an object without a
    /// vector: wake the worker once it is current.
    missing: std::sync::atomic::AtomicBool,
    /// The keys of private objects' texts that the cache held when their
    /// version was filled, each with a hash of the object's title
    /// ([`title_hash`]): removed at the next publish, unless a visible
    /// object has the same text then.
    withdraw: Mutex<Vec<(Key, u64)>>,
    /// For each file, the last version (its content hash and a hash of
    /// which of its objects are private) whose private objects were looked
    /// for in the cache: a version published again with more vectors, or a
    /// refill, is not looked at again. A version without a private object
    /// forgets the file's entry, so the same private version coming back
    /// later (tagged, untagged and embedded again, tagged again) is looked
    /// at again.
    looked: Mutex<HashMap<PathBuf, (u64, u64)>>,
}

impl Vectors {
    /// Vectors from `cache` for the objects that `privacy` leaves public.
    pub fn new(cache: Arc<VectorCache>, privacy: PrivacyTags) -> Self {
        Self {
            cache,
            privacy,
            clashes: Mutex::default(),
            wake: None,
            missing: std::sync::atomic::AtomicBool::new(false),
            withdraw: Mutex::default(),
            looked: Mutex::default(),
        }
    }

    /// The same, waking `wake` when an object lacks a vector.
    pub fn waking(mut self, wake: Arc<service::Wake>) -> Self {
        self.wake = Some(wake);
        self
    }

    /// The cache.
    pub fn cache(&self) -> &Arc<VectorCache> {
        &self.cache
    }

    /// Notes the private objects of `file` (a version about to be
    /// published; `mask` says which are private) whose text's vector the
    /// cache holds: it was embedded while they were public.
    fn look_for_private(&self, file: &MemexFile, mask: &[bool]) {
        if !mask.iter().any(|p| *p) {
            // Nothing private now: whatever was looked at before is
            // forgotten, and a private version that comes back is new.
            self.looked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&file.path);
            return;
        }
        {
            let mut looked = self.looked.lock().unwrap_or_else(|e| e.into_inner());
            let bytes: Vec<u8> = mask.iter().map(|p| u8::from(*p)).collect();
            let version = (file.content_hash, foveal_memex::file::fnv1a(&bytes));
            if looked.get(&file.path) == Some(&version) {
                return;
            }
            looked.insert(file.path.clone(), version);
        }
        let mut found = Vec::new();
        for index in 0..file.objects.len() as u32 {
            if !mask[index as usize] || has_property_vector(file, index) {
                continue;
            }
            let key = cache::key(self.cache.model_id(), &text_of(file, index));
            if self.cache.contains(&key) {
                found.push((key, title_hash(file, index)));
            }
        }
        if !found.is_empty() {
            self.withdraw
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(found);
        }
    }

    /// Removes from the cache, memory and file, the vectors noted by
    /// [`Vectors::look_for_private`] that no visible object of `snapshot`
    /// (the one just published) has the text of.
    fn withdraw_private(&self, snapshot: &MemexSnapshot) {
        let mut noted =
            std::mem::take(&mut *self.withdraw.lock().unwrap_or_else(|e| e.into_inner()));
        if noted.is_empty() {
            return;
        }
        // A visible object with the same title and body has the same key:
        // the vector is its own too, and stays. Sets, so that the pass is
        // linear in the objects (it runs under the memex's writer lock).
        let titles: HashSet<u64> = noted.iter().map(|(_, title)| *title).collect();
        let mut keys: HashSet<Key> = noted.drain(..).map(|(key, _)| key).collect();
        for file in snapshot.files() {
            let mut mask: Option<Vec<bool>> = None;
            for index in 0..file.objects.len() as u32 {
                if !titles.contains(&title_hash(file, index)) {
                    continue;
                }
                let mask = mask.get_or_insert_with(|| self.privacy.private_mask(file));
                if mask[index as usize] {
                    continue;
                }
                let key = cache::key(self.cache.model_id(), &text_of(file, index));
                keys.remove(&key);
            }
            if keys.is_empty() {
                return;
            }
        }
        let keys: Vec<Key> = keys.into_iter().collect();
        match self.cache.remove(&keys) {
            Ok(removed) => tracing::debug!(
                target: "foveal::embed",
                removed,
                "vectors of objects now private removed from the cache"
            ),
            Err(error) => tracing::warn!(
                target: "foveal::embed",
                "{error}; the vectors of objects now private are removed from memory, not from the file"
            ),
        }
    }

    fn clash(&self, path: &Path, file_dim: usize, dim: usize) {
        let mut clashes = self.clashes.lock().unwrap_or_else(|e| e.into_inner());
        if clashes.insert(path.to_owned()) {
            tracing::warn!(
                target: "foveal::embed",
                "{}: its `:EMBEDDING:` vectors have {file_dim} dimensions and the embedding model's {dim}; its other objects get no computed vector (vectors of different lengths are never compared)",
                path.display()
            );
        }
    }
}

impl foveal_memex::VectorSource for Vectors {
    fn fill(&self, file: &mut MemexFile) -> usize {
        let mask = self.privacy.private_mask(file);
        self.look_for_private(file, &mask);
        let mut missing = 0usize;
        let mut added = 0usize;
        for index in 0..file.objects.len() as u32 {
            if file.objects[index as usize].vector.is_some() || mask[index as usize] {
                continue;
            }
            let key = cache::key(self.cache.model_id(), &text_of(file, index));
            match self.cache.get(&key) {
                Some(vector) => {
                    if file.set_vector(index, &vector) {
                        added += 1;
                    } else {
                        let path = file.path.clone();
                        self.clash(&path, file.dim, vector.len());
                    }
                }
                None => missing += 1,
            }
        }
        if missing > 0 {
            self.missing
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        added
    }

    fn published(&self, snapshot: &MemexSnapshot) {
        self.withdraw_private(snapshot);
        if self
            .missing
            .swap(false, std::sync::atomic::Ordering::Relaxed)
            && let Some(wake) = &self.wake
        {
            wake.wake();
        }
    }
}

#[cfg(test)]
mod tests;
