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

    #[error("tensor `{name}` is stored as {ggml_type}, which gptlens cannot read (supported: F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K)")]
    UnsupportedTensorType { name: String, ggml_type: String },

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

    #[error("cannot write {path}: {source}")]
    Write { path: String, source: std::io::Error },

    /// No usable GPU, a device lost or out of memory, a limit the model does not fit in.
    #[error("GPU: {0}")]
    Gpu(String),
}
