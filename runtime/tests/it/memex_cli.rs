//! `foveal memex stats` and `foveal memex query` through the real binary.

use std::process::Output;

fn foveal(cwd: &std::path::Path, args: &[&str]) -> Output {
    crate::support::run_foveal(cwd, args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

const MEMEX: &str = "#+TODO: TODO NEXT | DONE
* Launch :project:
:PROPERTIES:
:ID: launch
:END:
** NEXT Docs
** DONE Skeleton
* Diary :project:@personal:
** Secret
* Old :project:
** Notes :subprojects:
* DONE Finished :project:
";

fn sandbox() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("memex")).unwrap();
    std::fs::write(dir.path().join("memex/main.org"), MEMEX).unwrap();
    dir
}

#[test]
fn stats_counts_objects_projects_and_private_objects() {
    let dir = sandbox();
    let output = foveal(
        dir.path(),
        &["memex", "stats", "--memex", "memex", "--json"],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(stats["objects"], 8);
    assert_eq!(stats["files"], 1);
    // Launch and Old, as the outline finds them; not the DONE one;
    // `subprojects` is not `project`; Diary is private.
    assert_eq!(stats["active_projects"], 2);
    assert_eq!(
        stats["active_projects_by_rule"],
        serde_json::json!({"tag": 2})
    );
    assert_eq!(
        stats["private_objects"], 2,
        "Diary and the headline under it"
    );
    assert_eq!(stats["generation"], 1);
    assert!(stats["load_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(stats["failed"], serde_json::json!([]));
}

/// Projects by every rule, in three files.
const PROJECTS: [(&str, &str); 3] = [
    (
        "work.org",
        "#+TODO: TODO PROJ | DONE\n* Launch :project:\n** TODO Docs\n* PROJ Website\n** TODO Pages\n* DONE Old :project:\n* Diary :project:@personal:\n",
    ),
    (
        "home.org",
        "* Tasks\n** TODO Move house\n*** TODO Pack\n*** DONE Book the van\n** TODO Call the bank\n",
    ),
    ("garden.org", "* Projects\n** Beds\n*** TODO Dig\n** Shed\n"),
];

#[test]
fn stats_counts_active_projects_as_the_outline_does_and_says_by_which_rule() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("memex")).unwrap();
    for (name, org) in PROJECTS {
        std::fs::write(dir.path().join("memex").join(name), org).unwrap();
    }
    let output = foveal(
        dir.path(),
        &["memex", "stats", "--memex", "memex", "--json"],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(stats["active_projects"], 5);
    assert_eq!(
        stats["active_projects_by_rule"],
        serde_json::json!({"tag": 1, "keyword": 1, "gtd": 1, "heading": 2})
    );
    // The outline finds the same ones.
    let output = foveal(dir.path(), &["context", "--memex", "memex", "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let context: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let projects = context["included"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["reason"].as_str().unwrap().contains("(project: "))
        .count();
    assert_eq!(projects, 5, "{context:#}");
    // The same in words; private projects only with --include-private.
    let output = foveal(dir.path(), &["memex", "stats", "--memex", "memex"]);
    let out = text(&output.stdout);
    assert!(
        out.contains("active projects  5 (1 by tag, 1 by keyword, 1 by gtd, 2 by heading)\n"),
        "{out}"
    );
    let output = foveal(
        dir.path(),
        &[
            "memex",
            "stats",
            "--memex",
            "memex",
            "--include-private",
            "--json",
        ],
    );
    let stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(stats["active_projects"], 6);
}

#[test]
fn query_filters_by_exact_tag_and_todo_state() {
    let dir = sandbox();
    let output = foveal(
        dir.path(),
        &[
            "memex", "query", "--memex", "memex", "--tag", "PROJECT", "--json",
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let titles: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["title"].as_str().unwrap())
        .collect();
    // Diary is private: left out without --include-private.
    assert_eq!(titles, ["Launch", "Old", "Finished"]);
    assert_eq!(rows[0]["id"], "launch");
    assert_eq!(rows[0]["line"], 2);

    let output = foveal(
        dir.path(),
        &["memex", "query", "--memex", "memex", "--todo", "NEXT"],
    );
    let out = text(&output.stdout);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.contains("main.org:6  NEXT Docs  ["), "{out}");
}

#[test]
fn the_configured_memex_is_used_without_the_flag() {
    let dir = sandbox();
    std::fs::write(
        dir.path().join("foveal.toml"),
        "[memex]\npaths = [\"memex/main.org\"]\n",
    )
    .unwrap();
    let output = foveal(
        dir.path(),
        &["memex", "stats", "--config", "foveal.toml", "--json"],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(stats["objects"], 8);
}

#[test]
fn a_missing_memex_path_is_a_clear_error() {
    let dir = sandbox();
    let output = foveal(dir.path(), &["memex", "stats", "--memex", "nowhere"]);
    assert_eq!(output.status.code(), Some(1));
    insta::assert_snapshot!(text(&output.stderr), @"error: nowhere: no such file or folder; check `memex.paths` or --memex");
}

#[test]
fn a_broken_file_is_reported_with_file_and_line_and_the_rest_loads() {
    let dir = sandbox();
    std::fs::write(
        dir.path().join("memex/broken.org"),
        "* Cut\n:PROPERTIES:\n:ID: x\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("memex/latin1.org"), b"* caf\xe9\n").unwrap();
    let output = foveal(
        dir.path(),
        &["memex", "stats", "--memex", "memex", "--json"],
    );
    assert!(output.status.success());
    let stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(stats["objects"], 8);
    let errors: Vec<String> = stats["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            f["error"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        errors,
        [
            "broken.org:2: property drawer has no :END: (was the file cut off while being written?)",
            "latin1.org:1:6: not valid UTF-8; the file was not loaded and is left untouched (convert it to UTF-8)",
        ]
    );
    assert_eq!(
        std::fs::read(dir.path().join("memex/latin1.org")).unwrap(),
        b"* caf\xe9\n"
    );
}

#[test]
fn an_unknown_object_type_is_refused() {
    let dir = sandbox();
    let output = foveal(
        dir.path(),
        &["memex", "query", "--memex", "memex", "--type", "paragraph"],
    );
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        text(&output.stderr),
        "error: unknown object type \"paragraph\"; the types are: headline\n"
    );
}

/// What every listing below must not show without --include-private: the
/// title, tag, id, body and file name of private objects and files.
const PRIVATE: [&str; 6] = [
    "Diary",
    "Secret",
    "@personal",
    "sunday-canary",
    "diary-canary",
    "harbour",
];

/// [`sandbox`] with a file private as a whole (`#+FILETAGS`), one that
/// holds a bad `:EMBEDDING:` (a warning naming the file), a private file
/// that fails to load (a drawer without `:END:`) and a public one that
/// fails too.
fn sandbox_with_private_files() -> tempfile::TempDir {
    let dir = sandbox();
    std::fs::write(
        dir.path().join("memex/diary-canary.org"),
        "#+FILETAGS: :@personal:\n* Sunday :project:\n:PROPERTIES:\n:ID: sunday-canary\n:EMBEDDING: not numbers\n:END:\nMet Ann at the harbour.\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("memex/harbour-diary.org"),
        "#+FILETAGS: :@personal:\n* Cut\n:PROPERTIES:\n:ID: x\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("memex/broken.org"),
        "* Cut\n:PROPERTIES:\n:ID: y\n",
    )
    .unwrap();
    dir
}

/// Whether `err` has the warning that `file` was not loaded (the error
/// after it names the file).
fn not_loaded(err: &str, file: &str) -> bool {
    err.lines()
        .any(|line| line.starts_with("warning: not loaded: ") && line.contains(file))
}

fn assert_no_private(listing: &str) {
    for word in PRIVATE {
        assert!(!listing.contains(word), "{word} is listed:\n{listing}");
    }
}

#[test]
fn query_lists_no_private_object_or_file_unless_asked_and_says_how_many_it_hid() {
    let dir = sandbox_with_private_files();
    let query = |extra: &[&str]| {
        let mut args = vec!["memex", "query", "--memex", "memex", "--tag", "project"];
        args.extend_from_slice(extra);
        let output = foveal(dir.path(), &args);
        assert!(output.status.success(), "{}", text(&output.stderr));
        (text(&output.stdout), text(&output.stderr))
    };
    for extra in [&[][..], &["--json"][..]] {
        let (out, err) = query(extra);
        // The public projects are listed, and the public broken file named.
        for title in ["Launch", "Old", "Finished"] {
            assert!(out.contains(title), "{title} is missing:\n{out}");
        }
        assert!(not_loaded(&err, "broken.org"), "{err}");
        assert_no_private(&out);
        assert_no_private(&err);
        assert!(
            err.contains(
                "note: 2 private objects hidden; 1 private file that failed to load not named (--include-private shows them)"
            ),
            "{err}"
        );
    }
    let (out, _) = query(&["--json"]);
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 3, "{rows}");
    // Asked for, they are listed.
    let (out, err) = query(&["--include-private"]);
    for shown in ["Diary", "@personal", "sunday-canary", "diary-canary.org"] {
        assert!(out.contains(shown), "{shown} is missing:\n{out}");
    }
    assert!(not_loaded(&err, "harbour-diary.org"), "{err}");
    assert!(!err.contains("note:"), "{err}");
}

#[test]
fn stats_names_no_private_file_unless_asked_and_says_how_many_it_hid() {
    let dir = sandbox_with_private_files();
    let stats = |extra: &[&str]| {
        let mut args = vec!["memex", "stats", "--memex", "memex"];
        args.extend_from_slice(extra);
        let output = foveal(dir.path(), &args);
        assert!(output.status.success(), "{}", text(&output.stderr));
        (text(&output.stdout), text(&output.stderr))
    };
    let (out, err) = stats(&["--json"]);
    assert_no_private(&out);
    assert_no_private(&err);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    // The public broken file is named; the private one counted.
    let failed = json["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{json}");
    assert!(
        failed[0]["path"].as_str().unwrap().ends_with("/broken.org"),
        "{json}"
    );
    assert_eq!(json["failed_private_hidden"], 1, "{json}");
    assert_eq!(json["warnings"], 1, "{json}");
    assert_eq!(json["warnings_private_hidden"], 1, "{json}");
    let (out, err) = stats(&[]);
    assert_no_private(&out);
    assert_no_private(&err);
    assert!(
        out.contains("failed files     2 (1 private, not shown: --include-private shows them)\n"),
        "{out}"
    );
    assert!(
        out.contains("warnings         1 (1 about private objects, not shown: --include-private shows them)\n"),
        "{out}"
    );
    assert!(out.contains("broken.org:2: "), "{out}");
    // Asked for, they are named.
    let (out, err) = stats(&["--include-private"]);
    assert!(out.contains("harbour-diary.org:"), "{out}");
    assert!(out.contains("failed files     2\n"), "{out}");
    assert!(err.contains("diary-canary.org:"), "{err}");
}

/// Review of privacy v3: `foveal check` named every file that failed to
/// load, private ones too, and `memex query` named a file that failed
/// before it could be read (too large), whose privacy is unknown. `check`
/// hides a private one as `memex stats` does and says how many it hid; a
/// file never read is named by `check` and `stats`, where its name may be
/// the only clue, and only counted by `query`.
#[test]
fn check_names_no_private_failed_file_and_only_check_and_stats_name_a_file_never_read() {
    let dir = sandbox_with_private_files();
    // Over the memex's limit: it fails before it is read.
    std::fs::File::create(dir.path().join("memex/huge.org"))
        .unwrap()
        .set_len(4 << 30)
        .unwrap();
    let problem = |out: &str, name: &str| {
        out.lines()
            .any(|l| l.starts_with("PROBLEM  memex: ") && l.contains(name))
    };

    let check = foveal(dir.path(), &["check", "--memex", "memex"]);
    let out = text(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{out}");
    assert_no_private(&out);
    // The public broken file and the file never read are named; the
    // private one counted.
    assert!(problem(&out, "/broken.org:"), "{out}");
    assert!(problem(&out, "/huge.org:"), "{out}");
    assert!(
        out.contains(
            "PROBLEM  memex: 1 private file failed to load, not named here (`foveal memex stats --include-private` names it)\n"
        ),
        "{out}"
    );

    let stats = foveal(dir.path(), &["memex", "stats", "--memex", "memex"]);
    assert!(stats.status.success(), "{}", text(&stats.stderr));
    let out = text(&stats.stdout);
    assert_no_private(&out);
    assert!(out.contains("/huge.org"), "{out}");

    let query = |extra: &[&str]| {
        let mut args = vec!["memex", "query", "--memex", "memex", "--tag", "project"];
        args.extend_from_slice(extra);
        let output = foveal(dir.path(), &args);
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stderr)
    };
    let err = query(&[]);
    assert_no_private(&err);
    assert!(not_loaded(&err, "broken.org"), "{err}");
    assert!(!err.contains("huge.org"), "{err}");
    assert!(
        err.contains("; 1 file that could not be read not named (`foveal memex stats` names it) (--include-private shows them)"),
        "{err}"
    );
    let err = query(&["--include-private"]);
    assert!(not_loaded(&err, "huge.org"), "{err}");
    assert!(!err.contains("note:"), "{err}");
}

/// `foveal` with the privacy gate's log on stderr.
fn foveal_logged(cwd: &std::path::Path, args: &[&str]) -> Output {
    crate::support::foveal_command(cwd, args)
        .env("FOVEAL_LOG", "foveal::privacy=debug")
        .output()
        .unwrap()
}

const DIARY: &str = "* Diary :@personal:\nMet Ann at the harbour on a windy morning.\n";

#[test]
fn memex_index_writes_the_private_text_index_and_a_later_prompt_reads_it_while_the_memex_is_unchanged()
 {
    let dir = sandbox();
    std::fs::write(dir.path().join("memex/diary.org"), DIARY).unwrap();
    let index = |expected: &str| {
        let output = foveal(
            dir.path(),
            &["memex", "index", "--memex", "memex", "--json"],
        );
        assert!(output.status.success(), "{}", text(&output.stderr));
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["state"], expected, "{report}");
        assert_eq!(report["files"], 2);
        assert!(report["keys"].as_u64().unwrap() > 0, "{report}");
        report
    };
    let written = index("written");
    let path = dir.path().join("data/index/private.keys");
    assert_eq!(written["path"], path.to_str().unwrap());
    assert_eq!(
        written["bytes"].as_u64(),
        Some(std::fs::metadata(&path).unwrap().len())
    );
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // It holds keys, not text.
    let bytes = std::fs::read(&path).unwrap();
    assert!(!bytes.windows(7).any(|w| w == b"harbour"));
    index("current");

    // The prompt a command assembles is gated with the matcher read
    // from the index.
    let prompt = |message: &str| {
        let output = foveal_logged(
            dir.path(),
            &["prompt", "--memex", "memex", "--message", message],
        );
        assert!(output.status.success(), "{}", text(&output.stderr));
        (text(&output.stdout), text(&output.stderr))
    };
    let (out, log) = prompt("Met Ann at the harbour on a windy morning.");
    assert!(log.contains("read from the index"), "{log}");
    assert!(!out.contains("harbour"), "{out}");
    assert!(out.contains("[REDACTED private]"), "{out}");

    // An edit: the index is not of this memex, and the new private text
    // is found.
    std::fs::write(
        dir.path().join("memex/diary.org"),
        "* Diary :@personal:\nThe spare key is under the blue flower pot.\n",
    )
    .unwrap();
    let (out, log) = prompt("The spare key is under the blue flower pot.");
    assert!(!log.contains("read from the index"), "{log}");
    assert!(log.contains("private-text matcher built"), "{log}");
    assert!(!out.contains("flower pot"), "{out}");
    index("written");

    // Turned off: said, exit 1, nothing read.
    std::fs::write(dir.path().join("foveal.toml"), "[memex]\nindex = false\n").unwrap();
    let off = foveal(
        dir.path(),
        &[
            "memex",
            "index",
            "--config",
            "foveal.toml",
            "--memex",
            "memex",
        ],
    );
    assert_eq!(off.status.code(), Some(1));
    assert!(
        text(&off.stderr).contains("keeps no private-text index (`memex.index = false`)"),
        "{}",
        text(&off.stderr)
    );
    let output = foveal_logged(
        dir.path(),
        &[
            "prompt",
            "--config",
            "foveal.toml",
            "--memex",
            "memex",
            "--message",
            "hello",
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        !text(&output.stderr).contains("index"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn a_load_keeps_the_embedding_numbers_in_the_data_dir_and_the_next_load_gives_the_same_memex() {
    let dir = sandbox();
    std::fs::write(
        dir.path().join("memex/vectors.org"),
        "* Public :work:\n:PROPERTIES:\n:EMBEDDING: 0.25 -0.5 1\n:END:\n\
         * Short\n:PROPERTIES:\n:EMBEDDING: 0.25 -0.5\n:END:\n\
         * Diary :@personal:\n:PROPERTIES:\n:EMBEDDING: 0.75 0.5 x\n:END:\n\
         Met Ann at the harbour.\n",
    )
    .unwrap();
    let stats = |config: &[&str]| {
        let mut args = vec!["memex", "stats", "--memex", "memex", "--json"];
        args.extend_from_slice(config);
        let output = foveal(dir.path(), &args);
        assert!(output.status.success(), "{}", text(&output.stderr));
        let mut stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        for varying in ["load_ms", "resident_mib"] {
            stats.as_object_mut().unwrap().remove(varying);
        }
        stats
    };
    let store = dir.path().join("data/index/vectors");
    let first = stats(&[]);
    // One file, for the one memex file with values; private, and numbers
    // only.
    let files: Vec<_> = std::fs::read_dir(&store)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].to_string_lossy().ends_with(".vec"));
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&store), 0o700);
    assert_eq!(mode(&files[0]), 0o600);
    let bytes = std::fs::read(&files[0]).unwrap();
    assert!(!bytes.windows(7).any(|w| w == b"harbour"));
    // The bad values' warnings come back from the store as from the text
    // (the private one's counted, not shown; one is `main.org`'s).
    assert_eq!(first["warnings"], 2, "{first}");
    assert_eq!(first["warnings_private_hidden"], 1, "{first}");
    // The next load reads the file, and does not write it again (a write
    // renames a new file into place).
    use std::os::unix::fs::MetadataExt as _;
    let written = |p: &std::path::Path| {
        let meta = std::fs::metadata(p).unwrap();
        (meta.ino(), meta.mtime_nsec(), meta.mtime())
    };
    let before = written(&files[0]);
    assert_eq!(stats(&[]), first);
    assert_eq!(written(&files[0]), before);

    // Damaged: read from the text, the same memex, written again whole.
    std::fs::write(&files[0], b"FOVVECS1 cut").unwrap();
    assert_eq!(stats(&[]), first);
    assert_eq!(std::fs::read(&files[0]).unwrap(), bytes);

    // Not writable: said at the default level, and the memex the same.
    std::fs::remove_dir_all(&store).unwrap();
    std::fs::write(&store, b"a file where the folder goes").unwrap();
    let output = foveal(dir.path(), &["memex", "stats", "--memex", "memex"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let said = text(&output.stderr);
    assert!(
        said.contains("could not store the memex's vectors"),
        "{said}"
    );
    assert_eq!(said.matches("could not store").count(), 1, "{said}");
    std::fs::remove_file(&store).unwrap();

    // `memex.index = false`: nothing kept.
    std::fs::write(dir.path().join("foveal.toml"), "[memex]\nindex = false\n").unwrap();
    assert_eq!(stats(&["--config", "foveal.toml"]), first);
    assert!(!store.exists());
}
