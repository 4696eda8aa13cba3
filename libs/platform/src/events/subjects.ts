/** `imagegen.library.image_stored` = subjectFor('imagegen', 'library.image_stored'). */
export function subjectFor(prefix: string, name: string): string {
  return `${prefix}.${name}`;
}

/** NATS subject matching: `*` matches exactly one token, `>` (last) matches one or more tokens. */
export function subjectMatches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return i === p.length - 1 && s.length > i;
    if (i >= s.length) return false;
    if (p[i] !== '*' && p[i] !== s[i]) return false;
  }
  return p.length === s.length;
}

export function matchesAny(patterns: string[], subject: string): boolean {
  return patterns.some((p) => subjectMatches(p, subject));
}

/** JetStream consumer names may not contain `.`, `*`, `>`, whitespace or path separators. */
export function sanitizeDurable(name: string): string {
  const s = name.replace(/[^A-Za-z0-9_-]/g, '_');
  if (!s) throw new Error('durable name is empty');
  return s;
}

/**
 * Why `subject` cannot be published to (undefined when it can): NATS subjects are non-empty
 * dot-separated tokens without whitespace, and a published subject is literal (no `*` or `>` token).
 */
export function invalidPublishSubject(subject: string): string | undefined {
  if (subject.length === 0) return 'empty subject';
  if (/\s/.test(subject)) return 'whitespace in subject';
  const tokens = subject.split('.');
  if (tokens.some((t) => t.length === 0)) return 'empty token in subject';
  if (tokens.some((t) => t === '*' || t === '>')) return 'wildcard in a published subject';
  return undefined;
}
