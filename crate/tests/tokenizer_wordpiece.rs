#![cfg(not(target_arch = "wasm32"))]
//! WordPiece (BERT) parity with Python `tokenizers`, on tests/fixtures/tokenizer-wordpiece
//! (make_fixture.py): a small tokenizer.json cut from all-MiniLM-L6-v2's, variants of it, and
//! MiniLM's full tokenizer.json when it has been fetched (scripts/fetch-minilm.sh).

use std::path::Path;

mod common;

use common::assert_tokenizer_error;
use gptlens::tokenizer::Tokenizer;
use gptlens::Error;
use serde::Deserialize;
use serde_json::{json, Value};

const TOKENIZER_JSON: &[u8] =
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tokenizer-wordpiece/tokenizer.json"));
const CASES_JSON: &[u8] =
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tokenizer-wordpiece/cases.json"));
const MINILM_TOKENIZER_JSON: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/models/all-MiniLM-L6-v2/tokenizer.json");

#[derive(Deserialize)]
struct Cases {
    texts: Vec<String>,
    small: Expected,
    variants: Vec<Variant>,
    minilm: Expected,
}

/// What `tokenizers` gives for each text: ids, tokens (for the unpatched files) and
/// `decode(ids, skip_special_tokens=False)`.
#[derive(Deserialize)]
struct Expected {
    ids: Vec<Vec<u32>>,
    #[serde(default)]
    tokens: Vec<Vec<String>>,
    decoded: Vec<String>,
}

#[derive(Deserialize)]
struct Variant {
    name: String,
    /// Top-level keys of tokenizer.json to replace.
    patch: serde_json::Map<String, Value>,
    #[serde(flatten)]
    expected: Expected,
}

fn cases() -> Cases {
    serde_json::from_slice(CASES_JSON).expect("cases.json parses")
}

fn small() -> Tokenizer {
    Tokenizer::from_tokenizer_json(TOKENIZER_JSON).expect("the fixture tokenizer.json loads")
}

fn base() -> Value {
    serde_json::from_slice(TOKENIZER_JSON).expect("tokenizer.json parses")
}

fn load(config: &Value) -> gptlens::Result<Tokenizer> {
    Tokenizer::from_tokenizer_json(&serde_json::to_vec(config).expect("a JSON value serializes"))
}

/// Asserts that every text encodes, decodes and labels its tokens as Python does.
fn assert_matches(name: &str, tokenizer: &Tokenizer, texts: &[String], expected: &Expected) {
    assert_eq!(texts.len(), expected.ids.len(), "{name}: one id list per text");
    for (i, text) in texts.iter().enumerate() {
        let ids = tokenizer.encode(text).unwrap();
        assert_eq!(ids, expected.ids[i], "{name}: encoding {text:?}");
        assert_eq!(tokenizer.decode(&ids).unwrap(), expected.decoded[i], "{name}: decoding {text:?}");
        assert_eq!(tokenizer.decode_bytes(&ids).unwrap(), expected.decoded[i].as_bytes(), "{name}: {text:?}");
        let Some(tokens) = expected.tokens.get(i) else { continue };
        for (token, &id) in tokens.iter().zip(&ids) {
            // Labels show the token as spelled, a backslash doubled to keep labels unambiguous.
            assert_eq!(tokenizer.token_string(id).unwrap(), token.replace('\\', "\\\\"), "{name}: label of {id}");
            assert_eq!(tokenizer.token_id(token), Some(id), "{name}: id of {token:?}");
        }
    }
}

#[test]
fn small_wordpiece_matches_tokenizers() {
    let cases = cases();
    assert!(cases.texts.len() >= 30);
    assert_matches("small", &small(), &cases.texts, &cases.small);
}

#[test]
fn wordpiece_variants_match_tokenizers() {
    let cases = cases();
    assert!(cases.variants.len() >= 6);
    for variant in &cases.variants {
        let mut config = base();
        for (key, value) in &variant.patch {
            config[key] = value.clone();
        }
        let tokenizer = load(&config).unwrap_or_else(|e| panic!("variant {} loads: {e}", variant.name));
        assert_matches(&variant.name, &tokenizer, &cases.texts, &variant.expected);
    }
}

#[test]
fn minilm_wordpiece_matches_tokenizers() {
    let Ok(json) = std::fs::read(MINILM_TOKENIZER_JSON) else {
        println!(
            "skipped: {} is absent (run npm run setup / scripts/fetch-minilm.sh)",
            Path::new(MINILM_TOKENIZER_JSON).display()
        );
        return;
    };
    let tokenizer = Tokenizer::from_tokenizer_json(&json).expect("MiniLM's tokenizer.json loads");
    assert_eq!(tokenizer.vocab_size(), 30522);
    let special = tokenizer.special_tokens();
    assert_eq!((special.bos, special.eos, special.unk), (Some(101), Some(102), Some(100)));
    let cases = cases();
    assert_matches("all-MiniLM-L6-v2", &tokenizer, &cases.texts, &cases.minilm);
    // Truncation (128) and padding (128) in the file are ignored: the whole text is encoded.
    let long = "word ".repeat(300);
    assert_eq!(tokenizer.encode(&long).unwrap().len(), 302);
}

#[test]
fn small_wordpiece_basics() {
    let tokenizer = small();
    let id = |token: &str| tokenizer.token_id(token).unwrap();
    assert_eq!((id("[PAD]"), id("[UNK]"), id("[CLS]"), id("[SEP]"), id("[MASK]")), (0, 1, 2, 3, 4));
    assert_eq!(tokenizer.encode("").unwrap(), [2, 3]);
    let special = tokenizer.special_tokens();
    assert_eq!((special.bos, special.eos, special.unk, special.pad), (Some(2), Some(3), Some(1), None));
    assert!(tokenizer.chat_template().is_none());
    assert_eq!(tokenizer.token_string(id("##strom")).unwrap(), "##strom");
    assert_eq!(tokenizer.token_string(id("[CLS]")).unwrap(), "[CLS]");
    let size = tokenizer.vocab_size();
    assert!(matches!(tokenizer.decode(&[2, size as u32]), Err(Error::TokenOutOfRange { .. })));
    assert!(matches!(tokenizer.token_string(u32::MAX), Err(Error::TokenOutOfRange { .. })));
    // The WordPiece decoder: `##` pieces glued on, spaces between words, cleanup before punctuation.
    let ids: Vec<u32> = ["hello", ",", "world", "!", "un", "##bel", "##ie"].map(id).to_vec();
    assert_eq!(tokenizer.decode(&ids).unwrap(), "hello, world! unbelie");
}

#[test]
fn bert_processing_frames_like_template_processing() {
    let mut config = base();
    config["post_processor"] = json!({"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]});
    let tokenizer = load(&config).unwrap();
    assert_eq!(tokenizer.encode("hello").unwrap(), small().encode("hello").unwrap());
    config["post_processor"] = json!({"type": "BertProcessing", "sep": ["[SEP]"], "cls": ["[CLS]", 2]});
    assert_tokenizer_error(load(&config), "sep");
}

#[test]
fn malformed_wordpiece_files_are_named_errors() {
    let with = |pointer: &str, value: Value| {
        let mut config = base();
        *config.pointer_mut(pointer).unwrap_or_else(|| panic!("{pointer} exists")) = value;
        load(&config)
    };
    assert_tokenizer_error(with("/model/unk_token", json!("[NOPE]")), "unk_token `[NOPE]`");
    for absurd in [json!(0), json!(-1), json!(1_000_000_000), json!("100"), json!(1.5), Value::Null] {
        assert_tokenizer_error(with("/model/max_input_chars_per_word", absurd), "max_input_chars_per_word");
    }
    assert_tokenizer_error(with("/normalizer", json!({"type": "NFKC"})), "NFKC");
    assert_tokenizer_error(
        with("/normalizer", json!({"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"}]})),
        "NFD + Lowercase",
    );
    assert_tokenizer_error(
        with("/normalizer", json!({"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true})),
        "lowercase",
    );
    assert_tokenizer_error(with("/pre_tokenizer", json!({"type": "Whitespace"})), "Whitespace");
    assert_tokenizer_error(with("/pre_tokenizer", Value::Null), "no pre-tokenizer");
    assert_tokenizer_error(with("/decoder", json!({"type": "ByteLevel"})), "ByteLevel");
    assert_tokenizer_error(with("/decoder", json!({"type": "WordPiece", "prefix": "##"})), "cleanup");
    assert_tokenizer_error(with("/post_processor", json!({"type": "RobertaProcessing"})), "RobertaProcessing");
    assert_tokenizer_error(with("/model/vocab/hello", json!(5000)), "ids 0..");
    assert_tokenizer_error(with("/model/vocab/hello", json!(-1)), "WordPiece model");
    let mut framing = base();
    framing["post_processor"]["special_tokens"]["[SEP]"]["ids"] = json!([5000]);
    assert_tokenizer_error(load(&framing), "adds token 5000");
    for field in ["unk_token", "continuing_subword_prefix", "vocab"] {
        let mut config = base();
        config["model"].as_object_mut().unwrap().remove(field);
        assert_tokenizer_error(load(&config), field);
    }
    for cut in (0..TOKENIZER_JSON.len()).step_by(97) {
        assert_tokenizer_error(Tokenizer::from_tokenizer_json(&TOKENIZER_JSON[..cut]), "tokenizer.json");
    }
}
