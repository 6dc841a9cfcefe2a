//! One error type for the whole engine. Every message is written for the person who supplied the
//! input: it names the file, tensor or token at fault and what was expected instead.

use thiserror::Error;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: std::io::Error },

    #[error("not a valid safetensors file: {0}")]
    Safetensors(String),

    #[error("not a valid GGUF file: {0}")]
    Gguf(String),

    /// A stored copy of a model's weights that cannot be used (incomplete, from another version
    /// of the engine, not matching its header): the model is loaded from its file instead.
    #[error("the saved copy of the weights cannot be used: {0}")]
    Snapshot(String),

    /// Everything in a GGUF gptlens cannot run, found in one pass over its header: tensors of
    /// types it cannot read (name, type), and the architecture when it is not one it runs.
    #[error("{}", describe_unsupported(architecture.as_deref(), tensors))]
    Unsupported { architecture: Option<String>, tensors: Vec<(String, String)> },

    #[error("the GGUF file has no metadata key `{key}`")]
    MissingMetadata { key: String },

    #[error("GGUF metadata `{key}` is {got}, expected {expected}")]
    MetadataType { key: String, expected: &'static str, got: String },

    #[error("bad config.json: {0}")]
    Config(String),

    #[error("the checkpoint has no tensor named `{name}`")]
    MissingTensor { name: String },

    #[error("tensor `{name}` has shape {got:?}, but the config implies {expected:?}")]
    ShapeMismatch { name: String, expected: Vec<usize>, got: Vec<usize> },

    #[error("tensor `{name}` is stored as {dtype}, which gptlens cannot read (expected F32, F16 or BF16)")]
    UnsupportedDtype { name: String, dtype: String },

    #[error("model files are incomplete: {0}")]
    MissingFile(String),

    #[error("tokenizer: {0}")]
    Tokenizer(String),

    #[error("this model has no tokenizer files (tokenizer.json, or vocab.json + merges.txt); pass token ids instead of text")]
    NoTokenizer,

    #[error("this model's tokenizer cannot be read ({0}); pass token ids instead of text")]
    UnreadableTokenizer(String),

    #[error("token id {id} is out of range: the vocabulary has {vocab} tokens (ids 0..{vocab})")]
    TokenOutOfRange { id: u32, vocab: usize },

    #[error("{len} tokens do not fit in the model's context of {n_ctx} tokens")]
    ContextOverflow { len: usize, n_ctx: usize },

    #[error("nothing to run: the token sequence is empty")]
    EmptyInput,

    #[error(
        "unknown hook `{name}` (known hooks look like `blocks.0.attn.hook_pattern`, `ln_final.hook_scale`, `logits`)"
    )]
    UnknownHook { name: String },

    #[error("{0}")]
    InvalidArgument(String),

    /// A size a checkpoint claims is over one of gptlens's caps (`formats::limits`).
    #[error("{field} is {value}, over gptlens's limit of {limit} {unit}: the file is corrupt or describes a model beyond what gptlens runs")]
    LimitExceeded { field: String, value: u64, limit: u64, unit: &'static str },

    /// The model and one session at its full context would not fit in the memory budget.
    #[error(
        "this model needs {} ({breakdown}), more than the memory budget of {} ({origin})",
        crate::formats::limits::human_bytes(*.need),
        crate::formats::limits::human_bytes(*.budget)
    )]
    OverBudget { need: u64, budget: u64, breakdown: String, origin: String },

    /// A run's capture would not fit in [`crate::formats::limits::CAPTURE_BUDGET`].
    #[error(
        "capturing {hooks} hooks for {tokens} tokens needs {} (attention patterns: {}), more than the capture budget of {}: capture fewer hooks, or none, for a prompt this long",
        crate::formats::limits::human_bytes(*.need),
        crate::formats::limits::human_bytes(*.patterns),
        crate::formats::limits::human_bytes(*.budget)
    )]
    CaptureOverBudget { tokens: usize, hooks: usize, need: u64, patterns: u64, budget: u64 },

    /// A long computation stopped because its caller asked it to (its progress callback said so).
    #[error("cancelled after {done} of {total} steps")]
    Cancelled { done: usize, total: usize },

    #[error("cannot write {path}: {source}")]
    Write { path: String, source: std::io::Error },

    /// No usable GPU, a device lost or out of memory, a limit the model does not fit in.
    #[error("GPU: {0}")]
    Gpu(String),
}

/// "architecture `bert` is not supported …; 36 tensors are stored in types gptlens cannot read:
/// IQ2_XS ×30 (blk.0.attn_q.weight, …), Q2_K ×6 (…)".
fn describe_unsupported(architecture: Option<&str>, tensors: &[(String, String)]) -> String {
    let mut parts = Vec::new();
    if let Some(arch) = architecture {
        parts.push(format!(
            "GGUF architecture `{arch}` is not supported (gptlens runs {})",
            crate::formats::gguf_config::RUNS
        ));
    }
    let mut by_type: Vec<(&str, Vec<&str>)> = Vec::new();
    for (name, ty) in tensors {
        match by_type.iter_mut().find(|(t, _)| *t == ty.as_str()) {
            Some((_, names)) => names.push(name),
            None => by_type.push((ty, vec![name])),
        }
    }
    let listed: Vec<String> = by_type
        .iter()
        .map(|(ty, names)| {
            let shown = names.iter().take(3).map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
            let more = if names.len() > 3 { ", …" } else { "" };
            format!("{ty} ×{} ({shown}{more})", names.len())
        })
        .collect();
    if !tensors.is_empty() {
        parts.push(format!(
            "{} tensor{} stored in types gptlens cannot read: {} (it reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)",
            tensors.len(),
            if tensors.len() == 1 { " is" } else { "s are" },
            listed.join(", ")
        ));
    }
    parts.join("; ")
}
