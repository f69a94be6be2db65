//! The OpenAI-compatible provider against a scripted server on 127.0.0.1
//! ([`server`]): streams, tool-call fragments, retries, cut streams,
//! timeouts, the request body and the API key.

mod server;

use std::time::Duration;

use serde_json::json;
use server::{End, Scripted, Server, sse_events};

use super::*;

const KEY: &str = "sk-test-0123456789abcdefSECRET";

/// Settings for the scripted server: a model, a key, fast retries.
fn settings(server: &Server) -> ProviderSettings {
    let mut settings = ProviderSettings::openai_compatible(server.base_url());
    settings.model = Some("test-model".to_owned());
    settings.api_key = Some(ApiKey::new(KEY));
    settings.retry.base_delay = Duration::from_millis(10);
    settings.retry.max_delay = Duration::from_millis(40);
    settings.timeouts = Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(10),
        idle: Duration::from_secs(10),
        request: Duration::from_secs(60),
    };
    settings
}

fn provider(server: &Server) -> OpenAiProvider {
    OpenAiProvider::new(&settings(server)).unwrap()
}

fn hello() -> ChatRequest {
    ChatRequest::new(vec![
        Message::system("You are foveal."),
        Message::user("Say hello"),
    ])
}

fn text_chunk(text: &str) -> serde_json::Value {
    json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
}

fn finish_chunk(reason: &str) -> serde_json::Value {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn call_start(index: usize, id: &str, name: &str) -> serde_json::Value {
    json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}}]})
}

fn call_args(index: usize, fragment: &str) -> serde_json::Value {
    json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}}]})
}

/// Asserts that nothing a user or a log could see holds the key.
fn assert_no_key(text: &str) {
    assert!(!text.contains(KEY), "the API key leaked: {text}");
    assert!(
        !text.contains("SECRET"),
        "part of the API key leaked: {text}"
    );
}

#[tokio::test]
async fn a_plain_text_stream_arrives_as_text_events_and_collects_with_usage() {
    let server = Server::start(vec![Scripted::sse(sse_events(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
        text_chunk("Hel"),
        text_chunk("lo, "),
        text_chunk("world."),
        finish_chunk("stop"),
        json!({"choices": [], "usage": {"prompt_tokens": 21, "completion_tokens": 4, "total_tokens": 25, "prompt_tokens_details": {"cached_tokens": 16}}}),
    ]))])
    .await;
    let mut stream = provider(&server).stream(&hello());
    let mut texts = Vec::new();
    while let Some(event) = stream.next().await {
        if let Event::Text(text) = event.unwrap() {
            texts.push(text);
        }
    }
    assert_eq!(texts, ["Hel", "lo, ", "world."]);
    let reply = stream.collect().await.unwrap();
    assert_eq!(reply.text, "Hello, world.");
    assert!(reply.tool_calls.is_empty());
    assert_eq!(reply.finish_reason, Some(FinishReason::Stop));
    assert_eq!(
        reply.usage,
        Some(Usage {
            prompt_tokens: 21,
            completion_tokens: 4,
            cached_tokens: 16
        })
    );
    assert_eq!(reply.attempts, 1);
}

#[tokio::test]
async fn tool_call_arguments_split_over_many_chunks_are_joined_and_parsed() {
    let arguments = r#"{"tag": "project", "todo": "NEXT", "note": "caf\u00e9 \"quoted\""}"#;
    let mut chunks = vec![call_start(0, "call_abc", "query_memex")];
    // Three bytes at a time, cutting through keys, escapes and strings.
    chunks.extend(
        arguments
            .as_bytes()
            .chunks(3)
            .map(|piece| call_args(0, std::str::from_utf8(piece).unwrap())),
    );
    chunks.push(finish_chunk("tool_calls"));
    // The events themselves are also split across network pieces.
    let body: Vec<u8> = sse_events(&chunks).concat();
    let pieces = body.chunks(7).map(<[u8]>::to_vec).collect();
    let server = Server::start(vec![Scripted::sse(pieces)]).await;

    let mut stream = provider(&server).stream(&hello());
    let mut fragments = 0;
    while let Some(event) = stream.next().await {
        if let Event::ToolCallArguments { index: 0, .. } = event.unwrap() {
            fragments += 1;
        }
    }
    assert!(fragments > 10, "{fragments} argument events");
    let reply = stream.collect().await.unwrap();
    assert_eq!(reply.finish_reason, Some(FinishReason::ToolCalls));
    let [call] = &reply.tool_calls[..] else {
        panic!("one call expected: {:?}", reply.tool_calls);
    };
    assert_eq!(
        (call.id.as_str(), call.name.as_str()),
        ("call_abc", "query_memex")
    );
    assert_eq!(call.raw_arguments, arguments);
    assert_eq!(
        call.arguments,
        Ok(json!({"tag": "project", "todo": "NEXT", "note": "caf\u{e9} \"quoted\""}))
    );
}

#[tokio::test]
async fn two_parallel_tool_calls_are_told_apart_by_index() {
    let server = Server::start(vec![Scripted::sse(sse_events(&[
        call_start(0, "call_a", "set_todo"),
        call_args(0, "{\"id\": \"h1\", "),
        call_start(1, "call_b", "add_journal_entry"),
        call_args(1, "{\"text\": \"met "),
        call_args(0, "\"state\": \"DONE\"}"),
        call_args(1, "Ann\"}"),
        finish_chunk("tool_calls"),
    ]))])
    .await;
    let reply = provider(&server).stream(&hello()).collect().await.unwrap();
    let calls: Vec<_> = reply
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.clone().unwrap()))
        .collect();
    assert_eq!(
        calls,
        [
            ("call_a", "set_todo", json!({"id": "h1", "state": "DONE"})),
            ("call_b", "add_journal_entry", json!({"text": "met Ann"})),
        ]
    );
    // Sent back in the history, the calls keep their ids and arguments.
    let Message::Assistant {
        content,
        tool_calls,
    } = reply.to_message()
    else {
        panic!("not an assistant message");
    };
    assert_eq!((content.as_str(), tool_calls.len()), ("", 2));
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_once_the_wait_is_over() {
    let server = Server::start(vec![
        Scripted::status(
            429,
            r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#,
        )
        .header("Retry-After", "1"),
        Scripted::sse(sse_events(&[text_chunk("ok"), finish_chunk("stop")])),
    ])
    .await;
    let started = tokio::time::Instant::now();
    let reply = provider(&server).stream(&hello()).collect().await.unwrap();
    assert_eq!(reply.text, "ok");
    assert_eq!(reply.attempts, 2);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let waited = requests[1].at - requests[0].at;
    assert!(waited >= Duration::from_secs(1), "retried after {waited:?}");
    assert!(started.elapsed() >= Duration::from_secs(1));
    // The retry sends the same body.
    assert_eq!(requests[0].body, requests[1].body);
}

#[tokio::test]
async fn repeated_500s_end_in_an_error_after_the_bounded_retries() {
    let failing = || Scripted::status(500, r#"{"error":{"message":"llama_decode failed"}}"#);
    let server = Server::start(vec![failing(), failing(), failing(), failing()]).await;
    let error = provider(&server)
        .stream(&hello())
        .collect()
        .await
        .unwrap_err();
    assert_eq!(server.requests().len(), 3, "1 request + max_retries (2)");
    assert!(
        matches!(
            error,
            ProviderError::Http {
                status: 500,
                attempts: 3,
                ..
            }
        ),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains("answered HTTP 500 (3 attempt(s)): llama_decode failed; the server failed"),
        "{text}"
    );
    assert!(error.is_transient());
}

#[tokio::test]
async fn a_4xx_is_not_retried_and_shows_the_servers_message() {
    let server = Server::start(vec![Scripted::status(
        400,
        r#"{"error":{"message":"'messages' must contain at least one user message","type":"invalid_request_error"}}"#,
    )])
    .await;
    let error = provider(&server)
        .stream(&hello())
        .collect()
        .await
        .unwrap_err();
    assert_eq!(server.requests().len(), 1);
    assert_eq!(
        error.to_string(),
        format!(
            "the model server at {}/chat/completions answered HTTP 400 (1 attempt(s)): 'messages' must contain at least one user message",
            server.base_url()
        )
    );
    assert!(!error.is_transient());
}

#[tokio::test]
async fn an_exhausted_quota_is_not_retried_and_a_long_retry_after_is_not_waited_for() {
    let server = Server::start(vec![Scripted::status(
        429,
        r#"{"error":{"message":"You exceeded your current quota","code":"insufficient_quota"}}"#,
    )])
    .await;
    let error = provider(&server)
        .stream(&hello())
        .collect()
        .await
        .unwrap_err();
    assert_eq!(server.requests().len(), 1);
    assert!(
        error
            .to_string()
            .contains("You exceeded your current quota"),
        "{error}"
    );

    let server = Server::start(vec![
        Scripted::status(503, r#"{"error":"loading model"}"#).header("Retry-After", "3600"),
    ])
    .await;
    let started = tokio::time::Instant::now();
    let error = provider(&server)
        .stream(&hello())
        .collect()
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(server.requests().len(), 1);
    assert!(
        error.to_string().contains(
            "answered HTTP 503 and asks to retry in 3600 s, longer than foveal waits (60 s): loading model"
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_stream_cut_in_the_middle_of_a_tool_call_is_a_clear_error() {
    let mut pieces = sse_events(&[
        text_chunk("Let me look."),
        call_start(0, "call_1", "query_memex"),
        call_args(0, "{\"tag\": \"pro"),
    ]);
    pieces.pop(); // no [DONE]
    let server = Server::start(vec![Scripted::sse(pieces).ending(End::Cut)]).await;
    let mut stream = provider(&server).stream(&hello());
    let mut seen = Vec::new();
    let error = loop {
        match stream.next().await {
            Some(Ok(event)) => seen.push(event),
            Some(Err(error)) => break error,
            None => panic!("the cut stream ended without an error: {seen:?}"),
        }
    };
    assert_eq!(seen[0], Event::Text("Let me look.".into()));
    let text = error.to_string();
    assert!(matches!(error, ProviderError::Cut { .. }), "{error:?}");
    assert!(
        text.contains(
            "was cut in the middle of the tool call `query_memex` (12 bytes of arguments received)"
        ),
        "{text}"
    );
    // Content had been handed on: no retry, whatever max_retries says.
    assert_eq!(server.requests().len(), 1);
    // `collect` after the error still reports it, not a partial reply.
    assert_eq!(stream.collect().await.unwrap_err(), error);
}

#[tokio::test]
async fn a_stream_that_closes_without_done_or_a_finish_reason_is_cut() {
    let mut pieces = sse_events(&[
        call_start(0, "call_1", "set_todo"),
        call_args(0, "{\"state\": "),
    ]);
    pieces.pop();
    let server = Server::start(vec![Scripted::sse(pieces)]).await;
    let error = provider(&server)
        .stream(&hello())
        .collect()
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains(
            "was cut in the middle of the tool call `set_todo` (10 bytes of arguments received): the connection closed without `data: [DONE]` or a finish reason"
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_reply_with_a_finish_reason_but_no_done_is_complete() {
    let mut pieces = sse_events(&[text_chunk("ok"), finish_chunk("length")]);
    pieces.pop();
    let server = Server::start(vec![Scripted::sse(pieces)]).await;
    let reply = provider(&server).stream(&hello()).collect().await.unwrap();
    assert_eq!(reply.finish_reason, Some(FinishReason::Length));
}

#[tokio::test]
async fn a_server_that_is_down_is_unreachable_after_the_retries() {
    // A port that was just free: nothing listens there.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut settings = ProviderSettings::openai_compatible(format!("http://127.0.0.1:{port}/v1"));
    settings.model = Some("m".into());
    settings.api_key = Some(ApiKey::new(KEY));
    settings.retry.base_delay = Duration::from_millis(5);
    let provider = OpenAiProvider::new(&settings).unwrap();
    let error = provider.stream(&hello()).collect().await.unwrap_err();
    assert!(
        matches!(error, ProviderError::Unreachable { attempts: 3, .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot reach the model server at http://127.0.0.1:{port}/v1/chat/completions (3 attempt(s)): "
        )),
        "{text}"
    );
    assert!(text.contains("Is it running?"), "{text}");
    assert_no_key(&text);
}

#[tokio::test]
async fn keep_alive_comments_are_not_progress_and_every_request_has_a_deadline() {
    // Comments only, after a first piece of text: the idle timeout runs.
    let pieces = vec![format!("data: {}\n\n", text_chunk("thinking")).into_bytes()];
    let server = Server::start(vec![
        Scripted::sse(pieces.clone()).ending(End::Trickle {
            every_ms: 50,
            content: false,
        }),
        Scripted::sse(pieces).ending(End::Trickle {
            every_ms: 50,
            content: true,
        }),
    ])
    .await;
    let mut settings = settings(&server);
    settings.timeouts.idle = Duration::from_millis(400);
    settings.timeouts.request = Duration::from_millis(1500);
    let provider = OpenAiProvider::new(&settings).unwrap();
    let started = std::time::Instant::now();
    let error = provider.stream(&hello()).collect().await.unwrap_err();
    assert!(
        matches!(
            error,
            ProviderError::Timeout {
                phase: TimeoutPhase::Idle,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "{:?}",
        started.elapsed()
    );
    // Text that never ends: the request's own deadline ends it.
    let started = std::time::Instant::now();
    let error = provider.stream(&hello()).collect().await.unwrap_err();
    assert!(
        matches!(
            error,
            ProviderError::Timeout {
                phase: TimeoutPhase::Request,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("raise `request_timeout_ms`"),
        "{error}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_stream_that_stalls_ends_with_the_idle_timeout() {
    let pieces = vec![format!("data: {}\n\n", text_chunk("thinking")).into_bytes()];
    let server = Server::start(vec![Scripted::sse(pieces).ending(End::Stall)]).await;
    let mut settings = settings(&server);
    settings.timeouts.idle = Duration::from_millis(300);
    let provider = OpenAiProvider::new(&settings).unwrap();
    let error = provider.stream(&hello()).collect().await.unwrap_err();
    assert!(
        matches!(
            error,
            ProviderError::Timeout {
                phase: TimeoutPhase::Idle,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains(
            "did not send the next piece of its reply within 300 ms (1 attempt(s)); raise `idle_timeout_ms`"
        ),
        "{error}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_server_that_never_starts_its_reply_hits_the_first_byte_timeout() {
    let server = Server::start(vec![Scripted::sse(Vec::new()).ending(End::Stall)]).await;
    let mut settings = settings(&server);
    settings.timeouts.first_byte = Duration::from_millis(300);
    let provider = OpenAiProvider::new(&settings).unwrap();
    let error = provider.stream(&hello()).collect().await.unwrap_err();
    assert!(
        matches!(
            error,
            ProviderError::Timeout {
                phase: TimeoutPhase::FirstByte,
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_chunk_that_is_not_json_is_a_clear_error() {
    let pieces = vec![
        format!("data: {}\n\n", text_chunk("a")).into_bytes(),
        b"data: <html>Bad gateway</html>\n\n".to_vec(),
    ];
    let server = Server::start(vec![Scripted::sse(pieces)]).await;
    let error = provider(&server)
        .stream(&hello())
        .collect()
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("sent a chunk that is not a chat-completion chunk (expected value at line 1 column 1): \"<html>Bad gateway</html>\""),
        "{text}"
    );
}

#[tokio::test]
async fn an_error_object_inside_the_stream_is_the_servers_error() {
    let pieces = sse_events(&[
        text_chunk("a"),
        json!({"error": {"message": "The server had an error while processing your request."}}),
    ]);
    let server = Server::start(vec![Scripted::sse(pieces)]).await;
    let error = provider(&server)
        .stream(&hello())
        .collect()
        .await
        .unwrap_err();
    assert!(
        error.to_string().ends_with(
            "reported an error in its reply stream: The server had an error while processing your request."
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_whole_json_reply_is_read_when_the_server_does_not_stream() {
    let completion = json!({
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "noop", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1}
    });
    let server = Server::start(vec![Scripted {
        status: 200,
        headers: vec![(
            "Content-Type".into(),
            "application/json; charset=utf-8".into(),
        )],
        pieces: vec![completion.to_string().into_bytes()],
        end: End::Complete,
    }])
    .await;
    let reply = provider(&server).stream(&hello()).collect().await.unwrap();
    assert_eq!(reply.tool_calls[0].name, "noop");
    assert_eq!(reply.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(reply.usage.unwrap().prompt_tokens, 5);
}

#[tokio::test]
async fn a_json_reply_past_its_cap_is_too_large_not_a_bad_endpoint() {
    // 17 MiB of one JSON body, in 1 MiB pieces.
    let piece = vec![b' '; 1 << 20];
    let server = Server::start(vec![Scripted {
        status: 200,
        headers: vec![("Content-Type".into(), "application/json".into())],
        pieces: std::iter::repeat_n(piece, 17).collect(),
        end: End::Complete,
    }])
    .await;
    let error = provider(&server)
        .stream(&hello())
        .collect()
        .await
        .unwrap_err();
    assert!(
        matches!(error, ProviderError::TooLarge { what: "a JSON reply", limit, .. } if limit == 16 << 20),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains("max_reply_tokens") && !text.contains("base_url"),
        "{text}"
    );
}

#[tokio::test]
async fn the_request_body_carries_messages_tools_choice_and_stream_options() {
    let server = Server::start(vec![Scripted::sse(sse_events(&[finish_chunk("stop")]))]).await;
    let request = ChatRequest {
        model: None,
        messages: vec![
            Message::system("You are foveal."),
            Message::user("Mark h1 done."),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![AssistantToolCall {
                    id: "call_1".into(),
                    name: "set_todo".into(),
                    arguments: "{\"id\":\"h1\",\"state\":\"DONE\"}".into(),
                }],
            },
            Message::tool_result("call_1", "ok"),
        ],
        tools: vec![ToolDefinition {
            name: "set_todo".into(),
            description: "Sets a headline's TODO state.".into(),
            parameters: json!({"type": "object", "properties": {"id": {"type": "string"}, "state": {"type": "string"}}, "required": ["id", "state"]}),
        }],
        tool_choice: ToolChoice::Tool("set_todo".into()),
        max_tokens: Some(256),
        temperature: None,
        seed: None,
    };
    provider(&server).stream(&request).collect().await.unwrap();
    let [recorded] = &server.requests()[..] else {
        panic!("one request expected");
    };
    assert_eq!(recorded.request_line, "POST /v1/chat/completions HTTP/1.1");
    assert_eq!(recorded.header("content-type"), Some("application/json"));
    assert_eq!(recorded.header("accept"), Some("text/event-stream"));
    assert_eq!(
        recorded.json(),
        json!({
            "model": "test-model",
            "messages": [
                {"role": "system", "content": "You are foveal."},
                {"role": "user", "content": "Mark h1 done."},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "set_todo", "arguments": "{\"id\":\"h1\",\"state\":\"DONE\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "set_todo",
                "description": "Sets a headline's TODO state.",
                "parameters": {"type": "object", "properties": {"id": {"type": "string"}, "state": {"type": "string"}}, "required": ["id", "state"]},
            }}],
            "tool_choice": {"type": "function", "function": {"name": "set_todo"}},
            "max_tokens": 256,
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
    // Not `null`: llama-cpp-python's server rejects that.
    assert!(
        recorded.body.contains(r#""content":"","tool_calls""#),
        "{}",
        recorded.body
    );
}

#[test]
fn a_request_without_tools_sends_neither_tools_nor_tool_choice() {
    let mut settings = ProviderSettings::openai_compatible("http://127.0.0.1:9/v1");
    settings.model = Some("m".into());
    let provider = OpenAiProvider::new(&settings).unwrap();
    let mut request = hello();
    request.tool_choice = ToolChoice::Required;
    let body: serde_json::Value =
        serde_json::from_str(provider.body(&request).unwrap().as_str()).unwrap();
    assert!(
        body.get("tools").is_none() && body.get("tool_choice").is_none(),
        "{body}"
    );
    assert!(body.get("max_tokens").is_none(), "{body}");

    request.model = Some("other".into());
    request.tools.push(ToolDefinition {
        name: "noop".into(),
        description: "Does nothing.".into(),
        parameters: json!({"type": "object"}),
    });
    let body: serde_json::Value =
        serde_json::from_str(provider.body(&request).unwrap().as_str()).unwrap();
    assert_eq!(
        (body["model"].as_str(), body["tool_choice"].as_str()),
        (Some("other"), Some("required"))
    );

    request.tool_choice = ToolChoice::Tool("query_memex".into());
    assert_eq!(
        provider.body(&request).unwrap_err().to_string(),
        "invalid chat request: tool_choice names the tool `query_memex`, which is not among the tools offered"
    );
    settings.model = None;
    let provider = OpenAiProvider::new(&settings).unwrap();
    assert_eq!(provider.body(&hello()).unwrap_err(), ProviderError::NoModel);
}

#[tokio::test]
async fn the_api_key_is_sent_as_a_bearer_token_and_never_shown() {
    // A server that quotes the key back in its error, as some do.
    let server = Server::start(vec![Scripted::status(
        401,
        &format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}","code":"invalid_api_key"}}}}"#),
    )])
    .await;
    let provider = provider(&server);
    let error = provider.stream(&hello()).collect().await.unwrap_err();
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let text = error.to_string();
    assert!(text.contains("Incorrect API key provided: ***"), "{text}");
    assert!(text.contains("check the API key"), "{text}");
    assert_no_key(&text);
    assert_no_key(&format!("{error:?}"));
    assert_no_key(&format!("{provider:?} {provider:#?}"));
    assert_no_key(&format!("{:?}", settings(&server)));
    assert_no_key(&provider.describe());

    // Every other error too.
    let server = Server::start(vec![
        Scripted::status(500, &format!(r#"{{"error":"{KEY}"}}"#)),
        Scripted::status(500, &format!("<p>{KEY}</p>")),
        Scripted::status(500, "{}"),
    ])
    .await;
    let error = OpenAiProvider::new(&settings(&server))
        .unwrap()
        .stream(&hello())
        .collect()
        .await
        .unwrap_err();
    assert_no_key(&format!("{error} {error:?}"));
    let server = Server::start(vec![Scripted::sse(vec![
        format!("data: {{{KEY}\n\n").into_bytes(),
    ])])
    .await;
    let error = OpenAiProvider::new(&settings(&server))
        .unwrap()
        .stream(&hello())
        .collect()
        .await
        .unwrap_err();
    assert!(matches!(error, ProviderError::BadChunk { .. }), "{error:?}");
    assert_no_key(&format!("{error} {error:?}"));
}

#[tokio::test]
async fn a_key_that_cannot_be_a_header_is_refused_without_being_shown() {
    let mut settings = ProviderSettings::openai_compatible("http://127.0.0.1:9/v1");
    settings.api_key = Some(ApiKey::new(format!("{KEY}\nX-Injected: 1")));
    let error = OpenAiProvider::new(&settings).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the API key in $OPENAI_API_KEY cannot be sent: it holds a line break, a control character or non-ASCII text; set the variable to the key alone"
    );
}

#[tokio::test]
async fn dropping_the_stream_stops_the_request() {
    let server = Server::start(vec![
        Scripted::sse(vec![format!("data: {}\n\n", text_chunk("a")).into_bytes()])
            .ending(End::Stall),
    ])
    .await;
    let mut stream = provider(&server).stream(&hello());
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        Event::Text("a".into())
    );
    let task = stream.abort_handle().unwrap();
    assert!(!task.is_finished(), "the task waits for the stalled server");
    drop(stream);
    for _ in 0..100 {
        if task.is_finished() {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(task.is_finished(), "dropping the stream ends its task");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn sending_outside_a_runtime_is_an_error_not_a_panic() {
    let mut settings = ProviderSettings::openai_compatible("http://127.0.0.1:9/v1");
    settings.model = Some("m".into());
    let provider = OpenAiProvider::new(&settings).unwrap();
    let stream = provider.stream(&hello());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(
        runtime.block_on(stream.collect()).unwrap_err(),
        ProviderError::NoRuntime
    );
}

#[test]
fn a_bad_base_url_is_refused_with_what_to_do() {
    let error =
        OpenAiProvider::new(&ProviderSettings::openai_compatible("localhost:8080/v1")).unwrap_err();
    assert!(
        error.to_string().starts_with("the provider's base URL localhost:8080/v1 is not usable: the scheme must be http or https"),
        "{error}"
    );
}
