//! Tests of write-back.

use super::*;
use proptest::prelude::*;

/// A file parsed in memory (no disk), as the memex would hold it.
fn parsed(text: &str) -> FileRef {
    Arc::new(MemexFile::parse(Path::new("/m/notes.org"), "notes.org", text.to_owned()).unwrap())
}

/// Plans `edit` on the object titled `title` of `text`, in memory.
fn plan_text(text: &str, title: &str, edit: Edit) -> Result<Plan, WriteError> {
    let file = parsed(text);
    let index = file
        .objects
        .iter()
        .position(|o| file.slice(&o.headline.title) == title)
        .unwrap_or_else(|| panic!("no headline {title:?}")) as u32;
    plan_in(file, index, "notes.org", &edit, &|_| false)
}

fn edited(text: &str, title: &str, edit: Edit) -> String {
    plan_text(text, title, edit).unwrap().text().to_owned()
}

fn todo(state: Option<&str>) -> Edit {
    Edit::SetTodo {
        state: state.map(str::to_owned),
    }
}

fn child(title: &str, body: Option<&str>) -> Edit {
    Edit::AddChild {
        title: title.into(),
        body: body.map(str::to_owned),
    }
}

fn prop(key: &str, value: &str) -> Edit {
    Edit::SetProperty {
        key: key.into(),
        value: value.into(),
    }
}

fn append(text: &str) -> Edit {
    Edit::AppendBody { text: text.into() }
}

/// A memex on a temporary folder holding `a.org`, and that file's
/// canonical path.
fn memex_with(text: &str) -> (tempfile::TempDir, Memex, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap().join("a.org");
    fs::write(&path, text).unwrap();
    let memex = Memex::open(&[dir.path().to_path_buf()]).unwrap();
    (dir, memex, path)
}

fn id_of(memex: &Memex, title: &str) -> String {
    let s = memex.snapshot();
    s.objects()
        .find(|o| o.title() == title)
        .unwrap()
        .id()
        .to_owned()
}

#[test]
fn set_todo_replaces_adds_and_clears_the_keyword_and_nothing_else() {
    let text =
        "#+TODO: TODO NEXT | DONE\n* TODO [#A] Ship it   :work:\nbody\n* Idea\n* DONE  spaced\n";
    assert_eq!(
        edited(text, "Ship it", todo(Some("DONE"))),
        "#+TODO: TODO NEXT | DONE\n* DONE [#A] Ship it   :work:\nbody\n* Idea\n* DONE  spaced\n"
    );
    assert_eq!(
        edited(text, "Idea", todo(Some("NEXT"))),
        "#+TODO: TODO NEXT | DONE\n* TODO [#A] Ship it   :work:\nbody\n* NEXT Idea\n* DONE  spaced\n"
    );
    assert_eq!(
        edited(text, "spaced", todo(None)),
        "#+TODO: TODO NEXT | DONE\n* TODO [#A] Ship it   :work:\nbody\n* Idea\n* spaced\n"
    );
    assert_eq!(
        edited(text, "Ship it", todo(None)),
        "#+TODO: TODO NEXT | DONE\n* [#A] Ship it   :work:\nbody\n* Idea\n* DONE  spaced\n"
    );
    // A headline with no title, only tags, and one with nothing at all.
    assert_eq!(edited("* :x:\n", "", todo(Some("TODO"))), "* TODO :x:\n");
    assert_eq!(edited("* \n", "", todo(Some("TODO"))), "* TODO\n");
    assert_eq!(edited("* TODO", "", todo(None)), "* ");
}

#[test]
fn setting_the_state_a_headline_has_changes_nothing() {
    let plan = plan_text("* DONE x\n", "x", todo(Some("DONE"))).unwrap();
    assert!(!plan.changed());
    assert_eq!(plan.text(), "* DONE x\n");
}

#[test]
fn an_unknown_keyword_is_refused_with_the_files_keywords() {
    let text = "#+TODO: TODO(t) NEXT | DONE(d!) CANCELLED\n\n* TODO x\n";
    let err = plan_text(text, "x", todo(Some("WAITING"))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/m/notes.org:3: `WAITING` is not a TODO keyword of this file; its keywords are TODO NEXT | DONE CANCELLED (from its `#+TODO:` lines and `#+SETUPFILE:`s, or the default); nothing was written"
    );
    // Keywords are case-sensitive, as in Org.
    let err = plan_text("* x\n", "x", todo(Some("done"))).unwrap_err();
    assert!(
        err.to_string().contains("its keywords are TODO | DONE"),
        "{err}"
    );
}

#[test]
fn clearing_a_keyword_that_would_promote_the_next_word_is_refused() {
    let err = plan_text("* TODO DONE later\n", "DONE later", todo(None)).unwrap_err();
    assert!(
        matches!(err, WriteError::WouldChangeStructure { .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "/m/notes.org:1: Org would read the headline as TODO state Some(\"DONE\") and title \"later\", not None and \"DONE later\"; nothing was written"
    );
}

#[test]
fn add_child_goes_at_the_end_of_the_subtree_one_level_deeper_with_a_new_id() {
    let text = "* P :project:\nintro\n** Old\n*** Deep\ntext\n* Next\n";
    let plan = plan_text(
        text,
        "P",
        child("  New task ", Some("first\n* not a headline")),
    )
    .unwrap();
    let id = plan.id().to_owned();
    assert_eq!(
        plan.text(),
        format!(
            "* P :project:\nintro\n** Old\n*** Deep\ntext\n** New task\n:PROPERTIES:\n:ID: {id}\n:END:\nfirst\n,* not a headline\n* Next\n"
        )
    );
    assert_eq!(plan.line(), 6);
    let at = text.find("* Next").unwrap();
    assert_eq!(plan.replaced(), at..at);
    assert!(plan.inserted().starts_with("** New task\n"));
    let new = plan.file();
    let c = new.index_of(&id).unwrap() as usize;
    assert_eq!(new.objects[c].headline.parent, Some(0));
    assert_eq!(new.objects[c].headline.level, 2);
}

#[test]
fn add_child_to_a_subtree_ending_at_eof_without_a_newline() {
    let plan = plan_text("* A\n** B\nlast line", "A", child("C", None)).unwrap();
    let id = plan.id().to_owned();
    assert_eq!(
        plan.text(),
        format!("* A\n** B\nlast line\n** C\n:PROPERTIES:\n:ID: {id}\n:END:\n")
    );
    let plan = plan_text("* A", "A", child("C", None)).unwrap();
    let id = plan.id().to_owned();
    assert_eq!(
        plan.text(),
        format!("* A\n** C\n:PROPERTIES:\n:ID: {id}\n:END:\n")
    );
}

#[test]
fn add_child_refuses_titles_that_would_not_read_back() {
    for (title, what) in [
        ("Meeting :x:", "tags"),
        ("TODO buy milk", "keyword"),
        ("[#A] urgent", "cookie"),
        ("COMMENT aside", "comment"),
    ] {
        let err = plan_text("* A\n", "A", child(title, None)).unwrap_err();
        assert!(
            matches!(err, WriteError::WouldChangeStructure { .. })
                && err.to_string().contains("would not read back as given"),
            "{what}: {err}"
        );
    }
    let err = plan_text("* A\n", "A", child("two\nlines", None)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/m/notes.org:1: a headline title is one line; \"two\\nlines\" has a line break; nothing was written"
    );
    let err = plan_text("* A\n", "A", child("  ", None)).unwrap_err();
    assert!(matches!(err, WriteError::InvalidInput { .. }));
}

#[test]
fn set_property_replaces_a_value_in_place_matching_the_key_case_insensitively() {
    let text = "* A\n  :PROPERTIES:\n  :Effort:   1:00\n  :EMPTY:\n  :END:\nbody\n";
    assert_eq!(
        edited(text, "A", prop("EFFORT", "2:30")),
        "* A\n  :PROPERTIES:\n  :Effort:   2:30\n  :EMPTY:\n  :END:\nbody\n"
    );
    assert_eq!(
        edited(text, "A", prop("empty", "now full")),
        "* A\n  :PROPERTIES:\n  :Effort:   1:00\n  :EMPTY: now full\n  :END:\nbody\n"
    );
    assert_eq!(
        edited(text, "A", prop("effort", "")),
        "* A\n  :PROPERTIES:\n  :Effort:\n  :EMPTY:\n  :END:\nbody\n"
    );
    // Surrounding spaces of a value are dropped, as Org drops them.
    assert_eq!(
        edited(text, "A", prop("Effort", "  3:00  ")),
        "* A\n  :PROPERTIES:\n  :Effort:   3:00\n  :EMPTY:\n  :END:\nbody\n"
    );
}

#[test]
fn set_property_adds_a_key_in_the_drawers_indentation_and_alignment() {
    let text = "* A\n  :PROPERTIES:\n  :ID:       abc\n  :END:\n";
    assert_eq!(
        edited(text, "A", prop("CATEGORY", "work")),
        "* A\n  :PROPERTIES:\n  :ID:       abc\n  :CATEGORY: work\n  :END:\n"
    );
    assert_eq!(
        edited(text, "A", prop("LONGER_THAN_THE_COLUMN", "x")),
        "* A\n  :PROPERTIES:\n  :ID:       abc\n  :LONGER_THAN_THE_COLUMN: x\n  :END:\n"
    );
    let plain = "* A\n:PROPERTIES:\n:ID: abc\n:END:\n";
    assert_eq!(
        edited(plain, "A", prop("X", "y")),
        "* A\n:PROPERTIES:\n:ID: abc\n:X: y\n:END:\n"
    );
    let empty = "* A\n :PROPERTIES:\n :END:";
    assert_eq!(
        edited(empty, "A", prop("X", "y")),
        "* A\n :PROPERTIES:\n :X: y\n :END:"
    );
}

#[test]
fn set_property_creates_the_drawer_after_the_headline_and_its_planning_line() {
    assert_eq!(
        edited(
            "* TODO A\nSCHEDULED: <2024-01-01 Mon>\nbody\n** B\n",
            "A",
            prop("X", "1")
        ),
        "* TODO A\nSCHEDULED: <2024-01-01 Mon>\n:PROPERTIES:\n:X: 1\n:END:\nbody\n** B\n"
    );
    assert_eq!(
        edited("* A\nbody\n", "A", prop("X", "1")),
        "* A\n:PROPERTIES:\n:X: 1\n:END:\nbody\n"
    );
    assert_eq!(
        edited("* A\nDEADLINE: <2024-01-01>", "A", prop("X", "")),
        "* A\nDEADLINE: <2024-01-01>\n:PROPERTIES:\n:X:\n:END:\n"
    );
}

#[test]
fn set_property_refuses_keys_and_values_org_cannot_hold() {
    for key in ["", "two words", "a:b", "END", "properties", "x\ny"] {
        let err = plan_text("* A\n", "A", prop(key, "v")).unwrap_err();
        assert!(
            matches!(err, WriteError::InvalidInput { .. }),
            "{key:?}: {err}"
        );
    }
    let err = plan_text("* A\n", "A", prop("K", "a\nb")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/m/notes.org:1: a property value is one line; the value of K has a line break; nothing was written"
    );
    let err = plan_text(
        "* A\n* B\n:PROPERTIES:\n:ID: b\n:END:\n",
        "A",
        prop("id", "b"),
    )
    .unwrap_err();
    assert!(matches!(err, WriteError::DuplicateId { .. }), "{err}");
}

#[test]
fn append_body_goes_before_the_first_child_on_lines_of_its_own() {
    let text = "* A\n:PROPERTIES:\n:ID: a\n:END:\nold\n** Child\n";
    assert_eq!(
        edited(text, "A", append("new line\nsecond")),
        "* A\n:PROPERTIES:\n:ID: a\n:END:\nold\nnew line\nsecond\n** Child\n"
    );
    assert_eq!(edited("* A", "A", append("x\n")), "* A\nx\n");
    assert_eq!(edited("* A\nold", "A", append("x")), "* A\nold\nx\n");
    assert_eq!(edited("* A\n", "A", append("\n")), "* A\n\n");
    let plan = plan_text("* A\n", "A", append("")).unwrap();
    assert!(!plan.changed());
}

#[test]
fn appended_text_cannot_create_headlines_or_file_settings() {
    let text = "* A\n* B\n";
    assert_eq!(
        edited(
            text,
            "A",
            append(
                "* one\n** two\n,* escaped\n*bold* stays\n  * item stays\n  #+todo: X | Y\n#+BEGIN_SRC sh\n#+FILETAGS: :x:\n#+END_SRC"
            )
        ),
        "* A\n,* one\n,** two\n,,* escaped\n*bold* stays\n  * item stays\n  ,#+todo: X | Y\n#+BEGIN_SRC sh\n,#+FILETAGS: :x:\n#+END_SRC\n* B\n"
    );
}

#[test]
fn appended_text_that_would_become_planning_or_a_drawer_is_refused() {
    for text in [
        "SCHEDULED: <2024-01-01>\nmore",
        ":PROPERTIES:\n:ID: x\n:END:",
        ":PROPERTIES:\nunclosed",
    ] {
        let err = plan_text("* A\n", "A", append(text)).unwrap_err();
        assert!(
            matches!(err, WriteError::WouldChangeStructure { .. }),
            "{text}: {err}"
        );
    }
    // After a body line they are only text.
    assert_eq!(
        edited("* A\nfirst\n", "A", append("SCHEDULED: <2024-01-01>")),
        "* A\nfirst\nSCHEDULED: <2024-01-01>\n"
    );
}

#[test]
fn crlf_files_get_crlf_in_every_inserted_line() {
    let text = "* TODO A\r\nSCHEDULED: <2024-01-01>\r\nbody\r\n** B\r\n";
    assert_eq!(
        edited(text, "A", todo(Some("DONE"))),
        "* DONE A\r\nSCHEDULED: <2024-01-01>\r\nbody\r\n** B\r\n"
    );
    assert_eq!(
        edited(text, "A", prop("X", "1")),
        "* TODO A\r\nSCHEDULED: <2024-01-01>\r\n:PROPERTIES:\r\n:X: 1\r\n:END:\r\nbody\r\n** B\r\n"
    );
    assert_eq!(
        edited(text, "A", append("one\ntwo\r\n* three")),
        "* TODO A\r\nSCHEDULED: <2024-01-01>\r\nbody\r\none\r\ntwo\r\n,* three\r\n** B\r\n"
    );
    let plan = plan_text(text, "A", child("C", Some("x\ny"))).unwrap();
    let id = plan.id().to_owned();
    assert_eq!(
        plan.text(),
        format!(
            "* TODO A\r\nSCHEDULED: <2024-01-01>\r\nbody\r\n** B\r\n** C\r\n:PROPERTIES:\r\n:ID: {id}\r\n:END:\r\nx\r\ny\r\n"
        )
    );
    let with_drawer = "* A\r\n:PROPERTIES:\r\n:ID: a\r\n:END:\r\n";
    assert_eq!(
        edited(with_drawer, "A", prop("K", "v")),
        "* A\r\n:PROPERTIES:\r\n:ID: a\r\n:K: v\r\n:END:\r\n"
    );
    assert_eq!(
        edited(
            "* A\r\n:PROPERTIES:\r\n:E:\r\n:END:\r\n",
            "A",
            prop("e", "v")
        ),
        "* A\r\n:PROPERTIES:\r\n:E: v\r\n:END:\r\n"
    );
}

#[test]
fn new_ids_are_version_4_uuids_and_distinct() {
    let a = new_uuid();
    let b = new_uuid();
    assert_ne!(a, b);
    assert_eq!(a.len(), 36);
    let parts: Vec<&str> = a.split('-').collect();
    assert_eq!(
        parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
        [8, 4, 4, 4, 12]
    );
    assert!(parts[2].starts_with('4'));
    assert!(matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'));
    assert!(
        a.bytes()
            .all(|c| c == b'-' || (c.is_ascii_hexdigit() && !c.is_ascii_uppercase()))
    );
}

#[test]
fn a_write_is_on_disk_and_in_a_new_snapshot_with_a_higher_generation() {
    let (dir, memex, path) = memex_with("* P\n** TODO Task\n");
    let before = memex.snapshot();
    let task = id_of(&memex, "Task");
    let written = memex.set_todo(&before, &task, Some("DONE")).unwrap();
    assert!(written.changed);
    assert_eq!(written.path, path);
    assert_eq!((written.id.as_str(), written.line), (task.as_str(), 2));
    assert_eq!(fs::read_to_string(&path).unwrap(), "* P\n** DONE Task\n");
    let after = memex.snapshot();
    assert!(after.generation() > before.generation());
    assert_eq!(after.generation(), written.generation);
    assert_eq!(after.get(&task).unwrap().todo(), Some("DONE"));
    assert_eq!(
        before.get(&task).unwrap().todo(),
        Some("TODO"),
        "the old snapshot is untouched"
    );

    let parent = id_of(&memex, "P");
    let added = memex
        .add_child(&after, &parent, "Sub", Some("notes"))
        .unwrap();
    let s = memex.snapshot();
    let sub = s.get(&added.id).unwrap();
    assert_eq!((sub.title(), sub.body(), sub.line()), ("Sub", "notes\n", 3));
    assert_eq!(sub.parent().unwrap().id(), parent);
    assert_eq!(s.generation(), added.generation);

    memex.set_property(&s, &added.id, "EFFORT", "0:30").unwrap();
    let s = memex.snapshot();
    memex.append_body(&s, &added.id, "more").unwrap();
    let s = memex.snapshot();
    let sub = s.get(&added.id).unwrap();
    assert_eq!(sub.property("effort"), Some("0:30"));
    assert_eq!(sub.body(), "notes\nmore\n");
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        format!(
            "* P\n** DONE Task\n** Sub\n:PROPERTIES:\n:ID: {}\n:EFFORT: 0:30\n:END:\nnotes\nmore\n",
            added.id
        )
    );
    // Only the file is in the folder: no temporary file is left behind.
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["a.org"]);
}

#[test]
fn a_file_changed_on_disk_since_the_snapshot_is_a_conflict_and_is_left_alone() {
    let (_dir, memex, path) = memex_with("* TODO Task\n");
    let base = memex.snapshot();
    let task = id_of(&memex, "Task");
    fs::write(&path, "* TODO Task\nedited in Emacs\n").unwrap();
    let err = memex.set_todo(&base, &task, Some("DONE")).unwrap_err();
    assert!(matches!(err, WriteError::Conflict { removed: false, .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "{}: changed on disk since the memex snapshot this edit was based on; nothing was written (take a new snapshot and redo the edit)",
            path.display()
        )
    );
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "* TODO Task\nedited in Emacs\n"
    );
    assert_eq!(memex.snapshot().generation(), base.generation());

    // Two edits planned against the same snapshot: the second conflicts.
    memex.reload_file(&path);
    let base = memex.snapshot();
    let first = memex.plan(&base, &task, &todo(Some("DONE"))).unwrap();
    let second = memex.plan(&base, &task, &append("note")).unwrap();
    memex.commit(first).unwrap();
    assert!(matches!(
        memex.commit(second),
        Err(WriteError::Conflict { .. })
    ));

    fs::remove_file(&path).unwrap();
    let err = memex.set_todo(&memex.snapshot(), &task, None).unwrap_err();
    assert!(
        matches!(err, WriteError::Conflict { removed: true, .. }),
        "{err}"
    );
    assert!(!path.exists());
}

#[test]
fn an_unknown_id_is_refused() {
    let (_dir, memex, _path) = memex_with("* A\n");
    let err = memex
        .set_todo(&memex.snapshot(), "no-such-id", Some("DONE"))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no object with id \"no-such-id\" in the memex snapshot the edit was based on; nothing was written"
    );
}

#[test]
fn a_no_op_writes_nothing_and_keeps_the_file_byte_identical() {
    let text = "#+TITLE: x\r\n* DONE A   :t:\r\n  odd   spacing\t\r\n\r\n";
    let (_dir, memex, path) = memex_with(text);
    let base = memex.snapshot();
    let a = id_of(&memex, "A");
    let modified = fs::metadata(&path).unwrap().modified().unwrap();
    let written = memex.set_todo(&base, &a, Some("DONE")).unwrap();
    assert!(!written.changed);
    assert_eq!(written.generation, base.generation());
    assert_eq!(fs::read(&path).unwrap(), text.as_bytes());
    assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), modified);
}

#[cfg(unix)]
#[test]
fn permissions_and_symlinks_are_kept() {
    use std::os::unix::fs::PermissionsExt as _;
    let (dir, memex, path) = memex_with("* A\n");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
    let real = dir.path().canonicalize().unwrap().join("real.txt");
    fs::write(&real, "* L\n").unwrap();
    let link = dir.path().canonicalize().unwrap().join("link.org");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    memex.reload_file(&link);

    let base = memex.snapshot();
    memex.append_body(&base, &id_of(&memex, "A"), "x").unwrap();
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o640
    );
    let base = memex.snapshot();
    memex.append_body(&base, &id_of(&memex, "L"), "y").unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read_to_string(&real).unwrap(), "* L\ny\n");
    assert_eq!(memex.snapshot().file(&link).unwrap().text, "* L\ny\n");
}

#[cfg(unix)]
#[test]
fn a_read_only_file_is_not_replaced() {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        read_only_file_is_not_replaced();
        return;
    }
    // Root's permissions do not bind, and CI runs as root: the check runs
    // on a thread of its own whose credentials are dropped to `nobody`.
    // Linux keeps credentials per thread, and the raw system calls (not
    // libc's wrappers, which change every thread) change only that one;
    // the rest of the test process stays root.
    #[cfg(target_os = "linux")]
    {
        let outcome = std::thread::spawn(|| {
            drop_this_threads_privileges()?;
            read_only_file_is_not_replaced();
            Ok::<(), String>(())
        })
        .join();
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(why)) => cannot_run_unprivileged(&why),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    #[cfg(not(target_os = "linux"))]
    cannot_run_unprivileged("privileges are dropped per thread only on Linux");
}

/// The check of [`a_read_only_file_is_not_replaced`], as a user whose
/// permissions bind.
#[cfg(unix)]
fn read_only_file_is_not_replaced() {
    use std::os::unix::fs::PermissionsExt as _;
    let (_dir, memex, path) = memex_with("* A\n");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).unwrap();
    assert!(
        fs::OpenOptions::new().append(true).open(&path).is_err(),
        "a file of mode 0444 opened for writing: permissions do not bind here \
         (root, or a capability such as CAP_DAC_OVERRIDE), so this test cannot test"
    );
    let err = memex
        .append_body(&memex.snapshot(), &id_of(&memex, "A"), "x")
        .unwrap_err();
    assert!(
        matches!(
            err,
            WriteError::Io {
                action: "open it for writing",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "* A\n");
}

/// Makes the calling thread, and only it, `nobody` (65534) with no
/// supplementary groups; leaving uid 0 clears the thread's capabilities.
#[cfg(target_os = "linux")]
fn drop_this_threads_privileges() -> Result<(), String> {
    const NOBODY: libc::c_long = 65534;
    const NO_GROUPS: libc::c_long = 0;
    let call = |name: &str, result: libc::c_long| {
        if result == 0 {
            Ok(())
        } else {
            Err(format!("{name}: {}", std::io::Error::last_os_error()))
        }
    };
    // SAFETY: setgroups with a count of 0 reads no memory; the raw call
    // changes only this thread's credentials, which no other code shares.
    call("setgroups", unsafe {
        libc::syscall(
            libc::SYS_setgroups,
            NO_GROUPS,
            std::ptr::null::<libc::gid_t>(),
        )
    })?;
    // SAFETY: as above; integer arguments only.
    call("setresgid", unsafe {
        libc::syscall(libc::SYS_setresgid, NOBODY, NOBODY, NOBODY)
    })?;
    // SAFETY: as above; integer arguments only.
    call("setresuid", unsafe {
        libc::syscall(libc::SYS_setresuid, NOBODY, NOBODY, NOBODY)
    })?;
    Ok(())
}

/// As root the test needs an unprivileged thread; without one it fails
/// under CI (which runs as root) and is skipped, with a note, elsewhere.
#[cfg(unix)]
fn cannot_run_unprivileged(why: &str) {
    let message = format!(
        "a_read_only_file_is_not_replaced runs as root and could not drop to an \
         unprivileged user ({why}); as root, file permissions do not bind"
    );
    if std::env::var_os("CI").is_some() {
        panic!("{message}");
    }
    eprintln!("skipped: {message}");
}

// ---- property test: random edits on generated Org files ----

/// One generated headline.
#[derive(Debug, Clone)]
struct Gen {
    level: usize,
    todo: Option<&'static str>,
    title: String,
    tags: bool,
    planning: bool,
    drawer: Option<Vec<(String, String, bool)>>,
    body: Vec<&'static str>,
}

const BODY_LINES: &[&str] = &[
    "plain text",
    "",
    "*bold* at the start",
    "  * a list item",
    ":END:",
    "#+BEGIN_SRC sh",
    ",* escaped",
    "  indented",
    "SCHEDULED: <2024-01-01> in the body",
];

fn gen_headline() -> impl Strategy<Value = Gen> {
    (
        1usize..=4,
        prop::option::of(prop::sample::select(&["TODO", "NEXT", "DONE"][..])),
        "[a-z]{1,6}( [a-z]{1,6}){0,2}",
        any::<bool>(),
        any::<bool>(),
        prop::option::of(prop::collection::vec(
            ("[A-Z]{1,5}", "[a-z0-9]{0,4}", any::<bool>()),
            0..3,
        )),
        prop::collection::vec(prop::sample::select(BODY_LINES), 0..4),
    )
        .prop_map(|(level, todo, title, tags, planning, drawer, body)| Gen {
            level,
            todo,
            title,
            tags,
            planning,
            drawer,
            body,
        })
}

/// An Org file: an optional preamble, headlines, LF or CRLF, with or
/// without a final newline.
fn gen_file() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        prop::collection::vec(gen_headline(), 1..7),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(preamble, headlines, crlf, final_newline)| {
            let mut lines: Vec<String> = Vec::new();
            if preamble {
                lines.push("#+TODO: TODO NEXT | DONE".into());
                lines.push(String::new());
            }
            for h in headlines {
                let mut line = "*".repeat(h.level);
                line.push(' ');
                if let Some(t) = h.todo {
                    line.push_str(t);
                    line.push(' ');
                }
                line.push_str(&h.title);
                if h.tags {
                    line.push_str("   :tag:x:");
                }
                lines.push(line);
                if h.planning {
                    lines.push("DEADLINE: <2024-02-02 Fri>".into());
                }
                if let Some(props) = h.drawer {
                    lines.push(":PROPERTIES:".into());
                    for (k, v, aligned) in props {
                        let gap = if aligned { "      " } else { " " };
                        lines.push(format!(":{k}:{gap}{v}").trim_end().to_owned());
                    }
                    lines.push(":END:".into());
                }
                for b in h.body {
                    lines.push(b.to_owned());
                }
            }
            let nl = if crlf { "\r\n" } else { "\n" };
            let mut text = lines.join(nl);
            if final_newline {
                text.push_str(nl);
            }
            text
        })
}

const APPENDED: &[&str] = &[
    "a note",
    "two\nlines",
    "* looks like a headline",
    "** deeper\nand text",
    "#+TODO: X | Y",
    "ends with newline\n",
    "crlf\r\ninside",
    "\n",
];

#[derive(Debug, Clone)]
enum GenEdit {
    Todo(Option<&'static str>),
    Child(String, Option<&'static str>),
    Property(&'static str, String),
    Append(&'static str),
}

fn gen_edit() -> impl Strategy<Value = GenEdit> {
    prop_oneof![
        prop::option::of(prop::sample::select(&["TODO", "NEXT", "DONE"][..]))
            .prop_map(GenEdit::Todo),
        (
            "[a-z]{1,8}( [a-z]{1,5})?",
            prop::option::of(prop::sample::select(APPENDED))
        )
            .prop_map(|(t, b)| GenEdit::Child(t, b)),
        (
            prop::sample::select(&["ID", "id", "EFFORT", "Category", "X"][..]),
            "[a-z0-9]{0,6}"
        )
            .prop_map(|(k, v)| GenEdit::Property(k, v)),
        prop::sample::select(APPENDED).prop_map(GenEdit::Append),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_edits_touch_only_their_region_and_read_back_as_intended(
        text in gen_file(),
        pick in any::<prop::sample::Index>(),
        edit in gen_edit(),
    ) {
        let base = parsed(&text);
        let index = pick.index(base.objects.len());
        let h = base.objects[index].headline.clone();
        let crlf = newline_of(&text) == "\r\n";
        let edit = match edit {
            GenEdit::Todo(s) => todo(s),
            GenEdit::Child(t, b) => child(&t, b),
            // An `ID` already used in the file is refused; use a fresh one.
            GenEdit::Property(k, v) if k.eq_ignore_ascii_case("ID") => prop(k, &format!("{v}-{index}-new")),
            GenEdit::Property(k, v) => prop(k, &v),
            GenEdit::Append(t) => append(t),
        };
        // The region each edit may change, in the base text.
        let region = match &edit {
            Edit::SetTodo { .. } => h.own.start..h.after_headline,
            Edit::AddChild { .. } => h.subtree.end..h.subtree.end,
            Edit::SetProperty { .. } => h.after_headline..h.body.start,
            Edit::AppendBody { .. } => h.own.end..h.own.end,
            Edit::SetTags { .. } => h.own.start..h.after_headline,
        };
        let (a, b) = (region.start as usize, region.end as usize);
        if let Edit::SetTodo { state: Some(s) } = &edit
            && base.keywords.classify(s).is_none()
        {
            let err = plan_in(Arc::clone(&base), index as u32, "notes.org", &edit, &|_| false);
            let refused = matches!(err, Err(WriteError::UnknownKeyword { .. }));
            prop_assert!(refused, "an unknown keyword must be refused");
            return Ok(());
        }
        let plan = plan_in(Arc::clone(&base), index as u32, "notes.org", &edit, &|_| false);
        let plan = match plan {
            Ok(plan) => plan,
            Err(e) => return Err(TestCaseError::fail(format!("{e}\n{text:?}\n{edit:?}"))),
        };
        let new = plan.text();
        prop_assert!(new.starts_with(&text[..a]), "bytes before the region changed");
        prop_assert!(new.ends_with(&text[b..]), "bytes after the region changed");
        prop_assert!(new.len() >= a + text.len() - b);
        prop_assert_eq!(&text[..plan.replaced().start], &new[..plan.replaced().start]);
        let inserted = plan.inserted();
        if crlf {
            prop_assert!(!inserted.replace("\r\n", "").contains('\n'), "a bare LF in a CRLF file");
        } else {
            prop_assert!(!inserted.contains('\r'), "a CR in an LF file");
        }
        // The new text parses, and the object reads as intended.
        let reparsed = MemexFile::parse(Path::new("/m/notes.org"), "notes.org", new.to_owned()).unwrap();
        let o = &reparsed.objects[plan.index as usize];
        let title = reparsed.slice(&o.headline.title);
        match &edit {
            Edit::SetTodo { state } => {
                prop_assert_eq!(o.headline.todo.as_deref(), state.as_deref());
                prop_assert_eq!(title, base.slice(&h.title));
            }
            Edit::AddChild { title: t, body } => {
                prop_assert_eq!(title, t.as_str());
                prop_assert_eq!(o.headline.level, h.level + 1);
                prop_assert_eq!(reparsed.objects.len(), base.objects.len() + 1);
                let body_text = reparsed.slice(&o.headline.body);
                let nl = if crlf { "\r\n" } else { "\n" };
                prop_assert_eq!(body_text, escape_text(body.as_deref().unwrap_or(""), nl));
            }
            Edit::SetProperty { key, value } => {
                let got = o.headline.properties.iter()
                    .find(|p| reparsed.slice(&p.key).eq_ignore_ascii_case(key))
                    .map(|p| reparsed.slice(&p.value));
                prop_assert_eq!(got, Some(value.as_str()));
            }
            Edit::SetTags { tags } => {
                let got: Vec<&str> = o.headline.tags(&reparsed.text).collect();
                prop_assert_eq!(got, tags.iter().map(String::as_str).collect::<Vec<_>>());
                prop_assert_eq!(title, base.slice(&h.title));
            }
            Edit::AppendBody { text: t } => {
                let body_text = reparsed.slice(&o.headline.body).replace("\r\n", "\n");
                let lines: Vec<&str> = t.trim_end_matches('\n').split('\n')
                    .map(|l| l.trim_end_matches('\r')).collect();
                let last = lines.last().copied().unwrap_or("");
                prop_assert!(body_text.ends_with(&format!("{last}\n")), "{body_text:?}");
                prop_assert_eq!(reparsed.objects.len(), base.objects.len());
                // No appended line became structure.
                for line in body_text.lines() {
                    prop_assert!(!is_headline(line) && !is_file_setting(line.trim_start()));
                }
            }
        }
        prop_assert_eq!(reparsed.keywords, base.keywords.clone());
    }
}

fn tags(tags: &[&str]) -> Edit {
    Edit::SetTags {
        tags: tags.iter().map(|t| t.to_string()).collect(),
    }
}

#[test]
fn tags_are_added_replaced_and_removed_on_the_headline_line() {
    let text = "* TODO Pattern\n:PROPERTIES:\n:ID: p\n:END:\nbody\n* Other :x:\n";
    assert_eq!(
        edited(text, "Pattern", tags(&["auth", "jwt"])),
        "* TODO Pattern :auth:jwt:\n:PROPERTIES:\n:ID: p\n:END:\nbody\n* Other :x:\n"
    );
    assert_eq!(
        edited(text, "Other", tags(&["y", "z"])),
        text.replace(":x:", ":y:z:")
    );
    assert_eq!(edited(text, "Other", tags(&[])), text.replace(" :x:", ""));
    assert!(!plan_text(text, "Pattern", tags(&[])).unwrap().changed());
    let err = plan_text(text, "Pattern", tags(&["two words"])).unwrap_err();
    assert!(err.to_string().contains("cannot be an Org tag"), "{err}");
    let err = plan_text(text, "Pattern", tags(&["a:b"])).unwrap_err();
    assert!(matches!(err, WriteError::InvalidInput { .. }), "{err}");
}

#[test]
fn text_emacs_would_run_is_refused_in_every_edit() {
    let text = "* A\n:PROPERTIES:\n:ID: a\n:END:\nbody\n";
    for edit in [
        Edit::AppendBody {
            text: "# Local Variables:\n# eval: (shell-command \"rm -rf ~\")\n# End:".into(),
        },
        child("Click [[elisp:(delete-file \"x\")][here]]", None),
        child("Notes", Some("see [[shell:rm -rf ~][this]]")),
        prop("NOTE", "-*- eval: (evil) -*-"),
    ] {
        let error = plan_text(text, "A", edit).unwrap_err();
        assert!(error.to_string().contains("refused"), "{error}");
    }
}

#[test]
fn an_outside_append_racing_a_write_is_never_lost() {
    use std::io::Write as _;
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("race.org");
    std::fs::write(&path, "* A\n:PROPERTIES:\n:ID: a\n:END:\nbody\n").unwrap();
    let memex = crate::Memex::open(std::slice::from_ref(&path)).unwrap();
    let path = path.canonicalize().unwrap();
    // The append lands (1) while the copy is written, before the last
    // check; (2) after the last check, before the rename — into the old
    // file, which the rename then replaces.
    for (round, window) in [&disk::PAUSE_BEFORE_CHECK, &disk::PAUSE_BEFORE_RENAME]
        .into_iter()
        .enumerate()
    {
        memex.reload_file(&path);
        let base = memex.snapshot();
        let appended = format!("outside line {round}\n");
        window.store(300, Ordering::Relaxed);
        let racer = {
            let path = path.clone();
            let appended = appended.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(100));
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .unwrap();
                f.write_all(appended.as_bytes()).unwrap();
            })
        };
        let result = memex.set_property(&base, "a", "ROUND", &round.to_string());
        window.store(0, Ordering::Relaxed);
        racer.join().unwrap();
        let disk = std::fs::read_to_string(&path).unwrap();
        assert!(
            disk.contains(&appended),
            "round {round}: the outside append was lost ({result:?}):\n{disk}"
        );
        assert!(
            matches!(result, Err(WriteError::Conflict { .. })),
            "round {round}: {result:?}"
        );
    }
}

#[test]
fn a_file_open_in_emacs_with_unsaved_changes_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.org");
    std::fs::write(&path, "* A\n:PROPERTIES:\n:ID: a\n:END:\n").unwrap();
    std::os::unix::fs::symlink("user@host.1234:1700000000", dir.path().join(".#notes.org"))
        .unwrap();
    let memex = crate::Memex::open(std::slice::from_ref(&path)).unwrap();
    let error = memex
        .set_property(&memex.snapshot(), "a", "X", "1")
        .unwrap_err();
    assert!(matches!(error, WriteError::Busy { .. }), "{error}");
    assert!(
        error.to_string().contains("being edited in Emacs"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "* A\n:PROPERTIES:\n:ID: a\n:END:\n"
    );
}
