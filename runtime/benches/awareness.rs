//! The context section on the 100k memex, through the real awareness
//! library and the registry, the focus from the generator's `focus.txt` and
//! `@personal` private: uncached (the full semantic scan, no reuse) with
//! every project rule and with the seed's `tag` rule alone, cached (the
//! host's cache), and after a one-headline edit (the skill reuses its scan
//! and unchanged text). Also what a skill is lent of the 100k file, built
//! once per version: its visible text, and the text with the index; and the
//! map of a memex of 1,000 files without projects. `foveal bench awareness`
//! measures the same on any memex.
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
    // Every project of the benchmark memex is tagged: every rule on gives
    // the seed's outline.
    let seed = ContextRequest {
        skill_cache: false,
        ..ContextRequest {
            focus: Some(focus.clone()),
            ..ContextRequest::seed()
        }
    };
    assert_eq!(
        foveal::context::render(&skills, &snapshot, &privacy, &seed).text(),
        out.text(),
        "the benchmark memex renders differently with every project rule"
    );

    let mut group = c.benchmark_group("awareness_100k");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    // Every project rule (the default), and the seed's `tag` rule alone,
    // in turn.
    group.bench_function("uncached_full_scan", |b| {
        b.iter(|| {
            black_box(foveal::context::render(
                &skills, &snapshot, &privacy, &uncached,
            ))
        })
    });
    group.bench_function("uncached_full_scan_tag_rule_only", |b| {
        b.iter(|| black_box(foveal::context::render(&skills, &snapshot, &privacy, &seed)))
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

/// The map of a memex without projects: 1,000 files, each a title and
/// eight top-level headlines with three children (32,000 headlines, ids
/// derived), uncached, through the host as `foveal context` renders it —
/// the view, the skill's configuration with every file's modification
/// time, the hook, the map; without a budget, and within 4,000 tokens.
fn map(c: &mut Criterion) {
    let shadow = tempfile::tempdir().unwrap();
    let registry = common::first_party_registry(shadow.path(), &["awareness"]);
    let dir = tempfile::tempdir().unwrap();
    for f in 0..1000 {
        let mut org = format!("#+TITLE: Notebook {f}\n#+STARTUP: overview\n");
        for h in 0..8 {
            org.push_str(&format!("* Topic {f}.{h}\nSome text.\n"));
            for k in 0..3 {
                org.push_str(&format!("** Note {k}\nMore text.\n"));
            }
        }
        let path = dir.path().join(format!("area{}/notes{f:04}.org", f % 10));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, org).unwrap();
    }
    let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
    let snapshot = memex.snapshot();
    let privacy = PrivacyTags::new(["@personal"]);
    let skills = registry.snapshot();
    let request = ContextRequest {
        skill_cache: false,
        ..ContextRequest::default()
    };
    let out = foveal::context::render(&skills, &snapshot, &privacy, &request);
    assert!(
        out.text()
            .contains("No active projects found. The top of each file:")
    );
    eprintln!(
        "map of 1,000 files: {} bytes, {} headlines",
        out.text().len(),
        out.text().matches("\n** ").count()
    );
    let budgeted = ContextRequest {
        budget: Some(4000),
        ..request.clone()
    };
    let mut group = c.benchmark_group("awareness_map_1000_files");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("uncached", |b| {
        b.iter(|| {
            black_box(foveal::context::render(
                &skills, &snapshot, &privacy, &request,
            ))
        })
    });
    group.bench_function("uncached_budget_4000", |b| {
        b.iter(|| {
            black_box(foveal::context::render(
                &skills, &snapshot, &privacy, &budgeted,
            ))
        })
    });
    group.finish();
}

criterion_group!(benches, awareness, map);
criterion_main!(benches);
