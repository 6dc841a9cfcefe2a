//! Gemma-3-270M (Q4_K_M GGUF: Q5_0, Q8_0, Q4_K and Q6_K matrices; fetched only on request by
//! `npm run fetch:gemma`, it is under the Gemma Terms of Use) against transformers loading the
//! same file dequantized to fp32 with eager attention
//! (tests/fixtures/gemma3-270m/make_gemma_reference.py), on three prompts: plain text, code, and
//! a text longer than the 512-key sliding window.
//!
//! Tolerances (issue 13): the same token ids from our tokenizer; next-token top-5 identical and in
//! order; logits ≤ 1e-2 absolute at every position (on the last position's top-32 ids plus 32
//! random ones); the last query rows of layer 0 (local) and layer 5 (global) ≤ 1e-4; RMS scales
//! ≤ 1e-4 relative.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::{fixture, ids, max_abs_diff, reference};
use gptlens::{CaptureSpec, Checkpoint, Session};

fn model_path() -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/models/gemma-3-270m-q4_k_m.gguf"))
}

fn prompt_texts() -> Vec<String> {
    let bytes = std::fs::read(fixture("gemma3-270m/reference.safetensors")).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let meta = meta.metadata().clone().unwrap();
    (0..3).map(|i| meta[&format!("prompt{i}")].clone()).collect()
}

#[test]
fn gemma3_270m_matches_transformers() {
    let path = model_path();
    if !path.exists() {
        eprintln!(
            "SKIPPED: {} is absent (`npm run fetch:gemma` fetches it, under the Gemma Terms of Use)",
            path.display()
        );
        return;
    }
    let ckpt = Checkpoint::open(&path).unwrap();
    let c = &ckpt.model.config;
    assert_eq!((c.n_layer, c.d_model, c.head_dim, c.vocab_size), (18, 640, 256, 262144));
    let reference = reference("gemma3-270m");
    let tokenizer = ckpt.tokenizer.as_ref().expect("Gemma's SentencePiece vocabulary loads");
    for (p, text) in prompt_texts().iter().enumerate() {
        let tokens = ids(&reference[&format!("p{p}.tokens")]);
        assert_eq!(tokenizer.encode(text).unwrap(), tokens, "prompt {p}: token ids");

        let names = ["logits", "blocks.0.attn.hook_pattern", "blocks.5.attn.hook_pattern"];
        let trace =
            Session::new(ckpt.model.clone()).run(&tokens, &CaptureSpec::from_names(&names, c).unwrap()).unwrap();

        let mut order: Vec<usize> = (0..c.vocab_size).collect();
        order.sort_by(|&a, &b| trace.last_logits[b].total_cmp(&trace.last_logits[a]));
        let top5: Vec<u32> = order[..5].iter().map(|&i| i as u32).collect();
        assert_eq!(top5, ids(&reference[&format!("p{p}.top5")]), "prompt {p}: top-5");

        let logit_ids = ids(&reference[&format!("p{p}.logit_ids")]);
        let all = &trace.get("logits").unwrap().data;
        let got: Vec<f32> = (0..tokens.len())
            .flat_map(|t| logit_ids.iter().map(move |&id| all[t * c.vocab_size + id as usize]))
            .collect();
        let worst = max_abs_diff(&got, &reference[&format!("p{p}.logits_top")].data);
        assert!(worst <= 1e-2, "prompt {p}: logits off by {worst}");

        // The last query rows: on a prompt past the window, layer 0's rows are zero before it.
        let t = tokens.len();
        for layer in [0, 5] {
            let want = &reference[&format!("p{p}.blocks.{layer}.attn.hook_pattern_tail")];
            let rows = want.shape[1];
            let pattern = trace.get(&format!("blocks.{layer}.attn.hook_pattern")).unwrap();
            let got: Vec<f32> = (0..c.n_head)
                .flat_map(|h| pattern.data[(h * t + t - rows) * t..(h * t + t) * t].iter().copied())
                .collect();
            let d = max_abs_diff(&got, &want.data);
            assert!(d <= 1e-4, "prompt {p}: layer {layer} attention off by {d}");
        }
        eprintln!("prompt {p}: {t} tokens, logits within {worst:.2e}");
    }
    let tokens = ids(&reference["p0.tokens"]);
    let spec = CaptureSpec::from_names(&["blocks.0.ln1.hook_scale", "ln_final.hook_scale"], c).unwrap();
    let trace = Session::new(ckpt.model.clone()).run(&tokens, &spec).unwrap();
    for name in ["blocks.0.ln1.hook_scale", "ln_final.hook_scale"] {
        let (got, want) = (&trace.get(name).unwrap().data, &reference[&format!("p0.{name}")].data);
        let rel = got.iter().zip(want).map(|(a, b)| (a - b).abs() / b.abs()).fold(0.0, f32::max);
        assert!(rel <= 1e-4, "{name} off by {rel} relative");
    }
}
