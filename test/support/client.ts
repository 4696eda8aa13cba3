import { type ImagegenClient, imagegenClient } from '@imagegen/client';
import { checkAnswer } from './contract.js';

/**
 * The typed client of libs/client against a test gateway; like createApi, every answer it receives is checked
 * against the gateway's OpenAPI document (contract.ts).
 */
export function testClient(baseUrl: string, apiKey: string): ImagegenClient {
  return imagegenClient({
    baseUrl,
    apiKey,
    middleware: [
      {
        async onResponse({ request, response }) {
          const text = await response.clone().text();
          let body: unknown = text;
          try {
            body = text ? JSON.parse(text) : undefined;
          } catch {}
          const url = new URL(request.url);
          await checkAnswer(baseUrl, {
            method: request.method,
            path: url.pathname + url.search,
            status: response.status,
            headers: response.headers,
            body,
          });
          return undefined;
        },
      },
    ],
  });
}
