// The models the page offers: every checkpoint in assets/models/ plus the test fixtures, listed
// with their sizes at /models/index.json and served from where they lie (never copied into the
// build: the real model is ~100 MB). Both Vite servers (dev and preview) mount it, so the list is
// read from disk when asked for: a model dropped into assets/models/ appears on the next reload.
import { closeSync, createReadStream, existsSync, openSync, readFileSync, readSync, readdirSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { Connect, Plugin } from 'vite';
import type { Catalog, CatalogModel } from '../src/catalog.ts';

/** Sent with every response of the page's servers: they make it cross-origin isolated (threads). */
export const ISOLATION_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

/**
 * The Content-Security-Policy: only what the page needs. Scripts and workers come from the page's
 * origin ('wasm-unsafe-eval' compiles the engine's wasm; no eval, no inline script); "load from
 * URL" fetches any http(s) address the reader types (a model on a local server is often plain
 * http), nothing else (no data:, blob:, file:); images are the page's own plus the data: favicon.
 * The dev server alone needs inline styles: Vite's client injects each CSS module as a <style>
 * element (the build links one stylesheet), and 'self' covers its HMR WebSocket.
 */
export function contentSecurityPolicy(mode: 'build' | 'dev'): string {
  return [
    "default-src 'self'",
    "script-src 'self' 'wasm-unsafe-eval'",
    "worker-src 'self'",
    "connect-src 'self' https: http:",
    "img-src 'self' data:",
    mode === 'dev' ? "style-src 'self' 'unsafe-inline'" : "style-src 'self'",
    // The views position and colour elements with style attributes; <style> elements stay refused.
    "style-src-attr 'unsafe-inline'",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** Every response of both servers: isolation, the CSP, no sniffing, no framing, no referrer. */
export function servingHeaders(mode: 'build' | 'dev'): Record<string, string> {
  return {
    ...ISOLATION_HEADERS,
    'Content-Security-Policy': contentSecurityPolicy(mode),
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
  };
}

/**
 * First on both servers: puts the serving headers on every response (Vite's own 404s and errors
 * included) and answers an address whose %-escapes do not decode with a plain 400, before any
 * other middleware can turn it into a 500 page with a stack trace.
 */
function guardMiddleware(mode: 'build' | 'dev'): Connect.NextHandleFunction {
  const headers = servingHeaders(mode);
  return (request, response, next) => {
    for (const [name, value] of Object.entries(headers)) response.setHeader(name, value);
    try {
      decodeURIComponent(request.url ?? '/');
    } catch {
      response.writeHead(400, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-cache' });
      response.end('400 Bad Request: the address has a malformed %-escape\n');
      return;
    }
    next();
  };
}

interface Source {
  /** First path segment of the files' URLs. */
  prefix: string;
  dir: string;
  kind: CatalogModel['kind'];
}

// Files that make a model in a folder; anything else there (reference outputs, scripts) is not offered.
const TOKENIZER_FILES = ['tokenizer.json', 'vocab.json', 'merges.txt'];
// The fixtures' recorded PyTorch outputs are safetensors too, but not weights.
const NOT_WEIGHTS = new Set(['reference.safetensors']);

/**
 * A GGUF that holds tensors: one with none is a tokenizer's vocabulary (what `gptlens tokenize`
 * reads), not a model the page could load. The count is the u64 after the magic and version.
 */
function ggufHasTensors(path: string): boolean {
  const header = Buffer.alloc(16);
  const fd = openSync(path, 'r');
  try {
    return readSync(fd, header, 0, 16, 0) === 16 && header.readBigUInt64LE(8) > 0n;
  } finally {
    closeSync(fd);
  }
}

/** The model a folder holds: one .gguf, or config.json + one .safetensors (+ tokenizer files). */
function folderModel(dir: string): string[] | undefined {
  const names = readdirSync(dir).filter((name) => statSync(join(dir, name)).isFile());
  const gguf = names.filter((name) => name.endsWith('.gguf') && ggufHasTensors(join(dir, name)));
  if (gguf.length === 1) return gguf;
  const weights = names.filter((name) => name.endsWith('.safetensors') && !NOT_WEIGHTS.has(name));
  if (weights.length !== 1 || !names.includes('config.json')) return undefined;
  return ['config.json', weights[0]!, ...TOKENIZER_FILES.filter((name) => names.includes(name))];
}

/** The catalog the page reads, and where on disk each of its file URLs points. */
interface Listing {
  catalog: Catalog;
  diskPaths: Map<string, string>;
}

function add(listing: Listing, source: Source, relativeDir: string, files: string[], name: string): void {
  const model: CatalogModel = { id: `${source.prefix}/${relativeDir || files[0]}`, name, kind: source.kind, bytes: 0, files: {} };
  for (const file of files) {
    const relative = relativeDir ? `${relativeDir}/${file}` : file;
    const url = `/models/${source.prefix}/${relative}`;
    const diskPath = join(source.dir, relative);
    model.files[file] = url;
    model.bytes += statSync(diskPath).size;
    listing.diskPaths.set(url, diskPath);
  }
  // The fetch scripts write the name of non-open terms beside a model (scripts/fetch-gemma.sh).
  const terms = join(source.dir, `${relativeDir || files[0]}.license`);
  if (existsSync(terms)) model.license = readFileSync(terms, 'utf8').trim().slice(0, 200);
  listing.catalog.models.push(model);
}

/**
 * Models the page knows of even when their folder is absent: listed as unavailable, with how to
 * get them (the fetch scripts are not run by the page's server).
 */
const KNOWN_FOLDERS: { folder: string; name: string; fetch: string }[] = [
  { folder: 'all-MiniLM-L6-v2', name: 'all-MiniLM-L6-v2', fetch: 'not fetched (bash scripts/fetch-minilm.sh, or npm run setup, puts it in assets/models/all-MiniLM-L6-v2/)' },
];

/** True when a config.json describes an encoder: BERT, or a bidirectional / head-less model. */
function configIsEncoder(path: string): boolean {
  try {
    const config = JSON.parse(readFileSync(path, 'utf8')) as { model_type?: unknown; attention?: unknown; architectures?: unknown };
    const architectures = Array.isArray(config.architectures) ? config.architectures.map(String) : [];
    return config.model_type === 'bert' || config.attention === 'bidirectional' || architectures.some((name) => /^Bert(Model|ForMaskedLM)$/.test(name));
  } catch {
    return false;
  }
}

export function listModels(repo: string): Listing {
  const sources: Source[] = [
    { prefix: 'assets', dir: join(repo, 'assets/models'), kind: 'model' },
    { prefix: 'fixtures', dir: join(repo, 'tests/fixtures'), kind: 'fixture' },
  ];
  const listing: Listing = { catalog: { models: [] }, diskPaths: new Map() };
  for (const source of sources.filter((source) => existsSync(source.dir))) {
    for (const name of readdirSync(source.dir).sort()) {
      const path = join(source.dir, name);
      if (statSync(path).isDirectory()) {
        const files = folderModel(path);
        if (!files) continue;
        const encoder = files.includes('config.json') && configIsEncoder(join(path, 'config.json'));
        add(listing, source, name, files, encoder ? `${name} (encoder)` : name);
        if (encoder) listing.catalog.models.at(-1)!.encoder = true;
      } else if (name.endsWith('.gguf') && ggufHasTensors(path)) {
        add(listing, source, '', [name], basename(name, '.gguf'));
      }
    }
  }
  for (const known of KNOWN_FOLDERS) {
    const id = `assets/${known.folder}`;
    if (listing.catalog.models.some((model) => model.id === id)) continue;
    listing.catalog.models.push({ id, name: `${known.name} (encoder)`, kind: 'model', bytes: 0, files: {}, encoder: true, unavailable: known.fetch });
  }
  return listing;
}

/** Answers /models/index.json and the listed models' files; every other URL goes on to Vite. */
function catalogMiddleware(repo: string, mode: 'build' | 'dev'): Connect.NextHandleFunction {
  const serving = servingHeaders(mode);
  return (request, response, next) => {
    const send = (status: number, headers: Record<string, string | number>) =>
      response.writeHead(status, { ...serving, 'Cache-Control': 'no-cache', ...headers });
    let path: string;
    try {
      path = decodeURIComponent(new URL(request.url ?? '/', 'http://localhost').pathname);
    } catch {
      send(400, { 'Content-Type': 'text/plain; charset=utf-8' }).end('400 Bad Request: the address has a malformed %-escape\n');
      return;
    }
    const data = TRAINING_TEXTS[path];
    if (!path.startsWith('/models/') && data === undefined) return next();
    try {
      if (data !== undefined) serveTrainingText(join(repo, data), request.method, send, response);
      else serveCatalog(repo, path, request, send, response);
    } catch (error) {
      // Logged here, never sent: no stack or file path leaves the server.
      console.error('model catalog:', error);
      if (!response.headersSent) send(500, { 'Content-Type': 'text/plain; charset=utf-8' }).end('500: the model catalog failed\n');
      else response.destroy();
    }
  };
}

/**
 * Texts the Train panel offers beside its bundled sample, by URL: the full Shakespeare corpus
 * (assets/data, fetched by scripts/setup.sh; 404 when absent, and the panel leaves it out).
 */
const TRAINING_TEXTS: Record<string, string> = { '/data/shakespeare.txt': 'assets/data/shakespeare.txt' };

function serveTrainingText(
  file: string,
  method: string | undefined,
  send: (status: number, headers: Record<string, string | number>) => import('node:http').ServerResponse,
  response: import('node:http').ServerResponse,
): void {
  if (!existsSync(file)) {
    send(404, { 'Content-Type': 'text/plain' }).end('not fetched: bash scripts/fetch-shakespeare.sh puts it in assets/data/\n');
    return;
  }
  send(200, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': statSync(file).size });
  if (method === 'HEAD') response.end();
  else createReadStream(file).on('error', () => response.destroy()).pipe(response);
}

function serveCatalog(
  repo: string,
  path: string,
  { method, headers }: import('node:http').IncomingMessage,
  send: (status: number, headers: Record<string, string | number>) => import('node:http').ServerResponse,
  response: import('node:http').ServerResponse,
): void {
  const { catalog, diskPaths } = listModels(repo);
  if (path === '/models/index.json') {
    const body = JSON.stringify(catalog);
    send(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }).end(body);
    return;
  }
  // Only files the catalog lists are served, so no URL can reach outside the model folders.
  const file = diskPaths.get(path);
  if (!file) {
    send(404, { 'Content-Type': 'text/plain' }).end(`no model file ${path}`);
    return;
  }
  // A validator, so a page opened again (every reload, every model switch back) revalidates its
  // cached copy (no-cache) and gets 304 instead of the whole file: SmolLM2 is 100 MB.
  const { size, mtimeMs } = statSync(file);
  const etag = `"${size.toString(16)}-${Math.floor(mtimeMs).toString(16)}"`;
  if (headers['if-none-match'] === etag) {
    send(304, { ETag: etag }).end();
    return;
  }
  send(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': size, ETag: etag });
  if (method === 'HEAD') response.end();
  else createReadStream(file).on('error', () => response.destroy()).pipe(response);
}

export function modelCatalog(repo: string): Plugin {
  return {
    name: 'gptlens-model-catalog',
    configureServer: (server) => {
      server.middlewares.use(guardMiddleware('dev'));
      server.middlewares.use(catalogMiddleware(repo, 'dev'));
    },
    configurePreviewServer: (server) => {
      server.middlewares.use(guardMiddleware('build'));
      server.middlewares.use(catalogMiddleware(repo, 'build'));
    },
  };
}
