//! The last door (`foveal::egress::Gate`) on the 100k benchmark memex,
//! `@personal` private:
//!
//! - `gate_100k/first_build`: a fresh gate's first body — the private-text
//!   matcher built from nothing (fragments gathered, checked against the
//!   visible text, automaton built).
//! - `gate_100k/after_small_file_edit`: the next generation after an edit to
//!   a small file beside the 100k one: only that file's work is redone.
//! - `gate_100k/clean_awareness_output`: checking the context section the
//!   awareness skill renders for the generator's focus (matcher cached).
//! - `gate_100k/clean_awareness_output_memoised`: the same section again,
//!   as each cycle sees it (`prompt::GateMemo`, by allocation).
//! - `gate_100k/clean_200kB_of_the_memex`: checking 200 kB of the memex's own
//!   text, full of private text (matcher cached).
//!
//! Before timing, it prints how many passages the gate removes from the
//! awareness output — every one would be a false positive, since the skill
//! sees only visible objects — and the over-redaction (issue 28, F6): the
//! project's docs (`docs/*.md`), its README and the five seed documents
//! (`../shared/seeds/*.txt`), each sent as a user message (how many of its
//! words the gate takes) and each of its paragraphs as a model reply
//! (withheld whole when the gate finds anything in it), against
//!
//! - a diary memex whose private headlines are `Health`, `Family`,
//!   `Finances`, `Journal`, `Session`, `Therapy` and org-journal date
//!   headings (`** 2025-01-14 Tuesday`, a day's file `20250116.org`), with
//!   planning lines, a logbook and a half-written private file (`over-redaction,
//!   one-word headlines and dates`), and
//! - the 100k benchmark memex (`over-redaction, 100k memex`).
//!
//! They quote nothing of either memex, so every word taken and every reply
//! withheld is over-redaction. The seed documents alone on the 100k memex
//! are printed too (`over-redaction, seeds on the 100k memex`), the row
//! docs/security.md had before.
//!
//! ```sh
//! cargo build --release --workspace && cargo bench -p foveal --bench egress
//! ```

use std::hint::black_box;
use std::time::Duration;

mod common;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use foveal::context::ContextRequest;
use foveal::egress::Gate;
use foveal::memex::Memex;
use foveal::memex::MemexSnapshot;
use foveal::memex::privacy::PrivacyTags;
use foveal::registry::Snapshot;

fn gate() -> Gate {
    Gate::new(PrivacyTags::new(["@personal"]), &[], true).unwrap()
}

/// The diary of the over-redaction run: one-word private headlines,
/// org-journal date headings (in a journal file and as a day's file),
/// planning lines, a logbook, and a private file caught half-written (a
/// drawer without `:END:`: all its text counts as private).
const DIARY: &[(&str, &str)] = &[
    ("work.org", "* Work :project:\nShip the launch.\n"),
    (
        "private.org",
        "* Health :@personal:\n\
         Blood pressure 150 over 95 at the clinic; the cardiologist wants another test.\n\
         * Family :@personal:\n\
         ** Session\n\
         Talked with Mum about the house and who keeps the car.\n\
         * Finances :@personal:\n\
         :PROPERTIES:\n:PIN: 4471\n:END:\n\
         Pay the loan back to Ann before the summer.\n\
         * Therapy :@personal:\n\
         Weekly with Dr Okafor, Thursdays at six.\n",
    ),
    (
        "journal.org",
        "* Journal :@personal:\n\
         ** 2025-01-14 Tuesday\n\
         SCHEDULED: <2025-01-14 Tue 10:00>\n\
         :LOGBOOK:\n\
         CLOCK: [2025-01-14 Tue 10:00]--[2025-01-14 Tue 11:00] =>  1:00\n\
         :END:\n\
         *** 10:30 Morning pages\n\
         Could not sleep again; the biopsy results come on Friday.\n\
         ** 2025-01-15 Wednesday\n\
         *** 09:00 Session\n",
    ),
    (
        "20250116.org",
        "#+FILETAGS: :@personal:\n#+TITLE: Journal\n* Thursday, 01/16/25\n** 08:15 Walk\nCold.\n",
    ),
    (
        "half.org",
        "#+FILETAGS: :@personal:\n* Diary\n:PROPERTIES:\n:MOOD: low\n* Tuesday\nSlept badly.\n",
    ),
];

/// What the gate took from public text that quotes nothing private.
#[derive(Debug, Default)]
struct OverRedaction {
    words: usize,
    redacted: usize,
    replies: usize,
    withheld: usize,
    /// The first replies withheld, as the gate left them: what to look
    /// at when the count is not 0.
    examples: Vec<String>,
}

impl OverRedaction {
    /// The line the bench prints; docs/security.md quotes its numbers.
    fn line(&self, what: &str) -> String {
        format!(
            "over-redaction, {what}: user messages: {} of {} words redacted ({:.3} %); \
             model replies: {} of {} withheld",
            self.redacted,
            self.words,
            100.0 * self.redacted as f64 / self.words.max(1) as f64,
            self.withheld,
            self.replies,
        ) + &self
            .examples
            .iter()
            .map(|e| format!("\n  withheld: {e}"))
            .collect::<String>()
    }
}

fn words(text: &str) -> usize {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .count()
}

/// Each document of `corpus` sent as a user message (the words the gate
/// takes from it) and each of its paragraphs as a model reply (withheld
/// whole when the gate finds anything in it), through a gate without
/// secret patterns: what it takes is private text alone (the docs quote
/// example keys on purpose).
fn over_redaction(snapshot: &MemexSnapshot, corpus: &[String]) -> OverRedaction {
    let gate = Gate::new(PrivacyTags::new(["@personal"]), &[], false).unwrap();
    let skills = Snapshot::default();
    let mut out = OverRedaction::default();
    for text in corpus {
        let cleaned = gate.clean(text, snapshot, &skills).unwrap();
        // Each passage became one marker of two words; the docs quote the
        // marker itself, so it is not searched for.
        out.words += words(text);
        out.redacted +=
            (words(text) + 2 * cleaned.report.private).saturating_sub(words(&cleaned.text));
        for reply in text.split("\n\n").filter(|p| !p.trim().is_empty()) {
            out.replies += 1;
            let cleaned = gate.clean(reply, snapshot, &skills).unwrap();
            if cleaned.report.total() > 0 {
                out.withheld += 1;
                if out.examples.len() < 3 {
                    let shown: String = cleaned.text.chars().take(300).collect();
                    out.examples.push(shown.replace('\n', " "));
                }
            }
        }
    }
    out
}

/// The texts of the files ending in `.ext` in `dir`, by name.
fn texts(dir: &std::path::Path, ext: &str) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    names.sort();
    names
        .iter()
        .map(|path| std::fs::read_to_string(path).unwrap())
        .collect()
}

fn egress(c: &mut Criterion) {
    let shadow = tempfile::tempdir().unwrap();
    let registry = common::first_party_registry(shadow.path(), &["awareness"]);
    let dir = common::data(100_000);
    let focus = common::focus(&dir);
    let work = tempfile::tempdir().unwrap();
    let big = work.path().join("memex.org");
    std::fs::copy(dir.join("memex.org"), &big).unwrap();
    let small = work.path().join("small.org");
    std::fs::write(&small, "* Inbox :project:\n** TODO one :@personal:\n").unwrap();
    let memex = Memex::open(&[big.clone(), small.clone()]).unwrap();
    let small = small.canonicalize().unwrap();
    let snapshot = memex.snapshot();
    let privacy = PrivacyTags::new(["@personal"]);
    let request = ContextRequest {
        focus: Some(focus),
        ..ContextRequest::default()
    };
    let section = foveal::context::render(&registry.snapshot(), &snapshot, &privacy, &request);
    let output = section.text().to_owned();
    let no_skills = Snapshot::default();
    let sized = gate();
    let cleaned = sized
        .clean_as(
            &output,
            foveal::egress::Form::Outline,
            &snapshot,
            &no_skills,
        )
        .unwrap();
    let (keys, bytes) = sized.matcher_size();
    eprintln!(
        "awareness output: {} bytes; the gate removes {} private passages; \
         the matcher holds {keys} keys in {:.1} MiB",
        output.len(),
        cleaned.report.private,
        bytes as f64 / (1024.0 * 1024.0),
    );
    // Each would be a false positive: show where (this is visible text).
    for (at, _) in cleaned.text.match_indices("[REDACTED private]").take(5) {
        let from = cleaned.text[..at].rfind('\n').map_or(0, |i| i + 1);
        let to = cleaned.text[at..]
            .find('\n')
            .map_or(cleaned.text.len(), |i| at + i);
        eprintln!("  false positive: {}", &cleaned.text[from..to]);
    }
    // Over-redaction (issue 28, F6): public text the gate should leave
    // whole, as user messages and as model replies.
    let root = common::workspace();
    let seeds = texts(&root.join("../shared/seeds"), "txt");
    let mut corpus = texts(&root.join("docs"), "md");
    corpus.push(std::fs::read_to_string(root.join("README.md")).unwrap());
    corpus.extend(seeds.iter().cloned());
    let diary_dir = tempfile::tempdir().unwrap();
    for (name, text) in DIARY {
        std::fs::write(diary_dir.path().join(name), text).unwrap();
    }
    let diary_memex = Memex::open(&[diary_dir.path().to_path_buf()]).unwrap();
    let diary = diary_memex.snapshot();
    // Positive controls: the diary is read (the half-written file failed
    // and counts as private) and its private text is found.
    assert_eq!(diary.failed().len(), 1, "half.org should fail to load");
    for quote in [
        "she said the biopsy results come on Friday",
        "Talked with Mum about the house",
    ] {
        let control = gate().clean(quote, &diary, &no_skills).unwrap();
        assert!(
            control.report.private > 0,
            "the diary's private text is not found: the run measures nothing"
        );
    }
    eprintln!(
        "{}",
        over_redaction(&diary, &corpus).line("one-word headlines and dates")
    );
    eprintln!("{}", over_redaction(&snapshot, &corpus).line("100k memex"));
    eprintln!(
        "{}",
        over_redaction(&snapshot, &seeds).line("seeds on the 100k memex")
    );
    let text = std::fs::read_to_string(&big).unwrap();
    let mut end = 200_000;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let memex_text = &text[..end];

    let mut group = c.benchmark_group("gate_100k");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("first_build", |b| {
        b.iter_batched(
            gate,
            |gate| black_box(gate.clean("x", &snapshot, &no_skills).unwrap().report),
            BatchSize::PerIteration,
        )
    });
    let shared = gate();
    shared.clean("x", &memex.snapshot(), &no_skills).unwrap();
    let mut n = 0u64;
    group.bench_function("after_small_file_edit", |b| {
        b.iter_batched(
            || {
                n += 1;
                std::fs::write(
                    &small,
                    format!("* Inbox :project:\n** TODO item {n} :@personal:\n"),
                )
                .unwrap();
                memex.reload_file(&small);
                memex.snapshot()
            },
            |next| black_box(shared.clean("x", &next, &no_skills).unwrap().report),
            BatchSize::PerIteration,
        )
    });
    let snapshot = memex.snapshot();
    shared.clean("x", &snapshot, &no_skills).unwrap();
    group.bench_function("clean_awareness_output", |b| {
        b.iter(|| {
            black_box(
                shared
                    .clean_as(
                        &output,
                        foveal::egress::Form::Outline,
                        &snapshot,
                        &no_skills,
                    )
                    .unwrap()
                    .report,
            )
        })
    });
    // The same section again on the same generations: what each cycle
    // pays for the context once it was checked (the memo knows it by its
    // allocation).
    let section = foveal::prompt::Text::Shared(std::sync::Arc::from(output.as_str()));
    let mut memo = foveal::prompt::GateMemo::default();
    let mut summary = foveal::prompt::EgressSummary::default();
    memo.start(&snapshot, &no_skills);
    memo.clean(
        &shared,
        &section,
        foveal::egress::Form::Outline,
        &snapshot,
        &no_skills,
        &mut summary,
    )
    .unwrap();
    group.bench_function("clean_awareness_output_memoised", |b| {
        b.iter(|| {
            black_box(
                memo.clean(
                    &shared,
                    &section,
                    foveal::egress::Form::Outline,
                    &snapshot,
                    &no_skills,
                    &mut summary,
                )
                .unwrap()
                .is_none(),
            )
        })
    });
    group.bench_function("clean_200kB_of_the_memex", |b| {
        b.iter(|| {
            black_box(
                shared
                    .clean(memex_text, &snapshot, &no_skills)
                    .unwrap()
                    .report,
            )
        })
    });
    group.finish();
}

criterion_group!(benches, egress);
criterion_main!(benches);
