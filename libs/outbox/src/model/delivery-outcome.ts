import { Logger } from '@nestjs/common';
import type { OutboxConsumer } from './outbox-consumer';
import { backoffDelayMs } from './backoff';
import type { ClaimedDelivery } from './claimed-delivery';
import { boundedText } from '../errors/error-text';
import { messages } from '../errors/outbox.messages';

/** What happened to one claimed delivery. */
export interface DeliveryOutcome {
  /** The delivery row; null for an in-process pair claimed through its event, whose row is inserted now. */
  deliveryId: string | null;
  /** With `deliveryId` null: the event and consumer of the row to insert, its attempt number, the event's tenant and insert order. */
  pair?: { eventId: string; consumer: string; attempt: number; tenantId: string; eventSeq: string };
  /**
   * `delivered`, `failed` (retry after `retryInMs`), `dead` (no more attempts), or `deferred`: not attempted
   * after all (e.g. the endpoint's circuit is open); the attempt is given back and it is due after `retryInMs`.
   */
  status: 'delivered' | 'failed' | 'dead' | 'deferred';
  errorCode: string | null;
  error: string | null;
  /** Delay before the next attempt when `failed` or `deferred`. */
  retryInMs: number;
  /** The receiver's own id for the delivery (a webhook's run id), kept on the row. */
  externalRunId?: string | null;
  /** `deferred` at the consumer's request (see `snoozed`): counted in the row's `snoozes`, which bounds them. */
  snoozed?: boolean;
  /**
   * With `snoozed`: hold the delivery's (consumer, tenant) pair for this long — its other deliveries wait too (a
   * webhook's `Retry-After`; see `holdPairs`).
   */
  holdMs?: number;
}

const logger = new Logger('OutboxDelivery');

/** Which row an outcome is for: the leased delivery row, or the in-process pair whose row is written now. */
export function outcomeTarget(delivery: ClaimedDelivery): Pick<DeliveryOutcome, 'deliveryId' | 'pair'> {
  if (delivery.deliveryId !== null) return { deliveryId: delivery.deliveryId };
  return {
    deliveryId: null,
    pair: {
      eventId: delivery.eventId,
      consumer: delivery.consumerName,
      attempt: delivery.attempt,
      tenantId: delivery.tenantId,
      eventSeq: delivery.eventSeq!,
    },
  };
}

/** A success. A pair whose previous claim was never recorded keeps that fact on its row (`staleLeaseRecovered`). */
export function delivered(delivery: ClaimedDelivery, externalRunId: string | null = null): DeliveryOutcome {
  const { deliveryId, pair } = outcomeTarget(delivery);
  const recoveredPair = deliveryId === null && delivery.recovered;
  // written out rather than spread: one per handler call, on the relay's hot path
  return {
    deliveryId,
    pair,
    status: 'delivered',
    errorCode: recoveredPair ? 'staleLeaseRecovered' : null,
    error: recoveredPair ? messages.staleLeaseRecovered(delivery.attempt - 1) : null,
    retryInMs: 0,
    externalRunId,
  };
}

/**
 * A failed attempt: retried after backoff (or `retryAfterMs` when the receiver asked, capped by the backoff
 * cap), or dead once the consumer's attempts are spent or `dead` is forced. Logs a warning per retry and an
 * error per dead letter, with event id, consumer and tenant.
 */
export function failed(
  delivery: ClaimedDelivery,
  consumer: OutboxConsumer,
  errorCode: string,
  error: string,
  options: { dead?: boolean; retryAfterMs?: number; externalRunId?: string | null } = {},
): DeliveryOutcome {
  const dead = options.dead === true || delivery.attempt >= consumer.maxAttempts;
  const where = `event ${delivery.eventId} (${delivery.event.eventName}), consumer ${consumer.name}, tenant ${delivery.tenantId}`;
  if (dead) logger.error(`dead letter after attempt ${delivery.attempt}: ${where}: [${errorCode}] ${error}`);
  else
    logger.warn(
      `attempt ${delivery.attempt}/${consumer.maxAttempts} failed, will retry: ${where}: [${errorCode}] ${error}`,
    );
  const backoff = backoffDelayMs(delivery.attempt, consumer.backoff);
  return {
    ...outcomeTarget(delivery),
    status: dead ? 'dead' : 'failed',
    errorCode,
    error: boundedText(error),
    retryInMs: dead
      ? 0
      : options.retryAfterMs !== undefined
        ? Math.min(consumer.backoff.capMs, Math.max(backoff, options.retryAfterMs))
        : backoff,
    externalRunId: options.externalRunId ?? null,
  };
}

/** Snoozes a delivery may take when its consumer sets no `maxSnoozes`. */
export const DEFAULT_MAX_SNOOZES = 25;

/**
 * The consumer asked to be called again in `ms` without charging an attempt (a handler's `context.retryAfter`, a
 * webhook's `429`/`503` with `Retry-After`): `deferred`, counted in the row's `snoozes`, due after `ms`. Once the
 * delivery was snoozed `maxSnoozes` times, a further snooze is charged as a failed attempt (`snoozeLimit`),
 * retried after the later of its backoff and `ms` (capped by the backoff cap), or dead once its attempts are
 * spent: a handler that snoozes for ever ends as a dead letter (docs/adr/1105-snooze.md).
 */
export function snoozed(
  delivery: ClaimedDelivery,
  consumer: OutboxConsumer,
  ms: number,
  why: { errorCode: string; error: string; holdPair?: boolean },
): DeliveryOutcome {
  const max = consumer.maxSnoozes ?? DEFAULT_MAX_SNOOZES;
  const count = delivery.snoozes ?? 0;
  if (count >= max)
    return failed(delivery, consumer, 'snoozeLimit', messages.snoozeLimit(consumer.name, max, why.error), {
      retryAfterMs: ms,
    });
  return {
    ...outcomeTarget(delivery),
    status: 'deferred',
    errorCode: why.errorCode,
    error: boundedText(why.error),
    retryInMs: ms,
    snoozed: true,
    holdMs: why.holdPair === true ? ms : undefined,
  };
}
