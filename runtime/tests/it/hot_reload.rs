//! Hot reload through the real watcher: libraries replaced on disk while
//! threads call through the registry.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use foveal::registry::{Reason, Registry, hooks};
use foveal::watcher::PluginWatcher;

use crate::support::{Sandbox, file_name, install, invoke, library, wait_for};

const PATIENCE: Duration = Duration::from_secs(10);

fn watched(sandbox: &Sandbox) -> (Arc<Registry>, PluginWatcher) {
    watched_with(sandbox, foveal::isolation::IsolationPolicy::in_process())
}

fn watched_with(
    sandbox: &Sandbox,
    isolation: foveal::isolation::IsolationPolicy,
) -> (Arc<Registry>, PluginWatcher) {
    let registry = Arc::new(
        Registry::new(foveal::registry::RegistryOptions {
            isolation,
            ..sandbox.options()
        })
        .unwrap(),
    );
    registry.scan();
    let watcher = PluginWatcher::start(Arc::clone(&registry), Duration::from_millis(50)).unwrap();
    (registry, watcher)
}

fn serves(registry: &Registry, version: &str) -> bool {
    invoke(registry, "counter", "version").is_ok_and(|v| v == version)
}

#[test]
fn replacing_a_library_100_times_under_load_loses_no_call() {
    swaps_under_load(foveal::isolation::IsolationPolicy::in_process(), 100);
}

#[test]
fn replacing_a_library_in_a_cell_under_load_loses_no_call_and_leaves_no_cell() {
    let cells = swaps_under_load(foveal::isolation::IsolationPolicy::all_cells(), 30);
    // Each build had its cell; only the last one's runs now.
    assert_eq!(cells.len(), 1, "{cells:?}");
}

/// Swaps the counter `swaps` times while two threads call it; returns the
/// pids of the counter's cells still running at the end.
fn swaps_under_load(isolation: foveal::isolation::IsolationPolicy, swaps: usize) -> Vec<u32> {
    let sandbox = Sandbox::new();
    sandbox.install("counter-v1", "counter");
    let (registry, _watcher) = watched_with(&sandbox, isolation);
    assert!(serves(&registry, "1.0.0"));
    let first_generation = registry.snapshot().generation();

    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (registry, stop, calls, failures) = (
                Arc::clone(&registry),
                Arc::clone(&stop),
                Arc::clone(&calls),
                Arc::clone(&failures),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // One "cycle": a snapshot, then several calls on it.
                    let snapshot = registry.snapshot();
                    let mut seen = Vec::with_capacity(3);
                    for _ in 0..3 {
                        match snapshot
                            .call("counter", hooks::INVOKE, |f| f("version".into(), "".into()))
                        {
                            Ok(v) => seen.push(v.into_string()),
                            Err(e) => failures.lock().unwrap().push(e.to_string()),
                        }
                        calls.fetch_add(1, Ordering::Relaxed);
                    }
                    if seen.iter().any(|v| v != &seen[0]) {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("one snapshot answered {seen:?}"));
                    }
                    if let Some(v) = seen.first()
                        && v != "1.0.0"
                        && v != "2.0.0"
                    {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("unknown version {v}"));
                    }
                }
            })
        })
        .collect();

    let mut latencies = Vec::with_capacity(swaps);
    let mut expected = "1.0.0";
    for i in 0..swaps {
        let (fixture, version) = if i % 2 == 0 {
            ("counter-v2", "2.0.0")
        } else {
            ("counter-v1", "1.0.0")
        };
        let started = Instant::now();
        install(&library(fixture), &sandbox.plugins(), &file_name("counter"));
        assert!(
            wait_for(PATIENCE, || serves(&registry, version)),
            "swap {i} to {version} was not served"
        );
        latencies.push(started.elapsed());
        expected = version;
    }

    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.join().unwrap();
    }
    let failures = failures.lock().unwrap();
    assert!(
        failures.is_empty(),
        "{} failed calls, first: {:?}",
        failures.len(),
        failures.first()
    );
    assert!(calls.load(Ordering::Relaxed) > 100, "the readers ran");

    // After the last swap only the last version answers.
    for _ in 0..100 {
        assert_eq!(invoke(&registry, "counter", "version").unwrap(), expected);
    }
    assert!(registry.snapshot().generation() >= first_generation + swaps as u64);

    latencies.sort();
    println!(
        "copy+rename → serving over {swaps} swaps (debug build, includes the copy and polling): median {:?}, p95 {:?}, max {:?}; {} calls",
        latencies[swaps / 2],
        latencies[swaps * 95 / 100],
        latencies[swaps - 1],
        calls.load(Ordering::Relaxed)
    );
    // The old builds' cells end with their last user.
    let snapshot = registry.snapshot();
    let mut pids: Vec<u32> = snapshot
        .skills()
        .filter_map(|slot| slot.skill().cell_status()?.pid)
        .collect();
    for idle in snapshot.idle().values() {
        if let foveal::registry::Idle::Shadowed {
            candidate: foveal::registry::Candidate::Ready(skill),
            ..
        } = idle
            && let Some(pid) = skill.cell_status().and_then(|c| c.pid)
        {
            pids.push(pid);
        }
    }
    if !pids.is_empty() {
        // (Only where this registry has cells: another test of this
        // process may run cells of its own meanwhile.)
        let running = cell_processes();
        assert!(
            running.iter().all(|pid| pids.contains(pid)),
            "cells of old builds still run: {running:?}, serving {pids:?}"
        );
    }
    pids
}

/// The `foveal-cell` processes that are this process's children.
fn cell_processes() -> Vec<u32> {
    let me = std::process::id();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid …
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let comm = &stat[stat.find('(').unwrap_or(0) + 1..close];
        let ppid: u32 = stat[close + 2..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        if ppid == me && comm == "foveal-cell" {
            out.push(pid);
        }
    }
    out
}

#[test]
fn a_bad_build_renamed_over_a_good_one_leaves_the_good_one_serving() {
    let sandbox = Sandbox::new();
    sandbox.install("counter-v1", "counter");
    let (registry, _watcher) = watched(&sandbox);
    let generation = registry.snapshot().generation();

    sandbox.install("init-panic", "counter");
    assert!(wait_for(PATIENCE, || registry.snapshot().generation() > generation));
    assert_eq!(invoke(&registry, "counter", "version").unwrap(), "1.0.0");
    let rows = registry.snapshot().rows();
    assert!(
        rows.iter().any(|r| r
            .status
            .starts_with("refused: skill `init-panic` panicked in init")),
        "{rows:?}"
    );
}

#[test]
fn removing_a_library_removes_the_skill_from_the_running_host() {
    let sandbox = Sandbox::new();
    let path = sandbox.install("counter-v1", "counter");
    let (registry, _watcher) = watched(&sandbox);
    std::fs::remove_file(&path).unwrap();
    assert!(wait_for(PATIENCE, || invoke(
        &registry, "counter", "version"
    )
    .is_err_and(|e| matches!(e.reason(), Reason::NotLoaded { .. }))));
}

#[test]
fn a_new_library_dropped_in_is_loaded() {
    let sandbox = Sandbox::new();
    let (registry, _watcher) = watched(&sandbox);
    assert!(registry.snapshot().names().is_empty());
    sandbox.install("counter-v2", "counter");
    assert!(wait_for(PATIENCE, || serves(&registry, "2.0.0")));
}

#[test]
fn a_library_copied_in_place_is_loaded_once_the_writes_settle() {
    let sandbox = Sandbox::new();
    let (registry, _watcher) = watched(&sandbox);
    // Not the documented way (no rename), but it must still work.
    std::fs::copy(
        library("counter-v1"),
        sandbox.plugins().join(file_name("counter")),
    )
    .unwrap();
    assert!(wait_for(PATIENCE, || serves(&registry, "1.0.0")));
    let rows = registry.snapshot().rows();
    assert_eq!(rows.len(), 1, "no refusal left behind: {rows:?}");
}

#[test]
fn a_library_written_in_pieces_and_held_open_is_loaded_once_the_writes_settle() {
    // The delayed-load path alone: no rename, and no close before the
    // library serves, so only the quiet time after the last write can load
    // it (a copy in place closes the file, which loads it at once). The
    // pieces come closer together than the debounce: the half-written file
    // is never tried.
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let sandbox = Sandbox::new();
    let registry = Arc::new(
        Registry::new(foveal::registry::RegistryOptions {
            isolation: foveal::isolation::IsolationPolicy::in_process(),
            ..sandbox.options()
        })
        .unwrap(),
    );
    registry.scan();
    let debounce = Duration::from_millis(600);
    let _watcher = PluginWatcher::start(Arc::clone(&registry), debounce).unwrap();
    let bytes = std::fs::read(library("counter-v1")).unwrap();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .open(sandbox.plugins().join(file_name("counter")))
        .unwrap();
    for piece in bytes.chunks(bytes.len().div_ceil(4)) {
        file.write_all(piece).unwrap();
        std::thread::sleep(debounce / 6);
    }
    assert!(
        wait_for(PATIENCE, || serves(&registry, "1.0.0")),
        "a library written in place and held open was never loaded: the delayed load did not run"
    );
    let rows = registry.snapshot().rows();
    assert_eq!(rows.len(), 1, "the half-written file was tried: {rows:?}");
    // The close loads the same build again: it is skipped.
    drop(file);
    std::thread::sleep(debounce);
    assert!(serves(&registry, "1.0.0"));
    let rows = registry.snapshot().rows();
    assert_eq!(rows.len(), 1, "{rows:?}");
}
