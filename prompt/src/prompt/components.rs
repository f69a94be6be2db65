//! Prompt components (seed 004): the static table, the rules for the ids
//! skills declare, the system-prompt text the host builds when the
//! token-economics skill is absent, the tool belt, and the components
//! skills contribute.
//!
//! # Ids
//!
//! The nine static ids of seed 004 (`0` system prompt … `7000` tool result,
//! [`foveal_sdk::prompt::ids`]) plus one host component of this host, the
//! recent logs at `2500` (seed 003 trims them first, so they are a section
//! of their own). Its id says where seed 003 had it, after the semantic
//! memories; the prompt puts it after the history, just before the
//! pending event, so that its changes leave the prompt's beginning as it
//! was (`prompt::position`).
//! A skill declares the ids its `components` hook fills; the rules
//! ([`check_declared`], [`reserved_for`]) are checked when it loads, by
//! the loader and the registry the host gives them to ([`POLICY`]):
//!
//! - ids the host fills (`0`, `2500`, `5000`, `6000`, `7000`) cannot be
//!   declared, nor ids above `7999`, nor one id twice;
//! - `2000` is the context section, which the host asks the `awareness`
//!   skill for by name: only that skill may declare it;
//! - any other id — a free pluggable id, or a static slot the host leaves
//!   empty (`1000`, `1500`, `3000`, `4000`) — belongs to the first skill
//!   that declares it; a second skill declaring it is refused at load.
//!
//! A component a skill returns at an id it did not declare is dropped with
//! a warning (its manifest is the contract). A skill that declares no id is
//! not asked for components here.

use std::sync::{Arc, Mutex};

use foveal_sdk::prompt::{SectionKind, ids};
use foveal_sdk::{Role, SignalKind};

use crate::loader::ComponentPolicy;
use crate::memex::privacy::PrivacyTags;
use crate::memex::snapshot::MemexSnapshot;
use crate::memex::view::{ComponentsCall, SnapshotView};
use crate::registry::{Snapshot, hooks};

/// A component the host knows by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticComponent {
    /// Its id.
    pub id: u32,
    /// Its machine name (seed 004's keys).
    pub key: &'static str,
    /// Its display name.
    pub name: &'static str,
    /// Who speaks it (history is "mixed": each message has its own role).
    pub role: Role,
    /// What it is, for trimming.
    pub kind: SectionKind,
}

/// The static components of seed 004, and the host's logs component, in
/// id order.
pub const STATIC_COMPONENTS: [StaticComponent; 10] = [
    StaticComponent {
        id: ids::SYSTEM_PROMPT,
        key: "system_prompt",
        name: "System Prompt",
        role: Role::SYSTEM,
        kind: SectionKind::PREFIX,
    },
    StaticComponent {
        id: ids::CHARACTER_CONTEXT,
        key: "character_context",
        name: "Character Context",
        role: Role::SYSTEM,
        kind: SectionKind::FIXED,
    },
    StaticComponent {
        id: ids::ENTITY_CONTEXT,
        key: "entity_context",
        name: "Entity Context",
        role: Role::SYSTEM,
        kind: SectionKind::FIXED,
    },
    StaticComponent {
        id: ids::SEMANTIC_MEMORIES,
        key: "semantic_memories",
        name: "Semantic Memories",
        role: Role::SYSTEM,
        kind: SectionKind::CONTEXT,
    },
    StaticComponent {
        id: ids::LOGS,
        key: "logs",
        name: "Recent Logs",
        role: Role::SYSTEM,
        kind: SectionKind::LOGS,
    },
    StaticComponent {
        id: ids::CONTEXT_BUFFER,
        key: "context_buffer",
        name: "Context Buffer",
        role: Role::SYSTEM,
        kind: SectionKind::FIXED,
    },
    StaticComponent {
        id: ids::GOALS,
        key: "goals",
        name: "Goals",
        role: Role::SYSTEM,
        kind: SectionKind::FIXED,
    },
    StaticComponent {
        id: ids::CONVERSATION_HISTORY,
        key: "conversation_history",
        name: "Conversation History",
        role: Role::USER,
        kind: SectionKind::HISTORY,
    },
    StaticComponent {
        id: ids::PENDING_EVENT,
        key: "pending_event",
        name: "Pending Event",
        role: Role::USER,
        kind: SectionKind::MESSAGE,
    },
    StaticComponent {
        id: ids::TOOL_RESULT,
        key: "tool_result",
        name: "Tool Result",
        role: Role::TOOL,
        kind: SectionKind::FIXED,
    },
];

/// The host component at `id`, if there is one.
pub fn static_component(id: u32) -> Option<&'static StaticComponent> {
    STATIC_COMPONENTS.iter().find(|c| c.id == id)
}

/// The host component called `key`, if there is one.
pub fn static_by_key(key: &str) -> Option<&'static StaticComponent> {
    STATIC_COMPONENTS.iter().find(|c| c.key == key)
}

/// The component-id rules (seed 004), kept with the loader that applies
/// them: from the ids the SDK publishes.
pub use crate::loader::{check_declared, reserved_for};

/// Calls the `components` hook of every serving skill that has one, once,
/// on `view`, and notes on each skill the component ids it returned
/// without declaring them ([`crate::registry::Skill::note_undeclared`]):
/// what `skill-list` and `check` show. A failing hook is left to the
/// registry's own accounting.
pub fn probe_undeclared(skills: &crate::registry::Snapshot, view: &SnapshotView) {
    for slot in skills.skills() {
        let info = slot.skill().info();
        if !info.hooks.contains(&hooks::COMPONENTS.name) {
            continue;
        }
        let call = ComponentsCall {
            view: view.clone(),
            signal: SignalKind::USER,
            focus: None,
            budget: None,
            config: "{}".to_owned(),
            explain: false,
            facts: crate::host_api::facts(None),
        };
        if let Ok(components) = slot.call_components(call) {
            for component in components.iter() {
                if !info.component_ids.contains(&component.id) {
                    slot.skill()
                        .note_undeclared(component.id, component.key.as_str());
                }
            }
        }
    }
}

/// `base` (a JSON object) with the keys of `extra` (a JSON object) it
/// does not have: the computed-context skill's `config_json` when both
/// `[computed_context]` and `[skills.computed-context]` are written.
/// Either one not an object: the other.
pub fn merge_config(base: &str, extra: &str) -> String {
    use serde_json::Value;
    match (
        serde_json::from_str::<Value>(base),
        serde_json::from_str::<Value>(extra),
    ) {
        (Ok(Value::Object(mut base)), Ok(Value::Object(extra))) => {
            for (key, value) in extra {
                base.entry(key).or_insert(value);
            }
            Value::Object(base).to_string()
        }
        (Ok(Value::Object(_)), _) => base.to_owned(),
        _ => extra.to_owned(),
    }
}

/// The rules above as the loader and the registry apply them to every
/// library: the host builds its registries with this policy, and it is
/// also [`ComponentPolicy`]'s `Default`.
pub const POLICY: ComponentPolicy = crate::loader::SEED_POLICY;

/// A tool the model may call, as the system prompt lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// What it does, in one line.
    pub description: String,
}

/// The tool belt of the system prompt: the tools the filter allows (all
/// when none), one `- name: description` line each, or `No tools` (the
/// seed's text). Returns the text and the names kept.
pub fn tool_belt(tools: &[ToolSpec], filter: Option<&[String]>) -> (String, Vec<String>) {
    let allowed: Vec<&ToolSpec> = tools
        .iter()
        .filter(|t| filter.is_none_or(|f| f.contains(&t.name)))
        .collect();
    if allowed.is_empty() {
        return ("No tools".to_owned(), Vec::new());
    }
    let mut text = String::new();
    for tool in &allowed {
        text.push_str("- ");
        text.push_str(&tool.name);
        if !tool.description.is_empty() {
            text.push_str(": ");
            text.push_str(&tool.description);
        }
        text.push('\n');
    }
    text.pop();
    (text, allowed.iter().map(|t| t.name.clone()).collect())
}

/// The standing mandates as the prefix shows them: one `- ` line each.
pub fn mandates_text(mandates: &[String]) -> String {
    let mut text = String::new();
    for mandate in mandates.iter().filter(|m| !m.trim().is_empty()) {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str("- ");
        text.push_str(mandate.trim());
    }
    text
}

/// The IDENTITY+TOOLS prefix (seed 003, contract 1), built by the host
/// when the token-economics skill is absent: the SDK's
/// [`foveal_sdk::prompt::prefix_text`], which the skill uses too.
pub use foveal_sdk::prompt::prefix_text;

/// One component a skill contributed, kept by the host.
#[derive(Debug, Clone)]
pub struct SkillComponent {
    /// Its id (declared by the skill).
    pub id: u32,
    /// Its key.
    pub key: Arc<str>,
    /// Its display name.
    pub name: Arc<str>,
    /// Who speaks it.
    pub role: Role,
    /// Its text.
    pub text: Arc<str>,
    /// The skill it came from.
    pub skill: Arc<str>,
}

/// What skill components depend on.
#[derive(Debug, Clone, PartialEq)]
struct Key {
    registry: u64,
    memex: u64,
    privacy: PrivacyTags,
    signal: SignalKind,
    focus: Option<String>,
    /// The session's window and its revision.
    window: Option<(String, u64)>,
    /// The session the prompt is for.
    session: Option<String>,
    /// The local date (days since 1970-01-01): a section that shows the
    /// date or what is due is rendered again on a new day.
    day: i64,
}

/// The components of every skill that declares ids (but `awareness`,
/// whose section is the context), kept while the registry and memex
/// generations, the privacy tags, the signal, the focus and the session's
/// context window (its revision) and the local date are unchanged. Each
/// skill is asked with its configuration — what the user wrote in
/// `[skills.<name>]` (`computed-context` also gets `[computed_context]`),
/// else `{}` — and never anything of the host's: the session the prompt
/// is for (the `context-window` skill renders its window at 3000) and the
/// time are host facts, read through the host API during the call
/// ([`foveal_sdk::call`]).
#[derive(Debug, Default)]
pub struct SkillComponents {
    last: Mutex<Option<(Key, Arc<[SkillComponent]>)>>,
    /// Each skill's configuration (JSON), by skill name.
    configs: Vec<(String, String)>,
}

/// What a cycle asks the skills' components for.
#[derive(Debug, Clone, Copy)]
pub struct ComponentsFor<'a> {
    /// The kind of signal the cycle answers.
    pub signal: SignalKind,
    /// The object in foveal focus.
    pub focus: Option<&'a str>,
    /// The session's context window.
    pub window: Option<super::SessionWindow<'a>>,
    /// The session the prompt is for.
    pub session: Option<&'a str>,
}

impl SkillComponents {
    /// Calls each skill named in `configs` with its configuration.
    pub fn with_configs(configs: Vec<(String, String)>) -> Self {
        Self {
            last: Mutex::default(),
            configs,
        }
    }

    /// The components for these inputs; from the cache when `reuse` and
    /// nothing changed.
    pub fn get(
        &self,
        skills: &Snapshot,
        memex: &MemexSnapshot,
        privacy: &PrivacyTags,
        cycle: ComponentsFor<'_>,
        reuse: bool,
    ) -> Arc<[SkillComponent]> {
        let ComponentsFor {
            signal,
            focus,
            window,
            session,
        } = cycle;
        let contributors = || {
            skills.skills().filter(|slot| {
                let info = slot.skill().info();
                info.name != crate::context::SKILL
                    && !info.component_ids.is_empty()
                    && info.hooks.contains(&hooks::COMPONENTS.name)
            })
        };
        if contributors().next().is_none() {
            return Arc::from([]);
        }
        let facts = crate::host_api::facts(session);
        let key = Key {
            day: facts.now.map_or(0, foveal_sdk::Now::local_day),
            registry: skills.generation(),
            memex: memex.generation(),
            privacy: privacy.clone(),
            signal,
            focus: focus.map(str::to_owned),
            window: window.map(|w| (w.session.to_owned(), w.revision)),
            session: session.map(str::to_owned),
        };
        if reuse {
            let last = self.lock();
            if let Some((k, components)) = last.as_ref()
                && *k == key
            {
                return Arc::clone(components);
            }
        }
        let call = ComponentsCall {
            view: SnapshotView::new(memex, privacy),
            signal,
            focus: focus.map(str::to_owned),
            budget: None,
            config: "{}".to_owned(),
            explain: false,
            facts,
        };
        let mut out = Vec::new();
        // A failed hook is never cached with the components: the next cycle
        // calls it again, so each failure counts towards quarantine.
        let mut failed = false;
        for slot in contributors() {
            let info = slot.skill().info();
            let skill: Arc<str> = Arc::from(info.name.as_str());
            let mut call = call.clone();
            if let Some((_, config)) = self.configs.iter().find(|(name, _)| *name == info.name) {
                call.config.clone_from(config);
            }
            let components = match slot.call_components(call) {
                Ok(components) => components,
                Err(unavailable) => {
                    // A failure is said on stderr once per skill, hook and
                    // cause in this process (`crate::skill_errors`; a panic,
                    // a dead or hung cell and a quarantine by the registry),
                    // so that it is never silent and a skill that fails
                    // every cycle is one line.
                    failed |= unavailable.say_failure();
                    tracing::debug!(target: "foveal::prompt", skill = %info.name, "skill components left out: {unavailable}");
                    continue;
                }
            };
            for component in components {
                if !info.component_ids.contains(&component.id) {
                    // Once per build and id, on the registry's log (stderr
                    // for `run`), and in `skill-list` and `check`.
                    slot.skill()
                        .note_undeclared(component.id, component.key.as_str());
                    continue;
                }
                if out
                    .iter()
                    .any(|c: &SkillComponent| c.id == component.id && *c.skill == *skill)
                {
                    tracing::warn!(target: "foveal::prompt", skill = %info.name, id = component.id, "component dropped: the skill returned this id twice");
                    continue;
                }
                out.push(SkillComponent {
                    id: component.id,
                    key: Arc::from(component.key.as_str()),
                    name: Arc::from(component.name.as_str()),
                    role: component.role,
                    text: Arc::from(component.content.as_str()),
                    skill: Arc::clone(&skill),
                });
            }
        }
        let components: Arc<[SkillComponent]> = out.into();
        if reuse && !failed {
            *self.lock() = Some((key, Arc::clone(&components)));
        }
        components
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Key, Arc<[SkillComponent]>)>> {
        // Entries are replaced whole; a poisoned lock holds a valid value.
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_ids_are_checked() {
        assert!(check_declared(&[4500, 1000, 7999]).is_ok());
        assert!(check_declared(&[]).is_ok());
        let err = check_declared(&[0]).unwrap_err();
        assert!(err.contains("filled by the host"), "{err}");
        assert!(check_declared(&[5000]).is_err());
        assert!(check_declared(&[2500]).is_err());
        assert!(
            check_declared(&[8000])
                .unwrap_err()
                .contains("out of range")
        );
        assert!(check_declared(&[4501, 4501]).unwrap_err().contains("twice"));
        assert_eq!(reserved_for(2000), Some("awareness"));
        assert_eq!(reserved_for(2001), None);
    }

    #[test]
    fn components_follow_their_static_anchor() {
        assert_eq!(ids::anchor(0), 0);
        assert_eq!(ids::anchor(999), 0);
        assert_eq!(ids::anchor(1001), 1000);
        assert_eq!(ids::anchor(1500), 1500);
        assert_eq!(ids::anchor(2500), 2000);
        assert_eq!(ids::anchor(7999), 7000);
        assert!(ids::is_static(1500) && !ids::is_static(2500));
        let mut sorted = STATIC_COMPONENTS.map(|c| c.id);
        sorted.sort_unstable();
        assert_eq!(sorted, STATIC_COMPONENTS.map(|c| c.id));
    }

    #[test]
    fn the_tool_belt_lists_the_allowed_tools_or_says_no_tools() {
        let tools = [
            ToolSpec {
                name: "noop".into(),
                description: "Do nothing.".into(),
            },
            ToolSpec {
                name: "add_journal_entry".into(),
                description: "Write a dated note.".into(),
            },
        ];
        let (text, names) = tool_belt(&tools, None);
        assert_eq!(
            text,
            "- noop: Do nothing.\n- add_journal_entry: Write a dated note."
        );
        assert_eq!(names, ["noop", "add_journal_entry"]);
        let (text, _) = tool_belt(&tools, Some(&["noop".to_owned()]));
        assert_eq!(text, "- noop: Do nothing.");
        assert_eq!(tool_belt(&tools, Some(&[])).0, "No tools");
        assert_eq!(tool_belt(&[], None).0, "No tools");
    }

    #[test]
    fn the_prefix_puts_each_part_on_its_own_lines() {
        let request = foveal_sdk::prompt::PrefixRequest {
            assistant_name: "Agent".into(),
            identity: "### Mode: concise\n".into(),
            feedback: "".into(),
            mandates: "- Be brief.".into(),
            tools: "No tools".into(),
        };
        assert_eq!(
            prefix_text(&request),
            "IDENTITY: Agent\n### Mode: concise\n\nSTANDING MANDATES:\n- Be brief.\n\nTOOLS:\nNo tools\n"
        );
    }
}
