//! The window on its own (no ABI, no JSON): adding with eviction at 1,000
//! items, and rendering the default 50 items (seed 002's targets: O(1)
//! and ≤ 1 µs per add; ≤ 50 µs per render).
//!
//! ```sh
//! cargo bench -p foveal-skill-context-window --bench window
//! ```

#![allow(missing_docs, dead_code)]

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

#[path = "../src/item.rs"]
#[allow(unused_imports)]
mod item;
#[path = "../src/render.rs"]
#[allow(unused_imports)]
mod render;
#[path = "../src/ring.rs"]
#[allow(unused_imports)]
mod ring;
#[path = "../src/window.rs"]
#[allow(unused_imports)]
mod window;

// `window.rs` refers to its siblings as `crate::…`.
use item::ItemType;
use window::{Limits, Window};

/// A code region of about 20 lines, like one a user attaches.
fn region(i: usize) -> String {
    (0..20)
        .map(|l| format!("    let value_{l} = compute({i}, {l}); // line {l}\n"))
        .collect()
}

fn metadata(i: usize) -> Option<serde_json::Map<String, serde_json::Value>> {
    match serde_json::json!({"filename": format!("src/module_{i}.rs"), "start_line": 10, "end_line": 30})
    {
        serde_json::Value::Object(map) => Some(map),
        _ => None,
    }
}

fn full(max_items: usize, max_tokens: u32) -> Window {
    let mut window = Window::new(Limits {
        max_items,
        max_tokens,
    })
    .unwrap();
    for i in 0..max_items {
        window
            .add_content(ItemType::Code, region(i), metadata(i), i as i64, &|_| 300)
            .unwrap();
    }
    window
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("context_window");
    // At capacity every add evicts the oldest. The content and metadata
    // are made outside the timing: what is timed is the window's work
    // (the id, the checks, the ring) and dropping the evicted item.
    for (name, max_items, max_tokens) in [
        ("add_evict_1000_items", 1000, 0),
        ("add_evict_50_items", 50, 0),
        ("add_evict_1000_items_token_bound", 1000, 300 * 1000),
    ] {
        let mut window = full(max_items, max_tokens);
        let i = std::cell::Cell::new(max_items);
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    i.set(i.get() + 1);
                    (region(i.get()), metadata(i.get()), i.get() as i64)
                },
                |(content, metadata, now)| {
                    let added = window
                        .add_content(ItemType::Code, content, metadata, now, &|_| 300)
                        .unwrap();
                    black_box(added)
                },
                BatchSize::SmallInput,
            );
        });
    }
    let window = full(50, 0);
    eprintln!("render of 50 items: {} bytes", window.render().len());
    group.bench_function("render_50_items", |b| b.iter(|| black_box(window.render())));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
