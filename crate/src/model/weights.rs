//! Weights as named views into two buffers (llm.c's `ParameterTensors`): f32 values, and
//! quantized blocks, so a Q4 model stays Q4 in memory. Q4_0, Q4_1 and Q8_0 blocks are re-laid out
//! once for the kernels ([`packed`]: same integers, f32 scales); other block types are kept as the
//! file stores them.
//!
//! Tensors are named by role, with llama.cpp's names (`token_embd`, `blk.{i}.attn_q`, …), the one
//! vocabulary shared by every format; [`Naming`] maps them to each checkpoint's own names. Matrices
//! are row-major `[out, in]`: each output is a dot product of two contiguous rows. Hugging Face
//! GPT-2 keeps its `Conv1D` weights as `[in, out]`; [`conv1d_to_rows`] is the one place that
//! transposes them.

use crate::error::{Error, Result};
use crate::formats::limits::{overflow, Budget, Need};
use crate::formats::{gguf::GgufFile, safetensors::SafetensorsFile};
use crate::kernels::packed::{self, PackedType};
use crate::kernels::quant::{dequantize_row, GgmlType};
use crate::model::{Arch, Config, Positions};

/// A tensor's place in [`Weights`]' f32 buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    offset: usize,
    len: usize,
}

/// How a matrix's rows are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    /// f32 values in the float buffer.
    F32(View),
    /// Q4_0, Q4_1 or Q8_0 rows in the block buffer, re-laid out for the kernels (Q5_0 as Q8_0;
    /// [`crate::kernels::packed`]).
    Packed { ty: PackedType, offset: usize, len: usize },
    /// Rows of other ggml blocks (K-quants, F16, BF16) in the block buffer, as the file had them.
    Blocks { ty: GgmlType, offset: usize, len: usize },
}

/// A `[rows, cols]` matrix: `rows` outputs, each a dot product over `cols` inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Rows,
}

/// `y = W x + b`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Linear {
    pub weight: Matrix,
    pub bias: Option<View>,
}

/// A LayerNorm (weight and bias) or an RMSNorm (weight only).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Norm {
    pub weight: View,
    pub bias: Option<View>,
}

/// One transformer block.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerWeights {
    pub attn_norm: Norm,
    /// Row blocks whose outputs, side by side, are q | k | v: GPT-2's fused `c_attn` is one block,
    /// LLaMA's `q_proj`, `k_proj`, `v_proj` are three.
    pub attn_qkv: Vec<Linear>,
    pub attn_output: Linear,
    pub ffn_norm: Norm,
    /// GPT-2's `c_fc`, LLaMA's `up_proj`.
    pub ffn_up: Linear,
    /// LLaMA's `gate_proj` (SwiGLU); GPT-2 has none.
    pub ffn_gate: Option<Linear>,
    /// GPT-2's MLP `c_proj`, LLaMA's `down_proj`.
    pub ffn_down: Linear,
    /// Gemma's RMSNorm over each head of q and of k (`[head_dim]` weights), before RoPE.
    pub attn_q_norm: Option<Norm>,
    pub attn_k_norm: Option<Norm>,
    /// Gemma's norms on the attention output and on the MLP output, before each joins the
    /// residual stream.
    pub attn_post_norm: Option<Norm>,
    pub ffn_post_norm: Option<Norm>,
}

#[derive(Clone, Debug)]
pub struct Weights {
    floats: Vec<f32>,
    blocks: Vec<u8>,
    pub token_embd: Matrix,            // [V, d]
    pub position_embd: Option<Matrix>, // [n_ctx, d]  learned positions (GPT-2, BERT)
    /// BERT's token-type table (`[types, d]`): row 0, the type of a single sentence, is added to
    /// every token.
    pub token_type_embd: Option<Matrix>,
    /// BERT's LayerNorm on the embeddings.
    pub embd_norm: Option<Norm>,
    pub layers: Vec<LayerWeights>,
    /// The norm before the head: pre-LN models only (post-LN blocks end normalised).
    pub output_norm: Option<Norm>,
    /// `[V, d]`: the same matrix as `token_embd` when the head is tied; `None` for encoders.
    pub output: Option<Matrix>,
}

impl Weights {
    /// The values of an f32 tensor. Views are made only by [`Layout`], always inside the buffer.
    pub fn get(&self, view: View) -> &[f32] {
        &self.floats[view.offset..view.offset + view.len]
    }

    /// The stored bytes of a block matrix. Made only by [`Layout`], always inside the buffer.
    pub fn blocks(&self, offset: usize, len: usize) -> &[u8] {
        &self.blocks[offset..offset + len]
    }

    /// Both buffers whole, as a GGUF's were planned and filled ([`GgufFill`]): what a snapshot of
    /// the weights stores ([`crate::checkpoint::snapshot`]).
    pub fn buffers(&self) -> (&[f32], &[u8]) {
        (&self.floats, &self.blocks)
    }

    /// Row `i` of a matrix as f32 (an embedding lookup). `out` must hold `m.cols` values.
    pub fn row(&self, m: &Matrix, i: usize, out: &mut [f32]) {
        match m.data {
            Rows::F32(v) => out.copy_from_slice(&self.get(v)[i * m.cols..(i + 1) * m.cols]),
            Rows::Packed { ty, offset, len } => {
                let row_bytes = len / m.rows;
                packed::dequantize_row(ty, &self.blocks(offset, len)[i * row_bytes..(i + 1) * row_bytes], out)
            }
            Rows::Blocks { ty, offset, len } => {
                let row_bytes = len / m.rows;
                dequantize_row(ty, &self.blocks(offset, len)[i * row_bytes..(i + 1) * row_bytes], out)
            }
        }
    }

    pub fn tied_head(&self) -> bool {
        self.output == Some(self.token_embd)
    }

    /// Bytes the weights occupy in memory.
    pub fn memory_bytes(&self) -> usize {
        self.floats.len() * 4 + self.blocks.len()
    }

    /// Number of parameters (a tied head counted once).
    pub fn n_params(&self) -> usize {
        let mut n = self.floats.len();
        let mut matrix = |m: &Matrix| {
            if !matches!(m.data, Rows::F32(_)) {
                n += m.rows * m.cols;
            }
        };
        matrix(&self.token_embd);
        if let Some(output) = self.output.filter(|_| !self.tied_head()) {
            matrix(&output);
        }
        for l in &self.layers {
            for lin in l.attn_qkv.iter().chain([&l.attn_output, &l.ffn_up, &l.ffn_down]).chain(&l.ffn_gate) {
                matrix(&lin.weight);
            }
        }
        n
    }

    /// Reads a Hugging Face safetensors checkpoint (GPT-2 or LLaMA names). Every tensor's
    /// presence, shape and dtype is checked, and the weights plus a session are fitted to
    /// `budget`, before anything is allocated. Also returns the positions a session may use: the
    /// model's context, or fewer when that is all the budget holds ([`Budget::fit`]).
    pub fn from_safetensors(config: &Config, file: &SafetensorsFile, budget: &Budget) -> Result<(Weights, usize)> {
        let naming = match config.arch {
            Arch::Gpt2 if file.contains("transformer.wte.weight") => Naming::HfGpt2 { prefix: "transformer." },
            Arch::Gpt2 => Naming::HfGpt2 { prefix: "" },
            Arch::Llama | Arch::Qwen2 => Naming::HfLlama,
            Arch::Gemma3 => Naming::HfGemma3,
            // A BertModel saves its tensors unprefixed; a BertFor… model under `bert.`.
            Arch::Bert if file.contains("bert.embeddings.word_embeddings.weight") => Naming::HfBert { prefix: "bert." },
            Arch::Bert => Naming::HfBert { prefix: "" },
        };
        // A tied model may still store a copy of the head; skip it when it equals the embedding.
        let explicit_head = !config.has_head()
            || !config.tied_head
            || (file.contains("lm_head.weight")
                && file.raw("lm_head.weight")? != file.raw(&naming.name("token_embd.weight"))?);
        let layout = Layout::new(config, explicit_head)?;
        for t in &layout.tensors {
            file.check(&naming.name(&t.name), &naming.stored_shape(t))?;
        }
        // GPT-2's Conv1D matrices pass through one transposition buffer, the largest of them.
        let transposed = layout.tensors.iter().filter(|t| naming.is_conv1d(&t.name)).map(PlannedTensor::len).max();
        let floats_bytes = layout.n_floats.checked_add(transposed.unwrap_or(0)).and_then(|n| (n as u64).checked_mul(4));
        let positions = fit_context(config, floats_bytes, budget)?;
        let mut floats = vec![0f32; layout.n_floats];
        for t in &layout.tensors {
            let (name, stored) = (naming.name(&t.name), naming.stored_shape(t));
            let out = &mut floats[t.float_offset..t.float_offset + t.len()];
            if naming.is_conv1d(&t.name) {
                let mut transposed = vec![0f32; t.len()];
                file.read_f32(&name, &stored, &mut transposed)?;
                conv1d_to_rows(&transposed, t.shape[1], t.shape[0], out);
            } else {
                file.read_f32(&name, &stored, out)?;
            }
            // Gemma's RMSNorm multiplies by (1 + w); llama.cpp's converter stores 1 + w in the
            // GGUF, so adding it here leaves one RMSNorm that multiplies by its weight.
            if config.arch == Arch::Gemma3 && t.name.ends_with("norm.weight") {
                out.iter_mut().for_each(|w| *w += 1.0);
            }
        }
        Ok((layout.into_weights(floats, Vec::new()), positions))
    }

    /// Weights with every value drawn from a seeded generator: for benchmarks and tests that need
    /// a model of a given shape without a checkpoint file.
    ///
    /// # Panics
    /// If the config's sizes overflow (a config that `Config::check_limits` would refuse).
    pub fn random(config: &Config, seed: u64) -> Weights {
        let layout = Layout::new(config, !config.tied_head).unwrap_or_else(|e| panic!("Weights::random: {e}"));
        let mut rng = crate::sample::Rng::new(seed);
        let floats = (0..layout.n_floats).map(|_| (rng.next_f32() - 0.5) * 0.2).collect();
        layout.into_weights(floats, Vec::new())
    }
}

/// What the weights (`weight_bytes`, `None` when the sum overflowed) and a session at the full
/// context need.
/// A GGUF's weights, filled from its tensors' bytes in file order as they arrive: a whole file's
/// tensors, or the pieces of one still being read ([`crate::checkpoint::GgufStream`]), so that a
/// model is never held twice in memory. Vectors (norms, biases) and F32 matrices are decoded to
/// f32; other matrices stay in their stored type. Every
/// tensor is checked and the buffers are sized, against the budget, before anything is filled;
/// each whole block is packed or decoded as soon as its bytes are there.
pub struct GgufFill {
    layout: Layout,
    floats: Vec<f32>,
    blocks: Vec<u8>,
    /// The planned tensors in file order.
    order: Vec<Planned>,
    /// The tensor being filled (an index into `order`), how many of its bytes were taken, and
    /// how many of its values were placed when it is decoded to f32.
    next: usize,
    taken: usize,
    float_at: usize,
    /// The start of a block split between two pieces.
    carry: Vec<u8>,
    /// The file offset the next piece may start at: pieces come in order.
    reached: usize,
    /// The positions a session may use ([`Budget::fit`]).
    positions: usize,
    /// The planned size of `blocks`.
    block_bytes: usize,
}

/// Where a planned tensor's bytes are, their type, and where they go.
struct Planned {
    name: String,
    range: std::ops::Range<usize>,
    ty: GgmlType,
    target: Option<Rows>,
    float_offset: usize,
}

impl GgufFill {
    /// Checks every tensor the model needs (present, its shape, a whole number of blocks) and the
    /// budget, then allocates the buffers (with `allocate`; else they come filled, from a
    /// snapshot: [`GgufFill::install`]). Block matrices get their place in file order, which is
    /// the order they are filled in.
    pub fn plan(config: &Config, file: &GgufFile, budget: &Budget, allocate: bool) -> Result<GgufFill> {
        let explicit_head = !config.tied_head || file.tensor("output.weight").is_ok();
        let mut layout = Layout::new(config, explicit_head)?;
        let mut order = Vec::with_capacity(layout.tensors.len());
        for (i, t) in layout.tensors.iter_mut().enumerate() {
            let g = file.tensor(&t.name)?;
            let expected: Vec<usize> = t.shape.iter().rev().copied().collect();
            if g.shape() != expected.as_slice() {
                return Err(Error::ShapeMismatch { name: t.name.clone(), expected, got: g.shape().to_vec() });
            }
            if t.shape.len() == 2 && g.ggml_type() != GgmlType::F32 {
                let ty = g.ggml_type();
                let not_whole =
                    || Error::Gguf(format!("{}: {} values are not whole {} blocks", t.name, t.len(), ty.name()));
                // Offsets are given below, in file order; the GGUF reader checked that the data
                // is whole blocks of the shape.
                t.block = Some(match PackedType::of(ty) {
                    Some(p) => Rows::Packed { ty: p, offset: 0, len: p.row_bytes(t.len()).ok_or_else(not_whole)? },
                    None => Rows::Blocks { ty, offset: 0, len: g.file_range().len() },
                });
            }
            order.push((g.file_range(), g.ggml_type(), i));
        }
        order.sort_unstable_by_key(|(range, _, _)| range.start);
        let mut n_blocks = 0usize;
        for &(_, _, i) in &order {
            if let Some(Rows::Packed { offset, len, .. } | Rows::Blocks { offset, len, .. }) =
                &mut layout.tensors[i].block
            {
                *offset = n_blocks;
                n_blocks = n_blocks.checked_add(*len).ok_or_else(|| Error::Gguf("tensor sizes overflow".into()))?;
            }
        }
        layout.compact_floats();
        let weight_bytes = (layout.n_floats as u64).checked_mul(4).and_then(|f| f.checked_add(n_blocks as u64));
        let positions = fit_context(config, weight_bytes, budget)?;
        let order = order
            .into_iter()
            .map(|(range, ty, i)| {
                let t = &layout.tensors[i];
                Planned { name: t.name.clone(), range, ty, target: t.block, float_offset: t.float_offset }
            })
            .collect();
        let (floats, blocks) =
            if allocate { (vec![0f32; layout.n_floats], Vec::with_capacity(n_blocks)) } else { Default::default() };
        Ok(GgufFill {
            floats,
            blocks,
            layout,
            order,
            next: 0,
            taken: 0,
            float_at: 0,
            carry: Vec::new(),
            reached: 0,
            positions,
            block_bytes: n_blocks,
        })
    }

    /// The positions a session may use: the model's context, or fewer when that is all the
    /// budget holds ([`Budget::fit`]).
    pub fn positions(&self) -> usize {
        self.positions
    }

    /// Takes both buffers whole, filled from a snapshot of the weights this plan filled before
    /// ([`crate::checkpoint::snapshot`]) rather than from the file's tensors, for a plan made
    /// without allocating; `finish` then takes them as they are. Refuses buffers of other sizes.
    pub fn install(&mut self, floats: Vec<f32>, blocks: Vec<u8>) -> Result<()> {
        let planned = (self.layout.n_floats, self.block_bytes);
        if (floats.len(), blocks.len()) != planned {
            return Err(Error::Snapshot(format!(
                "it holds {} f32 values and {} bytes of blocks; its header plans {} and {}",
                floats.len(),
                blocks.len(),
                planned.0,
                planned.1
            )));
        }
        (self.floats, self.blocks, self.next) = (floats, blocks, self.order.len());
        Ok(())
    }

    /// Takes the file's bytes from `offset` on. Pieces must come in file order; bytes between
    /// the model's tensors (padding, tensors it does not use) are skipped.
    pub fn feed(&mut self, offset: usize, piece: &[u8]) -> Result<()> {
        if offset < self.reached {
            return Err(Error::Gguf(format!("bytes at {offset} came after those up to {}", self.reached)));
        }
        let end = offset.checked_add(piece.len()).ok_or_else(|| overflow("the file offset"))?;
        while let Some(t) = self.order.get(self.next) {
            let range = t.range.clone();
            let (from, to) = (range.start.max(offset), range.end.min(end));
            if from > to || (from == to && to < t.range.end) {
                break;
            }
            if from != t.range.start + self.taken {
                return Err(Error::Gguf(format!("bytes of tensor `{}` are missing before offset {from}", t.name)));
            }
            let bytes = piece.get(from - offset..to - offset).unwrap_or_default();
            self.taken += bytes.len();
            self.take(bytes);
            if to < range.end {
                break;
            }
            (self.next, self.taken, self.float_at) = (self.next + 1, 0, 0);
        }
        self.reached = end;
        Ok(())
    }

    /// The current tensor's next bytes: whole blocks are placed at once, a split block waits in
    /// `carry` for the rest of it.
    fn take(&mut self, mut bytes: &[u8]) {
        let Some(t) = self.order.get(self.next) else { return };
        let block = t.ty.block_bytes();
        if !self.carry.is_empty() {
            let n = (block - self.carry.len()).min(bytes.len());
            self.carry.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.carry.len() < block {
                return;
            }
            let whole = std::mem::take(&mut self.carry);
            self.place(&whole);
        }
        let whole = bytes.len() - bytes.len() % block;
        self.place(&bytes[..whole]);
        self.carry.extend_from_slice(&bytes[whole..]);
    }

    /// Whole blocks of the current tensor, into its buffer.
    fn place(&mut self, blocks: &[u8]) {
        let Some(t) = self.order.get(self.next) else { return };
        match t.target {
            Some(Rows::Packed { .. }) => packed::pack(t.ty, blocks, &mut self.blocks),
            Some(_) => self.blocks.extend_from_slice(blocks),
            None => {
                let start = t.float_offset + self.float_at;
                let n = blocks.len() / t.ty.block_bytes() * t.ty.block_len();
                dequantize_row(t.ty, blocks, &mut self.floats[start..start + n]);
                self.float_at += n;
            }
        }
    }

    /// The weights, once every planned tensor has all its bytes.
    pub fn finish(self) -> Result<Weights> {
        if let Some(t) = self.order.get(self.next) {
            return Err(Error::Gguf(format!(
                "the file ended before tensor `{}` (bytes {}..{}) was complete (truncated?)",
                t.name, t.range.start, t.range.end
            )));
        }
        Ok(self.layout.into_weights(self.floats, self.blocks))
    }
}

/// The positions a session of `config` may use beside `weight_bytes` of weights (see
/// [`Budget::fit`]).
fn fit_context(config: &Config, weight_bytes: Option<u64>, budget: &Budget) -> Result<usize> {
    let weights = weight_bytes.ok_or_else(|| overflow("the weights"))?;
    budget.fit(config.n_ctx, |positions| {
        let (kv_cache, scratch) =
            super::forward::session_bytes(config, positions).ok_or_else(|| overflow("a session's memory"))?;
        Ok(Need { weights, kv_cache, scratch, n_ctx: positions })
    })
}

/// `[in, out]` (Conv1D) → `[out, in]` (one row per output).
fn conv1d_to_rows(stored: &[f32], n_in: usize, n_out: usize, rows: &mut [f32]) {
    for i in 0..n_in {
        for o in 0..n_out {
            rows[o * n_in + i] = stored[i * n_out + o];
        }
    }
}

/// How a checkpoint format names the tensors [`Layout`] asks for.
enum Naming {
    HfGpt2 {
        prefix: &'static str,
    },
    /// LLaMA and Qwen2.
    HfLlama,
    HfGemma3,
    /// BERT (`BertModel`), optionally under a prefix (`bert.` in a `BertFor…` checkpoint).
    HfBert {
        prefix: &'static str,
    },
}

impl Naming {
    /// The checkpoint's name for a role name such as `blk.3.attn_q.weight`.
    fn name(&self, role: &str) -> String {
        let (layer, rest) = match role.strip_prefix("blk.").and_then(|r| r.split_once('.')) {
            Some((l, rest)) => (Some(l), rest),
            None => (None, role),
        };
        let (tensor, suffix) = rest.rsplit_once('.').unwrap_or((rest, ""));
        match self {
            Naming::HfGpt2 { prefix } => {
                let name = match tensor {
                    "token_embd" => "wte",
                    "position_embd" => "wpe",
                    "output_norm" => "ln_f",
                    "output" => return format!("lm_head.{suffix}"),
                    "attn_norm" => "ln_1",
                    "attn_qkv" => "attn.c_attn",
                    "attn_output" => "attn.c_proj",
                    "ffn_norm" => "ln_2",
                    "ffn_up" => "mlp.c_fc",
                    "ffn_down" => "mlp.c_proj",
                    other => other,
                };
                match layer {
                    Some(l) => format!("{prefix}h.{l}.{name}.{suffix}"),
                    None => format!("{prefix}{name}.{suffix}"),
                }
            }
            Naming::HfBert { prefix } => {
                let name = match tensor {
                    "token_embd" => return format!("{prefix}embeddings.word_embeddings.{suffix}"),
                    "position_embd" => return format!("{prefix}embeddings.position_embeddings.{suffix}"),
                    "token_types" => return format!("{prefix}embeddings.token_type_embeddings.{suffix}"),
                    "token_embd_norm" => return format!("{prefix}embeddings.LayerNorm.{suffix}"),
                    "attn_q" => "attention.self.query",
                    "attn_k" => "attention.self.key",
                    "attn_v" => "attention.self.value",
                    "attn_output" => "attention.output.dense",
                    // Post-LN: the norm after attention is `ln1`, the one after the MLP `ln2`.
                    "attn_norm" => "attention.output.LayerNorm",
                    "ffn_up" => "intermediate.dense",
                    "ffn_down" => "output.dense",
                    "ffn_norm" => "output.LayerNorm",
                    other => other,
                };
                match layer {
                    Some(l) => format!("{prefix}encoder.layer.{l}.{name}.{suffix}"),
                    None => format!("{prefix}{name}.{suffix}"),
                }
            }
            Naming::HfLlama | Naming::HfGemma3 => {
                let gemma = matches!(self, Naming::HfGemma3);
                let name = match tensor {
                    "token_embd" => "embed_tokens",
                    "output_norm" => "norm",
                    "output" => return format!("lm_head.{suffix}"),
                    "attn_norm" => "input_layernorm",
                    "attn_q" => "self_attn.q_proj",
                    "attn_k" => "self_attn.k_proj",
                    "attn_v" => "self_attn.v_proj",
                    "attn_q_norm" => "self_attn.q_norm",
                    "attn_k_norm" => "self_attn.k_norm",
                    "attn_output" => "self_attn.o_proj",
                    // LLaMA's norm before the MLP is named for following attention; Gemma has a
                    // norm at each place and names them for where they are.
                    "ffn_norm" if gemma => "pre_feedforward_layernorm",
                    "ffn_norm" => "post_attention_layernorm",
                    "post_attention_norm" => "post_attention_layernorm",
                    "post_ffw_norm" => "post_feedforward_layernorm",
                    "ffn_gate" => "mlp.gate_proj",
                    "ffn_up" => "mlp.up_proj",
                    "ffn_down" => "mlp.down_proj",
                    other => other,
                };
                match layer {
                    Some(l) => format!("model.layers.{l}.{name}.{suffix}"),
                    None => format!("model.{name}.{suffix}"),
                }
            }
        }
    }

    /// GPT-2's linear layers are Conv1D modules (weights `[in, out]`); its embeddings are not.
    fn is_conv1d(&self, role: &str) -> bool {
        matches!(self, Naming::HfGpt2 { .. })
            && role.ends_with(".weight")
            && ["attn_qkv", "attn_output", "ffn_up", "ffn_down"].iter().any(|t| role.contains(t))
    }

    fn stored_shape(&self, t: &PlannedTensor) -> Vec<usize> {
        if self.is_conv1d(&t.name) {
            vec![t.shape[1], t.shape[0]]
        } else {
            t.shape.clone()
        }
    }
}

/// Where each tensor goes, decided from the config before any data is read.
struct Layout {
    tensors: Vec<PlannedTensor>,
    n_floats: usize,
    arch: Arch,
    n_layer: usize,
    explicit_head: bool,
}

struct PlannedTensor {
    /// Role name, llama.cpp style.
    name: String,
    /// `[rows, cols]` for matrices, `[len]` for vectors.
    shape: Vec<usize>,
    float_offset: usize,
    /// Where the matrix lives in the block buffer ([`Rows::Packed`] or [`Rows::Blocks`]), for
    /// matrices not decoded to f32.
    block: Option<Rows>,
}

impl PlannedTensor {
    fn len(&self) -> usize {
        self.shape.iter().product()
    }
}

impl Layout {
    /// Plans every tensor of `c`. The config's sizes are capped (`Config::check_limits`) before
    /// this runs, so the plan is at most a few thousand entries; every size is still computed
    /// with checked arithmetic, since a wasm32 `usize` overflows at 4 G.
    fn new(c: &Config, explicit_head: bool) -> Result<Layout> {
        let (d, f, v) = (c.d_model, c.d_ff, c.vocab_size);
        let (fused_qkv, biased) = (c.arch == Arch::Gpt2, c.arch.biased());
        let (qkv_bias, gemma) = (c.arch.qkv_bias(), c.arch.gemma_norms());
        let explicit_head = explicit_head && c.has_head();
        let mut layout = Layout { tensors: Vec::new(), n_floats: 0, arch: c.arch, n_layer: c.n_layer, explicit_head };
        layout.push("token_embd.weight".into(), vec![v, d])?;
        if c.variant.positions == Positions::Learned {
            layout.push("position_embd.weight".into(), vec![c.n_ctx, d])?;
        }
        if c.arch == Arch::Bert {
            layout.push("token_types.weight".into(), vec![c.token_types, d])?;
            layout.push("token_embd_norm.weight".into(), vec![d])?;
            layout.push("token_embd_norm.bias".into(), vec![d])?;
        }
        let qkv = d.checked_mul(3).ok_or_else(|| overflow("attn_qkv"))?;
        for l in 0..c.n_layer {
            let with_bias = |layout: &mut Layout, name: &str, rows: usize, cols: usize, bias: bool| -> Result<()> {
                layout.push(format!("blk.{l}.{name}.weight"), vec![rows, cols])?;
                if bias {
                    layout.push(format!("blk.{l}.{name}.bias"), vec![rows])?;
                }
                Ok(())
            };
            let linear =
                |layout: &mut Layout, name: &str, rows: usize, cols: usize| with_bias(layout, name, rows, cols, biased);
            let norm = |layout: &mut Layout, name: &str, width: usize| linear(layout, name, width, 0);
            norm(&mut layout, "attn_norm", d)?;
            if fused_qkv {
                linear(&mut layout, "attn_qkv", qkv, d)?;
            } else {
                with_bias(&mut layout, "attn_q", c.q_dim(), d, qkv_bias)?;
                with_bias(&mut layout, "attn_k", c.kv_dim(), d, qkv_bias)?;
                with_bias(&mut layout, "attn_v", c.kv_dim(), d, qkv_bias)?;
            }
            if gemma {
                norm(&mut layout, "attn_q_norm", c.head_dim())?;
                norm(&mut layout, "attn_k_norm", c.head_dim())?;
            }
            linear(&mut layout, "attn_output", d, c.q_dim())?;
            if gemma {
                norm(&mut layout, "post_attention_norm", d)?;
            }
            norm(&mut layout, "ffn_norm", d)?;
            if c.variant.mlp.gated() {
                linear(&mut layout, "ffn_gate", f, d)?;
            }
            linear(&mut layout, "ffn_up", f, d)?;
            linear(&mut layout, "ffn_down", d, f)?;
            if gemma {
                norm(&mut layout, "post_ffw_norm", d)?;
            }
        }
        if c.has_final_norm() {
            layout.push("output_norm.weight".into(), vec![d])?;
            if c.arch.norm_has_mean() {
                layout.push("output_norm.bias".into(), vec![d])?;
            }
        }
        if explicit_head {
            layout.push("output.weight".into(), vec![v, d])?;
        }
        Ok(layout)
    }

    /// Adds a tensor; a zero width marks a vector (norm weights share [`Layout::new`]'s helper).
    fn push(&mut self, name: String, shape: Vec<usize>) -> Result<()> {
        let shape = if shape.get(1) == Some(&0) { vec![shape[0]] } else { shape };
        // Checked here once, so that `PlannedTensor::len` and every offset below cannot overflow.
        let len = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).ok_or_else(|| overflow(&name))?;
        let end = self.n_floats.checked_add(len).ok_or_else(|| overflow("the weights"))?;
        self.tensors.push(PlannedTensor { name, shape, float_offset: self.n_floats, block: None });
        self.n_floats = end;
        Ok(())
    }

    /// Re-packs the float buffer once some matrices have moved to the block buffer.
    fn compact_floats(&mut self) {
        self.n_floats = 0;
        for t in &mut self.tensors {
            t.float_offset = self.n_floats;
            if t.block.is_none() {
                self.n_floats += t.len();
            }
        }
    }

    fn find(&self, name: &str) -> Option<&PlannedTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The view of a planned vector. Only names [`Layout::new`] planned are asked for.
    fn view(&self, name: &str) -> View {
        self.find(name).map_or(View { offset: 0, len: 0 }, |t| View { offset: t.float_offset, len: t.len() })
    }

    fn matrix(&self, name: &str) -> Matrix {
        let Some(t) = self.find(name) else { return Matrix { rows: 0, cols: 0, data: Rows::F32(self.view(name)) } };
        let data = t.block.unwrap_or_else(|| Rows::F32(self.view(name)));
        Matrix { rows: t.shape[0], cols: t.shape.get(1).copied().unwrap_or(1), data }
    }

    fn optional_view(&self, name: &str) -> Option<View> {
        self.find(name).map(|_| self.view(name))
    }

    fn linear(&self, name: &str) -> Linear {
        Linear { weight: self.matrix(&format!("{name}.weight")), bias: self.optional_view(&format!("{name}.bias")) }
    }

    fn norm(&self, name: &str) -> Norm {
        Norm { weight: self.view(&format!("{name}.weight")), bias: self.optional_view(&format!("{name}.bias")) }
    }

    fn optional_norm(&self, name: &str) -> Option<Norm> {
        self.find(&format!("{name}.weight")).map(|_| self.norm(name))
    }

    fn into_weights(self, floats: Vec<f32>, blocks: Vec<u8>) -> Weights {
        let layers = (0..self.n_layer)
            .map(|l| {
                let qkv: &[&str] =
                    if self.arch == Arch::Gpt2 { &["attn_qkv"] } else { &["attn_q", "attn_k", "attn_v"] };
                LayerWeights {
                    attn_norm: self.norm(&format!("blk.{l}.attn_norm")),
                    attn_qkv: qkv.iter().map(|n| self.linear(&format!("blk.{l}.{n}"))).collect(),
                    attn_output: self.linear(&format!("blk.{l}.attn_output")),
                    ffn_norm: self.norm(&format!("blk.{l}.ffn_norm")),
                    ffn_up: self.linear(&format!("blk.{l}.ffn_up")),
                    ffn_gate: self
                        .find(&format!("blk.{l}.ffn_gate.weight"))
                        .map(|_| self.linear(&format!("blk.{l}.ffn_gate"))),
                    ffn_down: self.linear(&format!("blk.{l}.ffn_down")),
                    attn_q_norm: self.optional_norm(&format!("blk.{l}.attn_q_norm")),
                    attn_k_norm: self.optional_norm(&format!("blk.{l}.attn_k_norm")),
                    attn_post_norm: self.optional_norm(&format!("blk.{l}.post_attention_norm")),
                    ffn_post_norm: self.optional_norm(&format!("blk.{l}.post_ffw_norm")),
                }
            })
            .collect();
        let token_embd = self.matrix("token_embd.weight");
        let optional_matrix = |name: &str| self.find(name).map(|_| self.matrix(name));
        Weights {
            position_embd: optional_matrix("position_embd.weight"),
            token_type_embd: optional_matrix("token_types.weight"),
            embd_norm: self.optional_norm("token_embd_norm"),
            layers,
            output_norm: self.optional_norm("output_norm"),
            output: match self.arch {
                Arch::Bert => None,
                _ if self.explicit_head => Some(self.matrix("output.weight")),
                _ => Some(token_embd),
            },
            token_embd,
            floats,
            blocks,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Conv1D stores `[in=2, out=3]`:
    /// ```text
    /// 1 2 3        rows ([out=3, in=2]):  1 4
    /// 4 5 6                               2 5
    ///                                     3 6
    /// ```
    #[test]
    fn conv1d_becomes_one_row_per_output() {
        let mut rows = [0.0; 6];
        conv1d_to_rows(&[1., 2., 3., 4., 5., 6.], 2, 3, &mut rows);
        assert_eq!(rows, [1., 4., 2., 5., 3., 6.]);
    }

    #[test]
    fn role_names_map_to_each_checkpoint() {
        let gpt2 = Naming::HfGpt2 { prefix: "transformer." };
        assert_eq!(gpt2.name("blk.3.attn_qkv.bias"), "transformer.h.3.attn.c_attn.bias");
        assert_eq!(gpt2.name("output_norm.weight"), "transformer.ln_f.weight");
        assert_eq!(gpt2.name("output.weight"), "lm_head.weight");
        assert!(gpt2.is_conv1d("blk.0.ffn_down.weight") && !gpt2.is_conv1d("blk.0.ffn_down.bias"));
        assert_eq!(Naming::HfLlama.name("blk.11.ffn_gate.weight"), "model.layers.11.mlp.gate_proj.weight");
        assert_eq!(Naming::HfLlama.name("token_embd.weight"), "model.embed_tokens.weight");
        let bert = Naming::HfBert { prefix: "" };
        assert_eq!(bert.name("blk.5.attn_k.bias"), "encoder.layer.5.attention.self.key.bias");
        assert_eq!(bert.name("blk.0.ffn_norm.weight"), "encoder.layer.0.output.LayerNorm.weight");
        assert_eq!(bert.name("token_embd_norm.bias"), "embeddings.LayerNorm.bias");
    }
}
