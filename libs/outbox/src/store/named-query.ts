import { createHash } from 'node:crypto';
import { QueryFailedError, type QueryRunner } from 'typeorm';
import { pgConnection } from './pipeline';
import type { SqlStatement } from './sql';

/**
 * The name a statement of the app's transactions runs under (`preparedStatements`): its start and a hash of its
 * text. The text names the schema's tables, so two schemas' outboxes (or two versions of the library) on one
 * pool never share a name.
 */
export function statementName(start: string, text: string): string {
  return `${start}_${createHash('sha1').update(text).digest('hex').slice(0, 12)}`;
}

/**
 * Runs `statement` on the runner's connection as the named statement `name`: pg parses it on the first use per
 * connection and sends only Bind/Execute after that, so PostgreSQL neither parses nor plans it again. What
 * TypeORM's `query()` does around a statement is kept: the DataSource's logger sees it (its slow-query log
 * included) and a failure is TypeORM's `QueryFailedError` with pg's error as `driverError`. (TypeORM's
 * `query()` cannot name a statement.)
 */
export async function namedQuery(runner: QueryRunner, statement: SqlStatement, name: string): Promise<void> {
  const connection = await pgConnection(runner);
  const { logger, options } = runner.connection;
  logger.logQuery(statement.text, statement.values, runner);
  const started = Date.now();
  try {
    await connection.query({ name, text: statement.text, values: statement.values });
  } catch (error) {
    logger.logQueryError(error as Error, statement.text, statement.values, runner);
    throw new QueryFailedError(statement.text, statement.values, error as Error);
  }
  const ms = Date.now() - started;
  const slow = (options as { maxQueryExecutionTime?: number }).maxQueryExecutionTime;
  if (slow && ms > slow) logger.logQuerySlow(ms, statement.text, statement.values, runner);
}
