//! `npm run bench:gpu`, native half: whole forward passes on the GPU backend next to the CPU path,
//! then each GPU kernel's time with a roofline judgement against named real GPUs.
//!
//! ```sh
//! cargo run --release --example bench_gpu -- [--reps 5] [--gpu-reps 2] [--gpt2-gpu-reps 1] [--decode 16] [--gpu-decode 4] …
//! ```
//!
//! Two models: SmolLM2-135M Q4_1 (`assets/models/`, skipped with a reason when absent) and a
//! GPT-2-small shape with random f32 weights (as `benches/forward.rs`). For each, capture off:
//!
//! 1. **Whole passes**: a 64-token prefill, then decode steps one token at a time, on the GPU
//!    (any adapter, software included: here Mesa's lavapipe) and on the CPU with 1 and 2 threads
//!    (a rayon pool of that size, like the CLI's `--threads`). One untimed warm-up each, then
//!    `--reps` rounds of CPU 1, CPU 2 runs, `--gpu-reps` of them (spread evenly) led by a GPU run,
//!    reading the 1-minute load average before every run. Medians with min–max. The defaults keep
//!    the whole bench near 5 minutes on lavapipe with 2 cores, where a 64-token prefill takes
//!    ~35 s: 2 GPU runs of SmolLM2 and 1 of GPT-2 small, 4 decode steps per GPU run (16 on the
//!    CPU), one profiled pass of each kind.
//! 2. **Kernels**: profiled prefill and decode passes (`GpuPass::set_profiling`: one timestamp
//!    pair per dispatch), summed by kernel type: time, share of the pass, achieved GB/s and
//!    GFLOP/s from each dispatch's least traffic and arithmetic (`KernelTime::bytes`, `flops`).
//!    Then the roofline: for each GPU of [`GPUS`], the time the kernel would take at that GPU's
//!    bound, `max(bytes / bandwidth, flops / peak)`, and the share of that GPU's bandwidth the
//!    measured time would mean. On a real GPU, run it and compare the measured column with the
//!    ideal one of the same (or a similar) GPU; `--peak NAME,GB/s,GFLOP/s` adds one. Without
//!    timestamp queries the adapter gets whole-pass times only, and the report says so.
//!
//! Prints the tables and writes them to `tests/output/bench-gpu.md`. A benchmark, never a test: it
//! asserts nothing about time.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use gptlens::backend::{select, Backend, BackendChoice};
use gptlens::gpu::KernelTime;
use gptlens::model::{Config, Weights};
use gptlens::{CaptureSpec, Checkpoint, Model, Session};

/// A real GPU's published peaks: memory bandwidth and f32 (non-tensor-core) throughput.
struct Peak {
    name: &'static str,
    /// Substrings of an adapter name that mean this GPU (lowercase).
    matches: &'static [&'static str],
    gb_per_s: f64,
    gflop_per_s: f64,
    source: &'static str,
}

/// Published spec figures (boost clocks for the FLOP rates: an f32 FMA is 2 FLOPs per lane per clock).
const GPUS: &[Peak] = &[
    Peak {
        name: "Intel Iris Xe (96 EU)",
        matches: &["iris(r) xe", "iris xe"],
        gb_per_s: 68.3,
        gflop_per_s: 1997.0,
        source: "Intel ARK, Core i7-1165G7: 96 EU at 1.30 GHz max (96 × 8 lanes × 2 × 1.30 GHz); LPDDR4x-4266, 2 × 64-bit = 68.3 GB/s",
    },
    Peak {
        name: "Apple M2 (10-core GPU)",
        matches: &["apple m2"],
        gb_per_s: 100.0,
        gflop_per_s: 3600.0,
        source: "Apple newsroom, \"Apple unveils M2\" (June 2022): 100 GB/s unified memory bandwidth, up to 3.6 TFLOPS",
    },
    Peak {
        name: "NVIDIA T4",
        matches: &["tesla t4", "nvidia t4"],
        gb_per_s: 320.0,
        gflop_per_s: 8100.0,
        source: "NVIDIA T4 datasheet: 320 GB/s GDDR6, 8.1 TFLOPS FP32",
    },
    Peak {
        name: "NVIDIA RTX 3060 (12 GB)",
        matches: &["rtx 3060"],
        gb_per_s: 360.0,
        gflop_per_s: 12740.0,
        source: "NVIDIA GeForce RTX 3060 specs: 15 Gbps × 192-bit = 360 GB/s; 3584 CUDA cores at 1.777 GHz boost = 12.74 TFLOPS",
    },
    Peak {
        name: "NVIDIA RTX 4090",
        matches: &["rtx 4090"],
        gb_per_s: 1008.0,
        gflop_per_s: 82580.0,
        source: "NVIDIA Ada GPU architecture whitepaper: 21 Gbps × 384-bit = 1008 GB/s; 16384 CUDA cores at 2.52 GHz = 82.6 TFLOPS",
    },
];

#[derive(Parser)]
#[command(about = "GPU backend vs CPU: whole passes and a roofline table per kernel (npm run bench:gpu)")]
struct Args {
    /// Timed rounds per model (each: a CPU run per thread count, some led by a GPU run).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Timed GPU runs of SmolLM2, spread over the rounds (a software adapter is slow).
    #[arg(long, default_value_t = 2)]
    gpu_reps: usize,
    /// Timed GPU runs of GPT-2 small (on lavapipe a prefill of it takes over half a minute).
    #[arg(long, default_value_t = 1)]
    gpt2_gpu_reps: usize,
    /// Prompt tokens of the prefill.
    #[arg(long, default_value_t = 64)]
    prompt: usize,
    /// Decode steps after the prefill on the CPU.
    #[arg(long, default_value_t = 16)]
    decode: usize,
    /// Decode steps after the prefill on the GPU (ms per token is their mean).
    #[arg(long, default_value_t = 4)]
    gpu_decode: usize,
    /// Profiled prefill + decode passes per model (the kernel table takes each kernel's median).
    #[arg(long, default_value_t = 1)]
    profile_reps: usize,
    /// CPU thread counts to compare with.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// The SmolLM2 GGUF.
    #[arg(long, default_value = "assets/models/SmolLM2-135M-Instruct.Q4_1.gguf")]
    smollm: PathBuf,
    /// Which models: smollm2, gpt2 (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "smollm2,gpt2")]
    models: Vec<String>,
    /// Another GPU for the roofline: `NAME,GB/s,GFLOP/s` (repeatable).
    #[arg(long)]
    peak: Vec<String>,
    /// The markdown report.
    #[arg(long, default_value = "tests/output/bench-gpu.md")]
    out: PathBuf,
}

/// The repository root (relative paths are taken from there, wherever cargo runs the example).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Mesa wants a runtime directory; give it a private one for this run (removed at the end).
struct RuntimeDir(Option<PathBuf>);

impl RuntimeDir {
    fn make() -> RuntimeDir {
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            let dir = std::env::temp_dir().join(format!("gptlens-bench-gpu-{}", std::process::id()));
            if std::fs::DirBuilder::new().mode(0o700).create(&dir).is_ok() {
                // Before any thread exists: nothing else reads the environment concurrently.
                std::env::set_var("XDG_RUNTIME_DIR", &dir);
                return RuntimeDir(Some(dir));
            }
        }
        RuntimeDir(None)
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn gpt2_small() -> Arc<Model> {
    let config = Config::gpt2_small();
    Arc::new(Model { weights: Weights::random(&config, 1), config })
}

/// One timed run: a prefill and the decode steps after it.
#[derive(Clone, Copy)]
struct Run {
    prefill_s: f64,
    /// Mean seconds per decode step.
    step_s: f64,
    load: f64,
}

/// Where a run goes.
enum Runner {
    Gpu(Session),
    Cpu(usize, rayon::ThreadPool, Session),
}

impl Runner {
    fn label(&self) -> String {
        match self {
            Runner::Gpu(_) => "GPU".into(),
            Runner::Cpu(t, ..) => format!("CPU {t} thread{}", if *t == 1 { "" } else { "s" }),
        }
    }

    fn run(&mut self, prompt: &[u32], decode: &[u32]) -> gptlens::Result<Run> {
        let load = load_average();
        let once = |s: &mut Session| -> gptlens::Result<Run> {
            s.reset();
            let t = Instant::now();
            s.run(prompt, &CaptureSpec::none())?;
            let prefill_s = t.elapsed().as_secs_f64();
            let t = Instant::now();
            for &tok in decode {
                s.step(tok)?;
            }
            let step_s = t.elapsed().as_secs_f64() / decode.len().max(1) as f64;
            Ok(Run { prefill_s, step_s, load })
        };
        match self {
            Runner::Gpu(s) => once(s),
            Runner::Cpu(_, pool, s) => pool.install(|| once(s)),
        }
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn min_max(values: &[f64]) -> (f64, f64) {
    values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)))
}

/// A markdown table padded to line up in a terminal too. `right[i]`: right-align column i.
fn table(header: &[&str], rows: &[Vec<String>], right: &[bool]) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).chain([header[i].chars().count()]).max().unwrap_or(0))
        .collect();
    let is_right = |i: usize| right.get(i).copied().unwrap_or(false);
    let pad = |s: &str, i: usize| {
        let fill = " ".repeat(widths[i] - s.chars().count());
        if is_right(i) {
            format!("{fill}{s}")
        } else {
            format!("{s}{fill}")
        }
    };
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    let mut out = line(header.iter().enumerate().map(|(i, h)| pad(h, i)).collect());
    let rule: Vec<String> = widths
        .iter()
        .enumerate()
        .map(|(i, w)| if is_right(i) { format!("{}:", "-".repeat(w + 1)) } else { "-".repeat(w + 2) })
        .collect();
    out += &format!("|{}|\n", rule.join("|"));
    for r in rows {
        out += &line(r.iter().enumerate().map(|(i, c)| pad(c, i)).collect());
    }
    out
}

/// Kernel times of one pass summed by kernel type (the LM head's matmul apart from the blocks').
#[derive(Clone, Default)]
struct Group {
    dispatches: usize,
    seconds: f64,
    bytes: u64,
    flops: u64,
}

fn group_key(k: &KernelTime) -> String {
    if k.what.contains("Logits") {
        format!("{} LM head", k.kernel)
    } else {
        k.kernel.clone()
    }
}

fn group(profile: &[KernelTime]) -> Vec<(String, Group)> {
    let mut groups: Vec<(String, Group)> = Vec::new();
    for k in profile {
        let key = group_key(k);
        let at = match groups.iter().position(|(g, _)| *g == key) {
            Some(i) => i,
            None => {
                groups.push((key, Group::default()));
                groups.len() - 1
            }
        };
        let g = &mut groups[at].1;
        g.dispatches += 1;
        g.seconds += k.seconds;
        g.bytes += k.bytes;
        g.flops += k.flops;
    }
    groups
}

fn ms(s: f64) -> String {
    let m = s * 1e3;
    if m >= 100.0 {
        format!("{m:.0}")
    } else if m >= 10.0 {
        format!("{m:.1}")
    } else if m >= 0.1 {
        format!("{m:.2}")
    } else {
        format!("{m:.3}")
    }
}

fn num(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn pct(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0} %")
    } else if x >= 1.0 {
        format!("{x:.1} %")
    } else {
        format!("{x:.2} %")
    }
}

/// The ideal time at a GPU's bound, and which bound: `m` memory, `c` compute.
fn ideal(g: &Group, p: &Peak) -> (f64, char) {
    let mem = g.bytes as f64 / (p.gb_per_s * 1e9);
    let math = g.flops as f64 / (p.gflop_per_s * 1e9);
    if mem >= math {
        (mem, 'm')
    } else {
        (math, 'c')
    }
}

/// Everything printed, also kept for the markdown report.
#[derive(Default)]
struct Report {
    text: String,
}

impl Report {
    fn say(&mut self, s: &str) {
        println!("{s}");
        self.text += s;
        self.text += "\n";
    }
}

struct Bench<'a> {
    args: &'a Args,
    gpus: &'a [Peak],
    report: Report,
    started: Instant,
    /// One line per model and runner for the summary.
    summary: Vec<Vec<String>>,
    /// The adapter's name, lowercase, to mark the GPU of [`GPUS`] it is.
    adapter: Option<String>,
}

impl Bench<'_> {
    fn model(&mut self, title: &str, model: Arc<Model>, gpu_reps: usize) -> gptlens::Result<()> {
        let a = self.args;
        let c = &model.config;
        let vocab = c.vocab_size as u32;
        let prompt: Vec<u32> = (0..a.prompt as u32).map(|i| (i * 7919) % vocab).collect();
        let decode: Vec<u32> =
            (0..a.decode.max(a.gpu_decode) as u32).map(|i| ((a.prompt as u32 + i) * 7919) % vocab).collect();
        let gpu_reps = gpu_reps.min(a.reps);
        self.report.say(&format!(
            "\n## {title}\n\n{} layers, d_model {}, {} heads ({} KV), d_ff {}, vocab {}. Capture off; prefill {} tokens, then decode steps one token at a time ({} on the CPU, {} on the GPU); {} rounds on the CPU, {} of them with a GPU run too.",
            c.n_layer, c.d_model, c.n_head, c.n_kv_head, c.d_ff, c.vocab_size, a.prompt, a.decode, a.gpu_decode, a.reps, gpu_reps
        ));

        let t = Instant::now();
        let selected = pollster::block_on(select(BackendChoice::Gpu, &model));
        let mut runners = Vec::new();
        let mut gpu_note = None;
        match selected {
            Ok(sel) => {
                let weights = match &sel.backend {
                    Backend::Gpu(m) => format!("{:.1} MB of weights on the device", m.weight_bytes() as f64 / 1e6),
                    Backend::Cpu => String::new(),
                };
                self.report.say(&format!(
                    "\nGPU: {} — {weights}, uploaded and compiled in {:.1} s.",
                    sel.reason,
                    t.elapsed().as_secs_f64()
                ));
                if let Some(info) = &sel.adapter {
                    self.adapter = Some(info.name.to_lowercase());
                    self.report.say(&format!(
                        "Adapter: {} ({}, {}, {}; driver {}), largest storage binding {} MB.",
                        info.name,
                        info.vendor,
                        info.backend,
                        info.device_type,
                        info.driver,
                        info.max_storage_buffer_binding_size >> 20
                    ));
                }
                runners.push(Runner::Gpu(Session::with_backend(Arc::clone(&model), &sel.backend)?));
            }
            Err(e) => {
                let why = format!("No GPU run: {e}");
                self.report.say(&format!("\n{why}"));
                gpu_note = Some(why);
            }
        }
        for &threads in &a.threads {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .map_err(|e| gptlens::Error::InvalidArgument(format!("cannot start {threads} threads: {e}")))?;
            runners.push(Runner::Cpu(threads, pool, Session::new(Arc::clone(&model))));
        }

        // Warm-up (untimed): a whole run on the CPU; on the GPU a 1-token pass (every buffer and
        // pipeline is made before the first pass; this only touches them once, and a software
        // adapter takes seconds per token).
        for r in &mut runners {
            match r {
                Runner::Gpu(_) => r.run(&prompt[..1], &[])?,
                Runner::Cpu(..) => r.run(&prompt, &decode[..a.decode])?,
            };
        }
        let mut runs: Vec<Vec<Run>> = vec![Vec::new(); runners.len()];
        let mut log = Vec::new();
        for round in 0..a.reps {
            // The GPU's runs spread evenly over the rounds.
            let gpu_round = (round + 1) * gpu_reps / a.reps > round * gpu_reps / a.reps;
            for (i, r) in runners.iter_mut().enumerate() {
                let steps = match r {
                    Runner::Gpu(_) if !gpu_round => continue,
                    Runner::Gpu(_) => a.gpu_decode,
                    Runner::Cpu(..) => a.decode,
                };
                let run = r.run(&prompt, &decode[..steps])?;
                log.push(vec![
                    (round + 1).to_string(),
                    r.label(),
                    format!("{:.2}", run.load),
                    ms(run.prefill_s),
                    ms(run.step_s),
                ]);
                runs[i].push(run);
            }
        }

        let mut rows = Vec::new();
        for (r, runs) in runners.iter().zip(&runs) {
            let pre: Vec<f64> = runs.iter().map(|x| x.prefill_s).collect();
            let step: Vec<f64> = runs.iter().map(|x| x.step_s).collect();
            let loads: Vec<f64> = runs.iter().map(|x| x.load).collect();
            let (p0, p1) = min_max(&pre);
            let (s0, s1) = min_max(&step);
            let (l0, l1) = min_max(&loads);
            let n = a.prompt as f64;
            let row = vec![
                r.label(),
                runs.len().to_string(),
                format!("{} ({}–{})", ms(median(&pre)), ms(p0), ms(p1)),
                format!("{} ({}–{})", num(n / median(&pre)), num(n / p1), num(n / p0)),
                format!("{} ({}–{})", ms(median(&step)), ms(s0), ms(s1)),
                format!("{} ({}–{})", num(1.0 / median(&step)), num(1.0 / s1), num(1.0 / s0)),
                format!("{l0:.2}–{l1:.2}"),
            ];
            let mut summary = vec![title.to_string()];
            summary.extend([row[0].clone(), num(n / median(&pre)), num(1.0 / median(&step)), row[6].clone()]);
            self.summary.push(summary);
            rows.push(row);
        }
        let header = [
            "backend",
            "runs",
            "prefill ms (min–max)",
            "prefill tok/s (min–max)",
            "decode ms/token (min–max)",
            "decode tok/s (min–max)",
            "load 1 min",
        ];
        self.report.say(&format!(
            "\n### Whole passes: median (min–max) of the timed runs, after one warm-up each\n\n{}",
            table(&header, &rows, &[false, true, true, true, true, true, true])
        ));
        if let Some(note) = gpu_note {
            self.report.say(&note);
        }
        self.report.text += &format!(
            "\n<details><summary>Every run, in order (load average before it)</summary>\n\n{}\n</details>\n",
            table(
                &["round", "backend", "load", "prefill ms", "decode ms/token"],
                &log,
                &[true, false, true, true, true]
            )
        );

        if let Some(Runner::Gpu(session)) = runners.iter_mut().find(|r| matches!(r, Runner::Gpu(_))) {
            self.kernels(session, &prompt, decode.first().copied().unwrap_or(0))?;
        }
        self.report.say(&format!("\n({title}: {:.0} s since the start)", self.started.elapsed().as_secs_f64()));
        Ok(())
    }

    /// Profiled passes: the kernel table and the roofline.
    fn kernels(&mut self, session: &mut Session, prompt: &[u32], next: u32) -> gptlens::Result<()> {
        let reps = self.args.profile_reps.max(1);
        let mut prefill: Vec<(f64, Vec<KernelTime>)> = Vec::new();
        let mut decode: Vec<(f64, Vec<KernelTime>)> = Vec::new();
        for _ in 0..reps {
            session.reset();
            set_profiling(session, true);
            let t = Instant::now();
            session.run(prompt, &CaptureSpec::none())?;
            prefill.push((t.elapsed().as_secs_f64(), profile(session)));
            let t = Instant::now();
            session.step(next)?;
            decode.push((t.elapsed().as_secs_f64(), profile(session)));
            set_profiling(session, false);
        }
        if prefill.iter().chain(&decode).any(|(_, p)| p.is_empty()) {
            self.report
                .say("\nThis adapter has no timestamp queries: no per-kernel times, whole-pass times only (above).");
            return Ok(());
        }
        let n = prompt.len();
        self.pass_tables(&format!("prefill ({n} tokens at positions 0–{})", n - 1), &prefill);
        self.pass_tables(&format!("decode (1 token at position {n})"), &decode);
        Ok(())
    }

    fn pass_tables(&mut self, what: &str, passes: &[(f64, Vec<KernelTime>)]) {
        // Each kernel type's median over the profiled passes (bytes and FLOPs are the same in each).
        let grouped: Vec<Vec<(String, Group)>> = passes.iter().map(|(_, p)| group(p)).collect();
        let mut groups = grouped[0].clone();
        for (key, g) in &mut groups {
            let times: Vec<f64> =
                grouped.iter().filter_map(|gs| gs.iter().find(|(k, _)| k == key).map(|(_, g)| g.seconds)).collect();
            g.seconds = median(&times);
        }
        groups.sort_by(|a, b| b.1.seconds.total_cmp(&a.1.seconds));
        let total = Group {
            dispatches: groups.iter().map(|(_, g)| g.dispatches).sum(),
            seconds: groups.iter().map(|(_, g)| g.seconds).sum(),
            bytes: groups.iter().map(|(_, g)| g.bytes).sum(),
            flops: groups.iter().map(|(_, g)| g.flops).sum(),
        };
        let wall = median(&passes.iter().map(|(s, _)| *s).collect::<Vec<_>>());
        let mut rows = Vec::new();
        for (key, g) in groups.iter().chain([&("total (sum of kernels)".to_string(), total.clone())]) {
            rows.push(vec![
                key.clone(),
                g.dispatches.to_string(),
                ms(g.seconds),
                pct(100.0 * g.seconds / total.seconds),
                num(g.bytes as f64 / 1e6),
                num(g.flops as f64 / 1e9),
                num(g.flops as f64 / g.bytes.max(1) as f64),
                num(g.bytes as f64 / g.seconds / 1e9),
                num(g.flops as f64 / g.seconds / 1e9),
            ]);
        }
        let header = ["kernel", "dispatches", "ms", "share", "MB moved", "GFLOP", "FLOP/byte", "GB/s", "GFLOP/s"];
        self.report.say(&format!(
            "\n### Kernels, {what}: median of {} profiled pass{}\n\nWall time of the profiled pass {} ms (each dispatch in its own compute pass, timestamps around it). MB moved and GFLOP: each dispatch's least traffic (every weight, input and output once) and its arithmetic.\n\n{}",
            passes.len(),
            if passes.len() == 1 { "" } else { "es" },
            ms(wall),
            table(&header, &rows, &[false, true, true, true, true, true, true, true, true])
        ));

        let mut header = vec!["kernel".to_string()];
        let mut this = None;
        for p in self.gpus {
            let same = self.adapter.as_ref().is_some_and(|a| p.matches.iter().any(|m| a.contains(m)));
            if same {
                this = Some(p.name);
            }
            header.push(format!("{}{} ideal ms", p.name, if same { " (this adapter)" } else { "" }));
            header.push("% of its BW".into());
        }
        // The total's ideal is the sum of each kernel's own bound.
        let ideal_sum: Vec<f64> = self.gpus.iter().map(|p| groups.iter().map(|(_, g)| ideal(g, p).0).sum()).collect();
        let mut rows = Vec::new();
        for (key, g) in groups.iter().chain([&("total".to_string(), total.clone())]) {
            let mut row = vec![key.clone()];
            for (i, p) in self.gpus.iter().enumerate() {
                let (t, bound) = ideal(g, p);
                row.push(if key == "total" { ms(ideal_sum[i]) } else { format!("{} {bound}", ms(t)) });
                row.push(pct(100.0 * g.bytes as f64 / g.seconds / (p.gb_per_s * 1e9)));
            }
            rows.push(row);
        }
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let right: Vec<bool> = (0..header.len()).map(|i| i > 0).collect();
        self.report.say(&format!(
            "\nRoofline, {what}: the time each kernel would take at a GPU's bound, max(bytes / bandwidth, FLOPs / f32 peak) (m: memory-bound, c: compute-bound), and the share of that GPU's bandwidth the time measured here would mean.\n\n{}",
            table(&header, &rows, &right)
        ));
        if let Some(name) = this {
            self.report
                .say(&format!("This adapter is the {name}: its \"% of its BW\" column is the measured efficiency."));
        }
    }
}

fn set_profiling(session: &mut Session, on: bool) {
    if let Some(pass) = session.gpu_pass_mut() {
        pass.set_profiling(on);
    }
}

fn profile(session: &mut Session) -> Vec<KernelTime> {
    session.gpu_pass_mut().map(|p| p.last_profile().to_vec()).unwrap_or_default()
}

fn parse_peak(s: &str) -> Result<Peak, String> {
    let parts: Vec<&str> = s.split(',').collect();
    let [name, bw, flops] = parts[..] else { return Err(format!("--peak {s}: expected NAME,GB/s,GFLOP/s")) };
    let number = |x: &str| x.trim().parse::<f64>().map_err(|e| format!("--peak {s}: {x}: {e}"));
    Ok(Peak {
        name: Box::leak(name.trim().to_string().into_boxed_str()),
        matches: &[],
        gb_per_s: number(bw)?,
        gflop_per_s: number(flops)?,
        source: "given on the command line (--peak)",
    })
}

fn main() {
    let runtime_dir = RuntimeDir::make();
    let args = Args::parse();
    let mut gpus: Vec<Peak> = Vec::new();
    for p in &args.peak {
        match parse_peak(p) {
            Ok(p) => gpus.push(p),
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(2);
            }
        }
    }
    gpus.extend(GPUS.iter().map(|p| Peak { ..*p }));
    let status = run(&args, &gpus);
    drop(runtime_dir);
    if let Err(e) = status {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args, gpus: &[Peak]) -> gptlens::Result<()> {
    let mut bench =
        Bench { args, gpus, report: Report::default(), started: Instant::now(), summary: Vec::new(), adapter: None };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    bench.report.say(&format!(
        "# gptlens GPU backend bench (native)\n\n{cpu}, {cores} cores; load average {:.2} at start. {} profiled pass(es) per kernel table. lavapipe threads: {}.",
        load_average(),
        args.profile_reps,
        std::env::var("LP_NUM_THREADS").unwrap_or_else(|_| format!("{cores} (LP_NUM_THREADS unset: one per core)"))
    ));

    for name in &args.models {
        match name.as_str() {
            "smollm2" => {
                let path = if args.smollm.is_absolute() { args.smollm.clone() } else { repo_root().join(&args.smollm) };
                if !path.exists() {
                    bench.report.say(&format!(
                        "\n## SmolLM2-135M-Instruct Q4_1\n\nSkipped: {} is absent (`bash scripts/fetch-smollm.sh` fetches it).",
                        path.display()
                    ));
                    continue;
                }
                let model = Checkpoint::open(&path)?.model;
                bench.model("SmolLM2-135M-Instruct Q4_1", model, args.gpu_reps)?;
            }
            "gpt2" => bench.model("GPT-2-small shape, random f32 weights", gpt2_small(), args.gpt2_gpu_reps)?,
            other => return Err(gptlens::Error::InvalidArgument(format!("unknown model `{other}` (smollm2, gpt2)"))),
        }
    }

    let header = ["model", "backend", "prefill tok/s", "decode tok/s", "load 1 min"];
    let summary = table(&header, &bench.summary, &[false, false, true, true, true]);
    bench.report.say(&format!("\n## Summary (medians)\n\n{summary}"));
    let mut sources = String::from("\n## Peak figures used for the roofline\n\n");
    for p in gpus {
        let _ = writeln!(sources, "- {}: {} GB/s, {} GFLOP/s f32 — {}", p.name, p.gb_per_s, p.gflop_per_s, p.source);
    }
    bench.report.say(&sources);
    bench.report.say(&format!(
        "bench:gpu (native): {:.0} s, load average {:.2} at the end",
        bench.started.elapsed().as_secs_f64(),
        load_average()
    ));

    let out = if args.out.is_absolute() { args.out.clone() } else { repo_root().join(&args.out) };
    if let Some(dir) = out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    match std::fs::write(&out, &bench.report.text) {
        Ok(()) => println!("report: {}", out.display()),
        Err(e) => eprintln!("could not write {}: {e}", out.display()),
    }
    Ok(())
}
