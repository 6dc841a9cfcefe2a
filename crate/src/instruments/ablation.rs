//! Ablation, a session setting: chosen heads' outputs are replaced before the output projection
//! (TransformerLens's ablation of `hook_z`), and chosen MLPs' outputs before they join the
//! residual (`hook_mlp_out`), so everything after them — later layers, the logits — runs without
//! them; an ablated head's own attention pattern is unchanged. The replacement is zero, or
//! ([`AblateWith::Mean`]) the unit's mean over the prompt's positions in the run without any
//! ablation — which depends on the whole prompt, so a mean-ablated session recomputes every
//! position when the prompt changes.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};
use crate::model::Config;
use crate::trace::{Hook, Trace};

/// What an ablated unit's output becomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AblateWith {
    #[default]
    Zero,
    /// Its mean over the prompt's positions, from the run without ablation.
    Mean,
}

/// Heads and MLPs whose output is replaced: `(layer, head)` pairs and layers, and by what.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ablation {
    heads: BTreeSet<(usize, usize)>,
    mlps: BTreeSet<usize>,
    with: AblateWith,
}

impl Ablation {
    pub fn none() -> Ablation {
        Ablation::default()
    }

    /// Heads of `config`'s model; one out of range is an error naming it.
    pub fn heads(heads: impl IntoIterator<Item = (usize, usize)>, config: &Config) -> Result<Ablation> {
        Ablation::new(heads, [], config)
    }

    /// Heads and whole MLPs (by layer) of `config`'s model; one out of range is an error naming it.
    pub fn new(
        heads: impl IntoIterator<Item = (usize, usize)>,
        mlps: impl IntoIterator<Item = usize>,
        config: &Config,
    ) -> Result<Ablation> {
        let heads: BTreeSet<_> = heads.into_iter().collect();
        if let Some(&(layer, head)) = heads.iter().find(|&&(l, h)| l >= config.n_layer || h >= config.n_head) {
            return Err(Error::InvalidArgument(format!(
                "head {layer}.{head} does not exist: the model has {} layers of {} heads",
                config.n_layer, config.n_head
            )));
        }
        let mlps: BTreeSet<_> = mlps.into_iter().collect();
        if let Some(layer) = mlps.iter().find(|&&l| l >= config.n_layer) {
            return Err(Error::InvalidArgument(format!(
                "MLP {layer}.mlp does not exist: the model has {} layers",
                config.n_layer
            )));
        }
        Ok(Ablation { heads, mlps, with: AblateWith::Zero })
    }

    /// The same units, replaced by `with`.
    pub fn replaced_by(self, with: AblateWith) -> Ablation {
        Ablation { with, ..self }
    }

    pub fn with(&self) -> AblateWith {
        self.with
    }

    /// True when the replacement depends on the prompt (mean-ablation of anything).
    pub fn needs_means(&self) -> bool {
        self.with == AblateWith::Mean && !self.is_empty()
    }

    /// The hooks whose means a mean-ablation needs: `hook_z` of each layer with an ablated head,
    /// `hook_mlp_out` of each ablated MLP.
    pub(crate) fn mean_hooks(&self) -> Vec<Hook> {
        let layers: BTreeSet<usize> = self.heads.iter().map(|&(l, _)| l).collect();
        layers.into_iter().map(Hook::AttnZ).chain(self.mlps.iter().map(|&l| Hook::MlpOut(l))).collect()
    }

    /// `"1.0,2.3,4.mlp"`: layer.head pairs and layer.mlp, comma-separated (the CLI's `--ablate`).
    pub fn parse(text: &str, config: &Config) -> Result<Ablation> {
        let (mut heads, mut mlps) = (Vec::new(), Vec::new());
        for item in text.split(',').map(str::trim).filter(|item| !item.is_empty()) {
            let bad = || Error::InvalidArgument(format!("`{item}` is not layer.head or layer.mlp (e.g. 1.0, 2.mlp)"));
            let (layer, unit) = item.split_once('.').ok_or_else(bad)?;
            let layer = layer.parse().map_err(|_| bad())?;
            match unit {
                "mlp" => mlps.push(layer),
                head => heads.push((layer, head.parse().map_err(|_| bad())?)),
            }
        }
        Ablation::new(heads, mlps, config)
    }

    pub fn is_empty(&self) -> bool {
        self.heads.is_empty() && self.mlps.is_empty()
    }

    /// The ablated heads of `layer`.
    pub fn heads_in_layer(&self, layer: usize) -> impl Iterator<Item = usize> + '_ {
        self.heads.range((layer, 0)..(layer + 1, 0)).map(|&(_, head)| head)
    }

    /// Whether `layer`'s MLP is ablated.
    pub fn mlp_in_layer(&self, layer: usize) -> bool {
        self.mlps.contains(&layer)
    }

    /// The ablated heads, `(layer, head)`.
    pub fn heads_iter(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.heads.iter().copied()
    }

    /// The layers whose MLP is ablated.
    pub fn mlps_iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.mlps.iter().copied()
    }
}

/// The values ablated units take in a run: per head `[d_head]`, per MLP `[d_model]`, the same at
/// every position.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Replacements {
    heads: BTreeMap<(usize, usize), Vec<f32>>,
    mlps: BTreeMap<usize, Vec<f32>>,
}

impl Replacements {
    /// Zeros for every unit of `ablation`.
    pub(crate) fn zeros(ablation: &Ablation, c: &Config) -> Replacements {
        Replacements {
            heads: ablation.heads.iter().map(|&unit| (unit, vec![0.0; c.head_dim()])).collect(),
            mlps: ablation.mlps.iter().map(|&l| (l, vec![0.0; c.d_model])).collect(),
        }
    }

    /// Each unit's mean over the positions of `trace`, a run without ablation that captured
    /// [`Ablation::mean_hooks`].
    pub(crate) fn means(ablation: &Ablation, trace: &Trace, c: &Config) -> Replacements {
        let t = trace.tokens.len().max(1);
        let mean = |data: &[f32], width: usize, column: usize, len: usize| -> Vec<f32> {
            let mut sum = vec![0f64; len];
            for row in data.chunks_exact(width) {
                sum.iter_mut().zip(&row[column..column + len]).for_each(|(s, &x)| *s += f64::from(x));
            }
            sum.into_iter().map(|s| (s / t as f64) as f32).collect()
        };
        let data = |hook: Hook| trace.get(&hook.to_string()).map_or(&[][..], |t| t.data.as_slice());
        let (hd, q, d) = (c.head_dim(), c.q_dim(), c.d_model);
        Replacements {
            heads: ablation.heads.iter().map(|&(l, h)| ((l, h), mean(data(Hook::AttnZ(l)), q, h * hd, hd))).collect(),
            mlps: ablation.mlps.iter().map(|&l| (l, mean(data(Hook::MlpOut(l)), d, 0, d))).collect(),
        }
    }

    /// The replaced heads of `layer` with their values.
    pub(crate) fn heads_in_layer(&self, layer: usize) -> impl Iterator<Item = (usize, &[f32])> + '_ {
        self.heads.range((layer, 0)..(layer + 1, 0)).map(|(&(_, head), v)| (head, v.as_slice()))
    }

    /// The value `layer`'s MLP output is replaced by, if it is ablated.
    pub(crate) fn mlp(&self, layer: usize) -> Option<&[f32]> {
        self.mlps.get(&layer).map(Vec::as_slice)
    }
}
