//! Test support: a memex view built from Org text the way the host builds
//! it (headlines, `:ID:`, TODO keywords `TODO NEXT WAITING | DONE
//! CANCELLED`, own tags, bodies after the property drawer), without a
//! host. The end-to-end tests use the host's real view.

use abi_stable::std_types::{RSlice, RString, RVec};
use foveal_sdk::memex::{
    FileIndex, FileView, IdEntry, MemexView, NONE, ObjectRecord, Range32, TagEntry, id_hash,
};

const TODO: &[&str] = &["TODO", "NEXT", "WAITING"];
const DONE: &[&str] = &["DONE", "CANCELLED"];

fn r(start: usize, len: usize) -> Range32 {
    Range32 {
        start: start as u32,
        len: len as u32,
    }
}

/// Files of a test memex: `(path, text)`; keeps the indexes alive.
pub struct TestMemex {
    texts: Vec<(String, String)>,
    indexes: Vec<FileIndex>,
}

impl TestMemex {
    /// Indexes each file.
    pub fn new(files: &[(&str, &str)]) -> Self {
        let texts: Vec<(String, String)> = files
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
        let indexes = texts.iter().map(|(_, t)| index(t)).collect();
        Self { texts, indexes }
    }

    /// One file.
    pub fn one(text: &str) -> Self {
        Self::new(&[("main.org", text)])
    }

    /// Runs `f` with the view.
    pub fn with<T>(&self, f: impl FnOnce(&MemexView<'_>) -> T) -> T {
        let files: Vec<FileView<'_>> = self
            .texts
            .iter()
            .zip(&self.indexes)
            .map(|((path, text), index)| FileView {
                path: path.as_str().into(),
                text: text.as_str().into(),
                index,
            })
            .collect();
        let view = MemexView {
            generation: 1,
            files: RSlice::from_slice(&files),
        };
        f(&view)
    }
}

fn index(text: &str) -> FileIndex {
    let mut lines: Vec<(usize, &str)> = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        lines.push((at, line));
        at += line.len();
    }
    let mut index = FileIndex::default();
    let mut heads: Vec<usize> = Vec::new(); // line numbers of headlines
    for (i, (_, line)) in lines.iter().enumerate() {
        let stars = line.bytes().take_while(|&b| b == b'*').count();
        if stars > 0 && line.as_bytes().get(stars) == Some(&b' ') {
            heads.push(i);
        }
    }
    let mut tag_lists: std::collections::BTreeMap<String, Vec<u32>> = Default::default();
    let mut stack: Vec<(u16, u32)> = Vec::new();
    let mut ids: Vec<IdEntry> = Vec::new();
    let mut derived = String::new();
    for (n, &hl) in heads.iter().enumerate() {
        let (start, line) = lines[hl];
        let content = line.trim_end_matches(['\n', '\r']);
        let level = content.bytes().take_while(|&b| b == b'*').count() as u16;
        let mut rest_start = start + level as usize + 1;
        let mut rest = &content[level as usize + 1..];
        let mut todo = Range32::default();
        let mut done = false;
        if let Some(word) = rest.split(' ').next()
            && (TODO.contains(&word) || DONE.contains(&word))
        {
            todo = r(rest_start, word.len());
            done = DONE.contains(&word);
            rest_start += word.len() + 1;
            rest = rest.get(word.len() + 1..).unwrap_or("");
        }
        let mut title_len = rest.len();
        let tags_start = index.tags.len() as u32;
        let me = n as u32;
        if let Some(sp) = rest.trim_end().rfind(' ').map(|i| i + 1).or(Some(0)) {
            let last = rest.trim_end()[sp..].to_owned();
            if last.len() > 2 && last.starts_with(':') && last.ends_with(':') {
                title_len = rest[..sp].trim_end().len();
                let mut p = rest_start + sp + 1;
                for t in last[1..last.len() - 1].split(':') {
                    index.tags.push(r(p, t.len()));
                    tag_lists.entry(t.to_lowercase()).or_default().push(me);
                    p += t.len() + 1;
                }
            }
        }
        // Drawer and body.
        let mut body_line = hl + 1;
        let mut id = None;
        if lines
            .get(body_line)
            .is_some_and(|(_, l)| l.trim() == ":PROPERTIES:")
        {
            let mut j = body_line + 1;
            while j < lines.len() && lines[j].1.trim() != ":END:" {
                let l = lines[j].1.trim_end();
                if let Some(v) = l.trim_start().strip_prefix(":ID:") {
                    let v = v.trim();
                    let off = lines[j].0 + l.rfind(v).unwrap_or(0);
                    id = Some(r(off, v.len()));
                }
                j += 1;
            }
            body_line = j + 1;
        }
        let next = heads.get(n + 1).map_or(text.len(), |&h| lines[h].0);
        let body_start = lines.get(body_line).map_or(text.len(), |l| l.0).min(next);
        while stack.last().is_some_and(|&(l, _)| l >= level) {
            stack.pop();
        }
        let parent = stack.last().map_or(NONE, |&(_, p)| p);
        stack.push((level, me));
        let (id, id_derived) = match id {
            Some(id) => (id, false),
            None => {
                let s = derived.len();
                derived.push_str(&format!("derived-{n}"));
                (r(s, derived.len() - s), true)
            }
        };
        index.objects.push(ObjectRecord {
            id,
            id_derived,
            done,
            level,
            line: hl as u32 + 1,
            title: r(rest_start, title_len),
            todo,
            body: r(body_start, next - body_start),
            tags: Range32 {
                start: tags_start,
                len: index.tags.len() as u32 - tags_start,
            },
            parent,
            children: Range32::default(),
            vector: NONE,
            end: NONE,
            hash: n as u64 + 1,
        });
    }
    // Children, ends, parents.
    let count = index.objects.len();
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); count];
    for i in 0..count {
        let p = index.objects[i].parent;
        if p != NONE {
            children[p as usize].push(i as u32);
        }
    }
    for (i, kids) in children.into_iter().enumerate() {
        let start = index.children.len() as u32;
        index.children.extend(kids);
        index.objects[i].children = Range32 {
            start,
            len: index.children.len() as u32 - start,
        };
    }
    for i in 0..count {
        let level = index.objects[i].level;
        let end = (i + 1..count)
            .find(|&j| index.objects[j].level <= level)
            .unwrap_or(count);
        index.objects[i].end = end as u32;
    }
    index.parents = index.objects.iter().map(|o| o.parent).collect();
    index.levels = index.objects.iter().map(|o| o.level).collect();
    for (i, o) in index.objects.iter().enumerate() {
        let id = if o.id_derived {
            &derived[o.id.range()]
        } else {
            &text[o.id.range()]
        };
        ids.push(IdEntry {
            hash: id_hash(id),
            index: i as u32,
        });
    }
    ids.sort_unstable();
    index.id_index = RVec::from(ids);
    index.derived_ids = RString::from(derived);
    index.tag_index = tag_lists
        .into_iter()
        .map(|(tag, objects)| TagEntry {
            tag: tag.into(),
            objects: objects.into(),
        })
        .collect();
    index
}
