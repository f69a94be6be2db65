//! The `[embedding]` section of `foveal.toml`, with its environment
//! variables.
//!
//! Which embedder: `FOVEAL_EMBEDDING`, else `[embedding] kind`, else
//! `local` — the in-process all-MiniLM-L6-v2 — whatever the chat provider
//! is: a memex is embedded on this machine unless asked otherwise. The
//! OpenAI-compatible embedder is configured like the chat provider: its
//! address is `FOVEAL_EMBEDDING_BASE_URL`, else `[embedding] base_url`,
//! else the chat provider's (`OPENAI_BASE_URL`, `[provider] base_url`);
//! its key is read from the variable `api_key_env` names (default: the
//! chat provider's).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::settings::{ApiKey, ProviderSettings, check_base_url};
use foveal_settings::{ConfigError, EnvLookup};

/// The embedding model asked of an OpenAI-compatible server when none is
/// configured.
pub const DEFAULT_REMOTE_MODEL: &str = "text-embedding-3-small";

/// Objects embedded per call: the batch of 32 (≈3.5 ms a
/// sentence batched against ≈10 ms one at a time, on 2 cores).
pub const DEFAULT_BATCH: usize = 32;

/// Who computes the vectors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum EmbedKind {
    /// all-MiniLM-L6-v2, in this process.
    #[default]
    Local,
    /// An OpenAI-compatible `/embeddings` endpoint.
    OpenAi,
    /// No vectors are computed; `:EMBEDDING:` properties still count.
    Off,
}

impl EmbedKind {
    /// Its name in the configuration and the environment.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::OpenAi => "openai",
            Self::Off => "off",
        }
    }
}

impl fmt::Display for EmbedKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EmbedKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "local" => Ok(Self::Local),
            "openai" => Ok(Self::OpenAi),
            "off" => Ok(Self::Off),
            other => Err(format!(
                "unknown embedder {other:?}; expected `local`, `openai` or `off`"
            )),
        }
    }
}

/// The resolved embedding settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedSettings {
    /// Who computes the vectors.
    pub kind: EmbedKind,
    /// The local model's folder (`model.safetensors`, `tokenizer.json`,
    /// `config.json`); `None` looks where `scripts/fetch-model` puts it.
    pub model_dir: Option<PathBuf>,
    /// Threads the local model computes with; `None`: all the CPUs.
    pub threads: Option<usize>,
    /// The OpenAI-compatible server, up to and including `/v1`.
    pub base_url: String,
    /// The model asked of it.
    pub model: String,
    /// The variable the API key was read from.
    pub api_key_env: String,
    /// The API key.
    pub api_key: Option<ApiKey>,
    /// How long a request to the server may take, in all.
    pub request_timeout: Duration,
    /// How long to wait for the connection.
    pub connect_timeout: Duration,
    /// Objects per call.
    pub batch: usize,
}

impl Default for EmbedSettings {
    fn default() -> Self {
        let provider = ProviderSettings::default();
        Self {
            kind: EmbedKind::Local,
            model_dir: None,
            threads: None,
            base_url: provider.base_url,
            model: DEFAULT_REMOTE_MODEL.to_owned(),
            api_key_env: provider.api_key_env,
            api_key: None,
            request_timeout: Duration::from_secs(120),
            connect_timeout: provider.timeouts.connect,
            batch: DEFAULT_BATCH,
        }
    }
}

impl EmbedSettings {
    /// Settings for the OpenAI-compatible endpoint at `base_url` with
    /// `model`, the rest default.
    pub fn openai_compatible(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            kind: EmbedKind::OpenAi,
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            model: model.into(),
            ..Self::default()
        }
    }
}

/// `[embedding]` as written in the file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEmbedding {
    kind: Option<Spanned<String>>,
    model_dir: Option<Spanned<String>>,
    threads: Option<Spanned<u32>>,
    base_url: Option<Spanned<String>>,
    model: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    request_timeout_ms: Option<Spanned<u64>>,
    batch: Option<Spanned<u32>>,
}

/// Resolves `[embedding]` with the environment; `provider` is the
/// resolved chat provider, whose address and key variable are the
/// defaults.
pub fn resolve(
    file: &FileEmbedding,
    text: &str,
    path: &Path,
    base: &Path,
    provider: &ProviderSettings,
    env: EnvLookup<'_>,
) -> Result<EmbedSettings, ConfigError> {
    let at = |span: std::ops::Range<usize>, key: &str, message: String| {
        let (line, column) = foveal_settings::line_column(text, span.start);
        let key = format!("embedding.{key}");
        ConfigError::Invalid {
            path: path.to_owned(),
            line,
            column,
            message: format!("`{key}`: {message}"),
            key: Some(key),
        }
    };
    let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let mut settings = EmbedSettings {
        base_url: provider.base_url.clone(),
        api_key_env: provider.api_key_env.clone(),
        connect_timeout: provider.timeouts.connect,
        ..EmbedSettings::default()
    };
    if let Some(kind) = &file.kind {
        settings.kind = kind
            .get_ref()
            .parse()
            .map_err(|m| at(kind.span(), "kind", m))?;
    }
    if let Some(value) = set("FOVEAL_EMBEDDING") {
        settings.kind = value.parse().map_err(|message| ConfigError::Env {
            name: "FOVEAL_EMBEDDING",
            value,
            message,
        })?;
    }
    if let Some(dir) = &file.model_dir {
        if dir.get_ref().trim().is_empty() {
            return Err(at(
                dir.span(),
                "model_dir",
                "must not be empty; leave it out to use models/all-MiniLM-L6-v2".to_owned(),
            ));
        }
        settings.model_dir = Some(base.join(foveal_settings::resolve_path(dir.get_ref(), env)));
    }
    if let Some(value) = set("FOVEAL_EMBEDDING_MODEL_DIR") {
        settings.model_dir = Some(foveal_settings::resolve_path(&value, env));
    }
    if let Some(threads) = &file.threads {
        if !(1..=256).contains(threads.get_ref()) {
            return Err(at(
                threads.span(),
                "threads",
                format!(
                    "{} is out of range; must be from 1 to 256",
                    threads.get_ref()
                ),
            ));
        }
        settings.threads = Some(*threads.get_ref() as usize);
    }
    if let Some(url) = &file.base_url {
        settings.base_url =
            check_base_url(url.get_ref()).map_err(|m| at(url.span(), "base_url", m))?;
    }
    if let Some(value) = set("FOVEAL_EMBEDDING_BASE_URL") {
        settings.base_url = check_base_url(&value).map_err(|message| ConfigError::Env {
            name: "FOVEAL_EMBEDDING_BASE_URL",
            value: safe_url(&value),
            message,
        })?;
    }
    if let Some(model) = &file.model {
        let name = model.get_ref().trim();
        if name.is_empty() {
            return Err(at(model.span(), "model", "must not be empty".to_owned()));
        }
        settings.model = name.to_owned();
    }
    if let Some(model) = set("FOVEAL_EMBEDDING_MODEL") {
        settings.model = model.trim().to_owned();
    }
    if let Some(name) = &file.api_key_env {
        let valid = {
            let mut chars = name.get_ref().chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if !valid {
            // Not echoed: a key pasted here by mistake stays off screens.
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
        .map(ApiKey::new);
    if let Some(ms) = &file.request_timeout_ms {
        if !(1..=86_400_000).contains(ms.get_ref()) {
            return Err(at(
                ms.span(),
                "request_timeout_ms",
                format!(
                    "{} is out of range; must be from 1 to 86400000 (a day), in milliseconds",
                    ms.get_ref()
                ),
            ));
        }
        settings.request_timeout = Duration::from_millis(*ms.get_ref());
    }
    if let Some(batch) = &file.batch {
        if !(1..=2048).contains(batch.get_ref()) {
            return Err(at(
                batch.span(),
                "batch",
                format!(
                    "{} is out of range; must be from 1 to 2048",
                    batch.get_ref()
                ),
            ));
        }
        settings.batch = *batch.get_ref() as usize;
    }
    Ok(settings)
}

/// The URL as it may be shown: a user name and password are masked.
pub fn safe_url(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    match url[start..end].rfind('@') {
        Some(at) => format!("{}***{}", &url[..start], &url[start + at..]),
        None => url.to_owned(),
    }
}
