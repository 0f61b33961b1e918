import type { Type } from '@nestjs/common';
import type { OutboxBackoffOptions } from './backoff';
import type { OutboxStartFrom } from './outbox-handler-options.interface';
import type { OutboxEvent, OutboxHandlerContext } from './outbox-event.interface';
import type { ClaimedDelivery } from './claimed-delivery';
import type { OutboxTransportOutcome } from './outbox-transport.interface';

/**
 * What an external transport says about one delivery; the relay turns it into a stored outcome. `snoozed` (webhooks
 * only, not a transport's outcome): the receiver asked to be called again after `retryAfterMs` (`429`/`503` with
 * `Retry-After`); no attempt is charged and the (consumer, tenant) pair is held until then (docs/adr/1105-snooze.md).
 */
export type ExternalDeliveryResult =
  OutboxTransportOutcome | { status: 'snoozed'; errorCode: string; error: string; retryAfterMs: number };

/**
 * A consumer's limits as the registry stores them (`outbox_consumers`): null where the option is not set. Set
 * from `@OnOutboxEvent`'s `concurrency` and `rateLimit`; a consumer with none has no `limits`.
 */
export interface OutboxConsumerLimits {
  readonly concurrency: number | null;
  readonly tenantConcurrency: number | null;
  readonly rateLimit: number | null;
  readonly rateIntervalMs: number | null;
  readonly ratePerTenant: boolean;
  /**
   * What the rate limit is counted per, within each tenant (`rateLimit.perKey`): `'aggregate'`, or
   * `'payload:<path>'` for a payload field (`'payload:partner.id'`); null or absent: not per key.
   */
  readonly rateKey?: string | null;
}

/** One consumer known to this app: a named handler (or external endpoint) and the events it listens to. */
export interface OutboxConsumer {
  /** Stable name stored in `outbox_deliveries.consumer_name`. */
  readonly name: string;
  /**
   * `handler`: in-process, run inside a transaction with the inbox row. The others are external, no transaction
   * held: `webhook` (one request per delivery), `transport` and `broker` (one call per claimed batch).
   */
  readonly kind: 'handler' | 'webhook' | 'transport' | 'broker';
  /** What it listens to, for display: its patterns joined with ", ". */
  readonly eventName: string;
  /** The patterns it listens to: exact event names, `prefix.*`, or `*`. */
  readonly eventNames: readonly string[];
  /** The class that hosts the handler (for external consumers, the transport's class). */
  readonly hostClass: Type;
  /** The method name (for external consumers, the transport's delivery method). */
  readonly methodName: string;
  /**
   * Deliver events of one aggregate (same tenant, aggregate type and id) one at a time, in commit order; a
   * dead delivery blocks the aggregate for this consumer until replayed. Default false.
   */
  readonly ordered?: boolean;
  /** Where its events start; other than `'registration'`, a backfill runs once at boot. Default `'registration'`. */
  readonly startFrom?: OutboxStartFrom;
  /** Its concurrency and rate limits, enforced by the claims in the database; none when absent. */
  readonly limits?: OutboxConsumerLimits;
  readonly maxAttempts: number;
  /** Snoozes per delivery before a snooze is charged as a failed attempt. Default: `DEFAULT_MAX_SNOOZES`. */
  readonly maxSnoozes?: number;
  readonly timeoutMs: number;
  readonly backoff: Required<OutboxBackoffOptions>;
  /** In-process consumers: calls the handler bound to its instance. */
  readonly handle?: (event: OutboxEvent, context: OutboxHandlerContext) => unknown;
  /** External consumers: delivers over the network, with no database transaction open. Must not throw. */
  readonly deliver?: (delivery: ClaimedDelivery) => Promise<ExternalDeliveryResult>;
  /**
   * External consumers that send a batch at once (transports, brokers): one result per delivery, in order, with
   * the headers the instrumentation wants on each message. Takes precedence over `deliver`. Must not throw.
   */
  readonly deliverBatch?: (
    deliveries: readonly ClaimedDelivery[],
    headers: readonly Readonly<Record<string, string>>[],
  ) => Promise<ExternalDeliveryResult[]>;
}
