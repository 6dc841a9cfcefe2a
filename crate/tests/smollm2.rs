//! SmolLM2-135M-Instruct (Q4_1 GGUF, fetched by scripts/fetch-smollm.sh) against transformers
//! loading the same file dequantized to fp32 with eager attention
//! (tests/fixtures/smollm2/make_smollm_reference.py), on three prompts: plain text, code, ChatML.
//!
//! Tolerances: next-token top-5 identical and in order; logits ≤ 1e-2 absolute at every position
//! (on each position's top-16 ids plus random ones); layer 15's attention ≤ 1e-4; RMS scales
//! ≤ 1e-4 relative; our tokenizer gives transformers' ids for each prompt text.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::{fixture, ids, max_abs_diff, reference};
use gptlens::{CaptureSpec, Checkpoint, Session};

fn model_path() -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
}

fn prompt_texts() -> Vec<String> {
    let bytes = std::fs::read(fixture("smollm2/reference.safetensors")).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let meta = meta.metadata().clone().unwrap();
    (0..3).map(|i| meta[&format!("prompt{i}")].clone()).collect()
}

#[test]
fn smollm2_matches_transformers() {
    let path = model_path();
    if !path.exists() {
        eprintln!("SKIPPED: {} is absent (scripts/fetch-smollm.sh fetches it)", path.display());
        return;
    }
    let ckpt = Checkpoint::open(&path).unwrap();
    let c = &ckpt.model.config;
    let reference = reference("smollm2");
    let texts = prompt_texts();
    let tokenizer = ckpt.tokenizer.as_ref().unwrap();
    for (p, text) in texts.iter().enumerate() {
        let tokens = ids(&reference[&format!("p{p}.tokens")]);
        assert_eq!(tokenizer.encode(text).unwrap(), tokens, "prompt {p}: token ids");

        let spec = CaptureSpec::from_names(
            &["logits", "blocks.15.attn.hook_pattern", "blocks.0.ln1.hook_scale", "ln_final.hook_scale"],
            c,
        )
        .unwrap();
        let trace = Session::new(ckpt.model.clone()).run(&tokens, &spec).unwrap();

        // Top-5 at the last position, in order.
        let mut order: Vec<usize> = (0..c.vocab_size).collect();
        order.sort_by(|&a, &b| trace.last_logits[b].total_cmp(&trace.last_logits[a]));
        let top5: Vec<u32> = order[..5].iter().map(|&i| i as u32).collect();
        assert_eq!(top5, ids(&reference[&format!("p{p}.top5")]), "prompt {p}: top-5");
        let last = max_abs_diff(&trace.last_logits, &reference[&format!("p{p}.logits_last")].data);
        assert!(last <= 1e-2, "prompt {p}: last-position logits off by {last}");

        // Logits at every position, on the reference's chosen ids.
        let logit_ids = ids(&reference[&format!("p{p}.logit_ids")]);
        let want = &reference[&format!("p{p}.logits_top")];
        let all = &trace.get("logits").unwrap().data;
        let got: Vec<f32> = (0..tokens.len())
            .flat_map(|t| logit_ids.iter().map(move |&id| all[t * c.vocab_size + id as usize]))
            .collect();
        let worst = max_abs_diff(&got, &want.data);
        assert!(worst <= 1e-2, "prompt {p}: logits off by {worst}");
        eprintln!("prompt {p}: {} tokens, logits within {worst:.2e}", tokens.len());
    }
    // Prompt 0: one layer's attention (9 query heads over 3 KV heads) and RMSNorm scales.
    let tokens = ids(&reference["p0.tokens"]);
    let trace = Session::new(ckpt.model.clone()).run(&tokens, &CaptureSpec::standard(c)).unwrap();
    let pattern = trace.get("blocks.15.attn.hook_pattern").unwrap();
    assert_eq!(pattern.shape, vec![9, tokens.len(), tokens.len()]);
    let d = max_abs_diff(&pattern.data, &reference["p0.blocks.15.attn.hook_pattern"].data);
    assert!(d <= 1e-4, "layer 15 attention off by {d}");
    for name in ["blocks.0.ln1.hook_scale", "ln_final.hook_scale"] {
        let (got, want) = (&trace.get(name).unwrap().data, &reference[&format!("p0.{name}")].data);
        let rel = got.iter().zip(want).map(|(a, b)| (a - b).abs() / b.abs()).fold(0.0, f32::max);
        assert!(rel <= 1e-4, "{name} off by {rel} relative");
    }
    assert!(trace.get("blocks.0.ln1.hook_mean").is_none(), "RMSNorm has no mean hook");
}
