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
//! sees only visible objects — and how many words of the five seed
//! documents, sent as user messages, it removes (over-redaction: they
//! quote nothing of the memex).
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
use foveal::memex::privacy::PrivacyTags;
use foveal::registry::Snapshot;

fn gate() -> Gate {
    Gate::new(PrivacyTags::new(["@personal"]), &[], true).unwrap()
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
    let cleaned = gate()
        .clean_as(
            &output,
            foveal::egress::Form::Outline,
            &snapshot,
            &no_skills,
        )
        .unwrap();
    eprintln!(
        "awareness output: {} bytes; the gate removes {} private passages",
        output.len(),
        cleaned.report.private,
    );
    // Each would be a false positive: show where (this is visible text).
    for (at, _) in cleaned.text.match_indices("[REDACTED private]").take(5) {
        let from = cleaned.text[..at].rfind('\n').map_or(0, |i| i + 1);
        let to = cleaned.text[at..]
            .find('\n')
            .map_or(cleaned.text.len(), |i| at + i);
        eprintln!("  false positive: {}", &cleaned.text[from..to]);
    }
    // Over-redaction of what users type: the five seed documents sent as
    // user messages. They quote nothing of the memex, so every word the
    // gate takes from them is a word no private object holds as a run.
    let words = |text: &str| {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .count()
    };
    let (mut total, mut redacted) = (0usize, 0usize);
    let seeds = common::workspace().join("../shared/seeds");
    let mut names: Vec<_> = std::fs::read_dir(&seeds)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    names.sort();
    for path in names {
        let text = std::fs::read_to_string(&path).unwrap();
        let cleaned = gate().clean(&text, &snapshot, &no_skills).unwrap();
        let kept = cleaned.text.replace(foveal::egress::PRIVATE_MARKER, " ");
        total += words(&text);
        redacted += words(&text).saturating_sub(words(&kept));
    }
    eprintln!(
        "seed documents as user messages: {redacted} of {total} words redacted ({:.3} %)",
        100.0 * redacted as f64 / total.max(1) as f64
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
