/** `npm run sql:lib`: writes libs/outbox/sql/ from the migration classes (the only source of the schema). */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { currentSqlFiles, expectedSqlFiles, SQL_DIR } from './migration-sql-files';

async function main(): Promise<void> {
  const expected = await expectedSqlFiles();
  mkdirSync(SQL_DIR, { recursive: true });
  for (const name of currentSqlFiles().keys()) if (!expected.has(name)) rmSync(join(SQL_DIR, name));
  for (const [name, content] of expected) writeFileSync(join(SQL_DIR, name), content);
  process.stdout.write(`wrote ${expected.size} files to ${SQL_DIR}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`);
  process.exitCode = 1;
});
