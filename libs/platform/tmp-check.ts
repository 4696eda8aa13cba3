import pino from 'pino';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { createNatsTransport } from './src/events/index.js';
const logger = pino({ level: 'debug' });
const o = { url: 'nats://127.0.0.1:4222', streamName: 'TMPCHK', subjectPrefix: 'tmpchk', logger };
try {
console.log('start');
const a = await createNatsTransport(o);
const s1 = await a.subscribe({ durable: 'x.y', subjects: ['tmpchk.a'], handler: async () => {} });
await s1.stop();
await a.close();
const b = await createNatsTransport({ ...o, maxAgeMs: 3600_000 });
const s2 = await b.subscribe({ durable: 'x.y', subjects: ['tmpchk.a', 'tmpchk.b'], ackWaitMs: 5000, handler: async () => {} });
await s2.stop();
const nc = await connect({ servers: o.url });
const jsm = await jetstreamManager(nc);
console.log((await jsm.streams.info('TMPCHK')).config.max_age, (await jsm.consumers.info('TMPCHK', 'x_y')).config);
await jsm.streams.delete('TMPCHK');
await nc.close(); await b.close();
} catch (e) { console.error('ERR', e); }
console.log('end');
