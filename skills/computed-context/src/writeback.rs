//! Post-execution (seed 001, "In Post-Execution"): when a task is marked
//! done, what its handoff taught goes back into the memex — its discovered
//! patterns (and its gotchas that are not low) become knowledge nodes, and
//! the files it created or modified update the context map.
//!
//! The skill only *plans* the edits; the host makes them
//! ([`foveal_sdk::host::memex_write`]) with its memex write API, atomic and
//! privacy-checked. The skill never touches a file.
//!
//! Planning is idempotent: a node whose title already heads a node of the
//! same kind under the knowledge headline is not added again, and a file
//! already in the map as an entry headline is updated in place (its
//! `:LOCATION:` and `:NOTES:`), so marking a task done twice writes
//! nothing new.

use foveal_sdk::memex::MemexView;
use serde_json::{Value, json};

use crate::org::Obj;
use crate::phases::{self, Options};

/// What to write, and why nothing was when nothing is.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// The edits, as the host's `memex_write` takes them.
    pub edits: Vec<Value>,
    /// Why some of the handoff was not written (no context map, …).
    pub notes: Vec<String>,
}

/// An Org tag made of a word: letters, digits, `_`, `@`, `#`, `%`; other
/// characters become `_`; lowercase.
pub fn org_tag(word: &str) -> Option<String> {
    let tag: String = word
        .trim()
        .trim_matches(':')
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '_' | '@' | '#' | '%') {
                c.to_lowercase().next().unwrap_or(c)
            } else {
                '_'
            }
        })
        .collect();
    let tag = tag.trim_matches('_').to_owned();
    (!tag.is_empty()).then_some(tag)
}

/// `INFER_COMPONENT`: the file's stem, or its folder's name when the stem
/// says nothing (`mod`, `index`, `lib`, `main`, `__init__`, `init`).
pub fn infer_component(path: &str) -> String {
    let path = path.trim_end_matches('/');
    let mut parts = path.rsplit('/');
    let name = parts.next().unwrap_or(path);
    let stem = name
        .split('.')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or(name);
    if matches!(stem, "mod" | "index" | "lib" | "main" | "__init__" | "init")
        && let Some(dir) = parts.next()
    {
        return dir.to_owned();
    }
    stem.to_owned()
}

/// The edits for task `id` of `view`, just marked done.
pub fn plan(
    view: &MemexView<'_>,
    id: &str,
    options: &Options,
) -> Result<Plan, phases::HandoffError> {
    let mut plan = Plan::default();
    let Some((file, index)) = view.find(id) else {
        plan.notes
            .push("the task is not in the memex the skill was lent".into());
        return Ok(plan);
    };
    let obj = Obj { file, index };
    let Some(task) = phases::read_task(obj, options) else {
        plan.notes
            .push("the headline is not a task (no TODO keyword)".into());
        return Ok(plan);
    };
    if !obj.done() {
        plan.notes.push("the task is not done".into());
        return Ok(plan);
    }
    let Some(handoff) = phases::read_handoff(&task)? else {
        plan.notes.push("the task has no handoff".into());
        return Ok(plan);
    };

    // Tags for a node whose handoff entry names none: the task's own
    // tags, else its domains (a node without tags is never found).
    let fallback_tags: Vec<String> = {
        let own: Vec<String> = file.tags(index).filter_map(org_tag).collect();
        if own.is_empty() {
            phases::extract_signals(&task, options)
                .domains
                .iter()
                .filter_map(|d| org_tag(d))
                .collect()
        } else {
            own
        }
    };

    // Knowledge nodes go under the knowledge headline, else under the task.
    let place = phases::find_place(view, &options.knowledge, options.cache);
    let files = view.files.as_slice();
    let (parent_file, parent_index) = match place.headline {
        Some((f, i)) => (&files[f as usize], i),
        None => {
            plan.notes.push(format!(
                "no headline {:?} for knowledge: the nodes go under the task",
                options.knowledge
            ));
            (file, index)
        }
    };
    let parent_id = parent_file.id(parent_index).to_owned();
    // The titles of the knowledge headline's nodes, by kind: a set, so a
    // handoff is checked in time linear in the nodes.
    let existing: std::collections::HashSet<(String, phases::Kind)> = parent_file
        .children(parent_index)
        .iter()
        .filter_map(|&c| {
            let o = Obj {
                file: parent_file,
                index: c,
            };
            let kind = o.property("KIND").and_then(phases::Kind::parse)?;
            Some((o.title().trim().to_lowercase(), kind))
        })
        .collect();
    let known =
        |title: &str, kind: phases::Kind| existing.contains(&(title.trim().to_lowercase(), kind));
    for p in &handoff.patterns {
        if known(&p.pattern, phases::Kind::Pattern) {
            continue;
        }
        let mut tags: Vec<String> = p.applies_to.iter().filter_map(|t| org_tag(t)).collect();
        if tags.is_empty() {
            tags.clone_from(&fallback_tags);
        }
        tags.dedup();
        let mut properties = vec![json!(["SOURCE", id])];
        if let Some(location) = &p.location {
            properties.push(json!(["FILE", location]));
        }
        properties.push(json!(["KIND", "pattern"]));
        plan.edits.push(json!({
            "op": "add_child",
            "parent": parent_id,
            "title": one_line(&p.pattern),
            "tags": tags,
            "properties": properties,
        }));
    }
    for g in handoff.gotchas.iter().filter(|g| g.severity != "low") {
        if known(&g.issue, phases::Kind::Gotcha) {
            continue;
        }
        plan.edits.push(json!({
            "op": "add_child",
            "parent": parent_id,
            "title": one_line(&g.issue),
            "tags": fallback_tags,
            "properties": [["SOURCE", id], ["SEVERITY", g.severity], ["KIND", "gotcha"]],
        }));
    }

    // The context map: UPDATE_OR_ADD by path.
    if !handoff.files.is_empty() {
        let map_place = phases::find_place(view, &options.context_map, options.cache);
        let map_parent = match (map_place.headline, map_place.file) {
            (Some((f, i)), _) => Some((&files[f as usize], i)),
            (None, Some(f)) if !files[f as usize].is_empty() => Some((&files[f as usize], 0)),
            _ => None,
        };
        match map_parent {
            None => plan.notes.push(format!(
                "no context map {:?}: {} file(s) not recorded",
                options.context_map,
                handoff.files.len()
            )),
            Some((mf, mi)) => {
                let entries = phases::context_map(view, &map_place);
                let path_of = |l: &str| l.split(':').next().unwrap_or(l).trim().to_owned();
                for f in &handoff.files {
                    let location = match &f.lines {
                        Some(lines) => format!("{}:{}", f.path, lines),
                        None => f.path.clone(),
                    };
                    let notes = f.purpose.as_deref().map(one_line);
                    // An entry headline of this path: update it in place.
                    let headline = entries.iter().find(|e| {
                        path_of(&e.location) == path_of(&f.path)
                            && view.find(&e.source).is_some_and(|(ef, ei)| {
                                Obj {
                                    file: ef,
                                    index: ei,
                                }
                                .property("LOCATION")
                                .is_some()
                            })
                    });
                    match headline {
                        Some(e) => {
                            if e.location != location {
                                plan.edits.push(json!({"op": "set_property", "id": e.source, "key": "LOCATION", "value": location}));
                            }
                            if let Some(n) = &notes
                                && *n != e.notes
                            {
                                plan.edits.push(json!({"op": "set_property", "id": e.source, "key": "NOTES", "value": n}));
                            }
                        }
                        None => {
                            let mut properties = vec![json!(["LOCATION", location])];
                            if let Some(n) = &notes {
                                properties.push(json!(["NOTES", n]));
                            }
                            plan.edits.push(json!({
                                "op": "add_child",
                                "parent": mf.id(mi),
                                "title": infer_component(&f.path),
                                "properties": properties,
                            }));
                        }
                    }
                }
            }
        }
    }
    Ok(plan)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_are_inferred_from_paths() {
        assert_eq!(infer_component("src/auth/jwt.rs"), "jwt");
        assert_eq!(infer_component("src/auth/mod.rs"), "auth");
        assert_eq!(infer_component("web/index.ts"), "web");
        assert_eq!(infer_component("README.md"), "README");
    }

    #[test]
    fn tags_are_made_org_safe() {
        assert_eq!(org_tag("Rate-limit").as_deref(), Some("rate_limit"));
        assert_eq!(org_tag(":jwt:").as_deref(), Some("jwt"));
        assert_eq!(org_tag(" - ").as_deref(), None);
    }
}
