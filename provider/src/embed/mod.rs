//! The embedders: what turns texts into vectors.
//!
//! - [`local`]: all-MiniLM-L6-v2 in this process ([`bert`], on candle).
//! - [`remote`]: an OpenAI-compatible `/embeddings` endpoint.
//! - [`settings`]: the `[embedding]` table.
//!
//! What is embedded, when, and where the vectors go (the cache, the memex)
//! is the host's `embed` module; only public text ever reaches an embedder.

pub mod bert;
pub mod local;
pub mod remote;
pub mod settings;

use std::path::PathBuf;
use std::sync::Arc;

pub use settings::{EmbedKind, EmbedSettings};

/// Why vectors could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The local model's files are not there.
    #[error(
        "embedding model not found (looked in {looked}); run `scripts/fetch-model` to download all-MiniLM-L6-v2 into models/, set `embedding.model_dir`, or set `embedding.kind = \"off\"`"
    )]
    ModelMissing {
        /// The folders tried.
        looked: String,
    },
    /// The local model's files are there but could not be loaded.
    #[error("embedding model {}: {message}", path.display())]
    Load {
        /// The folder.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The computation failed.
    #[error("embedding failed: {0}")]
    Compute(String),
    /// The remote endpoint failed.
    #[error("embeddings endpoint {url}: {message}")]
    Remote {
        /// The endpoint.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// `embedding.kind = "off"`.
    #[error("embeddings are off (`embedding.kind = \"off\"`, FOVEAL_EMBEDDING)")]
    Off,
}

/// Something that turns texts into vectors.
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// The id its vectors are cached under.
    fn model_id(&self) -> &str;
    /// Whether texts leave the process.
    fn is_remote(&self) -> bool;
    /// The vectors' length, once known.
    fn dim(&self) -> Option<usize>;
    /// One vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
    /// One line for logs and `foveal status`.
    fn describe(&self) -> String;
}

/// The id the vectors of `settings` are cached under, without loading a
/// model; `None` when embeddings are off.
pub fn model_id(settings: &EmbedSettings) -> Option<String> {
    match settings.kind {
        EmbedKind::Local => Some(local::MODEL_ID.to_owned()),
        EmbedKind::OpenAi => Some(remote::model_id(settings)),
        EmbedKind::Off => None,
    }
}

/// The embedder `settings` ask for; the local model is loaded here.
pub fn open(settings: &EmbedSettings, background: bool) -> Result<Arc<dyn Embedder>, EmbedError> {
    match settings.kind {
        EmbedKind::Local => {
            let dir = local::model_dir(settings.model_dir.as_deref())?;
            Ok(Arc::new(local::LocalEmbedder::open(
                &dir,
                settings.threads,
                background,
            )?))
        }
        EmbedKind::OpenAi => Ok(Arc::new(remote::RemoteEmbedder::new(settings)?)),
        EmbedKind::Off => Err(EmbedError::Off),
    }
}

/// Lowers the calling thread's priority (`nice` 10), so that embedding
/// gives way to a cycle and to the chat model.
pub fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: `setpriority` only changes a scheduling value; on Linux,
    // `who = 0` with PRIO_PROCESS is the calling thread alone.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
    }
}
