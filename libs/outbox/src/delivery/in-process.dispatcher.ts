import { Injectable } from '@nestjs/common';
import type { DataSource, QueryRunner } from 'typeorm';
import { OutboxHandlerTimeoutError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { OutboxConsumer } from '../registry/outbox-consumer';
import type { DeliveryOutcome } from '../store/outbox.queries';
import type { ClaimedDelivery } from './claimed-delivery';
import { delivered, errorText, failed } from './delivery-outcome';
import { HandlerScope, type BatchSavepoints } from './handler-scope';
import { OutboxInstrumentation } from '../observability/outbox-instrumentation';

/**
 * Calls in-process handlers for a batch of claimed deliveries, one after another, inside the caller's open
 * transaction: each handler gets a lazily opened savepoint, so its writes and its inbox row (written by the
 * caller after this returns) commit together, and a failing handler is rolled back alone.
 */
@Injectable()
export class InProcessDispatcher {
  constructor(private readonly instrumentation: OutboxInstrumentation) {}

  /** Runs every delivery and says what happened to each. Never throws for a handler's failure. */
  async dispatch(
    dataSource: DataSource,
    runner: QueryRunner,
    deliveries: readonly { delivery: ClaimedDelivery; consumer: OutboxConsumer }[],
  ): Promise<DeliveryOutcome[]> {
    const outcomes: DeliveryOutcome[] = [];
    const batch: BatchSavepoints = { pendingRelease: null };
    let index = 0;
    for (const { delivery, consumer } of deliveries) {
      const name = `outbox_h${index++}`;
      // The scope (and the context's manager) is made on first use: most handlers that do not touch the
      // database never ask, and then settling them costs nothing, not even an await.
      // (typed by an assertion: assigned in the getter, it must not narrow to null below)
      let scope = null as HandlerScope | null;
      let settled = false;
      const context = {
        get manager() {
          if (scope === null) {
            scope = new HandlerScope(dataSource, runner, name, consumer.name, batch);
            // asked for only after the handler returned (a promise it left running): its queries will fail
            if (settled) scope.settleUnused();
          }
          return scope.manager;
        },
        attempt: delivery.attempt,
        consumer: consumer.name,
      };
      // instrumentation: one observed attempt per handler call (null when nothing observes)
      const attempt = this.instrumentation.attemptStarted(delivery, consumer);
      let outcome: DeliveryOutcome;
      try {
        const returned = attempt?.run
          ? attempt.run(() => consumer.handle!(delivery.event, context))
          : consumer.handle!(delivery.event, context);
        // A handler that returns no promise has finished: no timer to arm.
        if (isThenable(returned)) {
          await withTimeout(
            Promise.resolve(returned),
            consumer.timeoutMs,
            () => new OutboxHandlerTimeoutError(messages.handlerTimeout(consumer.name, consumer.timeoutMs)),
          );
        }
        settled = true;
        if (scope !== null) await scope.commit();
        outcome = delivered(delivery);
      } catch (error) {
        settled = true;
        if (scope !== null) await scope.rollback();
        const code = error instanceof OutboxHandlerTimeoutError ? 'timeout' : 'handlerError';
        outcome = failed(delivery, consumer, code, errorText(error));
      }
      outcomes.push(outcome);
      attempt?.ended?.(outcome);
    }
    return outcomes;
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

function withTimeout<T>(work: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
