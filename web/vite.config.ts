// The page is served (dev and preview alike) cross-origin isolated, so the engine can run its
// threaded build, with a Content-Security-Policy and the other serving headers on every response
// (web/server/model-catalog.ts); the model catalog is mounted on both servers.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig, type Plugin } from 'vite';
import { modelCatalog, servingHeaders } from './server/model-catalog.ts';

const repo = fileURLToPath(new URL('..', import.meta.url));
const port = Number(process.env.GPTLENS_PORT ?? 5173);

/**
 * The package imports its threaded build by a literal path, which only exists where the nightly
 * toolchain built it. Without it, that import becomes a module that throws, and the package falls
 * back to the single-thread build with this message as its reason.
 */
function missingThreadedBuild(): Plugin {
  const virtual = '\0gptlens-no-threaded-build';
  return {
    name: 'gptlens-missing-threaded-build',
    enforce: 'pre',
    resolveId(source, importer) {
      if (!source.endsWith('/wasm/mt/gptlens.js') || !importer) return null;
      return existsSync(fileURLToPath(new URL(source, `file://${importer}`))) ? null : virtual;
    },
    load: (id) =>
      id === virtual ? 'throw new Error("this page was built without the threaded wasm build (no nightly toolchain)");' : null,
  };
}

export default defineConfig({
  server: { host: '127.0.0.1', port, strictPort: true, headers: servingHeaders('dev') },
  preview: { host: '127.0.0.1', port, strictPort: true, headers: servingHeaders('build') },
  // The engine's Worker imports its wasm build dynamically: only ES-module workers can split code.
  // Workers are bundled with their own plugins: the worker is what imports the threaded build.
  worker: { format: 'es', plugins: () => [missingThreadedBuild()] },
  build: { target: 'es2022' },
  plugins: [missingThreadedBuild(), modelCatalog(repo)],
});
