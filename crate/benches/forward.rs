//! Prefill and decode speed on a GPT-2-small-shaped model (124M parameters, random weights made
//! in memory), with capture off and with every hook captured.
//!
//! `cargo bench --bench forward` (or `npm run bench:native`); throughput is printed as
//! elements/s = tokens/s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gptlens::model::{Config, Weights};
use gptlens::{CaptureSpec, Model, Session};

fn gpt2_small() -> Arc<Model> {
    let config = Config::gpt2_small();
    Arc::new(Model { weights: Weights::random(&config, 1), config })
}

const PROMPT: usize = 64;

fn prompt() -> Vec<u32> {
    (0..PROMPT as u32).map(|i| (i * 7919) % 50257).collect()
}

fn bench(c: &mut Criterion) {
    let model = gpt2_small();
    let mut group = c.benchmark_group("gpt2-small");
    group.sample_size(10).measurement_time(Duration::from_secs(15)).warm_up_time(Duration::from_secs(2));
    for (label, spec) in [("capture-off", CaptureSpec::none()), ("capture-all", CaptureSpec::standard(&model.config))] {
        let mut session = Session::new(model.clone());
        let tokens = prompt();
        group.throughput(Throughput::Elements(PROMPT as u64));
        group.bench_function(format!("prefill-{PROMPT}/{label}"), |b| {
            b.iter(|| {
                session.reset();
                session.run(&tokens, &spec).map(|t| t.computed)
            })
        });
        group.throughput(Throughput::Elements(1));
        group.bench_function(format!("decode-after-{PROMPT}/{label}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for i in 0..iters {
                    // Keep decoding at ~64–128 tokens of context: re-prefill (untimed) when full.
                    if i % 64 == 0 {
                        session.reset();
                        let _ = session.run(&tokens, &spec);
                    }
                    let start = Instant::now();
                    let _ = session.step((i % 50257) as u32);
                    total += start.elapsed();
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
