//! The instruments against PyTorch. Head detectors: scores computed by
//! tests/fixtures/heads/make_head_scores.py from transformers' attention probabilities, on each
//! fixture's prompt and on the detectors' default sequence (which must be the same ids: the script
//! re-implements the seeded generator). Ablation: transformers' logits with the same heads' outputs
//! zeroed (make_ablation.py).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use gptlens::instruments::{repeated_random_tokens, Ablation, HeadScores};
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

#[test]
fn zero_ablated_heads_give_pytorchs_logits() {
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(common::fixture("heads/ablation.json")).unwrap()).unwrap();
    for model in ["gpt2-tiny-f32", "llama-tiny", "qwen2-tiny", "gemma3-tiny"] {
        let want = &expected[model];
        let checkpoint = common::load(model);
        let config = &checkpoint.model.config;
        let tokens: Vec<u32> = serde_json::from_value(want["tokens"].clone()).unwrap();
        let heads: Vec<(usize, usize)> = serde_json::from_value(want["ablated"].clone()).unwrap();
        let mut session = Session::new(checkpoint.model.clone());
        let clean = session.run(&tokens, &CaptureSpec::none()).unwrap().last_logits;
        session.set_ablation(Ablation::heads(heads, config).unwrap()).unwrap();
        let ablated = session.run(&tokens, &CaptureSpec::none()).unwrap();
        assert_eq!(ablated.computed, tokens.len(), "{model}: a new ablation recomputes every position");
        for (what, got, key) in
            [("clean", &clean, "clean_last_logits"), ("ablated", &ablated.last_logits, "ablated_last_logits")]
        {
            let want: Vec<f32> = serde_json::from_value(want[key].clone()).unwrap();
            let d = common::max_abs_diff(got, &want);
            assert!(d <= 1e-4, "{model} {what}: logits off by {d:e}");
        }
    }
}

/// An ablated session reuses its prefix like any other: bit for bit the same as a fresh session
/// with the same ablation running everything; the same setting again keeps the cache.
#[test]
fn an_ablated_session_reuses_its_prefix_exactly() {
    let checkpoint = common::load("llama-tiny");
    let config = &checkpoint.model.config;
    let ablation = Ablation::parse("0.1, 1.3", config).unwrap();
    let tokens: Vec<u32> = (0..20).map(|i| (i * 37 + 5) % config.vocab_size as u32).collect();
    let all = CaptureSpec::all(config);
    let mut fresh = Session::new(checkpoint.model.clone());
    fresh.set_ablation(ablation.clone()).unwrap();
    let full = fresh.run(&tokens, &all).unwrap();
    let mut growing = Session::new(checkpoint.model.clone());
    growing.set_ablation(ablation.clone()).unwrap();
    growing.run(&tokens[..7], &all).unwrap();
    growing.set_ablation(ablation.clone()).unwrap(); // unchanged: the cache stays
    let grown = growing.run(&tokens, &all).unwrap();
    assert_eq!(grown.computed, tokens.len() - 7);
    assert_eq!(grown.last_logits, full.last_logits);
    for name in full.names() {
        assert_eq!(grown.get(name), full.get(name), "{name}");
    }
    // Back to no ablation: a full recompute, equal to a session that never ablated.
    growing.set_ablation(Ablation::none()).unwrap();
    let clean = growing.run(&tokens, &all).unwrap();
    assert_eq!(clean.computed, tokens.len());
    assert_eq!(clean.last_logits, Session::new(checkpoint.model.clone()).run(&tokens, &all).unwrap().last_logits);
    assert_ne!(clean.last_logits, full.last_logits);
}

#[test]
fn ablations_name_what_is_wrong() {
    let checkpoint = common::load("gpt2-tiny-f32");
    let config = &checkpoint.model.config;
    let message = |r: gptlens::Result<Ablation>| r.unwrap_err().to_string();
    assert!(
        message(Ablation::parse("2.0", config)).contains("head 2.0 does not exist: the model has 2 layers of 4 heads")
    );
    assert!(message(Ablation::parse("0.4", config)).contains("0.4 does not exist"));
    assert!(message(Ablation::parse("1", config)).contains("`1` is not layer.head"));
    assert!(message(Ablation::parse("a.b", config)).contains("`a.b` is not layer.head"));
    assert!(Ablation::parse("", config).unwrap().is_empty());
    // An ablation made for a larger model is checked again against the session's.
    let larger = gptlens::model::Config { n_layer: 9, ..config.clone() };
    let mut session = Session::new(checkpoint.model.clone());
    let e = session.set_ablation(Ablation::heads([(5, 0)], &larger).unwrap()).unwrap_err().to_string();
    assert!(e.contains("head 5.0 does not exist"), "{e}");
}
