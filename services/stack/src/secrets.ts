import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { StartupError } from '@imagegen/platform';

/**
 * Secrets the all-in-one shape generates on first start and keeps in `$DATA_DIR/secrets.json` (mode 0600)
 * so later starts reuse them: the legacy admin token, the credentials encryption key, the first admin's
 * password and the demo tenant's test key.
 */
export interface LocalSecrets {
  adminToken: string;
  credentialsKey: string;
  adminPassword: string;
  demoTenant?: { tenantId: string; testKey: string };
}

export async function loadOrCreateSecrets(
  dataDir: string,
): Promise<{ secrets: LocalSecrets; firstStart: boolean; save(s: LocalSecrets): Promise<void> }> {
  const file = join(dataDir, 'secrets.json');
  await mkdir(dataDir, { recursive: true });
  const save = (s: LocalSecrets) => writeFile(file, JSON.stringify(s, null, 2), { mode: 0o600 });
  if (existsSync(file)) {
    let secrets: LocalSecrets;
    try {
      secrets = JSON.parse(readFileSync(file, 'utf8'));
    } catch (err) {
      throw new StartupError(`${file} is not valid JSON (${(err as Error).message}): repair it, or delete DATA_DIR to start over`);
    }
    return { secrets, firstStart: false, save };
  }
  const secrets: LocalSecrets = {
    adminToken: `adm_${randomBytes(24).toString('base64url')}`,
    credentialsKey: randomBytes(32).toString('base64'),
    adminPassword: randomBytes(12).toString('base64url'),
  };
  await save(secrets);
  return { secrets, firstStart: true, save };
}
