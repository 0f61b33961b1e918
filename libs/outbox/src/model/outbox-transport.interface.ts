import type { OutboxEvent } from './outbox-event.interface';

/** One delivery of a claimed batch, as a transport sees it. */
export interface OutboxTransportDelivery {
  /** The event (read-only). `event.eventId` is the same on every attempt: use it as the message id. */
  readonly event: OutboxEvent;
  /** 1-based attempt number of this delivery. */
  readonly attempt: number;
  /**
   * Headers the outbox wants on the outgoing message (e.g. `traceparent` when tracing is on); empty when none.
   * Lowercase names.
   */
  readonly headers: Readonly<Record<string, string>>;
}

/** The deliveries of one consumer in one relay batch: one tenant, each event at most once, in commit order. */
export interface OutboxTransportBatch {
  /** The consumer's name, `transport:<name>` (or `broker:<name>`). */
  readonly consumer: string;
  readonly tenantId: string;
  readonly deliveries: readonly OutboxTransportDelivery[];
  /**
   * Aborted once the consumer's `timeoutMs` has passed: the relay has then recorded every delivery of the batch
   * as failed (`timeout`, retried later) and ignores what `send` returns. Stop sending when it fires.
   */
  readonly signal: AbortSignal;
}

/** What happened to one delivery. */
export type OutboxTransportOutcome =
  /** The remote side took responsibility for the message (a broker's acknowledgement, a 2xx…). */
  | { status: 'delivered'; externalRunId?: string | null }
  /**
   * Not taken, or not known to be taken: retried after the consumer's backoff (at least `retryAfterMs` when set,
   * capped by the backoff cap) until its attempts are spent, then dead. A message whose fate is unknown (the
   * connection dropped before its acknowledgement) is `failed`, never `delivered`.
   */
  | {
      status: 'failed';
      errorCode: string;
      error: string;
      retryAfterMs?: number;
      externalRunId?: string | null;
    }
  /** Failed in a way no retry can fix (the message cannot be encoded, the remote side refuses it for good). */
  | { status: 'dead'; errorCode: string; error: string; externalRunId?: string | null }
  /** Not attempted (remote side unreachable, circuit open): no attempt spent, due again after `retryAfterMs`. */
  | { status: 'deferred'; errorCode: string; error: string; retryAfterMs: number };

/**
 * A way out of the outbox: receives the claimed deliveries of one consumer in one relay batch and says what
 * happened to each. Called with no database transaction open and no connection held; the relay keeps the
 * deliveries' leases alive while `send` runs, and records the outcomes afterwards, fenced by the lease, so an
 * outcome of a relay that lost its lease is dropped. See docs/transports.md.
 */
export interface OutboxTransport {
  /**
   * Sends the batch; resolves with one outcome per delivery, in the order of `batch.deliveries`. A rejection,
   * or a missing or malformed outcome, fails the deliveries concerned with `transportError` (retried).
   */
  send(batch: OutboxTransportBatch): Promise<readonly OutboxTransportOutcome[]>;
  /** Called once at shutdown, after the relay has stopped (close connections here). */
  close?(): Promise<void> | void;
}
