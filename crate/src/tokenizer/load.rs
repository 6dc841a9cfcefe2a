//! Reading tokenizer files: HF's tokenizer.json, or GPT-2's vocab.json + merges.txt.
//!
//! A tokenizer.json is one of three kinds: byte-level BPE (GPT-2, SmolLM2, LLaMA 3, Qwen2: a
//! `ByteLevel` pre-tokenizer, maybe after a `Split` or `Digits`), SentencePiece-style BPE with
//! byte fallback (LLaMA 1/2, TinyLlama, Gemma: spaces become `▁` by a `Replace` normalizer or a
//! `Metaspace` pre-tokenizer), or WordPiece (BERT and its sentence encoders: `BertNormalizer`,
//! `BertPreTokenizer`). A `TemplateProcessing` post-processor that puts special tokens before and
//! after the text (LLaMA's BOS, BERT's `[CLS]` … `[SEP]`) is honoured for all of them.
//!
//! Every setting that changes which ids a text gets is either honoured or refused with an
//! error naming it; a tokenizer that silently disagreed with the model's would make every
//! downstream trace wrong without anyone noticing.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use super::added_tokens::AddedToken;
use super::bpe::{BpeConfig, BpeTokenizer, Vocab, MAX_VOCAB_SIZE};
use super::pretokenize::SplitPattern;
use super::sentencepiece::{PrependSpace, Ranking, Spm, SpmParts};
use super::wordpiece::{BertNormalizer, WordPiece, WordPieceDecoder, WordPieceParts};
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
    #[serde(default)]
    decoder: Option<Value>,
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
    vocab: Vocab,
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
        decoder: file.decoder,
        added_tokens,
    };
    if file.model.get("type").and_then(Value::as_str) == Some("WordPiece") {
        return wordpiece(parts, file.model).map(Tokenizer::WordPiece);
    }
    let model = bpe_model(file.model)?;
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
    /// Read for WordPiece only: the byte-level and SentencePiece decoders give back the tokens'
    /// bytes, which is what gptlens does for BPE anyway.
    decoder: Option<Value>,
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

#[derive(Deserialize)]
struct WordPieceModelJson {
    vocab: Vocab,
    unk_token: String,
    continuing_subword_prefix: String,
    /// Checked by hand, so that the error can name it.
    max_input_chars_per_word: Value,
}

#[derive(Deserialize)]
struct BertNormalizerJson {
    clean_text: bool,
    handle_chinese_chars: bool,
    #[serde(default)]
    strip_accents: Option<bool>,
    lowercase: bool,
}

#[derive(Deserialize)]
struct WordPieceDecoderJson {
    prefix: String,
    cleanup: bool,
}

/// The largest `max_input_chars_per_word` accepted (BERT's is 100). Matching a word costs up to
/// its length squared in lookups, so a file cannot make one word cost the browser minutes.
const MAX_INPUT_CHARS_PER_WORD: u64 = 10_000;

/// A WordPiece tokenizer.json (BERT, all-MiniLM-L6-v2): `BertNormalizer` (or none),
/// `BertPreTokenizer`, the WordPiece model, framing by `TemplateProcessing` or `BertProcessing`,
/// and the WordPiece decoder (or none: tokens joined by spaces).
///
/// `truncation` and `padding` are not read: gptlens encodes the whole text and never pads, and
/// the engine refuses a prompt past the model's context instead of cutting it silently.
fn wordpiece(file: Parts, model: Value) -> Result<WordPiece> {
    let unsupported = |what: String| Error::Tokenizer(format!("{what} is not supported with a WordPiece model"));
    let model = WordPieceModelJson::deserialize(model)
        .map_err(|e| Error::Tokenizer(format!("tokenizer.json's WordPiece model is not valid: {e}")))?;
    let max_input_chars_per_word = model
        .max_input_chars_per_word
        .as_u64()
        .filter(|max| (1..=MAX_INPUT_CHARS_PER_WORD).contains(max))
        .and_then(|max| usize::try_from(max).ok())
        .ok_or_else(|| {
            Error::Tokenizer(format!(
                "the WordPiece model's max_input_chars_per_word = {} is not supported (gptlens accepts 1 to \
                 {MAX_INPUT_CHARS_PER_WORD})",
                model.max_input_chars_per_word
            ))
        })?;
    let names = |stages: &[&Value]| stages.iter().map(|stage| type_name(stage)).collect::<Vec<_>>().join(" + ");
    let normalizer = match stages(file.normalizer.as_ref(), "normalizers")?.as_slice() {
        [] => None,
        [bert] if type_name(bert) == "BertNormalizer" => {
            let bert = BertNormalizerJson::deserialize(*bert)
                .map_err(|e| Error::Tokenizer(format!("bad BertNormalizer: {e}")))?;
            Some(BertNormalizer {
                clean_text: bert.clean_text,
                handle_chinese_chars: bert.handle_chinese_chars,
                strip_accents: bert.strip_accents.unwrap_or(bert.lowercase),
                lowercase: bert.lowercase,
            })
        }
        stages => {
            return Err(unsupported(format!("the normalizer `{}` (gptlens implements BertNormalizer)", names(stages))))
        }
    };
    match stages(file.pre_tokenizer.as_ref(), "pretokenizers")?.as_slice() {
        [bert] if type_name(bert) == "BertPreTokenizer" => {}
        [] => return Err(unsupported("no pre-tokenizer (gptlens implements BertPreTokenizer)".into())),
        stages => {
            return Err(unsupported(format!(
                "the pre-tokenizer `{}` (gptlens implements BertPreTokenizer)",
                names(stages)
            )))
        }
    }
    let decoder = match file.decoder.as_ref().filter(|decoder| !decoder.is_null()) {
        None => WordPieceDecoder::JoinWithSpaces,
        Some(decoder) if type_name(decoder) == "WordPiece" => {
            let decoder = WordPieceDecoderJson::deserialize(decoder)
                .map_err(|e| Error::Tokenizer(format!("bad WordPiece decoder: {e}")))?;
            WordPieceDecoder::WordPiece { prefix: decoder.prefix, cleanup: decoder.cleanup }
        }
        Some(decoder) => {
            return Err(unsupported(format!(
                "the decoder `{}` (gptlens implements the WordPiece decoder)",
                type_name(decoder)
            )))
        }
    };
    let (prepend, append) = match file.post_processor.as_ref().filter(|p| type_name(p) == "BertProcessing") {
        Some(bert) => bert_processing(bert)?,
        None => framing(file.post_processor.as_ref())?,
    };
    let wordpiece = WordPiece::from_parts(WordPieceParts {
        vocab: model.vocab,
        unknown_token: model.unk_token,
        continuing_prefix: model.continuing_subword_prefix,
        max_input_chars_per_word,
        normalizer,
        added: file.added_tokens,
        decoder,
        prepend,
        append,
    })?;
    check_framing(prepend.into_iter().chain(append), wordpiece.vocab_size())?;
    Ok(wordpiece)
}

/// Older BERT files' post-processor: `{"cls": ["[CLS]", 101], "sep": ["[SEP]", 102]}`, the same
/// framing as BERT's TemplateProcessing.
fn bert_processing(stage: &Value) -> Result<(Option<u32>, Option<u32>)> {
    let id = |key: &str| {
        stage
            .get(key)
            .and_then(|pair| pair.get(1))
            .and_then(Value::as_u64)
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| {
                Error::Tokenizer(format!("the BertProcessing post-processor has no [token, id] pair `{key}` ({stage})"))
            })
    };
    Ok((Some(id("cls")?), Some(id("sep")?)))
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
    let vocab: Vocab = serde_json::from_slice(vocab_json)
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
                "the model type `{}` is not supported (gptlens reads BPE and WordPiece tokenizers)",
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
