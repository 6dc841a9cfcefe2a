//! Tokenizers described by GGUF metadata (`tokenizer.ggml.*`) rather than by tokenizer files.
//!
//! A GGUF stores the vocabulary (id → token), the merges, a type per token and the special
//! tokens' ids; which pre-tokenizer goes with them is only a name, `tokenizer.ggml.pre`. gptlens
//! builds the same tokenizer transformers' GGUF loader builds (`AutoTokenizer.from_pretrained(dir,
//! gguf_file=…)`, transformers 5.23, `integrations/gguf/gguf_tokenizer_mapping.py`):
//!
//! * **Vocabulary**: token `i` gets id `i`. A token that uses a character outside GPT-2's byte
//!   alphabet is taken to be literal text and respelled in it (`"a b"` → `"aĠb"`); when two
//!   tokens end up spelled alike, the later id wins.
//! * **Added tokens**, cut out of the text before pre-tokenization: every `CONTROL` token (type 3)
//!   spelled in the byte alphabet, every `USER_DEFINED` token (type 4) that is a vocabulary
//!   token, the tokens named by `bos`/`eos`/`unknown`/`padding_token_id`, and `<|endoftext|>`
//!   (GPT-2's tokenizer class always adds it). For SmolLM2 these are ids 0–16 (`<|endoftext|>` 0,
//!   `<|im_start|>` 1, `<|im_end|>` 2, `<repo_name>` 3, …, `<empty_output>` 16), all CONTROL.
//!   One deliberate difference: when the vocabulary has no `<|endoftext|>`, transformers gives
//!   it a new id past the vocabulary (which the model cannot embed); gptlens leaves it as text.
//! * **No unknown token** in the BPE model: a byte whose token is missing (SmolLM2 has none for
//!   0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xF1, 0xF2 and the bytes never seen in UTF-8) is dropped,
//!   as both transformers and llama.cpp do. `unknown_token_id` only names a special token.
//! * **BOS / EOS** are added around every encoding when `tokenizer.ggml.add_bos_token` /
//!   `add_eos_token` say so (missing means no, as in transformers). SmolLM2 says no for both.
//!
//! Pre-tokenizers (`tokenizer.ggml.pre`):
//! * `gpt2`: GPT-2's regex inside ByteLevel.
//! * `smollm`: every numeric character split off on its own first, then GPT-2's regex on each
//!   stretch in between. This is SmolLM2's own tokenizer.json (`Sequence[Digits(individual_digits
//!   = true), ByteLevel(add_prefix_space = false)]`) and llama.cpp's `LLAMA_VOCAB_PRE_TYPE_SMOLLM`
//!   (regexes `\p{N}` then GPT-2's). transformers 5.23 has no entry for `smollm` and falls back to
//!   `gpt2`; no merge of this vocabulary contains a digit, so the two agree except where
//!   whitespace or a space stands right before a number: `"\n\n1."`, `"x  1"`, `" ½"`. There
//!   gptlens gives the ids the model was trained on (and llama.cpp's); pass `pre = Some("gpt2")`
//!   to get transformers' instead.
//!
//! Anything else (another model or pre-tokenizer type, a missing `pre`, metadata that contradicts
//! itself) is refused with an [`Error::Tokenizer`] naming the key, never guessed.

use super::added_tokens::AddedToken;
use super::bpe::{BpeConfig, BpeTokenizer, Vocab};
use super::byte_level::{char_to_byte, BYTE_TO_CHAR};
use super::chat::ChatMl;
use super::pretokenize::SplitPattern;
use super::sentencepiece::{Spm, SpmFlavor, SpmVocab};
use super::SpecialTokens;
use crate::error::{Error, Result};
use crate::formats::gguf::{Array, GgufFile, Value};

/// GPT-2's end-of-text marker, special in every GPT-2-family tokenizer.
const END_OF_TEXT: &str = "<|endoftext|>";

/// `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
pub const TOKEN_TYPE_NORMAL: i32 = 1;
pub const TOKEN_TYPE_CONTROL: i32 = 3;
pub const TOKEN_TYPE_USER_DEFINED: i32 = 4;
/// The largest type llama.cpp defines (6, `BYTE`); 0 is `UNDEFINED`.
const TOKEN_TYPE_MAX: i32 = 6;

/// The `tokenizer.*` metadata of a GGUF file, borrowed as plain data. [`GgufVocab::from_gguf`]
/// fills it from a parsed file; tests and other readers can fill it by hand.
#[derive(Clone, Copy, Debug, Default)]
pub struct GgufVocab<'a> {
    /// `tokenizer.ggml.model`. gptlens reads `gpt2` (byte-level BPE) and `llama` (SentencePiece
    /// BPE, see `sentencepiece`).
    pub model: &'a str,
    /// `general.architecture`: picks the SentencePiece flavour (Gemma's or LLaMA's).
    pub architecture: Option<&'a str>,
    /// `tokenizer.ggml.scores`: one per token (SentencePiece vocabularies).
    pub scores: Option<&'a [f32]>,
    /// `tokenizer.ggml.pre`: `smollm` or `gpt2`.
    pub pre: Option<&'a str>,
    /// `tokenizer.ggml.tokens`: token `i` has id `i`, spelled in GPT-2's byte alphabet (`Ġthe`).
    pub tokens: &'a [&'a str],
    /// `tokenizer.ggml.token_type`: one per token (1 normal, 3 control, 4 user-defined, …).
    pub token_types: Option<&'a [i32]>,
    /// `tokenizer.ggml.merges`: `"left right"`, the earliest applied first.
    pub merges: Option<&'a [&'a str]>,
    /// `tokenizer.ggml.bos_token_id`, `eos_token_id`, `unknown_token_id`, `padding_token_id`.
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub unk: Option<u32>,
    pub pad: Option<u32>,
    /// `tokenizer.ggml.add_bos_token` / `add_eos_token`; absent means `false`.
    pub add_bos: bool,
    pub add_eos: bool,
    /// `tokenizer.chat_template` (Jinja); read only to recognize ChatML.
    pub chat_template: Option<&'a str>,
}

impl<'a> GgufVocab<'a> {
    /// Reads the `tokenizer.*` keys of a parsed GGUF. A missing required key or a key of the
    /// wrong type is the GGUF reader's error ([`Error::MissingMetadata`],
    /// [`Error::MetadataType`]); whether the values make sense is checked when the tokenizer is
    /// built.
    pub fn from_gguf<'d: 'a>(file: &'a GgufFile<'d>) -> Result<Self> {
        let optional_str = |key: &str| optional(file, key, "a string", Value::as_str);
        let optional_id = |key: &str| optional(file, key, "a u32", Value::as_u32);
        let optional_bool = |key: &str| optional(file, key, "a bool", Value::as_bool);
        Ok(Self {
            model: file.get_str("tokenizer.ggml.model")?,
            architecture: optional_str("general.architecture")?,
            scores: optional(file, "tokenizer.ggml.scores", "an array of f32", |value| match value.as_array()? {
                Array::F32(scores) => Some(scores.as_slice()),
                _ => None,
            })?,
            pre: optional_str("tokenizer.ggml.pre")?,
            tokens: file.get_str_array("tokenizer.ggml.tokens")?,
            token_types: optional(file, "tokenizer.ggml.token_type", "an array of i32", |value| {
                match value.as_array()? {
                    Array::I32(types) => Some(types.as_slice()),
                    _ => None,
                }
            })?,
            merges: optional(file, "tokenizer.ggml.merges", "an array of strings", |value| {
                match value.as_array()? {
                    Array::Str(merges) => Some(merges.as_slice()),
                    _ => None,
                }
            })?,
            bos: optional_id("tokenizer.ggml.bos_token_id")?,
            eos: optional_id("tokenizer.ggml.eos_token_id")?,
            unk: optional_id("tokenizer.ggml.unknown_token_id")?,
            pad: optional_id("tokenizer.ggml.padding_token_id")?,
            add_bos: optional_bool("tokenizer.ggml.add_bos_token")?.unwrap_or(false),
            add_eos: optional_bool("tokenizer.ggml.add_eos_token")?.unwrap_or(false),
            chat_template: optional_str("tokenizer.chat_template")?,
        })
    }
}

fn optional<'f, 'd, T>(
    file: &'f GgufFile<'d>,
    key: &str,
    expected: &'static str,
    cast: impl FnOnce(&'f Value<'d>) -> Option<T>,
) -> Result<Option<T>> {
    let Some(value) = file.metadata(key) else {
        return Ok(None);
    };
    cast(value).map(Some).ok_or_else(|| Error::MetadataType { key: key.to_string(), expected, got: value.describe() })
}

/// A SentencePiece vocabulary (`tokenizer.ggml.model = llama`), Gemma's flavour for the Gemma
/// architectures and LLaMA's for every other, as transformers picks them.
pub(super) fn build_sentencepiece(vocab: &GgufVocab<'_>) -> Result<Spm> {
    let n_tokens = u32::try_from(vocab.tokens.len()).map_err(|_| {
        Error::Tokenizer(format!("tokenizer.ggml.tokens has {} tokens, too many for 32-bit ids", vocab.tokens.len()))
    })?;
    let token_types = check_token_types(vocab.token_types, vocab.tokens)?;
    let special = SpecialTokens {
        bos: check_id(vocab.bos, "bos_token_id", n_tokens)?,
        eos: check_id(vocab.eos, "eos_token_id", n_tokens)?,
        unk: check_id(vocab.unk, "unknown_token_id", n_tokens)?,
        pad: check_id(vocab.pad, "padding_token_id", n_tokens)?,
    };
    let flavor = match vocab.architecture {
        Some("gemma" | "gemma2" | "gemma3") => SpmFlavor::Gemma,
        _ => SpmFlavor::Llama,
    };
    let spm = Spm::new(SpmVocab {
        tokens: vocab.tokens,
        scores: vocab.scores,
        token_types,
        flavor,
        special,
        prepend: framing(vocab.add_bos, special.bos, "add_bos_token", "bos_token_id")?,
        append: framing(vocab.add_eos, special.eos, "add_eos_token", "eos_token_id")?,
    });
    spm.map_err(|e| match e {
        Error::Tokenizer(message) => Error::Tokenizer(format!("GGUF vocabulary: {message}")),
        other => other,
    })
}

pub(super) fn build(vocab: &GgufVocab<'_>) -> Result<BpeTokenizer> {
    if vocab.model != "gpt2" {
        return Err(Error::Tokenizer(format!(
            "tokenizer.ggml.model is `{}`; gptlens reads `gpt2` (byte-level BPE) and `llama` (SentencePiece)",
            vocab.model
        )));
    }
    const KNOWN: &str = "`smollm`, `gpt2`, `llama-bpe` and `qwen2`";
    // The names transformers' GGUF loader maps to each pattern (`GGUF_PRE_TOKENIZER_SPLITS`).
    let (split, split_digits) = match vocab.pre {
        Some("smollm") => (SplitPattern::Gpt2, true),
        // llama.cpp's converter writes `gpt-2` for GPT-2's own vocabulary.
        Some("gpt2" | "gpt-2") => (SplitPattern::Gpt2, false),
        Some("llama-bpe" | "llama3" | "llama-v3" | "smaug-bpe" | "dbrx" | "falcon3") => (SplitPattern::Llama3, false),
        Some("qwen2" | "deepseek-r1-qwen") => (SplitPattern::Qwen2, false),
        Some(other) => {
            return Err(Error::Tokenizer(format!(
                "tokenizer.ggml.pre is `{other}`, a pre-tokenizer gptlens does not implement (it has {KNOWN})"
            )))
        }
        None => {
            return Err(Error::Tokenizer(format!(
                "the GGUF has no tokenizer.ggml.pre, so which pre-tokenizer goes with the vocabulary is unknown \
                 (llama.cpp and transformers guess differently); gptlens has {KNOWN}"
            )))
        }
    };
    let tokens = vocab.tokens;
    if tokens.is_empty() {
        return Err(Error::Tokenizer("tokenizer.ggml.tokens is empty".into()));
    }
    let n_tokens = u32::try_from(tokens.len()).map_err(|_| {
        Error::Tokenizer(format!("tokenizer.ggml.tokens has {} tokens, too many for 32-bit ids", tokens.len()))
    })?;
    let token_types = check_token_types(vocab.token_types, tokens)?;
    let special = SpecialTokens {
        bos: check_id(vocab.bos, "bos_token_id", n_tokens)?,
        eos: check_id(vocab.eos, "eos_token_id", n_tokens)?,
        unk: check_id(vocab.unk, "unknown_token_id", n_tokens)?,
        pad: check_id(vocab.pad, "padding_token_id", n_tokens)?,
    };
    let prepend = framing(vocab.add_bos, special.bos, "add_bos_token", "bos_token_id")?;
    let append = framing(vocab.add_eos, special.eos, "add_eos_token", "eos_token_id")?;

    let mut ids = Vocab::with_capacity_and_hasher(tokens.len(), Default::default());
    for (id, token) in (0..n_tokens).zip(tokens) {
        // A later token spelled like an earlier one takes the spelling over, as in a Python dict.
        ids.insert(byte_level_spelling(token), id);
    }

    let merges = vocab.merges.ok_or_else(|| {
        Error::Tokenizer(
            "tokenizer.ggml.merges is missing; gptlens cannot rebuild the merges of a byte-level BPE vocabulary".into(),
        )
    })?;
    let merges = merges.iter().enumerate().map(|(rank, merge)| match merge.split_once(' ') {
        Some((left, right)) if !right.contains(' ') => Ok((left, right)),
        _ => Err(Error::Tokenizer(format!(
            "tokenizer.ggml.merges #{}, `{merge}`, is not two tokens separated by one space",
            rank + 1
        ))),
    });

    let added_tokens = added_tokens(tokens, token_types, &ids, special);
    let config = BpeConfig {
        vocab: ids,
        merges: Vec::new(),
        added_tokens,
        add_prefix_space: false,
        split: Some(split),
        split_digits,
        unknown_token: None,
        fuse_unknown: false,
        whole_words_first: false,
    };
    let mut bpe = BpeTokenizer::with_merges(config, merges).map_err(|e| match e {
        Error::Tokenizer(message) => Error::Tokenizer(format!("GGUF vocabulary: {message}")),
        other => other,
    })?;
    // A template that is not ChatML does not stop the tokenizer; only `chatml` needs one.
    let chat = vocab.chat_template.and_then(|template| ChatMl::from_template(template).ok());
    bpe.set_extras(special, prepend, append, chat);
    Ok(bpe)
}

fn check_token_types<'t>(types: Option<&'t [i32]>, tokens: &[&str]) -> Result<&'t [i32]> {
    let Some(types) = types else {
        return Ok(&[]);
    };
    if types.len() != tokens.len() {
        return Err(Error::Tokenizer(format!(
            "tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens has {}",
            types.len(),
            tokens.len()
        )));
    }
    if let Some((id, (&kind, token))) =
        types.iter().zip(tokens).enumerate().find(|(_, (&kind, _))| !(0..=TOKEN_TYPE_MAX).contains(&kind))
    {
        return Err(Error::Tokenizer(format!(
            "token {id} (`{token}`) has type {kind}; tokenizer.ggml.token_type values run from 0 to {TOKEN_TYPE_MAX}"
        )));
    }
    Ok(types)
}

fn check_id(id: Option<u32>, key: &str, n_tokens: u32) -> Result<Option<u32>> {
    match id {
        Some(id) if id >= n_tokens => {
            Err(Error::Tokenizer(format!("tokenizer.ggml.{key} is {id}, but there are only {n_tokens} tokens")))
        }
        _ => Ok(id),
    }
}

fn framing(add: bool, id: Option<u32>, flag: &str, key: &str) -> Result<Option<u32>> {
    match (add, id) {
        (false, _) => Ok(None),
        (true, Some(id)) => Ok(Some(id)),
        (true, None) => {
            Err(Error::Tokenizer(format!("tokenizer.ggml.{flag} is true but there is no tokenizer.ggml.{key}")))
        }
    }
}

/// True when every character of `token` is one of GPT-2's 256 byte characters.
fn in_byte_alphabet(token: &str) -> bool {
    token.chars().all(|c| char_to_byte(c).is_some())
}

/// The vocabulary key of a GGUF token: itself when written in the byte alphabet, else its UTF-8
/// bytes spelled in it.
fn byte_level_spelling(token: &str) -> String {
    if in_byte_alphabet(token) {
        token.to_string()
    } else {
        token.bytes().map(|byte| BYTE_TO_CHAR[byte as usize]).collect()
    }
}

/// The tokens matched whole in the text, in the order transformers adds them (the order only
/// decides ids for contents outside the vocabulary). All are matched on the raw text
/// (`normalized: false`) with no stripping.
fn added_tokens(tokens: &[&str], types: &[i32], vocab: &Vocab, special: SpecialTokens) -> Vec<AddedToken> {
    let added = |content: &str| AddedToken { content: content.to_string(), normalized: false, ..AddedToken::default() };
    let of_type =
        |wanted: i32| tokens.iter().zip(types).filter(move |(_, &kind)| kind == wanted).map(|(&token, _)| token);
    // A CONTROL token written outside the byte alphabet is a llama.cpp mislabel, which
    // transformers skips rather than add a token beyond the model's vocabulary.
    let control = of_type(TOKEN_TYPE_CONTROL).filter(|token| in_byte_alphabet(token));
    let user_defined = of_type(TOKEN_TYPE_USER_DEFINED).filter(|token| vocab.contains_key(*token));
    let named = [special.bos, special.eos, special.unk, special.pad]
        .into_iter()
        .flatten()
        .filter_map(|id| tokens.get(id as usize).copied());
    let end_of_text = Some(END_OF_TEXT).filter(|token| vocab.contains_key(*token));
    end_of_text.into_iter().chain(control).chain(user_defined).chain(named).map(added).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelling_outside_the_byte_alphabet_is_respelled() {
        assert_eq!(byte_level_spelling("Ġthe"), "Ġthe");
        assert_eq!(byte_level_spelling("<|im_start|>"), "<|im_start|>");
        assert_eq!(byte_level_spelling("a b"), "aĠb");
        assert_eq!(byte_level_spelling("€"), "âĤ¬");
        assert_eq!(byte_level_spelling("é"), "é", "é is the byte alphabet's spelling of 0xE9");
    }
}
