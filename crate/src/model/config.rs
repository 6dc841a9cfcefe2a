//! The hyperparameters of a model: everything the forward pass needs to know about shapes.

/// GPT-2 hyperparameters, named as in a Hugging Face `config.json` where one exists.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Number of transformer blocks (`n_layer`).
    pub n_layer: usize,
    /// Attention heads per block (`n_head`).
    pub n_head: usize,
    /// Width of the residual stream (`n_embd`).
    pub d_model: usize,
    /// Width of the MLP's hidden layer (`n_inner`, 4 · d_model when absent).
    pub d_ff: usize,
    /// Vocabulary size (`vocab_size`).
    pub vocab_size: usize,
    /// Context length: positions the learned position embedding covers (`n_positions`).
    pub n_ctx: usize,
    /// LayerNorm epsilon (`layer_norm_epsilon`).
    pub norm_eps: f32,
    /// End-of-sequence token, where the config names one (`eos_token_id`).
    pub eos_token_id: Option<u32>,
    /// The LM head reuses the token embedding (`tie_word_embeddings`, GPT-2's default); when
    /// false the checkpoint must carry its own `lm_head.weight`.
    pub tied_head: bool,
}

impl Config {
    pub fn head_dim(&self) -> usize {
        self.d_model / self.n_head
    }

    /// Total parameter count (a tied head counted once).
    pub fn n_params(&self) -> usize {
        let (d, f, v) = (self.d_model, self.d_ff, self.vocab_size);
        let block = 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + 2 * d + (d * f + f) + (f * d + d);
        v * d + self.n_ctx * d + self.n_layer * block + 2 * d + if self.tied_head { 0 } else { v * d }
    }
}
