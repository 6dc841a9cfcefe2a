//! A checkpoint is a set of named files — `config.json`, `model.safetensors`, tokenizer files, or
//! one self-describing `.gguf` — from a folder on disk or handed over as bytes (a browser's file
//! picker). Both routes end in [`Checkpoint::from_files`], so the CLI and the wasm bindings load
//! models the same way.

use std::collections::BTreeMap;
use std::sync::{mpsc, Arc};

use crate::error::{Error, Result};
use crate::formats::limits::Budget;
use crate::formats::{gguf::GgufFile, gguf_config, hf_config, safetensors::SafetensorsFile};
use crate::model::{GgufFill, Model, Weights};
use crate::tokenizer::Tokenizer;

pub mod snapshot;

pub struct Checkpoint {
    pub model: Arc<Model>,
    /// `None` when the files hold no tokenizer, or one gptlens cannot read
    /// ([`Checkpoint::tokenizer_problem`] says why): the model then runs on token ids only.
    pub tokenizer: Option<Tokenizer>,
    /// Why the tokenizer files or the GGUF's vocabulary could not be read (an unknown
    /// pre-tokenizer, say). Such a model still loads; only text needs the tokenizer.
    pub tokenizer_problem: Option<String>,
    /// The model's own name when its files give one: GGUF `general.name`, or config.json's
    /// `_name_or_path` (what `transformers` saved it from).
    pub name: Option<String>,
    /// Why the model's context (`config.n_ctx`) is shorter than its files say: a session at the
    /// whole context would not fit in the memory budget beside the weights, so it was cut to the
    /// positions that do ([`crate::formats::limits::Budget::fit`]). `None` when nothing was cut.
    pub context_cut: Option<String>,
}

/// `config` with its context cut to `positions` when the budget held fewer, and the note that says so.
fn cut_context(
    mut config: crate::model::Config,
    positions: usize,
    budget: &Budget,
) -> (crate::model::Config, Option<String>) {
    if positions >= config.n_ctx {
        return (config, None);
    }
    let note = format!(
        "the context was cut from {} to {positions} positions: a session at the whole context does not fit beside the weights in the memory budget of {} ({})",
        config.n_ctx,
        crate::formats::limits::human_bytes(budget.bytes),
        budget.origin
    );
    config.n_ctx = positions;
    (config, Some(note))
}

/// How to load a checkpoint. The default is what `from_files`, `from_gguf` and `open` use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Bytes the model's weights, one session at its full context and the files held while
    /// loading may take together; a model that needs more is refused with
    /// [`Error::OverBudget`] before anything is allocated. `None`: the platform's budget
    /// (`crate::formats::limits`: natively `GPTLENS_MEMORY_BUDGET` or 16 GiB; in wasm32 what the
    /// 4 GiB address space leaves, which also caps any value given here).
    pub memory_budget: Option<u64>,
}

impl Checkpoint {
    /// Loads from files by name: one `*.gguf`, or `config.json`, one `*.safetensors`, and
    /// optionally `tokenizer.json` or `vocab.json` + `merges.txt`.
    pub fn from_files(files: &BTreeMap<String, &[u8]>) -> Result<Checkpoint> {
        Checkpoint::from_files_with(files, &LoadOptions::default())
    }

    /// [`Checkpoint::from_files`] with options.
    pub fn from_files_with(files: &BTreeMap<String, &[u8]>, options: &LoadOptions) -> Result<Checkpoint> {
        let held = files.values().fold(0u64, |sum, b| sum.saturating_add(b.len() as u64));
        let budget = Budget::resolve(options.memory_budget, held)?;
        // A Hugging Face checkpoint is recognised by its config.json; otherwise a GGUF carries
        // everything in one file.
        let Some(config_bytes) = files.get("config.json") else {
            let gguf: Vec<&[u8]> = files.iter().filter(|(n, _)| n.ends_with(".gguf")).map(|(_, b)| *b).collect();
            return match gguf.as_slice() {
                [one] => Checkpoint::gguf_within(one, &budget),
                [] => Err(Error::MissingFile(
                    "expected config.json with a .safetensors weights file, or one .gguf file".into(),
                )),
                _ => Err(Error::MissingFile("several .gguf files: give one model at a time".into())),
            };
        };
        let config = hf_config::parse(config_bytes)?;
        let weights_name = weights_file_name(files.keys().map(String::as_str))?;
        let weights_bytes = files.get(weights_name).copied().unwrap_or_default();
        let (weights, positions) =
            Weights::from_safetensors(&config, &SafetensorsFile::parse(weights_bytes)?, &budget)?;
        let (config, context_cut) = cut_context(config, positions, &budget);
        // As with a GGUF, tokenizer files gptlens cannot read do not stop the model.
        let read = match (files.get("tokenizer.json"), files.get("vocab.json"), files.get("merges.txt")) {
            (Some(json), _, _) => Tokenizer::from_tokenizer_json(json).map(Some),
            (None, Some(vocab), Some(merges)) => Tokenizer::from_vocab_merges(vocab, merges).map(Some),
            _ if config.vocab_size == 256 => Ok(Some(Tokenizer::Bytes)),
            _ => Ok(None),
        };
        let (tokenizer, tokenizer_problem) = match read {
            Ok(tokenizer) => (tokenizer, None),
            Err(e) => (None, Some(e.to_string())),
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
        let name = serde_json::from_slice::<serde_json::Value>(config_bytes)
            .ok()
            .and_then(|v| v.get("_name_or_path")?.as_str().map(str::to_owned))
            .filter(|n| !n.trim().is_empty());
        Ok(Checkpoint { model: Arc::new(Model { config, weights }), tokenizer, tokenizer_problem, name, context_cut })
    }

    /// The tokenizer, or why there is none: no tokenizer files, or a vocabulary gptlens cannot
    /// read ([`Error::UnreadableTokenizer`], naming what is missing).
    pub fn tokenizer(&self) -> Result<&Tokenizer> {
        match (&self.tokenizer, &self.tokenizer_problem) {
            (Some(tokenizer), _) => Ok(tokenizer),
            (None, Some(problem)) => Err(Error::UnreadableTokenizer(problem.clone())),
            (None, None) => Err(Error::NoTokenizer),
        }
    }

    /// Loads a GGUF file: config, weights (quantized blocks kept as stored) and, when its metadata
    /// has one, the tokenizer.
    pub fn from_gguf(bytes: &[u8]) -> Result<Checkpoint> {
        Checkpoint::from_gguf_with(bytes, &LoadOptions::default())
    }

    /// [`Checkpoint::from_gguf`] with options.
    pub fn from_gguf_with(bytes: &[u8], options: &LoadOptions) -> Result<Checkpoint> {
        Checkpoint::gguf_within(bytes, &Budget::resolve(options.memory_budget, bytes.len() as u64)?)
    }

    fn gguf_within(bytes: &[u8], budget: &Budget) -> Result<Checkpoint> {
        let file = GgufFile::parse(bytes)?;
        let mut head = GgufHead::plan(&file, budget, true)?;
        warm_up_aside();
        // The vocabulary and the weights are independent: built side by side on the pool.
        let (vocabulary, filled) = rayon::join(
            || tokenizer_of(&file),
            || file.tensors().iter().try_for_each(|t| head.fill.feed(t.file_range().start, t.data())),
        );
        filled?;
        head.finish(vocabulary)
    }

    /// Loads a model folder, a `.gguf` file, or a `.safetensors` file with its `config.json` (and
    /// any tokenizer files) beside it.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: &std::path::Path) -> Result<Checkpoint> {
        Checkpoint::open_with(path, &LoadOptions::default())
    }

    /// [`Checkpoint::open`] with options. Files are read only up to the memory budget; a device
    /// or pipe given as the model must start like a GGUF or safetensors file, so `/dev/zero`
    /// fails after a few bytes instead of being read until memory runs out.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_with(path: &std::path::Path, options: &LoadOptions) -> Result<Checkpoint> {
        let budget = Budget::resolve(options.memory_budget, 0)?;
        let read = |p: &std::path::Path| read_bounded(p, &budget, None);
        let read_weights = |p: &std::path::Path, gguf: bool| {
            let sniff: Sniff =
                if gguf { crate::formats::gguf::check_prefix } else { crate::formats::safetensors::check_prefix };
            read_bounded(p, &budget, Some(sniff))
        };
        if path.extension().is_some_and(|e| e == "gguf") {
            return Checkpoint::from_gguf_with(&read_weights(path, true)?, options);
        }
        let (dir, weights) = if path.is_dir() {
            let names = std::fs::read_dir(path)
                .map_err(|source| Error::Io { path: path.display().to_string(), source })?
                .filter_map(|e| e.ok().and_then(|e| e.file_name().into_string().ok()))
                .collect::<Vec<_>>();
            let gguf: Vec<&String> = names.iter().filter(|n| n.ends_with(".gguf")).collect();
            if let ([one], false) = (gguf.as_slice(), names.iter().any(|n| n == "config.json")) {
                return Checkpoint::from_gguf_with(&read_weights(&path.join(one), true)?, options);
            }
            let name = weights_file_name(names.iter().map(String::as_str))?.to_string();
            (path.to_path_buf(), path.join(name))
        } else {
            let dir = path.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
            (dir, path.to_path_buf())
        };
        let mut owned = BTreeMap::new();
        let weights_name = weights.file_name().and_then(|n| n.to_str()).unwrap_or("model.safetensors").to_string();
        owned.insert(weights_name, read_weights(&weights, false)?);
        for name in ["config.json", "tokenizer.json", "vocab.json", "merges.txt"] {
            let p = dir.join(name);
            if p.is_file() {
                owned.insert(name.to_string(), read(&p)?);
            }
        }
        let files = owned.iter().map(|(k, v)| (k.clone(), v.as_slice())).collect();
        Checkpoint::from_files_with(&files, options)
    }
}

/// What a GGUF's header gives but its vocabulary: the config and the name, and the weights
/// planned and allocated, waiting for the tensors' bytes.
struct GgufHead {
    config: crate::model::Config,
    fill: GgufFill,
    name: Option<String>,
    context_cut: Option<String>,
}

impl GgufHead {
    /// Plans the weights from the header; the tokenizer is built apart ([`tokenizer_of`]).
    /// `allocate`: the buffers too, to be filled from the file's tensors; else they come filled
    /// from a snapshot ([`GgufFill::install`]).
    fn plan(file: &GgufFile, budget: &Budget, allocate: bool) -> Result<GgufHead> {
        let config = gguf_config::parse(file)?;
        let fill = GgufFill::plan(&config, file, budget, allocate)?;
        let (config, context_cut) = cut_context(config, fill.positions(), budget);
        let name =
            file.metadata("general.name").and_then(|v| v.as_str()).map(str::to_owned).filter(|n| !n.trim().is_empty());
        Ok(GgufHead { config, fill, name, context_cut })
    }

    fn finish(self, (tokenizer, tokenizer_problem): Vocabulary) -> Result<Checkpoint> {
        let weights = self.fill.finish()?;
        let model = Arc::new(Model { config: self.config, weights });
        let Self { name, context_cut, .. } = self;
        Ok(Checkpoint { model, tokenizer, tokenizer_problem, name, context_cut })
    }
}

/// Warms the matmul up ([`crate::kernels::matmul::warm_up`]) on the thread pool while a GGUF's
/// weights are read, where a JIT compiles the engine (wasm) and a pool thread can take it. The
/// page's SmolLM2, warm HTTP cache, alternating with the build without it (three runs of 14
/// pairs of navigations): the first pass 70–110 ms and the cold start 40–60 ms faster (medians).
/// Natively there is nothing to warm, and without a pool it would hold up the load.
fn warm_up_aside() {
    if cfg!(target_arch = "wasm32") && rayon::current_num_threads() >= 2 {
        rayon::spawn(crate::kernels::matmul::warm_up);
    }
}

/// A tokenizer, or why there is none ([`Checkpoint::tokenizer_problem`]).
type Vocabulary = (Option<Tokenizer>, Option<String>);

/// The tokenizer a GGUF's metadata describes. A vocabulary gptlens cannot read does not stop the
/// model: token ids still run it.
fn tokenizer_of(file: &GgufFile) -> Vocabulary {
    match file.metadata("tokenizer.ggml.model") {
        None => (None, None),
        Some(_) => match Tokenizer::from_gguf(file) {
            Ok(tokenizer) => (Some(tokenizer), None),
            Err(e) => (None, Some(e.to_string())),
        },
    }
}

/// Work done on the thread pool while the caller goes on (a GGUF's tokenizer while its weights
/// stream in, a snapshot's plan while its buffers are read), or already done.
enum Aside<T> {
    Done(Box<T>),
    Running(mpsc::Receiver<T>),
}

impl<T: Send + 'static> Aside<T> {
    /// Starts `work` on the thread pool.
    fn spawn(work: impl FnOnce() -> T + Send + 'static) -> Aside<T> {
        let (done, receive) = mpsc::sync_channel(1);
        rayon::spawn(move || {
            // `work` and what it holds (a header) are let go before its result is sent: a stream
            // that finishes once it has the tokenizer then holds nothing of the file but the
            // weights. The receiver is gone when the load was abandoned: nothing waits for this.
            let _ = done.send(work());
        });
        Aside::Running(receive)
    }

    /// Its result; `None` if the work stopped before it ended.
    fn wait(self) -> Option<T> {
        match self {
            Aside::Done(result) => Some(*result),
            Aside::Running(receive) => receive.recv().ok(),
        }
    }
}

/// A streamed GGUF's tokenizer: built on the thread pool while the weights stream in, or at once
/// where there is no other thread. In a fresh Node process, building SmolLM2's took 108 ms of the
/// 315 ms its file took to go into the weights (profiled before the regex engine went).
type TokenizerBuild = Aside<Vocabulary>;

/// Starts building, on the thread pool, the tokenizer of the GGUF whose header is in `header`
/// (parsed again there: a parsed header borrows the bytes).
fn build_tokenizer_aside(header: Arc<Vec<u8>>, file_len: usize) -> TokenizerBuild {
    Aside::spawn(move || match GgufFile::parse_header(&header, file_len) {
        Ok(Some(file)) => tokenizer_of(&file),
        // The caller parsed these bytes before starting this: not met.
        Ok(None) | Err(_) => (None, Some("the GGUF header could not be read again".into())),
    })
}

/// The tokenizer, once built.
fn built(tokenizer: TokenizerBuild) -> Vocabulary {
    tokenizer.wait().unwrap_or_else(|| (None, Some("the tokenizer's build stopped before it ended".into())))
}

/// A `.gguf` checkpoint loaded from its bytes as they arrive (a download, a file read in pieces):
/// the first bytes are kept until the header parses, then every piece goes straight into the
/// weights and is let go, so the model is in memory once — not once as a file and again as
/// weights, as when the whole file is handed over.
///
/// ```no_run
/// # fn main() -> gptlens::Result<()> {
/// use std::io::Read;
/// let mut file = std::fs::File::open("model.gguf").unwrap();
/// let len = file.metadata().unwrap().len();
/// let mut stream = gptlens::checkpoint::GgufStream::new(len, &Default::default())?;
/// let mut piece = vec![0; 1 << 20];
/// loop {
///     let n = file.read(&mut piece).unwrap();
///     if n == 0 { break; }
///     stream.push(&piece[..n])?;
/// }
/// let checkpoint = stream.finish()?;
/// # Ok(()) }
/// ```
pub struct GgufStream {
    file_len: usize,
    received: usize,
    options: LoadOptions,
    state: StreamState,
    /// Whether to keep the header for a snapshot of the weights ([`GgufStream::keep_header`]),
    /// and the header once parsed.
    keep_header: bool,
    header: Option<snapshot::GgufHeader>,
}

enum StreamState {
    /// The first bytes, and how many to have before trying to parse the header again.
    Header { bytes: Vec<u8>, next_try: usize },
    /// The header was read: the weights are being filled, the tokenizer built.
    Body(Box<GgufHead>, TokenizerBuild),
    /// An error ended the stream.
    Failed,
}

impl GgufStream {
    /// A stream for a file of `file_len` bytes (what the download or the file says it holds).
    pub fn new(file_len: u64, options: &LoadOptions) -> Result<GgufStream> {
        let file_len = usize::try_from(file_len)
            .map_err(|_| Error::Gguf(format!("a file of {file_len} bytes does not fit in this address space")))?;
        let state = StreamState::Header { bytes: Vec::new(), next_try: 8 };
        Ok(GgufStream { file_len, received: 0, options: options.clone(), state, keep_header: false, header: None })
    }

    /// Keeps the file's header (a few MB: its vocabulary) for [`GgufStream::finish_keeping_header`],
    /// which a snapshot of the weights needs ([`snapshot`]).
    pub fn keep_header(self) -> GgufStream {
        GgufStream { keep_header: true, ..self }
    }

    /// The file's next bytes. An error (not GGUF, a bad header, over budget, more bytes than
    /// announced) ends the stream: it takes no more.
    pub fn push(&mut self, piece: &[u8]) -> Result<()> {
        let pushed = self.take(piece);
        if pushed.is_err() {
            self.state = StreamState::Failed;
        }
        pushed
    }

    fn take(&mut self, piece: &[u8]) -> Result<()> {
        let offset = self.received;
        self.received = offset.checked_add(piece.len()).filter(|&n| n <= self.file_len).ok_or_else(|| {
            Error::Gguf(format!("more bytes arrived than the {} the file was said to have", self.file_len))
        })?;
        match &mut self.state {
            StreamState::Failed => Err(Error::Gguf("the stream already failed; start again".into())),
            StreamState::Body(head, _) => head.fill.feed(offset, piece),
            StreamState::Header { bytes, next_try } => {
                bytes.extend_from_slice(piece);
                // The header's length is known only once it parses: try at doubling sizes, so the
                // bytes are parsed about twice over in all.
                if bytes.len() < *next_try && self.received < self.file_len {
                    return Ok(());
                }
                *next_try = bytes.len().saturating_mul(2);
                let Some(file) = GgufFile::parse_header(bytes, self.file_len)? else { return Ok(()) };
                if self.keep_header {
                    let header = bytes.get(..file.data_start()).unwrap_or(bytes).to_vec();
                    self.header = Some(snapshot::GgufHeader { bytes: header, file_len: self.file_len });
                }
                let budget = Budget::resolve(self.options.memory_budget, bytes.len() as u64)?;
                let mut head = GgufHead::plan(&file, &budget, true)?;
                warm_up_aside();
                // With no other thread, built from the header just parsed rather than parsed again.
                let built_here = (rayon::current_num_threads() < 2).then(|| tokenizer_of(&file));
                let header = Arc::new(std::mem::take(bytes));
                let tokenizer = match built_here {
                    Some(vocabulary) => Aside::Done(Box::new(vocabulary)),
                    None => build_tokenizer_aside(Arc::clone(&header), self.file_len),
                };
                head.fill.feed(0, &header)?;
                self.state = StreamState::Body(Box::new(head), tokenizer);
                Ok(())
            }
        }
    }

    /// The checkpoint, once all the file's bytes have come.
    pub fn finish(self) -> Result<Checkpoint> {
        self.finish_keeping_header().map(|(checkpoint, _)| checkpoint)
    }

    /// [`GgufStream::finish`], with the file's header when [`GgufStream::keep_header`] asked for it.
    pub fn finish_keeping_header(self) -> Result<(Checkpoint, Option<snapshot::GgufHeader>)> {
        if self.received < self.file_len {
            return Err(Error::Gguf(format!(
                "the file ended after {} of its {} bytes (truncated?)",
                self.received, self.file_len
            )));
        }
        match self.state {
            StreamState::Body(head, tokenizer) => Ok((head.finish(built(tokenizer))?, self.header)),
            // All bytes came, so the header was parsed (and said why it failed), or a push failed.
            StreamState::Header { .. } | StreamState::Failed => {
                Err(Error::Gguf("the stream failed earlier; start again".into()))
            }
        }
    }
}

/// Only the tokenizer of a model, for `gptlens tokenize`: from a `.gguf` (one with a vocabulary
/// and no tensors is enough), a `tokenizer.json`, or a folder holding either or `vocab.json` +
/// `merges.txt`. No weights are read.
#[cfg(not(target_arch = "wasm32"))]
pub fn open_tokenizer(path: &std::path::Path) -> Result<Tokenizer> {
    let budget = Budget::resolve(None, 0)?;
    let read = |p: &std::path::Path| read_bounded(p, &budget, None);
    let from_gguf = |p: &std::path::Path| {
        let bytes = read_bounded(p, &budget, Some(crate::formats::gguf::check_prefix))?;
        let file = GgufFile::parse(&bytes)?;
        match file.metadata("tokenizer.ggml.model") {
            Some(_) => Tokenizer::from_gguf(&file),
            None => Err(Error::NoTokenizer),
        }
    };
    let in_dir = |name: &str| Some(path.join(name)).filter(|p| p.is_file());
    if !path.is_dir() {
        return match path.extension().and_then(|e| e.to_str()) {
            Some("gguf") => from_gguf(path),
            _ => Tokenizer::from_tokenizer_json(&read(path)?),
        };
    }
    if let Some(json) = in_dir("tokenizer.json") {
        return Tokenizer::from_tokenizer_json(&read(&json)?);
    }
    if let (Some(vocab), Some(merges)) = (in_dir("vocab.json"), in_dir("merges.txt")) {
        return Tokenizer::from_vocab_merges(&read(&vocab)?, &read(&merges)?);
    }
    let entries = std::fs::read_dir(path).map_err(|source| Error::Io { path: path.display().to_string(), source })?;
    let gguf: Vec<_> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
        .collect();
    match gguf.as_slice() {
        [one] => from_gguf(one),
        _ => Err(Error::NoTokenizer),
    }
}

/// Checks the first bytes of a stream: `formats::gguf::check_prefix`, `formats::safetensors::check_prefix`.
#[cfg(not(target_arch = "wasm32"))]
type Sniff = fn(&[u8]) -> Result<()>;

/// Reads a file, refusing one larger than the budget before reading it. What is not a regular
/// file (a pipe, a device) has no size to check: it is read in pieces, its first bytes are shown
/// to `sniff` (which refuses what does not start like a checkpoint), and it may not give more
/// than the budget.
#[cfg(not(target_arch = "wasm32"))]
fn read_bounded(path: &std::path::Path, budget: &Budget, sniff: Option<Sniff>) -> Result<Vec<u8>> {
    use std::io::Read;
    /// Enough for a GGUF magic and version, or a safetensors header length and its first byte.
    const PREFIX: usize = 16;
    let name = path.display().to_string();
    let io = |source| Error::Io { path: name.clone(), source };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(Error::MissingFile(format!("{name} is a directory, not a model file")));
    }
    if meta.is_file() {
        budget.check_file(&name, meta.len())?;
    }
    let mut bytes = Vec::new();
    if let Some(sniff) = sniff {
        (&mut file).take(PREFIX as u64).read_to_end(&mut bytes).map_err(io)?;
        sniff(&bytes)?;
    }
    // One byte past the budget tells a stream that is too long from one that ends exactly there.
    let room = budget.bytes.saturating_sub(bytes.len() as u64).saturating_add(1);
    file.take(room).read_to_end(&mut bytes).map_err(io)?;
    budget.check_file(&name, bytes.len() as u64)?;
    Ok(bytes)
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
