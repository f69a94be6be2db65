//! The OpenAI-compatible chat-completions provider.
//!
//! One request is one `POST {base_url}/chat/completions` with
//! `stream: true` and `stream_options.include_usage`; the reply is read as
//! server-sent events ([`super::sse`]) of `chat.completion.chunk` objects
//! ([`super::chunk`]) until `data: [DONE]`.
//!
//! - **Retries.** A connection error, HTTP 429 and HTTP 5xx are retried up
//!   to `max_retries` times, waiting what `Retry-After` (or OpenAI's
//!   `retry-after-ms`) says, else an exponential backoff with jitter. A 429
//!   for an exhausted quota (`insufficient_quota`) is not retried: waiting
//!   does not help. Nothing is retried once an event of the reply has been
//!   handed on: the reader would see the reply twice.
//! - **Timeouts.** Connecting, then the first piece of the reply (the
//!   server reads the prompt first), then each gap between two pieces.
//!   Timeouts after the connection is made are not retried.
//! - **A cut stream** — the connection breaks, or closes without `[DONE]`
//!   and without a finish reason — is an error saying where the reply
//!   stopped (in which tool call), never a silently short reply.
//! - **Quirks.** An assistant message that only called tools is sent with
//!   `content: ""`, not `null` (llama-cpp-python's server rejects `null`).
//!   A server that ignores `stream: true` and answers with one JSON
//!   completion is read as well. A loopback server is reached directly,
//!   never through `HTTP_PROXY`.
//!
//! The API key goes in the `Authorization: Bearer` header, marked
//! sensitive; it is scrubbed from every error and log line.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::Value;
use tokio::time::Instant;

use super::chunk::{ChunkDecoder, ChunkError, error_message};
use super::error::{ProviderError, TimeoutPhase, safe_url};
use super::settings::{ApiKey, ProviderSettings, RetryPolicy, Timeouts, check_base_url};
use super::sse::{MAX_LINE_BYTES, SseDecoder, SseError};
use super::stream::{ReplySender, ReplyStream};
use super::types::{ChatRequest, Event};
use super::{Provider, RequestBody};

/// The most bytes of an error reply read for its message.
const MAX_ERROR_BODY: usize = 64 << 10;
/// The most bytes of a whole (non-streamed) JSON reply.
const MAX_JSON_BODY: usize = 16 << 20;
/// How much of a bad chunk an error shows.
const EXCERPT_CHARS: usize = 200;

/// A client of one OpenAI-compatible server. Cheap to clone; clones share
/// the connection pool.
#[derive(Clone)]
pub struct OpenAiProvider {
    inner: Arc<Inner>,
}

struct Inner {
    client: reqwest::Client,
    endpoint: reqwest::Url,
    /// The endpoint as errors show it.
    shown: String,
    model: Option<String>,
    /// `Bearer <key>`, marked sensitive.
    auth: Option<HeaderValue>,
    /// The key, to scrub from error text.
    key: Option<ApiKey>,
    timeouts: Timeouts,
    retry: RetryPolicy,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("endpoint", &self.inner.shown)
            .field("model", &self.inner.model)
            .field("api_key", &self.inner.key)
            .field("timeouts", &self.inner.timeouts)
            .field("retry", &self.inner.retry)
            .finish()
    }
}

impl OpenAiProvider {
    /// A provider for the server and model `settings` name (whatever its
    /// `kind`).
    pub fn new(settings: &ProviderSettings) -> Result<Self, ProviderError> {
        let bad_url = |reason: String| ProviderError::BadBaseUrl {
            url: safe_url(&settings.base_url),
            reason,
        };
        let base = check_base_url(&settings.base_url).map_err(bad_url)?;
        let endpoint = reqwest::Url::parse(&format!("{base}/chat/completions"))
            .map_err(|e| bad_url(e.to_string()))?;
        let auth = match &settings.api_key {
            Some(key) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose_secret()))
                    .map_err(|_| ProviderError::BadApiKey {
                    env: settings.api_key_env.clone(),
                })?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let mut builder = reqwest::Client::builder()
            .connect_timeout(settings.timeouts.connect)
            .user_agent(concat!("foveal/", env!("CARGO_PKG_VERSION")));
        if is_loopback(&endpoint) {
            builder = builder.no_proxy();
        }
        let client = builder
            .build()
            .map_err(|e| ProviderError::Client(chain(&e)))?;
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                shown: safe_url(endpoint.as_str()),
                endpoint,
                model: settings.model.clone(),
                auth,
                key: settings.api_key.clone(),
                timeouts: settings.timeouts,
                retry: settings.retry,
            }),
        })
    }

    /// The URL requests go to, as errors show it.
    pub fn endpoint(&self) -> &str {
        &self.inner.shown
    }
}

impl Provider for OpenAiProvider {
    fn describe(&self) -> String {
        format!("OpenAI-compatible server at {}", self.inner.shown)
    }

    fn body(&self, request: &ChatRequest) -> Result<RequestBody, ProviderError> {
        super::request::build(request, self.inner.model.as_deref())
    }

    fn send(&self, body: RequestBody) -> ReplyStream {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return ReplyStream::failed(ProviderError::NoRuntime);
        };
        let (tx, stream) = ReplyStream::channel();
        let inner = Arc::clone(&self.inner);
        stream.with_task(runtime.spawn(async move { inner.run(body, tx).await }))
    }
}

/// How one request ended.
enum Outcome {
    /// The reply is complete and handed on.
    Done,
    /// The reader dropped the stream.
    Closed,
    /// Worth another request (after `after`, when the server said).
    Retry {
        error: ProviderError,
        after: Option<Duration>,
    },
    /// Final.
    Fail(ProviderError),
}

impl Inner {
    async fn run(&self, body: RequestBody, tx: ReplySender) {
        let mut attempt = 0;
        let result = loop {
            attempt += 1;
            if tx.attempt(attempt).await.is_err() {
                return;
            }
            let (error, after) = match self.attempt(&body, attempt, &tx).await {
                Outcome::Done => break Ok(()),
                Outcome::Closed => return,
                Outcome::Fail(error) => break Err(error),
                Outcome::Retry { error, after } => (error, after),
            };
            if attempt > self.retry.max_retries {
                break Err(error);
            }
            let wait = match after {
                Some(after) if after > self.retry.max_retry_after => {
                    break Err(match error {
                        ProviderError::Http {
                            url,
                            status,
                            message,
                            ..
                        } => ProviderError::RetryTooLate {
                            url,
                            status,
                            retry_after: after,
                            limit: self.retry.max_retry_after,
                            message,
                        },
                        other => other,
                    });
                }
                Some(after) => after,
                None => self.retry.backoff(attempt),
            };
            tracing::warn!(
                target: "foveal::provider",
                attempt,
                wait_ms = wait.as_millis() as u64,
                "model request failed, retrying: {}",
                self.scrub(error)
            );
            tokio::time::sleep(wait).await;
        };
        match result {
            Ok(()) => tx.finish().await,
            Err(error) => {
                let error = self.scrub(error);
                tracing::warn!(target: "foveal::provider", attempts = attempt, "model request failed: {error}");
                tx.fail(error).await;
            }
        }
    }

    fn scrub(&self, error: ProviderError) -> ProviderError {
        match &self.key {
            Some(key) => error.scrub(key.expose_secret()),
            None => error,
        }
    }

    /// One request: sends it and hands on the reply's events.
    async fn attempt(&self, body: &RequestBody, attempt: u32, tx: &ReplySender) -> Outcome {
        let first_byte_deadline = Instant::now() + self.timeouts.first_byte;
        let request_deadline = Instant::now() + self.timeouts.request;
        let first_byte_deadline = first_byte_deadline.min(request_deadline);
        let mut request = self
            .client
            .post(self.endpoint.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body.as_str().to_owned());
        if let Some(auth) = &self.auth {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        tracing::debug!(
            target: "foveal::provider",
            url = %self.shown,
            attempt,
            body_bytes = body.as_str().len(),
            "sending a chat-completions request"
        );
        let mut response = match tokio::time::timeout_at(first_byte_deadline, request.send()).await
        {
            Err(_) => return Outcome::Fail(self.timeout(TimeoutPhase::FirstByte, attempt)),
            Ok(Err(error)) => return self.send_error(error, attempt),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            return self.error_status(response, attempt).await;
        }
        let whole_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("application/json"));

        let mut reader = ReplyReader::default();
        let mut first = true;
        // Only a piece that carries something (an event) moves the idle
        // deadline: a server that trickles keep-alive comments gets no
        // more time. And the whole request has a deadline of its own.
        let mut idle_deadline = first_byte_deadline;
        loop {
            let (deadline, phase) = if first {
                (first_byte_deadline, TimeoutPhase::FirstByte)
            } else if idle_deadline < request_deadline {
                (idle_deadline, TimeoutPhase::Idle)
            } else {
                (request_deadline, TimeoutPhase::Request)
            };
            let piece = tokio::time::timeout_at(deadline, response.chunk()).await;
            let piece = match piece {
                Err(_) => {
                    return Outcome::Fail(self.timeout(phase, attempt));
                }
                Ok(Err(error)) if reader.delivered || (!first && whole_json) => {
                    // Part of the reply arrived (for a whole JSON body,
                    // its first bytes): the body was cut, not unreachable.
                    return Outcome::Fail(ProviderError::Cut {
                        url: self.shown.clone(),
                        position: reader.chunks.position(),
                        cause: chain(&error.without_url()),
                    });
                }
                Ok(Err(error)) => {
                    // Nothing of the reply was handed on: as good as a
                    // connection error.
                    return Outcome::Retry {
                        error: self.unreachable(error, attempt),
                        after: None,
                    };
                }
                Ok(Ok(None)) => break,
                Ok(Ok(Some(piece))) => piece,
            };
            if first {
                idle_deadline = Instant::now() + self.timeouts.idle;
            }
            first = false;
            if whole_json {
                idle_deadline = Instant::now() + self.timeouts.idle;
                if reader.json.len() + piece.len() > MAX_JSON_BODY {
                    return Outcome::Fail(
                        self.chunk_error(ReadError::TooLarge("a JSON reply", MAX_JSON_BODY)),
                    );
                }
                reader.json.extend_from_slice(&piece);
                continue;
            }
            let mut events = Vec::new();
            if let Err(error) = reader.push(&piece, &mut events) {
                return Outcome::Fail(self.chunk_error(error));
            }
            if !events.is_empty() {
                idle_deadline = Instant::now() + self.timeouts.idle;
            }
            if send_all(tx, events, &mut reader.delivered).await.is_err() {
                return Outcome::Closed;
            }
            if reader.done {
                break;
            }
        }

        if !whole_json && !reader.done && reader.sse.in_line() {
            return Outcome::Fail(ProviderError::Cut {
                url: self.shown.clone(),
                position: reader.chunks.position(),
                cause: "the connection closed in the middle of an event line".to_owned(),
            });
        }
        let mut events = Vec::new();
        let finished = if whole_json {
            let text = String::from_utf8_lossy(&reader.json).into_owned();
            match reader.chunks.decode(&text, &mut events) {
                Ok(()) => Ok(()),
                Err(error) => Err(ReadError::Chunk(error, text)),
            }
        } else {
            reader.finish(&mut events)
        };
        if let Err(error) = finished {
            return Outcome::Fail(self.chunk_error(error));
        }
        if !whole_json && !reader.done && reader.chunks.finish_reason().is_none() {
            return Outcome::Fail(ProviderError::Cut {
                url: self.shown.clone(),
                position: reader.chunks.position(),
                cause: "the connection closed without `data: [DONE]` or a finish reason".to_owned(),
            });
        }
        reader.chunks.start_pending(&mut events);
        if send_all(tx, events, &mut reader.delivered).await.is_err() {
            return Outcome::Closed;
        }
        Outcome::Done
    }

    /// An HTTP error status: its message, and whether to retry.
    async fn error_status(&self, mut response: reqwest::Response, attempt: u32) -> Outcome {
        let status = response.status();
        let after = retry_after(response.headers());
        let mut text = Vec::new();
        while text.len() < MAX_ERROR_BODY {
            match tokio::time::timeout(self.timeouts.idle, response.chunk()).await {
                Ok(Ok(Some(piece))) => text.extend_from_slice(&piece),
                _ => break,
            }
        }
        let text = String::from_utf8_lossy(&text);
        let message = match serde_json::from_str::<Value>(&text) {
            Ok(value) => error_message(&value),
            Err(_) if text.trim().is_empty() => {
                status.canonical_reason().unwrap_or("no message").to_owned()
            }
            Err(_) => excerpt(text.trim()),
        };
        let retry = (status.as_u16() == 429 && !text.contains("insufficient_quota"))
            || status.is_server_error();
        let error = ProviderError::Http {
            url: self.shown.clone(),
            status: status.as_u16(),
            message,
            attempts: attempt,
        };
        if retry {
            Outcome::Retry { error, after }
        } else {
            Outcome::Fail(error)
        }
    }

    fn send_error(&self, error: reqwest::Error, attempt: u32) -> Outcome {
        let error = if error.is_connect() && error.is_timeout() {
            self.timeout(TimeoutPhase::Connect, attempt)
        } else {
            self.unreachable(error, attempt)
        };
        Outcome::Retry { error, after: None }
    }

    fn unreachable(&self, error: reqwest::Error, attempt: u32) -> ProviderError {
        ProviderError::Unreachable {
            url: self.shown.clone(),
            attempts: attempt,
            message: chain(&error.without_url()),
        }
    }

    fn timeout(&self, phase: TimeoutPhase, attempt: u32) -> ProviderError {
        ProviderError::Timeout {
            url: self.shown.clone(),
            phase,
            after: match phase {
                TimeoutPhase::Connect => self.timeouts.connect,
                TimeoutPhase::FirstByte => self.timeouts.first_byte,
                TimeoutPhase::Idle => self.timeouts.idle,
                TimeoutPhase::Request => self.timeouts.request,
            },
            attempts: attempt,
        }
    }

    fn chunk_error(&self, error: ReadError) -> ProviderError {
        match error {
            ReadError::Sse(message) => self.bad_chunk(message, ""),
            ReadError::TooLarge(what, limit) => ProviderError::TooLarge {
                url: self.shown.clone(),
                what,
                limit,
            },
            ReadError::Chunk(ChunkError::NotJson(message), data) => self.bad_chunk(message, &data),
            ReadError::Chunk(ChunkError::Server(message), _) => ProviderError::Server {
                url: self.shown.clone(),
                message,
            },
        }
    }

    fn bad_chunk(&self, message: String, data: &str) -> ProviderError {
        ProviderError::BadChunk {
            url: self.shown.clone(),
            message,
            excerpt: excerpt(data),
        }
    }
}

/// Why the body could not be read.
enum ReadError {
    /// Not an event stream.
    Sse(String),
    /// A piece larger than any reply asked for: what, and the cap.
    TooLarge(&'static str, usize),
    /// A bad chunk, with its data.
    Chunk(ChunkError, String),
}

/// The state of reading one streamed reply.
#[derive(Default)]
struct ReplyReader {
    sse: SseDecoder,
    chunks: ChunkDecoder,
    /// `data: [DONE]` was seen.
    done: bool,
    /// An event has been handed on: from here on, nothing is retried.
    delivered: bool,
    /// The body of a whole JSON reply.
    json: Vec<u8>,
    data: Vec<String>,
}

impl From<SseError> for ReadError {
    fn from(error: SseError) -> Self {
        match error {
            SseError::LineTooLong => Self::TooLarge("one event line", MAX_LINE_BYTES),
            SseError::NotUtf8 => Self::Sse(error.to_string()),
        }
    }
}

impl ReplyReader {
    fn push(&mut self, piece: &[u8], events: &mut Vec<Event>) -> Result<(), ReadError> {
        self.sse
            .push(piece, &mut self.data)
            .map_err(ReadError::from)?;
        self.decode(events)
    }

    fn finish(&mut self, events: &mut Vec<Event>) -> Result<(), ReadError> {
        if !self.done {
            self.sse.finish(&mut self.data).map_err(ReadError::from)?;
        }
        self.decode(events)
    }

    fn decode(&mut self, events: &mut Vec<Event>) -> Result<(), ReadError> {
        for data in std::mem::take(&mut self.data) {
            if self.done {
                break; // anything after [DONE] is not part of the reply
            }
            if data.trim() == "[DONE]" {
                self.done = true;
                continue;
            }
            self.chunks
                .decode(&data, events)
                .map_err(|e| ReadError::Chunk(e, data))?;
        }
        Ok(())
    }
}

async fn send_all(
    tx: &ReplySender,
    events: Vec<Event>,
    delivered: &mut bool,
) -> Result<(), super::stream::Closed> {
    for event in events {
        *delivered = true;
        tx.event(event).await?;
    }
    Ok(())
}

/// The server's wait before a retry: `retry-after-ms` (OpenAI's), else
/// `Retry-After` as seconds or as an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(
            ms.min(f64::from(u32::MAX)) / 1000.0,
        ));
    }
    let value = text("retry-after")?;
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0)
            .then(|| Duration::from_secs_f64(seconds.min(f64::from(u32::MAX))));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(
        date.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

fn is_loopback(url: &reqwest::Url) -> bool {
    url.host_str().is_some_and(|host| {
        host.eq_ignore_ascii_case("localhost")
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    })
}

/// An error and its causes, as one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_http_dates() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
        let later = std::time::SystemTime::now() + Duration::from_secs(30);
        headers.insert(
            "retry-after",
            HeaderValue::from_str(&httpdate::fmt_http_date(later)).unwrap(),
        );
        let wait = retry_after(&headers).unwrap();
        assert!(
            wait > Duration::from_secs(27) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"),
        );
        assert_eq!(retry_after(&headers), Some(Duration::ZERO));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
        headers.clear();
        headers.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn only_loopback_hosts_bypass_proxies() {
        let loopback = |u: &str| is_loopback(&reqwest::Url::parse(u).unwrap());
        assert!(loopback("http://127.0.0.1:8080/v1"));
        assert!(loopback("http://localhost:8080/v1"));
        assert!(loopback("http://[::1]:8080/v1"));
        assert!(!loopback("https://api.openai.com/v1"));
    }
}
