import { defineConfig } from 'vite';

// Built by `npm run studio:build` (run by `npm ci` through `prepare`) into studio/dist, which
// the server serves at /studio (src/http/routes/studio.ts).
export default defineConfig({
  root: import.meta.dirname,
  base: '/studio/',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // The page's Content-Security-Policy allows no inline script; keep every asset a file.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
  },
});
