//! Traces: the tensors a run captures, named like TransformerLens hooks so that notebooks written
//! against TransformerLens read gptlens exports unchanged.
//!
//! | hook                                  | shape        | value                                   |
//! |---------------------------------------|--------------|-----------------------------------------|
//! | `blocks.{l}.attn.hook_pattern`        | `[H, T, T]`  | softmax attention probabilities (causal: zero above the diagonal) |
//! | `blocks.{l}.ln1.hook_scale` (`ln2`)   | `[T]`        | sqrt(var + eps); RMSNorm: sqrt(mean x² + eps) |
//! | `blocks.{l}.ln1.hook_mean` (`ln2`)    | `[T]`        | mean of the LN input (LayerNorm only)   |
//! | `ln_final.hook_scale` / `.hook_mean`  | `[T]`        | same for the final LayerNorm            |
//! | `blocks.{l}.hook_resid_post.norm`     | `[T]`        | L2 norm of the residual after block l   |
//! | `logits`                              | `[T, V]`     | unnormalised next-token scores          |
//!
//! Recorded only when named (large):
//!
//! | hook                                  | shape             | value                              |
//! |---------------------------------------|-------------------|------------------------------------|
//! | `blocks.{l}.attn.hook_pattern.pooled` | `[H, P, P]`       | `hook_pattern` max-pooled over bins of `s` positions (a power of two) so that `P = ⌈T / s⌉ ≤ 128`: every cell the strongest weight of its block; exact (`s = 1`) up to 128 tokens |
//! | `blocks.{l}.hook_resid_pre` / `_mid` / `_post` | `[T, d]` | residual before the block / after attention / after the MLP |
//! | `blocks.{l}.attn.hook_z`              | `[T, H, d_head]`  | each head's weighted values        |
//! | `blocks.{l}.attn.hook_result`         | `[T, H, d]`       | each head through its rows of W_O, no bias |
//! | `blocks.{l}.hook_mlp_out`             | `[T, d]`          | what the MLP adds to the residual  |
//! | `lens.logits`                         | `[L + 1, T, V]`   | final norm + unembedding of each `hook_resid_pre` and the last `hook_resid_post` |
//!
//! Post-LN blocks (BERT, the original transformer) normalise after each sublayer: `ln1` is the
//! norm of `x + attention`, `ln2` that of `x + MLP` (TransformerLens' BERT names them so), and
//! `hook_resid_mid` / `hook_resid_post` are the residual after those norms — what the next
//! sublayer reads (TransformerLens calls the latter `hook_normalized_resid_post`).
//!
//! A [`CaptureSpec`] is checked against the model before the forward pass runs, so a typo in a hook
//! name is an error up front, and an empty spec means the forward pass does no capture work at all.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::error::{Error, Result};
use crate::model::Config;
use crate::sample::softmax_with_temperature;

/// Which LayerNorm of the network a statistic belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NormSite {
    /// The LayerNorm before attention in block `l` (`ln_1` in GPT-2 checkpoints).
    Ln1(usize),
    /// The LayerNorm before the MLP in block `l` (`ln_2`).
    Ln2(usize),
    /// The LayerNorm before the unembedding (`ln_f`).
    Final,
}

/// One capturable tensor. Everything about a hook kind is declared here, once: its name
/// ([`fmt::Display`]), whether a run records it unasked ([`Hook::standard`]), and how its values
/// are kept per position ([`Hook::layout`], from which its shape and stored size follow). The
/// forward pass reads the activation at one capture point per hook (`model::forward`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hook {
    /// The residual stream entering block `l` (embeddings for `l = 0`), `[T, d_model]`.
    ResidPre(usize),
    NormScale(NormSite),
    NormMean(NormSite),
    AttnPattern(usize),
    /// `hook_pattern` max-pooled to at most [`POOLED_CELLS`] bins a side (`[H, P, P]`): what a
    /// thumbnail of a long prompt's map needs, at a size that does not grow with its square.
    AttnPatternPooled(usize),
    /// Each head's attention-weighted values, before the output projection, `[T, n_head, d_head]`.
    AttnZ(usize),
    /// Each head's output through its columns of `W_O`, without the bias, `[T, n_head, d_model]`.
    AttnResult(usize),
    /// The residual after attention joined it, `[T, d_model]`.
    ResidMid(usize),
    /// What the MLP adds to the residual (after Gemma's post-norm), `[T, d_model]`.
    MlpOut(usize),
    /// The residual leaving block `l`, `[T, d_model]`.
    ResidPost(usize),
    ResidPostNorm(usize),
    /// The logit lens: the final norm and the unembedding applied to every layer's `hook_resid_pre`
    /// and to the last `hook_resid_post`, `[n_layer + 1, T, V]`; index `n_layer` is `logits`.
    LensLogits,
    Logits,
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let site = |s: &NormSite| match s {
            NormSite::Ln1(l) => format!("blocks.{l}.ln1"),
            NormSite::Ln2(l) => format!("blocks.{l}.ln2"),
            NormSite::Final => "ln_final".to_string(),
        };
        match self {
            Hook::ResidPre(l) => write!(f, "blocks.{l}.hook_resid_pre"),
            Hook::NormScale(s) => write!(f, "{}.hook_scale", site(s)),
            Hook::NormMean(s) => write!(f, "{}.hook_mean", site(s)),
            Hook::AttnPattern(l) => write!(f, "blocks.{l}.attn.hook_pattern"),
            Hook::AttnPatternPooled(l) => write!(f, "blocks.{l}.attn.hook_pattern.pooled"),
            Hook::AttnZ(l) => write!(f, "blocks.{l}.attn.hook_z"),
            Hook::AttnResult(l) => write!(f, "blocks.{l}.attn.hook_result"),
            Hook::ResidMid(l) => write!(f, "blocks.{l}.hook_resid_mid"),
            Hook::MlpOut(l) => write!(f, "blocks.{l}.hook_mlp_out"),
            Hook::ResidPost(l) => write!(f, "blocks.{l}.hook_resid_post"),
            Hook::ResidPostNorm(l) => write!(f, "blocks.{l}.hook_resid_post.norm"),
            Hook::LensLogits => write!(f, "lens.logits"),
            Hook::Logits => write!(f, "logits"),
        }
    }
}

/// How a hook's values are kept for each position, so that a session can append a run's
/// positions and truncate to a shared prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `parts` rows of `width` values per position (most hooks: one part). The tensor is
    /// `[T, width]` with `width` split into the hook's inner dimensions, or with several parts
    /// `[parts, T, width]`.
    Rows { parts: usize, width: usize },
    /// Attention rows: position `p` keeps `heads` rows of its `p + 1` probabilities; the tensor is
    /// `[heads, T, T]`, zero above the diagonal.
    Triangle { heads: usize },
    /// Bidirectional attention rows: every position keeps `heads` rows of `T` probabilities. A
    /// bidirectional run always covers the whole sequence, so `T` is the positions kept.
    Full { heads: usize },
    /// Max-pooled attention: for each query bin, `heads` rows of [`POOLED_CELLS`] key bins
    /// (zero past the last), bins of [`pooled_bin`]`(T)` positions. A session keeps whole bins,
    /// so a run reuses its cached prefix only up to a bin boundary (or all of it when it extends).
    Pooled { heads: usize },
}

/// The most bins a side of a pooled attention map has.
pub const POOLED_CELLS: usize = 128;

/// Positions per bin of a pooled map of `t` positions: the smallest power of two that leaves at
/// most [`POOLED_CELLS`] bins. Powers of two let a session coarsen its bins exactly as a prompt
/// grows (the maximum of two bins is the maximum of their union).
pub fn pooled_bin(t: usize) -> usize {
    let mut bin = 1;
    while t.div_ceil(bin) > POOLED_CELLS {
        bin *= 2;
    }
    bin
}

impl Layout {
    /// Floats one part keeps for `positions` positions; `None` on overflow.
    pub fn part_len(&self, positions: usize) -> Option<usize> {
        match *self {
            Layout::Rows { width, .. } => width.checked_mul(positions),
            Layout::Triangle { heads } => heads.checked_mul(positions.checked_mul(positions + 1)? / 2),
            Layout::Full { heads } => heads.checked_mul(positions.checked_mul(positions)?),
            Layout::Pooled { heads } => heads.checked_mul(positions.div_ceil(pooled_bin(positions)) * POOLED_CELLS),
        }
    }
}

impl Hook {
    /// The hooks a run records when none are named (the page's live views and `gptlens trace`'s
    /// default), in a stable order, layer by layer. RMSNorm models (LLaMA) have no `hook_mean`:
    /// their norm does not subtract one; post-LN models have no final norm and encoders no
    /// `logits`.
    pub fn standard(config: &Config) -> Vec<Hook> {
        let with_mean = config.arch.norm_has_mean();
        let mut hooks = Vec::new();
        let norm = |hooks: &mut Vec<Hook>, site| {
            if with_mean {
                hooks.push(Hook::NormMean(site));
            }
            hooks.push(Hook::NormScale(site));
        };
        for l in 0..config.n_layer {
            norm(&mut hooks, NormSite::Ln1(l));
            hooks.push(Hook::AttnPattern(l));
            norm(&mut hooks, NormSite::Ln2(l));
            hooks.push(Hook::ResidPostNorm(l));
        }
        if config.has_final_norm() {
            norm(&mut hooks, NormSite::Final);
        }
        if config.has_head() {
            hooks.push(Hook::Logits);
        }
        hooks
    }

    /// Every hook a model with this config offers: the standard set, then the activations
    /// recorded only when asked for (they are large: `hook_result` is `d_model` wide per head,
    /// `lens.logits` a vocabulary per layer and position).
    pub fn offered(config: &Config) -> Vec<Hook> {
        let mut hooks = Hook::standard(config);
        for l in 0..config.n_layer {
            hooks.extend([
                Hook::ResidPre(l),
                Hook::AttnPatternPooled(l),
                Hook::AttnZ(l),
                Hook::AttnResult(l),
                Hook::ResidMid(l),
                Hook::MlpOut(l),
                Hook::ResidPost(l),
            ]);
        }
        if config.has_head() {
            hooks.push(Hook::LensLogits);
        }
        hooks
    }

    /// Parses a TransformerLens-style name, accepting only hooks that exist in this model. Only
    /// the hooks of the block the name names are spelled out to compare: spelling every hook on
    /// offer for each name cost each keystroke of SmolLM2's page ~1.5 ms in wasm (91 names of ~420
    /// hooks), on the forward pass's path.
    pub fn parse(name: &str, config: &Config) -> Result<Hook> {
        let layer = name.strip_prefix("blocks.").and_then(|rest| rest.split('.').next()?.parse::<usize>().ok());
        Hook::offered(config)
            .into_iter()
            .filter(|h| h.layer() == layer)
            .find(|h| h.to_string() == name)
            .ok_or_else(|| Error::UnknownHook { name: name.to_string() })
    }

    /// The block this hook belongs to; `None` for the final norm's statistics, the logits and the lens.
    pub fn layer(&self) -> Option<usize> {
        match *self {
            Hook::ResidPre(l)
            | Hook::AttnPattern(l)
            | Hook::AttnPatternPooled(l)
            | Hook::AttnZ(l)
            | Hook::AttnResult(l)
            | Hook::ResidMid(l)
            | Hook::MlpOut(l)
            | Hook::ResidPost(l)
            | Hook::ResidPostNorm(l) => Some(l),
            Hook::NormScale(site) | Hook::NormMean(site) => match site {
                NormSite::Ln1(l) | NormSite::Ln2(l) => Some(l),
                NormSite::Final => None,
            },
            Hook::LensLogits | Hook::Logits => None,
        }
    }

    pub fn layout(&self, c: &Config) -> Layout {
        let rows = |width| Layout::Rows { parts: 1, width };
        match self {
            Hook::AttnPattern(_) if c.bidirectional() => Layout::Full { heads: c.n_head },
            Hook::AttnPattern(_) => Layout::Triangle { heads: c.n_head },
            Hook::AttnPatternPooled(_) => Layout::Pooled { heads: c.n_head },
            Hook::NormScale(_) | Hook::NormMean(_) | Hook::ResidPostNorm(_) => rows(1),
            Hook::ResidPre(_) | Hook::ResidMid(_) | Hook::MlpOut(_) | Hook::ResidPost(_) => rows(c.d_model),
            Hook::AttnZ(_) => rows(c.q_dim()),
            Hook::AttnResult(_) => rows(c.n_head.saturating_mul(c.d_model)),
            Hook::Logits => rows(c.vocab_size),
            Hook::LensLogits => Layout::Rows { parts: c.n_layer + 1, width: c.vocab_size },
        }
    }

    /// The shape of this hook's tensor for a run of `t` tokens.
    pub fn shape(&self, c: &Config, t: usize) -> Vec<usize> {
        match self {
            Hook::AttnPattern(_) => vec![c.n_head, t, t],
            Hook::AttnPatternPooled(_) => {
                let cells = t.div_ceil(pooled_bin(t));
                vec![c.n_head, cells, cells]
            }
            Hook::NormScale(_) | Hook::NormMean(_) | Hook::ResidPostNorm(_) => vec![t],
            Hook::ResidPre(_) | Hook::ResidMid(_) | Hook::MlpOut(_) | Hook::ResidPost(_) => vec![t, c.d_model],
            Hook::AttnZ(_) => vec![t, c.n_head, c.head_dim()],
            Hook::AttnResult(_) => vec![t, c.n_head, c.d_model],
            Hook::Logits => vec![t, c.vocab_size],
            Hook::LensLogits => vec![c.n_layer + 1, t, c.vocab_size],
        }
    }

    /// Floats kept for `positions` positions (all parts together); `None` on overflow.
    pub fn stored_len(&self, c: &Config, positions: usize) -> Option<usize> {
        let layout = self.layout(c);
        let parts = match layout {
            Layout::Rows { parts, .. } => parts,
            Layout::Triangle { .. } | Layout::Full { .. } | Layout::Pooled { .. } => 1,
        };
        layout.part_len(positions)?.checked_mul(parts)
    }
}

/// The set of hooks a run records. Empty by default: capturing is opt-in and costs nothing when off.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureSpec {
    hooks: BTreeSet<Hook>,
}

impl CaptureSpec {
    pub fn none() -> Self {
        Self::default()
    }

    /// The standard set ([`Hook::standard`]).
    pub fn standard(config: &Config) -> Self {
        Self { hooks: Hook::standard(config).into_iter().collect() }
    }

    /// A spec from hook names, each validated against the model.
    pub fn from_names<S: AsRef<str>>(names: &[S], config: &Config) -> Result<Self> {
        let hooks = names.iter().map(|n| Hook::parse(n.as_ref(), config)).collect::<Result<_>>()?;
        Ok(Self { hooks })
    }

    pub fn contains(&self, hook: Hook) -> bool {
        self.hooks.contains(&hook)
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    pub fn is_subset(&self, other: &CaptureSpec) -> bool {
        self.hooks.is_subset(&other.hooks)
    }

    pub fn hooks(&self) -> impl Iterator<Item = Hook> + '_ {
        self.hooks.iter().copied()
    }

    /// True when a run must compute layer `layer`'s attention probabilities row by row: its
    /// pattern is captured whole or pooled.
    pub fn reads_pattern(&self, layer: usize) -> bool {
        self.contains(Hook::AttnPattern(layer)) || self.contains(Hook::AttnPatternPooled(layer))
    }
}

/// A captured tensor: row-major f32 data with its shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// The result of one run: the tokens, the next-token logits at the last position, and every
/// captured tensor covering all positions (reused prefix included).
#[derive(Clone, Debug)]
pub struct Trace {
    pub tokens: Vec<u32>,
    /// Logits after the last token, `[V]`: always present, because every run predicts a next token.
    pub last_logits: Vec<f32>,
    /// How many positions this run computed; the rest came from the session's cache.
    pub computed: usize,
    pub tensors: BTreeMap<String, Tensor>,
}

impl Trace {
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.tensors.get(name)
    }

    /// Next-token probabilities over the full vocabulary after position `pos`, at a temperature.
    /// Positions before the last need the `logits` hook to have been captured.
    pub fn probs(&self, pos: usize, temperature: f32) -> Result<Vec<f32>> {
        let last = self.tokens.len().saturating_sub(1);
        if pos > last {
            return Err(Error::InvalidArgument(format!("position {pos} is past the last token (position {last})")));
        }
        let logits: &[f32] = if pos == last {
            &self.last_logits
        } else {
            let all = self.get("logits").ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "probabilities at position {pos} need the `logits` hook captured; only the last position is always available"
                ))
            })?;
            let v = self.last_logits.len();
            &all.data[pos * v..(pos + 1) * v]
        };
        softmax_with_temperature(logits, temperature)
    }

    /// Serialises every captured tensor (f32, named by hook) plus `tokens` (i64) as safetensors,
    /// loadable with Python's `safetensors.numpy.load_file`.
    pub fn to_safetensors(&self) -> Result<Vec<u8>> {
        use safetensors::tensor::{Dtype, TensorView};
        let tokens: Vec<u8> = self.tokens.iter().flat_map(|&t| i64::from(t).to_le_bytes()).collect();
        let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = self
            .tensors
            .iter()
            .map(|(name, t)| (name.clone(), t.shape.clone(), t.data.iter().flat_map(|x| x.to_le_bytes()).collect()))
            .collect();
        let mut views = vec![(
            "tokens".to_string(),
            TensorView::new(Dtype::I64, vec![self.tokens.len()], &tokens)
                .map_err(|e| Error::Safetensors(e.to_string()))?,
        )];
        for (name, shape, data) in &bytes {
            let view =
                TensorView::new(Dtype::F32, shape.clone(), data).map_err(|e| Error::Safetensors(e.to_string()))?;
            views.push((name.clone(), view));
        }
        safetensors::serialize(views, None).map_err(|e| Error::Safetensors(e.to_string()))
    }
}
