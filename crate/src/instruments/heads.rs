//! Head detectors: every attention head scored for four patterns TransformerLens's
//! `detect_head` popularised, from `blocks.{l}.attn.hook_pattern` (`A[h, q, k]`, each row summing
//! to 1) and the tokens `t`:
//!
//! * `previous_token`: the mean over queries `q ≥ 1` of `A[q, q−1]`;
//! * `first_token`: the mean over `q ≥ 1` of `A[q, 0]` (an attention sink);
//! * `duplicate_token`: the mean, over queries `q` whose token appeared before (some `k < q` with
//!   `t_k = t_q`), of `Σ A[q, k]` over those `k`;
//! * `induction`: the mean over the same queries of `Σ A[q, k+1]` over those `k` — attention to
//!   the token that followed the earlier occurrence.
//!
//! A score with no qualifying query is 0. On a sequence without repeats only the first two say
//! anything, so heads are usually scored on [`repeated_random_tokens`]: a random half, twice.

use crate::error::{Error, Result};
use crate::model::Config;
use crate::sample::Rng;
use crate::trace::{Hook, Trace};

/// Each detector's score for every head, `[n_layer][n_head]`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HeadScores {
    pub previous_token: Vec<Vec<f32>>,
    pub first_token: Vec<Vec<f32>>,
    pub duplicate_token: Vec<Vec<f32>>,
    pub induction: Vec<Vec<f32>>,
}

/// How long the random half of [`repeated_random_tokens`] is at most.
pub const REPEATED_HALF: usize = 50;

/// The default sequence for the head detectors: `n = min(50, context / 2)` ids drawn with
/// [`Rng::new(seed)`](Rng) as `next_u64() % vocab_size`, then the same `n` ids again. In the
/// second half every token repeats, so duplicate-token and induction heads show.
pub fn repeated_random_tokens(config: &Config, seed: u64) -> Vec<u32> {
    let n = REPEATED_HALF.min(config.n_ctx / 2);
    let mut rng = Rng::new(seed);
    let vocab = config.vocab_size.max(1) as u64;
    // vocab_size is capped far below 2^32 (formats::limits), so the id fits.
    let half: Vec<u32> = (0..n).map(|_| (rng.next_u64() % vocab) as u32).collect();
    [half.as_slice(), half.as_slice()].concat()
}

impl HeadScores {
    /// The scores from a trace that captured every layer's `hook_pattern`.
    pub fn from_trace(trace: &Trace, config: &Config) -> Result<HeadScores> {
        let t = trace.tokens.len();
        let mut scores = HeadScores {
            previous_token: Vec::with_capacity(config.n_layer),
            first_token: Vec::with_capacity(config.n_layer),
            duplicate_token: Vec::with_capacity(config.n_layer),
            induction: Vec::with_capacity(config.n_layer),
        };
        // Each query's earlier occurrences of its token, found once for every head.
        let earlier: Vec<Vec<usize>> =
            (0..t).map(|q| (0..q).filter(|&k| trace.tokens[k] == trace.tokens[q]).collect()).collect();
        let repeats = earlier.iter().filter(|ks| !ks.is_empty()).count();
        let mean = |sum: f64, n: usize| if n == 0 { 0.0 } else { (sum / n as f64) as f32 };
        for layer in 0..config.n_layer {
            let name = Hook::AttnPattern(layer).to_string();
            let pattern = trace.get(&name).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "the head detectors need `{name}` captured (every layer's hook_pattern)"
                ))
            })?;
            if pattern.shape != [config.n_head, t, t] {
                return Err(Error::InvalidArgument(format!(
                    "`{name}` has shape {:?}, expected [{}, {t}, {t}]",
                    pattern.shape, config.n_head
                )));
            }
            let row = |kind: fn(&[f32], usize, &[usize]) -> Option<f64>, queries: usize| -> Vec<f32> {
                (0..config.n_head)
                    .map(|h| {
                        let head = &pattern.data[h * t * t..(h + 1) * t * t];
                        let sum: f64 = (0..t).filter_map(|q| kind(&head[q * t..(q + 1) * t], q, &earlier[q])).sum();
                        mean(sum, queries)
                    })
                    .collect()
            };
            let after_first = t.saturating_sub(1);
            scores.previous_token.push(row(|a, q, _| q.checked_sub(1).map(|k| f64::from(a[k])), after_first));
            scores.first_token.push(row(|a, q, _| (q >= 1).then(|| f64::from(a[0])), after_first));
            scores
                .duplicate_token
                .push(row(|a, _, ks| (!ks.is_empty()).then(|| ks.iter().map(|&k| f64::from(a[k])).sum()), repeats));
            scores
                .induction
                .push(row(|a, _, ks| (!ks.is_empty()).then(|| ks.iter().map(|&k| f64::from(a[k + 1])).sum()), repeats));
        }
        Ok(scores)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::trace::Tensor;

    /// One layer, two heads over tokens `a b a b`: head 0 looks at the previous token, head 1 at
    /// the token after the last earlier occurrence (an induction head), else at itself.
    #[test]
    fn scores_follow_their_definitions() {
        let tokens = vec![7, 8, 7, 8];
        let t = tokens.len();
        let mut data = vec![0f32; 2 * t * t];
        for q in 0..t {
            data[q * t + q.saturating_sub(1)] = 1.0;
        }
        let induction_target = [0, 1, 1, 2]; // q=2 (a): after the earlier a is k=1; q=3 (b): k=2
        for q in 0..t {
            data[t * t + q * t + induction_target[q]] = 1.0;
        }
        let config = Config { n_layer: 1, n_head: 2, n_ctx: 64, ..Config::gpt2_small() };
        let tensors = BTreeMap::from([(Hook::AttnPattern(0).to_string(), Tensor { shape: vec![2, t, t], data })]);
        let trace = Trace { tokens, last_logits: vec![], computed: t, tensors };
        let s = HeadScores::from_trace(&trace, &config).unwrap();
        assert_eq!(s.previous_token, [[1.0, 2.0 / 3.0]]);
        assert_eq!(s.first_token, [[1.0 / 3.0, 0.0]]);
        // Queries 2 and 3 repeat; head 0 gives them 0 and 0 on their duplicates (k = 0, 1)…
        assert_eq!(s.duplicate_token, [[0.0, 0.0]]);
        // …and head 1 puts all its weight after them.
        assert_eq!(s.induction[0][1], 1.0);
        assert_eq!(s.induction[0][0], 1.0, "previous token of a b a b is also the induction target");
    }

    #[test]
    fn the_repeated_sequence_is_a_half_twice() {
        let config = Config { vocab_size: 1000, n_ctx: 64, ..Config::gpt2_small() };
        let tokens = repeated_random_tokens(&config, 3);
        assert_eq!(tokens.len(), 2 * 32);
        assert_eq!(tokens[..32], tokens[32..]);
        assert!(tokens.iter().all(|&id| id < 1000));
        assert_eq!(tokens, repeated_random_tokens(&config, 3));
        assert_ne!(tokens, repeated_random_tokens(&config, 4));
    }
}
