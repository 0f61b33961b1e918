/** The doctor's check of the migrations applied, against this version's list for the outbox's schema. */
import type { OutboxDoctorSeverity } from '../model/outbox-doctor-report.interface';
import { outboxMigrations } from '../migrations';
import { migrationNameInSchema } from '../migrations/outbox-migrations.factory';
import * as q from '../store/sql/doctor';
import type { DoctorContext } from './doctor-context';

/** The outbox migrations of the schema against TypeORM's migrations table `table`. */
export async function checkMigrations(ctx: DoctorContext, table: string): Promise<void> {
  const schema = ctx.n.schema;
  const expected = outboxMigrations.map((Migration) =>
    migrationNameInSchema(new Migration().name ?? Migration.name, schema),
  );
  const [found] = await ctx.query<{ table_sql: string | null; readable: boolean }>(
    q.findMigrationsTable(table),
  );
  if (!found?.table_sql) {
    ctx.findings.push({
      check: 'migrations',
      subject: table,
      severity: 'warn',
      summary: `No TypeORM migrations table "${table}" found, so the migrations applied cannot be checked.`,
      action:
        `If your DataSource sets migrationsTableName, give that name (--migrations-table). If you apply the ` +
        `outbox's SQL files with another tool (npx nestjs-pg-outbox sql), compare its record with the ` +
        `${expected.length} files instead; the indexes check above still tells whether the schema is complete.`,
      figures: { expected: expected.length, applied: null },
    });
    return;
  }
  if (!found.readable) {
    ctx.findings.push({
      check: 'migrations',
      subject: found.table_sql,
      severity: 'warn',
      summary: `Role ${ctx.role.user_name} may not read the migrations table ${found.table_sql}, so the migrations applied were not checked.`,
      action:
        `Grant it: grant select on ${found.table_sql} to ${ctx.role.user_name}; or run the doctor as the ` +
        `tables' owner. The indexes check still tells whether the schema is complete.`,
      figures: { expected: expected.length, applied: null },
    });
    return;
  }
  const rows = await ctx.query<{ name: string }>(q.appliedMigrations(found.table_sql));
  const applied = new Set(rows.map((r) => r.name));
  const missing = expected.filter((name) => !applied.has(name));
  const known = new Set(expected);
  const ours =
    schema === 'public' ? /^Outbox[A-Za-z]+\d{13}$/ : new RegExp(`^Outbox[A-Za-z]+_${schema}_\\d{13}$`);
  const unknown = rows.map((r) => r.name).filter((name) => ours.test(name) && !known.has(name));
  const severity: OutboxDoctorSeverity = missing.length > 0 ? 'critical' : unknown.length > 0 ? 'warn' : 'ok';
  const parts = [
    `${expected.length - missing.length} of the ${expected.length} outbox migrations of schema ${schema} are applied (table ${found.table_sql})`,
    missing.length > 0 ? `missing: ${missing.join(', ')}` : null,
    unknown.length > 0 ? `applied but unknown to this version of the library: ${unknown.join(', ')}` : null,
  ].filter((p) => p !== null);
  ctx.findings.push({
    check: 'migrations',
    subject: found.table_sql,
    severity,
    summary: `${parts.join('; ')}.`,
    action:
      missing.length > 0
        ? `Run the app's migrations (the DataSource's migrations include outboxMigrationsFor({ schema: '${schema}' })), ` +
          `e.g. npx typeorm migration:run -d <your data source>; or apply them as SQL: npx nestjs-pg-outbox sql` +
          `${schema === 'public' ? '' : ` --schema ${schema}`}. Until then the relay may fail on what they add.`
        : unknown.length > 0
          ? `A newer version of nestjs-pg-outbox migrated this database: run that version everywhere (an older ` +
            `relay may not know what its migrations changed).`
          : null,
    figures: {
      expected: expected.length,
      applied: expected.length - missing.length,
      missing: missing.join(','),
    },
  });
}
