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
/// | `source` | no | the literate source; defaults to what the build script embedded |
/// | `init` | no | `fn(&HostApiRef) -> Result<(), SkillError>`, run once at load |
/// | `hooks` | yes | any of `components`, `redact`, `invoke`, `prefix`, `budget`, `tools`, `call_tool`, each naming a function |
///
/// Hook signatures:
/// - `components: fn(&ComponentsRequest<'_>) -> Result<Vec<Component>, SkillError>`
/// - `redact: fn(&str) -> Result<String, SkillError>`
/// - `invoke: fn(method: &str, args_json: &str) -> Result<String, SkillError>`
/// - `prefix: fn(&PrefixRequest<'_>) -> Result<Prefix, SkillError>`
/// - `budget: fn(&BudgetRequest<'_>) -> Result<BudgetPlan, SkillError>`
/// - `tools: fn() -> Result<Vec<ToolDecl>, SkillError>`
/// - `call_tool: fn(name: &str, args_json: &str) -> Result<String, SkillError>`
///
/// (`tools` and `call_tool` offer the model tools: see `docs/skill-tools.md`.)
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
        $(source: $source:expr,)?
        $(init: $init:path,)?
        hooks: { $($hook:ident : $hook_fn:path),* $(,)? } $(,)?
    ) => {
        const _: () = {
            use $crate::__private::abi_stable::prefix_type::PrefixTypeTrait as _;

            const __FOVEAL_NAME: &str = $name;
            const __FOVEAL_DEPENDENCIES: &[$crate::__private::RStr<'static>] =
                &[$($crate::__private::RStr::from_str($dep)),*];
            const __FOVEAL_COMPONENT_IDS: &[u32] = &[$($($component_id),*)?];

            extern "C" fn __foveal_init(
                host: $crate::HostApiRef,
            ) -> $crate::__private::abi_stable::std_types::RResult<(), $crate::SkillError> {
                $crate::export::guard(|| {
                    $crate::host::install(host, __FOVEAL_NAME);
                    $crate::__foveal_call_init!(host $(, $init)?)
                })
            }

            #[$crate::__private::abi_stable::export_root_module]
            fn __foveal_root_module() -> $crate::SkillModRef {
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
            ::core::env!("OUT_DIR"),
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
    ($other:ident, $f:path) => {
        ::core::compile_error!(::core::concat!(
            "unknown foveal hook `",
            ::core::stringify!($other),
            "`; the hooks are `components`, `redact`, `invoke`, `prefix`, `budget`, `tools` and `call_tool`"
        ))
    };
}
