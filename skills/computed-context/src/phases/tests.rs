//! Each phase on seed 001's own examples.

use super::*;
use crate::org::MapEntry;
use crate::render;
use crate::testing::TestMemex;

fn opts() -> Options {
    Options {
        cache: false,
        ..Options::default()
    }
}

/// A memex with a task, its dependencies, knowledge nodes and a map.
const MEMEX: &str = "\
* Knowledge
** Validate JWT in middleware :auth:jwt:
:PROPERTIES:
:ID: k-jwt-middleware
:KIND: pattern
:FILE: src/auth/middleware.rs
:END:
** Tokens expire on clock skew :jwt:token:
:PROPERTIES:
:ID: k-skew
:KIND: gotcha
:SEVERITY: high
:END:
** Sessions are stateless :session:
:PROPERTIES:
:ID: k-stateless
:KIND: decision
:RATIONALE: horizontal scaling
:END:
** Buttons use the design kit :button:ui:
:PROPERTIES:
:ID: k-buttons
:KIND: pattern
:END:
** A note without a kind :jwt:
:PROPERTIES:
:ID: k-note
:END:
** Default severity :login:
:PROPERTIES:
:ID: k-default
:KIND: gotcha
:END:
* Work
** DONE Set up the user model
:PROPERTIES:
:ID: t-model
:END:
The user model and its migration.
#+begin_src yaml
summary: User table with email and password hash
dependencies_for_next:
  - file: src/models/user.rs
    reason: the User struct
patterns_discovered:
  - pattern: Hash passwords with argon2
    applies_to: [auth, password]
    location: src/auth/hash.rs
gotchas:
  - issue: Emails are case-insensitive
    severity: high
  - issue: Seeds are slow
    severity: low
open_questions:
  - question: Soft delete users?
    blocking: true
    context: GDPR requests
    recommendation: Yes, with a purge job
  - question: Rename the table?
    blocking: false
files_created:
  - path: src/models/user.rs
    lines: 1-80
    purpose: the User model
#+end_src
** TODO Write the docs
:PROPERTIES:
:ID: t-docs
:END:
** DONE Broken handoff
:PROPERTIES:
:ID: t-broken
:END:
:HANDOFF:
summary: [unclosed
:END:
** TODO Add JWT login endpoint
:PROPERTIES:
:ID: t-login
:DEPENDS_ON: t-model t-docs,t-broken missing-id
:TYPE: feature
:END:
Issue a token from POST /login in src/auth/login.rs.
- [ ] Returns a JWT on a good password
- [ ] Rejects a bad one
* Context Map
| Component | Location | Notes |
|-----------+----------+-------|
| Login handler | src/auth/login.rs | auth endpoint |
| User model | src/models/user.rs | database record |
| Styles | web/style.css | ui |
";

#[test]
fn phase_1_extracts_keywords_domains_files_and_type() {
    TestMemex::one(MEMEX).with(|view| {
        let (file, index) = view.find("t-login").unwrap();
        let task = read_task(Obj { file, index }, &opts()).unwrap();
        assert_eq!(
            task.criteria,
            ["Returns a JWT on a good password", "Rejects a bad one"]
        );
        assert_eq!(
            task.depends_on,
            ["t-model", "t-docs", "t-broken", "missing-id"]
        );
        let s = extract_signals(&task, &opts());
        // Stopwords (`a`, `from`, `in`, `on`, `the`) are gone, the rest
        // lowercase, each once.
        for k in [
            "add", "jwt", "login", "endpoint", "issue", "token", "post", "returns", "password",
            "rejects", "bad",
        ] {
            assert!(
                s.keywords.contains(&k.to_owned()),
                "{k} in {:?}",
                s.keywords
            );
        }
        for stop in ["a", "from", "in", "on", "the"] {
            assert!(!s.keywords.contains(&stop.to_owned()), "{stop}");
        }
        // The seed's mapping: `endpoint` → api; `login`, `token`, `jwt`,
        // `password` → auth.
        assert_eq!(s.domains, ["api", "auth"]);
        assert_eq!(s.files, ["src/auth/login.rs"]);
        assert_eq!(s.task_type, ["feature"]);
    });
}

#[test]
fn the_seeds_domain_mapping_has_five_domains() {
    let kw = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let map = seed_domains();
    assert_eq!(domains_of(&kw(&["graphql"]), &map), ["api"]);
    assert_eq!(domains_of(&kw(&["session"]), &map), ["auth"]);
    assert_eq!(domains_of(&kw(&["migration"]), &map), ["database"]);
    assert_eq!(domains_of(&kw(&["button"]), &map), ["ui"]);
    assert_eq!(domains_of(&kw(&["mock", "coverage"]), &map), ["testing"]);
    assert_eq!(
        domains_of(&kw(&["tokens", "queries"]), &map),
        ["auth"],
        "plural of token; `queries` is not `query`+s"
    );
    assert_eq!(domains_of(&kw(&["weather"]), &map), Vec::<String>::new());
    // Mapping order, not keyword order.
    assert_eq!(
        domains_of(&kw(&["test", "route"]), &map),
        ["api", "testing"]
    );
}

#[test]
fn paths_are_found_and_urls_are_not() {
    assert_eq!(
        extract_paths(
            "See =src/a.rs=, `b/c.py:10-20` and config.toml; not https://x.org/a.html or v1.2"
        ),
        ["src/a.rs", "b/c.py", "config.toml"]
    );
}

#[test]
fn phase_2_queries_by_tags_dedupes_categorises_and_ranks() {
    TestMemex::one(MEMEX).with(|view| {
        let signals = Signals {
            keywords: vec!["jwt".into(), "token".into(), "login".into()],
            domains: vec!["auth".into()],
            ..Signals::default()
        };
        let k = query_knowledge(view, &signals, None, Complexity::Normal.limits());
        // jwt middleware: `jwt` (keyword) + `auth` (domain) = 2; skew: jwt
        // + token = 2; default: login = 1. The note has no kind.
        assert_eq!(k.patterns.len(), 1);
        assert_eq!(k.patterns[0].id, "k-jwt-middleware");
        assert_eq!(k.patterns[0].relevance, 2);
        assert_eq!(
            k.patterns[0].file.as_deref(),
            Some("src/auth/middleware.rs")
        );
        let gotchas: Vec<(&str, &str, u32)> = k
            .gotchas
            .iter()
            .map(|g| (g.id.as_str(), g.severity.as_str(), g.relevance))
            .collect();
        assert_eq!(gotchas, [("k-skew", "high", 2), ("k-default", "medium", 1)]);
        assert!(k.decisions.is_empty());
        // Deduplicated: the middleware pattern matched twice, counted once.
        assert_eq!(k.matched, 3);
    });
}

#[test]
fn phase_2_keeps_five_patterns_three_gotchas_three_decisions() {
    let mut org = String::new();
    for (kind, n) in [("pattern", 7), ("gotcha", 5), ("decision", 4)] {
        for i in 0..n {
            org.push_str(&format!(
                "* {kind} {i} :api:\n:PROPERTIES:\n:KIND: {kind}\n:END:\n"
            ));
        }
    }
    TestMemex::one(&org).with(|view| {
        let signals = Signals {
            keywords: vec!["api".into()],
            ..Signals::default()
        };
        let k = query_knowledge(view, &signals, None, Complexity::Normal.limits());
        assert_eq!(
            (k.patterns.len(), k.gotchas.len(), k.decisions.len()),
            (5, 3, 3)
        );
        // queryByTags(keywords, limit=20): 16 nodes carry the tag, all fit.
        assert_eq!(k.matched, 16);
        assert_eq!(query_by_tags(view, &["api".to_owned()], 20, None).len(), 16);
        assert_eq!(query_by_tags(view, &["api".to_owned()], 10, None).len(), 10);
    });
}

#[test]
fn phase_3_takes_completed_dependencies_and_filters_their_handoffs() {
    TestMemex::one(MEMEX).with(|view| {
        let (file, index) = view.find("t-login").unwrap();
        let task = read_task(Obj { file, index }, &opts()).unwrap();
        let deps = dependency_context(view, &task, &opts());
        assert_eq!(deps.incomplete, ["t-docs"]);
        assert_eq!(deps.missing, ["missing-id"]);
        let ids: Vec<&str> = deps.done.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["t-model", "t-broken"]);
        let model = &deps.done[0];
        assert_eq!(model.summary, "User table with email and password hash");
        assert_eq!(model.files_to_read[0].file, "src/models/user.rs");
        assert_eq!(model.patterns[0].pattern, "Hash passwords with argon2");
        // severity != "low"; blocking only.
        let gotchas: Vec<&str> = model.gotchas.iter().map(|g| g.issue.as_str()).collect();
        assert_eq!(gotchas, ["Emails are case-insensitive"]);
        let questions: Vec<&str> = model
            .open_questions
            .iter()
            .map(|q| q.question.as_str())
            .collect();
        assert_eq!(questions, ["Soft delete users?"]);
        // The broken handoff is reported with its file and line, and the
        // dependency is still there.
        assert_eq!(deps.errors.len(), 1);
        let e = &deps.errors[0];
        assert_eq!((e.file.as_str(), e.task.as_str()), ("main.org", "t-broken"));
        let line = MEMEX
            .lines()
            .position(|l| l == "summary: [unclosed")
            .unwrap() as u32
            + 1;
        assert_eq!(e.line, line);
        assert!(
            e.to_string().starts_with(&format!("main.org:{line}: ")),
            "{e}"
        );
    });
}

/// A handoff as models often write it: flow mappings, escapes in double
/// quotes, `''` in single quotes, an anchor and its alias.
const FLOW_MEMEX: &str = r#"* DONE Set up tokens
:PROPERTIES:
:ID: t-tokens
:END:
#+begin_src yaml
summary: "Tokens are signed \u2014 \"HS256\" only"
patterns_discovered:
  - {pattern: Validate tokens in middleware, applies_to: [auth, jwt], location: src/auth/middleware.rs}
gotchas:
  - {issue: "Clock skew: allow 30 s", severity: &high high}
  - {issue: Logs are noisy, severity: low}
  - issue: 'Refresh tokens can''t be revoked yet'
    severity: *high
open_questions:
  - {question: Rotate keys monthly?, blocking: true, recommendation: "Yes, with overlap"}
#+end_src
* TODO Add JWT login
:PROPERTIES:
:ID: t-login
:DEPENDS_ON: t-tokens
:END:
"#;

#[test]
fn a_handoff_in_flow_style_with_escapes_and_anchors_reaches_the_section_whole() {
    // Issue 29, row 8: the subset reader this replaced refused the first
    // `{…}` and the section lost the handoff's patterns and warnings.
    TestMemex::one(FLOW_MEMEX).with(|view| {
        let c = compute(view, "t-login", &opts()).unwrap();
        assert!(c.debug.errors.is_empty(), "{:?}", c.debug.errors);
        let text = render::markdown(&c);
        assert!(
            text.contains("- **Validate tokens in middleware** (see: src/auth/middleware.rs)\n"),
            "{text}"
        );
        assert!(
            text.contains("### Warnings\n- ⚠️ **high**: Clock skew: allow 30 s\n- ⚠️ **high**: Refresh tokens can't be revoked yet\n"),
            "{text}"
        );
        assert!(!text.contains("Logs are noisy"), "a low gotcha: {text}");
        assert!(
            text.contains("#### Set up tokens\nTokens are signed \u{2014} \"HS256\" only\n"),
            "{text}"
        );
        assert!(
            text.contains("- **Rotate keys monthly?**\n  - Recommendation: Yes, with overlap\n"),
            "{text}"
        );
        assert_eq!(
            c.inherited_patterns[0].applies_to,
            ["auth".to_owned(), "jwt".to_owned()]
        );
    });
}

#[test]
fn phase_4_scores_plus_2_1_1_3_and_keeps_the_top_10() {
    let entry = |c: &str, l: &str, n: &str| MapEntry {
        component: c.into(),
        location: l.into(),
        notes: n.into(),
        source: "map".into(),
    };
    let signals = Signals {
        keywords: vec!["auth".into(), "login".into()],
        domains: vec!["api".into()],
        files: vec!["src/auth/login.rs".into()],
        ..Signals::default()
    };
    let map = vec![
        // component has `auth` (+2) and `login` (+2); location has both
        // (+1 +1); notes name `api` (+1); the mentioned file (+3): 10.
        entry("Auth login", "src/auth/login.rs", "api handler"),
        // location `auth` only: 1.
        entry("Handler", "src/auth/x.rs", ""),
        // notes `api` only: 1.
        entry("Router", "src/r.rs", "the API routes"),
        // nothing: dropped.
        entry("Styles", "web/a.css", "ui"),
    ];
    let refs = filter_context_map(&signals, &map, 10);
    let scores: Vec<(&str, u32)> = refs
        .iter()
        .map(|r| (r.component.as_str(), r.relevance))
        .collect();
    assert_eq!(scores, [("Auth login", 10), ("Handler", 1), ("Router", 1)]);
    // The mentioned file is matched case-sensitively, as in the seed.
    let upper = vec![entry("X", "SRC/AUTH/LOGIN.RS", "")];
    assert_eq!(filter_context_map(&signals, &upper, 10)[0].relevance, 2);
    // Top 10 of 12.
    let many: Vec<MapEntry> = (0..12)
        .map(|i| entry(&format!("auth {i}"), "x", ""))
        .collect();
    assert_eq!(filter_context_map(&signals, &many, 10).len(), 10);
}

#[test]
fn the_limits_table_is_the_seeds() {
    let rows: Vec<(usize, usize, usize, usize)> =
        [Complexity::Easy, Complexity::Normal, Complexity::Complex]
            .iter()
            .map(|c| {
                let l = c.limits();
                (
                    l.max_patterns,
                    l.max_gotchas,
                    l.max_code_refs,
                    l.max_prior_tasks,
                )
            })
            .collect();
    assert_eq!(rows, [(3, 2, 5, 2), (5, 3, 10, 4), (10, 5, 20, 8)]);
    assert_eq!(Complexity::parse("Haiku"), Some(Complexity::Easy));
    assert_eq!(Complexity::parse("opus"), Some(Complexity::Complex));
    assert_eq!(Complexity::parse("?"), None);
}

#[test]
fn limits_apply_by_the_tasks_complexity() {
    let mut org = String::from(
        "* TODO Build the api :x:\n:PROPERTIES:\n:ID: t\n:COMPLEXITY: easy\n:END:\n* Context Map\n",
    );
    for i in 0..8 {
        org.push_str(&format!("- api part {i} :: src/api/{i}.rs :: api\n"));
    }
    for i in 0..6 {
        org.push_str(&format!(
            "* pattern {i} :api:\n:PROPERTIES:\n:KIND: pattern\n:END:\n"
        ));
        org.push_str(&format!(
            "* gotcha {i} :api:\n:PROPERTIES:\n:KIND: gotcha\n:END:\n"
        ));
    }
    TestMemex::one(&org).with(|view| {
        let c = compute(view, "t", &opts()).unwrap();
        assert_eq!(c.complexity, Some(Complexity::Easy));
        assert_eq!(
            (c.patterns.len(), c.gotchas.len(), c.code_references.len()),
            (3, 2, 5)
        );
        assert_eq!(c.debug.map_total, 8);
        let complex = org.replace(":COMPLEXITY: easy", ":COMPLEXITY: complex");
        TestMemex::one(&complex).with(|view| {
            let c = compute(view, "t", &opts()).unwrap();
            assert_eq!(
                (c.patterns.len(), c.gotchas.len(), c.code_references.len()),
                (6, 5, 8)
            );
        });
    });
}

#[test]
fn phase_5_assembles_the_seeds_sections() {
    TestMemex::one(MEMEX).with(|view| {
        let c = compute(view, "t-login", &opts()).unwrap();
        let text = render::markdown(&c);
        assert!(text.starts_with("## Context (Computed)\n\n### Patterns to Follow\n"), "{text}");
        // The handoff's pattern first, then the graph's.
        assert!(text.contains("- **Hash passwords with argon2** (see: src/auth/hash.rs)\n- **Validate JWT in middleware** (see: src/auth/middleware.rs)\n"), "{text}");
        assert!(text.contains("### Warnings\n- ⚠️ **high**: Emails are case-insensitive\n- ⚠️ **high**: Tokens expire on clock skew\n"), "{text}");
        assert!(!text.contains("Seeds are slow"), "a low gotcha: {text}");
        assert!(text.contains("### Relevant Decisions\n- Sessions are stateless (rationale: horizontal scaling)\n") || !c.signals.keywords.contains(&"session".to_owned()));
        assert!(text.contains("### Prior Work\n#### Set up the user model\nUser table with email and password hash\n\n**Files Created:**\n- `src/models/user.rs`: the User struct\n"), "{text}");
        assert!(text.contains("| Location | Component | Notes |\n|----------|-----------|-------|\n| `src/auth/login.rs` | Login handler | auth endpoint |\n"), "{text}");
        assert!(!text.contains("web/style.css"), "{text}");
        assert!(text.contains("### Open Questions (Blocking)\n⚠️ The following questions need resolution:\n- **Soft delete users?**\n  - Context: GDPR requests\n  - Recommendation: Yes, with a purge job\n"), "{text}");
        assert!(!text.contains("Rename the table"), "{text}");
        let debug = render::debug(&c);
        assert!(debug.starts_with("## Context Debug\n\n### Signals Extracted\n- Keywords: [add, jwt, login, endpoint"), "{debug}");
        assert!(debug.contains("- Domains: [api, auth]\n- Files Mentioned: [src/auth/login.rs]\n"), "{debug}");
        assert!(debug.contains("### Dependencies Processed\n- Task IDs: [t-model, t-broken]\n- Patterns inherited: 1\n- Warnings inherited: 1\n"), "{debug}");
        assert!(debug.contains("### Context Map Filtering\n- Total entries: 3\n- Entries after filter: 2\n- Top relevance score: "), "{debug}");
        assert!(debug.contains("- Handoff error: main.org:"), "{debug}");
        let json: serde_json::Value = serde_json::from_str(&render::json(&c, &text)).unwrap();
        assert_eq!(json["signals"]["domains"], serde_json::json!(["api", "auth"]));
        assert_eq!(json["complexity"], "normal");
        assert_eq!(json["patterns"][0]["id"], "t-model");
        assert_eq!(json["patterns"][1]["id"], "k-jwt-middleware");
        assert_eq!(json["prior_work"][0]["id"], "t-model");
        assert_eq!(json["code_references"][0]["id"].as_str().unwrap(), view.find("t-login").map(|_| json["code_references"][0]["id"].as_str().unwrap()).unwrap());
    });
}

#[test]
fn the_none_texts_when_nothing_matches() {
    TestMemex::one("* TODO Water the plants\n:PROPERTIES:\n:ID: w\n:END:\n").with(|view| {
        let c = compute(view, "w", &opts()).unwrap();
        let text = render::markdown(&c);
        assert_eq!(
            text,
            "## Context (Computed)\n\n### Patterns to Follow\nNo specific patterns identified for this task.\n\n### Warnings\nNo known gotchas for this task area.\n\n### Code References\nExplore the codebase as needed. No specific references pre-identified.\n"
        );
        assert!(render::debug(&c).contains("- No context map found\n"));
    });
}

#[test]
fn a_focus_that_is_not_a_task_computes_nothing() {
    TestMemex::one(MEMEX).with(|view| {
        assert!(compute(view, "k-skew", &opts()).is_none());
        assert!(compute(view, "nothing", &opts()).is_none());
    });
}

#[test]
fn write_back_plans_knowledge_nodes_and_map_entries_once() {
    let org = format!(
        "{MEMEX}** Existing :map:\n:PROPERTIES:\n:ID: e-user\n:LOCATION: src/models/user.rs\n:NOTES: old\n:END:\n"
    );
    TestMemex::one(&org).with(|view| {
        let plan = crate::writeback::plan(view, "t-model", &opts()).unwrap();
        let edits: Vec<String> = plan.edits.iter().map(|e| e.to_string()).collect();
        assert_eq!(edits.len(), 4, "{edits:#?}");
        assert!(
            edits[0].contains(r#""op":"add_child""#)
                && edits[0].contains(r#""title":"Hash passwords with argon2""#),
            "{}",
            edits[0]
        );
        assert!(
            edits[0].contains(r#""tags":["auth","password"]"#),
            "{}",
            edits[0]
        );
        assert!(
            edits[0].ends_with(r#"["KIND","pattern"]]}"#)
                || edits[0].contains(r#"["FILE","src/auth/hash.rs"],["KIND","pattern"]]"#),
            "{}",
            edits[0]
        );
        assert!(
            edits[1].contains("Emails are case-insensitive")
                && edits[1].contains(r#"["SEVERITY","high"]"#),
            "{}",
            edits[1]
        );
        // The map entry headline of the same path is updated in place.
        assert!(
            edits[2].contains(r#""op":"set_property","value":"src/models/user.rs:1-80""#)
                || (edits[2].contains("set_property")
                    && edits[2].contains("src/models/user.rs:1-80")
                    && edits[2].contains("e-user")),
            "{}",
            edits[2]
        );
        assert!(
            edits[3].contains("NOTES") && edits[3].contains("the User model"),
            "{}",
            edits[3]
        );
        // The task is not done: nothing.
        let plan = crate::writeback::plan(view, "t-login", &opts()).unwrap();
        assert!(plan.edits.is_empty());
        assert_eq!(plan.notes, ["the task is not done"]);
    });
    // Once written, planning again adds nothing.
    let written = format!(
        "{}** Existing :map:\n:PROPERTIES:\n:ID: e-user\n:LOCATION: src/models/user.rs:1-80\n:NOTES: the User model\n:END:\n",
        MEMEX.replace(
            "* Knowledge\n",
            "* Knowledge\n** Hash passwords with argon2\n:PROPERTIES:\n:KIND: pattern\n:END:\n** Emails are case-insensitive\n:PROPERTIES:\n:KIND: gotcha\n:END:\n"
        )
    );
    TestMemex::one(&written).with(|view| {
        let plan = crate::writeback::plan(view, "t-model", &opts()).unwrap();
        assert!(plan.edits.is_empty(), "{:?}", plan.edits);
    });
}
