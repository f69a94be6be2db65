//! `foveal bench cells`: what a skill cell costs, measured on the real
//! path — the loader's checks and copy, `foveal-cell` confining itself
//! and loading the library, the registry's call through the hook's
//! trampoline.
//!
//! - `raw_round_trip`: 100 bytes there and back over a Unix socketpair
//!   between two threads of this process: the floor a cell's call stands
//!   on;
//! - `components_round_trip`: the library's `components` hook through its
//!   cell (the `rogue` fixture's `{}` answers one 100-byte component),
//!   lent a memex of one small file;
//! - `start`: from the loader's first check to the end of `init` in a new
//!   cell (what a hot swap costs before the new build serves);
//! - `idle_rss`: the resident memory of the idle cell, and of the library
//!   mapped in it (its share of that);
//! - `swaps`: this many cells started and ended one after another, with
//!   the host's resident memory and mapped regions before and after.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::exit::Exit;
use foveal_agent::config::Config;
use foveal_memex::privacy::PrivacyTags;
use foveal_memex::view::{ComponentsCall, SnapshotView};
use foveal_registry::loader::{Backend, CellPlan, Loader};

/// Percentiles of one case, in microseconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Micros {
    /// The median.
    pub p50_us: f64,
    /// The 99th percentile.
    pub p99_us: f64,
    /// The slowest.
    pub max_us: f64,
}

impl Micros {
    fn of(mut runs: Vec<Duration>) -> Self {
        runs.sort();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        Self {
            p50_us: us(runs[runs.len() / 2]),
            p99_us: us(runs[(runs.len() * 99 / 100).min(runs.len() - 1)]),
            max_us: us(runs[runs.len() - 1]),
        }
    }
}

/// What `foveal bench cells --json` prints.
#[derive(Debug, serde::Serialize)]
pub struct CellsBench {
    /// The library measured.
    pub library: PathBuf,
    /// 100 bytes each way over a socketpair, two threads.
    pub raw_round_trip: Micros,
    /// The `components` hook through a cell.
    pub components_round_trip: Micros,
    /// `components_round_trip` p50 over `raw_round_trip` p50.
    pub ratio_to_raw: f64,
    /// A new cell, from the first check to the end of `init`.
    pub start: Micros,
    /// The idle cell's resident memory, MiB.
    pub idle_rss_mib: f64,
    /// Of which the library's own mapped pages, MiB.
    pub library_rss_mib: f64,
    /// Cells started and ended for `host_*`.
    pub swaps: usize,
    /// This process's resident memory before and after the swaps, MiB.
    pub host_rss_mib: (f64, f64),
    /// This process's mapped regions before and after the swaps.
    pub host_maps: (usize, usize),
    /// Calls timed.
    pub calls: usize,
}

/// `foveal bench cells`.
pub fn cells(
    config: &Config,
    library: &Path,
    calls: usize,
    swaps: usize,
    json: bool,
) -> anyhow::Result<Exit> {
    if calls == 0 {
        eprintln!("error: --calls must be at least 1");
        return Ok(Exit::Usage);
    }
    let Some(exe) = foveal_cell::host::find_executable() else {
        eprintln!(
            "error: the foveal-cell executable was not found beside foveal (set FOVEAL_CELL)"
        );
        return Ok(Exit::NotFound);
    };
    let scratch = Scratch(
        config
            .data_dir
            .join(format!("bench-cells-{}", std::process::id())),
    );
    std::fs::create_dir_all(&scratch.0)?;
    let loader = Loader::new(scratch.0.join("shadow"), u32::MAX)?;
    let plan = CellPlan {
        exe,
        memory_mib: foveal_registry::isolation::DEFAULT_MEMORY_MIB,
        grants: foveal_cell::Grants::default(),
        simulate_no_landlock: false,
        init_timeout: Duration::from_secs(10),
    };
    let start_cell = || -> anyhow::Result<foveal_registry::loader::Loaded> {
        let opened = loader
            .open_in_cell(library, &plan)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        loader.init(opened).map_err(|e| anyhow::anyhow!("{e}"))
    };

    let raw = raw_round_trips(calls)?;

    let mut starts = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let loaded = start_cell()?;
        starts.push(t.elapsed());
        drop(loaded);
    }
    let start = Micros::of(starts);

    let loaded = start_cell()?;
    let Backend::Cell(cell, _) = &loaded.backend else {
        anyhow::bail!("the library did not start in a cell");
    };
    let memex_dir = scratch.0.join("memex");
    std::fs::create_dir(&memex_dir)?;
    std::fs::write(memex_dir.join("a.org"), "* Work :project:\nA body.\n")?;
    let memex = foveal_memex::Memex::open(std::slice::from_ref(&memex_dir))?;
    let view = SnapshotView::new(&memex.snapshot(), &PrivacyTags::new(&config.privacy_tags));
    let timeout = Duration::from_millis(config.plugins.hook_timeout_ms);
    let call = |view: &SnapshotView| {
        let lent = foveal_cell::lend::lend(view).expect("lend the view");
        let request = ComponentsCall {
            view: view.clone(),
            signal: foveal_sdk::SignalKind::USER,
            focus: None,
            budget: None,
            config: "{}".to_owned(),
            explain: false,
            facts: foveal_registry::host_api::facts(None),
        };
        foveal_cell::lend::with_cell(cell, timeout, Some(lent), || {
            request.call(foveal_cell::lend::components)
        })
    };
    // Warm up: the view file crosses once.
    for _ in 0..100 {
        let (answer, failure) = call(&view);
        if let Some(failure) = failure {
            anyhow::bail!("the cell failed: {failure}");
        }
        if answer.is_err() {
            anyhow::bail!("the components hook failed");
        }
    }
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        let answer = std::hint::black_box(call(&view));
        times.push(t.elapsed());
        drop(answer);
    }
    let components_round_trip = Micros::of(times);
    let status = cell.status();
    let pid = status.pid.unwrap_or(0);
    let idle_rss_mib = status.rss_bytes.unwrap_or(0) as f64 / 1048576.0;
    let library_rss_mib = library_rss(pid, &cell.options().library) as f64 / 1048576.0;
    drop(loaded);

    let before = (host_rss(), host_maps());
    for _ in 0..swaps {
        drop(start_cell()?);
    }
    let after = (host_rss(), host_maps());

    let bench = CellsBench {
        library: library.to_owned(),
        raw_round_trip: raw,
        ratio_to_raw: components_round_trip.p50_us / raw.p50_us,
        components_round_trip,
        start,
        idle_rss_mib,
        library_rss_mib,
        swaps,
        host_rss_mib: (before.0, after.0),
        host_maps: (before.1, after.1),
        calls,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&bench)?);
    } else {
        let line = |name: &str, m: &Micros| {
            println!(
                "{name:<22} p50 {:>8.1} µs  p99 {:>8.1} µs  max {:>9.1} µs",
                m.p50_us, m.p99_us, m.max_us
            );
        };
        println!("library: {}", bench.library.display());
        line("raw socketpair", &bench.raw_round_trip);
        line("components via cell", &bench.components_round_trip);
        println!("ratio to raw (p50):    {:.2}", bench.ratio_to_raw);
        line("cell start to serving", &bench.start);
        println!(
            "idle cell RSS:         {:.1} MiB (library {:.1} MiB)",
            bench.idle_rss_mib, bench.library_rss_mib
        );
        println!(
            "{} swaps: host RSS {:.1} → {:.1} MiB, maps {} → {}",
            bench.swaps,
            bench.host_rss_mib.0,
            bench.host_rss_mib.1,
            bench.host_maps.0,
            bench.host_maps.1
        );
    }
    Ok(Exit::Ok)
}

/// A folder removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// 100 bytes there and back over a socketpair, to a thread that echoes.
fn raw_round_trips(calls: usize) -> anyhow::Result<Micros> {
    let (mut a, mut b) = std::os::unix::net::UnixStream::pair()?;
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 100];
        while b.read_exact(&mut buf).is_ok() {
            if b.write_all(&buf).is_err() {
                break;
            }
        }
    });
    let msg = [7u8; 100];
    let mut buf = [0u8; 100];
    let mut times = Vec::with_capacity(calls);
    for i in 0..calls + 100 {
        let t = Instant::now();
        a.write_all(&msg)?;
        a.read_exact(&mut buf)?;
        if i >= 100 {
            times.push(t.elapsed());
        }
    }
    drop(a);
    let _ = echo.join();
    Ok(Micros::of(times))
}

fn host_rss() -> f64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(0.0, |pages| pages * 4096.0 / 1048576.0)
}

fn host_maps() -> usize {
    std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count())
}

/// The resident bytes of `library`'s mappings in process `pid`.
fn library_rss(pid: u32, library: &Path) -> u64 {
    let Ok(smaps) = std::fs::read_to_string(format!("/proc/{pid}/smaps")) else {
        return 0;
    };
    let name = library.to_string_lossy();
    let mut inside = false;
    let mut total = 0;
    for line in smaps.lines() {
        if line.contains('-')
            && line.split_whitespace().count() >= 5
            && !line.starts_with(|c: char| c.is_ascii_uppercase())
        {
            inside = line.ends_with(name.as_ref())
                || line.contains(" (deleted)") && line.contains(name.as_ref());
        } else if inside && let Some(kb) = line.strip_prefix("Rss:") {
            total += kb
                .trim()
                .trim_end_matches(" kB")
                .trim()
                .parse::<u64>()
                .unwrap_or(0)
                * 1024;
        }
    }
    total
}
