//! Splitting large renders over the machine's cores.
//!
//! A render of a large memex is bound by memory latency (gathering text
//! from all over an 84 MB file, reading a vector table): a second core
//! overlaps twice as many waits. Work is cut into contiguous parts, the
//! first run on the calling thread, and the results come back in order.
//! Small work is never split: a thread costs tens of microseconds.

use std::ops::Range;
use std::sync::OnceLock;

/// Most threads one render uses.
const MAX_THREADS: usize = 4;

/// Threads worth using here: the available parallelism, at most
/// [`MAX_THREADS`] (read once: it may read cgroup files).
fn threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, MAX_THREADS)
    })
}

/// `work` over `0..items` cut into contiguous parts of at least
/// `min_items`, one per thread; the results in order.
pub fn split<T: Send>(
    items: usize,
    min_items: usize,
    work: impl Fn(Range<usize>) -> T + Sync,
) -> Vec<T> {
    let parts = threads().min(items / min_items.max(1)).max(1);
    if parts == 1 {
        return vec![work(0..items)];
    }
    let cut = |k: usize| items * k / parts;
    std::thread::scope(|scope| {
        let work = &work;
        let others: Vec<_> = (1..parts)
            .map(|k| scope.spawn(move || work(cut(k)..cut(k + 1))))
            .collect();
        let mut results = vec![work(0..cut(1))];
        for handle in others {
            // A panic in a part is a panic of the render: the SDK's guard
            // at the hook turns it into an error for the host.
            results.push(
                handle
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e)),
            );
        }
        results
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_everything_in_order() {
        for items in [0, 1, 7, 100, 10_001] {
            let parts = split(items, 10, |range| range.collect::<Vec<_>>());
            let all: Vec<usize> = parts.into_iter().flatten().collect();
            assert_eq!(all, (0..items).collect::<Vec<_>>());
        }
    }
}
