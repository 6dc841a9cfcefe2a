//! Choosing the next token: temperature, top-k, top-p, greedy, with a seeded generator whose
//! stream is the same on every platform (same seed → same text natively and in the browser).

use crate::error::{Error, Result};

/// SplitMix64: tiny, fast, and fully specified here, so no dependency upgrade can change which
/// text a seed produces.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The generator's position: `Rng::new(rng.state())` continues where `rng` is.
    pub fn state(&self) -> u64 {
        self.state
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 24 random bits (every value exactly representable).
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// How to turn logits into a choice. `temperature == 0` means greedy (argmax).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SamplingParams {
    pub temperature: f32,
    /// Keep only the `k` most probable tokens.
    pub top_k: Option<usize>,
    /// Keep the smallest set of most probable tokens whose probability reaches `p`.
    pub top_p: Option<f32>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self { temperature: 1.0, top_k: None, top_p: None }
    }
}

impl SamplingParams {
    pub fn greedy() -> Self {
        Self { temperature: 0.0, top_k: None, top_p: None }
    }

    pub fn validate(&self) -> Result<()> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(Error::InvalidArgument(format!("temperature {} must be ≥ 0", self.temperature)));
        }
        if self.top_k == Some(0) {
            return Err(Error::InvalidArgument("top-k must be at least 1".into()));
        }
        if let Some(p) = self.top_p {
            if !(p > 0.0 && p <= 1.0) {
                return Err(Error::InvalidArgument(format!("top-p {p} must be in (0, 1]")));
            }
        }
        Ok(())
    }
}

/// Softmax of `logits / temperature`; temperature 0 puts all mass on the argmax.
pub fn softmax_with_temperature(logits: &[f32], temperature: f32) -> Result<Vec<f32>> {
    SamplingParams { temperature, top_k: None, top_p: None }.validate()?;
    let mut probs = vec![0.0; logits.len()];
    if temperature == 0.0 {
        probs[argmax(logits)?] = 1.0;
        return Ok(probs);
    }
    let max = crate::kernels::largest(logits);
    if !max.is_finite() {
        return Err(Error::InvalidArgument("the logits are not finite numbers".into()));
    }
    for (p, &l) in probs.iter_mut().zip(logits) {
        *p = (l - max) / temperature;
    }
    crate::kernels::exp_in_place(&mut probs);
    let mut total = 0.0f64;
    for &p in &probs {
        total += f64::from(p);
    }
    for p in &mut probs {
        *p = (f64::from(*p) / total) as f32;
    }
    Ok(probs)
}

/// The distribution sampling draws from: tempered softmax with tokens outside top-k / top-p set
/// to zero and the rest renormalised. This is what a UI shows as "the tokens that survive".
pub fn filtered_probs(logits: &[f32], params: &SamplingParams) -> Result<Vec<f32>> {
    params.validate()?;
    let probs = softmax_with_temperature(logits, params.temperature)?;
    if params.top_k.is_none() && params.top_p.is_none() {
        return Ok(probs);
    }
    let mut kept = vec![0.0; probs.len()];
    for (i, p) in survivors(&probs, params) {
        kept[i] = p;
    }
    Ok(kept)
}

/// The `k` tokens most probable under `params` as `(id, probability)`, highest first (ties by id),
/// the probabilities those of `filtered_probs`; tokens a filter removed are left out. Only the
/// survivors are ranked and renormalised, never the whole vocabulary: the candidates a UI lists
/// on every keystroke.
pub fn most_probable_under(logits: &[f32], params: &SamplingParams, k: usize) -> Result<Vec<(usize, f32)>> {
    params.validate()?;
    let probs = softmax_with_temperature(logits, params.temperature)?;
    if params.top_k.is_none() && params.top_p.is_none() {
        return Ok(most_probable(&probs, k));
    }
    let mut kept = survivors(&probs, params);
    // Renormalising can round two different probabilities to one value: those rank by id, as
    // `most_probable` ranks `filtered_probs`. The list is otherwise in order already, so the sort
    // only reorders runs of equal values (near-linear on sorted input).
    kept.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(kept.into_iter().take(k).take_while(|&(_, p)| p > 0.0).collect())
}

/// The tokens top-k and top-p keep, most probable first, with their probabilities renormalised
/// over the survivors.
fn survivors(probs: &[f32], params: &SamplingParams) -> Vec<(usize, f32)> {
    let order = kept_order(probs, params);
    let total: f64 = order.iter().map(|&i| f64::from(probs[i])).sum();
    order.into_iter().map(|i| (i, (f64::from(probs[i]) / total) as f32)).collect()
}

/// The ids top-k and top-p keep, most probable first. Top-p ranks only as far as its mass takes
/// it: the first 256 tokens, then 8 times as many, until the mass is reached (usually at once),
/// instead of ranking the whole vocabulary.
fn kept_order(probs: &[f32], params: &SamplingParams) -> Vec<usize> {
    let limit = params.top_k.map_or(probs.len(), |k| k.min(probs.len()));
    let Some(p) = params.top_p else { return top_indices(probs, limit) };
    let mut ranked = limit.min(256);
    loop {
        let mut order = top_indices(probs, ranked);
        let mut cumulative = 0.0f64;
        let needed = order.iter().position(|&i| {
            cumulative += f64::from(probs[i]);
            cumulative >= f64::from(p)
        });
        if let Some(last) = needed {
            order.truncate(last + 1);
            return order;
        }
        if ranked == limit {
            return order;
        }
        ranked = ranked.saturating_mul(8).min(limit);
    }
}

/// A token's place in the ranking: `a < b` when `a` ranks first (more probable; on a tie, the
/// lower id), so a max-heap keeps the worst of those kept on top.
#[derive(Clone, Copy, PartialEq)]
struct Ranked {
    prob: f32,
    id: usize,
}

impl Eq for Ranked {}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.prob.total_cmp(&self.prob).then(self.id.cmp(&other.id))
    }
}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The `k` most probable token ids, highest first; ties go to the lower id, so the order is total
/// and reproducible. Neither way sorts the whole vocabulary: a few (the 12 a UI lists) are kept in
/// a heap during one pass, most tokens costing one comparison; more (the 1,000 survivors it counts)
/// are narrowed to a few more than `k` candidates by a histogram, then selected among those.
fn top_indices(probs: &[f32], k: usize) -> Vec<usize> {
    let k = k.min(probs.len());
    if k == 0 {
        return Vec::new();
    }
    if k <= 64 {
        let mut kept = std::collections::BinaryHeap::with_capacity(k + 1);
        for (id, &prob) in probs.iter().enumerate() {
            let token = Ranked { prob, id };
            if kept.len() < k {
                kept.push(token);
            } else if let Some(mut worst) = kept.peek_mut() {
                if token < *worst {
                    *worst = token;
                }
            }
        }
        return kept.into_sorted_vec().into_iter().map(|token| token.id).collect();
    }
    let by_rank = |a: &usize, b: &usize| probs[*b].total_cmp(&probs[*a]).then(a.cmp(b));
    let mut order = candidates(probs, k);
    if k < order.len() {
        order.select_nth_unstable_by(k, by_rank);
        order.truncate(k);
    }
    order.sort_by(by_rank);
    order
}

/// Every token that can be among the `k` most probable (k ≥ 1): the probabilities' top 12 bits,
/// made to order as the numbers do (`f32::total_cmp`'s order), bin them; the bin the k-th falls in
/// and those above it hold the candidates.
fn candidates(probs: &[f32], k: usize) -> Vec<usize> {
    const BITS: u32 = 12;
    let bin = |prob: f32| {
        let bits = prob.to_bits();
        let ordered = if bits >> 31 == 1 { !bits } else { bits | 0x8000_0000 };
        (ordered >> (32 - BITS)) as usize
    };
    let mut counts = vec![0usize; 1 << BITS];
    for &prob in probs {
        counts[bin(prob)] += 1;
    }
    let mut above = 0;
    let mut threshold = 0;
    for (b, &count) in counts.iter().enumerate().rev() {
        above += count;
        if above >= k {
            threshold = b;
            break;
        }
    }
    (0..probs.len()).filter(|&i| bin(probs[i]) >= threshold).collect()
}

/// The `k` most probable tokens as `(id, probability)`, highest first (ties by id), leaving out tokens with
/// no probability at all (those a sampling filter removed): the candidates a UI lists.
pub fn most_probable(probs: &[f32], k: usize) -> Vec<(usize, f32)> {
    top_indices(probs, k).into_iter().map(|i| (i, probs[i])).take_while(|&(_, p)| p > 0.0).collect()
}

/// Index of the largest logit (the first one on ties).
pub fn argmax(logits: &[f32]) -> Result<usize> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &l) in logits.iter().enumerate() {
        if l.is_nan() {
            return Err(Error::InvalidArgument("the logits contain NaN".into()));
        }
        if best.is_none_or(|(_, b)| l > b) {
            best = Some((i, l));
        }
    }
    best.map(|(i, _)| i).ok_or_else(|| Error::InvalidArgument("no logits to choose from".into()))
}

/// A sampling policy with its own random stream.
#[derive(Clone, Debug)]
pub struct Sampler {
    params: SamplingParams,
    rng: Rng,
}

impl Sampler {
    pub fn new(params: SamplingParams, seed: u64) -> Result<Self> {
        params.validate()?;
        Ok(Self { params, rng: Rng::new(seed) })
    }

    /// Changes the policy for the next draws; the random stream goes on where it was.
    pub fn set_params(&mut self, params: SamplingParams) -> Result<()> {
        params.validate()?;
        self.params = params;
        Ok(())
    }

    pub fn sample(&mut self, logits: &[f32]) -> Result<u32> {
        let id = if self.params.temperature == 0.0 {
            argmax(logits)?
        } else {
            let probs = filtered_probs(logits, &self.params)?;
            let r = f64::from(self.rng.next_f32());
            let mut cumulative = 0.0f64;
            // Falls back to the last surviving token if rounding leaves r above the total.
            let mut chosen = argmax(&probs)?;
            for (i, &p) in probs.iter().enumerate() {
                if p > 0.0 {
                    cumulative += f64::from(p);
                    chosen = i;
                    if r < cumulative {
                        break;
                    }
                }
            }
            chosen
        };
        u32::try_from(id).map_err(|_| Error::InvalidArgument("vocabulary too large".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `sampler` fuzz target: tokens 0 and 2 are different before top-p renormalises
    /// them and equal after, and were listed 2 before 0 (ranked by the values before).
    #[test]
    fn survivors_equal_after_renormalising_are_ranked_by_id() {
        let logits = [0x00c0_a000, 0x38d3_f7ac, 0x3333_0000, 0x0000_3d3d].map(f32::from_bits);
        let params = SamplingParams {
            temperature: f32::from_bits(0x3f2a_cccd),
            top_k: Some(usize::MAX),
            top_p: Some(f32::from_bits(0x3f22_9eed)),
        };
        let listed = most_probable(&filtered_probs(&logits, &params).unwrap(), 10);
        assert_eq!(listed.iter().map(|&(i, _)| i).collect::<Vec<_>>(), [1, 0, 2]);
        assert_eq!(most_probable_under(&logits, &params, 10).unwrap(), listed);
    }

    #[test]
    fn the_stream_is_pinned() {
        // SplitMix64's published first output for seed 0.
        assert_eq!(Rng::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn greedy_takes_the_first_maximum() {
        let mut s = Sampler::new(SamplingParams::greedy(), 1).unwrap();
        assert_eq!(s.sample(&[0.1, 3.0, 3.0, -1.0]).unwrap(), 1);
    }

    /// probs of [ln 4, ln 3, ln 2, ln 1] = [0.4, 0.3, 0.2, 0.1]
    /// top-k 2  → [4/7, 3/7, 0, 0]
    /// top-p 0.8 → keeps 0.4 + 0.3 + 0.2 = 0.9 ≥ 0.8 → [4/9, 3/9, 2/9, 0]
    /// Partial selection gives exactly the head of a full sort, ties by id included.
    #[test]
    fn the_top_k_is_the_head_of_the_full_ranking() {
        let mut rng = Rng::new(5);
        let probs: Vec<f32> = (0..5000).map(|_| (rng.next_f32() * 50.0).floor() / 50.0).collect();
        let mut full: Vec<usize> = (0..probs.len()).collect();
        full.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
        for k in [0, 1, 7, 64, 65, 600, 1000, 4999, 5000, 6000] {
            assert_eq!(top_indices(&probs, k), full[..k.min(full.len())], "k = {k}");
        }
    }

    /// Top-p ranks in widening steps (256, then ×8): every step count gives what one ranking of
    /// the whole vocabulary gives, and the candidates a UI lists are those of the full distribution.
    #[test]
    fn top_p_ranked_in_steps_keeps_what_a_full_ranking_keeps() {
        let mut rng = Rng::new(9);
        // Nearly flat logits: top-p 0.9 needs most of the 5,000 tokens (three widening steps).
        let logits: Vec<f32> = (0..5000).map(|_| (rng.next_f32() * 40.0).floor() / 400.0).collect();
        for params in [
            SamplingParams { top_p: Some(0.9), ..Default::default() },
            SamplingParams { top_p: Some(0.01), ..Default::default() },
            SamplingParams { top_p: Some(1.0), top_k: Some(3000), temperature: 0.7 },
            SamplingParams { top_k: Some(40), ..Default::default() },
        ] {
            let probs = softmax_with_temperature(&logits, params.temperature).unwrap();
            let mut full: Vec<usize> = (0..probs.len()).collect();
            full.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
            full.truncate(params.top_k.unwrap_or(full.len()));
            let mut cumulative = 0.0f64;
            let p = f64::from(params.top_p.unwrap_or(1.0));
            let keep = full.iter().position(|&i| {
                cumulative += f64::from(probs[i]);
                cumulative >= p
            });
            full.truncate(keep.map_or(full.len(), |last| last + 1));
            assert_eq!(kept_order(&probs, &params), full, "{params:?}");
            let filtered = filtered_probs(&logits, &params).unwrap();
            for k in [1, 12, 1000] {
                assert_eq!(
                    most_probable_under(&logits, &params, k).unwrap(),
                    most_probable(&filtered, k),
                    "{params:?}, k = {k}"
                );
            }
        }
    }

    #[test]
    fn top_k_and_top_p_keep_the_right_tokens() {
        let logits = [4f32.ln(), 3f32.ln(), 2f32.ln(), 0.0];
        let k = filtered_probs(&logits, &SamplingParams { top_k: Some(2), ..Default::default() }).unwrap();
        assert!((k[0] - 4. / 7.).abs() < 1e-6 && (k[1] - 3. / 7.).abs() < 1e-6 && k[2] == 0. && k[3] == 0.);
        let p = filtered_probs(&logits, &SamplingParams { top_p: Some(0.8), ..Default::default() }).unwrap();
        assert!((p[0] - 4. / 9.).abs() < 1e-6 && (p[2] - 2. / 9.).abs() < 1e-6 && p[3] == 0.);
    }

    #[test]
    fn sampling_follows_the_distribution_and_the_seed() {
        let logits = [4f32.ln(), 3f32.ln(), 2f32.ln(), 0.0];
        let draw = |seed| {
            let mut s = Sampler::new(SamplingParams::default(), seed).unwrap();
            (0..4000).map(|_| s.sample(&logits).unwrap()).collect::<Vec<_>>()
        };
        let a = draw(7);
        assert_eq!(a, draw(7));
        assert_ne!(a, draw(8));
        let share = a.iter().filter(|&&t| t == 0).count() as f32 / a.len() as f32;
        assert!((share - 0.4).abs() < 0.03, "{share}");
    }

    #[test]
    fn most_probable_ranks_ties_by_id_and_skips_filtered_tokens() {
        let probs = [0.25, 0.0, 0.5, 0.25, 0.0];
        assert_eq!(most_probable(&probs, 3), [(2, 0.5), (0, 0.25), (3, 0.25)]);
        assert_eq!(most_probable(&probs, 10).len(), 3, "zero-probability tokens are not candidates");
    }

    #[test]
    fn new_params_keep_the_random_stream_going() {
        let logits = [0.0; 16];
        let mut switched = Sampler::new(SamplingParams { top_k: Some(2), ..Default::default() }, 3).unwrap();
        switched.sample(&logits).unwrap();
        switched.set_params(SamplingParams::default()).unwrap();
        let mut steady = Sampler::new(SamplingParams::default(), 3).unwrap();
        steady.sample(&logits).unwrap();
        let draws = |s: &mut Sampler| (0..20).map(|_| s.sample(&logits).unwrap()).collect::<Vec<_>>();
        assert_eq!(draws(&mut switched), draws(&mut steady));
        assert!(switched.set_params(SamplingParams { top_p: Some(2.0), ..Default::default() }).is_err());
    }

    #[test]
    fn rejects_bad_parameters() {
        for p in [
            SamplingParams { temperature: -1.0, ..Default::default() },
            SamplingParams { temperature: f32::NAN, ..Default::default() },
            SamplingParams { top_k: Some(0), ..Default::default() },
            SamplingParams { top_p: Some(1.5), ..Default::default() },
        ] {
            assert!(Sampler::new(p, 0).is_err());
        }
    }
}
