//! Safetensors checkpoints. The `safetensors` crate validates the header (offsets that tile the
//! data exactly, element counts without overflow) before anything is read; this module first
//! holds the header to gptlens's caps (its size, and the number of tensors, counted without
//! building anything), and adds shape checks against what the model expects and decodes
//! F32/F16/BF16 into f32.

use safetensors::tensor::{Dtype, SafeTensors};

use crate::error::{Error, Result};
use crate::formats::limits::{MAX_SAFETENSORS_HEADER_BYTES, MAX_TENSORS};

pub struct SafetensorsFile<'a> {
    tensors: SafeTensors<'a>,
}

impl<'a> SafetensorsFile<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        check_prefix(bytes)?;
        if let Some(header) = u64_at(bytes).and_then(|n| bytes.get(8..8usize.checked_add(usize::try_from(n).ok()?)?)) {
            count_tensors(header)?;
        }
        let tensors = SafeTensors::deserialize(bytes).map_err(|e| Error::Safetensors(describe(&e)))?;
        Ok(Self { tensors })
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.tensor(name).is_ok()
    }

    /// Checks that tensor `name` exists with exactly this shape and a dtype gptlens decodes.
    pub fn check(&self, name: &str, expected: &[usize]) -> Result<()> {
        let view = self.tensors.tensor(name).map_err(|_| Error::MissingTensor { name: name.to_string() })?;
        if view.shape() != expected {
            return Err(Error::ShapeMismatch {
                name: name.to_string(),
                expected: expected.to_vec(),
                got: view.shape().to_vec(),
            });
        }
        if !matches!(view.dtype(), Dtype::F32 | Dtype::F16 | Dtype::BF16) {
            return Err(Error::UnsupportedDtype { name: name.to_string(), dtype: format!("{:?}", view.dtype()) });
        }
        Ok(())
    }

    /// Decodes tensor `name` (checked to have shape `expected`) into `out`, whose length must equal
    /// the tensor's element count.
    pub fn read_f32(&self, name: &str, expected: &[usize], out: &mut [f32]) -> Result<()> {
        self.check(name, expected)?;
        let view = self.tensors.tensor(name).map_err(|_| Error::MissingTensor { name: name.to_string() })?;
        let bytes = view.data();
        let width = match view.dtype() {
            Dtype::F32 => 4,
            _ => 2,
        };
        if bytes.len() != out.len() * width {
            return Err(Error::Safetensors(format!(
                "tensor `{name}` holds {} bytes, expected {} for shape {expected:?}",
                bytes.len(),
                out.len() * width
            )));
        }
        match view.dtype() {
            Dtype::F32 => decode(bytes, out, |b: [u8; 4]| f32::from_le_bytes(b)),
            Dtype::F16 => decode(bytes, out, |b: [u8; 2]| half::f16::from_le_bytes(b).to_f32()),
            _ => decode(bytes, out, |b: [u8; 2]| half::bf16::from_le_bytes(b).to_f32()),
        }
        Ok(())
    }

    /// Raw stored bytes of a tensor, to compare two tensors without decoding them.
    pub fn raw(&self, name: &str) -> Result<&'a [u8]> {
        self.tensors.tensor(name).map(|v| v.data()).map_err(|_| Error::MissingTensor { name: name.to_string() })
    }
}

/// The header length, the first 8 bytes, little-endian.
fn u64_at(bytes: &[u8]) -> Option<u64> {
    bytes.first_chunk::<8>().map(|b| u64::from_le_bytes(*b))
}

/// Checks what the first bytes of a file can tell (the header's length, and that the header
/// starts as a JSON object), so that a stream that is not safetensors (`/dev/zero`, a pipe) is
/// refused before the rest is read. A prefix shorter than 8 bytes passes: it may be a whole
/// (too short) file, which [`SafetensorsFile::parse`] then names as such.
pub fn check_prefix(prefix: &[u8]) -> Result<()> {
    let Some(n) = u64_at(prefix) else { return Ok(()) };
    if n > MAX_SAFETENSORS_HEADER_BYTES as u64 {
        return Err(Error::LimitExceeded {
            field: "the safetensors header length (the file's first 8 bytes)".into(),
            value: n,
            limit: MAX_SAFETENSORS_HEADER_BYTES as u64,
            unit: "bytes",
        });
    }
    if n < 2 {
        return Err(Error::Safetensors(format!(
            "the header is {n} bytes long, too short for a JSON object (the first 8 bytes are {:02x?})",
            &prefix[..8]
        )));
    }
    match prefix.get(8) {
        Some(b'{') | None => Ok(()),
        Some(&other) => Err(Error::Safetensors(format!(
            "the header does not start with a JSON object: its first byte is {:?}",
            char::from(other)
        ))),
    }
}

/// Refuses a header listing more than [`MAX_TENSORS`] entries, counting them with a visitor
/// that skips every value, so a header of a million empty tensors costs one pass over its bytes
/// and no allocation. Malformed JSON is left to the `safetensors` crate to describe.
fn count_tensors(header: &[u8]) -> Result<()> {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};

    struct Count;
    impl<'de> Visitor<'de> for Count {
        type Value = usize;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<usize, A::Error> {
            let mut n = 0usize;
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                n += 1;
                if n > MAX_TENSORS {
                    // The error only stops the walk; the count is what is reported.
                    return Err(serde::de::Error::custom("too many"));
                }
            }
            Ok(n)
        }
    }
    match serde_json::Deserializer::from_slice(header).deserialize_map(Count) {
        Err(e) if e.to_string().starts_with("too many") => Err(Error::LimitExceeded {
            field: "the number of tensors in the safetensors header (counting stops one past the limit)".into(),
            value: MAX_TENSORS as u64 + 1,
            limit: MAX_TENSORS as u64,
            unit: "tensors",
        }),
        _ => Ok(()),
    }
}

fn decode<const N: usize>(bytes: &[u8], out: &mut [f32], convert: impl Fn([u8; N]) -> f32) {
    for (dst, chunk) in out.iter_mut().zip(bytes.chunks_exact(N)) {
        let mut word = [0u8; N];
        word.copy_from_slice(chunk);
        *dst = convert(word);
    }
}

/// The crate's errors are terse (`MetadataIncompleteBuffer`); say what they mean for a user.
fn describe(e: &safetensors::SafeTensorError) -> String {
    use safetensors::SafeTensorError as E;
    match e {
        E::HeaderTooSmall => "the file is shorter than a safetensors header (8 bytes)".into(),
        E::HeaderTooLarge => "the header claims to be larger than 100 MB; the file is corrupt".into(),
        E::InvalidHeaderLength => "the header length runs past the end of the file (truncated?)".into(),
        E::MetadataIncompleteBuffer => {
            "the tensor data does not match the header: the file is truncated or has trailing bytes".into()
        }
        E::ValidationOverflow => "a tensor shape in the header is too large to exist".into(),
        E::TensorInvalidInfo => "a tensor's byte range does not match its shape and dtype".into(),
        other => other.to_string(),
    }
}
