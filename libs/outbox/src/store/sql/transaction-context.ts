import { escapeLiteral } from 'pg';
import { CHECKING_CONSTRAINTS } from './batch-seal';
import { HANDLER_CONTEXT_NAME, type SqlStatement } from './statement';

/**
 * Sets the tenant for row-level security and caps on idle time and on each statement's time, all
 * transaction-local (`set_config(…, true)`), so nothing leaks to the pooled connection after commit or
 * rollback. The idle cap makes PostgreSQL end the session of a relay that stalls mid-transaction (paused, hung),
 * releasing its row locks for another relay. The statement cap is the relay's own bound, whatever the
 * database's or role's `statement_timeout` (shorter than a claim, it would stop the relay for good; a claim
 * that outlives this one is made smaller, see `OutboxRelay.claim`); in-process handlers get theirs (see
 * `handlerContext`).
 * `durable: false` commits without waiting for the WAL flush: used for the claim, whose loss in a database crash
 * only means the work is claimed again (the outcome transaction that follows flushes it anyway).
 *
 * JIT compilation is off in these transactions: the relay's statements touch a batch of rows each, and a plan
 * whose estimated cost passes `jit_above_cost` (a generic plan's estimates are rough) would be compiled on every
 * execution. Both settings, and what was measured: docs/adr/0605-no-jit-and-asynchronous-commit-for-the-claim.md.
 *
 * `byKey`: a claim's transaction (`RelayPolicy.leaseProbesByKey`), whose statements are planned without
 * sequential scans (`enable_seqscan` off). The claims probe each pending event they pass by for a live lease
 * (`notLeased`; the other lane's batch in flight is still pending), and a generic plan made while the lease table was
 * empty or a page or two (a truncation, the start of a drain) probed it by a sequential scan per event, kept until
 * the next vacuum made PostgreSQL plan it anew: every lease taken and released meanwhile was read once per event
 * passed by. Transaction-local: the batch transaction that follows, and the handlers' statements, plan as usual.
 * Besides the probe, it turns the registry's small tables' scans into index scans and the fan-out's look at expired
 * leases into a range of the expiry index. See docs/adr/0804-a-lean-claim-for-in-process-consumers.md, addendum
 * on the lease probe.
 */
export function setTransactionContext(
  tenantSetting: string,
  tenantId: string,
  idleTimeoutMs: number,
  {
    durable = true,
    batch = null,
    byKey = false,
  }: { durable?: boolean; batch?: string | null; byKey?: boolean } = {},
): SqlStatement {
  const values = [tenantSetting, tenantId, String(idleTimeoutMs), durable ? 'on' : 'off'];
  if (batch === null)
    return byKey
      ? { text: BY_KEY_TEXT, values, withGenericPlans: { text: BY_KEY_GENERIC, values } }
      : { text: CONTEXT_TEXT, values, withGenericPlans: { text: CONTEXT_GENERIC, values } };
  // the batch transaction: also marked with its lease token (see `batchGuard`)
  values.push(batch);
  return { text: BATCH_CONTEXT_TEXT, values, withGenericPlans: { text: BATCH_CONTEXT_GENERIC, values } };
}

/**
 * The transaction-local setting that marks a batch transaction with its lease token. A handler cannot end the
 * batch transaction and leave the marker: a transaction begun after it (or none, autocommit) has no such
 * setting, so `batchGuard` tells the batch's own transaction from any other.
 */
export const BATCH_MARKER = 'outbox.batch';

/** The call that makes the rest of the transaction run generic plans (see `genericPlans`). */
const GENERIC_PLANS = `set_config('plan_cache_mode', 'force_generic_plan', true)`;

// The texts of `setTransactionContext`, made once: it runs a few times per batch. One column, the settings'
// values joined (`concat` evaluates every argument): a row of one field for the driver to read, not one per setting.
const CONTEXT_CALLS = `set_config($1, $2, true), set_config('idle_in_transaction_session_timeout', $3, true),
                    set_config('statement_timeout', $3, true), set_config('synchronous_commit', $4, true),
                    set_config('jit', 'off', true)`;
const BATCH_CONTEXT_CALLS = `${CONTEXT_CALLS}, set_config('${BATCH_MARKER}', $5, true)`;
const CONTEXT_TEXT = `select concat(${CONTEXT_CALLS}) as context`;
const BATCH_CONTEXT_TEXT = `select concat(${BATCH_CONTEXT_CALLS}) as context`;
const CONTEXT_GENERIC = `select concat(${CONTEXT_CALLS}, ${GENERIC_PLANS}) as context`;
const BATCH_CONTEXT_GENERIC = `select concat(${BATCH_CONTEXT_CALLS}, ${GENERIC_PLANS}) as context`;
const BY_KEY_CALLS = `${CONTEXT_CALLS}, set_config('enable_seqscan', 'off', true)`;
const BY_KEY_TEXT = `select concat(${BY_KEY_CALLS}) as context`;
const BY_KEY_GENERIC = `select concat(${BY_KEY_CALLS}, ${GENERIC_PLANS}) as context`;

// made once, as the contexts' texts: a named statement, compared by pg with the text it was parsed from
const HANDLER_CONTEXT_TEXT = `select current_setting($1, true) as tenant, current_setting('${BATCH_MARKER}', true) as batch,
                  set_config($1, $2, true), set_config('statement_timeout', $3, true)`;

/**
 * A handler's first statement (before its savepoint, in the same round trip as its first query): reads the
 * tenant setting and the batch marker as the previous handler left them (`tenant`, `batch`: the relay compares
 * them with its own), then sets the batch's tenant again, so no handler runs in a context another one chose,
 * and bounds the handler's statements by the time it has left (`statementTimeoutMs`): a query still running
 * at the handler's timeout is cancelled by the server, on this connection — no second one is needed.
 */
export function handlerContext(
  tenantSetting: string,
  tenantId: string,
  statementTimeoutMs: number,
): SqlStatement {
  return {
    text: HANDLER_CONTEXT_TEXT,
    values: [tenantSetting, tenantId, String(statementTimeoutMs)],
    // named: parsed once per connection instead of once per handler (it reads no table: any plan is sound)
    prepared: HANDLER_CONTEXT_NAME,
  };
}

/**
 * Bounds the rest of the transaction's statements (transaction-local `statement_timeout`): a handler's next
 * statements by the time it has left (see `handlerContext`).
 */
export function handlerBound(statementTimeoutMs: number): SqlStatement {
  return { text: `select set_config('statement_timeout', $1, true)`, values: [String(statementTimeoutMs)] };
}

/**
 * The relay's statements in a transaction of their own (the scan for due tenants, `relayQuery`'s): its own bound
 * (`statement_timeout`) and no JIT, as in its claims (see `setTransactionContext`). The due-tenant scan's
 * statement, once PostgreSQL caches it as a generic plan, is estimated above `jit_above_cost` (364,000 against
 * 100,000) and was compiled on every call: 90 ms for a plan that runs in 0.3 ms (ADR 1206, addendum on the
 * 10-minute hold).
 */
export function relayBound(statementTimeoutMs: number): SqlStatement {
  return {
    text: `select set_config('statement_timeout', $1, true), set_config('jit', 'off', true)`,
    values: [String(statementTimeoutMs)],
  };
}

/**
 * The checks run after a handler returns, when a batch is run again to find the delivery that failed it (see
 * `OutboxRelay.narrow`), before the handler's savepoint is released: every deferred constraint is checked now
 * (`set constraints all immediate`) inside a savepoint that is rolled back at once — which restores the
 * constraints' modes and the setting that tells the batch's seal this is no commit, and leaves the checked events
 * (the seal's among them) pending for the commit — so a deferred violation fails the
 * handler that caused it; then the tenant setting and the batch marker as the handler left them.
 */
export function handlerChecks(tenantSetting: string): SqlStatement[] {
  return [
    { text: 'savepoint outbox_check', values: [] },
    // not a commit: the batch's seal (see `sealBatch`) lets this check pass, and stays for the commit
    { text: `select set_config('${CHECKING_CONSTRAINTS}', 'on', true)`, values: [] },
    { text: 'set constraints all immediate', values: [] },
    { text: 'rollback to savepoint outbox_check', values: [] },
    { text: 'release savepoint outbox_check', values: [] },
    {
      text: `select current_setting($1, true) as tenant, current_setting('${BATCH_MARKER}', true) as batch`,
      values: [tenantSetting],
    },
  ];
}

/**
 * Undoes what handlers changed in the session (role, session authorization, every setting) for the rest of the
 * batch transaction and, once it commits, for the session: run when a handler sent a statement that may change
 * settings (see `handlerSqlEffects`), before the relay's context is set again. Settings go back to the
 * session's defaults (server, database, role and connection options): values an app `SET` on a pooled
 * connection before the relay took it are not kept.
 */
export function resetSession(): SqlStatement[] {
  // no parameters: one simple-protocol query
  return [{ text: 'reset session authorization; reset role; reset all', values: [] }];
}

/** SQLSTATE of `batchGuard` when the transaction is not the batch's (a handler ended it). */
export const BATCH_ENDED_SQLSTATE = 'OB002';
/** SQLSTATE of `batchGuard` when the tenant setting is not the batch's (a handler changed it). */
export const TENANT_CHANGED_SQLSTATE = 'OB003';

/** Transaction-local settings that carry what `batchGuard` expects (its `do` block takes no parameters). */
const EXPECTED_BATCH = 'outbox.expected_batch';
const EXPECTED_TENANT = 'outbox.expected_tenant';

/**
 * First in the batch's closing round trip, before the outcomes: fails the statement — and with it the commit,
 * which then rolls back — unless this is still the batch's own transaction (its marker holds the lease token)
 * in the batch's tenant. The outcome is written only in the transaction in which the handlers' writes are.
 * Two statements: the expected values, bound, then a `do` block (the only way to raise an error of one's own
 * without a function in the schema), which reads them. The tenant setting's name is configuration checked at
 * boot, written in as a literal like an identifier.
 */
export function batchGuard(tenantSetting: string, tenantId: string, leaseToken: string): SqlStatement[] {
  const setting = escapeLiteral(tenantSetting);
  return [
    {
      text: `select set_config('${EXPECTED_BATCH}', $1, true), set_config('${EXPECTED_TENANT}', $2, true)`,
      values: [leaseToken, tenantId],
    },
    {
      text: `do $outbox_guard$ begin
  if current_setting('${BATCH_MARKER}', true) is distinct from current_setting('${EXPECTED_BATCH}', true) then
    raise exception using errcode = '${BATCH_ENDED_SQLSTATE}',
      message = 'the batch transaction was ended before its outcomes were recorded';
  end if;
  if current_setting(${setting}, true) is distinct from current_setting('${EXPECTED_TENANT}', true) then
    raise exception using errcode = '${TENANT_CHANGED_SQLSTATE}',
      message = format('the tenant setting %s was changed to %L in the batch of tenant %s',
                       ${setting}, current_setting(${setting}, true), current_setting('${EXPECTED_TENANT}', true));
  end if;
end $outbox_guard$`,
      values: [],
    },
  ];
}

/**
 * Makes the named statements that follow in this transaction run their generic plan (`on`), not one planned
 * anew for their values (the point of naming them), or lets the statements after them be planned as usual.
 * Transaction-local. See docs/adr/0502-named-statements-and-their-refresh.md.
 */
export function genericPlans(on: boolean): SqlStatement {
  return on
    ? { text: `select ${GENERIC_PLANS}`, values: [] }
    : { text: `set local plan_cache_mode to default`, values: [] };
}
