//! Benchmarks of the memex (issue targets in parentheses):
//!
//! - `memex_load/{10k,100k}`: loading the generated memex, one core
//!   (100k headlines, 84 MB of Org: ≤ 1 s).
//! - `memex_republish/*`: publishing after an edit to one file — a small
//!   file beside the 100k one, the 100k file itself (proportional to
//!   that file), and one of 10,000 small files (independent of the
//!   others).
//! - `memex_query/*`: queries by tag on the 100k memex (proportional to the
//!   result).
//! - `memex_watch/*`: from an external write to the new generation
//!   (≤ 200 ms).
//!
//! The data comes from `../shared/bench/gen_memex.py` and is generated on
//! first use into `target/bench-data/` (git-ignored):
//!
//! ```sh
//! cargo bench -p foveal --bench memex
//! ```

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

mod common;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use foveal::memex::{Memex, Query};

/// `target/bench-data/<n>/memex.org`, generated if missing.
fn data(n: usize) -> PathBuf {
    common::data(n).join("memex.org")
}

fn load(c: &mut Criterion) {
    let mut group = c.benchmark_group("memex_load");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for (name, n) in [("10k", 10_000), ("100k", 100_000)] {
        let file = data(n);
        group.bench_function(name, |b| {
            b.iter(|| black_box(Memex::open(std::slice::from_ref(&file)).unwrap()))
        });
    }
    group.finish();
}

fn republish(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    // A copy of the 100k file, edited between iterations.
    let big = dir.path().join("big.org");
    std::fs::copy(data(100_000), &big).unwrap();
    let mut big_text = std::fs::read_to_string(&big).unwrap();
    let small = dir.path().join("small.org");
    std::fs::write(&small, "* Inbox :project:\n** TODO one\n").unwrap();
    let memex = Memex::open(&[big.clone(), small.clone()]).unwrap();
    let small = small.canonicalize().unwrap();
    let big = big.canonicalize().unwrap();
    let mut group = c.benchmark_group("memex_republish");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    let mut n = 0u64;
    group.bench_function("small_file_beside_100k", |b| {
        b.iter_batched(
            || {
                n += 1;
                std::fs::write(&small, format!("* Inbox :project:\n** TODO item {n}\n")).unwrap();
            },
            |()| black_box(memex.reload_file(&small)),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("the_100k_file", |b| {
        b.iter_batched(
            || {
                // One byte more or less at the end: a real change each time.
                if big_text.ends_with("\n\n") {
                    big_text.pop();
                } else {
                    big_text.push('\n');
                }
                std::fs::write(&big, &big_text).unwrap();
            },
            |()| black_box(memex.reload_file(&big)),
            BatchSize::PerIteration,
        )
    });
    group.finish();

    // Many files (an org-roam memex): a small edit among ten thousand.
    let many = tempfile::tempdir().unwrap();
    for f in 0..10_000 {
        std::fs::write(
            many.path().join(format!("note-{f:05}.org")),
            format!("* Note {f} :roam:\nA line of note {f}.\n** TODO follow up {f}\n"),
        )
        .unwrap();
    }
    let memex = Memex::open(&[many.path().to_path_buf()]).unwrap();
    let edited = many.path().join("note-05000.org").canonicalize().unwrap();
    let mut group = c.benchmark_group("memex_republish");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("one_of_10k_files", |b| {
        b.iter_batched(
            || {
                n += 1;
                std::fs::write(&edited, format!("* Note :roam:\n** TODO item {n}\n")).unwrap();
            },
            |()| black_box(memex.reload_file(&edited)),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn query(c: &mut Criterion) {
    let memex = Memex::open(&[data(100_000)]).unwrap();
    let snapshot = memex.snapshot();
    let mut group = c.benchmark_group("memex_query");
    for tag in ["project", "@personal"] {
        let count = snapshot
            .query(&Query {
                tag: Some(tag.into()),
                ..Query::default()
            })
            .len();
        group.bench_function(format!("tag_{tag}_{count}_results"), |b| {
            b.iter(|| {
                black_box(snapshot.query(&Query {
                    tag: Some(black_box(tag).into()),
                    ..Query::default()
                }))
            })
        });
    }
    group.bench_function("tag_absent_0_results", |b| {
        b.iter(|| {
            black_box(snapshot.query(&Query {
                tag: Some("no-such-tag".into()),
                ..Query::default()
            }))
        })
    });
    let id = snapshot.objects().nth(50_000).unwrap().id().to_owned();
    group.bench_function("lookup_by_id", |b| {
        b.iter(|| black_box(snapshot.get(black_box(&id)).is_some()))
    });
    group.finish();
}

fn watch(c: &mut Criterion) {
    use foveal::memex::watch::{DEFAULT_QUIET, MemexWatcher};
    use std::sync::Arc;
    use std::time::Instant;

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let file = root.join("inbox.org");
    std::fs::write(&file, "* Inbox\n").unwrap();
    let memex = Arc::new(Memex::open(std::slice::from_ref(&root)).unwrap());
    let _watcher = MemexWatcher::start(Arc::clone(&memex), DEFAULT_QUIET).unwrap();
    let mut group = c.benchmark_group("memex_watch");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    let mut n = 0u64;
    group.bench_function("external_write_to_new_generation", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                n += 1;
                let before = memex.snapshot().generation();
                let started = Instant::now();
                std::fs::write(&file, format!("* Inbox\n** TODO item {n}\n")).unwrap();
                while memex.snapshot().generation() == before {
                    std::thread::sleep(Duration::from_micros(200));
                    assert!(
                        started.elapsed() < Duration::from_secs(5),
                        "edit never published"
                    );
                }
                total += started.elapsed();
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, load, republish, query, watch);
criterion_main!(benches);
