import type { DataSource, QueryRunner } from 'typeorm';
import type { ClaimedDelivery } from '../model/claimed-delivery';
import type { DeliveryOutcome } from '../model/delivery-outcome';
import type { DueTenant } from '../model/due-tenant';
import type { OutboxConsumer } from '../model/outbox-consumer';
import type { OutboxRelayStall } from '../model/outbox-relay-stall.interface';
import type { SqlStatement } from './sql/statement';
import type { NewEventsChoice } from './sql/claim-new';

/**
 * The store as the relay and the batch transaction ask for it, in their words: which tenants are due, claim a
 * tenant's batch, record outcomes, extend leases, beat in the registry. Which SQL serves each, how it is packed
 * into round trips (pipelining, named statements) and on which pg connection is the store's (`PgRelayStore`);
 * unit specs give the relay a fake one.
 */
export interface OutboxStorePort {
  /** The latest round trip of the relay that got no reply in time, or null (see `RoundTripDeadline`). */
  readonly stall: OutboxRelayStall | null;
  /** How many connections the app's pool holds (the relay sizes its lanes by it). */
  poolSize(): number;
  /**
   * Tenants with due work, at most `limit`, in tenant order after `after` (null: from the first), in a
   * transaction of their own under the relay's bounds.
   */
  dueTenants(request: { limit: number; after: string | null }): Promise<DueTenant[]>;
  /**
   * Makes up to `limit` due delayed events pending (a transaction of its own): which tenants they belong to, how
   * many, and in how many ms (the database's clock) the next one still scheduled is due (null: none is).
   */
  promoteScheduled(request: { limit: number }): Promise<ScheduledPromotion>;
  /**
   * Records in the persisted registry that this instance hosts `consumers` now, with their limits unless an instance
   * started later set them. `startedAt`: when this instance started, as its first beat returned it (null on the first
   * beat: now, by the database's clock). Returns that start and the names of `consumers` the registry gives a limit.
   */
  heartbeat(request: {
    instanceId: string;
    startedAt: Date | null;
    consumers: readonly OutboxConsumer[];
  }): Promise<{ startedAt: Date; limited: string[] }>;
  /** Removes this instance from the registry's host lists. */
  leaveRegistry(request: { instanceId: string }): Promise<void>;
  /** Pushes back the leases of delivery rows still held by `leaseToken` (a transaction of their own). */
  extendLeases(request: {
    tenantId: string;
    leaseToken: string;
    deliveryIds: readonly string[];
  }): Promise<void>;
  /**
   * Records outcomes in a transaction of their own, not fenced as a batch: those whose lease `leaseToken` no
   * longer holds are left out. Says how many were recorded.
   */
  recordOutcomes(request: {
    tenantId: string;
    leaseToken: string;
    outcomes: readonly DeliveryOutcome[];
  }): Promise<{ recorded: number }>;
  /** A connection held for one tenant's visit in a round (see `TenantConnection`); release it when done. */
  tenantConnection(tenantId: string): TenantConnection;
  /** The app's TypeORM DataSource, which in-process handlers get. */
  dataSource(): DataSource;
}

/** What a promotion of due delayed events did (see `OutboxStorePort.promoteScheduled`). */
export interface ScheduledPromotion {
  tenantIds: string[];
  promoted: number;
  nextDueInMs: number | null;
}

/** What a claim takes for a tenant. */
export interface ClaimRequest {
  tenantId: string;
  /** The token of every lease the claim takes; fences the outcomes. */
  leaseToken: string;
  /** At most this many new events, and this many due deliveries. */
  limit: number;
  /** New events: how the claim takes them, or null: not looked for (see `newEventsStatement`). */
  newEvents: NewEventsChoice;
  /** Also claim due deliveries (retries, expired leases) of the hosted consumers. */
  due: boolean;
  /** Names of the consumers hosted here (the app's and the tenant's). */
  hosted: readonly string[];
  /** Names of the in-process consumers hosted here. */
  inProcess: readonly string[];
  /** Names of the hosted consumers with a concurrency or rate limit (see `lockConsumerLimits`). */
  limited: readonly string[];
  /** The tenant's own consumers. */
  tenantConsumers: readonly OutboxConsumer[];
  /** Begin the batch transaction, in which in-process handlers run, in the claim's round trip. */
  beginBatch: boolean;
}

/** What a claim found. */
export interface ClaimAnswer {
  /** New events claimed: their deliveries, how many events, and how many another relay held the lease of. */
  fresh: { deliveries: ClaimedDelivery[]; events: number; lost: number };
  /** Due deliveries claimed. */
  due: ClaimedDelivery[];
  /**
   * From the lean claim when it claimed nothing and the fan-out must run instead: another consumer routes these
   * events (`routes`), or they wait for something the lean claim does not do.
   */
  fallback: 'routes' | 'unrouted' | 'stale' | null;
}

/** How a batch transaction closes (see `TenantConnection.commitBatch`). */
export interface BatchClosing {
  leaseToken: string;
  outcomes: readonly DeliveryOutcome[];
  /** The last handlers may have changed settings: the session is reset first. */
  dirty: boolean;
  /**
   * No handler reached the batch's connection: nothing can have ended the transaction, so the outcomes go
   * without the guard.
   */
  noWrites: boolean;
}

/**
 * What the handler scope needs of the batch's connection to run handlers on it (see `BatchRun`): the batch's
 * context, its seal, and the round trips it makes within the batch's bound.
 */
export interface HandlerChannel {
  tenantSetting: string;
  tenantId: string;
  /** The batch marker's value: the lease token (see `BATCH_MARKER`). */
  marker: string;
  /**
   * What restores the relay's session and batch context after a handler changed settings (see `resetSession`):
   * made when asked, which is rare (not for every batch).
   */
  restore: () => readonly SqlStatement[];
  /** Takes what must go first in the batch transaction's next round trip. */
  takePending: () => SqlStatement[];
  /** Sent with the first handler's opening: makes any commit but the relay's fail (see `sealBatch`). */
  seal: SqlStatement;
  /** The batch's connection as the handler scope writes on it (connected, in pipeline mode). */
  wire: () => Promise<BatchWire>;
  /**
   * Asks the server to cancel what the batch's session runs now (a handler's query left running past its
   * deadline), on a connection of its own; resolves when delivered, or after `timeoutMs`.
   */
  cancelRunning: (timeoutMs: number) => Promise<unknown>;
  /** Waits for a round trip of the relay's on the batch's connection, within its bound. */
  bounded: <T>(work: () => Promise<T>) => Promise<T>;
}

/** The batch's connection, for the handler scope's own statements between a handler's queries. */
export interface BatchWire {
  /** True while a transaction is open on the connection (healthy or aborted), as its last result said. */
  readonly inTransaction: boolean;
  /**
   * Writes the statements now, in order, each named when it has a prepared form, without waiting between them
   * (what is sent after this call goes after them, in the same round trip), and resolves to each one's rows;
   * rejects with the first error.
   */
  send(statements: readonly SqlStatement[]): Promise<unknown[][]>;
}

/**
 * One tenant's connection for a visit: the claim commits on it and the batch transaction runs on it; outcomes
 * of a batch that holds it are recorded on it (a round never asks the pool for a second connection).
 */
export interface TenantConnection {
  /**
   * Claims a batch (a short transaction of its own). With `beginBatch`, the batch transaction begins in the same
   * round trip; a batch transaction still open is rolled back first.
   */
  claim(request: ClaimRequest): Promise<ClaimAnswer>;
  /** Begins the batch transaction for `leaseToken`'s batch, unless the claim began it. */
  beginBatch(leaseToken: string): Promise<void>;
  /**
   * Records the outcomes in the batch transaction, fenced by its lease, and commits it. Says how many event
   * leases the outcomes released. Rolls back on failure.
   */
  commitBatch(closing: BatchClosing): Promise<{ released: number }>;
  /**
   * Records outcomes not fenced as a batch: in the batch transaction when it is open (and commits it), else in
   * a short transaction of their own. Says how many were recorded.
   */
  recordOutcomes(request: {
    leaseToken: string;
    outcomes: readonly DeliveryOutcome[];
  }): Promise<{ recorded: number }>;
  /** Pushes back the leases of these events, held by `leaseToken` (a transaction of their own). */
  extendEventLeases(request: { leaseToken: string; eventIds: readonly string[] }): Promise<void>;
  /** Rolls the batch transaction back, if open. */
  rollback(): Promise<void>;
  /** Rolls back what is still open and gives the connection back (once; later calls do nothing). */
  release(): Promise<void>;
  /** True while the batch transaction is open. */
  readonly inTransaction: boolean;
  /** True once the connection went back to the pool. */
  readonly released: boolean;
  /** The TypeORM query runner of the batch transaction, which handlers' `context.manager` works on. */
  readonly runner: QueryRunner;
  /** What the handler scope needs to run `leaseToken`'s batch on this connection. */
  handlerChannel(leaseToken: string): HandlerChannel;
}

/** The Nest token of the store's port (`PgRelayStore`). */
export const OUTBOX_STORE_PORT = Symbol('OUTBOX_STORE_PORT');

/** SQLSTATE of a fenced outcome whose lease another relay took: the batch is rolled back. */
export { LEASE_LOST_SQLSTATE } from './sql';
