//! The export macro and the panic guard every entry point runs in.
//!
//! A panic that unwinds out of an `extern "C"` function aborts the process,
//! which would let one skill take the host down. Every entry point the macro
//! generates runs the skill's code inside [`guard`], which catches the panic
//! and returns it as `RErr(SkillError { code: PANIC, .. })`.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use abi_stable::std_types::{RErr, ROk, RResult};

use crate::abi::SkillError;

/// Runs `f`, turning a panic into a [`SkillError::PANIC`] error.
///
/// `AssertUnwindSafe` is sound here in the sense that matters to the host: a
/// skill that panicked may have left its own state inconsistent, which is why
/// the host counts panics and quarantines a skill that keeps panicking.
pub fn guard<T>(f: impl FnOnce() -> Result<T, SkillError>) -> RResult<T, SkillError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => ROk(value),
        Ok(Err(error)) => RErr(error),
        Err(payload) => {
            let message = panic_message(payload.as_ref());
            // Dropping a panic payload can itself panic; don't let it escape.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            RErr(SkillError::new(SkillError::PANIC, message))
        }
    }
}

/// The text of a panic payload (`panic!("…")` gives a `&str` or a `String`).
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}

/// Declares a skill and exports its root module.
///
/// Use it once, at the root of a `cdylib` crate whose build script calls
/// `foveal_sdk_build::embed_source()`. Every function named here is a plain
/// Rust function; the macro writes the `extern "C"` wrappers, each running in
/// [`guard`].
///
/// | key | required | what |
/// |---|---|---|
/// | `name` | yes | the skill's name (`awareness`) |
/// | `priority` | yes | higher is listed and runs first |
/// | `dependencies` | yes | names of skills this one needs |
/// | `description` | yes | one line |
/// | `component_ids` | no | the prompt component ids the `components` hook fills (see [`crate::prompt`]) |
/// | `needs` | no | what the skill needs beyond computing, when it runs confined in a cell: `"network"`, `"read:PATH"` (e.g. `"read:~/papers"`); the user grants it in `[skills.<name>]` (`allow_network`, `allow_read`), and `foveal skill-list` shows a need not granted |
/// | `source` | no | the literate source; defaults to what the build script embedded |
/// | `init` | no | `fn(&HostApiRef) -> Result<(), SkillError>`, run once at load |
/// | `hooks` | yes | any of `components`, `redact`, `invoke`, `prefix`, `budget`, `tools`, `run_tool`, `call_tool`, each naming a function |
///
/// Hook signatures:
/// - `components: fn(&ComponentsRequest<'_>) -> Result<Vec<Component>, SkillError>`
/// - `redact: fn(&str) -> Result<String, SkillError>`
/// - `invoke: fn(method: &str, args_json: &str) -> Result<String, SkillError>`
/// - `prefix: fn(&PrefixRequest<'_>) -> Result<Prefix, SkillError>`
/// - `budget: fn(&BudgetRequest<'_>) -> Result<BudgetPlan, SkillError>`
/// - `tools: fn() -> Result<Vec<ToolDecl>, SkillError>`
/// - `run_tool: fn(&ToolCallRequest<'_>) -> Result<String, SkillError>` — the
///   tool's name and arguments, lent the memex view, the focus and the
///   skill's configuration
/// - `call_tool: fn(name: &str, args_json: &str) -> Result<String, SkillError>`
///   — the form before `run_tool` (no memex): still called by the host
///   when a skill has no `run_tool`
///
/// (`tools` and `run_tool` offer the model tools: see `docs/skill-tools.md`.)
///
/// The macro checks `component_ids` at compile time with the loader's
/// rules ([`crate::prompt::ids::check_declared`]): an id above 7999, one
/// the host fills (0, 2500, 5000, 6000, 7000), 2000 outside the
/// `awareness` skill, or an id declared twice does not build. Without
/// `source`, the crate needs the build script
/// (`foveal_sdk_build::embed_source()`); without one the build stops with
/// a message saying so.
///
/// It also defines a hidden `pub fn __foveal_root_module()` at the place of
/// use: the root module, which `foveal_sdk::testing::Skill::exported` calls
/// (the `testing` feature).
///
/// (`prefix` and `budget` are the token-economics hooks of
/// [`crate::prompt`].)
///
/// # Example
///
/// ```ignore
/// fn redact(text: &str) -> Result<String, foveal_sdk::SkillError> {
///     Ok(text.replace("hunter2", "[REDACTED]"))
/// }
///
/// foveal_sdk::export_skill! {
///     name: "example",
///     priority: 10,
///     dependencies: [],
///     description: "Replaces one password.",
///     hooks: { redact: redact },
/// }
/// ```
#[macro_export]
macro_rules! export_skill {
    (
        name: $name:literal,
        priority: $priority:expr,
        dependencies: [$($dep:literal),* $(,)?],
        description: $description:literal,
        $(component_ids: [$($component_id:expr),* $(,)?],)?
        $(needs: [$($need:literal),* $(,)?],)?
        $(source: $source:expr,)?
        $(init: $init:path,)?
        hooks: { $($hook:ident : $hook_fn:path),* $(,)? } $(,)?
    ) => {
        /// The skill's root module, as the host loads it. Not a public API:
        /// `foveal_sdk::testing::Skill::exported()` calls it in a test.
        #[doc(hidden)]
        pub fn __foveal_root_module() -> $crate::SkillModRef {
            use $crate::__private::abi_stable::prefix_type::PrefixTypeTrait as _;

            const __FOVEAL_NAME: &str = $name;
            const __FOVEAL_DEPENDENCIES: &[$crate::__private::RStr<'static>] =
                &[$($crate::__private::RStr::from_str($dep)),*];
            const __FOVEAL_COMPONENT_IDS: &[u32] = &[$($($component_id),*)?];
            // The loader's rules for declared ids, at compile time: a
            // reserved or out-of-range id is a build error, not a refusal
            // at load (see `foveal_sdk::prompt::ids::check_declared`).
            const _: () = match $crate::prompt::ids::check_declared(
                __FOVEAL_NAME,
                __FOVEAL_COMPONENT_IDS,
            ) {
                ::core::result::Result::Ok(()) => (),
                ::core::result::Result::Err(why) => ::core::panic!("{}", why),
            };

            extern "C" fn __foveal_init(
                host: $crate::HostApiRef,
            ) -> $crate::__private::abi_stable::std_types::RResult<(), $crate::SkillError> {
                $crate::export::guard(|| {
                    $crate::host::install(host, __FOVEAL_NAME);
                    $crate::__foveal_call_init!(host $(, $init)?)
                })
            }

            $crate::SkillMod {
                manifest: $crate::Manifest {
                    name: $crate::__private::RStr::from_str(__FOVEAL_NAME),
                    version: $crate::__private::RStr::from_str(::core::env!("CARGO_PKG_VERSION")),
                    sdk_version: $crate::__private::RStr::from_str($crate::SDK_VERSION),
                    priority: $priority,
                    dependencies: $crate::__private::RSlice::from_slice(__FOVEAL_DEPENDENCIES),
                    description: $crate::__private::RStr::from_str($description),
                    source: $crate::__private::RStr::from_str($crate::__foveal_source!($($source)?)),
                    component_ids: $crate::__private::RSlice::from_slice(__FOVEAL_COMPONENT_IDS),
                },
                init: __foveal_init,
                $($hook: ::core::option::Option::Some($crate::__foveal_wrap_hook!($hook, $hook_fn)),)*
                ..$crate::__private::NO_HOOKS
            }
            .leak_into_prefix()
        }

        /// What the skill needs beyond computing (`needs` of
        /// `export_skill!`), one per line: read by the host's cell with
        /// the manifest. A symbol of its own, so that the root module's
        /// layout — and every library built before it — is unchanged.
        #[doc(hidden)]
        #[unsafe(no_mangle)]
        pub extern "C" fn foveal_skill_needs() -> $crate::__private::RStr<'static> {
            $crate::__private::RStr::from_str(::core::concat!($($($need, "\n",)*)?))
        }

        // What abi_stable's `#[export_root_module]` writes, spelled through
        // the SDK's re-export so that a skill need not depend on
        // abi_stable itself: the library header the host looks up by this
        // symbol name (`abi_stable::library::ROOT_MODULE_LOADER_NAME`; a
        // test of the SDK checks they agree).
        const _: () = {
            #[allow(non_upper_case_globals)]
            #[unsafe(no_mangle)]
            pub static _1as_0lib_1header_0root_bmodule_bloader:
                $crate::__private::abi_stable::library::LibHeader = {
                pub extern "C" fn __foveal_erased_module(
                ) -> $crate::__private::abi_stable::library::RootModuleResult {
                    $crate::__private::abi_stable::library::__call_root_module_loader(
                        __foveal_root_module,
                    )
                }
                // SAFETY: the constructor returns the root module of type
                // `SkillModRef`, the type the header is built for — the
                // contract of `from_constructor`, as abi_stable's own
                // attribute writes it.
                unsafe {
                    $crate::__private::abi_stable::library::LibHeader::from_constructor::<
                        $crate::SkillModRef,
                    >(
                        __foveal_erased_module,
                        $crate::__private::abi_stable::library::CheckTypeLayout::Yes,
                    )
                }
            };
        };
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __foveal_call_init {
    ($host:ident) => {{
        let _ = $host;
        ::core::result::Result::Ok(())
    }};
    ($host:ident, $init:path) => {
        $init(&$host)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __foveal_source {
    () => {
        ::core::include_str!(::core::concat!(
            ::core::env!(
                "OUT_DIR",
                "foveal skill: OUT_DIR is not set, so this crate has no build script and export_skill! has no literate source to embed. Fix: add `build.rs` containing `fn main() { foveal_sdk_build::embed_source(); }` and `foveal-sdk-build` under [build-dependencies] in Cargo.toml (or give export_skill! a `source: \"...\"`)."
            ),
            "/foveal-skill-source.txt"
        ))
    };
    ($source:expr) => {
        $source
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __foveal_wrap_hook {
    (components, $f:path) => {{
        extern "C" fn __foveal_hook(
            request: &$crate::ComponentsRequest<'_>,
        ) -> $crate::__private::abi_stable::std_types::RResult<
            $crate::__private::abi_stable::std_types::RVec<$crate::Component>,
            $crate::SkillError,
        > {
            $crate::export::guard(|| {
                $f(request).map($crate::__private::abi_stable::std_types::RVec::from)
            })
        }
        __foveal_hook as $crate::ComponentsFn
    }};
    (redact, $f:path) => {{
        extern "C" fn __foveal_hook(
            text: $crate::__private::RStr<'_>,
        ) -> $crate::__private::abi_stable::std_types::RResult<
            $crate::__private::abi_stable::std_types::RString,
            $crate::SkillError,
        > {
            $crate::export::guard(|| {
                $f(text.as_str()).map($crate::__private::abi_stable::std_types::RString::from)
            })
        }
        __foveal_hook as $crate::RedactFn
    }};
    (invoke, $f:path) => {{
        extern "C" fn __foveal_hook(
            method: $crate::__private::RStr<'_>,
            args_json: $crate::__private::RStr<'_>,
        ) -> $crate::__private::abi_stable::std_types::RResult<
            $crate::__private::abi_stable::std_types::RString,
            $crate::SkillError,
        > {
            $crate::export::guard(|| {
                $f(method.as_str(), args_json.as_str())
                    .map($crate::__private::abi_stable::std_types::RString::from)
            })
        }
        __foveal_hook as $crate::InvokeFn
    }};
    (prefix, $f:path) => {{
        extern "C" fn __foveal_hook(
            request: &$crate::prompt::PrefixRequest<'_>,
        ) -> $crate::__private::abi_stable::std_types::RResult<
            $crate::prompt::Prefix,
            $crate::SkillError,
        > {
            $crate::export::guard(|| $f(request))
        }
        __foveal_hook as $crate::PrefixFn
    }};
    (budget, $f:path) => {{
        extern "C" fn __foveal_hook(
            request: &$crate::prompt::BudgetRequest<'_>,
        ) -> $crate::__private::abi_stable::std_types::RResult<
            $crate::prompt::BudgetPlan,
            $crate::SkillError,
        > {
            $crate::export::guard(|| $f(request))
        }
        __foveal_hook as $crate::BudgetFn
    }};
    (tools, $f:path) => {{
        extern "C" fn __foveal_hook() -> $crate::__private::abi_stable::std_types::RResult<
            $crate::__private::abi_stable::std_types::RVec<$crate::ToolDecl>,
            $crate::SkillError,
        > {
            $crate::export::guard(|| {
                $f().map($crate::__private::abi_stable::std_types::RVec::from)
            })
        }
        __foveal_hook as $crate::ToolsFn
    }};
    (call_tool, $f:path) => {{
        extern "C" fn __foveal_hook(
            name: $crate::__private::RStr<'_>,
            args_json: $crate::__private::RStr<'_>,
        ) -> $crate::__private::abi_stable::std_types::RResult<
            $crate::__private::abi_stable::std_types::RString,
            $crate::SkillError,
        > {
            $crate::export::guard(|| {
                $f(name.as_str(), args_json.as_str())
                    .map($crate::__private::abi_stable::std_types::RString::from)
            })
        }
        __foveal_hook as $crate::CallToolFn
    }};
    (run_tool, $f:path) => {{
        extern "C" fn __foveal_hook(
            request: &$crate::ToolCallRequest<'_>,
        ) -> $crate::__private::abi_stable::std_types::RResult<
            $crate::__private::abi_stable::std_types::RString,
            $crate::SkillError,
        > {
            $crate::export::guard(|| {
                $f(request).map($crate::__private::abi_stable::std_types::RString::from)
            })
        }
        __foveal_hook as $crate::RunToolFn
    }};
    ($other:ident, $f:path) => {
        ::core::compile_error!(::core::concat!(
            "unknown foveal hook `",
            ::core::stringify!($other),
            "`; the hooks are `components`, `redact`, `invoke`, `prefix`, `budget`, `tools`, `run_tool` and `call_tool`"
        ))
    };
}
