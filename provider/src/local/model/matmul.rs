//! The compute backend: the weight matrices, the only two things the
//! forward pass does with them — multiply activations by them, read rows
//! out of them — and the threads it computes on.
//!
//! Everything the model computes with a weight matrix goes through
//! [`Matrix`], and every parallel loop through [`Backend::run`], so the
//! backend is chosen here and nowhere else. It is `foveal-kernels`: a
//! [`QMatrix`] holds the ggml blocks of the file (Q4_0, Q4_1, Q8_0, F16,
//! F32) in row-interleaved panels of the same size, products quantise the
//! activations to 8 bits and multiply in integers (AVX2, AVX-VNNI or
//! AVX-512 VNNI, picked at run time), and the threads are the kernels'
//! spinning [`Pool`]: the calling thread and `threads − 1` workers that
//! park when a turn ends. A product's every output is computed in the
//! same order whatever the number of rows, so a prompt read at once and
//! one read token by token give the same floats.

use std::sync::Arc;

use foveal_kernels::{Format, Pool, QMatrix};

/// A weight matrix of `rows × cols` (ggml's `ne1 × ne0`), quantised.
/// Clones share the blocks (the tied embedding and output).
#[derive(Clone)]
pub(crate) struct Matrix {
    inner: Arc<QMatrix>,
}

impl std::fmt::Debug for Matrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Matrix[{}×{} {}]",
            self.inner.n(),
            self.inner.k(),
            self.inner.format()
        )
    }
}

impl Matrix {
    /// Takes the bytes of a ggml tensor of `format`, `rows × cols`, as in
    /// the file; the error names what does not fit.
    pub(crate) fn from_ggml(
        format: Format,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> Result<Self, String> {
        QMatrix::from_ggml(format, rows, cols, bytes)
            .map(|m| Self { inner: Arc::new(m) })
            .map_err(|e| e.to_string())
    }

    /// Output features: rows of the matrix.
    pub(crate) fn rows(&self) -> usize {
        self.inner.n()
    }

    /// Input features: columns of the matrix.
    pub(crate) fn cols(&self) -> usize {
        self.inner.k()
    }

    /// The block format.
    pub(crate) fn format(&self) -> Format {
        self.inner.format()
    }

    /// Bytes of the blocks in memory (shared when the matrix is cloned).
    pub(crate) fn bytes(&self) -> usize {
        self.inner.size_bytes()
    }

    /// Rows `ids` as f32, one after the other in `out` (`ids.len() ×
    /// cols`): the token embedding's lookup, which dequantises only the
    /// rows it reads. A token outside the vocabulary is an error.
    pub(crate) fn rows_into(&self, ids: &[u32], out: &mut [f32]) -> Result<(), String> {
        let cols = self.cols();
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= self.rows()) {
            return Err(format!(
                "token {id} is outside the vocabulary ({} tokens)",
                self.rows()
            ));
        }
        for (&id, out) in ids.iter().zip(out.chunks_exact_mut(cols)) {
            self.inner.dequantize_row(id as usize, out);
        }
        Ok(())
    }
}

/// The threads the model computes with.
#[derive(Debug)]
pub(crate) struct Backend {
    pool: Pool,
}

impl Backend {
    /// `threads` threads, the calling one included (at least one).
    pub(crate) fn new(threads: usize) -> Self {
        Self {
            pool: Pool::new(threads.max(1)),
        }
    }

    /// Threads counting the caller.
    pub(crate) fn threads(&self) -> usize {
        self.pool.threads()
    }

    /// `out = x · wᵀ`: `x` is `m × w.cols()`, `out` is `m × w.rows()`,
    /// both row-major.
    pub(crate) fn matmul(&self, w: &Matrix, x: &[f32], m: usize, out: &mut [f32]) {
        foveal_kernels::matmul(&w.inner, x, m, out, &self.pool);
    }

    /// `outs[i] = x · ws[i]ᵀ` for matrices sharing the input (q, k, v;
    /// gate, up): the input is quantised once, and one dispatch hands all
    /// the products to the threads. The same floats as separate calls.
    pub(crate) fn matmul_many(&self, ws: &[&Matrix], x: &[f32], m: usize, outs: &mut [&mut [f32]]) {
        let ws: Vec<&QMatrix> = ws.iter().map(|w| &*w.inner).collect();
        foveal_kernels::matmul_many(&ws, x, m, outs, &self.pool);
    }

    /// Runs `f(0)` … `f(tasks − 1)` on the threads, each once, and
    /// returns when all have returned.
    pub(crate) fn run(&self, tasks: usize, f: impl Fn(usize) + Sync) {
        self.pool.run(tasks, f);
    }
}
