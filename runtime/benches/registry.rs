use criterion::{criterion_group, criterion_main, Criterion};
fn b(_c: &mut Criterion) {}
criterion_group!(benches, b);
criterion_main!(benches);
