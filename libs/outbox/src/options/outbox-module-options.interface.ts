import type { OutboxBackoffOptions } from '../model/backoff';
import type { OutboxEventSchemas } from '../model/outbox-event-schemas';
import type { OutboxNames } from '../model/table-names';

export type { OutboxBackoffOptions };

/** Options of the relay that delivers committed events to consumers. */
export interface OutboxRelayOptions {
  /** Run the relay on this instance; set `false` on instances that only enqueue. Default: `true`. */
  enabled?: boolean;
  /** How often the relay looks for due work, in ms; the safety net behind the wake-ups. Default: `1000`. */
  pollIntervalMs?: number;
  /** Events (and due retries) claimed per tenant per round. Default: `100`. */
  batchSize?: number;
  /**
   * How large a tenant's claim may grow while a backlog drains. After a full batch that did not run again after
   * a handler's failure and that had no webhook or broker deliveries, the tenant's next claim takes twice as many
   * when the batch ran in under 100 ms, half as many when it took longer, never fewer than `relay.batchSize`; any
   * other batch brings it back to `relay.batchSize`. Set it to `relay.batchSize` to keep every claim at that size.
   * See docs/adr/0803-claims-grow-for-quick-batches.md and docs/adr/1001-optimistic-batches.md.
   * Default: `500` (or `relay.batchSize`, when that is larger).
   */
  maxBatchSize?: number;
  /**
   * Batches this relay works on at once, each in its own transaction on its own connection: a round visits up
   * to this many tenants side by side, and a tenant whose last batch came back full (a backlog) in as many
   * batches at once when no other tenant is due (else it leaves them a lane: see `relay.tenantWeights`). Each batch holds a connection of the DataSource's pool from its claim to its commit, and
   * the next one is claimed while that commit is in flight: the relay holds up to twice this many, and one more
   * for its scan for due tenants, which runs beside a round's batches. Order is
   * kept only where it is promised (`ordered: true` consumers, across any number of batches and relays).
   * `'auto'`: 2 when the pool has at least 8 connections (`extra.max`, else `poolSize`, else pg's 10), 1 below,
   * so a small pool keeps room for the app. See docs/adr/0802-batches-side-by-side.md. Default: `'auto'`.
   */
  concurrency?: number | 'auto';
  /**
   * How long a claim stays owned by this relay before another may take it over, in ms; must exceed every
   * handler timeout. Default: `60000`.
   */
  leaseMs?: number;
  /**
   * How long the relay waits for the database's reply to one of its round trips (a claim, a batch, an outcome, a
   * lease extension, a tenant's webhook subscriptions, the scan for due tenants, the heartbeat, the lease vacuum,
   * the wake-up listener's check) and the library's other reads of its own (the health check's, retention's purge,
   * the metrics' oldest pending age), in ms; a hung server or a broken network never answers, and pg has no
   * deadline of its own. Past it the connection is closed for good, the round given up (its leases expire; the
   * fence keeps late writes out), a warning names the round trip, health is down (`stall`) until the database
   * answers again, `stats` keeps the latest stall (`relayStall`), and the next round starts on a fresh
   * connection. A little over `relay.leaseMs`, the server-side bound of the relay's statements: lower that to give
   * up sooner. See docs/adr/0809-client-side-deadline-per-round-trip.md. `0`: no client-side bound.
   * Default: `relay.leaseMs + 1000`.
   */
  roundTripTimeoutMs?: number;
  /** How long `app.close()` waits for in-flight handlers, in ms. Default: `10000`. */
  shutdownTimeoutMs?: number;
  /**
   * Tenants one scan for due work lists at most (the rest wait for the next round's scan, which continues after
   * the last one listed). A round also visits, before it scans, up to as many tenants named by wake-ups or whose
   * last batch came back full. Default: `100`.
   */
  maxTenantsPerRound?: number;
  /**
   * Delayed events (`deliverAt`, `delayMs`): the relay's timer for the next due one fires at most once per this
   * many ms, so events due close together are promoted and claimed together, each up to this much later than its
   * due time (never earlier: a promotion takes only events due by the database's clock). An event due after a
   * quiet spell is promoted at its instant. `0`: at every due instant (the most CPU per delayed event). See
   * docs/adr/1204-delayed-promotions-are-coalesced.md. Default: `200`.
   */
  scheduledCoalesceMs?: number;
  /**
   * How relays are woken soon after a transaction that enqueued commits, instead of at their next poll. `'auto'`:
   * an instance whose relay is enabled listens, one whose relay is off (`relay.enabled: false`) notifies.
   * `'listen'`: listen only. `'notify'`: notify only. `'both'`: both. `'off'`: neither, relays find new events at
   * `relay.pollIntervalMs` (e.g. behind a pooler in transaction mode, where LISTEN cannot work). To notify is to
   * send a NOTIFY naming the commit's tenants, paced: a commit after a quiet spell wakes the relays at once, the
   * commits that follow within a couple of milliseconds share one NOTIFY; it rides in the first insert after the
   * gap (delivered with that transaction's commit, one transaction per gap at most), else goes on a pooled
   * connection after the commit. To listen is to LISTEN on a dedicated connection, made as the
   * DataSource's pool makes its connections (its `Client` class and options: it follows a failover where they
   * do), checked every half `relay.roundTripTimeoutMs` (at most 30 s) and made anew, with backoff, when it fails
   * or stops answering. Only an instance whose relay is enabled listens: with `relay.enabled: false`, `'listen'`
   * is the same as `'off'` and `'both'` as `'notify'`. Whatever this says, an instance's own commits wake its own
   * relay in-process. Default: `'auto'`.
   */
  wakeUps?: 'auto' | 'listen' | 'notify' | 'both' | 'off';
  /**
   * Vacuum `outbox_event_leases` after this many event leases released by this instance (`0`: never, leave it to
   * autovacuum). Each in-process batch inserts a lease row per event and its outcome deletes it; until VACUUM
   * runs, new rows go to new pages (the claims probe each event's lease by the table's key, so they do not read
   * the dead rows), and each vacuum makes every connection plan its claims anew. A vacuum of that small table takes
   * milliseconds. Only when the relay's role may vacuum it (owner, database owner or superuser; `MAINTAIN`
   * from PostgreSQL 17). While the vacuum horizon has not moved since the previous vacuum (a long transaction, a
   * replication slot), one a minute at most. Default: `10000`.
   */
  vacuumLeasesEvery?: number;
  /**
   * Supplies the tenants to visit each round instead of asking the database which have due work (e.g. from the
   * app's own tenant directory). Every tenant returned is visited; return only active ones.
   * Default: `null` (the relay asks the database).
   */
  tenants?: (() => readonly string[] | Promise<readonly string[]>) | null;
  /**
   * Each tenant's share of the relay while several tenants are due: a map of tenant ids to weights, or a function
   * of the tenant id that returns its weight (called once a round for each of several due tenants: keep it cheap
   * and synchronous). A weight is a number above 0, at most 10000; unlisted tenants (and a function's invalid
   * answers or throws, logged once per tenant) weigh 1. In a round with several tenants, the heaviest claims
   * `relay.batchSize` events and each other one `relay.batchSize` × its weight ÷ the heaviest's, so backlogged
   * tenants drain in the ratio of their weights; a backlogged tenant also leaves a lane to the others, whose new
   * events wait for about one batch at most. A tenant alone gets the whole relay (docs/flow-control.md, "Fairness
   * between tenants"). No effect with `relay.tenants`, where every listed tenant is visited each round. Default:
   * `null` (every tenant weighs 1).
   */
  tenantWeights?: Readonly<Record<string, number>> | ((tenantId: string) => number) | null;
}

/** How relays are woken after a commit: the values of `relay.wakeUps`. */
export type OutboxWakeUps = NonNullable<OutboxRelayOptions['wakeUps']>;

/** Options of the persisted consumer registry that fan-out reads. */
export interface OutboxRegistryOptions {
  /** How often each relay instance reports the consumers it hosts, in ms. Default: `30000`. */
  heartbeatMs?: number;
  /**
   * A consumer no instance reported for this long stops receiving new events, in ms; long, so that a consumer
   * whose only hosts are down for a while still gets its rows when they return.
   * Default: `604800000` (7 days).
   */
  liveWithinMs?: number;
  /**
   * A consumer no instance reported for this long is shown as orphaned in stats, in ms.
   * Default: `3600000` (1 hour).
   */
  orphanAfterMs?: number;
}

/** Deleting old rows. */
export interface OutboxRetentionOptions {
  /**
   * Published (and `no_handlers`) events older than this many days are deleted with their delivery and inbox
   * rows; at least 1/24 (an hour: the database function refuses younger cut-offs), at most 36500; `0` turns
   * retention off. Default: `7`.
   */
  publishedDays?: number;
  /** How often the purge runs, in ms. Default: `60000`. */
  intervalMs?: number;
  /** Events deleted per statement (each statement is its own short transaction). Default: `1000`. */
  batchSize?: number;
}

/** Options of `OutboxModule.forRoot()`; every field is optional. */
export interface OutboxModuleOptions {
  /**
   * Name of the TypeORM DataSource the outbox uses (as given to `TypeOrmModule.forRoot`).
   * Default: the default DataSource.
   */
  dataSource?: string;
  /**
   * PostgreSQL schema of the outbox's tables, functions and policies, and the name of its wake-up channel
   * (`outbox_wakeup_<schema>`; `outbox_wakeup` in `public`): a lower-case identifier of at most 49 characters.
   * Migrate the same schema with `outboxMigrationsFor({ schema })` (or `npx nestjs-pg-outbox sql --schema …`).
   * Apps in one database with different schemas never see each other's events. Default: `'public'`.
   */
  schema?: string;
  /**
   * Run the outbox's frequent statements as named (protocol-level prepared) statements on the DataSource's
   * connections, parsed once per connection by pg instead of parsed and planned by PostgreSQL each time: the
   * event insert of `enqueue` in your transactions (about 40 µs of server CPU less per event), and the relay's
   * fan-out, the outcome of a batch of in-process handlers and the context statement of each handler that uses
   * `context.manager`, with generic plans, named anew after 1, 2, 4 … 512 s so early plans follow a new
   * database's growth (docs/adr/0502, 0807). Set `false` behind a pooler that does not keep a session's prepared
   * statements (PgBouncer in transaction mode before 1.21, or without `max_prepared_statements`): there, an
   * enqueue whose connection lost the insert fails its transaction (nothing written, a clear error) and the app's
   * enqueues run unnamed from then on, and the relay pays a failed round trip each time. Default: `true`.
   */
  preparedStatements?: boolean;
  /** Relay settings. */
  relay?: OutboxRelayOptions;
  /** Attempts per delivery before it is dead, unless the consumer sets its own. Default: `5`. */
  maxAttempts?: number;
  /** Backoff between attempts, unless the consumer sets its own. */
  backoff?: OutboxBackoffOptions;
  /**
   * Time a handler may run before it is cut off and the attempt counts as failed, in ms; must be below
   * `relay.leaseMs`. Default: `30000`.
   */
  handlerTimeoutMs?: number;
  /** Largest payload accepted by `enqueue`, in bytes of JSON. Default: `262144` (256 KiB). */
  maxPayloadBytes?: number;
  /**
   * Transaction-local setting that carries the tenant id for row-level security (the migrations' policies read
   * the default name). Default: `'app.current_tenant_id'`.
   */
  tenantSetting?: string;
  /**
   * `'multi'`: every event names its tenant. `'single'`: tenancy off; `tenantId` may be omitted and defaults
   * to `SINGLE_TENANT_ID`, and the app needs no tenant setting of its own. Default: `'multi'`.
   */
  tenancy?: 'multi' | 'single';
  /** The persisted consumer registry. */
  registry?: OutboxRegistryOptions;
  /** Retention of settled events. */
  retention?: OutboxRetentionOptions;
  /**
   * Payload schemas by event name (any Standard Schema: zod, valibot, arktype…; one per `schemaVersion` as
   * `{ 1: v1, 2: v2 }`), usually from `defineOutboxEvents`: `enqueue` stores the schema's output and refuses a
   * payload it rejects, and consumers with `validatePayload` check what they receive. Default: `null` (none).
   */
  events?: OutboxEventSchemas | null;
  /**
   * Join the ambient transactions of `@nestjs-cls/transactional` (TypeORM adapter): `enqueue(event)` without a
   * manager writes in the transaction of the `@Transactional()` method or `TransactionHost.withTransaction(…)` it
   * runs in, and code a handler calls that uses the TransactionHost writes in the handler's delivery transaction.
   * `true`: the default TransactionHost; `{ connectionName }`: a named one. Needs `nestjs-cls`,
   * `@nestjs-cls/transactional` and `@nestjs-cls/transactional-adapter-typeorm`, with `ClsPluginTransactional`
   * registered for the outbox's DataSource; none of them is loaded while this is `false`. Default: `false`.
   */
  transactionHost?: boolean | { connectionName: string };
}

/** Options after defaults are merged: what the rest of the module injects. */
export interface ResolvedOutboxOptions {
  dataSource: string | undefined;
  schema: string;
  /** The outbox's names in `schema`, made once from it: every statement builder takes them. */
  names: OutboxNames;
  preparedStatements: boolean;
  relay: Required<OutboxRelayOptions>;
  maxAttempts: number;
  backoff: Required<OutboxBackoffOptions>;
  handlerTimeoutMs: number;
  maxPayloadBytes: number;
  tenantSetting: string;
  tenancy: 'multi' | 'single';
  registry: Required<OutboxRegistryOptions>;
  retention: Required<OutboxRetentionOptions>;
  events: OutboxEventSchemas | null;
  transactionHost: boolean | { connectionName: string };
}
