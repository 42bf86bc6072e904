// The dashboard's build: static files under dist/, served by trainyard-api
// --ui-dir at /ui/. The API's CSP allows only 'self' scripts and styles, so
// nothing may be inlined into index.html.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  base: '/ui/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    target: 'es2020',
  },
  server: {
    // development: `TY_API_URL=http://127.0.0.1:PORT npx vite` proxies the API
    proxy: process.env.TY_API_URL ? { '/v1': process.env.TY_API_URL } : undefined,
  },
  test: { include: ['test/**/*.test.ts'], environment: 'node' },
});
