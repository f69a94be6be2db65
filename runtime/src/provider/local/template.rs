//! The chat template: SmolLM2's ChatML, applied by foveal, with tools.
//!
//! Each message is one turn:
//!
//! ```text
//! <|im_start|>system
//! You are foveal.<|im_end|>
//! <|im_start|>user
//! What is due today?<|im_end|>
//! <|im_start|>assistant
//! ```
//!
//! as SmolLM2's own template writes it (with its default system message
//! when the conversation does not start with one). That template ignores
//! tools, so foveal adds them itself, in the format of Hermes and Qwen
//! models:
//!
//! - **Tools offered** (unless `tool_choice` is `none`) are described at
//!   the end of the first system message, one JSON object a line between
//!   `<tools>` and `</tools>`, with how to call them: a
//!   `<tool_call>{"name": …, "arguments": {…}}</tool_call>` block per call.
//! - **`tool_choice`**: `required` and a named tool are also *forced*: the
//!   assistant's turn is started for the model with `<tool_call>` and the
//!   `{"name": "` (or, for a named tool, `{"name": "<tool>", "arguments":`; no trailing space, which
//!   would be a token of its own)
//!   that must follow, so the reply cannot be anything but a call.
//! - **Earlier tool calls** of the assistant are written back as such
//!   blocks after its text.
//! - **Tool results** become a user turn of `<tool_response>` blocks, one
//!   per result, in order; consecutive results share one turn.

use serde_json::Value;

use super::tokenizer::Piece;
use crate::provider::types::{ChatRequest, Message, ToolChoice};

/// Starts a turn.
pub(crate) const IM_START: &str = "<|im_start|>";
/// Ends a turn; the model writes it when its reply is complete.
pub(crate) const IM_END: &str = "<|im_end|>";
/// Opens a tool call in the model's reply.
pub(crate) const TOOL_CALL_OPEN: &str = "<tool_call>";
/// Closes a tool call.
pub(crate) const TOOL_CALL_CLOSE: &str = "</tool_call>";

/// The system message SmolLM2's template uses when a conversation has
/// none.
pub(crate) const DEFAULT_SYSTEM: &str =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/// A rendered prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rendered {
    /// The prompt, ending with the start of the assistant's turn (and
    /// the prefill).
    pub(crate) pieces: Vec<Piece>,
    /// The start of the reply written for the model (see the module's
    /// `tool_choice`); part of `pieces`, and read as part of the reply.
    pub(crate) prefill: String,
}

impl Rendered {
    /// The prompt as text, special tokens included.
    pub(crate) fn text(&self) -> String {
        self.pieces
            .iter()
            .map(|piece| match piece {
                Piece::Special(name) => name,
                Piece::Text(text) => text.as_str(),
            })
            .collect()
    }
}

/// Pieces, with adjacent text joined: the tokenizer must see text between
/// two special tokens as one string, as the reference template's does.
#[derive(Default)]
struct Builder(Vec<Piece>);

impl Builder {
    fn special(&mut self, name: &'static str) {
        self.0.push(Piece::Special(name));
    }

    fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        match self.0.last_mut() {
            Some(Piece::Text(last)) => last.push_str(text),
            _ => self.0.push(Piece::Text(text.to_owned())),
        }
    }

    fn turn(&mut self, role: &str, content: &str) {
        self.special(IM_START);
        self.text(role);
        self.text("\n");
        self.text(content);
        self.special(IM_END);
        self.text("\n");
    }
}

/// Renders `request` for the model.
pub(crate) fn render(request: &ChatRequest) -> Rendered {
    let offer_tools = !request.tools.is_empty() && request.tool_choice != ToolChoice::None;
    let mut b = Builder::default();
    let mut messages = request.messages.iter().peekable();

    let first_system = match messages.peek() {
        Some(Message::System(content)) => {
            messages.next();
            content.as_str()
        }
        _ => DEFAULT_SYSTEM,
    };
    if offer_tools {
        b.turn(
            "system",
            &format!("{first_system}{}", tools_section(request)),
        );
    } else {
        b.turn("system", first_system);
    }

    while let Some(message) = messages.next() {
        match message {
            Message::System(content) => b.turn("system", content),
            Message::User(content) => b.turn("user", content),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut text = content.clone();
                for call in tool_calls {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&tool_call_block(&call.name, &call.arguments));
                }
                b.turn("assistant", &text);
            }
            Message::Tool { content, .. } => {
                let mut text = tool_response_block(content);
                while let Some(Message::Tool { content, .. }) = messages.peek() {
                    text.push('\n');
                    text.push_str(&tool_response_block(content));
                    messages.next();
                }
                b.turn("user", &text);
            }
        }
    }

    let prefill = if offer_tools {
        match &request.tool_choice {
            ToolChoice::Tool(name) => format!(
                "{TOOL_CALL_OPEN}\n{{\"name\": {}, \"arguments\":",
                json_string(name)
            ),
            ToolChoice::Required => format!("{TOOL_CALL_OPEN}\n{{\"name\": \""),
            ToolChoice::Auto | ToolChoice::None => String::new(),
        }
    } else {
        String::new()
    };
    b.special(IM_START);
    b.text("assistant\n");
    b.text(&prefill);
    Rendered {
        pieces: b.0,
        prefill,
    }
}

/// What the system message says about the tools.
fn tools_section(request: &ChatRequest) -> String {
    let mut s = String::from(
        "\n\n# Tools\n\nYou may call one or more tools. Each line between <tools> and </tools> is one tool: its name, what it does and the JSON schema of its arguments.\n<tools>\n",
    );
    for tool in &request.tools {
        s.push_str(&format!(
            "{{\"name\": {}, \"description\": {}, \"parameters\": {}}}\n",
            json_string(&tool.name),
            json_string(&tool.description),
            tool.parameters
        ));
    }
    s.push_str("</tools>\n\nTo call a tool, write one block like this for each call:\n");
    s.push_str(TOOL_CALL_OPEN);
    s.push_str("\n{\"name\": \"<the tool's name>\", \"arguments\": {<its arguments as JSON>}}\n");
    s.push_str(TOOL_CALL_CLOSE);
    match &request.tool_choice {
        ToolChoice::Required => s.push_str("\nCall at least one tool now."),
        ToolChoice::Tool(name) => s.push_str(&format!("\nCall the tool `{name}` now.")),
        ToolChoice::Auto | ToolChoice::None => {}
    }
    s
}

/// An earlier call, as the model would have written it. Arguments that
/// are not JSON are quoted as a JSON string, so the block stays JSON.
pub(crate) fn tool_call_block(name: &str, arguments: &str) -> String {
    let arguments = if arguments.trim().is_empty() {
        "{}".to_owned()
    } else {
        match serde_json::from_str::<Value>(arguments) {
            Ok(value) => value.to_string(),
            Err(_) => json_string(arguments),
        }
    };
    format!(
        "{TOOL_CALL_OPEN}\n{{\"name\": {}, \"arguments\": {arguments}}}\n{TOOL_CALL_CLOSE}",
        json_string(name)
    )
}

fn tool_response_block(content: &str) -> String {
    format!("<tool_response>\n{content}\n</tool_response>")
}

fn json_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}
