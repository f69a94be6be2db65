//! Host facts — the session a prompt is for and the time of the call —
//! reach a skill through the host API while its hook runs, never through
//! its configuration, in a cell and in the host's process; and a library
//! built with SDK 0.2.1 (whose host API has neither) still loads and runs.

use crate::support::{file_name, install, library, run_foveal, sha256_of};

/// The line after `=== ID KEY` in `foveal prompt`'s output.
fn section_line<'a>(out: &'a str, header: &str) -> &'a str {
    let at = out
        .find(header)
        .unwrap_or_else(|| panic!("no {header} in:\n{out}"));
    out[at..].lines().nth(1).unwrap_or("")
}

/// `foveal prompt` in `dir`, with its `foveal.toml`, `plugins/` and
/// `memex/`.
fn prompt_in(dir: &std::path::Path) -> std::process::Output {
    run_foveal(
        dir,
        &[
            "--config",
            "foveal.toml",
            "prompt",
            "--plugins",
            "plugins",
            "--memex",
            "memex",
            "--message",
            "hi",
        ],
    )
}

fn local_date() -> String {
    let (y, m, d) = foveal::host_api::local_now().date();
    format!("{y:04}-{m:02}-{d:02}")
}

#[test]
fn host_facts_reach_a_skill_apart_from_its_configuration_in_a_cell_and_in_process() {
    for in_process in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let plugins = dir.path().join("plugins");
        std::fs::create_dir(&plugins).unwrap();
        install(&library("host-facts"), &plugins, &file_name("host-facts"));
        let old = "components-sdk-0-2-1";
        install(&library(old), &plugins, &file_name(old));
        std::fs::create_dir(dir.path().join("memex")).unwrap();
        std::fs::write(dir.path().join("memex/notes.org"), "* Work :project:\n").unwrap();
        let (trusted, isolation) = if in_process {
            (
                format!(
                    "[plugins]\ntrusted = [\"{}\", \"{}\"]\n\n",
                    sha256_of(&library("host-facts")),
                    sha256_of(&library(old))
                ),
                "isolation = \"in-process\"\n",
            )
        } else {
            (String::new(), "")
        };
        std::fs::write(
            dir.path().join("foveal.toml"),
            format!(
                "{trusted}[agent]\nsession = \"work\"\n\n[skills.host-facts]\ncolour = \"blue\"\n{isolation}\n[skills.{old}]\ncolour = \"red\"\n{isolation}"
            ),
        )
        .unwrap();
        let before = local_date();
        let output = prompt_in(dir.path());
        let out = String::from_utf8_lossy(&output.stdout);
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{err}");
        let place = if in_process {
            "in process"
        } else {
            "in a cell"
        };
        let facts = section_line(&out, "=== 4610 host-facts");
        // The session and the local date as the host sees them; the
        // configuration is the user's table and nothing of the host's.
        assert!(
            facts.starts_with(&format!("session work; now {before} "))
                || facts.starts_with(&format!("session work; now {} ", local_date())),
            "{place}: {facts}"
        );
        assert!(
            facts.ends_with("; config {\"colour\":\"blue\"}"),
            "{place}: {facts}"
        );
        // Built with 0.2.1: loads, runs, and gets only its table.
        assert_eq!(
            section_line(&out, "=== 4620 old-sdk"),
            "built with 0.2.1; config {\"colour\":\"red\"}; focus none; 1 files",
            "{place}"
        );
        assert!(!err.contains("error"), "{place}: {err}");
    }
}

#[test]
fn a_library_built_with_sdk_0_2_1_loads_in_this_host() {
    let sandbox = crate::support::Sandbox::new();
    let loader = foveal::loader::Loader::new(sandbox.shadow(), 100).unwrap();
    let old = "components-sdk-0-2-1";
    let path = install(&library(old), &sandbox.plugins(), &file_name(old));
    let loaded = loader
        .load(&path)
        .expect("a 0.2.1 library loads in a 0.2.2 host");
    assert_eq!(loaded.info.sdk_version, "0.2.1");
    assert_ne!(foveal_sdk::SDK_VERSION, "0.2.1");
    assert_eq!(loaded.info.hooks, ["components"]);
}

#[test]
fn a_hook_in_the_hosts_process_reads_the_facts_of_its_call() {
    let facts = foveal_sdk::call::CallFacts {
        session: Some("work".to_owned()),
        now: Some(foveal_sdk::Now::new(1_795_908_600, 3600)),
    };
    let sandbox = crate::support::Sandbox::new();
    sandbox.install("host-facts", "host-facts");
    let registry = sandbox.registry();
    registry.scan();
    let snapshot = foveal::memex::snapshot::MemexSnapshot::default();
    let call = foveal::memex::view::ComponentsCall {
        view: foveal::memex::view::SnapshotView::new(
            &snapshot,
            &foveal::memex::privacy::PrivacyTags::default(),
        ),
        signal: foveal_sdk::SignalKind::USER,
        focus: None,
        budget: None,
        config: "{}".to_owned(),
        explain: false,
        facts,
    };
    let components = registry
        .snapshot()
        .call(
            "host-facts",
            foveal::registry::hooks::COMPONENTS,
            move |f| call.call(f),
        )
        .unwrap();
    assert_eq!(
        components[0].content.as_str(),
        "session work; now 2026-11-29 00:30 +01:00; config {}"
    );
}

/// What a skill logs with `skill_warn!` and `skill_error!` reaches stderr
/// at the default log level (no `FOVEAL_LOG`), attributed to the skill, in
/// a cell and in the host's process; its info and debug lines do not.
#[test]
fn a_skills_warn_and_error_lines_reach_stderr_at_the_default_level() {
    for in_process in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let plugins = dir.path().join("plugins");
        std::fs::create_dir(&plugins).unwrap();
        install(&library("host-facts"), &plugins, &file_name("host-facts"));
        std::fs::create_dir(dir.path().join("memex")).unwrap();
        std::fs::write(dir.path().join("memex/notes.org"), "* Work :project:\n").unwrap();
        let config = if in_process {
            format!(
                "[plugins]\ntrusted = [\"{}\"]\n\n[skills.host-facts]\nlog = true\nisolation = \"in-process\"\n",
                sha256_of(&library("host-facts"))
            )
        } else {
            "[skills.host-facts]\nlog = true\n".to_owned()
        };
        std::fs::write(dir.path().join("foveal.toml"), config).unwrap();
        let output = prompt_in(dir.path());
        let err = String::from_utf8_lossy(&output.stderr);
        let place = if in_process {
            "in process"
        } else {
            "in a cell"
        };
        assert!(output.status.success(), "{place}: {err}");
        for (said, level) in [
            ("host-facts says warn", "WARN"),
            ("host-facts says error", "ERROR"),
        ] {
            let line = err
                .lines()
                .find(|l| l.contains(said))
                .unwrap_or_else(|| panic!("{place}: no {said:?} in:\n{err}"));
            assert!(
                line.contains(level) && line.contains("host-facts"),
                "{place}: {line}"
            );
        }
        assert!(!err.contains("says info"), "{place}: {err}");
        // The section's header names the component as the skill does.
        let out = String::from_utf8_lossy(&output.stdout);
        assert!(
            out.contains("=== 4610 host-facts \u{2014} Host facts (system, "),
            "{place}: {out}"
        );
        assert!(!err.contains("says debug"), "{place}: {err}");
    }
}
