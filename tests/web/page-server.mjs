// The built page (web/dist) served by Vite's preview server, as `npm start` serves it (COOP/COEP,
// model catalog), on a free port of 127.0.0.1. It closes itself after a time limit even if the
// caller never does, so a crashed test run leaves no server behind.
import { fileURLToPath } from 'node:url';
import { preview } from 'vite';

const web = fileURLToPath(new URL('../../web/', import.meta.url));

/** `outDir`: another built page to serve instead (npm run bench:live's LIVE_BUILDS compares builds). */
export async function servePage({ limitSeconds = 900, outDir = undefined } = {}) {
  const server = await preview({
    root: web,
    configFile: `${web}vite.config.ts`,
    logLevel: 'warn',
    ...(outDir ? { build: { outDir } } : {}),
    preview: { port: 0, host: '127.0.0.1', strictPort: true, open: false },
  });
  const { port } = server.httpServer.address();
  const close = () => new Promise((done) => server.httpServer.close(() => done()));
  setTimeout(() => {
    server.httpServer.closeAllConnections();
    void close();
  }, limitSeconds * 1000).unref();
  return { url: `http://127.0.0.1:${port}`, close };
}
