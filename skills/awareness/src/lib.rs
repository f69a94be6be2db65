//! The `awareness` skill: the foveal–peripheral outline of the memex (seed 000).
//!
//! See `README.md` beside this crate for what it renders, how it differs
//! from the seed, and its fallback.

mod handles;
mod map;
mod par;
mod render;
mod scan;
mod select;

use foveal_sdk::{Component, ComponentsRequest, HostApiRef, Omitted, Role, SkillError, Source};

pub use foveal_sdk::projects::{Rule, Rules};
pub use render::{Format, Included, Omissions, Options, Reason, Rendered, render};

/// The prompt component the outline fills (seed 004: semantic memories).
pub const COMPONENT_ID: u32 = 2000;

fn init(_host: &HostApiRef) -> Result<(), SkillError> {
    foveal_sdk::skill_debug!("awareness ready");
    Ok(())
}

/// The skill's configuration, as the host passes it (JSON).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Cosine similarity from which an object is promoted.
    threshold: Option<f32>,
    /// Reuse work from earlier renders (default true; off to time the
    /// work itself).
    cache: Option<bool>,
    /// The rules that make a headline a project (default: all).
    projects: Option<Vec<String>>,
    /// Show the map of the memex when no project is found (default true).
    map: Option<bool>,
    /// Each lent file's modification time, Unix seconds, in view order.
    modified: Option<Vec<i64>>,
    /// Each lent file's file tags (its `#+FILETAGS:` and its setup
    /// files'), in view order.
    file_tags: Option<Vec<Vec<String>>>,
    /// Each lent file's TODO keywords (not-done and done), in view order.
    todo_keywords: Option<Vec<Vec<String>>>,
    /// `compact` (the default) or `seed`.
    format: Option<String>,
}

/// Reads `{"threshold": 0.75, "cache": true, "projects": ["tag", …],
/// "map": true, "modified": […], "file_tags": […], "todo_keywords": […],
/// "format": "compact"}`;
/// anything missing takes the default, anything else is refused with what
/// was wrong.
fn options(config_json: &str) -> Result<Options, SkillError> {
    let mut options = Options::default();
    let text = config_json.trim();
    if text.is_empty() {
        return Ok(options);
    }
    let config: Config = serde_json::from_str(text)
        .map_err(|e| SkillError::invalid_input(format!("awareness configuration: {e}")))?;
    if let Some(threshold) = config.threshold {
        if !threshold.is_finite() {
            return Err(SkillError::invalid_input(
                "awareness configuration: threshold must be a finite number",
            ));
        }
        options.threshold = threshold;
    }
    if let Some(cache) = config.cache {
        options.cache = cache;
    }
    if let Some(names) = config.projects {
        options.rules = Rules::parse(&names).map_err(|e| {
            SkillError::invalid_input(format!("awareness configuration: projects: {e}"))
        })?;
    }
    if let Some(map) = config.map {
        options.map = map;
    }
    if let Some(modified) = config.modified {
        options.modified = modified;
    }
    if let Some(name) = config.format {
        options.format = Format::parse(&name).ok_or_else(|| {
            SkillError::invalid_input(format!(
                "awareness configuration: format: unknown format {name:?}; the formats are compact and seed"
            ))
        })?;
    }
    options.file_tags = config.file_tags;
    options.todo_keywords = config.todo_keywords;
    Ok(options)
}

fn components(request: &ComponentsRequest<'_>) -> Result<Vec<Component>, SkillError> {
    let mut options = options(request.config_json.as_str())?;
    options.budget = request.budget_tokens.into_option().map(|b| b as usize);
    options.explain = request.explain;
    let focus = request.focus.as_ref().into_option().map(|f| f.as_str());
    let count = |text: &str| {
        foveal_sdk::host::count_tokens(text)
            .unwrap_or_else(|| foveal_sdk::host::estimate_tokens(text))
    };
    let rendered = render(request.memex, focus, &options, &count);
    let mut component = Component::new(
        COMPONENT_ID,
        "awareness",
        "Global memex awareness",
        Role::SYSTEM,
        rendered.text,
    );
    if request.explain {
        let files = request.memex.files.as_slice();
        component.sources = rendered
            .included
            .iter()
            .map(|inc| Source {
                id: files[inc.file as usize].id(inc.index).into(),
                reason: match inc.project {
                    Some(rule) => format!("{} (project: {rule})", inc.reason),
                    None => inc.reason.to_string(),
                }
                .into(),
            })
            .collect();
        // The map's files, each with why it was kept (named by its path
        // below the memex's common folder, as the map names it).
        let base = crate::map::common_dir(files);
        component
            .sources
            .extend(rendered.files.iter().map(|(f, why)| {
                let path = files[*f as usize].path.as_str();
                Source {
                    id: path.get(base..).unwrap_or(path).into(),
                    reason: format!("map file, {why}").into(),
                }
            }));
        let o = rendered.omitted;
        component.omitted = [
            ("depth", o.depth),
            ("outline", o.outline),
            ("foveal", o.foveal),
            ("semantic", o.semantic),
            ("ancestor", o.ancestor),
            ("map", o.map),
            ("file", o.files),
        ]
        .into_iter()
        .filter(|&(_, n)| n > 0)
        .map(|(reason, count)| Omitted {
            reason: reason.into(),
            count,
        })
        .collect();
    }
    Ok(vec![component])
}

foveal_sdk::export_skill! {
    name: "awareness",
    priority: 80,
    dependencies: [],
    description: "Foveal-peripheral outline of the memex: its projects, the focus and similar objects in full, the rest as outline (seed 000); a map of the files when there is no project.",
    component_ids: [2000],
    init: init,
    hooks: { components: components },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_reads_every_key_and_refuses_unknown_ones() {
        let o = options(
            r#"{"threshold": 0.5, "cache": false, "projects": ["tag", "gtd"], "map": false,
                "modified": [3, 1], "file_tags": [["project"], []], "todo_keywords": [["TODO", "DONE"], []],
                "format": "seed"}"#,
        )
        .unwrap();
        assert_eq!(o.threshold, 0.5);
        assert!(!o.cache && !o.map);
        assert_eq!(
            o.rules,
            Rules::parse(&["tag".into(), "gtd".into()]).unwrap()
        );
        assert_eq!(o.modified, [3, 1]);
        assert_eq!(o.format, Format::Seed);
        assert_eq!(o.facts(0).file_tags, Some(&["project".to_owned()][..]));
        assert_eq!(o.facts(5).file_tags, None);
        assert_eq!(options("").unwrap(), Options::default());
        assert_eq!(options("{}").unwrap(), Options::default());
        let err = options(r#"{"projects": ["tags"]}"#).unwrap_err();
        assert!(format!("{err:?}").contains("unknown rule"), "{err:?}");
        let err = options(r#"{"format": "terse"}"#).unwrap_err();
        assert!(format!("{err:?}").contains("unknown format"), "{err:?}");
        let err = options(r#"{"rules": []}"#).unwrap_err();
        assert!(format!("{err:?}").contains("unknown field"), "{err:?}");
    }
}
