//! tokenizer.json parsing on arbitrary bytes; a tokenizer that loads must encode and decode.
#![no_main]

use gptlens::tokenizer::Tokenizer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(tokenizer) = Tokenizer::from_tokenizer_json(data) {
        let n = tokenizer.vocab_size();
        let ids = tokenizer.encode("Hello, world! <|endoftext|> 123  \n\u{e9}\u{1F600}").unwrap_or_default();
        assert!(ids.iter().all(|&id| (id as usize) < n), "an id outside the vocabulary of {n}: {ids:?}");
        let _ = tokenizer.decode(&ids);
        for id in [0, 1, n.saturating_sub(1) as u32, n as u32, u32::MAX] {
            let _ = tokenizer.token_string(id);
            let _ = tokenizer.decode_bytes(&[id]);
        }
    }
});
