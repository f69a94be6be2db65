//! A persistent thread pool for many small parallel jobs.
//!
//! [`Pool::run`] runs `tasks` numbered tasks: the caller and the workers
//! claim them one at a time from an atomic counter until none is left, and
//! `run` returns when every claimed task has finished. Dispatch is one
//! atomic increment that the workers are spinning on, so a job costs about
//! a microsecond to start when the workers are awake. A worker that has
//! seen no job for the spin time (200 µs unless set with
//! [`Pool::with_spin`]) parks, and the next dispatch unparks it (a futex
//! wake, some microseconds). Decoding one token issues some two hundred
//! matmuls in a row, so the workers stay awake through it and park between
//! requests.
//!
//! A worker joins a job only while it is open: once the caller has claimed
//! the last task it closes the job and waits only for the workers that
//! joined (and so hold a task). On a busy machine, where a worker may not
//! be scheduled for milliseconds, the caller then does the work alone
//! instead of waiting for it.

use crate::act::Acts;
use std::cell::{Cell, UnsafeCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// A job as the workers see it: the caller's closure with its lifetime
/// erased, and the number of tasks. [`Pool::run`] does not return before
/// every worker that joined the job has left it.
#[derive(Clone, Copy)]
struct Job {
    f: *const (dyn Fn(usize) + Sync + 'static),
    tasks: usize,
}

/// Aligned to its own cache lines, so that the counters the threads spin
/// on do not share a line with anything else.
#[repr(align(128))]
struct Padded<T>(T);

/// `state`: bit 0 set while the job is open to workers; the rest counts
/// the workers in it, in steps of [`JOINED`].
const OPEN: usize = 1;
const JOINED: usize = 2;

struct Shared {
    /// Bumped once per job (and once at shutdown): what idle workers spin
    /// on.
    generation: Padded<AtomicUsize>,
    /// [`OPEN`] and the count of workers in the job.
    state: Padded<AtomicUsize>,
    /// The next task to claim.
    next: Padded<AtomicUsize>,
    /// The current job; written by the dispatcher while `state` is 0 (no
    /// worker in a job, none can join), read by workers after joining.
    job: UnsafeCell<Option<Job>>,
    /// Per worker: parked, or about to park.
    sleeping: Vec<Padded<AtomicBool>>,
    panicked: AtomicBool,
    shutdown: AtomicBool,
    spin: Duration,
}

// SAFETY: `job` is the only field that is not itself `Sync`. It is written
// only by the dispatcher holding `Pool::dispatch` while `state` is 0, so no
// worker is in a job or can join one; workers read it only after joining
// (an Acquire CAS on `state` that saw `OPEN`, which the dispatcher set with
// Release after writing `job`) and before leaving (a Release decrement the
// dispatcher waits for). The closure it points to is `Sync`.
unsafe impl Sync for Shared {}
// SAFETY: as above; the raw pointer inside is only dereferenced under that
// protocol.
unsafe impl Send for Shared {}

thread_local! {
    /// Whether this thread is running a pool task (nested `run` calls run
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
            state: Padded(AtomicUsize::new(0)),
            next: Padded(AtomicUsize::new(0)),
            job: UnsafeCell::new(None),
            sleeping: (1..threads)
                .map(|_| Padded(AtomicBool::new(false)))
                .collect(),
            panicked: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            spin,
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

    /// Runs `f(0)`, `f(1)`, … `f(tasks - 1)`, each once, on the caller and
    /// the workers that join in time, and returns when all have returned.
    /// Which thread runs a task, and in which order, is not specified. A
    /// call from inside a task, one task, or a pool of one thread runs the
    /// tasks in order on the caller.
    ///
    /// # Panics
    /// When `f` panics on any thread (after every task has finished or
    /// been abandoned).
    pub fn run<F: Fn(usize) + Sync>(&self, tasks: usize, f: F) {
        let shared = match &self.shared {
            Some(s) if tasks > 1 && !IN_JOB.with(Cell::get) => s,
            _ => return (0..tasks).for_each(f),
        };
        let _lock = self.dispatch.lock().unwrap_or_else(PoisonError::into_inner);
        let job: &(dyn Fn(usize) + Sync) = &f;
        // SAFETY: only the lifetime is erased (same fat-pointer layout);
        // the pointer is not used after this function returns, which waits
        // for every worker that joined to leave, even when `f` panics here.
        let job = unsafe {
            std::mem::transmute::<
                *const (dyn Fn(usize) + Sync + '_),
                *const (dyn Fn(usize) + Sync + 'static),
            >(job)
        };
        debug_assert_eq!(shared.state.0.load(Ordering::Relaxed), 0);
        // SAFETY: we hold the dispatch lock and `state` is 0 (the last
        // `run` closed its job and waited for every worker to leave), so no
        // worker reads `job` now or can join before the store below.
        unsafe { *shared.job.get() = Some(Job { f: job, tasks }) };
        shared.next.0.store(0, Ordering::Relaxed);
        shared.state.0.store(OPEN, Ordering::Release);
        shared.generation.0.fetch_add(1, Ordering::SeqCst);
        for (i, s) in shared.sleeping.iter().enumerate() {
            if s.0.load(Ordering::SeqCst) {
                self.handles[i].thread().unpark();
            }
        }
        IN_JOB.with(|c| c.set(true));
        let mine = panic::catch_unwind(AssertUnwindSafe(|| claim(&shared.next.0, tasks, &f)));
        IN_JOB.with(|c| c.set(false));
        // Every task is claimed (or we panicked): close the job to late
        // workers and wait for those in it.
        shared.state.0.fetch_and(!OPEN, Ordering::AcqRel);
        let start = Instant::now();
        let mut spins = 0u32;
        while shared.state.0.load(Ordering::Acquire) != 0 {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) && start.elapsed() > Duration::from_micros(50) {
                thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        if let Err(e) = mine {
            panic::resume_unwind(e);
        }
        if shared.panicked.swap(false, Ordering::Relaxed) {
            panic!("a foveal-kernels pool task panicked");
        }
    }

    /// The scratch space for quantized activations.
    pub(crate) fn scratch(&self) -> MutexGuard<'_, Acts> {
        self.scratch.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Claims and runs tasks until none is left.
fn claim(next: &AtomicUsize, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
    loop {
        let t = next.fetch_add(1, Ordering::Relaxed);
        if t >= tasks {
            return;
        }
        f(t);
    }
}

fn worker(shared: &Shared, id: usize) {
    let mut seen = 0usize;
    IN_JOB.with(|c| c.set(true));
    loop {
        let mut since = Instant::now();
        let mut spins = 0u32;
        loop {
            let g = shared.generation.0.load(Ordering::Acquire);
            if g != seen {
                seen = g;
                break;
            }
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(256) || since.elapsed() < shared.spin {
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
        }
        if shared.shutdown.load(Ordering::Acquire) {
            return;
        }
        // Join the open job, if it still is.
        let mut s = shared.state.0.load(Ordering::Relaxed);
        let joined = loop {
            if s & OPEN == 0 {
                break false;
            }
            match shared.state.0.compare_exchange_weak(
                s,
                s + JOINED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break true,
                Err(now) => s = now,
            }
        };
        if !joined {
            continue;
        }
        // SAFETY: we joined an open job: the dispatcher wrote `job` before
        // opening it (Release, our CAS Acquire) and does not write it again
        // before we leave below.
        if let Some(job) = unsafe { *shared.job.get() } {
            // SAFETY: the closure outlives this call: the dispatcher waits
            // for us to leave before returning.
            let f = unsafe { &*job.f };
            if panic::catch_unwind(AssertUnwindSafe(|| claim(&shared.next.0, job.tasks, f)))
                .is_err()
            {
                shared.panicked.store(true, Ordering::Relaxed);
            }
        }
        shared.state.0.fetch_sub(JOINED, Ordering::Release);
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
