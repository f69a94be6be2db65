//! Weight formats, ggml's block layouts, and [`QMatrix`]: a weight matrix
//! copied once from ggml bytes into the row-interleaved layout the kernels
//! read.

use half::f16;
use std::fmt;

/// Elements in one quantization block of Q4_0, Q4_1 and Q8_0 (ggml's `QK`).
pub const QK: usize = 32;

/// Output rows interleaved in one panel of a quantized [`QMatrix`].
pub const PANEL: usize = 8;

/// A weight format, with ggml's byte layout.
///
/// | format | ggml type id | block | bytes | layout of one block |
/// |--------|--------------|-------|-------|---------------------|
/// | `F32`  | 0 | 1  | 4  | little-endian `f32` |
/// | `F16`  | 1 | 1  | 2  | little-endian IEEE half |
/// | `Q4_0` | 2 | 32 | 18 | `d: f16`, `qs: [u8; 16]`; element `j < 16` is `qs[j] & 15`, element `j + 16` is `qs[j] >> 4`; value `d * (q - 8)` |
/// | `Q4_1` | 3 | 32 | 20 | `d: f16`, `m: f16`, `qs: [u8; 16]` as in Q4_0; value `d * q + m` |
/// | `Q8_0` | 8 | 32 | 34 | `d: f16`, `qs: [i8; 32]`; value `d * q` |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum Format {
    /// 32-bit floats.
    F32,
    /// IEEE half floats.
    F16,
    /// 4-bit quants with a scale per 32 elements.
    Q4_0,
    /// 4-bit quants with a scale and a minimum per 32 elements.
    Q4_1,
    /// 8-bit quants with a scale per 32 elements.
    Q8_0,
}

impl Format {
    /// Every format, in ggml type-id order.
    pub const ALL: [Format; 5] = [
        Format::F32,
        Format::F16,
        Format::Q4_0,
        Format::Q4_1,
        Format::Q8_0,
    ];

    /// Elements in one block: 32 for the quantized formats, 1 for floats.
    pub fn block_elems(self) -> usize {
        match self {
            Format::F32 | Format::F16 => 1,
            Format::Q4_0 | Format::Q4_1 | Format::Q8_0 => QK,
        }
    }

    /// Bytes of one block in ggml's layout.
    pub fn block_bytes(self) -> usize {
        match self {
            Format::F32 => 4,
            Format::F16 => 2,
            Format::Q4_0 => 18,
            Format::Q4_1 => 20,
            Format::Q8_0 => 34,
        }
    }

    /// ggml's type id (`GGML_TYPE_*`, as stored in GGUF files).
    pub fn ggml_type(self) -> u32 {
        match self {
            Format::F32 => 0,
            Format::F16 => 1,
            Format::Q4_0 => 2,
            Format::Q4_1 => 3,
            Format::Q8_0 => 8,
        }
    }

    /// The format of a ggml type id, if it is one of these.
    pub fn from_ggml_type(id: u32) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.ggml_type() == id)
    }

    /// Whether the format is one of the block-quantized ones.
    pub fn is_quantized(self) -> bool {
        self.block_elems() == QK
    }

    /// Bytes of one row of `k` elements in ggml's layout (`k` must be a
    /// multiple of [`Format::block_elems`]).
    pub fn row_bytes(self, k: usize) -> usize {
        k / self.block_elems() * self.block_bytes()
    }

    /// Bytes of scales (and minimums) at the head of one interleaved
    /// panel block: eight `f16` scales, and for Q4_1 eight `f16` minimums.
    pub(crate) fn panel_scale_bytes(self) -> usize {
        match self {
            Format::Q4_0 | Format::Q8_0 => 2 * PANEL,
            Format::Q4_1 => 4 * PANEL,
            Format::F32 | Format::F16 => 0,
        }
    }

    /// Bytes of quants in one interleaved panel block.
    pub(crate) fn panel_quant_bytes(self) -> usize {
        match self {
            Format::Q4_0 | Format::Q4_1 => PANEL * QK / 2,
            Format::Q8_0 => PANEL * QK,
            Format::F32 | Format::F16 => 0,
        }
    }

    /// Bytes of one interleaved panel block: 8 rows × 32 elements.
    pub(crate) fn panel_block_bytes(self) -> usize {
        self.panel_scale_bytes() + self.panel_quant_bytes()
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::F32 => "F32",
            Format::F16 => "F16",
            Format::Q4_0 => "Q4_0",
            Format::Q4_1 => "Q4_1",
            Format::Q8_0 => "Q8_0",
        })
    }
}

/// Why a [`QMatrix`] could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// `k` is not a multiple of the format's block size.
    BadK {
        /// The format.
        format: Format,
        /// Input features asked for.
        k: usize,
    },
    /// A dimension is zero, or `n × k` overflows.
    BadShape {
        /// Output features.
        n: usize,
        /// Input features.
        k: usize,
    },
    /// The byte slice is not `n × row_bytes(k)` long.
    BadLength {
        /// The format.
        format: Format,
        /// Output features.
        n: usize,
        /// Input features.
        k: usize,
        /// Bytes the shape needs.
        expected: usize,
        /// Bytes given.
        actual: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadK { format, k } => write!(
                f,
                "{format}: k = {k} is not a multiple of the block size {}",
                format.block_elems()
            ),
            Error::BadShape { n, k } => {
                write!(f, "bad matrix shape n = {n}, k = {k}: zero or too large")
            }
            Error::BadLength {
                format,
                n,
                k,
                expected,
                actual,
            } => write!(
                f,
                "{format} matrix of {n} rows × {k} columns takes {expected} bytes, got {actual}"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// A 64-byte aligned chunk, so that the packed weights start on a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// A byte buffer aligned to 64 bytes.
#[derive(Clone)]
pub(crate) struct AlignedBytes {
    lines: Vec<Line>,
    len: usize,
}

impl AlignedBytes {
    fn zeroed(len: usize) -> Self {
        AlignedBytes {
            lines: vec![Line([0; 64]); len.div_ceil(64)],
            len,
        }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `lines` holds `lines.len() * 64 >= len` initialised bytes
        // (`Line` is `repr(C)` of a byte array, so has no padding), and the
        // returned slice borrows `self`.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<u8>(), self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, with the unique borrow of `self`.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// The weights of one matrix as the kernels read them.
#[derive(Clone)]
pub(crate) enum Data {
    /// Row-major `n × k` floats.
    F32(Vec<f32>),
    /// Row-major `n × k` halves (as bits).
    F16(Vec<u16>),
    /// Quantized: panels of [`PANEL`] rows; see [`QMatrix`].
    Packed(AlignedBytes),
}

/// A weight matrix of `n` output features (rows) × `k` input features,
/// as used by `y = x · Wᵀ`: each row of `W` is one output's weights, stored
/// as ggml stores it (`ne0 = k`, `ne1 = n`).
///
/// Built from ggml bytes with [`QMatrix::from_ggml`]: F32 and F16 are copied
/// as they are; the quantized formats are copied once into a row-interleaved
/// layout. Rows are taken in panels of eight (the last one padded with zero
/// rows); each panel holds its `k / 32` blocks in order, and each panel
/// block is
///
/// ```text
/// d: [f16; 8]            scale of rows 0..8 of the panel
/// m: [f16; 8]            minimum of rows 0..8 (Q4_1 only)
/// Q4_0, Q4_1: qs: [[u8; 32]; 4]
///     qs[v][4 r + b] = ggml qs byte 4 v + b of row r: its low nibble is
///     element 4 v + b, its high nibble element 16 + 4 v + b
/// Q8_0: qs: [[i8; 32]; 8]
///     qs[v][4 r + b] = element 4 v + b of row r
/// ```
///
/// so that one 256-bit load gives four consecutive elements of each of the
/// eight rows, lined up with four activation bytes broadcast to every lane:
/// one `vpmaddubsw` (AVX2) or `vpdpbusd` (VNNI) then works on eight output
/// features at once, and the eight lanes of the result are eight adjacent
/// outputs, stored without a horizontal sum. The bytes are the same bytes
/// as in the GGUF file, moved; [`QMatrix::to_ggml`] gives them back.
#[derive(Clone)]
pub struct QMatrix {
    n: usize,
    k: usize,
    format: Format,
    pub(crate) data: Data,
}

impl fmt::Debug for QMatrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QMatrix")
            .field("n", &self.n)
            .field("k", &self.k)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

fn check_shape(format: Format, n: usize, k: usize) -> Result<usize, Error> {
    if n == 0
        || k == 0
        || n.checked_mul(k).is_none()
        || n.div_ceil(PANEL) * PANEL > isize::MAX as usize / k
    {
        return Err(Error::BadShape { n, k });
    }
    if !k.is_multiple_of(format.block_elems()) {
        return Err(Error::BadK { format, k });
    }
    Ok(n * format.row_bytes(k))
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

impl QMatrix {
    /// Builds a matrix from the bytes of a ggml tensor of `format` with
    /// `n` rows of `k` elements (`ne0 = k`, `ne1 = n`).
    ///
    /// # Errors
    /// [`Error::BadShape`] when `n` or `k` is zero or the size overflows,
    /// [`Error::BadK`] when `k` is not a multiple of the block size, and
    /// [`Error::BadLength`] when `bytes` is not exactly `n` rows long.
    pub fn from_ggml(format: Format, n: usize, k: usize, bytes: &[u8]) -> Result<QMatrix, Error> {
        let expected = check_shape(format, n, k)?;
        if bytes.len() != expected {
            return Err(Error::BadLength {
                format,
                n,
                k,
                expected,
                actual: bytes.len(),
            });
        }
        let data = match format {
            Format::F32 => Data::F32(
                bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            Format::F16 => Data::F16(
                bytes
                    .chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]]))
                    .collect(),
            ),
            Format::Q4_0 | Format::Q4_1 | Format::Q8_0 => Data::Packed(pack(format, n, k, bytes)),
        };
        Ok(QMatrix { n, k, format, data })
    }

    /// Quantizes row-major `n × k` floats to `format` with ggml's reference
    /// quantizers (`quantize_row_*_ref`), then builds the matrix as
    /// [`QMatrix::from_ggml`] does.
    ///
    /// # Errors
    /// As [`QMatrix::from_ggml`]; `BadLength` when `w.len() != n * k`.
    pub fn quantize(format: Format, n: usize, k: usize, w: &[f32]) -> Result<QMatrix, Error> {
        check_shape(format, n, k)?;
        if w.len() != n * k {
            return Err(Error::BadLength {
                format: Format::F32,
                n,
                k,
                expected: n * k * 4,
                actual: w.len() * 4,
            });
        }
        let bytes = quantize_ggml(format, w);
        QMatrix::from_ggml(format, n, k, &bytes)
    }

    /// Output features (rows).
    pub fn n(&self) -> usize {
        self.n
    }

    /// Input features (columns).
    pub fn k(&self) -> usize {
        self.k
    }

    /// The weight format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Bytes the weights take in memory (the packed copy, including the
    /// zero rows padding the last panel).
    pub fn size_bytes(&self) -> usize {
        match &self.data {
            Data::F32(v) => v.len() * 4,
            Data::F16(v) => v.len() * 2,
            Data::Packed(b) => b.len,
        }
    }

    /// Number of panels of [`PANEL`] rows.
    pub(crate) fn panels(&self) -> usize {
        self.n.div_ceil(PANEL)
    }

    /// Blocks per row.
    pub(crate) fn blocks(&self) -> usize {
        self.k / self.format.block_elems()
    }

    /// The matrix in ggml's byte layout, as given to
    /// [`QMatrix::from_ggml`].
    pub fn to_ggml(&self) -> Vec<u8> {
        match &self.data {
            Data::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::Packed(p) => unpack(self.format, self.n, self.k, p.as_slice()),
        }
    }

    /// Writes row `row` (one output feature's `k` weights), dequantized, to
    /// `out`: the embedding lookup of a quantized token-embedding matrix.
    ///
    /// # Panics
    /// When `row >= n` or `out.len() != k`.
    pub fn dequantize_row(&self, row: usize, out: &mut [f32]) {
        assert!(row < self.n, "row {row} out of {} rows", self.n);
        assert_eq!(
            out.len(),
            self.k,
            "dequantize_row: out has the wrong length"
        );
        let k = self.k;
        match &self.data {
            Data::F32(v) => out.copy_from_slice(&v[row * k..(row + 1) * k]),
            Data::F16(v) => {
                for (o, &h) in out.iter_mut().zip(&v[row * k..(row + 1) * k]) {
                    *o = f16::from_bits(h).to_f32();
                }
            }
            Data::Packed(p) => {
                let (panel, lane) = (row / PANEL, row % PANEL);
                for (l, out) in out.chunks_exact_mut(QK).enumerate() {
                    let b = PanelBlock::new(self.format, p.as_slice(), self.blocks(), panel, l);
                    let (d, m, q) = b.row(lane);
                    for (o, &q) in out.iter_mut().zip(&q) {
                        *o = match self.format {
                            Format::Q4_0 => d * (q - 8) as f32,
                            Format::Q4_1 => d * q as f32 + m,
                            _ => d * q as f32,
                        };
                    }
                }
            }
        }
    }

    /// The whole matrix dequantized, row-major `n × k`.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.n * self.k];
        for (row, o) in out.chunks_exact_mut(self.k).enumerate() {
            self.dequantize_row(row, o);
        }
        out
    }
}

/// Writes row `row` of `w`, dequantized, to `out`; see
/// [`QMatrix::dequantize_row`].
pub fn dequantize_row(w: &QMatrix, row: usize, out: &mut [f32]) {
    w.dequantize_row(row, out);
}

/// One panel block of a packed matrix: eight rows × 32 elements.
pub(crate) struct PanelBlock<'a> {
    format: Format,
    bytes: &'a [u8],
}

impl<'a> PanelBlock<'a> {
    pub(crate) fn new(
        format: Format,
        packed: &'a [u8],
        blocks: usize,
        panel: usize,
        l: usize,
    ) -> Self {
        let sb = format.panel_block_bytes();
        let at = (panel * blocks + l) * sb;
        PanelBlock {
            format,
            bytes: &packed[at..at + sb],
        }
    }

    /// Scale, minimum (Q4_1; else 0) and quants of one row: nibbles as
    /// 0..=15 for Q4_0/Q4_1 (unsigned, before Q4_0's offset of 8), bytes as
    /// signed for Q8_0.
    pub(crate) fn row(&self, lane: usize) -> (f32, f32, [i32; QK]) {
        let b = self.bytes;
        let d = f16_at(b, 2 * lane);
        let m = if self.format == Format::Q4_1 {
            f16_at(b, 2 * PANEL + 2 * lane)
        } else {
            0.0
        };
        let qs = &b[self.format.panel_scale_bytes()..];
        let mut q = [0i32; QK];
        match self.format {
            Format::Q8_0 => {
                for v in 0..8 {
                    for j in 0..4 {
                        q[4 * v + j] = qs[32 * v + 4 * lane + j] as i8 as i32;
                    }
                }
            }
            _ => {
                for v in 0..4 {
                    for j in 0..4 {
                        let byte = qs[32 * v + 4 * lane + j];
                        q[4 * v + j] = (byte & 15) as i32;
                        q[16 + 4 * v + j] = (byte >> 4) as i32;
                    }
                }
            }
        }
        (d, m, q)
    }
}

/// Copies ggml rows into the interleaved layout described at [`QMatrix`].
fn pack(format: Format, n: usize, k: usize, bytes: &[u8]) -> AlignedBytes {
    let nb = k / QK;
    let (bb, sb, scale_bytes) = (
        format.block_bytes(),
        format.panel_block_bytes(),
        format.panel_scale_bytes(),
    );
    let row_bytes = format.row_bytes(k);
    let panels = n.div_ceil(PANEL);
    let mut out = AlignedBytes::zeroed(panels * nb * sb);
    let dst = out.as_mut_slice();
    for row in 0..n {
        let (panel, lane) = (row / PANEL, row % PANEL);
        for l in 0..nb {
            let src = &bytes[row * row_bytes + l * bb..][..bb];
            let blk = &mut dst[(panel * nb + l) * sb..][..sb];
            blk[2 * lane..2 * lane + 2].copy_from_slice(&src[0..2]);
            let qs_src = match format {
                Format::Q4_1 => {
                    blk[2 * PANEL + 2 * lane..2 * PANEL + 2 * lane + 2].copy_from_slice(&src[2..4]);
                    &src[4..]
                }
                _ => &src[2..],
            };
            let qs = &mut blk[scale_bytes..];
            for v in 0..qs_src.len() / 4 {
                qs[32 * v + 4 * lane..32 * v + 4 * lane + 4]
                    .copy_from_slice(&qs_src[4 * v..4 * v + 4]);
            }
        }
    }
    out
}

/// The inverse of [`pack`].
fn unpack(format: Format, n: usize, k: usize, packed: &[u8]) -> Vec<u8> {
    let nb = k / QK;
    let (bb, sb, scale_bytes) = (
        format.block_bytes(),
        format.panel_block_bytes(),
        format.panel_scale_bytes(),
    );
    let row_bytes = format.row_bytes(k);
    let mut out = vec![0u8; n * row_bytes];
    for row in 0..n {
        let (panel, lane) = (row / PANEL, row % PANEL);
        for l in 0..nb {
            let dst = &mut out[row * row_bytes + l * bb..][..bb];
            let blk = &packed[(panel * nb + l) * sb..][..sb];
            dst[0..2].copy_from_slice(&blk[2 * lane..2 * lane + 2]);
            let qs_dst = match format {
                Format::Q4_1 => {
                    dst[2..4].copy_from_slice(&blk[2 * PANEL + 2 * lane..2 * PANEL + 2 * lane + 2]);
                    &mut dst[4..]
                }
                _ => &mut dst[2..],
            };
            let qs = &blk[scale_bytes..];
            for v in 0..qs_dst.len() / 4 {
                qs_dst[4 * v..4 * v + 4]
                    .copy_from_slice(&qs[32 * v + 4 * lane..32 * v + 4 * lane + 4]);
            }
        }
    }
    out
}

/// ggml's reference quantizers (`quantize_row_{q4_0,q4_1,q8_0}_ref`) and
/// the float formats: `w.len()` elements to ggml bytes.
pub(crate) fn quantize_ggml(format: Format, w: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(w.len() / format.block_elems() * format.block_bytes());
    match format {
        Format::F32 => {
            for x in w {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        Format::F16 => {
            for x in w {
                out.extend_from_slice(&f16::from_f32(*x).to_bits().to_le_bytes());
            }
        }
        Format::Q4_0 => {
            for x in w.chunks_exact(QK) {
                let (mut amax, mut max) = (0f32, 0f32);
                for &v in x {
                    if amax < v.abs() {
                        amax = v.abs();
                        max = v;
                    }
                }
                let d = max / -8.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
                for j in 0..QK / 2 {
                    let x0 = x[j] * id;
                    let x1 = x[j + QK / 2] * id;
                    let q0 = ((x0 + 8.5) as i8).min(15) as u8;
                    let q1 = ((x1 + 8.5) as i8).min(15) as u8;
                    out.push(q0 | (q1 << 4));
                }
            }
        }
        Format::Q4_1 => {
            for x in w.chunks_exact(QK) {
                let min = x.iter().copied().fold(f32::MAX, f32::min);
                let max = x.iter().copied().fold(-f32::MAX, f32::max);
                let d = (max - min) / 15.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
                out.extend_from_slice(&f16::from_f32(min).to_bits().to_le_bytes());
                for j in 0..QK / 2 {
                    let x0 = (x[j] - min) * id;
                    let x1 = (x[j + QK / 2] - min) * id;
                    let q0 = ((x0 + 0.5) as i8).min(15) as u8;
                    let q1 = ((x1 + 0.5) as i8).min(15) as u8;
                    out.push(q0 | (q1 << 4));
                }
            }
        }
        Format::Q8_0 => {
            for x in w.chunks_exact(QK) {
                let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
                let d = amax / 127.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_bits().to_le_bytes());
                for &v in x {
                    out.push((v * id).round() as i8 as u8);
                }
            }
        }
    }
    out
}
