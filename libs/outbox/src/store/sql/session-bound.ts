import type { SqlStatement } from './statement';

/**
 * Bounds the session's next statements (`statement_timeout` at session level), for a statement that cannot run
 * in a transaction, where `handlerBound` cannot go: the lease vacuum. Sent in the same round trip as the statement,
 * and `resetSessionBound` after it.
 */
export function sessionBound(statementTimeoutMs: number): SqlStatement {
  return { text: `select set_config('statement_timeout', $1, false)`, values: [String(statementTimeoutMs)] };
}

/** Gives the session its own `statement_timeout` back (the role's, the database's or the connection's). */
export function resetSessionBound(): SqlStatement {
  return { text: 'reset statement_timeout', values: [] };
}
