//! The JavaScript API (src/bindings) in a real JS engine: node by default, headless Chromium with
//! `WASM_BINDGEN_USE_BROWSER=1`. The PyTorch parity fixtures go in through `Model.load` as a JS
//! object of Uint8Arrays and come out through `Trace.tensor`, with the tolerances of parity.rs.
#![cfg(target_arch = "wasm32")]

mod common;

use common::{check_hook, ids, max_abs_diff, reference_from_bytes as reference, reference_hooks};

use gptlens::bindings::{Model, Session, Trace};
use js_sys::{Float32Array, Object, Reflect, Uint8Array};
use serde::Deserialize;
use wasm_bindgen::{JsCast, JsError, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;

macro_rules! fixture {
    ($path:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/", $path)).as_slice()
    };
}

const F32_FILES: [(&str, &[u8]); 3] = [
    ("config.json", fixture!("gpt2-tiny-f32/config.json")),
    ("model.safetensors", fixture!("gpt2-tiny-f32/model.safetensors")),
    ("tokenizer.json", fixture!("gpt2-tiny-f32/tokenizer.json")),
];
const F16_FILES: [(&str, &[u8]); 2] = [
    ("config.json", fixture!("gpt2-tiny-f16/config.json")),
    ("model.safetensors", fixture!("gpt2-tiny-f16/model.safetensors")),
];
const F32_REFERENCE: &[u8] = fixture!("gpt2-tiny-f32/reference.safetensors");
const F16_REFERENCE: &[u8] = fixture!("gpt2-tiny-f16/reference.safetensors");
const TOKENIZER_CASES: &[u8] = fixture!("tokenizer/cases.json");
const F32_VOCAB: usize = 513;

/// `Record<string, Uint8Array>`, as a file picker's contents reach `Model.load`.
fn js_files(files: &[(&str, &[u8])]) -> JsValue {
    let object = Object::new();
    for (name, bytes) in files {
        Reflect::set(&object, &(*name).into(), &Uint8Array::from(*bytes)).unwrap();
    }
    object.into()
}

fn load(files: &[(&str, &[u8])]) -> Model {
    Model::load(&js_files(files)).map_err(message).unwrap()
}

/// The message of the JS `Error` a binding threw; fails if what was thrown is not an `Error`.
fn message(error: JsError) -> String {
    let thrown = JsValue::from(error);
    let error = thrown.dyn_ref::<js_sys::Error>().expect("bindings throw Error objects");
    error.message().into()
}

fn load_error(files: &[(&str, &[u8])]) -> String {
    match Model::load(&js_files(files)) {
        Ok(_) => panic!("loading should have failed"),
        Err(e) => message(e),
    }
}

fn js(json: &str) -> JsValue {
    js_sys::JSON::parse(json).unwrap()
}

fn get(object: &JsValue, key: &str) -> JsValue {
    Reflect::get(object, &key.into()).unwrap()
}

/// `trace.tensor(name)` as shape and values.
fn tensor(trace: &Trace, name: &str) -> (Vec<usize>, Vec<f32>) {
    let record = trace.tensor(name).map_err(message).unwrap();
    let shape = serde_wasm_bindgen::from_value(get(&record, "shape")).unwrap();
    let data = get(&record, "data").dyn_into::<Float32Array>().expect("data is a Float32Array").to_vec();
    (shape, data)
}

fn check_parity(files: &[(&str, &[u8])], reference_bytes: &[u8]) {
    let model = load(files);
    let reference = reference(reference_bytes);
    let trace = model.run(&ids(&reference["tokens"]), None).map_err(message).unwrap();
    let expected = reference_hooks(&reference);
    assert_eq!(trace.names(), expected, "the trace must offer exactly the reference hooks");
    for name in expected {
        let (shape, got) = tensor(&trace, name);
        check_hook("the JS API", name, &shape, &got, &reference[name]);
    }
}

#[wasm_bindgen_test]
fn gpt2_f32_matches_pytorch() {
    check_parity(&F32_FILES, F32_REFERENCE);
}

/// The activation hooks, the logit lens and an ablation of a head and an MLP, against
/// transformers' forward hooks (tests/fixtures/instruments/make_hooks.py).
#[wasm_bindgen_test]
fn activation_hooks_and_ablations_match_pytorch() {
    let bytes = fixture!("instruments/hooks-gpt2-tiny-f32.safetensors");
    let reference = reference(bytes);
    let model = load(&F32_FILES);
    let names: Vec<String> = common::activation_hooks(&reference).iter().map(|n| n.to_string()).collect();
    let tokens = ids(&reference["tokens"]);
    let trace = model.run(&tokens, Some(names.clone())).map_err(message).unwrap();
    for name in &names {
        let (shape, got) = tensor(&trace, name);
        check_hook("the JS API", name, &shape, &got, &reference[name.as_str()]);
    }
    let session = model.session().map_err(message).unwrap();
    let ablate: Vec<String> = common::reference_ablation(bytes).split(',').map(String::from).collect();
    for (mean, key) in [(None, "ablated.logits"), (Some(true), "mean_ablated.logits")] {
        session.set_ablation(ablate.clone(), mean).map_err(message).unwrap();
        let ablated = session.run(&tokens, Some(vec!["logits".into()])).map_err(message).unwrap();
        let (shape, got) = tensor(&ablated, "logits");
        check_hook("the JS API", key, &shape, &got, &reference[key]);
    }
}

/// Activation patching and direct logit attribution through the bindings, against
/// tests/fixtures/instruments/patching.json.
#[wasm_bindgen_test]
fn patching_and_attribution_match_pytorch() {
    let expected: serde_json::Value = serde_json::from_slice(fixture!("instruments/patching.json")).unwrap();
    let want = &expected["gpt2-tiny-f32"]["patching"];
    let model = load(&F32_FILES);
    let ids = |key: &str| -> Vec<u32> { serde_json::from_value(want[key].clone()).unwrap() };
    let number = |v: &serde_json::Value| v.as_f64().unwrap();
    let scores = model
        .patch(&ids("clean"), &ids("corrupt"), number(&want["answer"]), number(&want["wrong"]), None)
        .map_err(message)
        .unwrap();
    let table = |key: &str| -> Vec<Vec<f64>> { serde_wasm_bindgen::from_value(get(&scores, key)).unwrap() };
    let tolerance = 3e-4 / (number(&want["clean_diff"]) - number(&want["corrupt_diff"])).abs();
    for (js, py) in [("residPre", "resid_pre"), ("heads", "heads")] {
        let want: Vec<Vec<f64>> = serde_json::from_value(want[py].clone()).unwrap();
        let worst =
            table(js).iter().flatten().zip(want.iter().flatten()).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(worst <= tolerance, "{js}: off by {worst}");
    }
    let want = &expected["gpt2-tiny-f32"]["attribution"];
    let tokens: Vec<u32> = serde_json::from_value(want["tokens"].clone()).unwrap();
    let got = model.attribution(&tokens, None, None, None, None, None).map_err(message).unwrap();
    let heads: Vec<Vec<f64>> = serde_wasm_bindgen::from_value(get(&got, "heads")).unwrap();
    let want_heads: Vec<Vec<f64>> = serde_json::from_value(want["heads"].clone()).unwrap();
    let worst = heads.iter().flatten().zip(want_heads.iter().flatten()).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(worst <= 1e-4, "attribution heads: off by {worst}");
}

#[wasm_bindgen_test]
fn gpt2_f16_matches_pytorch() {
    check_parity(&F16_FILES, F16_REFERENCE);
}

/// Same input, same bits: nothing in a run depends on allocation, timing or earlier runs, and
/// the last position's logits do not depend on whether the other positions' were computed.
#[wasm_bindgen_test]
fn runs_are_bit_for_bit_deterministic() {
    let model = load(&F32_FILES);
    let tokens = ids(&reference(F32_REFERENCE)["tokens"]);
    let run = || model.run(&tokens, None).map_err(message).unwrap();
    let (a, b) = (run(), run());
    let bits = |values: &[f32]| values.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for name in a.names() {
        assert_eq!(bits(&tensor(&a, &name).1), bits(&tensor(&b, &name).1), "{name}");
    }
    let session = model.session().map_err(message).unwrap();
    session.run(&tokens, Some(vec![])).map_err(message).unwrap();
    let logits = tensor(&a, "logits").1;
    assert_eq!(bits(&session.last_logits().map_err(message).unwrap()), bits(&logits[logits.len() - F32_VOCAB..]));
}

#[wasm_bindgen_test]
fn greedy_sampling_matches_transformers_generate() {
    for (files, reference_bytes) in [(&F32_FILES[..], F32_REFERENCE), (&F16_FILES[..], F16_REFERENCE)] {
        let model = load(files);
        let reference = reference(reference_bytes);
        let session = model.session().map_err(message).unwrap();
        session.run(&ids(&reference["tokens"]), Some(vec![])).map_err(message).unwrap();
        let greedy = ids(&reference["greedy"]);
        let got: Vec<u32> = greedy
            .iter()
            .map(|_| session.sample_next(js(r#"{"temperature": 0}"#), None).map_err(message).unwrap())
            .collect();
        assert_eq!(got, greedy);
    }
}

#[derive(Deserialize)]
struct TokenizerCase {
    text: String,
    ids: Vec<u32>,
}

#[wasm_bindgen_test]
fn tokenizer_matches_python_tokenizers() {
    let model = load(&F32_FILES);
    let cases: Vec<TokenizerCase> = serde_json::from_slice(TOKENIZER_CASES).unwrap();
    for case in cases {
        assert_eq!(model.encode(&case.text).map_err(message).unwrap(), case.ids, "{:?}", case.text);
        assert_eq!(model.decode(&case.ids).map_err(message).unwrap(), case.text);
    }
    let ids = model.encode("Hello\n").map_err(message).unwrap();
    assert_eq!(model.token_strings(&ids).map_err(message).unwrap().concat(), "Hello\\n");
}

#[wasm_bindgen_test]
fn info_describes_the_model() {
    let model = load(&F32_FILES);
    let info = model.info().map_err(message).unwrap();
    let number = |key| get(&info, key).as_f64().unwrap();
    assert_eq!(get(&info, "architecture").as_string().as_deref(), Some("gpt2"));
    assert_eq!(
        [
            number("nLayer"),
            number("nHead"),
            number("dModel"),
            number("dFf"),
            number("vocabSize"),
            number("contextLength")
        ],
        [2.0, 4.0, 64.0, 256.0, 513.0, 64.0]
    );
    assert!(number("nParams") > 100_000.0);
    assert_eq!(get(&info, "hasTokenizer").as_bool(), Some(true));
    let mut hooks: Vec<String> = serde_wasm_bindgen::from_value(get(&info, "standardHooks")).unwrap();
    assert_eq!(hooks[..3], ["blocks.0.ln1.hook_mean", "blocks.0.ln1.hook_scale", "blocks.0.attn.hook_pattern"]);
    hooks.sort();
    assert_eq!(
        hooks,
        model.run(&[1], None).map_err(message).unwrap().names(),
        "a default capture records the standard hooks"
    );
    let offered: Vec<String> = serde_wasm_bindgen::from_value(get(&info, "hooks")).unwrap();
    assert!(offered.len() > hooks.len() && offered.iter().any(|h| h == "lens.logits"));
}

#[wasm_bindgen_test]
fn a_model_without_tokenizer_files_runs_on_ids_and_says_why_it_cannot_encode() {
    let model = load(&F16_FILES);
    assert_eq!(get(&model.info().map_err(message).unwrap(), "hasTokenizer").as_bool(), Some(false));
    assert!(message(model.encode("hi").unwrap_err()).contains("no tokenizer"));
    assert!(message(model.decode(&[1, 2]).unwrap_err()).contains("no tokenizer"));
    assert_eq!(model.run(&[1, 2, 3], Some(vec![])).map_err(message).unwrap().names(), Vec::<String>::new());
}

#[wasm_bindgen_test]
fn capture_lists_choose_the_hooks() {
    let model = load(&F32_FILES);
    let trace = model
        .run(&[5, 6, 7], Some(vec!["logits".into(), "blocks.1.attn.hook_pattern".into()]))
        .map_err(message)
        .unwrap();
    assert_eq!(trace.names(), ["blocks.1.attn.hook_pattern", "logits"]);
    assert_eq!(tensor(&trace, "blocks.1.attn.hook_pattern").0, [4, 3, 3]);
    let e = message(trace.tensor("blocks.0.attn.hook_pattern").unwrap_err());
    assert!(e.contains("no tensor `blocks.0.attn.hook_pattern`"), "{e}");
    let e = message(model.run(&[5], Some(vec!["blocks.9.attn.hook_pattern".into()])).err().unwrap());
    assert!(e.contains("unknown hook `blocks.9.attn.hook_pattern`"), "{e}");
}

fn prompt(n: u32) -> Vec<u32> {
    (0..n).map(|i| (i * 37 + 5) % 513).collect()
}

#[wasm_bindgen_test]
fn sessions_reuse_the_shared_prefix() {
    let model = load(&F32_FILES);
    let session = model.session().map_err(message).unwrap();
    let first = prompt(20);
    assert_eq!(session.run(&first, None).map_err(message).unwrap().computed(), 20);
    let mut longer = first.clone();
    longer.extend([7, 8, 9]);
    let reused = session.run(&longer, None).map_err(message).unwrap();
    assert_eq!(reused.computed(), 3);
    assert_eq!(reused.tokens(), longer);
    let fresh = model.run(&longer, None).map_err(message).unwrap();
    for name in fresh.names() {
        let ((shape, got), (want_shape, want)) = (tensor(&reused, &name), tensor(&fresh, &name));
        assert_eq!(shape, want_shape, "{name}");
        assert!(max_abs_diff(&got, &want) <= 1e-5, "{name}");
    }
    session.step(11).map_err(message).unwrap();
    assert_eq!(session.tokens().map_err(message).unwrap().len(), 24);
    assert_eq!(session.run(&session.tokens().map_err(message).unwrap(), None).map_err(message).unwrap().computed(), 0);
    session.reset().map_err(message).unwrap();
    assert!(session.tokens().map_err(message).unwrap().is_empty());
    assert!(session.last_logits().map_err(message).unwrap().iter().all(|&x| x == 0.0));
    assert_eq!(session.run(&first, None).map_err(message).unwrap().computed(), 20);
}

/// `n` draws, the first with `seed`, the rest continuing its stream.
fn sample(session: &mut Session, params: &str, seed: Option<f64>, n: usize) -> Vec<u32> {
    (0..n)
        .map(|i| session.sample_next(js(params), if i == 0 { seed } else { None }).map_err(message).unwrap())
        .collect()
}

/// `sampleNext` draws from one random stream per session, which a seed restarts, and appends
/// each draw to the session. (That new parameters keep the stream going is a unit test of
/// `Sampler::set_params`.)
#[wasm_bindgen_test]
fn step_wise_sampling_follows_the_seed() {
    let model = load(&F32_FILES);
    let fresh = || {
        let session = model.session().map_err(message).unwrap();
        session.run(&prompt(5), Some(vec![])).map_err(message).unwrap();
        session
    };
    let hot = r#"{"temperature": 1.5, "topK": 50}"#;
    let mut a = fresh();
    let drawn = sample(&mut a, hot, Some(7.0), 10);
    assert_eq!(a.tokens().map_err(message).unwrap()[5..], drawn);
    assert_eq!(sample(&mut fresh(), hot, Some(7.0), 10), drawn);
    // A seed restarts the stream of a session that has sampled before.
    let mut b = fresh();
    sample(&mut b, hot, Some(8.0), 3);
    b.run(&prompt(5), Some(vec![])).map_err(message).unwrap();
    assert_eq!(sample(&mut b, hot, Some(7.0), 10), drawn);
    let mut c = fresh();
    assert_ne!(sample(&mut c, hot, Some(8.0), 10), drawn, "another seed, another text");
    // Unseeded sessions start from seed 0, and reset() starts over.
    let (mut d, mut e) = (fresh(), fresh());
    let unseeded = sample(&mut d, hot, None, 10);
    assert_eq!(sample(&mut e, hot, Some(0.0), 10), unseeded);
    d.reset().map_err(message).unwrap();
    d.run(&prompt(5), Some(vec![])).map_err(message).unwrap();
    assert_eq!(sample(&mut d, hot, None, 10), unseeded);

    for (params, seed, expected) in [
        (r#"{"temperature": -1}"#, None, "temperature -1 must be ≥ 0"),
        (r#"{"topK": 3}"#, None, "missing field `temperature`"),
        (r#"{"temperature": 1, "topP": 2}"#, None, "top-p 2 must be in (0, 1]"),
        (hot, Some(-1.0), "seed -1 must be a whole number"),
        (hot, Some(0.5), "seed 0.5 must be a whole number"),
    ] {
        let e = message(a.sample_next(js(params), seed).unwrap_err());
        assert!(e.contains(expected), "{e}");
    }
    assert_eq!(a.tokens().map_err(message).unwrap().len(), 15, "failed calls append nothing");
    let e = message(model.session().map_err(message).unwrap().sample_next(js(hot), None).unwrap_err());
    assert!(e.contains("run a prompt before sampling"), "{e}");
}

#[wasm_bindgen_test]
fn probabilities_and_top_k() {
    let model = load(&F32_FILES);
    let trace = model.run(&prompt(6), None).map_err(message).unwrap();
    for pos in 0..6 {
        let probs = trace.probs(pos, 1.0).map_err(message).unwrap();
        assert_eq!(probs.len(), F32_VOCAB);
        assert!((probs.iter().sum::<f32>() - 1.0).abs() < 1e-4);
    }
    assert!(message(trace.probs(6, 1.0).unwrap_err()).contains("past the last token"));

    struct TokenProb {
        id: usize,
        prob: f32,
    }
    // `[id, prob, id, prob, …]`: ids exact as f64, probabilities the f32 values widened.
    let top_k = |k, params: JsValue| -> Vec<TokenProb> {
        let flat = trace.top_k_flat(k, params).map_err(message).unwrap();
        assert_eq!(flat.len() % 2, 0);
        flat.chunks_exact(2).map(|pair| TokenProb { id: pair[0] as usize, prob: pair[1] as f32 }).collect()
    };
    let last = trace.probs(5, 1.0).map_err(message).unwrap();
    let top = top_k(5, JsValue::UNDEFINED);
    assert_eq!(top.len(), 5);
    for pair in top.windows(2) {
        assert!(pair[0].prob > pair[1].prob || (pair[0].prob == pair[1].prob && pair[0].id < pair[1].id));
    }
    assert_eq!(top[0].prob, last[top[0].id]);
    assert!(last.iter().filter(|&&p| p > top[4].prob).count() <= 4);
    // Filters renormalise what survives and drop the rest.
    let filtered = top_k(10, js(r#"{"temperature": 1, "topK": 3}"#));
    assert_eq!(filtered.len(), 3);
    assert_eq!(filtered.iter().map(|t| t.id).collect::<Vec<_>>(), top[..3].iter().map(|t| t.id).collect::<Vec<_>>());
    assert!((filtered.iter().map(|t| t.prob).sum::<f32>() - 1.0).abs() < 1e-6);
    let greedy = top_k(10, js(r#"{"temperature": 0}"#));
    assert_eq!((greedy.len(), greedy[0].id, greedy[0].prob), (1, top[0].id, 1.0));
}

#[wasm_bindgen_test]
fn traces_export_as_safetensors() {
    let model = load(&F32_FILES);
    let trace = model.run(&prompt(7), None).map_err(message).unwrap();
    let bytes = trace.to_safetensors().map_err(message).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names = file.names();
    names.sort();
    let mut expected = trace.names();
    expected.push("tokens".into());
    expected.sort();
    assert_eq!(names, expected.iter().collect::<Vec<_>>());
    let tokens = file.tensor("tokens").unwrap();
    assert_eq!((tokens.dtype(), tokens.shape()), (safetensors::Dtype::I64, &[7][..]));
    let ids: Vec<u32> =
        tokens.data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32).collect();
    assert_eq!(ids, prompt(7));
    for name in trace.names() {
        let (shape, data) = tensor(&trace, &name);
        let stored = file.tensor(&name).unwrap();
        assert_eq!((stored.dtype(), stored.shape()), (safetensors::Dtype::F32, shape.as_slice()), "{name}");
        let values: Vec<f32> =
            stored.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(values, data, "{name}");
    }
}

/// Each failure is a JS `Error` naming what is wrong, and the module keeps working after it.
#[wasm_bindgen_test]
fn bad_files_are_errors_and_the_module_still_works_after_them() {
    let weights = F32_FILES[1].1;
    let with = |name: &'static str, bytes: &'static [u8]| {
        F32_FILES.iter().map(|&(n, b)| if n == name { (n, bytes) } else { (n, b) }).collect::<Vec<_>>()
    };
    let e = load_error(&with("model.safetensors", &weights[..weights.len() - 100]));
    assert!(e.contains("not a valid safetensors file") && e.contains("truncated"), "{e}");
    let e = load_error(&with("model.safetensors", &weights[..50]));
    assert!(e.contains("not a valid safetensors file"), "{e}");
    let e = load_error(&with("config.json", b"{not json"));
    assert!(e.starts_with("bad config.json"), "{e}");
    // An unreadable tokenizer does not stop the model: it loads, runs on ids, and says why text fails.
    let no_text = load(&with("tokenizer.json", b"\xff\xfe garbage"));
    let problem = get(&no_text.info().map_err(message).unwrap(), "tokenizerProblem");
    assert!(problem.as_string().is_some_and(|p| p.contains("tokenizer.json")), "{problem:?}");
    let e = message(no_text.encode("hello").unwrap_err());
    assert!(e.contains("tokenizer"), "{e}");
    assert_eq!(no_text.run(&prompt(4), None).map_err(message).unwrap().computed(), 4);
    let e = load_error(&F32_FILES[1..]);
    assert!(e.contains("config.json"), "{e}");

    let e = message(Model::load(&JsValue::NULL).err().unwrap());
    assert!(e.contains("object mapping file names to Uint8Arrays"), "{e}");
    let not_bytes = js(r#"{"config.json": "{}"}"#);
    let e = message(Model::load(&not_bytes).err().unwrap());
    assert!(e.contains("file `config.json` must be a Uint8Array"), "{e}");

    let model = load(&F32_FILES);
    let trace = model.run(&prompt(4), None).map_err(message).unwrap();
    assert_eq!(trace.computed(), 4);
}

#[wasm_bindgen_test]
fn bad_token_ids_are_errors_that_leave_the_session_intact() {
    let model = load(&F32_FILES);
    let session = model.session().map_err(message).unwrap();
    session.run(&[1, 2, 3], Some(vec![])).map_err(message).unwrap();
    let before = session.last_logits().map_err(message).unwrap();
    let e = message(session.run(&[1, 2, 513], None).err().unwrap());
    assert!(e.contains("token id 513 is out of range"), "{e}");
    let e = message(session.step(u32::MAX).unwrap_err());
    assert!(e.contains("out of range"), "{e}");
    assert!(message(model.run(&[], None).err().unwrap()).contains("empty"));
    assert!(message(model.run(&[5; 65], None).err().unwrap()).contains("context of 64 tokens"));
    assert!(message(model.decode(&[600]).unwrap_err()).contains("out of range"));
    assert_eq!(session.tokens().map_err(message).unwrap(), [1, 2, 3]);
    assert_eq!(session.run(&[1, 2, 3], Some(vec![])).map_err(message).unwrap().computed(), 0);
    assert_eq!(session.last_logits().map_err(message).unwrap(), before);
}
