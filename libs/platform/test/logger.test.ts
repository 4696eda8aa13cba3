import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { lazyChildLogger } from '../src/logger.js';

function capture(level = 'info') {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  return { logger: pino({ level, base: { service: 'svc' }, redact: ['secret'] }, stream), lines };
}

describe('lazyChildLogger', () => {
  it('logs exactly what parent.child(bindings) logs', () => {
    const a = capture();
    const b = capture();
    lazyChildLogger(a.logger, { reqId: 'r1' }).info({ secret: 's', n: 1 }, 'hello %s', 'world');
    b.logger.child({ reqId: 'r1' }).info({ secret: 's', n: 1 }, 'hello %s', 'world');
    const strip = (l: Record<string, unknown>) => ({ ...l, time: 0 });
    expect(a.lines.map(strip)).toEqual(b.lines.map(strip));
    expect(a.lines[0]).toMatchObject({ reqId: 'r1', service: 'svc', secret: '[Redacted]', msg: 'hello world' });
  });

  it('makes no child for lines below the level, and one for all lines above it', () => {
    const { logger, lines } = capture('warn');
    let children = 0;
    const parent = new Proxy(logger, {
      get: (t, k) => {
        if (k !== 'child') return Reflect.get(t, k);
        return (...a: Parameters<typeof logger.child>) => {
          children++;
          return t.child(...a);
        };
      },
    });
    const lazy = lazyChildLogger(parent, { reqId: 'r2' });
    lazy.info('dropped');
    lazy.debug('dropped');
    expect(children).toBe(0);
    expect(lazy.level).toBe('warn');
    lazy.warn('kept');
    lazy.error(new Error('boom'));
    expect(children).toBe(1);
    expect(lines.map((l) => [l.reqId, l.msg])).toEqual([
      ['r2', 'kept'],
      ['r2', 'boom'],
    ]);
    expect(lazy.child({ x: 1 }).bindings()).toMatchObject({ reqId: 'r2', x: 1 });
  });
});
