//! Reading `chat.completion.chunk` objects into [`Event`]s.
//!
//! A tool call arrives in pieces: the first delta for an `index` usually
//! carries the call's `id` and `name`, the following ones pieces of its
//! `arguments`, and several calls may interleave by index. Servers differ
//! in the details, so the decoder is lenient where that is harmless: a
//! missing `index` is the delta's position in the list, a missing `id` is
//! made up (`call_<index>`), and a call whose name comes later than its
//! first argument pieces is started once the name is known.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::types::{Event, FinishReason, Usage};

/// A chunk that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ChunkError {
    /// Not JSON, or not shaped like a chunk.
    NotJson(String),
    /// The server reported an error in the stream.
    Server(String),
}

#[derive(Debug, Deserialize)]
struct WireChunk {
    #[serde(default)]
    choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    #[serde(default)]
    index: Option<u64>,
    /// Streamed replies.
    #[serde(default)]
    delta: Option<WireDelta>,
    /// Whole replies (a server that ignored `stream: true`).
    #[serde(default)]
    message: Option<WireDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Debug, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<WireUsageDetails>,
}

#[derive(Debug, Deserialize)]
struct WireUsageDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// One tool call being read.
#[derive(Debug, Default)]
struct CallState {
    id: Option<String>,
    name: String,
    started: bool,
    /// Argument pieces that came before the name.
    pending: String,
    /// Bytes of arguments so far (for error messages).
    argument_bytes: usize,
}

/// Turns the chunks of one reply into events, keeping the state of the
/// tool calls in progress.
#[derive(Debug, Default)]
pub(crate) struct ChunkDecoder {
    calls: BTreeMap<usize, CallState>,
    finish_reason: Option<FinishReason>,
    /// The most recent call index that got a delta.
    last_call: Option<usize>,
}

impl ChunkDecoder {
    /// Reads the data of one event (not `[DONE]`); its events go to `out`.
    pub(crate) fn decode(&mut self, data: &str, out: &mut Vec<Event>) -> Result<(), ChunkError> {
        let chunk: WireChunk =
            serde_json::from_str(data).map_err(|e| ChunkError::NotJson(e.to_string()))?;
        if let Some(error) = chunk.error {
            return Err(ChunkError::Server(error_message(&error)));
        }
        for choice in chunk.choices.unwrap_or_default() {
            // We never ask for more than one choice.
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta.or(choice.message) {
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    out.push(Event::Text(text));
                }
                for (position, call) in delta.tool_calls.unwrap_or_default().into_iter().enumerate()
                {
                    self.tool_call(call.index.unwrap_or(position), call, out);
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.start_pending(out);
                let reason = FinishReason::parse(&reason);
                self.finish_reason = Some(reason.clone());
                out.push(Event::Finish(reason));
            }
        }
        if let Some(usage) = chunk.usage {
            out.push(Event::Usage(Usage {
                prompt_tokens: usage.prompt_tokens.unwrap_or(0),
                completion_tokens: usage.completion_tokens.unwrap_or(0),
                cached_tokens: usage
                    .prompt_tokens_details
                    .and_then(|d| d.cached_tokens)
                    .unwrap_or(0),
            }));
        }
        Ok(())
    }

    fn tool_call(&mut self, index: usize, call: WireToolCall, out: &mut Vec<Event>) {
        self.last_call = Some(index);
        let state = self.calls.entry(index).or_default();
        let (name, arguments) = match call.function {
            Some(f) => (f.name, f.arguments),
            None => (None, None),
        };
        if !state.started {
            if let Some(id) = call.id.filter(|id| !id.is_empty()) {
                state.id = Some(id);
            }
            if let Some(name) = name {
                state.name.push_str(&name);
            }
        }
        let arguments = arguments.unwrap_or_default();
        state.argument_bytes += arguments.len();
        if state.started {
            if !arguments.is_empty() {
                out.push(Event::ToolCallArguments {
                    index,
                    fragment: arguments,
                });
            }
        } else {
            state.pending.push_str(&arguments);
            if !state.name.is_empty() {
                start(index, state, out);
            }
        }
    }

    /// Starts the calls whose name never came (their events are still
    /// owed): at the finish reason or the end of the stream.
    pub(crate) fn start_pending(&mut self, out: &mut Vec<Event>) {
        for (index, state) in &mut self.calls {
            if !state.started {
                start(*index, state, out);
            }
        }
    }

    /// Why the model stopped, once a chunk said so.
    pub(crate) fn finish_reason(&self) -> Option<&FinishReason> {
        self.finish_reason.as_ref()
    }

    /// Where in the reply the stream is, for the error of a cut stream.
    pub(crate) fn position(&self) -> String {
        match self.last_call.and_then(|i| self.calls.get(&i)) {
            Some(call) => format!(
                "in the middle of the tool call `{}` ({} bytes of arguments received)",
                call.name, call.argument_bytes
            ),
            None => "before the reply was complete".to_owned(),
        }
    }
}

fn start(index: usize, state: &mut CallState, out: &mut Vec<Event>) {
    state.started = true;
    out.push(Event::ToolCallStart {
        index,
        id: state.id.clone().unwrap_or_else(|| format!("call_{index}")),
        name: state.name.clone(),
    });
    if !state.pending.is_empty() {
        out.push(Event::ToolCallArguments {
            index,
            fragment: std::mem::take(&mut state.pending),
        });
    }
}

/// The message of an API error object: `{"error": {"message": …}}`,
/// `{"error": "…"}`, `{"message": …}` or the object itself.
pub(crate) fn error_message(value: &serde_json::Value) -> String {
    let inner = value.get("error").unwrap_or(value);
    let message = inner
        .get("message")
        .and_then(serde_json::Value::as_str)
        .or_else(|| inner.as_str());
    match message {
        Some(message) => message.to_owned(),
        None => inner.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&str]) -> (Vec<Event>, ChunkDecoder) {
        let mut decoder = ChunkDecoder::default();
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.decode(chunk, &mut out).unwrap();
        }
        (out, decoder)
    }

    #[test]
    fn text_deltas_finish_and_usage_become_events() {
        let (events, decoder) = decode_all(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":8}}}"#,
        ]);
        assert_eq!(
            events,
            [
                Event::Text("Hi".into()),
                Event::Finish(FinishReason::Stop),
                Event::Usage(Usage {
                    prompt_tokens: 12,
                    completion_tokens: 2,
                    cached_tokens: 8
                }),
            ]
        );
        assert_eq!(decoder.finish_reason(), Some(&FinishReason::Stop));
    }

    #[test]
    fn a_name_that_comes_after_the_first_arguments_starts_the_call_with_them() {
        let (events, _) = decode_all(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x1","function":{"name":"noop","arguments":":1}"}}]}}]}"#,
        ]);
        assert_eq!(
            events,
            [
                Event::ToolCallStart {
                    index: 0,
                    id: "x1".into(),
                    name: "noop".into()
                },
                Event::ToolCallArguments {
                    index: 0,
                    fragment: "{\"a\":1}".into()
                },
            ]
        );
    }

    #[test]
    fn a_call_without_id_or_index_gets_them_from_its_position() {
        let (events, _) = decode_all(&[
            r#"{"choices":[{"message":{"content":null,"tool_calls":[{"function":{"name":"a","arguments":"{}"}},{"function":{"name":"b","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
        ]);
        assert!(
            matches!(&events[0], Event::ToolCallStart { index: 0, id, name } if id == "call_0" && name == "a")
        );
        assert!(
            matches!(&events[2], Event::ToolCallStart { index: 1, id, name } if id == "call_1" && name == "b")
        );
        assert_eq!(events[4], Event::Finish(FinishReason::ToolCalls));
    }

    #[test]
    fn an_error_object_in_the_stream_is_the_servers_error() {
        let mut decoder = ChunkDecoder::default();
        let err = decoder
            .decode(
                r#"{"error":{"message":"model overloaded","type":"server_error"}}"#,
                &mut Vec::new(),
            )
            .unwrap_err();
        assert_eq!(err, ChunkError::Server("model overloaded".into()));
        let err = decoder.decode("not json", &mut Vec::new()).unwrap_err();
        assert!(matches!(err, ChunkError::NotJson(_)));
    }
}
