// npm run bench: the wasm engine in headless Chromium on a GPT-2-small-shaped model (124M
// parameters, random weights made in the page), single-thread vs 2 threads, capture off vs every
// hook. Prints prefill and decode tokens per second (medians) and their ratios. Stops itself
// after 5 minutes.
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { launchChromium, openPage, serve } from '../support/browser.mjs';

const LIMIT_SECONDS = 300;
const settings = { runs: 5, prompt: 64, decode: 32 };
const repo = fileURLToPath(new URL('../..', import.meta.url));

setTimeout(() => {
  console.error(`bench: stopped after ${LIMIT_SECONDS} s`);
  process.exit(1);
}, LIMIT_SECONDS * 1000).unref();

const started = Date.now();
const load = () => loadavg()[0].toFixed(2);
console.log(`bench: load average ${load()} on 2 cores before start (2-thread numbers need a quiet machine)`);
const server = await serve({ '/pkg/': `${repo}/crate/js`, '/tests/': `${repo}/tests` }, { isolated: true, limitSeconds: LIMIT_SECONDS });
const browser = await launchChromium();
try {
  const page = await openPage(browser, `${server.url}/tests/browser/index.html`);
  const results = [];
  for (const threads of [1, 2]) {
    results.push(await page.evaluate(
      (options) => import('/tests/bench/page.mjs').then((bench) => bench.bench(options)),
      { ...settings, threads },
    ));
  }
  print(results);
} finally {
  await browser.close();
  await server.close();
}
console.log(`bench: ${((Date.now() - started) / 1000).toFixed(0)} s, load average ${load()} after`);

function print([single, threaded]) {
  const { runs, prompt, decode } = settings;
  console.log(`\nGPT-2-small shape (124M params, f16 file → f32), ${prompt}-token prefill, ${decode} greedy decode steps; median of ${runs} runs after a warm-up`);
  for (const { backend, loadMs } of [single, threaded]) console.log(`  ${backend.reason}; load ${(loadMs / 1000).toFixed(1)} s`);
  const rows = [];
  for (const result of [single, threaded]) {
    for (const [mode, { prefill, decode }] of Object.entries(result.modes)) {
      rows.push([`${result.backend.threads} thread${result.backend.threads > 1 ? 's' : ''}`, mode, prefill.toFixed(1), decode.toFixed(2)]);
    }
  }
  const ratio = (a, b) => `${(a / b).toFixed(2)}x`;
  for (const mode of Object.keys(single.modes)) {
    const [a, b] = [threaded.modes[mode], single.modes[mode]];
    rows.push([`${threaded.backend.threads} / 1 threads`, mode, ratio(a.prefill, b.prefill), ratio(a.decode, b.decode)]);
  }
  for (const result of [single, threaded]) {
    const [all, off] = [result.modes['all hooks'], result.modes.off];
    rows.push([`${result.backend.threads} thr: all / off`, '', ratio(all.prefill, off.prefill), ratio(all.decode, off.decode)]);
  }
  const header = ['build', 'capture', 'prefill tok/s', 'decode tok/s'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells) => `| ${cells.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join(' | ')} |`;
  console.log([line(header), `|${widths.map((w, i) => (i < 2 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`, ...rows.map(line)].join('\n'));
}
