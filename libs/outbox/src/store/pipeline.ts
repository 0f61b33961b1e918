import type { Writable } from 'node:stream';
import type { PoolClient, QueryConfig, QueryResult, Submittable } from 'pg';
import type { QueryRunner } from 'typeorm';
import type { SqlStatement } from './sql';

/** A statement's result as pg gives it (rows, command, row count). */
export type PgResult = QueryResult;

/**
 * A statement as the relay sends it: its text and bound values, and, for a statement with a prepared form
 * while `preparedStatements` is on, the name under which pg parses it once per connection (pg keeps the
 * names it parsed on the connection and sends only Bind/Execute after the first time).
 */
export interface Sent {
  statement: SqlStatement;
  name?: string;
}

/** The pg connection a TypeORM runner holds (connected on first use). */
export async function pgConnection(runner: QueryRunner): Promise<PoolClient> {
  return (await runner.connect()) as PoolClient;
}

/**
 * The pg connection a TypeORM runner already holds, without a turn of the event loop, or undefined before its
 * first use (then `pgConnection`).
 */
export function heldConnection(runner: QueryRunner): PoolClient | undefined {
  return (runner as unknown as { databaseConnection?: PoolClient }).databaseConnection ?? undefined;
}

/**
 * Switches pg's pipeline mode on for a connection the relay holds, or off before it goes back to the pool: in
 * pipeline mode pg writes each query as soon as it is given, without waiting for the results of the ones before,
 * so the statements of one transaction travel in one round trip (see docs/adr/0501-bound-parameters-on-pg-pipeline.md).
 * pg reads the flag each time it sends; the relay changes it only while nothing is queued on the connection (it
 * waits for all it sent). The app's pool stays as the app made it: outside the relay's rounds, cursors and
 * streams (refused in pipeline mode) keep working.
 */
export function setPipeline(connection: PoolClient, on: boolean): void {
  if (connection.pipeline !== on) (connection as { pipeline: boolean }).pipeline = on;
}

/**
 * Writes the statements on the connection, in order, without waiting (the connection must be in pipeline mode
 * for them to share a round trip), in one socket write unless `oneWrite` is false (`RelayPolicy.oneWrite`), and
 * resolves with each one's result once all are answered, or rejects with the first statement's error (the cause:
 * those after it fail because of it) once all are answered. One promise per round trip, not one per statement:
 * each statement is pg's own `Query` with a callback, given to the connection as is (pg's promise path copies
 * its config with every property's descriptor and makes two promises per statement; ADR 1201). The caller
 * observes the promise at once: it may reject before anything else it waits for is answered.
 */
export function sendAll(
  connection: PoolClient,
  statements: readonly Sent[],
  oneWrite = true,
): Promise<QueryResult[]> {
  return new Promise((resolve, reject) => {
    const results = new Array<QueryResult>(statements.length);
    let left = statements.length;
    let failedAt = statements.length;
    let failure: unknown;
    if (left === 0) return resolve(results);
    const QueryOf = queryClass(connection);
    const write = (): void => {
      for (let at = 0; at < statements.length; at++) {
        const { statement, name } = statements[at]!;
        const answered = (error: unknown, result?: QueryResult): void => {
          if (error) {
            if (at < failedAt) [failedAt, failure] = [at, error];
          } else results[at] = result!;
          if (--left === 0) {
            if (failedAt < statements.length) reject(failure as Error);
            else resolve(results);
          }
        };
        if (QueryOf === null) {
          const config: QueryConfig = { text: statement.text, values: statement.values };
          if (name !== undefined) config.name = name;
          void connection.query(config).then<void, void>((result) => answered(null, result), answered);
          continue;
        }
        const query = new QueryOf(statement.text, statement.values as unknown[], answered);
        if (name !== undefined) query.name = name;
        connection.query(query);
      }
    };
    if (oneWrite) inOneWrite(connection, write);
    else write();
  });
}

/** pg's `Query` class of this connection's own copy of pg (what it accepts in pipeline mode), or null. */
function queryClass(connection: PoolClient): PgQueryClass | null {
  const QueryOf = (connection.constructor as { Query?: PgQueryClass }).Query;
  return typeof QueryOf === 'function' ? QueryOf : null;
}

/** pg's `Query`, as `sendAll` makes it: text, values and a callback (no config to copy). */
type PgQueryClass = new (
  text: string,
  values: unknown[],
  callback: (error: unknown, result: QueryResult) => void,
) => Submittable & { name?: string };

/**
 * Runs `write`, which writes on the connection, with its socket corked: what it writes leaves in one `writev`
 * when it returns, instead of one write per statement (pg corks each statement's messages, not a pipeline's
 * statements; on loopback each write also costs the kernel's delivery to the server). With `untilImmediate`,
 * the socket stays corked until this turn's promise callbacks have run, so that what they write — TypeORM's
 * `START TRANSACTION` or `COMMIT`, a few awaits behind — goes in the same write (see `sendSteps`). The relay's
 * policy switches it (`RelayPolicy.oneWrite`); measured in docs/adr/1005-low-rate-relay-cpu.md.
 */
export function inOneWrite<T>(connection: PoolClient, write: () => T, untilImmediate = false): T {
  const socket = (connection as unknown as { connection?: { stream?: Writable } }).connection?.stream;
  if (!socket?.cork) return write();
  socket.cork();
  try {
    return write();
  } finally {
    if (untilImmediate) setImmediate(() => socket.uncork());
    else socket.uncork();
  }
}

/** True while the connection is inside a transaction block (healthy or aborted), as its last result said. */
export function inTransactionBlock(connection: PoolClient): boolean {
  const status = connection.getTransactionStatus();
  return status === 'T' || status === 'E';
}
