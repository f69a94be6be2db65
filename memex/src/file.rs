//! One memex file: its text, its objects and its own indexes.
//!
//! A file is the unit of change: when it changes on disk only it is parsed
//! again, and the snapshot swaps the old [`MemexFile`] for the new one.
//! Objects keep byte ranges into the file's text instead of copies, so the
//! memex costs little more than the Org bytes themselves, and write-back can
//! splice an edit into the original text.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::parse::{self, Headline, ParseError, Settings, Span, TodoKeywords};
use crate::setup::Setup;
pub use crate::setup::Warning;
use crate::stored::VectorStore;

/// How an object got its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IdSource {
    /// From its `:ID:` property.
    Property,
    /// Derived from the file and the outline path (see [`derived_id`]).
    Derived,
}

/// The kind of a memex object. Only headlines for now; the seed's
/// `context-query` filters on it, so it is part of the query API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ObjectType {
    /// An Org headline.
    Headline,
}

impl ObjectType {
    /// Parses `headline` (case-insensitive).
    pub fn parse(text: &str) -> Option<Self> {
        text.eq_ignore_ascii_case("headline")
            .then_some(Self::Headline)
    }
}

/// One headline of a file.
#[derive(Debug, Clone)]
pub struct Object {
    /// Its structure as scanned.
    pub headline: Headline,
    /// Its id (read it with [`Object::id`]): unique in the memex when it
    /// comes from `:ID:`.
    pub id: IdText,
    /// Where the id came from.
    pub id_source: IdSource,
    /// Its children: a range of [`MemexFile::children`].
    pub children: Span,
    /// Its row in [`MemexFile::vectors`], when it has an `:EMBEDDING:`.
    pub vector: Option<u32>,
}

/// Where an object's id is kept: in the file's text (an `:ID:` value, not
/// copied: 100,000 copies of a UUID cost megabytes), or derived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdText {
    /// The `:ID:` value's span in the text.
    Text(Span),
    /// A derived id.
    Derived(Box<str>),
}

impl Object {
    /// Its id; `text` is its file's text.
    #[inline]
    pub fn id<'a>(&'a self, text: &'a str) -> &'a str {
        match &self.id {
            IdText::Text(span) => slice(text, span),
            IdText::Derived(id) => id,
        }
    }
}

/// Which file a path names: its device and inode. Two paths with the same
/// identity (a symlink and its target, two hard links) are one file,
/// whatever their names, and its privacy is the same under each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    /// The device.
    pub dev: u64,
    /// The inode.
    pub ino: u64,
}

impl FileId {
    /// The identity of the file `meta` describes (of the file a link
    /// points to, for metadata read through it).
    pub fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
}

/// The last [`MemexFile::version`] given.
static VERSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A parsed memex file.
#[derive(Debug)]
pub struct MemexFile {
    /// The file.
    pub path: PathBuf,
    /// Its text, exactly as read.
    pub text: String,
    /// Its TODO keywords.
    pub keywords: TodoKeywords,
    /// Its file tags (`#+FILETAGS:`, its setup files' too): every
    /// headline inherits them.
    pub file_tags: Vec<String>,
    /// The tags its `#+TAGS:` lines (its setup files' too) offer.
    pub declared_tags: Vec<String>,
    /// What it took from its `#+SETUPFILE:`s ([`crate::setup`]).
    pub setup: Arc<Setup>,
    /// When the version read was last modified on disk (the time of the
    /// write, for a version the memex wrote itself); `None` for a text
    /// that was not read from a file.
    pub modified: Option<SystemTime>,
    /// Which file the version read was ([`FileId`]); `None` for a text
    /// that was not read from a file.
    pub identity: Option<FileId>,
    /// Its headlines, in file order (a parent before its children).
    pub objects: Vec<Object>,
    /// Child indices; each object's `children` is a range of this.
    pub children: Vec<u32>,
    /// Length of each embedding vector in this file (0 when none).
    pub dim: usize,
    /// All embedding vectors, `dim` floats per row.
    pub vectors: Vec<f32>,
    /// Things worth knowing that did not stop the load.
    pub warnings: Vec<Warning>,
    /// The agenda's view of each object with a date the agenda reads
    /// (outside `COMMENT`ed subtrees), in order, read at load while the
    /// text is at hand; private objects' too (privacy is decided when an
    /// agenda is asked for, with the tags of that moment), so only
    /// [`crate::agenda`] reads it, and it leaves them out. Each item's
    /// `file` is 0.
    pub(crate) agenda: Vec<(u32, parse::agenda::Item)>,
    /// A hash of the text: write-back checks it against the disk to detect
    /// an edit made behind the memex's back.
    pub content_hash: u64,
    /// The digest of the text, once computed ([`Self::text_digest`]).
    digest: std::sync::OnceLock<[u8; 32]>,
    /// Which parse this is, unique in the process: a new one for every
    /// text read or written, kept only by a copy that gains vectors and
    /// nothing else (the embedding worker's refill). What is derived from
    /// the text alone (the privacy gate's keys of it) is kept by it.
    pub version: u64,
    /// How long parsing and indexing took.
    pub parse_time: Duration,
    by_tag: HashMap<Box<str>, Vec<u32>>,
    by_todo: HashMap<Box<str>, Vec<u32>>,
    /// Object indices, hashed by [`id_hash`] of their id: no id is copied.
    by_id: hashbrown::HashTable<u32>,
    /// What skills are lent of this file (its visible text and index),
    /// built on first use for the privacy tags it was built with. The view
    /// layer keeps it here and reads it back ([`crate::view::cached`]);
    /// to the file it is opaque, so that files know nothing of views.
    pub(crate) view_cache: std::sync::Mutex<Option<Arc<dyn std::any::Any + Send + Sync>>>,
}

impl MemexFile {
    /// Parses `text` read from `path`. `id_base` is the path used to derive
    /// ids for headlines without `:ID:` (relative to the memex root, so the
    /// ids survive moving the whole memex).
    ///
    /// Its `#+SETUPFILE:` lines are not followed: [`MemexFile::parse_with`]
    /// takes the settings they give.
    pub fn parse(path: &Path, id_base: &str, text: String) -> Result<Self, ParseError> {
        let settings = parse::collect_settings(&text, &mut |_, _| None);
        Self::parse_with(path, id_base, text, settings, Arc::default())
    }

    /// Parses `text` with its in-buffer settings already read (with its
    /// setup files: [`crate::setup::resolve`]), and what its setup
    /// files gave.
    pub fn parse_with(
        path: &Path,
        id_base: &str,
        text: String,
        settings: Settings,
        setup: Arc<Setup>,
    ) -> Result<Self, ParseError> {
        Self::parse_or_give_back(path, id_base, text, settings, setup).map_err(|(error, _)| error)
    }

    /// [`Self::parse_with`], giving `text` back when it does not parse
    /// (so a caller keeps a failed file's text without copying every
    /// file's beforehand).
    pub fn parse_or_give_back(
        path: &Path,
        id_base: &str,
        text: String,
        settings: Settings,
        setup: Arc<Setup>,
    ) -> Result<Self, (ParseError, String)> {
        Self::parse_stored(path, id_base, text, settings, setup, None)
    }

    /// [`Self::parse_or_give_back`], with the numbers of its
    /// `:EMBEDDING:` values taken from `store` when it holds them for this
    /// text, and put there when it does not.
    pub(crate) fn parse_stored(
        path: &Path,
        id_base: &str,
        text: String,
        settings: Settings,
        setup: Arc<Setup>,
        store: Option<&VectorStore>,
    ) -> Result<Self, (ParseError, String)> {
        let started = std::time::Instant::now();
        let parsed = match parse::parse_with(&text, settings) {
            Ok(parsed) => parsed,
            Err(error) => return Err((error, text)),
        };
        let mut warnings = setup.warnings.clone();
        let count = parsed.headlines.len();

        // Children: parents come before children, so a counting pass gives
        // each parent a contiguous range.
        let mut child_count = vec![0u32; count];
        for h in &parsed.headlines {
            if let Some(p) = h.parent {
                child_count[p as usize] += 1;
            }
        }
        let mut starts = Vec::with_capacity(count);
        let mut total = 0u32;
        for c in &child_count {
            starts.push(total);
            total += c;
        }
        let mut children = vec![0u32; total as usize];
        let mut fill = starts.clone();
        for (i, h) in parsed.headlines.iter().enumerate() {
            if let Some(p) = h.parent {
                children[fill[p as usize] as usize] = i as u32;
                fill[p as usize] += 1;
            }
        }

        let ids = assign_ids(&text, id_base, &parsed.headlines);
        let digest = std::sync::OnceLock::new();
        let spans = embedding_spans(&text, &parsed.headlines);
        let embeddings = if spans.is_empty() {
            Embeddings::default()
        } else if let Some(store) = store {
            let digest = *digest.get_or_init(|| text_digest(&text));
            store.embeddings(&digest, &spans, || Embeddings::read(&text, &spans))
        } else {
            Embeddings::read(&text, &spans)
        };
        let dim = embeddings.dim as usize;
        let mut outcomes = embeddings.outcomes.iter().zip(&spans).peekable();
        let mut row = 0u32;
        let mut objects = Vec::with_capacity(count);
        let mut by_tag: HashMap<Box<str>, Vec<u32>> = HashMap::new();
        let mut by_todo: HashMap<Box<str>, Vec<u32>> = HashMap::new();
        let mut by_id: hashbrown::HashTable<u32> = hashbrown::HashTable::with_capacity(count);
        for (i, (headline, (id, id_source))) in parsed.headlines.into_iter().zip(ids).enumerate() {
            let index = i as u32;
            let mut vector = None;
            if let Some((&outcome, _)) = outcomes.next_if(|(_, (at, _))| *at == index) {
                match outcome {
                    Embeddings::ROW => {
                        vector = Some(row);
                        row += 1;
                    }
                    Embeddings::NOT_NUMBERS => warnings.push(Warning {
                        line: headline.line,
                        message: "`:EMBEDDING:` is not a list of numbers; ignored".into(),
                    }),
                    n => warnings.push(Warning {
                        line: headline.line,
                        message: format!(
                            "`:EMBEDDING:` has {n} numbers, the file's first has {dim}; ignored"
                        ),
                    }),
                }
            }
            for tag in headline.tags(&text) {
                let list = by_tag
                    .entry(tag.to_lowercase().into_boxed_str())
                    .or_default();
                if list.last() != Some(&index) {
                    list.push(index);
                }
            }
            if let Some(todo) = &headline.todo {
                by_todo.entry(todo.clone()).or_default().push(index);
            }
            let id_str = match &id {
                IdText::Text(span) => slice(&text, span),
                IdText::Derived(d) => d,
            };
            let hash = id_hash(id_str);
            let id_of = |i: u32| -> &str {
                let o: &Object = &objects[i as usize];
                o.id(&text)
            };
            if let Some(&first) = by_id.find(hash, |&i| id_of(i) == id_str) {
                if id_source == IdSource::Property {
                    let id = id_str;
                    warnings.push(Warning {
                        line: headline.line,
                        message: format!(
                            "duplicate :ID: {id:?} (first at line {}); this headline is reachable only through its outline",
                            objects.get(first as usize).map_or(0, |o: &Object| o.headline.line)
                        ),
                    });
                }
            } else {
                by_id.insert_unique(hash, index, |&i| id_hash(id_of(i)));
            }
            objects.push(Object {
                headline,
                id,
                id_source,
                children: starts[i]..starts[i] + child_count[i],
                vector,
            });
        }
        let agenda = agenda_items(&text, &objects, &mut warnings);
        let content_hash = content_hash(text.as_bytes());
        Ok(Self {
            path: path.to_owned(),
            keywords: parsed.keywords,
            file_tags: parsed.file_tags,
            declared_tags: parsed.tags,
            setup,
            modified: None,
            identity: None,
            objects,
            children,
            dim,
            vectors: embeddings.vectors,
            warnings,
            agenda,
            content_hash,
            digest,
            version: VERSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
            parse_time: started.elapsed(),
            by_tag,
            by_todo,
            by_id,
            view_cache: std::sync::Mutex::new(None),
            text,
        })
    }

    /// The text of `span`.
    #[inline]
    pub fn slice(&self, span: &Span) -> &str {
        slice(&self.text, span)
    }

    /// Objects with `tag` among their own tags (exact, case-insensitive).
    pub fn with_tag(&self, tag_lowercase: &str) -> &[u32] {
        self.by_tag.get(tag_lowercase).map_or(&[], Vec::as_slice)
    }

    /// Objects in TODO state `state` (exact, case-sensitive as in Org).
    pub fn with_todo(&self, state: &str) -> &[u32] {
        self.by_todo.get(state).map_or(&[], Vec::as_slice)
    }

    /// The distinct tags of this file, lowercased.
    pub fn tags(&self) -> impl Iterator<Item = &str> {
        self.by_tag.keys().map(|k| &**k)
    }

    /// The object with id `id` in this file.
    pub fn index_of(&self, id: &str) -> Option<u32> {
        self.by_id.find(id_hash(id), |&i| self.id(i) == id).copied()
    }

    /// The id of object `index`.
    #[inline]
    pub fn id(&self, index: u32) -> &str {
        self.objects[index as usize].id(&self.text)
    }

    /// The ids of this file's objects that its index answers for.
    pub fn ids(&self) -> impl Iterator<Item = (&str, u32)> {
        self.by_id.iter().map(|&i| (self.id(i), i))
    }

    /// Gives object `index`, which has no vector, the computed `vector`
    /// (the host's embedder): a new row of the file's table. `false`, and
    /// nothing changes, when the object has one (an `:EMBEDDING:` always
    /// wins) or the file's vectors have another length.
    pub fn set_vector(&mut self, index: u32, vector: &[f32]) -> bool {
        let Some(object) = self.objects.get(index as usize) else {
            return false;
        };
        if object.vector.is_some()
            || vector.is_empty()
            || (self.dim != 0 && self.dim != vector.len())
        {
            return false;
        }
        self.dim = vector.len();
        let row = (self.vectors.len() / self.dim) as u32;
        self.vectors.extend_from_slice(vector);
        self.objects[index as usize].vector = Some(row);
        true
    }

    /// A copy of this version to publish again with more vectors: the same
    /// text, objects and indexes, without the prepared view (built again
    /// for the new vectors).
    pub(crate) fn duplicate(&self) -> Self {
        Self {
            path: self.path.clone(),
            text: self.text.clone(),
            keywords: self.keywords.clone(),
            file_tags: self.file_tags.clone(),
            declared_tags: self.declared_tags.clone(),
            setup: Arc::clone(&self.setup),
            modified: self.modified,
            identity: self.identity,
            objects: self.objects.clone(),
            children: self.children.clone(),
            dim: self.dim,
            vectors: self.vectors.clone(),
            warnings: self.warnings.clone(),
            agenda: self.agenda.clone(),
            content_hash: self.content_hash,
            digest: self.digest.clone(),
            // The same text, tags and objects: only vectors are added.
            version: self.version,
            parse_time: self.parse_time,
            by_tag: self.by_tag.clone(),
            by_todo: self.by_todo.clone(),
            by_id: self.by_id.clone(),
            view_cache: std::sync::Mutex::new(None),
        }
    }

    /// The BLAKE3 hash of the text: computed once per version (at load,
    /// for a file with `:EMBEDDING:` values read through a
    /// [`VectorStore`]).
    pub fn text_digest(&self) -> [u8; 32] {
        *self.digest.get_or_init(|| text_digest(&self.text))
    }

    /// The embedding of object `index`.
    pub fn vector(&self, index: u32) -> Option<&[f32]> {
        let row = self.objects.get(index as usize)?.vector? as usize;
        self.vectors.get(row * self.dim..(row + 1) * self.dim)
    }
}

#[inline]
fn slice<'a>(text: &'a str, span: &Span) -> &'a str {
    &text[span.start as usize..span.end as usize]
}

/// The digest of `text`: its BLAKE3 hash (at a million headlines a
/// third of the time SHA-256 took with the CPU's SHA instructions).
pub(crate) fn text_digest(text: &str) -> [u8; 32] {
    blake3::hash(text.as_bytes()).into()
}

/// Each headline with an `:EMBEDDING:` property: its index and the
/// value's span, in order.
fn embedding_spans(text: &str, headlines: &[Headline]) -> Vec<(u32, Span)> {
    headlines
        .iter()
        .enumerate()
        .filter_map(|(i, headline)| {
            let p = headline
                .properties
                .iter()
                .find(|p| slice(text, &p.key).eq_ignore_ascii_case("EMBEDDING"))?;
            Some((i as u32, p.value.clone()))
        })
        .collect()
}

/// What a file's `:EMBEDDING:` values give: for each (in order) whether it
/// is a row of the table, and the table. Read from the text, or from a
/// [`VectorStore`] that holds them for the same text.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Embeddings {
    /// The length of every row (the first value's count of numbers).
    pub dim: u32,
    /// The headline of each value, in order.
    pub objects: Vec<u32>,
    /// For each value, [`Self::ROW`] (the next row), [`Self::NOT_NUMBERS`],
    /// or the count of its numbers when that is not `dim`.
    pub outcomes: Vec<u32>,
    /// The rows, `dim` numbers each.
    pub vectors: Vec<f32>,
}

impl Embeddings {
    /// A value that is the table's next row.
    pub const ROW: u32 = 0;
    /// A value that is not a list of finite numbers.
    pub const NOT_NUMBERS: u32 = u32::MAX;

    /// Reads the numbers of the values at `spans` of `text`.
    fn read(text: &str, spans: &[(u32, Span)]) -> Self {
        let mut read = Self {
            objects: spans.iter().map(|(i, _)| *i).collect(),
            outcomes: Vec::with_capacity(spans.len()),
            ..Self::default()
        };
        let mut dim = 0usize;
        for (_, span) in spans {
            let outcome = match parse_vector(slice(text, span), &mut read.vectors) {
                // A count a `u32` cannot hold (more than 8 GiB of text)
                // is no vector.
                Some(n) if n >= Self::NOT_NUMBERS as usize => {
                    read.vectors.truncate(read.vectors.len() - n);
                    Self::NOT_NUMBERS
                }
                Some(n) if dim == 0 || n == dim => {
                    dim = n;
                    Self::ROW
                }
                Some(n) => {
                    read.vectors.truncate(read.vectors.len() - n);
                    n as u32
                }
                None => Self::NOT_NUMBERS,
            };
            read.outcomes.push(outcome);
        }
        read.dim = dim as u32;
        read
    }

    /// Whether these are of values at the headlines of `spans`, and whole:
    /// one outcome each, `dim` numbers for each row, every one finite (as
    /// the text's are).
    pub(crate) fn fits(&self, spans: &[(u32, Span)]) -> bool {
        let rows = self.outcomes.iter().filter(|&&o| o == Self::ROW).count();
        self.objects.len() == spans.len()
            && self.outcomes.len() == spans.len()
            && self.objects.iter().zip(spans).all(|(a, (b, _))| a == b)
            && self
                .outcomes
                .iter()
                .all(|&o| o != self.dim || o == Self::ROW)
            && Some(self.vectors.len()) == rows.checked_mul(self.dim as usize)
            && (rows == 0) == (self.dim == 0)
            && self.vectors.iter().all(|x| x.is_finite())
    }
}

/// Appends the numbers of `text` to `out`; how many, or none (and `out`
/// unchanged) when one is not a finite number.
fn parse_vector(text: &str, out: &mut Vec<f32>) -> Option<usize> {
    let before = out.len();
    for token in text.split_ascii_whitespace() {
        match parse_f32(token) {
            Some(x) if x.is_finite() => out.push(x),
            _ => {
                out.truncate(before);
                return None;
            }
        }
    }
    let n = out.len() - before;
    if n == 0 {
        return None;
    }
    Some(n)
}

/// Parses a float. Embeddings are written as short fixed-point decimals
/// (`-0.1234`); for those, `digits / 10^k` with at most 7 significant digits
/// is exact in `f32` on both sides, so one correctly rounded division gives
/// the same result as `str::parse` at a fraction of the cost (it was half of
/// the memex's load time). Anything else goes to `str::parse`.
#[inline]
fn parse_f32(token: &str) -> Option<f32> {
    const POW10: [f32; 8] = [1.0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7];
    let bytes = token.as_bytes();
    let (negative, digits) = match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        Some(b'+') => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    let mut mantissa: u32 = 0;
    let mut count = 0usize;
    let mut fraction: Option<usize> = None;
    for (i, &b) in digits.iter().enumerate() {
        match b {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u32::from(b - b'0');
                count += 1;
                if count > 7 {
                    return token.parse().ok();
                }
            }
            b'.' if fraction.is_none() => fraction = Some(digits.len() - i - 1),
            _ => return token.parse().ok(),
        }
    }
    if count == 0 {
        return token.parse().ok();
    }
    let scale = fraction.unwrap_or(0);
    let value = mantissa as f32 / POW10[scale];
    Some(if negative { -value } else { value })
}

/// The agenda's items: the objects whose section holds a `<` followed by
/// a digit (where every active timestamp starts), outside `COMMENT`ed
/// subtrees (which Org's agenda never reads), found in one pass of
/// `memchr` over the text, each read once; and a warning for each planning line Org would not read (a keyword without a
/// valid timestamp after it), by line. The warning does not quote the
/// line: its headline may be private.
fn agenda_items(
    text: &str,
    objects: &[Object],
    warnings: &mut Vec<Warning>,
) -> Vec<(u32, parse::agenda::Item)> {
    /// An object with a `<` and a digit, and whether one is outside its
    /// planning line.
    struct Dated {
        index: u32,
        beyond_planning: bool,
    }
    let bytes = text.as_bytes();
    let mut dated: Vec<Dated> = Vec::new();
    let mut k = 0usize;
    // The end of the outermost `COMMENT` subtree open at object `k`.
    let mut comment_end = 0u32;
    let enter = |k: usize, comment_end: &mut u32| {
        if let Some(o) = objects.get(k)
            && o.headline.commented
        {
            *comment_end = (*comment_end).max(o.headline.subtree.end);
        }
    };
    enter(0, &mut comment_end);
    for at in parse::time::active_starts(bytes) {
        while k < objects.len() && objects[k].headline.own.end as usize <= at {
            k += 1;
            enter(k, &mut comment_end);
        }
        let Some(o) = objects.get(k) else { break };
        let h = &o.headline;
        if (h.own.start as usize) > at || h.own.start < comment_end {
            continue;
        }
        let beyond = !h
            .planning()
            .is_some_and(|p| (p.start as usize..p.end as usize).contains(&at));
        match dated.last_mut() {
            Some(d) if d.index == k as u32 => d.beyond_planning |= beyond,
            _ => dated.push(Dated {
                index: k as u32,
                beyond_planning: beyond,
            }),
        }
    }
    for o in objects {
        let h = &o.headline;
        if let Some(p) = h.planning() {
            let line = &text[p.start as usize..p.end as usize];
            if let (_, Some(problem)) = parse::time::planning(line) {
                warnings.push(Warning {
                    line: h.line + 1,
                    message: format!("planning line: {problem}"),
                });
            }
        }
    }
    dated
        .into_iter()
        .filter_map(|d| {
            let h = &objects[d.index as usize].headline;
            let section = parse::agenda::Section {
                range: h.own.start as usize..h.own.end as usize,
                planning: h.planning().map(|p| p.start as usize..p.end as usize),
                title: h.title.start as usize..h.title.end as usize,
                priority: h.priority,
                done: h.done,
                beyond_planning: d.beyond_planning,
            };
            parse::agenda::Item::from_section(text, &section, 0).map(|item| (d.index, item))
        })
        .collect()
}

/// Each headline's id: its `:ID:` property, or one derived from the file
/// and its outline path. Outline paths are built only for headlines that
/// need one (most memex headlines carry an `:ID:`), by walking up.
fn assign_ids(text: &str, id_base: &str, headlines: &[Headline]) -> Vec<(IdText, IdSource)> {
    let explicit = |h: &Headline| {
        h.properties
            .iter()
            .find(|p| slice(text, &p.key).eq_ignore_ascii_case("ID"))
            .map(|p| p.value.clone())
            .filter(|v| !v.is_empty())
    };
    // For each headline, its rank among the earlier siblings of the same
    // title — computed only if some headline needs a derived id.
    let mut ranks: Option<Vec<u32>> = None;
    let mut out = Vec::with_capacity(headlines.len());
    for (i, h) in headlines.iter().enumerate() {
        if let Some(id) = explicit(h) {
            out.push((IdText::Text(id), IdSource::Property));
            continue;
        }
        let ranks = ranks.get_or_insert_with(|| sibling_ranks(text, headlines));
        let mut parts = Vec::new();
        let mut at = Some(i as u32);
        while let Some(index) = at {
            let node = &headlines[index as usize];
            parts.push((slice(text, &node.title), ranks[index as usize]));
            at = node.parent;
        }
        let mut path = String::new();
        for (title, rank) in parts.iter().rev() {
            path.push('/');
            // Escape the path's own separators so that `* x/y` and `* x`
            // › `** y` (or a title `b#2`) cannot share a path.
            for c in title.chars() {
                if matches!(c, '\\' | '/' | '#') {
                    path.push('\\');
                }
                path.push(c);
            }
            if *rank > 1 {
                path.push_str(&format!("#{rank}"));
            }
        }
        out.push((
            IdText::Derived(derived_id(id_base, &path).into_boxed_str()),
            IdSource::Derived,
        ));
    }
    out
}

/// Each headline's rank (1-based) among its siblings of the same title.
fn sibling_ranks(text: &str, headlines: &[Headline]) -> Vec<u32> {
    let mut seen: HashMap<(Option<u32>, &str), u32> = HashMap::new();
    headlines
        .iter()
        .map(|h| {
            let rank = seen.entry((h.parent, slice(text, &h.title))).or_insert(0);
            *rank += 1;
            *rank
        })
        .collect()
}

/// The id of a headline without `:ID:`: `org-` and 16 hex digits of the
/// 64-bit FNV-1a hash of `<file>\0<outline path>`, where the file is its
/// path relative to the memex root and the outline path is the titles from
/// the top, each after a `/` (with `\`, `/` and `#` in titles escaped by
/// a `\`), with `#N` after the N-th (N ≥ 2) sibling of the same title. The id stays the same while the file keeps its name and the
/// headline its title and place; to keep an id through renames, give the
/// headline an `:ID:` property.
pub fn derived_id(file: &str, outline_path: &str) -> String {
    let mut bytes = Vec::with_capacity(file.len() + outline_path.len() + 1);
    bytes.extend_from_slice(file.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(outline_path.as_bytes());
    format!("org-{:016x}", fnv1a(&bytes))
}

/// 64-bit FNV-1a: tiny, stable across Rust versions and platforms (unlike
/// `DefaultHasher`), good enough for ids and change detection.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The hash ids are indexed by, in files and in the snapshot: FNV-1a,
/// fixed, so both agree.
#[inline]
pub fn id_hash(id: &str) -> u64 {
    foveal_sdk::memex::id_hash(id)
}

/// A fast 64-bit hash of a file's bytes, eight at a time, for change
/// detection (FNV-1a over 84 MB took 80 ms; this takes about 10). Not
/// stable across versions of foveal, and not used for anything persisted.
pub fn content_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut hash: u64 = bytes.len() as u64 ^ 0xcbf2_9ce4_8422_2325;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        hash = (hash.rotate_left(5) ^ word).wrapping_mul(K);
    }
    for &b in chunks.remainder() {
        hash = (hash.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
    }
    hash ^ (hash >> 29)
}

/// A shared handle on a parsed file.
pub type FileRef = Arc<MemexFile>;

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> MemexFile {
        MemexFile::parse(Path::new("/m/notes.org"), "notes.org", text.to_owned()).unwrap()
    }

    #[test]
    fn children_ranges_follow_the_outline() {
        let f = file("* a\n** b\n*** c\n** d\n* e\n");
        let kids = |i: usize| -> Vec<u32> {
            let r = &f.objects[i].children;
            f.children[r.start as usize..r.end as usize].to_vec()
        };
        assert_eq!(kids(0), [1, 3]);
        assert_eq!(kids(1), [2]);
        assert!(kids(4).is_empty());
    }

    #[test]
    fn ids_come_from_the_property_or_are_derived_stably() {
        let f = file("* a\n:PROPERTIES:\n:ID: explicit\n:END:\n* b\n* b\n");
        assert_eq!(f.id(0), "explicit");
        assert_eq!(f.objects[0].id_source, IdSource::Property);
        assert_eq!(f.objects[1].id_source, IdSource::Derived);
        assert_ne!(f.id(1), f.id(2), "same-titled siblings get distinct ids");
        assert_eq!(f.id(1), derived_id("notes.org", "/b"));
        assert_eq!(f.id(2), derived_id("notes.org", "/b#2"));
        assert_eq!(
            derived_id("notes.org", "/b"),
            format!("org-{:016x}", fnv1a(b"notes.org\0/b"))
        );
        // FNV-1a's published test vectors: the hash must never change.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn embeddings_go_into_one_contiguous_table() {
        let f = file(
            "* a\n:PROPERTIES:\n:EMBEDDING: 1 2 3\n:END:\n* b\n* c\n:PROPERTIES:\n:EMBEDDING: 4 5 6\n:END:\n* d\n:PROPERTIES:\n:EMBEDDING: 1 x 3\n:END:\n",
        );
        assert_eq!(f.dim, 3);
        assert_eq!(f.vector(0), Some(&[1.0, 2.0, 3.0][..]));
        assert_eq!(f.vector(1), None);
        assert_eq!(f.vector(2), Some(&[4.0, 5.0, 6.0][..]));
        assert_eq!(f.vector(3), None);
        assert_eq!(f.warnings.len(), 1);
        assert_eq!(f.warnings[0].line, 10, "the headline's line");
    }

    /// Splitting and `str::parse`, bit for bit: every number, or none when
    /// one is not a finite number.
    fn reference_vector(text: &str) -> Option<Vec<u32>> {
        let mut out = Vec::new();
        for token in text.split_ascii_whitespace() {
            match token.parse::<f32>() {
                Ok(x) if x.is_finite() => out.push(x.to_bits()),
                _ => return None,
            }
        }
        (!out.is_empty()).then_some(out)
    }

    /// `parse_vector` after a number already there, which stays.
    fn read_vector(text: &str) -> Option<Vec<u32>> {
        let mut out = vec![7.0];
        let n = parse_vector(text, &mut out);
        assert_eq!(out[0], 7.0, "{text:?}");
        let read: Vec<u32> = out[1..].iter().map(|x| x.to_bits()).collect();
        assert_eq!(n.unwrap_or(0), read.len(), "{text:?}");
        n.map(|_| read)
    }

    #[test]
    fn a_vector_reads_each_number_as_str_parse_does() {
        let tokens = [
            "0",
            "1",
            "-1",
            "+1",
            "0.1234",
            "-0.9999",
            "+0.5",
            "12345.67",
            "1234567",
            "12345678",
            "1234.5678",
            "99999999",
            "9999999",
            "-9999999",
            "0.0000001",
            "0.00000001",
            ".5",
            "-.5",
            "+.5",
            "5.",
            "-5.",
            ".",
            "-.",
            "..",
            "1..2",
            "1.2.3",
            "-0.0",
            "0.0000000",
            "00000001",
            "1e3",
            "1E-3",
            "0x10",
            "1_0",
            "nan",
            "-inf",
            "inf",
            "-",
            "+",
            "--1",
            "+-1",
            "1-",
            "١",
            "0.12\u{e9}",
            "12345678901234567890",
        ];
        // Each alone, and among others with every whitespace, at the end
        // of the text (fewer than 8 bytes after it) and before more.
        for token in tokens {
            for text in [
                token.to_owned(),
                format!("{token} "),
                format!("0.5\t{token}\n -1.25\r\n"),
                format!("{token}\x0c0.25 0.125 0.0625 0.03125"),
                format!("   {token}            "),
            ] {
                assert_eq!(read_vector(&text), reference_vector(&text), "{text:?}");
            }
        }
        // Exhaustively over the 4-decimal range the generator writes, and
        // other widths, 16 numbers at a time.
        let numbers: Vec<String> = (0..=99_999u32)
            .step_by(7)
            .flat_map(|m| {
                let (int, frac) = (m / 10_000, m % 10_000);
                [
                    format!("-{int}.{frac:04}"),
                    format!("{int}.{frac:04}"),
                    format!("{m}.{}", m % 100),
                    format!("-0.{m:06}"),
                    format!("{m}"),
                ]
            })
            .collect();
        for chunk in numbers.chunks(16) {
            let text = chunk.join(" ");
            assert_eq!(read_vector(&text), reference_vector(&text), "{text}");
        }
        assert_eq!(read_vector(""), None);
        assert_eq!(read_vector(" \n "), None);
    }

    proptest::proptest! {
        #[test]
        fn any_text_reads_as_splitting_and_str_parse_read_it(text in "[-+0-9. \t\ne]{0,48}") {
            proptest::prop_assert_eq!(read_vector(&text), reference_vector(&text));
        }
    }

    #[test]
    fn content_hash_tells_edits_apart() {
        assert_ne!(content_hash(b"* a\n"), content_hash(b"* b\n"));
        assert_ne!(content_hash(b"12345678x"), content_hash(b"12345678y"));
        assert_ne!(content_hash(b""), content_hash(b"\0"));
    }

    #[test]
    fn tag_index_is_exact_and_case_insensitive() {
        let f = file("* a :Project:\n* b :subprojects:\n* c :project:x:\n");
        assert_eq!(f.with_tag("project"), [0, 2]);
        assert!(f.with_tag("proj").is_empty());
    }

    #[test]
    fn duplicate_ids_are_reported_and_the_first_wins() {
        let f = file("* a\n:PROPERTIES:\n:ID: same\n:END:\n* b\n:PROPERTIES:\n:ID: same\n:END:\n");
        assert_eq!(f.index_of("same"), Some(0));
        assert_eq!(f.warnings.len(), 1);
        assert!(f.warnings[0].message.contains("duplicate :ID:"));
    }
}
