//! Byte-level BPE: the tokenizer of GPT-2 and its descendants, as Python `tokenizers` runs it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

use super::added_tokens::{AddedToken, AddedTokens, Segment};
use super::byte_level::{token_bytes, BYTE_TO_CHAR};
use super::chat::ChatMl;
use super::pretokenize::{DigitPieces, SplitPattern, Splitter};
use super::SpecialTokens;
use crate::error::{Error, Result};

/// Ids at or above this are refused: a corrupt id would otherwise make the decode table
/// allocate gigabytes. The largest real vocabularies have a few hundred thousand tokens.
pub(super) const MAX_VOCAB_SIZE: usize = 1 << 24;

/// Everything a tokenizer file says about encoding, already checked for features gptlens lacks.
pub(super) struct BpeConfig {
    /// Token spelled in the byte alphabet (`Ġthe`) → id.
    pub(super) vocab: Vocab,
    /// Pairs in priority order: the earlier a merge, the sooner it applies.
    pub(super) merges: Vec<(String, String)>,
    pub(super) added_tokens: Vec<AddedToken>,
    /// Prepend a space to text that does not start with one, so the first word is spelled like
    /// every other word.
    pub(super) add_prefix_space: bool,
    /// Split with this pattern (GPT-2's, LLaMA 3's, Qwen2's); without one each stretch of text is
    /// one word.
    pub(super) split: Option<SplitPattern>,
    /// Before anything else, make every numeric character a piece of its own (HF's
    /// `Digits(individual_digits)`, SmolLM2's pre-tokenizer).
    pub(super) split_digits: bool,
    pub(super) unknown_token: Option<String>,
    pub(super) fuse_unknown: bool,
    /// Emit a word that is itself in the vocabulary as that token, without merging (Llama 3).
    pub(super) whole_words_first: bool,
}

/// A byte-level BPE tokenizer loaded from tokenizer.json or vocab.json + merges.txt.
#[derive(Clone)]
pub struct BpeTokenizer {
    vocab: Vocab,
    added: AddedTokens,
    add_prefix_space: bool,
    splitter: Option<Splitter>,
    split_digits: bool,
    merges: MergeTable,
    /// The vocabulary id of each byte's single-character token.
    byte_ids: [Option<u32>; 256],
    unknown: Option<UnknownToken>,
    whole_words_first: bool,
    /// Id → the bytes it decodes to; `None` for ids no token has.
    decoded: Vec<Option<Box<[u8]>>>,
    /// Ids that every encoding starts / ends with (a GGUF's `add_bos_token` / `add_eos_token`).
    prepend: Option<u32>,
    append: Option<u32>,
    special: SpecialTokens,
    chat: Option<ChatMl>,
}

#[derive(Clone, Copy, Debug)]
struct UnknownToken {
    id: u32,
    /// Several unknown characters in a row become one unknown token.
    fuse: bool,
}

impl BpeTokenizer {
    pub(super) fn new(mut config: BpeConfig) -> Result<Self> {
        let merges = std::mem::take(&mut config.merges);
        let pairs = merges.iter().map(|(left, right)| Ok((left.as_str(), right.as_str())));
        Self::with_merges(config, pairs)
    }

    /// Like [`BpeTokenizer::new`], with the merges (`config.merges` is ignored) borrowed from
    /// elsewhere, in priority order; an `Err` among them is returned as is. A GGUF's 49k merges
    /// need no strings of their own this way.
    pub(super) fn with_merges<'m>(
        config: BpeConfig,
        merges: impl IntoIterator<Item = Result<(&'m str, &'m str)>>,
    ) -> Result<Self> {
        let BpeConfig {
            vocab,
            merges: _,
            added_tokens,
            add_prefix_space,
            split,
            split_digits,
            unknown_token,
            fuse_unknown,
            whole_words_first,
        } = config;
        if vocab.is_empty() {
            return Err(Error::Tokenizer("the vocabulary is empty".into()));
        }
        if let Some((token, &id)) = vocab.iter().find(|(_, &id)| id as usize >= MAX_VOCAB_SIZE) {
            return Err(Error::Tokenizer(format!(
                "token `{token}` has id {id}; gptlens accepts ids below {MAX_VOCAB_SIZE}"
            )));
        }
        let merges = MergeTable::new(&vocab, merges)?;
        let added = AddedTokens::new(added_tokens, &vocab)?;
        let unknown = match unknown_token {
            None => None,
            Some(token) => match vocab.get(&token) {
                Some(&id) => Some(UnknownToken { id, fuse: fuse_unknown }),
                None => return Err(Error::Tokenizer(format!("the unknown token `{token}` is not in the vocabulary"))),
            },
        };
        let byte_ids = std::array::from_fn(|byte| vocab.get(BYTE_TO_CHAR[byte].to_string().as_str()).copied());
        let splitter = split.map(Splitter::new);
        let decoded = decode_table(&vocab, &added)?;
        Ok(Self {
            vocab,
            added,
            add_prefix_space,
            splitter,
            split_digits,
            merges,
            byte_ids,
            unknown,
            whole_words_first,
            decoded,
            prepend: None,
            append: None,
            special: SpecialTokens::default(),
            chat: None,
        })
    }

    /// Sets what a GGUF (or tokenizer.json's post-processor) says besides the vocabulary: the
    /// special tokens' ids, whether encodings start with BOS / end with EOS, and the chat template.
    pub(super) fn set_extras(
        &mut self,
        special: SpecialTokens,
        prepend: Option<u32>,
        append: Option<u32>,
        chat: Option<ChatMl>,
    ) {
        self.special = special;
        self.prepend = prepend;
        self.append = append;
        self.chat = chat;
    }

    pub(super) fn special_tokens(&self) -> SpecialTokens {
        self.special
    }

    pub(super) fn chat(&self) -> Option<&ChatMl> {
        self.chat.as_ref()
    }

    pub(super) fn vocab_size(&self) -> usize {
        self.decoded.len()
    }

    pub(super) fn token_id(&self, token: &str) -> Option<u32> {
        self.added.id(token).or_else(|| self.vocab.get(token).copied())
    }

    /// The bytes of one id; `Ok(None)` for an id inside the range that no token has, which
    /// decoding skips as HF does.
    pub(super) fn token_bytes(&self, id: u32) -> Result<Option<&[u8]>> {
        match self.decoded.get(id as usize) {
            Some(bytes) => Ok(bytes.as_deref()),
            None => Err(Error::TokenOutOfRange { id, vocab: self.vocab_size() }),
        }
    }

    pub(super) fn encode(&self, text: &str) -> Vec<u32> {
        let mut word = Word::default();
        self.encode_pieces(text, &mut |piece, ids| self.encode_word(piece, &mut word, ids))
    }

    /// [`Self::encode`], taking each piece's merges from `memo` when an earlier call met the same
    /// piece. Merging is most of what encoding costs and a piece's ids depend on its bytes
    /// alone, so after an edit only the pieces the edit touched are merged again; the rest of
    /// the pass (added tokens, splitting) runs over the whole text as before, so the ids are
    /// those of a full encode by construction.
    pub(super) fn encode_remembering(&self, text: &str, memo: &mut PieceMemo) -> Vec<u32> {
        let mut word = Word::default();
        let mut pieces = 0;
        let ids = self.encode_pieces(text, &mut |piece, ids| {
            pieces += 1;
            if let Some(known) = memo.ids.get(piece) {
                ids.extend_from_slice(known);
                return;
            }
            let start = ids.len();
            self.encode_word(piece, &mut word, ids);
            memo.ids.insert(piece.into(), ids[start..].into());
        });
        // Bounded by what the texts hold now: pieces of text long deleted are let go.
        if memo.ids.len() > 4 * pieces + PieceMemo::SLACK {
            memo.ids.clear();
        }
        ids
    }

    /// The ids of `text` with each pre-tokenized piece's ids from `encode_piece`.
    fn encode_pieces(&self, text: &str, encode_piece: &mut dyn FnMut(&str, &mut Vec<u32>)) -> Vec<u32> {
        let mut ids = Vec::with_capacity(text.len() / 2 + 2);
        ids.extend(self.prepend);
        for segment in self.added.split(text) {
            match segment {
                Segment::Added(id) => ids.push(id),
                Segment::Text(text) if self.split_digits => {
                    DigitPieces::new(text).for_each(|piece| self.encode_text(piece, encode_piece, &mut ids))
                }
                Segment::Text(text) => self.encode_text(text, encode_piece, &mut ids),
            }
        }
        ids.extend(self.append);
        ids
    }

    /// Encodes text that contains no added token (and, when digits are split, no digit or only
    /// one), as HF's ByteLevel pre-tokenizer does with each piece it is given: prefix a space if
    /// asked to, split with GPT-2's pattern, merge each word.
    fn encode_text(&self, text: &str, encode_piece: &mut dyn FnMut(&str, &mut Vec<u32>), ids: &mut Vec<u32>) {
        let prefixed;
        let text = if self.add_prefix_space && !text.starts_with(' ') {
            prefixed = format!(" {text}");
            prefixed.as_str()
        } else {
            text
        };
        match &self.splitter {
            Some(splitter) => splitter.split(text).for_each(|piece| encode_piece(piece, ids)),
            None => encode_piece(text, ids),
        }
    }

    /// Encodes one pre-tokenized piece, using `word` as scratch space.
    fn encode_word(&self, piece: &str, word: &mut Word, ids: &mut Vec<u32>) {
        if self.whole_words_first {
            let spelled: String = piece.bytes().map(|byte| BYTE_TO_CHAR[byte as usize]).collect();
            if let Some(&id) = self.vocab.get(&spelled) {
                ids.push(id);
                return;
            }
        }
        word.clear();
        let mut previous_was_unknown = false;
        for byte in piece.bytes() {
            let byte_id = self.byte_ids[byte as usize];
            match (byte_id, self.unknown) {
                (Some(id), _) => word.push(id),
                (None, Some(unknown)) if !(unknown.fuse && previous_was_unknown) => {
                    word.push(unknown.id);
                }
                // Already covered by the fused unknown token, or (without an unknown token)
                // dropped, as HF drops characters it can neither find nor replace.
                (None, _) => {}
            }
            previous_was_unknown = byte_id.is_none();
        }
        self.merges.apply(word, ids);
    }
}

/// The merged ids of the pieces a tokenizer met lately, for [`BpeTokenizer::encode_remembering`]:
/// typing into a prompt re-encodes a text that differs from the last one by a piece or two.
#[derive(Clone, Debug, Default)]
pub struct PieceMemo {
    ids: HashMap<Box<str>, Box<[u32]>>,
}

impl PieceMemo {
    /// Pieces kept beyond four per piece of the latest text before the memo starts over.
    const SLACK: usize = 1024;
}

impl fmt::Debug for BpeTokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BpeTokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("merges", &self.merges.rules.len())
            .field("added_tokens", &self.added.iter().count())
            .field("add_prefix_space", &self.add_prefix_space)
            .field("split_digits", &self.split_digits)
            .field("special", &self.special)
            .finish_non_exhaustive()
    }
}

/// Id → decoded bytes for every vocabulary and added token; added tokens win a shared id, as
/// they do in HF's `id_to_token`.
fn decode_table(vocab: &Vocab, added: &AddedTokens) -> Result<Vec<Option<Box<[u8]>>>> {
    let largest_id = vocab.values().copied().chain(added.iter().map(|(id, _)| id)).max().unwrap_or(0);
    let size = largest_id as usize + 1;
    if size > MAX_VOCAB_SIZE {
        return Err(Error::Tokenizer(format!(
            "the added tokens reach id {largest_id}; gptlens accepts ids below {MAX_VOCAB_SIZE}"
        )));
    }
    let mut decoded = vec![None; size];
    let tokens = vocab.iter().map(|(token, &id)| (id, token.as_str())).chain(added.iter());
    for (id, token) in tokens {
        if let Some(slot) = decoded.get_mut(id as usize) {
            *slot = Some(token_bytes(token).into_boxed_slice());
        }
    }
    Ok(decoded)
}

/// A vocabulary: token (spelled in the byte alphabet) → id.
pub(super) type Vocab = HashMap<String, u32, BuildHasherDefault<CheapHasher>>;

/// Which adjacent pair of tokens fuses into which token, and with what priority.
#[derive(Clone, Debug)]
struct MergeTable {
    rules: HashMap<(u32, u32), MergeRule, BuildHasherDefault<CheapHasher>>,
}

/// Pair lookups dominate encoding time, and vocabulary lookups building it (a vocabulary's
/// ~49k tokens, three lookups for each of its ~49k merges). The keys are small integers and
/// strings of the model's own vocabulary, not attacker-chosen, so FxHash's multiply-rotate (as
/// used inside rustc) is enough and several times cheaper than the default DoS-resistant
/// SipHash; the worst a crafted vocabulary can do is slow down its own loading. Strings are taken
/// eight bytes at a time.
#[derive(Clone, Copy, Default)]
pub(super) struct CheapHasher(u64);

impl CheapHasher {
    fn add(&mut self, n: u64) {
        const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(SEED);
    }
}

impl Hasher for CheapHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut le = [0; 8];
            le.copy_from_slice(word);
            self.add(u64::from_le_bytes(le));
        }
        for &byte in words.remainder() {
            self.add(u64::from(byte));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[derive(Clone, Copy, Debug)]
struct MergeRule {
    /// Position in the merge list: lower merges first.
    rank: u32,
    merged: u32,
}

/// A word being merged: a doubly linked list of tokens laid over its initial symbols, and the
/// queue of candidate merges. One is reused for every word of an `encode` call, because
/// allocating these buffers per word cost as much as the merging itself.
#[derive(Default)]
struct Word {
    symbols: Vec<Symbol>,
    /// (rank, left position, merged id): lowest rank first, then leftmost. An entry goes stale
    /// when either side is merged away, which popping detects by re-checking the pair.
    queue: BinaryHeap<Reverse<(u32, usize, u32)>>,
}

#[derive(Clone, Copy)]
struct Symbol {
    id: u32,
    previous: Option<usize>,
    next: Option<usize>,
    merged_into_previous: bool,
}

impl Word {
    fn clear(&mut self) {
        self.symbols.clear();
        self.queue.clear();
    }

    fn push(&mut self, id: u32) {
        let position = self.symbols.len();
        if let Some(last) = self.symbols.last_mut() {
            last.next = Some(position);
        }
        self.symbols.push(Symbol { id, previous: position.checked_sub(1), next: None, merged_into_previous: false });
    }
}

impl MergeTable {
    /// Resolves each pair to ids. A pair listed twice keeps its last rank, like HF's map.
    fn new<'m>(vocab: &Vocab, merges: impl IntoIterator<Item = Result<(&'m str, &'m str)>>) -> Result<Self> {
        let merges = merges.into_iter();
        let mut rules = HashMap::with_capacity_and_hasher(merges.size_hint().0, BuildHasherDefault::default());
        // Three lookups per merge (49k merges for SmolLM2) dominate building: a borrowed map, so
        // that a lookup needs no owned key.
        let ids: HashMap<&str, u32, BuildHasherDefault<CheapHasher>> =
            vocab.iter().map(|(token, &id)| (token.as_str(), id)).collect();
        // The merged token's spelling, rebuilt in one buffer rather than allocated per merge.
        let mut joined = String::new();
        for (rank, merge) in merges.enumerate() {
            let (left, right) = merge?;
            let id_of = |token: &str| {
                ids.get(token).copied().ok_or_else(|| {
                    Error::Tokenizer(format!(
                        "merge #{} `{left} {right}` needs `{token}`, which is not in the vocabulary",
                        rank + 1
                    ))
                })
            };
            let pair = (id_of(left)?, id_of(right)?);
            joined.clear();
            joined.push_str(left);
            joined.push_str(right);
            let merged = id_of(&joined)?;
            let rank = u32::try_from(rank).map_err(|_| Error::Tokenizer("too many merges".into()))?;
            rules.insert(pair, MergeRule { rank, merged });
        }
        Ok(Self { rules })
    }

    /// Merges `word` and appends its tokens to `ids`: always the lowest-ranked applicable pair
    /// first and the leftmost among equals, exactly like HF's `Word::merge_all`. The priority
    /// queue keeps long words (a page of digits, a run of `=`) at O(n log n).
    fn apply(&self, word: &mut Word, ids: &mut Vec<u32>) {
        let Word { symbols, queue } = word;
        for (position, pair) in symbols.windows(2).enumerate() {
            if let Some(rule) = self.rules.get(&(pair[0].id, pair[1].id)) {
                queue.push(Reverse((rule.rank, position, rule.merged)));
            }
        }
        while let Some(Reverse((_, position, merged))) = queue.pop() {
            let left = symbols[position];
            let Some(right_position) = left.next.filter(|_| !left.merged_into_previous) else {
                continue;
            };
            let right = symbols[right_position];
            if self.rules.get(&(left.id, right.id)).map(|rule| rule.merged) != Some(merged) {
                continue;
            }
            symbols[position].id = merged;
            symbols[position].next = right.next;
            symbols[right_position].merged_into_previous = true;
            if let Some(after) = right.next {
                symbols[after].previous = Some(position);
            }
            let neighbours = [(left.previous, Some(position)), (Some(position), right.next)];
            for (first, second) in neighbours {
                if let (Some(first), Some(second)) = (first, second) {
                    if let Some(rule) = self.rules.get(&(symbols[first].id, symbols[second].id)) {
                        queue.push(Reverse((rule.rank, first, rule.merged)));
                    }
                }
            }
        }
        ids.extend(symbols.iter().filter(|symbol| !symbol.merged_into_previous).map(|symbol| symbol.id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy vocabulary over the letters of "aaab" with merges `a a` then `aa a` then `a b`.
    fn toy_table() -> (Vocab, MergeTable) {
        let vocab: Vocab =
            ["a", "b", "aa", "aaa", "ab"].iter().enumerate().map(|(id, t)| (t.to_string(), id as u32)).collect();
        let merges = [("a", "a"), ("aa", "a"), ("a", "b")].map(Ok);
        let table = MergeTable::new(&vocab, merges).unwrap();
        (vocab, table)
    }

    fn merged(table: &MergeTable, ids: &[u32]) -> Vec<u32> {
        let mut word = Word::default();
        ids.iter().for_each(|&id| word.push(id));
        let mut merged = Vec::new();
        table.apply(&mut word, &mut merged);
        merged
    }

    /// `a a a b` → `aa a b` (leftmost `a a` first) → `aaa b`; `a b` never gets its turn.
    #[test]
    fn merges_lowest_rank_then_leftmost() {
        let (vocab, table) = toy_table();
        let ids: Vec<u32> = ["a", "a", "a", "b"].iter().map(|t| vocab[*t]).collect();
        assert_eq!(merged(&table, &ids), [vocab["aaa"], vocab["b"]]);
    }

    /// `a a a a` → `aa aa`: two separate `a a` merges, and no rule joins `aa aa`.
    #[test]
    fn repeated_pairs_merge_left_to_right() {
        let (vocab, table) = toy_table();
        assert_eq!(merged(&table, &[vocab["a"]; 4]), [vocab["aa"], vocab["aa"]]);
    }

    #[test]
    fn unknown_merge_parts_are_named() {
        let (vocab, _) = toy_table();
        let message = MergeTable::new(&vocab, [Ok(("b", "b"))]).unwrap_err().to_string();
        assert!(message.contains("`bb`"), "{message}");
    }
}
