//! The sampler's parameters and logits from arbitrary bytes: invalid parameters and logits are
//! typed errors; valid ones give a token inside the vocabulary that the filter kept.
#![no_main]

use gptlens::sample::{
    filtered_probs, most_probable, most_probable_under, softmax_with_temperature, Sampler, SamplingParams,
};
use libfuzzer_sys::fuzz_target;

fn f32_at(data: &[u8], at: usize) -> f32 {
    data.get(at..at + 4).map_or(0.0, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_first_chunk::<26>() else { return };
    let temperature = f32_at(head, 0);
    let top_k = (head[4] & 1 == 1).then(|| u64::from_le_bytes(head[5..13].try_into().unwrap_or_default()) as usize);
    let top_p = (head[13] & 1 == 1).then(|| f32_at(head, 14));
    let seed = u64::from_le_bytes(head[18..26].try_into().unwrap_or_default());
    let logits: Vec<f32> = rest.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    let params = SamplingParams { temperature, top_k, top_p };

    let _ = softmax_with_temperature(&logits, temperature);
    if let Ok(probs) = filtered_probs(&logits, &params) {
        let listed = most_probable(&probs, top_k.unwrap_or(10));
        assert!(listed.iter().all(|&(i, p)| i < logits.len() && p > 0.0));
        // The candidates a UI lists, ranked among the survivors only: the same as from the whole distribution.
        assert_eq!(most_probable_under(&logits, &params, top_k.unwrap_or(10)).ok(), Some(listed));
    }
    let Ok(mut sampler) = Sampler::new(params, seed) else {
        assert!(params.validate().is_err());
        return;
    };
    for _ in 0..3 {
        match sampler.sample(&logits) {
            Ok(id) => assert!((id as usize) < logits.len(), "token {id} of {} logits", logits.len()),
            // Finite logits and valid parameters must always give a token.
            Err(e) => assert!(logits.is_empty() || logits.iter().any(|l| !l.is_finite()), "{e} for finite logits"),
        }
    }
});
