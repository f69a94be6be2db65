//! Privacy one layer at a time: each test looks at what one layer makes —
//! the prompt's sections before the request is checked whole, the
//! awareness section before any gate, the session file — so that a leak
//! in an inner layer fails here even when a later door would have turned
//! it into `[REDACTED private]`. The layers before them — what a skill is
//! lent and what a tool answers — are tested beside their code
//! (`context::tests`, `agent::tools::tests`).

use std::sync::Arc;

use foveal::context::{ContextRequest, Origin};
use foveal::memex::Memex;
use foveal::memex::privacy::PrivacyTags;
use foveal::prompt::{Assembler, Prompt, PromptInput, PromptSettings};
use foveal::registry::Registry;
use foveal_sdk::prompt::TrimLevels;

use crate::live::{command, run_to_end, session_lines, stderr, stdout, text_reply, tool_reply};
use crate::server::Server;
use crate::support::Sandbox;

/// A private body line of five words, none of them common: every word
/// of it, and every half of it, is easy to find.
const PRIVATE_LINE: &str = "Zorvath quellin marbry tessick oxhale";

/// Its words, lowercased.
const PRIVATE_WORDS: [&str; 5] = ["zorvath", "quellin", "marbry", "tessick", "oxhale"];

/// A memex whose private headline holds [`PRIVATE_LINE`], and which
/// a `* Launch` project with a body and a private child makes worth
/// rendering.
fn memex_org() -> String {
    format!(
        "* Launch :project:
:PROPERTIES:
:ID: launch
:END:
Ship the launch on time.
** Diary :@personal:
:PROPERTIES:
:ID: diary
:END:
{PRIVATE_LINE}
** TODO Write docs
:PROPERTIES:
:ID: docs
:END:
"
    )
}

/// A sandbox with the first-party `skills` loaded and a memex of
/// [`memex_org`].
fn world(skills: &[&str]) -> (Sandbox, Registry, Memex) {
    let sandbox = Sandbox::new();
    for skill in skills {
        sandbox.install(&format!("skill:{skill}"), &skill.replace('-', "_"));
    }
    let registry = sandbox.registry();
    registry.scan();
    for skill in skills {
        assert!(
            registry.snapshot().get(skill).is_some(),
            "{skill} did not load: {:?}",
            registry.snapshot().rows()
        );
    }
    let dir = sandbox.root.path().join("memex");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("main.org"), memex_org()).unwrap();
    let memex = Memex::open(&[dir]).unwrap();
    (sandbox, registry, memex)
}

fn pending_event(prompt: &Prompt) -> &str {
    prompt
        .sections
        .iter()
        .find(|s| s.key == "pending_event")
        .expect("no pending event")
        .text
        .as_str()
}

/// The gate before the budget (docs/security.md, section 2). A pasted
/// note quotes the private line again and again, and is too long for its
/// budget: the token-economics skill cuts its middle, at a byte count —
/// through an occurrence of the line, whichever. Gated after the cut only,
/// the halves on either side of the cut are each shorter than a run of
/// five words, and the gate after the budget lets them through. Gated
/// before, the skill cuts text that holds no private word.
#[test]
fn a_private_line_the_budget_cuts_in_half_was_gated_before_it_was_cut() {
    let (_sandbox, registry, memex) = world(&["token-economics"]);
    let message = format!(
        "BEGIN of the pasted notes.\n{}END of the pasted notes.",
        format!("{PRIVATE_LINE}\n").repeat(400)
    );
    let assembler = Assembler::new(PromptSettings::default());
    let assemble = |message: &str| {
        assembler
            .assemble(
                &registry.snapshot(),
                &memex.snapshot(),
                &PromptInput {
                    message: Some(Arc::from(message)),
                    budget: Some(1500),
                    ..PromptInput::default()
                },
            )
            .unwrap()
    };
    let prompt = assemble(&message);
    let sent = pending_event(&prompt);
    // The positive control: the message was cut in its middle, and the
    // gate found the private line.
    assert!(
        prompt.trim_levels.contains(TrimLevels::MESSAGE),
        "{:?}",
        prompt.trim_levels
    );
    assert!(
        sent.starts_with("BEGIN of the pasted notes.\n[REDACTED private]"),
        "{sent}"
    );
    assert!(sent.ends_with("END of the pasted notes."), "{sent}");
    assert!(
        sent.contains("characters cut from the middle of this message"),
        "{sent}"
    );
    assert!(prompt.egress.private > 0);
    // No word of the line is left, whole or cut …
    let lower = sent.to_lowercase();
    for word in PRIVATE_WORDS {
        for part in [&word[..4], &word[word.len() - 4..]] {
            assert!(
                !lower.contains(part),
                "{part:?} of {word:?} was sent:\n{sent}"
            );
        }
    }
    // … because what was cut is what the gate made of the message: the
    // same as cutting the gate's text itself.
    let gated = assembler
        .gate()
        .clean(&message, &memex.snapshot(), &*registry.snapshot())
        .unwrap()
        .text
        .into_owned();
    assert!(!gated.to_lowercase().contains("zorvath"), "{gated}");
    assert_eq!(sent, pending_event(&assemble(&gated)));
}

/// The awareness section as the skill renders it — before the gate that
/// `foveal context` and every prompt put after it — holds nothing of the
/// private headline and no gate marker, and the visible outline is there.
#[test]
fn the_awareness_section_holds_no_private_text_before_any_gate() {
    let (_sandbox, registry, memex) = world(&["awareness"]);
    let privacy = PrivacyTags::new(["@personal"]);
    for focus in [None, Some("launch")] {
        let request = ContextRequest {
            focus: focus.map(str::to_owned),
            explain: true,
            ..ContextRequest::default()
        };
        let section =
            foveal::context::render(&registry.snapshot(), &memex.snapshot(), &privacy, &request);
        assert!(
            matches!(section.origin, Origin::Skill { .. }),
            "{:?}",
            section.origin
        );
        let text = section.text();
        // The positive control: the visible outline, with the project's
        // visible child.
        for visible in ["Launch", "Write docs"] {
            assert!(text.contains(visible), "{visible:?} missing:\n{text}");
        }
        let lower = text.to_lowercase();
        for word in PRIVATE_WORDS {
            assert!(!lower.contains(word), "{word:?} rendered:\n{text}");
        }
        assert!(
            !text.contains("Diary") && !text.contains("@personal"),
            "{text}"
        );
        assert!(!text.contains("[REDACTED"), "{text}");
        for (id, reason) in &section.sources {
            assert_ne!(id, "diary", "{reason}");
        }
    }
}

/// The recorded history: after `foveal ask` turns in which the model
/// reads the memex through its tools (a listing that private objects
/// match, a private id) and then echoes private text it learned
/// elsewhere, the session file holds the public reply and the tools'
/// results, and nothing private — not even as a gate marker, which would
/// mean a tool's result had held private text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_file_records_the_turn_and_nothing_private() {
    // `live::workspace`: `* Health :project:@personal:` holds
    // `CANARY-91c2 private notes`, beside the visible `* Launch :project:`.
    let dir = crate::live::workspace();
    let server = Server::start(vec![
        tool_reply("query_memex", r#"{"tag": "project"}"#),
        tool_reply("read_object", r#"{"id": "health"}"#),
        text_reply("Launch is the only project."),
        text_reply("Your notes say: CANARY-91c2 private notes"),
    ])
    .await;
    let mut replies = Vec::new();
    for question in ["Which projects do I have?", "What do my notes say?"] {
        let ask = command(dir.path(), &server, &["ask", "--session", "s", question]);
        let output = run_to_end(ask).await;
        assert!(output.status.success(), "{}", stderr(&output));
        replies.push(stdout(&output));
    }
    // (The reply streams to the user's terminal as the model writes it;
    // what the host keeps of it is what this test is about.)
    assert!(
        replies[0].ends_with("Launch is the only project.\n"),
        "{}",
        replies[0]
    );
    assert_eq!(server.requests().len(), 4);
    let lines = session_lines(dir.path(), "s");
    for line in &lines {
        let text = line.to_string();
        for leaked in ["CANARY", "private notes", "@personal", "[REDACTED"] {
            assert!(!text.contains(leaked), "{leaked:?} recorded: {text}");
        }
    }
    // The positive control: the session file holds the turns — the
    // tools' results and the public reply.
    let contents: Vec<&str> = lines
        .iter()
        .map(|l| l["content"].as_str().unwrap_or(""))
        .collect();
    assert!(
        contents.contains(&"Launch is the only project."),
        "{contents:#?}"
    );
    // (`query_memex` gives each object's handle beside its id.)
    assert!(
        contents
            .iter()
            .any(|c| c.starts_with("launch ^") && c.ends_with(" | Launch :project:\n")),
        "{contents:#?}"
    );
    assert!(
        contents
            .iter()
            .any(|c| c.starts_with("error: no visible object has that id")),
        "{contents:#?}"
    );
}
