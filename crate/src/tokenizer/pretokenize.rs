//! Pre-tokenizers: cut text into the pieces ("words") that BPE merges never cross.
//!
//! GPT-2 splits with
//! `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`.
//! [`Splitter`] matches these patterns by hand, as a backtracking engine (and the `regex` crate,
//! which gptlens used before) matches them: at each position the first alternative that matches,
//! each quantifier as long as the rest allows. A regex engine cost the page ~0.2 s of its first
//! second: building its automata, and the browser compiling that code as it ran hot. The
//! look-ahead `\s+(?!\S)` is applied after `\s+`: a whitespace run of two or more characters
//! that is followed by non-whitespace gives its last character back, so that the next word can
//! take it as its leading space (`"a  b"` → `"a"`, `" "`, `" b"`). This equals the backtracking
//! semantics exactly: `\s+(?!\S)` only ever matches a whole run (at the end of the text) or a
//! whole run minus its last character, and falls through to `\s+` for a single whitespace
//! character before a word. `\s` is `char::is_whitespace` (Unicode's `White_Space`, as is
//! Oniguruma's `\s` used by Python `tokenizers`); `\p{L}` and `\p{N}` are [`unicode_classes`].
//! The tests check every piece against the `regex` crate on random text.
//!
//! LLaMA 3 (`llama-bpe`) and Qwen2 split with
//! `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//! (Qwen2: `\p{N}` one digit at a time). The same look-ahead rule serves, with one difference: a
//! whitespace run holding a line break is taken by `\s*[\r\n]+`, which comes first (up to and
//! including the run's last line break), so only a run without one can reach the look-ahead
//! alternative and give its last character back.
//!
//! SmolLM2 (GGUF `tokenizer.ggml.pre = smollm`) first isolates every numeric character
//! ([`DigitPieces`]) and runs GPT-2's pattern on the text between them: HF's
//! `Sequence[Digits(individual_digits), ByteLevel]`, and llama.cpp's `\p{N}` split before the GPT-2
//! regex. Both split each stretch on its own, so a whitespace run before a digit stays whole
//! (`"x  1"` → `"x"`, `"  "`, `"1"`, where GPT-2 alone gives `"x"`, `" "`, `" 1"`).

use super::unicode_classes::{is_letter, is_number};

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

    /// Whether a whitespace run may give its last character back: in LLaMA 3's and Qwen2's
    /// pattern a run with a line break was matched whole before the look-ahead alternative.
    fn gives_back(self, run: &str) -> bool {
        self == SplitPattern::Gpt2 || !run.contains(['\r', '\n'])
    }
}

#[derive(Clone, Debug)]
pub(super) struct Splitter {
    kind: SplitPattern,
}

impl Splitter {
    pub(super) fn new(kind: SplitPattern) -> Self {
        Self { kind }
    }

    /// The pieces of `text`, in order; concatenated they give back `text`.
    pub(super) fn split<'s, 't>(&'s self, text: &'t str) -> Pieces<'s, 't> {
        Pieces { splitter: self, text, position: 0 }
    }

    /// The length in bytes of the pattern's match at the start of `rest` (not empty), look-ahead
    /// aside: every character starts some alternative, so it is never 0.
    fn first_match(&self, rest: &str) -> usize {
        let matched = match self.kind {
            SplitPattern::Gpt2 => gpt2_match(rest),
            SplitPattern::Llama3 => llama_match(rest, 3),
            SplitPattern::Qwen2 => llama_match(rest, 1),
        };
        // Unreachable (see above); one character keeps the pieces moving through the text.
        matched.max(rest.chars().next().map_or(0, char::len_utf8))
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
        let len = self.splitter.first_match(rest);
        let piece = rest.get(..len)?;
        let followed_by_text = len < rest.len() && self.splitter.kind.gives_back(piece);
        let end = start + end_after_lookahead(piece, followed_by_text);
        self.position = end;
        self.text.get(start..end)
    }
}

/// `\s`.
fn is_space(c: char) -> bool {
    c.is_whitespace()
}

/// `[^\s\p{L}\p{N}]`: punctuation, symbols, controls that are not whitespace.
fn is_other(c: char) -> bool {
    !is_space(c) && !is_letter(c) && !is_number(c)
}

fn is_line_break(c: char) -> bool {
    c == '\r' || c == '\n'
}

/// Where a run of characters of `class` that starts at byte `from` of `s` ends (at most `most`
/// of them).
fn run_end(s: &str, from: usize, most: usize, class: fn(char) -> bool) -> usize {
    let rest = s.get(from..).unwrap_or_default();
    from + rest
        .char_indices()
        .take(most)
        .find(|&(_, c)| !class(c))
        .map_or_else(|| rest.chars().take(most).map(char::len_utf8).sum(), |(at, _)| at)
}

/// `\s+`-style runs: as many as there are.
fn run(s: &str, from: usize, class: fn(char) -> bool) -> usize {
    run_end(s, from, usize::MAX, class)
}

/// `'s|'t|'re|'ve|'m|'ll|'d` at the start of `s` (with `ignore_case`, `(?i:…)`: the letters in
/// either case, and `s` also as `ſ`, which Unicode's case folding makes the same letter).
fn contraction(s: &str, ignore_case: bool) -> Option<usize> {
    let rest = s.strip_prefix('\'')?;
    let same = |c: char, letter: char| {
        c == letter || (ignore_case && (c == letter.to_ascii_uppercase() || (letter == 's' && c == 'ſ')))
    };
    ["s", "t", "re", "ve", "m", "ll", "d"].iter().find_map(|suffix| {
        let mut chars = rest.chars();
        let len: Option<usize> =
            suffix.chars().map(|letter| chars.next().filter(|&c| same(c, letter)).map(char::len_utf8)).sum();
        len.map(|len| 1 + len)
    })
}

/// GPT-2's `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+` at the start of `s`.
fn gpt2_match(s: &str) -> usize {
    if let Some(len) = contraction(s, false) {
        return len;
    }
    for class in [is_letter as fn(char) -> bool, is_number, is_other] {
        let end = space_then_run(s, class);
        if end > 0 {
            return end;
        }
    }
    run(s, 0, is_space)
}

/// ` ?X+` at the start of `s`: the run with the space before it if there is one, else without;
/// 0 when neither matches.
fn space_then_run(s: &str, class: fn(char) -> bool) -> usize {
    if s.starts_with(' ') {
        let end = run(s, 1, class);
        if end > 1 {
            return end;
        }
    }
    run(s, 0, class)
}

/// LLaMA 3's and Qwen2's pattern at the start of `s`, with numbers in runs of at most `digits`.
fn llama_match(s: &str, digits: usize) -> usize {
    if let Some(len) = contraction(s, true) {
        return len;
    }
    // `[^\r\n\p{L}\p{N}]?\p{L}+`
    if let Some(first) = s.chars().next().filter(|&c| !is_line_break(c) && !is_letter(c) && !is_number(c)) {
        let end = run(s, first.len_utf8(), is_letter);
        if end > first.len_utf8() {
            return end;
        }
    }
    let letters = run(s, 0, is_letter);
    if letters > 0 {
        return letters;
    }
    // `\p{N}{1,N}`
    let numbers = run_end(s, 0, digits, is_number);
    if numbers > 0 {
        return numbers;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    let others = space_then_run(s, is_other);
    if others > 0 {
        return run(s, others, is_line_break);
    }
    // `\s*[\r\n]+`: the whitespace run up to its last line break, which ends the match (a line
    // break after it would belong to the run).
    let spaces = run(s, 0, is_space);
    match s[..spaces].rfind(['\r', '\n']) {
        Some(last) => last + 1,
        None => spaces,
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
pub(super) mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<&str> {
        split_with(SplitPattern::Gpt2, text)
    }

    /// Random text over characters at the edges of every class the patterns test: letters in
    /// several scripts and cases (`ſ` folds to `s`, `K` is the Kelvin sign), marks, numbers of
    /// each kind, whitespace with and without line breaks, apostrophes, symbols, controls.
    pub(in crate::tokenizer) fn random_texts(count: usize, seed: u64) -> Vec<String> {
        const CHARS: &[char] = &[
            'a', 'b', 's', 't', 'r', 'e', 'v', 'm', 'l', 'd', 'S', 'T', 'R', 'E', 'V', 'M', 'L', 'D', 'ſ', 'K', 'İ',
            'é', 'ǅ', '中', 'ß', '\u{301}', '\'', '\'', ' ', ' ', ' ', '\t', '\n', '\n', '\r', '\u{a0}', '\u{2028}',
            '\u{3000}', '\u{85}', '1', '2', '7', '٣', 'Ⅻ', '½', '²', '!', '.', '-', '_', '(', '😀', '\u{0}',
            '\u{200d}', '<', '>', '|',
        ];
        let mut state = seed;
        let mut next = move |n: usize| {
            // splitmix64
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) % n as u64) as usize
        };
        (0..count).map(|_| (0..next(24)).map(|_| CHARS[next(CHARS.len())]).collect()).collect()
    }

    /// What the `regex` crate gave for a pattern without its look-ahead (anchored at each
    /// piece's start), with the look-ahead applied as [`Pieces`] applies it: the splitters' oracle.
    fn regex_pieces(kind: SplitPattern, regex: &regex::Regex, text: &str) -> Vec<String> {
        let mut pieces = Vec::new();
        let mut start = 0;
        while start < text.len() {
            let rest = &text[start..];
            let found = regex.find(rest).expect("every character starts a match");
            let piece = found.as_str();
            let followed_by_text = found.end() < rest.len() && kind.gives_back(piece);
            let end = start + end_after_lookahead(piece, followed_by_text);
            pieces.push(text[start..end].to_string());
            start = end;
        }
        pieces
    }

    /// The pattern a splitter replaces, without its look-ahead alternative, anchored.
    fn regex_of(kind: SplitPattern) -> regex::Regex {
        let pattern = match kind {
            SplitPattern::Gpt2 => r"\A(?:'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+)",
            SplitPattern::Llama3 => {
                r"\A(?:(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+)"
            }
            SplitPattern::Qwen2 => {
                r"\A(?:(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+)"
            }
        };
        regex::Regex::new(pattern).expect("the pattern compiles")
    }

    /// The hand-written splitters cut random text exactly where the regex patterns did.
    #[test]
    fn splitters_cut_where_the_regex_patterns_cut() {
        for kind in [SplitPattern::Gpt2, SplitPattern::Llama3, SplitPattern::Qwen2] {
            let regex = regex_of(kind);
            for text in random_texts(20_000, kind as u64) {
                assert_eq!(split_with(kind, &text), regex_pieces(kind, &regex, &text), "{kind:?} on {text:?}");
            }
        }
    }

    fn split_with(kind: SplitPattern, text: &str) -> Vec<&str> {
        let splitter = Splitter::new(kind);
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
