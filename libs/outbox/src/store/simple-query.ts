import type { PoolClient, QueryResult as PgResult } from 'pg';
import { QueryFailedError, QueryResult, type QueryRunner } from 'typeorm';

/**
 * Sends `text` (one or more statements, values already written in) as one simple-protocol query on a runner's
 * connection and returns each statement's result. TypeORM's `query()` keeps only one result, so this goes to the
 * pg connection itself, and tells TypeORM's logger and query subscribers about it as `query()` would — showing
 * `shown` with `parameters` (the text as the caller wrote it) when given — slow-query log
 * (`maxQueryExecutionTime`) included.
 */
export async function sendSimpleQuery(
  runner: QueryRunner,
  text: string,
  shown: { text: string; parameters?: unknown[] } = { text },
): Promise<PgResult[]> {
  const connection = (await runner.connect()) as PoolClient;
  const logger = runner.connection.logger;
  logger.logQuery(shown.text, shown.parameters, runner);
  await runner.broadcaster.broadcast('BeforeQuery', shown.text, shown.parameters);
  const started = Date.now();
  let raw: PgResult | PgResult[];
  try {
    raw = (await connection.query(text)) as unknown as PgResult | PgResult[];
  } catch (error) {
    logger.logQueryError(error as Error, shown.text, shown.parameters, runner);
    await runner.broadcaster.broadcast(
      'AfterQuery',
      shown.text,
      shown.parameters,
      false,
      undefined,
      undefined,
      error,
    );
    throw error;
  }
  const results = Array.isArray(raw) ? raw : [raw];
  const elapsed = Date.now() - started;
  await runner.broadcaster.broadcast(
    'AfterQuery',
    shown.text,
    shown.parameters,
    true,
    elapsed,
    raw,
    undefined,
  );
  const slowAfter = runner.connection.options.maxQueryExecutionTime;
  if (slowAfter && elapsed > slowAfter) logger.logQuerySlow(elapsed, shown.text, shown.parameters, runner);
  return results;
}

/**
 * Runs `prefix` (statements without results worth keeping, such as `savepoint …`) and a query in one round trip
 * on a runner's connection, and answers as `runner.query(query, parameters, structured)` would: same result
 * shape, same `QueryFailedError`, the same logger and subscriber calls (with the prefix shown before the
 * query). `inlined` is the query with its parameters written as literals (see `inlineParameters`); `inspect`
 * is given the prefix's results.
 */
export async function queryWithPrefix(
  runner: QueryRunner,
  prefix: string,
  query: string,
  parameters: unknown[] | undefined,
  inlined: string,
  structured = false,
  inspect?: (prefixResults: PgResult[]) => void,
): Promise<unknown> {
  let raw: PgResult;
  try {
    const results = await sendSimpleQuery(runner, `${prefix};\n${inlined}`, {
      text: `${prefix};\n${query}`,
      parameters,
    });
    inspect?.(results.slice(0, -1));
    raw = results[results.length - 1]!;
  } catch (error) {
    throw new QueryFailedError(query, parameters, error as Error);
  }
  // TypeORM's own shaping (PostgresQueryRunner.query)
  const result = new QueryResult();
  result.records = raw.rows;
  if (raw.rowCount !== null) result.affected = raw.rowCount;
  result.raw = raw.command === 'DELETE' || raw.command === 'UPDATE' ? [raw.rows, raw.rowCount] : raw.rows;
  return structured ? result : result.raw;
}
