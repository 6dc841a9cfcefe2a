//! Every size a checkpoint claims is bounded before anything is allocated for it: each GGUF
//! metadata field and config.json field at its maximum, a safetensors header of a million empty
//! tensors, a model that does not fit the memory budget, a context of 2^20 positions. Each gives
//! a typed error that names the field and the limit, quickly and without a large allocation
//! (bytes are counted per thread by a global allocator, as in `allocations.rs`).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{fixture, set_u32};
use gptlens::checkpoint::LoadOptions;
use gptlens::formats::limits;
use gptlens::sample::{Sampler, SamplingParams};
use gptlens::{CaptureSpec, Checkpoint, Error, Session};

struct Counting;

thread_local! {
    // Per thread, so that tests running side by side do not count each other's allocations.
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    let _ = ALLOCATED.try_with(|a| a.set(a.get().saturating_add(bytes)));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What `f` returns, the bytes it allocated on this thread, and how long it took.
fn measured<T>(f: impl FnOnce() -> T) -> (T, usize, Duration) {
    let before = ALLOCATED.with(Cell::get);
    let start = Instant::now();
    let out = f();
    (out, ALLOCATED.with(Cell::get) - before, start.elapsed())
}

/// A refused load may allocate what parsing the header takes (the fixture's tokenizer
/// metadata, a few hundred KB), not what the lying field asks for.
const SMALL: usize = 8 << 20;
const FAST: Duration = Duration::from_secs(2);

fn read(path: &str) -> Vec<u8> {
    std::fs::read(fixture(path)).unwrap()
}

fn gguf_with(path: &str, key: &str, value: u32) -> Vec<u8> {
    let mut bytes = read(path);
    set_u32(&mut bytes, key, value);
    bytes
}

/// Loads, expecting an error, and checks it came fast and small.
fn refused(what: &str, load: impl FnOnce() -> Result<Checkpoint, Error>) -> Error {
    let (result, bytes, took) = measured(load);
    let e = match result {
        Ok(_) => panic!("{what}: loaded"),
        Err(e) => e,
    };
    assert!(bytes <= SMALL, "{what}: {bytes} bytes allocated before refusing ({e})");
    assert!(took <= FAST, "{what}: {took:?} before refusing ({e})");
    e
}

#[test]
fn every_gguf_size_field_at_its_maximum_is_refused_by_name() {
    for (path, arch) in [("llama-tiny-q/model.gguf", "llama"), ("gpt2-tiny-gguf/model.gguf", "gpt2")] {
        let mut fields = vec![
            ("context_length", limits::MAX_CONTEXT),
            ("block_count", limits::MAX_LAYERS),
            ("embedding_length", limits::MAX_WIDTH),
            ("attention.head_count", limits::MAX_HEADS),
            ("feed_forward_length", limits::MAX_FF),
        ];
        if arch == "llama" {
            fields.push(("attention.head_count_kv", limits::MAX_HEADS));
        }
        for (field, cap) in fields {
            let key = format!("{arch}.{field}");
            for value in [u32::MAX, cap as u32 + 1, 1 << 24] {
                if value as usize <= cap {
                    continue;
                }
                let bytes = gguf_with(path, &key, value);
                let e = refused(&key, || Checkpoint::from_gguf(&bytes));
                match &e {
                    Error::LimitExceeded { field, value: got, limit, .. } => {
                        assert!(field.contains(&key), "{e}");
                        assert_eq!((*got, *limit), (u64::from(value), cap as u64), "{e}");
                    }
                    other => panic!("{key} = {value}: {other}"),
                }
                let message = e.to_string();
                assert!(message.contains(&key) && message.contains(&cap.to_string()), "{message}");
            }
        }
    }
}

#[test]
fn absurd_sizes_under_the_caps_fail_on_the_first_missing_tensor() {
    // Planning 512 layers costs microseconds; the first tensor that is not there ends it.
    for (key, value) in [
        ("llama.block_count", limits::MAX_LAYERS as u32),
        ("llama.embedding_length", limits::MAX_WIDTH as u32),
        ("llama.feed_forward_length", limits::MAX_FF as u32),
        ("llama.attention.head_count", 256),
    ] {
        let bytes = gguf_with("llama-tiny-q/model.gguf", key, value);
        let e = refused(key, || Checkpoint::from_gguf(&bytes));
        assert!(
            matches!(e, Error::MissingTensor { .. } | Error::ShapeMismatch { .. } | Error::Config(_)),
            "{key} = {value}: {e}"
        );
    }
}

#[test]
fn a_vocabulary_past_the_cap_is_refused() {
    // The vocabulary is token_embd's second dimension: claiming 2^21 rows of 256 Q8_0 weights
    // (a 570 MB tensor in a 1 MB file) fails in the reader, before any config is built.
    let mut bytes = read("llama-tiny-q/model.gguf");
    let name = b"token_embd.weight";
    let at = bytes.windows(name.len()).position(|w| w == name).unwrap() + name.len();
    // n_dims (u32), then ne[0] (u64), ne[1] (u64).
    bytes[at + 12..at + 20].copy_from_slice(&(1u64 << 21).to_le_bytes());
    let e = refused("vocab", || Checkpoint::from_gguf(&bytes));
    assert!(matches!(e, Error::Gguf(_)), "{e}");
    assert!(e.to_string().contains("token_embd.weight"), "{e}");
}

#[test]
fn a_context_of_2_pow_20_loads_and_costs_only_the_positions_used() {
    let bytes = gguf_with("llama-tiny-q/model.gguf", "llama.context_length", 1 << 20);
    let ckpt = Checkpoint::from_gguf(&bytes).unwrap();
    assert_eq!(ckpt.model.config.n_ctx, 1 << 20);
    // The attention scratch and the KV cache grow with the tokens run, not the context: a
    // 3-token run on this 1 MB model used to take 1 GB ([H, 64, n_ctx] floats up front).
    let (_, bytes, _) = measured(|| {
        let mut session = Session::new(ckpt.model.clone());
        session.run(&[1, 2, 3], &CaptureSpec::standard(&ckpt.model.config)).unwrap();
    });
    assert!(bytes <= 4 << 20, "{bytes} bytes for a 3-token session");
}

/// A budget that cannot hold a session at the whole context loads the model with the most
/// positions that fit (a multiple of 256), says so, and refuses longer prompts by the cut context.
#[test]
fn a_context_past_the_budget_is_cut_to_the_positions_that_fit() {
    let budget = LoadOptions { memory_budget: Some(1 << 30) };
    let load = |context: u32| Checkpoint::from_gguf_with(&bytes_of("llama-tiny-q/model.gguf", context), &budget);
    let cut = load(1 << 20).unwrap();
    let n = cut.model.config.n_ctx;
    let step = limits::CONTEXT_STEP;
    assert!(n < 1 << 20 && n >= step && n % step == 0, "cut to {n}");
    let note = cut.context_cut.as_deref().unwrap_or_default();
    assert!(note.contains(&format!("from 1048576 to {n} positions")) && note.contains("1.0 GiB"), "{note}");
    // The most that fit: a file asking for one step more is cut to the same, one asking for
    // exactly that loads whole.
    let one_more = load((n + step) as u32).unwrap();
    assert_eq!((one_more.model.config.n_ctx, one_more.context_cut.is_some()), (n, true));
    let exact = load(n as u32).unwrap();
    assert_eq!((exact.model.config.n_ctx, exact.context_cut), (n, None));
    // A prompt past the cut context is refused before anything runs, and the session still works.
    let mut session = Session::new(cut.model.clone());
    let e = session.run(&vec![1; n + 1], &CaptureSpec::none()).unwrap_err();
    assert!(matches!(e, Error::ContextOverflow { len, n_ctx } if len == n + 1 && n_ctx == n), "{e}");
    session.run(&[1, 2, 3], &CaptureSpec::none()).unwrap();
}

fn bytes_of(path: &str, context: u32) -> Vec<u8> {
    gguf_with(path, "llama.context_length", context)
}

#[test]
fn the_memory_budget_refuses_before_allocating_the_weights() {
    let bytes = read("llama-tiny-q/model.gguf");
    let e =
        refused("64 KiB budget", || Checkpoint::from_gguf_with(&bytes, &LoadOptions { memory_budget: Some(64 << 10) }));
    match &e {
        Error::OverBudget { need, budget, breakdown, .. } => {
            assert_eq!(*budget, 64 << 10);
            assert!(*need > bytes.len() as u64, "{e}");
            assert!(breakdown.contains("weights") && breakdown.contains("scratch"), "{e}");
        }
        other => panic!("{other}"),
    }
    // The same through from_files, and for safetensors checkpoints.
    let files: BTreeMap<String, Vec<u8>> = ["config.json", "model.safetensors"]
        .iter()
        .map(|n| (n.to_string(), read(&format!("llama-tiny/{n}"))))
        .collect();
    let view = files.iter().map(|(k, v)| (k.clone(), v.as_slice())).collect();
    let e = refused("safetensors, 64 KiB", || {
        Checkpoint::from_files_with(&view, &LoadOptions { memory_budget: Some(64 << 10) })
    });
    assert!(matches!(e, Error::OverBudget { .. }), "{e}");
    // And a budget that holds it loads it.
    Checkpoint::from_files_with(&view, &LoadOptions { memory_budget: Some(64 << 20) }).unwrap();
}

/// A config.json with one field replaced.
fn config_with(field: &str, value: u64) -> BTreeMap<String, Vec<u8>> {
    let mut files: BTreeMap<String, Vec<u8>> = ["config.json", "model.safetensors"]
        .iter()
        .map(|n| (n.to_string(), read(&format!("llama-tiny/{n}"))))
        .collect();
    let mut config: serde_json::Value = serde_json::from_slice(&files["config.json"]).unwrap();
    config[field] = value.into();
    files.insert("config.json".into(), serde_json::to_vec(&config).unwrap());
    files
}

#[test]
fn every_config_json_size_field_at_its_maximum_is_refused_by_name() {
    for (field, cap) in [
        ("num_hidden_layers", limits::MAX_LAYERS),
        ("num_attention_heads", limits::MAX_HEADS),
        ("num_key_value_heads", limits::MAX_HEADS),
        ("hidden_size", limits::MAX_WIDTH),
        ("intermediate_size", limits::MAX_FF),
        ("vocab_size", limits::MAX_VOCAB),
        ("max_position_embeddings", limits::MAX_CONTEXT),
    ] {
        for value in [u64::MAX, cap as u64 + 1] {
            let files = config_with(field, value);
            let view = files.iter().map(|(k, v)| (k.clone(), v.as_slice())).collect();
            let e = refused(field, || Checkpoint::from_files(&view));
            assert!(
                matches!(&e, Error::LimitExceeded { field: f, limit, .. } if f.contains(field) && *limit == cap as u64),
                "{field} = {value}: {e}"
            );
        }
    }
}

/// A safetensors file whose header lists `n` tensors of no bytes.
fn empty_tensors(n: usize) -> Vec<u8> {
    let mut header = String::with_capacity(n * 64);
    header.push('{');
    for i in 0..n {
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!("\"t{i}\":{{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}"));
    }
    header.push('}');
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes
}

fn with_weights(weights: Vec<u8>) -> BTreeMap<String, Vec<u8>> {
    let mut files = config_with("num_hidden_layers", 1);
    files.insert("model.safetensors".into(), weights);
    files
}

#[test]
fn a_safetensors_header_of_a_million_empty_tensors_is_refused() {
    // 56 MB of header: over the 16 MiB cap, refused from its first 8 bytes.
    let files = with_weights(empty_tensors(1_000_000));
    let view = files.iter().map(|(k, v)| (k.clone(), v.as_slice())).collect();
    let e = refused("1M tensors", || Checkpoint::from_files(&view));
    assert!(
        matches!(&e, Error::LimitExceeded { limit, .. } if *limit == limits::MAX_SAFETENSORS_HEADER_BYTES as u64),
        "{e}"
    );
    assert!(e.to_string().contains("safetensors header length"), "{e}");
    // 100 000 tensors fit in 16 MiB of header: the count is refused, counted without building
    // anything.
    let files = with_weights(empty_tensors(100_000));
    let view = files.iter().map(|(k, v)| (k.clone(), v.as_slice())).collect();
    let e = refused("100k tensors", || Checkpoint::from_files(&view));
    assert!(matches!(&e, Error::LimitExceeded { limit, .. } if *limit == limits::MAX_TENSORS as u64), "{e}");
    assert!(e.to_string().contains("number of tensors"), "{e}");
}

#[test]
fn generate_with_max_new_usize_max_is_an_error_not_an_overflow() {
    let ckpt = common::load("gpt2-tiny-f32");
    let mut session = Session::new(ckpt.model.clone());
    let mut sampler = Sampler::new(SamplingParams::greedy(), 0).unwrap();
    let e = session.generate(&[1, 2, 3], usize::MAX, &mut sampler, None, |_| true).unwrap_err();
    assert!(matches!(e, Error::ContextOverflow { n_ctx: 64, .. }), "{e}");
    let e = session.generate(&[1, 2, 3], usize::MAX - 1, &mut sampler, None, |_| true).unwrap_err();
    assert!(matches!(e, Error::ContextOverflow { n_ctx: 64, .. }), "{e}");
    assert!(session.tokens().is_empty(), "nothing ran");
    assert_eq!(session.generate(&[1, 2, 3], 61, &mut sampler, None, |_| true).unwrap().len(), 61);
}
