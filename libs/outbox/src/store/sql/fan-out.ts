import { DATABASE_NOW, FAN_OUT_NAME, SERVER_START, textPerNames, type SqlStatement } from './statement';
import { NIL_UUID } from '../../model/outbox.constants';
import type { OutboxNames } from '../../model/table-names';
import { eventPatternMatch } from './event-pattern';
import { pausedConsumers } from './consumer-pauses';
import { consumerLimited } from './consumer-limits';

/**
 * For a pending event `e` of a claim's scan: no live lease of it. A probe of the lease table's primary key per
 * event the scan passes by (a claim's batch and the events leased ahead of it), not a read of the tenant's live
 * leases into a hash: that read walks the index entries of every lease deleted within the lease's length, which a
 * held snapshot keeps vacuum from removing (docs/adr/1206-claims-that-start-past-the-settled.md). `offset 0`
 * keeps it a subplan run per event: as an anti join, the planner, thinking the scan returns a row or two, chose to
 * read the whole lease table once per event (320,000 buffers, 0.37 s per claim 45 s into a hold). The lease's
 * expiry is compared outside the subquery, so the key is the only index that can serve it: the claims plan without
 * sequential scans (`RelayPolicy.leaseProbesByKey`), and with `lease_expires_at > now()` inside, a plan made over
 * an empty lease table walked the expiry index's range of live leases — and of every lease deleted within the
 * lease's length — per event (docs/adr/0804-a-lean-claim-for-in-process-consumers.md, addendum on the lease probe).
 */
export function notLeased(n: OutboxNames): string {
  return `coalesce((select l.lease_expires_at from ${n.eventLeases} l where l.event_id = e.id offset 0), '-infinity') <= now()`;
}

/**
 * What a claim read about its tenant's pending events at or above `from` (the parameter of its position), in its
 * snapshot: a JSON object for `ClaimPositions` (store/claim-positions.ts). Each bound is one end of the pending
 * index over the tenant's range from the position: a few entries when the position is close. `floor`: the claim's
 * parameter of its floor (`ClaimFloor`), which prunes the ranges below it in the partitioned layout. `recovered`:
 * true when the claim looked at every expired event lease of the tenant since its bound (`leasesSince`), so the
 * next claim's recovery may start at `now` (the transaction's, ISO 8601 in UTC, whatever the session's TimeZone).
 */
export function positionReading(n: OutboxNames, from: string, floor?: string, recovered = 'false'): string {
  const bound = floor === undefined ? '' : ` and p.id >= ${floor}::uuid`;
  const pending = `from ${n.events} p where p.tenant_id = $1::uuid and p.status = 'pending' and p.seq >= ${from}::bigint${bound}`;
  // -1: no positions (the policy's switch off), nothing read
  return `case when ${from}::bigint >= 0 then json_build_object(
      'first', (select p.seq::text ${pending} order by p.seq limit 1),
      'last', (select p.seq::text ${pending} order by p.seq desc limit 1),
      'xmin', pg_snapshot_xmin(pg_current_snapshot())::text,
      'xmax', pg_snapshot_xmax(pg_current_snapshot())::text,
      'server', ${SERVER_START},
      'now', ${DATABASE_NOW},
      'recovered', ${recovered}) end`;
}

/**
 * The lower end of a claim's look at expired event leases (fanned-out events whose relay died): `leasesSince` (its
 * parameter, a timestamptz or null) a second early — a lease that expired just before the last look may have
 * been committed after that look's snapshot — or every one when null. A bound of the range of the lease table's
 * `(tenant_id, lease_expires_at)` index, so a held snapshot's dead entries below it are not walked
 * (docs/adr/1206-claims-that-start-past-the-settled.md, addendum on the fan-out's recovery).
 */
export function expiredSince(leasesSince: string): string {
  return `coalesce(${leasesSince}::timestamptz - interval '1 second', '-infinity'::timestamptz)`;
}

/**
 * The rows of the events a claim took (`ids`: a subquery of their ids), read once, a primary-key probe each, for a
 * materialized CTE the claim's answer joins to its leases and delivery rows in memory. Read inside that join
 * instead (\`join events e on e.id = l.event_id where e.id = any(…)\`), the planner looped over the leases and
 * probed every id at each turn: quadratic in the claim's size, 965 buffers for 20 events and 122,903 for 250
 * (docs/adr/1206-claims-that-start-past-the-settled.md, addendum on claims that grow under a hold).
 */
export function takenEvents(n: OutboxNames, ids: string, floor: string): string {
  return `select e.id, e.tenant_id, e.event_name, e.payload, e.aggregate_type, e.aggregate_id, e.occurred_at,
           e.correlation_id, e.schema_version, e.seq, e.traceparent, e.status
      from ${n.events} e where e.id = any(array(${ids})) and e.id >= ${floor}::uuid`;
}

// The columns the fan-out needs come straight from the locked rows (the latest versions: `for update` re-checks
// the conditions on them), not from a second read of the same rows. The scan starts at the tenant's claim
// position ($11, see ClaimPositions; 0: from the start), at or above its floor ($12, see ClaimFloor: in the
// partitioned layout, the ranges below it are pruned when the executor starts; the nil id: none). Every event the
// statement touches is at or above the floor, and each read or update of the histories says so: a lookup by
// `= any(array(…))` alone prunes nothing (PostgreSQL prunes by an array only when it is a constant).
export const fanOutText = textPerNames((n: OutboxNames): string => {
  return `with fresh as (
    select e.id, e.seq, e.event_name, e.aggregate_type, e.aggregate_id, false as started from ${n.events} e
     where e.tenant_id = $1::uuid and e.status = 'pending' and e.seq >= $11::bigint and e.id >= $12::uuid
       and ${notLeased(n)}
     order by e.seq
     limit $4::int
       for update of e skip locked
  ), stale as (
    -- processing events whose in-process pairs were claimed by a relay that never recorded them: leases expired
    -- since the tenant's last complete look ($14, see ClaimPositions.leasesSince), not every lease deleted since a
    -- held snapshot began (their index entries stay below it)
    select e.id, e.seq, e.event_name, e.aggregate_type, e.aggregate_id, true as started
      from ${n.eventLeases} l join ${n.events} e on e.id = l.event_id
     where l.tenant_id = $1::uuid and l.lease_expires_at <= now() and l.lease_expires_at > ${expiredSince('$14')}
       and e.status = 'processing' and e.id >= $12::uuid
     order by l.lease_expires_at
     limit $4::int
       for update of e skip locked
  ), ev as (
    select * from fresh union all select * from stale
  ), written as (
    -- the delivery rows the relay that claimed a stale event did write (read by the events' ids: an index probe
    -- in any plan, where a subquery per pair may become a hash of the whole table in a generic one)
    select x.event_id, x.consumer_name from ${n.deliveries} x where x.event_id = any(array(select id from stale)) and x.event_id >= $12::uuid
  ), routes as materialized (
    -- the consumers of each event name in the batch: patterns are matched once per name, not once per event
    -- (materialized: inlined, the planner joins events to consumers first and matches each pair)
    -- (a paused consumer's pairs are neither: their rows wait as pending, for the due claim once it resumes)
    -- (nor a limited consumer's: the due claim takes its rows, up to its room)
    select n.event_name, c.name, c.ordered,
           c.name = any($10::text[]) and not c.ordered and not c.limited and c.name <> all(${pausedConsumers(n, '$1::uuid')}) as deferred,
           c.name = any($2::text[]) and not c.ordered and not c.limited and c.name <> all(${pausedConsumers(n, '$1::uuid')}) as leased
      from (select distinct event_name from ev) n join (
             select name, event_patterns, ordered, ${consumerLimited('r')} as limited
               from ${n.consumers} r where last_seen_at > now() - $3::int * interval '1 millisecond'
             union all
             select name, string_to_array(patterns, ' '), ordered, limited
               from unnest($7::text[], $8::text[], $9::boolean[], $13::boolean[]) as t(name, patterns, ordered, limited)
           ) c
        on exists (select 1 from unnest(c.event_patterns) as p(pattern)
                    where ${eventPatternMatch('p.pattern', 'n.event_name')})
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
    insert into ${n.eventLeases} as l (event_id, tenant_id, lease_token, lease_expires_at)
    select id, $1::uuid, $5::uuid, clock_timestamp() + $6::int * interval '1 millisecond' from counted where has_deferred order by seq
    on conflict (event_id) do update
      set lease_token = excluded.lease_token, lease_expires_at = excluded.lease_expires_at,
          claim_count = l.claim_count + 1
    where l.lease_expires_at <= now()
    returning l.event_id, l.claim_count
  ), owned as (
    -- events with in-process pairs are this claim's only if its lease won: a hashed subplan of the leased ids,
    -- not a search of an array per event (quadratic in the claim's size)
    select id, started, n, all_deferred from counted
     where not has_deferred or id in (select event_id from leased)
  ), released as (
    -- an expired lease on an event with nothing left to claim through it: within the range \`stale\` looked at
    -- (the same tenant and expiry bounds), so that no plan walks more of the lease table's expiry index than
    -- \`stale\` did (unbounded, the planner chose that index with \`lease_expires_at <= now()\` alone: every lease
    -- deleted since a held snapshot began, 34,399 buffers in a soak's hold, for any tenant and none to release:
    -- docs/adr/1206-claims-that-start-past-the-settled.md, addendum on the warm-up)
    delete from ${n.eventLeases}
     where event_id = any(array(select id from counted where started and not has_deferred))
       and tenant_id = $1::uuid and lease_expires_at <= now() and lease_expires_at > ${expiredSince('$14')}
  ), inserted as (
    insert into ${n.deliveries} (event_id, tenant_id, consumer_name, event_seq, aggregate_key, status, attempt_count, lease_token, lease_expires_at)
    select event_id, $1::uuid, name, seq, aggregate_key,
           case when leased then 'processing' else 'pending' end,
           case when leased then 1 else 0 end,
           case when leased then $5::uuid end,
           case when leased then clock_timestamp() + $6::int * interval '1 millisecond' end
      from matched
     -- the pairs of owned events: a key of a JSON object of their ids (a binary search per pair), not a search of
     -- an array; as \`event_id in (select id from owned)\`, a semi join, a generic plan looped over \`owned\` per pair
     where not deferred and (select jsonb_object_agg(id::text, true) from owned) ? event_id::text
    on conflict (event_id, consumer_name) do nothing
    returning id, event_id, consumer_name, attempt_count, status
  ), marked as (
    update ${n.events} e
       set status = case when o.n > 0 then 'processing' else 'no_handlers' end,
           deliveries_open = o.n,
           published_at = case when o.n > 0 then null else now() end,
           updated_at = now()
      from owned o
     where e.id = any(array(select id from owned where not started and not all_deferred)) and e.id >= $12::uuid
       and e.id = o.id
    returning e.id
  ), taken as materialized (
    ${takenEvents(n, 'select event_id from inserted union all select event_id from leased', '$12')}
  )
  -- One row, a column per kind of result. Each delivery row and each leased event (once, whatever the number
  -- of its pairs) comes with its event, read once from the table by primary key in \`taken\` (this statement's
  -- snapshot: the columns used are ones it does not change; see takenEvents); the = any() over the ids keeps the
  -- read a primary-key probe in a generic plan too, which cannot know how few rows a CTE returns (it would hash
  -- the whole table).
  select
    (select coalesce(json_agg(r order by r.event_seq::bigint, r.consumer_name), '[]')
       from (select d.id::text as delivery_id, d.consumer_name, e.id as event_id, e.tenant_id, e.event_name,
                    e.payload, e.aggregate_type, e.aggregate_id, e.occurred_at, e.correlation_id,
                    e.schema_version, e.seq::text as event_seq, e.traceparent
               from inserted d join taken e on e.id = d.event_id
              where d.status = 'processing') r
    ) as deliveries,
    -- a leased event, once, with the consumers of its in-process pairs (one entry per event, not one per
    -- pair): a new event's are its name's; only an event already fanned out (\`processing\` in this
    -- statement's snapshot) looks up its own. Subqueries, not joins: a join of two CTEs can become a loop over
    -- one for each row of the other (quadratic in the batch, in a generic plan made over a large history)
    (select coalesce(json_agg(r order by r.event_seq::bigint), '[]')
       from (select l.claim_count, e.id as event_id, e.tenant_id, e.event_name, e.payload, e.aggregate_type,
                    e.aggregate_id, e.occurred_at, e.correlation_id, e.schema_version, e.seq::text as event_seq,
                    e.traceparent,
                    case when e.status = 'pending'
                         then (select rs.pairs from route_sets rs where rs.event_name = e.event_name)
                         else (select c.pairs from counted c where c.id = e.id) end as pairs
               from leased l join taken e on e.id = l.event_id) r
    ) as leases,
    array(select id from marked) as written,
    -- every event of \`counted\` with in-process pairs is in the lease insert once, and \`leased\` returns those it
    -- leased: the difference, not a search of the leased ids per event (quadratic in the claim's size)
    (select count(*)::int from counted where has_deferred) - (select count(*)::int from leased) as lost,
    ${positionReading(n, '$11', '$12', '(select count(*) from stale) < $4::int')} as position`;
});

/** What a claim of new events takes: the fan-out's, and the lean claim's (`claimNewEvents`). */
export interface NewEventsClaim {
  tenantId: string;
  /** Names of the hosted in-process consumers: their rows are written once, with the outcome. */
  inProcess: readonly string[];
  liveWithinMs: number;
  limit: number;
  leaseToken: string;
  leaseMs: number;
  /**
   * The tenant's claim position (a `seq`, decimal): the scan starts there, and the claim reads what moves it on.
   * '0': from the start; default '-1': from the start, nothing read (no positions).
   */
  from?: string;
  /**
   * The claim's floor (`ClaimFloor`): the lowest event id it looks at, so that the partitioned layout's older
   * ranges are pruned. Default: the nil id, no bound.
   */
  floor?: string;
  /**
   * Since when it looks for expired event leases of fanned-out events (`ClaimPositions.leasesSince`: the database's
   * time at the tenant's last complete look, ISO 8601). Default null: all of them.
   */
  leasesSince?: string | null;
}

/**
 * Fans new events of this tenant out to their consumers: claims pending events (`skip locked`, in insert
 * order) and inserts one delivery row per matching consumer of the persisted registry (`outbox_consumers`,
 * every consumer some instance reported within `liveWithinMs`), so that a consumer hosted only by other
 * instances (a rolling deploy, dedicated workers) still gets its rows (docs/adr/0608-persisted-consumer-registry.md).
 * Rows of consumers this instance hosts are leased to it at once (attempt 1), except ordered ones, which the
 * due-claim that follows in the same transaction takes when nothing earlier in their aggregate is open;
 * tenant-scoped consumers (run-time webhook subscriptions) come as arrays (a limited one's rows wait `pending`, as
 * any limited consumer's); the others wait as `pending` for an
 * instance that hosts them.
 *
 * Hosted in-process consumers (not ordered) get no row here: their pairs are claimed through the event, with a
 * lease in `outbox_event_leases` (unlogged: docs/adr/0601-event-leases-in-an-unlogged-table.md), and their rows
 * are written once, with the outcome. An event whose consumers are all of that kind is not written at all by the
 * claim: it stays `pending` (with a live lease, the next claims pass it by) until the outcome statement settles it. Other events become `processing` with their
 * count of open deliveries, or `no_handlers` when nothing listens. An expired event lease means the relay that
 * held it never recorded its outcomes: the event is claimed again (`claim_count` + 1) for the pairs whose row
 * was never written. The lease upsert is the arbiter between relays: a claim whose lease insert loses leaves the
 * event alone. Patterns are matched by `eventPatternMatch` (the rule of `matchesEventPattern`) once per event
 * name in the batch (a batch usually holds a few names), and a new event takes its name's consumers; only an
 * event already fanned out is looked at pair by pair.
 *
 * Returns one row (`FanOutResult`): `deliveries` (the delivery rows leased, each with its event), `leases` (the
 * events leased by this claim, with their claim count and, in `pairs`, the consumers of their in-process
 * pairs, space-separated: each event is read and sent once, whatever the number of its pairs), `written` (the
 * events this claim wrote: `processing` or `no_handlers`) and `lost` (how many events this claim locked whose
 * live lease another relay holds: this statement's snapshot was taken before that relay's claim committed).
 */
export function fanOutPendingEvents(
  n: OutboxNames,
  p: NewEventsClaim & {
    /** Names of the consumers this instance hosts (tenant-scoped ones included). */
    hosted: readonly string[];
    /** Consumers of this tenant only (not in `outbox_consumers`), all hosted here. */
    tenantConsumers: readonly {
      name: string;
      eventNames: readonly string[];
      ordered?: boolean;
      /** With a concurrency or rate limit: its rows wait `pending` for the due claim, as a limited consumer's. */
      limits?: unknown;
    }[];
  },
): SqlStatement {
  return {
    text: fanOutText(n),
    prepared: FAN_OUT_NAME,
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
      p.from ?? '-1',
      p.floor ?? NIL_UUID,
      p.tenantConsumers.map((c) => c.limits !== undefined),
      p.leasesSince ?? null,
    ],
  };
}
