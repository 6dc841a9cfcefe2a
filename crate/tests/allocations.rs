//! Capturing nothing allocates nothing extra: a warm session running a prompt with an empty
//! capture spec allocates only the trace it returns (the tokens and the last position's logits),
//! however long the prompt. Counted with a global allocator that tallies bytes.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use gptlens::{CaptureSpec, Session};

struct Counting;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
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
    let all = CaptureSpec::all(&model.config);
    let captured = bytes_allocated_by(|| drop(session.run(&tokens, &all).unwrap()));
    // Capturing every hook stores, among others, all logits [T, V] and patterns [H, T, T].
    assert!(captured > 4 * t * v, "capturing everything should allocate the captures ({captured} bytes)");
    eprintln!("capture none: {plain} bytes; capture all: {captured} bytes");
}
