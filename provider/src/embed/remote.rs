//! An OpenAI-compatible embeddings endpoint: `POST {base_url}/embeddings`
//! with `{"model": …, "input": [texts]}`, read back as `data[i].embedding`
//! in `data[i].index` order.
//!
//! Only public text ever reaches it: the planner (the host's `embed::plan`)
//! leaves private objects out and passes every other text through the
//! last-door check first. The API key goes in the `Authorization: Bearer`
//! header, marked sensitive, and never into an error. A connection error,
//! HTTP 429 and HTTP 5xx are retried twice with backoff.

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};

use crate::embed::{EmbedError, EmbedSettings, Embedder};

/// The most bytes of a reply read.
const MAX_REPLY: usize = 64 << 20;
/// Retries of a request that failed before a reply.
const RETRIES: u32 = 2;

/// A client of one embeddings endpoint, with its own small runtime: it is
/// called from the embedding thread, never from async code.
pub struct RemoteEmbedder {
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
    endpoint: String,
    /// The endpoint as errors and logs show it (no user or password).
    shown: String,
    model: String,
    model_id: String,
    auth: Option<HeaderValue>,
    timeout: Duration,
    dim: std::sync::OnceLock<usize>,
}

impl std::fmt::Debug for RemoteEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteEmbedder")
            .field("endpoint", &self.shown)
            .field("model", &self.model)
            .field("api_key", &self.auth.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}

/// The model id for `settings`: the endpoint (without credentials: the id
/// is written into the cache file) and the model.
pub fn model_id(settings: &EmbedSettings) -> String {
    format!(
        "openai:{}#{}",
        crate::embed::settings::safe_url(&settings.base_url),
        settings.model
    )
}

impl RemoteEmbedder {
    /// A client for `settings` (nothing is sent yet).
    pub fn new(settings: &EmbedSettings) -> Result<Self, EmbedError> {
        let endpoint = format!("{}/embeddings", settings.base_url.trim_end_matches('/'));
        let shown = crate::embed::settings::safe_url(&endpoint);
        let remote = |message: String| EmbedError::Remote {
            url: shown.clone(),
            message,
        };
        let auth = match &settings.api_key {
            Some(key) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose_secret()))
                    .map_err(|_| {
                    remote(format!(
                        "the API key in {} is not a valid header value",
                        settings.api_key_env
                    ))
                })?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let url = reqwest::Url::parse(&endpoint).map_err(|e| remote(e.to_string()))?;
        let mut builder = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .user_agent(concat!("foveal/", env!("CARGO_PKG_VERSION")));
        if matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "[::1]")) {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| remote(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| remote(format!("cannot start its runtime: {e}")))?;
        Ok(Self {
            client,
            runtime,
            model: settings.model.clone(),
            model_id: model_id(settings),
            shown,
            endpoint,
            auth,
            timeout: settings.request_timeout,
            dim: std::sync::OnceLock::new(),
        })
    }

    async fn post(&self, body: Vec<u8>) -> Result<Vec<u8>, (bool, String)> {
        let mut request = self
            .client
            .post(&self.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .timeout(self.timeout)
            .body(body);
        if let Some(auth) = &self.auth {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        let response = request
            .send()
            .await
            .map_err(|e| (e.is_connect(), "cannot connect".to_owned()))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|_| (false, "the reply was cut off".to_owned()))?;
        if !status.is_success() {
            let retry = status.as_u16() == 429 || status.is_server_error();
            let excerpt: String = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into();
            return Err((retry, format!("HTTP {status}: {excerpt}")));
        }
        if bytes.len() > MAX_REPLY {
            return Err((false, format!("the reply is over {MAX_REPLY} bytes")));
        }
        Ok(bytes.to_vec())
    }
}

#[derive(serde::Deserialize)]
struct Reply {
    data: Vec<Item>,
}

#[derive(serde::Deserialize)]
struct Item {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

impl Embedder for RemoteEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn is_remote(&self) -> bool {
        true
    }

    fn dim(&self) -> Option<usize> {
        self.dim.get().copied()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let error = |message: String| EmbedError::Remote {
            url: self.shown.clone(),
            message,
        };
        // The one place the request body is built.
        let body = serde_json::to_vec(&serde_json::json!({
            "model": self.model,
            "input": texts,
        }))
        .map_err(|e| error(e.to_string()))?;
        let policy = crate::RetryPolicy::default();
        let mut attempt = 0;
        let bytes = loop {
            match self.runtime.block_on(self.post(body.clone())) {
                Ok(bytes) => break bytes,
                Err((true, _)) if attempt < RETRIES => {
                    attempt += 1;
                    std::thread::sleep(policy.backoff(attempt));
                }
                Err((_, message)) => return Err(error(message)),
            }
        };
        let mut reply: Reply = serde_json::from_slice(&bytes)
            .map_err(|e| error(format!("not an embeddings reply: {e}")))?;
        if reply.data.len() != texts.len() {
            return Err(error(format!(
                "{} vectors for {} inputs",
                reply.data.len(),
                texts.len()
            )));
        }
        reply
            .data
            .sort_by_key(|item| item.index.unwrap_or(usize::MAX));
        let dim = reply.data[0].embedding.len();
        if dim == 0 || reply.data.iter().any(|d| d.embedding.len() != dim) {
            return Err(error("vectors of different lengths".to_owned()));
        }
        if *self.dim.get_or_init(|| dim) != dim {
            return Err(error(format!(
                "{dim}-dimensional vectors where earlier ones had {}",
                self.dim().unwrap_or(0)
            )));
        }
        Ok(reply.data.into_iter().map(|d| d.embedding).collect())
    }

    fn describe(&self) -> String {
        format!("openai-compatible {} ({})", self.shown, self.model)
    }
}
