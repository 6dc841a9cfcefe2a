#![cfg(not(target_arch = "wasm32"))]
//! Sessions: prefix reuse and one-token steps must give what a full recompute gives, and runs
//! must be causal, deterministic and finite.

mod common;

use std::sync::Arc;

use common::{assert_traces_agree, load};
use gptlens::model::{Arch, Config, Variant, Weights};
use gptlens::{CaptureSpec, Model, Session, Trace};

fn fixture_model() -> Arc<Model> {
    load("gpt2-tiny-f32").model
}

fn prompt(n: usize, seed: u32) -> Vec<u32> {
    (0..n as u32).map(|i| (i * 37 + seed * 101 + 5) % 513).collect()
}

fn fresh_run(model: &Arc<Model>, tokens: &[u32], spec: &CaptureSpec) -> Trace {
    Session::new(model.clone()).run(tokens, spec).unwrap()
}

#[test]
fn prefix_reuse_recomputes_only_the_suffix_and_agrees_with_a_full_run() {
    let model = fixture_model();
    let spec = CaptureSpec::standard(&model.config);
    let mut session = Session::new(model.clone());
    let first = prompt(20, 1);
    assert_eq!(session.run(&first, &spec).unwrap().computed, 20);

    // Typing on: same 20 tokens plus 3 more → only 3 run.
    let mut longer = first.clone();
    longer.extend([7, 8, 9]);
    let reused = session.run(&longer, &spec).unwrap();
    assert_eq!(reused.computed, 3);
    assert_traces_agree("session", &reused, &fresh_run(&model, &longer, &spec), 1e-5);

    // Editing in the middle: everything from the edit on runs again.
    let mut edited = longer.clone();
    edited[12] = 300;
    let after_edit = session.run(&edited, &spec).unwrap();
    assert_eq!(after_edit.computed, edited.len() - 12);
    assert_traces_agree("session", &after_edit, &fresh_run(&model, &edited, &spec), 1e-5);

    // Deleting back to a prefix: the last token reruns to predict the next one.
    let shorter = &edited[..10];
    let back = session.run(shorter, &spec).unwrap();
    assert_eq!(back.computed, 1);
    assert_traces_agree("session", &back, &fresh_run(&model, shorter, &spec), 1e-5);

    // Same sequence again: nothing to compute.
    assert_eq!(session.run(shorter, &spec).unwrap().computed, 0);
}

#[test]
fn stepping_one_token_at_a_time_agrees_with_a_full_run() {
    let model = fixture_model();
    let spec = CaptureSpec::standard(&model.config);
    let tokens = prompt(30, 2);
    let mut session = Session::new(model.clone());
    session.run(&tokens[..1], &spec).unwrap();
    for &t in &tokens[1..] {
        session.step(t).unwrap();
    }
    let incremental = session.run(&tokens, &spec).unwrap();
    assert_eq!(incremental.computed, 0);
    assert_traces_agree("session", &incremental, &fresh_run(&model, &tokens, &spec), 1e-5);
}

#[test]
fn asking_for_more_hooks_than_were_cached_recomputes() {
    let model = fixture_model();
    let tokens = prompt(12, 3);
    let mut session = Session::new(model.clone());
    session.run(&tokens, &CaptureSpec::none()).unwrap();
    let all = CaptureSpec::standard(&model.config);
    let trace = session.run(&tokens, &all).unwrap();
    assert_eq!(trace.computed, 12);
    assert_traces_agree("session", &trace, &fresh_run(&model, &tokens, &all), 0.0);
    // Narrowing keeps the cache.
    let narrow = CaptureSpec::from_names(&["blocks.1.attn.hook_pattern"], &model.config).unwrap();
    let narrowed = session.run(&tokens, &narrow).unwrap();
    assert_eq!((narrowed.computed, narrowed.names().count()), (0, 1));
}

#[test]
fn changing_a_token_changes_nothing_before_it() {
    let model = fixture_model();
    let spec = CaptureSpec::standard(&model.config);
    let a = prompt(16, 4);
    let mut b = a.clone();
    b[9] = (b[9] + 1) % 513;
    let (ta, tb) = (fresh_run(&model, &a, &spec), fresh_run(&model, &b, &spec));
    let t = a.len();
    for name in ta.names() {
        let (x, y) = (ta.get(name).unwrap(), tb.get(name).unwrap());
        // Values per position: [T] or [T, V]; patterns [H, T, T] — compare rows of positions < 9.
        let per_pos = x.data.len() / t;
        if name.ends_with("hook_pattern") {
            let h = x.shape[0];
            for head in 0..h {
                let rows = head * t * t..(head * t + 9) * t;
                assert_eq!(x.data[rows.clone()], y.data[rows], "{name} head {head}");
            }
        } else {
            assert_eq!(x.data[..9 * per_pos], y.data[..9 * per_pos], "{name}");
            assert_ne!(x.data[9 * per_pos..], y.data[9 * per_pos..], "{name} should change from position 9 on");
        }
    }
}

#[test]
fn runs_are_deterministic_and_finite_in_every_row() {
    let model = fixture_model();
    let spec = CaptureSpec::standard(&model.config);
    // 64 is the model's whole context: this also crosses the forward pass's chunk boundary.
    let tokens = prompt(64, 5);
    let (a, b) = (fresh_run(&model, &tokens, &spec), fresh_run(&model, &tokens, &spec));
    assert_traces_agree("session", &a, &b, 0.0);
    for name in a.names() {
        assert!(a.get(name).unwrap().data.iter().all(|x| x.is_finite()), "{name}");
    }
    let v = model.config.vocab_size;
    for row in a.get("logits").unwrap().data.chunks(v) {
        let p = a.probs(0, 1.0).unwrap();
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-4);
        assert!(row.iter().any(|&x| x != row[0]), "a logits row is constant");
    }
}

/// Long prompts run in chunks; the result must not depend on where the chunks fall.
#[test]
fn chunked_prefill_agrees_with_token_by_token() {
    let config = Config {
        arch: Arch::Gpt2,
        n_layer: 2,
        n_head: 2,
        n_kv_head: 2,
        d_model: 16,
        head_dim: 8,
        d_ff: 24,
        vocab_size: 50,
        n_ctx: 200,
        norm_eps: 1e-5,
        rope: None,
        query_pre_attn_scalar: None,
        sliding_window: None,
        bos_token_id: None,
        eos_token_id: None,
        tied_head: true,
        variant: Variant::of(Arch::Gpt2),
        token_types: 0,
    };
    let model = Arc::new(Model { weights: Weights::random(&config, 9), config });
    let spec = CaptureSpec::standard(&model.config);
    let tokens: Vec<u32> = (0..150).map(|i| (i * 7 % 50) as u32).collect();
    let whole = fresh_run(&model, &tokens, &spec);
    let mut session = Session::new(model.clone());
    session.run(&tokens[..1], &spec).unwrap();
    for &t in &tokens[1..] {
        session.step(t).unwrap();
    }
    assert_traces_agree("session", &session.run(&tokens, &spec).unwrap(), &whole, 1e-5);
}

/// A capture over the session's byte budget is refused before the run, naming the size, and costs
/// nothing: the session keeps its tokens and answers a capture that fits. The same budget covers
/// a step, whose capture grows by one position.
#[test]
fn a_capture_over_the_budget_is_refused_up_front_and_loses_nothing() {
    let model = fixture_model();
    let c = &model.config;
    let all = CaptureSpec::standard(c);
    let tokens = prompt(12, 7);
    // The bytes full capture of 12 tokens takes: the trace's tensors plus the session's own copy
    // (patterns kept as a triangle, H·T(T+1)/2 per layer).
    let floats: usize = all
        .hooks()
        .map(|hook| {
            let full: usize = hook.shape(c, 12).iter().product();
            let stored = if hook.to_string().ends_with("hook_pattern") { c.n_head * 12 * 13 / 2 } else { full };
            full + stored
        })
        .sum();
    let need = 4 * floats as u64;

    let mut session = Session::new(Arc::clone(&model));
    session.set_capture_budget(need);
    session.run(&tokens[..11], &all).unwrap();
    session.set_capture_budget(need - 1);
    let error = session.run(&tokens, &all).unwrap_err();
    assert!(matches!(error, gptlens::Error::CaptureOverBudget { tokens: 12, need: n, .. } if n == need), "{error}");
    assert!(error.to_string().contains("more than the capture budget"), "{error}");
    let error = session.step(tokens[11]).unwrap_err();
    assert!(matches!(error, gptlens::Error::CaptureOverBudget { tokens: 12, .. }), "{error}");
    assert_eq!(session.tokens(), &tokens[..11], "the refused run and step changed nothing");
    // Without the patterns it fits, and gives what a fresh run gives.
    let small = CaptureSpec::from_names(&["logits", "ln_final.hook_scale"], c).unwrap();
    let trace = session.run(&tokens, &small).unwrap();
    assert_traces_agree("under budget", &trace, &fresh_run(&model, &tokens, &small), 1e-5);
}
