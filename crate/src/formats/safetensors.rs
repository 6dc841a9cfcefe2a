//! Safetensors checkpoints. The `safetensors` crate validates the header (size cap, offsets that
//! tile the data exactly, element counts without overflow) before anything is read; this module
//! adds shape checks against what the model expects and decodes F32/F16/BF16 into f32.

use safetensors::tensor::{Dtype, SafeTensors};

use crate::error::{Error, Result};

pub struct SafetensorsFile<'a> {
    tensors: SafeTensors<'a>,
}

impl<'a> SafetensorsFile<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let tensors = SafeTensors::deserialize(bytes).map_err(|e| Error::Safetensors(describe(&e)))?;
        Ok(Self { tensors })
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.tensor(name).is_ok()
    }

    /// Checks that tensor `name` exists with exactly this shape and a dtype gptlens decodes.
    pub fn check(&self, name: &str, expected: &[usize]) -> Result<()> {
        let view = self
            .tensors
            .tensor(name)
            .map_err(|_| Error::MissingTensor { name: name.to_string() })?;
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
        let view = self
            .tensors
            .tensor(name)
            .map_err(|_| Error::MissingTensor { name: name.to_string() })?;
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
        self.tensors
            .tensor(name)
            .map(|v| v.data())
            .map_err(|_| Error::MissingTensor { name: name.to_string() })
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
