import type { PoolClient } from 'pg';
import type { QueryRunner } from 'typeorm';
import { OutboxTransactionEndedError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import { sqlState } from '../errors/sql-state';
import { NIL_UUID } from '../model/outbox.constants';
import type { OutboxRoundTrip } from '../model/outbox-relay-stall.interface';
import { inOneWrite, inTransactionBlock, pgConnection, sendAll, setPipeline } from './pipeline';
import type { BatchWire } from './outbox-store.port';
import {
  BATCH_BEGIN,
  BATCH_COMMIT,
  CLAIM_COMMIT_BATCH_BEGIN,
  leanBegin,
  leanCommit,
  markBegun,
  markCommitted,
} from './lean-transaction';
import * as q from './sql';
import {
  BEGIN,
  COMMIT,
  PREPARED_STATEMENT_MISSING,
  ROLLBACK,
  sendSteps,
  type RelayTransport,
  type Step,
} from './pipelined-steps';

/**
 * One relay round's connection, in pg's pipeline mode while the round holds it (see `setPipeline`). The claim
 * commits on it and, in the same round trip, the batch transaction in which in-process handlers run begins —
 * by the relay's own `START TRANSACTION` with TypeORM's runner told it is open (`RelayPolicy.leanTransactions`,
 * where no subscriber listens to a transaction's start), else through TypeORM's own `startTransaction()`: either
 * way handlers see it open (their `manager.transaction()` makes a savepoint) and subscribers hear of its commit
 * or rollback. That transaction closes with the statements that record the outcomes and the relay's `COMMIT`
 * (or TypeORM's `commitTransaction()` where a subscriber listens before a commit). So a round costs two round
 * trips besides the handlers' own queries (docs/adr/0604-round-trips-per-transaction.md). The batch's context
 * statement (tenant, bounds, marker) waits in `pending` and goes first in the next round trip inside the batch
 * transaction: a handler's first query, or the closing. Every round trip it makes is bounded (`bounded`): one
 * that gets no reply in time closes the connection for good and fails with an `OutboxStallError`.
 */
export class RoundConnection {
  private open = false;
  private connection: PoolClient | null = null;
  private pending: q.SqlStatement[] = [];

  constructor(
    readonly runner: QueryRunner,
    private readonly transport: RelayTransport,
    /** The tenant of the round, named when a round trip stalls. */
    private readonly tenantId: string,
  ) {}

  /** Waits for `work`, a round trip on this connection, at most `relay.roundTripTimeoutMs` (see `RoundTripDeadline`). */
  bounded<T>(trip: OutboxRoundTrip, work: () => Promise<T>): Promise<T> {
    return this.transport.deadline.within(this.runner, trip, this.tenantId, work);
  }

  /** True while the batch transaction is open. */
  get inTransaction(): boolean {
    return this.open;
  }

  /** True once the connection went back to the pool. */
  get released(): boolean {
    return this.runner.isReleased;
  }

  /**
   * The name `statement` runs under on this round's connection (`preparedStatements`), or undefined when
   * it runs unnamed: for the statements sent outside `sendSteps` (a handler's context).
   */
  nameOf(statement: q.SqlStatement): string | undefined {
    return this.connection ? this.transport.prepared.nameOn(this.connection, statement) : undefined;
  }

  /**
   * The round's pg connection for the handler scope (see `BatchWire`): its statements written at once, named
   * when they have a prepared form, in the same round trip as what is sent after them.
   */
  async wire(): Promise<BatchWire> {
    const client = await pgConnection(this.runner);
    return {
      get inTransaction() {
        return inTransactionBlock(client);
      },
      send: (statements) => {
        const rows = sendAll(
          client,
          statements.map((statement) => ({ statement, name: this.nameOf(statement) })),
          this.transport.policy.oneWrite,
        ).then((results) => results.map((result) => result.rows as unknown[]));
        rows.catch(() => undefined);
        return rows;
      },
    };
  }

  /** The statements that must go first in the batch transaction's next round trip; taken once. */
  takePending(): q.SqlStatement[] {
    const pending = this.pending;
    this.pending = [];
    return pending;
  }

  /**
   * `begin; …claim; commit` (`null`s as in `OutboxStore.atomically`), and with `opening`, the batch transaction
   * begun in the same round trip, `opening` pending in it. Returns the claim's rows. A batch transaction still
   * open (begun by a claim that found nothing) is rolled back first.
   */
  async claim(claim: readonly Step[], opening: readonly q.SqlStatement[] | null): Promise<unknown[][]> {
    if (this.open) await this.rollback();
    // one async function for the claim and its one retry (a layer less on every claim's path, issue 35)
    for (let retried = false; ; retried = true) {
      // the batch transaction begins by the relay's own `begin` in the claim's round trip, or by TypeORM's
      const lean = opening !== null && leanBegin(this.runner, this.transport.policy);
      const start = opening && !lean ? () => this.runner.startTransaction() : undefined;
      let rows: unknown[][];
      try {
        rows = await this.bounded('claim', () =>
          this.connected((connection) => {
            if (!lean) return sendSteps(this.transport, connection, [BEGIN, ...claim, COMMIT], start);
            markBegun(this.runner);
            return sendSteps(this.transport, connection, [BEGIN, ...claim, CLAIM_COMMIT_BATCH_BEGIN]);
          }),
        );
      } catch (error) {
        // the batch transaction may have begun after the failed claim (a `commit` after a failure rolls back)
        if (opening && this.runner.isTransactionActive) {
          this.open = true;
          await this.rollback();
        }
        // The connection lost its named statements: the next generation's names are parsed anew, once.
        if (retried || sqlState(error) !== PREPARED_STATEMENT_MISSING || !this.connection) throw error;
        this.transport.prepared.next(this.connection, []);
        continue;
      }
      if (opening) {
        this.open = true;
        this.pending = [...opening];
      }
      return rows.slice(1, 1 + claim.length);
    }
  }

  /** Begins the batch transaction (one round trip), `opening` pending in it, unless the claim began it. */
  async begin(opening: readonly q.SqlStatement[]): Promise<void> {
    if (this.open) return;
    await this.bounded('batch', async () => {
      const connection = this.connection ?? (await this.connectPipelined());
      if (!leanBegin(this.runner, this.transport.policy)) return this.runner.startTransaction();
      markBegun(this.runner);
      await sendSteps(this.transport, connection, [BATCH_BEGIN]);
    });
    this.open = true;
    this.pending = [...opening];
  }

  /**
   * Sends `closing` and TypeORM's commit in one round trip; returns the rows of `closing`. A batch transaction
   * that a handler ended behind the relay's back is not written to: nothing is sent. Rolls back on failure.
   * `trip`: what the round trip is, when it stalls (the batch's commit, or outcomes recorded in its transaction).
   */
  async commit(closing: readonly q.SqlStatement[], trip: OutboxRoundTrip = 'batch'): Promise<unknown[][]> {
    try {
      return await this.bounded(trip, async () => {
        const connection = this.connection ?? (await this.connectPipelined());
        // outside a transaction every statement would commit on its own: nothing is sent
        if (!inTransactionBlock(connection)) throw new OutboxTransactionEndedError(messages.batchEnded());
        const pending = this.takePending();
        const end = pending.length + closing.length;
        if (!leanCommit(this.runner, this.transport.policy)) {
          const rows = await sendSteps(this.transport, connection, [...pending, ...closing], () =>
            this.runner.commitTransaction(),
          );
          this.open = false;
          return rows.slice(pending.length, end);
        }
        this.runner.connection.logger.logQuery(BATCH_COMMIT.text, undefined, this.runner);
        const rows = await sendSteps(this.transport, connection, [...pending, ...closing, BATCH_COMMIT]);
        this.open = false;
        const told = markCommitted(this.runner);
        if (told) await told;
        return rows.slice(pending.length, end);
      });
    } catch (error) {
      await this.rollback();
      throw error;
    }
  }

  /**
   * Runs statements as one short transaction of their own on this connection (`begin; …; commit`, one round
   * trip; `null`s as in `OutboxStore.atomically`), after the batch transaction is closed: a batch's failure is
   * recorded on the connection the batch holds, never on a second one that a small pool may not have.
   */
  async atomically(statements: readonly Step[]): Promise<unknown[][]> {
    if (this.open) await this.rollback();
    const rows = await this.bounded('outcome', async () =>
      sendSteps(this.transport, this.connection ?? (await this.connectPipelined()), [
        BEGIN,
        ...statements,
        COMMIT,
      ]),
    );
    return rows.slice(1, -1);
  }

  /** Rolls the batch transaction back, if open (TypeORM's rollback: its subscribers hear of it). */
  async rollback(): Promise<void> {
    if (!this.open) return;
    this.open = false;
    this.pending = [];
    if (this.runner.isTransactionActive)
      await this.bounded('batch', () => this.runner.rollbackTransaction()).catch(() => undefined);
  }

  /**
   * Rolls back what is still open, makes the connection's next generation of named statements when it is due
   * (see `refreshPrepared`), leaves pipeline mode and returns the connection to the pool (once; later calls do
   * nothing).
   */
  release(): Promise<void> {
    // mostly nothing open and no generation due: TypeORM's release alone, without an async function around it
    const connection = this.connection;
    if (this.runner.isReleased || this.open || (connection && this.transport.prepared.due(connection)))
      return this.releaseAfterWork();
    if (connection) setPipeline(connection, false);
    return this.runner.release();
  }

  /** `release` after a rollback or the next generation of named statements (see `release`). */
  private async releaseAfterWork(): Promise<void> {
    if (this.runner.isReleased) return;
    if (this.open) await this.rollback();
    const connection = this.connection;
    if (connection) {
      // a round trip, bounded, only when the next generation is due (not made for every release)
      if (this.transport.prepared.due(connection))
        await this.bounded('batch', () => this.refreshPrepared(connection)).catch(() => undefined);
      // given up (see `bounded`): the connection is closed and gone from the pool already
      if (this.runner.isReleased) return;
      setPipeline(connection, false);
    }
    await this.runner.release();
  }

  /**
   * The next generation of the connection's named statements, once due (see `PreparedStatements`): the old
   * names deallocated on the server, and the new ones of the claims of new events parsed and planned at
   * once by a claim of each for no tenant that is rolled back (see `newEventsWarmUp`) — off the claim's path, as a round lets its connection go, mostly after the
   * batch's commit, in the background (a claim that parses and makes a generic plan first takes a few ms
   * longer). Never throws: on failure the next claim parses what it needs in its own round trip.
   */
  private async refreshPrepared(connection: PoolClient): Promise<void> {
    const { prepared, names, tenantSetting, leaseMs, policy } = this.transport;
    const left = prepared.next(connection, [
      q.FAN_OUT_NAME,
      q.CLAIM_NEW_NAME,
      q.CLAIM_DUE_NAME,
      q.PAIR_OUTCOME_NAME,
      q.HANDLER_CONTEXT_NAME,
    ]);
    // a name the server no longer has (or never parsed, as the outcome's may be) fails alone: no transaction
    const write = (): { deallocated: Promise<unknown>; warmedUp: Promise<unknown> } => ({
      // observed at once: the deallocations may fail before the warm-up is answered
      deallocated: sendAll(
        connection,
        left.map((name) => ({ statement: { text: `deallocate ${name}`, values: [] } })),
        false,
      ).catch(() => undefined),
      warmedUp: sendSteps(this.transport, connection, [
        BEGIN,
        // the claims' context: their plans made here are the ones they keep (see `setTransactionContext`)
        q.setTransactionContext(tenantSetting, NIL_UUID, leaseMs, { byKey: policy.leaseProbesByKey }),
        ...q.newEventsWarmUp(names, policy),
        ROLLBACK,
      ]),
    });
    // both in one write, as one round trip
    const { deallocated, warmedUp } = policy.oneWrite ? inOneWrite(connection, write) : write();
    await warmedUp.catch(() => sendAll(connection, [{ statement: ROLLBACK }]).catch(() => undefined));
    await deallocated;
  }

  /**
   * `send` on the round's pg connection, connected first (within the caller's bound) when it is not yet: no async
   * function around it, whose promise would adopt `send`'s (one more promise and two more turns, issue 35).
   */
  private connected<T>(send: (connection: PoolClient) => Promise<T>): Promise<T> {
    if (this.connection) return send(this.connection);
    return this.transport.deadline.connect(this.runner).then((client) => send(this.pipelined(client)));
  }

  /**
   * Connects the runner and puts its pg connection in pipeline mode (call it within the round trip's bound). Once
   * connected, callers take `this.connection` as it is, without a turn of the event loop.
   */
  private async connectPipelined(): Promise<PoolClient> {
    return this.pipelined(await this.transport.deadline.connect(this.runner));
  }

  /** The runner's pg connection, just connected, kept for the round and put in pipeline mode. */
  private pipelined(connection: PoolClient): PoolClient {
    this.connection = connection;
    setPipeline(connection, true);
    return connection;
  }
}
