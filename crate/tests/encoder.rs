#![cfg(not(target_arch = "wasm32"))]
//! The original transformer's variants and a real encoder against PyTorch.
//!
//! `tests/fixtures/encoder/variants/*` (tests/fixtures/encoder/make_variants.py): stacks of
//! `torch.nn.TransformerEncoderLayer` (post- and pre-LN, GELU and ReLU, sinusoidal / learned / no
//! positions, bidirectional and causal) saved under GPT-2's names with gptlens's variant keys, run
//! on a right-padded batch with `src_key_padding_mask` (one row all padding). Every row is run
//! here with its padding mask. Tolerances: hidden states ≤ 1e-5 × (1 + largest |value|),
//! attention ≤ 1e-5, LayerNorm statistics ≤ 1e-5 relative, logits ≤ 1e-4.
//!
//! `tests/fixtures/encoder/minilm` (make_minilm_reference.py): all-MiniLM-L6-v2 in `transformers`'
//! `BertModel`, when `scripts/fetch-minilm.sh` could fetch it: ids equal, hidden states ≤ 1e-4,
//! attention ≤ 1e-5, sentence embeddings cosine ≥ 0.99999, similarities within 1e-5.

mod common;

use std::collections::BTreeMap;

use common::{check_hook, fixture, ids, load, max_abs_diff, reference_from_bytes, RefTensor};
use gptlens::model::{cosine, Positions};
use gptlens::{CaptureSpec, Hook, Session};

const VARIANTS: [&str; 5] = [
    "post-gelu-sinusoidal-bidirectional",
    "pre-gelu-sinusoidal-bidirectional",
    "post-relu-learned-bidirectional",
    "pre-relu-none-causal",
    "post-gelu-sinusoidal-causal",
];

/// Row `b` of a `[B, …]` reference tensor, as a tensor of the remaining dimensions.
fn row(t: &RefTensor, b: usize) -> RefTensor {
    let shape = t.shape[1..].to_vec();
    let n: usize = shape.iter().product();
    RefTensor { shape, data: t.data[b * n..(b + 1) * n].to_vec() }
}

fn check_variant(name: &str) {
    let dir = format!("encoder/variants/{name}");
    let ckpt = load(&dir);
    let c = ckpt.model.config.clone();
    let reference = reference_from_bytes(&std::fs::read(fixture(&format!("{dir}/reference.safetensors"))).unwrap());
    let mut session = Session::new(ckpt.model.clone());
    let mut hooks: Vec<(Hook, String)> =
        vec![(Hook::ResidPre(0), "embeddings".into()), (Hook::Logits, "logits".into())];
    for l in 0..c.n_layer {
        hooks.push((Hook::ResidPost(l), format!("hidden.{l}")));
        hooks.push((Hook::AttnPattern(l), format!("pattern.{l}")));
        for (site, ln) in [(gptlens::trace::NormSite::Ln1(l), "ln1"), (gptlens::trace::NormSite::Ln2(l), "ln2")] {
            hooks.push((Hook::NormMean(site), format!("{ln}_mean.{l}")));
            hooks.push((Hook::NormScale(site), format!("{ln}_scale.{l}")));
        }
    }
    let names: Vec<String> = hooks.iter().map(|(h, _)| h.to_string()).collect();
    let spec = CaptureSpec::from_names(&names, &c).unwrap();
    let (input_ids, mask) = (&reference["input_ids"], &reference["attention_mask"]);
    for b in 0..input_ids.shape[0] {
        let tokens = ids(&row(input_ids, b));
        let attended: Vec<bool> = row(mask, b).data.iter().map(|&m| m == 1.0).collect();
        let trace = session.run_padded(&tokens, &attended, &spec).unwrap();
        let what = format!("{name} row {b}");
        for (hook, reference_name) in &hooks {
            let got = trace.get(&hook.to_string()).unwrap();
            check_hook(
                &what,
                &format!("{hook} ({reference_name})"),
                &got.shape,
                &got.data,
                &row(&reference[reference_name.as_str()], b),
            );
        }
        let output = session.run_padded(
            &tokens,
            &attended,
            &CaptureSpec::from_names(&[Hook::ResidPost(c.n_layer - 1).to_string()], &c).unwrap(),
        );
        assert!(output.is_ok(), "{what}: {output:?}");
    }
    if c.variant.positions == Positions::Sinusoidal {
        let table = &reference["sinusoidal_table"];
        let d = c.d_model;
        let mut got = vec![0f32; d];
        for pos in 0..table.shape[0] {
            gptlens::kernels::positions::sinusoidal(pos, &mut got);
            assert_eq!(got, table.data[pos * d..(pos + 1) * d], "{name}: sinusoidal row {pos}");
        }
    }
}

#[test]
fn post_ln_sinusoidal_encoder_matches_pytorch() {
    check_variant(VARIANTS[0]);
}

#[test]
fn pre_ln_sinusoidal_encoder_matches_pytorch() {
    check_variant(VARIANTS[1]);
}

#[test]
fn post_ln_relu_learned_positions_encoder_matches_pytorch() {
    check_variant(VARIANTS[2]);
}

#[test]
fn pre_ln_causal_without_positions_matches_pytorch() {
    check_variant(VARIANTS[3]);
}

#[test]
fn post_ln_sinusoidal_causal_decoder_matches_pytorch() {
    check_variant(VARIANTS[4]);
}

/// A bidirectional session recomputes every position when any token changes (the first token's
/// state depends on the last), and matches a fresh session; an encoder refuses to generate.
#[test]
fn a_bidirectional_session_recomputes_and_does_not_generate() {
    let ckpt = load(&format!("encoder/variants/{}", VARIANTS[0]));
    let spec = CaptureSpec::standard(&ckpt.model.config);
    let mut session = Session::new(ckpt.model.clone());
    let first = session.run(&[5, 6, 7], &spec).unwrap();
    let second = session.run(&[5, 6, 8], &spec).unwrap();
    assert_eq!(second.computed, 3);
    let fresh = Session::new(ckpt.model.clone()).run(&[5, 6, 8], &spec).unwrap();
    common::assert_traces_agree("recomputed", &second, &fresh, 0.0);
    let pattern = "blocks.0.attn.hook_pattern";
    assert_ne!(first.get(pattern).unwrap().data[..3], second.get(pattern).unwrap().data[..3]);
    let mut sampler = gptlens::sample::Sampler::new(gptlens::sample::SamplingParams::default(), 1).unwrap();
    let err = session.generate(&[5], 2, &mut sampler, None, |_| true).unwrap_err().to_string();
    assert!(err.contains("encoder"), "{err}");
}

fn minilm_dir() -> Option<std::path::PathBuf> {
    let dir = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/models/all-MiniLM-L6-v2"));
    if dir.join("model.safetensors").exists() {
        Some(dir)
    } else {
        println!("skipped: all-MiniLM-L6-v2 is not in assets/models (scripts/fetch-minilm.sh could not fetch it)");
        None
    }
}

#[test]
fn minilm_matches_transformers() {
    let Some(dir) = minilm_dir() else { return };
    let ckpt = gptlens::Checkpoint::open(&dir).unwrap();
    let c = ckpt.model.config.clone();
    let tokenizer = ckpt.tokenizer().unwrap();
    let bytes = std::fs::read(fixture("encoder/minilm/reference.safetensors")).unwrap();
    let reference = reference_from_bytes(&bytes);
    let (_, metadata) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let texts: Vec<String> = serde_json::from_str(&metadata.metadata().as_ref().unwrap()["texts"]).unwrap();
    let mut session = Session::new(ckpt.model.clone());
    let mut hooks: Vec<(Hook, String)> = Vec::new();
    for l in 0..c.n_layer {
        hooks.push((Hook::ResidPre(l), format!("hidden.{{i}}.{l}")));
        hooks.push((Hook::AttnPattern(l), format!("pattern.{{i}}.{l}")));
        for (site, ln) in [(gptlens::trace::NormSite::Ln1(l), "ln1"), (gptlens::trace::NormSite::Ln2(l), "ln2")] {
            hooks.push((Hook::NormMean(site), format!("{ln}_mean.{{i}}.{l}")));
            hooks.push((Hook::NormScale(site), format!("{ln}_scale.{{i}}.{l}")));
        }
    }
    hooks.push((Hook::ResidPost(c.n_layer - 1), format!("hidden.{{i}}.{}", c.n_layer)));
    let names: Vec<String> = hooks.iter().map(|(h, _)| h.to_string()).collect();
    let spec = CaptureSpec::from_names(&names, &c).unwrap();
    for (i, text) in texts.iter().enumerate() {
        let tokens = tokenizer.encode(text).unwrap();
        assert_eq!(tokens, ids(&reference[&format!("ids.{i}")]), "ids of {text:?}");
        let trace = session.run(&tokens, &spec).unwrap();
        for (hook, pattern) in &hooks {
            let name = pattern.replace("{i}", &i.to_string());
            let got = trace.get(&hook.to_string()).unwrap();
            let want = &reference[&name];
            if name.starts_with("hidden") {
                // BERT's hidden states reach ±10; 1e-4 absolute.
                let worst = max_abs_diff(&got.data, &want.data);
                assert!(worst <= 1e-4, "{text:?} {hook}: hidden states off by {worst:e}");
            } else {
                check_hook(text, &format!("{hook} ({name})"), &got.shape, &got.data, want);
            }
        }
    }
    check_embeddings(&mut session, tokenizer, &reference);
}

fn check_embeddings(
    session: &mut Session,
    tokenizer: &gptlens::tokenizer::Tokenizer,
    reference: &BTreeMap<String, RefTensor>,
) {
    #[derive(serde::Deserialize)]
    struct Sentence {
        text: String,
        ids: Vec<u32>,
    }
    let sentences: Vec<Sentence> =
        serde_json::from_slice(&std::fs::read(fixture("encoder/minilm/sentences.json")).unwrap()).unwrap();
    let embeddings: Vec<Vec<f32>> = sentences
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let tokens = tokenizer.encode(&s.text).unwrap();
            assert_eq!(tokens, s.ids, "ids of {:?}", s.text);
            let e = session.embed(&tokens).unwrap();
            let want = &reference[&format!("embedding.{i}")].data;
            let similarity = cosine(&e, want);
            assert!(similarity >= 0.99999, "{:?}: cosine {similarity} with PyTorch's embedding", s.text);
            e
        })
        .collect();
    let want = &reference["cosine"];
    let n = embeddings.len();
    for a in 0..n {
        for b in 0..n {
            let got = cosine(&embeddings[a], &embeddings[b]);
            let expected = want.data[a * n + b];
            assert!((got - expected).abs() <= 1e-5, "similarity {a}·{b}: {got} vs PyTorch {expected}");
        }
    }
}
