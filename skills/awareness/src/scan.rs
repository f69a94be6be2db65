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
//! skips the scan. One result is kept for each file a render scans (and as
//! many again, for the versions an edit leaves behind): a cache smaller
//! than the memex's files would drop, in a render's order, each file's
//! result just before it is wanted, and every render would scan it all.

use std::collections::HashMap;
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

/// A scan's result is for these: the vector table's content hash and the
/// rows scanned.
type ScanKey = (u64, Vec<(u32, u32)>);

/// The scans kept for one focus vector and threshold.
#[derive(Debug, Default)]
struct Scans {
    probe_bits: Vec<u32>,
    threshold_bits: u32,
    /// By the vector table's content hash and the rows scanned: the
    /// result, and the lookup that last used it.
    kept: HashMap<ScanKey, (Promoted, u64)>,
    /// Lookups so far.
    clock: u64,
}

impl Scans {
    /// Whether the results kept are for `probe` and the threshold
    /// `threshold_bits`.
    fn for_probe(&self, probe: &Probe<'_>, threshold_bits: u32) -> bool {
        self.threshold_bits == threshold_bits
            && self.probe_bits.len() == probe.vector.len()
            && self
                .probe_bits
                .iter()
                .zip(probe.vector)
                .all(|(&bits, x)| bits == x.to_bits())
    }
}

/// Scans kept for reuse.
static SCANS: Mutex<Option<Scans>> = Mutex::new(None);

/// At least this many results are kept, however few files a render scans.
const SCANS_KEPT: usize = 8;

/// The promoted rows among `rows` (ranges of the vector table) of `file`:
/// from the cache when the table, the rows, the probe and the threshold
/// are unchanged and `cache` allows it. `files` is the number of files a
/// render may scan (the memex's): the results of the lookups of about two
/// renders are kept.
pub fn promoted_rows(
    file: &FileView<'_>,
    rows: Vec<(u32, u32)>,
    probe: &Probe<'_>,
    threshold: f32,
    cache: bool,
    files: usize,
) -> Promoted {
    if file.index.dim as usize != probe.vector.len() || probe.norm == 0.0 {
        return Arc::default();
    }
    if !cache {
        return Arc::new(scan(file, &rows, probe, threshold));
    }
    let threshold_bits = threshold.to_bits();
    let key = (file.index.vectors_hash, rows);
    {
        let mut scans = SCANS.lock().unwrap_or_else(|e| e.into_inner());
        let scans = scans.get_or_insert_with(Scans::default);
        // Another focus or threshold: nothing kept applies.
        if !scans.for_probe(probe, threshold_bits) {
            scans.kept.clear();
            scans.probe_bits = probe.vector.iter().map(|x| x.to_bits()).collect();
            scans.threshold_bits = threshold_bits;
        }
        scans.clock += 1;
        let now = scans.clock;
        if let Some((promoted, used)) = scans.kept.get_mut(&key) {
            *used = now;
            return Arc::clone(promoted);
        }
    }
    let promoted = Arc::new(scan(file, &key.1, probe, threshold));
    let mut scans = SCANS.lock().unwrap_or_else(|e| e.into_inner());
    let scans = scans.get_or_insert_with(Scans::default);
    // Kept only if the focus did not move meanwhile (another thread).
    if scans.for_probe(probe, threshold_bits) {
        let now = scans.clock;
        scans.kept.insert(key, (Arc::clone(&promoted), now));
        // Past twice the files, the results no lookup of about the last
        // two renders used go, all at once: linear, and rare.
        let most = SCANS_KEPT.max(2 * files);
        if scans.kept.len() > most {
            let since = now.saturating_sub(2 * files as u64);
            scans.kept.retain(|_, (_, used)| *used > since);
        }
    }
    promoted
}

/// The full scan, split over the cores when the table is large.
fn scan(
    file: &FileView<'_>,
    rows: &[(u32, u32)],
    probe: &Probe<'_>,
    threshold: f32,
) -> Vec<(u32, f32)> {
    let total: usize = rows.iter().map(|&(s, e)| (e - s) as usize).sum();
    crate::par::split(total, PARALLEL_MIN, |part| {
        scan_part(file, &sub_ranges(rows, part), probe, threshold)
    })
    .concat()
}

/// Rows from which a scan is split over threads.
const PARALLEL_MIN: usize = 16_384;

/// The rows `part` (positions among all the rows of `rows`, in order)
/// covers, as ranges.
fn sub_ranges(rows: &[(u32, u32)], part: std::ops::Range<usize>) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut at = 0usize;
    for &(start, end) in rows {
        let len = (end - start) as usize;
        let (from, to) = (part.start.max(at), part.end.min(at + len));
        if from < to {
            out.push((start + (from - at) as u32, start + (to - at) as u32));
        }
        at += len;
    }
    out
}

/// One part of the scan, with the widest integer lanes the CPU has.
fn scan_part(
    file: &FileView<'_>,
    rows: &[(u32, u32)],
    probe: &Probe<'_>,
    threshold: f32,
) -> Vec<(u32, f32)> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above; that is the only
        // requirement of a `target_feature` function.
        return unsafe { scan_avx2(file, rows, probe, threshold) };
    }
    scan_portable(file, rows, probe, threshold)
}

/// [`scan_portable`] with the dot products in 256-bit integer lanes: the
/// probe is widened to 16-bit lanes once, each row is widened as it is read
/// and multiplied-added pairwise (`vpmaddwd`), one horizontal sum per row.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn scan_avx2(
    file: &FileView<'_>,
    rows: &[(u32, u32)],
    probe: &Probe<'_>,
    threshold: f32,
) -> Vec<(u32, f32)> {
    use std::arch::x86_64::{
        __m256i, _mm_add_epi32, _mm_cvtsi128_si32, _mm_loadu_si128, _mm_shuffle_epi32,
        _mm256_add_epi32, _mm256_castsi256_si128, _mm256_cvtepi8_epi16, _mm256_extracti128_si256,
        _mm256_madd_epi16, _mm256_setzero_si256,
    };
    let dim = probe.vector.len();
    if !dim.is_multiple_of(16) || dim == 0 {
        return scan_portable(file, rows, probe, threshold);
    }
    let lanes = dim / 16;
    // The probe, widened once.
    let wide: Vec<__m256i> = probe
        .quantized
        .chunks_exact(16)
        // SAFETY: each chunk is 16 readable bytes; unaligned loads are allowed.
        .map(|c| unsafe { _mm256_cvtepi8_epi16(_mm_loadu_si128(c.as_ptr().cast())) })
        .collect();
    let dot = |row: &[i8]| -> i32 {
        let mut acc = _mm256_setzero_si256();
        for (k, w) in wide.iter().enumerate().take(lanes) {
            // SAFETY: `row` has `dim` = 16 · lanes bytes, so bytes
            // 16k..16k+16 are in bounds; unaligned loads are allowed.
            let r = unsafe { _mm_loadu_si128(row.as_ptr().add(16 * k).cast()) };
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_cvtepi8_epi16(r), *w));
        }
        let sum = _mm_add_epi32(
            _mm256_castsi256_si128(acc),
            _mm256_extracti128_si256::<1>(acc),
        );
        let sum = _mm_add_epi32(sum, _mm_shuffle_epi32::<0b01_00_11_10>(sum));
        let sum = _mm_add_epi32(sum, _mm_shuffle_epi32::<0b10_11_00_01>(sum));
        _mm_cvtsi128_si32(sum)
    };
    scan_rows(file, rows, probe, threshold, dot)
}

/// The scan with a portable dot product.
fn scan_portable(
    file: &FileView<'_>,
    rows: &[(u32, u32)],
    probe: &Probe<'_>,
    threshold: f32,
) -> Vec<(u32, f32)> {
    scan_rows(file, rows, probe, threshold, |row| {
        dot_i8(probe.quantized, row)
    })
}

/// The quantized cosine of every row (`dot` gives the probe's integer dot
/// product with a row), the exact one where the quantized one is within its
/// error bound of the threshold.
#[inline(always)]
fn scan_rows(
    file: &FileView<'_>,
    rows: &[(u32, u32)],
    probe: &Probe<'_>,
    threshold: f32,
    dot: impl Fn(&[i8]) -> i32,
) -> Vec<(u32, f32)> {
    let index = file.index;
    let dim = probe.vector.len();
    let mut candidates: Vec<u32> = Vec::new();
    if dim == 0 {
        return Vec::new();
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
            let approx = dot(q) as f32 * probe.factor * factor;
            if factor != 0.0 && approx + bound_at_zero + bound_slope * factor >= threshold {
                candidates.push((start + k) as u32);
            }
        }
    }
    // The exact check reads float rows scattered over the table: ask for
    // them a few rows ahead so the waits overlap.
    let mut promoted = Vec::with_capacity(candidates.len());
    for (k, &row) in candidates.iter().enumerate() {
        if let Some(&ahead) = candidates.get(k + 8) {
            prefetch_row(file, ahead);
        }
        let Some((v, norm)) = file.vector_row(row) else {
            continue;
        };
        let score = cosine(probe.vector, probe.norm, v, norm);
        if score >= threshold {
            promoted.push((row, score));
        }
    }
    promoted
}

/// Starts loading float row `row` of the vector table into the cache.
#[inline(always)]
fn prefetch_row(file: &FileView<'_>, row: u32) {
    #[cfg(target_arch = "x86_64")]
    if let Some((v, _)) = file.vector_row(row) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        for line in v.chunks(16) {
            // SAFETY: a prefetch is a hint; it never faults and reads
            // nothing into the program. The pointer is in bounds anyway.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (file, row);
}

/// Dot product of two 8-bit rows, in 32-bit integers (exact for any
/// dimension below 133,000).
#[inline]
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

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_avx2_scan_equals_the_portable_scan() {
        use foveal_sdk::memex::{FileIndex, FileView, ObjectRecord, quantize};
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let dim = 64;
        let mut index = FileIndex {
            dim: dim as u32,
            ..FileIndex::default()
        };
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        let focus: Vec<f32> = (0..dim).map(|_| next()).collect();
        for r in 0..500 {
            // Rows closer and closer to the focus.
            let t = r as f32 / 500.0;
            let v: Vec<f32> = focus.iter().map(|x| x * t + next() * (1.0 - t)).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            index.vectors.extend_from_slice(&v);
            index.norms.push(norm);
            let f = quantize(&v, norm, &mut index.quantized);
            index.quant_factors.push(f);
            index.objects.push(ObjectRecord {
                id: Default::default(),
                id_derived: false,
                done: false,
                level: 1,
                line: 1,
                title: Default::default(),
                todo: Default::default(),
                body: Default::default(),
                tags: Default::default(),
                parent: u32::MAX,
                children: Default::default(),
                vector: r,
                end: r + 1,
                hash: 0,
            });
        }
        let file = FileView {
            path: "t.org".into(),
            text: "".into(),
            index: &index,
        };
        let probe = Probe::of(&file, 499).unwrap();
        for threshold in [0.2, 0.5, 0.75, 0.9] {
            let portable = scan_portable(&file, &[(0, 500)], &probe, threshold);
            // SAFETY: AVX2 was checked above.
            let wide = unsafe { scan_avx2(&file, &[(0, 500)], &probe, threshold) };
            assert_eq!(portable, wide);
            assert!(!portable.is_empty());
        }
    }

    #[test]
    fn sub_ranges_cut_the_rows_in_order() {
        let rows = [(0, 10), (20, 25), (30, 40)];
        assert_eq!(sub_ranges(&rows, 0..25), [(0, 10), (20, 25), (30, 40)]);
        assert_eq!(sub_ranges(&rows, 8..12), [(8, 10), (20, 22)]);
        assert_eq!(sub_ranges(&rows, 15..25), [(30, 40)]);
        assert_eq!(sub_ranges(&rows, 20..25), [(35, 40)]);
        assert_eq!(sub_ranges(&rows, 3..3), []);
    }

    #[test]
    fn the_integer_dot_product_is_exact() {
        let a: Vec<i8> = (0..70).map(|i| (i * 37 % 255 - 127) as i8).collect();
        let b: Vec<i8> = (0..70).map(|i| (i * 91 % 255 - 127) as i8).collect();
        let expected: i32 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| i32::from(*x) * i32::from(*y))
            .sum();
        assert_eq!(dot_i8(&a, &b), expected);
        assert_eq!(dot_i8(&[-128; 64], &[-128; 64]), 64 * 16384);
    }
}
