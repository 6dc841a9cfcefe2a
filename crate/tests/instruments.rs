//! The instruments against PyTorch. Head detectors: scores computed by
//! tests/fixtures/instruments/make_head_scores.py from transformers' attention probabilities, on each
//! fixture's prompt and on the detectors' default sequence (which must be the same ids: the script
//! re-implements the seeded generator). Ablation: transformers' logits with the same heads' outputs
//! zeroed (make_ablation.py). Activation hooks (residuals, z, head results, MLP outputs, the
//! logit lens) and an ablation of heads and MLPs: transformers' forward hooks (make_hooks.py).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use gptlens::instruments::attribution::{Attribution, LogitLens};
use gptlens::instruments::patching::{patch, patch_runs, PatchRequest};
use gptlens::instruments::{repeated_random_tokens, AblateWith, Ablation, HeadScores};
use gptlens::{CaptureSpec, Hook, Session};

/// Attention probabilities agree within 1e-5 (tests/fixtures/README.md); a score is a mean of
/// sums of a few of them.
const TOLERANCE: f32 = 2e-5;

#[test]
fn head_scores_match_pytorch_on_every_fixture() {
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(common::fixture("instruments/heads.json")).unwrap()).unwrap();
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
fn activation_hooks_and_ablations_match_pytorch_on_every_fixture() {
    for model in ["gpt2-tiny-f32", "llama-tiny", "qwen2-tiny", "gemma3-tiny"] {
        let bytes = std::fs::read(common::fixture(&format!("instruments/hooks-{model}.safetensors"))).unwrap();
        let reference = common::reference_from_bytes(&bytes);
        let checkpoint = common::load(model);
        let config = &checkpoint.model.config;
        let tokens = common::ids(&reference["tokens"]);
        let names = common::activation_hooks(&reference);
        let spec = CaptureSpec::from_names(&names, config).unwrap();
        let mut session = Session::new(checkpoint.model.clone());
        let trace = session.run(&tokens, &spec).unwrap();
        for name in &names {
            let got = trace.get(name).unwrap();
            common::check_hook(model, name, &got.shape, &got.data, &reference[*name]);
        }
        // The lens's last layer is the model's own logits, exactly.
        let (lens, logits) = (&trace.get("lens.logits").unwrap().data, &trace.get("logits").unwrap().data);
        assert_eq!(&lens[lens.len() - logits.len()..], logits.as_slice(), "{model}");

        let units = Ablation::parse(&common::reference_ablation(&bytes), config).unwrap();
        let logits = CaptureSpec::from_names(&["logits"], config).unwrap();
        for (with, key) in [(AblateWith::Zero, "ablated.logits"), (AblateWith::Mean, "mean_ablated.logits")] {
            session.set_ablation(units.clone().replaced_by(with)).unwrap();
            let got = session.run(&tokens, &logits).unwrap();
            let got = got.get("logits").unwrap();
            common::check_hook(model, key, &got.shape, &got.data, &reference[key]);
        }
    }
}

/// Captured or not, the new hooks change nothing else: the standard hooks and the logits of a run
/// that also records every activation equal a run that records only the standard set, bit for bit.
#[test]
fn recording_activations_changes_no_other_value() {
    let checkpoint = common::load("gpt2-tiny-f32");
    let config = &checkpoint.model.config;
    let tokens: Vec<u32> = (0..60).map(|i| (i * 37 + 5) % config.vocab_size as u32).collect();
    let standard = CaptureSpec::standard(config);
    let names: Vec<String> = Hook::offered(config).iter().map(Hook::to_string).collect();
    let everything = CaptureSpec::from_names(&names, config).unwrap();
    let plain = Session::new(checkpoint.model.clone()).run(&tokens, &standard).unwrap();
    let mut session = Session::new(checkpoint.model.clone());
    session.run(&tokens[..30], &everything).unwrap();
    let full = session.run(&tokens, &everything).unwrap();
    assert_eq!(full.computed, tokens.len() - 30, "the activations are reused with the prefix");
    assert_eq!(full.last_logits, plain.last_logits);
    for name in plain.names() {
        assert_eq!(full.get(name), plain.get(name), "{name}");
    }
    let fresh = Session::new(checkpoint.model.clone()).run(&tokens, &everything).unwrap();
    for name in fresh.names() {
        assert_eq!(full.get(name), fresh.get(name), "{name} after prefix reuse");
    }
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
        serde_json::from_slice(&std::fs::read(common::fixture("instruments/ablation.json")).unwrap()).unwrap();
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
    let all = CaptureSpec::standard(config);
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

/// `--ablate 1.0` zero-ablates head 0 of layer 1: its `hook_z` is zero at every position, and
/// its `hook_result` too; the other heads' are not.
#[test]
fn an_ablated_heads_z_and_result_are_zero() {
    let checkpoint = common::load("llama-tiny");
    let config = &checkpoint.model.config;
    let mut session = Session::new(checkpoint.model.clone());
    session.set_ablation(Ablation::parse("1.0", config).unwrap()).unwrap();
    let spec = CaptureSpec::from_names(&["blocks.1.attn.hook_z", "blocks.1.attn.hook_result"], config).unwrap();
    let trace = session.run(&[3, 1, 4, 1, 5, 9, 2, 6], &spec).unwrap();
    for (name, width) in [("blocks.1.attn.hook_z", config.head_dim()), ("blocks.1.attn.hook_result", config.d_model)] {
        let data = &trace.get(name).unwrap().data;
        for row in data.chunks_exact(config.n_head * width) {
            assert!(row[..width].iter().all(|&x| x == 0.0), "{name}: head 0 is ablated");
            assert!(row[width..].iter().any(|&x| x != 0.0), "{name}: the others are not");
        }
    }
}

/// Mean-ablation follows the prompt: a session that grows its prompt token by token (runs and
/// steps) ends bit for bit where a fresh session running the whole prompt does, since every new
/// token moves the means and so every position.
#[test]
fn mean_ablation_follows_the_prompt_through_runs_and_steps() {
    let checkpoint = common::load("gpt2-tiny-f32");
    let config = &checkpoint.model.config;
    let ablation = Ablation::parse("0.1,1.mlp", config).unwrap().replaced_by(AblateWith::Mean);
    let tokens: Vec<u32> = (0..12).map(|i| (i * 37 + 5) % config.vocab_size as u32).collect();
    let all = CaptureSpec::standard(config);
    let mut fresh = Session::new(checkpoint.model.clone());
    fresh.set_ablation(ablation.clone()).unwrap();
    let whole = fresh.run(&tokens, &all).unwrap();
    let mut growing = Session::new(checkpoint.model.clone());
    growing.set_ablation(ablation).unwrap();
    let part = growing.run(&tokens[..9], &all).unwrap();
    assert_eq!(part.computed, 9);
    growing.step(tokens[9]).unwrap();
    let grown = growing.run(&tokens[..11], &all).unwrap();
    assert_eq!(grown.computed, 11, "a new token moves the means: every position again");
    growing.step(tokens[11]).unwrap();
    let same = growing.run(&tokens, &all).unwrap();
    assert_eq!(same.computed, 0, "the same prompt again reuses everything");
    assert_eq!(same.last_logits, whole.last_logits);
    for name in whole.names() {
        assert_eq!(same.get(name), whole.get(name), "{name}");
    }
    assert_ne!(whole.last_logits, Session::new(checkpoint.model.clone()).run(&tokens, &all).unwrap().last_logits);
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

fn patching_reference() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(common::fixture("instruments/patching.json")).unwrap()).unwrap()
}

/// Patching scores divide logit differences (each within 1e-4 of PyTorch) by the clean − corrupt
/// difference, so they are held to 3e-4 / |that difference|.
#[test]
fn activation_patching_matches_pytorch_on_every_fixture() {
    let expected = patching_reference();
    for model in ["gpt2-tiny-f32", "llama-tiny", "qwen2-tiny", "gemma3-tiny"] {
        let want = &expected[model]["patching"];
        let checkpoint = common::load(model);
        let ids = |key: &str| -> Vec<u32> { serde_json::from_value(want[key].clone()).unwrap() };
        let (clean, corrupt) = (ids("clean"), ids("corrupt"));
        let request = PatchRequest {
            clean: &clean,
            corrupt: &corrupt,
            answer: want["answer"].as_u64().unwrap() as u32,
            wrong: want["wrong"].as_u64().unwrap() as u32,
        };
        let mut calls = 0;
        let got = patch(&checkpoint.model, &request, &mut |done, total| {
            calls += 1;
            assert_eq!((done, total), (calls, patch_runs(&checkpoint.model.config, clean.len())));
            true
        })
        .unwrap();
        assert_eq!(calls, patch_runs(&checkpoint.model.config, clean.len()), "{model}: one report per run");
        let number = |key: &str| want[key].as_f64().unwrap() as f32;
        assert!((got.clean_diff - number("clean_diff")).abs() <= 1e-4, "{model} clean_diff");
        assert!((got.corrupt_diff - number("corrupt_diff")).abs() <= 1e-4, "{model} corrupt_diff");
        let tolerance = 3e-4 / (number("clean_diff") - number("corrupt_diff")).abs();
        for (key, got) in [("resid_pre", &got.resid_pre), ("heads", &got.heads)] {
            let want: Vec<Vec<f32>> = serde_json::from_value(want[key].clone()).unwrap();
            assert_eq!(got.len(), want.len(), "{model} {key}");
            let worst =
                got.iter().flatten().zip(want.iter().flatten()).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(worst <= tolerance, "{model} {key}: off by {worst:e} (tolerance {tolerance:e})");
        }
        // Patching every position is the clean run itself; at layer 0 only the corrupted
        // positions differ, so patching any other position there changes nothing.
        assert!(got.resid_pre[0].iter().enumerate().all(|(t, &s)| [2, 5].contains(&t) || s.abs() < 1e-6), "{model}");
    }
}

#[test]
fn patching_names_what_is_wrong() {
    let checkpoint = common::load("gpt2-tiny-f32");
    let message = |clean: &[u32], corrupt: &[u32], answer: u32| {
        let request = PatchRequest { clean, corrupt, answer, wrong: 1 };
        patch(&checkpoint.model, &request, &mut |_, _| true).unwrap_err().to_string()
    };
    assert!(message(&[1, 2, 3], &[1, 2], 0).contains("same length"));
    assert!(message(&[1, 2, 3], &[1, 2, 3], 0).contains("same logit difference"));
    assert!(message(&[1, 2], &[1, 2], 9999).contains("9999"));
    assert!(message(&[], &[], 0).to_lowercase().contains("empty"));
    // A progress callback that says stop: the sweep ends there, with an error that says so.
    let (clean, corrupt) = ([5, 6, 7, 8], [5, 9, 7, 8]);
    let request = PatchRequest { clean: &clean, corrupt: &corrupt, answer: 3, wrong: 4 };
    let mut calls = 0;
    let e = patch(&checkpoint.model, &request, &mut |done, _| {
        calls += 1;
        done < 3
    })
    .unwrap_err();
    assert!(matches!(e, gptlens::Error::Cancelled { done: 3, .. }), "{e}");
    assert_eq!(calls, 3);
}

/// Direct logit attribution against the same parts computed in PyTorch, and its parts sum to the
/// run's own logit difference (Gemma is refused: its post-norms make parts non-additive).
#[test]
fn direct_logit_attribution_matches_pytorch_and_sums_to_the_difference() {
    let expected = patching_reference();
    for model in ["gpt2-tiny-f32", "llama-tiny", "qwen2-tiny"] {
        let want = &expected[model]["attribution"];
        let checkpoint = common::load(model);
        let tokens: Vec<u32> = serde_json::from_value(want["tokens"].clone()).unwrap();
        let got = Attribution::compute(&checkpoint.model, &Ablation::none(), &tokens, None, None, None).unwrap();
        assert_eq!(
            (got.answer as u64, got.wrong as u64),
            (want["answer"].as_u64().unwrap(), want["wrong"].as_u64().unwrap())
        );
        let got_value = serde_json::to_value(&got).unwrap();
        for key in ["logit_diff", "embed", "pos_embed", "heads", "attn_bias", "mlps", "final_bias"] {
            let (g, w) = (flat_values(&got_value[key]), flat_values(&want[key]));
            assert_eq!(g.len(), w.len(), "{model} {key}");
            let worst = g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0f64, f64::max);
            assert!(worst <= 1e-4, "{model} {key}: off by {worst:e}");
        }
        assert!(
            (got.total - got.logit_diff).abs() <= 1e-4,
            "{model}: parts sum to {} not {}",
            got.total,
            got.logit_diff
        );
    }
    let gemma = common::load("gemma3-tiny");
    let e =
        Attribution::compute(&gemma.model, &Ablation::none(), &[1, 2, 3], None, None, None).unwrap_err().to_string();
    assert!(e.contains("Gemma"), "{e}");
}

fn flat_values(v: &serde_json::Value) -> Vec<f64> {
    match v {
        serde_json::Value::Array(items) => items.iter().flat_map(flat_values).collect(),
        other => vec![other.as_f64().unwrap()],
    }
}

/// The logit lens's probabilities are the softmax of PyTorch's lens logits (make_hooks.py).
#[test]
fn the_logit_lens_reads_pytorchs_lens_logits() {
    for model in ["gpt2-tiny-f32", "llama-tiny", "gemma3-tiny"] {
        let bytes = std::fs::read(common::fixture(&format!("instruments/hooks-{model}.safetensors"))).unwrap();
        let reference = common::reference_from_bytes(&bytes);
        let checkpoint = common::load(model);
        let c = &checkpoint.model.config;
        let tokens = common::ids(&reference["tokens"]);
        let first = 3;
        let target = 7;
        let mut steps = Vec::new();
        let mut follow = |done, total| {
            steps.push((done, total));
            true
        };
        let lens =
            LogitLens::compute(&checkpoint.model, &Ablation::none(), &tokens, first, 3, Some(target), &mut follow)
                .unwrap();
        let total = c.n_layer + 2;
        assert_eq!(steps, (1..=total).map(|done| (done, total)).collect::<Vec<_>>(), "{model}: one report per step");
        let stopped =
            LogitLens::compute(&checkpoint.model, &Ablation::none(), &tokens, first, 3, None, &mut |done, _| done < 2);
        assert!(matches!(stopped, Err(gptlens::Error::Cancelled { done: 2, .. })));
        let want = &reference["lens.logits"];
        let t = tokens.len();
        assert_eq!(lens.top.len(), c.n_layer + 1);
        let target_prob = lens.target_prob.as_ref().unwrap();
        for (layer, (top, (final_top_prob, target_prob))) in
            lens.top.iter().zip(lens.final_top_prob.iter().zip(target_prob)).enumerate()
        {
            for p in first..t {
                let row = &want.data[(layer * t + p) * c.vocab_size..][..c.vocab_size];
                let probs = gptlens::sample::softmax_with_temperature(row, 1.0).unwrap();
                let (i, best) = (p - first, top[p - first][0]);
                assert!((probs[best.0 as usize] - best.1).abs() <= 1e-5, "{model} layer {layer} position {p}");
                assert!(probs.iter().all(|&q| q <= best.1 + 1e-5), "{model} layer {layer} position {p}: not the top");
                assert!((probs[lens.final_top[i] as usize] - final_top_prob[i]).abs() <= 1e-5);
                assert!((probs[target as usize] - target_prob[i]).abs() <= 1e-5);
            }
        }
    }
}
