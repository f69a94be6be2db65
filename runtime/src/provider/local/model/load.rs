//! Reading the weights out of the GGUF file, one tensor at a time.
//!
//! Each tensor is read into memory once, as it is in the file. With
//! `requantize`, Q4_1 matrices are converted to Q8_0 right after being
//! read, a few hundred rows at a time on the model's threads: never more
//! than one tensor exists twice, and no converted file is written.

use std::io::{Read, Seek};

use candle_core::quantized::{GgmlDType, QTensor, ggml_file, gguf_file::Content};
use candle_core::{Device, Result};
use rayon::prelude::*;

use super::matmul::Matrix;

/// Floats of one piece of a conversion (dequantised, then quantised
/// again): 1 MiB.
const PIECE_FLOATS: usize = 1 << 18;

/// Reads tensors out of the file.
pub(crate) struct Loader<'a, R> {
    content: &'a Content,
    reader: &'a mut R,
    requantize: bool,
    /// Matrices converted from Q4_1 to Q8_0.
    pub(crate) converted: usize,
}

impl<'a, R: Read + Seek> Loader<'a, R> {
    pub(crate) fn new(content: &'a Content, reader: &'a mut R, requantize: bool) -> Self {
        Self {
            content,
            reader,
            requantize,
            converted: 0,
        }
    }

    /// Whether the file has tensor `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// The tensor as in the file.
    fn read(&mut self, name: &str) -> Result<QTensor> {
        if !self.has(name) {
            candle_core::bail!("the file has no tensor `{name}`")
        }
        self.content.tensor(self.reader, name, &Device::Cpu)
    }

    /// Matrix `name`, which must be `rows × cols` (`None`: any number of
    /// rows).
    pub(crate) fn matrix(
        &mut self,
        name: &str,
        rows: Option<usize>,
        cols: usize,
    ) -> Result<Matrix> {
        let mut tensor = self.read(name)?;
        let (r, c) = tensor.shape().dims2().map_err(|_| {
            candle_core::Error::Msg(format!(
                "tensor `{name}` is {:?}, not a matrix",
                tensor.shape()
            ))
        })?;
        if c != cols || rows.is_some_and(|rows| rows != r) {
            candle_core::bail!(
                "tensor `{name}` is {r}×{c}; the metadata makes it {}×{cols}",
                rows.map_or("?".to_owned(), |n| n.to_string())
            )
        }
        if self.requantize && tensor.dtype() == GgmlDType::Q4_1 {
            tensor = to_q8_0(&tensor)?;
            self.converted += 1;
        }
        Matrix::new(tensor)
    }

    /// Vector `name` (a norm's weights, a bias) of `len` floats.
    pub(crate) fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>> {
        let tensor = self.read(name)?;
        if tensor.shape().elem_count() != len {
            candle_core::bail!(
                "tensor `{name}` has {} values, not {len}",
                tensor.shape().elem_count()
            )
        }
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

/// `tensor` (a matrix) in Q8_0, converted a piece of rows at a time, the
/// pieces in parallel.
fn to_q8_0(tensor: &QTensor) -> Result<QTensor> {
    let (rows, cols) = tensor.shape().dims2()?;
    let dtype = tensor.dtype();
    let row_bytes = cols / dtype.block_size() * dtype.type_size();
    let piece_rows = (PIECE_FLOATS / cols).max(1);
    let data = tensor.data()?;
    let pieces = data
        .par_chunks(piece_rows * row_bytes)
        .map(|bytes| {
            let n = bytes.len() / row_bytes;
            let piece = ggml_file::qtensor_from_ggml(dtype, bytes, vec![n, cols], &Device::Cpu)?;
            let converted = QTensor::quantize(&piece.dequantize(&Device::Cpu)?, GgmlDType::Q8_0)?;
            Ok(converted.data()?.into_owned())
        })
        .collect::<Result<Vec<Vec<u8>>>>()?;
    let bytes = pieces.concat();
    drop(pieces);
    ggml_file::qtensor_from_ggml(GgmlDType::Q8_0, &bytes, vec![rows, cols], &Device::Cpu)
}
