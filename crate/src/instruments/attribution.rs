//! Where a prediction forms: the logit lens (what each layer's residual would predict) and direct
//! logit attribution (what each head and MLP adds to one logit difference).
//!
//! **Logit lens** ([`LogitLens`]): the final norm — with each row's own statistics — and the
//! unembedding applied to `blocks.{l}.hook_resid_pre` of every layer and to the last
//! `hook_resid_post` (row `n_layer`, the model's own prediction), at a range of positions.
//!
//! **Direct logit attribution** ([`Attribution`]), TransformerLens's convention: the residual
//! entering the final norm at position `p` is a sum of parts — the token embedding, the position
//! embedding (GPT-2), every head's `hook_result`, every attention output bias, every
//! `hook_mlp_out` — and the final norm is linear in them once its scale is frozen at the value
//! the run computed (`ln_final.hook_scale[p]`; a LayerNorm also centres each part). A part's
//! attribution is its normed value dotted with `W_U[answer] − W_U[wrong]`; with the final norm's
//! bias as one more row the parts sum to the logit difference.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::instruments::{report, Ablation};
use crate::kernels::pool::run_as_team;
use crate::model::forward::{lens_logits, Activations, CHUNK};
use crate::model::{Model, Session};
use crate::sample::{most_probable, softmax_with_temperature};
use crate::trace::{CaptureSpec, Hook, NormSite};

/// One layer and position of the lens as it is read: the top tokens, the probability of the final
/// top token, and of the target.
type LensCell = (Vec<(u32, f32)>, f32, Option<f32>);

/// The logit lens at positions `first..T`: per layer (`n_layer + 1` rows, the last the model's
/// output) and position, the most probable tokens and the probability of chosen tokens.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LogitLens {
    pub tokens: Vec<u32>,
    pub first: usize,
    /// `[n_layer + 1][positions][k]`: `(id, probability)`, most probable first.
    pub top: Vec<Vec<Vec<(u32, f32)>>>,
    /// The model's own top token at each position (row `n_layer`'s first).
    pub final_top: Vec<u32>,
    /// `[n_layer + 1][positions]`: the probability each layer gives `final_top`.
    pub final_top_prob: Vec<Vec<f32>>,
    /// The reader's token, and the probability each layer gives it, `[n_layer + 1][positions]`.
    pub target: Option<u32>,
    pub target_prob: Option<Vec<Vec<f32>>>,
}

impl LogitLens {
    /// Runs `tokens` on the CPU with `ablation` and reads the lens at positions `first..` (`k`
    /// tokens each). `progress(done, total)` follows its steps (the run, then each layer);
    /// returning false stops it with [`Error::Cancelled`].
    pub fn compute(
        model: &Arc<Model>,
        ablation: &Ablation,
        tokens: &[u32],
        first: usize,
        k: usize,
        target: Option<u32>,
        progress: &mut dyn FnMut(usize, usize) -> bool,
    ) -> Result<LogitLens> {
        let c = &model.config;
        if !c.has_head() {
            return Err(Error::InvalidArgument(
                "the logit lens reads tokens through the LM head; an encoder has none".into(),
            ));
        }
        if tokens.is_empty() {
            return Err(Error::EmptyInput);
        }
        if first >= tokens.len() {
            return Err(Error::InvalidArgument(format!(
                "the lens starts at position {first}, past the last token (position {})",
                tokens.len().saturating_sub(1)
            )));
        }
        if let Some(id) = target.filter(|&id| id as usize >= c.vocab_size) {
            return Err(Error::TokenOutOfRange { id, vocab: c.vocab_size });
        }
        let last = Hook::ResidPost(c.n_layer - 1);
        let names: Vec<String> = (0..c.n_layer).map(Hook::ResidPre).chain([last]).map(|h| h.to_string()).collect();
        let trace = ablated_session(model, ablation)?.run(tokens, &CaptureSpec::from_names(&names, c)?)?;
        let total = c.n_layer + 2;
        report(progress, 1, total)?;
        let d = c.d_model;
        let positions = tokens.len() - first;
        let mut acts = Activations::new(c);
        // Each layer's distribution at each position, reduced to what is kept as it is made (a
        // vocabulary per layer and position would be gigabytes): the output row first, since
        // every other row reports the probability of its top token.
        let mut layer_rows = |name: &String, final_top: &[u32]| -> Result<Vec<LensCell>> {
            let rows = trace.get(name).map(|t| &t.data[first * d..]).unwrap_or(&[]);
            let mut out = Vec::with_capacity(positions);
            for chunk in rows.chunks(CHUNK * d) {
                let logits = run_as_team(|| lens_logits(model, &mut acts, chunk));
                for row in logits.chunks_exact(c.vocab_size) {
                    let probs = softmax_with_temperature(row, 1.0)?;
                    let best: Vec<(u32, f32)> =
                        most_probable(&probs, k.max(1)).into_iter().map(|(i, q)| (i as u32, q)).collect();
                    let p = out.len();
                    let own_top = best.first().map_or(0, |&(id, _)| id);
                    let final_id = final_top.get(p).copied().unwrap_or(own_top);
                    out.push((best, probs[final_id as usize], target.map(|id| probs[id as usize])));
                }
            }
            Ok(out)
        };
        let output = layer_rows(&names[c.n_layer], &[])?;
        report(progress, 2, total)?;
        let final_top: Vec<u32> = output.iter().map(|(best, _, _)| best.first().map_or(0, |&(id, _)| id)).collect();
        let mut layers = Vec::with_capacity(c.n_layer + 1);
        for (l, name) in names[..c.n_layer].iter().enumerate() {
            layers.push(layer_rows(name, &final_top)?);
            report(progress, 3 + l, total)?;
        }
        layers.push(output);
        let top = layers
            .iter()
            .map(|rows| rows.iter().map(|(best, _, _)| best[..k.min(best.len())].to_vec()).collect())
            .collect();
        let final_top_prob = layers.iter().map(|rows| rows.iter().map(|r| r.1).collect()).collect();
        let target_prob =
            target.map(|_| layers.iter().map(|rows| rows.iter().map(|r| r.2.unwrap_or(0.0)).collect()).collect());
        Ok(LogitLens { tokens: tokens.to_vec(), first, top, final_top, final_top_prob, target, target_prob })
    }
}

fn ablated_session(model: &Arc<Model>, ablation: &Ablation) -> Result<Session> {
    let mut session = Session::new(Arc::clone(model));
    session.set_ablation(ablation.clone())?;
    Ok(session)
}

/// Each part's direct contribution to `logit[answer] − logit[wrong]` at one position.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Attribution {
    pub position: usize,
    pub answer: u32,
    pub wrong: u32,
    /// The run's own logit difference.
    pub logit_diff: f32,
    pub embed: f32,
    /// GPT-2's learned positions; 0 for rotary models.
    pub pos_embed: f32,
    /// `[n_layer][n_head]`.
    pub heads: Vec<Vec<f32>>,
    /// The output projection's bias of each layer (0 without one).
    pub attn_bias: Vec<f32>,
    pub mlps: Vec<f32>,
    /// The final norm's bias (0 for RMSNorm).
    pub final_bias: f32,
    /// The sum of every part: equals `logit_diff` up to rounding.
    pub total: f32,
}

impl Attribution {
    /// Runs `tokens` on the CPU with `ablation` and attributes at `position` (default: the last);
    /// `answer`/`wrong` default to the model's first and second choice there.
    pub fn compute(
        model: &Arc<Model>,
        ablation: &Ablation,
        tokens: &[u32],
        position: Option<usize>,
        answer: Option<u32>,
        wrong: Option<u32>,
    ) -> Result<Attribution> {
        let Model { config: c, weights: w } = model.as_ref();
        let (Some(output), Some(output_norm)) = (w.output, w.output_norm) else {
            return Err(Error::InvalidArgument(
                "direct logit attribution reads the residual through the final norm and the LM head; a post-LN \
                 model normalises the residual inside every block (and an encoder has no head), so its parts do not add up"
                    .into(),
            ));
        };
        if c.arch.gemma_norms() {
            return Err(Error::InvalidArgument(
                "direct logit attribution needs a residual that is a sum of its parts; Gemma's post-attention and \
                 post-MLP norms rescale each layer's output, so its heads' parts do not add up"
                    .into(),
            ));
        }
        if tokens.is_empty() {
            return Err(Error::EmptyInput);
        }
        let p = position.unwrap_or(tokens.len() - 1);
        if p >= tokens.len() {
            return Err(Error::InvalidArgument(format!("position {p} is past the last token")));
        }
        let (d, heads) = (c.d_model, c.n_head);
        let mut hooks = vec![Hook::Logits, Hook::NormScale(NormSite::Final), Hook::ResidPre(0)];
        if c.arch.norm_has_mean() {
            hooks.push(Hook::NormMean(NormSite::Final));
        }
        for l in 0..c.n_layer {
            hooks.extend([Hook::AttnResult(l), Hook::MlpOut(l)]);
        }
        let names: Vec<String> = hooks.iter().map(Hook::to_string).collect();
        // Only positions up to p matter: later ones cannot change it.
        let trace = ablated_session(model, ablation)?.run(&tokens[..=p], &CaptureSpec::from_names(&names, c)?)?;
        let at = |hook: Hook, width: usize| -> &[f32] {
            trace.get(&hook.to_string()).map_or(&[][..], |t| &t.data[p * width..(p + 1) * width])
        };
        let logits = &trace.last_logits;
        let ranked = most_probable(&softmax_with_temperature(logits, 1.0)?, 2);
        let pick = |given: Option<u32>, rank: usize| -> Result<u32> {
            match given {
                Some(id) if id as usize >= c.vocab_size => Err(Error::TokenOutOfRange { id, vocab: c.vocab_size }),
                Some(id) => Ok(id),
                None => ranked
                    .get(rank)
                    .map(|&(id, _)| id as u32)
                    .ok_or_else(|| Error::InvalidArgument("the model has fewer than two tokens to compare".into())),
            }
        };
        let (answer, wrong) = (pick(answer, 0)?, pick(wrong, 1)?);
        let logit_diff = logits[answer as usize] - logits[wrong as usize];

        // The direction a normed part is read along: γ ⊙ (W_U[answer] − W_U[wrong]).
        let (mut unembed_answer, mut unembed_wrong) = (vec![0f32; d], vec![0f32; d]);
        w.row(&output, answer as usize, &mut unembed_answer);
        w.row(&output, wrong as usize, &mut unembed_wrong);
        let delta: Vec<f32> = unembed_answer.iter().zip(&unembed_wrong).map(|(a, b)| a - b).collect();
        let gamma = w.get(output_norm.weight);
        let direction: Vec<f64> = gamma.iter().zip(&delta).map(|(g, x)| f64::from(g * x)).collect();
        let scale = f64::from(at(Hook::NormScale(NormSite::Final), 1)[0]);
        let centred = c.arch.norm_has_mean();
        let contribution = |part: &[f32]| -> f32 {
            let mean = if centred { part.iter().map(|&x| f64::from(x)).sum::<f64>() / d as f64 } else { 0.0 };
            let dot: f64 = part.iter().zip(&direction).map(|(&x, g)| (f64::from(x) - mean) * g).sum();
            (dot / scale) as f32
        };

        let mut token_row = vec![0f32; d];
        w.row(&w.token_embd, tokens[p] as usize, &mut token_row);
        if let Some(s) = c.embedding_scale() {
            token_row.iter_mut().for_each(|x| *x *= s);
        }
        let embed = contribution(&token_row);
        let pos_embed = match &w.position_embd {
            Some(wpe) => {
                let mut row = vec![0f32; d];
                w.row(wpe, p, &mut row);
                contribution(&row)
            }
            None => 0.0,
        };
        let heads_part: Vec<Vec<f32>> = (0..c.n_layer)
            .map(|l| at(Hook::AttnResult(l), heads * d).chunks_exact(d).map(contribution).collect())
            .collect();
        let attn_bias: Vec<f32> =
            w.layers.iter().map(|lw| lw.attn_output.bias.map_or(0.0, |b| contribution(w.get(b)))).collect();
        let mlps: Vec<f32> = (0..c.n_layer).map(|l| contribution(at(Hook::MlpOut(l), d))).collect();
        let final_bias = output_norm.bias.map_or(0.0, |b| {
            w.get(b).iter().zip(&delta).map(|(&b, &x)| f64::from(b) * f64::from(x)).sum::<f64>() as f32
        });
        let total = embed
            + pos_embed
            + heads_part.iter().flatten().sum::<f32>()
            + attn_bias.iter().sum::<f32>()
            + mlps.iter().sum::<f32>()
            + final_bias;
        Ok(Attribution {
            position: p,
            answer,
            wrong,
            logit_diff,
            embed,
            pos_embed,
            heads: heads_part,
            attn_bias,
            mlps,
            final_bias,
            total,
        })
    }
}
