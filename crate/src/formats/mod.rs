//! Readers for checkpoint files. They validate every size and offset against the bytes they were
//! given and turn anything malformed into a typed [`crate::Error`]; they do no math.

pub mod gguf;
pub mod gguf_config;
pub mod hf_config;
pub mod limits;
pub mod safetensors;
