//! The cell's side: confine, load the library, serve its hooks.
//!
//! `foveal-cell` is started by the host with an empty environment, its
//! standard input and output on `/dev/null`, its standard error on a
//! memory file the host reads when the cell dies, and the channel as
//! descriptor 3. It reads the [`Kind::Setup`] frame, confines itself
//! ([`crate::confine`]), and only then loads the library: a constructor
//! in it runs inside the walls. It answers [`Kind::Hello`] with the
//! manifest and serves [`Kind::Call`]s until the channel closes.
//!
//! The skill gets its own [`HostApi`]: a log line becomes a
//! [`Kind::Log`] frame, a token count or a memex write a
//! [`Kind::HostCall`] answered by the host, so a skill author rebuilds
//! nothing.

use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use abi_stable::library::{LibHeader, LibraryError, RawLibrary, lib_header_from_raw_library};
use abi_stable::prefix_type::WithMetadata;
use abi_stable::staticref;
use abi_stable::std_types::{RErr, ROk, RResult, RSlice, RStr, RString};
use foveal_sdk::memex::{FileView, MemexView};
use foveal_sdk::prompt::{BudgetRequest, BudgetSection, PrefixRequest, SectionKind};
use foveal_sdk::{
    ComponentsRequest, HostApi, HostApiRef, LogLevel, SignalKind, SkillError, SkillModRef,
    ToolCallRequest,
};

use crate::answer::AnswerArea;
use crate::confine::{self, Grants};
use crate::proto::{self, hook, host_call, load_failed};
use crate::view::MappedFile;
use crate::wire::{Channel, Frame, Kind, Reader, WireError, Writer};

/// The channel's descriptor in a cell.
pub const CHANNEL_FD: RawFd = 3;

static CHANNEL: OnceLock<Mutex<Channel>> = OnceLock::new();
static IN_CALL: AtomicBool = AtomicBool::new(false);
/// Where large answers go (the host's area, mapped writable here).
static ANSWERS: OnceLock<AnswerArea> = OnceLock::new();

fn channel() -> std::sync::MutexGuard<'static, Channel> {
    CHANNEL
        .get()
        .expect("the channel is set before any hook runs")
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn send(frame: Writer) {
    // A host that is gone ends the cell at the next read.
    let _ = channel().send(&frame.finish(), &[]);
}

/// The cell's entry point: never returns.
pub fn main() -> ! {
    // Two malloc arenas at most, so that their reservations fit the cell's
    // address-space limit (the environment is empty: no MALLOC_ARENA_MAX),
    // and large blocks kept (see below).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt with a documented parameter, before any thread.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        // Memory a hook frees stays the cell's for the next call: without
        // this, a skill that builds a large answer each call (awareness:
        // ~1 MB) had its pages returned and faulted in again every time,
        // the cell's largest cost. Bounded by RLIMIT_DATA all the same.
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 20);
    }
    // SAFETY: the host passes the channel as descriptor 3; nothing else in
    // this process owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(CHANNEL_FD) };
    let mut channel = Channel::new(fd);
    let setup = match channel.recv(None) {
        Ok(frame) if frame.kind == Kind::Setup => frame,
        _ => std::process::exit(2),
    };
    // Mapped before the walls go up; the descriptor is closed at once.
    if let Some(area) = channel
        .take_fd()
        .ok()
        .and_then(|fd| AnswerArea::open(&fd).ok())
    {
        let _ = ANSWERS.set(area);
    }
    let _ = CHANNEL.set(Mutex::new(channel));
    let code = match run(&setup) {
        Ok(()) => 0,
        Err(()) => 3,
    };
    std::process::exit(code)
}

struct Setup {
    library: PathBuf,
    memory_mib: u32,
    grants: Grants,
    simulate_no_landlock: bool,
}

fn read_setup(frame: &Frame) -> Result<Setup, WireError> {
    let mut r = frame.reader();
    let library = PathBuf::from(r.str()?);
    let memory_mib = r.u32()?;
    let network = r.bool()?;
    let n = r.count(4)?;
    let mut read = Vec::with_capacity(n);
    for _ in 0..n {
        read.push(PathBuf::from(r.str()?));
    }
    let simulate_no_landlock = r.bool()?;
    Ok(Setup {
        library,
        memory_mib,
        grants: Grants { read, network },
        simulate_no_landlock,
    })
}

fn fail(kind: u8, message: &str, extra: &[&str]) {
    let mut w = Writer::new(Kind::LoadFailed);
    w.u8(kind).str(message).u32(extra.len() as u32);
    for e in extra {
        w.str(e);
    }
    send(w);
}

fn run(frame: &Frame) -> Result<(), ()> {
    let Ok(setup) = read_setup(frame) else {
        fail(load_failed::OPEN, "malformed setup", &[]);
        return Err(());
    };
    let confinement = match confine::confine(
        &setup.grants,
        &setup.library,
        setup.memory_mib,
        setup.simulate_no_landlock,
    ) {
        Ok(c) => c,
        Err(message) => {
            fail(load_failed::UNCONFINED, &message, &[]);
            return Err(());
        }
    };
    let (module, needs) = match load(&setup.library) {
        Ok(loaded) => loaded,
        Err((kind, message, extra)) => {
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            fail(kind, &message, &extra);
            return Err(());
        }
    };
    hello(&module, confinement, &needs);
    serve(module);
    Ok(())
}

type LoadFailure = (u8, String, Vec<String>);

/// What the library says it needs (`needs` of `export_skill!`), from its
/// `foveal_skill_needs` symbol; none when it has no such symbol.
fn needs(raw: &'static RawLibrary) -> Vec<String> {
    // SAFETY: the symbol, when present, is the function `export_skill!`
    // writes, of exactly this type; the library stays mapped for good.
    let symbol = unsafe { raw.get::<extern "C" fn() -> RStr<'static>>(b"foveal_skill_needs\0") };
    match symbol {
        Ok(f) => (*f)()
            .as_str()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn load(path: &std::path::Path) -> Result<(SkillModRef, Vec<String>), LoadFailure> {
    let raw = RawLibrary::load_at(path).map_err(|e| {
        let text = match &e {
            LibraryError::OpenError { err, .. } => err.to_string(),
            other => other.to_string(),
        };
        (load_failed::OPEN, text, vec![])
    })?;
    // Never closed: the cell exits instead.
    let raw: &'static RawLibrary = Box::leak(Box::new(raw));
    let needs = needs(raw);
    // SAFETY: `raw` is leaked, so the library and every `'static` reference
    // in its header stay mapped for the life of the process.
    let header: &'static LibHeader =
        unsafe { lib_header_from_raw_library(raw) }.map_err(classify)?;
    let module = match header.init_root_module::<SkillModRef>() {
        Ok(module) => Ok(module),
        Err(error @ LibraryError::AbiInstability(_)) => {
            if foveal_sdk::compat::earlier_layout(header).is_none() {
                return Err(classify(error));
            }
            // SAFETY: the library's root module has an earlier SDK's layout
            // (just checked), whose fields are the current module's first
            // ones, in order and of the same types; accessors of later
            // fields read the field count the library recorded and answer
            // `None` (`foveal_sdk::compat`).
            unsafe { header.init_root_module_with_unchecked_layout::<SkillModRef>() }
                .map_err(classify)
        }
        Err(error) => Err(classify(error)),
    }?;
    Ok((module, needs))
}

fn classify(error: LibraryError) -> LoadFailure {
    match error {
        LibraryError::GetSymbolError { .. } => (load_failed::NOT_A_SKILL, String::new(), vec![]),
        LibraryError::IncompatibleVersionNumber {
            expected_version,
            actual_version,
            ..
        } => (
            load_failed::INCOMPATIBLE_SDK,
            String::new(),
            vec![expected_version.to_string(), actual_version.to_string()],
        ),
        LibraryError::InvalidAbiHeader(header) => (
            load_failed::ABI_STABLE,
            format!("abi_stable header {header:?}"),
            vec![],
        ),
        LibraryError::AbiInstability(errors) => (load_failed::LAYOUT, errors.to_string(), vec![]),
        LibraryError::RootModule { err, .. } => (
            load_failed::OPEN,
            format!("the root module constructor failed: {err}"),
            vec![],
        ),
        other => (load_failed::OPEN, other.to_string(), vec![]),
    }
}

fn hello(module: &SkillModRef, confinement: confine::Confinement, needs: &[String]) {
    let m = module.manifest();
    let mut w = Writer::new(Kind::Hello);
    w.str(m.name.as_str())
        .str(m.version.as_str())
        .str(m.sdk_version.as_str())
        .i32(m.priority);
    w.u32(m.dependencies.len() as u32);
    for d in m.dependencies.iter() {
        w.str(d.as_str());
    }
    w.str(m.description.as_str()).str(m.source.as_str());
    w.u32(m.component_ids.len() as u32);
    for id in m.component_ids.iter() {
        w.u32(*id);
    }
    let present = module.hooks_present();
    let mask = present
        .iter()
        .enumerate()
        .fold(0u32, |m, (i, p)| if *p { m | 1 << i } else { m });
    w.u32(mask)
        .u32(confinement.landlock_abi)
        .bool(confinement.seccomp)
        .bool(confinement.namespaces);
    w.u32(needs.len() as u32);
    for need in needs {
        w.str(need);
    }
    send(w);
}

/// The sealed view files the cell holds, by key: exactly those of the
/// last view it was lent.
#[derive(Default)]
struct Views {
    files: HashMap<u64, MappedFile>,
}

fn serve(module: SkillModRef) {
    let mut views = Views::default();
    loop {
        let frame = {
            let mut ch = channel();
            match ch.recv(None) {
                Ok(frame) => frame,
                Err(_) => return,
            }
        };
        if frame.kind == Kind::Files {
            if let Err(e) = receive_files(&mut views, &frame) {
                let _ = e;
                return;
            }
            continue;
        }
        if frame.kind != Kind::Call {
            continue;
        }
        let reply = match call(&module, &mut views, &frame) {
            Ok(reply) => reply,
            Err(e) => {
                let mut w = reply_head();
                w.bool(false);
                proto::put_error(
                    &mut w,
                    &SkillError::invalid_input(format!("cell: bad call: {e}")),
                );
                w
            }
        };
        send(reply);
    }
}

/// A reply, starting with the acts refused since the last one.
fn reply_head() -> Writer {
    let mut w = match ANSWERS.get() {
        Some(area) => Writer::with_area(Kind::Reply, area),
        None => Writer::new(Kind::Reply),
    };
    let refused = confine::take_refused();
    w.u32(refused.len() as u32);
    for r in &refused {
        w.u32(r.kind).u32(r.syscall).str(&r.path);
    }
    w
}

fn call(module: &SkillModRef, views: &mut Views, frame: &Frame) -> Result<Writer, WireError> {
    let mut r = frame.reader();
    let which = r.u8()?;
    IN_CALL.store(true, Ordering::Release);
    let out = dispatch(module, views, which, &mut r);
    IN_CALL.store(false, Ordering::Release);
    out
}

fn finish<T>(result: RResult<T, SkillError>, put: impl FnOnce(&mut Writer, &T)) -> Writer {
    let mut w = reply_head();
    match result {
        ROk(value) => {
            w.bool(true);
            put(&mut w, &value);
        }
        RErr(e) => {
            w.bool(false);
            proto::put_error(&mut w, &e);
        }
    }
    w
}

fn absent(name: &str) -> Writer {
    finish::<()>(
        RErr(SkillError::invalid_input(format!(
            "the skill has no `{name}` hook"
        ))),
        |_, _| {},
    )
}

/// Maps the view files of a [`Kind::Files`] frame and closes their
/// descriptors (the mappings stay).
fn receive_files(views: &mut Views, frame: &Frame) -> Result<(), WireError> {
    let mut r = frame.reader();
    let n = r.count(8)?;
    for _ in 0..n {
        let key = r.u64()?;
        let fd = channel().take_fd()?;
        let mapped = MappedFile::map(&fd).map_err(WireError::Io)?;
        views.files.insert(key, mapped);
    }
    Ok(())
}

fn read_view(views: &mut Views, r: &mut Reader<'_>) -> Result<(u64, Vec<u64>), WireError> {
    let generation = r.u64()?;
    let n = r.count(8)?;
    let mut keys = Vec::with_capacity(n);
    for _ in 0..n {
        keys.push(r.u64()?);
    }
    // Exactly the files of this view are kept: the host forgets the rest too.
    let wanted: std::collections::HashSet<u64> = keys.iter().copied().collect();
    views.files.retain(|k, _| wanted.contains(k));
    Ok((generation, keys))
}

fn file_views<'v>(views: &'v Views, keys: &[u64]) -> Result<Vec<FileView<'v>>, WireError> {
    keys.iter()
        .map(|k| {
            views
                .files
                .get(k)
                .map(MappedFile::view)
                .ok_or(WireError::Malformed("a view file the cell does not hold"))
        })
        .collect()
}

fn prefix_request<'a>(r: &mut Reader<'a>) -> Result<PrefixRequest<'a>, WireError> {
    Ok(PrefixRequest {
        assistant_name: r.str()?.into(),
        identity: r.str()?.into(),
        feedback: r.str()?.into(),
        mandates: r.str()?.into(),
        tools: r.str()?.into(),
    })
}

/// The host facts `lend::put_facts` wrote.
fn get_facts(r: &mut Reader<'_>) -> Result<foveal_sdk::call::CallFacts, WireError> {
    let session = r.opt_str()?.map(str::to_owned);
    let now = if r.bool()? {
        let seconds = r.u64()? as i64;
        Some(foveal_sdk::Now::new(seconds, r.i32()?))
    } else {
        None
    };
    Ok(foveal_sdk::call::CallFacts { session, now })
}

fn dispatch(
    module: &SkillModRef,
    views: &mut Views,
    which: u8,
    r: &mut Reader<'_>,
) -> Result<Writer, WireError> {
    Ok(match which {
        hook::INIT => finish((module.init())(host_api()), |_, _| {}),
        hook::COMPONENTS => {
            let signal = SignalKind(r.u8()?);
            let focus = r.opt_str()?;
            let budget = r.opt_u32()?;
            let config = r.str()?;
            let explain = r.bool()?;
            let facts = get_facts(r)?;
            let (generation, keys) = read_view(views, r)?;
            let Some(f) = module.components() else {
                return Ok(absent("components"));
            };
            let files = file_views(views, &keys)?;
            let memex = MemexView {
                generation,
                files: RSlice::from_slice(&files),
            };
            let request = ComponentsRequest {
                signal,
                focus: focus.map(RStr::from_str).into(),
                budget_tokens: budget.into(),
                config_json: config.into(),
                memex: &memex,
                explain,
            };
            let answer = foveal_sdk::call::with_facts(&facts, || f(&request));
            finish(answer, |w, c| proto::put_components(w, c))
        }
        hook::REDACT => {
            let text = r.str()?;
            match module.redact() {
                Some(f) => finish(f(text.into()), |w, t: &RString| {
                    w.str(t);
                }),
                None => absent("redact"),
            }
        }
        hook::INVOKE => {
            let (method, args) = (r.str()?, r.str()?);
            match module.invoke() {
                Some(f) => finish(f(method.into(), args.into()), |w, t: &RString| {
                    w.str(t);
                }),
                None => absent("invoke"),
            }
        }
        hook::PREFIX => {
            let request = prefix_request(r)?;
            match module.prefix().flatten() {
                Some(f) => finish(f(&request), proto::put_prefix),
                None => absent("prefix"),
            }
        }
        hook::BUDGET => {
            let budget = r.u32()?;
            let prefix = prefix_request(r)?;
            let n = r.count(13)?;
            let mut sections = Vec::with_capacity(n);
            for _ in 0..n {
                sections.push(BudgetSection {
                    id: r.u32()?,
                    kind: SectionKind(r.u8()?),
                    text: r.str()?.into(),
                    tokens: r.u32()?,
                });
            }
            let request = BudgetRequest {
                budget,
                prefix,
                sections: RSlice::from_slice(&sections),
                applied: foveal_sdk::prompt::TrimLevels(r.u32()?),
                context_renderable: r.bool()?,
                exact: r.bool()?,
            };
            match module.budget().flatten() {
                Some(f) => finish(f(&request), proto::put_plan),
                None => absent("budget"),
            }
        }
        hook::TOOLS => match module.tools().flatten() {
            Some(f) => finish(f(), |w, t| proto::put_tools(w, t)),
            None => absent("tools"),
        },
        hook::CALL_TOOL => {
            let (name, args) = (r.str()?, r.str()?);
            match module.call_tool().flatten() {
                Some(f) => finish(f(name.into(), args.into()), |w, t: &RString| {
                    w.str(t);
                }),
                None => absent("call_tool"),
            }
        }
        hook::RUN_TOOL => {
            let (name, args) = (r.str()?, r.str()?);
            let focus = r.opt_str()?;
            let config = r.str()?;
            let facts = get_facts(r)?;
            let (generation, keys) = read_view(views, r)?;
            let Some(f) = module.run_tool().flatten() else {
                return Ok(absent("run_tool"));
            };
            let files = file_views(views, &keys)?;
            let memex = MemexView {
                generation,
                files: RSlice::from_slice(&files),
            };
            let request = ToolCallRequest {
                name: name.into(),
                args_json: args.into(),
                focus: focus.map(RStr::from_str).into(),
                config_json: config.into(),
                memex: &memex,
            };
            let answer = foveal_sdk::call::with_facts(&facts, || f(&request));
            finish(answer, |w, t: &RString| {
                w.str(t);
            })
        }
        _ => return Err(WireError::Malformed("unknown hook")),
    })
}

// The host API of a cell: each service is a frame to the host.

struct Statics;

impl Statics {
    staticref! {
        const API: WithMetadata<HostApi> = WithMetadata::new(HostApi {
            sdk_version: RStr::from_str(foveal_sdk::SDK_VERSION),
            log: cell_log,
            count_tokens: cell_count_tokens,
            memex_write: cell_memex_write,
            // The facts the host sent with the call (`with_facts` in
            // `dispatch`); the cell cannot read the time zone.
            call_session: foveal_sdk::call::serve_session,
            call_now: foveal_sdk::call::serve_now,
        })
    }
}

fn host_api() -> HostApiRef {
    HostApiRef(Statics::API.as_prefix())
}

extern "C" fn cell_log(level: LogLevel, _skill: RStr<'_>, message: RStr<'_>) {
    let mut w = Writer::new(Kind::Log);
    w.u8(level.0).str(message.as_str());
    send(w);
}

/// One request to the host and its answer; `None` outside a hook call
/// (the host is not listening then) or when the host is gone.
fn ask_host(frame: Writer) -> Option<Frame> {
    if !IN_CALL.load(Ordering::Acquire) {
        return None;
    }
    let mut ch = channel();
    ch.send(&frame.finish(), &[]).ok()?;
    loop {
        let reply = ch.recv(None).ok()?;
        if reply.kind == Kind::HostReply {
            return Some(reply);
        }
    }
}

extern "C" fn cell_count_tokens(text: RStr<'_>) -> u32 {
    let mut w = Writer::new(Kind::HostCall);
    w.u8(host_call::COUNT_TOKENS).str(text.as_str());
    ask_host(w)
        .and_then(|reply| reply.reader().u32().ok())
        // The byte length: a safe over-estimate.
        .unwrap_or(u32::try_from(text.len()).unwrap_or(u32::MAX))
}

extern "C" fn cell_memex_write(ticket: u64, edits: RStr<'_>) -> RResult<RString, SkillError> {
    let mut w = Writer::new(Kind::HostCall);
    w.u8(host_call::MEMEX_WRITE).u64(ticket).str(edits.as_str());
    let Some(reply) = ask_host(w) else {
        return RErr(SkillError::new(
            SkillError::UNAVAILABLE,
            "the host takes memex writes only during a hook call that opened a ticket",
        ));
    };
    let mut r = reply.reader();
    let decoded = (|| -> Result<RResult<RString, SkillError>, WireError> {
        Ok(if r.bool()? {
            ROk(RString::from(r.str()?))
        } else {
            RErr(proto::get_error(&mut r)?)
        })
    })();
    decoded.unwrap_or_else(|_| {
        RErr(SkillError::new(
            SkillError::UNAVAILABLE,
            "malformed answer from the host",
        ))
    })
}
