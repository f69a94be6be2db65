//! The matmul entry points: kernel selection, activation quantization and
//! the split of the output panels across the pool's threads.

use crate::act::{self, ActRows, Acts};
use crate::format::{Data, Format, PANEL, QK, QMatrix};
use crate::pool::Pool;
use crate::scalar::{self, ActsRef, Out};
use std::sync::Mutex;
use std::sync::OnceLock;

/// A set of kernels, chosen at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kernel {
    /// Portable Rust: the reference, and the path on CPUs without AVX2
    /// (aarch64 included).
    Scalar,
    /// AVX2 + FMA + F16C: `vpmaddubsw` / `vpmaddwd` integer dot products.
    Avx2,
    /// As `Avx2` with AVX-VNNI's `vpdpbusd` (VEX-encoded, 16 registers).
    AvxVnni,
    /// As `Avx2` with AVX-512 VNNI's `vpdpbusd` on 256-bit vectors (EVEX,
    /// 32 registers: tiles of 16 outputs × 4 rows).
    Avx512Vnni,
}

impl Kernel {
    /// Every kernel set, slowest first.
    pub const ALL: [Kernel; 4] = [
        Kernel::Scalar,
        Kernel::Avx2,
        Kernel::AvxVnni,
        Kernel::Avx512Vnni,
    ];

    /// Whether this CPU runs the kernel set.
    pub fn is_available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx2 = has!("avx2") && has!("fma") && has!("f16c");
            match self {
                Kernel::Scalar => true,
                Kernel::Avx2 => avx2,
                Kernel::AvxVnni => avx2 && has!("avxvnni"),
                Kernel::Avx512Vnni => {
                    avx2 && has!("avx512f")
                        && has!("avx512bw")
                        && has!("avx512vl")
                        && has!("avx512vnni")
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Kernel::Scalar
        }
    }

    /// The kernel sets this CPU runs, slowest first.
    pub fn available() -> Vec<Kernel> {
        Kernel::ALL
            .into_iter()
            .filter(|k| k.is_available())
            .collect()
    }

    /// The kernel set [`matmul`] uses: the environment variable
    /// `FOVEAL_KERNELS` (`scalar`, `avx2`, `avxvnni`, `avx512vnni`) when it
    /// names an available one, else the fastest available. Read once.
    pub fn detect() -> Kernel {
        static DETECTED: OnceLock<Kernel> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            let forced = std::env::var("FOVEAL_KERNELS")
                .ok()
                .and_then(|v| Kernel::from_name(&v));
            match forced {
                Some(k) if k.is_available() => k,
                _ => Kernel::best(),
            }
        })
    }

    /// The fastest available kernel set (not looking at the environment).
    pub fn best() -> Kernel {
        [Kernel::Avx512Vnni, Kernel::AvxVnni, Kernel::Avx2]
            .into_iter()
            .find(|k| k.is_available())
            .unwrap_or(Kernel::Scalar)
    }

    /// The kernel set of a name as `FOVEAL_KERNELS` takes it.
    pub fn from_name(name: &str) -> Option<Kernel> {
        Kernel::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name.trim()))
    }

    /// The short name: `scalar`, `avx2`, `avxvnni`, `avx512vnni`.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Avx2 => "avx2",
            Kernel::AvxVnni => "avxvnni",
            Kernel::Avx512Vnni => "avx512vnni",
        }
    }
}

/// `out = x · wᵀ`: `x` is `m × k` row-major, `out` `m × n` row-major, with
/// the kernels of [`Kernel::detect`]. See [`matmul_with`].
pub fn matmul(w: &QMatrix, x: &[f32], m: usize, out: &mut [f32], pool: &Pool) {
    matmul_with(Kernel::detect(), w, x, m, out, pool);
}

/// `out = x · wᵀ` with the given kernel set.
///
/// Quantized weights: the rows of `x` are quantized to 8 bits per block of
/// 32 (see the crate docs), then multiplied in integers block by block.
/// F32 and F16 weights: multiplied in `f32`.
///
/// # Panics
/// When `x.len() != m · k`, `out.len() != m · n`, or `kernel` is not
/// available on this CPU.
pub fn matmul_with(kernel: Kernel, w: &QMatrix, x: &[f32], m: usize, out: &mut [f32], pool: &Pool) {
    assert!(
        kernel.is_available(),
        "the {} kernels do not run on this CPU",
        kernel.name()
    );
    let (n, k) = (w.n(), w.k());
    assert_eq!(
        x.len(),
        m * k,
        "matmul: x has {} elements, not m × k = {m} × {k}",
        x.len()
    );
    assert_eq!(
        out.len(),
        m * n,
        "matmul: out has {} elements, not m × n = {m} × {n}",
        out.len()
    );
    if m == 0 {
        return;
    }
    let o = Out {
        ptr: out.as_mut_ptr(),
        m,
        n,
    };
    match &w.data {
        Data::F32(v) => dense(kernel, v, false, k, n, x, m, o, pool),
        Data::F16(v) => dense(kernel, v, true, k, n, x, m, o, pool),
        Data::Packed(bytes) => {
            let bytes = bytes.as_slice();
            assert_eq!(
                bytes.len(),
                w.panels() * w.blocks() * w.format().panel_block_bytes()
            );
            let mut acts = pool.scratch();
            quantize(kernel, x, m, k, &mut acts, pool);
            packed(kernel, w.format(), bytes, k, n, &acts, m, o, pool);
        }
    }
}

/// Splits `units` into chunks for dynamic scheduling: about four per
/// thread, at least `min`, a multiple of `align`.
fn chunk_size(units: usize, threads: usize, min: usize, align: usize) -> usize {
    let per = units.div_ceil(threads * 4).max(min);
    per.div_ceil(align) * align
}

/// Runs `f(start, end)` over `0..units` in chunks of `chunk`, taken by the
/// pool's threads as they come.
fn for_chunks(pool: &Pool, units: usize, chunk: usize, f: impl Fn(usize, usize) + Sync) {
    pool.run(units.div_ceil(chunk), |c| {
        f(c * chunk, (c * chunk + chunk).min(units))
    });
}

/// Quantizes the `m × k` activations into `acts`, in parallel when large.
fn quantize(kernel: Kernel, x: &[f32], m: usize, k: usize, acts: &mut Acts, pool: &Pool) {
    acts.resize(m, k);
    let nb = k / QK;
    let parts = if m * k >= 1 << 15 {
        pool.threads().min(m)
    } else {
        1
    };
    let rows_of = |p: usize| (p * m / parts, (p + 1) * m / parts);
    // One slot per part, each with disjoint mutable views of its rows.
    let mut slots = Vec::with_capacity(parts);
    {
        let (mut qs, mut d, mut s, mut isum) = (
            &mut acts.qs[..],
            &mut acts.d[..],
            &mut acts.s[..],
            &mut acts.isum[..],
        );
        for p in 0..parts {
            let (r0, r1) = rows_of(p);
            let rows = r1 - r0;
            let (a, b) = std::mem::take(&mut qs).split_at_mut(rows * k);
            qs = b;
            let (c, e) = std::mem::take(&mut d).split_at_mut(rows * nb);
            d = e;
            let (f, g) = std::mem::take(&mut s).split_at_mut(rows * nb);
            s = g;
            let (h, i) = std::mem::take(&mut isum).split_at_mut(rows * nb);
            isum = i;
            slots.push(Mutex::new(Some((
                &x[r0 * k..r1 * k],
                ActRows {
                    qs: a,
                    d: c,
                    s: f,
                    isum: h,
                },
            ))));
        }
    }
    let work = |slot: &Mutex<Option<(&[f32], ActRows<'_>)>>| {
        let taken = slot.lock().map(|mut s| s.take()).unwrap_or(None);
        if let Some((x, rows)) = taken {
            match kernel {
                Kernel::Scalar => act::quantize_rows_scalar(x, k, rows),
                #[cfg(target_arch = "x86_64")]
                // SAFETY: every kernel set but `Scalar` requires AVX2,
                // checked in `matmul_with`.
                _ => unsafe { act::x86::quantize_rows_avx2(x, rows) },
                #[cfg(not(target_arch = "x86_64"))]
                _ => act::quantize_rows_scalar(x, k, rows),
            }
        }
    };
    pool.run(parts, |p| work(&slots[p]));
}

#[allow(clippy::too_many_arguments)]
fn packed(
    kernel: Kernel,
    format: Format,
    bytes: &[u8],
    k: usize,
    n: usize,
    acts: &Acts,
    m: usize,
    out: Out,
    pool: &Pool,
) {
    let nb = k / QK;
    assert!(acts.qs.len() >= m * k && acts.d.len() >= m * nb);
    assert!(acts.s.len() >= m * nb && acts.isum.len() >= m * nb);
    let panels = n.div_ceil(PANEL);
    let (min, align) = if m == 1 { (4, 4) } else { (2, 2) };
    let chunk = chunk_size(panels, pool.threads(), min, align);
    match kernel {
        Kernel::Scalar => {
            let a = ActsRef {
                qs: &acts.qs[..m * k],
                d: &acts.d[..m * nb],
                s: &acts.s[..m * nb],
                isum: &acts.isum[..m * nb],
            };
            // SAFETY: the chunks are disjoint panel ranges.
            for_chunks(pool, panels, chunk, |ps, pe| unsafe {
                scalar::packed(format, bytes, k, &a, m, out, ps, pe)
            });
        }
        #[cfg(target_arch = "x86_64")]
        _ => {
            use crate::x86;
            let g = SyncGemm(x86::Gemm {
                w: bytes.as_ptr(),
                nb,
                k,
                aq: acts.qs.as_ptr(),
                ad: acts.d.as_ptr(),
                as_: acts.s.as_ptr(),
                ai: acts.isum.as_ptr(),
                out: out.ptr,
                n,
            });
            let run = match kernel {
                Kernel::Avx2 => x86::run_avx2,
                Kernel::AvxVnni => x86::run_avxvnni,
                _ => x86::run_avx512vnni,
            };
            // SAFETY: the kernel set is available (checked in
            // `matmul_with`); `bytes` holds `panels × nb` panel blocks
            // (asserted there), the activations `m` rows (asserted above),
            // `out` `m × n` floats; the chunks are disjoint panel ranges
            // within `0..panels`, so no two threads write the same output.
            let g = &g;
            for_chunks(pool, panels, chunk, |ps, pe| {
                // SAFETY: as above.
                unsafe { run(&g.0, format, m, ps, pe) }
            });
        }
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("only the scalar kernels are available"),
    }
}

/// The raw operands, shared by the threads of one matmul.
#[cfg(target_arch = "x86_64")]
struct SyncGemm(crate::x86::Gemm);

// SAFETY: the pointers are read-only except `out`, where each thread
// writes its own panels' columns; all of it outlives the matmul, which
// waits for every thread.
#[cfg(target_arch = "x86_64")]
unsafe impl Sync for SyncGemm {}

#[allow(clippy::too_many_arguments)]
fn dense<T: Copy + Sync + ToF32>(
    kernel: Kernel,
    w: &[T],
    f16: bool,
    k: usize,
    n: usize,
    x: &[f32],
    m: usize,
    out: Out,
    pool: &Pool,
) {
    assert_eq!(w.len(), n * k);
    let chunk = chunk_size(n, pool.threads(), 16, 4);
    match kernel {
        Kernel::Scalar => {
            // SAFETY: the chunks are disjoint row ranges of `w`, so columns
            // of `out`.
            for_chunks(pool, n, chunk, |j0, j1| unsafe {
                scalar::dense(w, T::to_f32, k, x, m, out, j0, j1)
            });
        }
        #[cfg(target_arch = "x86_64")]
        _ => {
            let wp = SyncPtr(w.as_ptr().cast::<u8>());
            // SAFETY: AVX2/FMA/F16C are available (checked in
            // `matmul_with`); `w` holds `n × k` elements of the format
            // (asserted above), `x` `m × k` floats and `out` `m × n`
            // (asserted in `matmul_with`); chunks are disjoint.
            let (wp, out) = (&wp, &out);
            // SAFETY: as above.
            for_chunks(pool, n, chunk, |j0, j1| unsafe {
                if f16 {
                    crate::x86::dense_avx2::<true>(wp.0, k, n, x.as_ptr(), m, out.ptr, j0, j1)
                } else {
                    crate::x86::dense_avx2::<false>(wp.0, k, n, x.as_ptr(), m, out.ptr, j0, j1)
                }
            });
        }
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("only the scalar kernels are available"),
    }
}

#[cfg(target_arch = "x86_64")]
struct SyncPtr(*const u8);
// SAFETY: read-only weights that outlive the matmul.
#[cfg(target_arch = "x86_64")]
unsafe impl Sync for SyncPtr {}

trait ToF32 {
    fn to_f32(self) -> f32;
}
impl ToF32 for f32 {
    fn to_f32(self) -> f32 {
        self
    }
}
impl ToF32 for u16 {
    fn to_f32(self) -> f32 {
        half::f16::from_bits(self).to_f32()
    }
}
