import type { OutboxNames } from '../../model/table-names';

/** A statement ready for `queryRunner.query(text, values)`: `$1…$n` bound parameters, casts in the text. */
export interface SqlStatement {
  text: string;
  values: unknown[];
  /**
   * Set on a statement the relay runs as a named statement on each connection (`preparedStatements`):
   * the start of its name (see `PreparedStatements`). Only for statements whose generic plan does not depend on table
   * sizes (checked by `prepared-statements.e2e-spec.ts`). Every parameter has its type in the text.
   */
  prepared?: string;
  /**
   * The same statement, also switching the rest of its transaction to generic plans (`plan_cache_mode`): sent in
   * its place when a named statement follows it (see `sendSteps`), one statement fewer than the switch alone.
   */
  withGenericPlans?: SqlStatement;
}

/**
 * The server's identity as the claims, their floor and the due-tenant scan read it: its postmaster's start in
 * microseconds, as text (`pg_postmaster_start_time()::text` is written in the session's TimeZone and DateStyle, so
 * two sessions of one server could read two values; the six-argument `outbox_due_tenants` compares this form).
 */
export const SERVER_START = `(extract(epoch from pg_postmaster_start_time()) * 1000000)::bigint::text`;

/**
 * The transaction's `now()` as ISO 8601 text in UTC: the same text whatever the session's TimeZone and DateStyle
 * (`now()::text` is written in them), for the relay to hand back as a bound of a later statement.
 */
export const DATABASE_NOW = `to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** The start of the fan-out's statement name. */
export const FAN_OUT_NAME = 'outbox_fan_out';
/** The start of the statement name of the claim of new events for in-process consumers only (`claimNewEvents`). */
export const CLAIM_NEW_NAME = 'outbox_claim_new';
/** The start of the statement name of the due claim without limited consumers (`claimDueDeliveries`). */
export const CLAIM_DUE_NAME = 'outbox_claim_due';
/** The start of the statement name of a fenced batch of in-process pairs' outcome. */
export const PAIR_OUTCOME_NAME = 'outbox_outcome';
/** The start of the statement name of a handler's context (see `handlerContext`). */
export const HANDLER_CONTEXT_NAME = 'outbox_handler_context';

/**
 * `text`, made once per `OutboxNames` (an app's names are one object, made with its options): a statement the relay
 * sends every round gets the same string each time — not its 4–5 KB built again, and not compared again in full by
 * pg with the text its named statement was parsed from (the same string: the comparison stops at the reference).
 * The text depends on the names alone: apps with the same names get the same text, and see nothing else of each
 * other's.
 */
export function textPerNames(text: (n: OutboxNames) => string): (n: OutboxNames) => string {
  const made = new WeakMap<OutboxNames, string>();
  return (n) => {
    let once = made.get(n);
    if (once === undefined) {
      once = text(n);
      made.set(n, once);
    }
    return once;
  };
}
