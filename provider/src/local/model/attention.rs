//! Causal attention over the KV cache, for a chunk of query positions.
//!
//! A query's keys are taken in *splits* of [`SPLIT`] consecutive
//! positions (from position 0). Each split gives a partial result: the
//! largest score `m`, the sum `l` of `e^(score − m)` and the values
//! weighted by them ([`partial`]); [`combine`] rescales the partials to
//! their common maximum and divides, as flash-decoding does. The work is
//! cut in tasks in one of two ways, which give the same floats:
//!
//! - **Many queries** (a prompt): a task is one key/value head and up to
//!   [`POSITIONS`] query positions, and goes through all their splits.
//! - **Few queries, many keys** (decoding one token): a task is one
//!   key/value head, position block and split, so that both threads read
//!   half the cache, and the partials are combined after.
//!
//! Within a split, the queries of one key/value head are taken up to
//! [`R`] at a time: the scores of a block of [`KEY_BLOCK`] keys are, per
//! dimension, one load of sixteen keys and one multiply–add per query
//! (the cache keeps a block's keys transposed, [`LayerView::tile`]); the
//! values are summed sixteen dimensions at a time the same way.
//!
//! Every score is `Σ_d q[d]·k[d]` summed over `d` in order, every partial
//! sum over the keys in order, and a query's partials depend only on its
//! own scores: a position's attention is the same floats whether it is
//! read in a long prompt, with other queries, or on its own, so a reply
//! does not depend on how much of its prompt came from the cache. Keys
//! past a query's own position are scored with the others of their block
//! and given weight 0, which adds exactly nothing.
//!
//! With AVX2, FMA and F16C (detected at run time) the loops are compiled
//! for them: keys and values are converted from f16 eight at a time and
//! each multiply–add is fused; elsewhere they are plain Rust.

use std::cell::RefCell;

use super::cache::{KEY_BLOCK, LayerView, from_f16};
use super::config::Config;
use super::matmul::Backend;

/// Query positions per task when there are many.
const POSITIONS: usize = 4;

/// Most queries scored together against each block of keys.
const R: usize = 6;

/// Dimensions of the values summed together.
const DIMS: usize = 16;

/// Keys per split.
pub(crate) const SPLIT: usize = 128;

/// Blocks of keys per split.
const SPLIT_BLOCKS: usize = SPLIT / KEY_BLOCK;

thread_local! {
    /// Each thread's scores (`R × SPLIT`) and partials.
    static SCRATCH: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
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

/// How the loops are compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// Plain Rust; fused multiply–adds when `true`.
    Portable(bool),
    /// AVX2, FMA and F16C intrinsics.
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    /// The fastest this CPU runs for heads of `hd` floats.
    fn detect(hd: usize) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            let fma = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
            if fma && std::is_x86_feature_detected!("f16c") && hd.is_multiple_of(DIMS) {
                return Self::Avx2;
            }
            Self::Portable(fma)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = hd;
            Self::Portable(false)
        }
    }
}

/// Floats of one query's output that tasks share: each task writes the
/// outputs of its own queries only.
struct Shared {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: tasks write disjoint ranges (`range`'s contract).
unsafe impl Sync for Shared {}

impl Shared {
    fn new(xs: &mut [f32]) -> Self {
        Self {
            ptr: xs.as_mut_ptr(),
            len: xs.len(),
        }
    }

    /// # Safety
    /// No other task may use `start..start + len` while the slice lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn range(&self, start: usize, len: usize) -> &mut [f32] {
        assert!(start + len <= self.len);
        // SAFETY: in bounds (checked), and not aliased (the contract).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
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
    attention_with(
        backend,
        Kernel::detect(c.head_dim),
        (c.head_dim, c.heads, c.kv_heads),
        q,
        kv,
        pos0,
        out,
    );
}

fn attention_with(
    backend: &Backend,
    kernel: Kernel,
    (hd, heads, kv_heads): (usize, usize, usize),
    q: &[f32],
    kv: LayerView<'_>,
    pos0: usize,
    out: &mut [f32],
) {
    let (q_dim, group) = (heads * hd, heads / kv_heads);
    let m = q.len() / q_dim;
    // candle divides by sqrt(head_dim) as an f32 multiplication.
    let scale = (1.0 / (hd as f64).sqrt()) as f32;
    let part = hd + 2;
    let blocks = m.div_ceil(POSITIONS);
    let queries = |g: usize, block: usize| -> Vec<Query<'_>> {
        (block * POSITIONS..((block + 1) * POSITIONS).min(m))
            .flat_map(|i| {
                (g * group..(g + 1) * group).map(move |h| Query {
                    q: &q[i * q_dim + h * hd..][..hd],
                    keys: pos0 + i + 1,
                    out: i * heads + h,
                })
            })
            .collect()
    };
    let splits = (pos0 + m).div_ceil(SPLIT);
    if splits > 1 && kv_heads * blocks < 2 * backend.threads() {
        // Few queries: a task per split too, the partials combined after.
        let mut partials = vec![0.0f32; m * heads * splits * part];
        let shared = Shared::new(&mut partials);
        backend.run(kv_heads * blocks * splits, |task| {
            let (g, rest) = (task % kv_heads, task / kv_heads);
            let (block, s) = (rest % blocks, rest / blocks);
            let queries = queries(g, block);
            SCRATCH.with(|scratch| {
                let (scores, parts) = &mut *scratch.borrow_mut();
                for chunk in queries.chunks(R) {
                    parts.resize(chunk.len() * part, 0.0);
                    partial(kernel, chunk, kv, g, s, scale, scores, parts);
                    for (query, p) in chunk.iter().zip(parts.chunks_exact(part)) {
                        if query.keys > s * SPLIT {
                            // SAFETY: split `s` of query `out` is this task's.
                            let to = unsafe { shared.range((query.out * splits + s) * part, part) };
                            to.copy_from_slice(p);
                        }
                    }
                }
            });
        });
        for (i, o) in out.chunks_exact_mut(hd).enumerate() {
            let own = (pos0 + i / heads + 1).div_ceil(SPLIT);
            combine(&partials[i * splits * part..][..own * part], hd, o);
        }
        return;
    }
    let shared = Shared::new(out);
    backend.run(kv_heads * blocks, |task| {
        let (g, block) = (task % kv_heads, task / kv_heads);
        let queries = queries(g, block);
        SCRATCH.with(|scratch| {
            let (scores, parts) = &mut *scratch.borrow_mut();
            let mut one = vec![0.0f32; R * part];
            for chunk in queries.chunks(R) {
                let n = chunk.len();
                let splits = chunk
                    .iter()
                    .map(|q| q.keys)
                    .max()
                    .unwrap_or(0)
                    .div_ceil(SPLIT);
                parts.resize(n * splits * part, 0.0);
                for s in 0..splits {
                    partial(kernel, chunk, kv, g, s, scale, scores, &mut one[..n * part]);
                    for (r, p) in one.chunks_exact(part).take(n).enumerate() {
                        parts[(r * splits + s) * part..][..part].copy_from_slice(p);
                    }
                }
                for (r, query) in chunk.iter().enumerate() {
                    // SAFETY: query `out`'s output is this task's.
                    let o = unsafe { shared.range(query.out * hd, hd) };
                    let own = query.keys.div_ceil(SPLIT);
                    combine(&parts[r * splits * part..][..own * part], hd, o);
                }
            }
        });
    });
}

/// The partials of up to [`R`] queries of key/value head `g` over split
/// `s`, into `out` (`queries × (hd + 2)`: the largest score, the sum of
/// the exponentials, the weighted values). A query with no key in the
/// split gets a meaningless partial (not combined). `scores` is resized.
#[allow(clippy::too_many_arguments)]
fn partial(
    kernel: Kernel,
    queries: &[Query<'_>],
    kv: LayerView<'_>,
    g: usize,
    s: usize,
    scale: f32,
    scores: &mut Vec<f32>,
    out: &mut [f32],
) {
    let keys = queries.iter().map(|q| q.keys).max().unwrap_or(0);
    let b0 = s * SPLIT_BLOCKS;
    let b1 = (b0 + SPLIT_BLOCKS).min(keys.div_ceil(KEY_BLOCK));
    if b1 <= b0 {
        return;
    }
    scores.resize(R * SPLIT, 0.0);
    match kernel {
        Kernel::Portable(false) => {
            partial_body::<false>(queries, kv, g, b0, b1, scale, scores, out)
        }
        Kernel::Portable(true) => partial_body::<true>(queries, kv, g, b0, b1, scale, scores, out),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Avx2` is chosen only when the CPU has AVX2, FMA and
        // F16C and heads are a multiple of 16 floats (`Kernel::detect`).
        Kernel::Avx2 => unsafe {
            match queries.len() {
                1 => partial_avx2::<1>(queries, kv, g, b0, b1, scale, scores, out),
                2 => partial_avx2::<2>(queries, kv, g, b0, b1, scale, scores, out),
                3 => partial_avx2::<3>(queries, kv, g, b0, b1, scale, scores, out),
                4 => partial_avx2::<4>(queries, kv, g, b0, b1, scale, scores, out),
                _ => partial_avx2::<R>(queries, kv, g, b0, b1, scale, scores, out),
            }
        },
    }
}

/// Keys of `query` among the blocks `b0..b1`.
fn own_keys(query: &Query<'_>, b0: usize, b1: usize) -> usize {
    query
        .keys
        .min(b1 * KEY_BLOCK)
        .saturating_sub(b0 * KEY_BLOCK)
}

/// A query's output from its partials (`(hd + 2)` floats each, in the
/// order of the splits): each rescaled to the largest score of all,
/// summed in order, divided by the summed exponentials.
fn combine(parts: &[f32], hd: usize, out: &mut [f32]) {
    let max = parts
        .chunks_exact(hd + 2)
        .map(|p| p[0])
        .fold(f32::NEG_INFINITY, f32::max);
    out.fill(0.0);
    let mut sum = 0.0f32;
    for p in parts.chunks_exact(hd + 2) {
        let w = (p[0] - max).exp();
        sum += p[1] * w;
        for (o, &v) in out.iter_mut().zip(&p[2..]) {
            *o += v * w;
        }
    }
    for o in out.iter_mut() {
        *o /= sum;
    }
}

/// `a·b + c`, fused when `FUSED`.
#[inline(always)]
fn madd<const FUSED: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FUSED { a.mul_add(b, c) } else { a * b + c }
}

/// [`partial`] in plain Rust.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn partial_body<const FUSED: bool>(
    queries: &[Query<'_>],
    kv: LayerView<'_>,
    g: usize,
    b0: usize,
    b1: usize,
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    let hd = queries[0].q.len();
    let part = hd + 2;
    for b in b0..b1 {
        let keys = &kv.tile(b, g)[..hd * KEY_BLOCK];
        for (r, query) in queries.iter().enumerate() {
            let mut acc = [0.0f32; KEY_BLOCK];
            for (d, &q) in query.q.iter().enumerate() {
                for (a, &k) in acc.iter_mut().zip(&keys[d * KEY_BLOCK..][..KEY_BLOCK]) {
                    *a = madd::<FUSED>(q, from_f16(k), *a);
                }
            }
            for (s, a) in scores[r * SPLIT + (b - b0) * KEY_BLOCK..][..KEY_BLOCK]
                .iter_mut()
                .zip(acc)
            {
                *s = a * scale;
            }
        }
    }
    for (r, query) in queries.iter().enumerate() {
        let row = &mut scores[r * SPLIT..(r + 1) * SPLIT];
        let (own, past) = row.split_at_mut(own_keys(query, b0, b1));
        let max = own.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for x in own.iter_mut() {
            *x = (*x - max).exp();
            sum += *x;
        }
        past.fill(0.0);
        out[r * part] = max;
        out[r * part + 1] = sum;
    }
    for (r, o) in out.chunks_exact_mut(part).take(queries.len()).enumerate() {
        let o = &mut o[2..];
        o.fill(0.0);
        for b in b0..b1 {
            let values = &kv.tile(b, g)[hd * KEY_BLOCK..];
            for j in 0..KEY_BLOCK {
                let p = scores[r * SPLIT + (b - b0) * KEY_BLOCK + j];
                for (o, &v) in o.iter_mut().zip(&values[j * hd..][..hd]) {
                    *o = madd::<FUSED>(p, from_f16(v), *o);
                }
            }
        }
    }
}

/// [`partial_body::<true>`] with AVX2, FMA and F16C intrinsics for `N`
/// queries at most (a group of `queries.len() ≤ N`; missing ones repeat
/// the last, and their results are dropped): the same fused multiply–adds
/// in the same order, with the accumulators of `N` queries × sixteen keys
/// (or dimensions) in registers, and a vectorised exponential
/// ([`exp_sum_avx2`]).
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C, and `hd` must be a multiple of
/// sixteen.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::too_many_arguments)]
unsafe fn partial_avx2<const N: usize>(
    queries: &[Query<'_>],
    kv: LayerView<'_>,
    g: usize,
    b0: usize,
    b1: usize,
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    use std::arch::x86_64::{
        __m256, _mm256_fmadd_ps, _mm256_mul_ps, _mm256_set1_ps, _mm256_setzero_ps, _mm256_storeu_ps,
    };
    let n = queries.len().min(N);
    let hd = queries[0].q.len();
    let part = hd + 2;
    let qs: [&[f32]; N] = std::array::from_fn(|r| &queries[r.min(n - 1)].q[..hd]);
    let vscale = _mm256_set1_ps(scale);
    for b in b0..b1 {
        let keys = &kv.tile(b, g)[..hd * KEY_BLOCK];
        let mut acc: [[__m256; 2]; N] = [[_mm256_setzero_ps(); 2]; N];
        for d in 0..hd {
            let (k0, k1) = load16(&keys[d * KEY_BLOCK..]);
            for (acc, q) in acc.iter_mut().zip(&qs) {
                let q = _mm256_set1_ps(q[d]);
                acc[0] = _mm256_fmadd_ps(q, k0, acc[0]);
                acc[1] = _mm256_fmadd_ps(q, k1, acc[1]);
            }
        }
        for (r, acc) in acc.iter().enumerate().take(n) {
            let row = &mut scores[r * SPLIT + (b - b0) * KEY_BLOCK..][..KEY_BLOCK];
            // SAFETY: `row` holds 16 floats: two unaligned stores of 8.
            unsafe {
                _mm256_storeu_ps(row.as_mut_ptr(), _mm256_mul_ps(acc[0], vscale));
                _mm256_storeu_ps(row.as_mut_ptr().add(8), _mm256_mul_ps(acc[1], vscale));
            }
        }
    }
    for (r, query) in queries.iter().enumerate().take(n) {
        let row = &mut scores[r * SPLIT..(r + 1) * SPLIT];
        let (own, past) = row.split_at_mut(own_keys(query, b0, b1));
        let (max, sum) = exp_sum_avx2(own);
        past.fill(0.0);
        out[r * part] = max;
        out[r * part + 1] = sum;
    }
    let rows: [&[f32]; N] = std::array::from_fn(|r| &scores[r.min(n - 1) * SPLIT..][..SPLIT]);
    for d0 in (0..hd).step_by(DIMS) {
        let mut acc: [[__m256; 2]; N] = [[_mm256_setzero_ps(); 2]; N];
        for b in b0..b1 {
            let values = &kv.tile(b, g)[hd * KEY_BLOCK..];
            for j in 0..KEY_BLOCK {
                let (v0, v1) = load16(&values[j * hd + d0..]);
                let jj = (b - b0) * KEY_BLOCK + j;
                for (acc, row) in acc.iter_mut().zip(&rows) {
                    let p = _mm256_set1_ps(row[jj]);
                    acc[0] = _mm256_fmadd_ps(p, v0, acc[0]);
                    acc[1] = _mm256_fmadd_ps(p, v1, acc[1]);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate().take(n) {
            let o = &mut out[r * part + 2 + d0..][..DIMS];
            // SAFETY: `o` holds 16 floats: two unaligned stores of 8.
            unsafe {
                _mm256_storeu_ps(o.as_mut_ptr(), acc[0]);
                _mm256_storeu_ps(o.as_mut_ptr().add(8), acc[1]);
            }
        }
    }
}

/// The first sixteen f16 of `xs` as two vectors of eight f32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
#[inline]
fn load16(xs: &[u16]) -> (std::arch::x86_64::__m256, std::arch::x86_64::__m256) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm256_cvtph_ps};
    let xs = &xs[..16];
    // SAFETY: `xs` holds 16 f16: two unaligned loads of 16 bytes.
    unsafe {
        (
            _mm256_cvtph_ps(_mm_loadu_si128(xs.as_ptr().cast::<__m128i>())),
            _mm256_cvtph_ps(_mm_loadu_si128(xs.as_ptr().add(8).cast::<__m128i>())),
        )
    }
}

/// `xs = e^(xs − max)` in place with AVX2 ([`exp_avx2`], eight partial
/// sums); returns the max and the sum (`(−∞, 0)` when `xs` is empty).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn exp_sum_avx2(xs: &mut [f32]) -> (f32, f32) {
    use std::arch::x86_64::{
        __m256i, _mm256_add_ps, _mm256_and_ps, _mm256_castsi256_ps, _mm256_cmpgt_epi32,
        _mm256_maskload_ps, _mm256_maskstore_ps, _mm256_set1_epi32, _mm256_set1_ps,
        _mm256_setr_epi32, _mm256_setzero_ps, _mm256_storeu_ps, _mm256_sub_ps,
    };
    let max = xs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if xs.is_empty() {
        return (max, 0.0);
    }
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
    (max, total)
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

#[cfg(test)]
mod tests {
    use super::super::cache::{KvCache, from_f16};
    use super::*;

    /// A cache of `n` random positions of 2 key/value heads of `hd`, and
    /// `m` positions' queries of 4 heads after them.
    fn case(hd: usize, n: usize, m: usize) -> (KvCache, Vec<f32>) {
        let mut rng = fastrand::Rng::with_seed(hd as u64 * 1000 + n as u64);
        let mut cache = KvCache::new(1, 2, hd, n + m);
        cache.reserve(n + m);
        let mut random = |len: usize, a: f32| -> Vec<f32> {
            (0..len).map(|_| (rng.f32() * 2.0 - 1.0) * a).collect()
        };
        let (k, v) = (random((n + m) * 2 * hd, 1.0), random((n + m) * 2 * hd, 1.0));
        cache.write(0, 0, &k, &v);
        cache.advance(n + m);
        (cache, random(m * 4 * hd, 2.0))
    }

    /// Attention of position `pos`'s head `h` in f64, from the cache.
    fn reference(cache: &KvCache, hd: usize, q: &[f32], pos: usize, h: usize) -> Vec<f32> {
        let view = cache.layer(0);
        let g = h / 2;
        let key = |j: usize, d: usize| {
            from_f16(view.tile(j / KEY_BLOCK, g)[d * KEY_BLOCK + j % KEY_BLOCK]) as f64
        };
        let value = |j: usize, d: usize| {
            from_f16(view.tile(j / KEY_BLOCK, g)[hd * KEY_BLOCK + (j % KEY_BLOCK) * hd + d]) as f64
        };
        let scores: Vec<f64> = (0..=pos)
            .map(|j| (0..hd).map(|d| q[d] as f64 * key(j, d)).sum::<f64>() / (hd as f64).sqrt())
            .collect();
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let sum: f64 = weights.iter().sum();
        (0..hd)
            .map(|d| {
                (weights
                    .iter()
                    .enumerate()
                    .map(|(j, w)| w * value(j, d))
                    .sum::<f64>()
                    / sum) as f32
            })
            .collect()
    }

    fn kernels() -> Vec<Kernel> {
        let mut kernels = vec![Kernel::Portable(false), Kernel::Portable(true)];
        #[cfg(target_arch = "x86_64")]
        if Kernel::detect(64) == Kernel::Avx2 {
            kernels.push(Kernel::Avx2);
        }
        kernels
    }

    #[test]
    fn every_kernel_matches_attention_in_f64_and_a_query_gets_the_same_floats_alone_or_in_a_prompt()
    {
        let backend = Backend::new(2);
        for (hd, n, m) in [(64, 37, 5), (32, 300, 3), (64, 250, 9), (16, 5, 1)] {
            let (cache, qs) = case(hd, n, m);
            for kernel in kernels() {
                let mut all = vec![0.0; m * 4 * hd];
                attention_with(
                    &backend,
                    kernel,
                    (hd, 4, 2),
                    &qs,
                    cache.layer(0),
                    n,
                    &mut all,
                );
                for i in 0..m {
                    for h in 0..4 {
                        let q = &qs[(i * 4 + h) * hd..][..hd];
                        let want = reference(&cache, hd, q, n + i, h);
                        let got = &all[(i * 4 + h) * hd..][..hd];
                        for (a, b) in got.iter().zip(&want) {
                            assert!((a - b).abs() < 1e-5, "{kernel:?} hd {hd}: {a} vs {b}");
                        }
                    }
                    // Position i alone (decoding): the same floats.
                    let mut alone = vec![0.0; 4 * hd];
                    let q = &qs[i * 4 * hd..][..4 * hd];
                    attention_with(
                        &backend,
                        kernel,
                        (hd, 4, 2),
                        q,
                        cache.layer(0),
                        n + i,
                        &mut alone,
                    );
                    assert_eq!(
                        alone,
                        all[i * 4 * hd..][..4 * hd],
                        "{kernel:?} hd {hd} pos {i}"
                    );
                }
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_vector_exp_is_within_float_rounding() {
        if Kernel::detect(64) != Kernel::Avx2 {
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
    }
}
