//! Testing a skill without the host (the `testing` feature).
//!
//! - [`TestMemex`] builds the memex view a hook is lent from Org text, with
//!   the host's rules: the host's own Org scanner (`foveal-org`), privacy
//!   tags (by default the host's default, `@personal`) applied to the
//!   headline that carries one, to all its descendants, and to a whole file
//!   through `#+FILETAGS:`; private subtrees and `:EMBEDDING:` values cut
//!   out of the text lent, exactly as the host's `memex/view.rs` does (a
//!   property test in the host checks that both agree).
//! - [`Harness`] holds one call's inputs (memex, focus, configuration,
//!   signal, budget) and calls a hook *function* with them — the plain Rust
//!   function you wrote — inside the same panic guard the export macro
//!   uses, so a panic comes back as a [`SkillError::PANIC`] error.
//! - [`Skill`] takes the root module [`export_skill!`](crate::export_skill)
//!   exports ([`exported_skill!`](crate::exported_skill)) and calls its
//!   hooks through the ABI the way the host does: `init` with a test host
//!   API, the manifest's component ids enforced, tools called by name
//!   through `run_tool` (or the older `call_tool`).
//!
//! # Example
//!
//! ```
//! use foveal_sdk::testing::{Harness, TestMemex};
//! use foveal_sdk::{Component, ComponentsRequest, Role, SkillError};
//!
//! fn components(request: &ComponentsRequest<'_>) -> Result<Vec<Component>, SkillError> {
//!     let titles: Vec<&str> = request
//!         .memex
//!         .files()
//!         .flat_map(|f| (0..f.len() as u32).map(move |i| f.title(i)))
//!         .collect();
//!     Ok(vec![Component::new(4500, "titles", "Titles", Role::SYSTEM, titles.join(", "))])
//! }
//!
//! let memex = TestMemex::from_org("* Work :project:\n* Diary :@personal:\n** Secret\n* Home\n");
//! let out = Harness::new(memex).components(components).unwrap();
//! assert_eq!(out[0].content.as_str(), "Work, Home");
//! ```

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::{RErr, RResult, RSlice, RStr, RString, RVec};

use crate::abi::{
    Component, ComponentsRequest, HostApi, HostApiRef, LogLevel, Manifest, SignalKind, SkillError,
    SkillModRef, ToolCallRequest, ToolDecl,
};
use crate::memex::{
    FileIndex, FileView, IdEntry, MemexView, NONE, ObjectRecord, Range32, TagEntry,
};

/// The host's default privacy tag (`privacy.tags` in `foveal.toml`).
pub const DEFAULT_PRIVACY_TAGS: [&str; 1] = ["@personal"];

/// One file as lent: its visible text and its index.
#[derive(Debug, Clone)]
struct Lent {
    path: String,
    text: String,
    index: FileIndex,
}

/// A memex built from Org text, as a skill's hooks would be lent it.
///
/// Files keep the order they were added in (the host lends them in path
/// order; add them sorted to match). A file private as a whole is not lent
/// at all, as in the host.
#[derive(Debug, Clone)]
pub struct TestMemex {
    sources: Vec<(String, String)>,
    privacy: Vec<String>,
    generation: u64,
    lent: Vec<Lent>,
}

impl Default for TestMemex {
    fn default() -> Self {
        Self::new()
    }
}

impl TestMemex {
    /// An empty memex with the host's default privacy tags.
    pub fn new() -> Self {
        Self {
            sources: Vec::new(),
            privacy: normalise(DEFAULT_PRIVACY_TAGS),
            generation: 1,
            lent: Vec::new(),
        }
    }

    /// A memex of one file, `memex.org`, holding `org`.
    pub fn from_org(org: &str) -> Self {
        Self::new().with_file("memex.org", org)
    }

    /// Adds a file. `path` is as the memex root would see it
    /// (`projects/a.org`): ids of headlines without `:ID:` are derived
    /// from it, as the host derives them from the path under the root.
    pub fn with_file(mut self, path: &str, org: &str) -> Self {
        self.sources.push((path.to_owned(), org.to_owned()));
        self.rebuild();
        self
    }

    /// Replaces the privacy tags (`privacy.tags`): with or without
    /// colons, any case. An empty list makes nothing private.
    pub fn with_privacy_tags<I, S>(mut self, tags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.privacy = normalise(tags);
        self.rebuild();
        self
    }

    /// Sets the generation the view reports.
    pub fn with_generation(mut self, generation: u64) -> Self {
        self.generation = generation;
        self
    }

    fn rebuild(&mut self) {
        self.lent = self
            .sources
            .iter()
            .filter_map(|(path, text)| prepare(path, text, &self.privacy))
            .collect();
    }

    /// The text lent of file `path`: `None` when the file is private as a
    /// whole (or unknown).
    pub fn visible_text(&self, path: &str) -> Option<&str> {
        self.lent
            .iter()
            .find(|f| f.path == path)
            .map(|f| f.text.as_str())
    }

    /// The files as the view lends them; keep the value alive while the
    /// [`MemexView`] from [`View::as_view`] borrows it.
    pub fn view(&self) -> View<'_> {
        View {
            generation: self.generation,
            files: self
                .lent
                .iter()
                .map(|f| FileView {
                    path: RStr::from_str(&f.path),
                    text: RStr::from_str(&f.text),
                    index: &f.index,
                })
                .collect(),
        }
    }
}

/// The files of a [`TestMemex`], ready to be lent as a [`MemexView`].
#[derive(Debug)]
pub struct View<'a> {
    generation: u64,
    files: Vec<FileView<'a>>,
}

impl View<'_> {
    /// The ABI view, as a hook receives it.
    pub fn as_view(&self) -> MemexView<'_> {
        MemexView {
            generation: self.generation,
            files: RSlice::from_slice(&self.files),
        }
    }
}

fn normalise<I, S>(tags: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut tags: Vec<String> = tags
        .into_iter()
        .map(|t| t.as_ref().trim().trim_matches(':').to_lowercase())
        .filter(|t| !t.is_empty())
        .collect();
    tags.sort();
    tags.dedup();
    tags
}

fn is_privacy_tag(privacy: &[String], tag: &str) -> bool {
    let tag = tag.trim_matches(':');
    privacy
        .iter()
        .any(|t| t.eq_ignore_ascii_case(tag) || *t == tag.to_lowercase())
}

fn slice<'a>(text: &'a str, span: &Range<u32>) -> &'a str {
    &text[span.start as usize..span.end as usize]
}

/// What a skill is lent of one file, as the host's `memex::view::prepare`
/// builds it; `None` for a file private as a whole. A file the scanner
/// refuses is lent empty (the host would not load it).
fn prepare(path: &str, text: &str, privacy: &[String]) -> Option<Lent> {
    let settings = foveal_org::collect_settings(text, &mut |_, _| None);
    let Ok(parsed) = foveal_org::parse_with(text, settings) else {
        return Some(Lent {
            path: path.to_owned(),
            text: String::new(),
            index: FileIndex::default(),
        });
    };
    if !privacy.is_empty() && parsed.file_tags.iter().any(|t| is_privacy_tag(privacy, t)) {
        return None;
    }
    let headlines = &parsed.headlines;
    // Privacy: own tags, or inherited from a parent (parents come first).
    let mut mask: Vec<bool> = Vec::with_capacity(headlines.len());
    for h in headlines {
        let inherited = h.parent.is_some_and(|p| mask[p as usize]);
        mask.push(
            !privacy.is_empty() && (inherited || h.tags(text).any(|t| is_privacy_tag(privacy, t))),
        );
    }
    // Children lists.
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); headlines.len()];
    for (i, h) in headlines.iter().enumerate() {
        if let Some(p) = h.parent {
            children[p as usize].push(i as u32);
        }
    }
    // Vectors, as the host reads `:EMBEDDING:` (the file's first length wins).
    let mut dim = 0usize;
    let mut vectors: Vec<f32> = Vec::new();
    let mut vector_of: Vec<Option<u32>> = Vec::with_capacity(headlines.len());
    for h in headlines {
        let mut row = None;
        if let Some(p) = h
            .properties
            .iter()
            .find(|p| slice(text, &p.key).eq_ignore_ascii_case("EMBEDDING"))
        {
            let numbers: Option<Vec<f32>> = slice(text, &p.value)
                .split_ascii_whitespace()
                .map(|t| t.parse::<f32>().ok().filter(|x| x.is_finite()))
                .collect();
            if let Some(numbers) = numbers.filter(|n| !n.is_empty())
                && (dim == 0 || numbers.len() == dim)
            {
                dim = numbers.len();
                vectors.extend_from_slice(&numbers);
                row = Some((vectors.len() / dim - 1) as u32);
            }
        }
        vector_of.push(row);
    }
    let ids = assign_ids(text, path, headlines);

    // The cuts: each private object's own text, each visible object's
    // `:EMBEDDING:` value.
    let mut cuts: Vec<Range<u32>> = Vec::new();
    {
        let mut cut = |range: Range<u32>| {
            if range.is_empty() {
                return;
            }
            match cuts.last_mut() {
                Some(last) if last.end == range.start => last.end = range.end,
                _ => cuts.push(range),
            }
        };
        for (h, private) in headlines.iter().zip(&mask) {
            if *private {
                cut(h.own.clone());
                continue;
            }
            for property in h.properties.iter() {
                if slice(text, &property.key).eq_ignore_ascii_case("EMBEDDING") {
                    cut(property.value.clone());
                }
            }
        }
    }
    let mut visible = String::with_capacity(text.len());
    let mut at = 0usize;
    for c in &cuts {
        visible.push_str(&text[at..c.start as usize]);
        at = c.end as usize;
    }
    visible.push_str(&text[at..]);

    let mut shift = Shift {
        cuts: &cuts,
        passed: 0,
        removed: 0,
    };
    let mut remap = vec![NONE; headlines.len()];
    let mut count = 0u32;
    for (i, private) in mask.iter().enumerate() {
        if !private {
            remap[i] = count;
            count += 1;
        }
    }
    let mut index = FileIndex {
        dim: dim as u32,
        ..FileIndex::default()
    };
    let mut tag_lists: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let mut derived = String::new();
    for (i, h) in headlines.iter().enumerate() {
        if mask[i] {
            continue;
        }
        shift.enter(h.own.start);
        let me = remap[i];
        let (id, id_derived) = match &ids[i] {
            Id::Property(span) => (shift.range(span), false),
            Id::Derived(id) => {
                let start = derived.len() as u32;
                derived.push_str(id);
                (
                    Range32 {
                        start,
                        len: id.len() as u32,
                    },
                    true,
                )
            }
        };
        let tags_start = index.tags.len() as u32;
        let token = slice(text, &h.tags_token);
        let mut pos = shift.at(h.tags_token.start);
        for part in token.split(':') {
            if !part.is_empty() {
                index.tags.push(Range32 {
                    start: pos,
                    len: part.len() as u32,
                });
                let list = tag_lists.entry(part.to_lowercase()).or_default();
                if list.last() != Some(&me) {
                    list.push(me);
                }
            }
            pos += part.len() as u32 + 1;
        }
        let children_start = index.children.len() as u32;
        for &child in &children[i] {
            let c = remap[child as usize];
            if c != NONE {
                index.children.push(c);
            }
        }
        let vector = match vector_of[i] {
            Some(row) => {
                let row = row as usize;
                let new_row = (index.vectors.len() / dim.max(1)) as u32;
                let v = &vectors[row * dim..(row + 1) * dim];
                index.vectors.extend_from_slice(v);
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                index.norms.push(norm);
                let factor = crate::memex::quantize(v, norm, &mut index.quantized);
                index.quant_factors.push(factor);
                new_row
            }
            None => NONE,
        };
        index.objects.push(ObjectRecord {
            id,
            id_derived,
            done: h.done,
            level: h.level,
            line: h.line,
            title: shift.range(&h.title),
            todo: shift.range(&h.todo_span),
            body: shift.range(&h.body),
            tags: Range32 {
                start: tags_start,
                len: index.tags.len() as u32 - tags_start,
            },
            parent: h.parent.map_or(NONE, |p| remap[p as usize]),
            children: Range32 {
                start: children_start,
                len: index.children.len() as u32 - children_start,
            },
            vector,
            end: NONE,
            hash: text_hash(slice(text, &h.own).as_bytes()),
        });
        if vector != NONE {
            index.vector_objects.push(me);
        }
    }
    set_subtree_ends(&mut index.objects);
    index.parents = index.objects.iter().map(|o| o.parent).collect();
    index.levels = index.objects.iter().map(|o| o.level).collect();
    index.vectors_hash = vectors_hash(index.dim, &index.vectors);
    let mut id_entries: Vec<IdEntry> = (0..index.objects.len() as u32)
        .map(|i| {
            let o = &mut index.objects[i as usize];
            let id = if o.id_derived {
                &derived[o.id.range()]
            } else {
                &visible[o.id.range()]
            };
            let hash = crate::memex::id_hash(id);
            o.hash = mix(o.hash, hash);
            IdEntry { hash, index: i }
        })
        .collect();
    id_entries.sort_unstable();
    index.id_index = RVec::from(id_entries);
    index.derived_ids = RString::from(derived);
    index.tag_index = tag_lists
        .into_iter()
        .map(|(tag, objects)| TagEntry {
            tag: RString::from(tag),
            objects: RVec::from(objects),
        })
        .collect();
    Some(Lent {
        path: path.to_owned(),
        text: visible,
        index,
    })
}

/// An object's id: its `:ID:` value in the text, or derived.
enum Id {
    Property(Range<u32>),
    Derived(String),
}

/// Each headline's id, as the host assigns them: a non-empty `:ID:`, else
/// `org-` and 16 hex digits of FNV-1a over `<file>\0<outline path>` (titles
/// from the top, `\`, `/` and `#` escaped, `#N` after the N-th sibling of
/// the same title).
fn assign_ids(text: &str, id_base: &str, headlines: &[foveal_org::Headline]) -> Vec<Id> {
    let mut seen: HashMap<(Option<u32>, &str), u32> = HashMap::new();
    let ranks: Vec<u32> = headlines
        .iter()
        .map(|h| {
            let rank = seen.entry((h.parent, slice(text, &h.title))).or_insert(0);
            *rank += 1;
            *rank
        })
        .collect();
    headlines
        .iter()
        .enumerate()
        .map(|(i, h)| {
            if let Some(p) = h
                .properties
                .iter()
                .find(|p| slice(text, &p.key).eq_ignore_ascii_case("ID"))
                .filter(|p| !p.value.is_empty())
            {
                return Id::Property(p.value.clone());
            }
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
            let mut bytes = Vec::with_capacity(id_base.len() + path.len() + 1);
            bytes.extend_from_slice(id_base.as_bytes());
            bytes.push(0);
            bytes.extend_from_slice(path.as_bytes());
            Id::Derived(format!("org-{:016x}", fnv1a(&bytes)))
        })
        .collect()
}

/// 64-bit FNV-1a, as the host derives ids.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Maps offsets of a file's text to offsets of its visible text.
struct Shift<'c> {
    cuts: &'c [Range<u32>],
    passed: usize,
    removed: u32,
}

impl Shift<'_> {
    fn enter(&mut self, start: u32) {
        while let Some(c) = self.cuts.get(self.passed)
            && c.end <= start
        {
            self.removed += c.end - c.start;
            self.passed += 1;
        }
    }

    fn at(&self, pos: u32) -> u32 {
        let inside: u32 = self.cuts[self.passed..]
            .iter()
            .take_while(|c| c.end <= pos)
            .map(|c| c.end - c.start)
            .sum();
        pos - self.removed - inside
    }

    fn range(&self, span: &Range<u32>) -> Range32 {
        Range32 {
            start: self.at(span.start),
            len: span.end - span.start,
        }
    }
}

fn set_subtree_ends(objects: &mut [ObjectRecord]) {
    let mut open: Vec<u32> = Vec::new();
    for j in 0..objects.len() {
        let level = objects[j].level;
        while let Some(&top) = open.last() {
            if objects[top as usize].level < level {
                break;
            }
            objects[top as usize].end = j as u32;
            open.pop();
        }
        open.push(j as u32);
    }
    for top in open {
        objects[top as usize].end = objects.len() as u32;
    }
}

#[inline]
fn mix(h: u64, w: u64) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let m = u128::from(h ^ w) * u128::from(K);
    (m as u64) ^ ((m >> 64) as u64)
}

fn text_hash(bytes: &[u8]) -> u64 {
    let mut h = mix(0x243f_6a88_85a3_08d3, bytes.len() as u64);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        h = mix(h, u64::from_le_bytes(word.try_into().unwrap_or_default()));
    }
    let mut last = [0u8; 8];
    last[..words.remainder().len()].copy_from_slice(words.remainder());
    mix(h, u64::from_le_bytes(last))
}

fn vectors_hash(dim: u32, vectors: &[f32]) -> u64 {
    let mut h = mix(u64::from(dim), vectors.len() as u64);
    let mut pairs = vectors.chunks_exact(2);
    for pair in &mut pairs {
        h = mix(
            h,
            u64::from(pair[0].to_bits()) | (u64::from(pair[1].to_bits()) << 32),
        );
    }
    for x in pairs.remainder() {
        h = mix(h, u64::from(x.to_bits()));
    }
    h
}

/// The inputs of one hook call: the memex, the focus, the skill's
/// configuration, the signal, the budget, whether to explain, and the
/// host facts of the call (session and time).
#[derive(Debug, Clone)]
pub struct Harness {
    memex: TestMemex,
    focus: Option<String>,
    config_json: String,
    signal: SignalKind,
    budget_tokens: Option<u32>,
    explain: bool,
    facts: crate::call::CallFacts,
}

impl Harness {
    /// A call on `memex`: no focus, configuration `{}`, a user signal, no
    /// budget, no explanation.
    pub fn new(memex: TestMemex) -> Self {
        Self {
            memex,
            focus: None,
            config_json: "{}".to_owned(),
            signal: SignalKind::USER,
            budget_tokens: None,
            explain: false,
            facts: crate::call::CallFacts::default(),
        }
    }

    /// The memex.
    pub fn memex(&self) -> &TestMemex {
        &self.memex
    }

    /// Puts object `id` in focus.
    pub fn focus(mut self, id: &str) -> Self {
        self.focus = Some(id.to_owned());
        self
    }

    /// The skill's configuration as JSON: what `[skills.<name>]` in
    /// `foveal.toml` would give.
    pub fn config_json(mut self, json: &str) -> Self {
        self.config_json = json.to_owned();
        self
    }

    /// The signal the cycle answers.
    pub fn signal(mut self, signal: SignalKind) -> Self {
        self.signal = signal;
        self
    }

    /// The tokens the skill's section may use.
    pub fn budget_tokens(mut self, tokens: u32) -> Self {
        self.budget_tokens = Some(tokens);
        self
    }

    /// Asks for sources and omissions (`foveal context --explain`).
    pub fn explain(mut self, explain: bool) -> Self {
        self.explain = explain;
        self
    }

    /// The session the call is for, as the host tells a hook
    /// ([`crate::call::session`]); none by default, as for a one-off
    /// prompt.
    pub fn session(mut self, session: &str) -> Self {
        self.facts.session = Some(session.to_owned());
        self
    }

    /// The time of the call ([`crate::call::now`]); the system clock in
    /// UTC by default. Set it to test a section across midnight.
    pub fn now(mut self, now: crate::Now) -> Self {
        self.facts.now = Some(now);
        self
    }

    /// Builds the `components` request and hands it to `f`.
    pub fn with_components_request<R>(&self, f: impl FnOnce(&ComponentsRequest<'_>) -> R) -> R {
        let view = self.memex.view();
        let memex = view.as_view();
        let request = ComponentsRequest {
            signal: self.signal,
            focus: self.focus.as_deref().map(RStr::from_str).into(),
            budget_tokens: self.budget_tokens.into(),
            config_json: RStr::from_str(&self.config_json),
            memex: &memex,
            explain: self.explain,
        };
        crate::call::with_facts(&self.facts, || f(&request))
    }

    /// Builds the `run_tool` request for tool `name` and hands it to `f`.
    pub fn with_tool_request<R>(
        &self,
        name: &str,
        args_json: &str,
        f: impl FnOnce(&ToolCallRequest<'_>) -> R,
    ) -> R {
        let view = self.memex.view();
        let memex = view.as_view();
        let request = ToolCallRequest {
            name: RStr::from_str(name),
            args_json: RStr::from_str(args_json),
            focus: self.focus.as_deref().map(RStr::from_str).into(),
            config_json: RStr::from_str(&self.config_json),
            memex: &memex,
        };
        crate::call::with_facts(&self.facts, || f(&request))
    }

    /// Calls a `components` hook function with this call's inputs, in
    /// the panic guard.
    pub fn components(
        &self,
        hook: impl FnOnce(&ComponentsRequest<'_>) -> Result<Vec<Component>, SkillError>,
    ) -> Result<Vec<Component>, SkillError> {
        self.with_components_request(|request| crate::export::guard(|| hook(request)).into_result())
    }

    /// Calls a `run_tool` hook function for tool `name` with arguments
    /// `args_json`, in the panic guard.
    pub fn run_tool(
        &self,
        hook: impl FnOnce(&ToolCallRequest<'_>) -> Result<String, SkillError>,
        name: &str,
        args_json: &str,
    ) -> Result<String, SkillError> {
        self.with_tool_request(name, args_json, |request| {
            crate::export::guard(|| hook(request)).into_result()
        })
    }
}

/// A skill's exported root module, called through the ABI as the host
/// calls it. Build one with [`exported_skill!`](crate::exported_skill) in
/// the skill crate's own tests.
#[derive(Debug)]
pub struct Skill {
    module: SkillModRef,
}

/// `Skill::new(crate::__foveal_root_module())`: the skill this crate
/// exports with [`export_skill!`](crate::export_skill), initialised, for
/// its tests.
///
/// ```ignore
/// let skill = foveal_sdk::exported_skill!().unwrap();
/// ```
// `crate::` on purpose: the root module is the one `export_skill!`
// defined in the crate that calls this macro, not in the SDK.
#[allow(clippy::crate_in_macro_def)]
#[macro_export]
macro_rules! exported_skill {
    () => {
        $crate::testing::Skill::new(crate::__foveal_root_module())
    };
}

impl Skill {
    /// Runs the module's `init` with a test host API (log lines go to
    /// stderr, tokens are counted as bytes / 4 rounded up, memex writes are
    /// refused) and returns the skill, or what `init` returned.
    pub fn new(module: SkillModRef) -> Result<Self, SkillError> {
        (module.init())(test_host()).into_result()?;
        Ok(Self { module })
    }

    /// The manifest the library carries.
    pub fn manifest(&self) -> Manifest {
        self.module.manifest()
    }

    /// The hooks the module fills, by name (as `foveal skill-list` shows
    /// them).
    pub fn hooks(&self) -> Vec<&'static str> {
        self.module.hook_names()
    }

    /// Calls the `components` hook with `call`'s inputs. A component at an
    /// id the manifest does not declare — which the host would drop — is
    /// an [`SkillError::INVALID_INPUT`] error naming it.
    pub fn components(&self, call: &Harness) -> Result<Vec<Component>, SkillError> {
        let hook = self
            .module
            .components()
            .ok_or_else(|| missing_hook("components"))?;
        let out = call.with_components_request(|r| hook(r)).into_result()?;
        let declared = self.manifest().component_ids;
        if let Some(c) = out.iter().find(|c| !declared.contains(&c.id)) {
            return Err(SkillError::invalid_input(format!(
                "component {} (`{}`) is at an id the manifest does not declare (component_ids: {:?}); the host drops it",
                c.id,
                c.key,
                declared.as_slice()
            )));
        }
        Ok(out.into_vec())
    }

    /// Calls the `tools` hook.
    pub fn tools(&self) -> Result<Vec<ToolDecl>, SkillError> {
        let hook = self
            .module
            .tools()
            .flatten()
            .ok_or_else(|| missing_hook("tools"))?;
        hook().into_result().map(RVec::into_vec)
    }

    /// Runs tool `name` as the host does: only a tool the `tools` hook
    /// declares, through `run_tool` (lent `call`'s memex and focus), or
    /// `call_tool` for a skill without `run_tool`.
    pub fn run_tool(
        &self,
        call: &Harness,
        name: &str,
        args_json: &str,
    ) -> Result<String, SkillError> {
        if !self.tools()?.iter().any(|t| t.name.as_str() == name) {
            return Err(SkillError::invalid_input(format!(
                "the skill's `tools` hook does not declare a tool `{name}`"
            )));
        }
        if let Some(run) = self.module.run_tool().flatten() {
            return call
                .with_tool_request(name, args_json, |r| run(r))
                .into_result()
                .map(RString::into_string);
        }
        let old = self
            .module
            .call_tool()
            .flatten()
            .ok_or_else(|| missing_hook("run_tool"))?;
        old(RStr::from_str(name), RStr::from_str(args_json))
            .into_result()
            .map(RString::into_string)
    }

    /// Calls the `redact` hook.
    pub fn redact(&self, text: &str) -> Result<String, SkillError> {
        let hook = self.module.redact().ok_or_else(|| missing_hook("redact"))?;
        hook(RStr::from_str(text))
            .into_result()
            .map(RString::into_string)
    }

    /// Calls the `invoke` hook.
    pub fn invoke(&self, method: &str, args_json: &str) -> Result<String, SkillError> {
        let hook = self.module.invoke().ok_or_else(|| missing_hook("invoke"))?;
        hook(RStr::from_str(method), RStr::from_str(args_json))
            .into_result()
            .map(RString::into_string)
    }
}

fn missing_hook(hook: &str) -> SkillError {
    SkillError::new(
        SkillError::UNAVAILABLE,
        format!("the skill does not implement the `{hook}` hook"),
    )
}

/// The component with key `key`, if `components` has one.
pub fn find<'c>(components: &'c [Component], key: &str) -> Option<&'c Component> {
    components.iter().find(|c| c.key.as_str() == key)
}

fn test_host() -> HostApiRef {
    static API: std::sync::OnceLock<HostApiRef> = std::sync::OnceLock::new();
    *API.get_or_init(|| {
        HostApi {
            sdk_version: RStr::from_str(crate::SDK_VERSION),
            log: test_log,
            count_tokens: test_count_tokens,
            memex_write: test_memex_write,
            call_session: crate::call::serve_session,
            call_now: crate::call::serve_now,
        }
        .leak_into_prefix()
    })
}

extern "C" fn test_log(level: LogLevel, skill: RStr<'_>, message: RStr<'_>) {
    eprintln!("[{skill} {level:?}] {message}");
}

extern "C" fn test_count_tokens(text: RStr<'_>) -> u32 {
    u32::try_from(text.len().div_ceil(4)).unwrap_or(u32::MAX)
}

extern "C" fn test_memex_write(_ticket: u64, _edits: RStr<'_>) -> RResult<RString, SkillError> {
    RErr(SkillError::new(
        SkillError::UNAVAILABLE,
        "the test host does not write to the memex",
    ))
}
