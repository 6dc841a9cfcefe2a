//! WordPiece tokenizers (BERT and its sentence encoders, e.g. all-MiniLM-L6-v2), id for id as
//! Python `tokenizers` encodes them from their tokenizer.json.
//!
//! Encoding runs five stages, each as `tokenizers` implements it:
//! 1. **Added tokens** whose `normalized` flag is off (`[CLS]`, `[MASK]`, … in BERT's files) are
//!    cut out of the raw text and map straight to their ids, so `[MASK]` in a text is the mask
//!    token even when the normalizer lowercases (`[mask]` is not: it is three words).
//! 2. **`BertNormalizer`**, on each stretch between them: `clean_text` drops NUL, U+FFFD and
//!    control characters (Cc, Cf, Co, but not `\t \n \r`) and turns every whitespace character
//!    into a space; `handle_chinese_chars` puts spaces around CJK ideographs; `strip_accents`
//!    (when null, it follows `lowercase`) decomposes to NFD and drops nonspacing marks (Mn);
//!    `lowercase` lowercases character by character (so a final `Σ` becomes `σ`, not `ς`).
//!    Added tokens flagged `normalized` are then matched in that normalized text, by their
//!    normalized spelling.
//! 3. **`BertPreTokenizer`**: words end at whitespace (dropped) and every punctuation character
//!    (ASCII punctuation, or Unicode P*) is a word of its own.
//! 4. **WordPiece**: greedy longest match first, left to right; a piece after the first is looked
//!    up with the continuing prefix (`##ing`). A word with a stretch no piece matches, or longer
//!    than `max_input_chars_per_word` characters, becomes one unknown token.
//! 5. The post-processor's framing: `[CLS]` before, `[SEP]` after.
//!
//! The general categories come from the `unicode_categories` crate, the one `tokenizers` uses, so
//! a character assigned after its tables (Unicode 9) is treated as Python treats it.
//!
//! Decoding follows the WordPiece decoder: a token with the prefix joins the previous one without
//! it, any other token after the first gets a space before it, and `cleanup` removes the spaces
//! tokenization put before `. ? ! ,` and inside English contractions. Without a decoder the
//! tokens are joined with spaces, as `tokenizers` does.

use std::borrow::Cow;

use unicode_categories::UnicodeCategories;
use unicode_normalization::UnicodeNormalization;

use super::added_tokens::{AddedToken, AddedTokens, Segment};
use super::bpe::Vocab;
use super::SpecialTokens;
use crate::error::{Error, Result};

/// HF's `BertNormalizer` settings, `strip_accents` already resolved (null follows `lowercase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct BertNormalizer {
    pub(super) clean_text: bool,
    pub(super) handle_chinese_chars: bool,
    pub(super) strip_accents: bool,
    pub(super) lowercase: bool,
}

/// How ids become text again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum WordPieceDecoder {
    /// HF's `WordPiece` decoder: tokens starting with `prefix` continue a word; `cleanup` removes
    /// the spaces tokenization put before punctuation and inside contractions.
    WordPiece { prefix: String, cleanup: bool },
    /// No decoder: the tokens joined with single spaces.
    JoinWithSpaces,
}

/// Everything a [`WordPiece`] is built from.
pub(super) struct WordPieceParts {
    /// Token → id; the ids must be 0..len.
    pub(super) vocab: Vocab,
    pub(super) unknown_token: String,
    pub(super) continuing_prefix: String,
    pub(super) max_input_chars_per_word: usize,
    pub(super) normalizer: Option<BertNormalizer>,
    pub(super) added: Vec<AddedToken>,
    pub(super) decoder: WordPieceDecoder,
    pub(super) prepend: Option<u32>,
    pub(super) append: Option<u32>,
}

/// A WordPiece tokenizer with BERT's normalizer and pre-tokenizer.
#[derive(Clone)]
pub struct WordPiece {
    vocab: Vocab,
    /// Id → spelling: the vocabulary, then added tokens past it (`None` for an id no token has).
    tokens: Vec<Option<Box<str>>>,
    unknown: u32,
    continuing_prefix: String,
    max_input_chars_per_word: usize,
    /// Bytes in the longest vocabulary token: no longer stretch of a word can match.
    longest_token: usize,
    normalizer: Option<BertNormalizer>,
    /// Added tokens matched in the raw text (`normalized: false`).
    raw_added: AddedTokens,
    /// Added tokens matched in the normalized text, by their normalized spelling (which is
    /// also how they decode, as in HF).
    normalized_added: AddedTokens,
    decoder: WordPieceDecoder,
    prepend: Option<u32>,
    append: Option<u32>,
}

impl std::fmt::Debug for WordPiece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WordPiece")
            .field("vocab_size", &self.tokens.len())
            .field("normalizer", &self.normalizer)
            .field("decoder", &self.decoder)
            .field("prepend", &self.prepend)
            .field("append", &self.append)
            .finish_non_exhaustive()
    }
}

impl WordPiece {
    pub(super) fn from_parts(parts: WordPieceParts) -> Result<WordPiece> {
        let vocab = parts.vocab;
        let size = vocab.len();
        let mut tokens: Vec<Option<Box<str>>> = vec![None; size];
        for (token, &id) in &vocab {
            match tokens.get_mut(id as usize) {
                Some(slot) => *slot = Some(token.as_str().into()),
                None => {
                    return Err(Error::Tokenizer(format!(
                        "the WordPiece vocabulary's {size} tokens must have the ids 0..{size}, but `{token}` has {id}"
                    )))
                }
            }
        }
        if let Some(id) = tokens.iter().position(Option::is_none) {
            return Err(Error::Tokenizer(format!(
                "the WordPiece vocabulary's {size} tokens must have the ids 0..{size}, but no token has {id}"
            )));
        }
        let unknown = *vocab.get(&parts.unknown_token).ok_or_else(|| {
            Error::Tokenizer(format!(
                "the WordPiece model's unk_token `{}` is not in its vocabulary",
                parts.unknown_token
            ))
        })?;

        // Ids as HF assigns them, from all the added tokens at once (see `AddedTokens::new`).
        let all_added = AddedTokens::new(parts.added.clone(), &vocab)?;
        for (id, content) in all_added.iter() {
            let id = id as usize;
            if id >= tokens.len() {
                tokens.resize(id + 1, None);
            }
            if let Some(slot) = tokens.get_mut(id) {
                *slot = Some(content.into());
            }
        }
        let (normalized, raw): (Vec<AddedToken>, Vec<AddedToken>) =
            parts.added.into_iter().partition(|token| token.normalized);
        let raw_added = AddedTokens::new(raw, &vocab)?;
        // Normalized tokens are matched by their normalized spelling; the map makes each keep the
        // id it got above.
        let mut normalized_ids = Vocab::default();
        let normalized: Vec<AddedToken> = normalized
            .into_iter()
            .filter_map(|token| {
                let id = all_added.id(&token.content)?;
                let content = normalize(parts.normalizer.as_ref(), &token.content);
                normalized_ids.insert(content.clone(), id);
                Some(AddedToken { content, normalized: false, ..token })
            })
            .collect();
        let normalized_added = AddedTokens::new(normalized, &normalized_ids)?;
        // HF decodes such a token by its normalized spelling too (`[mask]`).
        for (content, &id) in &normalized_ids {
            if let Some(slot) = tokens.get_mut(id as usize) {
                *slot = Some(content.as_str().into());
            }
        }

        let longest_token = vocab.keys().map(String::len).max().unwrap_or(0);
        Ok(WordPiece {
            vocab,
            tokens,
            unknown,
            continuing_prefix: parts.continuing_prefix,
            max_input_chars_per_word: parts.max_input_chars_per_word,
            longest_token,
            normalizer: parts.normalizer,
            raw_added,
            normalized_added,
            decoder: parts.decoder,
            prepend: parts.prepend,
            append: parts.append,
        })
    }

    /// `[CLS]` (the framing's first token) as BOS, `[SEP]` as EOS, and the unknown token.
    pub(super) fn special_tokens(&self) -> SpecialTokens {
        SpecialTokens { bos: self.prepend, eos: self.append, unk: Some(self.unknown), pad: None }
    }

    pub(super) fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// The id of a vocabulary token (`##ing`) or added token (`[CLS]`).
    pub(super) fn token_id(&self, token: &str) -> Option<u32> {
        self.vocab.get(token).copied().or_else(|| {
            self.tokens.iter().position(|t| t.as_deref() == Some(token)).and_then(|id| u32::try_from(id).ok())
        })
    }

    /// The spelling of one id (`##ing` as is): an error past the vocabulary, `None` for an id no
    /// token has.
    pub(super) fn token_text(&self, id: u32) -> Result<Option<&str>> {
        match self.tokens.get(id as usize) {
            Some(token) => Ok(token.as_deref()),
            None => Err(Error::TokenOutOfRange { id, vocab: self.vocab_size() }),
        }
    }

    /// The ids of `text`, framed as the post-processor says (`[CLS] … [SEP]`).
    ///
    /// tokenizer.json's `truncation` and `padding` are not applied: every id of the text is
    /// returned, unpadded. The engine refuses a prompt longer than the model's context rather than
    /// cutting it silently.
    pub(super) fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::with_capacity(text.len() / 3 + 2);
        ids.extend(self.prepend);
        let mut lookup = String::new();
        for segment in self.raw_added.split(text) {
            let raw = match segment {
                Segment::Added(id) => {
                    ids.push(id);
                    continue;
                }
                Segment::Text(raw) => raw,
            };
            let normalized = normalize(self.normalizer.as_ref(), raw);
            for segment in self.normalized_added.split(&normalized) {
                match segment {
                    Segment::Added(id) => ids.push(id),
                    Segment::Text(text) => {
                        for word in pre_tokenize(text) {
                            self.encode_word(word, &mut lookup, &mut ids);
                        }
                    }
                }
            }
        }
        ids.extend(self.append);
        ids
    }

    /// Greedy longest-match-first over one word, as HF's `WordPiece::tokenize`; the whole word is
    /// the unknown token when any stretch of it has no piece or it is too long.
    fn encode_word(&self, word: &str, lookup: &mut String, ids: &mut Vec<u32>) {
        if word.chars().count() > self.max_input_chars_per_word {
            ids.push(self.unknown);
            return;
        }
        let first_piece = ids.len();
        let mut start = 0;
        while start < word.len() {
            // Stretches longer than the longest token cannot match; HF tries them, to no effect.
            let mut end = word.len().min(start + self.longest_token);
            while !word.is_char_boundary(end) {
                end -= 1;
            }
            let mut found = None;
            while start < end {
                let piece = &word[start..end];
                lookup.clear();
                if start > 0 {
                    lookup.push_str(&self.continuing_prefix);
                }
                lookup.push_str(piece);
                if let Some(&id) = self.vocab.get(lookup.as_str()) {
                    found = Some(id);
                    break;
                }
                end -= piece.chars().next_back().map_or(1, char::len_utf8);
            }
            match found {
                Some(id) => {
                    ids.push(id);
                    start = end;
                }
                None => {
                    ids.truncate(first_piece);
                    ids.push(self.unknown);
                    return;
                }
            }
        }
    }

    /// The text of `ids` as HF's `decode(ids, skip_special_tokens=False)` gives it. Ids no token
    /// has are skipped, as in HF; ids past the vocabulary are an error.
    pub(super) fn decode(&self, ids: &[u32]) -> Result<String> {
        let mut text = String::with_capacity(ids.len() * 6);
        let mut first = true;
        for &id in ids {
            let Some(token) = self.token_text(id)? else {
                continue;
            };
            match &self.decoder {
                WordPieceDecoder::WordPiece { prefix, cleanup } => {
                    let piece: Cow<str> = if first {
                        token.into()
                    } else if let Some(rest) = token.strip_prefix(prefix.as_str()) {
                        rest.into()
                    } else {
                        format!(" {token}").into()
                    };
                    if *cleanup {
                        text.push_str(&cleanup_piece(&piece));
                    } else {
                        text.push_str(&piece);
                    }
                }
                WordPieceDecoder::JoinWithSpaces => {
                    if !first {
                        text.push(' ');
                    }
                    text.push_str(token);
                }
            }
            first = false;
        }
        Ok(text)
    }
}

/// `text` through the normalizer (unchanged without one).
fn normalize(normalizer: Option<&BertNormalizer>, text: &str) -> String {
    let Some(n) = normalizer else {
        return text.to_string();
    };
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if n.clean_text {
            if c == '\0' || c == '\u{FFFD}' || is_control(c) {
                continue;
            }
            if is_whitespace(c) {
                out.push(' ');
                continue;
            }
        }
        if n.handle_chinese_chars && is_chinese_char(c) {
            out.extend([' ', c, ' ']);
        } else {
            out.push(c);
        }
    }
    if n.strip_accents {
        out = out.nfd().filter(|c| !c.is_mark_nonspacing()).collect();
    }
    if n.lowercase {
        // Character by character as HF's `NormalizedString::lowercase`, not `str::to_lowercase`,
        // which spells a word-final sigma `ς`.
        out = out.chars().flat_map(char::to_lowercase).collect();
    }
    out
}

/// HF's `is_whitespace`: `\t \n \r` and the Unicode White_Space characters.
fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

/// HF's `is_control`: control, format and private-use characters (Cc, Cf, Co), except `\t \n \r`.
fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.is_other()
}

/// HF's `is_chinese_char`: the CJK Unified Ideographs blocks and their extensions and
/// compatibility blocks (not kana or hangul, which are written with spaces).
fn is_chinese_char(c: char) -> bool {
    matches!(
        u32::from(c),
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

/// BertPreTokenizer's punctuation: ASCII punctuation (`$`, `+`, `^`, … included) or Unicode P*.
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || c.is_punctuation()
}

/// BertPreTokenizer: words split at whitespace (dropped), each punctuation character on its own.
fn pre_tokenize(text: &str) -> impl Iterator<Item = &str> {
    let mut start = None;
    let mut chars = text.char_indices();
    let mut pending_punctuation = None;
    std::iter::from_fn(move || loop {
        if let Some(punctuation) = pending_punctuation.take() {
            return Some(punctuation);
        }
        let Some((at, c)) = chars.next() else {
            return start.take().map(|s| &text[s..]);
        };
        let whitespace = c.is_whitespace();
        if whitespace || is_punctuation(c) {
            if !whitespace {
                pending_punctuation = Some(&text[at..at + c.len_utf8()]);
            }
            if let Some(s) = start.take() {
                return Some(&text[s..at]);
            }
        } else if start.is_none() {
            start = Some(at);
        }
    })
}

/// HF's WordPiece-decoder `cleanup`, applied to each token as it is decoded.
fn cleanup_piece(piece: &str) -> String {
    piece
        .replace(" .", ".")
        .replace(" ?", "?")
        .replace(" !", "!")
        .replace(" ,", ",")
        .replace(" ' ", "'")
        .replace(" n't", "n't")
        .replace(" 'm", "'m")
        .replace(" do not", " don't")
        .replace(" 's", "'s")
        .replace(" 've", "'ve")
        .replace(" 're", "'re")
}

#[cfg(test)]
mod tests {
    use super::*;

    const BERT: BertNormalizer =
        BertNormalizer { clean_text: true, handle_chinese_chars: true, strip_accents: true, lowercase: true };

    #[test]
    fn normalizer_cleans_spaces_cjk_accents_and_case() {
        assert_eq!(normalize(Some(&BERT), "Héllo\tWÖRLD\r\n"), "hello world  ");
        assert_eq!(normalize(Some(&BERT), "a\u{0}b\u{7}c\u{FFFD}d\u{200D}e\u{E000}f\u{B}g"), "abcdefg");
        assert_eq!(normalize(Some(&BERT), "日本語"), " 日  本  語 ");
        assert_eq!(normalize(Some(&BERT), "ΟΔΟΣ"), "οδοσ");
        assert_eq!(normalize(Some(&BERT), "ひらがな"), "ひらかな", "dakuten are nonspacing marks once decomposed");
        let cased = BertNormalizer { lowercase: false, ..BERT };
        assert_eq!(normalize(Some(&cased), "Ångström"), "Angstrom");
        assert_eq!(normalize(None, "Ångström\t"), "Ångström\t");
    }

    #[test]
    fn pre_tokenizer_splits_whitespace_and_isolates_punctuation() {
        let words: Vec<&str> = pre_tokenize("  e.g. (a+b)*c — «x»!  ").collect();
        assert_eq!(words, ["e", ".", "g", ".", "(", "a", "+", "b", ")", "*", "c", "—", "«", "x", "»", "!"]);
        assert_eq!(pre_tokenize("").count(), 0);
        assert_eq!(pre_tokenize("   ").count(), 0);
        assert_eq!(pre_tokenize("word").collect::<Vec<_>>(), ["word"]);
        assert_eq!(pre_tokenize("∑x").collect::<Vec<_>>(), ["∑x"], "math symbols are not punctuation");
    }

    #[test]
    fn cleanup_is_per_token() {
        assert_eq!(cleanup_piece(" ."), ".");
        assert_eq!(cleanup_piece(" '"), " '");
        assert_eq!(cleanup_piece(" n't"), "n't");
    }
}
