//! Prompt assembly with the token-economics and awareness skills loaded as
//! real libraries: a ≈16k-token prompt (system prompt with mandates and
//! tools, the awareness context of a generated memex, 20 log lines, 24
//! history messages, a tool result and the user's message) against the
//! default budget of 16,384 tokens.
//!
//! - `unchanged`: the same sections as the last cycle (every cache warm);
//! - `unchanged_over_budget`: the same, against 12,000 tokens, so L1–L3
//!   trim it every time (from their caches);
//! - `one_changed/message`: a new user message (≈ 300 tokens);
//! - `one_changed/tool_result`: a ≈ 4k-token tool result with one line
//!   changed;
//! - `one_changed/context`: a property of the focus edited (a new memex
//!   generation), so the awareness skill renders the context again — its
//!   render included;
//! - `prefix_hit`: the prefix hook answering from its cache;
//! - `count_cold_16k`: counting 16k tokens never seen before, for scale.
//!
//! ```sh
//! cargo build --release --workspace && cargo bench -p foveal --bench prompt
//! ```

use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

mod common;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use foveal::memex::Memex;
use foveal::memex::write::Edit;
use foveal::prompt::{Assembler, Message, PromptInput, PromptSettings, ToolSpec};
use foveal::registry::hooks;
use foveal_sdk::Role;
use foveal_sdk::prompt::PrefixRequest;

/// A memex of 40 projects, 6 children each, with bodies.
fn org() -> String {
    let mut s = String::new();
    for p in 0..40 {
        let _ = writeln!(
            s,
            "* Project {p} :project:\n:PROPERTIES:\n:ID: p{p}\n:END:\nThe goal of project {p}: ship the thing, measure it, and write it down."
        );
        for c in 0..6 {
            let _ = writeln!(
                s,
                "** TODO Step {c} of project {p}\n:PROPERTIES:\n:ID: p{p}-s{c}\n:END:\nWhat step {c} needs: a draft, a review and a test; notes on why it matters."
            );
        }
    }
    s
}

fn paragraph(seed: usize, words: usize) -> String {
    const WORDS: [&str; 12] = [
        "memex", "focus", "budget", "skill", "outline", "project", "review", "draft", "token",
        "cycle", "signal", "context",
    ];
    (0..words)
        .map(|i| WORDS[(seed * 7 + i * 13) % WORDS.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn prompt(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let registry = common::first_party_registry(
        &dir.path().join("shadow"),
        &["token-economics", "awareness"],
    );
    let skills = registry.snapshot();
    std::fs::create_dir(dir.path().join("memex")).unwrap();
    std::fs::write(dir.path().join("memex/main.org"), org()).unwrap();
    let memex = Memex::open(&[dir.path().join("memex")]).unwrap();
    let snapshot = memex.snapshot();

    let mut settings = PromptSettings::default();
    settings.prompt.identity.text = paragraph(1, 250);
    settings.prompt.identity.mandates = (0..6).map(|i| paragraph(i, 25)).collect();
    let tools: Vec<ToolSpec> = (0..8)
        .map(|i| ToolSpec {
            name: format!("tool_{i}"),
            description: paragraph(i, 20),
        })
        .collect();
    let logs: Vec<String> = (0..20)
        .map(|i| format!("INFO foveal::cycle: cycle {i} done generation=12 tokens=15873 ms=812"))
        .collect();
    let history: Vec<Message> = (0..24)
        .map(|i| {
            Message::new(
                if i % 2 == 0 {
                    Role::USER
                } else {
                    Role::ASSISTANT
                },
                paragraph(i, 150),
            )
        })
        .collect();
    let tool_result: String = (0..200)
        .map(|i| format!("{i:>4}: {}\n", paragraph(i, 15)))
        .collect();
    let message: Arc<str> = paragraph(99, 300).into();
    let results = [Message::tool_result("call_1", tool_result.as_str())];
    let input = PromptInput {
        focus: Some("p3-s2"),
        message: Some(Arc::clone(&message)),
        history: &history,
        tool_results: &results,
        tools: &tools,
        logs: &logs,
        ..PromptInput::default()
    };
    let assembler = Assembler::new(settings.clone());
    let first = assembler.assemble(&skills, &snapshot, &input).unwrap();
    eprintln!(
        "prompt: {} tokens of {} ({} bytes, {} sections: {}), trimmed: {:?}",
        first.total_tokens,
        first.budget,
        first.text().len(),
        first.sections.len(),
        first
            .sections
            .iter()
            .filter(|s| s.id != 5000)
            .map(|s| format!("{} {}", s.key, s.tokens))
            .collect::<Vec<_>>()
            .join(", "),
        first.trim_levels.names().collect::<Vec<_>>()
    );

    let mut group = c.benchmark_group("prompt_16k");
    group
        .sample_size(50)
        .measurement_time(Duration::from_secs(4));
    group.bench_function("unchanged", |b| {
        b.iter(|| {
            black_box(
                assembler
                    .assemble(&skills, &snapshot, black_box(&input))
                    .unwrap(),
            )
        })
    });
    let over = PromptInput {
        budget: Some(12_000),
        ..input.clone()
    };
    let trimmed = assembler.assemble(&skills, &snapshot, &over).unwrap();
    eprintln!(
        "over budget: {} tokens of {}, trimmed: {:?}",
        trimmed.total_tokens,
        trimmed.budget,
        trimmed.trim_levels.names().collect::<Vec<_>>()
    );
    let over_assembler = Assembler::new(settings.clone());
    group.bench_function("unchanged_over_budget", |b| {
        b.iter(|| {
            black_box(
                over_assembler
                    .assemble(&skills, &snapshot, black_box(&over))
                    .unwrap(),
            )
        })
    });

    let mut n = 0usize;
    group.bench_function("one_changed/message", |b| {
        b.iter_batched(
            || {
                n += 1;
                PromptInput {
                    message: Some(format!("{n}: {message}").into()),
                    ..input.clone()
                }
            },
            |changed| black_box(assembler.assemble(&skills, &snapshot, &changed).unwrap()),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("one_changed/tool_result", |b| {
        b.iter_batched(
            || {
                n += 1;
                let result = tool_result.replacen("   7: ", &format!("   7 (run {n}): "), 1);
                [Message::tool_result("call_1", result)]
            },
            |changed| {
                let changed = PromptInput {
                    tool_results: &changed,
                    ..input.clone()
                };
                black_box(assembler.assemble(&skills, &snapshot, &changed).unwrap())
            },
            BatchSize::SmallInput,
        )
    });
    let mut base = Arc::clone(&snapshot);
    group.bench_function("one_changed/context", |b| {
        b.iter_batched(
            || {
                n += 1;
                let plan = memex
                    .plan(
                        &base,
                        "p3-s2",
                        &Edit::SetProperty {
                            key: "REVISION".to_owned(),
                            value: n.to_string(),
                        },
                    )
                    .unwrap();
                let next = Arc::new(plan.preview(&base));
                // The memex builds the skills' view of a new file version
                // when it publishes it: not part of assembling.
                drop(foveal::memex::view::SnapshotView::new(
                    &next,
                    &foveal::memex::privacy::PrivacyTags::new(["@personal"]),
                ));
                base = Arc::clone(&next);
                next
            },
            |next| black_box(assembler.assemble(&skills, &next, &input).unwrap()),
            BatchSize::SmallInput,
        )
    });
    group.finish();

    let mut group = c.benchmark_group("prompt_parts");
    let belt = "- tool_0: do things\n- tool_1: do other things";
    let identity = settings.prompt.identity.text.clone();
    let mandates = foveal::prompt::components::mandates_text(&settings.prompt.identity.mandates);
    let request = PrefixRequest {
        assistant_name: "foveal".into(),
        identity: identity.as_str().into(),
        feedback: "".into(),
        mandates: mandates.as_str().into(),
        tools: belt.into(),
    };
    skills
        .call_inline("token-economics", hooks::PREFIX, |f| f(&request))
        .unwrap();
    // The hook itself, inline (the host calls it on a thread of its own,
    // with a deadline: see the registry bench for that hop).
    group.bench_function("prefix_hit", |b| {
        b.iter(|| {
            let prefix = skills
                .call_inline("token-economics", hooks::PREFIX, |f| f(black_box(&request)))
                .unwrap();
            debug_assert!(prefix.hit);
            black_box(prefix)
        })
    });
    group.sample_size(10);
    group.bench_function("count_cold_16k", |b| {
        b.iter_batched(
            || {
                n += 1;
                format!("{n}\n{}", first.text())
            },
            |text| {
                black_box(
                    foveal::tokens::TokenCounter::new(foveal::tokens::Encoding::O200kBase)
                        .count(&text),
                )
            },
            BatchSize::LargeInput,
        )
    });
    // A 10 MB word (one letter), cold: counted as an upper bound, never
    // handed whole to the tokenizer.
    let word = "a".repeat(10 << 20);
    group.bench_function("count_cold_10MB_word", |b| {
        b.iter(|| {
            black_box(
                foveal::tokens::TokenCounter::new(foveal::tokens::Encoding::O200kBase).count(&word),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, prompt);
criterion_main!(benches);
