//! How the gate reaches the privacy skill, and reads its settings, without
//! knowing the host: the host's registry snapshot implements [`Skills`]
//! and its slot [`PrivacySkill`]; its configuration implements
//! [`PrivacyConfig`].

use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;

use foveal_redact::Pattern;

use crate::Fallback;

/// The privacy skill as the gate uses it: two hooks, and which load of the
/// skill this is.
pub trait PrivacySkill {
    /// This load of the skill. The gate configures each load once and
    /// keeps a weak reference to it to know it again; a reload is a new
    /// load and is configured again.
    fn load(&self) -> Arc<dyn Any + Send + Sync>;
    /// Where it was loaded from, for the log.
    fn path(&self) -> PathBuf;
    /// `invoke("configure", args)`; only the kind of a failure comes back
    /// (a skill's message could quote what it was given).
    fn configure(&self, args: String) -> Result<(), Fallback>;
    /// The `redact` hook on `input`, which holds no private text.
    fn redact(&self, input: String) -> Result<String, Fallback>;
}

/// Where the gate finds the privacy skill: the registry snapshot of the
/// cycle.
pub trait Skills {
    /// The privacy skill when, as far as the registry can tell, it can be
    /// used (loaded, not quarantined, its dependencies there, both hooks
    /// implemented); else why not.
    fn privacy_skill(&self) -> Result<&dyn PrivacySkill, Fallback>;
    /// The snapshot's generation: what the gate remembers of a request is
    /// forgotten when it changes.
    fn generation(&self) -> u64;
}

impl<T: Skills + ?Sized> Skills for &T {
    fn privacy_skill(&self) -> Result<&dyn PrivacySkill, Fallback> {
        (**self).privacy_skill()
    }
    fn generation(&self) -> u64 {
        (**self).generation()
    }
}

impl<T: Skills + ?Sized> Skills for Arc<T> {
    fn privacy_skill(&self) -> Result<&dyn PrivacySkill, Fallback> {
        (**self).privacy_skill()
    }
    fn generation(&self) -> u64 {
        (**self).generation()
    }
}

/// No skills at all: the host's own filter handles every body.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSkills;

impl Skills for NoSkills {
    fn privacy_skill(&self) -> Result<&dyn PrivacySkill, Fallback> {
        Err(Fallback::NotLoaded)
    }
    fn generation(&self) -> u64 {
        0
    }
}

/// The settings a gate is built from (`[privacy]`).
pub trait PrivacyConfig {
    /// The tags that make an object private (`privacy.tags`).
    fn privacy_tags(&self) -> &[String];
    /// The secret patterns (`privacy.patterns`).
    fn privacy_patterns(&self) -> &[Pattern];
    /// Whether the built-in patterns come first
    /// (`privacy.default_patterns`).
    fn privacy_default_patterns(&self) -> bool;
    /// Where the private-text matcher is kept between processes
    /// ([`crate::Gate::with_index`]); `None`: it is not.
    fn privacy_index(&self) -> Option<std::path::PathBuf> {
        None
    }
}
