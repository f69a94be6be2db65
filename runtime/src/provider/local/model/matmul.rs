//! The compute backend: the weight matrices, the only two things the
//! forward pass does with them — multiply activations by them, read rows
//! out of them — and the threads it computes on.
//!
//! Everything the model computes with a weight matrix goes through
//! [`Matrix`], and every parallel loop through [`parallel`], so the
//! backend is chosen here and nowhere else. Today it is candle's
//! `QMatMul` over a `QTensor` (the blocks as in the GGUF file, or
//! converted to Q8_0 at load), whose products run on candle's own thread
//! pool (`candle_core::utils::barrier_pool`: every physical core, or
//! `CANDLE_NUM_THREADS`); the forward pass's own loops run on the same
//! pool, so two pools never wait for each other's spinning threads.
//!
//! Switching to `foveal-kernels` means changing this file only: `Matrix`
//! holds a `QMatrix` built from the same ggml bytes ([`Matrix::new`] gets
//! them from `QTensor::data`), [`Matrix::matmul`] calls its
//! `matmul(w, x, m, out, pool)` and [`Matrix::rows_into`] its
//! `dequantize_row`; [`parallel`] runs on that `pool`.

use std::ops::Range;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Result, Storage, Tensor};

/// A weight matrix of `rows × cols` (ggml's `ne1 × ne0`), quantised.
#[derive(Clone)]
pub(crate) struct Matrix {
    inner: QMatMul,
    rows: usize,
    cols: usize,
    dtype: GgmlDType,
    bytes: usize,
}

impl std::fmt::Debug for Matrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Matrix[{}×{} {:?}]", self.rows, self.cols, self.dtype)
    }
}

impl Matrix {
    /// Takes a 2-D tensor as read from the file.
    pub(crate) fn new(tensor: QTensor) -> Result<Self> {
        let (rows, cols) = tensor.shape().dims2()?;
        let dtype = tensor.dtype();
        let bytes = tensor.storage_size_in_bytes();
        Ok(Self {
            // F32 and F16 matrices become plain f32 tensors here; the
            // quantised types stay as they are.
            inner: QMatMul::from_qtensor(tensor)?,
            rows,
            cols,
            dtype,
            bytes,
        })
    }

    /// Output features: rows of the matrix.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// The block format.
    pub(crate) fn dtype(&self) -> GgmlDType {
        self.dtype
    }

    /// Bytes of the blocks (shared when the matrix is cloned).
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// `out = x · selfᵀ`: `x` is `m × cols`, `out` is `m × rows`, both
    /// row-major.
    pub(crate) fn matmul(&self, x: &[f32], m: usize, out: &mut [f32]) -> Result<()> {
        debug_assert_eq!(x.len(), m * self.cols);
        debug_assert_eq!(out.len(), m * self.rows);
        let xs = Tensor::from_slice(x, (m, self.cols), &Device::Cpu)?;
        copy_out(&self.inner.forward(&xs)?, out)
    }

    /// Rows `ids` as f32, one after the other in `out` (`ids.len() ×
    /// cols`): the token embedding's lookup, which dequantises only the
    /// rows it reads.
    pub(crate) fn rows_into(&self, ids: &[u32], out: &mut [f32]) -> Result<()> {
        debug_assert_eq!(out.len(), ids.len() * self.cols);
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= self.rows) {
            candle_core::bail!(
                "token {id} is outside the vocabulary ({} tokens)",
                self.rows
            )
        }
        let ids = Tensor::from_slice(ids, ids.len(), &Device::Cpu)?;
        copy_out(&self.inner.embedding(&ids)?, out)
    }
}

/// Runs `f` over `0..n`, split into ranges across the backend's threads
/// (the calling thread among them).
pub(crate) fn parallel(n: usize, f: impl Fn(Range<usize>) + Sync) {
    candle_core::utils::barrier_pool().execute_chunked(n, f);
}

/// Threads the backend computes with, the calling one included.
pub(crate) fn threads() -> usize {
    candle_core::utils::barrier_pool().n_workers() + 1
}

/// Copies a contiguous f32 tensor into `out`.
fn copy_out(tensor: &Tensor, out: &mut [f32]) -> Result<()> {
    let (storage, layout) = tensor.storage_and_layout();
    let Storage::Cpu(cpu) = &*storage else {
        candle_core::bail!("the model computes on the CPU")
    };
    let data = cpu.as_slice::<f32>()?;
    match layout.contiguous_offsets() {
        Some((start, end)) if end - start == out.len() => {
            out.copy_from_slice(&data[start..end]);
            Ok(())
        }
        _ => candle_core::bail!(
            "a matrix product gave {:?}, not {} contiguous floats",
            layout.shape(),
            out.len()
        ),
    }
}
