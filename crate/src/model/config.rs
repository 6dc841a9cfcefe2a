//! The hyperparameters of a model: everything the forward pass needs to know about shapes and
//! which variant of each sublayer to run.

/// The model families gptlens runs. One forward pass serves both; the family picks the sublayers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// GPT-2: learned positions, LayerNorm (with bias), GELU MLP, biases everywhere, fused qkv.
    Gpt2,
    /// LLaMA (SmolLM2, TinyLlama, …): RoPE, RMSNorm, SwiGLU MLP, grouped-query attention, no biases.
    Llama,
    /// Qwen2 / Qwen2.5: LLaMA with biases on q, k and v.
    Qwen2,
    /// Gemma 3: LLaMA's parts plus embeddings scaled by √d, RMSNorm on each head's q and k, norms
    /// after attention and after the MLP as well as before, a GELU-gated MLP (GeGLU), and sliding-
    /// window attention on most layers ([`SlidingWindow`]).
    Gemma3,
}

/// The MLP's nonlinearity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mlp {
    /// `down(gelu(up(x)))`, GELU's tanh approximation (GPT-2).
    Gelu,
    /// `down(silu(gate(x)) · up(x))` (LLaMA, Qwen2).
    SwiGlu,
    /// `down(gelu(gate(x)) · up(x))`, the same tanh GELU (Gemma).
    GeGlu,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Gpt2 => "gpt2",
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Gemma3 => "gemma3",
        }
    }

    /// LayerNorm subtracts the mean (and has a `hook_mean`); RMSNorm does not.
    pub fn norm_has_mean(self) -> bool {
        self == Arch::Gpt2
    }

    pub fn mlp(self) -> Mlp {
        match self {
            Arch::Gpt2 => Mlp::Gelu,
            Arch::Llama | Arch::Qwen2 => Mlp::SwiGlu,
            Arch::Gemma3 => Mlp::GeGlu,
        }
    }

    /// Biases on the q, k and v projections (GPT-2's fused one has them too).
    pub fn qkv_bias(self) -> bool {
        matches!(self, Arch::Gpt2 | Arch::Qwen2)
    }

    /// Gemma's extra norms: RMSNorm over each head of q and k before RoPE, and a norm on the
    /// output of attention and of the MLP before each joins the residual stream.
    pub fn gemma_norms(self) -> bool {
        self == Arch::Gemma3
    }

    /// Gemma multiplies the embedding rows by √d (in f32, as transformers does).
    pub fn embedding_scale(self, d_model: usize) -> Option<f32> {
        (self == Arch::Gemma3).then(|| (d_model as f64).sqrt() as f32)
    }
}

/// Sliding-window attention (Gemma 3): on a local layer the query at position `i` reads only keys
/// `i − size + 1 ..= i`, rotated with their own RoPE base; every `global_every`-th layer
/// (`l + 1` a multiple of it) reads the whole context with the model's main RoPE.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlidingWindow {
    pub size: usize,
    pub global_every: usize,
    /// RoPE base of the local layers.
    pub local_theta: f32,
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
    /// Width of each attention head: `d_model / n_head` except where a checkpoint says otherwise
    /// (Gemma 3: 256 with `d_model` 640 and 4 heads).
    pub head_dim: usize,
    /// Width of the MLP's hidden layer.
    pub d_ff: usize,
    pub vocab_size: usize,
    /// Context length: the most positions a sequence may have.
    pub n_ctx: usize,
    /// Epsilon of every LayerNorm / RMSNorm.
    pub norm_eps: f32,
    /// Rotary position embedding (LLaMA); GPT-2 learns its positions instead.
    pub rope: Option<Rope>,
    /// Attention scores are `q·k / √s` with `s` = this, or the head size when `None` (Gemma's
    /// `query_pre_attn_scalar`).
    pub query_pre_attn_scalar: Option<f32>,
    /// Local attention on some layers (Gemma 3); every layer is global when `None`.
    pub sliding_window: Option<SlidingWindow>,
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
            head_dim: 64,
            d_ff: 3072,
            vocab_size: 50257,
            n_ctx: 1024,
            norm_eps: 1e-5,
            rope: None,
            query_pre_attn_scalar: None,
            sliding_window: None,
            bos_token_id: Some(50256),
            eos_token_id: Some(50256),
            tied_head: true,
        }
    }

    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// What attention scores are divided by: √(head size), or √`query_pre_attn_scalar`.
    pub fn score_divisor(&self) -> f32 {
        self.query_pre_attn_scalar.unwrap_or(self.head_dim as f32).sqrt()
    }

    /// The first key position a query at `pos` reads in layer `layer`: 0, or the start of its
    /// window on a sliding-window layer.
    pub fn first_key(&self, layer: usize, pos: usize) -> usize {
        match self.sliding_window {
            Some(w) if !self.is_global_layer(layer) => (pos + 1).saturating_sub(w.size),
            _ => 0,
        }
    }

    /// A layer that reads the whole context (every layer without a sliding window).
    pub fn is_global_layer(&self, layer: usize) -> bool {
        self.sliding_window.is_none_or(|w| (layer + 1).is_multiple_of(w.global_every))
    }

    /// The RoPE of layer `layer`: local layers of a sliding-window model use their own base.
    pub fn rope_for(&self, layer: usize) -> Option<Rope> {
        let rope = self.rope?;
        Some(match self.sliding_window {
            Some(w) if !self.is_global_layer(layer) => Rope { theta: w.local_theta, ..rope },
            _ => rope,
        })
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
            ("head_dim", self.head_dim, MAX_WIDTH, "dimensions"),
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
            ("head_dim", self.head_dim),
            ("d_ff", self.d_ff),
            ("vocab_size", self.vocab_size),
            ("n_ctx", self.n_ctx),
        ];
        for (name, value) in dims {
            if value == 0 || value > MAX_DIM {
                return Err(format!("{name} = {value} is outside 1..={MAX_DIM}"));
            }
        }
        if self.arch == Arch::Gpt2 && self.head_dim.checked_mul(self.n_head) != Some(self.d_model) {
            return Err(format!("d_model = {} is not a multiple of n_head = {}", self.d_model, self.n_head));
        }
        if self.n_head.checked_mul(self.head_dim).is_none_or(|q| q > MAX_DIM) {
            return Err(format!("{} heads of {} dimensions are too wide", self.n_head, self.head_dim));
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
        let thetas = self.rope.map(|r| r.theta).into_iter().chain(self.sliding_window.map(|w| w.local_theta));
        for theta in thetas.filter(|_| self.rope.is_some()) {
            if !(theta.is_finite() && theta > 1.0) {
                return Err(format!("rope theta {theta} must be a number above 1"));
            }
        }
        if let Some(s) = self.query_pre_attn_scalar {
            if !(s.is_finite() && s > 0.0) {
                return Err(format!("query_pre_attn_scalar {s} must be a positive number"));
            }
        }
        if let Some(w) = self.sliding_window {
            if w.size == 0 || w.global_every == 0 {
                return Err(format!(
                    "a sliding window of {} with every {}th layer global is empty",
                    w.size, w.global_every
                ));
            }
        }
        Ok(())
    }
}

/// Every dimension must be at most this: larger values are a corrupt file or a model far beyond
/// what a browser holds, and rejecting them early keeps size arithmetic from overflowing.
pub const MAX_DIM: usize = 1 << 24;
