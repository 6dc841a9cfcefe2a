//! GGUF, llama.cpp's checkpoint format (versions 2 and 3), read in place from a byte slice.
//!
//! ```text
//! "GGUF" | u32 version | u64 n_tensors | u64 n_kv                      all little-endian
//! n_kv ×      { string key | u32 value type | value }
//! n_tensors × { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset }
//! zero padding up to a multiple of `general.alignment` (default 32): the data section starts
//! tensor data, each tensor at data start + offset
//!
//! string = u64 byte length | UTF-8 bytes          array = u32 element type | u64 count | elements
//! ```
//! `ne` is innermost first: a matrix of `n_out` rows of `n_in` weights has `ne = [n_in, n_out]`,
//! and each row is a run of whole blocks of its [`GgmlType`].
//!
//! The reader is strict, because the bytes may come from anywhere (a browser file picker): every
//! length, count, offset and extent is checked with overflow-free arithmetic before use; a count
//! is compared with the bytes that remain before anything is allocated for it, so a header that
//! claims 2^60 strings fails at once; strings must be UTF-8; tensors must be aligned, inside the
//! file and must not overlap. Anything else is an [`Error::Gguf`] that names the key or tensor and
//! the byte offset. Values are borrowed from the input: parsing copies no string or tensor data.
//!
//! ```no_run
//! # fn main() -> gptlens::Result<()> {
//! use gptlens::formats::gguf::GgufFile;
//! use gptlens::kernels::quant::dequantize_row;
//!
//! let bytes = std::fs::read("model.gguf").unwrap();
//! let file = GgufFile::parse(&bytes)?;
//! let n_layer = file.get_u32("llama.block_count")?;
//! let tokens = file.get_str_array("tokenizer.ggml.tokens")?;
//! let embed = file.tensor("token_embd.weight")?; // shape [d_model, vocab]
//! let mut row = vec![0.0; embed.row_len()];
//! dequantize_row(embed.ggml_type(), embed.row(42).unwrap(), &mut row); // token 42's embedding
//! # Ok(()) }
//! ```

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;

use crate::error::{Error, Result};
use crate::formats::limits::{MAX_GGUF_HEADER_BYTES, MAX_GGUF_METADATA, MAX_TENSORS};
use crate::kernels::quant::{dequantize_row, GgmlType};

/// Used when the file has no `general.alignment`.
pub const DEFAULT_ALIGNMENT: usize = 32;
/// ggml tensors have at most four dimensions.
const MAX_DIMS: u32 = 4;
/// Arrays of arrays are legal GGUF but rare; the cap keeps a crafted file from recursing deep
/// enough to overflow the stack (each level costs only 12 bytes of file).
const MAX_ARRAY_DEPTH: usize = 4;
/// Smallest possible metadata entry: empty key (8), value type (4), one-byte value.
const MIN_KV_BYTES: usize = 8 + 4 + 1;
/// Smallest possible tensor info: empty name (8), n_dims (4), one dimension (8), type (4),
/// offset (8).
const MIN_TENSOR_INFO_BYTES: usize = 8 + 4 + 8 + 4 + 8;

/// A parsed GGUF file: metadata and tensors, all borrowing from the input bytes.
#[derive(Clone, Debug)]
pub struct GgufFile<'a> {
    version: u32,
    metadata: Vec<(&'a str, Value<'a>)>,
    metadata_index: HashMap<&'a str, usize>,
    tensors: Vec<GgufTensor<'a>>,
    tensor_index: HashMap<&'a str, usize>,
    alignment: usize,
    data_start: usize,
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    Str(&'a str),
    Array(Array<'a>),
}

/// A metadata array: all elements share one type; arrays of arrays may mix element types.
#[derive(Clone, Debug, PartialEq)]
pub enum Array<'a> {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    Str(Vec<&'a str>),
    Array(Vec<Array<'a>>),
}

/// A tensor: its name, shape, type and stored bytes, checked to be exactly
/// `n_rows · row_bytes(row_len)` bytes inside the file.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufTensor<'a> {
    name: &'a str,
    shape: Vec<usize>,
    ggml_type: GgmlType,
    row_len: usize,
    n_rows: usize,
    /// Where its bytes are in the file.
    file_range: Range<usize>,
    /// Its bytes; empty when only the header was parsed ([`GgufFile::parse_header`]).
    data: &'a [u8],
}

impl<'a> GgufFile<'a> {
    /// Parses and validates the whole header (metadata and tensor table) of a GGUF file held in
    /// memory. Tensor data is not read, only bounds-checked.
    pub fn parse(bytes: &'a [u8]) -> Result<GgufFile<'a>> {
        // The header is read through a window of at most MAX_GGUF_HEADER_BYTES: its counts and
        // lengths are checked against that, not against a file of many gigabytes.
        let header = &bytes[..bytes.len().min(MAX_GGUF_HEADER_BYTES)];
        let window = if header.len() < bytes.len() { Window::CutAtCap } else { Window::Whole };
        let mut c = Cursor { bytes: header, pos: 0, place: Place::Header, window, ran_out: Cell::new(false) };
        c.file(Extent::Bytes(bytes))
    }

    /// Parses the header of a `file_len`-byte GGUF file from its first bytes, for a file that
    /// arrives in pieces ([`crate::checkpoint::GgufStream`]): `Ok(None)` while `prefix` ends inside
    /// the header, else the metadata and every tensor's place in the file, checked as
    /// [`GgufFile::parse`] checks them; the tensors' [`GgufTensor::data`] is empty.
    pub fn parse_header(prefix: &'a [u8], file_len: usize) -> Result<Option<GgufFile<'a>>> {
        let header = &prefix[..prefix.len().min(file_len).min(MAX_GGUF_HEADER_BYTES)];
        let window = match header.len() {
            n if n == MAX_GGUF_HEADER_BYTES && n < file_len => Window::CutAtCap,
            n if n < file_len => Window::Prefix,
            _ => Window::Whole,
        };
        let mut c = Cursor { bytes: header, pos: 0, place: Place::Header, window, ran_out: Cell::new(false) };
        match c.file(Extent::Length(file_len)) {
            Err(_) if c.ran_out.get() => Ok(None),
            parsed => parsed.map(Some),
        }
    }
}

/// What tensors are located in: the file's bytes, or only its length (a header parsed alone).
#[derive(Clone, Copy)]
enum Extent<'a> {
    Bytes(&'a [u8]),
    Length(usize),
}

impl<'a> Cursor<'a> {
    /// The whole header from the start of `bytes`, and the tensors located in `file`.
    fn file(&mut self, file: Extent<'a>) -> Result<GgufFile<'a>> {
        let c = self;
        let version = c.magic_and_version()?;
        let n_tensors_at = c.pos;
        let n_tensors = c.u64("the tensor count")?;
        let n_kv_at = c.pos;
        let n_kv = c.u64("the metadata count")?;
        c.cap(n_tensors_at, n_tensors, MAX_TENSORS, "tensors")?;
        c.cap(n_kv_at, n_kv, MAX_GGUF_METADATA, "metadata entries")?;
        let n_kv = c.count(n_kv_at, n_kv, MIN_KV_BYTES, "metadata entries")?;

        // Counts are claims until the entries are read: collections grow with what is actually
        // there rather than being sized from the header.
        let mut metadata = Vec::new();
        let mut metadata_index = HashMap::new();
        for i in 0..n_kv {
            c.place = Place::Entry(i);
            let key_at = c.pos;
            let key = c.string("the key")?;
            c.place = Place::Key(key);
            if metadata_index.insert(key, metadata.len()).is_some() {
                return Err(c.error(key_at, "the key appears twice"));
            }
            let value_type = c.value_type()?;
            let value = c.value(value_type)?;
            metadata.push((key, value));
        }

        c.place = Place::Header;
        let n_tensors = c.count(n_tensors_at, n_tensors, MIN_TENSOR_INFO_BYTES, "tensor infos")?;
        let alignment = alignment(&metadata, &metadata_index)?;
        let mut infos = Vec::new();
        let mut tensor_index = HashMap::new();
        // Tensors of types gptlens cannot read are all named at once, with the architecture
        // when it is not one gptlens runs either, rather than one at a time.
        let mut unsupported = Vec::new();
        for i in 0..n_tensors {
            c.place = Place::TensorInfo(i);
            let name_at = c.pos;
            let name = c.string("the tensor name")?;
            c.place = Place::Tensor(name);
            if tensor_index.insert(name, infos.len()).is_some() {
                return Err(c.error(name_at, "a tensor of this name appears twice"));
            }
            match c.tensor_info(name)? {
                Ok(info) => infos.push(info),
                Err(type_id) => unsupported.push((name.to_string(), type_name(type_id))),
            }
        }
        if !unsupported.is_empty() {
            let architecture = metadata_index
                .get("general.architecture")
                .and_then(|&i| metadata.get(i))
                .and_then(|(_, value): &(&str, Value)| value.as_str())
                .filter(|name| !crate::formats::gguf_config::runs(name))
                .map(str::to_string);
            return Err(Error::Unsupported { architecture, tensors: unsupported });
        }

        c.place = Place::Header;
        let data_start = c.pos.checked_next_multiple_of(alignment).ok_or_else(|| {
            c.error(c.pos, format_args!("the data section start overflows when aligned to {alignment}"))
        })?;
        let tensors =
            infos.into_iter().map(|info| info.locate(file, data_start, alignment)).collect::<Result<Vec<_>>>()?;
        check_no_overlap(&tensors)?;
        Ok(GgufFile { version, metadata, metadata_index, tensors, tensor_index, alignment, data_start })
    }
}

impl<'a> GgufFile<'a> {
    /// 2 or 3 (they differ only in what big-endian writers may do; both are read the same way).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Alignment of the data section and of every tensor in it, in bytes.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// Byte offset of the data section in the file.
    pub fn data_start(&self) -> usize {
        self.data_start
    }

    /// Every metadata entry, in file order.
    pub fn metadata_entries(&self) -> &[(&'a str, Value<'a>)] {
        &self.metadata
    }

    pub fn metadata(&self, key: &str) -> Option<&Value<'a>> {
        self.metadata_index.get(key).and_then(|&i| self.metadata.get(i)).map(|(_, v)| v)
    }

    /// The value of `key`, which must be present and have the expected type. Optional keys: match
    /// on [`GgufFile::metadata`] instead.
    pub fn get_u32(&self, key: &str) -> Result<u32> {
        self.typed(key, "a u32", Value::as_u32)
    }

    pub fn get_f32(&self, key: &str) -> Result<f32> {
        self.typed(key, "an f32", Value::as_f32)
    }

    pub fn get_bool(&self, key: &str) -> Result<bool> {
        self.typed(key, "a bool", Value::as_bool)
    }

    pub fn get_str(&self, key: &str) -> Result<&'a str> {
        self.typed(key, "a string", Value::as_str)
    }

    pub fn get_array(&self, key: &str) -> Result<&Array<'a>> {
        self.typed(key, "an array", Value::as_array)
    }

    pub fn get_str_array(&self, key: &str) -> Result<&[&'a str]> {
        self.typed(key, "an array of strings", |v| match v.as_array()? {
            Array::Str(s) => Some(s.as_slice()),
            _ => None,
        })
    }

    pub fn get_i32_array(&self, key: &str) -> Result<&[i32]> {
        self.typed(key, "an array of i32", |v| match v.as_array()? {
            Array::I32(s) => Some(s.as_slice()),
            _ => None,
        })
    }

    fn typed<'s, T>(
        &'s self,
        key: &str,
        expected: &'static str,
        cast: impl FnOnce(&'s Value<'a>) -> Option<T>,
    ) -> Result<T> {
        let value = self.metadata(key).ok_or_else(|| Error::MissingMetadata { key: key.to_string() })?;
        cast(value).ok_or_else(|| Error::MetadataType { key: key.to_string(), expected, got: value.describe() })
    }

    /// Every tensor, in file order.
    pub fn tensors(&self) -> &[GgufTensor<'a>] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Result<&GgufTensor<'a>> {
        self.tensor_index
            .get(name)
            .and_then(|&i| self.tensors.get(i))
            .ok_or_else(|| Error::MissingTensor { name: name.to_string() })
    }
}

impl<'a> GgufTensor<'a> {
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// ggml's `ne`: innermost (row) dimension first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn ggml_type(&self) -> GgmlType {
        self.ggml_type
    }

    /// The stored bytes: `n_rows` rows of whole blocks (none when only the header was parsed).
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// Where the stored bytes are in the file.
    pub fn file_range(&self) -> Range<usize> {
        self.file_range.clone()
    }

    /// Weights per row, `shape[0]`.
    pub fn row_len(&self) -> usize {
        self.row_len
    }

    /// Product of the outer dimensions (1 for a vector).
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// The stored bytes of row `i`, for [`crate::kernels::quant`]'s kernels.
    pub fn row(&self, i: usize) -> Option<&'a [u8]> {
        if i >= self.n_rows {
            return None;
        }
        let row_bytes = self.ggml_type.row_bytes(self.row_len)?;
        let start = i.checked_mul(row_bytes)?;
        self.data.get(start..start.checked_add(row_bytes)?)
    }

    /// The whole tensor decoded to f32, rows back to back. Meant for small tensors (norms); a
    /// quantized matrix is better used in place through its rows.
    pub fn to_f32(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.row_len * self.n_rows];
        dequantize_row(self.ggml_type, self.data, &mut out);
        out
    }
}

impl<'a> Value<'a> {
    pub fn as_u32(&self) -> Option<u32> {
        match self {
            Value::U32(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_f32(&self) -> Option<f32> {
        match self {
            Value::F32(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(v) => Some(*v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&'a str> {
        match self {
            Value::Str(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Array<'a>> {
        match self {
            Value::Array(v) => Some(v),
            _ => None,
        }
    }

    /// The value's type for messages: `a u32`, `a string`, `an array of 49152 strings`.
    pub fn describe(&self) -> String {
        match self {
            Value::U8(_) => "a u8".into(),
            Value::I8(_) => "an i8".into(),
            Value::U16(_) => "a u16".into(),
            Value::I16(_) => "an i16".into(),
            Value::U32(_) => "a u32".into(),
            Value::I32(_) => "an i32".into(),
            Value::U64(_) => "a u64".into(),
            Value::I64(_) => "an i64".into(),
            Value::F32(_) => "an f32".into(),
            Value::F64(_) => "an f64".into(),
            Value::Bool(_) => "a bool".into(),
            Value::Str(_) => "a string".into(),
            Value::Array(a) => format!("an array of {} {}", a.len(), a.element_type_name()),
        }
    }
}

impl Array<'_> {
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::F64(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::Str(v) => v.len(),
            Array::Array(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `u8`, …, `strings`, `arrays`.
    pub fn element_type_name(&self) -> &'static str {
        match self {
            Array::U8(_) => "u8",
            Array::I8(_) => "i8",
            Array::U16(_) => "u16",
            Array::I16(_) => "i16",
            Array::U32(_) => "u32",
            Array::I32(_) => "i32",
            Array::U64(_) => "u64",
            Array::I64(_) => "i64",
            Array::F32(_) => "f32",
            Array::F64(_) => "f64",
            Array::Bool(_) => "bools",
            Array::Str(_) => "strings",
            Array::Array(_) => "arrays",
        }
    }
}

/// GGUF's value type ids (`gguf_type` in gguf.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    Str,
    Array,
    U64,
    I64,
    F64,
}

impl ValueType {
    fn from_id(id: u32) -> Option<ValueType> {
        const BY_ID: [ValueType; 13] = [
            ValueType::U8,
            ValueType::I8,
            ValueType::U16,
            ValueType::I16,
            ValueType::U32,
            ValueType::I32,
            ValueType::F32,
            ValueType::Bool,
            ValueType::Str,
            ValueType::Array,
            ValueType::U64,
            ValueType::I64,
            ValueType::F64,
        ];
        BY_ID.get(usize::try_from(id).ok()?).copied()
    }

    /// Fewest bytes one value of this type takes: what an array's count is checked against.
    fn min_bytes(self) -> usize {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
            ValueType::U16 | ValueType::I16 => 2,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
            ValueType::U64 | ValueType::I64 | ValueType::F64 => 8,
            ValueType::Str => 8,
            ValueType::Array => 4 + 8,
        }
    }
}

/// Where in the file the cursor is, for error messages.
#[derive(Clone, Copy, Debug)]
enum Place<'a> {
    Header,
    Entry(usize),
    Key(&'a str),
    TensorInfo(usize),
    Tensor(&'a str),
}

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Header => write!(f, "header"),
            Place::Entry(i) => write!(f, "metadata entry #{i}"),
            Place::Key(key) => write!(f, "metadata `{key}`"),
            Place::TensorInfo(i) => write!(f, "tensor info #{i}"),
            Place::Tensor(name) => write!(f, "tensor `{name}`"),
        }
    }
}

/// Checks the first bytes of a file (magic and version) before the rest is read, so that a
/// stream that is not GGUF (a pipe, `/dev/zero`) is refused after 8 bytes. Fewer than 8 bytes
/// are the whole file, and get the same error as [`GgufFile::parse`] gives.
pub fn check_prefix(prefix: &[u8]) -> Result<()> {
    Cursor { bytes: prefix, pos: 0, place: Place::Header, window: Window::Whole, ran_out: Cell::new(false) }
        .magic_and_version()
        .map(|_| ())
}

/// What the bytes a [`Cursor`] reads are, which decides what running out of them means.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Window {
    /// The whole file: it is truncated.
    Whole,
    /// The file cut at MAX_GGUF_HEADER_BYTES: the header is too large.
    CutAtCap,
    /// The first bytes of a file still arriving: more are needed.
    Prefix,
}

/// Reads forward through the header; `pos <= bytes.len()` always.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    place: Place<'a>,
    window: Window,
    /// Set when a read ran past the end of a [`Window::Prefix`].
    ran_out: Cell<bool>,
}

impl<'a> Cursor<'a> {
    fn error(&self, at: usize, problem: impl fmt::Display) -> Error {
        Error::Gguf(format!("{}: {problem} (at byte {at})", self.place))
    }

    fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// The error for running out of bytes, if the window says what that means.
    fn out_of_window(&self) -> Option<Error> {
        match self.window {
            Window::Whole => None,
            Window::CutAtCap => Some(self.header_too_large()),
            Window::Prefix => {
                self.ran_out.set(true);
                Some(Error::Gguf("the header continues past the bytes given".into()))
            }
        }
    }

    fn truncated(&self, n: usize, what: impl fmt::Display) -> Error {
        if let Some(e) = self.out_of_window() {
            return e;
        }
        let remaining = self.remaining();
        self.error(self.pos, format_args!("{what} needs {n} bytes but only {remaining} are left (truncated?)"))
    }

    fn header_too_large(&self) -> Error {
        Error::LimitExceeded {
            field: format!("the GGUF header (metadata and tensor table; {} reaches past it)", self.place),
            value: self.bytes.len() as u64 + 1,
            limit: MAX_GGUF_HEADER_BYTES as u64,
            unit: "bytes",
        }
    }

    /// `"GGUF"` and a version gptlens reads (2 or 3).
    fn magic_and_version(&mut self) -> Result<u32> {
        let magic = self.take_array::<4>("the magic number")?;
        if &magic != b"GGUF" {
            return Err(self.error(0, format_args!("it starts with \"{}\", not \"GGUF\"", magic.escape_ascii())));
        }
        let version = u32::from_le_bytes(self.take_array("the version")?);
        match version {
            2 | 3 => Ok(version),
            1 => Err(self.error(4, "GGUF version 1 is not supported (only 2 and 3); convert the model again")),
            v if matches!(v.swap_bytes(), 2 | 3) => {
                Err(self.error(4, "the file is big-endian GGUF; gptlens reads little-endian files only"))
            }
            v => Err(self.error(4, format_args!("unknown GGUF version {v} (gptlens reads versions 2 and 3)"))),
        }
    }

    /// A count from the header over gptlens's cap is refused before any entry is read.
    fn cap(&self, at: usize, count: u64, limit: usize, what: &'static str) -> Result<()> {
        if count > limit as u64 {
            return Err(Error::LimitExceeded {
                field: format!("the GGUF {what} count (at byte {at})"),
                value: count,
                limit: limit as u64,
                unit: what,
            });
        }
        Ok(())
    }

    fn take(&mut self, n: usize, what: impl fmt::Display) -> Result<&'a [u8]> {
        let start = self.pos;
        match start.checked_add(n).and_then(|end| self.bytes.get(start..end)) {
            Some(taken) => {
                self.pos = start + n;
                Ok(taken)
            }
            None => Err(self.truncated(n, what)),
        }
    }

    fn take_array<const N: usize>(&mut self, what: impl fmt::Display) -> Result<[u8; N]> {
        let start = self.pos;
        match self.bytes.get(start..).and_then(<[u8]>::first_chunk::<N>) {
            Some(taken) => {
                self.pos = start + N;
                Ok(*taken)
            }
            None => Err(self.truncated(N, what)),
        }
    }

    fn u32(&mut self, what: impl fmt::Display) -> Result<u32> {
        self.take_array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: impl fmt::Display) -> Result<u64> {
        self.take_array(what).map(u64::from_le_bytes)
    }

    /// `count` items of at least `min_bytes` each must fit in what is left of the file; this is
    /// what keeps a lying count from allocating.
    fn count(&self, at: usize, count: u64, min_bytes: usize, what: &str) -> Result<usize> {
        let remaining = self.remaining();
        usize::try_from(count)
            .ok()
            .filter(|n| n.checked_mul(min_bytes).is_some_and(|total| total <= remaining))
            .ok_or_else(|| {
                if let Some(e) = self.out_of_window() {
                    return e;
                }
                self.error(
                    at,
                    format_args!(
                        "{count} {what} of at least {min_bytes} bytes each cannot fit in the {remaining} bytes left"
                    ),
                )
            })
    }

    /// A string; `what` names it in an error, and is formatted only then (a vocabulary's array
    /// holds ~50,000 strings: naming each one up front was ~8 ms of a SmolLM2 load in Node).
    fn string(&mut self, what: impl fmt::Display) -> Result<&'a str> {
        let at = self.pos;
        let len = self.u64(&what)?;
        let remaining = self.remaining();
        let len = usize::try_from(len).ok().filter(|&n| n <= remaining).ok_or_else(|| {
            if let Some(e) = self.out_of_window() {
                return e;
            }
            self.error(at, format_args!("{what} is {len} bytes long but only {remaining} bytes are left"))
        })?;
        let text = self.take(len, &what)?;
        std::str::from_utf8(text)
            .map_err(|e| self.error(at + 8 + e.valid_up_to(), format_args!("{what} is not valid UTF-8")))
    }

    fn value_type(&mut self) -> Result<ValueType> {
        let at = self.pos;
        let id = self.u32("the value type")?;
        ValueType::from_id(id).ok_or_else(|| self.error(at, format_args!("unknown value type {id}")))
    }

    fn value(&mut self, value_type: ValueType) -> Result<Value<'a>> {
        Ok(match value_type {
            ValueType::U8 => Value::U8(u8::from_le_bytes(self.take_array("a u8")?)),
            ValueType::I8 => Value::I8(i8::from_le_bytes(self.take_array("an i8")?)),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.take_array("a u16")?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.take_array("an i16")?)),
            ValueType::U32 => Value::U32(self.u32("a u32")?),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.take_array("an i32")?)),
            ValueType::U64 => Value::U64(self.u64("a u64")?),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.take_array("an i64")?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.take_array("an f32")?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.take_array("an f64")?)),
            ValueType::Bool => {
                let at = self.pos;
                let [byte] = self.take_array("a bool")?;
                Value::Bool(self.boolean(at, byte)?)
            }
            ValueType::Str => Value::Str(self.string("the string")?),
            ValueType::Array => Value::Array(self.array(0)?),
        })
    }

    /// GGUF booleans are one byte, 0 or 1; anything else means the bytes are not what we think.
    fn boolean(&self, at: usize, byte: u8) -> Result<bool> {
        match byte {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.error(at, format_args!("a bool is {other}, not 0 or 1"))),
        }
    }

    fn array(&mut self, depth: usize) -> Result<Array<'a>> {
        let at = self.pos;
        if depth >= MAX_ARRAY_DEPTH {
            return Err(self.error(at, format_args!("arrays are nested more than {MAX_ARRAY_DEPTH} deep")));
        }
        let element_type = self.value_type()?;
        let count_at = self.pos;
        let count = self.u64("the array length")?;
        let n = self.count(count_at, count, element_type.min_bytes(), "array elements")?;
        Ok(match element_type {
            ValueType::U8 => Array::U8(self.take(n, "the array")?.to_vec()),
            ValueType::I8 => Array::I8(self.numbers(n, i8::from_le_bytes)?),
            ValueType::U16 => Array::U16(self.numbers(n, u16::from_le_bytes)?),
            ValueType::I16 => Array::I16(self.numbers(n, i16::from_le_bytes)?),
            ValueType::U32 => Array::U32(self.numbers(n, u32::from_le_bytes)?),
            ValueType::I32 => Array::I32(self.numbers(n, i32::from_le_bytes)?),
            ValueType::U64 => Array::U64(self.numbers(n, u64::from_le_bytes)?),
            ValueType::I64 => Array::I64(self.numbers(n, i64::from_le_bytes)?),
            ValueType::F32 => Array::F32(self.numbers(n, f32::from_le_bytes)?),
            ValueType::F64 => Array::F64(self.numbers(n, f64::from_le_bytes)?),
            ValueType::Bool => {
                let start = self.pos;
                let bytes = self.take(n, "the array")?;
                let bools = bytes.iter().enumerate().map(|(i, &b)| self.boolean(start + i, b));
                Array::Bool(bools.collect::<Result<_>>()?)
            }
            ValueType::Str => {
                let mut strings = Vec::new();
                for i in 0..n {
                    strings.push(self.string(format_args!("string #{i} of the array"))?);
                }
                Array::Str(strings)
            }
            ValueType::Array => {
                let mut arrays = Vec::new();
                for _ in 0..n {
                    arrays.push(self.array(depth + 1)?);
                }
                Array::Array(arrays)
            }
        })
    }

    fn numbers<const N: usize, T>(&mut self, n: usize, decode: fn([u8; N]) -> T) -> Result<Vec<T>> {
        let at = self.pos;
        let len = n.checked_mul(N).ok_or_else(|| self.error(at, "the array is too large"))?;
        let bytes = self.take(len, "the array")?;
        Ok(bytes.as_chunks::<N>().0.iter().map(|&chunk| decode(chunk)).collect())
    }

    /// The rest of a tensor info, after its name.
    /// The entry of one tensor, or (`Err`) the id of a type gptlens cannot read, its entry
    /// skipped.
    fn tensor_info(&mut self, name: &'a str) -> Result<std::result::Result<TensorInfo<'a>, u32>> {
        let dims_at = self.pos;
        let n_dims = self.u32("the dimension count")?;
        if !(1..=MAX_DIMS).contains(&n_dims) {
            return Err(self.error(dims_at, format_args!("{n_dims} dimensions; GGUF tensors have 1 to {MAX_DIMS}")));
        }
        let mut shape = Vec::with_capacity(MAX_DIMS as usize);
        for _ in 0..n_dims {
            let at = self.pos;
            let ne = self.u64("a dimension")?;
            let ne = usize::try_from(ne)
                .map_err(|_| self.error(at, format_args!("dimension {ne} is larger than this machine can address")))?;
            shape.push(ne);
        }
        let type_id = self.u32("the tensor type")?;
        let offset_at = self.pos;
        let offset = self.u64("the data offset")?;
        let Some(ggml_type) = GgmlType::from_id(type_id) else { return Ok(Err(type_id)) };
        let (row_len, outer) = match shape.split_first() {
            Some((&row_len, outer)) => (row_len, outer),
            None => (0, &[][..]),
        };
        let n_rows = outer
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .filter(|&n| row_len.checked_mul(n).is_some())
            .ok_or_else(|| self.error(dims_at, format_args!("shape {shape:?} has more elements than fit in memory")))?;
        if !row_len.is_multiple_of(ggml_type.block_len()) {
            let (name, block_len) = (ggml_type.name(), ggml_type.block_len());
            return Err(self.error(
                dims_at,
                format_args!("rows of {row_len} weights are not a whole number of {name} blocks of {block_len}"),
            ));
        }
        let n_bytes = ggml_type
            .row_bytes(row_len)
            .and_then(|row_bytes| row_bytes.checked_mul(n_rows))
            .ok_or_else(|| self.error(dims_at, format_args!("shape {shape:?} has more bytes than fit in memory")))?;
        Ok(Ok(TensorInfo { name, shape, ggml_type, row_len, n_rows, offset, offset_at, n_bytes }))
    }
}

/// A tensor as its info entry describes it, before its bytes are located.
struct TensorInfo<'a> {
    name: &'a str,
    shape: Vec<usize>,
    ggml_type: GgmlType,
    row_len: usize,
    n_rows: usize,
    /// From the start of the data section.
    offset: u64,
    /// Where the offset is written, for messages.
    offset_at: usize,
    n_bytes: usize,
}

impl<'a> TensorInfo<'a> {
    /// The tensor with its place in the file, and its bytes when `file` has them.
    fn locate(self, file: Extent<'a>, data_start: usize, alignment: usize) -> Result<GgufTensor<'a>> {
        let fail =
            |problem: String| Error::Gguf(format!("tensor `{}`: {problem} (at byte {})", self.name, self.offset_at));
        let offset = self.offset;
        if !offset.is_multiple_of(alignment as u64) {
            return Err(fail(format!("data offset {offset} is not a multiple of the alignment {alignment}")));
        }
        let range = usize::try_from(offset)
            .ok()
            .and_then(|o| data_start.checked_add(o))
            .and_then(|start| Some(start..start.checked_add(self.n_bytes)?));
        let (file_len, bytes) = match file {
            Extent::Bytes(bytes) => (bytes.len(), Some(bytes)),
            Extent::Length(len) => (len, None),
        };
        let inside = range.clone().filter(|r| r.end <= file_len);
        let located = inside.and_then(|r| match bytes {
            Some(bytes) => Some((r.clone(), bytes.get(r)?)),
            None => Some((r, &[][..])),
        });
        let (file_range, data) = located.ok_or_else(|| {
            let n_bytes = self.n_bytes;
            let file_offset = range.map_or_else(|| "out of range".to_string(), |r| r.start.to_string());
            fail(format!(
                "its {n_bytes} bytes at data offset {offset} (file offset {file_offset}) run past the end of the \
                 file ({file_len} bytes; truncated?)"
            ))
        })?;
        Ok(GgufTensor {
            name: self.name,
            shape: self.shape,
            ggml_type: self.ggml_type,
            row_len: self.row_len,
            n_rows: self.n_rows,
            file_range,
            data,
        })
    }
}

/// `general.alignment`, when present, must be a u32 power of two.
fn alignment(metadata: &[(&str, Value)], index: &HashMap<&str, usize>) -> Result<usize> {
    const KEY: &str = "general.alignment";
    match index.get(KEY).and_then(|&i| metadata.get(i)).map(|(_, v)| v) {
        None => Ok(DEFAULT_ALIGNMENT),
        Some(Value::U32(a)) if a.is_power_of_two() => {
            usize::try_from(*a).map_err(|_| Error::Gguf(format!("metadata `{KEY}`: {a} is too large")))
        }
        Some(Value::U32(a)) => Err(Error::Gguf(format!("metadata `{KEY}`: {a} is not a power of two"))),
        Some(other) => Err(Error::Gguf(format!("metadata `{KEY}` is {}, expected a u32", other.describe()))),
    }
}

/// Two tensors sharing bytes means a corrupt table (llama.cpp's writer lays them out one after
/// another). Zero-size tensors overlap nothing.
fn check_no_overlap(tensors: &[GgufTensor]) -> Result<()> {
    let mut extents: Vec<(usize, usize, &str)> = tensors
        .iter()
        .filter(|t| !t.file_range.is_empty())
        .map(|t| (t.file_range.start, t.file_range.end, t.name))
        .collect();
    extents.sort_unstable();
    for pair in extents.windows(2) {
        if let [(_, end_a, a), (start_b, _, b)] = pair {
            if start_b < end_a {
                return Err(Error::Gguf(format!("tensors `{a}` and `{b}` share bytes")));
            }
        }
    }
    Ok(())
}

/// ggml's name for a type id, for messages about types gptlens does not decode.
fn type_name(id: u32) -> String {
    let name = match id {
        6 => "Q5_0",
        7 => "Q5_1",
        9 => "Q8_1",
        10 => "Q2_K",
        11 => "Q3_K",
        15 => "Q8_K",
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        20 => "IQ4_NL",
        21 => "IQ3_S",
        22 => "IQ2_S",
        23 => "IQ4_XS",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        34 => "TQ1_0",
        35 => "TQ2_0",
        39 => "MXFP4",
        40 => "NVFP4",
        41 => "Q1_0",
        _ => return format!("unknown ggml type {id}"),
    };
    format!("{name} (ggml type {id})")
}
