import { Logger } from '@nestjs/common';
import type { ClaimedDelivery } from '../model/claimed-delivery';
import { failed, type DeliveryOutcome } from '../model/delivery-outcome';
import type { BatchRun, DispatchResult, InProcessDispatcher } from './in-process.dispatcher';
import { errorText } from '../errors/error-text';
import { OutboxError, OutboxStallError, OutboxTransactionEndedError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import { sqlState } from '../errors/sql-state';
import type { LeaseVacuum } from '../maintenance/lease-vacuum';
import { LEASE_LOST_SQLSTATE, type OutboxStorePort, type TenantConnection } from '../store/outbox-store.port';
import type { BackgroundWork } from './background-work';
import type { OutcomeRecorder } from './outcome-recorder';
import type { OutboxInstrumentation } from '../extension/outbox-instrumentation';
import type { RelayPolicy } from '../options/relay-policy';
import { count, RELAY_LOG_CONTEXT, type Assigned, type Settled, type TenantBatch } from './tenant-batch';

/** A batch's in-process deliveries, and those settled without a handler that are recorded with them. */
export interface LocalWork {
  assigned: Assigned[];
  unclaimed: Settled[];
}

/**
 * In-process handlers of a batch: one transaction (begun with the claim, or now), committed with the statement
 * that records the outcomes — fenced, so a lease lost mid-run rolls the batch back, and guarded (`batchGuard`),
 * so the outcomes are written only in the batch's own transaction, in its tenant. Commits form a pipeline: a
 * batch's commit is sent without waiting for it, so the next batch can be claimed meanwhile; commits go one at
 * a time, each after the previous one is done. A batch that cannot be committed is narrowed (see `narrow`).
 */
export class LocalBatch {
  private readonly logger = new Logger(RELAY_LOG_CONTEXT);
  /** The last batch commit sent without waiting for it; at most one is in flight. */
  private finishingCommit: Promise<void> | null = null;
  /** Batch commits sent and not done yet. */
  private committing = 0;

  constructor(
    private readonly store: OutboxStorePort,
    private readonly inProcess: InProcessDispatcher,
    private readonly recorder: OutcomeRecorder,
    private readonly leaseVacuum: LeaseVacuum,
    private readonly background: BackgroundWork,
    private readonly instrumentation: OutboxInstrumentation,
    private readonly policy: Pick<RelayPolicy, 'unguardedClosings' | 'optimisticBatches'>,
  ) {}

  /** The last batch commit in flight (resolved when none is). */
  get finishing(): Promise<void> | null {
    return this.finishingCommit;
  }

  /** True while a batch commit is in flight. */
  get isCommitting(): boolean {
    return this.committing > 0;
  }

  /**
   * Runs the handlers and sends the commit. Takes the connection over: it is released once the commit is done.
   * With `overlap`, returns as soon as the commit is sent (`settled` resolves when it is done). `noWrites`: every
   * handler ran without asking for `context.manager`, and the batch went to its commit as it ran. `reran`: a
   * handler's failure made the batch run again (with savepoints, or in parts).
   */
  async run(
    connection: TenantConnection,
    batch: TenantBatch,
    work: LocalWork,
    overlap: boolean,
  ): Promise<{ settled: Promise<void>; noWrites: boolean; reran: boolean }> {
    let outcomes: DeliveryOutcome[];
    let dirty: boolean;
    let noWrites: boolean;
    let reran = false;
    /** Outcomes kept from a first run that stopped at a handler's failure (see `rerun`); none mostly: no map. */
    let known: ReadonlyMap<ClaimedDelivery, DeliveryOutcome> | null = null;
    try {
      // begun by the claim mostly: then no call (its statement, its promise and its turn of the event loop for nothing)
      if (!connection.inTransaction) await connection.beginBatch(batch.leaseToken);
      let run = await this.inProcess.dispatch(
        this.store.dataSource(),
        connection.runner,
        work.assigned,
        this.batchRun(connection, batch, false, !this.policy.optimisticBatches),
      );
      if (run.rerun) {
        reran = true;
        // the failed handler's outcome is kept (it is not called again); the handlers before it were observed
        const ran = run.outcomes.length;
        known = new Map([[work.assigned[ran - 1]!.delivery, run.outcomes[ran - 1]!]]);
        run = await this.rerun(connection, batch, work, known, ran);
      }
      if (run.problem) throw run.problem.error;
      outcomes =
        work.unclaimed.length === 0
          ? run.outcomes
          : [...work.unclaimed.map((u) => u.outcome), ...run.outcomes];
      dirty = run.dirty;
      noWrites = run.scoped === 0;
    } catch (error) {
      try {
        await this.failed(error, batch, work, connection, null, known ?? new Map());
      } finally {
        await connection.release();
      }
      return { settled: Promise.resolve(), noWrites: false, reran: true };
    }
    count(outcomes, batch.result);
    await this.finishingCommit;
    this.committing++;
    // without the guard only where the policy has unguarded closings (ADR 0806)
    const unguarded = noWrites && this.policy.unguardedClosings;
    // the count taken down in each outcome's callback, not by a `finally` (three promises more per batch, issue 35)
    const commit = connection
      .commitBatch({ leaseToken: batch.leaseToken, outcomes, dirty, noWrites: unguarded })
      .then(
        ({ released }) => {
          try {
            this.noteReleased(released);
          } finally {
            this.committing--;
          }
        },
        (error: unknown) =>
          this.failed(error, batch, work, connection, outcomes, known ?? new Map()).finally(
            () => this.committing--,
          ),
      );
    const settled = this.background.track(commit);
    this.finishingCommit = settled;
    // The connection goes back to the pool once the commit is done, outside `settled`: the next batch's commit
    // waits for this one's, not for the refresh of prepared statements that a release may do.
    void this.background.track(settled.then(() => connection.release())); // track() logs a failure, never rejects
    if (!overlap) await settled;
    // in an object: an async function returning a bare promise would wait for it
    return { settled, noWrites, reran };
  }

  /** After a batch's commit: how many event leases its outcomes released. */
  private noteReleased(released: number): void {
    const vacuum = this.leaseVacuum.noteReleased(released);
    if (vacuum) void this.background.track(vacuum); // track() logs a failure, never rejects
  }

  private batchRun(
    connection: TenantConnection,
    batch: TenantBatch,
    careful: boolean,
    savepoints: boolean,
  ): BatchRun {
    // onto the channel made for this batch, not spread into a copy: properties added to a spread's copy cost about
    // 1 µs each in Node 20's V8 (ADR 1201, addendum of 2026-12-07); nor an object of the mode made to copy them from
    const run = connection.handlerChannel(batch.leaseToken) as BatchRun;
    run.careful = careful;
    run.savepoints = savepoints;
    return run;
  }

  /**
   * An optimistic run (no savepoint per handler, ADR 1001) stopped at a handler that failed (or snoozed, ADR 1105)
   * after writing: its writes cannot be undone alone. The batch transaction is rolled back and the batch runs
   * again from its start with a savepoint per handler, that handler's outcome kept (it is not called again, and a
   * failure's attempt is charged once). The handlers before it run again: their writes were rolled back with the batch.
   */
  private async rerun(
    connection: TenantConnection,
    batch: TenantBatch,
    work: LocalWork,
    known: ReadonlyMap<ClaimedDelivery, DeliveryOutcome>,
    ran: number,
  ): Promise<DispatchResult> {
    await connection.rollback();
    // the first run took some of the lease: the second gets a full one, every event's, as narrowing's parts do
    await this.extendLeases(connection, batch, [byEvent(work)]);
    await connection.beginBatch(batch.leaseToken);
    return this.inProcess.dispatch(this.store.dataSource(), connection.runner, work.assigned, {
      ...this.batchRun(connection, batch, false, true),
      settled: known,
      // the handlers before the failed one were observed as they ended in the first run: not twice
      observed: new Set(work.assigned.slice(0, ran).map((a) => a.delivery)),
    });
  }

  /**
   * The batch transaction failed (a lease taken over, connection lost, a statement refused, a handler that
   * ended the transaction or changed its tenant): every handler's writes were rolled back. A failure that one
   * delivery may have caused is narrowed to it (see `narrow`); a lost lease or a broken connection fails every
   * claimed delivery, recorded on the batch's own connection (fenced as usual: those whose lease another relay
   * holds now are left to it). `counted`: outcomes already counted in the batch's result.
   */
  private async failed(
    error: unknown,
    batch: TenantBatch,
    work: LocalWork,
    connection: TenantConnection,
    counted: DeliveryOutcome[] | null,
    known: ReadonlyMap<ClaimedDelivery, DeliveryOutcome>,
  ): Promise<void> {
    const { tenantId } = batch;
    if (counted) count(counted, batch.result, -1);
    // a failure before the commit leaves the batch transaction open (aborted, or holding the handlers' writes)
    await connection.rollback();
    // instrumentation: the attempts observed as they ended are undone
    this.instrumentation.batchRolledBack({ tenantId, deliveries: work.assigned.length });
    // Given up (logged as it was): nothing is recorded, on a database that does not answer. Its leases expire and
    // the deliveries are claimed again; a commit that did land meanwhile is kept out by the fence.
    if (error instanceof OutboxStallError) return;
    if (narrowable(error) && !connection.released) {
      this.logger.warn(
        `batch of ${work.assigned.length} deliveries for tenant ${tenantId} was rolled back (${errorText(error)}); ` +
          'running it again, in parts, to find the deliveries that caused it',
      );
      // from nothing known: a failure kept from a first run may come from what an earlier handler did unseen
      // (a tenant changed through a function), which the careful run finds
      await this.narrow(connection, batch, byEvent(work));
      return;
    }
    if (sqlState(error) === LEASE_LOST_SQLSTATE) {
      this.logger.warn(
        `batch of ${work.assigned.length} deliveries for tenant ${tenantId}: ${errorText(error)}`,
      );
    } else {
      this.logger.error(
        `batch of ${work.assigned.length} deliveries for tenant ${tenantId} failed and was rolled back: ${errorText(error)}`,
      );
    }
    await this.charge(connection, batch, [work], error, known);
  }

  /**
   * Finds the deliveries that made a batch fail, with its leases still held and no attempt charged to the
   * others: the batch's events run again, every handler checked as it returns (careful mode: a deferred
   * constraint violated, the tenant changed, the transaction ended — each fails the handler that did it, alone);
   * a part that still fails is split in two, by event (the in-process pairs of one event are recorded together,
   * with its lease), down to one event, whose deliveries are then charged with the failure. A handler that ended
   * the batch transaction is failed and the part runs again without it. All on the batch's own connection.
   * See docs/adr/0101-narrowing-batch-failures.md.
   */
  private async narrow(connection: TenantConnection, batch: TenantBatch, groups: LocalWork[]): Promise<void> {
    const known = new Map<ClaimedDelivery, DeliveryOutcome>();
    const parts: LocalWork[][] = [groups];
    while (parts.length > 0) {
      // each part runs with a full lease, as the batch's first run did: its events, and those still waiting
      await this.extendLeases(connection, batch, parts);
      const part = parts.shift()!;
      const error = await this.runCarefully(connection, batch, part, known);
      if (error === null) continue;
      if (part.length > 1 && narrowable(error) && !connection.released) {
        const half = Math.ceil(part.length / 2);
        parts.unshift(part.slice(0, half), part.slice(half));
        continue;
      }
      if (sqlState(error) !== LEASE_LOST_SQLSTATE) {
        this.logger.error(
          `event ${part[0]!.assigned[0]?.delivery.eventId ?? '(none)'} for tenant ${batch.tenantId} fails its batch on its own: ${errorText(error)}`,
        );
      }
      await this.charge(connection, batch, part, error, known);
    }
  }

  /**
   * Extends the event leases of the parts still to run (a transaction of its own, so a part that fails keeps
   * it): narrowing reruns the batch's handlers, once or more, and without it outlived the lease its first run
   * had taken most of — another relay then claimed the events while they ran here, and this relay's commit lost.
   */
  private async extendLeases(
    connection: TenantConnection,
    batch: TenantBatch,
    parts: LocalWork[][],
  ): Promise<void> {
    const eventIds = parts.flat().map((g) => (g.assigned[0] ?? g.unclaimed[0])!.delivery.eventId);
    await connection.extendEventLeases({ leaseToken: batch.leaseToken, eventIds });
  }

  /**
   * Runs a part of a batch in careful mode and commits it; returns null, or the error that failed it. A handler
   * that ended the transaction is settled as failed in `known`, and the part runs again without it.
   */
  private async runCarefully(
    connection: TenantConnection,
    batch: TenantBatch,
    part: LocalWork[],
    known: Map<ClaimedDelivery, DeliveryOutcome>,
  ): Promise<unknown> {
    const assigned = part.flatMap((g) => g.assigned);
    const unclaimed = part.flatMap((g) => g.unclaimed.map((u) => u.outcome));
    for (;;) {
      try {
        await connection.beginBatch(batch.leaseToken);
        const run = await this.inProcess.dispatch(this.store.dataSource(), connection.runner, assigned, {
          ...this.batchRun(connection, batch, true, true),
          settled: known,
        });
        if (run.problem) {
          const { delivery, consumer } = assigned[run.problem.index]!;
          if (!(run.problem.error instanceof OutboxTransactionEndedError) || known.has(delivery))
            throw run.problem.error;
          known.set(delivery, failed(delivery, consumer, 'transactionControl', run.problem.error.message));
          await connection.rollback();
          continue;
        }
        const outcomes = [...unclaimed, ...run.outcomes];
        // guarded whatever the handlers did: a run in parts follows a failure
        const { released } = await connection.commitBatch({
          leaseToken: batch.leaseToken,
          outcomes,
          dirty: run.dirty,
          noWrites: false,
        });
        this.noteReleased(released);
        count(outcomes, batch.result);
        return null;
      } catch (error) {
        await connection.rollback();
        return error;
      }
    }
  }

  /** Records every delivery of `part` not settled in `known` as failed by `error` (see `failed`). */
  private async charge(
    connection: TenantConnection,
    batch: TenantBatch,
    part: readonly LocalWork[],
    error: unknown,
    known: ReadonlyMap<ClaimedDelivery, DeliveryOutcome>,
  ): Promise<void> {
    const text = messages.batchFailed(errorText(error));
    const outcomes = part.flatMap((g) => [
      ...g.unclaimed.map((u) => u.outcome),
      ...g.assigned.map(
        ({ delivery, consumer }) => known.get(delivery) ?? failed(delivery, consumer, 'batchError', text),
      ),
    ]);
    await this.recorder.record(batch, outcomes, connection);
  }
}

/** Groups a batch by event, in the batch's order: the smallest parts whose outcomes can be recorded. */
function byEvent({ assigned, unclaimed }: LocalWork): LocalWork[] {
  const groups = new Map<string, LocalWork>();
  const group = (eventId: string): LocalWork => {
    let g = groups.get(eventId);
    if (!g) groups.set(eventId, (g = { assigned: [], unclaimed: [] }));
    return g;
  };
  for (const a of assigned) group(a.delivery.eventId).assigned.push(a);
  for (const u of unclaimed) group(u.delivery.eventId).unclaimed.push(u);
  return [...groups.values()];
}

/**
 * Whether a batch's failure may come from one of its deliveries, and running parts of it again may find which:
 * a statement refused by PostgreSQL, or a handler's misdeed found by the relay. Not a lost lease (the batch is
 * another relay's now), nor a connection that broke or a server shutting down (nothing to run it on).
 */
function narrowable(error: unknown): boolean {
  if (error instanceof OutboxStallError) return false;
  if (error instanceof OutboxError) return true;
  const state = sqlState(error);
  if (state === undefined || state === LEASE_LOST_SQLSTATE) return false;
  return !state.startsWith('08') && !state.startsWith('57P');
}
