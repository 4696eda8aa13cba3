/**
 * Sandbox provider: a local upstream that speaks provA's and provB's HTTP protocols and renders
 * deterministic pictures with sharp (the prompt's words written on a colour derived from the prompt).
 * Used by `pnpm start` when PROVA_BASE_URL / PROVB_BASE_URL are not set, and by the tests. The stack
 * sets PROVA_BASE_URL=`${httpUrl}/provA` and PROVB_BASE_URL=`${httpUrl}/provB`.
 *
 * Protocols
 *   provA (Gemini-style)  POST {base}/v1beta/models/{model}:generateContent, key in `x-goog-api-key` (or ?key=)
 *       body {contents:[{role, parts:[{text}|{inlineData:{mimeType,data}}]}], systemInstruction:{parts:[{text}]},
 *             generationConfig:{responseModalities, imageConfig:{aspectRatio, imageSize}, thinkingConfig}, tools:[{googleSearch:{}}]}
 *       -> {candidates:[{content:{parts:[{text},{inlineData:{mimeType:'image/png',data}}]}, finishReason}], promptFeedback, usageMetadata}
 *       sizes: the ten ratios x imageSize 0.5K|512 (half), 1K (1:1 = 1024x1024, 16:9 = 1376x768, ...), 2K (x2), 4K (x4).
 *       errors {error:{code, message, status, details:[{reason}]}}.
 *   provB (images-API-style) POST {base}/v1/images/generations (JSON) and /v1/images/edits (multipart, files image[]),
 *       `Authorization: Bearer <key>`, fields model, prompt, n, size (auto|WxH), quality, output_format,
 *       output_compression, background, moderation -> {created, data:[{b64_json}], usage, size, output_format, ...};
 *       errors {error:{message, type, param, code}}.
 *
 * Control surface (for tests and demos)
 *   API keys: `bad-*` -> 401, `forbidden-*` -> 403, `quota-*` -> 429 (quota), `ratelimit-*` -> 429 (rate limit);
 *             a missing key -> 401; any other key is accepted.
 *   Prompt directives (stripped from the rendered text):
 *     [[safety]]        provA: promptFeedback.blockReason 'SAFETY' (no candidates); provB: 400 code 'moderation_blocked'
 *     [[safety:prohibited]] provA: blockReason 'PROHIBITED_CONTENT'
 *     [[image-safety]]  provA: candidate with finishReason 'IMAGE_SAFETY' and no image; provB: as [[safety]]
 *     [[fail]] / [[fail:503]]  answer 500 (or the given status) with the provider's error body
 *     [[delay:ms]]      wait ms before answering
 *     [[text-only]]     provA: a candidate with a text part only (no image)
 *   Admin endpoints (no auth; the sandbox never listens on a public interface):
 *     POST   /_sandbox/mode {provider:'provA'|'provB'|'all', failNext?, status? (default 500), delayMs?, safetyNext?, reset?}
 *            -> {modes}; the next `failNext` requests of that provider answer `status` (before key checks),
 *            `delayMs` delays every request, `safetyNext` blocks the next requests as unsafe.
 *     GET    /_sandbox/mode -> {modes};  DELETE /_sandbox/mode resets both providers.
 *     GET    /_sandbox/requests?provider=&apiKey=&contains=&since=<id>&limit= -> {requests: RecordedRequest[], total, lastId}
 *            every request received, oldest first, including refused ones: provider, endpoint, model, apiKey,
 *            prompt (all text parts), systemInstruction, imageInputs (+ mime types), aspectRatio, imageSize,
 *            responseModalities, tools, thinkingConfig, n, size, quality, outputFormat, outputCompression,
 *            background, moderation, status, error, imagesReturned, width, height, body (base64 redacted).
 *     DELETE /_sandbox/requests -> {cleared}
 *     GET    /_sandbox/health
 */
import { type ServiceContext, type StartService, startSteps } from '@imagegen/platform';
import { buildSandboxApp, createState, type SandboxState } from './server.js';

type Logger = ServiceContext['logger'];

export type { ProviderMode, RecordedRequest, SandboxProvider, SandboxState } from './server.js';

export interface RunningSandbox {
  httpUrl: string;
  state: SandboxState;
  stop(): Promise<void>;
}

export async function startSandbox(opts: { port?: number; host?: string; logger?: Logger } = {}): Promise<RunningSandbox> {
  const state = createState();
  const app = await buildSandboxApp(state, opts.logger?.child({ component: 'sandbox-provider' }));
  const address = await app.listen({ port: opts.port ?? 0, host: opts.host ?? '127.0.0.1' });
  const port = Number(new URL(address).port);
  return {
    httpUrl: `http://127.0.0.1:${port}`,
    state,
    stop: async () => {
      await app.close();
    },
  };
}

export const start: StartService = (ctx) =>
  startSteps({ logger: ctx.logger }, async (step) => {
    const sb = await step(
      'http server',
      () => startSandbox({ port: ctx.config.httpPort || 0, logger: ctx.logger }),
      (sb) => sb.stop(),
    );
    return { httpUrl: sb.httpUrl };
  });
