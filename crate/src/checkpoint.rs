//! A checkpoint is a set of named files — `config.json`, `model.safetensors`, tokenizer files, or
//! one self-describing `.gguf` — from a folder on disk or handed over as bytes (a browser's file
//! picker). Both routes end in [`Checkpoint::from_files`], so the CLI and the wasm bindings load
//! models the same way.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::formats::{gguf::GgufFile, gguf_config, hf_config, safetensors::SafetensorsFile};
use crate::model::{Model, Weights};
use crate::tokenizer::Tokenizer;

pub struct Checkpoint {
    pub model: Arc<Model>,
    /// `None` when the files hold no tokenizer: the model then runs on token ids only.
    pub tokenizer: Option<Tokenizer>,
}

impl Checkpoint {
    /// Loads from files by name: one `*.gguf`, or `config.json`, one `*.safetensors`, and
    /// optionally `tokenizer.json` or `vocab.json` + `merges.txt`.
    pub fn from_files(files: &BTreeMap<String, &[u8]>) -> Result<Checkpoint> {
        // A Hugging Face checkpoint is recognised by its config.json; otherwise a GGUF carries
        // everything in one file.
        let Some(config_bytes) = files.get("config.json") else {
            let gguf: Vec<&[u8]> = files.iter().filter(|(n, _)| n.ends_with(".gguf")).map(|(_, b)| *b).collect();
            return match gguf.as_slice() {
                [one] => Checkpoint::from_gguf(one),
                [] => Err(Error::MissingFile(
                    "expected config.json with a .safetensors weights file, or one .gguf file".into(),
                )),
                _ => Err(Error::MissingFile("several .gguf files: give one model at a time".into())),
            };
        };
        let config = hf_config::parse(config_bytes)?;
        let weights_name = weights_file_name(files.keys().map(String::as_str))?;
        let weights_bytes = files.get(weights_name).copied().unwrap_or_default();
        let weights = Weights::from_safetensors(&config, &SafetensorsFile::parse(weights_bytes)?)?;
        let tokenizer = match (files.get("tokenizer.json"), files.get("vocab.json"), files.get("merges.txt")) {
            (Some(json), _, _) => Some(Tokenizer::from_tokenizer_json(json)?),
            (None, Some(vocab), Some(merges)) => Some(Tokenizer::from_vocab_merges(vocab, merges)?),
            _ if config.vocab_size == 256 => Some(Tokenizer::Bytes),
            _ => None,
        };
        if let Some(t) = &tokenizer {
            if t.vocab_size() > config.vocab_size {
                return Err(Error::Tokenizer(format!(
                    "the tokenizer has {} tokens but the model only {}",
                    t.vocab_size(),
                    config.vocab_size
                )));
            }
        }
        Ok(Checkpoint { model: Arc::new(Model { config, weights }), tokenizer })
    }

    /// Loads a GGUF file: config, weights (quantized blocks kept as stored) and, when its metadata
    /// has one, the tokenizer.
    pub fn from_gguf(bytes: &[u8]) -> Result<Checkpoint> {
        let file = GgufFile::parse(bytes)?;
        let config = gguf_config::parse(&file)?;
        let weights = Weights::from_gguf(&config, &file)?;
        let tokenizer = match file.metadata("tokenizer.ggml.model") {
            Some(_) => Some(Tokenizer::from_gguf(&file)?),
            None => None,
        };
        Ok(Checkpoint { model: Arc::new(Model { config, weights }), tokenizer })
    }

    /// Loads a model folder, a `.gguf` file, or a `.safetensors` file with its `config.json` (and
    /// any tokenizer files) beside it.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: &std::path::Path) -> Result<Checkpoint> {
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|source| Error::Io { path: p.display().to_string(), source })
        };
        if path.extension().is_some_and(|e| e == "gguf") {
            return Checkpoint::from_gguf(&read(path)?);
        }
        let (dir, weights) = if path.is_dir() {
            let names = std::fs::read_dir(path)
                .map_err(|source| Error::Io { path: path.display().to_string(), source })?
                .filter_map(|e| e.ok().and_then(|e| e.file_name().into_string().ok()))
                .collect::<Vec<_>>();
            let gguf: Vec<&String> = names.iter().filter(|n| n.ends_with(".gguf")).collect();
            if let ([one], false) = (gguf.as_slice(), names.iter().any(|n| n == "config.json")) {
                return Checkpoint::from_gguf(&read(&path.join(one))?);
            }
            let name = weights_file_name(names.iter().map(String::as_str))?.to_string();
            (path.to_path_buf(), path.join(name))
        } else {
            let dir = path.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
            (dir, path.to_path_buf())
        };
        let mut owned = BTreeMap::new();
        let weights_name = weights.file_name().and_then(|n| n.to_str()).unwrap_or("model.safetensors").to_string();
        owned.insert(weights_name, read(&weights)?);
        for name in ["config.json", "tokenizer.json", "vocab.json", "merges.txt"] {
            let p = dir.join(name);
            if p.is_file() {
                owned.insert(name.to_string(), read(&p)?);
            }
        }
        let files = owned.iter().map(|(k, v)| (k.clone(), v.as_slice())).collect();
        Checkpoint::from_files(&files)
    }
}

/// The one weights file: `model.safetensors` if present, else the only `*.safetensors`.
fn weights_file_name<'a>(names: impl Iterator<Item = &'a str>) -> Result<&'a str> {
    let candidates: Vec<&str> = names.filter(|n| n.ends_with(".safetensors")).collect();
    if let Some(name) = candidates.iter().find(|&&n| n == "model.safetensors") {
        return Ok(name);
    }
    match candidates.as_slice() {
        [one] => Ok(one),
        [] => Err(Error::MissingFile("no .safetensors weights file".into())),
        many => Err(Error::MissingFile(format!(
            "several weights files ({}) and none named model.safetensors; sharded checkpoints are not supported",
            many.join(", ")
        ))),
    }
}
