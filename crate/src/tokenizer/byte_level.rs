//! GPT-2's reversible spelling of bytes as printable characters.
//!
//! Byte-level BPE vocabularies never contain raw bytes: every byte is written as one visible
//! character, so that whitespace and control bytes survive JSON and text files and a space
//! shows up as `Ġ`. Printable Latin-1 bytes stand for themselves; the other 68 bytes are moved,
//! in byte order, to U+0100 onwards (the `bytes_to_unicode` table of OpenAI's `encoder.py`).

/// The character that spells each byte.
pub(super) const BYTE_TO_CHAR: [char; 256] = byte_to_char_table();

/// Inverse of [`BYTE_TO_CHAR`], indexed by code point; the highest character used is U+0143.
const CHAR_TO_BYTE: [Option<u8>; 0x144] = char_to_byte_table();

const fn stands_for_itself(byte: u8) -> bool {
    matches!(byte, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)
}

const fn byte_to_char_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next_moved = 0x100;
    let mut byte = 0;
    while byte < 256 {
        table[byte] = if stands_for_itself(byte as u8) {
            byte as u8 as char
        } else {
            let moved = next_moved;
            next_moved += 1;
            match char::from_u32(moved) {
                Some(moved) => moved,
                None => '\0',
            }
        };
        byte += 1;
    }
    table
}

const fn char_to_byte_table() -> [Option<u8>; 0x144] {
    let mut table = [None; 0x144];
    let mut byte = 0;
    while byte < 256 {
        table[BYTE_TO_CHAR[byte] as usize] = Some(byte as u8);
        byte += 1;
    }
    table
}

/// The byte a vocabulary character spells, if it is one of the 256 byte characters.
pub(super) fn char_to_byte(c: char) -> Option<u8> {
    CHAR_TO_BYTE.get(c as usize).copied().flatten()
}

/// The bytes a token stands for. Like HF's ByteLevel decoder, a token with any character outside
/// the byte alphabet (typically an added token such as `<|im start|>` containing a real space) is
/// taken to be literal text and contributes its own UTF-8 bytes.
pub(super) fn token_bytes(token: &str) -> Vec<u8> {
    token.chars().map(char_to_byte).collect::<Option<Vec<u8>>>().unwrap_or_else(|| token.as_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_gpt2_landmarks() {
        assert_eq!(BYTE_TO_CHAR[b' ' as usize], 'Ġ');
        assert_eq!(BYTE_TO_CHAR[b'\n' as usize], 'Ċ');
        assert_eq!(BYTE_TO_CHAR[0], 'Ā');
        assert_eq!(BYTE_TO_CHAR[b'a' as usize], 'a');
        assert_eq!(BYTE_TO_CHAR[0xAD], 'Ń');
        assert_eq!(BYTE_TO_CHAR[0xFF], 'ÿ');
    }

    #[test]
    fn every_byte_round_trips() {
        for byte in 0..=255u8 {
            assert_eq!(char_to_byte(BYTE_TO_CHAR[byte as usize]), Some(byte));
        }
        assert_eq!(char_to_byte(' '), None, "a real space is not in the byte alphabet");
    }

    #[test]
    fn tokens_outside_the_alphabet_are_literal_text() {
        assert_eq!(token_bytes("Ġhello"), b" hello");
        assert_eq!(token_bytes("<|endoftext|>"), b"<|endoftext|>");
        assert_eq!(token_bytes("two words"), b"two words");
    }
}
