import type { DeliveryOutcome } from '../../model/delivery-outcome';
import { PAIR_OUTCOME_NAME, textPerNames, type SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';
import { BATCH_MARKER } from './transaction-context';
import { holdPairs } from './consumer-pauses';

/**
 * The outcomes sent as arrays, one row each (see `recordOutcomes` for the parameters); a column whose values are
 * all the same is sent once ($19–$21, see `sentOnce`), as the pairs' tenant is ($15).
 */
const OUTCOME_ROWS = `select id, coalesce(status, $19::text) as status, error_code, last_error,
                    coalesce(retry_ms, $20::int) as retry_ms, external_run_id, event_id, consumer,
                    coalesce(attempt, $21::int) as attempt, coalesce(tenant_id, $15::uuid) as tenant_id, seq, snoozed,
                    hold_ms
               from unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::int[], $7::text[],
                           $8::uuid[], $9::text[], $10::int[], $11::uuid[], $12::bigint[], $17::boolean[], $18::int[])
                      as o(id, status, error_code, last_error, retry_ms, external_run_id, event_id, consumer, attempt,
                           tenant_id, seq, snoozed, hold_ms)
              -- fenced: only in the batch's own transaction (its marker holds the lease token); anywhere else no
              -- outcome is written and the fence fails the statement (see \`batchGuard\`, which says why first)
              where (not $16::boolean or current_setting('${BATCH_MARKER}', true) = $6::uuid::text)`;

/** Per event, from rows `r` of this batch's recorded deliveries: how many, closed, dead, attempts, first death. */
function perEvent(consumer: string, attempt: string): string {
  return `select event_id,
                    count(*)::int as total,
                    count(*) filter (where status in ('delivered', 'dead'))::int as closed,
                    count(*) filter (where status = 'dead')::int as dead,
                    max(${attempt}) as attempts,
                    max(${consumer} || ': ' || last_error) filter (where status = 'dead') as dead_error
               from r group by event_id`;
}

/**
 * Settles each event `e` from `p`, its row of `perEvent`. An event still 'pending' was claimed only through
 * its lease: all its pairs are in this batch.
 */
const SETTLE_EVENT = `deliveries_open = case when e.status = 'pending' then p.total else e.deliveries_open end - p.closed,
                    deliveries_dead = e.deliveries_dead + p.dead,
                    status = case when e.deliveries_dead + p.dead > 0 then 'failed'
                                  when case when e.status = 'pending' then p.total else e.deliveries_open end - p.closed = 0 then 'published'
                                  else 'processing' end,
                    published_at = case when e.deliveries_dead + p.dead = 0
                                         and case when e.status = 'pending' then p.total else e.deliveries_open end - p.closed = 0
                                        then now() else e.published_at end,
                    failed_at = case when p.dead > 0 then now() else e.failed_at end,
                    error_message = coalesce(p.dead_error, e.error_message),
                    attempts = greatest(e.attempts, p.attempts),
                    updated_at = now()`;

/**
 * The delivery row of an in-process pair `o`, inserted with its final status; a deferred one (snoozed, or its
 * consumer gone) as pending, its attempt given back. A retry is due `retry_ms` after the statement starts, not
 * the batch transaction: a snooze of `ms` is never due sooner than `ms` after its handler asked.
 */
function insertPairRow(n: OutboxNames): string {
  return `insert into ${n.deliveries} (event_id, tenant_id, consumer_name, event_seq, status, attempt_count, error_code,
                                        last_error, next_attempt_at, processed_at, external_run_id, snoozes)
             select o.event_id, o.tenant_id, o.consumer, o.seq,
                    case when o.status = 'deferred' then 'pending' else o.status end,
                    case when o.status = 'deferred' then o.attempt - 1 else o.attempt end,
                    o.error_code, o.last_error,
                    statement_timestamp() + o.retry_ms * interval '1 millisecond',
                    case when o.status = 'delivered' then now() end, o.external_run_id,
                    case when o.snoozed then 1 else 0 end
               from o`;
}

/**
 * The general outcome statement (see `recordOutcomes`): leased delivery rows updated, pairs inserted where this
 * relay still holds their event's lease, fenced or not. Planned for each batch, never prepared: a plan that
 * updated delivery rows, made while that table was empty, would scan it whole on every batch. unnest pads
 * shorter arrays with nulls: a column that is null throughout is sent empty (see `column`), and the pairs'
 * tenant ($15), status, retry and attempt ($19–$21, see `sentOnce`), when every outcome has the same, once.
 */
const outcomeText = textPerNames((n: OutboxNames): string => {
  return `with o as (
             ${OUTCOME_ROWS}
           ), updated as (
             update ${n.deliveries} d
                set status = case when o.status = 'deferred' then 'pending' else o.status end,
                    attempt_count = case when o.status = 'deferred' then d.attempt_count - 1 else d.attempt_count end,
                    snoozes = d.snoozes + case when o.snoozed then 1 else 0 end,
                    external_run_id = coalesce(o.external_run_id, d.external_run_id),
                    -- a success keeps the last error seen (e.g. staleLeaseRecovered): operators see how it got there
                    error_code = coalesce(o.error_code, d.error_code),
                    last_error = coalesce(o.last_error, d.last_error),
                    -- from the statement's start, not the transaction's: see insertPairRow
                    next_attempt_at = case when o.status in ('failed', 'deferred')
                                           then statement_timestamp() + o.retry_ms * interval '1 millisecond'
                                           else d.next_attempt_at end,
                    processed_at = case when o.status = 'delivered' then now() else null end,
                    lease_token = null,
                    lease_expires_at = null,
                    updated_at = now()
               from o
              -- = any() over the ids alone as well as the join: the planner probes the primary key, or skips the
              -- table when there are none, instead of scanning it
              where d.id = any($14::bigint[]) and d.id = o.id and d.lease_token = $6
             returning d.event_id, d.tenant_id, d.consumer_name, d.status, d.attempt_count, d.last_error
           ), held as (
             -- a webhook's Retry-After holds its (consumer, tenant) pair: only for rows this relay still leases
             -- (= any() over the held ids alone: a probe of the primary key per hold, none when nothing is held)
             ${holdPairs(
               n,
               `(select d.consumer_name, d.tenant_id, o.hold_ms, o.last_error as reason
                   from o join ${n.deliveries} d on d.id = o.id
                  where d.id = any(array(select id from o where hold_ms is not null)) and o.hold_ms is not null
                    and d.lease_token = $6)`,
             )}
           ), locked as (
             -- the events of in-process pairs, locked in id order before their leases are deleted (see recordOutcomes)
             select e.id from ${n.events} e
              where e.id = any(array(select event_id from o where id is null))
              order by e.id
                for update
           ), released as (
             -- the fence for pairs: only the events whose lease this relay still holds
             delete from ${n.eventLeases}
              where event_id = any(array(select id from locked)) and lease_token = $6
             returning event_id
           ), inserted as (
             ${insertPairRow(n)}
              where o.id is null and o.event_id = any(array(select event_id from released))
             returning event_id, tenant_id, consumer_name, status, attempt_count, last_error
           ), r as (
             select * from updated union all select * from inserted
           ), inbox as (
             insert into ${n.inbox} (event_id, consumer_name, tenant_id)
             select event_id, consumer_name, tenant_id from r where status = 'delivered'
           ), per_event as (
             ${perEvent('consumer_name', 'attempt_count')}
           ), settled as (
             update ${n.events} e
                set ${SETTLE_EVENT}
               from per_event p
              -- the key alone: a primary-key probe per event. With an "= any(ids)" beside it, both plans scanned the
              -- ids once per event (quadratic in the batch size)
              where e.id = p.event_id
             returning e.id
           )
           select (select count(*) from r)::int as recorded, (select count(*) from settled)::int as events,
                  (select count(*) from released)::int as released,
                  ${n.leaseFence}($13, ((select count(*) from updated) + (select count(*) from released))::int) as owned`;
});

/**
 * The outcomes of a fenced batch of in-process pairs only (the common batch), prepared like the fan-out: it
 * reads only events (by primary key) and the lease table (by its key, in `outbox_release_leases`: a generic
 * plan made while the table was a page would scan it whole, and a held snapshot can leave it thousands of pages
 * of dead leases), so a generic plan stays sound (see `prepared-statements.e2e-spec.ts`,
 * `lease-release-by-key.e2e-spec.ts`). Fenced, it may take every step for granted and check once at the end:
 * the events are settled first — the update locks them, before any lease row is touched (see `recordOutcomes`)
 * — then their leases deleted, then every pair's row and inbox row inserted; if a lease was lost, the fence
 * fails the statement before those inserts run (they are not read by the final select, so they run after it).
 */
export const pairOutcomeText = textPerNames((n: OutboxNames): string => {
  return `with o as (
             ${OUTCOME_ROWS}
                -- pairs have no delivery ids ($14 is empty): named here so that the parameter has a type
                and cardinality($14::bigint[]) = 0
           ), r as (
             select event_id, consumer, status, attempt, last_error from o
           ), per_event as (
             ${perEvent('consumer', 'attempt')}
           ), settled as (
             update ${n.events} e
                set ${SETTLE_EVENT}
               from per_event p
              where e.id = p.event_id
             returning e.id
           ), released as (
             -- by the lease table's key, whatever the size of the table when the generic plan was made (see
             -- outbox_release_leases); the settled events' ids, an initplan, are locked before any lease is touched
             select event_id from ${n.releaseLeases}(array(select id from settled), $6::uuid) as event_id
           ), inserted as (
             ${insertPairRow(n)}
           ), inbox as (
             insert into ${n.inbox} (event_id, consumer_name, tenant_id)
             select event_id, consumer, tenant_id from o where status = 'delivered'
           )
           select (select count(*) from o)::int as recorded, (select count(*) from settled)::int as events,
                  -- the fence returns the count it checked: the leases released
                  ${n.leaseFence}($13, (select count(*) from released)::int) as released`;
});

/**
 * Records a batch's outcomes in one statement: updates the leased deliveries still owned (fenced by the lease
 * token), inserts the rows of in-process pairs claimed through their event (once, with their final status;
 * fenced by deleting the event's lease in `outbox_event_leases` — only this relay's token — so no probe per
 * pair), inserts the inbox rows of those delivered (in the handlers' transaction, so they commit with the
 * handlers' writes), and settles each event from counters. Counters, not a recount: an `update … set n = n - k`
 * re-reads the latest row under its lock, so two relays finishing different consumers of one event never both
 * miss each other's commit, and a recount in this statement would not see the rows it writes
 * (docs/adr/0603-counters-not-recounts.md). The fence: docs/adr/0602-claim-commits-with-a-lease-outcome-is-fenced.md.
 *
 * The events of pairs are locked (in id order) before their leases are deleted: every statement that changes an
 * event's lease row holds the event's row lock first (a claim locks the events it takes, `skip locked`). Without
 * it, a claim whose snapshot predates another relay's claim could lock an event leased by that relay while the
 * relay's outcome deletes the lease, and each would wait for the other; with it, the outcome waits for that
 * claim, which finds the lease taken and leaves the event alone. (In the general statement the lock is the
 * `released` delete's initplan, so it is taken before any lease row is touched; in the prepared statement of a
 * fenced batch of pairs, the update that settles the events runs first and takes it — an `update` takes the
 * same lock, and a settle that turns out to be over a lost lease is rolled back by the fence.)
 *
 * A pair's row is inserted plainly: only the holder of the event's lease inserts it, and a claim leases only the
 * pairs whose row does not exist, so a duplicate would be a broken invariant — it fails the batch, loudly,
 * instead of being skipped (and `on conflict` would cost a speculative insertion, two WAL records per row).
 *
 * With `fenced`, every outcome must still hold its lease, or the statement fails (SQLSTATE `OB001`, see
 * `outbox_lease_fence`) and takes the batch transaction with it — for in-process handlers, whose writes share
 * that transaction: a takeover mid-run (the batch outlived its lease) then costs this relay its batch, never a
 * second effect. Without it, outcomes that lost their lease are simply not written (external deliveries).
 *
 * Returns one row: `recorded` (deliveries written), `events` (events settled), `released` (event leases deleted).
 */
export function recordOutcomes(
  n: OutboxNames,
  outcomes: readonly DeliveryOutcome[],
  leaseToken: string,
  { fenced = false }: { fenced?: boolean } = {},
): SqlStatement {
  const rowIds: string[] = [];
  // one event and one tenant mostly (a batch of one event at a low rate): no set until a second one shows
  let pairEvent: string | null = null;
  let pairEvents: Set<string> | null = null;
  let tenant: string | null = null;
  let tenants: Set<string> | null = null;
  for (const o of outcomes) {
    if (o.deliveryId !== null) rowIds.push(o.deliveryId);
    else {
      const { eventId, tenantId } = o.pair!;
      if (pairEvents) pairEvents.add(eventId);
      else if (pairEvent === null) pairEvent = eventId;
      else if (eventId !== pairEvent) pairEvents = new Set([pairEvent, eventId]);
      if (tenants) tenants.add(tenantId);
      else if (tenant === null) tenant = tenantId;
      else if (tenantId !== tenant) tenants = new Set([tenant, tenantId]);
    }
  }
  const rows = rowIds.length;
  const pairEventCount = pairEvents?.size ?? (pairEvent === null ? 0 : 1);
  const oneTenant = tenants === null && tenant !== null;
  // what the fence expects recorded (0: no fence): each leased row updated, each pair event's lease released
  const expected = fenced ? rows + pairEventCount : 0;
  // the prepared statement takes every lease for granted until its fence: only for a fenced batch of pairs
  const pairsOnly = fenced && rows === 0;
  const status = onceOrNull(outcomes, statusOf);
  const retryMs = onceOrNull(outcomes, retryMsOf);
  const attempt = onceOrNull(outcomes, attemptOf);
  return {
    text: pairsOnly ? pairOutcomeText(n) : outcomeText(n),
    prepared: pairsOnly ? PAIR_OUTCOME_NAME : undefined,
    values: [
      column(outcomes, deliveryIdOf),
      status === null ? column(outcomes, statusOf) : NONE,
      column(outcomes, errorCodeOf),
      column(outcomes, errorOf),
      retryMs === null ? column(outcomes, retryMsOf) : NONE,
      leaseToken,
      column(outcomes, externalRunIdOf),
      column(outcomes, eventIdOf),
      column(outcomes, consumerOf),
      attempt === null ? column(outcomes, attemptOf) : NONE,
      oneTenant ? NONE : column(outcomes, tenantIdOf),
      column(outcomes, eventSeqOf),
      expected,
      rowIds,
      oneTenant ? tenant : null,
      fenced,
      column(outcomes, snoozedOf),
      column(outcomes, holdMsOf),
      status,
      retryMs,
      attempt,
    ],
  };
}

// Each column's value, made once (not a closure per column per batch: one statement per batch, issue 35)
const deliveryIdOf = (o: DeliveryOutcome): string | null => o.deliveryId;
const statusOf = (o: DeliveryOutcome): string => o.status;
const errorCodeOf = (o: DeliveryOutcome): string | null => o.errorCode;
const errorOf = (o: DeliveryOutcome): string | null => o.error;
const retryMsOf = (o: DeliveryOutcome): number => Math.round(o.retryInMs);
const externalRunIdOf = (o: DeliveryOutcome): string | null => o.externalRunId ?? null;
const eventIdOf = (o: DeliveryOutcome): string | null => o.pair?.eventId ?? null;
const consumerOf = (o: DeliveryOutcome): string | null => o.pair?.consumer ?? null;
const attemptOf = (o: DeliveryOutcome): number | null => o.pair?.attempt ?? null;
const tenantIdOf = (o: DeliveryOutcome): string | null => o.pair?.tenantId ?? null;
const eventSeqOf = (o: DeliveryOutcome): string | null => o.pair?.eventSeq ?? null;
const snoozedOf = (o: DeliveryOutcome): boolean | null => o.snoozed ?? null;
const holdMsOf = (o: DeliveryOutcome): number | null =>
  o.holdMs === undefined ? null : Math.round(o.holdMs);

/** A column with no values: one array for every statement (pg only reads it). */
const NONE: readonly never[] = Object.freeze([]);

/**
 * One value per outcome, or no values at all when every one is null: `unnest` pads a shorter array with nulls,
 * so the statement reads the same, and a batch of successes does not send hundreds of `NULL`s per column.
 */
function column<T>(
  outcomes: readonly DeliveryOutcome[],
  value: (o: DeliveryOutcome) => T | null,
): readonly (T | null)[] {
  // looked at first: most columns of a batch of successes are all null, and then no array is made
  for (const o of outcomes) if (value(o) !== null) return outcomes.map(value);
  return NONE;
}

/**
 * The value of a column sent once when every outcome has the same (the common batch: every pair delivered at its
 * first attempt, no retry), which the statement takes for each row's null — the column itself then goes empty;
 * or null, and the column goes as `column` sends it. 100 events × 2 pairs: 3,974 bytes of `status`, `retry_ms`
 * and `attempt` less to send (pg quotes each element) and 600 elements less to parse (docs/adr/0804, issue 35).
 */
function onceOrNull<T>(
  outcomes: readonly DeliveryOutcome[],
  value: (o: DeliveryOutcome) => T | null,
): T | null {
  if (outcomes.length === 0) return null;
  const first = value(outcomes[0]!);
  if (first === null) return null;
  for (let i = 1; i < outcomes.length; i++) if (value(outcomes[i]!) !== first) return null;
  return first;
}

/** The SQLSTATE of `outbox_lease_fence`: a fenced batch lost a lease and was rolled back. */
export const LEASE_LOST_SQLSTATE = 'OB001';
