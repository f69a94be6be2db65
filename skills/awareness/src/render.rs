//! Rendering the outline (seed 000 `context-awareness-assemble` and
//! `context-object-render`), in linear passes.
//!
//! What is selected, for each active project (a headline the project rules
//! of [`foveal_sdk::projects`] find — seed 000's is "tagged `project`" — that is
//! not done):
//!
//! - every object at depth ≤ 2 of the project (the project is depth 1), as
//!   outline: `:ID:` only;
//! - the foveal object and its whole subtree, with their bodies;
//! - every object whose cosine similarity to the foveal object's vector is
//!   at least the threshold, with its body and `:SEMANTIC_SCORE:`;
//! - the ancestors of the foveal and promoted objects, as outline, so the
//!   model sees where they sit.
//!
//! Where this differs from the seed, on purpose:
//!
//! 1. The foveal vector is used. The seed's assemble never passed it on, so
//!    nothing was ever promoted.
//! 2. Promoted objects are found anywhere in a project, not only under
//!    rendered parents (the seed never visited children of an omitted node),
//!    and their ancestor path is shown.
//! 3. Building the text is linear: one `String`, appended to. The seed
//!    concatenated per node, quadratic in siblings (5.7 s for 20,000).
//! 4. Projects come out in file order.
//! 5. A project inside another active project is rendered once, inside it,
//!    not a second time on its own.
//! 6. Private objects are never seen: the host removes them from the view.
//! 7. With a token budget, detail degrades by priority instead of the whole
//!    section being dropped (see [`Options::budget`]).
//! 8. Projects are found by more rules than the `project` tag
//!    ([`foveal_sdk::projects`]), and a memex without any gets a map of its
//!    files ([`crate::map`]) instead of one line.
//!
//! # Speed
//!
//! The semantic scan reads the host's 8-bit copy of the vector table (a
//! quarter of the bytes of the floats) and recomputes the exact cosine only
//! where the quantized one is within its proven error bound of the
//! threshold, so the result is the exact seed rule. The rows a scan
//! promoted are kept, keyed by the table's content hash, the focus vector
//! and the threshold: after an edit that leaves the vectors alone (a body, a
//! title, a TODO state) the next render skips the scan.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

use foveal_sdk::handle::Handle;
use foveal_sdk::memex::{FileView, MemexView, NONE};

use crate::select::select;
use foveal_sdk::projects::{FileFacts, Rule, Rules};

/// The header line (seed 000).
pub const HEADER: &str = "GLOBAL MEMEX AWARENESS (Peripheral Vision):\n";
/// The line when there is no active project (seed 000).
pub const NO_PROJECTS: &str = "No active projects found.\n";
/// How the outline is written (`[awareness] format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// One line per headline, as Org writes it — TODO keyword, priority,
    /// title, tags — and a short handle in place of the property drawer:
    /// `** TODO [#A] Order cabinets :home: ^k3`.
    #[default]
    Compact,
    /// Seed 000's format, byte for byte: the title alone, then
    /// `:PROPERTIES:`, `:ID: <id>`, `:END:`.
    Seed,
}

impl Format {
    /// The format named `name` (`compact` or `seed`).
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim() {
            n if n.eq_ignore_ascii_case("compact") => Some(Self::Compact),
            n if n.eq_ignore_ascii_case("seed") => Some(Self::Seed),
            _ => None,
        }
    }
}

/// How to render.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Cosine similarity from which an object is promoted
    /// (`CONTEXT_SEMANTIC_THRESHOLD`, default 0.75).
    pub threshold: f32,
    /// Tokens the section may use; `None` renders everything the rules
    /// select. With a budget, what is kept, in order: the header, the
    /// foveal subtree (in outline order), promoted objects by descending
    /// score, then the depth-1 and depth-2 outline. An object always comes
    /// with its ancestor path. What did not fit is counted in one closing
    /// line, `[… N peripheral headlines omitted]`.
    pub budget: Option<usize>,
    /// Reuse work from earlier renders: the semantic scan while the vector
    /// table, the focus vector and the threshold are unchanged, and the
    /// text of every object whose content, depth and reason are unchanged
    /// (see the module's notes on speed). Off only to time the work itself.
    pub cache: bool,
    /// The rules that make a headline a project ([`foveal_sdk::projects`]).
    pub rules: Rules,
    /// When no project is found, render the map of the memex (the top of
    /// each file) instead of only saying so ([`crate::map`]).
    pub map: bool,
    /// Each file's modification time (Unix seconds), in view order: the
    /// map drops the least recently changed files first. Missing ones
    /// count as oldest.
    pub modified: Vec<i64>,
    /// Each file's file tags, setup files' included, in view order (when
    /// the host says them; else the file's preamble is read).
    pub file_tags: Option<Vec<Vec<String>>>,
    /// Each file's TODO keywords, in view order (when the host says them;
    /// else every file may use a project keyword).
    pub todo_keywords: Option<Vec<Vec<String>>>,
    /// How the outline is written.
    pub format: Format,
    /// Say why each file of the map was kept (`Rendered::files`).
    pub explain: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            threshold: 0.75,
            budget: None,
            cache: true,
            rules: Rules::default(),
            map: true,
            modified: Vec::new(),
            file_tags: None,
            todo_keywords: None,
            format: Format::default(),
            explain: false,
        }
    }
}

impl Options {
    /// What the host said about file `f`.
    pub(crate) fn facts(&self, f: usize) -> FileFacts<'_> {
        FileFacts {
            file_tags: self
                .file_tags
                .as_ref()
                .and_then(|t| t.get(f))
                .map(Vec::as_slice),
            todo_keywords: self
                .todo_keywords
                .as_ref()
                .and_then(|t| t.get(f))
                .map(Vec::as_slice),
        }
    }
}

/// Why an object is in the output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reason {
    /// Depth ≤ 2 of its project.
    Outline,
    /// The focus or inside its subtree.
    Foveal,
    /// Similar to the focus.
    Semantic(f32),
    /// On the path to a foveal or promoted object.
    Ancestor,
    /// A top-level headline in the map of a memex without projects.
    Map,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Outline => f.write_str("outline"),
            Self::Foveal => f.write_str("foveal"),
            Self::Semantic(score) => write!(f, "semantic {score:.2}"),
            Self::Ancestor => f.write_str("ancestor"),
            Self::Map => f.write_str("map"),
        }
    }
}

/// One object in the output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Included {
    /// Its file, as an index into the view's files.
    pub file: u32,
    /// Its index in that file.
    pub index: u32,
    /// Why it is there.
    pub reason: Reason,
    /// For a project, the rule that made it one.
    pub project: Option<Rule>,
}

/// Objects of active projects left out, by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Omissions {
    /// Deeper than 2 and neither foveal, promoted nor an ancestor of one:
    /// the seed's rules leave them out.
    pub depth: u32,
    /// Selected as outline, left out for the budget.
    pub outline: u32,
    /// In the foveal subtree, left out for the budget.
    pub foveal: u32,
    /// Promoted, left out for the budget.
    pub semantic: u32,
    /// Ancestors not needed once what they led to was left out.
    pub ancestor: u32,
    /// Top-level headlines of the map left out for the budget (those of
    /// files left out included).
    pub map: u32,
    /// Whole files the map left out for the budget.
    pub files: u32,
}

impl Omissions {
    /// Objects of projects the budget left out.
    pub fn for_budget(&self) -> u32 {
        self.outline + self.foveal + self.semantic + self.ancestor
    }
}

/// The rendered outline and what it holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rendered {
    /// The text.
    pub text: String,
    /// Every object rendered, in output order.
    pub included: Vec<Included>,
    /// What was left out.
    pub omitted: Omissions,
    /// For the map, each file shown and why it was kept, in output order.
    pub files: Vec<(u32, String)>,
}

/// One selected object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    /// Its file, as an index into the view's files.
    pub file: u32,
    /// Its index in the file.
    pub index: u32,
    /// Its depth in its project (the project is 1).
    pub depth: u16,
    /// Why it is shown.
    pub reason: Reason,
    /// The entry of its parent, or [`NONE`] for a project.
    pub parent: u32,
    /// For a project, the rule that made it one.
    pub project: Option<Rule>,
}

/// Renders the outline of every active project in `memex`, with `focus` (an
/// object id) in full. `count` counts the tokens of a text; it is only
/// called with a budget.
pub fn render(
    memex: &MemexView<'_>,
    focus: Option<&str>,
    options: &Options,
    count: &dyn Fn(&str) -> usize,
) -> Rendered {
    let (entries, depth_omitted) = select(memex, focus, options);
    let files = memex.files.as_slice();
    let style = Style::new(memex, options);
    if entries.is_empty() && options.map && !files.is_empty() {
        return crate::map::render(files, &style, options, count);
    }
    let emitter = Emitter {
        files,
        entries: &entries,
        reuse: options.cache,
        style: &style,
    };
    let mut rendered = match options.budget {
        None => emitter.emit(None),
        Some(budget) => fit(&emitter, budget, count),
    };
    rendered.omitted.depth = depth_omitted;
    rendered
}

/// How pieces are written: the format, and for the compact one the
/// handles of the view's objects.
pub(crate) struct Style {
    pub format: Format,
    handles: Option<crate::handles::ViewHandles>,
}

impl Style {
    pub fn new(memex: &MemexView<'_>, options: &Options) -> Self {
        Self {
            format: options.format,
            handles: (options.format == Format::Compact).then(|| crate::handles::of_view(memex)),
        }
    }

    /// The handle of object `i` of file `f` of the view (compact format
    /// only).
    #[inline]
    pub fn handle(&self, f: u32, i: u32) -> Option<Handle> {
        self.handles.as_ref().map(|h| h.of(f, i))
    }

    /// Starts loading what [`Style::handle`] reads for `entry`.
    #[inline]
    pub fn prefetch(&self, entry: &Entry) {
        if let Some(h) = &self.handles {
            h.prefetch(entry.file, entry.index);
        }
    }
}

/// Appends the text of one entry; `handle` is its handle in the compact
/// format.
pub(crate) fn piece(
    style: &Style,
    files: &[FileView<'_>],
    entry: &Entry,
    handle: Option<Handle>,
    text: &mut String,
) {
    if style.format == Format::Compact {
        return compact_piece(files, entry, handle, text);
    }
    let file = &files[entry.file as usize];
    let i = entry.index;
    for _ in 0..entry.depth {
        text.push('*');
    }
    text.push(' ');
    let title = file.title(i);
    text.push_str(if title.is_empty() { "Untitled" } else { title });
    text.push_str("\n:PROPERTIES:\n:ID: ");
    text.push_str(file.id(i));
    text.push('\n');
    if let Reason::Semantic(score) = entry.reason {
        text.push_str(":SEMANTIC_SCORE: ");
        push_score(text, score);
        text.push('\n');
    }
    text.push_str(":END:\n");
    push_body(file, entry, text);
}

/// Appends `score` as `format!("{score:.2}")` writes it. A similarity
/// away from a rounding tie is rounded as an integer of hundredths, about
/// ten times faster than the formatter, which writes the rest.
fn push_score(text: &mut String, score: f32) {
    let hundredths = f64::from(score) * 100.0;
    let off_tie = (hundredths - hundredths.floor() - 0.5).abs() > 1e-6;
    if score.is_sign_positive() && hundredths < 1e9 && off_tie {
        let n = hundredths.round() as u64;
        let (whole, frac) = (n / 100, n % 100);
        if whole < 10 {
            text.push(char::from(b'0' + whole as u8));
        } else {
            let _ = write!(text, "{whole}");
        }
        text.push('.');
        text.push(char::from(b'0' + (frac / 10) as u8));
        text.push(char::from(b'0' + (frac % 10) as u8));
    } else {
        let _ = write!(text, "{score:.2}");
    }
}

/// The body of a foveal or promoted entry, after its headline.
fn push_body(file: &FileView<'_>, entry: &Entry, text: &mut String) {
    if matches!(entry.reason, Reason::Foveal | Reason::Semantic(_)) {
        let body = file.body(entry.index).trim_end_matches(['\n', '\r']);
        if !body.is_empty() {
            text.push_str(body);
            text.push('\n');
        }
    }
}

/// The compact form of an entry: the headline as Org writes it (stars,
/// TODO keyword, priority, title, tags), its handle, and for a promoted
/// object its similarity; then the body of a foveal or promoted one.
fn compact_piece(files: &[FileView<'_>], entry: &Entry, handle: Option<Handle>, text: &mut String) {
    let file = &files[entry.file as usize];
    let i = entry.index;
    for _ in 0..entry.depth {
        text.push('*');
    }
    let todo = file.todo(i);
    if let Some(todo) = todo {
        text.push(' ');
        text.push_str(todo);
    }
    if let Some(priority) = priority(file, i) {
        text.push_str(" [#");
        text.push(priority);
        text.push(']');
    }
    let title = file.title(i);
    if !title.is_empty() {
        text.push(' ');
        text.push_str(title);
    } else if todo.is_none() {
        text.push_str(" Untitled");
    }
    if let Some(tags) = tags_token(file, i) {
        text.push(' ');
        text.push_str(tags);
    }
    if let Some(handle) = handle {
        text.push_str(" ^");
        handle.write_chars(text);
    }
    if let Reason::Semantic(score) = entry.reason {
        text.push_str(" (similar ");
        push_score(text, score);
        text.push(')');
    }
    text.push('\n');
    push_body(file, entry, text);
}

/// The tags of object `i` as its headline writes them (`:home:shop:`),
/// read after its title on the same line: the cache lines the title was
/// read from, where the index's tag list lies elsewhere.
fn tags_token<'a>(file: &FileView<'a>, i: u32) -> Option<&'a str> {
    let object = file.object(i);
    if object.tags.len == 0 {
        return None;
    }
    let text = file.text.as_str();
    let from = ((object.title.start + object.title.len) as usize).min(text.len());
    let rest = &text[from..];
    let line = &rest[..rest.find('\n').unwrap_or(rest.len())];
    let token = line.trim_matches([' ', '\t', '\r']);
    (token.starts_with(':') && token.ends_with(':')).then_some(token)
}

/// The priority cookie of object `i` (`[#A]`), read from its headline
/// line: what comes before the title, after the TODO keyword, is the
/// cookie and `COMMENT`, each optional (foveal-org's reading of a
/// headline).
fn priority(file: &FileView<'_>, i: u32) -> Option<char> {
    let object = file.object(i);
    let text = file.text.as_str();
    let title = (object.title.start as usize).min(text.len());
    // At most `[#X] COMMENT ` before the title: a few bytes back.
    let mut from = title.saturating_sub(24);
    while !text.is_char_boundary(from) {
        from -= 1;
    }
    let before = text[from..title].trim_end_matches([' ', '\t']);
    let before = before
        .strip_suffix("COMMENT")
        .map_or(before, |b| b.trim_end_matches([' ', '\t']));
    let cookie = before.strip_suffix(']')?;
    let mut chars = cookie.chars();
    let c = chars.next_back()?;
    // The cookie starts the part after the keyword (or the stars).
    let open = chars.as_str().strip_suffix("[#")?;
    let starts = open.is_empty() || open.ends_with([' ', '\t', '*']);
    (starts && c != ']').then_some(c)
}

/// Writes the text of selected entries.
pub(crate) struct Emitter<'a> {
    files: &'a [FileView<'a>],
    entries: &'a [Entry],
    /// Copy unchanged pieces from the previous render.
    reuse: bool,
    style: &'a Style,
}

/// The previous render's text and its pieces, in order, by [`piece_key`].
/// After an edit to one headline nearly every piece of the next render is
/// here, in the same order: long runs of it are copied at once, far cheaper
/// than gathering the same bytes from all over an 84 MB file.
#[derive(Debug, Default)]
struct Previous {
    text: String,
    pieces: Vec<Piece>,
}

/// Where one piece lies in a render's text.
#[derive(Debug, Clone, Copy)]
struct Piece {
    key: u64,
    start: u32,
    len: u32,
}

static PREVIOUS: Mutex<Option<Previous>> = Mutex::new(None);

/// Pieces looked at past the expected one before a miss is declared; past
/// [`LOOKUP_AFTER`] misses, a map of every previous piece is built instead.
const WINDOW: usize = 16;
const LOOKUP_AFTER: usize = 8;

/// Keys of previous pieces to their positions, built on demand.
type PieceMap = HashMap<u64, usize, BuildHasherDefault<KeyHasher>>;

/// The keys are hashes already: use them as they are.
#[derive(Debug, Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).rotate_left(5);
        }
    }
    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }
}

/// Finds pieces of the previous render, expecting them in order.
struct Matcher<'p> {
    pieces: &'p [Piece],
    cursor: usize,
    misses: usize,
    map: Option<PieceMap>,
}

impl Matcher<'_> {
    fn find(&mut self, key: u64) -> Option<Piece> {
        let end = (self.cursor + WINDOW).min(self.pieces.len());
        let at = match (self.cursor..end).find(|&j| self.pieces[j].key == key) {
            Some(j) => Some(j),
            None if self.misses >= LOOKUP_AFTER => {
                let pieces = self.pieces;
                self.map
                    .get_or_insert_with(|| {
                        pieces.iter().enumerate().map(|(j, p)| (p.key, j)).collect()
                    })
                    .get(&key)
                    .copied()
            }
            None => None,
        };
        match at {
            Some(j) => {
                self.cursor = j + 1;
                Some(self.pieces[j])
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }
}

/// What a piece's text depends on: the object's content and id (the
/// host's hash of them), its depth, why it is shown, the format and the
/// length of its handle.
fn piece_key(file: &FileView<'_>, entry: &Entry, format: Format, handle: Option<Handle>) -> u64 {
    let (tag, score) = match entry.reason {
        Reason::Outline => (1u64, 0),
        Reason::Ancestor | Reason::Map => (1, 0),
        Reason::Foveal => (2, 0),
        Reason::Semantic(score) => (3, u64::from(score.to_bits())),
    };
    let style = match format {
        Format::Seed => 0u64,
        Format::Compact => 1 + handle.map_or(0, |h| h.len as u64),
    };
    let mut h = file.object(entry.index).hash;
    for word in [u64::from(entry.depth) << 8 | tag | style << 16, score] {
        let m = u128::from(h ^ word) * 0x9e37_79b9_7f4a_7c15;
        h = (m as u64) ^ ((m >> 64) as u64);
    }
    h
}

impl Emitter<'_> {
    /// The text of the entries `keep` allows (all when `None`), in outline
    /// order.
    fn emit(&self, keep: Option<&[bool]>) -> Rendered {
        let entries = self.entries;
        let mut out = Rendered::default();
        if entries.is_empty() {
            out.text = format!("{HEADER}{NO_PROJECTS}");
            return out;
        }
        let header = HEADER;
        out.included = entries
            .iter()
            .enumerate()
            .filter(|&(e, _)| keep.is_none_or(|keep| keep[e]))
            .map(|(_, entry)| Included {
                file: entry.file,
                index: entry.index,
                reason: entry.reason,
                project: entry.project,
            })
            .collect();
        let mut previous = if self.reuse {
            PREVIOUS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .unwrap_or_default()
        } else {
            Previous::default()
        };
        let pieces = if previous.pieces.is_empty() {
            // Nothing to reuse: gather every piece, on every core.
            let parts =
                crate::par::split(entries.len(), PARALLEL_MIN, |range| self.fresh(range, keep));
            out.text = String::with_capacity(
                header.len() + parts.iter().map(|(text, _)| text.len()).sum::<usize>(),
            );
            out.text.push_str(header);
            let mut pieces = Vec::new();
            for (text, part) in parts {
                let offset = out.text.len() as u32;
                out.text.push_str(&text);
                if self.reuse {
                    pieces.extend(part.into_iter().map(|p| Piece {
                        start: p.start + offset,
                        ..p
                    }));
                }
            }
            pieces
        } else {
            self.reuse_from(&previous, keep, &mut out.text)
        };
        if self.reuse && u32::try_from(out.text.len()).is_ok() {
            // Keep this render for the next, in the previous one's buffer
            // (already mapped: no page faults).
            previous.text.clear();
            previous.text.push_str(&out.text);
            previous.pieces = pieces;
            *PREVIOUS.lock().unwrap_or_else(|e| e.into_inner()) = Some(previous);
        }
        out
    }

    /// The pieces of `range` of the entries, gathered from the files; the
    /// pieces' starts are in the returned text.
    fn fresh(&self, range: std::ops::Range<usize>, keep: Option<&[bool]>) -> (String, Vec<Piece>) {
        let (files, entries) = (self.files, self.entries);
        let keep = keep.map(|keep| &keep[range.clone()]);
        let part = &entries[range];
        let mut text = String::with_capacity(text_len(self.style.format, files, part, keep));
        let mut pieces = Vec::with_capacity(if self.reuse { part.len() } else { 0 });
        for (e, entry) in part.iter().enumerate() {
            if keep.is_some_and(|keep| !keep[e]) {
                continue;
            }
            if let Some(ahead) = part.get(e + PREFETCH_AHEAD) {
                prefetch(self.style.format, files, ahead);
                self.style.prefetch(ahead);
            }
            let start = text.len();
            let file = &files[entry.file as usize];
            let handle = self.style.handle(entry.file, entry.index);
            piece(self.style, files, entry, handle, &mut text);
            if self.reuse {
                pieces.push(Piece {
                    key: piece_key(file, entry, self.style.format, handle),
                    start: start as u32,
                    len: (text.len() - start) as u32,
                });
            }
        }
        (text, pieces)
    }

    /// Writes the header and every kept piece into `text`, copying the
    /// pieces `previous` has (in runs) and gathering the others.
    fn reuse_from(
        &self,
        previous: &Previous,
        keep: Option<&[bool]>,
        text: &mut String,
    ) -> Vec<Piece> {
        let (files, entries) = (self.files, self.entries);
        text.reserve(previous.text.len() + 4096);
        text.push_str(HEADER);
        let mut matcher = Matcher {
            pieces: &previous.pieces,
            cursor: 0,
            misses: 0,
            map: None,
        };
        let mut pieces = Vec::with_capacity(entries.len());
        // A run of the previous text still to copy: consecutive reused
        // pieces are copied in one go.
        let mut run = 0..0;
        for (e, entry) in entries.iter().enumerate() {
            if keep.is_some_and(|keep| !keep[e]) {
                continue;
            }
            let file = &files[entry.file as usize];
            let handle = self.style.handle(entry.file, entry.index);
            let key = piece_key(file, entry, self.style.format, handle);
            let start = text.len() + run.len();
            let len = match matcher.find(key) {
                Some(found) => {
                    let (at, len) = (found.start as usize, found.len as usize);
                    if run.end != at {
                        text.push_str(&previous.text[run.clone()]);
                        run = at..at;
                    }
                    run.end = at + len;
                    len
                }
                None => {
                    text.push_str(&previous.text[run.clone()]);
                    run = 0..0;
                    if let Some(ahead) = entries.get(e + PREFETCH_AHEAD) {
                        prefetch(self.style.format, files, ahead);
                        self.style.prefetch(ahead);
                    }
                    piece(self.style, files, entry, handle, text);
                    text.len() - start
                }
            };
            pieces.push(Piece {
                key,
                start: start as u32,
                len: len as u32,
            });
        }
        text.push_str(&previous.text[run]);
        pieces
    }
}

/// Entries from which gathering is split over threads.
const PARALLEL_MIN: usize = 1024;

/// The length of the text [`Emitter::emit`] writes, near enough to
/// allocate it once (the closing line of a budgeted render may add a few
/// bytes).
fn text_len(
    format: Format,
    files: &[FileView<'_>],
    entries: &[Entry],
    keep: Option<&[bool]>,
) -> usize {
    let mut len = 64;
    for (e, entry) in entries.iter().enumerate() {
        if keep.is_some_and(|keep| !keep[e]) {
            continue;
        }
        let object = files[entry.file as usize].object(entry.index);
        // Near enough, from the record alone: an outline's entries lie all
        // over the file, and each array more read for them is a cache miss
        // more. (A longer text grows the string once.)
        len += usize::from(entry.depth) + 2 + (object.title.len as usize).max(8);
        len += match format {
            Format::Seed => 48 + object.id.len as usize,
            Format::Compact => object.todo.len as usize + 8 * object.tags.len as usize + 24,
        };
        if matches!(entry.reason, Reason::Foveal | Reason::Semantic(_)) {
            len += object.body.len as usize + 1;
        }
    }
    len
}

/// At least the length of an entry's piece, in bytes (a few more): what
/// the budget may rely on.
#[inline]
pub(crate) fn max_piece_bytes(format: Format, file: &FileView<'_>, entry: &Entry) -> usize {
    let object = file.object(entry.index);
    // Stars, space, title (or `Untitled`), newline.
    let mut len = usize::from(entry.depth) + 2 + (object.title.len as usize).max(8);
    len += match format {
        // The drawer with its id, the score line.
        Format::Seed => 48 + object.id.len as usize,
        // Keyword, priority, tags, handle, score.
        Format::Compact => {
            let tags = &file.index.tags[object.tags.range()];
            object.todo.len as usize + tags.iter().map(|t| t.len as usize + 1).sum::<usize>() + 64
        }
    };
    if matches!(entry.reason, Reason::Foveal | Reason::Semantic(_)) {
        len += object.body.len as usize + 1;
    }
    len
}

/// How many entries ahead [`Emitter::emit`] asks for the text it will copy.
const PREFETCH_AHEAD: usize = 16;

/// Starts loading an entry's title and body into the cache. The texts of
/// the objects an outline shows lie scattered over the file (a 100k file is
/// 84 MB), so copying them is bound by memory latency, not bandwidth;
/// asking a few entries ahead overlaps those waits.
#[inline]
fn prefetch(format: Format, files: &[FileView<'_>], entry: &Entry) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let file = &files[entry.file as usize];
        let object = file.object(entry.index);
        let text = file.text.as_str().as_bytes();
        // The headline line (the seed's id; the compact format's keyword
        // and priority before the title, its tags after it), and the
        // body's first lines.
        let body = object.body.start..object.body.start + object.body.len.min(256);
        let headline = match format {
            Format::Seed => [object.title.start, object.id.start],
            Format::Compact => [
                object.title.start.saturating_sub(16),
                object.title.start + object.title.len,
            ],
        };
        let lines = headline.into_iter().chain(body.step_by(64));
        for at in lines {
            if let Some(byte) = text.get(at as usize) {
                // SAFETY: a prefetch is a hint; it never faults and reads
                // nothing into the program. The pointer is in bounds anyway.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(byte).cast()) };
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (format, files, entry);
}

/// The closing line that says what the budget left out.
fn omitted_line(n: usize) -> String {
    format!("[… {n} peripheral headlines omitted]\n")
}

/// Renders within `budget` tokens, keeping by priority (see
/// [`Options::budget`]).
fn fit(emitter: &Emitter<'_>, budget: usize, count: &dyn Fn(&str) -> usize) -> Rendered {
    let (files, entries) = (emitter.files, emitter.entries);
    // Everything, if it fits: a text has no more tokens than bytes, so a
    // short one needs no count at all.
    if full_fits_by_bytes(emitter.style.format, files, entries, budget) {
        return emitter.emit(None);
    }
    // Near enough to fit that a count may say it does (a token is rarely
    // more than 16 bytes): one count then, rather than a greedy fill that
    // would hold back room for the closing line.
    if full_fits_by_bytes(
        emitter.style.format,
        files,
        entries,
        budget.saturating_mul(16),
    ) {
        let full = emitter.emit(None);
        if count(&full.text) <= budget {
            return full;
        }
    }
    if entries.is_empty() {
        // Only the header and the "no projects" line, and they do not fit.
        return Rendered::default();
    }
    let header = count(HEADER);
    // Room for the closing line, whatever its number.
    let reserve = count(&omitted_line(entries.len()));
    if header + reserve > budget {
        let mut nothing = Rendered::default();
        tally(entries, &vec![false; entries.len()], &mut nothing.omitted);
        return nothing;
    }
    // The order of priority.
    let mut order: Vec<u32> = Vec::with_capacity(entries.len());
    order.extend(
        (0..entries.len() as u32).filter(|&e| entries[e as usize].reason == Reason::Foveal),
    );
    let mut semantic: Vec<u32> = (0..entries.len() as u32)
        .filter(|&e| matches!(entries[e as usize].reason, Reason::Semantic(_)))
        .collect();
    let score = |e: u32| match entries[e as usize].reason {
        Reason::Semantic(s) => s,
        _ => 0.0,
    };
    semantic.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
    order.extend(semantic);
    for depth in [1, 2] {
        order.extend((0..entries.len() as u32).filter(|&e| {
            let entry = &entries[e as usize];
            entry.depth == depth && entry.reason == Reason::Outline
        }));
    }

    let mut keep = vec![false; entries.len()];
    // What was kept, one group (an entry and its new ancestors) at a time.
    let mut kept: Vec<Vec<u32>> = Vec::new();
    let mut used = header + reserve;
    let mut scratch = String::new();
    let mut path = Vec::new();
    let mut misses = 0;
    let min_piece = match emitter.style.format {
        Format::Seed => MIN_PIECE_TOKENS,
        Format::Compact => MIN_COMPACT_PIECE_TOKENS,
    };
    for &e in &order {
        if budget - used < min_piece || misses >= MAX_MISSES {
            break;
        }
        if keep[e as usize] {
            continue;
        }
        // The entry and the part of its ancestor path not yet kept.
        path.clear();
        let mut cost = 0;
        let mut at = e;
        while at != NONE && !keep[at as usize] {
            scratch.clear();
            let entry = &entries[at as usize];
            let handle = emitter.style.handle(entry.file, entry.index);
            piece(emitter.style, files, entry, handle, &mut scratch);
            cost += count(&scratch);
            path.push(at);
            at = entries[at as usize].parent;
        }
        if used + cost <= budget {
            used += cost;
            for &a in &path {
                keep[a as usize] = true;
            }
            kept.push(path.clone());
        } else {
            misses += 1;
        }
    }
    // The pieces' counts add up to the text's (each piece starts a new
    // pre-token at its `*`), but the budget must hold whatever the
    // tokenizer does: check the whole, and give up the last kept entries
    // until it does.
    loop {
        let mut out = emitter.emit(Some(&keep));
        tally(entries, &keep, &mut out.omitted);
        let left_out = out.omitted.for_budget() as usize;
        if left_out > 0 {
            out.text.push_str(&omitted_line(left_out));
        }
        if count(&out.text) <= budget {
            return out;
        }
        let Some(last) = kept.pop() else {
            return Rendered::default();
        };
        for a in last {
            keep[a as usize] = false;
        }
    }
}

/// Whether the whole selection is at most `bytes` long, without building
/// it (with `bytes` equal to the budget: it fits, since a token is at least
/// a byte).
fn full_fits_by_bytes(
    format: Format,
    files: &[FileView<'_>],
    entries: &[Entry],
    bytes_max: usize,
) -> bool {
    let mut bytes = HEADER.len() + NO_PROJECTS.len();
    for entry in entries {
        bytes += max_piece_bytes(format, &files[entry.file as usize], entry);
        if bytes > bytes_max {
            return false;
        }
    }
    true
}

/// No entry costs fewer tokens than this (`*`, a title, the drawer lines).
const MIN_PIECE_TOKENS: usize = 8;

/// Nor, in the compact format, than this (`*`, a title, a handle).
const MIN_COMPACT_PIECE_TOKENS: usize = 4;

/// Entries that did not fit before the budget stops looking for smaller
/// ones further down the order: past this, filling the last few tokens is
/// not worth counting the rest of a large memex.
const MAX_MISSES: usize = 64;

/// Counts the entries `keep` leaves out, by reason.
fn tally(entries: &[Entry], keep: &[bool], omitted: &mut Omissions) {
    for (entry, &kept) in entries.iter().zip(keep) {
        if kept {
            continue;
        }
        match entry.reason {
            Reason::Outline => omitted.outline += 1,
            Reason::Foveal => omitted.foveal += 1,
            Reason::Semantic(_) => omitted.semantic += 1,
            Reason::Ancestor => omitted.ancestor += 1,
            Reason::Map => omitted.map += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use foveal_sdk::handle::{Handles, Resolution, resolve};
    use foveal_sdk::testing::TestMemex;

    use super::*;

    fn text(memex: &TestMemex, focus: Option<&str>, options: &Options) -> String {
        let view = memex.view();
        render(&view.as_view(), focus, options, &|t| t.len() / 4).text
    }

    const TASKS: &str = "#+TODO: TODO NEXT | DONE CNCL
* Kitchen [1/3] :project:home:
:PROPERTIES:
:ID: org-0000000000000001
:END:
** TODO [#A] Order cabinets :shop:
:PROPERTIES:
:ID: org-0000000000000002
:END:
Call the shop.
** DONE Measure the walls
:PROPERTIES:
:ID: org-0000000000000003
:END:
** CNCL [#C] Paint
** NEXT
";

    #[test]
    fn the_compact_outline_shows_states_priorities_cookies_tags_and_handles() {
        let memex = TestMemex::from_org(TASKS);
        let out = text(&memex, None, &Options::default());
        let view = memex.view();
        let view = view.as_view();
        let handles = Handles::new(&view);
        let file = &view.files[0];
        let h = |i: u32| handles.of(file.id(i)).to_string();
        assert_eq!(
            out,
            format!(
                "{HEADER}* Kitchen [1/3] :project:home: {}\n\
                 ** TODO [#A] Order cabinets :shop: {}\n\
                 ** DONE Measure the walls {}\n\
                 ** CNCL [#C] Paint {}\n\
                 ** NEXT {}\n",
                h(0),
                h(1),
                h(2),
                h(3),
                h(4)
            )
        );
        // Every handle shown leads back to its object.
        for i in 0..5 {
            assert_eq!(
                resolve(&view, &h(i)),
                Resolution::Found { file: 0, index: i }
            );
            assert_eq!(h(i).len(), 1 + handles.base_len());
        }
    }

    #[test]
    fn priorities_are_read_before_the_title_only() {
        let memex = TestMemex::from_org(
            "* Launch :project:\n** [#B] No keyword\n** TODO A title with [#Z] in it\n** TODO [#1] COMMENT Commented :x:\n",
        );
        let out = text(&memex, None, &Options::default());
        let lines: Vec<&str> = out
            .lines()
            .skip(2)
            .map(|l| l.rsplit_once(" ^").unwrap().0)
            .collect();
        assert_eq!(
            lines,
            [
                "** [#B] No keyword",
                "** TODO A title with [#Z] in it",
                "** TODO [#1] Commented :x:",
            ],
            "{out}"
        );
    }

    #[test]
    fn the_seed_format_keeps_the_drawers_and_drops_the_states() {
        let memex = TestMemex::from_org(TASKS);
        let options = Options {
            format: Format::Seed,
            ..Options::default()
        };
        let out = text(&memex, Some("org-0000000000000002"), &options);
        assert!(
            out.starts_with(
                "GLOBAL MEMEX AWARENESS (Peripheral Vision):\n* Kitchen [1/3]\n:PROPERTIES:\n:ID: org-0000000000000001\n:END:\n** Order cabinets\n:PROPERTIES:\n:ID: org-0000000000000002\n:END:\nCall the shop.\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn the_compact_outline_is_at_most_half_the_seed_outline() {
        // Headlines with the ids Org gives them (`org-id`'s are longer).
        let mut org = String::from(
            "#+TODO: TODO NEXT | DONE\n* Kitchen :project:\n:PROPERTIES:\n:ID: org-7f3a9c0d12e4b865\n:END:\n",
        );
        for (k, state) in ["TODO", "DONE", "NEXT", "TODO"].iter().enumerate() {
            org.push_str(&format!(
                "** {state} Task number {k}\n:PROPERTIES:\n:ID: org-{:016x}\n:END:\n",
                0x9e37_79b9_7f4a_7c15u64.wrapping_mul(k as u64 + 1)
            ));
        }
        let memex = TestMemex::from_org(&org);
        let compact = text(&memex, None, &Options::default());
        let seed = text(
            &memex,
            None,
            &Options {
                format: Format::Seed,
                ..Options::default()
            },
        );
        assert!(compact.len() * 2 <= seed.len(), "{compact}\n{seed}");
    }

    #[test]
    fn scores_are_written_as_the_formatter_writes_them() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut values: Vec<f32> = (0..200_000)
            .map(|_| (next() % 2_000_001) as f32 / 1_000_000.0 - 0.5)
            .collect();
        // Ties of hundredths that an f32 holds exactly, their neighbours,
        // signed zeros and values past the fast path.
        for tie in [0.125f32, 0.375, 0.625, 0.875, 1.125, 0.005, 0.015, 0.995] {
            values.extend([
                tie,
                f32::from_bits(tie.to_bits() + 1),
                f32::from_bits(tie.to_bits() - 1),
            ]);
        }
        values.extend([0.0, -0.0, 1.0, -1.0, 12.345, 1e12, f32::NAN, f32::INFINITY]);
        for score in values {
            let mut text = String::new();
            push_score(&mut text, score);
            assert_eq!(text, format!("{score:.2}"), "{score:e}");
        }
    }

    #[test]
    fn a_promoted_object_says_how_similar_it_is() {
        let org = "* Launch :project:
** Plan
:PROPERTIES:
:ID: plan
:EMBEDDING: 1 0 0
:END:
plan body
** Twin
:PROPERTIES:
:ID: twin
:EMBEDDING: 0.95 0.05 0
:END:
twin body
";
        let memex = TestMemex::from_org(org);
        let out = text(&memex, Some("plan"), &Options::default());
        assert!(out.contains(" (similar 1.00)\ntwin body\n"), "{out}");
        assert!(out.contains("\nplan body\n"), "{out}");
    }
}
