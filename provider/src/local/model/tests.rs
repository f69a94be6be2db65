//! The forward pass against candle's quantized models: SmolLM2 (the model
//! file, when present) against `quantized_llama`, and tiny random Qwen2
//! and Qwen3 files written here against `quantized_qwen2` /
//! `quantized_qwen3`; the KV cache's reuse against a cold run.

use std::io::{Cursor, Seek};

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen2, quantized_qwen3};

use super::*;
use crate::ProviderSettings;
use crate::local::tokenizer::LocalTokenizer;

// --- tiny random models ---------------------------------------------------

/// Threads of the models under test: two, so that the pool's split of
/// the work is part of what is compared.
const THREADS: usize = 2;

/// The shape of a tiny model written for a test.
#[derive(Debug, Clone, Copy)]
struct Tiny {
    architecture: &'static str,
    layers: usize,
    embedding: usize,
    heads: usize,
    kv_heads: usize,
    /// Written as `attention.key_length` when it is not `embedding / heads`.
    head_dim: usize,
    feed_forward: usize,
    vocab: usize,
    /// No `output.weight`: the embedding is the output.
    tied: bool,
    /// Qwen2's q/k/v biases.
    biases: bool,
    /// Qwen3's per-head q/k norms.
    qk_norms: bool,
    /// The matrices' format. F16 is multiplied in f32 by both this
    /// forward pass and candle's, so the two agree to float rounding;
    /// with 8-bit formats each product also quantises its input to 8
    /// bits (candle rounding each block's scale to f16, the kernels
    /// keeping it in f32), and random weights amplify that.
    matrices: GgmlDType,
    /// Output rows of zeros for every token but the ASCII letters and the
    /// space (byte-level token ids = bytes), so that greedy replies are
    /// plain text.
    letters_only: bool,
}

const QWEN2: Tiny = Tiny {
    architecture: "qwen2",
    layers: 2,
    embedding: 128,
    heads: 4,
    kv_heads: 2,
    head_dim: 32,
    feed_forward: 256,
    vocab: 256,
    tied: false,
    biases: true,
    qk_norms: false,
    matrices: GgmlDType::F16,
    letters_only: false,
};

/// Qwen3 with heads wider than `embedding / heads` (as Qwen3-0.6B has),
/// and a tied output.
const QWEN3: Tiny = Tiny {
    architecture: "qwen3",
    layers: 2,
    embedding: 128,
    heads: 4,
    kv_heads: 2,
    head_dim: 64,
    feed_forward: 256,
    vocab: 256,
    tied: true,
    biases: false,
    qk_norms: true,
    matrices: GgmlDType::F16,
    letters_only: false,
};

/// A GGUF file of `tiny`'s shape with random matrices and F32 vectors
/// (a few hundred KB), seeded by `seed`.
fn tiny_gguf(tiny: Tiny, seed: u64) -> Vec<u8> {
    tiny_gguf_with(tiny, seed, Vec::new())
}

/// [`tiny_gguf`] with more metadata (a tokenizer, a chat template).
fn tiny_gguf_with(tiny: Tiny, seed: u64, extra: Vec<(String, Value)>) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut random = |n: usize, center: f32, spread: f32| -> Vec<f32> {
        (0..n)
            .map(|_| center + spread * (rng.f32() * 2.0 - 1.0))
            .collect()
    };
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let matrix = |tensors: &mut Vec<(String, QTensor)>, name: String, rows, cols, values| {
        let t = Tensor::from_vec(values, (rows, cols), &Device::Cpu).unwrap();
        tensors.push((name, QTensor::quantize(&t, tiny.matrices).unwrap()));
    };
    let vector = |tensors: &mut Vec<(String, QTensor)>, name: String, values: Vec<f32>| {
        let t = Tensor::from_vec(values.clone(), values.len(), &Device::Cpu).unwrap();
        tensors.push((name, QTensor::quantize(&t, GgmlDType::F32).unwrap()));
    };
    let (d, ff, hd) = (tiny.embedding, tiny.feed_forward, tiny.head_dim);
    let (q_dim, kv_dim) = (tiny.heads * hd, tiny.kv_heads * hd);
    let w = |n: usize| 1.0 / (n as f32).sqrt();
    matrix(
        &mut tensors,
        "token_embd.weight".into(),
        tiny.vocab,
        d,
        random(tiny.vocab * d, 0.0, 1.0),
    );
    if !tiny.tied {
        matrix(
            &mut tensors,
            "output.weight".into(),
            tiny.vocab,
            d,
            random(tiny.vocab * d, 0.0, w(d))
                .chunks(d)
                .enumerate()
                .flat_map(|(token, row)| {
                    let letter = token < 128 && (token as u8).is_ascii_alphabetic() || token == 32;
                    let keep = !tiny.letters_only || letter;
                    row.iter().map(move |&x| if keep { x } else { 0.0 })
                })
                .collect(),
        );
    }
    vector(
        &mut tensors,
        "output_norm.weight".into(),
        random(d, 1.0, 0.2),
    );
    for i in 0..tiny.layers {
        let name = |s: &str| format!("blk.{i}.{s}");
        vector(&mut tensors, name("attn_norm.weight"), random(d, 1.0, 0.2));
        for (part, rows) in [("q", q_dim), ("k", kv_dim), ("v", kv_dim)] {
            matrix(
                &mut tensors,
                name(&format!("attn_{part}.weight")),
                rows,
                d,
                random(rows * d, 0.0, 2.0 * w(d)),
            );
            if tiny.biases {
                vector(
                    &mut tensors,
                    name(&format!("attn_{part}.bias")),
                    random(rows, 0.0, 0.5),
                );
            }
        }
        if tiny.qk_norms {
            vector(
                &mut tensors,
                name("attn_q_norm.weight"),
                random(hd, 1.0, 0.2),
            );
            vector(
                &mut tensors,
                name("attn_k_norm.weight"),
                random(hd, 1.0, 0.2),
            );
        }
        matrix(
            &mut tensors,
            name("attn_output.weight"),
            d,
            q_dim,
            random(d * q_dim, 0.0, w(q_dim)),
        );
        vector(&mut tensors, name("ffn_norm.weight"), random(d, 1.0, 0.2));
        for part in ["gate", "up"] {
            matrix(
                &mut tensors,
                name(&format!("ffn_{part}.weight")),
                ff,
                d,
                random(ff * d, 0.0, 2.0 * w(d)),
            );
        }
        matrix(
            &mut tensors,
            name("ffn_down.weight"),
            d,
            ff,
            random(d * ff, 0.0, w(ff)),
        );
    }

    let arch = tiny.architecture;
    let mut metadata: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(arch.into())),
        (
            format!("{arch}.block_count"),
            Value::U32(tiny.layers as u32),
        ),
        (format!("{arch}.context_length"), Value::U32(1024)),
        (
            format!("{arch}.rope.dimension_count"),
            Value::U32(hd as u32),
        ),
        (format!("{arch}.embedding_length"), Value::U32(d as u32)),
        (format!("{arch}.feed_forward_length"), Value::U32(ff as u32)),
        (
            format!("{arch}.attention.head_count"),
            Value::U32(tiny.heads as u32),
        ),
        (
            format!("{arch}.attention.head_count_kv"),
            Value::U32(tiny.kv_heads as u32),
        ),
        (
            format!("{arch}.attention.layer_norm_rms_epsilon"),
            Value::F32(1e-6),
        ),
        (format!("{arch}.rope.freq_base"), Value::F32(10_000.0)),
        // candle's Qwen3 computes its rotary tables in this dtype (F16
        // unless 0 = F32); F32 compares the forward passes, not f16
        // rounding of the angles.
        ("general.dtype".into(), Value::U32(0)),
    ];
    if hd != d / tiny.heads {
        metadata.push((
            format!("{arch}.attention.key_length"),
            Value::U32(hd as u32),
        ));
        metadata.push((
            format!("{arch}.attention.value_length"),
            Value::U32(hd as u32),
        ));
    }
    metadata.extend(extra);
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = Cursor::new(Vec::new());
    gguf_file::write(&mut file, &metadata, &tensors).unwrap();
    file.into_inner()
}

fn content(bytes: &[u8]) -> (Content, Cursor<&[u8]>) {
    let mut reader = Cursor::new(bytes);
    (Content::read(&mut reader).unwrap(), reader)
}

fn load_tiny(bytes: &[u8]) -> Model {
    let (content, mut reader) = content(bytes);
    Model::load(&content, &mut reader, false, THREADS).unwrap()
}

fn to_vec(logits: &Tensor) -> Vec<f32> {
    logits.flatten_all().unwrap().to_vec1().unwrap()
}

fn argmax(xs: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in xs.iter().enumerate() {
        if x > xs[best] {
            best = i;
        }
    }
    best as u32
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// A reference model: candle's forward pass with its own KV cache.
trait Reference {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Vec<f32>;
}

impl Reference for quantized_llama::ModelWeights {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Vec<f32> {
        let input = Tensor::new(tokens, &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        to_vec(&quantized_llama::ModelWeights::forward(self, &input, pos).unwrap())
    }
}

impl Reference for quantized_qwen2::ModelWeights {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Vec<f32> {
        let input = Tensor::new(tokens, &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        to_vec(&quantized_qwen2::ModelWeights::forward(self, &input, pos).unwrap())
    }
}

impl Reference for quantized_qwen3::ModelWeights {
    fn forward(&mut self, tokens: &[u32], pos: usize) -> Vec<f32> {
        let input = Tensor::new(tokens, &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        to_vec(&quantized_qwen3::ModelWeights::forward(self, &input, pos).unwrap())
    }
}

/// How far the tiny models' logits may be from candle's: the KV cache
/// keeps keys and values in f16 (candle's in f32), which moves the
/// logits of these random models by a few thousandths.
const TINY_TOLERANCE: f32 = 1e-2;

/// The same for SmolLM2 with f16 weights, whose logits are larger.
const SMOLLM2_TOLERANCE: f32 = 5e-2;

/// Reads `prompt` and generates `n` tokens greedily with both models,
/// comparing each step's logits (`tolerance`, absolute) and token.
/// Returns the tokens and the largest difference seen.
fn compare_greedy(
    model: &Model,
    reference: &mut dyn Reference,
    prompt: &[u32],
    n: usize,
    tolerance: f32,
) -> (Vec<u32>, f32) {
    let mut state = model.state();
    let mut ours = model.forward(&mut state, prompt).unwrap();
    let mut theirs = reference.forward(prompt, 0);
    let mut tokens = Vec::new();
    let mut worst = 0.0f32;
    for step in 0..n {
        let diff = max_diff(&ours, &theirs);
        worst = worst.max(diff);
        assert!(
            diff <= tolerance,
            "prompt {prompt:?}, step {step}: logits differ by {diff} (tokens so far {tokens:?})"
        );
        let (a, b) = (argmax(&ours), argmax(&theirs));
        assert_eq!(
            a, b,
            "prompt {prompt:?}, step {step}: greedy tokens differ (so far {tokens:?})"
        );
        tokens.push(a);
        let pos = prompt.len() + step;
        ours = model.forward(&mut state, &[a]).unwrap();
        theirs = reference.forward(&[a], pos);
    }
    (tokens, worst)
}

const TINY_PROMPTS: &[&[u32]] = &[
    &[1, 2, 3, 4, 5, 6, 7],
    &[200, 17, 17, 99, 3],
    &[42],
    &[5, 250, 128, 64, 32, 16, 8, 4, 2, 1, 0, 255, 77],
];

#[test]
fn qwen2_logits_and_greedy_tokens_match_candles_quantized_qwen2() {
    let bytes = tiny_gguf(QWEN2, 2);
    assert!(bytes.len() < 1024 * 1024, "{} bytes", bytes.len());
    let model = load_tiny(&bytes);
    assert_eq!(model.config().architecture, config::Architecture::Qwen2);
    for prompt in TINY_PROMPTS {
        let (content, mut reader) = content(&bytes);
        let mut reference =
            quantized_qwen2::ModelWeights::from_gguf(content, &mut reader, &Device::Cpu).unwrap();
        let (tokens, worst) = compare_greedy(&model, &mut reference, prompt, 12, TINY_TOLERANCE);
        eprintln!("qwen2 {prompt:?} → {tokens:?}, logits within {worst:e}");
    }
}

#[test]
fn qwen3_logits_and_greedy_tokens_match_candles_quantized_qwen3() {
    let bytes = tiny_gguf(QWEN3, 3);
    let model = load_tiny(&bytes);
    assert_eq!(model.config().head_dim, 64);
    for prompt in TINY_PROMPTS {
        let (content, mut reader) = content(&bytes);
        let mut reference =
            quantized_qwen3::ModelWeights::from_gguf(content, &mut reader, &Device::Cpu).unwrap();
        let (tokens, worst) = compare_greedy(&model, &mut reference, prompt, 12, TINY_TOLERANCE);
        eprintln!("qwen3 {prompt:?} → {tokens:?}, logits within {worst:e}");
    }
}

#[test]
fn a_tiny_llama_matches_candles_quantized_llama() {
    let tiny = Tiny {
        architecture: "llama",
        head_dim: 32,
        biases: false,
        qk_norms: false,
        tied: true,
        ..QWEN2
    };
    let bytes = tiny_gguf(tiny, 4);
    let model = load_tiny(&bytes);
    for prompt in TINY_PROMPTS {
        let (content, mut reader) = content(&bytes);
        let mut reference =
            quantized_llama::ModelWeights::from_gguf(content, &mut reader, &Device::Cpu).unwrap();
        compare_greedy(&model, &mut reference, prompt, 12, TINY_TOLERANCE);
    }
}

#[test]
fn a_reused_prefix_gives_the_same_logits_bit_for_bit_as_a_cold_run() {
    let model = load_tiny(&tiny_gguf(QWEN3, 5));
    let first: Vec<u32> = (0..40).map(|i| (i * 7 % 256) as u32).collect();
    // The same first 25 tokens, then others.
    let mut second = first[..25].to_vec();
    second.extend((0..30).map(|i| (i * 11 % 256) as u32));

    let mut cold = model.state();
    let cold_logits = model.forward(&mut cold, &second).unwrap();

    let mut warm = model.state();
    model.forward(&mut warm, &first).unwrap();
    // A generated token after the prompt, as a reply leaves it.
    model.forward(&mut warm, &[9]).unwrap();
    assert_eq!(warm.tokens().len(), 41);
    let reused = warm.reuse(&second);
    assert_eq!(reused, 25, "up to the first differing token");
    assert_eq!(warm.tokens(), &second[..25]);
    let warm_logits = model.forward(&mut warm, &second[reused..]).unwrap();
    assert_eq!(cold_logits, warm_logits);

    // And token by token on both sides afterwards.
    let mut logits = cold_logits;
    for _ in 0..5 {
        let next = argmax(&logits);
        logits = model.forward(&mut cold, &[next]).unwrap();
        assert_eq!(logits, model.forward(&mut warm, &[next]).unwrap());
    }

    // The whole prompt cached: its last token is read again for logits.
    let mut again = model.state();
    model.forward(&mut again, &second).unwrap();
    assert_eq!(again.reuse(&second), second.len() - 1);
    assert_eq!(
        model
            .forward(&mut again, &second[second.len() - 1..])
            .unwrap(),
        model.forward(&mut model.state(), &second).unwrap()
    );
}

#[test]
fn a_prompt_longer_than_a_prefill_chunk_reads_the_same_as_token_by_token() {
    let model = load_tiny(&tiny_gguf(QWEN2, 6));
    let prompt: Vec<u32> = (0..PREFILL_CHUNK + 9)
        .map(|i| (i * 13 % 256) as u32)
        .collect();
    let mut whole = model.state();
    let at_once = model.forward(&mut whole, &prompt).unwrap();
    let mut single = model.state();
    let mut one_by_one = Vec::new();
    for &t in &prompt {
        one_by_one = model.forward(&mut single, &[t]).unwrap();
    }
    assert_eq!(at_once, one_by_one);
    assert_eq!(whole.tokens(), &prompt[..]);
}

#[test]
fn more_tokens_than_the_context_are_an_error_not_a_panic() {
    let model = load_tiny(&tiny_gguf(QWEN2, 7));
    let mut state = model.state();
    let error = model.forward(&mut state, &vec![1; 1025]).unwrap_err();
    assert!(error.to_string().contains("context of 1024"), "{error}");
    let error = model.forward(&mut state, &[999]).unwrap_err();
    assert!(
        error.to_string().contains("outside the vocabulary"),
        "{error}"
    );
    assert!(state.tokens().is_empty());
}

#[test]
fn an_unsupported_architecture_is_refused_with_the_supported_ones() {
    let mut bytes = tiny_gguf(QWEN2, 8);
    // Same file, another architecture name of the same length.
    let at = bytes
        .windows(5)
        .position(|w| w == b"qwen2")
        .expect("the name is in the file");
    bytes[at..at + 5].copy_from_slice(b"gpt-j");
    let (content, mut reader) = content(&bytes);
    let error = Model::load(&content, &mut reader, false, THREADS).unwrap_err();
    assert_eq!(
        error,
        "its architecture (general.architecture) is \"gpt-j\"; the embedded model runs llama, qwen2, qwen3"
    );
}

#[test]
fn the_provider_refuses_an_unsupported_architecture_naming_the_file_and_the_supported_ones() {
    let mut bytes = tiny_gguf(QWEN2, 8);
    let at = bytes.windows(5).position(|w| w == b"qwen2").unwrap();
    bytes[at..at + 5].copy_from_slice(b"gemma");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gemma.gguf");
    std::fs::write(&path, &bytes).unwrap();
    let error = crate::LocalProvider::open(&path).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "cannot load the local model from {}: its architecture (general.architecture) is \"gemma\"; the embedded model runs llama, qwen2, qwen3. Run `scripts/fetch-model` in the foveal repository to fetch a good copy",
            path.display()
        )
    );
}

#[test]
fn q4_1_matrices_are_converted_to_q8_0_without_a_second_file() {
    // A llama whose matrices are Q4_1, as SmolLM2's file has them.
    let bytes = tiny_gguf(
        Tiny {
            architecture: "llama",
            ..QWEN2
        },
        9,
    );
    let (content, mut reader) = content(&bytes);
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    for name in content.tensor_infos.keys() {
        let t = content.tensor(&mut reader, name, &Device::Cpu).unwrap();
        let t = if name.starts_with("blk.") && t.shape().rank() == 2 {
            QTensor::quantize(&t.dequantize(&Device::Cpu).unwrap(), GgmlDType::Q4_1).unwrap()
        } else {
            t
        };
        tensors.push((name.clone(), t));
    }
    let metadata: Vec<(&str, &Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = Cursor::new(Vec::new());
    gguf_file::write(&mut file, &metadata, &refs).unwrap();
    let q4_1 = file.into_inner();

    let (content, mut reader) = self::content(&q4_1);
    let converted = Model::load(&content, &mut reader, true, THREADS).unwrap();
    assert!(
        converted.weights().contains("14 converted from Q4_1"),
        "{}",
        converted.weights()
    );
    let as_file = load_tiny(&q4_1);
    assert!(as_file.weights().contains("Q4_1"), "{}", as_file.weights());
    // Converting is nearly lossless.
    let prompt = [3, 1, 4, 1, 5, 9, 2, 6];
    let a = converted.forward(&mut converted.state(), &prompt).unwrap();
    let b = as_file.forward(&mut as_file.state(), &prompt).unwrap();
    assert!(max_diff(&a, &b) < 0.05, "{}", max_diff(&a, &b));
}

// --- SmolLM2, the model file ---------------------------------------------

/// The model file and its tokenizer; `None` (after saying why) when the
/// file is absent.
fn smollm2_file(test: &str) -> Option<(std::fs::File, Content, LocalTokenizer)> {
    let Ok(path) = crate::local::model_path(&ProviderSettings::default()) else {
        crate::local::tests::skip(test);
        return None;
    };
    let mut file = std::fs::File::open(&path).unwrap();
    let content = Content::read(&mut file).unwrap();
    let tokenizer = LocalTokenizer::from_gguf(&content).unwrap();
    Some((file, content, tokenizer))
}

const SMOLLM2_PROMPTS: &[&str] = &[
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nSay hello.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are foveal.<|im_end|>\n<|im_start|>user\nList three fruits, one per line.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
    "Once upon a time, in a lighthouse by the sea,",
];

/// SmolLM2 with every matrix stored as F16, which both candle and this
/// forward pass multiply as f32: the activations are not quantised, so
/// the two passes differ only by float rounding (orders of summation),
/// and greedy decoding must agree token for token (24 tokens a prompt: a
/// debug build's step takes ≈ 150 ms for the two models together).
///
/// With the file's Q4_1 weights they may not, and neither does candle
/// with itself: each product quantises its input to 8 bits, so a last-bit
/// difference in an activation can round one of its 8-bit values the
/// other way, and after 30 layers the logits differ by tenths. candle's
/// own `quantized_llama` gives logits 0.4 apart for the same 33 tokens
/// read at once or one at a time; the next test bounds that.
#[test]
fn smollm2_greedy_output_matches_candles_quantized_llama_token_for_token() {
    let Some((mut file, content, tokenizer)) =
        smollm2_file("smollm2_greedy_output_matches_candles_quantized_llama_token_for_token")
    else {
        return;
    };
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    for (name, info) in &content.tensor_infos {
        let t = content.tensor(&mut file, name, &Device::Cpu).unwrap();
        let t = if info.shape.rank() == 2 {
            QTensor::quantize(&t.dequantize(&Device::Cpu).unwrap(), GgmlDType::F16).unwrap()
        } else {
            t
        };
        tensors.push((name.clone(), t));
    }
    let metadata: Vec<(&str, &Value)> = content
        .metadata
        .iter()
        .filter(|(k, _)| !k.starts_with("tokenizer."))
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut f16 = tempfile::tempfile().unwrap();
    gguf_file::write(&mut f16, &metadata, &refs).unwrap();
    drop(refs);
    drop(tensors);
    f16.rewind().unwrap();
    let content = Content::read(&mut f16).unwrap();
    let model = Model::load(&content, &mut f16, false, THREADS).unwrap();
    assert_eq!(model.config().context, 8192);
    let mut reference =
        quantized_llama::ModelWeights::from_gguf(content, &mut f16, &Device::Cpu).unwrap();

    for text in SMOLLM2_PROMPTS {
        let prompt = tokenizer.encode_chat(text).unwrap();
        reference.clear_kv_cache();
        let (tokens, worst) =
            compare_greedy(&model, &mut reference, &prompt, 24, SMOLLM2_TOLERANCE);
        eprintln!(
            "{text:?} → {:?} (logits within {worst:e})",
            tokenizer.decode(&tokens)
        );
    }
}

#[test]
fn smollm2_with_its_q4_1_weights_agrees_with_candle_to_a_tenths_of_a_logit() {
    let Some((mut file, content, tokenizer)) =
        smollm2_file("smollm2_with_its_q4_1_weights_agrees_with_candle_to_a_tenths_of_a_logit")
    else {
        return;
    };
    let model = Model::load(&content, &mut file, false, THREADS).unwrap();
    let mut reference =
        quantized_llama::ModelWeights::from_gguf(content, &mut file, &Device::Cpu).unwrap();
    for text in SMOLLM2_PROMPTS {
        let prompt = tokenizer.encode_chat(text).unwrap();
        reference.clear_kv_cache();
        // The prompt's logits and the first token.
        let (_, worst) = compare_greedy(&model, &mut reference, &prompt, 1, 1.5);
        eprintln!("{text:?}: logits within {worst}");
    }
}

/// The largest difference of two logit vectors, relative to the largest
/// logit's magnitude.
fn relative_diff(a: &[f32], b: &[f32]) -> f32 {
    let scale = b.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-6);
    max_diff(a, b) / scale
}

#[test]
fn eight_bit_and_four_bit_weights_agree_with_candle_to_the_rounding_of_the_activations() {
    for (matrices, seed) in [
        (GgmlDType::Q8_0, 10),
        (GgmlDType::Q4_1, 11),
        (GgmlDType::Q4_0, 12),
    ] {
        let bytes = tiny_gguf(Tiny { matrices, ..QWEN2 }, seed);
        let model = load_tiny(&bytes);
        assert!(
            model
                .weights()
                .starts_with(&format!("16 {matrices:?} matrices")),
            "{matrices:?}: {}",
            model.weights()
        );
        for prompt in TINY_PROMPTS {
            let (content, mut reader) = content(&bytes);
            let mut reference =
                quantized_qwen2::ModelWeights::from_gguf(content, &mut reader, &Device::Cpu)
                    .unwrap();
            let ours = model.forward(&mut model.state(), prompt).unwrap();
            let theirs = Reference::forward(&mut reference, prompt, 0);
            let diff = relative_diff(&ours, &theirs);
            assert!(
                diff < 0.03,
                "{matrices:?} {prompt:?}: logits differ by {diff} of the largest"
            );
        }
    }
}

#[test]
fn matrices_in_formats_without_kernels_are_converted_to_q8_0_at_load() {
    let bytes = tiny_gguf(
        Tiny {
            matrices: GgmlDType::Q5_0,
            ..QWEN2
        },
        13,
    );
    let model = load_tiny(&bytes);
    assert!(
        model.weights().contains("; 16 converted from Q5_0 at load"),
        "{}",
        model.weights()
    );
    assert!(
        model.weights().starts_with("16 Q8_0 matrices"),
        "{}",
        model.weights()
    );
    let (content, mut reader) = content(&bytes);
    let mut reference =
        quantized_qwen2::ModelWeights::from_gguf(content, &mut reader, &Device::Cpu).unwrap();
    let prompt = TINY_PROMPTS[0];
    let ours = model.forward(&mut model.state(), prompt).unwrap();
    let theirs = Reference::forward(&mut reference, prompt, 0);
    let diff = relative_diff(&ours, &theirs);
    assert!(diff < 0.05, "logits differ by {diff} of the largest");
}

// --- a tiny Qwen2.5 file with its tokenizer and chat template -------------

/// Qwen's special tokens after the 256 byte tokens, with their GGUF token
/// types (3 control, 4 user-defined).
const QWEN_SPECIALS: [(&str, i32); 7] = [
    ("<|endoftext|>", 3),
    ("<|im_start|>", 3),
    ("<|im_end|>", 3),
    ("<tool_call>", 4),
    ("</tool_call>", 4),
    ("<tool_response>", 4),
    ("</tool_response>", 4),
];

/// A Qwen2 GGUF file of random F16 weights (a few hundred KB) whose
/// tokenizer has the 256 byte-level tokens and Qwen's special tokens (no
/// merges: a token per byte), `tokenizer.ggml.pre = "qwen2"`, and Qwen2.5's
/// real chat template.
fn tiny_qwen_file(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>) {
    let mut alphabet: Vec<(u8, char)> = crate::local::tokenizer::unicode_to_byte()
        .into_iter()
        .map(|(c, b)| (b, c))
        .collect();
    alphabet.sort();
    let mut tokens: Vec<Value> = alphabet
        .iter()
        .map(|(_, c)| Value::String(c.to_string()))
        .collect();
    let mut types = vec![Value::I32(1); tokens.len()];
    for (t, ty) in QWEN_SPECIALS {
        tokens.push(Value::String(t.to_owned()));
        types.push(Value::I32(ty));
    }
    let vocab = tokens.len();
    let extra = vec![
        (
            "tokenizer.ggml.model".to_owned(),
            Value::String("gpt2".into()),
        ),
        (
            "tokenizer.ggml.pre".to_owned(),
            Value::String("qwen2".into()),
        ),
        ("tokenizer.ggml.tokens".to_owned(), Value::Array(tokens)),
        ("tokenizer.ggml.token_type".to_owned(), Value::Array(types)),
        ("tokenizer.ggml.merges".to_owned(), Value::Array(Vec::new())),
        ("tokenizer.ggml.bos_token_id".to_owned(), Value::U32(256)),
        ("tokenizer.ggml.eos_token_id".to_owned(), Value::U32(258)),
        (
            "tokenizer.chat_template".to_owned(),
            Value::String(crate::local::template_tests::QWEN25_TEMPLATE.to_owned()),
        ),
    ];
    let tiny = Tiny {
        vocab,
        letters_only: true,
        ..QWEN2
    };
    let bytes = tiny_gguf_with(tiny, 21, extra);
    let path = dir.join("tiny-qwen2.5.gguf");
    std::fs::write(&path, &bytes).unwrap();
    (path, bytes)
}

/// candle's `quantized_qwen2` on `bytes`, greedy with the provider's
/// repeat penalty, from `prompt` until a stop token or `max` tokens.
fn candle_qwen2_reply(bytes: &[u8], prompt: &[u32], stop: &[u32], max: usize) -> Vec<u32> {
    let (content, mut reader) = content(bytes);
    let mut reference =
        quantized_qwen2::ModelWeights::from_gguf(content, &mut reader, &Device::Cpu).unwrap();
    let mut logits = Reference::forward(&mut reference, prompt, 0);
    let mut generated = Vec::new();
    while generated.len() < max {
        let mut scores = Tensor::from_vec(logits.clone(), logits.len(), &Device::Cpu).unwrap();
        if !generated.is_empty() {
            let recent = &generated[generated.len().saturating_sub(64)..];
            scores =
                candle_transformers::utils::apply_repeat_penalty(&scores, 1.1, recent).unwrap();
        }
        let next = argmax(&to_vec(&scores));
        if stop.contains(&next) {
            break;
        }
        generated.push(next);
        logits = Reference::forward(&mut reference, &[next], prompt.len() + generated.len() - 1);
    }
    generated
}

#[tokio::test]
async fn a_tiny_qwen_file_runs_with_its_own_template_and_tokenizer_and_replies_as_candle_does() {
    use crate::{ChatRequest, LocalProvider, Message, Provider};

    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = tiny_qwen_file(dir.path());
    assert!(bytes.len() < 1024 * 1024, "{} bytes", bytes.len());
    let provider = LocalProvider::open(&path).unwrap();
    assert_eq!(provider.summary().architecture, "qwen2");
    assert!(
        provider.describe().starts_with("embedded qwen2 model"),
        "{}",
        provider.describe()
    );

    // Qwen2.5's template: its default system message, ChatML turns.
    let first = ChatRequest {
        max_tokens: Some(12),
        ..ChatRequest::new(vec![Message::user("Hi, what is 2+2?")])
    };
    let text = provider.render(&first).unwrap();
    assert_eq!(
        text,
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi, what is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    );
    let ids = |request: &ChatRequest| {
        let rendered = provider.inner.template.render(request).unwrap();
        provider
            .inner
            .tokenizer
            .encode_pieces(&rendered.pieces)
            .unwrap()
    };
    let first_ids = ids(&first);
    // One token per byte of text, one per special token.
    assert_eq!(first_ids[0], 257, "<|im_start|>");
    let plain = text.replace("<|im_start|>", "").replace("<|im_end|>", "");
    assert_eq!(
        first_ids.len(),
        plain.len() + text.matches("<|im_").count(),
        "{first_ids:?}"
    );

    let stop = provider.inner.stop.clone();
    let reply = provider.stream(&first).collect().await.unwrap();
    let theirs = candle_qwen2_reply(&bytes, &first_ids, &stop, 12);
    assert_eq!(reply.text, provider.inner.tokenizer.decode(&theirs));
    let cache = provider.last_prompt_cache().unwrap();
    assert_eq!((cache.reused, cache.evaluated), (0, first_ids.len()));

    // The follow-up reads only what the cache does not hold, and replies
    // as candle does from scratch.
    let second = ChatRequest {
        max_tokens: Some(12),
        ..ChatRequest::new(vec![
            Message::user("Hi, what is 2+2?"),
            Message::assistant(reply.text.clone()),
            Message::user("And 3+3?"),
        ])
    };
    let held = provider.inner.state.lock().unwrap().tokens().to_vec();
    let second_ids = ids(&second);
    let shared = held
        .iter()
        .zip(&second_ids)
        .take_while(|(a, b)| a == b)
        .count();
    assert!(
        !reply.text.is_empty() && reply.text.is_ascii(),
        "{:?}",
        reply.text
    );
    assert_eq!(shared, held.len(), "the whole first prompt and reply");
    let warm = provider.stream(&second).collect().await.unwrap();
    let cache = provider.last_prompt_cache().unwrap();
    assert_eq!(cache.reused, shared);
    // `<|im_end|>\n<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n`
    assert_eq!(cache.evaluated, second_ids.len() - shared);
    assert_eq!(
        cache.evaluated,
        1 + 1 + 1 + "user\nAnd 3+3?".len() + 1 + 1 + 1 + "assistant\n".len()
    );
    let theirs = candle_qwen2_reply(&bytes, &second_ids, &stop, 12);
    assert_eq!(warm.text, provider.inner.tokenizer.decode(&theirs));
    provider.clear_cache();
    let cold = provider.stream(&second).collect().await.unwrap();
    assert_eq!(cold.text, warm.text);
}
