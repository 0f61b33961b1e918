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
}

/** What the decorator records on a method. */
export interface OutboxHandlerMetadata {
  eventName: string;
  options: OnOutboxEventOptions;
}
