//! The request body of a chat completion: the one place it is built.
//!
//! The shape is OpenAI's `POST /chat/completions` with `stream: true` and
//! `stream_options.include_usage`. `tools` and `tool_choice` are left out
//! when no tool is offered (OpenAI refuses a `tool_choice` without
//! `tools`). An assistant message that only called tools is sent with
//! `content: ""`, not `null`: llama-cpp-python's server rejects `null`.

use serde::Serialize;
use serde_json::Value;

use super::RequestBody;
use super::error::ProviderError;
use super::types::{ChatRequest, Message, ToolChoice};

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
        stream: true,
        stream_options: WireStreamOptions {
            include_usage: true,
        },
    };
    serde_json::to_string(&wire)
        .map(RequestBody::new)
        .map_err(|e| ProviderError::InvalidRequest(e.to_string()))
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
