//! Reading tokenizer files: HF's tokenizer.json, or GPT-2's vocab.json + merges.txt.
//!
//! A tokenizer.json is one of two kinds: byte-level BPE (GPT-2, SmolLM2, LLaMA 3, Qwen2: a
//! `ByteLevel` pre-tokenizer, maybe after a `Split` or `Digits`), or SentencePiece-style BPE with
//! byte fallback (LLaMA 1/2, TinyLlama, Gemma: spaces become `▁` by a `Replace` normalizer or a
//! `Metaspace` pre-tokenizer). A `TemplateProcessing` post-processor that puts special tokens
//! before and after the text (LLaMA's BOS) is honoured for both.
//!
//! Every setting that changes which ids a text gets is either honoured or refused with an
//! error naming it; a tokenizer that silently disagreed with the model's would make every
//! downstream trace wrong without anyone noticing.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use super::added_tokens::AddedToken;
use super::bpe::{BpeConfig, BpeTokenizer, MAX_VOCAB_SIZE};
use super::pretokenize::SplitPattern;
use super::sentencepiece::{PrependSpace, Ranking, Spm, SpmParts};
use super::{SpecialTokens, Tokenizer};
use crate::error::{Error, Result};

/// GPT-2's end-of-text marker. vocab.json + merges.txt carry no list of special tokens, but
/// every GPT-2-family tokenizer (`transformers`' `GPT2Tokenizer`) treats this one as special.
const END_OF_TEXT: &str = "<|endoftext|>";

#[derive(Deserialize)]
struct TokenizerJson {
    #[serde(default)]
    added_tokens: Vec<AddedTokenJson>,
    #[serde(default)]
    normalizer: Option<Value>,
    #[serde(default)]
    pre_tokenizer: Option<Value>,
    #[serde(default)]
    post_processor: Option<Value>,
    model: Value,
}

/// An `added_tokens` entry. Its `id` is not read: HF assigns ids itself (see `AddedTokens::new`).
#[derive(Deserialize)]
struct AddedTokenJson {
    content: String,
    #[serde(default)]
    single_word: bool,
    #[serde(default)]
    lstrip: bool,
    #[serde(default)]
    rstrip: bool,
    #[serde(default = "default_true")]
    normalized: bool,
}

#[derive(Deserialize)]
struct BpeModelJson {
    vocab: HashMap<String, u32>,
    merges: Vec<MergeJson>,
    #[serde(default)]
    dropout: Option<f64>,
    #[serde(default)]
    unk_token: Option<String>,
    #[serde(default)]
    continuing_subword_prefix: Option<String>,
    #[serde(default)]
    end_of_word_suffix: Option<String>,
    #[serde(default)]
    fuse_unk: Option<bool>,
    #[serde(default)]
    byte_fallback: Option<bool>,
    #[serde(default)]
    ignore_merges: Option<bool>,
}

/// tokenizers ≥ 0.20 writes merges as pairs; older files as `"left right"` lines.
#[derive(Deserialize)]
#[serde(untagged)]
enum MergeJson {
    Pair(String, String),
    Line(String),
}

#[derive(Deserialize)]
struct ByteLevelJson {
    #[serde(default = "default_true")]
    add_prefix_space: bool,
    #[serde(default = "default_true")]
    use_regex: bool,
}

fn default_true() -> bool {
    true
}

pub(super) fn from_tokenizer_json(bytes: &[u8]) -> Result<Tokenizer> {
    let file: TokenizerJson =
        serde_json::from_slice(bytes).map_err(|e| Error::Tokenizer(format!("tokenizer.json is not valid: {e}")))?;
    let model = bpe_model(file.model)?;
    let added_tokens = file
        .added_tokens
        .into_iter()
        .map(|token| AddedToken {
            content: token.content,
            single_word: token.single_word,
            lstrip: token.lstrip,
            rstrip: token.rstrip,
            normalized: token.normalized,
        })
        .collect();
    let parts = Parts {
        normalizer: file.normalizer,
        pre_tokenizer: file.pre_tokenizer,
        post_processor: file.post_processor,
        added_tokens,
    };
    if model.byte_fallback == Some(true) {
        return sentencepiece(parts, model).map(Tokenizer::SentencePiece);
    }
    byte_level(parts, model).map(Tokenizer::Bpe)
}

/// What a tokenizer.json gives besides its model.
struct Parts {
    normalizer: Option<Value>,
    pre_tokenizer: Option<Value>,
    post_processor: Option<Value>,
    added_tokens: Vec<AddedToken>,
}

fn byte_level(file: Parts, model: BpeModelJson) -> Result<BpeTokenizer> {
    if let Some(normalizer) = stages(file.normalizer.as_ref(), "normalizers")?.first() {
        return Err(Error::Tokenizer(format!(
            "the normalizer `{}` is not supported (gptlens implements byte-level BPE without normalization)",
            type_name(normalizer)
        )));
    }
    let pre = pre_tokenizer(file.pre_tokenizer.as_ref())?;
    // The decoder is not read: gptlens always decodes tokens back to their bytes, which is what
    // the ByteLevel decoder does, and the only pre-tokenizer accepted above is ByteLevel.
    let merges = model.merges.into_iter().filter_map(merge_pair).collect::<Result<Vec<_>>>()?;
    let mut bpe = BpeTokenizer::new(BpeConfig {
        vocab: model.vocab,
        merges,
        added_tokens: file.added_tokens,
        add_prefix_space: pre.add_prefix_space,
        split: pre.split,
        split_digits: pre.split_digits,
        unknown_token: model.unk_token,
        fuse_unknown: model.fuse_unk.unwrap_or(false),
        whole_words_first: model.ignore_merges.unwrap_or(false),
    })?;
    let (prepend, append) = framing(file.post_processor.as_ref())?;
    check_framing(prepend.into_iter().chain(append), bpe.vocab_size())?;
    bpe.set_extras(SpecialTokens { bos: prepend, eos: append, ..SpecialTokens::default() }, prepend, append, None);
    Ok(bpe)
}

/// SentencePiece-style BPE: spaces become `▁` (a `Replace` normalizer, or `Metaspace`), a `▁` may
/// go in front (`Prepend`, or Metaspace's prepend scheme), characters outside the vocabulary fall
/// back to their `<0xXX>` byte tokens, and merges apply in the order listed.
fn sentencepiece(file: Parts, model: BpeModelJson) -> Result<Spm> {
    let unsupported =
        |what: String| Error::Tokenizer(format!("{what} is not supported in a SentencePiece-style tokenizer.json"));
    let (mut replaces_spaces, mut prepend_space, mut split_words) = (false, PrependSpace::Never, false);
    for stage in stages(file.normalizer.as_ref(), "normalizers")? {
        let text = |key: &str| stage.get(key).and_then(Value::as_str);
        match type_name(stage) {
            "Replace"
                if stage.get("pattern").and_then(|p| p.get("String")).and_then(Value::as_str) == Some(" ")
                    && text("content") == Some("\u{2581}") =>
            {
                replaces_spaces = true
            }
            "Prepend" if text("prepend") == Some("\u{2581}") => prepend_space = PrependSpace::Every,
            other => return Err(unsupported(format!("the normalizer `{other}` ({stage})"))),
        }
    }
    match stages(file.pre_tokenizer.as_ref(), "pretokenizers")?.as_slice() {
        [] => {}
        // Gemma's: splitting on spaces after the normalizer has made every space a `▁` finds none.
        [split]
            if type_name(split) == "Split"
                && split.get("pattern").and_then(|p| p.get("String")).and_then(Value::as_str) == Some(" ")
                && replaces_spaces => {}
        [metaspace] if type_name(metaspace) == "Metaspace" && prepend_space == PrependSpace::Never => {
            if metaspace.get("replacement").and_then(Value::as_str) != Some("\u{2581}") {
                return Err(unsupported(format!("Metaspace with another replacement ({metaspace})")));
            }
            replaces_spaces = true;
            split_words = metaspace.get("split").and_then(Value::as_bool).unwrap_or(true);
            // tokenizers < 0.19 wrote `add_prefix_space` instead of a scheme.
            let legacy =
                metaspace
                    .get("add_prefix_space")
                    .and_then(Value::as_bool)
                    .map(|add| if add { "always" } else { "never" });
            prepend_space = match metaspace.get("prepend_scheme").and_then(Value::as_str).or(legacy).unwrap_or("always")
            {
                "first" => PrependSpace::First,
                "always" => PrependSpace::Always,
                "never" => PrependSpace::Never,
                other => return Err(unsupported(format!("Metaspace's prepend scheme `{other}`"))),
            };
        }
        stages => {
            let names: Vec<&str> = stages.iter().map(|stage| type_name(stage)).collect();
            return Err(unsupported(format!("the pre-tokenizer `{}`", names.join(" + "))));
        }
    }
    if !replaces_spaces {
        return Err(unsupported(
            "a byte-fallback BPE that keeps spaces as they are (no `▁` Replace or Metaspace)".into(),
        ));
    }
    let largest = model.vocab.values().copied().max().unwrap_or(0) as usize;
    if largest >= MAX_VOCAB_SIZE || largest + 1 != model.vocab.len() {
        return Err(Error::Tokenizer(format!(
            "the vocabulary's {} tokens must have the ids 0..{} (the largest is {largest})",
            model.vocab.len(),
            model.vocab.len()
        )));
    }
    let mut pieces: Vec<Box<str>> = vec!["".into(); model.vocab.len()];
    for (token, &id) in &model.vocab {
        pieces[id as usize] = token.as_str().into();
    }
    let id_of = |token: &str| {
        model
            .vocab
            .get(token)
            .copied()
            .ok_or_else(|| Error::Tokenizer(format!("the merge token `{token}` is not in the vocabulary")))
    };
    let mut ranks = HashMap::with_capacity(model.merges.len());
    for (rank, merge) in (0u32..).zip(model.merges.into_iter().filter_map(merge_pair)) {
        let (left, right) = merge?;
        ranks.entry((id_of(&left)?, id_of(&right)?)).or_insert(rank);
    }
    let byte_tokens = model
        .vocab
        .iter()
        .filter(|(token, _)| token.len() == 6 && token.starts_with("<0x"))
        .map(|(_, &id)| id)
        .collect();
    let unknown = match &model.unk_token {
        None => None,
        Some(token) => Some(
            id_of(token)
                .map_err(|_| Error::Tokenizer(format!("the unknown token `{token}` is not in the vocabulary")))?,
        ),
    };
    let (prepend, append) = framing(file.post_processor.as_ref())?;
    let spm = Spm::from_parts(SpmParts {
        pieces,
        byte_tokens,
        ranking: Ranking::Listed(ranks),
        added: file.added_tokens,
        unknown,
        fuse_unknown: model.fuse_unk.unwrap_or(false),
        prepend_space,
        split_words,
        whole_words_first: model.ignore_merges.unwrap_or(false),
        special: SpecialTokens { bos: prepend, eos: append, unk: unknown, pad: None },
        prepend,
        append,
    })?;
    check_framing(prepend.into_iter().chain(append), spm.vocab_size())?;
    Ok(spm)
}

/// The special tokens a `TemplateProcessing` post-processor puts before and after a single
/// text (LLaMA's `<s>`, Gemma's `<bos>`), by the ids it lists; a ByteLevel post-processor only
/// adjusts offsets. Anything else would change the ids in ways gptlens does not follow.
fn framing(post_processor: Option<&Value>) -> Result<(Option<u32>, Option<u32>)> {
    let mut framing = (None, None);
    for stage in stages(post_processor, "processors")? {
        match type_name(stage) {
            "ByteLevel" => {}
            "TemplateProcessing" => framing = template(stage)?,
            other => {
                return Err(Error::Tokenizer(format!(
                    "the post-processor `{other}` is not supported (it adds tokens around the text)"
                )))
            }
        }
    }
    Ok(framing)
}

fn template(stage: &Value) -> Result<(Option<u32>, Option<u32>)> {
    let unsupported = |why: &str| {
        Error::Tokenizer(format!("the TemplateProcessing post-processor is not supported: {why} ({stage})"))
    };
    let single = stage.get("single").and_then(Value::as_array).ok_or_else(|| unsupported("no `single` template"))?;
    let (mut before, mut after, mut text_seen) = (Vec::new(), Vec::new(), false);
    for item in single {
        if item.get("Sequence").is_some() {
            text_seen = true;
            continue;
        }
        let name = item
            .get("SpecialToken")
            .and_then(|t| t.get("id"))
            .and_then(Value::as_str)
            .ok_or_else(|| unsupported("an item is neither the text nor a special token"))?;
        let ids = stage
            .get("special_tokens")
            .and_then(|t| t.get(name))
            .and_then(|t| t.get("ids"))
            .and_then(Value::as_array)
            .ok_or_else(|| unsupported("a special token without its ids"))?;
        let side = if text_seen { &mut after } else { &mut before };
        for id in ids {
            side.push(
                id.as_u64().and_then(|id| u32::try_from(id).ok()).ok_or_else(|| unsupported("an id is not a u32"))?,
            );
        }
    }
    match (before.as_slice(), after.as_slice()) {
        ([] | [_], [] | [_]) if text_seen => Ok((before.first().copied(), after.first().copied())),
        _ => Err(unsupported("only one token before and one after the text are")),
    }
}

/// The framing ids must be tokens of the tokenizer.
fn check_framing(ids: impl Iterator<Item = u32>, vocab_size: usize) -> Result<()> {
    for id in ids {
        if id as usize >= vocab_size {
            return Err(Error::Tokenizer(format!(
                "the post-processor adds token {id}, outside the {vocab_size} tokens"
            )));
        }
    }
    Ok(())
}

pub(super) fn from_vocab_merges(vocab_json: &[u8], merges_txt: &[u8]) -> Result<BpeTokenizer> {
    let vocab: HashMap<String, u32> = serde_json::from_slice(vocab_json)
        .map_err(|e| Error::Tokenizer(format!("vocab.json is not a JSON object mapping tokens to ids: {e}")))?;
    let merges_txt =
        std::str::from_utf8(merges_txt).map_err(|e| Error::Tokenizer(format!("merges.txt is not UTF-8: {e}")))?;
    // Blank lines are skipped (HF would reject them); they carry no merge either way.
    let merges = merges_txt
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| MergeJson::Line(line.to_string()))
        .filter_map(merge_pair)
        .collect::<Result<Vec<_>>>()?;
    let added_tokens = if vocab.contains_key(END_OF_TEXT) {
        vec![AddedToken { content: END_OF_TEXT.into(), ..AddedToken::default() }]
    } else {
        Vec::new()
    };
    BpeTokenizer::new(BpeConfig {
        vocab,
        merges,
        added_tokens,
        add_prefix_space: false,
        split: Some(SplitPattern::Gpt2),
        split_digits: false,
        unknown_token: None,
        fuse_unknown: false,
        whole_words_first: false,
    })
}

/// The stages of a pipeline step, with `Sequence`s flattened; none for `null`.
fn stages<'v>(step: Option<&'v Value>, list_key: &str) -> Result<Vec<&'v Value>> {
    let Some(step) = step.filter(|step| !step.is_null()) else {
        return Ok(Vec::new());
    };
    if type_name(step) != "Sequence" {
        return Ok(vec![step]);
    }
    let Some(list) = step.get(list_key).and_then(Value::as_array) else {
        return Err(Error::Tokenizer(format!("a `Sequence` step has no `{list_key}` list")));
    };
    let mut flattened = Vec::new();
    for stage in list {
        flattened.extend(stages(Some(stage), list_key)?);
    }
    Ok(flattened)
}

fn type_name(stage: &Value) -> &str {
    stage.get("type").and_then(Value::as_str).unwrap_or("(no type)")
}

/// What the pre-tokenizer does: GPT-2's `ByteLevel` (its regex inside), LLaMA 3's / Qwen2's
/// `Sequence[Split(regex, isolated), ByteLevel(use_regex = false)]`, or SmolLM2's
/// `Sequence[Digits(individual_digits), ByteLevel]`.
struct PreTokenizer {
    split: Option<SplitPattern>,
    split_digits: bool,
    add_prefix_space: bool,
}

fn pre_tokenizer(pre_tokenizer: Option<&Value>) -> Result<PreTokenizer> {
    let unsupported = |what: String| {
        Err(Error::Tokenizer(format!(
            "the pre-tokenizer {what} is not supported (gptlens implements GPT-2's ByteLevel, LLaMA 3's and \
             Qwen2's Split + ByteLevel, and SmolLM2's Digits + ByteLevel)"
        )))
    };
    let stages = stages(pre_tokenizer, "pretokenizers")?;
    let mut split_digits = false;
    let (split, byte_level) = match stages.as_slice() {
        [byte_level] => (None, byte_level),
        [digits, byte_level] if type_name(digits) == "Digits" => {
            if digits.get("individual_digits").and_then(Value::as_bool) != Some(true) {
                return unsupported("`Digits` that keeps runs of digits together".into());
            }
            split_digits = true;
            (None, byte_level)
        }
        [split, byte_level] if type_name(split) == "Split" => {
            let regex = split.get("pattern").and_then(|p| p.get("Regex")).and_then(Value::as_str).unwrap_or("");
            let isolated = split.get("behavior").and_then(Value::as_str) == Some("Isolated")
                && split.get("invert").and_then(Value::as_bool) != Some(true);
            match SplitPattern::from_tokenizer_json(regex).filter(|_| isolated) {
                Some(pattern) => (Some(pattern), byte_level),
                None => return unsupported(format!("`Split` on `{regex}`")),
            }
        }
        [] => {
            return Err(Error::Tokenizer(
                "tokenizer.json has no pre-tokenizer; gptlens needs GPT-2's ByteLevel pre-tokenizer".into(),
            ))
        }
        stages => {
            let names: Vec<&str> = stages.iter().map(|stage| type_name(stage)).collect();
            return unsupported(format!("`{}`", names.join(" + ")));
        }
    };
    if type_name(byte_level) != "ByteLevel" {
        return unsupported(format!("`{}`", type_name(byte_level)));
    }
    let byte_level = ByteLevelJson::deserialize(*byte_level)
        .map_err(|e| Error::Tokenizer(format!("bad ByteLevel pre-tokenizer: {e}")))?;
    match (split, byte_level.use_regex) {
        (None, use_regex) => Ok(PreTokenizer {
            split: use_regex.then_some(SplitPattern::Gpt2),
            split_digits,
            add_prefix_space: byte_level.add_prefix_space,
        }),
        (Some(pattern), false) => {
            Ok(PreTokenizer { split: Some(pattern), split_digits, add_prefix_space: byte_level.add_prefix_space })
        }
        (Some(_), true) => unsupported("`Split` followed by ByteLevel's own regex".into()),
    }
}

fn bpe_model(model: Value) -> Result<BpeModelJson> {
    match model.get("type").map(|kind| kind.as_str()) {
        None | Some(Some("BPE")) => {}
        Some(kind) => {
            return Err(Error::Tokenizer(format!(
                "the model type `{}` is not supported (gptlens reads BPE tokenizers)",
                kind.unwrap_or("(not a string)")
            )))
        }
    }
    let model = BpeModelJson::deserialize(model)
        .map_err(|e| Error::Tokenizer(format!("tokenizer.json's BPE model is not valid: {e}")))?;
    if let Some(dropout) = model.dropout.filter(|&dropout| dropout != 0.0) {
        return Err(Error::Tokenizer(format!("BPE dropout {dropout} makes encoding random; gptlens needs it off")));
    }
    let affixes = [
        ("continuing_subword_prefix", &model.continuing_subword_prefix),
        ("end_of_word_suffix", &model.end_of_word_suffix),
    ];
    for (name, affix) in affixes {
        if let Some(affix) = affix.as_deref().filter(|affix| !affix.is_empty()) {
            return Err(Error::Tokenizer(format!(
                "the BPE option {name} = `{affix}` is not supported (it is not byte-level BPE)"
            )));
        }
    }
    Ok(model)
}

/// A merge as `(left, right)`; `None` for the `#version` header line.
fn merge_pair(merge: MergeJson) -> Option<Result<(String, String)>> {
    match merge {
        MergeJson::Pair(left, right) => Some(Ok((left, right))),
        MergeJson::Line(line) if line.starts_with("#version") => None,
        MergeJson::Line(line) => Some(match line.split(' ').collect::<Vec<_>>().as_slice() {
            [left, right] => Ok((left.to_string(), right.to_string())),
            _ => Err(Error::Tokenizer(format!("the merge `{line}` is not two tokens separated by one space"))),
        }),
    }
}
