//! Distribution of the time of a small decode-sized matmul (576 × 576,
//! Q4_1, m = 1, weights hot in cache) with 1 and 2 threads, interleaved,
//! and the share of tasks the worker takes: `cargo run --release -p foveal-kernels --example dispatch`.

use foveal_kernels::{Format, Pool, QMatrix, matmul};
use std::time::Instant;

fn main() {
    let (n, k) = (576, 576);
    let w: Vec<f32> = (0..n * k)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    let w = QMatrix::quantize(Format::Q4_1, n, k, &w).unwrap();
    let x = vec![0.5f32; k];
    let mut out = vec![0f32; n];
    let pools = [Pool::new(1), Pool::new(2)];
    let mut times = [Vec::new(), Vec::new()];
    for _ in 0..20000 {
        for (t, pool) in pools.iter().enumerate() {
            let t0 = Instant::now();
            matmul(&w, &x, 1, &mut out, pool);
            times[t].push(t0.elapsed().as_nanos() as u64);
        }
    }
    // Which share of tasks the worker runs, with tasks of ~0.4 µs.
    let main = std::thread::current().id();
    let on_worker = std::sync::atomic::AtomicUsize::new(0);
    for _ in 0..20000 {
        pools[1].run(6, |_| {
            let t0 = Instant::now();
            while t0.elapsed().as_nanos() < 400 {}
            if std::thread::current().id() != main {
                on_worker.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
    }
    println!(
        "worker ran {:.1}% of 6-task jobs' tasks",
        on_worker.into_inner() as f64 / 1200.0
    );
    for (t, v) in times.iter_mut().enumerate() {
        v.sort();
        let q = |p: f64| v[((v.len() as f64 - 1.0) * p) as usize] as f64 / 1000.0;
        println!(
            "{}t: p10 {:.2} µs, p50 {:.2} µs, p90 {:.2} µs, p99 {:.2} µs",
            t + 1,
            q(0.1),
            q(0.5),
            q(0.9),
            q(0.99)
        );
    }
}
