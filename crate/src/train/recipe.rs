//! Training from scratch on a text file, byte by byte (a vocabulary of 256, so the engine's byte
//! tokenizer reads the result): the model's shape, GPT-2's initialisation, the corpus split into
//! training and validation bytes, random batches, and the loop — schedule, clipping, AdamW,
//! periodic evaluation — reporting each step to a callback that may stop it.

use crate::error::{Error, Result};
use crate::model::{Arch, Config, Positions, Variant};
use crate::sample::Rng;

use super::{scheduled_lr, AdamW, Trainer};

/// The shape of a byte-level GPT-2-style model.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Shape {
    pub n_layer: usize,
    pub n_head: usize,
    pub d_model: usize,
    /// Positions per sequence (the block size).
    pub n_ctx: usize,
    pub sinusoidal: bool,
}

impl Shape {
    /// The config of this shape: 256 byte tokens, MLP 4 × wide, pre-LN, tied head.
    pub fn config(&self) -> Result<Config> {
        let mut variant = Variant::of(Arch::Gpt2);
        if self.sinusoidal {
            variant.positions = Positions::Sinusoidal;
        }
        let config = Config {
            arch: Arch::Gpt2,
            n_layer: self.n_layer,
            n_head: self.n_head,
            n_kv_head: self.n_head,
            d_model: self.d_model,
            head_dim: self.d_model.checked_div(self.n_head).unwrap_or(0),
            d_ff: self.d_model.saturating_mul(4),
            vocab_size: 256,
            n_ctx: self.n_ctx,
            norm_eps: 1e-5,
            rope: None,
            query_pre_attn_scalar: None,
            sliding_window: None,
            bos_token_id: None,
            eos_token_id: None,
            tied_head: true,
            variant,
            token_types: 0,
        };
        config.check_limits(|field| format!("the model's {field}"))?;
        config.validate().map_err(Error::Config)?;
        Ok(config)
    }
}

/// How to train.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Recipe {
    pub steps: usize,
    /// Sequences per step.
    pub batch: usize,
    pub lr: f32,
    pub min_lr: f32,
    pub warmup: usize,
    pub adamw: AdamW,
    /// Clip the gradient's global norm to this (`None`: no clipping).
    pub clip: Option<f32>,
    /// Dropout probability while training (never at evaluation).
    pub dropout: f32,
    /// Evaluate every this many steps (and at the last), on `eval_batches` batches.
    pub eval_every: usize,
    pub eval_batches: usize,
    pub seed: u64,
}

impl Default for Recipe {
    /// nanoGPT's character-level Shakespeare recipe (`config/train_shakespeare_char.py`): lr 1e-3
    /// decaying to 1e-4, warmup 100, β₂ 0.99, weight decay 0.1, clip 1.0.
    fn default() -> Recipe {
        Recipe {
            steps: 2000,
            batch: 12,
            lr: 1e-3,
            min_lr: 1e-4,
            warmup: 100,
            adamw: AdamW { beta2: 0.99, ..AdamW::default() },
            clip: Some(1.0),
            dropout: 0.0,
            eval_every: 250,
            eval_batches: 20,
            seed: 1337,
        }
    }
}

/// A text's bytes split into training and validation parts (the last `val_fraction`).
pub struct Corpus {
    pub train: Vec<u32>,
    pub val: Vec<u32>,
}

impl Corpus {
    pub fn from_bytes(bytes: &[u8], val_fraction: f32, n_ctx: usize) -> Result<Corpus> {
        if !(0.0..1.0).contains(&val_fraction) {
            return Err(Error::InvalidArgument(format!("the validation fraction {val_fraction} must be in [0, 1)")));
        }
        let split = bytes.len() - (bytes.len() as f64 * f64::from(val_fraction)) as usize;
        let (train, val): (Vec<u32>, Vec<u32>) = (
            bytes[..split].iter().map(|&b| u32::from(b)).collect(),
            bytes[split..].iter().map(|&b| u32::from(b)).collect(),
        );
        // No validation part is asked for with a fraction of 0.
        let parts = [("training", &train, true), ("validation", &val, val_fraction > 0.0)];
        for (part, data, needed) in parts {
            if needed && data.len() <= n_ctx {
                return Err(Error::InvalidArgument(format!(
                    "the {part} part has {} bytes: it needs more than one block of {n_ctx}",
                    data.len()
                )));
            }
        }
        Ok(Corpus { train, val })
    }
}

/// `batch` random windows of `t + 1` bytes: inputs are their first `t`, targets their last `t`.
/// `data` must be longer than `t` ([`Corpus::from_bytes`] sees to it).
fn sample_batch(data: &[u32], batch: usize, t: usize, rng: &mut Rng) -> (Vec<u32>, Vec<u32>) {
    let (mut inputs, mut targets) = (Vec::with_capacity(batch * t), Vec::with_capacity(batch * t));
    let starts = data.len().saturating_sub(t).max(1) as u64;
    for _ in 0..batch {
        let at = (rng.next_u64() % starts) as usize;
        inputs.extend_from_slice(&data[at..at + t]);
        targets.extend_from_slice(&data[at + 1..at + t + 1]);
    }
    (inputs, targets)
}

/// What the loop reports after each step.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    pub step: usize,
    pub steps: usize,
    pub loss: f32,
    /// The validation loss, on the steps that evaluate.
    pub val_loss: Option<f32>,
    pub lr: f32,
    /// Tokens (bytes) trained on per second since the loop started.
    pub tokens_per_second: f64,
    pub seconds: f64,
}

/// Where a run is: steps done and the batch generator's state, so a resumed run continues exactly.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunState {
    pub step: usize,
    pub rng_state: u64,
    /// Every step's training loss and the validation losses measured, for the loss curve.
    pub losses: Vec<f32>,
    pub val_losses: Vec<(usize, f32)>,
}

/// The mean loss of `eval_batches` validation batches drawn from a generator of its own (the same
/// batches every time, so evaluations compare).
pub fn validation_loss(trainer: &mut Trainer, corpus: &Corpus, recipe: &Recipe) -> Result<f32> {
    let t = trainer.config().n_ctx;
    if corpus.val.len() <= t {
        return Err(Error::InvalidArgument(format!("no validation text longer than a block of {t} bytes")));
    }
    let mut rng = Rng::new(recipe.seed ^ 0x005e_ed0f_1a11);
    let mut total = 0f64;
    for _ in 0..recipe.eval_batches.max(1) {
        let (inputs, targets) = sample_batch(&corpus.val, recipe.batch, t, &mut rng);
        total += f64::from(trainer.loss(&inputs, &targets, recipe.batch)?);
    }
    Ok((total / recipe.eval_batches.max(1) as f64) as f32)
}

/// The mean loss over the whole validation text, read in consecutive windows of the context, so
/// that every byte after the first is predicted exactly once (each window's first prediction sees
/// one byte of context, its last a full window): the figure a model card states, free of the
/// sampling noise of [`validation_loss`]. Windows go `batch` at a time.
pub fn held_out_loss(trainer: &mut Trainer, corpus: &Corpus, batch: usize) -> Result<f32> {
    let t = trainer.config().n_ctx;
    let windows = corpus.val.len().saturating_sub(1) / t;
    if windows == 0 {
        return Err(Error::InvalidArgument(format!("no validation text longer than a block of {t} bytes")));
    }
    let batch = batch.max(1);
    let mut total = 0f64;
    for first in (0..windows).step_by(batch) {
        let n = batch.min(windows - first);
        let span = first * t..(first + n) * t;
        let inputs = &corpus.val[span.clone()];
        let targets = &corpus.val[span.start + 1..span.end + 1];
        total += f64::from(trainer.loss(inputs, targets, n)?) * n as f64;
    }
    Ok((total / windows as f64) as f32)
}

/// Trains from `state` up to `recipe.steps`. `now` gives seconds (the platform's clock);
/// `on_step` sees every step's progress and returns false to stop after it.
pub fn run(
    trainer: &mut Trainer,
    corpus: &Corpus,
    recipe: &Recipe,
    state: &mut RunState,
    now: &dyn Fn() -> f64,
    on_step: &mut dyn FnMut(&Progress) -> bool,
) -> Result<()> {
    let t = trainer.config().n_ctx;
    if recipe.batch == 0 || recipe.steps == 0 {
        return Err(Error::InvalidArgument("a run needs at least one step of at least one sequence".into()));
    }
    if state.rng_state == 0 && state.step == 0 {
        state.rng_state = recipe.seed;
    }
    let mut rng = Rng::new(state.rng_state);
    let started = now();
    let first = state.step;
    while state.step < recipe.steps {
        let (inputs, targets) = sample_batch(&corpus.train, recipe.batch, t, &mut rng);
        let lr = scheduled_lr(state.step, recipe.warmup, recipe.steps, recipe.lr, recipe.min_lr);
        // Each step's dropout masks from its own seed, so a resumed run draws the same ones.
        let seed = recipe.seed.wrapping_add(state.step as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let loss = crate::kernels::pool::run_as_team(|| {
            trainer.loss_and_grads_with_dropout(&inputs, &targets, recipe.batch, recipe.dropout, seed)
        })?;
        if !loss.is_finite() {
            return Err(Error::InvalidArgument(format!("the loss diverged at step {} ({loss})", state.step)));
        }
        if let Some(max) = recipe.clip {
            trainer.clip_grad_norm(max);
        }
        trainer.adamw_step(&recipe.adamw, lr);
        state.step += 1;
        state.rng_state = rng.state();
        state.losses.push(loss);
        let evaluate = state.step.is_multiple_of(recipe.eval_every.max(1)) || state.step == recipe.steps;
        let val_loss = if evaluate && !corpus.val.is_empty() {
            let v = crate::kernels::pool::run_as_team(|| validation_loss(trainer, corpus, recipe))?;
            state.val_losses.push((state.step, v));
            Some(v)
        } else {
            None
        };
        let seconds = now() - started;
        let progress = Progress {
            step: state.step,
            steps: recipe.steps,
            loss,
            val_loss,
            lr,
            tokens_per_second: ((state.step - first) * recipe.batch * t) as f64 / seconds.max(1e-9),
            seconds,
        };
        if !on_step(&progress) {
            break;
        }
    }
    Ok(())
}

impl Trainer {
    /// A new model of `config` with GPT-2's initialisation (nanoGPT's): every matrix and embedding
    /// normal with σ = 0.02, the projections into the residual stream σ = 0.02/√(2·layers),
    /// biases 0, norms 1; seeded.
    pub fn new_random(config: &Config, seed: u64) -> Result<Trainer> {
        let layout = super::ParamLayout::new(config)?;
        Trainer::check_memory(config, layout.len, 1, 1)?;
        let mut rng = Rng::new(seed);
        let mut normal = move || {
            // Box–Muller, from two uniform draws in (0, 1].
            let (u, v) = (1.0 - f64::from(rng.next_f32()), f64::from(rng.next_f32()));
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
        };
        let residual = 0.02 / (2.0 * config.n_layer as f32).sqrt();
        let mut params = vec![0f32; layout.len];
        for t in &layout.tensors {
            let values = &mut params[t.range.clone()];
            let name = t.name.as_str();
            if name.ends_with(".bias") {
                continue;
            }
            if name.contains("ln_") {
                values.fill(1.0);
                continue;
            }
            let sigma = if name.ends_with("c_proj.weight") { residual } else { 0.02 };
            values.iter_mut().for_each(|v| *v = normal() * sigma);
        }
        Ok(Trainer::with_params(config.clone(), layout, params))
    }
}
