// Whole for now: split by role (relay/…, store/sql/…) on the branch in wip/core-transport.bundle (issue 20); this
// file goes once that branch is merged.
/**
 * Every statement the outbox runs on its tables, as `{ text, values }`. Values are always parameters, never
 * interpolated; identifiers come from the constants below. Bulk work is one statement over arrays.
 */

/** Schema of the outbox tables (created by the migrations). */
export const OUTBOX_SCHEMA = 'public';
const EVENTS = `${OUTBOX_SCHEMA}.event_outbox`;
const DELIVERIES = `${OUTBOX_SCHEMA}.outbox_deliveries`;
const INBOX = `${OUTBOX_SCHEMA}.consumer_inbox`;
const DUE_TENANTS = `${OUTBOX_SCHEMA}.outbox_due_tenants`;
const CONSUMERS = `${OUTBOX_SCHEMA}.outbox_consumers`;
const CONSUMER_INSTANCES = `${OUTBOX_SCHEMA}.outbox_consumer_instances`;
const EVENT_LEASES = `${OUTBOX_SCHEMA}.outbox_event_leases`;

/** The channel relays LISTEN on for wake-ups. */
export const WAKEUP_CHANNEL = 'outbox_wakeup';

/** Most tenant ids a wake-up names (PostgreSQL caps a payload below 8,000 bytes); beyond, it names none. */
const WAKEUP_MAX_TENANTS = 200;

/**
 * Wakes the relays of every process (sent after a commit, never inside the app's transaction). The payload
 * lists the tenants with new events (comma-separated), or is empty: "look for due tenants".
 */
export function notifyWakeup(tenants: readonly string[]): SqlStatement {
  // Its own implicit transaction, committed without waiting for the WAL flush: a wake-up needs no durability.
  return {
    text: `select set_config('synchronous_commit', 'off', true), pg_notify($1, $2)`,
    values: [WAKEUP_CHANNEL, tenants.length <= WAKEUP_MAX_TENANTS ? tenants.join(',') : ''],
  };
}

/** The tenants a wake-up's payload names (the relay checks each is a UUID). */
export function wakeupTenants(payload: string | undefined): string[] {
  return payload ? payload.split(',') : [];
}

/** Subscribes a dedicated connection to wake-ups. */
export function listenWakeup(): SqlStatement {
  return { text: `listen ${WAKEUP_CHANNEL}`, values: [] };
}

import { createHash } from 'node:crypto';
import { escapeLiteral } from 'pg';
import type { ValidatedEvent } from '../enqueue/event-validation';

/** A statement ready for `queryRunner.query(text, values)`. */
export interface SqlStatement {
  text: string;
  values: unknown[];
  /**
   * Set on a statement the relay may run as a server-side prepared statement (see `OutboxStore` and
   * `PREPARED_STATEMENTS`): its name and the types of its parameters. Only for statements whose generic plan
   * does not depend on table sizes (checked by `prepared-statements.e2e-spec.ts`).
   */
  prepared?: PreparedForm;
}

/** How a statement is prepared on the server: `prepare <name>(<types>) as <text>`. */
export interface PreparedForm {
  name: string;
  types: readonly string[];
}

/** One row of `event_outbox` to insert: a checked event and its id. */
export interface EventRow extends ValidatedEvent {
  id: string;
  /** The W3C traceparent active at enqueue (tracing module only); without it the column is not written. */
  traceparent?: string | null;
}

/** Inserts one event (the common case: one round trip, no arrays to unpack). */
export function insertEvent(e: EventRow): SqlStatement {
  // tracing: the trace context column only when there is one (an app without tracing sends what it always did)
  const traced = e.traceparent ? [', traceparent', ', $10'] : ['', ''];
  return {
    text: `insert into ${EVENTS} (id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at${traced[0]})
           values ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, coalesce($9::timestamptz, now())${traced[1]})`,
    values: [
      e.id,
      e.tenantId,
      e.eventName,
      e.payloadJson,
      e.aggregateType,
      e.aggregateId,
      e.correlationId,
      e.schemaVersion,
      e.occurredAt,
      ...(e.traceparent ? [e.traceparent] : []),
    ],
  };
}

/** Inserts many events in one statement; `seq` keeps their order. */
export function insertEvents(rows: readonly EventRow[]): SqlStatement {
  // tracing: as in insertEvent, the column only when a trace context was captured
  const traced = rows.some((r) => r.traceparent);
  const t = traced ? [', traceparent', ', $10::text[]', ', traceparent'] : ['', '', ''];
  return {
    text: `insert into ${EVENTS} (id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at${t[0]})
           select id, tenant_id, event_name, payload::jsonb, aggregate_type, aggregate_id, correlation_id, schema_version, coalesce(occurred_at, now())${t[2]}
             from unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[], $9::timestamptz[]${t[1]})
               with ordinality as t(id, tenant_id, event_name, payload, aggregate_type, aggregate_id, correlation_id, schema_version, occurred_at${t[0]}, n)
            order by n`,
    values: [
      rows.map((r) => r.id),
      rows.map((r) => r.tenantId),
      rows.map((r) => r.eventName),
      rows.map((r) => r.payloadJson),
      rows.map((r) => r.aggregateType),
      rows.map((r) => r.aggregateId),
      rows.map((r) => r.correlationId),
      rows.map((r) => r.schemaVersion),
      rows.map((r) => r.occurredAt),
      ...(traced ? [rows.map((r) => r.traceparent ?? null)] : []),
    ],
  };
}

/**
 * Tenants with due work, and which kind: new events (`has_new`), or deliveries due for retry or whose lease
 * expired (`has_due`), so a round runs only the statements it needs. A SECURITY DEFINER
 * function (see the migration) so the relay role can see across tenants under row-level security; it walks the
 * partial indexes one tenant at a time (a loose index scan), so its cost grows with tenants, not rows.
 */
export function dueTenants(limit: number, afterTenant: string | null): SqlStatement {
  return {
    text: `select tenant_id, has_new, has_due from ${DUE_TENANTS}($1, $2)`,
    values: [limit, afterTenant],
  };
}

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
 * execution — measured on PostgreSQL 15 with its default `jit = on`: 1.8 s per claim instead of 4 ms.
 */
export function setTransactionContext(
  tenantSetting: string,
  tenantId: string,
  idleTimeoutMs: number,
  { durable = true, batch = null }: { durable?: boolean; batch?: string | null } = {},
): SqlStatement {
  if (batch !== null) {
    // the batch transaction: also marked with its lease token (see `batchGuard`)
    return {
      text: `select set_config($1, $2, true), set_config('idle_in_transaction_session_timeout', $3, true),
                    set_config('statement_timeout', $3, true), set_config('synchronous_commit', $4, true),
                    set_config('jit', 'off', true), set_config('${BATCH_MARKER}', $5, true)`,
      values: [tenantSetting, tenantId, String(idleTimeoutMs), durable ? 'on' : 'off', batch],
    };
  }
  return {
    text: `select set_config($1, $2, true), set_config('idle_in_transaction_session_timeout', $3, true),
                  set_config('statement_timeout', $3, true), set_config('synchronous_commit', $4, true),
                  set_config('jit', 'off', true)`,
    values: [tenantSetting, tenantId, String(idleTimeoutMs), durable ? 'on' : 'off'],
  };
}

/**
 * The transaction-local setting that marks a batch transaction with its lease token. A handler cannot end the
 * batch transaction and leave the marker: a transaction begun after it (or none, autocommit) has no such
 * setting, so `batchGuard` tells the batch's own transaction from any other.
 */
export const BATCH_MARKER = 'outbox.batch';

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
    text: `select current_setting($1, true) as tenant, current_setting('${BATCH_MARKER}', true) as batch,
                  set_config($1, $2, true), set_config('statement_timeout', $3, true)`,
    values: [tenantSetting, tenantId, String(statementTimeoutMs)],
  };
}

/** Bounds a handler's next statements by the time it has left (see `handlerContext`). */
export function handlerBound(statementTimeoutMs: number): SqlStatement {
  return { text: `select set_config('statement_timeout', $1, true)`, values: [String(statementTimeoutMs)] };
}

/**
 * The checks run after a handler returns, when a batch is run again to find the delivery that failed it (see
 * `OutboxRelay.narrow`), before the handler's savepoint is released: every deferred constraint is checked now
 * (`set constraints all immediate`) inside a savepoint that is rolled back at once — which restores the
 * constraints' modes and leaves the checked events pending for the commit — so a deferred violation fails the
 * handler that caused it; then the tenant setting and the batch marker as the handler left them.
 */
export function handlerChecks(tenantSetting: string): SqlStatement {
  return {
    text: `savepoint outbox_check; set constraints all immediate; rollback to savepoint outbox_check;
           release savepoint outbox_check;
           select current_setting($1, true) as tenant, current_setting('${BATCH_MARKER}', true) as batch`,
    values: [tenantSetting],
  };
}

/**
 * Undoes what handlers changed in the session (role, session authorization, every setting) for the rest of the
 * batch transaction and, once it commits, for the session: run when a handler sent a statement that may change
 * settings (see `handlerSqlEffects`), before the relay's context is set again. Settings go back to the
 * session's defaults (server, database, role and connection options): values an app `SET` on a pooled
 * connection before the relay took it are not kept.
 */
export function resetSession(): SqlStatement[] {
  return [
    { text: 'reset session authorization', values: [] },
    { text: 'reset role', values: [] },
    { text: 'reset all', values: [] },
  ];
}

/** SQLSTATE of `batchGuard` when the transaction is not the batch's (a handler ended it). */
export const BATCH_ENDED_SQLSTATE = 'OB002';
/** SQLSTATE of `batchGuard` when the tenant setting is not the batch's (a handler changed it). */
export const TENANT_CHANGED_SQLSTATE = 'OB003';

/**
 * First in the batch's closing round trip, before the outcomes: fails the statement — and with it the commit,
 * which does not run — unless this is still the batch's own transaction (its marker holds the lease token) in
 * the batch's tenant. The outcome is written only in the transaction in which the handlers' writes are.
 * (A `do` block: the only way to raise an error of one's own without a function in the schema.)
 */
export function batchGuard(tenantSetting: string, tenantId: string, leaseToken: string): SqlStatement {
  return {
    text: `do $outbox_guard$ begin
  if current_setting('${BATCH_MARKER}', true) is distinct from ${escapeLiteral(leaseToken)} then
    raise exception using errcode = '${BATCH_ENDED_SQLSTATE}',
      message = 'the batch transaction was ended before its outcomes were recorded';
  end if;
  if current_setting(${escapeLiteral(tenantSetting)}, true) is distinct from ${escapeLiteral(tenantId)} then
    raise exception using errcode = '${TENANT_CHANGED_SQLSTATE}',
      message = format('the tenant setting %s was changed to %L in the batch of tenant %s',
                       ${escapeLiteral(tenantSetting)}, current_setting(${escapeLiteral(tenantSetting)}, true),
                       ${escapeLiteral(tenantId)});
  end if;
end $outbox_guard$`,
    values: [],
  };
}

/** Columns of a claimed delivery joined with its event. */
const CLAIMED_COLUMNS = `d.id as delivery_id, d.consumer_name, d.attempt_count, e.id as event_id, e.tenant_id, e.event_name,
  e.payload, e.aggregate_type, e.aggregate_id, e.occurred_at, e.correlation_id, e.schema_version, e.traceparent`;

/**
 * For an ordered delivery `d`: an earlier delivery of its aggregate to the same consumer that is not delivered
 * yet (pending, leased, failed or dead), or an earlier event of the aggregate not fanned out yet. Either one
 * makes `d` wait. (Within one aggregate, apps serialise their writes, so insert order is commit order.)
 */
const EARLIER_IN_AGGREGATE = `
  select 1 from ${DELIVERIES} p
   where p.tenant_id = d.tenant_id and p.consumer_name = d.consumer_name and p.aggregate_key = d.aggregate_key
     and p.event_seq < d.event_seq and p.status <> 'delivered'
  union all
  select 1 from ${EVENTS} pe join ${EVENTS} me on me.id = d.event_id
   where pe.tenant_id = d.tenant_id and pe.status = 'pending' and pe.aggregate_id = me.aggregate_id
     and pe.aggregate_type is not distinct from me.aggregate_type and pe.seq < me.seq`;

/**
 * Claims deliveries of this tenant that are due for retry, and those whose lease expired (their relay died or
 * stalled), for the consumers this instance hosts.
 *
 * Locking: `for update skip locked` lets several relays claim side by side without waiting on each other; the
 * claim commits at once with a lease (deadline + random token) instead of holding row locks while handlers run,
 * so a crashed relay's work is taken over after `lease_expires_at`, and only the holder of the current token
 * can record an outcome (fencing). The attempt is counted here, at claim time, so a crash still counts and a
 * poison event cannot crash-loop the relay forever. Two index scans (one per partial index) rather than one
 * `or`, so each stays an ordered, limited scan over due rows only.
 */
export function claimDueDeliveries(p: {
  tenantId: string;
  consumers: readonly string[];
  limit: number;
  leaseToken: string;
  leaseMs: number;
}): SqlStatement {
  return {
    text: `with retry as (
             select d.id from ${DELIVERIES} d
              where d.tenant_id = $1 and d.status in ('pending', 'failed') and d.next_attempt_at <= now()
                and d.consumer_name = any($2::text[])
                and (d.aggregate_key is null or not exists (${EARLIER_IN_AGGREGATE}))
              order by d.next_attempt_at
              limit $3
                for update of d skip locked
           ), stale as (
             select id from ${DELIVERIES}
              where tenant_id = $1 and status = 'processing' and lease_expires_at <= now()
                and consumer_name = any($2::text[])
              order by lease_expires_at
              limit $3
                for update skip locked
           ), claimed as (
             update ${DELIVERIES} d
                set status = 'processing',
                    attempt_count = d.attempt_count + 1,
                    lease_token = $4,
                    lease_expires_at = clock_timestamp() + $5 * interval '1 millisecond',
                    error_code = case when d.status = 'processing' then 'staleLeaseRecovered' else d.error_code end,
                    last_error = case when d.status = 'processing'
                                      then 'attempt ' || d.attempt_count || ' started but its relay never recorded an outcome (lease expired)'
                                      else d.last_error end,
                    updated_at = now()
               from (select id, false as recovered from retry union all select id, true from stale) due
              where d.id = any(array(select id from retry union all select id from stale)) and d.id = due.id
             returning d.*, due.recovered
           )
           select ${CLAIMED_COLUMNS}, d.recovered
             from claimed d join ${EVENTS} e on e.id = d.event_id
            order by e.seq, d.consumer_name`,
    values: [p.tenantId, p.consumers, p.limit, p.leaseToken, p.leaseMs],
  };
}

// The columns the fan-out needs come straight from the locked rows (the latest versions: `for update` re-checks
// the conditions on them), not from a second read of the same rows. The live leases of the tenant are read once
// into a hash (`not in` an uncorrelated subquery; event ids are never null): a check per event would be a scan
// of the lease table per event in a generic plan made while that table was nearly empty.
const FAN_OUT_TEXT = `with fresh as (
    select e.id, e.seq, e.event_name, e.aggregate_type, e.aggregate_id, false as started from ${EVENTS} e
     where e.tenant_id = $1 and e.status = 'pending'
       and e.id not in (select l.event_id from ${EVENT_LEASES} l where l.tenant_id = $1 and l.lease_expires_at > now())
     order by e.seq
     limit $4
       for update of e skip locked
  ), stale as (
    -- processing events whose in-process pairs were claimed by a relay that never recorded them
    select e.id, e.seq, e.event_name, e.aggregate_type, e.aggregate_id, true as started
      from ${EVENT_LEASES} l join ${EVENTS} e on e.id = l.event_id
     where l.tenant_id = $1 and l.lease_expires_at <= now() and e.status = 'processing'
     order by l.lease_expires_at
     limit $4
       for update of e skip locked
  ), ev as (
    select * from fresh union all select * from stale
  ), written as (
    -- the delivery rows the relay that claimed a stale event did write (read by the events' ids: an index probe
    -- in any plan, where a subquery per pair may become a hash of the whole table in a generic one)
    select x.event_id, x.consumer_name from ${DELIVERIES} x where x.event_id = any(array(select id from stale))
  ), routes as materialized (
    -- the consumers of each event name in the batch: patterns are matched once per name, not once per event
    -- (materialized: inlined, the planner joins events to consumers first and matches each pair)
    select n.event_name, c.name, c.ordered,
           c.name = any($10::text[]) and not c.ordered as deferred,
           c.name = any($2::text[]) and not c.ordered as leased
      from (select distinct event_name from ev) n join (
             select name, event_patterns, ordered from ${CONSUMERS} where last_seen_at > now() - $3 * interval '1 millisecond'
             union all
             select name, string_to_array(patterns, ' '), ordered
               from unnest($7::text[], $8::text[], $9::boolean[]) as t(name, patterns, ordered)
           ) c
        on exists (select 1 from unnest(c.event_patterns) as p(pattern)
                    where p.pattern = '*' or p.pattern = n.event_name
                       or (right(p.pattern, 2) = '.*' and starts_with(n.event_name, left(p.pattern, -1))))
  ), route_sets as (
    -- per event name: how many consumers, whether in-process pairs, and which (space-separated: names of this
    -- instance's own in-process consumers, which never hold a space — checked at boot — so no array to parse)
    select event_name, count(*)::int as n, bool_or(deferred) as has_deferred, bool_and(deferred) as all_deferred,
           string_agg(name, ' ' order by name) filter (where deferred) as pairs
      from routes group by event_name
  ), matched as (
    -- the pairs that need a look of their own: those that get a delivery row now, and every pair of an event
    -- already fanned out (only the consumers whose row the dead relay never wrote)
    select ev.id as event_id, ev.seq, r.name, r.deferred, r.leased,
           -- a JSON array, so no (type, id) pair shares another's key (migration OutboxAggregateKey1764450000000)
           case when r.ordered and ev.aggregate_id is not null
                then json_build_array(ev.aggregate_type, ev.aggregate_id)::text end as aggregate_key
      from ev join routes r on r.event_name = ev.event_name
     where (not r.deferred and not ev.started)
        or (ev.started and not exists (select 1 from written w where w.event_id = ev.id and w.consumer_name = r.name))
  ), counted as (
    -- a new event counts the consumers of its name; an event already fanned out, those left to it
    select ev.id, ev.seq, ev.started, coalesce(rs.n, 0) as n, coalesce(rs.has_deferred, false) as has_deferred,
           coalesce(rs.all_deferred, false) as all_deferred, rs.pairs
      from ev left join route_sets rs on rs.event_name = ev.event_name
     where not ev.started
    union all
    select ev.id, ev.seq, ev.started, count(m.name)::int, coalesce(bool_or(m.deferred), false),
           coalesce(bool_and(m.deferred), false), string_agg(m.name, ' ' order by m.name) filter (where m.deferred)
      from ev left join matched m on m.event_id = ev.id
     where ev.started
     group by ev.id, ev.seq, ev.started
  ), leased as (
    insert into ${EVENT_LEASES} as l (event_id, tenant_id, lease_token, lease_expires_at)
    select id, $1, $5, clock_timestamp() + $6 * interval '1 millisecond' from counted where has_deferred order by seq
    on conflict (event_id) do update
      set lease_token = excluded.lease_token, lease_expires_at = excluded.lease_expires_at,
          claim_count = l.claim_count + 1
    where l.lease_expires_at <= now()
    returning l.event_id, l.claim_count
  ), owned as (
    -- events with in-process pairs are this claim's only if its lease won
    select id, started, n, all_deferred from counted
     where not has_deferred or id = any(array(select event_id from leased))
  ), released as (
    -- an expired lease on an event with nothing left to claim through it
    delete from ${EVENT_LEASES}
     where event_id = any(array(select id from counted where started and not has_deferred))
       and lease_expires_at <= now()
  ), inserted as (
    insert into ${DELIVERIES} (event_id, tenant_id, consumer_name, event_seq, aggregate_key, status, attempt_count, lease_token, lease_expires_at)
    select event_id, $1, name, seq, aggregate_key,
           case when leased then 'processing' else 'pending' end,
           case when leased then 1 else 0 end,
           case when leased then $5::uuid end,
           case when leased then clock_timestamp() + $6 * interval '1 millisecond' end
      from matched
     where not deferred and event_id = any(array(select id from owned))
    on conflict (event_id, consumer_name) do nothing
    returning id, event_id, consumer_name, attempt_count, status
  ), marked as (
    update ${EVENTS} e
       set status = case when o.n > 0 then 'processing' else 'no_handlers' end,
           deliveries_open = o.n,
           published_at = case when o.n > 0 then null else now() end,
           updated_at = now()
      from owned o
     where e.id = any(array(select id from owned where not started and not all_deferred))
       and e.id = o.id
    returning e.id
  )
  -- Each delivery row, and each leased event (once, whatever the number of its pairs), with its event
  -- read from the table by primary key (this statement's snapshot: the columns used are ones it does not
  -- change). Joining two CTEs directly instead makes the planner loop over one for each row of the other;
  -- the = any() over the ids keeps the read a primary-key probe in a generic plan too, which cannot know
  -- how few rows a CTE returns (it would hash the whole table).
  (select 'row' as kind, d.id as delivery_id, d.consumer_name, d.attempt_count, e.id as event_id, e.tenant_id,
          e.event_name, e.payload, e.aggregate_type, e.aggregate_id, e.occurred_at, e.correlation_id,
          e.schema_version, null::bigint as event_seq, null::text as pairs, e.traceparent
     from inserted d join ${EVENTS} e on e.id = d.event_id
    where e.id = any(array(select event_id from inserted)) and d.status = 'processing'
    order by e.seq, d.consumer_name)
  union all
  -- a leased event, once, with the consumers of its in-process pairs (one row per event, not one per pair):
  -- a new event's are its name's; only an event already fanned out (\`processing\` in this statement's snapshot)
  -- looks up its own. Subqueries, not joins: a join of two CTEs can become a loop over one for each row of the
  -- other (10,000 comparisons per claim in a generic plan made over a large history)
  (select 'lease', null, null, l.claim_count, e.id, e.tenant_id, e.event_name, e.payload, e.aggregate_type,
          e.aggregate_id, e.occurred_at, e.correlation_id, e.schema_version, e.seq,
          case when e.status = 'pending' then (select rs.pairs from route_sets rs where rs.event_name = e.event_name)
               else (select c.pairs from counted c where c.id = e.id) end,
          e.traceparent
     from leased l join ${EVENTS} e on e.id = l.event_id
    where e.id = any(array(select event_id from leased))
    order by e.seq)
  union all
  select 'event', null, null, null, m.id, null, null, null, null, null, null, null, null, null, null, null from marked m
  union all
  select 'lost', null, null, null, c.id, null, null, null, null, null, null, null, null, null, null, null from counted c
   where c.has_deferred and not c.id = any(array(select event_id from leased))`;

/**
 * Fans new events of this tenant out to their consumers: claims pending events (`skip locked`, in insert
 * order) and inserts one delivery row per matching consumer of the persisted registry (`outbox_consumers`,
 * every consumer some instance reported within `liveWithinMs`), so that a consumer hosted only by other
 * instances (a rolling deploy, dedicated workers) still gets its rows. Rows of consumers this instance hosts
 * are leased to it at once (attempt 1), except ordered ones, which the due-claim that follows in the same
 * transaction takes when nothing earlier in their aggregate is open; tenant-scoped consumers (run-time webhook
 * subscriptions) come as arrays; the others wait as `pending` for an instance that hosts them.
 *
 * Hosted in-process consumers (not ordered) get no row here: their pairs are claimed through the event, with a
 * lease in `outbox_event_leases` (unlogged), and their rows are written once, with the outcome. An event whose
 * consumers are all of that kind is not written at all by the claim: it stays `pending` (with a live lease, the
 * next claims pass it by) until the outcome statement settles it. Other events become `processing` with their
 * count of open deliveries, or `no_handlers` when nothing listens. An expired event lease means the relay that
 * held it never recorded its outcomes: the event is claimed again (`claim_count` + 1) for the pairs whose row
 * was never written. The lease upsert is the arbiter between relays: a claim whose lease insert loses leaves the
 * event alone. Pattern matching mirrors `matchesEventPattern`: `*`, an exact name, or a `prefix.*`; it is done
 * once per event name in the batch (a batch usually holds a few names), and a new event takes its name's
 * consumers; only an event already fanned out is looked at pair by pair.
 *
 * Returns rows of four kinds: `row` (a leased delivery row, with its event), `lease` (an event leased by this
 * claim, with its columns and `seq`, its claim count in `attempt_count`, and in `pairs` the consumers of its
 * in-process pairs, space-separated: each event is read and sent once, whatever the number of its pairs),
 * `event` (an event this claim wrote: `processing` or `no_handlers`) and `lost` (an event this claim locked
 * whose live lease another relay holds: this statement's snapshot was taken before that relay's claim
 * committed).
 */
export function fanOutPendingEvents(p: {
  tenantId: string;
  /** Names of the consumers this instance hosts (tenant-scoped ones included). */
  hosted: readonly string[];
  /** Names of the hosted in-process consumers: their rows are written once, with the outcome. */
  inProcess: readonly string[];
  /** Consumers of this tenant only (not in `outbox_consumers`), all hosted here. */
  tenantConsumers: readonly { name: string; eventNames: readonly string[]; ordered?: boolean }[];
  liveWithinMs: number;
  limit: number;
  leaseToken: string;
  leaseMs: number;
}): SqlStatement {
  return {
    text: FAN_OUT_TEXT,
    prepared: FAN_OUT_PREPARED,
    values: [
      p.tenantId,
      p.hosted,
      p.liveWithinMs,
      p.limit,
      p.leaseToken,
      p.leaseMs,
      p.tenantConsumers.map((c) => c.name),
      p.tenantConsumers.map((c) => c.eventNames.join(' ')),
      p.tenantConsumers.map((c) => c.ordered === true),
      p.inProcess,
    ],
  };
}

/** Records that this instance hosts these consumers (insert or refresh), in one statement. */
export function heartbeatConsumers(
  instanceId: string,
  consumers: readonly { name: string; eventNames: readonly string[]; kind: string; ordered?: boolean }[],
): SqlStatement {
  return {
    text: `with c as (
             select name, string_to_array(patterns, ' ') as event_patterns, kind, ordered
               from unnest($2::text[], $3::text[], $4::text[], $5::boolean[]) as c(name, patterns, kind, ordered)
           ), upserted as (
             insert into ${CONSUMERS} (name, event_patterns, kind, ordered)
             select name, event_patterns, kind, ordered from c
             on conflict (name) do update
               set event_patterns = excluded.event_patterns, kind = excluded.kind, ordered = excluded.ordered, last_seen_at = now()
             returning name
           )
           insert into ${CONSUMER_INSTANCES} (consumer_name, instance_id)
           select name, $1 from upserted
           on conflict (consumer_name, instance_id) do update set last_seen_at = now()`,
    values: [
      instanceId,
      consumers.map((c) => c.name),
      consumers.map((c) => c.eventNames.join(' ')),
      consumers.map((c) => c.kind),
      consumers.map((c) => c.ordered === true),
    ],
  };
}

/** Removes this instance from the registry's host lists (at shutdown); the consumers stay registered. */
export function forgetInstance(instanceId: string): SqlStatement {
  return { text: `delete from ${CONSUMER_INSTANCES} where instance_id = $1`, values: [instanceId] };
}

/**
 * Pushes back the lease of deliveries still being sent (external consumers), so a batch of slow endpoints
 * never outlives its lease while requests are in flight. Only rows still holding our token move.
 */
export function extendLeases(ids: readonly string[], leaseToken: string, leaseMs: number): SqlStatement {
  return {
    text: `update ${DELIVERIES} set lease_expires_at = clock_timestamp() + $3 * interval '1 millisecond'
            where id = any($1::bigint[]) and lease_token = $2 and status = 'processing'`,
    values: [ids, leaseToken, leaseMs],
  };
}

/**
 * Vacuums the lease table: `skip_locked` (another instance's vacuum in progress does the job), no truncation (it
 * would need an exclusive lock that stops every relay's claims for a moment). Outside any transaction.
 */
export function vacuumLeases(): SqlStatement {
  return { text: `vacuum (skip_locked, truncate false) ${EVENT_LEASES}`, values: [] };
}

/**
 * Whether this session's role may vacuum the lease table: it has the privileges of the table's or the
 * database's owner (superusers have all), or, from PostgreSQL 17, the `MAINTAIN` privilege (in a `case`: older
 * servers reject the privilege's name).
 */
export function mayVacuumLeases(): SqlStatement {
  return {
    text: `select pg_has_role(c.relowner, 'USAGE') or pg_has_role(d.datdba, 'USAGE')
                  or case when current_setting('server_version_num')::int >= 170000
                          then has_table_privilege(c.oid, 'MAINTAIN') else false end as allowed
             from pg_class c, pg_database d
            where c.oid = '${EVENT_LEASES}'::regclass and d.datname = current_database()`,
    values: [],
  };
}

/** What happened to one claimed delivery. */
export interface DeliveryOutcome {
  /** The delivery row; null for an in-process pair claimed through its event, whose row is inserted now. */
  deliveryId: string | null;
  /** With `deliveryId` null: the event and consumer of the row to insert, its attempt number, the event's tenant and insert order. */
  pair?: { eventId: string; consumer: string; attempt: number; tenantId: string; eventSeq: string };
  /**
   * `delivered`, `failed` (retry after `retryInMs`), `dead` (no more attempts), or `deferred`: not attempted
   * after all (e.g. the endpoint's circuit is open); the attempt is given back and it is due after `retryInMs`.
   */
  status: 'delivered' | 'failed' | 'dead' | 'deferred';
  errorCode: string | null;
  error: string | null;
  /** Delay before the next attempt when `failed` or `deferred`. */
  retryInMs: number;
  /** The receiver's own id for the delivery (a webhook's run id), kept on the row. */
  externalRunId?: string | null;
}

/** The outcomes sent as arrays, one row each (see `recordOutcomes` for the parameters). */
const OUTCOME_ROWS = `select id, status, error_code, last_error, retry_ms, external_run_id, event_id, consumer, attempt,
                    coalesce(tenant_id, $15::uuid) as tenant_id, seq
               from unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::int[], $7::text[],
                           $8::uuid[], $9::text[], $10::int[], $11::uuid[], $12::bigint[])
                      as o(id, status, error_code, last_error, retry_ms, external_run_id, event_id, consumer, attempt,
                           tenant_id, seq)`;

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

/** The delivery row of an in-process pair `o`, inserted with its final status. */
const INSERT_PAIR_ROW = `insert into ${DELIVERIES} (event_id, tenant_id, consumer_name, event_seq, status, attempt_count, error_code,
                                        last_error, next_attempt_at, processed_at, external_run_id)
             select o.event_id, o.tenant_id, o.consumer, o.seq, o.status, o.attempt, o.error_code, o.last_error,
                    now() + o.retry_ms * interval '1 millisecond',
                    case when o.status = 'delivered' then now() end, o.external_run_id
               from o`;

/**
 * The general outcome statement (see `recordOutcomes`): leased delivery rows updated, pairs inserted where this
 * relay still holds their event's lease, fenced or not. Planned for each batch, never prepared: a plan that
 * updated delivery rows, made while that table was empty, would scan it whole on every batch. unnest pads
 * shorter arrays with nulls: a column that is null throughout is sent empty (see `column`), and the pairs'
 * tenant, when they share one, once ($15).
 */
const OUTCOME_TEXT = `with o as (
             ${OUTCOME_ROWS}
           ), updated as (
             update ${DELIVERIES} d
                set status = case when o.status = 'deferred' then 'pending' else o.status end,
                    attempt_count = case when o.status = 'deferred' then d.attempt_count - 1 else d.attempt_count end,
                    external_run_id = coalesce(o.external_run_id, d.external_run_id),
                    -- a success keeps the last error seen (e.g. staleLeaseRecovered): operators see how it got there
                    error_code = coalesce(o.error_code, d.error_code),
                    last_error = coalesce(o.last_error, d.last_error),
                    next_attempt_at = case when o.status in ('failed', 'deferred') then now() + o.retry_ms * interval '1 millisecond'
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
           ), locked as (
             -- the events of in-process pairs, locked in id order before their leases are deleted (see recordOutcomes)
             select e.id from ${EVENTS} e
              where e.id = any(array(select event_id from o where id is null))
              order by e.id
                for update
           ), released as (
             -- the fence for pairs: only the events whose lease this relay still holds
             delete from ${EVENT_LEASES}
              where event_id = any(array(select id from locked)) and lease_token = $6
             returning event_id
           ), inserted as (
             ${INSERT_PAIR_ROW}
              where o.id is null and o.event_id = any(array(select event_id from released))
             returning event_id, tenant_id, consumer_name, status, attempt_count, last_error
           ), r as (
             select * from updated union all select * from inserted
           ), inbox as (
             insert into ${INBOX} (event_id, consumer_name, tenant_id)
             select event_id, consumer_name, tenant_id from r where status = 'delivered'
           ), per_event as (
             ${perEvent('consumer_name', 'attempt_count')}
           ), settled as (
             update ${EVENTS} e
                set ${SETTLE_EVENT}
               from per_event p
              -- the key alone: a primary-key probe per event. With an "= any(ids)" beside it, both plans scanned the
              -- ids once per event (125,000 comparisons, 17 ms, in a batch of 500)
              where e.id = p.event_id
             returning e.id
           )
           select (select count(*) from r)::int as recorded, (select count(*) from settled)::int as events,
                  (select count(*) from released)::int as released,
                  ${OUTBOX_SCHEMA}.outbox_lease_fence($13, ((select count(*) from updated) + (select count(*) from released))::int) as owned`;

/**
 * The outcomes of a fenced batch of in-process pairs only (the common batch), prepared like the fan-out: it
 * reads only events (by primary key) and the small lease table, so a generic plan stays sound (see
 * `prepared-statements.e2e-spec.ts`). Fenced, it may take every step for granted and check once at the end:
 * the events are settled first — the update locks them, before any lease row is touched (see `recordOutcomes`)
 * — then their leases deleted, then every pair's row and inbox row inserted; if a lease was lost, the fence
 * fails the statement before those inserts run (they are not read by the final select, so they run after it).
 */
const PAIR_OUTCOME_TEXT = `with o as (
             ${OUTCOME_ROWS}
           ), r as (
             select event_id, consumer, status, attempt, last_error from o
           ), per_event as (
             ${perEvent('consumer', 'attempt')}
           ), settled as (
             update ${EVENTS} e
                set ${SETTLE_EVENT}
               from per_event p
              where e.id = p.event_id
             returning e.id
           ), released as (
             delete from ${EVENT_LEASES}
              where event_id = any(array(select id from settled)) and lease_token = $6
             returning event_id
           ), inserted as (
             ${INSERT_PAIR_ROW}
           ), inbox as (
             insert into ${INBOX} (event_id, consumer_name, tenant_id)
             select event_id, consumer, tenant_id from o where status = 'delivered'
           )
           select (select count(*) from o)::int as recorded, (select count(*) from settled)::int as events,
                  -- the fence returns the count it checked: the leases released
                  ${OUTBOX_SCHEMA}.outbox_lease_fence($13, (select count(*) from released)::int) as released`;

/**
 * Records a batch's outcomes in one statement: updates the leased deliveries still owned (fenced by the lease
 * token), inserts the rows of in-process pairs claimed through their event (once, with their final status;
 * fenced by deleting the event's lease in `outbox_event_leases` — only this relay's token — so no probe per
 * pair), inserts the inbox rows of those delivered (in the handlers' transaction, so they commit with the
 * handlers' writes), and settles each event from counters. Counters, not a recount: an `update … set n = n - k`
 * re-reads the latest row under its lock, so two relays finishing different consumers of one event never both
 * miss each other's commit.
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
  outcomes: readonly DeliveryOutcome[],
  leaseToken: string,
  { fenced = false }: { fenced?: boolean } = {},
): SqlStatement {
  const rowIds: string[] = [];
  const pairEvents = new Set<string>();
  const tenants = new Set<string>();
  for (const o of outcomes) {
    if (o.deliveryId !== null) rowIds.push(o.deliveryId);
    else {
      pairEvents.add(o.pair!.eventId);
      tenants.add(o.pair!.tenantId);
    }
  }
  const rows = rowIds.length;
  // what the fence expects recorded (0: no fence): each leased row updated, each pair event's lease released
  const expected = fenced ? rows + pairEvents.size : 0;
  const [tenant] = tenants;
  // the prepared statement takes every lease for granted until its fence: only for a fenced batch of pairs
  const pairsOnly = fenced && rows === 0;
  return {
    text: pairsOnly ? PAIR_OUTCOME_TEXT : OUTCOME_TEXT,
    prepared: pairsOnly ? PAIR_OUTCOME_PREPARED : undefined,
    values: [
      column(outcomes, (o) => o.deliveryId),
      outcomes.map((o) => o.status),
      column(outcomes, (o) => o.errorCode),
      column(outcomes, (o) => o.error),
      outcomes.map((o) => Math.round(o.retryInMs)),
      leaseToken,
      column(outcomes, (o) => o.externalRunId ?? null),
      column(outcomes, (o) => o.pair?.eventId ?? null),
      column(outcomes, (o) => o.pair?.consumer ?? null),
      column(outcomes, (o) => o.pair?.attempt ?? null),
      tenants.size === 1 ? [] : column(outcomes, (o) => o.pair?.tenantId ?? null),
      column(outcomes, (o) => o.pair?.eventSeq ?? null),
      expected,
      rowIds,
      tenants.size === 1 ? tenant : null,
    ],
  };
}

/**
 * One value per outcome, or no values at all when every one is null: `unnest` pads a shorter array with nulls,
 * so the statement reads the same, and a batch of successes does not send hundreds of `NULL`s per column.
 */
function column<T>(
  outcomes: readonly DeliveryOutcome[],
  value: (o: DeliveryOutcome) => T | null,
): (T | null)[] {
  const values = outcomes.map(value);
  return values.every((v) => v === null) ? [] : values;
}

/**
 * The statements the relay runs prepared (`relay.preparedStatements`): the fan-out, on every claim, and the
 * outcome of a batch of in-process pairs. A connection prepares them all at once (see `OutboxStore`), so where
 * a claim's `execute` ran, the outcome's can too — behind a pooler that hands each transaction a server
 * connection of its own, the claim and the batch transaction begun in the same round trip share one. Their
 * names carry a hash of all their texts: a change to any one renames them all, so two versions of the library
 * on one server never mistake each other's statements.
 */
const PREPARED_HASH = createHash('sha1')
  .update(FAN_OUT_TEXT)
  .update(PAIR_OUTCOME_TEXT)
  .digest('hex')
  .slice(0, 12);

const FAN_OUT_PREPARED: PreparedForm = {
  name: `outbox_fan_out_${PREPARED_HASH}`,
  types: ['uuid', 'text[]', 'int', 'int', 'uuid', 'int', 'text[]', 'text[]', 'boolean[]', 'text[]'],
};

const PAIR_OUTCOME_PREPARED: PreparedForm = {
  name: `outbox_outcome_${PREPARED_HASH}`,
  // $1 … $15 as in `recordOutcomes` ($14, the delivery ids, goes unused: pairs have none — so the text runs
  // prepared, with these types, or inlined, never as a parameterised query, whose $14 would have no type)
  types: [
    'bigint[]',
    'text[]',
    'text[]',
    'text[]',
    'int[]',
    'uuid',
    'text[]',
    'uuid[]',
    'text[]',
    'int[]',
    'uuid[]',
    'bigint[]',
    'int',
    'bigint[]',
    'uuid',
  ],
};

export const PREPARED_STATEMENTS: readonly { text: string; prepared: PreparedForm }[] = [
  { text: FAN_OUT_TEXT, prepared: FAN_OUT_PREPARED },
  { text: PAIR_OUTCOME_TEXT, prepared: PAIR_OUTCOME_PREPARED },
];

/** The SQLSTATE of `outbox_lease_fence`: a fenced batch lost a lease and was rolled back. */
export const LEASE_LOST_SQLSTATE = 'OB001';
