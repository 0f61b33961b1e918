import type { SqlStatement } from './statement';
import type { OutboxNames } from '../../model/table-names';
import { eventPatternMatch } from './event-pattern';
import { reopenedMark } from './claim-floor';

/** What a backfill covers; `from`/`to` bound a chunk by event id (UUIDv7: time order). */
export interface BackfillScope {
  /** The consumer, as the persisted registry (`outbox_consumers`) names it: its patterns and order are read there. */
  consumer: string;
  /** One tenant, or null: every tenant the connection sees. */
  tenantId: string | null;
  /** Events inserted at or after this time, or null: every retained event. */
  since: Date | null;
  /** Only events matching one of these names or patterns, or null: every event the consumer listens to. */
  eventNames: readonly string[] | null;
}

/**
 * The events of a backfill's scope, as `e`, whose id is in ($5, $6] ($5 null: from the first): the consumer's
 * patterns (from the registry, `c`) and the filters. Parameters $1–$6 are the same in every statement below.
 */
function inScope(n: OutboxNames): string {
  return `${n.events} e cross join (select event_patterns, ordered from ${n.consumers} where name = $1::text) c
     where ($5::uuid is null or e.id > $5::uuid) and e.id <= $6::uuid
       and ($2::uuid is null or e.tenant_id = $2::uuid)
       and ($3::timestamptz is null or e.created_at >= $3::timestamptz)
       and exists (select 1 from unnest(c.event_patterns) as p(pattern) where ${eventPatternMatch('p.pattern', 'e.event_name')})
       and ($4::text[] is null
            or exists (select 1 from unnest($4::text[]) as f(pattern) where ${eventPatternMatch('f.pattern', 'e.event_name')}))`;
}

function scopeValues(s: BackfillScope, from: string | null, to: string | null): unknown[] {
  return [s.consumer, s.tenantId, s.since, s.eventNames, from, to];
}

/** The consumer in the persisted registry: whether it is ordered, and whether an instance reported it lately. */
export function backfillConsumer(n: OutboxNames, consumer: string, liveWithinMs: number): SqlStatement {
  return {
    text: `select ordered, last_seen_at > now() - $2::int * interval '1 millisecond' as live
             from ${n.consumers} where name = $1::text`,
    values: [consumer, liveWithinMs],
  };
}

/**
 * Records a backfill (nothing if its id is recorded already: running it again resumes it) with its horizon, the
 * largest event id now: later events fan out to the consumer, registered by then. The largest id of any tenant
 * (a walk down the primary key) is as good a bound as the tenant's own and needs no scan. Returns the row.
 */
export function startBackfill(n: OutboxNames, id: string, s: BackfillScope): SqlStatement {
  return {
    text: `with started as (
             insert into ${n.backfills} (id, consumer_name, tenant_id, since, event_names, horizon_id)
             values ($1::uuid, $2::text, $3::uuid, $4::timestamptz, $5::text[],
                     (select id from ${n.events} order by id desc limit 1))
             on conflict (id) do nothing
             returning *
           )
           select * from started union all select * from ${n.backfills} where id = $1::uuid and not exists (select 1 from started)`,
    values: [id, s.consumer, s.tenantId, s.since, s.eventNames],
  };
}

/** A backfill's row (see `startBackfill`). */
export interface BackfillRow {
  id: string;
  consumer_name: string;
  tenant_id: string | null;
  since: Date | null;
  event_names: string[] | null;
  horizon_id: string | null;
  position_id: string | null;
  created_rows: string;
  chunks: number;
  started_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

/** Locks a backfill's row for this chunk's transaction: two runners of one backfill take turns. */
export function lockBackfill(n: OutboxNames, id: string): SqlStatement {
  return { text: `select * from ${n.backfills} where id = $1::uuid for update`, values: [id] };
}

/**
 * A chunk's first statement: locks the next `limit` events of the scope after `from`, in id order, and returns
 * how many and the last. Waiting for the relays' claims that hold some of them (no `skip locked`) is the point:
 * the chunk's second statement, in a snapshot taken after those claims committed, sees the rows and leases they
 * wrote; and while the chunk holds the locks no claim fans these events out (claims skip locked events).
 */
export function lockBackfillChunk(
  n: OutboxNames,
  s: BackfillScope,
  from: string | null,
  horizon: string,
  limit: number,
): SqlStatement {
  return {
    text: `with locked as (
             select e.id from ${inScope(n)}
              order by e.id
              limit $7::int
                for update of e
           )
           select (select count(*) from locked)::int as n, (select id from locked order by id desc limit 1) as last`,
    values: [...scopeValues(s, from, horizon), limit],
  };
}

/**
 * A chunk's second statement: the consumer's missing delivery rows for the events locked by the first (`from`,
 * `to`], pending and due now, and the backfill's position, in one statement (so a chunk commits both or
 * neither). `on conflict do nothing`: a pair the fan-out wrote is never doubled. Each row opens its event again
 * (`deliveries_open` + 1; a settled event is `processing` until the row closes). Events still `pending` are the
 * fan-out's (the consumer is registered, so their claim gives it a row) and get none here, as do delayed ones
 * still `scheduled` (the fan-out's once they are due); one with a live lease
 * (a lean claim, whose consumers were read when it was claimed) stops the chunk before it: its position stays
 * there, and the next chunk looks again once the relay recorded it. `last`: the chunk reached the horizon.
 * `reopened`: the rows may lie below the claims' open floor, which starts from there at its next reading
 * (`reopenedMark`).
 */
export function fillBackfillChunk(
  n: OutboxNames,
  p: BackfillScope & { id: string; from: string | null; to: string; last: boolean },
): SqlStatement {
  return {
    text: `with ev as (
             select e.id, e.tenant_id, e.seq, e.status, e.aggregate_type, e.aggregate_id, c.ordered from ${inScope(n)}
           ), waiting as (
             select ev.id from ev
              where ev.status = 'pending'
                and ev.id in (select l.event_id from ${n.eventLeases} l where l.lease_expires_at > now())
              order by ev.id limit 1
           ), todo as (
             select * from ev
              where ev.status not in ('pending', 'scheduled') and (not exists (select 1 from waiting) or ev.id < (select id from waiting))
           ), inserted as (
             insert into ${n.deliveries} (event_id, tenant_id, consumer_name, event_seq, aggregate_key, status, attempt_count, next_attempt_at)
             select t.id, t.tenant_id, $1::text, t.seq,
                    -- the key of the fan-out (migration OutboxAggregateKey1764450000000)
                    case when t.ordered and t.aggregate_id is not null
                         then json_build_array(t.aggregate_type, t.aggregate_id)::text end,
                    'pending', 0, now()
               from todo t order by t.seq
             on conflict (event_id, consumer_name) do nothing
             returning event_id
           ), opened as (
             update ${n.events} e
                set deliveries_open = e.deliveries_open + 1,
                    status = case when e.status in ('published', 'no_handlers') then 'processing' else e.status end,
                    published_at = case when e.status in ('published', 'no_handlers') then null else e.published_at end,
                    updated_at = now()
              where e.id = any(array(select event_id from inserted))
             returning e.id
           ), ${reopenedMark(n, 'inserted')}, reached as (
             select case when not exists (select 1 from waiting) then $6::uuid
                         else coalesce((select id from ev where id < (select id from waiting) order by id desc limit 1), $5::uuid)
                    end as id
           )
           update ${n.backfills} b
              set position_id = (select id from reached),
                  created_rows = b.created_rows + (select count(*) from opened),
                  chunks = b.chunks + 1,
                  updated_at = now(),
                  finished_at = case when $8::boolean and not exists (select 1 from waiting) then now() end
            where b.id = $7::uuid
           returning (select count(*) from opened)::int as created, exists (select 1 from waiting) as waiting,
                     b.finished_at is not null as finished`,
    values: [...scopeValues(p, p.from, p.to), p.id, p.last],
  };
}

/**
 * A dry run: how many delivery rows a backfill would create now — events of its scope up to the largest id,
 * fanned out already (not `pending` nor `scheduled`), with no row for the consumer.
 */
export function countBackfill(n: OutboxNames, s: BackfillScope): SqlStatement {
  return {
    text: `select count(*)::int as events from ${inScope(n)}
              and e.status not in ('pending', 'scheduled')
              and not exists (select 1 from ${n.deliveries} d where d.event_id = e.id and d.consumer_name = $1::text)`,
    values: scopeValues(s, null, 'ffffffff-ffff-ffff-ffff-ffffffffffff'),
  };
}

/** Backfills of a consumer (all consumers when null), newest first. */
export function listBackfills(n: OutboxNames, consumer: string | null, limit: number): SqlStatement {
  return {
    text: `select * from ${n.backfills} where ($1::text is null or consumer_name = $1::text)
            order by started_at desc limit $2::int`,
    values: [consumer, limit],
  };
}
