#![cfg(not(target_arch = "wasm32"))]
//! Tokenizer parity with Python `tokenizers`, on the fixtures in tests/fixtures/tokenizer:
//! cases.json (from make_fixtures.py) and extra_cases.json (from make_extra_cases.py, which
//! also covers settings the base tokenizer.json does not use).

use std::collections::HashSet;

mod common;

use common::assert_tokenizer_error;
use gptlens::tokenizer::Tokenizer;
use gptlens::Error;
use serde::Deserialize;
use serde_json::Value;

const TOKENIZER_JSON: &[u8] =
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tokenizer/tokenizer.json"));
const VOCAB_JSON: &[u8] =
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tokenizer/vocab.json"));
const MERGES_TXT: &[u8] =
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tokenizer/merges.txt"));
const CASES_JSON: &[u8] =
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tokenizer/cases.json"));
const EXTRA_CASES_JSON: &[u8] =
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tokenizer/extra_cases.json"));

/// The fixture vocabulary: 256 bytes, 256 merges, `<|endoftext|>` last.
const FIXTURE_VOCAB_SIZE: usize = 513;
const END_OF_TEXT_ID: u32 = 512;

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
    /// The byte-level vocabulary strings of `ids` (`Ġworld`).
    tokens: Vec<String>,
}

#[derive(Deserialize)]
struct ExtraCases {
    variants: Vec<Variant>,
}

#[derive(Deserialize)]
struct Variant {
    name: String,
    /// Top-level keys replace tokenizer.json's; keys under "model" are merged into its model.
    patch: serde_json::Map<String, Value>,
    cases: Vec<ExtraCase>,
}

#[derive(Deserialize)]
struct ExtraCase {
    #[serde(flatten)]
    case: Case,
    /// What Python's `decode(ids, skip_special_tokens=False)` returns.
    decoded: String,
}

fn cases() -> Vec<Case> {
    serde_json::from_slice(CASES_JSON).expect("cases.json parses")
}

fn from_tokenizer_json() -> Tokenizer {
    Tokenizer::from_tokenizer_json(TOKENIZER_JSON).expect("fixture tokenizer.json loads")
}

fn from_vocab_merges() -> Tokenizer {
    Tokenizer::from_vocab_merges(VOCAB_JSON, MERGES_TXT).expect("fixture vocab.json + merges.txt load")
}

fn both_loaders() -> [(&'static str, Tokenizer); 2] {
    [("tokenizer.json", from_tokenizer_json()), ("vocab.json + merges.txt", from_vocab_merges())]
}

/// tokenizer.json with `patch` applied (see [`Variant::patch`]).
fn patched_tokenizer_json(patch: &serde_json::Map<String, Value>) -> Vec<u8> {
    let mut config: Value = serde_json::from_slice(TOKENIZER_JSON).expect("tokenizer.json parses");
    for (key, value) in patch {
        match (key.as_str(), value) {
            ("model", Value::Object(model_patch)) => {
                for (model_key, model_value) in model_patch {
                    config["model"][model_key] = model_value.clone();
                }
            }
            _ => config[key] = value.clone(),
        }
    }
    serde_json::to_vec(&config).expect("a JSON value serializes")
}

fn patched(patch: Value) -> Vec<u8> {
    match patch {
        Value::Object(patch) => patched_tokenizer_json(&patch),
        _ => panic!("a patch is a JSON object"),
    }
}

#[test]
fn fixture_cases_encode_exactly_like_python() {
    for (loader, tokenizer) in both_loaders() {
        for case in cases() {
            assert_eq!(tokenizer.encode(&case.text).unwrap(), case.ids, "{loader}: encoding {:?}", case.text);
        }
    }
}

#[test]
fn fixture_cases_round_trip() {
    for (loader, tokenizer) in both_loaders() {
        for case in cases() {
            let ids = tokenizer.encode(&case.text).unwrap();
            assert_eq!(tokenizer.decode(&ids).unwrap(), case.text, "{loader}: round trip of {:?}", case.text);
            assert_eq!(
                tokenizer.decode_bytes(&ids).unwrap(),
                case.text.as_bytes(),
                "{loader}: bytes of {:?}",
                case.text
            );
        }
    }
}

#[test]
fn vocabulary_strings_map_to_their_ids() {
    for (loader, tokenizer) in both_loaders() {
        assert_eq!(tokenizer.vocab_size(), FIXTURE_VOCAB_SIZE, "{loader}");
        assert_eq!(tokenizer.token_id("<|endoftext|>"), Some(END_OF_TEXT_ID), "{loader}");
        assert_eq!(tokenizer.token_id("Ġ"), Some(220), "{loader}");
        assert_eq!(tokenizer.token_id("no such token"), None, "{loader}");
        for case in cases() {
            let ids: Vec<Option<u32>> = case.tokens.iter().map(|token| tokenizer.token_id(token)).collect();
            let expected: Vec<Option<u32>> = case.ids.iter().copied().map(Some).collect();
            assert_eq!(ids, expected, "{loader}: tokens of {:?}", case.text);
        }
    }
}

#[test]
fn token_strings_are_readable_and_distinct() {
    let tokenizer = from_tokenizer_json();
    let label = |token: &str| tokenizer.token_string(tokenizer.token_id(token).unwrap()).unwrap();
    assert_eq!(label("Ġ"), " ");
    assert_eq!(label("Ċ"), "\\n");
    assert_eq!(label("ĉ"), "\\t");
    assert_eq!(label("<|endoftext|>"), "<|endoftext|>");
    assert_eq!(label("\\"), "\\\\");
    // "é" is two bytes, C3 A9, each a token of its own: each is half a character.
    assert_eq!(label("Ã"), "\\xC3");
    assert_eq!(label("©"), "\\xA9");
    assert_eq!(label("Ã©"), "é");

    let labels: HashSet<String> =
        (0..FIXTURE_VOCAB_SIZE as u32).map(|id| tokenizer.token_string(id).unwrap()).collect();
    assert_eq!(labels.len(), FIXTURE_VOCAB_SIZE, "every token gets its own label");
}

#[test]
fn extra_cases_match_python_for_every_variant() {
    let extra: ExtraCases = serde_json::from_slice(EXTRA_CASES_JSON).expect("extra_cases.json parses");
    assert!(extra.variants.len() >= 6);
    for variant in extra.variants {
        let tokenizer = Tokenizer::from_tokenizer_json(&patched_tokenizer_json(&variant.patch))
            .unwrap_or_else(|e| panic!("variant {} loads: {e}", variant.name));
        for ExtraCase { case, decoded } in variant.cases {
            let ids = tokenizer.encode(&case.text).unwrap();
            assert_eq!(ids, case.ids, "variant {}: encoding {:?}", variant.name, case.text);
            assert_eq!(tokenizer.decode(&ids).unwrap(), decoded, "variant {}: decoding {:?}", variant.name, case.text);
            // Python reports an added token that swallowed whitespace (lstrip/rstrip) by the text
            // it matched, e.g. " <m> "; the byte alphabet has no real whitespace, so skip those.
            let vocabulary_tokens =
                case.tokens.iter().zip(&case.ids).filter(|(token, _)| !token.contains(char::is_whitespace));
            for (token, id) in vocabulary_tokens {
                assert_eq!(tokenizer.token_id(token), Some(*id), "variant {}: token {token:?}", variant.name);
            }
        }
    }
}

#[test]
fn partial_characters_decode_lossily_but_bytes_stay_exact() {
    let tokenizer = from_tokenizer_json();
    let ids = tokenizer.encode("👋").unwrap();
    assert!(ids.len() > 1, "the fixture vocabulary has no token for 👋, so it spans byte tokens");
    let head = &ids[..ids.len() - 1];
    let bytes = tokenizer.decode_bytes(head).unwrap();
    assert!("👋".as_bytes().starts_with(&bytes) && bytes.len() < 4);
    assert_eq!(tokenizer.decode(head).unwrap(), "\u{FFFD}");
}

#[test]
fn ids_without_a_token_decode_to_nothing_but_have_no_label() {
    let mut config: Value = serde_json::from_slice(TOKENIZER_JSON).unwrap();
    let vocab = config["model"]["vocab"].as_object_mut().unwrap();
    let removed = vocab.remove("Ā").and_then(|id| id.as_u64()).unwrap() as u32;
    let tokenizer = Tokenizer::from_tokenizer_json(&serde_json::to_vec(&config).unwrap()).unwrap();
    assert_eq!(tokenizer.vocab_size(), FIXTURE_VOCAB_SIZE);
    let a = tokenizer.token_id("a").unwrap();
    assert_eq!(tokenizer.decode(&[a, removed, a]).unwrap(), "aa", "as in Python, the gap is skipped");
    assert!(matches!(tokenizer.token_string(removed), Err(Error::Tokenizer(_))));
}

#[test]
fn bytes_tokenizer_round_trips_every_byte() {
    let tokenizer = Tokenizer::Bytes;
    assert_eq!(tokenizer.vocab_size(), 256);
    let text = "héllo 👋\n<|endoftext|>";
    let ids = tokenizer.encode(text).unwrap();
    assert_eq!(ids, text.bytes().map(u32::from).collect::<Vec<_>>());
    assert_eq!(tokenizer.decode(&ids).unwrap(), text);
    let every_byte: Vec<u32> = (0..256).collect();
    assert_eq!(tokenizer.decode_bytes(&every_byte).unwrap(), (0..=255u8).collect::<Vec<_>>());
    assert_eq!(tokenizer.decode(&[0xF0, 0x9F]).unwrap(), "\u{FFFD}");
    assert_eq!(tokenizer.token_string(u32::from(b'a')).unwrap(), "a");
    assert_eq!(tokenizer.token_string(0xF0).unwrap(), "\\xF0");
    assert_eq!(tokenizer.token_string(u32::from(b'\n')).unwrap(), "\\n");
    assert_eq!(tokenizer.token_id("a"), Some(97));
    assert_eq!(tokenizer.token_id("ab"), None);
}

#[test]
fn out_of_range_ids_are_reported() {
    let out_of_range = |result: gptlens::Result<String>, vocab: usize| match result {
        Err(Error::TokenOutOfRange { id, vocab: reported }) => {
            assert_eq!(reported, vocab);
            id
        }
        other => panic!("expected TokenOutOfRange, got {other:?}"),
    };
    let bpe = from_tokenizer_json();
    assert_eq!(out_of_range(bpe.decode(&[1, 513, 2]), FIXTURE_VOCAB_SIZE), 513);
    assert_eq!(out_of_range(bpe.token_string(u32::MAX), FIXTURE_VOCAB_SIZE), u32::MAX);
    assert!(matches!(bpe.decode_bytes(&[600]), Err(Error::TokenOutOfRange { id: 600, vocab: 513 })));
    assert_eq!(out_of_range(Tokenizer::Bytes.decode(&[256]), 256), 256);
    assert_eq!(out_of_range(Tokenizer::Bytes.token_string(u32::MAX), 256), u32::MAX);
}

#[test]
fn malformed_tokenizer_json_is_an_error_not_a_panic() {
    for cut in (0..TOKENIZER_JSON.len()).step_by(53) {
        assert_tokenizer_error(Tokenizer::from_tokenizer_json(&TOKENIZER_JSON[..cut]), "tokenizer.json");
    }
    assert_tokenizer_error(Tokenizer::from_tokenizer_json(b"\xff\xfe{"), "tokenizer.json");
    assert_tokenizer_error(Tokenizer::from_tokenizer_json(b"[1, 2]"), "tokenizer.json");
}

#[test]
fn unsupported_tokenizer_settings_are_named() {
    let load = |patch: Value| Tokenizer::from_tokenizer_json(&patched(patch));
    assert_tokenizer_error(load(serde_json::json!({"model": {"type": "WordPiece"}})), "WordPiece");
    assert_tokenizer_error(load(serde_json::json!({"model": {"merges": [["Ġ", "qqq"]]}})), "qqq");
    assert_tokenizer_error(load(serde_json::json!({"model": {"merges": ["Ġ t h"]}})), "Ġ t h");
    assert_tokenizer_error(load(serde_json::json!({"model": {"vocab": {"a": -1}}})), "BPE model");
    assert_tokenizer_error(load(serde_json::json!({"model": {"vocab": {"a": 99_999_999}, "merges": []}})), "99999999");
    assert_tokenizer_error(load(serde_json::json!({"model": {"dropout": 0.1}})), "dropout");
    // Byte fallback means SentencePiece-style BPE, which has no ByteLevel pre-tokenizer.
    assert_tokenizer_error(load(serde_json::json!({"model": {"byte_fallback": true}})), "ByteLevel");
    assert_tokenizer_error(load(serde_json::json!({"model": {"unk_token": "<unk>"}})), "<unk>");
    assert_tokenizer_error(
        load(serde_json::json!({"pre_tokenizer": {"type": "Metaspace", "replacement": "▁"}})),
        "Metaspace",
    );
    assert_tokenizer_error(
        load(serde_json::json!({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\d"}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}
        ]}})),
        "Split",
    );
    assert_tokenizer_error(load(serde_json::json!({"pre_tokenizer": null})), "no pre-tokenizer");
    assert_tokenizer_error(load(serde_json::json!({"normalizer": {"type": "NFC"}})), "NFC");
    assert_tokenizer_error(
        load(
            serde_json::json!({"post_processor": {"type": "TemplateProcessing", "single": [], "pair": [], "special_tokens": {}}}),
        ),
        "TemplateProcessing",
    );
}

#[test]
fn malformed_vocab_and_merges_are_errors() {
    assert_tokenizer_error(Tokenizer::from_vocab_merges(&VOCAB_JSON[..VOCAB_JSON.len() / 2], MERGES_TXT), "vocab.json");
    assert_tokenizer_error(Tokenizer::from_vocab_merges(b"[\"a\"]", MERGES_TXT), "vocab.json");
    assert_tokenizer_error(Tokenizer::from_vocab_merges(VOCAB_JSON, b"#version: 0.2\nx qqq\n"), "qqq");
    assert_tokenizer_error(Tokenizer::from_vocab_merges(VOCAB_JSON, b"#version: 0.2\n\xC4\xA0 t h\n"), "Ġ t h");
    assert_tokenizer_error(Tokenizer::from_vocab_merges(VOCAB_JSON, b"\xff\xfe"), "UTF-8");
}

/// tokenizer.json files beyond GPT-2's ByteLevel (tests/fixtures/tokenizer-json-more, ids from
/// `tokenizers` on each file): SentencePiece-style BPE with byte fallback as LLaMA writes it today
/// (Metaspace, prepend "first", BOS by TemplateProcessing), as older LLaMA / TinyLlama files do
/// (Prepend + Replace normalizers), as Gemma does (Replace only, `<bos>` an added token past the
/// vocabulary) and with Metaspace splitting words; and SmolLM2's Digits + ByteLevel.
#[test]
fn sentencepiece_and_digits_tokenizer_json_match_tokenizers() {
    let dir = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tokenizer-json-more"));
    let cases: Value = serde_json::from_slice(&std::fs::read(dir.join("cases.json")).unwrap()).unwrap();
    let texts: Vec<&str> = cases["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    for name in ["llama-metaspace", "llama-normalizer", "gemma", "metaspace-split", "smollm"] {
        let json = std::fs::read(dir.join(format!("{name}.tokenizer.json"))).unwrap();
        let tokenizer = Tokenizer::from_tokenizer_json(&json).unwrap_or_else(|e| panic!("{name}: {e}"));
        for (text, want) in texts.iter().zip(cases[name].as_array().unwrap()) {
            let want: Vec<u32> = want.as_array().unwrap().iter().map(|id| id.as_u64().unwrap() as u32).collect();
            assert_eq!(tokenizer.encode(text).unwrap(), want, "{name}: {text:?}");
        }
    }
}

#[test]
fn sentencepiece_tokenizer_json_settings_it_cannot_follow_are_named() {
    let dir = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tokenizer-json-more"));
    let base: Value =
        serde_json::from_slice(&std::fs::read(dir.join("llama-metaspace.tokenizer.json")).unwrap()).unwrap();
    let load = |key: &str, value: Value| {
        let mut file = base.clone();
        file[key] = value;
        Tokenizer::from_tokenizer_json(&serde_json::to_vec(&file).unwrap())
    };
    assert_tokenizer_error(load("normalizer", serde_json::json!({"type": "NFKC"})), "NFKC");
    assert_tokenizer_error(load("pre_tokenizer", Value::Null), "keeps spaces");
    assert_tokenizer_error(load("pre_tokenizer", serde_json::json!({"type": "Whitespace"})), "Whitespace");
    assert_tokenizer_error(
        load("pre_tokenizer", serde_json::json!({"type": "Metaspace", "replacement": "_", "prepend_scheme": "first"})),
        "replacement",
    );
    assert_tokenizer_error(
        load(
            "post_processor",
            serde_json::json!({"type": "TemplateProcessing", "single": [
            {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"SpecialToken": {"id": "<s>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}),
        ),
        "one token before",
    );
    assert_tokenizer_error(
        load(
            "post_processor",
            serde_json::json!({"type": "TemplateProcessing", "single": [
            {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [5000], "tokens": ["<s>"]}}}),
        ),
        "adds token 5000",
    );
    assert_tokenizer_error(load("post_processor", serde_json::json!({"type": "BertProcessing"})), "BertProcessing");
    let mut merges = base.clone();
    merges["model"]["merges"] = serde_json::json!([["▁", "qqq"]]);
    assert_tokenizer_error(Tokenizer::from_tokenizer_json(&serde_json::to_vec(&merges).unwrap()), "qqq");
    let mut gaps = base.clone();
    gaps["model"]["vocab"]["<gap>"] = serde_json::json!(9000);
    assert_tokenizer_error(Tokenizer::from_tokenizer_json(&serde_json::to_vec(&gaps).unwrap()), "ids 0..");
}

/// Typing into a prompt: after every random edit (a snippet inserted at a random character, a
/// range deleted or replaced, a character typed at the end), encoding with the memo of the
/// earlier texts gives the ids of a full encode — on the fixture, every patched variant (prefix
/// space, added tokens that strip whitespace or match single words only) and the SmolLM2, Llama 3
/// and Qwen2 tokenizer.json fixtures (digits split, ChatML tokens, their split patterns).
#[test]
fn typing_reencodes_exactly_like_a_full_encode() {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures");
    let mut tokenizers: Vec<(String, Tokenizer)> = vec![("tokenizer.json".into(), from_tokenizer_json())];
    let extra: ExtraCases = serde_json::from_slice(EXTRA_CASES_JSON).expect("extra_cases.json parses");
    for variant in &extra.variants {
        let tokenizer = Tokenizer::from_tokenizer_json(&patched_tokenizer_json(&variant.patch)).unwrap();
        tokenizers.push((variant.name.clone(), tokenizer));
    }
    for file in [
        "tokenizer-json-more/smollm.tokenizer.json",
        "tokenizer-llama3-qwen2/llama-bpe.tokenizer.json",
        "tokenizer-llama3-qwen2/qwen2.tokenizer.json",
    ] {
        let bytes = std::fs::read(format!("{fixtures}/{file}")).unwrap();
        tokenizers.push((file.into(), Tokenizer::from_tokenizer_json(&bytes).unwrap()));
    }
    let mut snippets: Vec<String> = cases().into_iter().map(|case| case.text).collect();
    snippets.extend(
        [
            "<|endoftext|>",
            "<|im_start|>",
            "<|im_end|>",
            "<m>",
            "12",
            "2024",
            " 3.14",
            "  ",
            "\n\n",
            "\t",
            "'s",
            "'ll",
            "héllo",
            "世界",
            "🙂",
            "a",
            " ",
            "x",
            "ünï",
            "\u{a0}",
            "--",
            "!!",
        ]
        .map(String::from),
    );
    // xorshift64*: reproducible without a crate.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |n: usize| {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    };
    for (name, tokenizer) in &tokenizers {
        let mut memo = gptlens::tokenizer::PieceMemo::default();
        let mut text = String::new();
        for step in 0..400 {
            let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
            let at = boundaries[next(boundaries.len())];
            let snippet = &snippets[next(snippets.len())];
            match next(4) {
                0 => text.insert_str(at, snippet),
                1 => {
                    let end = boundaries
                        [(boundaries.iter().position(|&b| b == at).unwrap() + 1 + next(8)).min(boundaries.len() - 1)];
                    text.replace_range(at..end, if next(2) == 0 { "" } else { snippet });
                }
                // Typing at the end, a character of a snippet at a time.
                _ => text.push(snippet.chars().nth(next(snippet.chars().count())).unwrap_or(' ')),
            }
            if text.len() > 600 {
                let half = text.char_indices().nth(text.chars().count() / 2).map_or(0, |(i, _)| i);
                text.replace_range(..half, "");
            }
            let full = tokenizer.encode(&text).unwrap();
            let remembered = tokenizer.encode_remembering(&text, &mut memo).unwrap();
            assert_eq!(remembered, full, "{name}, step {step}: {text:?}");
        }
    }
}
