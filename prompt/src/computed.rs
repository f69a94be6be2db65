//! Computed context (seed 001) in the host: the `computed-context`
//! skill's section for the task in focus, and post-execution write-back.
//!
//! - **The section** is prompt component 2100 (after the awareness
//!   outline), contributed by the skill like any skill component
//!   ([`crate::prompt::components::SkillComponents`]) with the
//!   configuration of [`ComputedSettings::skill_config`]. It is there when
//!   the focus is a task; when the skill is absent, quarantined or fails,
//!   there is no such section and the prompt says nothing about it (the
//!   fallback of DESIGN.md's table). [`compute`] asks for it directly
//!   (`foveal context --computed`), as text, JSON or with the seed's
//!   "Context Debug" report.
//! - **Post-execution** ([`post_execution`]): when a task is marked done,
//!   the host opens a *write ticket*, calls the skill with
//!   [`SignalKind::TASK_DONE`] and the ticket in its configuration, and
//!   the skill sends the edits its handoff calls for through the host API's
//!   `memex_write` (through a [`WriteTicket`]). The host makes them with the
//!   memex write API ([`crate::memex::write`]: atomic, byte-preserving,
//!   refused on a conflict) after its privacy checks: the object written
//!   to (or under) must be visible, no privacy tag may be added, and no
//!   text may carry private text or a secret — the rule every memex write
//!   obeys, the gate's [`Gate::check_write`], asked of every text of an
//!   edit before any of it is written (title, tags, property keys and
//!   values, `KIND`, `SEVERITY` and `SOURCE` included, body), each alone
//!   and all joined in the order the file will hold them, a property with
//!   the rest of the drawer it joins — a `KIND` or `SEVERITY` value of the
//!   host's own vocabulary is let through as a word alone, not as part of
//!   a longer private passage; with the answer every such refusal gives
//!   ([`crate::egress::WRITE_REFUSED`]). The ticket closes when the
//!   call returns: a skill cannot write at any other time, and never
//!   touches a file itself.
//!
//! # Example
//!
//! ```
//! use foveal_prompt::computed::{ComputedSettings, Mode};
//! use foveal_memex::{Memex, privacy::PrivacyTags};
//! use foveal_registry::registry::{Registry, RegistryOptions};
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("a.org"), "* TODO Add login\n:PROPERTIES:\n:ID: t\n:END:\n").unwrap();
//! let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
//! let registry = Registry::new(RegistryOptions {
//!     dirs: vec![],
//!     shadow_dir: dir.path().join("shadow"),
//!     ..RegistryOptions::default()
//! })
//! .unwrap();
//! // No skill: no section.
//! let out = foveal_prompt::computed::compute(
//!     &registry.snapshot(),
//!     &memex.snapshot(),
//!     &PrivacyTags::default(),
//!     &ComputedSettings::default(),
//!     "t",
//!     Mode::Text,
//! );
//! assert!(out.is_err());
//! ```

use std::sync::{Arc, Mutex};

use foveal_sdk::{SignalKind, SkillError};
use serde_json::{Value, json};

use crate::egress::Gate;
use crate::host_api::{MemexWriter, WriteTicket};
use crate::memex::Memex;
use crate::memex::privacy::PrivacyTags;
use crate::memex::snapshot::MemexSnapshot;
use crate::memex::view::{ComponentsCall, SnapshotView};
use crate::memex::write::Edit;
use crate::registry::Snapshot;

/// The skill.
pub const SKILL: &str = "computed-context";
/// Its prompt component (seed 004: a free id after the semantic memories).
pub const COMPONENT_ID: u32 = 2100;

/// `[computed_context]`: how the skill computes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ComputedSettings {
    /// `computed_context.debug`, `DEBUG_CONTEXT=true`: add the seed's
    /// "Context Debug" report to the section.
    pub debug: bool,
    /// `computed_context.default_complexity`: a task without
    /// `:COMPLEXITY:` (`easy`, `normal`, `complex`).
    pub default_complexity: String,
    /// `computed_context.context_map`: the context map's headline title,
    /// id, or file (`*.org`).
    pub context_map: String,
    /// `computed_context.knowledge`: the headline (title or id) under which
    /// write-back puts new knowledge nodes.
    pub knowledge: String,
    /// `computed_context.domains`: the domain mapping, in order (none: the
    /// seed's).
    pub domains: Option<Vec<(String, Vec<String>)>>,
    /// Let the skill keep per-file work between calls (where the context
    /// map's headline is); off only to time the work itself.
    pub skill_cache: bool,
}

impl Default for ComputedSettings {
    fn default() -> Self {
        Self {
            debug: false,
            default_complexity: "normal".to_owned(),
            context_map: "Context Map".to_owned(),
            knowledge: "Knowledge".to_owned(),
            domains: None,
            skill_cache: true,
        }
    }
}

/// What [`compute`] prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The section (with the debug report when configured).
    Text,
    /// The skill's JSON report.
    Json,
    /// The "Context Debug" report with the section.
    Explain,
}

impl ComputedSettings {
    /// The skill's configuration (JSON).
    pub fn skill_config(&self, mode: Mode, ticket: Option<u64>) -> String {
        let mut config = json!({
            "debug": self.debug || mode == Mode::Explain,
            "output": if mode == Mode::Json { "json" } else { "text" },
            "default_complexity": self.default_complexity,
            "context_map": self.context_map,
            "knowledge": self.knowledge,
            "cache": self.skill_cache,
        });
        if let Some(domains) = &self.domains {
            config["domains"] = json!(domains);
        }
        if let Some(ticket) = ticket {
            config["write_ticket"] = json!(ticket);
        }
        config.to_string()
    }
}

/// The skill's section for task `focus` (its content: markdown, or the
/// JSON report in [`Mode::Json`]); `Ok(None)` when the focus is not a
/// task; `Err(why)` when the skill is absent or failed — then there is no
/// section.
pub fn compute(
    skills: &Snapshot,
    memex: &MemexSnapshot,
    privacy: &PrivacyTags,
    settings: &ComputedSettings,
    focus: &str,
    mode: Mode,
) -> Result<Option<String>, String> {
    let call = ComponentsCall {
        view: SnapshotView::new(memex, privacy),
        signal: SignalKind::USER,
        focus: Some(focus.to_owned()),
        budget: None,
        config: settings.skill_config(mode, None),
        explain: false,
        facts: crate::host_api::facts(None),
    };
    let components = skills
        .call_components(SKILL, call)
        .map_err(|e| e.to_string())?;
    Ok(components
        .into_iter()
        .find(|c| c.id == COMPONENT_ID)
        .map(|c| c.content.into_string()))
}

/// What [`ComputedCache::get`] depends on.
#[derive(Debug, Clone, PartialEq)]
struct Key {
    registry: u64,
    memex: u64,
    privacy: PrivacyTags,
    focus: String,
    mode: Mode,
}

type Answer = Arc<Result<Option<String>, String>>;

/// The last section computed, reused while the registry and memex
/// generations, the privacy tags, the focus and the mode are unchanged
/// (seed 003's cache keyed on generations, not counts).
#[derive(Debug, Default)]
pub struct ComputedCache {
    last: Mutex<Option<(Key, Answer)>>,
}

impl ComputedCache {
    /// [`compute`], from the cache when nothing changed. A failure is not
    /// kept: the next call asks the skill again.
    pub fn get(
        &self,
        skills: &Snapshot,
        memex: &MemexSnapshot,
        privacy: &PrivacyTags,
        settings: &ComputedSettings,
        focus: &str,
        mode: Mode,
    ) -> Answer {
        {
            let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((k, answer)) = last.as_ref()
                && k.registry == skills.generation()
                && k.memex == memex.generation()
                && k.focus == focus
                && k.mode == mode
                && k.privacy == *privacy
            {
                return Arc::clone(answer);
            }
        }
        let answer = Arc::new(compute(skills, memex, privacy, settings, focus, mode));
        if answer.is_ok() {
            let key = Key {
                registry: skills.generation(),
                memex: memex.generation(),
                privacy: privacy.clone(),
                focus: focus.to_owned(),
                mode,
            };
            *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((key, Arc::clone(&answer)));
        }
        answer
    }
}

/// One edit the skill asked for, and how it went.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WriteResult {
    /// The edit, as the skill sent it.
    pub edit: String,
    /// The id written (a new child's), when it was made.
    pub id: Option<String>,
    /// Why it was refused.
    pub error: Option<String>,
}

/// What post-execution did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PostExecution {
    /// Each edit, in order.
    pub edits: Vec<WriteResult>,
    /// Why the skill did not run or failed (absent: no write-back).
    pub error: Option<String>,
}

/// An open write ticket: where the skill's edits go.
struct Target {
    memex: Arc<Memex>,
    privacy: PrivacyTags,
    gate: Arc<Gate>,
    results: Mutex<Vec<WriteResult>>,
}

/// Post-execution for task `task`, just marked done: the skill plans what
/// its handoff teaches and the host writes it (see the module docs).
/// `gate` refuses any text that carries private text or a secret: there is
/// no write-back without it.
pub fn post_execution(
    skills: &Snapshot,
    memex: &Arc<Memex>,
    privacy: &PrivacyTags,
    gate: &Arc<Gate>,
    settings: &ComputedSettings,
    task: &str,
) -> PostExecution {
    if skills.get(SKILL).is_none() {
        return PostExecution {
            edits: Vec::new(),
            error: Some(format!("the {SKILL} skill is not loaded")),
        };
    }
    let target = Arc::new(Target {
        memex: Arc::clone(memex),
        privacy: privacy.clone(),
        gate: Arc::clone(gate),
        results: Mutex::new(Vec::new()),
    });
    let ticket = WriteTicket::open(Arc::clone(&target) as Arc<dyn MemexWriter>);
    let call = ComponentsCall {
        view: SnapshotView::new(&memex.snapshot(), privacy),
        signal: SignalKind::TASK_DONE,
        focus: Some(task.to_owned()),
        budget: None,
        config: settings.skill_config(Mode::Text, Some(ticket.number())),
        explain: false,
        facts: crate::host_api::facts(None),
    };
    let outcome = skills.call_components(SKILL, call);
    drop(ticket);
    let edits = std::mem::take(&mut *target.results.lock().unwrap_or_else(|e| e.into_inner()));
    let error = outcome.err().map(|e| {
        // Said on stderr once per cause in this process.
        e.say_failure();
        e.to_string()
    });
    if let Some(error) = &error {
        tracing::warn!(target: "foveal::computed", "post-execution of {task}: {error}");
    }
    for edit in &edits {
        match &edit.error {
            None => {
                tracing::info!(target: "foveal::computed", "post-execution of {task}: wrote {}", edit.id.as_deref().unwrap_or(""))
            }
            Some(e) => {
                tracing::warn!(target: "foveal::computed", "post-execution of {task}: refused: {e}")
            }
        }
    }
    PostExecution { edits, error }
}

/// A skill's `memex_write` during the post-execution call (the host API
/// sends it here through the call's ticket).
impl MemexWriter for Target {
    fn write(&self, edits_json: &str) -> Result<String, SkillError> {
        write(self, edits_json)
    }
}

fn write(target: &Target, edits_json: &str) -> Result<String, SkillError> {
    let request: Value = serde_json::from_str(edits_json)
        .map_err(|e| SkillError::invalid_input(format!("memex_write: not JSON: {e}")))?;
    let edits = request
        .get("edits")
        .and_then(Value::as_array)
        .ok_or_else(|| SkillError::invalid_input("memex_write: expected {\"edits\": [...]}"))?;
    let mut answers = Vec::with_capacity(edits.len());
    for edit in edits {
        let result = match one_edit(target, edit) {
            Ok(id) => WriteResult {
                edit: edit.to_string(),
                id: Some(id),
                error: None,
            },
            Err(error) => WriteResult {
                edit: edit.to_string(),
                id: None,
                error: Some(error),
            },
        };
        answers.push(match &result.error {
            None => json!({"ok": true, "id": result.id, "generation": target.memex.snapshot().generation()}),
            Some(e) => json!({"ok": false, "error": e}),
        });
        target
            .results
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(result);
    }
    Ok(json!({ "results": answers }).to_string())
}

fn text_field<'a>(edit: &'a Value, key: &str) -> Result<&'a str, String> {
    edit.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{key}` must be a string"))
}

/// Whether `value` of property `key` is a word of the host's own
/// vocabulary: a `KIND` the computed-context skill knows (`pattern`,
/// `gotcha`, `warning`, `decision`) or a `SEVERITY` (`low`, `medium`,
/// `high`, `critical`), any case. Such a word is the host's, and quotes
/// nothing even where a private line is just that word (a private node's
/// `:KIND: gotcha`): written alone, it is let through.
fn own_word(key: &str, value: &str) -> bool {
    let words: &[&str] = if key.eq_ignore_ascii_case("KIND") {
        &["pattern", "gotcha", "warning", "decision"]
    } else if key.eq_ignore_ascii_case("SEVERITY") {
        &["low", "medium", "high", "critical"]
    } else {
        &[]
    };
    words.iter().any(|word| value.eq_ignore_ascii_case(word))
}

/// The privacy check of the texts the skill wants written, in the order
/// the file will hold them, each with whether it is a word of the host's
/// vocabulary ([`own_word`]): the gate's rule for every memex write, on
/// each other text alone ([`Gate::check_write`]) and on all of them joined
/// by line breaks ([`Gate::check_write_except`], where a vocabulary word
/// is let through alone but not as part of a longer private passage), so
/// a private run split across texts that end up side by side is found.
fn check_texts(
    target: &Target,
    snapshot: &MemexSnapshot,
    texts: &[(&str, bool)],
) -> Result<(), String> {
    let mut whole = String::new();
    let mut own: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, (text, vocabulary)) in texts.iter().enumerate() {
        if i > 0 {
            whole.push('\n');
        }
        if *vocabulary {
            own.push(whole.len()..whole.len() + text.len());
        }
        whole.push_str(text);
    }
    let alone = texts
        .iter()
        .filter(|(_, vocabulary)| !vocabulary)
        .map(|(text, _)| *text);
    target
        .gate
        .check_write(alone, snapshot)
        .and_then(|()| target.gate.check_write_except(&whole, &own, snapshot))
        .map_err(|refused| refused.to_string())
}

/// The property drawer of object `id` once `key` is set to `value`: its
/// keys and values in the order the file will hold them (a key already
/// there keeps its place, a new one comes last), each with whether it is
/// a word of the host's vocabulary. A value reads on into the next line of
/// the drawer — `:A: Met Ann at the` and `:harbour: on a` are one run of
/// words — so a property is checked with its neighbours. `:EMBEDDING:`
/// values are left out, as the gate leaves them out of visible text.
fn drawer_with<'a>(
    snapshot: &'a MemexSnapshot,
    id: &str,
    key: &'a str,
    value: &'a str,
) -> Vec<(&'a str, bool)> {
    let mut parts: Vec<(&'a str, bool)> = Vec::new();
    let mut set = false;
    if let Some(object) = snapshot.get(id) {
        for (k, v) in object.properties() {
            if k.eq_ignore_ascii_case(key) {
                if !set {
                    parts.extend([(key, false), (value, own_word(key, value))]);
                    set = true;
                }
            } else if !k.eq_ignore_ascii_case("EMBEDDING") {
                parts.extend([(k, false), (v, own_word(k, v))]);
            }
        }
    }
    if !set {
        parts.extend([(key, false), (value, own_word(key, value))]);
    }
    parts
}

/// One edit; the id written.
fn one_edit(target: &Target, edit: &Value) -> Result<String, String> {
    let memex = &target.memex;
    let visible = |snapshot: &MemexSnapshot, id: &str| -> Result<(), String> {
        // The same answer for a private object as for a missing one.
        match snapshot.get(id) {
            Some(object) if !target.privacy.is_private(object) => Ok(()),
            _ => Err("no visible object has that id".to_owned()),
        }
    };
    let set_property = |id: &str, key: &str, value: &str| -> Result<(), String> {
        if key.eq_ignore_ascii_case("ID") {
            return Err("refused: a skill does not change ids".to_owned());
        }
        let snapshot = memex.snapshot();
        visible(&snapshot, id)?;
        // Every key and value, `KIND`, `SEVERITY` and `SOURCE` too, with
        // the drawer it joins: what the drawer holds is visible text.
        check_texts(target, &snapshot, &drawer_with(&snapshot, id, key, value))?;
        memex
            .set_property(&snapshot, id, key, value)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    match edit.get("op").and_then(Value::as_str) {
        Some("set_property") => {
            let id = text_field(edit, "id")?;
            set_property(id, text_field(edit, "key")?, text_field(edit, "value")?)?;
            Ok(id.to_owned())
        }
        Some("add_child") => {
            let parent = text_field(edit, "parent")?;
            let title = text_field(edit, "title")?;
            let body = edit.get("body").and_then(Value::as_str);
            let tags: Vec<String> = match edit.get("tags") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|t| t.as_str().map(str::to_owned).ok_or("`tags` are strings"))
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err("`tags` must be a list of strings".to_owned()),
            };
            if let Some(t) = tags.iter().find(|t| target.privacy.matches(t)) {
                return Err(format!("refused: {t:?} is a privacy tag"));
            }
            let properties: Vec<(String, String)> = match edit.get("properties") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|p| match p.as_array().map(Vec::as_slice) {
                        Some([Value::String(k), Value::String(v)]) => Ok((k.clone(), v.clone())),
                        _ => Err("each property is [key, value]".to_owned()),
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err("`properties` must be a list of [key, value]".to_owned()),
            };
            let snapshot = memex.snapshot();
            visible(&snapshot, parent)?;
            // Every text of the edit before any of it is written (a
            // refused property must not leave its headline behind), in
            // the order the file will hold them: the headline's title and
            // tags (one line: the tags read on from the title), every key
            // and value of its drawer, its body.
            let tag_line = tags.join(" ");
            let mut texts: Vec<(&str, bool)> = vec![(title, false), (tag_line.as_str(), false)];
            for (key, value) in &properties {
                texts.push((key.as_str(), false));
                texts.push((value.as_str(), own_word(key, value)));
            }
            texts.extend(body.map(|body| (body, false)));
            check_texts(target, &snapshot, &texts)?;
            let written = memex
                .add_child(&snapshot, parent, title, body)
                .map_err(|e| e.to_string())?;
            let id = written.id;
            if !tags.is_empty() {
                let snapshot = memex.snapshot();
                memex
                    .apply(&snapshot, &id, &Edit::SetTags { tags })
                    .map_err(|e| format!("{id} added, its tags not: {e}"))?;
            }
            for (key, value) in &properties {
                set_property(&id, key, value)
                    .map_err(|e| format!("{id} added, its property {key} not: {e}"))?;
            }
            Ok(id)
        }
        Some(other) => Err(format!(
            "unknown op {other:?}; the ops are add_child and set_property"
        )),
        None => Err("an edit needs an `op`".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_api::memex_write;

    const ORG: &str = "* Knowledge\n:PROPERTIES:\n:ID: k\n:END:\n* Diary :@personal:\n:PROPERTIES:\n:ID: diary\n:END:\nMy secret plan for the garden party next week.\n";

    fn open_ticket(dir: &std::path::Path) -> (WriteTicket, Arc<Target>) {
        std::fs::write(dir.join("a.org"), ORG).unwrap();
        let memex = Arc::new(Memex::open(&[dir.to_path_buf()]).unwrap());
        let privacy = PrivacyTags::new(["@personal"]);
        let gate = Arc::new(Gate::new(privacy.clone(), &[], true).unwrap());
        let target = Arc::new(Target {
            memex,
            privacy,
            gate,
            results: Mutex::new(Vec::new()),
        });
        let ticket = WriteTicket::open(Arc::clone(&target) as Arc<dyn MemexWriter>);
        (ticket, target)
    }

    fn results(answer: &str) -> Vec<Value> {
        let v: Value = serde_json::from_str(answer).unwrap();
        v["results"].as_array().unwrap().clone()
    }

    #[test]
    fn writes_go_through_the_privacy_checks_and_only_under_an_open_ticket() {
        let dir = tempfile::tempdir().unwrap();
        let (ticket, target) = open_ticket(dir.path());
        let edits = json!({"edits": [
            {"op": "add_child", "parent": "diary", "title": "Under a private parent"},
            {"op": "add_child", "parent": "k", "title": "Hidden", "tags": ["@PERSONAL"]},
            {"op": "add_child", "parent": "k", "title": "my secret plan for the garden party next week"},
            {"op": "set_property", "id": "diary", "key": "KIND", "value": "pattern"},
            {"op": "set_property", "id": "k", "key": "ID", "value": "other"},
            {"op": "delete", "id": "k"},
            {"op": "add_child", "parent": "k", "title": "A fine node", "tags": ["auth"], "properties": [["KIND", "pattern"]]}
        ]});
        let answer = memex_write(ticket.number(), &edits.to_string()).unwrap();
        let r = results(&answer);
        let errors: Vec<&str> = r
            .iter()
            .map(|x| x["error"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(errors[0], "no visible object has that id");
        assert!(errors[1].contains("privacy tag"), "{}", errors[1]);
        assert!(errors[2].contains("private text"), "{}", errors[2]);
        assert_eq!(errors[3], "no visible object has that id");
        assert!(errors[4].contains("ids"), "{}", errors[4]);
        assert!(errors[5].contains("unknown op"), "{}", errors[5]);
        assert_eq!(r[6]["ok"], true, "{answer}");
        let text = std::fs::read_to_string(dir.path().join("a.org")).unwrap();
        assert!(
            text.contains("** A fine node :auth:\n:PROPERTIES:\n"),
            "{text}"
        );
        assert!(
            text.ends_with(&ORG[ORG.find("* Diary").unwrap()..]),
            "{text}"
        );
        assert_eq!(target.results.lock().unwrap().len(), 7);
        let closed = ticket.number();
        drop(ticket);
        let err = memex_write(closed, &edits.to_string()).unwrap_err();
        assert!(err.message.contains("no open write ticket"), "{err}");
        assert!(memex_write(closed + 1_000_000, "{").is_err());
    }

    /// F4 of the privacy review: a property's value was checked only
    /// after its headline was written, so a refused value left the
    /// headline behind.
    #[test]
    fn a_write_with_private_text_writes_nothing_and_the_same_write_in_public_text_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let (open, _) = open_ticket(dir.path());
        let ticket = open.number();
        let file = dir.path().join("a.org");
        let edits = |text: &str| {
            json!({"edits": [
                {"op": "add_child", "parent": "k", "title": text},
                {"op": "add_child", "parent": "k", "title": "Party", "body": text},
                {"op": "add_child", "parent": "k", "title": "Party", "properties": [["NOTES", text]]},
                {"op": "set_property", "id": "k", "key": "NOTES", "value": text}
            ]})
            .to_string()
        };
        let before = std::fs::read(&file).unwrap();
        let answer = memex_write(
            ticket,
            &edits("My SECRET plan for the garden party next week"),
        )
        .unwrap();
        let refused = results(&answer);
        assert_eq!(refused.len(), 4, "{answer}");
        for result in &refused {
            assert_eq!(result["ok"], false, "{answer}");
            assert_eq!(result["error"], crate::egress::WRITE_REFUSED, "{answer}");
        }
        assert_eq!(
            std::fs::read(&file).unwrap(),
            before,
            "a refused write changed the file"
        );
        // The same edits in public text are made.
        let answer = memex_write(ticket, &edits("Buy more chairs for the hall")).unwrap();
        assert!(
            results(&answer)
                .iter()
                .all(|r| r["ok"].as_bool() == Some(true)),
            "{answer}"
        );
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            text.matches("Buy more chairs for the hall").count(),
            4,
            "{text}"
        );
    }

    /// Review of privacy v3: tags, `KIND`, `SEVERITY` and `SOURCE` values
    /// went unchecked, and each text was checked alone — so a private run
    /// cut between a title and its tags, or between two properties of a
    /// drawer, was written into visible text whole.
    #[test]
    fn tags_every_property_and_texts_side_by_side_are_checked_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let (open, _) = open_ticket(dir.path());
        let ticket = open.number();
        let file = dir.path().join("a.org");
        let private = "My secret plan for the garden party next week";
        // A run cut between the title and its tags; a private value in
        // each property the write-back took for one word; a run cut
        // between a value and the key after it (a key is a word).
        let edits = json!({"edits": [
            {"op": "add_child", "parent": "k", "title": "My secret plan for", "tags": ["the", "garden", "party"]},
            {"op": "add_child", "parent": "k", "title": "Node", "properties": [["KIND", private]]},
            {"op": "set_property", "id": "k", "key": "SOURCE", "value": private},
            {"op": "set_property", "id": "k", "key": "SEVERITY", "value": private},
            {"op": "set_property", "id": "k", "key": "PLAN", "value": "My secret plan for"},
            {"op": "set_property", "id": "k", "key": "the", "value": "garden party next"}
        ]});
        let before = std::fs::read_to_string(&file).unwrap();
        let answer = memex_write(ticket, &edits.to_string()).unwrap();
        let r = results(&answer);
        assert_eq!(r.len(), 6, "{answer}");
        for i in [0, 1, 2, 3, 5] {
            assert_eq!(r[i]["error"], crate::egress::WRITE_REFUSED, "{i}: {answer}");
        }
        // Four words alone are no quote: the positive control of the last
        // edit, which it joins.
        assert_eq!(r[4]["ok"], true, "{answer}");
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            text,
            before.replacen(":ID: k\n", ":ID: k\n:PLAN: My secret plan for\n", 1),
            "a refused edit wrote"
        );
        // The same edits in public text are made.
        let edits = json!({"edits": [
            {"op": "add_child", "parent": "k", "title": "Rake the", "tags": ["garden", "paths"], "properties": [["KIND", "pattern"], ["SEVERITY", "high"], ["SOURCE", "k"]]},
            {"op": "set_property", "id": "k", "key": "ORDER", "value": "garden paths first"}
        ]});
        let answer = memex_write(ticket, &edits.to_string()).unwrap();
        assert!(results(&answer).iter().all(|r| r["ok"] == true), "{answer}");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("** Rake the :garden:paths:\n"), "{text}");
        assert!(text.contains(":SEVERITY: high\n"), "{text}");
        assert!(text.contains(":ORDER: garden paths first\n"), "{text}");
    }

    #[test]
    fn bad_json_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let (ticket, _) = open_ticket(dir.path());
        assert!(
            memex_write(ticket.number(), "not json")
                .unwrap_err()
                .message
                .contains("not JSON")
        );
        assert!(
            memex_write(ticket.number(), "{}")
                .unwrap_err()
                .message
                .contains("edits")
        );
        let answer = memex_write(
            ticket.number(),
            r#"{"edits": [{"op": "add_child", "parent": 3}]}"#,
        )
        .unwrap();
        assert!(
            results(&answer)[0]["error"]
                .as_str()
                .unwrap()
                .contains("parent")
        );
    }
}
