//! The threads skill hooks run on.
//!
//! A hook is foreign code that may never return. So it does not run on the
//! thread that needs its answer: each calling thread has a *companion*
//! thread, the hook runs there, and the caller waits with a deadline. A
//! call past its deadline is walked away from — the companion is left stuck
//! in the skill's code (loaded code is never unloaded, so that is safe) and
//! the caller's next call starts a new companion.
//!
//! One companion per calling thread, not one per skill: the hooks of a
//! cycle are called one after another from one thread, so they reach the
//! same companion, and both sides wait for a moment by spinning before they
//! sleep. A hand-over to a companion that is still spinning costs about a
//! microsecond; waking a sleeping thread costs tens of microseconds on a
//! virtual machine, which a cycle of half a dozen hooks would otherwise pay
//! each time. The spin is short ([`SPIN`]), so an idle host burns nothing.

use std::cell::RefCell;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

/// How long either side spins before it sleeps.
const SPIN: Duration = Duration::from_micros(40);

/// A job for a companion.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// Why a call was walked away from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Abandoned {
    /// It did not answer within the deadline.
    Timeout,
    /// The companion could not be started.
    NoThread,
}

thread_local! {
    static COMPANION: RefCell<Option<Sender<Job>>> = const { RefCell::new(None) };
}

fn start() -> std::io::Result<Sender<Job>> {
    let (jobs, queue) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("foveal-hooks".to_owned())
        .spawn(move || {
            // Ends when the caller's thread ends (or gives this one up).
            while let Some(job) = receive(&queue, None) {
                job();
            }
        })?;
    Ok(jobs)
}

/// The next value from `queue`: spins for [`SPIN`], then sleeps until it
/// comes or `deadline` passes. `None` when the sender is gone or the
/// deadline passed.
fn receive<T>(queue: &Receiver<T>, deadline: Option<Instant>) -> Option<T> {
    let spin_until = Instant::now() + SPIN;
    let mut spins = 0u32;
    loop {
        match queue.try_recv() {
            Ok(value) => return Some(value),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => {}
        }
        spins += 1;
        if spins.is_multiple_of(64) && Instant::now() >= spin_until {
            break;
        }
        std::hint::spin_loop();
    }
    match deadline {
        None => queue.recv().ok(),
        // Timed out or disconnected: either way, no answer.
        Some(deadline) => queue
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .ok(),
    }
}

/// Runs `job` on this thread's companion and waits at most `timeout` for
/// its answer. A panic in `job` is carried back and resumed here.
pub(crate) fn run<T: Send + 'static>(
    timeout: Duration,
    job: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Abandoned> {
    let deadline = Instant::now() + timeout;
    let (answer, answered) = mpsc::sync_channel::<std::thread::Result<T>>(1);
    let job: Job = Box::new(move || {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        let _ = answer.send(outcome);
    });
    COMPANION.with(|slot| {
        let mut slot = slot.borrow_mut();
        let mut job = Some(job);
        // A companion whose thread died takes no jobs: start another once.
        for _ in 0..2 {
            if slot.is_none() {
                *slot = Some(start().map_err(|_| Abandoned::NoThread)?);
            }
            let companion = slot.as_ref().expect("started above");
            match companion.send(job.take().expect("sent at most once")) {
                Ok(()) => return Ok(()),
                Err(mpsc::SendError(back)) => {
                    job = Some(back);
                    *slot = None;
                }
            }
        }
        Err(Abandoned::NoThread)
    })?;
    match receive(&answered, Some(deadline)) {
        Some(Ok(value)) => Ok(value),
        Some(Err(panic)) => std::panic::resume_unwind(panic),
        None => {
            // Stuck in the skill's code (or dead): leave it; the next call
            // starts a new companion.
            COMPANION.with(|slot| slot.borrow_mut().take());
            Err(Abandoned::Timeout)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_come_back_and_a_hung_job_is_left_behind() {
        assert_eq!(run(Duration::from_secs(5), || 6 * 7), Ok(42));
        let (release, held) = mpsc::channel::<()>();
        let started = Instant::now();
        let hung = run(Duration::from_millis(50), move || {
            let _ = held.recv();
        });
        assert_eq!(hung, Err(Abandoned::Timeout));
        assert!(started.elapsed() < Duration::from_secs(2));
        // The next call is served by a new companion while the old one is
        // still stuck.
        assert_eq!(run(Duration::from_secs(5), || "next"), Ok("next"));
        drop(release);
    }

    #[test]
    fn a_panic_in_the_job_is_resumed_on_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            run(Duration::from_secs(5), || -> u8 { panic!("in the job") })
        });
        let message = caught.unwrap_err();
        assert_eq!(message.downcast_ref::<&str>(), Some(&"in the job"));
        // The companion survived it.
        assert_eq!(run(Duration::from_secs(5), || 1), Ok(1));
    }
}
