import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { migrationSql, sqlHeader } from '../libs/outbox/src/cli/migration-sql';

/** Where the package ships its migrations as plain SQL. */
export const SQL_DIR = join(__dirname, '..', 'libs', 'outbox', 'sql');

/** The SQL files the migration classes make: file name → content. */
export async function expectedSqlFiles(): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for (const entry of await migrationSql()) {
    files.set(`${entry.stem}.up.sql`, sqlHeader(entry, 'up') + entry.up);
    files.set(`${entry.stem}.down.sql`, sqlHeader(entry, 'down') + entry.down);
  }
  return files;
}

/** The SQL files on disk: file name → content. */
export function currentSqlFiles(): Map<string, string> {
  const files = new Map<string, string>();
  let names: string[];
  try {
    names = readdirSync(SQL_DIR).filter((name) => name.endsWith('.sql'));
  } catch {
    return files;
  }
  for (const name of names.sort()) files.set(name, readFileSync(join(SQL_DIR, name), 'utf8'));
  return files;
}
