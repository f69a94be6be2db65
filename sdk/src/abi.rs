//! The types that cross the boundary between the host and a skill library.
//!
//! Everything here derives [`StableAbi`], so the host can check at load time
//! that a library was built against a compatible layout. Read
//! `docs/skill-abi.md` before changing anything in this file: a field added
//! in the wrong place, or a changed type, makes every installed skill
//! incompatible.

use abi_stable::{
    StableAbi, declare_root_module_statics,
    library::RootModule,
    package_version_strings,
    sabi_types::VersionStrings,
    std_types::{ROption, RResult, RSlice, RStr, RString, RVec},
};

/// The error a skill returns across the ABI: a numeric code and a message.
///
/// Deliberately a struct and not an enum: adding a variant to an enum changes
/// its layout and would make every installed skill incompatible. New kinds of
/// error are new codes.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct SkillError {
    /// One of the `SkillError::*` codes, or a skill's own code (≥ 1000).
    pub code: u32,
    /// What went wrong, for a person to read. Never put private memex text
    /// or secrets here: the host logs it.
    pub message: RString,
}

impl SkillError {
    /// The skill panicked; the SDK caught the panic at the ABI boundary.
    pub const PANIC: u32 = 1;
    /// `init` refused to start the skill.
    pub const INIT_FAILED: u32 = 2;
    /// The input handed to a hook was not acceptable (bad JSON, unknown method, …).
    pub const INVALID_INPUT: u32 = 3;
    /// The skill is running but cannot answer right now.
    pub const UNAVAILABLE: u32 = 4;
    /// The `budget` hook found no trim that makes the prompt fit (seed 003,
    /// contract 3): the message says what is too large.
    pub const DOES_NOT_FIT: u32 = 5;
    /// The first code free for a skill's own errors.
    pub const SKILL_DEFINED: u32 = 1000;

    /// An error with `code` and `message`.
    pub fn new(code: u32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: RString::from(message.into()),
        }
    }

    /// An [`INIT_FAILED`](Self::INIT_FAILED) error.
    pub fn init_failed(message: impl Into<String>) -> Self {
        Self::new(Self::INIT_FAILED, message)
    }

    /// An [`INVALID_INPUT`](Self::INVALID_INPUT) error.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(Self::INVALID_INPUT, message)
    }

    /// The name of a well-known code, for messages.
    pub fn code_name(&self) -> &'static str {
        match self.code {
            Self::PANIC => "panic",
            Self::INIT_FAILED => "init failed",
            Self::INVALID_INPUT => "invalid input",
            Self::UNAVAILABLE => "unavailable",
            Self::DOES_NOT_FIT => "does not fit",
            _ => "error",
        }
    }
}

impl std::fmt::Display for SkillError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (code {}): {}",
            self.code_name(),
            self.code,
            self.message
        )
    }
}

impl std::error::Error for SkillError {}

/// A log level, as a small open set of numbers (not an enum, for the same
/// reason as [`SkillError`]).
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LogLevel(pub u8);

impl LogLevel {
    /// Very detailed tracing.
    pub const TRACE: Self = Self(0);
    /// Debugging detail.
    pub const DEBUG: Self = Self(1);
    /// Normal operation.
    pub const INFO: Self = Self(2);
    /// Something unexpected that the skill handled.
    pub const WARN: Self = Self(3);
    /// Something failed.
    pub const ERROR: Self = Self(4);
}

/// What kind of signal started the cycle a hook runs in (seed 003, contract 2:
/// heartbeats and delegations skip context assembly).
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalKind(pub u8);

impl SignalKind {
    /// A message from the user.
    pub const USER: Self = Self(0);
    /// The periodic heartbeat.
    pub const HEARTBEAT: Self = Self(1);
    /// The memex changed on disk.
    pub const MEMEX_CHANGE: Self = Self(2);
    /// A skill library was added, replaced or removed.
    pub const SKILL_CHANGE: Self = Self(3);
    /// A tool returned output.
    pub const TOOL_OUTPUT: Self = Self(4);
    /// A delegated sub-task returned its result.
    pub const DELEGATION: Self = Self(5);
    /// A task was marked done (seed 001, post-execution): the host calls
    /// the `computed-context` skill's `components` hook with the task as
    /// the focus and a write ticket in the configuration, and the skill
    /// writes back what the task's handoff taught through
    /// [`HostApi::memex_write`]. It returns no component. Added after SDK
    /// 0.2.0's first release: an older skill never receives it.
    pub const TASK_DONE: Self = Self(6);
}

/// Who speaks a prompt component (seed 004).
#[repr(transparent)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Role(pub u8);

impl Role {
    /// System instructions.
    pub const SYSTEM: Self = Self(0);
    /// The user's side.
    pub const USER: Self = Self(1);
    /// The model's side.
    pub const ASSISTANT: Self = Self(2);
    /// A tool result.
    pub const TOOL: Self = Self(3);
}

/// One piece of a prompt contributed by a skill (seed 004: components are
/// assembled in `id` order; skills use the free ids between the static
/// 1000-point slots).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// Position in the prompt.
    pub id: u32,
    /// A stable machine name, e.g. `awareness`.
    pub key: RString,
    /// A human-readable name.
    pub name: RString,
    /// Who speaks it.
    pub role: Role,
    /// The text.
    pub content: RString,
    /// Where the text came from, when the request asked to `explain`:
    /// the memex objects it shows and why (empty otherwise).
    pub sources: RVec<Source>,
    /// What the skill left out, by reason, with counts (for `--explain`).
    pub omitted: RVec<Omitted>,
}

impl Component {
    /// A component with no explanation attached.
    pub fn new(
        id: u32,
        key: impl Into<String>,
        name: impl Into<String>,
        role: Role,
        content: impl Into<String>,
    ) -> Self {
        Self {
            id,
            key: RString::from(key.into()),
            name: RString::from(name.into()),
            role,
            content: RString::from(content.into()),
            sources: RVec::new(),
            omitted: RVec::new(),
        }
    }
}

/// One memex object a component shows, and why (e.g. `foveal`,
/// `semantic 0.83`, `outline`, `ancestor`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The object's id.
    pub id: RString,
    /// Why it is in the text.
    pub reason: RString,
}

/// How many objects a component left out for one reason (the awareness
/// skill says `depth` for what its rules leave out, and `outline`,
/// `foveal`, `semantic` or `ancestor` for what the budget did).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct Omitted {
    /// Why they were left out.
    pub reason: RString,
    /// How many.
    pub count: u32,
}

/// The input of the `components` hook.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct ComponentsRequest<'a> {
    /// The kind of signal the cycle answers.
    pub signal: SignalKind,
    /// The id of the memex object in foveal focus, if any.
    pub focus: ROption<RStr<'a>>,
    /// Tokens the skill's section may use; none means "no limit".
    pub budget_tokens: ROption<u32>,
    /// The skill's configuration table, as JSON (`{}` when there is none).
    pub config_json: RStr<'a>,
    /// The memex, privacy-filtered, borrowed for the call.
    pub memex: &'a crate::memex::MemexView<'a>,
    /// Fill [`Component::sources`] and [`Component::omitted`] (for
    /// `foveal context --explain`); off in the live cycle.
    pub explain: bool,
}

/// What a skill says about itself. Embedded in the library at build time by
/// [`export_skill!`](crate::export_skill).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct Manifest {
    /// The skill's name: lowercase letters, digits and `-`. Unique in a host.
    pub name: RStr<'static>,
    /// The skill crate's version.
    pub version: RStr<'static>,
    /// The version of `foveal-sdk` the skill was built against.
    pub sdk_version: RStr<'static>,
    /// Higher runs first and is listed first (seed 000 `context-skill-list`).
    pub priority: i32,
    /// Names of skills that must be loaded for this one to be called.
    pub dependencies: RSlice<'static, RStr<'static>>,
    /// One line saying what the skill does.
    pub description: RStr<'static>,
    /// The skill's literate source: its README/org/markdown files and `src/`.
    pub source: RStr<'static>,
    /// The prompt component ids the skill's `components` hook fills (seed
    /// 004; see [`crate::prompt`]). Two skills declaring one id is refused
    /// when the second loads. Added in SDK 0.2.0.
    pub component_ids: RSlice<'static, u32>,
}

/// The host's services, handed to a skill's `init`.
///
/// A prefix type: new services are added after the last field, and a skill
/// built against an older host sees them as absent (`None`).
#[repr(C)]
#[derive(StableAbi, Debug)]
#[sabi(kind(Prefix(prefix_ref = HostApiRef)))]
#[sabi(missing_field(option))]
pub struct HostApi {
    /// The version of `foveal-sdk` the host was built against.
    pub sdk_version: RStr<'static>,
    /// Writes one line to the host's log, attributed to `skill`.
    #[sabi(last_prefix_field)]
    pub log: extern "C" fn(level: LogLevel, skill: RStr<'_>, message: RStr<'_>),
    /// Counts the tokens of a text with the model's encoding (cached by
    /// content in the host). Added in SDK 0.2.0 after the prefix: absent
    /// (`None`) in a host that predates it.
    pub count_tokens: extern "C" fn(text: RStr<'_>) -> u32,
    /// Writes to the memex on the skill's behalf, during a call the host
    /// opened for that purpose: `ticket` is the one the host put in the
    /// call's configuration (`"write_ticket"`), `edits_json` the edits
    /// (see [`crate::host::memex_write`]). The host makes each edit with
    /// its memex write API — atomic, byte-preserving, refused when the
    /// file changed — and checks privacy first: no edit touches or goes
    /// under a private object, no privacy tag is added, no private text is
    /// written. The answer is JSON, one result per edit. Outside such a
    /// call every write is refused. Added after `count_tokens`: `None` in
    /// an older host, and an older skill never calls it.
    pub memex_write:
        extern "C" fn(ticket: u64, edits_json: RStr<'_>) -> RResult<RString, SkillError>,
    /// The session whose prompt the hook call running on this thread
    /// renders; none for a one-off prompt or outside a call. A host fact,
    /// never part of the skill's `config_json` (read it with
    /// [`crate::call::session`]). Added in SDK 0.2.2: `None` in an older
    /// host.
    pub call_session: extern "C" fn() -> ROption<RString>,
    /// The time of the hook call running on this thread, with the local
    /// offset from UTC (the host's clock, or the time a test set); the
    /// clock's time outside a call. Read it with [`crate::call::now`].
    /// Added in SDK 0.2.2: `None` in an older host.
    pub call_now: extern "C" fn() -> Now,
}

/// A moment: seconds since the Unix epoch and the local offset from UTC
/// at that moment ([`crate::call::now`]; `date()`, `weekday()` and
/// `Display` read it as a local date and time).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Now {
    /// Seconds since 1970-01-01 00:00 UTC.
    pub unix_seconds: i64,
    /// Seconds east of UTC of the local time (`3600` for UTC+01:00).
    pub utc_offset_seconds: i32,
}

impl std::fmt::Debug for HostApiRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostApiRef")
            .field("sdk_version", &self.sdk_version())
            .finish_non_exhaustive()
    }
}

/// The signature of the `components` hook.
pub type ComponentsFn =
    extern "C" fn(request: &ComponentsRequest<'_>) -> RResult<RVec<Component>, SkillError>;
/// The signature of the `redact` hook.
pub type RedactFn = extern "C" fn(text: RStr<'_>) -> RResult<RString, SkillError>;
/// The signature of the `invoke` hook: a named method with JSON arguments,
/// returning JSON. For small, rarely-called, evolving calls (tools, config).
pub type InvokeFn =
    extern "C" fn(method: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, SkillError>;
/// The signature of the `prefix` hook (seed 003, contract 1).
pub type PrefixFn = extern "C" fn(
    request: &crate::prompt::PrefixRequest<'_>,
) -> RResult<crate::prompt::Prefix, SkillError>;
/// The signature of the `budget` hook (seed 003, contract 3).
pub type BudgetFn = extern "C" fn(
    request: &crate::prompt::BudgetRequest<'_>,
) -> RResult<crate::prompt::BudgetPlan, SkillError>;
/// One tool a skill offers the model (the `tools` hook).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct ToolDecl {
    /// Its name: letters, digits, `_` and `-`, at most 64 bytes, unique
    /// among every tool the host offers.
    pub name: RString,
    /// One line: what it does (the system prompt's tool belt shows it).
    pub description: RString,
    /// The JSON schema of its arguments, as JSON text (an object schema).
    pub parameters_json: RString,
    /// `read`, `write`, `terminal` or `dangerous`: what the execution
    /// pattern decides on (a dangerous tool may need the user's
    /// confirmation; a terminal one ends the tool loop).
    pub category: RString,
}

impl ToolDecl {
    /// A declaration.
    pub fn new(name: &str, description: &str, parameters_json: &str, category: &str) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters_json: parameters_json.into(),
            category: category.into(),
        }
    }
}

/// The signature of the `tools` hook: the tools the skill offers now.
pub type ToolsFn = extern "C" fn() -> RResult<RVec<ToolDecl>, SkillError>;
/// The signature of the `call_tool` hook: runs tool `name` with arguments
/// as JSON text; the text returned is the tool's result for the model.
pub type CallToolFn =
    extern "C" fn(name: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, SkillError>;
/// The signature of the `run_tool` hook: runs the tool the request names,
/// lent the memex and the focus; the text returned is the tool's result
/// for the model.
pub type RunToolFn = extern "C" fn(request: &ToolCallRequest<'_>) -> RResult<RString, SkillError>;

/// The input of the `run_tool` hook: which tool, its arguments, and what
/// the tool may read — the memex view and the focus of the cycle that
/// called it, and the skill's configuration.
///
/// Borrowed for the call, like [`ComponentsRequest`]: copy out what you
/// need; nothing here outlives the call. The view is the same
/// privacy-filtered view the `components` hook gets (no byte of a
/// private object is in it). What the tool returns goes to the model as
/// the tool's result — as data, never as the user's words — after the
/// host's privacy gate.
///
/// Added after the prefix (SDK 0.2.1): a library built before it has no
/// `run_tool` and keeps its `call_tool(name, args_json)`, which the host
/// still calls. A field added here later would change the layout: new
/// inputs come as a new hook instead (see `docs/skill-abi.md`).
#[repr(C)]
#[derive(StableAbi, Debug, Clone, Copy)]
pub struct ToolCallRequest<'a> {
    /// The tool's name (one the skill's `tools` hook declared).
    pub name: RStr<'a>,
    /// Its arguments as JSON text (an object, checked against nothing: the
    /// model wrote it, so validate it).
    pub args_json: RStr<'a>,
    /// The id of the memex object in foveal focus, if any.
    pub focus: ROption<RStr<'a>>,
    /// The skill's configuration table (`[skills.<name>]` in
    /// `foveal.toml`), as JSON (`{}` when there is none).
    pub config_json: RStr<'a>,
    /// The memex, privacy-filtered, borrowed for the call.
    pub memex: &'a crate::memex::MemexView<'a>,
}

/// The signature of `init`.
pub type InitFn = extern "C" fn(host: HostApiRef) -> RResult<(), SkillError>;

/// The root module every skill library exports.
///
/// (The field types repeat the `*Fn` aliases above literally: the
/// `StableAbi` derive reads function-pointer types from the syntax.)
///
/// A prefix type: hooks added in later SDK versions go after the last field,
/// and a library built before them reports them as absent. The hooks are all
/// optional; a skill fills in the ones it implements, and the host derives the
/// list of hooks shown by `foveal skill-list` from which are present.
#[repr(C)]
#[derive(StableAbi, Debug)]
#[sabi(kind(Prefix(prefix_ref = SkillModRef)))]
#[sabi(missing_field(option))]
pub struct SkillMod {
    /// What the skill says about itself.
    pub manifest: Manifest,
    /// Called once after loading, before any hook. An error refuses the library.
    pub init: extern "C" fn(host: HostApiRef) -> RResult<(), SkillError>,
    /// Contributes prompt components.
    pub components: Option<
        extern "C" fn(request: &ComponentsRequest<'_>) -> RResult<RVec<Component>, SkillError>,
    >,
    /// Removes what must not leave the process from a text.
    pub redact: Option<extern "C" fn(text: RStr<'_>) -> RResult<RString, SkillError>>,
    /// Answers a named method with JSON.
    #[sabi(last_prefix_field)]
    pub invoke: Option<
        extern "C" fn(method: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, SkillError>,
    >,
    /// Builds the system-prompt prefix, cached (seed 003, contract 1).
    /// Added in SDK 0.2.0, after the prefix: absent in older libraries.
    pub prefix: Option<
        extern "C" fn(
            request: &crate::prompt::PrefixRequest<'_>,
        ) -> RResult<crate::prompt::Prefix, SkillError>,
    >,
    /// Plans the trimming of a prompt over its budget (seed 003, contract
    /// 3). Added in SDK 0.2.0, after the prefix.
    pub budget: Option<
        extern "C" fn(
            request: &crate::prompt::BudgetRequest<'_>,
        ) -> RResult<crate::prompt::BudgetPlan, SkillError>,
    >,
    /// The tools the skill offers the model. Added after the prefix:
    /// absent in libraries built before it.
    pub tools: Option<extern "C" fn() -> RResult<RVec<ToolDecl>, SkillError>>,
    /// Runs one of the skill's tools, by name and arguments only. Added
    /// after the prefix; superseded by `run_tool`, which also lends the
    /// memex and the focus. The host calls it when `run_tool` is absent.
    pub call_tool:
        Option<extern "C" fn(name: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, SkillError>>,
    /// Runs one of the skill's tools, lent the memex view, the focus and
    /// the skill's configuration ([`ToolCallRequest`]). Added in SDK
    /// 0.2.1, after `call_tool`: absent (`None`) in a library built with
    /// an older SDK, which the host then calls through `call_tool`.
    pub run_tool:
        Option<extern "C" fn(request: &ToolCallRequest<'_>) -> RResult<RString, SkillError>>,
}

impl SkillMod {
    /// The names of the hooks, in the order of the fields.
    pub const HOOK_NAMES: [&'static str; 8] = [
        "components",
        "redact",
        "invoke",
        "prefix",
        "budget",
        "tools",
        "call_tool",
        "run_tool",
    ];
}

impl SkillModRef {
    /// Which hooks the module fills, in the order of
    /// [`SkillMod::HOOK_NAMES`] (a hook added after a library was built
    /// is absent).
    pub fn hooks_present(&self) -> [bool; 8] {
        [
            self.components().is_some(),
            self.redact().is_some(),
            self.invoke().is_some(),
            self.prefix().flatten().is_some(),
            self.budget().flatten().is_some(),
            self.tools().flatten().is_some(),
            self.call_tool().flatten().is_some(),
            self.run_tool().flatten().is_some(),
        ]
    }

    /// The hooks the module fills, by name (as `foveal skill-list` shows
    /// them).
    pub fn hook_names(&self) -> Vec<&'static str> {
        SkillMod::HOOK_NAMES
            .into_iter()
            .zip(self.hooks_present())
            .filter_map(|(name, present)| present.then_some(name))
            .collect()
    }
}

impl std::fmt::Debug for SkillModRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillModRef")
            .field("manifest", &self.manifest())
            .finish_non_exhaustive()
    }
}

impl RootModule for SkillModRef {
    declare_root_module_statics! {SkillModRef}
    const BASE_NAME: &'static str = "foveal_skill";
    const NAME: &'static str = "foveal skill";
    // The SDK's own version: a library built against an SDK with another
    // major version (or, before 1.0, a newer minor) is refused at load.
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
