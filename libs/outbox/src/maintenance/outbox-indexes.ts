/**
 * The indexes the outbox migrations leave on the outbox tables, in the order of `pg_indexes` (table, then name):
 * what the doctor expects to find, valid, and the statement that puts each back. Pinned against the catalog of a
 * freshly migrated database by `test/operating/doctor.e2e-spec.ts`: a migration that adds, drops or changes an
 * index fails that test until this list follows.
 */

/** One index the migrations create: a plain index (`definition`) or the one behind a constraint. */
export interface OutboxIndex {
  /** The table, unqualified. */
  readonly table: string;
  readonly name: string;
  /** What follows `on <table>` in `create index`, as `pg_get_indexdef` prints it (lower-cased). */
  readonly definition?: string;
  /** The constraint the index backs, as `pg_get_constraintdef` prints it (lower-cased). */
  readonly constraint?: string;
}

/** Every outbox table, unqualified: the tables the doctor measures. */
export const OUTBOX_TABLES: readonly string[] = [
  'consumer_inbox',
  'event_outbox',
  'outbox_activity',
  'outbox_audit',
  'outbox_backfills',
  'outbox_batch_seals',
  'outbox_consumer_instances',
  'outbox_consumer_key_starts',
  'outbox_consumer_limits',
  'outbox_consumer_pauses',
  'outbox_consumers',
  'outbox_dedupe_keys',
  'outbox_deliveries',
  'outbox_event_leases',
  'outbox_webhook_subscriptions',
];

/** The indexes the migrations create on the outbox tables. */
export const OUTBOX_INDEXES: readonly OutboxIndex[] = [
  {
    table: 'consumer_inbox',
    name: 'consumer_inbox_pkey',
    constraint: 'primary key (event_id, consumer_name, tenant_id)',
  },
  {
    table: 'consumer_inbox',
    name: 'consumer_inbox_unsettled_idx',
    definition: "using btree (tenant_id, consumer_name) where (status <> 'processed'::text)",
  },
  {
    table: 'event_outbox',
    name: 'event_outbox_failed_idx',
    definition: "using btree (tenant_id, failed_at) where (status = 'failed'::text)",
  },
  {
    table: 'event_outbox',
    name: 'event_outbox_pending_aggregate_idx',
    definition:
      "using btree (tenant_id, aggregate_type, aggregate_id, seq) where ((status = 'pending'::text) and (aggregate_id is not null))",
  },
  {
    table: 'event_outbox',
    name: 'event_outbox_pending_idx',
    definition: "using btree (tenant_id, seq) where (status = 'pending'::text)",
  },
  { table: 'event_outbox', name: 'event_outbox_pkey', constraint: 'primary key (id)' },
  {
    table: 'event_outbox',
    name: 'event_outbox_processing_idx',
    definition: "using btree (tenant_id) where (status = 'processing'::text)",
  },
  {
    table: 'event_outbox',
    name: 'event_outbox_scheduled_idx',
    definition: "using btree (deliver_at) where (status = 'scheduled'::text)",
  },
  {
    table: 'event_outbox',
    name: 'event_outbox_settled_idx',
    definition:
      "using btree (published_at) where (status = any (array['published'::text, 'no_handlers'::text]))",
  },
  { table: 'outbox_activity', name: 'outbox_activity_minute_idx', definition: 'using btree (minute)' },
  {
    table: 'outbox_activity',
    name: 'outbox_activity_pkey',
    constraint: 'primary key (tenant_id, minute, consumer_name)',
  },
  { table: 'outbox_audit', name: 'outbox_audit_pkey', constraint: 'primary key (id)' },
  { table: 'outbox_audit', name: 'outbox_audit_tenant_idx', definition: 'using btree (tenant_id, id)' },
  {
    table: 'outbox_backfills',
    name: 'outbox_backfills_open_idx',
    definition: 'using btree (consumer_name) where (finished_at is null)',
  },
  { table: 'outbox_backfills', name: 'outbox_backfills_pkey', constraint: 'primary key (id)' },
  { table: 'outbox_batch_seals', name: 'outbox_batch_seals_pkey', constraint: 'primary key (lease_token)' },
  {
    table: 'outbox_consumer_instances',
    name: 'outbox_consumer_instances_pkey',
    constraint: 'primary key (consumer_name, instance_id)',
  },
  {
    table: 'outbox_consumer_key_starts',
    name: 'outbox_consumer_key_starts_pkey',
    constraint: 'primary key (consumer_name, tenant_id, started_at, rate_key)',
  },
  {
    table: 'outbox_consumer_limits',
    name: 'outbox_consumer_limits_pkey',
    constraint: 'primary key (consumer_name, tenant_id)',
  },
  {
    table: 'outbox_consumer_pauses',
    name: 'outbox_consumer_pauses_pair_key',
    constraint: 'unique (consumer_name, tenant_id)',
  },
  { table: 'outbox_consumers', name: 'outbox_consumers_pkey', constraint: 'primary key (name)' },
  {
    table: 'outbox_dedupe_keys',
    name: 'outbox_dedupe_keys_expiry_idx',
    definition: 'using btree (expires_at)',
  },
  {
    table: 'outbox_dedupe_keys',
    name: 'outbox_dedupe_keys_pkey',
    constraint: 'primary key (tenant_id, event_name, dedupe_key)',
  },
  {
    table: 'outbox_deliveries',
    name: 'outbox_deliveries_dead_idx',
    definition: "using btree (tenant_id, consumer_name) where (status = 'dead'::text)",
  },
  {
    table: 'outbox_deliveries',
    name: 'outbox_deliveries_due_idx',
    definition:
      "using btree (tenant_id, next_attempt_at) where (status = any (array['pending'::text, 'failed'::text]))",
  },
  {
    table: 'outbox_deliveries',
    name: 'outbox_deliveries_event_consumer_key',
    constraint: 'unique (event_id, consumer_name)',
  },
  {
    table: 'outbox_deliveries',
    name: 'outbox_deliveries_lease_idx',
    definition: "using btree (tenant_id, lease_expires_at) where (status = 'processing'::text)",
  },
  {
    table: 'outbox_deliveries',
    name: 'outbox_deliveries_open_idx',
    definition: "using btree (tenant_id, consumer_name, status, id) where (status <> 'delivered'::text)",
  },
  {
    table: 'outbox_deliveries',
    name: 'outbox_deliveries_ordering_idx',
    definition:
      "using btree (tenant_id, consumer_name, aggregate_key, event_seq) where ((aggregate_key is not null) and (status <> 'delivered'::text))",
  },
  { table: 'outbox_deliveries', name: 'outbox_deliveries_pkey', constraint: 'primary key (id)' },
  {
    table: 'outbox_event_leases',
    name: 'outbox_event_leases_expiry_idx',
    definition: 'using btree (tenant_id, lease_expires_at)',
  },
  { table: 'outbox_event_leases', name: 'outbox_event_leases_pkey', constraint: 'primary key (event_id)' },
  {
    table: 'outbox_webhook_subscriptions',
    name: 'outbox_webhook_subscriptions_pkey',
    constraint: 'primary key (id)',
  },
  {
    table: 'outbox_webhook_subscriptions',
    name: 'outbox_webhook_subscriptions_tenant_name_key',
    constraint: 'unique (tenant_id, name)',
  },
];

/**
 * The indexes of the event search (ADR 1013), opt-in: every event's insert and status update would write them, for
 * an operator's rare search, so no migration creates them; `npx nestjs-pg-outbox sql --search-indexes` prints their
 * statements (`searchIndexesSql`). The doctor does not expect them. Each ends with the id: a page of one tenant's
 * matches is one index range walked newest first.
 */
export const SEARCH_INDEXES: readonly OutboxIndex[] = [
  {
    table: 'event_outbox',
    name: 'event_outbox_name_idx',
    definition: 'using btree (tenant_id, event_name, id)',
  },
  {
    table: 'event_outbox',
    name: 'event_outbox_aggregate_idx',
    definition: 'using btree (tenant_id, aggregate_id, aggregate_type, id) where (aggregate_id is not null)',
  },
  {
    table: 'event_outbox',
    name: 'event_outbox_correlation_idx',
    definition: 'using btree (tenant_id, correlation_id, id) where (correlation_id is not null)',
  },
];

/**
 * The tables the partitioned layout (docs/partitioning.md, ADR 1207) partitions, and the indexes it changes: the
 * deliveries' key holds the partition key, the received inbox messages get the index of retention's check, and the
 * ordered consumers' open deliveries the index where the due claim's ordered check starts (migration
 * OutboxOrderedOpenIndex1764504700000).
 */
const PARTITIONED_LAYOUT: Readonly<Record<string, readonly OutboxIndex[]>> = {
  consumer_inbox: [
    {
      table: 'consumer_inbox',
      name: 'consumer_inbox_received_idx',
      definition: 'using btree (event_id) where (first_seen_at is not null)',
    },
  ],
  outbox_deliveries: [
    { table: 'outbox_deliveries', name: 'outbox_deliveries_pkey', constraint: 'primary key (id, event_id)' },
    {
      table: 'outbox_deliveries',
      name: 'outbox_deliveries_ordered_open_idx',
      definition:
        "using btree (tenant_id, event_id) where ((aggregate_key is not null) and (status <> 'delivered'::text))",
    },
  ],
};

/**
 * The indexes the doctor expects when the tables named in `partitioned` are partitioned: {@link OUTBOX_INDEXES}
 * with the partitioned layout's changes to those tables, in the same order.
 */
export function expectedIndexes(partitioned: ReadonlySet<string>): OutboxIndex[] {
  const changes = [...partitioned].flatMap((table) => PARTITIONED_LAYOUT[table] ?? []);
  const changed = new Set(changes.map((index) => index.name));
  return [...OUTBOX_INDEXES.filter((index) => !changed.has(index.name)), ...changes].sort(
    (a, b) => compare(a.table, b.table) || compare(a.name, b.name),
  );
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The statements that build `index` in the schema of `schemaSql` without blocking writes, each to run on its own
 * outside a transaction (a constraint's index is built by adding the constraint again, which locks the table
 * while it builds). `partitions` are the leaf partitions of its table when that table is partitioned, else null.
 *
 * PostgreSQL refuses `create index concurrently` on a partitioned table: the index goes on the parent alone
 * (`on only`, invalid until every partition has one), then on each partition concurrently, each attached to it;
 * once the last is attached the parent's index is valid, and partitions made later get it with their table.
 * Every step is idempotent (`if not exists`; attaching an index already attached does nothing).
 */
export function buildIndexSteps(
  schemaSql: string,
  index: OutboxIndex,
  partitions: readonly string[] | null,
): string[] {
  if (index.constraint !== undefined)
    return [`alter table ${schemaSql}.${index.table} add constraint ${index.name} ${index.constraint}`];
  if (partitions === null)
    return [
      `create index concurrently if not exists ${index.name} on ${schemaSql}.${index.table} ${index.definition}`,
    ];
  return [
    `create index if not exists ${index.name} on only ${schemaSql}.${index.table} ${index.definition}`,
    ...partitions.flatMap((partition) => partitionIndexSteps(schemaSql, index, partition)),
  ];
}

/**
 * The steps that give one partition its index of the partitioned `index`, built without blocking writes, and
 * attach it (a constraint's index becomes the partition's constraint first: PostgreSQL attaches it only so).
 */
export function partitionIndexSteps(schemaSql: string, index: OutboxIndex, partitionName: string): string[] {
  const child = sqlName(partitionIndexName(index, partitionName));
  const partition = sqlName(partitionName);
  const attach = `alter index ${schemaSql}.${index.name} attach partition ${schemaSql}.${child}`;
  if (index.constraint === undefined)
    return [
      `create index concurrently if not exists ${child} on ${schemaSql}.${partition} ${index.definition}`,
      attach,
    ];
  const kind = index.constraint.startsWith('primary key') ? 'primary key' : 'unique';
  const columns = index.constraint.slice(kind.length).trim();
  return [
    `create unique index concurrently if not exists ${child} on ${schemaSql}.${partition} using btree ${columns}`,
    `alter table ${schemaSql}.${partition} add constraint ${child} ${kind} using index ${child}`,
    attach,
  ];
}

/** The steps that make valid again a partition's index attached to `index` but left invalid. */
export function rebuildPartitionIndexSteps(
  schemaSql: string,
  index: OutboxIndex,
  childName: string,
): string[] {
  // the rebuilt index does not make the partitioned one valid by itself: attaching it again checks them all
  const child = sqlName(childName);
  return [
    `reindex index concurrently ${schemaSql}.${child}`,
    `alter index ${schemaSql}.${index.name} attach partition ${schemaSql}.${child}`,
  ];
}

/**
 * `name` (a partition's or an index's, read from the catalog) as SQL text: as it is when PostgreSQL reads it so,
 * else double-quoted (a partition attached by hand may have capitals, spaces or quotes in its name).
 */
export function sqlName(name: string): string {
  return /^[a-z_][a-z0-9_$]*$/.test(name) ? name : `"${name.replaceAll('"', '""')}"`;
}

/**
 * The name of `index`'s index on `partition`: the index's name with the partition's suffix (`_p20261206t0000`,
 * `_default`), as the conversion names the default partitions' indexes; within PostgreSQL's 63 bytes.
 */
export function partitionIndexName(index: OutboxIndex, partition: string): string {
  const suffix = partition.startsWith(`${index.table}_`)
    ? partition.slice(index.table.length + 1)
    : partition;
  return `${index.name.slice(0, Math.max(1, 62 - suffix.length))}_${suffix}`.slice(0, 63);
}

/**
 * The statements that build each search index in the schema of `schemaSql`, one per line, each to run on its own
 * outside a transaction; `partitions` are `event_outbox`'s leaf partitions in the partitioned layout, else null.
 */
export function searchIndexesSql(schemaSql: string, partitions: readonly string[] | null = null): string {
  return SEARCH_INDEXES.flatMap((index) => buildIndexSteps(schemaSql, index, partitions))
    .map((statement) => `${statement};\n`)
    .join('');
}
