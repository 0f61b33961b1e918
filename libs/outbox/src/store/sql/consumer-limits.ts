import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';
import { NIL_UUID } from '../../model/outbox.constants';

/** For a row `c` of `outbox_consumers`: the consumer has a concurrency or rate limit. */
export function consumerLimited(c: string): string {
  return `(${c}.concurrency is not null or ${c}.tenant_concurrency is not null or ${c}.rate_limit is not null)`;
}

/**
 * The limits of a tenant's own consumers (run-time webhook subscriptions), as the claims take them: one array per
 * column, in the consumers' order. Their limits count within the tenant — a cap on the consumer's deliveries in
 * flight there, a rate of the tenant's (the consumer's name is the tenant's own: another tenant's consumer of the
 * same name is another consumer) — so they go where the registry's per-tenant limits go.
 */
export interface TenantConsumerLimits {
  names: readonly string[];
  caps: readonly (number | null)[];
  rateLimits: readonly (number | null)[];
  rateIntervalsMs: readonly (number | null)[];
}

/** No tenant consumer with a limit. */
export const NO_TENANT_LIMITS: TenantConsumerLimits = {
  names: [],
  caps: [],
  rateLimits: [],
  rateIntervalsMs: [],
};

/** The four arrays of `TenantConsumerLimits`, as statement values. */
export function tenantLimitValues(t: TenantConsumerLimits): unknown[] {
  return [t.names, t.caps, t.rateLimits, t.rateIntervalsMs];
}

/**
 * The limits of the consumers named by the parameter `names`: the persisted registry's row of each
 * (`outbox_consumers`), and the tenant's own consumers' limits from the four parameters from `first` on
 * (`TenantConsumerLimits`) as rows of the same shape — a cap per tenant and a rate per tenant. One source for
 * the turn and the room, so a tenant consumer's limits are counted by the same log, turn and in-flight count as
 * any consumer's.
 */
function limitRows(n: OutboxNames, names: string, first: number): string {
  const [name, cap, limit, interval] = [0, 1, 2, 3].map((i) => `$${first + i}`);
  return `(select r.name, r.concurrency, r.tenant_concurrency, r.rate_limit, r.rate_interval_ms, r.rate_per_tenant, r.rate_key
             from ${n.consumers} r where r.name = any(${names}::text[])
           union all
           select t.name, null::int, t.cap, t.rate_limit, t.rate_interval_ms, true, null::text
             from unnest(${name}::text[], ${cap}::int[], ${limit}::int[], ${interval}::int[])
                    as t(name, cap, rate_limit, rate_interval_ms))`;
}

/**
 * The transaction-local setting where `lockConsumerLimits` leaves the names of the consumers whose turn it took
 * (a text array): the due claim that follows claims only those limited consumers' rows.
 */
const TURNS_HELD = 'outbox.turns';

/**
 * For a row `c` of `limitRows`: a limited consumer whose turn this transaction does not hold (`TURNS_HELD`). The
 * due claim passes it by: it had no due work when the turn was taken, and work that became visible since then
 * waits for the next claim (claiming it without the turn would count the room on an old snapshot).
 */
function turnNotHeld(c: string): string {
  return `(${consumerLimited(c)}
           and ${c}.name <> all(coalesce(nullif(current_setting('${TURNS_HELD}', true), ''), '{}')::text[]))`;
}

/**
 * For a limited consumer `c`: it has a row in tenant `$1` the due claim could take — pending or failed and due,
 * or processing under an expired lease (a paused pair's count too: it takes its turn for nothing, as before).
 * One walk of `outbox_deliveries_open_idx` (tenant, consumer, status, id) from the consumer's first such row,
 * whatever the tenant's other consumers' rows: the three statuses are the range `'failed'` to `'processing'`
 * (`dead` and `delivered` sort before), and the `order by status` makes the planner take that index — with
 * `exists` or an unordered `limit`, it reckoned a consumer's rows half the table (its estimate for a name it
 * does not know) and scanned the table once per consumer (73,000 buffers for 201 consumers over 20,000 rows,
 * against 2 per consumer). It walks the consumer's rows that are not due (a retry's backoff, a live lease)
 * before a due one.
 */
function hasDueWork(n: OutboxNames, c: string): string {
  return `(select true from ${n.deliveries} d
            where d.tenant_id = $1 and d.consumer_name = ${c}.name and d.status between 'failed' and 'processing'
              and (d.status <> 'processing' and d.next_attempt_at <= now()
                   or d.status = 'processing' and d.lease_expires_at <= now())
            order by d.status
            limit 1)`;
}

/**
 * Takes the turn of each limited consumer in `consumers` (those the registry gives a limit, and the tenant's own
 * limited consumers, `tenantLimits`) that has due work in tenant `tenantId` (`hasDueWork`, as this statement's
 * snapshot sees it, the claim's fan-out included): locks its row of `outbox_consumer_limits` — the nil tenant's
 * for its limits over every tenant, the tenant's own for its limits per tenant or per key — creating the row the
 * first time (`on conflict do update` locks the row whichever wins the insert), and leaves the names of the
 * consumers whose turn it took in `TURNS_HELD`. A consumer with nothing due is not touched: a claim's cost
 * grows with the limited consumers that have work, not with every limited one (a tenant with 200 limited
 * subscriptions and work for one rewrote 200 rows per claim, and every claim of the tenant waited for the others).
 * Sent in the claim's transaction just before the due claim
 * (`claimDueDeliveries` with `limited`): that statement starts after the lock is granted, so its snapshot holds
 * every claim of the consumer committed before, and the room it computes is exact; it claims for the consumers
 * in `TURNS_HELD` only. A statement of its own for
 * that reason: in one statement, a `for update` that waited sees the locked row's newest version but reads every
 * other table as of before the wait. Rows are locked in (consumer, tenant) order, the nil tenant first, so two
 * claims never wait on each other in a cycle. See docs/adr/1104-consumer-limits-in-the-database.md.
 */
export function lockConsumerLimits(
  n: OutboxNames,
  p: { tenantId: string; consumers: readonly string[]; tenantLimits?: TenantConsumerLimits },
): SqlStatement {
  return {
    text: `with turns as (
             insert into ${n.consumerLimits} as l (consumer_name, tenant_id)
             select distinct c.name, k.tenant_id
               from ${limitRows(n, '$2', 4)} c
               cross join lateral (values
                 ($3::uuid, c.concurrency is not null
                            or (c.rate_limit is not null and not c.rate_per_tenant and c.rate_key is null)),
                 ($1::uuid, c.tenant_concurrency is not null
                            or (c.rate_limit is not null and (c.rate_per_tenant or c.rate_key is not null)))
               ) as k(tenant_id, applies)
              where k.applies and ${hasDueWork(n, 'c')}
              order by c.name, k.tenant_id
             on conflict (consumer_name, tenant_id) do update set started_at = l.started_at
             returning l.consumer_name
           )
           select set_config('${TURNS_HELD}', coalesce(array_agg(distinct consumer_name)::text, '{}'), true) as turns
             from turns`,
    values: [p.tenantId, p.consumers, NIL_UUID, ...tenantLimitValues(p.tenantLimits ?? NO_TENANT_LIMITS)],
  };
}

/**
 * The due claim's part for limited consumers (`claimDueDeliveries` with `limited`, after `lockConsumerLimits`):
 * `lim`, each one's room in this tenant now — for the consumers whose turn `lockConsumerLimits` took
 * (`TURNS_HELD`) and those without a limit —, its limits as the registry has them, less its deliveries under a
 * live lease (`outbox_consumer_in_flight`, over every tenant or in this one) and less the starts its rate log
 * holds for the last interval —, then its stale and due rows up to that room (stale first: a recovery is a start
 * too), and the rate log written: the claim's starts appended, those older than the interval dropped (a
 * consumer limited per key has no rate room here: `keyedClaimParts` claims its rows). A
 * consumer the registry gives no limit (an instance reported it without) has the room of the claim. The log's
 * times are `clock_timestamp()`, read once the turn is held: `now()` is the transaction's start, which predates
 * the wait for the turn: a claim that waited would date its starts early, and they would leave the window early.
 * Parameters: those of the due claim, `$7` the limited consumers, `$8` the nil tenant, `$9` to `$12` the tenant's
 * own consumers' limits (`TenantConsumerLimits`).
 */
export function limitedClaimParts(
  n: OutboxNames,
  due: { notPaused: (d: string) => string; ordered: string },
): string {
  const startsWithin = (tenant: string): string => `(
    select coalesce(sum(u.n), 0)::int
      from ${n.consumerLimits} l, unnest(l.started_at, l.started_n) as u(at, n)
     where l.consumer_name = c.name and l.tenant_id = ${tenant}
       and u.at > clock_timestamp() - c.rate_interval_ms * interval '1 millisecond')`;
  return `lim as materialized (
             select c.name, c.rate_limit, c.rate_interval_ms, c.rate_key,
                    case when c.rate_per_tenant then $1::uuid else $8::uuid end as rate_tenant,
                    greatest(0, least($3::int,
                      coalesce(c.concurrency - ${n.consumerInFlight}(c.name, null), $3::int),
                      coalesce(c.tenant_concurrency - ${n.consumerInFlight}(c.name, $1::uuid), $3::int),
                      coalesce(case when c.rate_key is null
                                    then c.rate_limit - ${startsWithin('case when c.rate_per_tenant then $1::uuid else $8::uuid end')} end,
                               $3::int)
                    )) as room
               from ${limitRows(n, '$7', 9)} c
              where not ${turnNotHeld('c')}
           ), limited_stale as (
             select s.id, lim.name from lim, lateral (
               select s.id from ${n.deliveries} s
                where s.tenant_id = $1 and s.status = 'processing' and s.lease_expires_at <= now()
                  and s.consumer_name = lim.name and ${due.notPaused('s')}
                order by s.lease_expires_at
                limit lim.room
                  for update of s skip locked) s
              where lim.rate_key is null
           ), limited_retry as (
             select d.id, lim.name from lim, lateral (
               select d.id from ${n.deliveries} d
                where d.tenant_id = $1 and d.status in ('pending', 'failed') and d.next_attempt_at <= now()
                  and d.consumer_name = lim.name and ${due.notPaused('d')}
                  and (d.aggregate_key is null or not exists (${due.ordered}))
                order by d.next_attempt_at
                limit lim.room - (select count(*) from limited_stale x where x.name = lim.name)
                  for update of d skip locked) d
              where lim.rate_key is null
           ), limited_started as (
             update ${n.consumerLimits} l
                set (started_at, started_n) = (
                      select array_agg(u.at order by u.at) || clock_timestamp(), array_agg(u.n order by u.at) || t.n
                        from unnest(l.started_at, l.started_n) as u(at, n)
                       where u.at > clock_timestamp() - lim.rate_interval_ms * interval '1 millisecond')
               from lim join (
                      select name, count(*)::int as n
                        from (select name from limited_stale union all select name from limited_retry) x
                       group by name) t on t.name = lim.name
              where lim.rate_limit is not null and lim.rate_key is null and l.consumer_name = lim.name and l.tenant_id = lim.rate_tenant
           )`;
}
