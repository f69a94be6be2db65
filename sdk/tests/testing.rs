//! The SDK's test harness, used as a skill's own tests use it: a skill
//! exported with `export_skill!` in this test crate, called in-process.
#![cfg(feature = "testing")]

use foveal_sdk::prompt::ids;
use foveal_sdk::testing::{Harness, TestMemex, find};
use foveal_sdk::{Component, ComponentsRequest, Role, SkillError, ToolCallRequest, ToolDecl};

const MEMEX: &str = "#+TODO: TODO | DONE
* Launch :project:
:PROPERTIES:
:ID: launch
:EMBEDDING: 1 0
:END:
Ship it.
** TODO Write docs
* Health :@personal:
CANARY private notes
** Deeper
* Home
";

fn titles(request: &ComponentsRequest<'_>) -> Result<Vec<Component>, SkillError> {
    let mut titles = Vec::new();
    for file in request.memex.files() {
        for i in 0..file.len() as u32 {
            titles.push(file.title(i).to_owned());
        }
    }
    let mut out = vec![Component::new(
        4500,
        "titles",
        "Titles",
        Role::SYSTEM,
        titles.join(", "),
    )];
    if request.config_json.as_str().contains("\"stray\":true") {
        out.push(Component::new(4501, "stray", "Stray", Role::SYSTEM, "x"));
    }
    if request.config_json.as_str().contains("\"panic\":true") {
        panic!("asked to panic");
    }
    Ok(out)
}

fn tools() -> Result<Vec<ToolDecl>, SkillError> {
    Ok(vec![ToolDecl::new(
        "focus_title",
        "The title of the object in focus.",
        r#"{"type": "object", "properties": {}}"#,
        "read",
    )])
}

fn run_tool(request: &ToolCallRequest<'_>) -> Result<String, SkillError> {
    let focus = request
        .focus
        .into_option()
        .ok_or_else(|| SkillError::invalid_input("nothing in focus"))?;
    let (file, index) = request
        .memex
        .find(focus.as_str())
        .ok_or_else(|| SkillError::invalid_input("no such object"))?;
    Ok(format!("{} {}", request.args_json, file.title(index)))
}

foveal_sdk::export_skill! {
    name: "harness-test",
    priority: 1,
    dependencies: [],
    description: "The SDK's harness test skill.",
    component_ids: [4500],
    source: "harness test\n",
    hooks: { components: titles, tools: tools, run_tool: run_tool },
}

#[test]
fn the_test_memex_cuts_private_subtrees_as_the_host_does() {
    let memex = TestMemex::from_org(MEMEX);
    let text = memex.visible_text("memex.org").unwrap();
    assert!(!text.contains("CANARY") && !text.contains("Deeper") && !text.contains("Health"));
    assert!(
        text.contains(":EMBEDDING: \n"),
        "vectors are not lent as text: {text}"
    );
    let out = Harness::new(memex).components(titles).unwrap();
    assert_eq!(out[0].content.as_str(), "Launch, Write docs, Home");
    // Without privacy tags, everything is lent.
    let open = TestMemex::from_org(MEMEX).with_privacy_tags(Vec::<String>::new());
    let out = Harness::new(open).components(titles).unwrap();
    assert_eq!(
        out[0].content.as_str(),
        "Launch, Write docs, Health, Deeper, Home"
    );
}

#[test]
fn a_file_private_through_filetags_is_not_lent_at_all() {
    let memex = TestMemex::new()
        .with_file("diary.org", "#+FILETAGS: :@personal:\n* Monday\n")
        .with_file("work.org", "* Work\n");
    assert_eq!(memex.visible_text("diary.org"), None);
    let view = memex.view();
    assert_eq!(view.as_view().files.len(), 1);
}

#[test]
fn the_exported_skill_is_called_through_the_abi_with_its_manifest_enforced() {
    let skill = foveal_sdk::exported_skill!().unwrap();
    assert_eq!(skill.manifest().name.as_str(), "harness-test");
    assert_eq!(skill.hooks(), ["components", "tools", "run_tool"]);
    let call = Harness::new(TestMemex::from_org(MEMEX));
    let out = skill.components(&call).unwrap();
    assert_eq!(find(&out, "titles").unwrap().id, 4500);
    // A component at an undeclared id: the host would drop it.
    let stray = skill
        .components(&call.clone().config_json(r#"{"stray":true}"#))
        .unwrap_err();
    assert!(stray.message.contains("4501"), "{stray}");
    // A panic is an error value, as in the host.
    let panicked = skill
        .components(&call.config_json(r#"{"panic":true}"#))
        .unwrap_err();
    assert_eq!(panicked.code, SkillError::PANIC);
    assert!(panicked.message.contains("asked to panic"));
}

#[test]
fn a_tool_is_lent_the_memex_and_the_focus() {
    let skill = foveal_sdk::exported_skill!().unwrap();
    let call = Harness::new(TestMemex::from_org(MEMEX)).focus("launch");
    assert_eq!(
        skill.run_tool(&call, "focus_title", "{}").unwrap(),
        "{} Launch"
    );
    // The same through the function, without the library.
    assert_eq!(
        call.run_tool(run_tool, "focus_title", "{\"a\":1}").unwrap(),
        "{\"a\":1} Launch"
    );
    // A private object does not exist for a tool.
    let health = Harness::new(TestMemex::from_org(MEMEX));
    let id = TestMemex::from_org(MEMEX)
        .with_privacy_tags(Vec::<String>::new())
        .view()
        .as_view()
        .files[0]
        .id(3)
        .to_owned();
    assert!(
        skill
            .run_tool(&health.focus(&id), "focus_title", "{}")
            .is_err()
    );
    assert!(skill.run_tool(&call, "undeclared", "{}").is_err());
}

#[test]
fn declared_ids_follow_the_loaders_rules() {
    assert_eq!(ids::check_declared("x", &[1, 1999, 4500, 7999]), Ok(()));
    for bad in [0, 2500, 5000, 6000, 7000, 8000, 2000] {
        let error = ids::check_declared("x", &[bad]).unwrap_err();
        assert!(error.contains("1-1999, 2001-2499"), "{bad}: {error}");
    }
    assert_eq!(ids::check_declared("awareness", &[2000]), Ok(()));
    assert!(ids::check_declared("x", &[4500, 4500]).is_err());
}
