//! The awareness skill on the 100k memex, through the real library and the
//! registry: one `components` call with the focus from the generator's
//! `focus.txt` (the full semantic scan included), and `@personal` private.
//!
//! ```sh
//! cargo build --release --workspace && cargo bench -p foveal --bench awareness
//! ```

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use abi_stable::std_types::ROption;
use criterion::{Criterion, criterion_group, criterion_main};
use foveal::memex::Memex;
use foveal::memex::privacy::PrivacyTags;
use foveal::memex::view::SnapshotView;
use foveal::registry::{PluginDir, Registry, RegistryOptions, hooks};
use foveal_sdk::{ComponentsRequest, SignalKind};

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
    let prepared = SnapshotView::new(&snapshot, &privacy);
    let files = prepared.file_views();
    let view = prepared.view_of(&files);
    let request = ComponentsRequest {
        signal: SignalKind::USER,
        focus: ROption::RSome(focus.as_str().into()),
        budget_tokens: ROption::RNone,
        config_json: "{}".into(),
        memex: &view,
    };
    let skills = registry.snapshot();
    let slot = skills.get("awareness").unwrap();
    let out = slot.call(hooks::COMPONENTS, |f| f(&request)).unwrap();
    eprintln!(
        "awareness output on 100k: {} bytes, {} visible objects",
        out[0].content.len(),
        files.iter().map(|f| f.len()).sum::<usize>()
    );

    let mut group = c.benchmark_group("awareness_100k");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("render_full_scan", |b| {
        b.iter(|| black_box(slot.call(hooks::COMPONENTS, |f| f(black_box(&request)))))
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
