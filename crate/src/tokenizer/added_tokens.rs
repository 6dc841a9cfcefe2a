//! Added tokens (`<|endoftext|>` and friends): found in the raw text before any pre-tokenization
//! and mapped straight to their ids, the way HF's `AddedVocabulary` does by default.
//!
//! HF matches in two passes: first the tokens flagged `normalized: false` against the raw text,
//! then the `normalized: true` ones inside the text left between those matches. (Without a
//! normalizer, which is all gptlens accepts, both passes see the same characters; only the order
//! differs.) Each pass takes leftmost-longest, non-overlapping matches and then applies the
//! token's `single_word`, `lstrip` and `rstrip` flags.

use std::collections::{BTreeMap, HashMap};

use regex::Regex;

use crate::error::{Error, Result};

/// One entry of tokenizer.json's `added_tokens`, as far as encoding is concerned.
#[derive(Clone, Debug, Default)]
pub(super) struct AddedToken {
    pub(super) content: String,
    /// Only match when not glued to word characters on either side.
    pub(super) single_word: bool,
    /// Swallow the whitespace before the token.
    pub(super) lstrip: bool,
    /// Swallow the whitespace after the token.
    pub(super) rstrip: bool,
    pub(super) normalized: bool,
}

/// A stretch of input: either text still to be pre-tokenized, or an added token already matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Segment<'t> {
    Text(&'t str),
    Added(u32),
}

#[derive(Clone, Debug)]
pub(super) struct AddedTokens {
    ids_by_content: HashMap<String, u32>,
    /// Id → token; when two contents end up on one id the later one wins, as in HF.
    by_id: BTreeMap<u32, AddedToken>,
    raw_pass: Option<Matcher>,
    normalized_pass: Option<Matcher>,
}

#[derive(Clone, Debug)]
struct Matcher {
    /// Escaped contents, longest first, so that leftmost-first alternation finds the
    /// leftmost-longest match like HF's Aho-Corasick automaton.
    alternation: Regex,
    tokens: HashMap<String, (u32, AddedToken)>,
    word_char: Regex,
}

impl AddedTokens {
    /// Assigns ids the way HF does when it loads tokenizer.json (the `id` written in the file is
    /// only a hint there): a content already in the model's vocabulary keeps its vocab id, any
    /// other gets the next id from the vocabulary's length on. Empty contents are ignored.
    pub(super) fn new(tokens: Vec<AddedToken>, vocab: &HashMap<String, u32>) -> Result<Self> {
        let mut next_new_id =
            u32::try_from(vocab.len()).map_err(|_| Error::Tokenizer("the vocabulary has too many tokens".into()))?;
        let mut ids_by_content = HashMap::new();
        let mut by_id = BTreeMap::new();
        for token in tokens.into_iter().filter(|token| !token.content.is_empty()) {
            let known = ids_by_content.get(&token.content).or_else(|| vocab.get(&token.content));
            let id = match known {
                Some(&id) => id,
                None => {
                    let id = next_new_id;
                    next_new_id = next_new_id.saturating_add(1);
                    id
                }
            };
            ids_by_content.insert(token.content.clone(), id);
            by_id.insert(id, token);
        }
        let (normalized, raw): (Vec<_>, Vec<_>) =
            by_id.iter().map(|(&id, token)| (id, token.clone())).partition(|(_, token)| token.normalized);
        Ok(Self { ids_by_content, by_id, raw_pass: Matcher::new(raw)?, normalized_pass: Matcher::new(normalized)? })
    }

    pub(super) fn id(&self, content: &str) -> Option<u32> {
        self.ids_by_content.get(content).copied()
    }

    /// Every added token with its id, for building the decode table.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &str)> {
        self.by_id.iter().map(|(&id, token)| (id, token.content.as_str()))
    }

    /// Splits `text` into added tokens and the text between them (never empty).
    pub(super) fn split<'t>(&self, text: &'t str) -> Vec<Segment<'t>> {
        let mut first_pass = Vec::new();
        split_with(self.raw_pass.as_ref(), text, &mut first_pass);
        let mut segments = Vec::with_capacity(first_pass.len());
        for segment in first_pass {
            match segment {
                Segment::Text(text) => {
                    split_with(self.normalized_pass.as_ref(), text, &mut segments);
                }
                added @ Segment::Added(_) => segments.push(added),
            }
        }
        segments
    }
}

impl Matcher {
    fn new(mut tokens: Vec<(u32, AddedToken)>) -> Result<Option<Self>> {
        if tokens.is_empty() {
            return Ok(None);
        }
        tokens.sort_by_key(|(_, token)| std::cmp::Reverse(token.content.len()));
        let alternatives: Vec<String> = tokens.iter().map(|(_, token)| regex::escape(&token.content)).collect();
        let alternation = Regex::new(&alternatives.join("|"))
            .map_err(|e| Error::Tokenizer(format!("cannot build a matcher for the added tokens: {e}")))?;
        let word_char = Regex::new(r"\A\w\z")
            .map_err(|e| Error::Tokenizer(format!("cannot build the word-character class: {e}")))?;
        let tokens = tokens.into_iter().map(|(id, token)| (token.content.clone(), (id, token))).collect();
        Ok(Some(Self { alternation, tokens, word_char }))
    }

    fn is_word_char(&self, c: Option<char>) -> bool {
        c.is_some_and(|c| self.word_char.is_match(c.encode_utf8(&mut [0; 4])))
    }
}

/// One matching pass over `text`, appending to `segments`; mirrors HF's `find_matches`,
/// including that a whitespace-stripping token may reach into text already consumed.
fn split_with<'t>(matcher: Option<&Matcher>, text: &'t str, segments: &mut Vec<Segment<'t>>) {
    let mut consumed = 0;
    if let Some(matcher) = matcher {
        for found in matcher.alternation.find_iter(text) {
            let Some((id, token)) = matcher.tokens.get(found.as_str()) else {
                continue;
            };
            let (before, after) = (&text[..found.start()], &text[found.end()..]);
            if token.single_word
                && (matcher.is_word_char(before.chars().next_back()) || matcher.is_word_char(after.chars().next()))
            {
                continue;
            }
            let start = if token.lstrip { before.trim_end().len().max(consumed) } else { found.start() };
            let end = if token.rstrip { text.len() - after.trim_start().len() } else { found.end() };
            if consumed < start {
                segments.push(Segment::Text(&text[consumed..start]));
            }
            segments.push(Segment::Added(*id));
            consumed = end;
        }
    }
    if consumed < text.len() {
        segments.push(Segment::Text(&text[consumed..]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(content: &str) -> AddedToken {
        AddedToken { content: content.into(), ..AddedToken::default() }
    }

    fn vocab() -> HashMap<String, u32> {
        [("a", 0), ("b", 1), ("<|endoftext|>", 2)].into_iter().map(|(t, id)| (t.to_string(), id)).collect()
    }

    #[test]
    fn ids_come_from_the_vocab_or_follow_it() {
        let added = AddedTokens::new(vec![token("<|endoftext|>"), token("<pad>"), token(""), token("<pad>")], &vocab())
            .unwrap();
        assert_eq!(added.id("<|endoftext|>"), Some(2));
        assert_eq!(added.id("<pad>"), Some(3));
        assert_eq!(added.iter().count(), 2);
    }

    #[test]
    fn splits_out_tokens_leftmost_longest() {
        let added = AddedTokens::new(vec![token("<|endoftext|>"), token("<|end"), token("<pad>")], &vocab()).unwrap();
        assert_eq!(
            added.split("x<|endoftext|><|end <pad>"),
            [Segment::Text("x"), Segment::Added(2), Segment::Added(3), Segment::Text(" "), Segment::Added(4)]
        );
        assert!(added.split("").is_empty());
    }

    #[test]
    fn strip_flags_swallow_whitespace() {
        let stripping = AddedToken { lstrip: true, rstrip: true, ..token("<m>") };
        let added = AddedTokens::new(vec![stripping], &vocab()).unwrap();
        assert_eq!(added.split("a  <m>\n b"), [Segment::Text("a"), Segment::Added(3), Segment::Text("b")]);
    }

    #[test]
    fn single_word_tokens_need_non_word_neighbours() {
        let word = AddedToken { single_word: true, ..token("cat") };
        let added = AddedTokens::new(vec![word], &vocab()).unwrap();
        assert_eq!(added.split("cats cat."), [Segment::Text("cats "), Segment::Added(3), Segment::Text(".")]);
    }

    #[test]
    fn raw_tokens_are_matched_before_normalized_ones() {
        let normalized = AddedToken { normalized: true, ..token("<|endoftext|>") };
        let added = AddedTokens::new(vec![normalized, token("text|>")], &vocab()).unwrap();
        assert_eq!(added.split("<|endoftext|>"), [Segment::Text("<|endof"), Segment::Added(3)]);
    }
}
