// Headless Chromium against a static server on 127.0.0.1, for the browser tests and the bench.
// The server maps URL prefixes to directories, optionally with the headers that make a page
// cross-origin isolated, and closes itself after a time limit even if the caller never does.
import { createServer } from 'node:http';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { extname, join, resolve, sep } from 'node:path';
import { chromium } from 'playwright-core';

const TYPES = {
  '.html': 'text/html',
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
};

const ISOLATION = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

/**
 * Serves `routes` (`{ '/prefix/': '/abs/dir' }`) on a free port of 127.0.0.1 until `close()` or
 * `limitSeconds`. `isolated` adds COOP/COEP to every response (the worker scripts need them too).
 */
export async function serve(routes, { isolated, limitSeconds = 600 }) {
  const server = createServer(async (request, response) => {
    const path = decodeURIComponent(new URL(request.url, 'http://127.0.0.1').pathname);
    const prefix = Object.keys(routes).find((p) => path.startsWith(p));
    const root = prefix && resolve(routes[prefix]);
    const file = root && resolve(root, path.slice(prefix.length));
    const headers = isolated ? { ...ISOLATION } : {};
    if (!file || !(file === root || file.startsWith(root + sep))) {
      response.writeHead(404, headers).end();
      return;
    }
    try {
      const body = await readFile(file);
      response.writeHead(200, { ...headers, 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(body);
    } catch {
      response.writeHead(404, headers).end();
    }
  });
  await new Promise((done) => server.listen(0, '127.0.0.1', done));
  // Dropping keep-alive connections too: a browser holds them open for seconds.
  const close = () =>
    new Promise((done) => {
      server.close(done);
      server.closeAllConnections();
    });
  setTimeout(close, limitSeconds * 1000).unref();
  return { url: `http://127.0.0.1:${server.address().port}`, close };
}

/**
 * Chromium from Debian (never a downloaded browser); Playwright gives it a fresh temporary profile.
 * `--enable-unsafe-webgpu` gives it a WebGPU adapter even without a GPU (SwiftShader, a software
 * fallback adapter), so the WebGPU backend runs in CI; without the flag there is no adapter at all.
 */
export function launchChromium() {
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS });
}

const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--enable-unsafe-webgpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Chromium on a fresh profile of its own (a temporary folder, deleted by `close`), as a person's
 * browser is: its HTTP cache is on disk and keeps a model file between visits. A context of
 * `launchChromium()`'s browser is incognito, and its cache in memory kept none of SmolLM2's 98 MB:
 * every navigation downloaded the file again (Chromium's own network log, 29 November).
 */
export async function launchProfile(options = {}) {
  const folder = await mkdtemp(join(tmpdir(), 'gptlens-profile-'));
  const context = await chromium.launchPersistentContext(folder, { executablePath: CHROMIUM, args: ARGS, ...options });
  return {
    context,
    close: async () => {
      await context.close();
      await rm(folder, { recursive: true, force: true });
    },
  };
}

/** Opens `url`, forwarding the page's console errors so a failure shows its cause. */
export async function openPage(browser, url) {
  const page = await browser.newPage();
  page.on('console', (message) => message.type() === 'error' && console.error(`[page] ${message.text()}`));
  page.on('pageerror', (error) => console.error(`[page] ${error.message}`));
  await page.goto(url);
  return page;
}

/**
 * Whether a missing WebGPU adapter fails the test (REQUIRE_GPU=1, as scripts/test.sh sets where
 * the adapter must exist) or skips it with `reason`.
 */
export function skipOrFail(t, reason) {
  if (process.env.REQUIRE_GPU === '1') throw new Error(`REQUIRE_GPU=1 but ${reason}`);
  t.skip(reason);
}
