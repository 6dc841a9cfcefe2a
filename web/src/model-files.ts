// Where model bytes come from — the server's catalog, files the reader picked or dropped, a URL —
// and reading them with progress. Every route ends in the same `ModelFiles` for the engine.
import type { ModelFiles } from 'gptlens';
import type { CatalogModel } from './catalog.ts';

/** A file of a model about to be read; `open` resolves to undefined for an optional file that is absent. */
export interface FileSource {
  name: string;
  open(): Promise<OpenedFile | undefined>;
}

export interface OpenedFile {
  body: ReadableStream<Uint8Array>;
  bytes: number | undefined;
  /**
   * Changes whenever the file does: a server's file's URL with its ETag or Last-Modified and its
   * size; absent when the server sends neither. The engine keeps a snapshot of the loaded weights
   * under it (`GptlensWorker.loadGguf`).
   */
  snapshotKey?: string | undefined;
}

export interface ModelSource {
  /** The catalog entry's id, for models the server lists. */
  id?: string;
  name: string;
  /** Total size when known up front (catalog, local files), for the progress bar. */
  bytes: number | undefined;
  files: FileSource[];
}

/** A file set the page cannot load; said before any byte is read. */
export class SourceError extends Error {
  override name = 'SourceError';
}

const TOKENIZER_FILES = ['tokenizer.json', 'vocab.json', 'merges.txt'];
const EXPECTED = 'a .gguf file, or config.json with one .safetensors file (and tokenizer.json, or vocab.json + merges.txt)';

/**
 * Why a fetch of `url` failed without a response: the browser says only "Failed to fetch" whether
 * nothing listens there or a server answered without allowing this page to read it (CORS). A
 * `no-cors` request tells them apart: it succeeds (opaquely) when a server answers — except that
 * this page is cross-origin isolated, so the answer is blocked unless it carries
 * Cross-Origin-Resource-Policy, and then the browser files a COEP report naming the URL, which a
 * ReportingObserver sees (Chromium). Neither sign: nothing answered.
 */
async function whyUnreachable(url: string): Promise<string> {
  const { origin } = new URL(url);
  const reports: string[] = [];
  const Observer = (globalThis as { ReportingObserver?: typeof ReportingObserver }).ReportingObserver;
  const observer = Observer && new Observer((batch) => reports.push(...batch.map(blockedUrl)), { types: ['coep'], buffered: true });
  observer?.observe();
  try {
    await fetch(url, { mode: 'no-cors', cache: 'no-store' });
    return `the server at ${origin} does not allow this page to read it (CORS)`;
  } catch {
    // Reports arrive asynchronously, shortly after the blocked response.
    for (let waited = 0; waited < 2000 && !reports.includes(url); waited += 50) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      reports.push(...(observer?.takeRecords().map(blockedUrl) ?? []));
    }
    if (reports.includes(url)) return `the server at ${origin} does not allow this page to read it (CORS)`;
    return Observer ? `nothing answers at ${origin}` : `nothing answers at ${origin}, or it does not allow this page to read it (CORS)`;
  } finally {
    observer?.disconnect();
  }
}

/** The URL a COEP report names; Chromium's report body exposes its fields only through toJSON(). */
const blockedUrl = (report: Report): string =>
  String((report.body as { toJSON?: () => { blockedURL?: unknown } } | null)?.toJSON?.().blockedURL ?? '');

/** Between a snapshot key's URL, its version (ETag or Last-Modified) and its size. */
const KEY_SEPARATOR = '\n';

function fetched(url: string, optional = false): FileSource['open'] {
  return async () => {
    const response = await fetch(url).catch(async () => {
      throw new SourceError(`could not fetch ${url}: ${await whyUnreachable(url)}`);
    });
    if (!response.ok || !response.body) {
      if (optional && response.status === 404) return undefined;
      const why = response.status === 404 ? 'not found' : response.statusText;
      throw new SourceError(`${url} answered ${response.status}${why ? ` (${why})` : ''}`);
    }
    const length = response.headers.get('Content-Length');
    const version = response.headers.get('ETag') ?? response.headers.get('Last-Modified');
    const snapshotKey = version === null || length === null ? undefined : [response.url, version, length].join(KEY_SEPARATOR);
    return { body: response.body, bytes: length === null ? undefined : Number(length), snapshotKey };
  };
}

/** The file a snapshot key names, for a reader: its URL and the last part of its path. */
export function fileOfSnapshotKey(key: string): { url: string; name: string } {
  const url = key.split(KEY_SEPARATOR, 1)[0]!;
  const last = url.split(/[?#]/, 1)[0]!.split('/').filter(Boolean).at(-1) ?? url;
  let name = last;
  try {
    name = decodeURIComponent(last);
  } catch {
    // Not percent-encoded after all: shown as it is.
  }
  return { url, name };
}

export function catalogSource(model: CatalogModel): ModelSource {
  return {
    id: model.id,
    name: model.name,
    bytes: model.bytes,
    files: Object.entries(model.files).map(([name, url]) => ({ name, open: fetched(url) })),
  };
}

/** The folder the files came from: `folder` (a dropped directory's name), else the first part of
 * their `webkitRelativePath` (a folder opened with the picker), else undefined. */
export function folderOf(picked: File[], folder?: string): string | undefined {
  if (folder) return folder;
  const paths = picked.map((file) => file.webkitRelativePath).filter((path) => path.includes('/'));
  return paths.length > 0 ? paths[0]!.split('/')[0] : undefined;
}

/**
 * Picked or dropped files: one .gguf, or a config.json + .safetensors set; other files are ignored.
 * Named after their folder, when they came as one, else the weights' file name (the loader then
 * prefers the model's own name, GGUF `general.name` or config.json's `_name_or_path`).
 */
export function localSource(picked: File[], folder?: string): ModelSource {
  const gguf = picked.filter((file) => file.name.endsWith('.gguf'));
  const weights = picked.filter((file) => file.name.endsWith('.safetensors'));
  const config = picked.find((file) => file.name === 'config.json');
  let chosen: File[];
  if (gguf.length === 1 && weights.length === 0) {
    chosen = gguf;
  } else if (gguf.length === 0 && weights.length === 1 && config) {
    chosen = [config, weights[0]!, ...picked.filter((file) => TOKENIZER_FILES.includes(file.name))];
  } else {
    const names = picked.map((file) => file.name).join(', ') || 'nothing';
    throw new SourceError(`expected ${EXPECTED}; got ${names}`);
  }
  return {
    name: folderOf(picked, folder) ?? chosen.find((file) => file !== config)!.name,
    bytes: chosen.reduce((sum, file) => sum + file.size, 0),
    files: chosen.map((file) => ({ name: file.name, open: async () => ({ body: file.stream(), bytes: file.size }) })),
  };
}

/** The files of a dropped directory entry, and those of its subfolders (one level is the usual case). */
export async function filesOfDirectory(directory: FileSystemDirectoryEntry): Promise<File[]> {
  const reader = directory.createReader();
  const entries: FileSystemEntry[] = [];
  // readEntries answers in batches until it answers none.
  for (;;) {
    const batch = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
    if (batch.length === 0) break;
    entries.push(...batch);
  }
  const files = await Promise.all(
    entries.map(async (entry): Promise<File[]> =>
      entry.isFile
        ? [await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject))]
        : filesOfDirectory(entry as FileSystemDirectoryEntry),
    ),
  );
  return files.flat();
}

/**
 * A model at a URL: a .gguf file; a .safetensors file with config.json (and tokenizer.json, if
 * there) beside it; or a folder (URL ending in /) holding config.json + model.safetensors.
 */
export function urlSource(address: string): ModelSource {
  let url: URL;
  try {
    url = new URL(address, location.href);
  } catch {
    throw new SourceError(`${address} is not a URL`);
  }
  // Only the web: a file:, data:, blob: or javascript: address is refused before any request.
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new SourceError(`only http(s) URLs can be loaded, not ${url.protocol} (to open a file on this computer, use “Open files”)`);
  }
  const file = url.pathname.split('/').pop() ?? '';
  if (file.endsWith('.gguf')) {
    return { name: decodeURIComponent(file), bytes: undefined, files: [{ name: decodeURIComponent(file), open: fetched(url.href) }] };
  }
  if (file !== '' && !file.endsWith('.safetensors')) throw new SourceError(`${url.href} is not ${EXPECTED}`);
  const weights = file || 'model.safetensors';
  const sibling = (name: string) => new URL(name, url).href;
  return {
    name: decodeURIComponent(file || url.pathname.split('/').at(-2) || url.host),
    bytes: undefined,
    files: [
      { name: 'config.json', open: fetched(sibling('config.json')) },
      { name: decodeURIComponent(weights), open: fetched(sibling(weights)) },
      { name: 'tokenizer.json', open: fetched(sibling('tokenizer.json'), true) },
    ],
  };
}

/**
 * The lone .gguf of `source`, opened, with its size, for loading as it arrives; undefined for
 * other file sets. A server that does not say the size gets its file read whole first.
 */
export async function openGguf(source: ModelSource): Promise<(OpenedFile & { bytes: number }) | undefined> {
  const [file, ...others] = source.files;
  if (!file || others.length > 0 || !file.name.endsWith('.gguf')) return undefined;
  const opened = await file.open();
  if (!opened) throw new SourceError(`${file.name} could not be opened`);
  if (opened.bytes !== undefined) return { ...opened, bytes: opened.bytes };
  const whole = new Uint8Array(await new Response(opened.body).arrayBuffer());
  return { body: new Blob([whole]).stream(), bytes: whole.byteLength };
}

/** Reads every file of `source`, reporting the fraction read (undefined when the total is unknown). */
export async function readSource(source: ModelSource, progress: (fraction: number | undefined) => void): Promise<ModelFiles> {
  const opened = [];
  for (const file of source.files) {
    const stream = await file.open();
    if (stream) opened.push({ name: file.name, ...stream });
  }
  const known = opened.every(({ bytes }) => bytes !== undefined);
  const total = source.bytes ?? (known ? opened.reduce((sum, { bytes }) => sum + bytes!, 0) : undefined);
  let read = 0;
  const files: ModelFiles = {};
  for (const { name, body } of opened) {
    const chunks: Uint8Array[] = [];
    const reader = body.getReader();
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      chunks.push(chunk.value);
      read += chunk.value.byteLength;
      progress(total ? Math.min(1, read / total) : undefined);
    }
    files[name] = join(chunks);
  }
  return files;
}

/** One buffer from the chunks, owning its whole ArrayBuffer so it can be transferred to the worker. */
function join(chunks: Uint8Array[]): Uint8Array {
  const length = chunks.reduce((sum, chunk) => sum + chunk.byteLength, 0);
  if (chunks.length === 1 && chunks[0]!.byteLength === chunks[0]!.buffer.byteLength) return chunks[0]!;
  const joined = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    joined.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return joined;
}
