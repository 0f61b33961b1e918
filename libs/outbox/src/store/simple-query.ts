import type { PoolClient, QueryResult as PgResult } from 'pg';
import { QueryFailedError, QueryResult, type QueryRunner } from 'typeorm';

/**
 * Runs `prefix` (statements without results worth keeping, such as `savepoint …`) and a query in one round trip
 * on a runner's connection, and answers as `runner.query(query, parameters, structured)` would: same result
 * shape, same `QueryFailedError`, the same logger and subscriber calls (with the prefix shown before the
 * query). `inlined` is the query with its parameters written as literals (see `inlineParameters`).
 */
export async function queryWithPrefix(
  runner: QueryRunner,
  prefix: string,
  query: string,
  parameters: unknown[] | undefined,
  inlined: string,
  structured = false,
): Promise<unknown> {
  const connection = (await runner.connect()) as PoolClient;
  const logger = runner.connection.logger;
  const shown = `${prefix};\n${query}`;
  logger.logQuery(shown, parameters, runner);
  await runner.broadcaster.broadcast('BeforeQuery', shown, parameters);
  const started = Date.now();
  let raw: PgResult;
  try {
    const results = (await connection.query(`${prefix};\n${inlined}`)) as unknown as PgResult | PgResult[];
    raw = Array.isArray(results) ? results[results.length - 1]! : results;
  } catch (error) {
    logger.logQueryError(error as Error, shown, parameters, runner);
    await runner.broadcaster.broadcast('AfterQuery', shown, parameters, false, undefined, undefined, error);
    throw new QueryFailedError(query, parameters, error as Error);
  }
  await runner.broadcaster.broadcast('AfterQuery', shown, parameters, true, Date.now() - started, raw, undefined);
  // TypeORM's own shaping (PostgresQueryRunner.query)
  const result = new QueryResult();
  result.records = raw.rows;
  if (raw.rowCount !== null) result.affected = raw.rowCount;
  result.raw = raw.command === 'DELETE' || raw.command === 'UPDATE' ? [raw.rows, raw.rowCount] : raw.rows;
  return structured ? result : result.raw;
}
