//! A Hugging Face checkpoint from arbitrary bytes: the input is a little-endian u16 length, that
//! many bytes of config.json, then model.safetensors. Both go through `Checkpoint::from_files`
//! (under a small memory budget), and the weights file is also parsed on its own.
#![no_main]

use std::collections::BTreeMap;

use gptlens::checkpoint::LoadOptions;
use gptlens::formats::safetensors::SafetensorsFile;
use gptlens::Checkpoint;
use libfuzzer_sys::fuzz_target;

const BUDGET: u64 = 256 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((len, rest)) = data.split_first_chunk::<2>() else { return };
    let len = usize::from(u16::from_le_bytes(*len)).min(rest.len());
    let (config, weights) = rest.split_at(len);
    if let Ok(file) = SafetensorsFile::parse(weights) {
        for name in ["wte.weight", "ln_f.bias", "model.norm.weight"] {
            let _ = file.check(name, &[64]);
            let mut out = [0f32; 64];
            let _ = file.read_f32(name, &[64], &mut out);
        }
    }
    let files = BTreeMap::from([("config.json".to_string(), config), ("model.safetensors".to_string(), weights)]);
    let _ = Checkpoint::from_files_with(&files, &LoadOptions { memory_budget: Some(BUDGET) });
});
