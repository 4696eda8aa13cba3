import { createCipheriv, createDecipheriv, createHash, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/** SPEC 5: sk_live_ or sk_test_ followed by at least 32 alphanumerics. */
export const API_KEY_PATTERN = /^sk_(live|test)_[a-zA-Z0-9]{32,}$/;
const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** Random part of a new key: 40 alphanumerics (~238 bits). */
export const API_KEY_RANDOM_LENGTH = 40;

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

/** Uniform random alphanumeric string (rejection sampling, no modulo bias). */
export function randomAlphanumeric(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < 248) out += ALPHANUMERIC[b % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export function generateApiKey(type: 'live' | 'test'): string {
  return `sk_${type}_${randomAlphanumeric(API_KEY_RANDOM_LENGTH)}`;
}

/** The parts kept in clear to show a key abbreviated: sk_live_AbCd...wXyZ. */
export function keyDisplayParts(key: string): { prefix: string; suffix: string } {
  const m = /^(sk_(?:live|test)_)(.*)$/.exec(key);
  const head = m ? m[1] : '';
  const rest = m ? m[2] : key;
  return { prefix: head + rest.slice(0, 4), suffix: rest.slice(-4) };
}

export function abbreviateKey(prefix: string, suffix: string): string {
  return `${prefix}...${suffix}`;
}

/** Opaque random ids and tokens (base64url). */
export function randomToken(prefix: string, bytes = 32): string {
  return `${prefix}${randomBytes(bytes).toString('base64url')}`;
}

export function randomId(prefix: string): string {
  return `${prefix}${randomBytes(8).toString('hex')}`;
}

// ---- provider credentials: AES-256-GCM ----

/** Parses CREDENTIALS_KEY (base64 of 32 bytes); throws when missing or malformed. */
export function parseCredentialsKey(value: string | undefined): Buffer {
  if (!value) throw new Error('CREDENTIALS_KEY is required by the tenancy service (base64 of 32 random bytes)');
  const key = Buffer.from(value, 'base64');
  if (key.length !== 32) throw new Error('CREDENTIALS_KEY must be 32 bytes, base64-encoded');
  return key;
}

/** iv (12) || tag (16) || ciphertext; `aad` binds the blob to its owner row. */
export function encryptSecret(key: Buffer, plaintext: string, aad: string): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: 16 });
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), ct]);
}

export function decryptSecret(key: Buffer, blob: Buffer, aad: string): string {
  // A shorter blob would hand GCM a truncated tag, which Node accepts (down to 4 bytes) and checks only that far.
  if (blob.length < 28) throw new Error('encrypted secret is malformed (shorter than iv and tag)');
  const iv = blob.subarray(0, 12);
  const tag = blob.subarray(12, 28);
  const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: 16 });
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(blob.subarray(28)), decipher.final()]).toString('utf8');
}

// ---- admin passwords: scrypt ----

const SCRYPT = { N: 16384, r: 8, p: 1, keylen: 64 } as const;

function scryptAsync(password: string, salt: Buffer, N: number, r: number, p: number, keylen: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFKC'), salt, keylen, { N, r, p, maxmem: 64 * 1024 * 1024 }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );
}

/** `scrypt$N$r$p$salt$hash` (salt and hash base64). */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(password, salt, SCRYPT.N, SCRYPT.r, SCRYPT.p, SCRYPT.keylen);
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64')}$${hash.toString('base64')}`;
}

/** Constant-time comparison; malformed hashes verify as false (after the same amount of work). */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') {
    await scryptAsync(password, randomBytes(16), SCRYPT.N, SCRYPT.r, SCRYPT.p, SCRYPT.keylen);
    return false;
  }
  const [, n, r, p, saltB64, hashB64] = parts;
  const expected = Buffer.from(hashB64, 'base64');
  const actual = await scryptAsync(password, Buffer.from(saltB64, 'base64'), Number(n), Number(r), Number(p), expected.length);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}
