import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  API_KEY_PATTERN,
  abbreviateKey,
  decryptSecret,
  encryptSecret,
  generateApiKey,
  hashPassword,
  keyDisplayParts,
  parseCredentialsKey,
  randomAlphanumeric,
  sha256Hex,
  verifyPassword,
} from '../src/crypto.js';

describe('API keys', () => {
  it('generates keys of the SPEC format, unique, with 40 random alphanumerics', () => {
    const live = generateApiKey('live');
    const test = generateApiKey('test');
    expect(live).toMatch(API_KEY_PATTERN);
    expect(live.startsWith('sk_live_')).toBe(true);
    expect(test.startsWith('sk_test_')).toBe(true);
    expect(live).toHaveLength('sk_live_'.length + 40);
    const many = new Set(Array.from({ length: 500 }, () => generateApiKey('live')));
    expect(many.size).toBe(500);
  });

  it('uses every alphanumeric character and nothing else', () => {
    const s = randomAlphanumeric(20_000);
    expect(s).toMatch(/^[A-Za-z0-9]+$/);
    expect(new Set(s).size).toBe(62);
  });

  it('hashes keys with sha256 hex and abbreviates them for display', () => {
    const key = 'sk_live_ABCDefghijklmnopqrstuvwxyz0123456789WXYZ';
    expect(sha256Hex(key)).toMatch(/^[0-9a-f]{64}$/);
    expect(sha256Hex(key)).not.toBe(sha256Hex(`${key}x`));
    const { prefix, suffix } = keyDisplayParts(key);
    expect(abbreviateKey(prefix, suffix)).toBe('sk_live_ABCD...WXYZ');
  });

  it('rejects malformed keys by pattern', () => {
    expect(API_KEY_PATTERN.test('sk_live_short')).toBe(false);
    expect(API_KEY_PATTERN.test(`sk_prod_${'a'.repeat(40)}`)).toBe(false);
    expect(API_KEY_PATTERN.test(`sk_test_${'a'.repeat(31)}`)).toBe(false);
    expect(API_KEY_PATTERN.test(`sk_test_${'a'.repeat(32)}`)).toBe(true);
    expect(API_KEY_PATTERN.test(`sk_test_${'a'.repeat(31)}-`)).toBe(false);
  });
});

describe('provider credentials encryption (AES-256-GCM)', () => {
  const key = randomBytes(32);

  it('round-trips and never stores the plaintext', () => {
    const blob = encryptSecret(key, JSON.stringify(['secret-provider-key']), 'acme:provA');
    expect(blob.toString('latin1')).not.toContain('secret-provider-key');
    expect(JSON.parse(decryptSecret(key, blob, 'acme:provA'))).toEqual(['secret-provider-key']);
  });

  it('uses a fresh IV each time', () => {
    expect(encryptSecret(key, 'x', 'a').equals(encryptSecret(key, 'x', 'a'))).toBe(false);
  });

  it('refuses a tampered blob, another row (AAD) or another key', () => {
    const blob = encryptSecret(key, 'value', 'acme:provA');
    const tampered = Buffer.from(blob);
    tampered[tampered.length - 1] ^= 1;
    expect(() => decryptSecret(key, tampered, 'acme:provA')).toThrow();
    expect(() => decryptSecret(key, blob, 'other:provA')).toThrow();
    expect(() => decryptSecret(randomBytes(32), blob, 'acme:provA')).toThrow();
  });

  it('refuses a blob cut short (a truncated GCM tag is never checked as a shorter tag)', () => {
    const blob = encryptSecret(key, '', 'acme:provA');
    for (const n of [0, 16, 27]) expect(() => decryptSecret(key, blob.subarray(0, n), 'acme:provA')).toThrow(/malformed/);
    expect(decryptSecret(key, blob, 'acme:provA')).toBe('');
  });

  it('requires a 32-byte base64 key', () => {
    expect(() => parseCredentialsKey(undefined)).toThrow(/CREDENTIALS_KEY is required/);
    expect(() => parseCredentialsKey(randomBytes(16).toString('base64'))).toThrow(/32 bytes/);
    expect(parseCredentialsKey(key.toString('base64')).equals(key)).toBe(true);
  });
});

describe('admin passwords (scrypt)', () => {
  it('hashes with a salt and verifies', async () => {
    const a = await hashPassword('correct horse battery staple');
    const b = await hashPassword('correct horse battery staple');
    expect(a).toMatch(/^scrypt\$16384\$8\$1\$/);
    expect(a).not.toBe(b);
    expect(await verifyPassword('correct horse battery staple', a)).toBe(true);
    expect(await verifyPassword('correct horse battery stapler', a)).toBe(false);
    expect(await verifyPassword('', a)).toBe(false);
  });

  it('treats malformed hashes as a mismatch', async () => {
    expect(await verifyPassword('x', 'not-a-hash')).toBe(false);
    expect(await verifyPassword('x', 'scrypt$1$2$3$4')).toBe(false);
  });
});
