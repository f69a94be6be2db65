//! The semantic scan: which objects of the active projects are similar
//! enough to the focus to be promoted.
//!
//! The scan reads the host's 8-bit copy of the vector table (a quarter of
//! the bytes of the floats) and recomputes the exact cosine only where the
//! quantized one is within its proven error bound
//! ([`quantized_cosine_error`]) of the threshold, so the result is exactly
//! the seed's rule on the floats. With AVX2 (checked at run time) the dot
//! products use 256-bit integer lanes.
//!
//! A scan's result is kept, keyed by the vector table's content hash, the
//! rows scanned, the focus vector and the threshold: after an edit that
//! leaves the vectors alone (a body, a title, a TODO state) the next render
//! skips the scan.

use std::sync::{Arc, Mutex};

use foveal_sdk::memex::{FileView, quantized_cosine_error};

/// The focus vector, exact and quantized.
#[derive(Debug, Clone, Copy)]
pub struct Probe<'a> {
    /// The floats.
    pub vector: &'a [f32],
    /// Their norm.
    pub norm: f32,
    /// The 8-bit copy.
    pub quantized: &'a [i8],
    /// Its factor (see `FileIndex::quant_factors`).
    pub factor: f32,
}

impl<'a> Probe<'a> {
    /// The vector of object `index` of `file`, if it has one.
    pub fn of(file: &FileView<'a>, index: u32) -> Option<Self> {
        let row = file.object(index).vector;
        let (vector, norm) = file.vector_row(row)?;
        let (quantized, factor) = file.quantized_row(row)?;
        Some(Self {
            vector,
            norm,
            quantized,
            factor,
        })
    }
}

/// A scan's result: `(row, exact score)` of every promoted row, by row.
pub type Promoted = Arc<Vec<(u32, f32)>>;

/// What a scan's result depends on.
#[derive(Debug, Clone, PartialEq)]
struct ScanKey {
    vectors_hash: u64,
    rows: Vec<(u32, u32)>,
    probe_bits: Vec<u32>,
    threshold_bits: u32,
}

/// Scans kept for reuse: a few, most recent last.
static SCANS: Mutex<Vec<(ScanKey, Promoted)>> = Mutex::new(Vec::new());
const SCANS_KEPT: usize = 8;

/// The promoted rows among `rows` (ranges of the vector table) of `file`:
/// from the cache when the table, the rows, the probe and the threshold
/// are unchanged and `cache` allows it.
pub fn promoted_rows(
    file: &FileView<'_>,
    rows: Vec<(u32, u32)>,
    probe: &Probe<'_>,
    threshold: f32,
    cache: bool,
) -> Promoted {
    if file.index.dim as usize != probe.vector.len() || probe.norm == 0.0 {
        return Arc::default();
    }
    if !cache {
        return Arc::new(scan(file, &rows, probe, threshold));
    }
    let key = ScanKey {
        vectors_hash: file.index.vectors_hash,
        rows,
        probe_bits: probe.vector.iter().map(|x| x.to_bits()).collect(),
        threshold_bits: threshold.to_bits(),
    };
    let mut scans = SCANS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(at) = scans.iter().position(|(k, _)| *k == key) {
        let hit = scans.remove(at);
        let promoted = Arc::clone(&hit.1);
        scans.push(hit);
        return promoted;
    }
    drop(scans);
    let promoted = Arc::new(scan(file, &key.rows, probe, threshold));
    let mut scans = SCANS.lock().unwrap_or_else(|e| e.into_inner());
    if scans.len() >= SCANS_KEPT {
        scans.remove(0);
    }
    scans.push((key, Arc::clone(&promoted)));
    promoted
}

/// The full scan, with the widest integer lanes the CPU has.
fn scan(file: &FileView<'_>, rows: &[(u32, u32)], probe: &Probe<'_>, threshold: f32) -> Vec<(u32, f32)> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above; that is the only
        // requirement of a `target_feature` function.
        return unsafe { scan_avx2(file, rows, probe, threshold) };
    }
    scan_portable(file, rows, probe, threshold)
}

/// [`scan_portable`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn scan_avx2(file: &FileView<'_>, rows: &[(u32, u32)], probe: &Probe<'_>, threshold: f32) -> Vec<(u32, f32)> {
    scan_portable(file, rows, probe, threshold)
}

/// The quantized cosine of every row, the exact one where the quantized
/// one is within its error bound of the threshold.
#[inline(always)]
fn scan_portable(
    file: &FileView<'_>,
    rows: &[(u32, u32)],
    probe: &Probe<'_>,
    threshold: f32,
) -> Vec<(u32, f32)> {
    let index = file.index;
    let dim = probe.vector.len();
    let mut promoted = Vec::new();
    if dim == 0 {
        return promoted;
    }
    // The error bound is linear in the row's factor: a + b · f.
    let bound_at_zero = quantized_cosine_error(dim, probe.factor, 0.0);
    let bound_slope = quantized_cosine_error(dim, probe.factor, 1.0) - bound_at_zero;
    for &(start, end) in rows {
        let (start, end) = (start as usize, end as usize);
        let (Some(table), Some(factors)) = (
            index.quantized.get(start * dim..end * dim),
            index.quant_factors.get(start..end),
        ) else {
            continue;
        };
        for (k, (q, &factor)) in table.chunks_exact(dim).zip(factors).enumerate() {
            let approx = dot_i8(probe.quantized, q) as f32 * probe.factor * factor;
            if factor == 0.0 || approx + bound_at_zero + bound_slope * factor < threshold {
                continue;
            }
            let row = (start + k) as u32;
            let Some((v, norm)) = file.vector_row(row) else {
                continue;
            };
            let score = cosine(probe.vector, probe.norm, v, norm);
            if score >= threshold {
                promoted.push((row, score));
            }
        }
    }
    promoted
}

/// Dot product of two 8-bit rows, in 32-bit integers (exact for any
/// dimension below 133,000).
#[inline(always)]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    // Sixteen lanes of i16 products summed in i32: `pmaddwd` on any x86-64,
    // `vpmaddwd` on 256-bit lanes with AVX2.
    let mut acc = [0i32; 16];
    let mut ca = a.chunks_exact(16);
    let mut cb = b.chunks_exact(16);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for k in 0..16 {
            acc[k] += i32::from(i16::from(x[k]) * i16::from(y[k]));
        }
    }
    let mut dot: i32 = acc.iter().sum();
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        dot += i32::from(*x) * i32::from(*y);
    }
    dot
}

/// Cosine similarity from a dot product and the two norms the host
/// precomputed; 0 when either vector is zero or the lengths differ.
#[inline(always)]
pub fn cosine(a: &[f32], norm_a: f32, b: &[f32], norm_b: f32) -> f32 {
    if a.len() != b.len() || norm_a == 0.0 || norm_b == 0.0 {
        return 0.0;
    }
    // Eight independent accumulators: the compiler can vectorise them.
    let mut acc = [0.0f32; 8];
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut dot: f32 = acc.iter().sum();
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        dot += x * y;
    }
    dot / (norm_a * norm_b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_integer_dot_product_is_exact() {
        let a: Vec<i8> = (0..70).map(|i| (i * 37 % 255 - 127) as i8).collect();
        let b: Vec<i8> = (0..70).map(|i| (i * 91 % 255 - 127) as i8).collect();
        let expected: i32 = a.iter().zip(&b).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum();
        assert_eq!(dot_i8(&a, &b), expected);
        assert_eq!(dot_i8(&[-128; 64], &[-128; 64]), 64 * 16384);
    }
}
