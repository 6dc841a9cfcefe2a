//! BPE encoding of arbitrary text with the GPT-2 fixture's tokenizer (tokenizer.json and
//! vocab.json + merges.txt): every id is in the vocabulary, and decoding gives the text back
//! byte for byte (byte-level BPE has a token for every byte, and no normalizer).
#![no_main]

use std::sync::LazyLock;

use gptlens::tokenizer::Tokenizer;
use libfuzzer_sys::fuzz_target;

static TOKENIZERS: LazyLock<[Tokenizer; 2]> = LazyLock::new(|| {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/tokenizer/");
    let read = |name: &str| std::fs::read(format!("{dir}{name}")).expect("the tokenizer fixture");
    [
        Tokenizer::from_tokenizer_json(&read("tokenizer.json")).expect("the fixture loads"),
        Tokenizer::from_vocab_merges(&read("vocab.json"), &read("merges.txt")).expect("the fixture loads"),
    ]
});

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for tokenizer in TOKENIZERS.iter() {
        let ids = tokenizer.encode(&text).expect("encoding never fails");
        let n = tokenizer.vocab_size();
        assert!(ids.iter().all(|&id| (id as usize) < n));
        let back = tokenizer.decode_bytes(&ids).expect("its own ids decode");
        assert_eq!(back, text.as_bytes(), "decode(encode(text)) != text");
    }
});
