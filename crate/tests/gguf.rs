//! The GGUF reader: hand-built files with every value type, broken files that must give typed
//! errors (never a panic, never a huge allocation), and the real SmolLM2 checkpoint when
//! `scripts/fetch-smollm.sh` has put it in `assets/models/`.
#![cfg(not(target_arch = "wasm32"))]

use std::path::PathBuf;

use gptlens::checkpoint::{GgufStream, LoadOptions};
use gptlens::formats::gguf::{Array, GgufFile, Value};
use gptlens::kernels::quant::{dequantize_row, dot_row_quant, GgmlType};
use gptlens::sample::Rng;
use gptlens::{CaptureSpec, Checkpoint, Error, Session};

// ---- a tiny GGUF writer ------------------------------------------------------------------------

const U8: u32 = 0;
const I8: u32 = 1;
const U16: u32 = 2;
const I16: u32 = 3;
const U32: u32 = 4;
const I32: u32 = 5;
const F32: u32 = 6;
const BOOL: u32 = 7;
const STRING: u32 = 8;
const ARRAY: u32 = 9;
const U64: u32 = 10;
const I64: u32 = 11;
const F64: u32 = 12;

fn string(s: &[u8]) -> Vec<u8> {
    let mut out = (s.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(s);
    out
}

/// Array value bytes (after the value type): element type, count, elements.
fn array(element_type: u32, count: u64, elements: &[u8]) -> Vec<u8> {
    let mut out = element_type.to_le_bytes().to_vec();
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(elements);
    out
}

fn strings(items: &[&str]) -> Vec<u8> {
    array(STRING, items.len() as u64, &items.iter().flat_map(|s| string(s.as_bytes())).collect::<Vec<_>>())
}

/// Lays a file out as llama.cpp's writer does: tensors in order, each padded to the alignment.
struct Builder {
    version: u32,
    alignment: usize,
    kv: Vec<(Vec<u8>, u32, Vec<u8>)>,
    tensors: Vec<(String, Vec<u64>, u32, Vec<u8>)>,
}

/// Built bytes and where the fields a test may want to break are.
struct Built {
    bytes: Vec<u8>,
    /// Per tensor: positions of its n_dims, type and offset fields.
    n_dims_at: Vec<usize>,
    type_at: Vec<usize>,
    offset_at: Vec<usize>,
    data_start: usize,
}

impl Builder {
    fn new() -> Builder {
        Builder { version: 3, alignment: 32, kv: Vec::new(), tensors: Vec::new() }
    }

    fn kv(mut self, key: &str, value_type: u32, value: Vec<u8>) -> Builder {
        self.kv.push((key.as_bytes().to_vec(), value_type, value));
        self
    }

    fn alignment(mut self, alignment: u32) -> Builder {
        self.alignment = alignment as usize;
        self.kv("general.alignment", U32, alignment.to_le_bytes().to_vec())
    }

    fn tensor(mut self, name: &str, ne: &[u64], ggml_type: u32, data: Vec<u8>) -> Builder {
        self.tensors.push((name.to_string(), ne.to_vec(), ggml_type, data));
        self
    }

    fn build(&self) -> Built {
        let mut b = b"GGUF".to_vec();
        b.extend_from_slice(&self.version.to_le_bytes());
        b.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        b.extend_from_slice(&(self.kv.len() as u64).to_le_bytes());
        for (key, value_type, value) in &self.kv {
            b.extend(string(key));
            b.extend_from_slice(&value_type.to_le_bytes());
            b.extend_from_slice(value);
        }
        let (mut n_dims_at, mut type_at, mut offset_at) = (vec![], vec![], vec![]);
        let mut offset = 0;
        for (name, ne, ggml_type, data) in &self.tensors {
            b.extend(string(name.as_bytes()));
            n_dims_at.push(b.len());
            b.extend_from_slice(&(ne.len() as u32).to_le_bytes());
            for n in ne {
                b.extend_from_slice(&n.to_le_bytes());
            }
            type_at.push(b.len());
            b.extend_from_slice(&ggml_type.to_le_bytes());
            offset_at.push(b.len());
            b.extend_from_slice(&(offset as u64).to_le_bytes());
            offset = (offset + data.len()).next_multiple_of(self.alignment);
        }
        let data_start = b.len().next_multiple_of(self.alignment);
        for (i, (_, _, _, data)) in self.tensors.iter().enumerate() {
            b.resize(b.len().next_multiple_of(self.alignment), 0);
            assert!(i > 0 || b.len() == data_start);
            b.extend_from_slice(data);
        }
        Built { bytes: b, n_dims_at, type_at, offset_at, data_start }
    }
}

fn put_u32(bytes: &mut [u8], at: usize, v: u32) {
    bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// `n` blocks of a quantized type: arbitrary bytes with a small positive f16 scale in front.
fn blocks(ggml_type: GgmlType, n: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    for _ in 0..n {
        let mut block: Vec<u8> = (0..ggml_type.block_bytes()).map(|_| rng.next_u64() as u8).collect();
        let scale_at = if ggml_type == GgmlType::Q6_K { 208 } else { 0 };
        block[scale_at..scale_at + 2].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
        if matches!(ggml_type, GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K) {
            block[2..4].copy_from_slice(&half::f16::from_f32(-0.02).to_le_bytes());
        }
        out.extend(block);
    }
    out
}

const NORM: [f32; 4] = [1.0, -2.0, 0.5, 3.25];

/// A small file with a value of every type and a tensor of every supported type.
fn sample() -> Builder {
    let nested = array(ARRAY, 2, &[strings(&["x", "yz"]), strings(&[])].concat());
    let f16_data: Vec<u8> = (0..16).flat_map(|i| half::f16::from_f32(i as f32 * 0.25).to_le_bytes()).collect();
    let bf16_data: Vec<u8> = (0..8).flat_map(|i| half::bf16::from_f32(i as f32 - 4.0).to_le_bytes()).collect();
    Builder::new()
        .kv("general.architecture", STRING, string(b"llama"))
        .kv("t.u8", U8, vec![200])
        .kv("t.i8", I8, vec![0xFE])
        .kv("t.u16", U16, 60000u16.to_le_bytes().to_vec())
        .kv("t.i16", I16, (-300i16).to_le_bytes().to_vec())
        .kv("llama.block_count", U32, 30u32.to_le_bytes().to_vec())
        .kv("t.i32", I32, (-7i32).to_le_bytes().to_vec())
        .kv("llama.rope.freq_base", F32, 100000f32.to_le_bytes().to_vec())
        .kv("tokenizer.ggml.add_bos_token", BOOL, vec![0])
        .kv("t.u64", U64, (1u64 << 40).to_le_bytes().to_vec())
        .kv("t.i64", I64, (-1i64 << 40).to_le_bytes().to_vec())
        .kv("t.f64", F64, 0.1f64.to_le_bytes().to_vec())
        .kv("tokenizer.ggml.tokens", ARRAY, strings(&["a", "é", "<|im_start|>"]))
        .kv("tokenizer.ggml.token_type", ARRAY, array(I32, 3, &[1i32, 1, 3].map(i32::to_le_bytes).concat()))
        .kv("t.bools", ARRAY, array(BOOL, 3, &[1, 0, 1]))
        .kv("t.f32s", ARRAY, array(F32, 2, &f32_bytes(&[1.5, -2.5])))
        .kv("t.nested", ARRAY, nested)
        .tensor("norm.weight", &[4], 0, f32_bytes(&NORM))
        .tensor("f16.weight", &[8, 2], 1, f16_data)
        .tensor("bf16.weight", &[8], 30, bf16_data)
        .tensor("q8_0.weight", &[32, 2], 8, blocks(GgmlType::Q8_0, 2, 1))
        .tensor("q4_0.weight", &[64, 1], 2, blocks(GgmlType::Q4_0, 2, 2))
        .tensor("q4_1.weight", &[32, 3], 3, blocks(GgmlType::Q4_1, 3, 3))
        .tensor("q5_0.weight", &[32, 3], 6, blocks(GgmlType::Q5_0, 3, 7))
        .tensor("q5_1.weight", &[64, 1], 7, blocks(GgmlType::Q5_1, 2, 8))
        .tensor("q4_k.weight", &[256, 1, 1], 12, blocks(GgmlType::Q4_K, 1, 4))
        .tensor("q5_k.weight", &[256], 13, blocks(GgmlType::Q5_K, 1, 5))
        .tensor("q6_k.weight", &[256, 2, 1, 1], 14, blocks(GgmlType::Q6_K, 2, 6))
}

fn gguf_error(bytes: &[u8]) -> String {
    match GgufFile::parse(bytes) {
        Ok(_) => panic!("parsing should have failed"),
        Err(Error::Gguf(message)) => message,
        Err(other) => panic!("expected a GGUF error, got {other:?}"),
    }
}

// ---- well-formed files ---------------------------------------------------------------------------

#[test]
fn every_value_type_reads_back() {
    let built = sample().build();
    let file = GgufFile::parse(&built.bytes).unwrap();
    assert_eq!(file.version(), 3);
    assert_eq!((file.alignment(), file.data_start()), (32, built.data_start));
    assert_eq!(file.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(file.metadata("t.u8"), Some(&Value::U8(200)));
    assert_eq!(file.metadata("t.i8"), Some(&Value::I8(-2)));
    assert_eq!(file.metadata("t.u16"), Some(&Value::U16(60000)));
    assert_eq!(file.metadata("t.i16"), Some(&Value::I16(-300)));
    assert_eq!(file.get_u32("llama.block_count").unwrap(), 30);
    assert_eq!(file.metadata("t.i32"), Some(&Value::I32(-7)));
    assert_eq!(file.get_f32("llama.rope.freq_base").unwrap(), 100000.0);
    assert!(!file.get_bool("tokenizer.ggml.add_bos_token").unwrap());
    assert_eq!(file.metadata("t.u64"), Some(&Value::U64(1 << 40)));
    assert_eq!(file.metadata("t.i64"), Some(&Value::I64(-1 << 40)));
    assert_eq!(file.metadata("t.f64"), Some(&Value::F64(0.1)));
    assert_eq!(file.get_str_array("tokenizer.ggml.tokens").unwrap(), ["a", "é", "<|im_start|>"]);
    assert_eq!(file.get_i32_array("tokenizer.ggml.token_type").unwrap(), [1, 1, 3]);
    assert_eq!(file.get_array("t.bools").unwrap(), &Array::Bool(vec![true, false, true]));
    assert_eq!(file.get_array("t.f32s").unwrap(), &Array::F32(vec![1.5, -2.5]));
    assert_eq!(
        file.get_array("t.nested").unwrap(),
        &Array::Array(vec![Array::Str(vec!["x", "yz"]), Array::Str(vec![])])
    );
    let keys: Vec<&str> = file.metadata_entries().iter().map(|(k, _)| *k).collect();
    assert_eq!(keys.first(), Some(&"general.architecture"));
    assert_eq!(keys.len(), 17);
}

#[test]
fn typed_getters_say_what_is_missing_or_mistyped() {
    let built = sample().build();
    let file = GgufFile::parse(&built.bytes).unwrap();
    assert!(matches!(file.get_u32("llama.nope"), Err(Error::MissingMetadata { key }) if key == "llama.nope"));
    let err = file.get_u32("general.architecture").unwrap_err();
    assert_eq!(err.to_string(), "GGUF metadata `general.architecture` is a string, expected a u32");
    let err = file.get_str_array("tokenizer.ggml.token_type").unwrap_err();
    assert!(err.to_string().contains("is an array of 3 i32, expected an array of strings"), "{err}");
    assert!(matches!(file.tensor("output.weight"), Err(Error::MissingTensor { name }) if name == "output.weight"));
}

#[test]
fn tensors_are_located_with_shapes_innermost_first() {
    let builder = sample();
    let built = builder.build();
    let file = GgufFile::parse(&built.bytes).unwrap();
    assert_eq!(file.tensors().len(), builder.tensors.len());
    for (t, (name, ne, type_id, data)) in file.tensors().iter().zip(&builder.tensors) {
        assert_eq!(t.name(), name);
        assert_eq!(t.shape(), ne.iter().map(|&n| n as usize).collect::<Vec<_>>());
        assert_eq!(Some(t.ggml_type()), GgmlType::from_id(*type_id));
        assert_eq!(t.data(), data.as_slice(), "{name}");
        assert_eq!(t.data().as_ptr() as usize % 32, built.bytes.as_ptr() as usize % 32, "{name} is aligned");
    }
    let norm = file.tensor("norm.weight").unwrap();
    assert_eq!((norm.row_len(), norm.n_rows()), (4, 1));
    assert_eq!(norm.to_f32(), NORM);
    let q6 = file.tensor("q6_k.weight").unwrap();
    assert_eq!((q6.row_len(), q6.n_rows()), (256, 2));
    assert_eq!(q6.row(1), Some(&q6.data()[210..420]));
    assert_eq!(q6.row(2), None);
    let f16 = file.tensor("f16.weight").unwrap();
    assert_eq!(f16.to_f32()[9], 2.25);
    let q5 = file.tensor("q5_0.weight").unwrap();
    assert_eq!((q5.row_len(), q5.n_rows(), q5.row(2).map(<[u8]>::len)), (32, 3, Some(22)));
}

#[test]
fn version_2_and_other_alignments_are_read() {
    let mut builder = sample().alignment(64);
    builder.version = 2;
    let built = builder.build();
    let file = GgufFile::parse(&built.bytes).unwrap();
    assert_eq!((file.version(), file.alignment()), (2, 64));
    assert_eq!(file.data_start() % 64, 0);
    assert_eq!(file.tensor("q4_1.weight").unwrap().data(), builder.tensors[5].3.as_slice());
}

#[test]
fn a_file_without_tensors_or_metadata_is_valid() {
    let bytes = Builder::new().build().bytes;
    let file = GgufFile::parse(&bytes).unwrap();
    assert!(file.tensors().is_empty() && file.metadata_entries().is_empty());
}

// ---- malformed files -----------------------------------------------------------------------------

#[test]
fn every_truncation_is_an_error() {
    let bytes = sample().build().bytes;
    for cut in 0..bytes.len() {
        let message = gguf_error(&bytes[..cut]);
        assert!(message.contains("byte"), "cut at {cut}: {message}");
    }
}

#[test]
fn wrong_magic_and_versions_are_named() {
    let bytes = sample().build().bytes;
    let mut b = bytes.clone();
    b[..4].copy_from_slice(b"GGML");
    assert!(gguf_error(&b).contains("starts with \"GGML\""));
    for (version, expected) in [(1, "version 1"), (4, "unknown GGUF version 4"), (3 << 24, "big-endian")] {
        let mut b = bytes.clone();
        put_u32(&mut b, 4, version);
        let message = gguf_error(&b);
        assert!(message.contains(expected), "{message}");
    }
}

#[test]
fn lying_counts_fail_before_allocating() {
    let bytes = sample().build().bytes;
    for (at, what) in [(8, "tensor infos"), (16, "metadata entries")] {
        // Under gptlens's caps (65536 of each), the count is held against the bytes left…
        for count in [60_000, 65_536] {
            let mut b = bytes.clone();
            put_u64(&mut b, at, count);
            let message = gguf_error(&b);
            assert!(message.contains(&format!("{count} {what}")), "{message}");
        }
        // …over them, against the cap itself, before anything else.
        for count in [1 << 60, u64::MAX, 1_000_000, 65_537] {
            let mut b = bytes.clone();
            put_u64(&mut b, at, count);
            match GgufFile::parse(&b) {
                Err(Error::LimitExceeded { value, limit: 65_536, .. }) => assert_eq!(value, count),
                other => panic!("{count} {what}: {other:?}"),
            }
        }
    }
}

#[test]
fn an_array_of_2_pow_60_strings_fails_fast() {
    let b = Builder::new().kv("tokenizer.ggml.tokens", ARRAY, array(STRING, 1 << 60, &string(b"a"))).build().bytes;
    let message = gguf_error(&b);
    assert!(message.contains("metadata `tokenizer.ggml.tokens`"), "{message}");
    assert!(message.contains("1152921504606846976 array elements"), "{message}");
    // The same for numbers: 2^61 u64 would be 2^64 bytes, which overflows.
    let b = Builder::new().kv("x", ARRAY, array(U64, 1 << 61, &[0; 8])).build().bytes;
    assert!(gguf_error(&b).contains("cannot fit"));
}

#[test]
fn lying_string_lengths_are_caught() {
    let bytes = sample().build().bytes;
    for len in [1 << 60, u64::MAX, bytes.len() as u64] {
        let mut b = bytes.clone();
        put_u64(&mut b, 24, len); // the first key's length
        let message = gguf_error(&b);
        assert!(message.contains("metadata entry #0") && message.contains("at byte 24"), "{message}");
    }
    // A string value inside an array.
    let mut items = string(b"ok");
    items.extend_from_slice(&(1u64 << 62).to_le_bytes());
    let b = Builder::new().kv("tokens", ARRAY, array(STRING, 2, &items)).build().bytes;
    assert!(gguf_error(&b).contains("string #1 of the array is 4611686018427387904 bytes long"));
}

#[test]
fn bad_values_are_named_by_key() {
    let cases: [(Builder, &str); 7] = [
        (Builder::new().kv("k", 13, vec![0; 8]), "unknown value type 13"),
        (Builder::new().kv("k", ARRAY, array(99, 0, &[])), "unknown value type 99"),
        (Builder::new().kv("k", BOOL, vec![2]), "a bool is 2"),
        (Builder::new().kv("k", ARRAY, array(BOOL, 2, &[1, 7])), "a bool is 7"),
        (Builder::new().kv("k", STRING, string(b"\xff\xfe")), "not valid UTF-8"),
        (Builder::new().kv("k", U8, vec![1]).kv("k", U8, vec![2]), "appears twice"),
        (Builder::new().kv("k", ARRAY, (0..5).fold(array(U8, 0, &[]), |inner, _| array(ARRAY, 1, &inner))), "nested"),
    ];
    for (builder, expected) in cases {
        let message = gguf_error(&builder.build().bytes);
        assert!(message.contains("metadata `k`") && message.contains(expected), "{message}");
    }
    let bad_key = Builder::new().kv("bad\u{1}", U8, vec![1]).build();
    let mut b = bad_key.bytes;
    b[24 + 8] = 0xC0; // an overlong UTF-8 lead byte in the key itself
    assert!(gguf_error(&b).contains("metadata entry #0: the key is not valid UTF-8"));
}

#[test]
fn alignment_must_be_a_u32_power_of_two() {
    for (value_type, value, expected) in [
        (U32, 24u32.to_le_bytes().to_vec(), "24 is not a power of two"),
        (U32, 0u32.to_le_bytes().to_vec(), "0 is not a power of two"),
        (U64, 32u64.to_le_bytes().to_vec(), "is a u64, expected a u32"),
    ] {
        let b = sample().kv("general.alignment", value_type, value).build().bytes;
        let message = gguf_error(&b);
        assert!(message.contains("general.alignment") && message.contains(expected), "{message}");
    }
}

#[test]
fn bad_tensor_infos_are_named_by_tensor() {
    let built = sample().build();
    let q4_0 = 4; // index of `q4_0.weight`, shape [64, 1]
    let dims = built.n_dims_at[q4_0];
    let cases: [(usize, Vec<u8>, &str); 7] = [
        (dims, 0u32.to_le_bytes().to_vec(), "0 dimensions"),
        (dims, 5u32.to_le_bytes().to_vec(), "5 dimensions"),
        (dims + 4, 33u64.to_le_bytes().to_vec(), "rows of 33 weights are not a whole number of Q4_0 blocks of 32"),
        (dims + 12, (1u64 << 62).to_le_bytes().to_vec(), "[64, 4611686018427387904] has more elements than fit"),
        (built.offset_at[q4_0], 16u64.to_le_bytes().to_vec(), "not a multiple of the alignment 32"),
        (built.offset_at[q4_0], (1u64 << 40).to_le_bytes().to_vec(), "run past the end of the file"),
        (built.offset_at[q4_0], u64::MAX.to_le_bytes().to_vec(), "not a multiple"),
    ];
    for (at, patch, expected) in cases {
        let mut b = built.bytes.clone();
        b[at..at + patch.len()].copy_from_slice(&patch);
        let message = gguf_error(&b);
        assert!(message.contains("tensor `q4_0.weight`") && message.contains(expected), "{message}");
    }
    // 2^62 f32 weights fit in a usize; their 2^64 bytes do not.
    let mut b = built.bytes.clone();
    put_u64(&mut b, built.n_dims_at[0] + 4, 1 << 62);
    assert!(gguf_error(&b).contains("tensor `norm.weight`: shape [4611686018427387904] has more bytes than fit"));
}

#[test]
fn overlapping_and_duplicate_tensors_are_refused() {
    let built = sample().build();
    let mut b = built.bytes.clone();
    // Point `f16.weight` at `norm.weight`'s bytes.
    put_u64(&mut b, built.offset_at[1], 0);
    assert!(gguf_error(&b).contains("tensors `norm.weight` and `f16.weight` share bytes"));

    let b = sample().tensor("norm.weight", &[4], 0, f32_bytes(&NORM)).build().bytes;
    assert!(gguf_error(&b).contains("tensor `norm.weight`: a tensor of this name appears twice"));
}

/// Every tensor of a type gptlens cannot read is named at once, grouped by type, before anything
/// is located or allocated — and an architecture gptlens does not run is named with them.
#[test]
fn unsupported_tensor_types_are_all_named_at_once() {
    let built = sample().build();
    let mut b = built.bytes.clone();
    put_u32(&mut b, built.type_at[4], 10);
    put_u32(&mut b, built.type_at[5], 99);
    put_u32(&mut b, built.type_at[6], 10);
    match GgufFile::parse(&b) {
        Err(Error::Unsupported { architecture: None, tensors }) => {
            let names: Vec<(&str, &str)> = tensors.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
            assert_eq!(
                names,
                [
                    ("q4_0.weight", "Q2_K (ggml type 10)"),
                    ("q4_1.weight", "unknown ggml type 99"),
                    ("q5_0.weight", "Q2_K (ggml type 10)")
                ]
            );
        }
        other => panic!("expected the unsupported tensors, got {other:?}"),
    }
    let message = GgufFile::parse(&b).unwrap_err().to_string();
    assert!(message.contains("3 tensors are stored in types gptlens cannot read: Q2_K (ggml type 10) ×2"), "{message}");

    let bert = Builder::new()
        .kv("general.architecture", STRING, string(b"bert"))
        .tensor("embeddings.weight", &[32, 2], 10, vec![0; 64])
        .build()
        .bytes;
    let message = GgufFile::parse(&bert).unwrap_err().to_string();
    assert!(
        message.contains("architecture `bert` is not supported") && message.contains("`embeddings.weight`"),
        "{message}"
    );
}

/// Random damage anywhere must give `Ok` or `Err`, never a panic; what parses must also decode.
#[test]
fn random_byte_flips_never_panic() {
    let bytes = sample().build().bytes;
    let mut rng = Rng::new(0x6775_6766);
    let (mut ok, mut err) = (0, 0);
    for _ in 0..2000 {
        let mut b = bytes.clone();
        for _ in 0..1 + rng.next_u64() % 4 {
            let at = (rng.next_u64() % b.len() as u64) as usize;
            b[at] = rng.next_u64() as u8;
        }
        match GgufFile::parse(&b) {
            Ok(file) => {
                ok += 1;
                for t in file.tensors() {
                    let values = t.to_f32();
                    assert_eq!(values.len(), t.row_len() * t.n_rows());
                }
            }
            Err(_) => err += 1,
        }
    }
    eprintln!("random flips: {ok} files still parse, {err} errors");
    // Most flips land in tensor data or values and leave a valid file; some must break it.
    assert!(ok > 0 && err > 0, "ok {ok}, err {err}");
}

// ---- the real checkpoint ---------------------------------------------------------------------------

fn smollm_path() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../assets/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
}

/// Facts from `shared/notes/references.md`; skipped when the file has not been fetched.
#[test]
fn smollm2_q4_1_has_the_documented_layout() {
    let path = smollm_path();
    let Ok(bytes) = std::fs::read(&path) else {
        eprintln!("skipping: {} is absent (run scripts/fetch-smollm.sh)", path.display());
        return;
    };
    let file = GgufFile::parse(&bytes).unwrap();
    assert_eq!(file.version(), 3);
    assert_eq!(file.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(file.get_u32("llama.block_count").unwrap(), 30);
    assert_eq!(file.get_u32("llama.embedding_length").unwrap(), 576);
    assert_eq!(file.get_u32("llama.feed_forward_length").unwrap(), 1536);
    assert_eq!(file.get_u32("llama.attention.head_count").unwrap(), 9);
    assert_eq!(file.get_u32("llama.attention.head_count_kv").unwrap(), 3);
    assert_eq!(file.get_u32("llama.context_length").unwrap(), 8192);
    assert_eq!(file.get_u32("llama.vocab_size").unwrap(), 49152);
    assert_eq!(file.get_f32("llama.rope.freq_base").unwrap(), 100000.0);
    assert_eq!(file.get_f32("llama.attention.layer_norm_rms_epsilon").unwrap(), 1e-5);

    assert_eq!(file.get_str("tokenizer.ggml.model").unwrap(), "gpt2");
    assert_eq!(file.get_str("tokenizer.ggml.pre").unwrap(), "smollm");
    let tokens = file.get_str_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.len(), 49152);
    assert_eq!((tokens[0], tokens[1], tokens[2]), ("<|endoftext|>", "<|im_start|>", "<|im_end|>"));
    assert_eq!(file.get_str_array("tokenizer.ggml.merges").unwrap().len(), 48900);
    assert_eq!(file.get_i32_array("tokenizer.ggml.token_type").unwrap().len(), 49152);
    assert_eq!(file.get_u32("tokenizer.ggml.bos_token_id").unwrap(), 1);
    assert_eq!(file.get_u32("tokenizer.ggml.eos_token_id").unwrap(), 2);
    assert_eq!(file.get_u32("tokenizer.ggml.unknown_token_id").unwrap(), 0);
    assert!(!file.get_bool("tokenizer.ggml.add_bos_token").unwrap());
    assert!(file.get_str("tokenizer.chat_template").unwrap().contains("<|im_start|>"));

    let embed = file.tensor("token_embd.weight").unwrap();
    assert_eq!((embed.ggml_type(), embed.shape()), (GgmlType::Q8_0, &[576, 49152][..]));
    assert!(matches!(file.tensor("output.weight"), Err(Error::MissingTensor { .. })), "the head is tied");
    assert_eq!(file.tensors().len(), 1 + 30 * 9 + 1);
    for t in file.tensors() {
        let expected = match t.name() {
            "token_embd.weight" => GgmlType::Q8_0,
            name if name.ends_with("norm.weight") => GgmlType::F32,
            name if name.starts_with("blk.") => GgmlType::Q4_1,
            name => panic!("unexpected tensor {name}"),
        };
        assert_eq!(t.ggml_type(), expected, "{}", t.name());
    }
    let q = file.tensor("blk.0.attn_q.weight").unwrap();
    assert_eq!(q.shape(), [576, 576]);
    assert_eq!(file.tensor("blk.29.attn_k.weight").unwrap().shape(), [576, 192]);
    assert_eq!(file.tensor("blk.0.ffn_down.weight").unwrap().shape(), [1536, 576]);
    assert_eq!(file.tensor("output_norm.weight").unwrap().shape(), [576]);

    // A few rows of each type decode to finite, plausibly scaled weights, and the fused dot
    // product agrees with decode-then-dot.
    let x: Vec<f32> = (0..1536).map(|i| (i as f32 * 0.37).sin()).collect();
    for name in ["token_embd.weight", "blk.0.attn_q.weight", "blk.29.ffn_down.weight", "blk.0.attn_norm.weight"] {
        let t = file.tensor(name).unwrap();
        for i in [0, t.n_rows() / 2, t.n_rows() - 1] {
            let mut w = vec![0.0; t.row_len()];
            let row = t.row(i).unwrap();
            dequantize_row(t.ggml_type(), row, &mut w);
            assert!(w.iter().all(|v| v.is_finite() && v.abs() < 100.0), "{name} row {i}");
            assert!(w.iter().any(|&v| v != 0.0), "{name} row {i} is all zeros");
            let x = &x[..t.row_len()];
            assert_eq!(dot_row_quant(t.ggml_type(), row, x), gptlens::kernels::dot(&w, x), "{name} row {i}");
        }
    }
}

#[test]
fn a_header_past_256_mib_is_refused_by_its_size() {
    // 257 MiB of zeros (calloc'd: untouched pages cost nothing) holding one string that claims
    // to run almost to the end: a header that large is refused as such, not read.
    let len = gptlens::formats::limits::MAX_GGUF_HEADER_BYTES + (1 << 20);
    let mut b = vec![0u8; len];
    let head = Builder::new().kv("k", STRING, string(b"")).build().bytes;
    b[..head.len()].copy_from_slice(&head);
    let string_len_at = head.len() - 8;
    put_u64(&mut b, string_len_at, (len - head.len() - 16) as u64);
    match GgufFile::parse(&b) {
        Err(Error::LimitExceeded { limit, field, .. }) => {
            assert_eq!(limit, gptlens::formats::limits::MAX_GGUF_HEADER_BYTES as u64);
            assert!(field.contains("GGUF header") && field.contains("metadata `k`"), "{field}");
        }
        other => panic!("{other:?}"),
    }
}

/// A GGUF's `general.name` names the model (the page shows it for a file someone opened).
#[test]
fn the_model_name_comes_from_general_name() {
    let fixtures = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures"));
    let ckpt = Checkpoint::open(&fixtures.join("llama-tiny-q/model.gguf")).unwrap();
    assert_eq!(ckpt.name.as_deref(), Some("gptlens llama-tiny-q"));
    let hf = Checkpoint::open(&fixtures.join("gpt2-tiny-f32")).unwrap();
    assert_eq!(hf.name, None, "its config.json has no _name_or_path");
}

// ---- loading in pieces -------------------------------------------------------------------------------

fn fixture_bytes(model: &str) -> Vec<u8> {
    std::fs::read(
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures")).join(model).join("model.gguf"),
    )
    .unwrap()
}

/// `bytes` pushed through a [`GgufStream`] in pieces of the given sizes (cycled).
fn streamed(bytes: &[u8], sizes: &[usize]) -> gptlens::Result<Checkpoint> {
    let mut stream = GgufStream::new(bytes.len() as u64, &LoadOptions::default())?;
    let (mut at, mut i) = (0, 0);
    while at < bytes.len() {
        let end = (at + sizes[i % sizes.len()]).min(bytes.len());
        stream.push(&bytes[at..end])?;
        (at, i) = (end, i + 1);
    }
    stream.finish()
}

fn last_logits(checkpoint: &Checkpoint) -> Vec<f32> {
    let mut session = Session::new(checkpoint.model.clone());
    session.run(&[1, 5, 9, 2, 7, 3], &CaptureSpec::none()).unwrap().last_logits
}

#[test]
fn a_gguf_loaded_in_pieces_of_any_size_is_the_same_model() {
    let mut rng = Rng::new(0x5752_4541);
    let random: Vec<usize> = (0..64).map(|_| 1 + (rng.next_u64() % 9000) as usize).collect();
    for model in ["gpt2-tiny-gguf", "llama-tiny-q", "llama-tiny-q5", "qwen2-tiny-gguf", "gemma3-tiny-gguf"] {
        let bytes = fixture_bytes(model);
        let whole = Checkpoint::from_gguf(&bytes).unwrap();
        for sizes in [&[1][..], &[7], &[4096], &random, &[bytes.len()]] {
            let what = format!("{model} in pieces of {:?}…", &sizes[..sizes.len().min(3)]);
            let pieces = streamed(&bytes, sizes).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(pieces.model.config, whole.model.config, "{what}");
            assert_eq!(pieces.model.weights.memory_bytes(), whole.model.weights.memory_bytes(), "{what}");
            assert_eq!(pieces.name, whole.name, "{what}");
            // Bit for bit: every value reached its place.
            assert_eq!(last_logits(&pieces), last_logits(&whole), "{what}");
            if let Ok(tokenizer) = whole.tokenizer() {
                let text = "Hello, world! 123";
                assert_eq!(
                    pieces.tokenizer().unwrap().encode(text).unwrap(),
                    tokenizer.encode(text).unwrap(),
                    "{what}"
                );
            }
        }
    }
}

#[test]
fn a_stream_that_is_not_gguf_ends_early_or_runs_over_says_so() {
    let bytes = fixture_bytes("llama-tiny-q");
    let message = |e: Error| e.to_string();
    // Not GGUF: refused at the eighth byte, not after the whole file.
    let mut stream = GgufStream::new(1 << 30, &LoadOptions::default()).unwrap();
    let e = message(stream.push(b"PK\x03\x04\0\0\0\0").unwrap_err());
    assert!(e.contains("not \"GGUF\""), "{e}");
    let e = message(stream.push(b"more").unwrap_err());
    assert!(e.contains("already failed"), "{e}");
    // Ends early: in the header, and in the tensors.
    for cut in [100, bytes.len() / 2, bytes.len() - 1] {
        let mut stream = GgufStream::new(bytes.len() as u64, &LoadOptions::default()).unwrap();
        stream.push(&bytes[..cut]).unwrap();
        let e = message(stream.finish().err().unwrap());
        assert!(e.contains(&format!("ended after {cut} of its {} bytes", bytes.len())), "{e}");
    }
    // More bytes than announced.
    let mut stream = GgufStream::new(bytes.len() as u64 - 10, &LoadOptions::default()).unwrap();
    let e = message(stream.push(&bytes).unwrap_err());
    assert!(e.contains("more bytes arrived than the"), "{e}");
    // A length that puts a tensor past the end is the whole-file reader's error, once the header is there.
    let mut stream = GgufStream::new(bytes.len() as u64 - 10, &LoadOptions::default()).unwrap();
    let e = message(stream.push(&bytes[..bytes.len() - 10]).unwrap_err());
    assert!(e.contains("run past the end of the file"), "{e}");
    // Over budget: refused once the header says how big the model is, before its tensors arrive.
    let tight = LoadOptions { memory_budget: Some(64 * 1024) };
    let mut stream = GgufStream::new(bytes.len() as u64, &tight).unwrap();
    let e = stream.push(&bytes[..16 * 1024]).unwrap_err();
    assert!(matches!(e, Error::OverBudget { .. }), "{e}");
}

#[test]
fn a_stream_names_unsupported_tensors_like_a_whole_file() {
    let bytes = Builder::new()
        .kv("general.architecture", STRING, string(b"bert"))
        .tensor("embeddings.weight", &[32, 2], 10, vec![0; 64])
        .build()
        .bytes;
    let whole = Checkpoint::from_gguf(&bytes).err().unwrap().to_string();
    let pieces = streamed(&bytes, &[5]).err().unwrap().to_string();
    assert!(whole.contains("`embeddings.weight`"), "{whole}");
    assert_eq!(pieces, whole);
}
