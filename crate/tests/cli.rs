#![cfg(not(target_arch = "wasm32"))]
//! The `gptlens` binary, as a user (or a script outside the repo) calls it.

mod common;

use std::process::{Command, Output};

use common::{fixture, ids, max_abs_diff, reference};

fn gptlens(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gptlens")).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    out
}

fn stdout(out: &Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn f32_model() -> String {
    fixture("gpt2-tiny-f32").display().to_string()
}

const PROMPT: &str = "The tokenizer learns 12 pieces, but it isn't the whole word.";

#[test]
fn run_prints_tokens_and_top_k_json() {
    let out = stdout(&gptlens(&["run", "--model", &f32_model(), "--prompt", PROMPT, "--top", "5", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let tokens: Vec<u32> = v["tokens"].as_array().unwrap().iter().map(|t| t["id"].as_u64().unwrap() as u32).collect();
    assert_eq!(tokens, ids(&reference("gpt2-tiny-f32")["tokens"]));
    let top = v["top"].as_array().unwrap();
    assert_eq!(top.len(), 5);
    let probs: Vec<f64> = top.iter().map(|t| t["prob"].as_f64().unwrap()).collect();
    assert!(probs.windows(2).all(|w| w[0] >= w[1]) && probs.iter().sum::<f64>() <= 1.0 + 1e-6);
    // The most likely token is the first greedy token transformers produced.
    assert_eq!(top[0]["id"].as_u64().unwrap() as f32, reference("gpt2-tiny-f32")["greedy"].data[0]);
}

#[test]
fn run_prints_a_readable_table() {
    let out = stdout(&gptlens(&["run", "--model", &f32_model(), "--prompt", PROMPT, "--top", "3"]));
    assert!(out.contains("tokens (22)") && out.contains("   1.") && out.contains("   3."), "{out}");
}

#[test]
fn trace_writes_every_hook_and_matches_pytorch() {
    let dir = std::env::temp_dir().join(format!("gptlens-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.safetensors");
    let model = fixture("gpt2-tiny-f16").display().to_string();
    let reference = reference("gpt2-tiny-f16");
    let tokens: Vec<String> = ids(&reference["tokens"]).iter().map(u32::to_string).collect();
    stdout(&gptlens(&["trace", "--model", &model, "--tokens", &tokens.join(","), "--out", path.to_str().unwrap()]));
    let bytes = std::fs::read(&path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names: Vec<String> = st.names().into_iter().map(String::from).collect();
    names.sort();
    let mut expected: Vec<String> = reference.keys().filter(|n| *n != "greedy").cloned().collect();
    expected.sort();
    assert_eq!(names, expected);
    let logits = st.tensor("logits").unwrap();
    assert_eq!(logits.dtype(), safetensors::Dtype::F32);
    let got: Vec<f32> = logits.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
    assert!(max_abs_diff(&got, &reference["logits"].data) <= 1e-4);
    assert_eq!(st.tensor("tokens").unwrap().dtype(), safetensors::Dtype::I64);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn greedy_generate_streams_the_reference_continuation() {
    let out = stdout(&gptlens(&["generate", "--model", &f32_model(), "--prompt", PROMPT, "-n", "12", "--temperature", "0"]));
    let ckpt = gptlens::Checkpoint::open(&fixture("gpt2-tiny-f32")).unwrap();
    let tok = ckpt.tokenizer.unwrap();
    let mut all = ids(&reference("gpt2-tiny-f32")["tokens"]);
    all.extend(ids(&reference("gpt2-tiny-f32")["greedy"]));
    assert_eq!(out.trim_end_matches('\n'), tok.decode(&all).unwrap());
}

#[test]
fn seeded_sampling_repeats() {
    let args = ["generate", "--model", &f32_model(), "--prompt", "The", "-n", "20", "--temperature", "0.9", "--top-k", "40", "--top-p", "0.95", "--seed", "42"];
    let (a, b) = (stdout(&gptlens(&args)), stdout(&gptlens(&args)));
    assert_eq!(a, b);
    let mut other = args;
    other[14] = "43";
    assert_ne!(a, stdout(&gptlens(&other)));
}

#[test]
fn errors_are_messages_not_panics() {
    let f16 = fixture("gpt2-tiny-f16").display().to_string();
    for (args, needle) in [
        (vec!["run", "--model", &f16, "--prompt", "hi"], "no tokenizer"),
        (vec!["run", "--model", "/nonexistent/model", "--tokens", "1"], "cannot read"),
        (vec!["run", "--model", &f16, "--tokens", "1,2,300"], "out of range"),
        (vec!["generate", "--model", &f16, "--tokens", "1", "-n", "40"], "context"),
        (vec!["generate", "--model", &f16, "--tokens", "1", "--temperature=-1"], "temperature"),
    ] {
        let out = gptlens(&args);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("error: ") && err.contains(needle), "{args:?} → {err}");
    }
}
