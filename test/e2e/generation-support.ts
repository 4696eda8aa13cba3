/**
 * Helpers of the generation and executions end-to-end tests: sharp (a dependency of the generation
 * service, not of the e2e package), the sandbox upstream's request log and control surface.
 */
import { createRequire } from 'node:module';
import type { TestStack } from '../support/stack.js';

const requireFromGeneration = createRequire(new URL('../../services/generation/package.json', import.meta.url));
export const sharp: any = requireFromGeneration('sharp');

/** Id of the last request the sandbox received (pass to `received` to see only what came after). */
export async function lastSandboxId(s: TestStack): Promise<number> {
  return (await (await fetch(`${s.sandboxUrl}/_sandbox/requests?limit=1`)).json()).lastId;
}

/** Requests the sandbox upstream received after request id `since` (oldest first). */
export async function receivedSince(s: TestStack, since: number): Promise<any[]> {
  return (await (await fetch(`${s.sandboxUrl}/_sandbox/requests?since=${since}`)).json()).requests;
}

/** POST /_sandbox/mode, e.g. {provider:'provA', failNext:2, status:500}. */
export async function sandboxMode(s: TestStack, body: Record<string, unknown>): Promise<void> {
  await fetch(`${s.sandboxUrl}/_sandbox/mode`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
