import type { OutboxBackoffOptions } from './backoff';

/** Options of `@OnOutboxEvent`. */
export interface OnOutboxEventOptions {
  /** Stable consumer name; renaming it orphans its delivery rows. Default: `ClassName.methodName`. */
  consumer?: string;
  /**
   * Receive the events of one aggregate (same tenant, `aggregateType` and `aggregateId`) one at a time, in the
   * order they were enqueued, even with several relays. A dead delivery blocks its aggregate for this consumer
   * until it is replayed. Events without `aggregateId` are not ordered. Default: `false`.
   */
  ordered?: boolean;
  /** Attempts before the delivery is dead. Default: the module's `maxAttempts`. */
  maxAttempts?: number;
  /**
   * Times one delivery may be snoozed (`context.retryAfter`) without charging an attempt; a further snooze is
   * charged as a failed attempt (error code `snoozeLimit`), so a handler that snoozes for ever ends dead after
   * `maxAttempts` more calls (docs/flow-control.md#snooze). Default: `25`.
   */
  maxSnoozes?: number;
  /** Time the handler may run, in ms. Default: the module's `handlerTimeoutMs`. */
  timeoutMs?: number;
  /** Backoff between attempts; fields left out take the module's. Default: the module's `backoff`. */
  backoff?: OutboxBackoffOptions;
  /**
   * Check each received payload against its schema (the module's `events` option) before the handler runs; the
   * handler gets the schema's output, and a payload it rejects is dead at once with error code `invalidPayload`
   * (not retried). Events whose name has no schema pass unchecked. Default: `false`.
   */
  validatePayload?: boolean;
  /**
   * Where a consumer that joins late starts: `'registration'` (the events fanned out once an instance first
   * reported it), `'oldest'` (every retained event as well) or a `Date` (the retained events inserted since then
   * as well). Other than `'registration'`, the relay backfills the older events once, in throttled chunks, when
   * an instance that hosts the consumer starts (docs/delivery.md#consumers-that-join-late). Default:
   * `'registration'`.
   */
  startFrom?: OutboxStartFrom;
  /**
   * At most this many of the consumer's deliveries in flight at once (claimed, not yet settled), across every
   * relay: `global` over all tenants, `perTenant` in each tenant; either or both. Deliveries over the cap wait,
   * uncharged. Enforced in the database (docs/flow-control.md#concurrency-and-rate-limits). Default: no cap.
   */
  concurrency?: { global?: number; perTenant?: number };
  /**
   * At most `limit` of the consumer's deliveries claimed in any window of `intervalMs` (sliding), across every
   * relay: over all tenants, or in each tenant with `perTenant: true`, or for each key of each tenant with
   * `perKey` — `'aggregate'` (the event's aggregate type and id) or `{ payload: 'field.path' }` (that payload
   * field's value) — so a key at its limit does not hold the others back. Deliveries over the limit wait,
   * uncharged. Enforced in the database (docs/flow-control.md#concurrency-and-rate-limits). Default: no limit.
   */
  rateLimit?: {
    limit: number;
    intervalMs: number;
    perTenant?: boolean;
    perKey?: 'aggregate' | { payload: string };
  };
}

/** Where a consumer's events start (`@OnOutboxEvent`'s `startFrom`). */
export type OutboxStartFrom = 'registration' | 'oldest' | Date;

/** What the decorator records on a method. */
export interface OutboxHandlerMetadata {
  eventName: string;
  options: OnOutboxEventOptions;
}
