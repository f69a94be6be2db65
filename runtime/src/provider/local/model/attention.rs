//! Causal attention over the KV cache, for a chunk of query positions.
//!
//! The work is split in tasks of one key/value head and up to
//! [`POSITIONS`] query positions: the query heads sharing that key/value
//! head at those positions, taken [`R`] at a time. For each group of
//! queries, the scores of [`KEY_BLOCK`] consecutive keys are computed
//! together from the transposed keys ([`LayerView`]): per dimension one
//! load of sixteen keys and one multiply–add per query. The values are
//! summed the same way, sixteen dimensions and `R` queries at a time.
//!
//! Every score is `Σ_d q[d]·k[d]` summed over `d` in order, and every
//! output `Σ_j p_j·v_j[d]` over the keys in order, whatever the number of
//! queries in the chunk: a position's attention is the same floats
//! whether it is read in a long prompt or on its own, so a reply does not
//! depend on how much of its prompt came from the cache. Keys past a
//! query's own position are scored with the others of their block and
//! given weight 0, which adds exactly nothing.
//!
//! With AVX2 and FMA (detected at run time) the loops are compiled for
//! them and each multiply–add is fused; elsewhere they are plain Rust.

use std::cell::RefCell;
use std::sync::{Mutex, PoisonError};

use super::cache::{KEY_BLOCK, LayerView};
use super::config::Config;
use super::matmul::Backend;
use super::ops;

/// Query positions per task.
const POSITIONS: usize = 4;

/// Queries scored together against each block of keys.
const R: usize = 6;

/// Dimensions of the values summed together.
const DIMS: usize = 16;

thread_local! {
    /// Each thread's scores: `R × keys`.
    static SCORES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// One query: a head of one position.
#[derive(Clone, Copy)]
struct Query<'a> {
    q: &'a [f32],
    /// Keys it attends to: its position + 1.
    keys: usize,
    /// Its index among the outputs (`position × heads + head`).
    out: usize,
}

/// `out = softmax(q·kᵀ·scale)·v` for the queries `q` (`m × q_dim`, at
/// positions `pos0..pos0 + m`) over the keys and values of positions
/// `0..pos0 + m` in `kv`, into `out` (`m × q_dim`).
pub(crate) fn attention(
    backend: &Backend,
    c: &Config,
    q: &[f32],
    kv: LayerView<'_>,
    pos0: usize,
    out: &mut [f32],
) {
    let (hd, heads, kv_heads) = (c.head_dim, c.heads, c.kv_heads);
    let (q_dim, group) = (c.q_dim(), heads / kv_heads);
    let m = q.len() / q_dim;
    // candle divides by sqrt(head_dim) as an f32 multiplication.
    let scale = (1.0 / (hd as f64).sqrt()) as f32;
    let fused = fma_available();
    // Each output is written by the one task that owns its query; the
    // locks are never contended.
    let outs: Vec<Mutex<&mut [f32]>> = out.chunks_mut(hd).map(Mutex::new).collect();
    let blocks = m.div_ceil(POSITIONS);
    backend.run(kv_heads * blocks, |task| {
        let (g, block) = (task % kv_heads, task / kv_heads);
        let positions = block * POSITIONS..((block + 1) * POSITIONS).min(m);
        let queries: Vec<Query<'_>> = positions
            .flat_map(|i| {
                (g * group..(g + 1) * group).map(move |h| Query {
                    q: &q[i * q_dim + h * hd..][..hd],
                    keys: pos0 + i + 1,
                    out: i * heads + h,
                })
            })
            .collect();
        let mut outputs = vec![0.0f32; R * hd];
        SCORES.with(|scores| {
            let mut scores = scores.borrow_mut();
            for group in queries.chunks(R) {
                let keys = group.iter().map(|q| q.keys).max().unwrap_or(0);
                let width = keys.next_multiple_of(KEY_BLOCK);
                scores.resize(R * width, 0.0);
                let outputs = &mut outputs[..group.len() * hd];
                attend(
                    fused,
                    group,
                    kv,
                    g * hd,
                    hd,
                    scale,
                    width,
                    &mut scores,
                    outputs,
                );
                for (query, o) in group.iter().zip(outputs.chunks_exact(hd)) {
                    outs[query.out]
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .copy_from_slice(o);
                }
            }
        });
    });
}

/// Whether the fused AVX2 loops run on this CPU.
fn fma_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Attention of up to [`R`] queries of one key/value head (its
/// dimensions start at `offset` in a position's keys and values) into
/// `out` (`queries × hd`). `scores` has room for `R × width` floats.
#[allow(clippy::too_many_arguments)]
fn attend(
    fused: bool,
    queries: &[Query<'_>],
    kv: LayerView<'_>,
    offset: usize,
    hd: usize,
    scale: f32,
    width: usize,
    scores: &mut [f32],
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if fused {
        // SAFETY: `fused` is true only when the CPU has AVX2 and FMA
        // (`fma_available`).
        unsafe { attend_avx2(queries, kv, offset, hd, scale, width, scores, out) };
        return;
    }
    let _ = fused;
    attend_body::<false>(queries, kv, offset, hd, scale, width, scores, out);
}

/// [`attend_body::<true>`] with AVX2 intrinsics: the same fused
/// multiply–adds in the same order, with the accumulators of six
/// queries × sixteen keys (or dimensions) in twelve registers, and a
/// vectorised softmax ([`softmax_avx2`]). Heads whose width is not a
/// multiple of sixteen take [`attend_body`].
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn attend_avx2(
    queries: &[Query<'_>],
    kv: LayerView<'_>,
    offset: usize,
    hd: usize,
    scale: f32,
    width: usize,
    scores: &mut [f32],
    out: &mut [f32],
) {
    use std::arch::x86_64::{
        __m256, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_set1_ps, _mm256_setzero_ps,
        _mm256_storeu_ps,
    };
    let n = queries.len();
    if n == 0 || !hd.is_multiple_of(DIMS) {
        return attend_body::<true>(queries, kv, offset, hd, scale, width, scores, out);
    }
    // Missing queries repeat the last one; their results are dropped.
    let qs: [&[f32]; R] = std::array::from_fn(|r| &queries[r.min(n - 1)].q[..hd]);
    let stride = kv.stride;
    let kv_dim = kv.values.len() / stride;
    let scale = _mm256_set1_ps(scale);
    for j0 in (0..width).step_by(KEY_BLOCK) {
        let mut acc: [__m256; 2 * R] = [_mm256_setzero_ps(); 2 * R];
        for d in 0..hd {
            let start = (offset + d) * stride + j0;
            let keys = &kv.keys[start..start + KEY_BLOCK];
            // SAFETY: `keys` holds 16 floats: two unaligned loads of 8.
            let (k0, k1) = unsafe {
                (
                    _mm256_loadu_ps(keys.as_ptr()),
                    _mm256_loadu_ps(keys.as_ptr().add(8)),
                )
            };
            for (r, q) in qs.iter().enumerate() {
                let q = _mm256_set1_ps(q[d]);
                acc[2 * r] = _mm256_fmadd_ps(q, k0, acc[2 * r]);
                acc[2 * r + 1] = _mm256_fmadd_ps(q, k1, acc[2 * r + 1]);
            }
        }
        for r in 0..n {
            let row = &mut scores[r * width + j0..r * width + j0 + KEY_BLOCK];
            // SAFETY: `row` holds 16 floats: two unaligned stores of 8.
            unsafe {
                _mm256_storeu_ps(row.as_mut_ptr(), _mm256_mul_ps(acc[2 * r], scale));
                _mm256_storeu_ps(
                    row.as_mut_ptr().add(8),
                    _mm256_mul_ps(acc[2 * r + 1], scale),
                );
            }
        }
    }
    for (r, query) in queries.iter().enumerate() {
        let row = &mut scores[r * width..(r + 1) * width];
        let (own, past) = row.split_at_mut(query.keys);
        softmax_avx2(own);
        past.fill(0.0);
    }
    let keys = queries.iter().map(|q| q.keys).max().unwrap_or(0);
    let rows: [&[f32]; R] =
        std::array::from_fn(|r| &scores[r.min(n - 1) * width..r.min(n - 1) * width + keys]);
    for d0 in (0..hd).step_by(DIMS) {
        let mut acc: [__m256; 2 * R] = [_mm256_setzero_ps(); 2 * R];
        for j in 0..keys {
            let start = j * kv_dim + offset + d0;
            let v = &kv.values[start..start + DIMS];
            // SAFETY: `v` holds 16 floats: two unaligned loads of 8.
            let (v0, v1) = unsafe {
                (
                    _mm256_loadu_ps(v.as_ptr()),
                    _mm256_loadu_ps(v.as_ptr().add(8)),
                )
            };
            for (r, row) in rows.iter().enumerate() {
                let p = _mm256_set1_ps(row[j]);
                acc[2 * r] = _mm256_fmadd_ps(p, v0, acc[2 * r]);
                acc[2 * r + 1] = _mm256_fmadd_ps(p, v1, acc[2 * r + 1]);
            }
        }
        for r in 0..n {
            let o = &mut out[r * hd + d0..r * hd + d0 + DIMS];
            // SAFETY: `o` holds 16 floats: two unaligned stores of 8.
            unsafe {
                _mm256_storeu_ps(o.as_mut_ptr(), acc[2 * r]);
                _mm256_storeu_ps(o.as_mut_ptr().add(8), acc[2 * r + 1]);
            }
        }
    }
}

/// Softmax in place with AVX2: the max, `exp(x − max)` by
/// [`exp_avx2`] with eight partial sums, each divided by the sum.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn softmax_avx2(xs: &mut [f32]) {
    use std::arch::x86_64::{
        __m256i, _mm256_add_ps, _mm256_and_ps, _mm256_castsi256_ps, _mm256_cmpgt_epi32,
        _mm256_div_ps, _mm256_maskload_ps, _mm256_maskstore_ps, _mm256_set1_epi32, _mm256_set1_ps,
        _mm256_setr_epi32, _mm256_setzero_ps, _mm256_storeu_ps, _mm256_sub_ps,
    };
    if xs.is_empty() {
        return;
    }
    let max = xs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let lanes: __m256i = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    // Lanes `i < left` of a block of eight.
    let mask = |left: usize| _mm256_cmpgt_epi32(_mm256_set1_epi32(left.min(8) as i32), lanes);
    let vmax = _mm256_set1_ps(max);
    let mut sum = _mm256_setzero_ps();
    for i in (0..xs.len()).step_by(8) {
        let m = mask(xs.len() - i);
        let p = xs[i..].as_mut_ptr();
        // SAFETY: the mask covers only the `min(8, len − i)` floats of
        // `xs` from `i` on; the other lanes are neither read nor written.
        unsafe {
            let e = exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(p, m), vmax));
            let e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
            _mm256_maskstore_ps(p, m, e);
            sum = _mm256_add_ps(sum, e);
        }
    }
    let mut partial = [0.0f32; 8];
    // SAFETY: `partial` holds 8 floats.
    unsafe { _mm256_storeu_ps(partial.as_mut_ptr(), sum) };
    let total = ((partial[0] + partial[4]) + (partial[1] + partial[5]))
        + ((partial[2] + partial[6]) + (partial[3] + partial[7]));
    let total = _mm256_set1_ps(total);
    for i in (0..xs.len()).step_by(8) {
        let m = mask(xs.len() - i);
        let p = xs[i..].as_mut_ptr();
        // SAFETY: as above.
        unsafe { _mm256_maskstore_ps(p, m, _mm256_div_ps(_mm256_maskload_ps(p, m), total)) };
    }
}

/// `e^x` of eight floats: Cephes' `expf` (a degree-5 polynomial on
/// `x − n·ln 2`, times `2^n`), relative error about 2·10⁻⁷ for `x` in
/// `[−87, 88]`; below, a tiny positive number.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn exp_avx2(x: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::{
        _mm256_add_epi32, _mm256_add_ps, _mm256_castsi256_ps, _mm256_cvtps_epi32, _mm256_floor_ps,
        _mm256_fmadd_ps, _mm256_fnmadd_ps, _mm256_max_ps, _mm256_min_ps, _mm256_mul_ps,
        _mm256_set1_epi32, _mm256_set1_ps, _mm256_slli_epi32,
    };
    let x = _mm256_min_ps(_mm256_set1_ps(88.376_26), x);
    let x = _mm256_max_ps(_mm256_set1_ps(-87.336_55), x);
    let n = _mm256_floor_ps(_mm256_fmadd_ps(
        x,
        _mm256_set1_ps(std::f32::consts::LOG2_E),
        _mm256_set1_ps(0.5),
    ));
    let x = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
    let x = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), x);
    let mut y = _mm256_set1_ps(1.987_569_1e-4);
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        0.166_666_65,
        0.5,
    ] {
        y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(c));
    }
    let y = _mm256_fmadd_ps(
        y,
        _mm256_mul_ps(x, x),
        _mm256_add_ps(x, _mm256_set1_ps(1.0)),
    );
    let pow2 = _mm256_slli_epi32::<23>(_mm256_add_epi32(
        _mm256_cvtps_epi32(n),
        _mm256_set1_epi32(127),
    ));
    _mm256_mul_ps(y, _mm256_castsi256_ps(pow2))
}

/// `a·b + c`, fused when `FUSED`.
#[inline(always)]
fn madd<const FUSED: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FUSED { a.mul_add(b, c) } else { a * b + c }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attend_body<const FUSED: bool>(
    queries: &[Query<'_>],
    kv: LayerView<'_>,
    offset: usize,
    hd: usize,
    scale: f32,
    width: usize,
    scores: &mut [f32],
    out: &mut [f32],
) {
    let n = queries.len();
    let stride = kv.stride;
    let kv_dim = kv.values.len() / stride;
    // Scores, KEY_BLOCK keys at a time for all the queries.
    for j0 in (0..width).step_by(KEY_BLOCK) {
        let mut acc = [[0.0f32; KEY_BLOCK]; R];
        for d in 0..hd {
            let start = (offset + d) * stride + j0;
            let keys = &kv.keys[start..start + KEY_BLOCK];
            for (acc, query) in acc.iter_mut().zip(queries) {
                let q = query.q[d];
                for (a, &k) in acc.iter_mut().zip(keys) {
                    *a = madd::<FUSED>(q, k, *a);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate().take(n) {
            for (s, a) in scores[r * width + j0..][..KEY_BLOCK].iter_mut().zip(acc) {
                *s = a * scale;
            }
        }
    }
    // Softmax over each query's own keys; weight 0 past them.
    for (r, query) in queries.iter().enumerate() {
        let row = &mut scores[r * width..(r + 1) * width];
        let (own, past) = row.split_at_mut(query.keys);
        ops::softmax(own);
        past.fill(0.0);
    }
    // Values, DIMS dimensions at a time for all the queries.
    let keys = queries.iter().map(|q| q.keys).max().unwrap_or(0);
    let mut d0 = 0;
    while d0 < hd {
        let dims = DIMS.min(hd - d0);
        let mut acc = [[0.0f32; DIMS]; R];
        for j in 0..keys {
            let start = j * kv_dim + offset + d0;
            let v = &kv.values[start..start + dims];
            for (r, acc) in acc.iter_mut().enumerate().take(n) {
                let p = scores[r * width + j];
                for (a, &v) in acc.iter_mut().zip(v) {
                    *a = madd::<FUSED>(p, v, *a);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate().take(n) {
            out[r * hd + d0..r * hd + d0 + dims].copy_from_slice(&acc[..dims]);
        }
        d0 += dims;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys and values of `n` positions of 2 heads of `hd`, transposed
    /// as the cache keeps them, and 4 queries of head 1 at the last
    /// positions.
    fn case(hd: usize, n: usize) -> (Vec<f32>, Vec<f32>, usize, Vec<f32>) {
        let mut rng = fastrand::Rng::with_seed(hd as u64 * 1000 + n as u64);
        let stride = n.next_multiple_of(KEY_BLOCK);
        let keys: Vec<f32> = (0..2 * hd * stride)
            .map(|_| rng.f32() * 2.0 - 1.0)
            .collect();
        let values: Vec<f32> = (0..stride * 2 * hd)
            .map(|_| rng.f32() * 2.0 - 1.0)
            .collect();
        let qs: Vec<f32> = (0..4 * hd).map(|_| rng.f32() * 4.0 - 2.0).collect();
        (keys, values, stride, qs)
    }

    fn run(kernel: &str, hd: usize, n: usize, queries: usize) -> Vec<f32> {
        let (keys, values, stride, qs) = case(hd, n);
        let kv = LayerView {
            keys: &keys,
            stride,
            values: &values,
        };
        let queries: Vec<Query<'_>> = (0..queries)
            .map(|r| Query {
                q: &qs[r * hd..(r + 1) * hd],
                keys: n - r,
                out: r,
            })
            .collect();
        let width = n.next_multiple_of(KEY_BLOCK);
        let mut scores = vec![0.0; R * width];
        let mut out = vec![0.0; queries.len() * hd];
        let scale = 0.125;
        match kernel {
            "portable" => {
                attend_body::<false>(&queries, kv, hd, hd, scale, width, &mut scores, &mut out)
            }
            "fused" => {
                attend_body::<true>(&queries, kv, hd, hd, scale, width, &mut scores, &mut out)
            }
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the test calls this only when the CPU has AVX2 and FMA.
            "avx2" => unsafe {
                attend_avx2(&queries, kv, hd, hd, scale, width, &mut scores, &mut out)
            },
            _ => unreachable!("no kernel {kernel}"),
        }
        out
    }

    #[test]
    fn the_kernels_agree_and_a_query_gets_the_same_floats_alone_or_with_others() {
        for (hd, n) in [(64, 37), (32, 16), (128, 300), (24, 9)] {
            let portable = run("portable", hd, n, 4);
            let fused = run("fused", hd, n, 4);
            let worst = portable
                .iter()
                .zip(&fused)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(worst < 1e-5, "hd {hd}, {n} keys: {worst}");
            // One query alone, three together: the same floats as four.
            assert_eq!(run("fused", hd, n, 1), fused[..hd]);
            assert_eq!(run("fused", hd, n, 3), fused[..3 * hd]);
            if fma_available() {
                // Its own exp: within float rounding of libm's.
                let avx2 = run("avx2", hd, n, 4);
                let worst = avx2
                    .iter()
                    .zip(&fused)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0f32, f32::max);
                assert!(worst < 1e-5, "hd {hd}, {n} keys: {worst}");
                assert_eq!(run("avx2", hd, n, 1), avx2[..hd]);
                assert_eq!(run("avx2", hd, n, 2), avx2[..2 * hd]);
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_vector_exp_is_within_float_rounding_and_softmax_sums_to_one() {
        if !fma_available() {
            return;
        }
        let xs: Vec<f32> = (0..2000).map(|i| -80.0 + i as f32 * 0.0437).collect();
        let mut got = xs.clone();
        for chunk in got.chunks_exact_mut(8) {
            // SAFETY: the CPU has AVX2 and FMA (checked above); `chunk`
            // holds 8 floats.
            unsafe {
                use std::arch::x86_64::{_mm256_loadu_ps, _mm256_storeu_ps};
                let e = exp_avx2(_mm256_loadu_ps(chunk.as_ptr()));
                _mm256_storeu_ps(chunk.as_mut_ptr(), e);
            }
        }
        for (x, e) in xs.iter().zip(&got) {
            let want = x.exp();
            assert!(
                (e - want).abs() <= want * 1e-6,
                "exp({x}) = {e}, not {want}"
            );
        }
        for len in [1, 7, 8, 9, 33] {
            let mut row: Vec<f32> = (0..len).map(|i| (i as f32 * 0.7).sin() * 5.0).collect();
            let mut want = row.clone();
            ops::softmax(&mut want);
            // SAFETY: the CPU has AVX2 and FMA (checked above).
            unsafe { softmax_avx2(&mut row) };
            for (a, b) in row.iter().zip(&want) {
                assert!((a - b).abs() < 1e-6, "{len}: {row:?} vs {want:?}");
            }
        }
    }
}
