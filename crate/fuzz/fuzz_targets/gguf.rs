//! The GGUF reader on arbitrary bytes: parsing, every accessor a loader uses, the config, the
//! tokenizer its metadata describes and the weights built from it under a small memory budget,
//! and the header read from a prefix (as a file arriving in pieces is) agreeing with the whole
//! file's. Anything but a typed error or a value is a finding.
#![no_main]

use gptlens::formats::limits::{Budget, BudgetOrigin};
use gptlens::formats::{gguf::GgufFile, gguf_config};
use gptlens::model::GgufFill;
use gptlens::tokenizer::Tokenizer;
use libfuzzer_sys::fuzz_target;

/// Small enough that libFuzzer's 2 GB RSS limit is never the one that trips.
const BUDGET: u64 = 256 << 20;

fuzz_target!(|data: &[u8]| {
    let from_prefix = GgufFile::parse_header(&data[..data.len() / 2], data.len());
    let Ok(file) = GgufFile::parse(data) else { return };
    // A header that parses from a prefix is the whole file's header, tensor for tensor.
    if let Ok(Some(header)) = from_prefix {
        let ranges = |f: &GgufFile| f.tensors().iter().map(|t| (t.name().to_string(), t.file_range())).collect::<Vec<_>>();
        assert_eq!(ranges(&header), ranges(&file));
    }
    for t in file.tensors() {
        let _ = t.row(0);
        let _ = t.row(t.n_rows().saturating_sub(1));
        assert!(t.row(t.n_rows()).is_none());
        // to_f32 decodes the whole tensor; its size is bounded by the input's.
        if t.row_len().saturating_mul(t.n_rows()) <= 1 << 16 {
            assert_eq!(t.to_f32().len(), t.row_len() * t.n_rows());
        }
    }
    for (key, value) in file.metadata_entries() {
        let _ = (file.metadata(key), value.describe());
    }
    let _ = Tokenizer::from_gguf(&file);
    if let Ok(config) = gguf_config::parse(&file) {
        let budget = Budget { bytes: BUDGET, origin: BudgetOrigin::Option, files: data.len() as u64 };
        let filled = GgufFill::plan(&config, &file, &budget, true).and_then(|mut fill| {
            for t in file.tensors() {
                fill.feed(t.file_range().start, t.data())?;
            }
            fill.finish()
        });
        if let Ok(weights) = filled {
            let mut row = vec![0.0; config.d_model];
            weights.row(&weights.token_embd, config.vocab_size - 1, &mut row);
        }
    }
});
