//! One whole turn of the live agent — `turn(Signal::user("Say hello"))` —
//! over the 100,000-headline benchmark memex with the first-party skills
//! and an instant in-process model ([`InstantModel`]), so what is timed is
//! the host: snapshots, execution pattern, prompt assembly, privacy gate,
//! request body, usage record, session append and the session's sync at
//! the end of the turn.
//!
//! - `turn/steady`: the same memex generation as the turns before it
//!   (every cache warm, as in a long-running host).
//!
//! Criterion gives the mean; `foveal bench agent` gives p50/p99/max per
//! phase and the turn after a one-headline edit:
//!
//! ```sh
//! cargo build --release --workspace && cargo bench -p foveal --bench agent
//! target/release/foveal bench agent --memex target/bench-data/100000 --turns 2000
//! ```

use std::sync::Arc;
use std::time::Duration;

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use foveal::agent::session::Session;
use foveal::agent::{Agent, Collect, Signal};
use foveal::cli::bench::InstantModel;
use foveal::config::{Config, Overrides};
use foveal::memex::Memex;
use foveal::memex::privacy::PrivacyTags;

fn agent(c: &mut Criterion) {
    let data = common::data(100_000);
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let env = |name: &str| match name {
        "FOVEAL_DATA_DIR" => Some(data_dir.to_string_lossy().into_owned()),
        _ => None,
    };
    let overrides = Overrides {
        memex: vec![data.join("memex.org")],
        plugins: Some(dir.path().join("plugins")),
        builtin: Some(false),
        ..Default::default()
    };
    let config = Config::from_toml("", None, &overrides, &env).unwrap();
    let memex = Arc::new(Memex::open(&config.memex_paths).unwrap());
    memex.prepare_views(PrivacyTags::new(&config.privacy_tags));
    let registry = Arc::new(common::first_party_registry(
        &dir.path().join("shadow"),
        &["awareness", "privacy", "token-economics"],
    ));
    let session = Session::open(&config.data_dir, "bench").unwrap();
    let model = Arc::new(InstantModel::default());
    let mut agent = Agent::new(
        config,
        registry,
        memex,
        model as Arc<dyn foveal::provider::Provider>,
        session,
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut turn = move || {
        let mut out = Collect::default();
        let report = rt.block_on(agent.turn(Signal::user("Say hello"), &mut out));
        assert!(report.error.is_none(), "{:?}", report.error);
        report
    };
    for _ in 0..20 {
        turn();
    }
    let mut group = c.benchmark_group("agent_100k");
    group
        .sample_size(100)
        .measurement_time(Duration::from_secs(8));
    group.bench_function("turn/steady", |b| b.iter(&mut turn));
    group.finish();
}

criterion_group!(benches, agent);
criterion_main!(benches);
