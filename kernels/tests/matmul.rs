//! Every kernel set against the scalar reference (bit for bit), the scalar
//! reference against dequantize-then-multiply in f64 (within the bound of
//! activation quantization), and against candle's quantized matmul on the
//! same bytes.

use foveal_kernels::{Error, Format, Kernel, Pool, QMatrix, matmul, matmul_with};
use proptest::prelude::*;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Roughly normal, in about -3..3.
    fn normal(&mut self) -> f32 {
        let s: f32 = (0..4)
            .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32)
            .sum();
        (s - 2.0) * 1.7
    }
    fn vec(&mut self, len: usize, scale: f32) -> Vec<f32> {
        (0..len).map(|_| self.normal() * scale).collect()
    }
}

const QUANTIZED: [Format; 3] = [Format::Q4_0, Format::Q4_1, Format::Q8_0];

/// SmolLM2-135M's projections (k, n), and odd ones.
const SHAPES: [(usize, usize); 8] = [
    (576, 576),
    (576, 192),
    (576, 1536),
    (1536, 576),
    (32, 1),
    (64, 13),
    (96, 37),
    (160, 100),
];
const MS: [usize; 6] = [1, 2, 3, 5, 17, 64];

fn weights(format: Format, n: usize, k: usize, seed: u64) -> QMatrix {
    let mut rng = Rng(seed | 1);
    let mut w = rng.vec(n * k, 0.05);
    // Some rows with an offset, so that Q4_1's minimum matters, and one
    // all-zero block.
    for (i, v) in w.iter_mut().enumerate() {
        if (i / k) % 3 == 1 {
            *v += 0.02;
        }
    }
    for v in w.iter_mut().take(32) {
        *v = 0.0;
    }
    QMatrix::quantize(format, n, k, &w).unwrap()
}

fn acts(m: usize, k: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed.wrapping_mul(7919) | 1);
    let mut x = rng.vec(m * k, 1.0);
    // An outlier feature, as transformers have, and a zero row block.
    for r in 0..m {
        x[r * k + (r * 7) % k] *= 20.0;
    }
    for v in x.iter_mut().take(32) {
        *v = 0.0;
    }
    x
}

fn run(kernel: Kernel, w: &QMatrix, x: &[f32], m: usize, pool: &Pool) -> Vec<f32> {
    let mut out = vec![f32::NAN; m * w.n()];
    matmul_with(kernel, w, x, m, &mut out, pool);
    out
}

/// `x · dequant(w)ᵀ` in f64, and for each output the bound on the error
/// that quantizing `x` to 8 bits per block of 32 can cause:
/// `Σ_blocks Σ |w| · amax_block / 254`, plus float slack.
fn reference(w: &QMatrix, x: &[f32], m: usize) -> (Vec<f64>, Vec<f64>) {
    let (n, k) = (w.n(), w.k());
    let wd = w.dequantize();
    let mut y = vec![0f64; m * n];
    let mut bound = vec![0f64; m * n];
    for r in 0..m {
        let xr = &x[r * k..(r + 1) * k];
        let amax: Vec<f64> = xr
            .chunks(32)
            .map(|b| b.iter().fold(0f64, |a, v| a.max(v.abs() as f64)))
            .collect();
        for j in 0..n {
            let wr = &wd[j * k..(j + 1) * k];
            let (mut s, mut b, mut mag) = (0f64, 0f64, 0f64);
            for i in 0..k {
                s += wr[i] as f64 * xr[i] as f64;
                b += (wr[i] as f64).abs() * amax[i / 32] / 254.0;
                mag += (wr[i] as f64 * xr[i] as f64).abs();
            }
            y[r * n + j] = s;
            bound[r * n + j] = b * 1.01 + mag * 1e-5 + 1e-6;
        }
    }
    (y, bound)
}

fn assert_same(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            x.to_bits() == y.to_bits(),
            "{what}: element {i}: {x} != {y}"
        );
    }
}

fn assert_within(got: &[f32], want: &[f64], bound: &[f64], what: &str) {
    for (i, ((g, w), b)) in got.iter().zip(want).zip(bound).enumerate() {
        let e = (*g as f64 - w).abs();
        assert!(
            e <= *b,
            "{what}: element {i}: got {g}, want {w}, error {e} > bound {b}"
        );
    }
}

#[test]
fn kernels_match_scalar_bit_for_bit_and_dequantized_reference() {
    let pools = [Pool::new(1), Pool::new(2), Pool::new(3)];
    let mut seed = 1;
    for format in QUANTIZED {
        for (k, n) in SHAPES {
            let w = weights(format, n, k, seed);
            for m in MS {
                seed += 1;
                let x = acts(m, k, seed);
                let pool = &pools[seed as usize % 3];
                let scalar = run(Kernel::Scalar, &w, &x, m, pool);
                let (want, bound) = reference(&w, &x, m);
                assert_within(
                    &scalar,
                    &want,
                    &bound,
                    &format!("scalar {format} k={k} n={n} m={m}"),
                );
                for kernel in Kernel::available() {
                    let got = run(kernel, &w, &x, m, pool);
                    assert_same(
                        &got,
                        &scalar,
                        &format!("{kernel:?} {format} k={k} n={n} m={m}"),
                    );
                }
            }
        }
    }
}

#[test]
fn output_head_shape() {
    // The tied output head: 576 → 49152, decode and a few rows.
    let pool = Pool::new(2);
    for format in QUANTIZED {
        let (k, n) = (576, 49152);
        let w = weights(format, n, k, 99);
        for m in [1, 2, 5] {
            let x = acts(m, k, 1234 + m as u64);
            let scalar = run(Kernel::Scalar, &w, &x, m, &pool);
            let (want, bound) = reference(&w, &x, m);
            assert_within(
                &scalar,
                &want,
                &bound,
                &format!("scalar {format} head m={m}"),
            );
            for kernel in Kernel::available() {
                let got = run(kernel, &w, &x, m, &pool);
                assert_same(&got, &scalar, &format!("{kernel:?} {format} head m={m}"));
            }
        }
    }
}

#[test]
fn float_formats() {
    let pool = Pool::new(2);
    for format in [Format::F32, Format::F16] {
        for (k, n) in [(576, 192), (37, 5), (8, 3), (1, 1), (100, 33)] {
            let mut rng = Rng(k as u64 * 31 + n as u64);
            let w = QMatrix::quantize(format, n, k, &rng.vec(n * k, 0.1)).unwrap();
            let wd = w.dequantize();
            for m in MS {
                let x = rng.vec(m * k, 1.0);
                for kernel in Kernel::available() {
                    let got = run(kernel, &w, &x, m, &pool);
                    for r in 0..m {
                        for j in 0..n {
                            let (mut s, mut mag) = (0f64, 0f64);
                            for i in 0..k {
                                let p = wd[j * k + i] as f64 * x[r * k + i] as f64;
                                s += p;
                                mag += p.abs();
                            }
                            let g = got[r * n + j] as f64;
                            assert!(
                                (g - s).abs() <= mag * 1e-5 + 1e-6,
                                "{kernel:?} {format} k={k} n={n} m={m} [{r},{j}]: {g} vs {s}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn matches_candle() {
    use candle_core::quantized::{GgmlDType, QMatMul, ggml_file::qtensor_from_ggml};
    use candle_core::{Device, Module, Tensor};
    let pool = Pool::new(2);
    for (format, dtype) in [
        (Format::Q4_0, GgmlDType::Q4_0),
        (Format::Q4_1, GgmlDType::Q4_1),
        (Format::Q8_0, GgmlDType::Q8_0),
        (Format::F16, GgmlDType::F16),
        (Format::F32, GgmlDType::F32),
    ] {
        for (k, n) in [(576, 576), (1536, 576), (576, 1536), (64, 13)] {
            let w = weights(format, n, k, (k * n) as u64);
            let bytes = w.to_ggml();
            let qt = qtensor_from_ggml(dtype, &bytes, vec![n, k], &Device::Cpu).unwrap();
            let mm = QMatMul::from_qtensor(qt).unwrap();
            for m in [1, 3, 17] {
                let x = acts(m, k, (m * k + n) as u64);
                let xt = Tensor::from_slice(&x, (m, k), &Device::Cpu).unwrap();
                let theirs: Vec<f32> = mm
                    .forward(&xt)
                    .unwrap()
                    .flatten_all()
                    .unwrap()
                    .to_vec1()
                    .unwrap();
                let mut ours = vec![0f32; m * n];
                matmul(&w, &x, m, &mut ours, &pool);
                let (want, bound) = reference(&w, &x, m);
                // Both quantize the activations (candle with f16 scales and
                // a different rounding): each within the bound of the exact
                // product, so within twice it of each other.
                assert_within(
                    &ours,
                    &want,
                    &bound,
                    &format!("ours {format} k={k} n={n} m={m}"),
                );
                let twice: Vec<f64> = bound.iter().map(|b| 2.0 * b + 1e-4).collect();
                let theirs64: Vec<f64> = theirs.iter().map(|&v| v as f64).collect();
                assert_within(
                    &ours,
                    &theirs64,
                    &twice,
                    &format!("vs candle {format} k={k} n={n} m={m}"),
                );
            }
        }
    }
}

#[test]
fn candle_reads_the_same_weights() {
    use candle_core::Device;
    use candle_core::quantized::{GgmlDType, ggml_file::qtensor_from_ggml};
    for (format, dtype) in [
        (Format::Q4_0, GgmlDType::Q4_0),
        (Format::Q4_1, GgmlDType::Q4_1),
        (Format::Q8_0, GgmlDType::Q8_0),
        (Format::F16, GgmlDType::F16),
    ] {
        let (n, k) = (21, 96);
        let w = weights(format, n, k, 5);
        let qt = qtensor_from_ggml(dtype, &w.to_ggml(), vec![n, k], &Device::Cpu).unwrap();
        let theirs: Vec<f32> = qt
            .dequantize(&Device::Cpu)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        assert_eq!(w.dequantize(), theirs, "{format}");
        let mut row = vec![0f32; k];
        for r in 0..n {
            w.dequantize_row(r, &mut row);
            assert_eq!(row, theirs[r * k..(r + 1) * k], "{format} row {r}");
        }
    }
}

#[test]
fn ggml_bytes_round_trip_and_errors() {
    for format in Format::ALL {
        let (n, k) = (13, 64);
        let bytes = weights(format, n, k, 3).to_ggml();
        assert_eq!(bytes.len(), n * format.row_bytes(k));
        let w = QMatrix::from_ggml(format, n, k, &bytes).unwrap();
        assert_eq!(w.to_ggml(), bytes);
        assert_eq!((w.n(), w.k(), w.format()), (n, k, format));
        let e = QMatrix::from_ggml(format, n, k, &bytes[1..]).unwrap_err();
        assert!(
            matches!(e, Error::BadLength { expected, actual, .. } if expected == bytes.len() && actual == bytes.len() - 1)
        );
        assert!(e.to_string().contains("bytes"), "{e}");
        assert_eq!(Format::from_ggml_type(format.ggml_type()), Some(format));
    }
    assert!(matches!(
        QMatrix::from_ggml(Format::Q8_0, 2, 40, &[0; 100]),
        Err(Error::BadK { k: 40, .. })
    ));
    assert!(matches!(
        QMatrix::from_ggml(Format::Q8_0, 0, 32, &[]),
        Err(Error::BadShape { .. })
    ));
    assert!(QMatrix::from_ggml(Format::F32, 3, 5, &[0; 60]).is_ok());
}

#[test]
#[should_panic(expected = "m × k")]
fn wrong_input_length_panics() {
    let w = weights(Format::Q8_0, 8, 32, 1);
    let mut out = vec![0.0; 8];
    matmul(&w, &[0.0; 31], 1, &mut out, &Pool::new(1));
}

#[test]
fn zero_rows_is_a_no_op() {
    let w = weights(Format::Q4_1, 8, 32, 1);
    matmul(&w, &[], 0, &mut [], &Pool::new(2));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn random_shapes(
        f in 0usize..3,
        blocks in 1usize..12,
        n in 1usize..80,
        m in 1usize..12,
        threads in 1usize..4,
        seed in any::<u64>(),
    ) {
        let format = QUANTIZED[f];
        let k = blocks * 32;
        let w = weights(format, n, k, seed);
        let x = acts(m, k, seed ^ 0xabcdef);
        let pool = Pool::new(threads);
        let scalar = run(Kernel::Scalar, &w, &x, m, &pool);
        let (want, bound) = reference(&w, &x, m);
        assert_within(&scalar, &want, &bound, "scalar");
        for kernel in Kernel::available() {
            let got = run(kernel, &w, &x, m, &pool);
            assert_same(&got, &scalar, &format!("{kernel:?}"));
        }
    }
}

#[test]
fn many_matrices_sharing_an_input_match_separate_calls() {
    use foveal_kernels::matmul_many_with;
    let k = 576;
    let ws = [
        weights(Format::Q4_1, 576, k, 11),
        weights(Format::Q8_0, 192, k, 12),
        weights(Format::Q4_0, 37, k, 13),
        QMatrix::quantize(Format::F16, 9, k, &Rng(14).vec(9 * k, 0.1)).unwrap(),
    ];
    let refs: Vec<&QMatrix> = ws.iter().collect();
    for threads in [1, 2] {
        let pool = Pool::new(threads);
        for m in [1, 5] {
            let x = acts(m, k, 77 + m as u64);
            for kernel in Kernel::available() {
                let mut outs: Vec<Vec<f32>> =
                    ws.iter().map(|w| vec![f32::NAN; m * w.n()]).collect();
                let mut views: Vec<&mut [f32]> =
                    outs.iter_mut().map(|o| o.as_mut_slice()).collect();
                matmul_many_with(kernel, &refs, &x, m, &mut views, &pool);
                for (w, got) in ws.iter().zip(&outs) {
                    let want = run(kernel, w, &x, m, &pool);
                    assert_same(got, &want, &format!("{kernel:?} {} m={m}", w.format()));
                }
            }
        }
    }
}
