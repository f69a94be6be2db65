//! `foveal agenda` through the real binary, against what Org's own agenda
//! (`org-agenda-list` in batch Emacs, `tests/agenda/expected`) lists for the
//! same corpus and days — with the private subtree gone.

use std::path::{Path, PathBuf};

use serde_json::Value;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/agenda")
}

/// The titles under the corpus's `:private:` subtree
/// (`tests/agenda/private.txt`).
fn private_titles() -> Vec<String> {
    std::fs::read_to_string(corpus().join("private.txt"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn agenda(cwd: &Path, today: &str, days: &str, extra: &[&str]) -> std::process::Output {
    let memex = corpus().join("corpus");
    let mut args = vec![
        "agenda",
        "--memex",
        memex.to_str().unwrap(),
        "--today",
        today,
        "--days",
        days,
    ];
    args.extend_from_slice(extra);
    crate::support::run_foveal(cwd, &args)
}

#[test]
fn foveal_agenda_lists_what_orgs_agenda_lists_without_the_private_subtree() {
    let dir = tempfile::tempdir().unwrap();
    let private = private_titles();
    let is_private = |title: &str| private.iter().any(|p| p == title);
    let mut private_seen_by_org = 0;
    for entry in std::fs::read_dir(corpus().join("expected")).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let (today, days) = stem.split_once('_').unwrap();
        let org: Vec<Vec<String>> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| l.split('\t').map(str::to_owned).collect())
            .collect();
        private_seen_by_org += org.iter().filter(|r| is_private(&r[5])).count();
        let want: Vec<String> = org
            .iter()
            .filter(|r| !is_private(&r[5]))
            .map(|r| {
                [&r[0], &r[2], &r[3], &r[4], &r[5]]
                    .map(|s| s.as_str())
                    .join("\t")
            })
            .collect();

        let out = agenda(
            dir.path(),
            today,
            days,
            &["--json", "--privacy-tag", "private"],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        let got: Vec<String> = rows
            .iter()
            .map(|r| {
                let s = |k: &str| r[k].as_str().unwrap_or("").to_owned();
                [s("date"), s("leader"), s("time"), s("todo"), s("title")].join("\t")
            })
            .collect();
        assert_eq!(got, want, "today {today}, {days} days");

        // Nothing of the private subtree, in any field.
        let text = String::from_utf8(out.stdout).unwrap();
        for title in &private {
            assert!(!text.contains(title), "{title} leaked on {today}");
        }
    }
    assert!(
        private_seen_by_org > 0,
        "the corpus must date private items"
    );
}

#[test]
fn the_text_groups_by_day_and_bad_input_is_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = agenda(dir.path(), "2024-01-15", "2", &["--privacy-tag", "private"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Monday     15 January 2024");
    assert!(text.contains("Tuesday    16 January 2024\n"));
    assert!(
        lines.iter().any(|l| l.contains("10 d. ago:")
            && l.contains("TODO Weekly status report")
            && l.starts_with("  work:")),
        "{text}"
    );

    for (today, days, says) in [
        ("2024-1-15", "7", "is not a date"),
        ("2024-02-30", "7", "is not a date"),
        ("2024-01-15", "0", "days"),
        ("2024-01-15", "367", "days"),
    ] {
        let out = agenda(dir.path(), today, days, &[]);
        assert_eq!(out.status.code(), Some(2), "{today} {days}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn a_planning_line_org_would_not_read_is_a_warning_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let memex = dir.path().join("memex");
    std::fs::create_dir(&memex).unwrap();
    std::fs::write(
        memex.join("plan.org"),
        "* TODO Good\nSCHEDULED: <2024-01-15 Mon>\n* TODO Bad\nSCHEDULED: <2024-1-15>\n\
         * Therapy :@personal:\nDEADLINE: <2024-1-16>\n",
    )
    .unwrap();
    let stats = |extra: &[&str]| {
        let mut args = vec!["memex", "stats", "--memex", "memex"];
        args.extend_from_slice(extra);
        let out = crate::support::run_foveal(dir.path(), &args);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let all = stats(&[]);
    assert!(
        all.contains("plan.org:4") && all.contains("SCHEDULED: is not followed by a timestamp"),
        "{all}"
    );
    // The private headline's planning line is counted, not named.
    assert!(
        !all.contains("plan.org:6") && !all.contains("DEADLINE:"),
        "{all}"
    );
    assert!(all.contains("1 about private objects"), "{all}");
    assert!(stats(&["--include-private"]).contains("plan.org:6"));
    let out = crate::support::run_foveal(
        dir.path(),
        &[
            "agenda",
            "--memex",
            "memex",
            "--today",
            "2024-01-15",
            "--days",
            "1",
            "--json",
        ],
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["title"], "Good");
}
