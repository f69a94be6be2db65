//! Benchmarks of the local embedding model (issue targets in parentheses):
//!
//! - `embed/headlines/batch_32`: the titles of 32 headlines of the
//!   benchmark memex in one call (prototype: ≈ 3.5 ms a headline on 2
//!   cores).
//! - `embed/headlines/one_at_a_time`: the same 32, one call each
//!   (prototype: ≈ 10 ms a headline).
//! - `embed/title_and_body/*`: the same with their bodies (what is
//!   embedded for an object with a body: one paragraph, ≈ 60–90 tokens).
//!
//! Embedding 10k fresh headlines (≤ 60 s on 2 cores) and re-embedding after
//! one edit (only that headline) are measured end to end with
//! `foveal memex embed`: see docs/embeddings.md.
//!
//! ```sh
//! scripts/fetch-model && cargo bench -p foveal --bench embed
//! ```

use std::hint::black_box;
use std::time::Duration;

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use foveal::embed::Embedder as _;
use foveal::embed::local::{LocalEmbedder, model_dir};
use foveal::memex::Memex;

fn embed(c: &mut Criterion) {
    let dir = match model_dir(None) {
        Ok(dir) => dir,
        Err(error) => {
            eprintln!("not run: {error}");
            return;
        }
    };
    let model = LocalEmbedder::open(&dir, None, false).expect("the model loads");
    let memex = Memex::open(&[common::data(10_000).join("memex.org")]).expect("bench memex");
    let snapshot = memex.snapshot();
    let file = snapshot.files().next().expect("one file");
    let full: Vec<String> = (0..32u32)
        .map(|i| foveal::embed::text_of(file, i))
        .collect();
    let titles: Vec<String> = full
        .iter()
        .map(|t| t.lines().next().unwrap_or_default().to_owned())
        .collect();
    let mut group = c.benchmark_group("embed");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(15))
        .throughput(Throughput::Elements(32));
    for (name, texts) in [("headlines", &titles), ("title_and_body", &full)] {
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        group.bench_function(format!("{name}/batch_32"), |b| {
            b.iter(|| black_box(model.embed(&texts).unwrap()));
        });
        group.bench_function(format!("{name}/one_at_a_time"), |b| {
            b.iter(|| {
                for text in &texts {
                    black_box(model.embed(&[text]).unwrap());
                }
            });
        });
    }
    group.finish();
}

criterion_group!(benches, embed);
criterion_main!(benches);
