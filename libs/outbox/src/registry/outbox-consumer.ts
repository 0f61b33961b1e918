import type { Type } from '@nestjs/common';
import type { OutboxBackoffOptions } from '../interfaces/outbox-module-options.interface';
import type { OutboxEvent, OutboxHandlerContext } from '../interfaces/outbox-event.interface';
import type { ClaimedDelivery } from '../delivery/claimed-delivery';

/** What an external transport says about one delivery; the relay turns it into a stored outcome. */
export type ExternalDeliveryResult =
  | { status: 'delivered'; externalRunId?: string | null }
  /** Failed; retried with backoff (or after `retryAfterMs` when the receiver said so) until maxAttempts. */
  | {
      status: 'failed';
      errorCode: string;
      error: string;
      retryAfterMs?: number;
      externalRunId?: string | null;
    }
  /** Failed in a way no retry can fix (e.g. HTTP 400): dead at once. */
  | { status: 'dead'; errorCode: string; error: string; externalRunId?: string | null }
  /** Not attempted (e.g. circuit open): the attempt is given back, due again after `retryAfterMs`. */
  | { status: 'deferred'; errorCode: string; error: string; retryAfterMs: number };

/** One consumer known to this app: a named handler (or external endpoint) and the events it listens to. */
export interface OutboxConsumer {
  /** Stable name stored in `outbox_deliveries.consumer_name`. */
  readonly name: string;
  /** `handler`: in-process, run inside a transaction with the inbox row. `webhook`: external, no transaction held. */
  readonly kind: 'handler' | 'webhook';
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
  readonly maxAttempts: number;
  readonly timeoutMs: number;
  readonly backoff: Required<OutboxBackoffOptions>;
  /** In-process consumers: calls the handler bound to its instance. */
  readonly handle?: (event: OutboxEvent, context: OutboxHandlerContext) => unknown;
  /** External consumers: delivers over the network, with no database transaction open. Must not throw. */
  readonly deliver?: (delivery: ClaimedDelivery) => Promise<ExternalDeliveryResult>;
}
