import { Inject, Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource, QueryRunner } from 'typeorm';
import { OUTBOX_RESOLVED_OPTIONS } from '../outbox.module-definition';
import { OutboxError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { ResolvedOutboxOptions } from '../interfaces/outbox-module-options.interface';
import { ListenConnection, type ListenHandlers } from './listen-connection';
import { pgConnection, setPipeline } from './pipeline';
import { PreparedStatements } from './prepared-statements';
import { RoundConnection, sendSteps, type RelayTransport, type Step } from './round-connection';
import { preparedTextsHash, type SqlStatement } from './sql';

export { PREPARED_STATEMENT_MISSING, RoundConnection, type Step } from './round-connection';
export type { ListenConnection, ListenHandlers } from './listen-connection';

/** The one place that runs SQL: finds the app's DataSource and executes statements from `store/sql`. */
@Injectable()
export class OutboxStore {
  private resolved: DataSource | undefined;
  private readonly transport: RelayTransport;

  constructor(
    private readonly moduleRef: ModuleRef,
    @Inject(OUTBOX_RESOLVED_OPTIONS) private readonly options: ResolvedOutboxOptions,
  ) {
    this.transport = {
      prepared: new PreparedStatements(options.preparedStatements, preparedTextsHash(options.names)),
      names: options.names,
      tenantSetting: options.tenantSetting,
      leaseMs: options.relay.leaseMs,
    };
  }

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
   * Runs statements as one transaction in a single round trip — `begin; …; commit` written together on the
   * connection in pg's pipeline mode, values bound — and returns each statement's rows, in order. A `null` in
   * the list is a statement this transaction does not need: it is not sent, and its rows are `[]`. For the
   * relay, whose short transactions would otherwise spend most of their time waiting for `begin`, `set_config`
   * and `commit`. A failed statement aborts the transaction, and the `commit` after it rolls back.
   */
  async atomically(statements: readonly Step[]): Promise<unknown[][]> {
    const runner = this.dataSource().createQueryRunner();
    try {
      const connection = await pgConnection(runner);
      setPipeline(connection, true);
      try {
        const rows = await sendSteps(this.transport, connection, [BEGIN, ...statements, COMMIT]);
        return rows.slice(1, -1);
      } finally {
        setPipeline(connection, false);
      }
    } finally {
      await runner.release();
    }
  }

  /** A pooled connection held for one relay round (see `RoundConnection`); release it when done. */
  round(): RoundConnection {
    return new RoundConnection(this.dataSource().createQueryRunner(), this.transport);
  }

  /** A connection of its own that LISTENs for wake-ups (not connected yet: call `listen()`). */
  listenConnection(handlers: ListenHandlers): ListenConnection {
    return new ListenConnection(this.dataSource(), handlers);
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

const BEGIN: SqlStatement = { text: 'begin', values: [] };
const COMMIT: SqlStatement = { text: 'commit', values: [] };
