//! Embedding a memex: in batches with progress ([`embed_jobs`], what
//! `foveal memex embed` runs), and in the background of `foveal run`
//! ([`EmbedService`]).
//!
//! The background worker is one thread (and the model's own pool, at a
//! lower priority): it plans what the memex lacks ([`crate::plan`]),
//! embeds it a batch at a time into the cache — each batch checked again
//! against the memex as it is then ([`Recheck`]) — and every couple of
//! seconds — and at the end — publishes the files that gained vectors as a
//! new memex generation ([`Memex::refill`]). Then it sleeps until a new
//! file version is published with an object the cache has no vector for
//! (the memex's [`foveal_memex::VectorSource`] wakes it). A cycle never
//! waits for it: it reads whatever snapshot is current.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::cache::VectorCache;
use crate::{EmbedError, EmbedSettings, Embedder, Job, Recheck, Vectors, model_id, plan};
use foveal_memex::Memex;
use foveal_memex::privacy::PrivacyTags;
use foveal_registry::egress::Gate;

/// How often the worker publishes what it has embedded so far.
const PUBLISH_EVERY: Duration = Duration::from_secs(2);
/// How often it says how far it is.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// How long the worker waits after a failure before trying again.
const RETRY_AFTER: Duration = Duration::from_secs(30);

/// A flag and a condition variable: "something may need embedding".
#[derive(Debug, Default)]
pub struct Wake {
    flag: Mutex<bool>,
    cv: Condvar,
}

impl Wake {
    /// Wakes the worker.
    pub fn wake(&self) {
        *self.flag.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }

    /// Waits until woken or `timeout`; clears the flag.
    fn wait(&self, timeout: Duration) {
        let flag = self.flag.lock().unwrap_or_else(|e| e.into_inner());
        let (mut flag, _) = self
            .cv
            .wait_timeout_while(flag, timeout, |woken| !*woken)
            .unwrap_or_else(|e| e.into_inner());
        *flag = false;
    }
}

/// What the embedder has done, for `foveal status` and the log.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EmbedStatus {
    /// The model.
    pub model: String,
    /// `loading`, `embedding`, `idle`, or `unavailable: <why>`.
    pub state: String,
    /// Objects embedded since start.
    pub embedded: u64,
    /// Objects waiting in the current pass.
    pub pending: u64,
    /// Objects whose vector came from the cache in the last pass.
    pub reused: u64,
    /// The memex generation the last vectors were published in.
    pub generation: u64,
    /// Objects never embedded in the last pass (private; with a remote
    /// embedder also those the last-door check would change).
    pub skipped: u64,
}

/// Embeds `jobs` `batch` at a time with `embedder`, adding each batch to
/// `cache` as it is done (so an interruption loses at most one batch).
/// Before each batch, `recheck` drops the jobs whose text no visible
/// object of the memex has any more ([`Recheck::keep`]): an object that
/// became private while the pass ran is neither embedded nor sent.
/// `done(n)` is called after each batch with the jobs handled so far
/// (embedded or dropped); when it returns `false` the work stops there.
/// Returns the jobs handled.
pub fn embed_jobs(
    embedder: &dyn Embedder,
    cache: &VectorCache,
    jobs: &[Job],
    batch: usize,
    recheck: &mut Recheck<'_>,
    mut done: impl FnMut(usize) -> bool,
) -> Result<usize, EmbedError> {
    let mut finished = 0;
    for planned in jobs.chunks(batch.max(1)) {
        let chunk: Vec<&Job> = planned
            .iter()
            .zip(recheck.keep(planned))
            .filter_map(|(job, keep)| keep.then_some(job))
            .collect();
        if chunk.len() < planned.len() {
            tracing::debug!(
                target: "foveal::embed",
                dropped = planned.len() - chunk.len(),
                "texts no visible object has any more, not embedded"
            );
        }
        if !chunk.is_empty() {
            let texts: Vec<&str> = chunk.iter().map(|j| j.text.as_str()).collect();
            let vectors = embedder.embed(&texts)?;
            if vectors.len() != chunk.len() {
                return Err(EmbedError::Compute(format!(
                    "{} vectors for {} texts",
                    vectors.len(),
                    chunk.len()
                )));
            }
            cache
                .insert(
                    chunk
                        .iter()
                        .zip(vectors)
                        .map(|(job, v)| (job.key, v))
                        .collect(),
                )
                .map_err(|e| EmbedError::Compute(e.to_string()))?;
        }
        finished += planned.len();
        if !done(finished) {
            break;
        }
    }
    Ok(finished)
}

/// Opens the cache of `settings`' model under `data_dir` (in memory when
/// the file cannot be opened, with a warning); `None` when embeddings are
/// off.
pub fn open_cache(settings: &EmbedSettings, data_dir: &Path) -> Option<Arc<VectorCache>> {
    let id = model_id(settings)?;
    Some(Arc::new(match VectorCache::open(data_dir, &id) {
        Ok(cache) => cache,
        Err(error) => {
            tracing::warn!(target: "foveal::embed", "{error}; vectors are kept in memory only");
            VectorCache::in_memory(&id)
        }
    }))
}

/// Fills `memex` with the vectors the disk cache holds for `settings`'
/// model, now and in every file version published later, without
/// computing any: what a one-shot command (`foveal context`, `ask`)
/// does. Returns the cache, `None` when embeddings are off.
pub fn attach_cached(
    settings: &EmbedSettings,
    data_dir: &Path,
    memex: &Memex,
    privacy: &PrivacyTags,
) -> Option<Arc<VectorCache>> {
    let id = model_id(settings)?;
    // A command that only reads creates nothing: no file, no vectors.
    if !VectorCache::file_path(data_dir, &id).is_file() {
        return Some(Arc::new(VectorCache::in_memory(&id)));
    }
    let cache = open_cache(settings, data_dir)?;
    memex.attach_vectors(Arc::new(Vectors::new(Arc::clone(&cache), privacy.clone())));
    Some(cache)
}

/// The background embedder of `foveal run`. Dropping it stops the worker
/// (after the batch in hand) and waits for it, at most [`STOP_WAIT`].
#[derive(Debug)]
pub struct EmbedService {
    wake: Arc<Wake>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EmbedService {
    /// Attaches the cache's vectors to `memex` at once, then starts the
    /// worker, which loads the model and embeds what is missing. `report`
    /// is called with each change of its status. `None` when embeddings
    /// are off.
    pub fn start(
        settings: &EmbedSettings,
        data_dir: &Path,
        memex: Arc<Memex>,
        privacy: PrivacyTags,
        gate: Arc<Gate>,
        report: impl Fn(&EmbedStatus) + Send + 'static,
    ) -> Option<Self> {
        let cache = open_cache(settings, data_dir)?;
        let wake = Arc::new(Wake::default());
        memex.attach_vectors(Arc::new(
            Vectors::new(Arc::clone(&cache), privacy.clone()).waking(Arc::clone(&wake)),
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            settings: settings.clone(),
            memex,
            privacy,
            gate,
            cache,
            wake: Arc::clone(&wake),
            stop: Arc::clone(&stop),
            status: EmbedStatus {
                model: model_id(settings).unwrap_or_default(),
                state: "loading".to_owned(),
                ..EmbedStatus::default()
            },
            report: Box::new(report),
        };
        let thread = std::thread::Builder::new()
            .name("foveal-embed".into())
            .spawn(move || worker.run())
            .map_err(|e| tracing::warn!(target: "foveal::embed", "cannot start the embedding thread: {e}"))
            .ok()?;
        Some(Self {
            wake,
            stop,
            thread: Some(thread),
        })
    }
}

/// How long stopping waits for the batch in hand before leaving the
/// worker to finish it alone: a stopping host exits within a second of
/// `foveal stop` or SIGTERM, and this is one of the waits in it.
const STOP_WAIT: Duration = Duration::from_millis(300);

impl Drop for EmbedService {
    /// Stops the worker and waits for it up to [`STOP_WAIT`]: a batch of
    /// long texts can take seconds (more in a debug build), and a host
    /// that is stopping must not wait for it. A worker still in its batch
    /// then ends with the process; what it was appending to the cache is
    /// a record without its checksum, cut off at the next load.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.wake.wake();
        if let Some(thread) = self.thread.take() {
            let until = Instant::now() + STOP_WAIT;
            while !thread.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            if thread.is_finished() {
                let _ = thread.join();
            } else {
                tracing::debug!(target: "foveal::embed", "stopping without waiting for the batch in hand");
            }
        }
    }
}

struct Worker {
    settings: EmbedSettings,
    memex: Arc<Memex>,
    privacy: PrivacyTags,
    gate: Arc<Gate>,
    cache: Arc<VectorCache>,
    wake: Arc<Wake>,
    stop: Arc<AtomicBool>,
    status: EmbedStatus,
    report: Box<dyn Fn(&EmbedStatus) + Send>,
}

impl Worker {
    fn set_state(&mut self, state: &str) {
        self.status.state = state.to_owned();
        (self.report)(&self.status);
    }

    fn run(mut self) {
        crate::lower_priority();
        (self.report)(&self.status);
        let remote = self.settings.kind == crate::EmbedKind::OpenAi;
        // Loaded for a pass and dropped when nothing is left to embed: the
        // local model's ~110 MiB are not held while the host is idle or
        // the chat model computes a reply.
        let mut loaded: Option<Arc<dyn Embedder>> = None;
        let mut described = false;
        while !self.stop.load(Ordering::Relaxed) {
            let snapshot = self.memex.snapshot();
            let mut plan = plan(
                &snapshot,
                &self.privacy,
                &self.cache,
                remote,
                Some(&self.gate),
            );
            self.status.reused = plan.reused as u64;
            self.status.skipped = plan.skipped as u64;
            // Vectors of objects that became private since they were
            // embedded (one embedded in a pass that began while it was
            // public, say) go before anything new is embedded.
            if !plan.withdraw.is_empty()
                && let Err(error) = self.cache.remove(&plan.withdraw)
            {
                tracing::warn!(target: "foveal::embed", "{error}");
            }
            if plan.jobs.is_empty() {
                if loaded.take().is_some() {
                    // The model's weights and its threads' buffers go back
                    // to the OS, not only to the allocator.
                    foveal_memex::release_free_memory();
                }
                self.status.pending = 0;
                self.set_state("idle");
                self.wake.wait(Duration::from_secs(3600));
                continue;
            }
            let embedder = match &loaded {
                Some(embedder) => Arc::clone(embedder),
                None => match crate::open(&self.settings, true) {
                    Ok(embedder) => {
                        if !described {
                            described = true;
                            tracing::info!(
                                target: "foveal::embed",
                                "embedding with {}",
                                embedder.describe()
                            );
                        }
                        loaded = Some(Arc::clone(&embedder));
                        embedder
                    }
                    Err(error) => {
                        tracing::warn!(
                            target: "foveal::embed",
                            "no vectors will be computed: {error}; objects without `:EMBEDDING:` are not promoted by similarity"
                        );
                        self.set_state(&format!("unavailable: {error}"));
                        return;
                    }
                },
            };
            let total = plan.jobs.len();
            tracing::info!(
                target: "foveal::embed",
                "embedding {total} objects in the background ({} from the cache, {} skipped)",
                plan.reused,
                plan.skipped
            );
            self.status.pending = total as u64;
            self.set_state("embedding");
            let started = Instant::now();
            let mut published = Instant::now();
            // Publishing copies the changed files: at most about a
            // twentieth of the pass's time goes to it, however large the
            // memex (a 100 MB file is not copied every two seconds).
            let mut publish_every = PUBLISH_EVERY;
            let mut logged = Instant::now();
            let mut last = 0;
            let paths: Vec<_> = snapshot.files().map(|f| f.path.clone()).collect();
            let stop = Arc::clone(&self.stop);
            let memex = Arc::clone(&self.memex);
            let mut progress = |done: usize, status: &mut EmbedStatus| {
                status.embedded += (done - last) as u64;
                status.pending = (total - done) as u64;
                last = done;
                if published.elapsed() >= publish_every || done == total {
                    let refill = Instant::now();
                    status.generation = memex.refill(&paths);
                    publish_every = PUBLISH_EVERY.max(refill.elapsed() * 20);
                    published = Instant::now();
                }
                if logged.elapsed() >= LOG_EVERY || done == total {
                    logged = Instant::now();
                    let elapsed = started.elapsed().as_secs_f64().max(1e-3);
                    let rate = done as f64 / elapsed;
                    tracing::info!(
                        target: "foveal::embed",
                        "embedded {done}/{total} objects, {rate:.0}/s, {}",
                        if done == total {
                            format!("done in {elapsed:.1} s")
                        } else {
                            format!("about {:.0} s left", (total - done) as f64 / rate.max(1e-3))
                        }
                    );
                }
                !stop.load(Ordering::Relaxed)
            };
            let mut status = self.status.clone();
            let result = {
                // Each batch checked again against the memex as it is
                // then: what became private meanwhile is not embedded.
                let mut recheck = Recheck::new(
                    &self.memex,
                    &self.privacy,
                    &self.cache,
                    remote,
                    Some(&self.gate),
                    &mut plan,
                );
                embed_jobs(
                    &*embedder,
                    &self.cache,
                    &plan.jobs,
                    self.settings.batch,
                    &mut recheck,
                    |done| {
                        let go = progress(done, &mut status);
                        (self.report)(&status);
                        go
                    },
                )
            };
            self.status = status;
            match result {
                Ok(done) if done == total => {
                    if let Err(error) = self.cache.compact(&plan.live) {
                        tracing::warn!(target: "foveal::embed", "{error}");
                    }
                }
                Ok(_) => {
                    // Stopping: publish what is done.
                    self.memex.refill(&paths);
                }
                Err(error) => {
                    self.memex.refill(&paths);
                    tracing::warn!(
                        target: "foveal::embed",
                        "{error}; trying again in {} s",
                        RETRY_AFTER.as_secs()
                    );
                    self.set_state(&format!("error: {error}"));
                    // Not woken early: the publish above may have set the
                    // flag, and a failing endpoint must not be hammered.
                    let until = Instant::now() + RETRY_AFTER;
                    while !self.stop.load(Ordering::Relaxed) && Instant::now() < until {
                        self.wake
                            .wait(until.saturating_duration_since(Instant::now()));
                    }
                }
            }
        }
    }
}
