//! The request body of a chat completion: the one place it is built.
//!
//! The shape is OpenAI's `POST /chat/completions` with `stream: true` and
//! `stream_options.include_usage`. `tools` and `tool_choice` are left out
//! when no tool is offered (OpenAI refuses a `tool_choice` without
//! `tools`). An assistant message that only called tools is sent with
//! `content: ""`, not `null`: llama-cpp-python's server rejects `null`.
//!
//! [`parse`] reads such a body back into a [`ChatRequest`]: a provider that
//! runs in the process (the local model) receives the body exactly as the
//! last door let it through, and works from that text.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::RequestBody;
use super::error::ProviderError;
use super::types::{AssistantToolCall, ChatRequest, Message, ToolChoice, ToolDefinition};

/// The body for `request`; `default_model` when the request names none.
pub(crate) fn build(
    request: &ChatRequest,
    default_model: Option<&str>,
) -> Result<RequestBody, ProviderError> {
    let model = request
        .model
        .as_deref()
        .or(default_model)
        .filter(|m| !m.trim().is_empty())
        .ok_or(ProviderError::NoModel)?;
    if request.messages.is_empty() {
        return Err(ProviderError::InvalidRequest(
            "it has no messages".to_owned(),
        ));
    }
    let tool_choice = if request.tools.is_empty() {
        None
    } else {
        Some(match &request.tool_choice {
            ToolChoice::Auto => WireToolChoice::Mode("auto"),
            ToolChoice::None => WireToolChoice::Mode("none"),
            ToolChoice::Required => WireToolChoice::Mode("required"),
            ToolChoice::Tool(name) => {
                if !request.tools.iter().any(|t| t.name == *name) {
                    return Err(ProviderError::InvalidRequest(format!(
                        "tool_choice names the tool `{name}`, which is not among the tools offered"
                    )));
                }
                WireToolChoice::Tool {
                    kind: "function",
                    function: WireName { name },
                }
            }
        })
    };
    let wire = WireRequest {
        model,
        messages: request.messages.iter().map(WireMessage::from).collect(),
        tools: request
            .tools
            .iter()
            .map(|t| WireTool {
                kind: "function",
                function: WireFunction {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.parameters,
                },
            })
            .collect(),
        tool_choice,
        max_tokens: request.max_tokens,
        temperature: request.temperature,
        seed: request.seed,
        stream: true,
        stream_options: WireStreamOptions {
            include_usage: true,
        },
    };
    serde_json::to_string(&wire)
        .map(RequestBody::new)
        .map_err(|e| ProviderError::InvalidRequest(e.to_string()))
}

/// The request a body built by [`build`] carries (after the last door,
/// which keeps the JSON valid but may have changed any text in it).
pub fn parse(body: &str) -> Result<ChatRequest, ProviderError> {
    let invalid = |message: String| ProviderError::InvalidRequest(message);
    let wire: ParsedRequest = serde_json::from_str(body).map_err(|e| {
        invalid(format!(
            "the request body is not a chat-completions request: {e}"
        ))
    })?;
    let tool_choice = match wire.tool_choice {
        None => ToolChoice::Auto,
        Some(Value::String(mode)) => match mode.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            other => return Err(invalid(format!("unknown tool_choice {other:?}"))),
        },
        Some(other) => match other.pointer("/function/name").and_then(Value::as_str) {
            Some(name) => ToolChoice::Tool(name.to_owned()),
            None => return Err(invalid(format!("unknown tool_choice {other}"))),
        },
    };
    Ok(ChatRequest {
        model: wire.model,
        messages: wire
            .messages
            .into_iter()
            .map(|message| match message {
                ParsedMessage::System { content } => Message::System(content),
                ParsedMessage::User { content } => Message::User(content),
                ParsedMessage::Assistant {
                    content,
                    tool_calls,
                } => Message::Assistant {
                    content: content.unwrap_or_default(),
                    tool_calls: tool_calls
                        .into_iter()
                        .map(|call| AssistantToolCall {
                            id: call.id,
                            name: call.function.name,
                            arguments: call.function.arguments,
                        })
                        .collect(),
                },
                ParsedMessage::Tool {
                    tool_call_id,
                    content,
                } => Message::Tool {
                    tool_call_id,
                    content,
                },
            })
            .collect(),
        tools: wire
            .tools
            .into_iter()
            .map(|tool| ToolDefinition {
                name: tool.function.name,
                description: tool.function.description,
                parameters: tool.function.parameters,
            })
            .collect(),
        tool_choice,
        max_tokens: wire.max_tokens,
        temperature: wire.temperature,
        seed: wire.seed,
    })
}

#[derive(Deserialize)]
struct ParsedRequest {
    model: Option<String>,
    messages: Vec<ParsedMessage>,
    #[serde(default)]
    tools: Vec<ParsedTool>,
    tool_choice: Option<Value>,
    max_tokens: Option<u32>,
    temperature: Option<f32>,
    seed: Option<u64>,
}

#[derive(Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum ParsedMessage {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        #[serde(default)]
        content: Option<String>,
        #[serde(default)]
        tool_calls: Vec<ParsedCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

#[derive(Deserialize)]
struct ParsedCall {
    id: String,
    function: ParsedCallFunction,
}

#[derive(Deserialize)]
struct ParsedCallFunction {
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize)]
struct ParsedTool {
    function: ParsedFunction,
}

#[derive(Deserialize)]
struct ParsedFunction {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    parameters: Value,
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    stream: bool,
    stream_options: WireStreamOptions,
}

#[derive(Serialize)]
struct WireStreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        /// Never `null`, even with tool calls (llama-cpp-python).
        content: &'a str,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

impl<'a> From<&'a Message> for WireMessage<'a> {
    fn from(message: &'a Message) -> Self {
        match message {
            Message::System(content) => Self::System { content },
            Message::User(content) => Self::User { content },
            Message::Assistant {
                content,
                tool_calls,
            } => Self::Assistant {
                content,
                tool_calls: tool_calls
                    .iter()
                    .map(|call| WireCall {
                        id: &call.id,
                        kind: "function",
                        function: WireCallFunction {
                            name: &call.name,
                            // Some servers refuse empty arguments.
                            arguments: if call.arguments.trim().is_empty() {
                                "{}"
                            } else {
                                &call.arguments
                            },
                        },
                    })
                    .collect(),
            },
            Message::Tool {
                tool_call_id,
                content,
            } => Self::Tool {
                tool_call_id,
                content,
            },
        }
    }
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireCallFunction<'a>,
}

#[derive(Serialize)]
struct WireCallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireToolChoice<'a> {
    Mode(&'static str),
    Tool {
        #[serde(rename = "type")]
        kind: &'static str,
        function: WireName<'a>,
    },
}

#[derive(Serialize)]
struct WireName<'a> {
    name: &'a str,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_parsed_body_gives_back_the_request_it_was_built_from() {
        let request = ChatRequest {
            model: Some("m".into()),
            messages: vec![
                Message::system("sys"),
                Message::user("hi"),
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![AssistantToolCall {
                        id: "call_0".into(),
                        name: "query".into(),
                        arguments: "{\"tag\":\"work\"}".into(),
                    }],
                },
                Message::tool_result("call_0", "3 headlines"),
            ],
            tools: vec![ToolDefinition {
                name: "query".into(),
                description: "Finds headlines.".into(),
                parameters: json!({"type": "object", "properties": {"tag": {"type": "string"}}}),
            }],
            tool_choice: ToolChoice::Tool("query".into()),
            max_tokens: Some(64),
            temperature: Some(0.5),
            seed: Some(7),
        };
        let body = build(&request, None).unwrap();
        assert_eq!(parse(body.as_str()).unwrap(), request);
        for choice in [ToolChoice::Auto, ToolChoice::None, ToolChoice::Required] {
            let request = ChatRequest {
                tool_choice: choice,
                ..request.clone()
            };
            let body = build(&request, None).unwrap();
            assert_eq!(parse(body.as_str()).unwrap(), request);
        }
    }

    #[test]
    fn a_body_that_is_not_a_request_is_an_invalid_request() {
        let error = parse("{\"messages\": 3}").unwrap_err();
        assert!(
            matches!(&error, ProviderError::InvalidRequest(m) if m.starts_with("the request body is not a chat-completions request")),
            "{error}"
        );
    }
}
