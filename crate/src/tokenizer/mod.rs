//! Text ↔ token ids, id for id as Python `tokenizers` produces them for GPT-2-style models.
//!
//! Encoding runs four stages:
//! 1. **Added tokens** (`added_tokens`): special strings such as `<|endoftext|>` are cut out of
//!    the raw text first and map straight to their ids; only the text between them goes on.
//! 2. **Pre-tokenize** (`pretokenize`): GPT-2's regex splits that text into words (`"Hello"`,
//!    `" world"`, `"'s"`, `"  "`), so no merge ever crosses a word boundary. SmolLM2 first
//!    splits off every numeric character on its own (`"x  12"` → `"x  "`, `"1"`, `"2"`).
//! 3. **Byte map** (`byte_level`): each word's UTF-8 bytes are spelled in GPT-2's printable byte
//!    alphabet (`" world"` → `"Ġworld"`), the alphabet the vocabulary is written in, so any text
//!    encodes without an unknown token.
//! 4. **BPE merges** (`bpe`): starting from one token per byte, the adjacent pair with the lowest
//!    merge rank is fused, again and again, until no listed pair is left.
//!
//! Decoding concatenates the bytes each id spells. A token may end inside a UTF-8 character, so
//! [`Tokenizer::decode_bytes`] hands raw bytes to streaming printers, [`Tokenizer::decode`]
//! replaces incomplete characters with U+FFFD, and [`Tokenizer::token_string`] labels each token
//! on its own, escaping what cannot be shown.
//!
//! [`Tokenizer::Bytes`] skips all of this for byte-level models: ids are byte values.
//!
//! [`Tokenizer::WordPiece`] (BERT-style encoders) has stages of its own: BERT's normalizer and
//! pre-tokenizer, greedy longest-match WordPiece, `[CLS]` … `[SEP]` framing; see `wordpiece`.
//! Its tokens are whole characters, so decoding is by token text rather than by bytes.
//!
//! Tokenizers load from HF's tokenizer.json, GPT-2's vocab.json + merges.txt, or a GGUF's
//! `tokenizer.ggml.*` metadata ([`GgufVocab`], see `gguf_vocab` for how that matches
//! transformers and llama.cpp). Nothing here touches the filesystem: loaders take the files'
//! bytes, so the same code runs in the browser.

mod added_tokens;
mod bpe;
mod byte_level;
mod chat;
mod gguf_vocab;
mod load;
mod pretokenize;
mod sentencepiece;
mod unicode_classes;
mod wordpiece;

pub use bpe::{BpeTokenizer, PieceMemo};
pub use chat::ChatMl;
pub use gguf_vocab::{GgufVocab, TOKEN_TYPE_CONTROL, TOKEN_TYPE_NORMAL, TOKEN_TYPE_USER_DEFINED};
pub use sentencepiece::{Spm, SpmFlavor};
pub use wordpiece::WordPiece;

use crate::formats::gguf::GgufFile;

use crate::error::{Error, Result};

/// Vocabulary size of [`Tokenizer::Bytes`]: one id per byte value.
const BYTE_VOCAB_SIZE: usize = 256;

/// Every byte value, so that a byte id can be decoded as a slice like any other token.
const BYTE_VALUES: [u8; BYTE_VOCAB_SIZE] = {
    let mut values = [0; BYTE_VOCAB_SIZE];
    let mut byte = 0;
    while byte < BYTE_VOCAB_SIZE {
        values[byte] = byte as u8;
        byte += 1;
    }
    values
};

/// The ids a model's metadata names. Only GGUF vocabularies name them; tokenizers loaded from
/// tokenizer files report none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub unk: Option<u32>,
    pub pad: Option<u32>,
}

// There is one tokenizer per loaded model, so the size gap between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Tokenizer {
    /// Byte-level BPE (GPT-2 and its family), loaded from the model's tokenizer files.
    Bpe(BpeTokenizer),
    /// SentencePiece BPE with byte fallback (LLaMA 1/2, Gemma), from GGUF metadata or tokenizer.json.
    SentencePiece(Spm),
    /// WordPiece with BERT's normalizer and pre-tokenizer (BERT, all-MiniLM-L6-v2), from
    /// tokenizer.json.
    WordPiece(WordPiece),
    /// For byte-level models: ids are byte values, the vocabulary has 256 entries.
    Bytes,
}

impl Tokenizer {
    /// Loads a Hugging Face tokenizer.json whose model is BPE: byte-level (GPT-2, SmolLM2,
    /// LLaMA 3, Qwen2) or SentencePiece-style with byte fallback (LLaMA 1/2, Gemma); or
    /// WordPiece (BERT, all-MiniLM-L6-v2).
    pub fn from_tokenizer_json(bytes: &[u8]) -> Result<Tokenizer> {
        load::from_tokenizer_json(bytes)
    }

    /// Loads GPT-2's vocab.json + merges.txt; `<|endoftext|>`, when in the vocabulary, is
    /// treated as a special token as GPT-2's own tokenizers do.
    pub fn from_vocab_merges(vocab_json: &[u8], merges_txt: &[u8]) -> Result<Tokenizer> {
        load::from_vocab_merges(vocab_json, merges_txt).map(Tokenizer::Bpe)
    }

    /// Builds the tokenizer a GGUF's `tokenizer.ggml.*` metadata describes (byte-level BPE with
    /// the `smollm` or `gpt2` pre-tokenizer). Control and user-defined tokens are matched whole
    /// in the text; [`Tokenizer::encode`] adds BOS / EOS when `add_bos` / `add_eos` say so.
    pub fn from_gguf_vocab(vocab: &GgufVocab<'_>) -> Result<Tokenizer> {
        match vocab.model {
            "llama" => gguf_vocab::build_sentencepiece(vocab).map(Tokenizer::SentencePiece),
            _ => gguf_vocab::build(vocab).map(Tokenizer::Bpe),
        }
    }

    /// [`Tokenizer::from_gguf_vocab`] on the metadata of a parsed GGUF file.
    pub fn from_gguf(file: &GgufFile<'_>) -> Result<Tokenizer> {
        Tokenizer::from_gguf_vocab(&GgufVocab::from_gguf(file)?)
    }

    /// The BOS / EOS / unknown / padding ids the model's metadata names.
    pub fn special_tokens(&self) -> SpecialTokens {
        match self {
            Tokenizer::Bpe(bpe) => bpe.special_tokens(),
            Tokenizer::SentencePiece(spm) => spm.special_tokens(),
            Tokenizer::WordPiece(wordpiece) => wordpiece.special_tokens(),
            Tokenizer::Bytes => SpecialTokens::default(),
        }
    }

    /// The model's chat template, when it is ChatML.
    pub fn chat_template(&self) -> Option<&ChatMl> {
        match self {
            Tokenizer::Bpe(bpe) => bpe.chat(),
            Tokenizer::SentencePiece(_) | Tokenizer::WordPiece(_) | Tokenizer::Bytes => None,
        }
    }

    /// `user_text` as the model's chat template renders one user message followed by the opened
    /// assistant turn, default system prompt included (SmolLM2 has one). Encode the result with
    /// [`Tokenizer::encode`]: its `<|im_start|>` / `<|im_end|>` become their special ids.
    pub fn chatml(&self, user_text: &str) -> Result<String> {
        self.chat_template()
            .map(|chat| chat.prompt(user_text))
            .ok_or_else(|| Error::Tokenizer("the model has no ChatML chat template".into()))
    }

    /// One more than the largest id of any vocabulary or added token.
    pub fn vocab_size(&self) -> usize {
        match self {
            Tokenizer::Bpe(bpe) => bpe.vocab_size(),
            Tokenizer::SentencePiece(spm) => spm.vocab_size(),
            Tokenizer::WordPiece(wordpiece) => wordpiece.vocab_size(),
            Tokenizer::Bytes => BYTE_VOCAB_SIZE,
        }
    }

    /// The ids of `text`, as `tokenizer(text).input_ids` gives them in transformers: special
    /// tokens in the text become their ids, and BOS / EOS are added if the model asks for them
    /// (`[CLS]` … `[SEP]` for WordPiece). Never truncated or padded, whatever tokenizer.json says.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(match self {
            Tokenizer::Bpe(bpe) => bpe.encode(text),
            Tokenizer::SentencePiece(spm) => spm.encode(text),
            Tokenizer::WordPiece(wordpiece) => wordpiece.encode(text),
            Tokenizer::Bytes => text.bytes().map(u32::from).collect(),
        })
    }

    /// [`Self::encode`] for a text that is typed: pieces met by earlier calls with the same
    /// `memo` are not merged again (byte-level BPE; the other tokenizers encode in full). Gives
    /// exactly the ids of [`Self::encode`].
    pub fn encode_remembering(&self, text: &str, memo: &mut PieceMemo) -> Result<Vec<u32>> {
        match self {
            Tokenizer::Bpe(bpe) => Ok(bpe.encode_remembering(text, memo)),
            _ => self.encode(text),
        }
    }

    /// The text of `ids`, with U+FFFD where the bytes do not form complete UTF-8 characters.
    /// WordPiece decodes as its decoder says (`##` pieces joined, spaces between words, special
    /// tokens kept): HF's `decode(ids, skip_special_tokens=False)`.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        if let Tokenizer::WordPiece(wordpiece) = self {
            return wordpiece.decode(ids);
        }
        Ok(String::from_utf8_lossy(&self.decode_bytes(ids)?).into_owned())
    }

    /// The raw bytes of `ids`, for printers that must hold back a half-finished character.
    pub fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        if let Tokenizer::WordPiece(wordpiece) = self {
            return wordpiece.decode(ids).map(String::into_bytes);
        }
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            // An id inside the range that no token has decodes to nothing, as in HF.
            bytes.extend_from_slice(self.bytes_of(id)?.unwrap_or_default());
        }
        Ok(bytes)
    }

    /// A one-line label for one token, for visualizations. The token's text is shown as is,
    /// except that a backslash is doubled, control characters are escaped (`\n`, `\t`, `\r`,
    /// `\u{1b}`) and bytes that are not a whole UTF-8 character appear as `\xE2`. The escapes
    /// make the label unambiguous, so distinct byte sequences get distinct labels. A WordPiece
    /// token is labelled as the vocabulary spells it (`##ing`, `[CLS]`).
    pub fn token_string(&self, id: u32) -> Result<String> {
        match self.bytes_of(id)? {
            Some(bytes) => Ok(display_label(bytes)),
            None => Err(Error::Tokenizer(format!("token id {id} is not assigned to any token"))),
        }
    }

    /// The id of a vocabulary token as the vocabulary spells it (`Ġthe`, `<|endoftext|>`); for
    /// [`Tokenizer::Bytes`], of a one-byte string.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        match self {
            Tokenizer::Bpe(bpe) => bpe.token_id(token),
            Tokenizer::SentencePiece(spm) => spm.token_id(token),
            Tokenizer::WordPiece(wordpiece) => wordpiece.token_id(token),
            Tokenizer::Bytes => match token.as_bytes() {
                [byte] => Some(u32::from(*byte)),
                _ => None,
            },
        }
    }

    /// The bytes of one id: an error past the vocabulary, `None` for an unassigned id.
    fn bytes_of(&self, id: u32) -> Result<Option<&[u8]>> {
        match self {
            Tokenizer::Bpe(bpe) => bpe.token_bytes(id),
            Tokenizer::SentencePiece(spm) => spm.token_bytes(id).map(Some),
            Tokenizer::WordPiece(wordpiece) => wordpiece.token_text(id).map(|text| text.map(str::as_bytes)),
            Tokenizer::Bytes => match BYTE_VALUES.get(id as usize..=id as usize) {
                Some(byte) => Ok(Some(byte)),
                None => Err(Error::TokenOutOfRange { id, vocab: BYTE_VOCAB_SIZE }),
            },
        }
    }
}

fn display_label(bytes: &[u8]) -> String {
    let mut label = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => label.push_str("\\\\"),
                '\n' => label.push_str("\\n"),
                '\r' => label.push_str("\\r"),
                '\t' => label.push_str("\\t"),
                c if c.is_control() => label.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
                c => label.push(c),
            }
        }
        for byte in chunk.invalid() {
            label.push_str(&format!("\\x{byte:02X}"));
        }
    }
    label
}

#[cfg(test)]
mod tests {
    use super::display_label;

    #[test]
    fn labels_escape_what_cannot_be_shown() {
        assert_eq!(display_label(b" hello"), " hello");
        assert_eq!(display_label("👋".as_bytes()), "👋");
        assert_eq!(display_label(&"👋".as_bytes()[..2]), "\\xF0\\x9F");
        assert_eq!(display_label(b"\n\n\t\r\x1b"), "\\n\\n\\t\\r\\u{1b}");
        assert_eq!(display_label(b"\\xF0"), "\\\\xF0", "a literal backslash cannot pose as an escape");
    }
}
