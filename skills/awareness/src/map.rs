//! The map of a memex without projects: the top of each file.
//!
//! When no rule finds an active project anywhere in the memex, the seed
//! says `No active projects found.` and nothing else: the model sees none
//! of what the memex holds. The map shows instead, in file order, each
//! file as a depth-1 line — its path below the memex's common folder and
//! its `#+TITLE:` — with its top-level headlines (the visible ones) at
//! depth 2, in the outline's format (their ids, for the tools):
//!
//! ```org
//! GLOBAL MEMEX AWARENESS (Peripheral Vision):
//! No active projects found. The top of each file:
//! * notes/reading.org: Reading notes
//! ** Books
//! :PROPERTIES:
//! :ID: org-2f5c0d1e9a8b7c6d
//! :END:
//! ```
//!
//! With a token budget, whole files are left out, the least recently
//! changed first (by the modification times the host passes), and a
//! closing line says how many (`[… 12 older files omitted]`). If not even
//! the most recently changed file fits whole, its line and the first of
//! its headlines that fit are shown: from 50 tokens on, the map is never
//! empty while the memex has a file.
//!
//! Modification times do not always decide: a checkout, a copy or a sync
//! writes every file at once. Files changed within [`BURST_SECONDS`] of
//! each other count as changed together, and among them the map keeps
//! first a file named like the collection's index ([`INDEX_NAMES`],
//! shallowest first), then the files with more open tasks, then those with
//! more headlines. `--explain` says why each file was kept.

use std::fmt::Write as _;

use foveal_sdk::memex::{FileView, NONE};

use crate::render::{
    Entry, HEADER, Included, Options, Reason, Rendered, Style, max_piece_bytes, piece,
};
use foveal_sdk::projects::{file_name, preamble_keyword, roots};

/// The line under the header: no project, here is the map.
pub const MAP_LINE: &str = "No active projects found. The top of each file:\n";

/// Names of the file a collection is entered by (any case): the map keeps
/// it before the files changed at the same time.
pub const INDEX_NAMES: [&str; 6] = [
    "readme.org",
    "index.org",
    "emacs.org",
    "todo.org",
    "inbox.org",
    "main.org",
];

/// Files whose modification times are this close (one after another, in
/// order) were changed together: a checkout, a copy, a sync.
pub const BURST_SECONDS: i64 = 2;

/// How much of a file the map shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Nothing.
    Nothing,
    /// Its entry and its first `n` top-level headlines.
    First(u32),
    /// Its entry and all its top-level headlines.
    Whole,
}

/// Renders the map of `files` within `options.budget`.
pub fn render(
    files: &[FileView<'_>],
    style: &Style,
    options: &Options,
    count: &dyn Fn(&str) -> usize,
) -> Rendered {
    let map = Map {
        files,
        style,
        explain: options.explain,
        base: common_dir(files),
        headlines: files.iter().map(|f| roots(f).count() as u32).collect(),
    };
    match options.budget {
        None => map.emit(None, None),
        Some(budget) => map.fit(budget, &options.modified, count),
    }
}

struct Map<'a> {
    files: &'a [FileView<'a>],
    style: &'a Style,
    /// Say why each file was kept.
    explain: bool,
    /// Bytes of every path that name the memex's common folder.
    base: usize,
    /// Each file's top-level headlines.
    headlines: Vec<u32>,
}

impl Map<'_> {
    /// Appends a file's entry: its path below the common folder, and its
    /// title.
    fn file_entry(&self, f: usize, text: &mut String) {
        let file = &self.files[f];
        let path = file.path.as_str();
        text.push_str("* ");
        text.push_str(path.get(self.base..).unwrap_or(path));
        let mut first = true;
        for part in preamble_keyword(file, "TITLE").filter(|t| !t.is_empty()) {
            text.push_str(if first { ": " } else { " " });
            text.push_str(part);
            first = false;
        }
        text.push('\n');
    }

    /// Appends a top-level headline `i` of file `f`.
    fn headline(&self, f: usize, i: u32, text: &mut String) {
        let handle = self.style.handle(f as u32, i);
        piece(self.style, self.files, &entry(f, i), handle, text);
    }

    /// Appends file `f` as `keep` says; returns the headlines shown.
    fn block(&self, f: usize, keep: Keep, text: &mut String, shown: &mut Vec<Included>) {
        if keep == Keep::Nothing {
            return;
        }
        self.file_entry(f, text);
        let limit = match keep {
            Keep::First(n) => n as usize,
            _ => usize::MAX,
        };
        for r in roots(&self.files[f]).take(limit) {
            self.headline(f, r, text);
            shown.push(Included {
                file: f as u32,
                index: r,
                reason: Reason::Map,
                project: None,
            });
        }
    }

    /// The map of the files `keep` allows (all when `None`), with a
    /// closing line saying what was left out; `why`, when the budget chose
    /// among the files, says why each was kept (in `Rendered::files`).
    fn emit(&self, keep: Option<&[Keep]>, why: Option<&dyn Fn(usize) -> String>) -> Rendered {
        let mut out = Rendered::default();
        out.text.push_str(HEADER);
        out.text.push_str(MAP_LINE);
        // Headlines left out of the files shown.
        let mut partial = 0u32;
        for (f, &headlines) in self.headlines.iter().enumerate() {
            let k = keep.map_or(Keep::Whole, |keep| keep[f]);
            match k {
                Keep::Nothing => {
                    out.omitted.files += 1;
                    out.omitted.map += headlines;
                }
                Keep::First(n) => partial += headlines - n.min(headlines),
                Keep::Whole => {}
            }
            if let Some(why) = why
                && k != Keep::Nothing
                && self.explain
            {
                out.files.push((f as u32, why(f)));
            }
            self.block(f, k, &mut out.text, &mut out.included);
        }
        out.omitted.map += partial;
        if out.omitted.files > 0 || partial > 0 {
            out.text.push_str(&omitted_line(out.omitted.files, partial));
        }
        out
    }

    /// An over-estimate of the whole map's length in bytes.
    fn bytes(&self) -> usize {
        let mut bytes = HEADER.len() + MAP_LINE.len();
        for (f, file) in self.files.iter().enumerate() {
            bytes += 8 + file.path.len() + self.title_len(f);
            for r in roots(file) {
                bytes += max_piece_bytes(self.style.format, file, &entry(f, r));
            }
        }
        bytes
    }

    fn title_len(&self, f: usize) -> usize {
        preamble_keyword(&self.files[f], "TITLE")
            .map(|t| t.len() + 2)
            .sum::<usize>()
    }

    /// The map within `budget` tokens: the most recently changed files
    /// whole, the others left out.
    fn fit(&self, budget: usize, modified: &[i64], count: &dyn Fn(&str) -> usize) -> Rendered {
        let n = self.files.len();
        // Everything, if it fits: a token is at least a byte, and rarely
        // more than 16.
        let bytes = self.bytes();
        if bytes <= budget {
            return self.emit(None, None);
        }
        if bytes <= budget.saturating_mul(16) {
            let full = self.emit(None, None);
            if count(&full.text) <= budget {
                return full;
            }
        }
        let fixed = count(HEADER) + count(MAP_LINE);
        // Room for the closing line when whole files are left out.
        let reserve = count(&omitted_line(n as u32, 0));
        if fixed + reserve > budget {
            return Rendered::default();
        }
        let ranking = Ranking::of(self.files, self.base, modified);
        let order = &ranking.order;
        let mut keep = vec![Keep::Nothing; n];
        let mut kept: Vec<usize> = Vec::new();
        let mut used = fixed + reserve;
        let mut scratch = String::new();
        for &f in order {
            scratch.clear();
            self.block(f, Keep::Whole, &mut scratch, &mut Vec::new());
            let cost = count(&scratch);
            if used + cost <= budget {
                used += cost;
                keep[f] = Keep::Whole;
                kept.push(f);
                continue;
            }
            if kept.is_empty() {
                // Not even the most recent file fits whole: its entry and
                // the first headlines that fit (with room for a closing
                // line that says so).
                scratch.clear();
                self.file_entry(f, &mut scratch);
                let mut cost = count(&scratch);
                used = used - reserve + count(&omitted_line(n as u32, self.headlines[f]));
                if used + cost <= budget {
                    let mut shown = 0u32;
                    for r in roots(&self.files[f]) {
                        scratch.clear();
                        self.headline(f, r, &mut scratch);
                        let more = count(&scratch);
                        if used + cost + more > budget {
                            break;
                        }
                        cost += more;
                        shown += 1;
                    }
                    keep[f] = Keep::First(shown);
                    kept.push(f);
                }
            }
            break;
        }
        // The pieces' counts add up to the text's, but the budget must
        // hold whatever the tokenizer does: check the whole, and give up
        // the last kept file (or, of the only one, headlines) until it
        // does.
        let why = |f: usize| ranking.why(f);
        loop {
            let out = self.emit(Some(&keep), Some(&why));
            if count(&out.text) <= budget {
                return out;
            }
            let Some(&last) = kept.last() else {
                return Rendered::default();
            };
            match keep[last] {
                Keep::Whole if kept.len() > 1 => keep[last] = Keep::Nothing,
                Keep::Whole => keep[last] = Keep::First(self.headlines[last].saturating_sub(1)),
                Keep::First(k) if k > 0 => keep[last] = Keep::First(k - 1),
                _ => keep[last] = Keep::Nothing,
            }
            if keep[last] == Keep::Nothing {
                kept.pop();
            }
        }
    }
}

/// The order in which the map keeps files under a budget, and why.
struct Ranking {
    /// Files, the first kept first.
    order: Vec<usize>,
    /// Each file's place in `order`.
    place: Vec<usize>,
    /// Each file's burst: how many files were changed with it (itself
    /// included; 0 for a file without a time).
    burst: Vec<usize>,
    /// Each file's open tasks and headlines, and whether it is named like
    /// the collection's index.
    open: Vec<u32>,
    headlines: Vec<u32>,
    index: Vec<bool>,
}

impl Ranking {
    /// Most recently changed first (files without a time last); among
    /// files changed together ([`BURST_SECONDS`]), the collection's index
    /// first (the shallowest such file first), then more open tasks, then
    /// more headlines, then path order.
    fn of(files: &[FileView<'_>], base: usize, modified: &[i64]) -> Self {
        let n = files.len();
        let time = |f: usize| modified.get(f).copied().filter(|&t| t > 0);
        // Bursts: files sorted by time, cut where the gap is larger than a
        // burst's; each file gets its burst's newest time.
        let mut by_time: Vec<usize> = (0..n).filter(|&f| time(f).is_some()).collect();
        by_time.sort_by_key(|&f| std::cmp::Reverse(time(f)));
        let mut burst_time = vec![i64::MIN; n];
        let mut burst_id = vec![usize::MAX; n];
        let mut sizes: Vec<usize> = Vec::new();
        let mut previous: Option<i64> = None;
        let mut newest = i64::MIN;
        for &f in &by_time {
            let t = time(f).unwrap_or(i64::MIN);
            if previous.is_none_or(|p| p - t > BURST_SECONDS) {
                newest = t;
                sizes.push(0);
            }
            previous = Some(t);
            burst_time[f] = newest;
            burst_id[f] = sizes.len() - 1;
            *sizes.last_mut().unwrap_or(&mut 0) += 1;
        }
        let open: Vec<u32> = files
            .iter()
            .map(|file| {
                file.index
                    .objects
                    .iter()
                    .filter(|o| o.todo.len > 0 && !o.done)
                    .count() as u32
            })
            .collect();
        let headlines: Vec<u32> = files.iter().map(|file| file.len() as u32).collect();
        let depth = |f: usize| {
            let path = files[f].path.as_str();
            path.get(base..).unwrap_or(path).matches('/').count()
        };
        let index: Vec<bool> = files
            .iter()
            .map(|file| {
                let name = file_name(file.path.as_str());
                INDEX_NAMES.iter().any(|i| name.eq_ignore_ascii_case(i))
            })
            .collect();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&f| {
            (
                std::cmp::Reverse(burst_time[f]),
                !index[f],
                if index[f] { depth(f) } else { 0 },
                std::cmp::Reverse(open[f]),
                std::cmp::Reverse(headlines[f]),
                f,
            )
        });
        let mut place = vec![0; n];
        for (k, &f) in order.iter().enumerate() {
            place[f] = k;
        }
        let burst = (0..n)
            .map(|f| sizes.get(burst_id[f]).copied().unwrap_or(0))
            .collect();
        Self {
            order,
            place,
            burst,
            open,
            headlines,
            index,
        }
    }

    /// Why file `f` was kept, for `--explain`.
    fn why(&self, f: usize) -> String {
        let place = self.place[f] + 1;
        let together = match self.burst[f] {
            0 => return format!("kept {}: no modification time known", ordinal(place)),
            1 => {
                return format!(
                    "kept {}: changed more recently than the files after it",
                    ordinal(place)
                );
            }
            n => format!("changed together with {} other files", n - 1),
        };
        let mut because = Vec::new();
        if self.index[f] {
            because.push("named like the collection's index".to_owned());
        }
        because.push(format!(
            "{} open task{}",
            self.open[f],
            if self.open[f] == 1 { "" } else { "s" }
        ));
        because.push(format!(
            "{} headline{}",
            self.headlines[f],
            if self.headlines[f] == 1 { "" } else { "s" }
        ));
        format!(
            "kept {}: {together}; {}",
            ordinal(place),
            because.join(", ")
        )
    }
}

/// `1st`, `2nd`, `3rd`, `4th`, … `11th`, `21st`.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The entry of top-level headline `i` of file `f` in the map.
fn entry(f: usize, i: u32) -> Entry {
    Entry {
        file: f as u32,
        index: i,
        depth: 2,
        reason: Reason::Map,
        parent: NONE,
        project: None,
    }
}

/// The closing line of a map the budget cut: `files` left out whole (the
/// least recently changed), `headlines` left out of the files shown.
fn omitted_line(files: u32, headlines: u32) -> String {
    let mut line = String::from("[… ");
    if files > 0 {
        let _ = write!(
            line,
            "{files} older file{}",
            if files == 1 { "" } else { "s" }
        );
        if headlines > 0 {
            line.push_str(" and ");
        }
    }
    if headlines > 0 {
        let _ = write!(
            line,
            "{headlines} headline{}",
            if headlines == 1 { "" } else { "s" }
        );
    }
    line.push_str(" omitted]\n");
    line
}

/// Bytes of every path of `files` that name their common folder (up to
/// and including its last `/`): the map names files below it.
pub(crate) fn common_dir(files: &[FileView<'_>]) -> usize {
    let Some(first) = files.first().map(|f| f.path.as_str()) else {
        return 0;
    };
    let mut len = first.rfind('/').map_or(0, |at| at + 1);
    for file in &files[1..] {
        let path = file.path.as_bytes();
        while len > 0 && path.get(..len) != Some(&first.as_bytes()[..len]) {
            len = first[..len - 1].rfind('/').map_or(0, |at| at + 1);
        }
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closing_line_says_what_was_left_out() {
        assert_eq!(omitted_line(3, 0), "[… 3 older files omitted]\n");
        assert_eq!(
            omitted_line(1, 4),
            "[… 1 older file and 4 headlines omitted]\n"
        );
        assert_eq!(omitted_line(0, 1), "[… 1 headline omitted]\n");
    }

    use foveal_sdk::testing::TestMemex;

    /// Files that were all written at once (a checkout): `big` has the
    /// most headlines, `tasks` the most open tasks, `README.org` is the
    /// index; `a`, first in path order, has one headline.
    fn checkout() -> TestMemex {
        let mut big = String::new();
        for k in 0..12 {
            big.push_str(&format!("* Note {k}\n"));
        }
        TestMemex::new()
            .with_file("notes/a.org", "* Alone\n")
            .with_file("notes/big.org", &big)
            .with_file("notes/sub/README.org", "* Deep index\n")
            .with_file(
                "notes/README.org",
                "#+TITLE: Start here\n* Areas\n* Inbox\n",
            )
            .with_file(
                "notes/tasks.org",
                "* TODO One\n* TODO Two\n* TODO Three\n* DONE Four\n",
            )
    }

    fn render_map(memex: &TestMemex, budget: usize, modified: Vec<i64>) -> Rendered {
        let view = memex.view();
        let view = view.as_view();
        let options = Options {
            budget: Some(budget),
            modified,
            explain: true,
            ..Options::default()
        };
        let style = Style::new(&view, &options);
        render(view.files.as_slice(), &style, &options, &|t: &str| {
            t.len() / 4
        })
    }

    #[test]
    fn under_a_budget_files_changed_together_keep_the_index_then_open_tasks_then_headlines() {
        let memex = checkout();
        // All five changed within a second.
        let rendered = render_map(&memex, 62, vec![1_700_000_000; 5]);
        assert!(
            rendered.text.contains("* README.org: Start here\n"),
            "{}",
            rendered.text
        );
        assert!(!rendered.text.contains("Alone"), "{}", rendered.text);
        let ranking = Ranking::of(
            memex.view().as_view().files.as_slice(),
            "notes/".len(),
            &[
                1_700_000_000,
                1_700_000_001,
                1_700_000_000,
                1_700_000_002,
                1_700_000_000,
            ],
        );
        // README.org, sub/README.org, tasks.org (3 open), big.org (12
        // headlines), a.org.
        assert_eq!(ranking.order, [3, 2, 4, 1, 0]);
        let why = |f: u32| {
            rendered
                .files
                .iter()
                .find(|(file, _)| *file == f)
                .map(|(_, w)| w.as_str())
        };
        assert_eq!(
            why(3).unwrap(),
            "kept 1st: changed together with 4 other files; named like the collection's index, 0 open tasks, 2 headlines"
        );
        // A file changed later than the burst comes first, whatever it is.
        let ranking = Ranking::of(
            memex.view().as_view().files.as_slice(),
            "notes/".len(),
            &[
                1_700_000_100,
                1_700_000_000,
                1_700_000_000,
                1_700_000_000,
                1_700_000_000,
            ],
        );
        assert_eq!(ranking.order, [0, 3, 2, 4, 1]);
        assert_eq!(
            ranking.why(0),
            "kept 1st: changed more recently than the files after it"
        );
    }

    #[test]
    fn ordinals_read_as_english() {
        let all: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111]
            .map(ordinal)
            .to_vec();
        assert_eq!(
            all,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st",
                "111th"
            ]
        );
    }

    #[test]
    fn paths_are_named_below_their_common_folder() {
        let index = foveal_sdk::memex::FileIndex::default();
        let view = |path: &'static str| FileView {
            path: path.into(),
            text: "".into(),
            index: &index,
        };
        let files = [view("/m/a.org"), view("/m/sub/b.org"), view("/m/ab/c.org")];
        assert_eq!(common_dir(&files), "/m/".len());
        let files = [view("/m/sub/a.org"), view("/m/sub2/b.org")];
        assert_eq!(common_dir(&files), "/m/".len());
        assert_eq!(common_dir(&[view("/m/sub/a.org")]), "/m/sub/".len());
        assert_eq!(common_dir(&[view("a.org"), view("b.org")]), 0);
    }
}
