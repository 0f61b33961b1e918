import { Injectable, Logger } from '@nestjs/common';
import type { DataSource, QueryRunner } from 'typeorm';
import { OutboxHandlerTimeoutError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { OutboxConsumer } from '../registry/outbox-consumer';
import { backoffDelayMs } from '../relay/backoff';
import type { DeliveryOutcome } from '../store/outbox.queries';
import type { ClaimedDelivery } from './claimed-delivery';
import { HandlerScope } from './handler-scope';

const ERROR_TEXT_MAX = 2000;

/**
 * Calls in-process handlers for a batch of claimed deliveries, one after another, inside the caller's open
 * transaction: each handler gets a lazily opened savepoint, so its writes and its inbox row (written by the
 * caller after this returns) commit together, and a failing handler is rolled back alone.
 */
@Injectable()
export class InProcessDispatcher {
  private readonly logger = new Logger(InProcessDispatcher.name);

  /** Runs every delivery and says what happened to each. Never throws for a handler's failure. */
  async dispatch(
    dataSource: DataSource,
    runner: QueryRunner,
    deliveries: readonly ClaimedDelivery[],
    consumers: (name: string) => OutboxConsumer | undefined,
  ): Promise<DeliveryOutcome[]> {
    const outcomes: DeliveryOutcome[] = [];
    let index = 0;
    for (const delivery of deliveries) {
      const consumer = consumers(delivery.consumerName);
      if (!consumer) continue; // not hosted here: never claimed by this instance, kept for safety
      if (delivery.recovered && delivery.attempt > consumer.maxAttempts) {
        // Attempts kept starting and never finishing: the process likely dies on this event. Stop here.
        outcomes.push(this.failure(delivery, consumer, 'staleLeaseRecovered', poisonMessage(delivery), true));
        continue;
      }
      const scope = new HandlerScope(dataSource, runner, `outbox_h${index++}`, consumer.name);
      try {
        await withTimeout(
          Promise.resolve().then(() =>
            consumer.handle(delivery.event, { manager: scope.manager, attempt: delivery.attempt, consumer: consumer.name }),
          ),
          consumer.timeoutMs,
          () => new OutboxHandlerTimeoutError(messages.handlerTimeout(consumer.name, consumer.timeoutMs)),
        );
        await scope.commit();
        outcomes.push({ deliveryId: delivery.deliveryId, status: 'delivered', errorCode: null, error: null, retryInMs: 0 });
      } catch (error) {
        await scope.rollback();
        const code = error instanceof OutboxHandlerTimeoutError ? 'timeout' : 'handlerError';
        outcomes.push(this.failure(delivery, consumer, code, errorText(error), false));
      }
    }
    return outcomes;
  }

  private failure(
    delivery: ClaimedDelivery,
    consumer: OutboxConsumer,
    errorCode: string,
    error: string,
    forceDead: boolean,
  ): DeliveryOutcome {
    const dead = forceDead || delivery.attempt >= consumer.maxAttempts;
    const where = `event ${delivery.event.eventId} (${delivery.event.eventName}), consumer ${consumer.name}, tenant ${delivery.event.tenantId}`;
    if (dead) this.logger.error(`dead letter after attempt ${delivery.attempt}: ${where}: ${error}`);
    else this.logger.warn(`attempt ${delivery.attempt}/${consumer.maxAttempts} failed, will retry: ${where}: ${error}`);
    return {
      deliveryId: delivery.deliveryId,
      status: dead ? 'dead' : 'failed',
      errorCode,
      error,
      retryInMs: dead ? 0 : backoffDelayMs(delivery.attempt, consumer.backoff),
    };
  }
}

function poisonMessage(delivery: ClaimedDelivery): string {
  return `attempt ${delivery.attempt - 1} started but never finished (its relay died or stalled); dead-lettered as a likely poison event`;
}

/** `Error: message` for errors, `String(x)` for anything else thrown; bounded in length. */
export function errorText(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : `thrown non-error: ${String(error)}`;
  return text.length > ERROR_TEXT_MAX ? `${text.slice(0, ERROR_TEXT_MAX)}…` : text;
}

function withTimeout<T>(work: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
