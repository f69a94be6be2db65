//! The context section on the 100k memex, through the real awareness
//! library and the registry, the focus from the generator's `focus.txt` and
//! `@personal` private: uncached (the full semantic scan, no reuse), cached
//! (the host's cache), and after a one-headline edit (the skill reuses its
//! scan and unchanged text). `foveal bench awareness` measures the same on
//! any memex.
//!
//! ```sh
//! cargo build --release --workspace && cargo bench -p foveal --bench awareness
//! ```

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use foveal::context::{ContextCache, ContextRequest};
use foveal::memex::Memex;
use foveal::memex::privacy::PrivacyTags;
use foveal::memex::view::SnapshotView;
use foveal::memex::write::Edit;
use foveal::registry::{PluginDir, Registry, RegistryOptions};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn data(n: usize) -> PathBuf {
    let dir = workspace().join(format!("target/bench-data/{n}"));
    if !dir.join("memex.org").is_file() {
        let status = std::process::Command::new("python3")
            .arg(workspace().join("../shared/bench/gen_memex.py"))
            .arg(n.to_string())
            .arg("42")
            .arg(&dir)
            .status()
            .expect("python3 runs the benchmark data generator");
        assert!(status.success());
    }
    dir
}

fn awareness(c: &mut Criterion) {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let shadow = tempfile::tempdir().unwrap();
    let registry = Registry::new(RegistryOptions {
        dirs: vec![PluginDir {
            path: profile,
            first_party_only: true,
        }],
        shadow_dir: shadow.path().to_path_buf(),
        quarantine_after: 3,
        max_loads: 100,
    })
    .unwrap();
    registry.scan();
    assert!(
        registry.snapshot().get("awareness").is_some(),
        "build the skill first: cargo build --release --workspace"
    );

    let dir = data(100_000);
    let focus = std::fs::read_to_string(dir.join("focus.txt")).unwrap();
    let focus = focus.trim().to_owned();
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
