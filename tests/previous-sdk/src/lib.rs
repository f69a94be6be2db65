//! # foveal-sdk: writing a foveal skill
//!
//! A foveal *skill* is a dynamic library (`crate-type = ["cdylib"]`) that the
//! host loads from its plugins folder, checks, and may replace while it runs.
//! This crate is the whole contract between the two: the ABI-stable types
//! that cross the boundary ([`abi`]), the root module every skill exports
//! ([`SkillMod`]), the host's services a skill may call ([`host`]), and the
//! [`export_skill!`] macro that writes the unsafe parts for you.
//!
//! The rules a skill lives by:
//!
//! - **Skills compute, the host does I/O.** A hook is a function of its input
//!   (and the host API) to an output. No files, sockets or threads.
//! - **A panic is an error, not a crash.** Every entry point runs inside
//!   [`export::guard`]; a panic comes back to the host as
//!   `SkillError { code: SkillError::PANIC, .. }`. The host counts them and
//!   quarantines a skill that keeps panicking. Build with `panic = "unwind"`.
//! - **Declare only the hooks you implement.** The host lists the hooks it
//!   finds, and a missing hook has a named fallback in the host.
//!
//! # Example
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! foveal-sdk = { path = "../../sdk" }
//! abi_stable = "0.11"   # the export attribute refers to it by name
//!
//! [build-dependencies]
//! foveal-sdk-build = { path = "../../sdk-build" }
//! ```
//!
//! `build.rs`: `fn main() { foveal_sdk_build::embed_source(); }`
//!
//! `src/lib.rs`:
//!
//! ```ignore
//! use foveal_sdk::{Component, ComponentsRequest, Role, SkillError};
//!
//! fn components(_request: &ComponentsRequest<'_>) -> Result<Vec<Component>, SkillError> {
//!     Ok(vec![Component::new(
//!         4500,
//!         "hello",
//!         "Hello",
//!         Role::SYSTEM,
//!         format!("Hello; the memex has {} files.", _request.memex.files.len()),
//!     )])
//! }
//!
//! foveal_sdk::export_skill! {
//!     name: "hello",
//!     priority: 10,
//!     dependencies: [],
//!     description: "Adds a greeting to every prompt.",
//!     // The prompt component ids the hook fills (see `prompt`).
//!     component_ids: [4500],
//!     hooks: { components: components },
//! }
//! ```
//!
//! `docs/skill-abi.md` in the repository says how this ABI may evolve.

#![deny(missing_docs)]

pub mod abi;
pub mod export;
pub mod host;
pub mod memex;
pub mod prompt;

pub use abi::{
    BudgetFn, CallToolFn, Component, ComponentsFn, ComponentsRequest, HostApi, HostApiRef, InitFn,
    InvokeFn, LogLevel, Manifest, Omitted, PrefixFn, RedactFn, Role, SignalKind, SkillError,
    SkillMod, SkillModRef, Source, ToolDecl, ToolsFn,
};

/// The version of this SDK. A skill records the version it was built
/// against in its [`Manifest`]; the host refuses a library whose SDK is
/// incompatible with its own.
pub const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Re-exports used by the code [`export_skill!`] generates. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use abi_stable;
    pub use abi_stable::std_types::{RSlice, RStr};

    use crate::abi::{Manifest, SkillMod};

    /// The base the export macro fills in: no hooks. The manifest and
    /// `init` here are always overwritten by the macro.
    pub const NO_HOOKS: SkillMod = SkillMod {
        manifest: Manifest {
            name: RStr::from_str(""),
            version: RStr::from_str(""),
            sdk_version: RStr::from_str(crate::SDK_VERSION),
            priority: 0,
            dependencies: RSlice::from_slice(&[]),
            description: RStr::from_str(""),
            source: RStr::from_str(""),
            component_ids: RSlice::from_slice(&[]),
        },
        init: no_init,
        components: None,
        redact: None,
        invoke: None,
        prefix: None,
        budget: None,
        tools: None,
        call_tool: None,
    };

    extern "C" fn no_init(
        _host: crate::HostApiRef,
    ) -> abi_stable::std_types::RResult<(), crate::SkillError> {
        abi_stable::std_types::ROk(())
    }
}
