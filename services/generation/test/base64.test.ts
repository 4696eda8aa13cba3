import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeBase64 } from '../src/providers/types.js';

/** The provider answers' image data: strict base64 in either alphabet, padding optional, whitespace ignored. */
describe('decodeBase64', () => {
  const encodings = (bytes: Uint8Array) => {
    const std = Buffer.from(bytes).toString('base64');
    const url = Buffer.from(bytes).toString('base64url');
    return [std, std.replace(/=+$/, ''), url, `${url}${'='.repeat((4 - (url.length % 4)) % 4)}`];
  };

  it('decodes every encoding of any bytes, with or without padding, wrapped or not', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 300 }), fc.integer({ min: 1, max: 76 }), (bytes, width) => {
        for (const e of encodings(bytes)) {
          expect(Buffer.compare(decodeBase64(e, 'provA'), Buffer.from(bytes))).toBe(0);
          const wrapped = e.replace(new RegExp(`(.{${width}})`, 'g'), '$1\n');
          expect(Buffer.compare(decodeBase64(wrapped, 'provA'), Buffer.from(bytes))).toBe(0);
        }
      }),
    );
  });

  it('refuses any character outside the alphabets, wherever it is, and impossible lengths', () => {
    const invalid = fc.constantFrom('!', '.', '*', '%', '\u00e9', '\u0000', '=', '"', '\\\\');
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 120 }), invalid, fc.nat(), (bytes, bad, at) => {
        for (const e of encodings(bytes)) {
          const i = at % (e.replace(/=+$/, '').length + 1);
          const broken = `${e.slice(0, i)}${bad}${e.slice(i)}`;
          // A '=' inserted right before the padding is just more padding only when it makes valid padding.
          if (bad === '=' && /^[A-Za-z0-9+/_-]+={0,2}$/.test(broken) && broken.replace(/=+$/, '').length % 4 !== 1) continue;
          expect(() => decodeBase64(broken, 'provA'), JSON.stringify(broken)).toThrow(/not valid base64/);
        }
      }),
    );
    for (const s of ['', '=', 'A', 'AAAAA', 'AA===']) expect(() => decodeBase64(s, 'provB')).toThrow(/not valid base64/);
  });
});
