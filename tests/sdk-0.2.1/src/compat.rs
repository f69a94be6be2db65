//! The root module as earlier SDK releases laid it out, so that a host can
//! recognise a library built with one of them.
//!
//! abi_stable's layout check lets a library have *more* prefix-type fields
//! than the host expects (a newer library), not fewer. A library built with
//! SDK 0.2.0 has no `run_tool`, so a 0.2.1 host checks it against
//! [`v0_2_0::SkillModRef`] when the check against the current
//! [`SkillModRef`](crate::SkillModRef) fails, and then reads it through the
//! current type: every field it has is laid out alike, and the accessors of
//! the fields added since return `None` (a prefix type records in the
//! library how many fields it has). Not for skills.

/// SDK 0.2.0: the root module before `run_tool`.
pub mod v0_2_0 {
    use abi_stable::{
        StableAbi, declare_root_module_statics,
        library::RootModule,
        sabi_types::VersionStrings,
        std_types::{RResult, RStr, RString, RVec},
    };

    use crate::abi::{Component, ComponentsRequest, HostApiRef, Manifest, SkillError, ToolDecl};

    /// The root module of SDK 0.2.0 (field for field; only its layout is
    /// used).
    #[repr(C)]
    #[derive(StableAbi, Debug)]
    #[sabi(kind(Prefix(prefix_ref = SkillModRef)))]
    #[sabi(missing_field(option))]
    pub struct SkillMod {
        /// As in the current module.
        pub manifest: Manifest,
        /// As in the current module.
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
