//! `npm run bench:train`, gptlens's half: training steps per second on nanoGPT's CPU "baby GPT"
//! shape (or another), measured the way `tests/bench/train/torch_train.py` measures PyTorch, so the
//! driver (`tests/bench/train/run.mjs`) can alternate the two and report ratios.
//!
//! ```sh
//! cargo run --release --example bench_train -- --data assets/data/shakespeare.txt --threads 2 [--steps 40 --warmup 5]
//! ```
//!
//! A fresh seeded model; `--warmup` untimed steps, then `--steps` timed ones, each a whole
//! training step as `gptlens train` runs it (a random batch, forward, backward, clipping, AdamW);
//! no evaluation. Prints one JSON line: `{"engine":"gptlens","threads":…,"tokensPerSecond":…}`.
//! A benchmark, never a test: it asserts nothing about time.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use gptlens::train::recipe::{self, Corpus, Recipe, RunState, Shape};
use gptlens::train::Trainer;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    data: PathBuf,
    #[arg(long, default_value_t = 1)]
    threads: usize,
    #[arg(long, default_value_t = 40)]
    steps: usize,
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    #[arg(long, default_value_t = 4)]
    layers: usize,
    #[arg(long, default_value_t = 4)]
    heads: usize,
    #[arg(long, default_value_t = 128)]
    width: usize,
    #[arg(long, default_value_t = 64)]
    context: usize,
    #[arg(long, default_value_t = 12)]
    batch: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = Args::parse();
    let shape = Shape { n_layer: a.layers, n_head: a.heads, d_model: a.width, n_ctx: a.context, sinusoidal: false };
    let config = shape.config()?;
    let corpus = Corpus::from_bytes(&std::fs::read(&a.data)?, 0.0, a.context)?;
    let recipe = Recipe { steps: a.warmup + a.steps, batch: a.batch, eval_every: usize::MAX, ..Recipe::default() };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(a.threads.max(1)).build()?;
    let mut trainer = Trainer::new_random(&config, recipe.seed)?;
    let clock = Instant::now();
    let now = || clock.elapsed().as_secs_f64();
    let mut timed_from = 0.0;
    pool.install(|| {
        recipe::run(&mut trainer, &corpus, &recipe, &mut RunState::default(), &now, &mut |p| {
            if p.step == a.warmup {
                timed_from = now();
            }
            true
        })
    })?;
    let seconds = now() - timed_from;
    let tokens = (a.steps * a.batch * a.context) as f64;
    println!(
        r#"{{"engine":"gptlens","threads":{},"steps":{},"seconds":{seconds:.4},"tokensPerSecond":{:.1}}}"#,
        a.threads,
        a.steps,
        tokens / seconds
    );
    Ok(())
}
