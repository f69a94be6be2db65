//! Model providers: what the think step calls to get a reply.
//!
//! A [`Provider`] turns a [`ChatRequest`] — the model, the conversation
//! ([`Message`]s of the roles system, user, assistant and tool), the
//! [`ToolDefinition`]s offered and the [`ToolChoice`] — into a
//! [`ReplyStream`] of [`Event`]s: text as it is written, tool calls as they
//! start and their arguments piece by piece, the finish reason and the
//! token [`Usage`]. The same stream collects the whole [`Reply`]: its text,
//! its complete [`ToolCall`]s with their arguments parsed as JSON, and the
//! usage, prompt-cache hits included.
//!
//! Sending is two steps, so that the body can pass the last door first
//! (design principle 6, the host's `egress`): [`Provider::body`] builds the
//! request body — the one place it is built — and [`Provider::send`] sends
//! a body. [`Provider::stream`] does both when there is nothing to check.
//!
//! Providers do I/O, so they live in the host, not in skills:
//!
//! - [`OpenAiProvider`] talks to any OpenAI-compatible chat-completions
//!   server over HTTP with streaming, retries and timeouts (see
//!   [`openai`] and `docs/providers.md`).
//! - [`LocalProvider`] runs SmolLM2-135M-Instruct in the process, offline
//!   (see [`local`]; `scripts/fetch-model` downloads the model file).
//! - [`from_settings`] builds whichever of the two the settings choose.
//! - [`ProviderSettings`] is the `[provider]` section of the
//!   configuration, with the environment and `--provider`: which provider,
//!   its address, model, key and limits.
//!
//! Errors are [`ProviderError`]s, each saying what to do next; none ever
//! shows the API key.
//!
//! ## What it may not do
//!
//! It never decides what may be sent: the host's last door
//! (`foveal-gate`) checks the body between [`Provider::body`] and
//! [`Provider::send`], and an embedder is given only texts the host has
//! already checked. It knows nothing of the memex, skills or prompts, and
//! depends only on `foveal-settings` and `foveal-kernels` of foveal's
//! crates. It is the only crate that compiles candle and tokenizers.
//!
//! # Example
//!
//! ```no_run
//! use foveal_provider::{
//!     ChatRequest, Event, Message, OpenAiProvider, Provider, ProviderSettings, ToolDefinition,
//! };
//!
//! # async fn run() -> Result<(), foveal_provider::ProviderError> {
//! let mut settings = ProviderSettings::openai_compatible("http://127.0.0.1:8080/v1");
//! settings.model = Some("smollm2".to_owned());
//! let provider = OpenAiProvider::new(&settings)?;
//!
//! let mut request = ChatRequest::new(vec![
//!     Message::system("You are foveal."),
//!     Message::user("What is due today?"),
//! ]);
//! request.tools.push(ToolDefinition {
//!     name: "query_memex".to_owned(),
//!     description: "Finds headlines by tag and TODO state.".to_owned(),
//!     parameters: serde_json::json!({
//!         "type": "object",
//!         "properties": { "todo": { "type": "string" } },
//!     }),
//! });
//!
//! let body = provider.body(&request)?; // the last door checks this text
//! let mut reply = provider.send(body);
//! while let Some(event) = reply.next().await {
//!     if let Event::Text(text) = event? {
//!         print!("{text}");
//!     }
//! }
//! let reply = reply.collect().await?;
//! for call in &reply.tool_calls {
//!     println!("{} {:?}", call.name, call.arguments);
//! }
//! # Ok(())
//! # }
//! ```

mod chunk;
pub mod embed;
mod error;
pub mod local;
pub mod openai;
mod request;
/// Parses a request body back into a [`ChatRequest`] (`foveal bench model`
/// replays recorded bodies).
pub use request::parse as parse_body;
pub mod settings;
mod sse;
mod stream;
mod types;

#[cfg(test)]
mod tests;

use std::fmt;

pub use error::{ProviderError, TimeoutPhase};
pub use local::{LoadOptions, LocalProvider, PromptCache, Requantize};
pub use openai::OpenAiProvider;
pub use settings::{ApiKey, KindSource, ProviderKind, ProviderSettings, RetryPolicy, Timeouts};
pub use stream::{Closed, ReplySender, ReplyStream};
pub use types::{
    AssistantToolCall, ChatRequest, Event, FinishReason, InvalidArguments, Message, Reply, Role,
    ToolCall, ToolChoice, ToolDefinition, Usage,
};

/// The provider `settings.kind` chooses: the embedded model
/// ([`LocalProvider::new`], which loads it) or the OpenAI-compatible
/// server ([`OpenAiProvider::new`]).
pub fn from_settings(settings: &ProviderSettings) -> Result<Box<dyn Provider>, ProviderError> {
    Ok(match settings.kind {
        ProviderKind::Local => Box::new(LocalProvider::new(settings)?),
        ProviderKind::OpenAi => Box::new(OpenAiProvider::new(settings)?),
    })
}

/// A model that answers chat requests.
///
/// Object-safe, so the host can hold whichever provider the configuration
/// chose as `Box<dyn Provider>`. [`send`](Self::send) must be called
/// inside a tokio runtime; outside one, the stream fails with
/// [`ProviderError::NoRuntime`].
pub trait Provider: Send + Sync + fmt::Debug {
    /// Which provider this is, for logs and `foveal status`.
    fn describe(&self) -> String;

    /// More about the provider for `foveal check`, a line each (the local
    /// model's architecture, size, quantization, context and chat
    /// template); none by default.
    fn details(&self) -> Vec<String> {
        Vec::new()
    }

    /// The request body for `request`: the only place it is built.
    fn body(&self, request: &ChatRequest) -> Result<RequestBody, ProviderError>;

    /// Sends a body (as [`body`](Self::body) built it, after the last
    /// door) and streams the reply.
    fn send(&self, body: RequestBody) -> ReplyStream;

    /// [`body`](Self::body) then [`send`](Self::send).
    fn stream(&self, request: &ChatRequest) -> ReplyStream {
        match self.body(request) {
            Ok(body) => self.send(body),
            Err(error) => ReplyStream::failed(error),
        }
    }
}

/// A request body: the JSON text of a chat-completions request.
///
/// Its `Debug` shows only its length: the text may quote the memex.
#[derive(Clone, PartialEq, Eq)]
pub struct RequestBody(String);

impl RequestBody {
    /// A body from its text — for one that passed the last door, which
    /// keeps the JSON valid.
    pub fn new(json: String) -> Self {
        Self(json)
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The JSON text, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Debug for RequestBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequestBody({} bytes)", self.0.len())
    }
}

/// The chat-completions request body for `request` (`model` when the
/// request names none): what [`OpenAiProvider::body`] builds, for
/// providers that speak the same JSON.
pub fn request_body(
    request: &ChatRequest,
    model: Option<&str>,
) -> Result<RequestBody, ProviderError> {
    request::build(request, model)
}
