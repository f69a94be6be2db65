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
//! The crate itself depends on nothing of the host (only on `foveal-org`,
//! for the `testing` feature): the ABI is the one door between the two.
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
//! foveal-sdk = "0.2.1"
//!
//! [build-dependencies]
//! foveal-sdk-build = "0.2"
//!
//! [dev-dependencies]
//! foveal-sdk = { version = "0.2.1", features = ["testing"] }
//! ```
//!
//! (No `abi_stable` dependency of your own: the SDK re-exports the one it
//! is built with, [`abi_stable`], and the macro refers to it.)
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
//! A test of the hook, with the `testing` feature ([`testing`]):
//!
//! ```ignore
//! use foveal_sdk::testing::{Harness, TestMemex};
//!
//! let memex = TestMemex::from_org("* Work\n* Diary :@personal:\n");
//! let components = Harness::new(memex).components(components).unwrap();
//! assert!(components[0].content.contains("1 files"));
//! ```
//!
//! `docs/skill-abi.md` in the repository says how this ABI may evolve
//! and when the host calls each hook; `docs/skill-tools.md` covers tools.

#![deny(missing_docs)]

pub mod abi;
pub mod call;
pub mod compat;
pub mod dates;
pub mod export;
pub mod handle;
pub mod host;
pub mod memex;
pub mod projects;
pub mod prompt;
#[cfg(feature = "testing")]
pub mod testing;

/// The abi_stable crate the SDK is built with. The ABI types are
/// abi_stable's (`RString`, `RVec`, `RStr`, …): use them from here rather
/// than adding a dependency of your own, so that the versions and features
/// always match.
pub use abi_stable;

pub use abi::{
    BudgetFn, CallToolFn, Component, ComponentsFn, ComponentsRequest, HostApi, HostApiRef, InitFn,
    InvokeFn, LogLevel, Manifest, Now, Omitted, PrefixFn, RedactFn, Role, RunToolFn, SignalKind,
    SkillError, SkillMod, SkillModRef, Source, ToolCallRequest, ToolDecl, ToolsFn,
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
        run_tool: None,
    };

    /// `abi_stable::library::ROOT_MODULE_LOADER_NAME`, which the export
    /// macro spells as a literal (an attribute takes no constant).
    #[cfg(test)]
    #[test]
    fn the_exported_symbol_is_the_one_abi_stable_looks_up() {
        assert_eq!(
            abi_stable::library::ROOT_MODULE_LOADER_NAME,
            "_1as_0lib_1header_0root_bmodule_bloader"
        );
    }

    extern "C" fn no_init(
        _host: crate::HostApiRef,
    ) -> abi_stable::std_types::RResult<(), crate::SkillError> {
        abi_stable::std_types::ROk(())
    }
}
