import type { Sql } from '@imagegen/platform';

/**
 * oidc-provider storage adapter on PostgreSQL (table oauth.oidc_payloads). One class per model name;
 * `revokeByGrantId` deletes this model's artifacts of a grant (oidc-provider calls it for every token model
 * when a rotated refresh token is reused or a grant is revoked).
 */
export function createAdapterClass(sql: Sql) {
  return class PgAdapter {
    readonly type: string;

    constructor(name: string) {
      this.type = name;
    }

    async upsert(id: string, payload: Record<string, any>, expiresIn?: number): Promise<void> {
      const expiresAt = expiresIn ? new Date(Date.now() + expiresIn * 1000) : null;
      await sql`
        INSERT INTO oidc_payloads (id, type, payload, grant_id, user_code, uid, expires_at)
        VALUES (${id}, ${this.type}, ${sql.json(payload as never)}, ${payload.grantId ?? null}, ${payload.userCode ?? null},
                ${payload.uid ?? null}, ${expiresAt})
        ON CONFLICT (type, id) DO UPDATE SET payload = EXCLUDED.payload, grant_id = EXCLUDED.grant_id,
          user_code = EXCLUDED.user_code, uid = EXCLUDED.uid, expires_at = EXCLUDED.expires_at`;
    }

    private async findWhere(column: 'id' | 'uid' | 'user_code', value: string) {
      const rows = await sql`
        SELECT payload, consumed_at FROM oidc_payloads
        WHERE type = ${this.type} AND ${sql(column)} = ${value} AND (expires_at IS NULL OR expires_at > now())
        LIMIT 1`;
      const row = rows[0];
      if (!row) return undefined;
      const payload = row.payload as Record<string, unknown>;
      return row.consumed_at ? { ...payload, consumed: Math.floor((row.consumed_at as Date).getTime() / 1000) } : payload;
    }

    find(id: string) {
      return this.findWhere('id', id);
    }

    findByUid(uid: string) {
      return this.findWhere('uid', uid);
    }

    findByUserCode(userCode: string) {
      return this.findWhere('user_code', userCode);
    }

    async consume(id: string): Promise<void> {
      await sql`UPDATE oidc_payloads SET consumed_at = now() WHERE type = ${this.type} AND id = ${id} AND consumed_at IS NULL`;
    }

    async destroy(id: string): Promise<void> {
      await sql`DELETE FROM oidc_payloads WHERE type = ${this.type} AND id = ${id}`;
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      await sql`DELETE FROM oidc_payloads WHERE type = ${this.type} AND grant_id = ${grantId}`;
    }
  };
}

/** Removes rows that expired more than a day ago (artifacts are already unusable once expired). */
export async function purgeExpired(sql: Sql): Promise<number> {
  const r = await sql`DELETE FROM oidc_payloads WHERE expires_at < now() - interval '1 day'`;
  return r.count;
}
