//! The head detectors against PyTorch: scores computed by tests/fixtures/heads/make_head_scores.py
//! from transformers' attention probabilities, on each fixture's prompt and on the detectors'
//! default sequence (which must be the same ids: the script re-implements the seeded generator).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use gptlens::instruments::{repeated_random_tokens, HeadScores};
use gptlens::{CaptureSpec, Hook, Session};

/// Attention probabilities agree within 1e-5 (tests/fixtures/README.md); a score is a mean of
/// sums of a few of them.
const TOLERANCE: f32 = 2e-5;

#[test]
fn head_scores_match_pytorch_on_every_fixture() {
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(common::fixture("heads/heads.json")).unwrap()).unwrap();
    let mut worst_overall = 0f32;
    for model in ["gpt2-tiny-f32", "llama-tiny", "qwen2-tiny", "gemma3-tiny"] {
        let checkpoint = common::load(model);
        let config = checkpoint.model.config.clone();
        for kind in ["prompt", "repeated"] {
            let want = &expected[model][kind];
            let tokens: Vec<u32> = serde_json::from_value(want["tokens"].clone()).unwrap();
            if kind == "repeated" {
                assert_eq!(repeated_random_tokens(&config, 0), tokens, "{model}: the default sequence");
            }
            let patterns: Vec<String> = (0..config.n_layer).map(|l| Hook::AttnPattern(l).to_string()).collect();
            let spec = CaptureSpec::from_names(&patterns, &config).unwrap();
            let trace = Session::new(checkpoint.model.clone()).run(&tokens, &spec).unwrap();
            let got = serde_json::to_value(HeadScores::from_trace(&trace, &config).unwrap()).unwrap();
            for detector in ["previous_token", "first_token", "duplicate_token", "induction"] {
                let (got, want): (Vec<Vec<f32>>, Vec<Vec<f32>>) = (
                    serde_json::from_value(got[detector].clone()).unwrap(),
                    serde_json::from_value(want[detector].clone()).unwrap(),
                );
                let worst =
                    got.iter().flatten().zip(want.iter().flatten()).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                assert_eq!((got.len(), got[0].len()), (config.n_layer, config.n_head), "{model} {kind} {detector}");
                assert!(worst <= TOLERANCE, "{model} {kind} {detector}: off by {worst:e}");
                worst_overall = worst_overall.max(worst);
            }
        }
    }
    eprintln!("head scores: largest difference from PyTorch {worst_overall:e}");
}

#[test]
fn head_scores_need_every_pattern() {
    let checkpoint = common::load("gpt2-tiny-f32");
    let config = &checkpoint.model.config;
    let spec = CaptureSpec::from_names(&["blocks.0.attn.hook_pattern"], config).unwrap();
    let trace = Session::new(checkpoint.model.clone()).run(&[1, 2, 3], &spec).unwrap();
    let e = HeadScores::from_trace(&trace, config).unwrap_err().to_string();
    assert!(e.contains("blocks.1.attn.hook_pattern"), "{e}");
}
