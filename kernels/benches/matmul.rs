//! SmolLM2-135M's matmul shapes at m = 1 (decode) and m = 512 (prefill),
//! Q4_1 and Q8_0, these kernels with 1 and 2 threads against candle's
//! `QMatMul` on the same bytes. Throughput is in FLOP (2 per multiply-add),
//! so criterion's `elem/s` reads as FLOP/s.
//!
//! ```text
//! cargo bench -p foveal-kernels --bench matmul [-- FILTER]
//! ```
//!
//! candle's threads are fixed per process (`RAYON_NUM_THREADS`, default all
//! CPUs). `FOVEAL_KERNELS=avx2` (or `avxvnni`, `avx512vnni`, `scalar`)
//! picks a kernel set other than the fastest available.

use candle_core::quantized::{GgmlDType, QMatMul, ggml_file::qtensor_from_ggml};
use candle_core::{Device, Module, Tensor};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use foveal_kernels::{Format, Kernel, Pool, QMatrix, matmul};
use std::time::Duration;

/// (name, n, k)
const SHAPES: [(&str, usize, usize); 5] = [
    ("q_o_576x576", 576, 576),
    ("k_v_192x576", 192, 576),
    ("gate_up_1536x576", 1536, 576),
    ("down_576x1536", 576, 1536),
    ("head_49152x576", 49152, 576),
];

fn weights(n: usize, k: usize) -> Vec<f32> {
    (0..n * k)
        .map(|i| ((i.wrapping_mul(2_654_435_761) >> 7) % 2001) as f32 / 1000.0 - 1.0)
        .collect()
}

fn bench(c: &mut Criterion) {
    let pools = [Pool::new(1), Pool::new(2)];
    let candle_threads = candle_core::utils::get_num_threads();
    eprintln!(
        "kernels: {}, candle threads: {candle_threads}",
        Kernel::detect().name()
    );
    for (format, dtype) in [
        (Format::Q4_1, GgmlDType::Q4_1),
        (Format::Q8_0, GgmlDType::Q8_0),
    ] {
        for (name, n, k) in SHAPES {
            let w = QMatrix::quantize(format, n, k, &weights(n, k)).unwrap();
            let qt = qtensor_from_ggml(dtype, &w.to_ggml(), vec![n, k], &Device::Cpu).unwrap();
            let cw = QMatMul::from_qtensor(qt).unwrap();
            for m in [1usize, 512] {
                if n == 49152 && m != 1 {
                    continue; // the head runs for the last position only
                }
                let x: Vec<f32> = (0..m * k)
                    .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
                    .collect();
                let xt = Tensor::from_slice(&x, (m, k), &Device::Cpu).unwrap();
                let mut out = vec![0f32; m * n];
                let mut g = c.benchmark_group(format!("{format}/m{m}/{name}"));
                g.throughput(Throughput::Elements((2 * m * n * k) as u64));
                g.warm_up_time(Duration::from_millis(500));
                g.measurement_time(Duration::from_secs(2));
                g.sample_size(if m == 1 { 50 } else { 15 });
                for (t, pool) in pools.iter().enumerate() {
                    g.bench_function(BenchmarkId::new("ours", format!("{}t", t + 1)), |b| {
                        b.iter(|| matmul(&w, &x, m, &mut out, pool))
                    });
                }
                g.bench_function(
                    BenchmarkId::new("candle", format!("{candle_threads}t")),
                    |b| b.iter(|| cw.forward(&xt).unwrap()),
                );
                g.finish();
            }
        }
    }
}

/// The cost of one `Pool::run` of two empty tasks: the dispatch overhead
/// each matmul pays.
fn dispatch(c: &mut Criterion) {
    let mut g = c.benchmark_group("pool");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    for threads in [1, 2] {
        let pool = Pool::new(threads);
        g.bench_function(
            BenchmarkId::new("run_2_empty_tasks", format!("{threads}t")),
            |b| {
                b.iter(|| {
                    pool.run(2, |t| {
                        std::hint::black_box(t);
                    })
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, dispatch, bench);
criterion_main!(benches);
