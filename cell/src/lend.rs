//! Calling a cell through the ABI's own function types.
//!
//! The host calls every hook the same way: it is handed the hook's
//! function pointer and calls it with the ABI request it builds
//! (`slot.call(hooks::PREFIX, |f| f(&request))`). For a skill in a cell,
//! the pointer it is handed is one of the *trampolines* here: an
//! `extern "C" fn` of the hook's exact type that finds the cell the
//! calling thread is serving ([`with_cell`]), sends the request over, and
//! returns the cell's answer as the hook would have. So the call sites of
//! the host do not change.
//!
//! The two hooks that are lent the memex (`components`, `run_tool`) need
//! the sealed file of each lent file version: [`Lent`] holds them, built
//! by [`lend`] from the host's [`SnapshotView`] (and cached per file
//! version), and the trampoline checks that the request's files are
//! exactly the lent ones, by address.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use abi_stable::std_types::{RErr, RResult, RStr, RString, RVec};
use foveal_memex::view::{Prepared, SnapshotView};
use foveal_sdk::memex::MemexView;
use foveal_sdk::prompt::{BudgetPlan, BudgetRequest, Prefix, PrefixRequest};
use foveal_sdk::{Component, ComponentsRequest, SkillError, ToolCallRequest, ToolDecl};

use crate::host::{CallError, Cell};
use crate::proto::{self, hook};
use crate::view::SealedFile;
use crate::wire::{Reader, WireError, Writer};

/// The files of one view, sealed, with what they were sealed from.
#[derive(Debug, Clone)]
pub struct Lent {
    generation: u64,
    prepared: Vec<Arc<Prepared>>,
    sealed: Vec<Arc<SealedFile>>,
}

type Cache = HashMap<usize, (Weak<Prepared>, Arc<SealedFile>)>;

fn cache() -> &'static Mutex<(Cache, usize)> {
    static CACHE: std::sync::OnceLock<Mutex<(Cache, usize)>> = std::sync::OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// Seals every file of `view` (each file version once, then from cache).
pub fn lend(view: &SnapshotView) -> std::io::Result<Lent> {
    let mut prepared = Vec::new();
    let mut sealed = Vec::new();
    let mut guard = cache().lock().unwrap_or_else(|e| e.into_inner());
    let (map, pruned_at) = &mut *guard;
    for (file, p) in view.prepared() {
        let key = Arc::as_ptr(p) as usize;
        // The entry's Weak keeps the allocation (not the value) alive, so
        // an address in the map is never reused by another `Prepared`
        // while its entry is there; `ptr_eq` checks it is this one.
        let hit = map.get(&key).and_then(|(weak, s)| {
            weak.upgrade()
                .filter(|live| Arc::ptr_eq(live, p))
                .map(|_| Arc::clone(s))
        });
        let s = match hit {
            Some(s) => s,
            None => {
                let s = Arc::new(SealedFile::seal(
                    file.path.to_str().unwrap_or(""),
                    p.text(file),
                    &p.index,
                )?);
                map.insert(key, (Arc::downgrade(p), Arc::clone(&s)));
                s
            }
        };
        prepared.push(Arc::clone(p));
        sealed.push(s);
    }
    if map.len() > 64 && map.len() > 2 * *pruned_at {
        map.retain(|_, (weak, _)| weak.strong_count() > 0);
        *pruned_at = map.len();
    }
    Ok(Lent {
        generation: view.generation(),
        prepared,
        sealed,
    })
}

struct Current {
    cell: Arc<Cell>,
    timeout: Duration,
    lent: Option<Lent>,
    failure: Option<CallError>,
}

thread_local! {
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
}

/// Runs `f` (which calls one trampoline) with `cell` as the calling
/// thread's cell, under `timeout`, lending `lent`. Returns what `f`
/// returned and, when the cell failed (died, hung, restarting), why.
pub fn with_cell<R>(
    cell: &Arc<Cell>,
    timeout: Duration,
    lent: Option<Lent>,
    f: impl FnOnce() -> R,
) -> (R, Option<CallError>) {
    let previous = CURRENT.with(|c| {
        c.borrow_mut().replace(Current {
            cell: Arc::clone(cell),
            timeout,
            lent,
            failure: None,
        })
    });
    let out = f();
    let failure = CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        let failure = c.as_mut().and_then(|cur| cur.failure.take());
        *c = previous;
        failure
    });
    (out, failure)
}

/// Calls the current cell; a failure is kept for [`with_cell`] and
/// returned to the caller as the error a hook would give.
fn call<T>(
    which: u8,
    view: Option<&MemexView<'_>>,
    put: impl FnOnce(&mut Writer),
    get: impl FnOnce(&mut Reader<'_>) -> Result<T, WireError>,
) -> RResult<T, SkillError> {
    let (cell, timeout, lent) = match CURRENT.with(|c| {
        c.borrow()
            .as_ref()
            .map(|cur| (Arc::clone(&cur.cell), cur.timeout, cur.lent.clone()))
    }) {
        Some(current) => current,
        None => {
            return RErr(SkillError::new(
                SkillError::UNAVAILABLE,
                "a cell trampoline was called outside a cell call",
            ));
        }
    };
    let files = match (view, &lent) {
        (None, _) => None,
        (Some(view), Some(lent)) => {
            let same = view.files.len() == lent.prepared.len()
                && view
                    .files
                    .iter()
                    .zip(&lent.prepared)
                    .all(|(f, p)| std::ptr::eq(f.index, &p.index));
            if !same {
                return RErr(SkillError::new(
                    SkillError::UNAVAILABLE,
                    "the view of this call is not the one lent to the cell",
                ));
            }
            Some((lent.generation, lent.sealed.as_slice()))
        }
        (Some(_), None) => {
            return RErr(SkillError::new(
                SkillError::UNAVAILABLE,
                "a memex view must be lent to a cell with the call",
            ));
        }
    };
    match cell.call(which, files, timeout, put, get) {
        Ok(answer) => answer,
        Err(failure) => {
            let error = SkillError::new(
                if failure.is_fault() {
                    SkillError::PANIC
                } else {
                    SkillError::UNAVAILABLE
                },
                failure.to_string(),
            );
            CURRENT.with(|c| {
                if let Some(cur) = c.borrow_mut().as_mut() {
                    cur.failure = Some(failure);
                }
            });
            RErr(error)
        }
    }
}

fn put_prefix(w: &mut Writer, p: &PrefixRequest<'_>) {
    w.str(&p.assistant_name)
        .str(&p.identity)
        .str(&p.feedback)
        .str(&p.mandates)
        .str(&p.tools);
}

/// The host facts of the call the trampoline runs in
/// ([`foveal_sdk::call::with_facts`], set by the host around the hook
/// call), for the cell to set around its own: the session, then the time
/// (present flag, seconds, offset).
fn put_facts(w: &mut Writer) {
    let facts = foveal_sdk::call::current().unwrap_or_default();
    w.opt_str(facts.session.as_deref());
    match facts.now {
        Some(now) => w
            .bool(true)
            .u64(now.unix_seconds as u64)
            .i32(now.utc_offset_seconds),
        None => w.bool(false),
    };
}

fn get_string(r: &mut Reader<'_>) -> Result<RString, WireError> {
    Ok(RString::from(r.string()?))
}

/// The `components` trampoline.
pub extern "C" fn components(
    request: &ComponentsRequest<'_>,
) -> RResult<RVec<Component>, SkillError> {
    call(
        hook::COMPONENTS,
        Some(request.memex),
        |w| {
            w.u8(request.signal.0)
                .opt_str(request.focus.as_ref().map(|f| f.as_str()).into_option())
                .opt_u32(request.budget_tokens.into_option())
                .str(&request.config_json)
                .bool(request.explain);
            put_facts(w);
        },
        proto::get_components,
    )
}

/// The `redact` trampoline.
pub extern "C" fn redact(text: RStr<'_>) -> RResult<RString, SkillError> {
    call(
        hook::REDACT,
        None,
        |w| {
            w.str(&text);
        },
        get_string,
    )
}

/// The `invoke` trampoline.
pub extern "C" fn invoke(method: RStr<'_>, args: RStr<'_>) -> RResult<RString, SkillError> {
    call(
        hook::INVOKE,
        None,
        |w| {
            w.str(&method).str(&args);
        },
        get_string,
    )
}

/// The `prefix` trampoline.
pub extern "C" fn prefix(request: &PrefixRequest<'_>) -> RResult<Prefix, SkillError> {
    call(
        hook::PREFIX,
        None,
        |w| put_prefix(w, request),
        proto::get_prefix,
    )
}

/// The `budget` trampoline.
pub extern "C" fn budget(request: &BudgetRequest<'_>) -> RResult<BudgetPlan, SkillError> {
    call(
        hook::BUDGET,
        None,
        |w| {
            w.u32(request.budget);
            put_prefix(w, &request.prefix);
            w.u32(request.sections.len() as u32);
            for s in request.sections.iter() {
                w.u32(s.id).u8(s.kind.0).str(&s.text).u32(s.tokens);
            }
            w.u32(request.applied.0)
                .bool(request.context_renderable)
                .bool(request.exact);
        },
        proto::get_plan,
    )
}

/// The `tools` trampoline.
pub extern "C" fn tools() -> RResult<RVec<ToolDecl>, SkillError> {
    call(hook::TOOLS, None, |_| {}, proto::get_tools)
}

/// The `call_tool` trampoline.
pub extern "C" fn call_tool(name: RStr<'_>, args: RStr<'_>) -> RResult<RString, SkillError> {
    call(
        hook::CALL_TOOL,
        None,
        |w| {
            w.str(&name).str(&args);
        },
        get_string,
    )
}

/// The `run_tool` trampoline.
pub extern "C" fn run_tool(request: &ToolCallRequest<'_>) -> RResult<RString, SkillError> {
    call(
        hook::RUN_TOOL,
        Some(request.memex),
        |w| {
            w.str(&request.name)
                .str(&request.args_json)
                .opt_str(request.focus.as_ref().map(|f| f.as_str()).into_option())
                .str(&request.config_json);
            put_facts(w);
        },
        get_string,
    )
}
