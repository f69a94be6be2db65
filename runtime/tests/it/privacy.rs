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

use crate::support::{Sandbox, library};

const MEMEX: &str = "* Launch :project:
:PROPERTIES:
:ID: launch
:END:
The launch plan.
** Diary :@personal:
Met Ann at the harbour.
*** Authorization Bearer
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

/// A diary made private by the file tags of its `#+SETUPFILE:` (one in
/// the memex folder, one outside it): nothing of it is lent, rendered or
/// let through the gate; and it is public again once the setup file says
/// so, re-read through the file that includes it.
#[test]
fn a_file_private_through_its_setup_file_leaks_nothing() {
    let sandbox = Sandbox::new();
    sandbox.install("skill:awareness", "foveal_skill_awareness");
    let registry = sandbox.registry();
    registry.scan();
    let root = sandbox.root.path().canonicalize().unwrap();
    let dir = root.join("memex");
    std::fs::create_dir_all(root.join("elsewhere")).unwrap();
    std::fs::write(
        root.join("elsewhere/personal.setup"),
        "#+FILETAGS: :@personal:\n",
    )
    .unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("private.setup"),
        "#+TODO: TODO | DONE\n#+FILETAGS: :@Personal:\n",
    )
    .unwrap();
    let diary = "#+TITLE: Harbourside canary diary\n#+SETUPFILE: private.setup\nPreamble: canary morning swim with Beatrix.\n* Monday canary\n:PROPERTIES:\n:ID: monday\n:END:\nMet Beatrix at the harbour canary cafe today.\n";
    std::fs::write(dir.join("diary.org"), diary).unwrap();
    let outside = "#+SETUPFILE: ../elsewhere/personal.setup\n* Tuesday canary\nThe outside canary lunch with Beatrix.\n";
    std::fs::write(dir.join("outside.org"), outside).unwrap();
    std::fs::write(
        dir.join("work.org"),
        "* Launch :project:\n:PROPERTIES:\n:ID: launch\n:END:\nThe launch plan.\n",
    )
    .unwrap();
    let memex = Memex::open(std::slice::from_ref(&dir)).unwrap();
    let privacy = PrivacyTags::new(["@personal"]);
    let snapshot = memex.snapshot();
    for name in ["diary.org", "outside.org"] {
        let file = snapshot.file(&dir.join(name)).unwrap();
        assert!(
            privacy.file_is_private(file),
            "{name}: {:?}",
            file.file_tags
        );
    }

    // Lent: only the public file, not even the others' names.
    let view = SnapshotView::new(&snapshot, &privacy);
    let lent = format!("{:#?}", view.view().as_view());
    assert!(!lent.to_lowercase().contains("canary"), "{lent}");
    assert!(
        !lent.contains("diary") && !lent.contains("outside.org"),
        "{lent}"
    );
    // Rendered: the outline and the map alike.
    for request in [
        foveal::context::ContextRequest::default(),
        foveal::context::ContextRequest {
            projects: vec![],
            explain: true,
            ..Default::default()
        },
    ] {
        let section = foveal::context::render(&registry.snapshot(), &snapshot, &privacy, &request);
        let text = section.text();
        assert!(
            text.contains("Launch") || text.contains("work.org"),
            "{text}"
        );
        assert!(
            !text.to_lowercase().contains("canary") && !text.contains("diary"),
            "{text}"
        );
        assert!(!format!("{:?}", section.sources).contains("monday"));
    }
    // Let through the gate: quotes of its preamble and body are removed.
    let (text, report) = clean(
        &gate(),
        &memex,
        &registry,
        "She wrote: Met Beatrix at the harbour canary cafe today. Also: The outside canary lunch with Beatrix.",
    );
    assert!(
        !text.contains("harbour") && !text.contains("outside canary"),
        "{text}"
    );
    assert_eq!(report.private, 2, "{text}");

    // Saved in a form that does not load (old Mac line ends), the file
    // keeps its protection: the lines of the version that failed to load
    // are private text too.
    std::fs::write(
        dir.join("outside.org"),
        format!("{outside}* Wednesday\nA new canary secret about Beatrix and the boat.\n")
            .replace('\n', "\r"),
    )
    .unwrap();
    memex.reload_file(&dir.join("outside.org"));
    assert_eq!(memex.snapshot().failed().len(), 1);
    let (text, _) = clean(
        &gate(),
        &memex,
        &registry,
        "Quote: A new canary secret about Beatrix and the boat.",
    );
    assert!(!text.contains("boat"), "{text}");
    std::fs::write(dir.join("outside.org"), outside).unwrap();
    memex.reload_file(&dir.join("outside.org"));

    // The setup file changes: the files that include it are read again.
    std::fs::write(dir.join("private.setup"), "#+FILETAGS: :work:\n").unwrap();
    let before = memex.snapshot().generation();
    for includer in memex.snapshot().includers_of(&dir.join("private.setup")) {
        memex.reload_file(&includer);
    }
    let snapshot = memex.snapshot();
    assert!(snapshot.generation() > before);
    let diary = snapshot.file(&dir.join("diary.org")).unwrap();
    assert_eq!(diary.file_tags, ["work"]);
    assert!(!privacy.file_is_private(diary));
    assert!(privacy.file_is_private(snapshot.file(&dir.join("outside.org")).unwrap()));
}

/// A diary private only through a relative `#+SETUPFILE:`, reached by a
/// symlink and by a hard link in another folder, beside a setup file of
/// the same name without the privacy tag: nothing of it is lent under any
/// name, and the gate still removes a quote of it (a visible copy would
/// have made its lines public text).
#[test]
fn a_diary_reached_through_links_in_another_folder_stays_private_at_the_gate() {
    let sandbox = Sandbox::new();
    let registry = sandbox.registry();
    registry.scan();
    let root = sandbox.root.path().canonicalize().unwrap().join("memex");
    for (name, text) in [
        ("private/p2.setup", "#+FILETAGS: :@personal:\n"),
        (
            "private/linked.org",
            "#+SETUPFILE: p2.setup\n* Monday canary\nMet Beatrix at the harbour canary cafe today.\n",
        ),
        ("links/p2.setup", "#+TODO: TODO | DONE\n"),
        ("links/work.org", "* Launch\nThe launch plan is public.\n"),
    ] {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::os::unix::fs::symlink("../private/linked.org", root.join("links/alias.org")).unwrap();
    std::fs::hard_link(root.join("private/linked.org"), root.join("links/hard.org")).unwrap();
    let memex = Memex::open(std::slice::from_ref(&root)).unwrap();
    let privacy = PrivacyTags::new(["@personal"]);

    let view = SnapshotView::new(&memex.snapshot(), &privacy);
    let owned = view.view();
    let lent: Vec<String> = owned
        .files
        .iter()
        .map(|f| format!("{}\n{}", f.path.as_str(), f.text.as_str()))
        .collect();
    // Only the public file is lent (the view was built).
    assert_eq!(lent.len(), 1, "{lent:?}");
    assert!(lent[0].contains("The launch plan is public."), "{lent:?}");

    let (text, report) = clean(
        &gate(),
        &memex,
        &registry,
        "She wrote: Met Beatrix at the harbour canary cafe today. The launch plan is public.",
    );
    assert!(!text.contains("harbour"), "{text}");
    // The gate ran and let the public sentence through.
    assert!(text.contains("The launch plan is public."), "{text}");
    assert_eq!(report.private, 1, "{text}");
}

#[test]
fn a_secret_that_loses_its_context_beside_private_text_is_still_removed() {
    // `Authorization Bearer` is a private title here: once it is
    // redacted, the token after it no longer looks like a bearer token to
    // the skill. (The title was `Bearer` alone until issue 28, F6: a
    // one-word private line of letters protects nothing now.)
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
    assert_eq!(text, "[REDACTED private] [REDACTED bearer-token]");
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
            .call("privacy", foveal::registry::hooks::INVOKE, {
                let m = m.to_owned();
                move |f| f("mode".into(), m.as_str().into())
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

/// Random memexes with canaries in private objects only — tagged subtrees
/// and files private through `#+FILETAGS` — and quotes of their lines in
/// the forms a person would write them. No canary reaches what a skill is
/// lent (its whole request, as `{:#?}` prints it), the outline a skill
/// renders, a body after the gate, any string of a request (tool
/// definitions included), a replayed history after the private file left,
/// the log or an error.
mod canaries {
    use super::*;
    use foveal::agent::session::{Entry, Session};
    use foveal::provider::{ChatRequest, Message, ToolDefinition};
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
        "café",
        "naïve",
        "Zürich",
    ];
    const BULLETS: &[&str] = &["", "", "- ", "+ ", "  * ", "1. ", "\t", "- [ ] ", "- [X] "];
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
                    prop::collection::vec(0..WORDS.len(), 0..7),
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

    /// A memex file made of `nodes`.
    struct Org {
        text: String,
        /// Ids of the visible objects.
        public_ids: Vec<String>,
        /// The private lines that hold a canary, without their bullets.
        private_lines: Vec<String>,
    }

    /// The Org text of `nodes`. Each canary is unique (`CANARY-`, the
    /// case's random salt, a counter) and goes into private titles and
    /// lines only; no word of [`WORDS`] holds one. So no visible text
    /// holds a canary, and the gate, which spares private text that
    /// visible objects hold too, must remove each. With `file_private`,
    /// the whole file is private through `#+FILETAGS`, and every title and
    /// line gets a canary.
    fn org(nodes: &[Node], salt: u32, file: u32, file_private: bool) -> Org {
        let mut text = String::new();
        if file_private {
            text.push_str("#+TITLE: Diary\n#+FILETAGS: :journal:@personal:\n");
        }
        let mut public_ids = Vec::new();
        let mut private_lines = Vec::new();
        let mut canaries = 0usize;
        let mut canary = || {
            canaries += 1;
            format!("CANARY-{salt:08x}{file:02x}{canaries:04x}")
        };
        // (level, private) of the open ancestors.
        let mut stack: Vec<(u8, bool)> = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            let parent_level = stack.last().map_or(0, |(l, _)| *l);
            let level = n.level.min(parent_level + 1);
            while stack.last().is_some_and(|(l, _)| *l >= level) {
                stack.pop();
            }
            let private =
                file_private || n.private_tag.is_some() || stack.last().is_some_and(|(_, p)| *p);
            stack.push((level, private));

            let mut title = words(&n.title);
            if private {
                title = format!("{title} {}", canary()).trim().to_owned();
                private_lines.push(title.clone());
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
                text.push_str(&format!(":PROPERTIES:\n:ID: id-{file}-{i}\n:END:\n"));
                if !private {
                    public_ids.push(format!("id-{file}-{i}"));
                }
            }
            for (bullet, line, with_canary) in &n.body {
                let mut line = words(line);
                if private && (*with_canary || file_private) {
                    line = format!("{line} {} end", canary()).trim().to_owned();
                    private_lines.push(line.clone());
                }
                text.push_str(BULLETS[*bullet]);
                text.push_str(&line);
                text.push('\n');
            }
        }
        Org {
            text,
            public_ids,
            private_lines,
        }
    }

    /// How a quote of a private line is written.
    #[derive(Debug, Clone, Copy)]
    struct Variant {
        case: u8,
        spacing: u8,
        bullet: usize,
        nfd: bool,
        partial: bool,
        json: bool,
    }

    fn variant() -> impl Strategy<Value = Variant> {
        (
            0u8..3,
            0u8..4,
            0..BULLETS.len(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(case, spacing, bullet, nfd, partial, json)| Variant {
                case,
                spacing,
                bullet,
                nfd,
                partial,
                json,
            })
    }

    /// `line` quoted as `v` says: in another case, with other spacing or
    /// wrapped, with another bullet, in NFD, in part (five words or more
    /// around the canary), as a JSON string.
    fn quote(line: &str, v: Variant) -> String {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let at = tokens
            .iter()
            .position(|t| t.starts_with("CANARY"))
            .unwrap_or(0);
        let tokens: &[&str] = if v.partial && tokens.len() > 5 {
            // The canary and the words after it, then as many before as
            // make five words at least.
            let end = tokens.len();
            let start = at.min(end.saturating_sub(5));
            &tokens[start..end]
        } else {
            &tokens
        };
        let sep = match v.spacing {
            0 => " ",
            1 => "   ",
            2 => " \t",
            _ => "\n",
        };
        let mut text = format!("{}{}", BULLETS[v.bullet], tokens.join(sep));
        text = match v.case {
            0 => text,
            1 => text.to_uppercase(),
            _ => text.to_lowercase(),
        };
        if v.nfd {
            text = text
                .replace('é', "e\u{301}")
                .replace('ï', "i\u{308}")
                .replace('ü', "u\u{308}")
                .replace('É', "E\u{301}")
                .replace('Ü', "U\u{308}");
        }
        if v.json {
            text = serde_json::to_string(&text).unwrap();
        }
        format!("As I wrote: {text} — right?")
    }

    fn check(text: &str, what: &str) -> Result<(), TestCaseError> {
        prop_assert!(
            !text.to_lowercase().contains("canary"),
            "a canary in {what}: {text}"
        );
        Ok(())
    }

    fn cases() -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(48)
    }

    #[test]
    fn no_private_byte_leaves_through_any_channel() {
        let sandbox = Sandbox::new();
        let with_skill = Sandbox::new();
        with_skill.install("skill:privacy", "privacy");
        let bare = sandbox.registry();
        bare.scan();
        let skilled = with_skill.registry();
        skilled.scan();
        let awareness = library("skill:awareness");
        let reader = library("memex-reader");

        let strategy = (
            prop::collection::vec(node(), 1..24),
            prop::collection::vec(node(), 0..6),
            any::<u32>(),
            0..CONFIG_SPELLINGS.len(),
            any::<bool>(),
            any::<prop::sample::Index>(),
            prop::collection::vec(variant(), 4),
        );
        let mut runner = TestRunner::new(Config {
            cases: cases(),
            failure_persistence: None,
            ..Config::default()
        });
        let case = std::sync::atomic::AtomicUsize::new(0);
        runner
            .run(
                &strategy,
                |(nodes, diary, salt, spelling, use_skill, focus, variants)| {
                    let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let main = org(&nodes, salt, 0, false);
                    let diary = org(&diary, salt, 1, true);
                    let dir = sandbox.root.path().join(format!("memex-{case}"));
                    std::fs::create_dir_all(&dir).unwrap();
                    std::fs::write(dir.join("main.org"), &main.text).unwrap();
                    std::fs::write(dir.join("diary.org"), &diary.text).unwrap();
                    let memex = Memex::open(std::slice::from_ref(&dir)).unwrap();
                    let focus =
                        (!main.public_ids.is_empty()).then(|| focus.get(&main.public_ids).clone());
                    let privacy = PrivacyTags::new([CONFIG_SPELLINGS[spelling]]);
                    let private_lines: Vec<&String> =
                        main.private_lines.iter().chain(&diary.private_lines).collect();

                    // What a skill is lent: every accessor, and the whole
                    // request as an adversarial skill would print it.
                    let snapshot = memex.snapshot();
                    let view = SnapshotView::new(&snapshot, &privacy);
                    for file in &view.view().files {
                        check(file.text.as_str(), "a lent text")?;
                        for i in 0..file.len() as u32 {
                            check(file.title(i), "a visible title")?;
                            check(file.body(i), "a visible body")?;
                        }
                    }
                    let files: Vec<(&str, &str)> =
                        vec![("main.org", &main.text), ("diary.org", &diary.text)];
                    let (lent, _) = crate::support::components_for_files(
                        &reader,
                        "memex-reader",
                        &files,
                        focus.as_deref(),
                        "{}",
                    );
                    for component in &lent {
                        check(component.content.as_str(), "what memex-reader was lent")?;
                    }
                    let gate = Gate::new(privacy, &[], true)
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                    let registry = if use_skill { &skilled } else { &bare };

                    let (result, lines) = logged(|| -> Result<(), TestCaseError> {
                        let (component, _) = crate::support::components_for_files(
                            &awareness,
                            "awareness",
                            &files,
                            focus.as_deref(),
                            "{}",
                        );
                        let outline = component[0].content.to_string();
                        check(&outline, "the awareness outline")?;
                        // What could carry private text into a request: the
                        // outline, a user quoting the files whole or in
                        // part and in any form, a tool that read them.
                        let mut quotes: Vec<String> = Vec::new();
                        for (i, line) in private_lines.iter().enumerate() {
                            quotes.push(quote(line, variants[i % variants.len()]));
                        }
                        let all = format!(
                            "{outline}\n---\n{}\n---\n{}\n{}",
                            main.text,
                            diary.text,
                            quotes.join("\n")
                        );
                        let json = serde_json::json!({
                            "system": outline,
                            "messages": [
                                { "role": "user", "content": main.text },
                                { "role": "user", "content": diary.text },
                                { "role": "tool", "content": format!("cat main.org\n{}", main.text) },
                            ],
                        })
                        .to_string();
                        let skills = registry.snapshot();
                        let mut bodies = vec![all, json];
                        bodies.extend(quotes.iter().cloned());
                        for body in &bodies {
                            let cleaned = gate
                                .clean(body, &memex.snapshot(), &skills)
                                .map_err(|e| TestCaseError::fail(e.to_string()))?;
                            check(&cleaned.text, "the cleaned body")?;
                            check(&format!("{:?}", cleaned.report), "the report")?;
                            prop_assert_eq!(
                                matches!(cleaned.report.filter, SecretFilter::Skill),
                                use_skill
                            );
                        }

                        // Every string of a request: tool definitions a
                        // skill declares, tool calls, results.
                        let quoted = quotes.join(" / ");
                        let mut request = ChatRequest::new(vec![
                            Message::system(outline.clone()),
                            Message::user(quoted.clone()),
                            Message::Assistant {
                                content: quoted.clone(),
                                tool_calls: vec![foveal::provider::AssistantToolCall {
                                    id: "call_1".into(),
                                    name: "read".into(),
                                    arguments: serde_json::json!({ "q": quoted }).to_string(),
                                }],
                            },
                            Message::Tool {
                                tool_call_id: "call_1".into(),
                                content: diary.text.clone(),
                            },
                        ]);
                        request.tools = vec![ToolDefinition {
                            name: "read".into(),
                            description: quoted.clone(),
                            parameters: serde_json::json!({
                                "type": "object",
                                "properties": { quoted.clone(): { "description": quoted } },
                            }),
                        }];
                        gate.check_request(
                            &mut request,
                            &memex.snapshot(),
                            &skills,
                            &mut foveal::egress::RequestMemo::default(),
                        )
                        .map_err(|e| TestCaseError::fail(e.to_string()))?;
                        let sent = foveal::provider::request_body(&request, Some("m"))
                            .map_err(|e| TestCaseError::fail(e.to_string()))?;
                        check(&sent.into_string(), "a request")?;

                        // History: recorded as sent, replayed as sent after
                        // the private file left the memex.
                        let data = dir.join("data");
                        let mut session = Session::open(&data, "s").unwrap();
                        for q in &quotes {
                            let sent = gate
                                .clean(q, &memex.snapshot(), &skills)
                                .map_err(|e| TestCaseError::fail(e.to_string()))?;
                            session.append(Entry::user(q.as_str(), sent.text)).unwrap();
                        }
                        drop(session);
                        std::fs::remove_file(dir.join("diary.org")).unwrap();
                        std::fs::write(dir.join("main.org"), "* Nothing private now\n").unwrap();
                        memex.reload_file(&dir.join("diary.org"));
                        memex.reload_file(&dir.join("main.org"));
                        let session = Session::open(&data, "s").unwrap();
                        for message in session.history(usize::MAX) {
                            check(&message.text, "a replayed message")?;
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
                },
            )
            .unwrap();
    }
}
