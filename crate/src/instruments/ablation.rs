//! Ablation, a session setting: chosen heads' outputs are zeroed before the output projection
//! (TransformerLens's zero-ablation of `hook_z`), and chosen MLPs' outputs before they join the
//! residual (`hook_mlp_out`), so everything after them — later layers, the logits — runs without
//! them; an ablated head's own attention pattern is unchanged.

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::model::Config;

/// Heads and MLPs whose output is zeroed (zero-ablation): `(layer, head)` pairs and layers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ablation {
    heads: BTreeSet<(usize, usize)>,
    mlps: BTreeSet<usize>,
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
        Ok(Ablation { heads, mlps })
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
