//! The model's shape, read from the GGUF file's metadata.
//!
//! Keys are `{arch}.…` with `arch` = `general.architecture`, as llama.cpp
//! writes them. Only the architectures in [`SUPPORTED`] are read; any
//! other is refused with the list.

use candle_core::quantized::gguf_file::{Content, Value};

/// The architectures the forward pass runs, as `general.architecture`
/// names them.
pub(crate) const SUPPORTED: &[&str] = &["llama", "qwen2", "qwen3"];

/// A supported architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Architecture {
    /// Llama and its small cousins (SmolLM2).
    Llama,
    /// Qwen2 and Qwen2.5: biases on q, k and v.
    Qwen2,
    /// Qwen3: an RMS norm on each head of q and k.
    Qwen3,
}

impl Architecture {
    /// The `general.architecture` name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
        }
    }

    /// How the rotary embedding pairs a head's dimensions. llama.cpp's
    /// `llama_model_rope_type` and candle's quantized models agree: GGUF
    /// llama weights are permuted for pairs of neighbours (`NORM`), Qwen
    /// keeps Hugging Face's halves (`NEOX`).
    pub(crate) fn rope(self) -> RopeStyle {
        match self {
            Self::Llama => RopeStyle::Interleaved,
            Self::Qwen2 | Self::Qwen3 => RopeStyle::Halves,
        }
    }
}

/// Which dimensions of a head the rotary embedding turns together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RopeStyle {
    /// `(2i, 2i+1)`: llama.cpp's `NORM`, candle's `rope_i`.
    Interleaved,
    /// `(i, i + d/2)`: llama.cpp's `NEOX`, candle's `rope`.
    Halves,
}

/// The hyper-parameters of the forward pass.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Config {
    pub(crate) architecture: Architecture,
    /// Transformer blocks (`block_count`).
    pub(crate) layers: usize,
    /// The residual stream's width (`embedding_length`).
    pub(crate) embedding: usize,
    /// Query heads (`attention.head_count`).
    pub(crate) heads: usize,
    /// Key/value heads (`attention.head_count_kv`; GQA when fewer).
    pub(crate) kv_heads: usize,
    /// Dimensions of a head (`attention.key_length`, else
    /// `embedding / heads`).
    pub(crate) head_dim: usize,
    /// Dimensions of a head the rotary embedding turns
    /// (`rope.dimension_count`, else all).
    pub(crate) rope_dim: usize,
    /// The MLP's width (`feed_forward_length`).
    pub(crate) feed_forward: usize,
    /// `attention.layer_norm_rms_epsilon`.
    pub(crate) rms_eps: f32,
    /// `rope.freq_base` (10 000 when absent).
    pub(crate) rope_base: f32,
    /// Positions the model was trained for (`context_length`).
    pub(crate) context: usize,
}

impl Config {
    /// Reads the configuration of `content`; the error says what is
    /// missing or unsupported.
    pub(crate) fn from_gguf(content: &Content) -> Result<Self, String> {
        let name = content
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .map(String::as_str)
            .unwrap_or("");
        let architecture = match name {
            "llama" => Architecture::Llama,
            "qwen2" => Architecture::Qwen2,
            "qwen3" => Architecture::Qwen3,
            other => {
                return Err(format!(
                    "its architecture (general.architecture) is {other:?}; the embedded model runs {}",
                    SUPPORTED.join(", ")
                ));
            }
        };
        let key = |suffix: &str| format!("{name}.{suffix}");
        let get = |suffix: &str| content.metadata.get(&key(suffix));
        let required = |suffix: &str| {
            get(suffix)
                .and_then(as_usize)
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    format!(
                        "its metadata has no positive whole number `{}`",
                        key(suffix)
                    )
                })
        };
        let embedding = required("embedding_length")?;
        let heads = required("attention.head_count")?;
        let kv_heads = match get("attention.head_count_kv") {
            Some(value) => as_usize(value).filter(|&n| n > 0).ok_or_else(|| {
                format!(
                    "`{}` is not a positive number",
                    key("attention.head_count_kv")
                )
            })?,
            None => heads,
        };
        if heads % kv_heads != 0 {
            return Err(format!(
                "its {heads} query heads do not share {kv_heads} key/value heads evenly"
            ));
        }
        let head_dim = match get("attention.key_length").and_then(as_usize) {
            Some(n) if n > 0 => n,
            _ if embedding % heads == 0 => embedding / heads,
            _ => {
                return Err(format!(
                    "its embedding ({embedding}) does not split into {heads} heads"
                ));
            }
        };
        if let Some(value_len) = get("attention.value_length").and_then(as_usize)
            && value_len != head_dim
        {
            return Err(format!(
                "its value heads ({value_len}) differ from its key heads ({head_dim})"
            ));
        }
        let rope_dim = get("rope.dimension_count")
            .and_then(as_usize)
            .unwrap_or(head_dim);
        if rope_dim == 0 || rope_dim > head_dim || rope_dim % 2 != 0 {
            return Err(format!(
                "its rotary dimensions ({rope_dim}) do not fit its heads ({head_dim})"
            ));
        }
        let rms_eps = get("attention.layer_norm_rms_epsilon")
            .and_then(as_f32)
            .ok_or_else(|| {
                format!(
                    "its metadata has no `{}`",
                    key("attention.layer_norm_rms_epsilon")
                )
            })?;
        Ok(Self {
            architecture,
            layers: required("block_count")?,
            embedding,
            heads,
            kv_heads,
            head_dim,
            rope_dim,
            feed_forward: required("feed_forward_length")?,
            rms_eps,
            rope_base: get("rope.freq_base").and_then(as_f32).unwrap_or(10_000.0),
            context: required("context_length")?,
        })
    }

    /// Floats of one position's keys (or values) in one layer.
    pub(crate) fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Floats of one position's queries.
    pub(crate) fn q_dim(&self) -> usize {
        self.heads * self.head_dim
    }
}

/// A whole number of any GGUF integer type.
fn as_usize(value: &Value) -> Option<usize> {
    match *value {
        Value::U8(n) => Some(n.into()),
        Value::U16(n) => Some(n.into()),
        Value::U32(n) => usize::try_from(n).ok(),
        Value::U64(n) => usize::try_from(n).ok(),
        Value::I8(n) => usize::try_from(n).ok(),
        Value::I16(n) => usize::try_from(n).ok(),
        Value::I32(n) => usize::try_from(n).ok(),
        Value::I64(n) => usize::try_from(n).ok(),
        _ => None,
    }
}

/// A float of either GGUF float type.
fn as_f32(value: &Value) -> Option<f32> {
    match *value {
        Value::F32(x) => Some(x),
        Value::F64(x) => Some(x as f32),
        _ => None,
    }
}
