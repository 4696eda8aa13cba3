import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createSteps, StoppedWhileStarting, startSteps } from '../src/lifecycle.js';

/** A logger keeping its lines, and the events the steps record. */
function setup() {
  const lines: { level: number; step?: string; ms?: number; msg: string }[] = [];
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
        cb();
      },
    }),
  );
  const events: string[] = [];
  const stepLines = () => lines.filter((l) => l.step !== undefined).map((l) => l.msg);
  return { logger, lines, events, stepLines };
}

describe('startSteps', () => {
  it('starts steps in order, stops them in reverse, each timed and logged with its name', async () => {
    const { logger, lines, events, stepLines } = setup();
    const running = await startSteps({ logger, level: 'info' }, async (step) => {
      const a = await step(
        'a',
        () => {
          events.push('start a');
          return 'A';
        },
        (v) => {
          events.push(`stop a (${v})`);
        },
      );
      await step('no stop', () => events.push('start no stop'));
      const b = await step(
        'b',
        async () => {
          events.push('start b');
          return { n: 2 };
        },
        async (v) => {
          events.push(`stop b (${v.n})`);
        },
      );
      return { a, b: b.n };
    });
    expect(running).toMatchObject({ a: 'A', b: 2 });
    await running.stop();
    expect(events).toEqual(['start a', 'start no stop', 'start b', 'stop b (2)', 'stop a (A)']);
    expect(stepLines()).toEqual(['a: started', 'no stop: started', 'b: started', 'b: stopped', 'a: stopped']);
    for (const l of lines.filter((x) => x.step)) {
      expect(l.level).toBe(30);
      expect(typeof l.ms).toBe('number');
      expect(l.ms).toBeGreaterThanOrEqual(0);
    }
  });

  it('a failure while starting stops the steps already started, in reverse, and rethrows it', async () => {
    const { logger, events, stepLines } = setup();
    const boom = new Error('boom');
    await expect(
      startSteps({ logger }, async (step) => {
        await step(
          'pool',
          () => events.push('start pool'),
          () => events.push('stop pool'),
        );
        await step(
          'server',
          () => events.push('start server'),
          () => events.push('stop server'),
        );
        await step(
          'relay',
          () => {
            throw boom;
          },
          () => events.push('stop relay'),
        );
        events.push('never');
        return {};
      }),
    ).rejects.toBe(boom);
    expect(events).toEqual(['start pool', 'start server', 'stop server', 'stop pool']);
    expect(stepLines()).toEqual(['pool: started', 'server: started', 'relay: failed to start', 'server: stopped', 'pool: stopped']);
  });

  it('a failing stop is logged and the other steps still stop; stop() is idempotent', async () => {
    const { logger, lines, events } = setup();
    const running = await startSteps({ logger }, async (step) => {
      await step(
        'first',
        () => undefined,
        () => events.push('stop first'),
      );
      await step(
        'second',
        () => undefined,
        () => {
          throw new Error('cannot stop');
        },
      );
      return {};
    });
    await Promise.all([running.stop(), running.stop()]);
    await running.stop();
    expect(events).toEqual(['stop first']);
    expect(lines.find((l) => l.msg === 'second: failed to stop')?.level).toBe(40);
  });

  it('after stop() a step is refused, and a step that finishes starting meanwhile is undone at once', async () => {
    const { logger, events } = setup();
    const steps = createSteps({ logger });
    await steps.step(
      'early',
      () => undefined,
      () => events.push('stop early'),
    );
    let release: () => void = () => {};
    const slow = steps.step(
      'slow',
      () => new Promise<void>((r) => (release = r)),
      () => events.push('stop slow'),
    );
    const stopped = steps.stop();
    expect(steps.stopping).toBe(true);
    release();
    await expect(slow).rejects.toBeInstanceOf(StoppedWhileStarting);
    await stopped;
    await expect(steps.step('late', () => events.push('start late'))).rejects.toBeInstanceOf(StoppedWhileStarting);
    expect(events).toEqual(['stop early', 'stop slow']);
    expect(steps.started).toEqual([]);
  });
});
