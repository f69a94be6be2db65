//! `foveal skill-list` and `foveal skill-source` through the real binary,
//! including every error path.

use std::process::{Command, Output};

use crate::support::{Sandbox, file_name, install, library};

/// The real binary, to run in the sandbox with a clean environment: no
/// config file, the sandbox's plugins folder, state in the sandbox.
fn command(sandbox: &Sandbox, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_foveal"));
    command.args(args).current_dir(sandbox.root.path());
    for (name, _) in std::env::vars() {
        if name.starts_with("FOVEAL_") || name.starts_with("CONTEXT_") {
            command.env_remove(name);
        }
    }
    command
        .env("FOVEAL_DATA_DIR", sandbox.root.path().join("data"))
        .env("XDG_CONFIG_HOME", sandbox.root.path().join("xdg"));
    command
}

/// Runs [`command`] to completion.
fn foveal(sandbox: &Sandbox, args: &[&str]) -> Output {
    command(sandbox, args).output().expect("run foveal")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

#[test]
fn skill_list_finds_the_first_party_skills_beside_the_binary() {
    let sandbox = Sandbox::new();
    let output = foveal(&sandbox, &["skill-list"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{text}");
    for header in [
        "VERSION",
        "PRIORITY",
        "DEPENDENCIES",
        "HOOKS",
        "FILE",
        "STATUS",
    ] {
        assert!(lines[0].contains(header), "{text}");
    }
    // Sorted by priority, highest first.
    let names: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "privacy",
            "token-economics",
            "awareness",
            "computed-context",
            "agenda",
            "context-window"
        ],
        "{text}"
    );
    assert!(lines[1..].iter().all(|l| l.ends_with("loaded")), "{text}");
}

#[test]
fn skill_list_json_has_the_documented_keys_and_lists_refusals() {
    let sandbox = Sandbox::new();
    sandbox.install("counter-v1", "counter");
    sandbox.install("not-a-skill", "stranger");
    let output = foveal(&sandbox, &["skill-list", "--json", "--no-builtin"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let rows: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let rows = rows.as_array().unwrap();
    // The two libraries, then the row saying no privacy skill is loaded.
    assert_eq!(rows.len(), 3);
    let keys: Vec<&str> = rows[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        [
            "dependencies",
            "hooks",
            "isolation",
            "name",
            "path",
            "priority",
            "status",
            "version"
        ]
    );
    assert_eq!(rows[0]["name"], "counter");
    assert_eq!(rows[0]["version"], "1.0.0");
    assert_eq!(rows[0]["priority"], 10);
    assert_eq!(
        rows[0]["hooks"],
        serde_json::json!(["components", "invoke"])
    );
    assert_eq!(rows[0]["status"], "loaded");
    // A refused library is named by its file stem.
    assert_eq!(
        rows[1]["name"],
        format!("{}stranger", std::env::consts::DLL_PREFIX)
    );
    assert!(
        rows[1]["status"]
            .as_str()
            .unwrap()
            .starts_with("refused: not a foveal skill")
    );
    assert_eq!(rows[2]["name"], "privacy");
    assert_eq!(rows[2]["privacy_fallback"], true);
    assert_eq!(
        rows[2]["status"],
        "not loaded: the host applies its built-in filter (privacy tags + secret patterns)"
    );
    assert!(
        rows[..2]
            .iter()
            .all(|r| r.get("privacy_fallback").is_none())
    );
}

#[test]
fn skill_list_says_when_the_host_filter_stands_in_for_the_privacy_skill() {
    let notice = "privacy: skill not loaded — the host applies its built-in filter (privacy tags + secret patterns)";
    let sandbox = Sandbox::new();
    let output = foveal(&sandbox, &["skill-list", "--no-builtin"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output).lines().last(), Some(notice));

    // With the first-party skills the privacy skill is loaded: no notice,
    // and its row says the fallback is not in use.
    let output = foveal(&sandbox, &["skill-list"]);
    assert!(
        !stdout(&output).contains("built-in filter"),
        "{}",
        stdout(&output)
    );
    let output = foveal(&sandbox, &["skill-list", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let privacy: Vec<&serde_json::Value> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["name"] == "privacy")
        .collect();
    assert_eq!(privacy.len(), 1, "{rows}");
    assert_eq!(privacy[0]["status"], "loaded");
    assert_eq!(privacy[0]["privacy_fallback"], false);
    assert_eq!(privacy[0]["hooks"], serde_json::json!(["redact", "invoke"]));
}

#[test]
fn skill_list_takes_the_plugins_folder_from_flag_env_or_config() {
    let sandbox = Sandbox::new();
    let elsewhere = sandbox.root.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    install(&library("counter-v2"), &elsewhere, &file_name("counter"));

    let by_flag = foveal(
        &sandbox,
        &["skill-list", "--no-builtin", "--plugins", "elsewhere"],
    );
    assert!(stdout(&by_flag).contains("counter"), "{}", stdout(&by_flag));

    let by_env = command(&sandbox, &["skill-list", "--no-builtin"])
        .env("FOVEAL_PLUGINS", &elsewhere)
        .output()
        .unwrap();
    assert!(stdout(&by_env).contains("counter"), "{}", stdout(&by_env));

    let config = sandbox.root.path().join("foveal.toml");
    std::fs::write(&config, "[plugins]\ndir = \"elsewhere\"\nbuiltin = false\n").unwrap();
    let by_config = foveal(
        &sandbox,
        &["skill-list", "--config", config.to_str().unwrap()],
    );
    assert!(
        stdout(&by_config).contains("counter"),
        "{}",
        stdout(&by_config)
    );
}

#[test]
fn skill_list_on_an_empty_folder_says_where_it_looked() {
    let sandbox = Sandbox::new();
    let output = foveal(&sandbox, &["skill-list", "--no-builtin"]);
    assert!(output.status.success());
    assert!(
        stdout(&output).contains("(no skill libraries found in plugins)"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn skill_source_prints_the_embedded_literate_source() {
    let sandbox = Sandbox::new();
    let output = foveal(&sandbox, &["skill-source", "awareness"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.starts_with("==> README.md <==\n# awareness"), "{text}");
    assert!(text.contains("\n==> src/lib.rs <==\n"), "{text}");
    assert!(text.contains("foveal_sdk::export_skill!"), "{text}");
}

#[test]
fn skill_source_of_an_unknown_skill_fails_and_lists_the_known_ones() {
    let sandbox = Sandbox::new();
    let output = foveal(&sandbox, &["skill-source", "nonesuch"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).is_empty());
    insta::assert_snapshot!(stderr(&output), @"error: unknown skill `nonesuch`; known skills: agenda, awareness, computed-context, context-window, privacy, token-economics");
}

#[test]
fn skill_source_refuses_a_name_that_is_a_path() {
    let sandbox = Sandbox::new();
    for name in ["../awareness", "a/b", "..", "x\\y"] {
        let output = foveal(&sandbox, &["skill-source", name]);
        assert_eq!(output.status.code(), Some(2), "{name}");
        assert!(
            stderr(&output).contains("a skill name is not a path"),
            "{name}: {}",
            stderr(&output)
        );
    }
    let output = foveal(&sandbox, &["skill-source", "../awareness"]);
    insta::assert_snapshot!(stderr(&output), @r#"error: invalid skill name "../awareness": a skill name is not a path (no '/', '\' or '..')"#);
}

#[test]
fn a_bad_config_file_stops_the_command_naming_file_line_and_key() {
    let sandbox = Sandbox::new();
    let config = sandbox.root.path().join("foveal.toml");
    std::fs::write(&config, "[plugins]\nbuiltin = false\ndri = \"x\"\n").unwrap();
    let output = foveal(&sandbox, &["skill-list", "--config", "foveal.toml"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stdout(&output).is_empty());
    insta::assert_snapshot!(stderr(&output), @"error: foveal.toml:3:1: unknown key `plugins.dri`; did you mean `dir`? Known keys here: dir, builtin, watch, quarantine_after, max_loads, max_load_mib, hook_timeout_ms, debounce_ms, trusted, require_trusted, builtin_isolation.");

    std::fs::write(&config, "[context]\nsemantic_threshold = 2\n").unwrap();
    let output = foveal(&sandbox, &["skill-list", "--config", "foveal.toml"]);
    assert_eq!(output.status.code(), Some(2));
    insta::assert_snapshot!(stderr(&output), @"error: foveal.toml:2:22: `context.semantic_threshold`: 2 is out of range; must be from -1 to 1: a cosine similarity (default 0.75)");

    let output = foveal(&sandbox, &["skill-list", "--config", "missing.toml"]);
    assert_eq!(output.status.code(), Some(2));
    insta::assert_snapshot!(stderr(&output), @"error: config file missing.toml (from --config) does not exist; create it from config/foveal.toml or drop --config");
}

#[test]
fn a_bad_environment_value_stops_the_command_naming_the_variable() {
    let sandbox = Sandbox::new();
    let output = command(&sandbox, &["skill-list"])
        .env("CONTEXT_MAX_TOKENS", "-5")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    insta::assert_snapshot!(stderr(&output), @r#"error: environment variable CONTEXT_MAX_TOKENS="-5": not a number"#);
}

#[test]
fn help_explains_the_commands() {
    let sandbox = Sandbox::new();
    let output = foveal(&sandbox, &["--help"]);
    assert!(output.status.success());
    let text = stdout(&output);
    for needle in ["skill-list", "skill-source", "--config"] {
        assert!(text.contains(needle), "{text}");
    }
    let output = foveal(&sandbox, &["skill-list", "--help"]);
    let text = stdout(&output);
    for needle in ["--json", "--plugins", "--no-builtin", "FOVEAL_PLUGINS"] {
        assert!(text.contains(needle), "{text}");
    }
}

#[test]
fn the_host_survives_a_folder_of_failing_libraries() {
    let sandbox = Sandbox::new();
    for fixture in [
        "init-panic",
        "init-error",
        "old-sdk",
        "other-layout",
        "not-a-skill",
        "panicky",
    ] {
        install(&library(fixture), &sandbox.plugins(), &file_name(fixture));
    }
    let output = foveal(&sandbox, &["skill-list"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert_eq!(text.matches("refused:").count(), 5, "{text}");
    assert!(text.contains("awareness"), "{text}");
    // The panic of the `components` hook (`skill-list` calls it once to
    // find undeclared components) is a hook failure: one line on stderr at
    // the default log level, naming the skill (issue 29, row 2). The
    // libraries refused at load are said in the table only.
    let err = stderr(&output);
    assert_eq!(err.matches("panicked").count(), 1, "{err}");
    let line = err.lines().find(|l| l.contains("panicked")).unwrap();
    assert!(
        line.contains("skill hook panicked: panicky always panics in components")
            && line.contains("skill=panicky"),
        "{err}"
    );
}

#[test]
fn skill_list_watch_reports_each_change_while_running() {
    use std::io::BufRead as _;
    use std::time::Duration;

    let sandbox = Sandbox::new();
    let mut child = command(
        &sandbox,
        &["skill-list", "--watch", "--json", "--no-builtin"],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let stdout = child.stdout.take().unwrap();
    // Kill the child even when an assertion fails.
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = KillOnDrop(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    // The first list is pretty-printed; wait for its closing bracket.
    let patience = Duration::from_secs(20);
    let mut first = String::new();
    while first.lines().last() != Some("]") {
        first.push_str(&rx.recv_timeout(patience).expect("initial list"));
        first.push('\n');
    }
    // No library: only the row saying the host's privacy filter is in use.
    let first: serde_json::Value = serde_json::from_str(&first).unwrap();
    assert_eq!(first.as_array().unwrap().len(), 1, "{first}");
    assert_eq!(first[0]["privacy_fallback"], true);

    let next = |what: &str| -> Vec<serde_json::Value> {
        let line = rx
            .recv_timeout(patience)
            .unwrap_or_else(|_| panic!("no line after {what}"));
        serde_json::from_str::<serde_json::Value>(&line)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    let path = sandbox.install("counter-v1", "counter");
    let rows = next("install");
    assert_eq!(
        (rows[0]["name"].as_str(), rows[0]["version"].as_str()),
        (Some("counter"), Some("1.0.0"))
    );
    sandbox.install("counter-v2", "counter");
    assert_eq!(next("replace")[0]["version"], "2.0.0");
    std::fs::remove_file(&path).unwrap();
    let rows = next("remove");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["name"], "privacy");

    drop(child);
}

#[test]
fn every_refusal_reads_as_documented() {
    let sandbox = Sandbox::new();
    for fixture in [
        "init-panic",
        "init-error",
        "old-sdk",
        "other-layout",
        "not-a-skill",
        "dependent",
        "counter-v1",
    ] {
        install(&library(fixture), &sandbox.plugins(), &file_name(fixture));
    }
    // A second build of `counter` in the same folder.
    sandbox.install("counter-v2", "zz-counter");
    std::fs::write(sandbox.plugins().join(file_name("text")), "not a library\n").unwrap();
    let output = foveal(&sandbox, &["skill-list", "--no-builtin"]);
    assert!(output.status.success(), "{}", stderr(&output));
    // The dynamic loader's own wording varies by libc; keep ours.
    let text: String = stdout(&output)
        .lines()
        .map(|line| match line.find("not a loadable library: ") {
            Some(at) => format!("{}not a loadable library: <dlerror>", &line[..at]),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(text);
}

/// `foveal check` with the embedded model: its architecture, size,
/// quantization, context and chat template, a line each.
#[test]
fn check_describes_the_local_model_and_its_chat_template() {
    let model = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !model.is_file() {
        assert!(
            std::env::var("FOVEAL_REQUIRE_MODEL").as_deref() != Ok("1"),
            "FOVEAL_REQUIRE_MODEL=1, but {} is missing",
            model.display()
        );
        eprintln!(
            "not run: {} is missing (scripts/fetch-model)",
            model.display()
        );
        return;
    }
    let sandbox = Sandbox::new();
    let output = command(&sandbox, &["check"])
        .env("FOVEAL_PROVIDER", "local")
        .env("FOVEAL_MODEL_PATH", &model)
        .output()
        .expect("run foveal");
    let text = stdout(&output);
    for line in [
        "ok       model: architecture llama, 134515008 parameters (134.5M, the sum of the tensors' element counts)\n",
        "ok       model: quantization Q4_1 78.9%, Q8_0 21.0%, F32 0.03% of the parameters",
        "ok       model: context 8192 tokens in the file, 4096 used\n",
        "ok       model: chat template from the GGUF (tokenizer.chat_template, 368 bytes); the template takes no tools: foveal describes them in the system message\n",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
    assert!(
        text.contains("ok       provider: embedded llama model (134.5M parameters, Q4_1) from "),
        "{text}"
    );
}

#[test]
fn skill_list_and_check_warn_about_a_component_at_an_undeclared_id() {
    let sandbox = Sandbox::new();
    install(
        &library("components-a"),
        &sandbox.plugins(),
        &file_name("components-a"),
    );
    let list = foveal(&sandbox, &["skill-list", "--no-builtin"]);
    let text = stdout(&list);
    assert!(list.status.success(), "{text}");
    assert!(
        text.contains("loaded; warning: components returned component 4502 (`undeclared`), which its manifest does not declare (component_ids: [4500, 4501]); the host drops it"),
        "{text}"
    );
    let json = foveal(&sandbox, &["skill-list", "--no-builtin", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "components-a")
        .unwrap();
    assert_eq!(row["status"], "loaded");
    assert!(row["warnings"][0].as_str().unwrap().contains("4502"));
    std::fs::create_dir_all(sandbox.root.path().join("memex")).unwrap();
    let check = foveal(
        &sandbox,
        &[
            "check",
            "--no-builtin",
            "--memex",
            "memex",
            "--provider",
            "openai",
        ],
    );
    let text = stdout(&check);
    assert_eq!(check.status.code(), Some(1), "{text}");
    assert!(
        text.contains("PROBLEM  skill components-a: components returned component 4502"),
        "{text}"
    );
}

#[test]
fn skill_list_tools_shows_what_the_model_is_offered_and_what_is_left_out() {
    let sandbox = Sandbox::new();
    install(&library("tools"), &sandbox.plugins(), &file_name("tools"));
    let output = foveal(&sandbox, &["skill-list", "--no-builtin", "--tools"]);
    let text = stdout(&output);
    assert!(output.status.success(), "{text}");
    let tools = text.split("\nTOOLS\n").nth(1).expect("a TOOLS section");
    let line = |name: &str| {
        tools
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("no {name} in {tools}"))
            .to_owned()
    };
    assert!(line("read_object").starts_with("(host)"));
    assert!(line("word_count").starts_with("tools"));
    assert!(line("shred_notes").contains("dangerous"));
    assert!(
        line("bad_schema").contains("NOT OFFERED: its parameters are not JSON"),
        "{tools}"
    );
    let json = foveal(
        &sandbox,
        &["skill-list", "--no-builtin", "--tools", "--json"],
    );
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        value["skills"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "tools")
    );
    let focus = value["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "focus_title")
        .unwrap();
    assert_eq!(focus["skill"], "tools");
    assert_eq!(focus["offered"], true);
}

#[test]
fn prompt_shows_the_host_and_skill_tools_in_its_tool_belt() {
    let sandbox = Sandbox::new();
    install(&library("tools"), &sandbox.plugins(), &file_name("tools"));
    std::fs::create_dir_all(sandbox.root.path().join("memex")).unwrap();
    std::fs::write(sandbox.root.path().join("memex/a.org"), "* Work\n").unwrap();
    let output = foveal(&sandbox, &["prompt", "--memex", "memex"]);
    let text = stdout(&output);
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!text.contains("No tools"), "{text}");
    assert!(text.contains("- read_object: "), "{text}");
    assert!(
        text.contains("- word_count: Count the words of a text."),
        "{text}"
    );
    assert!(!text.contains("bad_schema"), "{text}");
}
