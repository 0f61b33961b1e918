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

/** `create index concurrently if not exists` of each search index, in the schema of `schemaSql`. */
export function searchIndexesSql(schemaSql: string): string {
  return SEARCH_INDEXES.map(
    (index) =>
      `create index concurrently if not exists ${index.name} on ${schemaSql}.${index.table} ${index.definition};\n`,
  ).join('');
}

/**
 * The statement that puts `index` back in the schema of `schemaSql` without blocking writes (a constraint's
 * index is rebuilt by adding the constraint again, which locks the table while it builds).
 */
export function recreateIndexSql(schemaSql: string, index: OutboxIndex): string {
  if (index.constraint !== undefined)
    return `alter table ${schemaSql}.${index.table} add constraint ${index.name} ${index.constraint}`;
  return `create index concurrently ${index.name} on ${schemaSql}.${index.table} ${index.definition}`;
}
