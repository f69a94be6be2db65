//! The agenda against Org's own: the corpus in `tests/agenda/corpus`, and
//! what `org-agenda-list` in batch Emacs 28 (Org 9.5) lists for it
//! (`tests/agenda/expected`, written by `tests/agenda/regenerate.sh`;
//! `emacs_lists_what_the_expected_files_hold` checks those files against a
//! live Emacs). Private subtrees are Org's business here (the memex drops
//! them; `runtime/tests/it/agenda.rs` checks that).

use std::path::{Path, PathBuf};
use std::process::Command;

use foveal_org::agenda::{self, Item, Options, skipped_tree};
use foveal_org::time::Date;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/agenda")
}

fn corpus() -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(root().join("corpus"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "org"))
        .collect();
    files.sort();
    files
}

fn cases() -> Vec<(String, u32)> {
    let mut cases: Vec<_> = std::fs::read_dir(root().join("expected"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let stem = name.strip_suffix(".tsv")?;
            let (today, days) = stem.split_once('_')?;
            Some((today.to_owned(), days.parse().ok()?))
        })
        .collect();
    cases.sort();
    cases
}

/// Our agenda, as the expected files write it (without Org's `type`).
fn ours(today: &str, days: u32) -> Vec<String> {
    let texts: Vec<String> = corpus()
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let mut items = Vec::new();
    let mut titles = Vec::new();
    for (f, text) in texts.iter().enumerate() {
        let parsed = foveal_org::parse(text).unwrap();
        for (i, h) in parsed.headlines.iter().enumerate() {
            if skipped_tree(text, &parsed.headlines, i) {
                continue;
            }
            if let Some(item) = Item::of(text, h, f as u32) {
                items.push(item);
                titles.push((
                    h.todo.as_deref().unwrap_or("").to_owned(),
                    text[h.title.start as usize..h.title.end as usize].to_owned(),
                ));
            }
        }
    }
    let today = Date::parse(today).unwrap();
    agenda::agenda(&items, today, days, &Options::default())
        .iter()
        .map(|e| {
            let (todo, title) = &titles[e.item];
            format!(
                "{}\t{}\t{}\t{}\t{}",
                e.date,
                e.kind.leader(),
                e.time_text(),
                todo,
                title
            )
        })
        .collect()
}

/// An expected file's lines, without the `type` column.
fn expected(today: &str, days: u32) -> Vec<String> {
    let text =
        std::fs::read_to_string(root().join(format!("expected/{today}_{days}.tsv"))).unwrap();
    text.lines()
        .map(|l| {
            let mut cols: Vec<&str> = l.split('\t').collect();
            cols.remove(1);
            cols.join("\t")
        })
        .collect()
}

#[test]
fn the_agenda_lists_what_orgs_agenda_lists_for_every_case() {
    let mut failures = Vec::new();
    for (today, days) in cases() {
        let (want, got) = (expected(&today, days), ours(&today, days));
        if want != got {
            let diff: Vec<String> = (0..want.len().max(got.len()))
                .filter(|&i| want.get(i) != got.get(i))
                .take(12)
                .map(|i| {
                    format!(
                        "  line {i}\n    Org:  {}\n    ours: {}",
                        want.get(i).map_or("-", |s| s),
                        got.get(i).map_or("-", |s| s)
                    )
                })
                .collect();
            failures.push(format!(
                "today {today}, {days} days ({} lines Org, {} ours):\n{}",
                want.len(),
                got.len(),
                diff.join("\n")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn emacs_lists_what_the_expected_files_hold() {
    let script = root().join("org-agenda-csv.el");
    if Command::new("emacs").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "emacs is not installed, and CI must check the agenda against it"
        );
        eprintln!("emacs is not installed: the committed expected files stand in");
        return;
    }
    for (today, days) in cases() {
        let out = Command::new("emacs")
            .args(["--batch", "-Q", "-l"])
            .arg(&script)
            .arg(&today)
            .arg(days.to_string())
            .args(corpus())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let live = String::from_utf8(out.stdout).unwrap();
        let committed =
            std::fs::read_to_string(root().join(format!("expected/{today}_{days}.tsv"))).unwrap();
        assert_eq!(live, committed, "Emacs's agenda for {today}, {days} days");
    }
}
