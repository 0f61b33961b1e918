/**
 * The names of the outbox's tables, functions and wake-up channel in one PostgreSQL schema, qualified: the one
 * place they are spelled (the migrations, frozen history, spell their own; `outboxMigrationsFor` moves them).
 * Every statement builder takes them as its first parameter, from the module's resolved options, so two apps in
 * one process with different schemas each use their own. See docs/adr/0503-configurable-schema.md.
 */

/** The schema the outbox lives in unless `schema` says otherwise: where the released migrations put it. */
export const DEFAULT_OUTBOX_SCHEMA = 'public';

/** The wake-up channel of the default schema; another schema's is `outbox_wakeup_<schema>`. */
const DEFAULT_WAKEUP_CHANNEL = 'outbox_wakeup';

/**
 * Longest schema name: its wake-up channel, `outbox_wakeup_<schema>`, must fit PostgreSQL's 63-byte
 * identifiers (NAMEDATALEN − 1), and `pg_notify` refuses a longer one.
 */
export const MAX_SCHEMA_LENGTH = 63 - `${DEFAULT_WAKEUP_CHANNEL}_`.length;

/** The outbox's objects in one schema, each ready to splice into SQL text. */
export interface OutboxNames {
  /** The schema, as configured (unquoted). */
  readonly schema: string;
  /** The schema as SQL text: `public` as the released migrations spell it, any other quoted (`"billing"`). */
  readonly schemaSql: string;
  readonly events: string;
  readonly deliveries: string;
  readonly inbox: string;
  readonly dueTenants: string;
  readonly consumers: string;
  readonly consumerInstances: string;
  readonly eventLeases: string;
  /** The table whose row in a batch transaction makes any commit but the relay's fail (see `sealBatch`). */
  readonly batchSeals: string;
  readonly subscriptions: string;
  readonly purgeSettled: string;
  readonly oldestPendingAge: string;
  readonly leaseFence: string;
  /** Deletes the event leases a token still holds, by key (migration OutboxReleaseLeases1764503800000). */
  readonly releaseLeases: string;
  readonly audit: string;
  /** Backfills of late consumers, one row each with its progress. */
  readonly backfills: string;
  /** Paused (consumer, tenant) pairs: their deliveries wait (migration OutboxConsumerPauses1764501000000). */
  readonly consumerPauses: string;
  /** Makes due scheduled (delayed) events pending (migration OutboxScheduledEvents1764501600000). */
  readonly promoteScheduled: string;
  /** Limited consumers' claim turns and rate logs (migration OutboxConsumerLimits1764501700000). */
  readonly consumerLimits: string;
  /** Per-key rate logs: one row per claim and key (migration OutboxConsumerKeyLimits1764502800000). */
  readonly consumerKeyStarts: string;
  /** A consumer's deliveries under a live lease, across tenants (migration OutboxConsumerLimits1764501700000). */
  readonly consumerInFlight: string;
  /** Idempotency keys of enqueue (migration OutboxDedupeKeys1764501900000). */
  readonly dedupeKeys: string;
  /** Takes an idempotency key for an event, or says which event holds it (migration OutboxDedupeTake1764502000000). */
  readonly dedupeTake: string;
  /** Replaces the payload of a keyed event no relay claimed yet ('replace'). */
  readonly dedupeReplace: string;
  /** Retention of expired idempotency keys. */
  readonly purgeDedupeKeys: string;
  /** The partitioned layout's maintenance: ranges made ahead, settled ranges dropped (docs/partitioning.md). */
  readonly makePartitions: string;
  readonly dropPartitions: string;
  /** The partitioned layout's lowest event id the claims look at (migration OutboxClaimFloor1764502700000). */
  readonly claimFloor: string;
  /** Where work was brought back in old ranges, for the floor's next reading (migration OutboxClaimFloorOpenFrom1764504600000). */
  readonly reopened: string;
  readonly activity: string;
  readonly rowEstimate: string;
  readonly recordActivity: string;
  /** The channel relays LISTEN on for wake-ups (an identifier: `listen` takes it unquoted). */
  readonly wakeupChannel: string;
  /** The advisory lock (hashed to a key) that one instance at a time holds while purging a batch. */
  readonly retentionLock: string;
  /** The start of the advisory lock, per tenant, that serialises the operator's writes (the tenant id follows). */
  readonly adminLock: string;
}

/**
 * The problem with a schema name, or null: a lower-case PostgreSQL identifier (so it means the same quoted or
 * not, and can be spliced into SQL text once quoted), short enough for its wake-up channel, not one of the
 * system's own schemas.
 */
export function schemaProblem(schema: unknown): string | null {
  if (typeof schema !== 'string' || !/^[a-z_][a-z0-9_]*$/.test(schema)) {
    return 'a lower-case PostgreSQL identifier: a letter (a–z) or "_" first, then letters, digits or "_", e.g. "outbox"';
  }
  if (schema.length > MAX_SCHEMA_LENGTH) {
    return `at most ${MAX_SCHEMA_LENGTH} characters (its wake-up channel outbox_wakeup_<schema> must fit PostgreSQL's 63-byte names)`;
  }
  if (schema.startsWith('pg_') || schema === 'information_schema') {
    return 'a schema of your own: names starting with "pg_", and information_schema, belong to PostgreSQL';
  }
  return null;
}

/**
 * The names in `schema`, which must have passed `schemaProblem` (the module checks it at boot, the migrations
 * factory when called). The default schema's names are spelled exactly as before schemas were configurable.
 */
export function outboxNames(schema: string = DEFAULT_OUTBOX_SCHEMA): OutboxNames {
  const problem = schemaProblem(schema);
  if (problem !== null) throw new Error(`schema ${JSON.stringify(schema)} must be ${problem}`);
  const isDefault = schema === DEFAULT_OUTBOX_SCHEMA;
  const schemaSql = isDefault ? schema : `"${schema}"`;
  const qualified = (name: string): string => `${schemaSql}.${name}`;
  return {
    schema,
    schemaSql,
    events: qualified('event_outbox'),
    deliveries: qualified('outbox_deliveries'),
    inbox: qualified('consumer_inbox'),
    dueTenants: qualified('outbox_due_tenants'),
    consumers: qualified('outbox_consumers'),
    consumerInstances: qualified('outbox_consumer_instances'),
    eventLeases: qualified('outbox_event_leases'),
    batchSeals: qualified('outbox_batch_seals'),
    subscriptions: qualified('outbox_webhook_subscriptions'),
    purgeSettled: qualified('outbox_purge_settled'),
    oldestPendingAge: qualified('outbox_oldest_pending_age'),
    leaseFence: qualified('outbox_lease_fence'),
    releaseLeases: qualified('outbox_release_leases'),
    audit: qualified('outbox_audit'),
    backfills: qualified('outbox_backfills'),
    consumerPauses: qualified('outbox_consumer_pauses'),
    promoteScheduled: qualified('outbox_promote_scheduled'),
    consumerLimits: qualified('outbox_consumer_limits'),
    consumerKeyStarts: qualified('outbox_consumer_key_starts'),
    consumerInFlight: qualified('outbox_consumer_in_flight'),
    dedupeKeys: qualified('outbox_dedupe_keys'),
    dedupeTake: qualified('outbox_dedupe_take'),
    dedupeReplace: qualified('outbox_dedupe_replace'),
    purgeDedupeKeys: qualified('outbox_purge_dedupe_keys'),
    makePartitions: qualified('outbox_make_partitions'),
    dropPartitions: qualified('outbox_drop_partitions'),
    claimFloor: qualified('outbox_claim_floor'),
    reopened: qualified('outbox_reopened'),
    activity: qualified('outbox_activity'),
    rowEstimate: qualified('outbox_row_estimate'),
    recordActivity: qualified('outbox_record_activity'),
    // the default schema's channel and locks keep the names they had; another schema's are its own
    wakeupChannel: isDefault ? DEFAULT_WAKEUP_CHANNEL : `${DEFAULT_WAKEUP_CHANNEL}_${schema}`,
    retentionLock: isDefault ? 'outbox:retention' : `outbox:retention:${schema}`,
    adminLock: isDefault ? 'outbox:admin:' : `outbox:admin:${schema}:`,
  };
}
