//! The model's reply, as it is written: tool calls in `<tool_call>{"name":
//! …, "arguments": {…}}</tool_call>` blocks (see [`super::template`]), and
//! reasoning in `<think>…</think>` blocks.
//!
//! [`ToolCallParser`] reads the reply as it is written. Text outside the
//! blocks is passed on as soon as it cannot be the start of `<tool_call>`
//! (or `<think>`); a block is held until it closes (or the reply ends) and
//! then becomes a call. A block whose JSON is broken still becomes a call
//! when its tool's name can be read: its arguments are passed on as
//! written, and the collected [`ToolCall`](crate::ToolCall)
//! reports them as invalid, for the host to hand back to the model. A block
//! without a readable name is passed on as text.
//!
//! For a model whose vocabulary has `<think>` and `</think>` (Qwen3), a
//! `<think>…</think>` block and the blank space after it are dropped:
//! the reply's text is the answer, not the reasoning before it (whose
//! tokens still count in the usage). A call written inside the reasoning is
//! not a call. A reply cut off while thinking has no text.

use serde_json::Value;

use super::template::{Rendered, THINK_CLOSE, THINK_OPEN, TOOL_CALL_CLOSE, TOOL_CALL_OPEN};

/// What the parser found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// Text of the reply.
    Text(String),
    /// A tool call: its name and its arguments as written.
    Call {
        /// The tool.
        name: String,
        /// The arguments' JSON text (maybe not valid JSON).
        arguments: String,
    },
}

/// Splits a reply, piece by piece, into text and tool calls.
#[derive(Debug)]
pub(crate) struct ToolCallParser {
    buffer: String,
    in_call: bool,
    /// Blocks closed so far.
    closed: usize,
    /// Whether `<tool_call>` blocks are calls (tools were offered).
    calls: bool,
    /// Whether `<think>` blocks are dropped.
    think: bool,
    in_think: bool,
    /// A `<think>` block just closed: blank space is dropped.
    after_think: bool,
}

impl Default for ToolCallParser {
    /// A parser of tool calls, without `<think>` blocks.
    fn default() -> Self {
        Self {
            buffer: String::new(),
            in_call: false,
            closed: 0,
            calls: true,
            think: false,
            in_think: false,
            after_think: false,
        }
    }
}

impl ToolCallParser {
    /// The parser a reply to `rendered` needs: one that reads tool calls
    /// when `tools` were offered, and drops `<think>` blocks when the
    /// model writes them; `None` when the reply is plain text.
    pub(crate) fn for_reply(tools: bool, rendered: &Rendered) -> Option<Self> {
        (tools || rendered.strip_think).then(|| Self {
            calls: tools,
            think: rendered.strip_think,
            in_think: rendered.in_think,
            ..Self::default()
        })
    }

    /// Reads the next piece of the reply.
    pub(crate) fn push(&mut self, text: &str, out: &mut Vec<Parsed>) {
        self.buffer.push_str(text);
        loop {
            if self.in_think {
                let Some(at) = self.buffer.find(THINK_CLOSE) else {
                    // Keep only an end that may be the start of `</think>`.
                    let keep = held_back(&self.buffer, &[THINK_CLOSE]);
                    self.buffer.drain(..self.buffer.len() - keep);
                    return;
                };
                self.buffer.drain(..at + THINK_CLOSE.len());
                self.in_think = false;
                self.after_think = true;
            } else if self.after_think {
                let blank = self.buffer.len() - self.buffer.trim_start().len();
                self.buffer.drain(..blank);
                if self.buffer.is_empty() {
                    return;
                }
                self.after_think = false;
            } else if self.in_call {
                let Some(at) = self.buffer.find(TOOL_CALL_CLOSE) else {
                    return;
                };
                let body = self.buffer[..at].to_owned();
                self.buffer.drain(..at + TOOL_CALL_CLOSE.len());
                self.in_call = false;
                self.closed += 1;
                calls(&body, true, out);
            } else {
                let opens: &[&str] = match (self.calls, self.think) {
                    (true, true) => &[TOOL_CALL_OPEN, THINK_OPEN],
                    (true, false) => &[TOOL_CALL_OPEN],
                    (false, true) => &[THINK_OPEN],
                    (false, false) => &[],
                };
                let first = opens
                    .iter()
                    .filter_map(|open| self.buffer.find(open).map(|at| (at, *open)))
                    .min();
                match first {
                    Some((at, open)) => {
                        text_out(&self.buffer[..at], out);
                        self.buffer.drain(..at + open.len());
                        if open == THINK_OPEN {
                            self.in_think = true;
                        } else {
                            self.in_call = true;
                        }
                    }
                    None => {
                        // Keep back an end that may be the start of a block.
                        let cut = self.buffer.len() - held_back(&self.buffer, opens);
                        text_out(&self.buffer[..cut], out);
                        self.buffer.drain(..cut);
                        return;
                    }
                }
            }
        }
    }

    /// The reply has ended: what is left, an unclosed block included.
    pub(crate) fn finish(&mut self, out: &mut Vec<Parsed>) {
        let rest = std::mem::take(&mut self.buffer);
        if self.in_think {
            // Cut off while thinking: no answer.
            self.in_think = false;
        } else if self.in_call {
            self.in_call = false;
            calls(&rest, false, out);
        } else if self.after_think {
            self.after_think = false;
            text_out(rest.trim_start(), out);
        } else {
            text_out(&rest, out);
        }
    }

    /// Whether a block is open.
    pub(crate) fn in_call(&self) -> bool {
        self.in_call
    }

    /// Blocks closed so far.
    pub(crate) fn closed(&self) -> usize {
        self.closed
    }
}

/// How many bytes at the end of `buffer` may be the start of one of
/// `opens`.
fn held_back(buffer: &str, opens: &[&str]) -> usize {
    let longest = opens.iter().map(|open| open.len()).max().unwrap_or(0);
    (1..longest)
        .rev()
        .find(|&n| {
            buffer.len() >= n
                && buffer.is_char_boundary(buffer.len() - n)
                && opens
                    .iter()
                    .any(|open| open.len() > n && open.starts_with(&buffer[buffer.len() - n..]))
        })
        .unwrap_or(0)
}

fn text_out(text: &str, out: &mut Vec<Parsed>) {
    if text.is_empty() {
        return;
    }
    if let Some(Parsed::Text(last)) = out.last_mut() {
        last.push_str(text);
    } else {
        out.push(Parsed::Text(text.to_owned()));
    }
}

/// The calls in one block's text (`closed`: it ended with `</tool_call>`).
fn calls(body: &str, closed: bool, out: &mut Vec<Parsed>) {
    let trimmed = body.trim();
    let found = match serde_json::from_str::<Value>(trimmed) {
        // Some models write a list of calls in one block.
        Ok(Value::Array(items)) => items.iter().map(call_from_value).collect(),
        Ok(value) => call_from_value(&value).map(|call| vec![call]),
        Err(_) => call_from_broken_json(trimmed).map(|call| vec![call]),
    };
    match found {
        Some(found) if !found.is_empty() => out.extend(found),
        _ => {
            text_out(TOOL_CALL_OPEN, out);
            text_out(body, out);
            if closed {
                text_out(TOOL_CALL_CLOSE, out);
            }
        }
    }
}

fn call_from_value(value: &Value) -> Option<Parsed> {
    let name = value.get("name")?.as_str()?.to_owned();
    let arguments = match value.get("arguments").or_else(|| value.get("parameters")) {
        None | Some(Value::Null) => String::new(),
        // Arguments written as a JSON string holding JSON.
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    };
    Some(Parsed::Call { name, arguments })
}

/// A call whose JSON does not parse (cut off, or badly written): the name
/// from `"name": "…"`, the arguments as written after `"arguments":`.
fn call_from_broken_json(text: &str) -> Option<Parsed> {
    let after_name = &text[text.find("\"name\"")? + "\"name\"".len()..];
    let after_colon = after_name.trim_start().strip_prefix(':')?.trim_start();
    let quoted = after_colon.strip_prefix('"')?;
    let name_end = quoted.find('"')?;
    let name = &quoted[..name_end];
    if name.is_empty() {
        return None;
    }
    let arguments = match text.find("\"arguments\"") {
        Some(at) => {
            let rest = text[at + "\"arguments\"".len()..].trim_start();
            let rest = rest.strip_prefix(':').unwrap_or(rest).trim();
            // The brace that closes the outer object is not the
            // arguments'.
            let opens = rest.matches('{').count();
            let closes = rest.matches('}').count();
            match rest.strip_suffix('}') {
                Some(inner) if closes > opens => inner.trim_end().to_owned(),
                _ => rest.to_owned(),
            }
        }
        // No arguments to be found: all of it, to be reported as invalid.
        None => text.to_owned(),
    };
    Some(Parsed::Call {
        name: name.to_owned(),
        arguments,
    })
}
