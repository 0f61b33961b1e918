import { messages } from '../../errors/outbox.messages';
import { deliveryNotPaused } from './consumer-pauses';
import {
  limitedClaimParts,
  NO_TENANT_LIMITS,
  tenantLimitValues,
  type TenantConsumerLimits,
} from './consumer-limits';
import { keyedClaimParts } from './consumer-key-limits';
import { NIL_UUID } from '../../model/outbox.constants';
import { CLAIM_DUE_NAME, type SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';

/** Columns of a claimed delivery joined with its event. */
const CLAIMED_COLUMNS = `d.id as delivery_id, d.consumer_name, d.attempt_count, d.snoozes, e.id as event_id, e.tenant_id, e.event_name,
  e.payload, e.aggregate_type, e.aggregate_id, e.occurred_at, e.correlation_id, e.schema_version, e.traceparent`;

/**
 * For an ordered delivery `d`: an earlier delivery of its aggregate to the same consumer that is not delivered
 * yet (pending, leased, failed or dead), or an earlier event of the aggregate not fanned out yet, or a backfill
 * of the consumer not finished (its history must come first: docs/adr/1011-backfill-for-late-consumers.md). Any
 * one makes `d` wait. (Within one aggregate, apps serialise their writes, so insert order is commit order.)
 *
 * In the partitioned layout (a `floor` other than the nil id), each probe of the histories starts where the
 * tenant's open work starts, read once per claim in the claim's own snapshot, so it passes over nothing that
 * snapshot holds: the earlier deliveries at the lowest event id among the tenant's deliveries with an aggregate key
 * that are not delivered (`outbox_deliveries_ordered_open_idx`, an index of that layout only); the earlier events at
 * the floor when no event of the tenant with an aggregate is pending below it, else at the nil id. The executor
 * prunes the ranges below. Without the bounds each candidate probed every range: 50,767 buffers for a claim of 100
 * at 100 hourly ranges, about 3,500 with them (docs/adr/1207-partitioned-history.md, addendum "The ordered consumers'
 * check starts at the oldest open delivery"). Each bound reads the claim's tenant (`$1`, `d`'s), so it is read
 * once, not once per candidate, and only when an ordered candidate is checked. Today's tables (the nil id: the
 * claims are never bounded there, and the index is not built) are probed as before. The tenant's claims without
 * the floor (once a minute) check without bounds.
 */
function earlierInAggregate(n: OutboxNames, floor: string): string {
  return `
  select 1 from ${n.deliveries} p
   where p.tenant_id = d.tenant_id and p.consumer_name = d.consumer_name and p.aggregate_key = d.aggregate_key
     and p.event_seq < d.event_seq and p.status <> 'delivered'
     and p.event_id >= (select case when ${floor} = '${NIL_UUID}'::uuid then ${floor}
                               else (select o.event_id from ${n.deliveries} o
                                      where o.tenant_id = $1 and o.aggregate_key is not null and o.status <> 'delivered'
                                      order by o.event_id limit 1) end)
  union all
  select 1 from ${n.events} pe join ${n.events} me on me.id = d.event_id
   where pe.tenant_id = d.tenant_id and pe.status = 'pending' and pe.aggregate_id = me.aggregate_id
     and pe.aggregate_type is not distinct from me.aggregate_type and pe.seq < me.seq
     and pe.id >= (select case when ${floor} = '${NIL_UUID}'::uuid then ${floor}
                               when exists (select 1 from ${n.events} x
                                             where x.tenant_id = $1 and x.status = 'pending'
                                               and x.aggregate_id is not null and x.id < ${floor})
                               then '${NIL_UUID}'::uuid else ${floor} end)
  union all
  select 1 from ${n.backfills} b
   where b.consumer_name = d.consumer_name and b.finished_at is null
     and (b.tenant_id is null or b.tenant_id = d.tenant_id)`;
}

/**
 * Claims deliveries of this tenant that are due for retry, and those whose lease expired (their relay died or
 * stalled), for the consumers this instance hosts.
 *
 * Locking: `for update skip locked` lets several relays claim side by side without waiting on each other; the
 * claim commits at once with a lease (deadline + random token) instead of holding row locks while handlers run,
 * so a crashed relay's work is taken over after `lease_expires_at`, and only the holder of the current token
 * can record an outcome (fencing). The attempt is counted here, at claim time, so a crash still counts and a
 * poison event cannot crash-loop the relay forever. Deliveries of a paused (consumer, tenant) pair are passed
 * by, due or stale: they wait, uncharged, until it resumes. A limited consumer's (`limited`) are claimed apart,
 * up to its room (`limitedClaimParts`, docs/adr/1104-consumer-limits-in-the-database.md). Two index scans (one
 * per partial index) rather than one `or`, so each stays an ordered, limited scan over due rows only. The scans,
 * the update and the read of the events stop at the claim's floor (`floor`, the last parameter): in the partitioned
 * layout the executor prunes the older ranges when it starts, the update by delivery id included (without it, the
 * update probes every range's key). The limited consumers' part is not bounded; the ordered consumers' check
 * starts at the tenant's oldest open ordered work (`earlierInAggregate`).
 * Without limited consumers it is a named statement run on its generic plan (`prepared`): planned anew for each
 * claim, the unbounded check made PostgreSQL expand every partition of the partitioned layout at every claim
 * (44–75 ms of planning at 100 ranges: docs/adr/1207-partitioned-history.md, addendum "The due claim"). The events
 * are read by `= any(array(…))` in a CTE of their own: a generic plan joining them to `claimed` hashed every
 * event above the floor.
 */
export function claimDueDeliveries(
  n: OutboxNames,
  p: {
    tenantId: string;
    consumers: readonly string[];
    limit: number;
    leaseToken: string;
    leaseMs: number;
    /**
     * The hosted consumers with a concurrency or rate limit (among `consumers`): claimed up to their room only,
     * after `lockConsumerLimits` in the same transaction. None: the statement has no part for them.
     */
    limited?: readonly string[];
    /** The limits of the tenant's own limited consumers (among `limited`). Default: none. */
    tenantLimits?: TenantConsumerLimits;
    /**
     * The lowest event id to look at (`ClaimFloor`): in the partitioned layout, the ranges below it are pruned
     * when the executor starts. Default: the nil id, no bound.
     */
    floor?: string;
  },
): SqlStatement {
  const limited = p.limited ?? [];
  // the floor's parameter comes last, after the limited consumers' six
  const floor = limited.length === 0 ? '$7::uuid' : '$13::uuid';
  // the unlimited consumers' scans as before, over those only; none to scan when every hosted consumer is limited
  // (the scan would walk the limited consumers' waiting rows for nothing)
  const unlimited = limited.length === 0 ? p.consumers : p.consumers.filter((c) => !limited.includes(c));
  const none = unlimited.length === 0 ? 'false and ' : '';
  const rules = { notPaused: (d: string) => deliveryNotPaused(n, d), ordered: earlierInAggregate(n, floor) };
  const parts = limited.length === 0 ? '' : `${limitedClaimParts(n, rules)}, ${keyedClaimParts(n, rules)}, `;
  // the claimed rows' sources, and whether each is a recovery (its lease had expired): a literal, or a column
  const sources: [string, string][] = [
    ['retry', 'false'],
    ['stale', 'true'],
  ];
  if (limited.length > 0)
    sources.push(['limited_retry', 'false'], ['limited_stale', 'true'], ['keyed', 'recovered']);
  const due = sources
    .map(([from, stale], i) => `select id, ${stale}${i === 0 ? ' as recovered' : ''} from ${from}`)
    .join(' union all ');
  const ids = sources.map(([from]) => `select id from ${from}`).join(' union all ');
  return {
    text: `with ${parts}retry as (
             select d.id from ${n.deliveries} d
              where ${none}d.tenant_id = $1 and d.status in ('pending', 'failed') and d.next_attempt_at <= now()
                and d.event_id >= ${floor}
                and d.consumer_name = any($2::text[])
                and ${deliveryNotPaused(n, 'd')}
                and (d.aggregate_key is null or not exists (${earlierInAggregate(n, floor)}))
              order by d.next_attempt_at
              limit $3
                for update of d skip locked
           ), stale as (
             select s.id from ${n.deliveries} s
              where ${none}s.tenant_id = $1 and s.status = 'processing' and s.lease_expires_at <= now()
                and s.event_id >= ${floor}
                and s.consumer_name = any($2::text[])
                and ${deliveryNotPaused(n, 's')}
              order by s.lease_expires_at
              limit $3
                for update of s skip locked
           ), claimed as (
             update ${n.deliveries} d
                set status = 'processing',
                    attempt_count = d.attempt_count + 1,
                    lease_token = $4,
                    lease_expires_at = clock_timestamp() + $5 * interval '1 millisecond',
                    error_code = case when d.status = 'processing' then 'staleLeaseRecovered' else d.error_code end,
                    last_error = case when d.status = 'processing'
                                      then 'attempt ' || d.attempt_count || $6::text
                                      else d.last_error end,
                    updated_at = now()
               from (${due}) due
              where d.id = any(array(${ids})) and d.id = due.id and d.event_id >= ${floor}
             returning d.*, due.recovered
           ), events as materialized (
             select e.* from ${n.events} e where e.id = any(array(select event_id from claimed)) and e.id >= ${floor}
           )
           select ${CLAIMED_COLUMNS}, d.recovered
             from claimed d join events e on e.id = d.event_id
            order by e.seq, d.consumer_name`,
    // one text without limited consumers (`none` only when every hosted consumer is limited)
    prepared: limited.length === 0 && p.consumers.length > 0 ? CLAIM_DUE_NAME : undefined,
    values: [
      p.tenantId,
      unlimited,
      p.limit,
      p.leaseToken,
      p.leaseMs,
      messages.staleAttemptSuffix(),
      ...(limited.length === 0
        ? []
        : [limited, NIL_UUID, ...tenantLimitValues(p.tenantLimits ?? NO_TENANT_LIMITS)]),
      p.floor ?? NIL_UUID,
    ],
  };
}

/** The due claim's text when it is named (no limited consumer), for the hash of the named statements' texts. */
export function claimDueText(n: OutboxNames): string {
  return claimDueDeliveries(n, {
    tenantId: NIL_UUID,
    consumers: ['-'],
    limit: 0,
    leaseToken: NIL_UUID,
    leaseMs: 0,
  }).text;
}
