import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { resolveDatabase } from '../../tools/database-url';

/** Starts one embedded PostgreSQL for the whole run (unless DATABASE_URL is set); each spec file makes its own database. */
export default async function globalSetup(): Promise<void> {
  const database = await resolveDatabase();
  process.env.OUTBOX_TEST_ADMIN_URL = database.url;
  (globalThis as { __outboxDatabase__?: typeof database }).__outboxDatabase__ = database;
  writeFileSync(join(tmpdir(), `outbox-test-${process.pid}.url`), database.url);
  console.log(
    `\n[outbox tests] PostgreSQL: ${database.embedded ? `embedded ${database.embedded.version}` : 'DATABASE_URL'}`,
  );
}
