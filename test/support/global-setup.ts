import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { resolveDatabase } from '../../tools/database-url';
// By path, not by the package name: global-setup runs outside jest's resolver, so the package's source
// export condition does not apply here and `nestjs-pg-outbox` would resolve to its build.
import { outboxMigrations } from '../../libs/outbox/src/migrations';
import { buildForChildren, CHILD_REGISTER_ENV } from './children-build';
import { createTemplateDatabase, TEMPLATE_DATABASE_ENV } from './template-database';

/**
 * Starts one embedded PostgreSQL for the whole run (unless DATABASE_URL is set) and migrates a template
 * database once; each spec file makes its own database as a copy of it. Compiles the TypeScript that test processes
 * of their own run, once for all of them (children-build.ts).
 */
export default async function globalSetup(): Promise<void> {
  const database = await resolveDatabase();
  process.env.OUTBOX_TEST_ADMIN_URL = database.url;
  (globalThis as { __outboxDatabase__?: typeof database }).__outboxDatabase__ = database;
  writeFileSync(join(tmpdir(), `outbox-test-${process.pid}.url`), database.url);
  const template = await createTemplateDatabase(database.url, outboxMigrations).catch(async (error) => {
    await database.stop();
    throw error;
  });
  process.env[TEMPLATE_DATABASE_ENV] = template.name;
  process.env[CHILD_REGISTER_ENV] = await buildForChildren();
  (globalThis as { __outboxTemplate__?: typeof template }).__outboxTemplate__ = template;
  console.log(
    `\n[outbox tests] PostgreSQL: ${database.embedded ? `embedded ${database.embedded.version}` : 'DATABASE_URL'}; ` +
      `migrated template ${template.name}${template.partitioned ? ' (partitioned layout)' : ''} in ${template.tookMs} ms`,
  );
}
