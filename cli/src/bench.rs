//! `foveal bench awareness`: in-process timing of the context section.
//!
//! Three cases, each run `--runs` times (the after-edit one `--edit-runs`
//! times, if given) and reported as median, min and max:
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

use crate::exit::Exit;
use foveal_agent::config::Config;
use foveal_memex::privacy::PrivacyTags;
use foveal_memex::view::SnapshotView;
use foveal_memex::write::Edit;
use foveal_prompt::context::{ContextCache, ContextRequest};

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
    /// With `--in-cell`: the uncached case with the first-party skills in
    /// cells, its runs alternated with those of `uncached`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uncached_in_cell: Option<Timing>,
}

/// How many times `foveal bench awareness` runs its cases.
#[derive(Debug, Clone, Copy)]
pub struct Runs {
    /// Of the uncached and cached cases.
    pub runs: usize,
    /// Of the after-edit case.
    pub edits: usize,
}

/// `foveal bench awareness`.
pub fn awareness(
    config: &Config,
    focus: &str,
    Runs { runs, edits }: Runs,
    in_cell: bool,
    json: bool,
) -> anyhow::Result<Exit> {
    if runs == 0 || edits == 0 {
        eprintln!("error: --runs and --edit-runs must be at least 1");
        return Ok(Exit::Usage);
    }
    let started = Instant::now();
    let memex = match crate::memex::open(config) {
        Ok(memex) => memex,
        Err(exit) => return Ok(exit),
    };
    let memex_load_ms = started.elapsed().as_secs_f64() * 1e3;
    let registry = crate::skills::open_registry(config)?;
    let skills = registry.snapshot();
    let snapshot = memex.snapshot();
    let privacy = PrivacyTags::new(&config.privacy_tags);
    let mut focus = focus.to_owned();
    let nodes = {
        let view = SnapshotView::new(&snapshot, &privacy);
        let owned = view.view();
        let memex_view = owned.as_view();
        if let Err(exit) = crate::focus::resolve_focus(&memex_view, &mut focus) {
            return Ok(exit);
        }
        memex_view.files().map(|f| f.len()).sum()
    };
    let request = ContextRequest {
        focus: Some(focus.to_owned()),
        threshold: config.context.semantic_threshold,
        ..ContextRequest::default()
    }
    .with_awareness(&config.awareness);
    let uncached_request = ContextRequest {
        skill_cache: false,
        ..request.clone()
    };

    // The same skills in cells, for `--in-cell`: lent the view once
    // before the runs (a first lending seals every file).
    let celled = if in_cell {
        let mut celled = config.clone();
        celled.plugins.builtin_isolation = foveal_registry::isolation::Where::Cell;
        let skills = crate::skills::open_registry(&celled)?.snapshot();
        foveal_prompt::context::render(&skills, &snapshot, &privacy, &uncached_request);
        Some(skills)
    } else {
        None
    };

    // Uncached: render from scratch each time (in a cell too, run by run
    // in turn, so that both see the same machine).
    let mut times = Vec::with_capacity(runs);
    let mut cell_times = Vec::with_capacity(runs);
    let mut section = None;
    for _ in 0..runs {
        let t = Instant::now();
        let s = foveal_prompt::context::render(&skills, &snapshot, &privacy, &uncached_request);
        times.push(t.elapsed());
        section = Some(s);
        if let Some(celled) = &celled {
            let t = Instant::now();
            let s = foveal_prompt::context::render(celled, &snapshot, &privacy, &uncached_request);
            cell_times.push(t.elapsed());
            std::hint::black_box(s);
        }
    }
    let uncached = Timing::of(times);
    let uncached_in_cell = celled.is_some().then(|| Timing::of(cell_times));
    let section = section.expect("at least one run");
    let output_bytes = section.text().len();
    let source = match &section.origin {
        foveal_prompt::context::Origin::Skill { .. } => foveal_prompt::context::SKILL.to_owned(),
        foveal_prompt::context::Origin::Fallback(why) => format!("fallback: {why}"),
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
    let mut times = Vec::with_capacity(edits);
    let mut rebuilds = Vec::with_capacity(edits);
    let mut base = snapshot;
    for run in 0..edits {
        let edit = Edit::AppendBody {
            text: format!("Benchmark edit {run}."),
        };
        let plan = memex.plan(&base, &focus, &edit)?;
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
        uncached_in_cell,
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
    ]
    .into_iter()
    .chain(r.uncached_in_cell.map(|t| ("uncached_cell", t)))
    {
        let _ = writeln!(
            s,
            "{name:<14} {:>12} {:>12} {:>12}",
            fmt_ms(t.median_ms),
            fmt_ms(t.min_ms),
            fmt_ms(t.max_ms)
        );
    }
    if let Some(cell) = r.uncached_in_cell {
        let _ = writeln!(
            s,
            "uncached in a cell / in-process (medians): {:.2}x",
            cell.median_ms / r.uncached.median_ms
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

/// A model that answers every request at once, in process, with
/// [`InstantModel::REPLY`] and a usage record: what is left of a turn's
/// time is the host's own.
///
/// It builds the same chat-completions body as the OpenAI-compatible
/// provider and keeps the last one, so its size can be reported.
#[derive(Debug, Default)]
pub struct InstantModel {
    last_body: std::sync::Mutex<String>,
}

impl InstantModel {
    /// The reply.
    pub const REPLY: &'static str = "Hello!";

    /// The last request body it was sent.
    pub fn last_body(&self) -> String {
        self.last_body
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl foveal_provider::Provider for InstantModel {
    fn describe(&self) -> String {
        "instant (in-process, for benchmarks)".to_owned()
    }

    fn body(
        &self,
        request: &foveal_provider::ChatRequest,
    ) -> Result<foveal_provider::RequestBody, foveal_provider::ProviderError> {
        foveal_provider::request_body(request, Some("instant"))
    }

    fn send(&self, body: foveal_provider::RequestBody) -> foveal_provider::ReplyStream {
        use foveal_provider::{Event, FinishReason, ReplyStream, Usage};
        let body = body.into_string();
        let prompt_tokens = (body.len() / 4) as u64;
        *self.last_body.lock().unwrap_or_else(|e| e.into_inner()) = body;
        let (tx, stream) = ReplyStream::channel();
        // A task, as the HTTP provider's: the events are there as soon as
        // it runs.
        let task = tokio::spawn(async move {
            for event in [
                Event::Text(Self::REPLY.to_owned()),
                Event::Finish(FinishReason::Stop),
                Event::Usage(Usage {
                    prompt_tokens,
                    completion_tokens: 2,
                    cached_tokens: 0,
                }),
            ] {
                if tx.event(event).await.is_err() {
                    return;
                }
            }
            tx.finish().await;
        });
        stream.with_task(task)
    }
}

/// p50, p99 and max of a set of times, in milliseconds.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Percentiles {
    /// The median.
    pub p50_ms: f64,
    /// The 99th percentile.
    pub p99_ms: f64,
    /// The slowest.
    pub max_ms: f64,
}

impl Percentiles {
    fn of(mut ms: Vec<f64>) -> Self {
        if ms.is_empty() {
            return Self {
                p50_ms: 0.0,
                p99_ms: 0.0,
                max_ms: 0.0,
            };
        }
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| ms[((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len()) - 1];
        Self {
            p50_ms: at(0.5),
            p99_ms: at(0.99),
            max_ms: ms[ms.len() - 1],
        }
    }
}

/// One case of `foveal bench agent`: the host's time per turn and its
/// phases.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TurnTimes {
    /// Turns timed.
    pub turns: usize,
    /// The whole turn, less the model call: the host overhead.
    pub overhead: Percentiles,
    /// The same, less the time outside the phases (recording the turn,
    /// handing the session sync and the usage save to a background thread).
    pub overhead_without_sync: Percentiles,
    /// Taking the snapshots and composing the pattern.
    pub sense: Percentiles,
    /// Assembling the prompt and passing it through the privacy gate.
    pub assemble: Percentiles,
    /// The instant model (not part of the overhead).
    pub model: Percentiles,
    /// Recording the usage (`usage.json`) and the reply, running no tool.
    pub act: Percentiles,
    /// The time outside the phases.
    pub sync: Percentiles,
}

/// What `foveal bench agent --json` prints.
#[derive(Debug, serde::Serialize)]
pub struct AgentBench {
    /// Turns after warm-up on an unchanged memex: every cache warm, as in
    /// a long-running host.
    pub steady: TurnTimes,
    /// The first turn after a one-headline edit (written and published
    /// before the turn; the write is not timed), if `--edits` > 0.
    pub after_edit: Option<TurnTimes>,
    /// Objects in the memex.
    pub memex_objects: usize,
    /// Loading the memex and building its views, once.
    pub memex_load_ms: f64,
    /// Skills loaded.
    pub skills: Vec<String>,
    /// The request body of the first turn (a new session: no history),
    /// in bytes.
    pub first_body_bytes: usize,
    /// Its tokens, counted exactly with the configured encoding.
    pub first_body_tokens: usize,
    /// The request body of the last turn (with the history of the turns
    /// before it), in bytes.
    pub body_bytes: usize,
    /// Its tokens, counted exactly with the configured encoding.
    pub body_tokens: usize,
    /// The prompt's tokens as the host bounded them.
    pub prompt_tokens: u32,
    /// Where the session and `usage.json` were written (removed after).
    pub data_dir: std::path::PathBuf,
}

/// `foveal bench agent`: whole turns of the live agent with an instant
/// in-process model.
pub fn agent(config: &Config, turns: usize, edits: usize, json: bool) -> anyhow::Result<Exit> {
    use std::sync::Arc;

    use foveal_agent::session::Session;
    use foveal_agent::{Agent, Collect, Signal};

    if turns == 0 {
        eprintln!("error: --turns must be at least 1");
        return Ok(Exit::Usage);
    }
    let mut config = config.clone();
    // The session and the usage record go to a folder of their own: the
    // benchmark leaves the user's data alone.
    let data = tempdir_under(&config.data_dir)?;
    config.data_dir = data.0.clone();
    foveal_registry::tokens::configure(config.prompt.model.encoding);
    let started = Instant::now();
    let memex = match crate::memex::open(&config) {
        Ok(memex) => Arc::new(memex),
        Err(exit) => return Ok(exit),
    };
    // As `foveal run` does: each new file version's view is built before
    // it is published.
    memex.prepare_views(PrivacyTags::new(&config.privacy_tags));
    let memex_load_ms = started.elapsed().as_secs_f64() * 1e3;
    let registry = Arc::new(crate::skills::open_registry(&config)?);
    let skills: Vec<String> = registry
        .snapshot()
        .names()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let model = Arc::new(InstantModel::default());
    let session = Session::open(&config.data_dir, "bench")?;
    let mut agent = Agent::new(
        config.clone(),
        registry,
        Arc::clone(&memex),
        Arc::clone(&model) as Arc<dyn foveal_provider::Provider>,
        session,
    )?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut prompt_tokens = 0;
    let mut turn = |agent: &mut Agent| -> anyhow::Result<(f64, foveal_agent::Phases)> {
        let mut out = Collect::default();
        let t = Instant::now();
        let report = rt.block_on(agent.turn(Signal::user("Say hello"), &mut out));
        let total = t.elapsed().as_secs_f64() * 1e3;
        if let Some(error) = report.error {
            anyhow::bail!("the turn failed: {error}");
        }
        let cycle = report
            .cycles
            .first()
            .ok_or_else(|| anyhow::anyhow!("the turn ran no cycle"))?;
        prompt_tokens = cycle.prompt_tokens;
        Ok((total, cycle.phases))
    };
    // Warm-up: the first turns fill the caches (prefix, context, counts).
    turn(&mut agent)?;
    let first_body = model.last_body();
    for _ in 1..turns.clamp(1, 20) {
        turn(&mut agent)?;
    }
    let mut steady = Vec::with_capacity(turns);
    for _ in 0..turns {
        steady.push(turn(&mut agent)?);
    }
    let mut after_edit = Vec::with_capacity(edits);
    if edits > 0 {
        let target = edit_target(&memex.snapshot())
            .ok_or_else(|| anyhow::anyhow!("the memex has no headline to edit"))?;
        for run in 0..edits {
            let edit = Edit::SetProperty {
                key: "BENCH_REVISION".to_owned(),
                value: run.to_string(),
            };
            memex.apply(&memex.snapshot(), &target, &edit)?;
            after_edit.push(turn(&mut agent)?);
        }
    }
    let body = model.last_body();
    let counter = foveal_registry::tokens::TokenCounter::new(config.prompt.model.encoding);
    let body_tokens = counter.count(&body);
    let first_body_tokens = counter.count(&first_body);
    let memex_objects = memex.snapshot().len();
    drop(agent);
    let result = AgentBench {
        steady: times(&steady),
        after_edit: (!after_edit.is_empty()).then(|| times(&after_edit)),
        memex_objects,
        memex_load_ms,
        skills,
        first_body_bytes: first_body.len(),
        first_body_tokens,
        body_bytes: body.len(),
        body_tokens,
        prompt_tokens,
        data_dir: data.0.clone(),
    };
    drop(data);
    if json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", agent_table(&result));
    }
    Ok(Exit::Ok)
}

/// A folder under `parent` removed when dropped.
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir_under(parent: &std::path::Path) -> std::io::Result<TempDir> {
    let dir = parent.join(format!(
        "bench-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(TempDir(dir))
}

/// The first visible headline with an id of its own, in the memex's first
/// file.
fn edit_target(snapshot: &foveal_memex::MemexSnapshot) -> Option<String> {
    let file = snapshot.files().next()?;
    (0..file.objects.len()).find_map(|i| {
        let id = file.id(u32::try_from(i).ok()?);
        snapshot.get(id).map(|_| id.to_owned())
    })
}

fn times(runs: &[(f64, foveal_agent::Phases)]) -> TurnTimes {
    let pick = |f: &dyn Fn(&(f64, foveal_agent::Phases)) -> f64| {
        Percentiles::of(runs.iter().map(f).collect())
    };
    let sync = |(total, p): &(f64, foveal_agent::Phases)| {
        (total - p.sense_ms - p.assemble_ms - p.model_ms - p.act_ms).max(0.0)
    };
    TurnTimes {
        turns: runs.len(),
        overhead: pick(&|(total, p)| total - p.model_ms),
        overhead_without_sync: pick(&|r| r.0 - r.1.model_ms - sync(r)),
        sense: pick(&|(_, p)| p.sense_ms),
        assemble: pick(&|(_, p)| p.assemble_ms),
        model: pick(&|(_, p)| p.model_ms),
        act: pick(&|(_, p)| p.act_ms),
        sync: pick(&|r| sync(r)),
    }
}

fn agent_table(r: &AgentBench) -> String {
    use std::fmt::Write as _;
    let mut s = format!(
        "agent turns (\"Say hello\", instant in-process model) on {} memex objects, skills: {}\n",
        r.memex_objects,
        if r.skills.is_empty() {
            "none".to_owned()
        } else {
            r.skills.join(", ")
        }
    );
    let _ = writeln!(
        s,
        "request body: first turn {} bytes, {} tokens; last turn (with history) {} bytes, {} tokens",
        r.first_body_bytes, r.first_body_tokens, r.body_bytes, r.body_tokens,
    );
    let _ = writeln!(s, "memex load: {}", fmt_ms(r.memex_load_ms));
    for (case, t) in [
        ("steady", Some(&r.steady)),
        ("after_edit", r.after_edit.as_ref()),
    ] {
        let Some(t) = t else { continue };
        let _ = writeln!(s, "\n{case}: {} turns", t.turns);
        let _ = writeln!(s, "{:<24} {:>12} {:>12} {:>12}", "", "p50", "p99", "max");
        for (name, p) in [
            ("host overhead", t.overhead),
            ("  without the time outside phases", t.overhead_without_sync),
            ("  sense", t.sense),
            ("  assemble", t.assemble),
            ("  act (usage, session)", t.act),
            ("  outside phases", t.sync),
            ("model (instant)", t.model),
        ] {
            let _ = writeln!(
                s,
                "{name:<24} {:>12} {:>12} {:>12}",
                fmt_ms(p.p50_ms),
                fmt_ms(p.p99_ms),
                fmt_ms(p.max_ms)
            );
        }
    }
    s
}

/// The messages `foveal bench model` sends, one turn each.
pub const MODEL_MESSAGES: [&str; 3] = [
    "What is in my memex?",
    "What is on the reading list?",
    "Thanks.",
];

/// One turn of `foveal bench model`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ModelTurn {
    /// The message.
    pub message: String,
    /// The whole turn, as the user waits for it (host and model).
    pub turn_ms: f64,
    /// The prompt's tokens.
    pub prompt_tokens: usize,
    /// Of those, reused from the KV cache kept from the turn before.
    pub reused_tokens: usize,
    /// Of those, read by this turn.
    pub new_tokens: usize,
    /// Rendering, tokenizing and reading the new tokens.
    pub prefill_ms: f64,
    /// New tokens read per second.
    pub prefill_tokens_per_second: f64,
    /// Tokens generated.
    pub generated_tokens: usize,
    /// Tokens generated per second.
    pub decode_tokens_per_second: f64,
}

/// llama-server on the same prompts.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LlamaServerRun {
    /// The binary.
    pub binary: std::path::PathBuf,
    /// Its `--threads` and `--threads-batch`.
    pub threads: usize,
    /// The first turn's prompt: tokens, and prompt tokens per second
    /// (its own `timings`), read from an empty cache.
    pub prompt_tokens: u64,
    /// Prompt tokens per second.
    pub prefill_tokens_per_second: f64,
    /// Tokens generated per second on that prompt.
    pub decode_tokens_per_second: f64,
    /// The second turn's prompt after the first (`cache_prompt`): tokens
    /// it read.
    pub follow_up_new_tokens: u64,
    /// And the time it took to read them.
    pub follow_up_prefill_ms: f64,
}

/// What `foveal bench model --json` prints.
#[derive(Debug, serde::Serialize)]
pub struct ModelBench {
    /// The model, as `foveal status` describes it.
    pub model: String,
    /// Threads it computes with.
    pub threads: usize,
    /// Loading it.
    pub load_ms: f64,
    /// The turns, in order (a new session).
    pub turns: Vec<ModelTurn>,
    /// The first reply, the model loaded (the first turn).
    pub first_reply_ms: f64,
    /// The slowest follow-up in the same session.
    pub follow_up_ms: f64,
    /// The first turn's prompt read from an empty cache: tokens per
    /// second.
    pub prefill_tokens_per_second: f64,
    /// Tokens generated per second over all turns.
    pub decode_tokens_per_second: f64,
    /// The process's peak resident memory (VmHWM), MiB.
    pub peak_rss_mib: Option<f64>,
    /// llama-server on the same prompts, when it was found.
    pub llama_server: Option<LlamaServerRun>,
    /// The machine's load average (1 min) at the end.
    pub load_average: Option<f64>,
}

/// A provider that keeps the last request body it sent, around the
/// embedded model.
#[derive(Debug)]
struct Recording {
    inner: foveal_provider::LocalProvider,
    last_body: std::sync::Mutex<String>,
}

impl foveal_provider::Provider for Recording {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn body(
        &self,
        request: &foveal_provider::ChatRequest,
    ) -> Result<foveal_provider::RequestBody, foveal_provider::ProviderError> {
        self.inner.body(request)
    }

    fn send(&self, body: foveal_provider::RequestBody) -> foveal_provider::ReplyStream {
        *self.last_body.lock().unwrap_or_else(|e| e.into_inner()) = body.as_str().to_owned();
        self.inner.send(body)
    }
}

/// `foveal bench model`: the embedded model in a new session of the live
/// agent, fed [`MODEL_MESSAGES`], and llama-server on the same prompts.
pub fn model(
    config: &Config,
    llama_server: Option<std::path::PathBuf>,
    json: bool,
) -> anyhow::Result<Exit> {
    use std::sync::Arc;

    use foveal_agent::session::Session;
    use foveal_agent::{Agent, Collect, Signal};
    use foveal_provider::{LocalProvider, Provider};

    let mut config = config.clone();
    let data = tempdir_under(&config.data_dir)?;
    config.data_dir = data.0.clone();
    foveal_registry::tokens::configure(config.prompt.model.encoding);
    let memex = match crate::memex::open(&config) {
        Ok(memex) => Arc::new(memex),
        Err(exit) => return Ok(exit),
    };
    memex.prepare_views(PrivacyTags::new(&config.privacy_tags));
    let registry = Arc::new(crate::skills::open_registry(&config)?);
    let local = match LocalProvider::new(&config.provider) {
        Ok(local) => local,
        Err(error) => {
            eprintln!("error: {error}");
            return Ok(Exit::NotFound);
        }
    };
    let provider = Arc::new(Recording {
        inner: local.clone(),
        last_body: std::sync::Mutex::new(String::new()),
    });
    let session = Session::open(&config.data_dir, "bench-model")?;
    let mut agent = Agent::new(
        config.clone(),
        registry,
        memex,
        Arc::clone(&provider) as Arc<dyn Provider>,
        session,
    )?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut turns = Vec::new();
    let mut bodies = Vec::new();
    for message in MODEL_MESSAGES {
        let mut out = Collect::default();
        let started = Instant::now();
        let report = rt.block_on(agent.turn(Signal::user(message), &mut out));
        let turn_ms = started.elapsed().as_secs_f64() * 1e3;
        if let Some(error) = report.error {
            anyhow::bail!("the turn {message:?} failed: {error}");
        }
        let cache = local
            .last_prompt_cache()
            .ok_or_else(|| anyhow::anyhow!("the turn {message:?} did not call the model"))?;
        bodies.push(
            provider
                .last_body
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        );
        turns.push(ModelTurn {
            message: message.to_owned(),
            turn_ms,
            prompt_tokens: cache.reused + cache.evaluated,
            reused_tokens: cache.reused,
            new_tokens: cache.evaluated,
            prefill_ms: cache.prompt_time.as_secs_f64() * 1e3,
            prefill_tokens_per_second: cache.prefill_rate(),
            generated_tokens: cache.generated,
            decode_tokens_per_second: cache.decode_rate(),
        });
    }
    drop(agent);
    let generated: usize = turns.iter().map(|t| t.generated_tokens).sum();
    let decode_s: f64 = turns
        .iter()
        .map(|t| t.generated_tokens as f64 / t.decode_tokens_per_second.max(1e-9))
        .sum();
    let prompts: Vec<String> = bodies
        .iter()
        .map(|body| {
            foveal_provider::parse_body(body)
                .and_then(|request| local.render(&request))
                .map_err(anyhow::Error::from)
        })
        .collect::<anyhow::Result<_>>()?;
    let server = match llama_server.or_else(default_llama_server) {
        Some(binary) if binary.is_file() => Some(rt.block_on(llama_server_run(
            &binary,
            local.path(),
            local.threads(),
            &prompts,
            turns[0].generated_tokens.max(1),
        ))?),
        Some(binary) => {
            eprintln!(
                "note: no llama-server at {}; comparison skipped",
                binary.display()
            );
            None
        }
        None => None,
    };
    let result = ModelBench {
        model: local.describe(),
        threads: local.threads(),
        load_ms: local.load_time().as_secs_f64() * 1e3,
        first_reply_ms: turns[0].turn_ms,
        follow_up_ms: turns[1..].iter().map(|t| t.turn_ms).fold(0.0, f64::max),
        prefill_tokens_per_second: turns[0].prefill_tokens_per_second,
        decode_tokens_per_second: generated as f64 / decode_s.max(1e-9),
        turns,
        peak_rss_mib: peak_rss_mib(),
        llama_server: server,
        load_average: load_average(),
    };
    drop(data);
    if json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", model_table(&result));
    }
    Ok(Exit::Ok)
}

/// `target/test-server/bin/llama-server` of the repository foveal runs
/// from (as `scripts/test-server install` builds it), if there.
fn default_llama_server() -> Option<std::path::PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    let path = cwd.join("target/test-server/bin/llama-server");
    path.is_file().then_some(path)
}

/// Starts llama-server on `model` with `threads` threads, reads
/// `prompts[0]` from an empty cache generating `generate` tokens, then
/// `prompts[1]` with the cache of the first, and stops it.
async fn llama_server_run(
    binary: &std::path::Path,
    model: &std::path::Path,
    threads: usize,
    prompts: &[String],
    generate: usize,
) -> anyhow::Result<LlamaServerRun> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut child = std::process::Command::new(binary)
        .args(["--model", &model.display().to_string()])
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--ctx-size", "4096", "--parallel", "1", "--no-webui"])
        .args(["--threads", &threads.to_string()])
        .args(["--threads-batch", &threads.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", binary.display()))?;
    let result = async {
        let client = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = client
                .get(format!("{base}/health"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready {
                break;
            }
            if Instant::now() > deadline {
                anyhow::bail!("llama-server did not become ready within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let complete = |prompt: &str, n: usize| {
            let body = serde_json::json!({
                "prompt": prompt,
                "n_predict": n,
                "temperature": 0.0,
                "cache_prompt": true,
            });
            let request = client
                .post(format!("{base}/completion"))
                .header("content-type", "application/json")
                .body(body.to_string())
                .send();
            async move {
                let text = request.await?.error_for_status()?.text().await?;
                let reply: serde_json::Value = serde_json::from_str(&text)?;
                anyhow::Ok(reply["timings"].clone())
            }
        };
        let first = complete(&prompts[0], generate).await?;
        let second = match prompts.get(1) {
            Some(prompt) => complete(prompt, 1).await?,
            None => serde_json::Value::Null,
        };
        Ok(LlamaServerRun {
            binary: binary.to_owned(),
            threads,
            prompt_tokens: first["prompt_n"].as_u64().unwrap_or(0),
            prefill_tokens_per_second: first["prompt_per_second"].as_f64().unwrap_or(0.0),
            decode_tokens_per_second: first["predicted_per_second"].as_f64().unwrap_or(0.0),
            follow_up_new_tokens: second["prompt_n"].as_u64().unwrap_or(0),
            follow_up_prefill_ms: second["prompt_ms"].as_f64().unwrap_or(0.0),
        })
    }
    .await;
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// This process's peak resident memory, from `/proc/self/status`.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The 1-minute load average, from `/proc/loadavg`.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn model_table(r: &ModelBench) -> String {
    use std::fmt::Write as _;
    let mut s = format!("{}\n", r.model);
    let _ = writeln!(s, "load: {}", fmt_ms(r.load_ms));
    let _ = writeln!(
        s,
        "{:<30} {:>9} {:>7} {:>7} {:>7} {:>11} {:>10} {:>6} {:>10}",
        "turn", "turn", "prompt", "reused", "new", "prefill", "prefill/s", "gen", "decode/s"
    );
    for t in &r.turns {
        let _ = writeln!(
            s,
            "{:<30} {:>9} {:>7} {:>7} {:>7} {:>11} {:>10.0} {:>6} {:>10.1}",
            t.message,
            fmt_ms(t.turn_ms),
            t.prompt_tokens,
            t.reused_tokens,
            t.new_tokens,
            fmt_ms(t.prefill_ms),
            t.prefill_tokens_per_second,
            t.generated_tokens,
            t.decode_tokens_per_second
        );
    }
    let _ = writeln!(s, "first reply:  {}", fmt_ms(r.first_reply_ms));
    let _ = writeln!(s, "follow-up:    {} (slowest)", fmt_ms(r.follow_up_ms));
    let _ = writeln!(
        s,
        "prefill:      {:.0} tok/s (first prompt, empty cache)",
        r.prefill_tokens_per_second
    );
    let _ = writeln!(s, "decode:       {:.1} tok/s", r.decode_tokens_per_second);
    if let Some(rss) = r.peak_rss_mib {
        let _ = writeln!(s, "peak RSS:     {rss:.0} MiB");
    }
    if let Some(l) = &r.llama_server {
        let _ = writeln!(
            s,
            "llama-server ({} threads), same prompts: prefill {:.0} tok/s on {} tokens, decode {:.1} tok/s; follow-up read {} tokens in {}",
            l.threads,
            l.prefill_tokens_per_second,
            l.prompt_tokens,
            l.decode_tokens_per_second,
            l.follow_up_new_tokens,
            fmt_ms(l.follow_up_prefill_ms)
        );
        let _ = writeln!(
            s,
            "prefill vs llama-server: {:.2}×",
            r.prefill_tokens_per_second / l.prefill_tokens_per_second.max(1e-9)
        );
    }
    if let Some(load) = r.load_average {
        let _ = writeln!(s, "load average (1 min): {load:.2}");
    }
    s
}
