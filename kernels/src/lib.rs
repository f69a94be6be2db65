//! Quantized matrix multiplication for transformer inference on the CPU.
//!
//! `out = x · Wᵀ` for weights `W` of `n` output features × `k` input
//! features in one of ggml's formats ([`Format`]: Q4_0, Q4_1, Q8_0, and F32
//! / F16 for small tensors), and activations `x` of `m` rows × `k` floats.
//!
//! ```
//! use foveal_kernels::{Format, Pool, QMatrix, matmul};
//! let (n, k, m) = (16, 64, 2);
//! let w: Vec<f32> = (0..n * k).map(|i| (i % 7) as f32 - 3.0).collect();
//! let w = QMatrix::quantize(Format::Q8_0, n, k, &w).unwrap();
//! let x = vec![0.5f32; m * k];
//! let mut out = vec![0.0; m * n];
//! matmul(&w, &x, m, &mut out, &Pool::new(2));
//! ```
//!
//! ## What it may not do
//!
//! Pure arithmetic on slices: no model files, no tokenizer, no allocation
//! in the hot loop, no other foveal crate. `foveal-provider`'s embedded
//! model is its one user.
//!
//! # Formats and layouts
//! [`QMatrix::from_ggml`] takes the bytes of a ggml / GGUF tensor as they
//! are in the file (the table at [`Format`]) and copies them once: F32 and
//! F16 unchanged, the quantized formats into panels of 8 rows whose blocks
//! are interleaved four bytes at a time (described at [`QMatrix`]). The
//! copy has the same size as the file's tensor (plus padding of the last
//! panel to 8 rows); [`QMatrix::to_ggml`] gives the file's bytes back and
//! [`QMatrix::dequantize_row`] reads one row, for embedding lookups.
//!
//! # Activations
//! As in ggml, the activations are quantized per row before the integer
//! dot products, to 8 bits in blocks of 32 (`d = amax / 127`, rounding to
//! nearest even as ggml's AVX code does): the `vec_dot_type` of Q4_0 and
//! Q8_0 is Q8_0, that of Q4_1 is Q8_1 (the same quants plus each block's
//! sum, for Q4_1's minimum). Here the scale and sum are kept as `f32`/`i32`
//! rather than rounded to `f16` inside the block. Q4_0's offset of 8 is
//! taken out with the same block sum, so that its nibbles multiply as
//! unsigned bytes, like Q4_1's. Per output and block, the kernels compute
//! the exact integer dot product, then `acc = fma(d_w · d_a, dot, acc)`
//! (Q4_1 also `acc = fma(m_w, d_a · Σ a, acc)`), in order of `k`: every
//! kernel set gives the same floats bit for bit.
//!
//! # Kernels
//! [`Kernel`] names the sets, chosen at run time ([`Kernel::detect`]):
//! portable Rust (the reference, and the path on aarch64), AVX2 + FMA
//! (the baseline on x86-64), and AVX2 with VNNI's `vpdpbusd` from AVX-VNNI
//! or AVX-512 VNNI. A tile keeps `RM` activation rows × `RP` panels of 8
//! outputs in registers (4 × 1 panel with AVX2's 16 registers, 4 × 2 with
//! AVX-512's 32); per block of 32 inputs it loads each panel's quants once
//! and broadcasts each row's activations four bytes at a time, so one
//! multiply instruction covers 8 outputs × 4 inputs, and the 8 lanes of an
//! accumulator are 8 adjacent outputs (no horizontal sums). Decode (`m ==
//! 1`) uses tiles of 4 panels × 1 row: 32 outputs' weights streamed per
//! step, as many independent dependency chains, each prefetched four
//! blocks ahead. [`matmul_many`] multiplies several matrices by the same
//! input (q, k, v; gate, up) with one quantization and one dispatch.
//! Threads take chunks of panels (contiguous output features) from an
//! atomic counter, so a thread that starts late, or a core that is busy
//! elsewhere, takes fewer.
//!
//! # Pool
//! [`Pool`] is a persistent thread pool with microsecond dispatch: the
//! workers spin on an atomic counter between jobs, and park after 200 µs
//! without one. The caller thread works too; `Pool::new(1)` runs inline.
//! Its scratch space keeps the quantized activations between calls, so a
//! matmul allocates nothing once warm.
//!
//! # Measurements
//! See `benches/matmul.rs` and the numbers in `kernels/README.md`.

mod act;
mod format;
mod matmul;
mod pool;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use format::{Error, Format, PANEL, QK, QMatrix, dequantize_row};
pub use matmul::{Kernel, matmul, matmul_many, matmul_many_with, matmul_with};
pub use pool::{DEFAULT_SPIN, Pool};
