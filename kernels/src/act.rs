//! Quantization of the activations (the `m × k` input) to 8 bits per
//! element in blocks of 32, as ggml's `quantize_row_q8_0` / `q8_1` do:
//! `d = amax / 127`, `q = round(x · 127 / amax)` (ties to even, as ggml's
//! AVX path rounds), plus the block's sum of quants (ggml's Q8_1 `s / d`),
//! which Q4_1 weights need for their minimum and Q4_0 for its offset of 8.
//!
//! Unlike ggml's blocks, `d` and the sum are kept at full precision (`f32`,
//! `i32`) instead of `f16`, in arrays beside the quants rather than inside
//! each block: the kernels broadcast them per block and row.

/// Quantized activations of `m` rows: quants row-major (`m × k` bytes,
/// two's-complement `i8`), and per block `d` (scale), `isum` (sum of the
/// block's quants) and `s = d · isum`.
#[derive(Default)]
pub(crate) struct Acts {
    pub qs: Vec<u8>,
    pub d: Vec<f32>,
    pub s: Vec<f32>,
    pub isum: Vec<i32>,
}

impl Acts {
    /// Makes room for `m` rows of `k` elements (`k` a multiple of 32).
    pub(crate) fn resize(&mut self, m: usize, k: usize) {
        let nb = k / 32;
        self.qs.resize(m * k, 0);
        self.d.resize(m * nb, 0.0);
        self.s.resize(m * nb, 0.0);
        self.isum.resize(m * nb, 0);
    }
}

/// Mutable views of the rows `r0..r1` of an [`Acts`], given to one thread.
pub(crate) struct ActRows<'a> {
    pub qs: &'a mut [u8],
    pub d: &'a mut [f32],
    pub s: &'a mut [f32],
    pub isum: &'a mut [i32],
}

/// Quantizes one block of 32 floats into `qs`; returns `(d, sum of quants)`.
pub(crate) fn quantize_block_scalar(x: &[f32], qs: &mut [u8]) -> (f32, i32) {
    let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(x) {
        let i = (v * id).round_ties_even() as i32;
        sum += i;
        *q = i as i8 as u8;
    }
    (d, sum)
}

/// Quantizes rows of `k` floats (`x.len()` a multiple of `k`) into `out`.
pub(crate) fn quantize_rows_scalar(x: &[f32], k: usize, out: ActRows<'_>) {
    let nb = k / 32;
    for (b, (xb, qb)) in x
        .chunks_exact(32)
        .zip(out.qs.chunks_exact_mut(32))
        .enumerate()
    {
        let (d, sum) = quantize_block_scalar(xb, qb);
        out.d[b] = d;
        out.isum[b] = sum;
        out.s[b] = d * sum as f32;
    }
    debug_assert_eq!(out.d.len() * 32, x.len());
    let _ = nb;
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::ActRows;
    use std::arch::x86_64::*;

    /// AVX2 version of [`super::quantize_rows_scalar`], with the same
    /// results bit for bit.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn quantize_rows_avx2(x: &[f32], out: ActRows<'_>) {
        let blocks = x.len() / 32;
        assert!(out.qs.len() >= blocks * 32 && out.d.len() >= blocks);
        assert!(out.s.len() >= blocks && out.isum.len() >= blocks);
        let sign = _mm256_set1_ps(-0.0);
        for b in 0..blocks {
            // SAFETY: block `b < blocks` covers x[32 b..32 b + 32] and
            // qs[32 b..32 b + 32], both in bounds (asserted above); the
            // loads and the store are unaligned.
            unsafe {
                let p = x.as_ptr().add(32 * b);
                let v0 = _mm256_loadu_ps(p);
                let v1 = _mm256_loadu_ps(p.add(8));
                let v2 = _mm256_loadu_ps(p.add(16));
                let v3 = _mm256_loadu_ps(p.add(24));
                let mut am = _mm256_andnot_ps(sign, v0);
                am = _mm256_max_ps(am, _mm256_andnot_ps(sign, v1));
                am = _mm256_max_ps(am, _mm256_andnot_ps(sign, v2));
                am = _mm256_max_ps(am, _mm256_andnot_ps(sign, v3));
                let mut m4 = _mm_max_ps(_mm256_extractf128_ps(am, 1), _mm256_castps256_ps128(am));
                m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
                m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
                let amax = _mm_cvtss_f32(m4);
                let d = amax / 127.0;
                let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
                let mul = _mm256_set1_ps(id);
                const R: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
                let i0 = _mm256_cvtps_epi32(_mm256_round_ps::<R>(_mm256_mul_ps(v0, mul)));
                let i1 = _mm256_cvtps_epi32(_mm256_round_ps::<R>(_mm256_mul_ps(v1, mul)));
                let i2 = _mm256_cvtps_epi32(_mm256_round_ps::<R>(_mm256_mul_ps(v2, mul)));
                let i3 = _mm256_cvtps_epi32(_mm256_round_ps::<R>(_mm256_mul_ps(v3, mul)));
                let s = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
                let s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
                let s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
                let s1 = _mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0b01));
                let sum = _mm_cvtsi128_si32(s1);
                let p01 = _mm256_packs_epi32(i0, i1);
                let p23 = _mm256_packs_epi32(i2, i3);
                let q = _mm256_packs_epi16(p01, p23);
                let q = _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
                _mm256_storeu_si256(out.qs.as_mut_ptr().add(32 * b).cast(), q);
                out.d[b] = d;
                out.isum[b] = sum;
                out.s[b] = d * sum as f32;
            }
        }
    }
}
