//! The forward pass of the embedded model: a decoder-only transformer of
//! the llama family (SmolLM2, Llama) or Qwen2/Qwen3, read from a GGUF file.
//!
//! - **Weights** stay quantised as in the file (formats the kernels have
//!   no kernels for are converted to Q8_0 while loading, [`load`]); the
//!   token embedding is dequantised one looked-up row at a time, and is
//!   also the output matrix when the file has no `output.weight`. Every
//!   product with a weight matrix goes through
//!   [`Backend`](matmul::Backend), the one place the kernels and threads
//!   are chosen (`foveal-kernels`). A prompt is read as matrix–matrix
//!   products, [`PREFILL_CHUNK`] tokens at a time.
//! - **Activations** are plain `f32` rows in buffers kept between calls;
//!   norms, rotary embedding and attention are loops over them
//!   ([`ops`], [`attention`]). Attention is causal with grouped
//!   key/value heads, and is computed the same way, key by key and split
//!   by split, whether a position is read in a long prompt or on its own:
//!   a reply does not depend on how much of its prompt came from the
//!   cache.
//! - **State** ([`State`]): the KV cache of the tokens read so far (f16,
//!   [`cache`]) and those tokens. [`State::reuse`] keeps the longest prefix a new prompt
//!   shares with them, so only the rest is read again.
//!
//! Matches candle's `quantized_llama` (llama) and `quantized_qwen2` /
//! `quantized_qwen3` (qwen) to the rounding of the activations' 8-bit
//! quantisation and of the f16 KV cache (exactly the same formulas;
//! candle rounds each block's scale to f16, the kernels keep it in f32;
//! candle's cache is f32); the tests compare them, logits and greedy
//! tokens.

mod attention;
pub(crate) mod cache;
pub(crate) mod config;
mod load;
pub(crate) mod matmul;
mod ops;

#[cfg(test)]
mod tests;

use std::io::{Read, Seek};

use candle_core::Result;
use candle_core::quantized::{GgmlDType, gguf_file::Content};
use foveal_kernels::Format;

use self::cache::KvCache;
use self::config::Config;
use self::load::Loader;
use self::matmul::{Backend, Matrix};
use self::ops::Rope;

/// Prompt tokens read in one pass: bounds the activations of a long
/// prompt (`chunk × feed_forward` floats and the like).
pub(crate) const PREFILL_CHUNK: usize = 512;

/// A loaded model: its configuration and weights. Immutable; the state
/// of a conversation is a [`State`].
#[derive(Debug)]
pub(crate) struct Model {
    config: Config,
    embedding: Matrix,
    /// The output projection: `output.weight`, or the embedding (tied).
    output: Matrix,
    output_norm: Vec<f32>,
    layers: Vec<Layer>,
    rope: Rope,
    /// What the weights are in memory, for logs.
    weights: String,
    /// The kernels' threads.
    backend: Backend,
}

#[derive(Debug)]
struct Layer {
    attn_norm: Vec<f32>,
    q: Matrix,
    k: Matrix,
    v: Matrix,
    /// Qwen2's biases.
    q_bias: Option<Vec<f32>>,
    k_bias: Option<Vec<f32>>,
    v_bias: Option<Vec<f32>>,
    /// Qwen3's per-head norms, applied before the rotary embedding.
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    o: Matrix,
    ffn_norm: Vec<f32>,
    gate: Matrix,
    up: Matrix,
    down: Matrix,
}

impl Model {
    /// Loads the model `content` describes from `reader` (the file), to
    /// compute with `threads` threads (the caller's included).
    /// `requantize` converts Q4_1 matrices to Q8_0. The error is a
    /// sentence for [`ProviderError::ModelLoad`](crate::ProviderError).
    pub(crate) fn load<R: Read + Seek>(
        content: &Content,
        reader: &mut R,
        requantize: bool,
        threads: usize,
    ) -> std::result::Result<Self, String> {
        let config = Config::from_gguf(content)?;
        Self::load_weights(config, content, reader, requantize, Backend::new(threads))
            .map_err(|e| e.to_string())
    }

    fn load_weights<R: Read + Seek>(
        config: Config,
        content: &Content,
        reader: &mut R,
        requantize: bool,
        backend: Backend,
    ) -> Result<Self> {
        let mut loader = Loader::new(content, reader, requantize, &backend);
        let d = config.embedding;
        let (q_dim, kv_dim, ff, hd) = (
            config.q_dim(),
            config.kv_dim(),
            config.feed_forward,
            config.head_dim,
        );
        let embedding = loader.matrix("token_embd.weight", None, d)?;
        let vocab = embedding.rows();
        let tied = !loader.has("output.weight");
        let output = if tied {
            embedding.clone()
        } else {
            loader.matrix("output.weight", Some(vocab), d)?
        };
        let output_norm = loader.vector("output_norm.weight", d)?;
        let mut layers = Vec::with_capacity(config.layers);
        for i in 0..config.layers {
            let name = |suffix: &str| format!("blk.{i}.{suffix}");
            layers.push(Layer {
                attn_norm: loader.vector(&name("attn_norm.weight"), d)?,
                q: loader.matrix(&name("attn_q.weight"), Some(q_dim), d)?,
                k: loader.matrix(&name("attn_k.weight"), Some(kv_dim), d)?,
                v: loader.matrix(&name("attn_v.weight"), Some(kv_dim), d)?,
                q_bias: loader.optional_vector(&name("attn_q.bias"), q_dim)?,
                k_bias: loader.optional_vector(&name("attn_k.bias"), kv_dim)?,
                v_bias: loader.optional_vector(&name("attn_v.bias"), kv_dim)?,
                q_norm: loader.optional_vector(&name("attn_q_norm.weight"), hd)?,
                k_norm: loader.optional_vector(&name("attn_k_norm.weight"), hd)?,
                o: loader.matrix(&name("attn_output.weight"), Some(d), q_dim)?,
                ffn_norm: loader.vector(&name("ffn_norm.weight"), d)?,
                gate: loader.matrix(&name("ffn_gate.weight"), Some(ff), d)?,
                up: loader.matrix(&name("ffn_up.weight"), Some(ff), d)?,
                down: loader.matrix(&name("ffn_down.weight"), Some(d), ff)?,
            });
        }
        let weights = describe(
            &embedding,
            (!tied).then_some(&output),
            &layers,
            &loader.converted,
        );
        Ok(Self {
            backend,
            rope: Rope::new(&config),
            config,
            embedding,
            output,
            output_norm,
            layers,
            weights,
        })
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// Tokens of the vocabulary (rows of the embedding).
    pub(crate) fn vocab(&self) -> usize {
        self.embedding.rows()
    }

    /// The weights' formats in memory, e.g. `"210 Q4_1, 1 Q8_0 matrices;
    /// 96 MB"`.
    pub(crate) fn weights(&self) -> &str {
        &self.weights
    }

    /// Threads the model computes with, the caller's included.
    pub(crate) fn threads(&self) -> usize {
        self.backend.threads()
    }

    /// An empty conversation state: no tokens, an empty KV cache.
    pub(crate) fn state(&self) -> State {
        State {
            cache: KvCache::new(
                self.config.layers,
                self.config.kv_heads,
                self.config.head_dim,
                self.config.context,
            ),
            tokens: Vec::new(),
            buffers: Buffers::default(),
        }
    }

    /// Reads `tokens` after those of `state`, adding them to its cache,
    /// and returns the logits that follow the last one (`vocab` floats).
    /// Long inputs are read [`PREFILL_CHUNK`] tokens at a time.
    pub(crate) fn forward(&self, state: &mut State, tokens: &[u32]) -> Result<Vec<f32>> {
        let Some(last) = tokens.len().checked_sub(1) else {
            candle_core::bail!("no tokens to read")
        };
        if state.cache.len() + tokens.len() > self.config.context {
            candle_core::bail!(
                "{} tokens do not fit the context of {}",
                state.cache.len() + tokens.len(),
                self.config.context
            )
        }
        let mut logits = vec![0.0; self.vocab()];
        let chunks = last / PREFILL_CHUNK + 1;
        for (i, chunk) in tokens.chunks(PREFILL_CHUNK).enumerate() {
            let want = (i + 1 == chunks).then_some(&mut logits[..]);
            self.forward_chunk(state, chunk, want)?;
        }
        Ok(logits)
    }

    /// One pass over `tokens`; writes the last one's logits to `logits`
    /// when given.
    fn forward_chunk(
        &self,
        state: &mut State,
        tokens: &[u32],
        logits: Option<&mut [f32]>,
    ) -> Result<()> {
        let c = &self.config;
        let m = tokens.len();
        let (d, q_dim, kv_dim, eps) = (c.embedding, c.q_dim(), c.kv_dim(), c.rms_eps);
        let State {
            cache,
            tokens: read,
            buffers: b,
        } = state;
        let pos0 = cache.len();
        cache.reserve(pos0 + m);
        b.resize(c, self.rope.pairs(), m);
        self.embedding
            .rows_into(tokens, &mut b.x)
            .map_err(candle_core::Error::Msg)?;
        let be = &self.backend;
        let pairs = self.rope.pairs();
        for i in 0..m {
            let range = i * pairs..(i + 1) * pairs;
            self.rope
                .angles(pos0 + i, &mut b.cos[range.clone()], &mut b.sin[range]);
        }

        for (l, layer) in self.layers.iter().enumerate() {
            // Attention.
            norm_rows(&b.x, &layer.attn_norm, eps, &mut b.h);
            be.matmul_many(
                &[&layer.q, &layer.k, &layer.v],
                &b.h,
                m,
                &mut [&mut b.q, &mut b.k, &mut b.v],
            );
            for (buffer, bias) in [
                (&mut b.q, &layer.q_bias),
                (&mut b.k, &layer.k_bias),
                (&mut b.v, &layer.v_bias),
            ] {
                if let Some(bias) = bias {
                    for row in buffer.chunks_exact_mut(bias.len()) {
                        for (x, b) in row.iter_mut().zip(bias) {
                            *x += b;
                        }
                    }
                }
            }
            if let Some(norm) = &layer.q_norm {
                ops::rms_norm_pieces(&mut b.q, norm, eps);
            }
            if let Some(norm) = &layer.k_norm {
                ops::rms_norm_pieces(&mut b.k, norm, eps);
            }
            for i in 0..m {
                let (cos, sin) = (
                    &b.cos[i * pairs..(i + 1) * pairs],
                    &b.sin[i * pairs..(i + 1) * pairs],
                );
                self.rope
                    .apply(&mut b.q[i * q_dim..(i + 1) * q_dim], cos, sin);
                self.rope
                    .apply(&mut b.k[i * kv_dim..(i + 1) * kv_dim], cos, sin);
            }
            cache.write(l, pos0, &b.k, &b.v);
            attention::attention(be, c, &b.q, cache.layer(l), pos0, &mut b.att);
            be.matmul(&layer.o, &b.att, m, &mut b.h);
            add(&mut b.x, &b.h);

            // MLP.
            norm_rows(&b.x, &layer.ffn_norm, eps, &mut b.h);
            be.matmul_many(
                &[&layer.gate, &layer.up],
                &b.h,
                m,
                &mut [&mut b.gate, &mut b.up],
            );
            ops::silu_mul(&mut b.gate, &b.up);
            be.matmul(&layer.down, &b.gate, m, &mut b.h);
            add(&mut b.x, &b.h);
        }
        cache.advance(m);
        read.extend_from_slice(tokens);

        if let Some(logits) = logits {
            let last = &b.x[(m - 1) * d..];
            ops::rms_norm(last, &self.output_norm, eps, &mut b.h[..d]);
            be.matmul(&self.output, &b.h[..d], 1, logits);
        }
        Ok(())
    }
}

/// Summarises the weights' formats for logs.
fn describe(
    embedding: &Matrix,
    output: Option<&Matrix>,
    layers: &[Layer],
    converted: &[(GgmlDType, usize)],
) -> String {
    let mut matrices: Vec<&Matrix> = vec![embedding];
    matrices.extend(output);
    for layer in layers {
        matrices.extend([
            &layer.q,
            &layer.k,
            &layer.v,
            &layer.o,
            &layer.gate,
            &layer.up,
            &layer.down,
        ]);
    }
    let bytes: usize = matrices.iter().map(|m| m.bytes()).sum();
    let mut counts: Vec<(Format, usize)> = Vec::new();
    for m in matrices {
        match counts.iter_mut().find(|(t, _)| *t == m.format()) {
            Some((_, n)) => *n += 1,
            None => counts.push((m.format(), 1)),
        }
    }
    counts.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    let formats = counts
        .iter()
        .map(|(t, n)| format!("{n} {t}"))
        .collect::<Vec<_>>()
        .join(", ");
    let converted: String = converted
        .iter()
        .map(|(t, n)| format!("; {n} converted from {t:?} at load"))
        .collect();
    format!(
        "{formats} matrices{converted}; {:.0} MB",
        bytes as f64 / 1e6
    )
}

/// RMS norm of each `weight.len()`-float row of `x` into `out`.
fn norm_rows(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let n = weight.len();
    for (x, out) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        ops::rms_norm(x, weight, eps, out);
    }
}

/// `x += y`.
fn add(x: &mut [f32], y: &[f32]) {
    for (x, y) in x.iter_mut().zip(y) {
        *x += y;
    }
}

/// The state of one conversation: the tokens read so far and their keys
/// and values.
#[derive(Debug)]
pub(crate) struct State {
    cache: KvCache,
    /// The tokens whose keys and values are in `cache`, in order.
    tokens: Vec<u32>,
    buffers: Buffers,
}

impl State {
    /// The tokens read so far.
    pub(crate) fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Keeps the longest prefix of the tokens read that `prompt` starts
    /// with — all of `prompt` but its last token at most, which is read
    /// again for its logits — and forgets the rest. Returns the prefix's
    /// length: the tokens of `prompt` that need not be read.
    pub(crate) fn reuse(&mut self, prompt: &[u32]) -> usize {
        let common = self
            .tokens
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        let keep = common.min(prompt.len().saturating_sub(1));
        self.truncate(keep);
        keep
    }

    /// Forgets the tokens from `len` on.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.tokens.truncate(len);
        self.cache.truncate(len);
    }

    /// Bytes of the KV cache's room.
    pub(crate) fn cache_bytes(&self) -> usize {
        self.cache.bytes()
    }
}

/// The activations of one pass, kept between passes.
#[derive(Debug, Default)]
struct Buffers {
    /// The residual stream, `m × embedding`.
    x: Vec<f32>,
    /// A normed copy of `x`, or a layer's output to add to it.
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    /// Attention's output, `m × q_dim`.
    att: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    /// The rotary angles of each position, `m × pairs`.
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl Buffers {
    fn resize(&mut self, c: &Config, pairs: usize, m: usize) {
        for (buffer, width) in [
            (&mut self.x, c.embedding),
            (&mut self.h, c.embedding),
            (&mut self.q, c.q_dim()),
            (&mut self.k, c.kv_dim()),
            (&mut self.v, c.kv_dim()),
            (&mut self.att, c.q_dim()),
            (&mut self.gate, c.feed_forward),
            (&mut self.up, c.feed_forward),
            (&mut self.cos, pairs),
            (&mut self.sin, pairs),
        ] {
            buffer.resize(m * width, 0.0);
        }
    }
}
