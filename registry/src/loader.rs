//! Loading skill libraries: shadow copies, ABI checks, init, and refusals.
//!
//! What a prototype of this loader measured (DESIGN.md, "Hot reload") decides
//! its shape:
//!
//! - `RootModule::load_from_file` caches the first module of a type for the
//!   whole process, so it cannot reload. We use `RawLibrary::load_at` +
//!   `lib_header_from_raw_library` + `init_root_module` on each build.
//! - `dlopen` hands back the already-loaded handle for a path (and for a file
//!   it has mapped before). Each build is therefore copied and the copy is
//!   loaded under a unique shadow name `<stem>-<pid>-<seq>.<ext>`. On Linux
//!   the copy is an in-memory file (`memfd_create`) and the shadow name a
//!   symlink to it, so a reload writes nothing to disk; elsewhere the copy is
//!   a file. The copy also means the library in the plugins folder can be
//!   replaced, or even overwritten in place, without touching the code the
//!   host is running. The kernel makes the copy (`copy_file_range` or
//!   `sendfile`), and only of the bytes the dynamic loader maps: up to the
//!   end of the last segment, not the symbol table and section headers
//!   after it (about a quarter of a release build). Start-up is mostly this
//!   copy, so it matters.
//! - Libraries are never closed: abi_stable keeps process-wide layout state,
//!   and unloading a library whose layout changed crashed the prototype. Each
//!   load therefore leaks the library's mapping; [`Loader`] caps the number of
//!   loads per process.
//!
//! Before any of that, the file must be one only the user (or root) can
//! change ([`crate::trust`]): the check is made on the descriptor the copy is
//! read from, so the file judged is the file copied. With
//! `plugins.require_trusted`, the whole file is copied (not only what is
//! mapped) and the copy is hashed: the SHA-256 equals `sha256sum FILE`, and
//! what is mapped is exactly what was hashed, whatever happens to the file
//! afterwards. Without it nothing is hashed.
//!
//! Loading is two-phase. [`Loader::open`] maps the library, checks it is a
//! foveal skill built against a compatible SDK, and reads its manifest
//! without running any of the skill's code. [`Loader::init`] then runs the
//! skill's `init`. The registry decides in between whether this build should
//! run at all (another library may already provide the same skill).
//!
//! `unsafe` in the runtime lives in this file only.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use abi_stable::library::{LibHeader, LibraryError, RawLibrary, lib_header_from_raw_library};
use abi_stable::std_types::{RErr, ROk};
use foveal_cell::proto::load_failed;
use foveal_sdk::{SkillError, SkillModRef};

use crate::host_api;
use crate::trust::{AllowList, Sha256, Unsafe};

/// Why a library was not loaded. Every variant names the file; the text of
/// [`LoadError::reason`] is what `foveal skill-list` shows after `refused:`.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read or copied.
    #[error("{}: cannot read the library: {source}", path.display())]
    Io {
        /// The library.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The library, or the folder it is in, could be changed by someone
    /// other than the user or root.
    #[error("{}", unsafe_text(path, fault))]
    Unsafe {
        /// The library.
        path: PathBuf,
        /// The library or its folder, and what is wrong with it.
        fault: Unsafe,
    },
    /// `plugins.require_trusted` is on and the library's digest is not in
    /// `plugins.trusted`.
    #[error("{}: untrusted: {sha256} not in plugins.trusted; run foveal skill trust {}", path.display(), path.display())]
    Untrusted {
        /// The library.
        path: PathBuf,
        /// The digest of the whole file, as `sha256sum` prints it.
        sha256: Sha256,
    },
    /// Not a regular file: a FIFO, a device, a socket (or a link to one).
    #[error("{}: not a regular file (a FIFO, device or socket?); skipped", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// The file ends before its own headers say it should.
    #[error("{}: truncated library: {len} bytes, but its ELF header needs at least {needed}; was it still being written? Install by writing to a temporary name and renaming", path.display())]
    Truncated {
        /// The library.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// The size its headers require.
        needed: u64,
    },
    /// The dynamic loader refused the file.
    #[error("{}: not a loadable library: {message}", path.display())]
    Open {
        /// The library.
        path: PathBuf,
        /// What the dynamic loader said.
        message: String,
    },
    /// The library loads but exports no abi_stable root module.
    #[error("{}: not a foveal skill: the library exports no skill root module (was it built with `foveal_sdk::export_skill!`?)", path.display())]
    NotASkill {
        /// The library.
        path: PathBuf,
    },
    /// The library was built against an SDK whose version the host cannot use.
    #[error("{}: built against an incompatible foveal-sdk: the host expects {expected}, the library has {found}; rebuild the skill against foveal-sdk {expected}", path.display())]
    IncompatibleSdk {
        /// The library.
        path: PathBuf,
        /// The host's SDK version.
        expected: String,
        /// The library's SDK version.
        found: String,
    },
    /// The library was built against another abi_stable version.
    #[error("{}: built against an incompatible abi_stable: {message}", path.display())]
    IncompatibleAbiStable {
        /// The library.
        path: PathBuf,
        /// What abi_stable said.
        message: String,
    },
    /// The root module's layout differs from the host's.
    #[error("{}: incompatible skill ABI layout: {details}; rebuild the skill against this host's foveal-sdk", path.display())]
    Layout {
        /// The library.
        path: PathBuf,
        /// The first differences abi_stable reported, naming the fields.
        details: String,
    },
    /// The manifest is unusable (bad name, say).
    #[error("{}: invalid skill manifest: {reason}", path.display())]
    InvalidManifest {
        /// The library.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The skill declares a prompt component id that a serving skill
    /// already declared (seed 004: two components cannot share an id).
    #[error("{}: skill `{skill}` declares prompt component {id}, which {holder}; two components cannot share an id: give one of them a free id", path.display())]
    ComponentConflict {
        /// The library.
        path: PathBuf,
        /// The skill's name.
        skill: String,
        /// The id both claim.
        id: u32,
        /// Who holds it, as a phrase (`skill `x` already declares`).
        holder: String,
    },
    /// Another library in the same folder already provides this skill.
    #[error("{}: duplicate skill `{skill}`: {} already provides it; remove one of the two", path.display(), by.display())]
    Duplicate {
        /// The library.
        path: PathBuf,
        /// The skill's name.
        skill: String,
        /// The library that provides it.
        by: PathBuf,
    },
    /// The skill's `init` returned an error.
    #[error("{}: skill `{skill}` failed to initialise: {message}", path.display())]
    InitFailed {
        /// The library.
        path: PathBuf,
        /// The skill's name.
        skill: String,
        /// The skill's error message.
        message: String,
    },
    /// The skill's `init` panicked.
    #[error("{}: skill `{skill}` panicked in init: {message}", path.display())]
    InitPanicked {
        /// The library.
        path: PathBuf,
        /// The skill's name.
        skill: String,
        /// The panic message.
        message: String,
    },
    /// Hooks of this skill hung past their deadline too often in this
    /// process: each left a thread stuck in its code.
    #[error("{}: skill `{skill}` is not loaded again: {count} of its hook calls did not return in time (plugins.hook_timeout_ms) and were abandoned in this process; fix the skill and restart the host", path.display())]
    Hung {
        /// The library.
        path: PathBuf,
        /// The skill.
        skill: String,
        /// Abandoned calls.
        count: u32,
    },
    /// `isolation = "in-process"` for a drop-in library whose build is not
    /// pinned in `plugins.trusted`.
    #[error("{}: not run in the host's process: [skills.{skill}] says isolation = \"in-process\", which gives a library all your rights, and this build ({sha256}) is not pinned in plugins.trusted; if you trust this very file, run foveal skill trust {}", path.display(), path.display())]
    NotPinned {
        /// The library.
        path: PathBuf,
        /// The skill its table names.
        skill: String,
        /// The digest of the build.
        sha256: Sha256,
    },
    /// The library should run in a cell, and no cell can confine it here.
    #[error("{}: not run: it should run confined in a cell, and {reason}; a skill is never run unconfined by default. To run it in foveal's own process anyway, with your rights (your files, your keys), add `isolation = \"in-process\"` to its [skills.{skill}] table and pin this build: foveal skill trust {}", path.display(), path.display())]
    Unconfined {
        /// The library.
        path: PathBuf,
        /// The skill's name, as far as the file name says.
        skill: String,
        /// Why there is no cell.
        reason: String,
    },
    /// This process has mapped as many bytes of libraries as it may.
    #[error("{}: not loaded: this host has already mapped {loaded} bytes of skill libraries, and this build would pass the cap of {max} (plugins.max_load_mib); loaded code is never unloaded: restart the host to load more", path.display())]
    ByteLimit {
        /// The library.
        path: PathBuf,
        /// Bytes mapped so far.
        loaded: u64,
        /// The cap.
        max: u64,
    },
    /// This process has loaded as many libraries as it may.
    #[error("{}: not loaded: this host has already loaded {max} libraries (plugins.max_loads), and loaded code is never unloaded; restart the host to load more", path.display())]
    LoadLimit {
        /// The library.
        path: PathBuf,
        /// The limit.
        max: u32,
    },
}

/// `<library>: <folder> is …` when the folder is at fault, else
/// `<library> is …`: the path that needs the fix comes first in the reason.
fn unsafe_text(path: &Path, fault: &Unsafe) -> String {
    if fault.path == path {
        fault.to_string()
    } else {
        format!("{}: {fault}", path.display())
    }
}

impl LoadError {
    /// The library the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Self::Io { path, .. }
            | Self::Unsafe { path, .. }
            | Self::Untrusted { path, .. }
            | Self::Truncated { path, .. }
            | Self::Open { path, .. }
            | Self::NotASkill { path }
            | Self::NotAFile { path }
            | Self::IncompatibleSdk { path, .. }
            | Self::IncompatibleAbiStable { path, .. }
            | Self::Layout { path, .. }
            | Self::InvalidManifest { path, .. }
            | Self::Duplicate { path, .. }
            | Self::ComponentConflict { path, .. }
            | Self::InitFailed { path, .. }
            | Self::InitPanicked { path, .. }
            | Self::LoadLimit { path, .. }
            | Self::ByteLimit { path, .. }
            | Self::Unconfined { path, .. }
            | Self::NotPinned { path, .. }
            | Self::Hung { path, .. } => path,
        }
    }

    /// The status `foveal skill-list` shows: `untrusted: …` for a library
    /// not on the allow-list, `refused: <reason>` for every other refusal.
    pub fn status(&self) -> String {
        match self {
            Self::Untrusted { .. } => self.reason(),
            _ => format!("refused: {}", self.reason()),
        }
    }

    /// The error without the leading path: what `skill-list` shows after
    /// `refused: `, beside the file column. An [`Unsafe`](Self::Unsafe)
    /// refusal starts with the path it is about (the library or its folder).
    pub fn reason(&self) -> String {
        let full = self.to_string();
        let prefix = format!("{}: ", self.path().display());
        full.strip_prefix(&prefix)
            .map(str::to_owned)
            .unwrap_or(full)
    }
}

/// What a skill library says about itself, copied out of the library.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkillInfo {
    /// Unique name.
    pub name: String,
    /// The skill crate's version.
    pub version: String,
    /// The SDK version it was built against.
    pub sdk_version: String,
    /// Higher first.
    pub priority: i32,
    /// Skills it needs.
    pub dependencies: Vec<String>,
    /// The hooks it implements.
    pub hooks: Vec<&'static str>,
    /// One line.
    pub description: String,
    /// The prompt component ids its `components` hook fills (seed 004).
    pub component_ids: Vec<u32>,
}

/// Identifies one build of a file on disk, so that repeated notifications
/// about the same file do not load it twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    len: u64,
    modified: Option<std::time::SystemTime>,
    #[cfg(unix)]
    dev: u64,
    #[cfg(unix)]
    ino: u64,
}

impl FileIdentity {
    /// The identity of the file at `path` now.
    pub fn of(path: &Path) -> std::io::Result<Self> {
        Ok(Self::of_metadata(&fs::metadata(path)?))
    }

    /// The identity of the file open as `file`.
    pub fn of_file(file: &fs::File) -> std::io::Result<Self> {
        Ok(Self::of_metadata(&file.metadata()?))
    }

    fn of_metadata(meta: &fs::Metadata) -> Self {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt as _;
        Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            #[cfg(unix)]
            dev: meta.dev(),
            #[cfg(unix)]
            ino: meta.ino(),
        }
    }
}

/// A library that passed every check but whose `init` has not run yet.
#[derive(Debug, Clone)]
pub struct Opened {
    /// The library in the plugins folder.
    pub path: PathBuf,
    /// The build it was read from.
    pub identity: FileIdentity,
    /// The manifest.
    pub info: SkillInfo,
    backend: Backend,
    opened_in: Duration,
}

impl Opened {
    /// Where its code runs.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }
}

impl Backend {
    /// How `skill-list` says where it runs: `cell: no files, no network,
    /// 256 MiB` or `in-process`.
    pub fn describe(&self) -> String {
        match self {
            Self::InProcess(_) => crate::isolation::describe(
                crate::isolation::Where::InProcess,
                &crate::isolation::SkillIsolation::default(),
            ),
            Self::Cell(cell, _) => {
                let options = cell.options();
                let granted = crate::isolation::SkillIsolation {
                    isolation: Some(crate::isolation::Where::Cell),
                    memory_mib: options.memory_mib,
                    allow_network: options.grants.network,
                    allow_read: options.grants.read.clone(),
                };
                let mut text = crate::isolation::describe(crate::isolation::Where::Cell, &granted);
                let missing = crate::isolation::ungranted(&cell.manifest().needs, &granted);
                if !missing.is_empty() {
                    text.push_str("; ");
                    text.push_str(&missing.join("; "));
                }
                text
            }
        }
    }
}

/// Where a loaded skill's code runs.
#[derive(Debug, Clone)]
pub enum Backend {
    /// Mapped into the host's process: its root module. Valid for the life
    /// of the process: libraries are never closed.
    InProcess(SkillModRef),
    /// In a cell of its own ([`foveal_cell`]), and how long its `init`
    /// may take.
    Cell(Arc<foveal_cell::Cell>, Duration),
}

/// How to start a library in a cell ([`Loader::open_in_cell`]).
#[derive(Debug, Clone)]
pub struct CellPlan {
    /// The `foveal-cell` executable.
    pub exe: PathBuf,
    /// What its cell may allocate.
    pub memory_mib: u32,
    /// What its cell may read, and the network.
    pub grants: foveal_cell::Grants,
    /// Start as on a kernel without Landlock (tests).
    pub simulate_no_landlock: bool,
    /// How long `init` may take.
    pub init_timeout: Duration,
}

/// A skill library that is loaded and initialised, ready to be called.
#[derive(Debug)]
pub struct Loaded {
    /// The library in the plugins folder.
    pub path: PathBuf,
    /// The build it was read from.
    pub identity: FileIdentity,
    /// The manifest.
    pub info: SkillInfo,
    /// Where its code runs.
    pub backend: Backend,
    /// From the start of the copy to the end of `init`.
    pub load_time: Duration,
}

impl Loaded {
    /// The embedded literate source.
    pub fn source(&self) -> &str {
        match &self.backend {
            Backend::InProcess(module) => module.manifest().source.as_str(),
            Backend::Cell(cell, _) => &cell.manifest().source,
        }
    }

    /// The root module, when the library is mapped in this process.
    pub fn module(&self) -> Option<&SkillModRef> {
        match &self.backend {
            Backend::InProcess(module) => Some(module),
            Backend::Cell(..) => None,
        }
    }

    /// The cell, when the skill runs in one.
    pub fn cell(&self) -> Option<&Arc<foveal_cell::Cell>> {
        match &self.backend {
            Backend::InProcess(_) => None,
            Backend::Cell(cell, _) => Some(cell),
        }
    }
}

/// Loads skill libraries through shadow copies. One per process is enough;
/// it counts loads against a cap because loaded code is never unloaded.
#[derive(Debug)]
pub struct Loader {
    shadow_dir: PathBuf,
    seq: AtomicU64,
    loads: AtomicU32,
    max_loads: u32,
    /// Bytes of library copies mapped so far (never unmapped), and the cap.
    bytes: AtomicU64,
    max_bytes: AtomicU64,
    allow: AllowList,
    components: ComponentPolicy,
}

/// The rules for the prompt component ids a skill declares in its
/// manifest (`component_ids`, seed 004). The loader refuses a manifest that
/// breaks [`check_declared`](Self::check_declared); the registry refuses a
/// skill that declares an id [`reserved_for`](Self::reserved_for) another.
///
/// What the rules are is the prompt's business, not the loader's: the host
/// hands them in ([`Loader::with_component_policy`],
/// `Registry::with_policy`). The `Default` is seed 004's rules
/// ([`SEED_POLICY`], from the ids the SDK publishes), so that a loader or
/// registry built without one holds skills to what the host does.
#[derive(Debug, Clone, Copy)]
pub struct ComponentPolicy {
    /// Checks the ids one manifest declares; the error is the reason the
    /// library is refused as an invalid manifest.
    pub check_declared: fn(&[u32]) -> Result<(), String>,
    /// The skill an id is kept for, if any: another skill declaring it is
    /// refused.
    pub reserved_for: fn(u32) -> Option<&'static str>,
}

/// Seed 004's component-id rules, from the ids the SDK publishes
/// ([`foveal_sdk::prompt::ids`]): an id from 1 to the last slot, none of
/// the ones the host fills, each once; 2000 kept for the skill the host
/// asks for the context section. The host builds its registries with
/// this policy (`prompt::components::POLICY` is it), and it is the
/// `Default`.
pub const SEED_POLICY: ComponentPolicy = ComponentPolicy {
    check_declared,
    reserved_for,
};

impl Default for ComponentPolicy {
    fn default() -> Self {
        SEED_POLICY
    }
}

/// Checks the ids a skill declares in its manifest; the error is the
/// reason the manifest is refused.
pub fn check_declared(declared: &[u32]) -> Result<(), String> {
    use foveal_sdk::prompt::ids;
    for (i, &id) in declared.iter().enumerate() {
        if id > ids::MAX {
            return Err(format!(
                "component id {id} is out of range; prompt component ids go from 1 to {}",
                ids::MAX
            ));
        }
        if ids::HOST_FILLED.contains(&id) {
            let key = match id {
                ids::SYSTEM_PROMPT => "system_prompt",
                ids::LOGS => "logs",
                ids::CONVERSATION_HISTORY => "conversation_history",
                ids::PENDING_EVENT => "pending_event",
                ids::TOOL_RESULT => "tool_result",
                _ => "?",
            };
            return Err(format!(
                "component id {id} ({key}) is filled by the host; declare a free id between the static ones (e.g. {})",
                id + 1
            ));
        }
        if declared[..i].contains(&id) {
            return Err(format!("component id {id} is declared twice"));
        }
    }
    Ok(())
}

/// The skill the host reserves `id` for, if any: the context section
/// (2000) is asked of the `awareness` skill by name.
pub fn reserved_for(id: u32) -> Option<&'static str> {
    use foveal_sdk::prompt::ids;
    (id == ids::SEMANTIC_MEMORIES).then_some(ids::CONTEXT_SKILL)
}

/// The default cap on the bytes of libraries one process maps (1 GiB):
/// each load keeps a copy of its library for the life of the process.
pub const DEFAULT_MAX_LOADED_BYTES: u64 = 1 << 30;

impl Loader {
    /// A loader that puts shadow copies in `shadow_dir` (created if needed)
    /// and loads at most `max_loads` libraries, of any content (see
    /// [`with_allow_list`](Self::with_allow_list)). Shadow files left by
    /// processes that no longer run are removed.
    ///
    /// The shadow folder follows the rule of plugin folders
    /// ([`crate::trust`]): where a copy is written to disk, whoever could
    /// write there could swap it before it is mapped.
    pub fn new(shadow_dir: PathBuf, max_loads: u32) -> std::io::Result<Self> {
        fs::create_dir_all(&shadow_dir)?;
        if let Err(fault) = crate::trust::check_path(&shadow_dir)? {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                fault.to_string(),
            ));
        }
        clean_stale_shadows(&shadow_dir);
        Ok(Self {
            shadow_dir,
            seq: AtomicU64::new(0),
            loads: AtomicU32::new(0),
            max_loads,
            bytes: AtomicU64::new(0),
            max_bytes: AtomicU64::new(DEFAULT_MAX_LOADED_BYTES),
            allow: AllowList::Any,
            components: ComponentPolicy::default(),
        })
    }

    /// Caps the bytes of library copies this loader maps at `bytes`.
    pub fn set_max_bytes(&self, bytes: u64) {
        self.max_bytes.store(bytes.max(1), Ordering::Relaxed);
    }

    /// The bytes of library copies mapped so far, and the cap.
    pub fn loaded_bytes(&self) -> (u64, u64) {
        (
            self.bytes.load(Ordering::Relaxed),
            self.max_bytes.load(Ordering::Relaxed),
        )
    }

    /// The same loader, running only the builds `allow` allows. With
    /// [`AllowList::Only`] every library is copied whole and hashed.
    pub fn with_allow_list(mut self, allow: AllowList) -> Self {
        self.allow = allow;
        self
    }

    /// The same loader, holding manifests to `policy`'s component-id rules
    /// (by default the prompt's: [`ComponentPolicy`]).
    pub fn with_component_policy(mut self, policy: ComponentPolicy) -> Self {
        self.components = policy;
        self
    }

    /// The component-id rules this loader holds manifests to.
    pub fn component_policy(&self) -> &ComponentPolicy {
        &self.components
    }

    /// The folder shadow copies go to.
    pub fn shadow_dir(&self) -> &Path {
        &self.shadow_dir
    }

    /// How many libraries this loader has mapped.
    pub fn loads(&self) -> u32 {
        self.loads.load(Ordering::Relaxed)
    }

    /// Maps the library at `path` through a fresh shadow copy and checks that
    /// it is a foveal skill built against a compatible SDK. Runs none of the
    /// skill's code but the library's static initialisers and the root
    /// module constructor.
    ///
    /// The file must pass the ownership rule ([`crate::trust`]) and, when
    /// the loader has an allow-list, be on it; neither check looks at the
    /// folder (the registry checks the folders it scans).
    pub fn open(&self, path: &Path) -> Result<Opened, LoadError> {
        self.open_allowing(path, &self.allow)
    }

    /// [`open`](Self::open) holding the build to `allow` instead of this
    /// loader's allow-list: a drop-in skill the user moved in-process runs
    /// only as the build they pinned (`plugins.trusted`), hashed from the
    /// copy that is mapped.
    pub fn open_allowing(&self, path: &Path, allow: &AllowList) -> Result<Opened, LoadError> {
        let started = Instant::now();
        let (identity, copy, copied, shadow) = self.checked_copy(path, true, allow)?;
        self.map_in_process(path, identity, copy, copied, &shadow, started)
    }

    /// Checks the library at `path` as [`open`](Self::open) does and
    /// starts it in a cell ([`foveal_cell`]) on `plan`: the copy is a file
    /// in the shadow folder that the cell, and only it, may read; nothing
    /// of the library is mapped in this process. The cell confines itself
    /// before it loads the library, so its constructors run inside.
    pub fn open_in_cell(&self, path: &Path, plan: &CellPlan) -> Result<Opened, LoadError> {
        let started = Instant::now();
        let (identity, copy, _, _) = self.checked_copy(path, false, &self.allow)?;
        let library = copy.keep();
        let options = foveal_cell::CellOptions {
            exe: plan.exe.clone(),
            library: library.clone(),
            origin: path.to_owned(),
            memory_mib: plan.memory_mib,
            grants: plan.grants.clone(),
            simulate_no_landlock: plan.simulate_no_landlock,
        };
        let cell = match foveal_cell::Cell::start(options, host_api::host_api()) {
            Ok(cell) => cell,
            Err(error) => {
                let _ = fs::remove_file(&library);
                return Err(cell_error(path, error));
            }
        };
        let m = cell.manifest();
        let info = check_info(
            path,
            SkillInfo {
                name: m.name.clone(),
                version: m.version.clone(),
                sdk_version: m.sdk_version.clone(),
                priority: m.priority,
                dependencies: m.dependencies.clone(),
                hooks: m.hooks.clone(),
                description: m.description.clone(),
                component_ids: m.component_ids.clone(),
            },
            &self.components,
        )?;
        Ok(Opened {
            path: path.to_owned(),
            identity,
            info,
            backend: Backend::Cell(Arc::new(cell), plan.init_timeout),
            opened_in: started.elapsed(),
        })
    }

    /// The checks every library passes and its private copy: in memory
    /// when `in_memory` allows, else a file in the shadow folder.
    fn checked_copy(
        &self,
        path: &Path,
        in_memory: bool,
        allow: &AllowList,
    ) -> Result<(FileIdentity, ShadowCopy, u64, PathBuf), LoadError> {
        let io = |source| LoadError::Io {
            path: path.to_owned(),
            source,
        };
        // Opened without blocking: a FIFO named `x.so` would otherwise hang
        // the loader (and the watcher thread) in `open` for good.
        let source = {
            use std::os::unix::fs::OpenOptionsExt as _;
            fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .map_err(io)?
        };
        // The descriptor's own metadata: the file judged is the file copied
        // (through a symlink, its target), with no window to swap it.
        let meta = source.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(LoadError::NotAFile {
                path: path.to_owned(),
            });
        }
        crate::trust::check(path, &meta).map_err(|fault| LoadError::Unsafe {
            path: path.to_owned(),
            fault,
        })?;
        let identity = FileIdentity::of_metadata(&meta);
        let extent = Extent::of(&source, identity.len).map_err(io)?;
        if identity.len < extent.needed {
            return Err(LoadError::Truncated {
                path: path.to_owned(),
                len: identity.len,
                needed: extent.needed,
            });
        }
        // One copy, made by the kernel (no pass through our memory), of
        // what the dynamic loader maps — or of the whole file when it is to
        // be hashed, so that the digest is `sha256sum`'s; the copy is what
        // is mapped.
        let hashed = allow.is_required();
        let wanted = if hashed { identity.len } else { extent.copied };
        let shadow = self.shadow_path(path);
        let copy = ShadowCopy::of(&source, wanted, &shadow, in_memory).map_err(io)?;
        drop(source);
        let copied = copy.len().map_err(io)?;
        if copied < wanted {
            // Cut short while it was being copied.
            return Err(LoadError::Truncated {
                path: path.to_owned(),
                len: copied,
                needed: extent.needed.max(wanted),
            });
        }
        if hashed {
            // The copy, not the file: nobody else can change it between
            // this check and the mapping.
            let sha256 = copy.sha256().map_err(io)?;
            if !allow.allows(&sha256) {
                return Err(LoadError::Untrusted {
                    path: path.to_owned(),
                    sha256,
                });
            }
        }

        Ok((identity, copy, copied, shadow))
    }

    fn map_in_process(
        &self,
        path: &Path,
        identity: FileIdentity,
        copy: ShadowCopy,
        copied: u64,
        shadow: &Path,
        started: Instant,
    ) -> Result<Opened, LoadError> {
        let io = |source| LoadError::Io {
            path: path.to_owned(),
            source,
        };
        let previous = self.loads.fetch_add(1, Ordering::Relaxed);
        if previous >= self.max_loads {
            self.loads.fetch_sub(1, Ordering::Relaxed);
            return Err(LoadError::LoadLimit {
                path: path.to_owned(),
                max: self.max_loads,
            });
        }
        let max_bytes = self.max_bytes.load(Ordering::Relaxed);
        let before = self.bytes.fetch_add(copied, Ordering::Relaxed);
        if before + copied > max_bytes {
            self.bytes.fetch_sub(copied, Ordering::Relaxed);
            self.loads.fetch_sub(1, Ordering::Relaxed);
            return Err(LoadError::ByteLimit {
                path: path.to_owned(),
                loaded: before,
                max: max_bytes,
            });
        }
        if before < max_bytes / 5 * 4 && before + copied >= max_bytes / 5 * 4 {
            tracing::warn!(target: "foveal::loader",
                loaded_bytes = before + copied,
                max_bytes,
                "loaded skill libraries take 80% of plugins.max_load_mib (loaded code is never unloaded); restart the host before the cap refuses new builds"
            );
        }

        let raw = copy.map().map_err(io)?;
        let raw = raw.map_err(|e| LoadError::Open {
            path: path.to_owned(),
            message: dl_message(&e, shadow, path),
        })?;
        // Never dlclose (see the module docs): the library lives as long as
        // the process.
        let raw: &'static RawLibrary = Box::leak(Box::new(raw));

        // SAFETY: `raw` is leaked above, so the library — and with it every
        // `'static` reference inside the header — stays mapped for the rest
        // of the process, which is what `lib_header_from_raw_library`
        // requires.
        let header: &'static LibHeader =
            unsafe { lib_header_from_raw_library(raw) }.map_err(|e| classify(path, e))?;
        let module = match header.init_root_module::<SkillModRef>() {
            Ok(module) => module,
            // A library built with an earlier SDK has fewer root-module
            // fields than this host's, which abi_stable's check refuses.
            // Checked against that release's layout, it is read through
            // the current type: see `foveal_sdk::compat`.
            Err(error @ LibraryError::AbiInstability(_)) => {
                if foveal_sdk::compat::earlier_layout(header).is_none() {
                    return Err(classify(path, error));
                }
                // SAFETY: the library's root module has the layout of an
                // earlier SDK (just checked), whose fields are the current
                // module's first ones, in order and of the same types (its
                // host API the current one's first fields); the current
                // accessors of the fields added since (`run_tool`) read the
                // field count the library recorded in its prefix metadata
                // and answer `None`, and the library reads the host API's
                // added services (`call_session`, `call_now`) as absent.
                unsafe { header.init_root_module_with_unchecked_layout::<SkillModRef>() }
                    .map_err(|e| classify(path, e))?
            }
            Err(error) => return Err(classify(path, error)),
        };

        let info = read_info(path, &module, &self.components)?;
        Ok(Opened {
            path: path.to_owned(),
            identity,
            info,
            backend: Backend::InProcess(module),
            opened_in: started.elapsed(),
        })
    }

    /// Runs the skill's `init` with the host API. An error or a panic refuses
    /// the library.
    pub fn init(&self, opened: Opened) -> Result<Loaded, LoadError> {
        let started = Instant::now();
        let answer = match &opened.backend {
            Backend::InProcess(module) => (module.init())(host_api::host_api()),
            Backend::Cell(cell, timeout) => match cell.init(*timeout) {
                Ok(answer) => answer,
                Err(error) => RErr(SkillError::new(SkillError::UNAVAILABLE, error.to_string())),
            },
        };
        match answer {
            ROk(()) => Ok(Loaded {
                load_time: opened.opened_in + started.elapsed(),
                path: opened.path,
                identity: opened.identity,
                info: opened.info,
                backend: opened.backend,
            }),
            RErr(error) if error.code == SkillError::PANIC => Err(LoadError::InitPanicked {
                path: opened.path,
                skill: opened.info.name,
                message: error.message.into_string(),
            }),
            RErr(error) => Err(LoadError::InitFailed {
                path: opened.path,
                skill: opened.info.name,
                message: error.message.into_string(),
            }),
        }
    }

    /// [`open`](Self::open) then [`init`](Self::init).
    pub fn load(&self, path: &Path) -> Result<Loaded, LoadError> {
        self.open(path).and_then(|opened| self.init(opened))
    }

    fn shadow_path(&self, path: &Path) -> PathBuf {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "skill".to_owned());
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let ext = std::env::consts::DLL_EXTENSION;
        self.shadow_dir
            .join(format!("{stem}-{}-{seq}.{ext}", std::process::id()))
    }
}

/// Copies the manifest out of the library and checks it, its component ids
/// against `components`.
fn read_info(
    path: &Path,
    module: &SkillModRef,
    components: &ComponentPolicy,
) -> Result<SkillInfo, LoadError> {
    let manifest = module.manifest();
    let name = manifest.name.as_str().to_owned();
    // Hooks added after the prefix are absent (`None`) in older libraries.
    let hooks = module.hook_names();
    let info = SkillInfo {
        name,
        version: manifest.version.as_str().to_owned(),
        sdk_version: manifest.sdk_version.as_str().to_owned(),
        priority: manifest.priority,
        dependencies: manifest
            .dependencies
            .iter()
            .map(|d| d.as_str().to_owned())
            .collect(),
        hooks,
        description: manifest.description.as_str().to_owned(),
        component_ids: manifest.component_ids.as_slice().to_vec(),
    };
    check_info(path, info, components)
}

/// The manifest checks, wherever the manifest was read (in this process or
/// in a cell): the name, and the component ids against `components`.
fn check_info(
    path: &Path,
    info: SkillInfo,
    components: &ComponentPolicy,
) -> Result<SkillInfo, LoadError> {
    if let Err(reason) = check_skill_name(&info.name) {
        return Err(LoadError::InvalidManifest {
            path: path.to_owned(),
            reason: format!("skill name {:?} {reason}", info.name),
        });
    }
    if let Err(reason) = (components.check_declared)(&info.component_ids) {
        return Err(LoadError::InvalidManifest {
            path: path.to_owned(),
            reason,
        });
    }
    Ok(info)
}

/// What a cell that did not start means for its library.
fn cell_error(path: &Path, error: foveal_cell::StartError) -> LoadError {
    use foveal_cell::StartError;
    let path = path.to_owned();
    match error {
        StartError::Spawn { .. } | StartError::Unconfined(_) => LoadError::Unconfined {
            skill: guess_name(&path),
            path,
            reason: error.to_string(),
        },
        StartError::Died(message) => LoadError::Open {
            path,
            message: format!("its cell ended while loading it ({message})"),
        },
        StartError::Load {
            kind,
            message,
            extra,
        } => match kind {
            load_failed::NOT_A_SKILL => LoadError::NotASkill { path },
            load_failed::INCOMPATIBLE_SDK => LoadError::IncompatibleSdk {
                path,
                expected: extra.first().cloned().unwrap_or_default(),
                found: extra.get(1).cloned().unwrap_or_default(),
            },
            load_failed::ABI_STABLE => LoadError::IncompatibleAbiStable { path, message },
            load_failed::LAYOUT => LoadError::Layout {
                path,
                details: summarize_layout_error(&message),
            },
            _ => LoadError::Open { path, message },
        },
    }
}

/// The skill name a library file most likely holds (`libfoveal_skill_x.so`
/// → `x`), for messages before its manifest could be read.
pub fn guess_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = stem
        .strip_prefix(std::env::consts::DLL_PREFIX)
        .unwrap_or(&stem);
    let stem = stem.strip_prefix("foveal_skill_").unwrap_or(stem);
    stem.replace('_', "-")
}

/// A skill name is what users type: `skill-source NAME`. Lowercase ASCII
/// letters, digits, `-` and `_`, starting with a letter, at most 64 bytes.
pub fn check_skill_name(name: &str) -> Result<(), &'static str> {
    let mut chars = name.chars();
    match chars.next() {
        None => return Err("is empty"),
        Some(c) if !c.is_ascii_lowercase() => return Err("must start with a lowercase letter"),
        Some(_) => {}
    }
    if name.len() > 64 {
        return Err("is longer than 64 bytes");
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_') {
        return Err("may contain only lowercase letters, digits, '-' and '_'");
    }
    Ok(())
}

/// Turns abi_stable's error into ours, keeping what a person needs: the
/// versions, or the fields whose layout differs.
fn classify(path: &Path, error: LibraryError) -> LoadError {
    let path = path.to_owned();
    match error {
        LibraryError::GetSymbolError { .. } => LoadError::NotASkill { path },
        LibraryError::IncompatibleVersionNumber {
            expected_version,
            actual_version,
            ..
        } => LoadError::IncompatibleSdk {
            path,
            expected: expected_version.to_string(),
            found: actual_version.to_string(),
        },
        LibraryError::InvalidAbiHeader(header) => LoadError::IncompatibleAbiStable {
            path,
            message: format!("abi_stable header {header:?}"),
        },
        LibraryError::AbiInstability(errors) => LoadError::Layout {
            path,
            details: summarize_layout_error(&errors.to_string()),
        },
        LibraryError::RootModule { err, .. } => LoadError::Open {
            path,
            message: format!("the root module constructor failed: {err}"),
        },
        other => LoadError::Open {
            path,
            message: other.to_string(),
        },
    }
}

/// abi_stable's layout report is long: it prints both full type layouts.
/// Keep what a person needs: the path of fields down to the difference
/// (`inside:` section) and each `Error:` with its expected and found values.
fn summarize_layout_error(report: &str) -> String {
    let lines: Vec<&str> = report.lines().collect();
    let mut problems = Vec::new();
    let mut fields: Vec<String> = Vec::new();
    let mut in_trace = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        if line.ends_with("error(s)inside:") {
            in_trace = true;
            fields.clear();
        } else if line.starts_with("Layout of expected type:") {
            in_trace = false;
        } else if in_trace && let Some(name) = line.strip_prefix("field_name:") {
            fields.push(name.to_owned());
        } else if let Some(kind) = line.strip_prefix("Error:") {
            let value_after = |label: &str| {
                lines[i..]
                    .iter()
                    .position(|l| l.trim() == label)
                    .and_then(|at| lines.get(i + at + 1))
                    .map(|v| v.trim().to_owned())
                    .unwrap_or_default()
            };
            let expected = value_after("Expected:");
            let found = value_after("Found:");
            let place = if fields.is_empty() {
                String::new()
            } else {
                format!(" at field {}", fields.join("."))
            };
            problems.push(format!("{kind}{place}: expected {expected}, found {found}"));
        }
        i += 1;
    }
    if problems.is_empty() {
        report
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .take(3)
            .collect::<Vec<_>>()
            .join(" / ")
    } else {
        problems.truncate(4);
        problems.join("; ")
    }
}

/// The dynamic loader's message, naming the original file rather than the
/// shadow copy.
fn dl_message(error: &LibraryError, shadow: &Path, original: &Path) -> String {
    let text = match error {
        LibraryError::OpenError { err, .. } => err.to_string(),
        other => other.to_string(),
    };
    text.replace(
        &shadow.display().to_string(),
        &original.display().to_string(),
    )
}

/// How much of a library file matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Extent {
    /// The least length the file must have (its ELF headers, tables and
    /// segments): a shorter file is a build still being copied, or cut
    /// short, and is refused.
    needed: u64,
    /// The bytes copied: up to the end of the last segment. What lies after
    /// it (the symbol table, section headers, debug info) is never mapped,
    /// and nothing can read it from a copy whose name is gone, so it is not
    /// copied (a quarter of a release build's bytes).
    copied: u64,
}

impl Extent {
    /// The extent of the library open as `file`, `len` bytes long. A file
    /// that is not ELF (or whose tables cannot be read) is copied whole and
    /// left to the dynamic loader to judge.
    fn of(file: &fs::File, len: u64) -> std::io::Result<Self> {
        let whole = Self {
            needed: 0,
            copied: len,
        };
        let header = read_at_most(file, 0, 64)?;
        let Some(elf) = ElfHeader::parse(&header) else {
            if header.starts_with(b"\x7fELF") {
                // The magic number, then less than a whole header.
                return Ok(Self {
                    needed: 64,
                    ..whole
                });
            }
            return Ok(whole);
        };
        let table_len = elf.phentsize * elf.phnum;
        if table_len > MAX_PROGRAM_HEADERS_BYTES {
            return Ok(Self {
                needed: elf.required_len(),
                copied: len,
            });
        }
        let table = read_at_most(file, elf.phoff, table_len as usize)?;
        let needed = elf
            .required_len()
            .max(elf.segments_end(&table).unwrap_or(0));
        let copied = elf.segments_end(&table).map_or(len, |end| {
            end.max(elf.phoff.saturating_add(table_len)).max(64)
        });
        Ok(Self { needed, copied })
    }
}

/// A program header table larger than this is not read (the format allows
/// 65535 × 56 bytes; real libraries have about ten entries).
const MAX_PROGRAM_HEADERS_BYTES: u64 = 1 << 20;

/// Up to `len` bytes of `file` from `offset` (fewer at its end).
fn read_at_most(file: &fs::File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt as _;
    let mut buf = vec![0; len];
    let mut filled = 0;
    while filled < len {
        match file.read_at(&mut buf[filled..], offset + filled as u64)? {
            0 => break,
            n => filled += n,
        }
    }
    buf.truncate(filled);
    Ok(buf)
}

/// A private copy of a library, to be mapped under a unique shadow name.
///
/// On Linux the copy lives in memory (`memfd_create`) and the shadow name is
/// only a symlink to it: no disk writes on a reload, nothing left behind,
/// and a name `dlopen` has never seen. Where that is unavailable (another
/// OS, or a kernel that forbids executable memfds) the copy is written to
/// the shadow name itself. Either way the name is removed once mapped (the
/// mapping keeps the pages alive), or when the copy is dropped unmapped.
///
/// `std::io::copy` between two files copies inside the kernel
/// (`copy_file_range` or `sendfile`), so the library's bytes never pass
/// through this process's memory.
struct ShadowCopy {
    file: fs::File,
    shadow: PathBuf,
    in_memory: bool,
    /// Left on disk when dropped ([`ShadowCopy::keep`]).
    kept: bool,
}

impl ShadowCopy {
    /// A copy of the first `len` bytes of `source`.
    fn of(source: &fs::File, len: u64, shadow: &Path, in_memory: bool) -> std::io::Result<Self> {
        use std::io::Read as _;
        #[cfg(target_os = "linux")]
        if in_memory
            && let Some(mut memfd) = memfd()
            && std::io::copy(&mut source.take(len), &mut memfd).is_ok()
        {
            return Ok(Self {
                file: memfd,
                shadow: shadow.to_owned(),
                in_memory: true,
                kept: false,
            });
        }
        let mut file = Self::create(shadow)?;
        // `read_at`-free: the source is read from its start again.
        let mut from_start = source.try_clone()?;
        std::io::Seek::rewind(&mut from_start)?;
        std::io::copy(&mut from_start.take(len), &mut file.file)?;
        Ok(file)
    }

    /// An empty copy on disk at `shadow`.
    fn create(shadow: &Path) -> std::io::Result<Self> {
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(shadow)?;
        Ok(Self {
            file,
            shadow: shadow.to_owned(),
            in_memory: false,
            kept: false,
        })
    }

    /// The copy on disk, kept after this value is gone (a cell loads it,
    /// and removes it when it ends).
    fn keep(mut self) -> PathBuf {
        self.kept = true;
        self.shadow.clone()
    }

    /// The copy's length.
    fn len(&self) -> std::io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// The digest of the whole copy.
    fn sha256(&self) -> std::io::Result<Sha256> {
        // `read_at`: the write offset of the copy is left where it is.
        struct ReadAt<'a>(&'a fs::File, u64);
        impl std::io::Read for ReadAt<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                use std::os::unix::fs::FileExt as _;
                let n = self.0.read_at(buf, self.1)?;
                self.1 += n as u64;
                Ok(n)
            }
        }
        Sha256::of_reader(ReadAt(&self.file, 0))
    }

    /// Maps the copy. The outer error is an I/O failure making a name for
    /// it; the inner one is the dynamic loader's answer.
    fn map(mut self) -> std::io::Result<Result<RawLibrary, LibraryError>> {
        if self.in_memory {
            use std::os::fd::AsRawFd as _;
            let target = format!("/proc/self/fd/{}", self.file.as_raw_fd());
            if std::os::unix::fs::symlink(&target, &self.shadow).is_ok() {
                let raw = RawLibrary::load_at(&self.shadow);
                let _ = fs::remove_file(&self.shadow);
                if raw.is_ok() {
                    // Closing the memfd is fine: the mapping keeps its pages.
                    return Ok(raw);
                }
                // Fall through: a kernel may refuse to execute from memfds.
            }
            use std::io::Seek as _;
            self.file.rewind()?;
            let mut on_disk = Self::create(&self.shadow)?;
            std::io::copy(&mut self.file, &mut on_disk.file)?;
            return on_disk.map();
        }
        // The dynamic loader opens the file itself.
        Ok(RawLibrary::load_at(&self.shadow))
    }
}

impl Drop for ShadowCopy {
    fn drop(&mut self) {
        if !self.in_memory && !self.kept {
            let _ = fs::remove_file(&self.shadow);
        }
    }
}

/// An empty anonymous in-memory file, or none if the kernel does not offer
/// one.
#[cfg(target_os = "linux")]
fn memfd() -> Option<fs::File> {
    use std::os::fd::FromRawFd as _;
    // SAFETY: `memfd_create` takes a NUL-terminated name and flags and
    // returns a new file descriptor or -1; it touches no memory of ours.
    let fd = unsafe { libc::memfd_create(c"foveal-skill".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just created above and is owned by nothing else.
    Some(unsafe { fs::File::from_raw_fd(fd) })
}

/// The fields of an ELF file header that say where its tables are.
#[derive(Debug, Clone, Copy)]
struct ElfHeader {
    wide: bool,
    little: bool,
    phoff: u64,
    shoff: u64,
    phentsize: u64,
    phnum: u64,
    shentsize: u64,
    shnum: u64,
}

impl ElfHeader {
    /// The header at the start of `bytes`, if they start one.
    fn parse(bytes: &[u8]) -> Option<Self> {
        if !bytes.starts_with(b"\x7fELF") {
            return None;
        }
        let wide = match *bytes.get(4)? {
            1 => false,
            2 => true,
            _ => return None,
        };
        let little = *bytes.get(5)? == 1;
        let word = |at: usize, size: usize| uint(bytes, at, size, little);
        Some(if wide {
            Self {
                wide,
                little,
                phoff: word(32, 8)?,
                shoff: word(40, 8)?,
                phentsize: word(54, 2)?,
                phnum: word(56, 2)?,
                shentsize: word(58, 2)?,
                shnum: word(60, 2)?,
            }
        } else {
            Self {
                wide,
                little,
                phoff: word(28, 4)?,
                shoff: word(32, 4)?,
                phentsize: word(42, 2)?,
                phnum: word(44, 2)?,
                shentsize: word(46, 2)?,
                shnum: word(48, 2)?,
            }
        })
    }

    /// The least size the file must have: the end of its program header
    /// table, or of its section header table, whichever is later.
    fn required_len(&self) -> u64 {
        let ph_end = self.phoff.saturating_add(self.phentsize * self.phnum);
        let sh_end = self.shoff.saturating_add(self.shentsize * self.shnum);
        ph_end.max(sh_end)
    }

    /// The end of the file bytes of the last segment, from the program
    /// header table `table`; `None` if the table is cut short.
    fn segments_end(&self, table: &[u8]) -> Option<u64> {
        // p_offset and p_filesz: at 8 and 32 (8 bytes each) in a 64-bit
        // entry, at 4 and 16 (4 bytes each) in a 32-bit one.
        let (offset_at, size_at, size) = if self.wide { (8, 32, 8) } else { (4, 16, 4) };
        let entry = usize::try_from(self.phentsize).ok()?;
        if entry < size_at + size {
            return None;
        }
        let mut end = 0u64;
        for i in 0..usize::try_from(self.phnum).ok()? {
            let base = i * entry;
            let offset = uint(table, base + offset_at, size, self.little)?;
            let filesz = uint(table, base + size_at, size, self.little)?;
            end = end.max(offset.saturating_add(filesz));
        }
        Some(end)
    }
}

/// The unsigned integer of `size` bytes (2, 4 or 8) at `at` in `bytes`.
fn uint(bytes: &[u8], at: usize, size: usize, little: bool) -> Option<u64> {
    let raw = bytes.get(at..at.checked_add(size)?)?;
    let mut buf = [0u8; 8];
    if little {
        buf[..size].copy_from_slice(raw);
        Some(u64::from_le_bytes(buf))
    } else {
        buf[8 - size..].copy_from_slice(raw);
        Some(u64::from_be_bytes(buf))
    }
}

/// Removes shadow copies whose process is gone. A shadow file is normally
/// removed right after it is mapped; one is left only if the host died in
/// between.
fn clean_stale_shadows(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = shadow_pid(&name) else {
            continue;
        };
        if pid != std::process::id() && !process_alive(pid) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// The pid in a shadow file name `<stem>-<pid>-<seq>.<ext>`.
fn shadow_pid(name: &str) -> Option<u32> {
    let base = name.rsplit_once('.')?.0;
    let (rest, seq) = base.rsplit_once('-')?;
    seq.parse::<u64>().ok()?;
    rest.rsplit_once('-')?.1.parse().ok()
}

pub use crate::memex::write::process_alive;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shadow_names_carry_the_pid() {
        assert_eq!(shadow_pid("libfoveal_skill_a-1234-7.so"), Some(1234));
        assert_eq!(shadow_pid("with-dashes-in-stem-99-0.so"), Some(99));
        assert_eq!(shadow_pid("README.md"), None);
        assert_eq!(shadow_pid("x-notapid-3.so"), None);
    }

    #[test]
    fn skill_names_are_what_users_can_type() {
        assert!(check_skill_name("token-economics").is_ok());
        assert!(check_skill_name("a1_b").is_ok());
        assert!(check_skill_name("").is_err());
        assert!(check_skill_name("../etc").is_err());
        assert!(check_skill_name("Awareness").is_err());
        assert!(check_skill_name("a/b").is_err());
        assert!(check_skill_name(&"a".repeat(65)).is_err());
    }

    #[test]
    fn elf_length_comes_from_the_header_tables() {
        let mut h = [0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2; // 64-bit
        h[5] = 1; // little endian
        h[32..40].copy_from_slice(&64u64.to_le_bytes()); // phoff
        h[40..48].copy_from_slice(&10_000u64.to_le_bytes()); // shoff
        h[54..56].copy_from_slice(&56u16.to_le_bytes()); // phentsize
        h[56..58].copy_from_slice(&4u16.to_le_bytes()); // phnum
        h[58..60].copy_from_slice(&64u16.to_le_bytes()); // shentsize
        h[60..62].copy_from_slice(&10u16.to_le_bytes()); // shnum
        let elf = ElfHeader::parse(&h).unwrap();
        assert_eq!(elf.required_len(), 10_640);
        // Four 64-bit program headers; the last segment ends at 9_000.
        let mut table = vec![0u8; 4 * 56];
        for (i, (offset, size)) in [(0u64, 800u64), (4096, 4000), (8192, 808), (64, 224)]
            .into_iter()
            .enumerate()
        {
            table[i * 56 + 8..i * 56 + 16].copy_from_slice(&offset.to_le_bytes());
            table[i * 56 + 32..i * 56 + 40].copy_from_slice(&size.to_le_bytes());
        }
        assert_eq!(elf.segments_end(&table), Some(9_000));
        assert_eq!(elf.segments_end(&table[..100]), None, "a cut table");
        assert!(ElfHeader::parse(b"MZ not elf").is_none());
    }

    #[test]
    fn hostile_headers_give_a_size_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lib.so");
        // The magic number and a few bytes: a header cut short.
        fs::write(&path, b"\x7fELF\x02\x01").unwrap();
        let file = fs::File::open(&path).unwrap();
        let extent = Extent::of(&file, 6).unwrap();
        assert_eq!(extent.needed, 64);
        // Table offsets at the end of the address space.
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[32..40].copy_from_slice(&u64::MAX.to_le_bytes()); // phoff
        h[40..48].copy_from_slice(&(u64::MAX - 10).to_le_bytes()); // shoff
        h[54..56].copy_from_slice(&56u16.to_le_bytes());
        h[56..58].copy_from_slice(&u16::MAX.to_le_bytes());
        h[58..60].copy_from_slice(&64u16.to_le_bytes());
        h[60..62].copy_from_slice(&u16::MAX.to_le_bytes());
        fs::write(&path, &h).unwrap();
        let file = fs::File::open(&path).unwrap();
        let extent = Extent::of(&file, 64).unwrap();
        assert_eq!(extent.needed, u64::MAX, "refused as truncated");
    }

    #[test]
    fn a_real_library_is_copied_up_to_its_last_segment() {
        // The test binary itself is an ELF file with section headers after
        // its segments.
        let exe = std::env::current_exe().unwrap();
        let file = fs::File::open(&exe).unwrap();
        let len = file.metadata().unwrap().len();
        let extent = Extent::of(&file, len).unwrap();
        assert!(extent.needed <= len && extent.needed > extent.copied / 2);
        assert!(extent.copied < len, "{extent:?} of {len}");
        let elf = ElfHeader::parse(&read_at_most(&file, 0, 64).unwrap()).unwrap();
        assert_eq!(extent.needed, elf.required_len());
    }
}
