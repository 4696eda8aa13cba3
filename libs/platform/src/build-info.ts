import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * What this process runs (issue 40, "Versions"): the product's one version, the root package.json's `version`
 * (CHANGELOG.md names each), and the git commit. The commit comes from IMAGEGEN_COMMIT, set when the container
 * image is built (.ci/build-image passes it to deploy/Dockerfile, which also writes both as OCI labels); without
 * it, from `git rev-parse HEAD` in the repository when a .git is there (a checkout run with tsx); else 'unknown'.
 * Served by the gateway's /health, every ops server's /livez and /health, and /metrics (imagegen_build_info).
 */
export interface BuildInfo {
  version: string;
  commit: string;
}

/** The repository (or image) root: /app in the image, the checkout otherwise. */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The lookup itself, uncached (tests give their own env and root). */
export function readBuildInfo(opts: { env?: NodeJS.ProcessEnv; root?: string } = {}): BuildInfo {
  const env = opts.env ?? process.env;
  const root = opts.root ?? ROOT;
  return { version: rootVersion(root), commit: env.IMAGEGEN_COMMIT?.trim() || gitHead(root) || 'unknown' };
}

let cached: BuildInfo | undefined;
/** This process's build info, looked up once (call it at start so no request pays for the git call). */
export function buildInfo(): BuildInfo {
  cached ??= Object.freeze(readBuildInfo());
  return cached;
}

function rootVersion(root: string): string {
  try {
    const v = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version?: unknown }).version;
    return typeof v === 'string' && v ? v : 'unknown';
  } catch {
    return 'unknown';
  }
}

function gitHead(root: string): string | undefined {
  if (!existsSync(join(root, '.git'))) return undefined;
  try {
    const out = execFileSync('git', ['rev-parse', 'HEAD'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 5000,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const sha = out.trim();
    return /^[0-9a-f]{40,64}$/.test(sha) ? sha : undefined;
  } catch {
    return undefined;
  }
}
