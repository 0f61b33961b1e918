/** The doctor's checks of the outbox tables and their indexes: size, estimated bloat, dead rows, vacuum, validity. */
import * as q from '../store/sql/doctor';
import { type DoctorContext, level, worstSeverity } from './doctor-context';
import { bytes, count, duration, percent } from './doctor-format';
import { OUTBOX_INDEXES, OUTBOX_TABLES, recreateIndexSql } from './outbox-indexes';

/** Each outbox table: size, estimated bloat, dead rows, last vacuum, whether autovacuum visits it. */
export async function checkTables(ctx: DoctorContext): Promise<void> {
  const { t, n } = ctx;
  const rows = await ctx.query<q.OutboxTableRow>(q.outboxTables(n, OUTBOX_TABLES));
  ctx.deadRows = rows.reduce((sum, r) => sum + (r.dead_rows ?? 0), 0);
  for (const row of rows) {
    const bloat = row.bloat_bytes !== null && row.heap_bytes > 0 ? row.bloat_bytes / row.heap_bytes : null;
    const bloatLevel =
      row.bloat_bytes !== null && row.bloat_bytes >= t.bloatMinBytes ? level(bloat, t.bloatRatio) : 'ok';
    const dead = row.dead_rows ?? 0;
    const deadRatio = dead > 0 ? dead / (dead + (row.live_rows ?? 0)) : 0;
    // with autovacuum off, nothing removes dead rows but a manual vacuum: a pile of them warns whatever its share
    const deadLevel =
      dead >= t.deadRowsMin
        ? worstSeverity([level(deadRatio, t.deadRowsRatio), row.autovacuum ? 'ok' : 'warn'])
        : 'ok';
    const table = `${n.schemaSql}.${row.table_name}`;
    const vacuumed =
      row.since_vacuum_seconds === null
        ? 'never vacuumed'
        : `last vacuumed ${duration(row.since_vacuum_seconds)} ago${row.last_autovacuum ? '' : ' (by hand; autovacuum never ran)'}`;
    const actions: string[] = [];
    if (deadLevel !== 'ok' && !row.autovacuum)
      actions.push(
        `Autovacuum does not visit this table (the server's autovacuum setting is off, or the table's ` +
          `autovacuum_enabled is false): turn it on (alter system set autovacuum = on; select pg_reload_conf(); ` +
          `or alter table ${table} reset (autovacuum_enabled);), or vacuum it on a schedule of your own.`,
      );
    if (deadLevel !== 'ok')
      actions.push(
        `Dead rows pile up: if a transaction or slot above holds the horizon, deal with it first (vacuum cannot ` +
          `remove them until then); otherwise run vacuum (verbose, analyze) ${table}; now, and let autovacuum ` +
          `visit it sooner: alter table ${table} set (autovacuum_vacuum_scale_factor = 0.01);`,
      );
    if (bloatLevel !== 'ok')
      actions.push(
        `The heap is larger than its rows need: vacuum makes the space reusable but does not return it. To shrink ` +
          `it without blocking the relay use pg_repack; vacuum full ${table}; also works but locks the table ` +
          `(stop the relays first).`,
      );
    ctx.findings.push({
      check: 'tables',
      subject: table,
      severity: worstSeverity([bloatLevel, deadLevel]),
      summary:
        `${table}: ${bytes(row.table_bytes + row.index_bytes)} (table ${bytes(row.table_bytes)}, indexes ` +
        `${bytes(row.index_bytes)}), ` +
        (bloat === null
          ? 'bloat unknown (no statistics yet)'
          : `≈ ${percent(bloat)} bloat (${bytes(row.bloat_bytes!)})`) +
        `, ${count(dead)} dead rows${dead > 0 ? ` (${percent(deadRatio)} of rows)` : ''}, ${vacuumed}` +
        `${row.autovacuum ? '' : ', autovacuum off'}.`,
      action: actions.length > 0 ? actions.join(' ') : null,
      figures: {
        tableBytes: row.table_bytes,
        indexBytes: row.index_bytes,
        bloatBytes: row.bloat_bytes,
        liveRows: row.live_rows,
        deadRows: row.dead_rows,
        lastAutovacuum: row.last_autovacuum?.toISOString() ?? null,
        lastVacuum: row.last_vacuum?.toISOString() ?? null,
        autovacuum: row.autovacuum,
      },
    });
  }
}

/** The indexes the migrations create: missing, invalid, or bloated beyond the thresholds. */
export async function checkIndexes(ctx: DoctorContext): Promise<void> {
  const { t, n } = ctx;
  const rows = await ctx.query<q.OutboxIndexRow>(q.outboxIndexes(n, OUTBOX_TABLES));
  const found = new Map(rows.map((r) => [r.index_name, r]));
  let problems = 0;
  for (const index of OUTBOX_INDEXES) {
    const row = found.get(index.name);
    const recreate = recreateIndexSql(n.schemaSql, index);
    const qualified = `${n.schemaSql}.${index.name}`;
    if (!row) {
      problems++;
      ctx.findings.push({
        check: 'indexes',
        subject: qualified,
        severity: 'critical',
        summary:
          `Index ${qualified} on ${n.schemaSql}.${index.table} is missing` +
          (index.constraint
            ? ` (it backs the constraint ${index.constraint}).`
            : ': the relay reads without it.'),
        action: `Recreate it: ${recreate};`,
        figures: { table: index.table, present: false },
      });
    } else if (!row.valid) {
      problems++;
      ctx.findings.push({
        check: 'indexes',
        subject: qualified,
        severity: 'critical',
        summary:
          `Index ${qualified} is invalid (a create index concurrently or reindex concurrently failed, or is ` +
          `running${row.ready ? '' : ' and not ready yet'}): the planner never uses it, and writes still pay for it.`,
        action:
          `If no create index or reindex is running on it now (pg_stat_progress_create_index), rebuild it: ` +
          `drop index concurrently ${qualified}; then ${recreate};` +
          ` (a failure on a unique index means duplicate rows: find them before rebuilding).`,
        figures: { table: index.table, present: true, valid: false, ready: row.ready },
      });
    } else {
      const ratio = row.bloat_bytes !== null && row.bytes > 0 ? row.bloat_bytes / row.bytes : null;
      const severity =
        row.bloat_bytes !== null && row.bloat_bytes >= t.bloatMinBytes ? level(ratio, t.bloatRatio) : 'ok';
      if (severity === 'ok') continue;
      problems++;
      ctx.findings.push({
        check: 'indexes',
        subject: qualified,
        severity,
        summary: `Index ${qualified} is ${bytes(row.bytes)}, ≈ ${percent(ratio!)} of it bloat (${bytes(row.bloat_bytes!)}).`,
        action: `Rebuild it without blocking writes: reindex index concurrently ${qualified};`,
        figures: { table: index.table, bytes: row.bytes, bloatBytes: row.bloat_bytes },
      });
    }
  }
  if (problems === 0)
    ctx.findings.push({
      check: 'indexes',
      subject: null,
      severity: 'ok',
      summary: `All ${OUTBOX_INDEXES.length} indexes the migrations create are there and valid.`,
      action: null,
      figures: { expected: OUTBOX_INDEXES.length },
    });
}
