//! The crates' invariants of docs/architecture.md ("What each crate must
//! never depend on"), checked against `cargo metadata`: a dependency that
//! breaks one fails here, with the rule and the reason.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

/// Every workspace package: its manifest's folder (relative to the
/// workspace) and its direct normal dependencies.
struct Workspace {
    packages: BTreeMap<String, (String, BTreeSet<String>)>,
}

impl Workspace {
    fn read() -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let output = std::process::Command::new(env!("CARGO"))
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ])
            .current_dir(root)
            .output()
            .expect("run cargo metadata");
        assert!(
            output.status.success(),
            "cargo metadata: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
        let mut packages = BTreeMap::new();
        for package in metadata["packages"].as_array().unwrap() {
            let name = package["name"].as_str().unwrap().to_owned();
            let manifest = Path::new(package["manifest_path"].as_str().unwrap());
            let folder = manifest
                .parent()
                .unwrap()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let normal = package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .collect();
            packages.insert(name, (folder, normal));
        }
        Self { packages }
    }

    fn direct(&self, name: &str) -> &BTreeSet<String> {
        &self
            .packages
            .get(name)
            .unwrap_or_else(|| panic!("no package {name} in the workspace"))
            .1
    }

    /// The workspace crates `name` depends on, directly or through others.
    fn reaches(&self, name: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![name.to_owned()];
        while let Some(next) = todo.pop() {
            for dep in self.direct(&next) {
                if self.packages.contains_key(dep) && seen.insert(dep.clone()) {
                    todo.push(dep.clone());
                }
            }
        }
        seen
    }

    fn is_workspace(&self, name: &str) -> bool {
        self.packages.contains_key(name)
    }
}

/// A rule: `crate_` must never depend on any of `never`, directly
/// (`transitive: false`) or through other workspace crates.
struct Never {
    crate_: &'static str,
    never: &'static [&'static str],
    transitive: bool,
    why: &'static str,
}

/// The host's crates and what the layers below must not know of.
const HOST: &[&str] = &[
    "foveal",
    "foveal-cli",
    "foveal-agent",
    "foveal-embed",
    "foveal-cell",
    "foveal-gate",
    "foveal-registry",
    "foveal-prompt",
];
const NETWORK: &[&str] = &["reqwest", "hyper", "ureq", "curl"];
const UI: &[&str] = &["clap", "ratatui", "crossterm", "indicatif"];

const RULES: &[Never] = &[
    Never {
        crate_: "foveal-embed",
        never: &["foveal-prompt", "foveal-agent", "foveal-cli", "foveal"],
        transitive: true,
        why: "the embedding service decides what is embedded and keeps the vectors; it knows nothing of prompts, the agent or the commands",
    },
    Never {
        crate_: "foveal-embed",
        never: &[
            "reqwest",
            "hyper",
            "ureq",
            "curl",
            "clap",
            "ratatui",
            "crossterm",
            "indicatif",
        ],
        transitive: false,
        why: "the embedders that talk to a model are the provider's; the service draws nothing",
    },
    Never {
        crate_: "foveal-agent",
        never: &["foveal-cli", "foveal"],
        transitive: true,
        why: "the agent runs cycles and serves the control socket; it knows nothing of the command line or the terminal client",
    },
    Never {
        crate_: "foveal-agent",
        never: &[
            "reqwest",
            "hyper",
            "ureq",
            "curl",
            "clap",
            "ratatui",
            "crossterm",
            "indicatif",
        ],
        transitive: false,
        why: "the agent reaches a model only through the provider, after the gate, and draws nothing",
    },
    Never {
        crate_: "foveal-memex",
        never: &[
            "foveal-provider",
            "foveal-gate",
            "foveal-cell",
            "foveal-embed",
            "foveal-agent",
            "foveal-cli",
            "foveal",
        ],
        transitive: true,
        why: "the memex knows nothing of models, the gate, cells or the host",
    },
    Never {
        crate_: "foveal-memex",
        never: NETWORK,
        transitive: false,
        why: "the memex never talks to the network",
    },
    Never {
        crate_: "foveal-provider",
        never: &[
            "foveal-memex",
            "foveal-sdk",
            "foveal-gate",
            "foveal-cell",
            "foveal-embed",
            "foveal-agent",
            "foveal-cli",
            "foveal",
        ],
        transitive: true,
        why: "the provider builds and sends bodies; it cannot see the memex or a skill, and never decides what may be sent",
    },
    Never {
        crate_: "foveal-gate",
        never: &["foveal-cell", "foveal-agent", "foveal-cli", "foveal"],
        transitive: true,
        why: "the gate reaches the privacy skill only through its own traits, never the registry or a cell",
    },
    Never {
        crate_: "foveal-cell",
        never: &[
            "foveal-provider",
            "foveal-gate",
            "foveal-agent",
            "foveal-cli",
            "foveal",
        ],
        transitive: true,
        why: "a cell knows the SDK and the memex's view, nothing of models, the gate or the host's registry",
    },
    Never {
        crate_: "foveal-cell",
        never: NETWORK,
        transitive: false,
        why: "a cell holds no network client",
    },
    Never {
        crate_: "foveal-prompt",
        never: &["foveal-embed", "foveal-agent", "foveal-cli", "foveal"],
        transitive: true,
        why: "the prompt knows nothing of the agent, the commands or the configuration's assembly",
    },
    Never {
        crate_: "foveal-prompt",
        never: &[
            "reqwest",
            "hyper",
            "ureq",
            "curl",
            "clap",
            "ratatui",
            "crossterm",
            "indicatif",
        ],
        transitive: false,
        why: "the prompt talks to no network (it builds messages; the provider sends them) and draws nothing",
    },
    Never {
        crate_: "foveal-registry",
        never: &[
            "foveal-prompt",
            "foveal-embed",
            "foveal-agent",
            "foveal-cli",
            "foveal",
        ],
        transitive: true,
        why: "the skill host knows nothing of prompts, models or the agent: it loads, checks and calls skills",
    },
    Never {
        crate_: "foveal-registry",
        never: &["foveal-provider", "reqwest", "hyper", "ureq", "curl"],
        transitive: false,
        why: "the skill host talks to no model and no network",
    },
    Never {
        crate_: "foveal-registry",
        never: UI,
        transitive: false,
        why: "arguments and terminal drawing belong to the binary",
    },
    Never {
        crate_: "foveal-gate",
        never: UI,
        transitive: false,
        why: "arguments and terminal drawing belong to the binary",
    },
    Never {
        crate_: "foveal-memex",
        never: UI,
        transitive: false,
        why: "arguments and terminal drawing belong to the binary",
    },
    Never {
        crate_: "foveal-provider",
        never: UI,
        transitive: false,
        why: "arguments and terminal drawing belong to the binary",
    },
];

/// The leaves: no workspace crate below them.
const LEAVES: &[&str] = &[
    "foveal-org",
    "foveal-settings",
    "foveal-redact",
    "foveal-kernels",
    "foveal-sdk-build",
];

#[test]
fn each_crate_keeps_the_invariants_of_the_architecture_document() {
    let broken = broken(&Workspace::read());
    assert!(
        broken.is_empty(),
        "docs/architecture.md's invariants are broken:\n{}",
        broken.join("\n")
    );
}

/// Each invariant the workspace breaks, in words.
fn broken(workspace: &Workspace) -> Vec<String> {
    let mut broken = Vec::new();
    for rule in RULES {
        let deps = if rule.transitive {
            let mut all = workspace.reaches(rule.crate_);
            all.extend(workspace.direct(rule.crate_).iter().cloned());
            all
        } else {
            workspace.direct(rule.crate_).clone()
        };
        for never in rule.never {
            if deps.contains(*never) {
                broken.push(format!(
                    "{} depends on {never}{}: {}",
                    rule.crate_,
                    if rule.transitive {
                        " (directly or through another crate)"
                    } else {
                        ""
                    },
                    rule.why
                ));
            }
        }
    }
    for leaf in LEAVES {
        for dep in workspace.direct(leaf) {
            if workspace.is_workspace(dep) {
                broken.push(format!("{leaf} depends on {dep}: it is a leaf"));
            }
        }
    }
    // The SDK is what every skill's build compiles: the ABI crate and the
    // Org scanner (its dates and its test harness), nothing else.
    for dep in workspace.direct("foveal-sdk") {
        if !["abi_stable", "foveal-org"].contains(&dep.as_str()) {
            broken.push(format!(
                "foveal-sdk depends on {dep}: a skill's build compiles the SDK, which holds the ABI and the test harness only"
            ));
        }
    }
    // Skills and fixtures reach the host through the ABI only.
    let allowed = ["foveal-sdk", "foveal-sdk-build", "foveal-redact"];
    for (name, (folder, deps)) in &workspace.packages {
        if !(folder.starts_with("skills/") || folder.starts_with("tests/")) {
            continue;
        }
        for dep in deps {
            if workspace.is_workspace(dep) && !allowed.contains(&dep.as_str()) {
                broken.push(format!(
                    "{name} ({folder}) depends on {dep}: a skill knows the host only through foveal-sdk"
                ));
            }
            if NETWORK.contains(&dep.as_str()) || HOST.contains(&dep.as_str()) {
                broken.push(format!(
                    "{name} ({folder}) depends on {dep}: a skill gets no network client and no host crate"
                ));
            }
        }
    }
    // Only the command line and the provider talk to the network.
    for (name, (_, deps)) in &workspace.packages {
        if ["foveal-cli", "foveal-provider"].contains(&name.as_str()) {
            continue;
        }
        for dep in deps {
            if NETWORK.contains(&dep.as_str()) {
                broken.push(format!(
                    "{name} depends on {dep}: only foveal-provider and foveal-cli talk to the network"
                ));
            }
        }
    }
    broken
}

/// The check can fail: edges that break invariants, added to the real
/// graph, are each found — one through another crate.
#[test]
fn a_broken_invariant_is_found() {
    let mut workspace = Workspace::read();
    let mut add = |from: &str, to: &str| {
        workspace
            .packages
            .get_mut(from)
            .unwrap()
            .1
            .insert(to.to_owned());
    };
    add("foveal-cell", "reqwest");
    add("foveal-org", "foveal-sdk");
    add("foveal-skill-awareness", "foveal-memex");
    // The provider reaching the memex through the settings crate.
    add("foveal-settings", "foveal-memex");
    // The agent drawing on the terminal; the embedding service depending
    // on the agent.
    add("foveal-agent", "ratatui");
    add("foveal-embed", "foveal-agent");
    let broken = broken(&workspace);
    for expected in [
        "foveal-cell depends on reqwest: a cell holds no network client",
        "foveal-org depends on foveal-sdk: it is a leaf",
        "foveal-skill-awareness (skills/awareness) depends on foveal-memex",
        "foveal-provider depends on foveal-memex (directly or through another crate)",
        "foveal-agent depends on ratatui: the agent reaches a model only through the provider",
        "foveal-embed depends on foveal-agent (directly or through another crate)",
    ] {
        assert!(
            broken.iter().any(|b| b.starts_with(expected)),
            "{expected:?} not in {broken:#?}"
        );
    }
}

/// No crate's files import each other in a circle of more than three
/// (`scripts/module-circles.py`, which says where each arrow comes from
/// with `--edges`).
#[test]
fn no_import_circle_of_more_than_three_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let output = std::process::Command::new("python3")
        .arg(root.join("scripts/module-circles.py"))
        .args(["--max", "3"])
        .current_dir(root)
        .output()
        .expect("run python3 scripts/module-circles.py");
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
