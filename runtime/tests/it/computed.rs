//! Computed context (seed 001) end to end: the real `computed-context`
//! library through the registry, the prompt assembler and the real
//! `foveal context --computed`; without the skill; with a skill that
//! panics; and post-execution write-back through the host.

use std::sync::Arc;

use foveal::computed::{self, ComputedSettings, Mode};
use foveal::memex::Memex;
use foveal::memex::privacy::PrivacyTags;
use foveal::prompt::{Assembler, PromptInput, PromptSettings};

use crate::support::{Sandbox, run_foveal};

const ORG: &str = "\
#+TODO: TODO NEXT | DONE
* Work
** DONE Set up the user model
:PROPERTIES:
:ID: t-model
:END:
#+begin_src yaml
summary: Users table with a password hash
dependencies_for_next:
  - file: src/models/user.rs
    reason: the User struct
patterns_discovered:
  - pattern: Hash passwords with argon2id
    applies_to: [auth, password]
    location: src/auth/hash.rs
gotchas:
  - issue: Emails compare case-insensitively
    severity: high
open_questions:
  - question: Soft-delete users?
    blocking: true
files_created:
  - path: src/models/user.rs
    lines: 1-80
    purpose: the User model
  - path: src/auth/hash.rs
    purpose: password hashing
#+end_src
** DONE Broken dependency
:PROPERTIES:
:ID: t-broken
:END:
:HANDOFF:
gotchas: [unclosed
:END:
** TODO Add JWT login endpoint
:PROPERTIES:
:ID: t-login
:DEPENDS_ON: t-model t-broken
:END:
Issue a token from POST /login in src/auth/login.rs.
- [ ] Returns a JWT for a good password
** Not a task
:PROPERTIES:
:ID: plain
:END:
* Knowledge
:PROPERTIES:
:ID: knowledge
:END:
** Validate tokens in one middleware :auth:jwt:
:PROPERTIES:
:ID: k-middleware
:KIND: pattern
:FILE: src/auth/middleware.rs
:END:
** PRIVATE CANARY pattern :jwt:token:@personal:
:PROPERTIES:
:ID: k-private
:KIND: pattern
:FILE: PRIVATE-FILE-CANARY.rs
:END:
** Diary :@personal:
*** NESTED CANARY gotcha :jwt:
:PROPERTIES:
:ID: k-nested
:KIND: gotcha
:SEVERITY: high
:END:
* Context Map
:PROPERTIES:
:ID: map
:END:
| Component | Location | Notes |
|---+---+---|
| Login handler | src/auth/login.rs | auth endpoint |
| Styles | web/style.css | ui |
";

fn sandbox() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("memex")).unwrap();
    std::fs::write(dir.path().join("memex/main.org"), ORG).unwrap();
    dir
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn context(dir: &tempfile::TempDir, args: &[&str]) -> std::process::Output {
    let mut all = vec!["context", "--memex", "memex", "--computed"];
    all.extend_from_slice(args);
    run_foveal(dir.path(), &all)
}

fn assert_no_canary(out: &str) {
    for canary in ["CANARY", "k-private", "k-nested", "PRIVATE-FILE"] {
        assert!(!out.contains(canary), "{canary} leaked:\n{out}");
    }
}

#[test]
fn foveal_context_computed_prints_the_seeds_sections_for_a_task() {
    let dir = sandbox();
    let output = context(&dir, &["--focus", "t-login"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let out = text(&output.stdout);
    assert!(
        out.starts_with("## Context (Computed)\n\n### Patterns to Follow\n"),
        "{out}"
    );
    assert!(
        out.contains("- **Hash passwords with argon2id** (see: src/auth/hash.rs)\n"),
        "{out}"
    );
    assert!(
        out.contains("- **Validate tokens in one middleware** (see: src/auth/middleware.rs)\n"),
        "{out}"
    );
    assert!(
        out.contains("### Warnings\n- ⚠️ **high**: Emails compare case-insensitively\n"),
        "{out}"
    );
    assert!(
        out.contains("#### Set up the user model\nUsers table with a password hash\n"),
        "{out}"
    );
    assert!(
        out.contains("| `src/auth/login.rs` | Login handler | auth endpoint |\n"),
        "{out}"
    );
    assert!(!out.contains("web/style.css"), "{out}");
    assert!(out.contains("### Open Questions (Blocking)\n"), "{out}");
    assert_no_canary(&out);
}

#[test]
fn private_knowledge_never_appears_in_the_section_or_the_json() {
    let dir = sandbox();
    let output = context(&dir, &["--focus", "t-login", "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let out = text(&output.stdout);
    assert_no_canary(&out);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(json["tokens"].as_u64().unwrap() > 0, "{json}");
    assert_eq!(json["complexity"], "normal");
    assert_eq!(
        json["signals"]["domains"],
        serde_json::json!(["api", "auth"])
    );
    assert_eq!(
        json["signals"]["files"],
        serde_json::json!(["src/auth/login.rs"])
    );
    assert!(
        json["signals"]["keywords"]
            .as_array()
            .unwrap()
            .contains(&"jwt".into())
    );
    let ids = |key: &str| -> Vec<String> {
        json[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids("patterns"), ["t-model", "k-middleware"]);
    assert_eq!(ids("gotchas"), ["t-model"]);
    assert_eq!(ids("prior_work"), ["t-model", "t-broken"]);
    assert_eq!(ids("code_references"), ["map"]);
    assert_eq!(ids("open_questions"), ["t-model"]);
    assert!(ids("decisions").is_empty());
    // The broken handoff is reported with its file and line.
    let errors = json["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{json}");
    let line = ORG.lines().position(|l| l == "gotchas: [unclosed").unwrap() + 1;
    let error = errors[0].as_str().unwrap();
    assert!(
        error.contains(&format!(
            "main.org:{line}: the handoff of task t-broken does not parse"
        )),
        "{error}"
    );
}

#[test]
fn foveal_prompt_carries_the_computed_section_and_says_only_the_broken_handoff_on_stderr() {
    // The prompt of a live cycle is asked with the context window's
    // session in every skill's configuration: the computed-context skill
    // takes it, and its section reaches the prompt.
    let dir = sandbox();
    let output = run_foveal(
        dir.path(),
        &[
            "prompt",
            "--memex",
            "memex",
            "--focus",
            "t-login",
            "--message",
            "Go on.",
        ],
    );
    let (out, err) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{err}");
    assert!(out.contains("## Context (Computed)\n"), "{out}");
    assert!(
        out.contains("- **Hash passwords with argon2id** (see: src/auth/hash.rs)\n"),
        "{out}"
    );
    // The section is not left out; the one thing the skill says is the
    // handoff that does not parse, with its file and line, once.
    assert!(!err.contains("hook `components` failed"), "{err}");
    let line = ORG.lines().position(|l| l == "gotchas: [unclosed").unwrap() + 1;
    let said = format!("main.org:{line}: the handoff of task t-broken does not parse");
    assert_eq!(err.matches(&said).count(), 1, "{err}");
    assert_eq!(err.matches("does not parse").count(), 1, "{err}");
    assert_no_canary(&out);
}

/// Issue 29, row 8: a dependency's handoff written as models often write
/// YAML (flow mappings, escapes in double quotes, `''`, an anchor and its
/// alias), beside one that is not YAML (a colon in a plain value).
const FLOW_ORG: &str = r#"* DONE Set up tokens
:PROPERTIES:
:ID: t-tokens
:END:
#+begin_src yaml
summary: "Tokens are signed \u2014 \"HS256\" only"
patterns_discovered:
  - {pattern: Validate tokens in middleware, applies_to: [auth, jwt], location: src/auth/middleware.rs}
gotchas:
  - {issue: "Clock skew: allow 30 s", severity: &high high}
  - issue: 'Refresh tokens can''t be revoked yet'
    severity: *high
#+end_src
* DONE Write the docs
:PROPERTIES:
:ID: t-docs
:END:
#+begin_src yaml
gotchas:
  - issue: Examples: out of date
    severity: high
#+end_src
* TODO Add JWT login
:PROPERTIES:
:ID: t-login
:DEPENDS_ON: t-tokens t-docs
:END:
"#;

#[test]
fn a_handoff_in_flow_style_is_read_whole_and_a_broken_one_is_said_once_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("memex")).unwrap();
    std::fs::write(dir.path().join("memex/main.org"), FLOW_ORG).unwrap();
    let line = FLOW_ORG
        .lines()
        .position(|l| l == "  - issue: Examples: out of date")
        .unwrap()
        + 1;
    let said = format!("main.org:{line}: the handoff of task t-docs does not parse");
    let context: &[&str] = &[
        "context",
        "--memex",
        "memex",
        "--computed",
        "--focus",
        "t-login",
    ];
    let prompt: &[&str] = &[
        "prompt",
        "--memex",
        "memex",
        "--focus",
        "t-login",
        "--message",
        "Go on.",
    ];
    for args in [context, prompt] {
        let output = run_foveal(dir.path(), args);
        let (out, err) = (text(&output.stdout), text(&output.stderr));
        assert!(output.status.success(), "{args:?}: {err}");
        assert!(
            out.contains("- **Validate tokens in middleware** (see: src/auth/middleware.rs)\n"),
            "{args:?}: {out}"
        );
        assert!(
            out.contains("- ⚠️ **high**: Clock skew: allow 30 s\n- ⚠️ **high**: Refresh tokens can't be revoked yet\n"),
            "{args:?}: {out}"
        );
        assert!(
            out.contains("#### Set up tokens\nTokens are signed \u{2014} \"HS256\" only\n"),
            "{args:?}: {out}"
        );
        // Said at the default log level, once, with its file and line;
        // the section is not left out for it.
        assert_eq!(err.matches(&said).count(), 1, "{args:?}: {err}");
        assert!(!err.contains("hook `components` failed"), "{args:?}: {err}");
    }
}

#[test]
fn explain_prints_the_context_debug_report_then_the_section() {
    let dir = sandbox();
    let output = context(&dir, &["--focus", "t-login", "--explain"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let out = text(&output.stdout);
    assert!(
        out.starts_with("## Context Debug\n\n### Signals Extracted\n- Keywords: ["),
        "{out}"
    );
    for line in [
        "- Domains: [api, auth]\n",
        "- Files Mentioned: [src/auth/login.rs]\n",
        "### Knowledge Graph Query\n- Nodes matched: ",
        "### Dependencies Processed\n- Task IDs: [t-model, t-broken]\n- Patterns inherited: 1\n- Warnings inherited: 1\n",
        "### Context Map Filtering\n- Total entries: 2\n- Entries after filter: 1\n",
        "\n## Context (Computed)\n",
    ] {
        assert!(out.contains(line), "{line:?} in:\n{out}");
    }
    assert_no_canary(&out);
    // DEBUG_CONTEXT=true adds the report to the section itself.
    let output = crate::support::foveal_command(
        dir.path(),
        &[
            "context",
            "--memex",
            "memex",
            "--computed",
            "--focus",
            "t-login",
        ],
    )
    .env("DEBUG_CONTEXT", "true")
    .output()
    .unwrap();
    let out = text(&output.stdout);
    assert!(
        out.starts_with("## Context (Computed)\n") && out.contains("\n## Context Debug\n"),
        "{out}"
    );
}

#[test]
fn a_focus_that_is_not_a_task_or_a_missing_skill_has_no_section() {
    let dir = sandbox();
    let output = context(&dir, &["--focus", "plain"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("is not a task"),
        "{}",
        text(&output.stderr)
    );
    assert!(output.stdout.is_empty());
    let output = context(&dir, &["--focus", "t-login", "--no-builtin"]);
    assert_eq!(output.status.code(), Some(1));
    let err = text(&output.stderr);
    assert!(
        err.contains("no computed context") && err.contains("computed-context"),
        "{err}"
    );
    // A private id is no more visible than a missing one.
    let output = context(&dir, &["--focus", "k-private"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(!text(&output.stderr).contains("CANARY"));
}

/// The memex of [`ORG`] and a registry holding `skills`.
fn world(skills: &[&str]) -> (Sandbox, foveal::registry::Registry, Arc<Memex>) {
    let sandbox = Sandbox::new();
    for skill in skills {
        match skill.strip_prefix("fixture:") {
            Some(fixture) => sandbox.install(fixture, &fixture.replace('-', "_")),
            None => sandbox.install(&format!("skill:{skill}"), &skill.replace('-', "_")),
        };
    }
    let registry = sandbox.registry();
    registry.scan();
    let dir = sandbox.root.path().join("memex");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("main.org"), ORG).unwrap();
    let memex = Arc::new(Memex::open(&[dir]).unwrap());
    (sandbox, registry, memex)
}

fn prompt_text(
    registry: &foveal::registry::Registry,
    memex: &Memex,
    focus: &str,
) -> (String, Vec<u32>) {
    let assembler = Assembler::new(PromptSettings::default());
    let prompt = assembler
        .assemble(
            &registry.snapshot(),
            &memex.snapshot(),
            &PromptInput {
                focus: Some(focus),
                message: Some(Arc::from("Go on.")),
                ..PromptInput::default()
            },
        )
        .unwrap();
    (
        prompt.text(),
        prompt.sections.iter().map(|s| s.id).collect(),
    )
}

#[test]
fn the_prompt_has_the_section_with_the_skill_and_is_otherwise_the_same_without() {
    let (_s, with, memex) = world(&["computed-context"]);
    let (text_with, ids_with) = prompt_text(&with, &memex, "t-login");
    assert!(ids_with.contains(&computed::COMPONENT_ID), "{ids_with:?}");
    assert!(text_with.contains("## Context (Computed)\n"), "{text_with}");
    assert_no_canary(&text_with);
    // A focus that is not a task: no section.
    let (text_plain, ids_plain) = prompt_text(&with, &memex, "plain");
    assert!(!ids_plain.contains(&computed::COMPONENT_ID));
    assert!(!text_plain.contains("Computed"));

    let (_s2, without, memex2) = world(&[]);
    let (text_without, ids_without) = prompt_text(&without, &memex2, "t-login");
    assert!(!ids_without.contains(&computed::COMPONENT_ID));
    assert!(
        !text_without.contains("Computed"),
        "the prompt says nothing about it:\n{text_without}"
    );
    let section_start = text_with.find("## Context (Computed)").unwrap();
    let section_end = section_start
        + text_with[section_start..]
            .find("\n[Awareness skill not loaded]")
            .map_or_else(|| text_with[section_start..].len(), |i| i + 1);
    let _ = section_end;
    // Without the section, the two prompts are the same text.
    let ids_with_minus: Vec<u32> = ids_with
        .iter()
        .copied()
        .filter(|&i| i != computed::COMPONENT_ID)
        .collect();
    assert_eq!(ids_with_minus, ids_without);
    let assembler = Assembler::new(PromptSettings::default());
    let input = PromptInput {
        focus: Some("t-login"),
        message: Some(Arc::from("Go on.")),
        ..PromptInput::default()
    };
    let with_prompt = assembler
        .assemble(&with.snapshot(), &memex.snapshot(), &input)
        .unwrap();
    let without_prompt = Assembler::new(PromptSettings::default())
        .assemble(&without.snapshot(), &memex2.snapshot(), &input)
        .unwrap();
    let texts = |p: &foveal::prompt::Prompt| -> Vec<String> {
        p.sections
            .iter()
            .filter(|s| s.id != computed::COMPONENT_ID)
            .map(|s| s.text.as_str().to_owned())
            .collect()
    };
    assert_eq!(texts(&with_prompt), texts(&without_prompt));
}

#[test]
fn a_panicking_computed_context_skill_is_quarantined_and_its_section_absent() {
    let (_s, registry, memex) = world(&["fixture:computed-panic"]);
    assert_eq!(
        registry
            .snapshot()
            .get("computed-context")
            .map(|s| s.skill().info().name.clone()),
        Some("computed-context".to_owned())
    );
    for _ in 0..4 {
        let (text, ids) = prompt_text(&registry, &memex, "t-login");
        assert!(!ids.contains(&computed::COMPONENT_ID), "{ids:?}");
        assert!(!text.contains("Computed"));
    }
    let rows = registry.snapshot().rows();
    let row = rows.iter().find(|r| r.name == "computed-context").unwrap();
    assert!(row.status.starts_with("quarantined"), "{}", row.status);
    // And `foveal context --computed` says so instead of crashing.
    let answer = computed::compute(
        &registry.snapshot(),
        &memex.snapshot(),
        &PrivacyTags::new(["@personal"]),
        &ComputedSettings::default(),
        "t-login",
        Mode::Text,
    );
    assert!(answer.unwrap_err().contains("quarantined"));
}

#[test]
fn post_execution_writes_knowledge_and_the_context_map_through_the_host_once() {
    let (_s, registry, memex) = world(&["computed-context"]);
    let privacy = PrivacyTags::new(["@personal"]);
    let gate = Arc::new(foveal::egress::Gate::new(privacy.clone(), &[], true).unwrap());
    let before = memex.snapshot().generation();
    let done = computed::post_execution(
        &registry.snapshot(),
        &memex,
        &privacy,
        &gate,
        &ComputedSettings::default(),
        "t-model",
    );
    assert_eq!(done.error, None);
    assert_eq!(done.edits.len(), 4, "{:#?}", done.edits);
    assert!(
        done.edits.iter().all(|e| e.error.is_none()),
        "{:#?}",
        done.edits
    );
    assert!(memex.snapshot().generation() > before);
    let file =
        std::fs::read_to_string(memex.snapshot().files().next().unwrap().path.clone()).unwrap();
    // The pattern became a knowledge node under `Knowledge`, tagged.
    assert!(
        file.contains("** Hash passwords with argon2id :auth:password:\n:PROPERTIES:\n:ID: "),
        "{file}"
    );
    assert!(
        file.contains(":SOURCE: t-model\n:FILE: src/auth/hash.rs\n:KIND: pattern\n:END:\n"),
        "{file}"
    );
    assert!(
        file.contains("** Emails compare case-insensitively :database:\n"),
        "{file}"
    );
    // The files went to the context map as entry headlines.
    assert!(
        file.contains("** user\n:PROPERTIES:\n:ID: ")
            && file.contains(":LOCATION: src/models/user.rs:1-80\n:NOTES: the User model\n"),
        "{file}"
    );
    assert!(
        file.contains("** hash\n")
            && file.contains(":LOCATION: src/auth/hash.rs\n:NOTES: password hashing\n"),
        "{file}"
    );
    // Everything else is as it was.
    assert!(file.contains(&ORG[..ORG.find("* Knowledge").unwrap()]));
    // The new node is knowledge: the login task now finds it by its tags.
    let section = computed::compute(
        &registry.snapshot(),
        &memex.snapshot(),
        &privacy,
        &ComputedSettings::default(),
        "t-login",
        Mode::Json,
    )
    .unwrap()
    .unwrap();
    let json: serde_json::Value = serde_json::from_str(&section).unwrap();
    let sources: Vec<&str> = json["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["source"].as_str().unwrap())
        .collect();
    assert!(
        sources.contains(&"knowledge")
            && json["patterns"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["text"] == "Hash passwords with argon2id" && p["source"] == "knowledge"),
        "{json}"
    );
    // Marking it done again writes nothing new.
    let again = computed::post_execution(
        &registry.snapshot(),
        &memex,
        &privacy,
        &gate,
        &ComputedSettings::default(),
        "t-model",
    );
    assert_eq!(again.edits, [], "{:#?}", again.edits);
    assert_eq!(
        std::fs::read_to_string(memex.snapshot().files().next().unwrap().path.clone()).unwrap(),
        file
    );
    // A task that is not done: nothing.
    let not_done = computed::post_execution(
        &registry.snapshot(),
        &memex,
        &privacy,
        &gate,
        &ComputedSettings::default(),
        "t-login",
    );
    assert!(not_done.edits.is_empty() && not_done.error.is_none());
}
