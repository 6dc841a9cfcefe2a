//! Capturing nothing allocates nothing extra: a warm session running a prompt with an empty
//! capture spec allocates only the trace it returns (the tokens and the last position's logits),
//! however long the prompt. A GGUF loaded in pieces is held once: the peak is the weights, not
//! the weights plus a copy of the file. Counted with a global allocator that tallies bytes; the
//! tests take turns, since the tally is global.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gptlens::checkpoint::{GgufStream, LoadOptions};
use gptlens::formats::gguf::GgufFile;
use gptlens::tokenizer::Tokenizer;
use gptlens::{CaptureSpec, Session};

struct Counting;

/// Bytes ever allocated; bytes allocated now, and the most of them at once.
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn grew(bytes: usize) {
    ALLOCATED.fetch_add(bytes, Ordering::Relaxed);
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        grew(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn bytes_allocated_by(f: impl FnOnce()) -> usize {
    let before = ALLOCATED.load(Ordering::Relaxed);
    f();
    ALLOCATED.load(Ordering::Relaxed) - before
}

#[test]
fn a_run_without_capture_allocates_only_its_result() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let model = common::load("gpt2-tiny-f32").model;
    let (v, t) = (model.config.vocab_size, 64);
    let tokens: Vec<u32> = (0..t as u32).map(|i| i * 7 % 513).collect();
    let mut session = Session::new(model.clone());
    let none = CaptureSpec::none();
    session.run(&tokens, &none).unwrap(); // warm: KV cache grown, thread pool started
    session.reset();
    let plain = bytes_allocated_by(|| drop(session.run(&tokens, &none).unwrap()));
    // The trace: tokens (4 B each) and last-position logits (4 B each); the rest is the thread
    // pool's bookkeeping, which does not grow with the model or the prompt.
    let result = 4 * (t + v);
    assert!(plain <= result + 16 * 1024, "{plain} bytes for a {result}-byte result");

    session.reset();
    let all = CaptureSpec::standard(&model.config);
    let captured = bytes_allocated_by(|| drop(session.run(&tokens, &all).unwrap()));
    // Capturing every hook stores, among others, all logits [T, V] and patterns [H, T, T].
    assert!(captured > 4 * t * v, "capturing everything should allocate the captures ({captured} bytes)");
    eprintln!("capture none: {plain} bytes; capture all: {captured} bytes");
}

#[test]
fn a_gguf_loaded_in_pieces_is_held_once() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let bytes = std::fs::read(common::fixture("llama-tiny-q/model.gguf")).unwrap();
    let piece = 64 * 1024;
    // Loading uses the thread pool (the tokenizer is built there, pieces packed): started first,
    // so that its own lasting allocations are not counted as the model's, whichever test runs first.
    rayon::broadcast(|_| ());
    // Building the tokenizer from the header has its own passing peak (its tables as they grow).
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let header = GgufFile::parse(&bytes).unwrap();
    drop(Tokenizer::from_gguf(&header).unwrap());
    let tokenizer_peak = PEAK.load(Ordering::Relaxed) - base;
    drop(header);

    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let mut stream = GgufStream::new(bytes.len() as u64, &LoadOptions::default()).unwrap();
    for chunk in bytes.chunks(piece) {
        stream.push(chunk).unwrap();
    }
    let checkpoint = stream.finish().unwrap();
    let (peak, kept) = (PEAK.load(Ordering::Relaxed) - base, LIVE.load(Ordering::Relaxed) - base);
    let weights = checkpoint.model.weights.memory_bytes();
    eprintln!(
        "file {} B, weights {weights} B, kept {kept} B, peak while loading {peak} B (tokenizer's own peak {tokenizer_peak} B)",
        bytes.len()
    );
    // At the peak: what is kept (weights, tokenizer, config), the tokenizer's passing tables, the
    // first piece (it holds the header, 7 kB here), kept while the tokenizer is built from it
    // beside the weights, and the header's parse — never a copy of the tensors.
    let allowed = kept + tokenizer_peak + piece + 32 * 1024;
    assert!(peak <= allowed, "peak {peak} B, over {allowed} B (kept {kept} B, weights {weights} B)");
    // What is kept besides the weights is the tokenizer and the plan's small change.
    assert!(kept <= weights + tokenizer_peak, "kept {kept} B: weights {weights} B and what else?");
}
