#![cfg(not(target_arch = "wasm32"))]
//! Bad input gets a typed error a person understands, never a panic, and loses nothing.

mod common;

use std::collections::BTreeMap;

use common::fixture;
use gptlens::{CaptureSpec, Checkpoint, Error, Hook, Session};
use safetensors::tensor::{Dtype, TensorView};

/// The f32 fixture's files, to be broken one way at a time.
fn files() -> BTreeMap<String, Vec<u8>> {
    ["config.json", "model.safetensors", "tokenizer.json"]
        .iter()
        .map(|n| (n.to_string(), std::fs::read(fixture(&format!("gpt2-tiny-f32/{n}"))).unwrap()))
        .collect()
}

fn load(files: &BTreeMap<String, Vec<u8>>) -> Result<Checkpoint, Error> {
    Checkpoint::from_files(&files.iter().map(|(k, v)| (k.clone(), v.as_slice())).collect())
}

fn load_err(files: &BTreeMap<String, Vec<u8>>) -> Error {
    match load(files) {
        Ok(_) => panic!("loading should have failed"),
        Err(e) => e,
    }
}

/// Re-serialises the fixture's tensors after `edit` has had its way with the list.
fn rewrite_weights(edit: impl FnOnce(&mut Vec<(String, Dtype, Vec<usize>, Vec<u8>)>)) -> Vec<u8> {
    let bytes = std::fs::read(fixture("gpt2-tiny-f32/model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<_> =
        st.tensors().into_iter().map(|(n, v)| (n, v.dtype(), v.shape().to_vec(), v.data().to_vec())).collect();
    edit(&mut tensors);
    let views: Vec<_> =
        tensors.iter().map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap())).collect();
    safetensors::serialize(views, None).unwrap()
}

#[test]
fn truncated_weights() {
    let mut f = files();
    let w = f.get_mut("model.safetensors").unwrap();
    w.truncate(w.len() - 100);
    let e = load_err(&f);
    assert!(matches!(e, Error::Safetensors(_)), "{e}");
    assert!(e.to_string().contains("truncated"), "{e}");
    // Cut inside the header, too.
    f.get_mut("model.safetensors").unwrap().truncate(50);
    assert!(matches!(load_err(&f), Error::Safetensors(_)));
}

#[test]
fn header_claiming_huge_shapes_is_rejected_before_allocating() {
    let mut f = files();
    let header = r#"{"wte.weight":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&[0; 16]);
    f.insert("model.safetensors".into(), bytes);
    let e = load_err(&f);
    assert!(matches!(e, Error::Safetensors(_)), "{e}");
    // A header length field pointing far past the end of the file: over the header cap, which
    // the error names.
    f.insert("model.safetensors".into(), u64::MAX.to_le_bytes().to_vec());
    let e = load_err(&f);
    assert!(matches!(e, Error::LimitExceeded { value: u64::MAX, .. }), "{e}");
    // Past the end but under the cap: truncated.
    f.insert("model.safetensors".into(), 1000u64.to_le_bytes().iter().chain(b"{}").copied().collect());
    let e = load_err(&f);
    assert!(matches!(e, Error::Safetensors(_)) && e.to_string().contains("truncated"), "{e}");
}

#[test]
fn missing_tensor() {
    let mut f = files();
    f.insert("model.safetensors".into(), rewrite_weights(|t| t.retain(|(n, ..)| n != "h.1.mlp.c_fc.bias")));
    let e = load_err(&f);
    assert!(matches!(&e, Error::MissingTensor { name } if name == "h.1.mlp.c_fc.bias"), "{e}");
}

#[test]
fn shapes_that_disagree_with_the_config() {
    let mut f = files();
    let config =
        String::from_utf8(f["config.json"].clone()).unwrap().replace("\"n_positions\": 64", "\"n_positions\": 128");
    assert!(config.contains("128"), "fixture config changed shape; update this test");
    f.insert("config.json".into(), config.into_bytes());
    let e = load_err(&f);
    assert!(
        matches!(&e, Error::ShapeMismatch { name, expected, got } if name == "wpe.weight" && expected == &[128, 64] && got == &[64, 64]),
        "{e}"
    );
}

#[test]
fn unsupported_dtype() {
    let mut f = files();
    f.insert(
        "model.safetensors".into(),
        rewrite_weights(|t| {
            for (n, d, ..) in t.iter_mut() {
                if n == "ln_f.bias" {
                    *d = Dtype::I32;
                }
            }
        }),
    );
    assert!(matches!(load_err(&f), Error::UnsupportedDtype { .. }));
}

#[test]
fn bad_config_json() {
    for bad in [&b"{not json"[..], b"{\"n_layer\": 2}", b"{\"model_type\": \"bert\", \"n_layer\": 2, \"n_head\": 4, \"n_embd\": 64, \"vocab_size\": 513, \"n_positions\": 64}"] {
        let mut f = files();
        f.insert("config.json".into(), bad.to_vec());
        assert!(matches!(load_err(&f), Error::Config(_)));
    }
    let mut f = files();
    f.remove("config.json");
    assert!(matches!(load_err(&f), Error::MissingFile(_)));
}

/// A tokenizer.json gptlens cannot read leaves the model running on ids; text is refused with
/// the reason.
#[test]
fn bad_tokenizer_file() {
    let mut f = files();
    f.insert("tokenizer.json".into(), b"{\"model\": 3}".to_vec());
    let ckpt = load(&f).unwrap();
    assert!(ckpt.tokenizer.is_none());
    let Err(Error::UnreadableTokenizer(reason)) = ckpt.tokenizer() else { panic!("the reason must be kept") };
    assert!(reason.contains("tokenizer.json"), "{reason}");
    Session::new(ckpt.model.clone()).run(&[1, 2, 3], &CaptureSpec::none()).unwrap();
}

#[test]
fn token_id_out_of_range_leaves_the_session_intact() {
    let ckpt = load(&files()).unwrap();
    let mut session = Session::new(ckpt.model.clone());
    let before = session.run(&[1, 2, 3], &CaptureSpec::none()).unwrap();
    let e = session.run(&[1, 2, 513], &CaptureSpec::none()).unwrap_err();
    assert!(matches!(e, Error::TokenOutOfRange { id: 513, vocab: 513 }), "{e}");
    assert!(session.step(9999).is_err());
    assert_eq!(session.tokens(), &[1, 2, 3]);
    let again = session.run(&[1, 2, 3], &CaptureSpec::none()).unwrap();
    assert_eq!((again.computed, again.last_logits), (0, before.last_logits));
}

#[test]
fn prompt_longer_than_the_context() {
    let ckpt = load(&files()).unwrap();
    let mut session = Session::new(ckpt.model.clone());
    let e = session.run(&[5; 65], &CaptureSpec::none()).unwrap_err();
    assert!(matches!(e, Error::ContextOverflow { len: 65, n_ctx: 64 }), "{e}");
    session.run(&[5; 64], &CaptureSpec::none()).unwrap();
    assert!(matches!(session.step(5), Err(Error::ContextOverflow { .. })));
    assert!(matches!(session.run(&[], &CaptureSpec::none()), Err(Error::EmptyInput)));
}

#[test]
fn unknown_hook_name() {
    let ckpt = load(&files()).unwrap();
    let e = CaptureSpec::from_names(&["blocks.7.attn.hook_pattern"], &ckpt.model.config).unwrap_err();
    assert!(matches!(e, Error::UnknownHook { .. }), "{e}");
}

/// `Hook::parse` compares the name only with the hooks of the block it names: every hook a model
/// offers must still parse back to itself (blocks past 9 included), and a near miss must not.
#[test]
fn every_offered_hook_name_parses_back_and_near_misses_do_not() {
    let gpt2 = load(&files()).unwrap().model.config.clone();
    let llama = gptlens::model::Config { n_layer: 12, ..common::tiny_llama_config(64, 16) };
    for config in [&gpt2, &llama] {
        for hook in Hook::offered(config) {
            assert_eq!(Hook::parse(&hook.to_string(), config).unwrap(), hook);
        }
    }
    let near_misses = [
        "blocks.+1.attn.hook_pattern",
        "blocks.01.attn.hook_pattern",
        "blocks.1.attn.hook_pattern ",
        "blocks..attn.hook_pattern",
        "blocks.1",
        "blocks.12.attn.hook_pattern",
        "blocks.1.ln_final.hook_scale",
        "ln_final.hook_mean",
        "logits.",
        "",
    ];
    for name in near_misses {
        assert!(matches!(Hook::parse(name, &llama), Err(Error::UnknownHook { .. })), "{name:?}");
    }
}

#[test]
fn model_without_tokenizer_loads_but_has_none() {
    let ckpt = Checkpoint::open(&fixture("gpt2-tiny-f16")).unwrap();
    assert!(ckpt.tokenizer.is_none());
}
