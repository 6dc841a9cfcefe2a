//! What gptlens agrees to load: caps on every size a checkpoint can claim, and the memory budget
//! that a model plus one session must fit in. Both are checked before anything is allocated for
//! them, so a file that lies about its sizes costs a few microseconds and a typed error
//! ([`Error::LimitExceeded`], [`Error::OverBudget`]) instead of gigabytes and a crash.
//!
//! The caps sit well above every published GPT-2 / LLaMA-family model (the largest, Llama 3.1
//! 405B, has 126 layers, 128 heads, width 16384, an MLP of 53248, a vocabulary of 128256 and a
//! context of 131072) and far below where size arithmetic could overflow. The memory budget is
//! what actually decides whether a model loads:
//!
//! - **wasm32**: the 4 GiB a 32-bit module can address, minus the memory already in use (the
//!   module's own data and stack, and whatever the page holds, including the file's bytes).
//! - **native**: [`DEFAULT_NATIVE_BUDGET`] (16 GiB), or the `GPTLENS_MEMORY_BUDGET` environment
//!   variable (`8G`, `512MiB`, `1000000`), or `LoadOptions::memory_budget`.

use crate::error::{Error, Result};

/// Most bytes one run's capture may take (what the session keeps per position plus the trace it
/// hands out). Full capture grows with the square of the prompt (SmolLM2, 30 layers × 9 heads:
/// 1.6 KB × T²), so past this a run is refused up front instead of trapping part-way. wasm32:
/// 3 GiB of the 4 GiB address space, leaving room for a small model, its KV cache and scratch
/// (SmolLM2 with every hook: about 1,300 tokens). Native: the default memory budget.
#[cfg(target_arch = "wasm32")]
pub const CAPTURE_BUDGET: u64 = 3 << 30;
#[cfg(not(target_arch = "wasm32"))]
pub const CAPTURE_BUDGET: u64 = DEFAULT_NATIVE_BUDGET;

/// Transformer blocks. Llama 3.1 405B has 126.
pub const MAX_LAYERS: usize = 512;
/// Query heads per block. Llama 3.1 405B has 128.
pub const MAX_HEADS: usize = 1024;
/// Width of the residual stream. The widest published models are near 18432 (PaLM, DeepSeek-V3).
pub const MAX_WIDTH: usize = 1 << 16;
/// Width of the MLP's hidden layer. PaLM's 73728 is the largest published.
pub const MAX_FF: usize = 1 << 18;
/// Vocabulary entries. Gemma's 262144 is the largest published; 4× that is room to spare.
pub const MAX_VOCAB: usize = 1 << 20;
/// Positions of the context. Long-context releases reach about a million (Qwen2.5-1M); positions
/// stay exact integers in f32 (up to 2^24), which RoPE's angles need.
pub const MAX_CONTEXT: usize = 1 << 20;
/// Tensors in one checkpoint file. gptlens reads at most 12 per block plus 5 (6149 at
/// [`MAX_LAYERS`]); checkpoints also carry buffers gptlens ignores (GPT-2's `attn.bias`), so the
/// cap leaves ten times that.
pub const MAX_TENSORS: usize = 65_536;
/// Metadata entries of a GGUF file (real files have a few dozen: the tokenizer is one array).
pub const MAX_GGUF_METADATA: usize = 65_536;
/// A GGUF header (metadata + tensor table). The largest real ones (vocabularies of 256k tokens
/// with scores, types and merges) are about 30 MB.
pub const MAX_GGUF_HEADER_BYTES: usize = 256 << 20;
/// A safetensors JSON header. A shard of a large model lists a few thousand tensors in well
/// under 1 MiB; the `safetensors` crate's own cap (100 MB) lets a header of 1.4 M empty tensors
/// through, which takes over a gigabyte to index.
pub const MAX_SAFETENSORS_HEADER_BYTES: usize = 16 << 20;

/// The native default: enough for 7B-parameter models in Q4/Q8 with their whole context, small
/// enough that a corrupt file claiming terabytes is refused before the machine starts swapping.
pub const DEFAULT_NATIVE_BUDGET: u64 = 16 << 30;
/// Natively, overrides [`DEFAULT_NATIVE_BUDGET`]: bytes, or with a K/M/G/T suffix (powers of 1024).
pub const BUDGET_ENV: &str = "GPTLENS_MEMORY_BUDGET";
/// A context cut to fit the memory budget is a multiple of this many positions (the KV cache
/// grows in steps of this size too), and no model loads with fewer.
pub const CONTEXT_STEP: usize = 256;
/// What a wasm32 module can address.
pub const WASM32_ADDRESS_SPACE: u64 = 1 << 32;

/// Refuses `value` for `field` when it is over `limit`.
pub fn check_cap(field: impl FnOnce() -> String, value: usize, limit: usize, unit: &'static str) -> Result<()> {
    if value > limit {
        return Err(Error::LimitExceeded { field: field(), value: value as u64, limit: limit as u64, unit });
    }
    Ok(())
}

/// The error for a size product that does not fit in this platform's `usize`/`u64`.
pub fn overflow(what: &str) -> Error {
    Error::LimitExceeded {
        field: what.to_string(),
        value: u64::MAX,
        limit: usize::MAX as u64,
        unit: "bytes (it overflows this platform's sizes)",
    }
}

/// `a × b × …` in u64, or `None` on overflow.
pub fn product(factors: &[u64]) -> Option<u64> {
    factors.iter().try_fold(1u64, |acc, &f| acc.checked_mul(f))
}

/// Where a budget came from, for the message that refuses a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BudgetOrigin {
    /// `LoadOptions::memory_budget`.
    Option,
    /// The `GPTLENS_MEMORY_BUDGET` environment variable.
    Env,
    /// [`DEFAULT_NATIVE_BUDGET`].
    NativeDefault,
    /// 4 GiB minus the wasm memory in use.
    Wasm32 { in_use: u64 },
}

impl std::fmt::Display for BudgetOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BudgetOrigin::Option => write!(f, "set by LoadOptions::memory_budget"),
            BudgetOrigin::Env => write!(f, "set by {BUDGET_ENV}"),
            BudgetOrigin::NativeDefault => {
                write!(f, "the default; set {BUDGET_ENV} (e.g. {BUDGET_ENV}=32G) to allow more")
            }
            BudgetOrigin::Wasm32 { in_use } => {
                write!(f, "what WebAssembly's 4 GiB leaves beside the {} in use", human_bytes(*in_use))
            }
        }
    }
}

/// The memory a model and one session may take, and the bytes of the files already held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    pub bytes: u64,
    pub origin: BudgetOrigin,
    /// Bytes of the checkpoint files in memory while the model loads (natively they are read
    /// into memory; in the browser they are already there).
    pub files: u64,
}

/// What a model and one session at its full context need, part by part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    pub weights: u64,
    /// Keys and values of every layer at `n_ctx` positions.
    pub kv_cache: u64,
    /// Activations, attention probabilities of a chunk at `n_ctx` positions, logits.
    pub scratch: u64,
    pub n_ctx: usize,
}

impl Budget {
    /// The budget for this platform: `requested` (clamped, in wasm32, to what the address space
    /// leaves), else the environment variable, else the platform's default.
    pub fn resolve(requested: Option<u64>, files: u64) -> Result<Budget> {
        let (bytes, origin) = match requested {
            Some(bytes) => (bytes, BudgetOrigin::Option),
            None => platform_default()?,
        };
        #[cfg(target_arch = "wasm32")]
        if let (BudgetOrigin::Option, (wasm, _)) = (&origin, platform_default()?) {
            return Ok(Budget { bytes: bytes.min(wasm), origin, files });
        }
        Ok(Budget { bytes, origin, files })
    }

    /// The positions a session of this model may use: its whole context (`n_ctx`) when a session
    /// that long fits beside the weights and the files, else the most (a multiple of
    /// [`CONTEXT_STEP`]) that do, as llama.cpp runs a long-context model at a shorter context
    /// than it was trained for. A 1B model with 131,072 positions needs 8 GiB of f32 KV cache at
    /// its whole context, more than WebAssembly can address; its first thousands of positions
    /// fit. Refuses the model (naming every part) when not even [`CONTEXT_STEP`] positions fit.
    pub fn fit(&self, n_ctx: usize, need_at: impl Fn(usize) -> Result<Need>) -> Result<usize> {
        let whole = need_at(n_ctx)?;
        if self.check(&whole).is_ok() {
            return Ok(n_ctx);
        }
        // A need grows with the positions: the largest step count that fits, by bisection.
        let fits = |steps: usize| Ok::<bool, Error>(self.check(&need_at(steps * CONTEXT_STEP)?).is_ok());
        let mut high = n_ctx / CONTEXT_STEP;
        if high == 0 || !fits(1)? {
            // Not even one step: refused with the parts of the whole context, what the file asks for.
            return self.check(&whole).map(|()| n_ctx);
        }
        let mut low = 1;
        while low < high {
            let mid = low + (high - low).div_ceil(2);
            if fits(mid)? {
                low = mid;
            } else {
                high = mid - 1;
            }
        }
        Ok(low * CONTEXT_STEP)
    }

    /// Refuses a model whose weights, a session at the full context and the files held while
    /// loading do not fit.
    pub fn check(&self, need: &Need) -> Result<()> {
        let total = [self.files, need.weights, need.kv_cache, need.scratch]
            .iter()
            .try_fold(0u64, |acc, &b| acc.checked_add(b))
            .unwrap_or(u64::MAX);
        if total <= self.bytes {
            return Ok(());
        }
        let breakdown = format!(
            "files {} + weights {} + KV cache at the full context of {} positions {} + scratch {}",
            human_bytes(self.files),
            human_bytes(need.weights),
            need.n_ctx,
            human_bytes(need.kv_cache),
            human_bytes(need.scratch)
        );
        Err(Error::OverBudget { need: total, budget: self.bytes, breakdown, origin: self.origin.to_string() })
    }

    /// Refuses a file that alone is larger than the budget, before it is read.
    pub fn check_file(&self, path: &str, len: u64) -> Result<()> {
        if len <= self.bytes {
            return Ok(());
        }
        Err(Error::OverBudget {
            need: len,
            budget: self.bytes,
            breakdown: format!("the file {path} alone"),
            origin: self.origin.to_string(),
        })
    }
}

#[cfg(target_arch = "wasm32")]
fn platform_default() -> Result<(u64, BudgetOrigin)> {
    // Memory pages in use now: the module's data and stack, the allocator's heap so far (which
    // holds the file's bytes). What the heap may still grow into is the rest of 4 GiB.
    let in_use = (core::arch::wasm32::memory_size(0) as u64).saturating_mul(65_536);
    Ok((WASM32_ADDRESS_SPACE.saturating_sub(in_use), BudgetOrigin::Wasm32 { in_use }))
}

#[cfg(not(target_arch = "wasm32"))]
fn platform_default() -> Result<(u64, BudgetOrigin)> {
    match std::env::var(BUDGET_ENV) {
        Ok(text) => parse_bytes(&text).map(|b| (b, BudgetOrigin::Env)).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{BUDGET_ENV}={text:?} is not a size: give bytes, or a number with K, M, G or T (e.g. 8G)"
            ))
        }),
        Err(_) => Ok((DEFAULT_NATIVE_BUDGET, BudgetOrigin::NativeDefault)),
    }
}

/// `1000`, `64K`, `512MiB`, `8G`, `1.5GB`, `2T`: suffixes are powers of 1024.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let shift = match suffix.trim().to_ascii_uppercase().trim_end_matches('B').trim_end_matches('I') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return None,
    };
    if let Ok(whole) = number.parse::<u64>() {
        return whole.checked_mul(1u64 << shift);
    }
    let value = number.parse::<f64>().ok()? * (1u64 << shift) as f64;
    (value.is_finite() && value >= 0.0 && value < u64::MAX as f64).then_some(value as u64)
}

/// `1.5 GiB`, `12.0 MiB`, `512 bytes`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64;
    let mut unit = "bytes";
    for u in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = u;
    }
    format!("{value:.1} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_bytes("1000"), Some(1000));
        assert_eq!(parse_bytes("64K"), Some(64 << 10));
        assert_eq!(parse_bytes("512MiB"), Some(512 << 20));
        assert_eq!(parse_bytes(" 8g "), Some(8 << 30));
        assert_eq!(parse_bytes("1.5GB"), Some(3 << 29));
        for bad in ["", "G", "-1", "8X", "99999999999T", "1e9"] {
            assert_eq!(parse_bytes(bad), None, "{bad}");
        }
    }

    #[test]
    fn sizes_print_for_people() {
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(human_bytes(u64::MAX), "16777216.0 TiB");
    }

    #[test]
    fn a_context_is_cut_to_the_most_positions_that_fit() {
        // 1000 bytes of weights and 10 bytes a position.
        let need_at = |n_ctx: usize| Ok(Need { weights: 1000, kv_cache: 10 * n_ctx as u64, scratch: 0, n_ctx });
        let budget = |bytes| Budget { bytes, origin: BudgetOrigin::Option, files: 0 };
        assert_eq!(budget(1000 + 10 * 5000).fit(5000, need_at).unwrap(), 5000, "the whole context fits");
        assert_eq!(budget(1000 + 10 * 4999).fit(5000, need_at).unwrap(), 4864, "19 steps of 256");
        assert_eq!(budget(1000 + 10 * 256).fit(1 << 20, need_at).unwrap(), 256);
        let e = budget(1000 + 10 * 255).fit(1 << 20, need_at).unwrap_err().to_string();
        assert!(e.contains("1048576 positions"), "not even one step fits: refused with the whole context's parts: {e}");
        // A context shorter than a step is all or nothing.
        assert_eq!(budget(1000 + 10 * 100).fit(100, need_at).unwrap(), 100);
        assert!(budget(1000 + 10 * 99).fit(100, need_at).is_err());
    }

    #[test]
    fn a_budget_names_every_part_when_it_refuses() {
        let budget = Budget { bytes: 1000, origin: BudgetOrigin::Option, files: 100 };
        let need = Need { weights: 500, kv_cache: 300, scratch: 100, n_ctx: 64 };
        assert!(budget.check(&need).is_ok());
        let e = budget.check(&Need { scratch: 101, ..need }).unwrap_err().to_string();
        assert!(e.contains("1001 bytes") && e.contains("1000 bytes") && e.contains("64 positions"), "{e}");
        let huge = Need { weights: u64::MAX, ..need };
        assert!(budget.check(&huge).is_err(), "a sum that overflows is over any budget");
    }
}
