import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { TroupeError } from '../../errors.ts';
import { defineRoute, type Route, type RouteResult } from '../route.ts';

/** Where `npm ci` (the `prepare` script) puts the built studio; never committed. */
export const STUDIO_DIST = fileURLToPath(new URL('../../../studio/dist/', import.meta.url));

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
};

/**
 * Studio pages run only the bundle's own files: no inline script or style, no other origin.
 * `connect-src 'self'` covers the API and its same-origin WebSockets.
 */
const STUDIO_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const COMMON_HEADERS = {
  'content-security-policy': STUDIO_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

interface StudioFile {
  bytes: Uint8Array;
  contentType: string;
}

/**
 * Serves the studio's built files from memory. Only files found in the build folder are ever
 * served, looked up by exact name, so no request path can reach anything else on disk.
 */
export class StudioFiles {
  readonly #root: string;
  #files: Map<string, StudioFile> | null = null;

  constructor(root: string = STUDIO_DIST) {
    this.#root = root;
  }

  /** Read once; a missing build is looked for again on the next request (it may be built meanwhile). */
  async #load(): Promise<Map<string, StudioFile>> {
    if (this.#files) return this.#files;
    let names: string[];
    try {
      names = (await readdir(this.#root, { recursive: true, withFileTypes: true }))
        .filter((entry) => entry.isFile())
        .map((entry) => path.relative(this.#root, path.join(entry.parentPath, entry.name)).split(path.sep).join('/'));
    } catch {
      names = [];
    }
    if (!names.includes('index.html')) {
      throw new TroupeError('service_unavailable', 'The studio is not built: run `npm run studio:build` (`npm ci` does it), then reload.', {
        detailCode: 'studio_not_built',
      });
    }
    const files = new Map<string, StudioFile>();
    for (const name of names) {
      const type = CONTENT_TYPES[path.extname(name).toLowerCase()] ?? 'application/octet-stream';
      files.set(name, { bytes: await readFile(path.join(this.#root, name)), contentType: type });
    }
    this.#files = files;
    return files;
  }

  /** The reply for a path under /studio: a built file, or index.html for the page routes. */
  async reply(requestPath: string): Promise<RouteResult> {
    const files = await this.#load();
    const name = relativeName(requestPath);
    const file = name === null ? undefined : files.get(name);
    if (file && name !== null) {
      // Vite names every file under assets/ by its content hash, so a name never changes meaning.
      const cache = name.startsWith('assets/') ? 'public, max-age=31536000, immutable' : 'no-cache';
      return { body: null, raw: { contentType: file.contentType, text: file.bytes }, headers: { ...COMMON_HEADERS, 'cache-control': cache } };
    }
    if (name === null || name.startsWith('assets/') || path.extname(name) !== '') {
      throw new TroupeError('not_found', `The studio has no file at ${requestPath}.`, { detailCode: 'studio_file_not_found' });
    }
    const index = files.get('index.html') as StudioFile;
    return { body: null, raw: { contentType: index.contentType, text: index.bytes }, headers: { ...COMMON_HEADERS, 'cache-control': 'no-cache' } };
  }
}

/** `assets/x.js` from `/studio/assets/x.js`; null for anything that is not a plain relative name. */
function relativeName(requestPath: string): string | null {
  const rest = requestPath.replace(/^\/studio\/?/, '').replace(/\/$/, '');
  if (rest === '') return 'index.html';
  const segments: string[] = [];
  for (const raw of rest.split('/')) {
    let segment: string;
    try {
      segment = decodeURIComponent(raw);
    } catch {
      return null;
    }
    if (segment === '' || segment === '.' || segment === '..' || /[\\/\0]/.test(segment)) return null;
    segments.push(segment);
  }
  return segments.join('/');
}

/** Page routes of the studio are up to three segments deep (`/studio/knowledge/:characterId`). */
const DEPTHS = ['/studio', '/studio/:s1', '/studio/:s1/:s2', '/studio/:s1/:s2/:s3'];

/** GET /studio/…: the web console; it uses only the public API, with the key the person pastes. */
export function studioRoutes(files: StudioFiles = new StudioFiles()): Route[] {
  return DEPTHS.map((routePath) =>
    defineRoute({
      method: 'GET',
      path: routePath,
      auth: 'none',
      tags: ['Studio'],
      summary: 'Troupe Studio, the web console',
      response: { status: 200, description: 'A studio page or file', contentType: 'text/html' },
      errors: [404, 503],
      handler: ({ path: requestPath }) => files.reply(requestPath),
    }),
  );
}
