#![cfg(not(target_arch = "wasm32"))]
//! The `gptlens` binary, as a user (or a script outside the repo) calls it.

mod common;

use std::process::{Command, Output};

use common::{fixture, ids, max_abs_diff, reference, set_u32};

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
    // --hooks: only those (and the tokens); a name the model does not have is an error.
    let picked = "blocks.1.attn.hook_pattern,logits";
    stdout(&gptlens(&[
        "trace",
        "--model",
        &model,
        "--tokens",
        "1,2,3",
        "--hooks",
        picked,
        "--out",
        path.to_str().unwrap(),
    ]));
    let bytes = std::fs::read(&path).unwrap();
    let mut names: Vec<String> =
        safetensors::SafeTensors::deserialize(&bytes).unwrap().names().into_iter().map(String::from).collect();
    names.sort();
    assert_eq!(names, ["blocks.1.attn.hook_pattern", "logits", "tokens"]);
    let bad =
        gptlens(&["trace", "--model", &model, "--tokens", "1", "--hooks", "blocks.9.attn.hook_pattern", "--out", "x"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("blocks.9.attn.hook_pattern"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn greedy_generate_streams_the_reference_continuation() {
    let out =
        stdout(&gptlens(&["generate", "--model", &f32_model(), "--prompt", PROMPT, "-n", "12", "--temperature", "0"]));
    let ckpt = gptlens::Checkpoint::open(&fixture("gpt2-tiny-f32")).unwrap();
    let tok = ckpt.tokenizer.unwrap();
    let mut all = ids(&reference("gpt2-tiny-f32")["tokens"]);
    all.extend(ids(&reference("gpt2-tiny-f32")["greedy"]));
    assert_eq!(out.trim_end_matches('\n'), tok.decode(&all).unwrap());
}

#[test]
fn seeded_sampling_repeats() {
    let args = [
        "generate",
        "--model",
        &f32_model(),
        "--prompt",
        "The",
        "-n",
        "20",
        "--temperature",
        "0.9",
        "--top-k",
        "40",
        "--top-p",
        "0.95",
        "--seed",
        "42",
    ];
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

// ---- arguments and surroundings a script may get wrong (issue 16) --------------------------------

/// Runs gptlens with `args` and an environment variable, expecting `error: …needle…` and exit 1.
fn fails_with(args: &[&str], env: Option<(&str, &str)>, needle: &str) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gptlens"));
    command.args(args);
    if let Some((k, v)) = env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{args:?} → {err}");
    assert_eq!(out.status.code(), Some(1), "{args:?} → {err}");
    assert!(err.starts_with("error: ") && err.contains(needle), "{args:?} → {err}");
}

#[test]
fn an_overflowing_token_count_is_an_error() {
    let f16 = fixture("gpt2-tiny-f16").display().to_string();
    for n in ["18446744073709551615", "18446744073709551614", "30"] {
        fails_with(
            &["generate", "--model", &f16, "--tokens", "1,2,3", "-n", n],
            None,
            "do not fit in the model's context of 32",
        );
    }
    stdout(&gptlens(&["generate", "--model", &f16, "--tokens", "1,2,3", "-n", "29", "--temperature", "0"]));
}

/// Starts gptlens with its standard output a pipe that is closed before it writes anything.
fn with_closed_stdout(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gptlens"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader is gone (as after `| head -c 10`)
    child.wait_with_output().unwrap()
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let model = f32_model();
    for args in [
        vec!["run", "--model", &model, "--prompt", PROMPT],
        vec!["run", "--model", &model, "--prompt", PROMPT, "--json"],
        vec!["generate", "--model", &model, "--prompt", PROMPT, "-n", "30"],
    ] {
        let out = with_closed_stdout(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?} → {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?} → {err}");
        assert!(err.is_empty(), "{args:?} → {err}");
    }
}

#[test]
fn a_full_stdout_is_a_write_error() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("skipped: no /dev/full on this system");
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_gptlens"))
        .args(["run", "--model", &f32_model(), "--prompt", PROMPT])
        .stdout(full)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot write standard output") && !err.contains("panicked"), "{err}");
}

#[test]
fn thread_counts_are_clamped_to_the_machine() {
    let model = f32_model();
    let cores = std::thread::available_parallelism().unwrap().get();
    let start = std::time::Instant::now();
    let out = gptlens(&["--threads", "100000", "generate", "--model", &model, "--prompt", "The", "-n", "4", "--stats"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("--threads 100000 is more than the {cores} this machine offers; using {cores}")),
        "{err}"
    );
    assert!(err.contains(&format!("threads: {cores};")), "{err}");
    assert!(start.elapsed() < std::time::Duration::from_secs(30), "took {:?}", start.elapsed());
    // 0 means the default, one per core, without a notice.
    let out = gptlens(&["--threads", "0", "generate", "--model", &model, "--prompt", "The", "-n", "4", "--stats"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("more than"), "{err}");
    assert!(err.contains(&format!("threads: {cores};")), "{err}");
}

#[test]
fn a_context_cut_to_the_memory_budget_is_said_on_stderr() {
    // A tiny LLaMA claiming a million positions: a session that long needs more than 1 GiB.
    let mut gguf = std::fs::read(fixture("llama-tiny-q/model.gguf")).unwrap();
    set_u32(&mut gguf, "llama.context_length", 1 << 20);
    let path = std::env::temp_dir().join(format!("gptlens-cli-context-{}.gguf", std::process::id()));
    std::fs::write(&path, &gguf).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gptlens"))
        .args(["run", "--model", path.to_str().unwrap(), "--tokens", "1,2,3"])
        .env("GPTLENS_MEMORY_BUDGET", "1G")
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("note: the context was cut from 1048576 to") && err.contains("set by GPTLENS_MEMORY_BUDGET"),
        "{err}"
    );
    assert!(stdout(&out).contains("context "), "the model line gives the cut context");
}

#[test]
fn devices_and_pipes_are_read_with_bounds() {
    let start = std::time::Instant::now();
    // /dev/zero never ends: its first bytes show it is no checkpoint.
    fails_with(&["run", "--model", "/dev/zero", "--tokens", "1"], None, "not a valid safetensors file");
    // A device given as a .gguf is checked for the magic number (through a symlink named .gguf).
    let dir = std::env::temp_dir().join(format!("gptlens-cli-dev-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("zero.gguf");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    fails_with(&["run", "--model", link.to_str().unwrap(), "--tokens", "1"], None, "not \"GGUF\"");
    assert!(start.elapsed() < std::time::Duration::from_secs(10), "took {:?}", start.elapsed());
    // A GGUF streamed through a pipe still loads (process substitution, `/dev/stdin`).
    let gguf = fixture("gpt2-tiny-gguf/model.gguf");
    let out = Command::new(env!("CARGO_BIN_EXE_gptlens"))
        .args(["run", "--model", "/dev/stdin", "--tokens", "1,2,3"])
        .stdin(std::fs::File::open(&gguf).unwrap())
        .output()
        .unwrap();
    // /dev/stdin has no .gguf extension: it is taken for safetensors and refused by its first
    // bytes, with a message rather than a hang.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("safetensors") && !err.contains("panicked"), "{err}");
    let piped = dir.join("piped.gguf");
    let _ = std::fs::remove_file(&piped);
    std::os::unix::fs::symlink("/dev/stdin", &piped).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gptlens"))
        .args(["run", "--model", piped.to_str().unwrap(), "--tokens", "1,2,3"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            let mut stdin = child.stdin.take().unwrap();
            let bytes = std::fs::read(&gguf).unwrap();
            std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &bytes));
            child.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A budget smaller than the model refuses it, naming the variable that sets it.
    fails_with(
        &["run", "--model", &f32_model(), "--tokens", "1"],
        Some(("GPTLENS_MEMORY_BUDGET", "100K")),
        "GPTLENS_MEMORY_BUDGET",
    );
    fails_with(
        &["run", "--model", &f32_model(), "--tokens", "1"],
        Some(("GPTLENS_MEMORY_BUDGET", "lots")),
        "is not a size",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trace_to_a_full_disk_says_it_cannot_write() {
    if !std::path::Path::new("/dev/full").exists() {
        eprintln!("skipped: no /dev/full on this system");
        return;
    }
    fails_with(
        &["trace", "--model", &f32_model(), "--tokens", "1,2,3", "--out", "/dev/full"],
        None,
        "cannot write /dev/full: No space left on device",
    );
    fails_with(
        &["trace", "--model", &f32_model(), "--tokens", "1,2,3", "--out", "/nonexistent-dir/trace.safetensors"],
        None,
        "cannot write /nonexistent-dir/trace.safetensors",
    );
}

#[test]
fn the_backend_flag_still_works() {
    let out = stdout(&gptlens(&["--backend", "cpu", "run", "--model", &f32_model(), "--prompt", PROMPT, "--top", "2"]));
    assert!(out.contains("   2."), "{out}");
    fails_with(
        &["--backend", "cpu", "--threads", "1", "run", "--model", "/dev/zero", "--tokens", "1"],
        None,
        "safetensors",
    );
}

/// `gptlens tokenize` reads only a tokenizer: from a GGUF holding a vocabulary and no tensors
/// (tests/fixtures/tokenizer/vocab-only.gguf, this fixture's tokenizer.json written as llama.cpp
/// writes one), from tokenizer.json, or from a model folder; every route gives Python's ids.
#[test]
fn tokenize_prints_ids_and_pieces_from_any_tokenizer_source() {
    let want = ids(&reference("gpt2-tiny-f32")["tokens"]);
    let sources = [
        fixture("tokenizer/vocab-only.gguf"),
        fixture("tokenizer/tokenizer.json"),
        fixture("gpt2-tiny-f32"),
        fixture("tokenizer"),
    ];
    for source in sources {
        let out = stdout(&gptlens(&["tokenize", "--model", &source.display().to_string(), "--text", PROMPT, "--json"]));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let got: Vec<u32> = v["ids"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
        assert_eq!(got, want, "{}", source.display());
        let pieces: Vec<&str> = v["pieces"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
        assert_eq!(pieces.concat(), PROMPT, "{}: the pieces spell the text", source.display());
    }
    let plain = stdout(&gptlens(&["tokenize", "--model", &f32_model(), "--text", "The"]));
    assert_eq!(plain, format!("{}\tThe\n", want[0]));
    // A model without tokenizer files says so rather than guessing.
    let out = gptlens(&["tokenize", "--model", &fixture("llama-tiny").display().to_string(), "--text", "x"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("no tokenizer"));
}

/// A GGUF whose vocabulary gptlens cannot read (here an unknown pre-tokenizer) still loads: token
/// ids run it, and text is refused with the reason.
#[test]
fn a_model_with_an_unreadable_tokenizer_runs_on_ids() {
    let mut bytes = std::fs::read(fixture("llama-tiny-q/model.gguf")).unwrap();
    let at = bytes.windows(5).position(|w| w == b"gpt-2").expect("the fixture's pre-tokenizer is gpt-2");
    bytes[at..at + 5].copy_from_slice(b"gpt-9");
    let path = std::env::temp_dir().join(format!("gptlens-cli-unreadable-{}.gguf", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let model = path.display().to_string();
    let out = stdout(&gptlens(&["run", "--model", &model, "--tokens", "1,2,3", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["tokens"].as_array().unwrap().len(), 3);
    let out = gptlens(&["run", "--model", &model, "--prompt", "hello"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "text needs the tokenizer");
    assert!(stderr.contains("tokenizer cannot be read") && stderr.contains("`gpt-9`"), "{stderr}");
    std::fs::remove_file(&path).unwrap();
}

/// `gptlens heads`: the default sequence and its scores are PyTorch's (tests/fixtures/heads), as
/// JSON for scripts and as a table of the strongest heads; a prompt and ids work too.
#[test]
fn heads_scores_every_head_like_pytorch() {
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("instruments/heads.json")).unwrap()).unwrap();
    for model in ["gpt2-tiny-f32", "llama-tiny"] {
        let path = fixture(model).display().to_string();
        let v: serde_json::Value =
            serde_json::from_str(&stdout(&gptlens(&["heads", "--model", &path, "--json"]))).unwrap();
        let want = &expected[model]["repeated"];
        assert_eq!(v["tokens"], want["tokens"], "{model}: the default sequence");
        for detector in ["previous_token", "first_token", "duplicate_token", "induction"] {
            let flat = |x: &serde_json::Value| -> Vec<f32> {
                x.as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|row| row.as_array().unwrap().iter().map(|s| s.as_f64().unwrap() as f32))
                    .collect()
            };
            let d = max_abs_diff(&flat(&v[detector]), &flat(&want[detector]));
            assert!(d <= 2e-5, "{model} {detector}: off by {d:e}");
        }
    }
    let table = stdout(&gptlens(&["heads", "--model", &f32_model(), "--prompt", PROMPT, "--top", "2"]));
    assert!(
        table.starts_with("22 tokens;") && table.contains("induction: ") && table.contains("previous token: "),
        "{table}"
    );
    let ids = stdout(&gptlens(&["heads", "--model", &f32_model(), "--tokens", "5,6,5,6", "--json"]));
    assert!(ids.contains("\"tokens\":[5,6,5,6]"), "{ids}");
    let bad = gptlens(&["heads", "--model", &f32_model(), "--tokens", "999999"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("out of range"));
}

/// `--ablate L.H,…` zeroes those heads for run, trace and generate: `trace`'s logits are
/// transformers' with the same heads zeroed (tests/fixtures/instruments/ablation.json).
#[test]
fn ablate_zeroes_heads_like_pytorch() {
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("instruments/ablation.json")).unwrap()).unwrap();
    let want = &expected["gpt2-tiny-f32"];
    let tokens: Vec<String> = want["tokens"].as_array().unwrap().iter().map(|t| t.to_string()).collect();
    let heads: Vec<String> = want["ablated"].as_array().unwrap().iter().map(|p| format!("{}.{}", p[0], p[1])).collect();
    let dir = std::env::temp_dir().join(format!("gptlens-cli-ablate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ablated.safetensors");
    let (tokens, heads) = (tokens.join(","), heads.join(","));
    let args =
        ["trace", "--model", &f32_model(), "--tokens", &tokens, "--hooks", "logits", "--ablate", &heads, "--out"];
    stdout(&gptlens(&[&args[..], &[path.to_str().unwrap()]].concat()));
    let bytes = std::fs::read(&path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let logits: Vec<f32> = st
        .tensor("logits")
        .unwrap()
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let want: Vec<f32> = serde_json::from_value(want["ablated_last_logits"].clone()).unwrap();
    let last = &logits[logits.len() - want.len()..];
    assert!(max_abs_diff(last, &want) <= 1e-4, "off by {}", max_abs_diff(last, &want));
    std::fs::remove_dir_all(&dir).unwrap();
    let bad = gptlens(&["run", "--model", &f32_model(), "--tokens", "1", "--ablate", "9.9"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("head 9.9 does not exist"));
}

/// `gptlens patch --json` gives PyTorch's scores (tests/fixtures/instruments/patching.json) on
/// every fixture; `lens` and `attribute` run on every fixture (attribution's sum holds; Gemma is
/// refused by name); prompts of different lengths and multi-token answers are errors that say so.
#[test]
fn patch_lens_and_attribute_work_on_every_fixture() {
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("instruments/patching.json")).unwrap()).unwrap();
    let join =
        |v: &serde_json::Value| v.as_array().unwrap().iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",");
    for model in ["gpt2-tiny-f32", "llama-tiny", "qwen2-tiny", "gemma3-tiny"] {
        let path = fixture(model).display().to_string();
        let want = &expected[model]["patching"];
        let (clean, corrupt) = (join(&want["clean"]), join(&want["corrupt"]));
        let (answer, wrong) = (want["answer"].to_string(), want["wrong"].to_string());
        let args = ["patch", "--model", &path, "--clean-tokens", &clean, "--corrupt-tokens", &corrupt];
        let out = stdout(&gptlens(&[&args[..], &["--answer", &answer, "--wrong", &wrong, "--json"]].concat()));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let tolerance = 3e-4 / (want["clean_diff"].as_f64().unwrap() - want["corrupt_diff"].as_f64().unwrap()).abs();
        for key in ["resid_pre", "heads"] {
            let flat = |x: &serde_json::Value| -> Vec<f64> {
                x.as_array()
                    .unwrap()
                    .iter()
                    .flat_map(|r| r.as_array().unwrap().iter().map(|s| s.as_f64().unwrap()))
                    .collect()
            };
            let worst = flat(&v[key]).iter().zip(flat(&want[key])).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            assert!(worst <= tolerance, "{model} {key}: off by {worst:e}");
        }
        let lens: serde_json::Value = serde_json::from_str(&stdout(&gptlens(&[
            "lens", "--model", &path, "--tokens", &clean, "--from", "7", "--target", "3", "--json",
        ])))
        .unwrap();
        assert_eq!(lens["first"], 7, "{model}");
        assert_eq!(lens["top"].as_array().unwrap().len(), lens["target_prob"].as_array().unwrap().len(), "{model}");
        let attribute = gptlens(&["attribute", "--model", &path, "--tokens", &clean, "--json"]);
        if model == "gemma3-tiny" {
            assert!(String::from_utf8_lossy(&attribute.stderr).contains("Gemma"), "{model}");
        } else {
            let a: serde_json::Value = serde_json::from_str(&stdout(&attribute)).unwrap();
            let (total, diff) = (a["total"].as_f64().unwrap(), a["logit_diff"].as_f64().unwrap());
            assert!((total - diff).abs() <= 1e-4, "{model}: parts sum to {total}, not {diff}");
        }
    }
    let table = stdout(&gptlens(&["attribute", "--model", &f32_model(), "--prompt", PROMPT, "--top", "3"]));
    assert!(table.contains("the parts sum to") && table.lines().count() == 4, "{table}");
    let different = gptlens(&["patch", "--model", &f32_model(), "--clean-tokens", "1,2,3", "--corrupt-tokens", "1,2"]);
    assert!(String::from_utf8_lossy(&different.stderr).contains("required"), "--answer and --wrong are required");
    let different = gptlens(&[
        "patch",
        "--model",
        &f32_model(),
        "--clean-tokens",
        "1,2,3",
        "--corrupt-tokens",
        "1,2",
        "--answer",
        "1",
        "--wrong",
        "2",
    ]);
    assert!(String::from_utf8_lossy(&different.stderr).contains("same length"));
    let long_answer = gptlens(&["lens", "--model", &f32_model(), "--prompt", PROMPT, "--target", "two words"]);
    assert!(String::from_utf8_lossy(&long_answer.stderr).contains("one token"));
}

/// `--ablate … --mean` replaces heads and MLPs by their means over the prompt: `trace`'s logits
/// are transformers' with the same replacement (tests/fixtures/instruments/hooks-*.safetensors).
#[test]
fn mean_ablation_from_the_cli_matches_pytorch() {
    let bytes = std::fs::read(fixture("instruments/hooks-llama-tiny.safetensors")).unwrap();
    let reference = common::reference_from_bytes(&bytes);
    let tokens: Vec<String> = reference["tokens"].data.iter().map(|&t| (t as u32).to_string()).collect();
    let out = std::env::temp_dir().join(format!("gptlens-cli-mean-{}.safetensors", std::process::id()));
    let path = fixture("llama-tiny").display().to_string();
    let ablate = common::reference_ablation(&bytes);
    let args =
        ["trace", "--model", &path, "--tokens", &tokens.join(","), "--hooks", "logits", "--ablate", &ablate, "--mean"];
    stdout(&gptlens(&[&args[..], &["--out", out.to_str().unwrap()]].concat()));
    let written = common::reference_from_bytes(&std::fs::read(&out).unwrap());
    let _ = std::fs::remove_file(&out);
    let got = &written["logits"];
    common::check_hook("cli --mean", "mean_ablated.logits", &got.shape, &got.data, &reference["mean_ablated.logits"]);
    let lonely = gptlens(&["run", "--model", &path, "--tokens", "1,2", "--mean"]);
    assert!(String::from_utf8_lossy(&lonely.stderr).contains("--ablate"), "--mean needs --ablate");
}

/// `gptlens trace` on an encoder (the post-LN, sinusoidal, bidirectional fixture, with a tied
/// head): full attention rows (nonzero above the diagonal), no final norm (post-LN), equal to
/// PyTorch's first batch row, which has no padding.
#[test]
fn trace_works_for_an_encoder() {
    let model = fixture("encoder/variants/post-gelu-sinusoidal-bidirectional");
    let reference = common::reference_from_bytes(&std::fs::read(model.join("reference.safetensors")).unwrap());
    let t = reference["input_ids"].shape[1];
    let tokens: Vec<String> = ids(&reference["input_ids"])[..t].iter().map(u32::to_string).collect();
    let out_path = std::env::temp_dir().join(format!("gptlens-encoder-trace-{}.safetensors", std::process::id()));
    let out = gptlens(&[
        "trace",
        "--model",
        &model.display().to_string(),
        "--tokens",
        &tokens.join(","),
        "--out",
        &out_path.display().to_string(),
    ]);
    stdout(&out);
    let trace = common::reference_from_bytes(&std::fs::read(&out_path).unwrap());
    let _ = std::fs::remove_file(&out_path);
    assert!(trace.contains_key("logits") && !trace.contains_key("ln_final.hook_scale"));
    let pattern = &trace["blocks.0.attn.hook_pattern"];
    assert_eq!(pattern.shape, [4, t, t]);
    assert!(pattern.data[1] > 0.0, "query 0 reads key 1: the map is full, not causal");
    let want = &reference["pattern.0"].data[..4 * t * t];
    assert!(max_abs_diff(&pattern.data, want) <= 1e-5);
}

/// `gptlens embed` on all-MiniLM-L6-v2 gives PyTorch's cosine similarities (sentence-transformers'
/// pooling) within 1e-5, when scripts/fetch-minilm.sh could fetch the model.
#[test]
fn embed_gives_pytorchs_similarities() {
    let dir = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/models/all-MiniLM-L6-v2"));
    if !dir.join("model.safetensors").exists() {
        println!("skipped: all-MiniLM-L6-v2 is not in assets/models (scripts/fetch-minilm.sh could not fetch it)");
        return;
    }
    let sentences: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(fixture("encoder/minilm/sentences.json")).unwrap()).unwrap();
    let texts: Vec<&str> = sentences.iter().map(|s| s["text"].as_str().unwrap()).collect();
    let mut args = vec!["embed".to_string(), "--model".into(), dir.display().to_string(), "--json".into()];
    for t in &texts {
        args.extend(["--text".to_string(), t.to_string()]);
    }
    let out = stdout(&gptlens(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let want = &common::reference_from_bytes(&std::fs::read(fixture("encoder/minilm/reference.safetensors")).unwrap())
        ["cosine"];
    let n = texts.len();
    for (a, row) in v["similarity"].as_array().unwrap().iter().enumerate() {
        for (b, s) in row.as_array().unwrap().iter().enumerate() {
            let (got, expected) = (s.as_f64().unwrap() as f32, want.data[a * n + b]);
            assert!((got - expected).abs() <= 1e-5, "similarity {a}·{b}: {got} vs PyTorch {expected}");
        }
    }
    let table =
        stdout(&gptlens(&["embed", "--model", &dir.display().to_string(), "--text", texts[0], "--text", texts[1]]));
    assert!(table.contains("cosine similarity:") && table.contains("384 dimensions"), "{table}");
}

/// `gptlens train` writes a folder gptlens loads (bytes in, bytes out), and a run stopped at a
/// save point and resumed ends bit for bit where an uninterrupted run ends.
#[test]
fn train_writes_a_model_and_resumes_exactly() {
    let dir = std::env::temp_dir().join(format!("gptlens-train-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text: String = (0..400).map(|i| format!("To be, or not to be: that is question {i}.\n")).collect();
    let data = dir.join("text.txt");
    std::fs::write(&data, &text).unwrap();
    let shape = ["--layers", "1", "--heads", "2", "--width", "16", "--context", "16", "--batch", "2"];
    let run = |out: &str, extra: &[&str]| {
        let out = dir.join(out).display().to_string();
        let mut args =
            vec!["train", "--data", data.to_str().unwrap(), "--out", &out, "--eval-every", "3", "--eval-batches", "2"];
        args.extend_from_slice(&shape);
        args.extend_from_slice(extra);
        let result = gptlens(&args);
        assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
        String::from_utf8_lossy(&result.stderr).to_string()
    };
    let log = run("whole", &["--steps", "6", "--warmup", "2"]);
    assert!(log.contains("step 6/6") && log.contains("val "), "{log}");
    // Stop after 3 (the same schedule), then resume to 6 from the folder.
    run("halves", &["--steps", "6", "--stop-at", "3", "--warmup", "2"]);
    let resume = |extra: &[&str]| {
        let out = dir.join("halves").display().to_string();
        let mut args = vec!["train", "--data", data.to_str().unwrap(), "--out", &out, "--resume"];
        args.extend_from_slice(extra);
        stdout(&gptlens(&args));
    };
    resume(&["--steps", "6"]);
    let weights = |run: &str| std::fs::read(dir.join(run).join("model.safetensors")).unwrap();
    assert!(weights("whole") == weights("halves"), "a resumed run must end where an uninterrupted one does");
    let out = stdout(&gptlens(&["run", "--model", dir.join("whole").to_str().unwrap(), "--prompt", "To be", "--json"]));
    assert!(out.contains("\"top\""), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
