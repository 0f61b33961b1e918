import { Injectable } from '@nestjs/common';
import type { ExternalDeliveryResult, OutboxConsumer } from '../model/outbox-consumer';
import type { DeliveryOutcome } from '../model/delivery-outcome';
import type { ClaimedDelivery } from '../model/claimed-delivery';
import { errorText } from '../errors/error-text';
import { delivered, failed, outcomeTarget, snoozed } from '../model/delivery-outcome';
import { OutboxInstrumentation, runAttempt } from '../extension/outbox-instrumentation';

/** How many external deliveries of one batch run at once. */
const CONCURRENCY = 16;

type Assigned = { delivery: ClaimedDelivery; consumer: OutboxConsumer };

/**
 * Delivers claimed deliveries of external consumers (webhooks, transports, brokers), with no database
 * transaction open: the claim has committed with a lease, and the caller records the outcomes afterwards in a
 * short transaction fenced by the lease token. Webhooks go one request per delivery, a few at a time; a consumer
 * with `deliverBatch` gets its deliveries of the batch in one call, beside them.
 */
@Injectable()
export class ExternalDispatcher {
  constructor(private readonly instrumentation: OutboxInstrumentation) {}

  /** Runs every delivery and says what happened to each, in the order given. Never throws. */
  async dispatch(deliveries: readonly Assigned[]): Promise<DeliveryOutcome[]> {
    const outcomes = new Array<DeliveryOutcome>(deliveries.length);
    const single: number[] = [];
    const batches = new Map<OutboxConsumer, number[]>();
    deliveries.forEach(({ consumer }, index) => {
      if (!consumer.deliverBatch) return single.push(index);
      const indexes = batches.get(consumer) ?? [];
      indexes.push(index);
      batches.set(consumer, indexes);
    });
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < single.length) {
        const index = single[next++]!;
        const { delivery, consumer } = deliveries[index]!;
        // instrumentation: the attempt's context is active while the transport sends (traceparent)
        const attempt = this.instrumentation.attemptStarted(delivery, consumer);
        outcomes[index] = await runAttempt(attempt, () => this.deliverOne(delivery, consumer));
        attempt?.ended?.(outcomes[index]!);
      }
    };
    await Promise.all([
      ...Array.from({ length: Math.min(CONCURRENCY, single.length) }, worker),
      ...[...batches].map(async ([consumer, indexes]) => {
        const results = await this.deliverBatch(
          indexes.map((i) => deliveries[i]!.delivery),
          consumer,
        );
        indexes.forEach((index, i) => (outcomes[index] = results[i]!));
      }),
    ]);
    return outcomes;
  }

  private async deliverOne(delivery: ClaimedDelivery, consumer: OutboxConsumer): Promise<DeliveryOutcome> {
    try {
      return toOutcome(delivery, consumer, await consumer.deliver!(delivery));
    } catch (error) {
      return failed(delivery, consumer, 'transportError', errorText(error));
    }
  }

  /** One call for the consumer's deliveries; each attempt observed on its own, with its own outgoing headers. */
  private async deliverBatch(
    batch: readonly ClaimedDelivery[],
    consumer: OutboxConsumer,
  ): Promise<DeliveryOutcome[]> {
    const attempts = batch.map((delivery) => this.instrumentation.attemptStarted(delivery, consumer));
    const headers = attempts.map((attempt) =>
      attempt ? runAttempt(attempt, () => this.instrumentation.outgoingHeaders()) : NO_HEADERS,
    );
    let results: readonly ExternalDeliveryResult[] | null = null;
    let problem = '';
    try {
      results = await consumer.deliverBatch!(batch, headers);
    } catch (error) {
      problem = errorText(error);
    }
    return batch.map((delivery, i) => {
      const result = results?.[i];
      const outcome = result
        ? toOutcome(delivery, consumer, result)
        : failed(delivery, consumer, 'transportError', problem || 'the transport returned no outcome');
      attempts[i]?.ended?.(outcome);
      return outcome;
    });
  }
}

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** The stored outcome of what a transport said about a delivery. */
function toOutcome(
  delivery: ClaimedDelivery,
  consumer: OutboxConsumer,
  result: ExternalDeliveryResult,
): DeliveryOutcome {
  switch (result.status) {
    case 'delivered':
      return delivered(delivery, result.externalRunId ?? null);
    case 'failed':
      return failed(delivery, consumer, result.errorCode, result.error, {
        retryAfterMs: result.retryAfterMs,
        externalRunId: result.externalRunId,
      });
    case 'dead':
      return failed(delivery, consumer, result.errorCode, result.error, {
        dead: true,
        externalRunId: result.externalRunId,
      });
    case 'deferred':
      return {
        ...outcomeTarget(delivery),
        status: 'deferred',
        errorCode: result.errorCode,
        error: result.error,
        retryInMs: result.retryAfterMs,
      };
    case 'snoozed':
      // the receiver's "not now" (a webhook's 429/503 with Retry-After): uncharged, its pair held (ADR 1105)
      return snoozed(delivery, consumer, result.retryAfterMs, {
        errorCode: result.errorCode,
        error: result.error,
        holdPair: true,
      });
    default:
      return failed(
        delivery,
        consumer,
        'transportError',
        'the transport returned an outcome of no known status',
      );
  }
}
