//! A skill's view of Org's dates: the agenda a skill computes from the
//! memex view it is lent (`foveal_sdk::dates`) is Org's own
//! (`tests/agenda/expected`, from batch Emacs) with the private subtree
//! gone — the private objects are not in the view, so neither are their
//! dates.

use std::path::{Path, PathBuf};

use foveal_sdk::dates::{self, agenda, time::Date};
use foveal_sdk::testing::TestMemex;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/agenda")
}

/// The titles under the corpus's `:private:` subtree
/// (`tests/agenda/private.txt`).
fn private_titles() -> Vec<String> {
    std::fs::read_to_string(root().join("private.txt"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_skill_computes_orgs_agenda_from_its_view_without_private_items() {
    let mut names: Vec<_> = std::fs::read_dir(root().join("corpus"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut memex = TestMemex::new().with_privacy_tags(["private"]);
    for name in &names {
        let text = std::fs::read_to_string(root().join("corpus").join(name)).unwrap();
        memex = memex.with_file(name, &text);
    }
    let view = memex.view();
    let view = view.as_view();
    let files: Vec<_> = view.files().collect();
    let (items, at) = dates::items(&view);
    let private = private_titles();

    for entry in std::fs::read_dir(root().join("expected")).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let (today, days) = stem.split_once('_').unwrap();
        let want: Vec<String> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| l.split('\t').collect::<Vec<_>>())
            .filter(|r| !private.iter().any(|p| p == r[5]))
            .map(|r| [r[0], r[2], r[3], r[4], r[5]].join("\t"))
            .collect();
        let got: Vec<String> = agenda::agenda(
            &items,
            Date::parse(today).unwrap(),
            days.parse().unwrap(),
            &agenda::Options::default(),
        )
        .iter()
        .map(|e| {
            let (f, i) = at[e.item];
            let file = files[f as usize];
            [
                e.date.to_string(),
                e.kind.leader(),
                e.time_text(),
                file.todo(i).unwrap_or("").to_owned(),
                file.title(i).to_owned(),
            ]
            .join("\t")
        })
        .collect();
        assert_eq!(got, want, "today {today}, {days} days");
    }
}

#[test]
fn planning_timestamps_and_properties_are_typed_values() {
    let memex = TestMemex::from_org(
        "* TODO [#A] Review :work:\n\
         SCHEDULED: <2024-01-15 Mon 10:00-11:00 +1w> DEADLINE: <2024-01-19 Fri -3d> CLOSED: [2024-01-12 Fri 09:00]\n\
         :PROPERTIES:\n:ID: review\n:Effort: 1:00\n:END:\n\
         Call <2024-01-16 Tue 14:00>; trip <2024-01-20 Sat>--<2024-01-22 Mon>.\n\
         #+begin_src sh\necho <2024-01-17 Wed>\n#+end_src\n\
         ** Child\n<2024-01-18 Thu>\n\
         * Secret :@personal:\nDEADLINE: <2024-01-16 Tue>\n",
    );
    let view = memex.view();
    let view = view.as_view();
    let file = view.files().next().unwrap();
    assert_eq!(file.len(), 2, "the private headline is not lent");
    let s = file.scheduled(0).unwrap();
    assert_eq!(s.date.to_string(), "2024-01-15");
    assert_eq!((s.time.unwrap().hour, s.end_time.unwrap().hour), (10, 11));
    assert_eq!(s.repeater.unwrap().value, 1);
    assert_eq!(file.deadline(0).unwrap().warning.unwrap().days(), 3);
    assert!(!file.closed(0).unwrap().active);
    assert_eq!(file.priority(0), Some('A'));
    let props: Vec<_> = file.properties(0).collect();
    assert_eq!(props, [("ID", "review"), ("Effort", "1:00")]);
    assert_eq!(file.property(0, "effort"), Some("1:00"));
    let stamps: Vec<String> = file
        .timestamps(0)
        .iter()
        .map(|t| format!("{} {:?}", t.date, t.end_date.map(|d| d.to_string())))
        .collect();
    assert_eq!(
        stamps,
        ["2024-01-16 None", "2024-01-20 Some(\"2024-01-22\")"],
        "not the planning line's, not the source block's, not the child's"
    );
    assert!(file.scheduled(1).is_none());
    assert_eq!(file.timestamps(1).len(), 1);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

    /// Whatever the text, reading its dates and its agenda never panics,
    /// and every entry is inside the span asked for.
    #[test]
    fn any_text_reads_and_makes_an_agenda_without_panicking(
        parts in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::string::string_regex("\\* [A-Z]{0,4} ?[a-zé ]{0,8}(:[a-z]+:)?\\n").unwrap(),
                proptest::string::string_regex("(SCHEDULED|DEADLINE|CLOSED): [<\\[]20[0-9]{2}-[01][0-9]-[0-3][0-9]( [A-Za-zä]{0,3})?( [0-2]?[0-9]:[0-5][0-9](-[0-9:]{1,5})?)?( [.+]{0,2}[0-9]{1,3}[hdwmyx])?( -{1,2}[0-9][dw])?[>\\]]\\n").unwrap(),
                proptest::string::string_regex("[<\\[]20[0-9]{2}-[01][0-9]-[0-3][0-9][^>\\n]{0,12}[>\\]](-{1,3}<20[0-9]{2}-[01][0-9]-[0-3][0-9]>)?\\n").unwrap(),
                proptest::string::string_regex("#\\+(begin|end)_(src|example|quote)\\n").unwrap(),
                proptest::string::string_regex("(# |: |:PROPERTIES:|:END:|:[A-Z]+: )?[^\\n]{0,20}\\n").unwrap(),
            ],
            0..24,
        ),
        today in 0i64..40_000,
        days in 1u32..40,
    ) {
        let text: String = parts.concat();
        let memex = TestMemex::from_org(&text);
        let view = memex.view();
        let view = view.as_view();
        for file in view.files() {
            for i in 0..file.len() as u32 {
                let _ = (file.planning(i), file.timestamps(i), file.properties(i).count(), file.priority(i));
            }
        }
        let (items, _) = dates::items(&view);
        let today = Date::from_days(today);
        for e in agenda::agenda(&items, today, days, &agenda::Options::default()) {
            proptest::prop_assert!(e.date >= today && e.date.days() < today.days() + i64::from(days));
        }
    }
}

proptest::proptest! {
    /// Any string after a bracket or a planning keyword: parsing never
    /// panics (multi-byte characters where a unit or a digit is expected,
    /// amounts too large for any integer).
    #[test]
    fn any_unicode_after_a_date_parses_without_panicking(
        tail in "\\PC{0,16}",
        digits in "[0-9]{0,30}",
        open in proptest::sample::select(vec!['<', '[']),
    ) {
        use foveal_sdk::dates::time::{Timestamp, planning, timestamps};
        for text in [
            format!("{open}2024-01-15 {tail}>"),
            format!("{open}2024-01-15 +{digits}{tail}>"),
            format!("{open}2024-01-15 -{digits}{tail} +1d>"),
            format!("{open}2024-01-15 {digits}:{tail}>--<2024-01-16 {tail}>"),
        ] {
            let _ = Timestamp::parse(&text);
            let _ = planning(&format!("SCHEDULED: {text} DEADLINE: {tail}"));
            let _ = timestamps(&text).count();
            let memex = TestMemex::from_org(&format!("* TODO {tail}\nDEADLINE: {text}\n{text}\n"));
            let view = memex.view();
            let (items, _) = dates::items(&view.as_view());
            let _ = agenda::agenda(&items, Date::parse("2024-01-10").unwrap(), 30, &agenda::Options::default());
        }
    }
}
