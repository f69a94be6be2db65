//! The `[provider]` section of `foveal.toml`, with its environment
//! variables and the `--provider` flag.
//!
//! Which provider: `--provider local|openai`, else `FOVEAL_PROVIDER`, else
//! `[provider] kind`; when none of them is set, the OpenAI-compatible
//! provider if `OPENAI_BASE_URL` is set, else the embedded local model.
//! The OpenAI-compatible provider's address is `OPENAI_BASE_URL`, else
//! `[provider] base_url`, else `https://api.openai.com/v1`; its model is
//! `OPENAI_MODEL`, else `[provider] model`. Its API key is read from the
//! environment variable that `api_key_env` names (default
//! `OPENAI_API_KEY`) — never from the file — and is kept in an [`ApiKey`],
//! which never prints.
//!
//! The local model's file is `FOVEAL_MODEL_PATH` (relative to the working
//! directory), else `[provider] model_path` (relative to the file's
//! folder), else looked for where `scripts/fetch-model` puts it
//! ([`crate::local`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use foveal_settings::{ConfigError, EnvLookup, line_column};

/// The address used when the OpenAI-compatible provider is chosen and no
/// base URL is given.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The variable the API key is read from unless `api_key_env` names
/// another.
pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

/// Which provider answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// The embedded offline model.
    #[default]
    Local,
    /// An OpenAI-compatible chat-completions server.
    OpenAi,
}

impl ProviderKind {
    /// Its name in the configuration, the environment and the flag.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::OpenAi => "openai",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProviderKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "local" => Ok(Self::Local),
            "openai" => Ok(Self::OpenAi),
            other => {
                let known = ["local", "openai"];
                let close = known
                    .iter()
                    .find(|k| strsim::damerau_levenshtein(other, k) <= 2);
                Err(match close {
                    Some(k) => format!("unknown provider {other:?}; did you mean `{k}`?"),
                    None => format!("unknown provider {other:?}; expected `local` or `openai`"),
                })
            }
        }
    }
}

/// What decided the provider kind, for `foveal check` and logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum KindSource {
    /// `--provider`.
    Flag,
    /// `FOVEAL_PROVIDER`.
    Env,
    /// `[provider] kind`.
    File,
    /// None of those; `OPENAI_BASE_URL` is set.
    OpenAiBaseUrl,
    /// None of those and no `OPENAI_BASE_URL`.
    #[default]
    Default,
}

/// How long the provider waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// To open the connection (`connect_timeout_ms`, default 10 s).
    pub connect: Duration,
    /// From sending the request to the first piece of the reply
    /// (`first_byte_timeout_ms`, default 120 s: a CPU server may read a
    /// long prompt for a while).
    pub first_byte: Duration,
    /// Between two pieces of a reply that carry something — text, a tool
    /// call, usage (`idle_timeout_ms`, default 60 s). Keep-alive comments
    /// and empty chunks are not progress.
    pub idle: Duration,
    /// For the whole of one request, from sending it to the end of the
    /// reply (`request_timeout_ms`, default 600 s): no reply, however it
    /// trickles, keeps a turn waiting longer.
    pub request: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(120),
            idle: Duration::from_secs(60),
            request: Duration::from_secs(600),
        }
    }
}

/// When and how long the provider waits before trying again.
///
/// Only failures before any of the reply has arrived are retried: a
/// connection error, HTTP 429 and HTTP 5xx. The wait is the server's
/// `Retry-After` when it sends one, else `base_delay · 2^(n−1)` (at most
/// `max_delay`) with random jitter over its upper half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first request (`max_retries`, default 2).
    pub max_retries: u32,
    /// The wait before the first retry without `Retry-After` (500 ms).
    pub base_delay: Duration,
    /// The longest wait without `Retry-After` (8 s).
    pub max_delay: Duration,
    /// The longest `Retry-After` honoured (60 s); a server asking for more
    /// gets an error instead of a stalled cycle.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 2,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1-based) without
    /// `Retry-After`.
    pub fn backoff(&self, retry: u32) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20))
            .min(self.max_delay);
        let half = exp / 2;
        half + half.mul_f64(fastrand::f64())
    }
}

/// An API key. It prints as `***` in `Debug` and has no `Display`: the
/// only way to its text is [`ApiKey::expose_secret`].
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself, to put in the `Authorization` header.
    pub fn expose_secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

/// The resolved provider settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSettings {
    /// Which provider answers.
    pub kind: ProviderKind,
    /// What chose it.
    pub kind_source: KindSource,
    /// The OpenAI-compatible server, up to and including `/v1` (no
    /// trailing slash); requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// The model to ask, when a request names none.
    pub model: Option<String>,
    /// The environment variable the API key was read from.
    pub api_key_env: String,
    /// The API key, when that variable is set and not empty.
    pub api_key: Option<ApiKey>,
    /// How long to wait.
    pub timeouts: Timeouts,
    /// When to try again.
    pub retry: RetryPolicy,
    /// The local model's GGUF file, when one is configured; `None` looks
    /// in the default places (see [`crate::local`]).
    pub model_path: Option<PathBuf>,
    /// Threads the local model computes with; `None` takes every CPU, see
    /// [`crate::LoadOptions`].
    pub model_threads: Option<usize>,
}

impl Default for ProviderSettings {
    fn default() -> Self {
        Self {
            kind: ProviderKind::Local,
            kind_source: KindSource::Default,
            base_url: DEFAULT_BASE_URL.to_owned(),
            model: None,
            api_key_env: DEFAULT_API_KEY_ENV.to_owned(),
            api_key: None,
            timeouts: Timeouts::default(),
            retry: RetryPolicy::default(),
            model_path: None,
            model_threads: None,
        }
    }
}

impl ProviderSettings {
    /// Settings for the OpenAI-compatible server at `base_url`, the rest
    /// default (no key, no model).
    pub fn openai_compatible(base_url: impl Into<String>) -> Self {
        Self {
            kind: ProviderKind::OpenAi,
            kind_source: KindSource::Flag,
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            ..Self::default()
        }
    }
}

/// `[provider]` as written in the file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileProvider {
    kind: Option<Spanned<String>>,
    base_url: Option<Spanned<String>>,
    model: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    connect_timeout_ms: Option<Spanned<u64>>,
    first_byte_timeout_ms: Option<Spanned<u64>>,
    idle_timeout_ms: Option<Spanned<u64>>,
    request_timeout_ms: Option<Spanned<u64>>,
    max_retries: Option<Spanned<u32>>,
    model_path: Option<Spanned<String>>,
    model_threads: Option<Spanned<u32>>,
}

/// The longest timeout accepted: a day.
const MAX_TIMEOUT_MS: u64 = 86_400_000;
/// The most retries accepted.
const MAX_RETRIES: u32 = 10;
/// The most threads accepted for the local model.
const MAX_MODEL_THREADS: u32 = 256;

/// Resolves `[provider]` (`file`, from the text `text` of the file `path`,
/// whose relative paths start at `base`) with the environment and the
/// `--provider` flag.
pub fn resolve(
    file: &FileProvider,
    text: &str,
    path: &Path,
    base: &Path,
    flag: Option<ProviderKind>,
    env: EnvLookup<'_>,
) -> Result<ProviderSettings, ConfigError> {
    let at = |span: std::ops::Range<usize>, key: &str, message: String| {
        let (line, column) = line_column(text, span.start);
        let key = format!("provider.{key}");
        ConfigError::Invalid {
            path: path.to_owned(),
            line,
            column,
            message: format!("`{key}`: {message}"),
            key: Some(key),
        }
    };
    let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let mut settings = ProviderSettings::default();

    let file_kind = match &file.kind {
        Some(kind) => Some(
            kind.get_ref()
                .parse::<ProviderKind>()
                .map_err(|m| at(kind.span(), "kind", m))?,
        ),
        None => None,
    };
    let env_kind = match set("FOVEAL_PROVIDER") {
        Some(value) => Some(
            value
                .parse::<ProviderKind>()
                .map_err(|message| ConfigError::Env {
                    name: "FOVEAL_PROVIDER",
                    value,
                    message,
                })?,
        ),
        None => None,
    };
    let env_base_url = set("OPENAI_BASE_URL");
    (settings.kind, settings.kind_source) = if let Some(kind) = flag {
        (kind, KindSource::Flag)
    } else if let Some(kind) = env_kind {
        (kind, KindSource::Env)
    } else if let Some(kind) = file_kind {
        (kind, KindSource::File)
    } else if env_base_url.is_some() {
        (ProviderKind::OpenAi, KindSource::OpenAiBaseUrl)
    } else {
        (ProviderKind::Local, KindSource::Default)
    };

    if let Some(url) = &file.base_url {
        settings.base_url =
            check_base_url(url.get_ref()).map_err(|m| at(url.span(), "base_url", m))?;
    }
    if let Some(value) = env_base_url {
        settings.base_url = check_base_url(&value).map_err(|message| ConfigError::Env {
            name: "OPENAI_BASE_URL",
            value: super::error::safe_url(&value),
            message,
        })?;
    }

    if let Some(model) = &file.model {
        let name = model.get_ref().trim();
        if name.is_empty() {
            return Err(at(model.span(), "model", "must not be empty".to_owned()));
        }
        settings.model = Some(name.to_owned());
    }
    if let Some(model) = set("OPENAI_MODEL") {
        settings.model = Some(model.trim().to_owned());
    }

    if let Some(name) = &file.api_key_env {
        // The value is not echoed: a key pasted here by mistake must not
        // reach a terminal or a log.
        if !is_env_name(name.get_ref()) {
            return Err(at(
                name.span(),
                "api_key_env",
                "must be the name of an environment variable (letters, digits and `_`), not the key itself; put the key in that variable".to_owned(),
            ));
        }
        settings.api_key_env = name.get_ref().clone();
    }
    settings.api_key = env(&settings.api_key_env)
        .map(|key| key.trim().to_owned())
        .filter(|key| !key.is_empty())
        .map(ApiKey);

    let timeout = |value: &Option<Spanned<u64>>, key: &str, default: Duration| match value {
        None => Ok(default),
        Some(v) if (1..=MAX_TIMEOUT_MS).contains(v.get_ref()) => {
            Ok(Duration::from_millis(*v.get_ref()))
        }
        Some(v) => Err(at(
            v.span(),
            key,
            format!(
                "{} is out of range; must be from 1 to {MAX_TIMEOUT_MS} (a day), in milliseconds",
                v.get_ref()
            ),
        )),
    };
    let defaults = Timeouts::default();
    settings.timeouts = Timeouts {
        connect: timeout(
            &file.connect_timeout_ms,
            "connect_timeout_ms",
            defaults.connect,
        )?,
        first_byte: timeout(
            &file.first_byte_timeout_ms,
            "first_byte_timeout_ms",
            defaults.first_byte,
        )?,
        idle: timeout(&file.idle_timeout_ms, "idle_timeout_ms", defaults.idle)?,
        request: timeout(
            &file.request_timeout_ms,
            "request_timeout_ms",
            defaults.request,
        )?,
    };
    if let Some(retries) = &file.max_retries {
        if *retries.get_ref() > MAX_RETRIES {
            return Err(at(
                retries.span(),
                "max_retries",
                format!(
                    "{} is out of range; must be from 0 to {MAX_RETRIES}",
                    retries.get_ref()
                ),
            ));
        }
        settings.retry.max_retries = *retries.get_ref();
    }
    if let Some(model_path) = &file.model_path {
        if model_path.get_ref().trim().is_empty() {
            return Err(at(
                model_path.span(),
                "model_path",
                "must not be empty; leave it out to use models/ in the repository".to_owned(),
            ));
        }
        settings.model_path =
            Some(base.join(foveal_settings::resolve_path(model_path.get_ref(), env)));
    }
    if let Some(value) = set("FOVEAL_MODEL_PATH") {
        settings.model_path = Some(foveal_settings::resolve_path(&value, env));
    }
    if let Some(threads) = &file.model_threads {
        if !(1..=MAX_MODEL_THREADS).contains(threads.get_ref()) {
            return Err(at(
                threads.span(),
                "model_threads",
                format!(
                    "{} is out of range; must be from 1 to {MAX_MODEL_THREADS}",
                    threads.get_ref()
                ),
            ));
        }
        settings.model_threads = Some(*threads.get_ref() as usize);
    }
    if let Some(value) = set("FOVEAL_MODEL_THREADS") {
        let threads = value
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_MODEL_THREADS).contains(n))
            .ok_or_else(|| ConfigError::Env {
                name: "FOVEAL_MODEL_THREADS",
                value: value.clone(),
                message: format!("must be a whole number from 1 to {MAX_MODEL_THREADS}"),
            })?;
        settings.model_threads = Some(threads as usize);
    }
    Ok(settings)
}

/// Checks a base URL: http or https with a host; the trailing slash goes.
pub fn check_base_url(raw: &str) -> Result<String, String> {
    let trimmed = raw.trim().trim_end_matches('/');
    let url = reqwest::Url::parse(trimmed).map_err(|e| format!("not a URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "the scheme must be http or https, not {:?}",
            url.scheme()
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("it has no host".to_owned());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("it must not have a query or a fragment".to_owned());
    }
    Ok(trimmed.to_owned())
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
