/**
 * The doctor's checks of the outbox tables and their indexes: size, estimated bloat, dead rows, vacuum, validity.
 * In the partitioned layout (docs/partitioning.md) a table's figures are its partitions', summed, its vacuum state
 * that of the partition with the most dead rows (vacuum works partition by partition), and an index of a
 * partitioned table is checked on every partition.
 */
import * as q from '../store/sql/doctor-storage';
import { type DoctorContext, level, worstSeverity } from './doctor-context';
import { bytes, count, duration, percent } from './doctor-format';
import {
  buildIndexSteps,
  expectedIndexes,
  OUTBOX_TABLES,
  partitionIndexName,
  partitionIndexSteps,
  rebuildPartitionIndexSteps,
  sqlName,
} from './outbox-indexes';

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
    // vacuum and its settings are per partition: the advice names the partition with the most dead rows
    const vacuumTarget =
      row.worst_partition === null ? table : `${n.schemaSql}.${sqlName(row.worst_partition)}`;
    const vacuumed =
      (row.worst_partition === null
        ? ''
        : `partition ${row.worst_partition} (${(row.dead_rows ?? 0) > 0 ? 'the most dead rows' : 'the largest'}) `) +
      (row.since_vacuum_seconds === null
        ? 'never vacuumed'
        : `last vacuumed ${duration(row.since_vacuum_seconds)} ago${row.last_autovacuum ? '' : ' (by hand; autovacuum never ran)'}`);
    const actions: string[] = [];
    if (deadLevel !== 'ok' && !row.autovacuum)
      actions.push(
        `Autovacuum does not visit this table (the server's autovacuum setting is off, or the table's ` +
          `autovacuum_enabled is false): turn it on (alter system set autovacuum = on; select pg_reload_conf(); ` +
          `or alter table ${vacuumTarget} reset (autovacuum_enabled);), or vacuum it on a schedule of your own.`,
      );
    if (deadLevel !== 'ok')
      actions.push(
        `Dead rows pile up: if a transaction or slot above holds the horizon, deal with it first (vacuum cannot ` +
          `remove them until then); otherwise run vacuum (verbose, analyze) ${vacuumTarget}; now, and let ` +
          `autovacuum visit it sooner: alter table ${vacuumTarget} set (autovacuum_vacuum_scale_factor = 0.01);`,
      );
    if (bloatLevel !== 'ok')
      actions.push(
        `The heap is larger than its rows need: vacuum makes the space reusable but does not return it. To shrink ` +
          `it without blocking the relay use pg_repack${row.partitions === null ? '' : ' (partition by partition)'}; ` +
          `vacuum full ${table}; also works but locks the table (stop the relays first).`,
      );
    ctx.findings.push({
      check: 'tables',
      subject: table,
      severity: worstSeverity([bloatLevel, deadLevel]),
      summary:
        `${table}${row.partitions === null ? '' : ` (${count(row.partitions)} partitions)`}: ` +
        `${bytes(row.table_bytes + row.index_bytes)} (table ${bytes(row.table_bytes)}, indexes ` +
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
        ...(row.partitions === null
          ? {}
          : { partitions: row.partitions, worstPartition: row.worst_partition }),
      },
    });
  }
}

/**
 * The indexes the migrations create (those of the partitioned layout on its tables): missing, invalid — on a
 * partitioned table, a partition without it or with an invalid one — or bloated beyond the thresholds.
 */
export async function checkIndexes(ctx: DoctorContext): Promise<void> {
  const { t, n } = ctx;
  const rows = await ctx.query<q.OutboxIndexRow>(q.outboxIndexes(n, OUTBOX_TABLES));
  const partitionsOf = new Map(
    (await ctx.query<q.OutboxPartitionsRow>(q.outboxPartitions(n, OUTBOX_TABLES))).map((r) => [
      r.table_name,
      r.partitions,
    ]),
  );
  const expected = expectedIndexes(new Set(partitionsOf.keys()));
  const found = new Map(rows.map((r) => [r.index_name, r]));
  let problems = 0;
  for (const index of expected) {
    const row = found.get(index.name);
    const partitions = partitionsOf.get(index.table) ?? null;
    const qualified = `${n.schemaSql}.${index.name}`;
    const onTable = `${n.schemaSql}.${index.table}`;
    if (!row) {
      problems++;
      ctx.findings.push({
        check: 'indexes',
        subject: qualified,
        severity: 'critical',
        summary:
          `Index ${qualified} on ${onTable} is missing` +
          (index.constraint
            ? ` (it backs the constraint ${index.constraint}).`
            : ': the relay reads without it.'),
        action:
          (partitions === null || index.constraint
            ? 'Recreate it: '
            : 'Recreate it, on the partitioned table alone and then on each partition without blocking writes, each ' +
              'attached to it (PostgreSQL refuses create index concurrently on a partitioned table); run each ' +
              'statement on its own: ') + `${buildIndexSteps(n.schemaSql, index, partitions).join('; ')};`,
        figures: { table: index.table, present: false },
      });
    } else if (!row.valid && row.partitioned) {
      problems++;
      const steps = [
        ...row.unindexed_partitions.flatMap((p) => {
          // a cancelled build's invalid index of that name: `if not exists` would skip it and attach it invalid
          const child = partitionIndexName(index, p);
          return [
            ...(row.leftover_indexes.includes(child)
              ? [`drop index concurrently if exists ${n.schemaSql}.${sqlName(child)}`]
              : []),
            ...partitionIndexSteps(n.schemaSql, index, p),
          ];
        }),
        ...row.invalid_partitions.flatMap((child) => rebuildPartitionIndexSteps(n.schemaSql, index, child)),
      ];
      const lacking = [
        row.unindexed_partitions.length > 0
          ? `partitions without it: ${row.unindexed_partitions.join(', ')}`
          : null,
        row.invalid_partitions.length > 0
          ? `partitions' indexes invalid: ${row.invalid_partitions.join(', ')}`
          : null,
      ].filter((part) => part !== null);
      ctx.findings.push({
        check: 'indexes',
        subject: qualified,
        severity: 'critical',
        summary:
          `Index ${qualified} on partitioned table ${onTable} is invalid until every partition has a valid index attached to it` +
          (lacking.length > 0 ? ` (${lacking.join('; ')})` : '') +
          ': the partitions without one are read without it, and partitions made from now on may lack it.',
        action:
          steps.length > 0
            ? `Build what is missing without blocking writes, each statement on its own: ${steps.join('; ')};`
            : `Attach again any partition's index of it (alter index ${qualified} attach partition …;), which ` +
              `makes PostgreSQL check them all.`,
        figures: {
          table: index.table,
          present: true,
          valid: false,
          ready: row.ready,
          unindexedPartitions: row.unindexed_partitions.length,
          invalidPartitions: row.invalid_partitions.length,
        },
      });
    } else if (!row.valid) {
      problems++;
      const recreate = buildIndexSteps(n.schemaSql, index, null).join('; ');
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
        action:
          `Rebuild it without blocking writes: reindex index concurrently ${qualified};` +
          (row.partitioned
            ? ` (PostgreSQL 14 or later rebuilds each partition's index in turn; before 14, run it on each).`
            : ''),
        figures: { table: index.table, bytes: row.bytes, bloatBytes: row.bloat_bytes },
      });
    }
  }
  if (problems === 0)
    ctx.findings.push({
      check: 'indexes',
      subject: null,
      severity: 'ok',
      summary: `All ${expected.length} indexes the migrations create are there and valid.`,
      action: null,
      figures: { expected: expected.length },
    });
}
