//! An immutable, indexed view of the whole memex at one generation.
//!
//! The snapshot holds each file as a shared [`MemexFile`] and two indexes
//! over all of them: id → file, and tag → files having it. Both are
//! persistent maps (`imbl`): publishing a change to one file copies only the
//! paths of the maps that change, so the cost of a re-publish is
//! proportional to that file, not to the memex. Queries answer from the
//! per-file indexes of the files the global index names, so they cost in
//! proportion to what they return.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::MemexError;
use crate::file::{FileId, FileRef, MemexFile, Object, ObjectType, id_hash};

/// What to look for (seed 000 `context-query`). Every field set must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// An own tag, matched exactly and case-insensitively (the seed's
    /// substring match counted `subprojects` as `project`).
    pub tag: Option<String>,
    /// A TODO state, exactly as written (`DONE`).
    pub todo: Option<String>,
    /// The object type.
    pub kind: Option<ObjectType>,
}

/// The memex at one generation.
#[derive(Debug, Clone, Default)]
pub struct MemexSnapshot {
    generation: u64,
    /// The files by path: a persistent map, so that a snapshot made for
    /// an edit shares every other file's entry with the last one (a
    /// `BTreeMap` was copied whole, every path and file handle of it).
    files: imbl::OrdMap<Arc<Path>, FileRef>,
    /// `id_hash(id)` → the file holding it (ids are not copied; a lookup
    /// checks the file, and falls back to a scan on a hash collision).
    ids: IdMap,
    /// The keys of [`MemexSnapshot::ids`] more than one file has claimed
    /// (or had, once): only for these does a file's removal look for
    /// another holder. A key may stay after its other holders left.
    contested: imbl::GenericHashSet<
        u64,
        std::hash::BuildHasherDefault<KeyHasher>,
        imbl::shared_ptr::DefaultSharedPtr,
    >,
    tag_files: imbl::HashMap<Box<str>, imbl::OrdSet<Arc<Path>>>,
    failed: BTreeMap<PathBuf, Arc<MemexError>>,
    /// The text (read lossily) of each file whose latest version was read
    /// but not loaded: the privacy gate still learns what private text it
    /// holds (fail closed).
    failed_text: BTreeMap<PathBuf, Arc<str>>,
}

/// `id_hash(id)` → the file holding it. The keys are hashes already: the
/// map mixes their bits instead of hashing them again with SipHash (at a
/// million headlines, loading spent a third of its time in this map).
type IdMap = imbl::GenericHashMap<
    u64,
    Arc<Path>,
    std::hash::BuildHasherDefault<KeyHasher>,
    imbl::shared_ptr::DefaultSharedPtr,
>;

/// A hasher for keys that are 64-bit hashes: one multiply and a fold, so
/// that every bit of the key reaches the low bits the map branches on.
#[derive(Debug, Default, Clone, Copy)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        let m = u128::from(self.0) * 0x9e37_79b9_7f4a_7c15;
        (m as u64) ^ ((m >> 64) as u64)
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys reach this hasher; any other input still hashes.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, key: u64) {
        self.0 ^= key;
    }
}

/// The keys ([`id_hash`]) of the ids `file`'s index answers for, in the
/// order the id map is filled fastest: the map branches on the low bits
/// of each key's hash first, so keys sorted by those bits, reversed, go
/// down the same nodes one after another (at a million headlines, 0.64 s
/// of inserts in the index's order, 0.32 s in this one). The ids are read
/// in the file's order, not the index's.
pub(crate) fn id_keys(file: &MemexFile) -> Vec<u64> {
    let mut order: Vec<u32> = file.ids().map(|(_, i)| i).collect();
    order.sort_unstable();
    let mut keys: Vec<u64> = order.iter().map(|&i| id_hash(file.id(i))).collect();
    keys.sort_unstable_by_key(|&k| {
        (std::hash::Hasher::finish(&KeyHasher(k)) as u32).reverse_bits()
    });
    keys
}

/// One object in a snapshot: a file and an index into it.
#[derive(Debug, Clone, Copy)]
pub struct ObjectRef<'a> {
    file: &'a MemexFile,
    index: u32,
}

impl<'a> ObjectRef<'a> {
    /// Object `index` of `file`.
    pub(crate) fn new(file: &'a MemexFile, index: u32) -> Self {
        ObjectRef { file, index }
    }

    fn object(&self) -> &'a Object {
        &self.file.objects[self.index as usize]
    }

    /// The file it is in.
    pub fn file(&self) -> &'a MemexFile {
        self.file
    }

    /// Its index in its file.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Its id.
    pub fn id(&self) -> &'a str {
        self.file.id(self.index)
    }

    /// Its type.
    pub fn kind(&self) -> ObjectType {
        ObjectType::Headline
    }

    /// Its title.
    pub fn title(&self) -> &'a str {
        self.file.slice(&self.object().headline.title)
    }

    /// Its TODO keyword.
    pub fn todo(&self) -> Option<&'a str> {
        self.object().headline.todo.as_deref()
    }

    /// Whether its TODO keyword is a done state of its file.
    pub fn is_done(&self) -> bool {
        self.object().headline.done
    }

    /// Its level (number of stars).
    pub fn level(&self) -> u16 {
        self.object().headline.level
    }

    /// Its 1-based line in its file.
    pub fn line(&self) -> u32 {
        self.object().headline.line
    }

    /// Its own tags.
    pub fn tags(&self) -> impl Iterator<Item = &'a str> {
        self.object().headline.tags(&self.file.text)
    }

    /// The tags it inherits from its ancestors (nearest first), without its
    /// own.
    pub fn inherited_tags(&self) -> Vec<&'a str> {
        let mut tags = Vec::new();
        for ancestor in self.ancestors() {
            for tag in ancestor.tags() {
                if !tags.iter().any(|t: &&str| t.eq_ignore_ascii_case(tag)) {
                    tags.push(tag);
                }
            }
        }
        tags
    }

    /// Its properties, in order, as `(key, value)`.
    pub fn properties(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        let file = self.file;
        self.object()
            .headline
            .properties
            .iter()
            .map(move |p| (file.slice(&p.key), file.slice(&p.value)))
    }

    /// The value of property `key` (case-insensitive, as in Org).
    pub fn property(&self, key: &str) -> Option<&'a str> {
        self.properties()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    }

    /// Its body: the text of its section after the planning line and the
    /// property drawer, up to its first child.
    pub fn body(&self) -> &'a str {
        self.file.slice(&self.object().headline.body)
    }

    /// Its embedding vector.
    pub fn vector(&self) -> Option<&'a [f32]> {
        self.file.vector(self.index)
    }

    /// Its parent.
    pub fn parent(&self) -> Option<ObjectRef<'a>> {
        self.object().headline.parent.map(|index| ObjectRef {
            file: self.file,
            index,
        })
    }

    /// Its children, in order.
    pub fn children(&self) -> impl Iterator<Item = ObjectRef<'a>> {
        let file = self.file;
        let range = self.object().children.clone();
        file.children[range.start as usize..range.end as usize]
            .iter()
            .map(move |&index| ObjectRef { file, index })
    }

    /// Its ancestors, nearest first.
    pub fn ancestors(&self) -> impl Iterator<Item = ObjectRef<'a>> {
        std::iter::successors(self.parent(), |o| o.parent())
    }
}

impl MemexSnapshot {
    /// The generation: bumped on every published change.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The files, by path.
    pub fn files(&self) -> impl Iterator<Item = &FileRef> {
        self.files.values()
    }

    /// The file at `path`.
    pub fn file(&self, path: &Path) -> Option<&FileRef> {
        self.files.get(path)
    }

    /// Files whose latest version could not be loaded, with why. A file
    /// that loaded before keeps its previous version in the snapshot.
    pub fn failed(&self) -> &BTreeMap<PathBuf, Arc<MemexError>> {
        &self.failed
    }

    /// The text of each file that was read but failed to load (not UTF-8
    /// — read lossily — or not parsable). Never lent to a skill; the
    /// privacy gate reads it.
    pub fn failed_texts(&self) -> impl Iterator<Item = (&Path, &Arc<str>)> {
        self.failed_text.iter().map(|(p, t)| (p.as_path(), t))
    }

    /// The files whose settings depend on the setup file at `path`
    /// (`#+SETUPFILE:`, nested ones included), by path.
    pub fn includers_of(&self, path: &Path) -> Vec<PathBuf> {
        self.files
            .values()
            .filter(|f| f.setup.depends_on(path))
            .map(|f| f.path.clone())
            .collect()
    }

    /// The paths, other than `path`, under which the file `id` is loaded
    /// (its links in the memex), by path.
    pub fn names_of(&self, id: FileId, path: &Path) -> Vec<PathBuf> {
        self.files
            .values()
            .filter(|f| f.identity == Some(id) && f.path != path)
            .map(|f| f.path.clone())
            .collect()
    }

    /// The number of objects.
    pub fn len(&self) -> usize {
        self.files.values().map(|f| f.objects.len()).sum()
    }

    /// Whether there is no object.
    pub fn is_empty(&self) -> bool {
        self.files.values().all(|f| f.objects.is_empty())
    }

    /// The file the id map gives for `id` (without [`MemexSnapshot::get`]'s
    /// fallback scan).
    #[cfg(test)]
    pub(crate) fn id_owner(&self, id: &str) -> Option<&Path> {
        self.ids.get(&id_hash(id)).map(|p| &**p)
    }

    /// The object with id `id` (seed 000 `lookup-object`).
    pub fn get(&self, id: &str) -> Option<ObjectRef<'_>> {
        if let Some(path) = self.ids.get(&id_hash(id))
            && let Some(file) = self.files.get(path)
            && let Some(index) = file.index_of(id)
        {
            return Some(ObjectRef { file, index });
        }
        // Two ids sharing a 64-bit hash: astronomically rare, still right.
        self.files
            .values()
            .find_map(|file| file.index_of(id).map(|index| ObjectRef { file, index }))
    }

    /// Every object, file by file in path order, each file in outline order.
    pub fn objects(&self) -> impl Iterator<Item = ObjectRef<'_>> {
        self.files.values().flat_map(|file| {
            (0..file.objects.len() as u32).map(move |index| ObjectRef { file, index })
        })
    }

    /// The objects of the file at `path`, in outline order (none when it is
    /// not loaded).
    pub fn file_objects(&self, path: &Path) -> impl Iterator<Item = ObjectRef<'_>> {
        self.files.get(path).into_iter().flat_map(|file| {
            (0..file.objects.len() as u32).map(move |index| ObjectRef { file, index })
        })
    }

    /// The objects matching `query` (seed 000 `context-query`), in file
    /// order. With a tag or a TODO state, the cost is proportional to the
    /// number of objects carrying it.
    pub fn query(&self, query: &Query) -> Vec<ObjectRef<'_>> {
        let mut out = Vec::new();
        let todo_ok = |o: &ObjectRef<'_>| query.todo.as_deref().is_none_or(|t| o.todo() == Some(t));
        let kind_ok = |o: &ObjectRef<'_>| query.kind.is_none_or(|k| o.kind() == k);
        if let Some(tag) = &query.tag {
            let tag = tag.trim_matches(':').to_lowercase();
            let Some(paths) = self.tag_files.get(tag.as_str()) else {
                return out;
            };
            for path in paths {
                let Some(file) = self.files.get(path) else {
                    continue;
                };
                for &index in file.with_tag(&tag) {
                    let o = ObjectRef { file, index };
                    if todo_ok(&o) && kind_ok(&o) {
                        out.push(o);
                    }
                }
            }
        } else if let Some(todo) = &query.todo {
            for file in self.files.values() {
                for &index in file.with_todo(todo) {
                    let o = ObjectRef { file, index };
                    if kind_ok(&o) {
                        out.push(o);
                    }
                }
            }
        } else {
            out.extend(self.objects().filter(|o| kind_ok(o)));
        }
        out
    }

    /// Headlines tagged `project` that are not done (seed 000
    /// `context-active-projects`; "done" is any done state of the file's
    /// `#+TODO:` keywords, not only `DONE`).
    pub fn active_projects(&self) -> Vec<ObjectRef<'_>> {
        let mut projects = self.query(&Query {
            tag: Some("project".into()),
            kind: Some(ObjectType::Headline),
            ..Query::default()
        });
        projects.retain(|o| !o.is_done());
        projects
    }

    /// Headlines in a done state (seed 000 `context-recent-tasks`).
    pub fn recent_tasks(&self) -> Vec<ObjectRef<'_>> {
        let mut out = Vec::new();
        for file in self.files.values() {
            for state in &file.keywords.done {
                out.extend(
                    file.with_todo(state)
                        .iter()
                        .map(|&index| ObjectRef { file, index }),
                );
            }
        }
        out
    }

    /// This snapshot with `file` added or replacing the file at its path,
    /// and its failure (if any) forgotten.
    pub fn with_file(&self, file: FileRef) -> Self {
        let mut next = self.clone();
        next.add_file(file);
        next
    }

    /// Adds `file` to this snapshot (or replaces the file at its path) and
    /// forgets its failure, as a new generation. In place: a snapshot no
    /// other holds has its maps changed where they are, where a copy
    /// ([`MemexSnapshot::with_file`]) copies every node it touches (a
    /// load that made a snapshot per file spent a third of its time there,
    /// and copied the map of files for each: quadratic in the files).
    pub(crate) fn add_file(&mut self, file: FileRef) {
        let keys = id_keys(&file);
        self.add_file_keyed(file, &keys);
    }

    /// [`MemexSnapshot::add_file`] with the file's [`id_keys`], computed
    /// beforehand (a load computes them on the thread that parsed the
    /// file).
    pub(crate) fn add_file_keyed(&mut self, file: FileRef, keys: &[u64]) {
        let path: Arc<Path> = Arc::from(file.path.as_path());
        self.forget_indexes_of(&path);
        for &key in keys {
            // The first file to claim an id keeps it.
            let owner = self.ids.entry(key).or_insert_with(|| Arc::clone(&path));
            if !Arc::ptr_eq(owner, &path) {
                self.contested.insert(key);
            }
        }
        for tag in file.tags() {
            self.tag_files
                .entry(Box::from(tag))
                .or_default()
                .insert(Arc::clone(&path));
        }
        self.failed.remove(&file.path);
        self.failed_text.remove(&file.path);
        self.files.insert(path, file);
        self.generation += 1;
    }

    /// This snapshot with each of `files` added or replacing the file at
    /// its path, published as one generation.
    pub fn with_files(&self, files: Vec<FileRef>) -> Self {
        let mut next = self.clone();
        if files.is_empty() {
            return next;
        }
        for file in files {
            next.add_file(file);
        }
        next.generation = self.generation + 1;
        next
    }

    /// This snapshot without the file at `path`.
    pub fn without_file(&self, path: &Path) -> Self {
        let mut next = self.clone();
        next.forget_indexes_of(path);
        next.files.remove(path);
        next.failed.remove(path);
        next.failed_text.remove(path);
        next.generation += 1;
        next
    }

    /// This snapshot recording that the latest version of `path` failed to
    /// load; its previous version, if any, stays.
    pub(crate) fn with_failure(
        &self,
        path: &Path,
        error: MemexError,
        text: Option<Arc<str>>,
    ) -> Self {
        let mut next = self.clone();
        next.add_failure(path, error, text);
        next
    }

    /// Records in place that the latest version of `path` failed to load,
    /// as a new generation ([`MemexSnapshot::with_failure`]).
    pub(crate) fn add_failure(&mut self, path: &Path, error: MemexError, text: Option<Arc<str>>) {
        self.failed.insert(path.to_owned(), Arc::new(error));
        match text {
            Some(text) => self.failed_text.insert(path.to_owned(), text),
            None => self.failed_text.remove(path),
        };
        self.generation += 1;
    }

    /// Makes the indexes no longer point into the file at `path`.
    fn forget_indexes_of(&mut self, path: &Path) {
        let Some(old) = self.files.get(path).map(Arc::clone) else {
            return;
        };
        for (id, _) in old.ids() {
            let key = id_hash(id);
            if self.ids.get(&key).is_some_and(|p| &**p == path) {
                self.ids.remove(&key);
                if !self.contested.contains(&key) {
                    continue;
                }
                // Another file claiming the same id inherits it (looked
                // for only when one did: a scan of every file for each id
                // of a large file was quadratic).
                let other = self
                    .files
                    .iter()
                    .find(|(p, f)| &***p != path && f.index_of(id).is_some())
                    .map(|(p, _)| Arc::clone(p));
                match other {
                    Some(other) => {
                        self.ids.insert(key, other);
                    }
                    None => {
                        self.contested.remove(&key);
                    }
                }
            }
        }
        for tag in old.tags() {
            if let Some(set) = self.tag_files.get_mut(tag) {
                set.remove(path);
                if set.is_empty() {
                    self.tag_files.remove(tag);
                }
            }
        }
    }
}
