import { Inject, Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource, QueryRunner } from 'typeorm';
import { OUTBOX_RESOLVED_OPTIONS } from '../outbox.module-definition';
import { OutboxError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import type { ResolvedOutboxOptions } from '../interfaces/outbox-module-options.interface';
import type { SqlStatement } from './outbox.queries';

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
