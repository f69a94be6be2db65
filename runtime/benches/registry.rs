//! Benchmarks of the skill machinery (issue targets in parentheses):
//!
//! - `hook_call/*`: the cost of calling a hook that does no work — directly
//!   through the function pointer, and through the registry's call path
//!   (overhead beyond the hook's own work: ≤ 5 ns).
//! - `load/counter`: loading one skill library: copy, map, ABI checks, init
//!   (reported).
//! - `reload/rename_to_serving`: from the `rename` of a new build into a
//!   watched plugins folder to the registry serving it (≤ 2 ms).
//!
//! The fixture libraries must be built first, in the same profile:
//!
//! ```sh
//! cargo build --release --workspace && cargo bench -p foveal --bench registry
//! ```

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use abi_stable::std_types::ROption;
use criterion::{Criterion, criterion_group, criterion_main};
use foveal::loader::Loader;
use foveal::registry::{PluginDir, Registry, RegistryOptions, hooks};
use foveal::watcher::PluginWatcher;
use foveal_sdk::{ComponentsRequest, SignalKind};

fn fixture(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(Path::parent).unwrap();
    let path = profile.join(format!(
        "{}foveal_fixture_{}.{}",
        std::env::consts::DLL_PREFIX,
        name.replace('-', "_"),
        std::env::consts::DLL_EXTENSION
    ));
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --release --workspace` first",
        path.display()
    );
    path
}

fn install(library: &Path, dir: &Path, name: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::copy(library, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

fn lib_name(stem: &str) -> String {
    format!(
        "{}{stem}.{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_EXTENSION
    )
}

fn request() -> ComponentsRequest<'static> {
    ComponentsRequest {
        signal: SignalKind::USER,
        focus: ROption::RNone,
        budget_tokens: ROption::RNone,
        config_json: "{}".into(),
        memex: &foveal_sdk::memex::MemexView::EMPTY,
        explain: false,
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    plugins: PathBuf,
    registry: Arc<Registry>,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    install(&fixture("counter-v1"), &plugins, &lib_name("counter"));
    let registry = Arc::new(
        Registry::new(RegistryOptions {
            dirs: vec![PluginDir {
                path: plugins.clone(),
                first_party_only: false,
            }],
            shadow_dir: dir.path().join("shadow"),
            quarantine_after: 3,
            max_loads: 1_000_000,
            allow: foveal::trust::AllowList::Any,
            hook_timeout: std::time::Duration::from_millis(
                foveal::registry::DEFAULT_HOOK_TIMEOUT_MS,
            ),
            isolation: foveal::isolation::IsolationPolicy::in_process(),
        })
        .unwrap(),
    );
    registry.scan();
    Setup {
        _dir: dir,
        plugins,
        registry,
    }
}

fn hook_call(c: &mut Criterion) {
    let setup = setup();
    let request = request();
    let mut group = c.benchmark_group("hook_call");

    let direct_dir = tempfile::tempdir().unwrap();
    let loader = Loader::new(direct_dir.path().to_path_buf(), 10).unwrap();
    let loaded = loader.load(&fixture("counter-v1")).unwrap();
    let components = loaded.module().unwrap().components().unwrap();
    group.bench_function("direct_fn_pointer", |b| {
        b.iter(|| black_box(components(black_box(&request))))
    });

    let snapshot = setup.registry.snapshot();
    let slot = snapshot.get("counter").unwrap();
    group.bench_function("registry_slot", |b| {
        b.iter(|| black_box(slot.call_inline(hooks::COMPONENTS, |f| f(black_box(&request)))))
    });
    group.bench_function("registry_snapshot_by_name", |b| {
        b.iter(|| {
            black_box(
                snapshot.call_inline(black_box("counter"), hooks::COMPONENTS, |f| {
                    f(black_box(&request))
                }),
            )
        })
    });
    group.bench_function("registry_current_by_name", |b| {
        b.iter(|| {
            black_box(setup.registry.peek().call_inline(
                black_box("counter"),
                hooks::COMPONENTS,
                |f| f(black_box(&request)),
            ))
        })
    });
    // The host's path: the call hops to the caller's companion thread and
    // back, with a deadline (an invoke with owned arguments).
    group.bench_function("registry_slot_on_the_companion", |b| {
        b.iter(|| black_box(slot.call(hooks::INVOKE, |f| f("ping".into(), "{}".into()))))
    });
    group.finish();
}

fn load(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let loader = Loader::new(dir.path().to_path_buf(), 1_000_000).unwrap();
    let library = fixture("counter-v1");
    let mut group = c.benchmark_group("load");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(2));
    group.bench_function("counter", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                // One load at a time, as at start or on a reload; not a
                // stress of sustained disk writes.
                std::thread::sleep(Duration::from_millis(5));
                let started = Instant::now();
                black_box(loader.load(&library).unwrap());
                total += started.elapsed();
            }
            total
        })
    });
    group.finish();
}

fn reload(c: &mut Criterion) {
    let setup = setup();
    let _watcher =
        PluginWatcher::start(Arc::clone(&setup.registry), Duration::from_millis(100)).unwrap();
    let builds = [fixture("counter-v2"), fixture("counter-v1")];
    let name = lib_name("counter");
    let mut turn = 0usize;
    let mut group = c.benchmark_group("reload");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(3));
    group.bench_function("rename_to_serving", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let build = &builds[turn % 2];
                turn += 1;
                // A pause between installs, as between two real builds: the
                // measure is one reload, not sustained disk throughput.
                std::thread::sleep(Duration::from_millis(20));
                let tmp = setup.plugins.join(".counter.tmp");
                std::fs::copy(build, &tmp).unwrap();
                let before = setup.registry.peek().generation();
                let started = Instant::now();
                std::fs::rename(&tmp, setup.plugins.join(&name)).unwrap();
                // Block (not spin: on 2 cores a spinning waiter steals the
                // watcher's core) until the new generation is published.
                let now = setup
                    .registry
                    .wait_for_change(before, Duration::from_secs(5));
                total += started.elapsed();
                assert!(now > before, "reload never served");
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, hook_call, load, reload);
criterion_main!(benches);
