//! A copy of the SDK (`foveal-sdk`, `foveal-sdk-build` and the Org scanner
//! `foveal-org` its `testing` feature uses), carried in the binary, for
//! `foveal skill new` to write beside a new skill when the checkout the
//! binary was built from is not on the machine.
//!
//! The crates' manifests inherit from the workspace (`version.workspace =
//! true`, `abi_stable.workspace = true`); the copy's manifests are made
//! standalone: each inherited key gets the workspace's value, path
//! dependencies point at the sibling copies, and what only the workspace
//! needs (dev-dependencies, lints) is left out.

use anyhow::Context as _;
use toml_edit::{DocumentMut, Item, Table, Value};

include!(concat!(env!("OUT_DIR"), "/sdk_files.rs"));

/// The copy's files: (path under the copy's folder, text).
pub fn files() -> anyhow::Result<Vec<(String, String)>> {
    let workspace: DocumentMut = WORKSPACE_MANIFEST
        .parse()
        .context("the embedded workspace manifest")?;
    let mut out = Vec::new();
    for (path, text) in SDK_FILES {
        let text = if path.ends_with("/Cargo.toml") {
            standalone(text, &workspace).with_context(|| format!("the embedded {path}"))?
        } else {
            (*text).to_owned()
        };
        out.push(((*path).to_owned(), text));
    }
    out.push((
        "README.md".to_owned(),
        format!(
            "# foveal-sdk {}\n\nA copy of the foveal SDK written by `foveal skill new`, for a skill built\nwhere the foveal checkout is not. `sdk/` is `foveal-sdk`, `sdk-build/` is\n`foveal-sdk-build`, `org/` is `foveal-org` (the Org scanner of the `testing`\nfeature). Replace it with the published crates when they are available.\n",
            foveal_sdk::SDK_VERSION
        ),
    ));
    Ok(out)
}

/// A member's manifest without workspace inheritance.
fn standalone(text: &str, workspace: &DocumentMut) -> anyhow::Result<String> {
    let mut doc: DocumentMut = text.parse()?;
    let package_defaults = workspace
        .get("workspace")
        .and_then(|w| w.get("package"))
        .and_then(Item::as_table_like);
    if let Some(package) = doc.get_mut("package").and_then(Item::as_table_like_mut) {
        let inherited: Vec<String> = package
            .iter()
            .filter(|(_, item)| is_inherited(item))
            .map(|(key, _)| key.to_owned())
            .collect();
        for key in inherited {
            let value = package_defaults
                .and_then(|p| p.get(&key))
                .cloned()
                .with_context(|| {
                    format!("package.{key} is inherited but the workspace has none")
                })?;
            package.insert(&key, value);
        }
        // The copy is not for publishing.
        package.insert("publish", toml_edit::value(false));
    }
    doc.remove("dev-dependencies");
    doc.remove("lints");
    doc.remove("bench");
    let deps = workspace
        .get("workspace")
        .and_then(|w| w.get("dependencies"))
        .and_then(Item::as_table_like);
    for section in ["dependencies", "build-dependencies"] {
        let Some(table) = doc.get_mut(section).and_then(Item::as_table_like_mut) else {
            continue;
        };
        let names: Vec<String> = table.iter().map(|(k, _)| k.to_owned()).collect();
        for name in names {
            let Some(item) = table.get(&name) else {
                continue;
            };
            if !is_inherited(item) {
                continue;
            }
            let base = deps.and_then(|d| d.get(&name)).with_context(|| {
                format!("dependency {name} is inherited but the workspace has none")
            })?;
            let mut merged = Table::new();
            match base.as_value() {
                Some(Value::String(version)) => {
                    merged.insert("version", toml_edit::value(version.value().clone()));
                }
                _ => {
                    if let Some(base) = base.as_table_like() {
                        for (k, v) in base.iter() {
                            merged.insert(k, v.clone());
                        }
                    }
                }
            }
            if let Some(own) = item.as_table_like() {
                for (k, v) in own.iter().filter(|(k, _)| *k != "workspace") {
                    merged.insert(k, v.clone());
                }
            }
            if let Some(path) = merged.get("path").and_then(Item::as_str) {
                // A sibling in the workspace is a sibling in the copy.
                let path = format!("../{path}");
                merged.insert("path", toml_edit::value(path));
            }
            table.insert(
                &name,
                Item::Value(Value::InlineTable(merged.into_inline_table())),
            );
        }
    }
    Ok(doc.to_string())
}

/// `key.workspace = true`, or `{ workspace = true, … }`.
fn is_inherited(item: &Item) -> bool {
    item.as_table_like()
        .and_then(|t| t.get("workspace"))
        .and_then(Item::as_bool)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_has_every_sdk_crate_and_no_workspace_inheritance() {
        let files = files().unwrap();
        for manifest in ["sdk/Cargo.toml", "sdk-build/Cargo.toml", "org/Cargo.toml"] {
            let (_, text) = files.iter().find(|(p, _)| p == manifest).unwrap();
            assert!(!text.contains("workspace"), "{manifest}:\n{text}");
            let doc: DocumentMut = text.parse().unwrap();
            assert!(doc["package"]["version"].as_str().is_some(), "{text}");
        }
        let (_, sdk) = files.iter().find(|(p, _)| p == "sdk/Cargo.toml").unwrap();
        assert!(sdk.contains("path = \"../org\""), "{sdk}");
        assert!(files.iter().any(|(p, _)| p == "sdk/src/lib.rs"));
        assert!(files.iter().any(|(p, _)| p == "sdk/src/testing.rs"));
    }
}
