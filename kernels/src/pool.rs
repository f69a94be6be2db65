//! A persistent thread pool for many small parallel jobs.
//!
//! [`Pool::run`] hands one closure to every thread: the caller runs it as
//! thread 0 while the workers run it as threads `1..threads`, and `run`
//! returns when all are done. Dispatch is one atomic increment that the
//! workers are spinning on, so a job costs about a microsecond to start
//! when the workers are awake. A worker that has seen no job for the spin
//! time (200 µs unless set with [`Pool::with_spin`]) parks, and the next
//! dispatch unparks it (a futex wake, some microseconds). Decoding one
//! token issues some two hundred matmuls in a row, so the workers stay
//! awake through it and park between requests.

use crate::act::Acts;
use std::cell::{Cell, UnsafeCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// A job as the workers see it: the caller's closure with its lifetime
/// erased. [`Pool::run`] does not return before every worker is done with
/// it.
type Job = *const (dyn Fn(usize, usize) + Sync + 'static);

/// One cache line, so that the counters the threads spin on do not share a
/// line with anything written often.
#[repr(align(128))]
struct Padded<T>(T);

struct Shared {
    /// Bumped once per job (and once at shutdown).
    generation: Padded<AtomicUsize>,
    /// Workers that have not finished the current job.
    pending: Padded<AtomicUsize>,
    /// The current job; written by the dispatcher before `generation` is
    /// bumped, read by workers after they see the new generation.
    job: UnsafeCell<Option<Job>>,
    /// Per worker: parked, or about to park.
    sleeping: Vec<Padded<AtomicBool>>,
    panicked: AtomicBool,
    shutdown: AtomicBool,
    spin: Duration,
    threads: usize,
}

// SAFETY: `job` is the only field that is not itself `Sync`. It is written
// only by the dispatcher holding `Pool::dispatch`, while no worker reads it
// (all finished the previous job: `pending` is 0), and read by workers only
// between their Acquire load of the new `generation` and their Release
// decrement of `pending`, which the dispatcher waits for before returning or
// writing again. The closure it points to is `Sync`.
unsafe impl Sync for Shared {}
// SAFETY: as above; the raw pointer inside is only dereferenced under that
// protocol.
unsafe impl Send for Shared {}

thread_local! {
    /// Whether this thread is running a pool job (nested `run` calls run
    /// inline instead of deadlocking on the dispatch lock).
    static IN_JOB: Cell<bool> = const { Cell::new(false) };
}

/// A persistent pool of `threads - 1` worker threads plus the caller.
///
/// `Pool::new(1)` starts no thread and runs every job inline.
pub struct Pool {
    shared: Option<Arc<Shared>>,
    handles: Vec<JoinHandle<()>>,
    threads: usize,
    dispatch: Mutex<()>,
    pub(crate) scratch: Mutex<Acts>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.threads)
            .finish_non_exhaustive()
    }
}

/// How long workers spin for the next job before parking, by default.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(200);

impl Pool {
    /// A pool of `threads` threads counting the caller (`0` is taken as 1).
    pub fn new(threads: usize) -> Pool {
        Pool::with_spin(threads, DEFAULT_SPIN)
    }

    /// A pool whose idle workers spin for `spin` before parking.
    pub fn with_spin(threads: usize, spin: Duration) -> Pool {
        let threads = threads.max(1);
        let mut pool = Pool {
            shared: None,
            handles: Vec::new(),
            threads,
            dispatch: Mutex::new(()),
            scratch: Mutex::new(Acts::default()),
        };
        if threads == 1 {
            return pool;
        }
        let shared = Arc::new(Shared {
            generation: Padded(AtomicUsize::new(0)),
            pending: Padded(AtomicUsize::new(0)),
            job: UnsafeCell::new(None),
            sleeping: (1..threads)
                .map(|_| Padded(AtomicBool::new(false)))
                .collect(),
            panicked: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            spin,
            threads,
        });
        for id in 1..threads {
            let shared = Arc::clone(&shared);
            let handle = thread::Builder::new()
                .name(format!("foveal-kernels-{id}"))
                .spawn(move || worker(&shared, id))
                .expect("spawning a kernel pool thread");
            pool.handles.push(handle);
        }
        pool.shared = Some(shared);
        pool
    }

    /// A pool with one thread per available CPU.
    pub fn with_available_parallelism() -> Pool {
        Pool::new(thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// Threads counting the caller.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f(thread, threads)` on every thread of the pool, the caller
    /// being thread 0, and returns when all calls have returned. A call
    /// from inside a job runs `f(0, 1)` inline.
    ///
    /// # Panics
    /// When `f` panics on any thread (after every thread has finished).
    pub fn run<F: Fn(usize, usize) + Sync>(&self, f: F) {
        let shared = match &self.shared {
            Some(s) if !IN_JOB.with(Cell::get) => s,
            _ => return f(0, 1),
        };
        let _lock = self.dispatch.lock().unwrap_or_else(PoisonError::into_inner);
        let job: &(dyn Fn(usize, usize) + Sync) = &f;
        // SAFETY: only the lifetime is erased (same fat-pointer layout);
        // the pointer is not used after this function returns, which waits
        // for `pending` to reach zero below, even when `f` panics here.
        let job: Job =
            unsafe { std::mem::transmute::<*const (dyn Fn(usize, usize) + Sync + '_), Job>(job) };
        // SAFETY: we hold the dispatch lock and `pending` is zero (the last
        // `run` waited for it), so no worker reads `job` now.
        unsafe { *shared.job.get() = Some(job) };
        shared.pending.0.store(self.threads - 1, Ordering::Relaxed);
        shared.generation.0.fetch_add(1, Ordering::SeqCst);
        for (i, s) in shared.sleeping.iter().enumerate() {
            if s.0.load(Ordering::SeqCst) {
                self.handles[i].thread().unpark();
            }
        }
        IN_JOB.with(|c| c.set(true));
        let mine = panic::catch_unwind(AssertUnwindSafe(|| f(0, self.threads)));
        IN_JOB.with(|c| c.set(false));
        let start = Instant::now();
        let mut spins = 0u32;
        while shared.pending.0.load(Ordering::Acquire) != 0 {
            spins = spins.wrapping_add(1);
            if spins % 64 == 0 && start.elapsed() > Duration::from_micros(50) {
                thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        if let Err(e) = mine {
            panic::resume_unwind(e);
        }
        if shared.panicked.swap(false, Ordering::Relaxed) {
            panic!("a foveal-kernels pool worker panicked");
        }
    }

    /// The scratch space for quantized activations.
    pub(crate) fn scratch(&self) -> MutexGuard<'_, Acts> {
        self.scratch.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn worker(shared: &Shared, id: usize) {
    let mut seen = 0usize;
    IN_JOB.with(|c| c.set(true));
    loop {
        let mut since = Instant::now();
        let mut spins = 0u32;
        let generation = loop {
            let g = shared.generation.0.load(Ordering::Acquire);
            if g != seen {
                break g;
            }
            spins = spins.wrapping_add(1);
            if spins % 256 != 0 || since.elapsed() < shared.spin {
                std::hint::spin_loop();
                continue;
            }
            let sleeping = &shared.sleeping[id - 1].0;
            sleeping.store(true, Ordering::SeqCst);
            if shared.generation.0.load(Ordering::SeqCst) == seen {
                thread::park();
            }
            sleeping.store(false, Ordering::SeqCst);
            since = Instant::now();
        };
        seen = generation;
        if shared.shutdown.load(Ordering::Acquire) {
            return;
        }
        // SAFETY: the dispatcher wrote `job` before the generation we just
        // loaded with Acquire, and will not write it again before we
        // decrement `pending` below.
        let job = unsafe { *shared.job.get() };
        if let Some(job) = job {
            // SAFETY: the closure outlives this call: the dispatcher waits
            // for our decrement of `pending` before returning.
            let r = panic::catch_unwind(AssertUnwindSafe(|| unsafe { (*job)(id, shared.threads) }));
            if r.is_err() {
                shared.panicked.store(true, Ordering::Relaxed);
            }
        }
        shared.pending.0.fetch_sub(1, Ordering::Release);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            let _lock = self.dispatch.lock().unwrap_or_else(PoisonError::into_inner);
            shared.shutdown.store(true, Ordering::SeqCst);
            shared.generation.0.fetch_add(1, Ordering::SeqCst);
            for h in &self.handles {
                h.thread().unpark();
            }
        }
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}
