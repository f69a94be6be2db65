//! The pool runs every task exactly once, also when workers park, nest or
//! panic.

use foveal_kernels::Pool;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

#[test]
fn every_task_runs_once() {
    for threads in [1, 2, 3, 5] {
        let pool = Pool::new(threads);
        assert_eq!(pool.threads(), threads);
        for tasks in [0, 1, 2, 3, 7, 64, 1000] {
            for _ in 0..50 {
                let hits: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                pool.run(tasks, |t| {
                    hits[t].fetch_add(1, Ordering::Relaxed);
                });
                assert!(
                    hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                    "threads {threads} tasks {tasks}"
                );
            }
        }
    }
}

#[test]
fn parked_workers_wake_up() {
    // Each round the workers park (they spin for 1 µs), then a job of three
    // tasks starts whose every task waits until three different threads
    // have each run one: the round ends with three threads seen only when
    // both parked workers woke up and joined. (A task that waits in vain
    // gives up after 5 s, and the assertion says so.)
    let pool = Pool::with_spin(3, Duration::from_micros(1));
    for round in 0..20 {
        std::thread::sleep(Duration::from_millis(20));
        let seen = Mutex::new(HashSet::new());
        let joined = Condvar::new();
        pool.run(3, |_| {
            let mut threads = seen.lock().unwrap();
            threads.insert(std::thread::current().id());
            joined.notify_all();
            let (_threads, _timed_out) = joined
                .wait_timeout_while(threads, Duration::from_secs(5), |t| t.len() < 3)
                .unwrap();
        });
        let threads = seen.into_inner().unwrap().len();
        assert_eq!(
            threads, 3,
            "round {round}: the job ran on {threads} thread(s); the parked workers did not wake"
        );
        let sum = AtomicUsize::new(0);
        pool.run(100, |t| {
            sum.fetch_add(t, Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), 4950);
    }
}

#[test]
fn workers_share_the_work() {
    let pool = Pool::new(2);
    let on_worker = AtomicUsize::new(0);
    let main = std::thread::current().id();
    for _ in 0..200 {
        pool.run(8, |_| {
            std::thread::sleep(Duration::from_micros(200));
            if std::thread::current().id() != main {
                on_worker.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    assert!(on_worker.load(Ordering::Relaxed) > 0);
}

#[test]
fn nested_runs_inline() {
    let pool = Pool::new(2);
    let n = AtomicUsize::new(0);
    pool.run(4, |_| {
        pool.run(3, |_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
    });
    assert_eq!(n.load(Ordering::Relaxed), 12);
}

#[test]
fn a_panicking_task_panics_the_caller_and_the_pool_goes_on() {
    let pool = Pool::new(2);
    for bad in [0, 5, 9] {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.run(10, |t| {
                if t == bad {
                    panic!("task {t}");
                }
                std::thread::sleep(Duration::from_micros(50));
            })
        }));
        assert!(r.is_err());
        let n = AtomicUsize::new(0);
        pool.run(10, |_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 10);
    }
}

#[test]
fn shared_between_threads() {
    let pool = Pool::new(2);
    let total = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..200 {
                    pool.run(5, |_| {
                        total.fetch_add(1, Ordering::Relaxed);
                    });
                }
            });
        }
    });
    assert_eq!(total.load(Ordering::Relaxed), 4 * 200 * 5);
}
