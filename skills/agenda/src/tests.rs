//! The agenda skill through its exported module, as the host calls it.

use foveal_sdk::Now;
use foveal_sdk::testing::{Harness, TestMemex};

const MEMEX: &str = "#+TODO: TODO NEXT | DONE
* Work
** TODO Send the report
DEADLINE: <2024-01-17 Wed>
** NEXT Plan the sprint
SCHEDULED: <2024-01-15 Mon 10:00>
** DONE Old task
SCHEDULED: <2024-01-10 Wed>
* Diary :@personal:
** Therapy
<2024-01-15 Mon 17:00>
";

/// 2024-01-15 23:30 at UTC+01:00 (22:30 UTC).
fn monday_late() -> Now {
    Now::new(1_705_357_800, 3600)
}

fn skill() -> foveal_sdk::testing::Skill {
    foveal_sdk::exported_skill!().unwrap()
}

#[test]
fn the_section_lists_the_coming_week_from_the_calls_local_date_without_private_items() {
    let call = Harness::new(TestMemex::from_org(MEMEX)).now(monday_late());
    let components = skill().components(&call).unwrap();
    assert_eq!(components.len(), 1);
    let text = components[0].content.as_str();
    assert_eq!(components[0].id, 4050);
    assert!(
        text.starts_with("AGENDA (7 days from today, Mon 2024-01-15;"),
        "{text}"
    );
    assert!(text.contains("Monday     15 January 2024\n"));
    assert!(
        text.contains("10:00       Scheduled:  NEXT Plan the sprint"),
        "{text}"
    );
    assert!(text.contains("In   2 d.:  TODO Send the report"), "{text}");
    assert!(text.contains("Wednesday  17 January 2024\n"));
    assert!(
        !text.contains("Old task"),
        "a done item shows on its own date only"
    );
    assert!(
        !text.contains("Therapy") && !text.contains("17:00"),
        "{text}"
    );

    // An hour later it is Tuesday: the section moves with the day.
    let call = Harness::new(TestMemex::from_org(MEMEX)).now(Now::new(1_705_361_400, 3600));
    let text = skill().components(&call).unwrap()[0].content.to_string();
    assert!(text.contains("Tue 2024-01-16"), "{text}");
    assert!(text.contains("In   1 d.:  TODO Send the report"), "{text}");
}

#[test]
fn nothing_due_is_no_section_and_settings_are_checked() {
    let call = Harness::new(TestMemex::from_org("* Notes\nNo dates.\n")).now(monday_late());
    assert!(skill().components(&call).unwrap().is_empty());

    let call = Harness::new(TestMemex::from_org(MEMEX))
        .now(monday_late())
        .config_json(r#"{"skip-done": true}"#);
    let error = skill().components(&call).unwrap_err();
    assert!(error.message.contains("skip-done"), "{}", error.message);

    let call = Harness::new(TestMemex::from_org(MEMEX))
        .now(monday_late())
        .config_json(r#"{"days": 1}"#);
    let text = skill().components(&call).unwrap()[0].content.to_string();
    assert!(!text.contains("Tuesday"), "{text}");
}

#[test]
fn the_tool_gives_any_span_and_refuses_bad_arguments_with_a_reason() {
    let skill = skill();
    assert_eq!(skill.tools().unwrap()[0].name.as_str(), "agenda");
    let call = Harness::new(TestMemex::from_org(MEMEX)).now(monday_late());
    let text = skill
        .run_tool(&call, "agenda", r#"{"from": "2024-01-17", "days": 1}"#)
        .unwrap();
    assert!(text.starts_with("Wednesday  17 January 2024\n"), "{text}");
    assert!(text.contains("Deadline:   TODO Send the report"), "{text}");
    assert!(!text.contains("d. ago"), "reminders only on today: {text}");
    assert!(!text.contains("Therapy"));

    let text = skill
        .run_tool(&call, "agenda", r#"{"from": "2025-06-01", "days": 3}"#)
        .unwrap();
    assert_eq!(text, "Nothing is due in the 3 days from 2025-06-01.");

    for (args, says) in [
        (r#"{"from": "2024-1-17"}"#, "not a date"),
        (r#"{"days": 0}"#, "days must be 1 to 366"),
        (r#"{"when": "soon"}"#, "unknown field"),
    ] {
        let error = skill.run_tool(&call, "agenda", args).unwrap_err();
        assert!(error.message.contains(says), "{args}: {}", error.message);
    }
}
