import type { OutboxWebhookCircuitState } from '../webhooks/outbox-webhook-options.interface';
import type { OutboxJson } from '../model/outbox-event.interface';
import type { OutboxRelayStall } from '../model/outbox-relay-stall.interface';

/** Status of an event in `event_outbox`. */
export type OutboxEventStatus =
  'pending' | 'processing' | 'published' | 'failed' | 'no_handlers' | 'scheduled';

/** Status of one event's delivery to one consumer. */
export type OutboxDeliveryStatus = 'pending' | 'processing' | 'delivered' | 'failed' | 'dead';

/** Deliveries of one consumer, counted per status. */
export type OutboxConsumerCounts = Record<OutboxDeliveryStatus, number>;

/** What `OutboxAdminService.stats` returns for one tenant. */
export interface OutboxStats {
  tenantId: string;
  /** Events per status (every status present, 0 when none). */
  events: Record<OutboxEventStatus, number>;
  /** Deliveries per consumer name found in this tenant's rows, per status. */
  consumers: Record<string, OutboxConsumerCounts>;
  /** Age of the oldest pending event or pending/failed delivery, in seconds; null when nothing waits. */
  oldestPendingAgeSeconds: number | null;
  /**
   * Consumers named in this tenant's delivery rows that no live instance hosts: unknown to the registry (renamed
   * or removed handlers) or not reported within `registry.orphanAfterMs`. Their pending rows wait forever.
   */
  orphanedConsumers: string[];
  /**
   * Circuit breakers of the webhook endpoints this tenant's events go to (static webhooks and the tenant's
   * subscriptions), as seen by this instance; `open` means paused: deliveries wait without using attempts.
   */
  webhookCircuits: OutboxWebhookCircuitState[];
  /**
   * Circuit breakers of the broker forwarders (`OutboxBrokersModule`'s `brokers`, those with a breaker) as seen by this instance:
   * `url` is the broker's address without its password, `tenantId` null.
   */
  brokerCircuits: OutboxWebhookCircuitState[];
  /**
   * Aggregates an ordered consumer cannot move past because one of their deliveries is dead, oldest first (at
   * most 100); `blockedAggregateCount` counts them all. Replay the dead event (`replayEvent`) to retry it, or purge
   * it (`purgeEvent`) to skip it: either lets the aggregate move on.
   */
  blockedAggregates: OutboxBlockedAggregate[];
  blockedAggregateCount: number;
  /**
   * Messages from a broker that `OutboxInbox` has not processed, per consumer name found in this tenant's inbox
   * rows: `retrying` (a delivery failed, the broker redelivers) and `dead` (dead-lettered). Processed messages
   * are not counted (there is one row for every message ever received).
   */
  inbox: Record<string, OutboxInboxCounts>;
  /**
   * The latest round trip of this instance's relay that got no reply from the database within
   * `relay.roundTripTimeoutMs` (its connection closed, its round given up), or null when none did since the app
   * started: `recoveredAt` is null while the database still does not answer. Of this instance, for every tenant.
   */
  relayStall: OutboxRelayStall | null;
  /**
   * The consumers paused for this tenant (its own pauses and those of every tenant): their deliveries wait,
   * uncharged, until `resumeConsumer` (docs/flow-control.md).
   */
  pausedConsumers: OutboxConsumerPause[];
  /**
   * When this tenant's next delayed event is due (`deliverAt`/`delayMs`, docs/flow-control.md#delayed-events), or
   * null when none waits; `events.scheduled` counts them.
   */
  nextDeliveryAt: Date | null;
}

/** A paused consumer (`OutboxAdminService.pauseConsumer`): its deliveries of `tenantId` (null: every tenant) wait. */
export interface OutboxConsumerPause {
  consumer: string;
  /** The tenant paused, or null: every tenant. */
  tenantId: string | null;
  pausedAt: Date;
  /** The actor of the audited pause, or null (`'relay'`: a webhook's `Retry-After` holds the pair). */
  pausedBy: string | null;
  reason: string | null;
  /** When the pause ends by itself (a webhook's `Retry-After`, docs/webhooks.md); null: until resumed. */
  resumesAt: Date | null;
}

/** What `pauseConsumer` and `resumeConsumer` act on. */
export interface OutboxConsumerPauseScope {
  /** The tenant whose deliveries to the consumer wait; leave it out for every tenant. */
  tenantId?: string;
  /** Why (shown with the pause in `stats`, the board and the audit row), at most 500 characters. */
  reason?: string;
}

/** One inbox consumer's messages not processed. */
export interface OutboxInboxCounts {
  retrying: number;
  dead: number;
}

/** An aggregate held up for an ordered consumer by a dead delivery. */
export interface OutboxBlockedAggregate {
  consumer: string;
  aggregateType: string | null;
  aggregateId: string;
  /** The event whose delivery to `consumer` is dead: the earliest of the aggregate. */
  deadEventId: string;
  /** Deliveries of later events of the aggregate to `consumer` that wait behind it. */
  waitingDeliveries: number;
}

/** Filter of `failedEvents`, `replayFailed` and `purgeFailed`. */
export interface OutboxFailedFilter {
  /** Only events dead for this consumer (any name; unknown ones match nothing). */
  consumer?: string;
  /** Only events with this exact name. */
  eventName?: string;
}

/** Page and filter of `failedEvents`. */
export interface OutboxFailedEventsQuery extends OutboxFailedFilter {
  /** 1 to 500. Default 50. */
  limit?: number;
  /** Default 0. */
  offset?: number;
}

/** One consumer's delivery of a failed event, as listed by `failedEvents`. */
export interface OutboxFailedDelivery {
  consumer: string;
  status: OutboxDeliveryStatus;
  attempts: number;
  errorCode: string | null;
  lastError: string | null;
  updatedAt: Date;
}

/** A failed event (some delivery is dead) with the state of every consumer's delivery. */
export interface OutboxFailedEvent {
  eventId: string;
  eventName: string;
  aggregateType: string | null;
  aggregateId: string | null;
  correlationId: string | null;
  occurredAt: Date;
  createdAt: Date;
  failedAt: Date | null;
  /** The first dead delivery's error, as `consumer: message`. */
  error: string | null;
  deliveries: OutboxFailedDelivery[];
}

/** A page of results and the number matching in all. */
export interface OutboxPage<T> {
  total: number;
  limit: number;
  offset: number;
  items: T[];
}

/** One consumer's delivery of an event, in full. */
export interface OutboxDeliveryRecord {
  consumer: string;
  status: OutboxDeliveryStatus;
  attempts: number;
  errorCode: string | null;
  lastError: string | null;
  nextAttemptAt: Date;
  leaseExpiresAt: Date | null;
  processedAt: Date | null;
  /** When the consumer's inbox row was written (in the handler's transaction); null until delivered. */
  inboxAt: Date | null;
  externalRunId: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** What `OutboxAdminService.deliveries` returns: one event and its delivery to each consumer. */
export interface OutboxEventDeliveries {
  eventId: string;
  eventName: string;
  status: OutboxEventStatus;
  payload: OutboxJson;
  aggregateType: string | null;
  aggregateId: string | null;
  correlationId: string | null;
  /** The idempotency key it was enqueued with (`dedupe.key`), or null. */
  dedupeKey: string | null;
  schemaVersion: number;
  occurredAt: Date;
  createdAt: Date;
  /** For a delayed event, when it is (or was) due; null for one enqueued without a delay. */
  deliverAt: Date | null;
  publishedAt: Date | null;
  failedAt: Date | null;
  error: string | null;
  deliveriesOpen: number;
  deliveriesDead: number;
  deliveries: OutboxDeliveryRecord[];
}

/** Options of the operator's writes (replay, purge, pause): with `audit`, a row of `outbox_audit` commits with the change. */
export interface OutboxActionOptions {
  /** Who acted (e.g. the user the app's guard authenticated), recorded with what, which tenant, when and how many rows. */
  audit?: { actor: string };
}

/** One row of a tenant's audit log. */
export interface OutboxAuditEntry {
  id: string;
  actor: string;
  /**
   * `replayEvent`, `replayFailed`, `replayMatching`, `purgeEvent`, `purgeFailed`, `purgeMatching`, `backfill`,
   * `pauseSubscription`, `resumeSubscription`, `pauseConsumer` or `resumeConsumer`.
   */
  action: string;
  /** What it was applied to: the event id, consumer, event name or subscription given, or a bulk action's filter. */
  target: Record<string, unknown>;
  /** Rows changed: deliveries reset, events purged, subscriptions paused or resumed. */
  rows: number;
  at: Date;
}

/** What `OutboxAdminService.backfill` covers and how it runs. */
export interface OutboxBackfillRequest {
  /** One tenant; left out, every tenant the connection sees (all for the table owner, one under row-level security). */
  tenantId?: string;
  /** Events inserted at or after this time, or `'oldest'`: every retained event. */
  since: Date | 'oldest';
  /** Only events matching one of these names or patterns (`orders.*`); left out, every event the consumer listens to. */
  eventNames?: readonly string[];
  /** Count the delivery rows it would create, and change nothing. Default `false`. */
  dryRun?: boolean;
  /** Events per chunk (one transaction each). Default 1,000. */
  chunkSize?: number;
  /**
   * Pause between chunks, in ms: what keeps live traffic's latency (docs/adr/1011-backfill-for-late-consumers.md).
   * Default 1,000 (about 1,000 rows a second with the default chunk).
   */
  pauseMs?: number;
}

/** What `OutboxAdminService.backfill` did, or would do (`dryRun`). */
export interface OutboxBackfillReport {
  /** The same consumer, tenant, `since` and event names give the same id: running it again resumes it. */
  backfillId: string;
  dryRun: boolean;
  /** Dry run: the delivery rows it would create now. Otherwise: the rows this run created. */
  deliveries: number;
  /** Rows created by every run of this backfill (0 for a dry run). */
  totalCreated: number;
  /** Chunks this run committed. */
  chunks: number;
  /** Reached its horizon (a dry run: false). */
  finished: boolean;
}

/** A backfill and its progress (`OutboxAdminService.backfills`). */
export interface OutboxBackfillState {
  backfillId: string;
  consumer: string;
  /** null: every tenant the connection saw. */
  tenantId: string | null;
  /** null: from the oldest retained event. */
  since: Date | null;
  eventNames: string[] | null;
  /** Delivery rows created so far. */
  created: number;
  chunks: number;
  startedAt: Date;
  updatedAt: Date;
  /** null while it runs, or after it stopped (run the same request again to resume it). */
  finishedAt: Date | null;
}

/**
 * What `OutboxAdminService.searchEvents` looks for in one tenant: at least one of `eventId`, `aggregateId` (with
 * `aggregateType` or not), `correlationId` and `eventName`; the fields given must all match.
 */
export interface OutboxEventSearch {
  eventId?: string;
  /** Only with `aggregateId`. */
  aggregateType?: string;
  aggregateId?: string;
  correlationId?: string;
  /** An exact event name. */
  eventName?: string;
  /** The next page: events older than this one (the `nextBeforeId` of the page before). */
  beforeId?: string;
  /** 1 to 500. Default 50. */
  limit?: number;
}

/** One event found by `searchEvents`. */
export interface OutboxEventMatch {
  eventId: string;
  eventName: string;
  status: OutboxEventStatus;
  aggregateType: string | null;
  aggregateId: string | null;
  correlationId: string | null;
  createdAt: Date;
  /** Deliveries not settled yet, and dead ones. */
  deliveriesOpen: number;
  deliveriesDead: number;
}

/** A page of `searchEvents`, newest first. */
export interface OutboxEventSearchPage {
  items: OutboxEventMatch[];
  /** Pass it as `beforeId` for the next page; null when this page is the last. */
  nextBeforeId: string | null;
}

/**
 * What `replayMatching` and `purgeMatching` apply to in one tenant: every field given must match (none: every
 * dead or failed delivery of the tenant, every failed event).
 */
export interface OutboxBulkFilter {
  /** Deliveries of this consumer (a purge: events dead for it). */
  consumer?: string;
  /** `dead`, or `failed` (retrying); a replay takes both when left out, a purge takes `dead` only. */
  status?: 'dead' | 'failed';
  /** An exact event name. */
  eventName?: string;
  /** Events created at or after this time. */
  from?: Date;
  /** Events created before this time. */
  to?: Date;
}

/** A bulk action's filter and how it runs. */
export interface OutboxBulkRequest extends OutboxBulkFilter {
  /** Count what it would change, and change nothing. Default `false`. */
  dryRun?: boolean;
  /** Rows per chunk (one transaction each), 1 to 10,000. Default 1,000. */
  chunkSize?: number;
}

/** What a bulk action did, or would do (`dryRun`). */
export interface OutboxBulkReport {
  dryRun: boolean;
  /** Deliveries reset (replay) or events purged (purge); a dry run: how many would be now. */
  count: number;
  /** Chunks committed (0 for a dry run). */
  chunks: number;
}
