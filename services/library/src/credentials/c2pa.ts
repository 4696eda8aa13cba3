import { existsSync, readFileSync } from 'node:fs';
import { Builder, LocalSigner, Reader } from '@contentauth/c2pa-node';
import type { Manifest, ManifestStore } from '@contentauth/c2pa-types';
import { buildInfo, type Config, type Logger, StartupError } from '@imagegen/platform';
import sharp from 'sharp';
import {
  type ContentCredentials,
  type CredentialsReport,
  type CredentialsSummary,
  type IngredientAsset,
  NO_CREDENTIALS,
  type SignRequest,
  TRAINED_ALGORITHMIC_MEDIA,
} from './content-credentials.js';

/** c2pa-rs settings: no manifest thumbnail (it costs ~30x the signing and doubles the file, issue 39). */
const BUILDER_SETTINGS = { builder: { thumbnail: { enabled: false } }, verify: { verify_after_sign: false } };

/** A setting given as PEM text or as the path of a PEM file; `name` only names it in errors (never its value). */
export function pemSetting(value: string, name: string): string {
  const v = value.trim();
  if (v.startsWith('-----BEGIN')) return `${v}\n`;
  if (!existsSync(v)) throw new StartupError(`${name} is neither PEM text nor the path of a readable file`);
  const text = readFileSync(v, 'utf8');
  if (!text.includes('-----BEGIN')) throw new StartupError(`${name} names a file that holds no PEM block`);
  return text;
}

/**
 * The c2pa-node implementation: ES256 with the configured key and chain (leaf first, then intermediates; the root
 * is a trust anchor, never in the chain). The key is read once into the native signer and never logged or answered.
 */
export class C2paCredentials implements ContentCredentials {
  readonly signing = true;
  private readonly signer: LocalSigner;
  private readonly settings: Record<string, unknown>;
  private readonly generator = { name: 'imagegen', version: buildInfo().version };

  constructor(opts: { keyPem: string; chainPem: string; trustAnchorsPem?: string }) {
    try {
      this.signer = LocalSigner.newSigner(Buffer.from(opts.chainPem), Buffer.from(opts.keyPem), 'es256');
    } catch {
      // c2pa-rs's message may quote what it could not parse: never the key's text.
      throw new StartupError('C2PA_SIGNING_KEY / C2PA_SIGNING_CHAIN: not an ES256 (P-256) private key and its certificate chain');
    }
    this.settings = opts.trustAnchorsPem ? { trust: { trust_anchors: opts.trustAnchorsPem } } : {};
  }

  async sign(req: SignRequest): Promise<{ data: Buffer; summary: CredentialsSummary }> {
    const builder = Builder.withJson(this.manifest(req), BUILDER_SETTINGS);
    if (req.parent) await builder.addIngredient(JSON.stringify(ingredient(req.parent, 'parentOf', 'parent')), asset(req.parent));
    for (const [i, ref] of (req.references ?? []).entries()) {
      await builder.addIngredient(JSON.stringify(ingredient(ref, 'componentOf', `reference-${i + 1}`)), asset(ref));
    }
    const out: { buffer: Buffer | null } = { buffer: null };
    builder.sign(this.signer, { buffer: req.data, mimeType: req.mimeType }, out);
    if (!out.buffer) throw new Error('c2pa signing produced no output');
    // A manifest with no ingredient says what every fresh signature of this signer says (read back once, at start:
    // createContentCredentials); one with ingredients is read back, as their own manifests weigh in its validation.
    const plain = !req.parent && !req.references?.length;
    return { data: out.buffer, summary: plain && this.fresh ? this.fresh : await this.summaryOf(out.buffer, req.mimeType) };
  }

  /** What a fresh signature with no ingredient validates as (set by createContentCredentials' start-up probe). */
  private fresh: CredentialsSummary | undefined;
  rememberFreshSummary(summary: CredentialsSummary): void {
    this.fresh = summary.present ? Object.freeze({ ...summary }) : undefined;
  }

  read(data: Buffer, mimeType: string): Promise<CredentialsReport> {
    return readCredentials(data, mimeType, this.settings);
  }

  /** The summary recorded with the row: the signed file read back (what a reader will say of it). */
  private async summaryOf(data: Buffer, mimeType: string): Promise<CredentialsSummary> {
    const { manifestStore: _, ...summary } = await this.read(data, mimeType);
    return summary;
  }

  private manifest(req: SignRequest): Manifest {
    const agent = { name: req.modelId || 'unknown model' };
    const described = req.prompt ? { description: req.prompt } : {};
    const actions = req.parent
      ? [
          { action: 'c2pa.opened', parameters: { ingredientIds: ['parent'] } },
          { action: 'c2pa.edited', digitalSourceType: TRAINED_ALGORITHMIC_MEDIA, softwareAgent: agent, ...described },
        ]
      : [{ action: 'c2pa.created', digitalSourceType: TRAINED_ALGORITHMIC_MEDIA, softwareAgent: agent, ...described }];
    const references = (req.references ?? []).map((_, i) => `reference-${i + 1}`);
    if (references.length) actions.push({ action: 'c2pa.placed', parameters: { ingredientIds: references } } as (typeof actions)[number]);
    return {
      claim_generator_info: [this.generator],
      title: `${req.operation}.${req.mimeType.split('/')[1] ?? 'img'}`,
      format: req.mimeType,
      assertions: [{ label: 'c2pa.actions', data: { actions } }],
    } as unknown as Manifest;
  }
}

/** Reads and validates a file's manifest store with c2pa-rs (`settings`: the trust anchors). */
export async function readCredentials(data: Buffer, mimeType: string, settings: Record<string, unknown>): Promise<CredentialsReport> {
  let store: ManifestStore | undefined;
  try {
    store = (await Reader.fromAsset({ buffer: data, mimeType }, settings))?.json();
  } catch (err) {
    if (isNoManifest(err)) return { ...NO_CREDENTIALS, manifestStore: null };
    throw err;
  }
  if (!store?.active_manifest) return { ...NO_CREDENTIALS, manifestStore: null };
  const active = store.manifests?.[store.active_manifest] as Manifest | undefined;
  return {
    present: true,
    validationState: store.validation_state ?? null,
    issuer: active?.signature_info?.issuer ?? null,
    manifestStore: store as unknown as Record<string, unknown>,
  };
}

const ingredient = (a: IngredientAsset, relationship: 'parentOf' | 'componentOf', label: string) => ({
  title: a.title,
  format: a.mimeType,
  relationship,
  label,
});

const asset = (a: IngredientAsset) => ({ buffer: a.data, mimeType: a.mimeType });

const isNoManifest = (err: unknown) => /ManifestNotFound|JumbfNotFound|no JUMBF|not found/i.test(String((err as Error)?.message ?? err));

/** Signing off or not configured: stored bytes as they came, and reading still reports what a file carries. */
export class NoCredentials implements ContentCredentials {
  readonly signing = false;
  private readonly settings: Record<string, unknown>;
  constructor(trustAnchorsPem?: string) {
    this.settings = trustAnchorsPem ? { trust: { trust_anchors: trustAnchorsPem } } : {};
  }
  async sign(req: SignRequest) {
    return { data: req.data, summary: NO_CREDENTIALS };
  }
  read(data: Buffer, mimeType: string): Promise<CredentialsReport> {
    return readCredentials(data, mimeType, this.settings);
  }
}

/**
 * The configured implementation: signing when C2PA_SIGNING is on (the default) and both C2PA_SIGNING_KEY and
 * C2PA_SIGNING_CHAIN are set; a key without its chain (or the reverse) is a startup error. At start it signs a
 * 1x1 PNG and reads it back, so a key, chain or trust anchor c2pa-rs refuses stops the start with one line.
 */
export async function createContentCredentials(config: Config, logger?: Logger): Promise<ContentCredentials> {
  const c = config.contentCredentials;
  const anchors = c?.trustAnchors ? pemSetting(c.trustAnchors, 'C2PA_TRUST_ANCHORS') : undefined;
  if (!c?.enabled) {
    logger?.info('Content Credentials signing is off (C2PA_SIGNING=off)');
    return new NoCredentials(anchors);
  }
  if (!c.signingKey && !c.signingChain) {
    logger?.warn('Content Credentials are not configured (C2PA_SIGNING_KEY, C2PA_SIGNING_CHAIN): images are stored unsigned');
    return new NoCredentials(anchors);
  }
  if (!c.signingKey || !c.signingChain) {
    throw new StartupError(
      `${c.signingKey ? 'C2PA_SIGNING_CHAIN' : 'C2PA_SIGNING_KEY'} is required with ${c.signingKey ? 'C2PA_SIGNING_KEY' : 'C2PA_SIGNING_CHAIN'}`,
    );
  }
  const credentials = new C2paCredentials({
    keyPem: pemSetting(c.signingKey, 'C2PA_SIGNING_KEY'),
    chainPem: pemSetting(c.signingChain, 'C2PA_SIGNING_CHAIN'),
    trustAnchorsPem: anchors,
  });
  const probe = await sharp({ create: { width: 1, height: 1, channels: 3, background: '#000' } })
    .png()
    .toBuffer();
  let summary: CredentialsSummary;
  try {
    ({ summary } = await credentials.sign({ data: probe, mimeType: 'image/png', operation: 'generate', modelId: 'startup-check' }));
  } catch (err) {
    throw new StartupError(`Content Credentials: c2pa refused the signing key or chain (${firstLine(err)})`);
  }
  credentials.rememberFreshSummary(summary);
  logger?.info({ issuer: summary.issuer, validationState: summary.validationState }, 'Content Credentials signing is on');
  if (anchors && summary.validationState !== 'Trusted') {
    logger?.warn({ validationState: summary.validationState }, 'C2PA_TRUST_ANCHORS does not make the signing chain Trusted');
  }
  return credentials;
}

/** An error's first line, without anything PEM-like (a key's text never reaches a log). */
function firstLine(err: unknown): string {
  const m = String((err as Error)?.message ?? err).split('\n')[0];
  return m.replace(/-----BEGIN[\s\S]*/g, '[PEM]').slice(0, 200);
}
