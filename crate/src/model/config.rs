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
    /// BERT (all-MiniLM-L6-v2): an encoder. Learned positions plus token-type embeddings and a
    /// LayerNorm on the embeddings, post-LN blocks with separate biased q, k, v, GELU (erf),
    /// bidirectional attention, and no LM head: its output is hidden states (pooled into a
    /// sentence embedding), not next-token scores.
    Bert,
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
    /// `down(gelu(up(x)))` with the exact GELU, `x·Φ(x)` (erf): BERT, PyTorch's `"gelu"`.
    GeluErf,
    /// `down(relu(up(x)))`: the original transformer's.
    Relu,
}

impl Mlp {
    /// Whether the MLP multiplies by a gate projection (`ffn_gate`).
    pub fn gated(self) -> bool {
        matches!(self, Mlp::SwiGlu | Mlp::GeGlu)
    }
}

/// What is added to the token embeddings to say where each token is. Rotary embeddings
/// ([`Config::rope`]) rotate q and k instead, and go with [`Positions::None`] here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positions {
    /// A learned table, one row per position (GPT-2's `wpe`, BERT's `position_embeddings`).
    Learned,
    /// *Attention Is All You Need*'s fixed table: PE(pos, 2i) = sin(pos / 10000^(2i/d)),
    /// PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
    Sinusoidal,
    None,
}

/// Where each block normalises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormPlacement {
    /// `x + Sublayer(LN(x))`, with a final norm before the head (GPT-2, LLaMA).
    Pre,
    /// `LN(x + Sublayer(x))` (*Attention Is All You Need*, BERT); no final norm.
    Post,
}

/// Which keys a query reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attention {
    /// Itself and the positions before it (decoders).
    Causal,
    /// Every position of the sequence (encoders): a changed token changes every position, so a
    /// run recomputes the whole sequence in one chunk.
    Bidirectional,
}

/// The choices in which the original transformer, BERT and GPT differ, each a `config.json` key
/// (see `formats::hf_config`). [`Variant::of`] gives a family's own.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Variant {
    pub positions: Positions,
    pub norm: NormPlacement,
    pub attention: Attention,
    pub mlp: Mlp,
    /// Token embeddings are multiplied by √d_model before positions are added (the original
    /// transformer, §3.4; Gemma).
    pub scale_embeddings: bool,
}

impl Variant {
    /// The variant a family is built as.
    pub fn of(arch: Arch) -> Variant {
        let decoder = Variant {
            positions: Positions::None,
            norm: NormPlacement::Pre,
            attention: Attention::Causal,
            mlp: Mlp::SwiGlu,
            scale_embeddings: false,
        };
        match arch {
            Arch::Gpt2 => Variant { positions: Positions::Learned, mlp: Mlp::Gelu, ..decoder },
            Arch::Llama | Arch::Qwen2 => decoder,
            Arch::Gemma3 => Variant { mlp: Mlp::GeGlu, scale_embeddings: true, ..decoder },
            Arch::Bert => Variant {
                positions: Positions::Learned,
                norm: NormPlacement::Post,
                attention: Attention::Bidirectional,
                mlp: Mlp::GeluErf,
                scale_embeddings: false,
            },
        }
    }

    /// Whether this is `arch`'s own variant (the GPU backend runs only the families' own).
    pub fn is_standard_for(&self, arch: Arch) -> bool {
        *self == Variant::of(arch)
    }
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Gpt2 => "gpt2",
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Gemma3 => "gemma3",
            Arch::Bert => "bert",
        }
    }

    /// LayerNorm subtracts the mean (and has a `hook_mean`); RMSNorm does not.
    pub fn norm_has_mean(self) -> bool {
        matches!(self, Arch::Gpt2 | Arch::Bert)
    }

    /// Biases on the q, k and v projections (GPT-2's fused one has them too).
    pub fn qkv_bias(self) -> bool {
        matches!(self, Arch::Gpt2 | Arch::Qwen2 | Arch::Bert)
    }

    /// Biases on every linear layer (GPT-2, BERT), not only on q, k and v.
    pub fn biased(self) -> bool {
        matches!(self, Arch::Gpt2 | Arch::Bert)
    }

    /// Gemma's extra norms: RMSNorm over each head of q and k before RoPE, and a norm on the
    /// output of attention and of the MLP before each joins the residual stream.
    pub fn gemma_norms(self) -> bool {
        self == Arch::Gemma3
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
    /// Positions, norm placement, attention mask and MLP ([`Variant::of`] the family's own).
    pub variant: Variant,
    /// BERT's token types (`type_vocab_size`); 0 for models without them.
    pub token_types: usize,
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
            variant: Variant::of(Arch::Gpt2),
            token_types: 0,
        }
    }

    /// Whether the model predicts tokens: encoders (BERT) have no LM head and no final norm, and
    /// give hidden states instead of logits.
    pub fn has_head(&self) -> bool {
        self.arch != Arch::Bert
    }

    /// Whether a final norm comes before the head: pre-LN blocks leave the residual stream
    /// unnormalised; post-LN blocks end normalised.
    pub fn has_final_norm(&self) -> bool {
        self.variant.norm == NormPlacement::Pre
    }

    pub fn bidirectional(&self) -> bool {
        self.variant.attention == Attention::Bidirectional
    }

    /// Token embeddings are multiplied by this (√d, in f32 as transformers does for Gemma).
    pub fn embedding_scale(&self) -> Option<f32> {
        self.variant.scale_embeddings.then(|| (self.d_model as f64).sqrt() as f32)
    }

    /// Tokens per forward chunk: [`crate::model::CHUNK`], or the whole context for bidirectional
    /// attention, whose every query reads every key of the sequence.
    pub fn chunk_len(&self) -> usize {
        if self.bidirectional() {
            self.n_ctx
        } else {
            crate::model::CHUNK
        }
    }

    /// The keys a query at `pos` in layer `layer` reads, in a sequence of `len` positions.
    pub fn visible_keys(&self, layer: usize, pos: usize, len: usize) -> std::ops::Range<usize> {
        if self.bidirectional() {
            0..len
        } else {
            self.first_key(layer, pos)..pos + 1
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
            ("token_types", self.token_types, MAX_VOCAB, "token types"),
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
        if matches!(self.arch, Arch::Gpt2 | Arch::Bert) && self.head_dim.checked_mul(self.n_head) != Some(self.d_model)
        {
            return Err(format!("d_model = {} is not a multiple of n_head = {}", self.d_model, self.n_head));
        }
        if self.n_head.checked_mul(self.head_dim).is_none_or(|q| q > MAX_DIM) {
            return Err(format!("{} heads of {} dimensions are too wide", self.n_head, self.head_dim));
        }
        if !self.n_head.is_multiple_of(self.n_kv_head) {
            return Err(format!("n_head = {} is not a multiple of n_kv_head = {}", self.n_head, self.n_kv_head));
        }
        if self.rope.is_some() && self.variant.positions != Positions::None {
            return Err("rotary embeddings go with no position table added to the embeddings".into());
        }
        if self.variant.positions == Positions::Sinusoidal && !self.d_model.is_multiple_of(2) {
            return Err(format!("sinusoidal positions need an even d_model, not {}", self.d_model));
        }
        if self.variant.norm == NormPlacement::Post && !self.arch.norm_has_mean() {
            return Err("post-LN blocks are implemented with LayerNorm (GPT-2-style or BERT models)".into());
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
