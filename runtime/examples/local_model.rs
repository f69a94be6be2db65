//! Measures the embedded local model: load time, prompt reading and
//! generation speed, with the weights as in the file (the default) or
//! converted to Q8_0 at load.
//!
//! ```sh
//! scripts/fetch-model
//! cargo run --release -p foveal --example local_model            # default
//! cargo run --release -p foveal --example local_model -- --q8
//! ```
//!
//! Options: `--q8` converts the file's Q4_1 weights to Q8_0, `--threads N` sets
//! the model's threads (default: every CPU), `--tokens N`
//! sets the reply's length (default 128), `--runs N` repeats it (default
//! 3), `--notes N` puts N lines of notes (about 12 tokens each) in the
//! system message, for a prompt as long as `foveal run`'s. Each run reads
//! its whole prompt; a last run asks a follow-up question and reads only
//! what the KV cache does not hold.

use std::time::Instant;

use foveal::provider::{
    ChatRequest, Event, LoadOptions, LocalProvider, Message, Provider, ProviderSettings,
    Requantize, local,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str, default: u32| -> u32 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let options = LoadOptions {
        requantize: if args.iter().any(|a| a == "--q8") {
            Requantize::Always
        } else {
            Requantize::Auto
        },
        threads: args
            .iter()
            .position(|a| a == "--threads")
            .map(|_| value("--threads", 1) as usize),
    };
    let tokens = value("--tokens", 128);
    let runs = value("--runs", 3);
    let notes = value("--notes", 0);

    let path = local::model_path(&ProviderSettings::default())?;
    let provider = LocalProvider::open_with(&path, options)?;
    println!("model:    {}", provider.describe());
    println!(
        "load:     {:.0} ms",
        provider.load_time().as_secs_f64() * 1e3
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut system = String::from("You are a helpful assistant.");
    for i in 0..notes {
        system.push_str(&format!(
            "\n* TODO Note {i}: water the plants on the balcony :home:"
        ));
    }
    let question = Message::user(
        "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    );
    let mut request = ChatRequest {
        max_tokens: Some(tokens),
        ..ChatRequest::new(vec![Message::system(system), question.clone()])
    };
    for run in 1..=runs + 1 {
        if run <= runs {
            // Each run reads the whole prompt: the KV cache kept from the
            // run before would otherwise hold all of it.
            provider.clear_cache();
        }
        let started = Instant::now();
        let (first, reply) = runtime.block_on(async {
            let mut stream = provider.stream(&request);
            let mut first = None;
            while let Some(event) = stream.next().await {
                if let Event::Text(_) = event? {
                    first.get_or_insert_with(Instant::now);
                }
            }
            Ok::<_, foveal::provider::ProviderError>((first, stream.collect().await?))
        })?;
        let end = Instant::now();
        let usage = reply.usage.unwrap_or_default();
        let first = first.unwrap_or(end);
        // Tokens after the first, over the time after the first.
        let rate = usage.completion_tokens.saturating_sub(1) as f64
            / (end - first).as_secs_f64().max(1e-9);
        println!(
            "run {run}:    {} prompt tokens read in {:.0} ms (to the first token), {} tokens at {:.1} tok/s, finish {:?}",
            usage.prompt_tokens,
            (first - started).as_secs_f64() * 1e3,
            usage.completion_tokens,
            rate,
            reply.finish_reason
        );
        let cache = provider.last_prompt_cache().unwrap_or_default();
        println!(
            "          {} prompt tokens reused from the KV cache, {} read",
            cache.reused, cache.evaluated
        );
        if run == 1 {
            println!("---\n{}\n---", reply.text.trim());
        }
        if run == runs {
            println!("follow-up:");
            request.messages.push(Message::assistant(reply.text));
            request.messages.push(Message::user("Make it shorter."));
        }
    }
    Ok(())
}
