//! The context section on the 100k memex, through the real awareness
//! library and the registry, the focus from the generator's `focus.txt` and
//! `@personal` private: uncached (the full semantic scan, no reuse), cached
//! (the host's cache), and after a one-headline edit (the skill reuses its
//! scan and unchanged text). Also what a skill is lent of the 100k file,
//! built once per version: its visible text, and the text with the index.
//! `foveal bench awareness` measures the same on any memex.
//!
//! ```sh
//! cargo build --release --workspace && cargo bench -p foveal --bench awareness
//! ```

use std::hint::black_box;
use std::time::Duration;

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use foveal::context::{ContextCache, ContextRequest};
use foveal::memex::Memex;
use foveal::memex::privacy::PrivacyTags;
use foveal::memex::view::SnapshotView;
use foveal::memex::write::Edit;

fn awareness(c: &mut Criterion) {
    let shadow = tempfile::tempdir().unwrap();
    let registry = common::first_party_registry(shadow.path(), &["awareness"]);
    let dir = common::data(100_000);
    let focus = common::focus(&dir);
    let memex = Memex::open(&[dir.join("memex.org")]).unwrap();
    let snapshot = memex.snapshot();
    let privacy = PrivacyTags::new(["@personal"]);
    let skills = registry.snapshot();
    let request = ContextRequest {
        focus: Some(focus.clone()),
        ..ContextRequest::default()
    };
    let uncached = ContextRequest {
        skill_cache: false,
        ..request.clone()
    };
    // Two versions of the memex one body edit apart, indexes built (the
    // memex builds them when it publishes a file).
    let plan = memex
        .plan(
            &snapshot,
            &focus,
            &Edit::AppendBody {
                text: "An edit.".to_owned(),
            },
        )
        .unwrap();
    let edited = plan.preview(&snapshot);
    drop(SnapshotView::new(&edited, &privacy));
    drop(SnapshotView::new(&snapshot, &privacy));
    let out = foveal::context::render(&skills, &snapshot, &privacy, &request);
    eprintln!("awareness output on 100k: {} bytes", out.text().len());

    let mut group = c.benchmark_group("awareness_100k");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("uncached_full_scan", |b| {
        b.iter(|| {
            black_box(foveal::context::render(
                &skills, &snapshot, &privacy, &uncached,
            ))
        })
    });
    let cache = ContextCache::default();
    group.bench_function("cached", |b| {
        b.iter(|| black_box(cache.section(&skills, &snapshot, &privacy, black_box(&request))))
    });
    // Each render sees another generation than the one before, one
    // headline's body apart: what a render after an edit costs.
    let versions = [&snapshot, &edited];
    let mut turn = 0usize;
    group.bench_function("after_edit", |b| {
        b.iter(|| {
            turn += 1;
            black_box(foveal::context::render(
                &skills,
                versions[turn % 2],
                &privacy,
                &request,
            ))
        })
    });
    // Once per file version: the visible text alone, and with the index.
    let file = snapshot.files().next().unwrap();
    group.bench_function("visible_text", |b| {
        b.iter(|| black_box(foveal::memex::view::visible_text(file, &privacy).map(|t| t.len())))
    });
    group.bench_function("prepare_visible_text_and_index", |b| {
        b.iter(|| {
            black_box(
                foveal::memex::view::prepare(file, &privacy)
                    .index
                    .objects
                    .len(),
            )
        })
    });
    group.bench_function("prepare_view_cached_indexes", |b| {
        b.iter(|| {
            let prepared = SnapshotView::new(&snapshot, &privacy);
            black_box(prepared.file_views().len())
        })
    });
    group.finish();
}

criterion_group!(benches, awareness);
criterion_main!(benches);
