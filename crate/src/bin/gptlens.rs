//! The `gptlens` command line: parse, call the library, print. No logic of its own.
//!
//! It reads files and writes to a terminal, so it exists natively only; in WebAssembly the
//! bindings are the front end. (`no_main` lets `cargo test --target wasm32-…` build it empty.)
#![cfg_attr(target_arch = "wasm32", no_main)]
#![cfg(not(target_arch = "wasm32"))]

use std::io::{ErrorKind, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use gptlens::backend::{select, BackendChoice};
use gptlens::instruments::attribution::{Attribution, LogitLens};
use gptlens::instruments::patching::{patch, PatchRequest};
use gptlens::instruments::{repeated_random_tokens, AblateWith, Ablation, HeadScores};
use gptlens::sample::{softmax_with_temperature, Sampler, SamplingParams};
use gptlens::tokenizer::Tokenizer;
use gptlens::{CaptureSpec, Checkpoint, Error, Hook, Result, Session};

#[derive(Parser)]
#[command(
    name = "gptlens",
    version,
    about = "Run a GPT and look inside: attention, layernorm statistics, next-token probabilities."
)]
struct Cli {
    /// Worker threads for the kernels (default, or 0: one per core; more than the machine has
    /// are clamped to that).
    #[arg(long, global = true)]
    threads: Option<usize>,
    /// Where the forward pass runs: `cpu`, `wgpu` (the GPU, software adapters included) or `auto`
    /// (a real GPU if there is one, else the CPU).
    #[arg(long, global = true, default_value = "cpu")]
    backend: BackendChoice,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show the tokens of a prompt and the most likely next tokens.
    Run {
        #[command(flatten)]
        input: Input,
        /// How many next-token candidates to list.
        #[arg(long, default_value_t = 10)]
        top: usize,
        /// Temperature applied to the listed probabilities.
        #[arg(long, default_value_t = 1.0)]
        temperature: f32,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Capture every hook (attention patterns, layernorm statistics, residual norms, logits), or
    /// those given, to a safetensors file named like TransformerLens hooks.
    Trace {
        #[command(flatten)]
        input: Input,
        #[arg(long)]
        out: PathBuf,
        /// Only these hooks, comma-separated (names as in the README's hook table); default: all.
        #[arg(long, value_delimiter = ',')]
        hooks: Option<Vec<String>>,
    },
    /// Sentence embeddings from an encoder (all-MiniLM-L6-v2): each text's first values, and the
    /// cosine similarity of every pair (mean-pooled final hidden states, L2-normalised).
    Embed {
        /// A model folder (config.json, model.safetensors, tokenizer.json).
        #[arg(long)]
        model: PathBuf,
        /// A text to embed; give it several times to compare them.
        #[arg(long, required = true)]
        text: Vec<String>,
        /// How many leading values of each embedding to print.
        #[arg(long, default_value_t = 8)]
        show: usize,
        /// Print {"embeddings": [{"text", "tokens", "embedding": [all values]}], "similarity": [[…]]}.
        #[arg(long)]
        json: bool,
    },
    /// Print the token ids and pieces of a text. Reads only the tokenizer: a .gguf (one holding a
    /// vocabulary and no tensors will do), a tokenizer.json, or a folder with either.
    Tokenize {
        /// A .gguf, a tokenizer.json, or a model folder.
        #[arg(long)]
        model: PathBuf,
        #[arg(long)]
        text: String,
        /// Print {"ids": [...], "pieces": [...]} instead of one token per line.
        #[arg(long)]
        json: bool,
    },
    /// Score every attention head as a previous-token, first-token, duplicate-token and induction
    /// head (definitions: `gptlens::instruments`). Default sequence: 50 seeded random ids, twice.
    Heads {
        /// A model folder, a .safetensors file with its config.json, or a .gguf file.
        #[arg(long)]
        model: PathBuf,
        /// Score on this text instead of the repeated random sequence.
        #[arg(long, conflicts_with = "tokens")]
        prompt: Option<String>,
        /// Score on these token ids, comma-separated.
        #[arg(long, value_delimiter = ',')]
        tokens: Option<Vec<u32>>,
        /// Seed of the repeated random sequence.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// How many heads to list per detector.
        #[arg(long, default_value_t = 5)]
        top: usize,
        /// Print {"tokens": [...], "previous_token": [[… per head] … per layer], "first_token",
        /// "duplicate_token", "induction"} instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Activation patching between a clean and a corrupted prompt of the same length: how much of
    /// logit[answer] − logit[wrong] at the last position each clean residual (layer × position)
    /// and each clean head output (layer × head) restores in the corrupted run (1 = all, 0 = none).
    Patch {
        /// A model folder, a .safetensors file with its config.json, or a .gguf file.
        #[arg(long)]
        model: PathBuf,
        #[arg(long, requires = "corrupt", conflicts_with_all = ["clean_tokens", "corrupt_tokens"])]
        clean: Option<String>,
        #[arg(long, requires = "clean")]
        corrupt: Option<String>,
        /// Token ids, comma-separated.
        #[arg(long, value_delimiter = ',', requires = "corrupt_tokens")]
        clean_tokens: Option<Vec<u32>>,
        #[arg(long, value_delimiter = ',', requires = "clean_tokens")]
        corrupt_tokens: Option<Vec<u32>>,
        /// The right answer: a token id, or a text that is exactly one token (e.g. " Mary").
        #[arg(long)]
        answer: String,
        /// The wrong answer the corruption favours, likewise.
        #[arg(long)]
        wrong: String,
        /// How many patches to list per sweep.
        #[arg(long, default_value_t = 8)]
        top: usize,
        /// Print {"clean_diff", "corrupt_diff", "resid_pre": [[… per position] … per layer],
        /// "heads": [[… per head] … per layer]} instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The logit lens: what each layer's residual predicts at each position (the final norm and
    /// the unembedding applied to it), with the model's own prediction as the last row.
    Lens {
        #[command(flatten)]
        input: Input,
        /// The first position shown (default: the last 8 positions).
        #[arg(long)]
        from: Option<usize>,
        /// Tokens listed per layer and position.
        #[arg(long, default_value_t = 3)]
        top: usize,
        /// Also follow this token's probability through the layers: an id or a one-token text.
        #[arg(long)]
        target: Option<String>,
        /// Print the lens as JSON (gptlens::instruments::attribution::LogitLens).
        #[arg(long)]
        json: bool,
    },
    /// Direct logit attribution: each head's and MLP's direct contribution to
    /// logit[answer] − logit[wrong] at a position (default: the last; answer and wrong default
    /// to the model's first and second choice there), the final norm's scale frozen.
    Attribute {
        #[command(flatten)]
        input: Input,
        #[arg(long)]
        position: Option<usize>,
        /// An id or a one-token text.
        #[arg(long)]
        answer: Option<String>,
        #[arg(long)]
        wrong: Option<String>,
        /// How many parts to list, largest |contribution| first.
        #[arg(long, default_value_t = 10)]
        top: usize,
        #[arg(long)]
        json: bool,
    },
    /// Train a byte-level GPT-2-style model on a text file (or continue one with --resume); writes
    /// a Hugging Face GPT-2 folder (config.json, model.safetensors) that gptlens and transformers
    /// load, plus optimizer.safetensors and training.json for resuming.
    Train(TrainArgs),
    /// Continue a prompt, printing text as it is generated.
    Generate {
        #[command(flatten)]
        input: Input,
        /// Number of tokens to generate.
        #[arg(short = 'n', long, default_value_t = 32)]
        n: usize,
        /// 0 is greedy.
        #[arg(long, default_value_t = 1.0)]
        temperature: f32,
        #[arg(long)]
        top_k: Option<usize>,
        #[arg(long)]
        top_p: Option<f32>,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Print prefill and decode speed to stderr when done.
        #[arg(long)]
        stats: bool,
    },
}

#[derive(Args)]
struct Input {
    /// A model folder (config.json + model.safetensors [+ tokenizer files]), a .safetensors file, or a .gguf file.
    #[arg(long)]
    model: PathBuf,
    /// Text to tokenize (needs tokenizer files).
    #[arg(long, conflicts_with = "tokens", required_unless_present = "tokens")]
    prompt: Option<String>,
    /// Token ids, comma-separated, e.g. 15496,11,995.
    #[arg(long, value_delimiter = ',')]
    tokens: Option<Vec<u32>>,
    /// Zero-ablate these heads and MLPs (layer.head or layer.mlp, comma-separated, e.g. 1.0,2.mlp):
    /// their outputs are zeroed before they join the residual, so every later hook and the logits
    /// run without them.
    #[arg(long)]
    ablate: Option<String>,
    /// Replace the ablated units by their mean over the prompt's positions (in the run without
    /// ablation) instead of zero.
    #[arg(long, requires = "ablate")]
    mean: bool,
}

struct Loaded {
    ckpt: Checkpoint,
    tokens: Vec<u32>,
    ablation: Ablation,
}

impl Input {
    fn load(&self) -> Result<Loaded> {
        let ckpt = open_model(&self.model)?;
        let tokens = match (&self.prompt, &self.tokens) {
            (_, Some(ids)) => ids.clone(),
            (Some(text), None) => ckpt.tokenizer()?.encode(text)?,
            (None, None) => return Err(Error::InvalidArgument("give --prompt or --tokens".into())),
        };
        let with = if self.mean { AblateWith::Mean } else { AblateWith::Zero };
        let ablation = Ablation::parse(self.ablate.as_deref().unwrap_or(""), &ckpt.model.config)?.replaced_by(with);
        Ok(Loaded { ckpt, tokens, ablation })
    }
}

/// A token given as an id, or as a text that encodes to exactly one token.
fn one_token(ckpt: &Checkpoint, given: &str) -> Result<u32> {
    if let Ok(id) = given.parse::<u32>() {
        return Ok(id);
    }
    match ckpt.tokenizer()?.encode(given)?.as_slice() {
        [id] => Ok(*id),
        ids => Err(Error::InvalidArgument(format!(
            "`{given}` is {} tokens ({ids:?}); give an id or a text that is one token",
            ids.len()
        ))),
    }
}

/// The strongest `top` entries of a `[rows][cols]` table by |value|, as `(row, col, value)`.
fn strongest(table: &[Vec<f32>], top: usize) -> Vec<(usize, usize, f32)> {
    let mut all: Vec<(usize, usize, f32)> =
        table.iter().enumerate().flat_map(|(r, row)| row.iter().enumerate().map(move |(c, &v)| (r, c, v))).collect();
    all.sort_by(|a, b| b.2.abs().total_cmp(&a.2.abs()).then((a.0, a.1).cmp(&(b.0, b.1))));
    all.truncate(top);
    all
}

fn json_text(value: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::InvalidArgument(e.to_string()))
}

/// A token's display label; the tokenizer already escapes what cannot be shown (`\n`, `\xE2`).
fn label(tokenizer: Option<&Tokenizer>, id: u32) -> String {
    tokenizer.and_then(|t| t.token_string(id).ok()).unwrap_or_else(|| format!("<{id}>"))
}

/// Why the command stopped early.
enum Failure {
    Engine(Error),
    /// Whoever read standard output went away (`gptlens run … | head -c 10`): like other Unix
    /// tools, stop quietly; there is nobody left to tell.
    ClosedOutput,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Engine(e)
    }
}

/// A failed write to standard output: quiet for a closed pipe, an error otherwise (`> /dev/full`).
fn output_error(e: std::io::Error) -> Failure {
    match e.kind() {
        ErrorKind::BrokenPipe => Failure::ClosedOutput,
        _ => Failure::Engine(Error::Write { path: "standard output".into(), source: e }),
    }
}

/// Writes a line to standard output, turning a failure into a [`Failure`] instead of the panic
/// `println!` would raise.
macro_rules! out {
    ($out:expr, $($arg:tt)*) => {
        writeln!($out, $($arg)*).map_err(output_error)?
    };
}

/// The worker threads to start: what was asked, at most what the machine offers (more threads
/// than cores only take turns, and each costs a stack; 100000 of them take a minute to fail).
fn thread_count(requested: Option<usize>) -> usize {
    let available = std::thread::available_parallelism().map_or(1, |n| n.get());
    match requested {
        None | Some(0) => available,
        Some(n) if n > available => {
            notice(&format!("--threads {n} is more than the {available} this machine offers; using {available}"));
            available
        }
        Some(n) => n,
    }
}

/// The checkpoint at `path`; says so on stderr when its context had to be cut to fit the memory
/// budget (`GPTLENS_MEMORY_BUDGET` allows more).
fn open_model(path: &std::path::Path) -> Result<Checkpoint> {
    let ckpt = Checkpoint::open(path)?;
    if let Some(cut) = &ckpt.context_cut {
        notice(&format!("note: {cut}"));
    }
    Ok(ckpt)
}

/// A line on stderr. A closed stderr is no reason to stop (or to panic, as `eprintln!` would).
fn notice(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// Runs the command in a thread pool of the requested size.
fn run(cli: Cli) -> Result<(), Failure> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(thread_count(cli.threads))
        .build()
        .map_err(|e| Error::InvalidArgument(format!("cannot start the worker threads: {e}")))?;
    pool.install(|| execute(cli.command, cli.backend))
}

/// A session for the checkpoint on the chosen backend, with `ablation`; says where it runs when
/// that was a choice.
fn session(ckpt: &Checkpoint, choice: BackendChoice, ablation: Ablation) -> Result<Session> {
    let selected = pollster::block_on(select(choice, &ckpt.model))?;
    if choice != BackendChoice::Cpu {
        notice(&format!("backend: {} ({})", selected.backend, selected.reason));
    }
    let mut session = Session::with_backend(ckpt.model.clone(), &selected.backend)?;
    session.set_ablation(ablation)?;
    Ok(session)
}

fn execute(command: Command, backend: BackendChoice) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match command {
        Command::Train(args) => train(args)?,
        Command::Tokenize { model, text, json } => {
            let tokenizer = gptlens::checkpoint::open_tokenizer(&model)?;
            let ids = tokenizer.encode(&text)?;
            let pieces: Vec<String> = ids.iter().map(|&id| label(Some(&tokenizer), id)).collect();
            if json {
                out!(stdout, "{}", serde_json::json!({ "ids": ids, "pieces": pieces }));
            } else {
                for (id, piece) in ids.iter().zip(&pieces) {
                    out!(stdout, "{id}\t{piece}");
                }
            }
        }
        Command::Embed { model, text, show, json } => {
            let ckpt = open_model(&model)?;
            let tokenizer = ckpt.tokenizer()?;
            let mut session = session(&ckpt, backend, Ablation::none())?;
            let mut embedded = Vec::with_capacity(text.len());
            for t in &text {
                let tokens = tokenizer.encode(t)?;
                let embedding = session.embed(&tokens)?;
                embedded.push((t, tokens.len(), embedding));
            }
            let similarity: Vec<Vec<f32>> = embedded
                .iter()
                .map(|(_, _, a)| embedded.iter().map(|(_, _, b)| gptlens::model::cosine(a, b)).collect())
                .collect();
            if json {
                let embeddings: Vec<_> = embedded
                    .iter()
                    .map(|(t, n, e)| serde_json::json!({"text": t, "tokens": n, "embedding": e}))
                    .collect();
                out!(stdout, "{}", serde_json::json!({ "embeddings": embeddings, "similarity": similarity }));
            } else {
                for (i, (t, n, e)) in embedded.iter().enumerate() {
                    let first: Vec<String> = e.iter().take(show).map(|x| format!("{x:+.5}")).collect();
                    out!(stdout, "[{i}] {t:?} ({n} tokens, {} dimensions): {} …", e.len(), first.join(" "));
                }
                if embedded.len() > 1 {
                    out!(stdout, "cosine similarity:");
                    for (i, row) in similarity.iter().enumerate() {
                        let cells: Vec<String> = row.iter().map(|s| format!("{s:.5}")).collect();
                        out!(stdout, "[{i}] {}", cells.join("  "));
                    }
                }
            }
        }
        Command::Run { input, top, temperature, json } => {
            let Loaded { ckpt, tokens, ablation } = input.load()?;
            if !ckpt.model.config.has_head() {
                return Err(Error::InvalidArgument(
                    "this model is an encoder: it has no next-token prediction (try `gptlens embed` or `gptlens trace`)".into(),
                )
                .into());
            }
            let tok = ckpt.tokenizer.as_ref();
            let trace = session(&ckpt, backend, ablation)?.run(&tokens, &CaptureSpec::none())?;
            let probs = softmax_with_temperature(&trace.last_logits, temperature)?;
            let mut order: Vec<usize> = (0..probs.len()).collect();
            order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
            let best = &order[..top.min(order.len())];
            if json {
                let out = serde_json::json!({
                    "tokens": tokens.iter().map(|&id| serde_json::json!({"id": id, "text": label(tok, id)})).collect::<Vec<_>>(),
                    "top": best.iter().map(|&i| serde_json::json!({"id": i, "text": label(tok, i as u32), "prob": probs[i]})).collect::<Vec<_>>(),
                });
                out!(stdout, "{out}");
            } else {
                let c = &ckpt.model.config;
                out!(
                    stdout,
                    "model: {} layers, {} heads, d_model {}, vocab {}, context {}",
                    c.n_layer,
                    c.n_head,
                    c.d_model,
                    c.vocab_size,
                    c.n_ctx
                );
                let shown: Vec<String> = tokens.iter().map(|&id| format!("{id} \"{}\"", label(tok, id))).collect();
                out!(stdout, "tokens ({}): {}", tokens.len(), shown.join(" | "));
                out!(stdout, "next token (temperature {temperature}):");
                for (rank, &i) in best.iter().enumerate() {
                    out!(
                        stdout,
                        "{:>4}. {:>7} {:<24} {:.4}",
                        rank + 1,
                        i,
                        format!("\"{}\"", label(tok, i as u32)),
                        probs[i]
                    );
                }
            }
        }
        Command::Heads { model, prompt, tokens, seed, top, json } => {
            let ckpt = open_model(&model)?;
            let config = &ckpt.model.config;
            let tokens = match (prompt, tokens) {
                (_, Some(ids)) => ids,
                (Some(text), None) => ckpt.tokenizer()?.encode(&text)?,
                (None, None) => repeated_random_tokens(config, seed),
            };
            let patterns: Vec<String> = (0..config.n_layer).map(|l| Hook::AttnPattern(l).to_string()).collect();
            let spec = CaptureSpec::from_names(&patterns, config)?;
            let trace = session(&ckpt, backend, Ablation::none())?.run(&tokens, &spec)?;
            let scores = HeadScores::from_trace(&trace, config)?;
            if json {
                let mut value = serde_json::to_value(&scores).map_err(|e| Error::InvalidArgument(e.to_string()))?;
                value["tokens"] = serde_json::json!(tokens);
                out!(stdout, "{value}");
            } else {
                out!(stdout, "{} tokens; the strongest heads (layer.head score) of each detector:", tokens.len());
                let detectors = [
                    ("previous token", &scores.previous_token),
                    ("first token", &scores.first_token),
                    ("duplicate token", &scores.duplicate_token),
                    ("induction", &scores.induction),
                ];
                for (name, by_layer) in detectors {
                    let mut heads: Vec<(usize, usize, f32)> = by_layer
                        .iter()
                        .enumerate()
                        .flat_map(|(l, row)| row.iter().enumerate().map(move |(h, &s)| (l, h, s)))
                        .collect();
                    heads.sort_by(|a, b| b.2.total_cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))));
                    let best: Vec<String> = heads.iter().take(top).map(|(l, h, s)| format!("{l}.{h} {s:.3}")).collect();
                    out!(stdout, "{name:>16}: {}", best.join("  "));
                }
            }
        }
        Command::Trace { input, out, hooks } => {
            let Loaded { ckpt, tokens, ablation } = input.load()?;
            let config = &ckpt.model.config;
            let spec = match hooks {
                Some(names) => CaptureSpec::from_names(&names, config)?,
                None => CaptureSpec::standard(config),
            };
            let trace = session(&ckpt, backend, ablation)?.run(&tokens, &spec)?;
            let bytes = trace.to_safetensors()?;
            // A failure here is a write error (a full disk, `--out /dev/full`), and says so.
            std::fs::write(&out, &bytes).map_err(|source| Error::Write { path: out.display().to_string(), source })?;
            out!(
                stdout,
                "wrote {} tensors for {} tokens to {} ({} bytes)",
                trace.tensors.len() + 1,
                tokens.len(),
                out.display(),
                bytes.len()
            );
        }
        Command::Patch { model, clean, corrupt, clean_tokens, corrupt_tokens, answer, wrong, top, json } => {
            let ckpt = open_model(&model)?;
            let (clean, corrupt) = match (clean, corrupt, clean_tokens, corrupt_tokens) {
                (_, _, Some(a), Some(b)) => (a, b),
                (Some(a), Some(b), _, _) => (ckpt.tokenizer()?.encode(&a)?, ckpt.tokenizer()?.encode(&b)?),
                _ => {
                    return Err(Error::InvalidArgument(
                        "give --clean and --corrupt, or --clean-tokens and --corrupt-tokens".into(),
                    )
                    .into())
                }
            };
            let (answer, wrong) = (one_token(&ckpt, &answer)?, one_token(&ckpt, &wrong)?);
            let request = PatchRequest { clean: &clean, corrupt: &corrupt, answer, wrong };
            let show_progress = std::io::stderr().is_terminal();
            let scores = patch(&ckpt.model, &request, &mut |done, total| {
                if show_progress {
                    eprint!("\rpatching: {done}/{total} runs");
                }
                true
            })?;
            if show_progress {
                eprintln!();
            }
            if json {
                out!(stdout, "{}", json_text(&scores)?);
            } else {
                let tok = ckpt.tokenizer.as_ref();
                out!(
                    stdout,
                    "logit[{}] − logit[{}]: clean {:.4}, corrupted {:.4}; patch scores (1 = restores the clean difference):",
                    label(tok, answer),
                    label(tok, wrong),
                    scores.clean_diff,
                    scores.corrupt_diff
                );
                let at = |t: usize| format!("{t} \"{}\"", label(tok, clean[t]));
                let resid: Vec<String> = strongest(&scores.resid_pre, top)
                    .iter()
                    .map(|(l, t, s)| format!("L{l} @ {} {s:.3}", at(*t)))
                    .collect();
                out!(stdout, "  resid_pre (layer @ position): {}", resid.join(", "));
                let heads: Vec<String> =
                    strongest(&scores.heads, top).iter().map(|(l, h, s)| format!("{l}.{h} {s:.3}")).collect();
                out!(stdout, "  heads (layer.head): {}", heads.join(", "));
            }
        }
        Command::Lens { input, from, top, target, json } => {
            let Loaded { ckpt, tokens, ablation } = input.load()?;
            let target = target.map(|t| one_token(&ckpt, &t)).transpose()?;
            let first = from.unwrap_or(tokens.len().saturating_sub(8));
            let lens = LogitLens::compute(&ckpt.model, &ablation, &tokens, first, top, target, &mut |_, _| true)?;
            if json {
                out!(stdout, "{}", json_text(&lens)?);
            } else {
                let tok = ckpt.tokenizer.as_ref();
                let cell = |s: String| format!("{:<14}", s.chars().take(13).collect::<String>());
                let header: String =
                    tokens[first..].iter().map(|&id| cell(format!("\"{}\"", label(tok, id)))).collect();
                out!(stdout, "layer  {header}");
                for (layer, row) in lens.top.iter().enumerate() {
                    let name = if layer == lens.top.len() - 1 { "out".to_string() } else { layer.to_string() };
                    let cells: String = row
                        .iter()
                        .map(|best| {
                            best.first().map_or(String::new(), |&(id, p)| format!("{} {:.2}", label(tok, id), p))
                        })
                        .map(cell)
                        .collect();
                    out!(stdout, "{name:>5}  {cells}");
                }
                if let (Some(id), Some(probs)) = (lens.target, &lens.target_prob) {
                    let last: Vec<String> =
                        probs.iter().map(|row| format!("{:.3}", row.last().copied().unwrap_or(0.0))).collect();
                    out!(stdout, "p(\"{}\") at the last position, layer by layer: {}", label(tok, id), last.join(" "));
                }
            }
        }
        Command::Attribute { input, position, answer, wrong, top, json } => {
            let Loaded { ckpt, tokens, ablation } = input.load()?;
            let answer = answer.map(|t| one_token(&ckpt, &t)).transpose()?;
            let wrong = wrong.map(|t| one_token(&ckpt, &t)).transpose()?;
            let a = Attribution::compute(&ckpt.model, &ablation, &tokens, position, answer, wrong)?;
            if json {
                out!(stdout, "{}", json_text(&a)?);
            } else {
                let tok = ckpt.tokenizer.as_ref();
                out!(
                    stdout,
                    "position {}: logit[{}] − logit[{}] = {:.4} (the parts sum to {:.4})",
                    a.position,
                    label(tok, a.answer),
                    label(tok, a.wrong),
                    a.logit_diff,
                    a.total
                );
                let mut parts: Vec<(String, f32)> = vec![
                    ("embed".into(), a.embed),
                    ("pos_embed".into(), a.pos_embed),
                    ("final norm bias".into(), a.final_bias),
                ];
                for (l, row) in a.heads.iter().enumerate() {
                    parts.extend(row.iter().enumerate().map(|(h, &v)| (format!("head {l}.{h}"), v)));
                    parts.push((format!("attn bias {l}"), a.attn_bias[l]));
                    parts.push((format!("mlp {l}"), a.mlps[l]));
                }
                parts.sort_by(|x, y| y.1.abs().total_cmp(&x.1.abs()));
                for (name, v) in parts.iter().take(top) {
                    out!(stdout, "{name:>16} {v:+.4}");
                }
            }
        }
        Command::Generate { input, n, temperature, top_k, top_p, seed, stats } => {
            let Loaded { ckpt, tokens, ablation } = input.load()?;
            let tok = ckpt.tokenizer.as_ref();
            let mut sampler = Sampler::new(SamplingParams { temperature, top_k, top_p }, seed)?;
            let n_ctx = ckpt.model.config.n_ctx;
            if tokens.len().checked_add(n).is_none_or(|total| total > n_ctx) {
                return Err(Error::InvalidArgument(format!(
                    "-n {n}: the prompt's {} tokens and {n} new ones do not fit in the model's context of {n_ctx} \
                     tokens (at most {} new tokens)",
                    tokens.len(),
                    n_ctx.saturating_sub(tokens.len())
                ))
                .into());
            }
            let eos = ckpt.model.config.eos_token_id.or_else(|| tok.and_then(|t| t.token_id("<|endoftext|>")));
            let mut printer = StreamPrinter::default();
            if let Some(t) = tok {
                printer.push(&mut stdout, &t.decode_bytes(&tokens)?).map_err(output_error)?;
            }
            let mut session = session(&ckpt, backend, ablation)?;
            let mut failed: Option<Failure> = None;
            // The first token is sampled right after the prompt's forward pass: that call marks
            // the end of prefill; each later one follows one decode step.
            let start = std::time::Instant::now();
            let mut first_token_at = None;
            let generated = session.generate(&tokens, n, &mut sampler, eos, |id| {
                first_token_at.get_or_insert_with(std::time::Instant::now);
                let bytes = match tok {
                    Some(t) => t.decode_bytes(&[id]),
                    None => Ok(format!("<{id}>").into_bytes()),
                };
                // A closed or full standard output stops the generation: nobody sees the rest.
                match bytes.map_err(Failure::from).and_then(|b| printer.push(&mut stdout, &b).map_err(output_error)) {
                    Ok(()) => {}
                    Err(e) => failed = Some(e),
                }
                failed.is_none()
            })?;
            if let Some(e) = failed {
                return Err(e);
            }
            printer.finish(&mut stdout).map_err(output_error)?;
            if let (true, Some(t1)) = (stats, first_token_at) {
                let prefill = (t1 - start).as_secs_f64();
                let steps = generated.len().saturating_sub(1);
                let decode = t1.elapsed().as_secs_f64();
                notice(&format!(
                    "prefill: {} tokens in {:.1} ms ({:.1} tok/s); decode: {steps} tokens in {:.1} ms ({:.1} tok/s); threads: {}; backend: {}",
                    tokens.len(),
                    prefill * 1e3,
                    tokens.len() as f64 / prefill,
                    decode * 1e3,
                    steps as f64 / decode.max(1e-9),
                    rayon::current_num_threads(),
                    session.backend_name()
                ));
            }
        }
    }
    Ok(())
}

/// Prints bytes as UTF-8 text as soon as they form complete characters (a token may end halfway
/// through one).
#[derive(Default)]
struct StreamPrinter {
    pending: Vec<u8>,
}

impl StreamPrinter {
    fn push(&mut self, out: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
        self.pending.extend_from_slice(bytes);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(s) => s.len(),
            // An incomplete character at the end waits; an invalid one is printed as U+FFFD.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.pending.len(),
        };
        write!(out, "{}", String::from_utf8_lossy(&self.pending[..valid]))?;
        out.flush()?;
        self.pending.drain(..valid);
        Ok(())
    }

    fn finish(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(out, "{}", String::from_utf8_lossy(&self.pending))?;
        self.pending.clear();
        out.flush()
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        // Whatever is still buffered must reach the reader, or the failure be reported.
        Ok(()) => match std::io::stdout().flush() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(e) => {
                notice(&format!("error: cannot write standard output: {e}"));
                ExitCode::FAILURE
            }
        },
        Err(Failure::ClosedOutput) => ExitCode::SUCCESS,
        Err(Failure::Engine(e)) => {
            notice(&format!("error: {e}"));
            ExitCode::FAILURE
        }
    }
}

#[derive(Args)]
struct TrainArgs {
    /// The text to learn, byte by byte (the last --val-fraction is held out for validation).
    #[arg(long)]
    data: PathBuf,
    /// The model folder to write (and, with --resume, to continue from).
    #[arg(long)]
    out: PathBuf,
    /// Continue the run saved in --out (its shape and recipe; --steps may extend it).
    #[arg(long)]
    resume: bool,
    /// A JSON file {"shape": {…}, "recipe": {…}} with any of the settings below (flags win).
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long)]
    layers: Option<usize>,
    #[arg(long)]
    heads: Option<usize>,
    /// Width of the residual stream (d_model).
    #[arg(long)]
    width: Option<usize>,
    /// Positions per sequence (the block size).
    #[arg(long)]
    context: Option<usize>,
    /// Sinusoidal positions instead of a learned table.
    #[arg(long)]
    sinusoidal: bool,
    #[arg(long)]
    steps: Option<usize>,
    /// Sequences per step.
    #[arg(long)]
    batch: Option<usize>,
    #[arg(long)]
    lr: Option<f32>,
    #[arg(long)]
    min_lr: Option<f32>,
    #[arg(long)]
    warmup: Option<usize>,
    #[arg(long)]
    weight_decay: Option<f32>,
    /// Clip the gradient norm to this; 0 turns clipping off.
    #[arg(long)]
    clip: Option<f32>,
    /// Dropout probability while training (nanoGPT's places; never at evaluation).
    #[arg(long)]
    dropout: Option<f32>,
    #[arg(long)]
    eval_every: Option<usize>,
    #[arg(long)]
    eval_batches: Option<usize>,
    #[arg(long, default_value_t = 0.1)]
    val_fraction: f32,
    #[arg(long)]
    seed: Option<u64>,
    /// Write the folder every this many steps (and at the end).
    #[arg(long, default_value_t = 500)]
    save_every: usize,
    /// Stop (and save) after this step, keeping the schedule of --steps: continue with --resume.
    #[arg(long)]
    stop_at: Option<usize>,
}

/// What `training.json` holds: everything a resumed run needs besides the weights and moments.
#[derive(serde::Serialize, serde::Deserialize)]
struct TrainingFile {
    shape: gptlens::train::recipe::Shape,
    recipe: gptlens::train::recipe::Recipe,
    val_fraction: f32,
    state: gptlens::train::recipe::RunState,
    /// Seconds spent training, over every resumed part.
    #[serde(default)]
    seconds: f64,
    /// The loss over the whole validation part (`recipe::held_out_loss`), once the run is complete.
    #[serde(default)]
    held_out_loss: Option<f32>,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Result<T> {
    let bytes =
        std::fs::read(path).map_err(|e| Error::InvalidArgument(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::InvalidArgument(format!("{}: {e}", path.display())))
}

fn train(a: TrainArgs) -> Result<()> {
    use gptlens::train::recipe::{self, Corpus, Recipe, RunState, Shape};
    use gptlens::train::Trainer;
    let saved = a.out.join("training.json");
    // Settings: the saved run's when resuming, else the --config file's, else nanoGPT's
    // character-level Shakespeare; flags override either.
    #[derive(serde::Deserialize, Default)]
    struct Partial {
        shape: Option<Shape>,
        recipe: Option<Recipe>,
    }
    let (base, mut state, val_fraction, seconds_before) = if a.resume {
        let file: TrainingFile = read_json(&saved)?;
        (Partial { shape: Some(file.shape), recipe: Some(file.recipe) }, file.state, file.val_fraction, file.seconds)
    } else {
        let partial = a.config.as_deref().map(read_json::<Partial>).transpose()?.unwrap_or_default();
        (partial, RunState::default(), a.val_fraction, 0.0)
    };
    let mut shape = base.shape.unwrap_or(Shape { n_layer: 4, n_head: 4, d_model: 128, n_ctx: 64, sinusoidal: false });
    let mut r = base.recipe.unwrap_or_default();
    if !a.resume {
        shape.n_layer = a.layers.unwrap_or(shape.n_layer);
        shape.n_head = a.heads.unwrap_or(shape.n_head);
        shape.d_model = a.width.unwrap_or(shape.d_model);
        shape.n_ctx = a.context.unwrap_or(shape.n_ctx);
        shape.sinusoidal |= a.sinusoidal;
    }
    r.steps = a.steps.unwrap_or(r.steps);
    r.batch = a.batch.unwrap_or(r.batch);
    r.lr = a.lr.unwrap_or(r.lr);
    r.min_lr = a.min_lr.unwrap_or(r.min_lr);
    r.warmup = a.warmup.unwrap_or(r.warmup);
    r.adamw.weight_decay = a.weight_decay.unwrap_or(r.adamw.weight_decay);
    r.clip = a.clip.map_or(r.clip, |c| (c > 0.0).then_some(c));
    r.dropout = a.dropout.unwrap_or(r.dropout);
    r.eval_every = a.eval_every.unwrap_or(r.eval_every);
    r.eval_batches = a.eval_batches.unwrap_or(r.eval_batches);
    r.seed = a.seed.unwrap_or(r.seed);
    let config = shape.config()?;
    let bytes = read_text(&a.data)?;
    let corpus = Corpus::from_bytes(&bytes, val_fraction, config.n_ctx)?;
    let mut trainer = if a.resume {
        let mut trainer = Trainer::from_model(&open_model(&a.out)?.model)?;
        let optimizer = std::fs::read(a.out.join("optimizer.safetensors"))
            .map_err(|e| Error::InvalidArgument(format!("cannot read the optimizer state: {e}")))?;
        trainer.restore_optimizer(&optimizer)?;
        trainer
    } else {
        Trainer::new_random(&config, r.seed)?
    };
    std::fs::create_dir_all(&a.out).map_err(|source| Error::Write { path: a.out.display().to_string(), source })?;
    notice(&format!(
        "training {} layers × {} heads, width {}, context {} ({} parameters) on {} bytes ({} held out), {} steps of {} × {} bytes",
        shape.n_layer,
        shape.n_head,
        shape.d_model,
        shape.n_ctx,
        trainer.layout().len,
        corpus.train.len(),
        corpus.val.len(),
        r.steps,
        r.batch,
        shape.n_ctx
    ));
    let clock = std::time::Instant::now();
    let now = || clock.elapsed().as_secs_f64();
    let save = |trainer: &Trainer, state: &RunState, held_out_loss: Option<f32>| -> Result<()> {
        let write = |name: &str, bytes: &[u8]| {
            let path = a.out.join(name);
            std::fs::write(&path, bytes).map_err(|source| Error::Write { path: path.display().to_string(), source })
        };
        write("config.json", trainer.config_json().as_bytes())?;
        write("model.safetensors", &trainer.to_safetensors()?)?;
        write("optimizer.safetensors", &trainer.optimizer_state()?)?;
        let seconds = seconds_before + now();
        let file = TrainingFile { shape, recipe: r, val_fraction, state: state.clone(), seconds, held_out_loss };
        write("training.json", serde_json::to_string(&file).unwrap_or_default().as_bytes())
    };
    let report_every = (r.steps / 100).max(1);
    let save_every = a.save_every.max(1);
    let first_step = state.step;
    let mut on_step = |p: &recipe::Progress| {
        if p.step.is_multiple_of(report_every) || p.val_loss.is_some() {
            // This invocation's pace (a `run` call's own figures restart at every save).
            let remaining = (p.steps - p.step) as f64 * now() / (p.step - first_step).max(1) as f64;
            let val = p.val_loss.map_or(String::new(), |v| format!(" · val {v:.4}"));
            notice(&format!(
                "step {}/{} · loss {:.4}{val} · lr {:.2e} · {:.0} tok/s · ETA {:.0} s",
                p.step, p.steps, p.loss, p.lr, p.tokens_per_second, remaining
            ));
        }
        // Stop at each save point; the loop below saves and goes on.
        !p.step.is_multiple_of(save_every) && Some(p.step) != a.stop_at
    };
    let last = a.stop_at.unwrap_or(r.steps).min(r.steps);
    let mut held_out_loss = None;
    while state.step < last {
        recipe::run(&mut trainer, &corpus, &r, &mut state, &now, &mut on_step)?;
        // A complete run is measured on the whole validation part before its last save.
        if state.step == r.steps && !corpus.val.is_empty() {
            held_out_loss =
                Some(gptlens::kernels::pool::run_as_team(|| recipe::held_out_loss(&mut trainer, &corpus, r.batch))?);
        }
        save(&trainer, &state, held_out_loss)?;
    }
    let held_out =
        held_out_loss.map_or(String::new(), |loss| format!(", the whole validation part {loss:.4} nats/byte"));
    notice(&format!(
        "wrote {} (final loss {:.4}{}{held_out})",
        a.out.display(),
        state.losses.last().copied().unwrap_or(f32::NAN),
        state.val_losses.last().map_or(String::new(), |(_, v)| format!(", validation {v:.4}"))
    ));
    Ok(())
}

/// The training text, refused past 1 GiB (a byte-level corpus that large is a mistake here).
fn read_text(path: &std::path::Path) -> Result<Vec<u8>> {
    const MAX: u64 = 1 << 30;
    let cannot = |e: std::io::Error| Error::InvalidArgument(format!("cannot read {}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(cannot)?;
    if !meta.is_file() || meta.len() > MAX {
        return Err(Error::InvalidArgument(format!("{} is not a text file of at most 1 GiB", path.display())));
    }
    std::fs::read(path).map_err(cannot)
}
