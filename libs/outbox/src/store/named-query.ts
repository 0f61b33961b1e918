import { createHash } from 'node:crypto';
import { Logger } from '@nestjs/common';
import type { QueryResult, QueryResultRow } from 'pg';
import { QueryFailedError, type QueryRunner } from 'typeorm';
import { OutboxError } from '../errors/outbox.error';
import { messages } from '../errors/outbox.messages';
import { inHandlerScope } from '../model/handler-scope-marker';
import { heldConnection, pgConnection, sendAll } from './pipeline';
import { PREPARED_STATEMENT_MISSING } from './pipelined-steps';
import type { SqlStatement } from './sql';

/** The start of the statement names of the event inserts of `enqueue` and `enqueueMany`. */
const ENQUEUE_NAME = 'outbox_enqueue';

/**
 * How `enqueue` sends its insert on the app's connections, behind one switch, `preparedStatements` (ADR 0807):
 * on, as a named statement — pg parses it once per connection and sends only Bind/Execute after that, so
 * PostgreSQL neither parses nor plans it again; off, through TypeORM's `query()`, parsed and planned at every
 * execution. One name per text (`outbox_enqueue_` and a hash of the text, which names the schema's tables): a
 * handful per connection, never renamed (an insert's plan does not depend on table sizes).
 *
 * Unnamed whatever the switch: in a handler's `context.manager` (the relay's scoped runner opens the handler's
 * savepoint in the insert's round trip), and once a connection lost the statement (SQLSTATE 26000: `discard
 * all`/`deallocate all`, a pooler that moved the session). That loss has already aborted the app's transaction,
 * so it cannot be retried there: the insert throws an `OutboxError` that says so, and the app's enqueues run
 * unnamed from then on.
 */
export class EnqueueInserts {
  private readonly logger = new Logger('OutboxService');
  /** The name of each insert text seen. */
  private readonly names = new Map<string, string>();

  /** @param named `preparedStatements`: inserts run as named statements (until a connection lost one). */
  constructor(private named: boolean) {}

  /**
   * Runs the insert in the runner's transaction, named when the switch says so; returns its rows. No async frame
   * of its own: the caller's promise is TypeORM's, or the named path's (ADR 1004's addendum of 2026-12-07).
   */
  run<T = unknown>(runner: QueryRunner, statement: SqlStatement): Promise<T[]> {
    const name = this.nameOf(runner, statement);
    if (name === undefined) return runner.query(statement.text, statement.values) as Promise<T[]>;
    return this.runNamed<T>(runner, statement, name);
  }

  /**
   * Runs `statement` on the runner's connection as the named statement `name`. What TypeORM's `query()` does
   * around a statement is kept: the DataSource's logger sees it (its slow-query log included) and a failure is
   * TypeORM's `QueryFailedError` with pg's error as `driverError`. (TypeORM's `query()` cannot name a statement.)
   * A connection that lost the statement makes every later insert unnamed (see the class).
   */
  private async runNamed<T>(runner: QueryRunner, statement: SqlStatement, name: string): Promise<T[]> {
    const connection = heldConnection(runner) ?? (await pgConnection(runner));
    const { logger, options } = runner.connection;
    logger.logQuery(statement.text, statement.values, runner);
    const started = Date.now();
    let rows: T[];
    try {
      // pg's own Query with a callback, as the relay sends its statements: pg's promise path would copy a config
      // object property by property and make two promises per insert (ADR 1004's addendum)
      [{ rows }] = (await sendAll(connection, [{ statement, name }], false)) as QueryResult<
        T & QueryResultRow
      >[];
    } catch (error) {
      logger.logQueryError(error as Error, statement.text, statement.values, runner);
      if ((error as { code?: string }).code !== PREPARED_STATEMENT_MISSING)
        throw new QueryFailedError(statement.text, statement.values, error as Error);
      if (this.named) this.logger.warn(messages.lostEnqueueStatement());
      this.named = false;
      throw new OutboxError(messages.lostEnqueueStatement());
    }
    const ms = Date.now() - started;
    const slow = (options as { maxQueryExecutionTime?: number }).maxQueryExecutionTime;
    if (slow && ms > slow) logger.logQuerySlow(ms, statement.text, statement.values, runner);
    return rows;
  }

  private nameOf(runner: QueryRunner, statement: SqlStatement): string | undefined {
    if (!this.named || inHandlerScope(runner)) return undefined;
    let name = this.names.get(statement.text);
    if (name === undefined) {
      name = statementName(ENQUEUE_NAME, statement.text);
      this.names.set(statement.text, name);
    }
    return name;
  }
}

/**
 * The name a statement of the app's transactions runs under: its start and a hash of its text. The text names
 * the schema's tables, so two schemas' outboxes (or two versions of the library) on one pool never share a name.
 */
function statementName(start: string, text: string): string {
  return `${start}_${createHash('sha1').update(text).digest('hex').slice(0, 12)}`;
}
