//! Reading tokenizer files: HF's tokenizer.json, or GPT-2's vocab.json + merges.txt.
//!
//! Every setting that changes which ids a text gets is either honoured or refused with an
//! error naming it; a tokenizer that silently disagreed with the model's would make every
//! downstream trace wrong without anyone noticing.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use super::added_tokens::AddedToken;
use super::bpe::{BpeConfig, BpeTokenizer};
use super::pretokenize::SplitPattern;
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

pub(super) fn from_tokenizer_json(bytes: &[u8]) -> Result<BpeTokenizer> {
    let file: TokenizerJson =
        serde_json::from_slice(bytes).map_err(|e| Error::Tokenizer(format!("tokenizer.json is not valid: {e}")))?;

    if let Some(normalizer) = stages(file.normalizer.as_ref(), "normalizers")?.first() {
        return Err(Error::Tokenizer(format!(
            "the normalizer `{}` is not supported (gptlens implements byte-level BPE without normalization)",
            type_name(normalizer)
        )));
    }
    let pre = pre_tokenizer(file.pre_tokenizer.as_ref())?;
    // A ByteLevel post-processor only adjusts offsets; anything else (TemplateProcessing, ...)
    // would add ids around the text.
    if let Some(other) =
        stages(file.post_processor.as_ref(), "processors")?.into_iter().find(|stage| type_name(stage) != "ByteLevel")
    {
        return Err(Error::Tokenizer(format!(
            "the post-processor `{}` is not supported (it adds tokens around the text)",
            type_name(other)
        )));
    }
    // The decoder is not read: gptlens always decodes tokens back to their bytes, which is what
    // the ByteLevel decoder does, and the only pre-tokenizer accepted above is ByteLevel.

    let model = bpe_model(file.model)?;
    let merges = model.merges.into_iter().filter_map(merge_pair).collect::<Result<Vec<_>>>()?;
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
    BpeTokenizer::new(BpeConfig {
        vocab: model.vocab,
        merges,
        added_tokens,
        add_prefix_space: pre.add_prefix_space,
        split: pre.split,
        split_digits: false,
        unknown_token: model.unk_token,
        fuse_unknown: model.fuse_unk.unwrap_or(false),
        whole_words_first: model.ignore_merges.unwrap_or(false),
    })
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

/// What the pre-tokenizer does: GPT-2's `ByteLevel` (its regex inside), or LLaMA 3's / Qwen2's
/// `Sequence[Split(regex, isolated), ByteLevel(use_regex = false)]`.
struct PreTokenizer {
    split: Option<SplitPattern>,
    add_prefix_space: bool,
}

fn pre_tokenizer(pre_tokenizer: Option<&Value>) -> Result<PreTokenizer> {
    let unsupported = |what: String| {
        Err(Error::Tokenizer(format!(
            "the pre-tokenizer {what} is not supported (gptlens implements GPT-2's ByteLevel, and LLaMA 3's and \
             Qwen2's Split + ByteLevel)"
        )))
    };
    let stages = stages(pre_tokenizer, "pretokenizers")?;
    let (split, byte_level) = match stages.as_slice() {
        [byte_level] => (None, byte_level),
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
            add_prefix_space: byte_level.add_prefix_space,
        }),
        (Some(pattern), false) => {
            Ok(PreTokenizer { split: Some(pattern), add_prefix_space: byte_level.add_prefix_space })
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
    let model = BpeModelJson::deserialize(model).map_err(|e| Error::Tokenizer(format!("bad BPE model: {e}")))?;
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
    if model.byte_fallback == Some(true) {
        return Err(Error::Tokenizer(
            "the BPE option byte_fallback is not supported (it is not byte-level BPE)".into(),
        ));
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
