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
    // Launch, Diary, Old; not the DONE one; `subprojects` is not `project`.
    assert_eq!(stats["active_projects"], 3);
    assert_eq!(
        stats["private_objects"], 2,
        "Diary and the headline under it"
    );
    assert_eq!(stats["generation"], 1);
    assert!(stats["load_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(stats["failed"], serde_json::json!([]));
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
    assert_eq!(titles, ["Launch", "Diary", "Old", "Finished"]);
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
