// The models the page offers: every checkpoint in assets/models/ plus the test fixtures, listed
// with their sizes at /models/index.json and served from where they lie (never copied into the
// build: the real model is ~100 MB). Both Vite servers (dev and preview) mount it, so the list is
// read from disk when asked for: a model dropped into assets/models/ appears on the next reload.
import { createReadStream, existsSync, readdirSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { Connect, Plugin } from 'vite';
import type { Catalog, CatalogModel } from '../src/catalog.ts';

/** Sent with every response of the page's servers: they make it cross-origin isolated (threads). */
export const ISOLATION_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

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

/** The model a folder holds: one .gguf, or config.json + one .safetensors (+ tokenizer files). */
function folderModel(dir: string): string[] | undefined {
  const names = readdirSync(dir).filter((name) => statSync(join(dir, name)).isFile());
  const gguf = names.filter((name) => name.endsWith('.gguf'));
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
  listing.catalog.models.push(model);
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
        if (files) add(listing, source, name, files, name);
      } else if (name.endsWith('.gguf')) {
        add(listing, source, '', [name], basename(name, '.gguf'));
      }
    }
  }
  return listing;
}

/** Answers /models/index.json and the listed models' files; every other URL goes on to Vite. */
function catalogMiddleware(repo: string): Connect.NextHandleFunction {
  return (request, response, next) => {
    const path = decodeURIComponent(new URL(request.url ?? '/', 'http://localhost').pathname);
    if (!path.startsWith('/models/')) return next();
    const { catalog, diskPaths } = listModels(repo);
    const send = (status: number, headers: Record<string, string | number>) =>
      response.writeHead(status, { ...ISOLATION_HEADERS, 'Cache-Control': 'no-cache', ...headers });
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
    send(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': statSync(file).size });
    if (request.method === 'HEAD') response.end();
    else createReadStream(file).pipe(response);
  };
}

export function modelCatalog(repo: string): Plugin {
  return {
    name: 'gptlens-model-catalog',
    configureServer: (server) => void server.middlewares.use(catalogMiddleware(repo)),
    configurePreviewServer: (server) => void server.middlewares.use(catalogMiddleware(repo)),
  };
}
