// llama.cpp native (node-llama-cpp's prebuilt CPU binary) for `npm run bench:peers`, in its own
// process so its CPU time is its own. Never downloads or builds: `build: 'never', skipDownload: true`.
//
//   node llama-native.mjs tokenize MODEL PROMPT  → {"tokens": [...]}
//   node llama-native.mjs serve MODEL THREADS     → loads the model, prints {"info": …}, then for each
//        stdin line runs once and prints one JSON line. The first stdin line is the prompt's token
//        ids (a JSON array), so every engine prefills the same ids; each later line is {"decode": N}.
//        Serving lets run.mjs alternate llama.cpp's runs with gptlens' so both see the same load.
//
// A run: a cleared sequence, `evaluate(promptIds)` greedy; the first yielded token ends the
// prefill (the prompt batch plus one sample), the next N tokens are N decode steps.
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { createInterface } from 'node:readline';
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';

const [command, modelPath, arg] = process.argv.slice(2);
const emit = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);

// maxThreads 0: a context's `threads` is then exactly the number of threads used.
const llama = await getLlama({ gpu: false, build: 'never', skipDownload: true, maxThreads: 0, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });

if (command === 'tokenize') {
  emit({ tokens: Array.from(model.tokenize(arg, false)) });
} else if (command === 'serve') {
  const threads = Number(arg);
  const context = await model.createContext({ contextSize: 512, batchSize: 512, threads, flashAttention: false });
  const sequence = context.getSequence();
  // The prebuilt package carries one libggml-cpu per CPU generation and loads the best this CPU
  // runs; which one is in this process's memory map.
  const maps = readFileSync('/proc/self/maps', 'utf8');
  const cpuVariant = [...new Set(maps.match(/libggml-cpu-[\w-]+\.so/g) ?? [])].join(', ') || 'unknown';
  emit({ info: { threads: context.currentThreads, cpuMathCores: llama.cpuMathCores, buildType: llama.buildType, gpu: llama.gpu, cpuVariant, flashAttention: false } });
  let tokens;
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    if (!tokens) {
      tokens = JSON.parse(line);
      continue;
    }
    const { decode } = JSON.parse(line);
    await sequence.clearHistory();
    const load = loadavg()[0];
    const cpu = process.cpuUsage();
    const started = performance.now();
    let firstAt;
    const generated = [];
    for await (const token of sequence.evaluate(tokens, { temperature: 0 })) {
      generated.push(token);
      firstAt ??= performance.now();
      if (generated.length > decode) break;
    }
    const ended = performance.now();
    const used = process.cpuUsage(cpu);
    emit({
      load,
      prefillMs: firstAt - started,
      prefillTokens: tokens.length,
      decodeMs: ended - firstAt,
      decodeSteps: decode,
      cpuPerWall: (used.user + used.system) / 1000 / (ended - started),
      generated,
      text: model.detokenize(generated),
    });
  }
  await context.dispose();
} else {
  throw new Error(`unknown command ${command}`);
}
await model.dispose();
await llama.dispose();
