//! SentencePiece BPE vocabularies (`tokenizer.ggml.model = llama`: LLaMA 1/2, TinyLlama, Gemma),
//! encoded id for id as transformers encodes them from the same GGUF
//! (`AutoTokenizer.from_pretrained(dir, gguf_file=…)`, transformers 5,
//! `integrations/gguf/gguf_tokenizer_mapping.py`).
//!
//! transformers rebuilds such a vocabulary as a `tokenizers` BPE with byte fallback whose merges
//! it derives from the tokens (`generate_merges`): every split of a token into two tokens is a
//! merge, ranked by the merged token's score (best first), then by the longer left part, then the
//! longer right part, then token order. gptlens does not list those merges (a 262k vocabulary
//! has millions of splits): it ranks a candidate pair when it meets one, by the same key
//! ([`Spm::rank`]), and merges lowest rank first, leftmost among equals, as BPE does.
//!
//! * **Spaces** become `▁` (U+2581). LLaMA vocabularies also get a `▁` in front of the text
//!   when it does not start with one (transformers' `Metaspace`, prepend scheme "first": only at
//!   the very start of the input, not after a special token). Gemma gets none.
//! * **Gemma**: ranks follow the order of tokens in the file rather than their scores, and a
//!   token made of whitespace with a space in it (`"  "`) is respelled as that many `▁`, both as
//!   transformers' `gemma_tokenizer` does.
//! * **Byte fallback**: a character not in the vocabulary becomes the `<0xXX>` tokens of its
//!   UTF-8 bytes, or `<unk>` if one is missing (runs of unknown characters fuse into one).
//! * **Added tokens**: `CONTROL` tokens (and the named special tokens) and `USER_DEFINED` ones
//!   (Gemma's `\n\n`, `<td>`, …) are matched whole in the raw text first.
//! * **BOS / EOS** as `add_bos_token` / `add_eos_token` say; a SentencePiece file that does not
//!   say gets BOS, as llama.cpp and transformers do.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::added_tokens::{AddedToken, AddedTokens, Segment};
use super::bpe::Vocab;
use super::SpecialTokens;
use crate::error::{Error, Result};

/// What a space becomes.
const SPACE: char = '\u{2581}';

/// How a vocabulary's merges are ranked and how text is prepared; picked by architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpmFlavor {
    /// LLaMA-style: ranks by score, `▁` prepended to the input.
    Llama,
    /// Gemma: ranks by token order, nothing prepended, whitespace tokens respelled.
    Gemma,
}

/// A SentencePiece vocabulary as described by GGUF metadata, borrowed.
pub(super) struct SpmVocab<'a> {
    pub(super) tokens: &'a [&'a str],
    pub(super) scores: Option<&'a [f32]>,
    pub(super) token_types: &'a [i32],
    pub(super) flavor: SpmFlavor,
    pub(super) special: SpecialTokens,
    pub(super) prepend: Option<u32>,
    pub(super) append: Option<u32>,
}

/// Where a `▁` goes in front of a stretch of text (between added tokens) before it is merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PrependSpace {
    Never,
    /// Before the start of the input only, unless it starts with a space (`Metaspace`, prepend
    /// scheme "first"; LLaMA's GGUF vocabularies).
    First,
    /// Before every stretch that does not start with a space (`Metaspace`, "always").
    Always,
    /// Before every stretch, space or not (the `Prepend("▁")` normalizer).
    Every,
}

/// How merges are ranked: derived from the tokens as transformers' `generate_merges` does (GGUF),
/// or listed (tokenizer.json), first listed first.
#[derive(Clone)]
pub(super) enum Ranking {
    /// Id → first sort key of a merge into that token: its score's place (LLaMA, best 0) or its
    /// id (Gemma).
    Generated {
        primary: Vec<u32>,
    },
    Listed(HashMap<(u32, u32), u32>),
}

/// Everything a [`Spm`] is built from, whichever file described it.
pub(super) struct SpmParts {
    /// Id → spelling (with `▁`); a later token spelled like an earlier one wins, as in a dict.
    pub(super) pieces: Vec<Box<str>>,
    /// Ids of byte-fallback tokens (`<0x41>`), which decode to their byte.
    pub(super) byte_tokens: Vec<u32>,
    pub(super) ranking: Ranking,
    pub(super) added: Vec<AddedToken>,
    pub(super) unknown: Option<u32>,
    /// A run of characters that all become the unknown token becomes one.
    pub(super) fuse_unknown: bool,
    pub(super) prepend_space: PrependSpace,
    /// Metaspace's `split`: each `▁` starts a new word, and no merge crosses words.
    pub(super) split_words: bool,
    /// A word that is a token as a whole is taken whole before any merge (`ignore_merges`).
    pub(super) whole_words_first: bool,
    pub(super) special: SpecialTokens,
    pub(super) prepend: Option<u32>,
    pub(super) append: Option<u32>,
}

#[derive(Clone)]
pub struct Spm {
    ids: Vocab,
    /// Id → spelling and length in characters.
    pieces: Vec<Box<str>>,
    lengths: Vec<u32>,
    ranking: Ranking,
    byte_ids: [Option<u32>; 256],
    unknown: Option<u32>,
    fuse_unknown: bool,
    added: AddedTokens,
    prepend_space: PrependSpace,
    split_words: bool,
    whole_words_first: bool,
    /// Id → the bytes it decodes to (`▁` as a space, `<0xXX>` as its byte).
    decoded: Vec<Box<[u8]>>,
    prepend: Option<u32>,
    append: Option<u32>,
    special: SpecialTokens,
}

impl std::fmt::Debug for Spm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spm")
            .field("vocab_size", &self.pieces.len())
            .field("prepend_space", &self.prepend_space)
            .field("split_words", &self.split_words)
            .field("special", &self.special)
            .finish_non_exhaustive()
    }
}

/// `tokenizer.ggml.token_type` of byte-fallback tokens (`<0x41>`).
const TOKEN_TYPE_BYTE: i32 = 6;
const TOKEN_TYPE_CONTROL: i32 = 3;
const TOKEN_TYPE_USER_DEFINED: i32 = 4;

impl Spm {
    /// From a GGUF's SentencePiece vocabulary, as transformers' GGUF loader builds it.
    pub(super) fn new(v: SpmVocab) -> Result<Spm> {
        let n = v.tokens.len();
        if n == 0 {
            return Err(Error::Tokenizer("the vocabulary is empty".into()));
        }
        if v.flavor == SpmFlavor::Llama && v.scores.is_none_or(|s| s.len() != n) {
            return Err(Error::Tokenizer(format!(
                "tokenizer.ggml.scores must give one score for each of the {n} tokens of a SentencePiece vocabulary"
            )));
        }
        let spell = |token: &str| -> String {
            if v.flavor == SpmFlavor::Gemma && token.contains(' ') && token.trim().is_empty() {
                SPACE.to_string().repeat(token.chars().count())
            } else {
                token.to_string()
            }
        };
        let pieces: Vec<Box<str>> = v.tokens.iter().map(|t| spell(t).into_boxed_str()).collect();
        let primary = match (v.flavor, v.scores) {
            (SpmFlavor::Llama, Some(scores)) => score_places(scores),
            _ => (0u32..).take(n).collect(),
        };
        let kind = |id: u32| v.token_types.get(id as usize).copied().unwrap_or(1);
        let ids = 0..n as u32;
        let byte_tokens = ids.clone().filter(|&id| kind(id) == TOKEN_TYPE_BYTE).collect();
        let added = ids
            .filter(|&id| matches!(kind(id), TOKEN_TYPE_CONTROL | TOKEN_TYPE_USER_DEFINED))
            .chain([v.special.bos, v.special.eos, v.special.unk, v.special.pad].into_iter().flatten())
            .filter_map(|id| pieces.get(id as usize))
            .map(|piece| AddedToken { content: piece.to_string(), normalized: false, ..AddedToken::default() })
            .collect();
        let unknown = pieces.iter().position(|p| &**p == "<unk>").map(|id| id as u32);
        Spm::from_parts(SpmParts {
            pieces,
            byte_tokens,
            ranking: Ranking::Generated { primary },
            added,
            unknown,
            fuse_unknown: true,
            prepend_space: if v.flavor == SpmFlavor::Llama { PrependSpace::First } else { PrependSpace::Never },
            split_words: false,
            whole_words_first: false,
            special: v.special,
            prepend: v.prepend,
            append: v.append,
        })
    }

    pub(super) fn from_parts(parts: SpmParts) -> Result<Spm> {
        let mut pieces = parts.pieces;
        let mut ids = Vocab::with_capacity_and_hasher(pieces.len(), Default::default());
        for (id, piece) in (0u32..).zip(&pieces) {
            ids.insert(piece.to_string(), id);
        }
        let added = AddedTokens::new(parts.added, &ids)?;
        // Added tokens not in the vocabulary follow it (tokenizer.json's `<bos>` of Gemma, say).
        for (id, content) in added.iter() {
            let id = id as usize;
            if id >= pieces.len() {
                pieces.resize(id + 1, "".into());
                pieces[id] = content.into();
            }
        }
        let lengths = pieces.iter().map(|p| u32::try_from(p.chars().count()).unwrap_or(u32::MAX)).collect();
        let byte_ids = std::array::from_fn(|byte| ids.get(&format!("<0x{byte:02X}>")).copied());
        let mut decoded: Vec<Box<[u8]>> =
            pieces.iter().map(|p| p.replace(SPACE, " ").into_bytes().into_boxed_slice()).collect();
        for id in parts.byte_tokens {
            if let Some(byte) = pieces.get(id as usize).and_then(|p| byte_value(p)) {
                decoded[id as usize] = Box::from([byte]);
            }
        }
        if let Ranking::Generated { primary } = &parts.ranking {
            if primary.len() < pieces.len() {
                return Err(Error::Tokenizer("every token needs a merge rank".into()));
            }
        }
        Ok(Spm {
            ids,
            pieces,
            lengths,
            ranking: parts.ranking,
            byte_ids,
            unknown: parts.unknown,
            fuse_unknown: parts.fuse_unknown,
            added,
            prepend_space: parts.prepend_space,
            split_words: parts.split_words,
            whole_words_first: parts.whole_words_first,
            decoded,
            prepend: parts.prepend,
            append: parts.append,
            special: parts.special,
        })
    }

    pub(super) fn special_tokens(&self) -> SpecialTokens {
        self.special
    }

    pub(super) fn vocab_size(&self) -> usize {
        self.pieces.len()
    }

    pub(super) fn token_id(&self, token: &str) -> Option<u32> {
        self.ids.get(token).copied()
    }

    pub(super) fn token_bytes(&self, id: u32) -> Result<&[u8]> {
        self.decoded.get(id as usize).map(|b| &b[..]).ok_or(Error::TokenOutOfRange { id, vocab: self.vocab_size() })
    }

    pub(super) fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::with_capacity(text.len() / 3 + 2);
        ids.extend(self.prepend);
        let mut word = Vec::new();
        for segment in self.added.split(text) {
            match segment {
                Segment::Added(id) => ids.push(id),
                Segment::Text(piece) => {
                    let prepend = match self.prepend_space {
                        PrependSpace::Never => false,
                        PrependSpace::First => piece.as_ptr() == text.as_ptr() && !piece.starts_with(' '),
                        PrependSpace::Always => !piece.starts_with(' '),
                        PrependSpace::Every => true,
                    };
                    let mut normalized = String::with_capacity(piece.len() + 3);
                    if prepend {
                        normalized.push(SPACE);
                    }
                    normalized.extend(piece.chars().map(|c| if c == ' ' { SPACE } else { c }));
                    if self.split_words {
                        // Each word starts at a `▁` (the first may not).
                        let mut start = 0;
                        for (at, _) in normalized.match_indices(SPACE).filter(|&(at, _)| at > 0) {
                            self.encode_word(&normalized[start..at], &mut word, &mut ids);
                            start = at;
                        }
                        self.encode_word(&normalized[start..], &mut word, &mut ids);
                    } else {
                        self.encode_word(&normalized, &mut word, &mut ids);
                    }
                }
            }
        }
        ids.extend(self.append);
        ids
    }

    /// One character a symbol (or its byte tokens, or `<unk>`), then BPE merges.
    fn encode_word(&self, text: &str, word: &mut Vec<Symbol>, ids: &mut Vec<u32>) {
        if self.whole_words_first {
            if let Some(&id) = self.ids.get(text) {
                ids.push(id);
                return;
            }
        }
        word.clear();
        let mut previous_unknown = false;
        for c in text.chars() {
            let mut utf8 = [0u8; 4];
            let spelled = c.encode_utf8(&mut utf8);
            if let Some(&id) = self.ids.get(spelled as &str) {
                word.push(Symbol::new(id));
                previous_unknown = false;
                continue;
            }
            let bytes: Option<Vec<u32>> = spelled.bytes().map(|b| self.byte_ids[b as usize]).collect();
            match (bytes, self.unknown) {
                (Some(bytes), _) => {
                    word.extend(bytes.into_iter().map(Symbol::new));
                    previous_unknown = false;
                }
                (None, Some(unk)) if !(previous_unknown && self.fuse_unknown) => {
                    word.push(Symbol::new(unk));
                    previous_unknown = true;
                }
                (None, _) => {}
            }
        }
        self.merge(word);
        ids.extend(word.iter().filter(|s| s.alive).map(|s| s.id));
    }

    /// The merged token and sort key of the pair (`left`, `right`), when their concatenation is a
    /// token: `generate_merges`'s order (see the module docs), lowest first. The merged token and
    /// the left part's length fix the pair, so the key orders every merge apart.
    fn rank(&self, left: u32, right: u32, joined: &mut String) -> Option<(u128, u32)> {
        let (l, r) = (self.pieces.get(left as usize)?, self.pieces.get(right as usize)?);
        joined.clear();
        joined.push_str(l);
        joined.push_str(r);
        let merged = *self.ids.get(joined.as_str())?;
        match &self.ranking {
            Ranking::Listed(ranks) => ranks.get(&(left, right)).map(|&rank| (u128::from(rank), merged)),
            Ranking::Generated { primary } => {
                let longer_first = |id: u32| u128::from(u32::MAX - self.lengths[id as usize]);
                let key = (u128::from(primary[merged as usize]) << 96)
                    | (longer_first(left) << 64)
                    | (longer_first(right) << 32)
                    | u128::from(merged);
                Some((key, merged))
            }
        }
    }

    /// BPE over the symbols: always the lowest-ranked adjacent pair, leftmost among equals (HF's
    /// `Word::merge_all`); a merged-away symbol stays in place, unlinked.
    fn merge(&self, word: &mut [Symbol]) {
        let n = word.len();
        for (i, symbol) in word.iter_mut().enumerate() {
            symbol.previous = i.checked_sub(1);
            symbol.next = Some(i + 1).filter(|&j| j < n);
        }
        let mut joined = String::new();
        let mut queue = BinaryHeap::new();
        for i in 0..n.saturating_sub(1) {
            if let Some((rank, merged)) = self.rank(word[i].id, word[i + 1].id, &mut joined) {
                queue.push(Reverse((rank, i, merged)));
            }
        }
        while let Some(Reverse((_, i, merged))) = queue.pop() {
            let Some(j) = word[i].next.filter(|_| word[i].alive) else { continue };
            // A stale entry: one side has merged with something else since it was queued.
            if self.rank(word[i].id, word[j].id, &mut joined).map(|(_, m)| m) != Some(merged) {
                continue;
            }
            word[i].id = merged;
            word[j].alive = false;
            word[i].next = word[j].next;
            if let Some(k) = word[j].next {
                word[k].previous = Some(i);
            }
            for (a, b) in [(word[i].previous, Some(i)), (Some(i), word[i].next)] {
                if let (Some(a), Some(b)) = (a, b) {
                    if let Some((rank, merged)) = self.rank(word[a].id, word[b].id, &mut joined) {
                        queue.push(Reverse((rank, a, merged)));
                    }
                }
            }
        }
    }
}

#[derive(Clone, Copy)]
struct Symbol {
    id: u32,
    alive: bool,
    previous: Option<usize>,
    next: Option<usize>,
}

impl Symbol {
    fn new(id: u32) -> Symbol {
        Symbol { id, alive: true, previous: None, next: None }
    }
}

/// Each token's place when tokens are sorted by score, best first (equal scores share a place).
fn score_places(scores: &[f32]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let mut places = vec![0u32; scores.len()];
    let mut place = 0u32;
    for (k, &id) in order.iter().enumerate() {
        if k > 0 && scores[id] != scores[order[k - 1]] {
            place = k as u32;
        }
        places[id] = place;
    }
    places
}

/// The byte of a byte-fallback token, `<0x41>` → 0x41.
fn byte_value(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok().filter(|_| hex.len() == 2)
}
