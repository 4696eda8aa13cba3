import { it } from 'vitest';
import { startJourney, startPrivateNats } from './harness.js';
it('probe', async () => {
  const nats = await startPrivateNats();
  const t0 = Date.now();
  let j;
  try {
    j = await startJourney({ natsUrl: nats.url });
  } catch (e) { console.log(String(e).slice(0, 5000)); await nats.close(); throw e; }
  console.log('started in', Date.now() - t0);
  const t = await j.createTenant();
  const r = await j.api('/api/images', { key: t.liveKey, body: { prompt: 'a lighthouse' } });
  console.log(r.status, JSON.stringify(r.body).slice(0, 600));
  await j.stop();
  await nats.close();
}, 300_000);
