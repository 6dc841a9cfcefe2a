//! Activation patching: which positions and heads carry the difference between a clean and a
//! corrupted prompt of the same length.
//!
//! With `diff = logit[answer] − logit[wrong]` at the last position, each patch is scored by
//! `(diff(patched) − diff(corrupt)) / (diff(clean) − diff(corrupt))`: 1 where the patch restores
//! the clean answer entirely, 0 where it changes nothing. Two sweeps:
//!
//! * `resid_pre[l][t]`: the corrupted run with the clean `blocks.{l}.hook_resid_pre` at position
//!   `t` only;
//! * `heads[l][h]`: the corrupted run with the clean `blocks.{l}.attn.hook_z` of head `h` at every
//!   position.
//!
//! A patch at layer `l` leaves everything below `l` as the corrupted run computed it, so each
//! patched run starts there: from the corrupted residual entering block `l` (with the patch), at
//! position `t` for a residual patch — the keys and values of earlier positions are the corrupted
//! run's, kept in its cache. Residual patches run from the last position down, so that each reads
//! only cache rows no earlier patched run has overwritten; head patches (every position) run last.
//! A residual equal in both runs (any position before the prompts first differ) scores 0 without
//! a run: patching it in changes nothing.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::instruments::{report, Replacements};
use crate::kernels::pool::run_as_team;
use crate::model::forward::{forward_chunk, Activations, ChunkInput, Edits, KvCache, CHUNK};
use crate::model::{Config, Model};
use crate::trace::{CaptureSpec, Hook};

/// The scores of both sweeps, with the logit differences they are normalised by.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PatchScores {
    pub clean_diff: f32,
    pub corrupt_diff: f32,
    /// `[n_layer][T]`: the clean residual entering layer l at position t, patched in.
    pub resid_pre: Vec<Vec<f32>>,
    /// `[n_layer][n_head]`: the clean z of head (l, h) at every position, patched in.
    pub heads: Vec<Vec<f32>>,
}

/// What one patching run asks.
pub struct PatchRequest<'a> {
    pub clean: &'a [u32],
    pub corrupt: &'a [u32],
    pub answer: u32,
    pub wrong: u32,
}

/// How many forward runs [`patch`] makes for prompts of `t` tokens (for progress reports).
pub fn patch_runs(config: &Config, t: usize) -> usize {
    2 + config.n_layer * (t + config.n_head)
}

/// Runs both sweeps on the CPU. `progress(done, total)` is called after each run; returning false
/// stops the sweep with [`Error::Cancelled`]. Errors (prompts of different lengths, ids out of
/// range, equal differences) come before any run.
pub fn patch(
    model: &Arc<Model>,
    request: &PatchRequest,
    progress: &mut dyn FnMut(usize, usize) -> bool,
) -> Result<PatchScores> {
    let c = &model.config;
    let PatchRequest { clean, corrupt, answer, wrong } = *request;
    check(c, request)?;
    let t = clean.len();
    let (d, hd) = (c.d_model, c.head_dim());
    let total = patch_runs(c, t);
    let mut done = 0;

    let names: Vec<String> =
        (0..c.n_layer).flat_map(|l| [Hook::ResidPre(l).to_string(), Hook::AttnZ(l).to_string()]).collect();
    let spec = CaptureSpec::from_names(&names, c)?;
    let mut clean_run = crate::Session::new(Arc::clone(model));
    let clean_trace = clean_run.run(clean, &spec)?;
    drop(clean_run);
    done += 1;
    report(progress, done, total)?;
    let tensor = |hook: Hook| clean_trace.get(&hook.to_string()).map(|t| t.data.as_slice()).unwrap_or(&[]);
    let diff = |logits: &[f32]| logits[answer as usize] - logits[wrong as usize];
    let clean_diff = diff(&clean_trace.last_logits);

    // The corrupted run, kept: its cache serves every patched run, its residuals are their inputs.
    let mut acts = Activations::new(c);
    let mut kv = KvCache::new(c);
    let resid_spec = CaptureSpec::from_names(&names.iter().step_by(2).collect::<Vec<_>>(), c)?;
    let mut captures = crate::model::session::Captures::new(&resid_spec);
    let none = Replacements::default();
    let edits = Edits { ablated: &none, patch_z: None, attended: None };
    run_as_team(|| {
        for (i, chunk) in corrupt.chunks(CHUNK).enumerate() {
            forward_chunk(model, &mut acts, &mut kv, ChunkInput::Tokens(chunk), i * CHUNK, &mut captures, edits);
        }
    });
    let corrupt_diff = diff(&acts.logits[..c.vocab_size]);
    done += 1;
    report(progress, done, total)?;
    if clean_diff == corrupt_diff {
        return Err(Error::InvalidArgument(format!(
            "both prompts give the same logit difference ({clean_diff}): there is nothing for a patch to restore"
        )));
    }
    let corrupt_resid: Vec<Vec<f32>> = (0..c.n_layer).map(|l| captures.tensor(Hook::ResidPre(l), c, t).data).collect();
    let score = |patched: f32| (patched - corrupt_diff) / (clean_diff - corrupt_diff);

    let mut no_capture = crate::model::session::Captures::new(&CaptureSpec::none());
    let mut run_from = |layer: usize, pos0: usize, rows: &[f32], patch_z: Option<(usize, &[f32])>| -> f32 {
        run_as_team(|| {
            for (i, chunk) in rows.chunks(CHUNK * d).enumerate() {
                let at = pos0 + i * CHUNK;
                let patch_z = patch_z.map(|(head, z)| (layer, head, &z[(at - pos0) * hd..][..chunk.len() / d * hd]));
                let input = ChunkInput::Residual { layer, rows: chunk };
                forward_chunk(
                    model,
                    &mut acts,
                    &mut kv,
                    input,
                    at,
                    &mut no_capture,
                    Edits { ablated: &none, patch_z, attended: None },
                );
            }
        });
        diff(&acts.logits[..c.vocab_size])
    };

    let mut resid_pre = vec![vec![0f32; t]; c.n_layer];
    let mut rows = Vec::with_capacity(t * d);
    for pos in (0..t).rev() {
        for (layer, corrupt_rows) in corrupt_resid.iter().enumerate() {
            let clean_row = &tensor(Hook::ResidPre(layer))[pos * d..(pos + 1) * d];
            // Where the clean residual is the corrupted one (before the prompts first differ),
            // the patched run is the corrupted run: its score is 0 without running it.
            if clean_row == &corrupt_rows[pos * d..(pos + 1) * d] {
                done += 1;
                report(progress, done, total)?;
                continue;
            }
            rows.clear();
            rows.extend_from_slice(clean_row);
            rows.extend_from_slice(&corrupt_rows[(pos + 1) * d..]);
            resid_pre[layer][pos] = score(run_from(layer, pos, &rows, None));
            done += 1;
            report(progress, done, total)?;
        }
    }
    // Positions before the first whose residual differs (at any layer) are the same in both runs,
    // their z too: head runs start there, reading the corrupted run's cache before it (which the
    // residual runs, all starting at or after it, left alone).
    let same_until = (0..t)
        .find(|&p| {
            corrupt_resid
                .iter()
                .enumerate()
                .any(|(l, rows)| rows[p * d..(p + 1) * d] != tensor(Hook::ResidPre(l))[p * d..(p + 1) * d])
        })
        .unwrap_or(t);
    let mut heads = vec![vec![0f32; c.n_head]; c.n_layer];
    let mut z = vec![0f32; t * hd];
    for ((layer, corrupt_rows), layer_scores) in corrupt_resid.iter().enumerate().zip(&mut heads) {
        let clean_z = tensor(Hook::AttnZ(layer));
        for (head, head_score) in layer_scores.iter_mut().enumerate() {
            if same_until == t {
                done += 1;
                report(progress, done, total)?;
                continue;
            }
            for p in 0..t {
                let from = (p * c.n_head + head) * hd;
                z[p * hd..(p + 1) * hd].copy_from_slice(&clean_z[from..from + hd]);
            }
            let (rows, z) = (&corrupt_rows[same_until * d..], &z[same_until * hd..]);
            *head_score = score(run_from(layer, same_until, rows, Some((head, z))));
            done += 1;
            report(progress, done, total)?;
        }
    }
    Ok(PatchScores { clean_diff, corrupt_diff, resid_pre, heads })
}

/// Refuses a request the sweeps cannot run, naming what is wrong.
fn check(c: &Config, r: &PatchRequest) -> Result<()> {
    if !c.has_head() || c.bidirectional() {
        return Err(Error::InvalidArgument(
            "patching scores a next-token logit difference and reuses the causal prefix of a run; it runs on \
             causal models with an LM head, not on encoders"
                .into(),
        ));
    }
    if r.clean.len() != r.corrupt.len() {
        return Err(Error::InvalidArgument(format!(
            "patching needs prompts of the same length: the clean prompt has {} tokens, the corrupted {}",
            r.clean.len(),
            r.corrupt.len()
        )));
    }
    if r.clean.is_empty() {
        return Err(Error::EmptyInput);
    }
    if r.clean.len() > c.n_ctx {
        return Err(Error::ContextOverflow { len: r.clean.len(), n_ctx: c.n_ctx });
    }
    if let Some(&id) =
        r.clean.iter().chain(r.corrupt).chain([&r.answer, &r.wrong]).find(|&&id| id as usize >= c.vocab_size)
    {
        return Err(Error::TokenOutOfRange { id, vocab: c.vocab_size });
    }
    // The clean residuals and z, and the corrupted residuals, are kept for the whole sweep.
    let floats = (c.n_layer as u64) * (r.clean.len() as u64) * (2 * c.d_model + c.q_dim()) as u64;
    let need = floats.saturating_mul(4);
    if need > crate::formats::limits::CAPTURE_BUDGET {
        return Err(Error::InvalidArgument(format!(
            "patching {} tokens keeps {need} bytes of activations, more than the {} allowed; use shorter prompts",
            r.clean.len(),
            crate::formats::limits::CAPTURE_BUDGET
        )));
    }
    Ok(())
}
