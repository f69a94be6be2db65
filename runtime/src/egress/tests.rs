use super::*;
use crate::logs::LogRing;
use tracing_subscriber::layer::SubscriberExt as _;

const ORG: &str = "* Work :project:
Public body line.
** Diary :@personal:
:PROPERTIES:
:PHONE: +1 555 0100 777
:EMBEDDING: 0.1 0.2
:END:
Met \"Ann\" at the café.
- a
*** Deeper secret plans
Buy the ring in June.
** Public again
* Home :@PERSONAL:
";

fn memex(org: &str) -> (tempfile::TempDir, crate::memex::Memex) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.org"), org).unwrap();
    let memex = crate::memex::Memex::open(&[dir.path().to_path_buf()]).unwrap();
    (dir, memex)
}

fn gate() -> Gate {
    Gate::new(PrivacyTags::new(["@personal"]), &[], true).unwrap()
}

#[test]
fn private_fragments_are_titles_body_lines_and_property_values_of_private_objects() {
    let (_dir, memex) = memex(ORG);
    let snapshot = memex.snapshot();
    let file = snapshot.files().next().unwrap();
    let owned = private_fragments(file, &PrivacyTags::new(["@personal"]));
    let fragments: Vec<&str> = owned.iter().map(|f| &**f).collect();
    for expected in [
        "Diary",
        "+1 555 0100 777",
        "Met \"Ann\" at the café.",
        "Met \\\"Ann\\\" at the café.",
        "Met \\\"Ann\\\" at the caf\\u00e9.",
        "Deeper secret plans",
        "Buy the ring in June.",
        "Home",
    ] {
        assert!(fragments.contains(&expected), "{expected}: {fragments:?}");
    }
    // Too short, the embedding, and public objects are not fragments.
    for absent in [
        "- a",
        "0.1 0.2",
        "Work",
        "Public body line.",
        "Public again",
    ] {
        assert!(!fragments.contains(&absent), "{absent}: {fragments:?}");
    }
}

#[test]
fn the_gate_removes_private_titles_and_body_lines_also_inside_json() {
    let (_dir, memex) = memex(ORG);
    let gate = gate();
    let skills = Snapshot::default();
    let body = "Notes: Buy the ring in June. (from Deeper secret plans); Work is public.";
    let cleaned = gate.clean(body, &memex.snapshot(), &skills).unwrap();
    assert_eq!(
        cleaned.text,
        "Notes: [REDACTED private] (from [REDACTED private]); Work is public."
    );
    assert_eq!(cleaned.report.private, 2);
    assert_eq!(
        cleaned.report.filter,
        SecretFilter::Host(Fallback::NotLoaded)
    );

    let json =
        serde_json::json!({ "messages": [{ "content": "Met \"Ann\" at the café.\nHome alone" }] })
            .to_string();
    let cleaned = gate.clean(&json, &memex.snapshot(), &skills).unwrap();
    assert!(!cleaned.text.contains("Ann"), "{}", cleaned.text);
    assert!(!cleaned.text.contains("Home"), "{}", cleaned.text);
    let parsed: serde_json::Value = serde_json::from_str(&cleaned.text).unwrap();
    assert_eq!(
        parsed["messages"][0]["content"],
        "[REDACTED private]\n[REDACTED private] alone"
    );

    let ascii = "{\"c\": \"Met \\\"Ann\\\" at the caf\\u00e9.\"}";
    let cleaned = gate.clean(ascii, &memex.snapshot(), &skills).unwrap();
    assert_eq!(cleaned.text, "{\"c\": \"[REDACTED private]\"}");
}

#[test]
fn a_clean_body_is_returned_as_is() {
    let (_dir, memex) = memex(ORG);
    let cleaned = gate()
        .clean(
            "Work and Public again.",
            &memex.snapshot(),
            &Snapshot::default(),
        )
        .unwrap();
    assert!(matches!(cleaned.text, Cow::Borrowed(_)));
    assert_eq!(cleaned.report.total(), 0);
}

#[test]
fn a_private_fragment_inside_a_secret_cannot_split_it() {
    let (_dir, memex) = memex("* proj :@personal:\n");
    let body = "key sk-proj-4fGh8JkL2mN6pQ9rS3tU7vW1xY5zA0bC4dE8 end";
    let cleaned = gate()
        .clean(body, &memex.snapshot(), &Snapshot::default())
        .unwrap();
    assert_eq!(cleaned.text, "key [REDACTED private] end");
}

#[test]
fn secrets_and_private_text_go_together_and_the_log_says_how_many_never_what() {
    let ring = LogRing::new(100);
    let subscriber = tracing_subscriber::registry().with(ring.layer());
    let (_dir, memex) = memex(ORG);
    let gate = gate();
    let body = "Deeper secret plans: use AKIAIOSFODNN7EXAMPLE and Bearer abcdefghijklmnop0123";
    let cleaned = tracing::subscriber::with_default(subscriber, || {
        let first = gate
            .clean(body, &memex.snapshot(), &Snapshot::default())
            .unwrap();
        gate.clean(body, &memex.snapshot(), &Snapshot::default())
            .unwrap();
        first
    });
    assert_eq!(
        cleaned.text,
        "[REDACTED private]: use [REDACTED aws-access-key-id] and Bearer [REDACTED bearer-token]"
    );
    assert_eq!(
        cleaned.report.secrets_summary(),
        "aws-access-key-id=1,bearer-token=1"
    );
    let lines = ring.recent(100);
    for line in &lines {
        for leaked in [
            "AKIAIOSFODNN7EXAMPLE",
            "abcdefghijklmnop0123",
            "Deeper secret",
        ] {
            assert!(!line.contains(leaked), "{line}");
        }
    }
    // The fallback is announced once, the redactions each time.
    let fallback: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("built-in filter"))
        .collect();
    assert_eq!(fallback.len(), 1, "{lines:?}");
    assert!(
        fallback[0].starts_with(
            "WARN foveal::privacy: privacy: skill not loaded — the host applies its built-in filter"
        ),
        "{lines:?}"
    );
    let redacted: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("redacted before leaving"))
        .collect();
    assert_eq!(redacted.len(), 2, "{lines:?}");
    assert!(
        redacted[0].ends_with("private=1 secrets=aws-access-key-id=1,bearer-token=1 filter=host"),
        "{lines:?}"
    );
}

#[test]
fn the_private_matcher_is_cached_by_generation_and_rebuilt_after_an_edit() {
    let (dir, memex) = memex(ORG);
    std::fs::write(
        dir.path().join("b.org"),
        "* Other :@personal:\nGone line of text\n",
    )
    .unwrap();
    memex.reload_file(&dir.path().join("b.org"));
    let gate = gate();
    let first = gate.private_matcher(&memex.snapshot()).unwrap();
    let again = gate.private_matcher(&memex.snapshot()).unwrap();
    assert!(Arc::ptr_eq(&first, &again));

    std::fs::write(
        dir.path().join("b.org"),
        "* Other :@personal:\nA new private line\n",
    )
    .unwrap();
    memex.reload_file(&dir.path().join("b.org"));
    let skills = Snapshot::default();
    let cleaned = gate
        .clean(
            "A new private line / Gone line of text / Buy the ring in June.",
            &memex.snapshot(),
            &skills,
        )
        .unwrap();
    assert_eq!(
        cleaned.text,
        "[REDACTED private] / Gone line of text / [REDACTED private]"
    );
}

#[test]
fn a_gate_never_serves_one_memexs_private_text_for_anothers() {
    let (_a, first) = memex(ORG);
    let (_b, second) = memex("* Mine :@personal:\nMy own line\n");
    // Both fresh: the same generation number.
    assert_eq!(
        first.snapshot().generation(),
        second.snapshot().generation()
    );
    let gate = gate();
    let skills = Snapshot::default();
    gate.clean("x", &first.snapshot(), &skills).unwrap();
    let cleaned = gate
        .clean(
            "My own line; Buy the ring in June.",
            &second.snapshot(),
            &skills,
        )
        .unwrap();
    assert_eq!(cleaned.text, "[REDACTED private]; Buy the ring in June.");
}

#[test]
fn no_privacy_tags_means_no_private_text() {
    let (_dir, memex) = memex(ORG);
    let gate = Gate::new(PrivacyTags::new(Vec::<String>::new()), &[], true).unwrap();
    let cleaned = gate
        .clean(
            "Buy the ring in June.",
            &memex.snapshot(),
            &Snapshot::default(),
        )
        .unwrap();
    assert_eq!(cleaned.text, "Buy the ring in June.");
}

#[test]
fn configured_patterns_replace_the_defaults_when_asked() {
    let (_dir, memex) = memex(ORG);
    let mine = [Pattern::new("ticket", "TKT-[0-9]{6}")];
    let gate = Gate::new(PrivacyTags::new(["@personal"]), &mine, false).unwrap();
    let cleaned = gate
        .clean(
            "TKT-123456 AKIAIOSFODNN7EXAMPLE",
            &memex.snapshot(),
            &Snapshot::default(),
        )
        .unwrap();
    assert_eq!(cleaned.text, "[REDACTED ticket] AKIAIOSFODNN7EXAMPLE");
    assert!(Gate::new(PrivacyTags::default(), &[Pattern::new("bad", "(")], true).is_err());
}

#[test]
fn skill_fallback_says_not_loaded_on_an_empty_registry() {
    assert_eq!(
        skill_fallback(&Snapshot::default()),
        Some(Fallback::NotLoaded)
    );
    assert_eq!(
        fallback_notice(&Fallback::NotLoaded),
        "privacy: skill not loaded — the host applies its built-in filter (privacy tags + secret patterns)"
    );
}

#[test]
fn json_escape_matches_serde_json() {
    for text in [
        "plain",
        "q\"uote",
        "back\\slash",
        "tab\tand\u{1}",
        "café ☕ 𝄞",
    ] {
        let serde = serde_json::to_string(text).unwrap();
        assert_eq!(
            json_escape(text, false),
            serde[1..serde.len() - 1],
            "{text}"
        );
    }
    assert_eq!(json_escape("é𝄞", true), "\\u00e9\\ud834\\udd1e");
}

#[test]
fn a_fragment_ending_inside_another_does_not_hide_it() {
    let (_dir, memex) = memex("* Diary :@personal:\n  * plan\n** plan notes CANARY-1\n");
    let cleaned = gate()
        .clean(
            "** plan notes CANARY-1 :@personal:",
            &memex.snapshot(),
            &Snapshot::default(),
        )
        .unwrap();
    assert_eq!(cleaned.text, "*[REDACTED private] :@personal:");
    assert_eq!(cleaned.report.private, 1);
}
