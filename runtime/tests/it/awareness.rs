//! The awareness skill, loaded as a real library, rendering a real memex
//! view: the seed's own tests ported, the seed's faults fixed, snapshots.

use crate::support::{components_for, library};

/// Renders `org` with the awareness skill, focus and threshold given.
fn render(org: &str, focus: Option<&str>, config: &str) -> String {
    let (component, _) =
        components_for(&library("skill:awareness"), "awareness", org, focus, config);
    assert_eq!(component.id, 2000);
    component.content.to_string()
}

/// The seed's rules and format: projects by the `project` tag alone, no
/// map, the property drawers.
const SEED: &str = r#"{"projects": ["tag"], "map": false, "format": "seed"}"#;

/// Every rule, in the seed's format.
const SEED_FORMAT: &str = r#"{"format": "seed"}"#;

/// Seed 000 `test-foveal-rendering`, with the seed's rules and with every
/// rule (the project is tagged: the same).
#[test]
fn seed_test_foveal_rendering() {
    let org = "* Project :project:
:PROPERTIES:
:ID: proj-root
:END:
** Foveal Node
:PROPERTIES:
:ID: node-foveal
:END:
FOVEAL CONTENT
** Peripheral Node
:PROPERTIES:
:ID: node-peripheral
:END:
PERIPHERAL CONTENT
";
    for config in [SEED, SEED_FORMAT, "{}"] {
        let output = render(org, Some("node-foveal"), config);
        assert!(output.contains("FOVEAL CONTENT"), "{output}");
        assert!(output.contains("* Peripheral Node"), "{output}");
        assert!(!output.contains("PERIPHERAL CONTENT"), "{output}");
    }
}

/// Seed 000 `test-awareness-budget`.
#[test]
fn seed_test_awareness_budget() {
    let org = "* Project 1 :project:\n:PROPERTIES:\n:ID: p1\n:END:\n* Project 2 :project:\n:PROPERTIES:\n:ID: p2\n:END:\n";
    for config in [SEED, SEED_FORMAT, "{}"] {
        let output = render(org, None, config);
        assert!(output.contains("Project 1"), "{output}");
        assert!(output.contains("Project 2"), "{output}");
    }
}

#[test]
fn no_active_project_says_so() {
    let output = render("* DONE Old :project:\n* Note\n", None, SEED);
    assert_eq!(
        output,
        "GLOBAL MEMEX AWARENESS (Peripheral Vision):\nNo active projects found.\n"
    );
    // With the map (the default), the top of the file follows.
    let output = render("* DONE Old :project:\n* Note\n", None, SEED_FORMAT);
    assert!(
        output.starts_with(
            "GLOBAL MEMEX AWARENESS (Peripheral Vision):\nNo active projects found. The top of each file:\n* main.org\n** Old\n"
        ),
        "{output}"
    );
    // In the compact format, with its state: the old project is done.
    let output = render("* DONE Old :project:\n* Note\n", None, "{}");
    assert!(
        output.contains(
            "No active projects found. The top of each file:\n* main.org\n** DONE Old :project: ^"
        ),
        "{output}"
    );
}

const SIMILAR: &str = "* Launch :project:
:PROPERTIES:
:ID: launch
:END:
** Plan
:PROPERTIES:
:ID: plan
:EMBEDDING: 1 0 0
:END:
The plan body.
*** Step one
:PROPERTIES:
:ID: step
:END:
step body
** Archive
:PROPERTIES:
:ID: archive
:END:
*** Year
:PROPERTIES:
:ID: year
:END:
**** Deep twin of the plan
:PROPERTIES:
:ID: twin
:EMBEDDING: 0.95 0.05 0
:END:
twin body
**** Unrelated
:PROPERTIES:
:ID: unrelated
:EMBEDDING: 0 1 0
:END:
hidden body
** Diary :@personal:
:PROPERTIES:
:ID: diary
:EMBEDDING: 1 0 0
:END:
PRIVATE CANARY
";

#[test]
fn a_deep_similar_object_is_promoted_with_its_ancestor_path() {
    // The seed never passed the foveal vector on and never visited children
    // of omitted nodes, so `twin` could not appear; here it does.
    let output = render(SIMILAR, Some("plan"), SEED_FORMAT);
    assert_eq!(output, render(SIMILAR, Some("plan"), SEED));
    insta::assert_snapshot!(output, @r"
    GLOBAL MEMEX AWARENESS (Peripheral Vision):
    * Launch
    :PROPERTIES:
    :ID: launch
    :END:
    ** Plan
    :PROPERTIES:
    :ID: plan
    :END:
    The plan body.
    *** Step one
    :PROPERTIES:
    :ID: step
    :END:
    step body
    ** Archive
    :PROPERTIES:
    :ID: archive
    :END:
    *** Year
    :PROPERTIES:
    :ID: year
    :END:
    **** Deep twin of the plan
    :PROPERTIES:
    :ID: twin
    :SEMANTIC_SCORE: 1.00
    :END:
    twin body
    ");
    assert!(!output.contains("CANARY") && !output.contains("hidden body"));
}

/// The same objects as the seed's format shows above, in the compact
/// format: one line each, with its handle; the bodies as they are.
#[test]
fn the_compact_outline_shows_the_same_objects_in_fewer_tokens() {
    let compact = render(SIMILAR, Some("plan"), "{}");
    insta::assert_snapshot!(compact, @r"
    GLOBAL MEMEX AWARENESS (Peripheral Vision):
    * Launch :project: ^ha
    ** Plan ^7f
    The plan body.
    *** Step one ^m1
    step body
    ** Archive ^32
    *** Year ^1s
    **** Deep twin of the plan ^yf (similar 1.00)
    twin body
    ");
    // Fewer tokens, though the bodies are the same and the ids short
    // (the ratio on real ids is in docs/benchmarks.md).
    let seed = render(SIMILAR, Some("plan"), SEED);
    assert!(
        tokens(&compact) < tokens(&seed),
        "{} tokens against {}",
        tokens(&compact),
        tokens(&seed)
    );
}

#[test]
fn the_threshold_comes_from_the_configuration() {
    let output = render(
        SIMILAR,
        Some("plan"),
        r#"{"threshold": 0.9999, "format": "seed"}"#,
    );
    assert!(!output.contains(":ID: twin"), "{output}");
    let output = render(
        SIMILAR,
        Some("plan"),
        r#"{"threshold": -1, "format": "seed"}"#,
    );
    assert!(
        output.contains(":ID: unrelated") && output.contains("hidden body"),
        "{output}"
    );
    assert!(!output.contains("CANARY"), "{output}");
}

#[test]
fn many_siblings_render_in_linear_time() {
    // 20,000 siblings took the seed 5.7 s; this is a smoke check that the
    // output is complete, the speed is measured by benchmarks.
    let mut org = String::from("* Big :project:\n");
    for i in 0..20_000 {
        org.push_str(&format!("** Child {i}\n"));
    }
    let output = render(&org, None, "{}");
    assert_eq!(output.matches("\n** Child ").count(), 20_000);
}

/// A memex in a sandbox with the real awareness skill installed, rendered
/// through the host's context module (as `foveal context` does).
struct Context {
    sandbox: crate::support::Sandbox,
    registry: foveal::registry::Registry,
    memex: foveal::memex::Memex,
}

impl Context {
    fn new(org: &str) -> Self {
        let sandbox = crate::support::Sandbox::new();
        sandbox.install("skill:awareness", "foveal_skill_awareness");
        let registry = sandbox.registry();
        registry.scan();
        let dir = sandbox.root.path().join("memex");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("main.org"), org).unwrap();
        let memex = foveal::memex::Memex::open(&[dir]).unwrap();
        Self {
            sandbox,
            registry,
            memex,
        }
    }

    fn file(&self) -> std::path::PathBuf {
        self.sandbox.root.path().join("memex/main.org")
    }

    fn render(&self, request: &ContextRequest) -> Section {
        foveal::context::render(
            &self.registry.snapshot(),
            &self.memex.snapshot(),
            &PrivacyTags::new(["@personal"]),
            request,
        )
    }
}

use foveal::context::{ContextCache, ContextRequest, Origin, OutlineFormat, Section};
use foveal::memex::privacy::PrivacyTags;

fn tokens(text: &str) -> usize {
    foveal::tokens::global().count(text)
}

/// A project whose focus has a long subtree, many promoted objects and a
/// wide depth-2 outline: more than any small budget holds.
fn large_org() -> String {
    let mut org = String::from("* Launch :project:\n:PROPERTIES:\n:ID: launch\n:END:\n");
    org.push_str("** Focus\n:PROPERTIES:\n:ID: focus\n:EMBEDDING: 1 0 0\n:END:\nThe focus body.\n");
    for i in 0..10 {
        org.push_str(&format!(
            "*** Step {i}\n:PROPERTIES:\n:ID: step-{i}\n:END:\nStep {i} has a body of several words.\n"
        ));
    }
    for i in 0..40 {
        // Scores fall with i: 1.00, 0.99, …
        let y = i as f32 * 0.02;
        org.push_str(&format!(
            "** Area {i}\n:PROPERTIES:\n:ID: area-{i}\n:END:\n*** Similar {i}\n:PROPERTIES:\n:ID: similar-{i}\n:EMBEDDING: 1 {y} 0\n:END:\nSimilar body {i}.\n"
        ));
    }
    org
}

fn focus_request(budget: Option<u32>) -> ContextRequest {
    ContextRequest {
        focus: Some("focus".to_owned()),
        budget,
        explain: true,
        ..ContextRequest::default()
    }
}

/// [`focus_request`] in the seed's format, whose `:ID:` lines the tests
/// below read.
fn seed_focus_request(budget: Option<u32>) -> ContextRequest {
    ContextRequest {
        format: OutlineFormat::Seed,
        ..focus_request(budget)
    }
}

#[test]
fn a_budget_always_holds_and_says_what_was_left_out() {
    for format in OutlineFormat::ALL {
        a_budget_always_holds_in(format);
    }
}

fn a_budget_always_holds_in(format: OutlineFormat) {
    let focus_request = |budget| ContextRequest {
        format,
        ..focus_request(budget)
    };
    let context = Context::new(&large_org());
    let full = context.render(&focus_request(None));
    assert!(matches!(full.origin, Origin::Skill { .. }));
    let full_tokens = tokens(full.text());
    assert!(!full.text().contains("omitted]"));
    for budget in [15, 40, 100, 250, 600, 1200, full_tokens as u32 - 1] {
        let section = context.render(&focus_request(Some(budget)));
        let text = section.text();
        assert!(
            tokens(text) <= budget as usize,
            "budget {budget}: {} tokens\n{text}",
            tokens(text)
        );
        let left_out: u32 = section
            .omitted
            .iter()
            .filter(|(reason, _)| reason != "depth")
            .map(|(_, n)| n)
            .sum();
        if !text.is_empty() {
            assert!(text.starts_with("GLOBAL MEMEX AWARENESS (Peripheral Vision):\n"));
            assert!(left_out > 0, "budget {budget} left nothing out");
            assert!(
                text.ends_with(&format!("[… {left_out} peripheral headlines omitted]\n")),
                "budget {budget}:\n{text}"
            );
        }
    }
    // With room for everything, everything comes, unmarked.
    let roomy = context.render(&focus_request(Some(full_tokens as u32)));
    assert_eq!(roomy.text(), full.text());
}

#[test]
fn a_budget_keeps_the_focus_then_the_most_similar_then_the_outline() {
    let context = Context::new(&large_org());
    let section = context.render(&seed_focus_request(Some(600)));
    let text = section.text();
    // The whole foveal subtree fits and comes first in priority.
    assert!(
        text.contains("The focus body.") && text.contains("Step 9 has a body"),
        "{text}"
    );
    // Promoted objects by score: the most similar in, the least out.
    assert!(text.contains(":ID: similar-0\n"), "{text}");
    assert!(!text.contains(":ID: similar-39\n"), "{text}");
    // Each promoted object comes with its ancestor path.
    for (id, reason) in &section.sources {
        if let Some(n) = id.strip_prefix("similar-") {
            assert!(reason.starts_with("semantic "), "{id}: {reason}");
            assert!(
                text.contains(&format!(":ID: area-{n}\n")),
                "{id} without its parent"
            );
        }
    }
    // Outline comes last: with this budget some areas without a promoted
    // child are gone.
    let omitted: std::collections::BTreeMap<_, _> = section.omitted.iter().cloned().collect();
    assert!(
        omitted.get("semantic").copied().unwrap_or(0) > 0,
        "{omitted:?}"
    );
    assert_eq!(omitted.get("foveal"), None, "{omitted:?}");
}

#[test]
fn a_budget_too_small_for_the_header_gives_an_empty_section() {
    let context = Context::new(&large_org());
    let section = context.render(&focus_request(Some(3)));
    assert_eq!(section.text(), "");
    assert!(section.sources.is_empty());
}

#[test]
fn without_the_skill_the_section_is_the_seed_fallback_line() {
    let context = Context::new(&large_org());
    let empty = crate::support::Sandbox::new().registry();
    let section = foveal::context::render(
        &empty.snapshot(),
        &context.memex.snapshot(),
        &PrivacyTags::default(),
        &focus_request(None),
    );
    assert_eq!(section.text(), "[Awareness skill not loaded]\n");
    assert!(matches!(section.origin, Origin::Fallback(_)));
}

#[test]
fn explain_lists_every_object_shown_with_its_reason() {
    let context = Context::new(SIMILAR);
    let section = context.render(&ContextRequest {
        focus: Some("plan".to_owned()),
        explain: true,
        ..ContextRequest::default()
    });
    let sources: Vec<String> = section
        .sources
        .iter()
        .map(|(id, reason)| format!("{id}: {reason}"))
        .collect();
    assert_eq!(
        sources,
        [
            "launch: outline (project: tag, tagged :project:)",
            "plan: foveal",
            "step: foveal",
            "archive: outline",
            "year: ancestor",
            "twin: semantic 1.00",
        ]
    );
    // `unrelated` is deeper than 2 and not similar; `diary` is private and
    // not counted at all.
    assert_eq!(section.omitted, [("depth".to_owned(), 1)]);
}

#[test]
fn the_cache_serves_a_generation_and_an_edit_that_keeps_the_count_is_seen() {
    // Seed 003 keyed its cache on the object count: an edit that keeps the
    // count served stale context. Here the memex generation is the key.
    let context = Context::new(SIMILAR);
    let cache = ContextCache::default();
    let privacy = PrivacyTags::new(["@personal"]);
    let request = ContextRequest {
        focus: Some("plan".to_owned()),
        ..ContextRequest::default()
    };
    let skills = context.registry.snapshot();
    let first = cache.section(&skills, &context.memex.snapshot(), &privacy, &request);
    let again = cache.section(&skills, &context.memex.snapshot(), &privacy, &request);
    assert!(std::sync::Arc::ptr_eq(&first, &again));
    let org = SIMILAR.replace("The plan body.", "The plan changed.");
    std::fs::write(context.file(), org).unwrap();
    context.memex.reload_file(&context.file());
    let edited = cache.section(&skills, &context.memex.snapshot(), &privacy, &request);
    assert!(
        edited.text().contains("The plan changed."),
        "{}",
        edited.text()
    );
    // Another focus is another section.
    let other = ContextRequest {
        focus: Some("twin".to_owned()),
        ..request
    };
    let moved = cache.section(&skills, &context.memex.snapshot(), &privacy, &other);
    assert!(moved.text().contains("twin body") && !std::sync::Arc::ptr_eq(&moved, &edited));
}

#[test]
fn reused_work_gives_the_same_text_as_fresh_work_after_edits() {
    // The skill reuses its semantic scan and the text of unchanged objects
    // between renders; after each edit its answer must equal a render done
    // from scratch.
    for format in OutlineFormat::ALL {
        reused_work_gives_the_same_text_in(format);
    }
}

fn reused_work_gives_the_same_text_in(format: OutlineFormat) {
    let context = Context::new(&large_org());
    let cached = ContextRequest {
        format,
        ..focus_request(None)
    };
    let fresh = ContextRequest {
        skill_cache: false,
        ..cached.clone()
    };
    let edits: [(&str, &str); 5] = [
        ("Similar body 3.", "Similar body 3, edited."),
        ("** Area 5\n", "** Area five\n"),
        (
            "similar-1\n:EMBEDDING: 1 0.02 0",
            "similar-1\n:EMBEDDING: 0 1 0",
        ),
        ("*** Step 2\n", "*** Step 2\n**** Inserted\nnew body\n"),
        // A new object: the collision rule may lengthen a handle.
        ("** Area 7\n", "** Area 7\n*** TODO [#B] New task :x:\n"),
    ];
    let mut org = large_org();
    assert_eq!(
        context.render(&cached).text(),
        context.render(&fresh).text()
    );
    for (from, to) in edits {
        assert!(org.contains(from), "{from}");
        org = org.replacen(from, to, 1);
        std::fs::write(context.file(), &org).unwrap();
        context.memex.reload_file(&context.file());
        let reused = context.render(&cached);
        assert_eq!(
            reused.text(),
            context.render(&fresh).text(),
            "after {from:?} → {to:?}"
        );
    }
}

#[test]
fn reused_scans_give_the_same_text_as_fresh_ones_in_a_memex_of_many_files() {
    // More files with projects and vectors than the skill once kept scans
    // for (8): each render rescanned every file. Reuse must still give
    // what a render from scratch gives, after edits to one file's body,
    // to its vectors, and after the focus moves.
    let context = Context::new(&large_org());
    let dir = context.sandbox.root.path().join("memex");
    let file = |n: usize| dir.join(format!("area-{n:02}.org"));
    let org = |n: usize, y: f32| {
        format!(
            "* Area {n} :project:\n:PROPERTIES:\n:ID: area-file-{n}\n:END:\n** Near {n}\n:PROPERTIES:\n:ID: near-{n}\n:EMBEDDING: 1 {y} 0\n:END:\nNear body {n}.\n** Far {n}\n:PROPERTIES:\n:ID: far-{n}\n:EMBEDDING: 0 0 1\n:END:\n"
        )
    };
    for n in 0..12 {
        std::fs::write(file(n), org(n, n as f32 * 0.01)).unwrap();
        context.memex.reload_file(&file(n));
    }
    let cached = focus_request(None);
    let fresh = ContextRequest {
        skill_cache: false,
        ..cached.clone()
    };
    let same = |why: &str| {
        let reused = context.render(&cached);
        assert_eq!(reused.text(), context.render(&fresh).text(), "{why}");
        reused.text().to_owned()
    };
    // Whether `Near {n}` is promoted: shown with its score, not only as
    // a depth-2 outline line (as every `Far` is).
    let promoted = |text: &str, n: usize| {
        text.lines()
            .any(|l| l.contains(&format!("Near {n} ")) && l.contains("(similar"))
    };
    let first = same("first render");
    assert!((0..12).all(|n| promoted(&first, n)), "{first}");
    assert!(
        !first
            .lines()
            .any(|l| l.contains("Far") && l.contains("(similar"))
    );
    assert_eq!(same("again"), first);
    std::fs::write(
        file(4),
        org(4, 0.04).replace("Near body 4.", "Near body 4, edited."),
    )
    .unwrap();
    context.memex.reload_file(&file(4));
    assert!(same("a body edited").contains("Near body 4, edited."));
    // A vector that moves away: that object is no longer promoted.
    std::fs::write(
        file(7),
        org(7, 0.07).replace(":EMBEDDING: 1 0.07 0", ":EMBEDDING: 0 1 0"),
    )
    .unwrap();
    context.memex.reload_file(&file(7));
    let moved = same("a vector edited");
    assert!(!promoted(&moved, 7) && promoted(&moved, 8), "{moved}");
    let elsewhere = ContextRequest {
        focus: Some("far-3".to_owned()),
        ..cached.clone()
    };
    assert_eq!(
        context.render(&elsewhere).text(),
        context
            .render(&ContextRequest {
                skill_cache: false,
                ..elsewhere.clone()
            })
            .text()
    );
    assert_eq!(same("the focus back"), moved);
}

#[test]
fn a_budgeted_outline_reads_as_documented() {
    let context = Context::new(SIMILAR);
    let section = context.render(&ContextRequest {
        focus: Some("plan".to_owned()),
        budget: Some(70),
        format: OutlineFormat::Seed,
        ..ContextRequest::default()
    });
    assert!(tokens(section.text()) <= 70);
    // The focus and its subtree first; the promoted twin with its path and
    // the rest of the outline did not fit.
    insta::assert_snapshot!(section.text(), @r"
    GLOBAL MEMEX AWARENESS (Peripheral Vision):
    * Launch
    :PROPERTIES:
    :ID: launch
    :END:
    ** Plan
    :PROPERTIES:
    :ID: plan
    :END:
    The plan body.
    *** Step one
    :PROPERTIES:
    :ID: step
    :END:
    step body
    [… 3 peripheral headlines omitted]
    ");
}

#[test]
fn a_budgeted_compact_outline_reads_as_documented() {
    let context = Context::new(SIMILAR);
    let section = context.render(&ContextRequest {
        focus: Some("plan".to_owned()),
        budget: Some(70),
        ..ContextRequest::default()
    });
    assert!(tokens(section.text()) <= 70);
    // The same budget holds everything in the compact format.
    insta::assert_snapshot!(section.text(), @r"
    GLOBAL MEMEX AWARENESS (Peripheral Vision):
    * Launch :project: ^ha
    ** Plan ^7f
    The plan body.
    *** Step one ^m1
    step body
    ** Archive ^32
    *** Year ^1s
    **** Deep twin of the plan ^yf (similar 1.00)
    twin body
    ");
}

/// A project below the top level (the heading rule: under `* Projects`)
/// in focus itself: its subtree in full, at the project's own depth, and
/// nothing above it — the path to the file's root was once walked and
/// given depths below zero (lines of 65,535 stars).
#[test]
fn a_nested_project_in_focus_shows_its_subtree_and_nothing_above_it() {
    let org = "* Projects
** Build the shed
:PROPERTIES:
:ID: shed
:END:
Shed body.
*** TODO Buy timber
:PROPERTIES:
:ID: timber
:END:
Timber body.
";
    for config in ["{}", SEED_FORMAT] {
        let output = render(org, Some("shed"), config);
        assert!(
            output.contains("Shed body.") && output.contains("Timber body."),
            "{output}"
        );
        for line in output.lines().filter(|l| l.starts_with('*')) {
            let stars = line.chars().take_while(|&c| c == '*').count();
            assert!((1..=2).contains(&stars), "{line:?} in:\n{output}");
        }
        assert!(
            !output.lines().any(|l| l
                .trim_start_matches('*')
                .trim_start()
                .starts_with("Projects")),
            "{output}"
        );
        assert!(!output.contains("4294967"), "{output}");
    }
}
