//! The matmul entry points: kernel selection, activation quantization and
//! the split of the output panels across the pool's threads.

use crate::act::{self, ActRows, Acts};
use crate::format::{Data, Format, QK, QMatrix};
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
    matmul_many_with(kernel, &[w], x, m, &mut [out], pool);
}

/// `outs[i] = x · ws[i]ᵀ` for matrices sharing the input `x` (q, k and v;
/// gate and up), with the kernels of [`Kernel::detect`]. See
/// [`matmul_many_with`].
pub fn matmul_many(ws: &[&QMatrix], x: &[f32], m: usize, outs: &mut [&mut [f32]], pool: &Pool) {
    matmul_many_with(Kernel::detect(), ws, x, m, outs, pool);
}

/// `outs[i] = x · ws[i]ᵀ` with the given kernel set: as many
/// [`matmul_with`] calls, but `x` is quantized once and the work of all
/// the matrices goes to the pool's threads in one dispatch. The results
/// are the same.
///
/// # Panics
/// When `ws` and `outs` differ in length, a matrix's `k` differs from
/// `x.len() / m`, an `outs[i]` is not `m × ws[i].n()` long, or `kernel` is
/// not available on this CPU.
pub fn matmul_many_with(
    kernel: Kernel,
    ws: &[&QMatrix],
    x: &[f32],
    m: usize,
    outs: &mut [&mut [f32]],
    pool: &Pool,
) {
    assert!(
        kernel.is_available(),
        "the {} kernels do not run on this CPU",
        kernel.name()
    );
    assert_eq!(
        ws.len(),
        outs.len(),
        "matmul: {} matrices but {} outputs",
        ws.len(),
        outs.len()
    );
    let Some(k) = ws.first().map(|w| w.k()) else {
        return;
    };
    for (w, out) in ws.iter().zip(outs.iter()) {
        assert_eq!(
            w.k(),
            k,
            "matmul: matrices sharing an input differ in k ({} and {k})",
            w.k()
        );
        assert_eq!(
            x.len(),
            m * k,
            "matmul: x has {} elements, not m × k = {m} × {k}",
            x.len()
        );
        assert_eq!(
            out.len(),
            m * w.n(),
            "matmul: out has {} elements, not m × n = {m} × {}",
            out.len(),
            w.n()
        );
    }
    if m == 0 {
        return;
    }
    let threads = pool.threads();
    let parts: Vec<Part<'_>> = ws
        .iter()
        .zip(outs.iter_mut())
        .map(|(w, out)| {
            let n = w.n();
            let out = Out {
                ptr: out.as_mut_ptr(),
                m,
                n,
            };
            let (data, units, chunk) = match &w.data {
                Data::F32(v) => (PartData::F32(v), n, chunk_size(n, threads, 16, 4)),
                Data::F16(v) => (PartData::F16(v), n, chunk_size(n, threads, 16, 4)),
                Data::Packed(bytes) => {
                    let bytes = bytes.as_slice();
                    assert_eq!(
                        bytes.len(),
                        w.panels() * w.blocks() * w.format().panel_block_bytes()
                    );
                    let (min, align) = if m == 1 { (4, 4) } else { (2, 2) };
                    let panels = w.panels();
                    (
                        PartData::Packed(w.format(), bytes),
                        panels,
                        chunk_size(panels, threads, min, align),
                    )
                }
            };
            Part {
                data,
                units,
                chunk,
                out,
            }
        })
        .collect();
    let mut scratch = None;
    if parts.iter().any(|p| matches!(p.data, PartData::Packed(..))) {
        let mut acts = pool.scratch();
        quantize(kernel, x, m, k, &mut acts, pool);
        scratch = Some(acts);
    }
    let ctx = Ctx {
        kernel,
        x,
        m,
        k,
        acts: scratch.as_deref(),
    };
    // Task t is chunk t - first[i] of part i.
    let mut first = Vec::with_capacity(parts.len() + 1);
    let mut total = 0;
    for p in &parts {
        first.push(total);
        total += p.units.div_ceil(p.chunk);
    }
    pool.run(total, |t| {
        let i = first.partition_point(|&f| f <= t) - 1;
        let p = &parts[i];
        let start = (t - first[i]) * p.chunk;
        // SAFETY: each task is a distinct chunk of one part, and the parts
        // write distinct outputs, so no two tasks write the same element.
        unsafe { p.run(&ctx, start, (start + p.chunk).min(p.units)) };
    });
}

/// Splits `units` into chunks for dynamic scheduling: about four per
/// thread, at least `min`, a multiple of `align`.
fn chunk_size(units: usize, threads: usize, min: usize, align: usize) -> usize {
    let per = units.div_ceil(threads * 4).max(min);
    per.div_ceil(align) * align
}

/// What one matmul call shares between its tasks.
struct Ctx<'a> {
    kernel: Kernel,
    x: &'a [f32],
    m: usize,
    k: usize,
    /// The quantized `x`, when a matrix is quantized.
    acts: Option<&'a Acts>,
}

/// One matrix of a call: its weights, its output, and its work in `units`
/// (panels of 8 rows, or rows for dense weights) cut in chunks.
struct Part<'a> {
    data: PartData<'a>,
    units: usize,
    chunk: usize,
    out: Out,
}

#[derive(Clone, Copy)]
enum PartData<'a> {
    F32(&'a [f32]),
    F16(&'a [u16]),
    Packed(Format, &'a [u8]),
}

// SAFETY: `Out` is shared on purpose (see its impls); the rest is shared
// references.
unsafe impl Sync for Part<'_> {}

impl Part<'_> {
    /// Computes units `start..end` (`end <= units`).
    ///
    /// # Safety
    /// No other thread computes the same units of the same part meanwhile.
    unsafe fn run(&self, c: &Ctx<'_>, start: usize, end: usize) {
        let (m, k, n) = (c.m, c.k, self.out.n);
        match (self.data, c.kernel) {
            (PartData::Packed(format, bytes), kernel) => {
                let acts = c
                    .acts
                    .expect("activations quantized for a quantized matrix");
                let nb = k / QK;
                assert!(acts.qs.len() >= m * k && acts.d.len() >= m * nb);
                assert!(acts.s.len() >= m * nb && acts.isum.len() >= m * nb);
                if kernel == Kernel::Scalar {
                    let a = ActsRef {
                        qs: &acts.qs[..m * k],
                        d: &acts.d[..m * nb],
                        s: &acts.s[..m * nb],
                        isum: &acts.isum[..m * nb],
                    };
                    // SAFETY: units `start..end` are this task's.
                    unsafe { scalar::packed(format, bytes, k, &a, m, self.out, start, end) };
                    return;
                }
                #[cfg(target_arch = "x86_64")]
                {
                    use crate::x86;
                    let g = x86::Gemm {
                        w: bytes.as_ptr(),
                        nb,
                        k,
                        aq: acts.qs.as_ptr(),
                        ad: acts.d.as_ptr(),
                        as_: acts.s.as_ptr(),
                        ai: acts.isum.as_ptr(),
                        out: self.out.ptr,
                        n,
                    };
                    // SAFETY: the kernel set is available (checked in
                    // `matmul_many_with`); `bytes` holds `panels × nb`
                    // panel blocks (asserted there), the activations `m`
                    // rows (asserted above), `out` `m × n` floats;
                    // `start..end` are panels of this task only.
                    unsafe {
                        match kernel {
                            Kernel::Avx2 => x86::run_avx2(&g, format, m, start, end),
                            Kernel::AvxVnni => x86::run_avxvnni(&g, format, m, start, end),
                            _ => x86::run_avx512vnni(&g, format, m, start, end),
                        }
                    }
                }
                #[cfg(not(target_arch = "x86_64"))]
                unreachable!("only the scalar kernels are available");
            }
            (PartData::F32(w), Kernel::Scalar) => {
                // SAFETY: rows `start..end` are this task's.
                unsafe { scalar::dense(w, |v| v, k, c.x, m, self.out, start, end) }
            }
            (PartData::F16(w), Kernel::Scalar) => {
                // SAFETY: rows `start..end` are this task's.
                unsafe {
                    scalar::dense(
                        w,
                        |v| half::f16::from_bits(v).to_f32(),
                        k,
                        c.x,
                        m,
                        self.out,
                        start,
                        end,
                    )
                }
            }
            #[cfg(target_arch = "x86_64")]
            (dense, _) => {
                let (wp, f16) = match dense {
                    PartData::F32(w) => {
                        assert_eq!(w.len(), n * k);
                        (w.as_ptr().cast::<u8>(), false)
                    }
                    PartData::F16(w) => {
                        assert_eq!(w.len(), n * k);
                        (w.as_ptr().cast::<u8>(), true)
                    }
                    PartData::Packed(..) => unreachable!(),
                };
                // SAFETY: AVX2/FMA/F16C are available (checked in
                // `matmul_many_with`); `w` holds `n × k` elements (asserted
                // above), `x` `m × k` floats and `out` `m × n` (asserted in
                // `matmul_many_with`); rows `start..end` are this task's.
                unsafe {
                    if f16 {
                        crate::x86::dense_avx2::<true>(
                            wp,
                            k,
                            n,
                            c.x.as_ptr(),
                            m,
                            self.out.ptr,
                            start,
                            end,
                        )
                    } else {
                        crate::x86::dense_avx2::<false>(
                            wp,
                            k,
                            n,
                            c.x.as_ptr(),
                            m,
                            self.out.ptr,
                            start,
                            end,
                        )
                    }
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => unreachable!("only the scalar kernels are available"),
        }
    }
}
