//! Each step of the cycle on its own, with the scripted model of the
//! agent's tests: what [`Agent::sense`] takes, what [`Agent::think`] sends
//! and hears, what [`Agent::act`] runs and records.

use std::sync::Arc;

use super::*;
use crate::session::RecordedCall;
use crate::tests::{
    Answer, ECHO, Fixture, MEMEX, ask, call, calls, fixture, fixture_with, put_file, text,
};
use crate::{Cancel, Collect};
use foveal_provider::ProviderError;

/// Senses a signal from `source`, the whole session being its history.
fn sense(f: &mut Fixture, source: SignalSource) -> Sensed {
    let end = f.agent.session().entries().len();
    f.agent.sense(source, end, None)
}

/// Thinks about the user's `message` (sent as it is: the turn's own gate
/// is skipped), on what was sensed.
async fn think(
    f: &mut Fixture,
    sensed: &mut Sensed,
    message: &str,
    out: &mut dyn Output,
) -> Result<Thought, Stop> {
    f.agent.think(sensed, Some(Arc::from(message)), out).await
}

/// Senses and thinks about the user's `message`; the model must reply.
async fn sense_and_think(f: &mut Fixture, message: &str, out: &mut Collect) -> (Sensed, Thought) {
    let mut sensed = sense(f, SignalSource::UserInput);
    match think(f, &mut sensed, message, out).await {
        Ok(thought) => (sensed, thought),
        Err(stop) => panic!("the cycle stopped: {stop:?}"),
    }
}

/// [`fixture`] with the token-economics skill loaded: the skill that
/// plans how a prompt fits its budget (without it, only the model's
/// context limit holds).
fn fixture_with_economics(answers: Vec<Answer>) -> Fixture {
    // The library cargo built beside this test (`cargo build --workspace`).
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(std::path::Path::parent).unwrap();
    let library = profile.join(format!(
        "{}foveal_skill_token_economics.{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_EXTENSION
    ));
    assert!(
        library.is_file(),
        "{} is missing: run `cargo build --workspace` before `cargo test`",
        library.display()
    );
    fixture_with(answers, |dir| {
        std::fs::create_dir_all(dir.join("plugins")).unwrap();
        std::fs::copy(
            &library,
            dir.join("plugins").join(library.file_name().unwrap()),
        )
        .unwrap();
    })
}

fn disk(f: &Fixture) -> String {
    std::fs::read_to_string(f.dir.path().join("memex/work.org")).unwrap()
}

// ---------------------------------------------------------------------
// Sense
// ---------------------------------------------------------------------

#[tokio::test]
async fn sense_takes_the_snapshots_and_the_signals_context_type_and_pattern() {
    let mut f = fixture(vec![]);
    let user = sense(&mut f, SignalSource::UserInput);
    assert_eq!(user.signal, SignalKind::USER);
    assert_eq!(user.summary.signal, "user_input");
    assert!(Arc::ptr_eq(&user.memex, &f.agent.memex().snapshot()));
    assert!(Arc::ptr_eq(&user.skills, &f.agent.registry().snapshot()));
    assert_eq!(user.summary.memex_generation, user.memex.generation());
    assert_eq!(user.summary.registry_generation, user.skills.generation());
    // seed 004: a user's message is a `tick_event` of class
    // `communication`, which acts once.
    assert_eq!(user.summary.context_type, "tick_event");
    assert_eq!(user.context_type.name, "tick_event");
    assert_eq!(user.pattern.mode.name(), "single_action");
    assert_eq!(user.summary.pattern, user.pattern);
    // A heartbeat is `tick_autonomous`, a loop; each cycle has its id.
    let heartbeat = sense(&mut f, SignalSource::Heartbeat);
    assert_eq!(heartbeat.signal, SignalKind::HEARTBEAT);
    assert_eq!(heartbeat.summary.context_type, "tick_autonomous");
    assert_eq!(heartbeat.pattern.mode.name(), "react_loop");
    assert_eq!(heartbeat.pattern.max_iterations, 5);
    assert_eq!(heartbeat.summary.id, user.summary.id + 1);
    // A tool's output continues a `tick_event`, no longer as a message.
    let output = sense(&mut f, SignalSource::ToolOutput);
    assert_eq!(output.summary.signal, "tool_output");
    assert_eq!(output.summary.context_type, "tick_event");
    assert_eq!(output.pattern.max_iterations, 5);
    // Every tool the pattern allows is offered to the prompt.
    assert_eq!(output.specs.len(), output.allowed().count());
    assert!(output.specs.iter().any(|s| s.name == "query_memex"));
}

#[tokio::test]
async fn sense_narrows_the_pattern_after_recent_errors() {
    let mut f = fixture(vec![]);
    f.agent.recent_errors = 2;
    let sensed = sense(&mut f, SignalSource::ToolOutput);
    assert_eq!(sensed.pattern.max_iterations, 2);
    assert_eq!(sensed.summary.pattern.max_iterations, 2);
}

#[tokio::test]
async fn sense_reads_the_history_before_the_turn_and_the_last_cycles_tool_results() {
    let mut f = fixture(vec![
        call("query_memex", r#"{"todo": "TODO"}"#),
        text("One task."),
    ]);
    ask(&mut f, "What is left?").await;
    let roles: Vec<EntryRole> = f.agent.session().entries().iter().map(|e| e.role).collect();
    assert_eq!(
        roles,
        [
            EntryRole::User,
            EntryRole::Assistant,
            EntryRole::Tool,
            EntryRole::Assistant
        ]
    );
    // As the second cycle of that turn saw it: the call's cycle as
    // history, its result as the tool result.
    let sensed = f.agent.sense(SignalSource::ToolOutput, 2, Some((2, 3)));
    let history: Vec<&str> = sensed.history.iter().map(|m| &*m.text).collect();
    assert_eq!(history, ["What is left?", ""]);
    assert_eq!(sensed.tool_results.len(), 1);
    assert!(sensed.tool_results[0].text.contains(" | TODO Write docs"));
    assert!(
        sensed.tool_results[0].call_bytes() > 0,
        "it answers a call id"
    );
    // A new turn's first cycle: the whole session, no tool results.
    let sensed = sense(&mut f, SignalSource::UserInput);
    assert_eq!(sensed.history.len(), 4);
    assert!(sensed.tool_results.is_empty());
}

#[tokio::test]
async fn sense_drops_a_focus_on_an_object_that_became_private() {
    let mut f = fixture(vec![]);
    f.agent.set_focus(Some("docs")).unwrap();
    sense(&mut f, SignalSource::UserInput);
    assert_eq!(f.agent.focus(), Some("docs"));
    let edited = MEMEX.replace("** TODO Write docs", "** TODO Write docs :@personal:");
    put_file(&f, "work.org", Some(&edited));
    let sensed = sense(&mut f, SignalSource::UserInput);
    assert_eq!(f.agent.focus(), None);
    assert!(Arc::ptr_eq(&sensed.memex, &f.agent.memex().snapshot()));
}

// ---------------------------------------------------------------------
// Think
// ---------------------------------------------------------------------

#[tokio::test]
async fn think_sends_only_what_passed_the_gate_and_hears_the_whole_reply() {
    let mut f = fixture(vec![text("Noted.")]);
    let mut out = Collect::default();
    let (sensed, thought) =
        sense_and_think(&mut f, &format!("Remember: {ECHO}, ok?"), &mut out).await;
    let request = format!("{:?}", thought.request);
    assert!(request.contains("Remember:"), "{request}");
    let bodies = f.model.bodies();
    assert_eq!(bodies.len(), 1);
    for sent in [&request, &bodies[0]] {
        assert!(
            !sent.contains("CANARY") && !sent.contains("blood pressure"),
            "private text left: {sent}"
        );
    }
    // The tools offered are the ones the pattern allows, in the body too.
    assert!(!thought.request.tools.is_empty());
    assert!(
        thought
            .request
            .tools
            .iter()
            .all(|d| sensed.allowed().any(|t| t.name == d.name))
    );
    assert!(bodies[0].contains("\"query_memex\""));
    // The reply, streamed, and its usage.
    assert_eq!(out.text, "Noted.");
    assert_eq!(thought.text, "Noted.");
    assert_eq!(thought.reply.text, "Noted.");
    assert!(thought.reply.tool_calls.is_empty());
    assert_eq!(sensed.summary.completion_tokens, Some(5));
    assert_eq!(
        sensed.summary.prompt_cache,
        Some(PromptCacheUse {
            reused_tokens: 0,
            new_tokens: 100
        })
    );
    assert!(sensed.summary.prompt_tokens > 0);
    // Thinking records nothing: that is acting.
    assert!(f.agent.session().entries().is_empty());
}

#[tokio::test]
async fn think_keeps_the_prompt_and_what_travels_beside_it_within_the_budget() {
    let mut f = fixture_with_economics(vec![text("ok"), text("ok")]);
    // A long conversation: more than the budget holds.
    for n in 0..40 {
        let said = format!("Message {n}: {}", "blah ".repeat(100));
        f.agent.record(Entry::user(&said, &said));
        f.agent
            .record(Entry::new(EntryRole::Assistant, format!("Reply {n}.")));
    }
    let mut out = Collect::default();
    let (wide, _) = sense_and_think(&mut f, "And now?", &mut out).await;
    let max_tokens = 3_000;
    f.agent.config.context.max_tokens = max_tokens;
    let (narrow, thought) = sense_and_think(&mut f, "And now?", &mut out).await;
    let beside = definition_bytes(&thought.request.tools);
    assert!(
        narrow.summary.prompt_tokens as usize + beside <= max_tokens as usize,
        "{} tokens of prompt and {beside} bytes beside it",
        narrow.summary.prompt_tokens
    );
    assert!(narrow.summary.prompt_tokens < wide.summary.prompt_tokens);
    // The oldest messages gave way, the newest stayed.
    let sent = &f.model.bodies()[1];
    assert!(!sent.contains("Message 0:"));
    assert!(sent.contains("Reply 39."), "{sent}");
    assert!(sent.contains("And now?"));
}

/// The arguments of an `add_journal_entry` call writing `bytes` of text.
fn journal_entry(n: usize, bytes: usize) -> String {
    let text: String = format!("Walk {n}: along the canal, slower than planned, past the locks. ")
        .chars()
        .cycle()
        .take(bytes)
        .collect();
    serde_json::json!({"title": format!("Walk {n}"), "text": text}).to_string()
}

/// The arguments of every tool call in a request body, in order.
fn sent_arguments(body: &str) -> Vec<String> {
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    let mut arguments = Vec::new();
    for message in body["messages"].as_array().unwrap() {
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            arguments.push(call["function"]["arguments"].as_str().unwrap().to_owned());
        }
    }
    arguments
}

/// Issue 29, row 3: the history's tool calls counted against the budget
/// but were never trimmed, and the cycle took them out of the budget
/// before assembling: seven turns that each wrote a 2,000-byte journal
/// entry left a budget of 1 token, and every later turn failed with "no
/// prompt could be assembled: … budget of 1 tokens (--budget)". Now they
/// are sections' text like any other: the turn after them works, and at
/// a budget their whole text does not fit, they are cut with a note (L1b)
/// and every turn of the conversation stays.
#[tokio::test]
async fn seven_long_journal_entries_then_a_turn_that_works() {
    let mut answers = Vec::new();
    for n in 0..7 {
        answers.extend([
            call("add_journal_entry", &journal_entry(n, 2000)),
            text("Written."),
        ]);
    }
    answers.extend([text("Seven walks."), text("Wide."), text("Narrow.")]);
    let mut f = fixture_with_economics(answers);
    for n in 0..7 {
        let (report, out) = ask(&mut f, &format!("Write walk {n} in my journal")).await;
        assert_eq!(report.error, None, "turn {n}");
        assert_eq!(report.stop, crate::StopReason::Replied, "turn {n}");
        assert!(out.tools[0].1.is_ok(), "turn {n}: {:?}", out.tools);
        assert_eq!(out.text, "Written.");
    }
    let journal = std::fs::read_to_string(f.dir.path().join("memex/journal.org")).unwrap();
    for n in 0..7 {
        assert!(journal.contains(&format!("Walk {n}: along")), "{journal}");
    }

    // The eighth turn works, and sees every call whole: at the default
    // budget (16,384 tokens) they fit.
    let (report, out) = ask(&mut f, "What did I write?").await;
    assert_eq!(report.error, None);
    assert_eq!(out.text, "Seven walks.");
    let sent = f.model.bodies().last().unwrap().clone();
    assert!(sent.contains("What did I write?"));
    let whole: Vec<String> = (0..7).map(|n| journal_entry(n, 2000)).collect();
    assert_eq!(sent_arguments(&sent), whole);

    // A budget too small for the calls whole: the past calls are cut with
    // a note, every turn stays, and what travels beside the prompt (the
    // tool definitions) still fits with it.
    let mut out = Collect::default();
    let (wide, thought) = sense_and_think(&mut f, "And now?", &mut out).await;
    let definitions = u32::try_from(definition_bytes(&thought.request.tools)).unwrap();
    let max_tokens = wide.summary.prompt_tokens + definitions - 1000;
    f.agent.config.context.max_tokens = max_tokens;
    let (narrow, _) = sense_and_think(&mut f, "And now?", &mut out).await;
    assert!(
        narrow.summary.prompt_tokens + definitions <= max_tokens,
        "{} + {definitions} > {max_tokens}",
        narrow.summary.prompt_tokens
    );
    let sent = f.model.bodies().last().unwrap().clone();
    let cut = sent_arguments(&sent);
    assert_eq!(cut.len(), 7, "{sent}");
    for (n, arguments) in cut.iter().enumerate() {
        // Still JSON, each long string cut with a note.
        let arguments: serde_json::Value = serde_json::from_str(arguments).unwrap();
        assert_eq!(arguments["title"], format!("Walk {n}"));
        let text = arguments["text"].as_str().unwrap();
        assert!(text.starts_with(&format!("Walk {n}: along")), "{text}");
        assert!(
            text.ends_with("… [cut: 1,800 bytes of arguments]"),
            "{text}"
        );
    }
    for n in 0..7 {
        assert!(
            sent.contains(&format!("Write walk {n} in my journal")),
            "turn {n} was dropped: {sent}"
        );
    }
    assert!(!sent.contains("earlier message"), "{sent}");
    // The session keeps them whole.
    let recorded: Vec<String> = f
        .agent
        .session()
        .entries()
        .iter()
        .flat_map(|e| e.tool_calls.iter().map(|c| c.arguments.clone()))
        .collect();
    assert_eq!(recorded, whole);
}

#[tokio::test]
async fn think_sends_nothing_when_no_prompt_fits_the_budget() {
    let mut f = fixture_with_economics(vec![text("never asked")]);
    f.agent.config.context.max_tokens = 1;
    let mut sensed = sense(&mut f, SignalSource::UserInput);
    let mut out = Collect::default();
    let stop = think(&mut f, &mut sensed, "Hello", &mut out).await;
    match stop {
        Err(Stop::Failed { error, .. }) => {
            assert!(error.starts_with("no prompt could be assembled"), "{error}");
            // It names the setting the budget came from, not a flag.
            assert!(
                error.contains("(context.max_tokens)")
                    && error.contains("raise context.max_tokens"),
                "{error}"
            );
            assert!(!error.contains("--budget"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    assert!(f.model.bodies().is_empty());
    assert!(out.text.is_empty());
}

/// A [`Collect`] that cancels the turn once text is shown.
struct CancelOnText(Collect, Arc<Cancel>);

impl Output for CancelOnText {
    fn text(&mut self, text: &str) {
        self.0.text(text);
        assert!(self.1.cancel(), "no turn was running");
    }
}

#[tokio::test]
async fn think_stops_with_the_text_so_far_when_the_turn_is_cancelled() {
    let mut f = fixture(vec![Answer::EventsThenHang(vec![Event::Text(
        "Half a th".to_owned(),
    )])]);
    let mut sensed = sense(&mut f, SignalSource::UserInput);
    f.agent.cancel.begin();
    let mut out = CancelOnText(Collect::default(), f.agent.canceller());
    let stop = think(&mut f, &mut sensed, "Tell me a story", &mut out).await;
    f.agent.cancel.end();
    match stop {
        Err(Stop::Cancelled { text, .. }) => assert_eq!(text, "Half a th"),
        other => panic!("{other:?}"),
    }
    assert_eq!(out.0.text, "Half a th");
    assert!(f.agent.session().entries().is_empty());
}

#[tokio::test]
async fn think_fails_on_a_provider_error_keeping_a_clean_partial_reply() {
    let mut f = fixture(vec![
        Answer::EventsThenFail(
            vec![Event::Text("Half a th".to_owned())],
            ProviderError::Aborted,
        ),
        Answer::EventsThenFail(
            vec![Event::Text(format!("You said {ECHO}"))],
            ProviderError::Aborted,
        ),
    ]);
    let mut out = Collect::default();
    for _ in 0..2 {
        let mut sensed = sense(&mut f, SignalSource::UserInput);
        match think(&mut f, &mut sensed, "Tell me a story", &mut out).await {
            Err(Stop::Failed { error, .. }) => {
                assert!(error.starts_with("the model failed: "), "{error}");
            }
            other => panic!("{other:?}"),
        }
    }
    let kept: Vec<&str> = f
        .agent
        .session()
        .entries()
        .iter()
        .map(|e| e.content.as_str())
        .collect();
    assert_eq!(kept, ["Half a th", WITHHELD]);
}

// ---------------------------------------------------------------------
// Act
// ---------------------------------------------------------------------

#[tokio::test]
async fn act_runs_a_tool_call_and_records_the_call_and_its_result() {
    let mut f = fixture(vec![call("query_memex", r#"{"todo": "TODO"}"#)]);
    let mut out = Collect::default();
    let (sensed, thought) = sense_and_think(&mut f, "What is left?", &mut out).await;
    let id = sensed.summary.id;
    let outcome = f.agent.act(sensed, thought, &mut out).await;
    assert_eq!(outcome.summary.tool_calls, ["query_memex"]);
    assert!(!outcome.terminal);
    assert!(outcome.summary.error.is_none());
    // The assistant's call, then its result answering the call's id.
    let entries = f.agent.session().entries();
    let roles: Vec<EntryRole> = entries.iter().map(|e| e.role).collect();
    assert_eq!(roles, [EntryRole::Assistant, EntryRole::Tool]);
    assert_eq!(
        entries[0].tool_calls,
        [RecordedCall {
            id: "call_0".to_owned(),
            name: "query_memex".to_owned(),
            arguments: r#"{"todo": "TODO"}"#.to_owned(),
        }]
    );
    assert_eq!(outcome.history_end, 1, "the results come after it");
    assert_eq!(entries[1].tool_call_id.as_deref(), Some("call_0"));
    assert_eq!(entries[1].tool.as_deref(), Some("query_memex"));
    assert!(entries[1].content.contains(" | TODO Write docs"));
    assert!(entries.iter().all(|e| e.cycle == Some(id)));
    assert_eq!(out.tools.len(), 1);
    assert_eq!(out.tools[0].1.as_deref(), Ok(entries[1].content.as_str()));
    assert_eq!(f.agent.recent_errors, 0);
    assert_eq!(
        f.agent.status().lock().unwrap().last_cycle,
        Some(outcome.summary)
    );
}

#[tokio::test]
async fn act_runs_only_the_first_call_when_the_pattern_allows_one_action() {
    let two = [
        ("set_todo", r#"{"id": "docs", "state": "DONE"}"#),
        ("set_todo", r#"{"id": "launch", "state": "DONE"}"#),
    ];
    let mut f = fixture(vec![calls(&two)]);
    let mut out = Collect::default();
    let (sensed, thought) = sense_and_think(&mut f, "finish everything", &mut out).await;
    assert_eq!(sensed.pattern.mode.name(), "single_action");
    let outcome = f.agent.act(sensed, thought, &mut out).await;
    assert_eq!(outcome.summary.tool_calls, ["set_todo", "set_todo"]);
    assert!(out.tools[0].1.is_ok());
    let second = out.tools[1].1.as_ref().unwrap_err();
    assert!(second.starts_with("not run: this cycle allows one action"));
    let work = disk(&f);
    assert!(work.contains("** DONE Write docs"));
    assert!(work.contains("* Launch :project:"), "the second call ran");
    // Each call is answered, the one not run as an error, which counts.
    let tools: Vec<&str> = f
        .agent
        .session()
        .entries()
        .iter()
        .filter(|e| e.role == EntryRole::Tool)
        .map(|e| e.content.as_str())
        .collect();
    assert_eq!(tools.len(), 2);
    assert!(tools[1].starts_with("error: not run"));
    assert_eq!(f.agent.recent_errors, 1);
}

#[tokio::test]
async fn act_runs_every_call_when_the_pattern_allows_several() {
    let two = [
        ("read_object", r#"{"id": "docs"}"#),
        ("read_object", r#"{"id": "launch"}"#),
    ];
    let mut f = fixture(vec![calls(&two)]);
    let mut out = Collect::default();
    let mut sensed = sense(&mut f, SignalSource::UserInput);
    sensed.pattern.mode = foveal_prompt::execution::ExecutionMode::ReactLoop;
    sensed.pattern.multi_tool_enabled = true;
    let thought = think(&mut f, &mut sensed, "read both", &mut out)
        .await
        .unwrap();
    f.agent.act(sensed, thought, &mut out).await;
    let results: Vec<&str> = out
        .tools
        .iter()
        .map(|(_, r)| r.as_deref().unwrap())
        .collect();
    assert_eq!(results.len(), 2);
    assert!(results[0].contains("Write docs"), "{}", results[0]);
    assert!(results[1].contains("Ship it."), "{}", results[1]);
    assert_eq!(f.agent.recent_errors, 0);
}

#[tokio::test]
async fn act_refuses_a_tool_the_pattern_did_not_offer() {
    let mut f = fixture(vec![calls(&[
        ("set_todo", r#"{"id": "docs", "state": "DONE"}"#),
        ("launch_rockets", "{}"),
    ])]);
    let mut out = Collect::default();
    let mut sensed = sense(&mut f, SignalSource::UserInput);
    sensed.pattern.allowed_categories = Some(vec![ToolCategory::Read]);
    sensed.pattern.mode = foveal_prompt::execution::ExecutionMode::ReactLoop;
    sensed.pattern.multi_tool_enabled = true;
    let thought = think(&mut f, &mut sensed, "finish docs", &mut out)
        .await
        .unwrap();
    assert!(thought.request.tools.iter().all(|d| d.name != "set_todo"));
    f.agent.act(sensed, thought, &mut out).await;
    let errors: Vec<&str> = out
        .tools
        .iter()
        .map(|(_, r)| r.as_ref().unwrap_err().as_str())
        .collect();
    assert_eq!(errors.len(), 2);
    assert!(
        errors[0].contains("no tool named \"set_todo\""),
        "{}",
        errors[0]
    );
    assert!(errors[1].contains("no tool named \"launch_rockets\""));
    assert!(
        disk(&f).contains("** TODO Write docs"),
        "a refused tool ran"
    );
    assert_eq!(f.agent.recent_errors, 1);
}

#[tokio::test]
async fn act_ends_the_loop_on_a_terminal_tool_when_the_pattern_says_so() {
    let mut f = fixture(vec![call("noop", "{}"), call("noop", "{}")]);
    let mut out = Collect::default();
    let (sensed, thought) = sense_and_think(&mut f, "anything?", &mut out).await;
    assert!(sensed.pattern.terminal_ends_loop);
    assert!(f.agent.act(sensed, thought, &mut out).await.terminal);
    let mut sensed = sense(&mut f, SignalSource::UserInput);
    sensed.pattern.terminal_ends_loop = false;
    let thought = think(&mut f, &mut sensed, "anything?", &mut out)
        .await
        .unwrap();
    let outcome = f.agent.act(sensed, thought, &mut out).await;
    assert!(!outcome.terminal);
    assert_eq!(outcome.summary.tool_calls, ["noop"]);
}

/// Every file of the fixture's memex, with its bytes.
fn memex_files(f: &Fixture) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(f.dir.path().join("memex"))
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

/// F4 of the privacy review: a write tool whose arguments held private
/// text was withheld from the history but still ran, copying the text
/// into a visible headline, after which nothing redacted it.
#[tokio::test]
async fn act_refuses_a_write_tool_given_private_text_and_writes_nothing() {
    // The Health body, in another case, and a secret.
    let private = "canary-7F3A9 Blood Pressure notes";
    let secret = "my key is AKIAIOSFODNN7EXAMPLE";
    let json = |value: serde_json::Value| value.to_string();
    // Each write, with private text and with public text.
    let cases = [
        (
            "add_headline",
            json(serde_json::json!({"parent_id": "launch", "title": private})),
            json(serde_json::json!({"parent_id": "launch", "title": "Record a demo"})),
        ),
        (
            "add_headline",
            json(serde_json::json!({"parent_id": "launch", "title": "Notes", "body": private})),
            json(
                serde_json::json!({"parent_id": "launch", "title": "Notes", "body": "Five minutes."}),
            ),
        ),
        (
            "add_headline",
            json(serde_json::json!({"parent_id": "launch", "title": secret})),
            json(serde_json::json!({"parent_id": "launch", "title": "Keys rotated"})),
        ),
        (
            "add_journal_entry",
            json(serde_json::json!({"title": private})),
            json(serde_json::json!({"title": "Planned the demo"})),
        ),
        (
            "add_journal_entry",
            json(serde_json::json!({"title": "Checkup", "text": private})),
            json(serde_json::json!({"title": "Checkup", "text": "It went well."})),
        ),
        (
            "set_todo",
            json(serde_json::json!({"id": "docs", "state": private})),
            json(serde_json::json!({"id": "docs", "state": "NEXT"})),
        ),
    ];
    let mut answers = Vec::new();
    for (name, args, _) in &cases {
        answers.extend([call(name, args), text("ok")]);
    }
    for (name, _, args) in &cases {
        answers.extend([call(name, args), text("ok")]);
    }
    let mut f = fixture(answers);
    let before = memex_files(&f);
    for (name, args, _) in &cases {
        let (_, out) = ask(&mut f, "Write that down").await;
        assert_eq!(
            out.tools,
            [(
                (*name).to_owned(),
                Err(foveal_registry::egress::WRITE_REFUSED.to_owned())
            )],
            "{name} {args}"
        );
        assert_eq!(memex_files(&f), before, "{name} {args} wrote");
    }
    // The same calls with public text write.
    for (name, _, args) in &cases {
        let files = memex_files(&f);
        let (_, out) = ask(&mut f, "Write that down").await;
        assert!(out.tools[0].1.is_ok(), "{name} {args}: {:?}", out.tools);
        assert_ne!(memex_files(&f), files, "{name} {args} wrote nothing");
    }
    let work = disk(&f);
    assert!(work.contains("** Record a demo\n"), "{work}");
    assert!(work.contains("** NEXT Write docs\n"), "{work}");
    let journal = std::fs::read_to_string(f.dir.path().join("memex/journal.org")).unwrap();
    assert!(journal.contains(" Planned the demo\n"), "{journal}");
    assert!(journal.contains("It went well."), "{journal}");
}

/// Review of privacy v3: each text of a write was checked alone, so a
/// private run cut between a headline's title and its body passed, and
/// once written side by side every run of it was visible text.
#[tokio::test]
async fn act_refuses_a_write_whose_title_and_body_together_quote_private_text() {
    // The Health body, `CANARY-7f3a9 blood pressure notes`, cut in two:
    // each half alone is no quote.
    let split = serde_json::json!(
        {"parent_id": "launch", "title": "canary-7F3A9 Blood", "body": "Pressure notes"}
    )
    .to_string();
    let public = serde_json::json!(
        {"parent_id": "launch", "title": "canary-7F3A9 Blood", "body": "Tests passed."}
    )
    .to_string();
    let mut f = fixture(vec![
        call("add_headline", &split),
        text("ok"),
        call("add_headline", &public),
        text("ok"),
    ]);
    let before = memex_files(&f);
    let (_, out) = ask(&mut f, "Write that down").await;
    assert_eq!(
        out.tools,
        [(
            "add_headline".to_owned(),
            Err(foveal_registry::egress::WRITE_REFUSED.to_owned())
        )]
    );
    assert_eq!(memex_files(&f), before, "a refused write wrote");
    // The same title with a public body is written: the positive control.
    let (_, out) = ask(&mut f, "Write that down").await;
    assert!(out.tools[0].1.is_ok(), "{:?}", out.tools);
    let work = disk(&f);
    assert!(work.contains("** canary-7F3A9 Blood\n"), "{work}");
    assert!(work.contains("Tests passed."), "{work}");
}

/// Review of privacy v3: a skill's tool had its arguments checked only
/// when it declared itself a write or dangerous tool, and a category is
/// the skill's word, not what the tool does.
#[tokio::test]
async fn a_skill_tool_is_refused_private_text_whatever_category_it_declares() {
    let f = fixture(vec![]);
    let snapshot = f.agent.memex().snapshot();
    let private = serde_json::json!({"text": "canary-7F3A9 blood pressure notes"});
    let split = serde_json::json!({"a": "canary-7F3A9 blood", "b": "pressure notes"});
    let public = serde_json::json!({"text": "blood tests passed"});
    for category in ToolCategory::ALL {
        let tool = Tool {
            name: "keep".to_owned(),
            description: "Keeps a text.".to_owned(),
            parameters: serde_json::json!({"type": "object"}),
            category,
            source: ToolSource::Skill("notes".to_owned()),
        };
        let check = |args: &serde_json::Value| {
            tools::check_arguments(&tool, args, &f.agent.gate, &snapshot)
        };
        for args in [&private, &split] {
            assert_eq!(
                check(args),
                Err(ToolError::Failed(
                    foveal_registry::egress::WRITE_REFUSED.to_owned()
                )),
                "{category} {args}"
            );
        }
        assert_eq!(check(&public), Ok(()), "{category}");
    }
}
