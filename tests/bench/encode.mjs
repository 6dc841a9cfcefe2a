// npm run bench:encode — what encoding costs a keystroke on a long prompt, in the package
// (Node, wasm, one thread): `Model.encode` remembers each pre-tokenized piece's merges, so an edit
// merges only the pieces it touched. Encodes a long text (the first 20,000 characters of the
// Shakespeare corpus the setup script fetches, sha256-pinned), then makes one-character edits at spread-out
// places, each encoded by a model that remembers the text before it and, alternately, by a model
// that remembers nothing (its memo just emptied by encoding another text); checks that both give
// the same ids and prints the medians with their range.
import { readFileSync, existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { init, Model } from '../../crate/js/dist/index.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const MODEL = `${repo}/assets/models/SmolLM2-135M-Instruct.Q4_1.gguf`;
const TEXT = `${repo}/assets/data/shakespeare.txt`;
const EDITS = 101;
for (const [file, script] of [[MODEL, 'fetch-smollm.sh'], [TEXT, 'fetch-shakespeare.sh']]) {
  if (!existsSync(file)) {
    console.log(`bench:encode: SKIPPED, ${file} is missing (bash scripts/${script} fetches it)`);
    process.exit(0);
  }
}
await init({ threads: 1 });
const bytes = new Uint8Array(readFileSync(MODEL));
const [typing, forgetting] = [Model.load({ 'model.gguf': bytes }), Model.load({ 'model.gguf': bytes })];
const timed = (f) => {
  const started = performance.now();
  const result = f();
  return [performance.now() - started, result];
};
let text = readFileSync(TEXT, 'utf8').slice(0, 20_000);
const tokens = typing.encode(text).length;
const loadBefore = loadavg()[0];
const times = { remembered: [], full: [] };
for (let i = 0; i < EDITS; i++) {
  const at = Math.floor((((i * 7919) % 997) / 997) * text.length);
  text = `${text.slice(0, at)}${'xyz '[i % 4]}${text.slice(at)}`;
  forgetting.encode(String(i)); // its memo now holds one piece: nothing of `text`
  const [full, expected] = timed(() => forgetting.encode(text));
  const [remembered, ids] = timed(() => typing.encode(text));
  if (ids.length !== expected.length || ids.some((id, k) => id !== expected[k])) throw new Error(`edit ${i}: the ids differ`);
  times.full.push(full);
  times.remembered.push(remembered);
}
const summary = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return `median ${sorted[sorted.length >> 1].toFixed(2)} ms (${sorted[0].toFixed(2)}–${sorted.at(-1).toFixed(2)})`;
};
console.log(`bench:encode: ${text.length} characters, ${tokens} SmolLM2 tokens, ${EDITS} one-character edits, Node ${process.version}, load ${loadBefore.toFixed(2)} → ${loadavg()[0].toFixed(2)}`);
console.log(`  an edit, earlier pieces remembered: ${summary(times.remembered)}`);
console.log(`  the same text, nothing remembered:   ${summary(times.full)}`);
console.log('  ids identical for every edit');
