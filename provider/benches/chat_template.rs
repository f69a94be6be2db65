//! Rendering a conversation with a model's chat template (minijinja), the
//! step before tokenizing that every local-model request takes:
//!
//! - `chat_template/qwen2.5_tools`: Qwen2.5-Instruct's template (from a GGUF
//!   file written here, metadata only) with one tool, a call and its
//!   result: the template writes the tools itself.
//! - `chat_template/smollm2_tools`: SmolLM2's template, read from the model
//!   file when `scripts/fetch-model` installed it (else this one is left
//!   out), with the same conversation: foveal describes the tools in the
//!   system message.
//! - `chat_template/smollm2_short`: SmolLM2's template, a system message
//!   and one question.
//!
//! ```sh
//! cargo bench -p foveal --bench chat_template
//! ```

use std::hint::black_box;
use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use criterion::{Criterion, criterion_group, criterion_main};
use foveal_provider::local::{self, ChatTemplate};
use foveal_provider::{AssistantToolCall, ChatRequest, Message, ProviderSettings, ToolDefinition};

const QWEN25: &str = include_str!("../src/local/testdata/qwen2.5-instruct.jinja");

/// A GGUF file with Qwen's special tokens and its template, no tensors.
fn qwen_gguf(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("qwen.gguf");
    let vocabulary = [
        ("a", 1),
        ("<|endoftext|>", 3),
        ("<|im_start|>", 3),
        ("<|im_end|>", 3),
        ("<tool_call>", 4),
        ("</tool_call>", 4),
        ("<tool_response>", 4),
        ("</tool_response>", 4),
    ];
    let tokens = Value::Array(
        vocabulary
            .iter()
            .map(|(t, _)| Value::String((*t).to_owned()))
            .collect(),
    );
    let types = Value::Array(vocabulary.iter().map(|(_, ty)| Value::I32(*ty)).collect());
    let template = Value::String(QWEN25.to_owned());
    let (bos, eos) = (Value::U32(1), Value::U32(3));
    let metadata = [
        ("tokenizer.ggml.tokens", &tokens),
        ("tokenizer.ggml.token_type", &types),
        ("tokenizer.ggml.bos_token_id", &bos),
        ("tokenizer.ggml.eos_token_id", &eos),
        ("tokenizer.chat_template", &template),
    ];
    let mut file = std::fs::File::create(&path).unwrap();
    gguf_file::write(&mut file, &metadata, &[]).unwrap();
    path
}

fn tool_conversation() -> ChatRequest {
    ChatRequest {
        tools: vec![ToolDefinition {
            name: "query_memex".into(),
            description: "Finds headlines by tag and TODO state.".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {"tag": {"type": "string"}, "todo": {"type": "string"}},
            }),
        }],
        ..ChatRequest::new(vec![
            Message::system("You are foveal, an agent that keeps a memex."),
            Message::user("What is tagged work?"),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![AssistantToolCall {
                    id: "call_0".into(),
                    name: "query_memex".into(),
                    arguments: "{\"tag\": \"work\"}".into(),
                }],
            },
            Message::tool_result("call_0", "3 headlines: * TODO Write the report :work:"),
        ])
    }
}

fn chat_template(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let qwen = ChatTemplate::from_file(&qwen_gguf(dir.path())).unwrap();
    let tools = tool_conversation();
    let short = ChatRequest::new(vec![
        Message::system("You are foveal."),
        Message::user("What is due today?"),
    ]);
    let mut group = c.benchmark_group("chat_template");
    group.bench_function("qwen2.5_tools", |b| {
        b.iter(|| qwen.render_text(black_box(&tools)).unwrap())
    });
    match local::model_path(&ProviderSettings::default()) {
        Ok(path) => {
            let smollm2 = ChatTemplate::from_file(&path).unwrap();
            group.bench_function("smollm2_tools", |b| {
                b.iter(|| smollm2.render_text(black_box(&tools)).unwrap())
            });
            group.bench_function("smollm2_short", |b| {
                b.iter(|| smollm2.render_text(black_box(&short)).unwrap())
            });
        }
        Err(error) => eprintln!("SmolLM2's template left out: {error}"),
    }
    group.finish();
}

criterion_group!(benches, chat_template);
criterion_main!(benches);
