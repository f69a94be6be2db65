//! `foveal context` and `foveal bench awareness` through the real binary
//! and the real awareness skill beside it.

use std::process::Output;

use crate::support::run_foveal;

const MEMEX: &str = "* Launch :project:
:PROPERTIES:
:ID: launch
:END:
** Plan
:PROPERTIES:
:ID: plan
:EMBEDDING: 1 0 0
:END:
The plan body.
** Archive
:PROPERTIES:
:ID: archive
:END:
*** Twin
:PROPERTIES:
:ID: twin
:EMBEDDING: 0.9 0.1 0
:END:
twin body
*** Work notes :@work:
:PROPERTIES:
:ID: notes
:EMBEDDING: 1 0 0
:END:
WORK CANARY
** Diary :@personal:
:PROPERTIES:
:ID: diary
:EMBEDDING: 1 0 0
:END:
PRIVATE CANARY
";

fn sandbox() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("memex")).unwrap();
    std::fs::write(dir.path().join("memex/main.org"), MEMEX).unwrap();
    dir
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn context(dir: &tempfile::TempDir, args: &[&str]) -> Output {
    let mut all = vec!["context", "--memex", "memex"];
    all.extend_from_slice(args);
    run_foveal(dir.path(), &all)
}

#[test]
fn context_prints_the_outline_without_private_objects() {
    let dir = sandbox();
    let output = context(&dir, &["--focus", "plan"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let out = text(&output.stdout);
    assert!(
        out.starts_with("GLOBAL MEMEX AWARENESS (Peripheral Vision):\n"),
        "{out}"
    );
    assert!(
        out.contains("The plan body.") && out.contains("twin body"),
        "{out}"
    );
    assert!(
        out.contains("WORK CANARY"),
        "@work is not private by default:\n{out}"
    );
    assert!(!out.contains("PRIVATE CANARY"), "{out}");
    // Not even as a marker: the gate after the skill found nothing, so
    // nothing private was rendered.
    assert!(!out.contains("[REDACTED"), "{out}");
}

#[test]
fn a_privacy_tag_flag_adds_to_the_configured_tags() {
    let dir = sandbox();
    let output = context(&dir, &["--focus", "plan", "--privacy-tag", ":@WORK:"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let out = text(&output.stdout);
    assert!(
        !out.contains("WORK CANARY") && !out.contains(":ID: notes"),
        "{out}"
    );
    assert!(!out.contains("PRIVATE CANARY"), "{out}");
    assert!(!out.contains("[REDACTED"), "{out}");
    // The positive control: the rest of the outline.
    assert!(out.contains("The plan body."), "{out}");
}

#[test]
fn json_has_text_tokens_budget_included_and_omitted() {
    let dir = sandbox();
    let output = context(&dir, &["--focus", "plan", "--json", "--budget", "60"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let body = json["text"].as_str().unwrap();
    let tokens = json["tokens"].as_u64().unwrap();
    assert!(tokens > 0 && tokens <= 60, "{json}");
    assert_eq!(json["budget"], 60);
    assert_eq!(json["source"], "awareness");
    let included = json["included"].as_array().unwrap();
    assert!(
        included
            .iter()
            .any(|i| i["id"] == "plan" && i["reason"] == "foveal"),
        "{json}"
    );
    for item in included {
        let reason = item["reason"].as_str().unwrap();
        // A project says which rule made it one.
        let kind = reason.split(" (project: ").next().unwrap();
        assert!(
            ["outline", "foveal", "ancestor"].contains(&kind) || kind.starts_with("semantic "),
            "{reason}"
        );
    }
    // One headline line for each object included.
    assert_eq!(
        body.lines().filter(|l| l.starts_with('*')).count(),
        included.len(),
        "{body}"
    );
    assert!(json["omitted"].is_object(), "{json}");
    // The private canary is absent whatever else is there (`@work` is not
    // private), and the gate after the skill had nothing to remove.
    assert!(!body.contains("PRIVATE CANARY"), "{body}");
    assert!(!body.contains("[REDACTED"), "{body}");
    assert_eq!(json["redacted"]["private"], 0, "{json}");
}

#[test]
fn explain_says_why_each_object_is_shown() {
    let dir = sandbox();
    let output = context(&dir, &["--focus", "plan", "--explain"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let out = text(&output.stdout);
    for line in [
        "## Context Debug",
        "- Focus: plan",
        "- Rendered by: awareness",
        "- launch: outline (project: tag, tagged :project:)",
        "- plan: foveal",
        "- archive: outline",
        "## Context",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
    assert!(out.contains("- twin: semantic 0.99"), "{out}");
}

#[test]
fn an_unknown_or_private_focus_is_refused_alike() {
    let dir = sandbox();
    for focus in ["nope", "diary"] {
        let output = context(&dir, &["--focus", focus]);
        assert_eq!(output.status.code(), Some(1));
        let err = text(&output.stderr);
        assert!(err.contains("no visible object has the id"), "{err}");
        assert!(!err.contains("CANARY"), "{err}");
    }
}

#[test]
fn a_threshold_out_of_range_is_a_usage_error() {
    let dir = sandbox();
    let output = context(&dir, &["--threshold", "1.5"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("from -1 to 1"));
}

#[test]
fn without_the_skill_the_context_is_the_fallback_line() {
    let dir = sandbox();
    let output = context(&dir, &["--no-builtin", "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["text"], "[Awareness skill not loaded]\n");
    assert!(
        json["source"].as_str().unwrap().starts_with("fallback: "),
        "{json}"
    );
}

#[test]
fn bench_awareness_reports_three_timed_cases() {
    let dir = sandbox();
    let output = run_foveal(
        dir.path(),
        &[
            "bench",
            "awareness",
            "--memex",
            "memex",
            "--focus",
            "plan",
            "--runs",
            "3",
            "--json",
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for case in ["uncached", "cached", "after_edit"] {
        let t = &json[case];
        let (median, min, max) = (
            t["median_ms"].as_f64().unwrap(),
            t["min_ms"].as_f64().unwrap(),
            t["max_ms"].as_f64().unwrap(),
        );
        assert!(min <= median && median <= max && min >= 0.0, "{case}: {t}");
    }
    assert_eq!(json["nodes"], 5, "the private diary is not counted");
    assert!(json["output_bytes"].as_u64().unwrap() > 100);
    // Nothing was written to the memex.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("memex/main.org")).unwrap(),
        MEMEX
    );
}

#[test]
fn a_secret_in_a_visible_note_is_redacted_at_the_last_door() {
    let dir = sandbox();
    let key = "sk-proj-Zx8Qw2Lm4Nb6Vc1Tr9Yp3Ks7Hd5Gf0Ja2Ue4Io6";
    let org = MEMEX.replace(
        "The plan body.",
        &format!("The plan body. OPENAI_API_KEY={key}"),
    );
    std::fs::write(dir.path().join("memex/main.org"), org).unwrap();
    let output = context(&dir, &["--focus", "plan", "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let raw = text(&output.stdout);
    assert!(!raw.contains(key), "{raw}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        json["text"].as_str().unwrap().contains("[REDACTED "),
        "{json}"
    );
    let secrets = json["redacted"]["secrets"].as_object().unwrap();
    assert!(!secrets.is_empty(), "{json}");
    assert_eq!(
        json["redacted"]["filter"], "skill",
        "the privacy skill is beside the binary"
    );
    assert!(!text(&output.stderr).contains(key));
}

/// Private headlines whose titles and lines are common words that visible
/// headlines use too, and one line only a private headline holds.
const COMMON_WORDS: &str = "* Launch :project:
:PROPERTIES:
:ID: launch
:END:
Review the plan and the budget with the team.
** Plan
:PROPERTIES:
:ID: plan
:EMBEDDING: 1 0 0
:END:
Notes for the meeting: budget, review, travel.
*** Budget
:PROPERTIES:
:ID: budget
:END:
Notes
** Meeting notes
:PROPERTIES:
:ID: meeting
:EMBEDDING: 0.9 0.1 0
:END:
Travel plans and the weekly Review.
* Home :@personal:
:PROPERTIES:
:ID: home
:END:
** Plan
:PROPERTIES:
:ID: home-plan
:EMBEDDING: 1 0 0
:END:
Review
Notes for the meeting: budget, review, travel.
** Budget
Notes
** Travel
PRIVATE CANARY only here
* Review :project:@personal:
** Meeting notes
:PROPERTIES:
:EMBEDDING: 0.9 0.1 0
:END:
";

#[test]
fn private_titles_that_are_common_words_do_not_redact_the_visible_outline() {
    // The same memex without its private headlines, through the same gate:
    // nothing private is left for the gate to find.
    let public: String = COMMON_WORDS
        .split_inclusive('\n')
        .scan(false, |private, line| {
            if line.starts_with("* ") {
                *private = line.contains(":@personal:");
            }
            Some(if *private { "" } else { line })
        })
        .collect();
    assert!(!public.contains("CANARY") && public.contains("* Launch"));
    let run = |org: &str, args: &[&str]| {
        let dir = sandbox();
        std::fs::write(dir.path().join("memex/main.org"), org).unwrap();
        let output = context(&dir, args);
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stdout)
    };
    let with_private = run(COMMON_WORDS, &["--focus", "plan"]);
    let without = run(&public, &["--focus", "plan"]);
    assert!(!with_private.contains("[REDACTED"), "{with_private}");
    assert!(!with_private.contains("CANARY"), "{with_private}");
    for word in [
        "** Plan",
        "Meeting notes",
        "*** Budget",
        "Travel plans",
        "Review",
    ] {
        assert!(
            with_private.contains(word),
            "{word:?} missing:\n{with_private}"
        );
    }
    assert_eq!(with_private, without);

    let json = |org: &str| -> serde_json::Value {
        serde_json::from_str(&run(org, &["--focus", "plan", "--json"])).unwrap()
    };
    let (with_private, without) = (json(COMMON_WORDS), json(&public));
    assert_eq!(with_private["text"], without["text"]);
    assert_eq!(with_private["redacted"]["private"], 0, "{with_private}");
}

/// Issue 34: `--focus` takes a handle as the compact outline shows it,
/// says which object it meant, and refuses a stale one clearly.
#[test]
fn focus_takes_a_handle_from_the_outline() {
    let dir = sandbox();
    let output = context(&dir, &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let out = text(&output.stdout);
    let line = out
        .lines()
        .find(|l| l.contains("Plan"))
        .unwrap_or_else(|| panic!("no Plan line:\n{out}"));
    let handle = line
        .split_whitespace()
        .find(|w| w.starts_with('^'))
        .unwrap_or_else(|| panic!("no handle on {line:?}"));
    let output = context(&dir, &["--focus", handle, "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains(&format!("focus: {handle} is plan (Plan)")),
        "{}",
        text(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        json["included"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["id"] == "plan" && i["reason"] == "foveal" && i["handle"] == handle),
        "{json}"
    );
    // A handle of no object, and one that is no handle.
    let stale = context(&dir, &["--focus", "^zzzzzz"]);
    assert!(!stale.status.success());
    assert!(
        text(&stale.stderr).contains("stale"),
        "{}",
        text(&stale.stderr)
    );
    let bad = context(&dir, &["--focus", "^!"]);
    assert!(!bad.status.success());
    assert!(
        text(&bad.stderr).contains("not a handle"),
        "{}",
        text(&bad.stderr)
    );
}
