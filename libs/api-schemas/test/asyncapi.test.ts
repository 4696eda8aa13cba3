import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { parse } from 'yaml';
import { buildOpenapiDocument } from '../src/index.js';
import { WEBHOOK_EVENT_TYPES } from '../src/vocab.js';

/**
 * docs/asyncapi.yaml is the catalogue of the NATS events other systems subscribe to: it must name every subject
 * the code publishes or consumes (subjectFor(prefix, '<service>.<event>')), and show each payload exactly as
 * proto/imagegen/events/v1/events.proto defines it. It also shows the webhooks a tenant's endpoint receives
 * (channels on the `tenantEndpoint` server), each exactly as the OpenAPI document's `webhooks` section.
 */

const repo = new URL('../../../', import.meta.url).pathname;
const doc = parse(readFileSync(join(repo, 'docs/asyncapi.yaml'), 'utf8'));
const proto = readFileSync(join(repo, 'proto/imagegen/events/v1/events.proto'), 'utf8');

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const f of readdirSync(dir)) {
    const p = join(dir, f);
    if (f === 'node_modules' || f === 'gen') continue;
    if (statSync(p).isDirectory()) out.push(...sources(p));
    else if (p.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** '<service>.<event>' of every subjectFor(prefix, '...') in the services' and libraries' sources. */
function subjectsInCode(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  const roots = [...readdirSync(join(repo, 'services')).map((d) => join(repo, 'services', d, 'src'))];
  roots.push(...readdirSync(join(repo, 'libs')).map((d) => join(repo, 'libs', d, 'src')));
  for (const root of roots) {
    if (!statSync(root, { throwIfNoEntry: false })?.isDirectory()) continue;
    for (const file of sources(root)) {
      for (const m of readFileSync(file, 'utf8').matchAll(/subjectFor\(\s*[^,()]+,\s*['"`]([^'"`]+)['"`]\s*\)/g)) {
        const name = m[1] as string;
        found.set(name, [...(found.get(name) ?? []), file.slice(repo.length)]);
      }
    }
  }
  return found;
}

const norm = (s: string) =>
  s
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .join('\n');

function protoMessages(): Map<string, string> {
  return new Map([...proto.matchAll(/^message (\w+) \{[\s\S]*?^\}/gm)].map((m) => [m[1] as string, norm(m[0])]));
}

const onServer = (ch: any, server: string) => (ch.servers ?? []).some((s: any) => s.$ref === `#/servers/${server}`);
const natsChannels = () => Object.values<any>(doc.channels).filter((c) => onServer(c, 'jetstream'));
const webhookChannels = () => Object.entries<any>(doc.channels).filter(([, c]) => onServer(c, 'tenantEndpoint'));

describe('docs/asyncapi.yaml', () => {
  test('is AsyncAPI 3.0 with a channel, a message and a send operation per event', () => {
    expect(doc.asyncapi).toBe('3.0.0');
    expect(Object.keys(doc.servers).sort()).toEqual(['jetstream', 'tenantEndpoint']);
    for (const [name, ch] of Object.entries<any>(doc.channels)) {
      expect(ch.servers, name).toHaveLength(1);
      if (onServer(ch, 'jetstream')) expect(ch.address, name).toMatch(/^imagegen\.[a-z_]+\.[a-z_]+$/);
      else expect(ch.address, name).toBeNull(); // a webhook's address is the endpoint's URL
      const refs = Object.values<any>(ch.messages).map((m) => m.$ref);
      expect(refs.length, name).toBe(1);
      expect(doc.components.messages[refs[0].split('/').pop()], name).toBeDefined();
      expect(
        Object.values<any>(doc.operations).some((o) => o.channel.$ref === `#/channels/${name}` && o.action === 'send'),
        name,
      ).toBe(true);
    }
    expect(Object.keys(doc.components.schemas.EventHeaders.properties)).toEqual(expect.arrayContaining(['Nats-Msg-Id', 'traceparent']));
  });

  test('names every subject the code publishes or subscribes to, and no other', () => {
    const inCode = subjectsInCode();
    expect(inCode.size).toBeGreaterThan(0);
    const catalogued = new Set(natsChannels().map((c) => c.address));
    for (const [name, files] of inCode) expect(catalogued.has(`imagegen.${name}`), `${name} (used in ${files.join(', ')})`).toBe(true);
    expect([...catalogued].sort()).toEqual([...inCode.keys()].map((n) => `imagegen.${n}`).sort());
  });

  test('shows each payload exactly as events.proto defines it', () => {
    const messages = protoMessages();
    const shown = new Map(
      Object.entries<any>(doc.components.messages)
        .filter(([, m]) => m.contentType === 'application/x-protobuf')
        .map(([name, m]) => {
          expect(m.payload.schemaFormat, name).toBe('application/vnd.google.protobuf;version=3');
          return [name, norm(m.payload.schema)];
        }),
    );
    expect([...shown.keys()].sort()).toEqual([...messages.keys()].sort());
    for (const [name, text] of messages) expect(shown.get(name), name).toBe(text);
  });

  test('shows each webhook exactly as the OpenAPI document: its event types, body schema and headers', () => {
    const hooks = Object.values<any>(buildOpenapiDocument().webhooks as object).map((h) => h.post);
    const channels = webhookChannels();
    expect(channels).toHaveLength(hooks.length);
    const events = (x: { 'x-webhook-events': string[] }) => x['x-webhook-events'].join(',');
    for (const hook of hooks) {
      const found = channels
        .map(([, c]) => doc.components.messages[(Object.values<any>(c.messages)[0].$ref as string).split('/').pop() as string])
        .filter((m) => events(m) === events(hook));
      expect(found, events(hook)).toHaveLength(1);
      const [m] = found;
      expect(m.contentType).toBe('application/json');
      expect(m.payload, events(hook)).toEqual(hook.requestBody.content['application/json'].schema);
      expect(m.traits).toEqual([{ $ref: '#/components/messageTraits/webhook' }]);
    }
    const headers = doc.components.schemas.WebhookHeaders;
    const params = hooks[0].parameters as { name: string; schema: object; description: string }[];
    expect(headers.required).toEqual(params.map((p) => p.name));
    for (const p of params) expect(headers.properties[p.name], p.name).toEqual({ ...p.schema, description: p.description });
    // Every event type an endpoint can subscribe to has its webhook (and webhook.test, which none subscribes to).
    expect(hooks.flatMap((h) => h['x-webhook-events']).sort()).toEqual([...WEBHOOK_EVENT_TYPES, 'webhook.test'].sort());
  });
});
