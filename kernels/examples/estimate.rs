//! End-to-end estimate of SmolLM2-135M's matmul time: one prefill of 512
//! tokens (30 layers × q, k, v, o, gate, up, down at m = 512, plus the
//! output head at m = 1) and one decoded token (the same 210 matmuls and
//! the head at m = 1), with distinct weights per layer as in the model (so
//! decode streams them from memory), for these kernels (Q4_1 and Q8_0
//! layers, each kernel set, 1 and 2 threads) and candle's `QMatMul` on the
//! same bytes, interleaved round by round; medians are printed.
//!
//! ```text
//! cargo run --release -p foveal-kernels --example estimate -- [rounds] [decode passes]
//! ```
//!
//! candle's thread count is fixed per process (`RAYON_NUM_THREADS`, default
//! all CPUs); run once with `RAYON_NUM_THREADS=1` for its 1-thread numbers.

use candle_core::quantized::{GgmlDType, QMatMul, ggml_file::qtensor_from_ggml};
use candle_core::{Device, Module, Tensor};
use foveal_kernels::{Format, Kernel, Pool, QMatrix, matmul_many_with, matmul_with};
use std::time::{Duration, Instant};

const LAYERS: usize = 30;
const HIDDEN: usize = 576;
/// (n, k) of q, k, v, o, gate, up, down.
const PROJ: [(usize, usize); 7] = [
    (576, 576),
    (192, 576),
    (192, 576),
    (576, 576),
    (1536, 576),
    (1536, 576),
    (576, 1536),
];
const VOCAB: usize = 49152;
const PROMPT: usize = 512;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// ggml bytes of a random matrix: plausible scales, random quants.
fn random_ggml(format: Format, n: usize, k: usize, rng: &mut Rng) -> Vec<u8> {
    let blocks = n * k / 32;
    let mut out = Vec::with_capacity(blocks * format.block_bytes());
    let h = |x: f32| half::f16::from_f32(x).to_bits().to_le_bytes();
    for _ in 0..blocks {
        match format {
            Format::Q4_1 => {
                out.extend_from_slice(&h(0.01));
                out.extend_from_slice(&h(-0.08));
                out.extend((0..16).map(|_| rng.next() as u8));
            }
            Format::Q8_0 => {
                out.extend_from_slice(&h(0.001));
                out.extend((0..32).map(|_| (rng.next() % 255) as u8 ^ 0x80));
            }
            _ => unreachable!(),
        }
    }
    out
}

struct Weights {
    ours: Vec<[QMatrix; 7]>,
    candle: Vec<Vec<QMatMul>>,
}

fn build(format: Format, rng: &mut Rng) -> Weights {
    let dtype = if format == Format::Q4_1 {
        GgmlDType::Q4_1
    } else {
        GgmlDType::Q8_0
    };
    let mut ours = Vec::new();
    let mut candle = Vec::new();
    for _ in 0..LAYERS {
        let mut c = Vec::new();
        let o: [QMatrix; 7] = std::array::from_fn(|i| {
            let (n, k) = PROJ[i];
            let bytes = random_ggml(format, n, k, rng);
            let qt = qtensor_from_ggml(dtype, &bytes, vec![n, k], &Device::Cpu).unwrap();
            c.push(QMatMul::from_qtensor(qt).unwrap());
            QMatrix::from_ggml(format, n, k, &bytes).unwrap()
        });
        ours.push(o);
        candle.push(c);
    }
    Weights { ours, candle }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn min(v: &[Duration]) -> Duration {
    v.iter().copied().min().unwrap_or_default()
}

#[derive(Clone, Copy)]
enum Config {
    Ours(Kernel, Format, usize),
    /// With `matmul_many` for q/k/v and gate/up.
    Fused(Kernel, Format, usize),
    Candle(Format),
}

/// One layer's matmuls, q/k/v and gate/up fused when `fused`.
fn layer(
    kernel: Kernel,
    layer: &[QMatrix; 7],
    x: &[f32],
    m: usize,
    out: &mut [f32],
    fused: bool,
    pool: &Pool,
) {
    if !fused {
        for w in layer {
            matmul_with(kernel, w, &x[..m * w.k()], m, &mut out[..m * w.n()], pool);
        }
        return;
    }
    let (qkv, rest) = out.split_at_mut(m * (576 + 192 + 192));
    let (q, kv) = qkv.split_at_mut(m * 576);
    let (k, v) = kv.split_at_mut(m * 192);
    let xs = &x[..m * HIDDEN];
    matmul_many_with(
        kernel,
        &[&layer[0], &layer[1], &layer[2]],
        xs,
        m,
        &mut [q, k, v],
        pool,
    );
    matmul_with(kernel, &layer[3], xs, m, &mut rest[..m * 576], pool);
    let (gate, up) = rest[..m * 3072].split_at_mut(m * 1536);
    matmul_many_with(
        kernel,
        &[&layer[4], &layer[5]],
        xs,
        m,
        &mut [gate, up],
        pool,
    );
    matmul_with(
        kernel,
        &layer[6],
        &x[..m * 1536],
        m,
        &mut out[..m * 576],
        pool,
    );
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let rounds = args.first().copied().unwrap_or(5);
    let decode_passes = args.get(1).copied().unwrap_or(20);
    let candle_threads = candle_core::utils::get_num_threads();
    let mut rng = Rng(0x1234_5678_9abc_def1);
    eprintln!("building weights…");
    let q41 = build(Format::Q4_1, &mut rng);
    let q80 = build(Format::Q8_0, &mut rng);
    let head_bytes = random_ggml(Format::Q8_0, VOCAB, HIDDEN, &mut rng);
    let head = QMatrix::from_ggml(Format::Q8_0, VOCAB, HIDDEN, &head_bytes).unwrap();
    let head_c = QMatMul::from_qtensor(
        qtensor_from_ggml(
            GgmlDType::Q8_0,
            &head_bytes,
            vec![VOCAB, HIDDEN],
            &Device::Cpu,
        )
        .unwrap(),
    )
    .unwrap();
    let pools = [Pool::new(1), Pool::new(2)];
    let x: Vec<f32> = (0..PROMPT * 1536)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    let xt = Tensor::from_slice(&x[..PROMPT * HIDDEN], (PROMPT, HIDDEN), &Device::Cpu).unwrap();
    let xt2 = Tensor::from_slice(&x[..PROMPT * 1536], (PROMPT, 1536), &Device::Cpu).unwrap();
    let x1 = Tensor::from_slice(&x[..HIDDEN], (1, HIDDEN), &Device::Cpu).unwrap();
    let x12 = Tensor::from_slice(&x[..1536], (1, 1536), &Device::Cpu).unwrap();
    let mut out = vec![0f32; PROMPT * 4096];
    let mut logits = vec![0f32; VOCAB];

    let mut configs = Vec::new();
    for kernel in Kernel::available()
        .into_iter()
        .filter(|k| *k != Kernel::Scalar)
    {
        for format in [Format::Q4_1, Format::Q8_0] {
            for t in [1, 2] {
                configs.push(Config::Ours(kernel, format, t));
            }
        }
    }
    configs.push(Config::Fused(Kernel::best(), Format::Q4_1, 1));
    configs.push(Config::Fused(Kernel::best(), Format::Q4_1, 2));
    configs.push(Config::Candle(Format::Q8_0));
    configs.push(Config::Candle(Format::Q4_1));
    // `ESTIMATE_ONLY=avx512vnni,candle` keeps the configs whose name has one
    // of the words; `ESTIMATE_DECODE_ONLY=1` skips the prefills.
    let name = |c: &Config| match c {
        Config::Ours(k, f, t) => format!("ours {} {f} {t}t", k.name()),
        Config::Fused(k, f, t) => format!("ours {} {f} {t}t fused", k.name()),
        Config::Candle(f) => format!("candle {f} {candle_threads}t"),
    };
    if let Ok(only) = std::env::var("ESTIMATE_ONLY") {
        configs.retain(|c| only.split(',').any(|w| name(c).contains(w.trim())));
    }
    let decode_only = std::env::var_os("ESTIMATE_DECODE_ONLY").is_some();

    let mut prefill: Vec<Vec<Duration>> = vec![Vec::new(); configs.len()];
    let mut decode: Vec<Vec<Duration>> = vec![Vec::new(); configs.len()];
    for round in 0..rounds {
        eprintln!("round {}/{rounds}", round + 1);
        for (ci, &c) in configs.iter().enumerate() {
            let weights = |f: Format| if f == Format::Q4_1 { &q41 } else { &q80 };
            // Prefill: 512 rows through every layer, then the head for the
            // last row.
            let t0 = Instant::now();
            match c {
                _ if decode_only => {}
                Config::Ours(kernel, format, t) | Config::Fused(kernel, format, t) => {
                    let pool = &pools[t - 1];
                    let fused = matches!(c, Config::Fused(..));
                    for l in &weights(format).ours {
                        layer(kernel, l, &x, PROMPT, &mut out, fused, pool);
                    }
                    matmul_with(kernel, &head, &x[..HIDDEN], 1, &mut logits, pool);
                }
                Config::Candle(format) => {
                    for layer in &weights(format).candle {
                        for (i, w) in layer.iter().enumerate() {
                            let xin = if PROJ[i].1 == HIDDEN { &xt } else { &xt2 };
                            std::hint::black_box(w.forward(xin).unwrap());
                        }
                    }
                    std::hint::black_box(head_c.forward(&x1).unwrap());
                }
            }
            prefill[ci].push(t0.elapsed());
            // Decode: one row through every layer and the head.
            for _ in 0..decode_passes {
                let t0 = Instant::now();
                match c {
                    Config::Ours(kernel, format, t) | Config::Fused(kernel, format, t) => {
                        let pool = &pools[t - 1];
                        let fused = matches!(c, Config::Fused(..));
                        for l in &weights(format).ours {
                            layer(kernel, l, &x, 1, &mut out, fused, pool);
                        }
                        matmul_with(kernel, &head, &x[..HIDDEN], 1, &mut logits, pool);
                    }
                    Config::Candle(format) => {
                        for layer in &weights(format).candle {
                            for (i, w) in layer.iter().enumerate() {
                                let xin = if PROJ[i].1 == HIDDEN { &x1 } else { &x12 };
                                std::hint::black_box(w.forward(xin).unwrap());
                            }
                        }
                        std::hint::black_box(head_c.forward(&x1).unwrap());
                    }
                }
                decode[ci].push(t0.elapsed());
            }
        }
    }

    let flops_layers = 2.0 * (LAYERS * PROJ.iter().map(|(n, k)| n * k).sum::<usize>()) as f64;
    let flops_head = 2.0 * (VOCAB * HIDDEN) as f64;
    println!(
        "SmolLM2-135M matmuls: median (and fastest) of {rounds} prefills and {} decode passes; head Q8_0 in every row",
        rounds * decode_passes
    );
    println!(
        "{:<28} {:>20} {:>7} {:>7} {:>18} {:>6} {:>6}",
        "config", "prefill 512 (min)", "tok/s", "GFLOP/s", "decode/tok (min)", "tok/s", "GB/s"
    );
    for (ci, c) in configs.iter().enumerate() {
        let (pmin, dmin) = (
            min(&prefill[ci]).as_secs_f64(),
            min(&decode[ci]).as_secs_f64(),
        );
        let p = median(&mut prefill[ci]).as_secs_f64();
        let d = median(&mut decode[ci]).as_secs_f64();
        let format = match c {
            Config::Ours(_, f, _) | Config::Fused(_, f, _) | Config::Candle(f) => *f,
        };
        let name = name(c);
        let layer_bytes: usize = LAYERS
            * PROJ
                .iter()
                .map(|(n, k)| format.row_bytes(*k) * n)
                .sum::<usize>();
        let bytes = (layer_bytes + head.size_bytes()) as f64;
        println!(
            "{name:<28} {:>9.1} ({:>6.1})ms {:>7.0} {:>7.1} {:>7.2} ({:>5.2})ms {:>6.0} {:>6.1}",
            p * 1e3,
            pmin * 1e3,
            PROMPT as f64 / p,
            (flops_layers * PROMPT as f64 + flops_head) / p / 1e9,
            d * 1e3,
            dmin * 1e3,
            1.0 / d,
            bytes / d / 1e9,
        );
    }
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average at the end: {}", l.trim());
    }
}
