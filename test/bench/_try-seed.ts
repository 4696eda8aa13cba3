import { createDb, createTestDatabase, migrate } from '@imagegen/platform';
import { seedScale } from './scale-seed.js';

const db = await createTestDatabase(undefined, 'scaletry');
console.log(db.url);
const sql = createDb(db.url, { schema: 'library', max: 1 });
await migrate(sql, 'library', 'services/library/migrations');
await sql.end();
const r = await seedScale(db.url, {
  tenants: [
    { id: 'big', count: Number(process.argv[2]) },
    { id: 'small', count: 10000 },
  ],
  others: Number(process.argv[3]),
  otherTenants: 100,
});
console.log(r);
process.exit(0);
