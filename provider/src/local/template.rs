//! The chat template: the model's own, read from the GGUF file
//! (`tokenizer.chat_template`) and rendered with minijinja the way Hugging
//! Face's `apply_chat_template` renders it ([`super::jinja`]).
//!
//! **What the template gets**: `messages` (`role` and `content`; an
//! assistant's `tool_calls` as `{"id", "type": "function", "function":
//! {"name", "arguments"}}` with the arguments as a JSON object — or as the
//! text written when it is not JSON; a `tool` message's `tool_call_id` and
//! the `name` of the tool it answers), `tools` (the OpenAI tool list,
//! `{"type": "function", "function": {"name", "description",
//! "parameters"}}`, or none), `add_generation_prompt = true`, `bos_token`,
//! `eos_token`, `unk_token` and `pad_token` (the texts of the tokens the
//! GGUF names).
//!
//! **Tools.** Tool calls are always in the format of Hermes and Qwen
//! models: a `<tool_call>{"name": …, "arguments": {…}}</tool_call>` block
//! per call, results in `<tool_response>` blocks. When loading, foveal
//! renders a probe conversation with one tool: a template that writes the
//! tool and speaks of `<tool_call>` (Qwen2.5, Qwen3, Hermes) gets `tools`
//! and the conversation as they are ([`ToolFormat::Template`]). Any other
//! (SmolLM2's ignores tools) gets them from foveal
//! ([`ToolFormat::SystemMessage`]):
//!
//! - **Tools offered** (unless `tool_choice` is `none`) are described at
//!   the end of the first system message, one JSON object a line between
//!   `<tools>` and `</tools>`, with how to call them. Without a system
//!   message, one is added: the template's own default system message
//!   (found by rendering a conversation with and without a system message
//!   when loading; SmolLM2's is "You are a helpful AI assistant named
//!   SmolLM, trained by Hugging Face") followed by the tools.
//! - **Earlier tool calls** of the assistant are written back as
//!   `<tool_call>` blocks after its text.
//! - **Tool results** become a user message of `<tool_response>` blocks,
//!   one per result, in order; consecutive results share one message.
//!
//! **`tool_choice`**: `required` and a named tool are also *forced*: the
//! assistant's turn is started for the model with `<tool_call>` and the
//! `{"name": "` (or, for a named tool, `{"name": "<tool>", "arguments":`;
//! no trailing space, which would be a token of its own) that must follow,
//! so the reply cannot be anything but a call. With tools described by
//! foveal, the system message also says to call (the tool).
//!
//! **Special tokens.** The rendered text is split at the texts of the
//! GGUF's special tokens (token types CONTROL and USER_DEFINED), which
//! become those tokens ([`Piece::Special`]). A *message* never yields a
//! control token: before rendering, a control token's text inside a
//! message, tool call or tool description is broken up by an invisible
//! mark (U+FDD0, removed again after splitting), so a message that contains
//! `<|im_end|>` cannot end its turn. User-defined tokens (Qwen's
//! `<tool_call>`, `<think>`) are matched in messages too, as llama.cpp and
//! Hugging Face's tokenizers do.
//!
//! **No template.** A GGUF without `tokenizer.chat_template` whose
//! vocabulary has ChatML's `<|im_start|>` and `<|im_end|>` control tokens
//! is rendered with plain ChatML ([`CHATML`], no default system message);
//! any other is refused, naming the file. A template with a syntax error,
//! or that fails on a one-message conversation, is refused when loading;
//! one that fails on a request's conversation (`raise_exception`) fails
//! that request. The errors name the file and the template's line.
//!
//! **Thinking.** When the vocabulary has `<think>` and `</think>` (Qwen3),
//! the reply's `<think>…</think>` blocks are dropped from its text (see
//! [`super::toolcall`]): a reply's text is its answer.

use std::fmt;
use std::fs::File;
use std::path::Path;

use candle_core::quantized::gguf_file;
use minijinja::{Environment, Value as Jinja, context};
use serde_json::Value;

use super::jinja::{self, RAISED, json_to_value};
use super::tokenizer::Piece;
use crate::ProviderError;
use crate::types::{ChatRequest, Message, ToolChoice};

/// Opens a tool call in the model's reply.
pub(crate) const TOOL_CALL_OPEN: &str = "<tool_call>";
/// Closes a tool call.
pub(crate) const TOOL_CALL_CLOSE: &str = "</tool_call>";
/// Opens a reasoning block (Qwen3).
pub(crate) const THINK_OPEN: &str = "<think>";
/// Closes a reasoning block.
pub(crate) const THINK_CLOSE: &str = "</think>";

/// The GGUF key of the chat template.
pub const TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// The template used for a ChatML model whose GGUF has none: each message
/// as a turn, then the assistant's.
pub const CHATML: &str = "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/// The name of the template in its environment.
const NAME: &str = "chat_template";

/// GGUF's token types of special tokens.
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;

/// Breaks up a control token's text inside a message (see the module's
/// documentation); a mark that was in the message is doubled.
const MARK: char = '\u{FDD0}';

/// The name of the tool in the probe conversation.
const PROBE_TOOL: &str = "foveal_probe_tool_5f3a";
/// The system message of the probe conversation.
const PROBE_SYSTEM: &str = "foveal_probe_system_5f3a";

/// Where the template came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateSource {
    /// `tokenizer.chat_template` in the GGUF file, of this many bytes.
    Gguf {
        /// The template's length in bytes.
        bytes: usize,
    },
    /// The GGUF has none, but its vocabulary is ChatML's: [`CHATML`].
    ChatMl,
}

impl fmt::Display for TemplateSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Gguf { bytes } => write!(f, "from the GGUF ({TEMPLATE_KEY}, {bytes} bytes)"),
            Self::ChatMl => write!(
                f,
                "ChatML built into foveal (the GGUF has no {TEMPLATE_KEY}; its vocabulary has <|im_start|> and <|im_end|>)"
            ),
        }
    }
}

/// Who writes the tools into the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// The template: it gets `tools`, tool calls and `tool` messages.
    Template,
    /// foveal, in the first system message; calls and results as text.
    SystemMessage,
}

/// A rendered prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rendered {
    /// The prompt, ending with the start of the assistant's turn (and
    /// the prefill).
    pub(crate) pieces: Vec<Piece>,
    /// The start of the reply written for the model (see the module's
    /// `tool_choice`); part of `pieces`, and read as part of the reply.
    pub(crate) prefill: String,
    /// Whether `<think>` blocks are dropped from the reply.
    pub(crate) strip_think: bool,
    /// Whether the prompt opened a `<think>` block the reply continues.
    pub(crate) in_think: bool,
}

impl Rendered {
    /// The prompt as text, special tokens included.
    pub(crate) fn text(&self) -> String {
        self.pieces
            .iter()
            .map(|piece| match piece {
                Piece::Special(name) => name.as_str(),
                Piece::Text(text) => text.as_str(),
            })
            .collect()
    }
}

/// The special tokens' texts, for splitting rendered text.
#[derive(Debug, Default)]
struct Specials {
    /// Special tokens' texts (of two characters or more), longest first.
    texts: Vec<String>,
    /// Whether each is a control token.
    control: Vec<bool>,
    /// For each first byte, the indexes into `texts` that start with it.
    by_first: Vec<Vec<usize>>,
}

impl Specials {
    fn new(mut tokens: Vec<(String, bool)>) -> Self {
        // One character cannot be broken up in a message: such tokens
        // (none in known models) stay text.
        tokens.retain(|(text, _)| text.chars().nth(1).is_some());
        tokens.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        tokens.dedup_by(|a, b| a.0 == b.0);
        let mut by_first = vec![Vec::new(); 256];
        for (i, (text, _)) in tokens.iter().enumerate() {
            by_first[usize::from(text.as_bytes()[0])].push(i);
        }
        let (texts, control) = tokens.into_iter().unzip();
        Self {
            texts,
            control,
            by_first,
        }
    }

    fn contains(&self, text: &str) -> bool {
        self.texts.iter().any(|t| t == text)
    }

    /// The longest special token at `at` in `bytes`.
    fn at(&self, bytes: &[u8], at: usize, control_only: bool) -> Option<usize> {
        self.by_first[usize::from(bytes[at])]
            .iter()
            .copied()
            .find(|&i| {
                (!control_only || self.control[i])
                    && bytes[at..].starts_with(self.texts[i].as_bytes())
            })
    }

    /// `text` with every control token's text in it broken up by a mark
    /// (after the first character of each occurrence, overlapping ones
    /// included), and every mark already in it doubled.
    fn defuse(&self, text: &str) -> String {
        let bytes = text.as_bytes();
        let mut breaks = Vec::new();
        for at in 0..bytes.len() {
            for &i in &self.by_first[usize::from(bytes[at])] {
                if self.control[i] && bytes[at..].starts_with(self.texts[i].as_bytes()) {
                    let first = self.texts[i].chars().next().map_or(1, char::len_utf8);
                    breaks.push(at + first);
                }
            }
        }
        if breaks.is_empty() && !text.contains(MARK) {
            return text.to_owned();
        }
        breaks.sort_unstable();
        breaks.dedup();
        let mut out = String::with_capacity(text.len() + 3 * breaks.len());
        let mut next = breaks.iter().peekable();
        for (at, c) in text.char_indices() {
            if next.next_if(|&&b| b == at).is_some() {
                out.push(MARK);
            }
            if c == MARK {
                out.push(MARK);
            }
            out.push(c);
        }
        out
    }

    /// Splits rendered text into special tokens and text, appending to
    /// `pieces`.
    fn split_into(&self, text: &str, pieces: &mut Vec<Piece>) {
        let bytes = text.as_bytes();
        let (mut start, mut at) = (0, 0);
        while at < bytes.len() {
            match self.at(bytes, at, false) {
                Some(i) => {
                    push_text(pieces, &text[start..at]);
                    pieces.push(Piece::Special(self.texts[i].clone()));
                    at += self.texts[i].len();
                    start = at;
                }
                None => at += 1,
            }
        }
        push_text(pieces, &text[start..]);
    }
}

/// Appends text to the pieces (joined with text before it: the tokenizer
/// must see text between two special tokens as one string), with the
/// marks of [`Specials::defuse`] removed.
fn push_text(pieces: &mut Vec<Piece>, text: &str) {
    if text.is_empty() {
        return;
    }
    let mut restored = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != MARK {
            restored.push(c);
        } else if let Some(next) = chars.clone().next().filter(|&n| n == MARK) {
            restored.push(next);
            chars.next();
        }
    }
    if restored.is_empty() {
        return;
    }
    match pieces.last_mut() {
        Some(Piece::Text(last)) => last.push_str(&restored),
        _ => pieces.push(Piece::Text(restored)),
    }
}

/// A model's chat template, ready to render requests.
pub struct ChatTemplate {
    env: Environment<'static>,
    /// The template's text, to quote the line of an error.
    text: String,
    source: TemplateSource,
    /// The model file, for errors.
    path: String,
    tools: ToolFormat,
    /// The system message the template writes when a conversation has
    /// none (with [`ToolFormat::SystemMessage`] only).
    default_system: Option<String>,
    specials: Specials,
    /// Whether the vocabulary has `<think>` and `</think>`.
    think: bool,
}

impl fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("path", &self.path)
            .field("source", &self.source)
            .field("tools", &self.tools)
            .field("default_system", &self.default_system)
            .field("specials", &self.specials.texts.len())
            .field("think", &self.think)
            .finish_non_exhaustive()
    }
}

impl ChatTemplate {
    /// Reads the template of the GGUF file at `path` (its metadata only).
    pub fn from_file(path: &Path) -> Result<Self, ProviderError> {
        let load_error = |message: String| ProviderError::ModelLoad {
            path: path.display().to_string(),
            message,
        };
        let mut file = File::open(path).map_err(|e| load_error(e.to_string()))?;
        let content = gguf_file::Content::read(&mut file)
            .map_err(|e| load_error(format!("not a readable GGUF file ({e})")))?;
        Self::from_gguf(&content, path)
    }

    /// The template of a GGUF file's metadata; `path` names the file in
    /// errors.
    pub fn from_gguf(content: &gguf_file::Content, path: &Path) -> Result<Self, ProviderError> {
        let path = path.display().to_string();
        let error = |message: String| ProviderError::ChatTemplate {
            path: path.clone(),
            message,
        };
        let metadata = &content.metadata;
        let tokens = metadata
            .get("tokenizer.ggml.tokens")
            .and_then(|v| v.to_vec().ok())
            .map(Vec::as_slice)
            .unwrap_or_default();
        let types = metadata
            .get("tokenizer.ggml.token_type")
            .and_then(|v| v.to_vec().ok())
            .map(Vec::as_slice)
            .unwrap_or_default();
        let token_text = |id: u32| {
            tokens
                .get(id as usize)
                .and_then(|t| t.to_string().ok())
                .cloned()
        };
        let special_tokens: Vec<(String, bool)> = types
            .iter()
            .enumerate()
            .filter_map(|(id, ty)| {
                let ty = ty.to_i32().ok()?;
                if ty != CONTROL && ty != USER_DEFINED {
                    return None;
                }
                Some((token_text(id as u32)?, ty == CONTROL))
            })
            .collect();
        let specials = Specials::new(special_tokens);

        let (text, source) = match metadata.get(TEMPLATE_KEY) {
            Some(value) => {
                let text = value
                    .to_string()
                    .map_err(|e| error(format!("its {TEMPLATE_KEY} is not text ({e})")))?
                    .clone();
                let bytes = text.len();
                (text, TemplateSource::Gguf { bytes })
            }
            None if specials.contains("<|im_start|>") && specials.contains("<|im_end|>") => {
                (CHATML.to_owned(), TemplateSource::ChatMl)
            }
            None => {
                return Err(error(format!(
                    "the file has no chat template ({TEMPLATE_KEY} is not in its metadata), and its vocabulary is not ChatML's (no <|im_start|> and <|im_end|> tokens) for foveal to fall back on; use a GGUF file converted with its model's chat template"
                )));
            }
        };

        let mut env = jinja::environment();
        for (name, key) in [
            ("bos_token", "tokenizer.ggml.bos_token_id"),
            ("eos_token", "tokenizer.ggml.eos_token_id"),
            ("unk_token", "tokenizer.ggml.unknown_token_id"),
            ("pad_token", "tokenizer.ggml.padding_token_id"),
        ] {
            let text = metadata
                .get(key)
                .and_then(|v| v.to_u32().ok())
                .and_then(token_text)
                .unwrap_or_default();
            env.add_global(name, text);
        }
        if let Err(e) = env.add_template_owned(NAME, text.clone()) {
            return Err(error(format!(
                "{} has a syntax error{}",
                source_name(&source),
                at_line(&e, &text)
            )));
        }
        let think = specials.contains(THINK_OPEN) && specials.contains(THINK_CLOSE);
        let mut template = Self {
            env,
            text,
            source,
            path,
            tools: ToolFormat::SystemMessage,
            default_system: None,
            specials,
            think,
        };
        template.probe()?;
        Ok(template)
    }

    /// Renders probe conversations: whether the template renders tools
    /// (in `<tool_call>` format), and its default system message.
    fn probe(&mut self) -> Result<(), ProviderError> {
        let user = || Jinja::from_pairs([("role", "user"), ("content", "Hi")]);
        let plain = self
            .render_value(Jinja::from(vec![user()]), Jinja::from(()))
            .map_err(|e| self.error("rendering a one-message conversation", &e))?;
        let tool = Jinja::from_pairs([
            ("type", Jinja::from("function")),
            (
                "function",
                Jinja::from_pairs([
                    ("name", Jinja::from(PROBE_TOOL)),
                    ("description", Jinja::from("Probes the template.")),
                    (
                        "parameters",
                        json_to_value(
                            &serde_json::json!({"type": "object", "properties": {}}),
                            &|s| s.to_owned(),
                        ),
                    ),
                ]),
            ),
        ]);
        let with_tools = self.render_value(Jinja::from(vec![user()]), Jinja::from(vec![tool]));
        let renders_tools = with_tools.is_ok_and(|text| text.contains(PROBE_TOOL))
            && self.text.contains(TOOL_CALL_OPEN);
        if renders_tools {
            self.tools = ToolFormat::Template;
            return Ok(());
        }
        // The default system message: what the template writes where a
        // conversation's own system message would be.
        let system = Jinja::from_pairs([("role", "system"), ("content", PROBE_SYSTEM)]);
        if let Ok(with_system) =
            self.render_value(Jinja::from(vec![system, user()]), Jinja::from(()))
            && let Some(at) = with_system.find(PROBE_SYSTEM)
        {
            let (before, after) = (&with_system[..at], &with_system[at + PROBE_SYSTEM.len()..]);
            if plain.len() >= before.len() + after.len()
                && plain.starts_with(before)
                && plain.ends_with(after)
            {
                let default = &plain[before.len()..plain.len() - after.len()];
                if !default.trim().is_empty() && !self.specials.has_any(default) {
                    self.default_system = Some(default.to_owned());
                }
            }
        }
        Ok(())
    }

    /// Where the template came from.
    pub fn source(&self) -> &TemplateSource {
        &self.source
    }

    /// Who writes the tools into the prompt.
    pub fn tool_format(&self) -> ToolFormat {
        self.tools
    }

    /// The template's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// One line for `foveal check`: where the template came from and who
    /// writes the tools.
    pub fn describe(&self) -> String {
        let tools = match self.tools {
            ToolFormat::Template => "the template writes the tools",
            ToolFormat::SystemMessage => {
                "the template takes no tools: foveal describes them in the system message"
            }
        };
        format!("{}; {tools}", self.source)
    }

    /// The prompt `request` becomes, as text with its special tokens.
    pub fn render_text(&self, request: &ChatRequest) -> Result<String, ProviderError> {
        self.render(request).map(|rendered| rendered.text())
    }

    /// Renders `request` for the model.
    pub(crate) fn render(&self, request: &ChatRequest) -> Result<Rendered, ProviderError> {
        let offer_tools = !request.tools.is_empty() && request.tool_choice != ToolChoice::None;
        let (messages, tools) = match self.tools {
            ToolFormat::Template => self.native(request, offer_tools),
            ToolFormat::SystemMessage => self.described(request, offer_tools),
        };
        let text = self
            .render_value(messages, tools)
            .map_err(|e| self.error("rendering the conversation", &e))?;
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
        let in_think = self.think && prefill.is_empty() && {
            let end = text.trim_end();
            end.ends_with(THINK_OPEN)
        };
        let mut pieces = Vec::new();
        self.specials.split_into(&text, &mut pieces);
        self.specials.split_into(&prefill, &mut pieces);
        Ok(Rendered {
            pieces,
            prefill,
            strip_think: self.think,
            in_think,
        })
    }

    fn render_value(&self, messages: Jinja, tools: Jinja) -> Result<String, minijinja::Error> {
        self.env.get_template(NAME)?.render(context! {
            messages => messages,
            tools => tools,
            documents => (),
            add_generation_prompt => true,
        })
    }

    /// The conversation and tools as the template takes them.
    fn native(&self, request: &ChatRequest, offer_tools: bool) -> (Jinja, Jinja) {
        let defuse = |s: &str| self.specials.defuse(s);
        let mut names = std::collections::HashMap::new();
        let messages: Vec<Jinja> = request
            .messages
            .iter()
            .map(|message| match message {
                Message::System(content) => message_value("system", &defuse(content)),
                Message::User(content) => message_value("user", &defuse(content)),
                Message::Assistant {
                    content,
                    tool_calls,
                } => {
                    let mut pairs = vec![
                        ("role", Jinja::from("assistant")),
                        ("content", Jinja::from(defuse(content))),
                    ];
                    if !tool_calls.is_empty() {
                        let calls: Vec<Jinja> = tool_calls
                            .iter()
                            .map(|call| {
                                names.insert(call.id.as_str(), call.name.as_str());
                                Jinja::from_pairs([
                                    ("id", Jinja::from(defuse(&call.id))),
                                    ("type", Jinja::from("function")),
                                    (
                                        "function",
                                        Jinja::from_pairs([
                                            ("name", Jinja::from(defuse(&call.name))),
                                            (
                                                "arguments",
                                                arguments_value(&call.arguments, &defuse),
                                            ),
                                        ]),
                                    ),
                                ])
                            })
                            .collect();
                        pairs.push(("tool_calls", Jinja::from(calls)));
                    }
                    Jinja::from_pairs(pairs)
                }
                Message::Tool {
                    tool_call_id,
                    content,
                } => {
                    let mut pairs = vec![
                        ("role", Jinja::from("tool")),
                        ("content", Jinja::from(defuse(content))),
                        ("tool_call_id", Jinja::from(defuse(tool_call_id))),
                    ];
                    if let Some(name) = names.get(tool_call_id.as_str()) {
                        pairs.push(("name", Jinja::from(defuse(name))));
                    }
                    Jinja::from_pairs(pairs)
                }
            })
            .collect();
        let tools = if offer_tools {
            let list: Vec<Jinja> = request
                .tools
                .iter()
                .map(|tool| {
                    Jinja::from_pairs([
                        ("type", Jinja::from("function")),
                        (
                            "function",
                            Jinja::from_pairs([
                                ("name", Jinja::from(defuse(&tool.name))),
                                ("description", Jinja::from(defuse(&tool.description))),
                                ("parameters", json_to_value(&tool.parameters, &defuse)),
                            ]),
                        ),
                    ])
                })
                .collect();
            Jinja::from(list)
        } else {
            Jinja::from(())
        };
        (Jinja::from(messages), tools)
    }

    /// The conversation with the tools, calls and results written into
    /// its messages by foveal; no `tools` for the template.
    fn described(&self, request: &ChatRequest, offer_tools: bool) -> (Jinja, Jinja) {
        let mut out: Vec<(&'static str, String)> = Vec::new();
        let mut messages = request.messages.iter().peekable();
        if offer_tools {
            let section = tools_section(request);
            match messages.peek() {
                Some(Message::System(content)) => {
                    out.push(("system", format!("{content}{section}")));
                    messages.next();
                }
                _ => out.push((
                    "system",
                    match &self.default_system {
                        Some(default) => format!("{default}{section}"),
                        None => section.trim_start().to_owned(),
                    },
                )),
            }
        }
        while let Some(message) = messages.next() {
            match message {
                Message::System(content) => out.push(("system", content.clone())),
                Message::User(content) => out.push(("user", content.clone())),
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
                    out.push(("assistant", text));
                }
                Message::Tool { content, .. } => {
                    let mut text = tool_response_block(content);
                    while let Some(Message::Tool { content, .. }) = messages.peek() {
                        text.push('\n');
                        text.push_str(&tool_response_block(content));
                        messages.next();
                    }
                    out.push(("user", text));
                }
            }
        }
        let messages: Vec<Jinja> = out
            .iter()
            .map(|(role, content)| message_value(role, &self.specials.defuse(content)))
            .collect();
        (Jinja::from(messages), Jinja::from(()))
    }

    /// An error of the template while `doing` something.
    fn error(&self, doing: &str, e: &minijinja::Error) -> ProviderError {
        ProviderError::ChatTemplate {
            path: self.path.clone(),
            message: format!(
                "{doing} with {} failed{}",
                source_name(&self.source),
                at_line(e, &self.text)
            ),
        }
    }
}

impl Specials {
    /// Whether `text` holds a special token's text.
    fn has_any(&self, text: &str) -> bool {
        let bytes = text.as_bytes();
        (0..bytes.len()).any(|at| self.at(bytes, at, false).is_some())
    }
}

/// What the template is called in errors.
fn source_name(source: &TemplateSource) -> String {
    match source {
        TemplateSource::Gguf { .. } => format!("its {TEMPLATE_KEY}"),
        TemplateSource::ChatMl => "foveal's ChatML template".to_owned(),
    }
}

/// ` at line N: what (line N: `…`)` for a template error.
fn at_line(e: &minijinja::Error, text: &str) -> String {
    let what = match e.detail() {
        Some(detail) if detail.starts_with(RAISED) => detail.to_owned(),
        Some(detail) => format!("{}: {detail}", e.kind()),
        None => e.kind().to_string(),
    };
    match e.line() {
        Some(line) => {
            let quoted = text
                .lines()
                .nth(line.saturating_sub(1))
                .unwrap_or("")
                .trim();
            let quoted = match quoted.char_indices().nth(100) {
                Some((cut, _)) => format!("{}…", &quoted[..cut]),
                None => quoted.to_owned(),
            };
            format!(" at line {line}: {what} (line {line}: `{quoted}`)")
        }
        None => format!(": {what}"),
    }
}

fn message_value(role: &str, content: &str) -> Jinja {
    Jinja::from_pairs([("role", role), ("content", content)])
}

/// A call's arguments for the template: the JSON object written (`{}`
/// when none), or the text as written when it is not JSON.
fn arguments_value(arguments: &str, defuse: &dyn Fn(&str) -> String) -> Jinja {
    if arguments.trim().is_empty() {
        return Jinja::from_pairs(Vec::<(String, Jinja)>::new());
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(value) => json_to_value(&value, defuse),
        Err(_) => Jinja::from(defuse(arguments)),
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
