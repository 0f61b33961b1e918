import { CLAIM_NEW_NAME, textPerNames, type SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';
import type { RelayPolicy } from '../../options/relay-policy';
import { NIL_UUID } from '../../model/outbox.constants';
import { eventPatternMatch } from './event-pattern';
import { pausedConsumers } from './consumer-pauses';
import { consumerLimited } from './consumer-limits';
import {
  expiredSince,
  fanOutPendingEvents,
  notLeased,
  positionReading,
  type NewEventsClaim,
} from './fan-out';

/**
 * The fan-out's text for the common case only (see `claimNewEvents`); its columns are the fan-out's, plus
 * `fallback`.
 */
export const claimNewText = textPerNames((n: OutboxNames): string => {
  // the answer's columns come straight from the locked rows (the latest versions: `for update` re-checks the
  // conditions on them), as the fan-out's do, not from a second read of them by key (`takenEvents`, about 4
  // buffers per event; docs/adr/0804-a-lean-claim-for-in-process-consumers.md, addendum on the re-read)
  return `with fresh as (
    select e.id, e.seq, e.event_name, e.tenant_id, e.payload, e.aggregate_type, e.aggregate_id, e.occurred_at,
           e.correlation_id, e.schema_version, e.traceparent from ${n.events} e
     where e.tenant_id = $1::uuid and e.status = 'pending' and e.seq >= $7::bigint and e.id >= $8::uuid
       and ${notLeased(n)}
     order by e.seq
     limit $2::int
       for update of e skip locked
  ), route_sets as materialized (
    -- per event name: its consumers in the persisted registry, and whether each is one of this instance's
    -- in-process consumers without order (the only kind whose pairs this claim may take through the lease), and
    -- not paused nor limited (a paused or limited consumer's pairs get a pending row from the fan-out: 'routes')
    select n.event_name, string_agg(c.name, ' ' order by c.name) as pairs,
           bool_and(c.name = any($6::text[]) and not c.ordered and not ${consumerLimited('c')}
                    and c.name <> all(${pausedConsumers(n, '$1::uuid')})) as local
      from (select distinct event_name from fresh) n
      join ${n.consumers} c
        on c.last_seen_at > now() - $5::int * interval '1 millisecond'
       and exists (select 1 from unnest(c.event_patterns) as p(pattern)
                    where ${eventPatternMatch('p.pattern', 'n.event_name')})
     group by n.event_name
  ), go as materialized (
    -- every event's consumers are local, and no fanned-out event waits for recovery: else the full fan-out
    select case
             when exists (select 1 from fresh f join route_sets r on r.event_name = f.event_name
                           where not r.local) then 'routes'
             when exists (select 1 from fresh f where not exists (
                            select 1 from route_sets r where r.event_name = f.event_name)) then 'unrouted'
             -- from the tenant's processing events (none while every claim is lean), each lease probed by its key:
             -- not from the expired entries of the lease table's index, every lease deleted since a held snapshot
             -- began among them (offset 0 keeps the probe a subplan: docs/adr/1206-claims-that-start-past-the-settled.md);
             -- leases expired since the tenant's last complete look ($9), as the fan-out's recovery looks at
             when exists (select 1 from ${n.events} e
                           where e.tenant_id = $1::uuid and e.status = 'processing' and e.id >= $8::uuid
                             and exists (select 1 from ${n.eventLeases} l
                                          where l.event_id = e.id and l.lease_expires_at <= now()
                                            and l.lease_expires_at > ${expiredSince('$9')} offset 0))
               then 'stale'
           end as fallback
  ), leased as (
    insert into ${n.eventLeases} as l (event_id, tenant_id, lease_token, lease_expires_at)
    select id, $1::uuid, $3::uuid, clock_timestamp() + $4::int * interval '1 millisecond'
      from fresh where (select fallback from go) is null order by seq
    on conflict (event_id) do update
      set lease_token = excluded.lease_token, lease_expires_at = excluded.lease_expires_at,
          claim_count = l.claim_count + 1
    where l.lease_expires_at <= now()
    returning l.event_id, l.claim_count
  ), counts as materialized (
    -- each leased event's claim count by its id, for the answer's events of \`fresh\` (a binary search of the
    -- object's keys per event): a join of the two CTEs, each estimated at a row, was a nested loop scanning all of
    -- \`fresh\` per leased event (62,250 rows filtered for 250 events)
    select jsonb_object_agg(event_id::text, claim_count) as of from leased
  )
  select
    '[]'::json as deliveries,
    (select coalesce(json_agg(r order by r.event_seq::bigint), '[]')
       from (select ((select of from counts) ->> e.id::text)::int as claim_count, e.id as event_id, e.tenant_id,
                    e.event_name, e.payload, e.aggregate_type, e.aggregate_id, e.occurred_at, e.correlation_id,
                    e.schema_version, e.seq::text as event_seq, e.traceparent,
                    (select rs.pairs from route_sets rs where rs.event_name = e.event_name) as pairs
               from fresh e where (select of from counts) ? e.id::text) r
    ) as leases,
    '{}'::uuid[] as written,
    -- every event of \`fresh\` is in the lease insert once (none with a fallback), and \`leased\` returns those it
    -- leased: the difference, not a search of the leased ids per event (quadratic in the claim's size)
    (select count(*)::int from fresh where (select fallback from go) is null)
      - (select count(*)::int from leased) as lost,
    (select fallback from go) as fallback,
    ${positionReading(n, '$7', '$8', '(select fallback from go) is null')} as position`;
});

/**
 * Claims new events of this tenant when every consumer of theirs in the persisted registry is one of this
 * instance's in-process consumers without order, as the fan-out does (`fanOutPendingEvents`) in that case: the
 * pending events (`skip locked`, in insert order, passing by those under a live lease), each leased in
 * `outbox_event_leases` with the consumers of its in-process pairs — no delivery row and no event row written —
 * in a statement of a third of the fan-out's cost. An event with any other consumer (another instance's, a
 * webhook, a broker, an ordered, paused or limited one: `'routes'`), or none (`'unrouted'`), or a fanned-out event of the tenant whose
 * lease expired (`'stale'`), makes it claim nothing and say why in `fallback`: the relay then runs the fan-out. See
 * docs/adr/0804-a-lean-claim-for-in-process-consumers.md.
 */
export function claimNewEvents(n: OutboxNames, p: NewEventsClaim): SqlStatement {
  return {
    text: claimNewText(n),
    prepared: CLAIM_NEW_NAME,
    values: [
      p.tenantId,
      p.limit,
      p.leaseToken,
      p.leaseMs,
      p.liveWithinMs,
      p.inProcess,
      p.from ?? '-1',
      p.floor ?? NIL_UUID,
      p.leasesSince ?? null,
    ],
  };
}

/** How a claim takes new events: not at all (null), through the lean claim, or through the fan-out. */
export type NewEventsChoice = 'lean' | 'fanOut' | null;

/**
 * The statement of a claim that takes new events as `p.newEvents` says (the tenant round's choice, see
 * `TenantRound`): the lean claim's (`claimNewEvents`), the fan-out's (`fanOutPendingEvents`), or none.
 */
export function newEventsStatement(
  n: OutboxNames,
  p: Parameters<typeof fanOutPendingEvents>[1] & { newEvents: NewEventsChoice },
): SqlStatement | null {
  if (p.newEvents === null) return null;
  // `p` as it is: each reads its own fields (no copy per claim)
  return p.newEvents === 'lean' ? claimNewEvents(n, p) : fanOutPendingEvents(n, p);
}

/**
 * Claims of new events that take nothing, which parse and plan a connection's named statements of them (see
 * `refreshPrepared` in the store): the fan-out's, and the lean claim's where the policy has it (a claim takes one
 * or the other, see `TenantRound`). Their parameters prune every scan, whatever the table holds: a limit of 0 (the
 * scans of pending and expired events never start), expired leases looked for since `infinity` (an empty range of
 * the lease table's expiry index) and no position read. The nil tenant is a real one in a single-tenant app: a
 * limit of 1 locked its first pending event under a live claim's nose, and under a held snapshot the look at
 * every expired lease walked every one deleted since the hold began
 * (docs/adr/1206-claims-that-start-past-the-settled.md, addendum on the warm-up).
 */
export function newEventsWarmUp(n: OutboxNames, policy: Pick<RelayPolicy, 'leanClaim'>): SqlStatement[] {
  const p = {
    tenantId: NIL_UUID,
    inProcess: [],
    liveWithinMs: 1,
    limit: 0,
    leaseToken: NIL_UUID,
    leaseMs: 1,
    from: '-1',
    leasesSince: 'infinity',
  };
  const fanOut = fanOutPendingEvents(n, { ...p, hosted: [], tenantConsumers: [] });
  return policy.leanClaim ? [fanOut, claimNewEvents(n, p)] : [fanOut];
}
