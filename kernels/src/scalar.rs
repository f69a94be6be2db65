//! The portable kernels: the reference the SIMD kernels are tested
//! against, and the path on CPUs without AVX2 (aarch64 included, where it
//! relies on the compiler's auto-vectorisation).
//!
//! For the quantized formats every output is, block by block in order of
//! `k`, `acc = fma(d_w · d_a, dot, acc)` (Q4_1 then `acc = fma(m_w, s_a,
//! acc)`), with `dot` the exact integer dot product (minus `8 · Σ a` for
//! Q4_0): the operations the SIMD kernels do per lane, so their results
//! are the same bit for bit.

use crate::format::{Format, PANEL, PanelBlock, QK};

/// Raw output shared by the threads of one matmul, each writing its own
/// columns.
#[derive(Clone, Copy)]
pub(crate) struct Out {
    pub ptr: *mut f32,
    pub m: usize,
    pub n: usize,
}

// SAFETY: the threads of one matmul write disjoint columns, and the
// matmul does not return (releasing the borrow of `out`) before they finish.
unsafe impl Send for Out {}
// SAFETY: as above.
unsafe impl Sync for Out {}

impl Out {
    /// Writes `out[row · n + col] = v`.
    ///
    /// # Safety
    /// No other thread writes the same element during the matmul.
    #[inline]
    pub(crate) unsafe fn write(&self, row: usize, col: usize, v: f32) {
        assert!(row < self.m && col < self.n);
        // SAFETY: in bounds (asserted); exclusive per the caller.
        unsafe { *self.ptr.add(row * self.n + col) = v }
    }
}

/// Quantized activations as the kernels read them.
pub(crate) struct ActsRef<'a> {
    pub qs: &'a [u8],
    pub d: &'a [f32],
    pub s: &'a [f32],
    pub isum: &'a [i32],
}

/// Panels `ps..pe` of a packed matrix against `m` quantized activation
/// rows.
///
/// # Safety
/// No other thread writes columns `8 ps..8 pe` of `out` meanwhile.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn packed(
    format: Format,
    packed: &[u8],
    k: usize,
    a: &ActsRef<'_>,
    m: usize,
    out: Out,
    ps: usize,
    pe: usize,
) {
    let nb = k / QK;
    let mut acc = vec![[0f32; PANEL]; m];
    for p in ps..pe {
        acc.iter_mut().for_each(|a| *a = [0.0; PANEL]);
        for l in 0..nb {
            let blk = PanelBlock::new(format, packed, nb, p, l);
            let rows: [(f32, f32, [i32; QK]); PANEL] = std::array::from_fn(|lane| blk.row(lane));
            for (r, acc) in acc.iter_mut().enumerate() {
                let aq = &a.qs[r * k + l * QK..][..QK];
                let i = r * nb + l;
                let (da, sa, isum) = (a.d[i], a.s[i], a.isum[i]);
                for (lane, (dw, mw, q)) in rows.iter().enumerate() {
                    let mut dot: i32 = q.iter().zip(aq).map(|(&q, &a)| q * a as i8 as i32).sum();
                    if format == Format::Q4_0 {
                        dot -= 8 * isum;
                    }
                    acc[lane] = (dw * da).mul_add(dot as f32, acc[lane]);
                    if format == Format::Q4_1 {
                        acc[lane] = mw.mul_add(sa, acc[lane]);
                    }
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for (lane, &v) in acc.iter().enumerate() {
                let col = p * PANEL + lane;
                if col < out.n {
                    // SAFETY: this call owns columns of panels `ps..pe`.
                    unsafe { out.write(r, col, v) };
                }
            }
        }
    }
}

/// Dense weights (`f32`, or `f16` bits): rows `j0..j1` of `w` against all
/// `m` rows of `x`, in plain sequential sums.
///
/// # Safety
/// No other thread writes columns `j0..j1` of `out` meanwhile.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn dense<T: Copy>(
    w: &[T],
    to_f32: impl Fn(T) -> f32,
    k: usize,
    x: &[f32],
    m: usize,
    out: Out,
    j0: usize,
    j1: usize,
) {
    for r in 0..m {
        let xr = &x[r * k..(r + 1) * k];
        for j in j0..j1 {
            let wr = &w[j * k..(j + 1) * k];
            let s = wr
                .iter()
                .zip(xr)
                .fold(0f32, |s, (&w, &x)| s + to_f32(w) * x);
            // SAFETY: this call owns columns `j0..j1`.
            unsafe { out.write(r, j, s) };
        }
    }
}
