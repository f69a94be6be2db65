//! The skill author's commands through the real binary: `foveal skill new`,
//! `skill check`, `skill install` and `tool call`, with real fixture
//! libraries for every way a library can be wrong.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use crate::support::{Sandbox, file_name, install, library, run_foveal};

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `foveal skill check FILE --json` in the sandbox: the exit code and the
/// report.
fn check(sandbox: &Sandbox, file: &Path) -> (Option<i32>, Value) {
    let file = file.to_str().unwrap();
    let output = run_foveal(sandbox.root.path(), &["skill", "check", file, "--json"]);
    // A panic of foveal itself (`thread 'main' panicked at …`); a skill's
    // panic is a hook failure, said as `skill hook panicked: …`.
    assert!(
        !stderr(&output).contains("panicked at"),
        "foveal crashed: {}",
        stderr(&output)
    );
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", stdout(&output), stderr(&output)));
    (output.status.code(), report)
}

/// The step of `report` called `name` (in `checks` or `calls`).
fn step<'r>(report: &'r Value, name: &str) -> &'r Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .chain(report["calls"].as_array().unwrap())
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no step {name} in {report:#}"))
}

/// The one step that failed, as (name, detail).
fn failure(report: &Value) -> (String, String) {
    let failed: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .chain(report["calls"].as_array().unwrap())
        .filter(|s| s["status"] == "fail")
        .collect();
    assert_eq!(failed.len(), 1, "{report:#}");
    (
        failed[0]["name"].as_str().unwrap().to_owned(),
        failed[0]["detail"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn skill_new_refuses_an_invalid_name_or_a_non_empty_folder_and_says_the_rule() {
    let sandbox = Sandbox::new();
    for bad in ["Hello", "1st", "two words", "../up"] {
        let output = run_foveal(sandbox.root.path(), &["skill", "new", bad]);
        assert_eq!(output.status.code(), Some(2), "{bad}: {}", stderr(&output));
        assert!(
            stderr(&output).contains(
                "A skill name is lowercase ASCII letters, digits, '-' and '_', starts with a letter"
            ),
            "{}",
            stderr(&output)
        );
    }
    std::fs::create_dir(sandbox.root.path().join("taken")).unwrap();
    std::fs::write(sandbox.root.path().join("taken/notes.txt"), "mine").unwrap();
    let output = run_foveal(
        sandbox.root.path(),
        &["skill", "new", "hello", "--path", "taken"],
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("taken is not empty"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.root.path().join("taken/notes.txt")).unwrap(),
        "mine"
    );
    let output = run_foveal(
        sandbox.root.path(),
        &["skill", "new", "hello", "--hooks", "budget"],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("unknown hook \"budget\""),
        "{}",
        stderr(&output)
    );
    // Nothing was written by any refusal.
    assert!(!sandbox.root.path().join("hello").exists());
}

#[test]
fn skill_new_writes_a_crate_on_this_checkouts_sdk_with_a_free_component_id() {
    let sandbox = Sandbox::new();
    // Installed skills are looked at for the id; none of these holds 4100.
    install(
        &library("components-a"),
        &sandbox.plugins(),
        &file_name("components_a"),
    );
    let output = run_foveal(
        sandbox.root.path(),
        &[
            "skill",
            "new",
            "reading-list",
            "--hooks",
            "components,redact",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let dir = sandbox.root.path().join("reading-list");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../sdk")
        .canonicalize()
        .unwrap();
    assert!(
        manifest.contains(&format!("foveal-sdk = {{ path = \"{}\" }}", sdk.display())),
        "{manifest}"
    );
    assert!(manifest.contains("name = \"reading-list-skill\""));
    assert!(manifest.contains("crate-type = [\"cdylib\"]"));
    assert!(manifest.contains("\n[workspace]\n"));
    assert!(manifest.contains("panic = \"unwind\""));
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    assert!(lib.contains("fn components(") && lib.contains("fn redact("));
    assert!(!lib.contains("fn run_tool("), "tools were not asked for");
    let id: u32 = lib
        .lines()
        .find_map(|l| l.strip_prefix("pub const COMPONENT_ID: u32 = "))
        .and_then(|l| l.trim_end_matches(';').parse().ok())
        .unwrap();
    assert_eq!(id, 4100);
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        readme.contains("depends on the SDK by path"),
        "the README says which SDK: {readme}"
    );
    for file in ["build.rs", "src/tests.rs", ".gitignore", "Cargo.lock"] {
        assert!(dir.join(file).is_file(), "{file}");
    }
    assert!(stdout(&output).contains("foveal skill check target/release/libreading_list_skill.so"));
}

#[test]
fn skill_check_reports_each_refusal_as_the_loader_does_and_never_crashes() {
    let sandbox = Sandbox::new();
    let cases = [
        ("old-sdk", "sdk", "built against an incompatible foveal-sdk"),
        ("other-layout", "layout", "incompatible skill ABI layout"),
        ("not-a-skill", "library", "not a foveal skill"),
        ("init-error", "init", "failed to initialise"),
        ("init-panic", "init", "panicked in init"),
    ];
    for (fixture, step_name, reason) in cases {
        let (code, report) = check(&sandbox, &library(fixture));
        assert_eq!(code, Some(1), "{fixture}: {report:#}");
        assert_eq!(report["ok"], false);
        let (name, detail) = failure(&report);
        assert_eq!(name, step_name, "{fixture}: {report:#}");
        assert!(detail.contains(reason), "{fixture}: {detail}");
        // The steps after the failure were not reached.
        assert_eq!(
            step(&report, "dependencies")["status"],
            "skip",
            "{report:#}"
        );
    }
    // Not a library at all, though named like one.
    let fake = sandbox.root.path().join("libfake.so");
    std::fs::write(&fake, "not an ELF file").unwrap();
    let (code, report) = check(&sandbox, &fake);
    assert_eq!(code, Some(1));
    let (name, detail) = failure(&report);
    assert_eq!(name, "library", "{report:#}");
    assert!(detail.contains("not a loadable library"), "{detail}");
    // A file the host would not even look at.
    let text = sandbox.root.path().join("notes.txt");
    std::fs::write(&text, "hello").unwrap();
    let (code, report) = check(&sandbox, &text);
    assert_eq!(code, Some(1));
    let (name, detail) = failure(&report);
    assert_eq!(name, "file");
    assert!(
        detail.contains("loads only files ending in .so"),
        "{detail}"
    );
    let (code, report) = check(&sandbox, &sandbox.root.path().join("missing.so"));
    assert_eq!(code, Some(1));
    assert!(failure(&report).1.contains("cannot read it"));
    // Nothing was installed by any of it.
    assert_eq!(std::fs::read_dir(sandbox.plugins()).unwrap().count(), 0);
}

#[test]
fn skill_check_fails_a_skill_whose_hook_panics_and_says_so() {
    let sandbox = Sandbox::new();
    let (code, report) = check(&sandbox, &library("panicky"));
    assert_eq!(code, Some(1), "{report:#}");
    let (name, detail) = failure(&report);
    assert_eq!(name, "components");
    assert!(
        detail.contains("panicky always panics in components"),
        "{detail}"
    );
    // The other hook was still called, and every loader check passed.
    assert_eq!(step(&report, "redact")["status"], "ok");
    assert_eq!(step(&report, "init")["status"], "ok");
}

#[test]
fn skill_check_passes_a_first_party_skill_with_timings_and_sizes() {
    let sandbox = Sandbox::new();
    let (code, report) = check(&sandbox, &library("skill:context-window"));
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["ok"], true);
    assert_eq!(report["skill"], "context-window");
    let components = step(&report, "components");
    assert_eq!(components["status"], "ok", "{report:#}");
    assert!(components["ms"].as_f64().is_some());
    assert!(components["bytes"].as_u64().is_some());
    // It replaces the first-party build beside the binary, as an install
    // into the drop-in folder would.
    assert!(
        report["replaces"]
            .as_str()
            .is_some_and(|p| p.ends_with(&file_name("foveal_skill_context_window"))),
        "{report:#}"
    );
    // The human report says the same.
    let output = run_foveal(
        sandbox.root.path(),
        &[
            "skill",
            "check",
            library("skill:context-window").to_str().unwrap(),
        ],
    );
    assert!(output.status.success());
    let text = stdout(&output);
    assert!(text.contains("ok    sdk"), "{text}");
    assert!(
        text.contains("ok: the host would load it and call its hooks"),
        "{text}"
    );
}

#[test]
fn skill_check_refuses_a_component_id_an_installed_skill_declares() {
    let sandbox = Sandbox::new();
    sandbox.install("components-a", "components_a");
    let (code, report) = check(&sandbox, &library("components-b"));
    assert_eq!(code, Some(1), "{report:#}");
    let (name, detail) = failure(&report);
    assert_eq!(name, "component ids");
    assert!(
        detail.contains(
            "declares prompt component 4501, which skill `components-a` already declares"
        ),
        "{detail}"
    );
}

#[test]
fn skill_check_calls_read_tools_with_arguments_from_their_schema_and_skips_dangerous_ones() {
    let sandbox = Sandbox::new();
    let (code, report) = check(&sandbox, &library("tools"));
    // `explode` panics: the check fails on it, and says so.
    assert_eq!(code, Some(1), "{report:#}");
    let (name, detail) = failure(&report);
    assert_eq!(name, "tool explode");
    assert!(detail.contains("explode always panics"), "{detail}");
    let tools = step(&report, "tools");
    assert_eq!(
        tools["status"], "warn",
        "the broken declaration: {report:#}"
    );
    assert!(
        tools["detail"]
            .as_str()
            .unwrap()
            .contains("bad_schema left out")
    );
    let word_count = step(&report, "tool word_count");
    assert_eq!(word_count["status"], "ok", "{report:#}");
    assert!(
        word_count["detail"]
            .as_str()
            .unwrap()
            .contains(r#"{"text":"example"}"#)
    );
    assert_eq!(step(&report, "tool shred_notes")["status"], "skip");
}

#[test]
fn skill_install_renames_into_place_and_replaces_only_when_asked() {
    let sandbox = Sandbox::new();
    let v1 = library("counter-v1");
    let output = run_foveal(
        sandbox.root.path(),
        &["skill", "install", v1.to_str().unwrap()],
    );
    assert!(
        output.status.success(),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    let installed = sandbox
        .plugins()
        .join(file_name("foveal_fixture_counter_v1"));
    assert!(installed.is_file());
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(&v1).unwrap()
    );
    assert!(
        stdout(&output).contains("no host is running"),
        "{}",
        stdout(&output)
    );
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(sandbox.plugins())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [file_name("foveal_fixture_counter_v1")]);

    // The same skill again, from another file: refused without --replace.
    let v2 = library("counter-v2");
    let output = run_foveal(
        sandbox.root.path(),
        &["skill", "install", v2.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("skill `counter` is already installed as"),
        "{}",
        stderr(&output)
    );
    let output = run_foveal(
        sandbox.root.path(),
        &["skill", "install", "--replace", v2.to_str().unwrap()],
    );
    assert!(
        output.status.success(),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(!installed.exists(), "the old file would be a duplicate");
    let listed = run_foveal(
        sandbox.root.path(),
        &["skill-list", "--json", "--no-builtin"],
    );
    let rows: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let counter = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "counter")
        .unwrap();
    assert_eq!(counter["version"], "2.0.0", "{rows:#}");
    assert_eq!(counter["status"], "loaded");

    // Nor into a folder others could write to: the host would refuse it.
    use std::os::unix::fs::PermissionsExt as _;
    let open = sandbox.root.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let output = run_foveal(
        sandbox.root.path(),
        &[
            "skill",
            "install",
            "--plugins",
            "open",
            v1.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("writable by others"),
        "{}",
        stderr(&output)
    );
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);

    // A library the check refuses is not installed.
    let output = run_foveal(
        sandbox.root.path(),
        &["skill", "install", library("old-sdk").to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("not installed"),
        "{}",
        stderr(&output)
    );
    assert!(
        !sandbox
            .plugins()
            .join(file_name("foveal_fixture_old_sdk"))
            .exists()
    );
}

#[test]
fn tool_call_runs_a_skill_tool_as_the_agent_does() {
    let sandbox = Sandbox::new();
    sandbox.install("tools", "tools");
    std::fs::write(sandbox.root.path().join("notes.org"), "* Notes\n").unwrap();
    let call = |args: &[&str]| {
        let mut all = vec!["tool", "call"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--memex", "notes.org"]);
        run_foveal(sandbox.root.path(), &all)
    };
    let output = call(&["word_count", r#"{"text": "one two three"}"#]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "3 words\n");

    // Dangerous: refused when no one can confirm (stdin is not a terminal).
    let output = call(&["shred_notes"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains(
            "refused: shred_notes is dangerous and needs the user's confirmation, which this run cannot ask"
        ),
        "{}",
        stderr(&output)
    );
    assert!(stdout(&output).is_empty());

    // A panicking tool is an error, not a crash.
    let output = call(&["explode"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("explode always panics"),
        "{}",
        stderr(&output)
    );
    assert!(
        !stderr(&output).contains("panicked at"),
        "{}",
        stderr(&output)
    );

    let output = call(&["no_such_tool"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output)
            .contains("the skills offer: agenda, word_count, shred_notes, explode, echo_error"),
        "{}",
        stderr(&output)
    );
    let output = call(&["word_count", "[1]"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("expected a JSON object"),
        "{}",
        stderr(&output)
    );
    // A focus must be a visible object; a private one is answered like a
    // missing one.
    std::fs::write(
        sandbox.root.path().join("notes.org"),
        "* Notes\n:PROPERTIES:\n:ID: notes\n:END:\n* Diary :@personal:\n:PROPERTIES:\n:ID: diary\n:END:\n",
    )
    .unwrap();
    let output = call(&["word_count", r#"{"text": "a"}"#, "--focus", "notes"]);
    assert!(output.status.success(), "{}", stderr(&output));
    for hidden in ["diary", "nowhere"] {
        let output = call(&["word_count", r#"{"text": "a"}"#, "--focus", hidden]);
        assert_eq!(output.status.code(), Some(1));
        assert!(
            stderr(&output).contains("no visible object has the id"),
            "{}",
            stderr(&output)
        );
    }
    let output = call(&["query_memex", "{}"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("one of the host's own tools"));
}

#[test]
fn skill_new_with_a_copy_of_the_sdk_builds_tests_and_checks_without_the_checkout() {
    let sandbox = Sandbox::new();
    let output = run_foveal(
        sandbox.root.path(),
        &[
            "skill",
            "new",
            "vendored",
            "--vendor-sdk",
            "--hooks",
            "components,tools,redact",
        ],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("a copy of foveal-sdk"),
        "{}",
        stdout(&output)
    );
    let dir = sandbox.root.path().join("vendored");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("foveal-sdk = { path = \"foveal-sdk/sdk\" }"),
        "{manifest}"
    );
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        readme.contains("depends on a copy of foveal-sdk"),
        "{readme}"
    );
    // Nothing in the crate points back at this checkout.
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let sdk_manifest = std::fs::read_to_string(dir.join("foveal-sdk/sdk/Cargo.toml")).unwrap();
    assert!(!sdk_manifest.contains(checkout.to_str().unwrap()));
    assert!(!manifest.contains(checkout.to_str().unwrap()));
    // The workspace's lock pins the versions (all in the local registry
    // cache), and a build folder shared between runs keeps abi_stable
    // from being rebuilt each time.
    std::fs::copy(checkout.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let target = crate::support::profile_dir()
        .parent()
        .unwrap()
        .join("tutorial-skill");
    for args in [&["test"][..], &["build"][..]] {
        let mut cargo = std::process::Command::new(env!("CARGO"));
        cargo
            .args(args)
            .current_dir(&dir)
            .env("CARGO_TARGET_DIR", &target);
        for (name, _) in std::env::vars() {
            if name.starts_with("CARGO_") && name != "CARGO_HOME" {
                cargo.env_remove(name);
            }
        }
        cargo.env("CARGO_TARGET_DIR", &target);
        let output = cargo.output().unwrap();
        assert!(
            output.status.success(),
            "cargo {args:?}:\n{}{}",
            stdout(&output),
            stderr(&output)
        );
        if args == ["test"] {
            assert!(
                stdout(&output).contains("test result: ok. 4 passed"),
                "{}",
                stdout(&output)
            );
        }
    }
    let (code, report) = check(
        &sandbox,
        &target.join("debug").join(file_name("vendored_skill")),
    );
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(step(&report, "redact")["status"], "ok");
    assert_eq!(step(&report, "tool vendored_find")["status"], "ok");
}

#[test]
fn a_refused_library_reads_as_documented() {
    let sandbox = Sandbox::new();
    std::fs::copy(library("old-sdk"), sandbox.root.path().join("libold.so")).unwrap();
    let output = run_foveal(sandbox.root.path(), &["skill", "check", "libold.so"]);
    assert_eq!(output.status.code(), Some(1));
    insta::assert_snapshot!(stdout(&output), @r"
    checking libold.so
      ok    file
      ok    library
      FAIL  sdk            built against an incompatible foveal-sdk: the host expects 0.2.2, the library has 0.0.9; rebuild the skill against foveal-sdk 0.2.2
      -     layout         not reached
      -     manifest       not reached
      -     component ids  not reached
      -     init           not reached
      -     dependencies   not reached
    FAILED: the host would refuse it, or a hook fails (see above)
    ");
}

/// `skill install --plugins DIR` while a host runs that watches another
/// folder: refused at once (the host would never load it), with both
/// folders named, and nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_into_a_folder_the_running_host_does_not_watch_is_refused_at_once() {
    use crate::live::{command, run_to_end, start_host, stderr, wait_exit, workspace};
    let dir = workspace();
    let server = crate::server::Server::start(vec![]).await;
    // The host's folder through `..`, made by the host at its start: it
    // records the path before the folder exists.
    std::fs::create_dir(dir.path().join("x")).unwrap();
    let mut host = start_host(
        dir.path(),
        &server,
        &["--no-repl", "--plugins", "x/../watched"],
    );
    let status = run_to_end(command(dir.path(), &server, &["status", "--json"])).await;
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    let watched = status["plugins_dir"]
        .as_str()
        .expect("status names its plugins folder");
    assert!(Path::new(watched).is_absolute(), "{watched}");

    let elsewhere = dir.path().join("elsewhere");
    let fixture = library("host-facts");
    let started = std::time::Instant::now();
    let args = [
        "skill",
        "install",
        fixture.to_str().unwrap(),
        "--plugins",
        elsewhere.to_str().unwrap(),
    ];
    let refused = run_to_end(command(dir.path(), &server, &args)).await;
    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    // Named resolved, as the host made it.
    let resolved = Path::new(watched).canonicalize().unwrap();
    assert!(
        err.contains(&format!(
            "watches {}, not {}",
            resolved.display(),
            elsewhere.display()
        )),
        "{err}"
    );
    assert!(!elsewhere.exists(), "the refused install wrote its folder");
    // It did not wait for the host (the wait for a new build is 10 s).
    assert!(started.elapsed() < std::time::Duration::from_secs(8));

    // Into the folder the host watches, named another way, it installs and
    // the host loads it.
    let plain = dir.path().join("watched");
    let args = [
        "skill",
        "install",
        fixture.to_str().unwrap(),
        "--plugins",
        plain.to_str().unwrap(),
    ];
    let installed = run_to_end(command(dir.path(), &server, &args)).await;
    let out = String::from_utf8_lossy(&installed.stdout);
    assert!(installed.status.success(), "{}", stderr(&installed));
    assert!(
        out.contains("the running host now serves skill `host-facts`"),
        "{out}"
    );

    let stopped = run_to_end(command(dir.path(), &server, &["stop"])).await;
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    assert!(wait_exit(&mut host).success());
}
