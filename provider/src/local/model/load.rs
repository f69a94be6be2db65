//! Reading the weights out of the GGUF file, one tensor at a time.
//!
//! Each matrix's bytes are read from the file once, into the kernels'
//! panels ([`Matrix::from_ggml`]); the formats the kernels multiply
//! (Q4_0, Q4_1, Q8_0, F16, F32) stay as they are in the file. Matrices in
//! another ggml format (the k-quants, Q5_0, Q5_1, BF16) are converted to
//! Q8_0, as is Q4_1 when `requantize` asks for it: a few hundred rows at
//! a time on the model's threads, so never more than one matrix exists
//! twice, and no converted file is written.

use std::io::{Read, Seek, SeekFrom};
use std::sync::{Mutex, PoisonError};

use candle_core::quantized::gguf_file::{Content, TensorInfo};
use candle_core::quantized::{GgmlDType, QTensor, ggml_file};
use candle_core::{Device, Result};
use foveal_kernels::Format;

use super::matmul::{Backend, Matrix};

/// Floats of one piece of a conversion (dequantised, then quantised
/// again): 1 MiB.
const PIECE_FLOATS: usize = 1 << 18;

/// Reads tensors out of the file.
pub(crate) struct Loader<'a, R> {
    content: &'a Content,
    reader: &'a mut R,
    requantize: bool,
    backend: &'a Backend,
    /// Matrices converted to Q8_0, by the format they had in the file.
    pub(crate) converted: Vec<(GgmlDType, usize)>,
}

impl<'a, R: Read + Seek> Loader<'a, R> {
    pub(crate) fn new(
        content: &'a Content,
        reader: &'a mut R,
        requantize: bool,
        backend: &'a Backend,
    ) -> Self {
        Self {
            content,
            reader,
            requantize,
            backend,
            converted: Vec::new(),
        }
    }

    /// Whether the file has tensor `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    fn info(&self, name: &str) -> Result<&'a TensorInfo> {
        match self.content.tensor_infos.get(name) {
            Some(info) => Ok(info),
            None => candle_core::bail!("the file has no tensor `{name}`"),
        }
    }

    /// The tensor's bytes as in the file.
    fn bytes(&mut self, name: &str, info: &TensorInfo) -> Result<Vec<u8>> {
        let dtype = info.ggml_dtype;
        let elems = info.shape.elem_count();
        if !elems.is_multiple_of(dtype.block_size()) {
            candle_core::bail!(
                "tensor `{name}` has {elems} values, not whole blocks of {}",
                dtype.block_size()
            )
        }
        let size = elems / dtype.block_size() * dtype.type_size();
        let start = self.content.tensor_data_offset.saturating_add(info.offset);
        let end = self.reader.seek(SeekFrom::End(0))?;
        if start.saturating_add(size as u64) > end {
            candle_core::bail!(
                "tensor `{name}` needs {size} bytes at offset {start}; the file ends at {end}"
            )
        }
        let mut bytes = vec![0u8; size];
        self.reader.seek(SeekFrom::Start(start))?;
        self.reader.read_exact(&mut bytes)?;
        Ok(bytes)
    }

    /// Matrix `name`, which must be `rows × cols` (`None`: any number of
    /// rows).
    pub(crate) fn matrix(
        &mut self,
        name: &str,
        rows: Option<usize>,
        cols: usize,
    ) -> Result<Matrix> {
        let info = self.info(name)?;
        let (r, c) = info.shape.dims2().map_err(|_| {
            candle_core::Error::Msg(format!("tensor `{name}` is {:?}, not a matrix", info.shape))
        })?;
        if c != cols || rows.is_some_and(|rows| rows != r) {
            candle_core::bail!(
                "tensor `{name}` is {r}×{c}; the metadata makes it {}×{cols}",
                rows.map_or("?".to_owned(), |n| n.to_string())
            )
        }
        let dtype = info.ggml_dtype;
        let mut bytes = self.bytes(name, info)?;
        let format = match kernel_format(dtype) {
            Some(Format::Q4_1) if self.requantize => None,
            format => format,
        };
        let format = match format {
            Some(format) => format,
            None => {
                bytes = to_q8_0(dtype, &bytes, r, c, self.backend)?;
                match self.converted.iter_mut().find(|(t, _)| *t == dtype) {
                    Some((_, n)) => *n += 1,
                    None => self.converted.push((dtype, 1)),
                }
                Format::Q8_0
            }
        };
        Matrix::from_ggml(format, r, c, &bytes)
            .map_err(|e| candle_core::Error::Msg(format!("tensor `{name}`: {e}")))
    }

    /// Vector `name` (a norm's weights, a bias) of `len` floats.
    pub(crate) fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>> {
        let info = self.info(name)?;
        if info.shape.elem_count() != len {
            candle_core::bail!(
                "tensor `{name}` has {} values, not {len}",
                info.shape.elem_count()
            )
        }
        let tensor: QTensor =
            info.read(self.reader, self.content.tensor_data_offset, &Device::Cpu)?;
        tensor.dequantize(&Device::Cpu)?.flatten_all()?.to_vec1()
    }

    /// Vector `name` when the file has it.
    pub(crate) fn optional_vector(&mut self, name: &str, len: usize) -> Result<Option<Vec<f32>>> {
        if self.has(name) {
            self.vector(name, len).map(Some)
        } else {
            Ok(None)
        }
    }
}

/// The kernels' format for a ggml type, when they have one.
fn kernel_format(dtype: GgmlDType) -> Option<Format> {
    match dtype {
        GgmlDType::F32 => Some(Format::F32),
        GgmlDType::F16 => Some(Format::F16),
        GgmlDType::Q4_0 => Some(Format::Q4_0),
        GgmlDType::Q4_1 => Some(Format::Q4_1),
        GgmlDType::Q8_0 => Some(Format::Q8_0),
        _ => None,
    }
}

/// The ggml bytes of a `rows × cols` matrix of `dtype`, converted to
/// Q8_0 a piece of rows at a time, the pieces in parallel.
fn to_q8_0(
    dtype: GgmlDType,
    bytes: &[u8],
    rows: usize,
    cols: usize,
    backend: &Backend,
) -> Result<Vec<u8>> {
    if !cols.is_multiple_of(GgmlDType::Q8_0.block_size()) {
        candle_core::bail!(
            "a {dtype:?} matrix of {cols} columns cannot become Q8_0 (blocks of {})",
            GgmlDType::Q8_0.block_size()
        )
    }
    let row_bytes = cols / dtype.block_size() * dtype.type_size();
    let piece_rows = (PIECE_FLOATS / cols).max(1);
    let pieces: Vec<&[u8]> = bytes.chunks(piece_rows * row_bytes).collect();
    let results: Vec<Mutex<Option<Result<Vec<u8>>>>> =
        pieces.iter().map(|_| Mutex::new(None)).collect();
    backend.run(pieces.len(), |i| {
        let piece = pieces[i];
        let n = piece.len() / row_bytes;
        let converted = ggml_file::qtensor_from_ggml(dtype, piece, vec![n, cols], &Device::Cpu)
            .and_then(|t| t.dequantize(&Device::Cpu))
            .and_then(|t| QTensor::quantize(&t, GgmlDType::Q8_0))
            .and_then(|t| Ok(t.data()?.into_owned()));
        *results[i].lock().unwrap_or_else(PoisonError::into_inner) = Some(converted);
    });
    let mut out = Vec::with_capacity(rows * cols / 32 * GgmlDType::Q8_0.type_size());
    for result in results {
        match result.into_inner().unwrap_or_else(PoisonError::into_inner) {
            Some(piece) => out.extend_from_slice(&piece?),
            None => candle_core::bail!("a piece of a conversion did not run"),
        }
    }
    Ok(out)
}
