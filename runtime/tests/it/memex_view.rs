//! The memex view crosses the ABI into a real skill library: everything
//! visible arrives intact, nothing private arrives at all.

use crate::support::{components_for, components_for_files, library};

const MEMEX: &str = "* Launch :project:
:PROPERTIES:
:ID: launch
:EMBEDDING: 0.1 0.2 0.3
:END:
launch body
** TODO Docs
** Diary :@personal:
CANARY-ONE in a private body
*** Deeper CANARY-TWO
** Public again
* Home :@Personal:
:PROPERTIES:
:ID: CANARY-THREE
:END:
";

#[test]
fn a_skill_sees_the_visible_memex_through_the_abi_and_nothing_private() {
    let (component, generation) = components_for(
        &library("memex-reader"),
        "memex-reader",
        MEMEX,
        Some("launch"),
        "{}",
    );
    let text = component.content.as_str();
    assert!(!text.contains("CANARY"), "{text}");
    assert!(!text.contains("Diary") && !text.contains("Home"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("generation {generation}"));
    assert_eq!(
        lines[1],
        "Launch [launch] tags=project parent=- vector=3 children=2 todo=-"
    );
    assert_eq!(lines[2], "launch body");
    assert!(lines[3].starts_with("Docs [org-"), "{text}");
    assert!(
        lines[3].ends_with("tags= parent=Launch vector=0 children=0 todo=TODO"),
        "{text}"
    );
    assert!(lines[4].starts_with("Public again [org-"), "{text}");
    assert_eq!(lines[5], "focus: Launch");
    assert_eq!(lines.len(), 6, "{text}");
}

/// Canaries in every place a private byte could hide: a private title,
/// body, tag, property value, `:ID:`, embedding; a nested private child;
/// a whole file private through `#+FILETAGS`, its preamble and its name.
const PRIVATE_EVERYWHERE: &str = "#+TITLE: Notes
* Launch :project:
:PROPERTIES:
:ID: launch
:EMBEDDING: 0.1 0.2 0.3
:END:
launch body
** Diary CANARYTITLE :@personal:CANARYTAG:
:PROPERTIES:
:ID: CANARYID
:CANARYKEY: CANARYVALUE
:EMBEDDING: 0.7777 0.8888 0.9999
:END:
CANARYBODY in a private body
*** Deeper CANARYCHILD
- [ ] CANARYITEM
** Public again
";

const DIARY: &str = "#+TITLE: CANARYFILETITLE
#+FILETAGS: :journal:@personal:
CANARYPREAMBLE before any headline.
* Monday CANARYMONDAY
:PROPERTIES:
:ID: monday
:END:
CANARYDIARYBODY
";

#[test]
fn a_skill_that_prints_its_whole_request_finds_no_private_byte() {
    let (components, _) = components_for_files(
        &library("memex-reader"),
        "memex-reader",
        &[
            ("main.org", PRIVATE_EVERYWHERE),
            ("CANARYNAME-diary.org", DIARY),
        ],
        Some("launch"),
        "{}",
    );
    assert_eq!(components.len(), 2);
    let dump = components[1].content.as_str();
    // The dump is the whole request: the visible parts are there…
    for visible in ["launch body", "Public again", "#+TITLE: Notes", "main.org"] {
        assert!(dump.contains(visible), "{visible} missing from {dump}");
    }
    // …and nothing private, in any field.
    for text in [components[0].content.as_str(), dump] {
        assert!(!text.contains("CANARY"), "{text}");
        assert!(
            !text.contains("Diary") && !text.contains("Monday"),
            "{text}"
        );
        assert!(
            !text.contains("0.7777") && !text.contains("0.9999"),
            "{text}"
        );
        assert!(
            !text.contains("@personal") && !text.contains("journal"),
            "{text}"
        );
    }
}
