//! The memex view crosses the ABI into a real skill library: everything
//! visible arrives intact, nothing private arrives at all.

use abi_stable::std_types::ROption;
use foveal::memex::Memex;
use foveal::memex::privacy::PrivacyTags;
use foveal::memex::view::SnapshotView;
use foveal::registry::hooks;
use foveal_sdk::{ComponentsRequest, SignalKind};

use crate::support::{Sandbox, file_name, install, library};

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
    let sandbox = Sandbox::new();
    install(
        &library("memex-reader"),
        &sandbox.plugins(),
        &file_name("reader"),
    );
    let registry = sandbox.registry();
    registry.scan();

    let memex_dir = sandbox.root.path().join("memex");
    std::fs::create_dir(&memex_dir).unwrap();
    std::fs::write(memex_dir.join("main.org"), MEMEX).unwrap();
    let memex = Memex::open(&[memex_dir]).unwrap();
    let snapshot = memex.snapshot();
    let prepared = SnapshotView::new(&snapshot, &PrivacyTags::new(["@personal"]));
    let files = prepared.file_views();
    let view = prepared.view_of(&files);
    let request = ComponentsRequest {
        signal: SignalKind::USER,
        focus: ROption::RSome("launch".into()),
        budget_tokens: ROption::RNone,
        config_json: "{}".into(),
        memex: &view,
    };
    let components = registry
        .snapshot()
        .call("memex-reader", hooks::COMPONENTS, |f| f(&request))
        .unwrap();
    let text = components[0].content.as_str();
    assert!(!text.contains("CANARY"), "{text}");
    assert!(!text.contains("Diary") && !text.contains("Home"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], format!("generation {}", snapshot.generation()));
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
