//! The awareness skill on the Org files people really have: each project
//! rule on a small memex of its own, which rule made a project (`--explain`),
//! and the map of a memex without projects, within budgets.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use foveal::context::{ContextRequest, OutlineFormat, ProjectRule, Section};

/// The default request, in the seed's format: these tests read its lines
/// (one headline a line, no state, no handle) to find the projects.
fn outline_request() -> ContextRequest {
    ContextRequest {
        format: OutlineFormat::Seed,
        ..ContextRequest::default()
    }
}
use foveal::memex::Memex;
use foveal::memex::privacy::PrivacyTags;

/// A memex of several files with the real awareness skill, rendered
/// through the host's context module (as `foveal context` does).
struct Memexes {
    sandbox: crate::support::Sandbox,
    registry: foveal::registry::Registry,
    memex: Memex,
}

impl Memexes {
    /// `files` as (name, text), each modified `age` seconds ago, in order
    /// (a later file is older when the ages say so).
    fn new(files: &[(&str, &str)]) -> Self {
        Self::aged(&files.iter().map(|&(n, t)| (n, t, 0)).collect::<Vec<_>>())
    }

    fn aged(files: &[(&str, &str, u64)]) -> Self {
        let sandbox = crate::support::Sandbox::new();
        sandbox.install("skill:awareness", "foveal_skill_awareness");
        let registry = sandbox.registry();
        registry.scan();
        let dir = sandbox.root.path().join("memex");
        for (name, text, age) in files {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap();
            let when = SystemTime::now() - Duration::from_secs(1000 + age);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
        let memex = Memex::open(&[dir]).unwrap();
        Self {
            sandbox,
            registry,
            memex,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.sandbox.root.path().join("memex").join(name)
    }

    fn render(&self, request: &ContextRequest) -> Section {
        foveal::context::render(
            &self.registry.snapshot(),
            &self.memex.snapshot(),
            &PrivacyTags::new(["@personal"]),
            request,
        )
    }

    /// `(id or title, reason)` of every object shown, all rules on.
    fn explain(&self, rules: &[ProjectRule]) -> (String, Vec<String>) {
        let section = self.render(&ContextRequest {
            explain: true,
            projects: rules.to_vec(),
            ..outline_request()
        });
        let sources = section
            .sources
            .iter()
            .map(|(id, reason)| format!("{id}: {reason}"))
            .collect();
        (section.text().to_owned(), sources)
    }
}

fn tokens(text: &str) -> usize {
    foveal::tokens::global().count(text)
}

/// The depth-1 titles of an outline.
fn projects(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("* "))
        .collect::<Vec<_>>()
}

const ALL: &[ProjectRule] = &ProjectRule::ALL;

#[test]
fn tag_the_seeds_rule_in_any_case_and_through_filetags() {
    let m = Memexes::new(&[
        (
            "a.org",
            "* Launch :Project:\n:PROPERTIES:\n:ID: launch\n:END:\n** Plan\n:PROPERTIES:\n:ID: plan\n:END:\n* DONE Old :project:\n* Note\n",
        ),
        (
            "b.org",
            "#+TITLE: Garden\n#+FILETAGS: :work:project:\n* Beds\n:PROPERTIES:\n:ID: beds\n:END:\n** TODO Dig\n:PROPERTIES:\n:ID: dig\n:END:\n* DONE Shed\n** TODO Paint\n",
        ),
    ]);
    for rules in [ALL, &[ProjectRule::Tag]] {
        let (text, sources) = m.explain(rules);
        assert_eq!(projects(&text), ["Launch", "Beds"], "{text}");
        assert_eq!(
            sources,
            [
                "launch: outline (project: tag, tagged :project:)",
                "plan: outline",
                "beds: outline (project: tag, from #+FILETAGS)",
                "dig: outline",
            ]
        );
    }
    // Without the rule, nothing is a project: the map shows.
    let (text, _) = m.explain(&[ProjectRule::Gtd]);
    assert!(text.contains("No active projects found. The top of each file:"));
}

#[test]
fn keyword_proj_and_project_when_the_file_declares_them() {
    let m = Memexes::new(&[
        (
            "doom.org",
            "#+TODO: TODO PROJ(p) STRT | DONE KILL\n* PROJ Website\n:PROPERTIES:\n:ID: website\n:END:\n** TODO Draft\n** STRT Review\n*** PROJ Nested\n* KILL Old\n* TODO Task\n",
        ),
        (
            "other.org",
            "#+SEQ_TODO: PROJECT | DONE\n* Area\n** PROJECT Move\n:PROPERTIES:\n:ID: move\n:END:\n*** DONE Pack\n",
        ),
        // Not declared: `PROJ` is a word of the title, as in Emacs.
        ("plain.org", "* PROJ Not a keyword here\n* TODO x\n"),
    ]);
    let (text, sources) = m.explain(&[ProjectRule::Keyword]);
    assert_eq!(projects(&text), ["Website", "Move"], "{text}");
    assert!(
        text.contains("** Draft") && text.contains("** Review"),
        "{text}"
    );
    assert!(!text.contains("Nested"), "depth 3 is outline-only\n{text}");
    let rules: Vec<&String> = sources.iter().filter(|s| s.contains("project:")).collect();
    assert_eq!(
        rules,
        [
            "website: outline (project: keyword PROJ)",
            "move: outline (project: keyword PROJECT)",
        ]
    );
}

#[test]
fn gtd_a_task_with_subtasks_is_a_project() {
    let org = "* Tasks
** TODO Move house
:PROPERTIES:
:ID: move
:END:
*** TODO Pack
*** DONE Book the van
**** TODO Nested subtask
** TODO A task alone
** NEXT Notes
*** Not a task
** DONE Finished project
*** TODO Leftover
**** TODO Its own subtask
";
    let m = Memexes::new(&[("gtd.org", org)]);
    let (text, sources) = m.explain(&[ProjectRule::Gtd]);
    // Move house (outermost); inside a done project, an active one is a
    // project of its own, as the seed treats a nested tagged project.
    assert_eq!(projects(&text), ["Move house", "Leftover"], "{text}");
    assert_eq!(
        sources[0],
        "move: outline (project: gtd, a task with subtasks)"
    );
    assert!(!text.contains("A task alone") && !text.contains("* Notes"));
    // All rules: nothing here says which headlines are projects, so the
    // GTD rule applies.
    assert_eq!(projects(&m.explain(ALL).0), ["Move house", "Leftover"]);
}

#[test]
fn gtd_gives_way_in_a_file_that_says_which_headlines_are_projects() {
    let m = Memexes::new(&[
        (
            "tagged.org",
            "* Launch :project:\n** TODO Ship\n*** TODO Write notes\n* Area :area:\n** TODO Chores\n*** TODO Dishes\n",
        ),
        ("untagged.org", "* TODO Kitchen\n** TODO Tiles\n"),
    ]);
    let (text, _) = m.explain(ALL);
    // `Chores` is a task with subtasks, but its file tags its projects.
    assert_eq!(projects(&text), ["Launch", "Kitchen"], "{text}");
    let (text, _) = m.explain(&[ProjectRule::Gtd]);
    assert_eq!(projects(&text), ["Ship", "Chores", "Kitchen"], "{text}");
}

#[test]
fn heading_under_projects_and_at_the_top_of_projects_org() {
    let m = Memexes::new(&[
        (
            "gtd.org",
            "* Inbox\n** TODO Call\n* PROJECTS\n** Website\n:PROPERTIES:\n:ID: website\n:END:\n*** NEXT Draft\n** DONE Old site\n* Someday\n** Idea\n",
        ),
        (
            "projects.org",
            "* Garden\n:PROPERTIES:\n:ID: garden\n:END:\n* Projects\n** Kitchen\n:PROPERTIES:\n:ID: kitchen\n:END:\n* DONE Fence\n",
        ),
    ]);
    let (text, sources) = m.explain(&[ProjectRule::Heading]);
    assert_eq!(projects(&text), ["Website", "Garden", "Kitchen"], "{text}");
    let rules: Vec<&String> = sources.iter().filter(|s| s.contains("project:")).collect();
    assert_eq!(
        rules,
        [
            "website: outline (project: heading, under Projects)",
            "garden: outline (project: heading, top of projects.org)",
            "kitchen: outline (project: heading, under Projects)",
        ]
    );
    // `NEXT` is no keyword of that file: part of the title.
    assert!(text.contains("** NEXT Draft"), "{text}");
}

#[test]
fn a_project_the_focus_is_in_says_its_rule_beside_foveal() {
    let m = Memexes::new(&[(
        "a.org",
        "#+TODO: PROJ | DONE\n* PROJ Site\n:PROPERTIES:\n:ID: site\n:END:\nThe site body.\n",
    )]);
    let section = m.render(&ContextRequest {
        focus: Some("site".to_owned()),
        explain: true,
        ..outline_request()
    });
    assert_eq!(
        section.sources,
        [(
            "site".to_owned(),
            "foveal (project: keyword PROJ)".to_owned()
        )]
    );
    assert!(section.text().contains("The site body."));
}

const NOTES: &str = "#+TITLE: Reading notes
#+AUTHOR: Someone
* Books
:PROPERTIES:
:ID: books
:END:
** Dune
* Articles
:PROPERTIES:
:ID: articles
:END:
* Diary :@personal:
PRIVATE CANARY
";

#[test]
fn without_projects_the_map_shows_the_top_of_each_file() {
    let m = Memexes::new(&[
        ("notes.org", NOTES),
        (
            "sub/todo.org",
            "* TODO Call Ann\n:PROPERTIES:\n:ID: call\n:END:\n",
        ),
        ("empty.org", "Only a preamble.\n"),
    ]);
    let section = m.render(&ContextRequest {
        explain: true,
        ..outline_request()
    });
    insta::assert_snapshot!(section.text(), @r"
    GLOBAL MEMEX AWARENESS (Peripheral Vision):
    No active projects found. The top of each file:
    * empty.org
    * notes.org: Reading notes
    ** Books
    :PROPERTIES:
    :ID: books
    :END:
    ** Articles
    :PROPERTIES:
    :ID: articles
    :END:
    * sub/todo.org
    ** Call Ann
    :PROPERTIES:
    :ID: call
    :END:
    ");
    assert_eq!(
        section.sources,
        [
            ("books".to_owned(), "map".to_owned()),
            ("articles".to_owned(), "map".to_owned()),
            ("call".to_owned(), "map".to_owned()),
        ]
    );
    // The seed's behaviour: no map.
    let seed = m.render(&ContextRequest::seed());
    assert_eq!(
        seed.text(),
        "GLOBAL MEMEX AWARENESS (Peripheral Vision):\nNo active projects found.\n"
    );
}

/// Thirty files, each a title and six headlines, the first the most
/// recently changed.
fn many_files() -> Vec<(String, String, u64)> {
    (0..30)
        .map(|k| {
            let mut org = format!("#+TITLE: Notebook {k}\n");
            for h in 0..6 {
                org.push_str(&format!("* Topic {k}.{h} of some length\n** Detail\n"));
            }
            (format!("n{k:02}.org"), org, k as u64 * 60)
        })
        .collect()
}

#[test]
fn the_map_fits_budgets_from_50_tokens_dropping_the_least_recently_changed_files() {
    for format in OutlineFormat::ALL {
        the_map_fits_budgets_in(format);
    }
}

fn the_map_fits_budgets_in(format: OutlineFormat) {
    let outline_request = || ContextRequest {
        format,
        ..ContextRequest::default()
    };
    let files = many_files();
    let borrowed: Vec<(&str, &str, u64)> = files
        .iter()
        .map(|(n, t, a)| (n.as_str(), t.as_str(), *a))
        .collect();
    let m = Memexes::aged(&borrowed);
    let full = m.render(&outline_request());
    let full_tokens = tokens(full.text());
    assert!(!full.text().contains("omitted]"));
    let mut budget = 50;
    while budget < full_tokens + 10 {
        let section = m.render(&ContextRequest {
            budget: Some(budget as u32),
            explain: true,
            ..outline_request()
        });
        let text = section.text();
        assert!(
            tokens(text) <= budget,
            "budget {budget}: {}\n{text}",
            tokens(text)
        );
        // Never empty: at least the most recent file, and from a budget
        // that holds one, its first headline.
        assert!(
            text.contains("* n00.org: Notebook 0\n"),
            "budget {budget}:\n{text}"
        );
        if budget >= 100 {
            assert!(
                text.contains("** Topic 0.0 of some length"),
                "budget {budget}:\n{text}"
            );
        }
        // Files come whole, most recent first: a file shown means every
        // more recent file is shown whole (but the first, that may be cut).
        let shown: Vec<usize> = (0..30)
            .filter(|k| text.contains(&format!("* n{k:02}.org: Notebook {k}\n")))
            .collect();
        assert_eq!(
            shown,
            (0..shown.len()).collect::<Vec<_>>(),
            "budget {budget}"
        );
        if shown.len() > 1 {
            for k in &shown {
                assert!(text.contains(&format!("** Topic {k}.5 of some length")));
            }
        }
        let omitted: std::collections::BTreeMap<_, _> = section.omitted.iter().cloned().collect();
        let left_out = 30 - shown.len();
        if left_out > 0 {
            assert_eq!(
                omitted.get("file"),
                Some(&(left_out as u32)),
                "budget {budget}"
            );
            assert!(text.ends_with(" omitted]\n"), "budget {budget}:\n{text}");
            assert!(
                text.contains(&format!("[… {left_out} older file")),
                "budget {budget}:\n{text}"
            );
        } else {
            assert_eq!(text, full.text(), "budget {budget}");
        }
        budget += if budget < 400 { 7 } else { 97 };
    }
}

#[test]
fn the_map_keeps_file_order_and_shows_no_private_headline() {
    let m = Memexes::aged(&[("a.org", NOTES, 500), ("b.org", "* B one\n* B two\n", 0)]);
    let section = m.render(&ContextRequest {
        budget: Some(70),
        ..outline_request()
    });
    let text = section.text();
    // b.org changed last, so it is kept; a.org, older, is left out.
    assert!(
        text.contains("* b.org\n") && !text.contains("Reading notes"),
        "{text}"
    );
    let full = m.render(&outline_request());
    let (a, b) = (
        full.text().find("* a.org: Reading notes").unwrap(),
        full.text().find("* b.org\n").unwrap(),
    );
    assert!(a < b, "file order, not recency:\n{}", full.text());
    assert!(!full.text().contains("Diary") && !full.text().contains("CANARY"));
}

#[test]
fn the_cache_key_covers_the_project_rules_and_the_map() {
    let m = Memexes::new(&[("gtd.org", "* TODO Move\n** TODO Pack\n")]);
    let cache = foveal::context::ContextCache::default();
    let skills = m.registry.snapshot();
    let snapshot = m.memex.snapshot();
    let privacy = PrivacyTags::new(["@personal"]);
    let all = cache.section(&skills, &snapshot, &privacy, &outline_request());
    assert_eq!(projects(all.text()), ["Move"]);
    let seed = cache.section(&skills, &snapshot, &privacy, &ContextRequest::seed());
    assert!(seed.text().ends_with("No active projects found.\n"));
    let map = ContextRequest {
        map: true,
        ..ContextRequest::seed()
    };
    let with_map = cache.section(&skills, &snapshot, &privacy, &map);
    assert!(with_map.text().contains("The top of each file"));
    // An edit is a new generation: seen.
    std::fs::write(m.path("gtd.org"), "* TODO Stay\n** TODO Unpack\n").unwrap();
    m.memex
        .reload_file(&m.path("gtd.org").canonicalize().unwrap());
    let edited = cache.section(&skills, &m.memex.snapshot(), &privacy, &outline_request());
    assert_eq!(projects(edited.text()), ["Stay"]);
}

#[test]
fn keywords_and_file_tags_from_a_setup_file_make_projects() {
    let m = Memexes::new(&[
        (
            "setup/doom.setup",
            "#+TODO: TODO PROJ | DONE\n#+FILETAGS: :Project:\n",
        ),
        (
            "a.org",
            "#+SETUPFILE: setup/doom.setup\n* PROJ Site\n:PROPERTIES:\n:ID: site\n:END:\n** TODO Page\n",
        ),
        (
            "b.org",
            "#+SETUPFILE: setup/doom.setup\n* Top\n:PROPERTIES:\n:ID: top\n:END:\n",
        ),
    ]);
    let (text, sources) = m.explain(ALL);
    assert_eq!(projects(&text), ["Site", "Top"], "{text}");
    assert_eq!(
        sources
            .iter()
            .filter(|s| s.contains("project:"))
            .collect::<Vec<_>>(),
        [
            "site: outline (project: tag, from #+FILETAGS)",
            "top: outline (project: tag, from #+FILETAGS)",
        ]
    );
    let (text, sources) = m.explain(&[ProjectRule::Keyword]);
    assert_eq!(projects(&text), ["Site"], "{text}");
    assert_eq!(sources[0], "site: outline (project: keyword PROJ)");
}

/// Skips a test that needs what is not there, with a note; under CI (the
/// `CI` variable set), where everything must be there, fails instead.
fn skip_outside_ci(why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "this test cannot run under CI: {why}"
    );
    eprintln!("skipped: {why}");
}

/// The benchmark generator's memex (every project tagged): the outline is
/// the same with every rule on as with the seed's rule alone.
#[test]
fn the_benchmark_memex_renders_the_same_with_every_rule() {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/bench/gen_memex.py");
    if !script.is_file() {
        skip_outside_ci(&format!(
            "{} is not there (this test needs the `shared` folder beside the workspace)",
            script.display()
        ));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("python3")
        .arg(&script)
        .args(["3000", "42"])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .status();
    let Ok(status) = status else {
        skip_outside_ci(&format!(
            "python3 could not be run for {}",
            script.display()
        ));
        return;
    };
    assert!(status.success());
    let focus = std::fs::read_to_string(dir.path().join("focus.txt")).unwrap();
    let sandbox = crate::support::Sandbox::new();
    sandbox.install("skill:awareness", "foveal_skill_awareness");
    let registry = sandbox.registry();
    registry.scan();
    let memex = Memex::open(&[dir.path().join("memex.org")]).unwrap();
    let render = |request: &ContextRequest| {
        foveal::context::render(
            &registry.snapshot(),
            &memex.snapshot(),
            &PrivacyTags::new(["@personal"]),
            request,
        )
    };
    for budget in [None, Some(2000)] {
        let focus = Some(focus.trim().to_owned());
        let all = render(&ContextRequest {
            focus: focus.clone(),
            budget,
            ..outline_request()
        });
        let seed = render(&ContextRequest {
            focus,
            budget,
            ..ContextRequest::seed()
        });
        assert!(all.text().len() > 10_000 || budget.is_some());
        assert_eq!(all.text(), seed.text(), "budget {budget:?}");
    }
}
