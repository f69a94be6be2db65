//! `foveal bench awareness`: in-process timing of the context section.
//!
//! Three cases, each run `--runs` times and reported as median, min and
//! max:
//!
//! - `uncached`: the section rendered from scratch by the skill, the full
//!   semantic scan included (the skill's scan cache is off; the view's
//!   per-file indexes are built once per file version and are not part of
//!   a render);
//! - `cached`: the same focus on the same memex and registry generations,
//!   answered by the host's context cache;
//! - `after_edit`: one headline's body changed (in memory: nothing is
//!   written), so the memex has a new generation; the new version's index
//!   is built first — the memex does that when it publishes a file — and
//!   its time is reported apart as `index_rebuild`.

use std::time::{Duration, Instant};

use crate::cli::Exit;
use crate::config::Config;
use crate::context::{ContextCache, ContextRequest};
use crate::memex::privacy::PrivacyTags;
use crate::memex::view::SnapshotView;
use crate::memex::write::Edit;

/// Median, min and max of one case, in milliseconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Timing {
    /// The median run.
    pub median_ms: f64,
    /// The fastest run.
    pub min_ms: f64,
    /// The slowest run.
    pub max_ms: f64,
}

impl Timing {
    fn of(mut runs: Vec<Duration>) -> Self {
        runs.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        Self {
            median_ms: ms(runs[runs.len() / 2]),
            min_ms: ms(runs[0]),
            max_ms: ms(runs[runs.len() - 1]),
        }
    }
}

/// What `foveal bench awareness --json` prints.
#[derive(Debug, serde::Serialize)]
pub struct AwarenessBench {
    /// A new focus: the full scan.
    pub uncached: Timing,
    /// The same focus and generation.
    pub cached: Timing,
    /// After a one-headline body edit.
    pub after_edit: Timing,
    /// Building the changed file's index after the edit (memex side).
    pub index_rebuild: Timing,
    /// Visible objects in the memex.
    pub nodes: usize,
    /// Bytes of the section.
    pub output_bytes: usize,
    /// Runs per case.
    pub runs: usize,
    /// Loading the memex, once.
    pub memex_load_ms: f64,
    /// Who rendered: `awareness` or the fallback.
    pub source: String,
}

/// `foveal bench awareness`.
pub fn awareness(config: &Config, focus: &str, runs: usize, json: bool) -> anyhow::Result<Exit> {
    if runs == 0 {
        eprintln!("error: --runs must be at least 1");
        return Ok(Exit::Usage);
    }
    let started = Instant::now();
    let memex = match crate::cli::memex::open(config) {
        Ok(memex) => memex,
        Err(exit) => return Ok(exit),
    };
    let memex_load_ms = started.elapsed().as_secs_f64() * 1e3;
    let registry = crate::cli::skills::open_registry(config)?;
    let skills = registry.snapshot();
    let snapshot = memex.snapshot();
    let privacy = PrivacyTags::new(&config.privacy_tags);
    let nodes = {
        let view = SnapshotView::new(&snapshot, &privacy);
        let owned = view.view();
        let memex_view = owned.as_view();
        if let Err(exit) = crate::cli::check_focus(&memex_view, focus) {
            return Ok(exit);
        }
        memex_view.files().map(|f| f.len()).sum()
    };
    let request = ContextRequest {
        focus: Some(focus.to_owned()),
        threshold: config.context.semantic_threshold,
        ..ContextRequest::default()
    };
    let uncached_request = ContextRequest {
        skill_cache: false,
        ..request.clone()
    };

    // Uncached: render from scratch each time.
    let mut times = Vec::with_capacity(runs);
    let mut section = None;
    for _ in 0..runs {
        let t = Instant::now();
        let s = crate::context::render(&skills, &snapshot, &privacy, &uncached_request);
        times.push(t.elapsed());
        section = Some(s);
    }
    let uncached = Timing::of(times);
    let section = section.expect("at least one run");
    let output_bytes = section.text().len();
    let source = match &section.origin {
        crate::context::Origin::Skill { .. } => crate::context::SKILL.to_owned(),
        crate::context::Origin::Fallback(why) => format!("fallback: {why}"),
    };

    // Cached: the host's cache answers.
    let cache = ContextCache::default();
    cache.section(&skills, &snapshot, &privacy, &request);
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs.max(1000) {
        let t = Instant::now();
        let s = cache.section(&skills, &snapshot, &privacy, &request);
        times.push(t.elapsed());
        std::hint::black_box(s);
    }
    let cached = Timing::of(times);

    // After an edit: each run changes the focus's body (a new generation),
    // lets the memex build the new index, then times the render.
    let mut times = Vec::with_capacity(runs);
    let mut rebuilds = Vec::with_capacity(runs);
    let mut base = snapshot;
    for run in 0..runs {
        let edit = Edit::AppendBody {
            text: format!("Benchmark edit {run}."),
        };
        let plan = memex.plan(&base, focus, &edit)?;
        let next = std::sync::Arc::new(plan.preview(&base));
        let t = Instant::now();
        drop(SnapshotView::new(&next, &privacy));
        rebuilds.push(t.elapsed());
        let t = Instant::now();
        let s = cache.section(&skills, &next, &privacy, &request);
        times.push(t.elapsed());
        std::hint::black_box(s);
        base = next;
    }
    let result = AwarenessBench {
        uncached,
        cached,
        after_edit: Timing::of(times),
        index_rebuild: Timing::of(rebuilds),
        nodes,
        output_bytes,
        runs,
        memex_load_ms,
        source,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", table(&result));
    }
    Ok(Exit::Ok)
}

fn table(r: &AwarenessBench) -> String {
    use std::fmt::Write as _;
    let mut s = format!(
        "awareness on {} visible objects ({} bytes out, rendered by {}), {} runs\n",
        r.nodes, r.output_bytes, r.source, r.runs
    );
    let _ = writeln!(
        s,
        "{:<14} {:>12} {:>12} {:>12}",
        "case", "median", "min", "max"
    );
    for (name, t) in [
        ("uncached", r.uncached),
        ("cached", r.cached),
        ("after_edit", r.after_edit),
        ("index_rebuild", r.index_rebuild),
    ] {
        let _ = writeln!(
            s,
            "{name:<14} {:>12} {:>12} {:>12}",
            fmt_ms(t.median_ms),
            fmt_ms(t.min_ms),
            fmt_ms(t.max_ms)
        );
    }
    let _ = writeln!(s, "memex load: {}", fmt_ms(r.memex_load_ms));
    s
}

fn fmt_ms(ms: f64) -> String {
    if ms < 0.01 {
        format!("{:.0} ns", ms * 1e6)
    } else if ms < 1.0 {
        format!("{:.1} µs", ms * 1e3)
    } else {
        format!("{ms:.2} ms")
    }
}
