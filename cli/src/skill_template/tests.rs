//! Tests of the `{{name}}` skill, in-process, with the SDK's test harness
//! (`foveal_sdk::testing`): a memex built from Org text with the host's
//! privacy rules, and the hooks called as the host calls them.

// @if components or tools
use foveal_sdk::testing::{Harness, TestMemex};

/// A memex of one file; the `@personal` subtree is private, so no hook
/// may see it.
const ORG: &str = "\
* TODO Write the report :work:
:PROPERTIES:
:ID: report
:END:
* DONE Book the train :work:
* Diary :@personal:
** TODO A private task :work:
";
// @end

// @if components
#[test]
fn the_component_counts_the_open_tasks_the_host_lends() {
    let components = Harness::new(TestMemex::from_org(ORG))
        .components(super::components)
        .unwrap();
    assert_eq!(components.len(), 1);
    assert_eq!(components[0].id, super::COMPONENT_ID);
    // The private task is not in the view, and DONE is not open.
    assert_eq!(
        components[0].content.as_str(),
        "The memex has 1 open tasks in 1 files."
    );
}
// @end
// @if tools

#[test]
fn the_tool_finds_tagged_objects_and_never_private_ones() {
    let harness = Harness::new(TestMemex::from_org(ORG));
    let found = harness
        .run_tool(super::run_tool, "{{ident}}_find", r#"{"tag": "work"}"#)
        .unwrap();
    assert!(found.contains("report | Write the report"), "{found}");
    assert!(!found.contains("private"), "{found}");
    let error = harness
        .run_tool(super::run_tool, "{{ident}}_find", "{}")
        .unwrap_err();
    assert_eq!(error.code, foveal_sdk::SkillError::INVALID_INPUT);
}
// @end
// @if redact

#[test]
fn redact_replaces_ticket_references() {
    assert_eq!(
        super::redact("see INT-42 and INT-x").unwrap(),
        "see [ticket] and INT-x"
    );
}
// @end

#[test]
fn the_exported_module_is_what_the_host_loads() {
    let skill = foveal_sdk::exported_skill!().unwrap();
    assert_eq!(skill.manifest().name.as_str(), "{{name}}");
    assert_eq!(skill.manifest().sdk_version.as_str(), foveal_sdk::SDK_VERSION);
}
