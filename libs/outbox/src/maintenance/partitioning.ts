/**
 * The partitioned layout (opt-in; docs/partitioning.md, docs/adr/1207-partitioned-history.md): the statements that
 * convert the outbox tables, printed by `npx nestjs-pg-outbox sql --partitioned`. The work is done by the functions
 * of migration OutboxPartitionMaintenance1764502400000; these are the steps that must each run on their own, in
 * order, outside a transaction (a concurrent index build, a validation that reads a table without blocking writes).
 */

/** Options of {@link partitionedLayoutSql}. */
export interface PartitionedLayoutOptions {
  /** The width of a range, as a PostgreSQL interval in hours or days. Default `'1 day'`. */
  width?: string;
  /** How many ranges are made ahead of now. Default `3`. */
  ahead?: number;
  /**
   * Where the first range starts (a timestamp PostgreSQL reads); by default the first boundary a day ahead.
   * Earlier only on empty tables (the conversion refuses otherwise).
   */
  start?: string;
}

const WIDTH = /^[1-9][0-9]{0,3} (hour|hours|day|days)$/;

/** Why `options` cannot be used, or null. */
export function partitionedLayoutProblem(options: PartitionedLayoutOptions): string | null {
  if (options.width !== undefined && !WIDTH.test(options.width))
    return `--width must be a number of hours or days, e.g. "1 day" or "6 hours", got ${JSON.stringify(options.width)}`;
  if (
    options.ahead !== undefined &&
    !(Number.isInteger(options.ahead) && options.ahead >= 1 && options.ahead <= 1000)
  )
    return `--ahead must be a whole number of ranges from 1 to 1000, got ${String(options.ahead)}`;
  if (options.start !== undefined && !/^[0-9T:. +-]+(Z|UTC)?$/i.test(options.start))
    return `--start must be a timestamp, e.g. 2026-12-06T00:00:00Z, got ${JSON.stringify(options.start)}`;
  return null;
}

/** The conversion's statements, one per line, for `psql -v ON_ERROR_STOP=1` (not in a transaction). */
export function partitionedLayoutSql(schemaSql: string, options: PartitionedLayoutOptions = {}): string {
  const problem = partitionedLayoutProblem(options);
  if (problem !== null) throw new Error(problem);
  const width = options.width ?? '1 day';
  const ahead = options.ahead ?? 3;
  const start = options.start === undefined ? '' : `, '${options.start}'`;
  return [
    `-- nestjs-pg-outbox: converts event_outbox, outbox_deliveries and consumer_inbox to ranges of ${width} (docs/partitioning.md).`,
    `-- Run each statement on its own (psql -v ON_ERROR_STOP=1 -f), not in a transaction, as the tables' owner.`,
    `set lock_timeout = '5s';`,
    `-- 1. built without blocking writes: the deliveries' key with the partition key, the index of received inbox messages,`,
    `-- and the index where the due claim's check for ordered consumers starts`,
    `create unique index concurrently if not exists outbox_deliveries_id_event_key on ${schemaSql}.outbox_deliveries (id, event_id);`,
    `create index concurrently if not exists consumer_inbox_received_idx on ${schemaSql}.consumer_inbox (event_id) where first_seen_at is not null;`,
    `create index concurrently if not exists outbox_deliveries_ordered_open_idx on ${schemaSql}.outbox_deliveries (tenant_id, event_id) where aggregate_key is not null and status <> 'delivered';`,
    `-- 2. the window of ranges, checked on today's rows (each validation reads its table and blocks no write)`,
    `select ${schemaSql}.outbox_partition_prepare('${width}', ${ahead}${start});`,
    `alter table ${schemaSql}.event_outbox validate constraint outbox_window;`,
    `alter table ${schemaSql}.outbox_deliveries validate constraint outbox_window;`,
    `alter table ${schemaSql}.consumer_inbox validate constraint outbox_window;`,
    `-- 3. one short transaction: the tables become the default partitions of partitioned tables of their names`,
    `select ${schemaSql}.outbox_partition_tables();`,
    '',
  ].join('\n');
}
