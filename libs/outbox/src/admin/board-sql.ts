/**
 * The statements of the operator's board and its audit log, as `{ text, values }`. The board refreshes every few
 * seconds, so none of them reads a tenant's history: open work is read through partial indexes that hold only
 * rows not delivered (counts capped at `cap`), settled rows are the planner's estimate, and throughput comes from
 * the per-minute `outbox_activity` table. Plans measured with 1M events: docs/adr/0402-board-reads-bounded-queries.md.
 * Every statement names its tenant in `where` as well as running under the row-level security context.
 */
import type { SqlStatement } from '../store/sql/statement';
import type { OutboxNames } from '../model/table-names';

/**
 * Sets the tenant for row-level security, and JIT compilation off, both transaction-local. The overview's
 * estimated cost (the estimate function is planned as an expensive call) passes `jit_above_cost`: measured on
 * PostgreSQL 15 with 1M events, JIT took most of its time (docs/adr/0402-board-reads-bounded-queries.md).
 */
export function setBoardContext(tenantSetting: string, tenantId: string): SqlStatement {
  return {
    text: `select set_config($1, $2, true), set_config('jit', 'off', true)`,
    values: [tenantSetting, tenantId],
  };
}

/** Delivery statuses the open index holds, in the order the board shows them. */
export const OPEN_DELIVERY_STATUSES = ['pending', 'processing', 'failed', 'dead'] as const;

/**
 * The consumer names in a tenant's open (not delivered) rows: a loose index scan over
 * `outbox_deliveries_open_idx`, one probe per name, whatever the number of rows.
 */
function openNames(n: OutboxNames): string {
  return `open_names(name) as (
    (select consumer_name from ${n.deliveries} where tenant_id = $1 and status <> 'delivered' order by consumer_name limit 1)
    union all
    select (select d.consumer_name from ${n.deliveries} d
             where d.tenant_id = $1 and d.status <> 'delivered' and d.consumer_name > o.name
             order by d.consumer_name limit 1)
      from open_names o where o.name is not null
  )`;
}

/** A count of the rows `from_where` selects, stopping at `cap` (the caller shows `cap` as "cap or more"). */
function capped(fromWhere: string, cap: string): string {
  return `(select count(*)::int from (select 1 from ${fromWhere} limit ${cap}) c)`;
}

/**
 * The board's overview of one tenant: events per open status (capped) and settled status (estimated), each
 * consumer's open deliveries per status (capped), delivered (estimated) and oldest waiting delivery, the oldest
 * pending event (or delayed event due but not promoted), the consumers that no live instance hosts, and deliveries
 * per bucket of `bucketMinutes` over the last `minutes` (from the per-minute `outbox_activity`, kept 24 hours).
 * `consumers` are the names the app knows (registry and tenant-scoped); names found only in open rows are added.
 */
export function boardOverview(
  n: OutboxNames,
  p: {
    tenantId: string;
    cap: number;
    consumers: readonly string[];
    /** The chart's span, a whole number of buckets. */
    minutes: number;
    orphanAfterMs: number;
    /** Minutes per bar of the chart. */
    bucketMinutes: number;
  },
): SqlStatement {
  const d = (status: string) =>
    `${n.deliveries} d where d.tenant_id = $1 and d.consumer_name = n.name and d.status = '${status}' and d.status <> 'delivered'`;
  return {
    text: `with recursive ${openNames(n)}, names as (
             select name from open_names where name is not null
             union
             select unnest($3::text[])
           ), per_consumer as (
             select n.name,
                    ${capped(d('pending'), '$2')} as pending,
                    ${capped(d('processing'), '$2')} as processing,
                    ${capped(d('failed'), '$2')} as failed,
                    ${capped(d('dead'), '$2')} as dead,
                    ${n.rowEstimate}($1, 'delivered', n.name) as delivered_estimate,
                    least((select d.created_at from ${d('pending')} order by d.id limit 1),
                          (select d.created_at from ${d('failed')} order by d.id limit 1)) as oldest_waiting_at,
                    n.name in (select name from open_names) and not exists (
                      select 1 from ${n.consumers} c where c.name = n.name and c.last_seen_at > now() - $5 * interval '1 millisecond'
                    ) and not n.name = any($3::text[]) as orphaned
               from names n
           ), minutes as (
             -- buckets of $6 minutes aligned on the epoch, the last one holding now, $4 minutes in all
             select to_timestamp(floor(extract(epoch from a.minute) / ($6::int * 60)) * ($6::int * 60)) as minute,
                    sum(a.delivered)::int as delivered, sum(a.failed)::int as failed, sum(a.dead)::int as dead
               from ${n.activity} a
              where a.tenant_id = $1
                and a.minute >= to_timestamp(floor(extract(epoch from now()) / ($6::int * 60)) * ($6::int * 60)) - ($4::int - $6::int) * interval '1 minute'
              group by 1
           )
           select json_build_object(
                    'pending', ${capped(`${n.events} e where e.tenant_id = $1 and e.status = 'pending'`, '$2')},
                    'processing', ${capped(`${n.events} e where e.tenant_id = $1 and e.status = 'processing'`, '$2')},
                    'failed', ${capped(`${n.events} e where e.tenant_id = $1 and e.status = 'failed'`, '$2')},
                    -- walks the scheduled events of every tenant (event_outbox_scheduled_idx), up to the cap of this one's
                    'scheduled', ${capped(`${n.events} e where e.tenant_id = $1 and e.status = 'scheduled'`, '$2')},
                    'published', ${n.rowEstimate}($1, 'published'),
                    'no_handlers', ${n.rowEstimate}($1, 'no_handlers')
                  ) as events,
                  coalesce((select json_agg(json_build_object(
                              'name', name, 'pending', pending, 'processing', processing, 'failed', failed, 'dead', dead,
                              'deliveredEstimate', delivered_estimate, 'oldestWaitingAt', oldest_waiting_at, 'orphaned', orphaned)
                            order by name) from per_consumer), '[]'::json) as consumers,
                  least((select greatest(e.created_at, e.deliver_at) from ${n.events} e where e.tenant_id = $1 and e.status = 'pending' order by e.seq limit 1),
                        -- a delayed event due but not promoted (no relay ran since) waits from its deliver_at too
                        (select min(e.deliver_at) from ${n.events} e
                          where e.tenant_id = $1 and e.status = 'scheduled' and e.deliver_at <= now()))
                    as oldest_pending_event_at,
                  now() as now,
                  coalesce((select json_agg(json_build_object('minute', minute, 'delivered', delivered, 'failed', failed, 'dead', dead)
                                            order by minute) from minutes), '[]'::json) as activity`,
    values: [p.tenantId, p.cap, p.consumers, p.minutes, p.orphanAfterMs, p.bucketMinutes],
  };
}

/** Filter and page of `boardTroubles`: newest first, before a delivery id. */
export interface TroublesQuery {
  tenantId: string;
  consumer: string | null;
  eventName: string | null;
  /** Only deliveries with a smaller id (the next page). */
  beforeId: string | null;
  limit: number;
}

/**
 * A tenant's failed (retrying) and dead deliveries, newest first, with their event's name and error: per
 * consumer and status, a backward walk of `outbox_deliveries_open_idx` that stops at `limit`, then merged. With
 * an event name, each walk skips other events' rows (bounded by that consumer's failures, never its history).
 */
export function boardTroubles(n: OutboxNames, p: TroublesQuery): SqlStatement {
  const branch = (
    status: string,
  ) => `(select d.id, d.event_id, d.consumer_name, d.status, d.attempt_count, d.error_code,
                        d.last_error, d.next_attempt_at, d.updated_at, e.event_name
                   from ${n.deliveries} d join ${n.events} e on e.id = d.event_id
                  where d.tenant_id = $1 and d.consumer_name = n.name and d.status = '${status}' and d.status <> 'delivered'
                    and ($3::bigint is null or d.id < $3) and ($4::text is null or e.event_name = $4)
                  order by d.id desc limit $2)`;
  return {
    text: `with recursive ${openNames(n)}
           select t.id::text, t.event_id, t.consumer_name, t.status, t.attempt_count, t.error_code, t.last_error,
                  t.next_attempt_at, t.updated_at, t.event_name
             from open_names n
             cross join lateral (${branch('failed')} union all ${branch('dead')}) t
            where n.name is not null and ($5::text is null or n.name = $5)
            order by t.id desc
            limit $2`,
    values: [p.tenantId, p.limit, p.beforeId, p.eventName, p.consumer],
  };
}

/**
 * Aggregates an ordered consumer cannot move past because a delivery is dead, oldest first (at most `limit`):
 * the dead rows with an aggregate key, through `outbox_deliveries_ordering_idx`.
 */
export function boardBlockedAggregates(n: OutboxNames, tenantId: string, limit: number): SqlStatement {
  return {
    text: `select d.consumer_name as consumer, e.aggregate_type as "aggregateType", e.aggregate_id as "aggregateId",
                  d.event_id as "deadEventId"
             from ${n.deliveries} d join ${n.events} e on e.id = d.event_id
            where d.tenant_id = $1 and d.status = 'dead' and d.aggregate_key is not null and d.status <> 'delivered'
              and not exists (select 1 from ${n.deliveries} p
                               where p.tenant_id = $1 and p.consumer_name = d.consumer_name and p.aggregate_key = d.aggregate_key
                                 and p.status = 'dead' and p.status <> 'delivered' and p.event_seq < d.event_seq)
            order by d.consumer_name, d.event_seq
            limit $2`,
    values: [tenantId, limit],
  };
}

/** One row of the audit log, written in the transaction of the action it records. */
export function insertAudit(
  n: OutboxNames,
  p: {
    tenantId: string;
    actor: string;
    action: string;
    target: Record<string, unknown>;
    rows: number;
  },
): SqlStatement {
  return {
    text: `insert into ${n.audit} (tenant_id, actor, action, target, rows_affected) values ($1, $2, $3, $4::jsonb, $5)`,
    values: [p.tenantId, p.actor, p.action, JSON.stringify(p.target), p.rows],
  };
}

/** A page of a tenant's audit log, newest first (through `outbox_audit_tenant_idx`, backwards). */
export function auditLog(
  n: OutboxNames,
  tenantId: string,
  limit: number,
  beforeId: string | null,
): SqlStatement {
  return {
    text: `select id::text, actor, action, target, rows_affected, created_at from ${n.audit}
            where tenant_id = $1 and ($3::bigint is null or id < $3)
            order by id desc limit $2`,
    values: [tenantId, limit, beforeId],
  };
}

/** One row per tenant, minute and consumer of the activity summed since the last flush. */
export interface ActivityRow {
  tenantId: string;
  minute: Date;
  consumer: string;
  delivered: number;
  failed: number;
  dead: number;
  deferred: number;
}

/** Adds a flush's counts to `outbox_activity`, every tenant in one statement (see `outbox_record_activity`). */
export function recordActivity(n: OutboxNames, rows: readonly ActivityRow[]): SqlStatement {
  return {
    text: `select ${n.recordActivity}($1::uuid[], $2::timestamptz[], $3::text[], $4::int[], $5::int[], $6::int[], $7::int[])`,
    values: [
      rows.map((r) => r.tenantId),
      rows.map((r) => r.minute),
      rows.map((r) => r.consumer),
      rows.map((r) => r.delivered),
      rows.map((r) => r.failed),
      rows.map((r) => r.dead),
      rows.map((r) => r.deferred),
    ],
  };
}
