//! The forward pass's small operations on f32 rows: RMS norm, rotary
//! embedding, SiLU (attention has its own softmax).
//!
//! Each does its arithmetic in the order candle's CPU kernels do (a
//! sequential sum of squares for the norm, `x / (1 + e^-x)` for SiLU), so
//! the model's logits stay within float rounding of candle's quantized
//! models.

use super::config::{Config, RopeStyle};

/// `out = x / sqrt(mean(x²) + eps) * weight`, one row.
pub(crate) fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let sum2: f32 = x.iter().map(|v| v * v).sum();
    let m = (sum2 / x.len() as f32 + eps).sqrt();
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(weight) {
        *o = v / m * w;
    }
}

/// [`rms_norm`] in place, on each `weight.len()`-float piece of `x` (the
/// per-head q/k norms of Qwen3).
pub(crate) fn rms_norm_pieces(x: &mut [f32], weight: &[f32], eps: f32) {
    let n = weight.len();
    let mut normed = vec![0.0; n];
    for piece in x.chunks_exact_mut(n) {
        rms_norm(piece, weight, eps, &mut normed);
        piece.copy_from_slice(&normed);
    }
}

/// `gate = silu(gate) · up`, elementwise.
pub(crate) fn silu_mul(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
}

/// The rotary position embedding.
#[derive(Debug, Clone)]
pub(crate) struct Rope {
    style: RopeStyle,
    /// Dimensions of a head it turns (the first ones).
    dim: usize,
    head_dim: usize,
    /// `1 / base^(2i/dim)`, one per pair.
    inv_freq: Vec<f32>,
}

impl Rope {
    pub(crate) fn new(config: &Config) -> Self {
        let dim = config.rope_dim;
        // As candle computes it (in f32), for the same angles.
        let inv_freq = (0..dim)
            .step_by(2)
            .map(|i| 1.0 / config.rope_base.powf(i as f32 / dim as f32))
            .collect();
        Self {
            style: config.architecture.rope(),
            dim,
            head_dim: config.head_dim,
            inv_freq,
        }
    }

    /// Pairs turned per head.
    pub(crate) fn pairs(&self) -> usize {
        self.inv_freq.len()
    }

    /// The cosines and sines of position `pos`, one per pair.
    pub(crate) fn angles(&self, pos: usize, cos: &mut [f32], sin: &mut [f32]) {
        for ((f, c), s) in self.inv_freq.iter().zip(cos).zip(sin) {
            let theta = pos as f32 * f;
            *c = theta.cos();
            *s = theta.sin();
        }
    }

    /// Turns every head in `x` (one position's heads, one after the
    /// other) by the angles of its position.
    pub(crate) fn apply(&self, x: &mut [f32], cos: &[f32], sin: &[f32]) {
        let half = self.dim / 2;
        for head in x.chunks_exact_mut(self.head_dim) {
            match self.style {
                RopeStyle::Interleaved => {
                    for (i, pair) in head[..self.dim].chunks_exact_mut(2).enumerate() {
                        let (a, b) = (pair[0], pair[1]);
                        pair[0] = a * cos[i] - b * sin[i];
                        pair[1] = a * sin[i] + b * cos[i];
                    }
                }
                RopeStyle::Halves => {
                    let (first, second) = head[..self.dim].split_at_mut(half);
                    for i in 0..half {
                        let (a, b) = (first[i], second[i]);
                        first[i] = a * cos[i] - b * sin[i];
                        second[i] = a * sin[i] + b * cos[i];
                    }
                }
            }
        }
    }
}
