import { Inject, Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { PoolClient, QueryResult } from 'pg';
import type { DataSource, QueryRunner } from 'typeorm';
import { OUTBOX_RESOLVED_OPTIONS } from '../outbox.module-definition';
import { OutboxError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { ResolvedOutboxOptions } from '../interfaces/outbox-module-options.interface';
import type { SqlStatement } from './outbox.queries';
import { inlineStatement } from './inline-statement';

/** A statement of a transaction sent in one round trip, or `null` when this transaction does not need it. */
export type Step = SqlStatement | null;

/** The one place that runs SQL: finds the app's DataSource and executes statements from `outbox.queries`. */
@Injectable()
export class OutboxStore {
  private resolved: DataSource | undefined;

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

  /**
   * A transaction whose opening and closing take one round trip each: `begin` goes with `opening`, `commit` with
   * the statements `work` returns (`null`s as in `atomically`). In between, `work` may query the runner
   * (handlers' savepoints and writes); TypeORM sees the transaction as open, so a nested
   * `manager.transaction()` makes a savepoint. Rolled back when anything throws.
   */
  async batchTransaction(
    opening: readonly Step[],
    work: (runner: QueryRunner, opened: unknown[][]) => Promise<readonly Step[]>,
  ): Promise<void> {
    const runner = this.dataSource().createQueryRunner();
    try {
      const opened = (await this.send(runner, ['begin', ...opening])).slice(1);
      markTransaction(runner, true);
      await this.send(runner, [...(await work(runner, opened)), 'commit']);
      markTransaction(runner, false);
      // As TypeORM's own commit does: subscribers (the wake-up of events a handler enqueued) see it.
      await runner.broadcaster.broadcast('AfterTransactionCommit');
    } catch (error) {
      markTransaction(runner, false);
      await this.send(runner, ['rollback']).catch(() => undefined);
      await runner.broadcaster.broadcast('AfterTransactionRollback').catch(() => undefined);
      throw error;
    } finally {
      await runner.release();
    }
  }

  /**
   * Sends statements in one simple-protocol query on the runner's connection and returns each one's rows
   * (`[]` for a `null`). TypeORM's `query()` keeps only one result, so this goes to the pg connection itself,
   * and tells TypeORM's logger and query subscribers about it as `query()` would.
   */
  private async send(runner: QueryRunner, statements: readonly (Step | string)[]): Promise<unknown[][]> {
    const sent = statements.filter((s) => s !== null);
    const text = sent.map((s) => (typeof s === 'string' ? s : inlineStatement(s))).join(';\n');
    const connection = (await runner.connect()) as PoolClient;
    this.dataSource().logger.logQuery(text, undefined, runner);
    await runner.broadcaster.broadcast('BeforeQuery', text, undefined);
    const started = Date.now();
    let raw: QueryResult | QueryResult[];
    try {
      raw = (await connection.query(text)) as unknown as QueryResult | QueryResult[];
    } catch (error) {
      this.dataSource().logger.logQueryError(error as Error, text, undefined, runner);
      await runner.broadcaster.broadcast('AfterQuery', text, undefined, false, undefined, undefined, error);
      throw error;
    }
    await runner.broadcaster.broadcast('AfterQuery', text, undefined, true, Date.now() - started, raw, undefined);
    const results = (Array.isArray(raw) ? raw : [raw]).values();
    return statements.map((s) => (s === null ? [] : results.next().value!.rows));
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
