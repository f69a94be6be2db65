//! The last door (`foveal::egress`) with real skill libraries: the host's
//! filter when the privacy skill is absent or failing (fail closed), the
//! skill's `redact` hook when it is loaded, hot swaps, and a property test
//! that no private text leaves through the awareness outline, the gate, the
//! log or an error message.

use std::path::Path;

use foveal::egress::{Cleaned, Fallback, Gate, Report, SecretFilter, skill_fallback};
use foveal::logs::LogRing;
use foveal::memex::Memex;
use foveal::memex::privacy::PrivacyTags;
use foveal::memex::view::SnapshotView;
use foveal::registry::{Change, Registry};
use foveal_redact::Pattern;
use tracing_subscriber::layer::SubscriberExt as _;

use crate::support::{Sandbox, components_for, library};

const MEMEX: &str = "* Launch :project:
:PROPERTIES:
:ID: launch
:END:
The launch plan.
** Diary :@personal:
Met Ann at the harbour.
*** Bearer
Reading list for June.
";

/// Made-up secrets with the shape of the real thing.
const SECRETS: [&str; 4] = [
    "sk-ant-api03-Xq8vR2mT9pLk4wZ7nB3cH6jF1sD5gA0eY",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "hunter2hunter2",
];

fn body() -> String {
    format!(
        "Remember: Met Ann at the harbour. Keys: {} and {}; token {}; password: \"{}\". The launch plan is public.",
        SECRETS[0], SECRETS[1], SECRETS[2], SECRETS[3]
    )
}

const CLEANED: &str = "Remember: [REDACTED private]. Keys: [REDACTED anthropic-key] and [REDACTED aws-access-key-id]; token [REDACTED github-token]; password: \"[REDACTED secret-assignment]\". The launch plan is public.";

fn open_memex(dir: &Path, org: &str) -> Memex {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("main.org"), org).unwrap();
    Memex::open(&[dir.to_path_buf()]).unwrap()
}

fn gate() -> Gate {
    Gate::new(PrivacyTags::new(["@personal"]), &[], true).unwrap()
}

/// Runs `f` with the host's log going to a fresh ring; returns what `f`
/// returned and every line logged.
fn logged<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let ring = LogRing::new(10_000);
    let subscriber = tracing_subscriber::registry().with(ring.layer());
    // tracing caches per callsite whether anyone listens. While this
    // subscriber were the only live one, a test on another thread, with
    // none, could cache "no one" for a callsite `f` logs through: an inert
    // second dispatcher makes each callsite ask all live ones, and the
    // cache is rebuilt once both exist.
    let _anchor = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let value = tracing::subscriber::with_default(subscriber, || {
        tracing::callsite::rebuild_interest_cache();
        f()
    });
    let mut lines = ring.recent(usize::MAX);
    lines.reverse();
    (value, lines)
}

fn assert_no_secret(text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert!(!text.contains("Met Ann"), "{text}");
}

fn clean(gate: &Gate, memex: &Memex, registry: &Registry, body: &str) -> (String, Report) {
    let Cleaned { text, report } = gate
        .clean(body, &memex.snapshot(), &registry.snapshot())
        .unwrap();
    (text.into_owned(), report)
}

#[test]
fn without_a_privacy_skill_the_host_removes_secrets_and_private_text() {
    let sandbox = Sandbox::new();
    let registry = sandbox.registry();
    registry.scan();
    let memex = open_memex(&sandbox.root.path().join("memex"), MEMEX);
    let gate = gate();
    let ((text, report), lines) = logged(|| clean(&gate, &memex, &registry, &body()));
    assert_eq!(text, CLEANED);
    assert_eq!(report.filter, SecretFilter::Host(Fallback::NotLoaded));
    assert_eq!(report.private, 1);
    assert_eq!(
        report.secrets_summary(),
        "anthropic-key=1,aws-access-key-id=1,github-token=1,secret-assignment=1"
    );
    assert_eq!(
        skill_fallback(&registry.snapshot()),
        Some(Fallback::NotLoaded)
    );
    assert!(
        lines.iter().any(|l| l.starts_with(
            "WARN foveal::privacy: privacy: skill not loaded — the host applies its built-in filter (privacy tags + secret patterns)"
        )),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("request body redacted") && l.ends_with("filter=host")),
        "{lines:#?}"
    );
    for line in &lines {
        assert_no_secret(line);
    }
    assert_no_secret(&format!("{report:?}"));
}

#[test]
fn with_the_privacy_skill_loaded_its_redact_hook_removes_the_secrets() {
    let sandbox = Sandbox::new();
    sandbox.install("skill:privacy", "privacy");
    let registry = sandbox.registry();
    registry.scan();
    assert_eq!(skill_fallback(&registry.snapshot()), None);
    let memex = open_memex(&sandbox.root.path().join("memex"), MEMEX);
    let gate = gate();
    let ((text, report), lines) = logged(|| clean(&gate, &memex, &registry, &body()));
    // The same code as the host's: the same result.
    assert_eq!(text, CLEANED);
    assert_eq!(report.filter, SecretFilter::Skill);
    assert_eq!(report.host_after_skill, 0);
    assert_eq!(report.private, 1);
    assert_eq!(
        report.secrets_summary(),
        "anthropic-key=1,aws-access-key-id=1,github-token=1,secret-assignment=1"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("privacy skill configured with the secret patterns")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("request body redacted") && l.ends_with("filter=skill")),
        "{lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("built-in filter")),
        "{lines:#?}"
    );
    for line in &lines {
        assert_no_secret(line);
    }
}

#[test]
fn the_host_configures_the_skill_with_the_configured_patterns() {
    let sandbox = Sandbox::new();
    sandbox.install("skill:privacy", "privacy");
    let registry = sandbox.registry();
    registry.scan();
    let memex = open_memex(&sandbox.root.path().join("memex"), MEMEX);
    let mine = [Pattern::new("ticket", "TKT-[0-9]{6}")];
    let gate = Gate::new(PrivacyTags::new(["@personal"]), &mine, false).unwrap();
    let (text, report) = clean(
        &gate,
        &memex,
        &registry,
        "TKT-123456 and AKIAIOSFODNN7EXAMPLE",
    );
    assert_eq!(text, "[REDACTED ticket] and AKIAIOSFODNN7EXAMPLE");
    assert_eq!(report.filter, SecretFilter::Skill);
    assert_eq!(
        crate::support::invoke(&registry, "privacy", "patterns").unwrap(),
        r#"{"patterns":["ticket"]}"#
    );
}

#[test]
fn a_secret_that_loses_its_context_beside_private_text_is_still_removed() {
    // `Bearer` is a private title here: once it is redacted, the token
    // after it no longer looks like a bearer token to the skill.
    let sandbox = Sandbox::new();
    sandbox.install("skill:privacy", "privacy");
    let registry = sandbox.registry();
    registry.scan();
    let memex = open_memex(&sandbox.root.path().join("memex"), MEMEX);
    let (text, report) = clean(
        &gate(),
        &memex,
        &registry,
        "Authorization: Bearer abcdefghijklmnop0123",
    );
    assert_eq!(
        text,
        "Authorization: [REDACTED private] [REDACTED bearer-token]"
    );
    assert_eq!(report.filter, SecretFilter::Skill);
    assert_eq!(report.host_after_skill, 1);
}

#[test]
fn a_privacy_skill_swapped_during_use_keeps_working() {
    let sandbox = Sandbox::new();
    let path = sandbox.install("skill:privacy", "privacy");
    let registry = sandbox.registry();
    registry.scan();
    let memex = open_memex(&sandbox.root.path().join("memex"), MEMEX);
    let gate = gate();
    let (_, lines) = logged(|| {
        let (text, report) = clean(&gate, &memex, &registry, &body());
        assert_eq!(
            (text.as_str(), &report.filter),
            (CLEANED, &SecretFilter::Skill)
        );
        // A new build of the same skill: configured again, then used.
        let first = registry.snapshot().get("privacy").unwrap().skill().clone();
        sandbox.install("skill:privacy", "privacy");
        assert!(matches!(registry.load_path(&path), Change::Published(_)));
        let second = registry.snapshot().get("privacy").unwrap().skill().clone();
        assert!(!std::sync::Arc::ptr_eq(&first, &second));
        let (text, report) = clean(&gate, &memex, &registry, &body());
        assert_eq!(
            (text.as_str(), &report.filter),
            (CLEANED, &SecretFilter::Skill)
        );

        // A build that lets secrets through: the host removes them after it.
        sandbox.install("privacy-double", "privacy");
        assert!(matches!(registry.load_path(&path), Change::Published(_)));
        let (text, report) = clean(&gate, &memex, &registry, &body());
        assert_eq!(text, CLEANED);
        assert_eq!(report.filter, SecretFilter::Skill);
        assert_eq!(report.host_after_skill, 4);

        // Removed: the host's filter alone.
        std::fs::remove_file(&path).unwrap();
        registry.remove_path(&path);
        let (text, report) = clean(&gate, &memex, &registry, &body());
        assert_eq!(text, CLEANED);
        assert_eq!(report.filter, SecretFilter::Host(Fallback::NotLoaded));

        // And back.
        sandbox.install("skill:privacy", "privacy");
        registry.load_path(&path);
        let (text, report) = clean(&gate, &memex, &registry, &body());
        assert_eq!(
            (text.as_str(), &report.filter),
            (CLEANED, &SecretFilter::Skill)
        );
    });
    let configured = lines
        .iter()
        .filter(|l| l.contains("privacy skill configured"))
        .count();
    assert_eq!(configured, 4, "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("the privacy skill left secrets the host's patterns find")),
        "{lines:#?}"
    );
    for line in &lines {
        assert_no_secret(line);
    }
}

#[test]
fn a_privacy_skill_that_fails_or_panics_falls_back_to_the_host_and_is_quarantined() {
    let sandbox = Sandbox::new();
    sandbox.install("privacy-double", "privacy");
    let registry = sandbox.registry();
    registry.scan();
    let memex = open_memex(&sandbox.root.path().join("memex"), MEMEX);
    let gate = gate();
    let mode = |m: &str| {
        registry
            .snapshot()
            .call("privacy", foveal::registry::hooks::INVOKE, |f| {
                f("mode".into(), m.into())
            })
            .unwrap();
    };
    let (_, lines) = logged(|| {
        mode("error");
        let (text, report) = clean(&gate, &memex, &registry, &body());
        assert_eq!(text, CLEANED);
        assert_eq!(
            report.filter,
            SecretFilter::Host(Fallback::HookFailed("unavailable"))
        );
        mode("panic");
        for _ in 0..3 {
            let (text, report) = clean(&gate, &memex, &registry, &body());
            assert_eq!(text, CLEANED);
            assert_eq!(
                report.filter,
                SecretFilter::Host(Fallback::HookFailed("panic"))
            );
        }
        let (text, report) = clean(&gate, &memex, &registry, &body());
        assert_eq!(text, CLEANED);
        assert_eq!(report.filter, SecretFilter::Host(Fallback::Quarantined));
        assert_eq!(
            skill_fallback(&registry.snapshot()),
            Some(Fallback::Quarantined)
        );
    });
    let notices: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("the host applies its built-in filter"))
        .collect();
    assert_eq!(notices.len(), 3, "{lines:#?}");
    assert!(notices[0].contains("privacy: skill's redact hook failed (unavailable)"));
    assert!(notices[1].contains("privacy: skill's redact hook failed (panic)"));
    assert!(notices[2].contains("privacy: skill quarantined"));
    for line in &lines {
        assert_no_secret(line);
    }
}

/// Random memexes with canaries in private objects only: none reaches the
/// outline a skill renders, the body after the gate, the log or an error.
mod canaries {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};

    const WORDS: &[&str] = &[
        "alpha",
        "launch",
        "plan",
        "notes",
        "review",
        "june",
        "harbour",
        "draft",
        "meeting",
        "budget",
        "a",
        "of",
        "the",
        "x",
        "to-do",
        "task-1234",
    ];
    const BULLETS: &[&str] = &["", "", "- ", "+ ", "  * ", "1. ", "\t"];
    const TAG_SPELLINGS: &[&str] = &["@personal", "@Personal", "@PERSONAL"];
    const CONFIG_SPELLINGS: &[&str] = &["@personal", ":@personal:", "@Personal", ":@PERSONAL"];

    #[derive(Debug, Clone)]
    struct Node {
        level: u8,
        private_tag: Option<usize>,
        project: bool,
        id: bool,
        title: Vec<usize>,
        body: Vec<(usize, Vec<usize>, bool)>,
    }

    fn node() -> impl Strategy<Value = Node> {
        (
            1u8..8,
            prop::option::weighted(0.25, 0..TAG_SPELLINGS.len()),
            any::<bool>(),
            any::<bool>(),
            prop::collection::vec(0..WORDS.len(), 0..4),
            prop::collection::vec(
                (
                    0..BULLETS.len(),
                    prop::collection::vec(0..WORDS.len(), 0..5),
                    any::<bool>(),
                ),
                0..4,
            ),
        )
            .prop_map(|(level, private_tag, project, id, title, body)| Node {
                level,
                private_tag,
                project,
                id,
                title,
                body,
            })
    }

    fn words(indices: &[usize]) -> String {
        indices
            .iter()
            .map(|&i| WORDS[i])
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The Org text, the ids of public objects, and how many canaries.
    /// Each canary is unique (`CANARY-`, the case's random salt, a counter)
    /// and goes into private titles and lines only; no word of [`WORDS`]
    /// holds one. So no visible text holds a canary, and the gate, which
    /// spares private text that visible objects hold too, must remove each.
    fn org(nodes: &[Node], salt: u32) -> (String, Vec<String>, usize) {
        let mut text = String::new();
        let mut public_ids = Vec::new();
        let mut canaries = 0usize;
        let mut canary = || {
            canaries += 1;
            format!("CANARY-{salt:08x}{canaries:04x}")
        };
        // (level, private) of the open ancestors.
        let mut stack: Vec<(u8, bool)> = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            let parent_level = stack.last().map_or(0, |(l, _)| *l);
            let level = n.level.min(parent_level + 1);
            while stack.last().is_some_and(|(l, _)| *l >= level) {
                stack.pop();
            }
            let private = n.private_tag.is_some() || stack.last().is_some_and(|(_, p)| *p);
            stack.push((level, private));

            let mut title = words(&n.title);
            if private {
                title = format!("{title} {}", canary()).trim().to_owned();
            }
            let mut tags = Vec::new();
            if n.project && level == 1 {
                tags.push("project");
            }
            if let Some(t) = n.private_tag {
                tags.push(TAG_SPELLINGS[t]);
            }
            text.push_str(&"*".repeat(level as usize));
            text.push(' ');
            text.push_str(if title.is_empty() { "Untitled" } else { &title });
            if !tags.is_empty() {
                text.push_str(&format!(" :{}:", tags.join(":")));
            }
            text.push('\n');
            if n.id {
                text.push_str(&format!(":PROPERTIES:\n:ID: id-{i}\n:END:\n"));
                if !private {
                    public_ids.push(format!("id-{i}"));
                }
            }
            for (bullet, line, with_canary) in &n.body {
                let mut line = format!("{}{}", BULLETS[*bullet], words(line));
                if private && *with_canary {
                    line = format!("{line} {} end", canary());
                }
                text.push_str(&line);
                text.push('\n');
            }
        }
        (text, public_ids, canaries)
    }

    fn check(text: &str, what: &str) -> Result<(), TestCaseError> {
        prop_assert!(!text.contains("CANARY"), "a canary in {what}: {text}");
        Ok(())
    }

    fn cases() -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64)
    }

    #[test]
    fn no_private_text_leaves_through_the_outline_the_gate_the_log_or_an_error() {
        let sandbox = Sandbox::new();
        let with_skill = Sandbox::new();
        with_skill.install("skill:privacy", "privacy");
        let bare = sandbox.registry();
        bare.scan();
        let skilled = with_skill.registry();
        skilled.scan();
        let awareness = library("skill:awareness");

        let strategy = (
            prop::collection::vec(node(), 1..24),
            any::<u32>(),
            0..CONFIG_SPELLINGS.len(),
            any::<bool>(),
            any::<prop::sample::Index>(),
        );
        let mut runner = TestRunner::new(Config {
            cases: cases(),
            failure_persistence: None,
            ..Config::default()
        });
        let case = std::sync::atomic::AtomicUsize::new(0);
        runner
            .run(&strategy, |(nodes, salt, spelling, use_skill, focus)| {
                let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let (org, public_ids, canaries) = org(&nodes, salt);
                let dir = sandbox.root.path().join(format!("memex-{case}"));
                let memex = open_memex(&dir, &org);
                let focus = (!public_ids.is_empty()).then(|| focus.get(&public_ids).clone());
                let privacy = PrivacyTags::new([CONFIG_SPELLINGS[spelling]]);
                // The gate spares private text that visible objects hold
                // too; the canaries are unique strings that none holds.
                let snapshot = memex.snapshot();
                let view = SnapshotView::new(&snapshot, &privacy);
                for file in &view.view().files {
                    for i in 0..file.len() as u32 {
                        check(file.title(i), "a visible title")?;
                        check(file.body(i), "a visible body")?;
                    }
                }
                let gate = Gate::new(privacy, &[], true)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let registry = if use_skill { &skilled } else { &bare };

                let (result, lines) = logged(|| -> Result<(), TestCaseError> {
                    let (component, _) =
                        components_for(&awareness, "awareness", &org, focus.as_deref(), "{}");
                    let outline = component.content.to_string();
                    check(&outline, "the awareness outline")?;
                    // What could carry private text into a request: the
                    // outline, a user quoting the file, a tool that read it.
                    let plain = format!("{outline}\n---\n{org}");
                    let json = serde_json::json!({
                        "system": outline,
                        "messages": [
                            { "role": "user", "content": org },
                            { "role": "tool", "content": format!("cat main.org\n{org}") },
                        ],
                    })
                    .to_string();
                    for body in [plain, json] {
                        let cleaned = gate
                            .clean(&body, &memex.snapshot(), &registry.snapshot())
                            .map_err(|e| TestCaseError::fail(e.to_string()))?;
                        check(&cleaned.text, "the cleaned body")?;
                        check(&format!("{:?}", cleaned.report), "the report")?;
                        prop_assert_eq!(
                            matches!(cleaned.report.filter, SecretFilter::Skill),
                            use_skill
                        );
                        if canaries > 0 {
                            prop_assert!(cleaned.report.private > 0);
                        }
                    }
                    for error in memex.snapshot().failed().values() {
                        check(&error.to_string(), "a memex error")?;
                    }
                    Ok(())
                });
                for line in &lines {
                    check(line, "the log")?;
                }
                result
            })
            .unwrap();
    }
}
