#![cfg(not(target_arch = "wasm32"))]
//! Tokenizers from GGUF metadata, against Python on tests/fixtures/tokenizer-smollm/cases.json
//! (written by make_smollm_cases.py there):
//!
//! * SmolLM2-135M-Instruct, read from assets/models/ (scripts/fetch-smollm.sh; not committed, so
//!   those tests print why they skip when it is absent): every case id for id, both with SmolLM2's
//!   own pre-tokenizer (`pre = smollm`, which llama.cpp agrees with) and with the `gpt2` one that
//!   transformers' GGUF loader falls back to; decoding, markers, the chat template, timings.
//! * A tiny vocabulary stored in the fixture itself, for token types and special ids; it is also
//!   written out as a GGUF here to go through [`GgufVocab::from_gguf`].
//! * Malformed metadata, which must give errors and never panic.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

use gptlens::formats::gguf::GgufFile;
use gptlens::tokenizer::{GgufVocab, SpecialTokens, Tokenizer};
use gptlens::Error;
use serde::Deserialize;

const CASES_JSON: &[u8] =
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tokenizer-smollm/cases.json"));
const SMOLLM_GGUF: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The brief's reference prompt and its ids (transformers 5.23 on this GGUF).
const PANGRAM: &str = "The quick brown fox jumps over the lazy dog.";
const PANGRAM_IDS: [u32; 10] = [504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 30];

#[derive(Deserialize)]
struct Fixture {
    gguf: String,
    vocab_size: usize,
    add_bos_token: bool,
    special: Special,
    markers: Vec<Marker>,
    cases: Vec<Case>,
    chat: Chat,
    tiny: Tiny,
}

#[derive(Deserialize)]
struct Special {
    bos_token: Marker,
    eos_token: Marker,
    unk_token: Marker,
    pad_token: Marker,
}

#[derive(Deserialize)]
struct Marker {
    token: String,
    id: u32,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    text: String,
    /// transformers' GGUF tokenizer (GPT-2 pre-tokenizer).
    ids: Vec<u32>,
    /// SmolLM2's own pre-tokenizer (Digits, then ByteLevel); llama.cpp agrees.
    ids_smollm: Vec<u32>,
    /// The vocabulary strings of `ids_smollm`.
    tokens: Vec<String>,
    /// Python's `decode(ids_smollm)`.
    decoded: String,
}

#[derive(Deserialize)]
struct Chat {
    user: String,
    prompt: String,
    ids: Vec<u32>,
    ids_smollm: Vec<u32>,
    /// The same message after the system message "Be brief.".
    system_prompt: String,
}

#[derive(Deserialize)]
struct Tiny {
    metadata: TinyMetadata,
    added_tokens: std::collections::BTreeMap<String, u32>,
    cases: Vec<TinyCase>,
}

#[derive(Deserialize)]
struct TinyMetadata {
    model: String,
    pre: String,
    tokens: Vec<String>,
    token_types: Vec<i32>,
    merges: Vec<String>,
    bos: u32,
    pad: u32,
    add_bos: bool,
}

#[derive(Deserialize)]
struct TinyCase {
    text: String,
    ids: Vec<u32>,
    ids_smollm: Vec<u32>,
}

fn fixture() -> Fixture {
    serde_json::from_slice(CASES_JSON).expect("cases.json parses")
}

/// The SmolLM2 GGUF's bytes, or `None` (after saying why) when it has not been fetched.
fn smollm_gguf_bytes(test: &str) -> Option<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../assets/models").join(SMOLLM_GGUF);
    match std::fs::read(&path) {
        Ok(bytes) => Some(bytes),
        Err(e) => {
            eprintln!("skipping {test}: cannot read {} ({e}); run scripts/fetch-smollm.sh to get it", path.display());
            None
        }
    }
}

fn vocab_from_file<'a>(file: &'a GgufFile<'_>) -> GgufVocab<'a> {
    GgufVocab::from_gguf(file).expect("the SmolLM2 GGUF has tokenizer metadata")
}

#[test]
fn smollm2_matches_python_id_for_id() {
    let Some(bytes) = smollm_gguf_bytes("smollm2_matches_python_id_for_id") else {
        return;
    };
    let fixture = fixture();
    assert_eq!(fixture.gguf, SMOLLM_GGUF);
    let file = GgufFile::parse(&bytes).unwrap();
    let vocab = vocab_from_file(&file);
    assert_eq!(vocab.pre, Some("smollm"));
    assert_eq!(vocab.add_bos, fixture.add_bos_token);
    let smollm = Tokenizer::from_gguf_vocab(&vocab).unwrap();
    let gpt2 = Tokenizer::from_gguf_vocab(&GgufVocab { pre: Some("gpt2"), ..vocab }).unwrap();
    assert_eq!(smollm.vocab_size(), fixture.vocab_size);

    let mut differing = BTreeSet::new();
    for case in &fixture.cases {
        let name = &case.name;
        assert_eq!(smollm.encode(&case.text).unwrap(), case.ids_smollm, "pre = smollm, case {name}: {:?}", case.text);
        assert_eq!(
            gpt2.encode(&case.text).unwrap(),
            case.ids,
            "pre = gpt2 (transformers' GGUF loader), case {name}: {:?}",
            case.text
        );
        if case.ids != case.ids_smollm {
            differing.insert(name.as_str());
        }
        // Token strings: each id is the vocabulary token Python names.
        let ids_of_tokens: Vec<Option<u32>> = case.tokens.iter().map(|t| smollm.token_id(t)).collect();
        let expected: Vec<Option<u32>> = case.ids_smollm.iter().map(|&id| Some(id)).collect();
        assert_eq!(ids_of_tokens, expected, "token strings of case {name}");
        // Decoding gives back the text, less the bytes the vocabulary has no token for.
        assert_eq!(smollm.decode(&case.ids_smollm).unwrap(), case.decoded, "decode, case {name}");
        if name != "bytes_without_token" {
            assert_eq!(case.decoded, case.text, "round trip, case {name}");
        }
    }
    // Where the two pre-tokenizers part: whitespace, or a space, right before a number.
    assert_eq!(differing, BTreeSet::from(["numbered_list", "other_numerics", "space_runs_before_digits"]));
    assert_eq!(smollm.encode(PANGRAM).unwrap(), PANGRAM_IDS);
}

#[test]
fn smollm2_special_tokens_and_markers() {
    let Some(bytes) = smollm_gguf_bytes("smollm2_special_tokens_and_markers") else {
        return;
    };
    let fixture = fixture();
    let file = GgufFile::parse(&bytes).unwrap();
    let tokenizer = Tokenizer::from_gguf(&file).unwrap();
    let special = &fixture.special;
    assert_eq!(
        tokenizer.special_tokens(),
        SpecialTokens {
            bos: Some(special.bos_token.id),
            eos: Some(special.eos_token.id),
            unk: Some(special.unk_token.id),
            pad: Some(special.pad_token.id),
        }
    );
    // <|im_start|> 1, <|im_end|> 2, <|endoftext|> 0.
    assert_eq!((special.bos_token.id, special.eos_token.id, special.unk_token.id), (1, 2, 0));
    let named = [&special.bos_token, &special.eos_token, &special.unk_token, &special.pad_token];
    for marker in fixture.markers.iter().chain(named) {
        assert_eq!(tokenizer.token_string(marker.id).unwrap(), marker.token);
        assert_eq!(tokenizer.token_id(&marker.token), Some(marker.id));
        assert_eq!(tokenizer.encode(&marker.token).unwrap(), [marker.id], "{} is matched whole", marker.token);
    }
    // add_bos_token is false: no BOS in front of a prompt.
    assert!(!fixture.add_bos_token);
    assert_eq!(tokenizer.encode("Hello").unwrap(), [19556]);
}

#[test]
fn smollm2_chatml_prompt() {
    let Some(bytes) = smollm_gguf_bytes("smollm2_chatml_prompt") else {
        return;
    };
    let chat = fixture().chat;
    let file = GgufFile::parse(&bytes).unwrap();
    let tokenizer = Tokenizer::from_gguf(&file).unwrap();
    // The template puts its own system prompt in front when the chat has none.
    let prompt = tokenizer.chatml(&chat.user).unwrap();
    assert_eq!(prompt, chat.prompt);
    assert!(prompt.starts_with(
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    ));
    assert_eq!(tokenizer.encode(&prompt).unwrap(), chat.ids_smollm);
    assert_eq!(chat.ids, chat.ids_smollm);
    let template = tokenizer.chat_template().unwrap();
    assert_eq!(template.prompt_with_system(Some("Be brief."), &chat.user), chat.system_prompt);
}

/// Building from 49152 tokens and 48900 merges, and encoding; prints the timings.
#[test]
fn smollm2_build_and_encode_speed() {
    let Some(bytes) = smollm_gguf_bytes("smollm2_build_and_encode_speed") else {
        return;
    };
    let file = GgufFile::parse(&bytes).unwrap();
    const BUILDS: usize = 10;
    let mut builds = Vec::new();
    let mut tokenizer = None;
    let cpu_start = thread_cpu_ms();
    for _ in 0..BUILDS {
        let start = Instant::now();
        tokenizer = Some(Tokenizer::from_gguf(&file).unwrap());
        builds.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let cpu_per_build = thread_cpu_ms().zip(cpu_start).map(|(end, start)| (end - start) / BUILDS as f64);
    let tokenizer = tokenizer.unwrap();
    builds.sort_by(f64::total_cmp);

    let text: String = fixture().cases.iter().map(|case| case.text.as_str()).collect::<Vec<_>>().join("\n").repeat(100);
    // Fastest of five runs: the least disturbed by whatever else the machine is doing.
    let fastest = |tokenizer: &Tokenizer| {
        (0..5)
            .map(|_| {
                let start = Instant::now();
                tokenizer.encode(&text).unwrap();
                start.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    let ids = tokenizer.encode(&text).unwrap();
    let seconds = fastest(&tokenizer);
    // The same text through the GPT-2 pre-tokenizer alone, for comparison.
    let gpt2 = Tokenizer::from_gguf_vocab(&GgufVocab { pre: Some("gpt2"), ..vocab_from_file(&file) }).unwrap();
    let gpt2_seconds = fastest(&gpt2);
    eprintln!(
        "SmolLM2 tokenizer: build median {:.1} ms wall (min {:.1}, max {:.1}) over {BUILDS}, {} ms CPU each; \
         encode {} KB → {} ids in {:.1} ms ({:.1} MB/s; {:.1} ms with pre = gpt2)",
        builds[BUILDS / 2],
        builds[0],
        builds[BUILDS - 1],
        cpu_per_build.map_or("?".into(), |ms| format!("{ms:.1}")),
        text.len() / 1000,
        ids.len(),
        seconds * 1e3,
        text.len() as f64 / seconds / 1e6,
        gpt2_seconds * 1e3
    );
    // Generous bounds that only a pathology would cross (the machine may be busy).
    assert!(builds[BUILDS / 2] < 1000.0, "building took {:.0} ms", builds[BUILDS / 2]);
    assert!(seconds < 5.0, "encoding took {seconds:.1} s");
}

/// CPU time of this thread so far, from Linux's /proc (clock ticks of 10 ms); `None` elsewhere.
/// Unlike wall time, it does not grow when other processes compete for the cores.
fn thread_cpu_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the parenthesized command name: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks * 10.0)
}

fn tiny_vocab<'a>(metadata: &'a TinyMetadata, tokens: &'a [&'a str], merges: &'a [&'a str]) -> GgufVocab<'a> {
    GgufVocab {
        model: &metadata.model,
        pre: Some(&metadata.pre),
        tokens,
        token_types: Some(&metadata.token_types),
        merges: Some(merges),
        bos: Some(metadata.bos),
        pad: Some(metadata.pad),
        add_bos: metadata.add_bos,
        ..GgufVocab::default()
    }
}

/// Token types and special ids as transformers reads them, on the fixture's tiny vocabulary.
#[test]
fn tiny_vocabulary_matches_transformers() {
    let tiny = fixture().tiny;
    let tokens: Vec<&str> = tiny.metadata.tokens.iter().map(String::as_str).collect();
    let merges: Vec<&str> = tiny.metadata.merges.iter().map(String::as_str).collect();
    let vocab = tiny_vocab(&tiny.metadata, &tokens, &merges);
    let smollm = Tokenizer::from_gguf_vocab(&vocab).unwrap();
    let gpt2 = Tokenizer::from_gguf_vocab(&GgufVocab { pre: Some("gpt2"), ..vocab }).unwrap();
    for case in &tiny.cases {
        assert_eq!(smollm.encode(&case.text).unwrap(), case.ids_smollm, "{:?}", case.text);
        assert_eq!(gpt2.encode(&case.text).unwrap(), case.ids, "{:?}", case.text);
    }
    for (token, &id) in &tiny.added_tokens {
        if (id as usize) < tokens.len() {
            assert_eq!(smollm.encode(token).unwrap(), [vocab.bos.unwrap(), id], "{token}");
        } else {
            // transformers' extra `<|endoftext|>` past the vocabulary, which gptlens leaves out.
            assert_eq!(token, "<|endoftext|>");
            assert_eq!(smollm.token_id(token), None);
        }
    }
    // The same metadata written as a GGUF goes through `GgufVocab::from_gguf`.
    let bytes = tiny_gguf(&tiny.metadata);
    let file = GgufFile::parse(&bytes).unwrap();
    let from_file = Tokenizer::from_gguf(&file).unwrap();
    for case in &tiny.cases {
        assert_eq!(from_file.encode(&case.text).unwrap(), case.ids_smollm);
    }
    // add_bos_token off: no BOS.
    let no_bos = Tokenizer::from_gguf_vocab(&GgufVocab { add_bos: false, ..vocab }).unwrap();
    assert_eq!(no_bos.encode("<s>x").unwrap(), [vocab.bos.unwrap(), 120]);
}

/// A minimal GGUF v3 holding only tokenizer metadata.
fn tiny_gguf(metadata: &TinyMetadata) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"GGUF");
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // tensors
    out.extend_from_slice(&8u64.to_le_bytes()); // metadata entries
    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    fn key(out: &mut Vec<u8>, key: &str, value_type: u32) {
        string(out, key);
        out.extend_from_slice(&value_type.to_le_bytes());
    }
    const U32: u32 = 4;
    const I32: u32 = 5;
    const BOOL: u32 = 7;
    const STRING: u32 = 8;
    const ARRAY: u32 = 9;
    key(&mut out, "tokenizer.ggml.model", STRING);
    string(&mut out, &metadata.model);
    key(&mut out, "tokenizer.ggml.pre", STRING);
    string(&mut out, &metadata.pre);
    key(&mut out, "tokenizer.ggml.tokens", ARRAY);
    out.extend_from_slice(&STRING.to_le_bytes());
    out.extend_from_slice(&(metadata.tokens.len() as u64).to_le_bytes());
    metadata.tokens.iter().for_each(|t| string(&mut out, t));
    key(&mut out, "tokenizer.ggml.token_type", ARRAY);
    out.extend_from_slice(&I32.to_le_bytes());
    out.extend_from_slice(&(metadata.token_types.len() as u64).to_le_bytes());
    metadata.token_types.iter().for_each(|t| out.extend_from_slice(&t.to_le_bytes()));
    key(&mut out, "tokenizer.ggml.merges", ARRAY);
    out.extend_from_slice(&STRING.to_le_bytes());
    out.extend_from_slice(&(metadata.merges.len() as u64).to_le_bytes());
    metadata.merges.iter().for_each(|m| string(&mut out, m));
    key(&mut out, "tokenizer.ggml.bos_token_id", U32);
    out.extend_from_slice(&metadata.bos.to_le_bytes());
    key(&mut out, "tokenizer.ggml.padding_token_id", U32);
    out.extend_from_slice(&metadata.pad.to_le_bytes());
    key(&mut out, "tokenizer.ggml.add_bos_token", BOOL);
    out.push(u8::from(metadata.add_bos));
    out.resize(out.len().next_multiple_of(32), 0);
    out
}

/// A small valid vocabulary to break one piece at a time: the 256 byte characters, `ĠĠ`,
/// `<|im_start|>` (control), merge `Ġ Ġ`.
struct Small {
    tokens: Vec<String>,
    types: Vec<i32>,
}

impl Small {
    fn new() -> Self {
        let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_char(b).to_string()).collect();
        tokens.push("ĠĠ".into());
        tokens.push("<|im_start|>".into());
        let mut types = vec![1; tokens.len()];
        types[257] = 3;
        Self { tokens, types }
    }

    fn tokens(&self) -> Vec<&str> {
        self.tokens.iter().map(String::as_str).collect()
    }
}

/// GPT-2's byte → character table.
fn byte_char(byte: u8) -> char {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if printable(byte) {
        return char::from(byte);
    }
    let moved = (0..byte).filter(|&b| !printable(b)).count() as u32;
    char::from_u32(0x100 + moved).unwrap()
}

fn tokenizer_error(vocab: &GgufVocab) -> String {
    match Tokenizer::from_gguf_vocab(vocab) {
        Err(Error::Tokenizer(message)) => message,
        Err(other) => panic!("expected a tokenizer error, got {other}"),
        Ok(_) => panic!("malformed metadata was accepted"),
    }
}

#[test]
fn digits_are_split_before_gpt2_pattern() {
    let small = Small::new();
    let tokens = small.tokens();
    let merges = ["Ġ Ġ"];
    let vocab = GgufVocab {
        model: "gpt2",
        pre: Some("smollm"),
        tokens: &tokens,
        token_types: Some(&small.types),
        merges: Some(&merges),
        ..GgufVocab::default()
    };
    let smollm = Tokenizer::from_gguf_vocab(&vocab).unwrap();
    let gpt2 = Tokenizer::from_gguf_vocab(&GgufVocab { pre: Some("gpt2"), ..vocab }).unwrap();
    let (x, one, space, two_spaces) = (b'x' as u32, b'1' as u32, 32, 256);
    // "x  1": Digits leaves "x  " whole, so both spaces merge; GPT-2 lends one to " 1".
    assert_eq!(smollm.encode("x  1").unwrap(), [x, two_spaces, one]);
    assert_eq!(gpt2.encode("x  1").unwrap(), [x, space, space, one]);
    assert_eq!(smollm.encode("<|im_start|>x").unwrap(), [257, x]);
    assert_eq!(smollm.special_tokens(), SpecialTokens::default());
    assert!(smollm.chatml("hi").is_err(), "no chat template");
}

#[test]
fn malformed_metadata_is_an_error() {
    let small = Small::new();
    let tokens = small.tokens();
    let merges = ["Ġ Ġ"];
    let good = GgufVocab {
        model: "gpt2",
        pre: Some("smollm"),
        tokens: &tokens,
        token_types: Some(&small.types),
        merges: Some(&merges),
        bos: Some(257),
        ..GgufVocab::default()
    };
    Tokenizer::from_gguf_vocab(&good).expect("the unbroken vocabulary loads");

    let unknown_merge = ["Ġ Ġ", "q z"];
    let message = tokenizer_error(&GgufVocab { merges: Some(&unknown_merge), ..good });
    assert!(message.contains("merge #2") && message.contains("`qz`"), "{message}");
    let three_parts = ["Ġ Ġ Ġ"];
    let message = tokenizer_error(&GgufVocab { merges: Some(&three_parts), ..good });
    assert!(message.contains("not two tokens"), "{message}");
    let message = tokenizer_error(&GgufVocab { merges: None, ..good });
    assert!(message.contains("tokenizer.ggml.merges is missing"), "{message}");

    let message = tokenizer_error(&GgufVocab { token_types: Some(&small.types[..100]), ..good });
    assert!(message.contains("100 entries") && message.contains("258"), "{message}");
    let mut bad_types = small.types.clone();
    bad_types[7] = 42;
    let message = tokenizer_error(&GgufVocab { token_types: Some(&bad_types), ..good });
    assert!(message.contains("token 7") && message.contains("type 42"), "{message}");

    let message = tokenizer_error(&GgufVocab { eos: Some(100_000), ..good });
    assert!(message.contains("eos_token_id is 100000"), "{message}");
    let message = tokenizer_error(&GgufVocab { add_eos: true, ..good });
    assert!(message.contains("add_eos_token"), "{message}");

    let message = tokenizer_error(&GgufVocab { model: "bert", ..good });
    assert!(message.contains("`bert`") && message.contains("`llama` (SentencePiece)"), "{message}");
    let message = tokenizer_error(&GgufVocab { model: "llama", ..good });
    assert!(message.contains("tokenizer.ggml.scores"), "a SentencePiece vocabulary needs its scores: {message}");
    let message = tokenizer_error(&GgufVocab { pre: Some("tekken"), ..good });
    assert!(message.contains("`tekken`") && message.contains("`llama-bpe`"), "{message}");
    let message = tokenizer_error(&GgufVocab { pre: None, ..good });
    assert!(message.contains("no tokenizer.ggml.pre"), "{message}");
    let message = tokenizer_error(&GgufVocab { tokens: &[], token_types: None, merges: Some(&[]), bos: None, ..good });
    assert!(message.contains("empty"), "{message}");

    // Duplicate tokens are legal (the later id wins the spelling, as in transformers).
    let mut duplicated = tokens.clone();
    duplicated[256] = "a";
    Tokenizer::from_gguf_vocab(&GgufVocab { tokens: &duplicated, merges: Some(&[]), ..good })
        .expect("duplicate tokens load");
}

#[test]
fn wrongly_typed_gguf_keys_name_the_key() {
    let tiny = fixture().tiny;
    let mut bytes = tiny_gguf(&tiny.metadata);
    // Turn `tokenizer.ggml.bos_token_id` (u32) into an i32.
    let key = b"tokenizer.ggml.bos_token_id";
    let at = bytes.windows(key.len()).position(|window| window == key).unwrap() + key.len();
    bytes[at..at + 4].copy_from_slice(&5u32.to_le_bytes());
    let file = GgufFile::parse(&bytes).unwrap();
    match Tokenizer::from_gguf(&file) {
        Err(Error::MetadataType { key, expected, .. }) => {
            assert_eq!(key, "tokenizer.ggml.bos_token_id");
            assert_eq!(expected, "a u32");
        }
        other => panic!("expected a metadata type error, got {other:?}"),
    }
}

/// Gemma-3-270M's SentencePiece vocabulary (262,144 tokens; `npm run fetch:gemma`), id for id
/// as transformers encodes it (tests/fixtures/gemma3-270m/make_tokenizer_cases.py): Gemma's merge
/// order, byte fallback, whitespace tokens, added tokens (`\n\n`, `<td>`), BOS.
#[test]
fn gemma3_sentencepiece_matches_transformers() {
    #[derive(Deserialize)]
    struct GemmaCase {
        text: String,
        ids: Vec<u32>,
    }
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/models/gemma-3-270m-q4_k_m.gguf"));
    if !path.exists() {
        eprintln!("SKIPPED: {} is absent (`npm run fetch:gemma` fetches it)", path.display());
        return;
    }
    let bytes = std::fs::read(&path).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    let started = Instant::now();
    let tokenizer = Tokenizer::from_gguf(&file).unwrap();
    eprintln!("Gemma's tokenizer built in {:.0} ms", started.elapsed().as_secs_f64() * 1e3);
    assert!(matches!(tokenizer, Tokenizer::SentencePiece(_)));
    let cases: Vec<GemmaCase> = serde_json::from_slice(
        &std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/gemma3-270m/tokenizer_cases.json"))
            .unwrap(),
    )
    .unwrap();
    for case in &cases {
        assert_eq!(tokenizer.encode(&case.text).unwrap(), case.ids, "{:?}", case.text);
    }
    // Decoding gives the text back after the BOS (byte-fallback pieces joined into characters).
    for case in cases.iter().filter(|c| !c.text.contains("<bos>")) {
        assert_eq!(tokenizer.decode(&case.ids[1..]).unwrap(), case.text, "decode {:?}", case.text);
    }
    let started = Instant::now();
    let long = cases.iter().map(|c| c.text.as_str()).collect::<Vec<_>>().join(" ").repeat(20);
    let n = tokenizer.encode(&long).unwrap().len();
    eprintln!("{n} tokens of mixed text in {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
}

/// A LLaMA-style SentencePiece vocabulary (tests/fixtures/tokenizer-spm: trained by
/// `sentencepiece` with byte fallback, written as a vocabulary-only GGUF) id for id as
/// transformers encodes it: score-ranked merges, `▁` prepended at the start only, `<s>` / `</s>`
/// matched whole, bytes for unseen characters, BOS added.
#[test]
fn llama_sentencepiece_matches_transformers() {
    #[derive(Deserialize)]
    struct SpmCase {
        text: String,
        ids: Vec<u32>,
    }
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tokenizer-spm"));
    let bytes = std::fs::read(dir.join("vocab.gguf")).unwrap();
    let tokenizer = Tokenizer::from_gguf(&GgufFile::parse(&bytes).unwrap()).unwrap();
    let cases: Vec<SpmCase> = serde_json::from_slice(&std::fs::read(dir.join("cases.json")).unwrap()).unwrap();
    for case in &cases {
        assert_eq!(tokenizer.encode(&case.text).unwrap(), case.ids, "{:?}", case.text);
    }
    assert_eq!(tokenizer.special_tokens().bos, Some(1));
}

/// Byte-level vocabularies with LLaMA 3's and Qwen2's pre-tokenizers
/// (tests/fixtures/tokenizer-llama3-qwen2: trained by `tokenizers` with each split regex, written as
/// vocabulary-only GGUFs with `tokenizer.ggml.pre` = `llama-bpe` / `qwen2`, and as tokenizer.json),
/// id for id as transformers' GGUF tokenizer and `tokenizers` encode them: contractions in any case, digits by three or one,
/// line-break runs kept whole, a leading non-letter joining a word.
#[test]
fn llama3_and_qwen2_pre_tokenizers_match_transformers() {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tokenizer-llama3-qwen2"));
    let cases: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("cases.json")).unwrap()).unwrap();
    let texts: Vec<&str> = cases["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    for name in ["llama-bpe", "qwen2"] {
        let bytes = std::fs::read(dir.join(format!("{name}.gguf"))).unwrap();
        let from_gguf = Tokenizer::from_gguf(&GgufFile::parse(&bytes).unwrap()).unwrap();
        // The same vocabulary as the model's own tokenizer.json (`Split` + `ByteLevel`), against
        // `tokenizers` on that file.
        let json = format!("{name}.tokenizer.json");
        let from_json = Tokenizer::from_tokenizer_json(&std::fs::read(dir.join(&json)).unwrap()).unwrap();
        for (tokenizer, key) in [(&from_gguf, name), (&from_json, json.as_str())] {
            check_cases(tokenizer, &texts, &cases[key], key);
        }
    }
}

/// Every text encodes to its expected ids and those decode back to the text.
fn check_cases(tokenizer: &Tokenizer, texts: &[&str], expected: &serde_json::Value, name: &str) {
    for (text, want) in texts.iter().zip(expected.as_array().unwrap()) {
        let want: Vec<u32> = want.as_array().unwrap().iter().map(|id| id.as_u64().unwrap() as u32).collect();
        assert_eq!(tokenizer.encode(text).unwrap(), want, "{name}: {text:?}");
        assert_eq!(tokenizer.decode(&want).unwrap(), *text, "{name}: decode {text:?}");
    }
}
