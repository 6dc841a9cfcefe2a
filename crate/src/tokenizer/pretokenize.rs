//! Pre-tokenizers: cut text into the pieces ("words") that BPE merges never cross.
//!
//! GPT-2 splits with
//! `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
//! The `regex` crate has no look-ahead, so [`Splitter`] searches without the
//! `\s+(?!\S)` alternative and then applies it by hand: a whitespace run of two or more
//! characters that is followed by non-whitespace gives its last character back, so that the
//! next word can take it as its leading space (`"a  b"` → `"a"`, `" "`, `" b"`). This equals
//! the backtracking semantics exactly: `\s+(?!\S)` only ever matches a whole run (at the end of
//! the text) or a whole run minus its last character, and falls through to `\s+` for a single
//! whitespace character before a word. Both `\s` here and `char::is_whitespace` are Unicode's
//! `White_Space` property, as is Oniguruma's `\s` used by Python `tokenizers`.
//!
//! LLaMA 3 (`llama-bpe`) and Qwen2 split with
//! `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//! (Qwen2: `\p{N}` one digit at a time). The same trick serves, with one difference: a whitespace
//! run holding a line break is taken whole by `\s*[\r\n]+`, which comes first, so only a run
//! without one can reach the look-ahead alternative and give its last character back.
//!
//! SmolLM2 (GGUF `tokenizer.ggml.pre = smollm`) first isolates every numeric character
//! ([`DigitPieces`]) and runs GPT-2's pattern on the text between them: HF's
//! `Sequence[Digits(individual_digits), ByteLevel]`, and llama.cpp's `\p{N}` split before the GPT-2
//! regex. Both split each stretch on its own, so a whitespace run before a digit stays whole
//! (`"x  1"` → `"x"`, `"  "`, `"1"`, where GPT-2 alone gives `"x"`, `" "`, `" 1"`).

use regex::Regex;

use crate::error::{Error, Result};

/// The split patterns gptlens implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SplitPattern {
    Gpt2,
    /// LLaMA 3's (`llama-bpe`): digits in runs of up to three.
    Llama3,
    /// Qwen2's: LLaMA 3's with every digit on its own.
    Qwen2,
}

impl SplitPattern {
    /// The pattern as `tokenizers` writes it in a tokenizer.json `Split` pre-tokenizer (LLaMA 3's
    /// and Qwen2's files), look-ahead included; GPT-2's is implied by `ByteLevel` instead.
    pub(super) fn from_tokenizer_json(regex: &str) -> Option<SplitPattern> {
        const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
        const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
        match regex {
            LLAMA3 => Some(SplitPattern::Llama3),
            QWEN2 => Some(SplitPattern::Qwen2),
            _ => None,
        }
    }

    /// The pattern without its look-ahead alternative (see the module docs), anchored: every
    /// character starts some alternative, so each piece begins where the last ended, and
    /// anchoring spares the regex engine a reverse search for the match start.
    fn without_lookahead(self) -> &'static str {
        match self {
            SplitPattern::Gpt2 => r"\A(?:'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+)",
            SplitPattern::Llama3 => {
                r"\A(?:(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+)"
            }
            SplitPattern::Qwen2 => {
                r"\A(?:(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+)"
            }
        }
    }

    /// Whether a whitespace run may give its last character back: in LLaMA 3's and Qwen2's
    /// pattern a run with a line break was matched whole before the look-ahead alternative.
    fn gives_back(self, run: &str) -> bool {
        self == SplitPattern::Gpt2 || !run.contains(['\r', '\n'])
    }
}

#[derive(Clone, Debug)]
pub(super) struct Splitter {
    kind: SplitPattern,
    pattern: Regex,
}

impl Splitter {
    pub(super) fn new(kind: SplitPattern) -> Result<Self> {
        let pattern = Regex::new(kind.without_lookahead())
            .map_err(|e| Error::Tokenizer(format!("cannot build the {kind:?} split pattern: {e}")))?;
        Ok(Self { kind, pattern })
    }

    /// The pieces of `text`, in order; concatenated they give back `text`.
    pub(super) fn split<'s, 't>(&'s self, text: &'t str) -> Pieces<'s, 't> {
        Pieces { splitter: self, text, position: 0 }
    }
}

pub(super) struct Pieces<'s, 't> {
    splitter: &'s Splitter,
    text: &'t str,
    position: usize,
}

impl<'t> Iterator for Pieces<'_, 't> {
    type Item = &'t str;

    fn next(&mut self) -> Option<&'t str> {
        let start = self.position;
        let rest = self.text.get(start..).filter(|rest| !rest.is_empty())?;
        let end = match self.splitter.pattern.find(rest) {
            Some(found) => {
                let piece = found.as_str();
                let followed_by_text = found.end() < rest.len() && self.splitter.kind.gives_back(piece);
                start + end_after_lookahead(piece, followed_by_text)
            }
            // Unreachable, as every character starts a match; ending the text is the safe answer.
            None => self.text.len(),
        };
        self.position = end;
        self.text.get(start..end)
    }
}

/// HF's `Digits(individual_digits = true)`: each numeric character (`char::is_numeric`, the
/// test HF's `Digits` uses: Unicode `Nd`, `Nl` and `No`, the same set as the regex class `\p{N}`)
/// is a piece of its own; the text between them is one piece each. Concatenated, the pieces give
/// back the text.
pub(super) struct DigitPieces<'t> {
    text: &'t str,
    position: usize,
}

impl<'t> DigitPieces<'t> {
    pub(super) fn new(text: &'t str) -> Self {
        Self { text, position: 0 }
    }
}

impl<'t> Iterator for DigitPieces<'t> {
    type Item = &'t str;

    fn next(&mut self) -> Option<&'t str> {
        let start = self.position;
        let rest = self.text.get(start..)?;
        let first = rest.chars().next()?;
        let len = if first.is_numeric() { first.len_utf8() } else { rest.find(char::is_numeric).unwrap_or(rest.len()) };
        self.position = start + len;
        self.text.get(start..start + len)
    }
}

/// Applies `\s+(?!\S)` to a match: a run of two or more whitespace characters that stops before
/// more text ends one character early. Returns the piece's length.
fn end_after_lookahead(piece: &str, followed_by_text: bool) -> usize {
    match piece.char_indices().next_back() {
        Some((last_start, _)) if last_start > 0 && followed_by_text && piece.chars().all(char::is_whitespace) => {
            last_start
        }
        _ => piece.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<&str> {
        split_with(SplitPattern::Gpt2, text)
    }

    fn split_with(kind: SplitPattern, text: &str) -> Vec<&str> {
        let splitter = Splitter::new(kind).expect("the built-in pattern compiles");
        splitter.split(text).collect()
    }

    /// LLaMA 3: contractions in any case, one leading non-letter joins a word, digits by three,
    /// a whitespace run with a line break stays whole.
    #[test]
    fn llama3_pieces() {
        let llama = |text| split_with(SplitPattern::Llama3, text);
        assert_eq!(
            llama("I'M 12345 (hello)\n\n  world"),
            ["I", "'M", " ", "123", "45", " (", "hello", ")\n\n", " ", " world"]
        );
        assert_eq!(llama("a \n\nb"), ["a", " \n\n", "b"]);
        assert_eq!(llama("a   b\tc"), ["a", "  ", " b", "\tc"]);
        assert_eq!(split_with(SplitPattern::Qwen2, "x 2024"), ["x", " ", "2", "0", "2", "4"]);
    }

    /// `"Hello world"` → `"Hello"`, `" world"`: a single space joins the word after it.
    #[test]
    fn words_take_their_leading_space() {
        assert_eq!(pieces("Hello world"), ["Hello", " world"]);
    }

    /// `"a   b"` → `"a"`, `"  "`, `" b"`: a run before a word gives its last space to the word.
    #[test]
    fn space_runs_give_the_last_space_to_the_next_word() {
        assert_eq!(pieces("a   b"), ["a", "  ", " b"]);
        assert_eq!(pieces("a  1"), ["a", " ", " 1"]);
        assert_eq!(pieces("a  !"), ["a", " ", " !"]);
    }

    /// `"end   "` → `"end"`, `"   "`: trailing whitespace stays whole.
    #[test]
    fn trailing_whitespace_stays_whole() {
        assert_eq!(pieces("end   "), ["end", "   "]);
        assert_eq!(pieces("end "), ["end", " "]);
        assert_eq!(pieces("   "), ["   "]);
    }

    /// `"\n\nword"` → `"\n"`, `"\n"`, `"word"`: a newline is given back like a space, but only a
    /// literal space may prefix a word, so it stands alone.
    #[test]
    fn newline_runs_before_a_word() {
        assert_eq!(pieces("\n\nword"), ["\n", "\n", "word"]);
        assert_eq!(pieces("x\n\n\n y"), ["x", "\n\n\n", " y"]);
        assert_eq!(pieces("x \n\ty"), ["x", " \n", "\t", "y"]);
        assert_eq!(pieces("x\ny"), ["x", "\n", "y"]);
    }

    /// `"I'm can't they'LL"` → `"I"`, `"'m"`, `" can"`, `"'t"`, `" they"`, `"'"`, `"LL"`:
    /// contractions are lowercase-only, as in GPT-2.
    #[test]
    fn contractions() {
        assert_eq!(pieces("I'm can't they'LL"), ["I", "'m", " can", "'t", " they", "'", "LL"]);
        assert_eq!(pieces("'sa"), ["'s", "a"]);
    }

    /// `"año 2024, 3.14!!"` → `"año"`, `" 2024"`, `","`, `" 3"`, `"."`, `"14"`, `"!!"`.
    #[test]
    fn letters_numbers_and_punctuation_split_apart() {
        assert_eq!(pieces("año 2024, 3.14!!"), ["año", " 2024", ",", " 3", ".", "14", "!!"]);
    }

    /// `"hi 👋🏽 ok"` → `"hi"`, `" 👋🏽"`, `" ok"`: emoji count as "other" characters.
    #[test]
    fn emoji_and_non_breaking_space() {
        assert_eq!(pieces("hi 👋🏽 ok"), ["hi", " 👋🏽", " ok"]);
        assert_eq!(pieces("a\u{a0}\u{a0}b"), ["a", "\u{a0}", "\u{a0}", "b"]);
    }

    fn digit_pieces(text: &str) -> Vec<&str> {
        DigitPieces::new(text).collect()
    }

    /// `"ab12 c3"` → `"ab"`, `"1"`, `"2"`, `" c"`, `"3"`: every numeric character stands alone.
    #[test]
    fn digits_are_isolated_one_by_one() {
        assert_eq!(digit_pieces("ab12 c3"), ["ab", "1", "2", " c", "3"]);
        assert_eq!(digit_pieces("x  1"), ["x  ", "1"]);
        assert_eq!(digit_pieces("½²Ⅻ٣"), ["½", "²", "Ⅻ", "٣"]);
        assert_eq!(digit_pieces("no digits"), ["no digits"]);
        assert!(digit_pieces("").is_empty());
    }

    #[test]
    fn empty_text_has_no_pieces() {
        assert!(pieces("").is_empty());
    }
}
