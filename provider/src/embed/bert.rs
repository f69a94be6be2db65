//! The BERT encoder all-MiniLM-L6-v2 is: embeddings, then layers of
//! self-attention and a feed-forward block, each closed by a residual
//! sum and a layer norm. It returns the last layer's hidden states; the
//! pooling is the caller's ([`super::local`]).
//!
//! It computes what candle-transformers' `models::bert::BertModel` computes,
//! op for op, on candle-core tensors and candle-nn layers (a test holds the
//! two equal to the bit). It is written here rather than taken from
//! candle-transformers because that crate compiles every model candle has
//! (about 3 of the 11 minutes of a fresh release build on 2 cores) for
//! this one encoder; candle-transformers stays a dev-dependency, as the
//! tests' reference.
//!
//! Only what a sentence-transformers BERT uses is read: absolute position
//! embeddings, a `gelu` (erf), `gelu_new` (tanh) or `relu` activation, no
//! pooler. Dropout is the identity at inference and is left out.

use candle_core::{D, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder, embedding, layer_norm, linear};
use serde::Deserialize;

/// The parts of a Hugging Face BERT `config.json` the encoder reads.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: Activation,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    pub pad_token_id: usize,
    /// Only `absolute` (the default) is supported.
    #[serde(default)]
    pub position_embedding_type: PositionEmbedding,
    /// The weights' prefix when they are not at the top level
    /// (`bert.embeddings…`); the top level and `bert.` are always tried.
    pub model_type: Option<String>,
}

/// The feed-forward block's activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// GELU with the exact erf (Hugging Face's `gelu`).
    Gelu,
    /// GELU's tanh approximation (`gelu_new`, `gelu_pytorch_tanh`).
    #[serde(alias = "gelu_new", alias = "gelu_pytorch_tanh")]
    GeluApproximate,
    Relu,
}

/// How positions are embedded: only absolute positions are supported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PositionEmbedding {
    #[default]
    Absolute,
}

impl Activation {
    fn apply(self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Self::Gelu => xs.gelu_erf(),
            Self::GeluApproximate => xs.gelu(),
            Self::Relu => xs.relu(),
        }
    }
}

struct Embeddings {
    words: Embedding,
    positions: Embedding,
    token_types: Embedding,
    norm: LayerNorm,
}

impl Embeddings {
    fn load(vb: VarBuilder<'_>, c: &Config) -> Result<Self> {
        Ok(Self {
            words: embedding(c.vocab_size, c.hidden_size, vb.pp("word_embeddings"))?,
            positions: embedding(
                c.max_position_embeddings,
                c.hidden_size,
                vb.pp("position_embeddings"),
            )?,
            token_types: embedding(
                c.type_vocab_size,
                c.hidden_size,
                vb.pp("token_type_embeddings"),
            )?,
            norm: layer_norm(c.hidden_size, c.layer_norm_eps, vb.pp("LayerNorm"))?,
        })
    }

    fn forward(&self, ids: &Tensor, types: &Tensor) -> Result<Tensor> {
        let (_, len) = ids.dims2()?;
        let summed = (self.words.forward(ids)? + self.token_types.forward(types)?)?;
        let positions = Tensor::arange(0u32, len as u32, ids.device())?;
        let summed = summed.broadcast_add(&self.positions.forward(&positions)?)?;
        self.norm.forward(&summed)
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    activation: Activation,
    out: Linear,
    out_norm: LayerNorm,
    heads: usize,
    head_size: usize,
}

impl Layer {
    fn load(vb: VarBuilder<'_>, c: &Config) -> Result<Self> {
        let h = c.hidden_size;
        let attention = vb.pp("attention");
        let own = attention.pp("self");
        Ok(Self {
            query: linear(h, h, own.pp("query"))?,
            key: linear(h, h, own.pp("key"))?,
            value: linear(h, h, own.pp("value"))?,
            attention_out: linear(h, h, attention.pp("output").pp("dense"))?,
            attention_norm: layer_norm(
                h,
                c.layer_norm_eps,
                attention.pp("output").pp("LayerNorm"),
            )?,
            intermediate: linear(h, c.intermediate_size, vb.pp("intermediate").pp("dense"))?,
            activation: c.hidden_act,
            out: linear(c.intermediate_size, h, vb.pp("output").pp("dense"))?,
            out_norm: layer_norm(h, c.layer_norm_eps, vb.pp("output").pp("LayerNorm"))?,
            heads: c.num_attention_heads,
            head_size: h / c.num_attention_heads,
        })
    }

    /// `(batch, len, hidden)` → `(batch, heads, len, head_size)`.
    fn split_heads(&self, xs: &Tensor) -> Result<Tensor> {
        let (batch, len, _) = xs.dims3()?;
        xs.reshape((batch, len, self.heads, self.head_size))?
            .transpose(1, 2)?
            .contiguous()
    }

    fn forward(&self, hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let q = self.split_heads(&self.query.forward(hidden)?)?;
        let k = self.split_heads(&self.key.forward(hidden)?)?;
        let v = self.split_heads(&self.value.forward(hidden)?)?;
        let scores = (q.matmul(&k.t()?)? / (self.head_size as f64).sqrt())?;
        let probs = candle_nn::ops::softmax(&scores.broadcast_add(mask)?, D::Minus1)?;
        let context = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .flatten_from(D::Minus2)?;
        let attended = self
            .attention_norm
            .forward(&(self.attention_out.forward(&context)? + hidden)?)?;
        let inner = self
            .activation
            .apply(&self.intermediate.forward(&attended)?)?;
        self.out_norm
            .forward(&(self.out.forward(&inner)? + &attended)?)
    }
}

/// The encoder, loaded.
pub struct Bert {
    embeddings: Embeddings,
    layers: Vec<Layer>,
}

impl std::fmt::Debug for Bert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bert")
            .field("layers", &self.layers.len())
            .finish_non_exhaustive()
    }
}

impl Bert {
    /// Reads the weights from `vb`: at its top level, under `bert.`, or
    /// under `<model_type>.`, whichever holds the embeddings.
    pub fn load(vb: VarBuilder<'_>, c: &Config) -> Result<Self> {
        if c.num_attention_heads == 0 || !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            candle_core::bail!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                c.hidden_size,
                c.num_attention_heads
            )
        }
        let prefixes = [Some("bert"), None, c.model_type.as_deref()];
        let mut first_error = None;
        for prefix in prefixes {
            let vb = match prefix {
                Some(p)
                    if vb.contains_tensor(&format!("{p}.embeddings.word_embeddings.weight")) =>
                {
                    vb.pp(p)
                }
                Some(_) => continue,
                None => vb.clone(),
            };
            match Self::load_at(vb, c) {
                Ok(model) => return Ok(model),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.unwrap_or_else(|| candle_core::Error::Msg("no BERT weights".into())))
    }

    fn load_at(vb: VarBuilder<'_>, c: &Config) -> Result<Self> {
        let embeddings = Embeddings::load(vb.pp("embeddings"), c)?;
        let layers = (0..c.num_hidden_layers)
            .map(|i| Layer::load(vb.pp(format!("encoder.layer.{i}")), c))
            .collect::<Result<_>>()?;
        Ok(Self { embeddings, layers })
    }

    /// The last layer's hidden states, `(batch, len, hidden)`, for token
    /// ids and token types `(batch, len)`; `mask` is 1 for a real token
    /// and 0 for padding, which no token then attends to.
    pub fn forward(&self, ids: &Tensor, types: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let mut hidden = self.embeddings.forward(ids, types)?;
        let dtype = hidden.dtype();
        // (1 - mask) × f32::MIN, as `(batch, 1, 1, len)`: added to the
        // scores, it sends a padded key's weight to zero after the softmax.
        let mask = mask.unsqueeze(1)?.unsqueeze(1)?.to_dtype(dtype)?;
        let mask = (mask.ones_like()? - &mask)?
            .broadcast_mul(&Tensor::new(f32::MIN, mask.device())?.to_dtype(dtype)?)?;
        for layer in &self.layers {
            hidden = layer.forward(&hidden, &mask)?;
        }
        Ok(hidden)
    }
}
