/**
 * How a relay round's statements travel: the steps of a transaction sent in one round trip (`sendSteps`), the
 * transactions and commands the store sends on a pooled connection in pipeline mode; `RoundConnection`
 * (`round-connection.ts`) holds one round's connection and sends its statements through them.
 */
import type { PoolClient, QueryResult } from 'pg';
import type { RelayPolicy } from '../options/relay-policy';
import { inOneWrite, sendAll, setPipeline, type Sent } from './pipeline';
import type { PreparedStatements } from './prepared-statements';
import type { RoundTripDeadline } from './round-trip-deadline';
import * as q from './sql';

/** A statement of a transaction sent in one round trip, or `null` when this transaction does not need it. */
export type Step = q.SqlStatement | null;

/** SQLSTATE `invalid_sql_statement_name`: a named statement this session does not have. */
export const PREPARED_STATEMENT_MISSING = '26000';

export const BEGIN: q.SqlStatement = { text: 'begin', values: [] };
export const COMMIT: q.SqlStatement = { text: 'commit', values: [] };
export const ROLLBACK: q.SqlStatement = { text: 'rollback', values: [] };
/** What the relay needs of the store to send its statements (see `OutboxStore`). */
export interface RelayTransport {
  readonly prepared: PreparedStatements;
  /** The relay's mechanisms, as the app has them (the lean claim's warm-up reads it, see `refreshPrepared`). */
  readonly policy: RelayPolicy;
  readonly names: q.OutboxNames;
  readonly tenantSetting: string;
  readonly leaseMs: number;
  /** Bounds each round trip on the client side (see `RoundTripDeadline`). */
  readonly deadline: RoundTripDeadline;
}

/**
 * Sends `steps` on a pipelined connection without waiting between them and returns each one's rows (`[]` for
 * a `null`, or for a statement sent only to set something up). A statement with a prepared form goes named,
 * after the setting that makes it run its generic plan (made by the statement before it when that one has a
 * form that makes it, as a transaction's context has), which is set back before the next statement with
 * parameters that is not named. Waits for every result; throws the
 * first error (a failed statement aborts its transaction: those after it fail too, and a `commit` after it
 * rolls back).
 */
export async function sendSteps(
  transport: RelayTransport,
  connection: PoolClient,
  steps: readonly Step[],
  last?: () => Promise<unknown>,
): Promise<unknown[][]> {
  const sent: Sent[] = [];
  // where each step's result is among those sent (-1 for a `null`): loops, not `map`s with closures, on every
  // round trip (issue 35)
  const resultAt = new Array<number>(steps.length);
  let generic = false;
  for (let at = 0; at < steps.length; at++) {
    const statement = steps[at]!;
    if (statement === null) {
      resultAt[at] = -1;
      continue;
    }
    const name = transport.prepared.nameOn(connection, statement);
    if (name === undefined) {
      // only a statement with parameters is planned through the plan cache (one without goes as a simple query)
      if (generic && statement.values.length > 0) {
        sent.push({ statement: q.genericPlans(false) });
        generic = false;
      }
      resultAt[at] = sent.push({ statement }) - 1;
      continue;
    }
    if (!generic) {
      // the statement before it may switch to generic plans itself (a transaction's context does)
      const before = sent[sent.length - 1];
      const folded = before?.name === undefined ? before?.statement.withGenericPlans : undefined;
      if (folded) sent[sent.length - 1] = { statement: folded };
      else sent.push({ statement: q.genericPlans(true) });
    }
    generic = true;
    resultAt[at] = sent.push({ statement, name }) - 1;
  }
  // TypeORM's statement waited for too, when there is one (no await of nothing: each is a turn of the event loop)
  const settled =
    last === undefined
      ? await sendAll(connection, sent, transport.policy.oneWrite)
      : await withLast(transport, connection, sent, last);
  const rows = new Array<unknown[]>(steps.length);
  for (let at = 0; at < steps.length; at++)
    rows[at] = resultAt[at]! < 0 ? [] : (settled[resultAt[at]!]!.rows as unknown[]);
  return rows;
}

/**
 * `sent`, then what TypeORM sends itself (its `START TRANSACTION`, `COMMIT`: `last`), in the same round trip and
 * write; waits for both.
 */
async function withLast(
  transport: RelayTransport,
  connection: PoolClient,
  sent: readonly Sent[],
  last: () => Promise<unknown>,
): Promise<QueryResult[]> {
  let closing: Promise<unknown> | undefined;
  const write = (): Promise<QueryResult[]> => {
    const written = sendAll(connection, sent, false);
    closing = last();
    return written;
  };
  const results = transport.policy.oneWrite ? inOneWrite(connection, write, true) : write();
  let settled: QueryResult[];
  try {
    settled = await results;
  } finally {
    await closing!.catch(() => undefined);
  }
  await closing;
  return settled;
}

/**
 * Runs `statements` as one transaction of their own on `connection` (`begin; …; commit`, one round trip, `null`s
 * as in `sendSteps`), in pipeline mode for it alone: a pooled connection of the app's goes back as it was.
 * Returns each statement's rows.
 */
export async function pipelinedTransaction(
  transport: RelayTransport,
  connection: PoolClient,
  statements: readonly Step[],
): Promise<unknown[][]> {
  setPipeline(connection, true);
  try {
    const rows = await sendSteps(transport, connection, [BEGIN, ...statements, COMMIT]);
    return rows.slice(1, -1);
  } finally {
    setPipeline(connection, false);
  }
}

/**
 * Sends `statements` on `connection` in one round trip, each its own implicit transaction (pg ends each with a
 * Sync: one that fails does not stop those after it), in pipeline mode for them alone, in one write with
 * `oneWrite` (`RelayPolicy.oneWrite`); throws the first error.
 */
export async function pipelinedCommands(
  connection: PoolClient,
  statements: readonly q.SqlStatement[],
  oneWrite: boolean,
): Promise<void> {
  setPipeline(connection, true);
  try {
    await sendAll(
      connection,
      statements.map((statement) => ({ statement })),
      oneWrite,
    );
  } finally {
    setPipeline(connection, false);
  }
}
