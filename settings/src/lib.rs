//! # foveal-settings: what every part's settings are read with
//!
//! A leaf crate: the error every settings reader returns ([`ConfigError`],
//! with file, line, column and key), the injectable environment
//! ([`EnvLookup`], [`process_env`]), path expansion ([`resolve_path`]),
//! and the helpers of good messages ([`line_column`], [`closest`] for
//! "did you mean"). Each subsystem (provider, embeddings, prompt, agent,
//! execution) resolves its own table with these; the host's `config`
//! module puts the tables together.
//!
//! ## What it may not do
//!
//! It depends on no other foveal crate and knows no subsystem's settings:
//! the arrows point into it, never out.
//!
//! # Example
//!
//! ```
//! use foveal_settings::{closest, line_column, resolve_path};
//!
//! let env = |name: &str| (name == "NOTES").then(|| "/home/me/notes".to_owned());
//! assert_eq!(resolve_path("$NOTES/org", &env), std::path::PathBuf::from("/home/me/notes/org"));
//! assert_eq!(line_column("a = 1\nb = x\n", 10), (2, 5));
//! let known = ["base_url".to_owned(), "model".to_owned()];
//! assert_eq!(closest("base_ulr", &known).as_deref(), Some("base_url"));
//! ```

use std::path::PathBuf;

/// A configuration problem. The host refuses to start on any of these.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Someone other than the user or root could change the file.
    #[error("config file {0}")]
    Unsafe(Box<dyn std::error::Error + Send + Sync>),
    /// The file asked for does not exist.
    #[error("config file {} (from {origin}) does not exist; create it from config/foveal.toml or drop {origin}", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
        /// `--config` or `FOVEAL_CONFIG`.
        origin: &'static str,
    },
    /// A syntax error, an unknown key or a bad value in the file.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The key, as `table.key`, when known.
        key: Option<String>,
        /// What is wrong and, where possible, what to write instead.
        message: String,
    },
    /// An environment variable holds a value that cannot be used.
    #[error("environment variable {name}={value:?}: {message}")]
    Env {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        message: String,
    },
}

/// Reads an environment variable; injectable for tests.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment, as an [`EnvLookup`].
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Expands `~` and `$VAR` / `${VAR}` and strips surrounding quotes and
/// spaces (seed 000 `context-path-resolve`). An unset variable is left as
/// written, as the seed does.
pub fn resolve_path(raw: &str, env: EnvLookup<'_>) -> PathBuf {
    let trimmed = raw.trim_matches(|c| c == '"' || c == '\'' || c == ' ');
    let home = || dirs::home_dir().map(|h| h.to_string_lossy().into_owned());
    let lookup = |var: &str| -> Result<Option<String>, std::convert::Infallible> {
        Ok(Some(env(var).unwrap_or_else(|| format!("${var}"))))
    };
    match shellexpand::full_with_context(trimmed, home, lookup) {
        Ok(expanded) => PathBuf::from(expanded.into_owned()),
        Err(_) => PathBuf::from(trimmed),
    }
}

/// The 1-based line and column of byte `offset` in `text`.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |nl| before.len() - nl - 1)
        + 1;
    (line, column)
}

/// The known key closest to `unknown`, if any is close enough to be a
/// plausible typo: a few edits away (transpositions count as one), or
/// sharing a long prefix.
pub fn closest(unknown: &str, known: &[String]) -> Option<String> {
    let allowed = (unknown.chars().count() / 3).max(1);
    known
        .iter()
        .map(|k| {
            (
                strsim::damerau_levenshtein(unknown, k),
                -strsim::jaro_winkler(unknown, k),
                k,
            )
        })
        .filter(|(edits, neg_jw, _)| *edits <= allowed || -*neg_jw >= 0.9)
        .min_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)))
        .map(|(_, _, k)| k.clone())
}
