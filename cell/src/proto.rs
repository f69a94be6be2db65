//! What the frames of the channel say: the hook numbers and the encoding
//! of the values both sides exchange, in one place.

use abi_stable::std_types::{RArc, ROption, RString, RVec};
use foveal_sdk::prompt::{BudgetPlan, Prefix, SectionEdit, TrimLevels};
use foveal_sdk::{Component, Omitted, Role, SkillError, Source, ToolDecl};

use crate::wire::{Reader, WireError, Writer};

/// The hooks, numbered as in [`foveal_sdk::SkillMod::HOOK_NAMES`], and
/// `init` after them.
pub mod hook {
    /// `components`.
    pub const COMPONENTS: u8 = 0;
    /// `redact`.
    pub const REDACT: u8 = 1;
    /// `invoke`.
    pub const INVOKE: u8 = 2;
    /// `prefix`.
    pub const PREFIX: u8 = 3;
    /// `budget`.
    pub const BUDGET: u8 = 4;
    /// `tools`.
    pub const TOOLS: u8 = 5;
    /// `call_tool`.
    pub const CALL_TOOL: u8 = 6;
    /// `run_tool`.
    pub const RUN_TOOL: u8 = 7;
    /// `init`.
    pub const INIT: u8 = 8;

    /// The hook's name.
    pub fn name(hook: u8) -> &'static str {
        foveal_sdk::SkillMod::HOOK_NAMES
            .get(hook as usize)
            .copied()
            .unwrap_or("init")
    }
}

/// Host API calls a cell makes during a hook ([`crate::wire::Kind::HostCall`]).
pub mod host_call {
    /// `count_tokens(text) -> u32`.
    pub const COUNT_TOKENS: u8 = 1;
    /// `memex_write(ticket, edits_json) -> RResult<RString, SkillError>`.
    pub const MEMEX_WRITE: u8 = 2;
}

/// Why a library did not load in its cell ([`crate::wire::Kind::LoadFailed`]).
pub mod load_failed {
    /// The dynamic loader refused it.
    pub const OPEN: u8 = 0;
    /// No skill root module.
    pub const NOT_A_SKILL: u8 = 1;
    /// Built against another SDK version (expected, found).
    pub const INCOMPATIBLE_SDK: u8 = 2;
    /// Built against another abi_stable.
    pub const ABI_STABLE: u8 = 3;
    /// The root module's layout differs.
    pub const LAYOUT: u8 = 4;
    /// The cell could not confine itself: nothing was loaded.
    pub const UNCONFINED: u8 = 5;
}

/// Writes a skill error.
pub fn put_error(w: &mut Writer, e: &SkillError) {
    w.u32(e.code).str(&e.message);
}

/// Reads a skill error.
pub fn get_error(r: &mut Reader<'_>) -> Result<SkillError, WireError> {
    Ok(SkillError::new(r.u32()?, r.string()?))
}

/// Writes components.
pub fn put_components(w: &mut Writer, components: &[Component]) {
    let text: usize = components.iter().map(|c| c.content.len() + 64).sum();
    w.reserve(text);
    w.u32(components.len() as u32);
    for c in components {
        w.u32(c.id)
            .str(&c.key)
            .str(&c.name)
            .u8(c.role.0)
            .str(&c.content);
        w.u32(c.sources.len() as u32);
        for s in c.sources.iter() {
            w.str(&s.id).str(&s.reason);
        }
        w.u32(c.omitted.len() as u32);
        for o in c.omitted.iter() {
            w.str(&o.reason).u32(o.count);
        }
    }
}

/// Reads components.
pub fn get_components(r: &mut Reader<'_>) -> Result<RVec<Component>, WireError> {
    let n = r.count(17)?;
    let mut out = RVec::with_capacity(n);
    for _ in 0..n {
        let id = r.u32()?;
        let key = RString::from(r.string()?);
        let name = RString::from(r.string()?);
        let role = Role(r.u8()?);
        let content = RString::from(r.string()?);
        let ns = r.count(8)?;
        let mut sources = RVec::with_capacity(ns);
        for _ in 0..ns {
            sources.push(Source {
                id: r.string()?.into(),
                reason: r.string()?.into(),
            });
        }
        let no = r.count(8)?;
        let mut omitted = RVec::with_capacity(no);
        for _ in 0..no {
            omitted.push(Omitted {
                reason: r.string()?.into(),
                count: r.u32()?,
            });
        }
        out.push(Component {
            id,
            key,
            name,
            role,
            content,
            sources,
            omitted,
        });
    }
    Ok(out)
}

/// Writes a prefix.
pub fn put_prefix(w: &mut Writer, p: &Prefix) {
    w.str(&p.text).bool(p.hit);
}

/// Reads a prefix.
pub fn get_prefix(r: &mut Reader<'_>) -> Result<Prefix, WireError> {
    Ok(Prefix {
        text: RArc::new(RString::from(r.string()?)),
        hit: r.bool()?,
    })
}

/// Writes a budget plan.
pub fn put_plan(w: &mut Writer, p: &BudgetPlan) {
    w.bool(p.fits).u32(p.applied.0);
    w.u32(p.edits.len() as u32);
    for e in p.edits.iter() {
        w.u32(e.index);
        w.opt_str(e.text.as_ref().map(|t| t.as_str()).into_option());
    }
    w.opt_u32(p.context_budget.into_option());
    w.opt_u32(p.usage_percent.into_option().map(u32::from));
}

/// Reads a budget plan.
pub fn get_plan(r: &mut Reader<'_>) -> Result<BudgetPlan, WireError> {
    let fits = r.bool()?;
    let applied = TrimLevels(r.u32()?);
    let n = r.count(5)?;
    let mut edits = RVec::with_capacity(n);
    for _ in 0..n {
        let index = r.u32()?;
        let text = r.opt_str()?.map(|t| RArc::new(RString::from(t)));
        edits.push(SectionEdit {
            index,
            text: ROption::from(text),
        });
    }
    Ok(BudgetPlan {
        fits,
        applied,
        edits,
        context_budget: r.opt_u32()?.into(),
        usage_percent: r.opt_u32()?.map(|u| u.min(255) as u8).into(),
    })
}

/// Writes tool declarations.
pub fn put_tools(w: &mut Writer, tools: &[ToolDecl]) {
    w.u32(tools.len() as u32);
    for t in tools {
        w.str(&t.name)
            .str(&t.description)
            .str(&t.parameters_json)
            .str(&t.category);
    }
}

/// Reads tool declarations.
pub fn get_tools(r: &mut Reader<'_>) -> Result<RVec<ToolDecl>, WireError> {
    let n = r.count(16)?;
    let mut out = RVec::with_capacity(n);
    for _ in 0..n {
        out.push(ToolDecl {
            name: r.string()?.into(),
            description: r.string()?.into(),
            parameters_json: r.string()?.into(),
            category: r.string()?.into(),
        });
    }
    Ok(out)
}
