//! What goes to a model and what comes back: the [`ChatRequest`], the
//! [`Event`]s of a streamed reply and the collected [`Reply`].

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The host's instructions (the assembled prompt).
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// The result of a tool the model called.
    Tool,
}

impl Role {
    /// The name the chat-completions API uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One message of the conversation sent to the model.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Instructions from the host.
    System(String),
    /// What the user said.
    User(String),
    /// An earlier reply of the model: its text and the tools it called.
    Assistant {
        /// The text (may be empty when the model only called tools).
        content: String,
        /// The tools it called, in order.
        tool_calls: Vec<AssistantToolCall>,
    },
    /// The result of one tool call, answering the call with that id.
    Tool {
        /// The [`AssistantToolCall::id`] this answers.
        tool_call_id: String,
        /// What the tool returned (or its error), as text.
        content: String,
    },
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::System(content.into())
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::User(content.into())
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::Assistant {
            content: content.into(),
            tool_calls: Vec::new(),
        }
    }

    /// The result of the tool call `tool_call_id`.
    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }

    /// Who wrote it.
    pub fn role(&self) -> Role {
        match self {
            Self::System(_) => Role::System,
            Self::User(_) => Role::User,
            Self::Assistant { .. } => Role::Assistant,
            Self::Tool { .. } => Role::Tool,
        }
    }
}

/// A tool call as it is sent back to the model in the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssistantToolCall {
    /// The id the model gave the call; the tool's result names it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments exactly as the model wrote them (JSON text).
    pub arguments: String,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    /// Its name, as the model will call it.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON schema of its arguments (an `object` schema).
    pub parameters: Value,
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (`"auto"`).
    #[default]
    Auto,
    /// No tool (`"none"`).
    None,
    /// At least one tool (`"required"`).
    Required,
    /// This tool (`{"type": "function", "function": {"name": …}}`).
    Tool(String),
}

/// One request for a chat completion.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest {
    /// The model; `None` takes the provider's configured model.
    pub model: Option<String>,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// The tools offered; none means `tools` and `tool_choice` are not sent.
    pub tools: Vec<ToolDefinition>,
    /// Whether and which tool to call.
    pub tool_choice: ToolChoice,
    /// The most tokens the reply may have.
    pub max_tokens: Option<u32>,
    /// The sampling temperature; `None` takes the provider's default (the
    /// server's, or greedy decoding for the local model), `0` is greedy.
    pub temperature: Option<f32>,
    /// The seed of the sampler, for replies that repeat (`None`: the
    /// provider's default).
    pub seed: Option<u64>,
}

impl ChatRequest {
    /// A request with these messages, no tools and the configured model.
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// It finished its reply (`stop`).
    Stop,
    /// It hit `max_tokens` or its context (`length`): the reply is cut.
    Length,
    /// It called tools (`tool_calls`, or the older `function_call`).
    ToolCalls,
    /// The server's content filter stopped it (`content_filter`).
    ContentFilter,
    /// Another reason, as the server named it.
    Other(String),
}

impl FinishReason {
    /// Reads the API's name for it.
    pub fn parse(name: &str) -> Self {
        match name {
            "stop" | "eos" => Self::Stop,
            "length" => Self::Length,
            "tool_calls" | "function_call" => Self::ToolCalls,
            "content_filter" => Self::ContentFilter,
            other => Self::Other(other.to_owned()),
        }
    }
}

/// Tokens a request took, as the server counted them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Tokens of the reply.
    pub completion_tokens: u64,
    /// Prompt tokens the server served from its prompt cache (0 when it
    /// does not say).
    pub cached_tokens: u64,
}

/// One step of a streamed reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// More text of the reply.
    Text(String),
    /// The model starts calling a tool. `index` orders parallel calls.
    ToolCallStart {
        /// The call's position among the reply's tool calls.
        index: usize,
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// More of a tool call's arguments (a piece of JSON text).
    ToolCallArguments {
        /// The call's position, as in [`Event::ToolCallStart`].
        index: usize,
        /// The next piece of the arguments.
        fragment: String,
    },
    /// The model stopped.
    Finish(FinishReason),
    /// The server's token counts (usually the last event).
    Usage(Usage),
}

/// Arguments the model wrote that are not a JSON value. Hand this back to
/// the model as the tool's error rather than failing the cycle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the arguments are not valid JSON: {message}")]
pub struct InvalidArguments {
    /// What the JSON parser said.
    pub message: String,
}

/// A complete tool call of a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The id the model gave the call.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments exactly as the model wrote them.
    pub raw_arguments: String,
    /// The arguments parsed; empty arguments read as `{}`.
    pub arguments: Result<Value, InvalidArguments>,
}

/// A whole reply, collected from its events.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The text.
    pub text: String,
    /// The tool calls, in the model's order.
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped, when the server said.
    pub finish_reason: Option<FinishReason>,
    /// Token counts, when the server sent them.
    pub usage: Option<Usage>,
    /// HTTP requests it took: 1 plus the retries.
    pub attempts: u32,
    /// The reply was cut at the host's byte limit
    /// ([`ReplyStream::limit`](super::ReplyStream::limit)): the server sent
    /// more than a reply of `max_reply_tokens` can hold.
    pub truncated: bool,
}

impl Reply {
    /// The reply as an assistant message for the conversation history.
    pub fn to_message(&self) -> Message {
        Message::Assistant {
            content: self.text.clone(),
            tool_calls: self
                .tool_calls
                .iter()
                .map(|call| AssistantToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.raw_arguments.clone(),
                })
                .collect(),
        }
    }
}

/// Builds a [`Reply`] from the events of a stream.
#[derive(Debug, Default)]
pub(crate) struct Collector {
    text: String,
    calls: BTreeMap<usize, (String, String, String)>,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
    truncated: bool,
}

impl Collector {
    /// The bytes of text and tool-call arguments collected so far.
    pub(crate) fn bytes(&self) -> usize {
        self.text.len()
            + self
                .calls
                .values()
                .map(|(id, name, args)| id.len() + name.len() + args.len())
                .sum::<usize>()
    }

    /// The reply was cut at its byte limit.
    pub(crate) fn truncate(&mut self) {
        self.truncated = true;
        self.finish_reason = Some(FinishReason::Length);
    }

    pub(crate) fn push(&mut self, event: &Event) {
        match event {
            Event::Text(text) => self.text.push_str(text),
            Event::ToolCallStart { index, id, name } => {
                let call = self.calls.entry(*index).or_default();
                call.0.clone_from(id);
                call.1.clone_from(name);
            }
            Event::ToolCallArguments { index, fragment } => {
                self.calls.entry(*index).or_default().2.push_str(fragment);
            }
            Event::Finish(reason) => self.finish_reason = Some(reason.clone()),
            Event::Usage(usage) => self.usage = Some(*usage),
        }
    }

    pub(crate) fn reply(self, attempts: u32) -> Reply {
        Reply {
            text: self.text,
            tool_calls: self
                .calls
                .into_values()
                .map(|(id, name, raw_arguments)| ToolCall {
                    arguments: parse_arguments(&raw_arguments),
                    id,
                    name,
                    raw_arguments,
                })
                .collect(),
            finish_reason: self.finish_reason,
            usage: self.usage,
            attempts,
            truncated: self.truncated,
        }
    }
}

fn parse_arguments(raw: &str) -> Result<Value, InvalidArguments> {
    if raw.trim().is_empty() {
        // Servers send no arguments at all for a tool without parameters.
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_str(raw).map_err(|e| InvalidArguments {
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collected_reply_joins_text_and_orders_tool_calls_by_index() {
        let mut collector = Collector::default();
        for event in [
            Event::Text("Hel".into()),
            Event::ToolCallStart {
                index: 1,
                id: "b".into(),
                name: "noop".into(),
            },
            Event::ToolCallStart {
                index: 0,
                id: "a".into(),
                name: "set_todo".into(),
            },
            Event::ToolCallArguments {
                index: 0,
                fragment: "{\"state\":".into(),
            },
            Event::Text("lo".into()),
            Event::ToolCallArguments {
                index: 0,
                fragment: "\"DONE\"}".into(),
            },
            Event::Finish(FinishReason::ToolCalls),
        ] {
            collector.push(&event);
        }
        let reply = collector.reply(1);
        assert_eq!(reply.text, "Hello");
        assert_eq!(reply.tool_calls.len(), 2);
        assert_eq!(reply.tool_calls[0].name, "set_todo");
        assert_eq!(
            reply.tool_calls[0].arguments,
            Ok(serde_json::json!({"state": "DONE"}))
        );
        assert_eq!(reply.tool_calls[1].arguments, Ok(serde_json::json!({})));
        assert_eq!(reply.finish_reason, Some(FinishReason::ToolCalls));
        let Message::Assistant { tool_calls, .. } = reply.to_message() else {
            panic!("not an assistant message");
        };
        assert_eq!(tool_calls[0].arguments, "{\"state\":\"DONE\"}");
    }

    #[test]
    fn arguments_that_are_not_json_are_kept_with_the_parser_message() {
        let mut collector = Collector::default();
        collector.push(&Event::ToolCallStart {
            index: 0,
            id: "a".into(),
            name: "noop".into(),
        });
        collector.push(&Event::ToolCallArguments {
            index: 0,
            fragment: "{\"x\": ".into(),
        });
        let call = &collector.reply(1).tool_calls[0];
        assert_eq!(call.raw_arguments, "{\"x\": ");
        let error = call.arguments.as_ref().unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("the arguments are not valid JSON: EOF"),
            "{error}"
        );
    }
}
