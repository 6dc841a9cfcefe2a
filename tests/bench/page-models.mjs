// The frame of the benches that drive the built page model by model (npm run soak, npm run
// bench:live): the page served as `npm start` serves it, one headless Chromium, each model in
// turn (skipped with a note when its file was not fetched), and a Markdown report with the
// machine's load at the start and the end, printed and written to tests/output/<output>.
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { launchChromium } from '../support/browser.mjs';
import { cpuName, sourceVersion } from '../support/machine.mjs';
import { servePage } from '../web/page-server.mjs';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const load = () => loadavg().map((value) => value.toFixed(2)).join(' ');

/**
 * Runs `measure(browser, url, model)` for each of `models` (`fixtures/<folder>` or
 * `assets/<file or folder>`, the page's `?model=` ids) and puts `report(result)` in the output.
 */
export async function benchEachModel({ title, models, output, measure, report }) {
  const server = await servePage({ limitSeconds: 24 * 3600 });
  const browser = await launchChromium();
  const sections = [`# ${title} — ${new Date().toISOString()}`, '', `Machine: ${cpus().length} cores (${cpuName()}), load ${load()} at the start; headless Chromium; the source of ${sourceVersion()}.`, ''];
  try {
    // A path under assets/models is taken for the id it serves as (`assets/models/X` → `assets/X`).
    for (const model of models.map((given) => given.replace(/^assets\/models\//, 'assets/'))) {
      const file = model.startsWith('fixtures/') ? `${repo}/tests/${model}` : `${repo}/${model.replace(/^assets\//, 'assets/models/')}`;
      if (!existsSync(file)) {
        sections.push(`### ${model}`, '', `SKIPPED: ${file} is not there (scripts/fetch-smollm.sh fetches SmolLM2).`, '');
        continue;
      }
      sections.push(report(await measure(browser, server.url, model)));
      console.log(sections.at(-1));
    }
  } finally {
    await browser.close();
    await server.close();
  }
  sections.push(`Load at the end: ${load()}.`);
  await mkdir(`${repo}/tests/output`, { recursive: true });
  await writeFile(`${repo}/tests/output/${output}`, `${sections.join('\n')}\n`);
  console.log(`\nwritten to tests/output/${output}`);
}
