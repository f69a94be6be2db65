//! The host's tools called directly: not through the cycle, whose gate
//! would turn a leak of a tool into `[REDACTED private]` and let a test
//! that looks only at the request body pass.

use super::*;

const ORG: &str = "#+TODO: TODO | DONE\n* TODO Write docs\n:PROPERTIES:\n:ID: docs\n:END:\n";

#[test]
fn a_write_conflict_names_the_file_from_its_memex_root() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("work.org");
    std::fs::write(&file, ORG).unwrap();
    let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
    let snapshot = memex.snapshot();
    // Edited outside after the snapshot the tool runs on.
    std::fs::write(&file, ORG.replace("Write docs", "Write the docs")).unwrap();
    let privacy = PrivacyTags::new(["@personal"]);
    let mut focus = None;
    let journal = JournalSettings {
        path: dir.path().join("journal.org"),
    };
    let mut cx = ToolContext {
        memex: &memex,
        snapshot: &snapshot,
        privacy: &privacy,
        focus: &mut focus,
        journal: &journal,
    };
    let error = run_builtin(
        Builtin::SetTodo,
        &json!({"id": "docs", "state": "DONE"}),
        &mut cx,
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("work.org: changed on disk since the memex snapshot"),
        "{error}"
    );
    for root in memex.roots() {
        assert!(!error.contains(&root.display().to_string()), "{error}");
    }
    assert!(
        !error.contains(&dir.path().display().to_string()),
        "{error}"
    );
}

// ---------------------------------------------------------------------
// Privacy, at the tools themselves
// ---------------------------------------------------------------------

/// A memex whose private objects hold a canary word in every place a tool
/// could read one: a private title, tag, `:ID:`, property, body, a TODO
/// child of a private headline, a top-level private project, and a file
/// private by its file tags. Visible objects share their tags and states.
const WORK: &str = "#+TODO: TODO NEXT | DONE
* Launch :project:
:PROPERTIES:
:ID: launch
:OWNER: Maria
:END:
Ship the launch on time.
** TODO Write docs :docs:
:PROPERTIES:
:ID: docs
:END:
** NEXT Zebrafinch appointment :project:@personal:
:PROPERTIES:
:ID: zebrafinch-id
:PHONE: quillon-line
:END:
#+TODO: QUILLONSTATE | DONE
Marrowby told me about the loan.
*** TODO Call Quillon :project:docs:
:PROPERTIES:
:ID: quillon-id
:END:
** Public notes
:PROPERTIES:
:ID: notes
:END:
* Reading :project:
:PROPERTIES:
:ID: reading
:END:
* Ossuary diary :project:@personal:
:PROPERTIES:
:ID: ossuary-id
:END:
";

const DIARY: &str = "#+FILETAGS: :@personal:
* TODO Marrowby visit :project:docs:
:PROPERTIES:
:ID: marrowby-id
:END:
Quillon again.
";

/// A journal whose `* Journal` headline is private: entries go under the
/// first visible top-level headline.
const JOURNAL: &str = "* Journal :@personal:
Zebrafinch days.
* Log
:PROPERTIES:
:ID: log
:END:
";

/// The ids of the private objects above.
const PRIVATE_IDS: [&str; 4] = ["zebrafinch-id", "quillon-id", "ossuary-id", "marrowby-id"];

/// What no tool output may hold (lowercased): the canary words, the
/// privacy tag, and the gate's marker — a tool has no gate, so a marker
/// in its output would be a leak a later door caught.
const PRIVATE_WORDS: [&str; 6] = [
    "zebrafinch",
    "quillon",
    "marrowby",
    "ossuary",
    "@personal",
    "[redacted",
];

struct Tools {
    dir: tempfile::TempDir,
    memex: Memex,
    privacy: PrivacyTags,
    focus: Option<String>,
    journal: JournalSettings,
    /// Every output so far, for the check that none leaked.
    outputs: Vec<String>,
}

impl Tools {
    /// The handle of visible object `id` in the compact outline.
    fn handle(&self, id: &str) -> String {
        let snapshot = self.memex.snapshot();
        let view = foveal_memex::view::SnapshotView::new(&snapshot, &self.privacy);
        let owned = view.view();
        foveal_sdk::handle::Handles::new(&owned.as_view())
            .of(id)
            .to_string()
    }

    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("work.org", WORK),
            ("diary.org", DIARY),
            ("journal.org", JOURNAL),
        ] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
        assert!(
            memex.snapshot().get("marrowby-id").is_some(),
            "the diary did not load"
        );
        let journal = JournalSettings {
            path: dir.path().join("journal.org"),
        };
        Self {
            dir,
            memex,
            privacy: PrivacyTags::new(["@personal"]),
            focus: None,
            journal,
            outputs: Vec::new(),
        }
    }

    /// Runs `builtin` on the memex as it is now; its text, or its error's.
    fn run(&mut self, builtin: Builtin, args: serde_json::Value) -> Result<String, String> {
        let snapshot = self.memex.snapshot();
        let mut cx = ToolContext {
            memex: &self.memex,
            snapshot: &snapshot,
            privacy: &self.privacy,
            focus: &mut self.focus,
            journal: &self.journal,
        };
        let result = run_builtin(builtin, &args, &mut cx)
            .map(|out| out.text)
            .map_err(|e| e.to_string());
        let (Ok(text) | Err(text)) = &result;
        self.outputs.push(text.clone());
        result
    }

    fn bytes(&self) -> Vec<(String, String)> {
        ["work.org", "diary.org", "journal.org"]
            .iter()
            .map(|name| {
                let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap();
                ((*name).to_owned(), text)
            })
            .collect()
    }

    /// Asserts no output so far holds a private word or a marker.
    fn assert_nothing_leaked(&self) {
        for output in &self.outputs {
            let lower = output.to_lowercase();
            for word in PRIVATE_WORDS {
                assert!(
                    !lower.contains(word),
                    "{word:?} in a tool's output:\n{output}"
                );
            }
        }
    }
}

#[test]
fn query_memex_lists_only_visible_objects_and_counts_only_them() {
    let mut t = Tools::new();
    // A tag that private objects carry too, at every depth and through a
    // file's tags: only the visible projects.
    let projects = t
        .run(Builtin::QueryMemex, json!({"tag": "project"}))
        .unwrap();
    // Each with its handle in the compact outline, which resolves to it.
    let h = |id: &str| t.handle(id);
    assert_eq!(
        projects,
        format!(
            "launch {} | Launch :project:\nreading {} | Reading :project:\n",
            h("launch"),
            h("reading")
        ),
        "{projects}"
    );
    let (launch, docs) = (h("launch"), h("docs"));
    // The count of what the limit left out is of visible objects.
    let limited = t
        .run(Builtin::QueryMemex, json!({"tag": ":project:", "limit": 1}))
        .unwrap();
    assert_eq!(
        limited,
        format!("launch {launch} | Launch :project:\n… 1 more\n")
    );
    // A TODO state private objects share, alone and with a tag.
    let todo = t.run(Builtin::QueryMemex, json!({"todo": "TODO"})).unwrap();
    assert_eq!(todo, format!("docs {docs} | TODO Write docs :docs:\n"));
    let both = t
        .run(Builtin::QueryMemex, json!({"tag": "docs", "todo": "TODO"}))
        .unwrap();
    assert_eq!(both, format!("docs {docs} | TODO Write docs :docs:\n"));
    let read = t.run(Builtin::ReadObject, json!({"id": launch})).unwrap();
    assert!(read.contains("id: launch\n"), "{read}");
    // A tag and a state only private objects have: nothing, as for a tag
    // no object has.
    for args in [
        json!({"tag": "@personal"}),
        json!({"tag": ":@PERSONAL:"}),
        json!({"todo": "NEXT"}),
        json!({"tag": "nonexistent"}),
    ] {
        let found = t.run(Builtin::QueryMemex, args.clone()).unwrap();
        assert_eq!(found, "no matching objects", "{args}");
    }
    t.assert_nothing_leaked();
}

#[test]
fn read_object_and_set_focus_answer_a_private_id_as_a_missing_one() {
    let mut t = Tools::new();
    // The positive control: a visible object, read whole, with its
    // visible children only.
    let launch = t.run(Builtin::ReadObject, json!({"id": "launch"})).unwrap();
    for line in [
        "id: launch\n",
        "title: Launch\n",
        "tags: project\n",
        "property OWNER: Maria\n",
        "body:\nShip the launch on time.\n",
        "children:\n- docs | TODO Write docs\n- notes | Public notes\n",
    ] {
        assert!(launch.contains(line), "{line:?} missing from:\n{launch}");
    }
    let docs = t.run(Builtin::ReadObject, json!({"id": "docs"})).unwrap();
    assert!(docs.contains("parent: launch (Launch)\n"), "{docs}");
    let missing = t
        .run(Builtin::ReadObject, json!({"id": "no-such-id"}))
        .unwrap_err();
    assert_eq!(missing, "no visible object has that id");
    for id in PRIVATE_IDS {
        for builtin in [Builtin::ReadObject, Builtin::SetFocus] {
            let answer = t.run(builtin, json!({ "id": id })).unwrap_err();
            assert_eq!(answer, missing, "{builtin:?} {id}");
        }
    }
    assert_eq!(t.focus, None, "a private id was focused");
    let focused = t.run(Builtin::SetFocus, json!({"id": "launch"})).unwrap();
    assert_eq!(focused, "focus is now launch (Launch)");
    assert_eq!(t.focus.as_deref(), Some("launch"));
    t.assert_nothing_leaked();
}

#[test]
fn the_write_tools_neither_write_under_nor_name_a_private_object() {
    let mut t = Tools::new();
    let before = t.bytes();
    let missing = "no visible object has that id";
    for id in PRIVATE_IDS {
        let added = t.run(
            Builtin::AddHeadline,
            json!({"parent_id": id, "title": "Buy chairs"}),
        );
        assert_eq!(added.unwrap_err(), missing, "{id}");
        let set = t.run(Builtin::SetTodo, json!({"id": id, "state": "DONE"}));
        assert_eq!(set.unwrap_err(), missing, "{id}");
    }
    assert_eq!(t.bytes(), before, "a write under a private object was made");
    // A state the file does not have: its error names the file's
    // keywords and line, not the one a `#+TODO:` line in a private body
    // declares (Org reads it wherever it is) — which does not exist for
    // the tool either: the same answer, nothing written.
    let bogus = t
        .run(Builtin::SetTodo, json!({"id": "docs", "state": "BOGUS"}))
        .unwrap_err();
    assert_eq!(
        bogus,
        "work.org:8: `BOGUS` is not a TODO keyword of this file; its keywords are TODO NEXT | DONE \
         (from its `#+TODO:` lines and `#+SETUPFILE:`s, or the default); nothing was written"
    );
    let guessed = t
        .run(
            Builtin::SetTodo,
            json!({"id": "docs", "state": "QUILLONSTATE"}),
        )
        .unwrap_err();
    assert_eq!(guessed, bogus.replace("BOGUS", "QUILLONSTATE"));
    t.outputs.pop();
    assert_eq!(t.bytes(), before, "a privately declared state was written");
    // The positive controls: the same tools on visible objects write.
    let added = t
        .run(
            Builtin::AddHeadline,
            json!({"parent_id": "launch", "title": "Buy chairs", "body": "Six of them."}),
        )
        .unwrap();
    assert!(
        added.starts_with("added headline \"Buy chairs\" with id "),
        "{added}"
    );
    let done = t
        .run(Builtin::SetTodo, json!({"id": "docs", "state": "DONE"}))
        .unwrap();
    assert_eq!(done, "docs is now DONE");
    // The journal's `* Journal` is private: the entry goes under the
    // first visible top-level headline, and its answer names the date.
    let entry = t
        .run(
            Builtin::AddJournalEntry,
            json!({"title": "Bought chairs", "text": "For the hall."}),
        )
        .unwrap();
    assert!(entry.starts_with("journal entry \""), "{entry}");
    let journal = std::fs::read_to_string(t.dir.path().join("journal.org")).unwrap();
    let (private_part, log) = journal.split_once("* Log\n").unwrap();
    assert_eq!(private_part, "* Journal :@personal:\nZebrafinch days.\n");
    assert!(log.contains(" Bought chairs\n"), "{journal}");
    t.assert_nothing_leaked();
}
