import { Injectable } from '@nestjs/common';
import type { OutboxConsumer } from '../registry/outbox-consumer';
import type { DeliveryOutcome } from './delivery-outcome';
import type { ClaimedDelivery } from './claimed-delivery';
import { errorText } from '../errors/error-text';
import { delivered, failed, outcomeTarget } from './delivery-outcome';
import { OutboxInstrumentation, runAttempt } from '../observability/outbox-instrumentation';

/** How many external deliveries of one batch run at once. */
const CONCURRENCY = 16;

/**
 * Delivers claimed deliveries of external consumers (webhooks), with no database transaction open: the claim
 * has committed with a lease, and the caller records the outcomes afterwards in a short transaction fenced by
 * the lease token.
 */
@Injectable()
export class ExternalDispatcher {
  constructor(private readonly instrumentation: OutboxInstrumentation) {}

  /** Runs every delivery (a few at a time) and says what happened to each. Never throws. */
  async dispatch(
    deliveries: readonly { delivery: ClaimedDelivery; consumer: OutboxConsumer }[],
  ): Promise<DeliveryOutcome[]> {
    const outcomes = new Array<DeliveryOutcome>(deliveries.length);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < deliveries.length) {
        const index = next++;
        const { delivery, consumer } = deliveries[index]!;
        // instrumentation: the attempt's context is active while the transport sends (traceparent)
        const attempt = this.instrumentation.attemptStarted(delivery, consumer);
        outcomes[index] = await runAttempt(attempt, () => this.deliverOne(delivery, consumer));
        attempt?.ended?.(outcomes[index]!);
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, deliveries.length) }, worker));
    return outcomes;
  }

  private async deliverOne(delivery: ClaimedDelivery, consumer: OutboxConsumer): Promise<DeliveryOutcome> {
    try {
      const result = await consumer.deliver!(delivery);
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
      }
    } catch (error) {
      return failed(delivery, consumer, 'transportError', errorText(error));
    }
  }
}
