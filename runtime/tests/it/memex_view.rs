//! The memex view crosses the ABI into a real skill library: everything
//! visible arrives intact, nothing private arrives at all.

use crate::support::{components_for, library};

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
