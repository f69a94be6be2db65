//! Which objects the outline shows, and why — in time proportional to what
//! is shown, not to the size of the memex.
//!
//! The active projects of each file come from [`foveal_sdk::projects`] (the tag
//! index for the seed's rule; one pass over a file's records for the
//! keyword and GTD rules, only where they can apply). For each active
//! project the selection is the union of:
//!
//! - the project and its children (depth ≤ 2), through the child lists;
//! - the foveal subtree, a run of the file's objects;
//! - the promoted objects, from the scan's rows through the host's
//!   row → object table;
//! - the ancestors of foveal and promoted objects, through parent links,
//!   each visited once.
//!
//! Sorted by position, that is the outline order. Nothing walks the
//! objects the outline leaves out; their number is one subtraction.

use std::sync::Mutex;

use foveal_sdk::memex::{FileView, MemexView, NONE};

use crate::render::{Entry, Options, Reason};
use crate::scan::{Probe, promoted_rows};
use foveal_sdk::projects::{Rule, active_projects};

/// Bits over a file's objects, reused from one render to the next and
/// cleared by the code that set them.
static MARKS: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// Every selected object in output order, and how many objects of active
/// projects the rules left out.
pub fn select(memex: &MemexView<'_>, focus: Option<&str>, options: &Options) -> (Vec<Entry>, u32) {
    let foveal = focus.and_then(|id| memex.find(id));
    let probe = foveal.and_then(|(file, i)| Probe::of(file, i));
    let mut entries = Vec::new();
    let mut not_selected = 0u32;
    let mut marks = MARKS.lock().unwrap_or_else(|e| e.into_inner());
    let mut picks: Vec<(u32, Reason)> = Vec::new();
    let mut found: Vec<(u32, u32, Rule)> = Vec::new();
    let mut projects: Vec<(u32, u32)> = Vec::new();
    for (f, file) in memex.files().enumerate() {
        // Active projects, outermost only: a nested one is rendered inside.
        found.clear();
        active_projects(file, options.rules, options.facts(f), &mut found);
        if found.is_empty() {
            continue;
        }
        projects.clear();
        projects.extend(found.iter().map(|&(p, end, _)| (p, end)));
        let words = file.len().div_ceil(64);
        if marks.len() < words {
            marks.resize(words, 0);
        }
        picks.clear();
        // Depth 1 and 2.
        for &(p, _) in &projects {
            picks.push((p, Reason::Outline));
            picks.extend(file.children(p).iter().map(|&c| (c, Reason::Outline)));
        }
        // The foveal subtree, when it lies in an active project.
        if let Some((other, fi)) = foveal
            && std::ptr::eq(other.index, file.index)
            && project_of(&projects, fi).is_some()
        {
            let end = file.object(fi).end.min(file.len() as u32);
            picks.extend((fi..end).map(|i| (i, Reason::Foveal)));
        }
        // Promoted objects.
        if let Some(probe) = &probe {
            let rows = project_rows(file, &projects);
            let promoted = promoted_rows(
                file,
                rows,
                probe,
                options.threshold,
                options.cache,
                memex.files.len(),
            );
            let owners = file.index.vector_objects.as_slice();
            picks.extend(promoted.iter().filter_map(|&(row, score)| {
                owners
                    .get(row as usize)
                    .map(|&i| (i, Reason::Semantic(score)))
            }));
        }
        // One reason per object, the strongest: foveal, then semantic,
        // then outline. The picks are three sorted runs (outline, foveal,
        // promoted: rows are in outline order), which a stable sort finds
        // and merges in linear time.
        picks.sort_by_key(|&(i, reason)| (i, rank(reason)));
        picks.dedup_by_key(|&mut (i, _)| i);
        for &(i, _) in &picks {
            mark(&mut marks, i);
        }
        // Ancestor paths of foveal and promoted objects, up to the project
        // (never above it: a project below the top level, such as one under
        // a `Projects` heading, in focus itself, has no path to show).
        let shown = picks.len();
        for k in 0..shown {
            let (i, reason) = picks[k];
            if !matches!(reason, Reason::Foveal | Reason::Semantic(_)) {
                continue;
            }
            let Some(root) = project_of(&projects, i).map(|p| projects[p].0) else {
                continue;
            };
            let mut up = file.parent(i).filter(|_| i != root);
            while let Some(a) = up {
                if a < root || is_marked(&marks, a) {
                    break;
                }
                mark(&mut marks, a);
                picks.push((a, Reason::Ancestor));
                up = file.parent(a);
            }
        }
        if picks.len() > shown {
            // A sorted run and the ancestors after it: merged as above.
            picks.sort_by_key(|&(i, _)| i);
        }
        // Entries, with depth and parent entry; clear the marks.
        let first = entries.len();
        let mut project = 0usize;
        for (k, &(i, reason)) in picks.iter().enumerate() {
            if let Some(&(ahead, _)) = picks.get(k + 16) {
                prefetch_record(file, ahead);
            }
            unmark(&mut marks, i);
            while projects[project].1 <= i {
                project += 1;
            }
            let base = file.level(projects[project].0);
            let rule = (i == found[project].0).then_some(found[project].2);
            let parent = match file.parent(i) {
                Some(a) if a >= projects[project].0 => entries[first..]
                    .binary_search_by_key(&a, |e: &Entry| e.index)
                    .map_or(NONE, |at| (first + at) as u32),
                _ => NONE,
            };
            entries.push(Entry {
                file: f as u32,
                index: i,
                depth: file.level(i) - base + 1,
                reason,
                parent,
                project: rule,
            });
        }
        let in_projects: u32 = projects.iter().map(|&(p, end)| end - p).sum();
        not_selected += in_projects - picks.len() as u32;
    }
    (entries, not_selected)
}

/// Foveal before semantic before outline, for the same object.
fn rank(reason: Reason) -> u8 {
    match reason {
        Reason::Foveal => 0,
        Reason::Semantic(_) => 1,
        Reason::Outline => 2,
        Reason::Ancestor => 3,
        Reason::Map => 4,
    }
}

/// The project (as an index into `projects`) whose subtree holds `i`.
fn project_of(projects: &[(u32, u32)], i: u32) -> Option<usize> {
    let at = projects.partition_point(|&(p, _)| p <= i);
    at.checked_sub(1).filter(|&k| i < projects[k].1)
}

/// The rows of the vector table inside the projects: rows are numbered in
/// outline order, so each project's rows are one run.
fn project_rows(file: &FileView<'_>, projects: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let owners = file.index.vector_objects.as_slice();
    projects
        .iter()
        .map(|&(p, end)| {
            let first = owners.partition_point(|&o| o < p);
            let last = owners.partition_point(|&o| o < end);
            (first as u32, last as u32)
        })
        .filter(|&(first, last)| first < last)
        .collect()
}

/// Starts loading the record of object `i` into the cache.
#[inline]
fn prefetch_record(file: &FileView<'_>, i: u32) {
    #[cfg(target_arch = "x86_64")]
    if let Some(record) = file.index.objects.get(i as usize) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch is a hint; it never faults and reads nothing
        // into the program. The pointer is in bounds anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(record).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (file, i);
}

#[inline]
fn mark(marks: &mut [u64], i: u32) {
    marks[i as usize / 64] |= 1 << (i % 64);
}

#[inline]
fn unmark(marks: &mut [u64], i: u32) {
    marks[i as usize / 64] &= !(1 << (i % 64));
}

#[inline]
fn is_marked(marks: &[u64], i: u32) -> bool {
    marks[i as usize / 64] & (1 << (i % 64)) != 0
}
