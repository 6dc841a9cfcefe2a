//! The hyperparameters of a model: everything the forward pass needs to know about shapes and
//! which variant of each sublayer to run.

/// The model families gptlens runs. One forward pass serves both; the family picks the sublayers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// GPT-2: learned positions, LayerNorm (with bias), GELU MLP, biases everywhere, fused qkv.
    Gpt2,
    /// LLaMA (SmolLM2, TinyLlama, …): RoPE, RMSNorm, SwiGLU MLP, grouped-query attention, no biases.
    Llama,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Gpt2 => "gpt2",
            Arch::Llama => "llama",
        }
    }

    /// LayerNorm subtracts the mean (and has a `hook_mean`); RMSNorm does not.
    pub fn norm_has_mean(self) -> bool {
        self == Arch::Gpt2
    }
}

/// How rotary embeddings pair up the dimensions of a head. The two layouts are the same rotation
/// applied to differently ordered rows of `W_q` and `W_k`: Hugging Face checkpoints rotate
/// dimension `i` with `i + hd/2` ("rotate half"); llama.cpp's converter permutes the rows of q and
/// k so that GGUF files rotate adjacent dimensions `2i` and `2i + 1`. Attention scores are equal
/// either way, since q and k are permuted alike. This is the one place the difference lives: the
/// loader records which layout its file uses, and the RoPE kernel follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopePairing {
    HalfSplit,
    Adjacent,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rope {
    /// Base of the rotation frequencies (`rope_theta`, `rope.freq_base`).
    pub theta: f32,
    pub pairing: RopePairing,
}

/// Hyperparameters, named as in a Hugging Face `config.json` where one exists.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub arch: Arch,
    /// Number of transformer blocks.
    pub n_layer: usize,
    /// Query heads per block.
    pub n_head: usize,
    /// Key/value heads per block (fewer than `n_head` for grouped-query attention).
    pub n_kv_head: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Width of the MLP's hidden layer.
    pub d_ff: usize,
    pub vocab_size: usize,
    /// Context length: the most positions a sequence may have.
    pub n_ctx: usize,
    /// Epsilon of every LayerNorm / RMSNorm.
    pub norm_eps: f32,
    /// Rotary position embedding (LLaMA); GPT-2 learns its positions instead.
    pub rope: Option<Rope>,
    pub bos_token_id: Option<u32>,
    /// End-of-sequence token, where the checkpoint names one.
    pub eos_token_id: Option<u32>,
    /// The LM head reuses the token embedding (`tie_word_embeddings`); when false the checkpoint
    /// must carry its own head.
    pub tied_head: bool,
}

impl Config {
    /// GPT-2 small's shape (124M parameters, 50257 tokens, context 1024): what the benchmarks
    /// run with random weights when no checkpoint is at hand.
    pub fn gpt2_small() -> Config {
        Config {
            arch: Arch::Gpt2,
            n_layer: 12,
            n_head: 12,
            n_kv_head: 12,
            d_model: 768,
            d_ff: 3072,
            vocab_size: 50257,
            n_ctx: 1024,
            norm_eps: 1e-5,
            rope: None,
            bos_token_id: Some(50256),
            eos_token_id: Some(50256),
            tied_head: true,
        }
    }

    pub fn head_dim(&self) -> usize {
        self.d_model / self.n_head
    }

    /// Width of q (all query heads).
    pub fn q_dim(&self) -> usize {
        self.n_head * self.head_dim()
    }

    /// Width of k and of v (all key/value heads).
    pub fn kv_dim(&self) -> usize {
        self.n_kv_head * self.head_dim()
    }

    /// Refuses any size over gptlens's caps ([`crate::formats::limits`]), naming the field as the
    /// checkpoint spells it: `source_name` maps a [`Config`] field (`"n_layer"`) to the file's
    /// key (`"llama.block_count"`). Run before anything is planned or allocated from the config.
    pub fn check_limits(&self, source_name: impl Fn(&'static str) -> String) -> crate::Result<()> {
        use crate::formats::limits::*;
        let caps = [
            ("n_layer", self.n_layer, MAX_LAYERS, "layers"),
            ("n_head", self.n_head, MAX_HEADS, "heads"),
            ("n_kv_head", self.n_kv_head, MAX_HEADS, "heads"),
            ("d_model", self.d_model, MAX_WIDTH, "dimensions"),
            ("d_ff", self.d_ff, MAX_FF, "dimensions"),
            ("vocab_size", self.vocab_size, MAX_VOCAB, "tokens"),
            ("n_ctx", self.n_ctx, MAX_CONTEXT, "positions"),
        ];
        for (field, value, limit, unit) in caps {
            check_cap(|| source_name(field), value, limit, unit)?;
        }
        Ok(())
    }

    /// Checks the relations between sizes that the forward pass relies on.
    pub fn validate(&self) -> Result<(), String> {
        let dims = [
            ("n_layer", self.n_layer),
            ("n_head", self.n_head),
            ("n_kv_head", self.n_kv_head),
            ("d_model", self.d_model),
            ("d_ff", self.d_ff),
            ("vocab_size", self.vocab_size),
            ("n_ctx", self.n_ctx),
        ];
        for (name, value) in dims {
            if value == 0 || value > MAX_DIM {
                return Err(format!("{name} = {value} is outside 1..={MAX_DIM}"));
            }
        }
        if !self.d_model.is_multiple_of(self.n_head) {
            return Err(format!("d_model = {} is not a multiple of n_head = {}", self.d_model, self.n_head));
        }
        if !self.n_head.is_multiple_of(self.n_kv_head) {
            return Err(format!("n_head = {} is not a multiple of n_kv_head = {}", self.n_head, self.n_kv_head));
        }
        if self.rope.is_some() && !self.head_dim().is_multiple_of(2) {
            return Err(format!("rotary embeddings need an even head dimension, not {}", self.head_dim()));
        }
        if !(self.norm_eps.is_finite() && self.norm_eps > 0.0) {
            return Err(format!("the norm epsilon {} must be a positive number", self.norm_eps));
        }
        if let Some(r) = self.rope {
            if !(r.theta.is_finite() && r.theta > 1.0) {
                return Err(format!("rope theta {} must be a number above 1", r.theta));
            }
        }
        Ok(())
    }
}

/// Every dimension must be at most this: larger values are a corrupt file or a model far beyond
/// what a browser holds, and rejecting them early keeps size arithmetic from overflowing.
pub const MAX_DIM: usize = 1 << 24;
