import { Inject, Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource, QueryRunner } from 'typeorm';
import { OUTBOX_RESOLVED_OPTIONS } from '../outbox.module-definition';
import { OutboxError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { ResolvedOutboxOptions } from '../interfaces/outbox-module-options.interface';
import { preparedStatements, fanOutPendingEvents, setTransactionContext, type SqlStatement } from './sql';
import { executePrepared, inlineStatement, preparePrepared } from './inline-statement';
import { sendSimpleQuery } from './simple-query';
import { sqlState } from '../errors/sql-state';
import { NIL_UUID } from '../outbox.constants';

/** A statement of a transaction sent in one round trip, or `null` when this transaction does not need it. */
export type Step = SqlStatement | null;

/** The one place that runs SQL: finds the app's DataSource and executes statements from `store/sql`. */
@Injectable()
export class OutboxStore {
  private resolved: DataSource | undefined;
  /** Per pooled connection (its pg client) that prepared `PREPARED_STATEMENTS`: until when they are used as they are. */
  private readonly preparedOn = new WeakMap<object, Freshness>();

  constructor(
    private readonly moduleRef: ModuleRef,
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
  ) {}

  /** The app's TypeORM DataSource; throws a message naming the import to add when there is none. */
  dataSource(): DataSource {
    if (!this.resolved) {
      try {
        this.resolved = this.moduleRef.get<DataSource>(getDataSourceToken(this.options.dataSource), {
          strict: false,
        });
      } catch {
        throw new OutboxError(messages.missingDataSource(this.options.dataSource));
      }
    }
    return this.resolved;
  }

  /** Runs a statement on a query runner and returns its rows (for every kind of statement). */
  async rows<T>(runner: QueryRunner, statement: SqlStatement): Promise<T[]> {
    const result = await runner.query(statement.text, statement.values, true);
    return result.records as T[];
  }

  /** Runs `work` in a transaction of its own on a pooled connection, releasing the connection afterwards. */
  async transaction<T>(work: (runner: QueryRunner) => Promise<T>): Promise<T> {
    const runner = this.dataSource().createQueryRunner();
    try {
      await runner.startTransaction();
      const result = await work(runner);
      await runner.commitTransaction();
      return result;
    } catch (error) {
      if (runner.isTransactionActive) await runner.rollbackTransaction().catch(() => undefined);
      throw error;
    } finally {
      await runner.release();
    }
  }

  /**
   * Runs statements as one transaction in a single round trip — `begin; …; commit` sent together, values
   * inlined as escaped literals (see `inlineStatement`) — and returns each statement's rows, in order. A `null`
   * in the list is a statement this transaction does not need: it is not sent, and its rows are `[]`. For the
   * relay, whose short transactions would otherwise spend most of their time waiting for `begin`, `set_config`
   * and `commit`.
   */
  async atomically(statements: readonly Step[]): Promise<unknown[][]> {
    const runner = this.dataSource().createQueryRunner();
    try {
      return (await this.send(runner, ['begin', ...statements, 'commit'])).slice(1, -1);
    } catch (error) {
      // A statement failed after `begin`: the transaction is aborted and still open on this connection.
      await this.send(runner, ['rollback']).catch(() => undefined);
      throw error;
    } finally {
      await runner.release();
    }
  }

  /** A pooled connection held for one relay round (see `RoundConnection`); release it when done. */
  round(): RoundConnection {
    return new RoundConnection(
      this.dataSource().createQueryRunner(),
      (runner, statements) => this.send(runner, statements),
      (runner) => this.refreshPrepared(runner),
    );
  }

  /**
   * Sends statements in one simple-protocol query on the runner's connection (see `sendSimpleQuery`) and returns
   * each one's rows (`[]` for a `null`). A statement with a prepared form (`relay.preparedStatements`) goes as
   * `execute`, preceded in the same query by the `prepare` of every statement of `PREPARED_STATEMENTS` when this
   * connection has never prepared them. Statements prepared a while ago are used as they are here and prepared
   * anew by `refreshPrepared`, off the claim's path.
   */
  private async send(runner: QueryRunner, statements: readonly (Step | string)[]): Promise<unknown[][]> {
    const connection = (await runner.connect()) as object;
    const pieces: string[] = [];
    let preparing = false;
    const resultAt = statements.map((s) => {
      if (s === null) return null;
      if (typeof s === 'string') return pieces.push(s) - 1;
      if (!s.prepared || !this.options.relay.preparedStatements) return pieces.push(inlineStatement(s)) - 1;
      if (!preparing && !this.preparedOn.has(connection)) {
        pieces.push(...PREPARE_ALL);
        preparing = true;
      }
      // Its generic plan, not one planned anew for these values (the point of preparing it). The setting is
      // transaction-local: statements with a prepared form run in the relay's own transactions (the outcome's
      // after the handlers, in the same round trip as the commit).
      pieces.push(GENERIC_PLANS);
      return pieces.push(executePrepared(s)) - 1;
    });
    let results: { rows: unknown[] }[];
    try {
      results = await sendSimpleQuery(runner, pieces.join(';\n'));
    } catch (error) {
      // Its prepared statements are gone (`discard all`, a pooler that moved us to another server): prepare anew.
      if (sqlState(error) === PREPARED_STATEMENT_MISSING) this.preparedOn.delete(connection);
      throw error;
    }
    if (preparing) this.notePrepared(connection);
    return resultAt.map((at) => (at === null ? [] : results[at]!.rows));
  }

  /**
   * Prepares `PREPARED_STATEMENTS` anew on the runner's connection when it prepared them longer ago than their
   * refresh period (see `PREPARED_REFRESH_MS`: a generic plan made while a table was empty must not outlive the
   * table's growth), and plans the fan-out's generic plan at once, with a claim for no tenant that is rolled back.
   * Called as a round lets its connection go, mostly after the batch's commit, in the background: measured on
   * this machine, a claim that prepared first took 4 ms longer on a warm connection (the `prepare`, then the
   * generic plan at the first `execute`), which put a claim every 10 s per pooled connection, and five in the
   * first 15 s, in the commit-to-handler latency's 99th percentile. Never throws: on failure the next claim on
   * the connection prepares the statements in its round trip, as on a new connection.
   */
  private async refreshPrepared(runner: QueryRunner): Promise<void> {
    // the pg client the runner holds; none when it never connected (nothing was prepared through it)
    const connection = (runner as QueryRunner & { databaseConnection?: object }).databaseConnection;
    if (runner.isReleased || !connection) return;
    const freshness = this.preparedOn.get(connection);
    if (freshness === undefined || Date.now() < freshness.until) return;
    const warmUp = fanOutPendingEvents({
      tenantId: NO_TENANT,
      hosted: [],
      inProcess: [],
      tenantConsumers: [],
      liveWithinMs: 1,
      limit: 1,
      leaseToken: NO_TENANT,
      leaseMs: 1,
    });
    const context = setTransactionContext(this.options.tenantSetting, NO_TENANT, this.options.relay.leaseMs);
    try {
      await sendSimpleQuery(
        runner,
        [
          ...PREPARE_ALL,
          'begin',
          inlineStatement(context),
          GENERIC_PLANS,
          executePrepared(warmUp),
          'rollback',
        ].join(';\n'),
      );
      this.notePrepared(connection);
    } catch {
      // the warm-up's transaction may be open, aborted: never hand the connection back in it
      await sendSimpleQuery(runner, 'rollback').catch(() => undefined);
      // and the statements may be gone: the next claim on this connection prepares them in its own round trip
      this.preparedOn.delete(connection);
    }
  }

  /**
   * Notes that a connection prepared the statements now: used as they are for 1 s after the first preparation,
   * then twice as long each time up to PREPARED_REFRESH_MS (a new database's first claims see nearly empty
   * tables, whose plan should not last while they fill up).
   */
  private notePrepared(connection: object): void {
    const previous = this.preparedOn.get(connection)?.period;
    const period = previous === undefined ? FIRST_REFRESH_MS : Math.min(PREPARED_REFRESH_MS, 2 * previous);
    this.preparedOn.set(connection, { until: Date.now() + period, period });
  }

  /** Runs one statement outside any transaction of the app. */
  async query<T>(statement: SqlStatement): Promise<T[]> {
    const runner = this.dataSource().createQueryRunner();
    try {
      return await this.rows<T>(runner, statement);
    } finally {
      await runner.release();
    }
  }
}

type Send = (runner: QueryRunner, statements: readonly (Step | string)[]) => Promise<unknown[][]>;
type Refresh = (runner: QueryRunner) => Promise<void>;

/**
 * How long a connection keeps using a statement it prepared before preparing it again. A generic plan is made
 * with the table sizes of its first execution; remade every 10 s, it follows them. (The relay's rounds take
 * whichever pooled connection is free, so each connection of the pool prepares its own: at most one
 * preparation per connection per period, a few ms each.) The first periods are shorter: 1 s, 2 s, 4 s, 8 s.
 */
const PREPARED_REFRESH_MS = 10_000;
const FIRST_REFRESH_MS = 1000;

/** A prepared statement on one connection: used as it is until `until`, then prepared again. */
interface Freshness {
  until: number;
  period: number;
}

/** The `prepare` blocks of `PREPARED_STATEMENTS`, sent together (built once: they hold the statements' texts). */
const PREPARE_ALL = preparedStatements().map(preparePrepared);

/** Makes the transaction's prepared statements run their generic plan. */
const GENERIC_PLANS = `set local plan_cache_mode = force_generic_plan`;

/** The tenant of the claim that plans a refreshed fan-out (see `refreshPrepared`): none has this id. */
const NO_TENANT = NIL_UUID;

/** SQLSTATE `invalid_sql_statement_name`: `execute` of a statement this session does not have. */
export const PREPARED_STATEMENT_MISSING = '26000';

/**
 * One relay round's connection. The claim commits on it and, in the same round trip, the batch transaction in
 * which in-process handlers run can begin (`claim(…, opening)`); that transaction closes with the statements
 * that record the outcomes, sent with its `commit`. So a round costs two round trips besides the handlers' own
 * queries. TypeORM sees the batch transaction as open, so a handler's `manager.transaction()` makes a savepoint,
 * and its subscribers hear of the commit or rollback.
 */
export class RoundConnection {
  private open = false;

  constructor(
    readonly runner: QueryRunner,
    private readonly send: Send,
    private readonly refresh: Refresh,
  ) {}

  /** True while the batch transaction is open. */
  get inTransaction(): boolean {
    return this.open;
  }

  /** True once the connection went back to the pool. */
  get released(): boolean {
    return this.runner.isReleased;
  }

  /**
   * `begin; …claim; commit` (`null`s as in `OutboxStore.atomically`), and with `opening`, `begin; …opening` in
   * the same round trip, leaving the batch transaction open. Returns the claim's rows and the opening's. A
   * batch transaction still open (begun by a claim that found nothing) is rolled back first, in the same trip.
   */
  async claim(
    claim: readonly Step[],
    opening: readonly Step[] | null,
  ): Promise<{ claimed: unknown[][]; opened: unknown[][] }> {
    try {
      return await this.claimOnce(claim, opening);
    } catch (error) {
      // The connection lost its prepared statements; `send` forgot them, so this time they are prepared first.
      if (sqlState(error) !== PREPARED_STATEMENT_MISSING) throw error;
      return this.claimOnce(claim, opening);
    }
  }

  private async claimOnce(
    claim: readonly Step[],
    opening: readonly Step[] | null,
  ): Promise<{ claimed: unknown[][]; opened: unknown[][] }> {
    // a batch transaction begun by an earlier claim of this round, still empty: ended in the same round trip
    const reset = this.open ? ['rollback'] : [];
    if (this.open) this.closed();
    const rows = await this.guard(() =>
      this.send(this.runner, [
        ...reset,
        'begin',
        ...claim,
        'commit',
        ...(opening ? ['begin', ...opening] : []),
      ]),
    );
    if (opening) this.opened();
    const first = reset.length + 1;
    return { claimed: rows.slice(first, first + claim.length), opened: rows.slice(first + claim.length + 2) };
  }

  /** Begins the batch transaction with `opening` (one round trip), unless the claim began it. */
  async begin(opening: readonly Step[]): Promise<void> {
    if (this.open) return;
    await this.guard(() => this.send(this.runner, ['begin', ...opening]));
    this.opened();
  }

  /** Sends `closing` and `commit` in one round trip; returns the rows of `closing`. Rolls back on failure. */
  async commit(closing: readonly Step[]): Promise<unknown[][]> {
    const rows = await this.guard(() => this.send(this.runner, [...closing, 'commit']));
    this.closed();
    // As TypeORM's own commit does: subscribers (the wake-up of events a handler enqueued) see it.
    await this.runner.broadcaster.broadcast('AfterTransactionCommit');
    return rows.slice(0, -1);
  }

  /**
   * Runs statements as one short transaction of their own on this connection (`begin; …; commit`, one round
   * trip; `null`s as in `OutboxStore.atomically`), after the batch transaction is closed: a batch's failure is
   * recorded on the connection the batch holds, never on a second one that a small pool may not have.
   */
  async atomically(statements: readonly Step[]): Promise<unknown[][]> {
    if (this.open) await this.rollback();
    const rows = await this.guard(() => this.send(this.runner, ['begin', ...statements, 'commit']));
    return rows.slice(1, -1);
  }

  /** Rolls the batch transaction back, if open. */
  async rollback(): Promise<void> {
    if (!this.open) return;
    this.closed();
    await this.send(this.runner, ['rollback']).catch(() => undefined);
    await this.runner.broadcaster.broadcast('AfterTransactionRollback').catch(() => undefined);
  }

  /**
   * Rolls back what is still open, refreshes the connection's prepared statements when they are due (see
   * `OutboxStore.refreshPrepared`) and returns the connection to the pool (once; later calls do nothing).
   */
  async release(): Promise<void> {
    if (this.runner.isReleased) return;
    await this.rollback();
    await this.refresh(this.runner);
    await this.runner.release();
  }

  /** A failed statement leaves its transaction aborted on this connection: roll it back before rethrowing. */
  private async guard<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (this.open) await this.rollback();
      else await this.send(this.runner, ['rollback']).catch(() => undefined);
      throw error;
    }
  }

  private opened(): void {
    this.open = true;
    markTransaction(this.runner, true);
  }

  private closed(): void {
    this.open = false;
    markTransaction(this.runner, false);
  }
}

/**
 * Sets TypeORM's view of a runner's transaction after a `begin`/`commit` it did not send itself, so that code
 * running inside (a handler's `manager.transaction()`, `OutboxService.enqueue`'s open-transaction check) sees
 * the transaction. `transactionDepth` is TypeORM's own counter (protected; the handler-transaction tests cover
 * it).
 */
function markTransaction(runner: QueryRunner, open: boolean): void {
  const state = runner as QueryRunner & { isTransactionActive: boolean; transactionDepth: number };
  state.isTransactionActive = open;
  state.transactionDepth = open ? 1 : 0;
}
