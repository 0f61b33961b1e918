import type { EntityManager } from 'typeorm';

/** A JSON value that PostgreSQL `jsonb` stores and gives back unchanged. */
export type OutboxJson = null | boolean | number | string | OutboxJson[] | { [key: string]: OutboxJson };

/** What `OutboxService.enqueue` takes. */
export interface OutboxEventInput<TPayload = OutboxJson> {
  /** Tenant the event belongs to (UUID). */
  tenantId: string;
  /** Dotted lowercase name, e.g. `crm.contact.created.v1`. */
  eventName: string;
  /** JSON payload (plain objects, arrays, strings, finite numbers, booleans, null). */
  payload: TPayload;
  aggregateType?: string;
  aggregateId?: string;
  correlationId?: string;
  /** Positive integer. Default 1. */
  schemaVersion?: number;
  /** When the fact happened. Default: now. */
  occurredAt?: Date;
  /**
   * Deliver no sooner than this instant, by the database's clock (docs/flow-control.md#delayed-events). Not with
   * `delayMs`. Default: at once.
   */
  deliverAt?: Date;
  /**
   * Deliver no sooner than this many milliseconds after the insert, by the database's clock. A number from 0
   * to 8.64e15 (a JS Date's span); not with `deliverAt`. Default: at once.
   */
  delayMs?: number;
}

/**
 * `dedupe` of an event given to `enqueue`: enqueue it once per key (docs/flow-control.md#idempotency-keys). A
 * second enqueue of the same key, for the same tenant and event name, within the window writes no event. With
 * it, `enqueue` returns an {@link OutboxEnqueueOutcome} instead of the id. (Not a field of
 * {@link OutboxEventInput}: a value of that type keeps `enqueue` returning a string.)
 */
export interface OutboxDedupe {
  /** The key, per tenant and event name: 1 to 200 characters without control characters or lone surrogates. */
  key: string;
  /**
   * What a second enqueue of a key that is taken does: `'ignore'` writes nothing and returns the first event's id;
   * `'replace'` also replaces the first event's payload (and `schemaVersion`) while no relay has claimed it yet,
   * else keeps it as `'ignore'` does. `'debounce'` (needs `deliverAt` or `delayMs`): while the first event is still
   * `scheduled` (delayed, not due), also moves its delivery time to this call's, else keeps it. Default: `'ignore'`.
   */
  mode?: 'ignore' | 'replace' | 'debounce';
  /**
   * How long the key stays taken, from the first event's transaction (by the database's clock), in milliseconds:
   * after that the key may be used again. 1 ms to 366 days. Default: 86,400,000 (24 hours).
   */
  windowMs?: number;
}

/** What `enqueue` returns for an event with a `dedupe` key. */
export interface OutboxEnqueueOutcome {
  /** The event that holds the key: this call's when `outcome` is `'written'`, else the first one's. */
  eventId: string;
  /**
   * `'written'`: this call's event was written (the key was free). `'ignored'`: the key was taken; nothing was
   * written. `'replaced'`: the key was taken and the first event's payload is now this call's. `'kept'`: mode
   * `'replace'`, but a relay had already claimed the first event (or the transaction is not READ COMMITTED), so
   * nothing was written.
   */
  outcome: 'written' | 'ignored' | 'replaced' | 'kept';
}

/**
 * The envelope a handler receives. The in-process consumers of one event, in one batch, receive the same object
 * (as `@nestjs/event-emitter` listeners do): treat it, and its `data`, as read-only. `OutboxEventOf<'name'>` types it
 * from the app's `OutboxEventMap`.
 */
export interface OutboxEvent<TData = OutboxJson, TName extends string = string> {
  eventId: string;
  eventName: TName;
  tenantId: string;
  aggregateType: string | null;
  aggregateId: string | null;
  occurredAt: Date;
  correlationId: string | null;
  schemaVersion: number;
  data: TData;
}

/** The second argument of a handler. */
export interface OutboxHandlerContext {
  /**
   * An EntityManager inside the transaction that also records this consumer's inbox row: what the handler
   * writes through it commits with the delivery, or rolls back when the handler throws.
   */
  readonly manager: EntityManager;
  /** 1-based attempt number of this delivery. */
  readonly attempt: number;
  /** The consumer's name. */
  readonly consumer: string;
  /**
   * Asks to be called again in `ms` (0 to 86,400,000) without charging an attempt — "not now": the delivery waits
   * as pending and comes back no sooner than `ms` later, by the database's clock; the handler's writes through
   * `manager` are rolled back, as on a failure. Takes effect when the handler returns normally (a throw is
   * charged as a failure); the last call wins. Bounded by the consumer's `maxSnoozes`: past it, a snooze is
   * charged as a failed attempt. An ordered consumer's later events of the aggregate wait for it
   * (docs/flow-control.md#snooze). Usually `return context.retryAfter(60_000)`.
   */
  retryAfter(ms: number): void;
}
