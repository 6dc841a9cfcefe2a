//! Added tokens (`<|endoftext|>` and friends): found in the raw text before any pre-tokenization
//! and mapped straight to their ids, the way HF's `AddedVocabulary` does by default.
//!
//! HF matches in two passes: first the tokens flagged `normalized: false` against the raw text,
//! then the `normalized: true` ones inside the text left between those matches. (Without a
//! normalizer, which is all gptlens accepts, both passes see the same characters; only the order
//! differs.) Each pass takes leftmost-longest, non-overlapping matches and then applies the
//! token's `single_word`, `lstrip` and `rstrip` flags.
//!
//! A pass looks for its tokens only where the text has one's first byte: added tokens are few,
//! or (Gemma's thousands of `<unused…>`) mostly start alike, and special markers are rare in text.

use std::collections::BTreeMap;

use super::bpe::Vocab;
use super::unicode_classes::is_word;
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
    ids_by_content: Vocab,
    /// Id → token; when two contents end up on one id the later one wins, as in HF.
    by_id: BTreeMap<u32, AddedToken>,
    raw_pass: Option<Matcher>,
    normalized_pass: Option<Matcher>,
}

#[derive(Clone, Debug)]
struct Matcher {
    /// The pass's tokens, longest first (equal lengths in id order), so that taking the first
    /// that matches at the leftmost position that has one finds the leftmost-longest match, as
    /// HF's Aho-Corasick automaton does.
    tokens: Vec<(u32, AddedToken)>,
    /// For each first byte (256 of them), the indices into `tokens` of the tokens that start
    /// with it, in order: looked up at every byte of the text.
    starting_with: Vec<Vec<usize>>,
}

impl AddedTokens {
    /// Assigns ids the way HF does when it loads tokenizer.json (the `id` written in the file is
    /// only a hint there): a content already in the model's vocabulary keeps its vocab id, any
    /// other gets the next id from the vocabulary's length on. Empty contents are ignored.
    pub(super) fn new(tokens: Vec<AddedToken>, vocab: &Vocab) -> Result<Self> {
        let mut next_new_id =
            u32::try_from(vocab.len()).map_err(|_| Error::Tokenizer("the vocabulary has too many tokens".into()))?;
        let mut ids_by_content = Vocab::default();
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
        Ok(Self { ids_by_content, by_id, raw_pass: Matcher::new(raw), normalized_pass: Matcher::new(normalized) })
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
    fn new(mut tokens: Vec<(u32, AddedToken)>) -> Option<Self> {
        if tokens.is_empty() {
            return None;
        }
        tokens.sort_by_key(|(_, token)| std::cmp::Reverse(token.content.len()));
        let mut starting_with = vec![Vec::new(); 256];
        for (i, (_, token)) in tokens.iter().enumerate() {
            if let Some(&first) = token.content.as_bytes().first() {
                starting_with[usize::from(first)].push(i);
            }
        }
        Some(Self { tokens, starting_with })
    }

    /// The leftmost-longest token in `text` at or after byte `from`: its start and its index in
    /// `tokens`. A token starts with a UTF-8 lead byte, so a match always starts on a character.
    fn find_at(&self, text: &str, from: usize) -> Option<(usize, usize)> {
        let bytes = text.as_bytes();
        (from..bytes.len()).find_map(|at| {
            let candidates = &self.starting_with[usize::from(bytes[at])];
            let rest = &bytes[at..];
            candidates.iter().find(|&&i| rest.starts_with(self.tokens[i].1.content.as_bytes())).map(|&i| (at, i))
        })
    }
}

/// One matching pass over `text`, appending to `segments`; mirrors HF's `find_matches`,
/// including that a whitespace-stripping token may reach into text already consumed.
fn split_with<'t>(matcher: Option<&Matcher>, text: &'t str, segments: &mut Vec<Segment<'t>>) {
    let mut consumed = 0;
    if let Some(matcher) = matcher {
        // Matches never overlap: the next is looked for after the end of the last, also when
        // that one was passed over (a `single_word` token inside a word).
        let mut search = 0;
        while let Some((found_start, i)) = matcher.find_at(text, search) {
            let (id, token) = &matcher.tokens[i];
            let found_end = found_start + token.content.len();
            search = found_end;
            let (before, after) = (&text[..found_start], &text[found_end..]);
            let is_word_char = |c: Option<char>| c.is_some_and(is_word);
            if token.single_word && (is_word_char(before.chars().next_back()) || is_word_char(after.chars().next())) {
                continue;
            }
            let start = if token.lstrip { before.trim_end().len().max(consumed) } else { found_start };
            let end = if token.rstrip { text.len() - after.trim_start().len() } else { found_end };
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

    fn vocab() -> Vocab {
        [("a", 0), ("b", 1), ("<|endoftext|>", 2)].into_iter().map(|(t, id)| (t.to_string(), id)).collect()
    }

    /// What the regex alternation this matcher replaces gave (escaped contents, longest first,
    /// leftmost-first `find_iter`; `\w` for `single_word`): the matcher's oracle.
    fn regex_split<'t>(tokens: &[(u32, AddedToken)], text: &'t str) -> Vec<Segment<'t>> {
        let mut sorted = tokens.to_vec();
        sorted.sort_by_key(|(_, token)| std::cmp::Reverse(token.content.len()));
        let alternatives: Vec<String> = sorted.iter().map(|(_, token)| regex::escape(&token.content)).collect();
        let alternation = regex::Regex::new(&alternatives.join("|")).unwrap();
        let word = regex::Regex::new(r"\A\w\z").unwrap();
        let is_word_char = |c: Option<char>| c.is_some_and(|c| word.is_match(c.encode_utf8(&mut [0; 4])));
        let (mut segments, mut consumed) = (Vec::new(), 0);
        for found in alternation.find_iter(text) {
            let (id, token) = sorted.iter().find(|(_, token)| token.content == found.as_str()).unwrap();
            let (before, after) = (&text[..found.start()], &text[found.end()..]);
            if token.single_word && (is_word_char(before.chars().next_back()) || is_word_char(after.chars().next())) {
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
        if consumed < text.len() {
            segments.push(Segment::Text(&text[consumed..]));
        }
        segments
    }

    /// Random token sets (prefixes of each other, flags of every kind) over random text: the
    /// matcher finds what the regex alternation found.
    #[test]
    fn the_matcher_finds_what_the_regex_alternation_found() {
        let texts = crate::tokenizer::pretokenize::tests::random_texts(4_000, 7);
        let contents = ["<", "<|", "<|e|>", "<|e", "e|>", "ab", "a", "b a", "é", "中<", "\n", "ſt", "1"];
        for (round, text) in texts.iter().enumerate() {
            let pick = |k: usize| (round.wrapping_mul(2_654_435_761) >> k) & 1 == 1;
            let tokens: Vec<(u32, AddedToken)> = contents
                .iter()
                .enumerate()
                .filter(|&(i, _)| pick(i))
                .map(|(i, content)| {
                    let flags = round.wrapping_add(i * 7);
                    let token = AddedToken {
                        single_word: flags % 3 == 0,
                        lstrip: flags % 5 == 0,
                        rstrip: flags % 4 == 0,
                        ..token(content)
                    };
                    (100 + i as u32, token)
                })
                .collect();
            if tokens.is_empty() {
                continue;
            }
            let mut segments = Vec::new();
            split_with(Matcher::new(tokens.clone()).as_ref(), text, &mut segments);
            assert_eq!(segments, regex_split(&tokens, text), "{text:?} with {tokens:?}");
        }
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
