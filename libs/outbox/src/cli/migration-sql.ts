import type { MigrationInterface, QueryRunner } from 'typeorm';
import { outboxMigrations } from '../migrations';
import { outboxMigrationsFor } from '../migrations/outbox-migrations.factory';
import { DEFAULT_OUTBOX_SCHEMA } from '../model/table-names';

/** One outbox migration as plain SQL, in the order the TypeORM classes run. */
export interface MigrationSql {
  /** 1-based position, the `NNNN` of the SQL file names. */
  readonly number: number;
  /** File stem, e.g. `0001-outbox-core`. */
  readonly stem: string;
  /** The TypeORM class this SQL is recorded from, e.g. `OutboxCore1764428400000`. */
  readonly className: string;
  /** The schema it builds in. */
  readonly schema: string;
  /** The migration's name in that schema, e.g. `OutboxCore_billing_1764428400000` (the class name in `public`). */
  readonly migrationName: string;
  readonly up: string;
  readonly down: string;
}

/**
 * Records the statements each migration class sends, so the SQL files and `npx nestjs-pg-outbox sql` come from
 * the classes themselves: one source. The classes only call `query()` with literal SQL (they are frozen history),
 * so a runner that writes the statements down sees exactly what TypeORM would send — in another `schema`, what
 * the classes of `outboxMigrationsFor({ schema })` send.
 */
export async function migrationSql({ schema = DEFAULT_OUTBOX_SCHEMA }: { schema?: string } = {}): Promise<
  MigrationSql[]
> {
  const inSchema = outboxMigrationsFor({ schema });
  const result: MigrationSql[] = [];
  for (const [index, Released] of outboxMigrations.entries()) {
    const migration = new inSchema[index]!();
    const number = index + 1;
    const stem = `${String(number).padStart(4, '0')}-${fileName(Released.name)}`;
    result.push({
      number,
      stem,
      className: Released.name,
      schema,
      migrationName: migration.name ?? Released.name,
      up: await record(migration, 'up', stem),
      down: await record(migration, 'down', stem),
    });
  }
  return result;
}

/** The SQL files' header line: where the statements come from and that they are not edited by hand. */
export function sqlHeader(entry: MigrationSql, direction: 'up' | 'down'): string {
  const where =
    entry.schema === DEFAULT_OUTBOX_SCHEMA
      ? ''
      : ` in schema ${entry.schema} (TypeORM migration ${entry.migrationName})`;
  return `-- nestjs-pg-outbox migration ${entry.stem} (${direction})${where}, recorded from the TypeORM class ${entry.className}. Do not edit.\n`;
}

async function record(
  migration: MigrationInterface,
  direction: 'up' | 'down',
  stem: string,
): Promise<string> {
  const statements: string[] = [];
  const runner = {
    query: async (text: string, parameters?: unknown[]): Promise<unknown[]> => {
      if (parameters !== undefined && parameters.length > 0) {
        throw new Error(
          `migration ${stem} (${direction}) passes query parameters; migrations must be literal SQL`,
        );
      }
      // Exactly as sent (function bodies keep their whitespace in the catalog); only the ends are trimmed.
      statements.push(`${text.trim()};\n`);
      return [];
    },
  };
  await migration[direction](runner as unknown as QueryRunner);
  return statements.join('\n');
}

/** `OutboxRelayMaintain1764435600000` → `outbox-relay-maintain`. */
function fileName(className: string): string {
  return className
    .replace(/\d+$/, '')
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .toLowerCase();
}
