#![cfg(not(target_arch = "wasm32"))]
//! Long prompts: attention maps captured pooled (a size that does not grow with the prompt's
//! square) and any head's whole map remade from kept queries. Both are checked bit for bit
//! against the whole `hook_pattern` of a fresh run, through the edits a session sees while a
//! person types: extending, editing the middle, stepping, shortening.

mod common;

use std::sync::Arc;

use gptlens::model::{Config, Weights};
use gptlens::trace::{pooled_bin, Hook, POOLED_CELLS};
use gptlens::{CaptureSpec, Model, Session};

/// A small LLaMA (grouped keys, rotary positions) with a context long enough for bins of 16.
fn llama() -> Arc<Model> {
    let config = common::tiny_llama_config(97, 1100);
    Arc::new(Model { weights: Weights::random(&config, 11), config })
}

fn tokens(n: usize, seed: u32) -> Vec<u32> {
    (0..n as u32).map(|i| (i * 31 + seed * 17 + 3) % 97).collect()
}

fn pooled_spec(c: &Config) -> CaptureSpec {
    let names: Vec<String> = (0..c.n_layer).map(|l| Hook::AttnPatternPooled(l).to_string()).collect();
    CaptureSpec::from_names(&names, c).unwrap()
}

/// Every layer's whole `[H, T, T]` map, from a fresh session.
fn whole_maps(model: &Arc<Model>, tokens: &[u32]) -> Vec<Vec<f32>> {
    let c = &model.config;
    let names: Vec<String> = (0..c.n_layer).map(|l| Hook::AttnPattern(l).to_string()).collect();
    let trace = Session::new(Arc::clone(model)).run(tokens, &CaptureSpec::from_names(&names, c).unwrap()).unwrap();
    names.iter().map(|name| trace.get(name).unwrap().data.clone()).collect()
}

/// `[H, T, T]` max-pooled over square bins of `bin` positions: what the pooled hook must equal.
fn max_pool(map: &[f32], heads: usize, t: usize, bin: usize) -> Vec<f32> {
    let cells = t.div_ceil(bin);
    let mut pooled = vec![0.0f32; heads * cells * cells];
    for h in 0..heads {
        for q in 0..t {
            for k in 0..t {
                let cell = &mut pooled[(h * cells + q / bin) * cells + k / bin];
                *cell = cell.max(map[(h * t + q) * t + k]);
            }
        }
    }
    pooled
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn pooled_bins_are_powers_of_two_leaving_at_most_128_a_side() {
    assert_eq!(POOLED_CELLS, 128);
    for (t, bin) in [(1, 1), (128, 1), (129, 2), (256, 2), (257, 4), (4096, 32), (4097, 64), (8192, 64)] {
        assert_eq!(pooled_bin(t), bin, "{t} positions");
    }
}

#[test]
fn pooled_maps_are_the_whole_maps_max_pooled_through_every_edit() {
    let model = llama();
    let c = &model.config;
    let spec = pooled_spec(c);
    let mut session = Session::new(Arc::clone(&model));
    let long = tokens(1050, 1);
    let mut edited = long.clone();
    edited[100] = (edited[100] + 1) % 97;
    // (tokens, positions the run must compute): prefix reuse stops at a bin boundary before an
    // edit, extends without loss, and a prompt shorter than the bins allow starts over.
    let runs: Vec<(Vec<u32>, usize)> = vec![
        (long[..40].to_vec(), 40),
        (long[..130].to_vec(), 90),     // bins of 1 → 2: merged, nothing recomputed
        (edited[..130].to_vec(), 30),   // edit at 100 (a bin boundary)
        (edited[..300].to_vec(), 170),  // bins of 4
        (edited[..299].to_vec(), 3),    // one deleted: back to the bin of 4 holding position 298
        (edited[..120].to_vec(), 120),  // bins of 1 cannot be remade from bins of 4
        (edited[..1050].to_vec(), 930), // bins of 16
        (long[..1050].to_vec(), 1050 - 96),
    ];
    for (i, (run, computed)) in runs.iter().enumerate() {
        let trace = session.run(run, &spec).unwrap();
        assert_eq!(trace.computed, *computed, "run {i} ({} tokens) recomputed", run.len());
        let (t, bin) = (run.len(), pooled_bin(run.len()));
        for (l, map) in whole_maps(&model, run).iter().enumerate() {
            let got = trace.get(&Hook::AttnPatternPooled(l).to_string()).unwrap();
            let cells = t.div_ceil(bin);
            assert_eq!(got.shape, vec![c.n_head, cells, cells]);
            assert_eq!(bits(&got.data), bits(&max_pool(map, c.n_head, t, bin)), "run {i}, layer {l}");
        }
    }
    // A step keeps pooling (and widens the bins when it crosses 128 · bin).
    let mut session = Session::new(Arc::clone(&model));
    session.run(&long[..127], &spec).unwrap();
    session.step(long[127]).unwrap();
    session.step(long[128]).unwrap();
    let trace = session.run(&long[..129], &spec).unwrap();
    assert_eq!(trace.computed, 0);
    let map = &whole_maps(&model, &long[..129])[1];
    assert_eq!(bits(&trace.get("blocks.1.attn.hook_pattern.pooled").unwrap().data), bits(&max_pool(map, 4, 129, 2)));
}

#[test]
fn a_heads_map_is_remade_bit_for_bit_from_kept_queries() {
    let model = llama();
    let c = &model.config;
    let spec = pooled_spec(c);
    let mut session = Session::new(Arc::clone(&model));
    let error = session.head_pattern(0, 0).unwrap_err();
    assert!(error.to_string().contains("keep_queries(true)"), "{error}");
    session.keep_queries(true).unwrap();
    let long = tokens(400, 2);
    let mut edited = long[..300].to_vec();
    edited[150] = 5;
    for run in [&long[..200], &long[..300], &edited[..]] {
        session.run(run, &spec).unwrap();
        let t = run.len();
        for (l, map) in whole_maps(&model, run).iter().enumerate() {
            for h in 0..c.n_head {
                let got = session.head_pattern(l, h).unwrap();
                assert_eq!(got.shape, vec![t, t]);
                assert_eq!(bits(&got.data), bits(&map[h * t * t..(h + 1) * t * t]), "{t} tokens, head {l}.{h}");
            }
        }
    }
    session.step(9).unwrap();
    let mut stepped = edited.clone();
    stepped.push(9);
    let map = &whole_maps(&model, &stepped)[1];
    let t = stepped.len();
    assert_eq!(bits(&session.head_pattern(1, 3).unwrap().data), bits(&map[3 * t * t..]));
    let error = session.head_pattern(2, 0).unwrap_err();
    assert!(error.to_string().contains("not in this model"), "{error}");
    let error = session.head_pattern(0, 4).unwrap_err();
    assert!(error.to_string().contains("not in this model"), "{error}");
    // The kept queries count in the capture budget: n_layer · T · H · d_head floats.
    let mut session = Session::new(Arc::clone(&model));
    session.keep_queries(true).unwrap();
    session.set_capture_budget((2 * 100 * 32 * 4 - 1) as u64);
    let error = session.run(&long[..100], &CaptureSpec::none()).unwrap_err();
    assert!(matches!(error, gptlens::Error::CaptureOverBudget { .. }), "{error}");
    session.set_capture_budget((2 * 100 * 32 * 4) as u64);
    session.run(&long[..100], &CaptureSpec::none()).unwrap();
}
