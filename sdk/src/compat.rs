//! The root module as earlier SDK releases laid it out, so that a host can
//! recognise a library built with one of them.
//!
//! abi_stable's layout check lets a library have *more* prefix-type fields
//! than the host expects (a newer library), not fewer — for the root
//! module and for every prefix type in it, the host API its `init` takes
//! included. A library built with SDK 0.2.1 has a host API without
//! `call_session` and `call_now`; one built with 0.2.0 has no `run_tool`
//! either. A host checks a library against the current
//! [`SkillModRef`](crate::SkillModRef) first and, when that fails, against
//! each earlier layout here ([`earlier_layout`]); it then reads the library
//! through the current type: every field it has is laid out alike, the
//! accessors of the fields added since return `None` (a prefix type
//! records in the library how many fields it has), and the library reads
//! the host's larger host API as the prefix it knows. Not for skills.

use abi_stable::library::LibHeader;

/// The SDK release whose layout `header`'s root module has, among the
/// earlier ones kept here (newest first); `None` when it has none of them.
pub fn earlier_layout(header: &LibHeader) -> Option<&'static str> {
    if header.ensure_layout::<v0_2_1::SkillModRef>().is_ok() {
        Some("0.2.1")
    } else if header.ensure_layout::<v0_2_0::SkillModRef>().is_ok() {
        Some("0.2.0")
    } else {
        None
    }
}

/// SDK 0.2.1: the host API before `call_session` and `call_now`.
pub mod v0_2_1 {
    use abi_stable::{
        StableAbi, declare_root_module_statics,
        library::RootModule,
        sabi_types::VersionStrings,
        std_types::{RResult, RStr, RString, RVec},
    };

    use crate::abi::{
        Component, ComponentsRequest, LogLevel, Manifest, SkillError, ToolCallRequest, ToolDecl,
    };

    /// The host API of SDK 0.2.1 (field for field; only its layout is
    /// used).
    #[repr(C)]
    #[derive(StableAbi, Debug)]
    #[sabi(kind(Prefix(prefix_ref = HostApiRef)))]
    #[sabi(missing_field(option))]
    pub struct HostApi {
        /// As in the current host API.
        pub sdk_version: RStr<'static>,
        /// As in the current host API.
        #[sabi(last_prefix_field)]
        pub log: extern "C" fn(level: LogLevel, skill: RStr<'_>, message: RStr<'_>),
        /// As in the current host API.
        pub count_tokens: extern "C" fn(text: RStr<'_>) -> u32,
        /// As in the current host API.
        pub memex_write:
            extern "C" fn(ticket: u64, edits_json: RStr<'_>) -> RResult<RString, SkillError>,
    }

    impl std::fmt::Debug for HostApiRef {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("v0_2_1::HostApiRef").finish_non_exhaustive()
        }
    }

    /// The root module of SDK 0.2.1 (field for field; only its layout is
    /// used).
    #[repr(C)]
    #[derive(StableAbi, Debug)]
    #[sabi(kind(Prefix(prefix_ref = SkillModRef)))]
    #[sabi(missing_field(option))]
    pub struct SkillMod {
        /// As in the current module.
        pub manifest: Manifest,
        /// As in the current module, with 0.2.1's host API.
        pub init: extern "C" fn(host: HostApiRef) -> RResult<(), SkillError>,
        /// As in the current module.
        pub components: Option<
            extern "C" fn(request: &ComponentsRequest<'_>) -> RResult<RVec<Component>, SkillError>,
        >,
        /// As in the current module.
        pub redact: Option<extern "C" fn(text: RStr<'_>) -> RResult<RString, SkillError>>,
        /// As in the current module.
        #[sabi(last_prefix_field)]
        pub invoke: Option<
            extern "C" fn(method: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, SkillError>,
        >,
        /// As in the current module.
        pub prefix: Option<
            extern "C" fn(
                request: &crate::prompt::PrefixRequest<'_>,
            ) -> RResult<crate::prompt::Prefix, SkillError>,
        >,
        /// As in the current module.
        pub budget: Option<
            extern "C" fn(
                request: &crate::prompt::BudgetRequest<'_>,
            ) -> RResult<crate::prompt::BudgetPlan, SkillError>,
        >,
        /// As in the current module.
        pub tools: Option<extern "C" fn() -> RResult<RVec<ToolDecl>, SkillError>>,
        /// As in the current module.
        pub call_tool: Option<
            extern "C" fn(name: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, SkillError>,
        >,
        /// As in the current module.
        pub run_tool:
            Option<extern "C" fn(request: &ToolCallRequest<'_>) -> RResult<RString, SkillError>>,
    }

    impl std::fmt::Debug for SkillModRef {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("v0_2_1::SkillModRef")
                .finish_non_exhaustive()
        }
    }

    impl RootModule for SkillModRef {
        declare_root_module_statics! {SkillModRef}
        const BASE_NAME: &'static str = "foveal_skill";
        const NAME: &'static str = "foveal skill";
        const VERSION_STRINGS: VersionStrings = VersionStrings::new("0.2.1");
    }
}

/// SDK 0.2.0: the root module before `run_tool`.
pub mod v0_2_0 {
    use abi_stable::{
        StableAbi, declare_root_module_statics,
        library::RootModule,
        sabi_types::VersionStrings,
        std_types::{RResult, RStr, RString, RVec},
    };

    use super::v0_2_1::HostApiRef;
    use crate::abi::{Component, ComponentsRequest, Manifest, SkillError, ToolDecl};

    /// The root module of SDK 0.2.0 (field for field; only its layout is
    /// used).
    #[repr(C)]
    #[derive(StableAbi, Debug)]
    #[sabi(kind(Prefix(prefix_ref = SkillModRef)))]
    #[sabi(missing_field(option))]
    pub struct SkillMod {
        /// As in the current module.
        pub manifest: Manifest,
        /// As in the current module, with 0.2.1's host API (0.2.0's too).
        pub init: extern "C" fn(host: HostApiRef) -> RResult<(), SkillError>,
        /// As in the current module.
        pub components: Option<
            extern "C" fn(request: &ComponentsRequest<'_>) -> RResult<RVec<Component>, SkillError>,
        >,
        /// As in the current module.
        pub redact: Option<extern "C" fn(text: RStr<'_>) -> RResult<RString, SkillError>>,
        /// As in the current module.
        #[sabi(last_prefix_field)]
        pub invoke: Option<
            extern "C" fn(method: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, SkillError>,
        >,
        /// As in the current module.
        pub prefix: Option<
            extern "C" fn(
                request: &crate::prompt::PrefixRequest<'_>,
            ) -> RResult<crate::prompt::Prefix, SkillError>,
        >,
        /// As in the current module.
        pub budget: Option<
            extern "C" fn(
                request: &crate::prompt::BudgetRequest<'_>,
            ) -> RResult<crate::prompt::BudgetPlan, SkillError>,
        >,
        /// As in the current module.
        pub tools: Option<extern "C" fn() -> RResult<RVec<ToolDecl>, SkillError>>,
        /// As in the current module.
        pub call_tool: Option<
            extern "C" fn(name: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, SkillError>,
        >,
    }

    impl std::fmt::Debug for SkillModRef {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("v0_2_0::SkillModRef")
                .finish_non_exhaustive()
        }
    }

    impl RootModule for SkillModRef {
        declare_root_module_statics! {SkillModRef}
        const BASE_NAME: &'static str = "foveal_skill";
        const NAME: &'static str = "foveal skill";
        const VERSION_STRINGS: VersionStrings = VersionStrings::new("0.2.0");
    }
}
