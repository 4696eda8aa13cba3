import preact from '@preact/preset-vite';
import { defineConfig } from 'vite';

/**
 * The web console (issue 38): served by the gateway under /console. `pnpm install` builds it (the root postinstall
 * runs scripts/build.mjs); `npx vite` in this folder serves it for development with /api, /admin and /console/session
 * proxied to a running stack (CONSOLE_API, default http://127.0.0.1:8080).
 */
const api = process.env.CONSOLE_API ?? 'http://127.0.0.1:8080';
export default defineConfig({
  base: '/console/',
  plugins: [preact()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // The gateway's CSP allows no inline script: Vite's modulepreload polyfill would be one.
    modulePreload: { polyfill: false },
    target: 'es2022',
    assetsInlineLimit: 0,
    sourcemap: false,
  },
  server: {
    proxy: Object.fromEntries(['/api', '/admin', '/console/session', '/files'].map((p) => [p, { target: api, changeOrigin: false }])),
  },
});
