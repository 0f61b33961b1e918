import { Injectable } from '@nestjs/common';
import type { DataSource, QueryRunner } from 'typeorm';
import { OutboxError, OutboxHandlerTimeoutError, OutboxTransactionEndedError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import { sqlState } from '../errors/sql-state';
import type { OutboxConsumer } from '../model/outbox-consumer';
import type { HandlerChannel } from '../store/outbox-store.port';
import type { ClaimedDelivery } from '../model/claimed-delivery';
import { errorText } from '../errors/error-text';
import { delivered, failed, snoozed, type DeliveryOutcome } from '../model/delivery-outcome';
import { handlerFailure } from './handler-failure';
import { OutboxInstrumentation } from '../extension/outbox-instrumentation';
import { HandlerScope, NO_ACTIVE_TRANSACTION, type BatchProblem, type BatchState } from './handler-scope';
import { HandlerSqlReader } from './handler-sql';

/** How one batch transaction's handlers run (see `InProcessDispatcher.dispatch`): on the batch's connection. */
export interface BatchRun extends HandlerChannel {
  /** Check each handler as it returns, at a round trip each (see `BatchState.careful`). */
  careful: boolean;
  /** A savepoint per handler that writes (see `BatchState.savepoints`); always with `careful`. */
  savepoints: boolean;
  /** Deliveries whose outcome is known already: their handlers are not called. */
  settled?: ReadonlyMap<ClaimedDelivery, DeliveryOutcome>;
  /** Deliveries whose attempt instrumentation observed already (a batch run again): not observed twice. */
  observed?: ReadonlySet<ClaimedDelivery>;
}

/** What a batch's handlers did: an outcome per delivery, or a problem that keeps the batch from committing. */
export interface DispatchResult {
  /** One per delivery, in order, as far as the handlers ran (all of them when there is no problem). */
  outcomes: DeliveryOutcome[];
  problem: BatchProblem | null;
  /** The last handlers may have changed settings since the relay last restored its own: restore before the outcome. */
  dirty: boolean;
  /** Handlers that asked for `context.manager`. */
  scoped: number;
  /**
   * A run without savepoints stopped at a handler that failed (or snoozed) after it sent a statement: its writes
   * cannot be undone alone. The batch transaction must be rolled back and the batch run again with savepoints,
   * the last outcome (that handler's failure or snooze) kept as it is.
   */
  rerun: boolean;
}

/**
 * Calls in-process handlers for a batch of claimed deliveries, one after another, inside the caller's open
 * transaction, so each handler's writes and its outcome (written by the caller after this returns) commit
 * together. With savepoints, each handler that writes gets one, opened lazily, and a failing handler is rolled
 * back alone; without (an optimistic run), a handler that fails after writing stops the run (`rerun`).
 */
@Injectable()
export class InProcessDispatcher {
  /** What the handlers' SQL does, remembered per text for every batch of this app (see `HandlerSqlReader`). */
  private readonly sql = new HandlerSqlReader();

  constructor(private readonly instrumentation: OutboxInstrumentation) {}

  /**
   * Runs every delivery and says what happened to each. Never throws for a handler's failure; stops at a
   * handler that left the batch transaction unusable or in another tenant (`problem`).
   */
  async dispatch(
    dataSource: DataSource,
    runner: QueryRunner,
    deliveries: readonly { delivery: ClaimedDelivery; consumer: OutboxConsumer }[],
    run: BatchRun,
  ): Promise<DispatchResult> {
    const outcomes: DeliveryOutcome[] = [];
    const sql = this.sql;
    const batch: BatchState = {
      pendingRelease: null,
      tenantSetting: run.tenantSetting,
      tenantId: run.tenantId,
      marker: run.marker,
      careful: run.careful,
      savepoints: run.savepoints || run.careful,
      boundMs: Number.POSITIVE_INFINITY,
      rerun: false,
      restore: run.restore,
      takePending: run.takePending,
      seal: run.seal,
      wire: run.wire,
      wired: null,
      cancelRunning: run.cancelRunning,
      bounded: run.bounded,
      dirty: false,
      last: null,
      problem: null,
    };
    let scoped = 0;
    // by index: no iterator, nor an entry destructured from it, per delivery
    for (let index = 0; index < deliveries.length; index++) {
      const { delivery, consumer } = deliveries[index]!;
      const known = run.settled?.get(delivery);
      if (known) {
        outcomes.push(known);
        continue;
      }
      const at = index;
      // The scope (and the context's manager) is made on first use: most handlers that do not touch the
      // database never ask, and then settling them costs nothing, not even an await.
      // (typed by an assertion: assigned in the getter, it must not narrow to null below)
      let scope = null as HandlerScope | null;
      let settled = false;
      /** What the handler asked through `context.retryAfter`: a snooze of that many ms when it returns. */
      let snooze = null as number | null;
      const deadline = Date.now() + consumer.timeoutMs;
      const context = {
        get manager() {
          if (scope === null) {
            scope = new HandlerScope(
              dataSource,
              runner,
              `outbox_h${at}`,
              consumer.name,
              at,
              batch,
              deadline,
              sql,
            );
            scoped++;
            // asked for only after the handler returned (a promise it left running): its queries will fail
            if (settled) scope.settleUnused();
          }
          return scope.manager;
        },
        attempt: delivery.attempt,
        consumer: consumer.name,
        retryAfter(ms: number): void {
          if (settled) throw new OutboxError(messages.retryAfterLate(consumer.name));
          if (typeof ms !== 'number' || !(ms >= 0 && ms <= MAX_SNOOZE_MS))
            throw new OutboxError(messages.badRetryAfter(consumer.name, ms, MAX_SNOOZE_MS));
          snooze = Math.round(ms);
        },
      };
      // instrumentation: one observed attempt per handler call (null when nothing observes)
      const attempt = run.observed?.has(delivery)
        ? null
        : this.instrumentation.attemptStarted(delivery, consumer);
      let outcome: DeliveryOutcome | null = null;
      try {
        const returned = attempt?.run
          ? attempt.run(() => consumer.handle!(delivery.event, context))
          : consumer.handle!(delivery.event, context);
        // A handler that returns no promise has finished: no timer to arm.
        if (isThenable(returned)) {
          await withTimeout(
            returned,
            consumer.timeoutMs,
            () => new OutboxHandlerTimeoutError(messages.handlerTimeout(consumer.name, consumer.timeoutMs)),
          );
        }
        settled = true;
        if (snooze === null) {
          if (scope !== null) await scope.commit();
          outcome = delivered(delivery);
        }
      } catch (error) {
        settled = true;
        if (error instanceof OutboxTransactionEndedError) {
          batch.problem ??= { index, error };
          break;
        }
        await undo(scope, batch, index, consumer);
        // its query cancelled by the bound of its time left (see handlerContext): its timeout, whichever came first
        const cancelled = sqlState(error) === QUERY_CANCELED && Date.now() >= deadline - TIMER_SLACK_MS;
        const { code, dead } = cancelled ? { code: 'timeout', dead: false } : handlerFailure(error);
        const text = cancelled
          ? messages.handlerTimeout(consumer.name, consumer.timeoutMs)
          : errorText(error);
        outcome = failed(delivery, consumer, code, text, { dead });
      }
      if (outcome === null) {
        // "not now": what it wrote is undone as on a failure, and no attempt is charged (ADR 1105)
        await undo(scope, batch, index, consumer);
        const ms = snooze!;
        outcome = snoozed(delivery, consumer, ms, { errorCode: 'snoozed', error: messages.snoozed(ms) });
      }
      outcomes.push(outcome);
      attempt?.ended?.(outcome);
      if (batch.problem || batch.rerun) break;
    }
    return { outcomes, problem: batch.problem, dirty: batch.dirty, scoped, rerun: batch.rerun };
  }
}

/**
 * Undoes what a handler that failed (or snoozed) wrote: rolled back to its savepoint; without one (an optimistic
 * run, ADR 1001), what it wrote stays in the batch transaction, and the batch must run again (`rerun`).
 */
async function undo(
  scope: HandlerScope | null,
  batch: BatchState,
  index: number,
  consumer: OutboxConsumer,
): Promise<void> {
  try {
    if (scope !== null) await scope.rollback();
  } catch (rollbackError) {
    // its savepoint is gone with the transaction: this handler (or, as the scope found, an earlier one) ended it
    if (sqlState(rollbackError) !== NO_ACTIVE_TRANSACTION) throw rollbackError;
    batch.problem ??= {
      index,
      error: new OutboxTransactionEndedError(messages.transactionEnded(consumer.name)),
    };
  }
  if (!batch.problem && !batch.savepoints && scope?.sent) batch.rerun = true;
}

/** The longest snooze a handler may ask for (`context.retryAfter`): a day. */
const MAX_SNOOZE_MS = 86_400_000;

/** SQLSTATE `query_canceled` (a statement timeout). */
const QUERY_CANCELED = '57014';

/** How much earlier than the handler's timer the server may cancel its query (timers of two processes). */
const TIMER_SLACK_MS = 50;

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

/** `work`'s result, or `onTimeout()`'s error once `ms` passed: one promise and one timer (no race, no `finally`). */
function withTimeout<T>(work: PromiseLike<T>, ms: number, onTimeout: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(onTimeout()), ms);
    try {
      work.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error as Error);
        },
      );
    } catch (error) {
      // a thenable whose `then` throws fails as `Promise.resolve` would have adopted it
      clearTimeout(timer);
      reject(error as Error);
    }
  });
}
