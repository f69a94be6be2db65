//! x86-64 kernels: AVX2 + FMA + F16C, and the same with VNNI
//! (`vpdpbusd`, from AVX-VNNI or AVX-512 VNNI + VL) in place of
//! `vpmaddubsw` + `vpmaddwd`.
//!
//! One tile computes `RM` activation rows × `RP` panels of 8 output
//! features, keeping its `RM × RP` accumulators of 8 floats in registers
//! over the whole `k`. Per block of 32 inputs it loads each panel's quants
//! once (4 or 8 vectors of 32 bytes) and each activation row's 32 bytes once
//! (as 8 broadcast dwords), multiplies them into per-block integer sums
//! (exact), then scales those by `d_w · d_a` into the float accumulators
//! with one FMA (Q4_1 adds its `m_w · s_a` with a second).
//!
//! Every tile function is `#[inline(always)]` and generic over the
//! instruction set; the `run_*` entry points carry the `target_feature`
//! attributes, so everything is compiled once per instruction set.

// Register arrays are indexed by tile position.
#![allow(clippy::needless_range_loop)]

use crate::format::Format;
use std::arch::x86_64::*;

pub(crate) const AVX2: u8 = 0;
pub(crate) const AVXVNNI: u8 = 1;
pub(crate) const AVX512VNNI: u8 = 2;

/// How many blocks ahead decode prefetches each panel's weights.
const PF: usize = 4;

/// Raw views of one matmul's operands, checked by the caller
/// (`matmul::run_packed`) before any kernel runs:
/// `w` holds `panels × nb` panel blocks, `aq` `m × k` bytes, `ad`, `as_`,
/// `ai` `m × nb` values each, and `out` `m × n` floats.
#[derive(Clone, Copy)]
pub(crate) struct Gemm {
    pub w: *const u8,
    pub nb: usize,
    pub k: usize,
    pub aq: *const u8,
    pub ad: *const f32,
    pub as_: *const f32,
    pub ai: *const i32,
    pub out: *mut f32,
    pub n: usize,
}

/// `acc + Σ u·s` over groups of four bytes (u unsigned, s signed), in i32.
#[inline(always)]
unsafe fn dpbusd<const ISA: u8>(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
    // SAFETY: the caller is compiled with the features of `ISA` (the
    // `run_*` entry points below).
    unsafe {
        match ISA {
            AVXVNNI => _mm256_dpbusd_avx_epi32(acc, u, s),
            AVX512VNNI => _mm256_dpbusd_epi32(acc, u, s),
            _ => _mm256_add_epi32(
                acc,
                _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)),
            ),
        }
    }
}

/// Broadcasts the 4 activation bytes at `p` to all 8 dword lanes.
#[inline(always)]
unsafe fn bcast4(p: *const u8) -> __m256i {
    // SAFETY: the caller keeps `p..p + 4` inside the activation quants.
    unsafe { _mm256_set1_epi32(p.cast::<i32>().read_unaligned()) }
}

/// Stores the 8 columns of `v` at `out[row · n + col..]`, only those below
/// `n`.
#[inline(always)]
unsafe fn store8(g: &Gemm, row: usize, col: usize, v: __m256) {
    // SAFETY: `row < m` and `col < n` (the tile's panel holds at least one
    // real row), and at most `n - col` floats are written.
    unsafe {
        let dst = g.out.add(row * g.n + col);
        if col + 8 <= g.n {
            _mm256_storeu_ps(dst, v);
        } else {
            let mut tmp = [0f32; 8];
            _mm256_storeu_ps(tmp.as_mut_ptr(), v);
            std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, g.n - col);
        }
    }
}

/// One Q4_0 / Q4_1 tile: panels `p0..p0 + RP`, activation rows
/// `r0..r0 + RM`.
#[inline(always)]
unsafe fn tile_q4<const ISA: u8, const Q41: bool, const RP: usize, const RM: usize>(
    g: &Gemm,
    p0: usize,
    r0: usize,
) {
    let sc = if Q41 { 32 } else { 16 };
    let sb = sc + 128;
    let pstride = g.nb * sb;
    // SAFETY: (whole body) panel blocks `(p0 + p) · nb + l` with
    // `p0 + RP <= panels`, `l < nb` are inside `w`; activation rows
    // `r0 + r < m` with bytes `32 l..32 l + 32` inside `aq`, and their
    // per-block values at `(r0 + r) · nb + l` inside `ad`, `as_`, `ai`
    // (checked by the caller, see `Gemm`). All loads are unaligned.
    unsafe {
        let m4 = _mm256_set1_epi8(0x0F);
        let ones = _mm256_set1_epi16(1);
        let wp = g.w.add(p0 * pstride);
        let aq = g.aq.add(r0 * g.k);
        let sc0 = r0 * g.nb;
        let mut acc = [[_mm256_setzero_ps(); RM]; RP];
        for l in 0..g.nb {
            let mut dw = [_mm256_setzero_ps(); RP];
            let mut mw = [_mm256_setzero_ps(); RP];
            for p in 0..RP {
                let blk = wp.add(p * pstride + l * sb);
                if RM == 1 && l + PF < g.nb {
                    // Decode streams the weights from memory: ask for the
                    // block PF ahead in each panel.
                    let ahead = blk.add(PF * sb);
                    _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                    _mm_prefetch::<_MM_HINT_T0>(ahead.add(64).cast());
                    _mm_prefetch::<_MM_HINT_T0>(ahead.add(128).cast());
                }
                dw[p] = _mm256_cvtph_ps(_mm_loadu_si128(blk.cast()));
                if Q41 {
                    mw[p] = _mm256_cvtph_ps(_mm_loadu_si128(blk.add(16).cast()));
                }
            }
            let mut ia = [[_mm256_setzero_si256(); RM]; RP];
            for v in 0..4 {
                let mut lo = [_mm256_setzero_si256(); RP];
                let mut hi = [_mm256_setzero_si256(); RP];
                for p in 0..RP {
                    let raw = _mm256_loadu_si256(wp.add(p * pstride + l * sb + sc + 32 * v).cast());
                    lo[p] = _mm256_and_si256(raw, m4);
                    hi[p] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
                }
                for r in 0..RM {
                    let a = aq.add(r * g.k + 32 * l + 4 * v);
                    let alo = bcast4(a);
                    let ahi = bcast4(a.add(16));
                    for p in 0..RP {
                        ia[p][r] = if ISA == AVX2 {
                            // Nibbles ≤ 15 times |a| ≤ 127, 2 per lane, 8
                            // times per block: ≤ 30480, no i16 overflow.
                            let t = _mm256_add_epi16(
                                _mm256_maddubs_epi16(lo[p], alo),
                                _mm256_maddubs_epi16(hi[p], ahi),
                            );
                            _mm256_add_epi16(ia[p][r], t)
                        } else {
                            dpbusd::<ISA>(dpbusd::<ISA>(ia[p][r], lo[p], alo), hi[p], ahi)
                        };
                    }
                }
            }
            for r in 0..RM {
                let i = sc0 + r * g.nb + l;
                let da = _mm256_set1_ps(*g.ad.add(i));
                for p in 0..RP {
                    let mut dot = if ISA == AVX2 {
                        _mm256_madd_epi16(ia[p][r], ones)
                    } else {
                        ia[p][r]
                    };
                    if !Q41 {
                        dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(8 * *g.ai.add(i)));
                    }
                    let scale = _mm256_mul_ps(dw[p], da);
                    acc[p][r] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(dot), acc[p][r]);
                    if Q41 {
                        acc[p][r] =
                            _mm256_fmadd_ps(mw[p], _mm256_set1_ps(*g.as_.add(i)), acc[p][r]);
                    }
                }
            }
        }
        for p in 0..RP {
            for r in 0..RM {
                store8(g, r0 + r, (p0 + p) * 8, acc[p][r]);
            }
        }
    }
}

/// One Q8_0 tile, as [`tile_q4`]. Both operands are signed, so the weights
/// go in as `|w|` and the activations as `a · sign(w)`.
#[inline(always)]
unsafe fn tile_q8<const ISA: u8, const RP: usize, const RM: usize>(g: &Gemm, p0: usize, r0: usize) {
    let sb = 16 + 256;
    let pstride = g.nb * sb;
    // SAFETY: (whole body) as in `tile_q4`.
    unsafe {
        let wp = g.w.add(p0 * pstride);
        let aq = g.aq.add(r0 * g.k);
        let sc0 = r0 * g.nb;
        let mut acc = [[_mm256_setzero_ps(); RM]; RP];
        for l in 0..g.nb {
            let mut dw = [_mm256_setzero_ps(); RP];
            for p in 0..RP {
                let blk = wp.add(p * pstride + l * sb);
                if RM == 1 && l + PF < g.nb {
                    let ahead = blk.add(PF * sb);
                    for line in 0..5 {
                        _mm_prefetch::<_MM_HINT_T0>(ahead.add(64 * line).cast());
                    }
                }
                dw[p] = _mm256_cvtph_ps(_mm_loadu_si128(blk.cast()));
            }
            let mut ia = [[_mm256_setzero_si256(); RM]; RP];
            for v in 0..8 {
                let mut w = [_mm256_setzero_si256(); RP];
                let mut aw = [_mm256_setzero_si256(); RP];
                for p in 0..RP {
                    w[p] = _mm256_loadu_si256(wp.add(p * pstride + l * sb + 16 + 32 * v).cast());
                    aw[p] = _mm256_sign_epi8(w[p], w[p]);
                }
                for r in 0..RM {
                    let a = bcast4(aq.add(r * g.k + 32 * l + 4 * v));
                    for p in 0..RP {
                        // |w| ≤ 128 times |a| ≤ 127, 2 per i16 lane: fits.
                        ia[p][r] = dpbusd::<ISA>(ia[p][r], aw[p], _mm256_sign_epi8(a, w[p]));
                    }
                }
            }
            for r in 0..RM {
                let da = _mm256_set1_ps(*g.ad.add(sc0 + r * g.nb + l));
                for p in 0..RP {
                    let scale = _mm256_mul_ps(dw[p], da);
                    acc[p][r] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(ia[p][r]), acc[p][r]);
                }
            }
        }
        for p in 0..RP {
            for r in 0..RM {
                store8(g, r0 + r, (p0 + p) * 8, acc[p][r]);
            }
        }
    }
}

/// Rows `0..m` of panels `ps..pe` with tiles of `RP` panels × up to 4
/// rows (`RP` = 4 with one row for `m == 1`).
#[inline(always)]
unsafe fn panels<const ISA: u8, const RP: usize>(
    g: &Gemm,
    format: Format,
    m: usize,
    ps: usize,
    pe: usize,
) {
    macro_rules! tile {
        ($rp:literal, $p:expr, $r:expr, $rm:expr) => {
            // SAFETY: `$p + $rp <= pe <= panels` and `$r + $rm <= m`.
            unsafe {
                match (format, $rm) {
                    (Format::Q4_0, 1) => tile_q4::<ISA, false, $rp, 1>(g, $p, $r),
                    (Format::Q4_0, 2) => tile_q4::<ISA, false, $rp, 2>(g, $p, $r),
                    (Format::Q4_0, 3) => tile_q4::<ISA, false, $rp, 3>(g, $p, $r),
                    (Format::Q4_0, _) => tile_q4::<ISA, false, $rp, 4>(g, $p, $r),
                    (Format::Q4_1, 1) => tile_q4::<ISA, true, $rp, 1>(g, $p, $r),
                    (Format::Q4_1, 2) => tile_q4::<ISA, true, $rp, 2>(g, $p, $r),
                    (Format::Q4_1, 3) => tile_q4::<ISA, true, $rp, 3>(g, $p, $r),
                    (Format::Q4_1, _) => tile_q4::<ISA, true, $rp, 4>(g, $p, $r),
                    (_, 1) => tile_q8::<ISA, $rp, 1>(g, $p, $r),
                    (_, 2) => tile_q8::<ISA, $rp, 2>(g, $p, $r),
                    (_, 3) => tile_q8::<ISA, $rp, 3>(g, $p, $r),
                    (_, _) => tile_q8::<ISA, $rp, 4>(g, $p, $r),
                }
            }
        };
    }
    let mut p = ps;
    if m == 1 {
        while p + 4 <= pe {
            tile!(4, p, 0, 1);
            p += 4;
        }
        while p < pe {
            tile!(1, p, 0, 1);
            p += 1;
        }
        return;
    }
    while p + RP <= pe {
        let mut r = 0;
        while r < m {
            let rm = (m - r).min(4);
            if RP == 2 {
                tile!(2, p, r, rm);
            } else {
                tile!(1, p, r, rm);
            }
            r += rm;
        }
        p += RP;
    }
    while p < pe {
        let mut r = 0;
        while r < m {
            let rm = (m - r).min(4);
            tile!(1, p, r, rm);
            r += rm;
        }
        p += 1;
    }
}

/// Panels `ps..pe` for all `m` rows with AVX2.
///
/// # Safety
/// The CPU supports AVX2, FMA and F16C; `g` is valid as described at
/// [`Gemm`]; `ps <= pe <= panels`; `format` is quantized.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn run_avx2(g: &Gemm, format: Format, m: usize, ps: usize, pe: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { panels::<AVX2, 1>(g, format, m, ps, pe) }
}

/// As [`run_avx2`] with AVX-VNNI.
///
/// # Safety
/// As [`run_avx2`], and the CPU supports AVX-VNNI.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub(crate) unsafe fn run_avxvnni(g: &Gemm, format: Format, m: usize, ps: usize, pe: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { panels::<AVXVNNI, 1>(g, format, m, ps, pe) }
}

/// As [`run_avx2`] with AVX-512 VNNI on 256-bit vectors (and AVX-512's 32
/// vector registers, which allow tiles of 2 panels × 4 rows).
///
/// # Safety
/// As [`run_avx2`], and the CPU supports AVX-512 F, BW, VL and VNNI.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn run_avx512vnni(g: &Gemm, format: Format, m: usize, ps: usize, pe: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { panels::<AVX512VNNI, 2>(g, format, m, ps, pe) }
}

/// Dense (F32 / F16) weights: rows `j0..j1` of `w` (`n × k`) against all
/// `m` rows of `x`, four weight rows at a time.
///
/// # Safety
/// The CPU supports AVX2, FMA and F16C; `w` holds `n × k` elements of the
/// format (`f32`, or `u16` halves when `F16`), `x` `m × k` floats, `out`
/// `m × n` floats; `j0 <= j1 <= n`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dense_avx2<const F16: bool>(
    w: *const u8,
    k: usize,
    n: usize,
    x: *const f32,
    m: usize,
    out: *mut f32,
    j0: usize,
    j1: usize,
) {
    #[inline(always)]
    unsafe fn load<const F16: bool>(w: *const u8, i: usize) -> __m256 {
        // SAFETY: the caller keeps elements `i..i + 8` inside `w`.
        unsafe {
            if F16 {
                _mm256_cvtph_ps(_mm_loadu_si128(w.cast::<u16>().add(i).cast()))
            } else {
                _mm256_loadu_ps(w.cast::<f32>().add(i))
            }
        }
    }
    #[inline(always)]
    unsafe fn scalar<const F16: bool>(w: *const u8, i: usize) -> f32 {
        // SAFETY: the caller keeps element `i` inside `w`.
        unsafe {
            if F16 {
                half::f16::from_bits(*w.cast::<u16>().add(i)).to_f32()
            } else {
                *w.cast::<f32>().add(i)
            }
        }
    }
    #[inline(always)]
    fn hsum(v: __m256) -> f32 {
        let mut t = [0f32; 8];
        // SAFETY: `t` has room for 8 floats.
        unsafe { _mm256_storeu_ps(t.as_mut_ptr(), v) };
        ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]))
    }
    let k8 = k / 8 * 8;
    // SAFETY: rows `j < j1 <= n` of `w` and rows `r < m` of `x` are read
    // at elements `< k`; `out[r · n + j]` with `r < m`, `j < n` is written.
    unsafe {
        for r in 0..m {
            let xr = x.add(r * k);
            let mut j = j0;
            while j < j1 {
                let rows = (j1 - j).min(4);
                let mut acc = [_mm256_setzero_ps(); 4];
                let mut i = 0;
                while i < k8 {
                    let xv = _mm256_loadu_ps(xr.add(i));
                    for (t, a) in acc.iter_mut().enumerate().take(rows) {
                        *a = _mm256_fmadd_ps(load::<F16>(w, (j + t) * k + i), xv, *a);
                    }
                    i += 8;
                }
                for (t, a) in acc.iter().enumerate().take(rows) {
                    let mut s = hsum(*a);
                    for i in k8..k {
                        s += scalar::<F16>(w, (j + t) * k + i) * *xr.add(i);
                    }
                    *out.add(r * n + j + t) = s;
                }
                j += rows;
            }
        }
    }
}
